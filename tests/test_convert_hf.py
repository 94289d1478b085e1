"""Hugging Face GPT-2 and BERT weights in the library's models: same outputs, same greedy tokens."""

import logging

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformer_core.convert import bert_from_hf, gpt2_from_hf  # noqa: E402
from transformer_core.generation import generate  # noqa: E402
from transformer_core.models import DecoderOnlyLM, EncoderOnlyModel  # noqa: E402

# Tiny random configs trigger harmless "token id outside the vocabulary" notices.
logging.getLogger("transformers").setLevel(logging.ERROR)


def _gpt2_config(**overrides):
    fields = dict(n_layer=2, n_head=2, n_embd=32, vocab_size=101, n_positions=64)
    fields.update(overrides)
    return transformers.GPT2Config(**fields)


def _bert_config(**overrides):
    fields = dict(hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64,
                  vocab_size=99, max_position_embeddings=40, type_vocab_size=2)
    fields.update(overrides)
    return transformers.BertConfig(**fields)


@pytest.fixture(scope="module")
def gpt2_pair():
    torch.manual_seed(0)
    hf_model = transformers.GPT2LMHeadModel(_gpt2_config()).eval()
    return hf_model, gpt2_from_hf(hf_model)


# ------------------------------------------------------------------------------ GPT-2

def test_gpt2_logits_match(gpt2_pair):
    hf_model, ours = gpt2_pair
    assert isinstance(ours, DecoderOnlyLM)
    config = ours.config
    sizes = (config.d_model, config.n_heads, config.n_layers, config.vocab_size, config.max_len)
    assert sizes == (32, 2, 2, 101, 64)
    switches = (config.activation, config.norm_first, config.position, config.tie_weights)
    assert switches == ("gelu_tanh", True, "learned", True)
    assert ours.lm_head.weight is ours.embeddings.token.weight
    idx = torch.randint(0, 101, (2, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf_model(idx).logits
        logits, _ = ours(idx)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=0)


def test_gpt2_conv1d_weights_are_transposed(gpt2_pair):
    hf_model, ours = gpt2_pair
    c_attn = hf_model.transformer.h[1].attn.c_attn.weight                     # (d, 3d), Conv1D
    w_q, w_k, w_v = ours.layers[1].self_attn.qkv_proj.weight.split(32)      # (d, d) each
    for i, weight in enumerate((w_q, w_k, w_v)):
        assert torch.equal(weight, c_attn[:, i * 32:(i + 1) * 32].T)
    assert torch.equal(ours.layers[1].ffn.up_proj.weight, hf_model.transformer.h[1].mlp.c_fc.weight.T)


def test_gpt2_greedy_generation_matches_hugging_face(gpt2_pair):
    hf_model, ours = gpt2_pair
    prompt = torch.randint(0, 101, (2, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = hf_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12,
                                     do_sample=False, pad_token_id=0)
    for use_cache in (True, False):
        assert torch.equal(generate(ours, prompt, 12, use_cache=use_cache), expected), (
            f"greedy tokens differ from Hugging Face's with use_cache={use_cache}")


def test_gpt2_model_without_head_uses_the_tied_embedding():
    torch.manual_seed(3)
    hf_model = transformers.GPT2Model(_gpt2_config()).eval()
    ours = gpt2_from_hf(hf_model)
    idx = torch.randint(0, 101, (1, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = hf_model(idx).last_hidden_state @ hf_model.wte.weight.T
        logits, _ = ours(idx)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=0)


def test_gpt2_untied_head_and_training_mode_are_kept():
    torch.manual_seed(4)
    hf_model = transformers.GPT2LMHeadModel(_gpt2_config(tie_word_embeddings=False))
    with torch.no_grad():
        hf_model.lm_head.weight.normal_()
    hf_model.train()
    ours = gpt2_from_hf(hf_model)
    assert ours.training and not ours.config.tie_weights
    assert torch.equal(ours.lm_head.weight, hf_model.lm_head.weight)
    idx = torch.randint(0, 101, (1, 8))
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(idx)[0], hf_model.eval()(idx).logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("overrides, message", [
    (dict(activation_function="silu"), "activation_function"),
    (dict(scale_attn_by_inverse_layer_idx=True), "layer index"),
])
def test_gpt2_unsupported_settings_are_refused(overrides, message):
    hf_model = transformers.GPT2LMHeadModel(_gpt2_config(**overrides))
    with pytest.raises(ValueError, match=message):
        gpt2_from_hf(hf_model)


def test_converters_check_the_model_type():
    bert = transformers.BertModel(_bert_config())
    with pytest.raises(TypeError, match="'gpt2'"):
        gpt2_from_hf(bert)
    with pytest.raises(TypeError, match="'bert'"):
        bert_from_hf(torch.nn.Linear(2, 2))


# ------------------------------------------------------------------------------ BERT

def _bert_inputs():
    generator = torch.Generator().manual_seed(5)
    input_ids = torch.randint(0, 99, (3, 11), generator=generator)
    token_type_ids = torch.randint(0, 2, (3, 11), generator=generator)
    attention_mask = torch.ones(3, 11, dtype=torch.long)
    attention_mask[1, 7:] = 0                                                  # right padding
    attention_mask[2, 3:] = 0
    return input_ids, token_type_ids, attention_mask


@pytest.mark.parametrize("model_class", ["BertModel", "BertForMaskedLM"])
def test_bert_hidden_states_match_with_padding_and_segments(model_class):
    torch.manual_seed(6)
    hf_model = getattr(transformers, model_class)(_bert_config()).eval()
    ours = bert_from_hf(hf_model)
    assert isinstance(ours, EncoderOnlyModel)
    config = ours.config
    switches = (config.norm_first, config.embedding_norm, config.n_segments, config.layer_norm_eps)
    assert switches == (False, True, 2, 1e-12)
    input_ids, token_type_ids, attention_mask = _bert_inputs()
    with torch.no_grad():
        out = hf_model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                       output_hidden_states=True)
        hidden = ours(input_ids, segment_ids=token_type_ids, attention_mask=attention_mask)
    torch.testing.assert_close(hidden, out.hidden_states[-1], atol=1e-5, rtol=0)
    if model_class == "BertForMaskedLM":
        assert ours.mlm_head.vocab_proj.weight is ours.embeddings.token.weight
        with torch.no_grad():
            torch.testing.assert_close(ours.mlm_logits(hidden), out.logits, atol=1e-5, rtol=0)


def _in_float64(model):
    """The model in float64 with weights that float32 cannot hold (a float32 model cast by .double()
    has float32 values, which survive a round trip through float32)."""
    model = model.double().eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 1e-3)
    return model


def test_float64_checkpoints_keep_float64_weights_and_outputs():
    """Weights were copied into float32 parameters and cast afterwards: rounded through float32, a
    float64 model's outputs then differed by about 1e-8 instead of by float64 rounding."""
    torch.manual_seed(7)
    gpt2 = _in_float64(transformers.GPT2LMHeadModel(_gpt2_config()))
    bert = _in_float64(transformers.BertForMaskedLM(_bert_config()))
    ours_gpt2, ours_bert = gpt2_from_hf(gpt2), bert_from_hf(bert)
    assert {p.dtype for p in ours_gpt2.parameters()} == {p.dtype for p in ours_bert.parameters()} == {torch.float64}
    idx = torch.randint(0, 101, (2, 64), generator=torch.Generator().manual_seed(1))
    input_ids, token_type_ids, attention_mask = _bert_inputs()
    with torch.no_grad():
        torch.testing.assert_close(ours_gpt2(idx)[0], gpt2(idx).logits, atol=1e-12, rtol=0)
        expected = bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask).logits
        hidden = ours_bert(input_ids, segment_ids=token_type_ids, attention_mask=attention_mask)
        torch.testing.assert_close(ours_bert.mlm_logits(hidden), expected, atol=1e-12, rtol=0)


def test_bert_relative_positions_are_refused():
    hf_model = transformers.BertModel(_bert_config())
    hf_model.config.position_embedding_type = "relative_key"
    with pytest.raises(ValueError, match="position_embedding_type"):
        bert_from_hf(hf_model)

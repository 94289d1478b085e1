"""Counters against the real modules (parameters, FLOPs measured by PyTorch, cache tensors) and
against the closed forms they claim."""

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from transformer_core.attention import MultiHeadAttention
from transformer_core.cache import KVCache
from transformer_core.complexity import (attention_flops, attention_memory_bytes, attention_parameters,
                                         cnn_layer_flops, encoder_decoder_attention_flops, ffn_parameters,
                                         flops_per_token, kv_cache_bytes, mfu, nanogpt_flops_per_token,
                                         parameter_counts,
                                         rnn_layer_flops, self_attention_layer_flops, training_flops,
                                         transformer_base_config)
from transformer_core.layers import FeedForward, LayerNorm
from transformer_core.models import (DecoderOnlyLM, EncoderDecoderModel, EncoderOnlyModel,
                                     TransformerConfig)
from transformer_core.positions import LearnedPositionalEmbedding, RelativePositionBias

MODELS = {"encoder_only": EncoderOnlyModel, "decoder_only": DecoderOnlyLM,
          "encoder_decoder": EncoderDecoderModel}

CONFIGS = [
    dict(vocab_size=50, d_model=16, n_heads=4, n_layers=2, max_len=12),
    dict(vocab_size=50, d_model=16, n_heads=4, n_layers=3, max_len=12, position="t5", tie_weights=False,
         bias=False, n_kv_heads=2),
    dict(vocab_size=50, d_model=16, n_heads=4, n_layers=1, max_len=12, position="rope", final_norm=False,
         n_segments=3, embedding_norm=True, d_ff=40),
    dict(vocab_size=50, d_model=16, n_heads=4, n_layers=2, max_len=12, position="sinusoidal",
         n_encoder_layers=1, n_decoder_layers=3, src_vocab_size=33, norm_first=False),
    dict(vocab_size=50, d_model=16, n_heads=2, n_layers=2, max_len=12, position="alibi", tie_weights=False,
         embedding_norm=True, n_segments=2),
]


def _measured_components(model):
    """Parameters of a real model grouped like parameter_counts (each shared tensor once)."""
    counts = dict.fromkeys(["embedding", "position_bias", "attention", "ffn", "norms", "head"], 0)
    seen = set()
    for name, module in model.named_modules():
        if name.startswith(("lm_head", "mlm_head")):
            key = "head"
        elif isinstance(module, MultiHeadAttention):
            key = "attention"
        elif isinstance(module, FeedForward):
            key = "ffn"
        elif isinstance(module, LayerNorm):
            key = "norms"
        elif isinstance(module, RelativePositionBias):
            key = "position_bias"
        elif isinstance(module, (nn.Embedding, LearnedPositionalEmbedding)):
            key = "embedding"
        else:
            continue
        for parameter in module.parameters():
            if id(parameter) not in seen:
                seen.add(id(parameter))
                counts[key] += parameter.numel()
    return counts


# ------------------------------------------------------------------------------ parameters

@pytest.mark.parametrize("architecture", list(MODELS))
@pytest.mark.parametrize("fields", CONFIGS, ids=lambda fields: fields.get("position", "learned"))
def test_parameter_counts_equal_the_real_models(fields, architecture):
    config = TransformerConfig(**fields)
    model = MODELS[architecture](config)
    counts = parameter_counts(config, architecture)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    measured = _measured_components(model)
    assert {key: counts[key] for key in measured} == measured
    assert counts["total"] == sum(measured.values())


def test_building_block_counts():
    assert attention_parameters(512, 8) == 4 * 512 * 512 + 4 * 512
    assert attention_parameters(512, 8, bias=False) == sum(
        p.numel() for p in MultiHeadAttention(512, 8, bias=False).parameters())
    grouped = MultiHeadAttention(64, 8, n_kv_heads=2)
    assert attention_parameters(64, 8, 2) == sum(p.numel() for p in grouped.parameters())
    assert ffn_parameters(512, 2048) == sum(p.numel() for p in FeedForward(512, 2048).parameters())
    with pytest.raises(ValueError, match="n_heads"):
        attention_parameters(30, 4)


def test_transformer_base_has_63_million_parameters():
    config = transformer_base_config()
    assert (config.d_model, config.n_heads, config.d_ff, config.n_encoder_layers, config.n_decoder_layers,
            config.vocab_size) == (512, 8, 2048, 6, 6, 37000)
    counts = parameter_counts(config, "encoder_decoder", share_source_target_embeddings=True)
    assert counts["total"] == 63_082_496
    assert counts["embedding"] == 37000 * 512 and counts["head"] == 0
    with torch.device("meta"):  # count the real modules without allocating 250 MB
        model = EncoderDecoderModel(config)
    model.src_embeddings.token.weight = model.tgt_embeddings.token.weight
    assert sum(p.numel() for p in model.parameters()) == counts["total"]
    # The paper (Table 3) reports 65M; untied source/target tables would give about 82M.
    assert parameter_counts(config, "encoder_decoder")["total"] == counts["total"] + 37000 * 512


def test_sharing_source_and_target_needs_one_vocabulary():
    config = TransformerConfig(vocab_size=20, src_vocab_size=30, d_model=8, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match="src_vocab_size == vocab_size"):
        parameter_counts(config, "encoder_decoder", share_source_target_embeddings=True)
    with pytest.raises(ValueError, match="architecture"):
        parameter_counts(config, "gpt")


# ------------------------------------------------------------------------------ FLOPs

def _measured_flops(function, *args, **kwargs):
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        function(*args, **kwargs)
    return counter.get_total_flops()


@pytest.mark.parametrize("n, m", [(7, 7), (5, 9)])
def test_attention_flops_match_what_pytorch_counts(n, m):
    d = 24
    attention = MultiHeadAttention(d, 4)
    x, context = torch.randn(1, n, d), torch.randn(1, m, d)
    terms = attention_flops(n, d, n_keys=m)
    # need_weights=True runs the explicit path, whose matrix products FlopCounterMode sees.
    measured = _measured_flops(attention, x, None if m == n else context, need_weights=True)
    assert measured == terms["total"]
    assert terms["scores"] == terms["weighted_sum"] == 2 * n * m * d
    self_terms = attention_flops(n, d)
    assert self_terms["total"] == 8 * n * d * d + 4 * n * n * d
    assert attention_flops(n, d, include_projections=False)["total"] == self_attention_layer_flops(n, d)


@pytest.mark.parametrize("fields", [dict(), dict(n_kv_heads=2, d_ff=40, tie_weights=False)])
def test_flops_per_token_match_the_real_model(fields):
    config = TransformerConfig(vocab_size=37, d_model=16, n_heads=4, n_layers=2, max_len=10, **fields)
    model = DecoderOnlyLM(config).eval()
    n_tokens = 10
    idx = torch.randint(0, 37, (1, n_tokens))
    measured = _measured_flops(model, idx, need_weights=True) / n_tokens
    assert measured == flops_per_token(config, n_tokens)
    # Closed form: N = every matrix that multiplies each token (all nn.Linear weights, head included).
    n_matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    assert flops_per_token(config) == 2 * n_matmul + 4 * config.n_layers * config.max_len * config.d_model
    attention_term = 12 * config.n_layers * config.max_len * config.d_model
    assert flops_per_token(config, training=True) == 6 * n_matmul + attention_term


def test_per_layer_costs_and_the_n_equals_d_crossover():
    n, d, k = 100, 512, 3
    assert rnn_layer_flops(n, d) == 4 * n * d ** 2
    assert cnn_layer_flops(n, d, k) == 2 * k * n * d ** 2
    assert self_attention_layer_flops(n, d) == 4 * n ** 2 * d
    # Self-attention is cheaper than a recurrent layer exactly while n < d.
    for length in (256, 511, 512, 513, 2048):
        cheaper = self_attention_layer_flops(length, d) < rnn_layer_flops(length, d)
        assert cheaper == (length < d)
    # Doubling n doubles the RNN cost and quadruples the attention cost.
    assert rnn_layer_flops(2 * n, d) == 2 * rnn_layer_flops(n, d)
    assert self_attention_layer_flops(2 * n, d) == 4 * self_attention_layer_flops(n, d)


def test_encoder_decoder_attention_terms():
    terms = encoder_decoder_attention_flops(10, 20, 8)
    assert terms == {"encoder_self": 4 * 100 * 8, "decoder_self": 4 * 400 * 8, "cross": 4 * 200 * 8,
                     "total": 4 * 8 * (10 ** 2 + 20 ** 2 + 10 * 20)}
    assert terms["cross"] == attention_flops(20, 8, n_keys=10, include_projections=False)["total"]


def test_training_flops_and_memory():
    assert training_flops(70 * 10 ** 9, 1400 * 10 ** 9) == 6 * 70 * 1400 * 10 ** 18
    assert attention_memory_bytes(1024, 8) == 8 * 1024 * 1024 * 4
    rectangular = attention_memory_bytes(10, 2, n_keys=30, batch_size=3, bytes_per_element=2)
    assert rectangular == 3 * 2 * 10 * 30 * 2
    assert attention_memory_bytes(2048, 8) == 4 * attention_memory_bytes(1024, 8)


# ------------------------------------------------------------------------------ KV cache and MFU

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n_kv_heads", [4, 1])
def test_kv_cache_bytes_equal_the_real_cache(dtype, n_kv_heads):
    cache = KVCache(3, 2, 17, n_kv_heads, 8, dtype=dtype)
    element = torch.empty(0, dtype=dtype).element_size()
    expected = kv_cache_bytes(3, 2, 17, n_kv_heads, 8, element)
    assert expected == 2 * 3 * 2 * 17 * n_kv_heads * 8 * element
    assert cache.nbytes == expected
    assert cache.keys.nbytes + cache.values.nbytes == expected


def test_kv_cache_bytes_of_a_model_cache():
    config = TransformerConfig(vocab_size=11, d_model=32, n_heads=4, n_kv_heads=2, n_layers=3, max_len=20)
    cache = DecoderOnlyLM(config).new_cache(batch_size=5)
    assert cache.nbytes == kv_cache_bytes(3, 5, 20, 2, 8, 4)


def test_mfu_arithmetic_and_errors():
    assert mfu(1000.0, 6e9, 312e12) == pytest.approx(6e12 / 312e12)
    assert mfu(2, 3, 12) == 0.5
    for bad in (0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="peak_flops"):
            mfu(1.0, 1.0, bad)
    with pytest.raises(ValueError, match="unknown"):
        mfu(1.0, 1.0, None)
    with pytest.raises(ValueError, match="tokens_per_second"):
        mfu(-5, 1.0, 1.0)


@pytest.mark.parametrize("call", [lambda: rnn_layer_flops(0, 4), lambda: cnn_layer_flops(4, 4, 1.5),
                                  lambda: kv_cache_bytes(1, 1, 1, 1, 1, 0), lambda: attention_flops(3, -1)])
def test_counters_reject_non_positive_sizes(call):
    with pytest.raises(ValueError, match="must be an integer"):
        call()


@pytest.mark.parametrize("bias", [True, False])
def test_nanogpt_count_adds_norm_and_bias_parameters_to_the_matmul_count(bias):
    """nanoGPT's 6N' + 12LdT counts every parameter but the position table; ours only matmul weights."""
    config = TransformerConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=2, max_len=8, bias=bias)
    model = DecoderOnlyLM(config)
    not_multiplying = sum(p.numel() for name, p in model.named_parameters()
                          if name.endswith("bias") or "norm" in name)
    assert not_multiplying > 0
    assert (nanogpt_flops_per_token(model, 8) - flops_per_token(config, 8, training=True)
            == 6 * not_multiplying)

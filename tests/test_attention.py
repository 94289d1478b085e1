"""Attention against independent references: PyTorch's fused kernel and nn.MultiheadAttention."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_core.attention import (MultiHeadAttention, causal_mask, padding_mask,
                                        scaled_dot_product_attention, sliding_window_mask)
from transformer_core.cache import KVCache
from transformer_core.positions import apply_rope

ATOL, RTOL = 1e-5, 1e-4


def _qkv(batch=2, heads=3, n_q=5, n_k=5, dim=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, heads, n_q, dim, generator=g),
            torch.randn(batch, heads, n_k, dim, generator=g),
            torch.randn(batch, heads, n_k, dim, generator=g))


# --- scaled_dot_product_attention -----------------------------------------------------------

def test_sdpa_matches_torch_without_mask():
    q, k, v = _qkv(n_q=4, n_k=6)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v),
                               F.scaled_dot_product_attention(q, k, v), atol=ATOL, rtol=RTOL)


def test_sdpa_matches_torch_causal():
    q, k, v = _qkv()
    ours = scaled_dot_product_attention(q, k, v, causal_mask(5))
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               atol=ATOL, rtol=RTOL)


def test_sdpa_matches_torch_with_padding_mask():
    q, k, v = _qkv(n_q=6, n_k=6)
    mask = padding_mask(torch.tensor([6, 3]), 6)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               atol=ATOL, rtol=RTOL)


def test_sdpa_matches_torch_with_random_boolean_masks():
    q, k, v = _qkv(n_q=7, n_k=9, seed=1)
    g = torch.Generator().manual_seed(3)
    mask = torch.rand(2, 3, 7, 9, generator=g) > 0.5
    mask[..., 0] = True  # every row keeps a key, so the reference is defined
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               atol=ATOL, rtol=RTOL)


def test_sdpa_bias_equals_float_attn_mask():
    q, k, v = _qkv(n_q=4, n_k=4, seed=2)
    bias = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(5))
    mask = causal_mask(4)
    reference = F.scaled_dot_product_attention(
        q, k, v, attn_mask=bias.masked_fill(~mask, float("-inf")))
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask, bias=bias), reference,
                               atol=ATOL, rtol=RTOL)


def test_sdpa_weights_are_probabilities_and_reproduce_output():
    q, k, v = _qkv(seed=4)
    mask = causal_mask(5)
    out, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    assert weights.shape == (2, 3, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5), atol=1e-6, rtol=0)
    assert (weights[..., ~mask] == 0).all(), "masked keys must get exactly zero weight"
    torch.testing.assert_close(out, weights @ v, atol=ATOL, rtol=RTOL)


def test_sdpa_fully_masked_row_gives_zeros_not_nan():
    q, k, v = _qkv(seed=6)
    q.requires_grad_(True)
    mask = causal_mask(5).clone()
    mask[2] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert (out[:, :, 2] == 0).all() and (weights[:, :, 2] == 0).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all(), "a fully masked row must not produce NaN gradients"


def test_sdpa_rejects_float_mask():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, k, v, causal_mask(5).float())


# --- masks ------------------------------------------------------------------------------------

def test_causal_mask_with_cache_is_bottom_rows_of_full_mask():
    full = causal_mask(7)
    assert torch.equal(causal_mask(3, 7), full[-3:])
    assert torch.equal(causal_mask(1, 7), torch.ones(1, 7, dtype=torch.bool))
    assert torch.equal(full, torch.tril(torch.ones(7, 7)).bool())
    with pytest.raises(ValueError, match="at least n_queries"):
        causal_mask(4, 3)


def test_padding_mask_shape_and_values():
    mask = padding_mask([1, 3], 4)
    assert mask.shape == (2, 1, 1, 4) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, False, False, False], [True, True, True, False]]
    with pytest.raises(ValueError, match="max_len"):
        padding_mask([5], 4)


def test_sliding_window_mask_is_a_causal_band():
    n, window = 6, 3
    mask = sliding_window_mask(n, window)
    expected = torch.tensor([[i - window < j <= i for j in range(n)] for i in range(n)])
    assert torch.equal(mask, expected)
    assert torch.equal(sliding_window_mask(n, n), causal_mask(n))


# --- MultiHeadAttention -----------------------------------------------------------------------

def _torch_copy(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    theirs = nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.qkv_proj.weight)          # both stack W_q, W_k, W_v as rows
        theirs.in_proj_bias.copy_(ours.qkv_proj.bias)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    return theirs


@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_self_attention_matches_torch_with_padding_and_causal_masks(need_weights):
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4)
    theirs = _torch_copy(ours)
    x = torch.randn(2, 6, 16)
    lengths = torch.tensor([6, 4])
    mask = padding_mask(lengths, 6) & causal_mask(6)
    out, weights = ours(x, mask=mask, need_weights=need_weights)
    ref, ref_weights = theirs(x, x, x, key_padding_mask=~padding_mask(lengths, 6)[:, 0, 0],
                              attn_mask=~causal_mask(6), need_weights=True)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=RTOL)
    if need_weights:
        assert weights.shape == (2, 4, 6, 6)
        torch.testing.assert_close(weights.mean(dim=1), ref_weights, atol=1e-6, rtol=RTOL)
    else:
        assert weights is None


def test_mha_cross_attention_matches_torch():
    torch.manual_seed(1)
    ours = MultiHeadAttention(16, 2)
    theirs = _torch_copy(ours)
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 7, 16)
    lengths = torch.tensor([7, 2])
    out, weights = ours(x, memory, mask=padding_mask(lengths, 7), need_weights=True)
    ref, ref_weights = theirs(x, memory, memory, key_padding_mask=~padding_mask(lengths, 7)[:, 0, 0])
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(weights.mean(dim=1), ref_weights, atol=1e-6, rtol=RTOL)
    assert weights.shape == (2, 2, 3, 7)


def test_mha_fast_path_equals_explicit_path_with_mask_bias_and_empty_row():
    torch.manual_seed(2)
    mha = MultiHeadAttention(24, 3)
    x = torch.randn(2, 5, 24)
    mask = causal_mask(5).expand(2, 1, 5, 5).clone()
    mask[1, 0, 3] = False                      # a query that may attend nothing
    bias = torch.randn(3, 5, 5)
    fast, none = mha(x, mask=mask, bias=bias)
    explicit, weights = mha(x, mask=mask, bias=bias, need_weights=True)
    assert none is None and weights is not None
    assert not torch.isnan(fast).any()
    torch.testing.assert_close(fast, explicit, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(fast[1, 3], mha.out_proj.bias, atol=ATOL, rtol=RTOL)


def test_gqa_with_as_many_kv_heads_equals_mha():
    torch.manual_seed(3)
    mha = MultiHeadAttention(16, 4)
    gqa = MultiHeadAttention(16, 4, n_kv_heads=4)
    gqa.load_state_dict(mha.state_dict())
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(gqa(x, mask=causal_mask(5))[0], mha(x, mask=causal_mask(5))[0])


def test_gqa_equals_mha_whose_kv_heads_are_repeated():
    torch.manual_seed(4)
    gqa = MultiHeadAttention(16, 4, n_kv_heads=2)
    mha = MultiHeadAttention(16, 4)
    head_dim = 4
    assert gqa.qkv_proj.weight.shape == (16 + 2 * 8, 16)           # q rows, then 2 kv heads of k and of v
    with torch.no_grad():
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
        weights = gqa.qkv_proj.weight.split((16, 8, 8))
        biases = gqa.qkv_proj.bias.split((16, 8, 8))
        # query heads 0, 1 share kv head 0; query heads 2, 3 share kv head 1
        kv_weights = [w.view(2, head_dim, 16).repeat_interleave(2, dim=0).reshape(16, 16) for w in weights[1:]]
        kv_biases = [b.view(2, head_dim).repeat_interleave(2, dim=0).reshape(16) for b in biases[1:]]
        mha.qkv_proj.weight.copy_(torch.cat([weights[0], *kv_weights]))
        mha.qkv_proj.bias.copy_(torch.cat([biases[0], *kv_biases]))
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(gqa(x, mask=causal_mask(5))[0], mha(x, mask=causal_mask(5))[0],
                               atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("n_kv_heads, bias", [(4, True), (2, False)])
def test_mha_loads_a_state_dict_with_separate_q_k_v_projections(n_kv_heads, bias):
    """Checkpoints from before the projections were joined (and weights mapped by hand under the old
    names) load into qkv_proj; the result is the attention of those three projections, written out."""
    torch.manual_seed(11)
    d_model, n_heads, head_dim = 16, 4, 4
    kv_width = n_kv_heads * head_dim
    old = {"q_proj.weight": torch.randn(d_model, d_model), "k_proj.weight": torch.randn(kv_width, d_model),
           "v_proj.weight": torch.randn(kv_width, d_model), "out_proj.weight": torch.randn(d_model, d_model)}
    if bias:
        old |= {"q_proj.bias": torch.randn(d_model), "k_proj.bias": torch.randn(kv_width),
                "v_proj.bias": torch.randn(kv_width), "out_proj.bias": torch.randn(d_model)}
    mha = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias)
    mha.load_state_dict(dict(old))                 # strict: every key used, none missing
    x = torch.randn(2, 5, d_model)

    def linear(name, inputs):
        return inputs @ old[f"{name}.weight"].T + (old[f"{name}.bias"] if bias else 0)

    q = linear("q_proj", x).view(2, 5, n_heads, head_dim).transpose(1, 2)
    k, v = (linear(name, x).view(2, 5, n_kv_heads, head_dim).transpose(1, 2).repeat_interleave(
        n_heads // n_kv_heads, dim=1) for name in ("k_proj", "v_proj"))
    heads = torch.softmax(q @ k.transpose(-2, -1) / head_dim ** 0.5, dim=-1) @ v
    expected = linear("out_proj", heads.transpose(1, 2).reshape(2, 5, d_model))
    torch.testing.assert_close(mha(x)[0], expected, atol=ATOL, rtol=RTOL)

    partial = {name: value for name, value in old.items() if not name.startswith("v_proj")}
    result = mha.load_state_dict(partial, strict=False)   # q and k without v are not joined
    assert "qkv_proj.weight" in result.missing_keys and "q_proj.weight" in result.unexpected_keys


def test_mha_rope_rotates_queries_and_keys():
    torch.manual_seed(5)
    mha = MultiHeadAttention(16, 2)
    x = torch.randn(1, 4, 16)
    positions = torch.arange(4)
    out, weights = mha(x, rope_positions=positions, need_weights=True)
    w_q, w_k, _ = mha.qkv_proj.weight.split(16)
    b_q, b_k, _ = mha.qkv_proj.bias.split(16)
    q = apply_rope((x @ w_q.T + b_q).view(1, 4, 2, 8).transpose(1, 2), positions)
    k = apply_rope((x @ w_k.T + b_k).view(1, 4, 2, 8).transpose(1, 2), positions)
    expected = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1)
    torch.testing.assert_close(weights, expected, atol=1e-6, rtol=RTOL)


def test_mha_with_cache_matches_full_forward():
    torch.manual_seed(6)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    x = torch.randn(2, 6, 16)
    full, _ = mha(x, mask=causal_mask(6), rope_positions=torch.arange(6))
    cache = KVCache(1, 2, 8, 2, 4)
    with torch.no_grad():
        first, _ = mha(x[:, :4], mask=causal_mask(4), rope_positions=torch.arange(4),
                       cache=cache.layers[0])
        rest = [mha(x[:, t:t + 1], rope_positions=torch.tensor([t]), cache=cache.layers[0])[0]
                for t in (4, 5)]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), full, atol=ATOL, rtol=RTOL)
    assert cache.length == 6


def test_mha_validates_its_arguments():
    with pytest.raises(ValueError, match="not divisible by n_heads"):
        MultiHeadAttention(30, 4)
    with pytest.raises(ValueError, match="n_kv_heads"):
        MultiHeadAttention(32, 4, n_kv_heads=3)
    mha = MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match="self-attention only"):
        mha(torch.randn(1, 2, 16), torch.randn(1, 3, 16), rope_positions=torch.arange(2))
    with pytest.raises(ValueError, match="d_model=16"):
        mha(torch.randn(1, 2, 8))


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_is_causal_equals_explicit_causal_mask(need_weights, n_kv_heads):
    """is_causal=True (the fused kernel's causal mode) gives what causal_mask gives, on both paths."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads).eval()
    x = torch.randn(2, 7, 32)
    expected, _ = mha(x, mask=causal_mask(7), need_weights=need_weights)
    actual, _ = mha(x, is_causal=True, need_weights=need_weights)
    torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-5)
    padding = padding_mask(torch.tensor([7, 4]), 7)
    expected, _ = mha(x, mask=causal_mask(7) & padding, need_weights=need_weights)
    actual, _ = mha(x, mask=padding, is_causal=True, need_weights=need_weights)
    torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_explicit_path_with_a_float32_bias_keeps_half_precision(dtype):
    """ALiBi's bias table is float32; adding it must not turn half-precision scores into float32
    (the weighted sum with the half-precision values would fail), and both paths must agree."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8).to(dtype) for _ in range(3))
    bias = torch.randn(2, 5, 5)                                            # float32
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias, return_weights=True)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(dtype))
    assert out.dtype == dtype and weights.dtype == dtype
    torch.testing.assert_close(out.float(), fused.float(), atol=2e-2, rtol=2e-2)
    mha = MultiHeadAttention(16, 2).to(dtype)
    x = torch.randn(1, 5, 16).to(dtype)
    with torch.no_grad():
        explicit_out, _ = mha(x, bias=bias, need_weights=True)
        fused_out, _ = mha(x, bias=bias)
    torch.testing.assert_close(explicit_out.float(), fused_out.float(), atol=2e-2, rtol=2e-2)


def test_a_mask_of_the_wrong_shape_is_refused_with_the_shapes_that_work():
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match=r"mask has shape \(4, 4\).*\(Tq, Tk\) = \(5, 5\)"):
        layer(x, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(B, 1, 1, Tk\) = \(2, 1, 1, 5\)"):
        layer(x, mask=torch.ones(3, 1, 1, 5, dtype=torch.bool))
    for good in (torch.ones(5, 5, dtype=torch.bool).tril(), torch.ones(2, 1, 1, 5, dtype=torch.bool),
                 torch.ones(2, 4, 5, 5, dtype=torch.bool)):
        layer(x, mask=good)


def test_a_bias_that_does_not_broadcast_is_refused_naming_the_argument():
    mha = MultiHeadAttention(d_model=16, n_heads=4)
    x = torch.randn(2, 5, 16)
    for need_weights in (False, True):
        with pytest.raises(ValueError, match=r"bias has shape \(4, 3, 3\).*\(B, n_heads, Tq, Tk\) = \(2, 4, 5, 5\)"):
            mha(x, bias=torch.zeros(4, 3, 3), need_weights=need_weights)
    assert mha(x, bias=torch.zeros(4, 5, 5))[0].shape == (2, 5, 16)


def test_a_context_of_the_wrong_width_or_batch_is_refused_naming_the_argument():
    mha = MultiHeadAttention(d_model=16, n_heads=4)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match=r"context must have shape \(B=2, S, d_model=16\), got \(2, 7, 12\)"):
        mha(x, torch.randn(2, 7, 12))
    with pytest.raises(ValueError, match=r"context must have shape \(B=2, S, d_model=16\), got \(3, 7, 16\)"):
        mha(x, torch.randn(3, 7, 16))
    assert mha(x, torch.randn(2, 7, 16))[0].shape == (2, 5, 16)


def test_cache_reorder_refuses_a_list_and_an_index_out_of_range():
    cache = KVCache(n_layers=1, batch_size=3, max_len=4, n_kv_heads=2, head_dim=4)
    with pytest.raises(ValueError, match=r"batch_indices must be an integer tensor.*torch.tensor\(\[2, 0, 1\]\)"):
        cache.reorder([2, 0, 1])
    with pytest.raises(ValueError, match=r"batch_indices must be an integer tensor"):
        cache.reorder(torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match=r"batch_indices.*3 is outside 0 \.\. 2"):
        cache.reorder(torch.tensor([0, 3, 1]))
    with pytest.raises(ValueError, match=r"batch_indices.*-1 is outside 0 \.\. 2"):
        cache.reorder(torch.tensor([0, -1, 1]))
    cache.layers[0].append(torch.arange(3.0)[:, None, None, None].expand(3, 2, 1, 4),
                           torch.zeros(3, 2, 1, 4))
    cache.reorder(torch.tensor([2, 2, 0]))
    assert cache.keys[0, :, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]

"""LayerNorm, feed-forward and the Transformer blocks against torch.nn."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_core.attention import causal_mask, padding_mask
from transformer_core.convert import decoder_layer_from_torch, encoder_layer_from_torch
from transformer_core.layers import DecoderLayer, EncoderLayer, FeedForward, LayerNorm

ATOL, RTOL = 1e-5, 1e-4


def _layernorm_formula(x, weight=None, bias=None, eps=1e-5):
    """The definition, in float64: biased variance, eps inside the square root."""
    x = x.double()
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y.float()


def test_layernorm_matches_the_formula_and_torch():
    torch.manual_seed(0)
    ours, theirs = LayerNorm(10, eps=1e-3), nn.LayerNorm(10, eps=1e-3)
    with torch.no_grad():
        for module in (ours, theirs):
            module.weight.copy_(torch.linspace(0.5, 2.0, 10))
            module.bias.copy_(torch.linspace(-1.0, 1.0, 10))
    x = torch.randn(3, 4, 10) * 5 + 2
    expected = _layernorm_formula(x, ours.weight, ours.bias, eps=1e-3)
    torch.testing.assert_close(ours(x), expected, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(ours(x), theirs(x), atol=ATOL, rtol=RTOL)


def test_layernorm_without_affine_and_tiny_variance():
    ours = LayerNorm(6, eps=1e-5, elementwise_affine=False)
    assert list(ours.parameters()) == []
    x = (torch.arange(12.0).view(2, 6) % 6 - 2.5) * 1e-3  # variance 2.9e-6, below eps
    torch.testing.assert_close(ours(x), _layernorm_formula(x, eps=1e-5), atol=ATOL, rtol=RTOL)


def test_layernorm_gradients_match_the_formula():
    torch.manual_seed(1)
    ours = LayerNorm(7, bias=False)
    with torch.no_grad():
        ours.weight.copy_(torch.linspace(0.5, 1.5, 7))
    x = torch.randn(2, 3, 7, requires_grad=True)
    upstream = torch.randn(2, 3, 7)
    (ours(x) * upstream).sum().backward()
    x_ref = x.detach().clone().requires_grad_(True)
    weight_ref = ours.weight.detach().clone().requires_grad_(True)
    (_layernorm_formula(x_ref, weight_ref) * upstream).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(ours.weight.grad, weight_ref.grad, atol=ATOL, rtol=RTOL)


def test_layernorm_without_bias_matches_torch():
    torch.manual_seed(0)
    ours, theirs = LayerNorm(10, bias=False), nn.LayerNorm(10, bias=False)
    assert ours.bias is None and [p.shape for p in ours.parameters()] == [(10,)]
    with torch.no_grad():
        for module in (ours, theirs):
            module.weight.copy_(torch.linspace(0.5, 2.0, 10))
    x = torch.randn(3, 4, 10) * 5 + 2
    torch.testing.assert_close(ours(x), _layernorm_formula(x, ours.weight), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(ours(x), theirs(x), atol=ATOL, rtol=RTOL)


def test_model_without_biases_has_none_anywhere():
    from transformer_core.models import DecoderOnlyLM, TransformerConfig
    model = DecoderOnlyLM(TransformerConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=2, max_len=8,
                                            bias=False))
    assert [name for name, _ in model.named_parameters() if name.endswith("bias")] == []

@pytest.mark.parametrize("activation,reference", [
    ("relu", F.relu), ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"))])
def test_feedforward_is_two_linear_layers_around_the_activation(activation, reference):
    torch.manual_seed(1)
    ffn = FeedForward(8, 32, activation=activation)
    x = torch.randn(2, 3, 8)
    expected = reference(x @ ffn.up_proj.weight.T + ffn.up_proj.bias) @ ffn.down_proj.weight.T \
        + ffn.down_proj.bias
    torch.testing.assert_close(ffn(x), expected, atol=ATOL, rtol=RTOL)


def test_feedforward_rejects_unknown_activation():
    with pytest.raises(ValueError, match="gelu_tanh"):
        FeedForward(8, 16, activation="swish")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(2)
    theirs = nn.TransformerEncoderLayer(16, 4, 40, dropout=0.0, activation=activation,
                                        norm_first=norm_first, batch_first=True)
    ours = encoder_layer_from_torch(theirs)
    assert isinstance(ours, EncoderLayer) and ours.norm_first == norm_first
    x = torch.randn(2, 6, 16)
    lengths = torch.tensor([6, 4])
    ref = theirs(x, src_key_padding_mask=~padding_mask(lengths, 6)[:, 0, 0])
    out = ours(x, mask=padding_mask(lengths, 6))
    torch.testing.assert_close(out[0], ref[0], atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(out[1, :4], ref[1, :4], atol=ATOL, rtol=RTOL)
    # and with a causal structure mask
    ref = theirs(x, src_mask=~causal_mask(6))
    torch.testing.assert_close(ours(x, mask=causal_mask(6)), ref, atol=ATOL, rtol=RTOL)


def test_encoder_layer_post_ln_and_pre_ln_formulas():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 16)
    for norm_first in (False, True):
        layer = EncoderLayer(16, 2, 32, norm_first=norm_first)
        attn = lambda h: layer.self_attn(h)[0]  # noqa: E731
        if norm_first:
            h = x + attn(layer.self_attn_norm(x))
            expected = h + layer.ffn(layer.ffn_norm(h))
        else:
            h = layer.self_attn_norm(x + attn(x))
            expected = layer.ffn_norm(h + layer.ffn(h))
        torch.testing.assert_close(layer(x), expected, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    torch.manual_seed(4)
    theirs = nn.TransformerDecoderLayer(16, 4, 40, dropout=0.0, activation="gelu",
                                        norm_first=norm_first, batch_first=True)
    ours = decoder_layer_from_torch(theirs)
    assert isinstance(ours, DecoderLayer) and ours.cross_attn is not None
    tgt, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    src_lengths = torch.tensor([7, 3])
    ref = theirs(tgt, memory, tgt_mask=~causal_mask(5),
                 memory_key_padding_mask=~padding_mask(src_lengths, 7)[:, 0, 0])
    out = ours(tgt, memory, self_mask=causal_mask(5), memory_mask=padding_mask(src_lengths, 7))
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=RTOL)


def test_layers_store_attention_weights_only_when_asked():
    torch.manual_seed(5)
    layer = DecoderLayer(16, 4, 32)
    tgt, memory = torch.randn(2, 3, 16), torch.randn(2, 6, 16)
    layer(tgt, memory, self_mask=causal_mask(3), need_weights=True)
    assert layer.self_attn_weights.shape == (2, 4, 3, 3)
    assert layer.cross_attn_weights.shape == (2, 4, 3, 6)
    assert not layer.cross_attn_weights.requires_grad
    torch.testing.assert_close(layer.cross_attn_weights.sum(-1), torch.ones(2, 4, 3))
    layer(tgt, memory, self_mask=causal_mask(3))
    assert layer.self_attn_weights is None and layer.cross_attn_weights is None
    encoder = EncoderLayer(16, 4, 32)
    encoder(tgt, need_weights=True)
    assert encoder.self_attn_weights.shape == (2, 4, 3, 3)


def test_decoder_layer_memory_rules():
    with_cross = DecoderLayer(16, 2, 32)
    without_cross = DecoderLayer(16, 2, 32, cross_attention=False)
    x = torch.randn(1, 3, 16)
    assert without_cross.cross_attn is None
    assert without_cross(x, self_mask=causal_mask(3)).shape == (1, 3, 16)
    with pytest.raises(ValueError, match="memory"):
        with_cross(x)
    with pytest.raises(ValueError, match="cross_attention=False"):
        without_cross(x, x)


def test_dropout_is_active_in_training_only():
    torch.manual_seed(6)
    layer = EncoderLayer(16, 2, 32, dropout=0.5)
    x = torch.randn(2, 4, 16)
    assert not torch.equal(layer(x), layer(x))
    layer.eval()
    assert torch.equal(layer(x), layer(x))

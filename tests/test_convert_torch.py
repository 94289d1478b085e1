"""Converting torch.nn Transformer modules: same function, same mode, same dtype."""

import pytest
import torch
from torch import nn

from transformer_core.attention import causal_mask, padding_mask
from transformer_core.convert import (decoder_layer_from_torch, encoder_layer_from_torch,
                                      transformer_from_torch)
from transformer_core.models import Transformer

ATOL, RTOL = 1e-5, 1e-4


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's own notice
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch_with_masks(norm_first):
    torch.manual_seed(0)
    theirs = nn.Transformer(16, 4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
                            dropout=0.0, norm_first=norm_first, batch_first=True)
    ours = transformer_from_torch(theirs)
    assert isinstance(ours, Transformer)
    src, tgt = torch.randn(2, 7, 16), torch.randn(2, 5, 16)
    src_lengths, tgt_lengths = torch.tensor([7, 4]), torch.tensor([5, 3])
    src_pad = padding_mask(src_lengths, 7)                      # (B, 1, 1, S), True = real
    tgt_pad = padding_mask(tgt_lengths, 5)
    ref = theirs(src, tgt, tgt_mask=~causal_mask(5),
                 src_key_padding_mask=~src_pad[:, 0, 0], tgt_key_padding_mask=~tgt_pad[:, 0, 0],
                 memory_key_padding_mask=~src_pad[:, 0, 0])
    out = ours(src, tgt, src_mask=src_pad, tgt_mask=causal_mask(5) & tgt_pad, memory_mask=src_pad)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=RTOL)


def test_transformer_encode_decode_equal_forward():
    torch.manual_seed(1)
    ours = transformer_from_torch(nn.Transformer(16, 2, 1, 2, 32, dropout=0.0, batch_first=True))
    src, tgt = torch.randn(1, 4, 16), torch.randn(1, 3, 16)
    memory = ours.encode(src)
    torch.testing.assert_close(ours.decode(tgt, memory, causal_mask(3)),
                               ours(src, tgt, tgt_mask=causal_mask(3)))


def _in_float64(module):
    """The module in float64 with weights that float32 cannot hold (``.double()`` alone keeps float32 values)."""
    module = module.double().eval()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(torch.randn_like(parameter) * 1e-3)
    return module


def test_conversion_keeps_mode_dtype_and_copies_weights():
    theirs = _in_float64(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True))
    ours = encoder_layer_from_torch(theirs)
    assert not ours.training and ours.self_attn.qkv_proj.weight.dtype == torch.float64
    assert ours.dropout.p == 0.1
    assert ours.self_attn.qkv_proj.weight.data_ptr() != theirs.self_attn.in_proj_weight.data_ptr()
    # copied in float64, not through float32
    assert torch.equal(ours.self_attn.qkv_proj.weight, theirs.self_attn.in_proj_weight)
    assert torch.equal(ours.ffn.up_proj.weight, theirs.linear1.weight)
    model = _in_float64(nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True))
    src, tgt = torch.randn(2, 5, 8, dtype=torch.float64), torch.randn(2, 3, 8, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(transformer_from_torch(model)(src, tgt), model(src, tgt), atol=1e-12, rtol=0)


def test_decoder_layer_with_gelu_module_activation():
    torch.manual_seed(2)
    theirs = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation=nn.GELU(approximate="tanh"),
                                        batch_first=True)
    ours = decoder_layer_from_torch(theirs)
    assert ours.ffn.activation_name == "gelu_tanh"
    tgt, memory = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    torch.testing.assert_close(ours(tgt, memory, self_mask=causal_mask(3)),
                               theirs(tgt, memory, tgt_mask=~causal_mask(3)), atol=ATOL, rtol=RTOL)


def test_unsupported_modules_are_refused_clearly():
    layer = nn.TransformerEncoderLayer(8, 2, 16, activation=nn.SiLU(), batch_first=True)
    with pytest.raises(ValueError, match="unsupported activation"):
        encoder_layer_from_torch(layer)
    transformer = nn.Transformer(8, 2, 1, 1, 16, batch_first=True)
    transformer.encoder.norm = None
    with pytest.raises(ValueError, match="final"):
        transformer_from_torch(transformer)

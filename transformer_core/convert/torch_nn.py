"""Copy the weights of ``torch.nn`` Transformer modules into the library's modules.

PyTorch packs the query, key and value projections of ``nn.MultiheadAttention`` into one
``in_proj_weight`` of shape ``(3 * d_model, d_model)`` (rows: q, then k, then v), in the same layout
as the library's ``qkv_proj``, so it is copied whole. The rest maps by name:

===================================== ==========================================================
``torch.nn``                          ``transformer_core``
===================================== ==========================================================
``self_attn``                         ``self_attn``
``multihead_attn``                    ``cross_attn``
``linear1`` / ``linear2``             ``ffn.up_proj`` / ``ffn.down_proj``
``norm1`` / ``norm2`` (encoder)       ``self_attn_norm`` / ``ffn_norm``
``norm1`` / ``norm2`` / ``norm3``     ``self_attn_norm`` / ``cross_attn_norm`` / ``ffn_norm``
``encoder.norm`` / ``decoder.norm``   ``encoder_norm`` / ``decoder_norm``
===================================== ==========================================================

The converted modules are batch-first and take boolean masks with True = may attend (see
:class:`~transformer_core.models.Transformer` for how PyTorch's masks translate). They are returned
in the source module's training/evaluation mode, on its device and dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention
from ..layers import DecoderLayer, EncoderLayer, FeedForward, LayerNorm
from ..models import Transformer
from ._placement import finish, in_source_dtype

__all__ = ["encoder_layer_from_torch", "decoder_layer_from_torch", "transformer_from_torch"]


def _activation_name(layer: nn.Module) -> str:
    activation = layer.activation
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    if isinstance(activation, nn.GELU) and activation.approximate == "tanh":
        return "gelu_tanh"
    raise ValueError(f"unsupported activation {activation!r}: only ReLU, GELU and tanh-GELU "
                     "layers can be converted.")


@torch.no_grad()
def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    if not theirs._qkv_same_embed_dim:
        raise ValueError("nn.MultiheadAttention with kdim/vdim different from embed_dim cannot be "
                         "converted: the library's attention projects keys and values from d_model.")
    if theirs.bias_k is not None or theirs.add_zero_attn:
        raise ValueError("nn.MultiheadAttention with add_bias_kv or add_zero_attn has no counterpart "
                         "here.")
    ours.qkv_proj.weight.copy_(theirs.in_proj_weight)                 # (3 d_model, d_model): rows q, k, v
    ours.out_proj.weight.copy_(theirs.out_proj.weight)
    if theirs.in_proj_bias is not None:
        ours.qkv_proj.bias.copy_(theirs.in_proj_bias)
        ours.out_proj.bias.copy_(theirs.out_proj.bias)


@torch.no_grad()
def _copy_linear(ours: nn.Linear, theirs: nn.Linear) -> None:
    ours.weight.copy_(theirs.weight)
    if theirs.bias is not None:
        ours.bias.copy_(theirs.bias)


@torch.no_grad()
def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    if theirs.weight is not None:
        ours.weight.copy_(theirs.weight)
    if theirs.bias is not None:
        ours.bias.copy_(theirs.bias)


def _copy_ffn(ours: FeedForward, layer: nn.Module) -> None:
    _copy_linear(ours.up_proj, layer.linear1)
    _copy_linear(ours.down_proj, layer.linear2)


def _copy_encoder_layer(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer) -> None:
    _copy_attention(ours.self_attn, theirs.self_attn)
    _copy_ffn(ours.ffn, theirs)
    _copy_norm(ours.self_attn_norm, theirs.norm1)
    _copy_norm(ours.ffn_norm, theirs.norm2)


def _copy_decoder_layer(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer) -> None:
    _copy_attention(ours.self_attn, theirs.self_attn)
    _copy_attention(ours.cross_attn, theirs.multihead_attn)
    _copy_ffn(ours.ffn, theirs)
    _copy_norm(ours.self_attn_norm, theirs.norm1)
    _copy_norm(ours.cross_attn_norm, theirs.norm2)
    _copy_norm(ours.ffn_norm, theirs.norm3)


def _block_kwargs(layer: nn.Module) -> dict:
    attention = layer.self_attn
    return dict(d_model=attention.embed_dim, n_heads=attention.num_heads,
                d_ff=layer.linear1.out_features, dropout=layer.dropout.p,
                activation=_activation_name(layer), norm_first=layer.norm_first,
                layer_norm_eps=layer.norm1.eps, bias=layer.linear1.bias is not None)


def encoder_layer_from_torch(layer: nn.TransformerEncoderLayer) -> EncoderLayer:
    """An :class:`~transformer_core.layers.EncoderLayer` with the weights of a PyTorch one.

    Args:
        layer: a ``torch.nn.TransformerEncoderLayer`` (batch_first or not; ours is batch-first).

    Returns:
        an ``EncoderLayer`` computing the same function (up to float rounding).

    Example:
        >>> theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        >>> ours = encoder_layer_from_torch(theirs)
        >>> x = torch.randn(2, 5, 16)
        >>> torch.allclose(ours(x), theirs(x), atol=1e-5)
        True
    """
    kwargs = _block_kwargs(layer)
    ours = in_source_dtype(EncoderLayer(kwargs.pop("d_model"), kwargs.pop("n_heads"), kwargs.pop("d_ff"), **kwargs),
                           layer)
    _copy_encoder_layer(ours, layer)
    return finish(ours, layer)


def decoder_layer_from_torch(layer: nn.TransformerDecoderLayer) -> DecoderLayer:
    """A :class:`~transformer_core.layers.DecoderLayer` (with cross-attention) with the weights of
    a PyTorch one.

    Args:
        layer: a ``torch.nn.TransformerDecoderLayer``.

    Returns:
        a ``DecoderLayer`` computing the same function (up to float rounding).
    """
    kwargs = _block_kwargs(layer)
    ours = in_source_dtype(DecoderLayer(kwargs.pop("d_model"), kwargs.pop("n_heads"), kwargs.pop("d_ff"),
                                        cross_attention=True, **kwargs), layer)
    _copy_decoder_layer(ours, layer)
    return finish(ours, layer)


def transformer_from_torch(model: nn.Transformer) -> Transformer:
    """A :class:`~transformer_core.models.Transformer` with the weights of a ``torch.nn.Transformer``.

    Args:
        model: a ``torch.nn.Transformer`` built from ``TransformerEncoderLayer`` and
            ``TransformerDecoderLayer`` blocks (the default).

    Returns:
        a batch-first ``Transformer``; feed it boolean masks with True = may attend.

    Example:
        >>> theirs = nn.Transformer(16, 4, 2, 2, 32, dropout=0.0, batch_first=True)
        >>> ours = transformer_from_torch(theirs)
        >>> len(ours.encoder_layers), len(ours.decoder_layers)
        (2, 2)
    """
    encoder_layers = list(model.encoder.layers)
    decoder_layers = list(model.decoder.layers)
    if not encoder_layers or not decoder_layers:
        raise ValueError("the nn.Transformer has no encoder or no decoder layers.")
    has_norm = (model.encoder.norm is not None, model.decoder.norm is not None)
    if has_norm[0] != has_norm[1]:
        raise ValueError("the encoder and decoder of this nn.Transformer disagree on having a final "
                         "LayerNorm; the library's Transformer has both or neither.")
    kwargs = _block_kwargs(encoder_layers[0])
    for layer in encoder_layers + decoder_layers:
        if _block_kwargs(layer) != kwargs:
            raise ValueError("all layers of the nn.Transformer must share one configuration (sizes, "
                             f"activation, norm_first); found {_block_kwargs(layer)} and {kwargs}.")
    ours = in_source_dtype(Transformer(kwargs.pop("d_model"), kwargs.pop("n_heads"), len(encoder_layers),
                                       len(decoder_layers), kwargs.pop("d_ff"), final_norm=has_norm[0], **kwargs),
                           model)
    for mine, theirs in zip(ours.encoder_layers, encoder_layers):
        _copy_encoder_layer(mine, theirs)
    for mine, theirs in zip(ours.decoder_layers, decoder_layers):
        _copy_decoder_layer(mine, theirs)
    if has_norm[0]:
        _copy_norm(ours.encoder_norm, model.encoder.norm)
        _copy_norm(ours.decoder_norm, model.decoder.norm)
    return finish(ours, model)

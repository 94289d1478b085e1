"""LayerNorm, the position-wise feed-forward network, and the encoder and decoder blocks.

A block wraps each sub-layer (attention, feed-forward) in a residual connection and a LayerNorm:

* Post-LN (``norm_first=False``, the 2017 paper, BERT): ``x = norm(x + dropout(sublayer(x)))``;
* Pre-LN (``norm_first=True``, GPT-2 and most LLMs): ``x = x + dropout(sublayer(norm(x)))``, which
  keeps an untouched residual path from input to output and trains stably without long warm-up.

Attention weights for plots: call a block with ``need_weights=True``; afterwards
``block.self_attn_weights`` (and ``block.cross_attn_weights`` for decoder blocks) hold detached
``(B, n_heads, Tq, Tk)`` tensors. They are reset to None by every call without ``need_weights``, so
stale weights never linger. The block's return value is always just the output tensor.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .cache import LayerKVCache

__all__ = ["LayerNorm", "RMSNorm", "make_norm", "FeedForward", "EncoderLayer", "DecoderLayer",
           "ACTIVATIONS", "NORMS", "get_activation"]

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
NORMS = ("layernorm", "rmsnorm")


class LayerNorm(nn.Module):
    """Layer normalisation over the last dimension (Ba, Kiros and Hinton 2016).

    ``y = (x - mean) / sqrt(var + eps) * weight + bias``, with the mean and the biased variance
    (divide by ``d_model``, not ``d_model - 1``) taken per token over its features. Unlike
    BatchNorm it needs no batch statistics, so training and inference behave the same and padding
    tokens never influence real ones.

    Chapter 5 writes these steps out; here they run as one fused ``F.layer_norm`` call, which
    computes the same function (the tests check it against the formula in float64) about five
    times faster than the separate mean, variance and division on a CPU, and saves the memory of
    their intermediate tensors in training.

    Args:
        d_model: size of the normalised (last) dimension.
        eps: added to the variance inside the square root.
        elementwise_affine: learn ``weight`` (gamma, init 1) and ``bias`` (beta, init 0).
        bias: with ``elementwise_affine``, also learn ``bias``; ``False`` keeps only the gain, as
            in GPT recipes without biases (nanoGPT's ``bias=False``) and ``torch.nn.LayerNorm``.

    Shapes:
        ``(..., d_model)`` -> ``(..., d_model)``.

    Example:
        >>> LayerNorm(4)(torch.tensor([[1.0, 2.0, 3.0, 4.0]])).sum().abs() < 1e-6
        tensor(True)
    """

    def __init__(self, d_model: int, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True):
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(d_model)) if elementwise_affine and bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"LayerNorm expected last dimension {self.d_model}, got "
                             f"{x.shape[-1]} (input shape {tuple(x.shape)}).")
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.d_model}, eps={self.eps}, elementwise_affine={self.weight is not None}, "
                f"bias={self.bias is not None}")


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang and Sennrich 2019), the norm of Llama-style models.

    ``y = x / sqrt(mean(x^2) + eps) * weight``: LayerNorm without subtracting the mean and without
    a bias. It keeps LayerNorm's effect that matters for training (every token's features are
    rescaled to a fixed size, so the residual stream cannot blow up) at a lower cost: one
    reduction instead of two. The gain ``weight`` (init 1) is applied after the normalisation,
    in the input's dtype; the statistics are computed in float32, as Hugging Face's
    ``LlamaRMSNorm`` does, so half-precision inputs do not overflow in ``x^2``.

    Args:
        d_model: size of the normalised (last) dimension.
        eps: added to the mean square inside the square root (1e-5 in SmolLM2, 1e-6 in Llama 2).

    Shapes:
        ``(..., d_model)`` -> ``(..., d_model)``.

    Example:
        >>> y = RMSNorm(4)(torch.tensor([[1.0, -1.0, 1.0, -1.0]]) * 3)
        >>> torch.allclose(y, torch.tensor([[1.0, -1.0, 1.0, -1.0]]), atol=1e-5)
        True
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"RMSNorm expected last dimension {self.d_model}, got "
                             f"{x.shape[-1]} (input shape {tuple(x.shape)}).")
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


def make_norm(kind: str, d_model: int, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """The normalisation layer called ``kind``: ``"layernorm"`` (:class:`LayerNorm`, with a bias
    when ``bias``) or ``"rmsnorm"`` (:class:`RMSNorm`, which never has one)."""
    if kind == "layernorm":
        return LayerNorm(d_model, eps=eps, bias=bias)
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be one of {NORMS}, got {kind!r}.")


def get_activation(name: str):
    """The activation function called ``name``: ``"relu"``, ``"gelu"`` (exact) or ``"gelu_tanh"``.

    Args:
        name: one of :data:`ACTIVATIONS`.

    Shapes:
        the returned function maps any tensor to a tensor of the same shape.
    """
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    if name == "gelu_tanh":
        return functools.partial(F.gelu, approximate="tanh")
    if name == "silu":
        return F.silu
    raise ValueError(f"unknown activation {name!r}; choose one of {ACTIVATIONS} ('gelu' is the "
                     "exact erf form used by BERT, 'gelu_tanh' the approximation used by GPT-2, "
                     "'silu' = x * sigmoid(x), the gate of SwiGLU in Llama-style models).")


class FeedForward(nn.Module):
    """The position-wise feed-forward network: ``down_proj(dropout(act(up_proj(x))))``, or with
    ``gated=True`` the gated linear unit ``down_proj(dropout(act(gate_proj(x)) * up_proj(x)))``.

    The same MLP is applied to every token independently; it usually widens to
    ``d_ff = 4 * d_model`` and back. Attention only averages values; this is where each token's
    features are transformed non-linearly.

    The gated form with ``activation="silu"`` is SwiGLU (Shazeer 2020), the MLP of Llama-style
    models: one projection ``gate_proj`` decides, through SiLU, how much of each hidden feature of
    the other, ``up_proj``, passes. It has three ``d_model x d_ff`` matrices instead of two, so a
    parameter-matched SwiGLU uses ``d_ff`` about ``2/3`` of the plain MLP's (``8/3 d_model``
    instead of ``4 d_model``).

    Args:
        d_model: model width.
        d_ff: hidden width.
        activation: ``"relu"`` (2017 paper), ``"gelu"`` (exact, BERT), ``"gelu_tanh"`` (GPT-2) or
            ``"silu"`` (the gate of SwiGLU).
        dropout: dropout after the activation (training only).
        bias: whether the linear layers have biases.
        gated: add ``gate_proj`` and multiply (a GLU variant: SwiGLU with ``"silu"``, GEGLU with
            ``"gelu"``).

    Shapes:
        ``(B, T, d_model)`` -> ``(B, T, d_model)``.

    Example:
        >>> FeedForward(8, 32, activation="gelu")(torch.randn(2, 3, 8)).shape
        torch.Size([2, 3, 8])
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True, gated: bool = False):
        super().__init__()
        self.d_model = d_model
        self.d_ff = d_ff
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.gated = gated
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias) if gated else None
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_proj is not None:
            return self.down_proj(self.dropout(self.activation(self.gate_proj(x)) * self.up_proj(x)))
        return self.down_proj(self.dropout(self.activation(self.up_proj(x))))


class EncoderLayer(nn.Module):
    """One encoder block: self-attention and feed-forward, each with residual and LayerNorm.

    Args:
        d_model: model width.
        n_heads: attention heads.
        d_ff: feed-forward hidden width.
        dropout: dropout on attention weights, inside the FFN and on each sub-layer output.
        activation: feed-forward activation (``"relu"``, ``"gelu"``, ``"gelu_tanh"``).
        norm_first: Pre-LN when True, Post-LN (the 2017 paper) when False.
        layer_norm_eps: epsilon of both LayerNorms.
        bias: biases in the linear layers and the LayerNorms.
        n_kv_heads: key/value heads for grouped-query attention (default ``n_heads``).
        norm: ``"layernorm"`` or ``"rmsnorm"`` (:class:`RMSNorm`) for both norms.
        gated_ffn: a gated feed-forward network (SwiGLU with ``activation="silu"``).
        rope_base: RoPE's frequency base ``theta`` (used when ``rope_positions`` are given).
        rope_pairing: RoPE's pairing convention, ``"interleaved"`` or ``"half"``.

    Sub-modules: ``self_attn``, ``self_attn_norm``, ``ffn``, ``ffn_norm``, ``dropout``.

    Shapes:
        ``forward(x, *, mask=None, bias=None, rope_positions=None, need_weights=False)``:
        x ``(B, T, d_model)`` -> ``(B, T, d_model)``; mask bool broadcastable to
        ``(B, n_heads, T, T)`` (e.g. :func:`~transformer_core.attention.padding_mask`); bias float
        broadcastable to the same; rope_positions ``(T,)``. With ``need_weights=True``,
        ``self_attn_weights`` holds ``(B, n_heads, T, T)`` afterwards.

    Example:
        >>> layer = EncoderLayer(16, 4, 64, norm_first=True)
        >>> layer(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.0,
                 activation: str = "relu", norm_first: bool = False, layer_norm_eps: float = 1e-5,
                 bias: bool = True, n_kv_heads: int | None = None, norm: str = "layernorm",
                 gated_ffn: bool = False, rope_base: float = 10000.0,
                 rope_pairing: str = "interleaved"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads,
                                            dropout=dropout, bias=bias, rope_base=rope_base,
                                            rope_pairing=rope_pairing)
        self.self_attn_norm = make_norm(norm, d_model, layer_norm_eps, bias)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout, bias, gated=gated_ffn)
        self.ffn_norm = make_norm(norm, d_model, layer_norm_eps, bias)
        self.dropout = nn.Dropout(dropout)
        self.self_attn_weights: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None,
                bias: torch.Tensor | None = None, rope_positions: torch.Tensor | None = None,
                need_weights: bool = False) -> torch.Tensor:
        def attention(h):
            out, weights = self.self_attn(h, mask=mask, bias=bias, rope_positions=rope_positions,
                                          need_weights=need_weights)
            self.self_attn_weights = None if weights is None else weights.detach()
            return self.dropout(out)

        if self.norm_first:
            x = x + attention(self.self_attn_norm(x))
            x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        else:
            x = self.self_attn_norm(x + attention(x))
            x = self.ffn_norm(x + self.dropout(self.ffn(x)))
        return x


class DecoderLayer(nn.Module):
    """One decoder block: causal self-attention, optional cross-attention, feed-forward.

    With ``cross_attention=True`` (encoder-decoder models) the queries of the second sub-layer come
    from the decoder and its keys and values from the encoder output ``memory``. With
    ``cross_attention=False`` the block is a GPT block (self-attention and feed-forward only).

    Args:
        d_model: model width.
        n_heads: attention heads.
        d_ff: feed-forward hidden width.
        dropout: dropout on attention weights, inside the FFN and on each sub-layer output.
        activation: feed-forward activation (``"relu"``, ``"gelu"``, ``"gelu_tanh"``).
        norm_first: Pre-LN when True, Post-LN when False.
        layer_norm_eps: epsilon of the LayerNorms.
        bias: biases in the linear layers and the LayerNorms.
        cross_attention: whether the block has the cross-attention sub-layer.
        n_kv_heads: key/value heads for grouped-query attention (default ``n_heads``).
        norm: ``"layernorm"`` or ``"rmsnorm"`` (:class:`RMSNorm`) for every norm of the block.
        gated_ffn: a gated feed-forward network (SwiGLU with ``activation="silu"``).
        rope_base: RoPE's frequency base ``theta`` in self-attention (used when ``rope_positions``
            are given).
        rope_pairing: RoPE's pairing convention, ``"interleaved"`` or ``"half"``.

    Sub-modules: ``self_attn``, ``self_attn_norm``, ``cross_attn`` and ``cross_attn_norm`` (None
    without cross-attention), ``ffn``, ``ffn_norm``, ``dropout``.

    Shapes:
        ``forward(x, memory=None, *, self_mask=None, memory_mask=None, self_bias=None,
        rope_positions=None, cache=None, need_weights=False, causal=False)``:
        x ``(B, T, d_model)``, memory ``(B, S, d_model)`` -> ``(B, T, d_model)``. self_mask bool
        broadcastable to ``(B, n_heads, T, T_k)`` where ``T_k`` counts cached tokens (pass
        :func:`~transformer_core.attention.causal_mask`, or ``causal=True``, which means the same
        and lets the fused kernel skip the mask, for a causal decoder; nothing is causal by
        default); memory_mask bool broadcastable to ``(B, n_heads, T, S)``; self_bias float
        broadcastable to ``(B, n_heads, T, T_k)``; rope_positions ``(T,)``; cache a
        :class:`~transformer_core.cache.LayerKVCache` (self-attention keys and values, and the
        cross-attention keys and values of ``memory`` after the first call). With
        ``need_weights=True``, ``self_attn_weights`` ``(B, n_heads, T, T_k)`` and
        ``cross_attn_weights`` ``(B, n_heads, T, S)`` hold the weights afterwards.

    Example:
        >>> from transformer_core.attention import causal_mask
        >>> layer = DecoderLayer(16, 4, 64)
        >>> y = layer(torch.randn(2, 5, 16), torch.randn(2, 7, 16), self_mask=causal_mask(5))
        >>> y.shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, dropout: float = 0.0,
                 activation: str = "relu", norm_first: bool = False, layer_norm_eps: float = 1e-5,
                 bias: bool = True, cross_attention: bool = True, n_kv_heads: int | None = None,
                 norm: str = "layernorm", gated_ffn: bool = False, rope_base: float = 10000.0,
                 rope_pairing: str = "interleaved"):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads,
                                            dropout=dropout, bias=bias, rope_base=rope_base,
                                            rope_pairing=rope_pairing)
        self.self_attn_norm = make_norm(norm, d_model, layer_norm_eps, bias)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads,
                                                 dropout=dropout, bias=bias)
            self.cross_attn_norm = make_norm(norm, d_model, layer_norm_eps, bias)
        else:
            self.cross_attn = None
            self.cross_attn_norm = None
        self.ffn = FeedForward(d_model, d_ff, activation, dropout, bias, gated=gated_ffn)
        self.ffn_norm = make_norm(norm, d_model, layer_norm_eps, bias)
        self.dropout = nn.Dropout(dropout)
        self.self_attn_weights: torch.Tensor | None = None
        self.cross_attn_weights: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, *,
                self_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                self_bias: torch.Tensor | None = None, rope_positions: torch.Tensor | None = None,
                cache: LayerKVCache | None = None, need_weights: bool = False,
                causal: bool = False) -> torch.Tensor:
        if self.cross_attn is not None and memory is None:
            raise ValueError("this DecoderLayer has cross-attention, so it needs the encoder output "
                             "`memory` (B, S, d_model); build it with cross_attention=False for a "
                             "decoder-only (GPT) block.")
        if self.cross_attn is None and (memory is not None or memory_mask is not None):
            raise ValueError("this DecoderLayer was built with cross_attention=False, so it takes "
                             "no memory or memory_mask.")

        def self_attention(h):
            out, weights = self.self_attn(h, mask=self_mask, bias=self_bias,
                                          rope_positions=rope_positions, cache=cache,
                                          need_weights=need_weights, is_causal=causal)
            self.self_attn_weights = None if weights is None else weights.detach()
            return self.dropout(out)

        def cross_attention(h):
            out, weights = self.cross_attn(h, memory, mask=memory_mask, cache=cache,
                                           need_weights=need_weights)
            self.cross_attn_weights = None if weights is None else weights.detach()
            return self.dropout(out)

        if self.norm_first:
            x = x + self_attention(self.self_attn_norm(x))
            if self.cross_attn is not None:
                x = x + cross_attention(self.cross_attn_norm(x))
            x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        else:
            x = self.self_attn_norm(x + self_attention(x))
            if self.cross_attn is not None:
                x = self.cross_attn_norm(x + cross_attention(x))
            x = self.ffn_norm(x + self.dropout(self.ffn(x)))
        return x

"""Scaled dot-product attention, masks and multi-head attention.

Conventions (the same everywhere in the library):

* masks are **boolean, True = may attend**, broadcastable to ``(..., T_q, T_k)``;
* additive biases (ALiBi, T5 relative bias) are float tensors broadcastable to
  ``(B, n_heads, T_q, T_k)``, passed separately from masks;
* a query row whose keys are all masked returns a zero output and zero weights, never NaN.

:func:`scaled_dot_product_attention` is the readable path, written out step by step.
:class:`MultiHeadAttention` uses it when attention weights are requested; otherwise it calls the
fused kernel ``torch.nn.functional.scaled_dot_product_attention``, which never materialises the
``(T_q, T_k)`` weight matrix in slow memory (FlashAttention-style) and is much faster on a GPU. Both
paths live in :func:`_attend` and are tested equal.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .cache import LayerKVCache
from .positions import ROPE_PAIRINGS, apply_rope

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "MultiHeadAttention",
]


def _check_mask(mask: torch.Tensor) -> None:
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}. Convert a "
            "0/1 mask with mask.bool(); pass additive float scores (ALiBi, relative bias) as bias=.")


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None, *,
                                 bias: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 return_weights: bool = False):
    """Attention written out: ``softmax(q k^T / sqrt(d) + bias, masked) @ v``.

    Steps: scores ``q k^T / sqrt(d)``; add ``bias``; set scores of masked-out keys to ``-inf``;
    softmax over the keys; multiply the weights with ``v``. A query row whose keys are all masked
    would give ``softmax([-inf, ..., -inf]) = NaN``; here it gets zero weights and a zero output.

    Args:
        q: queries.
        k: keys.
        v: values.
        mask: boolean, True where query i may attend key j; broadcastable to ``(..., Tq, Tk)``.
        bias: float scores added before masking (ALiBi, T5 bias); broadcastable to ``(..., Tq, Tk)``.
        dropout_p: probability of zeroing an attention weight (the output is rescaled by
            ``1 / (1 - dropout_p)``); pass 0.0 at evaluation time.
        return_weights: also return the attention weights.

    Shapes:
        q ``(..., Tq, d)``, k ``(..., Tk, d)``, v ``(..., Tk, d_v)`` -> out ``(..., Tq, d_v)``;
        weights ``(..., Tq, Tk)``: the softmax probabilities before dropout (rows sum to 1, or to 0
        for fully masked rows).

    Returns:
        ``out``, or ``(out, weights)`` when ``return_weights`` is True.

    Example:
        >>> q = k = v = torch.randn(2, 5, 8)
        >>> out, w = scaled_dot_product_attention(q, k, v, causal_mask(5), return_weights=True)
        >>> out.shape, w.shape
        (torch.Size([2, 5, 8]), torch.Size([2, 5, 5]))
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension, got {q.shape[-1]} and "
                         f"{k.shape[-1]}.")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions, got {k.shape[-2]} and "
                         f"{v.shape[-2]}.")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])          # (..., Tq, Tk)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)        # ALiBi tables are float32
    if mask is not None:
        _check_mask(mask)
        scores = torch.where(mask, scores, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # Fully masked rows are NaN after the softmax; every entry there is masked, so zero them.
        weights = torch.where(mask, weights, 0.0)
    used = F.dropout(weights, p=dropout_p) if dropout_p > 0.0 else weights
    out = used @ v                                                      # (..., Tq, d_v)
    return (out, weights) if return_weights else out


def _fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     mask: torch.Tensor | None, bias: torch.Tensor | None,
                     dropout_p: float) -> torch.Tensor:
    """The fast path: PyTorch's fused kernel, with the library's mask and fully-masked-row rules."""
    rows_with_keys = None
    attn_mask = mask
    if mask is not None:
        _check_mask(mask)
        # Depending on version and backend, the fused kernel returns NaN or zeros for a row with no
        # allowed key. Let such rows attend to every key (any finite result will do) and zero their
        # output afterwards, so every backend gives the library's answer.
        rows_with_keys = mask.any(dim=-1, keepdim=True)                 # (..., Tq, 1)
        attn_mask = mask | ~rows_with_keys
    if bias is not None:
        bias = bias.to(q.dtype)
        attn_mask = bias if attn_mask is None else torch.where(attn_mask, bias, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
    if rows_with_keys is not None:
        out = out * rows_with_keys
    return out


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
            bias: torch.Tensor | None, dropout_p: float, need_weights: bool,
            is_causal: bool = False):
    """One place for both paths: explicit (returns weights) or fused (fast, no weights).

    ``is_causal`` means "also apply :func:`causal_mask`". When it is the only restriction and the
    queries and keys have the same length, the fused kernel is told so instead of being given a
    mask: it then skips reading a mask and may pick its fastest (FlashAttention) kernel on a GPU.
    """
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    causal_only = mask is None and bias is None and n_queries == n_keys
    if is_causal and (need_weights or not causal_only):
        causal = causal_mask(n_queries, n_keys, device=q.device)
        mask = causal if mask is None else mask & causal
        is_causal = False
    if need_weights:
        return scaled_dot_product_attention(q, k, v, mask, bias=bias, dropout_p=dropout_p,
                                            return_weights=True)
    if is_causal:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True), None
    return _fused_attention(q, k, v, mask, bias, dropout_p), None


def causal_mask(n_queries: int, n_keys: int | None = None, *,
                device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean causal mask: a query may attend its own position and earlier ones.

    The queries are the *last* ``n_queries`` positions of the ``n_keys`` keys, so query ``i`` may
    attend key ``j`` when ``j <= i + (n_keys - n_queries)``. With ``n_keys == n_queries`` this is the
    usual lower-triangular matrix; with a KV cache (``n_keys`` = cached + new tokens) it is the
    bottom rows of the full mask. The mask applies to the score matrix, never to k or v themselves.

    Args:
        n_queries: number of query positions.
        n_keys: number of key positions (default ``n_queries``), at least ``n_queries``.
        device: where to create the mask.

    Shapes:
        returns ``(n_queries, n_keys)``, bool.

    Example:
        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    n_keys = n_queries if n_keys is None else n_keys
    if n_keys < n_queries:
        raise ValueError(f"n_keys ({n_keys}) must be at least n_queries ({n_queries}): the queries "
                         "are the last positions of the key sequence.")
    full = torch.ones(n_queries, n_keys, dtype=torch.bool, device=device)
    return full.tril(diagonal=n_keys - n_queries)


def padding_mask(lengths: torch.Tensor | list[int], max_len: int) -> torch.Tensor:
    """Boolean key mask that is True on real tokens and False on padding (right padding).

    Args:
        lengths: number of real tokens of each sequence.
        max_len: padded length ``T``.

    Shapes:
        lengths ``(B,)`` -> ``(B, 1, 1, max_len)``, bool; broadcasts against scores
        ``(B, n_heads, Tq, max_len)``.

    Example:
        >>> padding_mask(torch.tensor([2, 3]), 3)[:, 0, 0].int()
        tensor([[1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be one-dimensional (B,), got shape {tuple(lengths.shape)}.")
    if bool((lengths > max_len).any()) or bool((lengths < 0).any()):
        raise ValueError(f"every length must lie in [0, max_len={max_len}], got {lengths.tolist()}.")
    positions = torch.arange(max_len, device=lengths.device)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def sliding_window_mask(n: int, window: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Causal band mask: each query sees itself and the ``window - 1`` tokens before it.

    Query ``i`` may attend key ``j`` when ``i - window < j <= i`` (Longformer/Mistral-style local
    attention); the cost of attention becomes O(n * window) instead of O(n^2).

    Args:
        n: sequence length (queries and keys).
        window: number of keys each query sees, at least 1.
        device: where to create the mask.

    Shapes:
        returns ``(n, n)``, bool.

    Example:
        >>> sliding_window_mask(4, 2).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    if window < 1:
        raise ValueError(f"window must be at least 1 (the token itself), got {window}.")
    causal = causal_mask(n, device=device)
    return causal & ~causal_mask(n, device=device).tril(diagonal=-window)


def _broadcasts_to(shape: torch.Size, scores_shape: tuple[int, int, int, int]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to the scores' shape without changing it."""
    try:
        return torch.broadcast_shapes(tuple(shape), scores_shape) == torch.Size(scores_shape)
    except RuntimeError:
        return False


def _check_mask_shape(mask: torch.Tensor, scores_shape: tuple[int, int, int, int]) -> None:
    """Refuse a mask that does not broadcast to the scores ``(B, n_heads, Tq, Tk)``, saying which shapes work."""
    if not _broadcasts_to(mask.shape, scores_shape):
        batch, _, n_queries, n_keys = scores_shape
        raise ValueError(f"mask has shape {tuple(mask.shape)}, which does not broadcast to the scores (B, n_heads, "
                         f"Tq, Tk) = {scores_shape}; use (Tq, Tk) = ({n_queries}, {n_keys}) for one mask for the "
                         f"whole batch, or (B, 1, 1, Tk) = ({batch}, 1, 1, {n_keys}) for padding (Tk counts "
                         f"cached tokens too)")


def _check_bias_shape(bias: torch.Tensor, scores_shape: tuple[int, int, int, int]) -> None:
    """Refuse an additive bias that does not broadcast to the scores ``(B, n_heads, Tq, Tk)``."""
    if not _broadcasts_to(bias.shape, scores_shape):
        _, n_heads, n_queries, n_keys = scores_shape
        raise ValueError(f"bias has shape {tuple(bias.shape)}, which does not broadcast to the scores (B, n_heads, "
                         f"Tq, Tk) = {scores_shape}; give one score per head, query and key: (n_heads, Tq, Tk) = "
                         f"({n_heads}, {n_queries}, {n_keys}) (Tk counts cached tokens too)")


def _join_projections(module: nn.Module, state_dict: dict, prefix: str, *_args) -> None:
    """A ``load_state_dict`` pre-hook: separate ``q_proj``, ``k_proj``, ``v_proj`` entries of
    ``state_dict`` are replaced by the ``qkv_proj`` entry they stack into (rows q, k, v). Entries that
    are not all three are left alone, so loading reports them as unexpected or missing."""
    for field in ("weight", "bias"):
        names = [f"{prefix}{part}_proj.{field}" for part in "qkv"]
        if all(name in state_dict for name in names):
            state_dict[f"{prefix}qkv_proj.{field}"] = torch.cat([state_dict.pop(name) for name in names])


class MultiHeadAttention(nn.Module):
    """Multi-head attention for self- and cross-attention, with grouped-query heads and a KV cache.

    ``x`` is projected to queries; the keys and values come from ``x`` (self-attention) or from
    ``context`` (cross-attention: queries from the decoder, keys and values from the encoder). Each
    of the ``n_heads`` heads attends in its own ``head_dim = d_model // n_heads`` subspace; the heads
    are concatenated and mixed by ``out_proj``. With ``n_kv_heads < n_heads`` (grouped-query
    attention) query heads ``g * n_heads // n_kv_heads ...`` share key/value head ``g``, which shrinks
    the KV cache by ``n_heads / n_kv_heads``.

    The query, key and value projections are one layer, ``qkv_proj``: its weight
    ``(d_model + 2 * n_kv_heads * head_dim, d_model)`` holds the rows of ``W_q``, then ``W_k``, then
    ``W_v`` (nanoGPT's ``c_attn`` layout), so self-attention computes all three with one matrix product.
    A state dict with separate ``q_proj``, ``k_proj`` and ``v_proj`` entries (checkpoints saved before
    the projections were joined, or weights mapped by hand) still loads: the three are stacked.

    Args:
        d_model: model width; must be divisible by ``n_heads``.
        n_heads: number of query heads.
        n_kv_heads: number of key/value heads (default ``n_heads``); must divide ``n_heads``.
        dropout: dropout probability on the attention weights (training only).
        bias: whether the projections (``qkv_proj``, ``out_proj``) have biases.
        rope_base: the RoPE frequency base ``theta`` used when ``rope_positions`` are given.
        rope_pairing: which features RoPE rotates together, ``"interleaved"`` (``x[2i], x[2i+1]``)
            or ``"half"`` (``x[i], x[i + head_dim/2]``, Hugging Face's Llama); see
            :func:`~transformer_core.positions.apply_rope`.

    Shapes:
        ``forward(x, context=None, *, mask=None, bias=None, rope_positions=None, cache=None,
        need_weights=False, is_causal=False)``:

        * x ``(B, Tq, d_model)``; context ``(B, Tk, d_model)`` or None;
        * mask: bool, broadcastable to ``(B, n_heads, Tq, Tk)`` (``Tk`` counts cached tokens too);
        * bias: float, broadcastable to ``(B, n_heads, Tq, Tk)``;
        * rope_positions: ``(Tq,)`` positions of the tokens in ``x``; RoPE rotates q and k
          (self-attention only);
        * cache: a :class:`~transformer_core.cache.LayerKVCache` (kept in its own dtype; what it returns
          is cast to the queries' dtype). Self-attention appends the new
          k, v and attends over everything cached. Cross-attention projects ``context`` into its
          ``memory_keys``/``memory_values`` on the first call and reuses them afterwards, so every
          later call must pass the same ``context`` (``reset()`` the cache for a new one);
        * is_causal: also apply ``causal_mask(Tq, Tk)``; equal to passing that mask, but faster,
          because the fused kernel then needs no mask tensor;
        * returns ``(out, weights)``: out ``(B, Tq, d_model)``; weights ``(B, n_heads, Tq, Tk)`` when
          ``need_weights`` (explicit path), else None (fused path).

    Example:
        >>> mha = MultiHeadAttention(d_model=32, n_heads=4)
        >>> x = torch.randn(2, 6, 32)
        >>> out, weights = mha(x, mask=causal_mask(6), need_weights=True)
        >>> out.shape, weights.shape
        (torch.Size([2, 6, 32]), torch.Size([2, 4, 6, 6]))
    """

    def __init__(self, d_model: int, n_heads: int, *, n_kv_heads: int | None = None,
                 dropout: float = 0.0, bias: bool = True, rope_base: float = 10000.0,
                 rope_pairing: str = "interleaved"):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model < 1 or n_heads < 1 or n_kv_heads < 1:
            raise ValueError(f"d_model, n_heads and n_kv_heads must be positive, got {d_model}, "
                             f"{n_heads}, {n_kv_heads}.")
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: each head gets "
                f"d_model // n_heads dimensions. Pick n_heads among the divisors of d_model "
                f"(e.g. {[h for h in range(1, min(d_model, 16) + 1) if d_model % h == 0]}).")
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}: in "
                             "grouped-query attention each key/value head serves the same number "
                             "of query heads.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}.")
        if rope_pairing not in ROPE_PAIRINGS:
            raise ValueError(f"rope_pairing must be one of {ROPE_PAIRINGS}, got {rope_pairing!r}.")
        if not rope_base > 0:
            raise ValueError(f"rope_base must be positive, got {rope_base}.")
        self.rope_base = float(rope_base)
        self.rope_pairing = rope_pairing
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = d_model // n_heads
        self.dropout = dropout
        self.kv_width = n_kv_heads * self.head_dim
        # W_q, W_k and W_v stacked as the rows of one layer: self-attention projects x with one matrix
        # product instead of three (as GPT-2's c_attn does).
        self.qkv_proj = nn.Linear(d_model, d_model + 2 * self.kv_width, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.register_load_state_dict_pre_hook(_join_projections)

    def _split_heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        batch, n_tokens, _ = x.shape
        return x.view(batch, n_tokens, n_heads, self.head_dim).transpose(1, 2)  # (B, h, T, hd)

    def _project(self, source: torch.Tensor, rows: slice) -> torch.Tensor:
        """``source`` through the rows ``rows`` of ``qkv_proj`` only (cross-attention projects the
        queries and the keys/values from different inputs). Shapes: ``(B, T, d_model) -> (B, T, rows)``."""
        bias = None if self.qkv_proj.bias is None else self.qkv_proj.bias[rows]
        return F.linear(source, self.qkv_proj.weight[rows], bias)

    def _project_kv(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self._project(source, slice(self.d_model, None)).split(self.kv_width, dim=-1)
        return self._split_heads(keys, self.n_kv_heads), self._split_heads(values, self.n_kv_heads)

    def _cross_kv(self, context: torch.Tensor,
                  cache: LayerKVCache | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the encoder output: projected once per cache, then reused."""
        if cache is None:
            return self._project_kv(context)
        if cache.memory_keys is None:
            cache.memory_keys, cache.memory_values = self._project_kv(context)
        elif cache.memory_keys.shape[0] != context.shape[0] or cache.memory_keys.shape[2] != context.shape[1]:
            raise ValueError(
                f"this cache holds cross-attention keys for {cache.memory_keys.shape[0]} sources of "
                f"{cache.memory_keys.shape[2]} tokens, but the encoder output has shape "
                f"{tuple(context.shape[:2])}; call cache.reset() before decoding a new source.")
        return cache.memory_keys, cache.memory_values

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None, *,
                mask: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                rope_positions: torch.Tensor | None = None, cache: LayerKVCache | None = None,
                need_weights: bool = False, is_causal: bool = False):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), got "
                             f"{tuple(x.shape)}.")
        is_self_attention = context is None
        if not is_self_attention and (context.dim() != 3 or context.shape[0] != x.shape[0]
                                      or context.shape[-1] != self.d_model):
            raise ValueError(f"context must have shape (B={x.shape[0]}, S, d_model={self.d_model}), got "
                             f"{tuple(context.shape)}: it is the encoder output, one row per row of x and as wide "
                             f"as the model; encode one source per target with an encoder of this d_model.")
        if not is_self_attention and rope_positions is not None:
            raise ValueError("rope_positions apply to self-attention only; in cross-attention the "
                             "keys come from the encoder and are not rotated.")
        batch, n_queries, _ = x.shape
        if is_self_attention:
            q, k, v = self.qkv_proj(x).split((self.d_model, self.kv_width, self.kv_width), dim=-1)
            q = self._split_heads(q, self.n_heads)                          # (B, H, Tq, hd)
            k = self._split_heads(k, self.n_kv_heads)                       # (B, Hkv, Tq, hd)
            v = self._split_heads(v, self.n_kv_heads)
            if rope_positions is not None:
                q = apply_rope(q, rope_positions, self.rope_base, pairing=self.rope_pairing)
                k = apply_rope(k, rope_positions, self.rope_base, pairing=self.rope_pairing)
            if cache is not None:
                k, v = cache.append(k, v)                                   # (B, Hkv, Tcache, hd)
        else:
            q = self._split_heads(self._project(x, slice(0, self.d_model)), self.n_heads)  # (B, H, Tq, hd)
            k, v = self._cross_kv(context, cache)                           # (B, Hkv, S, hd)
        if k.dtype != q.dtype:             # a cache kept in another dtype is read back in the queries' dtype
            k, v = k.to(q.dtype), v.to(q.dtype)
        if mask is not None:
            _check_mask_shape(mask, (batch, self.n_heads, n_queries, k.shape[2]))
        if bias is not None:
            _check_bias_shape(bias, (batch, self.n_heads, n_queries, k.shape[2]))
        if self.n_kv_heads != self.n_heads:
            group = self.n_heads // self.n_kv_heads
            k = k.repeat_interleave(group, dim=1)                           # (B, H, Tk, hd)
            v = v.repeat_interleave(group, dim=1)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = _attend(q, k, v, mask, bias, dropout_p, need_weights,  # (B, H, Tq, hd)
                               is_causal)
        out = out.transpose(1, 2).reshape(batch, n_queries, self.d_model)
        return self.out_proj(out), weights

"""Position information for a permutation-equivariant attention stack.

Self-attention treats its input as a set: permuting the tokens permutes the output the same way.
Every scheme below breaks that symmetry in a different place:

===================== ======================================= ==================================
scheme                where it acts                           paper
===================== ======================================= ==================================
sinusoidal            added to the token embeddings           Vaswani et al. 2017
learned absolute      added to the token embeddings           GPT-2, BERT
T5 relative bias      added to the attention scores           Raffel et al. 2020
ALiBi                 added to the attention scores           Press et al. 2022
RoPE                  rotates queries and keys                Su et al. 2021 (RoFormer)
===================== ======================================= ==================================

Conventions: positions are integers counted from 0. Where queries and keys differ in number
(decoding with a KV cache), the queries are the *last* ``n_queries`` positions of the key sequence,
as in :func:`transformer_core.attention.causal_mask`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "sinusoidal_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "t5_relative_bucket",
    "RelativePositionBias",
    "alibi_slopes",
    "alibi_bias",
    "apply_rope",
    "ROPE_PAIRINGS",
]


def sinusoidal_encoding(n_positions: int, d_model: int) -> torch.Tensor:
    """The sinusoidal position table of "Attention Is All You Need" (2017).

    ``PE[p, 2i] = sin(p / 10000^(2i / d_model))`` and ``PE[p, 2i + 1] = cos(p / 10000^(2i / d_model))``:
    even columns hold sines, odd columns cosines, and column pair ``i`` turns at frequency
    ``10000^(-2i / d_model)``. Because each pair is a point on a circle, ``PE[p + k]`` is ``PE[p]``
    rotated by a fixed angle per pair that depends only on ``k``.

    Args:
        n_positions: number of positions (rows), at least 1.
        d_model: width of the table; must be even (sin/cos come in pairs).

    Shapes:
        returns ``(n_positions, d_model)``, float32.

    Example:
        >>> sinusoidal_encoding(4, 6)[0]
        tensor([0., 1., 0., 1., 0., 1.])
    """
    if n_positions < 1:
        raise ValueError(f"n_positions must be at least 1, got {n_positions}.")
    if d_model < 2 or d_model % 2 != 0:
        raise ValueError(
            f"d_model must be a positive even number because sines and cosines come in pairs; got "
            f"d_model={d_model}. Use an even width such as {d_model + 1 if d_model % 2 else 2}.")
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]          # (P, 1)
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    angles = positions * frequencies                                               # (P, d/2)
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.float()


def _check_fits(offset: int, n_tokens: int, max_len: int, what: str, remedy: str) -> None:
    if offset < 0:
        raise ValueError(f"offset must be non-negative, got {offset}.")
    if offset + n_tokens > max_len:
        raise ValueError(
            f"{what}: positions {offset}..{offset + n_tokens - 1} were requested but only "
            f"positions 0..{max_len - 1} exist (max_len={max_len}). {remedy}")


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table (:func:`sinusoidal_encoding`) to token embeddings.

    The table is a non-persistent buffer (it is recomputed, never saved in checkpoints).

    Args:
        d_model: embedding width (even).
        max_len: number of precomputed positions.

    Shapes:
        ``forward(x, offset=0, positions=None)``: x ``(B, T, d_model)`` -> ``(B, T, d_model)``, where
        position ``t`` of ``x`` receives row ``offset + t`` of the table (``offset`` is the number of
        tokens already in a KV cache), or row ``positions[b, t]`` for per-row positions ``(B, T)``.

    Example:
        >>> pe = SinusoidalPositionalEncoding(16, max_len=32)
        >>> pe(torch.zeros(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0, positions: torch.Tensor | None = None) -> torch.Tensor:
        n_tokens = x.shape[-2]
        _check_fits(offset, n_tokens, self.max_len, "SinusoidalPositionalEncoding",
                    "Sinusoids extrapolate, the table is only precomputed: build the module (or the "
                    "model config) with a larger max_len.")
        rows = self.table[offset:offset + n_tokens] if positions is None else self.table[positions]
        return x + rows.to(x.dtype)


class LearnedPositionalEmbedding(nn.Module):
    """A trained vector per absolute position (GPT-2, BERT), added to the token embeddings.

    A learned table has rows only for ``0 .. max_len - 1``: it cannot extrapolate to longer inputs.

    Args:
        max_len: number of positions (rows of ``weight``).
        d_model: embedding width.

    Shapes:
        ``weight``: ``(max_len, d_model)``, initialised from N(0, 0.02^2).
        ``forward(x, offset=0, positions=None)``: x ``(B, T, d_model)`` -> ``(B, T, d_model)``; position
        ``t`` of ``x`` receives row ``offset + t``, or row ``positions[b, t]`` when per-row positions
        ``(B, T)`` are given (left-padded batches; they never exceed ``offset + t``).

    Example:
        >>> emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
        >>> emb(torch.zeros(1, 3, 4)).shape
        torch.Size([1, 3, 4])
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.d_model = d_model
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x: torch.Tensor, offset: int = 0, positions: torch.Tensor | None = None) -> torch.Tensor:
        n_tokens = x.shape[-2]
        _check_fits(offset, n_tokens, self.max_len, "LearnedPositionalEmbedding",
                    "Learned positions cannot extrapolate beyond the table they were trained with: "
                    "shorten the input, or use position='sinusoidal', 'rope', 'alibi' or 't5'.")
        return x + (self.weight[offset:offset + n_tokens] if positions is None else self.weight[positions])


def t5_relative_bucket(relative_position: torch.Tensor, bidirectional: bool = True,
                       num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """Map relative positions to T5's buckets (Raffel et al. 2020, Mesh TensorFlow's rule).

    ``relative_position = key_position - query_position``. With ``bidirectional=True`` half of the
    buckets serve keys after the query and half keys before (or at) it; with ``bidirectional=False``
    (causal decoders) keys after the query all fall in bucket 0. Within a direction, the first half
    of the buckets hold distances ``0 .. n_exact - 1`` exactly; the remaining buckets cover distances
    ``n_exact .. max_distance`` on a logarithmic scale, and anything farther shares the last bucket.

    Args:
        relative_position: integer tensor of ``key - query`` offsets.
        bidirectional: whether keys on both sides of the query get distinct buckets.
        num_buckets: total number of buckets (at least 4 when bidirectional, 2 otherwise).
        max_distance: distance at which the logarithmic buckets end.

    Shapes:
        returns a ``torch.long`` tensor with the shape of ``relative_position``, values in
        ``[0, num_buckets)``.

    Example:
        >>> t5_relative_bucket(torch.tensor([-3, 0, 3]))
        tensor([ 3,  0, 19])
    """
    if relative_position.is_floating_point():
        raise TypeError("relative_position must be an integer tensor (key - query positions).")
    minimum = 4 if bidirectional else 2
    if num_buckets < minimum:
        raise ValueError(f"num_buckets must be at least {minimum} here, got {num_buckets}.")
    distance = -relative_position  # > 0 when the key lies before the query
    bucket = torch.zeros_like(relative_position, dtype=torch.long)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (distance < 0).long() * num_buckets  # keys after the query: upper half
        distance = distance.abs()
    else:
        distance = distance.clamp(min=0)                       # keys after the query: bucket 0
    n_exact = num_buckets // 2
    if max_distance <= n_exact:
        raise ValueError(f"max_distance ({max_distance}) must exceed the number of exact buckets "
                         f"({n_exact}).")
    is_exact = distance < n_exact
    # clamp(min=1) only keeps log() finite for the exact entries, which torch.where discards anyway.
    log_ratio = torch.log(distance.clamp(min=1).float() / n_exact) / math.log(max_distance / n_exact)
    log_bucket = n_exact + (log_ratio * (num_buckets - n_exact)).long()
    log_bucket = log_bucket.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_exact, distance.long(), log_bucket)


class RelativePositionBias(nn.Module):
    """T5's learned relative position bias: one scalar per (bucket, head) added to the scores.

    Args:
        n_heads: number of attention heads (one bias column each).
        bidirectional: True for encoders, False for causal decoders.
        num_buckets: number of buckets (see :func:`t5_relative_bucket`).
        max_distance: where the logarithmic buckets end.

    Shapes:
        ``embedding.weight``: ``(num_buckets, n_heads)``.
        ``forward(n_queries, n_keys, device=None)`` -> ``(1, n_heads, n_queries, n_keys)``; the
        queries are the last ``n_queries`` of the ``n_keys`` positions.

    Example:
        >>> RelativePositionBias(4)(3, 5).shape
        torch.Size([1, 4, 3, 5])
    """

    def __init__(self, n_heads: int, *, bidirectional: bool = True, num_buckets: int = 32,
                 max_distance: int = 128):
        super().__init__()
        self.n_heads = n_heads
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.embedding = nn.Embedding(num_buckets, n_heads)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=0.02)

    def forward(self, n_queries: int, n_keys: int, device: torch.device | None = None) -> torch.Tensor:
        if n_keys < n_queries:
            raise ValueError(f"n_keys ({n_keys}) must be at least n_queries ({n_queries}): the "
                             "queries are the last positions of the key sequence.")
        device = self.embedding.weight.device if device is None else device
        query_pos = torch.arange(n_keys - n_queries, n_keys, device=device)
        key_pos = torch.arange(n_keys, device=device)
        relative = key_pos[None, :] - query_pos[:, None]                       # (Tq, Tk)
        buckets = t5_relative_bucket(relative, self.bidirectional, self.num_buckets,
                                     self.max_distance)
        return self.embedding(buckets).permute(2, 0, 1).unsqueeze(0)           # (1, H, Tq, Tk)


def _power_of_two_slopes(n: int) -> list[float]:
    # The geometric sequence that starts at 2^(-8/n) and has ratio 2^(-8/n).
    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The per-head slopes of ALiBi (Press, Smith and Lewis, ICLR 2022), for any number of heads.

    For ``n`` a power of two, head ``h = 1..n`` gets ``2^(-8h/n)`` (8 heads: 1/2, 1/4, ..., 1/256).
    Otherwise, with ``m`` the largest power of two below ``n``, the first ``m`` slopes are those of
    ``m`` heads and the remaining ``n - m`` are every other slope of ``2m`` heads
    (the 1st, 3rd, 5th, ...), as in the paper's official code. The formula ``2^(-8h/n)`` alone is
    only correct for powers of two.

    Args:
        n_heads: number of attention heads, at least 1.

    Shapes:
        returns ``(n_heads,)``, float32.

    Example:
        >>> alibi_slopes(6)
        tensor([0.2500, 0.0625, 0.0156, 0.0039, 0.5000, 0.1250])
    """
    if n_heads < 1:
        raise ValueError(f"n_heads must be at least 1, got {n_heads}.")
    closest = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = _power_of_two_slopes(closest)
    if closest != n_heads:
        slopes += _power_of_two_slopes(2 * closest)[0::2][:n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, n_queries: int, n_keys: int, *,
               device: torch.device | None = None) -> torch.Tensor:
    """ALiBi's additive score bias ``-slope_h * |i - j|`` for query position i and key position j.

    The queries are the last ``n_queries`` of the ``n_keys`` positions (as with
    :func:`~transformer_core.attention.causal_mask`), so the same bias serves decoding with a KV
    cache. Under a causal mask only ``j <= i`` matters and this equals the paper's bias; without a
    mask (encoders) the distance is symmetric.

    Args:
        n_heads: number of heads (see :func:`alibi_slopes`).
        n_queries: number of query positions.
        n_keys: number of key positions (at least ``n_queries``).
        device: where to create the tensor.

    Shapes:
        returns ``(n_heads, n_queries, n_keys)``, float32.

    Example:
        >>> alibi_bias(2, 3, 3)[0].abs()           # head 0 has slope 2^-4
        tensor([[0.0000, 0.0625, 0.1250],
                [0.0625, 0.0000, 0.0625],
                [0.1250, 0.0625, 0.0000]])
    """
    if n_keys < n_queries:
        raise ValueError(f"n_keys ({n_keys}) must be at least n_queries ({n_queries}): the queries "
                         "are the last positions of the key sequence.")
    query_pos = torch.arange(n_keys - n_queries, n_keys, device=device)
    key_pos = torch.arange(n_keys, device=device)
    distance = (query_pos[:, None] - key_pos[None, :]).abs().float()           # (Tq, Tk)
    slopes = alibi_slopes(n_heads).to(device)
    return -slopes[:, None, None] * distance                                   # (H, Tq, Tk)


ROPE_PAIRINGS = ("interleaved", "half")


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0, *,
               pairing: str = "interleaved") -> torch.Tensor:
    """Rotary position embedding (RoFormer, Su et al. 2021).

    The ``d_head`` features form ``d_head / 2`` pairs; pair ``i`` is rotated by the angle
    ``pos * base^(-2i / d_head)`` (``theta_i``): ``(a, b) -> (a cos - b sin, a sin + b cos)``.
    Applied to both queries and keys, the dot product ``q_m . k_n`` then depends on the positions
    only through ``m - n``, and the rotation keeps every vector's norm. Which features form a pair
    is a convention, and checkpoints differ:

    * ``pairing="interleaved"`` (the RoFormer paper, Meta's original Llama code, GPT-J): pair ``i``
      is ``(x[2i], x[2i+1])``, neighbours;
    * ``pairing="half"`` (Hugging Face's Llama, Mistral, Qwen, SmolLM: ``rotate_half``): pair ``i`` is
      ``(x[i], x[i + d_head/2])``, the two halves of the head.

    The two are the same function up to a fixed permutation of each head's features: with
    ``perm = [0, d/2, 1, d/2 + 1, ...]``, ``apply_rope(x[..., perm], pairing="interleaved") ==
    apply_rope(x, pairing="half")[..., perm]``. A model computes the same scores with either
    convention as long as its query and key weights are laid out for it, which is why a converter
    between conventions permutes the rows of ``W_q`` and ``W_k`` head by head (see
    :func:`transformer_core.convert.llama_from_hf`); the values and ``W_o`` are untouched.

    The angles are computed in float32 and the result is returned in ``x``'s dtype.

    Args:
        x: queries or keys, last dimension ``d_head`` (even).
        positions: integer (or float) positions, ``(T,)`` or broadcastable to ``x.shape[:-1]``.
        base: the frequency base ``theta`` (10000 in the paper and GPT-NeoX; 500000 in Llama 3,
            100000 in SmolLM2-135M): larger bases rotate the slow pairs more slowly, for longer contexts.
        pairing: ``"interleaved"`` or ``"half"`` (see above).

    Shapes:
        x ``(..., T, d_head)``, positions ``(T,)`` -> ``(..., T, d_head)``.

    Example:
        >>> q = torch.randn(2, 4, 5, 8)          # (B, n_heads, T, head_dim)
        >>> apply_rope(q, torch.arange(5)).shape
        torch.Size([2, 4, 5, 8])
        >>> perm = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])
        >>> torch.allclose(apply_rope(q[..., perm], torch.arange(5)),
        ...                apply_rope(q, torch.arange(5), pairing="half")[..., perm])
        True
    """
    d_head = x.shape[-1]
    if d_head % 2 != 0:
        raise ValueError(f"RoPE rotates feature pairs, so the head dimension must be even; got "
                         f"{d_head}. Choose d_model and n_heads so that d_model // n_heads is even.")
    if pairing not in ROPE_PAIRINGS:
        raise ValueError(f"pairing must be one of {ROPE_PAIRINGS} ('interleaved': pairs (x[2i], x[2i+1]) "
                         f"as in RoFormer; 'half': pairs (x[i], x[i + d/2]) as in Hugging Face's Llama), "
                         f"got {pairing!r}")
    if positions.dim() == 1 and positions.shape[0] != x.shape[-2]:
        raise ValueError(f"positions has {positions.shape[0]} entries but x has {x.shape[-2]} "
                         "positions (dimension -2); pass one position per token.")
    # 1 / base^(2i/d), computed as Hugging Face's Llama computes it, so that converted checkpoints
    # rotate by bit-identical angles.
    inv_freq = 1.0 / (base ** (torch.arange(0, d_head, 2, device=x.device, dtype=torch.float32) / d_head))
    angles = positions.to(device=x.device, dtype=torch.float32)[..., None] * inv_freq  # (..., T, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if pairing == "interleaved":
        pairs = x.float().unflatten(-1, (d_head // 2, 2))                      # (..., T, d/2, 2)
        first, second = pairs[..., 0], pairs[..., 1]
    else:
        first, second = x.float().chunk(2, dim=-1)                             # (..., T, d/2) each
    rotated = (first * cos - second * sin, first * sin + second * cos)
    if pairing == "interleaved":
        return torch.stack(rotated, dim=-1).flatten(-2).to(x.dtype)
    return torch.cat(rotated, dim=-1).to(x.dtype)

"""Counting what a Transformer costs: parameters, FLOPs, memory, KV-cache bytes and MFU.

Everything here is a pure function of sizes: no tensors are created and no model is built (the
tests check every parameter count against ``sum(p.numel())`` of the real modules in
:mod:`transformer_core.models`).

Conventions:

* A FLOP is one floating-point multiply or add, so multiplying an ``(m, k)`` by a ``(k, n)``
  matrix costs ``2 m k n`` FLOPs (a multiply and an add per term).
* FLOP counts keep only the matrix multiplications, which dominate; softmax, norms, biases and
  activations add a few FLOPs per element and are left out, as in Kaplan et al. (2020, Table 1)
  and PaLM (Chowdhery et al., 2022, Appendix B).
* ``n`` (or ``N``) is a sequence length, ``m`` (or ``M``) a second one (keys, or the target
  side of an encoder-decoder), ``d`` the model width, ``k`` a convolution's kernel size.

References:

* Vaswani et al. (2017), "Attention Is All You Need", Table 1 (per-layer cost of self-attention,
  recurrent and convolutional layers) and Table 3 (the base model, 65M parameters).
* Kaplan et al. (2020), "Scaling Laws for Neural Language Models", Section 2.1 and Table 1
  (forward FLOPs per token ``2N + 2 n_layer n_ctx d_attn``).
* Hoffmann et al. (2022), "Training Compute-Optimal Large Language Models" (Chinchilla),
  Appendix F (the detailed FLOP count; the backward pass costs twice the forward pass).
* Chowdhery et al. (2022), "PaLM", Appendix B (training FLOPs per token ``6N + 12 L H Q T`` and
  the definition of model FLOPs utilisation, MFU).
"""

from __future__ import annotations

import math
from numbers import Real

__all__ = [
    "ARCHITECTURES",
    "attention_parameters",
    "ffn_parameters",
    "layer_norm_parameters",
    "parameter_counts",
    "transformer_base_config",
    "flops_per_token",
    "training_flops",
    "rnn_layer_flops",
    "cnn_layer_flops",
    "self_attention_layer_flops",
    "attention_flops",
    "attention_memory_bytes",
    "encoder_decoder_attention_flops",
    "kv_cache_bytes",
    "mfu",
]


def _positive_int(value, name: str, *, allow_zero: bool = False) -> int:
    lowest = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise ValueError(f"{name} must be an integer >= {lowest}, got {value!r}")
    return value


def _positive_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------

ARCHITECTURES = ("encoder_only", "decoder_only", "encoder_decoder")


def attention_parameters(d_model: int, n_heads: int, n_kv_heads: int | None = None, *,
                         bias: bool = True) -> int:
    """Parameters of one :class:`~transformer_core.attention.MultiHeadAttention`.

    ``q_proj`` and ``out_proj`` are ``d x d``; ``k_proj`` and ``v_proj`` are
    ``d x (n_kv_heads * head_dim)`` (``d x d`` without grouped-query attention), each with a bias when ``bias``. Without grouped
    queries this is ``4 d^2 + 4 d``: the number of heads does not matter, only ``d``.

    Args:
        d_model: model width ``d``.
        n_heads: query heads (must divide ``d_model``).
        n_kv_heads: key/value heads (default ``n_heads``; must divide ``n_heads``).
        bias: whether the projections have biases.

    Returns:
        The parameter count.

    Example:
        >>> attention_parameters(512, 8)
        1050624
    """
    d_model, n_heads = _positive_int(d_model, "d_model"), _positive_int(n_heads, "n_heads")
    n_kv_heads = n_heads if n_kv_heads is None else _positive_int(n_kv_heads, "n_kv_heads")
    if d_model % n_heads or n_heads % n_kv_heads:
        raise ValueError(f"need n_heads | d_model and n_kv_heads | n_heads, got d_model={d_model}, "
                         f"n_heads={n_heads}, n_kv_heads={n_kv_heads}")
    kv_width = n_kv_heads * (d_model // n_heads)
    weights = 2 * d_model * d_model + 2 * d_model * kv_width
    biases = 2 * d_model + 2 * kv_width if bias else 0
    return weights + biases


def ffn_parameters(d_model: int, d_ff: int, *, bias: bool = True, gated: bool = False) -> int:
    """Parameters of one :class:`~transformer_core.layers.FeedForward`: ``2 d d_ff`` + biases ``d_ff + d``;
    gated (SwiGLU), ``3 d d_ff`` + biases ``2 d_ff + d``.

    Args:
        d_model: model width ``d``.
        d_ff: hidden width.
        bias: whether the linear layers have biases.
        gated: with ``gate_proj`` (a gated FFN such as SwiGLU).

    Returns:
        The parameter count.

    Example:
        >>> ffn_parameters(512, 2048)
        2099712
    """
    d_model, d_ff = _positive_int(d_model, "d_model"), _positive_int(d_ff, "d_ff")
    if gated:
        return 3 * d_model * d_ff + ((2 * d_ff + d_model) if bias else 0)
    return 2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)


def layer_norm_parameters(d_model: int, *, bias: bool = True) -> int:
    """Parameters of one :class:`~transformer_core.layers.LayerNorm`: gain and bias, ``2 d`` (``d``
    without the bias).

    Args:
        d_model: model width ``d``.
        bias: whether the LayerNorm has a bias.

    Returns:
        The parameter count.
    """
    return (2 if bias else 1) * _positive_int(d_model, "d_model")


def parameter_counts(config, architecture: str = "decoder_only", *,
                     share_source_target_embeddings: bool = False) -> dict[str, int]:
    """Parameters of a model built from ``config``, component by component.

    The counts equal ``sum(p.numel() for p in model.parameters())`` of the corresponding class in
    :mod:`transformer_core.models` (shared tensors counted once), component by component:

    ================== =====================================================================
    key                what
    ================== =====================================================================
    ``embedding``      token tables, learned position table(s), segment table
    ``position_bias``  T5 relative-bias tables (one per self-attention stack)
    ``attention``      all ``q/k/v/out`` projections (self- and cross-attention)
    ``ffn``            all feed-forward networks
    ``norms``          every LayerNorm: in the blocks, after the embeddings, after the stacks
    ``head``           the output head: 0 when tied to the token embedding, except BERT's
                       masked-LM head, whose transform, norm and output bias are always its own
    ``total``          the sum
    ================== =====================================================================

    Args:
        config: a :class:`~transformer_core.models.TransformerConfig`.
        architecture: ``"encoder_only"`` (:class:`~transformer_core.models.EncoderOnlyModel`,
            including its masked-LM head), ``"decoder_only"``
            (:class:`~transformer_core.models.DecoderOnlyLM`) or ``"encoder_decoder"``
            (:class:`~transformer_core.models.EncoderDecoderModel`).
        share_source_target_embeddings: for ``"encoder_decoder"``, count one token table for source
            and target, as in the 2017 paper's shared vocabulary (needs
            ``src_vocab_size == vocab_size``). The model classes keep two tables; sharing them
            means assigning ``model.src_embeddings.token.weight = model.tgt_embeddings.token.weight``.

    Returns:
        A dict with the keys above.

    Example:
        >>> parameter_counts(transformer_base_config(), "encoder_decoder",
        ...                  share_source_target_embeddings=True)["total"]
        63082496
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {architecture!r}")
    if share_source_target_embeddings and (architecture != "encoder_decoder"
                                           or config.src_vocab_size != config.vocab_size):
        raise ValueError("share_source_target_embeddings needs architecture='encoder_decoder' and "
                         f"src_vocab_size == vocab_size (got {architecture!r}, "
                         f"{config.src_vocab_size} and {config.vocab_size})")
    d = config.d_model
    attention = attention_parameters(d, config.n_heads, config.n_kv_heads, bias=config.bias)
    ffn = ffn_parameters(d, config.d_ff, bias=config.bias, gated=getattr(config, "gated_ffn", False))
    # An RMSNorm has a gain and never a bias.
    norm = layer_norm_parameters(d, bias=config.bias and getattr(config, "norm", "layernorm") == "layernorm")
    position_table = config.max_len * d if config.position == "learned" else 0
    relative_table = config.relative_num_buckets * config.n_heads if config.position == "t5" else 0
    embedding_norm = norm if config.embedding_norm else 0

    if architecture == "encoder_decoder":
        n_enc, n_dec = config.n_encoder_layers, config.n_decoder_layers
        source_table = 0 if share_source_target_embeddings else config.src_vocab_size * d
        counts = {
            "embedding": source_table + config.vocab_size * d + 2 * position_table,
            "position_bias": 2 * relative_table,
            "attention": (n_enc + 2 * n_dec) * attention,
            "ffn": (n_enc + n_dec) * ffn,
            "norms": ((2 * n_enc + 3 * n_dec) * norm + 2 * embedding_norm
                      + (2 * norm if config.final_norm else 0)),
            "head": 0 if config.tie_weights else config.vocab_size * d,
        }
    else:
        n_layers = config.n_layers
        segment_table = config.n_segments * d if architecture == "encoder_only" else 0
        counts = {
            "embedding": config.vocab_size * d + position_table + segment_table,
            "position_bias": relative_table,
            "attention": n_layers * attention,
            "ffn": n_layers * ffn,
            "norms": 2 * n_layers * norm + embedding_norm + (norm if config.final_norm else 0),
        }
        if architecture == "decoder_only":
            counts["head"] = 0 if config.tie_weights else config.vocab_size * d
        else:
            # transform (d x d + bias), its LayerNorm, output bias, and the output weight unless tied.
            counts["head"] = (d * d + d + layer_norm_parameters(d) + config.vocab_size
                              + (0 if config.tie_weights else config.vocab_size * d))
    counts["total"] = sum(counts.values())
    return counts


def transformer_base_config(**overrides):
    """The base model of Vaswani et al. (2017), as a :class:`~transformer_core.models.TransformerConfig`.

    ``d_model = 512``, 8 heads, ``d_ff = 2048``, 6 encoder and 6 decoder layers, ReLU, Post-LN
    without a final LayerNorm, sinusoidal positions, dropout 0.1, embeddings scaled by
    ``sqrt(d_model)``, and the WMT 2014 English-German setting: a shared source-target BPE vocabulary
    of about 37000 tokens (Section 5.1) with the two embeddings and the pre-softmax projection
    sharing one matrix (Section 3.4). ``max_len`` (512 here) only sizes the fixed sinusoidal table.

    Parameter count (:func:`parameter_counts` with ``share_source_target_embeddings=True``):

    ======================================================= ==============
    shared 37000 x 512 embedding (also the output head)        18,944,000
    6 encoder layers x 3,152,384                               18,914,304
    (attention 1,050,624, FFN 2,099,712, 2 LayerNorms 2,048)
    6 decoder layers x 4,204,032                               25,224,192
    (2 attentions 2,101,248, FFN 2,099,712, 3 LayerNorms 3,072)
    total                                                      63,082,496
    ======================================================= ==============

    The paper's Table 3 lists 65M for this model. It does not say how that number was counted,
    and counting the architecture as described gives 63.1M; we do not know the source of the
    1.9M difference (it equals about 3,700 rows of the 512-wide embedding, so a larger effective
    vocabulary than the stated "about 37000" tokens would explain it, but the paper does not
    confirm this). Untying the source and target embeddings would give 82.0M, far above 65M.

    Args:
        overrides: fields to change (e.g. ``vocab_size=32000`` for the English-French word pieces).

    Returns:
        A :class:`~transformer_core.models.TransformerConfig`.
    """
    from .models import TransformerConfig

    fields = dict(vocab_size=37000, d_model=512, n_heads=8, n_layers=6, d_ff=2048, max_len=512,
                  dropout=0.1, activation="relu", norm_first=False, position="sinusoidal",
                  tie_weights=True, final_norm=False, scale_embeddings=True)
    fields.update(overrides)
    return TransformerConfig(**fields)


# ---------------------------------------------------------------------------------------------
# FLOPs per token (Kaplan et al. 2020; Hoffmann et al. 2022, App. F; Chowdhery et al. 2022, App. B)
# ---------------------------------------------------------------------------------------------

def flops_per_token(config, context_len: int | None = None, *, training: bool = False) -> int:
    """Matrix-multiplication FLOPs per token of a decoder-only model, forward or forward + backward.

    ``forward = 2 N + 4 L T d`` and ``training = 3 x forward = 6 N + 12 L T d``, where

    * ``N`` counts the weights that multiply every token: the attention and feed-forward
      matrices of all ``L`` layers plus the output head (``V x d``, tied or not: the lookup of the
      input embedding costs nothing, the head is a full matrix product). Biases, norms and position
      tables are left out;
    * ``4 L T d`` is attention over a context of ``T`` tokens: ``Q K^T`` and the weighted sum, ``2 T d``
      each per layer, counting the full context as PaLM does (a causal model could skip half);
    * the backward pass costs twice the forward pass (gradients with respect to the activations
      and to the weights), hence the factor 3 (Hoffmann et al., 2022, Appendix F).

    This is PaLM's ``6N + 12 L H Q T`` (Chowdhery et al., 2022, Appendix B) with ``H Q = d``.
    Kaplan et al. (2020) write the forward attention term as ``2 n_layer n_ctx d_attn``, counting
    one of the two context-sized products; PaLM's ``12 L H Q T`` for training counts both, as here.
    The tests check this count against ``torch.utils.flop_counter.FlopCounterMode`` on a real model.

    Args:
        config: a :class:`~transformer_core.models.TransformerConfig`.
        context_len: the context ``T`` each token attends over (default ``config.max_len``).
        training: count forward + backward instead of the forward pass alone.

    Returns:
        FLOPs per token.

    Example:
        >>> from transformer_core.models import TransformerConfig
        >>> flops_per_token(TransformerConfig.gpt2(), training=True) / 1e9  # GPT-2 small, T = 1024
        0.8544384
    """
    d, n_layers = config.d_model, config.n_layers
    context_len = config.max_len if context_len is None else _positive_int(context_len, "context_len")
    kv_width = config.n_kv_heads * config.head_dim
    ffn_matrices = 3 if getattr(config, "gated_ffn", False) else 2          # SwiGLU has a gate matrix
    per_layer = 2 * d * d + 2 * d * kv_width + ffn_matrices * d * config.d_ff
    n_matmul = n_layers * per_layer + config.vocab_size * d
    forward = 2 * n_matmul + 4 * n_layers * context_len * d
    return 3 * forward if training else forward


def nanogpt_flops_per_token(model, context_len: int) -> int:
    """Training FLOPs per token as nanoGPT's ``estimate_mfu`` counts them, for side-by-side MFU figures.

    nanoGPT computes ``6 N' + 12 L H Q T`` with ``N'`` = every parameter except the learned position
    table (``get_num_params()``): unlike :func:`flops_per_token` it also counts LayerNorm gains and
    biases, which multiply nothing. The two counts differ by ``6 x`` (norm and bias parameters),
    under 0.1% for GPT-2 small; an MFU printed with this count compares directly with nanoGPT's.

    Args:
        model: a :class:`~transformer_core.models.DecoderOnlyLM`.
        context_len: the training context ``T``.
    """
    position = model.embeddings.position
    n_position = 0 if position is None else sum(p.numel() for p in position.parameters())
    config = model.config
    return 6 * (model.num_parameters() - n_position) + 12 * config.n_layers * config.d_model * context_len


def training_flops(n_parameters: int, n_tokens: int) -> int:
    """Total training compute ``C = 6 N D`` for ``N`` parameters and ``D`` training tokens.

    The context term of :func:`flops_per_token` is left out, as in Kaplan et al. (2020) and
    Hoffmann et al. (2022): with ``N ~ 12 L d^2`` it is ``12 L T d / 72 L d^2 = T / (6 d)`` of the
    total, small while the context ``T`` is much shorter than ``6 d``.

    Args:
        n_parameters: ``N``.
        n_tokens: ``D``.

    Returns:
        FLOPs.

    Example:
        >>> training_flops(70 * 10**9, 1400 * 10**9) / 1e21  # Chinchilla: 70B parameters, 1.4T tokens
        588.0
    """
    return 6 * _positive_int(n_parameters, "n_parameters") * _positive_int(n_tokens, "n_tokens")


# ---------------------------------------------------------------------------------------------
# Per-layer cost: recurrent vs convolutional vs self-attention (Vaswani et al., 2017, Table 1)
# ---------------------------------------------------------------------------------------------

def rnn_layer_flops(n: int, d: int) -> int:
    """FLOPs of one recurrent layer over ``n`` steps of width ``d``: ``4 n d^2``, i.e. O(n d^2).

    Each step computes ``h_t = tanh(W_h h_{t-1} + W_x x_t)`` with two ``d x d`` matrix-vector
    products (``2 d^2`` FLOPs each). The ``n`` steps must run one after another.

    Args:
        n: sequence length.
        d: hidden width (input width equal to it).

    Returns:
        The FLOP count.

    Example:
        >>> rnn_layer_flops(100, 512)
        104857600
    """
    n, d = _positive_int(n, "n"), _positive_int(d, "d")
    return 4 * n * d * d


def cnn_layer_flops(n: int, d: int, k: int) -> int:
    """FLOPs of one 1-D convolution layer, kernel ``k``, ``d`` channels in and out: ``2 k n d^2``.

    Each of the ``n`` output positions mixes ``k`` input vectors of width ``d`` into ``d`` outputs,
    so O(k n d^2); all positions can run in parallel.

    Args:
        n: sequence length.
        d: channels (input and output).
        k: kernel size.

    Returns:
        The FLOP count.

    Example:
        >>> cnn_layer_flops(100, 512, 3)
        157286400
    """
    n, d, k = _positive_int(n, "n"), _positive_int(d, "d"), _positive_int(k, "k")
    return 2 * k * n * d * d


def self_attention_layer_flops(n: int, d: int) -> int:
    """FLOPs of the attention itself in one self-attention layer: ``4 n^2 d``, i.e. O(n^2 d).

    ``Q K^T`` costs ``2 n^2 d`` and multiplying the ``(n, n)`` weights by ``V`` another ``2 n^2 d``.
    This is the quantity in Vaswani et al. (2017), Table 1; the ``Q, K, V, O`` projections
    (``8 n d^2``) are counted separately in :func:`attention_flops`. This attention core is cheaper than
    a recurrent layer (:func:`rnn_layer_flops`, ``4 n d^2``) while ``n < d``; the whole layer, with its
    projections, never is.

    Args:
        n: sequence length.
        d: model width (summed over all heads: splitting into heads does not change the count).

    Returns:
        The FLOP count.

    Example:
        >>> self_attention_layer_flops(100, 512)
        20480000
    """
    n, d = _positive_int(n, "n"), _positive_int(d, "d")
    return 4 * n * n * d


# ---------------------------------------------------------------------------------------------
# Attention: time and memory as functions of n and d
# ---------------------------------------------------------------------------------------------

def attention_flops(n: int, d: int, *, n_keys: int | None = None,
                    include_projections: bool = True) -> dict[str, int]:
    """Matrix-multiplication FLOPs of one multi-head attention layer, term by term.

    With ``n`` queries, ``m = n_keys`` keys (``m = n`` for self-attention) and width ``d``
    (all heads together):

    ==================== ================ ===========================================
    term                 FLOPs            what
    ==================== ================ ===========================================
    ``q_proj``           ``2 n d^2``      ``x W_q`` for the ``n`` query tokens
    ``kv_proj``          ``4 m d^2``      ``x W_k`` and ``x W_v`` for the ``m`` key tokens
    ``scores``           ``2 n m d``      ``Q K^T``
    ``weighted_sum``     ``2 n m d``      ``softmax(...) V``
    ``out_proj``         ``2 n d^2``      ``(...) W_o``
    ==================== ================ ===========================================

    For self-attention the total is ``8 n d^2 + 4 n^2 d``: the projections dominate while
    ``n < 2 d``, the ``n^2`` terms beyond.

    Args:
        n: number of queries (sequence length).
        d: model width ``d_model`` (= ``n_heads * head_dim``).
        n_keys: number of keys and values; ``None`` means ``n`` (self-attention).
        include_projections: count the four linear projections too.

    Returns:
        A dict with the terms above (projections only if included) and ``"total"``.

    Example:
        >>> attention_flops(4, 8)["scores"]
        256
    """
    n, d = _positive_int(n, "n"), _positive_int(d, "d")
    m = n if n_keys is None else _positive_int(n_keys, "n_keys")
    terms = {}
    if include_projections:
        terms["q_proj"] = 2 * n * d * d
        terms["kv_proj"] = 4 * m * d * d
    terms["scores"] = 2 * n * m * d
    terms["weighted_sum"] = 2 * n * m * d
    if include_projections:
        terms["out_proj"] = 2 * n * d * d
    terms["total"] = sum(terms.values())
    return terms


def attention_memory_bytes(n: int, n_heads: int, *, n_keys: int | None = None, batch_size: int = 1,
                           bytes_per_element: int = 4) -> int:
    """Bytes of the attention-weight matrices that naive attention materialises: O(n^2).

    Explicit attention stores a ``(B, n_heads, n, m)`` score matrix (and the softmax of it, of the
    same size, which backpropagation keeps). This returns the size of one such matrix; fused
    kernels such as FlashAttention never materialise it and need O(n) extra memory instead.

    Args:
        n: number of queries.
        n_heads: attention heads (each has its own ``n x m`` matrix).
        n_keys: number of keys; ``None`` means ``n``.
        batch_size: sequences in the batch.
        bytes_per_element: 4 for float32, 2 for float16 / bfloat16.

    Returns:
        ``batch_size * n_heads * n * m * bytes_per_element``.

    Example:
        >>> attention_memory_bytes(1024, 8)  # 32 MiB for one float32 layer
        33554432
    """
    n, n_heads = _positive_int(n, "n"), _positive_int(n_heads, "n_heads")
    m = n if n_keys is None else _positive_int(n_keys, "n_keys")
    batch_size = _positive_int(batch_size, "batch_size")
    bytes_per_element = _positive_int(bytes_per_element, "bytes_per_element")
    return batch_size * n_heads * n * m * bytes_per_element


def encoder_decoder_attention_flops(n_source: int, n_target: int, d: int) -> dict[str, int]:
    """The ``N^2 + M^2 + N M`` attention terms of one encoder-decoder layer pair.

    With ``N`` source tokens and ``M`` target tokens, the encoder's self-attention compares every
    source token with every source token (``N^2``), the decoder's self-attention every target
    token with every target token (``M^2``; half of it is masked by the causal mask, but dense
    kernels compute it anyway) and cross-attention every target token with every source token
    (``M N``). Each comparison costs ``4 d`` FLOPs (``2 d`` for ``Q K^T``, ``2 d`` for the weighted sum);
    projections are not included (see :func:`attention_flops`).

    Args:
        n_source: source length ``N``.
        n_target: target length ``M``.
        d: model width.

    Returns:
        ``{"encoder_self": 4 N^2 d, "decoder_self": 4 M^2 d, "cross": 4 M N d, "total": ...}``.

    Example:
        >>> encoder_decoder_attention_flops(10, 20, 1)["total"]
        2800
    """
    n, m = _positive_int(n_source, "n_source"), _positive_int(n_target, "n_target")
    d = _positive_int(d, "d")
    terms = {"encoder_self": 4 * n * n * d, "decoder_self": 4 * m * m * d, "cross": 4 * m * n * d}
    terms["total"] = sum(terms.values())
    return terms


# ---------------------------------------------------------------------------------------------
# KV cache and utilisation
# ---------------------------------------------------------------------------------------------

def kv_cache_bytes(n_layers: int, batch_size: int, n_tokens: int, n_kv_heads: int, head_dim: int,
                   bytes_per_element: int) -> int:
    """Size of a KV cache: ``2 x layers x batch x tokens x kv_heads x head_dim x bytes``.

    The factor 2 is one tensor for keys and one for values. With grouped-query attention
    ``n_kv_heads < n_heads`` and the cache shrinks by ``n_heads / n_kv_heads``.

    Args:
        n_layers: decoder layers (each caches its own K and V).
        batch_size: sequences decoded together.
        n_tokens: cached positions per sequence (prompt plus generated tokens, or the capacity of a
            preallocated cache).
        n_kv_heads: key/value heads.
        head_dim: width of one head.
        bytes_per_element: 4 for float32, 2 for float16 / bfloat16, 1 for int8.

    Returns:
        The number of bytes.

    Example:
        >>> kv_cache_bytes(12, 1, 1024, 12, 64, 2)  # GPT-2 small, 1024 tokens, float16: 36 MiB
        37748736
    """
    return (2 * _positive_int(n_layers, "n_layers") * _positive_int(batch_size, "batch_size")
            * _positive_int(n_tokens, "n_tokens", allow_zero=True)
            * _positive_int(n_kv_heads, "n_kv_heads") * _positive_int(head_dim, "head_dim")
            * _positive_int(bytes_per_element, "bytes_per_element"))


def mfu(tokens_per_second: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s as a fraction of the hardware's peak.

    ``MFU = tokens_per_second * flops_per_token / peak_flops`` (PaLM, Appendix B). Use the
    *model's* FLOPs per token (e.g. :func:`flops_per_token` with ``training=True`` while training),
    not what the hardware actually executed, so recomputation does not inflate it.

    Args:
        tokens_per_second: measured throughput.
        flops_per_token: FLOPs the model needs per token (forward, or forward + backward).
        peak_flops: the device's peak FLOP/s for the dtype used (e.g. 989e12 for dense bf16 on
            an H100 SXM); see :func:`course_runtime.device.peak_flops`.

    Returns:
        A fraction, normally in ``[0, 1]``.

    Example:
        >>> mfu(1000.0, 6e9, 312e12)  # 1000 tokens/s of a 1B-parameter model's training on an A100
        0.019230769230769232
    """
    tokens_per_second = _positive_number(tokens_per_second, "tokens_per_second")
    flops_per_token = _positive_number(flops_per_token, "flops_per_token")
    if peak_flops is None:
        raise ValueError("peak_flops is None: the device's peak is unknown; pass it explicitly "
                         "(e.g. 312e12 for an A100 in bf16)")
    peak_flops = _positive_number(peak_flops, "peak_flops")
    return tokens_per_second * flops_per_token / peak_flops

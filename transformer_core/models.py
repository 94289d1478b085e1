"""One configuration, three architectures, and the embedding-free encoder-decoder stack.

============================== ================================================ ========================
class                          what it is                                       famous example
============================== ================================================ ========================
:class:`EncoderOnlyModel`      bidirectional encoder + masked-LM head           BERT
:class:`DecoderOnlyLM`         causal decoder + next-token head, KV cache       GPT-2
:class:`EncoderDecoderModel`   encoder, decoder with cross-attention, head      2017 Transformer, T5
:class:`Transformer`           the encoder-decoder stack without embeddings     ``torch.nn.Transformer``
============================== ================================================ ========================

Every size and switch lives in :class:`TransformerConfig`. Position schemes: ``"sinusoidal"`` and
``"learned"`` are added to the embeddings; ``"alibi"`` and ``"t5"`` are additive attention biases
of the self-attention; ``"rope"`` rotates queries and keys; ``"none"`` leaves the model
permutation-equivariant. GPT-2 and BERT are presets (:meth:`TransformerConfig.gpt2`,
:meth:`TransformerConfig.bert`), so their checkpoints map onto these modules one to one.

The modern (Llama-style) decoder is the same :class:`DecoderOnlyLM` with four switches of the same
config, preset in :meth:`TransformerConfig.llama`: ``norm="rmsnorm"`` (RMSNorm instead of
LayerNorm), ``gated_ffn=True`` with ``activation="silu"`` (the SwiGLU MLP), ``position="rope"``
with ``rope_theta`` and ``rope_pairing`` (RoPE inside every self-attention), and
``n_kv_heads < n_heads`` (grouped-query attention, whose KV cache holds only the ``n_kv_heads``
key/value heads); ``bias=False`` and ``tie_weights`` as in SmolLM2.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import causal_mask
from .cache import KVCache, StaticKVCache
from .cache import is_compiling as _compiling
from .layers import (ACTIVATIONS, NORMS, DecoderLayer, EncoderLayer, LayerNorm, RMSNorm,
                     get_activation, make_norm)
from .positions import (ROPE_PAIRINGS, LearnedPositionalEmbedding, RelativePositionBias,
                        SinusoidalPositionalEncoding, alibi_bias)

__all__ = [
    "POSITIONS",
    "TransformerConfig",
    "check_token_ids",
    "Embeddings",
    "MaskedLMHead",
    "EncoderOnlyModel",
    "DecoderOnlyLM",
    "EncoderDecoderModel",
    "Transformer",
]

POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "t5", "none")
IGNORE_INDEX = -100


@dataclasses.dataclass
class TransformerConfig:
    """Every size and switch of the three architectures.

    Args:
        vocab_size: number of (target) token ids.
        d_model: model width.
        n_heads: attention heads; must divide ``d_model``.
        n_layers: number of blocks (encoder-only and decoder-only models; the default for both
            stacks of an encoder-decoder model).
        d_ff: feed-forward width (default ``4 * d_model``).
        max_len: longest sequence (size of the learned/sinusoidal tables; default KV-cache size).
        dropout: dropout probability everywhere (embeddings, attention weights, sub-layer outputs).
        activation: ``"relu"``, ``"gelu"`` (exact), ``"gelu_tanh"`` (GPT-2's approximation) or
            ``"silu"`` (with ``gated_ffn``: SwiGLU).
        norm_first: Pre-LN (True) or Post-LN (False).
        position: one of ``"sinusoidal"``, ``"learned"``, ``"rope"``, ``"alibi"``, ``"t5"``, ``"none"``.
        tie_weights: share the output head's weight with the (target) token embedding.
        n_segments: number of segment (token-type) embeddings for :class:`EncoderOnlyModel`; 0 = none.
        embedding_norm: LayerNorm after summing the embeddings (BERT).
        final_norm: LayerNorm after the last block (needed with Pre-LN; GPT-2 has one).
        layer_norm_eps: epsilon of every LayerNorm (1e-5 for GPT-2, 1e-12 for BERT).
        bias: biases in the attention and feed-forward linear layers and in the LayerNorms (the
            masked-LM head keeps its own).
        n_kv_heads: key/value heads for grouped-query attention (default ``n_heads``).
        n_encoder_layers: encoder blocks of :class:`EncoderDecoderModel` (default ``n_layers``).
        n_decoder_layers: decoder blocks of :class:`EncoderDecoderModel` (default ``n_layers``).
        src_vocab_size: source vocabulary of :class:`EncoderDecoderModel` (default ``vocab_size``).
        scale_embeddings: multiply token embeddings by ``sqrt(d_model)`` (the 2017 paper).
        relative_num_buckets: buckets of the T5 relative bias (``position="t5"``).
        relative_max_distance: where T5's logarithmic buckets end.
        norm: ``"layernorm"`` (every norm a :class:`~transformer_core.layers.LayerNorm`) or
            ``"rmsnorm"`` (:class:`~transformer_core.layers.RMSNorm`, Llama); ``layer_norm_eps`` is
            its epsilon either way.
        gated_ffn: gated feed-forward networks, ``down(act(gate(x)) * up(x))``: SwiGLU with
            ``activation="silu"`` (Llama), three ``d_model x d_ff`` matrices instead of two.
        rope_theta: RoPE's frequency base (``position="rope"``): 10000 in RoFormer, 100000 in
            SmolLM2-135M, 500000 in Llama 3.
        rope_pairing: which features RoPE rotates together: ``"interleaved"`` (``x[2i], x[2i+1]``,
            RoFormer) or ``"half"`` (``x[i], x[i + head_dim/2]``, Hugging Face's Llama); see
            :func:`~transformer_core.positions.apply_rope`.

    Example:
        >>> config = TransformerConfig(vocab_size=65, d_model=128, n_heads=4, n_layers=4, max_len=64)
        >>> config.d_ff, config.head_dim
        (512, 32)
    """

    vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int | None = None
    max_len: int = 256
    dropout: float = 0.1
    activation: str = "gelu"
    norm_first: bool = True
    position: str = "learned"
    tie_weights: bool = True
    n_segments: int = 0
    embedding_norm: bool = False
    final_norm: bool = True
    layer_norm_eps: float = 1e-5
    bias: bool = True
    n_kv_heads: int | None = None
    n_encoder_layers: int | None = None
    n_decoder_layers: int | None = None
    src_vocab_size: int | None = None
    scale_embeddings: bool = False
    relative_num_buckets: int = 32
    relative_max_distance: int = 128
    norm: str = "layernorm"
    gated_ffn: bool = False
    rope_theta: float = 10000.0
    rope_pairing: str = "interleaved"

    def __post_init__(self):
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.n_encoder_layers is None:
            self.n_encoder_layers = self.n_layers
        if self.n_decoder_layers is None:
            self.n_decoder_layers = self.n_layers
        if self.src_vocab_size is None:
            self.src_vocab_size = self.vocab_size
        self.validate()

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    def validate(self) -> None:
        """Check every field; raise ``ValueError`` saying which one is wrong and how to fix it."""
        positive = ["vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len", "n_kv_heads",
                    "n_encoder_layers", "n_decoder_layers", "src_vocab_size"]
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TransformerConfig.{name} must be a positive integer, got {value!r}.")
        if self.d_model % self.n_heads != 0:
            divisors = [h for h in range(1, min(self.d_model, 32) + 1) if self.d_model % h == 0]
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                             f"each head gets d_model // n_heads dimensions. Choose n_heads from "
                             f"{divisors} or change d_model.")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError(f"n_heads={self.n_heads} is not divisible by n_kv_heads="
                             f"{self.n_kv_heads}; each key/value head must serve the same number of "
                             "query heads.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}.")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}.")
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}.")
        if self.position == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(f"position='sinusoidal' needs an even d_model, got {self.d_model}.")
        if self.position == "rope" and self.head_dim % 2 != 0:
            raise ValueError(f"position='rope' rotates feature pairs, so head_dim = d_model // "
                             f"n_heads must be even; got {self.head_dim}.")
        if not isinstance(self.n_segments, int) or self.n_segments < 0:
            raise ValueError(f"n_segments must be a non-negative integer (0 = no segment "
                             f"embeddings), got {self.n_segments!r}.")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps}.")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}.")
        if not isinstance(self.gated_ffn, bool):
            raise ValueError(f"gated_ffn must be True or False, got {self.gated_ffn!r}.")
        if isinstance(self.rope_theta, bool) or not isinstance(self.rope_theta, (int, float)) \
                or not self.rope_theta > 0:
            raise ValueError(f"rope_theta (RoPE's frequency base) must be a positive number, got "
                             f"{self.rope_theta!r}.")
        if self.rope_pairing not in ROPE_PAIRINGS:
            raise ValueError(f"rope_pairing must be one of {ROPE_PAIRINGS} ('interleaved': RoFormer's "
                             f"pairs (x[2i], x[2i+1]); 'half': Hugging Face Llama's (x[i], x[i + d/2])), "
                             f"got {self.rope_pairing!r}.")

    @classmethod
    def gpt2(cls, **overrides) -> "TransformerConfig":
        """GPT-2 small (124M): learned positions, tanh-GELU, Pre-LN, final LayerNorm, tied head.

        Args:
            overrides: fields to change, e.g. ``n_layers=24, d_model=1024, n_heads=16`` (medium).
        """
        fields = dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, max_len=1024,
                      dropout=0.1, activation="gelu_tanh", norm_first=True, position="learned",
                      tie_weights=True, final_norm=True, layer_norm_eps=1e-5, bias=True)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def llama(cls, **overrides) -> "TransformerConfig":
        """A Llama-style decoder, with the sizes of SmolLM2-135M unless overridden.

        RMSNorm (eps 1e-5), SwiGLU MLP (``d_ff`` 1536), RoPE with theta 100000 in every
        self-attention (``rope_pairing`` ``"interleaved"``, the library's; use ``"half"`` to take
        Hugging Face's weights without permuting them), grouped-query attention (9 query heads
        share 3 key/value heads: a 3x smaller KV cache), Pre-LN with a final norm, no biases, no
        dropout, the output head tied to the token embedding; 30 layers, ``d_model`` 576,
        vocabulary 49152, context 8192.

        Args:
            overrides: fields to change, e.g. ``n_layers=2, d_model=64, n_heads=4, n_kv_heads=2,
                d_ff=128, vocab_size=100`` for a toy.

        Example:
            >>> config = TransformerConfig.llama()
            >>> config.head_dim, config.n_heads // config.n_kv_heads
            (64, 3)
        """
        fields = dict(vocab_size=49152, d_model=576, n_heads=9, n_kv_heads=3, n_layers=30,
                      d_ff=1536, max_len=8192, dropout=0.0, activation="silu", gated_ffn=True,
                      norm="rmsnorm", norm_first=True, position="rope", rope_theta=100000.0,
                      rope_pairing="interleaved", tie_weights=True, final_norm=True,
                      layer_norm_eps=1e-5, bias=False)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def bert(cls, **overrides) -> "TransformerConfig":
        """BERT-base: Post-LN, learned positions, 2 segments, embedding LayerNorm, eps 1e-12, GELU.

        Args:
            overrides: fields to change, e.g. ``n_layers=24, d_model=1024, n_heads=16`` (large).
        """
        fields = dict(vocab_size=30522, d_model=768, n_heads=12, n_layers=12, max_len=512,
                      dropout=0.1, activation="gelu", norm_first=False, position="learned",
                      tie_weights=True, n_segments=2, embedding_norm=True, final_norm=False,
                      layer_norm_eps=1e-12, bias=True)
        fields.update(overrides)
        return cls(**fields)


def check_token_ids(ids: torch.Tensor, vocab_size: int, what: str) -> None:
    """Raise a ValueError naming the first id outside ``0 .. vocab_size - 1`` (an embedding lookup
    would fail with a bare ``IndexError``, or on a GPU with an asynchronous device assert).

    It reads the ids' minimum and maximum on the host: for a GPU tensor that waits for the device,
    so the models call it for CPU tensors only (see ``Embeddings.forward``).

    Args:
        ids: integer token ids of any shape.
        vocab_size: the number of rows of the embedding table.
        what: how the ids are called in the message, e.g. ``"generate: idx"``.
    """
    if ids.numel() == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(f"{what}: token id {bad} is outside the vocabulary of {vocab_size} ids "
                         f"(0 .. {vocab_size - 1}); encode the text with the model's own tokenizer")


class Embeddings(nn.Module):
    """Token (+ absolute position) (+ segment) embeddings, optional LayerNorm, then dropout.

    Args:
        config: the model configuration (position scheme, sizes, ``embedding_norm``, dropout).
        vocab_size: rows of the token table.
        n_segments: rows of the segment table (0 = no segment embeddings).

    Sub-modules: ``token`` (``nn.Embedding``), ``position`` (learned or sinusoidal table, or None
    for relative schemes), ``segment`` (or None), ``norm`` (or None), ``dropout``.

    Shapes:
        ``forward(ids, *, offset=0, segment_ids=None)``: ids ``(B, T)`` -> ``(B, T, d_model)``;
        segment_ids ``(B, T)`` (default all 0); ``offset`` is the position of ``ids[:, 0]``.
    """

    def __init__(self, config: TransformerConfig, vocab_size: int, n_segments: int = 0):
        super().__init__()
        d_model = config.d_model
        self.token = nn.Embedding(vocab_size, d_model)
        if config.position == "learned":
            self.position = LearnedPositionalEmbedding(config.max_len, d_model)
        elif config.position == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(d_model, config.max_len)
        else:
            self.position = None
        self.segment = nn.Embedding(n_segments, d_model) if n_segments > 0 else None
        self.norm = (make_norm(config.norm, d_model, config.layer_norm_eps, config.bias)
                     if config.embedding_norm else None)
        self.dropout = nn.Dropout(config.dropout)
        self.scale = math.sqrt(d_model) if config.scale_embeddings else 1.0

    def forward(self, ids: torch.Tensor, *, offset: int = 0, positions: torch.Tensor | None = None,
                segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        if ids.dim() != 2 or ids.dtype not in (torch.long, torch.int):
            raise ValueError(f"token ids must be an integer tensor (B, T), got shape "
                             f"{tuple(ids.shape)} and dtype {ids.dtype}.")
        # The ids are checked on the host for CPU tensors only. Reading min and max of a GPU tensor
        # (int(...)) makes the CPU wait for the GPU, at every decode step; torch._assert_async would
        # avoid the wait but still launch a reduction per step and fail as an asynchronous device
        # assert, which nn.Embedding already raises for a bad id. generate() checks its prompt once,
        # before the first step (one wait per call), and the ids it feeds back are sampled from the
        # model's own vocabulary. Compiled code skips it too: it must not read host values.
        if ids.device.type == "cpu" and not _compiling():
            check_token_ids(ids, self.token.num_embeddings, "token ids")
        x = self.token(ids) * self.scale                                     # (B, T, d)
        if self.position is not None:
            x = self.position(x, offset, positions)
        if self.segment is not None:
            if segment_ids is None:
                segment_ids = torch.zeros_like(ids)
            if segment_ids.shape != ids.shape:
                raise ValueError(f"segment_ids must have the shape of the token ids "
                                 f"{tuple(ids.shape)}, got {tuple(segment_ids.shape)}.")
            n_segments = self.segment.num_embeddings
            if segment_ids.device.type == "cpu" and not _compiling() and segment_ids.numel():
                low, high = int(segment_ids.min()), int(segment_ids.max())
                if low < 0 or high >= n_segments:
                    raise ValueError(f"segment_ids: segment {low if low < 0 else high} is outside 0 .. "
                                     f"{n_segments - 1}; the model has n_segments={n_segments} segment "
                                     f"embeddings (sentence A = 0, B = 1, ...).")
            x = x + self.segment(segment_ids)
        elif segment_ids is not None:
            raise ValueError("segment_ids were given but the model has no segment embeddings; set "
                             "TransformerConfig.n_segments (e.g. 2 for BERT's sentence A/B).")
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


class _SelfAttentionPositions(nn.Module):
    """The position inputs of a self-attention stack: an additive bias and/or RoPE positions."""

    def __init__(self, config: TransformerConfig, *, causal: bool):
        super().__init__()
        self.position = config.position
        self.n_heads = config.n_heads
        if config.position == "t5":
            self.relative_bias = RelativePositionBias(
                config.n_heads, bidirectional=not causal, num_buckets=config.relative_num_buckets,
                max_distance=config.relative_max_distance)
        else:
            self.relative_bias = None

    def forward(self, n_queries: int, n_keys: int, device: torch.device):
        """Return ``(bias, rope_positions)`` for queries that are the last of ``n_keys`` positions."""
        if self.position == "alibi":
            return alibi_bias(self.n_heads, n_queries, n_keys, device=device), None
        if self.position == "t5":
            return self.relative_bias(n_queries, n_keys, device=device), None
        if self.position == "rope":
            return None, torch.arange(n_keys - n_queries, n_keys, device=device)
        return None, None


def _block_options(config: TransformerConfig) -> dict:
    """The keyword arguments of the encoder and decoder blocks that make a block Llama-style."""
    return dict(norm=config.norm, gated_ffn=config.gated_ffn, rope_base=config.rope_theta,
                rope_pairing=config.rope_pairing)


def _real_token_mask(attention_mask: torch.Tensor | None, ids: torch.Tensor) -> torch.Tensor | None:
    """(B, T) mask of real tokens (bool or 0/1) -> key mask (B, 1, 1, T), True = may attend."""
    if attention_mask is None:
        return None
    if attention_mask.shape != ids.shape:
        raise ValueError(f"the real-token mask must have the shape of the token ids "
                         f"{tuple(ids.shape)} (True or 1 on real tokens, False or 0 on padding); "
                         f"got {tuple(attention_mask.shape)}.")
    return attention_mask.bool()[:, None, None, :]


def _left_padding(attention_mask: torch.Tensor, batch_size: int, n_keys: int, n_new: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """A left-padded batch's key mask ``(B, 1, 1, n_keys)`` and the positions ``(B, n_new)`` of its new
    tokens, counted from each row's first real token (as if the row had no padding).

    Args:
        attention_mask: ``(B, n_keys)``, 1 (or True) on real tokens and 0 on padding, over the cached
            and the new tokens; padding only at the start of a row.
    """
    if tuple(attention_mask.shape) != (batch_size, n_keys):
        raise ValueError(f"attention_mask must have shape (B, cached + new tokens) = ({batch_size}, {n_keys}), "
                         f"1 on real tokens and 0 on padding; got {tuple(attention_mask.shape)}")
    real = attention_mask.bool()
    if not _compiling() and bool((real[:, :-1] & ~real[:, 1:]).any()):
        raise ValueError("attention_mask: padding must come first in each row (left padding): a 0 after a 1 "
                         "would put padding between real tokens; pad prompts on the left")
    positions = (real.long().cumsum(dim=-1) - 1).clamp(min=0)                 # (B, n_keys)
    return real[:, None, None, :], positions[:, -n_new:]


def _init_weights(model: nn.Module, n_residual_layers: int) -> None:
    """GPT-2 initialisation: N(0, 0.02) for linear and embedding weights, zero biases, unit
    LayerNorms, and N(0, 0.02 / sqrt(2 * n_residual_layers)) for the projections that write into
    the residual stream (``out_proj``, ``down_proj``) so that its variance does not grow with depth."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.Embedding, LearnedPositionalEmbedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)
        elif isinstance(module, LayerNorm):
            if module.weight is not None:
                nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    residual_std = 0.02 / math.sqrt(2 * n_residual_layers)
    for name, parameter in model.named_parameters():
        if name.endswith("out_proj.weight") or name.endswith("down_proj.weight"):
            nn.init.normal_(parameter, mean=0.0, std=residual_std)


def _language_model_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have shape {tuple(logits.shape[:-1])} (one id per position, "
                         f"{IGNORE_INDEX} to ignore a position); got {tuple(targets.shape)}.")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE_INDEX)


class _CountParameters:
    """Mixin: parameter counting shared by the models."""

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Number of parameters, each shared (tied) tensor counted once.

        Args:
            non_embedding: leave out the token, position and segment tables (and thus a head tied
                to the token table), the convention of scaling-law papers.
        """
        excluded = set()
        if non_embedding:
            for module in self.modules():
                if isinstance(module, Embeddings):
                    excluded |= {id(p) for p in module.parameters()}
        return sum(p.numel() for p in self.parameters() if id(p) not in excluded)


class MaskedLMHead(nn.Module):
    """BERT's masked-language-model head: ``vocab_proj(norm(act(transform(h))))``.

    Args:
        d_model: model width.
        vocab_size: number of token ids.
        activation: activation after ``transform`` (BERT: ``"gelu"``).
        layer_norm_eps: epsilon of ``norm``.

    Sub-modules: ``transform`` (d_model -> d_model), ``norm``, ``vocab_proj`` (d_model ->
    vocab_size, with bias; its weight is tied to the token embedding by :class:`EncoderOnlyModel`
    when ``tie_weights``).

    Shapes:
        ``(B, T, d_model)`` -> logits ``(B, T, vocab_size)``.
    """

    def __init__(self, d_model: int, vocab_size: int, *, activation: str = "gelu",
                 layer_norm_eps: float = 1e-12):
        super().__init__()
        self.transform = nn.Linear(d_model, d_model)
        self.activation = get_activation(activation)
        self.norm = LayerNorm(d_model, eps=layer_norm_eps)
        self.vocab_proj = nn.Linear(d_model, vocab_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.vocab_proj(self.norm(self.activation(self.transform(hidden))))


class EncoderOnlyModel(_CountParameters, nn.Module):
    """A BERT-style bidirectional encoder with a masked-language-model head.

    Every token attends to every real token (no causal mask); padding is excluded through
    ``attention_mask``. ``forward`` returns the contextual vectors; :meth:`mlm_logits` and
    :meth:`masked_lm` add the MLM head on top. ``hidden[:, 0]`` is the [CLS] vector when inputs
    start with a [CLS] token.

    Args:
        config: a :class:`TransformerConfig` (uses ``n_layers``, ``n_segments``,
            ``embedding_norm``; :meth:`TransformerConfig.bert` gives BERT-base).

    Sub-modules: ``embeddings`` (:class:`Embeddings`), ``layers`` (:class:`EncoderLayer` list),
    ``final_norm`` (or None), ``mlm_head`` (:class:`MaskedLMHead`).

    Shapes:
        ``forward(input_ids, *, segment_ids=None, attention_mask=None, need_weights=False)``:
        input_ids ``(B, T)``, segment_ids ``(B, T)``, attention_mask ``(B, T)`` bool or 0/1 with
        True/1 on real tokens -> hidden ``(B, T, d_model)``. With ``need_weights=True`` each
        ``layers[i].self_attn_weights`` holds ``(B, n_heads, T, T)`` afterwards.

    Example:
        >>> config = TransformerConfig(vocab_size=100, d_model=32, n_heads=4, n_layers=2,
        ...                            n_segments=2, norm_first=False, final_norm=False)
        >>> model = EncoderOnlyModel(config)
        >>> ids = torch.randint(0, 100, (2, 7))
        >>> model(ids, attention_mask=torch.ones(2, 7)).shape
        torch.Size([2, 7, 32])
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config, config.vocab_size, n_segments=config.n_segments)
        self.positions = _SelfAttentionPositions(config, causal=False)
        self.layers = nn.ModuleList(
            EncoderLayer(config.d_model, config.n_heads, config.d_ff, dropout=config.dropout,
                         activation=config.activation, norm_first=config.norm_first,
                         layer_norm_eps=config.layer_norm_eps, bias=config.bias,
                         n_kv_heads=config.n_kv_heads, **_block_options(config))
            for _ in range(config.n_layers))
        self.final_norm = (make_norm(config.norm, config.d_model, config.layer_norm_eps, config.bias)
                           if config.final_norm else None)
        self.mlm_head = MaskedLMHead(config.d_model, config.vocab_size, activation=config.activation,
                                     layer_norm_eps=config.layer_norm_eps)
        _init_weights(self, config.n_layers)
        if config.tie_weights:
            self.mlm_head.vocab_proj.weight = self.embeddings.token.weight

    def forward(self, input_ids: torch.Tensor, *, segment_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                need_weights: bool = False) -> torch.Tensor:
        mask = _real_token_mask(attention_mask, input_ids)                    # (B, 1, 1, T)
        x = self.embeddings(input_ids, segment_ids=segment_ids)               # (B, T, d)
        n_tokens = input_ids.shape[1]
        bias, rope_positions = self.positions(n_tokens, n_tokens, input_ids.device)
        for layer in self.layers:
            x = layer(x, mask=mask, bias=bias, rope_positions=rope_positions,
                      need_weights=need_weights)
        return x if self.final_norm is None else self.final_norm(x)

    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Masked-LM logits from the encoder output.

        Shapes:
            hidden ``(B, T, d_model)`` -> ``(B, T, vocab_size)``.
        """
        return self.mlm_head(hidden)

    def masked_lm(self, input_ids: torch.Tensor, targets: torch.Tensor | None = None, *,
                  segment_ids: torch.Tensor | None = None,
                  attention_mask: torch.Tensor | None = None):
        """Encoder plus MLM head, with the loss over the masked positions.

        Args:
            input_ids: token ids with some tokens replaced by [MASK] (or random/kept, 80/10/10).
            targets: the original ids at the positions to predict and ``-100`` elsewhere.
            segment_ids: sentence A/B ids.
            attention_mask: True/1 on real tokens.

        Shapes:
            input_ids, targets ``(B, T)`` -> ``(logits (B, T, vocab_size), loss scalar or None)``.
        """
        hidden = self(input_ids, segment_ids=segment_ids, attention_mask=attention_mask)
        logits = self.mlm_logits(hidden)
        loss = None if targets is None else _language_model_loss(logits, targets)
        return logits, loss


class DecoderOnlyLM(_CountParameters, nn.Module):
    """A GPT-style causal language model, with an optional preallocated KV cache.

    Args:
        config: a :class:`TransformerConfig` (uses ``n_layers``; :meth:`TransformerConfig.gpt2`
            gives GPT-2 small).

    Sub-modules: ``embeddings`` (:class:`Embeddings`), ``layers`` (:class:`DecoderLayer` list
    without cross-attention), ``final_norm`` (or None), ``lm_head`` (``nn.Linear`` without bias,
    its weight tied to ``embeddings.token.weight`` when ``tie_weights``).

    Shapes:
        ``forward(idx, targets=None, *, cache=None, attention_mask=None, need_weights=False)``: idx ``(B, T)`` ->
        ``(logits (B, T, vocab_size), loss)``; ``loss`` is the mean next-token cross-entropy when
        ``targets`` ``(B, T)`` are given (``-100`` = ignore), else None. With a ``cache`` (from
        :meth:`new_cache`), ``idx`` holds only the new tokens: their positions start at
        ``cache.length``, their keys and values are appended, and attention covers everything
        cached. With ``need_weights=True`` each ``layers[i].self_attn_weights`` holds
        ``(B, n_heads, T, T_cached)`` afterwards. A batch of prompts of different lengths is padded on
        the left and given ``attention_mask`` ``(B, T_cached + T)``, 1 on real tokens: padding is never
        attended to, and each row's positions count from its first real token, so every row's logits
        equal those of the row alone.

    Example:
        >>> config = TransformerConfig(vocab_size=65, d_model=32, n_heads=4, n_layers=2, max_len=16)
        >>> model = DecoderOnlyLM(config).eval()
        >>> idx = torch.randint(0, 65, (2, 5))
        >>> cache = model.new_cache(batch_size=2)
        >>> with torch.no_grad():
        ...     logits, _ = model(idx, cache=cache)            # prefill
        ...     step, _ = model(idx[:, -1:], cache=cache)      # one new token
        >>> logits.shape, step.shape, cache.length
        (torch.Size([2, 5, 65]), torch.Size([2, 1, 65]), 6)
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config, config.vocab_size)
        self.positions = _SelfAttentionPositions(config, causal=True)
        self.layers = nn.ModuleList(
            DecoderLayer(config.d_model, config.n_heads, config.d_ff, dropout=config.dropout,
                         activation=config.activation, norm_first=config.norm_first,
                         layer_norm_eps=config.layer_norm_eps, bias=config.bias,
                         cross_attention=False, n_kv_heads=config.n_kv_heads,
                         **_block_options(config))
            for _ in range(config.n_layers))
        self.final_norm = (make_norm(config.norm, config.d_model, config.layer_norm_eps, config.bias)
                           if config.final_norm else None)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        _init_weights(self, config.n_layers)
        if config.tie_weights:
            self.lm_head.weight = self.embeddings.token.weight

    def new_cache(self, batch_size: int, max_len: int | None = None, *,
                  dtype: torch.dtype | None = None,
                  device: torch.device | str | None = None) -> KVCache:
        """A KV cache sized for this model.

        Args:
            batch_size: sequences decoded together.
            max_len: capacity in tokens (default ``config.max_len``).
            dtype: buffer dtype (default: the model's parameter dtype).
            device: buffer device (default: the model's device).
        """
        weight = self.embeddings.token.weight
        return KVCache(len(self.layers), batch_size, self.config.max_len if max_len is None else max_len,
                       self.config.n_kv_heads, self.config.head_dim,
                       dtype=weight.dtype if dtype is None else dtype,
                       device=weight.device if device is None else device)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                cache: KVCache | None = None, attention_mask: torch.Tensor | None = None,
                need_weights: bool = False):
        if cache is not None and cache.n_layers != len(self.layers):
            raise ValueError(f"the cache has {cache.n_layers} layers but the model has "
                             f"{len(self.layers)}; create it with model.new_cache(batch_size).")
        if isinstance(cache, StaticKVCache):
            return self._forward_static(idx, targets, cache, attention_mask, need_weights)
        start = 0 if cache is None else cache.length
        n_new = idx.shape[-1]
        n_keys = start + n_new
        key_mask = positions = None
        if attention_mask is not None:                                        # a left-padded batch
            key_mask, positions = _left_padding(attention_mask, idx.shape[0], n_keys, n_new)
        x = self.embeddings(idx, offset=start, positions=positions)           # (B, T, d)
        # One new token may attend everything cached: no mask needed. A whole sequence from the
        # start is causal: say so (is_causal) rather than build a mask, so the fused kernel is faster.
        causal = start == 0 and n_new > 1
        mask = causal_mask(n_new, n_keys, device=idx.device) if start > 0 and n_new > 1 else None
        if key_mask is not None:
            mask = key_mask if mask is None else mask & key_mask
        bias, rope_positions = self.positions(n_new, n_keys, idx.device)
        if positions is not None and rope_positions is not None:
            rope_positions = positions[:, None, :]                            # (B, 1, T): one row per sequence
        for i, layer in enumerate(self.layers):
            x = layer(x, self_mask=mask, self_bias=bias, rope_positions=rope_positions,
                      cache=None if cache is None else cache.layers[i], need_weights=need_weights,
                      causal=causal)
        return self._logits_and_loss(x, targets)

    def _logits_and_loss(self, x: torch.Tensor, targets: torch.Tensor | None):
        """Final norm and head: hidden states ``(B, T, d)`` -> ``(logits (B, T, V), loss or None)``."""
        if self.final_norm is not None:
            x = self.final_norm(x)
        logits = self.lm_head(x)                                               # (B, T, V)
        loss = None if targets is None else _language_model_loss(logits, targets)
        return logits, loss

    def _forward_static(self, idx: torch.Tensor, targets: torch.Tensor | None, cache: StaticKVCache,
                        attention_mask: torch.Tensor | None, need_weights: bool):
        """The forward pass with a :class:`StaticKVCache`: positions and the key mask come from the
        cache's position tensor, attention spans all ``max_len`` slots, and no Python value changes
        from one decode step to the next (so a compiled step is reused)."""
        if self.config.position in ("alibi", "t5"):
            raise ValueError(f"a StaticKVCache needs absolute positions; position={self.config.position!r} "
                             "biases attention by distance, so decode with model.new_cache() instead")
        if attention_mask is not None:
            raise ValueError("a StaticKVCache decodes prompts of one length; pad-free prompts only")
        batch_size, n_new = idx.shape
        if not _compiling():        # on the host, before a position past the tables is looked up
            cache.check_room(n_new)
        new_positions = cache.position + torch.arange(n_new, device=idx.device)          # (T,)
        slots = torch.arange(cache.max_len, device=idx.device)
        mask = slots[None, :] <= new_positions[:, None]                                    # (T, max_len)
        positions = new_positions.expand(batch_size, n_new)                                # (B, T)
        x = self.embeddings(idx, positions=positions)                                      # (B, T, d)
        rope_positions = new_positions if self.config.position == "rope" else None
        for i, layer in enumerate(self.layers):
            x = layer(x, self_mask=mask, self_bias=None, rope_positions=rope_positions,
                      cache=cache.layers[i], need_weights=need_weights, causal=False)
        cache.advance(n_new)
        return self._logits_and_loss(x, targets)


class Transformer(_CountParameters, nn.Module):
    """The encoder-decoder stack of "Attention Is All You Need", without embeddings or head.

    Comparable to ``torch.nn.Transformer(batch_first=True)`` (and loadable from one with
    :func:`transformer_core.convert.transformer_from_torch`), with the library's conventions:

    * all tensors are batch-first;
    * masks are boolean with **True = may attend** (PyTorch's boolean masks mean the opposite), and
      one mask per attention carries both structure and padding: PyTorch's
      ``src_key_padding_mask`` (True = pad) becomes ``src_mask = ~src_key_padding_mask[:, None,
      None, :]``, its ``tgt_mask`` + ``tgt_key_padding_mask`` become their conjunction, and its
      ``memory_key_padding_mask`` becomes ``memory_mask``;
    * nothing is causal by default: pass ``tgt_mask=causal_mask(T)`` for a causal decoder;
    * like ``torch.nn.Transformer``, a LayerNorm follows each stack (``final_norm=True``).

    Args:
        d_model: model width.
        n_heads: attention heads.
        n_encoder_layers: encoder blocks.
        n_decoder_layers: decoder blocks.
        d_ff: feed-forward width.
        dropout: dropout probability.
        activation: ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``.
        norm_first: Pre-LN (True) or Post-LN (False).
        layer_norm_eps: epsilon of every LayerNorm.
        bias: biases in the linear layers.
        n_kv_heads: key/value heads for grouped-query attention (default ``n_heads``).
        final_norm: LayerNorm after each stack (``encoder_norm``, ``decoder_norm``).
        norm: ``"layernorm"`` or ``"rmsnorm"`` for every norm.
        gated_ffn: gated feed-forward networks (SwiGLU with ``activation="silu"``).
        rope_base: RoPE's frequency base in the self-attentions (when ``rope_positions`` are given).
        rope_pairing: RoPE's pairing convention, ``"interleaved"`` or ``"half"``.

    Sub-modules: ``encoder_layers``, ``decoder_layers``, ``encoder_norm``, ``decoder_norm``.

    Shapes:
        ``forward(src, tgt, *, src_mask=None, tgt_mask=None, memory_mask=None, need_weights=False)``:
        src ``(B, S, d_model)``, tgt ``(B, T, d_model)`` -> ``(B, T, d_model)``; src_mask bool
        broadcastable to ``(B, n_heads, S, S)``, tgt_mask to ``(B, n_heads, T, T)``, memory_mask to
        ``(B, n_heads, T, S)``.

    Example:
        >>> from transformer_core.attention import causal_mask, padding_mask
        >>> model = Transformer(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64)
        >>> src, tgt = torch.randn(2, 7, 32), torch.randn(2, 5, 32)
        >>> pad = padding_mask(torch.tensor([7, 4]), 7)
        >>> model(src, tgt, src_mask=pad, tgt_mask=causal_mask(5), memory_mask=pad).shape
        torch.Size([2, 5, 32])
    """

    def __init__(self, d_model: int = 512, n_heads: int = 8, n_encoder_layers: int = 6,
                 n_decoder_layers: int = 6, d_ff: int = 2048, *, dropout: float = 0.1,
                 activation: str = "relu", norm_first: bool = False, layer_norm_eps: float = 1e-5,
                 bias: bool = True, n_kv_heads: int | None = None, final_norm: bool = True,
                 norm: str = "layernorm", gated_ffn: bool = False, rope_base: float = 10000.0,
                 rope_pairing: str = "interleaved"):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        block = dict(dropout=dropout, activation=activation, norm_first=norm_first,
                     layer_norm_eps=layer_norm_eps, bias=bias, n_kv_heads=n_kv_heads, norm=norm,
                     gated_ffn=gated_ffn, rope_base=rope_base, rope_pairing=rope_pairing)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, **block) for _ in range(n_encoder_layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, cross_attention=True, **block)
            for _ in range(n_decoder_layers))
        self.encoder_norm = make_norm(norm, d_model, layer_norm_eps, bias) if final_norm else None
        self.decoder_norm = make_norm(norm, d_model, layer_norm_eps, bias) if final_norm else None
        for parameter in self.parameters():  # the initialisation of torch.nn.Transformer
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None, *,
               bias: torch.Tensor | None = None, rope_positions: torch.Tensor | None = None,
               need_weights: bool = False) -> torch.Tensor:
        """Run the encoder stack.

        Shapes:
            src ``(B, S, d_model)`` -> memory ``(B, S, d_model)``; src_mask and bias broadcastable
            to ``(B, n_heads, S, S)``; rope_positions ``(S,)``.
        """
        x = src
        for layer in self.encoder_layers:
            x = layer(x, mask=src_mask, bias=bias, rope_positions=rope_positions,
                      need_weights=need_weights)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
               memory_mask: torch.Tensor | None = None, *, self_bias: torch.Tensor | None = None,
               rope_positions: torch.Tensor | None = None, cache: KVCache | None = None,
               need_weights: bool = False) -> torch.Tensor:
        """Run the decoder stack over the encoder output ``memory``.

        Shapes:
            tgt ``(B, T, d_model)``, memory ``(B, S, d_model)`` -> ``(B, T, d_model)``; tgt_mask
            and self_bias broadcastable to ``(B, n_heads, T, T_k)`` (``T_k`` counts cached tokens);
            memory_mask to ``(B, n_heads, T, S)``; rope_positions ``(T,)``; cache a
            :class:`~transformer_core.cache.KVCache` with one layer per decoder block. With a
            :class:`~transformer_core.cache.StaticKVCache` the causal mask over its ``max_len`` slots
            is built here from ``cache.position`` (pass no ``tgt_mask`` or ``self_bias``).
        """
        if cache is not None and cache.n_layers != len(self.decoder_layers):
            raise ValueError(f"the cache has {cache.n_layers} layers but the decoder has "
                             f"{len(self.decoder_layers)}.")
        static = isinstance(cache, StaticKVCache)
        if static:
            if tgt_mask is not None or self_bias is not None:
                raise ValueError("tgt_mask and self_bias cannot be used with a StaticKVCache: its self-attention "
                                 "spans all max_len slots, and decode builds the causal mask over them from "
                                 "cache.position; pass neither (or decode with a KVCache to pass your own)")
            n_new = tgt.shape[1]
            if not _compiling():            # on the host, before anything is written
                cache.check_room(n_new)
            new_positions = cache.position + torch.arange(n_new, device=tgt.device)         # (T,)
            slots = torch.arange(cache.max_len, device=tgt.device)
            tgt_mask = slots[None, :] <= new_positions[:, None]                              # (T, max_len)
        x = tgt
        for i, layer in enumerate(self.decoder_layers):
            x = layer(x, memory, self_mask=tgt_mask, memory_mask=memory_mask, self_bias=self_bias,
                      rope_positions=rope_positions,
                      cache=None if cache is None else cache.layers[i], need_weights=need_weights)
        if static:
            cache.advance(n_new)
        return x if self.decoder_norm is None else self.decoder_norm(x)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, *, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                need_weights: bool = False) -> torch.Tensor:
        memory = self.encode(src, src_mask, need_weights=need_weights)
        return self.decode(tgt, memory, tgt_mask, memory_mask, need_weights=need_weights)


class EncoderDecoderModel(_CountParameters, nn.Module):
    """A sequence-to-sequence Transformer: source embeddings, encoder, decoder with
    cross-attention (queries from the decoder, keys and values from the encoder), output head.

    Trained with teacher forcing: ``tgt`` is the target shifted right (starting with a BOS token)
    and ``targets`` the target itself.

    Args:
        config: a :class:`TransformerConfig` (uses ``n_encoder_layers``, ``n_decoder_layers``,
            ``src_vocab_size``; ``tie_weights`` ties the head to the target embedding).

    Sub-modules: ``src_embeddings``, ``tgt_embeddings`` (:class:`Embeddings`), ``transformer``
    (:class:`Transformer`), ``lm_head``.

    Shapes:
        ``forward(src, tgt, *, src_mask=None, targets=None, need_weights=False)``: src ``(B, S)``,
        tgt ``(B, T)``, src_mask ``(B, S)`` True/1 on real source tokens, targets ``(B, T)`` ->
        ``(logits (B, T, vocab_size), loss or None)``. After a call with ``need_weights=True``,
        :meth:`cross_attention_weights` returns one ``(B, n_heads, T, S)`` map per decoder layer.

    Example:
        >>> config = TransformerConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_len=16)
        >>> model = EncoderDecoderModel(config)
        >>> src, tgt = torch.randint(0, 20, (2, 9)), torch.randint(0, 20, (2, 6))
        >>> logits, loss = model(src, tgt, targets=tgt)
        >>> logits.shape
        torch.Size([2, 6, 20])
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.src_embeddings = Embeddings(config, config.src_vocab_size)
        self.tgt_embeddings = Embeddings(config, config.vocab_size)
        self.encoder_positions = _SelfAttentionPositions(config, causal=False)
        self.decoder_positions = _SelfAttentionPositions(config, causal=True)
        self.transformer = Transformer(
            config.d_model, config.n_heads, config.n_encoder_layers, config.n_decoder_layers,
            config.d_ff, dropout=config.dropout, activation=config.activation,
            norm_first=config.norm_first, layer_norm_eps=config.layer_norm_eps, bias=config.bias,
            n_kv_heads=config.n_kv_heads, final_norm=config.final_norm, **_block_options(config))
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        _init_weights(self, config.n_encoder_layers + config.n_decoder_layers)
        if config.tie_weights:
            self.lm_head.weight = self.tgt_embeddings.token.weight

    def encode(self, src: torch.Tensor, *, src_mask: torch.Tensor | None = None,
               need_weights: bool = False) -> torch.Tensor:
        """Encode the source once.

        Shapes:
            src ``(B, S)``, src_mask ``(B, S)`` (True/1 on real tokens) -> memory ``(B, S, d_model)``.
        """
        n_src = src.shape[1]
        bias, rope_positions = self.encoder_positions(n_src, n_src, src.device)
        return self.transformer.encode(self.src_embeddings(src), _real_token_mask(src_mask, src),
                                       bias=bias, rope_positions=rope_positions,
                                       need_weights=need_weights)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, *,
               src_mask: torch.Tensor | None = None, cache: KVCache | None = None,
               need_weights: bool = False) -> torch.Tensor:
        """Decode target tokens against the encoded source; returns logits.

        With a ``cache`` (from :meth:`new_cache`), ``tgt`` holds only the new target tokens, whose
        positions start at ``cache.length``. A :class:`~transformer_core.cache.StaticKVCache` works too
        (absolute position schemes only: learned, sinusoidal, RoPE, none).

        Shapes:
            tgt ``(B, T)``, memory ``(B, S, d_model)``, src_mask ``(B, S)`` -> ``(B, T, vocab_size)``.
        """
        n_new = tgt.shape[1]
        if isinstance(cache, StaticKVCache):     # positions from the cache's position tensor, the mask in transformer.decode
            if self.config.position in ("alibi", "t5"):
                raise ValueError(f"a StaticKVCache needs absolute positions; position={self.config.position!r} "
                                 "biases attention by distance, so decode with model.new_cache() instead")
            if not _compiling():                # on the host, before a position past the tables is looked up
                cache.check_room(n_new)
            new_positions = cache.position + torch.arange(n_new, device=tgt.device)     # (T,)
            x = self.tgt_embeddings(tgt, positions=new_positions.expand(tgt.shape[0], n_new))
            self_mask = bias = None
            rope_positions = new_positions if self.config.position == "rope" else None
        else:
            start = 0 if cache is None else cache.length
            n_keys = start + n_new
            x = self.tgt_embeddings(tgt, offset=start)
            self_mask = None if n_new == 1 else causal_mask(n_new, n_keys, device=tgt.device)
            bias, rope_positions = self.decoder_positions(n_new, n_keys, tgt.device)
        memory_mask = None
        if src_mask is not None:
            if src_mask.shape != memory.shape[:2]:
                raise ValueError(f"src_mask must have shape {tuple(memory.shape[:2])} (B, S), got "
                                 f"{tuple(src_mask.shape)}.")
            memory_mask = src_mask.bool()[:, None, None, :]
        hidden = self.transformer.decode(x, memory, self_mask, memory_mask, self_bias=bias,
                                         rope_positions=rope_positions, cache=cache,
                                         need_weights=need_weights)
        return self.lm_head(hidden)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, *,
                src_mask: torch.Tensor | None = None, targets: torch.Tensor | None = None,
                need_weights: bool = False):
        memory = self.encode(src, src_mask=src_mask, need_weights=need_weights)
        logits = self.decode(tgt, memory, src_mask=src_mask, need_weights=need_weights)
        loss = None if targets is None else _language_model_loss(logits, targets)
        return logits, loss

    def new_cache(self, batch_size: int, max_len: int | None = None, *,
                  dtype: torch.dtype | None = None,
                  device: torch.device | str | None = None) -> KVCache:
        """A KV cache for the decoder's self-attention (see :meth:`DecoderOnlyLM.new_cache`)."""
        weight = self.tgt_embeddings.token.weight
        return KVCache(self.config.n_decoder_layers, batch_size,
                       self.config.max_len if max_len is None else max_len,
                       self.config.n_kv_heads, self.config.head_dim,
                       dtype=weight.dtype if dtype is None else dtype,
                       device=weight.device if device is None else device)

    def cross_attention_weights(self) -> list[torch.Tensor]:
        """The cross-attention maps of the last call made with ``need_weights=True``.

        Returns:
            one ``(B, n_heads, T, S)`` tensor per decoder layer (row t: how target position t
            spreads its attention over the source).
        """
        weights = [layer.cross_attn_weights for layer in self.transformer.decoder_layers]
        if any(w is None for w in weights):
            raise RuntimeError("no cross-attention weights stored: call the model (or decode) with "
                               "need_weights=True first.")
        return weights

"""Decoding: turning next-token logits into text, one token at a time.

The pieces, in the order a sampler applies them to the logits of the last position:

1. :func:`temperature_scale` divides the logits by a temperature (below 1 sharpens, above 1 flattens);
2. :func:`top_k_filter` keeps the ``k`` largest logits of each row;
3. :func:`top_p_filter` keeps the nucleus: the most probable tokens whose probability mass reaches ``p``;
4. :func:`sample_next_token` takes the arg-max (greedy) or draws from the softmax of what is left.

:func:`generate` runs that loop for a :class:`~transformer_core.models.DecoderOnlyLM`, either with a
preallocated KV cache (prefill the prompt once, then feed one token per step) or by re-running the
whole context every step; under greedy decoding both give the same tokens. :func:`beam_search`
keeps the ``beam_size`` most probable partial sequences instead of one.

Filters never modify their input: they return a new tensor in which removed tokens are ``-inf``.
"""

from __future__ import annotations

import itertools
import math
import types
import warnings
import weakref
from typing import NamedTuple

import torch
import torch.nn.functional as F

from transformer_core.cache import StaticKVCache
from transformer_core.models import check_token_ids

__all__ = [
    "temperature_scale",
    "top_k_filter",
    "top_p_filter",
    "sample_next_token",
    "generate",
    "beam_search",
    "BeamHypothesis",
]


def _check_logits(logits: torch.Tensor, name: str) -> None:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{name}: logits must be a tensor of shape (..., vocab_size), "
                        f"got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise TypeError(f"{name}: logits must be floating point, got dtype {logits.dtype}; "
                        "pass the model's scores, not token ids")
    if logits.dim() == 0 or logits.shape[-1] == 0:
        raise ValueError(f"{name}: logits must have a non-empty last (vocabulary) dimension, "
                         f"got shape {tuple(logits.shape)}")


def _descending_order(values: torch.Tensor) -> torch.Tensor:
    """Indices that sort ``values`` along the last dim, largest first; equal values keep index order."""
    return torch.sort(values, dim=-1, descending=True, stable=True).indices


def _check_temperature(temperature) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}; "
                         "for deterministic (greedy) decoding use do_sample=False instead of "
                         "temperature 0")


def temperature_scale(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide logits by a temperature: ``softmax(logits / T)``.

    ``T < 1`` sharpens the distribution towards the arg-max (``T -> 0`` is greedy decoding),
    ``T > 1`` flattens it towards uniform, ``T = 1`` leaves it unchanged.

    Args:
        logits: unnormalised scores over the vocabulary.
        temperature: a finite number ``> 0``.

    Returns:
        ``logits / temperature`` (a new tensor).

    Shapes:
        logits: ``(..., V)``; returns ``(..., V)``.

    Example:
        >>> temperature_scale(torch.tensor([2.0, 0.0]), 0.5)
        tensor([4., 0.])
    """
    _check_logits(logits, "temperature_scale")
    _check_temperature(temperature)
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row and set the others to ``-inf``.

    Ties: exactly ``min(k, V)`` entries are kept per row. When several tokens share the value at the
    boundary, the ones with the smaller token index are kept (the order of a stable descending sort),
    so the result is deterministic. ``k >= V`` keeps every token.

    Args:
        logits: unnormalised scores over the vocabulary.
        k: how many tokens to keep, an integer ``>= 1``.

    Returns:
        A new tensor equal to ``logits`` on the kept entries and ``-inf`` elsewhere.

    Shapes:
        logits: ``(..., V)``; returns ``(..., V)``.

    Example:
        >>> top_k_filter(torch.tensor([1.0, 3.0, 3.0, 2.0]), 2)
        tensor([-inf, 3., 3., -inf])
    """
    _check_logits(logits, "top_k_filter")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"top_k_filter: k must be an integer >= 1, got {k!r}; "
                         "pass top_k=None to switch top-k filtering off")
    vocab_size = logits.shape[-1]
    if k >= vocab_size:
        return logits.clone()
    keep_index = _descending_order(logits)[..., :k]
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, keep_index, True)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep the fewest most probable tokens whose probability sums to ``>= p``.

    Convention, precisely: sort the tokens of a row by probability, largest first (equal
    probabilities in token-index order, as in :func:`top_k_filter`). The token at sorted position
    ``i`` is kept when the probability mass of the tokens *before* it is ``< p``. Hence the most
    probable token is always kept, the kept mass is ``>= p``, and dropping the least probable kept
    token leaves a mass ``< p``. A mass exactly equal to ``p`` stops the set there: with
    probabilities ``(0.5, 0.25, 0.25)`` and ``p = 0.75`` two tokens are kept. Probabilities and
    their running sums are computed in float64 from the given logits, so a boundary is decided as
    exactly as float64 allows. ``p = 1`` keeps every token.

    Args:
        logits: unnormalised scores over the vocabulary; ``-inf`` entries have probability 0.
        p: the probability mass to keep, ``0 < p <= 1``.

    Returns:
        A new tensor equal to ``logits`` on the kept entries and ``-inf`` elsewhere. The softmax of
        the result is the renormalised nucleus distribution.

    Shapes:
        logits: ``(..., V)``; returns ``(..., V)``.

    Example:
        >>> probs = torch.tensor([0.1, 0.6, 0.3])
        >>> top_p_filter(probs.log(), 0.8).softmax(-1)  # 0.6 < 0.8, 0.6 + 0.3 >= 0.8
        tensor([0.0000, 0.6667, 0.3333])
    """
    _check_logits(logits, "top_p_filter")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"top_p_filter: p must be a number with 0 < p <= 1, got {p!r}; "
                         "pass top_p=None to switch nucleus filtering off")
    if p == 1:
        return logits.clone()
    order = _descending_order(logits)
    sorted_probs = torch.softmax(logits.gather(-1, order).double(), dim=-1)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    mass_before = torch.cat([torch.zeros_like(cumulative[..., :1]), cumulative[..., :-1]], dim=-1)
    keep_sorted = mass_before < p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def _check_optional_int(value, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be None (off) or an integer >= 1, got {value!r}")


def sample_next_token(
    logits: torch.Tensor,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Choose one token per row from next-token logits.

    Greedy (``do_sample=False``): the arg-max of each row; among equal maxima the smallest token
    index wins. Temperature, top-k and top-p cannot change the arg-max, so they are checked but
    otherwise ignored. Sampling (``do_sample=True``): apply :func:`temperature_scale`, then
    :func:`top_k_filter` (if ``top_k``), then :func:`top_p_filter` (if ``top_p``), and draw from the
    softmax of the result with ``torch.multinomial``; the same ``generator`` state gives the same draw.

    Args:
        logits: next-token scores, one row per sequence.
        do_sample: draw at random instead of taking the arg-max.
        temperature: ``> 0``; see :func:`temperature_scale`.
        top_k: keep only the ``top_k`` largest logits (``None`` = off).
        top_p: keep only the nucleus of mass ``top_p`` (``None`` = off).
        generator: random number generator for reproducible sampling (on the logits' device).

    Returns:
        The chosen token ids (``torch.long``).

    Shapes:
        logits: ``(B, V)``; returns ``(B,)``.

    Example:
        >>> sample_next_token(torch.tensor([[0.1, 2.0, -1.0]]))
        tensor([1])
    """
    _check_logits(logits, "sample_next_token")
    if logits.dim() != 2:
        raise ValueError(f"sample_next_token expects logits of shape (B, V), got {tuple(logits.shape)}; "
                         "for a language model's output (B, T, V) pass logits[:, -1, :]")
    _check_temperature(temperature)
    _check_optional_int(top_k, "top_k")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None (off) or a number with 0 < top_p <= 1, got {top_p!r}")
    if not do_sample:
        return torch.argmax(logits, dim=-1)
    # float32 before dividing: half-precision logits over a small temperature overflow to inf.
    scaled = temperature_scale(logits.float(), temperature)
    if top_k is not None:
        scaled = top_k_filter(scaled, top_k)
    if top_p is not None:
        scaled = top_p_filter(scaled, top_p)
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def _check_prompt(idx: torch.Tensor, name: str) -> torch.Tensor:
    """The prompt as a LongTensor (int32 ids are accepted, as by the models), after checking its shape."""
    if (not isinstance(idx, torch.Tensor) or idx.dtype not in (torch.long, torch.int) or idx.dim() != 2
            or idx.shape[1] == 0):
        described = (f"shape {tuple(idx.shape)} and dtype {idx.dtype}" if isinstance(idx, torch.Tensor)
                     else type(idx).__name__)
        raise ValueError(f"{name}: idx must be a non-empty integer tensor (int64 or int32) of token ids of "
                         f"shape (B, T), got {described}; a single prompt of shape (T,) becomes (1, T) with "
                         f"idx[None]")
    return idx.long()


def _check_can_compile(model, src, attention_mask, use_cache: bool) -> None:
    """Refuse what compiled decoding does not do, saying what to use instead."""
    reasons = []
    if src is not None or not hasattr(model, "layers"):
        reasons.append("it decodes decoder-only models (DecoderOnlyLM)")
    elif model.config.position in ("alibi", "t5"):
        reasons.append(f"position={model.config.position!r} biases attention by distance, not by absolute position")
    if attention_mask is not None:
        reasons.append("it decodes prompts of one length (no attention_mask)")
    if not use_cache:
        reasons.append("it needs the cache (use_cache=True)")
    if reasons:
        raise ValueError("generate(compile=...): " + "; ".join(reasons) + "; use compile=False here")


def _static_cache(model, batch_size: int, device: torch.device) -> StaticKVCache:
    """A :class:`StaticKVCache` of the model's whole context, ``max_len``, whatever the prompt and the
    number of new tokens: its shape is part of the compiled graph, so one size per model (and batch
    size) means one compilation, reused by every later call. Attending over the unfilled slots costs
    a little arithmetic per step; recompiling for every length would cost seconds to minutes."""
    weight = model.embeddings.token.weight
    cache = StaticKVCache(len(model.layers), batch_size, model.config.max_len, model.config.n_kv_heads,
                          model.config.head_dim, dtype=weight.dtype, device=device)
    if device.type == "cuda":           # CUDA graphs may then update these buffers in place
        for tensor in (cache.keys, cache.values, cache.position):
            torch._dynamo.mark_static_address(tensor)
    return cache


def _decode_step(model, token: torch.Tensor, cache: StaticKVCache) -> torch.Tensor:
    """One decode step: token ``(B, 1)`` -> logits ``(B, 1, V)``, written into and read from ``cache``."""
    return model(token, cache=cache)[0]


# model -> {(backend, mode): compiled step}; an entry goes when its model is garbage-collected.
_COMPILED_STEPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_STEP_NUMBERS = itertools.count(1)


def _compiled_step(model, compile: bool | str, device: torch.device):
    """:func:`_decode_step` compiled for ``model``: a function ``(model, token (B, 1), cache) -> logits
    (B, 1, V)`` that checks the cache's room on the host, runs the graph, and counts the step.

    Dynamo keeps its compiled graphs, and its limit of recompilations (8 by default, then
    ``FailOnRecompileLimitHit`` under ``fullgraph=True``), per Python code object. Each model gets a
    copy of :func:`_decode_step` with a code object of its own, so one model's graphs (one per batch
    size) never count against another's, and they are freed with the model.
    """
    backend = "inductor" if compile is True else str(compile)
    mode = "reduce-overhead" if device.type == "cuda" and backend == "inductor" else None
    steps = _COMPILED_STEPS.setdefault(model, {})
    if (backend, mode) not in steps:
        code = _decode_step.__code__
        own = types.FunctionType(code.replace(co_name=f"{code.co_name}_{next(_STEP_NUMBERS)}"),
                                 _decode_step.__globals__, _decode_step.__name__)
        steps[backend, mode] = torch.compile(own, backend=backend, mode=mode, fullgraph=True, dynamic=False)
    compiled = steps[backend, mode]

    def step(model, token: torch.Tensor, cache: StaticKVCache) -> torch.Tensor:
        cache.check_room(token.shape[1])            # compiled code cannot raise: check before it runs
        logits = compiled(model, token, cache)
        cache.count_compiled_step(token.shape[1])   # the graph advanced only the device's position
        return logits

    return step


def _check_can_generate(model, name: str) -> None:
    """Refuse models that have no KV cache and no causal decoder, naming what to use instead."""
    if hasattr(model, "new_cache"):
        return
    kind = type(model).__name__
    if kind == "EncoderOnlyModel":
        raise TypeError(f"{name}: {kind} is an encoder (bidirectional attention, no causal mask): it fills in "
                        f"masked tokens, it does not continue text. Generate with a DecoderOnlyLM, or with an "
                        f"EncoderDecoderModel and src=...")
    raise TypeError(f"{name} needs a DecoderOnlyLM or an EncoderDecoderModel (a model with new_cache), "
                    f"got {kind}")


def _check_eos_token_id(eos_token_id, vocab_size: int, name: str) -> None:
    """Refuse an ``eos_token_id`` that the model can never produce (outside ``0 .. vocab_size - 1``, or not an int)."""
    if eos_token_id is None:
        return
    if isinstance(eos_token_id, bool) or not isinstance(eos_token_id, int) or not 0 <= eos_token_id < vocab_size:
        raise ValueError(f"{name}: eos_token_id={eos_token_id!r} is not a token id of this model's vocabulary "
                         f"(0 .. {vocab_size - 1}); give the id of the end-of-sequence token as an int, or None "
                         f"for no end token")


def _max_len(model) -> int:
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "max_len"):
        raise TypeError(f"expected a DecoderOnlyLM (a model with .config.max_len), "
                        f"got {type(model).__name__}")
    return config.max_len


def _decoder(model, src: torch.Tensor | None, src_mask: torch.Tensor | None):
    """A function ``(tokens (B, T), cache=None) -> logits (B, T, V)`` for ``model``.

    A decoder-only LM is called directly. For an encoder-decoder model (one with ``encode``), the
    source is encoded once here and every call decodes against that memory; a source of batch 1
    is broadcast to the batch of ``tokens`` (beam search keeps several beams of one source).
    """
    is_seq2seq = hasattr(model, "encode") and hasattr(model, "decode")
    if src is None:
        if is_seq2seq:
            raise ValueError(f"{type(model).__name__} is an encoder-decoder model: pass the source ids as "
                             f"src=... (B, S); idx holds the start of the target (e.g. a BOS token)")
        if src_mask is not None:
            raise ValueError(f"src_mask is the source padding of an encoder-decoder model, but {type(model).__name__} "
                             f"is decoder-only and has no source: pass the padding of left-padded prompts as "
                             f"attention_mask=... (B, T), 1 on real tokens (generate), or decode one prompt at a "
                             f"time without padding (beam_search)")
        return lambda tokens, cache=None, **kwargs: model(tokens, cache=cache, **kwargs)[0]
    if not is_seq2seq:
        raise ValueError(f"src is the source sentence of an encoder-decoder model, but {type(model).__name__} "
                         f"is decoder-only: put the whole context into idx instead")
    src = _check_prompt(src, "src")
    memory = model.encode(src, src_mask=src_mask)                          # (B_src, S, d), once

    def decode(tokens, cache=None):
        rows = tokens.shape[0]
        source = memory if memory.shape[0] == rows else memory.expand(rows, -1, -1)
        mask = src_mask if src_mask is None or src_mask.shape[0] == rows else src_mask.expand(rows, -1)
        return model.decode(tokens, source, src_mask=mask, cache=cache)
    return decode


@torch.no_grad()
def generate(
    model,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    use_cache: bool = True,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
    src: torch.Tensor | None = None,
    src_mask: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    compile: bool | str = False,
) -> torch.Tensor:
    """Continue each prompt by ``max_new_tokens`` tokens with a decoder-only language model, or
    generate a target from a source with an encoder-decoder model (``src``).

    Every step turns the logits of the last position into one token with :func:`sample_next_token`
    and appends it.

    * ``use_cache=True``: the prompt is run once (prefill) into a KV cache preallocated by
      ``model.new_cache``; every later step feeds only the newest token, whose keys and values are
      appended to the cache.
    * ``use_cache=False``: every step re-runs the whole context, cropped to its last
      ``model.config.max_len`` tokens when it is longer (a sliding window).

    Context longer than ``max_len``: the cache holds at most ``max_len`` tokens. When the prompt
    plus the generated tokens no longer fit, generation falls back to the uncached sliding window
    for the remaining steps (and starts uncached if the prompt alone is longer than ``max_len``).
    While the context fits, both paths run the model on exactly the same tokens, and after that
    both crop the same way, so under greedy decoding ``use_cache=True`` and ``use_cache=False``
    return identical tokens.

    The model runs in eval mode (no dropout) under ``torch.no_grad()``; its previous train/eval
    mode is restored afterwards, also when an error is raised.

    With an :class:`~transformer_core.models.EncoderDecoderModel`, the source ``src`` is encoded
    once, ``idx`` is the start of the target (usually one BOS token per row), and the cache also
    keeps each decoder layer's cross-attention keys and values of the source.

    Args:
        model: a :class:`~transformer_core.models.DecoderOnlyLM` (``model(idx, cache=...)`` returns
            ``(logits, loss)``; ``model.new_cache(batch_size, max_len)`` gives a KV cache), or an
            :class:`~transformer_core.models.EncoderDecoderModel` together with ``src``.
        idx: prompt token ids (the target's first tokens for an encoder-decoder model).
        max_new_tokens: number of tokens to generate, ``>= 0``.
        do_sample: sample instead of greedy arg-max.
        temperature: see :func:`temperature_scale` (sampling only).
        top_k: see :func:`top_k_filter` (sampling only; ``None`` = off).
        top_p: see :func:`top_p_filter` (sampling only; ``None`` = off).
        use_cache: use the KV cache (fast) or re-run the context every step (simple).
        eos_token_id: end-of-sequence token. A sequence that produced it keeps receiving it (as
            padding), and generation stops early once every sequence has produced it.
        generator: random number generator for reproducible sampling.
        src: source token ids, for an encoder-decoder model only.
        src_mask: True/1 on the real (non-padding) source tokens.
        attention_mask: for prompts of different lengths padded on the left, ``(B, T)`` with 1 on
            real tokens and 0 on padding; every row is then generated as if it were alone
            (decoder-only models).
        compile: run each decode step as one ``torch.compile``-d graph over a
            :class:`~transformer_core.cache.StaticKVCache`: fixed shapes, the position kept on the
            device, no recompilation from step to step (on a GPU with CUDA graphs, so a step is one
            launch instead of hundreds). ``True`` uses PyTorch's default backend; a string names
            another (``"eager"`` checks the graph capture without generating code). Decoder-only
            models with learned, sinusoidal, RoPE or no positions. The static cache always spans
            ``max_len``, so a model compiles once per batch size, whatever the prompt's length and
            ``max_new_tokens``. Steps past ``max_len`` run as with ``compile=False`` (uncached
            sliding window), with a warning. Greedy tokens equal those of ``compile=False``.

    Returns:
        The prompts followed by the generated tokens.

    Shapes:
        idx ``(B, T)`` -> ``(B, T + n)`` with ``n = max_new_tokens``, or fewer when every sequence
        reached ``eos_token_id`` early; src and src_mask ``(B, S)``.

    Example:
        >>> out = generate(model, torch.tensor([[1, 2, 3]]), 5)  # greedy, with the KV cache
        >>> out.shape
        torch.Size([1, 8])
    """
    idx = _check_prompt(idx, "generate")
    max_len = _check_generate_request(model, idx, max_new_tokens, eos_token_id, src)
    if compile:
        _check_can_compile(model, src, attention_mask, use_cache)
        _warn_when_past_the_static_cache(idx.shape[1], max_new_tokens, max_len)
    attention_mask = _checked_attention_mask(attention_mask, idx, src)
    was_training = model.training
    model.eval()
    try:
        forward = _decoder(model, src, src_mask)
        cache = _new_cache(model, idx, max_new_tokens, max_len, use_cache=use_cache, compile=compile)
        step = _compiled_step(model, compile, idx.device) if compile else None
        tokens = next_input = idx
        finished = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
        for _ in range(max_new_tokens):
            logits, cache = _next_logits(model, forward, step, cache, tokens, next_input, attention_mask, max_len)
            next_token = sample_next_token(logits[:, -1, :], do_sample=do_sample, temperature=temperature,
                                           top_k=top_k, top_p=top_p, generator=generator)  # (B,)
            if eos_token_id is not None:
                next_token = torch.where(finished, eos_token_id, next_token)
                finished |= next_token == eos_token_id
            next_input = next_token[:, None]                                # (B, 1)
            tokens = torch.cat([tokens, next_input], dim=1)
            if attention_mask is not None:                                  # generated tokens are real
                attention_mask = torch.cat([attention_mask, torch.ones_like(next_input)], dim=1)
            if eos_token_id is not None and bool(finished.all()):
                break
        return tokens
    finally:
        model.train(was_training)


def _check_generate_request(model, idx: torch.Tensor, max_new_tokens: int, eos_token_id: int | None,
                            src: torch.Tensor | None) -> int:
    """Check what :func:`generate` is asked for before anything runs; returns the model's ``max_len``.

    Shapes:
        idx ``(B, T)``; src ``(B, S)``.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    _check_can_generate(model, "generate")
    max_len = _max_len(model)
    vocab_size = model.config.vocab_size
    check_token_ids(idx, vocab_size, "generate: idx")       # once per call (on a GPU, one wait), not per step
    _check_eos_token_id(eos_token_id, vocab_size, "generate")
    batch_size = idx.shape[0]
    if src is not None and src.dim() == 2 and src.shape[0] != batch_size:
        raise ValueError(f"generate: src has {src.shape[0]} rows but idx has {batch_size}; give one "
                         f"target start per source")
    return max_len


def _warn_when_past_the_static_cache(prompt_len: int, max_new_tokens: int, max_len: int) -> None:
    """Warn (at :func:`generate`'s caller) that some steps of a compiled generation will run uncached
    and uncompiled, because the context outgrows ``max_len``."""
    if prompt_len + max_new_tokens - 1 <= max_len:
        return
    advice = (f"ask for at most {max_len - prompt_len + 1} new tokens" if prompt_len <= max_len
              else f"shorten the prompt to at most {max_len} tokens")
    warnings.warn(
        f"generate(compile=...): the prompt ({prompt_len} tokens) and {max_new_tokens} new tokens do not fit "
        f"in max_len={max_len}; once the context is full, each step re-runs the last {max_len} tokens "
        f"without the cache, uncompiled (as compile=False does). To decode every step compiled, {advice}.",
        stacklevel=4)      # this function, generate, torch.no_grad's wrapper, the caller


def _checked_attention_mask(attention_mask: torch.Tensor | None, idx: torch.Tensor,
                            src: torch.Tensor | None) -> torch.Tensor | None:
    """The left-padding mask of a decoder-only model's prompts as ``long`` on the prompts' device.

    Shapes:
        attention_mask and idx ``(B, T)``.
    """
    if attention_mask is None:
        return None
    if src is not None:
        raise ValueError("generate: attention_mask is for left-padded prompts of a decoder-only model; "
                         "an encoder-decoder model takes the source padding as src_mask")
    if tuple(attention_mask.shape) != tuple(idx.shape):
        raise ValueError(f"generate: attention_mask must have the prompt's shape {tuple(idx.shape)}, "
                         f"got {tuple(attention_mask.shape)}")
    return attention_mask.to(device=idx.device, dtype=torch.long)


def _new_cache(model, idx: torch.Tensor, max_new_tokens: int, max_len: int, *, use_cache: bool,
               compile: bool | str):
    """The KV cache :func:`generate` fills, or None when it runs uncached from the start (no cache asked
    for, nothing to generate, or a prompt longer than ``max_len``): a static cache over ``max_len`` to
    compile against, else one just large enough.

    Shapes:
        idx ``(B, T)``.
    """
    batch_size, prompt_len = idx.shape
    if not use_cache or max_new_tokens == 0 or prompt_len > max_len:
        return None
    if compile:
        return _static_cache(model, batch_size, idx.device)
    # the last generated token is never fed back, hence the - 1
    return model.new_cache(batch_size, min(prompt_len + max_new_tokens - 1, max_len), device=idx.device)


def _next_logits(model, forward, step, cache, tokens: torch.Tensor, next_input: torch.Tensor,
                 attention_mask: torch.Tensor | None, max_len: int):
    """The logits of one generation step by the fastest path that applies: a compiled decode step or
    the KV cache while the context fits in the cache; else the whole context cropped to its last
    ``max_len`` tokens, and no cache from then on.

    Returns:
        ``(logits, cache)``: the logits of the positions run, and the cache for the next step (None
        once it no longer fits).

    Shapes:
        tokens ``(B, T)`` (the whole context); next_input ``(B, T_new)`` (its tokens not in the cache
        yet); attention_mask ``(B, T)``; logits ``(B, T_new, V)`` from the cache, else
        ``(B, min(T, max_len), V)``.
    """
    real = {} if attention_mask is None else {"attention_mask": attention_mask}
    fits = cache is not None and cache.length + next_input.shape[1] <= cache.max_len   # host ints
    if fits and step is not None and next_input.shape[1] == 1:      # a compiled decode step
        return step(model, next_input, cache), cache                # (B, 1, V)
    if fits:
        return forward(next_input, cache=cache, **real), cache
    if attention_mask is not None:
        real = {"attention_mask": attention_mask[:, -max_len:]}
    return forward(tokens[:, -max_len:], **real), None


class BeamHypothesis(NamedTuple):
    """One finished beam-search hypothesis.

    Attributes:
        tokens: the prompt followed by the generated tokens (ending in ``eos_token_id`` if it
            finished that way), shape ``(T + n,)``.
        log_prob: the sum of the log-probabilities of the ``n`` generated tokens.
        score: ``log_prob / n ** length_penalty``, the quantity beams are ranked by.
    """

    tokens: torch.Tensor
    log_prob: float
    score: float


@torch.no_grad()
def beam_search(
    model,
    idx: torch.Tensor,
    *,
    beam_size: int,
    max_new_tokens: int,
    length_penalty: float = 1.0,
    eos_token_id: int | None = None,
    src: torch.Tensor | None = None,
    src_mask: torch.Tensor | None = None,
) -> list[BeamHypothesis]:
    """Beam search: keep the ``beam_size`` most probable continuations at every step.

    Each step extends every live beam by every vocabulary token, scores the extensions by their
    total log-probability, and keeps the best ``beam_size`` that do not end in ``eos_token_id``.
    An extension ending in ``eos_token_id`` that ranks among the best ``beam_size`` becomes a
    finished hypothesis. When ``max_new_tokens`` is reached, the live beams finish too. Finished
    hypotheses are ranked by ``score = log_prob / n ** length_penalty`` with ``n`` the number of
    generated tokens (``length_penalty = 0``: raw log-probability, which favours short outputs;
    larger values favour longer ones). The search stops early only when no live beam can still
    beat the ``beam_size``-th finished score (an exact bound, not a heuristic), so the result equals
    running every step.

    Candidates with equal log-probability are ranked by (beam, token) index, so ``beam_size=1``
    without ``eos_token_id`` gives exactly greedy decoding.

    Simplifications, for readability: one prompt (batch size 1), no KV cache (every step re-runs
    each beam's context, cropped to ``model.config.max_len``), log-probabilities accumulated in
    float64.

    Args:
        model: a :class:`~transformer_core.models.DecoderOnlyLM`, or an
            :class:`~transformer_core.models.EncoderDecoderModel` together with ``src`` (the source
            is encoded once and shared by all beams; ``idx`` is the start of the target).
        idx: one prompt.
        beam_size: number of beams, ``>= 1``.
        max_new_tokens: maximum number of generated tokens, ``>= 1``.
        length_penalty: exponent of the length normalisation.
        eos_token_id: token that ends a hypothesis (``None``: all hypotheses have
            ``max_new_tokens`` tokens).
        src, src_mask: the source ids and its real-token mask, for an encoder-decoder model.

    Returns:
        Up to ``beam_size`` :class:`BeamHypothesis`, best score first.

    Shapes:
        idx ``(1, T)`` or ``(T,)``; src and src_mask ``(1, S)``; each hypothesis's ``tokens`` is
        ``(T + n,)``, ``n <= max_new_tokens``.

    Example:
        >>> best = beam_search(model, torch.tensor([[1, 2]]), beam_size=4, max_new_tokens=5)[0]
        >>> best.tokens.shape, best.score <= 0
        (torch.Size([7]), True)
    """
    if isinstance(idx, torch.Tensor) and idx.dim() == 1:
        idx = idx[None]
    idx = _check_prompt(idx, "beam_search")
    if idx.shape[0] != 1:
        raise ValueError(f"beam_search handles one prompt at a time (batch size 1), got a batch of "
                         f"{idx.shape[0]}; loop over the prompts")
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be an integer >= 1, got {beam_size!r}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) \
            or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    max_len = _max_len(model)
    _check_eos_token_id(eos_token_id, model.config.vocab_size, "beam_search")

    def score(log_prob: float, n_generated: int) -> float:
        return log_prob / n_generated ** length_penalty

    if src is not None and src.dim() == 2 and src.shape[0] != 1:
        raise ValueError(f"beam_search: src must hold one source (batch size 1), got {src.shape[0]}")
    was_training = model.training
    model.eval()
    try:
        forward = _decoder(model, src, src_mask)
        alive = idx                                                         # (n_alive, T + step)
        alive_log_probs = torch.zeros(1, dtype=torch.float64, device=idx.device)  # (n_alive,)
        finished: list[BeamHypothesis] = []
        for step in range(1, max_new_tokens + 1):
            logits = forward(alive[:, -max_len:])
            log_probs = F.log_softmax(logits[:, -1, :].double(), dim=-1)    # (n_alive, V)
            vocab_size = log_probs.shape[-1]
            candidates = (alive_log_probs[:, None] + log_probs).flatten()   # (n_alive * V,)
            order = _descending_order(candidates)
            next_rows, next_log_probs = [], []
            for rank, flat_index in enumerate(order.tolist()):
                total = candidates[flat_index].item()
                if len(next_rows) == beam_size or total == float("-inf"):
                    break
                beam, token = divmod(flat_index, vocab_size)
                sequence = torch.cat([alive[beam], alive.new_tensor([token])])
                if token == eos_token_id:
                    if rank < beam_size:
                        finished.append(BeamHypothesis(sequence, total, score(total, step)))
                else:
                    next_rows.append(sequence)
                    next_log_probs.append(total)
            if not next_rows:
                alive = None
                break
            alive = torch.stack(next_rows)
            alive_log_probs = torch.tensor(next_log_probs, dtype=torch.float64, device=idx.device)
            if len(finished) >= beam_size and step < max_new_tokens:
                # A live beam's log-probability can only fall; its best reachable score uses the
                # length that flatters it most: the longest for length_penalty > 0, else the shortest.
                best_length = max_new_tokens if length_penalty > 0 else step + 1
                bound = score(alive_log_probs.max().item(), best_length)
                worst_kept = sorted((h.score for h in finished), reverse=True)[beam_size - 1]
                if bound <= worst_kept:
                    alive = None
                    break
        if alive is not None:
            finished.extend(BeamHypothesis(row, lp, score(lp, alive.shape[1] - idx.shape[1]))
                            for row, lp in zip(alive, alive_log_probs.tolist()))
        finished.sort(key=lambda h: h.score, reverse=True)
        return finished[:beam_size]
    finally:
        model.train(was_training)

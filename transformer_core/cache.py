"""The preallocated key/value cache for autoregressive decoding.

During generation, the keys and values of tokens already processed never change, so each layer
stores them instead of recomputing them. One forward pass of the model over ``T`` new tokens then
computes only the new queries, keys and values, appends the keys and values here, and attends over
everything stored. (The attention itself still costs O(tokens stored) per new token.)

The buffers are allocated once, at their full size; appending writes in place and returns views,
so decoding allocates nothing per step. Memory::

    nbytes = 2 (k and v) x n_layers x batch_size x max_len x n_kv_heads x head_dim x bytes per element

The cache is an inference tool: use it under ``torch.no_grad()`` (or ``torch.inference_mode()``,
creating and using the cache inside the same mode).
"""

from __future__ import annotations

import torch

__all__ = ["KVCache", "LayerKVCache", "StaticKVCache", "StaticLayerKVCache"]


class LayerKVCache:
    """One layer's slice of a :class:`KVCache`.

    Each layer counts its own ``length``; one model forward appends the same number of tokens to
    every layer, so after each complete forward all layers agree (:attr:`KVCache.length` checks it).

    In an encoder-decoder model the layer's cross-attention also keeps ``memory_keys`` and
    ``memory_values``: the keys and values of the encoder output, projected on the first decode
    step and reused at every later one (the source does not change while the target grows).

    Args:
        keys: this layer's key buffer.
        values: this layer's value buffer (same shape as ``keys``).

    Shapes:
        buffers ``(B, n_kv_heads, max_len, head_dim)``; ``memory_keys`` and ``memory_values``
        ``(B, n_kv_heads, S, head_dim)`` for a source of ``S`` tokens, or None before the first step.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys = keys
        self.values = values
        self.length = 0
        self.memory_keys: torch.Tensor | None = None
        self.memory_values: torch.Tensor | None = None

    @property
    def max_len(self) -> int:
        """Capacity in tokens."""
        return self.keys.shape[2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the keys and values of ``T`` new tokens and return everything stored so far.

        Args:
            k: new keys.
            v: new values.

        Shapes:
            k, v ``(B, n_kv_heads, T, head_dim)`` -> ``(k_all, v_all)``, each
            ``(B, n_kv_heads, length + T, head_dim)``: views of the buffers (no copy).
        """
        expected = (self.keys.shape[0], self.keys.shape[1], self.keys.shape[3])
        for name, tensor in (("k", k), ("v", v)):
            if tensor.dim() != 4 or (tensor.shape[0], tensor.shape[1], tensor.shape[3]) != expected:
                raise ValueError(
                    f"{name} has shape {tuple(tensor.shape)}, but this cache stores "
                    f"(batch_size, n_kv_heads, T, head_dim) = ({expected[0]}, {expected[1]}, T, "
                    f"{expected[2]}). Create the cache with the model's new_cache(batch_size) for "
                    "the batch you decode.")
        if k.shape[2] != v.shape[2]:
            raise ValueError(f"k has {k.shape[2]} new tokens but v has {v.shape[2]}.")
        n_new = k.shape[2]
        end = self.length + n_new
        if end > self.max_len:
            raise RuntimeError(
                f"KV cache is full: its capacity is max_len={self.max_len} tokens, it already holds "
                f"{self.length}, and {n_new} more were appended. Create a larger cache, e.g. "
                f"model.new_cache(batch_size, max_len={end}) or KVCache(..., max_len={end}, ...), "
                "or reset() it to start a new sequence.")
        self.keys[:, :, self.length:end] = k
        self.values[:, :, self.length:end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]


class KVCache:
    """Keys and values of every layer, preallocated once.

    Args:
        n_layers: number of attention layers that use the cache.
        batch_size: number of sequences decoded together.
        max_len: capacity in tokens (prompt plus generated tokens).
        n_kv_heads: number of key/value heads (fewer than query heads with grouped-query attention).
        head_dim: size of each head.
        dtype: element type of the buffers.
        device: where the buffers live.

    Shapes:
        ``keys`` and ``values``: ``(n_layers, batch_size, n_kv_heads, max_len, head_dim)``;
        ``layers[i]`` is a :class:`LayerKVCache` over ``keys[i]`` and ``values[i]``.

    Example:
        >>> cache = KVCache(n_layers=2, batch_size=1, max_len=16, n_kv_heads=4, head_dim=8)
        >>> k_all, v_all = cache.layers[0].append(torch.randn(1, 4, 3, 8), torch.randn(1, 4, 3, 8))
        >>> k_all.shape, cache.nbytes
        (torch.Size([1, 4, 3, 8]), 8192)
    """

    def __init__(self, n_layers: int, batch_size: int, max_len: int, n_kv_heads: int,
                 head_dim: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None):
        sizes = dict(n_layers=n_layers, batch_size=batch_size, max_len=max_len,
                     n_kv_heads=n_kv_heads, head_dim=head_dim)
        for name, value in sizes.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        self.n_layers = n_layers
        self.batch_size = batch_size
        self.max_len = max_len
        self.n_kv_heads = n_kv_heads
        self.head_dim = head_dim
        shape = (n_layers, batch_size, n_kv_heads, max_len, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.layers = [LayerKVCache(self.keys[i], self.values[i]) for i in range(n_layers)]

    @property
    def length(self) -> int:
        """Number of tokens stored (the position of the next token)."""
        lengths = {layer.length for layer in self.layers}
        if len(lengths) != 1:
            raise RuntimeError(
                f"the layers of this KV cache hold different numbers of tokens ({sorted(lengths)}), "
                "probably because a forward pass stopped half-way; call reset() and start again.")
        return lengths.pop()

    @property
    def nbytes(self) -> int:
        """Bytes held by the key and value buffers, plus the encoder output's cross-attention keys
        and values once an encoder-decoder model has stored them."""
        memory = sum(t.numel() * t.element_size() for layer in self.layers
                     for t in (layer.memory_keys, layer.memory_values) if t is not None)
        return self.keys.numel() * self.keys.element_size() * 2 + memory

    def reset(self) -> None:
        """Forget all stored tokens and the encoder output's keys and values (the buffers are kept
        and overwritten later). Call it before decoding a new source with the same cache."""
        for layer in self.layers:
            layer.length = 0
            layer.memory_keys = layer.memory_values = None

    def reorder(self, batch_indices: torch.Tensor) -> None:
        """Reorder (or duplicate) the stored sequences along the batch, e.g. for beam search.

        After the call, sequence ``b`` holds what sequence ``batch_indices[b]`` held before.

        Args:
            batch_indices: integer tensor ``(batch_size,)`` of source rows.
        """
        if not isinstance(batch_indices, torch.Tensor) or batch_indices.dtype not in (torch.long, torch.int):
            described = (f"dtype {batch_indices.dtype}" if isinstance(batch_indices, torch.Tensor)
                         else type(batch_indices).__name__)
            hint = (f"; wrap the rows as torch.tensor({list(batch_indices)!r})"
                    if isinstance(batch_indices, (list, tuple)) else "; convert it with .long()")
            raise ValueError(f"batch_indices must be an integer tensor of shape ({self.batch_size},), got "
                             f"{described}{hint}")
        if batch_indices.shape != (self.batch_size,):
            raise ValueError(f"batch_indices must have shape ({self.batch_size},), got "
                             f"{tuple(batch_indices.shape)}.")
        if not is_compiling() and batch_indices.device.type == "cpu":   # a GPU tensor would make the host wait
            low, high = int(batch_indices.min()), int(batch_indices.max())
            if low < 0 or high >= self.batch_size:
                bad = low if low < 0 else high
                raise ValueError(f"batch_indices: row {bad} is outside 0 .. {self.batch_size - 1}; each entry "
                                 f"names a sequence of this cache's batch of {self.batch_size}.")
        index = batch_indices.to(device=self.keys.device, dtype=torch.long)
        self.keys.copy_(self.keys.index_select(1, index))
        self.values.copy_(self.values.index_select(1, index))
        for layer in self.layers:
            if layer.memory_keys is not None:
                layer.memory_keys = layer.memory_keys.index_select(0, index)
                layer.memory_values = layer.memory_values.index_select(0, index)


def is_compiling() -> bool:
    """Whether ``torch.compile`` is tracing this call (``torch.compiler.is_compiling`` is new in PyTorch 2.3).

    Host-side checks and Python counters are skipped while tracing: compiled code cannot raise from
    a Python value, and a counter read inside the graph would be baked in as a constant (and guarded
    on, so the next step would recompile).
    """
    check = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling
    return bool(check())


class StaticLayerKVCache:
    """One layer's slice of a :class:`StaticKVCache`: it writes at the shared position tensor and
    returns the whole buffers, so every decode step has the same shapes.

    Args:
        keys, values: this layer's buffers.
        owner: the :class:`StaticKVCache` they belong to (its ``position`` and host ``length``).
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, owner: "StaticKVCache"):
        self.keys = keys
        self.values = values
        self.owner = owner
        self.memory_keys = self.memory_values = None     # the encoder output's, in an encoder-decoder model

    @property
    def position(self) -> torch.Tensor:
        """The shared position tensor: where the next token is written."""
        return self.owner.position

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``T`` new keys and values at ``position .. position + T - 1``; return the full buffers.

        Raises:
            RuntimeError: the ``T`` tokens do not fit (checked on the host, before writing).

        Shapes:
            k, v ``(B, n_kv_heads, T, head_dim)`` -> two ``(B, n_kv_heads, max_len, head_dim)`` buffers;
            the caller masks the keys beyond the filled part.
        """
        if not is_compiling():
            self.owner.check_room(k.shape[2])
        slots = self.position + torch.arange(k.shape[2], device=k.device)              # (T,)
        self.keys.index_copy_(2, slots, k.to(self.keys.dtype))
        self.values.index_copy_(2, slots, v.to(self.values.dtype))
        return self.keys, self.values


class StaticKVCache(KVCache):
    """A :class:`KVCache` whose decode steps all have the same shapes, for ``torch.compile``.

    The number of stored tokens is a tensor, :attr:`position`, not a Python int: a compiled decode
    step reads and advances it on the device, so the step never recompiles and needs no host
    synchronisation. Attention then runs over all ``max_len`` slots with the unfilled ones masked
    (:meth:`DecoderOnlyLM.forward <transformer_core.models.DecoderOnlyLM.forward>` builds the mask).
    Position schemes that depend only on absolute positions (learned, sinusoidal, RoPE, none) are
    supported.

    The host keeps its own count, :attr:`length`, from the numbers of tokens it asked to store, so
    that a write past ``max_len`` is refused with a clear error before it happens, without reading
    the device (an index past the buffer would otherwise be a bare ``IndexError``, or on a GPU an
    asynchronous device assert). Compiled code advances only the device tensor; whoever runs it
    records the step with :meth:`count_compiled_step`.

    Args: as :class:`KVCache`.

    Example:
        >>> cache = StaticKVCache(n_layers=1, batch_size=1, max_len=8, n_kv_heads=2, head_dim=4)
        >>> k_all, _ = cache.layers[0].append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
        >>> k_all.shape, cache.length
        (torch.Size([1, 2, 8, 4]), 0)
    """

    def __init__(self, n_layers: int, batch_size: int, max_len: int, n_kv_heads: int,
                 head_dim: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None):
        super().__init__(n_layers, batch_size, max_len, n_kv_heads, head_dim, dtype=dtype, device=device)
        self.position = torch.zeros((), dtype=torch.long, device=self.keys.device)
        self._length = 0
        self.layers = [StaticLayerKVCache(self.keys[i], self.values[i], self) for i in range(n_layers)]

    @property
    def length(self) -> int:
        """Number of tokens stored (the host's count: it never waits for the device)."""
        return self._length

    def check_room(self, n_new: int) -> None:
        """Raise a RuntimeError if ``n_new`` more tokens do not fit (a host check, no device read)."""
        end = self._length + n_new
        if end > self.max_len:
            raise RuntimeError(
                f"StaticKVCache is full: its capacity is max_len={self.max_len} tokens, it already holds "
                f"{self._length}, and {n_new} more were to be written. Create a larger cache "
                f"(StaticKVCache(..., max_len={end}, ...)) or reset() it to start a new sequence.")

    def advance(self, n_new: int) -> None:
        """Count ``n_new`` more tokens as stored, after every layer has written them (on the device,
        and on the host unless this runs inside compiled code)."""
        self.position.add_(n_new)
        if not is_compiling():
            self._length += n_new

    def count_compiled_step(self, n_new: int) -> None:
        """Record on the host that a compiled forward stored ``n_new`` tokens (its graph advanced
        only :attr:`position`). Call :meth:`check_room` before running it."""
        self._length += n_new

    def reset(self) -> None:
        """Forget all stored tokens and the encoder output's keys and values (the buffers are kept and
        overwritten later)."""
        self.position.zero_()
        self._length = 0
        for layer in self.layers:
            layer.memory_keys = layer.memory_values = None

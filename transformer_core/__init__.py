"""transformer_core: the course library of "Transformer Core Mechanisms".

One readable, tested implementation of everything the course teaches. Modules:

========== ==============================================================
attention  scaled dot-product attention, masks, multi-head attention
positions  sinusoidal, learned, T5 relative bias, ALiBi, RoPE
layers     LayerNorm, feed-forward, Post-LN / Pre-LN encoder and decoder layers
cache      the preallocated KV cache
models     one config, three architectures (encoder-only, decoder-only, encoder-decoder)
generation greedy, temperature, top-k, top-p, beam search; cached and uncached
convert    weights from Hugging Face GPT-2 / BERT and from ``torch.nn.Transformer``
complexity parameter, FLOP, memory and KV-cache counters; MFU
data       character tokenizer, corpora, synthetic tasks
train      the training loop and its presets
viz        plots and widgets the chapters share
testing    what notebook test cells call: friendly checks, shortcut guard, dual-mode helpers
wire       the checked JSON format between a learner's kernel and the grader's referee
agent      the grader's agent in a learner's kernel (calls their code, returns raw results)
remote     the learner's objects as the referee sees them (proxies)
device     picking the device and the mixed-precision dtype
========== ==============================================================

Conventions used everywhere: tensors are batch-first ``(B, T, d_model)``; attention masks are
boolean and ``True`` means "may attend".
"""

__version__ = "0.1.0"

"""A switched-off shortcut: its exception and its wording, shared by every place that enforces it.

Three places tell a learner that a part forbids a function: the guard in their kernel
(:func:`course_runtime.testing.forbid_shortcuts`, an early hint while they work), the referee's
proxies that re-raise what a kernel reported (:mod:`course_runtime.remote`), and the grader's check
of the submitted source (:mod:`autograder.engine.policy`), which is what decides points. They all word it
with :func:`shortcut_message`, so ``validate`` and the grade say the same thing. This module imports
nothing of the course, which also keeps ``testing`` and ``remote`` from importing each other.
"""


class ShortcutError(RuntimeError):
    """Raised when a learner's code calls a function that :func:`~course_runtime.testing.forbid_shortcuts`
    switched off."""


# How to write by hand what a built-in does, by the last part of its name.
ADVICE = {
    "softmax": "write it from torch.exp and .sum(dim=-1, keepdim=True) (subtract the row maximum first)",
    "log_softmax": "write it from the max, torch.exp, .sum and torch.log",
    "scaled_dot_product_attention": ("compute the scores q @ k.transpose(-2, -1) / sqrt(d), apply the "
                                     "mask, take the softmax and multiply by v"),
    "multi_head_attention_forward": "project, split into heads, attend and merge with your own code",
    "MultiheadAttention": "project, split into heads, attend and merge with your own code",
    "layer_norm": "compute the mean and variance over the last axis yourself",
    "LayerNorm": "compute the mean and variance over the last axis yourself",
    "gelu": "write it from its formula (torch.erf or torch.tanh)",
    "relu": "write it with torch.clamp or torch.where",
    "linear": "write it as x @ weight.T + bias",
    "Linear": "write it as x @ weight.T + bias",
}
GENERIC_ADVICE = "write this step with your own code"


def advice(dotted_name: str) -> str:
    """How to write what ``dotted_name`` does by hand (the most specific advice known, else a generic line)."""
    for part in reversed(dotted_name.split(".")):
        if part in ADVICE:
            return ADVICE[part]
    return GENERIC_ADVICE


def shortcut_message(dotted_name: str, reason: str | None = None) -> str:
    """The one sentence that says ``dotted_name`` may not be used, and what to write instead.

    Example:
        >>> shortcut_message("torch.softmax")[:60]
        'implement this yourself: `torch.softmax` is switched off in '
    """
    return f"implement this yourself: `{dotted_name}` is switched off in this part; {reason or advice(dotted_name)}."

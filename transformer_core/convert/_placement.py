"""Where and in which dtype a converted module lives: the source module's, from the first copy on."""

from __future__ import annotations

from torch import nn


def in_source_dtype(ours: nn.Module, theirs: nn.Module) -> nn.Module:
    """Cast the freshly built ``ours`` to the floating dtype of ``theirs`` before any weight is copied.

    Copying into float32 parameters and casting afterwards would round float64 weights through
    float32 (a relative error of about 6e-8 in every weight), so a float64 source would no longer
    give its own logits to float64 precision.
    """
    return ours.to(dtype=next(theirs.parameters()).dtype)


def finish(ours: nn.Module, theirs: nn.Module) -> nn.Module:
    """Move ``ours`` to the device of ``theirs`` and give it the same train/eval mode."""
    return ours.to(device=next(theirs.parameters()).device).train(theirs.training)

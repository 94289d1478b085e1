"""Plots and widgets the chapters share: heatmaps, attention maps, loss curves, an attention explorer.

Every plotting function draws on a Matplotlib ``Axes`` (a new figure when ``ax`` is ``None``) and
returns it, so a notebook can add titles or save the figure. Nothing here calls ``plt.show()``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["plot_heatmap", "plot_attention", "plot_curves", "attention_explorer"]


def _to_numpy_2d(values, name: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().float().cpu().numpy()
    array = np.asarray(values, dtype=float)
    squeezed = array.squeeze() if array.ndim > 2 else array
    if squeezed.ndim == 1 and array.ndim != 1:
        squeezed = squeezed[None, :]
    if squeezed.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D matrix (rows, columns), got shape {array.shape}. "
                         f"Select one batch element and one head first, e.g. weights[0, head].")
    return squeezed


def _check_labels(labels, size: int, what: str, name: str):
    if labels is not None and len(labels) != size:
        raise ValueError(f"{name}: {len(labels)} {what} labels for {size} {what}s; give one label per {what}")


def plot_heatmap(matrix, *, x_labels: Sequence[str] | None = None, y_labels: Sequence[str] | None = None,
                 ax: plt.Axes | None = None, title: str | None = None, xlabel: str | None = None,
                 ylabel: str | None = None, cmap: str = "viridis", colorbar: bool = True,
                 vmin: float | None = None, vmax: float | None = None, annotate: bool = False) -> plt.Axes:
    """Draw a matrix as a heatmap (position-encoding tables, score matrices, masks, ...).

    Args:
        matrix: a tensor or array of shape ``(rows, columns)`` (extra size-1 dimensions are squeezed).
        x_labels, y_labels: tick labels for columns and rows (one per column / row).
        ax: where to draw; a new figure when ``None``.
        title, xlabel, ylabel: text for the plot.
        cmap, vmin, vmax: colour map and its range.
        colorbar: add a colour bar.
        annotate: write each value in its cell (for small matrices).

    Returns:
        The ``Axes``.
    """
    values = _to_numpy_2d(matrix, "plot_heatmap")
    rows, cols = values.shape
    _check_labels(x_labels, cols, "column", "plot_heatmap")
    _check_labels(y_labels, rows, "row", "plot_heatmap")
    if ax is None:
        width = min(12.0, 2.0 + 0.35 * cols) if x_labels is not None else 6.0
        height = min(10.0, 1.5 + 0.35 * rows) if y_labels is not None else 4.5
        _, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if x_labels is not None:
        ax.set_xticks(range(cols), labels=[str(s) for s in x_labels], rotation=90)
    if y_labels is not None:
        ax.set_yticks(range(rows), labels=[str(s) for s in y_labels])
    if annotate:
        middle = np.nanmean(values)
        for i in range(rows):
            for j in range(cols):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if values[i, j] > middle else "white")
    if colorbar:
        ax.figure.colorbar(image, ax=ax)
    if title:
        ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    return ax


def plot_attention(weights, x_labels: Sequence[str] | None = None, y_labels: Sequence[str] | None = None,
                   ax: plt.Axes | None = None, title: str | None = None) -> plt.Axes:
    """Heatmap of attention weights: row ``i`` shows how query ``i`` spreads its attention over keys.

    Args:
        weights: ``(T_q, T_k)`` attention weights (rows sum to 1), a tensor or array; select one
            batch element and head from ``(B, n_heads, T_q, T_k)`` first.
        x_labels: the key tokens (columns), ``T_k`` strings.
        y_labels: the query tokens (rows), ``T_q`` strings; defaults to ``x_labels`` for
            self-attention.
        ax: where to draw; a new figure when ``None``.
        title: plot title.

    Returns:
        The ``Axes``.
    """
    values = _to_numpy_2d(weights, "plot_attention")
    if y_labels is None and x_labels is not None and len(x_labels) == values.shape[0]:
        y_labels = x_labels
    return plot_heatmap(values, x_labels=x_labels, y_labels=y_labels, ax=ax, title=title,
                        xlabel="key (attended to)", ylabel="query (attending)", cmap="Blues",
                        vmin=0.0, vmax=max(1e-9, float(values.max())))


def plot_curves(history, ax: plt.Axes | None = None, *, log_scale: bool = False) -> plt.Axes:
    """Training and validation loss against the optimizer step.

    Args:
        history: a :class:`~transformer_core.train.TrainResult`, its ``history`` dict (``step``,
            ``train_loss``, ``val_loss`` lists), or any mapping of name -> list of values (plotted
            against their index). A ``TrainResult``'s per-step losses are drawn faintly behind.
        ax: where to draw; a new figure when ``None``.
        log_scale: logarithmic loss axis.

    Returns:
        The ``Axes``.
    """
    iter_losses = getattr(history, "iter_losses", None)
    if hasattr(history, "history"):
        history = history.history
    if not isinstance(history, Mapping) or not history:
        raise TypeError("plot_curves: pass a TrainResult or a dict such as "
                        "{'step': [...], 'train_loss': [...], 'val_loss': [...]}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    if iter_losses:
        ax.plot(range(len(iter_losses)), iter_losses, color="tab:blue", alpha=0.25, linewidth=0.8,
                label="train (each step)")
    steps = history.get("step")
    for name, values in history.items():
        if name in ("step", "lr", "elapsed_s") or not len(values):
            continue
        xs = steps if steps is not None and len(steps) == len(values) else range(len(values))
        ax.plot(xs, values, marker="o" if len(values) < 40 else None, label=name.replace("_", " "))
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    if log_scale:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    finite = np.isfinite(scores)
    shifted = np.where(finite, scores - np.max(np.where(finite, scores, -np.inf), axis=-1, keepdims=True), -np.inf)
    exp = np.where(finite, np.exp(shifted), 0.0)
    total = exp.sum(axis=-1, keepdims=True)
    return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def attention_explorer(q, k, tokens: Sequence[str] | None = None, *, causal: bool = True,
                       scale_range: tuple[float, float] = (0.0, 3.0)):
    """An interactive attention map: pick a head and a query token, stretch the score scale.

    The widget recomputes ``softmax(s * q k^T / sqrt(head_dim))`` (with the causal mask when ticked)
    whenever a control moves, and redraws the map and the chosen query's weights. ``s = 1`` is
    ordinary attention; ``s -> 0`` flattens every row towards uniform, large ``s`` approaches a
    hard arg-max (chapter 3's temperature experiment).

    Args:
        q, k: queries and keys of shape ``(n_heads, T, head_dim)`` or ``(T, head_dim)``; a leading
            batch dimension of size 1 is allowed.
        tokens: ``T`` labels for the positions.
        causal: start with the causal mask on.
        scale_range: the slider's range for ``s``.

    Returns:
        An ``ipywidgets.VBox``; display it in a notebook. It works headless too: the figure is
        rendered to a PNG in an ``ipywidgets.Image`` child. ``box.controls`` maps ``"head"``,
        ``"query"``, ``"scale"``, ``"causal"`` to the control widgets and ``box.weights()`` returns
        the ``(T, T)`` weights currently shown.
    """
    import ipywidgets as widgets

    def as_heads(x, name):
        x = x.detach().float().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)
        if x.ndim == 4 and x.shape[0] == 1:
            x = x[0]
        if x.ndim == 2:
            x = x[None]
        if x.ndim != 3:
            raise ValueError(f"attention_explorer: {name} must be (n_heads, T, head_dim) or (T, head_dim), "
                             f"got shape {x.shape}")
        return x

    qs, ks = as_heads(q, "q"), as_heads(k, "k")
    if qs.shape != ks.shape:
        raise ValueError(f"attention_explorer: q and k must have the same shape, got {qs.shape} and {ks.shape}")
    n_heads, length, head_dim = qs.shape
    labels = [str(t) for t in tokens] if tokens is not None else [str(i) for i in range(length)]
    _check_labels(labels, length, "token", "attention_explorer")
    raw_scores = qs @ ks.transpose(0, 2, 1) / math.sqrt(head_dim)        # (n_heads, T, T)
    lower = np.tril(np.ones((length, length), dtype=bool))

    head = widgets.Dropdown(options=[(f"head {h}", h) for h in range(n_heads)], value=0, description="head")
    query = widgets.Dropdown(options=[(f"{i}: {t}", i) for i, t in enumerate(labels)], value=length - 1,
                             description="query")
    scale = widgets.FloatSlider(value=1.0, min=scale_range[0], max=scale_range[1], step=0.05,
                                description="scale s", continuous_update=False)
    causal_box = widgets.Checkbox(value=causal, description="causal mask")
    image = widgets.Image(format="png")

    def current_weights() -> np.ndarray:
        scores = scale.value * raw_scores[head.value]
        if causal_box.value:
            scores = np.where(lower, scores, -np.inf)
        return _softmax_rows(scores)

    def redraw(_change=None):
        weights = current_weights()
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 2]})
        plot_attention(weights, x_labels=labels, y_labels=labels, ax=left,
                       title=f"head {head.value}, s = {scale.value:.2f}")
        left.axhline(query.value, color="tab:red", linewidth=1.0)
        right.bar(range(length), weights[query.value], color="tab:blue")
        right.set_xticks(range(length), labels=labels, rotation=90)
        right.set_ylim(0, 1)
        right.set_title(f"weights of query {query.value} ({labels[query.value]!r})")
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80)
        plt.close(fig)
        image.value = buffer.getvalue()

    for control in (head, query, scale, causal_box):
        control.observe(redraw, names="value")
    redraw()
    box = widgets.VBox([widgets.HBox([head, query]), widgets.HBox([scale, causal_box]), image])
    box.controls = {"head": head, "query": query, "scale": scale, "causal": causal_box}
    box.weights = current_weights
    return box

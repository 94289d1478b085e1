"""course_runtime.viz: plots return Axes, the attention explorer works headless."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_runtime import viz  # noqa: E402
from transformer_core.train import TrainResult  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_plot_attention_returns_axes_with_labels():
    weights = torch.softmax(torch.randn(1, 1, 4, 4), dim=-1)
    ax = viz.plot_attention(weights, x_labels=list("abcd"), title="toy")
    assert isinstance(ax, plt.Axes)
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abcd"), "self-attention reuses the labels"
    assert ax.get_title() == "toy"


def test_plot_attention_rejects_wrong_shapes_and_labels():
    with pytest.raises(ValueError, match="2-D"):
        viz.plot_attention(torch.rand(2, 3, 4, 4))
    with pytest.raises(ValueError, match="one label per column"):
        viz.plot_attention(torch.rand(3, 4), x_labels=["a", "b"])


def test_plot_heatmap_on_given_axes():
    _, ax = plt.subplots()
    out = viz.plot_heatmap(np.arange(6).reshape(2, 3), ax=ax, annotate=True, xlabel="d", ylabel="pos")
    assert out is ax and ax.get_xlabel() == "d"
    assert len(ax.texts) == 6


def test_plot_curves_accepts_dict_and_train_result():
    history = {"step": [0, 10, 20], "train_loss": [4.0, 3.0, 2.5], "val_loss": [4.1, 3.2, 2.8],
               "lr": [0.1, 0.1, 0.1], "elapsed_s": [0, 1, 2]}
    ax = viz.plot_curves(history)
    assert {line.get_label() for line in ax.get_lines()} == {"train loss", "val loss"}
    result = TrainResult(history=history, iter_losses=[4.0] * 20, final_val_loss=2.8, best_val_loss=2.8,
                         tokens_per_second=1.0, flops_per_token=1.0, mfu=None, wall_time_s=1.0, n_params=1,
                         device="cpu", dtype="float32")
    ax = viz.plot_curves(result, log_scale=True)
    assert len(ax.get_lines()) == 3 and ax.get_yscale() == "log"
    with pytest.raises(TypeError, match="TrainResult"):
        viz.plot_curves([1, 2, 3])


def test_attention_explorer_is_a_widget_that_reacts():
    q, k = torch.randn(2, 2, 5, 8).unbind(0)
    box = viz.attention_explorer(q, k, tokens=["the", "cat", "sat", "on", "mat"])
    assert isinstance(box, ipywidgets.VBox)
    image = box.children[-1]
    before = image.value
    assert before[:4] == b"\x89PNG"
    weights = box.weights()
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
    assert np.allclose(np.triu(weights, 1), 0.0), "the causal mask hides future tokens"
    box.controls["scale"].value = 0.0
    np.testing.assert_allclose(box.weights()[2], [1 / 3, 1 / 3, 1 / 3, 0, 0], rtol=1e-6)
    box.controls["causal"].value = False
    np.testing.assert_allclose(box.weights(), np.full((5, 5), 0.2), rtol=1e-6)
    box.controls["head"].value = 1
    assert image.value != before


def test_attention_explorer_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="same shape"):
        viz.attention_explorer(torch.randn(2, 5, 8), torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match="label"):
        viz.attention_explorer(torch.randn(5, 8), torch.randn(5, 8), tokens=["a"])

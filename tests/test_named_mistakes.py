"""Exercises 04, 07, 09 and 10: a classic wrong answer fails a visible test whose message names the mistake
(issue 31). Exercise 11 has its own list, in test_your_own_gpt.py.

Each mistake is the solution with one piece of code replaced; the visible tests run next to it in a
kernel, as in the learner's notebook, and the message of the first failing test must name the mistake.
"""

import os

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.core.files import REPO_ROOT

pytestmark = pytest.mark.slow

# Exercise 10's count of the weights that multiply every token, which five mistakes replace.
_EVERY_LINEAR_WEIGHT = "sum(module.weight.numel() for module in model.modules() if isinstance(module, nn.Linear))"
# assignment -> {mistake: (solution cell, right code, wrong code, visible test cell, words the message must contain)}
MISTAKES = {
    "04-multi-head-attention/multi_head_attention.ipynb": {
        "keys and values projected from x in cross-attention": (
            "multi_head_attention", "source = x if context is None else context", "source = x",
            "test_multi_head_attention", "keys and values were projected from x"),
        ".view after a transpose in merge_heads": (
            "merge_heads", "x.transpose(1, 2).reshape(", "x.transpose(1, 2).view(", "test_merge_heads",
            ".view after .transpose(1, 2)"),
        ".view after a transpose inside forward": (
            "multi_head_attention", "merge_heads(weights @ v)",
            "(weights @ v).transpose(1, 2).view(x.shape[0], x.shape[1], self.d_model)",
            "test_multi_head_attention", ".view after .transpose(1, 2)"),
    },
    "07-three-architectures/three_architectures.ipynb": {
        "cross-attention arguments swapped": (
            "decoder_block", "self.cross_attn(h, memory, mask=memory_mask)",
            "self.cross_attn(memory, h, mask=memory_mask)", "test_decoder_block",
            "not self.cross_attn(memory, h, ...)"),
        "cross-attention arguments swapped, no memory mask": (
            "decoder_block", "self.cross_attn(h, memory, mask=memory_mask)", "self.cross_attn(memory, h)",
            "test_decoder_block", "not self.cross_attn(memory, h, ...)"),
    },
    "09-complexity/complexity.ipynb": {
        "the tied output weight counted twice": (
            "training_step_memory", "parameters = V * d + T * d", "parameters = 2 * V * d + T * d",
            "test_training_step_memory", "(tied weights): one tensor, count it once"),
        "the position table left out": (
            "training_step_memory", "parameters = V * d + T * d", "parameters = V * d", "test_training_step_memory",
            "the learned position table has max_len = seq_len rows"),
        "the linear layers' biases left out": (
            "training_step_memory", "layer = 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d)",
            "layer = 4 * d * d + d * d_ff + d_ff * d", "test_training_step_memory",
            "every linear layer of attention and of the feed-forward network has a bias"),
        "one AdamW moment": (
            "training_step_memory", '"optimizer_state": 2 * parameters', '"optimizer_state": parameters',
            "test_training_step_memory", "AdamW keeps TWO tensors per parameter"),
        "the attention weights left out": (
            "training_step_memory", "+ 2 * B * h * T * T)", "+ 0)", "test_training_step_memory",
            "you left out the attention weights"),
        "one (T x T) tensor per layer": (
            "training_step_memory", "+ 2 * B * h * T * T)", "+ B * h * T * T)", "test_training_step_memory",
            "you counted one"),
        "one (B, T, d_ff) tensor per layer": (
            "training_step_memory", "+ 2 * B * T * d_ff", "+ B * T * d_ff", "test_training_step_memory",
            "GELU's input and GELU's output"),
        "the log-probabilities left out": (
            "training_step_memory", "+ B * T * V", "", "test_training_step_memory",
            "the cross-entropy loss saves the log-probabilities"),
        "the diagonal tiles left out": (
            "causal_block_counts", "computed = n_blocks * (n_blocks + 1) // 2", "computed = n_blocks * (n_blocks - 1) // 2",
            "test_causal_block_counts", "the diagonal tiles (key block = query block) hold allowed entries"),
        "n // block_size blocks": (
            "causal_block_counts", "n_blocks = -(-n // block_size)", "n_blocks = n // block_size",
            "test_causal_block_counts", "ceil(n / block_size) blocks"),
        "the diagonal tiles skipped": (
            "causal_block_counts", '"skipped": n_blocks * n_blocks - computed,',
            '"skipped": n_blocks * n_blocks - computed + n_blocks,', "test_causal_block_counts",
            "a diagonal tile is not all masked"),
        "every diagonal tile partial": (
            "causal_block_counts", "sum(1 for size in rows if size > 1)", "n_blocks", "test_causal_block_counts",
            "a diagonal tile with a single row holds only the entry (i, i)"),
        "only the allowed score entries counted": (
            "causal_block_counts", "sum(size * min((r + 1) * block_size, n) for r, size in enumerate(rows))",
            "n * (n + 1) // 2", "test_causal_block_counts", "a computed tile is computed whole"),
        "no mask inside the diagonal tile": (
            "causal_blockwise_attention", "if c == r:", "if False:", "test_causal_blockwise_attention",
            "inside the diagonal tile, the keys after the query must be masked"),
        "a query that does not see itself": (
            "causal_blockwise_attention", "cols <= rows", "cols < rows", "test_causal_blockwise_attention",
            "a query attends to itself"),
        "the diagonal tile not visited": (
            "causal_blockwise_attention", "range(0, r + 1, block_size)", "range(0, r, block_size)",
            "test_causal_blockwise_attention", "visit the key blocks c = 0 .. r, the diagonal included"),
        "scores not scaled": (
            "causal_blockwise_attention", ".transpose(-2, -1) * scale", ".transpose(-2, -1)",
            "test_causal_blockwise_attention", "divide the scores by sqrt(d)"),
    },
    "10-capstone-gpt/capstone_gpt.ipynb": {
        "optimizer state not restored": (
            "save_checkpoint", '    optimizer.load_state_dict(checkpoint["optimizer"])\n', "", "test_checkpoint",
            "the optimizer's state was not restored"),
        "optimizer state not saved": (
            "save_checkpoint", '"optimizer": optimizer.state_dict(), ', "", "test_checkpoint",
            "the checkpoint does not hold AdamW's moments"),
        "generator state not saved": (
            "save_checkpoint", ',\n            "rng": generator.get_state()}', "}", "test_checkpoint",
            "the checkpoint does not hold the generator's state"),
        "step counter lost": (
            "save_checkpoint", '    return int(checkpoint["step"])', "    return 0", "test_checkpoint",
            "the learning-rate schedule starts its warm-up again"),
        "generator state not restored": (
            "save_checkpoint", '    generator.set_state(checkpoint["rng"])\n', "", "test_checkpoint",
            "the generator's state was not restored"),
        "model object saved instead of its state_dict": (
            "save_checkpoint", '{"model": model.state_dict(),', '{"model": model,', "test_checkpoint",
            "Did you save the model or the optimizer itself?"),
        "model weights not restored": (
            "save_checkpoint", '    model.load_state_dict(checkpoint["model"])\n', "", "test_checkpoint",
            "the model's weights were not restored"),
        "every parameter counted as a matmul weight": (
            "matmul_weights", _EVERY_LINEAR_WEIGHT,
            "sum(p.numel() for p in model.parameters())", "test_measure_mfu", "you counted every parameter"),
        "position table counted": (
            "matmul_weights", _EVERY_LINEAR_WEIGHT,
            "sum(p.numel() for p in model.parameters() if p.dim() >= 2)", "test_measure_mfu", "the position table too"),
        "tied head left out": (
            "matmul_weights", _EVERY_LINEAR_WEIGHT,
            'sum(p.numel() for n, p in model.named_parameters() if p.dim() >= 2 and not n.startswith("embeddings"))',
            "test_measure_mfu", "the output head is missing"),
        "the 12 L d^2 rule of thumb": (
            "matmul_weights", _EVERY_LINEAR_WEIGHT,
            "12 * len(model.layers) * model.config.d_model ** 2 + model.config.vocab_size * model.config.d_model",
            "test_measure_mfu", "that is the rule of thumb 12 L d^2 + V d"),
        "keys and values counted as wide as the queries": (
            "matmul_weights", _EVERY_LINEAR_WEIGHT,
            "len(model.layers) * (4 * model.config.d_model ** 2 + 2 * model.config.d_model * model.config.d_ff)"
            " + model.config.vocab_size * model.config.d_model", "test_measure_mfu",
            "k_proj and v_proj have n_kv_heads * head_dim outputs"),
        "warmup_steps ignored": (
            "matmul_weights", "    for _ in range(warmup_steps):", "    for _ in range(2):", "test_measure_mfu",
            "it should run warmup_steps + measured_steps"),
        "no synchronize before the final clock": (
            "matmul_weights", "        train_one_step()\n    wait()\n    seconds", "        train_one_step()\n    seconds",
            "test_measure_mfu", "call synchronize() before reading the clock at the end"),
        "no synchronize after the warm-up": (
            "matmul_weights", "    wait()\n    start = clock()", "    start = clock()", "test_measure_mfu",
            "the warm-up's work was still running when the clock started"),
        "warm-up timed": (
            "matmul_weights", "    for _ in range(warmup_steps):\n        train_one_step()\n    wait()\n    start = clock()\n",
            "    start = clock()\n    for _ in range(warmup_steps):\n        train_one_step()\n    wait()\n",
            "test_measure_mfu", "the warm-up steps were timed"),
        "time.perf_counter instead of the given clock": (
            "matmul_weights", "    start = clock()", "    start = time.perf_counter()", "test_measure_mfu",
            "read the clock it was given 1 times"),
        "forward FLOPs only": (
            "matmul_weights", "6 * matmul_weights(model) + 12 *", "2 * matmul_weights(model) + 4 *", "test_measure_mfu",
            "the backward pass costs twice the forward pass"),
        "attention term missing": (
            "matmul_weights", " + 12 * len(model.layers) * context * model.config.d_model", "", "test_measure_mfu",
            "the attention term 12 L T d is missing"),
        "MFU as a percentage": (
            "matmul_weights", "float(flops_per_second / peak_flops)", "float(100 * flops_per_second / peak_flops)",
            "test_measure_mfu", "return a fraction, not a percentage"),
        "the seed not passed on": (
            "final_loss", "final_loss(lr, n_steps, seed) for lr in lrs", "final_loss(lr, n_steps, 0) for lr in lrs",
            "test_lr_sweep", "use the seed you are given"),
        "AdamW's default weight decay": (
            "final_loss", "lr=lr, weight_decay=0.0)", "lr=lr)", "test_lr_sweep", "weight_decay defaults to 0.01"),
        "batches from the global random state": (
            "final_loss", "x, y = sweep_batch(generator)", "x, y = get_batch(SWEEP_TRAIN, 8, 16)", "test_lr_sweep",
            "draw every batch with sweep_batch(generator)"),
        "last training loss returned": (
            "final_loss", "    return sweep_val_loss(model)", "    return loss.item()", "test_lr_sweep",
            "not the loss of the last training batch"),
        "a nan picked as the best rate": (
            "final_loss", "    finite = [(loss, lr) for loss, lr in zip(losses, lrs) if math.isfinite(loss)]\n"
            "    return losses, min(finite)[1] if finite else None", "    return losses, min(zip(losses, lrs))[1]",
            "test_lr_sweep", "skip losses that are not finite"),
        "min() of an empty list when every run diverged": (
            "final_loss", "min(finite)[1] if finite else None", "min(finite)[1]", "test_lr_sweep",
            "return best_lr = None instead of taking min() of an empty list"),
        "a diverged rate named the best when every run diverged": (
            "final_loss", "min(finite)[1] if finite else None", "min(finite)[1] if finite else lrs[0]", "test_lr_sweep",
            "it is never the best rate, even when every run diverged"),
        "linear x axis": (
            "final_loss", '    ax.set_xscale("log")\n', "", "test_lr_sweep", "use ax.set_xscale('log')"),
        "plot without its Axes returned": (
            "final_loss", "    return ax", "    plt.show()", "test_lr_sweep", "should return the matplotlib Axes"),
    },
}


# Between two notebooks in the one kernel: the next starts with no name of the last (its setup imports again,
# from the modules already loaded) and no figure of it open, as in a kernel of its own.
_NEXT_NOTEBOOK = "import matplotlib.pyplot\nmatplotlib.pyplot.close(\"all\")\n%reset -f\n"


def _mistake_cells(notebook: str) -> tuple[list[str], list[tuple[str, int, str]]]:
    """The cells that run ``notebook``'s mistakes: its setup, imports and solutions, every visible test
    (helpers later cells share), then per mistake the wrong part, its visible test and the right part
    again; and per mistake (name, index of its test among these cells, words its message must contain)."""
    from autograder.engine.plan import strip_hidden_region

    source = nbformat.read(str(REPO_ROOT / "solutions" / notebook), as_version=4)
    by_id = {c.get("id"): c for c in source.cells}
    graded = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    cells = [c.source for c in source.cells if c.cell_type == "code" and "demo" not in c.metadata.get("tags", [])
             and not c.metadata.get("nbgrader", {}).get("grade")]              # setup, imports and the solutions
    visible = {c.get("id"): strip_hidden_region(c.source)[0] for c in graded}
    cells += visible.values()
    runs = []
    for name, (cell_id, right, wrong, test_id, words) in MISTAKES[notebook].items():
        original = by_id[cell_id].source
        assert original.count(right) == 1, f"{name}: the solution no longer contains {right!r} once"
        cells += [original.replace(right, wrong), visible[test_id]]
        runs.append((name, len(cells) - 1, words))
        cells.append(original)
    return cells, runs


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, list[tuple[str, list[dict], str]]]:
    """notebook -> (mistake, error outputs of its visible test, words its message must contain) for every
    mistake, all notebooks in one kernel one after the other, each from a clean namespace (a kernel's start
    and ``import torch`` paid once, not once per notebook; exercise 10 last, whose setup sets torch to one
    thread)."""
    nb = nbformat.v4.new_notebook()
    runs = {}
    for notebook in sorted(MISTAKES):
        nb.cells.append(nbformat.v4.new_code_cell(_NEXT_NOTEBOOK))
        cells, mine = _mistake_cells(notebook)
        offset = len(nb.cells)
        nb.cells += [nbformat.v4.new_code_cell(cell) for cell in cells]
        runs[notebook] = [(name, offset + index, words) for name, index, words in mine]
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path_factory.mktemp("mistakes"))}}).execute(env=dict(os.environ))
    return {notebook: [(name, [o for o in nb.cells[index].outputs if o.get("output_type") == "error"], words)
                       for name, index, words in mine] for notebook, mine in runs.items()}


@pytest.mark.parametrize("notebook", sorted(MISTAKES))
def test_classic_mistakes_fail_a_visible_test_that_names_them(notebook, outcomes):
    """Each visible test runs right after its part is replaced by a wrong version, and the right version is
    restored before the next mistake."""
    for name, errors, words in outcomes[notebook]:
        assert errors, f"{name}: the visible test passed a wrong answer"
        assert errors[0]["ename"] == "AssertionError" and words in errors[0]["evalue"], (
            f"{name}: got {errors[0]['ename']}: {errors[0]['evalue']!r}")

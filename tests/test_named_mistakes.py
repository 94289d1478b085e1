"""Exercises 04 and 07: a classic wrong answer fails a visible test whose message names the mistake
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
}


@pytest.mark.parametrize("notebook", sorted(MISTAKES))
def test_classic_mistakes_fail_a_visible_test_that_names_them(notebook, tmp_path):
    """All of one notebook's mistakes in one kernel: each visible test runs right after its part is
    replaced by a wrong version, and the right version is restored before the next mistake."""
    from autograder.engine.plan import strip_hidden_region

    source = nbformat.read(str(REPO_ROOT / "solutions" / notebook), as_version=4)
    by_id = {c.get("id"): c for c in source.cells}
    graded = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    setup = [c for c in source.cells if c.cell_type == "code" and "demo" not in c.metadata.get("tags", [])
             and not c.metadata.get("nbgrader", {}).get("grade")]            # setup, imports and the solutions
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.source) for c in setup]
    visible = {c.get("id"): strip_hidden_region(c.source)[0] for c in graded}
    nb.cells += [nbformat.v4.new_code_cell(test) for test in visible.values()]   # helpers later cells share
    runs = []
    for name, (cell_id, right, wrong, test_id, words) in MISTAKES[notebook].items():
        original = by_id[cell_id].source
        assert original.count(right) == 1, f"{name}: the solution no longer contains {right!r} once"
        nb.cells.append(nbformat.v4.new_code_cell(original.replace(right, wrong)))
        nb.cells.append(nbformat.v4.new_code_cell(visible[test_id]))
        runs.append((name, len(nb.cells) - 1, words))
        nb.cells.append(nbformat.v4.new_code_cell(original))
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute(env=dict(os.environ))
    for name, index, words in runs:
        errors = [o for o in nb.cells[index].outputs if o.get("output_type") == "error"]
        assert errors, f"{name}: the visible test passed a wrong answer"
        assert errors[0]["ename"] == "AssertionError" and words in errors[0]["evalue"], (
            f"{name}: got {errors[0]['ename']}: {errors[0]['evalue']!r}")

"""The final exercise, 11-your-own-gpt: the whole notebook runs as a learner runs it (training included),
and classic mistakes get the message that names them (in the same kernel, after the notebook: one start of
Python, torch and the course, not two).

The grading round trip (solution full marks, blank 0) is in test_notebooks.py, like every assignment's.
"""

import math
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.core.files import REPO_ROOT

SOLUTION = REPO_ROOT / "solutions" / "11-your-own-gpt" / "your_own_gpt.ipynb"
SHAKESPEARE_DIR = Path("/work/shared/data")
pytestmark = pytest.mark.skipif(not SOLUTION.is_file(), reason="the assignment is not in this checkout")


def _execute(nb, folder):
    env = dict(os.environ)
    if (SHAKESPEARE_DIR / "tinyshakespeare.txt").is_file():  # offline copy; elsewhere it downloads or falls back
        env["TRANSFORMER_CORE_DATA"] = str(SHAKESPEARE_DIR)
    env["COURSE_QUICK_RUN"] = "1"      # Part H trains a tiny model for 100 steps: seconds, however busy the machine
    # The timeout only catches a hang: with the quick run, no cell needs more than a few seconds of CPU.
    client = NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    client.execute(env=env)


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _mistake_cells(source) -> tuple[list[str], list[tuple[str, int, str]]]:
    """The cells that follow the notebook: every visible test (they define the checks, and helpers later
    cells share), then per mistake the wrong part, its visible test and the right part again; and per
    mistake (name, index of its test among these cells, words its message must contain)."""
    from autograder.engine.plan import strip_hidden_region

    by_id = {c.get("id"): c for c in source.cells}
    visible_tests = {c.get("id"): strip_hidden_region(c.source)[0] for c in source.cells
                     if c.metadata.get("nbgrader", {}).get("grade")}
    cells = list(visible_tests.values())
    runs = []
    for name, (cell_id, right, wrong, test_id, words) in MISTAKES.items():
        original = by_id[cell_id].source
        assert right in original, f"{name}: the solution no longer contains {right!r}"
        cells += [original.replace(right, wrong), visible_tests[test_id]]
        runs.append((name, len(cells) - 1, words))
        cells.append(original)
    return cells, runs


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The solution notebook executed whole as a learner runs it, then in the same kernel its mistakes:
    (the notebook's cells, the cells of the mistakes, and per mistake (name, index of its test, words))."""
    source = nbformat.read(str(SOLUTION), as_version=4)
    nb = nbformat.read(str(SOLUTION), as_version=4)
    mistakes, runs = _mistake_cells(source)
    n_notebook = len(nb.cells)
    nb.cells += [nbformat.v4.new_code_cell(cell) for cell in mistakes]
    _execute(nb, tmp_path_factory.mktemp("your-own-gpt"))
    return nb.cells[:n_notebook], nb.cells[n_notebook:], runs


@pytest.mark.slow
def test_the_solution_runs_end_to_end_and_the_model_learns(executed):
    cells = executed[0]
    failed = [(c.get("id"), o["ename"], o["evalue"]) for c in cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not failed, f"a cell of the solution failed: {failed}"
    printed = "".join(_stdout(c) for c in cells if c.cell_type == "code")
    for part in "ABCDEFG":
        assert f"Part {part}: visible tests passed." in printed
    assert "100 steps of 8 x 32 tokens" in printed, "Part H did not take the quick run that COURSE_QUICK_RUN=1 asks for"
    losses = [float(v) for v in re.findall(r"validation loss (\d+\.\d+) \(", printed)]
    assert len(losses) >= 2, "the training cell did not report its validation losses"
    # GPT-2's initialisation: after one step the model still guesses almost uniformly, ln 65 = 4.17 nats.
    assert abs(losses[0] - math.log(65)) < 0.3, losses
    assert losses[-1] < losses[0] - 1.0, losses            # and 100 small steps already learn the letter frequencies
    assert "tokens/s with your cache" in printed
    # A saved notebook shows a progress bar as it was first drawn (0%, on GitHub or in the book): none here.
    bars = [c.get("id") for c in cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            or (o.get("name") == "stderr" and "%|" in o.get("text", ""))]
    assert not bars, f"cells {bars} show a progress bar; print progress lines instead"


# (cell, wrong code replacing right code, words the failing test's message must contain)
MISTAKES = {
    "scores not scaled": ("attention", "/ math.sqrt(self.head_dim)", "", "test_attention", "divide the scores by sqrt(head_dim)"),
    "heads split without transpose": ("attention", "t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)",
                                      "t.reshape(B, self.n_heads, T, self.head_dim)", "test_attention",
                                      "a direct view(B, n_heads, T, head_dim) mixes tokens into heads"),
    "k.T on a batch": ("attention", "q @ k.transpose(-2, -1)", "q @ k.T", "test_attention",
                       "k.T reverses all axes of a 4-D tensor"),
    "square mask with a cache": ("attention", ".tril(diagonal=k.shape[2] - T)", "[:, -T:].tril()",
                                 "test_cached_forward", "(T_new, T_new)"),
    "capacity off by one": ("kv_cache", "if end > self.max_len:", "if end >= self.max_len:", "test_kv_cache",
                            "exactly max_len must fit"),
    "positions restart at 0 with a cache": ("gpt", "torch.arange(start, start + T, device=idx.device)",
                                            "torch.arange(T, device=idx.device)", "test_cached_forward",
                                            "the new tokens sit at positions 4 .. 4, after the cache.length = 4"),
    "mask hides the diagonal": ("attention", ".tril(diagonal=k.shape[2] - T)", ".tril(diagonal=k.shape[2] - T - 1)",
                                "test_attention", "hiding the diagonal leaves position 0 with no key"),
    "softmax over the queries": ("attention", "torch.softmax(scores, dim=-1) @ v", "torch.softmax(scores, dim=-2) @ v",
                                 "test_attention", "dim=-2 normalises over the queries"),
    "mask without the cache's offset (single-token steps)": ("attention", ".tril(diagonal=k.shape[2] - T)", ".tril()",
                                                             "test_cached_forward", "a plain .tril() of that shape"),
    "broken Part B, named by Part G": ("attention", "/ math.sqrt(self.head_dim)", "", "test_generate",
                                       "First fix Part B (CausalSelfAttention)"),
    "RoPE's products in bfloat16": ("rope", "cos, sin = torch.cos(angles), torch.sin(angles)\n"
                                    "    even, odd = x.float()[..., 0::2], x.float()[..., 1::2]",
                                    "cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)\n"
                                    "    even, odd = x[..., 0::2], x[..., 1::2]", "test_rope",
                                    "compute the cosines, sines and the products in float32"),
    "no ValueError past block_size": ("gpt", "        if start + T > self.block_size:\n"
                                      "            raise ValueError(f\"{start + T} positions, but the model has "
                                      "block_size={self.block_size}\")\n", "", "test_gpt",
                                      "raise a ValueError when the positions run past block_size"),
    "PyTorch's default initialisation": ("gpt", "for module in self.modules():", "for module in []:", "test_gpt",
                                         "N(0, 0.02): nn.init.normal_(weight, mean=0.0, std=0.02)"),
    "residual projections not scaled": ("gpt", "std=0.02 / math.sqrt(2 * n_layers))", "std=0.02)", "test_gpt",
                                        "draw it from N(0, 0.02 / sqrt(2 * n_layers))"),
    "top-k keeps k - 1 tokens": ("generate", "logits < kth", "logits <= kth", "test_generate",
                                 "(logits < kth, not <=)"),
    "softmax over the batch axis": ("generate", "torch.softmax(logits, dim=-1)", "torch.softmax(logits, dim=0)",
                                    "test_generate", "over the batch axis (dim=0)"),
    "temperature multiplied": ("generate", "logits = logits / temperature", "logits = logits * temperature",
                               "test_generate", "divide the logits by the temperature (you multiplied)"),
    "RoPE on the two halves": ("rope", "x.float()[..., 0::2], x.float()[..., 1::2]",
                               "x.float()[..., :head_dim // 2], x.float()[..., head_dim // 2:]", "test_rope",
                               "not the first half with the second half"),
    "Post-LN block": ("block", "x = x + self.attn(self.ln_1(x), start=start, cache=cache, layer=layer)\n"
                      "        h = F.gelu(self.mlp.fc(self.ln_2(x)), approximate=\"tanh\")\n"
                      "        return x + self.mlp.proj(h)",
                      "x = self.ln_1(x + self.attn(x, start=start, cache=cache, layer=layer))\n"
                      "        return self.ln_2(x + self.mlp.proj(F.gelu(self.mlp.fc(x), approximate=\"tanh\")))",
                      "test_block", "this is a Pre-LN block"),
    "RoPE at positions 0 .. T-1": ("rope", "angles = positions.to(device=x.device, dtype=torch.float32)[:, None]",
                                   "angles = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)[:, None]",
                                   "test_rope", "take the angles from the `positions` argument"),
    "Block drops start": ("block", "self.attn(self.ln_1(x), start=start, cache=cache, layer=layer)",
                          "self.attn(self.ln_1(x), cache=cache, layer=layer)", "test_block",
                          "called self.attn with (start, layer) = [(0, 2)]"),
}


@pytest.mark.slow
def test_classic_mistakes_fail_a_visible_test_that_names_them(executed):
    """Each test cell runs right after its part is replaced by a wrong version, and the right version is
    restored before the next part."""
    _, cells, runs = executed
    for name, index, words in runs:
        errors = [o for o in cells[index].outputs if o.get("output_type") == "error"]
        assert errors, f"{name}: the visible test passed a wrong answer"
        message = errors[0]["evalue"]
        assert errors[0]["ename"] == "AssertionError" and words in message, f"{name}: got {message!r}"

"""The assignment policy judged on submitted source (autograder/policy.py): every route to the course's
answers or to a switched-off built-in is caught, and honest code, helpers and allowed imports are not."""

from pathlib import Path

import pytest

from autograder.plan import MANUAL, SOLUTION, load_plan
from autograder.policy import check_cells, read_policy

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())


def policy_of(assignment: str):
    plan = load_plan(assignment, ROOT)
    (notebook,) = plan.notebooks.values()
    return notebook, read_policy(notebook)


def rules(assignment: str, grade_id: str | None, source: str) -> set[str]:
    """The rules ``source`` breaks as the cell ``grade_id`` (None: a learner's extra cell)."""
    _, policy = policy_of(assignment)
    return {v.rule for v in check_cells(policy, [(grade_id, source)]).get(0, [])}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_published_solution_keeps_every_rule(assignment):
    notebook, policy = policy_of(assignment)
    cells = [(c.key, c.source) for c in notebook.cells if c.kind in (SOLUTION, MANUAL) and c.cell_type == "code"]
    assert cells and policy.forbidden, "the assignment has graded code cells with a list of switched-off names"
    found = check_cells(policy, cells)
    assert not found, {cells[i][0]: [str(v) for v in found[i]] for i in found}


@pytest.mark.parametrize("source", [
    "def stable_softmax(s, dim=-1):\n    return torch.softmax(s, dim)",
    "def stable_softmax(s, dim=-1):\n    return F.softmax(s, dim)",
    "def stable_softmax(s, dim=-1):\n    return s.softmax(dim)",
    "t = torch.nn.functional\ndef stable_softmax(s, dim=-1):\n    return t.softmax(s, dim)",
    "from torch.nn.functional import softmax as sm\ndef stable_softmax(s, dim=-1):\n    return sm(s, dim)",
    "def stable_softmax(s, dim=-1):\n    return getattr(torch, 'softmax')(s, dim)",
    "def stable_softmax(s, dim=-1):\n    return torch.nn.Softmax(dim)(s)",
    "def stable_softmax(s, dim=-1):\n    return torch.nn.modules.activation.Softmax(dim)(s)",
])
def test_a_switched_off_built_in_is_caught_by_any_name(source):
    assert rules("02-self-attention", "stable_softmax", source) == {"switched off"}


@pytest.mark.parametrize("source, rule", [
    ("exec(bytes.fromhex('7072696e74283129').decode())", "dynamic code"),
    ("eval('1')", "dynamic code"),
    ("f = compile('1', 'x', 'eval')", "dynamic code"),
    ("m = __import__('torch')", "dynamic code"),
    ("def stable_softmax(s, dim=-1):\n    return getattr(torch, 'soft' + 'max')(s, dim)", "dynamic code"),
    ("g = globals()", "dynamic code"),
    ("%time x = 1", "dynamic code"),
    ("%%bash\necho hi", "dynamic code"),
    ("files = !ls /", "dynamic code"),
    (">>> exec('1')", "not Python"),                # IPython strips prompts; the grader does not run it
    ("def f(:\n    pass", "not Python"),
    ("import threading\nthreading.Thread(target=print).start()", "module not allowed"),
    ("import concurrent.futures", "module not allowed"),
    ("import ctypes", "module not allowed"),
    ("import importlib", "module not allowed"),
    ("import os", "module not allowed"),
    ("x = sys.modules", "module not allowed"),       # the setup cell's `sys` is the course's, not the learner's
    ("y = torch.ops.aten._softmax", "internal API"),
    ("y = torch._C", "internal API"),
    ("y = torch.load", "internal API"),
    ("from torch.multiprocessing import Process", "internal API"),
    ("y = torch.__dict__", "interpreter internals"),
    ("y = (lambda: 0).__code__", "interpreter internals"),
    ("import course_runtime.testing as t\nt.forbid_shortcuts = None", "grading machinery"),
    ("from course_runtime.agent import answer", "grading machinery"),
    ("import autograder", "grading machinery"),
    ("torch.matmul = lambda a, b: a", "monkeypatching"),
    ("setattr(torch, 'exp', abs)", "monkeypatching"),
    ("async def f():\n    await g()", "concurrency"),
    ("from transformer_core.attention import scaled_dot_product_attention", "reference library"),
    ("import transformer_core.attention as a\nclass Mine(a.MultiHeadAttention):\n    pass", "reference library"),
])
def test_the_rules_of_every_assignment(source, rule):
    assert rule in rules("02-self-attention", None, source)


@pytest.mark.parametrize("assignment, grade_id, source", [
    # 05 gives learners the library's attention: its encoder block may use it.
    ("05-transformer-block", "encoder_block",
     "class EncoderBlock(nn.Module):\n    def __init__(self, d, h):\n        super().__init__()\n"
     "        self.attn = MultiHeadAttention(d, h)\n        self.lin = nn.Linear(d, d)\n"
     "        self.register_buffer('x', torch.zeros(1))\n"),
    # 08's cached step may use torch.softmax: its part does not switch it off.
    ("08-kv-cache", "cached_attention_step", "def cached_attention_step(x):\n    return torch.softmax(x, dim=-1)"),
    # Helpers, standard imports, getattr with a fixed name, dunders that only read names, type hints.
    ("02-self-attention", "stable_softmax",
     "import math, itertools\nfrom typing import Optional\nimport numpy as np\n\n"
     "def _shift(x: torch.Tensor, dim: int = -1) -> torch.Tensor:\n    return x - x.amax(dim=dim, keepdim=True)\n\n"
     "def stable_softmax(scores, dim=-1, out: Optional[torch.Tensor] = None):\n"
     "    e = torch.exp(_shift(scores, dim))\n    name = type(e).__name__ + str(getattr(e, 'dtype'))\n"
     "    return e / e.sum(dim=dim, keepdim=True)\n"),
    # A learner's own attribute that shares a forbidden function's name is theirs.
    ("05-transformer-block", "encoder_block",
     "class EncoderBlock(nn.Module):\n    def forward(self, x):\n        return self.layer_norm(x)\n"),
])
def test_honest_code_is_untouched(assignment, grade_id, source):
    assert rules(assignment, grade_id, source) == set()


def test_the_library_names_a_notebook_gives_are_the_ones_its_course_cells_import():
    _, policy = policy_of("07-three-architectures")
    assert "transformer_core.attention.MultiHeadAttention" in policy.library_names()
    _, policy = policy_of("02-self-attention")
    assert policy.library_names() == set()


def test_each_part_has_its_own_list():
    _, policy = policy_of("02-self-attention")
    assert "torch.softmax" in policy.forbidden["stable_softmax"]
    assert "torch.softmax" not in policy.forbidden["project_qkv"]
    assert rules("02-self-attention", "project_qkv", "y = torch.softmax") == set()
    assert rules("02-self-attention", None, "y = torch.softmax") == {"switched off"}   # an extra cell: all parts


def test_the_source_check_and_the_kernels_guard_say_the_same():
    from course_runtime.testing import ShortcutError, forbid_shortcuts

    _, policy = policy_of("02-self-attention")
    (violation,) = check_cells(policy, [("stable_softmax", "y = torch.softmax(x)")])[0]
    import torch
    with pytest.raises(ShortcutError) as raised, forbid_shortcuts("torch.softmax"):
        torch.softmax(torch.zeros(2), dim=0)
    assert violation.message == str(raised.value)


def test_the_policy_command_prints_each_parts_list(capsys):
    from autograder.__main__ import main

    assert main(["policy", "02-self-attention"]) == 0
    said = capsys.readouterr().out
    assert "stable_softmax: " in said and "torch.softmax" in said and "imports allowed" in said
    assert main(["policy", "no-such-assignment"]) == 2

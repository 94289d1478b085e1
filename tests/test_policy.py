"""The assignment policy judged on submitted source (autograder/engine/policy.py): every route to the course's
answers or to a switched-off built-in is caught, and honest code, helpers and allowed imports are not."""

from pathlib import Path

import pytest

from autograder.engine.plan import MANUAL, SOLUTION, load_plan
from autograder.engine.policy import check_cells, judge_cells, read_policy

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


def notices(assignment: str, cells: list[tuple[str | None, str]]) -> dict[int, set[str]]:
    """What the source check warns of, without taking points, per cell."""
    _, policy = policy_of(assignment)
    return {i: {v.message.split("`")[1] for v in found} for i, found in judge_cells(policy, cells)[1].items()}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_published_solution_keeps_every_rule(assignment):
    notebook, policy = policy_of(assignment)
    cells = [(c.key, c.source) for c in notebook.cells if c.kind in (SOLUTION, MANUAL) and c.cell_type == "code"]
    assert cells and policy.forbidden, "the assignment has graded code cells with a list of switched-off names"
    found = check_cells(policy, cells)
    assert not found, {cells[i][0]: [str(v) for v in found[i]] for i in found}


@pytest.mark.parametrize("source", [
    "def stable_softmax(s, dim=-1):\n    return torch.softmax(s, dim)",
    "import torch.nn.functional as F\ndef stable_softmax(s, dim=-1):\n    return F.softmax(s, dim)",
    "t = torch.nn.functional\ndef stable_softmax(s, dim=-1):\n    return t.softmax(s, dim)",
    "from torch.nn.functional import softmax as sm\ndef stable_softmax(s, dim=-1):\n    return sm(s, dim)",
    "def stable_softmax(s, dim=-1):\n    return getattr(torch, 'softmax')(s, dim)",
    "def stable_softmax(s, dim=-1):\n    return torch.nn.Softmax(dim)(s)",
    "def stable_softmax(s, dim=-1):\n    return torch.nn.modules.activation.Softmax(dim)(s)",
])
def test_a_switched_off_built_in_is_named_by_any_name_without_taking_points(source):
    """The source can tell that a switched-off built-in is named, not whether that line runs while the
    part's tests do (the kernel's guard sees that): validate warns, and no point is taken here."""
    assert rules("02-self-attention", "stable_softmax", source) == set()
    (found,) = notices("02-self-attention", [("stable_softmax", source)]).values()
    assert len(found) == 1 and found <= {"torch.softmax", "torch.nn.functional.softmax", "torch.nn.Softmax"}


@pytest.mark.parametrize("source, rule", [
    ("exec(bytes.fromhex('7072696e74283129').decode())", "dynamic code"),
    ("eval('1')", "dynamic code"),
    ("f = compile('1', 'x', 'eval')", "dynamic code"),
    ("m = __import__('torch')", "dynamic code"),
    ("del getattr", "dynamic code"),               # would swap the grading kernel's checked getattr for Python's
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
    assert notices("02-self-attention", [("project_qkv", "y = torch.softmax")]) == {}
    assert notices("02-self-attention", [("stable_softmax", "y = torch.softmax")]) == {0: {"torch.softmax"}}


def test_an_extra_cell_is_judged_by_the_parts_that_use_it():
    helper = "def _norm(e):\n    return e / torch.softmax(e, -1).sum(-1, keepdim=True)"
    uses = "def stable_softmax(s, dim=-1):\n    return _norm(torch.exp(s))"
    assert notices("02-self-attention", [(None, helper), ("stable_softmax", uses)]) == {0: {"torch.softmax"}}
    assert notices("02-self-attention", [(None, helper), ("project_qkv", "x = _norm")]) == {}
    assert notices("02-self-attention", [(None, "print(torch.softmax(torch.zeros(2), 0))")]) == {}   # scratch


def test_the_source_check_and_the_kernels_guard_say_the_same():
    from course_runtime.testing import ShortcutError, forbid_shortcuts

    _, policy = policy_of("02-self-attention")
    (violation,) = judge_cells(policy, [("stable_softmax", "y = torch.softmax(x)")])[1][0]
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


@pytest.mark.parametrize("source, rule", [
    # A module reached as an attribute of an allowed one, after a call or a subscript too.
    ("torch.sys.modules['course_runtime.testing'].forbid_shortcuts = None", "module not allowed"),
    ("x = [torch][0].os.system('true')", "module not allowed"),
    ("x = torch.zeros(1).numpy().ctypes", "module not allowed"),
    ("def f(m):\n    return m.builtins.exec", "module not allowed"),
    # A name bound only somewhere that may never run is still Python's own.
    ("def never():\n    exec = print\nexec('1')", "dynamic code"),
    ("def never():\n    global exec\n    exec = print\nexec('1')", "dynamic code"),
    ("if False:\n    eval = print\neval('1')", "dynamic code"),
    ("def f():\n    return exec('1')\nf()\nexec = print", "dynamic code"),
    ("x = (lambda: globals())()", "dynamic code"),
    ("x = [vars() for _ in range(1)]", "dynamic code"),
    ("class A:\n    def m(self):\n        return getattr(self, '__dict__')", "interpreter internals"),
])
def test_scopes_and_attribute_paths_leave_no_way_round(source, rule):
    assert rule in rules("02-self-attention", None, source)


HONEST = {
    "a method named like a switched-off function": (
        "07-three-architectures", None,
        "class Rotary:\n    def apply_rope(self, x):\n        return x\n\n    def softmax(self, s):\n"
        "        e = (s - s.amax(-1, keepdim=True)).exp()\n        return e / e.sum(-1, keepdim=True)\n"
        "r = Rotary()\ny = r.apply_rope(torch.zeros(2))\nz = r.softmax(torch.zeros(2))\n"),
    "getattr/setattr loops on self": (
        "02-self-attention", "self_attention_module",
        "class SelfAttention(nn.Module):\n    def __init__(self, d_model, d_k):\n        super().__init__()\n"
        "        for name in ('q', 'k', 'v'):\n            setattr(self, f'{name}_proj', nn.Linear(d_model, d_k))\n\n"
        "    def forward(self, x):\n        q, k, v = (getattr(self, f'{n}_proj')(x) for n in 'qkv')\n        return q\n"),
    "a scratch comparison with the built-in in the solution cell": (
        "02-self-attention", "stable_softmax",
        "def stable_softmax(s, dim=-1):\n    e = torch.exp(s - s.amax(dim, keepdim=True))\n"
        "    return e / e.sum(dim, keepdim=True)\n\nx = torch.randn(3, 4)\n"
        "assert torch.allclose(stable_softmax(x), torch.softmax(x, -1))\n"),
    "train(), generate(), decode(), grad as methods and attributes": (
        "10-capstone-gpt", None,
        "def train_step(model, x):\n    model.train()\n    out = model.generate(x).decode()\n    return x.grad\n"),
    "parameters named like built-ins": (
        "02-self-attention", None,
        "def f(input, vars, compile=True):\n    return input, vars, compile\ninput = torch.zeros(2)\nprint(f(input, 1))\n"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_styles_break_no_rule(name):
    assignment, grade_id, source = HONEST[name]
    assert rules(assignment, grade_id, source) == set()


def test_a_cell_too_big_or_too_deep_is_not_python_and_costs_the_grader_little():
    assert rules("02-self-attention", None, "x = 1\n" * 40_000) == {"not Python"}
    assert rules("02-self-attention", None, "x = " + "(" * 500 + "1" + ")" * 500) == {"not Python"}
    chain = "x = torch" + ".nn" * 2000                                # valid Python, deeper than recursion goes
    assert rules("02-self-attention", None, chain) <= {"internal API", "module not allowed"}


# --- One reading of a cell: every reader of learner source sees the same code ------------------------


def test_every_reader_of_a_cell_reads_magics_shell_lines_and_cell_magics_as_the_policy_does():
    from autograder.course.i18n.docstring_text import docstrings
    from autograder.course.i18n.runtime_text import code_strings
    from autograder.engine.cells import import_statements, python_source
    from autograder.engine.mounts import imported_modules
    from autograder.instructor.similarity_fingerprints import chosen_names, normalised_tokens

    cell = ('!pip install x\nfiles = !ls\n%time import transformer_core.attention\n'
            'import transformer_core.models\ndef f():\n    """Doc."""\n    plt.title("a title")\n')
    assert python_source(cell).split("\n")[:3] == ["get_ipython()", "files = get_ipython()", "get_ipython()"]
    assert imported_modules(cell) == {"transformer_core.models"}
    assert import_statements(cell) == ["import transformer_core.models"]
    assert chosen_names([cell]).names == {"f"}
    assert [text for text, _ in normalised_tokens(cell, None)][:3] == ["import", "V", "."]  # the commands count for nothing
    assert docstrings(cell) == ["Doc."] and code_strings([cell], figures=True) == [("a title", False)]
    # A cell magic's body is not Python to any of them (the policy reads it as one get_ipython() call).
    magic = "%%capture\nimport transformer_core.models\nplt.title('a title')\n"
    assert python_source(magic) == "get_ipython()\n\n\n" and python_source(magic, blank=True) == "\n\n\n"
    assert imported_modules(magic) == set() and import_statements(magic) == []
    assert code_strings([magic], figures=True) == [] and normalised_tokens(magic, None) == []

"""The assignment's policy, judged on the submitted source in the grader's trusted process.

Every exercise says "write it yourself": while a part's tests run, the course library's version of
that part and the PyTorch built-ins that do the same job are off limits. Each rule is judged where it
can be known:

- **What runs** is the kernel's guard's to judge (:func:`course_runtime.testing.forbid_shortcuts`,
  kept on by the agent for as long as a test uses the learner's code, down to PyTorch's ATen kernels):
  the part's own list is the names its test cells hand to ``forbid_shortcuts`` (read here from the
  instructor's notebook without running it, see :func:`read_policy`). Whether a line that names a
  switched-off built-in runs while the tests do, the source cannot tell (a scratch comparison outside
  the learner's functions is fine), so such a line is only a *notice*, which ``validate`` shows.
- **What the source says** is judged here, before any of it runs, with names resolved by Python's own
  scope rules (:class:`autograder.engine.scopes.Program`): no dynamic code (``exec``, ``eval``,
  ``compile``, ``__import__``, ``globals``, ``vars``, IPython magics, deleting ``getattr``), no
  threads, processes or async tasks, no module outside :data:`ALLOWED_MODULES` however it is reached
  (an import, or an attribute such as ``torch.sys`` on any object), no interpreter internals (dunder
  attributes other than a few harmless ones, frames), no ``torch.ops`` / ``torch._C`` or other
  private or code-loading PyTorch APIs, no grading machinery, and of the reference library only the
  names the notebook's own code cells import for the learner (05 builds on ``MultiHeadAttention``).
  Attribute names computed at run time are the grading kernel's ``getattr``'s to check
  (:mod:`course_runtime.checked_builtins`).

A solution cell that breaks a rule is not run: the released stub runs in its place, so that part's
tests earn nothing, and the feedback names the line and the rule; every other cell is graded as
usual. A learner's own extra cell that breaks a rule is not run either, and an edited course cell
falls back to the course's version; a course cell as any edition or tagged release shipped it is the
course's (:meth:`autograder.engine.plan.NotebookPlan.is_course_source`). ``validate`` runs the same check.
"""

from __future__ import annotations

import ast
import functools
import importlib
import sys
import types
import warnings
from dataclasses import dataclass, field

from course_runtime.checked_builtins import ALLOWED_MODULES, HARMLESS_DUNDERS, INTERNAL_ATTRIBUTES, module_allowed
from course_runtime.errors import advice, shortcut_message

from autograder.engine.cells import only_commands, parse_cell
from autograder.engine.plan import FREE, LOCKED, MANUAL, SOLUTION, TEST, Assembly, NotebookPlan, PlanError, RunCell
from autograder.engine.scopes import Program, imported, surely_bound

# Parts of allowed packages that run code from data, load compiled code, start processes or reach
# below the guard (each a prefix of a dotted name).
BANNED_PATHS = (
    "torch._C", "torch.ops", "torch.classes", "torch.library", "torch.jit", "torch.hub", "torch.package",
    "torch.multiprocessing", "torch.distributed", "torch.futures", "torch.overrides", "torch.load",
    "torch.serialization", "torch.utils.cpp_extension", "torch.utils._python_dispatch",
    "numpy.ctypeslib", "numpy.lib", "numpy.load", "numpy.f2py", "numpy.distutils",
    "typing.get_type_hints", "typing.ForwardRef",
)
GRADING_MACHINERY = ("course_runtime.testing", "course_runtime.agent", "course_runtime.remote",
                     "course_runtime.wire", "course_runtime.errors", "course_runtime.checked_builtins", "autograder")
LIBRARY = "transformer_core"
_ALLOWED_TEXT = ("graded code may import torch, numpy, math, matplotlib, tqdm and the standard modules for "
                 "data structures and numbers, nothing that runs, loads or schedules code")
# Built-in names that run or reach code by name.
DYNAMIC_NAMES = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                           "get_ipython", "open", "input", "exit", "quit", "help", "__builtins__",
                           "__loader__", "__spec__"})
ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr", "hasattr"})



@dataclass(frozen=True)
class Violation:
    """One rule broken by learner code.

    Attributes:
        line: the line of the cell (1-based).
        rule: the rule's short name, e.g. ``"forbidden built-in"``.
        message: what was found and what to do instead, for the learner.
    """

    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line} ({self.rule}): {self.message}"


@dataclass
class Policy:
    """What learner code of one notebook may use.

    Attributes:
        forbidden: per solution cell (grade id), the dotted names its tests forbid, with the test's
            reason when it gives one.
        provided: names the course's own code cells bind, with what they are (``"F"`` ->
            ``"torch.nn.functional"``, ``"MultiHeadAttention"`` -> ``"transformer_core.attention.MultiHeadAttention"``).
    """

    forbidden: dict[str, dict[str, str | None]] = field(default_factory=dict)
    provided: dict[str, str] = field(default_factory=dict)

    def library_names(self) -> set[str]:
        """The reference library's names the course hands to learner code."""
        return {target for target in self.provided.values() if _root(target) == LIBRARY}


# --- Reading the policy from the instructor's notebook ---------------------------------------------


class _Unreadable(Exception):
    pass


def _literal(node: ast.AST, env: dict) -> str | tuple[str, ...]:
    """A string or a tuple of strings written with literals, ``+`` and names bound to such values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items: list[str] = []
        for element in node.elts:
            value = _literal(element.value if isinstance(element, ast.Starred) else element, env)
            items.extend(value if isinstance(value, tuple) else (value,))
        return tuple(items)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, env), _literal(node.right, env)
        if type(left) is type(right):
            return left + right
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tuple"
            and len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp)
            and len(node.args[0].generators) == 1):
        return _literal(node.args[0].generators[0].iter, env)  # tuple(n for n in (...) if <filter>): all of them
    raise _Unreadable(ast.unparse(node))


def _guard_calls(tree: ast.AST, env: dict) -> list[tuple[tuple[str, ...], str | None]]:
    """The names and reason of every ``forbid_shortcuts(...)`` call in a test cell."""
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        name = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
        if name != "forbid_shortcuts":
            continue
        names: list[str] = []
        for argument in node.args:
            value = _literal(argument.value if isinstance(argument, ast.Starred) else argument, env)
            names.extend(value if isinstance(value, tuple) else (value,))
        reason = next((_literal(k.value, env) for k in node.keywords if k.arg == "reason"), None)
        calls.append((tuple(names), reason if isinstance(reason, str) else None))
    return calls


def _bindings(source: str) -> dict[str, str]:
    """Names bound by the imports of a piece of source: ``{"F": "torch.nn.functional", ...}``."""
    tree = parse_cell(source)
    found: dict[str, str] = {}
    for node in ast.walk(tree) if isinstance(tree, ast.Module) else ():
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(imported(node))
    return found


def read_policy(plan: NotebookPlan) -> Policy:
    """The policy of one instructor notebook: each solution cell's list, read from the test cells
    that follow it, and the names the course's own code cells bind.

    Raises:
        PlanError: if a test cell hands ``forbid_shortcuts`` something that is not written with
            string literals (the grader must be able to read the list without running the test).
    """
    policy = Policy()
    env: dict[str, str | tuple[str, ...]] = {}
    since_last_test: list[str] = []
    current: list[str] = []
    for cell in plan.cells:
        if cell.cell_type != "code":
            continue
        if cell.kind in (SOLUTION, MANUAL):
            since_last_test.append(cell.key)
            policy.forbidden.setdefault(cell.key, {})
        elif cell.kind in (FREE, LOCKED):
            policy.provided.update(_bindings(cell.source))
        elif cell.kind == TEST:
            if since_last_test:
                current, since_last_test = since_last_test, []
            tree = parse_cell(cell.source)
            if not isinstance(tree, ast.Module):
                continue
            for statement in tree.body:
                if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                        and isinstance(statement.targets[0], ast.Name)):
                    try:
                        env[statement.targets[0].id] = _literal(statement.value, env)
                    except _Unreadable:
                        env.pop(statement.targets[0].id, None)
            try:
                calls = _guard_calls(tree, env)
            except _Unreadable as error:
                raise PlanError(f"{plan.name}: the test cell {cell.key} calls forbid_shortcuts with {error}, "
                                "which the grader cannot read without running it; write the names as string "
                                "literals (or a tuple of them bound to a name)") from None
            for names, reason in calls:
                for key in current:
                    for name in names:
                        policy.forbidden[key].setdefault(name, reason)
    return policy


# --- Judging learner code --------------------------------------------------------------------------


# IPython syntax: a line magic, a shell escape or a cell magic, on its own or assigned to a name.

def _root(dotted: str) -> str:
    return dotted.split(".")[0]


def _within(dotted: str, prefix: str) -> bool:
    return dotted == prefix or dotted.startswith(prefix + ".")





@functools.lru_cache(maxsize=4096)
def _object(dotted: str) -> object | None:
    """The object a dotted name of an allowed package or the library stands for, or None.

    Only modules of :data:`ALLOWED_MODULES`, the reference library and the runtime are imported (in
    this trusted process: no learner code runs here)."""
    if not (module_allowed(dotted) or _root(dotted) in (LIBRARY, "course_runtime")):
        return None
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        except Exception:  # a module that fails to import for other reasons names nothing usable
            return None
        for part in parts[end:]:
            try:
                value = getattr(value, part)
            except Exception:
                return None
        return value
    return None


@functools.lru_cache(maxsize=1)
def module_attributes() -> frozenset[str]:
    """Attribute names under which an allowed package hands out a module graded code may not use
    (``torch.sys``, ``numpy.os``, ``torch.ctypes``, ...): read from any object, they are refused,
    since no one can tell in advance what object a learner's expression holds."""
    import torch  # noqa: F401  (the packages learner code gets, loaded as a kernel loads them)
    import numpy  # noqa: F401

    found: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # deprecated attributes warn when touched
        return frozenset(_module_attributes() | RISKY_MODULES)


def _module_attributes() -> set[str]:
    found: set[str] = set()
    for name, module in list(sys.modules.items()):
        if module is None or not module_allowed(name):
            continue
        try:
            namespace = dict(vars(module))
        except TypeError:
            continue
        for attribute, value in namespace.items():
            if (isinstance(value, types.ModuleType) and not attribute.startswith("__")
                    and not module_allowed(value.__name__) and value.__name__ not in HARMLESS_MODULES):
                found.add(attribute)
    return found


# Modules an allowed package hands out as attributes that only hold data or text helpers: reaching
# them does nothing graded code could not do anyway, and their names (`string`, `json`) are common.
HARMLESS_MODULES = frozenset({
    "argparse", "base64", "datetime", "dateutil", "difflib", "errno", "fnmatch", "fontTools", "gzip",
    "hashlib", "json", "keyword", "kiwisolver", "locale", "PIL", "PIL.Image", "platform", "plistlib", "pprint",
    "queue", "shlex", "string", "struct", "textwrap", "typing_extensions", "unicodedata", "uuid", "zlib",
})
# Modules that run, load or reach code, named here too in case no allowed package has loaded them.
RISKY_MODULES = frozenset({"sys", "os", "builtins", "ctypes", "gc", "inspect", "importlib", "subprocess",
                           "threading", "multiprocessing", "signal", "socket", "pickle", "marshal", "weakref",
                           "types", "operator", "io", "shutil", "pathlib", "tempfile", "traceback"})


# Built-ins that only wrap a function a part may forbid: forbidden with it.
WRAPPERS = {
    "softmax": ("torch.nn.Softmax", "torch.nn.LogSoftmax", "torch.nn.Softmin", "torch.nn.functional.softmin",
                "torch.nn.functional.gumbel_softmax"),
    "layer_norm": ("torch.nn.LayerNorm",),
    "gelu": ("torch.nn.GELU",),
    "scaled_dot_product_attention": ("torch.nn.MultiheadAttention",),
    "RNN": ("torch.nn.RNNCell", "torch.nn.GRU", "torch.nn.GRUCell", "torch.nn.LSTM", "torch.nn.LSTMCell"),
}


class _Forbidden:
    """One part's forbidden names as objects (so that aliases such as ``torch.nn.modules.rnn.RNN``
    match ``torch.nn.RNN``) and as classes whose methods are forbidden."""

    def __init__(self, names: dict[str, str | None]) -> None:
        import torch

        names = dict(names)
        for name, reason in list(names.items()):
            for wrapper in WRAPPERS.get(name.rsplit(".", 1)[-1], ()):
                names.setdefault(wrapper, reason or advice(name))
        self.names = names
        self.objects: dict[int, str] = {}
        self.classes: list[tuple[type, str]] = []
        for name in names:
            value = _object(name)
            if value is not None:
                self.objects[id(value)] = name
            owner_name = name.rpartition(".")[0]
            owner = _object(owner_name) if owner_name else None
            if isinstance(owner, type) and owner not in (torch.Tensor, torch.nn.Module, object):
                self.classes.append((owner, name))

    def match(self, dotted: str) -> str | None:
        """The forbidden name that ``dotted`` is, or whose class it is or derives from."""
        value = _object(dotted)
        if value is None:
            return None
        if id(value) in self.objects:
            return self.objects[id(value)]
        if isinstance(value, type):
            for owner, name in self.classes:
                if issubclass(value, owner):
                    return name
        return None


class _Checker:
    """The rules of the assignment applied to every node of the learner's program (see the module
    docstring): what breaks them costs the cell's points; a switched-off built-in the source names is
    only reported (``notices``), since whether it runs during a part's tests is for the kernel's guard
    to see."""

    def __init__(self, policy: Policy, program: Program, lists: list[_Forbidden | None]) -> None:
        self.policy = policy
        self.program = program
        self.lists = lists                              # per cell: the switched-off names that concern it
        self.library = policy.library_names()
        self.found: dict[int, list[Violation]] = {}
        self.notices: dict[int, list[Violation]] = {}
        inner_chain = {id(n.value) for n in program.nodes if isinstance(n, ast.Attribute)}
        self.outermost = lambda node: id(node) not in inner_chain

    def flag(self, node: ast.AST, rule: str, message: str) -> None:
        cell = self.program.cell_of[id(node)]
        self.found.setdefault(cell, []).append(Violation(getattr(node, "lineno", 1), rule, message))

    def run(self) -> None:
        for node in self.program.nodes:
            method = getattr(self, f"visit_{type(node).__name__}", None)
            if method is not None:
                method(node)

    def judge(self, node: ast.AST, dotted: str) -> None:
        """What a name that stands for ``dotted`` may be."""
        parts = dotted.split(".")
        if any(_within(dotted, banned) for banned in GRADING_MACHINERY) or (
                _root(dotted) == "course_runtime" and not module_allowed(dotted)):
            self.flag(node, "grading machinery", f"`{dotted}` is part of the grader; your code may not use it.")
        elif _root(dotted) == LIBRARY and not any(_within(dotted, given) for given in self.library):
            given = ", ".join(f"`{n.rsplit('.', 1)[-1]}`" for n in sorted(self.library)) or "none"
            self.flag(node, "reference library", f"`{dotted}` is the course library's answer; write this part "
                                                 f"yourself (library names this notebook gives you: {given}).")
        elif _root(dotted) != LIBRARY and not module_allowed(dotted):
            self.flag(node, "module not allowed", f"`{parts[0]}` may not be used in graded code: {_ALLOWED_TEXT}.")
        elif any(_within(dotted, banned) for banned in BANNED_PATHS) or any(
                p.startswith("_") and not p.startswith("__") for p in parts[1:]):
            self.flag(node, "internal API", f"`{dotted}` is a private or code-loading part of the library; "
                                            "use public tensor operations.")
        else:
            forbidden = self.lists[self.program.cell_of[id(node)]]
            name = forbidden.match(dotted) if forbidden is not None else None
            if name:
                cell = self.program.cell_of[id(node)]
                self.notices.setdefault(cell, []).append(Violation(
                    getattr(node, "lineno", 1), "switched off", shortcut_message(name, forbidden.names.get(name))))

    def attribute(self, node: ast.AST, name: str) -> None:
        """The rules for reading attribute ``name`` of any object."""
        if name.startswith("__") and name.endswith("__") and name not in HARMLESS_DUNDERS:
            self.flag(node, "interpreter internals", f"`{name}` reaches Python's internals; graded code may not.")
        elif name in INTERNAL_ATTRIBUTES:
            self.flag(node, "internal API", f"`.{name}` reaches below the public API; use public tensor operations.")
        elif name in module_attributes():
            self.flag(node, "module not allowed", f"`.{name}` hands out the module `{name}`, which graded code may "
                                                  f"not use: {_ALLOWED_TEXT}.")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.judge_import(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag(node, "module not allowed", "relative imports are not allowed in a notebook.")
            return
        for alias in node.names:
            if alias.name == "*":
                self.flag(node, "module not allowed", f"`from {node.module} import *` hides what is used; "
                                                      "import the names you need.")
            else:
                self.judge_import(node, f"{node.module}.{alias.name}", module=node.module)

    def judge_import(self, node: ast.AST, dotted: str, module: str | None = None) -> None:
        base = module or dotted
        if not (module_allowed(base) or _root(base) in (LIBRARY, "course_runtime", "autograder")):
            self.flag(node, "module not allowed", f"`import {base}`: {_ALLOWED_TEXT}.")
        else:
            self.judge(node, dotted)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Del) and node.id in ATTRIBUTE_FUNCTIONS:
            self.flag(node, "dynamic code", f"`del {node.id}` would swap the grader's checked `{node.id}` for "
                                            "Python's own; leave it in place.")
        elif isinstance(node.ctx, ast.Load):
            scope = self.program.binding(node)
            if scope is None and node.id in DYNAMIC_NAMES:
                self.flag(node, "dynamic code", f"`{node.id}` runs or reaches code by name; write the code itself.")
            elif scope is self.program.module and node.id in self.program.course:
                dotted = self.program.dotted(node)
                if dotted:
                    self.judge(node, dotted)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.attribute(node, node.attr)
        if not self.outermost(node):
            return
        dotted = self.program.dotted(node)
        if dotted is None:
            return
        self.judge(node, dotted)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.flag(node, "monkeypatching", f"assigning to `{dotted}` changes a library everyone's code "
                                              "relies on; leave it as it is.")

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if not (isinstance(function, ast.Name) and function.id in ATTRIBUTE_FUNCTIONS
                and self.program.binding(function) is None and len(node.args) >= 2):
            return
        name = node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            self.attribute(node, name.value)                     # getattr(x, "name") is x.name
        receiver = self.program.dotted(node.args[0])
        if receiver is not None:
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self.judge(node, f"{receiver}.{name.value}")
            if function.id in ("setattr", "delattr"):
                self.flag(node, "monkeypatching", f"{function.id} on `{receiver}` changes a library everyone's "
                                                  "code relies on; leave it as it is.")

    def visit_Await(self, node: ast.AST) -> None:
        self.flag(node, "concurrency", "async code may not be used in graded cells.")

    visit_AsyncFunctionDef = visit_AsyncFor = visit_AsyncWith = visit_Await


def _lists_per_cell(policy: Policy, cells: list[tuple[str | None, str]], trees: list) -> list[_Forbidden | None]:
    """The switched-off names that concern each cell: a solution cell's part's list; for the learner's
    own extra cell, the lists of the parts whose cells read a name it defines (none for a scratch cell)."""
    cache: dict[tuple[str, ...], _Forbidden] = {}

    def forbidden(keys: list[str]) -> _Forbidden | None:
        names: dict[str, str | None] = {}
        for key in keys:
            for name, reason in policy.forbidden.get(key, {}).items():
                names.setdefault(name, reason)
        if not names:
            return None
        signature = tuple(sorted(keys))
        if signature not in cache:
            cache[signature] = _Forbidden(names)
        return cache[signature]

    reads = [{n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
             if isinstance(tree, ast.Module) else set() for tree in trees]
    lists: list[_Forbidden | None] = []
    for (key, _), tree in zip(cells, trees):
        if key is not None:
            lists.append(forbidden([key]))
            continue
        defined = {name for statement in (tree.body if isinstance(tree, ast.Module) else [])
                   for name in surely_bound(statement)}
        users = [other for (other, _), seen in zip(cells, reads) if other is not None and seen & defined]
        lists.append(forbidden(users))
    return lists


def judge_cells(policy: Policy, cells: list[tuple[str | None, str]]
                ) -> tuple[dict[int, list[Violation]], dict[int, list[Violation]]]:
    """Judge learner code.

    Args:
        policy: the notebook's policy.
        cells: ``(grade_id or None, source)`` for every cell whose code is the learner's, in the order
            they run; a grade id picks that part's list, None is the learner's own extra cell (or an
            edited course cell).

    Returns:
        ``(violations, notices)``, each mapping an index of ``cells`` to its findings in line order:
        violations break a rule and cost the cell; notices name a switched-off built-in the code
        refers to, which costs the part's tests only if it runs while they do (the kernel's guard sees
        that), for ``validate`` to tell the learner in advance.
    """
    trees = [parse_cell(source) for _, source in cells]
    parsed = [tree if isinstance(tree, ast.Module) else ast.Module(body=[], type_ignores=[]) for tree in trees]
    program = Program(parsed, policy.provided)
    checker = _Checker(policy, program, _lists_per_cell(policy, cells, trees))
    checker.run()
    for index, tree in enumerate(trees):
        if isinstance(tree, SyntaxError):
            checker.found[index] = [Violation(tree.lineno or 1, "not Python",
                                              f"the cell is not Python that can be graded ({tree.msg}); fix it "
                                              "(IPython magics and `>>>` prompts are not allowed in graded code)")]

    def ordered(found: dict[int, list[Violation]]) -> dict[int, list[Violation]]:
        return {index: sorted({(v.line, v.rule, v.message): v for v in items}.values(), key=lambda v: v.line)
                for index, items in sorted(found.items())}

    return ordered(checker.found), ordered(checker.notices)


def check_cells(policy: Policy, cells: list[tuple[str | None, str]]) -> dict[int, list[Violation]]:
    """The rule violations of :func:`judge_cells` only: what costs points."""
    return judge_cells(policy, cells)[0]


def enforce(plan: NotebookPlan, assembly: Assembly, policy: Policy | None = None) -> list[str]:
    """Judge the learner's cells of ``assembly`` and keep the ones that break a rule from running.

    A solution cell is replaced by its released stub (its part earns nothing), a learner's extra cell
    is dropped and an edited course cell runs as the course wrote it. Each case adds a note for the
    feedback naming the cell, the line and the rule.

    Returns:
        One line per violation (``"cell: line N (rule): message"``), for the grade's flags.
    """
    policy = policy or read_policy(plan)
    by_key = {c.key: c for c in plan.cells}
    commands = [i for i, cell in enumerate(assembly.cells)
                if cell.origin == "yours" and cell.key is None and only_commands(cell.source)]
    for index in reversed(commands):                   # `!python -m autograder validate ...` on Colab: not code
        del assembly.cells[index]
    learner = [(i, cell) for i, cell in enumerate(assembly.cells)
               if cell.origin == "yours" and cell.cell_type == "code"
               and not (cell.key in by_key and cell.kind not in (SOLUTION, MANUAL)
                        and plan.is_course_source(cell.key, cell.source))]   # as some edition or release shipped it
    verdicts, notices = judge_cells(policy, [(cell.key if cell.kind in (SOLUTION, MANUAL) else None, cell.source)
                                             for _, cell in learner])
    for position, found in notices.items():
        cell = learner[position][1]
        where = f"your cell `{cell.key}`" if cell.key else "one of your own cells"
        assembly.advice.extend(f"{where}, line {v.line}: {v.message} This costs points only if the line runs "
                               "while that part's tests call your code; a comparison with the built-in outside "
                               "your functions is fine." for v in found)
    lines: list[str] = []
    dropped: list[int] = []
    for position, violations in verdicts.items():
        index, cell = learner[position]
        subject = f"Your cell `{cell.key}`" if cell.key else "One of your own cells"
        detail = "; ".join(str(v) for v in violations)
        if cell.kind in (SOLUTION, MANUAL):
            stub = by_key[cell.key].released
            assembly.cells[index] = RunCell(cell.kind, cell.key, cell.cell_type, stub, cell.shown, cell.points, "released")
            consequence = "it was not run, so the tests of this part earn no points"
        elif cell.key is not None and cell.key in by_key:
            original = by_key[cell.key].source
            assembly.cells[index] = RunCell(cell.kind, cell.key, cell.cell_type, original, original, 0.0, "course")
            consequence = "the course's version of the cell ran instead"
        else:
            dropped.append(index)
            consequence = "it was not run"
        assembly.notes.append(f"{subject} breaks the exercise's rules, {detail}; {consequence}.")
        lines.extend(f"{cell.key or 'extra cell'}: {v}" for v in violations)
    for index in sorted(dropped, reverse=True):
        del assembly.cells[index]
    return lines


def describe(policy: Policy) -> str:
    """The policy as an instructor reads it: each part's switched-off names, then the common rules."""
    lines = [f"{key}: " + (", ".join(sorted(names)) if names else "(only the common rules)")
             for key, names in policy.forbidden.items()]
    given = sorted(policy.library_names())
    lines.append("library names the notebook gives learners: " + (", ".join(given) if given else "none"))
    lines.append("imports allowed: " + ", ".join(sorted(ALLOWED_MODULES)))
    lines.append("never: " + ", ".join(sorted(DYNAMIC_NAMES)) + ", deleting getattr/setattr/delattr/hasattr (the grading kernel's own versions refuse "
                 "internals and modules at run time), "
                 "dunder attributes but " + ", ".join(sorted(HARMLESS_DUNDERS)) + ", async code, "
                 "assignments to library attributes, " + ", ".join(BANNED_PATHS) + ", private names")
    return "\n".join(lines)

"""The assignment's policy, judged on the submitted source in the grader's trusted process.

Every exercise says "write it yourself": while a part's tests run, the course library's version of
that part and the PyTorch built-ins that do the same job are off limits. A guard in the learner's
kernel (:func:`course_runtime.testing.forbid_shortcuts`) tells a learner early, but anything inside
their process can be undone by their code, so points are decided here, on the source they handed in,
before any of it runs:

- **The part's own list.** What a part forbids is written once, next to its text: the names its test
  cells hand to ``forbid_shortcuts`` (the same list the kernel's guard uses, read here from the
  instructor's notebook without running it). A part that allows a built-in (08's cached step may
  use ``torch.softmax``) simply does not name it.
- **Rules for every assignment.** No dynamic code (``exec``, ``eval``, ``compile``, ``__import__``,
  ``getattr``/``setattr`` with a computed name, ``globals``, ``vars``, IPython magics), no threads,
  processes or async tasks, no ``ctypes``, no interpreter internals (dunder attributes other than a
  few harmless ones, frames), no ``torch.ops`` / ``torch._C`` or other private or code-loading
  PyTorch APIs, no grading machinery (``course_runtime.testing``, ``agent``, ``remote``, ``wire``),
  and of the reference library only the names the notebook's own code cells import for the learner
  (05 builds on ``MultiHeadAttention``). Imports are limited to :data:`ALLOWED_MODULES`.

A solution cell that breaks a rule is not run: the released stub runs in its place, so that part's
tests earn nothing, and the feedback names the line and the rule; every other cell is graded as
usual. A learner's own extra cell that breaks a rule is not run either, and an edited course cell
falls back to the course's version. ``validate`` runs the same check, with the same words as the
kernel's guard (:func:`course_runtime.errors.shortcut_message`), so a learner's check and the grade
agree.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from dataclasses import dataclass, field

from course_runtime.errors import advice, shortcut_message

from autograder.plan import FREE, LOCKED, MANUAL, SOLUTION, TEST, Assembly, NotebookPlan, PlanError, RunCell

# Modules learner code may import (and their submodules, except what the rules below exclude).
ALLOWED_MODULES = frozenset({
    "__future__", "abc", "bisect", "cmath", "collections", "contextlib", "copy", "dataclasses", "decimal",
    "enum", "fractions", "functools", "heapq", "itertools", "math", "matplotlib", "numbers", "numpy",
    "random", "re", "statistics", "time", "torch", "tqdm", "typing", "warnings",
    "course_runtime.data", "course_runtime.device", "course_runtime.language", "course_runtime.viz",
})
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
                     "course_runtime.wire", "course_runtime.errors", "autograder")
LIBRARY = "transformer_core"
_ALLOWED_TEXT = ("graded code may import torch, numpy, math, matplotlib, tqdm and the standard modules for "
                 "data structures and numbers, nothing that runs, loads or schedules code")
# Built-in names that run or reach code by name.
DYNAMIC_NAMES = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                           "get_ipython", "open", "input", "exit", "quit", "help", "__builtins__",
                           "__loader__", "__spec__"})
ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
HARMLESS_DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__len__", "__call__",
                              "__class__"})
# Attribute names that only ever lead below the Python level, whatever object they are read from.
INTERNAL_ATTRIBUTES = frozenset({"_C", "aten", "f_globals", "f_locals", "f_back", "f_code", "gi_frame",
                                 "cr_frame", "ag_frame", "tb_frame", "tb_next", "_getframe"})
# Method names too common to forbid on any object: a forbidden method of this name is enforced by
# forbidding its class instead.
GENERIC_METHODS = frozenset({"forward", "__call__", "__init__", "step", "append", "update", "apply", "reset"})


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

    @property
    def everywhere(self) -> dict[str, str | None]:
        """Every part's names together: what a learner's own extra cell may not use."""
        names: dict[str, str | None] = {}
        for part in self.forbidden.values():
            for name, reason in part.items():
                names.setdefault(name, reason)
        return names

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
    tree = _parse(source)
    found: dict[str, str] = {}
    for node in ast.walk(tree) if isinstance(tree, ast.Module) else ():
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
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
            tree = _parse(cell.source)
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
_MAGIC_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_][\w, ]*)=[ \t]*)?(?:%|!)")


def _python_source(source: str) -> str:
    """A cell's source with every IPython magic or shell line replaced by the call it stands for,
    ``get_ipython()`` (line numbers kept), so that the rules see it as dynamic code. Done here, not
    with IPython's own transformer, so that a learner's ``validate`` needs nothing beyond the base
    dependencies."""
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n".join(["get_ipython()"] + [""] * (len(lines) - 1))
    out = []
    for line in lines:
        match = _MAGIC_LINE.match(line)
        if match:
            target = f"{match['target'].strip()} = " if match["target"] else ""
            line = f"{match['indent']}{target}get_ipython()"
        out.append(line)
    return "\n".join(out)


def _parse(source: str) -> ast.Module | SyntaxError:
    """The syntax tree of a cell (magics as ``get_ipython()``), or the SyntaxError that stops it: a cell
    that is not Python (IPython would still run some, such as ``>>>`` prompt lines) is not run."""
    try:
        return ast.parse(_python_source(source))
    except SyntaxError as error:
        return error
    except ValueError as error:                          # e.g. a null byte in the source
        return SyntaxError(str(error))


def _root(dotted: str) -> str:
    return dotted.split(".")[0]


def _within(dotted: str, prefix: str) -> bool:
    return dotted == prefix or dotted.startswith(prefix + ".")


def _module_allowed(dotted: str) -> bool:
    return any(_within(dotted, allowed) for allowed in ALLOWED_MODULES)


@functools.lru_cache(maxsize=4096)
def _object(dotted: str) -> object | None:
    """The object a dotted name of an allowed package or the library stands for, or None.

    Only modules of :data:`ALLOWED_MODULES`, the reference library and the runtime are imported (in
    this trusted process: no learner code runs here)."""
    if not (_module_allowed(dotted) or _root(dotted) in (LIBRARY, "course_runtime")):
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
    match ``torch.nn.RNN``), as classes whose methods are forbidden, and as attribute names."""

    def __init__(self, names: dict[str, str | None]) -> None:
        import torch

        names = dict(names)
        for name, reason in list(names.items()):
            for wrapper in WRAPPERS.get(name.rsplit(".", 1)[-1], ()):
                names.setdefault(wrapper, reason or advice(name))
        self.names = names
        self.objects: dict[int, str] = {}
        self.classes: list[tuple[type, str]] = []
        self.attributes: dict[str, str] = {}
        for name in names:
            value = _object(name)
            if value is not None:
                self.objects[id(value)] = name
            owner_name, _, last = name.rpartition(".")
            owner = _object(owner_name) if owner_name else None
            if isinstance(owner, type) and owner not in (torch.Tensor, torch.nn.Module, object):
                self.classes.append((owner, name))
            if last and last not in GENERIC_METHODS:
                self.attributes.setdefault(last, name)

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


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``F.softmax`` -> ``torch.nn.functional.softmax`` when ``F`` is a known module alias."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, policy: Policy, forbidden: _Forbidden, aliases: dict[str, str], own: set[str]) -> None:
        self.policy = policy
        self.forbidden = forbidden
        self.aliases = aliases
        self.own = own                                   # names the learner's code binds itself
        self.library = policy.library_names()
        self.found: list[Violation] = []

    def flag(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append(Violation(getattr(node, "lineno", 1), rule, message))

    # What a resolved dotted name may be.
    def judge(self, node: ast.AST, dotted: str) -> None:
        parts = dotted.split(".")
        internal = next((p for p in parts[1:] if p.startswith("__") and p.endswith("__")
                         and p not in HARMLESS_DUNDERS), None)
        if internal:
            self.flag(node, "interpreter internals", f"`{internal}` reaches Python's internals; graded code may not.")
        elif any(_within(dotted, banned) for banned in GRADING_MACHINERY) or (
                _root(dotted) == "course_runtime" and not _module_allowed(dotted)):
            self.flag(node, "grading machinery", f"`{dotted}` is part of the grader; your code may not use it.")
        elif _root(dotted) == LIBRARY and not any(_within(dotted, given) for given in self.library):
            given = ", ".join(f"`{n.rsplit('.', 1)[-1]}`" for n in sorted(self.library)) or "none"
            self.flag(node, "reference library", f"`{dotted}` is the course library's answer; write this part "
                                                 f"yourself (library names this notebook gives you: {given}).")
        elif _root(dotted) != LIBRARY and not _module_allowed(dotted):
            self.flag(node, "module not allowed", f"`{parts[0]}` may not be used in graded code: {_ALLOWED_TEXT}.")
        elif any(_within(dotted, banned) for banned in BANNED_PATHS) or any(
                p.startswith("_") and not p.startswith("__") for p in parts[1:]):
            self.flag(node, "internal API", f"`{dotted}` is a private or code-loading part of the library; "
                                            "use public tensor operations.")
        else:
            name = self.forbidden.match(dotted)
            if name:
                self.flag(node, "switched off", shortcut_message(name, self.forbidden.names.get(name)))

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
        if not (_module_allowed(base) or _root(base) in (LIBRARY, "course_runtime", "autograder")):
            self.flag(node, "module not allowed", f"`import {base}`: {_ALLOWED_TEXT}.")
        else:
            self.judge(node, dotted)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id not in self.own:
            if node.id in DYNAMIC_NAMES:
                self.flag(node, "dynamic code", f"`{node.id}` runs or reaches code by name; write the code itself.")
            elif node.id in ATTRIBUTE_FUNCTIONS:
                self.flag(node, "dynamic code", f"`{node.id}` may only be called directly with a fixed "
                                                "attribute name, e.g. getattr(module, \"weight\").")
            elif node.id in self.aliases:
                self.judge(node, self.aliases[node.id])

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if (isinstance(function, ast.Name) and function.id in ATTRIBUTE_FUNCTIONS and function.id not in self.own
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            self.attribute(node, node.args[1].value, node.args[0])   # getattr(x, "name") is x.name
            if function.id in ("setattr", "delattr") and _dotted(node.args[0], self.aliases):
                self.flag(node, "monkeypatching", f"{function.id} on `{_dotted(node.args[0], self.aliases)}` "
                                                  "changes a library everyone's code relies on; leave it as it is.")
            for argument in [node.args[0], *node.args[2:], *(k.value for k in node.keywords)]:
                self.visit(argument)
            return
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node, self.aliases)
        if dotted is not None and not (isinstance(self._base(node), ast.Name) and self._base(node).id in self.own):
            self.judge(node, dotted)
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                self.flag(node, "monkeypatching", f"assigning to `{dotted}` changes a library everyone's code "
                                                  "relies on; leave it as it is.")
            self.attribute(node, node.attr, None, resolved=True)
            return                                       # the chain was judged as a whole
        self.attribute(node, node.attr, node.value)
        self.generic_visit(node)

    @staticmethod
    def _base(node: ast.AST) -> ast.AST:
        while isinstance(node, ast.Attribute):
            node = node.value
        return node

    def attribute(self, node: ast.AST, name: str, receiver: ast.AST | None, resolved: bool = False) -> None:
        if name.startswith("__") and name.endswith("__") and name not in HARMLESS_DUNDERS:
            self.flag(node, "interpreter internals", f"`{name}` reaches Python's internals; graded code may not.")
        elif name in INTERNAL_ATTRIBUTES:
            self.flag(node, "internal API", f"`.{name}` reaches below the public API; use public tensor operations.")
        elif (not resolved and name in self.forbidden.attributes
              and not (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"))):
            forbidden = self.forbidden.attributes[name]
            self.flag(node, "switched off", shortcut_message(forbidden, self.forbidden.names.get(forbidden)))

    def visit_Await(self, node: ast.AST) -> None:
        self.flag(node, "concurrency", "async code may not be used in graded cells.")

    visit_AsyncFunctionDef = visit_AsyncFor = visit_AsyncWith = visit_Await


def _own_names(trees: list[ast.Module]) -> set[str]:
    """Names the learner's code binds other than by import (assignments, defs, parameters, loops)."""
    own: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                own.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                own.add(node.name)
    return own


def _aliases(policy: Policy, trees: list[ast.Module]) -> dict[str, str]:
    """What names stand for in learner code: the course's imports, the learner's imports, and the
    learner's plain aliases of those (``t = torch``)."""
    aliases = dict(policy.provided)
    for tree in trees:
        aliases.update(_bindings(ast.unparse(tree)))
    for tree in trees:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                target = _dotted(node.value, aliases) if isinstance(node.value, (ast.Attribute, ast.Name)) else None
                if isinstance(node.value, ast.Name) and node.value.id in aliases:
                    target = aliases[node.value.id]
                if target:
                    aliases[node.targets[0].id] = target
    return aliases


def check_cells(policy: Policy, cells: list[tuple[str | None, str]]) -> dict[int, list[Violation]]:
    """Judge learner code.

    Args:
        policy: the notebook's policy.
        cells: ``(grade_id or None, source)`` for every cell whose code is the learner's; a grade id
            picks that part's list, None (an extra or edited course cell) means every part's list.

    Returns:
        For each index of ``cells`` that breaks a rule, its violations, in line order.
    """
    trees = [_parse(source) for _, source in cells]
    parsed = [tree for tree in trees if isinstance(tree, ast.Module)]
    own = _own_names(parsed)
    aliases = _aliases(policy, parsed)
    own -= {name for name in own if name in aliases and aliases[name] != policy.provided.get(name)}
    found: dict[int, list[Violation]] = {}
    everywhere = _Forbidden(policy.everywhere)
    for index, ((key, _), tree) in enumerate(zip(cells, trees)):
        if isinstance(tree, SyntaxError):
            found[index] = [Violation(tree.lineno or 1, "not Python",
                                      f"the cell does not parse as Python ({tree.msg}); fix the syntax "
                                      "(IPython magics and `>>>` prompts are not allowed in graded code)")]
            continue
        names = policy.forbidden.get(key, {}) if key is not None else None
        checker = _Checker(policy, _Forbidden(names) if names is not None else everywhere, aliases, own)
        checker.visit(tree)
        if checker.found:
            unique = {(v.line, v.rule, v.message): v for v in checker.found}
            found[index] = sorted(unique.values(), key=lambda v: v.line)
    return found


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
    learner = [(i, cell) for i, cell in enumerate(assembly.cells)
               if cell.origin == "yours" and cell.cell_type == "code"
               and not (cell.key in by_key and cell.kind not in (SOLUTION, MANUAL)
                        and cell.source == by_key[cell.key].source)]   # a course cell the learner left as it was
    verdicts = check_cells(policy, [(cell.key if cell.kind in (SOLUTION, MANUAL) else None, cell.source)
                                    for _, cell in learner])
    lines: list[str] = []
    dropped: list[int] = []
    for position, violations in verdicts.items():
        index, cell = learner[position]
        where = f"your cell `{cell.key}`" if cell.key else "one of your own cells"
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
        assembly.notes.append(f"{where[0].upper()}{where[1:]} breaks the exercise's rules, {detail}; {consequence}.")
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
    lines.append("never: " + ", ".join(sorted(DYNAMIC_NAMES)) + ", getattr/setattr with a computed name, "
                 "dunder attributes but " + ", ".join(sorted(HARMLESS_DUNDERS)) + ", async code, "
                 "assignments to library attributes, " + ", ".join(BANNED_PATHS) + ", private names")
    return "\n".join(lines)

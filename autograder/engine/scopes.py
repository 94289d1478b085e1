"""Scopes of learner code: what a name stands for where it is read, by Python's own scope rules.

:class:`Program` reads the learner's cells as one program (every scope with its bindings, the scope
each node is evaluated in), so that :mod:`autograder.engine.policy` can tell ``F.softmax`` after
``import torch.nn.functional as F`` from a learner's own ``F``; :func:`surely_bound` names what a
statement binds whenever a cell runs past it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# Statements that bind their names whenever the cell runs past them (unlike an `if`, a loop or a `try`).
_SURE_BINDINGS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                  ast.Import, ast.ImportFrom)


@dataclass
class Scope:
    """One Python scope of learner code: the names it binds (Python's rule: a name assigned anywhere
    in a function is local to all of it), and what its imports and plain assignments
    (``t = torch.nn``) make of a name."""

    kind: str                                          # "module", "function" or "class"
    parent: "Scope | None"
    bound: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)
    imports: dict[str, str] = field(default_factory=dict)
    values: dict[str, list[ast.AST]] = field(default_factory=dict)


def imported(node: ast.Import | ast.ImportFrom) -> dict[str, str]:
    """The names an import binds and what they stand for (``{"F": "torch.nn.functional"}``)."""
    found: dict[str, str] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    elif node.module and not node.level:
        for alias in node.names:
            if alias.name != "*":
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _split_scope(node: ast.AST) -> tuple[list[ast.AST], list[ast.AST]]:
    """For a node that opens a scope: the parts the enclosing scope evaluates (decorators, defaults,
    bases, a comprehension's first iterable) and the parts inside the new scope."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
        if isinstance(node, ast.Lambda):
            return defaults, [node.args, node.body]
        outer = [*node.decorator_list, *defaults, *([node.returns] if node.returns else [])]
        return outer, [node.args, *node.body]
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)], list(node.body)
    inner = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    for number, generator in enumerate(node.generators):
        inner += [generator.target, *generator.ifs] + ([generator.iter] if number else [])
    return [node.generators[0].iter], inner


class Program:
    """The learner's cells as one program: every scope with its bindings, and the scope each node is
    evaluated in. Built without recursion, so that no nesting depth can overflow the trusted process.

    Args:
        trees: the learner's cells in the order they run.
        provided: names the course's own cells bind, and what they stand for.
    """

    def __init__(self, trees: list[ast.Module], provided: dict[str, str]) -> None:
        self.module = Scope("module", None, imports=dict(provided))
        self.course = set(provided)
        self.scope_of: dict[int, Scope] = {}
        self.cell_of: dict[int, int] = {}
        self.nodes: list[ast.AST] = []
        self.sure: dict[str, tuple[int, int]] = {}      # module-level name -> (cell, line) where surely bound
        pending: list[tuple[ast.AST, Scope, int]] = []
        for index, tree in enumerate(trees):
            for statement in tree.body:
                for name in surely_bound(statement):
                    self.sure.setdefault(name, (index, statement.lineno))
            pending.append((tree, self.module, index))
        while pending:
            node, scope, cell = pending.pop()
            self.scope_of[id(node)] = scope
            self.cell_of[id(node)] = cell
            self.nodes.append(node)
            if isinstance(node, (*_FUNCTIONS, *_COMPREHENSIONS, ast.ClassDef)):
                if not isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
                    self._bind(scope, node.name)
                inner = Scope("class" if isinstance(node, ast.ClassDef) else "function", scope)
                outer, body = _split_scope(node)
                pending += [(part, scope, cell) for part in outer] + [(part, inner, cell) for part in body]
                continue
            self._record(node, scope)
            pending += [(child, scope, cell) for child in ast.iter_child_nodes(node)]

    @staticmethod
    def _bind(scope: Scope, name: str) -> None:
        if name not in scope.declared_global:
            scope.bound.add(name)

    def _record(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(scope, node.id)
        elif isinstance(node, ast.arg):
            self._bind(scope, node.arg)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            self._bind(scope, node.name)
        elif isinstance(node, ast.Global):
            scope.declared_global.update(node.names)
            scope.bound.difference_update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, dotted in imported(node).items():
                self._bind(scope, name)
                scope.imports[name] = dotted
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            scope.values.setdefault(node.targets[0].id, []).append(node.value)

    def binding(self, node: ast.Name) -> Scope | None:
        """The scope whose binding of ``node.id`` a read of ``node`` finds, by Python's rules; the
        module scope only where the name is surely bound before this read (by the course, or by an
        unconditional statement of an earlier cell or an earlier line); None: the built-in."""
        scope = start = self.scope_of[id(node)]
        while scope.kind != "module":
            if node.id in scope.declared_global:
                break
            if node.id in scope.bound and (scope.kind == "function" or scope is start):
                return scope
            scope = scope.parent
        sure = self.sure.get(node.id)
        if node.id in self.course or (sure is not None and sure < (self.cell_of[id(node)], node.lineno)):
            return self.module
        return None

    def dotted(self, node: ast.AST, depth: int = 0) -> str | None:
        """What ``node`` (a name or an attribute chain) stands for as a dotted name of a module, when
        imports and plain assignments say so: ``F.softmax`` -> ``torch.nn.functional.softmax``."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or depth > 16:
            return None
        scope = self.binding(node) or (self.module if node.id in self.module.bound else None)
        if scope is None:
            return None
        base = scope.imports.get(node.id)
        values = scope.values.get(node.id, [])
        if base is None and len(values) == 1 and isinstance(values[0], (ast.Name, ast.Attribute)):
            base = self.dotted(values[0], depth + 1)
        return ".".join([base, *reversed(parts)]) if base else None


def surely_bound(statement: ast.AST) -> list[str]:
    """The names a statement binds whenever the cell runs past it (:data:`_SURE_BINDINGS`; none for an
    ``if``, a loop or a ``try``)."""
    if not isinstance(statement, _SURE_BINDINGS):
        return []
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return list(imported(statement))
    if isinstance(statement, ast.AnnAssign) and statement.value is None:
        return []
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return [n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)]

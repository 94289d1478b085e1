"""What a learner's kernel may hold: the course modules mounted into the sandbox for an assignment.

A grading kernel always gets :mod:`course_runtime` (the agent, the checks, device, data, plots) and
never the whole reference library :mod:`transformer_core`, which holds the answers. An assignment that
*builds on* earlier chapters (exercise 05 uses the library's ``MultiHeadAttention``, 08 generates with
the library's ``DecoderOnlyLM``) gets exactly the reference modules its course cells import or its
tests build in the kernel (``build("transformer_core.models.DecoderOnlyLM", ...)``), with the modules
those import; an assignment that builds on nothing (02, 03, 04, ...) gets no reference module at all.

The set is computed from the instructor's notebooks, never written by hand, so it cannot drift from
what the notebooks use. What learner code may *name* is decided separately, on its source, by
:mod:`autograder.engine.policy`.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from autograder.engine.cells import parse_cell
from autograder.engine.plan import FREE, LOCKED, TEST, AssignmentPlan

LIBRARY = "transformer_core"
_BUILD_CALL = re.compile(r"""\bbuild\(\s*["'](transformer_core(?:\.\w+)+)["']""")


def _library_root() -> Path:
    import transformer_core

    return Path(transformer_core.__file__).resolve().parent


def _module_file(module: str) -> Path | None:
    """The source file of a ``transformer_core`` module or package, or None if there is none."""
    parts = module.split(".")[1:]
    base = _library_root().joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _longest_module(dotted: str) -> str | None:
    """``transformer_core.models.DecoderOnlyLM`` -> ``transformer_core.models`` (the longest prefix
    that is a module of the library)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name.split(".")[0] == LIBRARY and _module_file(name) is not None:
            return name
    return None


def imported_modules(source: str, package: str | None = None) -> set[str]:
    """The ``transformer_core`` modules a piece of source imports (relative imports resolved
    against ``package``); magics and shell lines are ignored."""
    tree = parse_cell(source)
    if isinstance(tree, SyntaxError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and package:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            module = _longest_module(name) if name.split(".")[0] == LIBRARY else None
            if module:
                found.add(module)
    return found


@functools.lru_cache(maxsize=None)
def _closure(modules: frozenset[str]) -> frozenset[str]:
    """``modules`` and every library module they import, transitively (packages' ``__init__`` too)."""
    done: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module in done:
            continue
        done.add(module)
        parts = module.split(".")
        todo.extend(".".join(parts[:end]) for end in range(1, len(parts)))  # parent packages
        path = _module_file(module)
        package = module if path is not None and path.name == "__init__.py" else ".".join(parts[:-1])
        if path is not None:
            todo.extend(imported_modules(path.read_text(encoding="utf-8"), package))
    return frozenset(done)


def kernel_library(plan: AssignmentPlan) -> tuple[str, ...]:
    """The reference modules a kernel of ``plan`` needs, sorted (empty for most assignments).

    They are the modules the course's own code cells import and the ones its tests build objects of
    in the kernel, with everything those import.
    """
    wanted: set[str] = set()
    for notebook in plan.notebooks.values():
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            if cell.kind in (FREE, LOCKED):
                wanted |= imported_modules(cell.source)
            elif cell.kind == TEST:
                wanted |= {m for m in map(_longest_module, _BUILD_CALL.findall(cell.source)) if m}
    return tuple(sorted(_closure(frozenset(wanted)))) if wanted else ()


def library_files(modules: tuple[str, ...]) -> list[str]:
    """The source files to mount for ``modules`` (see :func:`kernel_library`)."""
    return [str(path) for path in (_module_file(m) for m in modules) if path is not None]

"""Run ``python -m autograder ARGS`` as if only the course package's base dependencies were installed.

Usage: ``python tests/base_dependencies_only.py [--report FILE] [--extras A,B] [--no-namespaces] ARGS...``

What the Colab setup cell installs is ``transformer-core`` without extras: the ``dependencies`` of
``pyproject.toml`` and whatever they require. Building such an environment from PyPI on every test
run is slow, so this script fakes it honestly in the process that matters: before the autograder is
imported it puts a finder first on ``sys.meta_path`` that refuses every top-level module that is
neither in the standard library, nor the course's own (``autograder``, ``transformer_core``), nor
installed by a distribution in the closure of the base dependencies (e.g. ``nbgrader``,
``nbclient``, ``pytest``). A refused import raises ``ModuleNotFoundError`` as a missing package does.
``--extras A,B`` also allows the optional dependencies ``A`` and ``B`` (e.g. ``validate``).

``--no-namespaces`` makes the sandbox find that it cannot create namespaces, as root in a container
without ``CAP_SYS_ADMIN`` (Colab) does. ``--report FILE`` writes JSON after the command ends: the base dependencies, their closure, the
modules refused, and the third-party modules each course module that was loaded imports by name
(for checking that the direct imports are *direct* dependencies).
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import re
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"autograder", "course_runtime", "transformer_core"}


def canonical(name: str) -> str:
    """A distribution name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def base_requirements(extras: tuple[str, ...] = (), pyproject: Path = REPO / "pyproject.toml") -> set[str]:
    """The canonical names of ``[project] dependencies`` and of the ``extras`` named."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines = project["dependencies"] + [line for extra in extras for line in project["optional-dependencies"][extra]]
    return {canonical(Requirement(line).name) for line in lines}


def closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, as installed here (extras and markers that do
    not apply are left out); a requirement that is not installed is skipped."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonical(requirement.name))
    return seen


class BaseOnlyFinder:
    """A ``sys.meta_path`` finder that refuses top-level modules outside ``allowed`` distributions."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.owners = {top: {canonical(d) for d in dists}
                       for top, dists in metadata.packages_distributions().items()}
        self.refused: set[str] = set()

    def permits(self, top: str) -> bool:
        """Whether the top-level module ``top`` may be imported."""
        if (top in sys.stdlib_module_names or top in FIRST_PARTY or top in sys.builtin_module_names
                or top.startswith("_sysconfigdata")):       # the interpreter's build settings
            return True
        return bool(self.owners.get(top, set()) & self.allowed)

    def find_spec(self, name, path=None, target=None):
        """Refuse a module of a distribution that is not allowed; leave the rest to the other finders."""
        top = name.partition(".")[0]
        if self.permits(top):
            return None
        self.refused.add(top)
        raise ModuleNotFoundError(f"No module named {name!r} (refused: not a base dependency of "
                                  "transformer-core)", name=name)


def imported_modules(source: str) -> set[str]:
    """Top-level module names a piece of Python imports (IPython magics and shell lines skipped;
    relative imports are the package's own)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def direct_imports() -> dict[str, list[str]]:
    """For each course module now loaded: the top-level third-party modules its source imports that
    are loaded too (an import inside a function that never ran is not counted)."""
    found: dict[str, list[str]] = {}
    for name, module in sorted(sys.modules.items()):
        if name.partition(".")[0] not in FIRST_PARTY or not getattr(module, "__file__", None):
            continue
        tops = imported_modules(Path(module.__file__).read_text(encoding="utf-8"))
        found[name] = sorted(t for t in tops if t in sys.modules and t not in FIRST_PARTY
                             and t not in sys.stdlib_module_names)
    return found


def main(argv: list[str]) -> int:
    """Install the finder, run the autograder's command line with ``argv``, write the report."""
    report, extras = None, ()
    if argv[:1] == ["--report"]:
        report, argv = Path(argv[1]), argv[2:]
    if argv[:1] == ["--extras"]:
        extras, argv = tuple(argv[1].split(",")), argv[2:]
    if argv[:1] == ["--no-namespaces"]:     # as in a container without CAP_SYS_ADMIN (Colab)
        import autograder.engine.sandbox

        autograder.engine.sandbox._namespaces_work = lambda: False
        argv = argv[1:]
    base = base_requirements(extras)
    allowed = closure(base)
    finder = BaseOnlyFinder(allowed)
    sys.meta_path.insert(0, finder)
    try:
        from autograder.__main__ import main as autograder_main

        status = autograder_main(argv)
    finally:
        if report is not None:
            owners = {top: sorted(d) for top, d in finder.owners.items()}
            report.write_text(json.dumps({"base": sorted(base), "closure": sorted(allowed),
                                          "refused": sorted(finder.refused), "owners": owners,
                                          "imports": direct_imports()}), encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

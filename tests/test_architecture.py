"""The grader's packages depend one way: no import cycle (imports inside functions counted), layers kept.

``autograder.core`` is the plain data layer and imports nothing above it; the engine imports no
instructor tool and no course tooling (so learners' ``validate`` and a grading run never load the
Chinese edition's or the site's tooling); nothing imports the command line. Light commands stay
light: exporting a graded folder's CSV loads neither torch nor jupyter_client nor zmq.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "autograder"
# Each layer may import its own modules and those of the layers listed for it.
ALLOWED = {
    "core": {"core"},
    "engine": {"core", "engine"},
    "instructor": {"core", "engine", "instructor"},
    "course": {"core", "engine", "course"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``path`` imports anywhere in it (functions included), resolved to
    modules: ``from autograder.engine import runner`` counts as ``autograder.engine.runner``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in known}
    return found


def graph() -> dict[str, set[str]]:
    known = set(modules())
    return {name: imports_of(path, known) - {name} for name, path in modules().items()}


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def test_the_grader_has_no_import_cycle_counting_imports_inside_functions():
    edges = graph()
    assert "autograder.engine.runner" in edges and edges["autograder.engine.grade_one"], "the graph was read"
    assert _cycle(edges) is None, " -> ".join(_cycle(edges))


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_each_layer_imports_only_the_layers_below_it():
    wrong = [f"{source} imports {target}" for source, targets in graph().items() for target in sorted(targets)
             if (own := layer(source)) and (layer(target) not in ALLOWED[own])]
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_command_line():
    assert not [source for source, targets in graph().items() if "autograder.__main__" in targets]


HEAVY = {"torch", "jupyter_client", "zmq", "nbformat", "autograder.engine.runner"}


def _heavy_modules_after(script: str) -> list[str]:
    """The heavy modules of grading in ``sys.modules`` after ``script`` ran in a fresh interpreter."""
    script += f"\nprint(sorted({HEAVY!r} & set(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", "import sys\n" + script], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0 and done.stdout.strip(), done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_exporting_grades_loads_neither_torch_nor_jupyter(tmp_path):
    """``python -m autograder export`` on an empty graded folder: the export path is imported and run,
    and the heavy modules of grading are not in ``sys.modules`` after it."""
    (tmp_path / "results").mkdir()
    assert _heavy_modules_after(
        "from autograder.__main__ import main\n"
        f"status = main(['export', '--out', {str(tmp_path)!r}, '--format', 'plain'])\n"
        "assert 'autograder.instructor.export' in sys.modules\n") == "[]"


def test_merging_shards_loads_neither_torch_nor_jupyter(tmp_path):
    """``python -m autograder merge`` of two (empty) shard folders, with the pages, hand scores and
    similarity report it writes after: as light as export."""
    for shard in ("a", "b"):
        (tmp_path / shard / "results").mkdir(parents=True)
    assert _heavy_modules_after(
        "from autograder.__main__ import main\n"
        f"status = main(['merge', {str(tmp_path / 'a')!r}, {str(tmp_path / 'b')!r}, '--out', {str(tmp_path / 'm')!r}])\n"
        "assert 'autograder.engine.shards' in sys.modules and (status or 0) == 0, status\n") == "[]"


@pytest.mark.parametrize("module", ["autograder.instructor.review", "autograder.instructor.similarity"])
def test_the_review_page_and_the_similarity_report_start_light(module):
    assert _heavy_modules_after(f"import {module}\n") == "[]"


MAX_MODULE_LINES = 700


def test_no_module_of_the_grader_is_over_700_lines():
    long = [f"{path.relative_to(REPO)}: {n} lines" for path in modules().values()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert not long, "split these by job:\n" + "\n".join(long)


def test_architecture_md_indexes_every_module_of_the_grader_and_no_other():
    """ARCHITECTURE.md's module index names each module of ``autograder/`` (packages' ``__init__``
    aside) once, and every module it names exists."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    index = text[text.index("### Module index"):]
    index = index[:index.index("\n\n", index.index("|"))]
    named = [line.split("`")[1] for line in index.splitlines() if line.startswith("| `")]
    present = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py")
    assert sorted(named) == present

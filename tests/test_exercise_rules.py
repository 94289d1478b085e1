"""Every exercise, in both editions, states the rules grading applies before the learner's first cell.

The text is the learner's only warning before `validate`: it must be where they read first (the
markdown above the first code cell), name `validate`, and name the modules the grader really allows
and refuses (course_runtime.checked_builtins.ALLOWED_MODULES), so the text and the policy cannot drift.
"""

import re
from pathlib import Path

import pytest

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.core.files import list_assignments
from course_runtime.checked_builtins import module_allowed

ASSIGNMENTS = list_assignments(REPO_ROOT)
EDITIONS = {"en": ("exercises", "What grading checks"), "zh_CN": ("zh/exercises", "批改时检查哪些内容")}


def _notebooks() -> list[tuple[str, Path]]:
    found = []
    for assignment in ASSIGNMENTS:
        for language, (folder, _) in EDITIONS.items():
            found += [(language, path) for path in sorted((REPO_ROOT / folder / assignment).glob("*.ipynb"))]
    return found


def _before_first_code_cell(path: Path) -> str:
    text = []
    for cell in read_notebook(path).cells:
        if cell.cell_type == "code":
            break
        text.append(cell.source)
    return "\n\n".join(text)


@pytest.mark.skipif(not ASSIGNMENTS, reason="no assignments yet")
def test_every_assignment_has_both_editions():
    assert len(_notebooks()) == 2 * len(ASSIGNMENTS)


@pytest.mark.parametrize("language, path", _notebooks(),
                         ids=lambda value: value.relative_to(REPO_ROOT).as_posix() if isinstance(value, Path) else value)
def test_exercise_states_the_grading_rules_before_the_first_cell(language, path):
    text = _before_first_code_cell(path)
    heading = EDITIONS[language][1]
    assert heading in text, f"{path}: the first markdown cells do not state the grading rules ({heading!r})"
    assert f"`python -m autograder validate {path.name}`" in text, f"{path}: the rules do not say how to run validate"
    for name in ("exec", "eval", "torch._C", "torch.ops", "__dict__"):
        assert f"`{name}`" in text, f"{path}: the rules do not name `{name}`"
    imports = re.search(r"^- \*\*.*?(?=^- |\Z)", text, re.M | re.S).group(0)   # the list's first item
    cut = imports.index("`os`")                      # allowed modules come first, refused ones from `os` on
    allowed, refused = re.findall(r"`([\w.]+)`", imports[:cut]), re.findall(r"`([\w.]+)`", imports[cut:])
    assert {"torch", "numpy", "math"} <= set(allowed) and {"os", "sys"} <= set(refused), imports
    assert all(module_allowed(m) for m in allowed), f"{path}: the text allows a module the grader refuses: {allowed}"
    assert not any(module_allowed(m) for m in refused), f"{path}: the text refuses a module the grader allows: {refused}"

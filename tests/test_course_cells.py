"""Course cells of any edition and release are the course's (autograder/engine/plan.py, ``course_variants``): a
Chinese notebook, or one from an earlier release of the term, filled with right answers, is graded with no
note and no broken rule, while a learner's own edit of a course cell is still judged. A test or locked cell
is the course's when its code is (its comments are Chinese in the Chinese edition); whatever the learner's
copy holds, the instructor's cell runs."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.engine.plan import DEMO, FREE, MANUAL, SOLUTION, TEST, assemble, load_plan
from autograder.engine.policy import enforce

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "zh" / "exercises").iterdir() if p.is_dir())


def answered(plan, released: Path):
    """The released notebook ``released`` with every solution cell holding the course's answer."""
    learner = nbformat.read(released, as_version=4)
    answers = {c.key: c.source for c in plan.cells if c.kind in (SOLUTION, MANUAL)}
    for cell in learner.cells:
        key = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if key in answers:
            cell.source = answers[key]
    return learner


def verdict(plan, learner) -> tuple[list[str], list[str]]:
    assembly = assemble(plan, learner)
    return enforce(plan, assembly), assembly.notes


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_chinese_notebook_with_right_answers_is_not_flagged(assignment):
    for name, plan in load_plan(assignment, ROOT).notebooks.items():
        learner = answered(plan, ROOT / "zh" / "exercises" / assignment / f"{name}.ipynb")
        assert verdict(plan, learner) == ([], [])


def test_a_notebook_of_an_earlier_release_keeps_its_setup_cell():
    (plan,) = load_plan("04-multi-head-attention", ROOT).notebooks.values()
    learner = answered(plan, ROOT / "exercises" / "04-multi-head-attention" / f"{plan.name}.ipynb")
    setup = next(c for c in learner.cells if c.cell_type == "code" and "%pip" in c.source)
    setup.source = setup.source.replace("@main", "@v2026.1.0").replace("github.com/transformer-course",
                                                                         "github.com/a-fork")
    assert verdict(plan, learner) == ([], [])
    setup.source += "\nimport os"                                # the learner's own edit is judged
    flags, _ = verdict(plan, learner)
    assert any("module not allowed" in flag for flag in flags)


def test_course_cells_of_every_tagged_release_are_the_courses(tmp_path):
    """A fix release changed a course cell: learners who started from the tagged earlier release keep theirs."""
    assignment, name = "02-self-attention", "self_attention"
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder / assignment, tmp_path / folder / assignment)
    released = tmp_path / "exercises" / assignment / f"{name}.ipynb"
    earlier = json.loads(released.read_text())
    imports = next(c for c in earlier["cells"] if c["cell_type"] == "code" and "import torch" in "".join(c["source"]))
    imports["source"] = "import sys, math\nimport torch\n"        # the earlier release imported sys there
    released.write_text(json.dumps(earlier))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "release"], check=True)
    subprocess.run([*git, "tag", "v2026.1.0"], check=True)
    shutil.copy(ROOT / "exercises" / assignment / f"{name}.ipynb", released)   # the fix release

    (plan,) = load_plan(assignment, tmp_path).notebooks.values()
    learner = answered(plan, tmp_path / "exercises" / assignment / f"{name}.ipynb")
    learner_cell = next(c for c in learner.cells if c.get("id") == imports["id"])
    learner_cell.source = imports["source"]
    assert verdict(plan, learner) == ([], [])
    subprocess.run([*git, "tag", "-d", "v2026.1.0"], check=True, capture_output=True)
    (plan,) = load_plan(assignment, tmp_path).notebooks.values()
    flags, _ = verdict(plan, learner)
    assert any("module not allowed" in flag for flag in flags)      # without the tag it is the learner's edit


def test_a_cell_of_commands_the_learner_ran_is_skipped_without_a_flag():
    """Colab's way to check a notebook is a cell `!python -m autograder validate ...`: not graded code."""
    (plan,) = load_plan("02-self-attention", ROOT).notebooks.values()
    learner = answered(plan, ROOT / "exercises" / "02-self-attention" / f"{plan.name}.ipynb")
    learner.cells.append(nbformat.v4.new_code_cell("# check before submitting\n"
                                                   "!python -m autograder validate self_attention.ipynb"))
    assembly = assemble(plan, learner)
    assert enforce(plan, assembly) == [] and assembly.notes == []
    assert not any(cell.source.startswith("# check before") for cell in assembly.cells)
    learner.cells.append(nbformat.v4.new_code_cell("!ls\nx = 1"))    # code beside a command is judged
    assert enforce(plan, assemble(plan, learner))


# --- test and locked cells: the Chinese edition words their comments in Chinese ---------------------------


def _run(plan, learner) -> list[tuple[str | None, str]]:
    """What a rebuilt notebook runs of the course's test, locked and solution cells: the score rests on these."""
    return [(cell.key, cell.source) for cell in assemble(plan, learner).cells if cell.kind not in (FREE, DEMO)]


def _test_cell(learner, key: str):
    return next(c for c in learner.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == key)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_chinese_notebooks_test_cells_are_unchanged_and_run_the_instructors_cells(assignment):
    """(a) and (d): both editions, as released with right answers, get no note and run the same cells, each test
    the instructor's own (hidden tests included), whose comments are English, never the learner's copy."""
    for name, plan in load_plan(assignment, ROOT).notebooks.items():
        english = answered(plan, ROOT / "exercises" / assignment / f"{name}.ipynb")
        chinese = answered(plan, ROOT / "zh" / "exercises" / assignment / f"{name}.ipynb")
        assert assemble(plan, english).notes == [] and assemble(plan, chinese).notes == []
        assert _run(plan, chinese) == _run(plan, english)
        tests = {c.key: c.source for c in plan.cells if c.kind == TEST}
        assert all(source == tests[key] for key, source in _run(plan, chinese) if key in tests)


def _translated_test(plan, chinese) -> tuple[str, str]:
    """A test cell whose released Chinese copy differs from the English one (its comments are Chinese), with
    its Chinese source."""
    for c in plan.cells:
        if c.kind == TEST:
            source = _test_cell(chinese, c.key).source
            if source != c.released and re.search(r"#[^\n]*[\u4e00-\u9fff]", source):
                return c.key, source
    raise AssertionError("no test cell of the Chinese exercise has Chinese comments")


EDITS = {
    "an assert deleted": lambda source: re.sub(r"^( *)assert\b.*$", r"\1pass", source, count=1, flags=re.M),
    "a number changed": lambda source: re.sub(r"(?<![\w.])(\d+)(?![\w.])", lambda m: str(int(m[1]) + 1), source, count=1),
    "a comment added": lambda source: source + "\n# 这一格我改过",
    "a comment removed": lambda source: re.sub(r"[ \t]*#[^\n]*[\u4e00-\u9fff][^\n]*", "", source, count=1),
}


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("assignment", ["02-self-attention", "08-kv-cache"])
def test_a_chinese_learners_edited_test_cell_is_noted_and_the_original_runs(assignment, edit):
    """(b): an edit of a test cell's code (or a comment added or removed: its lines change) is a change, noted,
    and the instructor's cell runs as if it had not been made."""
    (plan,) = load_plan(assignment, ROOT).notebooks.values()
    chinese = answered(plan, ROOT / "zh" / "exercises" / assignment / f"{plan.name}.ipynb")
    untouched = _run(plan, chinese)
    key, source = _translated_test(plan, chinese)
    _test_cell(chinese, key).source = EDITS[edit](source)
    assert _test_cell(chinese, key).source != source, "the edit changes the cell"
    assert assemble(plan, chinese).notes == [
        f"The course cell `{key}` was changed in your notebook; the original was used."]
    assert _run(plan, chinese) == untouched


@pytest.mark.parametrize("edition", ["exercises", "zh/exercises"])
def test_a_comment_reworded_in_a_test_cell_is_no_change_and_earns_nothing(edition):
    """(c), decided: rewording what a comment says is not a change of the test (a Chinese learner's copy differs
    from the English in just that), so no note; the instructor's cell runs either way, so nothing is won or lost."""
    (plan,) = load_plan("02-self-attention", ROOT).notebooks.values()
    learner = answered(plan, ROOT / edition / "02-self-attention" / f"{plan.name}.ipynb")
    untouched = _run(plan, learner)
    key = next(c.key for c in plan.cells if c.kind == TEST and "#" in c.released)
    cell = _test_cell(learner, key)
    cell.source = re.sub(r"#[^\n]*", "# my own words: assert nothing, pass everything", cell.source, count=1)
    assert assemble(plan, learner).notes == [] and _run(plan, learner) == untouched

"""The autograder on a tiny fixture course (tests/fixtures/course), independent of the real chapters."""

import csv
import hashlib
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.__main__ import main
from autograder.course import UsageError, generate
from autograder.feedback import strip_hidden_region
from autograder.grading import collect_submissions
from autograder.nbgrader_config import CODE_STUB
from autograder.notebooks import (convention_problems, dumps_normalized, normalize_notebook,
                                  setup_cell_source)

FIXTURE = Path(__file__).parent / "fixtures" / "course"
ASSIGNMENT = "00-fixture"
NOTEBOOK = "fixture.ipynb"
HIDDEN_MARKER = "hidden-marker"  # a comment that appears only inside the fixture's hidden tests
# One worker runs this whole module (with `pytest -n N --dist loadgroup`), so the module-scoped
# grading run happens once.
pytestmark = pytest.mark.xdist_group("autograder-fixture")


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def without_cell(path: Path, grade_id: str) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") != grade_id]
    return json.dumps(nb)


def with_source(path: Path, grade_id: str, source: str) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            cell["source"] = source
    return json.dumps(nb)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A copy of the fixture course with its exercises generated."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    generate(root=root)
    return root


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """One grading run, in two worker processes, over five learners using the three folder layouts."""
    subs = tmp_path_factory.mktemp("submissions")
    solution = course / "solutions" / ASSIGNMENT / NOTEBOOK
    (subs / "alice" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(solution, subs / "alice" / ASSIGNMENT / NOTEBOOK)              # <student>/<assignment>/
    (subs / "bob").mkdir()
    shutil.copy(course / "exercises" / ASSIGNMENT / NOTEBOOK, subs / "bob" / NOTEBOOK)  # <student>/
    (subs / "dave.ipynb").write_text(without_cell(solution, "test_softmax"))  # <student>.ipynb
    (subs / "carol.ipynb").write_text('{"cells": [')                           # broken JSON
    shortcut = "def softmax(x):\n    return torch.softmax(x, dim=-1)"  # passes visible, fails hidden
    (subs / "erin.ipynb").write_text(with_source(solution, "softmax", shortcut))
    before = {"course": tree_digest(course), "submissions": tree_digest(subs)}
    out = tmp_path_factory.mktemp("out")
    status = main(["--root", str(course), "grade", str(subs), "--assignment", ASSIGNMENT,
                   "--out", str(out), "--jobs", "2", "--no-progress"])
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    after = {"course": tree_digest(course), "submissions": tree_digest(subs)}
    return {"status": status, "rows": rows, "out": out, "before": before, "after": after}


# --- generate -------------------------------------------------------------------------------------


def test_generate_releases_a_blank_exercise_without_hidden_tests(course):
    text = (course / "exercises" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" not in text and "torch.exp(shifted)" not in text
    assert "BEGIN HIDDEN TESTS" not in text and HIDDEN_MARKER not in text
    nb = nbformat.reads(text, as_version=4)
    stub_lines = CODE_STUB.splitlines()
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert solution_cells and all(line in c.source for c in solution_cells for line in stub_lines)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert tests and all(c.metadata.nbgrader["locked"] and c.metadata.nbgrader["checksum"] for c in tests)
    assert text == dumps_normalized(nb), "generate must write notebooks in normal form"


def test_generate_is_deterministic(course, tmp_path):
    generate([ASSIGNMENT], root=course, output_dir=tmp_path)
    assert tree_digest(tmp_path / ASSIGNMENT) == tree_digest(course / "exercises" / ASSIGNMENT)


def test_fixture_follows_the_notebook_conventions(course):
    for folder in ("solutions", "exercises"):
        assert convention_problems(course / folder / ASSIGNMENT / NOTEBOOK, course) == []


# --- grade ----------------------------------------------------------------------------------------


def test_solution_gets_full_marks(graded):
    row = graded["rows"]["alice"]
    assert (row["status"], row["score"], row["max_score"]) == ("graded", "3", "3")
    assert (row["fixture:test_softmax"], row["fixture:test_scale"]) == ("2", "1")


def test_blank_release_gets_zero_without_crashing(graded):
    row = graded["rows"]["bob"]
    assert (row["status"], row["score"], row["max_score"]) == ("graded", "0", "3")
    assert (row["fixture:test_softmax"], row["fixture:test_scale"]) == ("0", "0")


def test_a_deleted_test_cell_is_restored_and_run(graded):
    row = graded["rows"]["dave"]
    assert (row["status"], row["score"]) == ("graded", "3"), "the restored test must run and count"
    html = (graded["out"] / "feedback" / "dave" / ASSIGNMENT / "fixture.html").read_text(encoding="utf-8")
    assert "added back by nbgrader" in html


def test_a_broken_notebook_gets_a_row_and_exit_status_1(graded):
    assert graded["status"] == 1
    row = graded["rows"]["carol"]
    assert row["status"].startswith("unreadable notebook") and row["score"] == ""


def test_a_forbidden_shortcut_fails_the_hidden_tests(graded):
    row = graded["rows"]["erin"]
    assert (row["status"], row["fixture:test_softmax"], row["fixture:test_scale"]) == ("graded", "0", "1")
    html = (graded["out"] / "feedback" / "erin" / ASSIGNMENT / "fixture.html").read_text("utf-8")
    assert "implement this yourself" in html


def test_feedback_exists_and_hides_hidden_tests(graded):
    for student in ("alice", "bob", "dave", "erin"):
        html = (graded["out"] / "feedback" / student / ASSIGNMENT / "fixture.html").read_text("utf-8")
        assert HIDDEN_MARKER not in html and "Hidden tests ran here" in html
    assert not (graded["out"] / "feedback" / "carol").exists()


def test_grading_modifies_no_originals(graded):
    assert graded["before"] == graded["after"]


# --- usage errors and submission layouts ----------------------------------------------------------


def test_usage_errors_exit_2(course, tmp_path, capsys):
    assert main(["--root", str(course), "grade", str(tmp_path / "missing"), "--assignment", ASSIGNMENT,
                 "--out", str(tmp_path / "out")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["--root", str(course), "grade", str(tmp_path), "--assignment", "99-nope",
                 "--out", str(tmp_path / "out")]) == 2
    assert "99-nope" in (err := capsys.readouterr().err) and ASSIGNMENT in err
    assert main(["--root", str(course), "generate", "99-nope"]) == 2
    assert main(["--root", str(course), "grade", str(tmp_path), "--assignment", ASSIGNMENT,
                 "--out", str(tmp_path / "out"), "--jobs", "0"]) == 2
    assert main(["--root", str(course), "normalize", str(tmp_path / "missing.ipynb")]) == 2
    with pytest.raises(SystemExit) as raised:
        main(["grade"])
    assert raised.value.code == 2


def test_collect_finds_loose_notebooks_by_grade_ids(course, tmp_path):
    shutil.copy(course / "exercises" / ASSIGNMENT / NOTEBOOK, tmp_path / "renamed by the LMS.ipynb")
    (tmp_path / "stranger.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                                         "nbformat_minor": 5}))
    (tmp_path / ".hidden.ipynb").write_text("{}")
    (tmp_path / "gina" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(course / "exercises" / ASSIGNMENT / NOTEBOOK, tmp_path / "gina" / ASSIGNMENT / NOTEBOOK)
    found = {s.student: s for s in collect_submissions(tmp_path, "all", root=course)}
    assert set(found) == {"renamed by the LMS", "stranger", "gina"}
    assert found["gina"].assignment == ASSIGNMENT and set(found["gina"].notebooks) == {"fixture"}
    renamed = found["renamed by the LMS"]
    assert renamed.assignment == ASSIGNMENT and renamed.problem is None
    assert "cannot tell which assignment" in found["stranger"].problem
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="no notebooks found"):
        collect_submissions(empty, ASSIGNMENT, root=course)


# --- normal form, setup cell, feedback filter -----------------------------------------------------


def test_normalize_strips_outputs_and_is_idempotent(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1", execution_count=3,
                                                                   metadata={"scrolled": True}),
                                         nbformat.v4.new_code_cell("1 + 1")])
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=3)]
    nb.metadata["widgets"] = {"state": {}}
    normal = normalize_notebook(nb)
    assert normal.cells[0].outputs == [] and normal.cells[0].execution_count is None
    assert normal.cells[0].metadata == {} and set(normal.metadata) == {"kernelspec", "language_info"}
    assert normal.cells[0].id != normal.cells[1].id, "identical cells still get unique ids"
    assert dumps_normalized(normal) == dumps_normalized(nb)
    path = tmp_path / "book" / "page.ipynb"
    path.parent.mkdir()
    path.write_text(nbformat.writes(nb))
    assert main(["--root", str(tmp_path), "normalize", "--check"]) == 1
    assert main(["--root", str(tmp_path), "normalize"]) == 0
    assert main(["--root", str(tmp_path), "normalize", "--check"]) == 0
    assert path.read_text().endswith("}\n") and '\n "cells": [' in path.read_text()


def test_setup_cell_comes_from_config():
    source = setup_cell_source(FIXTURE)
    first_line = "# Setup: on Colab, install the course library; everywhere, pick a device."
    assert source.splitlines()[0] == first_line
    assert '"transformer-core @ git+https://github.com/transformer-course/autograder-fixture@main"' in source


def test_strip_hidden_region():
    source = "visible()\n### BEGIN HIDDEN TESTS\nsecret()\n### END HIDDEN TESTS\nafter()"
    stripped, removed = strip_hidden_region(source)
    assert removed and "secret" not in stripped
    assert stripped.startswith("visible()") and stripped.endswith("after()")
    assert strip_hidden_region("plain()") == ("plain()", False)

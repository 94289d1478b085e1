"""The autograder's generate/normalize/collect on a tiny fixture course (tests/fixtures/course).

Grading itself is tested in tests/test_autograder_grading.py."""

import hashlib
import os
import json
import zipfile
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.__main__ import main
from autograder.core.errors import UsageError
from autograder.core.files import CODE_STUB
from autograder.core.results import path_name
from autograder.course.nbgrader_config import REPO_ROOT as REPO
from autograder.course.notebooks import (convention_problems, dumps_normalized, normalize_notebook,
                                  setup_cell_source)
from autograder.course.release import generate
from autograder.engine.feedback import strip_hidden_region
from autograder.engine.plan import DEMO, TEST, assemble, load_notebook_plan, load_plan
from autograder.engine.submissions import collect_submissions, extract_zip

FIXTURE = Path(__file__).parent / "fixtures" / "course"
ASSIGNMENT = "00-fixture"
NOTEBOOK = "fixture.ipynb"
HIDDEN_MARKER = "hidden-marker"  # a comment that appears only inside the fixture's hidden tests


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A copy of the fixture course with its exercises generated."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    generate(root=root)
    return root


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


def test_normalize_repoint_follows_a_fork_of_the_repository(tmp_path):
    """After a fork changes repository.url in _config.yml, `normalize --repoint` rewrites every setup
    cell and Colab badge, and `generate` then releases exercises that pass the convention check."""
    root = tmp_path / "fork"
    shutil.copytree(FIXTURE, root)
    config = root / "_config.yml"
    old_text = config.read_text(encoding="utf-8")
    url = next(line.split(":", 1)[1].strip() for line in old_text.splitlines() if line.strip().startswith("url:"))
    config.write_text(old_text.replace(url, "https://github.com/someone/fork-of-the-course"), encoding="utf-8")
    solution = root / "solutions" / ASSIGNMENT / NOTEBOOK
    assert convention_problems(solution, root) != []                 # still points at the original
    assert main(["--root", str(root), "normalize", "--check", "--repoint"]) == 1
    assert main(["--root", str(root), "normalize", "--repoint"]) == 0
    generate(root=root)
    for folder in ("solutions", "exercises"):
        notebook = root / folder / ASSIGNMENT / NOTEBOOK
        assert convention_problems(notebook, root) == []
        assert "someone/fork-of-the-course" in notebook.read_text(encoding="utf-8")
    assert main(["--root", str(root), "normalize", "--check", "--repoint"]) == 0


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


# --- rebuilding a learner's notebook on the instructor's plan (no kernel needed) -------------------


def _exercise(course: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(course / "exercises" / ASSIGNMENT / NOTEBOOK), as_version=4)


def test_assemble_takes_tests_from_the_instructor_and_answers_from_the_learner(course):
    plan = load_plan(ASSIGNMENT, course).notebooks["fixture"]
    nb = _exercise(course)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "softmax":
            cell.source = "def softmax(x):\n    return x"
        if grade_id == "test_softmax":
            cell.source, cell.cell_type = "pass", "markdown"
            cell.metadata.nbgrader.update(points=100, solution=True, grade=False)
    nb.cells.append(nbformat.v4.new_code_cell("helper = 1"))
    assembly = assemble(plan, nb)
    by_key = {c.key: c for c in assembly.cells}
    assert by_key["softmax"].source == "def softmax(x):\n    return x" and by_key["softmax"].origin == "yours"
    test = by_key["test_softmax"]
    assert test.kind == TEST and test.cell_type == "code" and test.points == 2 and HIDDEN_MARKER in test.source
    assert HIDDEN_MARKER not in test.shown, "feedback must show the test without its hidden part"
    assert any("test_softmax" in note and "changed" in note for note in assembly.notes)
    assert assembly.cells[-1].source == "helper = 1", "the learner's own cells still run, in place"
    assert assembly.matched == 4


def test_assemble_puts_back_missing_cells(course):
    plan = load_plan(ASSIGNMENT, course).notebooks["fixture"]
    assembly = assemble(plan, nbformat.v4.new_notebook())
    kinds = [(c.key, c.origin) for c in assembly.cells if c.key in ("softmax", "test_scale")]
    assert kinds == [("softmax", "released"), ("test_scale", "course")]
    assert assembly.matched == 0 and any("test_scale" in note for note in assembly.notes)


def test_demo_cells_run_for_learners_and_are_skipped_when_grading(tmp_path):
    nb = nbformat.v4.new_notebook()
    demo = nbformat.v4.new_code_cell("train_for_ten_minutes()", id="train-demo")
    demo.metadata["tags"] = ["demo"]
    answer = nbformat.v4.new_code_cell("x = 1", id="answer")
    answer.metadata["nbgrader"] = {"grade_id": "answer", "solution": True, "grade": False, "locked": False,
                                   "schema_version": 3}
    nb.cells = [nbformat.v4.new_code_cell("import torch", id="imports"), answer, demo]
    path = tmp_path / "demo.ipynb"
    nbformat.write(nb, str(path))
    plan = load_notebook_plan(path)
    assert [c.kind for c in plan.cells][-1] == DEMO and "train-demo" not in plan.grade_ids
    learner = nbformat.v4.new_notebook()
    edited = nbformat.v4.new_code_cell("train_for_ten_minutes(steps=10**9)", id="train-demo")
    learner.cells = [nb.cells[0], nbformat.v4.new_code_cell("x = 2", id="answer"), edited,
                     nbformat.v4.new_code_cell("mine = 3", id="extra")]
    learner.cells[1].metadata["nbgrader"] = dict(answer.metadata["nbgrader"])
    sources = [c.source for c in assemble(plan, learner).cells]
    assert sources == ["import torch", "x = 2", "mine = 3"], "the demo (even edited) is skipped, the rest runs"


def test_lms_names_and_non_notebook_files(course, tmp_path):
    exercise = course / "exercises" / ASSIGNMENT / NOTEBOOK
    shutil.copy(exercise, tmp_path / "smithjane_12345_67890_fixture.ipynb")          # Canvas
    moodle = tmp_path / "Jo Doe_4242_assignsubmission_file_"                           # Moodle
    moodle.mkdir()
    shutil.copy(exercise, moodle / NOTEBOOK)
    (tmp_path / "kim").mkdir()
    (tmp_path / "kim" / "report.pdf").write_bytes(b"%PDF-1.4")
    found = {s.student: s for s in collect_submissions(tmp_path, ASSIGNMENT, root=course)}
    assert set(found) == {"smithjane", "Jo Doe", "kim"}
    assert found["smithjane"].notebooks == {"fixture": tmp_path / "smithjane_12345_67890_fixture.ipynb"}
    assert (found["smithjane"].lms_id, found["Jo Doe"].lms_id, found["kim"].lms_id) == ("12345", "4242", "")
    assert found["Jo Doe"].learner == "Jo Doe #4242" and found["kim"].learner == "kim"
    assert found["Jo Doe"].problem is None
    assert "report.pdf" in found["kim"].problem


def test_extract_zip_refuses_traversal_links_and_bombs(tmp_path):
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("export/alice.ipynb", "{}")
        zf.writestr("export/../../escape.ipynb", "{}")
        zf.writestr("/etc/absolute.ipynb", "{}")
        link = zipfile.ZipInfo("export/link.ipynb")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "/etc/passwd")
        zf.writestr("__MACOSX/export/._alice.ipynb", "junk")
    folder, skipped = extract_zip(archive, tmp_path / "out")
    assert folder == tmp_path / "out" / "export"
    assert sorted(p.name for p in folder.iterdir()) == ["alice.ipynb"]
    assert not (tmp_path / "escape.ipynb").exists() and len(skipped) == 3
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.ipynb", b"0" * (2 << 20))
    with pytest.raises(UsageError, match="refusing"):
        extract_zip(bomb, tmp_path / "bomb", max_bytes=1 << 20)
    (tmp_path / "fake.zip").write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="not a readable zip"):
        extract_zip(tmp_path / "fake.zip", tmp_path / "fake")


def test_extract_zip_shortens_names_the_file_system_refuses(tmp_path):
    archive = tmp_path / "lms.zip"
    long_a, long_b = "a" * 300 + "_1.ipynb", "a" * 300 + "_2.ipynb"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(long_a, "{}")
        zf.writestr(long_b, "{}")
        zf.writestr("short.ipynb", "{}")
    folder, skipped = extract_zip(archive, tmp_path / "out")
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 3 and not skipped and all(len(n.encode()) <= 200 for n in names)
    assert all(n.endswith(".ipynb") for n in names)


def test_path_names_are_readable_and_never_shared():
    names = ["a:b", "a_b", "a%3Ab", ".hidden", "%", "", "Zhang San 张三", "x" * 400, "x" * 401,
             os.fsdecode(b"bad\xff"), os.fsdecode(b"bad\xfe"), "../up", "a/b", "a\\b", "Ann Lee #101"]
    encoded = [path_name(n) for n in names]
    assert len(set(encoded)) == len(names)
    assert all("/" not in e and not e.startswith(".") and len(e.encode()) <= 120 for e in encoded)
    assert path_name("Zhang San 张三") == "Zhang San 张三" and path_name("a_b") == "a_b"


def test_a_notebook_of_another_assignment_is_told_apart_by_its_own_grade_ids():
    from types import SimpleNamespace

    from autograder.engine.grade_one import _wrong_notebook

    catalogue = {"02-x": {"test_attention", "answer_q1", "test_answer_q1"},
                 "03-y": {"test_masks", "answer_q1", "test_answer_q1"}}
    plan = SimpleNamespace(name="02-x", grade_ids=catalogue["02-x"])

    def notebook(*ids):
        return SimpleNamespace(cells=[{"metadata": {"nbgrader": {"grade_id": i}}} for i in ids]
                               + [{"metadata": "garbage"}, "not a cell"])

    other = notebook("test_masks", "answer_q1", "test_answer_q1")
    assert _wrong_notebook(plan, [other], catalogue, matched=2) == "wrong notebook: it belongs to 03-y, not 02-x"
    assert _wrong_notebook(plan, [notebook("test_attention", "answer_q1")], catalogue, matched=2) is None
    assert _wrong_notebook(plan, [notebook("answer_q1")], catalogue, matched=1) is None
    assert "none of the cells" in _wrong_notebook(plan, [notebook()], catalogue, matched=0)


def _load_nbgrader_config_file():
    from traitlets.config.loader import PyFileConfigLoader
    return PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "autograder" / "course")).load_config()


def test_nbgrader_config_file_puts_folders_in_the_grading_home_or_the_hub_course(tmp_path, monkeypatch):
    """As a config file (nbgrader ... --NbGrader.config_file=...), the course is the repository with
    working folders in the grading home, or, with TRANSFORMER_CORE_COURSE_ROOT, a hub course
    directory with nbgrader's usual folder names, where `grade submitted/` finds the collection."""
    monkeypatch.delenv("TRANSFORMER_CORE_COURSE_ROOT", raising=False)
    monkeypatch.setenv("TRANSFORMER_CORE_GRADING_HOME", str(tmp_path / "home"))
    repo_mode = _load_nbgrader_config_file().CourseDirectory
    assert repo_mode.root == str(REPO) and repo_mode.source_directory == "solutions"
    assert repo_mode.submitted_directory == str(tmp_path / "home" / "submitted")

    course = tmp_path / "course"
    course.mkdir()
    monkeypatch.setenv("TRANSFORMER_CORE_COURSE_ROOT", str(course))
    hub_mode = _load_nbgrader_config_file().CourseDirectory
    assert hub_mode.root == str(course.resolve())
    assert (hub_mode.source_directory, hub_mode.release_directory) == ("source", "release")
    assert "submitted_directory" not in hub_mode and "feedback_directory" not in hub_mode  # defaults
    assert hub_mode.db_url == f"sqlite:///{course.resolve() / 'gradebook.db'}"


def test_feedback_draws_math_as_mathml_and_never_as_markup():
    from autograder.engine.feedback import _markdown

    page = _markdown(r"scores $QK^\top / \sqrt{d_k}$ and $$\frac{a}{b}$$ and $x<script>alert(1)</script>$",
                     trusted=False)
    assert page.count("<math ") == 3 and "<msqrt>" in page and "<mfrac>" in page
    assert "<script" not in page.lower()

"""Running a large batch: shards on several machines merged into one gradebook, Ctrl-C that keeps
what was finished, --regrade names that match nobody, and messages that name the root cause."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import run_once
from test_autograder_grading import ASSIGNMENT, GOOD_SCALE, GOOD_SOFTMAX, LIMITS, NOTEBOOK, edited, make_course

from autograder.__main__ import main
from autograder.core.errors import UsageError
from autograder.core.outcomes import CellOutcome, Failure, Verdict
from autograder.core.results import GradeResult, Status
from autograder.engine.shards import merge_results, parse_shard, shard_of
from autograder.engine.grade_one import _name_the_root_cause
from autograder.engine.validate import validate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return Path(run_once(tmp_path_factory, "course", make_course))


def read_rows(out: Path) -> list[dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def submissions(course: Path, folder: Path, students: dict[str, str]) -> Path:
    """``students`` maps a name to "solution" or "blank"; each gets <name>/fixture.ipynb."""
    for student, kind in students.items():
        (folder / student).mkdir(parents=True)
        source = course / ("solutions" if kind == "solution" else "exercises") / ASSIGNMENT / NOTEBOOK
        shutil.copy(source, folder / student / NOTEBOOK)
    return folder


# --- shards ---------------------------------------------------------------------------------------


def test_shards_partition_the_learners_the_same_way_everywhere():
    names = [f"learner-{i}" for i in range(600)] + ["Zoë", "a:b", "bad\udcff bytes"]
    for n in (1, 2, 3, 7):
        shards = [{name for name in names if shard_of(name, n) == i} for i in range(1, n + 1)]
        assert set().union(*shards) == set(names) and sum(map(len, shards)) == len(names)   # each exactly once
        assert min(map(len, shards)) > len(names) / n * 0.7                                  # and evenly
    assert [shard_of("alice", 5) for _ in range(3)] == [shard_of("alice", 5)] * 3


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "1/0", ""])
def test_a_bad_shard_is_a_usage_error_that_shows_the_form(text):
    with pytest.raises(UsageError, match="I/N"):
        parse_shard(text)


def test_parse_shard_reads_i_of_n():
    assert parse_shard("2/3") == (2, 3) and parse_shard(" 1 / 1 ") == (1, 1)


def test_shards_graded_apart_and_merged_equal_one_run(course, tmp_path, capsys):
    students = {"ann": "solution", "ben": "blank", "cat": "solution", "dan": "blank", "eve": "solution"}
    subs = submissions(course, tmp_path / "subs", students)
    outs = [tmp_path / f"shard-{i}" for i in (1, 2)]
    for i, out in enumerate(outs, start=1):
        assert main(["--root", str(course), "grade", str(subs), "--assignment", ASSIGNMENT, "--out", str(out),
                     "--shard", f"{i}/2", "--no-progress", "--jobs", "2", *LIMITS]) == 0
    per_shard = [{r["student"] for r in read_rows(out)} for out in outs]
    assert per_shard[0].isdisjoint(per_shard[1]) and per_shard[0] | per_shard[1] == set(students)
    assert all(per_shard), "with these names both shards get work"
    merged = tmp_path / "all"
    assert main(["merge", *map(str, outs), "--out", str(merged)]) == 0
    rows = {r["student"]: r["score"] for r in read_rows(merged)}
    assert rows == {"ann": "3", "ben": "0", "cat": "3", "dan": "0", "eve": "3"}
    for student in students:
        assert (merged / "feedback" / student / ASSIGNMENT / "fixture.html").is_file()
    assert "merged 2 folders: 5 results" in capsys.readouterr().out
    # Merging again, or into one of the shards, changes nothing and loses nothing.
    assert main(["merge", *map(str, outs), "--out", str(merged)]) == 0
    assert {r["student"]: r["score"] for r in read_rows(merged)} == rows
    assert main(["merge", str(outs[1]), "--out", str(outs[0])]) == 0
    assert {r["student"]: r["score"] for r in read_rows(outs[0])} == rows
    # The instructor's hand-entered points reach the combined gradebook too.
    manual = tmp_path / "manual.csv"
    manual.write_text("student,assignment,grade_id,points,comment\nben,00-fixture,test_softmax,2,checked by hand\n")
    assert main(["merge", *map(str, outs), "--out", str(merged), "--manual-scores", str(manual)]) == 0
    assert {r["student"]: r["score"] for r in read_rows(merged)}["ben"] == "2"


def _result_file(out: Path, student: str, score: float) -> None:
    result = GradeResult(student, ASSIGNMENT, "graded", kind=Status.GRADED, score=score, max_score=3.0,
                         cells={"fixture:test_softmax": score}, cell_max_scores={"fixture:test_softmax": 3.0})
    path = out / "results" / student / f"{ASSIGNMENT}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(asdict(result)))


def test_merging_shards_that_did_not_split_one_batch_is_refused(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    _result_file(first, "ann", 3.0)
    _result_file(second, "ann", 1.0)
    with pytest.raises(UsageError, match="did not split one batch"):
        merge_results([first, second], tmp_path / "all")
    assert not (tmp_path / "all").exists(), "nothing is copied before the check"
    with pytest.raises(UsageError, match="no results/ folder"):
        merge_results([tmp_path / "nowhere"], tmp_path / "all")


# --- --regrade names ------------------------------------------------------------------------------


def test_regrade_of_a_name_that_matches_nobody_is_a_usage_error_with_a_suggestion(course, tmp_path, capsys):
    subs = submissions(course, tmp_path / "subs", {"Erin": "blank"})
    status = main(["--root", str(course), "grade", str(subs), "--assignment", ASSIGNMENT,
                   "--out", str(tmp_path / "out"), "--regrade", "erin", "--no-progress", *LIMITS])
    assert status == 2
    assert "--regrade 'erin' matches no submission; did you mean 'Erin'?" in capsys.readouterr().err
    assert not (tmp_path / "out" / "results").exists(), "nothing was graded"


# --- Ctrl-C ---------------------------------------------------------------------------------------


def test_ctrl_c_saves_what_was_finished_says_so_briefly_and_resumes(course, tmp_path):
    subs = submissions(course, tmp_path / "subs", {name: "solution" for name in ("kim", "lee", "max", "ned")})
    out = tmp_path / "out"
    command = [sys.executable, "-m", "autograder", "--root", str(course), "grade", str(subs),
               "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "1", "--no-progress", *LIMITS]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while not list((out / "results").glob("*/*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)            # what Ctrl-C in a terminal sends to the group
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130
    assert "Traceback" not in stderr and "run the same command again" in stderr
    assert len(stderr.strip().splitlines()) <= 3, stderr
    finished = read_rows(out)
    assert 1 <= len(finished) < 4 and all(r["score"] == "3" for r in finished)
    assert main(command[3:]) == 0
    assert sorted(r["student"] for r in read_rows(out)) == ["kim", "lee", "max", "ned"]


# --- the root cause of a failure ------------------------------------------------------------------


def test_a_test_failing_on_a_missing_name_names_the_earlier_error_first():
    failed_import = "ModuleNotFoundError: No module named 'numpyy'"
    missing = CellOutcome("error", "NameError: name 'softmax' is not defined in your notebook",
                          verdict=Verdict(Failure.VISIBLE, "NameError", "name 'softmax' is not defined in your notebook"))
    assert _name_the_root_cause(missing, failed_import).reason.startswith(
        f"an earlier cell failed: {failed_import}; so this test fails with NameError")
    assert _name_the_root_cause(missing, None) == missing
    wrong = CellOutcome("error", "AssertionError: softmax is wrong",
                        verdict=Verdict(Failure.VISIBLE, "AssertionError", "softmax is wrong"))
    assert _name_the_root_cause(wrong, failed_import) == wrong
    # The referee's exception class decides, not the words: a message that starts with NameError is not one.
    worded = CellOutcome("error", "NameError: said by an AssertionError",
                         verdict=Verdict(Failure.VISIBLE, "AssertionError", "NameError: said by an AssertionError"))
    assert _name_the_root_cause(worded, failed_import) == worded
    # A NameError the grader's proxies raised in a hidden part is no missing name of the learner's.
    worded = CellOutcome("error", "NameError: x", verdict=Verdict(Failure.TEST, "NameError", "x"))
    assert _name_the_root_cause(worded, failed_import) == worded


def test_validate_reports_the_import_that_failed_not_only_the_missing_name(course, tmp_path):
    notebook = tmp_path / NOTEBOOK
    notebook.write_text(edited(course / "exercises" / ASSIGNMENT / NOTEBOOK,
                               {"softmax": "import torch.nn.functionall\n" + GOOD_SOFTMAX, "scale": GOOD_SCALE}))
    ok, lines = validate(notebook, root=course)
    assert not ok and "passed  test_scale" in lines
    failure = next(line for line in lines if line.startswith("FAILED  test_softmax"))
    assert "an earlier cell failed: ModuleNotFoundError: No module named 'torch.nn.functionall'" in failure
    # A module graded code may not import at all is named by the source check, before anything runs.
    notebook.write_text(edited(course / "exercises" / ASSIGNMENT / NOTEBOOK,
                               {"softmax": "import numpyy\n" + GOOD_SOFTMAX, "scale": GOOD_SCALE}))
    ok, lines = validate(notebook, root=course)
    assert not ok and any("`import numpyy`" in line and "module not allowed" in line for line in lines), lines


# --- nbgrader's own commands ----------------------------------------------------------------------


def test_nbgrader_runs_through_the_autograder_without_the_venv_on_path(tmp_path):
    """nbgrader starts `alembic` as a program: the bare venv script fails when the venv is not on PATH."""
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TRANSFORMER_CORE_GRADING_HOME": str(tmp_path / "home")}
    bare = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "db", "student", "list"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert bare.returncode != 0 and "alembic" in bare.stderr
    done = subprocess.run([sys.executable, "-m", "autograder", "nbgrader", "db", "student", "list"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "There are 0 students in the database" in done.stdout
    assert (tmp_path / "home").is_dir(), "the gradebook lives in the grading home, not in the repository"


def test_a_page_that_grading_changed_counts_as_updated_after_publishing(tmp_path):
    """`grade` writes a re-graded learner's page itself, then publishing renders it again: a page that
    changed this run (a resubmission, whose hand score is set aside) needs no second write, and the
    trial's run printed "0 feedback pages updated". The count is of pages that differ from what the last
    run published; a run that changes nothing counts none."""
    from test_feedback_pages import graded_record, save

    from autograder.engine.pages import write_feedback_pages
    from autograder.instructor.after_grading import publish

    record, result = graded_record("exercises", failing=True)
    save(tmp_path, record, result)
    publish(tmp_path, None)
    assert publish(tmp_path, None).pages == 0, "nothing changed since the last run"
    record, result = graded_record("exercises", failing=False)          # the resubmission, graded
    page = save(tmp_path, record, result)
    automatic = {(result.learner, result.assignment): result.score}
    assert write_feedback_pages(tmp_path, [result], automatic=automatic) == (0, 0), "grading's page is current"
    assert publish(tmp_path, None).pages == 1
    assert "test passed" in (tmp_path / page).read_text(encoding="utf-8")
    assert publish(tmp_path, None).pages == 0

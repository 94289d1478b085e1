"""Issue 21 for the grader: the newest attempt is graded, feedback tells the final grade and nothing
of the hidden tests, every learner with a row gets a page, shards come from job engines and merge
only whole batches, export warns about columns Canvas or Moodle would mishandle."""

import csv
import json
import re
import shutil
import zipfile
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import run_once
from test_autograder_grading import ASSIGNMENT, GOOD_SCALE, GOOD_SOFTMAX, LIMITS, NOTEBOOK, edited, make_course

from autograder.__main__ import main
from autograder.core.errors import UsageError
from autograder.core.results import GradeResult, Status, url_safe_name
from autograder.engine.shards import check_complete, merge_results, shard_from_environment
from autograder.engine.submissions import attempt_of
from autograder.instructor.after_grading import publish

# A scale() that records what it was called with, and a cell of the learner's after the scale test
# that prints it: in grading, the hidden test's call (d_k=9) would show up as SEEN-9-X.
RECORDING_SCALE = ("CALLS = []\n\ndef scale(scores, d_k):\n    CALLS.append(d_k)\n    return scores / d_k ** 0.5")
PRINT_CALLS = "print(''.join(f'SEEN-{d}-X ' for d in CALLS))"
TIMES = {0: (2025, 3, 10, 10, 0, 0), 1: (2025, 3, 11, 10, 0, 0), 2: (2025, 3, 12, 10, 0, 0)}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return Path(run_once(tmp_path_factory, "course", make_course))


def _recording_notebook(solution: Path) -> str:
    """The solution with the recording scale() and, after the scale test, the learner's own cell
    that prints the calls, saved with the output of the learner's own run (visible test only)."""

    def change(grade_id, cell):
        if grade_id is None:
            cells = cell["cells"]
            at = next(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_scale")
            cells.insert(at + 1, {"cell_type": "code", "id": "mine-1", "metadata": {}, "execution_count": 9,
                                  "source": PRINT_CALLS,
                                  "outputs": [{"output_type": "stream", "name": "stdout", "text": "SEEN-16-X \n"}]})

    return edited(solution, {"softmax": GOOD_SOFTMAX, "scale": RECORDING_SCALE}, change)


@pytest.fixture(scope="module")
def canvas(course, tmp_path_factory):
    """A Canvas download graded through the command line, once: three attempts of smithjane (blank,
    half, full; the newest is the full one and is late), an unreadable notebook, and the recorder."""

    def run(folder: Path) -> dict:
        folder = Path(folder)
        solution = course / "solutions" / ASSIGNMENT / NOTEBOOK
        blank = (course / "exercises" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8")
        half = edited(course / "exercises" / ASSIGNMENT / NOTEBOOK, {"scale": GOOD_SCALE})
        full = edited(solution, {"softmax": GOOD_SOFTMAX, "scale": GOOD_SCALE})
        entries = [("smithjane_123_900_fixture.ipynb", blank, TIMES[0]),
                   ("smithjane_123_901_fixture-1.ipynb", half, TIMES[1]),
                   ("smithjane_LATE_123_902_fixture-2.ipynb", full, TIMES[2]),
                   ("doejohn_124_903_fixture.ipynb", '{"cells": [', TIMES[1]),
                   ("leakylee_125_904_fixture.ipynb", _recording_notebook(solution), TIMES[1])]
        archive = folder / "submissions.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for name, text, when in entries:
                zf.writestr(zipfile.ZipInfo(name, date_time=when), text)
        out = folder / "out"
        status = main(["--root", str(course), "grade", str(archive), "--assignment", ASSIGNMENT, "--out", str(out),
                       "--no-progress", "--jobs", "2", *LIMITS])
        return {"status": status, "out": str(out)}

    result = run_once(tmp_path_factory, "canvas-attempts", run)
    out = Path(result["out"])
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {"status": result["status"], "out": out, "rows": rows}


def page(out: Path, learner: str, name: str = "fixture.html") -> str:
    return (out / "feedback" / url_safe_name(learner) / ASSIGNMENT / name).read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_newest_of_three_canvas_attempts_is_graded_and_the_row_lists_the_others(canvas):
    rows = [r for r in canvas["rows"] if r["student"] == "smithjane"]
    graded = [r for r in rows if r["status"] == "graded"]
    assert len(graded) == 1 and graded[0]["score"] == "3", rows
    assert graded[0]["file"] == "smithjane_LATE_123_902_fixture-2.ipynb" and graded[0]["late"] == "yes"
    others = graded[0]["other_attempts"]
    assert "smithjane_123_901_fixture-1.ipynb (submitted 2025-03-11" in others
    assert "smithjane_123_900_fixture.ipynb (submitted 2025-03-10" in others
    older = [r for r in rows if r is not graded[0]]
    assert len(older) == 2 and all(r["status"].startswith("an older attempt, not graded") for r in older)
    text = page(canvas["out"], "smithjane #123")
    assert "Graded: <code>smithjane_LATE_123_902_fixture-2.ipynb (submitted 2025-03-12" in text
    assert "smithjane_123_901_fixture-1.ipynb" in text and "the newest attempt counts" in text


@pytest.mark.slow
def test_an_unreadable_notebook_gets_a_page_that_says_what_to_submit_again(canvas):
    (row,) = [r for r in canvas["rows"] if r["student"] == "doejohn"]
    assert row["status"].startswith("unreadable notebook")
    text = page(canvas["out"], "doejohn #124", "not-graded.html")
    assert "could not be graded" in text and "download your notebook again" in text
    assert canvas["status"] == 1


@pytest.mark.slow
def test_feedback_shows_the_learners_own_run_and_nothing_the_hidden_calls_left_behind(canvas):
    (row,) = [r for r in canvas["rows"] if r["student"] == "leakylee"]
    assert row["score"] == "3"
    text = page(canvas["out"], "leakylee #125")
    squeezed = re.sub(r"\s+", "", text)
    assert "SEEN-9-X" not in squeezed, "the hidden test's argument reached the feedback"
    assert "SEEN-16-X" in text and "output from your own run" in text
    assert "hidden-marker" not in text
    # Course cells the learner left alone are the course's; the learner's extra cell is theirs.
    assert "your own cell" in text and "<div class='head'>course cell</div>" in text


@pytest.mark.slow
def test_every_feedback_folder_name_is_safe_in_a_url(canvas):
    names = [p.name for p in (canvas["out"] / "feedback").rglob("*")]
    assert names and all(re.fullmatch(r"[A-Za-z0-9._~-]+", n) for n in names), names


@pytest.mark.slow
def test_the_page_tells_the_grade_after_hand_scores_and_the_late_penalty(canvas, tmp_path):
    out = tmp_path / "out"           # a copy: the batch is shared with tests (on other workers) that read it
    shutil.copytree(canvas["out"], out)
    manual = tmp_path / "manual.csv"
    manual.write_text("student,assignment,grade_id,points,comment\n"
                      "smithjane,00-fixture,test_softmax,1,partly right\n")
    assert main(["export", "--out", str(out), "--format", "plain", "--late-policy", "per-day:10",
                 "--manual-scores", str(manual), "--output", str(tmp_path / "plain.csv")]) == 0
    text = page(out, "smithjane #123")
    # 1 (hand) + 1 (scale) = 2 of 3, one day late by Canvas' mark: 10 % of 3 = 0.3 off -> 1.7.
    assert "Your grade for 00-fixture: <b>1.7</b> of 3 points" in text
    assert "autograder: 3; after your instructor's grading: 2" in text
    assert "submitted 1 day late" in text and "0.3 points off" in text
    assert json.loads((out / "late-policy.json").read_text())["late_policy"] == "per-day:10"
    with open(tmp_path / "plain.csv", newline="", encoding="utf-8") as handle:
        assert {r["student"]: r[ASSIGNMENT] for r in csv.DictReader(handle)}["smithjane"] == "1.7"
    # What every later grade and merge run does at its end keeps both: the hand score (the last
    # file's copy) and the saved late policy.
    publish(out, None)
    assert "Your grade for 00-fixture: <b>1.7</b>" in page(out, "smithjane #123")


def test_resubmission_suffixes_are_told_apart_from_notebook_names():
    assert attempt_of("fixture-2", ["fixture"]) == ("fixture", 2)
    assert attempt_of("fixture", ["fixture"]) == ("fixture", 0)
    assert attempt_of("model-1", ["model-1"]) == ("model-1", 0), "a notebook named with a number stays itself"
    assert attempt_of("other-3", ["fixture"]) == ("other-3", 0)


# --- shards from job engines, and only whole batches merged ---------------------------------------


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0"}, (1, 4)),
    ({"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "8"}, (8, 8)),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6",
      "SLURM_ARRAY_TASK_STEP": "2"}, (3, 4)),
    ({"JOB_COMPLETION_INDEX": "2", "AUTOGRADER_SHARD_COUNT": "3"}, (3, 3)),
    ({"PATH": "/usr/bin"}, None),
])
def test_the_shard_comes_from_a_slurm_array_or_a_kubernetes_indexed_job(env, expected):
    found = shard_from_environment(env)
    assert (found[0] if found else None) == expected


@pytest.mark.parametrize("env, message", [
    ({"JOB_COMPLETION_INDEX": "0"}, "AUTOGRADER_SHARD_COUNT"),
    ({"SLURM_ARRAY_TASK_ID": "x"}, "not a whole number"),
    ({"JOB_COMPLETION_INDEX": "3", "AUTOGRADER_SHARD_COUNT": "3"}, "outside the count"),
])
def test_a_job_engine_environment_that_names_no_shard_is_a_usage_error(env, message):
    with pytest.raises(UsageError, match=message):
        shard_from_environment(env)


def _shard_folder(folder: Path, student: str, shard: tuple[int, int]) -> Path:
    result = GradeResult(student, ASSIGNMENT, "graded", kind=Status.GRADED, score=1.0, max_score=3.0,
                         cells={"fixture:test_softmax": 1.0}, cell_max_scores={"fixture:test_softmax": 3.0})
    path = folder / "results" / student / f"{ASSIGNMENT}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(asdict(result)))
    (folder / "shard.json").write_text(json.dumps({"shards": [list(shard)]}))
    return folder


def test_merge_refuses_an_incomplete_set_of_shards_and_names_the_missing_ones(tmp_path):
    second = _shard_folder(tmp_path / "s2", "ben", (2, 3))
    with pytest.raises(UsageError, match=r"shards 1/3, 3/3 are missing"):
        merge_results([second], tmp_path / "all")
    assert not (tmp_path / "all").exists(), "nothing is copied before the check"
    first, third = _shard_folder(tmp_path / "s1", "ann", (1, 3)), _shard_folder(tmp_path / "s3", "cat", (3, 3))
    with pytest.raises(UsageError, match="different counts"):
        check_complete([first, _shard_folder(tmp_path / "t", "dan", (2, 2))])
    assert main(["merge", str(first), str(second), str(third), "--out", str(tmp_path / "all")]) == 0
    assert json.loads((tmp_path / "all" / "shard.json").read_text())["shards"] == [[1, 3], [2, 3], [3, 3]]


# --- export and validate messages -----------------------------------------------------------------


def test_a_canvas_column_that_matches_no_roster_column_is_named_with_the_fix():
    from autograder.instructor.export import Roster, _canvas_column_warnings

    roster = Roster("canvas", [], columns=["Scaling and masks (4711)", "Self-attention (4702)"])
    (warning,) = _canvas_column_warnings(["03-scaling-and-masks"], roster, {})
    assert "matches no assignment column of the roster (Scaling and masks (4711)" in warning
    assert "NEW assignment" in warning and '--column "03-scaling-and-masks=Scaling and masks (4711)"' in warning
    named = {"03-scaling-and-masks": "Scaling and masks (4711)"}
    assert _canvas_column_warnings(["03-scaling-and-masks"], roster, named) == []


def test_validate_says_plainly_that_tests_pass_on_updated_cells_and_what_to_download():
    from autograder.engine.validate import _repaired_but_passing

    text = _repaired_but_passing(2, "03-scaling-and-masks", "scaling_and_masks", Path("/nonexistent"))
    assert text.startswith("all visible tests pass on the course's current cells")
    assert "exercises/03-scaling-and-masks/scaling_and_masks.ipynb" in text and "you may submit" in text


def _grade_download(course: Path, folder: Path, entries: list[tuple[str, str | bytes]]) -> tuple[Path, int, str, dict]:
    """Grade a Canvas download of ``entries`` (name, content) through the command line: the output
    folder, the exit status, what it printed and the rows of grades.csv by student."""
    import contextlib
    import io

    archive = folder / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in entries:
            zf.writestr(zipfile.ZipInfo(name, date_time=TIMES[1]), data)
    out, printed = folder / "out", io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["--root", str(course), "grade", str(archive), "--assignment", ASSIGNMENT, "--out", str(out),
                       "--no-progress", "--jobs", "2", *LIMITS])
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return out, status, printed.getvalue(), {r["student"]: r for r in csv.DictReader(handle)}


@pytest.mark.slow
def test_a_learner_whose_upload_is_not_a_notebook_gets_a_row_saying_what_to_hand_in(course, tmp_path):
    """A Canvas entry `mallory_3_3_<long name>.txt` (the wrong file uploaded) is a row of its own and
    counts among the submissions; a learner who uploaded a notebook and a .txt gets the notebook's row."""
    full = edited(course / "solutions" / ASSIGNMENT / NOTEBOOK, {"softmax": GOOD_SOFTMAX, "scale": GOOD_SCALE})
    wrong = "mallory_3_3_" + "my answers to the transformer exercise written as plain text " * 3 + ".txt"
    entries = [("smithjane_123_900_fixture.ipynb", full), ("smithjane_123_901_notes.txt", "notes"),
               (wrong, "softmax is exp over sum")]
    out, status, said, rows = _grade_download(course, tmp_path, entries)
    assert status == 1 and "graded 1 of 2 submissions" in said
    assert sorted(rows) == ["mallory", "smithjane"] and rows["smithjane"]["score"] == "3"
    status_text = rows["mallory"]["status"]
    assert status_text.startswith("the upload mallory_3_3_my answers") , status_text
    assert status_text.endswith(".txt is not a notebook but a text file: hand in the .ipynb file")
    assert rows["mallory"]["lms_id"] == "3"
    assert "hand in the .ipynb file" in page(out, "mallory #3", "not-graded.html")


def test_an_upload_that_is_not_a_notebook_is_a_row_saying_what_it_holds(course, tmp_path):
    """Whatever a learner uploaded, the row and the page say what it is and what to hand in: a zip of a
    folder holding the notebook is named as such (its notebook is not graded: the learner is asked for
    the file itself), as are a PDF, a Python file and a notebook saved under another name."""
    with zipfile.ZipFile(work := tmp_path / "work.zip", "w") as zf:
        zf.writestr("work/fixture.ipynb", (course / "exercises" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8"))
        zf.writestr("__MACOSX/work/._fixture.ipynb", "metadata")
    notebook = (course / "exercises" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8")
    entries = [("grace_108_5008_work.zip", work.read_bytes()), ("pat_109_5009_fixture.pdf", b"%PDF-1.7 ..."),
               ("quinn_110_5010_fixture.py", b"def scale(scores, d_k):\n    return scores\n"),
               ("rosa_111_5011_fixture.ipynb.json", notebook.encode())]
    out, status, said, rows = _grade_download(course, tmp_path, entries)
    assert status == 1 and "graded 0 of 4 submissions" in said
    expected = {"grace": "the upload grace_108_5008_work.zip is not a notebook but a zip holding work/fixture.ipynb: "
                         "upload the .ipynb file itself, not a zip",
                "pat": "the upload pat_109_5009_fixture.pdf is not a notebook but a PDF: hand in the .ipynb file",
                "quinn": "the upload quinn_110_5010_fixture.py is not a notebook but a Python file: "
                         "hand in the .ipynb file",
                "rosa": "the upload rosa_111_5011_fixture.ipynb.json is not a notebook but a notebook whose name "
                        "does not end in .ipynb: hand in the .ipynb file"}
    assert {student: row["status"] for student, row in rows.items()} == expected
    said = page(out, "grace #108", "not-graded.html")
    assert "a zip holding work/fixture.ipynb: upload the .ipynb file itself, not a zip" in said, said
    assert "no notebook" not in said and "submit this assignment&#x27;s .ipynb file itself" in said, said


def test_the_page_of_a_zipped_chinese_notebook_is_chinese(course, tmp_path):
    """An upload that is not a notebook has no notebook to take the page's language from: a notebook
    inside the zip gives it (a Chinese learner who zipped their work reads why in Chinese)."""
    nb = json.loads((course / "exercises" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8"))
    nb.setdefault("metadata", {})["course"] = {"language": "zh_CN"}
    with zipfile.ZipFile(work := tmp_path / "work.zip", "w") as zf:
        zf.writestr("work/fixture.ipynb", json.dumps(nb))
    out, status, said, rows = _grade_download(course, tmp_path, [("grace_108_5008_work.zip", work.read_bytes())])
    said = page(out, "grace #108", "not-graded.html")
    assert "lang='zh-CN'" in said and "请提交本次作业的 .ipynb 文件本身" in said, said


@pytest.mark.slow
def test_older_attempts_are_no_failure_and_the_summary_mean_is_the_grades_csvs(course, tmp_path, capsys):
    """Issue 30: a class whose only not-graded rows are superseded attempts exits 0, the summary lists them
    apart from failures, and its mean counts the hand scores as grades.csv does."""
    full = edited(course / "solutions" / ASSIGNMENT / NOTEBOOK, {"softmax": GOOD_SOFTMAX, "scale": GOOD_SCALE})
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, when in (("smithjane_123_900_fixture.ipynb", TIMES[0]), ("smithjane_123_901_fixture-1.ipynb", TIMES[1])):
            zf.writestr(zipfile.ZipInfo(name, date_time=when), full)
    manual = tmp_path / "manual.csv"
    manual.write_text("student,assignment,grade_id,points,comment\nsmithjane,00-fixture,test_softmax,0,\n")
    out = tmp_path / "out"
    status = main(["--root", str(course), "grade", str(archive), "--assignment", ASSIGNMENT, "--out", str(out),
                   "--no-progress", "--jobs", "1", "--manual-scores", str(manual), "--due", "2025-03-10T22:00",
                   *LIMITS])
    said = capsys.readouterr().out
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        graded = [r for r in csv.DictReader(handle) if r["status"] == "graded"]
    assert status == 0, said
    assert len(graded) == 1 and float(graded[0]["score"]) < 3, "the hand score took points off"
    assert f"{float(graded[0]['score']):.2f} / 3" in said, said
    failures, older = said.split("older attempts, superseded")
    assert "not graded:" not in failures and "smithjane / 00-fixture: smithjane_123_900_fixture.ipynb: an older attempt" in older
    assert "graded 1 of 1 submissions (1 older attempt superseded)" in said
    # no late policy yet, but the deadline given to grade: the page says how late
    assert "submitted 12 hours after the deadline" in page(out, "smithjane #123")

"""Late marks, notebook-order columns, manual scores, rosters, late policies and the LMS export.

Most tests write result files directly (no kernels); one end-to-end test grades a class from an LMS
export with the fixture course (40 submissions and a 300-learner roster; ``FULL_CLASS=1`` grades
all 300).
"""

import csv
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from autograder.__main__ import main
from autograder.core.errors import UsageError
from autograder.core.outcomes import CellOutcome
from autograder.core.results import (GradeResult, Status, load_result, result_path, url_safe_name, write_atomically,
                                write_grades_csv)
from autograder.engine.feedback import page_record, render_feedback, scrub_paths
from autograder.engine.pages import render_page, save_record
from autograder.engine.plan import MANUAL, TEST, RunCell
from autograder.engine.submissions import Submission
from autograder.instructor.export import export, read_roster
from autograder.instructor.late_policy import LatePolicy, days_late, parse_due, parse_late_policy
from autograder.instructor.after_grading import publish
from autograder.instructor.manual import ManualScoresError, merge_manual_scores

CELLS = {"nb:q_intro": 1.0, "nb:test_b": 2.0, "nb:manual_essay": 5.0, "nb:test_a": 2.0}


def result(student, lms_id="", *, assignment="01-a", cells=None, late=False, submitted_at="", status="graded",
           maxima=None) -> GradeResult:
    maxima = dict(CELLS if maxima is None else maxima)
    cells = dict(cells if cells is not None else {k: (None if "manual" in k else v) for k, v in maxima.items()})
    if status != "graded":
        return GradeResult(student, assignment, status, lms_id=lms_id, late=late, submitted_at=submitted_at)
    return GradeResult(student, assignment, status, kind=Status.GRADED, score=sum(v for v in cells.values() if v is not None),
                       max_score=sum(maxima.values()), cells=cells, cell_max_scores=maxima, lms_id=lms_id,
                       needs_manual_grade=any(v is None for v in cells.values()), late=late,
                       submitted_at=submitted_at)


def save(out: Path, *results: GradeResult, feedback=True) -> None:
    """Save ``results`` as grading would: each graded one with the page of its notebook ``nb`` and that
    page's record (its cells passed where they earned their points)."""
    for r in results:
        if feedback and r.graded:
            page = (Path("feedback") / r.learner / r.assignment / "nb.html").as_posix()
            keys = [key.split(":", 1)[1] for key in r.cell_max_scores]
            cells = [RunCell(kind=MANUAL if "manual" in key else TEST, key=key, cell_type="code", source="",
                             shown=f"# {key}", points=r.cell_max_scores[f"nb:{key}"], origin="course") for key in keys]
            outcomes = [CellOutcome("ok" if r.cells[f"nb:{key}"] in (None, r.cell_max_scores[f"nb:{key}"]) else "error",
                                    "wrong values") for key in keys]
            record = page_record(student=r.learner, assignment=r.assignment, notebook="nb", cells=cells,
                                 outcomes=outcomes, scores={k: r.cells[f"nb:{k}"] for k in keys}, notes=[], hidden=[])
            save_record(out, page, record)
            write_atomically(out / page, render_page(record, r, automatic=r.score).encode())
            r.feedback = [page]
        write_atomically(result_path(out, r.learner, r.assignment), json.dumps(asdict(r)).encode())


def rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- results: late marks, times, old files, column order ------------------------------------------


def test_submission_reads_the_canvas_late_mark_and_the_file_time(tmp_path):
    late = tmp_path / "doejohn_LATE_124_457_fixture.ipynb"
    on_time = tmp_path / "smithjane_123_456_fixture.ipynb"
    for file in (late, on_time):
        file.write_text("{}")
        os.utime(file, (1_700_000_000, 1_700_000_000))
    assert Submission("doejohn", "a", {"fixture": late}, late, lms_id="124").late
    submission = Submission("smithjane", "a", {"fixture": on_time}, on_time, lms_id="123")
    assert not submission.late
    assert submission.submitted_at == "2023-11-14T22:13:20+00:00"


def test_old_result_files_load_with_defaults_and_unknown_fields_are_ignored(tmp_path):
    path = tmp_path / "r.json"
    old = asdict(result("ann"))
    del old["late"], old["submitted_at"]
    path.write_text(json.dumps({**old, "a_field_from_the_future": 1}))
    loaded = load_result(path)
    assert loaded is not None and loaded.late is False and loaded.submitted_at == "" and loaded.score == 5


def test_results_of_the_previous_format_without_kind_get_it_from_their_status(tmp_path):
    """Before ``kind`` existed a result said only in words whether the grader had failed (graded again)."""
    path = tmp_path / "r.json"
    for status, kind in [("graded", Status.GRADED), ("internal error: OSError: x", Status.GRADER_FAILED),
                         ("the kernel did not start (timeout)", Status.GRADER_FAILED),
                         ("unreadable notebook a.ipynb: cut off", Status.NOT_GRADED)]:
        old = asdict(result("ann", status=status))
        del old["kind"]
        path.write_text(json.dumps(old))
        loaded = load_result(path)
        assert loaded.kind is kind and loaded.graded == (kind is Status.GRADED), status
    # The current format stores the kind and reads it back, whatever the words say.
    path.write_text(json.dumps(asdict(result("ann", status="internal error: x"))))
    assert load_result(path).kind is Status.NOT_GRADED
    path.write_text(json.dumps({**asdict(result("ann")), "kind": "no such kind"}))
    assert load_result(path) is None


def test_grades_csv_columns_follow_the_notebook_order_not_the_alphabet(tmp_path):
    first = result("ann", maxima={"nb:q_intro": 1.0, "nb:test_b": 2.0, "nb:test_a": 2.0})
    later = result("bob")  # a newer notebook with one more cell between test_b and test_a
    other = result("ann", assignment="00-z", maxima={"z:test_z": 1.0})
    write_grades_csv(tmp_path / "grades.csv", [first, later, other])
    header = next(csv.reader(open(tmp_path / "grades.csv", encoding="utf-8")))
    assert header[header.index("other_attempts") + 1:] == ["z:test_z", "nb:q_intro", "nb:test_b", "nb:manual_essay",
                                                         "nb:test_a"]
    assert "late" in header


# --- manual scores ----------------------------------------------------------------------------------


def manual(tmp_path, body: str) -> Path:
    return write(tmp_path / "manual.csv", "student,assignment,grade_id,points,comment\n" + body)


@pytest.mark.parametrize("body, message", [
    ("nobody,01-a,manual_essay,3,\n", "line 2: no learner 'nobody'"),
    ("ann,09-x,manual_essay,3,\n", "line 2: no results for assignment '09-x'"),
    ("ann,01-a,essay,3,\n", "line 2: 01-a has no graded cell 'essay'"),
    ("ann,01-a,manual_essay,three,\n", "line 2: points 'three' is not a number"),
    ("ann,01-a,manual_essay,2,5,\n", "line 2: more fields than the 5 columns; write decimals with a dot"),
    ("ann,01-a,manual_essay,-1,\n", "line 2: points '-1' is negative"),
    ("ann,01-a,manual_essay,6,\n", "line 2: 6 points for nb:manual_essay is above that cell's maximum of 5"),
    ("ann,01-a,manual_essay,3,\nAnn ,01-a,nb:manual_essay,4,\n", "line 3: a second score for ann"),
    ("Sam,01-a,manual_essay,3,\n", "student 'Sam' is ambiguous"),
    ("carl,01-a,manual_essay,3,\n", "was not graded"),
])
def test_manual_scores_are_checked_with_the_file_line_and_the_fix(tmp_path, body, message):
    out = tmp_path / "out"
    save(out, result("ann"), result("Sam", "1"), result("Sam", "2"), result("carl", status="unreadable notebook"))
    path = manual(tmp_path, body)
    with pytest.raises(ManualScoresError) as error:
        merge_manual_scores(out, path)
    assert message in str(error.value) and str(path) in str(error.value) and "Fix these lines" in str(error.value)
    assert not (out / "grades.csv").exists(), "nothing is written from a bad file"
    assert main(["export", "--out", str(out), "--manual-scores", str(path)]) == 2


def test_a_file_without_the_columns_says_what_the_first_line_must_be(tmp_path):
    path = write(tmp_path / "m.csv", "name,points\nann,3\n")
    with pytest.raises(ManualScoresError, match="student,assignment,grade_id,points,comment"):
        merge_manual_scores(tmp_path, path)


def test_manual_scores_fill_and_override_cells_and_survive_every_run(tmp_path):
    out = tmp_path / "out"
    save(out, result("ann"), result("Sam", "7", cells={**CELLS, "nb:manual_essay": None, "nb:test_a": 0.0}))
    path = manual(tmp_path, "ann,01-a,manual_essay,4,clear argument\nSam #7,01-a,nb:test_a,1.5,"
                            "partly right: see the shape\nann,01-a,test_a,,\n")
    before = path.read_bytes()
    merged = publish(out, path)
    assert (merged.scores, merged.overrides, merged.pages) == (2, 1, 2)
    grades = {r["student"]: r for r in rows(out / "grades.csv")}
    assert grades["ann"]["score"] == "9" and grades["ann"]["needs_manual_grade"] == "no"
    assert grades["ann"]["nb:manual_essay"] == "4"
    assert grades["Sam"]["score"] == "4.5" and grades["Sam"]["needs_manual_grade"] == "yes"
    page = (out / "feedback" / "Sam #7" / "01-a" / "nb.html").read_text()
    assert "changed by the instructor (the autograder gave 0)" in page and "partly right" in page
    assert "graded by your instructor" in (out / "feedback" / "ann" / "01-a" / "nb.html").read_text()
    # a second run (export, or grade resuming every submission) keeps the scores and rewrites nothing
    again = publish(out, path)
    assert again.pages == 0 and {r["student"]: r["score"] for r in rows(out / "grades.csv")} == {"ann": "9", "Sam": "4.5"}
    assert path.read_bytes() == before, "the grader never writes the manual-scores file"
    # removing a line takes the score back out of grades.csv and the feedback
    write(path, "student,assignment,grade_id,points,comment\nSam #7,01-a,test_a,1.5,\n")
    publish(out, path)
    assert {r["student"]: r["score"] for r in rows(out / "grades.csv")} == {"ann": "5", "Sam": "4.5"}
    assert "instructor&#x27;s grading" not in (out / "feedback" / "ann" / "01-a" / "nb.html").read_text()
    assert "Your instructor's grading" not in (out / "feedback" / "ann" / "01-a" / "nb.html").read_text()


# --- late policies ----------------------------------------------------------------------------------


def test_late_policy_closed_forms():
    policy = parse_late_policy("per-day:10,grace:2")
    assert policy == LatePolicy("per-day", 10.0, 2.0)
    due = parse_due("2025-03-01T12:00")
    two_and_a_half = result("a", submitted_at="2025-03-04T00:00:00+00:00")  # 60 h late
    assert days_late(two_and_a_half, due, policy) == 3
    assert policy.penalty(8.0, 10.0, 3) == pytest.approx(3.0), "30 % of the maximum off"
    within_grace = result("a", submitted_at="2025-03-01T13:59:00+00:00")
    assert days_late(within_grace, due, policy) == 0
    just_after = result("a", submitted_at="2025-03-01T14:00:01+00:00")
    assert days_late(just_after, due, policy) == 1
    assert days_late(result("a", late=True), None, policy) == 1, "the LMS's mark counts as one day"
    assert days_late(result("a", late=True, submitted_at="2025-03-01T11:00:00+00:00"), due, policy) == 0, \
        "with --due the time decides"
    assert LatePolicy("zero").penalty(7.0, 10.0, 1) == 7.0
    assert LatePolicy("per-day", 40.0).penalty(2.0, 10.0, 2) == 2.0, "never below 0"
    assert LatePolicy("none").penalty(7.0, 10.0, 5) == 0.0
    for bad in ("per-day", "per-day:x", "weekly:5", "per-day:150"):
        with pytest.raises(UsageError, match="per-day:P"):
            parse_late_policy(bad)
    with pytest.raises(UsageError, match="ISO"):
        parse_due("next friday")


# --- rosters and the export -------------------------------------------------------------------------


CANVAS_ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section,01-a (4711),Current Score\n"
                 "    Points Possible,,,,,10,\n"
                 "\"Smith, Jane\",123,S123,jsmith,Sec 1,,\n"
                 "\"Doe, John\",124,S124,jdoe,Sec 1,,\n"
                 "\"Lee, Ann\",125,S125,alee,Sec 2,,\n"
                 "\"Student, Test\",999,,,Sec 1,,\n")


def test_rosters_are_recognised(tmp_path):
    assert read_roster(write(tmp_path / "c.csv", CANVAS_ROSTER)).kind == "canvas"
    moodle = read_roster(write(tmp_path / "m.csv", "First name,Surname,ID number,Institution,Email address\n"
                                                   "Jane,Smith,S123,,jane@uni.edu\n"))
    assert moodle.kind == "moodle" and moodle.entries[0].name == "Jane Smith"
    plain = read_roster(write(tmp_path / "p.csv", "student,lms_id\nJane Smith,123\n"))
    assert plain.kind == "plain" and plain.entries[0].lms_id == "123"
    worksheet = read_roster(write(tmp_path / "w.csv", "Identifier,Full name,Email address,Status,Grade\n"
                                                      "Participant 88,Jane Smith,jane@uni.edu,,\n"))
    assert worksheet.kind == "moodle worksheet" and worksheet.entries[0].lms_id == "88"
    with pytest.raises(UsageError, match="cannot tell what kind of roster"):
        read_roster(write(tmp_path / "x.csv", "who,when\na,b\n"))


def test_canvas_export_has_every_roster_learner_and_lists_the_others(tmp_path):
    out = tmp_path / "out"
    save(out, result("smithjane", "123", cells={**CELLS, "nb:manual_essay": 3.0}, late=True),
         result("alee", "", cells={**CELLS, "nb:manual_essay": 5.0}),   # no id: matched by name? no: alee != Lee, Ann
         result("leeann", "", cells={**CELLS, "nb:manual_essay": 1.0}),  # Canvas' squashed name
         result("stranger", "555", cells={**CELLS, "nb:manual_essay": 1.0}))
    roster = write(tmp_path / "canvas.csv", CANVAS_ROSTER)
    report = export(out, fmt="canvas", roster_path=roster, late_policy="per-day:10", missing="zero")
    table = list(csv.reader(open(report.output, encoding="utf-8")))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01-a (4711)"]
    assert table[1][0] == "Points Possible" and table[1][5] == "10"
    grades = {row[1]: row[5] for row in table[2:]}
    assert grades == {"123": "7", "124": "0", "125": "6"}, "late: 10 % off; missing: 0 (--missing zero)"
    assert report.by_id == 1 and report.by_name == 1 and report.missing == 1
    unmatched = {r["student"]: r["why"] for r in rows(report.unmatched_file)}
    assert unmatched == {"alee": "not on the roster", "stranger": "not on the roster"}
    assert main(["export", "--out", str(out), "--format", "canvas", "--roster", str(roster)]) == 1


def test_moodle_export_is_keyed_by_email_and_needs_a_moodle_roster(tmp_path):
    out = tmp_path / "out"
    save(out, result("Jane Smith", "31", cells={**CELLS, "nb:manual_essay": 0.0}),
         result("John Doe", "32"), result("Jon Doe", "33", status="unreadable notebook x"))
    roster = write(tmp_path / "moodle.csv", "First name,Last name,ID number,Email address\n"
                                            "Jane,Smith,S1,jane@uni.edu\nJohn,Doe,S2,john@uni.edu\nAmy,Wu,S3,amy@uni.edu\n")
    report = export(out, fmt="moodle", roster_path=roster)
    table = list(csv.reader(open(report.output, encoding="utf-8")))
    assert table[0] == ["Email address", "First name", "Last name", "01-a"]
    assert table[1:] == [["jane@uni.edu", "Jane", "Smith", "5"], ["john@uni.edu", "John", "Doe", ""],
                         ["amy@uni.edu", "Amy", "Wu", ""]], "waiting for manual grading and missing stay empty"
    assert report.waiting == 1 and report.missing == 1 and [k for k, _ in report.unmatched] == ["Jon Doe #33"]
    with pytest.raises(UsageError, match="Moodle's grades or participants export"):
        export(out, fmt="moodle")


def test_moodle_export_from_a_grading_worksheet_keeps_the_full_name_whole(tmp_path):
    """A worksheet has one "Full name" column: the file says "Full name" instead of guessing where a given
    name ends (a name such as 欧阳娜娜 or "Mary Ann Lee" cannot be split by a space)."""
    out = tmp_path / "out"
    save(out, result("Mary Ann Lee", "88", cells={**CELLS, "nb:manual_essay": 0.0}),
         result("欧阳娜娜", "89", cells={**CELLS, "nb:manual_essay": 0.0}))
    roster = write(tmp_path / "w.csv", "Identifier,Full name,Email address,Status,Grade\n"
                                       "Participant 88,Mary Ann Lee,mal@uni.edu,,\nParticipant 89,欧阳娜娜,oy@uni.edu,,\n")
    table = list(csv.reader(open(export(out, fmt="moodle", roster_path=roster).output, encoding="utf-8")))
    assert table[0] == ["Email address", "Full name", "01-a"]
    assert table[1:] == [["mal@uni.edu", "Mary Ann Lee", "5"], ["oy@uni.edu", "欧阳娜娜", "5"]]


def test_moodle_says_what_an_empty_cell_does_and_can_leave_ungraded_learners_out(tmp_path):
    out = tmp_path / "out"
    save(out, result("Jane Smith", "31", cells=CELLS), result("John Doe", "32"))   # John waits for a hand grade
    roster = write(tmp_path / "moodle.csv", "First name,Last name,ID number,Email address\n"
                                            "Jane,Smith,S1,jane@uni.edu\nJohn,Doe,S2,john@uni.edu\nAmy,Wu,S3,amy@uni.edu\n")
    report = export(out, fmt="moodle", roster_path=roster)
    assert any("clears a grade already entered in Moodle" in w and "--omit-ungraded" in w for w in report.warnings)
    emails = [row[0] for row in list(csv.reader(open(report.output, encoding="utf-8")))[1:]]
    assert emails == ["jane@uni.edu", "john@uni.edu", "amy@uni.edu"]
    report = export(out, fmt="moodle", roster_path=roster, omit_ungraded=True)
    table = list(csv.reader(open(report.output, encoding="utf-8")))
    assert [row[0] for row in table[1:]] == ["jane@uni.edu"], "waiting for a hand grade and missing are left out"
    assert all(row[3] for row in table[1:]) and any("left out of the file" in w for w in report.warnings)
    assert (report.rows, report.omitted) == (1, 2), "the rows in the file, not the roster's"
    assert f"wrote 1 rows to {report.output}:" in report.lines()[1] and "grade left empty" not in report.lines()[1]
    canvas = export(out, fmt="canvas", roster_path=roster, omit_ungraded=True)
    assert len(rows(canvas.output)) - 1 == canvas.rows == 1, "Canvas' Points Possible row is not a learner's"


def test_name_matching_reports_ambiguity(tmp_path):
    out = tmp_path / "out"
    save(out, result("Kim Park", cells={**CELLS, "nb:manual_essay": 1.0}))
    roster = write(tmp_path / "r.csv", "student,lms_id\nKim  Park,1\nkim park,2\n")
    report = export(out, roster_path=roster)
    assert report.unmatched and "ambiguous" in report.unmatched[0][1]
    assert len(rows(report.output)) == 2, "both roster entries still get their row"


def test_plain_export_has_parts_in_notebook_order_status_late_days_and_penalty(tmp_path):
    out = tmp_path / "out"
    save(out, result("ann", "1", cells={**CELLS, "nb:manual_essay": 5.0}, submitted_at="2025-03-04T00:00:00+00:00"),
         result("bob", "2", cells={**CELLS, "nb:manual_essay": 5.0}, submitted_at="2025-03-01T00:00:00+00:00"))
    roster = write(tmp_path / "r.csv", "student,lms_id\nann,1\nbob,2\ncid,3\n")
    report = export(out, roster_path=roster, late_policy="per-day:10,grace:2", due="2025-03-01T12:00")
    table = rows(report.output)
    assert list(table[0]) == ["student", "lms_id", "01-a", "nb:q_intro", "nb:test_b", "nb:manual_essay", "nb:test_a",
                              "status", "submitted_at", "late_days", "penalty"]
    ann, bob, cid = table
    assert (ann["01-a"], ann["late_days"], ann["penalty"], ann["status"]) == ("7", "3", "3", "graded, 3 days late")
    assert (bob["01-a"], bob["late_days"], bob["penalty"]) == ("10", "0", "0")
    assert (cid["01-a"], cid["status"]) == ("", "missing")


# --- feedback ---------------------------------------------------------------------------------------


def test_feedback_never_shows_the_graders_paths(tmp_path):
    import tempfile

    from autograder.core.files import REPO_ROOT

    leak = (f'Traceback: File "{tempfile.gettempdir()}/autograder-abc/runs/00003/fixture/k.py", line 4\n'
            f"  {REPO_ROOT}/course_runtime/testing.py:120 in check_close\n  cwd /home/learner/data.txt")
    cell = RunCell(kind=TEST, key="test_x", cell_type="code", source="x = 1", shown="x = 1", points=1.0,
                   origin="course")
    page = render_feedback(student="ann", assignment="01-a", notebook="fixture", cells=[cell],
                           outcomes=[CellOutcome("error", leak, [{"kind": "stderr", "text": leak}])],
                           scores={"test_x": 0.0}, notes=[f"repaired {REPO_ROOT}/solutions/x"], hidden=[])
    for path in (tempfile.gettempdir() + "/", str(REPO_ROOT), "/home/learner"):
        assert path not in page
    assert "fixture.ipynb" in page
    assert scrub_paths("see /usr/share/doc and 3/tmp", "nb") == "see /usr/share/doc and 3/tmp"


# --- the whole class, end to end --------------------------------------------------------------------


FIXTURE = Path(__file__).parent / "fixtures" / "course"
GOOD_SCALE = "def scale(scores, d_k):\n    return scores / d_k ** 0.5"


def make_class(course: Path, subs: Path, count: int, due: float) -> None:
    """A Canvas export of ``count`` submissions: honest, partial, blank, late (by time and mark)."""
    solution = (course / "solutions" / "00-fixture" / "fixture.ipynb").read_text(encoding="utf-8")
    blank = (course / "exercises" / "00-fixture" / "fixture.ipynb").read_text(encoding="utf-8")
    nb = json.loads(solution)
    for cell in nb["cells"]:
        if cell.get("id") == "scale":
            cell["source"] = "def scale(scores, d_k):\n    return scores"
    partial = json.dumps(nb)
    subs.mkdir(parents=True)
    for i in range(count):
        kind = ["honest", "partial", "blank", "late"][i % 4]
        text = {"honest": solution, "partial": partial, "blank": blank, "late": solution}[kind]
        late = "LATE_" if kind == "late" else ""
        file = subs / f"learner{i:03d}_{late}{1000 + i}_{9000 + i}_fixture.ipynb"
        file.write_text(text, encoding="utf-8")
        stamp = due + (30 * 3600 if kind == "late" else -3600)  # 30 h late: 2 started days after 2 h grace
        os.utime(file, (stamp, stamp))


@pytest.mark.slow
def test_an_instructor_grades_a_class_and_gets_a_file_canvas_imports(tmp_path):
    from autograder.course.release import generate

    full = os.environ.get("FULL_CLASS") == "1"
    count, roster_size = (300, 300) if full else (40, 300)
    course = tmp_path / "course"
    shutil.copytree(FIXTURE, course)
    generate(root=course)
    due = 1_741_000_000.0  # 2025-03-03T11:06:40Z
    subs, out = tmp_path / "canvas-export", tmp_path / "grading"
    make_class(course, subs, count, due)
    roster = tmp_path / "gradebook.csv"
    lines = ["Student,ID,SIS User ID,SIS Login ID,Section,00-fixture (4711)", "    Points Possible,,,,,3"]
    lines += [f"\"{i:03d}, learner\",{1000 + i},S{i},l{i},A" for i in range(roster_size)]
    write(roster, "\n".join(lines) + "\n")
    scores = manual(tmp_path, "learner002,00-fixture,test_scale,1,blank but explained the idea in class\n"
                              "learner001 #1001,00-fixture,fixture:test_scale,0.5,close\n")
    args = ["--root", str(course), "grade", str(subs), "--assignment", "00-fixture", "--out", str(out),
            "--jobs", "2", "--no-progress", "--timeout", "30", "--manual-scores", str(scores)]
    start = time.perf_counter()
    assert main(args) == 0
    seconds = time.perf_counter() - start
    print(f"graded {count} submissions with --jobs 2 in {seconds:.1f} s")
    due_text = "2025-03-03T11:06:40+00:00"
    export_args = ["export", "--out", str(out), "--format", "canvas", "--roster", str(roster), "--manual-scores",
                   str(scores), "--late-policy", "per-day:10,grace:2", "--due", due_text]
    assert main(["--root", str(course), *export_args]) == 0
    table = list(csv.reader(open(out / "export-canvas.csv", encoding="utf-8")))
    assert table[0][-1] == "00-fixture (4711)" and table[1][0] == "Points Possible"
    grades = {row[1]: row[5] for row in table[2:]}
    assert len(grades) == roster_size, "every roster learner has a row"
    assert grades["1000"] == "3" and grades["1001"] == "2.5" and grades["1002"] == "1"
    assert grades["1003"] == "2.4", "30 h late, 2 h grace, 10 %/day: 2 days, 0.6 of 3 points off"
    assert all(grades[str(1000 + i)] == "" for i in range(count, roster_size)), "no submission: blank"
    csv_rows = {r["student"]: r for r in rows(out / "grades.csv")}
    assert csv_rows["learner003"]["late"] == "yes" and csv_rows["learner002"]["fixture:test_scale"] == "1"
    # a second grading run resumes every submission and keeps the manual scores
    feedback = out / "feedback" / url_safe_name("learner002 #1002") / "00-fixture" / "fixture.html"
    assert "blank but explained" in feedback.read_text(encoding="utf-8")
    assert main(args) == 0
    assert {r["student"]: r["score"] for r in rows(out / "grades.csv")}["learner002"] == "1"
    assert "blank but explained" in feedback.read_text(encoding="utf-8")

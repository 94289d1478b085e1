"""Feedback pages rendered from their records (issues 28, 29, 30): the same page whatever happened to the
folder before, in the notebook's language, with the hand scores and the late standing of now.

No kernel runs here: the records are built from real assignments rebuilt on their plans, with verdicts
made up the way the referee reports them.
"""

import html
import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.core.outcomes import CellOutcome
from autograder.core.results import GradeResult, Status, load_results, result_path, write_atomically
from autograder.engine.shards import failed, summary_table
from autograder.engine.feedback import course_text, page_record, status_record
from autograder.engine.pages import Lateness, load_record, render_page, save_record
from autograder.engine.plan import MANUAL, TASK, TEST, assemble, load_plan
from autograder.instructor.after_grading import publish
from autograder.instructor.late_policy import (lateness, parse_due, parse_late_policy, save_deadline, save_late_policy,
                                               saved_lateness)
from autograder.instructor.manual import ManualScore
from course_runtime.language import notebook_language, translate_message

ASSIGNMENT = "02-self-attention"
NOTEBOOK = "self_attention"
# Names a Chinese page keeps in English: the tools and formats it names, and the time zone.
PROPER_NAMES = {"Jupyter", "Colab", "File", "Download", "ipynb", "PDF", "zip", "UTC", "NaN", "internal", "error",
                "the", "kernel", "did", "not", "start"}


def graded_record(edition: str, *, failing: bool = True) -> tuple[dict, GradeResult]:
    """The record and result of ``edition``'s released notebook (``exercises`` or ``zh/exercises``) as
    graded: every test failing with a message in the notebook's language (or passing), written answers
    waiting for a hand grade."""
    plan = load_plan(ASSIGNMENT, REPO_ROOT)
    nb_plan = plan.notebooks[NOTEBOOK]
    learner = read_notebook(REPO_ROOT / edition / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    language = notebook_language(learner)
    assembly = assemble(nb_plan, learner)
    outcomes, scores, cells, maxima = [], {}, {}, {}
    for cell in assembly.cells:
        if cell.kind == TEST:
            message = "`weights` is not correct." if failing else ""
            outcomes.append(CellOutcome("error", translate_message(message, language))
                            if failing else CellOutcome("ok"))
            scores[cell.key] = 0.0 if failing else cell.points
        elif cell.kind in (MANUAL, TASK):
            outcomes.append(None)
            scores[cell.key] = None
        else:
            outcomes.append(CellOutcome("ok") if cell.cell_type == "code" else None)
            continue
        cells[f"{NOTEBOOK}:{cell.key}"], maxima[f"{NOTEBOOK}:{cell.key}"] = scores[cell.key], cell.points
    record = page_record(student="张三 #42", assignment=ASSIGNMENT, notebook=NOTEBOOK, cells=assembly.cells,
                         outcomes=outcomes, scores=scores, notes=assembly.notes + [
                             f"You did not submit {NOTEBOOK}.ipynb; the blank release was graded."],
                         hidden=nb_plan.hidden_lines, attempt=f"{NOTEBOOK}-2.ipynb (submitted 2025-03-15 08:00:00 UTC)",
                         other_attempts=[f"{NOTEBOOK}.ipynb (submitted 2025-03-14 08:00:00 UTC)"], language=language,
                         course_text=course_text(ASSIGNMENT, NOTEBOOK, language))
    result = GradeResult("张三", ASSIGNMENT, "graded", score=sum(v for v in cells.values() if v is not None),
                         max_score=sum(maxima.values()), cells=cells, cell_max_scores=maxima, kind=Status.GRADED,
                         lms_id="42", late=True, submitted_at="2025-03-15T08:00:00+00:00")
    return record, result


def english_words(page: str, record: dict) -> list[str]:
    """The English words a reader sees on ``page`` outside code, the learner's own text, the course's
    cells (checked apart) and names (the learner's, the assignment's, the cells' grade ids)."""
    text = page
    for cell in record["cells"]:
        if cell["type"] != "code":
            text = text.replace(cell["body"], " ")
    text = re.sub(r"<(style|title|pre|code|math)\b.*?</\1>", " ", text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"`[^`]*`", " ", html.unescape(text))           # code quoted in a message
    names = [record["assignment"], record["notebook"], record["student"]] + [c["key"] for c in record["cells"] if c["key"]]
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    return [w for w in re.findall(r"[A-Za-z]{2,}", text) if w not in PROPER_NAMES]


def hand_score(points: float, key: str, autograded=None) -> ManualScore:
    return ManualScore("张三 #42", ASSIGNMENT, key, points, "论证清楚", 2, autograded, 2.0)


def test_a_chinese_notebooks_page_is_chinese_from_header_to_cells():
    record, result = graded_record("zh/exercises")
    assert record["language"] == "zh_CN"
    manual = [c["key"] for c in record["cells"] if c["kind"] in (MANUAL, TASK)]
    tests = [c["key"] for c in record["cells"] if c["kind"] == TEST]
    assert tests, "the assignment has tests"
    standings = [None, Lateness(marked=True), Lateness(seconds_late=93_600, marked=True, due="2025-03-14T06:00:00+00:00"),
                 lateness(parse_late_policy("per-day:10,grace:2"), parse_due("2025-03-14T06:00"))(result),
                 lateness(parse_late_policy("zero"), None)(result)]
    hand = {f"{NOTEBOOK}:{tests[0]}": hand_score(1.0, tests[0], autograded=0.0)}
    hand.update({f"{NOTEBOOK}:{key}": hand_score(2.0, key) for key in manual[:1]})
    for late in standings:
        for scores in ({}, hand):
            merged = GradeResult(**{**asdict(result), "cells": {**result.cells, **{k: s.points for k, s in scores.items()}}})
            merged.score = sum(v for v in merged.cells.values() if v is not None)
            page = render_page(record, merged, automatic=result.score, manual=scores, late=late)
            assert "<html lang='zh-CN'>" in page
            assert not english_words(page, record), english_words(page, record)
    # the course's own cells are the Chinese edition's, and the verdicts stay as the kernel translated them
    chinese = course_text(ASSIGNMENT, NOTEBOOK, "zh_CN")
    course = [c for c in record["cells"] if c["type"] != "code" and c["whose"] == "course"]
    assert course and all(re.search(r"[\u4e00-\u9fff]", c["body"]) for c in course), "course cells in Chinese"
    assert len(chinese) >= len(course)
    page = render_page(record, result, automatic=result.score)
    assert html.escape(translate_message("`weights` is not correct.", "zh_CN")) in page
    assert "is not correct" not in page


def test_a_not_graded_page_of_a_chinese_notebook_is_chinese():
    for kind in (Status.UNREADABLE, Status.WRONG_NOTEBOOK, Status.NO_NOTEBOOK, Status.GRADER_FAILED):
        record = status_record(student="李四", assignment=ASSIGNMENT, language="zh_CN",
                               status=f"wrong notebook: it belongs to 04-multi-head-attention, not {ASSIGNMENT}",
                               attempt="x.ipynb (submitted 2025-03-15 08:00:00 UTC)",
                               other_attempts=["y.ipynb (submitted 2025-03-14 08:00:00 UTC)"])
        page = render_page(record, GradeResult("李四", ASSIGNMENT, record["why"], kind=kind))
        text = html.unescape(re.sub(r"<(style|title|code)\b.*?</\1>|<[^>]+>", " ", page, flags=re.S))
        words = [w for w in re.findall(r"[A-Za-z]{2,}", text.replace(ASSIGNMENT, "").replace("04-multi-head-attention", ""))
                 if w not in PROPER_NAMES]
        assert "<html lang='zh-CN'>" in page and not words, (kind, words)


def test_an_english_notebooks_page_stays_english():
    record, result = graded_record("exercises")
    page = render_page(record, result, automatic=result.score, late=Lateness(marked=True))
    assert record["language"] == "en" and "<html lang='en'>" in page
    assert "waiting for your instructor" in page and "marked this submission late" in page
    assert "`weights` is not correct." in html.unescape(page)


@pytest.mark.parametrize("late, says", [
    (Lateness(marked=True), ["submitted late", "not set the late policy yet"]),
    (Lateness(seconds_late=93_600.0, due="2025-03-14T06:00:00+00:00"), ["submitted 1 day 2 hours after the deadline"]),
    (Lateness(seconds_late=600.0), ["submitted 10 minutes after the deadline"]),
    (Lateness(days=2, penalty=0.6, policy="per-day", percent=10, grace_hours=2, due="2025-03-14T06:00:00+00:00"),
     ["submitted 2 days late", "0.6 points off", "10 % of the maximum off per started day late after 2 hours of grace"]),
    (Lateness(), ["submitted 2025-03-15 08:00:00 UTC"]),
])
def test_the_page_says_how_late_before_any_late_policy_is_set(late, says):
    record, result = graded_record("exercises", failing=False)
    header = render_page(record, result, late=late).split("</div>")[0]
    for words in says:
        assert words in header, (words, header)
    if late.policy:
        final = result.score - late.penalty
        assert f"<b>{final:g}</b> of {result.max_score:g}" in header


def test_the_late_standing_without_a_policy_comes_from_the_lms_mark_and_the_deadline():
    _, result = graded_record("exercises")
    unset = lateness(None, parse_due("2025-03-14T06:00"))(result)
    assert (unset.policy, unset.days, unset.penalty, unset.marked) == ("", 0, 0.0, True)
    assert unset.seconds_late == 26 * 3600, "2025-03-15 08:00 is 26 h after 2025-03-14 06:00"
    assert lateness(None, None)(result).seconds_late is None


def save(out: Path, record: dict, result: GradeResult) -> str:
    page = f"feedback/{result.learner}/{result.assignment}/{NOTEBOOK}.html"
    result.feedback = [page]
    save_record(out, page, record)
    write_atomically(out / page, render_page(record, result, automatic=result.score).encode("utf-8"))
    write_atomically(result_path(out, result.learner, result.assignment), json.dumps(asdict(result)).encode("utf-8"))
    return page


def test_publishing_renders_pages_from_their_records_whatever_the_folder_held(tmp_path):
    """A page is a function of its record and the standing: a page edited, damaged or written by an
    older run comes out the same as one rendered afresh; the hand score and the late mark are on it;
    grades.csv has the hand score; a second run writes nothing."""
    record, result = graded_record("zh/exercises")
    page = save(tmp_path, record, result)
    manual = next(c["key"] for c in record["cells"] if c["kind"] in (MANUAL, TASK))
    (tmp_path / "hand-scores.csv").write_text(f"student,assignment,grade_id,points,comment\n"
                                              f"张三 #42,{ASSIGNMENT},{NOTEBOOK}:{manual},2,论证清楚\n", encoding="utf-8")
    (tmp_path / page).write_text("<html>stale <!-- instructor-grading --> patched</html>", encoding="utf-8")
    merged = publish(tmp_path, None)
    assert merged.pages == 1
    text = (tmp_path / page).read_text(encoding="utf-8")
    assert "stale" not in text and "论证清楚" in text and "老师的评分" in text and "迟交" in text
    fresh = render_page(load_record(tmp_path, page), merged.results[0], automatic=result.score,
                        manual=merged.scores_by[(result.learner, ASSIGNMENT)],
                        late=lateness(None, None)(merged.results[0]))
    assert text == fresh
    assert "<!--" not in text, "no state kept in comments"
    csv_text = (tmp_path / "grades.csv").read_text(encoding="utf-8")
    assert f",{result.score + 2:g}," in csv_text
    assert publish(tmp_path, None).pages == 0, "nothing changed, nothing written"


def test_a_page_without_a_record_is_left_alone_and_named(tmp_path):
    """A result of an older grader (no record beside its page) still reads; its page is not patched."""
    _, result = graded_record("exercises")
    page = f"feedback/{result.learner}/{ASSIGNMENT}/{NOTEBOOK}.html"
    result.feedback = [page]
    write_atomically(tmp_path / page, b"<html>old page</html>")
    old = {k: v for k, v in asdict(result).items() if k not in ("kind", "late", "submitted_at")}
    write_atomically(result_path(tmp_path, result.learner, ASSIGNMENT), json.dumps(old).encode("utf-8"))
    merged = publish(tmp_path, None)
    assert (tmp_path / page).read_text() == "<html>old page</html>" and merged.pages == 0
    assert any("older version of the grader" in note for note in merged.notes)
    assert load_results(tmp_path)[0].graded


def test_the_summary_counts_hand_scores_and_tells_older_attempts_from_failures():
    graded = [GradeResult(f"s{i}", "a", "graded", score=float(s), max_score=10.0, kind=Status.GRADED)
              for i, s in enumerate([9, 4, 8])]
    older = GradeResult("s0", "a", "an older attempt, not graded: ...", kind=Status.OLDER_ATTEMPT, files=["nb-1.ipynb"])
    oldest = GradeResult("s0", "a", "an older attempt, not graded: ...", kind=Status.OLDER_ATTEMPT, files=["nb.ipynb"])
    broken = GradeResult("s3", "a", "unreadable notebook x.ipynb: cut off", kind=Status.UNREADABLE)
    table = summary_table(graded + [older, oldest, broken])
    assert "s0 / a: nb-1.ipynb: an older attempt" in table and "s0 / a: nb.ipynb: an older" in table, \
        "each older attempt's line names its own file (the status names only the newest)"
    assert re.search(r"a\s+3\s+1\s+2\s+7\.00", table)
    table = summary_table(graded + [older, broken])
    assert "7.00 / 10" in table, "the mean of the scores given (with the hand scores merged in)"
    assert re.search(r"a\s+3\s+1\s+1\s+7\.00", table)
    failures, superseded = table.split("older attempts, superseded")
    assert "s3 / a" in failures and "s0 / a" not in failures and "s0 / a" in superseded
    assert failed(graded + [older]) == [] and failed(graded + [older, broken]) == [broken]


def test_the_deadline_grade_saved_serves_every_page_until_a_policy_and_the_policys_after(tmp_path):
    _, result = graded_record("exercises")                   # submitted 2025-03-15 08:00 UTC, marked late
    assert saved_lateness(tmp_path)(result) == Lateness(marked=True)
    save_deadline(tmp_path, "2025-03-14T07:30")
    assert saved_lateness(tmp_path)(result).seconds_late == 24.5 * 3600
    save_late_policy(tmp_path, "per-day:10", None)
    standing = saved_lateness(tmp_path)(result)
    assert (standing.policy, standing.days, standing.due) == ("per-day", 2, "2025-03-14T07:30:00+00:00"), "24.5 h: 2 started days"
    with pytest.raises(Exception, match="not an ISO date-time"):
        save_deadline(tmp_path, "next friday")

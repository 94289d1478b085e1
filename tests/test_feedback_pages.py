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
from autograder.engine.pages import Lateness, load_record, render_page, save_record, words
from autograder.engine.cells import same_code
from autograder.engine.plan import HIDDEN_NOTE, MANUAL, TASK, TEST, assemble, load_plan, strip_hidden_region
from autograder.instructor.after_grading import publish
from autograder.instructor.late_policy import (lateness, parse_due, parse_late_policy, save_deadline, save_late_policy,
                                               saved_lateness)
from autograder.instructor.manual import ManualScore
from course_runtime.language import notebook_language, translate, translate_message

ASSIGNMENT = "02-self-attention"
NOTEBOOK = "self_attention"
# Names a Chinese page keeps in English: the tools and formats it names, and the time zone.
PROPER_NAMES = {"Jupyter", "Colab", "File", "Download", "ipynb", "PDF", "zip", "UTC", "NaN"}


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


def test_a_chinese_page_shows_its_test_cells_in_chinese_and_never_a_hidden_line():
    """What a Chinese notebook's page shows of a test cell is the Chinese edition's visible part, the note of the
    hidden tests where they ran, in Chinese (issue 29: a reader saw the English note on a Chinese page); the English
    page shows the English one. No hidden line reaches either page."""
    nb_plan = load_plan(ASSIGNMENT, REPO_ROOT).notebooks[NOTEBOOK]
    hidden = {c.key: strip_hidden_region(c.source)[1] for c in nb_plan.cells if c.kind == TEST}
    released = {c.key: c.released for c in nb_plan.cells if c.kind == TEST}
    assert any(hidden.values()), "the assignment has hidden tests"
    secret = [line for line in nb_plan.hidden_lines if line not in "\n".join(released.values())]   # not also visible
    assert secret
    pages = {edition: graded_record(edition)[0] for edition in ("exercises", "zh/exercises")}
    notes = {"exercises": HIDDEN_NOTE, "zh/exercises": translate(HIDDEN_NOTE, "messages", "zh_CN")}
    assert re.fullmatch(r"# [^A-Za-z]*[\u4e00-\u9fff][^A-Za-z]*", notes["zh/exercises"]), notes["zh/exercises"]
    translated = 0
    for edition, record in pages.items():
        shown = {c["key"]: c["body"] for c in record["cells"] if c["kind"] == TEST}
        assert shown.keys() == hidden.keys()
        for key, body in shown.items():
            assert (notes[edition] in body) == hidden[key] and (edition == "exercises" or HIDDEN_NOTE not in body)
            assert not any(line in body for line in secret)
            visible = "\n".join(line for line in body.split("\n") if line.strip() != notes[edition])
            if edition == "exercises":
                assert visible == released[key]
            else:
                assert same_code(visible, released[key]), f"{key}: the code shown is the test's, comments aside"
                translated += visible != released[key] and bool(re.search(r"#[^\n]*[\u4e00-\u9fff]", visible))
        page = render_page(record, GradeResult("张三", ASSIGNMENT, "graded", kind=Status.GRADED), automatic=0.0)
        assert not any(html.escape(line) in page for line in secret)
    assert translated == sum(1 for text in released.values() if "#" in text) > 3, "every commented test in Chinese"


@pytest.mark.parametrize("edition", ["exercises", "zh/exercises"])
def test_nbgraders_own_feedback_notes_the_hidden_tests_in_the_notebooks_language(edition):
    """The same note where an instructor runs nbgrader's ``generate_feedback`` (``HideHiddenTests``): a Chinese
    notebook's in Chinese, an English one's in English; nothing of the hidden region is left."""
    import copy

    from autograder.course.nbgrader_config import HideHiddenTests

    nb_plan = load_plan(ASSIGNMENT, REPO_ROOT).notebooks[NOTEBOOK]
    graded = copy.deepcopy(read_notebook(REPO_ROOT / edition / ASSIGNMENT / f"{NOTEBOOK}.ipynb"))
    instructor = {c.key: c.source for c in nb_plan.cells if c.kind == TEST}
    tests = [cell for cell in graded.cells if (cell.metadata.get("nbgrader") or {}).get("grade_id") in instructor]
    for cell in tests:                                     # nbgrader's autograded copy holds the hidden tests
        cell.source = instructor[cell.metadata["nbgrader"]["grade_id"]]
    shown, _ = HideHiddenTests().preprocess(graded, {})
    note = HIDDEN_NOTE if edition == "exercises" else translate(HIDDEN_NOTE, "messages", "zh_CN")
    assert note != HIDDEN_NOTE or edition == "exercises"
    sources = "\n".join(cell.source for cell in shown.cells if any(cell is test for test in tests))
    assert sources.count(note) == sum(strip_hidden_region(s)[1] for s in instructor.values()) > 0
    visible = "\n".join(strip_hidden_region(source)[0] for source in instructor.values())
    assert not any(line in sources for line in nb_plan.hidden_lines if line not in visible)
    assert edition == "exercises" or HIDDEN_NOTE not in sources


@pytest.mark.parametrize("edition", ["exercises", "zh/exercises"])
def test_a_course_cell_left_alone_is_labelled_the_courses_in_either_edition(edition):
    """The setup cell and the imports of a Chinese notebook (its own setup line, Chinese comments) are the
    course's on its page, as the English ones are on an English page; a cell the learner changed is theirs."""
    from autograder.engine.grade_one import _course_sources

    nb_plan = load_plan(ASSIGNMENT, REPO_ROOT).notebooks[NOTEBOOK]
    learner = read_notebook(REPO_ROOT / edition / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    imports = next(c for c in learner.cells if c.cell_type == "code" and "import torch" in c.source
                   and not c.metadata.get("nbgrader"))

    def labels() -> dict[str, str]:
        assembly = assemble(nb_plan, learner)
        record = page_record(student="张三", assignment=ASSIGNMENT, notebook=NOTEBOOK, cells=assembly.cells,
                             outcomes=[None] * len(assembly.cells), scores={}, notes=[], hidden=[],
                             course_sources=_course_sources(nb_plan, assembly))
        return {c["key"]: c["whose"] for c in record["cells"] if c["kind"] == "free" and c["type"] == "code"}

    assert labels() and set(labels().values()) == {"course"}, labels()
    imports.source += "\nimport os"
    assert labels()[imports.id] == "edited"


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


def not_graded_reasons(tmp_path: Path) -> list[tuple[str, Status]]:
    """Every kind of reason the grader gives for not grading a submission, each made by the code that
    gives it: submissions that cannot be told apart or read (``collect_submissions``), an older attempt,
    a second submission and an assignment that cannot be prepared (the batch), an unreadable or wrong
    notebook (``grade_one``), a kernel that did not start or was stopped (``runner``, ``relay``) and the
    grader's own failures; with details (a log, an exception's text) that hold markup."""
    import os
    import signal

    import nbformat

    from autograder.engine import batch, grade_one, relay, stop_reasons
    from autograder.engine.referee import RefereeError
    from autograder.engine.submissions import ALL, Catalogue, Submission, collect_submissions, newest_attempts_first

    folder = tmp_path / "submissions"
    for name in ("alice", "bob", "erin"):
        (folder / name).mkdir(parents=True)
    (folder / "alice" / "notes.txt").write_text("x")
    (folder / "carol.ipynb").write_text("{not json <b>")
    blank = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("hi")])
    for path in (folder / "dave.ipynb", folder / "erin" / "a.ipynb", folder / "erin" / "b.ipynb"):
        nbformat.write(blank, path)
    (folder / "frank_123_456_essay.pdf").write_text("x")
    (folder / "frank_123_457_notes.txt").write_text("x")                # two uploads of different kinds
    os.symlink(folder / "alice" / "notes.txt", folder / "alice" / "more.txt")
    os.symlink(folder / "dave.ipynb", folder / "link.ipynb")
    chinese = REPO_ROOT / "zh" / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for name in (f"hank_7_1_{NOTEBOOK}.ipynb", f"hank_7_2_{NOTEBOOK}-1.ipynb"):
        (folder / name).write_bytes(chinese.read_bytes())
    found = newest_attempts_first(collect_submissions(folder, ALL))
    other = tmp_path / "other" / "gina"
    other.mkdir(parents=True)
    for name in ("x.ipynb", "y.ipynb"):
        nbformat.write(blank, other / name)
    found += collect_submissions(other.parent, ASSIGNMENT)
    found += [Submission("ivy", "99-no-such-assignment", {NOTEBOOK: chinese}, chinese)]
    plans = batch._plans(found, REPO_ROOT)
    graded = [s for s in found if s.assignment == ASSIGNMENT and not s.problem]
    graded.append(Submission(graded[0].student, ASSIGNMENT, {NOTEBOOK: chinese}, chinese, lms_id=graded[0].lms_id))
    batch._triage(graded, {ASSIGNMENT: load_plan(ASSIGNMENT, REPO_ROOT), **plans}, tmp_path / "out", False)
    reasons = [(s.problem or plans[s.assignment], s.problem_kind) for s in found + graded if s.problem
               or isinstance(plans.get(s.assignment), str)]
    reasons.append((f"could not be read: PermissionError: [Errno 13] Permission denied: '{folder}/<b>'",
                    Status.NOT_GRADED))                           # the words of collect_submissions' last resort
    catalogue = Catalogue(REPO_ROOT)
    ids = {name: catalogue.grade_ids(name) for name in catalogue.notebooks}
    other_assignment = read_notebook(REPO_ROOT / "zh" / "exercises" / "04-multi-head-attention" / "multi_head_attention.ipynb")
    plan = load_plan(ASSIGNMENT, REPO_ROOT)
    reasons += [(grade_one._wrong_notebook(plan, [other_assignment], ids, matched=0), Status.WRONG_NOTEBOOK),
                (grade_one._wrong_notebook(plan, [blank], ids, matched=0), Status.WRONG_NOTEBOOK)]
    with pytest.raises(grade_one._NotGraded) as unreadable:
        grade_one._read_submitted(Submission("ivy", ASSIGNMENT, {NOTEBOOK: folder / "carol.ipynb"}, folder))
    reasons.append((unreadable.value.status, unreadable.value.kind))
    stopped = [stop_reasons.exited(-signal.SIGKILL), stop_reasons.exited(-signal.SIGUSR2), stop_reasons.exited(3),
               stop_reasons.out_of_memory(2048), stop_reasons.too_much_output(64, 20_000), stop_reasons.relay_ended(2048),
               stop_reasons.not_interruptible(stop_reasons.THE_CELL, 10.0), relay.refusal_reason("frames", 5_007),
               stop_reasons.NOT_RUNNING, stop_reasons.UNRESPONSIVE]
    failed = [stop_reasons.did_not_start("RuntimeError: Kernel died before replying to kernel_info",
                                         "sandbox: unshare(CLONE_NEWUSER) failed <script>alert(1)</script>"),
              stop_reasons.did_not_start("TimeoutError: the kernel did not answer in 60 s"),
              stop_reasons.agent_failed("ModuleNotFoundError: No module named 'course_runtime'"),
              stop_reasons.internal_error(str(RefereeError("the referee process stopped unexpectedly"))),
              stop_reasons.internal_error("ForkServerLost: the grader's fork server stopped while the kernel ran")]
    return (reasons + [(why, Status.NOT_GRADED) for why in stopped]
            + [(why, Status.GRADER_FAILED) for why in failed])


def test_every_reason_for_not_grading_reads_in_chinese_with_its_details_quoted(tmp_path):
    """A Chinese learner's not-graded page says why in Chinese for every reason the grader gives, and
    what the reason carries in English (an exception's text, the kernel's log, a file name) is quoted
    apart, escaped, never set inside the Chinese sentence (issue 29: the page showed "the kernel did not
    start (...)" and "internal error: ..." in English). The English page shows the reason as written."""
    reasons = not_graded_reasons(tmp_path)
    made = {kind for _, kind in reasons}
    assert made >= {Status.NO_NOTEBOOK, Status.UNREADABLE, Status.NOT_GRADED, Status.SYMBOLIC_LINK,
                    Status.OLDER_ATTEMPT, Status.WRONG_NOTEBOOK, Status.GRADER_FAILED}, made
    starts = ("no notebooks found", "unreadable notebook", "cannot tell which assignment this", "the upload frank",
              "cannot tell which assignment these", "a symbolic link", "an older attempt", "no notebook of",
              "another submission", "the assignment could not be prepared", "could not be read", "wrong notebook: it",
              "wrong notebook: none", "the kernel stopped:", "the kernel exited", "the kernel was stopped", "the cell ran",
              "the kernel is not running", "the kernel stopped responding", "the kernel did not start (the grading",
              "the kernel did not start (R", "the kernel did not start (T", "internal error")
    assert all(any(why.startswith(start) for why, _ in reasons) for start in starts), [why for why, _ in reasons]
    details, unknown, shown = [], words("zh_CN", "grader_words", why=""), {}
    for why, kind in reasons + [("a reason no catalogue knows <i>", Status.NOT_GRADED)]:
        record = status_record(student="李四", assignment=ASSIGNMENT, language="zh_CN", status=why,
                               attempt="x.ipynb (submitted 2025-03-15 08:00:00 UTC)")
        page = render_page(record, GradeResult("李四", ASSIGNMENT, record["why"], kind=kind))
        said = re.search(r"<p>原因：(.*?)</p>", page, flags=re.S)
        assert said, page
        shown[why] = said[1]
        quoted = re.findall(r"<code>(.*?)</code>", said[1], flags=re.S)
        sentence = html.unescape(re.sub(r"<code>.*?</code>", " ", said[1], flags=re.S))
        if why.startswith("a reason no catalogue knows"):      # quoted whole, after words that say whose
            assert said[1] == words("zh_CN", "grader_words", why=f"<code>{html.escape(why)}</code>"), said[1]
            continue
        assert re.search(r"[\u4e00-\u9fff]", sentence) and unknown not in said[1], (why, sentence)
        left = [w for w in re.findall(r"[A-Za-z]{2,}", sentence.replace(ASSIGNMENT, " ")) if w not in KEPT_IN_REASONS]
        assert not left, (why, sentence, left)
        assert "<script>" not in page and "<b>" not in said[1], why
        details += [html.unescape(q) for q in quoted]
        english = render_page({**record, "language": "en"}, GradeResult("李四", ASSIGNMENT, record["why"], kind=kind))
        assert f"Why: {html.escape(record['why'])}" in english, why
    # what the reasons carry is quoted whole: a log, an exception's text, file names, what was found
    for detail in ("sandbox: unshare(CLONE_NEWUSER) failed <script>alert(1)</script>",
                   "RuntimeError: Kernel died before replying to kernel_info",
                   "ModuleNotFoundError: No module named 'course_runtime'", "the referee process stopped unexpectedly",
                   "a.ipynb", "b.ipynb", "notes.txt", "more.txt", "frank_123_456_essay.pdf", "frank_123_457_notes.txt",
                   "carol.ipynb", "SIGUSR2", "04-multi-head-attention"):
        assert detail in details, (detail, details)
    # lists are joined the Chinese way, each item said in Chinese: an empty folder, several kinds of upload
    # (issue 29: "（找到的是 nothing）", "而是 a PDF; a text file")
    assert "没有找到笔记本，也没有任何其他文件" in shown.values(), shown
    assert any("<code>more.txt</code>（符号链接，没有读取它指向的文件）、<code>notes.txt</code>" in said for said in shown.values()), shown
    upload = next(said for why, said in shown.items() if why.startswith("the upload frank"))
    assert "而是一个 PDF 文件；一个文本文件：" in upload and "、" in upload, upload


# Latin a Chinese reason keeps: units, signal names, file formats.
KEPT_IN_REASONS = {"MiB", "CPU", "JSON", "PDF", "SIGKILL", "exit", "sys", "os", "ipynb"}


def cell_reasons() -> dict[str, tuple[CellOutcome, str | None]]:
    """Every kind of reason a test cell ends with, as the grader words it (the referee's verdict, then
    :func:`autograder.engine.disclosure.shown_test_reason`), with the detail it quotes that no catalogue
    translates (a Python exception's own message, a hidden check's hint) or None."""
    import torch

    from autograder.core.outcomes import Failure, Verdict
    from autograder.engine import stop_reasons
    from autograder.engine.disclosure import shown_test_reason
    from course_runtime import testing
    from course_runtime.errors import shortcut_message

    with pytest.raises(AssertionError) as check:
        testing.check_close(torch.zeros(2, 3), torch.ones(2, 3), name="weights",
                             hint="divide the scores by sqrt(d_k) before the softmax.")
    message, _, hint = str(check.value).partition("\nHint: ")
    verdicts = {
        "visible, with a hint": (Verdict(Failure.VISIBLE, "AssertionError", message, hint=hint), False, None),
        "an error of the learner's code": (Verdict(Failure.VISIBLE, "NameError", "name 'softmx' is not defined"),
                                           False, "name 'softmx' is not defined"),
        "a forbidden call": (Verdict(Failure.VISIBLE, "ShortcutError", shortcut_message("torch.softmax")), False, None),
        "a time-out": (Verdict(Failure.KERNEL, message=stop_reasons.code_interrupted(10.0),
                               words=stop_reasons.code_too_slow(10.0)), True, None),
        "a hidden test raised": (Verdict(Failure.HIDDEN_RAISED, "Leak_0_8125"), True, None),
        "a hidden check failed": (Verdict(Failure.HIDDEN_CHECK, "", words="`weights` is not correct",
                                          hint="each row must sum to 1"), True, "each row must sum to 1"),
        "a hidden check raised": (Verdict(Failure.HIDDEN_CHECK, "KeyError", words="`scores` is not correct"), True, None),
        "a hidden forbidden call": (Verdict(Failure.HIDDEN_SHORTCUT), True, None),
        "visible, after a hidden part": (Verdict(Failure.VISIBLE, "AssertionError", message,
                                                 words="`weights` is not correct."), True, None),
        "the kernel, after a hidden part": (Verdict(Failure.KERNEL, message="the kernel was stopped: leak"), True, None),
    }
    return {kind: (CellOutcome("error", shown_test_reason(verdict, after_hidden=after), verdict=verdict), detail)
            for kind, (verdict, after, detail) in verdicts.items()} | {"passed": (CellOutcome("ok"), None)}


def test_every_kind_of_cell_reason_reads_in_chinese_with_its_details_quoted():
    """On a Chinese notebook's graded page, every kind of reason a cell ends with (a test passed, failed
    with a hint, stopped by the learner's own error, timed out, refused a forbidden call, failed in a
    hidden part; a learner's own cell that raised or timed out) is a Chinese sentence, and what it quotes
    that no catalogue knows (Python's own message, a hidden check's hint) is shown apart as code, as on
    the not-graded page, word for word as on the English page (issue 29: the hidden parts' verdicts and
    "its message is not shown" were English, and `weights` became `注意力权重`)."""
    from autograder.engine import stop_reasons
    from autograder.engine.grade_one import in_learners_language

    plan = load_plan(ASSIGNMENT, REPO_ROOT)
    nb_plan = plan.notebooks[NOTEBOOK]
    for edition in ("zh/exercises", "exercises"):
        learner = read_notebook(REPO_ROOT / edition / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
        language = notebook_language(learner)
        assembly = assemble(nb_plan, learner)
        answers = [i for i, cell in enumerate(assembly.cells) if cell.kind == "solution"]
        for kind, (outcome, detail) in cell_reasons().items():
            outcomes = [CellOutcome("ok") if cell.cell_type == "code" else None for cell in assembly.cells]
            outcomes = [outcome if cell.kind == TEST else o for cell, o in zip(assembly.cells, outcomes)]
            outcomes[answers[0]] = CellOutcome("error", "NameError: name 'softmx' is not defined", exception="NameError")
            outcomes[answers[1]] = CellOutcome("timeout", stop_reasons.interrupted(30.0))
            outcomes = in_learners_language(assembly.cells, outcomes, learner)
            scores = {c.key: 0.0 for c in assembly.cells if c.kind == TEST}
            record = page_record(student="张三", assignment=ASSIGNMENT, notebook=NOTEBOOK, cells=assembly.cells,
                                 outcomes=outcomes, scores=scores, notes=[], hidden=nb_plan.hidden_lines,
                                 language=language, course_text=course_text(ASSIGNMENT, NOTEBOOK, language))
            result = GradeResult("张三", ASSIGNMENT, "graded", score=0.0, max_score=8.0, kind=Status.GRADED,
                                 cells={f"{NOTEBOOK}:{k}": v for k, v in scores.items()})
            page = render_page(record, result, automatic=0.0)
            rows = re.findall(r"<td class='(?:pass|fail)'>(.*?)</td></tr>", page, flags=re.S)
            ended = re.findall(r"<pre class='out err'>(.*?)</pre>", page, flags=re.S)
            assert len(rows) == len(scores) and len(set(rows)) == 1 and len(ended) == 2, (kind, rows, ended)
            shown = rows + ended
            if language == "en":
                assert detail is None or html.escape(detail) in rows[0], (kind, rows[0])
                assert html.escape("NameError: name 'softmx' is not defined") in ended[0]
                continue
            for said in shown:
                quoted = [html.unescape(q) for q in re.findall(r"<code>(.*?)</code>", said, flags=re.S)]
                sentence = html.unescape(re.sub(r"<code>.*?</code>", " ", said, flags=re.S))
                # English words in a row (a sentence left untranslated); a name (softmax, NameError) may stay
                left = re.findall(r"[A-Za-z]{2,}(?:[ ,'-]+[A-Za-z]{2,})+", re.sub(r"`[^`]*`", " ", sentence))
                assert re.search(r"[\u4e00-\u9fff]", sentence) and not left, (kind, said, left)
                assert "）（" not in sentence and "`注意力" not in sentence, (kind, said)
                assert all(re.search(r"[A-Za-z]", q) for q in quoted), (kind, said)
            assert detail is None or detail in html.unescape(rows[0]).replace("<code>", "").replace("</code>", ""), kind
            assert detail is None or f"<code>{html.escape(detail)}</code>" in rows[0], (kind, rows[0])
            assert "NameError: <code>name &#x27;softmx&#x27; is not defined</code>" in ended[0], ended[0]


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
    assert "stale" not in text and "论证清楚" in text and "老师的批改" in text and "迟交" in text
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

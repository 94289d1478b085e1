"""Feedback pages, rendered from what the learner's result is now, in the learner's language.

A page is a pure function (:func:`render_page`) of four things: the page's record (what grading saw
and may show, cleaned once by :func:`autograder.engine.feedback.page_record` and saved beside the
results), the learner's result with the hand scores merged in, the late standing (:class:`Lateness`)
and the notebook's language, which the record holds. :func:`write_feedback_pages` renders every page
of a folder again from these and writes the pages that changed: nothing is ever patched in place, so
a learner whose submission is resumed, not graded again, still sees a new hand score or a late
penalty. A page graded by a version of the grader that kept no record is left as it was.

Every fixed string of a page is English in the code and translated through ``course_runtime``'s
``messages`` catalogue (``course_runtime/locales/zh_CN/LC_MESSAGES/messages.po``); the tests' verdicts
arrive already translated (:func:`autograder.engine.grade_one.in_learners_language`) and are shown as
they are.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping

from autograder.core.results import GradeResult, Status, write_atomically
from autograder.core.safe_output import page_head
from course_runtime.language import ENGLISH, catalogue, template_parts, translate

RECORDS = "page-records"            # <out>/page-records/<learner>/<assignment>/<page>.json
RECORD_FORMAT = 1
NOT_GRADED_PAGE = "not graded"
GRADED_PAGE = "graded"
# Everything a page says, in English: the catalogue's msgids (``i18n update`` reads them from here), by key.
_TEXT = {
    "advice_unreadable": "the file is not a notebook Jupyter can open (it may be cut off or saved by another "
                         "program). Open it in Jupyter or Colab; if it does not open, download your notebook "
                         "again (File > Download > .ipynb) and submit that file.",
    "advice_wrong": "you submitted the notebook of another assignment. Submit this assignment's notebook.",
    "advice_none": "submit this assignment's .ipynb file itself (not a PDF, a link or a zip of it).",
    "advice_older": "nothing: your newest attempt is the one graded.",
    "advice_link": "submit the notebook file itself.",
    "advice_ask": "if the reason is about your notebook (it used too much memory, time or output, or stopped the "
                  "kernel), fix that and submit again; otherwise ask your instructor.",
    "advice_grader": "nothing: this is about the grader, not your work, and your submission is graded again on the "
                     "next run. Ask your instructor if this page stays.",
    "ended_error": "raised an error", "ended_timeout": "ran out of time", "ended_stopped": "stopped the kernel",
    "ended_not_run": "was not run", "ended_other": "failed to run",
    "whose_test": "test (the course's)", "whose_answer": "your answer", "whose_manual": "your answer (graded by hand)",
    "whose_task": "task (graded by hand)", "whose_course": "course cell", "whose_own": "your own cell",
    "whose_edited": "course cell, edited by you",
    "blank": " (blank: your notebook had no usable version of this cell)",
    "day": "{n} day", "days": "{n} days", "hour": "{n} hour", "hours": "{n} hours", "minute": "{n} minute",
    "minutes": "{n} minutes",
    "late_unset": "submitted {duration} after the deadline ({when}); your instructor has not set the late policy "
                  "yet, so what it costs is still open",
    "late_marked": "submitted late: the course's learning platform marked this submission late ({when}); your "
                   "instructor has not set the late policy yet, so what it costs is still open",
    "submitted": "submitted {when}", "on_time": "submitted {when}, on time",
    "rule_none": "no penalty", "rule_zero": "a late submission scores 0",
    "rule_per_day": "{percent} % of the maximum off per started day late", "rule_grace": " after {hours} hours of grace",
    "rule_due": "; due {due}", "point_off": "{n} point off", "points_off": "{n} points off", "no_points_off": "no points off",
    "late_day": "submitted {n} day late", "late_days": "submitted {n} days late",
    "late_line": "{line} ({when}): {cost} (late policy: {rule})",
    "changed": "autograder: {automatic}; after your instructor's grading: {score}",
    "autograder_waiting": "autograder: {automatic}", "autograder": "autograder: {automatic} (no hand-graded changes)",
    "wait_up": "{n} part still waits for your instructor: the grade can still go up",
    "waits_up": "{n} parts still wait for your instructor: the grade can still go up",
    "grade_so_far": "Your grade for {assignment}: {final} of {maximum} points so far",
    "grade": "Your grade for {assignment}: {final} of {maximum} points",
    "waiting": "waiting for your instructor", "graded_by_hand": "graded by your instructor",
    "failed": "failed: {reason}", "not_run": "the test was not run", "passed": "test passed",
    "overridden": "changed by the instructor (the autograder gave {points})",
    "instructor": "Your instructor's grading", "cell": "graded cell", "points": "points earned",
    "what": "what the instructor did", "comment": "instructor's comment", "verdict": "how it went",
    "score_after": "Your score for {assignment} after your instructor's grading: {score} of {maximum} points.",
    "wait": "{n} part still waits for your instructor.", "waits": "{n} parts still wait for your instructor.",
    "other_attempts": "Your other attempts, not graded (the newest attempt counts): {files}.",
    "own_run": "output from your own run (saved in the notebook you submitted)",
    "own_figure": "a figure from your own run",
    "not_shown": "its message is not shown: a test had already called your code with its own inputs, and what your "
                 "code prints or raises after that could carry them",
    "ended": "when graded, this cell {ended}: {why}",
    "feedback": "Feedback for {student}: the autograder gave {earned} of {available} points in this notebook.",
    "attempt": "{files} (submitted {when})", "graded_file": "Graded: {file}.", "changes": "What the grader changed", "as_graded": "Your notebook as graded",
    "not_graded_title": "{assignment}: not graded", "your_submission": "Your submission",
    "not_graded": "Feedback for {student}: your submission could not be graded.", "file": "File: {file}.",
    "why": "Why: {why}", "advice": "What to do: {advice}", "grader_words": "the grader said (in English): {why}",
}
# What a learner whose submission could not be graded should do, by what became of it.
_RESUBMIT = {Status.UNREADABLE: "advice_unreadable", Status.WRONG_NOTEBOOK: "advice_wrong",
             Status.NO_NOTEBOOK: "advice_none", Status.OLDER_ATTEMPT: "advice_older",
             Status.SYMBOLIC_LINK: "advice_link", Status.GRADER_FAILED: "advice_grader"}
_ENDED = {"error": "ended_error", "timeout": "ended_timeout", "stopped": "ended_stopped", "not run": "ended_not_run"}
_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}
.pass{color:#176f2c}.fail{color:#b00020}.wait{color:#555;font-style:italic}.cell{border:1px solid #ddd;border-radius:4px;margin:1rem 0}
.head{background:#f4f4f4;padding:.3rem .6rem;font-size:.9rem}pre{margin:0;padding:.5rem .6rem;
white-space:pre-wrap;word-break:break-word;font-size:.85rem}.out{border-top:1px dashed #ddd;background:#fcfcfc}
.err{background:#fff3f3}.md{padding:.5rem .6rem}.own{font-size:.8rem;color:#555;padding:.2rem .6rem;
border-top:1px dashed #ddd}.grade{border:2px solid #176f2c;border-radius:6px;padding:.4rem 1rem;margin:1rem 0}
.final{font-size:1.2rem;margin:.3rem 0}.out img{max-width:100%}
"""


@dataclass(frozen=True)
class Lateness:
    """A submission's late standing, as its page tells it.

    Attributes:
        days: started days late under the late policy (0: on time, or no policy set yet).
        penalty: the points the policy takes off.
        policy: ``"none"``, ``"zero"`` or ``"per-day"``; "" while no late policy is set (the page
            then says the submission was late, and by how much when the deadline is known, and that
            the instructor has not decided what it costs).
        percent, grace_hours: a per-day policy's rate and grace.
        due: the deadline, ISO 8601, or "" when only the LMS's mark is known.
        seconds_late: from the deadline (with its grace) to the submission, when both are known and
            it is late; else None.
        marked: whether the LMS marked the submission late.
    """

    days: int = 0
    penalty: float = 0.0
    policy: str = ""
    percent: float = 0.0
    grace_hours: float = 0.0
    due: str = ""
    seconds_late: float | None = None
    marked: bool = False


def words(language: str, key: str, **values) -> str:
    """What the page says under ``key`` (:data:`_TEXT`) in ``language``, with ``values`` filled into its
    ``{placeholders}`` (already HTML where the page needs it)."""
    english = _TEXT[key]
    template = english if language == ENGLISH else translate(english, "messages", language)
    return template.format(**values)


def _plural(language: str, count: float, one: str, many: str, **values) -> str:
    return words(language, one if count == 1 else many, n=f"{count:g}", **values)


def record_path(out_dir: Path | str, page: str) -> Path:
    """Where the record of the page ``feedback/<learner>/<assignment>/<name>.html`` lives."""
    relative = Path(page).relative_to("feedback").with_suffix(".json")
    return Path(out_dir) / RECORDS / relative


def load_record(out_dir: Path | str, page: str) -> dict | None:
    """The saved record of ``page``, or None (a page of an older grader, or no record readable)."""
    try:
        record = json.loads(record_path(out_dir, page).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("format") == RECORD_FORMAT else None


def save_record(out_dir: Path | str, page: str, record: dict) -> None:
    """Save ``record`` as the record of ``page`` (atomically)."""
    write_atomically(record_path(out_dir, page), json.dumps(record, ensure_ascii=False).encode("utf-8"))


def _when(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return iso


def _duration(language: str, seconds: float) -> str:
    """``seconds`` as days, hours and minutes (the largest two that are not zero)."""
    minutes = max(1, round(seconds / 60))
    parts = [(minutes // 1440, "day", "days"), (minutes // 60 % 24, "hour", "hours"),
             (minutes % 60, "minute", "minutes")]
    shown = [_plural(language, n, one, many) for n, one, many in parts if n][:2]
    return " ".join(shown)


def _late_line(language: str, late: Lateness, submitted_at: str) -> str:
    """The grade header's line about when the work came in ("" when nothing is known)."""
    esc = html.escape
    when = esc(_when(submitted_at)) if submitted_at else ""
    if not late.policy:
        if late.seconds_late:
            return words(language, "late_unset",
                         duration=_duration(language, late.seconds_late), when=when or "?")
        if late.marked:
            return words(language, "late_marked", when=when or "?")
        return words(language, "submitted", when=when) if when else ""
    if not late.days:
        return words(language, "on_time", when=when) if when else ""
    rule = {"none": words(language, "rule_none"), "zero": words(language, "rule_zero")}.get(
        late.policy, words(language, "rule_per_day", percent=f"{late.percent:g}")
        + (words(language, "rule_grace", hours=f"{late.grace_hours:g}") if late.grace_hours else ""))
    if late.due:
        rule += words(language, "rule_due", due=esc(_when(late.due)))
    cost = (_plural(language, late.penalty, "point_off", "points_off") if late.penalty
            else words(language, "no_points_off"))
    line = _plural(language, late.days, "late_day", "late_days")
    return words(language, "late_line", line=line, when=when or "?", cost=cost, rule=rule)


def grade_header(language: str, result: GradeResult, automatic: float | None, late: Lateness | None) -> str:
    """The grade at the top of a page: the grade the learner gets (after hand grading and the late
    penalty), then how it came about (autograder, instructor, lateness)."""
    esc = html.escape
    if result.score is None or result.max_score is None:
        return ""
    late = late or Lateness(marked=result.late)
    waiting = sum(v is None for v in result.cells.values())
    final = max(0.0, result.score - late.penalty)
    lines = []
    if automatic is not None and automatic != result.score:
        lines.append(words(language, "changed",
                           automatic=f"{automatic:g}", score=f"{result.score:g}"))
    elif automatic is not None:
        lines.append(words(language, "autograder_waiting" if waiting else "autograder", automatic=f"{automatic:g}"))
    if waiting:
        lines.append(_plural(language, waiting, "wait_up", "waits_up"))
    late_line = _late_line(language, late, result.submitted_at)
    if late_line:
        lines.append(late_line)
    title = words(language, "grade_so_far" if waiting else "grade",
                  assignment=esc(result.assignment), final=f"<b>{final:g}</b>", maximum=f"{result.max_score:g}")
    return (f"<div class='grade'><p class='final'>{title}</p>"
            + ("<ul>" + "".join(f"<li>{line}</li>" for line in lines) + "</ul>" if lines else "") + "</div>")


def _hand_state(language: str, points: float | None, max_points: float) -> tuple[str, str, str]:
    """A cell graded by hand as the page shows it: (points text, css class, words). Waiting is neutral
    (grey), never green: "? / 2" in green read as done."""
    if points is None:
        return f"? / {max_points:g}", "wait", words(language, "waiting")
    return f"{points:g} / {max_points:g}", "pass", words(language, "graded_by_hand")


def _verdict(language: str, cell: dict, points: float | None) -> tuple[str, str]:
    """(css class, HTML) of a graded cell: a test's verdict, or a hand-graded cell's state."""
    esc = html.escape
    if cell["kind"] in ("manual", "task"):
        if cell["failed"] is not None:
            return "fail", esc(words(language, "graded_by_hand"))
        _, css, text = _hand_state(language, points, 0)
        return css, esc(text)
    if cell["failed"] is not None:
        reason = _said_html(language, cell["failed"]) if cell["failed"] else esc(words(language, "not_run"))
        return "fail", words(language, "failed", reason=reason)
    return "pass", esc(words(language, "passed"))


# English left in a text shown on a page in another language (a Python exception's own message, a hint
# of a hidden check, code named in a sentence): two words or more, from a letter (or the dot of a method)
# up to a Chinese character, full-width punctuation, a backtick or a line's end.
_ENGLISH_RUN = re.compile(r"(?:\.(?=[A-Za-z_])|[A-Za-z_])[^\u3000-\u303f\u4e00-\u9fff\uff00-\uffef`\n]*")


def _said_html(language: str, text: str) -> str:
    """A test's reason as HTML, already in ``language`` (the grader translated it): in English as it is;
    in another language each run of English left in it (what no catalogue translates: an exception's
    own message, a hidden check's hint) quoted apart as code, as on the not-graded page, never set
    inside the sentence as if it were part of it. Text in backticks is the message's own code."""
    esc = html.escape
    if language == ENGLISH:
        return esc(text)
    out = []
    for piece in re.split(r"(`[^`\n]*`)", text):
        if piece.startswith("`"):
            out.append(esc(piece))
            continue
        position = 0
        for match in _ENGLISH_RUN.finditer(piece):
            name = re.match(r"[A-Za-z_][\w.]*: ", match.group(0))       # an exception's class stays in front
            start = match.start() + (len(name.group(0)) if name else 0)
            run = piece[start:match.end()].rstrip(" ")
            if len(re.findall(r"[A-Za-z]{2,}", run)) < 2:       # a name, a unit, an exception's class
                continue
            out.append(esc(piece[position:start]) + f"<code>{esc(run)}</code>")
            position = start + len(run)
        out.append(esc(piece[position:]))
    return "".join(out)


def instructor_section(language: str, result: GradeResult, manual: Mapping, notebook: str) -> str:
    """The instructor's grading of ``notebook``'s cells (filled in, or changed from the autograder's)
    and the assignment's score after it; "" when the learner has no hand score in the assignment.

    ``manual``: ``"<notebook>:<grade_id>"`` -> a hand score with ``points``, ``max_points``,
    ``comment`` and ``autograded`` (None for a cell left to a human), as
    :class:`autograder.instructor.manual.ManualScore`.
    """
    if not manual:
        return ""
    esc = html.escape
    rows = []
    for key, score in manual.items():
        if key.split(":", 1)[0] != notebook:
            continue
        what = (words(language, "overridden", points=f"{score.autograded:g}") if score.autograded is not None
                else words(language, "graded_by_hand"))
        cell = esc(key.split(":", 1)[1])
        rows.append(f"<tr><td><a href='#{cell}'>{cell}</a></td><td>{score.points:g} / {score.max_points:g}</td>"
                    f"<td>{what}</td><td>{esc(score.comment)}</td></tr>")
    parts = ["<h2>" + words(language, "instructor") + "</h2>"]
    if rows:
        parts.append(f"<table><tr><th>{words(language, 'cell')}</th><th>{words(language, 'points')}</th>"
                     f"<th>{words(language, 'what')}</th><th>{words(language, 'comment')}</th></tr>"
                     + "".join(rows) + "</table>")
    waiting = sum(v is None for v in result.cells.values())
    score = words(language, "score_after",
                  assignment=esc(result.assignment), score=f"<b>{result.score:g}</b>", maximum=f"{result.max_score:g}")
    if waiting:
        score += " " + _plural(language, waiting, "wait", "waits")
    return "".join(parts) + f"<p>{score}</p>"


_ATTEMPT = re.compile(r"(?P<files>.*) \(submitted (?P<when>[^()]*)\)")


def _attempt(language: str, described: str) -> str:
    """An attempt as :meth:`autograder.engine.submissions.Submission.described` wrote it, in ``language``."""
    match = _ATTEMPT.fullmatch(described)
    return words(language, "attempt", files=match["files"], when=match["when"]) if match else described


def _attempts(language: str, record: dict) -> str:
    esc = html.escape
    files = ", ".join(f"<code>{esc(_attempt(language, a))}</code>" for a in record["other_attempts"])
    return words(language, "other_attempts",
                 files=files) if files else ""


def _cell_html(language: str, cell: dict, points: float | None) -> str:
    esc = html.escape
    key = cell["key"]
    anchor = f" id='{esc(key)}'" if key and cell["kind"] != "free" else ""
    head = esc(words(language, "whose_" + cell["whose"])) + (f" <code>{esc(key)}</code>" if anchor else "")
    if cell["blank"]:
        head += words(language, "blank")
    if cell["kind"] in ("test", "manual", "task"):
        css, said = _verdict(language, cell, points)
        head += f" &mdash; <span class='{css}'>{said}</span>"
    if cell["type"] != "code":
        return f"<div class='cell'{anchor}><div class='head'>{head}</div><div class='md'>{cell['body']}</div></div>"
    parts = [f"<div class='cell'{anchor}><div class='head'>{head}</div><pre>{esc(cell['body'])}</pre>"]
    if cell["own"]:
        parts.append(f"<div class='own'>{words(language, 'own_run')}</div>")
    for output in cell["own"]:
        if output["kind"] == "png":
            alt = esc(words(language, "own_figure"), quote=True)
            parts.append(f"<div class='out'><img alt='{alt}' src='{output['src']}'></div>")
        else:
            css = "out err" if output["kind"] in ("stderr", "error") else "out"
            parts.append(f"<pre class='{css}'>{esc(output['text'])}</pre>")
    if cell["ended"] is not None:
        ended = cell["ended"]
        # the grader's words (a time-out, a stopped kernel) in the page's language; an exception's own
        # message, which no catalogue knows, quoted as code after its class
        why = (_reason_html(language, ended["why"], unknown=lambda text: _said_html(language, text))
               if ended["why"] is not None else esc(words(language, "not_shown")))
        how = esc(words(language, _ENDED.get(ended["status"], "ended_other")))
        parts.append("<pre class='out err'>" + words(language, "ended", ended=how, why=why) + "</pre>")
    return "".join(parts) + "</div>"


def _graded_page(record: dict, result: GradeResult, automatic: float | None, manual: Mapping,
                 late: Lateness | None) -> str:
    esc, language, notebook = html.escape, record["language"], record["notebook"]
    points = {cell["key"]: result.cells.get(f"{notebook}:{cell['key']}", record["scores"].get(cell["key"]))
              for cell in record["cells"] if cell["kind"] in ("test", "manual", "task")}
    graded = [cell for cell in record["cells"] if cell["kind"] in ("test", "manual", "task")]
    earned = sum(v for v in record["scores"].values() if v is not None)
    available = sum(cell["points"] for cell in graded)
    parts = [page_head(f"{record['assignment']}: {notebook}", _STYLE, images=True, lang=language),
             f"<h1>{esc(record['assignment'])} / {esc(notebook)}</h1>",
             grade_header(language, result, automatic, late),
             "<p>" + words(language, "feedback", student=f"<b>{esc(record['student'])}</b>",
                           earned=f"<b>{earned:g}</b>", available=f"{available:g}") + "</p>"]
    if record["attempt"]:
        attempt = esc(_attempt(language, record["attempt"]))
        parts.append("<p>" + " ".join(filter(None, [words(language, "graded_file", file=f"<code>{attempt}</code>"),
                                                    _attempts(language, record)])) + "</p>")
    parts.append(f"<table><tr><th>{words(language, 'cell')}</th><th>{words(language, 'points')}</th>"
                 f"<th>{words(language, 'verdict')}</th></tr>")
    for cell in graded:
        key, score = cell["key"], points[cell["key"]]
        css, said = _verdict(language, cell, score)
        shown = (_hand_state(language, score, cell["points"])[0] if cell["kind"] in ("manual", "task")
                 else f"{'?' if score is None else f'{score:g}'} / {cell['points']:g}")
        parts.append(f"<tr><td><a href='#{esc(key)}'>{esc(key)}</a></td><td>{shown}</td>"
                     f"<td class='{css}'>{said}</td></tr>")
    parts.append("</table>" + instructor_section(language, result, manual, notebook))
    if record["notes"]:
        parts.append(f"<h2>{words(language, 'changes')}</h2><ul>"
                     + "".join(f"<li>{esc(translate(n, 'messages', language))}</li>" for n in record["notes"])
                     + "</ul>")
    parts.append(f"<h2>{words(language, 'as_graded')}</h2>")
    parts += [_cell_html(language, cell, points.get(cell["key"])) for cell in record["cells"]]
    return "".join(parts) + "</body></html>\n"


def _status_page(record: dict, result: GradeResult) -> str:
    esc, language = html.escape, record["language"]
    assignment = record["assignment"]
    title = words(language, "not_graded_title", assignment=assignment or words(language, "your_submission"))
    parts = [page_head(title, _STYLE, lang=language),
             f"<h1>{esc(assignment or words(language, 'your_submission'))}</h1>",
             "<p>" + words(language, "not_graded",
                           student=f"<b>{esc(record['student'])}</b>") + "</p>"]
    if record["attempt"]:
        attempt = esc(_attempt(language, record["attempt"]))
        parts.append("<p>" + words(language, "file", file=f"<code>{attempt}</code>") + "</p>")
    if record["other_attempts"]:
        parts.append(f"<p>{_attempts(language, record)}</p>")
    advice = words(language, _RESUBMIT.get(result.kind, "advice_ask"))
    parts.append("<p>" + words(language, "why", why=_reason_html(language, record["why"])) + "</p><p>"
                 + words(language, "advice", advice=esc(advice)) + "</p>")
    return "".join(parts) + "</body></html>\n"


def _reason_html(language: str, why: str, unknown: Callable[[str], str] | None = None) -> str:
    """Why a submission was not graded, or why a cell stopped, as HTML: in English as the grader wrote it;
    in another language the catalogue's sentence, where each value that stays English (an exception's
    text, the kernel's log, a file name) is quoted apart as code, never set inside the sentence; a reason
    the catalogue does not know is given to ``unknown`` (default: quoted whole after words that say it is
    the grader's)."""
    esc = html.escape
    if language == ENGLISH:
        return esc(why)
    table = catalogue("messages", language)

    def sentence(text: str) -> str | None:
        reading = table.reading(text)
        if reading is None:
            return None
        template, english = reading
        return "".join(esc(piece) if name is None else value(english[name]) for piece, name in template_parts(template))

    def value(text: str) -> str:
        if not re.search("[A-Za-z]", text):          # numbers, sizes: part of the sentence
            return esc(text)
        return sentence(text.strip()) or f"<code>{esc(text.strip())}</code>"

    if unknown is None:
        return sentence(why) or words(language, "grader_words", why=f"<code>{esc(why)}</code>")
    return sentence(why) or unknown(why)


def render_page(record: dict, result: GradeResult, *, automatic: float | None = None, manual: Mapping | None = None,
                late: Lateness | None = None) -> str:
    """One feedback page, from its record and the learner's standing now.

    Args:
        record: the page's record (:func:`autograder.engine.feedback.page_record`, or
            :func:`autograder.engine.feedback.status_record` for a submission that was not graded).
        result: the learner's result, with the hand scores merged in.
        automatic: the autograder's score of the assignment (before hand grading); None to leave it out.
        manual: the learner's hand scores, ``"<notebook>:<grade_id>"`` -> score (see :func:`instructor_section`).
        late: the late standing; None: only what the LMS marked (:attr:`GradeResult.late`).
    """
    if record["page"] == NOT_GRADED_PAGE:
        return _status_page(record, result)
    return _graded_page(record, result, automatic, manual or {}, late)


def write_feedback_pages(out_dir: Path | str, results: list[GradeResult], *, automatic: Mapping | None = None,
                         manual: Mapping | None = None,
                         late: Callable[[GradeResult], Lateness] | None = None) -> tuple[int, int]:
    """Render every feedback page of ``results`` again and write those that changed (atomically).

    Args:
        out_dir: the ``--out`` folder.
        results: the results with the hand scores merged in.
        automatic: ``(learner, assignment)`` -> the autograder's score.
        manual: ``(learner, assignment)`` -> that learner's hand scores (see :func:`render_page`).
        late: ``result -> Lateness``; None: the LMS's marks only.

    Returns:
        ``(pages written, pages left as they were because an older grader kept no record of them)``.
    """
    automatic, manual = automatic or {}, manual or {}
    written = legacy = 0
    for result in results:
        pair = (result.learner, result.assignment)
        standing = late(result) if late is not None and result.graded else None
        for page in result.feedback:
            record = load_record(out_dir, page)
            if record is None:
                legacy += 1
                continue
            text = render_page(record, result, automatic=automatic.get(pair), manual=manual.get(pair, {}),
                               late=standing).encode("utf-8")
            path = Path(out_dir) / page
            try:
                if path.read_bytes() == text:
                    continue
            except OSError:
                pass
            write_atomically(path, text)
            written += 1
    return written, legacy

"""What a learner's feedback page may show, built from verdicts: what failed and why, never the hidden tests.

:func:`page_record` keeps, per graded notebook, what its page shows: the graded cells with the
referee's reason for each failure, what the grader repaired in the notebook, and every cell: the
learner's own cells with their text output, test cells with their visible part only and no output (a
test runs in the referee, and whatever the learner's code printed while a test called it is not
kept). Any line that quotes hidden test code, whatever its spacing, is redacted as well. File paths of
the grader's own (its temporary folders, the repository, the Python environment, the sandbox's home)
are replaced by the notebook's name (:func:`scrub_paths`). Only text outputs and PNG images are kept:
HTML and JavaScript from learner code could carry scripts into the instructor's browser or
hidden-test text past the redaction. :mod:`autograder.engine.pages` renders the page from the record,
the learner's standing (hand scores, lateness) and language; every page carries a
Content-Security-Policy that allows no script at all (:func:`autograder.core.safe_output.page_head`).

:class:`autograder.course.nbgrader_config.HideHiddenTests` is the same filter as an nbconvert preprocessor, for instructors who run
nbgrader's own ``generate_feedback`` with :mod:`autograder.course.nbgrader_config`.
"""

from __future__ import annotations

import html
import os
import re
import sys
import tempfile
import unicodedata
from collections import deque
from functools import lru_cache
from pathlib import Path

from autograder.core.files import REPO_ROOT
from autograder.core.outcomes import CellOutcome
from autograder.core.results import GradeResult, Status
from autograder.core.safe_output import safe_mathml
from autograder.engine.pages import GRADED_PAGE, NOT_GRADED_PAGE, RECORD_FORMAT, render_page
from autograder.engine.plan import (HIDDEN_NOTE, LOCKED, MANUAL, SOLUTION, TASK, TEST, RunCell, edition_view,
                                    strip_hidden_region)
from autograder.engine.sandbox import LEARNER_HOME
from course_runtime.language import ENGLISH, translate

__all__ = ["HIDDEN_NOTE", "page_record", "redact", "render_feedback", "scrub_paths", "status_record",
           "strip_hidden_region", "submitted_outputs"]

REDACTED = "[a line of hidden test code was removed here]"
MAX_OUTPUT_CHARS = 20_000
MAX_IMAGE_CHARS = 4 * 1024 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
def _squeezed(text: str) -> str:
    """``text`` in compatibility form without whitespace or invisible characters (for comparing)."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(c for c in text if not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf", "Co", "Cn"))


def redact(text: str, hidden: list[str]) -> str:
    """``text`` without ANSI colour codes and with every line that quotes hidden test code replaced,
    also when the quote's spaces or invisible characters were changed.

    Hidden test code never reaches the learner's kernel (the referee runs it), so nothing the kernel
    prints can quote it; this is a second line of defence for the grader's own messages.
    """
    text = _ANSI.sub("", text)
    needles = _needles(tuple(hidden))
    if not needles or not _quotes(_squeezed(text), needles):      # one pass when nothing is quoted
        return text
    lines = text.split("\n")
    return "\n".join(REDACTED if _quotes(_squeezed(line), needles) else line for line in lines)


@lru_cache(maxsize=8)
def _needles(hidden: tuple[str, ...]) -> tuple[str, ...]:
    """The hidden test lines as :func:`redact` looks for them (squeezed; 8 characters or more), once per
    notebook rather than once per text."""
    return tuple(dict.fromkeys(n for n in map(_squeezed, hidden) if len(n) >= 8))


def _quotes(squeezed: str, needles: tuple[str, ...]) -> bool:
    return any(n in squeezed for n in needles)


@lru_cache(maxsize=1)
def _grader_folders() -> tuple[str, ...]:
    """The grader's own folders, longest first: the repository, the Python environment, the
    temporary folder (the kernels' working folders live there) and the home folders."""
    folders = {str(REPO_ROOT), sys.prefix, sys.exec_prefix, tempfile.gettempdir(), "/tmp", "/var/tmp",
               LEARNER_HOME, os.path.expanduser("~")}
    for folder in list(folders):
        try:
            folders.add(str(Path(folder).resolve()))
        except (OSError, RuntimeError):
            pass
    return tuple(sorted((f.rstrip("/") for f in folders if len(f.rstrip("/")) > 1), key=len, reverse=True))


def scrub_paths(text: str, notebook: str) -> str:
    """``text`` with every file path inside one of the grader's own folders (the repository, its
    Python environment, temporary folders such as the kernels' working folders, the sandbox's home)
    replaced by ``<notebook>.ipynb``: the learner needs to know which notebook, not where the grader
    keeps it.

    Example:
        >>> scrub_paths('File "/tmp/autograder-x1/runs/00001/fixture/k.py", line 3', "fixture")
        'File "fixture.ipynb", line 3'
    """
    pattern = _grader_paths()
    replacement = f"{notebook}.ipynb"
    return pattern.sub(lambda _: replacement, text) if pattern is not None else text


@lru_cache(maxsize=1)
def _grader_paths() -> re.Pattern | None:
    """A path inside one of :func:`_grader_folders`, with the rest of the path up to a separator."""
    pattern = "|".join(re.escape(folder) for folder in _grader_folders())
    if not pattern:
        return None
    return re.compile(rf"(?<![\w.~/-])(?:{pattern})(?=[/\\\s'\"<>:,;()\[\]]|$)[^\s'\"<>:,;()\[\]]*")


def _clean(text: str, hidden: list[str], notebook: str) -> str:
    """Text from a run as shown to the learner: hidden test lines and the grader's paths removed."""
    return scrub_paths(redact(text, hidden), notebook)


def _markdown(text: str, *, trusted: bool) -> str:
    """Markdown as HTML, math as MathML (which browsers draw without any script: pages carry none, so
    that a page is safe to open whatever a learner wrote); math that cannot be converted stays as its
    escaped TeX source, marked ``class="math"``.

    ``trusted`` (the course's own cells): raw HTML such as ``<details>`` is kept. Otherwise (a
    learner's written answer) every tag is escaped, unsafe links (``javascript:`` ...) are dropped by
    the renderer and images become their alt text, so nothing is fetched from elsewhere.
    """
    try:
        rendered = _markdown_renderer(trusted)(text)
    except Exception:             # no mistune (nbconvert brings it), or a renderer bug: never lose the page
        return f"<pre>{html.escape(text)}</pre>"
    rendered = re.sub(r"<script\b.*?(</script\s*>|$)", "", rendered, flags=re.IGNORECASE | re.DOTALL)
    if not trusted:
        rendered = re.sub(r"<img\b[^>]*?\balt=\"([^\"]*)\"[^>]*>", r"\1", rendered)
        rendered = re.sub(r"<img\b[^>]*>", "", rendered)
    return _MATH.sub(_mathml, rendered)


# What the Markdown renderer makes of $...$ and $$...$$ (the TeX inside is HTML-escaped).
_MATH = re.compile(r"<(?P<tag>span|div) class=\"math\">(?:\\\((?P<inline>.*?)\\\)|\$\$(?P<block>.*?)\$\$)</(?P=tag)>",
                   re.DOTALL)


def _mathml(match: re.Match) -> str:
    """One formula as MathML (``latex2mathml``), reduced to allowed MathML elements and attributes
    (:func:`autograder.core.safe_output.safe_mathml`: latex2mathml copies ``\\text{...}`` raw into the markup);
    the escaped TeX when the formula uses something it does not know."""
    tex = html.unescape(match["inline"] if match["inline"] is not None else match["block"]).strip()
    try:
        from latex2mathml.converter import convert

        return safe_mathml(convert(tex, display="inline" if match["inline"] is not None else "block"))
    except Exception:              # not installed, or TeX it cannot convert: show the source
        return match.group(0)


@lru_cache(maxsize=2)
def _markdown_renderer(trusted: bool):
    import mistune

    try:
        return mistune.create_markdown(escape=not trusted, plugins=["math", "table", "strikethrough"])
    except Exception:                                              # an older mistune without these plugins
        return mistune.create_markdown(escape=not trusted)


def _png(data) -> str | None:
    """A base64 PNG from a notebook output as a data URL, or None unless it really is a PNG of
    reasonable size (a data URL of an image cannot run script)."""
    import base64
    import binascii

    text = "".join(data) if isinstance(data, list) else data
    if not isinstance(text, str) or len(text) > MAX_IMAGE_CHARS:
        return None
    try:
        raw = base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return None
    if not raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    return "data:image/png;base64," + base64.b64encode(raw).decode("ascii")


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else ""


def own_outputs(cell) -> list[dict]:
    """The outputs a learner's notebook saved for one cell (their own run, before any grading), as
    ``{"kind": "stdout"|"stderr"|"result"|"error", "text": ...}`` or ``{"kind": "png", "src": data URL}``:
    text and PNG images only, text capped at :data:`MAX_OUTPUT_CHARS` per cell."""
    shown: list[dict] = []
    budget = MAX_OUTPUT_CHARS
    outputs = cell.get("outputs") if isinstance(cell, dict) else None
    for output in outputs if isinstance(outputs, list) else []:
        if not isinstance(output, dict) or budget <= 0:
            continue
        kind = output.get("output_type")
        if kind == "stream":
            item = {"kind": "stderr" if output.get("name") == "stderr" else "stdout", "text": _joined(output.get("text"))}
        elif kind in ("execute_result", "display_data"):
            data = output.get("data") if isinstance(output.get("data"), dict) else {}
            src = _png(data.get("image/png")) if "image/png" in data else None
            if src:
                shown.append({"kind": "png", "src": src})
                continue
            item = {"kind": "result", "text": _joined(data.get("text/plain"))}
        elif kind == "error":
            item = {"kind": "error", "text": f"{_joined(output.get('ename'))}: {_joined(output.get('evalue'))}"}
        else:
            continue
        if item["text"]:
            item["text"] = item["text"][:budget]
            budget -= len(item["text"])
            shown.append(item)
    return shown


def submitted_outputs(learner, cells: list[RunCell]) -> list[list[dict] | None]:
    """For each cell that was run, the outputs the learner's own notebook saved for it (see
    :func:`own_outputs`), or None where nothing of theirs corresponds (test cells never get any).

    Course cells and solution cells are found by grade id, then by cell id; the learner's extra
    cells by their source, in order.
    """
    learner_cells = [c for c in (getattr(learner, "cells", None) or []) if isinstance(c, dict)]
    by_key: dict[str, dict] = {}
    for c in learner_cells:
        meta = c.get("metadata") if isinstance(c.get("metadata"), dict) else {}
        grade_id = meta.get("nbgrader", {}).get("grade_id") if isinstance(meta.get("nbgrader"), dict) else None
        for key in (grade_id, c.get("id")):
            if isinstance(key, str):
                by_key.setdefault(key, c)
    by_source: dict[str, deque] = {}          # the learner's code cells by source, in notebook order
    for c in learner_cells:
        if c.get("cell_type") == "code":
            by_source.setdefault(_joined(c.get("source")), deque()).append(c)
    used: set[int] = set()
    found: list[list[dict] | None] = []
    for cell in cells:
        match = None
        if cell.cell_type != "code" or cell.kind == TEST:
            found.append(None)
            continue
        if cell.key is not None:
            match = by_key.get(cell.key)
        else:
            same = by_source.get(cell.source, ())
            while same and id(same[0]) in used:
                same.popleft()
            match = same[0] if same else None
        if match is not None:
            used.add(id(match))
        found.append(own_outputs(match) if match is not None else None)
    return found


def _whose(cell: RunCell, course_sources: dict[str, str]) -> str:
    """Whose cell this is (a key of :data:`autograder.engine.pages._WHOSE`): a course cell the learner
    left alone is the course's, not theirs."""
    if cell.kind in (TEST, MANUAL, TASK):
        return {TEST: "test", MANUAL: "manual", TASK: "task"}[cell.kind]
    if cell.kind == SOLUTION:
        return "answer"
    if cell.origin != "yours":
        return "course"
    if cell.key is None:
        return "own"
    if cell.key in course_sources and course_sources[cell.key].strip() == cell.source.strip():
        return "course"
    return "edited"


def _cell_record(cell: RunCell, outcome: CellOutcome | None, own: list[dict] | None, *, hidden: list[str],
                 notebook: str, course_sources: dict[str, str], tests_ran: bool, course_text: dict[str, str]) -> dict:
    """What the page shows of one cell, cleaned (see :func:`page_record`)."""
    failed = None
    if cell.kind == TEST and (outcome is None or not outcome.ok):
        failed = _clean(outcome.reason, hidden, notebook) if outcome is not None else ""
    elif cell.kind in (MANUAL, TASK) and outcome is not None and not outcome.ok:
        failed = _clean(outcome.reason, hidden, notebook)
    if cell.cell_type != "code":
        trusted = cell.origin != "yours"
        text = course_text.get(cell.shown, cell.shown) if trusted else scrub_paths(cell.shown, notebook)
        body = _markdown(text, trusted=trusted)
    elif cell.kind in (TEST, LOCKED) and cell.origin == "course":
        body = course_text.get(cell.shown, cell.shown)
    else:
        body = cell.shown
    ended = None
    if cell.cell_type == "code" and cell.kind != TEST and outcome is not None and not outcome.ok:
        # the grader's own reasons (time-outs, a stopped kernel) are shown; an exception's text is the
        # learner's code speaking, and after a test it could carry the test's inputs
        shown = not tests_ran or outcome.status != "error"
        ended = {"status": outcome.status, "why": _clean(outcome.reason, hidden, notebook) if shown else None}
    outputs = [dict(o, text=_clean(o["text"], hidden, notebook)) if o["kind"] != "png" else o
               for o in (own or [])] if cell.cell_type == "code" and cell.kind != TEST else []
    return {"key": cell.key, "kind": cell.kind, "type": cell.cell_type, "whose": _whose(cell, course_sources),
            "blank": cell.origin == "released", "points": cell.points, "body": body, "failed": failed,
            "own": outputs, "ended": ended}


def page_record(*, student: str, assignment: str, notebook: str, cells: list[RunCell],
                outcomes: list[CellOutcome | None], scores: dict[str, float | None], notes: list[str],
                hidden: list[str], submitted: list[list[dict] | None] | None = None,
                course_sources: dict[str, str] | None = None, attempt: str = "",
                other_attempts: list[str] | tuple[str, ...] = (), language: str = ENGLISH,
                course_text: dict[str, str] | None = None) -> dict:
    """What the feedback page of one graded notebook may show, as JSON-ready data: every text already
    cleaned of hidden test lines and the grader's paths, Markdown already rendered (script-free).
    :func:`autograder.engine.pages.render_page` makes the page from it and the learner's standing.

    Nothing the learner's code printed in the grading kernel is kept: once a test has called their
    code with its (hidden) inputs, anything it prints could carry them. A code cell of theirs keeps
    the outputs their own notebook saved (``submitted``, their run before grading), and from grading
    only how it ended (an error before any test ran is quoted, one after is not); test cells keep the
    referee's verdict and message only.

    Args:
        student, assignment, notebook: who and what, for the title.
        cells: the cells that were run (see :func:`autograder.engine.plan.assemble`).
        outcomes: one per cell; None for cells that were not executed (markdown, empty).
        scores: grade id -> points the autograder gave (None: left to a human grader).
        notes: what the grader repaired in the notebook.
        hidden: the hidden test lines to redact from every output.
        submitted: one per cell, the outputs saved in the submitted notebook
            (:func:`submitted_outputs`); default: none shown.
        course_sources: grade id or cell id -> the course's source, to tell an untouched course cell
            (labelled the course's) from one the learner edited.
        attempt: which file was graded, e.g. ``"self_attention-2.ipynb (submitted 2025-03-14 ...)"``.
        other_attempts: the learner's other attempts, not graded.
        language: the notebook's language (``course_runtime.language``), which the page is written in.
        course_text: the course's Markdown cells, test and locked cells in ``language``, by their English text
            (:func:`course_text`).
    """
    submitted = submitted if submitted is not None else [None] * len(cells)
    records, tests_ran = [], False
    for cell, outcome, own in zip(cells, outcomes, submitted):
        records.append(_cell_record(cell, outcome, own, hidden=hidden, notebook=notebook,
                                    course_sources=course_sources or {}, tests_ran=tests_ran,
                                    course_text=course_text or {}))
        tests_ran = tests_ran or cell.kind == TEST
    return {"format": RECORD_FORMAT, "page": GRADED_PAGE, "language": language, "student": student,
            "assignment": assignment, "notebook": notebook, "attempt": attempt,
            "other_attempts": list(other_attempts), "notes": [scrub_paths(n, notebook) for n in notes],
            "scores": dict(scores), "cells": records}


@lru_cache(maxsize=64)
def course_text(assignment: str, notebook: str, language: str, root: Path = REPO_ROOT) -> dict[str, str]:
    """The course's Markdown cells in ``language``, by their English text (the instructor's and the
    released one): the edition's released notebook (``zh/exercises/...``) has the English release's
    cells in the same order, so they pair one to one. Its test and locked cells too, by grade id: what
    feedback shows of the instructor's cell (each hidden region replaced by :data:`HIDDEN_NOTE` in ``language``)
    in the edition's words (:func:`autograder.engine.plan.edition_view`; a cell whose code differs keeps its
    English, its note too). Empty for
    English, or where the two differ in shape (a release behind its edition)."""
    if language == ENGLISH:
        return {}
    import json

    def cells(relative: str) -> list[dict]:
        try:
            return json.loads((root / relative).read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    path = f"{assignment}/{notebook}.ipynb"
    english, edition, source = cells(f"exercises/{path}"), cells(f"zh/exercises/{path}"), cells(f"solutions/{path}")
    if not english or [c.get("cell_type") for c in english] != [c.get("cell_type") for c in edition]:
        return {}
    text = {}
    by_id = {c.get("id"): _joined(c.get("source")) for c in source if c.get("cell_type") == "markdown"}
    for released, translated in zip(english, edition):
        if released.get("cell_type") == "markdown":
            text[_joined(released.get("source"))] = _joined(translated.get("source"))
            if released.get("id") in by_id:
                text.setdefault(by_id[released.get("id")], _joined(translated.get("source")))

    def course_cells(cells: list[dict]) -> dict[str, tuple[dict, str]]:
        """The test and locked code cells, by grade id: their nbgrader metadata and source."""
        found = {}
        for cell in cells:
            meta = (cell.get("metadata") or {}).get("nbgrader") or {}
            if cell.get("cell_type") == "code" and (meta.get("grade") or meta.get("locked")) and not meta.get("solution"):
                found[str(meta.get("grade_id"))] = (meta, _joined(cell.get("source")))
        return found

    theirs, note = course_cells(edition), translate(HIDDEN_NOTE, "messages", language)
    for key, (meta, instructor) in course_cells(source).items():
        view = edition_view(instructor, theirs[key][1], note) if key in theirs else None
        if view is not None:
            text[strip_hidden_region(instructor)[0] if meta.get("grade") else instructor] = view
    return text


def status_record(*, student: str, assignment: str, status: str, attempt: str = "",
                  other_attempts: list[str] | tuple[str, ...] = (), language: str = ENGLISH) -> dict:
    """The record of the page of a submission that could not be graded: why (``status``, its paths
    scrubbed); the page adds what to submit again, by the result's kind."""
    return {"format": RECORD_FORMAT, "page": NOT_GRADED_PAGE, "language": language, "student": student,
            "assignment": assignment, "attempt": attempt, "other_attempts": list(other_attempts),
            "why": scrub_paths(status, assignment or "your")}


def render_feedback(*, student: str, assignment: str, notebook: str, cells: list[RunCell],
                    outcomes: list[CellOutcome | None], scores: dict[str, float | None], notes: list[str],
                    hidden: list[str], **details) -> str:
    """The feedback page of one graded notebook as the autograder alone left it (no hand scores, no
    late policy): :func:`page_record` rendered by :func:`autograder.engine.pages.render_page`.
    ``details`` are :func:`page_record`'s optional arguments."""
    record = page_record(student=student, assignment=assignment, notebook=notebook, cells=cells, outcomes=outcomes,
                         scores=scores, notes=notes, hidden=hidden, **details)
    earned = sum(v for v in scores.values() if v is not None)
    result = GradeResult(student, assignment, GRADED_PAGE, score=earned,
                         max_score=sum(c.points for c in cells if c.kind in (TEST, MANUAL, TASK)),
                         cells={f"{notebook}:{k}": v for k, v in scores.items()}, kind=Status.GRADED)
    return render_page(record, result, automatic=earned)

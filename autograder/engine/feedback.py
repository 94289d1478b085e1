"""Feedback for learners built from verdicts: what failed and why, never the hidden tests.

:func:`render_feedback` writes one self-contained HTML page per graded notebook: the score, a table
of the graded cells with the referee's reason for each failure, what the grader repaired in the
notebook, and every cell: the learner's own cells with their text output, test cells with their
visible part only and no output (a test runs in the referee, and whatever the learner's code
printed while a test called it is not kept). Any line that quotes hidden test code, whatever its
spacing, is redacted as well. File paths of the grader's own (its temporary folders, the repository,
the Python environment, the sandbox's home) are replaced by the notebook's name (:func:`scrub_paths`).
Only text outputs and PNG images are shown: HTML and JavaScript from learner code could carry
scripts into the instructor's browser or hidden-test text past the redaction. Every page carries a
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
from autograder.core.results import Status, load_results, write_atomically
from autograder.core.safe_output import page_head, safe_mathml
from autograder.engine.plan import HIDDEN_NOTE, MANUAL, SOLUTION, TASK, TEST, RunCell, strip_hidden_region
from autograder.engine.sandbox import LEARNER_HOME

__all__ = ["GRADE_BEGIN", "GRADE_END", "HIDDEN_NOTE", "INSTRUCTOR_BEGIN", "INSTRUCTOR_END",
           "grade_header", "redact", "render_feedback", "scrub_paths", "status_page", "strip_hidden_region",
           "submitted_outputs", "with_grade_header", "with_instructor_section"]

REDACTED = "[a line of hidden test code was removed here]"
# The instructor's grading (manual scores) is written between these markers on every run, so that
# a page need not be rendered again when only the manual scores change (see autograder.instructor.manual).
INSTRUCTOR_BEGIN = "<!-- instructor-grading -->"
INSTRUCTOR_END = "<!-- /instructor-grading -->"
# The grade the learner gets (after hand grading and the late penalty) sits at the top of every page,
# between these markers; `grade`, `merge` and `export` rewrite it (see refresh_grade_headers).
GRADE_BEGIN = "<!-- final-grade -->"
GRADE_END = "<!-- /final-grade -->"
MAX_OUTPUT_CHARS = 20_000
MAX_IMAGE_CHARS = 4 * 1024 * 1024
_ENDED = {"error": "raised an error", "timeout": "ran out of time", "stopped": "stopped the kernel",
          "not run": "was not run"}
# What a learner whose submission could not be graded should do, by what became of it.
_RESUBMIT = {
    Status.UNREADABLE: "the file is not a notebook Jupyter can open (it may be cut off or saved by another "
                           "program). Open it in Jupyter or Colab; if it does not open, download your notebook "
                           "again (File > Download > .ipynb) and submit that file.",
    Status.WRONG_NOTEBOOK: "you submitted the notebook of another assignment. Submit this assignment's notebook.",
    Status.NO_NOTEBOOK: "no notebook of this assignment was found in your submission. Submit the .ipynb file itself "
                   "(not a PDF, a link or a zip of it).",
    Status.OLDER_ATTEMPT: "nothing: your newest attempt is the one graded.",
    Status.SYMBOLIC_LINK: "submit the notebook file itself.",
}
_ASK = ("ask your instructor; this is about the grader, not your work, when the reason says \"internal error\" "
        "or \"the kernel did not start\", and it is graded again on the next run.")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
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


def _verdict(cell: RunCell, outcome: CellOutcome | None, hidden: list[str], notebook: str) -> tuple[str, str]:
    if cell.kind in (MANUAL, TASK):
        return "fail" if outcome is not None and not outcome.ok else "pass", "graded by your instructor"
    if outcome is None or not outcome.ok:
        reason = _clean(outcome.reason, hidden, notebook) if outcome is not None else "not run"
        return "fail", f"failed: {reason}"
    return "pass", "passed"


HAND_WAITING = "waiting for your instructor"
HAND_GRADED = "graded by your instructor"


def _hand_state(points: float | None, max_points: float) -> tuple[str, str, str]:
    """A cell graded by hand as the page shows it: (points text, css class, words). Waiting is neutral
    (grey), never green: "? / 2" in green read as done."""
    if points is None:
        return f"? / {max_points:g}", "wait", HAND_WAITING
    return f"{points:g} / {max_points:g}", "pass", HAND_GRADED


def _hand_row(key: str, points: float | None, max_points: float) -> str:
    esc = html.escape
    shown, css, text = _hand_state(points, max_points)
    return (f"<tr data-hand='{esc(key)}' data-max='{max_points:g}'><td><a href='#{esc(key)}'>{esc(key)}</a></td>"
            f"<td>{shown}</td><td class='{css}'>{text}</td></tr>")


def _hand_head(key: str, points: float | None) -> str:
    _, css, text = _hand_state(points, 0)
    return f"<span class='{css}' data-hand='{html.escape(key)}'>{text}</span>"


def with_hand_scores(page: str, scores: dict[str, float | None]) -> str:
    """``page`` with the cells graded by hand (grade id -> points, None: waiting) shown as they stand
    now, in the score table and at each cell: "waiting for your instructor" until graded, the score after."""
    for key, points in scores.items():
        attr = re.escape(html.escape(key))
        page = re.sub(rf"<tr data-hand='{attr}' data-max='([^']*)'>.*?</tr>",
                      lambda m: _hand_row(key, points, float(m.group(1))), page, flags=re.S)
        page = re.sub(rf"<span class='[a-z]+' data-hand='{attr}'>.*?</span>", lambda m: _hand_head(key, points),
                      page, flags=re.S)
    return page


def with_instructor_section(page: str, section: str) -> str:
    """``page`` with its instructor's-grading section replaced by ``section`` (HTML; "" for none).

    The section sits between :data:`INSTRUCTOR_BEGIN` and :data:`INSTRUCTOR_END` after the score
    table; a page written before the markers existed gets them after its first table.
    """
    block = f"{INSTRUCTOR_BEGIN}{section}{INSTRUCTOR_END}"
    start, end = page.find(INSTRUCTOR_BEGIN), page.find(INSTRUCTOR_END)
    if 0 <= start < end:
        return page[:start] + block + page[end + len(INSTRUCTOR_END):]
    anchor = page.find("</table>")
    at = anchor + len("</table>") if anchor >= 0 else max(page.rfind("</body>"), 0)
    return page[:at] + block + page[at:]


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


def _label(cell: RunCell, course_sources: dict[str, str]) -> str:
    """Whose cell this is: a course cell the learner left alone is the course's, not theirs."""
    if cell.kind == TEST:
        return "test (the course's)"
    if cell.kind == SOLUTION:
        return "your answer"
    if cell.kind == MANUAL:
        return "your answer (graded by hand)"
    if cell.kind == TASK:
        return "task"
    if cell.origin != "yours":
        return "course cell"
    if cell.key is None:
        return "your own cell"
    if cell.key in course_sources and course_sources[cell.key].strip() == cell.source.strip():
        return "course cell"
    return "course cell, edited by you"


def grade_header(*, assignment: str, automatic: float | None, score: float | None, max_score: float | None,
                 waiting: int = 0, late_days: int = 0, penalty: float = 0.0, late_rule: str = "",
                 submitted_at: str = "") -> str:
    """The grade at the top of a feedback page: the grade the learner gets (after hand grading and
    the late penalty), then how it came about (autograder, instructor, lateness)."""
    esc = html.escape
    if score is None or max_score is None:
        return ""
    final = max(0.0, score - penalty)
    lines = []
    if automatic is not None and automatic != score:
        lines.append(f"autograder: {automatic:g}; after your instructor's grading: {score:g}")
    elif automatic is not None:
        lines.append(f"autograder: {automatic:g}" + ("" if waiting else " (no hand-graded changes)"))
    if waiting:
        lines.append(f"{waiting} part{'s' if waiting != 1 else ''} still wait{'s' if waiting == 1 else ''} for "
                     "your instructor: the grade can still go up")
    if late_days:
        lines.append(f"submitted {late_days} day{'s' if late_days != 1 else ''} late"
                     + (f" ({esc(submitted_at)})" if submitted_at else "")
                     + (f": {penalty:g} point{'s' if penalty != 1 else ''} off" if penalty else ": no points off")
                     + (f" ({esc(late_rule)})" if late_rule else ""))
    elif submitted_at:
        lines.append(f"submitted {esc(submitted_at)}" + (", on time" if late_rule else ""))
    return (f"<div class='grade'><p class='final'>Your grade for {esc(assignment)}: <b>{final:g}</b> of "
            f"{max_score:g} points{' so far' if waiting else ''}</p>"
            + ("<ul>" + "".join(f"<li>{line}</li>" for line in lines) + "</ul>" if lines else "") + "</div>")


def with_grade_header(page: str, header: str) -> str:
    """``page`` with the grade at its top (between :data:`GRADE_BEGIN` and :data:`GRADE_END`) replaced."""
    start, end = page.find(GRADE_BEGIN), page.find(GRADE_END)
    if 0 <= start < end:
        return page[:start] + GRADE_BEGIN + header + page[end:]
    anchor = page.find("</h1>")
    at = anchor + len("</h1>") if anchor >= 0 else 0
    return page[:at] + GRADE_BEGIN + header + GRADE_END + page[at:]


def render_feedback(*, student: str, assignment: str, notebook: str, cells: list[RunCell],
                    outcomes: list[CellOutcome | None], scores: dict[str, float | None],
                    notes: list[str], hidden: list[str], submitted: list[list[dict] | None] | None = None,
                    course_sources: dict[str, str] | None = None, attempt: str = "",
                    other_attempts: list[str] | tuple[str, ...] = ()) -> str:
    """Return the feedback page of one graded notebook.

    Nothing the learner's code printed in the grading kernel is shown: once a test has called their
    code with its (hidden) inputs, anything it prints could carry them. A code cell of theirs shows
    the outputs their own notebook saved (``submitted``, their run before grading, labelled so), and
    from grading only how it ended (an error before any test ran is quoted, one after is not);
    test cells show the referee's verdict and message only.

    Args:
        student, assignment, notebook: who and what, for the title.
        cells: the cells that were run (see :func:`autograder.engine.plan.assemble`).
        outcomes: one per cell; None for cells that were not executed (markdown, empty).
        scores: grade id -> points given (None: left to a human grader).
        notes: what the grader repaired in the notebook.
        hidden: the hidden test lines to redact from every output.
        submitted: one per cell, the outputs saved in the submitted notebook
            (:func:`submitted_outputs`); default: none shown.
        course_sources: grade id or cell id -> the course's source, to tell an untouched course cell
            (labelled the course's) from one the learner edited.
        attempt: which file was graded, e.g. ``"self_attention-2.ipynb (submitted 2025-03-14 ...)"``.
        other_attempts: the learner's other attempts, not graded.
    """
    esc = html.escape
    submitted = submitted if submitted is not None else [None] * len(cells)
    course_sources = course_sources or {}
    graded = [(c, o) for c, o in zip(cells, outcomes) if c.kind in (TEST, MANUAL, TASK)]
    earned = sum(s for s in scores.values() if s is not None)
    available = sum(c.points for c, _ in graded)
    waiting = sum(s is None for s in scores.values())
    parts = [page_head(f"{assignment}: {notebook}", _STYLE, images=True),
             f"<h1>{esc(assignment)} / {esc(notebook)}</h1>",
             GRADE_BEGIN + grade_header(assignment=assignment, automatic=earned, score=earned, max_score=available,
                                        waiting=waiting) + GRADE_END,
             f"<p>Feedback for <b>{esc(student)}</b>: the autograder gave <b>{earned:g}</b> of {available:g} points "
             "in this notebook.</p>"]
    if attempt:
        parts.append(f"<p>Graded: <code>{esc(attempt)}</code>."
                     + (" Your other attempts, not graded (the newest attempt counts): "
                        + ", ".join(f"<code>{esc(a)}</code>" for a in other_attempts) + "." if other_attempts else "")
                     + "</p>")
    parts.append("<table><tr><th>graded cell</th><th>points</th><th>result</th></tr>")
    for cell, outcome in graded:
        css, text = _verdict(cell, outcome, hidden, notebook)
        score = scores.get(cell.key)
        if cell.kind in (MANUAL, TASK) and css == "pass":
            parts.append(_hand_row(cell.key, score, cell.points))
            continue
        points = "?" if score is None else f"{score:g}"
        parts.append(f"<tr><td><a href='#{esc(cell.key)}'>{esc(cell.key)}</a></td>"
                     f"<td>{points} / {cell.points:g}</td><td class='{css}'>{esc(text)}</td></tr>")
    parts.append("</table>" + INSTRUCTOR_BEGIN + INSTRUCTOR_END)
    if notes:
        parts.append("<h2>What the grader changed</h2><ul>"
                     + "".join(f"<li>{esc(scrub_paths(n, notebook))}</li>" for n in notes) + "</ul>")
    parts.append("<h2>Your notebook as graded</h2>")
    tests_ran = False
    for cell, outcome, own in zip(cells, outcomes, submitted):
        anchor = f" id='{esc(cell.key)}'" if cell.key and cell.kind != "free" else ""
        head = esc(_label(cell, course_sources)) + (f" <code>{esc(cell.key)}</code>"
                                                    if cell.key and cell.kind != "free" else "")
        if cell.origin == "released":
            head += " (blank: your notebook had no usable version of this cell)"
        if cell.kind in (TEST, MANUAL, TASK):
            css, text = _verdict(cell, outcome, hidden, notebook)
            head += " &mdash; " + (_hand_head(cell.key, scores.get(cell.key)) if cell.kind in (MANUAL, TASK)
                                   and css == "pass" else f"<span class='{css}'>{esc(text)}</span>")
        if cell.cell_type != "code":
            trusted = cell.origin != "yours"
            body = _markdown(scrub_paths(cell.shown, notebook) if not trusted else cell.shown, trusted=trusted)
            parts.append(f"<div class='cell'{anchor}><div class='head'>{head}</div>"
                         f"<div class='md'>{body}</div></div>")
            continue
        parts.append(f"<div class='cell'{anchor}><div class='head'>{head}</div><pre>{esc(cell.shown)}</pre>")
        if cell.kind != TEST:
            if own:
                parts.append("<div class='own'>output from your own run (saved in the notebook you submitted)</div>")
                for output in own:
                    if output["kind"] == "png":
                        parts.append(f"<div class='out'><img alt='a figure from your own run' src='{output['src']}'></div>")
                        continue
                    css = "out err" if output["kind"] in ("stderr", "error") else "out"
                    parts.append(f"<pre class='{css}'>{esc(_clean(output['text'], hidden, notebook))}</pre>")
            if outcome is not None and not outcome.ok:
                # the grader's own reasons (time-outs, a stopped kernel) are shown; an exception's text
                # is the learner's code speaking, and after a test it could carry the test's inputs
                why = (_clean(outcome.reason, hidden, notebook) if not tests_ran or outcome.status != "error" else
                       "its message is not shown: a test had already called your code with its own inputs, "
                       "and what your code prints or raises after that could carry them")
                parts.append(f"<pre class='out err'>when graded, this cell {_ENDED.get(outcome.status, 'failed')}: "
                             f"{esc(why)}</pre>")
        parts.append("</div>")
        tests_ran = tests_ran or cell.kind == TEST
    parts.append("</body></html>\n")
    return "".join(parts)


def status_page(*, student: str, assignment: str, status: str, kind: Status, attempt: str = "",
                other_attempts: list[str] | tuple[str, ...] = ()) -> str:
    """The feedback page of a submission that could not be graded: why (``status``), and what to submit
    again (by ``kind``)."""
    esc = html.escape
    advice = _RESUBMIT.get(kind, _ASK)
    return (page_head(f"{assignment or 'submission'}: not graded", _STYLE)
            + f"<h1>{esc(assignment or 'Your submission')}</h1>{GRADE_BEGIN}{GRADE_END}"
            f"<p>Feedback for <b>{esc(student)}</b>: your submission <b>could not be graded</b>.</p>"
            + (f"<p>File: <code>{esc(attempt)}</code>.</p>" if attempt else "")
            + ("<p>Your other attempts, not graded (the newest attempt counts): "
               + ", ".join(f"<code>{esc(a)}</code>" for a in other_attempts) + ".</p>" if other_attempts else "")
            + f"<p>Why: {esc(scrub_paths(status, assignment or 'your'))}</p><p>What to do: {esc(advice)}</p>"
            "</body></html>\n")


def refresh_grade_headers(out_dir: Path | str, results, late=None) -> int:
    """Write the grade each learner gets at the top of their feedback pages.

    Args:
        out_dir: the ``--out`` folder.
        results: the results with the hand scores merged in (:func:`autograder.instructor.manual.apply_manual_scores`);
            the autograder's own scores are read from ``<out>/results``.
        late: ``result -> (days late, points off, the rule as words)``, or None where no late policy
            is known (the days are then not shown).

    Returns:
        How many pages changed.
    """
    automatic = {(r.learner, r.assignment): r.score for r in load_results(out_dir) if r.graded}
    changed = 0
    for result in results:
        if not result.graded:
            continue
        days, penalty, rule = late(result) if late is not None else (0, 0.0, "")
        header = grade_header(assignment=result.assignment, automatic=automatic.get((result.learner, result.assignment)),
                              score=result.score, max_score=result.max_score,
                              waiting=sum(v is None for v in result.cells.values()), late_days=days,
                              penalty=penalty, late_rule=rule, submitted_at=_readable(result.submitted_at))
        changed += rewrite_pages(out_dir, result, lambda page, _: with_grade_header(page, header))
    return changed


def rewrite_pages(out_dir: Path | str, result, edit) -> int:
    """Apply ``edit(page, relative_path)`` to each feedback page of ``result`` (an
    :class:`autograder.core.results.GradeResult`) and write back the pages it changed (atomically); ``edit``
    returns the new text, or None to leave the page alone. A page that cannot be read is skipped.

    Returns:
        How many pages were rewritten.
    """
    changed = 0
    for relative in result.feedback:
        path = Path(out_dir) / relative
        try:
            page = path.read_text(encoding="utf-8")
        except OSError:
            continue
        updated = edit(page, relative)
        if updated is not None and updated != page:
            write_atomically(path, updated.encode("utf-8"))
            changed += 1
    return changed


def _readable(iso: str) -> str:
    from autograder.engine.submissions import readable_time

    return readable_time(iso) if iso else ""

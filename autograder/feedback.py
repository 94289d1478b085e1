"""Feedback for learners built from verdicts: what failed and why, never the hidden tests.

:func:`render_feedback` writes one self-contained HTML page per graded notebook: the score, a table
of the graded cells with the referee's reason for each failure, what the grader repaired in the
notebook, and every cell: the learner's own cells with their text output, test cells with their
visible part only and no output (a test runs in the referee, and whatever the learner's code
printed while a test called it is not kept). Any line that quotes hidden test code, whatever its
spacing, is redacted as well. File paths of the grader's own (its temporary folders, the repository,
the Python environment, the sandbox's home) are replaced by the notebook's name (:func:`scrub_paths`).
Only text outputs are shown, escaped: images, HTML and JavaScript from learner code could carry
scripts into the instructor's browser or hidden-test text past the redaction.

:class:`HideHiddenTests` is the same filter as an nbconvert preprocessor, for instructors who run
nbgrader's own ``generate_feedback`` with :mod:`autograder.nbgrader_config`.
"""

from __future__ import annotations

import html
import os
import re
import sys
import tempfile
import unicodedata
from functools import lru_cache
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from traitlets import Bool, Unicode

from autograder.notebooks import REPO_ROOT
from autograder.plan import HIDDEN_NOTE, MANUAL, TASK, TEST, RunCell, strip_hidden_region
from autograder.runner import CellOutcome
from autograder.sandbox import LEARNER_HOME

__all__ = ["HIDDEN_NOTE", "INSTRUCTOR_BEGIN", "INSTRUCTOR_END", "HideHiddenTests", "redact", "render_feedback",
           "scrub_paths", "strip_hidden_region", "with_instructor_section"]

REDACTED = "[a line of hidden test code was removed here]"
# The instructor's grading (manual scores) is written between these markers on every run, so that
# a page need not be rendered again when only the manual scores change (see autograder.manual).
INSTRUCTOR_BEGIN = "<!-- instructor-grading -->"
INSTRUCTOR_END = "<!-- /instructor-grading -->"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STYLE = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}
.pass{color:#176f2c}.fail{color:#b00020}.cell{border:1px solid #ddd;border-radius:4px;margin:1rem 0}
.head{background:#f4f4f4;padding:.3rem .6rem;font-size:.9rem}pre{margin:0;padding:.5rem .6rem;
white-space:pre-wrap;word-break:break-word;font-size:.85rem}.out{border-top:1px dashed #ddd;background:#fcfcfc}
.err{background:#fff3f3}.md{padding:.5rem .6rem;white-space:pre-wrap}
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
    needles = [n for n in (_squeezed(h) for h in hidden) if len(n) >= 8]
    if not needles:
        return text
    lines = text.split("\n")
    return "\n".join(REDACTED if any(n in _squeezed(line) for n in needles) else line for line in lines)


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
    pattern = "|".join(re.escape(folder) for folder in _grader_folders())
    if not pattern:
        return text
    return re.sub(rf"(?<![\w.~/-])(?:{pattern})(?=[/\\\s'\"<>:,;()\[\]]|$)[^\s'\"<>:,;()\[\]]*",
                  f"{notebook}.ipynb", text)


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


def render_feedback(*, student: str, assignment: str, notebook: str, cells: list[RunCell],
                    outcomes: list[CellOutcome | None], scores: dict[str, float | None],
                    notes: list[str], hidden: list[str]) -> str:
    """Return the feedback page of one graded notebook.

    Args:
        student, assignment, notebook: who and what, for the title.
        cells: the cells that were run (see :func:`autograder.plan.assemble`).
        outcomes: one per cell; None for cells that were not executed (markdown, empty).
        scores: grade id -> points given (None: left to a human grader).
        notes: what the grader repaired in the notebook.
        hidden: the hidden test lines to redact from every output.
    """
    esc = html.escape
    graded = [(c, o) for c, o in zip(cells, outcomes) if c.kind in (TEST, MANUAL, TASK)]
    earned = sum(s for s in scores.values() if s is not None)
    available = sum(c.points for c, _ in graded)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(assignment)}: {esc(notebook)}"
             f"</title><style>{_STYLE}</style></head><body>",
             f"<h1>{esc(assignment)} / {esc(notebook)}</h1><p>Feedback for <b>{esc(student)}</b>: "
             f"<b>{earned:g}</b> of {available:g} points.</p>",
             "<table><tr><th>graded cell</th><th>points</th><th>result</th></tr>"]
    for cell, outcome in graded:
        css, text = _verdict(cell, outcome, hidden, notebook)
        score = scores.get(cell.key)
        points = "?" if score is None else f"{score:g}"
        parts.append(f"<tr><td><a href='#{esc(cell.key)}'>{esc(cell.key)}</a></td>"
                     f"<td>{points} / {cell.points:g}</td><td class='{css}'>{esc(text)}</td></tr>")
    parts.append("</table>" + INSTRUCTOR_BEGIN + INSTRUCTOR_END)
    if notes:
        parts.append("<h2>What the grader changed</h2><ul>"
                     + "".join(f"<li>{esc(scrub_paths(n, notebook))}</li>" for n in notes) + "</ul>")
    parts.append("<h2>Your notebook as graded</h2>")
    for cell, outcome in zip(cells, outcomes):
        anchor = f" id='{esc(cell.key)}'" if cell.key and cell.kind != "free" else ""
        label = {"test": "test", "solution": "your answer", "manual": "your answer (graded by hand)",
                 "task": "task", "locked": "course cell"}.get(cell.kind, "your cell" if cell.origin == "yours"
                                                              else "course cell")
        head = f"{label}" + (f" <code>{esc(cell.key)}</code>" if cell.key and cell.kind != "free" else "")
        if cell.origin == "released":
            head += " (blank: your notebook had no usable version of this cell)"
        if cell.kind in (TEST, MANUAL, TASK):
            css, text = _verdict(cell, outcome, hidden, notebook)
            head += f" &mdash; <span class='{css}'>{esc(text)}</span>"
        if cell.cell_type != "code":
            parts.append(f"<div class='cell'{anchor}><div class='head'>{head}</div>"
                         f"<div class='md'>{esc(cell.shown)}</div></div>")
            continue
        parts.append(f"<div class='cell'{anchor}><div class='head'>{head}</div><pre>{esc(cell.shown)}</pre>")
        for output in (outcome.outputs if outcome is not None else []):
            css = "out err" if output["kind"] in ("stderr", "error") else "out"
            parts.append(f"<pre class='{css}'>{esc(_clean(output['text'], hidden, notebook))}</pre>")
        if outcome is not None and outcome.status in ("timeout", "stopped", "not run"):
            parts.append(f"<pre class='out err'>{esc(_clean(outcome.reason, hidden, notebook))}</pre>")
        parts.append("</div>")
    parts.append("</body></html>\n")
    return "".join(parts)


class HideHiddenTests(Preprocessor):
    """nbconvert preprocessor: remove hidden tests and their tracebacks from nbgrader's feedback."""

    enabled = Bool(True, help="Whether to hide hidden tests").tag(config=True)

    # nbgrader spells these "delimeter"; the same names keep one config key for both preprocessors.
    begin_test_delimeter = Unicode("BEGIN HIDDEN TESTS", help="Opens a hidden region").tag(config=True)
    end_test_delimeter = Unicode("END HIDDEN TESTS", help="Closes a hidden region").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple[NotebookNode, dict]:
        """Strip the hidden region of one cell and shorten its error tracebacks."""
        if cell.cell_type != "code":
            return cell, resources
        cell.source, removed = strip_hidden_region(cell.source, self.begin_test_delimeter,
                                                   self.end_test_delimeter)
        if removed:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources

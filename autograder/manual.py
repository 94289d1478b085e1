"""Hand grading that survives every run: the instructor's manual-scores file, merged, never written.

The instructor keeps a CSV file of their own with the columns ``student, assignment, grade_id,
points, comment`` (``comment`` may be left out) and passes it to ``grade --manual-scores FILE`` and to
``export --manual-scores FILE``. On every run the file is read and checked against the results in
``<out>/results`` (:func:`load_manual_scores`), merged into the scores (:func:`apply_manual_scores`),
into ``grades.csv`` and into each learner's feedback page (:func:`merge_manual_scores`). The grader
never writes the file, and the results on disk keep what the autograder decided, so removing a
line from the file takes its score back out on the next run.

- ``student`` is the learner as in ``grades.csv``: the name, or ``name #lmsid`` (the learner key)
  when two learners share a name.
- ``grade_id`` is ``<notebook>:<grade_id>`` (a column of ``grades.csv``) or a bare grade id when only
  one notebook of the assignment has it.
- ``points`` is a number from 0 to the cell's maximum; an empty ``points`` means "not graded yet"
  and the line is skipped.

A manual score fills a cell left to a human (``needs_manual_grade``) or overrides an autograded
one; the feedback says which ("changed by the instructor"). The score and ``needs_manual_grade``
are recomputed from the merged cells.

Feedback pages carry the instructor's grading between two markers
(:data:`autograder.feedback.INSTRUCTOR_BEGIN`), so only that section is rewritten when the manual
scores change: a learner whose submission is resumed (not graded again) still sees new manual scores,
and nothing is rendered or run again.
"""

from __future__ import annotations

import csv
import difflib
import html
import math
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.course import UsageError
from autograder.grading import GradeResult, load_results, write_atomically, write_grades_csv

MANUAL_COLUMNS = ("student", "assignment", "grade_id", "points", "comment")
REQUIRED_COLUMNS = MANUAL_COLUMNS[:4]
MAX_ERRORS_SHOWN = 30


class ManualScoresError(UsageError):
    """The manual-scores file cannot be used; the message names the file, the lines and the fix."""


@dataclass(frozen=True)
class ManualRow:
    """One line of the manual-scores file, as written (points parsed)."""

    line: int
    student: str
    assignment: str
    grade_id: str
    points: float
    comment: str = ""


@dataclass(frozen=True)
class ManualScore:
    """A manual score matched to a result: which learner, assignment and cell, and what it replaces.

    Attributes:
        learner: the learner key (:attr:`autograder.grading.GradeResult.learner`).
        assignment: the assignment id.
        key: the cell, ``<notebook>:<grade_id>``.
        points: the instructor's points.
        comment: the instructor's comment ("" for none).
        line: the line of the manual-scores file it came from.
        autograded: the points the autograder gave, or None for a cell left to a human.
        max_points: the cell's maximum.
    """

    learner: str
    assignment: str
    key: str
    points: float
    comment: str
    line: int
    autograded: float | None
    max_points: float

    @property
    def overrides(self) -> bool:
        """Whether it replaces an autograded score (rather than filling a cell left to a human)."""
        return self.autograded is not None


ManualScores = dict[tuple[str, str], dict[str, ManualScore]]


def _fail(path: Path, errors: list[str]) -> None:
    """Raise :class:`ManualScoresError` listing ``errors`` (the first :data:`MAX_ERRORS_SHOWN`)."""
    shown = errors[:MAX_ERRORS_SHOWN]
    more = len(errors) - len(shown)
    raise ManualScoresError(
        f"the manual-scores file {path} has {len(errors)} problem{'s' if len(errors) != 1 else ''}:\n  "
        + "\n  ".join(shown) + (f"\n  ... and {more} more" if more > 0 else "")
        + f"\nFix these lines in {path} and run the command again (the file's columns are "
        f"{', '.join(MANUAL_COLUMNS)}; see the instructor guide, autograder/README.md).")


def _points(text: str) -> float | str:
    """``text`` as points, or a message saying why it is not a valid score."""
    try:
        value = float(text)
    except ValueError:
        hint = " (write decimals with a dot, e.g. 2.5)" if "," in text else ""
        return f"points {text!r} is not a number{hint}"
    if not math.isfinite(value):
        return f"points {text!r} is not a finite number"
    if value < 0:
        return f"points {text!r} is negative; scores go from 0 to the cell's maximum"
    return value


def read_manual_scores(path: Path | str) -> list[ManualRow]:
    """Read and check the manual-scores file on its own (before any results are looked at).

    Checks the columns, that ``points`` is a non-negative number and that the names are filled in;
    blank lines and lines with empty ``points`` (not graded yet) are skipped.

    Raises:
        ManualScoresError: the file is missing, unreadable or not CSV with the columns, or lines are
            malformed (every such line is listed).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ManualScoresError(f"no such manual-scores file: {path}; give the CSV file you type scores "
                                f"into (columns {', '.join(MANUAL_COLUMNS)})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ManualScoresError(f"the manual-scores file {path} cannot be read ({error}); save it as "
                                "UTF-8 CSV") from None
    reader = csv.DictReader(text.splitlines(keepends=True))
    header = [(name or "").strip().lower() for name in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ManualScoresError(f"the manual-scores file {path} lacks the column{'s' if len(missing) > 1 else ''} "
                                f"{', '.join(missing)} (its first line is {', '.join(header) or 'empty'}); "
                                f"its first line must be: {','.join(MANUAL_COLUMNS)}")
    reader.fieldnames = header
    rows, errors = [], []
    for record in reader:
        start = reader.line_num
        values = {key: (value or "").strip() for key, value in record.items() if isinstance(key, str)}
        if record.get(None) is not None:
            errors.append(f"line {start}: more fields than the {len(header)} columns; write decimals with a dot "
                          "(2.5, not 2,5) and put a comment that holds commas in double quotes")
            continue
        if not any(values.values()) or not values.get("points"):
            continue
        blank = [c for c in REQUIRED_COLUMNS[:3] if not values.get(c)]
        if blank:
            errors.append(f"line {start}: {', '.join(blank)} is empty; every score needs a student, an "
                          "assignment and a grade_id")
            continue
        points = _points(values["points"])
        if isinstance(points, str):
            errors.append(f"line {start}: {points}")
            continue
        rows.append(ManualRow(start, values["student"], values["assignment"], values["grade_id"], points,
                              values.get("comment", "")))
    if errors:
        _fail(path, errors)
    return rows


def squeeze_name(name: str) -> str:
    """A name compared without case and with runs of whitespace as one space."""
    return " ".join(name.split()).casefold()


def _learner_matches(name: str, results: list[GradeResult]) -> list[GradeResult]:
    """The results whose learner ``name`` means: the learner key exactly, else the name exactly,
    else either without case and extra whitespace."""
    for same in (lambda a, b: a == b, lambda a, b: squeeze_name(a) == squeeze_name(b)):
        found = [r for r in results if same(r.learner, name)] or [r for r in results if same(r.student, name)]
        if found:
            return found
    return []


def _match_learner(row: ManualRow, results: list[GradeResult]) -> GradeResult | str:
    """The graded result ``row`` is about, or a message saying why there is none."""
    found = _learner_matches(row.student, results)
    learners = sorted({r.learner for r in found})
    if len(learners) > 1:
        return (f"student {row.student!r} is ambiguous in {row.assignment}: it matches "
                f"{', '.join(repr(k) for k in learners)}; write the learner key (the name and #id as above)")
    if not found:
        known = sorted({r.learner for r in results})
        close = difflib.get_close_matches(row.student, known, n=3, cutoff=0.6)
        return (f"no learner {row.student!r} has a result for {row.assignment}"
                + (f"; did you mean {', '.join(repr(c) for c in close)}?" if close else
                   "; use the student column of grades.csv"))
    graded = [r for r in found if r.graded]
    if not graded:
        return (f"{learners[0]}'s submission of {row.assignment} was not graded ({found[0].status[:120]}); "
                "a manual score needs a graded submission: fix the submission and grade it with --regrade")
    return graded[0]


def _match_cell(row: ManualRow, result: GradeResult) -> str | tuple[str]:
    """The ``<notebook>:<grade_id>`` key ``row`` names in ``result``, as a 1-tuple, or a message."""
    if row.grade_id in result.cell_max_scores:
        return (row.grade_id,)
    keys = [k for k in result.cell_max_scores if k.split(":", 1)[-1] == row.grade_id]
    if len(keys) == 1:
        return (keys[0],)
    if keys:
        return (f"grade_id {row.grade_id!r} is in several notebooks of {row.assignment} ({', '.join(keys)}); "
                "write it as <notebook>:<grade_id>")
    return (f"{row.assignment} has no graded cell {row.grade_id!r}; its cells are "
            f"{', '.join(result.cell_max_scores) or '(none)'}")


def resolve_manual_scores(path: Path | str, rows: list[ManualRow], results: list[GradeResult]) -> ManualScores:
    """Match the rows of the manual-scores file ``path`` to ``results``.

    Returns:
        ``(learner key, assignment) -> {cell key -> ManualScore}``.

    Raises:
        ManualScoresError: listing every unknown assignment, learner or grade id, ambiguous learner
            name, score above the cell's maximum, score for a submission that was not graded, and
            duplicate line.
    """
    by_assignment: dict[str, list[GradeResult]] = {}
    for r in results:
        by_assignment.setdefault(r.assignment, []).append(r)
    resolved: ManualScores = {}
    errors: list[str] = []
    for row in rows:
        if row.assignment not in by_assignment:
            errors.append(f"line {row.line}: no results for assignment {row.assignment!r}; the graded "
                          f"assignments are {', '.join(sorted(a for a in by_assignment if a)) or '(none)'}")
            continue
        result = _match_learner(row, by_assignment[row.assignment])
        if isinstance(result, str):
            errors.append(f"line {row.line}: {result}")
            continue
        key = _match_cell(row, result)
        if isinstance(key, str):
            errors.append(f"line {row.line}: {key}")
            continue
        key = key[0]
        maximum = result.cell_max_scores[key]
        if row.points > maximum:
            errors.append(f"line {row.line}: {row.points:g} points for {key} is above that cell's maximum "
                          f"of {maximum:g}")
            continue
        cells = resolved.setdefault((result.learner, result.assignment), {})
        if key in cells:
            errors.append(f"line {row.line}: a second score for {result.learner} / {result.assignment} / {key} "
                          f"(the first is on line {cells[key].line}); keep one of the two lines")
            continue
        cells[key] = ManualScore(result.learner, result.assignment, key, row.points, row.comment, row.line,
                                 result.cells.get(key), maximum)
    if errors:
        _fail(Path(path), errors)
    return resolved


def load_manual_scores(path: Path | str | None, results: list[GradeResult]) -> ManualScores:
    """Read, check and match the manual-scores file (none: no manual scores)."""
    if path is None:
        return {}
    return resolve_manual_scores(path, read_manual_scores(path), results)


def apply_manual_scores(results: list[GradeResult], manual: ManualScores) -> list[GradeResult]:
    """Copies of ``results`` with the manual scores merged in: the cells replaced, the score and
    ``needs_manual_grade`` recomputed. Results without manual scores are returned as they are."""
    merged = []
    for result in results:
        scores = manual.get((result.learner, result.assignment)) if result.graded else None
        if not scores:
            merged.append(result)
            continue
        cells = {**result.cells, **{key: score.points for key, score in scores.items()}}
        merged.append(replace(result, cells=cells, score=sum(v for v in cells.values() if v is not None),
                              needs_manual_grade=any(v is None for v in cells.values())))
    return merged


def instructor_section(result: GradeResult, scores: dict[str, ManualScore], notebook: str) -> str:
    """The HTML of the instructor's grading on the feedback page of ``notebook``: a table of the
    manual scores of this notebook's cells (filled in, or changed from the autograder's) and the
    assignment's score after them; "" when the learner has no manual score in the assignment.

    ``result`` is the merged result (see :func:`apply_manual_scores`).
    """
    if not scores:
        return ""
    esc = html.escape
    rows = []
    for key, score in scores.items():
        if key.split(":", 1)[0] != notebook:
            continue
        what = (f"changed by the instructor (the autograder gave {score.autograded:g})" if score.overrides
                else "graded by your instructor")
        rows.append(f"<tr><td><a href='#{esc(key.split(':', 1)[1])}'>{esc(key.split(':', 1)[1])}</a></td>"
                    f"<td>{score.points:g} / {score.max_points:g}</td><td>{esc(what)}</td>"
                    f"<td>{esc(score.comment)}</td></tr>")
    parts = ["<h2>Your instructor's grading</h2>"]
    if rows:
        parts.append("<table><tr><th>cell</th><th>points</th><th>what</th><th>comment</th></tr>"
                     + "".join(rows) + "</table>")
    waiting = sum(v is None for v in result.cells.values())
    parts.append(f"<p>Your score for {esc(result.assignment)} after your instructor's grading: "
                 f"<b>{result.score:g}</b> of {result.max_score:g} points"
                 + (f"; {waiting} part{'s' if waiting != 1 else ''} still wait for your instructor." if waiting
                    else ".") + "</p>")
    return "".join(parts)


def update_feedback(out_dir: Path | str, merged: list[GradeResult], manual: ManualScores) -> int:
    """Rewrite the instructor's-grading section of every feedback page whose section changed, from
    the merged results and the manual scores (a section is emptied when its scores were removed).

    Returns:
        How many pages were rewritten.
    """
    from autograder.feedback import INSTRUCTOR_BEGIN, with_instructor_section

    changed = 0
    for result in merged:
        scores = manual.get((result.learner, result.assignment), {}) if result.graded else {}
        for relative in result.feedback:
            page_path = Path(out_dir) / relative
            try:
                page = page_path.read_text(encoding="utf-8")
            except OSError:
                continue
            if not scores and INSTRUCTOR_BEGIN not in page:
                continue
            updated = with_instructor_section(page, instructor_section(result, scores, Path(relative).stem))
            if updated != page:
                write_atomically(page_path, updated.encode("utf-8"))
                changed += 1
    return changed


@dataclass
class ManualMerge:
    """What :func:`merge_manual_scores` did."""

    results: list[GradeResult]
    scores: int
    learners: int
    overrides: int
    pages: int

    def summary(self, path: Path | str) -> str:
        """One line for the command line."""
        return (f"manual scores from {path}: {self.scores} score{'s' if self.scores != 1 else ''} for "
                f"{self.learners} submission{'s' if self.learners != 1 else ''} ({self.overrides} changing an "
                f"autograded score); {self.pages} feedback page{'s' if self.pages != 1 else ''} updated")


def merge_manual_scores(out_dir: Path | str, path: Path | str | None) -> ManualMerge:
    """Merge the manual-scores file into ``<out>/grades.csv`` and the feedback pages of ``out_dir``.

    ``grades.csv`` is rebuilt from every result with the manual scores applied; the results in
    ``results/`` and the manual-scores file are not changed. With ``path`` None, ``grades.csv`` is
    rebuilt without manual scores and stale instructor sections are cleared.

    Raises:
        ManualScoresError: the file is malformed or does not match the results (nothing is written).
    """
    results = load_results(Path(out_dir))
    manual = load_manual_scores(path, results)
    merged = apply_manual_scores(results, manual)
    write_grades_csv(Path(out_dir) / "grades.csv", merged)
    pages = update_feedback(out_dir, merged, manual)
    scores = [s for cells in manual.values() for s in cells.values()]
    return ManualMerge(merged, len(scores), len(manual), sum(s.overrides for s in scores), pages)

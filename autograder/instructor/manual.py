"""Hand grading that survives every run: the instructor's manual-scores file, merged, never written.

The instructor keeps a CSV file of their own with the columns ``student, assignment, grade_id,
points, comment`` (``comment`` may be left out) and passes it to ``grade --manual-scores FILE`` and to
``export --manual-scores FILE``. On every run the file is read and checked against the results in
``<out>/results`` (:func:`load_manual_scores`) and merged into the scores (:func:`apply_manual_scores`,
:func:`merge_manual_scores`); :func:`autograder.instructor.after_grading.publish` then writes
``grades.csv`` and renders each learner's feedback pages from them. The grader
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

**Hand scores in the output folder.** ``python -m autograder review`` (:mod:`autograder.instructor.review`)
writes the scores given on its page to ``<out>/hand-scores.csv`` (:data:`HAND_SCORES`: the same
columns, the learner key and ``<notebook>:<grade_id>``, and the digest of the answer graded).
Every ``grade``, ``merge`` and ``export`` reads it without being asked (:func:`merge_manual_scores`),
and a line that does not match a graded submission now (a resubmission that could not be graded,
a shard not merged yet) is kept in the file and reported, never dropped. Where the file and the
``--manual-scores`` file score the same cell, the review page's score counts and the run says so.

**A run without** ``--manual-scores`` **keeps the last file's scores.** Each run with
``--manual-scores FILE`` copies the file into ``<out>/manual-scores-last.json``
(:data:`LAST_MANUAL`); a later run without the option merges that copy again and says so, so
forgetting the option never sets ``grades.csv`` back to the automatic scores. Passing the option
again replaces the copy (a line deleted from the file takes its score out; the run names the scores
of the previous file that are gone).

Feedback pages are rendered again from the merged scores on every run
(:mod:`autograder.engine.pages`), so a learner whose submission is resumed (not graded again) still
sees new manual scores, and nothing is run again.
"""

from __future__ import annotations

import csv
import datetime
import difflib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.results import GradeResult, load_results, write_atomically
from autograder.core.safe_output import csv_text, from_spreadsheet_cell

MANUAL_COLUMNS = ("student", "assignment", "grade_id", "points", "comment")
REQUIRED_COLUMNS = MANUAL_COLUMNS[:4]
HAND_COLUMNS = (*MANUAL_COLUMNS, "answer")
MAX_ERRORS_SHOWN = 30
HAND_SCORES = "hand-scores.csv"
LAST_MANUAL = "manual-scores-last.json"


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
    answer: str = ""


@dataclass(frozen=True)
class ManualScore:
    """A manual score matched to a result: which learner, assignment and cell, and what it replaces.

    Attributes:
        learner: the learner key (:attr:`autograder.core.results.GradeResult.learner`).
        assignment: the assignment id.
        key: the cell, ``<notebook>:<grade_id>``.
        points: the instructor's points.
        comment: the instructor's comment ("" for none).
        line: the line of the manual-scores file it came from.
        autograded: the points the autograder gave, or None for a cell left to a human.
        max_points: the cell's maximum.
        answer: the digest of the answer the score was given for (review page scores; "" for none).
    """

    learner: str
    assignment: str
    key: str
    points: float
    comment: str
    line: int
    autograded: float | None
    max_points: float
    answer: str = ""

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
    return parse_manual_scores(text, path)


def parse_manual_scores(text: str, path: Path | str) -> list[ManualRow]:
    """The rows of a manual-scores file's ``text`` (named ``path`` in messages); see
    :func:`read_manual_scores`."""
    path = Path(path)
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
        values = {key: from_spreadsheet_cell((value or "").strip()) for key, value in record.items()
                  if isinstance(key, str)}
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
                              values.get("comment", ""), values.get("answer", "")))
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
    resolved, errors = match_manual_rows(rows, results)
    if errors:
        _fail(Path(path), errors)
    return resolved


def match_manual_rows(rows: list[ManualRow], results: list[GradeResult]) -> tuple[ManualScores, list[str]]:
    """Match ``rows`` to ``results``: the scores that match, and a message per row that does not."""
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
                                 result.cells.get(key), maximum, row.answer)
    return resolved, errors


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


@dataclass(frozen=True)
class HandScore:
    """A score given on the review page.

    Attributes:
        points: the points.
        comment: the comment for the learner ("" for none).
        answer: the digest of the answer that was graded (:func:`autograder.engine.answers.answer_digest`).
    """

    points: float
    comment: str = ""
    answer: str = ""


HandScores = dict[tuple[str, str, str], HandScore]


def hand_scores_path(out_dir: Path | str) -> Path:
    """``<out>/hand-scores.csv``."""
    return Path(out_dir) / HAND_SCORES


def read_hand_scores(out_dir: Path | str) -> HandScores:
    """The review page's scores, ``(learner key, assignment, <notebook>:<grade_id>) -> HandScore``
    (none when the file does not exist).

    Raises:
        ManualScoresError: the file exists but is not a valid scores file (every bad line named).
    """
    path = hand_scores_path(out_dir)
    if not path.exists():
        return {}
    return {(row.student, row.assignment, row.grade_id): HandScore(row.points, row.comment, row.answer)
            for row in read_manual_scores(path)}


def write_hand_scores(out_dir: Path | str, scores: HandScores) -> Path:
    """Write ``scores`` to ``<out>/hand-scores.csv`` atomically (sorted by assignment, cell, learner)."""
    ordered = sorted(scores.items(), key=lambda item: (item[0][1], item[0][2], item[0][0].casefold()))
    rows = [HAND_COLUMNS] + [[learner, assignment, key, f"{score.points:g}", score.comment, score.answer]
                             for (learner, assignment, key), score in ordered]
    path = hand_scores_path(out_dir)
    write_atomically(path, csv_text(rows, lineterminator="\n").encode("utf-8"))
    return path


def _last_manual(out_dir: Path) -> dict | None:
    """The copy of the last ``--manual-scores`` file (``{"path", "copied", "text"}``), or None."""
    try:
        data = json.loads((out_dir / LAST_MANUAL).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("text"), str) else None
    except (OSError, ValueError):
        return None


def _cells(scores: ManualScores) -> set[tuple[str, str, str]]:
    return {(learner, assignment, key) for (learner, assignment), cells in scores.items() for key in cells}


@dataclass
class ManualMerge:
    """What :func:`merge_manual_scores` did.

    Attributes:
        results: every result with the scores merged in.
        scores, learners, overrides: how many scores were merged, for how many submissions, and how
            many of them replace an autograded score.
        from_file: scores from the ``--manual-scores`` file (or the copy of the last one).
        from_review: scores from ``hand-scores.csv``.
        notes: what the instructor should know: scores kept but not applied, conflicts, the copy of
            the last file merged again, scores of the previous file that are gone.
        automatic: ``(learner, assignment)`` -> the autograder's score, before the hand scores.
        scores_by: the scores merged, ``(learner, assignment)`` -> ``{cell key -> ManualScore}``.
        pages: how many feedback pages were written with them
            (:func:`autograder.instructor.after_grading.publish` sets it).
    """

    results: list[GradeResult]
    scores: int
    learners: int
    overrides: int
    from_file: int = 0
    from_review: int = 0
    notes: list[str] = field(default_factory=list)
    automatic: dict[tuple[str, str], float | None] = field(default_factory=dict)
    scores_by: ManualScores = field(default_factory=dict)
    pages: int = 0

    def summary(self, path: Path | str | None = None) -> str:
        """Lines for the command line ("" when there were no scores and nothing to say)."""
        if not self.scores and not self.notes:
            return ""
        sources = [f"{self.from_review} from {HAND_SCORES}"] if self.from_review else []
        if self.from_file:
            sources.append(f"{self.from_file} from {path or 'the last --manual-scores file'}")
        line = (f"manual scores: {self.scores} score{'s' if self.scores != 1 else ''} "
                f"({', '.join(sources) or 'none'}) for {self.learners} submission{'s' if self.learners != 1 else ''} "
                f"({self.overrides} changing an autograded score); {self.pages} feedback "
                f"page{'s' if self.pages != 1 else ''} updated")
        return "\n".join([line, *(f"note: {note}" for note in self.notes)])


def _current_answers_only(out_dir: Path, scores: ManualScores, results: list[GradeResult]
                          ) -> tuple[ManualScores, list[tuple[str, str, str]], int]:
    """The review page's ``scores`` whose answer is the one graded now: a score saved with the digest
    of an answer that is no longer the learner's (a resubmission) is set aside, so the cell waits for
    a hand grade again. A score without a digest (a file from before digests) is kept.

    Returns:
        The scores kept, the ``(learner, assignment, key)`` set aside, and how many kept have no digest.
    """
    from autograder.engine.answers import answer_digest, load_answers

    by_pair = {(r.learner, r.assignment): r for r in results if r.graded}
    kept: ManualScores = {}
    stale: list[tuple[str, str, str]] = []
    undated = 0
    answers: dict[tuple[str, str], dict | None] = {}
    for pair, cells in scores.items():
        for key, score in cells.items():
            digest = score.answer
            if not digest:
                undated += 1
            else:
                if pair not in answers:
                    answers[pair] = load_answers(out_dir, by_pair[pair]) if pair in by_pair else None
                stored = (answers[pair] or {}).get(key)
                if answers[pair] is not None and answer_digest(stored.source if stored else None) != digest:
                    stale.append((*pair, key))
                    continue
            kept.setdefault(pair, {})[key] = score
    return kept, sorted(stale), undated


def merge_manual_scores(out_dir: Path | str, path: Path | str | None) -> ManualMerge:
    """The results of ``out_dir`` with the hand scores merged in, once per run; writes nothing but the
    copy of the manual-scores file (:data:`LAST_MANUAL`).

    The scores come from ``path`` (the instructor's manual-scores file; None: the copy of the last
    one given, if any) and from ``<out>/hand-scores.csv`` (the review page's); see the module
    docstring. The results in ``results/`` and the instructor's file are not changed.

    Raises:
        ManualScoresError: ``path`` is malformed or does not match the results, or ``hand-scores.csv``
            is malformed (nothing is written).
    """
    out_dir = Path(out_dir)
    results = load_results(out_dir)
    notes: list[str] = []
    last = _last_manual(out_dir)
    if path is not None:
        text = Path(path).read_text(encoding="utf-8-sig") if Path(path).is_file() else None
        from_file = load_manual_scores(path, results)
        if last is not None:
            earlier, _ = match_manual_rows(parse_manual_scores(last["text"], last.get("path", LAST_MANUAL)), results)
            gone = sorted(_cells(earlier) - _cells(from_file))
            if gone:
                names = ", ".join(f"{learner} / {assignment} / {key}" for learner, assignment, key in gone[:5])
                notes.append(f"{len(gone)} score{'s' if len(gone) != 1 else ''} of the manual-scores file of an "
                             f"earlier run ({last.get('path')}) {'are' if len(gone) != 1 else 'is'} not in {path} and "
                             f"no longer count{'s' if len(gone) == 1 else ''}: {names}{' ...' if len(gone) > 5 else ''}")
    elif last is not None:
        from_file, problems = match_manual_rows(parse_manual_scores(last["text"], last.get("path", LAST_MANUAL)),
                                                results)
        count = sum(len(cells) for cells in from_file.values())
        notes.append(f"merged the {count} score{'s' if count != 1 else ''} of {last.get('path')} again, as copied "
                     f"on {last.get('copied', '?')} by a run with --manual-scores (a run without the option keeps "
                     f"them; pass --manual-scores FILE to change them)")
        notes += [f"{last.get('path')} (copy) {problem}; that score is not applied" for problem in problems]
    else:
        from_file = {}
    rows = [ManualRow(i, learner, assignment, key, score.points, score.comment, score.answer)
            for i, ((learner, assignment, key), score) in enumerate(sorted(read_hand_scores(out_dir).items()), 2)]
    from_review, problems = match_manual_rows(rows, results)
    notes += [f"{HAND_SCORES} {problem}; it is kept in the file and counts again once it matches a graded "
              "submission" for problem in problems]
    from_review, stale, undated = _current_answers_only(out_dir, from_review, results)
    if stale:
        names = ", ".join(f"{learner} / {assignment} / {key}" for learner, assignment, key in stale[:5])
        notes.append(f"{len(stale)} hand score{'s were' if len(stale) != 1 else ' was'} set aside because "
                     f"{'their answers' if len(stale) != 1 else 'its answer'} changed since grading "
                     f"(resubmitted): {names}{' ...' if len(stale) > 5 else ''}; they wait for a hand grade "
                     f"again (review --out {out_dir}); {HAND_SCORES} keeps the old scores")
    if undated:
        notes.append(f"{undated} hand score{'s' if undated != 1 else ''} in {HAND_SCORES} "
                     f"{'were' if undated != 1 else 'was'} written before the grader kept the answer's digest "
                     "with the score, so a changed answer cannot be told apart; applied as given (save "
                     "them again on the review page to tie them to the answers)")
    combined: ManualScores = {k: dict(v) for k, v in from_file.items()}
    for pair, cells in from_review.items():
        for key, score in cells.items():
            earlier = combined.setdefault(pair, {}).get(key)
            if earlier is not None and earlier.points != score.points:
                notes.append(f"{pair[0]} / {pair[1]} / {key} has {earlier.points:g} points in "
                             f"{path or last.get('path')} and {score.points:g} on the review page "
                             f"({HAND_SCORES}); the review page's score counts")
            combined[pair][key] = score
    merged = apply_manual_scores(results, combined)
    if path is not None and text is not None:
        copy = {"path": str(path), "copied": datetime.datetime.now().isoformat(timespec="seconds"), "text": text}
        write_atomically(out_dir / LAST_MANUAL, json.dumps(copy, ensure_ascii=False, indent=1).encode("utf-8"))
    scores = [s for cells in combined.values() for s in cells.values()]
    return ManualMerge(merged, len(scores), len(combined), sum(s.overrides for s in scores),
                       sum(len(c) for c in from_file.values()), sum(len(c) for c in from_review.values()), notes,
                       automatic={(r.learner, r.assignment): r.score for r in results if r.graded}, scores_by=combined)

"""Results on disk: :class:`GradeResult`, one JSON file per submission, and ``grades.csv``.

Each result is written atomically (:func:`write_atomically`) to
``<out>/results/<learner>/<assignment>.json`` (:func:`result_path`, with names made safe by
:func:`path_name`); ``grades.csv`` is rebuilt from every stored result (:func:`write_grades_csv`),
one column per graded cell in notebook order.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path

from autograder.core.safe_output import csv_text

GRADED = "graded"


class Status(str, Enum):
    """What became of a submission, as the grader acts on it (the words of :attr:`GradeResult.status`
    are only shown, never read): graded, one of the submission's own problems (each with its advice on
    the learner's page), or a failure of the grader, graded again on the next run."""

    GRADED = GRADED
    UNREADABLE = "unreadable notebook"
    WRONG_NOTEBOOK = "wrong notebook"
    NO_NOTEBOOK = "no notebook"
    OLDER_ATTEMPT = "older attempt"
    SYMBOLIC_LINK = "symbolic link"
    NOT_GRADED = "not graded"
    GRADER_FAILED = "grader failed"


# How a result written before :attr:`GradeResult.kind` existed said that the grader had failed.
_PREVIOUS_FORMAT_FAILURES = ("internal error", "the kernel did not start")
CSV_COLUMNS = ["student", "lms_id", "assignment", "score", "max_score", "status", "needs_manual_grade",
               "flags", "seconds", "late", "submitted_at", "file", "other_attempts"]


def learner_key(student: str, lms_id: str) -> str:
    """A learner, uniquely: ``name #lms_id``, or the name where the LMS gave no id."""
    return f"{student} #{lms_id}" if lms_id else student


@dataclass
class GradeResult:
    """The outcome of grading one submission: one row of ``grades.csv``.

    Attributes:
        student, assignment: who (unique: the name, and ``#<LMS id>`` when there is one; bytes that
            are not UTF-8 shown as U+FFFD) and what.
        status: ``"graded"`` or why not, in words (shown, never read).
        score, max_score: total points (None when not graded).
        cells: ``"<notebook>:<grade_id>"`` -> points the autograder gave (None: needs a human).
        cell_max_scores: ``"<notebook>:<grade_id>"`` -> points available.
        reasons: ``"<notebook>:<grade_id>"`` -> why a graded cell earned nothing.
        needs_manual_grade: whether some part waits for a human grader.
        flags: what in the learner's code reaches for the grading machinery (review these).
        notes: what the grader repaired in the notebook (deleted test cells, changed types, ...).
        seconds: wall time spent on this submission.
        feedback: the feedback files written, relative to the output folder.
        fingerprint: digest of the submitted files and the instructor's notebooks.
        origin: where the submission was found.
        lms_id: the learner's id in the LMS export, or "".
        late: whether the LMS marked the submission late (see :attr:`autograder.engine.submissions.Submission.late`).
        submitted_at: when it was submitted, ISO 8601 in UTC, or "" (see :attr:`autograder.engine.submissions.Submission.submitted_at`).
        files: the notebook files graded (their names, as submitted).
        other_attempts: the learner's other attempts at this assignment, not graded
            (:func:`autograder.engine.submissions.newest_attempts_first`).
        kind: what became of it (:class:`Status`); the grader acts on this, never on ``status``.
    """

    student: str
    assignment: str
    status: str
    score: float | None = None
    max_score: float | None = None
    cells: dict[str, float | None] = field(default_factory=dict)
    cell_max_scores: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    needs_manual_grade: bool = False
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    feedback: list[str] = field(default_factory=list)
    fingerprint: str = ""
    origin: str = ""
    lms_id: str = ""
    late: bool = False
    submitted_at: str = ""
    files: list[str] = field(default_factory=list)
    other_attempts: list[str] = field(default_factory=list)
    kind: Status = Status.NOT_GRADED

    @property
    def graded(self) -> bool:
        """Whether the submission was graded."""
        return self.kind is Status.GRADED

    @property
    def learner(self) -> str:
        """The unique learner key, as :attr:`autograder.engine.submissions.Submission.learner` (``name #lms_id`` or the name)."""
        return learner_key(self.student, self.lms_id)

    @classmethod
    def from_dict(cls, data: dict) -> "GradeResult":
        """A result from its JSON form; fields an older version did not write get their defaults,
        fields this version does not know are ignored. A result of the previous format, which had no
        ``kind``, gets it from its ``status`` as that format wrote it.

        Raises:
            TypeError: if ``data`` is not a mapping or lacks ``student``, ``assignment`` or ``status``.
            ValueError: if its ``kind`` is not a :class:`Status`.
        """
        if not isinstance(data, dict):
            raise TypeError(f"a result must be a JSON object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        result = cls(**{key: value for key, value in data.items() if key in known})
        if "kind" in data:
            result.kind = Status(data["kind"])
        elif result.status == GRADED:
            result.kind = Status.GRADED
        elif str(result.status).startswith(_PREVIOUS_FORMAT_FAILURES):
            result.kind = Status.GRADER_FAILED
        return result


_SAFE_CHARACTER = re.compile(r"[\w\- .()+,@=~#]")
_MAX_PATH_NAME = 120


def _character_bytes(character: str) -> bytes:
    try:
        return os.fsencode(character)  # a byte that was not UTF-8 comes back as itself
    except UnicodeError:
        return character.encode("utf-8", "surrogatepass")


def path_name(name: str) -> str:
    """One path component for a learner or an assignment: readable, and never shared by two names.

    Letters, digits and ``_-.()+,@=~#`` and spaces stay as they are (a leading dot or space does
    not); every other character, including ``%`` and bytes that are not UTF-8, becomes ``%XX`` of
    its bytes. A result longer than about 120 bytes is cut and a digest of the whole name added.

    Example:
        >>> path_name("a:b"), path_name("a_b")
        ('a%3Ab', 'a_b')
    """
    parts = []
    for index, character in enumerate(name):
        keep = (_SAFE_CHARACTER.fullmatch(character) and not (index == 0 and character in ". ")
                and not "\ud800" <= character <= "\udfff")
        parts.append(character if keep else "".join(f"%{b:02X}" for b in _character_bytes(character)))
    encoded = "".join(parts) or "%"
    if len(encoded.encode("utf-8")) > _MAX_PATH_NAME:
        digest = hashlib.sha256("".join(parts).encode("utf-8")).hexdigest()[:16]
        encoded = encoded.encode("utf-8")[:_MAX_PATH_NAME - 20].decode("utf-8", "ignore") + "~" + digest
    return encoded


def url_safe_name(name: str) -> str:
    """One path component for a feedback folder that survives a URL, a ``file://`` link, a zip and an
    LMS's bulk upload, and that no two names share.

    ASCII letters, digits, ``.`` and ``-`` stay; a space becomes ``_``; every other character
    (``_``, ``#``, ``%``, ``~``, non-ASCII letters, bytes that are not UTF-8) becomes ``~XX`` per byte
    of its UTF-8 form; a leading ``.`` is encoded too. Long names are cut as in :func:`path_name`.

    Example:
        >>> url_safe_name("Jane Smith #4711"), url_safe_name("smith_jane")
        ('Jane_Smith_~234711', 'smith~5Fjane')
    """
    parts = []
    for index, character in enumerate(name):
        if character == " ":
            parts.append("_")
        elif (character.isascii() and (character.isalnum() or character in ".-")
              and not (index == 0 and character == ".")):
            parts.append(character)
        else:
            parts.append("".join(f"~{b:02X}" for b in _character_bytes(character)))
    encoded = "".join(parts) or "~"
    if len(encoded) > _MAX_PATH_NAME:
        digest = hashlib.sha256(encoded.encode("ascii")).hexdigest()[:16]
        encoded = encoded[:_MAX_PATH_NAME - 20] + "-" + digest
    return encoded


def feedback_folder(out_dir: Path, learner: str, assignment: str) -> Path:
    """Where a learner's feedback pages for one assignment go: ``<out>/feedback/<learner>/<assignment>/``,
    both names made safe for URLs (:func:`url_safe_name`)."""
    return Path(out_dir) / "feedback" / url_safe_name(learner) / url_safe_name(assignment or "unknown-assignment")


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def result_path(out_dir: Path, student: str, assignment: str, duplicate: int = 0) -> Path:
    """Where one submission's result lives: ``<out>/results/<learner>/<assignment>.json``, with
    ``student`` the unique learner (:attr:`autograder.engine.submissions.Submission.learner`) as a path name (:func:`path_name`)."""
    name = path_name(assignment or "unknown-assignment") + (f".duplicate-{duplicate}" if duplicate else "")
    return Path(out_dir) / "results" / path_name(student) / f"{name}.json"


def load_result(path: Path) -> GradeResult | None:
    """The result stored at ``path`` (older files' missing fields get defaults), or None if unreadable."""
    try:
        return GradeResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def load_results(out_dir: Path) -> list[GradeResult]:
    """Every result under ``<out>/results``, sorted by assignment and student; unreadable ones skipped."""
    results = [r for r in map(load_result, sorted((Path(out_dir) / "results").glob("*/*.json"))) if r is not None]
    return sorted(results, key=lambda r: (r.assignment, r.student, not r.graded))


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def merged_order(sequences) -> list[str]:
    """One list holding every item of ``sequences`` once, keeping each sequence's order: an item
    first seen in a later sequence goes right after its predecessor there (or first, if it has none).

    Example:
        >>> merged_order([["a", "c"], ["a", "b", "c", "d"]])
        ['a', 'b', 'c', 'd']
    """
    order: list[str] = []
    for sequence in sequences:
        previous = None
        for item in sequence:
            if item not in order:
                order.insert(order.index(previous) + 1 if previous is not None else 0, item)
            previous = item
    return order


def cell_columns(results: list[GradeResult]) -> list[str]:
    """The ``<notebook>:<grade_id>`` columns of ``results``: assignment by assignment (sorted by
    name), each in the order of the cells in the instructor's notebooks (the order in which
    grading walked them and filled :attr:`GradeResult.cell_max_scores`)."""
    by_assignment: dict[str, list[list[str]]] = {}
    for r in results:
        by_assignment.setdefault(r.assignment, []).append(list(r.cell_max_scores))
    columns = [key for name in sorted(by_assignment) for key in merged_order(by_assignment[name])]
    return list(dict.fromkeys(columns))


def write_grades_csv(path: Path, results: list[GradeResult]) -> None:
    """Write one row per result, atomically: the :data:`CSV_COLUMNS`, then one column per graded cell.

    Cell columns are named ``<notebook>:<grade_id>`` and come in notebook order (:func:`cell_columns`);
    a cell left to a human grader is empty. ``late`` is ``yes`` when the LMS marked the submission
    late; ``submitted_at`` is its time in UTC; ``file`` the notebook files graded and ``other_attempts``
    the learner's other attempts, which were not graded.
    """
    columns = cell_columns(results)
    rows = [CSV_COLUMNS + columns]
    for r in results:
        rows.append([r.student, r.lms_id, r.assignment, _number(r.score), _number(r.max_score),
                     one_line(r.status), "yes" if r.needs_manual_grade else "no",
                     "; ".join(r.flags), f"{r.seconds:.1f}", "yes" if r.late else "no", r.submitted_at,
                     "; ".join(r.files), "; ".join(r.other_attempts)]
                    + [_number(r.cells.get(key)) for key in columns])
    write_atomically(Path(path), csv_text(rows).encode("utf-8"))

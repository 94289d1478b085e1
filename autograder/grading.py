"""``python -m autograder grade``: grade submissions in sandboxes, write results, CSV and feedback.

The pipeline:

1. :func:`collect_submissions` turns a path (one notebook; a folder laid out
   ``<student>/<assignment>/<notebook>.ipynb``, ``<student>/<notebook>.ipynb`` or
   ``<student>.ipynb``, LMS names such as Canvas' ``<student>_<id>_<id>_<file>`` included; or a
   zip of any of these, extracted safely by :func:`extract_zip`) into :class:`Submission` records;
   what cannot be graded keeps a ``problem``; an entry that cannot even be read becomes a
   submission with that problem, so one bad entry never stops the batch.
2. :func:`autograder.plan.load_plan` reads each assignment's instructor notebooks once.
3. Each submission is rebuilt on that plan (:func:`autograder.plan.assemble`) and run, one kernel
   per notebook, in the sandbox of :mod:`autograder.sandbox` through :mod:`autograder.runner`. The
   kernel runs the learner's cells; every test cell runs in the job slot's referee
   (:mod:`autograder.referee`), which calls into the kernel for the learner's code and decides
   the verdict. Up to ``jobs`` submissions run at once (one event loop, one kernel and one
   referee process each).
4. Each result is written atomically to ``<out>/results/<learner>/<assignment>.json`` together with
   its feedback page; ``<out>/grades.csv`` is rebuilt (atomically) from all results. A result
   records a fingerprint of the submitted files and the instructor's notebooks, so a re-run skips
   what is already graded (resuming a killed run) and re-grades what changed; ``regrade`` forces
   chosen learners.

Nothing under the submissions, the course or other learners' results is ever written.
"""

from __future__ import annotations

import asyncio
import csv
import difflib
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path

from tqdm.auto import tqdm

from autograder.course import UsageError, assignment_notebooks, list_assignments
from autograder.nbgrader_config import EXECUTE_TIMEOUT_S
from autograder.mounts import kernel_library
from autograder.notebooks import MAX_NOTEBOOK_BYTES, REPO_ROOT, NotebookError, clean_text, read_notebook
from autograder.plan import (MANUAL, PACKAGED_EXERCISES, TASK, TEST, AssignmentPlan, PlanError, assemble,
                             load_plan, load_released_plan, released_assignments, released_folders,
                             suspicious)
from autograder.sandbox import Limits

GRADED = "graded"
ALL = "all"
CSV_COLUMNS = ["student", "lms_id", "assignment", "score", "max_score", "status", "needs_manual_grade",
               "flags", "seconds", "late", "submitted_at"]
# Statuses that say the grader, not the submission, failed: such results get their row, and the
# next run grades them again.
RETRY_PREFIXES = ("internal error", "the kernel did not start")
RELEASE_REQUEST = '{"op": "release"}'
GUARD_TIMEOUT_S = 30.0
# After a cell fails, drop the references Python and IPython keep to its traceback, so that memory
# a failed cell allocated (e.g. a memory bomb's) is freed before the next cell runs.
CLEANUP_CODE = ("import sys as _autograder_sys, gc as _autograder_gc\n"
                "_autograder_sys.last_type = _autograder_sys.last_value = _autograder_sys.last_traceback = None\n"
                "_autograder_sys.last_exc = None\n"
                "get_ipython().InteractiveTB.tb = get_ipython().last_execution_result = None\n"
                "_autograder_gc.collect()\ndel _autograder_sys, _autograder_gc\n")
ZIP_MAX_BYTES = 2 * 1024 ** 3
ZIP_MAX_FILES = 20_000
_CANVAS_NAME = re.compile(r"^(?P<student>[^_]+)_(?P<late>LATE_)?(?P<id>\d+)_\d+_(?P<file>.+)$")
_MOODLE_FOLDER = re.compile(r"^(?P<student>.+?)_(?P<id>\d+)_assignsubmission_\w+?_?$")


def learner_key(student: str, lms_id: str) -> str:
    """A learner, uniquely: ``name #lms_id``, or the name where the LMS gave no id."""
    return f"{student} #{lms_id}" if lms_id else student


@dataclass
class Submission:
    """One learner's work for one assignment.

    Attributes:
        student: the learner's name as found (a folder or file name, LMS decorations removed);
            may hold undecodable bytes (as surrogate escapes).
        assignment: the assignment id, or "" when it could not be told.
        notebooks: the assignment's notebook name (without ``.ipynb``) -> the submitted file.
        origin: the file or folder it was found in, for messages.
        problem: why it cannot be graded, or None.
        lms_id: the learner's id in the LMS export (Canvas user id, Moodle participant id), or "".
        late: whether the LMS marked it late (Canvas' ``_LATE_`` in a file name); told from
            ``origin`` and the notebooks' names when not given.
        submitted_at: when it was submitted: the newest submitted file's modification time, in UTC
            (ISO 8601), or "" when there is no file; told from the files when not given.
    """

    student: str
    assignment: str
    notebooks: dict[str, Path]
    origin: Path
    problem: str | None = None
    lms_id: str = ""
    late: bool = False
    submitted_at: str = ""

    def __post_init__(self) -> None:
        files = [Path(self.origin), *map(Path, self.notebooks.values())]
        self.late = self.late or any(_lms_late(f.stem if f.suffix == ".ipynb" else f.name) for f in files)
        self.submitted_at = self.submitted_at or _submitted_at(list(map(Path, self.notebooks.values()))
                                                               or [Path(self.origin)])

    @property
    def learner(self) -> str:
        """Who this is, uniquely: the name, plus the LMS id when there is one (two learners with
        the same name and different ids stay two learners)."""
        return learner_key(self.student, self.lms_id)


@dataclass
class GradeResult:
    """The outcome of grading one submission: one row of ``grades.csv``.

    Attributes:
        student, assignment: who (unique: the name, and ``#<LMS id>`` when there is one; bytes that
            are not UTF-8 shown as U+FFFD) and what.
        status: ``"graded"`` or why not.
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
        late: whether the LMS marked the submission late (see :attr:`Submission.late`).
        submitted_at: when it was submitted, ISO 8601 in UTC, or "" (see :attr:`Submission.submitted_at`).
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

    @property
    def graded(self) -> bool:
        """Whether the submission was graded."""
        return self.status == GRADED

    @property
    def learner(self) -> str:
        """The unique learner key, as :attr:`Submission.learner` (``name #lms_id`` or the name)."""
        return learner_key(self.student, self.lms_id)

    @classmethod
    def from_dict(cls, data: dict) -> "GradeResult":
        """A result from its JSON form; fields an older version did not write get their defaults,
        fields this version does not know are ignored.

        Raises:
            TypeError: if ``data`` is not a mapping or lacks ``student``, ``assignment`` or ``status``.
        """
        if not isinstance(data, dict):
            raise TypeError(f"a result must be a JSON object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


# --- 1. Finding submissions -----------------------------------------------------------------------


def _visible(path: Path) -> bool:
    return not (path.name.startswith(".") or path.name.startswith("__"))


def _notebook_files(folder: Path) -> list[Path]:
    """The notebooks in ``folder`` (symbolic links are never followed: they could point anywhere)."""
    return sorted(p for p in folder.iterdir()
                  if not p.is_symlink() and p.is_file() and p.suffix == ".ipynb" and _visible(p))


def _other_files(folder: Path) -> list[str]:
    return sorted(clean_text(p.name) + (" (a symbolic link, not followed)" if p.is_symlink() else "")
                  for p in folder.iterdir()
                  if (p.is_symlink() or (p.is_file() and p.suffix != ".ipynb")) and _visible(p))


def _lms_student(name: str) -> tuple[str, str]:
    """A learner's name without LMS decorations (Canvas file prefixes, Moodle folder suffixes),
    and their LMS id ("" when the name carries none)."""
    for pattern in (_MOODLE_FOLDER, _CANVAS_NAME):
        match = pattern.match(name)
        if match:
            return match.group("student"), match.group("id")
    return name, ""


def _lms_late(name: str) -> bool:
    """Whether an LMS file or folder name carries the LMS's late mark (Canvas' ``_LATE_``)."""
    match = _CANVAS_NAME.match(name)
    return bool(match and match.group("late"))


def _submitted_at(files: list[Path]) -> str:
    """The newest modification time of ``files`` (links not followed) as ISO 8601 in UTC, to the
    second; "" when none can be read."""
    times = []
    for file in files:
        try:
            times.append(os.lstat(file).st_mtime)
        except (OSError, ValueError):
            continue
    if not times:
        return ""
    return datetime.fromtimestamp(int(max(times)), tz=timezone.utc).isoformat()


def _lms_file_stem(stem: str) -> str:
    match = _CANVAS_NAME.match(stem)
    return Path(match.group("file")).stem if match else stem


def _grade_ids(path: Path) -> set[str]:
    """The nbgrader grade ids in a notebook file; empty if it cannot be parsed."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return set()
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        return {str(c["metadata"]["nbgrader"]["grade_id"]) for c in cells
                if isinstance(c, dict) and "grade_id" in c.get("metadata", {}).get("nbgrader", {})}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError, KeyError, RecursionError):
        return set()


class _Catalogue:
    """What the course offers: assignments, their notebooks and their grade ids."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.notebooks = {a: assignment_notebooks(a, root) for a in list_assignments(root)}
        self._ids: dict[str, set[str]] = {}

    def grade_ids(self, assignment: str) -> set[str]:
        if assignment not in self._ids:
            folder = self.root / "solutions" / assignment
            self._ids[assignment] = set().union(*(_grade_ids(p) for p in folder.glob("*.ipynb")))
        return self._ids[assignment]

    def guess(self, file: Path) -> str:
        """The assignment a loose notebook belongs to, by its name, else by its grade ids; "" if unknown."""
        stem = _lms_file_stem(file.stem)
        by_name = [a for a, names in self.notebooks.items() if stem in names]
        if len(by_name) == 1:
            return by_name[0]
        return self.guess_by_ids(_grade_ids(file))

    def guess_by_ids(self, ids: set[str]) -> str:
        """The assignment sharing the most grade ids with ``ids``; "" if none or a tie."""
        overlaps = sorted(((len(ids & self.grade_ids(a)), a) for a in self.notebooks), reverse=True)
        if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[1][0] < overlaps[0][0]):
            return overlaps[0][1]
        return ""

    def match(self, who: tuple[str, str], assignment: str, files: list[Path], origin: Path) -> Submission:
        """Pair submitted files with the assignment's notebooks; ``who`` is (name, LMS id)."""
        expected = self.notebooks[assignment]
        found = {_lms_file_stem(f.stem): f for f in files if _lms_file_stem(f.stem) in expected}
        if not found and len(expected) == 1 and len(files) == 1:
            found = {expected[0]: files[0]}  # e.g. an LMS renamed `self_attention.ipynb`
        problem = None
        if not found:
            wanted = ", ".join(f"{n}.ipynb" for n in expected)
            others = _other_files(origin) if origin.is_dir() else []
            got = ", ".join([clean_text(f.name) for f in files] + others) or "nothing"
            problem = f"no notebook of {assignment} found (expected {wanted}; found {got})"
        return Submission(who[0], assignment, found, origin, problem, lms_id=who[1])


_MAX_COMPONENT_BYTES = 200


def _short_component(name: str) -> str:
    """A file name that fits every file system: a long one keeps its start and extension, and a
    digest of the whole name keeps distinct names distinct."""
    if len(name.encode("utf-8")) <= _MAX_COMPONENT_BYTES:
        return name
    stem, dot, suffix = name.rpartition(".") if "." in name[-12:] else (name, "", "")
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    return stem.encode("utf-8")[:120].decode("utf-8", "ignore") + "~" + digest + dot + suffix


def extract_zip(archive: Path, destination: Path, *, max_bytes: int = ZIP_MAX_BYTES,
                max_files: int = ZIP_MAX_FILES) -> tuple[Path, list[str]]:
    """Extract an LMS zip safely and return the folder to collect from and the entries skipped.

    Entries with absolute paths, ``..``, drive letters or symbolic links are skipped, as are macOS
    metadata and entries the file system refuses; names too long for a file system are shortened
    (:func:`_short_component`); nothing is written outside ``destination``. If the archive holds a
    single top folder, that folder is returned.

    Raises:
        UsageError: if the file is not a zip, or it would extract to more than ``max_bytes`` or
            ``max_files`` (a zip bomb).
    """
    skipped: list[str] = []
    destination.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            if len(infos) > max_files or sum(i.file_size for i in infos) > max_bytes:
                raise UsageError(f"{archive} would extract to more than {max_files} files or "
                                 f"{max_bytes // 1024 ** 2} MiB; refusing it")
            written = 0
            for info in infos:
                name = info.filename.replace("\\", "/")
                parts = [p for p in name.split("/") if p not in ("", ".")]
                if (not parts or name.startswith("/") or ".." in parts or ":" in parts[0]
                        or stat.S_ISLNK(info.external_attr >> 16)):
                    skipped.append(name)
                    continue
                if parts[0] == "__MACOSX":
                    continue
                target = destination.joinpath(*(_short_component(p) for p in parts))
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as source, open(target, "wb") as sink:
                        while chunk := source.read(1 << 20):
                            written += len(chunk)
                            if written > max_bytes:
                                raise UsageError(f"{archive} extracts to more than {max_bytes // 1024 ** 2} "
                                                 "MiB; refusing it")
                            sink.write(chunk)
                    _keep_zip_time(target, info)
                except OSError as error:  # a name this file system refuses, a file and a folder of one name
                    skipped.append(f"{name} ({error.strerror or error})")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError) as error:
        raise UsageError(f"{archive} is not a readable zip file ({error})") from error
    entries = [p for p in destination.iterdir() if _visible(p)]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].name.endswith(".ipynb"):
        return entries[0], skipped
    return destination, skipped


def _keep_zip_time(target: Path, info: zipfile.ZipInfo) -> None:
    """Give an extracted file the time its zip entry records (local time, as zip stores it), so that
    :attr:`Submission.submitted_at` is the LMS's time, not the extraction's; a bad time is left alone."""
    try:
        stamp = time.mktime(info.date_time + (0, 0, -1))
        os.utime(target, (stamp, stamp))
    except (OverflowError, ValueError, OSError):
        pass


def collect_submissions(path: Path | str, assignment: str, *, root: Path = REPO_ROOT) -> list[Submission]:
    """Find the submissions under ``path`` for one assignment, or for every assignment (``"all"``).

    Layouts: a single ``.ipynb`` file (the student id is its name); or a folder whose entries are
    ``<student>.ipynb`` files, ``<student>/<notebook>.ipynb`` folders or
    ``<student>/<assignment>/<notebook>.ipynb`` folders. Names starting with ``.`` or ``__`` are
    skipped; Canvas file prefixes and Moodle folder suffixes are removed from student ids. Loose
    notebooks are assigned by their name or, failing that, by their grade ids. (Zips are extracted
    by :func:`grade` first.)

    Raises:
        UsageError: if the path does not exist, is not a notebook or folder, holds no notebooks, or
            the assignment is unknown (the message lists those that exist).
    """
    catalogue = _Catalogue(root)
    if assignment != ALL and assignment not in catalogue.notebooks:
        raise UsageError(f"unknown assignment: {assignment}; the assignments under "
                         f"{Path(root) / 'solutions'} are: {', '.join(catalogue.notebooks) or '(none)'} "
                         f"(or use --assignment {ALL})")
    if not catalogue.notebooks:
        raise UsageError(f"there are no assignments under {Path(root) / 'solutions'}")
    path = Path(path)
    if not path.exists():
        raise UsageError(f"no such file or folder: {path}")

    def loose(who: tuple[str, str], file: Path) -> list[Submission]:
        name = assignment if assignment != ALL else catalogue.guess(file)
        if not name:
            try:
                read_notebook(file)
            except NotebookError as error:
                return [Submission(who[0], "", {}, file, f"unreadable notebook {clean_text(file.name)}: "
                                   + _one_line(str(error).split(": ", 1)[-1]), lms_id=who[1])]
            return [Submission(who[0], "", {}, file,
                               "cannot tell which assignment this notebook belongs to; "
                               "put it in a folder named after the assignment", lms_id=who[1])]
        return [catalogue.match(who, name, [file], file)]

    def student_folder(folder: Path) -> list[Submission]:
        who = _lms_student(folder.name)
        subfolders = {p.name: p for p in folder.iterdir() if not p.is_symlink() and p.is_dir() and _visible(p)}
        loose_files = _notebook_files(folder)
        if assignment != ALL:
            if assignment in subfolders:
                return [catalogue.match(who, assignment, _notebook_files(subfolders[assignment]),
                                        subfolders[assignment])]
            return [catalogue.match(who, assignment, loose_files, folder)]
        found = [catalogue.match(who, name, _notebook_files(sub), sub)
                 for name, sub in sorted(subfolders.items()) if name in catalogue.notebooks]
        groups: dict[str, list[Path]] = {}
        for file in loose_files:
            groups.setdefault(catalogue.guess(file), []).append(file)
        for name, files in sorted(groups.items()):
            if name:
                found.append(catalogue.match(who, name, files, folder))
            else:
                found.append(Submission(who[0], "", {}, folder,
                                        "cannot tell which assignment these notebooks belong to: "
                                        + ", ".join(clean_text(f.name) for f in files), lms_id=who[1]))
        if not found:
            found.append(Submission(who[0], "", {}, folder, "no notebooks found (found "
                                    + (", ".join(_other_files(folder)) or "nothing") + ")", lms_id=who[1]))
        return found

    def entry_submissions(entry: Path) -> list[Submission]:
        """The submissions in one entry of the folder; a problem with it is its own row."""
        who = _lms_student(entry.stem if entry.suffix == ".ipynb" else entry.name)
        try:
            if entry.is_symlink():
                return [Submission(who[0], assignment if assignment != ALL else "", {}, entry,
                                   "a symbolic link was submitted; links are not followed", lms_id=who[1])]
            if entry.is_file() and entry.suffix == ".ipynb":
                return loose(who, entry)
            if entry.is_dir():
                return student_folder(entry)
            return []
        except Exception as error:  # an unreadable folder, a name the file system refuses, ...
            return [Submission(who[0], assignment if assignment != ALL else "", {}, entry,
                               f"could not be read: {type(error).__name__}: {_one_line(clean_text(error))}",
                               lms_id=who[1])]

    if path.is_file():
        if path.suffix != ".ipynb":
            raise UsageError(f"{path} is not a notebook (.ipynb), a zip or a folder of submissions")
        return loose(_lms_student(path.stem), path)
    submissions: list[Submission] = []
    for entry in sorted(p for p in path.iterdir() if _visible(p)):
        submissions += entry_submissions(entry)
    if not submissions:
        raise UsageError(f"no notebooks found in {path}; expected <student>.ipynb files, "
                         "<student>/<notebook>.ipynb or <student>/<assignment>/<notebook>.ipynb")
    return submissions


# --- 2. Results on disk ---------------------------------------------------------------------------


_SAFE_CHARACTER = re.compile(r"[\w\- .()+,@=~#]")
_MAX_PATH_NAME = 120


def _character_bytes(character: str) -> bytes:
    try:
        return os.fsencode(character)  # a byte that was not UTF-8 comes back as itself
    except UnicodeError:
        return character.encode("utf-8", "surrogatepass")


def _path_name(name: str) -> str:
    """One path component for a learner or an assignment: readable, and never shared by two names.

    Letters, digits and ``_-.()+,@=~#`` and spaces stay as they are (a leading dot or space does
    not); every other character, including ``%`` and bytes that are not UTF-8, becomes ``%XX`` of
    its bytes. A result longer than about 120 bytes is cut and a digest of the whole name added.

    Example:
        >>> _path_name("a:b"), _path_name("a_b")
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
    ``student`` the unique learner (:attr:`Submission.learner`) as a path name (:func:`_path_name`)."""
    name = _path_name(assignment or "unknown-assignment") + (f".duplicate-{duplicate}" if duplicate else "")
    return Path(out_dir) / "results" / _path_name(student) / f"{name}.json"


def load_results(out_dir: Path) -> list[GradeResult]:
    """Every result under ``<out>/results``, sorted by assignment and student; unreadable ones skipped."""
    results = []
    for path in sorted((Path(out_dir) / "results").glob("*/*.json")):
        try:
            results.append(GradeResult.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(results, key=lambda r: (r.assignment, r.student, r.status != GRADED))


def _one_line(text: str, limit: int = 300) -> str:
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
    late; ``submitted_at`` is its time in UTC.
    """
    columns = cell_columns(results)
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS + columns)
    for r in results:
        writer.writerow([r.student, r.lms_id, r.assignment, _number(r.score), _number(r.max_score),
                         _one_line(r.status), "yes" if r.needs_manual_grade else "no",
                         "; ".join(r.flags), f"{r.seconds:.1f}", "yes" if r.late else "no", r.submitted_at]
                        + [_number(r.cells.get(key)) for key in columns])
    write_atomically(Path(path), buffer.getvalue().encode("utf-8"))


# --- 3. Grading one submission --------------------------------------------------------------------


def fingerprint(submission: Submission, plan: AssignmentPlan | None) -> str:
    """A digest of what determines the grade: the submitted files and the instructor's notebooks."""
    digest = hashlib.sha256((plan.digest if plan else "").encode() + b"\0"
                            + clean_text(submission.problem or "").encode())
    for name, file in sorted(submission.notebooks.items()):
        digest.update(name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(file.read_bytes()).digest())
        except OSError as error:
            digest.update(str(error).encode())
    return digest.hexdigest()


async def _run_notebook(kernel, referee, cells, imports: list[str], limits: Limits) -> list:
    """Run the cells of one rebuilt notebook; return one outcome per cell (None: not executed).

    Test cells do not run in the kernel: the referee runs them (see :mod:`autograder.referee`) and
    calls into the kernel for the learner's code; the kernel runs every other code cell.
    """
    from autograder.runner import AgentError, CellOutcome, KernelStopped

    await referee.start_notebook(imports)
    outcomes: list = []
    deadline = time.monotonic() + limits.notebook_timeout
    stopped: str | None = None
    first_failure: str | None = None     # the first non-test cell that raised: the likely root cause
    for cell in cells:
        if cell.cell_type != "code" or not cell.source.strip():
            outcomes.append(None)
            continue
        remaining = deadline - time.monotonic()
        if stopped is None and remaining <= 0:
            stopped = f"not run: the notebook used up its time limit of {limits.notebook_timeout:g} s"
        if stopped is not None:
            outcomes.append(CellOutcome("not run", stopped))
            continue
        try:
            if cell.kind == TEST:
                outcome = CellOutcome(*await referee.run_test(cell.source, kernel,
                                                              min(limits.cell_timeout, remaining)))
                try:
                    await kernel.ask(RELEASE_REQUEST, GUARD_TIMEOUT_S)
                except AgentError:
                    pass  # the learner's code replaced the agent; only their own memory suffers
            else:
                outcome = await kernel.run(cell.source, min(limits.cell_timeout, remaining))
                if not outcome.ok:
                    await kernel.run(CLEANUP_CODE, GUARD_TIMEOUT_S, silent=True)
            await kernel.sweep()
        except KernelStopped as error:
            outcome = CellOutcome("stopped", str(error))
            stopped = f"not run: {error} (in an earlier cell)"
        if cell.kind == TEST:
            outcome = _name_the_root_cause(outcome, first_failure)
        elif outcome.status == "error" and first_failure is None:
            first_failure = outcome.reason
        outcomes.append(outcome)
    return outcomes


def _name_the_root_cause(outcome, first_failure: str | None):
    """A test that fails because a name is missing, after an earlier cell raised (an import that
    failed, a class that did not compile), says the earlier error first: that is what to fix."""
    if outcome.ok or first_failure is None or not outcome.reason.startswith("NameError"):
        return outcome
    return replace(outcome, reason=f"an earlier cell failed: {_one_line(first_failure, 200)}; "
                                   f"so this test fails with {outcome.reason}")


async def grade_submission(submission: Submission, plan: AssignmentPlan, *, out_dir: Path, workdir: Path,
                           limits: Limits, slot: int, catalogue_ids: dict[str, set[str]],
                           referee) -> GradeResult:
    """Grade one submission and write its feedback; never raises (failures become the status).

    Args:
        submission: what to grade (its ``problem`` must be None).
        plan: its assignment's plan.
        out_dir: the output folder (feedback goes to ``feedback/<student>/<assignment>/``).
        workdir: an empty folder of the grader's for this submission's kernels.
        limits: the resource limits.
        slot: the job slot, which picks the kernel's user id.
        catalogue_ids: every assignment's grade ids, to name the assignment of a wrong notebook.
        referee: the :class:`autograder.referee.RefereeProcess` of this job slot.
    """
    from autograder.feedback import render_feedback
    from autograder.referee import RefereeError
    from autograder.runner import KernelStopped, SandboxedKernel

    start = time.perf_counter()
    result = GradeResult(clean_text(submission.student), submission.assignment, status="",
                         lms_id=submission.lms_id, late=submission.late, submitted_at=submission.submitted_at,
                         fingerprint=fingerprint(submission, plan), origin=clean_text(submission.origin))
    try:
        learner = {}
        for name, file in sorted(submission.notebooks.items()):
            try:
                learner[name] = read_notebook(file)
            except NotebookError as error:
                result.status = f"unreadable notebook {file.name}: {_one_line(str(error).split(': ', 1)[-1])}"
                return result
        assemblies = {name: assemble(nb_plan, learner[name]) for name, nb_plan in plan.notebooks.items()
                      if name in learner}
        wrong = _wrong_notebook(plan, learner.values(), catalogue_ids,
                                matched=sum(a.matched for a in assemblies.values()))
        if wrong:
            result.status = wrong
            return result
        pages = {}
        for name, nb_plan in plan.notebooks.items():
            assembly = assemblies.get(name) or assemble(nb_plan, _empty_notebook())
            if name not in learner:
                assembly.notes.insert(0, f"You did not submit {name}.ipynb; the blank release was graded.")
            kernel = SandboxedKernel(Path(workdir) / name, limits, slot, library=kernel_library(plan))
            try:
                await referee.prepare()
                await kernel.start()
                outcomes = await _run_notebook(kernel, referee, assembly.cells, nb_plan.imports, limits)
            except KernelStopped as error:
                result.status = str(error)
                return result
            except RefereeError as error:
                result.status = f"internal error: {error}"
                return result
            finally:
                await kernel.stop()
            scores: dict[str, float | None] = {}
            for cell, outcome in zip(assembly.cells, outcomes):
                if cell.kind not in (TEST, MANUAL, TASK):
                    continue
                key = f"{name}:{cell.key}"
                result.cell_max_scores[key] = cell.points
                if cell.kind == TEST:
                    passed = outcome is not None and outcome.ok
                    scores[cell.key] = result.cells[key] = cell.points if passed else 0.0
                    if not passed:
                        result.reasons[key] = _one_line(outcome.reason if outcome else "not run")
                else:
                    scores[cell.key] = result.cells[key] = None
                    result.needs_manual_grade = True
            result.notes += assembly.notes
            result.flags += [f for f in suspicious(assembly.learner_code) if f not in result.flags]
            pages[name] = render_feedback(student=clean_text(submission.learner), assignment=plan.name,
                                          notebook=name,
                                          cells=assembly.cells, outcomes=outcomes, scores=scores,
                                          notes=assembly.notes, hidden=nb_plan.hidden_lines)
        folder = Path(out_dir) / "feedback" / _path_name(submission.learner) / _path_name(plan.name)
        for name, page in pages.items():
            write_atomically(folder / f"{name}.html", page.encode("utf-8"))
            result.feedback.append((folder / f"{name}.html").relative_to(out_dir).as_posix())
        result.score = sum(v for v in result.cells.values() if v is not None)
        result.max_score = sum(result.cell_max_scores.values())
        result.status = GRADED
    except Exception as error:  # the batch must survive anything one submission does
        result.status = f"internal error: {type(error).__name__}: {_one_line(str(error))}"
    finally:
        result.seconds = time.perf_counter() - start
    return result


def _notebook_grade_ids(nb) -> set[str]:
    ids = set()
    for cell in nb.cells:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        if isinstance(nbgrader, dict) and isinstance(nbgrader.get("grade_id"), str):
            ids.add(nbgrader["grade_id"])
    return ids


def _wrong_notebook(plan: AssignmentPlan, notebooks, catalogue_ids: dict[str, set[str]], *,
                    matched: int) -> str | None:
    """Why the learner's notebooks are not this assignment's, or None.

    Grade ids that several assignments share (the review questions' ``answer_q1`` ...) tell nothing
    apart: a notebook holding none of this assignment's own ids but some of another's is that
    other assignment's, submitted by mistake.
    """
    ids = set().union(*(_notebook_grade_ids(nb) for nb in notebooks))
    own = {a: a_ids - set().union(*(b_ids for b, b_ids in catalogue_ids.items() if b != a))
           for a, a_ids in catalogue_ids.items()}
    if ids & own.get(plan.name, plan.grade_ids):
        return None
    others = [a for a in sorted(own) if a != plan.name and ids & own[a]]
    if others:
        return f"wrong notebook: it belongs to {', '.join(others)}, not {plan.name}"
    if matched == 0:
        return f"wrong notebook: none of the cells of {plan.name} were found in it"
    return None


def _empty_notebook():
    import nbformat

    return nbformat.v4.new_notebook()


# --- 4. The batch ---------------------------------------------------------------------------------


class GradingInterrupted(Exception):
    """The run was stopped (Ctrl-C); every finished result is saved and ``grades.csv`` lists them."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` (1 <= i <= N) -> ``(i, N)``; raises :class:`UsageError` with the form to use."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard {text!r}: write it as I/N with 1 <= I <= N, e.g. --shard 2/3 for the "
                         "second of three machines")
    return int(match[1]), int(match[2])


def shard_of(learner: str, n_shards: int) -> int:
    """The shard (1..N) that grades ``learner``: a hash of the name, the same on every machine, so
    each learner's submissions, and their duplicates, land in exactly one shard."""
    digest = hashlib.sha256(learner.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % n_shards + 1


def _check_regrade(names, found: list[Submission]) -> None:
    """Refuse ``--regrade`` names that match no submission, suggesting the names that come close."""
    known = {key for s in found for key in (s.student, s.learner, clean_text(s.learner))}
    unknown = [name for name in names if name not in known]
    if not unknown:
        return
    lines = []
    for name in unknown:
        close = [k for k in sorted(known) if k.casefold() == name.casefold()]
        close = close or difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
        lines.append(f"--regrade {name!r} matches no submission"
                     + (f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""))
    raise UsageError("; ".join(lines) + ". Names are matched exactly, as in the student column of grades.csv.")


def default_jobs() -> int:
    """The number of CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def grade(submissions: Path | str, assignment: str, out_dir: Path | str, *, jobs: int | None = None,
          root: Path = REPO_ROOT, timeout: float = EXECUTE_TIMEOUT_S, limits: Limits | None = None,
          regrade: list[str] | tuple[str, ...] = (), shard: tuple[int, int] | None = None,
          progress: bool = True) -> list[GradeResult]:
    """Grade every submission found under ``submissions``; write results, feedback and ``grades.csv``.

    Args:
        submissions: a notebook, a folder of submissions (see :func:`collect_submissions`) or a zip.
        assignment: an assignment id, or ``"all"``.
        out_dir: receives ``results/``, ``feedback/<student>/<assignment>/<notebook>.html`` and
            ``grades.csv`` (built from every result in ``results/``, including earlier runs').
        jobs: submissions graded at once; default: the number of cores.
        root: the course repository (its ``solutions/`` holds the assignments).
        timeout: seconds a single cell may run (used when ``limits`` is None).
        limits: all resource limits; default ``Limits(cell_timeout=timeout)``.
        regrade: learners whose finished results are graded again; others are resumed. A name that
            matches no submission is a :class:`UsageError`.
        shard: ``(i, N)``: grade only the learners of shard ``i`` of ``N`` (:func:`shard_of`), so that
            N machines share a batch; their ``--out`` folders are combined by :func:`merge_results`
            (or they write into one shared folder).
        progress: show a progress bar.

    Returns:
        One result per submission found in this run (resumed ones included), sorted by
        assignment and student.

    Raises:
        UsageError: for a bad path or zip, an unknown assignment, ``jobs < 1``, bad limits, a bad
            shard or a ``regrade`` name that matches no submission.
        GradingInterrupted: on Ctrl-C, after saving every finished result and ``grades.csv``.
    """
    jobs = default_jobs() if jobs is None else jobs
    if shard is not None and not 1 <= shard[0] <= shard[1]:
        raise UsageError(f"shard {shard[0]}/{shard[1]}: need 1 <= i <= N")
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    limits = limits or Limits(cell_timeout=float(timeout))
    try:
        limits.check()
    except ValueError as error:
        raise UsageError(str(error)) from error
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out must be a folder, but {out_dir} is a file")
    submissions = Path(submissions)
    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        tmp = Path(tmp)
        if submissions.is_file() and zipfile.is_zipfile(submissions) and submissions.suffix != ".ipynb":
            submissions, _ = extract_zip(submissions, tmp / "zip")
        found = collect_submissions(submissions, assignment, root=root)
        _check_regrade(regrade, found)
        if shard is not None:
            found = [s for s in found if shard_of(s.learner, shard[1]) == shard[0]]
        out_dir.mkdir(parents=True, exist_ok=True)
        catalogue = _Catalogue(root)
        catalogue_ids = {a: catalogue.grade_ids(a) for a in catalogue.notebooks}
        plans: dict[str, AssignmentPlan | str] = {}
        for name in sorted({s.assignment for s in found if s.assignment and not s.problem}):
            try:
                plans[name] = load_plan(name, root)
            except PlanError as error:
                plans[name] = f"the assignment could not be prepared: {error}"
        results: list[GradeResult] = []
        pending: list[tuple[Submission, AssignmentPlan, Path]] = []
        seen: dict[tuple[str, str], int] = {}
        for submission in found:
            pair = (submission.learner, submission.assignment)
            seen[pair] = seen.get(pair, -1) + 1
            duplicate = seen[pair]
            plan = plans.get(submission.assignment)
            if duplicate and not submission.problem:
                submission.problem = (f"another submission of {clean_text(submission.learner)} for "
                                      f"{submission.assignment} was found; only the first is graded")
            if isinstance(plan, str) and not submission.problem:
                submission.problem = plan
            path = result_path(out_dir, submission.learner, submission.assignment, duplicate)
            if submission.problem:
                result = GradeResult(clean_text(submission.student), submission.assignment, submission.problem,
                                     lms_id=submission.lms_id, late=submission.late,
                                     submitted_at=submission.submitted_at,
                                     fingerprint=fingerprint(submission, None), origin=clean_text(submission.origin))
                write_atomically(path, json.dumps(asdict(result), indent=1).encode("utf-8"))
                results.append(result)
                continue
            previous = _load_result(path)
            if (previous is not None and previous.fingerprint == fingerprint(submission, plan)
                    and not previous.status.startswith(RETRY_PREFIXES)
                    and not {submission.student, submission.learner, clean_text(submission.learner)} & set(regrade)):
                results.append(previous)
                continue
            pending.append((submission, plan, path))
        if pending:
            try:
                results += asyncio.run(_grade_pending(pending, out_dir, tmp, limits, jobs, catalogue_ids,
                                                      progress))
            except KeyboardInterrupt:
                saved = load_results(out_dir)
                write_grades_csv(out_dir / "grades.csv", saved)
                raise GradingInterrupted(
                    f"interrupted: {len(saved)} finished result{'s' if len(saved) != 1 else ''} saved and "
                    f"listed in {out_dir / 'grades.csv'}; run the same command again to grade the rest") from None
    write_grades_csv(out_dir / "grades.csv", load_results(out_dir))
    return sorted(results, key=lambda r: (r.assignment, r.student))


def _load_result(path: Path) -> GradeResult | None:
    """The result stored at ``path`` (older files' missing fields get defaults), or None if unreadable."""
    try:
        return GradeResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


async def _grade_pending(pending, out_dir: Path, tmp: Path, limits: Limits, jobs: int,
                         catalogue_ids: dict[str, set[str]], progress: bool) -> list[GradeResult]:
    from autograder.referee import RefereeProcess

    slots: asyncio.Queue[int] = asyncio.Queue()
    for slot in range(min(jobs, len(pending))):
        slots.put_nowait(slot)
    referees = [RefereeProcess(limits.memory_mb) for _ in range(min(jobs, len(pending)))]
    results: list[GradeResult] = []
    bar = tqdm(total=len(pending), desc="grading", unit="submission", disable=not progress)

    async def one(index: int, submission: Submission, plan: AssignmentPlan, path: Path) -> None:
        slot = await slots.get()
        workdir = tmp / "runs" / f"{index:05d}"
        try:
            result = await grade_submission(submission, plan, out_dir=out_dir, workdir=workdir,
                                            limits=limits, slot=slot, catalogue_ids=catalogue_ids,
                                            referee=referees[slot])
        finally:
            slots.put_nowait(slot)
            shutil.rmtree(workdir, ignore_errors=True)
        write_atomically(path, json.dumps(asdict(result), indent=1).encode("utf-8"))
        results.append(result)
        bar.update()

    try:
        await asyncio.gather(*(one(i, *task) for i, task in enumerate(pending)))
    finally:
        bar.close()
        for referee in referees:
            await referee.close()
    return results


def merge_results(shard_dirs: list[Path | str], out_dir: Path | str) -> list[GradeResult]:
    """Combine the ``--out`` folders of shards graded on several machines into ``out_dir``.

    Copies each shard's ``results/`` and ``feedback/`` files into ``out_dir`` (the folder may be one of
    the shards, or hold an earlier merge) and rebuilds ``grades.csv`` from all results. A learner is
    graded by one shard only, so the same result file with different contents in two shards means
    the shards did not split one batch (e.g. different N): that is refused before anything is copied.

    Returns:
        Every result in ``out_dir`` after the merge.

    Raises:
        UsageError: a shard folder without ``results/``, ``out_dir`` a file, or conflicting results.
    """
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out must be a folder, but {out_dir} is a file")
    sources: dict[str, tuple[Path, bytes]] = {}
    for shard in map(Path, shard_dirs):
        if not (shard / "results").is_dir():
            raise UsageError(f"{shard} has no results/ folder: give the --out folders the shards graded into")
        for path in sorted(p for p in shard.rglob("*") if p.is_file() and p.parts[len(shard.parts)] in
                           ("results", "feedback") and not p.name.endswith(".tmp")):
            name = path.relative_to(shard).as_posix()
            data = path.read_bytes()
            if name in sources and sources[name][1] != data:
                raise UsageError(f"{name} differs between {sources[name][0]} and {shard}: these shards did not "
                                 "split one batch (use the same --shard I/N count on every machine)")
            sources[name] = (shard, data)
    for name, (shard, data) in sources.items():
        target = out_dir / name
        if shard.resolve() != out_dir:
            write_atomically(target, data)
    results = load_results(out_dir)
    write_grades_csv(out_dir / "grades.csv", results)
    return results


def summary_table(results: list[GradeResult]) -> str:
    """A plain-text summary: counts per assignment, then every submission that was not graded and why."""
    lines = []
    by_assignment: dict[str, list[GradeResult]] = {}
    for r in results:
        by_assignment.setdefault(r.assignment or "?", []).append(r)
    width = max([len("assignment")] + [len(a) for a in by_assignment])
    lines.append(f"{'assignment':<{width}}  graded  not graded  mean score")
    for name, group in sorted(by_assignment.items()):
        graded = [r for r in group if r.graded]
        mean = (f"{sum(r.score for r in graded) / len(graded):.2f} / {graded[0].max_score:g}"
                if graded else "-")
        lines.append(f"{name:<{width}}  {len(graded):>6}  {len(group) - len(graded):>10}  {mean}")
    failed = [r for r in results if not r.graded]
    if failed:
        lines.append("")
        lines.append("not graded:")
        for r in failed:
            lines.append(f"  {r.student} / {r.assignment or '?'}: {_one_line(r.status, 200)}")
    flagged = [r for r in results if r.graded and r.flags]
    if flagged:
        lines.append("")
        lines.append("graded, but the code reaches for the grading machinery (review these):")
        for r in flagged:
            lines.append(f"  {r.student} / {r.assignment}: {r.score:g} / {r.max_score:g}; "
                         f"uses {', '.join(r.flags)}")
    return "\n".join(lines)


# --- 5. A learner's own check ---------------------------------------------------------------------


# What running a notebook needs beyond the base dependencies: (module, distribution, lowest major
# version); pyproject.toml's `validate` extra installs them.
_VALIDATE_NEEDS = (("jupyter_client", "jupyter_client", 8), ("zmq", "pyzmq", 0), ("ipykernel", "ipykernel", 6))


def _missing_for_validate() -> list[str]:
    """The packages of the ``validate`` extra that this Python lacks or has too old, as
    ``"name (why)"``; empty when validate can run."""
    import importlib.metadata
    import importlib.util

    missing = []
    for module, distribution, major in _VALIDATE_NEEDS:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            missing.append(f"{distribution} (not installed)")
            continue
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue                                    # importable without metadata: take it as it is
        if int(re.match(r"\d*", version).group() or 0) < major:
            missing.append(f"{distribution} (version {version}; {major} or later is needed)")
    return missing


def _validate_install_command() -> str:
    """The pip command that adds the ``validate`` extra to the course package as it was installed:
    from the same git repository and ref when pip recorded one (PEP 610), else by name."""
    import importlib.metadata

    try:
        origin = json.loads(importlib.metadata.distribution("transformer-core").read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        origin = {}
    url, vcs = origin.get("url", ""), origin.get("vcs_info", {})
    if vcs.get("vcs") == "git" and url:
        ref = vcs.get("requested_revision") or vcs.get("commit_id", "")
        return f'pip install "transformer-core[validate] @ git+{url}{"@" + ref if ref else ""}"'
    if origin.get("dir_info", {}).get("editable") and url.startswith("file://"):
        return f'pip install -e "{url.removeprefix("file://")}[validate]"'
    return 'pip install "transformer-core[validate]" (from where you installed the course package)'


def _released_guess(path: Path, exercises: Path, offered: dict[str, list[str]]) -> str:
    """The released assignment in ``offered`` that ``path`` belongs to, by its name, else by the
    grade ids it shares with the released notebooks; "" if unknown or ambiguous."""
    stem = _lms_file_stem(path.stem)
    by_name = [a for a, names in offered.items() if stem in names]
    if len(by_name) == 1:
        return by_name[0]
    ids = _grade_ids(path)
    overlaps = sorted(((len(ids & set().union(*(_grade_ids(p) for p in (exercises / a).glob("*.ipynb")))), a)
                       for a in offered), reverse=True)
    if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[1][0] < overlaps[0][0]):
        return overlaps[0][1]
    return ""


def _validation_plan(path: Path, assignment: str | None, root: Path) -> tuple[AssignmentPlan, str]:
    """The plan a learner's check runs on, and a phrase saying where it came from.

    The instructor's notebooks (``<root>/solutions/``) when they hold the assignment; otherwise the
    released exercise it was made from (:func:`autograder.plan.released_folders`: ``<root>/exercises``,
    then the copy inside the installed package).

    Raises:
        UsageError: if no course notebooks are found, or the assignment cannot be told or is unknown.
    """
    catalogue = _Catalogue(root)
    name = assignment or catalogue.guess(path)
    if name and name in catalogue.notebooks:
        return load_plan(name, root, visible_only=True), "the instructor's notebook, visible tests only"
    folders = released_folders(root)
    known = sorted(set(catalogue.notebooks).union(*(released_assignments(f) for f in folders)))
    if not known:
        raise UsageError(f"no course notebooks found: neither {Path(root) / 'solutions'} nor "
                         f"{Path(root) / 'exercises'} nor the copy installed with the course package "
                         f"({PACKAGED_EXERCISES}) exists; install the course package "
                         "(the setup cell of any course notebook does) or run this in a clone of the course")
    for folder in folders:
        offered = released_assignments(folder)
        name = assignment or _released_guess(path, folder, offered)
        if name in offered:
            return load_released_plan(name, folder), f"the released exercise in {folder}"
    if assignment:
        raise UsageError(f"unknown assignment: {assignment}; the assignments are: {', '.join(known)}")
    raise UsageError(f"cannot tell which assignment {path.name} belongs to; pass --assignment "
                     f"(one of: {', '.join(known)})")


def validate(notebook: Path | str, assignment: str | None = None, *, root: Path = REPO_ROOT,
             limits: Limits | None = None) -> tuple[bool, list[str]]:
    """Check a notebook the way the grader will, with the visible tests only.

    The notebook is rebuilt on the assignment exactly as for grading (so the learner sees which
    cells the grader would put back or ignore) and run in the sandbox. The plan comes from the
    instructor's notebooks when ``<root>/solutions/`` has them, else from the released exercise
    (``<root>/exercises/`` or the copy installed with the package): a learner needs neither
    ``solutions/`` nor nbgrader (see :func:`_validation_plan`), only the base dependencies and the
    ``validate`` extra of ``pyproject.toml``.

    Args:
        notebook: the learner's notebook.
        assignment: its assignment; default: told from the notebook's name and grade ids.
        root: the course repository.
        limits: resource limits (default :class:`Limits`).

    Returns:
        ``(ok, lines)``: whether every visible test passed and nothing needed repair, and a report.

    Raises:
        UsageError: if the file is missing, the packages of the ``validate`` extra are not installed,
            or the assignment cannot be told or is unknown.
    """
    path = Path(notebook)
    if not path.is_file():
        raise UsageError(f"no such notebook: {path}")
    missing = _missing_for_validate()
    if missing:
        raise UsageError(f"validate runs your notebook in a kernel of its own and needs {', '.join(missing)}; "
                         f"install them with `{_validate_install_command()}` (on Colab, in a cell: `%` "
                         "before `pip`), then run validate again")
    plan, origin = _validation_plan(path, assignment, Path(root))
    name = plan.name
    try:
        learner = read_notebook(path)
    except NotebookError as error:
        return False, [f"this file cannot be graded: {error}"]
    stem = _lms_file_stem(path.stem)
    nb_plan = plan.notebooks.get(stem) or next(iter(plan.notebooks.values()))
    assembly = assemble(nb_plan, learner)
    if assembly.matched == 0:
        return False, [f"none of the cells of {name}/{nb_plan.name}.ipynb were found: is this the right notebook?"]
    lines = [f"checking {path.name} as {name}/{nb_plan.name}.ipynb (against {origin})"]
    lines += [f"note: {note}" for note in assembly.notes]
    limits = limits or Limits()

    async def run() -> list:
        from autograder.referee import RefereeProcess
        from autograder.runner import SandboxedKernel

        referee = RefereeProcess(limits.memory_mb)
        with tempfile.TemporaryDirectory(prefix="autograder-validate-") as tmp:
            kernel = SandboxedKernel(Path(tmp) / "kernel", limits, 0, library=kernel_library(plan))
            try:
                await referee.prepare()
                await kernel.start()
                return await _run_notebook(kernel, referee, assembly.cells, nb_plan.imports, limits)
            finally:
                await kernel.stop()
                await referee.close()

    from autograder.referee import RefereeError
    from autograder.runner import KernelStopped

    try:
        outcomes = asyncio.run(run())
    except (KernelStopped, RefereeError) as error:
        return False, lines + [f"the notebook could not be run: {error}"]
    passed = True
    for cell, outcome in zip(assembly.cells, outcomes):
        if cell.kind != TEST:
            continue
        ok = outcome is not None and outcome.ok
        passed &= ok
        lines.append(f"{'passed' if ok else 'FAILED'}  {cell.key}"
                     + ("" if ok else f": {_one_line(outcome.reason if outcome else 'not run', 500)}"))
    return passed and not assembly.notes, lines

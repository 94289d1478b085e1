"""Finding submissions: a notebook, a folder of submissions or an LMS zip -> :class:`Submission` records.

:func:`collect_submissions` reads the layouts ``<student>/<assignment>/<notebook>.ipynb``,
``<student>/<notebook>.ipynb`` and ``<student>.ipynb`` (LMS names such as Canvas'
``<student>_<id>_<id>_<file>`` and Moodle's ``<Full Name>_<id>_assignsubmission_file_`` folders
included); :func:`extract_zip` unpacks an LMS zip safely first. What cannot be graded keeps a
``problem``; an entry that cannot even be read becomes a submission with that problem, so one bad
entry never stops the batch. Next step: :mod:`autograder.engine.grade_one`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.files import MAX_NOTEBOOK_BYTES, REPO_ROOT, NotebookError, clean_text, read_notebook
from autograder.core.files import assignment_notebooks, list_assignments
from autograder.core.results import Status, learner_key, one_line
from course_runtime.language import notebook_language

ALL = "all"
ZIP_MAX_BYTES = 2 * 1024 ** 3
ZIP_MAX_FILES = 20_000
_CANVAS_NAME = re.compile(r"^(?P<student>[^_]+)_(?P<late>LATE_)?(?P<id>\d+)_\d+_(?P<file>.+)$")
_MOODLE_FOLDER = re.compile(r"^(?P<student>.+?)_(?P<id>\d+)_assignsubmission_\w+?_?$")
# Canvas names a resubmission of `name.ipynb` `name-1.ipynb`, then `name-2.ipynb`, ...
_RESUBMISSION = re.compile(r"^(?P<stem>.+?)-(?P<n>\d{1,4})$")
# The zip extra field of Info-ZIP's "extended timestamp": the modification time in UTC seconds.
_ZIP_UTC_TIME = 0x5455


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
        other_attempts: the learner's other files for this assignment that are not graded (older
            attempts, see :func:`newest_attempts_first`), as ``"<file> (submitted <time>)"``.
        problem_kind: what kind of problem ``problem`` is (:class:`autograder.core.results.Status`).
    """

    student: str
    assignment: str
    notebooks: dict[str, Path]
    origin: Path
    problem: str | None = None
    lms_id: str = ""
    late: bool = False
    submitted_at: str = ""
    other_attempts: list[str] = field(default_factory=list)
    problem_kind: Status = Status.NOT_GRADED

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

    @property
    def attempt(self) -> int:
        """The LMS's resubmission number of the files (``name-2.ipynb``: 2; ``name.ipynb``: 0)."""
        files = list(map(Path, self.notebooks.values())) or [Path(self.origin)]
        return max(attempt_of(lms_file_stem(f.stem if f.suffix == ".ipynb" else f.name))[1] for f in files)

    @property
    def files(self) -> list[str]:
        """The submitted notebook files' names (the origin's when none was found), for messages."""
        return [clean_text(f.name) for _, f in sorted(self.notebooks.items())] or [clean_text(Path(self.origin).name)]

    def described(self) -> str:
        """``"<files> (submitted <time>)"``, for rows and feedback."""
        return ", ".join(self.files) + (f" (submitted {readable_time(self.submitted_at)})" if self.submitted_at else "")


def readable_time(iso: str) -> str:
    """An ISO 8601 time in UTC as ``2025-03-14 21:03:05 UTC`` ("" stays "")."""
    try:
        return datetime.fromisoformat(iso).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return iso


def attempt_of(stem: str, names: list[str] | tuple[str, ...] | None = None) -> tuple[str, int]:
    """``(notebook name, attempt)`` of a submitted file's stem (LMS prefix removed): Canvas names a
    resubmission ``name-1``, ``name-2``, ...; the first submission, ``name``, is attempt 0. With
    ``names`` (the assignment's notebooks), a stem that is itself a notebook name is never split.

    Example:
        >>> attempt_of("self_attention-2"), attempt_of("self_attention")
        (('self_attention', 2), ('self_attention', 0))
    """
    match = _RESUBMISSION.match(stem)
    if not match or (names is not None and (stem in names or match["stem"] not in names)):
        return stem, 0
    return match["stem"], int(match["n"])


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except (OSError, ValueError):
        return 0.0


def newest_attempts_first(found: list[Submission]) -> list[Submission]:
    """``found`` with each learner's submissions of one assignment ordered newest first, the groups
    in the order they were found; the newest counts, the others are its older attempts.

    Newest means the latest submission time (:attr:`Submission.submitted_at`, the LMS zip's entry
    time), then the highest LMS resubmission number (``name-2.ipynb`` after ``name-1.ipynb`` after
    ``name.ipynb``), then the file name. The newest gets the others in its ``other_attempts``; each
    older one gets a ``problem`` naming the attempt that is graded instead, so it keeps a row.
    """
    groups: dict[tuple[str, str], list[Submission]] = {}
    for submission in found:
        groups.setdefault((submission.learner, submission.assignment or f"?{id(submission)}"), []).append(submission)
    ordered = []
    for group in groups.values():
        group.sort(key=lambda s: (s.submitted_at, s.attempt, s.files), reverse=True)
        newest, older = group[0], group[1:]
        for submission in older:
            newest.other_attempts.append(submission.described())
            submission.problem = (f"an older attempt, not graded: the newest attempt of {clean_text(newest.learner)}, "
                                  f"{newest.described()}, is graded")
            submission.problem_kind = Status.OLDER_ATTEMPT
        ordered += group
    return ordered


def _zipped_notebook_entries(path: Path) -> list[zipfile.ZipInfo]:
    """The notebook entries of the zip at ``path`` (macOS metadata and hidden files left out), read from
    its directory without extracting anything; empty when it is not a readable zip."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (OSError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError):
        return []
    found = []
    for info in infos:
        parts = info.filename.replace("\\", "/").split("/")
        if (not info.is_dir() and parts[-1].endswith(".ipynb") and parts[0] != "__MACOSX"
                and not any(part.startswith(".") for part in parts)):
            found.append(info)
    return sorted(found, key=lambda info: info.filename)


def zipped_notebooks(path: Path) -> list[str]:
    """The notebooks inside the zip at ``path``, as their paths in the zip (``work/transformer_block.ipynb``);
    empty when it holds none or is not a readable zip. Nothing is extracted: the grader does not grade a
    notebook inside a learner's upload (the learner is asked for the file itself)."""
    return [clean_text(info.filename.replace("\\", "/")) for info in _zipped_notebook_entries(path)]


def upload_language(path: Path) -> str | None:
    """The language (:func:`course_runtime.language.notebook_language`) of the first notebook inside the
    zip at ``path`` that can be read, or None: what a message about that upload is written in."""
    for info in _zipped_notebook_entries(path):
        try:
            with zipfile.ZipFile(path) as zf, zf.open(info) as entry:
                data = entry.read(MAX_NOTEBOOK_BYTES + 1)
            notebook = json.loads(data) if len(data) <= MAX_NOTEBOOK_BYTES else None
            if isinstance(notebook, dict) and isinstance(notebook.get("cells"), list):
                return notebook_language(notebook)
        except (OSError, ValueError, TypeError, AttributeError, RecursionError, zipfile.BadZipFile,
                zipfile.LargeZipFile, NotImplementedError, RuntimeError):
            continue
    return None


def not_a_notebook(path: Path) -> str | None:
    """What the file at ``path`` is when it is not a notebook, in words a learner reads (``"a zip holding
    work/transformer_block.ipynb"``, ``"a PDF"``, ``"a text file"``, ...); None for a file named ``.ipynb``
    that is not a zip, a PDF or a web page (reading it as a notebook says what is wrong with it)."""
    if zipfile.is_zipfile(path):
        inside = zipped_notebooks(path)
        return f"a zip holding {', '.join(inside)}" if inside else "a zip holding no notebook"
    try:
        with open(path, "rb") as file:
            head = file.read(1 << 16)
    except OSError:
        return None if path.suffix == ".ipynb" else "a file that cannot be read"
    suffix = path.suffix.lower()
    if head.startswith(b"%PDF") or suffix == ".pdf":
        return "a PDF"
    if head.lstrip().lower().startswith((b"<!doctype html", b"<html")) or suffix in (".html", ".htm"):
        return "a web page (HTML)"
    if path.suffix == ".ipynb":
        return None
    try:
        read_notebook(path)
        return "a notebook whose name does not end in .ipynb"
    except NotebookError:
        pass
    if suffix == ".py":
        return "a Python file"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:            # not just a character cut at the end of what was read
            return "a file of another kind"
    return "a text file"


def _visible(path: Path) -> bool:
    return not (path.name.startswith(".") or path.name.startswith("__"))


def _notebook_files(folder: Path) -> list[Path]:
    """The notebooks in ``folder`` (symbolic links are never followed: they could point anywhere)."""
    return sorted(p for p in folder.iterdir()
                  if not p.is_symlink() and p.is_file() and p.suffix == ".ipynb" and _visible(p))


def _other_files(folder: Path) -> list[str]:
    """The files in ``folder`` other than notebooks, as a learner's page names them."""
    return sorted(_named(p) for p in folder.iterdir()
                  if (p.is_symlink() or (p.is_file() and p.suffix != ".ipynb")) and _visible(p))


def _named(path: Path) -> str:
    name = clean_text(path.name)
    return f"{name} (a symbolic link, not followed)" if path.is_symlink() else name


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


def lms_file_stem(stem: str) -> str:
    match = _CANVAS_NAME.match(stem)
    return Path(match.group("file")).stem if match else stem


def file_grade_ids(path: Path) -> set[str]:
    """The nbgrader grade ids in a notebook file; empty if it cannot be parsed."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return set()
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        return {str(c["metadata"]["nbgrader"]["grade_id"]) for c in cells
                if isinstance(c, dict) and "grade_id" in c.get("metadata", {}).get("nbgrader", {})}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError, KeyError, RecursionError):
        return set()


class Catalogue:
    """What the course offers: assignments, their notebooks and their grade ids."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.notebooks = {a: assignment_notebooks(a, root) for a in list_assignments(root)}
        self._ids: dict[str, set[str]] = {}

    def grade_ids(self, assignment: str) -> set[str]:
        if assignment not in self._ids:
            folder = self.root / "solutions" / assignment
            self._ids[assignment] = set().union(*(file_grade_ids(p) for p in folder.glob("*.ipynb")))
        return self._ids[assignment]

    def guess(self, file: Path) -> str:
        """The assignment a loose notebook belongs to, by its name, else by its grade ids; "" if unknown."""
        stem = lms_file_stem(file.stem)
        by_name = [a for a, names in self.notebooks.items() if attempt_of(stem, names)[0] in names]
        if len(by_name) == 1:
            return by_name[0]
        return self.guess_by_ids(file_grade_ids(file))

    def guess_by_ids(self, ids: set[str]) -> str:
        """The assignment sharing the most grade ids with ``ids``; "" if none or a tie."""
        overlaps = sorted(((len(ids & self.grade_ids(a)), a) for a in self.notebooks), reverse=True)
        if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[1][0] < overlaps[0][0]):
            return overlaps[0][1]
        return ""

    def match(self, who: tuple[str, str], assignment: str, files: list[Path], origin: Path) -> Submission:
        """Pair submitted files with the assignment's notebooks; ``who`` is (name, LMS id)."""
        expected = self.notebooks[assignment]
        tries: dict[str, list[tuple[float, int, str, Path]]] = {}
        for f in files:
            name, attempt = attempt_of(lms_file_stem(f.stem), expected)
            if name in expected:
                tries.setdefault(name, []).append((_mtime(f), attempt, f.name, f))
        found, older = {}, []
        for name, attempts in sorted(tries.items()):      # the newest attempt of each notebook counts
            attempts.sort(reverse=True)
            found[name] = attempts[0][3]
            older += [f for *_, f in attempts[1:]]
        if not found and len(expected) == 1 and len(files) == 1:
            found = {expected[0]: files[0]}  # e.g. an LMS renamed `self_attention.ipynb`
        problem = None
        if not found:
            wanted = ", ".join(f"{n}.ipynb" for n in expected)
            others = _other_files(origin) if origin.is_dir() else []
            got = ", ".join([clean_text(f.name) for f in files] + others)
            problem = (f"no notebook of {assignment} found (expected {wanted}; found {got})" if got
                       else f"no notebook of {assignment} found (expected {wanted}; found no file at all)")
        return Submission(who[0], assignment, found, origin, problem, lms_id=who[1],
                          problem_kind=Status.NO_NOTEBOOK,
                          other_attempts=[f"{clean_text(f.name)} (submitted {readable_time(_submitted_at([f]))})"
                                          for f in older])


_MAX_COMPONENT_BYTES = 200


def _short_component(name: str) -> str:
    """A file name that fits every file system: a long one keeps its start and extension, and a
    digest of the whole name keeps distinct names distinct."""
    if len(name.encode("utf-8")) <= _MAX_COMPONENT_BYTES:
        return name
    stem, dot, suffix = name.rpartition(".") if "." in name[-12:] else (name, "", "")
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    return stem.encode("utf-8")[:120].decode("utf-8", "ignore") + "~" + digest + dot + suffix


def _free_name(wanted: str, used: set[str]) -> str:
    """``wanted``, or, if another entry of the folder has that name already, the first free
    ``<stem>-<n><suffix>`` (n = 2, 3, ...): the LMS's own name for another attempt of the same file,
    so a renamed notebook is still graded, or listed as an older attempt, never silently dropped."""
    name, stem, suffix, n = wanted, Path(wanted).stem, Path(wanted).suffix, 1
    while name in used:
        n += 1
        name = f"{stem}-{n}{suffix}"
    used.add(name)
    return name


def _zip_targets(entries: list[tuple[zipfile.ZipInfo, list[str]]]) -> list[tuple[zipfile.ZipInfo, Path]]:
    """A distinct relative path for every entry (``(info, its path's components)``), so no entry
    overwrites another or is refused for a name another took.

    Folders are placed first, then files; names kept as they are first, then shortened ones
    (:func:`_short_component`). A name already taken in its folder (two entries of one name, a
    shortened name equal to another entry's literal name, a file named like a folder) gets the
    next free ``-<n>`` name (:func:`_free_name`).
    """
    used: dict[tuple[str, ...], set[str]] = {}
    folders: dict[tuple[str, ...], tuple[str, ...]] = {(): ()}   # entry's folder -> where it is extracted

    def place(parent: tuple[str, ...], name: str) -> str:
        return _free_name(_short_component(name), used.setdefault(folders[parent], set()))

    prefixes = {tuple(parts[:depth]) for _, parts in entries for depth in range(1, len(parts))}
    for folder in sorted(prefixes, key=lambda f: (len(f), _short_component(f[-1]) != f[-1], f)):
        folders[folder] = (*folders[folder[:-1]], place(folder[:-1], folder[-1]))
    order = sorted(range(len(entries)), key=lambda i: _short_component(entries[i][1][-1]) != entries[i][1][-1])
    targets: dict[int, Path] = {}
    for i in order:
        parts = entries[i][1]
        targets[i] = Path(*folders[tuple(parts[:-1])], place(tuple(parts[:-1]), parts[-1]))
    return [(info, targets[i]) for i, (info, _) in enumerate(entries)]


def extract_zip(archive: Path, destination: Path, *, max_bytes: int = ZIP_MAX_BYTES,
                max_files: int = ZIP_MAX_FILES) -> tuple[Path, list[str]]:
    """Extract an LMS zip safely and return the folder to collect from and the entries skipped.

    Entries with absolute paths, ``..``, drive letters or symbolic links are skipped, as are macOS
    metadata and entries the file system refuses; nothing is written outside ``destination``. Every
    other entry gets a file of its own (:func:`_zip_targets`): names too long for a file system are
    shortened, and a name another entry holds already is changed to the next free ``-<n>`` name. If
    the archive holds a single top folder, that folder is returned.

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
            entries = []
            for info in infos:
                name = info.filename.replace("\\", "/")
                parts = [p for p in name.split("/") if p not in ("", ".")]
                if (not parts or name.startswith("/") or ".." in parts or ":" in parts[0]
                        or stat.S_ISLNK(info.external_attr >> 16)):
                    skipped.append(name)
                elif parts[0] != "__MACOSX":
                    entries.append((info, parts))
            written = 0
            for info, relative in _zip_targets(entries):
                target = destination / relative
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as source, open(target, "xb") as sink:
                        while chunk := source.read(1 << 20):
                            written += len(chunk)
                            if written > max_bytes:
                                raise UsageError(f"{archive} extracts to more than {max_bytes // 1024 ** 2} "
                                                 "MiB; refusing it")
                            sink.write(chunk)
                    _keep_zip_time(target, info)
                except OSError as error:  # a name this file system refuses (a path too long, bad bytes)
                    skipped.append(f"{info.filename} ({error.strerror or error})")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError) as error:
        raise UsageError(f"{archive} is not a readable zip file ({error})") from error
    top = [p for p in destination.iterdir() if _visible(p)]
    if len(top) == 1 and top[0].is_dir() and not top[0].name.endswith(".ipynb"):
        return top[0], skipped
    return destination, skipped


def zip_entry_time(info: zipfile.ZipInfo) -> float | None:
    """When a zip entry was last modified, as a POSIX time; None if it records no usable time.

    A zip entry's own date and time carry no time zone: they are read in this machine's local time
    zone (``TZ``; set ``TZ`` to the LMS server's zone when it differs). When the entry also has an
    "extended timestamp" extra field (0x5455, written by Info-ZIP and many tools), its modification
    time is in UTC seconds and is used instead.
    """
    extra, at = info.extra, 0
    while at + 4 <= len(extra):
        kind, size = int.from_bytes(extra[at:at + 2], "little"), int.from_bytes(extra[at + 2:at + 4], "little")
        body = extra[at + 4:at + 4 + size]
        if kind == _ZIP_UTC_TIME and len(body) >= 5 and body[0] & 1:
            return float(int.from_bytes(body[1:5], "little", signed=True))
        at += 4 + size
    try:
        return time.mktime(info.date_time + (0, 0, -1))
    except (OverflowError, ValueError):
        return None


def _keep_zip_time(target: Path, info: zipfile.ZipInfo) -> None:
    """Give an extracted file the time its zip entry records (:func:`zip_entry_time`), so that
    :attr:`Submission.submitted_at` is the LMS's time, not the extraction's; a bad time is left alone."""
    stamp = zip_entry_time(info)
    if stamp is not None:
        try:
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
    by :func:`autograder.engine.batch.grade` first.)

    Raises:
        UsageError: if the path does not exist, is not a notebook or folder, holds no notebooks, or
            the assignment is unknown (the message lists those that exist).
    """
    catalogue = Catalogue(root)
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
                                   + one_line(str(error).split(": ", 1)[-1]), lms_id=who[1],
                                   problem_kind=Status.UNREADABLE)]
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
            others = ", ".join(_other_files(folder))
            why = f"no notebooks found (found {others})" if others else "no notebooks found, nor any other file"
            found.append(Submission(who[0], "", {}, folder, why, lms_id=who[1], problem_kind=Status.NO_NOTEBOOK))
        return found

    def entry_submissions(entry: Path) -> list[Submission]:
        """The submissions in one entry of the folder; a problem with it is its own row."""
        who = _lms_student(entry.stem if entry.suffix == ".ipynb" else entry.name)
        try:
            if entry.is_symlink():
                return [Submission(who[0], assignment if assignment != ALL else "", {}, entry,
                                   "a symbolic link was submitted; links are not followed", lms_id=who[1],
                                   problem_kind=Status.SYMBOLIC_LINK)]
            if entry.is_file() and entry.suffix == ".ipynb":
                return loose(who, entry)
            if entry.is_dir():
                return student_folder(entry)
            if entry.is_file() and _CANVAS_NAME.match(entry.name):
                uploads.setdefault(learner_key(*who), (who, []))[1].append(entry)
            return []
        except Exception as error:  # an unreadable folder, a name the file system refuses, ...
            return [Submission(who[0], assignment if assignment != ALL else "", {}, entry,
                               f"could not be read: {type(error).__name__}: {one_line(clean_text(error))}",
                               lms_id=who[1])]

    if path.is_file():
        if path.suffix != ".ipynb":
            raise UsageError(f"{path} is not a notebook (.ipynb), a zip or a folder of submissions")
        return loose(_lms_student(path.stem), path)
    submissions: list[Submission] = []
    # LMS-named files that are not notebooks (a learner who uploaded the wrong file), by learner
    uploads: dict[str, tuple[tuple[str, str], list[Path]]] = {}
    for entry in sorted(p for p in path.iterdir() if _visible(p)):
        submissions += entry_submissions(entry)
    have = {s.learner for s in submissions}
    for key, (who, files) in sorted(uploads.items()):
        if key not in have:  # a learner with a notebook too gets that notebook's row only
            names = ", ".join(clean_text(f.name) for f in files)
            # what each file is (never None: none is named .ipynb)
            found = (not_a_notebook(files[0]) if len(files) == 1
                     else "; ".join(dict.fromkeys(map(not_a_notebook, files))))
            advice = ("upload the .ipynb file itself, not a zip" if any(map(zipped_notebooks, files))
                      else "hand in the .ipynb file")
            submissions.append(Submission(who[0], assignment if assignment != ALL else "", {}, files[-1],
                                          f"the upload {names} is not a notebook but {found}: {advice}",
                                          lms_id=who[1], problem_kind=Status.NO_NOTEBOOK))
    if not submissions:
        raise UsageError(f"no notebooks found in {path}; expected <student>.ipynb files, "
                         "<student>/<notebook>.ipynb or <student>/<assignment>/<notebook>.ipynb")
    return submissions

"""``python -m autograder grade``: grade submissions in sandboxes, write results, CSV and feedback.

The pipeline:

1. :func:`collect_submissions` turns a path (one notebook; a folder laid out
   ``<student>/<assignment>/<notebook>.ipynb``, ``<student>/<notebook>.ipynb`` or
   ``<student>.ipynb``, LMS names such as Canvas' ``<student>_<id>_<id>_<file>`` included; or a
   zip of any of these, extracted safely by :func:`extract_zip`) into :class:`Submission` records;
   what cannot be graded keeps a ``problem``.
2. :func:`autograder.plan.load_plan` reads each assignment's instructor notebooks once.
3. Each submission is rebuilt on that plan (:func:`autograder.plan.assemble`) and run, one kernel
   per notebook, in the sandbox of :mod:`autograder.sandbox` through :mod:`autograder.runner`. A
   test cell earns its points when the kernel reports that it ran without an exception *and* the
   grader's tamper check (:func:`transformer_core.testing.untampered`) passes right after it. Up to
   ``jobs`` submissions run at once (one event loop, one kernel process each).
4. Each result is written atomically to ``<out>/results/<student>/<assignment>.json`` together with
   its feedback page; ``<out>/grades.csv`` is rebuilt (atomically) from all results. A result
   records a fingerprint of the submitted files and the instructor's notebooks, so a re-run skips
   what is already graded (resuming a killed run) and re-grades what changed; ``regrade`` forces
   chosen learners.

Nothing under the submissions, the course or other learners' results is ever written.
"""

from __future__ import annotations

import asyncio
import csv
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from autograder.course import UsageError, assignment_notebooks, list_assignments
from autograder.nbgrader_config import EXECUTE_TIMEOUT_S
from autograder.notebooks import REPO_ROOT, NotebookError, read_notebook
from autograder.plan import (MANUAL, TASK, TEST, AssignmentPlan, PlanError, assemble, load_plan,
                             suspicious)
from autograder.sandbox import Limits

GRADED = "graded"
ALL = "all"
CSV_COLUMNS = ["student", "assignment", "score", "max_score", "status", "needs_manual_grade", "flags",
               "seconds"]
# Statuses that say the grader, not the submission, failed: such results are not kept, so the next
# run tries again.
RETRY_PREFIXES = ("internal error", "the kernel did not start")
GUARD_CODE = ("import transformer_core.testing as _autograder_testing\n"
              "try:\n    _autograder_testing.untampered()\nfinally:\n    del _autograder_testing\n")
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
_CANVAS_NAME = re.compile(r"^(?P<student>[^_]+)_(?:LATE_)?\d+_\d+_(?P<file>.+)$")
_MOODLE_FOLDER = re.compile(r"^(?P<student>.+?)_\d+_assignsubmission_\w+?_?$")


@dataclass
class Submission:
    """One learner's work for one assignment.

    Attributes:
        student: the learner's id (a folder or file name, LMS decorations removed).
        assignment: the assignment id, or "" when it could not be told.
        notebooks: the assignment's notebook name (without ``.ipynb``) -> the submitted file.
        origin: the file or folder it was found in, for messages.
        problem: why it cannot be graded, or None.
    """

    student: str
    assignment: str
    notebooks: dict[str, Path]
    origin: Path
    problem: str | None = None


@dataclass
class GradeResult:
    """The outcome of grading one submission: one row of ``grades.csv``.

    Attributes:
        student, assignment: who and what.
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

    @property
    def graded(self) -> bool:
        """Whether the submission was graded."""
        return self.status == GRADED


# --- 1. Finding submissions -----------------------------------------------------------------------


def _visible(path: Path) -> bool:
    return not (path.name.startswith(".") or path.name.startswith("__"))


def _notebook_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".ipynb" and _visible(p))


def _other_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix != ".ipynb" and _visible(p))


def _lms_student(name: str) -> str:
    """A learner id without LMS decorations (Canvas file prefixes, Moodle folder suffixes)."""
    for pattern in (_MOODLE_FOLDER, _CANVAS_NAME):
        match = pattern.match(name)
        if match:
            return match.group("student")
    return name


def _lms_file_stem(stem: str) -> str:
    match = _CANVAS_NAME.match(stem)
    return Path(match.group("file")).stem if match else stem


def _grade_ids(path: Path) -> set[str]:
    """The nbgrader grade ids in a notebook file; empty if it cannot be parsed."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        return {c["metadata"]["nbgrader"]["grade_id"] for c in cells
                if isinstance(c, dict) and "grade_id" in c.get("metadata", {}).get("nbgrader", {})}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError, KeyError):
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

    def match(self, student: str, assignment: str, files: list[Path], origin: Path) -> Submission:
        """Pair submitted files with the assignment's notebooks."""
        expected = self.notebooks[assignment]
        found = {_lms_file_stem(f.stem): f for f in files if _lms_file_stem(f.stem) in expected}
        if not found and len(expected) == 1 and len(files) == 1:
            found = {expected[0]: files[0]}  # e.g. an LMS renamed `self_attention.ipynb`
        problem = None
        if not found:
            wanted = ", ".join(f"{n}.ipynb" for n in expected)
            others = _other_files(origin) if origin.is_dir() else []
            got = ", ".join([f.name for f in files] + others) or "nothing"
            problem = f"no notebook of {assignment} found (expected {wanted}; found {got})"
        return Submission(student, assignment, found, origin, problem)


def extract_zip(archive: Path, destination: Path, *, max_bytes: int = ZIP_MAX_BYTES,
                max_files: int = ZIP_MAX_FILES) -> tuple[Path, list[str]]:
    """Extract an LMS zip safely and return the folder to collect from and the entries skipped.

    Entries with absolute paths, ``..``, drive letters or symbolic links are skipped, as are macOS
    metadata; nothing is written outside ``destination``. If the archive holds a single top folder,
    that folder is returned.

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
                target = destination.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as source, open(target, "wb") as sink:
                    while chunk := source.read(1 << 20):
                        written += len(chunk)
                        if written > max_bytes:
                            raise UsageError(f"{archive} extracts to more than {max_bytes // 1024 ** 2} MiB; "
                                             "refusing it")
                        sink.write(chunk)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError) as error:
        raise UsageError(f"{archive} is not a readable zip file ({error})") from error
    entries = [p for p in destination.iterdir() if _visible(p)]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].name.endswith(".ipynb"):
        return entries[0], skipped
    return destination, skipped


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

    def loose(student: str, file: Path) -> list[Submission]:
        name = assignment if assignment != ALL else catalogue.guess(file)
        if not name:
            try:
                read_notebook(file)
            except NotebookError as error:
                return [Submission(student, "", {}, file, f"unreadable notebook {file.name}: "
                                   + _one_line(str(error).split(": ", 1)[-1]))]
            return [Submission(student, "", {}, file,
                               "cannot tell which assignment this notebook belongs to; "
                               "put it in a folder named after the assignment")]
        return [catalogue.match(student, name, [file], file)]

    def student_folder(folder: Path) -> list[Submission]:
        student = _lms_student(folder.name)
        subfolders = {p.name: p for p in folder.iterdir() if p.is_dir() and _visible(p)}
        loose_files = _notebook_files(folder)
        if assignment != ALL:
            if assignment in subfolders:
                return [catalogue.match(student, assignment, _notebook_files(subfolders[assignment]),
                                        subfolders[assignment])]
            return [catalogue.match(student, assignment, loose_files, folder)]
        found = [catalogue.match(student, name, _notebook_files(sub), sub)
                 for name, sub in sorted(subfolders.items()) if name in catalogue.notebooks]
        groups: dict[str, list[Path]] = {}
        for file in loose_files:
            groups.setdefault(catalogue.guess(file), []).append(file)
        for name, files in sorted(groups.items()):
            if name:
                found.append(catalogue.match(student, name, files, folder))
            else:
                found.append(Submission(student, "", {}, folder,
                                        "cannot tell which assignment these notebooks belong to: "
                                        + ", ".join(f.name for f in files)))
        if not found:
            found.append(Submission(student, "", {}, folder, "no notebooks found (found "
                                    + (", ".join(_other_files(folder)) or "nothing") + ")"))
        return found

    if path.is_file():
        if path.suffix != ".ipynb":
            raise UsageError(f"{path} is not a notebook (.ipynb), a zip or a folder of submissions")
        return loose(_lms_student(path.stem), path)
    submissions: list[Submission] = []
    for entry in sorted(p for p in path.iterdir() if _visible(p)):
        if entry.is_file() and entry.suffix == ".ipynb":
            submissions += loose(_lms_student(entry.stem), entry)
        elif entry.is_dir():
            submissions += student_folder(entry)
    if not submissions:
        raise UsageError(f"no notebooks found in {path}; expected <student>.ipynb files, "
                         "<student>/<notebook>.ipynb or <student>/<assignment>/<notebook>.ipynb")
    return submissions


# --- 2. Results on disk ---------------------------------------------------------------------------


def _path_name(name: str) -> str:
    """A name usable as one path component (student ids come from file names, but be safe)."""
    name = re.sub(r"[\x00-\x1f/\\:]", "_", name) or "_"
    return "_" + name if name.startswith(".") else name


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
    """Where one submission's result lives: ``<out>/results/<student>/<assignment>.json``."""
    name = _path_name(assignment or "unknown-assignment") + (f".duplicate-{duplicate}" if duplicate else "")
    return Path(out_dir) / "results" / _path_name(student) / f"{name}.json"


def load_results(out_dir: Path) -> list[GradeResult]:
    """Every result under ``<out>/results``, sorted by assignment and student; unreadable ones skipped."""
    results = []
    for path in sorted((Path(out_dir) / "results").glob("*/*.json")):
        try:
            results.append(GradeResult(**json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(results, key=lambda r: (r.assignment, r.student, r.status != GRADED))


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def write_grades_csv(path: Path, results: list[GradeResult]) -> None:
    """Write one row per result, atomically: the :data:`CSV_COLUMNS`, then one column per graded cell.

    Cell columns are named ``<notebook>:<grade_id>``; a cell left to a human grader is empty.
    """
    cell_columns = sorted({key for r in results for key in r.cell_max_scores})
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS + cell_columns)
    for r in results:
        writer.writerow([r.student, r.assignment, _number(r.score), _number(r.max_score),
                         _one_line(r.status), "yes" if r.needs_manual_grade else "no",
                         "; ".join(r.flags), f"{r.seconds:.1f}"]
                        + [_number(r.cells.get(key)) for key in cell_columns])
    write_atomically(Path(path), buffer.getvalue().encode("utf-8"))


# --- 3. Grading one submission --------------------------------------------------------------------


def fingerprint(submission: Submission, plan: AssignmentPlan | None) -> str:
    """A digest of what determines the grade: the submitted files and the instructor's notebooks."""
    digest = hashlib.sha256((plan.digest if plan else "").encode() + b"\0"
                            + (submission.problem or "").encode())
    for name, file in sorted(submission.notebooks.items()):
        digest.update(name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(file.read_bytes()).digest())
        except OSError as error:
            digest.update(str(error).encode())
    return digest.hexdigest()


async def _run_notebook(kernel, cells, limits: Limits) -> list:
    """Run the cells of one rebuilt notebook; return one outcome per cell (None: not executed)."""
    from autograder.runner import CellOutcome, KernelStopped

    outcomes: list = []
    deadline = time.monotonic() + limits.notebook_timeout
    stopped: str | None = None
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
            outcome = await kernel.run(cell.source, min(limits.cell_timeout, remaining))
            if not outcome.ok:
                await kernel.run(CLEANUP_CODE, GUARD_TIMEOUT_S, silent=True)
            if cell.kind == TEST and outcome.ok:
                guard = await kernel.run(GUARD_CODE, GUARD_TIMEOUT_S, silent=True)
                if not guard.ok:
                    outcome.status, outcome.reason = "error", guard.reason
            await kernel.sweep()
        except KernelStopped as error:
            outcome = CellOutcome("stopped", str(error))
            stopped = f"not run: {error} (in an earlier cell)"
        outcomes.append(outcome)
    return outcomes


async def grade_submission(submission: Submission, plan: AssignmentPlan, *, out_dir: Path, workdir: Path,
                           limits: Limits, slot: int, catalogue_ids: dict[str, set[str]]) -> GradeResult:
    """Grade one submission and write its feedback; never raises (failures become the status).

    Args:
        submission: what to grade (its ``problem`` must be None).
        plan: its assignment's plan.
        out_dir: the output folder (feedback goes to ``feedback/<student>/<assignment>/``).
        workdir: an empty folder of the grader's for this submission's kernels.
        limits: the resource limits.
        slot: the job slot, which picks the kernel's user id.
        catalogue_ids: every assignment's grade ids, to name the assignment of a wrong notebook.
    """
    from autograder.feedback import render_feedback
    from autograder.runner import KernelStopped, SandboxedKernel

    start = time.perf_counter()
    result = GradeResult(submission.student, submission.assignment, status="",
                         fingerprint=fingerprint(submission, plan), origin=str(submission.origin))
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
        if assemblies and sum(a.matched for a in assemblies.values()) == 0:
            ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for nb in learner.values()
                   for c in nb.cells} - {None}
            others = [a for a, a_ids in catalogue_ids.items() if a != plan.name and ids & a_ids]
            result.status = (f"wrong notebook: it belongs to {', '.join(others)}, not {plan.name}" if others else
                             f"wrong notebook: none of the cells of {plan.name} were found in it")
            return result
        pages = {}
        for name, nb_plan in plan.notebooks.items():
            assembly = assemblies.get(name) or assemble(nb_plan, _empty_notebook())
            if name not in learner:
                assembly.notes.insert(0, f"You did not submit {name}.ipynb; the blank release was graded.")
            kernel = SandboxedKernel(Path(workdir) / name, limits, slot)
            try:
                await kernel.start()
                outcomes = await _run_notebook(kernel, assembly.cells, limits)
            except KernelStopped as error:
                result.status = str(error)
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
            pages[name] = render_feedback(student=submission.student, assignment=plan.name, notebook=name,
                                          cells=assembly.cells, outcomes=outcomes, scores=scores,
                                          notes=assembly.notes, hidden=nb_plan.hidden_lines)
        folder = Path(out_dir) / "feedback" / _path_name(submission.student) / _path_name(plan.name)
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


def _empty_notebook():
    import nbformat

    return nbformat.v4.new_notebook()


# --- 4. The batch ---------------------------------------------------------------------------------


def default_jobs() -> int:
    """The number of CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def grade(submissions: Path | str, assignment: str, out_dir: Path | str, *, jobs: int | None = None,
          root: Path = REPO_ROOT, timeout: float = EXECUTE_TIMEOUT_S, limits: Limits | None = None,
          regrade: list[str] | tuple[str, ...] = (), progress: bool = True) -> list[GradeResult]:
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
        regrade: learners whose finished results are graded again; others are resumed.
        progress: show a progress bar.

    Returns:
        One result per submission found in this run (resumed ones included), sorted by
        assignment and student.

    Raises:
        UsageError: for a bad path or zip, an unknown assignment, ``jobs < 1`` or bad limits.
    """
    jobs = default_jobs() if jobs is None else jobs
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
            pair = (submission.student, submission.assignment)
            seen[pair] = seen.get(pair, -1) + 1
            duplicate = seen[pair]
            plan = plans.get(submission.assignment)
            if duplicate and not submission.problem:
                submission.problem = (f"another submission of {submission.student} for "
                                      f"{submission.assignment} was found; only the first is graded")
            if isinstance(plan, str) and not submission.problem:
                submission.problem = plan
            path = result_path(out_dir, submission.student, submission.assignment, duplicate)
            if submission.problem:
                result = GradeResult(submission.student, submission.assignment, submission.problem,
                                     fingerprint=fingerprint(submission, None), origin=str(submission.origin))
                write_atomically(path, json.dumps(asdict(result), indent=1).encode("utf-8"))
                results.append(result)
                continue
            previous = _load_result(path)
            if (previous is not None and previous.fingerprint == fingerprint(submission, plan)
                    and submission.student not in regrade):
                results.append(previous)
                continue
            pending.append((submission, plan, path))
        if pending:
            results += asyncio.run(_grade_pending(pending, out_dir, tmp, limits, jobs, catalogue_ids,
                                                  progress))
    write_grades_csv(out_dir / "grades.csv", load_results(out_dir))
    return sorted(results, key=lambda r: (r.assignment, r.student))


def _load_result(path: Path) -> GradeResult | None:
    try:
        return GradeResult(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


async def _grade_pending(pending, out_dir: Path, tmp: Path, limits: Limits, jobs: int,
                         catalogue_ids: dict[str, set[str]], progress: bool) -> list[GradeResult]:
    slots: asyncio.Queue[int] = asyncio.Queue()
    for slot in range(min(jobs, len(pending))):
        slots.put_nowait(slot)
    results: list[GradeResult] = []
    bar = tqdm(total=len(pending), desc="grading", unit="submission", disable=not progress)

    async def one(index: int, submission: Submission, plan: AssignmentPlan, path: Path) -> None:
        slot = await slots.get()
        workdir = tmp / "runs" / f"{index:05d}"
        try:
            result = await grade_submission(submission, plan, out_dir=out_dir, workdir=workdir,
                                            limits=limits, slot=slot, catalogue_ids=catalogue_ids)
        finally:
            slots.put_nowait(slot)
            shutil.rmtree(workdir, ignore_errors=True)
        if not result.status.startswith(RETRY_PREFIXES):
            write_atomically(path, json.dumps(asdict(result), indent=1).encode("utf-8"))
        results.append(result)
        bar.update()

    try:
        await asyncio.gather(*(one(i, *task) for i, task in enumerate(pending)))
    finally:
        bar.close()
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


def validate(notebook: Path | str, assignment: str | None = None, *, root: Path = REPO_ROOT,
             limits: Limits | None = None) -> tuple[bool, list[str]]:
    """Check a notebook the way the grader will, with the visible tests only.

    The notebook is rebuilt on the released assignment exactly as for grading (so the learner
    sees which cells the grader would put back or ignore) and run in the sandbox.

    Args:
        notebook: the learner's notebook.
        assignment: its assignment; default: told from the notebook's name and grade ids.
        root: the course repository.
        limits: resource limits (default :class:`Limits`).

    Returns:
        ``(ok, lines)``: whether every visible test passed and nothing needed repair, and a report.

    Raises:
        UsageError: if the file is missing or the assignment cannot be told or is unknown.
    """
    path = Path(notebook)
    if not path.is_file():
        raise UsageError(f"no such notebook: {path}")
    catalogue = _Catalogue(root)
    name = assignment or catalogue.guess(path)
    if not name:
        raise UsageError(f"cannot tell which assignment {path.name} belongs to; pass --assignment "
                         f"(one of: {', '.join(catalogue.notebooks) or 'none'})")
    if name not in catalogue.notebooks:
        raise UsageError(f"unknown assignment: {name}; the assignments are: {', '.join(catalogue.notebooks)}")
    try:
        learner = read_notebook(path)
    except NotebookError as error:
        return False, [f"this file cannot be graded: {error}"]
    plan = load_plan(name, root, visible_only=True)
    stem = _lms_file_stem(path.stem)
    nb_plan = plan.notebooks.get(stem) or next(iter(plan.notebooks.values()))
    assembly = assemble(nb_plan, learner)
    if assembly.matched == 0:
        return False, [f"none of the cells of {name}/{nb_plan.name}.ipynb were found: is this the right notebook?"]
    lines = [f"checking {path.name} as {name}/{nb_plan.name}.ipynb (visible tests only)"]
    lines += [f"note: {note}" for note in assembly.notes]
    limits = limits or Limits()

    async def run() -> list:
        from autograder.runner import SandboxedKernel

        with tempfile.TemporaryDirectory(prefix="autograder-validate-") as tmp:
            kernel = SandboxedKernel(Path(tmp) / "kernel", limits, 0)
            try:
                await kernel.start()
                return await _run_notebook(kernel, assembly.cells, limits)
            finally:
                await kernel.stop()

    from autograder.runner import KernelStopped

    try:
        outcomes = asyncio.run(run())
    except KernelStopped as error:
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

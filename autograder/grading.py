"""``python -m autograder grade``: autograde submissions, write ``grades.csv`` and feedback.

The pipeline, one stage per function so that later hardening slots in without a rewrite:

1. :func:`collect_submissions` turns a path (one notebook, or a folder laid out
   ``<student>/<assignment>/<notebook>.ipynb``, ``<student>/<notebook>.ipynb`` or
   ``<student>.ipynb``) into :class:`Submission` records; what cannot be graded keeps a ``problem``.
2. :func:`prepare_assignment` builds, once per assignment, a throwaway nbgrader course directory
   with the gradebook (hidden tests included) made from ``solutions/``.
3. :func:`grade_submission` grades one submission in its *own* copy of that course directory
   (own gradebook, own folders, a neutral student id), so one learner's run cannot touch another's
   grade and the originals are never written. It never raises: every failure becomes a status.
   With ``jobs > 1`` submissions are graded in a pool of worker processes (``spawn``); a sandbox
   (resource limits, another user, no network) wraps this function, and nothing else.
4. :func:`write_grades_csv` writes one row per submission, graded or not.

Feedback is HTML from nbgrader's ``generate_feedback`` with hidden tests removed
(:class:`autograder.feedback.HideHiddenTests`), copied to ``<out>/feedback/<student>/<assignment>/``.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from autograder.course import (IGNORED_NAMES, NbgraderRunError, UsageError, assignment_notebooks,
                               build_course, list_assignments, run_converter)
from autograder.nbgrader_config import COURSE_ID, EXECUTE_TIMEOUT_S, course_config
from autograder.notebooks import REPO_ROOT, NotebookError, read_notebook

GRADED = "graded"
ALL = "all"
# Inside a course directory every learner is called this; their real name never reaches nbgrader.
INTERNAL_STUDENT = "learner"
CSV_COLUMNS = ["student", "assignment", "score", "max_score", "status", "needs_manual_grade", "seconds"]


@dataclass
class Submission:
    """One learner's work for one assignment.

    Attributes:
        student: the learner's id (a folder or file name).
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
        needs_manual_grade: whether some part waits for a human grader.
        seconds: wall time spent on this submission.
        feedback: the feedback files written, relative to the output folder.
    """

    student: str
    assignment: str
    status: str
    score: float | None = None
    max_score: float | None = None
    cells: dict[str, float | None] = field(default_factory=dict)
    cell_max_scores: dict[str, float] = field(default_factory=dict)
    needs_manual_grade: bool = False
    seconds: float = 0.0
    feedback: list[str] = field(default_factory=list)

    @property
    def graded(self) -> bool:
        """Whether the submission was graded."""
        return self.status == GRADED


# --- 1. Finding submissions -----------------------------------------------------------------------


def _visible(path: Path) -> bool:
    return not (path.name.startswith(".") or path.name.startswith("__"))


def _notebook_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".ipynb" and _visible(p))


def _grade_ids(path: Path) -> set[str]:
    """The nbgrader grade ids in a notebook file; empty if it cannot be parsed."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        return {c["metadata"]["nbgrader"]["grade_id"] for c in cells
                if isinstance(c, dict) and "grade_id" in c.get("metadata", {}).get("nbgrader", {})}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError):
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
        by_name = [a for a, names in self.notebooks.items() if file.stem in names]
        if len(by_name) == 1:
            return by_name[0]
        ids = _grade_ids(file)
        overlaps = sorted(((len(ids & self.grade_ids(a)), a) for a in self.notebooks), reverse=True)
        if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[1][0] < overlaps[0][0]):
            return overlaps[0][1]
        return ""

    def match(self, student: str, assignment: str, files: list[Path], origin: Path) -> Submission:
        """Pair submitted files with the assignment's notebooks."""
        expected = self.notebooks[assignment]
        found = {f.stem: f for f in files if f.stem in expected}
        if not found and len(expected) == 1 and len(files) == 1:
            found = {expected[0]: files[0]}  # e.g. an LMS renamed `self_attention.ipynb`
        problem = None
        if not found:
            wanted = ", ".join(f"{n}.ipynb" for n in expected)
            got = ", ".join(f.name for f in files) or "no notebooks"
            problem = f"no notebook of {assignment} found (expected {wanted}; found {got})"
        return Submission(student, assignment, found, origin, problem)


def collect_submissions(path: Path | str, assignment: str, *, root: Path = REPO_ROOT) -> list[Submission]:
    """Find the submissions under ``path`` for one assignment, or for every assignment (``"all"``).

    Layouts: a single ``.ipynb`` file (the student id is its name); or a folder whose entries are
    ``<student>.ipynb`` files, ``<student>/<notebook>.ipynb`` folders or
    ``<student>/<assignment>/<notebook>.ipynb`` folders. Names starting with ``.`` or ``__`` are
    skipped. Loose notebooks are assigned by their name or, failing that, by their grade ids.

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
            return [Submission(student, "", {}, file,
                               "cannot tell which assignment this notebook belongs to; "
                               "put it in a folder named after the assignment")]
        return [catalogue.match(student, name, [file], file)]

    def student_folder(folder: Path) -> list[Submission]:
        student = folder.name
        subfolders = {p.name: p for p in folder.iterdir() if p.is_dir() and _visible(p)}
        loose_files = _notebook_files(folder)
        if assignment != ALL:
            if assignment in subfolders:
                return [catalogue.match(student, assignment, _notebook_files(subfolders[assignment]),
                                        subfolders[assignment])]
            if loose_files:
                return [catalogue.match(student, assignment, loose_files, folder)]
            return [Submission(student, assignment, {}, folder, f"no submission for {assignment}")]
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
        return found

    if path.is_file():
        if path.suffix != ".ipynb":
            raise UsageError(f"{path} is not a notebook (.ipynb) or a folder of submissions")
        return loose(path.stem, path)
    submissions: list[Submission] = []
    for entry in sorted(p for p in path.iterdir() if _visible(p)):
        if entry.is_file() and entry.suffix == ".ipynb":
            submissions += loose(entry.stem, entry)
        elif entry.is_dir():
            submissions += student_folder(entry)
    if not submissions:
        raise UsageError(f"no notebooks found in {path}; expected <student>.ipynb files, "
                         "<student>/<notebook>.ipynb or <student>/<assignment>/<notebook>.ipynb")
    return submissions


# --- 2. and 3. Grading ----------------------------------------------------------------------------


def prepare_assignment(assignment: str, course_dir: Path, *, root: Path = REPO_ROOT,
                       timeout: int = EXECUTE_TIMEOUT_S) -> Path:
    """Build the template course directory that every submission of ``assignment`` is graded in.

    Returns:
        ``course_dir``, holding ``source/``, ``release/`` and ``gradebook.db``.
    """
    build_course(assignment, course_dir, root=root, timeout=timeout)
    return Path(course_dir)


def _read_scores(result: GradeResult, db_url: str, assignment: str) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(db_url, COURSE_ID) as gradebook:
        submitted = gradebook.find_submission(assignment, INTERNAL_STUDENT)
        result.score = float(submitted.score)
        result.max_score = float(submitted.max_score)
        result.needs_manual_grade = bool(submitted.needs_manual_grade)
        for notebook in submitted.notebooks:
            for grade in notebook.grades:
                key = f"{notebook.name}:{grade.name}"
                result.cells[key] = None if grade.auto_score is None else float(grade.auto_score)
                result.cell_max_scores[key] = float(grade.max_score)


def grade_submission(submission: Submission, template: Path, workdir: Path, feedback_root: Path,
                     timeout: int = EXECUTE_TIMEOUT_S) -> GradeResult:
    """Grade one submission in a fresh copy of the assignment's template course directory.

    Args:
        submission: what to grade (its ``problem`` must be None).
        template: the folder made by :func:`prepare_assignment`.
        workdir: an empty or missing folder for this submission alone.
        feedback_root: feedback goes to ``<feedback_root>/<student>/<assignment>/``.
        timeout: seconds a single cell may run.

    Returns:
        The result; failures are reported in its ``status``, never raised.
    """
    start = time.perf_counter()
    result = GradeResult(submission.student, submission.assignment, status="")
    try:
        result.status = _grade(submission, Path(template), Path(workdir), Path(feedback_root),
                               timeout, result)
    except Exception as error:  # the batch must survive anything one submission does
        result.status = f"internal error: {type(error).__name__}: {error}"
    result.seconds = time.perf_counter() - start
    return result


def _grade(submission: Submission, template: Path, workdir: Path, feedback_root: Path,
           timeout: int, result: GradeResult) -> str:
    assignment = submission.assignment
    shutil.copytree(template / "source", workdir / "source", ignore=IGNORED_NAMES)
    shutil.copy2(template / "gradebook.db", workdir / "gradebook.db")
    submitted = workdir / "submitted" / INTERNAL_STUDENT / assignment
    submitted.mkdir(parents=True)
    for name, file in sorted(submission.notebooks.items()):
        try:
            read_notebook(file)
        except NotebookError as error:
            return f"unreadable notebook {file.name}: {_one_line(str(error).split(': ', 1)[-1])}"
        shutil.copyfile(file, submitted / f"{name}.ipynb")
    config = course_config(workdir, source="source", release="release", timeout=timeout)
    from nbgrader.converters import Autograde, GenerateFeedback

    try:
        run_converter(Autograde, config, assignment=assignment, student=INTERNAL_STUDENT)
    except NbgraderRunError as error:
        return f"autograde failed: {error}"
    _read_scores(result, config.CourseDirectory.db_url, assignment)
    try:
        run_converter(GenerateFeedback, config, assignment=assignment, student=INTERNAL_STUDENT)
    except NbgraderRunError as error:
        return f"graded, but feedback failed: {error}"
    produced = workdir / "feedback" / INTERNAL_STUDENT / assignment
    destination = feedback_root / submission.student / assignment
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(produced, destination)
    result.feedback = sorted(p.relative_to(feedback_root.parent).as_posix()
                             for p in destination.rglob("*") if p.is_file())
    return GRADED


def grade(submissions: Path | str, assignment: str, out_dir: Path | str, *, jobs: int = 1,
          root: Path = REPO_ROOT, timeout: int = EXECUTE_TIMEOUT_S,
          progress: bool = True) -> list[GradeResult]:
    """Grade every submission found under ``submissions`` and write ``<out_dir>/grades.csv``.

    Args:
        submissions: one notebook or a folder of submissions (see :func:`collect_submissions`).
        assignment: an assignment id, or ``"all"``.
        out_dir: receives ``grades.csv`` and ``feedback/<student>/<assignment>/<notebook>.html``.
        jobs: how many submissions to grade at once; 1 grades in this process, more use a pool
            of worker processes.
        root: the course repository (its ``solutions/`` holds the assignments).
        timeout: seconds a single cell may run.
        progress: show a progress bar.

    Returns:
        One result per submission, in the order of the CSV (assignment, then student).

    Raises:
        UsageError: for a bad path, an unknown assignment or ``jobs < 1``.
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out must be a folder, but {out_dir} is a file")
    found = collect_submissions(submissions, assignment, root=root)
    out_dir.mkdir(parents=True, exist_ok=True)
    feedback_root = out_dir / "feedback"
    results = [GradeResult(s.student, s.assignment, status=s.problem) for s in found if s.problem]
    pending = [s for s in found if not s.problem]
    with tempfile.TemporaryDirectory(prefix="autograder-grade-") as tmp:
        templates: dict[str, Path] = {}
        for name in sorted({s.assignment for s in pending}):
            try:
                templates[name] = prepare_assignment(name, Path(tmp) / "templates" / name, root=root,
                                                     timeout=timeout)
            except NbgraderRunError as error:
                failed = [s for s in pending if s.assignment == name]
                results += [GradeResult(s.student, name, status=f"assignment could not be prepared: {error}")
                            for s in failed]
        tasks = [(s, templates[s.assignment], Path(tmp) / "runs" / f"{i:05d}", feedback_root, timeout)
                 for i, s in enumerate(pending) if s.assignment in templates]
        with tqdm(total=len(tasks), desc="grading", unit="submission", disable=not progress) as bar:
            if jobs == 1 or len(tasks) <= 1:
                for task in tasks:
                    results.append(grade_submission(*task))
                    bar.update()
            else:
                context = multiprocessing.get_context("spawn")
                with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
                    futures = {pool.submit(grade_submission, *task): task[0] for task in tasks}
                    for future in as_completed(futures):
                        submission = futures[future]
                        try:
                            results.append(future.result())
                        except Exception as error:  # a worker process died
                            results.append(GradeResult(submission.student, submission.assignment,
                                                       status=f"grader process failed: {error!r}"))
                        bar.update()
    results.sort(key=lambda r: (r.assignment, r.student))
    write_grades_csv(out_dir / "grades.csv", results)
    return results


# --- 4. Reporting ---------------------------------------------------------------------------------


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def write_grades_csv(path: Path, results: list[GradeResult]) -> None:
    """Write one row per result: the :data:`CSV_COLUMNS`, then one column per graded cell.

    Cell columns are named ``<notebook>:<grade_id>``; a cell left to a human grader is empty.
    """
    cell_columns = sorted({key for r in results for key in r.cells})
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS + cell_columns)
        for r in results:
            writer.writerow([r.student, r.assignment, _number(r.score), _number(r.max_score),
                             _one_line(r.status),
                             "yes" if r.needs_manual_grade else "no", f"{r.seconds:.1f}"]
                            + [_number(r.cells.get(key)) for key in cell_columns])

"""``python -m autograder grade``: the batch.

:func:`grade` finds the submissions (:mod:`autograder.engine.submissions`), loads each assignment's plan
once (:func:`autograder.engine.plan.load_plan`), skips what an earlier run already graded (a result
records a fingerprint of the submitted files and the instructor's notebooks, so a killed run
resumes and a changed submission is graded again; ``regrade`` forces chosen learners), grades the
rest up to ``jobs`` at a time (:func:`autograder.engine.grade_one.grade_submission`: one event loop, one
kernel and one referee process per job slot) and rebuilds ``grades.csv``
(:mod:`autograder.core.results`). ``shard`` splits a batch across machines (:mod:`autograder.engine.shards`,
which also merges their output folders and prints the summary).

Nothing under the submissions, the course or other learners' results is ever written.
"""

from __future__ import annotations

import asyncio
import difflib
import gc
import json
import os
import shutil
import signal
import tempfile
import zipfile
from dataclasses import asdict
from pathlib import Path

from tqdm.auto import tqdm

from autograder.core.errors import GradingInterrupted, UsageError
from autograder.core.files import REPO_ROOT, clean_text
from autograder.core.limits import EXECUTE_TIMEOUT_S
from autograder.core.limits import Limits
from autograder.core.results import (GradeResult, Status, load_result, load_results, result_path, write_atomically,
                                write_grades_csv)
from autograder.engine.grade_one import fingerprint, grade_submission, write_status_page
from autograder.engine.mounts import kernel_library
from autograder.engine.pages import load_record
from autograder.engine.shards import record_shard, shard_of
from autograder.engine.plan import AssignmentPlan, PlanError, load_plan
from autograder.engine.submissions import Catalogue, Submission, collect_submissions, extract_zip, newest_attempts_first


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
    """Submissions graded at once by default: one per CPU core this process may use, at most 8 and
    at most one per GiB of available memory.

    A job is a pipeline, not a process: its kernel, the grader (which relays every request) and its
    referee take turns, so one job keeps about one core busy. Measured on 2 cores with warm kernels
    (``benchmarks/results/grading-throughput.md``, 02-self-attention, 8 copies): 13.8 s with one
    job, 10.4 s with two, 11.0 s with three, 12.3 s with four; every job beyond the cores adds a
    referee to start (about 3 CPU seconds) and competes for them. Per submission the grader's own
    process used 0.23 of about 1.1 CPU seconds, so a single grader saturates near five cores' worth
    of jobs on light assignments: beyond 8, split the batch with ``--shard``. Each job holds a
    referee and a kernel (about 0.6 GiB resident together).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    jobs = min(cores, 8)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            available_kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
        jobs = min(jobs, available_kib // (1024 * 1024))
    except (OSError, StopIteration, ValueError, IndexError):
        pass  # not Linux: the cores alone decide
    return max(1, jobs)


def grade(submissions: Path | str, assignment: str, out_dir: Path | str, *, jobs: int | None = None,
          root: Path = REPO_ROOT, timeout: float = EXECUTE_TIMEOUT_S, limits: Limits | None = None,
          regrade: list[str] | tuple[str, ...] = (), shard: tuple[int, int] | None = None,
          progress: bool = True, grades_csv: bool = True) -> list[GradeResult]:
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
        grades_csv: rebuild ``grades.csv`` at the end; the command line leaves it to
            :func:`autograder.instructor.after_grading.publish`, which writes it once, hand scores merged.

    Returns:
        One result per submission found in this run (resumed ones included), sorted by
        assignment and student.

    Raises:
        UsageError: for a bad path or zip, an unknown assignment, ``jobs < 1``, bad limits, a bad
            shard or a ``regrade`` name that matches no submission.
        GradingInterrupted: on Ctrl-C, after saving every finished result and ``grades.csv``.
    """
    jobs, limits, out_dir = _checked_options(jobs, shard, limits or Limits(cell_timeout=float(timeout)), out_dir)
    archive = Path(submissions)
    with tempfile.TemporaryDirectory(prefix="autograder-") as tmp:
        tmp = Path(tmp)
        found, skipped = _find(archive, assignment, root, tmp, regrade, shard)
        out_dir.mkdir(parents=True, exist_ok=True)
        if shard is not None:
            record_shard(out_dir, shard)
        results = [_skipped_entry_row(out_dir, entry, archive) for entry in skipped]
        catalogue = Catalogue(root)
        catalogue_ids = {a: catalogue.grade_ids(a) for a in catalogue.notebooks}
        done, pending = _triage(found, _plans(found, root), out_dir, regrade)
        results += done
        if pending:
            try:
                results += asyncio.run(_grade_pending(pending, out_dir, tmp, limits, jobs, catalogue_ids,
                                                      progress, root))
            except KeyboardInterrupt:
                saved = load_results(out_dir)
                write_grades_csv(out_dir / "grades.csv", saved)
                raise GradingInterrupted(
                    f"interrupted: {len(saved)} finished result{'s' if len(saved) != 1 else ''} saved and "
                    f"listed in {out_dir / 'grades.csv'}; run the same command again to grade the rest") from None
    if grades_csv:
        write_grades_csv(out_dir / "grades.csv", load_results(out_dir))
    return sorted(results, key=lambda r: (r.assignment, r.student))


def _checked_options(jobs: int | None, shard: tuple[int, int] | None, limits: Limits,
                     out_dir: Path | str) -> tuple[int, Limits, Path]:
    """``(jobs, limits, out_dir)`` of :func:`grade`, checked (see there); the output folder resolved."""
    jobs = default_jobs() if jobs is None else jobs
    if shard is not None and not 1 <= shard[0] <= shard[1]:
        raise UsageError(f"shard {shard[0]}/{shard[1]}: need 1 <= i <= N")
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    try:
        limits.check()
    except ValueError as error:
        raise UsageError(str(error)) from error
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out must be a folder, but {out_dir} is a file")
    return jobs, limits, out_dir


def _find(submissions: Path, assignment: str, root: Path, tmp: Path, regrade, shard: tuple[int, int] | None
          ) -> tuple[list[Submission], list[str]]:
    """The submissions of this run (a zip extracted into ``tmp``), each learner's newest attempt first,
    only the shard's learners; and the zip entries that were not extracted."""
    skipped: list[str] = []
    if submissions.is_file() and zipfile.is_zipfile(submissions) and submissions.suffix != ".ipynb":
        submissions, skipped = extract_zip(submissions, tmp / "zip")
    found = newest_attempts_first(collect_submissions(submissions, assignment, root=root))
    _check_regrade(regrade, found)
    if shard is not None:
        found = [s for s in found if shard_of(s.learner, shard[1]) == shard[0]]
        skipped = [entry for entry in skipped if shard_of(entry, shard[1]) == shard[0]]
    return found, skipped


def _plans(found: list[Submission], root: Path) -> dict[str, AssignmentPlan | str]:
    """Each assignment's plan, loaded once, or why it could not be prepared."""
    plans: dict[str, AssignmentPlan | str] = {}
    for name in sorted({s.assignment for s in found if s.assignment and not s.problem}):
        try:
            plans[name] = load_plan(name, root)
        except PlanError as error:
            plans[name] = f"the assignment could not be prepared: {error}"
    return plans


def _triage(found: list[Submission], plans: dict[str, AssignmentPlan | str], out_dir: Path, regrade
            ) -> tuple[list[GradeResult], list[tuple[Submission, AssignmentPlan, Path]]]:
    """Split the submissions into those done now, with their rows (a problem of the submission's own,
    written with its page; a result an earlier run finished), and those to grade."""
    done: list[GradeResult] = []
    pending: list[tuple[Submission, AssignmentPlan, Path]] = []
    seen: dict[tuple[str, str], int] = {}
    for submission in found:
        pair = (submission.learner, submission.assignment)
        seen[pair] = duplicate = seen.get(pair, -1) + 1
        plan = plans.get(submission.assignment)
        if duplicate and not submission.problem:
            submission.problem = (f"another submission of {clean_text(submission.learner)} for "
                                  f"{submission.assignment} was found; only the first is graded")
        if isinstance(plan, str) and not submission.problem:
            submission.problem = plan
        path = result_path(out_dir, submission.learner, submission.assignment, duplicate)
        if submission.problem:
            done.append(_problem_row(out_dir, submission, path, newest=not duplicate))
            continue
        previous = load_result(path)
        if _resumable(previous, submission, plan, out_dir, regrade):
            done.append(previous)
        else:
            pending.append((submission, plan, path))
    return done, pending


def _problem_row(out_dir: Path, submission: Submission, path: Path, *, newest: bool) -> GradeResult:
    """The saved row of a submission that cannot be graded; the learner's newest attempt also gets a
    page saying why."""
    result = GradeResult(clean_text(submission.student), submission.assignment, submission.problem,
                         lms_id=submission.lms_id, late=submission.late, submitted_at=submission.submitted_at,
                         fingerprint=fingerprint(submission, None), origin=clean_text(submission.origin),
                         files=submission.files, other_attempts=submission.other_attempts,
                         kind=submission.problem_kind)
    if newest:
        write_status_page(out_dir, submission, result)
    write_atomically(path, json.dumps(asdict(result), indent=1).encode("utf-8"))
    return result


def _resumable(previous: GradeResult | None, submission: Submission, plan: AssignmentPlan, out_dir: Path,
               regrade) -> bool:
    """Whether an earlier run's result stands: same files and instructor's notebooks, not a failure of
    the grader, not asked to be graded again, and its pages' records kept (a result of an older grader
    without them is graded again, so that its pages can show hand scores and lateness)."""
    return (previous is not None and previous.fingerprint == fingerprint(submission, plan)
            and previous.kind is not Status.GRADER_FAILED
            and all(load_record(out_dir, page) is not None for page in previous.feedback)
            and not {submission.student, submission.learner, clean_text(submission.learner)} & set(regrade))


SKIPPED_ZIP_ENTRY = ("not extracted from the zip: an absolute path, `..`, a link, or a name this file system "
                     "refuses; ask the learner to submit it again as a plain notebook file")


def _skipped_entry_row(out_dir: Path, entry: str, archive: Path) -> GradeResult:
    """The row of a zip entry :func:`autograder.engine.submissions.extract_zip` skipped (``entry``: its name in
    the zip, with the file system's reason when it refused the name), saved with the other results so
    that ``grades.csv`` has a row for every entry of the zip. Its learner is unknown: the entry's name
    stands in, and no feedback page is written."""
    name = clean_text(entry)
    result = GradeResult(name, "", f"not graded: {name} ({SKIPPED_ZIP_ENTRY})", origin=clean_text(archive))
    write_atomically(result_path(out_dir, name, ""), json.dumps(asdict(result), indent=1).encode("utf-8"))
    return result


async def _preflight(plans, workdir: Path, limits: Limits) -> None:
    """Start one kernel per assignment the way grading will and run its imports, before any submission
    (while the job slots' referees start, which takes as long).

    Raises:
        UsageError: with the cause and the fix on one line, when the kernel cannot (e.g. this Python's
            install of the course points at another checkout): otherwise every submission would wait
            out its time-outs before anything said why.
    """
    from autograder.engine.preflight import PreflightError, preflight

    for index, plan in enumerate(plans):
        imports = [statement for notebook in plan.notebooks.values() for statement in notebook.imports]
        try:
            await preflight(workdir / str(index), limits, kernel_library(plan), imports)
        except PreflightError as error:
            raise UsageError(f"{plan.name}: {error}") from None


async def _grade_pending(pending, out_dir: Path, tmp: Path, limits: Limits, jobs: int,
                         catalogue_ids: dict[str, set[str]], progress: bool, root: Path) -> list[GradeResult]:
    from autograder.engine.referee import RefereeProcess

    slots: asyncio.Queue[int] = asyncio.Queue()
    for slot in range(min(jobs, len(pending))):
        slots.put_nowait(slot)
    referees = [RefereeProcess(limits.memory_mb) for _ in range(min(jobs, len(pending)))]
    results: list[GradeResult] = []
    bar = tqdm(total=len(pending), desc="grading", unit="submission", disable=not progress)

    async def one(index: int, submission: Submission, plan: AssignmentPlan, path: Path) -> None:
        slot = await slots.get()
        if interrupted:                                # a slot that comes free after Ctrl-C starts nothing
            slots.put_nowait(slot)
            return
        workdir = tmp / "runs" / f"{index:05d}"
        try:
            result = await grade_submission(submission, plan, out_dir=out_dir, workdir=workdir,
                                            limits=limits, slot=slot, catalogue_ids=catalogue_ids,
                                            referee=referees[slot], root=root)
        finally:
            slots.put_nowait(slot)
            shutil.rmtree(workdir, ignore_errors=True)
        write_atomically(path, json.dumps(asdict(result), indent=1).encode("utf-8"))
        results.append(result)
        bar.update()

    # Ctrl-C cancels the batch and is remembered, so that it ends the run even where a cancellation is
    # absorbed on its way (asyncio's own handler only cancels, and a batch that absorbed it ran on to the end).
    interrupted: list[bool] = []
    batch = asyncio.current_task()

    def on_ctrl_c() -> None:
        interrupted.append(True)
        batch.cancel()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, on_ctrl_c)
    try:
        plans = {id(plan): plan for _, plan, _ in pending}.values()
        await asyncio.gather(_preflight(plans, tmp / "preflight", limits), *(r.prepare() for r in referees))
        await asyncio.gather(*(one(i, *task) for i, task in enumerate(pending)))
    except asyncio.CancelledError:
        if not interrupted:
            raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        bar.close()
        for referee in referees:
            await referee.close()
        # Ctrl-C reaches the kernels and referees too: a process that died of it is dropped with its pipes
        # still open, and if the garbage collector finalises it only after asyncio.run has closed the loop,
        # its transport's __del__ prints a traceback ("Event loop is closed") under the brief message. Collect
        # now, while the loop runs, so each one closes quietly.
        gc.collect()
    if interrupted:
        raise KeyboardInterrupt
    return results

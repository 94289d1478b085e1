"""Grading one submission: rebuild it on the plan, run it in the sandbox, score it, write its feedback.

The pipeline for one submission: :func:`autograder.engine.plan.assemble` rebuilds each notebook on the
instructor's plan; a sandboxed kernel (:mod:`autograder.engine.sandbox`, :mod:`autograder.engine.runner`) runs the
learner's cells while the job slot's referee (:mod:`autograder.engine.referee`) runs every test cell and
decides its verdict (:func:`run_notebook`); :func:`grade_submission` turns the verdicts into points
and writes the feedback page (:mod:`autograder.engine.feedback`). The batch around it is
:mod:`autograder.engine.batch`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.core.files import REPO_ROOT, NotebookError, clean_text, read_notebook
from autograder.core.limits import Limits
from autograder.core.outcomes import HINT_LINE, Failure
from autograder.core.results import GRADED, GradeResult, Status, feedback_folder, one_line, path_name, write_atomically
from autograder.engine import stop_reasons
from autograder.engine.answers import save_answers
from autograder.engine.disclosure import after_hidden_cell, hidden_check_in, runs_after_hidden_code, shown_test_reason
from autograder.engine.mounts import kernel_library
from autograder.engine.plan import HIDDEN_BEGIN, MANUAL, TASK, TEST, AssignmentPlan, assemble
from autograder.engine.policy import enforce
from autograder.engine.submissions import Submission, upload_language
from autograder.engine.pages import record_path, render_page, save_record
from course_runtime.language import ENGLISH, get_language, notebook_language, translate_message
from course_runtime.wire import RELEASE_REQUEST

GUARD_TIMEOUT_S = 30.0
# After a cell fails, drop the references Python and IPython keep to its traceback, so that memory
# a failed cell allocated (e.g. a memory bomb's) is freed before the next cell runs.
CLEANUP_CODE = ("import sys as _autograder_sys, gc as _autograder_gc\n"
                "_autograder_sys.last_type = _autograder_sys.last_value = _autograder_sys.last_traceback = None\n"
                "_autograder_sys.last_exc = None\n"
                "get_ipython().InteractiveTB.tb = get_ipython().last_execution_result = None\n"
                "_autograder_gc.collect()\ndel _autograder_sys, _autograder_gc\n")


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


async def run_notebook(kernel, referee, cells, imports: list[str], limits: Limits) -> list:
    """Run the cells of one rebuilt notebook; return one outcome per cell (None: not executed).

    Test cells do not run in the kernel: the referee runs them (see :mod:`autograder.engine.referee`) and
    calls into the kernel for the learner's code; the kernel runs every other code cell. Once a hidden
    test has called the learner's code, a failure is reported in words the learner's code cannot
    choose (:mod:`autograder.engine.disclosure`); its outputs reach the instructor's log only.
    """
    from autograder.core.outcomes import CellOutcome
    from autograder.engine.runner import AgentError, KernelStopped

    await referee.start_notebook(imports)
    outcomes: list = []
    deadline = time.monotonic() + limits.notebook_timeout
    stopped: str | None = None
    first_failure: str | None = None     # the first non-test cell that raised: the likely root cause
    hidden_ran = False                   # after a hidden test, the learner's code may hold its data
    for cell in cells:
        if cell.cell_type != "code" or not cell.source.strip():
            outcomes.append(None)
            continue
        remaining = deadline - time.monotonic()
        if stopped is None and remaining <= 0:
            stopped = stop_reasons.past_deadline(limits.notebook_timeout)
        if stopped is not None:
            outcomes.append(CellOutcome("not run", stopped))
            continue
        try:
            if cell.kind == TEST:
                outcome = await referee.run_test(cell.source, kernel, min(limits.cell_timeout, remaining))
                try:
                    await kernel.ask(RELEASE_REQUEST, GUARD_TIMEOUT_S)
                except AgentError:
                    pass  # the learner's code replaced the agent; only their own memory suffers
                if outcome.verdict is not None:
                    after_hidden = hidden_ran or runs_after_hidden_code(cell.source)
                    outcome = replace(outcome, reason=shown_test_reason(outcome.verdict, after_hidden=after_hidden))
                hidden_ran = hidden_ran or HIDDEN_BEGIN in cell.source
            else:
                outcome = await kernel.run(cell.source, min(limits.cell_timeout, remaining))
                if not outcome.ok:
                    await kernel.run(CLEANUP_CODE, GUARD_TIMEOUT_S, silent=True)
                if hidden_ran and outcome.status == "error":   # its message could carry hidden test data
                    outcome = replace(outcome, reason=after_hidden_cell(outcome))
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
    verdict = outcome.verdict
    if (first_failure is None or verdict is None or verdict.failure is not Failure.VISIBLE
            or verdict.exception != "NameError"):
        return outcome
    return replace(outcome, reason=f"an earlier cell failed: {one_line(first_failure, 200)}; "
                                   f"so this test fails with {outcome.reason}")


class _NotGraded(Exception):
    """A step found that the submission cannot be graded: ``status`` says why, ``kind`` is what became of it."""

    def __init__(self, status: str, kind: Status) -> None:
        super().__init__(status)
        self.status, self.kind = status, kind


async def grade_submission(submission: Submission, plan: AssignmentPlan, *, out_dir: Path, workdir: Path,
                           limits: Limits, slot: int, catalogue_ids: dict[str, set[str]],
                           referee, root: Path = REPO_ROOT) -> GradeResult:
    """Grade one submission and write its feedback; never raises (failures become the status).

    The steps: the submitted notebooks read (:func:`_read_submitted`) and rebuilt on the plan
    (:func:`_rebuilt`); each notebook of the assignment judged, run (:meth:`_Sandbox.run`), scored
    (:func:`_score`) and given its page's record (:func:`_page_record`); then its logs, answers and
    pages written (:func:`_publish`). A step that finds it cannot be graded says why (:class:`_NotGraded`).

    Args:
        submission: what to grade (its ``problem`` must be None).
        plan: its assignment's plan.
        out_dir: the output folder (feedback goes to ``feedback/<student>/<assignment>/``).
        workdir: an empty folder of the grader's for this submission's kernels.
        limits: the resource limits.
        slot: the job slot, which picks the kernel's user id.
        catalogue_ids: every assignment's grade ids, to name the assignment of a wrong notebook.
        referee: the :class:`autograder.engine.referee.RefereeProcess` of this job slot.
        root: the course repository ``grade`` was given (its ``zh/exercises`` give a Chinese page the
            course's cells in Chinese).
    """
    start = time.perf_counter()
    result = GradeResult(clean_text(submission.student), submission.assignment, status="",
                         lms_id=submission.lms_id, late=submission.late, submitted_at=submission.submitted_at,
                         fingerprint=fingerprint(submission, plan), origin=clean_text(submission.origin),
                         files=submission.files, other_attempts=submission.other_attempts)
    try:
        learner = _read_submitted(submission)
        assemblies = _rebuilt(plan, learner, catalogue_ids)
        sandbox = _Sandbox(Path(workdir), limits, slot, referee, kernel_library(plan))
        languages = {name: notebook_language(nb) for name, nb in learner.items()}
        records, runs = {}, {}
        for name, nb_plan in plan.notebooks.items():
            assembly = assemblies.get(name) or _unsubmitted(nb_plan, name)
            broken_rules = enforce(nb_plan, assembly)          # before anything of the learner's runs
            outcomes = await sandbox.run(name, nb_plan, assembly, learner.get(name))
            scores = _score(result, name, assembly.cells, outcomes)
            result.notes += assembly.notes
            runs[name] = (assembly.cells, outcomes)
            result.flags += [f"{name}: {rule}" for rule in broken_rules if f"{name}: {rule}" not in result.flags]
            language = languages.get(name, next(iter(languages.values()), ENGLISH))
            records[name] = _page_record(submission, plan.name, name, nb_plan, assembly, outcomes, scores,
                                         learner.get(name), language=language, root=root)
        _publish(out_dir, submission, plan.name, result, assemblies, runs, records)
    except _NotGraded as stop:
        result.status, result.kind = stop.status, stop.kind
    except Exception as error:  # the batch must survive anything one submission does
        result.status = stop_reasons.internal_error(f"{type(error).__name__}: {one_line(str(error))}")
        result.kind = Status.GRADER_FAILED
    finally:
        result.seconds = time.perf_counter() - start
        if not result.graded:
            write_status_page(out_dir, submission, result)
    return result


def _read_submitted(submission: Submission) -> dict:
    """The submitted notebooks, by the name of the assignment's notebook each is.

    Raises:
        _NotGraded: a notebook cannot be read (``Status.UNREADABLE``).
    """
    learner = {}
    for name, file in sorted(submission.notebooks.items()):
        try:
            learner[name] = read_notebook(file)
        except NotebookError as error:
            raise _NotGraded(f"unreadable notebook {file.name}: {one_line(str(error).split(': ', 1)[-1])}",
                             Status.UNREADABLE) from None
    return learner


def _rebuilt(plan: AssignmentPlan, learner: dict, catalogue_ids: dict[str, set[str]]) -> dict:
    """The submitted notebooks rebuilt on the plan (:func:`autograder.engine.plan.assemble`), by name.

    Raises:
        _NotGraded: they are another assignment's, or none of this one's cells are in them
            (``Status.WRONG_NOTEBOOK``, :func:`_wrong_notebook`).
    """
    assemblies = {name: assemble(nb_plan, learner[name]) for name, nb_plan in plan.notebooks.items()
                  if name in learner}
    wrong = _wrong_notebook(plan, learner.values(), catalogue_ids, matched=sum(a.matched for a in assemblies.values()))
    if wrong:
        raise _NotGraded(wrong, Status.WRONG_NOTEBOOK)
    return assemblies


def _unsubmitted(nb_plan, notebook: str):
    """A notebook of the assignment the learner did not submit: the blank release rebuilt on the plan,
    with a note that says so first."""
    assembly = assemble(nb_plan, _empty_notebook())
    assembly.notes.insert(0, _not_submitted(notebook))
    return assembly


@dataclass(frozen=True)
class _Sandbox:
    """Where one submission's notebooks run.

    Attributes:
        workdir: the grader's folder for the submission's kernels (one subfolder per notebook).
        limits: the resource limits.
        slot: the job slot, which picks the kernel's user id.
        referee: the job slot's :class:`autograder.engine.referee.RefereeProcess`.
        library: the reference modules its kernels hold (:func:`autograder.engine.mounts.kernel_library`).
    """

    workdir: Path
    limits: Limits
    slot: int
    referee: object
    library: tuple[str, ...]

    async def run(self, name: str, nb_plan, assembly, notebook) -> list:
        """Run one rebuilt notebook (``assembly``) in a fresh kernel with the referee (:func:`run_notebook`);
        return one outcome per cell, the tests' verdicts in the language of the learner's ``notebook``
        (:func:`in_learners_language`; None: not submitted). The kernel is stopped in every case.

        Raises:
            _NotGraded: the kernel did not start or the referee failed (``Status.GRADER_FAILED``: graded
                again on the next run), or the kernel was stopped (``Status.NOT_GRADED``).
        """
        from autograder.engine.referee import RefereeError
        from autograder.engine.runner import KernelDidNotStart, KernelStopped, SandboxedKernel

        kernel = SandboxedKernel(self.workdir / name, self.limits, self.slot, library=self.library)
        try:
            await self.referee.prepare()
            await kernel.start()
            outcomes = await run_notebook(kernel, self.referee, assembly.cells, nb_plan.imports, self.limits)
            return in_learners_language(assembly.cells, outcomes, notebook)
        except KernelDidNotStart as error:
            raise _NotGraded(str(error), Status.GRADER_FAILED) from None
        except KernelStopped as error:
            raise _NotGraded(str(error), Status.NOT_GRADED) from None
        except RefereeError as error:
            raise _NotGraded(stop_reasons.internal_error(str(error)), Status.GRADER_FAILED) from None
        finally:
            await kernel.stop()


def _score(result: GradeResult, notebook: str, cells, outcomes: list) -> dict[str, float | None]:
    """Points for one notebook's graded cells, by grade id (None: left to a human grader); each cell's
    points, maximum and why a test earned nothing go into ``result`` (keys ``"<notebook>:<grade id>"``),
    with a flag for a test during which the kernel's guard refused a switched-off built-in."""
    scores: dict[str, float | None] = {}
    for cell, outcome in zip(cells, outcomes):
        if cell.kind not in (TEST, MANUAL, TASK):
            continue
        key = f"{notebook}:{cell.key}"
        result.cell_max_scores[key] = cell.points
        if cell.kind == TEST:
            passed = outcome is not None and outcome.ok
            scores[cell.key] = result.cells[key] = cell.points if passed else 0.0
            if not passed:
                result.reasons[key] = one_line(outcome.reason if outcome else "not run")
            if outcome is not None and outcome.refused:
                result.flags.append(f"{notebook}: {cell.key}: {refusal_flag(outcome.refused)}")
        else:
            scores[cell.key] = result.cells[key] = None
            result.needs_manual_grade = True
    return scores


def _course_sources(nb_plan, assembly) -> dict[str, str]:
    """Each course cell's source as the page tells a course cell the learner left alone: the instructor's, or the
    learner's own copy where it is one the course shipped (the Chinese edition's setup cell and comments,
    :meth:`autograder.engine.plan.NotebookPlan.is_course_source`)."""
    shipped = {cell.key: cell.source for cell in assembly.cells
               if cell.key is not None and cell.origin == "yours" and nb_plan.is_course_source(cell.key, cell.source)}
    return {c.key: shipped.get(c.key, c.source) for c in nb_plan.cells}


def _page_record(submission: Submission, assignment: str, name: str, nb_plan, assembly, outcomes: list,
                 scores: dict[str, float | None], notebook, *, language: str, root: Path) -> dict:
    """The record of the feedback page of the assignment's notebook ``name``
    (:func:`autograder.engine.feedback.page_record`): what the learner submitted (``notebook``; None: not
    submitted) next to how it ran, in ``language``, the course's cells in that language from ``root``."""
    from autograder.engine.feedback import course_text, page_record, submitted_outputs

    return page_record(student=clean_text(submission.learner), assignment=assignment, notebook=name,
                       cells=assembly.cells, outcomes=outcomes, scores=scores, notes=assembly.notes,
                       hidden=nb_plan.hidden_lines, submitted=submitted_outputs(notebook, assembly.cells),
                       course_sources=_course_sources(nb_plan, assembly), attempt=submission.described(),
                       other_attempts=submission.other_attempts, language=language,
                       course_text=course_text(assignment, name, language, root))


def _publish(out_dir: Path, submission: Submission, assignment: str, result: GradeResult, assemblies: dict,
             runs: dict[str, tuple], records: dict[str, dict]) -> None:
    """Finish a graded submission: each notebook's run log (:func:`write_run_log`), the totals, the
    answers as graded (for hand grading by question and the similarity report) and the feedback pages
    (:func:`write_pages`)."""
    for name, (cells, outcomes) in runs.items():
        write_run_log(out_dir, submission, name, cells, outcomes)
    result.score = sum(v for v in result.cells.values() if v is not None)
    result.max_score = sum(result.cell_max_scores.values())
    save_answers(out_dir, submission.learner, assignment, assemblies, result.fingerprint)
    result.status, result.kind = GRADED, Status.GRADED
    result.feedback = write_pages(out_dir, submission, result, {f"{name}.html": r for name, r in records.items()})


FLAGGED_NAMES = 3


def refusal_flag(names: tuple[str, ...]) -> str:
    """The instructor's flag for a test during which the kernel's guard refused a switched-off built-in:
    ``names`` are those the test's guards switched off (which of them ran is only in the kernel's text,
    which the learner's code could write), the first :data:`FLAGGED_NAMES` of them shown."""
    shown = ", ".join(names[:FLAGGED_NAMES])
    more = f" and {len(names) - FLAGGED_NAMES} more" if len(names) > FLAGGED_NAMES else ""
    which = shown + more if len(names) == 1 else f"one of {shown}{more}"
    return f"a switched-off built-in ran during its tests ({which})"


def write_pages(out_dir: Path, submission: Submission, result: GradeResult, records: dict[str, dict]) -> list[str]:
    """Save one submission's page records and write its feedback pages, as the autograder alone left
    them (:func:`autograder.engine.pages.render_page`; ``grade`` and ``merge`` render them again with
    the hand scores and the late standing), into its folder (:func:`autograder.core.results.feedback_folder`);
    remove pages and records an earlier run left there (a notebook since renamed, a "not graded"
    page) and return the pages' paths relative to ``out_dir``."""
    folder = feedback_folder(out_dir, submission.learner, submission.assignment)
    pages = [(folder / name).relative_to(out_dir).as_posix() for name in records]
    for page, record in zip(pages, records.values()):
        save_record(out_dir, page, record)
        write_atomically(Path(out_dir) / page, render_page(record, result, automatic=result.score).encode("utf-8"))
    for stale in folder.glob("*.html"):
        if stale.name not in records:
            stale.unlink(missing_ok=True)
            record_path(out_dir, stale.relative_to(out_dir).as_posix()).unlink(missing_ok=True)
    return pages


RUN_LOG_MAX_CHARS = 1_000_000


def write_run_log(out_dir: Path, submission: Submission, notebook: str, cells, outcomes) -> Path:
    """Write what each cell printed in the grading kernel to ``<out>/logs/<learner>/<assignment>/<notebook>.txt``,
    for the instructor only (feedback never shows it: after a test has called the learner's code,
    what it prints could carry the test's inputs). Capped at :data:`RUN_LOG_MAX_CHARS`."""
    parts, size = [], 0
    for index, (cell, outcome) in enumerate(zip(cells, outcomes)):
        if outcome is None:
            continue
        text = "".join([f"--- cell {index} {cell.key or '(the learner’s own)'} [{cell.kind}]: {outcome.status}"
                        + (f": {outcome.reason}" if outcome.reason else "") + "\n"]
                       + [o.get("text", "") + ("" if o.get("text", "").endswith("\n") else "\n") for o in outcome.outputs])
        if size + len(text) > RUN_LOG_MAX_CHARS:
            parts.append("--- the rest is cut: the log reached its size limit\n")
            break
        parts.append(text)
        size += len(text)
    path = (Path(out_dir) / "logs" / path_name(submission.learner) / path_name(submission.assignment)
            / f"{notebook}.txt")
    write_atomically(path, "".join(parts).encode("utf-8", "replace"))
    return path


def write_status_page(out_dir: Path, submission: Submission, result: GradeResult) -> None:
    """Give a submission that could not be graded a feedback page that says why and what to submit
    again (``not-graded.html``), and list it in ``result.feedback``; never raises."""
    from autograder.engine.feedback import status_record

    try:
        record = status_record(student=clean_text(submission.learner), assignment=submission.assignment,
                               status=result.status, attempt=submission.described(),
                               other_attempts=submission.other_attempts, language=submission_language(submission))
        result.feedback = write_pages(out_dir, submission, result, {"not-graded.html": record})
    except Exception:                           # a page is a courtesy; the row says the same
        result.feedback = []


def submission_language(submission: Submission) -> str:
    """The language of the first of the submission's notebooks that can be read; for an upload that is
    not a notebook, that of a notebook inside it (a zip), else the course's (``$COURSE_LANGUAGE``, else
    English)."""
    for file in submission.notebooks.values():
        try:
            return notebook_language(read_notebook(file))
        except NotebookError:
            continue
    return upload_language(Path(submission.origin)) or get_language()


def in_learners_language(cells, outcomes: list, notebook) -> list:
    """The tests' verdicts in the language of the learner's notebook (the Chinese edition's messages
    come from ``course_runtime``'s catalogue; English ones are kept as they are). A visible test's
    failure shown in full is translated from its verdict's fields: the message and its hint, without
    the exception's name in front, which no catalogue entry has."""
    language = notebook_language(notebook) if notebook is not None else "en"
    return [replace(outcome, reason=_in_language(outcome, language))
            if outcome is not None and cell.kind == TEST and outcome.reason else outcome
            for cell, outcome in zip(cells, outcomes)]


def _in_language(outcome, language: str) -> str:
    """What a failed test says, in ``language`` (see :func:`in_learners_language`)."""
    verdict = outcome.verdict
    if verdict is not None and verdict.failure is Failure.HIDDEN_CHECK:
        return hidden_check_in(verdict, language)        # its author's words from the grader's own catalogue
    if verdict is None or verdict.failure not in (Failure.VISIBLE, Failure.TEST) or outcome.reason != verdict.text:
        return translate_message(outcome.reason, language)
    said = verdict.message + ("" if verdict.hint is None else HINT_LINE + verdict.hint)
    return f"{verdict.exception}: {translate_message(said, language)}" if said else verdict.exception


def _not_submitted(notebook: str) -> str:
    """The note on the page of a notebook of the assignment the learner did not submit."""
    return f"You did not submit {notebook}.ipynb; the blank release was graded."


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

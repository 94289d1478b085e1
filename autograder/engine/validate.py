"""``python -m autograder validate``: a learner's own check, with the visible tests only.

The notebook is rebuilt and run exactly as :mod:`autograder.engine.grade_one` grades it, against the
instructor's notebooks when the checkout has them, else against the released exercise
(:func:`_validation_plan`). It needs neither ``solutions/`` nor nbgrader.

Everything it says is in the notebook's language: written in English here, each line is looked up in
``course_runtime``'s ``messages`` catalogue (``python -m autograder i18n update`` collects this module's
sentences, see :data:`autograder.course.i18n.runtime_text.LEARNER_TEXT`); a Chinese learner is pointed
at the Chinese exercise (``zh/exercises/...``).
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.files import REPO_ROOT, NotebookError, read_notebook
from autograder.core.limits import Limits
from autograder.core.results import one_line
from autograder.engine.grade_one import in_learners_language, run_notebook
from autograder.engine.mounts import kernel_library
from autograder.engine.plan import (PACKAGED_EXERCISES, TEST, AssignmentPlan, assemble, load_plan, load_released_plan,
                             released_assignments, released_folders)
from autograder.engine.policy import enforce
from autograder.engine.submissions import (Catalogue, file_grade_ids, lms_file_stem, not_a_notebook, upload_language,
                                           zipped_notebooks)
from course_runtime.language import CHINESE, ENGLISH, get_language, notebook_language, translate_message

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
    stem = lms_file_stem(path.stem)
    by_name = [a for a, names in offered.items() if stem in names]
    if len(by_name) == 1:
        return by_name[0]
    ids = file_grade_ids(path)
    overlaps = sorted(((len(ids & set().union(*(file_grade_ids(p) for p in (exercises / a).glob("*.ipynb")))), a)
                       for a in offered), reverse=True)
    if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[1][0] < overlaps[0][0]):
        return overlaps[0][1]
    return ""


def _validation_plan(path: Path, assignment: str | None, root: Path) -> tuple[AssignmentPlan, str]:
    """The plan a learner's check runs on, and a phrase saying where it came from.

    The instructor's notebooks (``<root>/solutions/``) when they hold the assignment; otherwise the
    released exercise it was made from (:func:`autograder.engine.plan.released_folders`: ``<root>/exercises``,
    then the copy inside the installed package).

    Raises:
        UsageError: if no course notebooks are found, or the assignment cannot be told or is unknown.
    """
    catalogue = Catalogue(root)
    name = assignment or catalogue.guess(path)
    if name and name in catalogue.notebooks:
        return load_plan(name, root, visible_only=True), "the instructor's notebook, visible tests only"
    folders = released_folders(root)
    known = sorted(set(catalogue.notebooks).union(*(released_assignments(f) for f in folders)))
    if not known:
        solutions, exercises, packaged = Path(root) / "solutions", Path(root) / "exercises", PACKAGED_EXERCISES
        raise UsageError(f"no course notebooks found: neither {solutions} nor {exercises} nor the copy installed "
                         f"with the course package ({packaged}) exists; install the course package "
                         "(the setup cell of any course notebook does) or run this in a clone of the course")
    for folder in folders:
        offered = released_assignments(folder)
        name = assignment or _released_guess(path, folder, offered)
        if name in offered:
            return load_released_plan(name, folder), f"the released exercise in {folder}"
    names, file = ", ".join(known), path.name
    if assignment:
        raise UsageError(f"unknown assignment: {assignment}; the assignments are: {names}")
    raise UsageError(f"cannot tell which assignment {file} belongs to; pass --assignment (one of: {names})")


ALL_PASS = "all visible tests pass"
NOT_READY = "not ready: see above"
# Where the Chinese edition keeps its exercises, relative to the repository root.
EDITION_EXERCISES = {"zh_CN": "zh/exercises"}


def _language_of(path: Path) -> str:
    """The language of the notebook at ``path``; for a file that is not one, that of a notebook inside
    it (a zip), else Chinese under a ``zh`` folder (the Chinese edition's), else ``$COURSE_LANGUAGE``'s
    (English when unset)."""
    try:
        return notebook_language(read_notebook(path))
    except (NotebookError, OSError):
        pass
    return upload_language(path) or (CHINESE if "zh" in path.resolve().parts else get_language())


def _points(points: float) -> str:
    return "1 point" if points == 1 else f"{points:g} points"


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
        ``(ok, lines)``: whether every visible test passed and nothing needed repair, and a report
        whose last line is the verdict (:data:`ALL_PASS`, :data:`NOT_READY`, or that the tests pass
        on the course's current cells), in the notebook's language.

    Raises:
        UsageError: if the file is missing or is not a notebook (a zip, a PDF, ...: the message says
            what it is), the packages of the ``validate`` extra are not installed, or the assignment
            cannot be told or is unknown.
    """
    path = Path(notebook)
    if not path.is_file():
        raise UsageError(f"no such notebook: {path}")
    language = _language_of(path)
    try:
        ok, lines = _check(path, assignment, Path(root), limits or Limits(), language)
    except UsageError as error:
        message = translate_message(str(error), language)
        raise UsageError(message, said=_error_line(message, language)) from None
    return ok, [translate_message(line, language) for line in lines]


def _error_line(message: str, language: str) -> str:
    """The line the command line prints for a :class:`UsageError` of ``validate``, in ``language``."""
    return translate_message(f"error: {message}", language)


def _check(path: Path, assignment: str | None, root: Path, limits: Limits,
           language: str) -> tuple[bool, list[str]]:
    """:func:`validate`'s work, said in English (:func:`validate` translates it)."""
    what, file = not_a_notebook(path), path.name
    if what and zipped_notebooks(path):
        raise UsageError(f"{file} is not a notebook but {what}: validate the .ipynb file inside it, the notebook "
                         "you will submit (and submit that file itself, not the zip)")
    if what:
        raise UsageError(f"{file} is not a notebook but {what}: validate the .ipynb notebook you will submit")
    missing = _missing_for_validate()
    if missing:
        needed, command = ", ".join(missing), _validate_install_command()
        raise UsageError(f"validate runs your notebook in a kernel of its own and needs {needed}; "
                         f"install them with `{command}` (on Colab, in a cell: `%` before `pip`), "
                         "then run validate again")
    from autograder.engine.preflight import checkout_problem, preflight_fix

    problem = checkout_problem()
    if problem is not None:                    # the set-up, not the notebook: never a failed test of the learner's
        raise UsageError(f"validate cannot run notebooks with this Python, whatever they hold: {problem}")
    plan, origin = _validation_plan(path, assignment, root)
    name = plan.name
    try:
        learner = read_notebook(path)
    except NotebookError as error:
        return False, [f"this file cannot be graded: {error}", NOT_READY]
    stem = lms_file_stem(path.stem)
    nb_plan = plan.notebooks.get(stem) or next(iter(plan.notebooks.values()))
    assembly = assemble(nb_plan, learner)
    enforce(nb_plan, assembly)                 # the grader's source check, worded like the kernel's guard
    exercise = f"{name}/{nb_plan.name}.ipynb"
    if assembly.matched == 0:
        return False, [f"none of the cells of {exercise} were found: is this the right notebook?", NOT_READY]
    lines = [f"checking {file} as {exercise} (against {origin})"]
    lines += [f"note: {note}" for note in assembly.notes]
    lines += [f"warning: {advice}" for advice in assembly.advice]   # costs nothing unless the tests run it

    async def run() -> list:
        from autograder.engine.referee import RefereeProcess
        from autograder.engine.runner import SandboxedKernel

        referee = RefereeProcess(limits.memory_mb)
        with tempfile.TemporaryDirectory(prefix="autograder-validate-") as tmp:
            kernel = SandboxedKernel(Path(tmp) / "kernel", limits, 0, library=kernel_library(plan))
            try:
                await referee.prepare()
                try:
                    await kernel.start()
                except KernelStopped as error:     # the set-up, not the notebook: say how to fix it
                    raise UsageError(preflight_fix(str(error))) from None
                return await run_notebook(kernel, referee, assembly.cells, nb_plan.imports, limits)
            finally:
                await kernel.stop()
                await referee.close()

    from autograder.engine.referee import RefereeError
    from autograder.engine.runner import KernelStopped

    try:
        outcomes = asyncio.run(run())
    except (KernelStopped, RefereeError) as error:
        return False, lines + [f"the notebook could not be run: {error}", NOT_READY]
    passed = True
    outcomes = in_learners_language(assembly.cells, outcomes, learner)
    for cell, outcome in zip(assembly.cells, outcomes):
        if cell.kind != TEST:
            continue
        ok = outcome is not None and outcome.ok
        passed &= ok
        key = cell.key
        if ok:
            lines.append(f"passed  {key}")
        else:
            reason = one_line(outcome.reason, 500) if outcome else "not run"
            lines.append(f"FAILED  {key}: {reason}")
    blank = _blank_written_answers(nb_plan, assembly)
    for key, points in blank:
        worth = _points(points)
        lines.append(f"blank: the written answer {key} is still the released placeholder; it is worth {worth}, "
                     "graded by your instructor: write your answer before submitting")
    if passed and assembly.notes:
        return False, lines + [_repaired_but_passing(len(assembly.notes), name, nb_plan.name, root, language)]
    if passed and blank:
        # the tests pass and the notebook can be graded, so the status stays 0 (a learner may hand in
        # with an answer left out); the verdict says what is missing instead of reading as done
        worth = _points(sum(points for _, points in blank))
        if len(blank) == 1:
            return True, lines + [f"all visible tests pass, but 1 written answer is still blank "
                                  f"({worth} graded by your instructor)"]
        count = len(blank)
        return True, lines + [f"all visible tests pass, but {count} written answers are still blank "
                              f"({worth} graded by your instructor)"]
    return passed, lines + [ALL_PASS if passed else NOT_READY]


def _blank_written_answers(nb_plan, assembly) -> list[tuple[str, float]]:
    """The written answers (cells graded by hand) left as released, or missing: ``(grade id, points)``."""
    from autograder.engine.answers import is_blank
    from autograder.engine.plan import MANUAL

    sources = {cell.key: cell.source for cell in assembly.cells if cell.kind == MANUAL}
    return [(cell.key, cell.points) for cell in nb_plan.cells
            if cell.kind == MANUAL and is_blank(sources.get(cell.key, cell.released), cell.released)]


def _repaired_but_passing(repairs: int, assignment: str, notebook: str, root: Path, language: str = ENGLISH) -> str:
    """The verdict when every visible test passes on the course's current cells but the notebook's own
    copies differ (an exercise downloaded before a course update, or edited): say so plainly, and
    what to download to see the cells grading uses (the exercise of the learner's edition)."""
    relative = "/".join((EDITION_EXERCISES.get(language, "exercises"), assignment, notebook + ".ipynb"))
    try:
        from autograder.core.repository import colab_url

        link = colab_url(relative, root)
        where = f"{relative} of the course repository, or open {link}"
    except Exception:                                  # no _config.yml (an installed package): name the file
        where = f"{relative} from the course's page, where you got the exercise"
    places = "1 place" if repairs == 1 else f"{repairs} places"
    return (f"all visible tests pass on the course's current cells. Your notebook differs from them in {places} "
            "(the notes above: usually test cells from an older release of the exercise); grading uses the "
            "current cells, exactly as checked here, so you may submit as it is. To see the current cells "
            f"yourself, download the current exercise ({where}) and copy your answers into it.")

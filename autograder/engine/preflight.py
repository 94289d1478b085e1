"""The pre-flight check: is this Python set up to grade from this checkout, before any notebook runs?

``grade`` calls :func:`preflight` once per assignment before the first submission, and ``validate`` calls
:func:`checkout_problem` before it starts its kernel, so that a broken set-up is reported as the set-up
(one line: the cause and the fix) instead of as every submission's time-outs or a learner's failed test.
Two checks, each deciding on data, never on the words of an error message:

1. :func:`checkout_problem`: where a kernel of this Python imports the course's packages from, asked of
   a fresh interpreter with a kernel's environment (:data:`LOCATE`, JSON on its standard output) and
   compared with the repository root of the ``autograder`` package that runs. A venv serves one
   checkout: a second clone graded with the first clone's venv (``pip install -e .`` wrote the first
   clone's folders into it) has kernels that import the first clone's packages, or none at all inside
   the sandbox, which mounts this checkout's.
2. :func:`preflight`: one kernel started the way grading will, which runs the assignment's imports in
   a cell that reports a failing import as one JSON line (:func:`import_probe`: the exception's class
   and, for an ``ImportError``, the module's ``name``); :func:`preflight_fix` chooses the fix from those
   fields.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.core.files import REPO_ROOT
from autograder.core.limits import Limits
from autograder.engine import sandbox
from autograder.engine.runner import KernelStopped, SandboxedKernel

PREFLIGHT_TIMEOUT_S = 25.0
# The packages a grading kernel imports from the checkout, and the one it cannot start without.
CHECKOUT_PACKAGES = ("course_runtime", "transformer_core")
KERNEL_PACKAGES = CHECKOUT_PACKAGES + ("ipykernel",)
# Run as ``python -c LOCATE NAME...``: where each package would be imported from, as JSON
# ``{name: its __init__.py, or null}``, without importing it.
LOCATE = (
    "import importlib.util, json, sys\n"
    "def origin(name):\n"
    "    try:\n"
    "        spec = importlib.util.find_spec(name)\n"
    "    except (ImportError, ValueError):\n"
    "        return None\n"
    "    return spec.origin if spec is not None else None\n"
    "print(json.dumps({name: origin(name) for name in sys.argv[1:]}))\n"
)
# How the pre-flight cell's report line starts.
PROBE_MARK = "autograder-preflight: "


class PreflightError(Exception):
    """The grading kernel cannot run what an assignment needs; the message gives the cause and the fix."""


@dataclass(frozen=True)
class ImportFailure:
    """An import of the assignment's that failed in the pre-flight kernel, as the kernel reported it.

    Attributes:
        exception: the exception's class name (``"ModuleNotFoundError"``, ``"ImportError"``, ...).
        module: the module it could not import (the exception's ``name``), or None when it has none.
        message: the exception's message, for the instructor.
    """

    exception: str
    module: str | None
    message: str


def package_origins(python: str = sys.executable, names: tuple[str, ...] = KERNEL_PACKAGES) -> dict[str, str | None]:
    """Where a kernel of ``python`` imports each of ``names`` from: ``{name: the package's __init__.py, or
    None when it cannot}``, asked of a fresh interpreter in a kernel's environment (no ``PYTHONPATH``),
    started in an empty folder so that the current folder does not count (it does for ``python -m
    autograder``, not for a kernel).

    Raises:
        PreflightError: when ``python`` cannot answer at all.
    """
    with tempfile.TemporaryDirectory(prefix="autograder-locate-") as folder:
        env = sandbox.kernel_environment(Path(folder), isolate=False, workdir=Path(folder))
        run = subprocess.run([python, "-c", LOCATE, *names], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
    try:
        found = json.loads(run.stdout)
    except ValueError:
        found = None
    if run.returncode != 0 or not isinstance(found, dict):
        raise PreflightError(f"{python} could not say where it imports the course's packages from: "
                             f"{' '.join(run.stderr.split())[-300:]}")
    return {name: found.get(name) if isinstance(found.get(name), str) else None for name in names}


def checkout_problem(root: Path = REPO_ROOT, origins: dict[str, str | None] | None = None) -> str | None:
    """What keeps this Python's kernels from using the checkout at ``root``, on one line; None when
    nothing does.

    Args:
        root: the checkout whose ``python -m autograder`` runs (default: the one this package is in).
        origins: where the kernels import each package from (default: :func:`package_origins`).

    Example:
        >>> checkout_problem(Path("/b"), {"course_runtime": "/a/course_runtime/__init__.py",
        ...                               "transformer_core": "/a/transformer_core/__init__.py", "ipykernel": "/x"})[:50]
        'this venv was installed for another checkout, /a: '
    """
    origins = package_origins() if origins is None else origins
    root = Path(root).resolve()
    missing = [name for name in KERNEL_PACKAGES if origins.get(name) is None]
    python = sys.executable
    if missing:
        names = ", ".join(missing)
        return (f"this Python ({python}) cannot give a kernel {names}: the course is not installed in it. "
                f"Run `make setup` in {root} and use the Python of the venv it makes (.venv/bin/python)")
    elsewhere = {name: Path(origins[name]).resolve().parent for name in CHECKOUT_PACKAGES
                 if Path(origins[name]).resolve().parent != root / name}
    if not elsewhere:
        return None
    other, packages = next(iter(elsewhere.values())).parent, ", ".join(elsewhere)
    return (f"this venv was installed for another checkout, {other}: its kernels import "
            f"{packages} from there, not from this checkout ({root}). A venv serves one checkout: "
            f"run `make setup` here and use its .venv/bin/python, or point VENV at a venv of this checkout's "
            f"own (`make setup VENV=...`); installing this checkout into that venv would break {other}")


def import_probe(imports: list[str]) -> str:
    """The pre-flight cell: ``imports`` (statements, in order, each once) run in a ``try``; a failure is
    printed as one line, :data:`PROBE_MARK` and JSON (``exception``, ``module``, ``message``)."""
    statements = "\n".join(dict.fromkeys(imports)) or "pass"
    return ("import json as _preflight_json\n"
            "try:\n"
            + textwrap.indent(statements, "    ") + "\n"
            "except Exception as _preflight_error:\n"
            f"    print({PROBE_MARK!r} + _preflight_json.dumps({{'exception': type(_preflight_error).__name__, "
            "'module': getattr(_preflight_error, 'name', None), 'message': str(_preflight_error)[:400]}))\n")


def import_failure(outputs: list[dict]) -> ImportFailure | None:
    """The failure the pre-flight cell reported in its ``outputs`` (a :class:`CellOutcome`'s), or None."""
    for output in outputs:
        if output.get("kind") != "stdout":
            continue
        for line in output.get("text", "").splitlines():
            if not line.startswith(PROBE_MARK):
                continue
            try:
                fields = json.loads(line[len(PROBE_MARK):])
            except ValueError:
                continue
            if isinstance(fields, dict) and isinstance(fields.get("exception"), str):
                module = fields.get("module")
                return ImportFailure(fields["exception"], module if isinstance(module, str) else None,
                                     str(fields.get("message", "")))
    return None


async def preflight(workdir: Path, limits: Limits, library: tuple[str, ...], imports: list[str]) -> None:
    """Check that this Python's kernels use this checkout (:func:`checkout_problem`), then start one kernel
    the way grading will and run the assignment's imports in it, so that a broken set-up is reported
    before the first submission instead of after every submission's time-outs.

    Args:
        workdir: an empty folder of the grader's for this kernel.
        limits: the grading limits (the start-up time is capped at :data:`PREFLIGHT_TIMEOUT_S`).
        library: the reference modules the assignment's kernels mount.
        imports: the import statements of the assignment's course cells.

    Raises:
        PreflightError: one line: what failed and what to do.
    """
    problem = checkout_problem()
    if problem is not None:
        raise PreflightError(f"the grading kernel cannot use this checkout: {problem}.")
    quick = replace(limits, startup_timeout=min(limits.startup_timeout, PREFLIGHT_TIMEOUT_S))
    kernel = SandboxedKernel(Path(workdir), quick, 0, library=library)
    try:
        try:
            await kernel.start()
        except KernelStopped as error:
            raise PreflightError(preflight_fix(str(error))) from None
        outcome = await kernel.run(import_probe(imports), PREFLIGHT_TIMEOUT_S)
        failure = import_failure(outcome.outputs)
        if failure is not None:
            raise PreflightError(preflight_fix(f"the assignment's imports failed in the kernel: {failure.exception}: "
                                               f"{failure.message}", failure))
        if not outcome.ok:
            raise PreflightError(preflight_fix(f"the assignment's imports failed in the kernel: {outcome.reason}"))
    finally:
        await kernel.stop()


def preflight_fix(cause: str, failure: ImportFailure | None = None) -> str:
    """``cause`` and the fix, on one line; the fix is chosen on ``failure``'s fields (a module of the
    course's or another package that could not be found), never on the words of ``cause``."""
    cause = " ".join(cause.split())[:400]
    missing = failure.module if failure is not None and failure.exception == "ModuleNotFoundError" else None
    if missing is not None and missing.split(".")[0] in CHECKOUT_PACKAGES + ("autograder", "ipykernel"):
        fix = ("this Python cannot give the kernel the course's packages: run `make setup` in the course's folder "
               "and grade with the Python of the venv it makes, then grade again")
    elif missing is not None:
        fix = f"install the package that provides {missing} into the Python you grade with, then grade again"
    else:
        fix = "check that `python -m autograder validate` works on the released exercise, then grade again"
    return f"the grading kernel does not work: {cause}. Fix: {fix}."

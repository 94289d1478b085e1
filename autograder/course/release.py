"""The course's assignments and ``python -m autograder generate``.

An assignment is a folder ``solutions/<NN-slug>/`` holding nbgrader source notebooks. Generating
it runs nbgrader's ``generate_assignment`` machinery (clear solutions, remove hidden tests, lock
cells, compute checksums) in a throwaway course directory and writes the result, in normal form,
to ``exercises/<NN-slug>/``. Grading does not use nbgrader's gradebook: it reads the source
notebooks directly (see :mod:`autograder.engine.plan` and :mod:`autograder.engine.batch`).

``python -m autograder release TAG`` (:func:`release`) pins a term's notebooks to a git tag: it sets
``repository.release`` in ``_config.yml``, points every link at the tag, regenerates the exercises
and prints the git commands that commit, tag and push (it runs none of them).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from autograder.core.errors import NbgraderRunError, UsageError
from autograder.core.files import REPO_ROOT, list_assignments, read_notebook
from autograder.core.limits import EXECUTE_TIMEOUT_S
from autograder.core.repository import ConfigError, ref_problem, repository_settings
from autograder.course.nbgrader_config import COURSE_ID, course_config
from autograder.course.notebooks import (LINKED_DOCUMENTS, NOTEBOOK_FOLDERS, dumps_normalized, repoint_all,
                                         repository_link_problems)

IGNORED_NAMES = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc", ".DS_Store")
NBGRADER_LOGGER = "autograder.nbgrader"


class ReleaseError(RuntimeError):
    """A release could not be completed (a notebook unreadable, a link left pointing elsewhere)."""


def resolve_assignments(names: Iterable[str] | None, root: Path = REPO_ROOT) -> list[str]:
    """Check assignment names against ``solutions/``; ``None``, empty or ``["all"]`` means all of them.

    Raises:
        UsageError: naming the unknown assignments and the ones that exist.
    """
    available = list_assignments(root)
    names = [n.strip("/") for n in (names or [])]
    if not names or names == ["all"]:
        return available
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UsageError(f"unknown assignment{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}; "
                         f"the assignments under {Path(root) / 'solutions'} are: "
                         f"{', '.join(available) or '(none)'}")
    return list(dict.fromkeys(names))


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def captured_nbgrader_log() -> Iterator[tuple[logging.Logger, list[logging.LogRecord]]]:
    """Give nbgrader a logger whose warnings and errors are collected instead of printed."""
    logger = logging.getLogger(NBGRADER_LOGGER)
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    handler = _Collect()
    logger.addHandler(handler)
    try:
        yield logger, handler.records
    finally:
        logger.removeHandler(handler)


_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))(?::\s*(.*))?$")


def error_summary(records: list[logging.LogRecord]) -> str:
    """Condense nbgrader's error records into one line, preferring the exception that stopped it."""
    errors = [r.getMessage() for r in records if r.levelno >= logging.ERROR]
    for message in reversed(errors):
        for line in reversed(message.strip().splitlines()):
            match = _EXCEPTION_LINE.match(line.strip())
            if match:
                name, detail = match.groups()
                return f"{name}: {detail}" if detail else name
    return errors[0].strip().splitlines()[0] if errors else "nbgrader failed without saying why"


def _library_root() -> Path:
    import transformer_core

    return Path(transformer_core.__file__).resolve().parents[1]


@contextlib.contextmanager
def nbgrader_environment() -> Iterator[None]:
    """Set the environment nbgrader and its kernels need, and restore it afterwards.

    nbgrader runs the ``alembic`` command when it creates a gradebook, so the folder of this
    Python's executables goes first on ``PATH``; kernels must import the same ``transformer_core``
    as the grader, so its folder goes first on ``PYTHONPATH``.
    """
    saved = {key: os.environ.get(key) for key in ("PATH", "PYTHONPATH")}
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([bin_dir, saved["PATH"] or os.defpath])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(_library_root())] + ([saved["PYTHONPATH"]] if saved["PYTHONPATH"] else []))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_converter(converter_class: type, config, *, assignment: str, student: str | None = None) -> None:
    """Run one nbgrader converter (GenerateAssignment, Autograde, GenerateFeedback) for one assignment.

    Args:
        converter_class: the nbgrader converter class.
        config: its traitlets ``Config`` (see :func:`autograder.course.nbgrader_config.course_config`).
        assignment: the assignment id.
        student: the student id, for converters that work on submissions.

    Raises:
        NbgraderRunError: with nbgrader's own explanation when the conversion fails.
    """
    from nbgrader.converters.base import NbGraderException
    from nbgrader.coursedir import CourseDirectory

    with captured_nbgrader_log() as (logger, records), nbgrader_environment(), warnings.catch_warnings():
        # nbgrader's own SQLAlchemy and nbformat usage warns; none of it concerns the user.
        warnings.simplefilter("ignore")
        coursedir = CourseDirectory(config=config, log=logger)
        coursedir.assignment_id = assignment
        if student is not None:
            coursedir.student_id = student
        converter = converter_class(coursedir=coursedir, config=config, log=logger)
        converter.force = True
        try:
            converter.start()
        except NbGraderException as error:
            raise NbgraderRunError(error_summary(records) if records else str(error)) from error


@functools.cache
def _empty_gradebook() -> bytes:
    """The bytes of a new, empty course gradebook, made once per process.

    Creating a gradebook makes nbgrader run the ``alembic`` command, which takes seconds; every
    course directory starts from a copy instead.
    """
    from nbgrader.api import Gradebook

    with tempfile.TemporaryDirectory(prefix="autograder-gradebook-") as tmp, nbgrader_environment():
        path = Path(tmp) / "gradebook.db"
        with Gradebook(f"sqlite:///{path}", COURSE_ID):
            pass
        return path.read_bytes()


def build_course(assignment: str, course_dir: Path, *, root: Path = REPO_ROOT,
                 timeout: int = EXECUTE_TIMEOUT_S):
    """Create a throwaway nbgrader course directory for one assignment and release it there.

    ``course_dir`` receives ``source/<assignment>/`` (a copy of ``solutions/<assignment>/``),
    ``release/<assignment>/`` (nbgrader's raw release) and ``gradebook.db`` (the assignment's cells,
    points and checksums, hidden tests included). The originals are only read.

    Returns:
        The course's nbgrader ``Config``.
    """
    course_dir = Path(course_dir)
    source = Path(root) / "solutions" / assignment
    if not source.is_dir():
        raise UsageError(f"no assignment folder {source}")
    shutil.copytree(source, course_dir / "source" / assignment, ignore=IGNORED_NAMES)
    (course_dir / "gradebook.db").write_bytes(_empty_gradebook())
    config = course_config(course_dir, source="source", release="release", timeout=timeout)
    from nbgrader.converters import GenerateAssignment
    run_converter(GenerateAssignment, config, assignment=assignment)
    return config


def generate(assignments: Iterable[str] | None = None, *, root: Path = REPO_ROOT,
             output_dir: Path | None = None) -> list[Path]:
    """Regenerate the released exercises from the solutions.

    Each ``<output_dir>/<assignment>/`` is replaced by nbgrader's release of
    ``solutions/<assignment>/`` with every notebook in normal form. The output depends only on the
    solutions, so a drift test can regenerate into a temporary folder and compare.

    Args:
        assignments: assignment names; ``None`` or empty means all.
        root: the repository root.
        output_dir: where the assignment folders go; default ``<root>/exercises``.

    Returns:
        The files written, sorted.

    Raises:
        UsageError: for an unknown assignment.
        NbgraderRunError: when nbgrader rejects a source notebook (e.g. bad nbgrader metadata).
    """
    root = Path(root)
    names = resolve_assignments(assignments, root)
    output_dir = Path(output_dir) if output_dir is not None else root / "exercises"
    written: list[Path] = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="autograder-generate-") as tmp:
            try:
                build_course(name, Path(tmp), root=root)
            except NbgraderRunError as error:
                raise NbgraderRunError(f"generating {name} failed: {error}") from error
            release = Path(tmp) / "release" / name
            files = {p.relative_to(release): p for p in sorted(release.rglob("*")) if p.is_file()}
            rendered = {rel: (dumps_normalized(read_notebook(path)).encode("utf-8") if path.suffix == ".ipynb"
                              else path.read_bytes()) for rel, path in files.items()}
        destination = output_dir / name
        if destination.exists():
            shutil.rmtree(destination)
        for rel, data in rendered.items():
            target = destination / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written.append(target)
    return sorted(written)


# --- Releases -------------------------------------------------------------------------------------

_RELEASE_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_COMMIT_ID = re.compile(r"[0-9a-f]{7,40}")


def _tag_exists(tag: str, root: Path) -> bool:
    """Whether ``root`` is a git repository that already has tag ``tag`` (False without git)."""
    try:
        result = subprocess.run(["git", "-C", str(root), "rev-parse", "-q", "--verify", f"refs/tags/{tag}"],
                                capture_output=True, text=True, check=False)
    except OSError:
        return False
    return result.returncode == 0


def check_release_tag(tag: str, branch: str, root: Path = REPO_ROOT) -> None:
    """Refuse a tag name that a course release cannot use.

    Raises:
        UsageError: if ``tag`` is not a valid git tag, holds characters other than letters, digits,
            ``. _ + -`` (a ``/`` would make ``/blob/TAG/`` links ambiguous), looks like a commit id,
            is the branch's name, or already exists in ``root``'s git repository.
    """
    example = "use a name such as v2026.1 (or v2026.1.1 for a fix during the term)"
    problem = ref_problem(tag)
    if problem is None and not _RELEASE_TAG.fullmatch(tag):
        problem = "it may only hold letters, digits, '.', '_', '+' and '-', starting with a letter or digit"
    if problem is None and _COMMIT_ID.fullmatch(tag):
        problem = "it looks like a commit id, which would make links ambiguous"
    if problem is None and tag == branch:
        problem = f"it is the name of the branch (repository.branch: {branch})"
    if problem:
        raise UsageError(f"cannot release as {tag!r}: {problem}; {example}")
    if _tag_exists(tag, root):
        raise UsageError(f"tag {tag} already exists in {root}; a published tag must not move, so pick a new "
                         f"name (e.g. {tag}.1)")


_TOP_LEVEL_KEY = re.compile(r"^[^\s#]")
_RELEASE_KEY = re.compile(r"^(?P<indent>[ \t]+)#?[ \t]*release:")
_BRANCH_KEY = re.compile(r"^(?P<indent>[ \t]+)branch:")


def set_release(root: Path, tag: str) -> None:
    """Set ``repository.release: "TAG"`` in ``root``'s ``_config.yml``, keeping its comments.

    Replaces a ``release:`` line of the ``repository`` block (commented out or not), else adds one
    after ``branch:``.

    Raises:
        ConfigError: if the file has no ``repository:`` block with a ``branch:`` line, or the edited
            file does not read back with the new release.
    """
    path = Path(root) / "_config.yml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if re.match(r"^repository:\s*(#.*)?$", line))
    except StopIteration:
        raise ConfigError(f"{path} has no top-level repository: block; add one with url and branch") from None
    end = next((i for i in range(start + 1, len(lines)) if _TOP_LEVEL_KEY.match(lines[i])), len(lines))
    block = range(start + 1, end)
    existing = next((i for i in block if _RELEASE_KEY.match(lines[i])), None)
    branch = next((i for i in block if _BRANCH_KEY.match(lines[i])), None)
    if existing is not None:
        lines[existing] = f'{_RELEASE_KEY.match(lines[existing])["indent"]}release: "{tag}"\n'
    elif branch is not None:
        lines.insert(branch + 1, f'{_BRANCH_KEY.match(lines[branch])["indent"]}release: "{tag}"\n')
    else:
        raise ConfigError(f"{path}: the repository: block has no branch: line; add one (e.g. branch: main)")
    path.write_text("".join(lines), encoding="utf-8")
    if repository_settings(root).release != tag:
        raise ConfigError(f"{path}: could not set repository.release; set it by hand to \"{tag}\"")


def release_commands(tag: str, branch: str, root: Path = REPO_ROOT) -> list[str]:
    """The git commands that publish a release prepared by :func:`release`, in order.

    The commit comes first so that the tag points at files that already say ``@TAG``; the tag is
    pushed before the branch so that the links of the book deployed from the branch resolve.
    """
    paths = [name for name in ("_config.yml", *NOTEBOOK_FOLDERS, *LINKED_DOCUMENTS) if (Path(root) / name).exists()]
    return [
        f"git add -A -- {' '.join(shlex.quote(p) for p in paths)}",
        f'git commit -m "Release {tag}: pin setup cells, Colab badges and links to {tag}"',
        f'git tag -a {tag} -m "Course release {tag}"',
        f"git push origin {tag}",
        f"git push origin {shlex.quote(branch)}",
    ]


def release(tag: str, root: Path = REPO_ROOT) -> list[str]:
    """Prepare course release ``tag`` in the working tree of ``root``; commit, tag and push nothing.

    Sets ``repository.release`` in ``_config.yml``, points every setup cell, Colab badge, GitHub
    link and install line of :func:`autograder.course.notebooks.linked_paths` at ``@TAG`` / ``/blob/TAG/``,
    regenerates every assignment's ``exercises/`` and checks that no link to the repository opens
    anything else.

    Returns:
        The git commands to run next (:func:`release_commands`).

    Raises:
        ConfigError: if ``_config.yml`` lacks ``repository.url`` or ``repository.branch``.
        UsageError: for a tag name that cannot be used (see :func:`check_release_tag`).
        ReleaseError: if a notebook cannot be read or a link still opens something else.
        NbgraderRunError: if nbgrader rejects a source notebook.
    """
    root = Path(root)
    settings = repository_settings(root)
    check_release_tag(tag, settings.branch, root)
    set_release(root, tag)
    _changed, broken = repoint_all(root)
    if broken:
        raise ReleaseError("cannot repoint these notebooks; fix them and run the release again:\n  "
                           + "\n  ".join(broken))
    from autograder.course.i18n import edition

    generate(root=root)
    edition.build(root)                # the Chinese pages and exercises link to the release too
    problems = repository_link_problems(root)
    if problems:
        raise ReleaseError("these links still open another repository or ref; edit them to the form "
                           "python -m autograder normalize --repoint rewrites, then run the release again:\n  "
                           + "\n  ".join(problems))
    return release_commands(tag, settings.branch, root)

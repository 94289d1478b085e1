"""nbgrader configuration of the course, usable both as a Python module and as a config file.

``python -m autograder`` builds its configuration with :func:`course_config`. Instructors who
prefer nbgrader's own commands point them at this file (nbgrader has no ``--config`` flag; this is
the option that names a config file)::

    nbgrader autograde 02-self-attention --NbGrader.config_file=autograder/course/nbgrader_config.py
    nbgrader generate_feedback 02-self-attention --NbGrader.config_file=autograder/course/nbgrader_config.py

from the repository root with the course library importable (``make setup``). On a JupyterHub
with nbgrader's exchange, set ``TRANSFORMER_CORE_COURSE_ROOT`` to the hub's course directory (with
``source`` linking to ``solutions/``): nbgrader's folders and gradebook then live there under their
usual names (``source``, ``release``, ``submitted``, ``feedback``). Without it, the course layout is
``solutions/`` (nbgrader's source) and ``exercises/`` (its release) in the repository; the
gradebook and the ``submitted/``, ``autograded/`` and ``feedback/`` folders live outside the
repository, in :func:`grading_home` (``$TRANSFORMER_CORE_GRADING_HOME``, else
``$XDG_CACHE_HOME/transformer-core/nbgrader``, else ``~/.cache/transformer-core/nbgrader``), so
nothing learners submit can be committed by accident. Note that ``nbgrader generate_assignment``
writes ``exercises/`` without the course's normal form; ``python -m autograder generate`` is the
supported way to regenerate it.

The settings, and why:

- ``Execute.timeout`` (:data:`EXECUTE_TIMEOUT_S` seconds per cell): course tests run in seconds on
  a CPU; a cell that runs longer is stuck and gets an error, not the whole batch.
- ``OverwriteCells.add_missing_cells``: a test cell a learner deleted is put back and run.
- ``ClearSolutions`` stubs: what the blank exercise shows where a solution was.
- ``IgnorePattern.pattern``: harmless stderr (warnings, tqdm bars) is dropped before grading,
  because nbgrader gives 0 points to a test cell that wrote anything to stderr.
- ``GenerateFeedback.preprocessors``: feedback passes through
  :class:`HideHiddenTests`, so returned feedback never shows hidden tests.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from traitlets import Bool, Unicode
from traitlets.config import Config

from autograder.core.files import CODE_STUB, TEXT_STUB
from autograder.core.limits import EXECUTE_TIMEOUT_S
from autograder.engine.plan import HIDDEN_NOTE, strip_hidden_region
from course_runtime.language import notebook_language, translate

REPO_ROOT = Path(__file__).resolve().parents[2]
COURSE_ID = "transformer-core-mechanisms"
# nbgrader zeroes a test cell that writes to stderr; these stderr outputs are harmless.
STDERR_IGNORE_PATTERN = r"\w+Warning: |\d+%\|[^\n]*\|"
FEEDBACK_PREPROCESSORS = [
    "nbgrader.preprocessors.GetGrades",
    "autograder.course.nbgrader_config.HideHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]


def grading_home() -> Path:
    """Return the folder, outside the repository, for the gradebook and the grading folders.

    ``$TRANSFORMER_CORE_GRADING_HOME`` if set, else ``$XDG_CACHE_HOME/transformer-core/nbgrader``,
    else ``~/.cache/transformer-core/nbgrader``.
    """
    explicit = os.environ.get("TRANSFORMER_CORE_GRADING_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser().resolve() / "transformer-core" / "nbgrader"


def course_config(root: Path | str = REPO_ROOT, *, source: str = "solutions", release: str = "exercises",
                  workdir: Path | str | None = None, timeout: int = EXECUTE_TIMEOUT_S) -> Config:
    """Return the nbgrader ``Config`` of the course.

    Args:
        root: nbgrader's course root.
        source: the folder (relative to ``root``) holding the nbgrader source assignments.
        release: the folder (relative to ``root``) that receives the released assignments.
        workdir: where the gradebook and the submitted/autograded/feedback folders go. ``None``
            keeps them inside ``root`` under nbgrader's default names, which suits a throwaway
            course directory; give a folder outside the repository when ``root`` is the repository.
        timeout: seconds a single cell may run during autograding.
    """
    root = Path(root).resolve()
    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.source_directory = source
    c.CourseDirectory.release_directory = release
    if workdir is None:
        c.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    else:
        workdir = Path(workdir).resolve()
        c.CourseDirectory.submitted_directory = str(workdir / "submitted")
        c.CourseDirectory.autograded_directory = str(workdir / "autograded")
        c.CourseDirectory.feedback_directory = str(workdir / "feedback")
        c.CourseDirectory.solution_directory = str(workdir / "solution")
        c.CourseDirectory.source_with_tests_directory = str(workdir / "source_with_tests")
        c.CourseDirectory.db_url = f"sqlite:///{workdir / 'gradebook.db'}"
    c.Execute.timeout = int(timeout)
    # The kernel's own start-up warnings (e.g. about unencrypted local TCP) are not the learner's.
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
    c.OverwriteCells.add_missing_cells = True
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.ClearSolutions.text_stub = TEXT_STUB
    c.IgnorePattern.pattern = STDERR_IGNORE_PATTERN
    c.GenerateFeedback.preprocessors = list(FEEDBACK_PREPROCESSORS)
    return c



class HideHiddenTests(Preprocessor):
    """nbconvert preprocessor: remove hidden tests and their tracebacks from nbgrader's feedback, each hidden
    region replaced by :data:`autograder.engine.plan.HIDDEN_NOTE` in the notebook's language."""

    enabled = Bool(True, help="Whether to hide hidden tests").tag(config=True)

    # nbgrader spells these "delimeter"; the same names keep one config key for both preprocessors.
    begin_test_delimeter = Unicode("BEGIN HIDDEN TESTS", help="Opens a hidden region").tag(config=True)
    end_test_delimeter = Unicode("END HIDDEN TESTS", help="Closes a hidden region").tag(config=True)
    _note = HIDDEN_NOTE              # what a hidden region leaves, in the language of the notebook being read

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        """Every cell of ``nb``, its hidden regions' note in ``nb``'s language (``metadata.course.language``)."""
        self._note = translate(HIDDEN_NOTE, "messages", notebook_language(nb))
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple[NotebookNode, dict]:
        """Strip the hidden region of one cell and shorten its error tracebacks."""
        if cell.cell_type != "code":
            return cell, resources
        cell.source, removed = strip_hidden_region(cell.source, self.begin_test_delimeter,
                                                   self.end_test_delimeter, self._note)
        if removed:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


if "get_config" in globals():
    # Executed by nbgrader as a config file: make `autograder` importable and apply the settings.
    # With $TRANSFORMER_CORE_COURSE_ROOT (a JupyterHub course directory whose source/ links to the
    # repository's solutions/), nbgrader's folders live in that directory under their usual names;
    # otherwise the course is the repository and the folders go to grading_home().
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    _course_root = os.environ.get("TRANSFORMER_CORE_COURSE_ROOT")
    if _course_root:
        _settings = course_config(Path(_course_root).expanduser(), source="source", release="release")
    else:
        _home = grading_home()
        _home.mkdir(parents=True, exist_ok=True)
        _settings = course_config(REPO_ROOT, workdir=_home)
    get_config().merge(_settings)  # noqa: F821  (injected by traitlets)

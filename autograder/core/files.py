"""The course's files as the grader reads them: the repository, its assignments, a notebook read safely.

An assignment is a folder ``solutions/<NN-slug>/`` of nbgrader source notebooks
(:func:`list_assignments`, :func:`assignment_notebooks`); :func:`read_notebook` reads one notebook
within a size limit and names the file in every error; :func:`clean_text` makes any text writable as
UTF-8. :data:`CODE_STUB` and :data:`TEXT_STUB` are what a released exercise shows where a solution was.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nbformat

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the blank exercise shows where a solution was (nbgrader's ClearSolutions stubs).
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError(\"replace this line with your code\")"
TEXT_STUB = "YOUR ANSWER HERE"


class NotebookError(Exception):
    """A notebook cannot be read or does not follow the course's conventions."""


def list_assignments(root: Path = REPO_ROOT) -> list[str]:
    """Return the names of the assignments: the folders of ``solutions/`` that hold notebooks."""
    base = Path(root) / "solutions"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.ipynb")))


def assignment_notebooks(assignment: str, root: Path = REPO_ROOT) -> list[str]:
    """Return the notebook names (without ``.ipynb``) of one assignment, sorted."""
    return sorted(p.stem for p in (Path(root) / "solutions" / assignment).glob("*.ipynb"))


def clean_text(text: object) -> str:
    """``text`` as a string that can be written as UTF-8: bytes that were not UTF-8 (surrogate
    escapes, as in file names) and other lone surrogates become U+FFFD."""
    text = str(text)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


def skip_iri_parser() -> None:
    """Keep this process from building a parser of RFC 3987 that it never uses.

    nbformat imports jsonschema, which imports ``rfc3987_syntax`` where it is installed (jupyter_events
    asks for it) for the ``iri`` formats of its optional format checker, and that import builds an
    Earley parser of the RFC's grammar: 1 CPU second in every process that reads a notebook (a command
    of ``python -m autograder``, a chapter's client in ``make book``, a test worker). nbformat validates
    notebooks without a format checker, so nothing here reads an IRI; a module that is ``None`` in
    ``sys.modules`` is one that jsonschema's import finds missing, and it goes on without those two
    formats, as where the package is not installed. Call it before the first ``import nbformat``."""
    sys.modules.setdefault("rfc3987_syntax", None)


# The largest notebook file read; a bigger one is reported, not parsed.
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Read a notebook as nbformat 4.

    Raises:
        NotebookError: naming the file when it is too large, not valid JSON (nested too deeply
            included) or not a notebook.
    """
    import nbformat

    try:
        size = Path(path).stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{path}: not a readable notebook (it is {size / 1024 ** 2:.0f} MiB; "
                                f"the limit is {MAX_NOTEBOOK_BYTES // 1024 ** 2} MiB)")
        return nbformat.read(str(path), as_version=4)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, nbformat.reader.NotJSONError) as error:
        raise NotebookError(f"{path}: not a readable notebook ({error})") from error
    except RecursionError:
        raise NotebookError(f"{path}: not a readable notebook (its JSON is nested too deeply)") from None
    except (KeyError, AttributeError, ValueError, TypeError, nbformat.ValidationError) as error:
        raise NotebookError(f"{path}: not a valid notebook ({error})") from error

"""The docstrings of the notebooks' code (the functions a learner writes, the helpers of the visible tests, an
exercise's given code): read, removed and translated without touching the code."""

from __future__ import annotations

from autograder.core.files import read_notebook
from autograder.course.i18n.extract import Page
from autograder.course.notebooks import SETUP_CELL_MARKERS
from autograder.engine.cells import docstring_offsets, fits_quotes
from autograder.engine.plan import hidden_spans


DOCSTRING_CONTEXT = "docstring"


def docstrings(source: str) -> list[str]:
    r"""The docstrings of the functions and classes of a code cell, exactly as written between their
    quotes (the indentation of their lines kept), so that a translation replaces them in place.

    Example:
        >>> docstrings("def f(x):\n    '''Double x.\n\n    Args:\n        x: a tensor.\n    '''\n    return 2 * x")
        ['Double x.\n\n    Args:\n        x: a tensor.\n    ']
    """
    return [source[start:end] for start, end, _ in docstring_offsets(source)]


def _replace_docstrings(source: str, replace) -> str:
    """``source`` with each docstring's text replaced by ``replace(text, quote)``."""
    out, last = [], 0
    for start, end, quote in docstring_offsets(source):
        out += [source[last:start], replace(source[start:end], quote)]
        last = end
    return "".join(out) + source[last:]


def without_docstrings(source: str) -> str:
    """A code cell with the text of its docstrings taken out (the quotes stay): what must be the same
    in both editions."""
    return _replace_docstrings(source, lambda body, quote: "")


def translate_docstrings(source: str, table: dict[str, str]) -> str:
    """A code cell with each docstring that has a translation in ``table`` replaced by it, in place
    (the cell's quotes, the translation's indentation); no other character of the cell changes.

    Raises:
        ValueError: a translation would end or change the docstring's literal (it holds the cell's
            quotes, a backslash, or ends with a quote); fix that msgstr in the catalogue.
    """
    def swap(body: str, quote: str) -> str:
        chinese = table.get(body, body)
        if chinese != body and not fits_quotes(chinese, quote):
            raise ValueError(f"the translation of the docstring {body.splitlines()[0][:60]!r} would change the "
                             f"code: it holds {quote} or a backslash, or ends with {quote[0]}; fix its msgstr")
        return chinese
    return _replace_docstrings(source, swap)


def solution_docstrings(page: Page) -> list[str]:
    """The distinct docstrings of a notebook's solution cells (nbgrader ``solution: true``): the
    functions and classes a learner writes, in order."""
    if not page.is_notebook:
        return []
    found: dict[str, None] = {}
    for cell in read_notebook(page.path).cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            for body in docstrings(cell.source):
                found.setdefault(body, None)
    return list(found)


def test_docstrings(page: Page) -> list[str]:
    """The distinct docstrings that a learner reads in an exercise's code besides the solution cells', in order:
    of the visible part of its test and locked cells (the helpers a test defines) and of its given code (the
    plain cells that load weights or define helpers the parts use), that no solution cell has; never one
    inside a hidden-test region (``### BEGIN HIDDEN TESTS`` to ``### END HIDDEN TESTS``), so no catalogue that
    ships holds one, nor one of the setup cell (the Chinese edition has its own). A chapter's given code keeps
    its docstrings: only an exercise (``exercises/...``) is code a learner works in."""
    if not page.is_notebook:
        return []
    exercise = page.docname.startswith("exercises/")
    found: dict[str, None] = {}
    for cell in read_notebook(page.path).cells:
        meta = cell.metadata.get("nbgrader", {})
        tested = meta.get("grade") or meta.get("locked")
        given = exercise and not cell.source.lstrip().startswith(SETUP_CELL_MARKERS)
        if cell.cell_type == "code" and not meta.get("solution") and (tested or given):
            hidden = hidden_spans(cell.source)
            for start, end, _ in docstring_offsets(cell.source):
                if not any(h_start <= start < h_end for h_start, h_end in hidden):
                    found.setdefault(cell.source[start:end], None)
    solutions = set(solution_docstrings(page))
    return [body for body in found if body not in solutions]

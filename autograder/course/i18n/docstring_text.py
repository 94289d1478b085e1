"""The docstrings of the solutions' code: read, removed and translated without touching the code."""

from __future__ import annotations

import re

from autograder.core.files import read_notebook
from autograder.course.i18n.extract import Page
from autograder.engine.cells import parse_cell


DOCSTRING_CONTEXT = "docstring"
_STRING_LITERAL = re.compile(r"([rRuU]?)(\"\"\"|'''|\"|')(.*)\2", re.DOTALL)


def _fits_quotes(body: str, quote: str) -> bool:
    """Whether ``body`` between ``quote`` and ``quote`` is a literal whose value is ``body``: it holds
    no backslash, no newline inside one-quote strings, and cannot end the literal early."""
    if "\\" in body or (len(quote) == 1 and "\n" in body):
        return False
    return quote not in body if len(quote) == 1 else quote not in body and not body.endswith(quote[0])


def _docstring_spans(source: str) -> list[tuple[int, int, str]]:
    """Where the docstrings of the functions and classes of a code cell lie: ``(start, end, quote)``
    with the offsets in ``source`` of each one's text between its quotes (prefix and quotes
    excluded), in order. A docstring written as several literals or with escapes is left out."""
    import ast

    tree = parse_cell(source)
    if isinstance(tree, SyntaxError):
        return []
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(lineno: int, col: int) -> int:          # ast columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8"))

    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not node.body:
            continue
        first = node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            continue
        start = offset(first.value.lineno, first.value.col_offset)
        end = offset(first.value.end_lineno, first.value.end_col_offset)
        literal = _STRING_LITERAL.fullmatch(source[start:end])
        if literal and _fits_quotes(literal.group(3), literal.group(2)):
            inner = start + len(literal.group(1)) + len(literal.group(2))
            spans.append((inner, inner + len(literal.group(3)), literal.group(2)))
    return sorted(spans)


def docstrings(source: str) -> list[str]:
    r"""The docstrings of the functions and classes of a code cell, exactly as written between their
    quotes (the indentation of their lines kept), so that a translation replaces them in place.

    Example:
        >>> docstrings("def f(x):\n    '''Double x.\n\n    Args:\n        x: a tensor.\n    '''\n    return 2 * x")
        ['Double x.\n\n    Args:\n        x: a tensor.\n    ']
    """
    return [source[start:end] for start, end, _ in _docstring_spans(source)]


def _replace_docstrings(source: str, replace) -> str:
    """``source`` with each docstring's text replaced by ``replace(text, quote)``."""
    out, last = [], 0
    for start, end, quote in _docstring_spans(source):
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
        if chinese != body and not _fits_quotes(chinese, quote):
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

"""A notebook cell read as Python: magics, shell escapes and cell magics, the one reading of them.

The source check (:mod:`autograder.engine.policy`), the referee's prelude (the notebook's imports,
:mod:`autograder.engine.plan`), the reference modules a kernel holds (:mod:`autograder.engine.mounts`),
the similarity report (:mod:`autograder.instructor.similarity`), the Chinese edition's reading of code
(:mod:`autograder.course.i18n`) and the grading of a cell that only runs commands all read a cell
here, so they agree on what is code. IPython's own transformer is not used, so that a learner's
``validate`` needs nothing beyond the base dependencies.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

_MAGIC_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_][\w, ]*)=[ \t]*)?(?:%|!)")
# The longest cell the grader reads as code: far beyond any honest answer, small enough that parsing
# it cannot cost the trusted process more than a few hundred MB.
MAX_CELL_CHARS = 200_000


def python_source(source: str, *, blank: bool = False) -> str:
    """A cell's source with every IPython magic or shell line replaced by the call it stands for,
    ``get_ipython()`` (line numbers kept), so that the rules see it as dynamic code; a cell magic
    (``%%...`` on the first line) makes the whole cell one such call. With ``blank``, those lines are
    left empty instead (for reading a cell's tokens, where a stand-in call would count as code).
    Done here, not with IPython's own transformer, so that a learner's ``validate`` needs nothing
    beyond the base dependencies.

    Example:
        >>> python_source("x = !ls\n%time f()\ny = 1")
        'x = get_ipython()\nget_ipython()\ny = 1'
        >>> python_source("%time f()\ny = 1", blank=True)
        '\ny = 1'
    """
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n".join(["" if blank else "get_ipython()"] + [""] * (len(lines) - 1))
    out = []
    for line in lines:
        match = _MAGIC_LINE.match(line)
        if match:
            target = f"{match['target'].strip()} = " if match["target"] else ""
            line = "" if blank else f"{match['indent']}{target}get_ipython()"
        out.append(line)
    return "\n".join(out)


def parse_cell(source: str) -> ast.Module | SyntaxError:
    """The syntax tree of a cell (magics as ``get_ipython()``), or a SyntaxError saying why there is
    none: a cell that is not Python (IPython would still run some, such as ``>>>`` prompt lines), is
    too long, or nests too deeply for the parser is not run."""
    if len(source) > MAX_CELL_CHARS:
        return SyntaxError(f"the cell has {len(source):,} characters, more than graded code may have "
                           f"({MAX_CELL_CHARS:,})")
    try:
        return ast.parse(python_source(source))
    except SyntaxError as error:
        return error
    except (ValueError, RecursionError, MemoryError) as error:   # a null byte; nesting deeper than the parser goes
        return SyntaxError(str(error) or type(error).__name__)


def only_commands(source: str) -> bool:
    """Whether a cell holds only shell escapes and line magics (``!python -m autograder validate ...``,
    ``%pip install ...``) and comments: a command the learner ran, which grading skips without a flag."""
    lines = [line.strip() for line in source.split("\n") if line.strip() and not line.strip().startswith("#")]
    return bool(lines) and all(line[0] in "!%" and not line.startswith("%%") for line in lines)


def import_statements(source: str) -> list[str]:
    """The top-level ``import`` statements of a notebook cell (magics and shell lines ignored)."""
    tree = parse_cell(source)
    if isinstance(tree, SyntaxError):
        return []
    return [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]


def comment_offsets(source: str) -> list[tuple[int, int]] | None:
    """The ``(start, end)`` character offsets of the comments of Python code (``#`` included), or None when it
    does not tokenize (IPython's ``!`` and ``%`` lines, a fragment, a cell longer than :data:`MAX_CELL_CHARS`)."""
    if len(source) > MAX_CELL_CHARS:
        return None
    starts = [0]
    for line in source.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:          # token columns count characters
                start = starts[token.start[0] - 1] + token.start[1]
                found.append((start, start + len(token.string)))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return found


_STRING_LITERAL = re.compile(r"([rRuU]?)(\"\"\"|'''|\"|')(.*)\2", re.DOTALL)


def fits_quotes(body: str, quote: str) -> bool:
    """Whether ``body`` between ``quote`` and ``quote`` is a literal whose value is ``body``: it holds
    no backslash, no newline inside one-quote strings, and cannot end the literal early."""
    if "\\" in body or (len(quote) == 1 and "\n" in body):
        return False
    return quote not in body if len(quote) == 1 else quote not in body and not body.endswith(quote[0])


def docstring_offsets(source: str) -> list[tuple[int, int, str]]:
    """Where the docstrings of the functions and classes of a code cell lie: ``(start, end, quote)``
    with the offsets in ``source`` of each one's text between its quotes (prefix and quotes
    excluded), in order. A docstring written as several literals or with escapes is left out (it is
    code like any other); none for a cell that does not parse (:func:`parse_cell`)."""
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
        if literal and fits_quotes(literal.group(3), literal.group(2)):
            inner = start + len(literal.group(1)) + len(literal.group(2))
            spans.append((inner, inner + len(literal.group(3)), literal.group(2)))
    return sorted(spans)


def _prose_blanked(source: str) -> str | None:
    """``source`` with the text of each docstring taken out (its quotes kept) and each comment reduced to its
    ``#``: its code, what it says aside; None when it does not tokenize (:func:`comment_offsets`)."""
    out, last = [], 0
    for start, end, _ in docstring_offsets(source):
        out.append(source[last:start])
        last = end
    source = "".join(out) + source[last:]
    offsets = comment_offsets(source)
    if offsets is None:
        return None
    out, last = [], 0
    for start, end in offsets:
        out += [source[last:start], "#"]
        last = end
    return "".join(out) + source[last:]


def same_code(source: str, course: str) -> bool:
    r"""Whether a learner's copy of a course cell is the course's code: equal to it, or differing only in what
    its comments and docstrings say (each edition of the course words them in its language; neither changes
    what runs), surrounding whitespace aside. A comment added, removed or split, a docstring added or removed,
    its quotes, any other string or any other character makes it differ.

    Example:
        >>> same_code("assert x == 1  # 形状", "assert x == 1  # the shape\n")
        True
        >>> same_code("def f():\n    '''两倍。'''\n    return 2", "def f():\n    '''Twice.\n    '''\n    return 2")
        True
        >>> same_code("assert x == 2  # the shape", "assert x == 1  # the shape")
        False
        >>> same_code("assert x == 1, '形状'", "assert x == 1, 'the shape'")
        False
        >>> same_code("assert x == 1", "assert x == 1  # the shape")
        False
    """
    if source.strip() == course.strip():
        return True
    mine = _prose_blanked(source.strip())
    return mine is not None and mine == _prose_blanked(course.strip())


def line_map(source: str, copy: str) -> list[int | None] | None:
    r"""Where each line of ``source`` begins in ``copy``, a copy with the same code (:func:`same_code`) whose
    docstrings may span other numbers of lines: for each line index of ``source``, and for its end (one past
    its last line), the index of the line of ``copy`` that begins at the same place of the code, or None for a
    line that begins inside a docstring. None when the two are not the same code.

    Example:
        >>> line_map("def f():\n    '''One,\n    two.'''\nx = 1", "def f():\n    '''一二。'''\nx = 1")
        [0, 1, None, 2, 3]
    """
    if not same_code(copy, source):
        return None

    def breaks(text: str) -> tuple[list[int], list[int]]:
        """The line breaks of ``text`` (their offsets) and, of those, the ones outside every docstring."""
        spans = docstring_offsets(text)
        found = [i for i, char in enumerate(text) if char == "\n"]
        return found, [i for i in found if not any(start <= i < end for start, end, _ in spans)]

    (mine, mine_kept), (theirs, theirs_kept) = breaks(source), breaks(copy)
    if len(mine_kept) != len(theirs_kept):         # the two differ in the blank lines around them
        return None
    rank = {offset: n for n, offset in enumerate(mine_kept)}
    row = {offset: n for n, offset in enumerate(theirs)}
    return [0] + [row[theirs_kept[rank[b]]] + 1 if b in rank else None for b in mine] + [len(theirs) + 1]

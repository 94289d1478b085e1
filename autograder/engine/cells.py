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


def _comments_blanked(source: str) -> str | None:
    """``source`` with each comment reduced to its ``#`` (what it says taken out), or None when it does not
    tokenize (:func:`comment_offsets`)."""
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
    its comments say (each edition of the course words them in its language), surrounding whitespace aside.
    A comment added, removed or split, or any other character, makes it differ.

    Example:
        >>> same_code("assert x == 1  # 形状", "assert x == 1  # the shape\n")
        True
        >>> same_code("assert x == 2  # the shape", "assert x == 1  # the shape")
        False
        >>> same_code("assert x == 1", "assert x == 1  # the shape")
        False
    """
    if source.strip() == course.strip():
        return True
    mine = _comments_blanked(source.strip())
    return mine is not None and mine == _comments_blanked(course.strip())

"""The comments of the course's code: which are prose, read and translated in place without touching the code.

A comment is ``#`` to the end of its line, on a line of its own or after code, in a code cell or in a
``python``/``bash`` fence of a Markdown cell. Its text (after the ``#`` and the spaces that follow it) is a
catalogue message with ``msgctxt "comment"`` when it is prose (:func:`is_prose`); the Chinese edition gets
the translation in the same place, and no other character of the code changes.
"""

from __future__ import annotations

import re

from autograder.core.files import read_notebook
from autograder.engine.cells import comment_offsets
from autograder.engine.plan import hidden_spans
from autograder.course.i18n.extract import FENCE, Page, blocks, needs_translation, page_texts
from autograder.course.notebooks import SETUP_CELL_MARKERS


COMMENT_CONTEXT = "comment"
# Comments that tools read or that mark the exercise's regions: never translated, never left out.
_MARKER = re.compile(r"^(!|noqa\b|type:|pragma\b|fmt:|pylint:|mypy:|isort:|pyright:)|"
                     r"BEGIN SOLUTION|END SOLUTION|BEGIN HIDDEN TESTS|END HIDDEN TESTS|YOUR CODE HERE|"
                     r"^Hidden tests ran here", re.IGNORECASE)
_PYTHON_FENCES = {"python", "py", "python3", "ipython", "ipython3", "{code-cell}"}
_SHELL_FENCES = {"bash", "sh", "shell", "console"}
# Signs of code: an assignment or comparison, a call or index written as code (``f(x)``, ``a[i]``), an attribute.
_TWO_WORDS = re.compile(r"\b[A-Za-z]{2,} [A-Za-z]{2,}\b")
_CODE_SIGNS = re.compile(r"=|\w[(\[]|[A-Za-z_]\.[A-Za-z_]|^(import|from|return|def|class|for|if|while|with|print)\b")


def is_marker(text: str) -> bool:
    """Whether a comment's text (after ``#``) is read by a tool or marks a region: ``noqa``, ``type:``, a
    shebang, nbgrader's ``BEGIN SOLUTION``/``BEGIN HIDDEN TESTS``/``YOUR CODE HERE``.

    Example:
        >>> is_marker("## BEGIN SOLUTION"), is_marker("noqa: E402"), is_marker("the keys")
        (True, True, False)
    """
    return bool(_MARKER.search(text.lstrip("#").strip()))


def _is_symbol(word: str) -> bool:
    """Whether a word of a comment is a symbol rather than English: three letters or fewer, in capitals, or with
    a digit or an underscore (``T``, ``FFN``, ``d_model``, ``fp32``)."""
    return len(word) <= 3 or word.isupper() or "_" in word or any(c.isdigit() for c in word)


def is_prose(text: str) -> bool:
    """Whether a comment's text (after ``#``) is words to translate: not a marker (:func:`is_marker`); it holds
    a word that is not a symbol (:func:`_is_symbol`) or two words in a row (a shape or a formula, ``(B, T,
    d_model)``, ``d = 32 x 128``, has none); and it is not commented-out code (a line that Python parses and
    that has an ``=``, a call or index written as code, an attribute or a statement keyword, without three
    plain words in a row).

    Example:
        >>> [is_prose(t) for t in ("what the tests do", "x = layer(x)", "(B, T, C)", "YOUR CODE HERE")]
        [True, False, False, False]
    """
    import ast

    body = text.strip()
    words = re.findall(r"[A-Za-z_][A-Za-z_0-9]*", body)
    if is_marker(body) or (all(map(_is_symbol, words)) and not _TWO_WORDS.search(body)):
        return False                     # no words: a shape or a formula, (B, T, d_model) -> (B, h, T, d_k)
    try:
        ast.parse(body)
    except SyntaxError:
        return True
    return not _CODE_SIGNS.search(body) or re.search(r"\b[A-Za-z]+ [A-Za-z]+ [A-Za-z]+\b", body) is not None


def _shell_comments(source: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` offsets of the comments of shell lines: a ``#`` at the start of a word,
    outside quotes."""
    found, offset = [], 0
    for line in source.split("\n"):
        quote = None
        for index, char in enumerate(line):
            if quote:
                quote = None if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#" and (index == 0 or line[index - 1].isspace()):
                found.append((offset + index, offset + len(line)))
                break
        offset += len(line) + 1
    return found


def _comment_spans(source: str, shell: bool = False) -> list[tuple[int, int]]:
    """Where the text of each comment lies: ``(start, end)`` after its ``#`` signs and the spaces that
    follow them, to the end of its line (trailing spaces excluded). Comments inside a hidden-test region
    (``### BEGIN HIDDEN TESTS`` to ``### END HIDDEN TESTS``) are none: they are never read, extracted or
    translated, so no catalogue that ships can hold them."""
    spans = []
    whole = (None if shell else comment_offsets(source)) or []
    if not whole and (shell or comment_offsets(source) is None):
        whole = _shell_comments(source)
    hidden = hidden_spans(source)
    whole = [(s, e) for s, e in whole if not any(h_start <= s < h_end for h_start, h_end in hidden)]
    for start, end in whole:
        token = source[start:end].rstrip()
        body = len(token) - len(token.lstrip("#").lstrip())
        spans.append((start + body, start + len(token)))
    return spans


def comment_texts(source: str, shell: bool = False) -> list[str]:
    """The text of every comment of code (after ``#`` and the spaces after it), prose or not, in order."""
    return [source[s:e] for s, e in _comment_spans(source, shell)]


def comments(source: str, shell: bool = False) -> list[str]:
    r"""The prose comments (:func:`is_prose`) of code, each as its text after ``#`` and the spaces after it.

    Example:
        >>> comments("x = 1  # the offset\n# y = x + 1\n### BEGIN SOLUTION")
        ['the offset']
    """
    return [text for text in comment_texts(source, shell) if is_prose(text)]


def _replace_comments(source: str, replace, shell: bool = False) -> str:
    out, last = [], 0
    for start, end in _comment_spans(source, shell):
        out += [source[last:start], replace(source[start:end])]
        last = end
    return "".join(out) + source[last:]


def without_comments(source: str) -> str:
    """Code with the text of its comments taken out (the ``#`` stays), markers kept: what must be the same
    in both editions, whose comments differ in language only."""
    return _replace_comments(source, lambda text: text if is_marker(text) else "")


def translate_comments(source: str, table: dict[str, str], shell: bool = False) -> str:
    """Code with each prose comment that has a translation in ``table`` replaced by it, in place.

    Raises:
        ValueError: a translation holds a line break (it would turn its second line into code); fix that
            msgstr in the catalogue.
    """
    def swap(text: str) -> str:
        chinese = table.get(text, text) if is_prose(text) else text
        if "\n" in chinese or "\r" in chinese:
            raise ValueError(f"the translation of the comment {text[:60]!r} holds a line break; keep it on one line")
        return chinese
    return _replace_comments(source, swap, shell)


def _fence_parts(block: str) -> tuple[str, str, str, str] | None:
    """A block that is one fenced code block in Python or a shell, as ``(opener, code, closer, language)``
    (``language`` ``"python"`` or ``"shell"``); None for any other block."""
    lines = block.split("\n")
    opener = FENCE.match(lines[0])
    if not opener or len(lines) < 2 or not FENCE.match(lines[-1]) or needs_translation(block):
        return None
    info = opener.group(3).strip().split()
    language = info[0].lower() if info else ""
    kind = "python" if language in _PYTHON_FENCES else "shell" if language in _SHELL_FENCES else None
    return (lines[0] + "\n", "\n".join(lines[1:-1]), "\n" + lines[-1], kind) if kind else None


def translate_fence(block: str, table: dict[str, str]) -> str:
    """A Markdown block with the comments of its ``python``/``bash`` fence translated (other blocks as they are)."""
    parts = _fence_parts(block)
    if parts is None:
        return block
    opener, code, closer, language = parts
    return opener + translate_comments(code, table, shell=language == "shell") + closer


def _translatable(cell) -> bool:
    """Whether a cell's comments are translated: a code cell that is not the setup cell (the Chinese edition
    has its own, :func:`autograder.course.notebooks.setup_cell_source`). Test and locked cells are too, their
    visible part only: the grader takes a learner's copy whose code is the course's, whatever its comments
    say, as unchanged (:func:`autograder.engine.cells.same_code`), and runs the instructor's cell anyway."""
    return cell.cell_type == "code" and not cell.source.lstrip().startswith(SETUP_CELL_MARKERS)


def translate_cell(cell, table: dict[str, str]) -> str:
    """A code cell's source with its comments translated when they are (:func:`_translatable`)."""
    return translate_comments(cell.source, table) if _translatable(cell) else cell.source


def page_comments(page: Page) -> list[str]:
    """The distinct prose comments of a page, in order: of its code cells (:func:`_translatable`) and of the
    ``python`` and ``bash`` fences of its Markdown."""
    found: dict[str, None] = {}
    for text in page_texts(page):
        for parts in filter(None, map(_fence_parts, blocks(text))):
            found.update(dict.fromkeys(comments(parts[1], shell=parts[3] == "shell")))
    if page.is_notebook:
        for cell in read_notebook(page.path).cells:
            if _translatable(cell):
                found.update(dict.fromkeys(comments(cell.source)))
    return list(found)

"""The similarity report, 1: a cell of code as the report compares it, normalised and fingerprinted.

Each cell is split into tokens with Python's :mod:`tokenize`. Comments, blank lines, whitespace and
docstrings (a statement that is only a string) are dropped; every string literal becomes ``S``; every
name the learner binds anywhere in the assignment (assigned variables, parameters, functions, classes,
``import ... as`` names, attributes set with ``self.x = ...``) becomes ``V``. Keywords, operators,
numbers and names the learner did not choose (``torch``, ``.transpose``, ``softmax``) stay. So renaming
variables, rewording comments and re-indenting change nothing.

Every run of :data:`K` consecutive tokens (a k-gram) is hashed, and in every window of :data:`WINDOW`
consecutive hashes the smallest is kept (the winnowing of MOSS: Schleimer, Wilkerson and Aiken,
"Winnowing: local algorithms for document fingerprinting", SIGMOD 2003). Two cells that share a run of at
least ``K + WINDOW - 1`` tokens share a fingerprint, and short coincidences (under ``K`` tokens) never do.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import tokenize
import zlib
from dataclasses import dataclass

from autograder.engine.cells import python_source

K = 12
WINDOW = 6
BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Names:
    """The names a learner chose: bound names and attributes set on objects (see :func:`chosen_names`)."""

    names: frozenset[str]
    attributes: frozenset[str]


def chosen_names(sources: list[str]) -> Names | None:
    """The names bound in ``sources`` (one learner's cells), or None when none of them parses."""
    names, attributes, parsed = set(), set(), False
    for source in sources:
        try:
            tree = ast.parse(python_source(source, blank=True))
        except (SyntaxError, ValueError):
            continue
        parsed = True
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.alias) and node.asname:
                names.add(node.asname)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                attributes.add(node.attr)
    return Names(frozenset(names), frozenset(attributes)) if parsed else None


def normalised_tokens(source: str, chosen: Names | None) -> list[tuple[str, int]]:
    """The tokens of ``source`` as compared, each with its line (1-based).

    Args:
        source: Python code (a notebook cell; magics are skipped).
        chosen: the learner's names (:func:`chosen_names`), renamed to ``V``; None renames every
            name that is not a keyword, a builtin or an attribute (code that does not parse).
    """
    out: list[tuple[str, int]] = []
    line: list[tuple[str, int, int]] = []         # the current logical line: (text, line, token type)
    previous = ""
    fstring_depth = 0

    def flush() -> None:
        if line and not all(kind == tokenize.STRING for _, _, kind in line):   # a bare string: a docstring
            out.extend((text, number) for text, number, _ in line)
        line.clear()

    try:
        for token in tokenize.generate_tokens(io.StringIO(python_source(source, blank=True)).readline):
            kind, text, number = token.type, token.string, token.start[0]
            if kind == getattr(tokenize, "FSTRING_START", -1):
                fstring_depth += 1
                if fstring_depth == 1:
                    line.append(("S", number, tokenize.STRING))
                continue
            if kind == getattr(tokenize, "FSTRING_END", -1):
                fstring_depth -= 1
                continue
            if fstring_depth:
                continue
            if kind in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER):
                continue
            if kind == tokenize.NEWLINE:
                flush()
                continue
            if kind in (tokenize.INDENT, tokenize.DEDENT):
                out.append((tokenize.tok_name[kind], number))
                continue
            if kind == tokenize.STRING:
                text = "S"
            elif kind == tokenize.NAME and not keyword.iskeyword(text):
                if chosen is None:
                    renamed = previous != "." and text not in BUILTINS
                elif previous == ".":
                    renamed = text in chosen.attributes
                else:
                    renamed = text in chosen.names
                previous = text
                line.append(("V" if renamed else text, number, kind))
                continue
            previous = text
            line.append((text, number, kind))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass                                       # an unfinished cell: compare what was read
    flush()
    return out


def winnow(hashes: list[int], window: int = WINDOW) -> list[int]:
    """The positions the winnowing algorithm selects: the rightmost minimum of every window of
    ``window`` consecutive hashes, each position once (one window when there are fewer)."""
    selected: list[int] = []
    for start in range(max(1, len(hashes) - window + 1)):
        chunk = hashes[start:start + window]
        if not chunk:
            break
        smallest = min(chunk)
        position = start + len(chunk) - 1 - chunk[::-1].index(smallest)
        if not selected or selected[-1] != position:
            selected.append(position)
    return selected


def fingerprints(tokens: list[tuple[str, int]], k: int = K, window: int = WINDOW,
                 covered: list[bool] | None = None) -> dict[int, tuple[int, int]]:
    """The winnowed fingerprints of a token sequence: hash -> (first line, last line) of its k-gram
    (the first occurrence). Fewer than ``k`` tokens give none.

    Args:
        tokens: (text, line) pairs, as :func:`normalised_tokens` gives them.
        covered: per token, whether it is code the course gives; the k-grams made only of such tokens
            are left out after winnowing (so that the positions chosen do not depend on what is given).
    """
    ids = [zlib.crc32(text.encode("utf-8")) for text, _ in tokens]
    grams = [hash(tuple(ids[i:i + k])) for i in range(len(ids) - k + 1)]
    found: dict[int, tuple[int, int]] = {}
    for position in winnow(grams, window) if grams else []:
        if covered is not None and all(covered[position:position + k]):
            continue
        found.setdefault(grams[position], (tokens[position][1], tokens[position + k - 1][1]))
    return found

"""The similarity report, 2: code the course gives, which is no evidence of copying.

What a learner types because the course shows it is left out of the comparison, as the released stub
is: the released notebook's other code cells, the code its Markdown spells out (code blocks and inline
code) and the code cells of its chapter (``book/<assignment>.ipynb``, else the chapters the exercise
names). Two rules decide which of a learner's tokens are given (:meth:`GivenCode.covered`):

1. **Runs.** A token is given when it lies in a run of :data:`GIVEN_RUN` consecutive tokens that some
   given code holds too, wherever in the assignment or its chapter that code is shown.
2. **Whole spans of the part's own text.** The code of a part's own Markdown (the Markdown cells since
   the graded cell before it: its text and its hint; the first part's text includes the notebook's
   introduction) counts as given whole, even when it is shorter than :data:`GIVEN_RUN` tokens, in the
   cells of that part only: when the text says ``loss.backward()``, ``torch.manual_seed(seed)`` or
   ``generator.get_state()``, a learner who writes it is following the text. Such a span must hold at
   least :data:`MIN_SPAN` tokens and at least one name the learner did not choose (a module, an
   attribute, a builtin such as ``torch``, ``.backward``, ``len``): ``x``, ``0``, ``(B, T)`` or
   ``temperature == 0`` mark nothing, since they would mark any code. An ellipsis in a span
   (``model.load_state_dict(...)``) stands for what the learner fills in: the pieces around it count
   separately, under the same two conditions.

A k-gram of the learner's is left out when every one of its tokens is given, so what a solution adds
to the text still counts. Given code is compared with the learner's code with every name renamed that
neither side keeps: names the given code binds (``SWEEP_CONFIG``), like names the learner binds, and
keyword arguments are ``V`` on both sides, while modules the course imports, builtins and attributes stay.
"""

from __future__ import annotations

import ast
import keyword
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.files import read_notebook
from autograder.engine.cells import python_source
from autograder.instructor.similarity_fingerprints import BUILTINS, Names, chosen_names, fingerprints, normalised_tokens

GIVEN_RUN = 8
MIN_SPAN = 3
_STRUCTURE = frozenset({"INDENT", "DEDENT"})
_PLACEHOLDERS = frozenset({"V", "S"})
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n(.*?)^ {0,3}\1", re.DOTALL | re.MULTILINE)


def code_in_text(markdown: str) -> list[str]:
    r"""The code a Markdown text spells out: its fenced code blocks, then its inline code spans.

    Example:
        >>> code_in_text("Use `torch.maximum(a, b)`:\n```python\nm = x.amax(-1)\n```\n")
        ['m = x.amax(-1)\n', 'torch.maximum(a, b)']
    """
    blocks = [m.group(2) for m in _FENCE.finditer(markdown)]
    return blocks + [m.group(2).strip() for m in _INLINE_CODE.finditer(_FENCE.sub("", markdown))]


def _is_name(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text) and text not in _PLACEHOLDERS


def comparable(tokens: list[str], kept: frozenset[str], attributes: frozenset[str] = frozenset()) -> list[str]:
    """``tokens`` as given code and a learner's code are compared: every name renamed ``V`` but the
    ``kept`` ones (modules the course imports) and builtins, keyword arguments too (a learner's
    ``lr=lr`` is ``V = V`` once the learner's own names are renamed); attributes stay, but for the
    ``attributes`` set on objects."""
    out = []
    for before, text in zip(["", *tokens], tokens):
        if before == ".":
            out.append("V" if text in attributes else text)
        else:
            out.append("V" if _is_name(text) and text not in kept | BUILTINS else text)
    return out


def _ids(tokens: list[str]) -> tuple[int, ...]:
    return tuple(zlib.crc32(text.encode("utf-8")) for text in tokens)


@dataclass(frozen=True)
class GivenCode:
    """Code the course gives the learners of an assignment.

    Attributes:
        runs: hashes of the runs of :data:`GIVEN_RUN` tokens of all given code (after :func:`comparable`).
        kept: the names :func:`comparable` keeps (the modules the given code imports).
        spans: cell key -> the whole spans of its part's text (:func:`part_spans`), as token ids.
    """

    runs: frozenset[int] = frozenset()
    kept: frozenset[str] = frozenset()
    spans: dict[str, frozenset[tuple[int, ...]]] = field(default_factory=dict)

    def covered(self, tokens: list[str], cell: str | None = None) -> list[bool]:
        """For each of a learner's normalised ``tokens`` of the graded cell ``cell``: whether it is
        given, in a run of given code or in a whole span of the cell's part (indentation tokens always
        count as given)."""
        content = [i for i, text in enumerate(tokens) if text not in _STRUCTURE]
        out = [text in _STRUCTURE for text in tokens]
        ids = _ids(comparable([tokens[i] for i in content], self.kept))
        for start in range(len(ids) - GIVEN_RUN + 1):
            if hash(ids[start:start + GIVEN_RUN]) in self.runs:
                for i in content[start:start + GIVEN_RUN]:
                    out[i] = True
        for span in self.spans.get(cell, ()):
            for start in range(len(ids) - len(span) + 1):
                if ids[start:start + len(span)] == span:
                    for i in content[start:start + len(span)]:
                        out[i] = True
        return out


def _imported(sources: list[str]) -> frozenset[str]:
    """The top-level names of the modules ``sources`` import (``torch``, ``nn``, ``DecoderOnlyLM``)."""
    found: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(python_source(source, blank=True))
        except (SyntaxError, ValueError):
            continue
        found.update((a.asname or a.name).split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names)
    return frozenset(found)


def _piece_tokens(source: str, kept: frozenset[str]) -> list[str]:
    """A piece of given code as :func:`comparable` tokens (a piece that does not parse is read as far
    as it tokenizes; the attributes it sets, ``self.q_proj = ...``, are renamed as a learner's are)."""
    own = chosen_names([source]) or Names(frozenset(), frozenset())
    tokens = [text for text, _ in normalised_tokens(source, Names(frozenset(), frozenset())) if text not in _STRUCTURE]
    return comparable(tokens, kept, own.attributes)


def part_spans(markdown: list[str], kept: frozenset[str]) -> frozenset[tuple[int, ...]]:
    """The whole spans of a part's ``markdown`` cells that count as given in its cells: each piece of
    code the text spells out, cut at its ellipses, of at least :data:`MIN_SPAN` tokens of which one is a
    name the learner did not choose.

    Example:
        >>> len(part_spans(["Call `loss.backward()`, then `x`, `(B, T)` and `model.load_state_dict(...)`."],
        ...                frozenset()))
        2
    """
    found = set()
    for text in markdown:
        for code in code_in_text(text):
            piece: list[str] = []
            for token in [*_piece_tokens(code, kept), "..."]:
                if token != "...":
                    piece.append(token)
                    continue
                if len(piece) >= MIN_SPAN and any(_is_name(t) for t in piece):
                    found.add(_ids(piece))
                piece = []
    return frozenset(found)


def given_code(sources: list[str], parts: dict[str, list[str]] | None = None,
               defined: frozenset[str] = frozenset()) -> GivenCode:
    """:class:`GivenCode` of ``sources`` (code cells, code a text spells out: pieces of Python) and of
    ``parts`` (graded cell key -> the Markdown of its part, see :func:`part_spans`).

    A piece's names are renamed as a learner's own would be (:func:`comparable`), since a learner types
    them as their own; the modules the pieces import and the names ``defined`` (what the notebook's
    own code defines for the learner to call, such as ``sweep_batch``) keep their names.
    """
    kept = _imported(sources) | defined
    runs: set[int] = set()
    for source in sources:
        ids = _ids(_piece_tokens(source, kept))
        runs.update(hash(ids[i:i + GIVEN_RUN]) for i in range(len(ids) - GIVEN_RUN + 1))
    spans = {key: part_spans(texts, kept) for key, texts in (parts or {}).items()}
    return GivenCode(frozenset(runs), kept, spans)


def cell_fingerprints(source: str, chosen: Names | None, given: GivenCode | None = None,
                      cell: str | None = None) -> dict[int, tuple[int, int]]:
    """:func:`~autograder.instructor.similarity_fingerprints.fingerprints` of one cell's normalised
    tokens, the code ``given`` for the graded cell ``cell`` left out."""
    tokens = normalised_tokens(source, chosen)
    covered = given.covered([text for text, _ in tokens], cell) if given is not None else None
    return fingerprints(tokens, covered=covered)


def course_code(assignment: str, root: Path) -> tuple[dict[str, str], dict[str, str], GivenCode]:
    """The graded code cells of an assignment's plan: (templates, solution sources) by cell key, and
    the code the course gives (:func:`given_code`): the released notebooks' other code cells, the code
    their Markdown spells out, each graded cell's part (the Markdown cells since the graded cell before
    it), and the code cells of the chapter ``book/<assignment>.ipynb`` or, when there is none, of the
    chapters the exercise names ("chapter 11")."""
    from autograder.engine.plan import MANUAL, SOLUTION, TEST, PlanError, load_plan

    try:
        plan = load_plan(assignment, root)
    except PlanError:
        return {}, {}, GivenCode()
    templates, solution, given, text, parts, cells_given = {}, {}, [], "", {}, []
    for name, notebook in plan.notebooks.items():
        part: list[str] = []
        after_graded = False
        for cell in notebook.cells:
            if cell.kind == SOLUTION and cell.cell_type == "code":
                templates[f"{name}:{cell.key}"] = cell.released
                solution[f"{name}:{cell.key}"] = cell.source
                parts[f"{name}:{cell.key}"] = part
            elif cell.kind != MANUAL and cell.cell_type == "code":
                given.append(cell.released)
                if cell.kind != TEST:
                    cells_given.append(cell.released)
            elif cell.kind != MANUAL and cell.cell_type == "markdown":
                if after_graded:
                    part = []
                part.append(cell.released)
                given += code_in_text(cell.released)
                text += cell.released
            after_graded = cell.kind in (SOLUTION, TEST, MANUAL) or (after_graded and cell.cell_type != "markdown")
    chapters = [Path(root) / "book" / f"{assignment}.ipynb"]
    if not chapters[0].is_file():
        numbers = sorted(set(re.findall(r"\b[Cc]hapters? (\d+)\b", text)))
        chapters = [path for n in numbers for path in sorted((Path(root) / "book").glob(f"{int(n):02d}-*.ipynb"))]
    for path in chapters:
        try:
            cells = read_notebook(path).cells
        except (OSError, ValueError):
            continue
        given += [c.source for c in cells if c.cell_type == "code"]
        given += [code for c in cells if c.cell_type == "markdown" for code in code_in_text(c.source)]
    return templates, solution, given_code(given, parts, _defined(cells_given) - _defined(list(solution.values())))


def _defined(sources: list[str]) -> frozenset[str]:
    """The public functions and classes ``sources`` define and the constants they assign (upper-case
    names of three characters or more: ``SWEEP_CONFIG``, not ``B``)."""
    names = chosen_names(sources) or Names(frozenset(), frozenset())
    found = set()
    for source in sources:
        try:
            tree = ast.parse(python_source(source, blank=True))
        except (SyntaxError, ValueError):
            continue
        found.update(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)))
    found |= {name for name in names.names if name.isupper() and len(name) >= 3}
    return frozenset(name for name in found if not name.startswith("_"))

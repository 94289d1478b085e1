"""The Chinese edition: gettext catalogues of the English prose, and the Chinese book built from them.

One source of truth. The English pages (``book/``, ``exercises/``) are the only place where code and
prose are written. Their prose is cut into blocks (paragraphs, headings, list items kept together,
a fenced code or math block never cut) and each block is a message of a standard gettext catalogue,
``locales/zh_CN/LC_MESSAGES/<page>.po``, one per page, in the layout ``sphinx-intl`` uses. Translators
edit those files with any PO editor. ``python -m autograder i18n update`` re-extracts the English
messages and merges them into the catalogues with Babel (the ``msgmerge`` of the Python world): a new
paragraph appears untranslated, a changed one keeps its old translation marked ``#, fuzzy`` with the
previous English text beside it (``#| msgid``), so the translator sees exactly what changed.
``python -m autograder i18n build`` writes the Chinese book under ``zh/``: each English notebook with
its markdown cells replaced block by block and its code cells copied unchanged, the Markdown pages
likewise, and its own ``_config.yml`` and ``_toc.yml``. ``i18n check`` fails on any untranslated or
fuzzy block, on a ``zh/`` tree that is not what ``build`` writes, and on a code cell that differs.

Why not Sphinx's own gettext builder: MyST-NB cannot read translated notebooks back (its notebook
parser receives the translated text as if it were a notebook: executablebooks/MyST-NB#587), and
Colab needs real Chinese notebooks to open. So the catalogues are standard, and the rebuild of the
pages from them is ours.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.core.repository import colab_url
from autograder.course.notebooks import dumps_normalized, repoint_notebook, setup_cell_source

LANGUAGE = "zh_CN"
LOCALE_DIR = Path("locales") / LANGUAGE / "LC_MESSAGES"
ZH_ROOT = "zh"
# The Chinese book's own words that are not in any page: the toc captions and the site title.
SITE_DOC = "_site"
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_COLAB_PATH = re.compile(r"(https://colab\.research\.google\.com/github/[^)\s\"'>]+?/blob/[^/)\s]+/)([^)\s\"'>]+\.ipynb)")


def blocks(text: str) -> list[str]:
    """Cut Markdown into blocks separated by blank lines, never inside a fenced code block or a
    ``$$`` display-math block (a fence whose info string is a MyST directive, ``{note}``, ``{glossary}``,
    holds prose and is cut like the rest).

    Example:
        >>> blocks("# Title\\n\\nOne.\\nStill one.\\n\\n```python\\nx = 1\\n\\ny = 2\\n```")
        ['# Title', 'One.\\nStill one.', '```python\\nx = 1\\n\\ny = 2\\n```']
    """
    out, current, closing, in_math, directives = [], [], None, False, []
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        if closing is not None:
            current.append(line)
            if fence and fence.group(2).startswith(closing) and not fence.group(3).strip():
                closing = None
            continue
        info = fence.group(3).strip() if fence else ""
        if fence and not info and directives and fence.group(2).startswith(directives[-1]):
            directives.pop()                  # the end of a directive ({admonition}): not a code fence
        elif fence and not info.startswith("{"):
            closing = fence.group(2)
        elif fence and info.startswith(("{code", "{math}")):
            closing = fence.group(2)
        elif fence:
            directives.append(fence.group(2))
        if line.strip() == "$$" or (line.strip().startswith("$$") and line.strip().count("$$") == 1):
            in_math = not in_math
        if not line.strip() and closing is None and not in_math:
            if current:
                out.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        out.append("\n".join(current))
    return out


_NOT_PROSE = [re.compile(p, re.DOTALL | re.MULTILINE) for p in (
    # fenced code; a directive's fence ({admonition}, {dropdown}, {note}) holds prose and stays
    r"(`{3,}|~{3,})(?![ \t]*\{(?!code|math))[^\n]*\n.*?\1",
    r"\$\$.*?\$\$", r"\$[^$\n]+\$",          # math
    r"`[^`\n]+`",                            # inline code
    r"!\[[^\]]*\]",                           # image alt text (the Colab badge)
    r"\]\([^)]*\)", r"https?://\S+",         # link targets, addresses
    r"^\s*(`{3,}|:{3,})\{[^}]*\}[^\n]*$",     # directive openers
    r"^\s*:[\w-]+:[^\n]*$",                  # directive options
    r"^\s*(`{3,}|:{3,})\s*$",                # fence closers
    r"\{[\w:-]+\}",                          # roles such as {term} and {cite:p}
)]


def needs_translation(block: str) -> bool:
    r"""Whether a block holds words to translate (not only code, math, links or markup).

    Example:
        >>> needs_translation("$$\nx = 1\n$$"), needs_translation("The scale is $1/\\sqrt{d}$.")
        (False, True)
    """
    rest = block
    for pattern in _NOT_PROSE:
        rest = pattern.sub(" ", rest)
    return re.search(r"[A-Za-z]{2,}", rest) is not None


@dataclass
class Page:
    """One English page of the book: its document name (``book/01-rnn-limits``) and file."""

    docname: str
    path: Path

    @property
    def is_notebook(self) -> bool:
        return self.path.suffix == ".ipynb"


def pages(root: Path = REPO_ROOT) -> list[Page]:
    """The English book's pages in table-of-contents order."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]
    found = []
    for name in names:
        for suffix in (".ipynb", ".md"):
            if (root / f"{name}{suffix}").is_file():
                found.append(Page(name, root / f"{name}{suffix}"))
                break
        else:
            raise FileNotFoundError(f"_toc.yml names {name}, but neither {name}.ipynb nor {name}.md exists")
    return found


def page_texts(page: Page) -> list[str]:
    """The page's prose: each markdown cell of a notebook, or the whole Markdown file."""
    if page.is_notebook:
        return [cell.source for cell in read_notebook(page.path).cells if cell.cell_type == "markdown"]
    return [page.path.read_text(encoding="utf-8")]


def site_messages(root: Path = REPO_ROOT) -> list[str]:
    """Words of the site that live in no page: the book's title and the toc's part captions."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    return [config["title"]] + [part["caption"] for part in toc.get("parts", []) if part.get("caption")]


def messages(texts: list[str]) -> list[str]:
    """The distinct blocks to translate, in order of first appearance."""
    seen: dict[str, None] = {}
    for text in texts:
        for block in blocks(text):
            if needs_translation(block):
                seen.setdefault(block, None)
    return list(seen)


_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
_INLINE_CODE = re.compile(r"(?<![`}])`([^`\n]+)`(?!`)")
_INLINE_MATH = re.compile(r"(?<!\$)\$((?:[^$\n]|\n(?!\s*\n))+?)\$(?!\$)")
_DISPLAY_MATH = re.compile(r"\$\$(.*?)\$\$", re.DOTALL)
_LINK_TARGET = re.compile(r"\]\(([^)\s]*)\)")
_FENCE_LINE = re.compile(r"(?m)^\s*((?:`{3,}|:{3,}|~{3,})\S*)")


def _role_target(role: str, text: str) -> tuple[str, str]:
    """``{term}`掩码 <mask>``` and ``{term}`mask``` both point at ``mask``."""
    inner = re.search(r"<([^<>]+)>\s*$", text)
    return role, (inner.group(1) if inner else text).strip()


def markup_problems(english: str, chinese: str) -> list[str]:
    """What a translation lost or changed of the block's markup: math, inline code, link targets,
    roles and their targets ({term}, {cite:p}, ...), fences. Words may change; these may not.

    Example:
        >>> markup_problems("The {term}`mask` and $x$.", "{term}`掩码 <mask>` 与 $x$。")
        []
        >>> markup_problems("Use `q @ k.T`.", "使用 q @ k.T。")
        ['inline code: missing `q @ k.T`']
    """
    def parts(text):
        without_roles = _ROLE.sub(" ", text)
        without_math = _DISPLAY_MATH.sub(" ", without_roles)
        return {
            "role": sorted(_role_target(r, t) for r, t in _ROLE.findall(text)),
            "inline code": sorted(_INLINE_CODE.findall(_INLINE_MATH.sub(" ", without_math))),
            "math": sorted(" ".join(m.split()) for m in _INLINE_MATH.findall(without_math)),
            "display math": sorted(" ".join(m.split()) for m in _DISPLAY_MATH.findall(without_roles)),
            "link target": sorted(_LINK_TARGET.findall(text)),
            "fence": [f for f in _FENCE_LINE.findall(text)],
        }
    found = []
    for kind, expected in parts(english).items():
        got = parts(chinese)[kind]
        for item in expected:
            if item in got:
                got.remove(item)
            else:
                shown = f"{{{item[0]}}}`{item[1]}`" if kind == "role" else f"`{item}`" if kind == "inline code" else repr(item)
                found.append(f"{kind}: missing {shown}")
        found += [f"{kind}: added {item!r}" for item in got]
    return found


def catalogue_path(docname: str, root: Path = REPO_ROOT) -> Path:
    return root / LOCALE_DIR / f"{docname}.po"


def _template(msgids: list[str], location: str, creation_date=None, *, math: list[str] = (),
              docstrings: list[str] = ()):
    from babel.messages.catalog import Catalog

    catalog = Catalog(locale=LANGUAGE, project="Transformer Core Mechanisms", version="1",
                      copyright_holder="The Transformer Core course team", fuzzy=False,
                      header_comment="# Chinese translation of the course. Edit the msgstr lines; run\n"
                                     "# `python -m autograder i18n update` after changing the English pages.",
                      **({"creation_date": creation_date} if creation_date else {}))
    for index, msgid in enumerate(msgids, start=1):
        catalog.add(msgid, locations=[(location, index)])
    for index, phrase in enumerate(math, start=1):
        catalog.add(phrase, locations=[(location, index)], context=MATH_CONTEXT,
                    auto_comments=["A phrase inside a formula (\\text{...}): translate it, or copy it to keep it."])
    for index, body in enumerate(docstrings, start=1):
        catalog.add(body, locations=[(location, index)], context=DOCSTRING_CONTEXT,
                    auto_comments=["The docstring of a function or class the learner writes, as written between its "
                                   "quotes: keep each line's indentation, parameter names, shapes and code."])
    return catalog


def read_catalogue(path: Path):
    """A catalogue as Babel reads it, with each fuzzy entry's previous English (``#| msgid``) back
    in ``previous_id`` (Babel writes those lines but reads them as plain comments)."""
    from babel.messages.pofile import read_po, unescape

    with open(path, "rb") as handle:
        catalog = read_po(handle, locale=LANGUAGE, abort_invalid=True)
    for message in catalog:
        previous = [c[1:].strip() for c in message.user_comments if c.startswith("|")]
        if previous:
            message.user_comments = [c for c in message.user_comments if not c.startswith("|")]
            message.previous_id = ["".join(unescape(line[line.index('"'):]) for line in previous if '"' in line)]
    return catalog


def write_catalogue(catalog, path: Path) -> None:
    """Write a catalogue as gettext tools expect it, unwrapped, with previous ids of fuzzy entries."""
    from babel.messages.pofile import write_po

    for message in catalog:          # Babel guesses format flags from {term} braces: noise here
        message.flags.discard("python-format")
        message.flags.discard("python-brace-format")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        write_po(handle, catalog, width=0, include_previous=True, omit_header=False, sort_output=False)


def update(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """Re-extract the English messages and merge them into every catalogue (creating missing ones).

    Returns:
        ``{docname: {"translated": n, "fuzzy": n, "untranslated": n}}``.
    """
    documents = {page.docname: (messages(page_texts(page)), page.path.relative_to(root).as_posix(),
                                math_phrases("\n\n".join(page_texts(page))), solution_docstrings(page))
                 for page in pages(root)}
    documents[SITE_DOC] = (site_messages(root), "_config.yml + _toc.yml", [], [])
    for docname, (msgids, location, math, docs) in documents.items():
        path = catalogue_path(docname, root)
        if path.exists():
            catalog = read_catalogue(path)
            catalog.update(_template(msgids, location, catalog.creation_date, math=math, docstrings=docs),
                           update_header_comment=False)
            catalog.obsolete.clear()          # a removed paragraph's translation is dropped, not kept
        else:
            catalog = _template(msgids, location, math=math, docstrings=docs)
        write_catalogue(catalog, path)
    update_runtime(root)
    return status(root)


def status(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """Count translated, fuzzy and untranslated messages per catalogue."""
    counts = {}
    for page_name in [p.docname for p in pages(root)] + [SITE_DOC]:
        path = catalogue_path(page_name, root)
        entries = [m for m in read_catalogue(path) if m.id] if path.exists() else []
        counts[page_name] = {
            "translated": sum(1 for m in entries if m.string and not m.fuzzy),
            "fuzzy": sum(1 for m in entries if m.fuzzy),
            "untranslated": sum(1 for m in entries if not m.string),
        }
    return counts | runtime_status(root)


def translations(docname: str, root: Path = REPO_ROOT, *, context: str | None = None) -> dict[str, str]:
    """English -> Chinese, for the finished (not fuzzy, not empty) messages of a page: its blocks,
    with ``context=MATH_CONTEXT`` the phrases inside its formulas, with ``context=DOCSTRING_CONTEXT``
    the docstrings of its solution cells."""
    path = catalogue_path(docname, root)
    if not path.exists():
        return {}
    return {m.id: m.string for m in read_catalogue(path)
            if m.id and m.string and not m.fuzzy and m.context == context}


def translate_text(text: str, table: dict[str, str], math: dict[str, str] | None = None) -> str:
    """``text`` with every block that has a translation replaced by it (others stay English), the
    translated blocks' line breaks between Chinese characters joined (:func:`join_cjk_lines`) and the
    phrases of formulas translated (:func:`translate_math`)."""
    out = []
    for block in blocks(text):
        if block in table:
            block = join_cjk_lines(table[block])
        out.append(translate_math(block, math) if math else block)
    return "\n\n".join(out)


# --- Typesetting: Chinese lines, phrases in formulas ------------------------------------------------

#: CJK ideographs, kana, CJK and full-width punctuation, and the curly quotes, dash and ellipsis
#: that Chinese text uses.
CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\u201c\u201d\u2018\u2019\u2014\u2026"
# A line break with a Chinese character on both sides, allowing emphasis, a role or a link's end between.
_CJK_BREAK = re.compile(rf"([{CJK}](?:\*\*|\*|_|`|\]\([^)\s]*\)|\])?)\n[ \t]*((?:\*\*|\*|_|\[|\{{[\w:-]+\}}`)?[{CJK}])")
# Spans whose line breaks mean something: code fences (not a directive's) and display math.
_KEEP_LINES = re.compile(r"(`{3,}|~{3,})(?![ \t]*\{(?!code|math))[^\n]*\n.*?\1|\$\$.*?\$\$", re.DOTALL)


def join_cjk_lines(text: str) -> str:
    r"""Join the lines of a Chinese paragraph where the break falls between two Chinese characters.

    A browser shows a line break inside a paragraph as a space, which is right between English
    words and wrong between Chinese characters ("即一个 仅解码器模型").

    Example:
        >>> join_cjk_lines("即一个\n**仅解码器模型**，\n在 CPU 上运行。\n- 列表项")
        '即一个**仅解码器模型**，在 CPU 上运行。\n- 列表项'
    """
    out, last = [], 0
    for kept in _KEEP_LINES.finditer(text):
        out += [_CJK_BREAK.sub(r"\1\2", text[last:kept.start()]), kept.group(0)]
        last = kept.end()
    out.append(_CJK_BREAK.sub(r"\1\2", text[last:]))
    return "".join(out)


MATH_CONTEXT = "math"
# \text{...} that is not a subscript or superscript (those are names: d_\text{model}, n_\text{layers}).
_MATH_TEXT = re.compile(r"(?<![_^])(?<![_^]\{)\\text\{([^{}]+)\}")
# Names kept in formulas: identifiers (max\_norm) and abbreviations (NaN, MFU, FLOPs, FFN).
_MATH_NAME = re.compile(r"^\s*(?:[A-Za-z]+(?:\\_[A-Za-z]+)+|[A-Z][A-Za-z]*[A-Z][A-Za-z]?s?|[A-Za-z]|tanh|softmax|logits)\s*$")


def math_phrases(text: str) -> list[str]:
    r"""The English phrases of the formulas in ``text`` (``\text{...}`` outside sub- and superscripts,
    without the spaces around them), which a Chinese page shows translated.

    Example:
        >>> math_phrases(r"$$\text{cost } O(n) \quad d_\text{model}, \text{NaN}$$")
        ['cost']
    """
    found: dict[str, None] = {}
    for match in _MATH_TEXT.finditer(_strip_code(text)):
        phrase = match.group(1)
        if re.search(r"[A-Za-z]{2,}", phrase) and not _MATH_NAME.match(phrase):
            found.setdefault(phrase.strip(), None)
    return list(found)


def _strip_fenced(text: str, hole: str) -> str:
    """``text`` with each fenced code block (not a directive such as ``{admonition}``) replaced by
    ``hole``, read line by line as :func:`blocks` does, so that a directive's closing fence is not
    taken for the opening of a code block."""
    out, closing, directives = [], None, []
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        if closing is not None:
            if fence and fence.group(2).startswith(closing) and not fence.group(3).strip():
                closing = None
                out.append(hole)
            continue
        info = fence.group(3).strip() if fence else ""
        if fence and not info and directives and fence.group(2).startswith(directives[-1]):
            directives.pop()
        elif fence and (not info.startswith("{") or info.startswith(("{code", "{math}"))):
            closing = fence.group(2)
            continue
        elif fence:
            directives.append(fence.group(2))
        out.append(line)
    return "\n".join(out)


def _strip_code(text: str, hole: str = " ") -> str:
    """``text`` without fenced code blocks (not directives) and inline code (each replaced by ``hole``)."""
    text = _strip_fenced(text, hole)
    # Inline code may wrap onto a second line of its paragraph.
    return re.sub(r"(?<![`}])`(?:[^`\n]|\n(?![ \t]*\n))+`(?!`)", hole, text)


def translate_math(text: str, table: dict[str, str]) -> str:
    r"""``text`` with the phrases of its formulas translated, keeping the spaces around each.

    Example:
        >>> translate_math(r"$\text{cost } O(n)$", {"cost": "开销"})
        '$\\text{开销 } O(n)$'
    """
    def swap(match: re.Match) -> str:
        phrase = match.group(1)
        chinese = table.get(phrase.strip())
        if not chinese:
            return match.group(0)
        lead, trail = phrase[:len(phrase) - len(phrase.lstrip())], phrase[len(phrase.rstrip()):]
        return "\\text{" + lead + chinese + trail + "}"
    return _MATH_TEXT.sub(swap, text)


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

    tree = _parse_code(source)
    if tree is None:
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


def _zh_links(text: str, root: Path) -> str:
    """Point Colab links at the Chinese notebooks (``zh/<path>``), which exist for every page."""
    def swap(match: re.Match) -> str:
        path = match.group(2)
        return match.group(0) if path.startswith(f"{ZH_ROOT}/") else colab_url(f"{ZH_ROOT}/{path}", root)
    return _COLAB_PATH.sub(swap, text)


def rendered(root: Path = REPO_ROOT) -> dict[Path, str]:
    """Every file of the Chinese book (under ``zh/``) and its content, from the English pages and the
    catalogues: markdown translated block by block (untranslated blocks stay English), code copied
    with the docstrings of the learner's functions and classes translated."""
    files = {}
    for page in pages(root):
        table = translations(page.docname, root)
        math = translations(page.docname, root, context=MATH_CONTEXT)
        docs = translations(page.docname, root, context=DOCSTRING_CONTEXT)
        target = root / ZH_ROOT / page.path.relative_to(root)
        if page.is_notebook:
            nb = copy.deepcopy(read_notebook(page.path))
            nb.metadata["course"] = {"language": LANGUAGE}
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = _zh_links(translate_text(cell.source, table, math), root)
                elif cell.cell_type == "code" and docs:
                    cell.source = translate_docstrings(cell.source, docs)
            files[target] = dumps_normalized(repoint_notebook(nb, root))   # the setup cell says Chinese
        else:
            files[target] = _zh_links(translate_text(page.path.read_text(encoding="utf-8"), table, math), root)
    files[root / ZH_ROOT / "_toc.yml"] = _zh_toc(root)
    files[root / ZH_ROOT / "_config.yml"] = _zh_config(root)
    return files


def build(root: Path = REPO_ROOT) -> list[Path]:
    """Write the Chinese book under ``zh/``; return the files that changed."""
    written = []
    for path, content in rendered(root).items():
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            written.append(path)
    return written


def stale_outputs(root: Path = REPO_ROOT) -> list[Path]:
    """Files of ``zh/`` that differ from what :func:`build` would write (or are missing)."""
    return [path for path, content in rendered(root).items()
            if not path.exists() or path.read_text(encoding="utf-8") != content]


def _zh_toc(root: Path) -> str:
    import yaml

    table = translations(SITE_DOC, root)
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc.get("parts", []):
        if part.get("caption"):
            part["caption"] = table.get(part["caption"], part["caption"])
    header = "# Generated by `python -m autograder i18n build` from ../_toc.yml: edit that file instead.\n"
    return header + yaml.safe_dump(toc, allow_unicode=True, sort_keys=False)


# The theme's interface in Chinese. Sphinx's own zh_CN catalogue translates most words ("搜索"); the
# rest comes from site/locale/zh_CN/LC_MESSAGES/sphinx.po (words it lacks: "Link to this heading"),
# the toggle button's and myst-nb's own settings, and course_site's replacements for myst-nb's {type}.
ZH_SPHINX_CONFIG = {
    "language": LANGUAGE,
    "locale_dirs": ["../site/locale"],
    "togglebutton_hint": "点击显示",
    "togglebutton_hint_hide": "点击隐藏",
    "nb_code_prompt_show": "显示{type}",
    "nb_code_prompt_hide": "隐藏{type}",
    "course_site_body_replacements": {"显示source": "显示代码", "隐藏source": "隐藏代码",
                                      "显示outputs": "显示输出", "隐藏outputs": "隐藏输出",
                                      "显示output": "显示输出", "隐藏output": "隐藏输出",
                                      "显示content": "显示代码与输出", "隐藏content": "隐藏代码与输出"},
}


def _zh_config(root: Path) -> str:
    """The English ``_config.yml`` with the Chinese title, language and paths that reach back to the
    shared files (bibliography, static files, the site extension); the execution cache is set by
    :func:`build_html`."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = translations(SITE_DOC, root).get(config["title"], config["title"])
    config["bibtex_bibfiles"] = ["../" + p for p in config.get("bibtex_bibfiles", [])]
    config["html"]["favicon"] = "../" + config["html"]["favicon"]
    config["repository"]["path_to_book"] = ZH_ROOT
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {name: "../" + path for name, path in sphinx["local_extensions"].items()}
    sphinx["config"]["html_static_path"] = ["../" + p for p in sphinx["config"]["html_static_path"]]
    sphinx["config"].update(ZH_SPHINX_CONFIG)
    header = "# Generated by `python -m autograder i18n build` from ../_config.yml: edit that file instead.\n"
    return header + yaml.safe_dump(config, allow_unicode=True, sort_keys=False)


def execution_cache(out: Path, root: Path = REPO_ROOT) -> Path:
    """The Chinese build's own jupyter-cache, ``<out>/_build/.jupyter_cache_zh-<key>``.

    The Chinese pages run the same code as the English ones, but in a kernel that draws figure text
    and widget labels in Chinese (``$COURSE_LANGUAGE``), so their outputs are cached apart. The key
    is a hash of what decides those outputs besides the code (the figure catalogue and
    ``course_runtime/language.py``): a changed translation re-executes the chapters once, and an
    unchanged one hits the cache, as the English build does.
    """
    import hashlib

    digest = hashlib.sha256()
    for path in (runtime_catalogue_path("figures", root), root / "course_runtime" / "language.py"):
        digest.update(path.read_bytes() if path.exists() else b"")
    return Path(out).resolve() / "_build" / f".jupyter_cache_zh-{digest.hexdigest()[:12]}"


def _kernel_profile(folder: Path) -> Path:
    """An IPython profile whose kernels load :mod:`course_runtime.language` (``IPYTHONDIR``)."""
    profile = folder / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(
        "# Written by autograder/course/i18n.py for the Chinese book build: figures, widgets and messages in Chinese.\n"
        "c.InteractiveShellApp.extensions = ['course_runtime.language']\n", encoding="utf-8")
    return folder


def english_heading_ids(html: Path, root: Path = REPO_ROOT) -> dict[str, list[str]]:
    """``{docname: [section ids in page order]}`` of the built English pages under ``html``."""
    table = {}
    for page in pages(root):
        built = Path(html) / f"{page.docname}.html"
        if built.exists():
            table[page.docname] = re.findall(r'<section\b[^>]*?\bid="([^"]+)"', built.read_text(encoding="utf-8"))
    return table


def build_html(out: Path, root: Path = REPO_ROOT, *, extra_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Build the Chinese site into ``<out>/_build/html/zh`` next to the English one in ``<out>/_build/html``.

    Built after the English site, whose section ids the Chinese headings take (``#anchor`` links
    work in both languages). The chapters are executed in kernels that show figures, widget labels
    and messages in Chinese (``$COURSE_LANGUAGE=zh_CN``, the extension :mod:`course_runtime.language`
    loaded through ``$IPYTHONDIR``, the CJK font from the site assets in ``$COURSE_CJK_FONT``), with
    their own execution cache (:func:`execution_cache`). The code cells are the English ones.

    Returns:
        The finished ``jupyter-book build`` process (its return code and output).
    """
    import json
    import os

    import yaml

    sys.path.insert(0, str(root / "site"))
    import fetch_assets  # noqa: E402  (site/ is not a package)

    out = Path(out).resolve()
    config = yaml.safe_load((root / ZH_ROOT / "_config.yml").read_text(encoding="utf-8"))
    cache = execution_cache(out, root)
    for old in (out / "_build").glob(".jupyter_cache_zh-*"):
        if old != cache:
            shutil.rmtree(old, ignore_errors=True)
    config["execute"]["cache"] = str(cache)
    # The configuration is read from a temporary folder: paths that reach back into the repository
    # must not depend on where it lies.
    book = (root / ZH_ROOT).resolve()
    config["bibtex_bibfiles"] = [str((book / p).resolve()) for p in config["bibtex_bibfiles"]]
    config["html"]["favicon"] = str((book / config["html"]["favicon"]).resolve())
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {n: str((book / p).resolve()) for n, p in sphinx["local_extensions"].items()}
    sphinx["config"]["html_static_path"] = [str((book / p).resolve()) for p in sphinx["config"]["html_static_path"]]
    # Sphinx compiles site/locale's sphinx.po into a .mo beside it: a copy under _build keeps it out of the tree.
    locale = out / "_build" / "zh-locale"
    shutil.rmtree(locale, ignore_errors=True)
    shutil.copytree((book / sphinx["config"]["locale_dirs"][0]).resolve(), locale)
    sphinx["config"]["locale_dirs"] = [str(locale)]
    ids = out / "_build" / "zh-heading-ids.json"
    ids.write_text(json.dumps(english_heading_ids(out / "_build" / "html", root), indent=1), encoding="utf-8")
    sphinx["config"]["course_site_heading_ids"] = str(ids)
    assets = fetch_assets.ensure_assets(out / "_build" / "site-assets", quiet=True)
    env = dict(os.environ, COURSE_LANGUAGE=LANGUAGE,
               COURSE_CJK_FONT=str(fetch_assets.cjk_font(assets)),
               IPYTHONDIR=str(_kernel_profile(out / "_build" / "zh-ipython")))
    with tempfile.TemporaryDirectory(prefix="zh-book-") as tmp:
        config_path = Path(tmp) / "_config.yml"
        config_path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
        jupyter_book = Path(sys.executable).with_name("jupyter-book")
        done = subprocess.run([str(jupyter_book), "build", str(root / ZH_ROOT), "--config", str(config_path),
                               "--path-output", str(out / "_build" / "zh-book"), *extra_args],
                              capture_output=True, text=True, env=env)
    if done.returncode == 0:
        target = out / "_build" / "html" / "zh"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(out / "_build" / "zh-book" / "_build" / "html", target)
    return done


def code_cells_match(root: Path = REPO_ROOT) -> list[str]:
    """Pages whose Chinese notebook's code cells differ from the English ones (should be none),
    the text of their docstrings (translated) left out of the comparison."""
    problems = []
    for page in pages(root):
        if not page.is_notebook:
            continue
        target = root / ZH_ROOT / page.path.relative_to(root)
        if not target.exists():
            problems.append(f"{target.relative_to(root)} is missing")
            continue
        english = [(c.cell_type, c.source) for c in read_notebook(page.path).cells if c.cell_type != "markdown"]
        chinese = [(c.cell_type, c.source) for c in read_notebook(target).cells if c.cell_type != "markdown"]
        zh_setup = setup_cell_source(root, LANGUAGE)     # the one line the editions' code may differ in
        chinese = [(kind, setup_cell_source(root) if source == zh_setup else source) for kind, source in chinese]
        if [(k, without_docstrings(s)) for k, s in english] != [(k, without_docstrings(s)) for k, s in chinese]:
            problems.append(f"{target.relative_to(root)}: its code cells differ from {page.path.relative_to(root)}")
    return problems


def markup_report(docname: str, root: Path = REPO_ROOT) -> list[str]:
    """Translations of one page that lost or changed markup (:func:`markup_problems`), one line each."""
    path = catalogue_path(docname, root)
    report = []
    for message in (read_catalogue(path) if path.exists() else []):
        if message.id and message.string and not message.fuzzy:
            lost = markup_problems(message.id, message.string)
            if lost:
                first_line = message.id.splitlines()[0][:60]
                report.append(f"{path.relative_to(root)}: the translation of {first_line!r}...: {'; '.join(lost)}")
    return report


def problems(root: Path = REPO_ROOT, *, complete: bool = True) -> list[str]:
    """Everything that keeps the Chinese edition from matching the English one, one line each.

    Args:
        complete: also report untranslated and outdated (fuzzy) paragraphs.
    """
    found = []
    for docname, counts in status(root).items():
        runtime = docname.startswith("course_runtime/")
        path = runtime_catalogue_path(docname.split("/")[-1], root) if runtime else catalogue_path(docname, root)
        if complete and (counts["fuzzy"] or counts["untranslated"]):
            found.append(f"{path.relative_to(root)}: {counts['untranslated']} untranslated "
                         f"and {counts['fuzzy']} outdated (fuzzy) {'messages' if runtime else 'paragraphs'}")
        if not runtime:
            found += markup_report(docname, root)
    return found + code_cells_match(root) + (reader_problems(root) if complete else [])


def stale_entries(docname: str, root: Path = REPO_ROOT) -> list[dict]:
    """The outdated messages of one page: what the English said, what it says now, the old translation."""
    path = catalogue_path(docname, root)
    return [{"now": m.id, "was": m.previous_id[0] if m.previous_id else "", "translation": m.string}
            for m in read_catalogue(path) if m.id and m.fuzzy] if path.exists() else []


def dump_status(counts: dict[str, dict[str, int]]) -> str:
    """A table of the catalogues' state."""
    lines = [f"{'page':<48} {'done':>5} {'fuzzy':>6} {'todo':>5}"]
    for docname, c in counts.items():
        lines.append(f"{docname:<48} {c['translated']:>5} {c['fuzzy']:>6} {c['untranslated']:>5}")
    return "\n".join(lines)



# --- What the code shows: figure text, widget labels, test messages --------------------------------
#
# The code cells are the same in both languages; what they draw and say is translated in the kernel
# when it is shown (course_runtime/language.py), from two catalogues that ship with course_runtime.

RUNTIME_LOCALE_DIR = Path("course_runtime") / "locales" / LANGUAGE / "LC_MESSAGES"
PATTERN_FLAG = "course-pattern"      # an f-string: its {...} parts match any text
# Calls whose string arguments end up on a figure or a widget, and keywords that carry such strings.
_FIGURE_CALLS = {"set_title", "set_xlabel", "set_ylabel", "suptitle", "title", "xlabel", "ylabel", "text",
                 "annotate", "set_text", "legend", "figtext", "Label", "HTML", "HTMLMath", "Button",
                 "set_xticklabels", "set_yticklabels"}
_FIGURE_KEYWORDS = {"label", "title", "xlabel", "ylabel", "description", "tooltip", "placeholder",
                    "x_labels", "y_labels", "labels", "options"}
_MESSAGE_KEYWORDS = {"hint", "mistakes"}
# Figure strings that the code computes rather than writes (plot_curves labels a curve by its history
# key, ``train_loss`` -> ``train loss``; a title's f-string chooses between "with" and "without").
_COMPUTED_FIGURE_STRINGS = [("train loss", False), ("val loss", False), ("with", False), ("without", False)]


def _string_value(node: "ast.AST") -> tuple[str, bool] | None:
    """A string literal as (text, False), an f-string as (pattern with {placeholders}, True)."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
            else:
                spec = ""
                if value.format_spec is not None:
                    spec = ":" + "".join(str(v.value) for v in value.format_spec.values if isinstance(v, ast.Constant))
                conversion = "!" + chr(value.conversion) if value.conversion != -1 else ""
                parts.append("{" + ast.unparse(value.value) + conversion + spec + "}")
        return "".join(parts), True
    return None


def _strings_in(node: "ast.AST") -> list[tuple[str, bool]]:
    """The strings an expression can evaluate to: literals, f-strings, both sides of ``+`` and of
    ``a if c else b``, the items of lists, tuples and dicts (keys and values)."""
    import ast

    found = _string_value(node)
    if found:
        return [found]
    children = []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        children = [node.left, node.right]
    elif isinstance(node, ast.IfExp):
        children = [node.body, node.orelse]
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        children = node.elts
    elif isinstance(node, ast.Dict):
        children = [k for k in node.keys if k is not None] + node.values
    elif isinstance(node, ast.ListComp):
        children = [node.elt]
    elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_with_hint" and node.args:
        children = [node.args[0]]
    return [s for child in children for s in _strings_in(child)]


def _is_words(text: str) -> bool:
    """Words a reader sees (two letters or more outside math and placeholders), not an identifier
    (``train_loss``) or an address."""
    plain = re.sub(r"\$[^$]*\$|\{[^{}]*\}", " ", text)
    identifier = re.fullmatch(r"[A-Za-z_][\w.]*", text.strip()) and ("_" in text or "." in text)
    return re.search(r"[A-Za-z]{2,}", plain) is not None and not identifier and "://" not in text


def _parse_code(source: str):
    """The AST of a code cell, IPython magics and shell lines blanked out (kept as ``pass``)."""
    import ast

    lines = [re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in source.split("\n")]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def code_strings(sources: list[str], *, figures: bool) -> list[tuple[str, bool]]:
    """The strings that code shows: on figures and widgets (``figures=True``), or in test messages
    (``assert`` messages, ``raise`` messages, ``hint=`` and ``mistakes=`` of the checks)."""
    import ast

    found: dict[str, bool] = {}
    for source in sources:
        tree = _parse_code(source)
        if tree is None:
            continue
        for node in ast.walk(tree):
            candidates = []
            if figures and isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in _FIGURE_CALLS:
                    candidates += node.args
                candidates += [k.value for k in node.keywords if k.arg in _FIGURE_KEYWORDS]
            elif not figures:
                if isinstance(node, ast.Assert) and node.msg is not None:
                    candidates.append(node.msg)
                elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                    if getattr(node.exc.func, "id", "") in ("AssertionError", "NotImplementedError", "ShortcutError"):
                        candidates.append(node.exc.args[0])
                elif isinstance(node, ast.Call):
                    candidates += [k.value for k in node.keywords if k.arg in _MESSAGE_KEYWORDS]
            for candidate in candidates:
                for text, is_pattern in _strings_in(candidate):
                    if _is_words(text):
                        found.setdefault(text, is_pattern)
    return list(found.items())


def runtime_messages(root: Path = REPO_ROOT) -> dict[str, list[tuple[str, bool]]]:
    """``{"figures": [...], "messages": [...]}``: the (English, is_pattern) strings the code shows.

    Figures: the chapters' code cells and ``course_runtime/viz.py``. Messages: ``course_runtime/testing.py``
    and the code cells of the released exercises (their visible tests only: hidden tests are not in
    the released notebooks, and their messages stay out of a package that learners install).
    """
    chapters = [cell.source for page in pages(root) if page.is_notebook and page.docname.startswith("book/")
                for cell in read_notebook(page.path).cells if cell.cell_type == "code"]
    exercises = [cell.source for page in pages(root) if page.is_notebook and not page.docname.startswith("book/")
                 for cell in read_notebook(page.path).cells if cell.cell_type == "code"]
    runtime = root / "course_runtime"
    viz = (runtime / "viz.py").read_text(encoding="utf-8") if (runtime / "viz.py").exists() else ""
    testing = (runtime / "testing.py").read_text(encoding="utf-8") if (runtime / "testing.py").exists() else ""
    stub = ['raise NotImplementedError("replace this line with your code")']
    return {"figures": code_strings(chapters + exercises + [viz], figures=True) + _COMPUTED_FIGURE_STRINGS,
            "messages": code_strings([testing] + exercises + stub, figures=False)}


def runtime_catalogue_path(domain: str, root: Path = REPO_ROOT) -> Path:
    return root / RUNTIME_LOCALE_DIR / f"{domain}.po"


def update_runtime(root: Path = REPO_ROOT) -> None:
    """Merge the code's figure strings and test messages into ``course_runtime/locales`` (as
    :func:`update` does for the pages); an f-string's entry is flagged ``course-pattern``."""
    for domain, strings in runtime_messages(root).items():
        path = runtime_catalogue_path(domain, root)
        template = _template([text for text, _ in strings], f"<code: {domain}>")
        for text, is_pattern in strings:
            if is_pattern:
                template[text].flags.add(PATTERN_FLAG)
        if path.exists():
            catalog = read_catalogue(path)
            catalog.update(template, update_header_comment=False)
            catalog.obsolete.clear()
            for message in catalog:            # the flag follows the code (a literal may become an f-string)
                if message.id and message.id in template:
                    message.flags.discard(PATTERN_FLAG)
                    message.flags |= template[message.id].flags & {PATTERN_FLAG}
        else:
            catalog = template
        write_catalogue(catalog, path)


def runtime_status(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """Counts of the runtime catalogues, as :func:`status` gives them for the pages."""
    counts = {}
    for domain in ("figures", "messages"):
        path = runtime_catalogue_path(domain, root)
        entries = [m for m in read_catalogue(path) if m.id] if path.exists() else []
        counts[f"course_runtime/{domain}"] = {
            "translated": sum(1 for m in entries if m.string and not m.fuzzy),
            "fuzzy": sum(1 for m in entries if m.fuzzy),
            "untranslated": sum(1 for m in entries if not m.string),
        }
    return counts


# --- What a Chinese reader sees: English left over, typesetting, one form per term -----------------

TERMS_FILE = Path("locales") / LANGUAGE / "terms.yml"
# What stays English in Chinese text: names of libraries, models, papers' authors and the like, and
# any English in full-width parentheses (a term's English at first use: 词元（token）).
_FULLWIDTH_GLOSS = re.compile(r"（[^（）\u4e00-\u9fff]*）")
_ENGLISH_WORD = r"(?:[A-Za-z][\w'’-]*|⟨⟩)"
_ENGLISH_RUN = re.compile(rf"{_ENGLISH_WORD}(?:[ \t,]+{_ENGLISH_WORD})+")


def load_terms(root: Path = REPO_ROOT) -> dict:
    """``locales/zh_CN/terms.yml``: ``{"terms": [...], "keep": [...]}`` (see the file's header)."""
    import yaml

    path = root / TERMS_FILE
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    data = data or {}
    data.setdefault("terms", [])
    data.setdefault("keep", [])
    return data


#: What :func:`visible_prose` leaves where it took out code or math (neither a letter nor Chinese).
HOLE = "⟨⟩"


def visible_prose(markdown: str) -> str:
    """The words of a Markdown text a reader sees as prose: without code (fenced and inline), math,
    link targets and addresses, directive and label lines, role names, HTML tags and comments.
    A role's text stays (``{term}`掩码 <mask>``` -> ``掩码``)."""
    # A glossary entry's first line is the English term the chapters link to: it stays English.
    text = re.sub(r"(?ms)^(\s*(`{3,}|:{3,})\{glossary\}[^\n]*\n)(.*?)^(\s*\2\s*)$",
                  lambda m: m.group(1) + re.sub(r"(?m)^(?![ \t]|:)\S.*$", " ", m.group(3)) + m.group(4), markdown)
    text = re.sub(r"\{cite(?::\w+)?\}`[^`]*`", HOLE, text)                 # citations are keys
    text = re.sub(r"\{[\w:-]+\}`([^`<]*?)\s*(?:<[^>`]*>)?`", r"\1", text)  # other roles keep their text
    text = _strip_code(text, HOLE)
    text = _DISPLAY_MATH.sub(HOLE, text)
    text = _INLINE_MATH.sub(HOLE, text)
    text = re.sub(r"(?m)^\s*(`{3,}|:{3,})\{[^}]*\}", " ", text)          # directive names (titles stay)
    text = re.sub(r"(?m)^\s*:[\w-]+:.*$|^\s*(`{3,}|:{3,})\s*$|^\s*\([\w-]+\)=\s*$", " ", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)                       # images (the Colab badge)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"https?://\S+|<!--.*?-->|<[^>]+>", " ", text, flags=re.DOTALL)
    return text


def page_prose(path: Path) -> list[str]:
    """The visible prose of a page of ``zh/``: each markdown cell of a notebook, or the Markdown file."""
    if path.suffix == ".ipynb":
        return [visible_prose(c.source) for c in read_notebook(path).cells if c.cell_type == "markdown"]
    return [visible_prose(path.read_text(encoding="utf-8"))]


def english_runs(prose: str, keep: list[str] = ()) -> list[str]:
    """Runs of four or more English words in Chinese prose (an untranslated sentence), other than
    the ``keep`` phrases (names) and English glosses in full-width parentheses.

    Example:
        >>> english_runs("自注意力（scaled dot-product attention）由 Vaswani et al. 提出。This was left in English.")
        ['This was left in English']
    """
    text = _FULLWIDTH_GLOSS.sub(" ", prose.replace("’", "'"))     # a built page's typographic apostrophe
    for phrase in sorted(keep, key=len, reverse=True):
        text = text.replace(phrase, " ")
    runs = [m.group(0).strip(" ,⟨⟩") for m in _ENGLISH_RUN.finditer(text)]
    return [run for run in runs if len(re.findall(r"[A-Za-z][\w'’-]*", run)) >= 4]


_TYPESETTING = [
    (re.compile(rf"[\u4e00-\u9fff][ \t]+[\u4e00-\u9fff]"), "a space between Chinese characters"),
    (re.compile(rf"[\u4e00-\u9fff][,;:?!](?=\s|[\u4e00-\u9fff]|$)|[\u4e00-\u9fff]\.(?=\s*[\u4e00-\u9fff]|\s*$)"),
     "ASCII punctuation after a Chinese character (use ，；：？！。)"),
    (re.compile(r"\d\s+%"), "a space before % (46%)"),
    (re.compile(r"[“‘]\s|\s[”’]"), "a space inside quotation marks"),
    (re.compile(rf"[\u4e00-\u9fff]\s*->|->\s*[\u4e00-\u9fff]"), "ASCII -> in Chinese text (use →)"),
    (re.compile(rf"(?<![*\w”’.)）])\*[^*\s][^*]*[\u4e00-\u9fff][^*]*\*(?!\*)|(?<![\w_])_[^_\s][^_]*[\u4e00-\u9fff][^_]*_(?![\w_])"),
     "italics on Chinese characters (use bold or nothing)"),
]


def typesetting_problems(prose: str) -> list[str]:
    """Chinese typesetting mistakes in prose: ``"<what>: <context>"`` for each.

    Example:
        >>> typesetting_problems("即一个 仅解码器模型, 占 46 %。")
        ['a space between Chinese characters: …即一个 仅解码器模型…', 'ASCII punctuation after a Chinese character (use ，；：？！。): …仅解码器模型, 占 46…', 'a space before % (46%): …, 占 46 %。…']
    """
    found = []
    for pattern, what in _TYPESETTING:
        for match in pattern.finditer(prose):
            context = prose[max(0, match.start() - 5):match.end() + 5].replace("\n", " ")
            found.append(f"{what}: …{context}…")
    return found


def _headings_removed(prose: str) -> str:
    return re.sub(r"(?m)^\s*#+\s.*$", " ", prose)


def term_problems(prose: str, terms: list[dict]) -> list[str]:
    """Where a page departs from the term list: a form to avoid, or a term's first use (outside
    headings) without its English in full-width parentheses.

    Example:
        >>> term_problems("被掩蔽的位置。词元是模型的输入。", [{"en": "token", "zh": "词元"},
        ...                {"en": "masked", "zh": "被掩码", "avoid": ["被掩蔽"], "gloss": False}])
        ['first use of 词元 without （token）', '"被掩蔽" (write 被掩码 for masked)']
    """
    found = []
    for term in terms:
        for avoided in term.get("avoid", []):
            if avoided in prose:
                found.append(f'"{avoided}" (write {term["zh"]} for {term["en"]})')
        plain = _FULLWIDTH_GLOSS.sub(lambda m: m.group(0) if re.search("[\u4e00-\u9fff]", m.group(0)) else "（）", prose)
        for pattern in term.get("avoid_re", []):
            for match in re.finditer(pattern, plain):
                found.append(f'"{match.group(0).strip()}" (write {term["zh"]} for {term["en"]})')
        if term.get("gloss", True):
            body = _headings_removed(prose)
            first = body.find(term["zh"])
            if first < 0:
                continue
            before = body[max(0, first - 12):first]
            if any(before.endswith(alternative.replace(term["zh"], "")) and alternative != term["zh"]
                   for alternative in term.get("first", [])):
                continue
            after = re.sub(r"^[*_`]+", "", body[first + len(term["zh"]):first + len(term["zh"]) + 80])
            gloss = re.match(r"（([^（）]*)）", after)
            english = term["en"].lower().replace("-", " ")
            if not gloss or english.split()[-1].rstrip("s") not in gloss.group(1).lower().replace("-", " "):
                found.append(f"first use of {term['zh']} without （{term['en']}）")
    return found


def reader_problems(root: Path = REPO_ROOT) -> list[str]:
    """English sentences, typesetting mistakes and departures from the term list on the pages of
    ``zh/`` (the bibliography's English titles excepted), one line each."""
    terms = load_terms(root)
    found = []
    for page in pages(root):
        path = root / ZH_ROOT / page.path.relative_to(root)
        if not path.exists() or page.docname == "book/references":
            continue
        prose = "\n\n".join(page_prose(path))
        where = path.relative_to(root).as_posix()
        found += [f"{where}: English left: {run!r}" for run in english_runs(prose, terms["keep"])]
        found += [f"{where}: {problem}" for problem in typesetting_problems(prose)]
        # The glossary gives every term's English on the line above its entry: no parentheses needed.
        listed = [dict(t, gloss=False) for t in terms["terms"]] if page.docname == "book/glossary" else terms["terms"]
        found += [f"{where}: {problem}" for problem in term_problems(prose, listed)]
    return found

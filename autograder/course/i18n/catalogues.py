"""The gettext catalogues of the pages: read, written and merged with Babel, each message's markup checked, and a
page's text translated from them."""

from __future__ import annotations

import re
from pathlib import Path

from autograder.core.files import REPO_ROOT
from autograder.course.i18n.comment_text import COMMENT_CONTEXT, translate_fence
from autograder.course.i18n.docstring_text import DOCSTRING_CONTEXT, docstrings
from autograder.course.i18n.extract import LANGUAGE, LOCALE_DIR, blocks
from autograder.course.i18n.typesetting import MATH_CONTEXT, join_cjk_lines, translate_math


_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
_INLINE_CODE = re.compile(r"(?<![`}])`([^`\n]+)`(?!`)")
INLINE_MATH = re.compile(r"(?<!\$)\$((?:[^$\n]|\n(?!\s*\n))+?)\$(?!\$)")
DISPLAY_MATH = re.compile(r"\$\$(.*?)\$\$", re.DOTALL)
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
        without_math = DISPLAY_MATH.sub(" ", without_roles)
        return {
            "role": sorted(_role_target(r, t) for r, t in _ROLE.findall(text)),
            "inline code": sorted(_INLINE_CODE.findall(INLINE_MATH.sub(" ", without_math))),
            "math": sorted(" ".join(m.split()) for m in INLINE_MATH.findall(without_math)),
            "display math": sorted(" ".join(m.split()) for m in DISPLAY_MATH.findall(without_roles)),
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


def catalogue_template(msgids: list[str], location: str, creation_date=None, *, math: list[str] = (),
                       docstrings: list[str] = (), test_docstrings: list[str] = (), comments: list[str] = (),
                       written: list[tuple[str, str]] = ()):
    """A page's catalogue: its blocks, the phrases of its formulas, the docstrings of its solution cells and of
    its test and locked cells' visible part, the prose comments of its code and the model answers and rubrics of its written questions (``(context,
    English)`` pairs), untranslated."""
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
    for index, body in enumerate(test_docstrings, start=len(docstrings) + 1):
        catalog.add(body, locations=[(location, index)], context=DOCSTRING_CONTEXT,
                    auto_comments=["The docstring of a helper that a visible test defines, as written between its "
                                   "quotes: keep each line's indentation, parameter names, shapes and code."])
    for index, text in enumerate(comments, start=1):
        catalog.add(text, locations=[(location, index)], context=COMMENT_CONTEXT,
                    auto_comments=["A comment of the code (after its #): translate it on one line; keep names and "
                                   "code as they are."])
    for index, (context, text) in enumerate(written, start=1):
        catalog.add(text, locations=[(location, index)], context=context,
                    auto_comments=[f"The written question's {context}, from the solution notebook: the instructor "
                                   "and the review page see it, never the learner's exercise."])
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


def translations(docname: str, root: Path = REPO_ROOT, *, context: str | None = None) -> dict[str, str]:
    """English -> Chinese, for the finished (not fuzzy, not empty) messages of a page: its blocks,
    with ``context=MATH_CONTEXT`` the phrases inside its formulas, with ``context=DOCSTRING_CONTEXT``
    the docstrings of its solution cells and visible tests, with ``context=COMMENT_CONTEXT`` the comments of
    its code."""
    path = catalogue_path(docname, root)
    if not path.exists():
        return {}
    return {m.id: m.string for m in read_catalogue(path)
            if m.id and m.string and not m.fuzzy and m.context == context}


def translate_text(text: str, table: dict[str, str], math: dict[str, str] | None = None,
                   comments: dict[str, str] | None = None) -> str:
    """``text`` with every block that has a translation replaced by it (others stay English), the
    translated blocks' line breaks between Chinese characters joined (:func:`join_cjk_lines`), the
    phrases of formulas translated (:func:`translate_math`) and the comments of code fences
    (:func:`translate_fence`)."""
    out = []
    for block in blocks(text):
        if block in table:
            block = join_cjk_lines(table[block])
        elif comments:
            block = translate_fence(block, comments)
        out.append(translate_math(block, math or {}))
    return "\n\n".join(out)

"""Chinese typesetting: lines joined between Chinese characters, and the phrases in formulas (``\\text{...}``)
translated."""

from __future__ import annotations

import re

from autograder.course.i18n.extract import FENCE


#: CJK ideographs, kana, CJK and full-width punctuation, and the curly quotes, dash and ellipsis
#: that Chinese text uses.
CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\u201c\u201d\u2018\u2019\u2014\u2026"
# A line break with a Chinese character on both sides, allowing emphasis, a role or a link's end between.
_CJK_BREAK = re.compile(rf"([{CJK}](?:\*\*|\*|_|`|\]\([^)\s]*\)|\])?)\n[ \t]*((?:\*\*|\*|_|\[|\{{[\w:-]+\}}`)?[{CJK}])")
#: Full-width punctuation (and the curly quotes, dash and ellipsis): it carries its own spacing, so no
#: space may stand after or before it, whatever is on the other side (code, math, a role, a Latin word).
FULLWIDTH_PUNCT = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65\u201c\u201d\u2018\u2019\u2014\u2026"
# A line break after full-width punctuation (emphasis may close between) or before it (emphasis may
# open between), spaces and tabs around it included.
_PUNCT_BREAK = re.compile(rf"(?<=[{FULLWIDTH_PUNCT}])(?:\*\*|\*|_)?[ \t]*\n[ \t]*"
                          rf"|[ \t]*\n[ \t]*(?=(?:\*\*|\*|_)?[{FULLWIDTH_PUNCT}])")
# A blank line, or a line that opens a Markdown block (a list item, heading, quote, table row, fence,
# directive or its option, display math, a label): the break before it is a real one.
_BLOCK_START = re.compile(r"[ \t]*(?:\n|$|[-*+][ \t]|\d+[.)][ \t]|[#>|]|`{3}|~{3}|:|\$\$|\([^)\s]*\)=)")
# Spans whose line breaks mean something: code fences (not a directive's) and display math.
_KEEP_LINES = re.compile(r"(`{3,}|~{3,})(?![ \t]*\{(?!code|math))[^\n]*\n.*?\1|\$\$.*?\$\$", re.DOTALL)


def _joined(text: str) -> str:
    """``text`` with each line break between Chinese characters or beside full-width punctuation
    removed, except where the next line opens a block or the line before is a heading, table row, fence,
    directive or directive option (``注意：`` closing a directive's title line stays apart from its body)."""
    def join(match: re.Match, joined: str) -> str:
        newline = text.index("\n", match.start())
        before = text[text.rfind("\n", 0, newline) + 1:newline]
        if _BLOCK_START.match(text, newline + 1) or re.match(r"[ \t]*(?:`{3}|~{3}|:|#|\|)", before) or not before.strip():
            return match.group(0)
        return joined
    text = _CJK_BREAK.sub(lambda m: join(m, m.group(1) + m.group(2)), text)
    return _PUNCT_BREAK.sub(lambda m: join(m, m.group(0).strip(" \t\n")), text)


def join_cjk_lines(text: str) -> str:
    r"""Join the lines of a Chinese paragraph where the break falls between two Chinese characters,
    or after or before full-width punctuation (whatever is on its other side).

    A browser shows a line break inside a paragraph as a space, which is right between English
    words and wrong between Chinese characters ("即一个 仅解码器模型") and beside full-width
    punctuation ("AMX； `torch`", "`key` （第 5 章）"). A break before a list item, heading, fence or
    directive option stays.

    Example:
        >>> join_cjk_lines("即一个\n**仅解码器模型**，\n在 CPU 上运行，\n`x` 很小\n（见上）：\n- 列表项")
        '即一个**仅解码器模型**，在 CPU 上运行，`x` 很小（见上）：\n- 列表项'
    """
    out, last = [], 0
    for kept in _KEEP_LINES.finditer(text):
        out += [_joined(text[last:kept.start()]), kept.group(0)]
        last = kept.end()
    out.append(_joined(text[last:]))
    return "".join(out)


MATH_CONTEXT = "math"
# \text{...} that is not a subscript or superscript (those are names: d_\text{model}, n_\text{layers}),
# or that holds a space wherever it is: a phrase (\sum_{\text{parameters } p}, \underbrace{...}_{\text{per token}}).
_MATH_TEXT = re.compile(r"(?:(?<![_^])(?<![_^]\{)|(?=\\text\{[^{}]*\s))\\text\{([^{}]+)\}")
# Names kept in formulas: identifiers (max\_norm) and abbreviations (NaN, MFU, FLOPs, FFN).
_MATH_NAME = re.compile(r"^\s*(?:[A-Za-z]+(?:\\_[A-Za-z]+)+|[A-Z][A-Za-z]*[A-Z][A-Za-z]?s?|[A-Za-z]|tanh|softmax|logits)\s*$")


def math_phrases(text: str) -> list[str]:
    r"""The English phrases of the formulas in ``text`` (``\text{...}`` outside sub- and superscripts,
    without the spaces around them), which a Chinese page shows translated.

    Example:
        >>> math_phrases(r"$$\text{cost } O(n) \quad d_\text{model}, \text{NaN}, \sum_{\text{all weights } p}$$")
        ['cost', 'all weights']
    """
    found: dict[str, None] = {}
    for match in _MATH_TEXT.finditer(strip_code(text)):
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
        fence = FENCE.match(line)
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


def strip_code(text: str, hole: str = " ") -> str:
    """``text`` without fenced code blocks (not directives) and inline code (each replaced by ``hole``)."""
    text = _strip_fenced(text, hole)
    # Inline code may wrap onto a second line of its paragraph.
    return re.sub(r"(?<![`}])`(?:[^`\n]|\n(?![ \t]*\n))+`(?!`)", hole, text)


_OPENED_FULL_WIDTH = re.compile(r"(\\text\{\s*（[^{}()（）]*\}(?:(?!\\text\{[^{}]*[()（）])[^$])*?)\\text\{\)\}")


_THOUSANDS = re.compile(r"(?<=\d)\{,\}(?=\d{3})")     # LaTeX's thousands separator: 63{,}082


def translate_math(text: str, table: dict[str, str]) -> str:
    r"""``text`` with the phrases of its formulas translated, keeping the spaces around each, and the
    English thousands separators of its numbers (``63{,}082{,}496``) taken out: Chinese writes 63082496
    (two reviewers read the commas as English typesetting, and the prose already writes the digits plain).

    Example:
        >>> translate_math(r"$\text{cost } O(n)$", {"cost": "开销"})
        '$\\text{开销 } O(n)$'
        >>> translate_math(r"$\text{(because } f(a) = 1\text{)}$", {"(because": "（因为"})
        '$\\text{（因为 } f(a) = 1\\text{）}$'
        >>> translate_math(r"$32{,}000 \times 4096$", {})
        '$32000 \\times 4096$'
    """
    def swap(match: re.Match) -> str:
        phrase = match.group(1)
        chinese = table.get(phrase.strip())
        if not chinese:
            return match.group(0)
        lead, trail = phrase[:len(phrase) - len(phrase.lstrip())], phrase[len(phrase.rstrip()):]
        return "\\text{" + lead + chinese + trail + "}"
    # A phrase that opens a parenthesis in full width (\text{(because } -> \text{（因为 }) has it closed in
    # full width too: the \text{)} that follows, before any other parenthesis in a \text{}.
    return _THOUSANDS.sub("", _OPENED_FULL_WIDTH.sub(r"\1\\text{）}", _MATH_TEXT.sub(swap, text)))

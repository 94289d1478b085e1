"""What the grader writes for people to open: CSV cells no spreadsheet evaluates, HTML pages that run no script.

Learners choose much of what these files hold (their names, file names, written answers), and the
files are opened by instructors, in spreadsheets and in browsers, and imported by an LMS. So:

- Every CSV file the grader writes goes through :func:`csv_text`, which neutralises each cell as
  OWASP recommends against CSV (formula) injection: a cell that starts with ``=``, ``+``, ``-``, ``@``,
  a tab or a carriage return gets a leading ``'``, so that a spreadsheet shows it as text. A plain
  number (``-3``, ``-0.5``, ``+1e3``) stays a number, so score columns still import. A cell that
  starts with ``'`` gets one more, so that :func:`from_spreadsheet_cell` (for the files the grader
  reads back) undoes exactly what was added.
- Every HTML page starts with :func:`page_head`, which carries a strict Content-Security-Policy: no
  script at all (``default-src 'none'``), the page's own style sheet allowed by its hash, images only
  as ``data:`` URLs where a page shows them. :func:`content_security_policy` gives the same policy
  for a page that needs its own script (the review page: allowed by the script's hash only).
- Math in written answers is converted to MathML by ``latex2mathml``, which copies ``\\text{...}``
  raw into the markup; :func:`safe_mathml` keeps only an allow-list of MathML elements and
  attributes and escapes everything else.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import re
from html.parser import HTMLParser

__all__ = ["FORMULA_STARTS", "content_security_policy", "csv_text", "from_spreadsheet_cell", "page_head",
           "safe_mathml", "spreadsheet_cell"]

# --- CSV ----------------------------------------------------------------------------------------

#: The first characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_QUOTED_STARTS = FORMULA_STARTS + ("'",)
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_cell(value: object) -> str:
    """``value`` as a CSV cell no spreadsheet evaluates: text starting with a formula character (or with
    ``'``) gets a leading ``'``; a plain number is kept as it is.

    Example:
        >>> [spreadsheet_cell(v) for v in ("=1+1", "-3", "-0.5", "@SUM(A1)", "-x", "Ada", None)]
        ["'=1+1", '-3', '-0.5', "'@SUM(A1)", "'-x", 'Ada', '']
    """
    text = "" if value is None else str(value)
    if text.startswith(_QUOTED_STARTS) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def from_spreadsheet_cell(text: str) -> str:
    """The value :func:`spreadsheet_cell` was given for the cell ``text`` (its inverse); a cell the
    grader did not neutralise is returned as it is.

    Example:
        >>> from_spreadsheet_cell("'=1+1"), from_spreadsheet_cell("'5"), from_spreadsheet_cell("-3")
        ('=1+1', "'5", '-3')
    """
    rest = text[1:]
    if text.startswith("'") and rest.startswith(_QUOTED_STARTS) and not _PLAIN_NUMBER.fullmatch(rest):
        return rest
    return text


def csv_text(rows, *, lineterminator: str = "\r\n") -> str:
    """``rows`` (iterables of cells) as CSV text, every cell through :func:`spreadsheet_cell`."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator=lineterminator)
    for row in rows:
        writer.writerow([spreadsheet_cell(cell) for cell in row])
    return buffer.getvalue()


# --- HTML pages ---------------------------------------------------------------------------------


def _hash_source(text: str) -> str:
    """A CSP hash source for the contents of one ``<style>`` or ``<script>`` element."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(style: str, script: str | None = None, *, images: bool = False,
                            connect: bool = False) -> str:
    """A strict Content-Security-Policy for a page whose only style sheet is ``style``.

    Args:
        style: the exact contents of the page's one ``<style>`` element (allowed by its hash; style
            attributes are not).
        script: the exact contents of the page's one ``<script>`` element, allowed by its hash; None
            (the default): the page runs no script at all.
        images: allow ``data:`` images (the figures of a learner's own run), nothing fetched.
        connect: allow requests to the page's own server (the review page's API).
    """
    parts = ["default-src 'none'", f"style-src {_hash_source(style)}", "base-uri 'none'", "form-action 'none'"]
    if script is not None:
        parts.append(f"script-src {_hash_source(script)}")
    if images:
        parts.append("img-src data:")
    if connect:
        parts.append("connect-src 'self'")
    return "; ".join(parts)


def page_head(title: str, style: str, *, images: bool = False, lang: str = "en") -> str:
    """The start of a page the grader writes, up to and including ``<body>``: the policy first (a
    ``<meta http-equiv>`` applies only to what follows it), then the escaped ``title`` and ``style``.
    ``lang``: the page's language, ``en`` or a course language such as ``zh_CN`` (written ``zh-CN``)."""
    policy = html.escape(content_security_policy(style, images=images), quote=True)
    return (f"<!DOCTYPE html><html lang='{html.escape(lang.replace('_', '-'), quote=True)}'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{policy}\">"
            f"<title>{html.escape(title)}</title><style>{style}</style></head><body>")


# --- MathML -------------------------------------------------------------------------------------

# Presentation MathML, as latex2mathml writes it; no element that links (href), loads or scripts.
_MATH_ELEMENTS = frozenset(
    "math mrow mi mn mo ms mtext mspace mfrac msqrt mroot mstyle merror mpadded mphantom menclose msub msup "
    "msubsup munder mover munderover mmultiscripts mprescripts none mtable mtr mtd mlabeledtr semantics".split())
_VOID_ELEMENTS = frozenset({"mspace", "mprescripts", "none"})
_MATH_ATTRIBUTES = frozenset(
    "xmlns display mathvariant displaystyle scriptlevel stretchy fence separator lspace rspace minsize maxsize "
    "largeop movablelimits accent accentunder form symmetric linethickness columnalign rowalign columnspacing "
    "rowspacing columnlines rowlines frame framespacing width height depth notation voffset mathsize "
    "mathcolor mathbackground align".split())
_SAFE_VALUE = re.compile(r"[\w#.%:/ +-]*")   # numbers, lengths, colour names, #rgb, the MathML namespace


class _MathSanitiser(HTMLParser):
    """Re-writes markup keeping only allowed MathML elements (balanced) and attributes; everything
    else, tags included, comes out as escaped text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag not in _MATH_ELEMENTS:
            self.out.append(html.escape(self.get_starttag_text() or ""))
            return
        kept = "".join(f' {name}="{html.escape(value)}"' for name, value in attrs
                       if name in _MATH_ATTRIBUTES and value is not None and _SAFE_VALUE.fullmatch(value))
        self.out.append(f"<{tag}{kept}>")
        if tag in _VOID_ELEMENTS:
            self.out.append(f"</{tag}>")
        else:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs) -> None:
        self.handle_starttag(tag, attrs)
        if tag in _MATH_ELEMENTS and tag not in _VOID_ELEMENTS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:                                  # close it and whatever is still open inside
            while self.open:
                inner = self.open.pop()
                self.out.append(f"</{inner}>")
                if inner == tag:
                    return
        else:
            self.out.append(html.escape(f"</{tag}>"))

    def handle_data(self, data: str) -> None:
        self.out.append(html.escape(data))

    def unknown_decl(self, data: str) -> None:
        self.out.append(html.escape(f"<![{data}]]>"))

    def result(self) -> str:
        """The sanitised markup, every element still open closed."""
        self.close()
        return "".join(self.out) + "".join(f"</{tag}>" for tag in reversed(self.open))


def safe_mathml(markup: str) -> str:
    """``markup`` (latex2mathml's output) reduced to allowed MathML elements and attributes: any other
    tag is escaped (shown as text), comments and processing instructions are dropped, attribute values
    other than plain words, numbers and lengths are dropped, and every element is closed.

    Example:
        >>> safe_mathml('<math><mtext><img src=x onerror=alert(1)></mtext></math>')
        '<math><mtext>&lt;img src=x onerror=alert(1)&gt;</mtext></math>'
    """
    sanitiser = _MathSanitiser()
    sanitiser.feed(markup)
    return sanitiser.result()

"""The learner's language in a course kernel: figure text, widget labels and test messages.

The Chinese notebooks run the same code cells as the English ones, byte for byte. What a learner
*sees* from that code is translated where it is shown, from gettext catalogues keyed by the English:

- ``locales/zh_CN/LC_MESSAGES/figures.po``: titles, axis labels, legends and widget labels;
- ``locales/zh_CN/LC_MESSAGES/messages.po``: what a failed check or test says (``testing.check_close``
  and friends, the hints and ``assert`` messages of the exercises' visible tests, the stub's
  ``NotImplementedError``) and what the chapters' and exercises' cells print (``"Part A: visible tests
  passed."``, ``"scores:"``, a table's header).

Both are written by ``python -m autograder i18n update`` from the code (English ``msgid``), and
translated like the page catalogues. An entry flagged ``course-pattern`` came from an f-string: its
``{...}`` parts are placeholders that match any text and reappear in the translation
(``"layer {layer}, head {h}"`` -> ``"第 {layer} 层，第 {h} 个头"``; ``{{`` and ``}}`` are literal braces).

Which language: :func:`set_language` (the Chinese notebooks' setup cell; the grader for a Chinese
submission), else ``$COURSE_LANGUAGE`` (the Chinese book build sets it), else English, where every
function here returns its input unchanged. :func:`install` puts the translation where output is
shown: matplotlib figures when they are drawn to an image (with a CJK font: ``$COURSE_CJK_FONT``, one
installed on the system, or on Colab one fetched once; without one the figures stay English rather
than show empty boxes, and :func:`install` says so in Chinese, with the fix), ipywidgets labels when a
widget is made or relabelled (``interact`` names a slider after its keyword), tqdm progress bars'
descriptions, the traceback of a failed ``assert`` in IPython, and what a cell prints (a write that is all
of a string the chapters or exercises print, ``messages.po``'s entries flagged ``course-print``, in the
columns the English takes where it was padded to line up: a Chinese character is two wide). Figure text that the code keeps
in a variable is translated the same way, when it is drawn (``python -m autograder i18n update`` follows
such variables to find it, see ``autograder/course/i18n/runtime_text.py``). Loaded
as an IPython extension (``%load_ext course_runtime.language``), it installs itself for the
language in force.

Only the standard library is needed to read the catalogues (this runs in a learner's kernel).
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import os
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

ENGLISH = "en"
CHINESE = "zh_CN"
LANGUAGES = (ENGLISH, CHINESE)
ENV_LANGUAGE = "COURSE_LANGUAGE"
ENV_FONT = "COURSE_CJK_FONT"
CATALOGUE_DIR = Path(__file__).resolve().parent / "locales"
DOMAINS = ("figures", "messages")
PATTERN_FLAG = "course-pattern"
PRINT_FLAG = "course-print"          # a messages.po entry that a code cell prints
#: Fonts with Chinese glyphs that may already be installed (Debian, macOS, Windows).
SYSTEM_CJK_FONTS = ("Noto Sans SC", "Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
                    "WenQuanYi Micro Hei", "PingFang SC", "Microsoft YaHei", "SimHei")
#: Font files that a package manager installs (``apt-get install fonts-noto-cjk`` on Colab, Debian,
#: Ubuntu): found by path, since matplotlib does not see fonts installed after its font cache was built.
SYSTEM_CJK_FILES = ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
                    "/usr/share/fonts/opentype/noto/NotoSansCJKsc-Regular.otf",
                    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
#: The font the book build draws figure text with (site/assets.json: @fontsource/noto-sans-sc 5.3.0,
#: OFL-1.1), one 1.5 MB file that a Colab runtime fetches once when it has no CJK font.
FONT_URL = ("https://cdn.jsdelivr.net/npm/@fontsource/noto-sans-sc@5.3.0/files/"
            "noto-sans-sc-chinese-simplified-400-normal.woff")
FONT_SHA256 = "dc20a86875ff056a6332c353bc9a82d199bb2e5aae1d444f912c1fbff783bfa5"
FONT_CACHE = Path.home() / ".cache" / "transformer-core-site" / "fonts"
#: What :func:`install` says when figures cannot be drawn in Chinese.
NO_FONT_NOTICE = {CHINESE: (
    "注意：这台机器上没有中文字体，图中的文字将保持英文（否则汉字会显示成方框）。"
    "解决办法：在 Colab 或 Debian/Ubuntu 上运行 `!apt-get install -y fonts-noto-cjk`"
    "（在自己的机器上去掉开头的 !，必要时加 sudo），然后重新运行本单元格；"
    "也可以把环境变量 COURSE_CJK_FONT 设为一个中文字体文件（.ttf 或 .otf）的路径。")}

_chosen: str | None = None


def normalize_language(language: str | None) -> str:
    """``"zh"``, ``"zh-CN"``, ``"zh_cn"`` -> ``"zh_CN"``; ``None``, ``""``, ``"en"``, ``"en_US"`` -> ``"en"``.

    Raises:
        ValueError: for a language the course does not have, naming the ones it has.
    """
    key = (language or ENGLISH).strip().replace("-", "_").lower()
    if key in ("zh", "zh_cn", "zh_hans", "zh_hans_cn"):
        return CHINESE
    if key == "en" or key.startswith("en_"):
        return ENGLISH
    raise ValueError(f"the course has no language {language!r}; choose one of {', '.join(LANGUAGES)}")


def get_language() -> str:
    """The language in force: :func:`set_language`'s, else ``$COURSE_LANGUAGE``, else English."""
    return _chosen or normalize_language(os.environ.get(ENV_LANGUAGE))


def set_language(language: str | None) -> str:
    """Choose the language of what the course's code shows in this process (and its children, through
    ``$COURSE_LANGUAGE``); returns it normalised. Call :func:`install` to translate figures and widgets."""
    global _chosen
    _chosen = normalize_language(language)
    os.environ[ENV_LANGUAGE] = _chosen
    return _chosen


# --- Catalogues -----------------------------------------------------------------------------------


@dataclass
class Entry:
    msgid: str = ""
    msgstr: str = ""
    context: str | None = None
    flags: set[str] = field(default_factory=set)


def _unquote(line: str) -> str:
    return ast.literal_eval(line)  # a PO string is a C string; Python's literal rules read it the same


def read_po(path: Path) -> list[Entry]:
    """The entries of a gettext catalogue (msgctxt, msgid, msgstr and flags; no plural forms).

    Raises:
        ValueError: naming the file and line of something that is not PO syntax.
    """
    entries, entry, current, flags = [], Entry(), None, set()
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if line.startswith("#,"):
            flags |= {f.strip() for f in line[2:].split(",") if f.strip()}
            continue
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        try:
            if keyword in ("msgctxt", "msgid", "msgstr"):
                value = _unquote(rest)
                if keyword != "msgstr" and current in ("msgstr", None):
                    if current == "msgstr":
                        entries.append(entry)
                    entry, flags = Entry(flags=flags), set()
                current = keyword
            elif line.startswith('"') and current:
                keyword, value = current, _unquote(line)
            else:
                raise ValueError(line)
        except (ValueError, SyntaxError):
            raise ValueError(f"{path}:{number}: not a line of a PO catalogue: {raw!r}") from None
        if keyword == "msgctxt":
            entry.context = (entry.context or "") + value
        else:
            setattr(entry, keyword, getattr(entry, keyword) + value)
    if current == "msgstr":
        entries.append(entry)
    return [e for e in entries if e.msgid]


def _nested(depth: int) -> str:
    """A regular expression for text whose brackets come in pairs, nested at most ``depth`` deep."""
    plain = r"[^()\[\]{}]"
    if depth == 0:
        return plain
    inner = _nested(depth - 1)
    return f"(?:{plain}|\\((?:{inner})*\\)|\\[(?:{inner})*\\]|\\{{(?:{inner})*\\}})"


# A placeholder's value whose brackets pair up (``(2, 5)``, ``tensor([[1., 2.]])``); each character can
# start only one alternative, so matching it never backtracks far.
_BALANCED = f"(?:{_nested(3)})+?"


def _balanced(text: str) -> bool:
    """Whether every bracket of ``text`` is closed, in order."""
    stack = []
    for char in text:
        if char in _OPENS:
            stack.append(_CLOSES[_OPENS.index(char)])
        elif char in _CLOSES and (not stack or stack.pop() != char):
            return False
    return not stack


def _pattern(msgid: str, *, balanced: bool = False) -> tuple[re.Pattern, list[str]]:
    """A full-match regular expression for an f-string message, and its placeholders in order; the value
    of the i-th placeholder is the group named ``v<i>``. With ``balanced``, a value holds its brackets in
    pairs (:data:`_BALANCED`): a shape ``(2, 5)`` before ``", {n}"`` is not cut at its comma.

    Each placeholder but the last takes the text up to the first place where the words after it follow,
    and keeps it (a lookahead is never backtracked into). The earliest place leaves the most room for the
    rest, so this matches every text that trying each place would, in time linear in the text for each
    placeholder: trying each place, ``"{a} {b} {c} {d} MiB"`` takes time that grows with the number of
    spaces in a learner's line to the fourth power (minutes for a long line).

    Example:
        >>> _pattern("{a} x {b}")[0].fullmatch("1 x 2 x 3").group("v0", "v1")
        ('1', '2 x 3')
    """
    pieces, names, position = [], [], 0
    for match in re.finditer(r"\{\{|\}\}|\{([^{}]+)\}", msgid):
        pieces.append(msgid[position:match.start()])
        if match.group(1) is None:
            pieces[-1] += match.group(0)[0]
        else:
            names.append(match.group(1))
            pieces.append(None)
        position = match.end()
    pieces.append(msgid[position:])
    # merge the literal text between placeholders: [text, None, text, None, ..., text]
    merged = [""]
    for piece in pieces:
        if piece is None:
            merged += [None, ""]
        else:
            merged[-1] += piece
    parts, value, text = [re.escape(merged[0])], 0, _BALANCED if balanced else ".+?"
    for i in range(1, len(merged), 2):
        after = re.escape(merged[i + 1])
        if i + 2 < len(merged):
            parts.append(f"(?=(?P<v{value}>{text})(?P<l{value}>{after}))(?P=v{value})(?P=l{value})")
        else:
            # a value that ends the message may be empty (``"... expected {want}{hint}"`` with no hint)
            last = text if after else text.replace("+?", "*?")
            parts.append(f"(?P<v{value}>{last}){after}")
        value += 1
    return re.compile("".join(parts), re.DOTALL), names


# A word a reader would read as English: two letters or more, not part of code (``q_proj``,
# ``torch.float32``, ``rope(``, ``float64``) and not inside backticks.
_ENGLISH_WORD = re.compile(r"(?<![\w.`])[A-Za-z]{2,}(?![\w.(`])")
# How many texts a catalogue remembers reading (each lookup tries every pattern that matches).
_READINGS_KEPT = 20_000
_HAN_SPACE = re.compile(r"(?<=[\u4e00-\u9fff]) (?=[\u4e00-\u9fff])")
_AFTER_FULL_STOP = re.compile(r"(?<=[。！？]) +(?=[\u4e00-\u9fff])")
# A right-aligned table cell is short; a longer value that starts with a space is a phrase joined by it.
_CELL_LONGEST = 24
# A value that is one name (``weights``, ``h_n``, ``model.lm_head``): in backticks it is code, never translated.
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*")


def english_letters(text: str) -> int:
    """How many letters of ``text`` are English words rather than numbers or code.

    Example:
        >>> english_letters("the chunk"), english_letters("3..5"), english_letters("rope(q, k_all)")
        (8, 0, 0)
    """
    return sum(len(word) for word in _ENGLISH_WORD.findall(re.sub(r"`[^`]*`", "", text)))


def template_parts(template: str) -> list[tuple[str, str | None]]:
    """A translation's template in pieces: ``(text, None)`` for its own words (``{{`` and ``}}`` read as
    braces), ``("", name)`` for a placeholder.

    Example:
        >>> template_parts("内核停止了：{why}")
        [('内核停止了：', None), ('', 'why')]
    """
    pieces, position = [], 0
    for match in re.finditer(r"\{\{|\}\}|\{([^{}]+)\}", template):
        pieces.append((template[position:match.start()], None))
        pieces.append(("", match.group(1)) if match.group(1) else (match.group(0)[0], None))
        position = match.end()
    pieces.append((template[position:], None))
    return [(text, name) for text, name in pieces if text or name]


@dataclass(frozen=True)
class _Reading:
    """How a catalogue reads a text: its translation, the English letters left in it (values the
    catalogue does not know), the template chosen and the English value of each placeholder."""

    translation: str
    left: int
    template: str
    english: dict


class Catalogue:
    """One domain's translations: exact messages, and f-string patterns whose placeholders match
    any text (each filled-in value is translated in turn when the catalogue knows it); with
    ``joiners`` (English separator -> the language's, strongest first), also a list the code joined
    (``"a text file; a PDF"``, ``"a.txt, b.pdf"``) whose every item translates or is no words.
    With ``padded``, a translation keeps the spaces it ends in (a printed label that the translator
    padded to line up with the lines below it)."""

    def __init__(self, entries: list[Entry], joiners: dict[str, str] | None = None, *, padded: bool = False):
        self.joiners = dict(joiners or {})
        self.exact: dict[str, str] = {}
        self.patterns: list[tuple[re.Pattern, list[str], str]] = []
        # a pattern's placeholders written as code (`{name}`): a name there is the learner's, kept as written
        self._as_code: dict[re.Pattern, set[str]] = {}
        self._found: dict[str, _Reading | None] = {}
        self._msgids: dict[re.Pattern, str] = {}
        self._paired: dict[re.Pattern, re.Pattern] = {}      # the pattern whose values keep brackets paired
        for e in entries:
            if not e.msgstr or "fuzzy" in e.flags:
                continue
            # A piece of a message may start with the space that joined it to the one before.
            msgid, msgstr = e.msgid.strip(), e.msgstr.strip()
            if padded:          # a printed label's translation may end in the spaces that line it up
                msgstr += e.msgstr[len(e.msgstr.rstrip(" ")):]
            if PATTERN_FLAG in e.flags:
                regex, names = _pattern(msgid)
                self.patterns.append((regex, names, msgstr))
                self._msgids[regex] = msgid
                self._as_code[regex] = set(re.findall(r"`\{([^{}]+)\}`", msgid))
            else:
                self.exact[msgid] = msgstr
        # Of two readings that leave as much English, the longer pattern is the more specific.
        self.patterns.sort(key=lambda p: -len(p[0].pattern))

    def lookup(self, text: str) -> str | None:
        """The translation of all of ``text`` (spaces around it aside), or None. A pattern's filled-in
        values are looked up in turn (a message made of messages: ``"{where}, line {n}: {why}"``).

        An exact entry comes first. Where several patterns match (exercise 08's label "output of the
        chunk at positions 3..5" is ``"output of {phase}"`` and ``"{call} at positions {...}"``), the
        reading that leaves the fewest English letters wins: one whose every value translates or is
        no words (numbers, code) leaves none; of equals, the longer pattern."""
        found = self._lookup(text.strip())
        return None if found is None else found.translation

    def reading(self, text: str) -> tuple[str, dict[str, str]] | None:
        """How :meth:`lookup` reads all of ``text``: the template of its translation (an exact entry's
        translation, which has no placeholders) and the English each placeholder stands for; None where
        the catalogue does not know ``text``. For a caller that shows the values apart (a feedback page
        quotes an exception's text rather than set it inside a Chinese sentence)."""
        found = self._lookup(text.strip())
        return None if found is None else (found.template, dict(found.english))

    def _lookup(self, text: str) -> _Reading | None:
        if text in self.exact:
            return _Reading(self.exact[text], 0, self.exact[text].replace("{", "{{").replace("}", "}}"), {})
        if text in self._found:
            return self._found[text]
        if len(self._found) > _READINGS_KEPT:          # a kernel that draws changing titles for hours
            self._found.clear()
        self._found[text] = None            # a value that is the whole text (``"{x}"``) stays as it is
        best = None
        for regex, names, template in self.patterns:
            match = regex.fullmatch(text)
            if match is None:
                continue
            if not all(_balanced(match.group(f"v{i}")) for i in range(len(names))):
                match = self._with_pairs(regex).fullmatch(text) or match
            english = {name: match.group(f"v{i}") for i, name in enumerate(names)}
            reading = self._read(regex, template, english)
            for other in (self._resplit(regex, names, english) if reading.left else ()):
                better = self._read(regex, template, other)
                reading = better if better.left < reading.left else reading
            if best is None or reading.left < best.left:
                best = reading
            if best.left == 0:
                break
        if best is None or best.left:                  # a list of messages may read better item by item
            listed = self._list(text)
            best = listed if listed is not None and (best is None or listed.left < best.left) else best
        self._found[text] = best
        return best

    def _list(self, text: str) -> _Reading | None:
        """``text`` read as a list joined by the strongest separator it holds outside brackets and
        backticks, when every item reads or is one token or no words (a file's path, a name, a number,
        code): its items translated and joined in the language's way; None otherwise."""
        for english, joiner in self.joiners.items():
            items = [item.strip() for item in _split_outside_brackets(text, english)]
            if len(items) < 2:
                continue
            readings = [self._lookup(item) for item in items]
            if any(r is None and english_letters(item) and re.search(r"\s", item) for r, item in zip(readings, items)):
                return None
            names = [str(i) for i in range(len(items))]
            return _Reading(joiner.join(item if r is None else r.translation for r, item in zip(readings, items)),
                            sum(english_letters(item) if r is None else r.left for r, item in zip(readings, items)),
                            joiner.replace("{", "{{").replace("}", "}}").join("{" + n + "}" for n in names),
                            dict(zip(names, items)))
        return None

    def _read(self, regex: re.Pattern, template: str, english: dict[str, str]) -> _Reading:
        """``template`` filled with the translation of each value of ``english`` (a value the catalogue
        does not know stays as it is, and its English letters count against the reading)."""
        values, left = {}, 0
        for name, value in english.items():
            as_code = name in self._as_code[regex] and _IDENTIFIER.fullmatch(value.strip())
            inner = None if as_code else self._lookup(value.strip())
            values[name] = value if inner is None else _in_its_columns(value, inner.translation)
            left += 0 if as_code else english_letters(value) if inner is None else inner.left
        filled = "".join(values.get(name, "{" + name + "}") if name else piece for piece, name in template_parts(template))
        # the space a template keeps beside an English value goes where the value came out Chinese, and so does
        # the space that joined an English hint to the sentence before it (之和。 提示 -> 之和。提示)
        return _Reading(_AFTER_FULL_STOP.sub("", _HAN_SPACE.sub("", filled)), left, template, english)

    def _resplit(self, regex: re.Pattern, names: list[str], english: dict[str, str]):
        """The other ways to share the text of two placeholders that stand side by side in the message
        (``"expected {want}{hint}"``: nothing marks where ``50`` ends and ``": each layer adds ..."``
        begins, and the first reading cuts after ``5``), each as a new ``english``."""
        placed = [i for i, (_, name) in enumerate(template_parts(self._msgids[regex])) if name]
        for i in range(len(placed) - 1):
            first, second = names[i], names[i + 1]
            if placed[i + 1] != placed[i] + 1 or first == second:     # words between them, or one name twice
                continue
            joined = english[first] + english[second]
            for cut in range(1, min(len(joined), _RESPLIT_LONGEST) + 1):
                if cut != len(english[first]):
                    yield {**english, first: joined[:cut], second: joined[cut:]}

    def _with_pairs(self, regex: re.Pattern) -> re.Pattern:
        """``regex`` whose placeholders keep brackets in pairs, built when a reading first needs it: the
        first match cut a value inside its brackets (``(2`` of ``(2, 5), 6``)."""
        if regex not in self._paired:
            self._paired[regex] = _pattern(self._msgids[regex], balanced=True)[0]
        return self._paired[regex]

    def __len__(self) -> int:
        return len(self.exact) + len(self.patterns)


_OPENS, _CLOSES = "([{", ")]}"
# Two placeholders side by side are re-split at most this far into their text (a value is a number or a
# short phrase; a learner's long output is not worth a lookup per character).
_RESPLIT_LONGEST = 80


def _split_outside_brackets(text: str, separator: str) -> list[str]:
    """``text`` cut at each ``separator`` that stands outside brackets and backticks (a file name may
    hold a quote: ``O'Brien.pdf``).

    Example:
        >>> _split_outside_brackets("a.txt, rope(q, k), `x, y`", ", ")
        ['a.txt', 'rope(q, k)', '`x, y`']
    """
    items, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            quote = "" if char == quote else quote
        elif char == "`":
            quote = char
        elif char in _OPENS:
            depth += 1
        elif char in _CLOSES:
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(separator, i):
            items.append(text[start:i])
            start = i = i + len(separator)
            continue
        i += 1
    return items + [text[start:]]


#: How a message's lists are joined in each language, the strongest separator first (a list of file
#: kinds is joined by "; ", the files inside one kind by ", ").
_LIST_JOINERS = {CHINESE: {"; ": "；", ", ": "、"}}


@functools.lru_cache(maxsize=None)
def catalogue(domain: str, language: str) -> Catalogue:
    """The catalogue of ``domain`` (``"figures"`` or ``"messages"``) in ``language``; empty for English."""
    if domain not in DOMAINS:
        raise ValueError(f"no catalogue {domain!r}; the domains are {', '.join(DOMAINS)}")
    path = CATALOGUE_DIR / language / "LC_MESSAGES" / f"{domain}.po"
    entries = read_po(path) if language != ENGLISH and path.is_file() else []
    return Catalogue(entries, _LIST_JOINERS.get(language) if domain == "messages" else None)


@functools.lru_cache(maxsize=None)
def printed_catalogue(language: str) -> Catalogue:
    """The entries of ``messages.po`` flagged ``course-print``: what the chapters' and exercises' cells print
    (``"Part A: visible tests passed."``, ``"best rate: {sweep_best:g}"``), the only texts a kernel's output
    is matched against, each translation with the spaces it ends in (:class:`Catalogue`'s ``padded``);
    empty for English."""
    path = CATALOGUE_DIR / language / "LC_MESSAGES" / "messages.po"
    entries = read_po(path) if language != ENGLISH and path.is_file() else []
    return Catalogue([e for e in entries if PRINT_FLAG in e.flags], padded=True)


def translate(text: str, domain: str = "messages", language: str | None = None) -> str:
    """``text`` in ``language`` (default: :func:`get_language`), or ``text`` itself when the catalogue
    does not know it.

    Example:
        >>> translate("attention weights", "figures", "en")
        'attention weights'
    """
    language = normalize_language(language) if language else get_language()
    if language == ENGLISH or not isinstance(text, str) or not text.strip():
        return text
    return catalogue(domain, language).lookup(text) or text


_HINT = "Hint: "
_HINT_TRANSLATED = {CHINESE: "提示："}
# Where one sentence of a message ends and the next begins.
_SENTENCE_END = re.compile(r"(?<=[.?!:])\s+(?=[A-Z`(])")


def translate_message(message: str, language: str | None = None) -> str:
    """What a failed check or test says, in ``language``.

    The whole message first: a catalogue entry written from a test cell that puts its hint into its
    own message (``"...: {error}\nHint: use .reshape"``) translates the hint line too. Else the message
    proper and its ``Hint: ...`` lines apart, each translated (a hint filled in from a mistake table has
    an entry of its own), and a line the catalogue does not know as a whole sentence by sentence.
    Untranslated parts stay English; English is returned unchanged.

    This is the function that shows a message to a learner: the kernel's traceback of a failed
    ``assert`` (see :func:`install`) and the grader's feedback call it.
    """
    language = normalize_language(language) if language else get_language()
    if language == ENGLISH or not isinstance(message, str):
        return message
    table = catalogue("messages", language)
    whole = table._lookup(message.strip())
    # A general entry ("{call} raised {kind}: {detail}") may take a hint line into a placeholder whose
    # value the catalogue does not know, and a pattern's last placeholder may take a hint sentence the
    # code added after it (``f"... is {norm}." + " Return the norm ..."``): the parts apart translate more.
    if whole is not None and not any(line.startswith(_HINT) for line in whole.translation.split("\n")):
        return whole.translation if not whole.left or "\n" in message.strip() else _by_sentence(message, table)
    lines = message.split("\n")
    cut = next((i for i, line in enumerate(lines) if line.startswith(_HINT)), len(lines))
    body, hints = "\n".join(lines[:cut]), lines[cut:]
    whole = table.lookup(body) if body else body
    out = [whole] if whole is not None else [_by_sentence(line, table) for line in lines[:cut]]
    for line in hints:
        if line.startswith(_HINT):
            out.append(_HINT_TRANSLATED.get(language, _HINT) + _by_sentence(line[len(_HINT):], table))
        else:
            out.append(_by_sentence(line, table))
    return "\n".join(out)


def _by_sentence(line: str, table: Catalogue) -> str:
    """A line the catalogue knows as a whole, else sentence by sentence (unknown ones stay English); of a
    whole reading that leaves English and the sentences apart, the one that leaves less."""
    whole = table._lookup(line.strip())
    if whole is not None and not whole.left:
        return whole.translation
    out, left = "", 0
    for sentence in _SENTENCE_END.split(line):
        found = table._lookup(sentence.strip())
        piece = sentence if found is None else found.translation
        left += english_letters(sentence) if found is None else found.left
        out += piece if not out or re.search(r"[。！？：；）]$", out) else " " + piece
    readings = [(left, out)] + ([(whole.left, whole.translation)] if whole is not None else [])
    # a hint the code joined with a colon (f"... got {n}" + ": return the tokens without the prompt")
    for head, tail in _colon_cuts(line):
        first, second = table._lookup(head.strip()), table._lookup(tail.strip())
        if first is not None and second is not None:
            joined = first.translation.rstrip("。") + second.translation
            readings.append((first.left + second.left, joined if re.search(r"[。！？）]$", joined) else joined + "。"))
    return min(readings, key=lambda reading: reading[0])[1]


def _colon_cuts(line: str) -> list[tuple[str, str]]:
    """``line`` cut before each ``": "`` outside brackets and backticks: (the words before, ``": ..."``)."""
    parts = _split_outside_brackets(line, ": ")
    return [(": ".join(parts[:i]), ": " + ": ".join(parts[i:])) for i in range(1, len(parts))]


def notebook_language(nb) -> str:
    """The language of a notebook: ``metadata.course.language`` when present, else Chinese when its
    markdown is mostly Chinese (a learner's copy of a Chinese exercise), else English."""
    meta = (nb.get("metadata") or {}).get("course") or {}
    if meta.get("language"):
        return normalize_language(meta["language"])
    text = "".join(c.get("source", "") if isinstance(c.get("source"), str) else "".join(c.get("source", []))
                   for c in nb.get("cells", []) if c.get("cell_type") == "markdown")
    letters = len(re.findall(r"[A-Za-z\u4e00-\u9fff]", text))
    chinese = len(re.findall(r"[\u4e00-\u9fff]", text))
    return CHINESE if letters and chinese / letters > 0.2 else ENGLISH


# --- Where output is shown: figures, widgets, tracebacks ------------------------------------------

_installed: set[str] = set()
_cjk_family: str | None = None


def cjk_font(*, fetch: bool = False) -> str | None:
    """A font file with Chinese glyphs that matplotlib can read, or None.

    ``$COURSE_CJK_FONT`` names a .ttf, .otf or .woff file (the book build fetches Noto Sans SC, see
    ``site/assets.json``; a .woff is converted to .ttf once, beside it or in ``~/.cache``); else one
    of :data:`SYSTEM_CJK_FONTS` that matplotlib already knows, or of :data:`SYSTEM_CJK_FILES`; else
    the font fetched before into :data:`FONT_CACHE`; else, with ``fetch``, :func:`fetch_cjk_font`'s.
    """
    from matplotlib import font_manager

    named = os.environ.get(ENV_FONT)
    if named and Path(named).is_file():
        path = Path(named)
        if path.suffix.lower() in (".woff", ".woff2"):
            path = _as_ttf(path)
        if path is not None:
            return str(path)
    for family in SYSTEM_CJK_FONTS:
        try:
            found = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
        except ValueError:
            continue
        return found
    for path in SYSTEM_CJK_FILES:
        if Path(path).is_file():
            return path
    cached = FONT_CACHE / Path(FONT_URL).name
    if cached.is_file() or fetch:
        converted = _as_ttf(cached) if cached.is_file() else fetch_cjk_font()
        return str(converted) if converted is not None else None
    return None


def fetch_cjk_font(timeout: float = 30.0) -> Path | None:
    """Download :data:`FONT_URL` into :data:`FONT_CACHE` (checked against :data:`FONT_SHA256`) and
    return it as a .ttf; None when it cannot be fetched (offline, blocked, changed)."""
    import urllib.request

    target = FONT_CACHE / Path(FONT_URL).name
    try:
        with urllib.request.urlopen(FONT_URL, timeout=timeout) as response:
            payload = response.read()
        if hashlib.sha256(payload).hexdigest() != FONT_SHA256:
            return None
        FONT_CACHE.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(payload)
        partial.replace(target)
    except OSError:
        return None
    return _as_ttf(target)


def _as_ttf(path: Path) -> Path | None:
    """``path`` (a web font) as a .ttf that FreeType reads, converted with fontTools once."""
    from fontTools.ttLib import TTFont

    for folder in (path.parent, Path.home() / ".cache" / "transformer-core-site" / "fonts"):
        target = folder / (path.stem + ".ttf")
        if target.is_file() and target.stat().st_mtime >= path.stat().st_mtime:
            return target
        try:
            folder.mkdir(parents=True, exist_ok=True)
            font = TTFont(str(path))
            font.flavor = None
            partial = target.with_suffix(f".{os.getpid()}.part")
            font.save(str(partial))
            partial.replace(target)
            return target
        except OSError:
            continue
    return None


def _translate_figure(figure) -> list:
    """Translate every text of ``figure`` in place; return ``(text, english)`` pairs to undo it."""
    from matplotlib.text import Text

    undo = []
    for text in figure.findobj(Text):
        english = text.get_text()
        chinese = translate(english, "figures")
        if chinese != english:
            family = text.get_fontfamily()
            text.set_text(chinese)
            # A text with $math$ is laid out by mathtext, which draws its words in the text's first
            # font only (no fallback): give such a text the CJK font, which has Latin letters too.
            if _cjk_family and "$" in chinese and re.search(r"[\u3000-\u9fff\uff00-\uffef]", chinese):
                text.set_fontfamily([_cjk_family])
            undo.append((text, english, family))
    return undo


def _install_figures(language: str, *, fetch: bool = False) -> bool:
    import matplotlib
    from matplotlib import font_manager
    from matplotlib.backend_bases import FigureCanvasBase

    font = cjk_font(fetch=fetch)
    if font is None:
        if language in NO_FONT_NOTICE:
            print(NO_FONT_NOTICE[language])
        return False
    global _cjk_family
    font_manager.fontManager.addfont(font)
    family = _cjk_family = font_manager.FontProperties(fname=font).get_name()
    # DejaVu Sans draws Latin letters and digits; the CJK font the rest (matplotlib's per-glyph fallback).
    # (a generic family such as "sans-serif" resolves to one font, so the families are named).
    latin = font_manager.FontProperties(family=matplotlib.rcParams["font.family"]).get_family()[0]
    if latin in ("sans-serif", "serif", "monospace", "cursive", "fantasy"):
        latin = matplotlib.rcParams[f"font.{latin}"][0]
    matplotlib.rcParams["font.family"] = [latin, family]
    original = FigureCanvasBase.print_figure
    if getattr(original, "_course_language", False):
        return True

    @functools.wraps(original)
    def print_figure(self, *args, **kwargs):
        undo = _translate_figure(self.figure) if get_language() != ENGLISH else []
        try:
            return original(self, *args, **kwargs)
        finally:  # the figure's own texts stay what the code set, for code that reads them back
            for text, english, family in undo:
                text.set_text(english)
                text.set_fontfamily(family)

    print_figure._course_language = True
    FigureCanvasBase.print_figure = print_figure
    return True


def _translate_widget(widget) -> None:
    for name in ("description", "tooltip", "placeholder"):
        value = getattr(widget, name, None)
        if isinstance(value, str) and value:
            translated = translate(value, "figures")
            if translated != value:
                setattr(widget, name, translated)
    labels = getattr(widget, "_options_labels", None)
    if labels:
        translated = tuple(translate(label, "figures") for label in labels)
        if translated != tuple(labels):
            widget.set_trait("_options_labels", translated)   # read-only to users, not to us
    if type(widget).__name__ in ("Label", "HTML", "HTMLMath", "Button", "ToggleButton") and isinstance(
            getattr(widget, "value", None), str):
        translated = translate(widget.value, "figures")
        if translated != widget.value:
            widget.value = translated


def _relabelled(change) -> None:
    """A widget's description set after it was made (``interact`` names a slider after its keyword)."""
    if get_language() != ENGLISH and isinstance(change["new"], str):
        translated = translate(change["new"], "figures")
        if translated != change["new"]:
            change["owner"].description = translated


def _install_widgets(language: str) -> bool:
    try:
        from ipywidgets import Widget
    except ImportError:
        return False
    previous = getattr(Widget, "_widget_construction_callback", None)
    if getattr(previous, "_course_language", False):
        return True

    def constructed(widget):
        if previous is not None:
            previous(widget)
        if get_language() != ENGLISH:
            _translate_widget(widget)
        if widget.has_trait("description"):
            widget.observe(_relabelled, names="description")

    constructed._course_language = True
    Widget.on_widget_constructed(constructed)
    return True


def _install_progress(language: str) -> bool:
    """Translate a tqdm progress bar's description (``desc="train"`` -> ``训练``), also one set later."""
    try:
        from tqdm import std
    except ImportError:
        return False
    original_init, original_set = std.tqdm.__init__, std.tqdm.set_description
    if getattr(original_init, "_course_language", False):
        return True

    def _desc(desc):
        return translate(desc, "figures") if isinstance(desc, str) and get_language() != ENGLISH else desc

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        if "desc" in kwargs:
            kwargs["desc"] = _desc(kwargs["desc"])
        elif len(args) > 1:
            args = (args[0], _desc(args[1])) + args[2:]
        original_init(self, *args, **kwargs)

    @functools.wraps(original_set)
    def set_description(self, desc=None, refresh=True):
        return original_set(self, _desc(desc), refresh)

    __init__._course_language = True
    std.tqdm.__init__, std.tqdm.set_description = __init__, set_description
    return True


#: The errors a kernel shows in the language in force. The course's own (a failed ``assert``, the stub's
#: NotImplementedError, a ShortcutError) are translated as the grader translates them; those that the code an
#: exercise gives raises (exercise 04's ``ValueError(f"d_model={d_model} must be divisible by
#: n_heads={n_heads}")``) only where the catalogue knows the whole message, so that PyTorch's own ValueError is
#: never half translated. ``i18n update`` extracts the message of every ``raise`` of these classes in the
#: released exercises' code, and a test holds every class the exercises raise to this list.
COURSE_ERRORS = ("AssertionError", "NotImplementedError", "ShortcutError")
GIVEN_CODE_ERRORS = ("ValueError",)


def _install_tracebacks(language: str, ipython) -> bool:
    """Show the message of a failed ``assert``, of the stub's NotImplementedError, of a ShortcutError and of an
    error the given code raises (:data:`GIVEN_CODE_ERRORS`) translated."""
    if ipython is None:
        return False
    from course_runtime.errors import ShortcutError

    course = (AssertionError, NotImplementedError, ShortcutError)
    given = tuple(getattr(builtins, name) for name in GIVEN_CODE_ERRORS)

    def handler(shell, etype, value, tb, tb_offset=None):
        if value.args and isinstance(value.args[0], str):
            said = value.args[0]
            if isinstance(value, course):
                said = translate_message(said)
            elif len(said) <= PRINTED_LONGEST:     # a learner's 10 MB message is passed on without a look
                # a reading that leaves English words is no translation of the whole
                found = catalogue("messages", get_language())._lookup(said.strip())
                said = found.translation if found is not None and not found.left else said
            if said != value.args[0]:
                value.args = (said,) + tuple(value.args[1:])
        # IPython does not show what a custom handler returns: show it as it shows any error.
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)

    ipython.set_custom_exc(course + given, handler)
    return True


#: A write longer than this is passed on without a look: the lines the exercises print are short, and a
#: learner's 10 MB string must cost nothing (a pattern's placeholders match any text).
PRINTED_LONGEST = 2000
# Every printed entry has an English word outside its placeholders: a write without two letters in a
# row (a number, a newline, the space ``print`` puts between its arguments) cannot be one.
_TWO_LETTERS = re.compile(r"[A-Za-z]{2}")


def translate_printed(text: str, language: str | None = None) -> str:
    """``text``, one write of a ``print`` (an argument, ``print`` writes each apart), in ``language`` when
    it is all of a printed string the catalogue knows (spaces around it kept); else ``text`` itself.

    Example:
        >>> translate_printed("Part A: visible tests passed.", "en")
        'Part A: visible tests passed.'
    """
    language = normalize_language(language) if language else get_language()
    if (language == ENGLISH or not isinstance(text, str) or len(text) > PRINTED_LONGEST
            or not _TWO_LETTERS.search(text)):
        return text
    table = printed_catalogue(language)
    if not _any_printed(table).fullmatch(text.strip()):
        return text
    found = table.lookup(text)
    if found is None:
        return text
    return same_width(text, found)


def display_width(text: str) -> int:
    """The columns ``text`` takes in a monospace font: a Chinese character (East Asian wide or full
    width) takes two.

    Example:
        >>> display_width("scores:"), display_width("分数：")
        (7, 6)
    """
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def same_width(english: str, translation: str) -> str:
    """``translation`` of ``english`` with ``english``'s leading spaces, and its trailing spaces as many as
    keep the columns ``english`` takes where it was padded to line up with the lines below
    (``"naive, large scores:   "``, ``f"{name:26s}"``; none where the translation is as wide). Other
    trailing white space (a newline) stays as it is.

    Example:
        >>> same_width("stable, large scores:   ", "稳定版，大分数：")
        '稳定版，大分数：        '
        >>> same_width("  linear   ", "线性层")
        '  线性层   '
    """
    leading, words = english[:len(english) - len(english.lstrip())], english.strip()
    trailing = english[len(english.rstrip()):]
    if trailing.strip(" "):
        return leading + translation + trailing
    padding = max(0, display_width(words + trailing) - display_width(translation)) if trailing else 0
    return leading + translation + " " * padding


def _in_its_columns(english: str, translation: str) -> str:
    """A placeholder's value translated where the English value stood: one padded on the left only was
    right-aligned by its format (``f"{memory:>9s}"``), so its translation ends in the English's last column
    (chapter 11's table: ``"     none"`` becomes ``"       无"``); any other as :func:`same_width` writes it. A
    value longer than a table's cell is a phrase that starts with its joining space (a hint, ``" Hint: ..."``),
    not a right-aligned cell: it was padded by the width the Chinese saves (18 spaces before a hint).

    Example:
        >>> _in_its_columns("     none", "无"), _in_its_columns("none   ", "无")
        ('       无', '无     ')
    """
    if (english.strip() and english == english.rstrip() and english != english.lstrip()
            and len(english.strip()) <= _CELL_LONGEST):
        return " " * max(0, display_width(english) - display_width(translation)) + translation
    return same_width(english, translation)


@functools.lru_cache(maxsize=None)
def _any_printed(table: Catalogue) -> re.Pattern:
    """One regular expression that each of ``table``'s texts matches whole (a pattern's placeholders as
    any text): a write it does not match is passed on at the cost of one match, not a lookup per entry
    (a loop printing ``f"step {i}: ..."`` 100,000 times writes 100,000 texts never seen before)."""
    shapes = [re.escape(text) for text in table.exact] + [
        re.sub(r"\(\?P([<=])([vl]\d+)", rf"(?P\g<1>p{number}\g<2>", regex.pattern)    # group names apart
        for number, (regex, _, _) in enumerate(table.patterns)]
    return re.compile("|".join(f"(?:{shape})" for shape in shapes) or r"(?!)", re.DOTALL)


def _install_prints(language: str, ipython) -> bool:
    """Translate what the kernel's cells print (``print("Part A: visible tests passed.")``), write by write.

    The kernel's stream (``sys.stdout`` when this is installed) stays the object it is, of its type, with
    every attribute; only its ``write`` is wrapped, and each call is passed on at once, translated where it
    is all of a printed string (:func:`translate_printed`) and unchanged otherwise: nothing is held back or
    reordered. IPython wraps the same ``write`` around each cell it runs (to keep the output in its
    history) and puts the one before back afterwards, so the wrapper is put on again before each cell.
    A learner who replaces ``sys.stdout`` (or redirects it) writes to their own stream, untouched. Only in
    a kernel: a plain process's output is left alone."""
    stream = sys.stdout
    if ipython is None or stream is None:
        return False

    def wrap(*_info) -> None:
        write = stream.write
        if getattr(write, "_course_language", False):
            return

        @functools.wraps(write)
        def translated_write(text, *args, **kwargs):
            try:
                shown = translate_printed(text)
            except Exception:      # whatever went wrong here, the learner's output goes out as it was
                shown = text
            if shown is text:
                return write(text, *args, **kwargs)
            write(shown, *args, **kwargs)
            return len(text)        # what the caller asked to write, as a stream reports it

        translated_write._course_language = True
        try:
            stream.write = translated_write
        except (AttributeError, TypeError):   # a stream whose methods are fixed (a C type without __dict__)
            pass

    wrap()
    ipython.events.register("pre_run_cell", wrap)
    return True


class Installed(list):
    """The places :func:`install` translates: a list that a notebook cell does not echo (the Chinese
    setup cell ends with ``install('zh_CN')``, and its reader has nothing to do with the list)."""

    def _ipython_display_(self) -> None:
        pass


def install(language: str | None = None, *, ipython=None, fetch_font: bool | None = None) -> Installed:
    """Translate what this kernel shows into ``language`` (default: the language in force).

    Args:
        fetch_font: download a CJK font when the machine has none (:func:`fetch_cjk_font`); default:
            on Colab only, whose stock runtime has none.

    Returns the places now translated, among ``"figures"``, ``"widgets"``, ``"progress"``,
    ``"tracebacks"`` and ``"prints"`` (figures only when a CJK font was found: otherwise it prints, in the language,
    how to get one). English installs nothing.
    """
    if language is not None:
        set_language(language)
    language = get_language()
    if language == ENGLISH:
        return Installed()
    if fetch_font is None:
        fetch_font = "google.colab" in sys.modules
    if ipython is None:
        try:
            from IPython import get_ipython
            ipython = get_ipython()
        except ImportError:
            ipython = None
    done = Installed()
    for name, step in (("figures", lambda: _install_figures(language, fetch=fetch_font)),
                       ("widgets", lambda: _install_widgets(language)),
                       ("progress", lambda: _install_progress(language)),
                       ("tracebacks", lambda: _install_tracebacks(language, ipython)),
                       ("prints", lambda: _install_prints(language, ipython))):
        if name in _installed or step():
            _installed.add(name)
            done.append(name)
    return done


def load_ipython_extension(ipython) -> None:
    """``%load_ext course_runtime.language``: translate this kernel's output if ``$COURSE_LANGUAGE``
    (or :func:`set_language`) says so."""
    install(ipython=ipython)

"""What a Chinese reader sees: English left over, typesetting mistakes, brackets in brackets, one form per term."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.course.i18n.catalogues import DISPLAY_MATH, INLINE_MATH
from autograder.course.i18n.extract import LANGUAGE, ZH_ROOT, pages
from autograder.course.i18n.typesetting import strip_code


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
    text = strip_code(text, HOLE)
    text = DISPLAY_MATH.sub(HOLE, text)
    text = INLINE_MATH.sub(HOLE, text)
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
    (re.compile(r"\d(?:\s+|\\,)%"), "a space before % (46%)"),
    (re.compile(r'"[^"]{0,200}?[\u4e00-\u9fff][^"]{0,200}?"'), "ASCII quotation marks around Chinese (use “”)"),
    (re.compile(r"[“‘]\s|\s[”’]"), "a space inside quotation marks"),
    (re.compile(rf"[\u4e00-\u9fff]\s*->|->\s*[\u4e00-\u9fff]"), "ASCII -> in Chinese text (use →)"),
    (re.compile(r"[\u4e00-\u9fff][A-Za-z0-9]|[A-Za-z0-9][\u4e00-\u9fff]"),
     "no space between Chinese and a Latin letter or digit (在你自己的 GPT 中, 第 1 章)"),
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
    return found + italic_problems(prose)


# Markdown emphasis in one line: ``*...*`` or ``_..._`` opening on a character that is not a space and
# closing on one, not part of ``**bold**``; an underscore run opens and closes beside no letter or digit
# (``q_proj_x`` is a name). Chinese characters count as neither here: ``增长*成为可能*：`` is emphasis
# (``\w`` would take 长 as a letter and miss it, as the first form of this check did).
_EMPHASIS = re.compile(r"(?<!\*)\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?!\*)"
                       r"|(?<![A-Za-z0-9_])_(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?![A-Za-z0-9_])")


def italic_problems(prose: str) -> list[str]:
    """Chinese characters set in italics (Markdown ``*...*`` or ``_..._``): Chinese type has no italic,
    a browser slants the glyphs; emphasis in Chinese is bold or nothing. Italic English stays
    (``把 *tired* 换成 *wide*``), bold does not count.

    Example:
        >>> italic_problems("只是让增长*成为可能*：把 *tired* 换成 **重要的** _词_。")
        ['italics on Chinese characters (use bold or nothing): …只是让增长*成为可能*：把 *t…', 'italics on Chinese characters (use bold or nothing): …要的** _词_。…']
    """
    found = []
    for match in _EMPHASIS.finditer(prose):
        if re.search(r"[\u4e00-\u9fff]", match.group(1) or match.group(2)):
            context = prose[max(0, match.start() - 5):match.end() + 5].replace("\n", " ")
            found.append(f"italics on Chinese characters (use bold or nothing): …{context}…")
    return found


@functools.lru_cache(maxsize=4)
def _myst_parser(root: Path):
    """The Markdown parser MyST builds the site with, with the extensions ``_config.yml`` enables."""
    import yaml
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    extensions = set(config.get("parse", {}).get("myst_enable_extensions") or ())
    return create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML)


def literal_emphasis(markdown: str, root: Path = REPO_ROOT) -> list[str]:
    """Bold or emphasis markers (``**``, ``__``) that the page shows as characters, one line each: parsed as
    MyST parses the page (CommonMark's delimiter rules), code and math aside. A ``**`` beside Chinese text
    on one side and punctuation or a role on the other opens or closes nothing (``它改用**{term}`掩码`**目标``,
    ``**当 DDP 不够用时。**DDP``); a role other than ``{math}`` shows its text as written, so ``**`` inside
    one stays too.

    Example:
        >>> literal_emphasis("它改用**{term}`掩码 <mask>`**目标；**当 DDP 不够用时**。DDP")
        ['** or __ shown as text: …它改用**…', '** or __ shown as text: …**目标；…']
    """
    found = []
    for token in _myst_parser(root).parse(markdown):
        for child in token.children or ():
            role = child.type == "myst_role" and child.meta.get("name") != "math"    # {math} is TeX
            text = child.content.split("<")[0] if role else child.content
            at = min((text.find(marker) for marker in ("**", "__") if marker in text), default=-1)
            if (child.type == "text" or role) and at >= 0:
                found.append(f"** or __ shown as text: …{text[max(0, at - 6):at + 8]}…")
    return found


# A call's parentheses (``sqrt(d_k)``, ``LayerNorm(x + Sublayer(x))``): notation, not a remark in brackets.
_CALL = re.compile(r"(?<=[\w.])\([^()（）]*\)")


def parenthesis_problems(prose: str) -> list[str]:
    """Brackets a Chinese teacher would not write: a remark in parentheses inside another (``（…（…）…）``,
    a term's English gloss inside a remark included) or two parenthesised remarks back to back
    (``……）（……``), one line per place. A call's parentheses are notation and do not count.

    Example:
        >>> parenthesis_problems("每一章讲一种机制（注意力、掩码（mask）、多头）。编码器（encoder）（BERT 风格）。sqrt(d_k) 与 f(g(x))。")
        ['nested parentheses: …章讲一种机制（注意力、掩码（mask）、多头）…', 'parentheses back to back: …编码器（encoder）（BERT 风格）…']
    """
    found = []
    for paragraph in re.split(r"\n\s*\n", prose):
        text, previous = paragraph.replace("\n", " "), None
        while previous != text:                       # innermost calls first: f(g(x))
            previous, text = text, _CALL.sub("⟨⟩", text)
        depth, start, nested = 0, 0, False
        for position, char in enumerate(text):
            if char in "（(":
                start, nested = (position, False) if depth == 0 else (start, True)
                depth += 1
            elif char in "）)" and depth:
                depth -= 1
                if depth == 0 and nested:           # the whole outer remark, once
                    found.append(f"nested parentheses: …{text[max(0, start - 6):position + 1]}…")
        if depth and nested:                        # one left open to the paragraph's end
            found.append(f"nested parentheses: …{text[max(0, start - 6):start + 60]}…")
        for match in re.finditer(r"[）)][ \t]*[（(]", text):
            opening = text.rfind("（", 0, match.start())
            closing = text.find("）", match.end())
            found.append(f"parentheses back to back: …{text[max(0, opening - 3):closing + 1]}…")
    return found


def _headings_removed(prose: str) -> str:
    """``prose`` without its headings and the chapter titles it quotes (“位置编码”一章): a title is quoted
    as it stands, and a term's English follows its first use in the text itself."""
    return re.sub(r"(?m)^\s*#+\s.*$|“[^”\n]*”一章", " ", prose)


def _uses(body: str, chinese: str) -> list[tuple[int, int]]:
    """Where ``chinese`` is used in ``body``, as ``(start, end)`` spans in order; a term written in Latin
    letters counts as a whole word, in the singular too (logit as logits)."""
    if re.search("[\u4e00-\u9fff]", chinese):
        return [(m.start(), m.end()) for m in re.finditer(re.escape(chinese), body)]
    word = re.escape(chinese[:-1]) + "s?" if chinese.endswith("s") else re.escape(chinese)
    return [m.span() for m in re.finditer(rf"(?<![\w-]){word}(?![\w-])", body)]


def _glossed_at(body: str, end: int, term: dict, *, exactly: bool = False) -> bool:
    """Whether the use of ``term`` that ends at ``end`` in ``body`` is followed by its gloss: the English
    (its last word; ``exactly``: the whole English, an abbreviation after a comma aside) in full-width
    parentheses, or exactly ``gloss_as`` where the term has one. 分类词元（classification token） glosses
    词元 only where exactness is not asked."""
    gloss = re.match(r"（([^（）]*)）", re.sub(r"^[*_`]+", "", body[end:end + 80]))
    if not gloss:
        return False
    if "gloss_as" in term:
        return gloss.group(1) == term["gloss_as"]
    if re.search("[\u4e00-\u9fff]", gloss.group(1)):
        return False
    english, given = (re.sub(r"[\s-]+", " ", text.lower()).strip() for text in (term["en"], gloss.group(1)))
    if exactly:
        return re.split(r"[，,]", given)[0].strip().rstrip("s") == english.rstrip("s")
    return english.split()[-1].rstrip("s") in given


def _longer_terms_at(body: str, at: int, term: dict, terms: list[dict]) -> list[tuple[dict, int]]:
    """The longer terms of the list that the use of ``term`` at ``at`` is part of, each with where it
    ends: 掩码 in 因果掩码 or 掩码语言模型, 层规范化 in 前置层规范化."""
    found = []
    for longer in terms:
        if term["zh"] not in longer["zh"] or longer["zh"] == term["zh"]:
            continue
        start = at - longer["zh"].find(term["zh"])
        if start >= 0 and body.startswith(longer["zh"], start):
            found.append((longer, start + len(longer["zh"])))
    return found


def _glossed(body: str, span: tuple[int, int], term: dict, terms: list[dict]) -> bool:
    """Whether the use of ``term`` at ``span`` is glossed: by its own gloss, or, inside a longer term of
    the list, by the longer term's (掩码 in 掩码语言模型（masked language model，MLM）)."""
    longer = _longer_terms_at(body, span[0], term, terms)
    return any(_glossed_at(body, stop, other) for other, stop in longer) if longer else _glossed_at(body, span[1], term)


def glossed_terms(prose: str, terms: list[dict]) -> list[dict]:
    """The terms of ``terms`` that ``prose`` glosses in body text (outside headings and quoted chapter titles)."""
    body = _headings_removed(prose)
    return [term for term in terms if any(_glossed(body, span, term, terms) for span in _uses(body, term["zh"]))]


def term_problems(prose: str, terms: list[dict], glossed_before: dict[str, str] | None = None, *,
                  glosses: bool = True) -> list[str]:
    """Where a page departs from the term list: a form to avoid, a term glossed at a use after its first
    (a gloss is given once: on a page, and in the book, where ``glossed_before`` maps the English of each
    term the book glossed on an earlier page to that page), a term's first use (outside headings and quoted
    chapter titles) without its gloss in full-width parentheses (its English, or its ``gloss_as``; a first
    use inside a longer term of the list that is glossed there counts) unless ``glossed_before`` has it,
    or a gloss inside a quoted chapter title (“位置编码（positional encoding）”一章: a title is quoted as it stands).
    A term with ``gloss: false`` need not be glossed, and is glossed at most once all the same. Without
    ``glosses`` (the glossary, which pairs every term with its English) only the forms to avoid are checked.

    Example:
        >>> token = {"en": "token", "zh": "词元"}
        >>> term_problems("被掩码的位置。词元是模型的输入。", [token,
        ...                {"en": "masked", "zh": "被掩蔽", "avoid": ["被掩码"], "gloss": False}])
        ['first use of 词元 without （token）', '"被掩码" (write 被掩蔽 for masked)']
        >>> term_problems("词元（token）是模型的输入，每个词元（token）一个向量。", [token])
        ['glossed again: …每个词元（token）, once is enough']
        >>> term_problems("每个词元（token）一个向量。", [token], {"token": "book/intro"})
        ['glossed again: …每个词元（token）, book/intro glossed it first']
    """
    glossed_before = glossed_before or {}
    found = [f"a gloss inside a quoted chapter title: {m.group(0)}"
             for m in re.finditer(r"“[^”\n]*（[^（）\u4e00-\u9fff]*）[^”\n]*”一章", prose)]
    body = _headings_removed(prose)
    plain = _FULLWIDTH_GLOSS.sub(lambda m: m.group(0) if re.search("[\u4e00-\u9fff]", m.group(0)) else "（）", prose)
    for term in terms:
        for avoided in term.get("avoid", []):
            if avoided in prose:
                found.append(f'"{avoided}" (write {term["zh"]} for {term["en"]})')
        for pattern in term.get("avoid_re", []):
            for match in re.finditer(pattern, plain):
                found.append(f'"{match.group(0).strip()}" (write {term["zh"]} for {term["en"]})')
        if not glosses:
            continue
        earlier = glossed_before.get(term["en"])
        uses = _uses(body, term["zh"])
        own = [(start, end) for start, end in uses                     # a use inside a longer term is the longer one's
               if not _longer_terms_at(body, start, term, terms) and _glossed_at(body, end, term, exactly=True)]
        for start, end in own[0 if earlier else 1:]:
            where = f"{earlier} glossed it first" if earlier else "once is enough"
            context = body[max(0, start - 2):body.index("）", end) + 1].replace("\n", " ").strip()
            found.append(f"glossed again: …{context}, {where}")
        if earlier or not term.get("gloss", True) or not uses:
            continue
        first, end = uses[0]
        before = body[max(0, first - 12):first]
        if any(before.endswith(alternative.replace(term["zh"], "")) and alternative != term["zh"]
               for alternative in term.get("first", [])):
            continue
        if not _glossed(body, uses[0], term, terms):
            found.append(f"first use of {term['zh']} without （{term.get('gloss_as', term['en'])}）")
    return found


# An English gloss right after Chinese text (or a closing quote): 温度（temperature）, 循环神经网络（recurrent neural network，RNN）,
# 温度（temperature，即……）. The English is what comes before a comma or semicolon; it must hold a word in
# lower case (but its first letter; warm-up is one), so an abbreviation or a name alone (多查询注意力（MQA）,
# （SwiGLU）, 前置（Pre-LN）) glosses nothing.
_GLOSS = re.compile(r"([\u4e00-\u9fff”])[*_]*（([A-Za-z][^（）\u4e00-\u9fff，,；;]*)(?:[，,；;][^（）]*)?）")


def gloss_key(english: str) -> str:
    """How two glosses' English are compared: lower case, hyphens as spaces, a plural's s dropped
    (``Grouped-query attention`` and ``grouped query attention`` are one)."""
    return re.sub(r"s$", "", re.sub(r"[\s-]+", " ", english.lower()).strip())


def english_glosses(prose: str) -> list[tuple[str, str]]:
    """Every English gloss of ``prose``'s body text (outside headings and quoted chapter titles), in order,
    as ``(key, context)``: the English's :func:`gloss_key`, and the gloss with a few characters before it.

    Example:
        >>> [g[0] for g in english_glosses("温度（Temperature）与循环神经网络（recurrent neural networks，RNN）；多查询注意力（MQA）。")]
        ['temperature', 'recurrent neural network']
    """
    body = _headings_removed(prose)
    found = []
    for match in _GLOSS.finditer(body):
        if any(re.fullmatch(r"[A-Za-z][a-z]+(?:-[a-z]+)*", word) for word in match.group(2).split()):
            context = body[max(0, match.start() - 6):match.end()].replace("\n", " ")
            found.append((gloss_key(match.group(2)), context))
    return found


def repeated_glosses(prose: str, glossed_before: dict[str, str]) -> list[str]:
    """The glosses of the book's page ``prose`` whose English was glossed before: on an earlier page
    (``glossed_before`` maps each English's :func:`gloss_key` to the page that glossed it first) or earlier
    on this page, one line each: a book glosses a word once, at its first use, whether or not the term list
    has it.

    Example:
        >>> repeated_glosses("以低于 1 的温度（temperature）采样，温度（temperature，即缩放）。", {"temperature": "book/02-a"})
        ['glossed again: …于 1 的温度（temperature）, book/02-a glossed it first', 'glossed again: …e）采样，温度（temperature，即缩放）, book/02-a glossed it first']
        >>> repeated_glosses("注意力（attention）……注意力（Attention）。", {})
        ['glossed again: …n）……注意力（Attention）, once is enough']
    """
    seen = dict(glossed_before)
    found = []
    for key, context in english_glosses(prose):
        if key in seen:
            where = f"{seen[key]} glossed it first" if key in glossed_before else "once is enough"
            found.append(f"glossed again: …{context}, {where}")
        seen.setdefault(key, "this page")
    return found


def _gloss_at_end(problem: str) -> str:
    """The gloss a "glossed again" line names, with the character before it: ``度（temperature）``."""
    context = problem.split(", ")[0] if "）, " not in problem else problem[:problem.rindex("）, ") + 1]
    return context[context.rindex("（") - 1:]


def reader_problems(root: Path = REPO_ROOT) -> list[str]:
    """English sentences, typesetting mistakes and departures from the term list on the pages of
    ``zh/`` (the bibliography's English titles excepted), one line each. The book's chapters (the intro
    and ``book/NN-*``, in the table of contents' order) gloss a term at its first use in the book only,
    as d2l does; an exercise, which a learner opens on its own, at its first use in the exercise."""
    terms = load_terms(root)
    glossed_before: dict[str, str] = {}
    glosses_before: dict[str, str] = {}       # every English glossed so far, the term list's or not
    found = []
    for page in pages(root):
        path = root / ZH_ROOT / page.path.relative_to(root)
        if not path.exists() or page.docname == "book/references":
            continue
        prose = "\n\n".join(page_prose(path))
        where = path.relative_to(root).as_posix()
        found += [f"{where}: English left: {run!r}" for run in english_runs(prose, terms["keep"])]
        found += [f"{where}: {problem}" for problem in typesetting_problems(prose)]
        found += [f"{where}: {problem}" for problem in parenthesis_problems(prose)]
        glossary = page.docname == "book/glossary"      # every term with its English, on the line above
        chapter = page.docname.startswith("book/") and not glossary
        of_terms = term_problems(prose, terms["terms"], glossed_before if chapter else None, glosses=not glossary)
        found += [f"{where}: {problem}" for problem in of_terms]
        if chapter:                                 # a repeat the term list's check named is not named twice
            named = {_gloss_at_end(problem) for problem in of_terms if problem.startswith("glossed again: ")}
            found += [f"{where}: {problem}" for problem in repeated_glosses(prose, glosses_before)
                      if _gloss_at_end(problem) not in named]
            glossed_before.update((t["en"], page.docname) for t in glossed_terms(prose, terms["terms"])
                                  if t["en"] not in glossed_before)
            glosses_before.update((key, page.docname) for key, _ in english_glosses(prose)
                                  if key not in glosses_before)
    return found

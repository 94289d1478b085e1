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

from autograder.notebooks import REPO_ROOT, colab_url, dumps_normalized, read_notebook

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
    out, current, closing, in_math = [], [], None, False
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        if closing is not None:
            current.append(line)
            if fence and fence.group(2).startswith(closing) and not fence.group(3).strip():
                closing = None
            continue
        if fence and not fence.group(3).strip().startswith("{"):
            closing = fence.group(2)
        elif fence and fence.group(3).strip().startswith(("{code", "{math}")):
            closing = fence.group(2)
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
    r"(`{3,}|~{3,})[^\n]*\n.*?\1",           # fenced code
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


def _template(msgids: list[str], location: str, creation_date=None):
    from babel.messages.catalog import Catalog

    catalog = Catalog(locale=LANGUAGE, project="Transformer Core Mechanisms", version="1",
                      copyright_holder="The Transformer Core course team", fuzzy=False,
                      header_comment="# Chinese translation of the course. Edit the msgstr lines; run\n"
                                     "# `python -m autograder i18n update` after changing the English pages.",
                      **({"creation_date": creation_date} if creation_date else {}))
    for index, msgid in enumerate(msgids, start=1):
        catalog.add(msgid, locations=[(location, index)])
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
    documents = {page.docname: (messages(page_texts(page)), page.path.relative_to(root).as_posix())
                 for page in pages(root)}
    documents[SITE_DOC] = (site_messages(root), "_config.yml + _toc.yml")
    for docname, (msgids, location) in documents.items():
        path = catalogue_path(docname, root)
        if path.exists():
            catalog = read_catalogue(path)
            catalog.update(_template(msgids, location, catalog.creation_date), update_header_comment=False)
            catalog.obsolete.clear()          # a removed paragraph's translation is dropped, not kept
        else:
            catalog = _template(msgids, location)
        write_catalogue(catalog, path)
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
    return counts


def translations(docname: str, root: Path = REPO_ROOT) -> dict[str, str]:
    """English block -> Chinese block, for the finished (not fuzzy, not empty) messages of a page."""
    path = catalogue_path(docname, root)
    if not path.exists():
        return {}
    return {m.id: m.string for m in read_catalogue(path) if m.id and m.string and not m.fuzzy}


def translate_text(text: str, table: dict[str, str]) -> str:
    """``text`` with every block that has a translation replaced by it (others stay English)."""
    return "\n\n".join(table.get(block, block) for block in blocks(text))


def _zh_links(text: str, root: Path) -> str:
    """Point Colab links at the Chinese notebooks (``zh/<path>``), which exist for every page."""
    def swap(match: re.Match) -> str:
        path = match.group(2)
        return match.group(0) if path.startswith(f"{ZH_ROOT}/") else colab_url(f"{ZH_ROOT}/{path}", root)
    return _COLAB_PATH.sub(swap, text)


def rendered(root: Path = REPO_ROOT) -> dict[Path, str]:
    """Every file of the Chinese book (under ``zh/``) and its content, from the English pages and the
    catalogues: markdown translated block by block (untranslated blocks stay English), code copied."""
    files = {}
    for page in pages(root):
        table = translations(page.docname, root)
        target = root / ZH_ROOT / page.path.relative_to(root)
        if page.is_notebook:
            nb = copy.deepcopy(read_notebook(page.path))
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = _zh_links(translate_text(cell.source, table), root)
            files[target] = dumps_normalized(nb)
        else:
            files[target] = _zh_links(translate_text(page.path.read_text(encoding="utf-8"), table), root)
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
    sphinx["config"]["language"] = LANGUAGE
    header = "# Generated by `python -m autograder i18n build` from ../_config.yml: edit that file instead.\n"
    return header + yaml.safe_dump(config, allow_unicode=True, sort_keys=False)


def build_html(out: Path, root: Path = REPO_ROOT, *, extra_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Build the Chinese site into ``<out>/_build/html/zh`` next to the English one in ``<out>/_build/html``.

    The English book must be built into ``out`` first: the Chinese build shares its execution cache
    (``<out>/_build/.jupyter_cache``). Jupyter-cache finds a notebook's results by the hash of its code
    cells, which are the English ones, so no chapter is executed twice.

    Returns:
        The finished ``jupyter-book build`` process (its return code and output).
    """
    import yaml

    out = Path(out).resolve()
    config = yaml.safe_load((root / ZH_ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["cache"] = str(out / "_build" / ".jupyter_cache")
    # The configuration is read from a temporary folder: paths that reach back into the repository
    # must not depend on where it lies.
    book = (root / ZH_ROOT).resolve()
    config["bibtex_bibfiles"] = [str((book / p).resolve()) for p in config["bibtex_bibfiles"]]
    config["html"]["favicon"] = str((book / config["html"]["favicon"]).resolve())
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {n: str((book / p).resolve()) for n, p in sphinx["local_extensions"].items()}
    sphinx["config"]["html_static_path"] = [str((book / p).resolve()) for p in sphinx["config"]["html_static_path"]]
    with tempfile.TemporaryDirectory(prefix="zh-book-") as tmp:
        config_path = Path(tmp) / "_config.yml"
        config_path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
        jupyter_book = Path(sys.executable).with_name("jupyter-book")
        done = subprocess.run([str(jupyter_book), "build", str(root / ZH_ROOT), "--config", str(config_path),
                               "--path-output", str(out / "_build" / "zh-book"), *extra_args],
                              capture_output=True, text=True)
    if done.returncode == 0:
        target = out / "_build" / "html" / "zh"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(out / "_build" / "zh-book" / "_build" / "html", target)
    return done


def code_cells_match(root: Path = REPO_ROOT) -> list[str]:
    """Pages whose Chinese notebook's code cells differ from the English ones (should be none)."""
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
        if english != chinese:
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
        if complete and (counts["fuzzy"] or counts["untranslated"]):
            found.append(f"{catalogue_path(docname, root).relative_to(root)}: {counts['untranslated']} untranslated "
                         f"and {counts['fuzzy']} outdated (fuzzy) paragraphs")
        found += markup_report(docname, root)
    return found + code_cells_match(root)


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


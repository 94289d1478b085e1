"""Sphinx extension: keep the published book self-contained.

Readers behind firewalls (where public CDNs are often blocked or slow) must still get typeset math,
rendered widgets and every image, and the browser test runs offline. This extension

1. fetches the pinned browser assets (``site/assets.json``: MathJax, the Jupyter widget manager)
   into ``_build/site-assets`` when they are missing (``site/fetch_assets.py``) and serves them as
   ``_static/vendor/...``; ``_config.yml`` points ``mathjax_path`` and ``nb_ipywidgets_js`` at them;
2. serves the Open-in-Colab badge image that chapter and exercise notebooks embed from
   ``_static/`` instead of colab.research.google.com (the links still go to Colab);
3. writes a root ``favicon.ico`` (asked for by the root redirect page) and removes duplicated <script> tags (a console error on every page otherwise, see _dedupe_scripts);
4. after the build, warns about every page or stylesheet that still loads anything from another
   site (with ``--warningiserror`` that fails the build), naming the page and the address;
5. in the Chinese build, gives each section the id of the same section of the English page (so
   ``page.html#scaled-dot-product-attention`` works in both languages and the language switch keeps
   the reader's place) and puts the few interface words no theme catalogue translates into Chinese;
6. in any build with a ``language``, puts its own catalogues first (``locale_dirs``:
   ``booktheme.po`` before sphinx-book-theme's, ``course_site.po`` for words no catalogue reaches:
   the search box's text, the launch buttons' tooltips, words the theme's HTML hard-codes, see
   ``HARD_CODED``), and points the issue button at the page's own source (``zh/book/...`` in the
   Chinese build, whose ``repository.path_to_book`` is ``zh``).

Configuration (``_config.yml`` -> ``sphinx.config``):

- ``course_site_local_images``: ``{remote image URL: path under _static}``.
- ``course_site_allowed_remote``: URL prefixes that may still be loaded from elsewhere (empty).
- ``course_site_heading_ids``: a JSON file ``{docname: [the English page's section ids, in order]}``
  (written by ``autograder/course/i18n/edition.py`` for the Chinese build; empty: ids as Sphinx makes them).
- ``course_site_body_replacements``: ``{text: replacement}`` applied to every page body (the
  Chinese build's words for myst-nb's "{type}" in "Show code cell {type}").
"""

from __future__ import annotations

import json
import re
import urllib.parse
import struct
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.locale import get_translation
from sphinx.util import logging

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_assets  # noqa: E402  (a sibling module, not a package)

logger = logging.getLogger(__name__)
_translation = get_translation("course_site")
_booktheme_translation = get_translation("booktheme")


def _(message: str) -> str:
    """course_site's translation of ``message`` (itself when no catalogue is loaded: the English build)."""
    return str(_translation(message))


def _booktheme(message: str) -> str:
    return str(_booktheme_translation(message))

# Catalogues this extension reads from ``locale_dirs`` before the themes' own (Sphinx itself reads
# ``sphinx.po`` there first).
CATALOGUES = ("booktheme", "course_site")
# Attributes whose words the themes' HTML templates hard-code (no catalogue reaches them): the
# finished pages are rewritten with course_site's translation of each.
HARD_CODED = ('title="Toggle primary sidebar"', 'title="Toggle secondary sidebar"',
              'aria-label="Main"', 'aria-label="Page"')

COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
_REMOTE = re.compile(r"^(?:https?:)?//", re.IGNORECASE)
_CSS_URL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])((?:https?:)?//[^"')\s]+)""", re.IGNORECASE)
# Tag -> attributes whose value the browser loads by itself (links it only follows are fine).
_LOADED = {"script": ("src",), "img": ("src", "srcset"), "iframe": ("src",), "source": ("src", "srcset"),
           "video": ("src", "poster"), "audio": ("src",), "embed": ("src",), "object": ("data",),
           "input": ("src",)}
_LOADED_LINK_RELS = {"stylesheet", "icon", "shortcut", "preload", "modulepreload", "prefetch",
                     "apple-touch-icon", "manifest"}


class _RemoteLoads(HTMLParser):
    """Collect the addresses a page makes the browser load from other sites."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "link":
            rels = set((values.get("rel") or "").lower().split())
            if rels & _LOADED_LINK_RELS and _REMOTE.match(values.get("href") or ""):
                self.found.append(values["href"] or "")
        for name in _LOADED.get(tag, ()):
            value = values.get(name) or ""
            candidates = [part.strip().split(" ")[0] for part in value.split(",")] if name == "srcset" else [value]
            self.found += [c for c in candidates if _REMOTE.match(c)]
        style = values.get("style") or ""
        self.found += _CSS_URL.findall(style)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.found += _CSS_URL.findall(data)


def remote_loads_in_html(text: str) -> list[str]:
    """Return every address on another site that this HTML page makes the browser load."""
    parser = _RemoteLoads()
    parser.feed(text)
    return parser.found


def _assets_dir(app: Sphinx) -> Path:
    return Path(app.confdir) / "_build" / "site-assets"


def _on_config_inited(app: Sphinx, config) -> None:
    out = _assets_dir(app)
    try:
        if not fetch_assets.assets_up_to_date(out):
            logger.info(f"course_site: fetching the site's browser assets into {out}")
        fetch_assets.ensure_assets(out, quiet=True)
    except fetch_assets.AssetError as error:
        raise ExtensionError(f"course_site: {error}") from error
    config.html_static_path = list(config.html_static_path) + [str(out)]
    for value in [config.mathjax_path, *(getattr(config, "nb_ipywidgets_js", None) or {})]:
        if not value:
            continue
        if _REMOTE.match(str(value)):
            logger.warning(f"course_site: {value} is loaded from another site; point it at a file under "
                           "_static/vendor/ (see site/assets.json)", type="course_site", subtype="remote")
        elif not any((Path(app.confdir) / p / str(value)).is_file() for p in config.html_static_path):
            logger.warning(f"course_site: {value} is not among the static files; check site/assets.json and "
                           "run `python site/fetch_assets.py --force`", type="course_site", subtype="missing")


def _dedupe_scripts(context: dict) -> None:
    """Drop repeated <script> entries.

    With Sphinx 7.4, extensions that register inline scripts at env-before-read-docs (sphinx-thebe,
    sphinx-togglebutton) end up twice in every page; sphinx-thebe's ``const THEBE_JS_URL`` then
    raises "Identifier has already been declared" in the console of every page.
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        key = (str(getattr(script, "filename", script) or ""),  # None and "" both mean an inline body
               tuple(sorted((getattr(script, "attributes", None) or {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    scripts[:] = kept


def _on_builder_inited(app: Sphinx) -> None:
    """Read ``locale_dirs``' booktheme and course_site catalogues first (see the module docstring).

    Sphinx compiles only the ``sphinx`` domain's .po files and the theme registers its own booktheme
    catalogue first, so these are compiled here and put in front, the theme's kept as the fallback.
    """
    from sphinx import locale
    from sphinx.util.i18n import CatalogRepository

    language = app.config.language
    if not language or language == "en":
        return
    repo = CatalogRepository(app.srcdir, app.config.locale_dirs, language, app.config.source_encoding)
    for catalog in repo.catalogs:
        if catalog.domain in CATALOGUES and catalog.is_outdated():
            catalog.write_mo(language)
    for domain in CATALOGUES:
        theirs = locale.translators.pop(("general", domain), None)
        ours, found = locale.init(list(repo.locale_dirs), language, domain)
        if not found:
            if theirs is not None:
                locale.translators[("general", domain)] = theirs
            continue
        if theirs is not None and theirs.__class__ is not locale.NullTranslations:
            ours.add_fallback(theirs)
    # The footer's "By <author>" (the theme reads the author per page): the course team's name is a
    # course_site message, since autograder's i18n build translates only the title of _config.yml.
    app.config.author = _(app.config.author)


def _buttons(buttons: list) -> list[dict]:
    """The header's buttons, those inside groups and dropdowns too."""
    found = []
    for button in buttons or []:
        if isinstance(button, dict):
            found.append(button)
            found += _buttons(button.get("buttons"))
    return found


def _translate_header(app: Sphinx, pagename: str, context: dict) -> None:
    """The interface words the theme builds itself: the search box's text, "Launch on" + " Colab",
    and the issue button, which names the page without the book's folder (``zh/``)."""
    if context.get("theme_search_bar_text"):
        context["theme_search_bar_text"] = _(context["theme_search_bar_text"])
    folder = str((app.config.html_theme_options or {}).get("path_to_docs") or "").strip("/")
    page = "/" + (folder + "/" if folder else "") + pagename
    for button in _buttons(context.get("header_buttons")):
        text, tooltip = button.get("text"), button.get("tooltip")
        if text and tooltip == f"{_booktheme('Launch on')} {text}":
            button["tooltip"] = _("Launch on %(service)s") % {"service": text}
        url = button.get("url") or ""
        if button.get("label") == "source-issues-button" and "/issues/new?" in url:
            body = _("Your issue content here.")
            if context.get("page_source_suffix"):
                source = page.lstrip("/") + context["page_source_suffix"]
                body = _("Source file: %(path)s") % {"path": source} + "\n\n" + body
            title = _("Issue on page %(page)s") % {"page": page + ".html"}
            button["url"] = (url.split("/issues/new?", 1)[0] + "/issues/new?"
                             + urllib.parse.urlencode({"title": title, "body": body}, quote_via=urllib.parse.quote))


def _translate_hard_coded(text: str) -> str:
    for attribute in HARD_CODED:
        name, value = attribute.split("=", 1)
        translated = _(value.strip('"'))
        if translated != value.strip('"'):
            text = text.replace(attribute, f'{name}="{translated}"')
    # The footer's "{{ translate('By') }} {{ author }}": no space after a full-width colon ("作者：...").
    return re.sub(r'(<p class="component-author">\s*[^<]*?[：:])[ \t]+(?=[^\s<])',
                  lambda m: m.group(1) if m.group(1).endswith("：") else m.group(0), text)


def _on_doctree_read(app: Sphinx, doctree) -> None:
    """Give each section the id its English twin has (the Chinese build; see the module docstring).

    Runs before Sphinx collects the table of contents, so the sidebar links use the shared ids too.
    A page whose number of sections differs from the English one keeps Sphinx's ids (and is reported).
    """
    path = app.config.course_site_heading_ids
    if not path:
        return
    table = _heading_ids(path)
    english = table.get(app.env.docname)
    if english is None:
        return
    sections = list(doctree.findall(nodes.section))
    if len(sections) != len(english):
        logger.warning(f"course_site: {app.env.docname} has {len(sections)} sections, its English page "
                       f"{len(english)}; its headings keep their own ids", type="course_site", subtype="heading_ids")
        return
    taken = {i for node in doctree.findall(nodes.Element) for i in node.get("ids", [])}
    for section, wanted in zip(sections, english):
        if wanted in section["ids"] or wanted in taken:
            continue
        section["ids"].insert(0, wanted)
        doctree.ids[wanted] = section
        taken.add(wanted)


_HEADING_IDS: dict[str, dict] = {}


def _heading_ids(path: str) -> dict:
    if path not in _HEADING_IDS:
        _HEADING_IDS[path] = json.loads(Path(path).read_text(encoding="utf-8"))
    return _HEADING_IDS[path]


def _on_html_page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    _dedupe_scripts(context)
    _translate_header(app, pagename, context)
    body = context.get("body")
    if not body:
        return
    for text, replacement in app.config.course_site_body_replacements.items():
        body = body.replace(text, replacement)
    for remote, local in app.config.course_site_local_images.items():
        if remote in body:
            body = body.replace(remote, context["pathto"](local, 1))
    context["body"] = body


def favicon_ico() -> bytes:
    """A 32x32 ``favicon.ico`` drawn like ``book/_static/favicon.svg`` (a causal attention map).

    Browsers ask for ``/favicon.ico`` on pages without an icon link, such as the root ``index.html``
    redirect, and log a console error when it is missing.
    """
    size, background, cell = 32, (0x1F, 0x4E, 0x79), 5
    cells = {(0, 0): 1.0, (1, 0): .45, (1, 1): .9, (2, 0): .3, (2, 1): .55, (2, 2): .85}
    rows = []
    for y in range(size):
        row = bytearray([0])  # PNG filter type: none
        for x in range(size):
            corner = min(x, size - 1 - x) + min(y, size - 1 - y) < 3
            pixel, alpha = background, 0 if corner else 255
            for (i, j), opacity in cells.items():
                left, top = 6 + 7.5 * j, 6 + 7.5 * i
                if left <= x < left + cell and top <= y < top + cell:
                    pixel = tuple(round(c + (255 - c) * opacity) for c in background)
            row += bytes([*pixel, alpha])
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))
    header = struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", size, size, 0, 0, 1, 32, len(png), 22)
    return header + png


def _on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    if not (outdir / "favicon.ico").exists():
        (outdir / "favicon.ico").write_bytes(favicon_ico())
    allowed = tuple(app.config.course_site_allowed_remote)
    problems = []
    for page in sorted(outdir.rglob("*.html")):
        if "_static" in page.relative_to(outdir).parts:
            continue
        text = page.read_text(encoding="utf-8", errors="replace")
        translated = _translate_hard_coded(text)
        if translated != text:
            page.write_text(translated, encoding="utf-8")
        loads = remote_loads_in_html(translated)
        problems += [(page, url) for url in loads if not url.startswith(allowed)]
    for sheet in sorted((outdir / "_static").rglob("*.css")):
        loads = _CSS_URL.findall(sheet.read_text(encoding="utf-8", errors="replace"))
        problems += [(sheet, url) for url in loads if not url.startswith(allowed)]
    for path, url in problems:
        logger.warning(f"course_site: {path.relative_to(outdir)} loads {url} from another site; the book must be "
                       "self-contained (serve it from _static, see site/course_site.py)",
                       type="course_site", subtype="remote")


def setup(app: Sphinx) -> dict:
    app.add_config_value("course_site_local_images", {COLAB_BADGE: "_static/colab-badge.svg"}, "html")
    app.add_config_value("course_site_allowed_remote", [], "html")
    app.add_config_value("course_site_heading_ids", "", "env")
    app.add_config_value("course_site_body_replacements", {}, "html")
    # After myst-nb and the theme have set their own static paths.
    app.connect("config-inited", _on_config_inited, priority=900)
    app.connect("builder-inited", _on_builder_inited, priority=900)   # after the theme's catalogue
    app.connect("html-page-context", _on_html_page_context, priority=900)
    app.connect("doctree-read", _on_doctree_read, priority=400)   # before the toc collector (500)
    app.connect("build-finished", _on_build_finished)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

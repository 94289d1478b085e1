"""The published site as readers see it: every page of the built book in headless Chromium, offline.

The book built once by ``tests/test_book.py`` is served from ``127.0.0.1`` and every page is loaded
in Debian's ``chromium``, driven through ``chromedriver`` (the W3C WebDriver protocol over HTTP,
spoken directly with the standard library). Chromium resolves no host name but the local one, so a
page that needs a CDN fails here. Each page must load without console errors or failed requests,
load nothing from another site, typeset all of its math, load every image, render every widget
from its embedded state, and link only to pages and anchors that exist. Colab and Binder links must
open a notebook that exists in the repository at the branch named in ``_config.yml``, and search
must find each chapter by a term from its text.

Screenshots of a few pages go to ``_build/test-artifacts/site/`` (or ``$SITE_ARTIFACTS``); look at
them. Chromium is ``$CHROMIUM`` or ``chromium`` on the PATH, the driver ``$CHROMEDRIVER`` or
``chromedriver`` (``apt-get install chromium chromium-driver``); without them the tests are skipped
with that reason.
"""

from __future__ import annotations

import base64
import collections
import functools
import hashlib
import html
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from test_book import ROOT, _toc_files, build_book_once

pytestmark = pytest.mark.slow

ARTIFACTS = Path(os.environ.get("SITE_ARTIFACTS") or ROOT / "_build" / "test-artifacts" / "site")
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPO_URL = CONFIG["repository"]["url"].rstrip("/").removesuffix(".git")
REPO_SLUG = REPO_URL.removeprefix("https://github.com/")
BRANCH = CONFIG["repository"]["branch"]
# The theme's launch buttons open the branch; badges and links in the pages open the release
# (repository.release) when one is set.
REFS = {BRANCH, CONFIG["repository"].get("release") or BRANCH}
PAGE_TIMEOUT_S = 60
TOC_PAGES = _toc_files()
EXTRA_PAGES = ["genindex", "search"]
# The Chinese site (zh/ below the root) has the same pages, built from zh/ (autograder/course/i18n/edition.py).
ZH = "zh/"


# --- A minimal WebDriver client -------------------------------------------------------------------


class WebDriverError(RuntimeError):
    pass


class Browser:
    """Headless Chromium driven by chromedriver over the W3C WebDriver protocol."""

    def __init__(self, chromium: str, chromedriver: str, profile: Path):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._driver_log = open(profile.parent / "chromedriver.log", "wb")  # noqa: SIM115
        self._process = subprocess.Popen([chromedriver, f"--port={port}"], stdout=self._driver_log,
                                         stderr=subprocess.STDOUT)
        self._base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline or self._process.poll() is not None:
                self.quit()
                raise WebDriverError(f"chromedriver did not start (see {profile.parent / 'chromedriver.log'})")
            time.sleep(0.2)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--disable-default-apps", "--disable-extensions",
                "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1280,860",
                "--lang=en-US", f"--user-data-dir={profile}",
                # Offline: no host name resolves except the local server's address.
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
        capabilities = {"browserName": "chrome", "pageLoadStrategy": "normal",
                        "goog:chromeOptions": {"binary": chromium, "args": args},
                        "goog:loggingPrefs": {"browser": "ALL"}}
        try:
            session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})
        except Exception:
            self.quit()
            raise
        self._session = f"/session/{session['sessionId']}"
        self._call("POST", self._session + "/timeouts", {"pageLoad": PAGE_TIMEOUT_S * 1000,
                                                         "script": PAGE_TIMEOUT_S * 1000})

    def _call(self, method: str, path: str, payload: dict | None = None):
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(self._base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=PAGE_TIMEOUT_S + 30) as response:
                body = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
            value = body.get("value", {})
            raise WebDriverError(f"{method} {path}: {value.get('error')}: {value.get('message', '')[:2000]}") from None
        return body.get("value")

    def get(self, url: str) -> None:
        self._call("POST", self._session + "/url", {"url": url})

    def run(self, script: str, *args):
        """Run ``script`` (a function body) synchronously in the page and return its result."""
        return self._call("POST", self._session + "/execute/sync", {"script": script, "args": list(args)})

    def run_async(self, script: str, *args):
        """Run ``script``; it must call ``arguments[arguments.length - 1](result)`` when done."""
        return self._call("POST", self._session + "/execute/async", {"script": script, "args": list(args)})

    def console(self) -> list[dict]:
        """Return (and clear) the browser console messages since the last call."""
        return self._call("POST", self._session + "/se/log", {"type": "browser"}) or []

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._call("GET", self._session + "/screenshot")))
        return path

    def quit(self) -> None:
        try:
            if hasattr(self, "_session"):
                self._call("DELETE", self._session)
        except (OSError, WebDriverError):
            pass
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._driver_log.close()


def _find_browser() -> tuple[str, str]:
    chromium = os.environ.get("CHROMIUM") or next(
        (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)
    chromedriver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("the browser test needs Chromium and chromedriver, and they are not installed: "
                    "`apt-get install -y chromium chromium-driver` (or set $CHROMIUM and $CHROMEDRIVER)")
    return chromium, chromedriver


# --- A local server that records every request ----------------------------------------------------


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def log_request(self, code="-", size="-"):
        self.server.requests.append((self.path, int(code) if str(code).isdigit() else 0))

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


class Site:
    """``_build/html`` served on 127.0.0.1; ``requests`` lists (path, status) of every request."""

    def __init__(self, html_dir: Path):
        self.root = html_dir
        handler = functools.partial(_Handler, directory=str(html_dir))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.requests = []
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def requests(self) -> list[tuple[str, int]]:
        return self.server.requests

    def url(self, page: str) -> str:
        return f"{self.origin}/{page}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- Fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def built_html(tmp_path_factory) -> Path:
    book = build_book_once(tmp_path_factory)
    if not book.ok:
        pytest.fail("the book did not build, so there is no site to test; "
                    "see test_book_builds_with_warnings_as_errors:\n" + book.log[-3000:])
    return book.html


@pytest.fixture(scope="session")
def site(built_html):
    served = Site(built_html)
    yield served
    served.close()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    chromium, chromedriver = _find_browser()
    profile = tmp_path_factory.mktemp("chromium") / "profile"
    try:
        driven = Browser(chromium, chromedriver, profile)
    except WebDriverError as error:
        pytest.fail(f"Chromium is installed but could not be started: {error}")
    yield driven
    driven.quit()


# --- What the browser checks on each page ---------------------------------------------------------

# Waits for MathJax and the widget manager, then reports what the page shows. Arguments: a callback.
_INSPECT = r"""
const done = arguments[arguments.length - 1];
const sleep = ms => new Promise(r => setTimeout(r, ms));
(async () => {
  const report = {};
  // Load every image now, including lazy ones, and wait for each to finish.
  for (const img of document.images) { img.loading = 'eager'; }
  await Promise.all(Array.from(document.images).map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r);
                         setTimeout(r, 15000); })));
  report.brokenImages = Array.from(document.images)
      .filter(img => !(img.complete && img.naturalWidth > 0))
      .map(img => img.currentSrc || img.getAttribute('src'));
  report.images = document.images.length;
  // Math: every .math element must hold a MathJax container and no error.
  const maths = Array.from(document.querySelectorAll('span.math, div.math'));
  report.math = maths.length;
  report.mathjax = !!(window.MathJax && window.MathJax.startup);
  if (report.mathjax) {
    try { await window.MathJax.startup.promise; } catch (e) { report.mathjaxError = String(e); }
    for (let i = 0; i < 100 && maths.some(m => !m.querySelector('mjx-container')); i++) { await sleep(100); }
  }
  report.untypeset = maths.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 80));
  report.mathErrors = Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
      .map(e => e.getAttribute('data-mjx-error') || e.textContent.slice(0, 80));
  // Widgets: the manager puts a rendered .widget-subarea before each embedded view.
  const views = Array.from(document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]'));
  const rendered = v => { const s = v.previousElementSibling;
      return !!(s && s.classList.contains('widget-subarea') && s.querySelector('.jupyter-widgets, .widget-box, .lm-Widget')); };
  for (let i = 0; i < 150 && views.some(v => !rendered(v)); i++) { await sleep(100); }
  report.widgets = views.length;
  report.unrenderedWidgets = views.filter(v => !rendered(v)).length;
  report.widgetState = !!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  report.links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  report.resources = performance.getEntriesByType('resource').map(e => e.name);
  report.title = document.title;
  report.article = (document.querySelector('article, [role=main], main') || {innerText: ''}).innerText.length;
  // The language switch, once the page's script has shown it (null if it never appears).
  const shownSwitch = () => { const a = document.querySelector('a.course-language-switch');
      return a && a.offsetParent !== null ? a.href : null; };
  for (let i = 0; i < 50 && !shownSwitch(); i++) { await sleep(100); }
  report.languageSwitch = shownSwitch();
  report.readyState = document.readyState;
  done(report);
})().catch(e => done({scriptError: String(e && e.stack || e)}));
"""


def _page_file(site: Site, url: str) -> Path | None:
    """The file ``url`` (same origin) serves, or None if there is none."""
    path = urllib.parse.unquote(urllib.parse.urlsplit(url).path).lstrip("/")
    target = site.root / path
    if target.is_dir():
        target = target / "index.html"
    return target if target.is_file() else None


@functools.lru_cache(maxsize=None)
def _anchors(path: Path) -> frozenset[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return frozenset(html.unescape(m) for m in re.findall(r'\s(?:id|name)="([^"]+)"', text))


def _inspect(browser: Browser, site: Site, page: str) -> dict:
    browser.console()  # drop what earlier pages left
    before = len(site.requests)
    browser.get(site.url(page))
    report = browser.run_async(_INSPECT)
    assert "scriptError" not in report, f"{page}: the page check failed in the browser: {report['scriptError']}"
    report["console"] = browser.console()
    report["failed"] = [(path, status) for path, status in site.requests[before:] if status >= 400]
    return report


def _problems(site: Site, page: str, report: dict) -> list[str]:
    problems = []
    if report["readyState"] != "complete" or not report["title"]:
        problems.append(f"did not finish loading (readyState {report['readyState']}, title {report['title']!r})")
    problems += [f"request failed: {path} -> HTTP {status}" for path, status in report["failed"]]
    problems += [f"console {entry.get('level')}: {entry.get('message', '')[:300]}"
                 for entry in report["console"] if entry.get("level") in ("SEVERE", "ERROR")]
    problems += [f"loads {url} from another site" for url in report["resources"]
                 if not url.startswith(site.origin)]
    problems += [f"image does not load: {src}" for src in report["brokenImages"]]
    if report["math"] and not report["mathjax"]:
        problems.append(f"{report['math']} math elements but MathJax is not loaded")
    problems += [f"math not typeset: {text!r}" for text in report["untypeset"][:5]]
    problems += [f"MathJax error: {text!r}" for text in report["mathErrors"][:5]]
    if report.get("mathjaxError"):
        problems.append(f"MathJax failed: {report['mathjaxError']}")
    if report["widgets"] and not report["widgetState"]:
        problems.append(f"{report['widgets']} widget views but no embedded widget state")
    if report["unrenderedWidgets"]:
        problems.append(f"{report['unrenderedWidgets']} of {report['widgets']} widgets did not render")
    for link in report["links"]:
        if not link.startswith(site.origin):
            continue
        target = _page_file(site, link)
        if target is None:
            problems.append(f"broken internal link: {link.removeprefix(site.origin)}")
            continue
        fragment = urllib.parse.unquote(urllib.parse.urlsplit(link).fragment)
        if fragment and target.suffix == ".html" and fragment not in _anchors(target):
            problems.append(f"link to a missing anchor: {link.removeprefix(site.origin)}")
    return problems


def _check_page(browser, site, page):
    report = _inspect(browser, site, page)
    problems = _problems(site, page, report)
    assert not problems, f"{page}:\n  " + "\n  ".join(dict.fromkeys(problems))
    return report


# --- Tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", TOC_PAGES + EXTRA_PAGES + [ZH + stem for stem in TOC_PAGES + EXTRA_PAGES])
def test_page_loads_cleanly(browser, site, stem):
    """No failed request, no console error, nothing from other sites, math typeset, images, widgets, links;
    and a page of the table of contents has a language switch that leads to the same page in the other
    language (read in the same visit: each page is loaded once)."""
    report = _check_page(browser, site, stem + ".html")
    if stem in SCREENSHOTS:
        _save_screenshots(browser, SCREENSHOTS[stem])
    if stem.removeprefix(ZH) in TOC_PAGES:
        assert report["article"] > 200, f"{stem}.html shows (almost) no content"
        other = stem.removeprefix(ZH) if stem.startswith(ZH) else ZH + stem
        assert report["languageSwitch"] == site.url(other + ".html"), (
            f"{stem}.html: the language switch leads to {report['languageSwitch']}, not {site.url(other + '.html')}")


def test_the_chinese_pages_are_chinese(site):
    for stem in TOC_PAGES:
        if stem == "book/references":      # the bibliography itself stays as the papers are titled
            continue
        words = _article_text(site.root / ZH / (stem + ".html"))
        chinese = len(re.findall(r"[\u4e00-\u9fff]", words))
        assert chinese > len(words) / 10, f"{ZH}{stem}.html has little Chinese text ({chinese} characters)"


def test_site_root_redirects_to_the_introduction(browser, site):
    browser.console()
    before = len(site.requests)
    browser.get(site.url(""))
    for _ in range(100):
        location = browser.run("return document.readyState === 'complete' ? location.pathname : '';")
        if location == f"/{TOC_PAGES[0]}.html":
            break
        time.sleep(0.1)
    assert location == f"/{TOC_PAGES[0]}.html", f"/ does not lead to {TOC_PAGES[0]}.html (it shows {location!r})"
    failed = [(path, status) for path, status in site.requests[before:] if status >= 400]
    errors = [entry["message"] for entry in browser.console() if entry.get("level") == "SEVERE"]
    assert not failed and not errors, f"loading / : failed requests {failed}, console errors {errors}"


def test_every_built_page_loads_cleanly(browser, site):
    """Pages that are not in the table of contents (there should be none besides the indexes) too."""
    pages = sorted(p.relative_to(site.root).as_posix() for p in site.root.rglob("*.html")
                   if not {"_static", "_sources", "_images"} & set(p.relative_to(site.root).parts))
    expected = {prefix + stem + ".html" for stem in TOC_PAGES + EXTRA_PAGES + ["index"] for prefix in ("", ZH)}
    failures = []
    for page in pages:
        if page in expected:
            continue
        try:
            _check_page(browser, site, page)
        except AssertionError as error:
            failures.append(str(error))
    assert not failures, "\n".join(failures)
    assert expected <= set(pages), f"pages missing from the build: {sorted(expected - set(pages))}"


def _launch_links(site, page: str) -> list[str]:
    """The Colab and Binder links of a built page, read from its HTML (the theme writes the launch buttons
    there; no script adds or changes them)."""
    text = (site.root / page).read_text(encoding="utf-8")
    return [link for link in (html.unescape(h) for h in re.findall(r'<a\s[^>]*?href="([^"]+)"', text))
            if "colab.research.google.com/github/" in link or "mybinder.org/v2/gh/" in link]


def _notebook_of(link: str) -> tuple[str, str, str]:
    """(repository slug, branch, path) that a Colab or Binder link opens."""
    parts = urllib.parse.urlsplit(link)
    if "colab.research.google.com" in parts.netloc:
        match = re.fullmatch(r"/github/([^/]+/[^/]+)/blob/([^/]+)/(.+)", parts.path)
        assert match, f"not a Colab GitHub link: {link}"
        return match.group(1), match.group(2), urllib.parse.unquote(match.group(3))
    match = re.fullmatch(r"/v2/gh/([^/]+/[^/]+)/([^/]+)/?", parts.path)
    assert match, f"not a Binder GitHub link: {link}"
    query = urllib.parse.parse_qs(parts.query)
    urlpath = (query.get("urlpath") or query.get("labpath") or [""])[0]
    path = re.sub(r"^(tree|lab/tree|notebooks)/", "", urlpath)
    return match.group(1), urllib.parse.unquote(match.group(2)), path


def test_colab_links_open_notebooks_of_this_repository(site):
    pages = [prefix + stem + ".html" for prefix in ("", ZH) for stem in TOC_PAGES]
    links = {page: _launch_links(site, page) for page in pages}
    problems = []
    for page, page_links in links.items():
        for link in page_links:
            slug, branch, path = _notebook_of(link)
            if slug != REPO_SLUG or branch not in REFS:
                problems.append(f"{page}: {link} opens {slug}@{branch}, not {REPO_SLUG}@{' or '.join(sorted(REFS))} "
                                "(_config.yml)")
            if not path.endswith(".ipynb"):
                problems.append(f"{page}: {link} does not open a notebook (.ipynb)")
            elif not (ROOT / path).is_file():
                problems.append(f"{page}: {link} opens {path}, which is not in the repository")
            elif _git_ignored(path):
                problems.append(f"{page}: {link} opens {path}, which git ignores, so it is not on {BRANCH}")
    # Every notebook page, in both languages, has a Colab button that opens that very notebook.
    for page in pages:
        stem = page.removesuffix(".html")
        if (ROOT / (stem + ".ipynb")).is_file():
            own = [link for link in links[page] if "colab.research.google.com" in link
                   and _notebook_of(link)[2] == stem + ".ipynb"]
            if not own:
                problems.append(f"{page} has no Open-in-Colab link to {stem}.ipynb")
    assert not problems, "\n".join(problems)


@functools.lru_cache(maxsize=None)
def _git_ignored(path: str) -> bool:
    if not (ROOT / ".git").exists() or not shutil.which("git"):
        return False
    result = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path], capture_output=True)
    return result.returncode == 0


def _article_text(path: Path) -> str:
    """The prose of a page's article (no code, scripts or styles), lower-cased."""
    text = path.read_text(encoding="utf-8", errors="replace")
    text = text.split("<article", 1)[-1].split("</article>", 1)[0]
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    text = re.sub(r"<pre\b.*?</pre>", " ", text, flags=re.S)  # prose, not code
    return html.unescape(re.sub(r"<[^>]+>", " ", text)).lower()


def _article_words(path: Path) -> collections.Counter:
    return collections.Counter(re.findall(r"\b[a-z]{7,}\b", _article_text(path)))


def _search(browser, site, search_page: str, term: str) -> list[str]:
    """The result links the site's search page lists for ``term``."""
    browser.get(site.url(search_page + "?q=" + urllib.parse.quote(term)))
    return browser.run_async(r"""
        const done = arguments[arguments.length - 1];
        (async () => {
          for (let i = 0; i < 200; i++) {
            const status = document.querySelector('#search-results .search-summary, p.search-summary');
            if (status && status.textContent.trim()) break;
            await new Promise(r => setTimeout(r, 100));
          }
          done(Array.from(document.querySelectorAll('#search-results a')).map(a => a.href));
        })();""")


def test_search_finds_each_chapter_by_a_term_in_it(browser, site):
    chapters = [stem for stem in TOC_PAGES if stem.startswith("book/") and re.match(r"\d\d-", Path(stem).name)]
    assert chapters, "no numbered chapters in _toc.yml"
    words = {stem: _article_words(site.root / (stem + ".html")) for stem in chapters}
    problems = []
    for stem in chapters:
        elsewhere = set().union(*(words[other] for other in chapters if other != stem))
        own = [(count, word) for word, count in words[stem].items() if word not in elsewhere]
        term = max(own or [(count, word) for word, count in words[stem].items()])[1]
        found = _search(browser, site, "search.html", term)
        if not any(urllib.parse.urlsplit(href).path == f"/{stem}.html" for href in found):
            problems.append(f"searching {term!r} (a word of {stem}) does not list {stem}.html; results: {found[:8]}")
    assert not problems, "\n".join(problems)


def _chinese_words(path: Path) -> collections.Counter:
    """The Chinese words of a page's prose, cut as the site's search index cuts them (jieba)."""
    import jieba

    return collections.Counter(w for w in jieba.cut_for_search(_article_text(path))
                               if len(w) >= 2 and re.fullmatch(r"[\u4e00-\u9fff]+", w))


def test_search_of_the_chinese_site_finds_each_chapter_by_a_chinese_word(browser, site):
    chapters = [ZH + stem for stem in TOC_PAGES if stem.startswith("book/") and re.match(r"\d\d-", Path(stem).name)]
    words = {stem: _chinese_words(site.root / (stem + ".html")) for stem in chapters}
    problems = []
    for stem in chapters:
        elsewhere = set().union(*(words[other] for other in chapters if other != stem))
        own = [(count, word) for word, count in words[stem].items() if word not in elsewhere]
        assert own, f"{stem}.html has no Chinese word of its own"
        term = max(own)[1]
        found = _search(browser, site, ZH + "search.html", term)
        if not any(urllib.parse.urlsplit(href).path == f"/{stem}.html" for href in found):
            problems.append(f"searching {term!r} (a word of {stem}) does not list {stem}.html; results: {found[:8]}")
    assert not problems, "\n".join(problems)


def _screenshot_pages() -> dict[str, str]:
    """The pages whose screenshots are saved as test artefacts (look at them): page -> picture name."""
    chapters = [stem for stem in TOC_PAGES if stem.startswith("book/") and re.match(r"\d\d-", Path(stem).name)]
    exercises = [stem for stem in TOC_PAGES if stem.startswith("exercises/")]
    shots = {TOC_PAGES[0]: "intro", "book/glossary": "glossary", ZH + TOC_PAGES[0]: "zh-intro"}
    if chapters:
        chapter = chapters[min(1, len(chapters) - 1)]
        shots.update({chapter: "chapter", ZH + chapter: "zh-chapter"})
    if exercises:
        shots[exercises[0]] = "exercise"
    return shots


SCREENSHOTS = _screenshot_pages()


def _save_screenshots(browser, name: str) -> None:
    """Save the page the browser shows (typeset: taken after :func:`_inspect`) as ``<name>.png``; on the
    chapter, also its first widget (or, failing that, its first figure) as ``chapter-widget.png``."""
    time.sleep(0.8)                                 # web fonts and the last layout
    saved = [browser.screenshot(ARTIFACTS / f"{name}.png")]
    if name == "chapter":
        target = browser.run(r"""
            const el = document.querySelector('.widget-subarea') || document.querySelector('.cell_output img');
            if (!el) return false;
            el.scrollIntoView({block: 'start'}); window.scrollBy(0, -80); return true;""")
        if target:
            time.sleep(0.5)
            saved.append(browser.screenshot(ARTIFACTS / "chapter-widget.png"))
    for path in saved:
        assert path.stat().st_size > 10_000, f"{path} is (nearly) empty"
    print("screenshots:", *saved, sep="\n  ")


def test_screenshots_of_search_results(browser, site):
    """The search pages with results, saved as test artefacts (the other pictures are taken where
    test_page_loads_cleanly has loaded their pages)."""
    for name, page, term in (("search", "search.html", "attention"), ("zh-search", ZH + "search.html", "注意力")):
        assert _search(browser, site, page, term), f"{page} finds nothing for {term!r}"
        _save_screenshots(browser, name)


# --- The Chinese site reads as Chinese (issue 23) -------------------------------------------------

# Interface words of the theme, myst-nb and sphinx-togglebutton that must not show on a Chinese page.
ENGLISH_INTERFACE = ("Show code cell", "Hide code cell", "Click to show", "Click to hide", "Link to this heading")


def _section_ids(path: Path) -> list[str]:
    return re.findall(r'<section\b[^>]*?\bid="([^"]+)"', path.read_text(encoding="utf-8", errors="replace"))


def test_chinese_headings_have_the_ids_of_the_english_ones(built_html):
    """``page.html#section`` leads to the same section in both languages."""
    problems = []
    for stem in TOC_PAGES:
        english = _section_ids(built_html / (stem + ".html"))
        missing = [i for i in english if i not in _anchors(built_html / ZH / (stem + ".html"))]
        if missing:
            problems.append(f"{ZH}{stem}.html lacks the English section ids {missing[:5]}")
    assert not problems, "\n".join(problems)


def _language_switch_target(browser, url: str) -> str | None:
    """Where the page's language switch leads, once the page's script has shown it (None if never)."""
    browser.get(url)
    for _ in range(50):
        href = browser.run("const a = document.querySelector('a.course-language-switch');"
                           "return a && a.offsetParent !== null ? a.href : null;")
        if href:
            return href
        time.sleep(0.1)
    return None


@pytest.mark.parametrize("stem", [s for s in TOC_PAGES if s.startswith("book/0")][:3])
def test_the_language_switch_keeps_the_section(browser, site, stem):
    section = _section_ids(site.root / (stem + ".html"))[1]
    for page, other in ((stem + ".html", ZH + stem + ".html"), (ZH + stem + ".html", stem + ".html")):
        href = _language_switch_target(browser, site.url(page) + "#" + section)
        assert href == site.url(other) + "#" + section, f"{page}#{section}: the switch leads to {href}"
        assert section in _anchors(site.root / other), f"{other} has no section #{section}"


def _chinese_page_text(path: Path) -> str:
    """The article of a built page as a reader sees it, without code and math (kept as ⟨⟩)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    text = text.split("<article", 1)[-1].split("</article>", 1)[0]
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    text = re.sub(r"<(pre|code)\b.*?</\1>", "⟨⟩", text, flags=re.S)
    text = re.sub(r'<(span|div) class="math[^"]*">.*?</\1>', "⟨⟩", text, flags=re.S)
    text = re.sub(r'<a class="headerlink".*?</a>', " ", text, flags=re.S)
    text = re.sub(r'<dt id="term-.*?</dt>', " ", text, flags=re.S)   # a glossary entry's English term
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def test_no_english_on_the_built_chinese_pages(built_html):
    """No English sentence (answers, captions, admonitions, dropdowns), and no English interface word."""
    from autograder.course.i18n import reader_checks

    keep = reader_checks.load_terms(ROOT)["keep"]
    problems = []
    for stem in TOC_PAGES:
        if stem == "book/references":
            continue
        path = built_html / ZH / (stem + ".html")
        source = path.read_text(encoding="utf-8", errors="replace")
        problems += [f"{ZH}{stem}.html shows {word!r}" for word in ENGLISH_INTERFACE if word in source]
        problems += [f"{ZH}{stem}.html: English left: {run!r}"
                     for run in reader_checks.english_runs(_chinese_page_text(path), keep)]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])


def test_chinese_figures_are_drawn_for_the_chinese_pages(built_html):
    """Every chapter figure of a Chinese page is its own image (Chinese titles, axes and legends), not
    the English page's."""
    problems = []
    for stem in TOC_PAGES:
        if not (ROOT / (stem + ".ipynb")).is_file() or not stem.startswith("book/"):
            continue
        def images(page: Path) -> set[str]:
            names = re.findall(r'<img[^>]+src="([^"]*_images/[^"]+\.png)"', page.read_text(encoding="utf-8", errors="replace"))
            return {hashlib.sha256((page.parent / n).read_bytes()).hexdigest() for n in names
                    if (page.parent / n).is_file()}
        english, chinese = images(built_html / (stem + ".html")), images(built_html / ZH / (stem + ".html"))
        if not english:     # every chapter draws figures; none means its kernel drew them nowhere
            problems.append(f"{stem}.html has no figures")
        if english & chinese:
            problems.append(f"{ZH}{stem}.html shows {len(english & chinese)} of the English page's figures as they are")
        if len(chinese) < len(english):
            problems.append(f"{ZH}{stem}.html has {len(chinese)} figures, the English page {len(english)}")
    assert not problems, "\n".join(problems)

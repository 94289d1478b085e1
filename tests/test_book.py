"""The book builds from a clean tree with warnings as errors, exactly as `make book` builds it.

The build is slow (it executes every chapter), so it happens at most once per test session, and not at all
when ``make book`` already built this tree's current content: ``build_book_once`` reuses the repository's
``_build/html`` when the stamp the build left (``edition.BUILD_STAMP``) holds the hash of the files the book
is built from as they are now (``edition.book_inputs_key``); otherwise it builds with ``make book``'s own
function (``autograder/course/book_build.py:build``) into the repository's ``_build`` (so the execution caches
re-run only the chapters whose code changed) under a lock. ``tests/test_site.py`` (the browser test) loads the
same ``_build/html``: whichever xdist worker asks first builds, the other waits for it (``conftest.run_once``).

Set ``COURSE_BOOK_HTML=_build/html`` to point both at a book you have already built (for example by
``make book``) instead; the build test is then skipped, with that reason.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from conftest import run_once

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    return files


def _existing(stem):
    matches = [p for p in (ROOT / stem).parent.glob(pathlib.Path(stem).name + ".*")
               if p.suffix in {".md", ".ipynb"}]
    return matches


@dataclasses.dataclass
class BookBuild:
    """One build of the book: where its HTML is, whether it succeeded, its log and how long it took."""

    html: pathlib.Path
    returncode: int
    log: str
    seconds: float
    prebuilt: bool = False
    reused: bool = False           # make book's build of the same content
    executed_by_sphinx: int = 0    # chapters a Sphinx build executed itself instead of reading the primed cache
    priming_failures: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


_BUILDS: dict[str, BookBuild] = {}


def build_book_once(tmp_path_factory) -> BookBuild:
    """The book built from the tree as it is now: the repository's ``_build`` when its stamp says it is current,
    else built there (once per test session, see conftest.run_once) by ``make book``'s own function,
    ``autograder/course/book_build.py:build`` (the chapters primed in parallel, then both Sphinx builds with
    warnings as errors).
    """
    if "book" in _BUILDS:
        return _BUILDS["book"]
    prebuilt = os.environ.get("COURSE_BOOK_HTML")
    if prebuilt:
        html = pathlib.Path(prebuilt).resolve()
        if not (html / "index.html").is_file():
            pytest.fail(f"COURSE_BOOK_HTML={prebuilt} holds no built book (no index.html)")
        _BUILDS["book"] = BookBuild(html, 0, "", 0.0, prebuilt=True)
        return _BUILDS["book"]
    jupyter_book = pathlib.Path(sys.executable).with_name("jupyter-book")
    if not jupyter_book.exists():
        pytest.fail("jupyter-book is not installed in this environment: run `make setup`")

    from autograder.course import book_build
    from autograder.course.i18n import edition

    def current(out: pathlib.Path) -> bool:
        stamp = out / edition.BUILD_STAMP
        return (stamp.is_file() and (out / "_build" / "html" / "zh" / "index.html").is_file()
                and stamp.read_text(encoding="utf-8").strip() == edition.book_inputs_key(ROOT))

    def build(_work: pathlib.Path) -> dict:
        out = ROOT
        html = str(out / "_build" / "html")
        (out / "_build").mkdir(exist_ok=True)
        with open(out / "_build" / ".book-build.lock", "w") as lock:    # one build of this tree at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            if current(out):
                return {"html": html, "returncode": 0, "log": "", "seconds": 0.0, "reused": True,
                        "executed_by_sphinx": 0, "priming_failures": 0}
            return build_into(out)

    def build_into(out: pathlib.Path) -> dict:
        built = book_build.build(out, ROOT, progress=False)
        return {"html": str(out / "_build" / "html"), "returncode": built.returncode,
                "log": built.log + "\n" + book_build.time_table(built), "seconds": built.seconds,
                "reused": False, "executed_by_sphinx": built.executed_by_sphinx,
                "priming_failures": len(built.priming.failed)}

    built = run_once(tmp_path_factory, "book", build)
    _BUILDS["book"] = BookBuild(pathlib.Path(built["html"]), built["returncode"], built["log"], built["seconds"],
                                reused=built["reused"], executed_by_sphinx=built["executed_by_sphinx"],
                                priming_failures=built["priming_failures"])
    return _BUILDS["book"]


@pytest.fixture(scope="session")
def book(tmp_path_factory) -> BookBuild:
    return build_book_once(tmp_path_factory)


@pytest.mark.parametrize("stem", _toc_files())
def test_every_toc_entry_exists(stem):
    assert _existing(stem), f"_toc.yml lists {stem}, but no {stem}.md or {stem}.ipynb exists"


def test_site_assets_manifest_is_pinned():
    """Every browser asset is pinned by version and integrity, fetched from the npm registry."""
    import json

    manifest = json.loads((ROOT / "site" / "assets.json").read_text(encoding="utf-8"))
    for package in manifest["packages"]:
        assert package["integrity"].startswith("sha512-"), f"{package['name']}: pin it with a sha512 integrity"
        assert package["version"] in package["tarball"], f"{package['name']}: tarball and version disagree"
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    sphinx = config["sphinx"]["config"]
    assert not sphinx["mathjax_path"].startswith(("http:", "https:", "//")), "MathJax must come from _static"
    assert all(not js.startswith(("http:", "https:", "//")) for js in sphinx["nb_ipywidgets_js"]), (
        "the widget manager must come from _static")


@pytest.mark.slow
def test_book_builds_with_warnings_as_errors(book):
    if book.prebuilt:
        pytest.skip(f"COURSE_BOOK_HTML is set: using the book already built in {book.html}")
    assert book.ok, "the book failed to build:\n" + book.log[-6000:]
    assert book.executed_by_sphinx == book.priming_failures == 0, (
        "every chapter should execute once per edition, while the caches are primed, and the Sphinx builds "
        "only read them:\n" + book.log[-3000:])
    for stem in _toc_files():
        for page in (book.html / (stem + ".html"), book.html / "zh" / (stem + ".html")):
            assert page.exists(), f"{page.relative_to(book.html)} was not built"
    print("reused _build/html: the files the book is built from are unchanged since its build" if book.reused
          else f"book built in {book.seconds:.0f} s (both languages)")


def test_book_inputs_key_follows_the_book_files_and_nothing_else(tmp_path):
    """The stamp that lets `make test` reuse `make book`'s build changes with every file a page is built
    from (tracked, edited, new and untracked), and not with tests, benchmarks or ignored build output."""
    from autograder.course.i18n.edition import book_inputs_key

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    for name, text in {"book/01-a.ipynb": "{}", "transformer_core/x.py": "x = 1\n", "tests/test_a.py": "",
                       "benchmarks/b.py": "", ".gitignore": "_build/\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    git("init", "-q")
    git("add", ".")
    first = book_inputs_key(tmp_path)
    (tmp_path / "tests" / "test_a.py").write_text("assert True\n", encoding="utf-8")
    (tmp_path / "benchmarks" / "b.py").write_text("print(1)\n", encoding="utf-8")
    (tmp_path / "_build").mkdir()
    (tmp_path / "_build" / "index.html").write_text("<html>", encoding="utf-8")
    assert book_inputs_key(tmp_path) == first
    (tmp_path / "book" / "01-a.ipynb").write_text('{"cells": []}', encoding="utf-8")
    edited = book_inputs_key(tmp_path)
    assert edited != first
    (tmp_path / "book" / "02-b.ipynb").write_text("{}", encoding="utf-8")          # new, not yet added
    assert book_inputs_key(tmp_path) not in (first, edited)
    (tmp_path / "book" / "02-b.ipynb").unlink()
    assert book_inputs_key(tmp_path) == edited

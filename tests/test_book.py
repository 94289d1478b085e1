"""The book builds from a clean tree with warnings as errors, exactly as `make book` builds it."""

import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

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


@pytest.mark.parametrize("stem", _toc_files())
def test_every_toc_entry_exists(stem):
    assert _existing(stem), f"_toc.yml lists {stem}, but no {stem}.md or {stem}.ipynb exists"


@pytest.mark.slow
def test_book_builds_with_warnings_as_errors(tmp_path):
    jupyter_book = pathlib.Path(sys.executable).with_name("jupyter-book")
    assert jupyter_book.exists(), "jupyter-book is not installed in this environment: run `make setup`"
    result = subprocess.run(
        [str(jupyter_book), "build", str(ROOT), "--path-output", str(tmp_path), "--warningiserror",
         "--keep-going"],
        capture_output=True, text=True, timeout=1500)
    log = result.stdout + result.stderr
    assert result.returncode == 0, "the book failed to build:\n" + log[-6000:]
    html = tmp_path / "_build" / "html"
    for stem in _toc_files():
        page = html / (stem + ".html")
        assert page.exists(), f"{page.relative_to(tmp_path)} was not built"
    shutil.rmtree(tmp_path / "_build" / ".jupyter_cache", ignore_errors=True)

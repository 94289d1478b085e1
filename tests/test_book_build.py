"""Priming the book's execution caches (autograder/course/book_build.py) on a tiny two-edition book: every
chapter executes once per edition in its language's kernel, a second priming executes nothing, a changed
chapter re-executes in both editions and nothing else, a failing chapter is left to the Sphinx build, and
what priming stores is what myst-nb itself finds in the cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn

from autograder.course import book_build
from autograder.course.book_build import Edition, prime

SHOW_ENVIRONMENT = ("import os, pathlib, matplotlib\n"
                    "print(os.environ.get('COURSE_LANGUAGE'), os.environ.get('OMP_NUM_THREADS'),\n"
                    "      os.environ.get('MKL_NUM_THREADS'), pathlib.Path.cwd().name, matplotlib.get_backend())")


def _notebook(*sources: str) -> str:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter")]
                                        + [nbformat.v4.new_code_cell(source) for source in sources])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(notebook)


def _write_book(folder: Path, chapters: dict[str, str]) -> None:
    """A book as jupyter-book reads it: ``_toc.yml``, ``_config.yml`` (the course's execute settings), an
    intro page, the chapters under ``book/`` and an exercise notebook that must never be executed."""
    folder.mkdir(parents=True, exist_ok=True)
    toc = {"format": "jb-book", "root": "book/intro",
           "parts": [{"caption": "Chapters", "chapters": [{"file": f"book/{stem}"} for stem in chapters]},
                     {"caption": "Exercises", "chapters": [{"file": "exercises/01-a/a"}]}]}
    config = {"title": "tiny", "execute": {"execute_notebooks": "cache", "timeout": 120,
                                           "exclude_patterns": ["exercises/*/*"]}}
    (folder / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    (folder / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (folder / "book").mkdir(exist_ok=True)
    (folder / "book" / "intro.md").write_text("# Intro\n", encoding="utf-8")
    for stem, text in chapters.items():
        (folder / "book" / f"{stem}.ipynb").write_text(text, encoding="utf-8")
    (folder / "exercises" / "01-a").mkdir(parents=True, exist_ok=True)
    (folder / "exercises" / "01-a" / "a.ipynb").write_text(_notebook("raise SystemExit('never run')"),
                                                            encoding="utf-8")


def _editions(folder: Path) -> list[Edition]:
    """English in ``folder``, Chinese in ``folder/zh``, each with its own cache."""
    return [Edition("English", folder, folder / "_build" / ".jupyter_cache"),
            Edition("Chinese", folder / "zh", folder / "_build" / ".jupyter_cache_zh", {"COURSE_LANGUAGE": "zh_CN"})]


@pytest.fixture(scope="module")
def primed(tmp_path_factory):
    """The tiny book (the same two chapters in both editions) primed once, and that priming."""
    folder = tmp_path_factory.mktemp("tiny") / "primed"
    chapters = {"01-a": _notebook(SHOW_ENVIRONMENT), "02-b": _notebook("x = sum(range(10))", "print(x)")}
    _write_book(folder, chapters)
    _write_book(folder / "zh", chapters)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COURSE_LANGUAGE", raising=False)
        return folder, prime(_editions(folder), workers=8, progress=False)


@pytest.fixture
def tiny(primed, tmp_path, monkeypatch) -> list[Edition]:
    """A copy of the primed book and its caches, for a test to change."""
    monkeypatch.delenv("COURSE_LANGUAGE", raising=False)
    shutil.copytree(primed[0], tmp_path / "book")
    return _editions(tmp_path / "book")


def _cached_outputs(edition: Edition, stem: str) -> list[str]:
    """The text outputs myst-nb would merge into the chapter as it is on disk now (KeyError if not cached)."""
    notebook = nbformat.reads((edition.source / "book" / f"{stem}.ipynb").read_text(encoding="utf-8"), as_version=4)
    _, merged = get_cache(str(edition.cache)).merge_match_into_notebook(notebook)
    return [output.get("text", "") for cell in merged.cells if cell.cell_type == "code" for output in cell.outputs]


def _summary(priming) -> set[tuple[str, str, bool]]:
    return {(run.edition, run.path.stem, run.cached) for run in priming.runs}


def test_priming_executes_every_chapter_in_both_editions_each_in_its_language(primed):
    folder, priming = primed
    assert _summary(priming) == {(e, s, False) for e in ("English", "Chinese") for s in ("01-a", "02-b")}, (
        "the exercise notebook is excluded and every chapter of both editions executes")
    assert not priming.failed and all(run.seconds > 0 for run in priming.runs)
    assert priming.workers == 4, "at most one worker per job"
    assert priming.workers * priming.threads <= max(os.cpu_count() or 1, priming.workers)
    threads = str(priming.threads)
    english, chinese = (_cached_outputs(edition, "01-a")[0].split() for edition in _editions(folder))
    inline = "module://matplotlib_inline.backend_inline"    # this process has MPLBACKEND=Agg (tests/conftest.py)
    assert english == ["None", threads, threads, "book", inline], "the English kernel runs in book/ without COURSE_LANGUAGE"
    assert chinese == ["zh_CN", threads, threads, "book", inline], "the Chinese kernel sees COURSE_LANGUAGE=zh_CN"
    assert _cached_outputs(_editions(folder)[1], "02-b") == ["45\n"]


def test_a_second_priming_finds_everything_in_the_caches(tiny):
    again = prime(tiny, workers=2, progress=False)
    assert _summary(again) == {(e, s, True) for e in ("English", "Chinese") for s in ("01-a", "02-b")}
    assert again.workers == 1 and not again.failed


def test_a_changed_code_cell_re_executes_that_chapter_in_both_editions_and_nothing_else(tiny):
    for edition in tiny:
        (edition.source / "book" / "02-b.ipynb").write_text(_notebook("x = sum(range(11))", "print(x)"),
                                                           encoding="utf-8")
    again = prime(tiny, workers=2, progress=False)
    assert _summary(again) == {("English", "01-a", True), ("Chinese", "01-a", True),
                               ("English", "02-b", False), ("Chinese", "02-b", False)}
    assert [_cached_outputs(edition, "02-b") for edition in tiny] == [["55\n"], ["55\n"]]


def test_a_failing_chapter_is_left_uncached_and_reported(tiny):
    for edition in tiny:
        (edition.source / "book" / "02-b.ipynb").write_text(_notebook("1 / 0"), encoding="utf-8")
    priming = prime(tiny, workers=2, progress=False)
    assert {(run.edition, run.path.stem, run.error) for run in priming.failed} == {
        ("English", "02-b", "CellExecutionError"), ("Chinese", "02-b", "CellExecutionError")}
    for edition in tiny:
        with pytest.raises(KeyError):
            _cached_outputs(edition, "02-b")
        assert _cached_outputs(edition, "01-a")
    built = book_build.BookBuild(priming, english_seconds=1.0, chinese_seconds=None, returncode=1, log="",
                                 seconds=2.0)
    table = book_build.time_table(built)
    row = next(line for line in table.splitlines() if line.startswith("02-b"))
    assert row.count("failed (CellExecutionError)") == 2
    assert "cache hits: 2 of 4" in table and "Chinese site (Sphinx): not built" in table


def test_the_longest_chapters_run_first_by_the_seconds_the_caches_recorded(tiny):
    """With one worker, chapters finish in the order they start: the one the newest record says is slow
    comes first, though it is second in the table of contents."""
    english = tiny[0]
    cache = get_cache(str(english.cache))
    for seconds, stem in ((5.0, "01-a"), (100.0, "02-b")):      # newer records, of versions no longer on disk
        record = cache.add_nb_to_project(str(english.source / "book" / f"{stem}.ipynb"))
        cache.cache_notebook_bundle(CacheBundleIn(nbformat.reads(_notebook(f"old = {seconds}"), as_version=4),
                                                  record.uri, data={"execution_seconds": seconds}),
                                    check_validity=False, overwrite=True)
        (english.source / "book" / f"{stem}.ipynb").write_text(_notebook(f"new = {seconds}"), encoding="utf-8")
    priming = prime([english], workers=1, progress=False)
    assert [(run.path.stem, run.cached) for run in priming.runs] == [("02-b", False), ("01-a", False)]


def test_myst_nb_uses_the_primed_notebook_without_executing_it(primed):
    """The independent check: myst-nb's own cache client, given the chapter as it reads it, finds the
    primed record and takes its outputs and recorded seconds instead of executing."""
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.execute import create_client

    class Log:
        def __init__(self):
            self.lines: list[str] = []

        def info(self, message, **_):
            self.lines.append(message)

        warning = debug = info

    folder, priming = primed
    recorded = {(run.edition, run.path.stem): run.seconds for run in priming.runs}
    for edition in _editions(folder):
        path = edition.source / "book" / "01-a.ipynb"
        notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
        log = Log()
        config = NbParserConfig(execution_mode="cache", execution_cache_path=str(edition.cache))
        with create_client(notebook, str(path), config, log) as client:
            assert any(line.startswith("Using cached notebook") for line in log.lines), log.lines
            assert not any(book_build.SPHINX_EXECUTED in line for line in log.lines)
            assert client.exec_metadata["runtime"] == pytest.approx(recorded[(edition.name, "01-a")])
            outputs = [o["text"] for c in client.notebook.cells if c.cell_type == "code" for o in c.outputs]
        assert outputs[0].split()[0] == ("zh_CN" if edition.name == "Chinese" else "None")


def test_the_course_books_two_editions_are_the_ones_make_book_builds(tmp_path, monkeypatch):
    """English from the repository with myst-nb's cache under <out>/_build, Chinese from zh/ with the
    Chinese site's cache and kernel environment (those of ``build_html``); both list the chapters of
    _toc.yml and no exercise."""
    from autograder.course.i18n import edition as i18n_edition

    root = Path(book_build.__file__).resolve().parents[2]
    monkeypatch.setattr(i18n_edition, "kernel_environment", lambda out, root: {"COURSE_LANGUAGE": str(out)})
    english, chinese = book_build.editions(tmp_path, root)
    assert (english.source, english.cache, english.kernel_env) == (root, tmp_path / "_build" / ".jupyter_cache", {})
    assert (chinese.source, chinese.cache) == (root / "zh", i18n_edition.execution_cache(tmp_path, root))
    assert chinese.kernel_env == {"COURSE_LANGUAGE": str(tmp_path.resolve())}
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    chapters = [chapter["file"] for chapter in toc["parts"][0]["chapters"]]
    assert [p.relative_to(root).with_suffix("").as_posix() for p in english.chapters()] == chapters
    assert [p.relative_to(root / "zh").with_suffix("").as_posix() for p in chinese.chapters()] == chapters


def test_a_chapters_client_waits_for_a_reply_in_short_polls_until_its_own_timeout(monkeypatch):
    """``execute_chapter``'s process polls its kernel channels a second at a time (a long poll stalled three
    loaded builds in a widget cell, see ``book_build._poll_replies_in_slices``): a message that arrives after
    several polls is returned, and a caller's timeout still ends the wait with ``queue.Empty``."""
    import asyncio
    import time
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    asked: list[float] = []

    async def one_poll(self, timeout=None):      # a socket whose message is there at the third look
        asked.append(timeout)
        await asyncio.sleep(timeout)
        if len(asked) == 3 and self == "ready":
            return {"msg_type": "execute_reply"}
        raise Empty

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", one_poll)
    book_build._poll_replies_in_slices(slice_s=0.05)
    assert asyncio.run(AsyncZMQSocketChannel.get_msg("ready", timeout=10.0)) == {"msg_type": "execute_reply"}
    assert len(asked) == 3 and max(asked) <= 0.05
    asked.clear()
    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(AsyncZMQSocketChannel.get_msg("silent", timeout=0.3))
    assert 0.3 <= time.monotonic() - start < 2.0 and len(asked) >= 6 and max(asked) <= 0.05

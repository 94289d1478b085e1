"""The Chinese site's interface words (issue 29): toolbar, tooltips, search box, footer, issue link.

No browser needed: a two-page book (a Markdown page and an unexecuted notebook, so the launch buttons
appear) is built with the Chinese site's configuration (zh/_config.yml, site/course_site.py and
site/locale) and its HTML is read; a built Chinese site under _build/html/zh is read too when there
is one. The same tiny book built with the English configuration keeps its English words.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# What the theme shows in English unless the Chinese build translates it (the strings found on a
# built Chinese page before issue 29), and the Taiwan wording of the theme's own catalogue.
ENGLISH_INTERFACE = (
    "Search this book", "Launch on", "Repository", "Open issue", "Open an issue", "Color mode",
    "System Settings", "Toggle primary sidebar", "Toggle secondary sidebar", "Source repositories",
    "Launch interactive content", "course team", "Copyright", ' logo" src=', "Print to PDF", "列印",
    'aria-label="Main"', 'aria-label="Page"', "Issue%20on%20page", "Your%20issue",
)


def _build(tmp: Path, config_file: Path, locale: bool) -> Path:
    """Build the tiny book with ``config_file``'s settings; return its HTML folder."""
    src = tmp / "src"
    (src / "book").mkdir(parents=True)
    (src / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n- file: book/01-page\n",
                                  encoding="utf-8")
    (src / "book" / "intro.md").write_text("# 简介\n\n正文。\n", encoding="utf-8")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# 第一章\n\n正文。\n\n## 小节\n\n更多。"),
                      nbformat.v4.new_code_cell("print(1)")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, src / "book" / "01-page.ipynb")
    (src / "refs.bib").write_text("@misc{x, title={x}, author={A}, year={2020}}\n", encoding="utf-8")

    base = config_file.parent
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    config["bibtex_bibfiles"] = ["refs.bib"]
    config["execute"]["execute_notebooks"] = "off"
    config["html"]["favicon"] = str((base / config["html"]["favicon"]).resolve())
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {n: str((base / p).resolve()) for n, p in sphinx["local_extensions"].items()}
    sphinx["config"]["html_static_path"] = [str((base / p).resolve()) for p in sphinx["config"]["html_static_path"]]
    if locale:   # a copy, as autograder's i18n html makes: the .mo files are written beside the .po files
        shutil.copytree((base / sphinx["config"]["locale_dirs"][0]).resolve(), tmp / "locale")
        sphinx["config"]["locale_dirs"] = [str(tmp / "locale")]
    (src / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")

    assets = ROOT / "_build" / "site-assets"
    if not (assets / "vendor").is_dir():
        sys.path.insert(0, str(ROOT / "site"))
        import fetch_assets
        try:
            fetch_assets.ensure_assets(assets, quiet=True)
        except fetch_assets.AssetError as error:
            pytest.skip(f"the site assets are missing and cannot be fetched: {error}")
    (src / "_build").mkdir()
    (src / "_build" / "site-assets").symlink_to(assets, target_is_directory=True)

    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    done = subprocess.run([str(jupyter_book), "build", str(src), "--path-output", str(tmp / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return tmp / "out" / "_build" / "html"


@pytest.fixture(scope="module")
def chinese_html(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("zh-interface"), ROOT / "zh" / "_config.yml", locale=True)


def _issue_title(page: str) -> str:
    link = re.search(r'href="([^"]*/issues/new\?[^"]*)"', page)
    assert link, "no issue button"
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(html.unescape(link.group(1))).query)
    return query["title"][0]


def _problems(name: str, page: str, expect_launch: bool, stem: str) -> list[str]:
    problems = [f"{name} shows {word!r}" for word in ENGLISH_INTERFACE if word in page]
    for wanted in ["作者：Transformer 核心机制课程组", "© 2026 版权所有", "搜索本书", "报告问题", "课程库",
                   "显示或隐藏目录栏", "配色模式"] + (["在 Colab 中打开", "Colab 图标"] if expect_launch else []) \
            + (["打印为 PDF"] if stem.startswith("book/") else []):
        if wanted not in page:
            problems.append(f"{name} lacks {wanted!r}")
    title = _issue_title(page)
    if f"/zh/{stem}.html" not in title:
        problems.append(f"{name}: the issue button's title {title!r} does not name /zh/{stem}.html")
    return problems


def test_the_chinese_site_interface_is_chinese(chinese_html):
    problems = []
    for stem, launch in (("book/01-page", True), ("book/intro", False), ("search", False)):
        page = (chinese_html / f"{stem}.html").read_text(encoding="utf-8")
        problems += _problems(f"{stem}.html", page, launch, stem)
    assert not problems, "\n".join(problems)


def test_the_chinese_issue_link_names_the_chinese_source(chinese_html):
    page = (chinese_html / "book" / "01-page.html").read_text(encoding="utf-8")
    link = html.unescape(re.search(r'href="([^"]*/issues/new\?[^"]*)"', page).group(1))
    body = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["body"][0]
    assert "zh/book/01-page.ipynb" in body, body


def test_a_built_chinese_site_shows_no_english_interface_word():
    """The real thing, where `make book` has built it (otherwise skipped: the tiny build above stands in)."""
    built = ROOT / "_build" / "html" / "zh"
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    stem = toc["parts"][0]["chapters"][0]["file"]
    path = built / f"{stem}.html"
    if not path.is_file():
        pytest.skip(f"no built Chinese site ({path} is missing): run `make book`")
    problems = _problems(f"zh/{stem}.html", path.read_text(encoding="utf-8"), True, stem)
    assert not problems, "\n".join(problems)


def test_the_english_site_keeps_its_words(tmp_path):
    english = _build(tmp_path, ROOT / "_config.yml", locale=False)
    page = (english / "book" / "01-page.html").read_text(encoding="utf-8")
    for word in ("Search this book...", "Launch on Colab", "Open issue", "Toggle primary sidebar"):
        assert word in page, word
    assert _issue_title(page) == "Issue on page /book/01-page.html"

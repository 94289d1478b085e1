"""The Chinese edition: catalogues that follow the English prose, a zh/ book with the English code,
and a change to an English paragraph that the translator is shown."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder import i18n
from autograder.notebooks import REPO_ROOT, convention_problems, dumps_normalized, read_notebook

ROOT = REPO_ROOT
CHAPTER = """# A chapter

[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](COLAB)

The {term}`mask` decides which keys a query sees: $p = \\operatorname{softmax}(s)$.

```python
x = 1

y = 2
```

$$
a = b

c = d
$$

- one item
- two items"""


def _mini_course(root: Path) -> Path:
    """A course of two pages (a Markdown intro, a notebook chapter) in the layout of the real one."""
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nparts:\n  - caption: Chapters\n"
                                   "    chapters:\n      - file: book/ch\n", encoding="utf-8")
    (root / "book").mkdir()
    (root / "book" / "intro.md").write_text("# Intro\n\nWelcome to the course.\n", encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    colab = "https://colab.research.google.com/github/transformer-course/transformer-core-mechanisms/blob/main/book/ch.ipynb"
    nb.cells = [nbformat.v4.new_markdown_cell(CHAPTER.replace("COLAB", colab)),
                nbformat.v4.new_code_cell("print('the same code in both languages')  # a comment stays English"),
                nbformat.v4.new_markdown_cell("Second paragraph.\n\nThird paragraph.")]
    (root / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    return root


def _translate(root: Path, docname: str, table: dict[str, str]) -> None:
    path = i18n.catalogue_path(docname, root)
    catalog = i18n.read_catalogue(path)
    for message in catalog:
        if message.id in table:
            message.string = table[message.id]
            message.flags.discard("fuzzy")
    i18n.write_catalogue(catalog, path)


def test_blocks_never_cut_code_or_math_and_rejoin_to_the_text():
    parts = i18n.blocks(CHAPTER)
    assert "```python\nx = 1\n\ny = 2\n```" in parts and "$$\na = b\n\nc = d\n$$" in parts
    assert "- one item\n- two items" in parts
    assert "\n\n".join(parts) == CHAPTER


def test_only_prose_is_a_message():
    messages = i18n.messages([CHAPTER])
    assert "# A chapter" in messages and "- one item\n- two items" in messages
    assert not any(m.startswith(("```", "$$", "[![")) for m in messages), "code, math and the badge are not prose"


def test_a_changed_english_paragraph_shows_up_fuzzy_with_the_old_text(tmp_path):
    root = _mini_course(tmp_path)
    counts = i18n.update(root)
    assert counts["book/ch"] == {"translated": 0, "fuzzy": 0, "untranslated": 5}
    _translate(root, "book/ch", {"Second paragraph.": "第二段。", "Third paragraph.": "第三段。"})
    nb = read_notebook(root / "book" / "ch.ipynb")
    nb.cells[2].source = "Second paragraph, now longer.\n\nCompletely unrelated words about caches."
    (root / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    counts = i18n.update(root)["book/ch"]
    assert counts == {"translated": 0, "fuzzy": 1, "untranslated": 4}     # "Third paragraph." is gone
    [stale] = i18n.stale_entries("book/ch", root)
    assert stale == {"now": "Second paragraph, now longer.", "was": "Second paragraph.", "translation": "第二段。"}
    assert "1 outdated (fuzzy)" in "\n".join(i18n.problems(root))
    assert "第二段" not in i18n.rendered(root)[root / "zh" / "book" / "ch.ipynb"], "a fuzzy translation is not used"


def test_the_chinese_book_keeps_the_code_and_points_colab_at_itself(tmp_path):
    root = _mini_course(tmp_path)
    i18n.update(root)
    _translate(root, "book/ch", {"# A chapter": "# 一章",
                                 "The {term}`mask` decides which keys a query sees: $p = \\operatorname{softmax}(s)$.":
                                     "{term}`掩码 <mask>` 决定查询能看到哪些键：$p = \\operatorname{softmax}(s)$。"})
    i18n.build(root)
    chinese = read_notebook(root / "zh" / "book" / "ch.ipynb")
    english = read_notebook(root / "book" / "ch.ipynb")
    assert [c.source for c in chinese.cells if c.cell_type == "code"] == [
        c.source for c in english.cells if c.cell_type == "code"]
    assert chinese.cells[0].source.startswith("# 一章") and "决定查询" in chinese.cells[0].source
    assert "```python\nx = 1\n\ny = 2\n```" in chinese.cells[0].source
    assert "/blob/main/zh/book/ch.ipynb" in chinese.cells[0].source
    assert "Welcome to the course." in (root / "zh" / "book" / "intro.md").read_text(), "untranslated stays English"
    assert i18n.stale_outputs(root) == [] and i18n.code_cells_match(root) == []
    nb = read_notebook(root / "zh" / "book" / "ch.ipynb")
    nb.cells[1].source = "print('edited')"
    (root / "zh" / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    assert i18n.code_cells_match(root) and i18n.stale_outputs(root), "a hand edit of zh/ is caught"


def test_a_translation_that_drops_markup_is_reported(tmp_path):
    root = _mini_course(tmp_path)
    i18n.update(root)
    _translate(root, "book/ch", {"The {term}`mask` decides which keys a query sees: $p = \\operatorname{softmax}(s)$.":
                                 "掩码决定查询能看到哪些键。"})
    report = "\n".join(i18n.markup_report("book/ch", root))
    assert "role: missing {term}`mask`" in report and "math: missing" in report


def test_the_generated_site_files_reach_back_to_the_shared_ones():
    config = __import__("yaml").safe_load(i18n.rendered(ROOT)[ROOT / "zh" / "_config.yml"])
    assert config["sphinx"]["config"]["language"] == "zh_CN"
    assert config["bibtex_bibfiles"] == ["../book/references.bib"]
    assert config["sphinx"]["config"]["html_static_path"] == ["../book/_static"]
    assert "language-switch.js" in config["sphinx"]["config"]["html_js_files"]


# --- the real course ------------------------------------------------------------------------------


def test_zh_is_what_the_catalogues_and_the_english_pages_make():
    stale = [p.relative_to(ROOT).as_posix() for p in i18n.stale_outputs(ROOT)]
    assert not stale, f"zh/ is out of date: run `python -m autograder i18n build` ({stale[:5]})"


def test_catalogues_hold_every_english_paragraph():
    """Run against a copy, so that a missing paragraph fails here instead of being added quietly."""
    expected = {page.docname: set(i18n.messages(i18n.page_texts(page))) for page in i18n.pages(ROOT)}
    for docname, msgids in expected.items():
        path = i18n.catalogue_path(docname, ROOT)
        assert path.exists(), f"{path.relative_to(ROOT)} is missing: run `python -m autograder i18n update`"
        held = {m.id for m in i18n.read_catalogue(path) if m.id}
        assert msgids <= held, (f"{path.relative_to(ROOT)} lacks {len(msgids - held)} English paragraphs: run "
                                f"`python -m autograder i18n update`")


def test_every_english_paragraph_has_a_translation_that_is_not_outdated():
    """A changed English paragraph turns its translation fuzzy (``make translations``): this fails
    until the translator has brought it up to date, and says which page."""
    counts = {doc: c for doc, c in i18n.status(ROOT).items() if c["untranslated"] or c["fuzzy"]}
    assert not counts, ("paragraphs to translate (untranslated, fuzzy): "
                        + ", ".join(f"{doc} ({c['untranslated']}, {c['fuzzy']})" for doc, c in counts.items()))


def test_every_translation_keeps_its_markup_and_every_chinese_notebook_its_code():
    problems = [p for p in i18n.problems(ROOT, complete=False)]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("path", sorted((ROOT / "zh").rglob("*.ipynb")), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_chinese_notebooks_open_their_own_colab_page(path):
    problems = convention_problems(path, ROOT)
    assert not problems, "; ".join(problems)

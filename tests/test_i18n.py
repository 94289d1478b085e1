"""The Chinese edition: catalogues that follow the English prose, a zh/ book with the English code,
and a change to an English paragraph that the translator is shown."""

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.course.i18n import (catalogues, docstring_text, edition, extract, reader_checks, runtime_text,
                                    typesetting)
from autograder.course.notebooks import convention_problems, dumps_normalized

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
                nbformat.v4.new_code_cell("print('the same code in both languages')  # a comment, a message of its own"),
                nbformat.v4.new_markdown_cell("Second paragraph.\n\nThird paragraph.")]
    (root / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    return root


def _translate(root: Path, docname: str, table: dict[str, str]) -> None:
    path = catalogues.catalogue_path(docname, root)
    catalog = catalogues.read_catalogue(path)
    for message in catalog:
        if message.id in table:
            message.string = table[message.id]
            message.flags.discard("fuzzy")
    catalogues.write_catalogue(catalog, path)


def test_blocks_never_cut_code_or_math_and_rejoin_to_the_text():
    parts = extract.blocks(CHAPTER)
    assert "```python\nx = 1\n\ny = 2\n```" in parts and "$$\na = b\n\nc = d\n$$" in parts
    assert "- one item\n- two items" in parts
    assert "\n\n".join(parts) == CHAPTER


def test_only_prose_is_a_message():
    messages = extract.messages([CHAPTER])
    assert "# A chapter" in messages and "- one item\n- two items" in messages
    assert not any(m.startswith(("```", "$$", "[![")) for m in messages), "code, math and the badge are not prose"


def test_a_changed_english_paragraph_shows_up_fuzzy_with_the_old_text(tmp_path):
    root = _mini_course(tmp_path)
    counts = edition.update(root)
    assert counts["book/ch"] == {"translated": 0, "fuzzy": 0, "untranslated": 6}
    _translate(root, "book/ch", {"Second paragraph.": "第二段。", "Third paragraph.": "第三段。"})
    nb = read_notebook(root / "book" / "ch.ipynb")
    nb.cells[2].source = "Second paragraph, now longer.\n\nCompletely unrelated words about caches."
    (root / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    counts = edition.update(root)["book/ch"]
    assert counts == {"translated": 0, "fuzzy": 1, "untranslated": 5}     # "Third paragraph." is gone
    [stale] = edition.stale_entries("book/ch", root)
    assert stale == {"now": "Second paragraph, now longer.", "was": "Second paragraph.", "translation": "第二段。"}
    assert "1 outdated (fuzzy)" in "\n".join(edition.problems(root))
    zh_page = edition.rendered(root)[root / "zh" / "book" / "ch.ipynb"]
    assert "第二段" not in zh_page, "a fuzzy translation is not used"


def test_the_chinese_book_keeps_the_code_and_points_colab_at_itself(tmp_path):
    root = _mini_course(tmp_path)
    edition.update(root)
    _translate(root, "book/ch", {"# A chapter": "# 一章",
                                 "The {term}`mask` decides which keys a query sees: $p = \\operatorname{softmax}(s)$.":
                                     "{term}`掩码 <mask>` 决定查询能看到哪些键：$p = \\operatorname{softmax}(s)$。"})
    edition.build(root)
    chinese = read_notebook(root / "zh" / "book" / "ch.ipynb")
    english = read_notebook(root / "book" / "ch.ipynb")
    assert [c.source for c in chinese.cells if c.cell_type == "code"] == [
        c.source for c in english.cells if c.cell_type == "code"]
    assert chinese.cells[0].source.startswith("# 一章") and "决定查询" in chinese.cells[0].source
    assert "```python\nx = 1\n\ny = 2\n```" in chinese.cells[0].source
    assert "/blob/main/zh/book/ch.ipynb" in chinese.cells[0].source
    assert "Welcome to the course." in (root / "zh" / "book" / "intro.md").read_text(), "untranslated stays English"
    assert edition.stale_outputs(root) == [] and edition.code_cells_match(root) == []
    nb = read_notebook(root / "zh" / "book" / "ch.ipynb")
    nb.cells[1].source = "print('edited')"
    (root / "zh" / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    assert edition.code_cells_match(root) and edition.stale_outputs(root), "a hand edit of zh/ is caught"


def test_a_translation_that_drops_markup_is_reported(tmp_path):
    root = _mini_course(tmp_path)
    edition.update(root)
    _translate(root, "book/ch", {"The {term}`mask` decides which keys a query sees: $p = \\operatorname{softmax}(s)$.":
                                 "掩码决定查询能看到哪些键。"})
    report = "\n".join(edition.markup_report("book/ch", root))
    assert "role: missing {term}`mask`" in report and "math: missing" in report


def test_bold_that_the_page_would_show_as_asterisks_is_reported(tmp_path):
    """Issue 29: MyST's CommonMark rules open no bold between a Chinese character and a role or punctuation,
    so the built page showed ``它改用**`` before a glossary link; the check parses as MyST does, both ways."""
    found = reader_checks.literal_emphasis
    assert len(found("它改用**{term}`掩码语言模型 <masked language model>`**目标来训练。")) == 2
    assert len(found("**当 DDP 不够用时。**DDP 在每个进程中") + found("{term}`**温度** <temperature>`")) == 2
    assert len(found("x__y__z") + found("一**二")) == 2
    assert not found("它改用{term}`掩码语言模型 <masked language model>`目标来训练。**当 DDP 不够用时**。DDP 在")
    assert not found("It trains with the **{term}`masked language model`** objective, **bold**, `a**b`, {math}`a**b` and $x**2$.\n\n"
                     "```python\ny = x**2\n```")
    root = _mini_course(tmp_path)
    edition.update(root)
    block = "The {term}`mask` decides which keys a query sees: $p = \\operatorname{softmax}(s)$."
    _translate(root, "book/ch", {block: "**{term}`掩码 <mask>`**决定查询能看到哪些键：$p = \\operatorname{softmax}(s)$。"})
    report = edition.markup_report("book/ch", root)
    assert len(report) == 1 and report[0].count("** or __ shown as text") == 2
    _translate(root, "book/ch", {block: "{term}`掩码 <mask>`决定查询能看到**哪些键**：$p = \\operatorname{softmax}(s)$。"})
    assert edition.markup_report("book/ch", root) == []


def test_the_generated_site_files_reach_back_to_the_shared_ones():
    config = __import__("yaml").safe_load(edition.rendered(ROOT)[ROOT / "zh" / "_config.yml"])
    assert config["sphinx"]["config"]["language"] == "zh_CN"
    assert config["bibtex_bibfiles"] == ["../book/references.bib"]
    assert config["sphinx"]["config"]["html_static_path"] == ["../book/_static"]
    assert "language-switch.js" in config["sphinx"]["config"]["html_js_files"]


# --- the real course ------------------------------------------------------------------------------


def test_zh_is_what_the_catalogues_and_the_english_pages_make():
    stale = [p.relative_to(ROOT).as_posix() for p in edition.stale_outputs(ROOT)]
    assert not stale, f"zh/ is out of date: run `python -m autograder i18n build` ({stale[:5]})"


def test_catalogues_hold_every_english_paragraph():
    """Run against a copy, so that a missing paragraph fails here instead of being added quietly."""
    expected = {page.docname: set(extract.messages(extract.page_texts(page))) for page in extract.pages(ROOT)}
    for docname, msgids in expected.items():
        path = catalogues.catalogue_path(docname, ROOT)
        assert path.exists(), f"{path.relative_to(ROOT)} is missing: run `python -m autograder i18n update`"
        held = {m.id for m in catalogues.read_catalogue(path) if m.id}
        assert msgids <= held, (f"{path.relative_to(ROOT)} lacks {len(msgids - held)} English paragraphs: run "
                                f"`python -m autograder i18n update`")


def test_every_english_paragraph_has_a_translation_that_is_not_outdated():
    """A changed English paragraph turns its translation fuzzy (``make translations``): this fails
    until the translator has brought it up to date, and says which page."""
    counts = {doc: c for doc, c in edition.status(ROOT).items() if c["untranslated"] or c["fuzzy"]}
    assert not counts, ("paragraphs to translate (untranslated, fuzzy): "
                        + ", ".join(f"{doc} ({c['untranslated']}, {c['fuzzy']})" for doc, c in counts.items()))


def test_every_translation_keeps_its_markup_and_every_chinese_notebook_its_code():
    problems = [p for p in edition.problems(ROOT, complete=False)]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("path", sorted((ROOT / "zh").rglob("*.ipynb")), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_chinese_notebooks_open_their_own_colab_page(path):
    problems = convention_problems(path, ROOT)
    assert not problems, "; ".join(problems)


# --- Every prose element, figures, messages, typesetting, terms (issue 23) -------------------------


def test_review_answers_in_directives_are_messages():
    """An ``{admonition}`` fence holds prose (a review answer), unlike a code fence."""
    answer = "```{admonition} Answer\n:class: dropdown\nNothing changes: the output is the same.\n```"
    assert extract.messages([f"1. A question?\n\n{answer}\n\n```python\nx = 1\n```"]) == ["1. A question?", answer]


def test_phrases_in_formulas_are_messages_and_names_are_not(tmp_path):
    root = _mini_course(tmp_path)
    nb = read_notebook(root / "book" / "ch.ipynb")
    nb.cells[2].source = ("Size:\n\n$$\n\\text{cache bytes} = 2 \\times n_\\text{layers} \\times \\text{batch} "
                          "\\times \\text{NaN}\n$$")
    (root / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    edition.update(root)
    path = catalogues.catalogue_path("book/ch", root)
    math = {m.id for m in catalogues.read_catalogue(path) if m.context == typesetting.MATH_CONTEXT}
    assert math == {"cache bytes", "batch"}, "subscripts (n_\\text{layers}) and abbreviations (NaN) are names"
    catalog = catalogues.read_catalogue(path)
    for message in catalog:
        if message.context == typesetting.MATH_CONTEXT:
            message.string = {"cache bytes": "缓存字节数", "batch": "批次大小"}[message.id]
    catalogues.write_catalogue(catalog, path)
    page = edition.rendered(root)[root / "zh" / "book" / "ch.ipynb"]
    assert "\\\\text{缓存字节数}" in page and "n_\\\\text{layers}" in page and "\\\\text{NaN}" in page


def test_line_breaks_between_chinese_characters_are_joined_but_not_in_code_or_math():
    text = "即一个\n**仅解码器模型**，在 CPU\n上运行，\n也能训练。\n\n```python\n# 中文\n# 注释\n```\n\n$$\n\\text{中}\n\\text{文}\n$$"
    joined = typesetting.join_cjk_lines(text)
    assert joined.startswith("即一个**仅解码器模型**，在 CPU\n上运行，也能训练。")
    assert "# 中文\n# 注释" in joined and "\\text{中}\n\\text{文}" in joined


def test_line_breaks_beside_full_width_punctuation_are_joined_whatever_is_on_the_other_side():
    """Issue 29: a break after ；，、： before code, math or a Latin word, or before （ after a role, showed
    as a space on the built pages; a break that opens a list item or ends a directive's title stays."""
    cases = {
        "AVX512-BF16 或 AMX；\n`course_runtime` 会": "AVX512-BF16 或 AMX；`course_runtime` 会",
        "{cite:p}`xiong2020layer`\n（第 5 章）": "{cite:p}`xiong2020layer`（第 5 章）",
        "每层需要 $2Td$ FLOPs，  \n  $L$ 层共": "每层需要 $2Td$ FLOPs，$L$ 层共",
        "（即**句子嵌入**）：\n6 个": "（即**句子嵌入**）：6 个",
        "**为什么吃力。**\nLSTM 的": "**为什么吃力。**LSTM 的",
        "如下：\n- 一\n1. 二": "如下：\n- 一\n1. 二",
        "隐藏它。\n\n**当 DDP 不够用时。**": "隐藏它。\n\n**当 DDP 不够用时。**",
        "```{note} 注意：\n内容": "```{note} 注意：\n内容",
        ":::{tip}\n（括号）": ":::{tip}\n（括号）",
        "在 CPU\n上运行": "在 CPU\n上运行",
    }
    for text, joined in cases.items():
        assert typesetting.join_cjk_lines(text) == joined, text


def test_no_built_chinese_page_breaks_a_line_beside_full_width_punctuation():
    """The built pages' Markdown has no line break beside full-width punctuation inside a paragraph
    (outside code and display math), so no such space can come back from a catalogue's wrapped lines."""
    beside = re.compile(rf"[{typesetting.FULLWIDTH_PUNCT}][*_]*[ \t]*\n[ \t]*(?![-*+][ \t]|\d+[.)][ \t]|[#>|:<]|`{{3}}|~{{3}}|\$\$|\n|$)\S"
                        rf"|[^\s:~|][ \t]*\n[ \t]*[*_]*[{typesetting.FULLWIDTH_PUNCT}]")
    found = []
    for path in sorted((ROOT / "zh").rglob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            prose = re.sub(r"(`{3,}|~{3,}).*?\1|\$\$.*?\$\$", " ", "".join(cell["source"]), flags=re.DOTALL)
            found += [f"{path.relative_to(ROOT)}: …{prose[m.start() - 8:m.end() + 8]!r}…" for m in beside.finditer(prose)]
    assert not found, "\n".join(found[:20])


def test_a_phrase_in_a_subscript_is_translated_and_a_full_width_parenthesis_closes_in_full_width():
    """Issue 29: \\sum_{\\text{parameters } p} (ch10) and \\underbrace{...}_{\\text{projections, FFN, head: per
    token}} (ch08) stayed English, as a subscript's \\text was taken for a name; \\text{(因为 }...\\text{)} (ch01)
    put half-width parentheses around Chinese."""
    formula = r"$$\sum_{\text{parameters } p} x_p + d_\text{model} \quad \text{(because } f(a)\text{)}$$"
    assert typesetting.math_phrases(formula) == ["parameters", "(because"]
    assert typesetting.translate_math(formula, {"parameters": "所有参数", "(because": "（因为"}) == (
        r"$$\sum_{\text{所有参数 } p} x_p + d_\text{model} \quad \text{（因为 } f(a)\text{）}$$")
    assert typesetting.translate_math(r"$\text{(because } f(a)\text{)}$", {"(because": "(因为"}).endswith(r"\text{)}$")


def test_every_english_phrase_left_in_a_chinese_formula_is_one_its_catalogue_keeps():
    """A formula's phrase on a Chinese page is Chinese, or its catalogue copies it on purpose (msgstr = msgid)."""
    left = []
    for page in extract.pages(ROOT):
        built = ROOT / "zh" / page.path.relative_to(ROOT)
        if not built.exists():
            continue
        kept = {m.id for m in catalogues.read_catalogue(catalogues.catalogue_path(page.docname, ROOT))
                if m.context == typesetting.MATH_CONTEXT and m.string == m.id}
        text = built.read_text(encoding="utf-8")
        if built.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
        left += [f"{built.relative_to(ROOT)}: {phrase}" for phrase in typesetting.math_phrases(text)
                 if not re.search(f"[{typesetting.CJK}]", phrase) and phrase not in kept]
    assert not left, "\n".join(left)


def test_numbers_in_chinese_prose_have_no_thousands_separator():
    """locales/README.md: 中文排版不加千分位逗号 (the review found 2,000, 4,000 and 50,257 beside 37000);
    code and math keep their own form."""
    separated = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")
    found = []
    for path in sorted([*(ROOT / "zh").rglob("*.ipynb"), *(ROOT / "zh").rglob("*.md")]):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
        prose = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", " ", typesetting.strip_code(text), flags=re.DOTALL)
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in separated.finditer(prose)]
    assert not found, "\n".join(found)


def test_no_space_follows_full_width_punctuation_on_a_chinese_page():
    """Full-width punctuation carries its own spacing: 词元（token） `t` (ex04), 词元（token） $1..t$ (ch03)
    and ） {cite:p} (glossary) showed a gap. Table cells (｜) and arrows keep their spaces."""
    after = re.compile(r"[，。：；、（）“”！？《》] +(?=[\x00`$A-Za-z0-9{\u4e00-\u9fff])")
    found = []
    for path in sorted([*(ROOT / "zh").rglob("*.ipynb"), *(ROOT / "zh").rglob("*.md")]):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
        prose = typesetting.strip_code(text, hole="\x00")
        found += [f"{path.relative_to(ROOT)}: …{prose[max(0, m.start() - 6):m.end() + 6]}…" for m in after.finditer(prose)]
    assert not found, "\n".join(found)


def test_code_strings_become_messages_and_f_strings_patterns():
    code = ("ax.set_title(f'layer {layer}, head {h:.0f}')\nax.plot(x, label='train loss', color='C0')\n"
            "w = widgets.IntSlider(description='branch gain')\nax.legend(loc='upper left')\n")
    assert runtime_text.code_strings([code], figures=True) == [
        ("layer {layer}, head {h:.0f}", True), ("train loss", False), ("branch gain", False)]
    test = ("assert out.shape == (2, 3), f'expected {(2, 3)}, got {tuple(out.shape)}'\n"
            "check_close(y, ref, name='y', hint='divide by sqrt(d_k)')\n")
    assert runtime_text.code_strings([test], figures=False) == [
        ("expected {(2, 3)}, got {tuple(out.shape)}", True), ("divide by sqrt(d_k)", False)]


def test_the_labels_of_checks_are_messages_unless_they_are_code():
    """A check's ``name=`` label is shown inside its message ("`block output` has the wrong values"): a
    phrase is extracted for translation, whole where the test adds pieces, with the values it formats;
    a label that is code (``rope(x, {k})``) or a variable's name (``answer_q1``) is not, and neither is
    the ``name=`` of a call that is not a check."""
    code = ('check_close(y, ref, name="block output")\n'
            'check_shape(p, s, name=f"rope(x, {k})")\n'
            'check_close(a, b, name=f"the logits of {call}" + (" against GPT-2" if hf else ""))\n'
            'for kind in ["Pre-LN (first)", "Post-LN (last)"]:\n    check_close(y, r, name=f"{kind} output")\n'
            'check_answer(a, 1, name="answer_q1")\n'
            'module.register_buffer(name="not a label")\n'
            'testing.check_tensor(x, name="scores (batched)")\n'
            # one word: a word chosen for a phrase's value is taken (issue 29: "prefill" stayed English); a
            # label that is one word is the learner's variable, shown as code (`weights`), and is not
            'check_close(w, r, name="weights")\ncheck_shape(h, s, name="h_n")\ncheck_close(q, r, name="q")\n'
            'phase = "prefill" if start == 0 else f"the chunk at {start}"\ncheck_close(o, r, name=f"output of {phase}")\n'
            'for key in ["model", "optimizer"]:\n    check_close(c[key], r[key], name=key)\n')
    assert sorted(runtime_text.code_strings([code], figures=False)) == sorted([
        ("block output", False), ("the logits of {call} against GPT-2", True), ("the logits of {call}", True),
        (" against GPT-2", False), ("scores (batched)", False), ("{kind} output", True), ("Pre-LN (first)", False),
        ("Post-LN (last)", False), ("output of {phase}", True), ("the chunk at {start}", True),
        ("prefill", False)])


def test_the_graders_sentences_are_found_whole_and_the_instructors_errors_left_out():
    """A reason the grader writes by adding strings to values (``"no notebooks found (found " + names +
    ")"``) is one pattern, not two pieces that never match it; with ``instructor_errors``, the messages
    of ``raise UsageError(...)`` (``grade``'s command line) are left out, and without, they are the
    learner's (``validate``'s command line)."""
    source = ('def find(folder, names):\n'
              '    if not folder:\n        raise UsageError(f"no such folder: {folder}")\n'
              '    return "no notebooks found (found " + (", ".join(names) or "nothing") + ")"\n')
    found = runtime_text.grader_strings(source, instructor_errors=True)
    assert found == [("no notebooks found (found {', '.join(names) or 'nothing'})", True)]
    assert ("no such folder: {folder}", True) in runtime_text.grader_strings(source)


def test_a_chinese_learner_reads_a_checks_label_in_chinese():
    """The labels of the exercises' visible tests, as a learner's failing check shows them, come out
    Chinese inside the Chinese message (issue 29: they stayed English), a value the label formats
    translated in turn (exercise 05's ``{kind} block output``)."""
    import torch

    from course_runtime import testing
    from course_runtime.language import translate_message

    shown = [  # (the check as a visible test runs it, English words a Chinese reader may still see: code)
        (lambda name: testing.check_close(torch.zeros(2), torch.ones(2), name=name, atol=1e-6, rtol=0),
         "the parameters after 3 steps, a checkpoint and 4 more steps", set()),
        (lambda name: testing.check_close(torch.zeros(2), torch.ones(2), name=name),
         "all parameters after one accumulated step (4 slices, clip=1.0)", {"clip"}),
        (lambda name: testing.check_close(torch.zeros(2), torch.ones(2), name=name),
         "Pre-LN (norm_first=True) block output", {"Pre", "LN", "norm_first", "True"}),
        (lambda name: testing.check_close(torch.zeros(2), torch.ones(2), name=name),
         "output (q (2, 3, 8), k (2, 5, 8), block_size=2)", {"block_size"}),
        (lambda name: testing.check_shape(torch.zeros(3, 4), (3, 8), name=name), "the sentence embeddings", set()),
        (lambda name: testing.check_tensor(torch.zeros(2), name=name, dtype=torch.float64),
         "rope(q, positions) for float64 q", {"rope", "positions", "float64"}),
        (lambda name: testing.check_close(torch.zeros(2), torch.ones(2), name=name), "output of prefill", set()),
        (lambda name: testing.check_close(torch.zeros(2), torch.ones(2), name=name),
         "output of the chunk at positions 3..5", set()),
    ]
    for check, label, code in shown:
        with pytest.raises(AssertionError) as raised:
            check(label)
        message = translate_message(str(raised.value), "zh_CN")
        chinese_label = message.split("`")[1]
        assert re.search(r"[\u4e00-\u9fff]", chinese_label), message
        assert set(re.findall(r"[A-Za-z][\w]*", chinese_label)) <= code | {"q", "k"}, message
        assert not _english_sentences(message), message


def test_a_name_in_backticks_stays_the_learners_name_and_prose_around_it_is_translated():
    """A check labelled with one word shows it as code, `weights`: the learner's variable, which the
    Chinese message keeps as written (issue 29: it read `注意力权重`), whatever the catalogue holds for
    that word elsewhere; a label that is a phrase is prose and is translated, and a word outside
    backticks is looked up as before."""
    import torch

    from course_runtime import testing
    from course_runtime.language import Catalogue, Entry, translate_message

    for name in ("weights", "scores", "output", "logits", "labels", "norms", "entropy", "table", "h_n"):
        with pytest.raises(AssertionError) as raised:
            testing.check_close(torch.zeros(2), torch.ones(2), name=name)
        message = translate_message(str(raised.value), "zh_CN")
        assert message.startswith(f"`{name}` ") and re.search(r"[\u4e00-\u9fff]", message), message
        assert not _english_sentences(message), message
    table = Catalogue([Entry("weights", "注意力权重"), Entry("`{name}` is wrong", "`{name}` 不对", flags={"course-pattern"}),
                       Entry("the {name} are wrong", "{name}不对", flags={"course-pattern"}),
                       Entry("output of {phase}", "{phase}的输出", flags={"course-pattern"}),
                       Entry("prefill", "预填充")])
    assert table.lookup("`weights` is wrong") == "`weights` 不对"
    assert table.lookup("`output of prefill` is wrong") == "`预填充的输出` 不对"
    assert table.lookup("the weights are wrong") == "注意力权重不对"


def test_of_two_patterns_that_match_a_label_the_one_that_translates_it_wins():
    """Exercise 08's label "output of the chunk at positions 3..5" matches ``"output of {phase}"`` and
    exercise 12's longer ``"{call} at positions {...}"``; the longer one left "the chunk" English (issue
    29). A reading whose values all translate, or are numbers and code, wins over a longer pattern; the
    exact entry comes first; and where both readings translate, the more specific pattern still wins."""
    from course_runtime.language import catalogue, english_letters, translate

    def zh(text):
        return translate(text, "messages", "zh_CN")

    table = catalogue("messages", "zh_CN")
    for label, patterns in (("output of the chunk at positions 3..5", 2),
                            ("rope of a (2, 4, 8) input at positions [0, 1]", 2),
                            ("the logits of GPT(...)(idx of shape (2, 5)) against Hugging Face's GPT-2", 2),
                            ("Pre-LN (first) decoder block output", 2)):
        assert sum(regex.fullmatch(label) is not None for regex, _, _ in table.patterns) >= patterns, label
    chunk = zh("the chunk at positions 3..5")
    assert re.search(r"[\u4e00-\u9fff]", chunk) and "chunk" not in chunk, chunk
    # the template's space beside an English value is dropped between two Chinese characters
    assert zh("output of the chunk at positions 3..5") == re.sub(r"\{phase\} ?", chunk, zh("output of {phase}"))
    assert zh("rope of a (2, 4, 8) input at positions [0, 1]") == (
        zh("rope of a {tuple(shape)} input at positions {positions.tolist()}")
        .replace("{tuple(shape)}", "(2, 4, 8)").replace("{positions.tolist()}", "[0, 1]"))
    assert zh("the logits of GPT(...)(idx of shape (2, 5)) against Hugging Face's GPT-2") == (
        zh("the logits of {call} against Hugging Face's GPT-2").replace("{call}", "GPT(...)(idx of shape (2, 5))"))
    assert zh("Pre-LN (first) decoder block output") == zh("{kind} decoder block output").replace(
        "{kind}", zh("Pre-LN (first)"))
    # exercise 12's own label still reads through its pattern, the call (code) kept as it is
    assert zh("rope(x, positions, theta=10.0) at positions [0, 1]") == zh(
        "{call} at positions {positions.tolist()}").replace("{call}", "rope(x, positions, theta=10.0)").replace(
        "{positions.tolist()}", "[0, 1]")
    assert (english_letters("the chunk"), english_letters("3..5"), english_letters("`a b` q_proj x.view(")) == (8, 0, 0)


def test_chinese_formulas_write_numbers_without_thousands_separators():
    """Chinese writes 63082496: the English formulas' ``63{,}082{,}496`` loses its separators on the way into
    the Chinese pages (the fourteenth reviews), while the catalogues keep each formula as the English has it."""
    from autograder.course.i18n.typesetting import translate_math

    assert translate_math(r"$N = 10{,}000{,}000$ and $\{a,b\}$, $f(1{,}2)$", {}) == r"$N = 10000000$ and $\{a,b\}$, $f(1{,}2)$"
    english = [p for p in (ROOT / "book").glob("*.ipynb") if "{,}" in p.read_text(encoding="utf-8")]
    assert english, "no English chapter uses a thousands separator any more: this test checks nothing"
    left = [p.relative_to(ROOT).as_posix() for p in (ROOT / "zh").rglob("*.ipynb")
            if re.search(r"\d\{,\}\d", p.read_text(encoding="utf-8"))]
    assert not left, f"Chinese pages with a thousands separator in a formula: {left}"


def test_a_value_keeps_its_brackets_when_a_comma_follows_it():
    """A placeholder takes the shortest text before the words after it, so a shape ``(2, 5)`` followed by
    ``", {n}"`` was cut at its own comma: exercise 11's label read "generate_greedy(model, prompt, 5)、6, ...
    prompt 的形状为 (2）" (issue 29). A reading whose values keep their brackets paired is taken where
    one exists; a value with an unpaired bracket still reads as before."""
    from course_runtime.language import Catalogue, Entry, PATTERN_FLAG

    table = Catalogue([Entry("f(x of shape {shape}, {n}, flag={flag})", "f(x, {n}, flag={flag})（x 的形状为 {shape}）",
                             flags={PATTERN_FLAG})])
    assert table.lookup("f(x of shape (2, 5), 6, flag=True)") == "f(x, 6, flag=True)（x 的形状为 (2, 5)）"
    assert table.lookup("f(x of shape [[1, 2], (3, 4)], 6, flag=True)") == (
        "f(x, 6, flag=True)（x 的形状为 [[1, 2], (3, 4)]）")
    assert table.lookup("f(x of shape (2, 6, flag=True)") == "f(x, 6, flag=True)（x 的形状为 (2）"     # unpaired
    zh = __import__("course_runtime.language", fromlist=["translate"]).translate
    said = zh("generate_greedy(your model, prompt of shape (2, 5), 6, use_cache=True)", "messages", "zh_CN")
    assert "(2, 5)" in said and "5)、" not in said, said


def test_a_message_that_ends_in_an_optional_hint_reads_with_and_without_it():
    """``f"... expected {want}{hint}"``: with no hint the last placeholder is empty, and with one nothing
    marks where ``want`` ends. The message stayed English without a hint whenever ``want`` was one
    character, and with a hint the first reading cut ``512`` after ``5`` and left the hint English
    (exercise 01's layers_to_connect, found in round 15 of issue 29)."""
    from course_runtime.language import PATTERN_FLAG, Catalogue, Entry, translate_message

    table = Catalogue([Entry("f() returned {got}, expected {want}{hint}", "f() 返回了 {got}，应为 {want}{hint}",
                             flags={PATTERN_FLAG}), Entry(": each layer adds one", "：每层只加一个")])
    assert table.lookup("f() returned 1, expected 5") == "f() 返回了 1，应为 5"
    assert table.lookup("f() returned 1, expected 512") == "f() 返回了 1，应为 512"
    assert table.lookup("f() returned 1, expected 512: each layer adds one") == "f() 返回了 1，应为 512：每层只加一个"
    assert table.lookup("f() returned 1, expected 512: a hint it does not know") == (
        "f() 返回了 1，应为 512: a hint it does not know")
    for message in ("layers_to_connect(100, 3, dilated=False) returned 12, expected 5",
                    "layers_to_connect(1024, 3, dilated=False) returned 342, expected 512: each layer adds k - 1 "
                    "positions, so you need ceil((n - 1) / (k - 1)) layers, not ceil(n / k)"):
        said = translate_message(message, "zh_CN")
        assert "expected" not in said and "each layer" not in said and re.search(r"[\u4e00-\u9fff]", said), said
    # a hint sentence added after a pattern that ends in a placeholder ("... is {norm}." + " Return ..."): the
    # last placeholder took it in, and it stayed English; read sentence by sentence, both sentences translate
    said = translate_message("clip_gradients returned the norm 1; the global norm before clipping is 3.2. "
                             "Return the norm measured before you rescale.", "zh_CN")
    assert said == (translate_message("clip_gradients returned the norm 1; the global norm before clipping is 3.2.",
                                      "zh_CN") + translate_message("Return the norm measured before you rescale.",
                                                                   "zh_CN")), said
    assert "Return" not in said
    # and a hint joined with a colon after a pattern's last placeholder (exercise 07's beam_search)
    head = translate_message("expected 4 generated tokens, got 8", "zh_CN")
    said = translate_message("expected 4 generated tokens, got 8: return the generated tokens without the prompt", "zh_CN")
    assert said.startswith(head.rstrip("。")) and "return" not in said and said.endswith("。"), said
    # a hint joined by its leading space is not a right-aligned table cell: no run of spaces before it
    said = translate_message("beam_search(beam_size=3, n_steps=4) returned [5, 6, 7] with score -3.2000; expected "
                             "[5, 6, 8] with score -3.1000. Score a sequence by the SUM of the log-probabilities of "
                             "all its generated tokens. Hint: keep the best candidates over ALL beams together, not "
                             "the best tokens of each beam.", "zh_CN")
    assert "  " not in said and "。提示：" in said and "Hint" not in said, said


def test_update_flags_a_new_f_string_as_a_pattern(tmp_path, monkeypatch):
    """An f-string's entry is flagged ``course-pattern`` by the ``i18n update`` that adds it (the flag
    was lost on a new entry, so its placeholders matched nothing until a second update)."""
    strings = {"figures": [], "messages": [("old sentence", False), ("after {n} steps", True)]}
    monkeypatch.setattr(runtime_text, "runtime_messages", lambda root: strings)
    path = runtime_text.runtime_catalogue_path("messages", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('msgid ""\nmsgstr ""\n\nmsgid "old sentence"\nmsgstr "旧句子"\n', encoding="utf-8")
    runtime_text.update_runtime(tmp_path)
    flags = {m.id: m.flags for m in catalogues.read_catalogue(path) if m.id}
    assert runtime_text.PATTERN_FLAG in flags["after {n} steps"] and runtime_text.PATTERN_FLAG not in flags["old sentence"]


def test_a_chinese_message_keeps_the_values_and_english_is_unchanged(tmp_path, monkeypatch):
    from course_runtime import language

    po = tmp_path / "zh_CN" / "LC_MESSAGES" / "messages.po"
    po.parent.mkdir(parents=True)
    po.write_text('msgid ""\nmsgstr ""\n\n#, course-pattern\nmsgid "`{name}` differs at index {i}: you returned {a}, '
                  'expected {e}."\nmsgstr "`{name}` 在索引 {i} 处不同：你的结果是 {a}，应为 {e}。"\n\n'
                  'msgid "you forgot to divide by sqrt(d_k)."\nmsgstr "你忘了除以 sqrt(d_k)。"\n', encoding="utf-8")
    monkeypatch.setattr(language, "CATALOGUE_DIR", tmp_path)
    language.catalogue.cache_clear()
    english = "`scores` differs at index (0, 1): you returned 2, expected 1.\nHint: you forgot to divide by sqrt(d_k)."
    try:
        assert language.translate_message(english, "zh_CN") == (
            "`scores` 在索引 (0, 1) 处不同：你的结果是 2，应为 1。\n提示：你忘了除以 sqrt(d_k)。")
        assert language.translate_message(english, "en") == english
        assert language.translate_message("An unknown sentence. Hint: x", "zh") == "An unknown sentence. Hint: x"
    finally:
        language.catalogue.cache_clear()


def test_a_notebook_knows_its_language():
    from course_runtime import language

    chinese = read_notebook(sorted((ROOT / "zh" / "exercises").rglob("*.ipynb"))[0])
    english = read_notebook(sorted((ROOT / "exercises").rglob("*.ipynb"))[0])
    assert language.notebook_language(chinese) == "zh_CN" and language.notebook_language(english) == "en"
    with pytest.raises(ValueError, match="no language 'fr'"):
        language.normalize_language("fr")


def test_figures_are_drawn_in_chinese_with_the_same_code(tmp_path, monkeypatch):
    """The kernel hook translates a figure's texts while it is drawn, and leaves them as the code set them."""
    from course_runtime import language

    import sys
    sys.path.insert(0, str(ROOT / "site"))
    import fetch_assets

    fetched = fetch_assets.cjk_font()
    if fetched.is_file():
        monkeypatch.setenv(language.ENV_FONT, str(fetched))
    if language.cjk_font() is None:
        pytest.skip("no CJK font: `python site/fetch_assets.py` fetches the one the book build uses")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv(language.ENV_LANGUAGE, "zh_CN")
    assert "figures" in language.install()
    fig, ax = plt.subplots()
    ax.plot([0, 1], label="train loss")
    ax.set_xlabel("step")
    ax.legend()
    seen = []
    fig.canvas.mpl_connect("draw_event", lambda event: seen.extend(t.get_text() for t in fig.findobj(
        matplotlib.text.Text) if t.get_text()))
    fig.savefig(tmp_path / "zh.png")
    plt.close(fig)
    assert "训练损失" in seen and "步数" in seen, seen
    assert ax.get_xlabel() == "step", "the code reads back what it set"


def test_every_string_the_code_shows_has_a_translation():
    counts = runtime_text.runtime_status(ROOT)
    figures = counts["course_runtime/figures"]
    assert not figures["untranslated"] and not figures["fuzzy"], (
        f"course_runtime/locales/zh_CN/LC_MESSAGES/figures.po: {figures['untranslated']} untranslated, "
        f"{figures['fuzzy']} outdated figure strings")


def test_the_runtime_catalogues_are_in_step_with_the_code():
    """A hand-written entry for a module the extractor does not read is dropped by the next
    ``i18n update`` (this happened to the kernel-stop reasons twice): none may exist, and nothing the
    code shows may be missing."""
    assert runtime_text.runtime_drift(ROOT) == []


def test_runtime_drift_names_what_update_would_drop_and_add(tmp_path, monkeypatch):
    strings = {"figures": [], "messages": [("the code says this", False)]}
    monkeypatch.setattr(runtime_text, "runtime_messages", lambda root: strings)
    path = runtime_text.runtime_catalogue_path("messages", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('msgid ""\nmsgstr ""\n\nmsgid "a sentence only a hand wrote"\nmsgstr "手写的句子"\n',
                    encoding="utf-8")
    drift = runtime_text.runtime_drift(tmp_path)
    assert len(drift) == 2
    assert "1 strings the code shows are missing" in drift[0] and "'the code says this'" in drift[0]
    assert "1 entries no code shows" in drift[1] and "a sentence only a hand wrote" in drift[1]


def test_the_chinese_site_names_its_title_and_author_in_chinese(tmp_path):
    """The footer shows the config's author: the Chinese site takes it from the site catalogue, as
    the title (the eighth review read "The Transformer Core course team" under Chinese pages)."""
    root = _mini_course(tmp_path)
    edition.update(root)
    english = __import__("yaml").safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    _translate(root, "_site", {english["title"]: "书名", english["author"]: "作者名"})
    config = __import__("yaml").safe_load(edition.rendered(root)[root / "zh" / "_config.yml"])
    assert (config["title"], config["author"]) == ("书名", "作者名")


def test_the_theme_speaks_chinese_on_the_chinese_site():
    config = __import__("yaml").safe_load(edition.rendered(ROOT)[ROOT / "zh" / "_config.yml"])["sphinx"]["config"]
    assert config["togglebutton_hint"] == "点击显示" and "{type}" in config["nb_code_prompt_show"]
    po = (ROOT / "site" / "locale" / "zh_CN" / "LC_MESSAGES" / "sphinx.po").read_text(encoding="utf-8")
    assert 'msgid "Link to this heading"\nmsgstr "链接到此标题"' in po


def _reader_problems(kind: str) -> list[str]:
    problems = reader_checks.reader_problems(ROOT)
    if kind == "english":
        return [p for p in problems if ": English left: " in p]
    if kind == "terms":
        return [p for p in problems if any(what in p for what in _TERM_PROBLEMS)]
    return [p for p in problems if ": English left: " not in p and not any(what in p for what in _TERM_PROBLEMS)]


_TERM_PROBLEMS = ('" (write ', ": first use of ", ": glossed again: ")


def test_no_english_sentence_is_left_on_a_chinese_page():
    """Outside code, math and the names Chinese texts keep (terms.yml's ``keep``), and the English
    of a term in full-width parentheses."""
    left = _reader_problems("english")
    assert not left, f"{len(left)} English phrases on Chinese pages:\n" + "\n".join(left[:30])


def test_chinese_pages_are_typeset_as_chinese():
    wrong = _reader_problems("typesetting")
    assert not wrong, f"{len(wrong)} typesetting mistakes:\n" + "\n".join(wrong[:30])


def test_brackets_in_brackets_are_found_and_calls_are_not():
    """Issue 29 counted 12 nested or back-to-back parentheses on the Chinese pages; `i18n check` (through
    ``reader_problems``, the typesetting list above) now names each, whether the inner one is a term's
    gloss or a remark, in full-width or ASCII brackets; a call's parentheses are notation."""
    found = reader_checks.parenthesis_problems
    assert len(found("机制（注意力、掩码（mask）、多头）。")) == 1
    assert len(found("错误（例如“除以 sqrt(d_k)？”（did you divide）），与（一（二（三））") + found("甲（乙 (丙)）")) == 3
    assert found("编码器（encoder）（BERT 风格）")[0].startswith("parentheses back to back: ")
    assert found("编码器（encoder） （BERT 风格）") and found("（一）(二)")
    assert not found("编码器（encoder，见第 7 章）上；LayerNorm(x + Sublayer(x)) 与 f(g(x))，（甲）和（乙）。")
    assert not found("（甲\n\n乙）（丙")[1:], "a paragraph's brackets are its own"


def test_a_quoted_chapter_title_carries_no_gloss_and_the_gloss_follows_in_the_text():
    """Issue 29: 实现“位置编码（positional encoding）”一章中的各种位置编码（positional encoding）方案 glossed
    the term twice in one sentence; the title is quoted as it stands and the term is glossed at its first
    use in the text."""
    terms = [{"en": "positional encoding", "zh": "位置编码"}]
    said = reader_checks.term_problems("实现“位置编码（positional encoding）”一章中的各种位置编码方案。", terms)
    assert said and said[0].startswith("a gloss inside a quoted chapter title"), said
    assert reader_checks.term_problems("实现“位置编码”一章中的各种位置编码方案。", terms) == [
        "first use of 位置编码 without （positional encoding）"]
    assert not reader_checks.term_problems("实现“位置编码”一章中的各种位置编码（positional encoding）方案。", terms)


def test_a_first_use_inside_a_glossed_longer_term_of_the_list_is_glossed_and_a_bare_one_is_not():
    """Issue 29: the first 掩码 of chapter 07 is inside 掩码语言模型（masked language model，MLM）, the first
    层规范化 of a table inside 前置层规范化（Pre-LN）; pages glossed 掩码 or 层规范化 a second time to pass.
    A longer term of the list glossed where it stands glosses the term inside it; a bare first use, or one
    inside a compound the list does not have, still fails."""
    mask, mlm = {"en": "mask", "zh": "掩码"}, {"en": "masked language model", "zh": "掩码语言模型"}
    norm, pre_ln = {"en": "layer normalization", "zh": "层规范化"}, {"en": "Pre-LN", "zh": "前置层规范化"}
    terms = [mask, mlm, norm, pre_ln]
    assert not reader_checks.term_problems(
        "BERT 用掩码语言模型（masked language model，MLM）训练，注意力的掩码是布尔张量。\n\n"
        "| 前置层规范化（Pre-LN） | 先做层规范化 |", terms)
    assert reader_checks.term_problems("BERT 用掩码语言模型训练，注意力的掩码是布尔张量。", terms) == [
        "first use of 掩码 without （mask）", "first use of 掩码语言模型 without （masked language model）"]
    assert reader_checks.term_problems("注意力的掩码是布尔张量。掩码语言模型（masked language model，MLM）……",
                                       terms) == ["first use of 掩码 without （mask）"]
    assert reader_checks.term_problems("掩码矩阵（mask matrix）是布尔张量。", terms) == ["first use of 掩码 without （mask）"]
    assert reader_checks.term_problems("前置层规范化（Pre-LN）与后置层规范化（pre-softmax）。", [norm, pre_ln, {
        "en": "Post-LN", "zh": "后置层规范化"}]) == ["first use of 后置层规范化 without （Post-LN）"]


def test_terms_yml_finds_the_fourth_reviews_old_forms_and_passes_the_chosen_ones():
    """Issue 29, fourth review (二.1–二.10), with the real terms.yml: 掩码 used as a verb, 宽度 for d_model or a
    head's size, 允许关注 for the mask convention, 评分 for marking, 分派 for dispatch and a bare 平台 for a
    plateau are each found with the form that replaces it; the chosen forms and the words beside them (施加掩码,
    掩码语言模型, 不计分, the LMS's 学习平台) pass."""
    terms = [dict(t, gloss=False) for t in reader_checks.load_terms(ROOT)["terms"]]
    old = {"被掩码的键得到零权重": "被掩蔽", "你把允许的键掩码掉了": "被掩蔽", "模型宽度为 384": "模型维度",
           "头宽 64 的注意力头": "头维度", "`True` 表示允许关注": "关注", "评分时还会运行更多测试": "批改",
           "PyTorch 的分派器": "分发", "损失停在虚线所示的平台上": "平台期"}
    for text, chosen in old.items():
        problems = reader_checks.term_problems(text + "。", terms)
        assert any(f"(write {chosen} for" in problem for problem in problems), (text, problems)
    assert not reader_checks.term_problems(
        "被掩蔽的键得到零权重，整行都被掩蔽的查询输出零；施加掩码之后再做 softmax。掩蔽语言模型掩蔽一部分输入词元。"
        "模型维度 384，头维度 64，`True` 表示可以关注。批改时还会运行更多测试，这一题不计分。PyTorch 的分发器；"
        "损失停在平台期，学习平台把这次提交记为迟交。", terms)


def test_terms_yml_patterns_find_english_and_broad_words_in_prose_only():
    """The fourth round's patterns: LayerNorm, LN, BatchNorm, autograd and epsilon left in Chinese prose,
    and 基数 or 下标 where terms.yml chose 底数 (RoPE's base) and 索引; code, math, the first-use
    parentheses, Pre-LN and the other senses of 基数 and 下标 (a subscript before a formula) pass."""
    terms = {t["en"]: dict(t, gloss=False) for t in reader_checks.load_terms(ROOT)["terms"]}
    chosen = [terms[english] for english in ("layer normalization", "batch normalization", "autograd",
                                             "epsilon (in prose)", "base (RoPE's θ)", "index (of a tensor or a sequence)")]
    wrong = reader_checks.visible_prose("每个 LayerNorm 都有增益；BatchNorm 依赖批次；用 autograd 检验；epsilon 在根号里；"
                                        "LN 的输出；RoPE 的基数 $\\theta$；基数 10000；第 3 个下标。")
    assert [p.split('"')[1] for p in reader_checks.term_problems(wrong, chosen)] == [
        "LayerNorm", "LN", "BatchNorm", "autograd", "epsilon", "RoPE 的基数", "基数 10000", "下标"]
    right = reader_checks.visible_prose(
        "层规范化（LayerNorm，LN）与批量规范化（BatchNorm）；`nn.LayerNorm`、torch.autograd 与 `eps`；"
        "$\\operatorname{LN}(x)$、$\\epsilon$；Pre-LN 与 Post-LN；自动求导（autograd）；底数 $\\theta$；下标 $i$；基数排序。")
    assert not reader_checks.term_problems(right, chosen)


def test_logits_are_glossed_in_chinese_at_their_first_use_on_a_page():
    """logits stays English and its first use on a page is glossed logits（未经 softmax 归一化的分数）
    (terms.yml's ``gloss_as``), in the singular too; a name that only contains the word is no use of it."""
    logits = {"en": "logits", "zh": "logits", "gloss_as": "未经 softmax 归一化的分数"}
    assert not reader_checks.term_problems("输出头给出 logit（未经 softmax 归一化的分数）；之后 logits 除以温度。", [logits])
    assert not reader_checks.term_problems("函数 logits_fn 与 next_logits 是名字，不是用法。", [logits])
    for wrong in ("输出头给出 logits，之后 logits（未经 softmax 归一化的分数）。", "输出头给出 logits（logits）。",
                  "输出头给出 logits（未归一化分数）。"):
        assert reader_checks.term_problems(wrong, [logits]) == [
            "first use of logits without （未经 softmax 归一化的分数）"], wrong


def _book_with_glosses(root: Path, chapters: dict[str, str], exercise: str,
                       glossary: str = "词元（token）：模型读入的单位。掩码（mask）。") -> Path:
    """A course of the given Chinese chapters (``book/...``: text, in table-of-contents order after the
    intro), one exercise and a glossary, with a term list of 词元 (not 令牌), 掩码, 因果掩码 and 编码器 (gloss: false)."""
    order = list(chapters)
    root.mkdir()
    pages = dict(chapters, **{"exercises/01-a/a": exercise, "book/glossary": glossary})
    toc = {"format": "jb-book", "root": order[0], "parts": [
        {"caption": "Chapters", "chapters": [{"file": name} for name in order[1:]]},
        {"caption": "Exercises", "chapters": [{"file": "exercises/01-a/a"}]},
        {"caption": "Reference", "chapters": [{"file": "book/glossary"}]}]}
    yaml = __import__("yaml")
    (root / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    terms = {"terms": [{"en": "token", "zh": "词元", "avoid": ["令牌"]}, {"en": "mask", "zh": "掩码"},
                       {"en": "causal mask", "zh": "因果掩码"}, {"en": "encoder", "zh": "编码器", "gloss": False}]}
    (root / reader_checks.TERMS_FILE).parent.mkdir(parents=True)
    (root / reader_checks.TERMS_FILE).write_text(yaml.safe_dump(terms, allow_unicode=True), encoding="utf-8")
    for name, text in pages.items():
        for path in (root / f"{name}.md", root / "zh" / f"{name}.md"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# 标题\n\n{text}\n", encoding="utf-8")
    return root


def test_the_book_glosses_a_term_once_in_toc_order_and_an_exercise_once_on_its_own(tmp_path):
    """Issue 29 (fourth reader): 词元（token） was glossed on every page, ten times in the book. As in d2l,
    a term's English follows its first use in the book's chapters, read in the table of contents' order;
    a later chapter uses the Chinese alone, and a page glosses a term once (chapter 09 glossed
    编码器-解码器 twice). An exercise, opened on its own, glosses at its own first use; the glossary
    pairs every term with its English. A term that need not be glossed (gloss: false) is glossed once
    all the same, wherever that is."""
    def term_problems(chapters, exercise, *glossary):
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        found = reader_checks.reader_problems(_book_with_glosses(root, chapters, exercise, *glossary))
        return [p.split(": ", 1)[1] for p in found if any(what in p for what in _TERM_PROBLEMS)]

    right = {"book/intro": "模型读入词元（token）。",
             "book/01-a": "每个词元一个向量；因果掩码（causal mask）挡住后面的词元，编码器（encoder）不用它。",
             "book/02-b": "因果掩码和掩码都不再注英文；编码器也一样。"}
    assert term_problems(right, "把词元（token）送入因果掩码（causal mask）之前，先看编码器。") == []
    assert term_problems({"book/intro": "模型读入词元（token）。", "book/01-a": "每个词元（token）一个向量；因果掩码（causal mask）。",
                          "book/02-b": "掩码（mask）和因果掩码，编码器（encoder），编码器（encoder）。"}, "把词元送入模型。") == [
        "glossed again: …每个词元（token）, book/intro glossed it first",
        "glossed again: …掩码（mask）, book/01-a glossed it first",
        "glossed again: …），编码器（encoder）, once is enough",
        "first use of 词元 without （token）"]
    swapped = {"book/intro": right["book/intro"], "book/02-b": right["book/02-b"], "book/01-a": right["book/01-a"]}
    assert term_problems(swapped, "把词元（token）送入模型。") == [
        "first use of 掩码 without （mask）", "first use of 因果掩码 without （causal mask）"], "02-b comes first now"
    assert term_problems(right, "把词元（token）送入模型。", "词元（token），旧称令牌（token）。") == [
        '"令牌" (write 词元 for token)'], "the glossary repeats every English, and keeps to the forms all the same"


def test_any_english_gloss_is_given_once_in_the_book_whether_or_not_the_term_list_has_it(tmp_path):
    """Issue 29 (fifth reader): the book-order rule covered terms.yml's terms only, and 18 other words were
    glossed again in later chapters (温度（temperature） five times). Any English in full-width parentheses
    after Chinese text is a gloss of that English (case and a trailing abbreviation aside), given once in
    the book's chapters; an abbreviation alone (多查询注意力（MQA）) glosses nothing, and the exercises and
    the glossary keep their own rules."""
    def glossed_again(chapters, exercise="把词元（token）送入模型。", *glossary):
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        found = reader_checks.reader_problems(_book_with_glosses(root, chapters, exercise, *glossary))
        return [p for p in found if ": glossed again: " in p]

    first = {"book/intro": "模型读入词元（token），按温度（temperature，即缩放因子）采样。",
             "book/01-a": "多查询注意力（multi-query attention，MQA）共享键和值。"}
    assert glossed_again(dict(first, **{"book/02-b": "温度与多查询注意力（MQA）不再注英文；Pre-LN 即前置（Pre-LN）。"}),
                         "温度（temperature）与多查询注意力（multi-query attention）。",
                         "温度（temperature）：见第 2 章。多查询注意力（multi-query attention）。") == []
    assert glossed_again(dict(first, **{"book/02-b": "以低于 1 的**温度**（Temperature）采样；多查询注意力（Multi-query "
                                                     "attention）。\n\n再说一次多查询注意力（multi-query attention，MQA）。"})) == [
        "zh/book/02-b.md: glossed again: …1 的**温度**（Temperature）, book/intro glossed it first",
        "zh/book/02-b.md: glossed again: …；多查询注意力（Multi-query attention）, book/01-a glossed it first",
        "zh/book/02-b.md: glossed again: …次多查询注意力（multi-query attention，MQA）, book/01-a glossed it first"]
    assert glossed_again({"book/intro": "残差流（residual stream）贯穿各层，残差流（residual streams）也叫主干。"}) == [
        "zh/book/intro.md: glossed again: …穿各层，残差流（residual streams）, once is enough"]
    assert glossed_again({"book/intro": "词元（token）。", "book/01-a": "每个词元（token）一个向量。"}) == [
        "zh/book/01-a.md: glossed again: …每个词元（token）, book/intro glossed it first"], "the term list's check names it, once"


def test_ascii_quotation_marks_around_chinese_are_a_typesetting_mistake():
    """Chapter 09 timed \"分配并填满一个……新张量\" in ASCII quotes; Chinese text is quoted “…”, and English
    or code in ASCII quotes is left alone."""
    assert reader_checks.typesetting_problems('最后单独计时"分配并填满一个\n新张量"要花多久。')
    assert not reader_checks.typesetting_problems('它打印 "No GPU found" 与“分配”。')


def test_chinese_against_a_latin_word_or_a_number_is_a_typesetting_mistake():
    """The second review read 在你自己的 GPT中 and 相同的SwiGLU (a role's text against Chinese) and 方案是n 元;
    a Chinese page leaves a space on each side of a Latin word or a number, and code and math are not prose."""
    said = reader_checks.typesetting_problems(reader_checks.visible_prose("在{doc}`你自己的 GPT <x>`中训练，见第1章。"))
    assert len(said) == 2 and all(p.startswith("no space between Chinese and a Latin") for p in said), said
    assert reader_checks.typesetting_problems("搭一个参数量相同的SwiGLU 网络")
    assert not reader_checks.typesetting_problems(
        reader_checks.visible_prose("在{doc}`你自己的 GPT <x>` 中，`x`的形状含 $d$维，见第 1 章。"))


def test_a_thin_space_before_percent_in_prose_is_a_typesetting_mistake_and_in_math_is_not():
    """Chapters 07 and 10 wrote 12\\,% (issue 29): Chinese text has no space before %, and a formula
    keeps its own spacing."""
    said = reader_checks.typesetting_problems(reader_checks.visible_prose("占 12\\,%，以及 46 %。"))
    assert len(said) == 2 and all(p.startswith("a space before %") for p in said), said
    assert not reader_checks.typesetting_problems(reader_checks.visible_prose("占 12%，即 $12\\,\\%$。"))


def test_every_chinese_page_uses_one_form_per_term():
    """locales/zh_CN/terms.yml: one Chinese form per term, the English at its first use."""
    wrong = _reader_problems("terms")
    assert not wrong, f"{len(wrong)} departures from locales/zh_CN/terms.yml:\n" + "\n".join(wrong[:40])


def test_terms_that_had_several_forms_have_one():
    """Issue 29: prompt is 提示词 (提示 is a hint), and the other terms readers met in two or three forms
    (the second review: 层规范化 as d2l writes it, 综合项目, top-p 采样 (the fourteenth: not 核采样, a second 核), 句子嵌入, 词元 ID, argmax, 束宽, 老师; the
    third: 规范化 for every normalisation of features, 核函数 for a GPU kernel as 内核 is Jupyter's, 维 for a
    tensor's axis, 堆叠 not the data structure 堆栈, 验证集 for held-out data)."""
    chosen = {t["en"]: t["zh"] for t in reader_checks.load_terms(ROOT)["terms"]}
    for english, chinese in {"prompt": "提示词", "interleaved pairing": "相邻配对", "nats": "奈特",
                             "learned positional embedding": "可学习位置嵌入", "dilation": "空洞率",
                             "to mask": "施加掩码", "the course library": "课程库",
                             "Question N (an exercise's review question)": "第 N 题", "hidden state": "隐藏状态",
                             "Llama 2": "Llama 2", "layer normalization": "层规范化", "batch normalization": "批量规范化",
                             "capstone project": "综合项目", "nucleus (top-p) sampling": "top-p 采样",
                             "sentence embedding": "句子嵌入", "token id": "词元 ID", "argmax": "argmax",
                             "beam size": "束宽", "instructor": "老师", "GPU kernel": "核函数",
                             "dimension (axis) of a tensor": "维", "stack (of layers)": "堆叠",
                             "held-out data": "验证集", "visible tests": "可见测试", "logits": "logits",
                             "masked language model": "掩蔽语言模型", "Pre-LN": "Pre-LN", "RMSNorm": "RMSNorm",
                             "batch": "批量", "roofline model": "Roofline 模型",
                             "base (RoPE's θ)": "底数", "matrix multiplication": "矩阵乘法", "autograd": "自动求导"}.items():
        assert chosen.get(english) == chinese, f"terms.yml: {english} should be {chinese}, is {chosen.get(english)}"
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "zh").rglob("*.ipynb"))
    for avoided in ("本库", "膨胀率", "交错配对", "整个提示在", "可学习的绝对位置", "隐状态", "层归一化", "毕业项目",
                    "句向量", "编码器–解码器", "核过滤", "词元编号", "如何批改", "融合内核", "均方根归一化",
                    "被挡住", "扩张率", "GPU 核函数", "批次", "词元 id", "堆栈", "训练配方", "留出部分", "连续卷积", "16 位数（"):
        assert avoided not in pages, f"a Chinese page still says {avoided}"


def test_the_english_edition_shows_the_chinese_names_terms_yml_chose():
    """The English glossary names each term in Chinese, and the chapters do at a term's first use
    ("self-attention (自注意力)"): issue 29 found 掩码语言建模, logits (未归一化分数), 层归一化, 批归一化,
    随时间反向传播 and 空洞卷积（膨胀卷积） there after the Chinese edition had settled on other forms. A
    glossary entry whose English is a term of terms.yml shows exactly its Chinese form (logits with its
    Chinese gloss), and no English page shows a Chinese form terms.yml avoids."""
    terms = reader_checks.load_terms(ROOT)["terms"]
    chosen = {t["en"].lower(): t["zh"] + (f"（{t['gloss_as']}）" if "gloss_as" in t else "") for t in terms}
    glossary = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    entries = re.findall(r"(?m)^(\S[^\n]*)\n  \*\*([^*]+)\*\* — ", glossary)
    assert len(entries) > 100, "the glossary's entries are no longer `term` / `  **中文** — definition`"
    named = {english: chinese for english, chinese in entries if english.lower() in chosen}
    kept = {t["en"].lower() for t in terms if t["zh"] == t["en"] and "gloss_as" not in t}
    named = {english: re.sub(r"（[^（）]*）$", "", chinese) if english.lower() in kept else chinese
             for english, chinese in named.items()}   # a name kept in English says what it is: **Pre-LN**（前置层规范化）
    assert {"logits", "layer normalization", "Pre-LN", "RMSNorm", "backpropagation through time"} <= set(named)
    wrong = [f"{english}: {chinese}, terms.yml says {chosen[english.lower()]}"
             for english, chinese in named.items() if chinese != chosen[english.lower()]]
    assert not wrong, "\n".join(wrong)
    avoided = {a: t["zh"] for t in terms for a in t.get("avoid", []) if re.search("[\u4e00-\u9fff]", a)}
    shown = [f"{page.docname}: {form} (terms.yml: {avoided[form]})"
             for page in extract.pages(ROOT) for prose in ["\n".join(reader_checks.page_prose(page.path))]
             for form in avoided if form in prose]
    assert not shown, "\n".join(shown)


def test_no_catalogue_translation_uses_a_chinese_form_terms_yml_avoids():
    """The pages' prose is checked whole above; what reaches a Chinese learner from a catalogue besides
    (code comments, docstrings, test messages, figure text, prints, the hidden tests' words) keeps to the
    same list: none of its translations holds a Chinese form that terms.yml avoids (a form with Han
    characters: an English one may be code there, as LayerNorm in a print's label is)."""
    from autograder.course.i18n.hidden_text import hidden_catalogue_path

    terms = reader_checks.load_terms(ROOT)["terms"]
    avoided = {a: t["zh"] for t in terms for a in t.get("avoid", []) if re.search("[\u4e00-\u9fff]", a)}
    paths = (sorted((ROOT / "locales" / "zh_CN" / "LC_MESSAGES").rglob("*.po"))
             + [runtime_text.runtime_catalogue_path(domain, ROOT) for domain in ("messages", "figures")]
             + [hidden_catalogue_path(ROOT)])
    found = [f"{path.relative_to(ROOT)}: {form} (terms.yml: {avoided[form]}) in {message.string[:60]!r}"
             for path in paths for message in catalogues.read_catalogue(path)
             if message.id and isinstance(message.string, str) for form in avoided if form in message.string]
    assert not found, "\n".join(found)


def test_runtime_translations_keep_placeholders_and_code():
    """A translation may drop an English-only placeholder ({'s' if n > 1 else ''}), never invent one,
    and keeps the message's inline code."""
    import re

    problems = []
    for domain in ("figures", "messages"):
        for m in catalogues.read_catalogue(runtime_text.runtime_catalogue_path(domain, ROOT)):
            if not (m.id and m.string):
                continue
            if runtime_text.PATTERN_FLAG in m.flags:
                held = set(re.findall(r"\{([^{}]+)\}", m.id.replace("{{", "").replace("}}", "")))
                used = set(re.findall(r"\{([^{}]+)\}", m.string.replace("{{", "").replace("}}", "")))
                problems += [f"{domain}: {m.id[:50]!r} invents {{{p}}}" for p in used - held]
            code = set(re.findall(r"`[^`]+`", m.id)) - set(re.findall(r"`[^`]+`", m.string))
            problems += [f"{domain}: {m.id[:50]!r} lost {c}" for c in code]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_a_chinese_exercise_that_fails_a_visible_test_says_why_in_chinese(tmp_path):
    """The Chinese notebook's setup cell switches messages to Chinese in the learner's own kernel, and the
    grader's check (validate) translates the referee's verdicts the same way."""
    import json

    from autograder.engine.validate import validate

    nb = json.loads((ROOT / "zh" / "exercises" / "02-self-attention" / "self_attention.ipynb").read_text("utf-8"))
    assert nb["metadata"]["course"]["language"] == "zh_CN"
    assert "install('zh_CN')" in "".join(nb["cells"][1]["source"])
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "attention_scores":
            cell["source"] = "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1)\n"   # no scaling
    path = tmp_path / "self_attention.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    ok, lines = validate(path, root=ROOT)
    failure = next(line for line in lines if line.startswith("未通过  test_attention_scores"))
    assert not ok and re.search(r"[\u4e00-\u9fff]", failure), failure
    # every line validate prints is Chinese: the report's head, the verdicts, the verdict line
    assert lines[0].startswith("正在检查") and lines[-1] == "还没准备好：见上文", lines
    left = [run for line in lines for run in reader_checks.english_runs(re.sub(r"`[^`]*`", " ", line))]
    assert not left, left


def test_validate_points_a_chinese_learner_at_the_chinese_exercise():
    """The verdict that says which exercise to download names zh/exercises for a Chinese notebook (issue 29)."""
    from autograder.engine.validate import _repaired_but_passing
    from course_runtime.language import translate_message

    english = _repaired_but_passing(2, "02-self-attention", "self_attention", ROOT)
    chinese = translate_message(_repaired_but_passing(2, "02-self-attention", "self_attention", ROOT, "zh_CN"), "zh_CN")
    assert "exercises/02-self-attention/self_attention.ipynb" in english and "zh/exercises" not in english
    assert "zh/exercises/02-self-attention/self_attention.ipynb" in chinese
    assert "2 处" in chinese and not reader_checks.english_runs(re.sub(r"https?://\S+", " ", chinese)), chinese


# --- The learner's docstrings in Chinese -----------------------------------------------------------

SOLUTION = ('def attention_scores(q, k):\n    """Scaled dot products of every query with every key.\n\n'
            '    Args:\n        q: queries, shape (..., T_q, d_k).\n\n    Returns:\n        scores, shape (..., T_q, T_k).\n'
            '    """\n    # YOUR CODE HERE\n    raise NotImplementedError("replace this line with your code")\n\n\n'
            "class Cache:\n    '''Keys and values (\"kv\").'''\n\n    def reset(self):\n        r\"\"\"Forget.\"\"\"\n")
SOLUTION_ZH = {"Scaled dot products of every query with every key.\n\n    Args:\n        q: queries, shape (..., T_q, d_k).\n\n"
               "    Returns:\n        scores, shape (..., T_q, T_k).\n    ":
               "每个查询与每个键的缩放点积。\n\n    参数：\n        q：查询，形状 (..., T_q, d_k)。\n\n"
               "    返回：\n        scores，形状 (..., T_q, T_k)。\n    ",
               'Keys and values ("kv").': '键和值（"kv"）。', "Forget.": "清空。"}


def test_docstrings_are_found_as_written_and_replaced_in_place():
    import ast

    assert docstring_text.docstrings(SOLUTION) == list(SOLUTION_ZH)
    chinese = docstring_text.translate_docstrings(SOLUTION, SOLUTION_ZH)
    tree = ast.parse(chinese)
    assert [ast.get_docstring(n, clean=False) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))] == [
        SOLUTION_ZH[d] for d in docstring_text.docstrings(SOLUTION)]
    assert "    '''键和值（\"kv\"）。'''" in chinese and '        r"""清空。"""' in chinese, "quotes and prefixes stay"
    assert docstring_text.without_docstrings(chinese) == docstring_text.without_docstrings(SOLUTION)
    assert docstring_text.without_docstrings(SOLUTION).count('""""""') == 2, "the quotes stay, the text goes"
    with pytest.raises(ValueError, match="would change the code"):
        docstring_text.translate_docstrings(SOLUTION, {"Forget.": '清空"""; import os; """'})


def _exercise_course(root: Path) -> Path:
    root = _mini_course(root)
    nb = read_notebook(root / "book" / "ch.ipynb")
    cell = nbformat.v4.new_code_cell(SOLUTION)
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "locked": False, "grade_id": "scores",
                                 "schema_version": 3}
    nb.cells.insert(2, cell)
    nb.cells.insert(3, nbformat.v4.new_code_cell('def helper():\n    """Not the learner\'s: not a message."""\n'))
    (root / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    return root


def _updated_catalogue(root: Path, context: str):
    """After ``i18n update`` of a mini course: its chapter's catalogue path, the catalogue, and the English of
    its entries with ``context``."""
    edition.update(root)
    path = catalogues.catalogue_path("book/ch", root)
    catalog = catalogues.read_catalogue(path)
    return path, catalog, [m.id for m in catalog if m.context == context]


def test_solution_docstrings_are_messages_and_the_chinese_notebook_shows_them_translated(tmp_path):
    import ast

    root = _exercise_course(tmp_path)
    path, catalog, held = _updated_catalogue(root, docstring_text.DOCSTRING_CONTEXT)
    assert held == list(SOLUTION_ZH), "one entry per docstring of the solution cells, as written"
    for message in catalog:
        if message.context == docstring_text.DOCSTRING_CONTEXT:
            message.string = SOLUTION_ZH[message.id]
    catalogues.write_catalogue(catalog, path)
    edition.build(root)
    chinese = read_notebook(root / "zh" / "book" / "ch.ipynb")
    cell = chinese.cells[2]
    ast.parse(cell.source)
    assert "    参数：\n        q：查询，形状 (..., T_q, d_k)。" in cell.source and "Scaled dot" not in cell.source
    assert cell.source.endswith('raise NotImplementedError("replace this line with your code")\n\n\n'
                                "class Cache:\n    '''键和值（\"kv\"）。'''\n\n    def reset(self):\n        r\"\"\"清空。\"\"\"\n")
    assert "Not the learner's" in chinese.cells[3].source
    assert edition.code_cells_match(root) == [] and edition.stale_outputs(root) == []
    # Any other change of a cell that has translated docstrings is still a difference.
    chinese.cells[2].source = cell.source.replace("raise NotImplementedError", "raise RuntimeError")
    (root / "zh" / "book" / "ch.ipynb").write_text(dumps_normalized(chinese), encoding="utf-8")
    assert edition.code_cells_match(root) == ["zh/book/ch.ipynb: its code cells differ from book/ch.ipynb"]


def test_the_chinese_exercises_have_chinese_docstrings_and_still_parse():
    import ast

    for path in sorted((ROOT / "zh" / "exercises").rglob("*.ipynb")):
        for cell in read_notebook(path).cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                ast.parse(cell.source)
                for body in docstring_text.docstrings(cell.source):
                    assert re.search(r"[\u4e00-\u9fff]", body), f"{path.relative_to(ROOT)}: English docstring {body[:60]!r}"



# --- The code's comments in Chinese ----------------------------------------------------------------

CODE = ('import torch  # noqa: F401\n'
        '# The keys, one per row.\n'
        'keys = torch.eye(3)        # (T, d_k)\n'
        'text = "a # in a string"   # not the end of the code\n'
        '# keys = keys.T\n'
        '### BEGIN SOLUTION\n'
        'def f(x):\n'
        '    """# not a comment"""\n'
        '    return x  # type: ignore\n'
        '### END SOLUTION\n'
        '# YOUR CODE HERE\n'
        '# warm-up\n'
        '# (B, T, d_model) -> (B, h, T, d_k)')
SHELL = 'make setup   # creates .venv\necho "#1 is not a comment"  # prints it\n#!/bin/sh'


def test_prose_comments_are_messages_and_markers_shapes_and_commented_out_code_are_not():
    from autograder.course.i18n import comment_text

    assert comment_text.comments(CODE) == ["The keys, one per row.", "not the end of the code", "warm-up"]
    assert comment_text.comments(SHELL, shell=True) == ["creates .venv", "prints it"]
    # IPython's shell escapes do not tokenize as Python: the comments are read line by line
    assert comment_text.comments("!pip install x  # quietly\nx = 1") == ["quietly"]
    table = {"The keys, one per row.": "键，每行一个。", "warm-up": "预热", "not the end of the code": "不是代码的结尾"}
    chinese = comment_text.translate_comments(CODE, table)
    assert chinese == (CODE.replace("# The keys, one per row.", "# 键，每行一个。").replace("# warm-up", "# 预热")
                       .replace("# not the end of the code", "# 不是代码的结尾"))
    assert comment_text.without_comments(chinese) == comment_text.without_comments(CODE)
    assert "### BEGIN SOLUTION" in comment_text.without_comments(CODE), "markers are code to the grader: kept"
    assert comment_text.without_comments(CODE.replace("torch.eye(3)", "torch.eye(4)")) != comment_text.without_comments(CODE)
    with pytest.raises(ValueError, match="line break"):
        comment_text.translate_comments(CODE, {"warm-up": "预热\nimport os"})


# A test cell as an instructor writes it: a visible comment, and a hidden region whose comment must never ship.
TEST_CELL = ("assert keys.shape == (3, 3)  # the grader reads this cell\n"
             "### BEGIN HIDDEN TESTS\n"
             "assert keys.sum() == 3  # the secret edge case of the hidden tests\n"
             "### END HIDDEN TESTS")


def _commented_course(root: Path) -> Path:
    """The mini course with a commented code cell, a test cell with a visible and a hidden comment and a bash fence."""
    root = _mini_course(root)
    nb = read_notebook(root / "book" / "ch.ipynb")
    test = nbformat.v4.new_code_cell(TEST_CELL)
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1, "grade_id": "t1",
                                 "schema_version": 3}
    nb.cells[2:2] = [nbformat.v4.new_code_cell(CODE), test,
                     nbformat.v4.new_markdown_cell("Then:\n\n```bash\n" + SHELL + "\n```")]
    (root / "book" / "ch.ipynb").write_text(dumps_normalized(nb), encoding="utf-8")
    return root


def test_comments_are_messages_and_the_chinese_code_differs_in_them_only(tmp_path):
    from autograder.course.i18n import comment_text

    root = _commented_course(tmp_path)
    path, catalog, held = _updated_catalogue(root, comment_text.COMMENT_CONTEXT)
    assert held == ["creates .venv", "prints it", "a comment, a message of its own", "The keys, one per row.",
                    "not the end of the code", "warm-up", "the grader reads this cell"], \
        "fences first, then cells; a test cell's visible comment too, never one of its hidden tests"
    assert "secret edge case" not in path.read_text(encoding="utf-8")
    for message in catalog:
        if message.context == comment_text.COMMENT_CONTEXT:
            message.string = f"中文{len(message.id)}"
    catalogues.write_catalogue(catalog, path)
    edition.build(root)
    english, chinese = read_notebook(root / "book" / "ch.ipynb"), read_notebook(root / "zh" / "book" / "ch.ipynb")
    assert chinese.cells[2].source == CODE.replace("# The keys, one per row.", "# 中文22").replace(
        "# warm-up", "# 中文7").replace("# not the end of the code", "# 中文23")
    assert chinese.cells[3].source == TEST_CELL.replace("# the grader reads this cell", "# 中文26"), \
        "a test cell's visible comment is translated; its hidden region is left as it is"
    assert "make setup   # 中文13\necho \"#1 is not a comment\"  # 中文9\n#!/bin/sh" in chinese.cells[4].source
    assert edition.code_cells_match(root) == [] and edition.stale_outputs(root) == []
    chinese.cells[2].source = chinese.cells[2].source.replace("# 中文7", "x = 1  # 中文7")
    (root / "zh" / "book" / "ch.ipynb").write_text(dumps_normalized(chinese), encoding="utf-8")
    assert edition.code_cells_match(root) == ["zh/book/ch.ipynb: its code cells differ from book/ch.ipynb"]


def test_no_comment_of_a_hidden_test_is_a_message_or_reaches_the_chinese_edition():
    """A test cell's comments are messages of its visible part only: the comments inside the hidden regions of
    the solutions (read here region by region, apart from the code that extracts them) are in no catalogue and
    in no Chinese notebook."""
    import textwrap

    from autograder.course.i18n import comment_text
    from autograder.engine.plan import TEST, load_notebook_plan

    plans = [load_notebook_plan(path) for path in sorted((ROOT / "solutions").glob("*/*.ipynb"))]
    visible = {text for plan in plans for c in plan.cells for text in comment_text.comment_texts(c.released)}
    secret = set()
    for cell in (c for plan in plans for c in plan.cells if c.kind == TEST):
        for region in re.findall(r"BEGIN HIDDEN TESTS[^\n]*\n(.*?)\n[^\n]*END HIDDEN TESTS", cell.source, re.S):
            secret.update(set(comment_text.comments(textwrap.dedent(region))) - visible)
    assert len(secret) > 20, "the hidden tests have comments of their own"
    catalogued = {m.id for path in (ROOT / "locales").rglob("*.po") for m in catalogues.read_catalogue(path)}
    assert not secret & catalogued, sorted(secret & catalogued)
    cells = [c.source for path in (ROOT / "zh" / "exercises").glob("*/*.ipynb") for c in read_notebook(path).cells]
    assert not any("BEGIN HIDDEN TESTS" in source for source in cells)
    assert not secret & {text for source in cells for text in comment_text.comment_texts(source)}


def test_the_chinese_chapters_and_exercises_have_chinese_comments_and_the_english_code():
    """Every prose comment of a Chinese chapter's or exercise's code cells, test cells included, is Chinese; the
    setup cell is the Chinese edition's own (issue 29, item 3)."""
    from autograder.course.i18n import comment_text

    assert edition.code_cells_match(ROOT) == []
    english_left, seen, in_tests = [], 0, 0
    for page in extract.pages(ROOT):
        if not page.is_notebook:
            continue
        english = [c for c in read_notebook(page.path).cells if c.cell_type == "code"]
        chinese = [c for c in read_notebook(ROOT / "zh" / page.path.relative_to(ROOT)).cells if c.cell_type == "code"]
        for ours, theirs in zip(english, chinese):
            if not comment_text._translatable(ours):
                assert theirs.source == ours.source or ours.source.lstrip().startswith("# Setup:")
                continue
            for text, shown in zip(comment_text.comment_texts(ours.source), comment_text.comment_texts(theirs.source)):
                if comment_text.is_prose(text):
                    seen += 1
                    in_tests += bool(ours.metadata.get("nbgrader", {}).get("grade"))
                    if not re.search(r"[\u4e00-\u9fff]", shown):
                        english_left.append(f"{page.docname}: # {shown}")
    assert seen > 600 and in_tests > 300 and not english_left, english_left

def test_widgets_named_later_progress_bars_and_the_setup_cell_are_chinese(monkeypatch):
    """``interact`` names a slider after its keyword, tqdm shows ``desc``, and ``install`` echoes nothing (issue 29)."""
    from course_runtime import language

    monkeypatch.setenv(language.ENV_LANGUAGE, "zh_CN")
    monkeypatch.setattr(language, "_install_figures", lambda language, fetch=False: False)
    places = language.install()
    assert hasattr(places, "_ipython_display_") and "progress" in places
    import ipywidgets as widgets
    from tqdm import tqdm

    slider = widgets.IntSlider(3)
    slider.description = "layers"
    assert slider.description == "层数"
    import io

    bar = tqdm(range(1), desc="train", file=io.StringIO())
    assert bar.desc.startswith("训练")
    bar.close()


def test_the_chinese_setup_cell_switches_language_before_it_prints_and_comments_in_chinese():
    """On Colab the device line is printed by the setup cell's first run: ``install`` must come before it (issue 29)."""
    from autograder.course.notebooks import setup_cell_source

    source = setup_cell_source(ROOT, "zh_CN")
    assert source.index("install('zh_CN')") < source.index("print(describe_device(device))")
    comments = [line.split("#", 1)[1] for line in source.splitlines() if "#" in line]
    english_words = {word for c in comments for word in re.findall(r"[A-Za-z]+", c)}
    assert comments and all(re.search(r"[\u4e00-\u9fff]", c) for c in comments)
    assert english_words <= {"Colab", "GPU", "CPU"}, english_words
    for path in sorted((ROOT / "zh").rglob("*.ipynb")):
        if "_build" in path.parts:
            continue
        cells = json.loads(path.read_text("utf-8"))["cells"]
        first_code = next(c for c in cells if c["cell_type"] == "code")
        assert "".join(first_code["source"]) == source, path.relative_to(ROOT)


def test_figure_text_kept_in_variables_is_followed_to_where_it_is_drawn():
    """Strings reach a figure through names, loops, zip, append and +=, dict items, a helper's parameter,
    a function's return value and ``interact``'s keywords; a string never drawn is not collected (issue 29)."""
    cells = [
        'labels = ["plain", "residual"]\nunused = "never drawn"\n'
        'for label in labels:\n    ax.plot(x, label=label)',
        'panels = [("one head", w)]\npanels += [(f"head {h}", w) for h in range(2)]\npanels.append(("last panel", w))\n'
        'for ax, (title, weights) in zip(axes, panels):\n    ax.set_title(title)',
        'def costs(n):\n    return {"recurrent": n, f"conv (k={k})": n}\n'
        'c = costs(4)\nax.bar(list(c), list(c.values()))',
        'def show(ax, caption):\n    ax.set_xlabel(caption)\nshow(ax, "tokens generated")',
        'curves = {(cached, part): [] for cached in (False, True) for part in ("linear", "attention")}\n'
        'for key, values in curves.items():\n    ax.plot(values, label=f"{key[0]}: {key[1]}")',
        'interact(draw, temperature=(0.1, 2.0))\nbar = tqdm(range(3), desc="training 5 models")',
    ]
    found = dict(runtime_text.code_strings(cells, figures=True))
    for text in ("plain", "residual", "one head", "head {h}", "last panel", "recurrent", "conv (k={k})",
                 "tokens generated", "linear", "attention", "temperature", "training 5 models"):
        assert text in found, text
    assert "never drawn" not in found
    assert found["head {h}"] and not found["plain"]          # an f-string is a pattern, a literal is not


# What a chapter asks a model in English and prints as it asked it: chapter 11 puts one English and one
# Chinese question to SmolLM2, so a Chinese page shows each as the model read it (translated, the line would
# claim a question the model was never asked). Their entries keep the English on purpose.
MODEL_INPUTS = {"What is the capital of France?", "What is the capital of France? Answer in one sentence."}


def _english_sentences(message: str) -> list[str]:
    """Runs of four or more English words in a Chinese message, code aside: inline code, placeholders,
    addresses, shapes such as (B, n_heads, T, head_dim) and identifiers (words with ``_``) are not prose."""
    shown = re.sub(r"`[^`]*`|\{[^{}]*\}|https?://\S+|\((?:[\w.]+(?:, *)?)+\)", " ", message)
    return [run for run in reader_checks.english_runs(shown)
            if len([w for w in re.findall(r"[A-Za-z][\w'-]*", run) if "_" not in w]) >= 4]


def test_every_message_a_chinese_learner_can_be_shown_is_chinese():
    """Every message a visible test, a check of ``course_runtime.testing``, the guard, the source check or
    ``validate`` can show has a Chinese entry, and no entry leaves an English sentence (issue 29); and the
    checks' own failure paths, run here in process, come out Chinese."""
    import torch

    from course_runtime import testing
    from course_runtime.errors import shortcut_message
    from course_runtime.language import catalogue, translate_message

    table = catalogue("messages", "zh_CN")
    untranslated = [text for text, _ in runtime_text.runtime_messages(ROOT)["messages"]
                    if table.lookup(text.replace("{{", "{").replace("}}", "}")) is None]
    english = []
    for m in catalogues.read_catalogue(runtime_text.runtime_catalogue_path("messages", ROOT)):
        if m.id and m.string and m.id not in MODEL_INPUTS:
            english += [f"{m.id[:50]!r}: {run!r}" for run in _english_sentences(m.string)]
    assert not english, "\n".join(english)
    said = []
    for check in (lambda: testing.check_close(torch.zeros(2, 3), torch.ones(2, 3), name="weights"),
                  lambda: testing.check_close(torch.zeros(2, 4), torch.ones(2, 3), name="weights"),
                  lambda: testing.check_close(torch.full((2, 3), float("nan")), torch.ones(2, 3), name="weights"),
                  lambda: testing.check_close([1.0, 2.0], torch.ones(2), name="weights"),
                  lambda: testing.check_shape(torch.zeros(2, 5, 7), (2, 3, 4), name="scores"),
                  lambda: testing.check_answer(3, 4, name="answer"),
                  lambda: testing.check_close(torch.zeros(2), torch.ones(2), name="output", hint="divide by sqrt(d)")):
        with pytest.raises(AssertionError) as raised:
            check()
        said.append(translate_message(str(raised.value), "zh_CN"))
    said.append(translate_message(shortcut_message("torch.softmax"), "zh_CN"))
    for message in said:
        assert re.search(r"[\u4e00-\u9fff]", message) and not _english_sentences(message), message
    assert not untranslated, untranslated[:20]


def test_a_message_whose_entry_holds_its_hint_line_is_translated_whole():
    """Exercise 04's visible test of ``merge_heads`` puts its hint into its own message; the catalogue's
    entry holds that hint line, so the learner's traceback shows it in Chinese, not only the first line
    (issue 29: the hint line was cut off before the whole message was looked up)."""
    import torch

    from course_runtime.language import translate_message

    cells = read_notebook(ROOT / "zh" / "exercises" / "04-multi-head-attention" / "multi_head_attention.ipynb").cells
    test = next(c.source for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_merge_heads")

    def merge_heads(x):                          # the classic mistake: .view on the transposed tensor
        B, h, T, d_k = x.shape
        return x.transpose(1, 2).view(B, T, h * d_k)

    with pytest.raises(AssertionError) as raised:
        exec(test, {"torch": torch, "merge_heads": merge_heads})
    english = str(raised.value)
    assert "\nHint: .view after .transpose(1, 2)" in english, english
    chinese = translate_message(english, "zh_CN")
    body, hint = chinese.split("\n")
    assert body.startswith("merge_heads(x) 抛出了 RuntimeError：") and hint.startswith("提示：")
    assert "请改用 .reshape" in hint and not _english_sentences(hint), chinese
    # A general entry that swallows an unknown hint line leaves the parts to be translated apart.
    assert translate_message("f(x) raised ValueError: bad\nHint: x", "zh_CN") == "f(x) 抛出了 ValueError：bad\n提示：x"


def test_every_written_question_has_a_chinese_model_answer_and_rubric():
    """The model answer and the rubric of every exercise's written question (the solution region of its
    cell graded by hand) are in the exercise's catalogue, translated, with no English sentence left, so
    the review page of a Chinese class shows them in Chinese (issue 29); chapters have none."""
    from autograder.engine.plan import MODEL_ANSWER_CONTEXT, RUBRIC_CONTEXT

    for page in extract.pages(ROOT):
        written = extract.written_answers(page, ROOT)
        if not page.docname.startswith("exercises/"):
            assert not written, page.docname
            continue
        assert [context for context, _ in written] == [MODEL_ANSWER_CONTEXT, RUBRIC_CONTEXT], page.docname
        held = {(m.context, m.id): m for m in catalogues.read_catalogue(catalogues.catalogue_path(page.docname, ROOT))}
        for context, english in written:
            entry = held.get((context, english))
            assert entry is not None and entry.string and not entry.fuzzy, (
                f"{page.docname}: the {context} is not translated: run `python -m autograder i18n update` and translate it")
            prose = reader_checks.visible_prose(entry.string)
            assert not reader_checks.english_runs(prose) and not reader_checks.typesetting_problems(prose), entry.string
            assert not catalogues.markup_problems(english, entry.string), (page.docname, context)


def test_no_chinese_page_glosses_a_term_twice():
    """A term's English follows it in full-width parentheses at its first use on a page only: 位置编码
    （positional encoding）, then 位置编码 (issue 29: "实现“位置编码（positional encoding）”一章中的各种位置编码
    （positional encoding）方案"). A gloss in Chinese (logits（未经 softmax 归一化的分数）) is given once too. The
    glossary, which pairs every term with its English, aside."""
    in_chinese = [f"（{t['gloss_as']}）" for t in reader_checks.load_terms(ROOT)["terms"] if "gloss_as" in t]
    repeated = []
    for page in extract.pages(ROOT):
        if page.docname in ("book/glossary", "book/references"):
            continue
        prose = "\n\n".join(reader_checks.page_prose(ROOT / "zh" / page.path.relative_to(ROOT)))
        repeated += [f"{page.docname}: {text} {prose.count(text)} times" for text in in_chinese if prose.count(text) > 1]
        repeated += [f"{page.docname}: {problem}" for problem in reader_checks.repeated_glosses(prose, {})]
    assert not repeated, "\n".join(repeated)

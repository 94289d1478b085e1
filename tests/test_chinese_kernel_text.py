"""What a Chinese learner reads around the prose (issue 29): the lines test cells print, hints passed to
``explain_errors`` by position, and no italics on Chinese characters."""

import ast
import random
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.course.i18n import catalogues, edition, extract, reader_checks, runtime_text
from autograder.engine.cells import parse_cell
from course_runtime import language
from course_runtime.language import english_letters

ROOT = REPO_ROOT


def test_italics_on_chinese_characters_are_found_and_bold_or_italic_english_is_not():
    """Chapter 01 set 增长*成为可能* in italics, which a browser slants (Chinese type has none); the first
    form of the check took the Chinese character before the asterisk for a letter and missed all 15."""
    found = reader_checks.italic_problems
    assert len(found("只是让增长*成为可能*：饱和。")) == 1
    assert len(found("即*句子嵌入*，与一_组_连续的头")) == 2
    assert found("这是 *键/值* 头")
    assert not found("把 *tired* 换成 *wide*；**粗体**不算；`a*b*c` 之外的 q_proj_x 与 2*3*4 也不算。")
    assert not found("* 列表的一项\n* 另一项")
    assert reader_checks.typesetting_problems("增长*成为可能*。"), "i18n check reads it through typesetting_problems"


# --- What a Chinese kernel prints --------------------------------------------------------------------

def _answered(exercise: Path, solution: Path) -> nbformat.NotebookNode:
    """``exercise`` with the solution's answer cells typed in (the released cells otherwise as they are)."""
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in read_notebook(solution).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = read_notebook(exercise)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = answers[grade_id]
    return nb


def _run(nb: nbformat.NotebookNode, tmp_path: Path, **kwargs) -> nbformat.NotebookNode:
    # the timeout only catches a hang; no cell of these notebooks needs more than seconds of CPU
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                   **kwargs).execute()
    return nb


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _printed(nb, grade_id: str) -> str:
    return next(_stdout(c) for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


EXERCISE_04 = Path("exercises") / "04-multi-head-attention" / "multi_head_attention.ipynb"
SOLUTION_04 = ROOT / "solutions" / "04-multi-head-attention" / "multi_head_attention.ipynb"

# Cells a learner might add to the Chinese notebook: their own stdout, redirect_stdout, a huge print.
LEARNER_CELLS = {
    "own stream": ("import io, sys\nsaved, sys.stdout = sys.stdout, io.StringIO()\n"
                   "print('Part A: visible tests passed.', 3)\nkept, sys.stdout = sys.stdout.getvalue(), saved\n"
                   "print(repr(kept))\nprint('Part B: visible tests passed.')"),
    "redirected": ("import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()) as into:\n"
                   "    print('Part C: visible tests passed.')\nprint(repr(into.getvalue()))"),
    "10 MB": "big = 'Part D: visible tests passed.' + 'x' * 10_000_000\nprint(big)\nprint(len(big))",
    "written back": "import sys\nprint(sys.stdout.write('Part D: visible tests passed.'))",
}


def test_a_chinese_kernel_prints_the_test_cells_lines_in_chinese_and_an_english_one_in_english(tmp_path):
    """The released Chinese exercise 04, answers typed in, run as a learner runs it: its test cells print
    "A 部分：可见测试通过。" and the Chinese answer line from the same code that prints "Part A: visible tests
    passed." and "Answer recorded: ..." in the English kernel. A learner's own stream, a redirect and a
    10 MB print go through as written; the kernel's stream still reports the length it was asked to write."""
    chinese = _answered(ROOT / "zh" / EXERCISE_04, SOLUTION_04)
    chinese.cells += [nbformat.v4.new_code_cell(source, metadata={"test": name}) for name, source in LEARNER_CELLS.items()]
    _run(chinese, tmp_path)
    english = _run(_answered(ROOT / EXERCISE_04, SOLUTION_04), tmp_path)
    for part, grade_id in zip("ABCD", ("test_split_heads", "test_merge_heads", "test_multi_head_attention",
                                       "test_attention_parameter_count")):
        assert _printed(chinese, grade_id) == f"{part} 部分：可见测试通过。\n"
        assert _printed(english, grade_id) == f"Part {part}: visible tests passed.\n"
    for grade_id in ("test_answer_q1", "test_answer_q2", "test_answer_q3"):
        value = _printed(english, grade_id).removeprefix("Answer recorded: ")
        assert _printed(english, grade_id).startswith("Answer recorded: ") and value.strip()
        assert _printed(chinese, grade_id) == "答案已记录为 " + value         # the answer itself as printed
    learner = {c.metadata["test"]: _stdout(c) for c in chinese.cells if "test" in c.metadata}
    assert learner["own stream"] == "'Part A: visible tests passed. 3\\n'\nB 部分：可见测试通过。\n"
    assert learner["redirected"] == "'Part C: visible tests passed.\\n'\n"
    assert learner["10 MB"] == "Part D: visible tests passed." + "x" * 10_000_000 + "\n10000029\n"
    assert learner["written back"] == "D 部分：可见测试通过。29\n"


def test_print_arguments_are_extracted_as_print_writes_them():
    """Each argument of ``print`` is one write: a literal, an f-string (a pattern) and the words a
    placeholder stands for; a bare value, a number or a lone name is not."""
    cell = ('corpus = "Tiny Shakespeare" if found else "the offline corpus"\n'
            'print("Answer recorded:", answer_q1.strip().lower())\nprint(f"{corpus}: {n:,} characters")\n'
            'print("output:", tuple(out.shape), " weights:", 3)\nprint(SMOLLM2)\nprint(42)\n')
    assert runtime_text.printed_strings([cell]) == [
        ("Answer recorded:", False), ("{corpus}: {n:,} characters", True), ("Tiny Shakespeare", False),
        ("the offline corpus", False), ("output:", False), (" weights:", False)]


def test_a_hint_passed_by_position_is_extracted_like_one_passed_by_name():
    """Issue 29: ``explain_errors("convert x with x.float() first", call=...)`` was never extracted; its
    hint added to a value it chose (exercise 11's ``"sample with ..." + kept``) is one pattern."""
    cell = ('with explain_errors("convert x with x.float() first", call="rope(x)"):\n    pass\n'
            'kept = "" if k is None else f"; top_k={k} keeps the most likely tokens"\n'
            'with explain_errors("sample with torch.multinomial" + kept, call="generate"):\n    pass\n'
            'with explain_errors(call="f(x)", hint="by name as before"):\n    pass\n')
    assert sorted(runtime_text.code_strings([cell], figures=False)) == sorted([
        ("convert x with x.float() first", False), ("sample with torch.multinomial{kept}", True),
        ("sample with torch.multinomial", False), ("; top_k={k} keeps the most likely tokens", True),
        ("by name as before", False)])


def test_update_flags_printed_strings_and_drift_names_a_lost_flag(tmp_path, monkeypatch):
    """A printed string's entry is flagged ``course-print`` (the only entries a kernel's output is matched
    against); ``i18n check`` names an entry whose flags are not the code's."""
    strings = {"figures": [], "messages": [("Answer recorded:", False), ("best rate: {r:g}", True),
                                           ("a test message", False)],
               "printed": ["Answer recorded:", "best rate: {r:g}"]}
    monkeypatch.setattr(runtime_text, "runtime_messages", lambda root: strings)
    path = runtime_text.runtime_catalogue_path("messages", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('msgid ""\nmsgstr ""\n\nmsgid "Answer recorded:"\nmsgstr "记录的答案是"\n', encoding="utf-8")
    assert any("entries whose flags are not the code's" in line for line in runtime_text.runtime_drift(tmp_path))
    runtime_text.update_runtime(tmp_path)
    ours = {runtime_text.PRINT_FLAG, runtime_text.PATTERN_FLAG}
    flags = {m.id: m.flags & ours for m in catalogues.read_catalogue(path) if m.id}
    assert flags == {"Answer recorded:": {runtime_text.PRINT_FLAG},
                     "best rate: {r:g}": {runtime_text.PRINT_FLAG, runtime_text.PATTERN_FLAG}, "a test message": set()}
    assert runtime_text.runtime_drift(tmp_path) == []


def test_only_a_whole_printed_string_is_translated_and_long_writes_are_not_read(monkeypatch):
    from course_runtime import language

    zh = language.translate_printed
    assert zh("Part A: visible tests passed.", "zh_CN") == "A 部分：可见测试通过。"
    assert zh(" weights:", "zh_CN") == " 权重："                     # the spaces print put there stay
    assert zh("best rate: 0.003", "zh_CN") == "最佳学习率：0.003"
    assert zh("Part A: visible tests passed. Really.", "zh_CN") == "Part A: visible tests passed. Really."
    assert zh("Part A: visible tests passed.", "en") == "Part A: visible tests passed."
    # a test message that is not printed is not matched against output
    assert zh("convert x with x.float() first", "zh_CN") == "convert x with x.float() first"

    def never(text):
        raise AssertionError(f"looked up a write of {len(text)} characters")

    monkeypatch.setattr(language.printed_catalogue("zh_CN"), "lookup", never)
    big = "best rate: " + "9" * (language.PRINTED_LONGEST + 1)
    assert zh(big, "zh_CN") is big and zh("64", "zh_CN") == "64" and zh("\n", "zh_CN") == "\n"


def test_a_hint_passed_by_position_reaches_a_chinese_learner_in_chinese(tmp_path):
    """Exercise 06's visible test explains an IndexError with ``explain_errors("x[perm] reorders the first
    axis, ...")``: a learner of the Chinese edition who permutes the batch axis reads that hint in Chinese
    (issue 29: "提示：convert x with x.float() ..." stayed English)."""
    exercise = read_notebook(ROOT / "zh" / "exercises" / "06-position-encodings" / "position_encodings.ipynb")
    wrong = ("def is_permutation_equivariant(f, x, perm, atol=1e-5):\n"
             "    return bool(torch.allclose(f(x[perm]), f(x)[perm], atol=atol))\n")   # the batch axis, not -2
    cells = []
    for cell in exercise.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and grade_id is None and not cells:
            cells.append(cell)                                          # the setup cell: install('zh_CN')
        elif cell.cell_type == "code" and grade_id is None and len(cells) == 1:
            cells.append(cell)                                          # the imports
        elif grade_id == "is_permutation_equivariant":
            cells.append(nbformat.v4.new_code_cell(wrong))
        elif grade_id == "test_is_permutation_equivariant":
            cells.append(cell)
    exercise.cells = cells
    _run(exercise, tmp_path, allow_errors=True)
    errors = [o for o in exercise.cells[-1].outputs if o.get("output_type") == "error"]
    assert errors and errors[0]["ename"] == "AssertionError", exercise.cells[-1].outputs
    message = errors[0]["evalue"]
    assert "\n提示：x[perm] 重排的是第一维，而这里它是批量维" in message, message
    assert "Hint" not in message and "reorders" not in message, message


# --- What the chapters print (issue 29: every line under a Chinese chapter's code cells was English) ----

def _chapters() -> dict[str, list[str]]:
    """``{docname: its code cells}`` of every chapter."""
    return {page.docname: [c.source for c in read_notebook(page.path).cells if c.cell_type == "code"]
            for page in extract.pages(ROOT) if page.is_notebook and page.docname.startswith("book/")}


def test_every_write_with_words_that_a_chapter_prints_has_a_chinese_translation():
    """Every print argument of every chapter that has words (as extracted), and, read apart from the
    extraction, every string literal a chapter passes to ``print``, has a translated entry flagged
    ``course-print`` (a copy is a translation: a model's name, a prompt the model reads in English)."""
    held = {m.id: m for m in catalogues.read_catalogue(runtime_text.runtime_catalogue_path("messages")) if m.id}
    untranslated, literals = [], []
    for docname, sources in _chapters().items():
        extracted = {text for text, _ in runtime_text.printed_strings(sources)}
        for tree in map(parse_cell, sources):
            literals += [(docname, a.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                         and getattr(node.func, "id", "") == "print" for a in node.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str) and re.search("[A-Za-z]{2}", a.value)]
        extracted |= {text for name, text in literals if name == docname}
        untranslated += [f"{docname}: {text!r}" for text in sorted(extracted)
                         if text not in held or runtime_text.PRINT_FLAG not in held[text].flags
                         or not held[text].string or held[text].fuzzy]
    assert len(literals) > 200, "the chapters' print calls were not read"
    # a write is looked up without the spaces around it: entries that differ only there must agree
    # (the chapters' "weights:" are values, an exercise's " weights:" a shape: both are 权重：)
    by_words = {}
    for text, message in held.items():
        if runtime_text.PRINT_FLAG in message.flags:
            by_words.setdefault(text.strip(), set()).add(message.string.strip())
    assert not {words: said for words, said in by_words.items() if len(said) > 1}
    assert not untranslated, f"{len(untranslated)} printed texts without a Chinese entry:\n" + "\n".join(untranslated[:20])


def test_a_table_header_is_one_text_and_a_row_joined_from_values_one_pattern():
    """A header made of padded literals (``f"{'contexts seen':>14}"``) is the text it writes, so its
    translation can keep the columns; a sum with a value that is no string is one pattern; a line whose
    only words are its values' is matched whole so that its values translate."""
    cell = ("print(f\"{'n':>2} {'contexts seen':>14}\")\n"
            "print(\"validation loss\\n\" + \"\".join(f\"{x:>8}\" for x in xs))\n"
            "for name in ['uniform scores']:\n    print(f\"{name:16s} p = {p}\")\n"
            "print(f\"{n:>5} {m:>6}\")\n")
    assert runtime_text.printed_strings([cell]) == [
        (" n  contexts seen", False), ("validation loss\n{''.join((f'(x:>8)' for x in xs))}", True),
        ("{name:16s} p = {p}", True), ("uniform scores", False)]


def test_a_translated_value_keeps_the_columns_its_format_gave_it():
    """Chapter 11 prints a table whose cells are values padded by their format specs (``f"{memory:>9s}"``
    right-aligns ``"none"``, ``f"{label:16s}"`` left-aligns its row label): a value the catalogue
    translates into fewer columns (无 is two, "none" four) still ends where the English one does, so the
    bars between the columns stay in line."""
    table = language.Catalogue([
        language.Entry("| {label:16s} | {speed:8.1f} | {memory:>9s} |", "| {label:16s} | {speed:8.1f} | {memory:>9s} |",
                       flags={language.PATTERN_FLAG}),
        language.Entry("none", "无"), language.Entry("without cache", "不用缓存"), language.Entry("ab", "甲乙丙")])
    english = [f"| {'without cache':16s} | {12.0:8.1f} | {'none':>9s} |", f"| {'ab':16s} | {3.0:8.1f} | {'ab':>9s} |",
               f"| {'without cache':16s} | {12.0:8.1f} | {'12.5 MiB':>9s} |"]
    chinese = [table.lookup(line) for line in english]

    def bars(line):
        return [language.display_width(line[:i]) for i, char in enumerate(line) if char == "|"]

    assert [line.count("无") + line.count("甲乙丙") for line in chinese] == [1, 2, 0], chinese
    assert [bars(line) for line in chinese] == [bars(line) for line in english], chinese
    assert chinese[2].endswith("|  12.5 MiB |"), chinese     # a value with no translation stays as printed


def _display_ends(line: str) -> list[int]:
    """The display column where each of a table line's cells ends (cells apart by two spaces or more)."""
    from course_runtime.language import display_width

    return [display_width(line[:m.end()]) for m in re.finditer(r"\S+(?: \S+)*", line)]


CHAPTER_CELLS = [
    "print(f\"{'n':>2} {'possible contexts V^(n-1)':>26} {'contexts seen':>14} {'unseen held-out n-grams':>24}\")",
    'print("stable, large scores:   ", [1.0, 0.0])\nprint("stable, negative scores:", [0.5, 0.5])',
    'print("NOTE: Tiny Shakespeare is not available here, so this run uses data.offline_corpus(), "\n'
    '      "a generated play-like text.\\n      Reason:", "no network.")',
    "print(\"scores:\", [1.0, 2.0])\nprint(\"the learner's own line:\", 3)",
]


def test_a_chinese_book_kernel_prints_the_chapters_lines_in_chinese_with_their_columns(tmp_path, monkeypatch):
    """Cells as the chapters write them, run in a kernel started as the Chinese book build starts its
    kernels (``$COURSE_LANGUAGE`` and the IPython profile that loads ``course_runtime.language``): the
    header of chapter 01's table and chapter 02's aligned labels come out Chinese with their columns where
    the English has them (a Chinese character is two columns wide), chapter 10's notice in Chinese line by
    line; a line the chapters do not print stays as written."""
    monkeypatch.setenv("COURSE_LANGUAGE", "zh_CN")
    monkeypatch.setenv("IPYTHONDIR", str(edition._kernel_profile(tmp_path / "ipython")))
    nb = _run(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CHAPTER_CELLS]), tmp_path)
    header, labels, notice, plain = (_stdout(cell).splitlines() for cell in nb.cells)
    english = f"{'n':>2} {'possible contexts V^(n-1)':>26} {'contexts seen':>14} {'unseen held-out n-grams':>24}"
    assert re.search("[\u4e00-\u9fff]", header[0]) and english_letters(header[0]) == 0, header
    assert _display_ends(header[0]) == _display_ends(english), (header[0], english)
    from course_runtime.language import display_width
    assert [display_width(line[:line.index("[")]) for line in labels] == [25, 25], labels
    assert labels[0].startswith("稳定 softmax") and labels[1].startswith("稳定 softmax"), labels
    assert notice[0].startswith("注意：") and notice[1] == "      原因： no network.", notice
    assert english_letters(notice[0].replace("Tiny Shakespeare", "").replace("data.offline_corpus()", "")) == 0, notice
    assert plain == ["分数： [1.0, 2.0]", "the learner's own line: 3"], plain


def test_the_chinese_sites_execution_cache_follows_the_printed_translations(tmp_path):
    """A changed translation of a printed text re-runs the Chinese chapters once (a new cache); a test
    message's translation, which no chapter shows, leaves the cache as it is."""
    po = runtime_text.runtime_catalogue_path("messages", tmp_path)
    po.parent.mkdir(parents=True)
    (tmp_path / "course_runtime" / "language.py").write_text("# the kernel's side\n", encoding="utf-8")

    def key(printed: str, message: str, fuzzy: bool = False) -> str:
        po.write_text('msgid ""\nmsgstr ""\n\n' + ("#, fuzzy\n" if fuzzy else "")
                      + f'#, course-print\nmsgid "scores:"\nmsgstr "{printed}"\n\n'
                      + f'msgid "a test message"\nmsgstr "{message}"\n', encoding="utf-8")
        return edition.execution_cache(tmp_path, tmp_path).name

    first = key("分数：", "一条测试消息")
    assert key("分数：", "另一条测试消息") == first
    assert len({first, key("得分：", "一条测试消息"), key("分数：", "一条测试消息", fuzzy=True)}) == 3


def _naive(msgid: str) -> re.Pattern:
    """The plain reading of an f-string message: each placeholder any text, tried at every length; one that
    ends the message may be empty (an optional hint: ``"expected {want}{hint}"``)."""
    pieces = re.split(r"\{[^{}]+\}", msgid)
    pattern = "(.+?)".join(map(re.escape, pieces))
    return re.compile(pattern[:-len("(.+?)")] + "(.*?)" if pieces[-1] == "" and len(pieces) > 1 else pattern, re.DOTALL)


def test_a_patterns_placeholders_match_as_the_plain_reading_does_without_trying_every_place():
    """The chapters' table rows brought patterns such as ``"{name:24s} {kv_heads:8d} {n:>17,} {a} MiB {b} MiB"``;
    tried the plain way, a learner's long line of spaced words took minutes per write in a Chinese kernel
    (time growing with its spaces to the fifth power). The pattern as compiled matches exactly the texts
    the plain reading matches, with the same values, and answers a 2,000-character line at once."""
    from course_runtime.language import _pattern

    rows = ["{name} {kv} {n} {a} MiB {b} MiB", "| {kind:16s} | {speed} | {memory:>9s} |", "{a}: {b}", "{a}{b} x {c}"]
    alphabet = ["a", " ", "MiB", "|", ":", "x", "b "]
    chooser = random.Random(29)
    for msgid in rows:
        compiled, names = _pattern(msgid)
        for _ in range(3000):
            text = "".join(chooser.choice(alphabet) for _ in range(chooser.randint(1, 14)))
            plain, ours = _naive(msgid).fullmatch(text), compiled.fullmatch(text)
            assert (plain is None) == (ours is None), (msgid, text)
            if plain:
                assert plain.groups() == tuple(ours.group(f"v{i}") for i in range(len(names))), (msgid, text)
    line = ("a b c " * 400)[:2000]
    assert _pattern(rows[0])[0].fullmatch(line) is None
    assert language.translate_printed(line, "zh_CN") == line

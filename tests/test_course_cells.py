"""Course cells of any edition and release are the course's (autograder/engine/plan.py, ``course_variants``): a
Chinese notebook, or one from an earlier release of the term, filled with right answers, is graded with no
note and no broken rule, while a learner's own edit of a course cell is still judged. A test or locked cell
is the course's when its code is (its comments and its helpers' docstrings are Chinese in the Chinese
edition); whatever the learner's copy holds, the instructor's cell runs."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.engine.plan import DEMO, FREE, MANUAL, SOLUTION, TEST, assemble, load_plan
from autograder.engine.policy import enforce

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "zh" / "exercises").iterdir() if p.is_dir())


def answered(plan, released: Path):
    """The released notebook ``released`` with every solution cell holding the course's answer."""
    learner = nbformat.read(released, as_version=4)
    answers = {c.key: c.source for c in plan.cells if c.kind in (SOLUTION, MANUAL)}
    for cell in learner.cells:
        key = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if key in answers:
            cell.source = answers[key]
    return learner


def verdict(plan, learner) -> tuple[list[str], list[str]]:
    assembly = assemble(plan, learner)
    return enforce(plan, assembly), assembly.notes


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_chinese_notebook_with_right_answers_is_not_flagged(assignment):
    for name, plan in load_plan(assignment, ROOT).notebooks.items():
        learner = answered(plan, ROOT / "zh" / "exercises" / assignment / f"{name}.ipynb")
        assert verdict(plan, learner) == ([], [])


def test_a_notebook_of_an_earlier_release_keeps_its_setup_cell():
    (plan,) = load_plan("04-multi-head-attention", ROOT).notebooks.values()
    learner = answered(plan, ROOT / "exercises" / "04-multi-head-attention" / f"{plan.name}.ipynb")
    setup = next(c for c in learner.cells if c.cell_type == "code" and "%pip" in c.source)
    setup.source = setup.source.replace("@main", "@v2026.1.0").replace("github.com/transformer-course",
                                                                         "github.com/a-fork")
    assert verdict(plan, learner) == ([], [])
    setup.source += "\nimport os"                                # the learner's own edit is judged
    flags, _ = verdict(plan, learner)
    assert any("module not allowed" in flag for flag in flags)


def test_course_cells_of_every_tagged_release_are_the_courses(tmp_path):
    """A fix release changed a course cell: learners who started from the tagged earlier release keep theirs."""
    assignment, name = "02-self-attention", "self_attention"
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder / assignment, tmp_path / folder / assignment)
    released = tmp_path / "exercises" / assignment / f"{name}.ipynb"
    earlier = json.loads(released.read_text())
    imports = next(c for c in earlier["cells"] if c["cell_type"] == "code" and "import torch" in "".join(c["source"]))
    imports["source"] = "import sys, math\nimport torch\n"        # the earlier release imported sys there
    released.write_text(json.dumps(earlier))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "release"], check=True)
    subprocess.run([*git, "tag", "v2026.1.0"], check=True)
    shutil.copy(ROOT / "exercises" / assignment / f"{name}.ipynb", released)   # the fix release

    (plan,) = load_plan(assignment, tmp_path).notebooks.values()
    learner = answered(plan, tmp_path / "exercises" / assignment / f"{name}.ipynb")
    learner_cell = next(c for c in learner.cells if c.get("id") == imports["id"])
    learner_cell.source = imports["source"]
    assert verdict(plan, learner) == ([], [])
    subprocess.run([*git, "tag", "-d", "v2026.1.0"], check=True, capture_output=True)
    (plan,) = load_plan(assignment, tmp_path).notebooks.values()
    flags, _ = verdict(plan, learner)
    assert any("module not allowed" in flag for flag in flags)      # without the tag it is the learner's edit


def test_a_cell_of_commands_the_learner_ran_is_skipped_without_a_flag():
    """Colab's way to check a notebook is a cell `!python -m autograder validate ...`: not graded code."""
    (plan,) = load_plan("02-self-attention", ROOT).notebooks.values()
    learner = answered(plan, ROOT / "exercises" / "02-self-attention" / f"{plan.name}.ipynb")
    learner.cells.append(nbformat.v4.new_code_cell("# check before submitting\n"
                                                   "!python -m autograder validate self_attention.ipynb"))
    assembly = assemble(plan, learner)
    assert enforce(plan, assembly) == [] and assembly.notes == []
    assert not any(cell.source.startswith("# check before") for cell in assembly.cells)
    learner.cells.append(nbformat.v4.new_code_cell("!ls\nx = 1"))    # code beside a command is judged
    assert enforce(plan, assemble(plan, learner))


# --- test and locked cells: the Chinese edition words their comments in Chinese ---------------------------


def _run(plan, learner) -> list[tuple[str | None, str]]:
    """What a rebuilt notebook runs of the course's test, locked and solution cells: the score rests on these."""
    return [(cell.key, cell.source) for cell in assemble(plan, learner).cells if cell.kind not in (FREE, DEMO)]


def _test_cell(learner, key: str):
    return next(c for c in learner.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == key)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_chinese_notebooks_test_cells_are_unchanged_and_run_the_instructors_cells(assignment):
    """(a) and (d): both editions, as released with right answers, get no note and run the same cells, each test
    the instructor's own (hidden tests included), whose comments are English, never the learner's copy."""
    for name, plan in load_plan(assignment, ROOT).notebooks.items():
        english = answered(plan, ROOT / "exercises" / assignment / f"{name}.ipynb")
        chinese = answered(plan, ROOT / "zh" / "exercises" / assignment / f"{name}.ipynb")
        assert assemble(plan, english).notes == [] and assemble(plan, chinese).notes == []
        assert _run(plan, chinese) == _run(plan, english)
        tests = {c.key: c.source for c in plan.cells if c.kind == TEST}
        assert all(source == tests[key] for key, source in _run(plan, chinese) if key in tests)


def _translated_test(plan, chinese) -> tuple[str, str]:
    """A test cell whose released Chinese copy differs from the English one (its comments are Chinese), with
    its Chinese source."""
    for c in plan.cells:
        if c.kind == TEST:
            source = _test_cell(chinese, c.key).source
            if source != c.released and re.search(r"#[^\n]*[\u4e00-\u9fff]", source):
                return c.key, source
    raise AssertionError("no test cell of the Chinese exercise has Chinese comments")


EDITS = {
    "an assert deleted": lambda source: re.sub(r"^( *)assert\b.*$", r"\1pass", source, count=1, flags=re.M),
    "a number changed": lambda source: re.sub(r"(?<![\w.])(\d+)(?![\w.])", lambda m: str(int(m[1]) + 1), source, count=1),
    "a comment added": lambda source: source + "\n# 这一格我改过",
    "a comment removed": lambda source: re.sub(r"[ \t]*#[^\n]*[\u4e00-\u9fff][^\n]*", "", source, count=1),
}


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("assignment", ["02-self-attention", "08-kv-cache"])
def test_a_chinese_learners_edited_test_cell_is_noted_and_the_original_runs(assignment, edit):
    """(b): an edit of a test cell's code (or a comment added or removed: its lines change) is a change, noted,
    and the instructor's cell runs as if it had not been made."""
    (plan,) = load_plan(assignment, ROOT).notebooks.values()
    chinese = answered(plan, ROOT / "zh" / "exercises" / assignment / f"{plan.name}.ipynb")
    untouched = _run(plan, chinese)
    key, source = _translated_test(plan, chinese)
    _test_cell(chinese, key).source = EDITS[edit](source)
    assert _test_cell(chinese, key).source != source, "the edit changes the cell"
    assert assemble(plan, chinese).notes == [
        f"The course cell `{key}` was changed in your notebook; the original was used."]
    assert _run(plan, chinese) == untouched


@pytest.mark.parametrize("edition", ["exercises", "zh/exercises"])
def test_a_comment_reworded_in_a_test_cell_is_no_change_and_earns_nothing(edition):
    """(c), decided: rewording what a comment says is not a change of the test (a Chinese learner's copy differs
    from the English in just that), so no note; the instructor's cell runs either way, so nothing is won or lost."""
    (plan,) = load_plan("02-self-attention", ROOT).notebooks.values()
    learner = answered(plan, ROOT / edition / "02-self-attention" / f"{plan.name}.ipynb")
    untouched = _run(plan, learner)
    key = next(c.key for c in plan.cells if c.kind == TEST and "#" in c.released)
    cell = _test_cell(learner, key)
    cell.source = re.sub(r"#[^\n]*", "# my own words: assert nothing, pass everything", cell.source, count=1)
    assert assemble(plan, learner).notes == [] and _run(plan, learner) == untouched


# --- test and locked cells: the Chinese edition words their helpers' docstrings in Chinese ----------------


def _test_with_docstrings(plan, learner) -> tuple[str, str, list[tuple[int, int, str]]]:
    """A test cell of ``learner`` whose helpers have docstrings: its key, its source and where they lie."""
    from autograder.engine.cells import docstring_offsets

    for c in plan.cells:
        if c.kind == TEST:
            source = _test_cell(learner, c.key).source
            if docstring_offsets(source):
                return c.key, source, docstring_offsets(source)
    raise AssertionError("no test cell defines a helper with a docstring")


def _reworded(source: str, spans, words: str) -> str:
    """``source`` with the text of its first docstring replaced by ``words``."""
    start, end, _ = spans[0]
    return source[:start] + words + source[end:]


@pytest.mark.parametrize("edition", ["exercises", "zh/exercises"])
@pytest.mark.parametrize("assignment", ["04-multi-head-attention", "07-three-architectures"])
def test_a_docstring_reworded_in_a_test_cell_is_no_change_and_earns_nothing(assignment, edition):
    """A docstring says what a helper is for and changes nothing that runs: reworded, on more lines or fewer, in
    either edition, it is no change (no note), and the instructor's cell runs either way."""
    for plan in load_plan(assignment, ROOT).notebooks.values():
        learner = answered(plan, ROOT / edition / assignment / f"{plan.name}.ipynb")
        untouched = _run(plan, learner)
        key, source, spans = _test_with_docstrings(plan, learner)
        for words in ("my own words: this test passes everything", "one line,\n    and another"):
            _test_cell(learner, key).source = _reworded(source, spans, words)
            assert assemble(plan, learner).notes == [] and _run(plan, learner) == untouched


def _quotes_changed(source: str, spans) -> str:
    """The first docstring between the other kind of triple quotes."""
    start, end, quote = spans[0]
    other = "'''" if quote == '"""' else '"""'
    return source[:start - len(quote)] + other + source[start:end] + other + source[end + len(quote):]


def _string_changed(source: str, spans) -> str:
    """The first string literal after the docstrings (an assert's message, a hint, a name) with a word added."""
    head, tail = source[:spans[-1][1] + 3], source[spans[-1][1] + 3:]
    return head + re.sub(r"(?<![\"'])([\"'])([^\"'\n]{3,})\1(?![\"'])", r"\1\2 too\1", tail, count=1)


DOCSTRING_EDITS = {
    "a docstring removed": lambda source, spans: source[:spans[0][0] - 3] + "pass" + source[spans[0][1] + 3:],
    "code after a docstring": lambda source, spans: source[:spans[0][1] + 3] + "; import os" + source[spans[0][1] + 3:],
    "its quotes changed": _quotes_changed,
    "another string changed": _string_changed,
}


@pytest.mark.parametrize("edit", DOCSTRING_EDITS)
@pytest.mark.parametrize("edition", ["exercises", "zh/exercises"])
def test_a_test_cell_edited_beside_its_docstrings_is_noted_and_the_original_runs(edition, edit):
    """Only a docstring's words may differ: removing one, code after it, its quotes or any other string (an
    assert's message, a hint) is a change of the test, noted, and the instructor's cell runs as if it were not."""
    (plan,) = load_plan("04-multi-head-attention", ROOT).notebooks.values()
    learner = answered(plan, ROOT / edition / "04-multi-head-attention" / f"{plan.name}.ipynb")
    untouched = _run(plan, learner)
    key, source, spans = _test_with_docstrings(plan, learner)
    _test_cell(learner, key).source = DOCSTRING_EDITS[edit](source, spans)
    assert _test_cell(learner, key).source != source, "the edit changes the cell"
    assert assemble(plan, learner).notes == [
        f"The course cell `{key}` was changed in your notebook; the original was used."]
    assert _run(plan, learner) == untouched


def test_the_chinese_test_cells_docstrings_are_chinese_and_their_code_the_courses():
    """Every docstring of a Chinese exercise's test and locked cells is Chinese, and the cell is the English one's
    code (the grader takes it as unchanged)."""
    from autograder.engine.cells import docstring_offsets, same_code

    checked = 0
    for assignment in ASSIGNMENTS:
        for name in load_plan(assignment, ROOT).notebooks:
            english = nbformat.read(ROOT / "exercises" / assignment / f"{name}.ipynb", as_version=4).cells
            chinese = nbformat.read(ROOT / "zh" / "exercises" / assignment / f"{name}.ipynb", as_version=4).cells
            for en, zh in zip(english, chinese):
                meta = en.get("metadata", {}).get("nbgrader", {})
                if en.cell_type != "code" or meta.get("solution") or not (meta.get("grade") or meta.get("locked")):
                    continue
                assert same_code(zh.source, en.source), f"{assignment}: {meta.get('grade_id')}"
                for start, end, _ in docstring_offsets(zh.source):
                    checked += 1
                    assert re.search(r"[\u4e00-\u9fff]", zh.source[start:end]), \
                        f"{assignment}: {meta.get('grade_id')}: English docstring {zh.source[start:end][:60]!r}"
    assert checked > 100, "the test cells' helpers have docstrings"


def test_same_code_takes_only_a_docstrings_words_as_prose():
    """A docstring is the first statement of a function or class, a string alone: a string anywhere else, one
    written with escapes (compared as code) or a docstring followed by code is code."""
    from autograder.engine.cells import same_code

    course = "def f(x):\n    '''Twice x.'''\n    return 2 * x\n\n'''A string statement.'''\nassert f(1) == 2, 'f(1)'"
    assert same_code(course.replace("Twice x.", "两倍的 x，\n    分两行。"), course)
    assert not same_code(course.replace("A string statement.", "一句话。"), course)
    assert not same_code(course.replace("'f(1)'", "'f(2)'"), course)
    assert not same_code(course.replace("'''Twice x.'''", "'''Twice x.''' + str(exec('import os'))"), course)
    assert not same_code(course.replace("Twice x.", "Twice\\x41."), course), "an escape is compared as code"
    assert not same_code(course.replace("    '''Twice x.'''\n", ""), course)


def test_feedback_shows_a_chinese_docstring_on_other_lines_with_the_hidden_note_in_place():
    """edition_view: the instructor's cell with its hidden region replaced by the note, its visible lines from the
    Chinese copy even where a docstring spans fewer lines; a hidden region inside a docstring gives no view."""
    from autograder.engine.plan import HIDDEN_BEGIN, HIDDEN_END, HIDDEN_NOTE, edition_view

    source = (f"def f():\n    '''Twice,\n    as a float.'''\n    return 2.0\n"
              f"### {HIDDEN_BEGIN}\nassert f() > 1  # secret\n### {HIDDEN_END}\nassert f() == 2  # the value")
    chinese = "def f():\n    '''两倍，浮点数。'''\n    return 2.0\nassert f() == 2  # 值"
    assert edition_view(source, chinese) == (
        f"def f():\n    '''两倍，浮点数。'''\n    return 2.0\n{HIDDEN_NOTE}\nassert f() == 2  # 值")
    assert edition_view(source, chinese.replace("== 2", "== 3")) is None
    inside = (f"def f():\n    '''Twice,\n### {HIDDEN_BEGIN}\nsecret\n### {HIDDEN_END}\n"
              "    as a float.'''\n    return 2.0")
    assert edition_view(inside, "def f():\n    '''两倍，浮点数。'''\n    return 2.0") is None


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_chinese_feedback_page_shows_every_test_cell_with_chinese_docstrings_and_no_hidden_line(assignment):
    """What feedback shows a Chinese notebook of each test cell (engine/feedback.py ``course_text``): the Chinese
    edition's visible part, its docstrings Chinese, the hidden note where the hidden tests were, no hidden line."""
    from autograder.engine.cells import docstring_offsets, same_code
    from autograder.engine.feedback import course_text
    from autograder.engine.plan import HIDDEN_NOTE, strip_hidden_region
    from course_runtime.language import translate

    notes = {HIDDEN_NOTE, translate(HIDDEN_NOTE, "messages", "zh_CN")}       # the page's language, where translated
    for name, plan in load_plan(assignment, ROOT).notebooks.items():
        shown = course_text(assignment, name, "zh_CN", ROOT)
        for cell in (c for c in plan.cells if c.kind == TEST):
            english, hidden = strip_hidden_region(cell.source)
            chinese = shown[english]            # every test cell has its Chinese view
            assert any(line.strip() in notes for line in chinese.split("\n")) == hidden
            assert not any(line in chinese for line in plan.hidden_lines if line not in cell.released)
            visible = "\n".join(line for line in chinese.split("\n") if line.strip() not in notes)
            assert same_code(visible, cell.released)
            assert all(re.search(r"[\u4e00-\u9fff]", visible[start:end])
                       for start, end, _ in docstring_offsets(visible))


def test_no_docstring_of_a_hidden_test_is_a_message_or_reaches_the_chinese_edition():
    """The helpers that hidden tests define keep their docstrings to the grader: none is in a catalogue that ships
    (the pages' or course_runtime's) or in a Chinese exercise, while the visible ones are in the catalogues."""
    from autograder.course.i18n.catalogues import read_catalogue
    from autograder.engine.cells import docstring_offsets
    from autograder.engine.plan import hidden_spans, load_notebook_plan

    visible, secret = set(), set()
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in (c for c in load_notebook_plan(path).cells if c.kind == TEST):
            hidden = hidden_spans(cell.source)
            for start, end, _ in docstring_offsets(cell.source):
                inside = any(h_start <= start < h_end for h_start, h_end in hidden)
                (secret if inside else visible).add(cell.source[start:end])
    secret -= visible              # none today: a hidden test that defines a documented helper is kept to the grader
    shipped = [*(ROOT / "locales").rglob("*.po"), *(ROOT / "course_runtime" / "locales").rglob("*.po")]
    catalogued = {m.id for path in shipped for m in read_catalogue(path) if m.id}
    assert not secret & catalogued, sorted(secret & catalogued)[:3]
    assert visible <= catalogued, sorted(visible - catalogued)[:3]
    chinese = "\n".join(c.source for path in (ROOT / "zh" / "exercises").glob("*/*.ipynb")
                        for c in nbformat.read(path, as_version=4).cells)
    assert not any(text in chinese for text in secret)


def test_every_docstring_a_chinese_exercise_shows_is_chinese():
    """Exercise 07's weight loader, a plain cell of given code, showed its English docstring in the Chinese
    notebook (sixth review, item 80): every docstring of a Chinese exercise's code, the learner's functions, the
    tests' helpers and the given code alike, holds Chinese and its cell still parses."""
    import ast

    from autograder.course.i18n.docstring_text import docstrings
    from autograder.course.notebooks import SETUP_CELL_MARKERS

    english = []
    for path in sorted((ROOT / "zh" / "exercises").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and not cell.source.lstrip().startswith(SETUP_CELL_MARKERS):
                ast.parse(cell.source)
                english += [f"{path.name}: {body[:60]!r}" for body in docstrings(cell.source)
                            if not re.search(r"[\u4e00-\u9fff]", body)]
    assert not english, english


def test_a_test_cells_hidden_helper_docstring_is_never_extracted_and_given_codes_is(tmp_path):
    """The extraction (course/i18n/docstring_text.py ``test_docstrings``) reads a test cell's visible part only: a
    helper defined between the hidden markers keeps its docstring out of every catalogue. An exercise's given code
    (a plain cell, such as exercise 07's weight loader) is read by the learner, so its docstrings are messages; a
    chapter's are not, nor the setup cell's."""
    from autograder.course.i18n.docstring_text import test_docstrings
    from autograder.course.i18n.extract import Page
    from autograder.engine.plan import HIDDEN_BEGIN, HIDDEN_END

    nb = nbformat.v4.new_notebook()
    test = nbformat.v4.new_code_cell(f"def shown():\n    \"\"\"What a learner reads.\"\"\"\n\n### {HIDDEN_BEGIN}\n"
                                     "def secret():\n    \"\"\"The edge case the hidden test tries.\"\"\"\n"
                                     f"### {HIDDEN_END}\nassert shown() is None")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1, "grade_id": "t"}
    answer = nbformat.v4.new_code_cell('def f():\n    """What a learner reads."""')
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False, "grade_id": "a"}
    given = nbformat.v4.new_code_cell('def load(model):\n    """Copy the weights into a model."""')
    setup = nbformat.v4.new_code_cell('# Setup: the course\ndef install():\n    """Not the edition\'s own."""')
    nb.cells = [setup, test, answer, given]
    nbformat.write(nb, tmp_path / "ex.ipynb")
    page = Page("exercises/ex", tmp_path / "ex.ipynb")
    assert test_docstrings(page) == ["Copy the weights into a model."], (
        "the test's visible one is the solution's already; the hidden one and the setup cell's are never read")
    assert test_docstrings(Page("book/ex", tmp_path / "ex.ipynb")) == [], "a chapter's given code is not an exercise"
    nb.cells[2].source = 'def f():\n    """Another."""'
    nbformat.write(nb, tmp_path / "ex2.ipynb")
    assert test_docstrings(Page("exercises/ex2", tmp_path / "ex2.ipynb")) == ["What a learner reads.",
                                                                               "Copy the weights into a model."]

"""The hidden tests' words in the learner's language, from a catalogue that stays with the grader (issue 29):
a Chinese page says what a failed hidden check's author wrote in Chinese, the English page is unchanged,
nothing a learner receives holds those words, and `i18n check` names a text of a hidden test left
without its entry or its translation."""

import html
import re
import shutil
import tomllib
from pathlib import Path

import nbformat
from conftest import fake_main, in_process_referee

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.core.outcomes import CellOutcome, Failure
from autograder.core.results import GradeResult, Status
from autograder.course.i18n import edition, hidden_text
from autograder.course.i18n.catalogues import read_catalogue, write_catalogue
from autograder.course.notebooks import dumps_normalized
from autograder.engine.disclosure import hidden_catalogue, hidden_check_in, shown_test_reason
from autograder.engine.feedback import course_text, page_record
from autograder.engine.grade_one import in_learners_language
from autograder.engine.pages import render_page
from autograder.engine.plan import TEST, assemble, load_plan
from autograder.engine.referee import hidden_failure, hidden_line_numbers, hidden_words
from course_runtime.language import notebook_language

ASSIGNMENT, NOTEBOOK = "02-self-attention", "self_attention"
# Two English words or more in a row: a sentence, or a part of one, left untranslated (not code's
# arguments, ``amax(dim=dim, keepdim=True)``).
ENGLISH_RUN = re.compile(r"(?<![\w=(.])[A-Za-z]{2,}(?:[ ,'-]+[A-Za-z]{2,})+(?![\w=(])")


def english_left(text: str) -> list[str]:
    """The runs of English words in ``text`` outside backticks, names that stay English (Python) aside."""
    return ENGLISH_RUN.findall(re.sub(r"`[^`]*`|\bPython\b", " ", text))


def hidden_verdicts(source: str) -> list:
    """The referee's verdict on a failed ``assert`` at each hidden line of test cell ``source`` whose
    author wrote words for it (the verdict :func:`hidden_failure` reaches from a traceback there)."""
    verdicts = []
    for line in sorted(hidden_line_numbers(source)):
        verdict = hidden_failure(AssertionError("expected 0.5, got 0.25 at (3, 1)"), source, [line])
        if verdict.failure is Failure.HIDDEN_CHECK and (verdict.words or verdict.hint):
            verdicts.append(verdict)
    return verdicts


def graded_page(edition_folder: str, test_key: str, verdict) -> tuple[str, str]:
    """The feedback page of ``edition_folder``'s release of the assignment, graded with ``verdict`` as
    the failure of test cell ``test_key`` (every other cell passing), as grading makes it: the reason
    :func:`shown_test_reason` words, put in the notebook's language, the page's record, the page. Also
    the row of that test."""
    nb_plan = load_plan(ASSIGNMENT, REPO_ROOT).notebooks[NOTEBOOK]
    learner = read_notebook(REPO_ROOT / edition_folder / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    language = notebook_language(learner)
    assembly = assemble(nb_plan, learner)
    failed = CellOutcome("error", shown_test_reason(verdict, after_hidden=True), verdict=verdict)
    outcomes = [failed if cell.key == test_key else CellOutcome("ok") if cell.cell_type == "code" else None
                for cell in assembly.cells]
    outcomes = in_learners_language(assembly.cells, outcomes, learner)
    scores = {c.key: (0.0 if c.key == test_key else c.points) for c in assembly.cells if c.kind == TEST}
    record = page_record(student="张三", assignment=ASSIGNMENT, notebook=NOTEBOOK, cells=assembly.cells,
                         outcomes=outcomes, scores=scores, notes=[], hidden=nb_plan.hidden_lines,
                         language=language, course_text=course_text(ASSIGNMENT, NOTEBOOK, language))
    result = GradeResult("张三", ASSIGNMENT, "graded", score=sum(scores.values()), max_score=sum(scores.values()) + 1,
                         kind=Status.GRADED, cells={f"{NOTEBOOK}:{k}": v for k, v in scores.items()})
    page = render_page(record, result, automatic=result.score)
    rows = re.findall(r"<td class='fail'>(.*?)</td></tr>", page, flags=re.S)
    assert len(rows) == 1, rows
    return page, rows[0]


# A learner's answer that passes 02's visible test (float32) and fails its hidden check in float64, whose
# tolerance float32 arithmetic misses: the check's hint is the hidden test's own.
FLOAT32_ANSWER = """
import torch

def project_qkv(x, w_q, w_k, w_v):
    return tuple((x.float() @ w.float()).to(x.dtype) for w in (w_q, w_k, w_v))
"""


def test_a_chinese_page_gives_a_failed_hidden_checks_words_in_chinese_and_the_english_page_in_english(monkeypatch):
    """02's real test cell run by the referee against an answer that fails only its hidden part: the
    Chinese page says the hidden check's hint in the words of the hidden catalogue, with no English sentence
    left, in code or not; the English page says what it always said."""
    fake_main(monkeypatch, FLOAT32_ANSWER)
    cell = next(c for c in load_plan(ASSIGNMENT, REPO_ROOT).notebooks[NOTEBOOK].cells if c.key == "test_project_qkv")
    referee = in_process_referee(["import torch", "from course_runtime.testing import check_close, check_shape, seeded"])
    verdict = referee.run_test(cell.source)
    assert verdict.failure is Failure.HIDDEN_CHECK and verdict.hint in hidden_words(cell.source), verdict
    table = hidden_catalogue("zh_CN")
    english_page, english_row = graded_page("exercises", cell.key, verdict)
    assert "a hidden check failed" in english_row and html.escape(verdict.hint) in english_row, english_row
    chinese_page, row = graded_page("zh/exercises", cell.key, verdict)
    assert "<html lang='zh-CN'>" in chinese_page
    assert "一项隐藏检查未通过" in row and html.escape(table[verdict.hint]) in row, row
    assert verdict.hint not in html.unescape(chinese_page)
    said = html.unescape(re.sub(r"<code>.*?</code>", " ", row, flags=re.S))
    assert re.search(r"[\u4e00-\u9fff]", said) and not english_left(said), row
    assert not english_left(html.unescape(" ".join(re.findall(r"<code>(.*?)</code>", row)))), row


def test_every_hidden_checks_words_read_in_chinese():
    """Every hidden check of every solution, failing where its author wrote words for it: the reason a
    Chinese page gives has no English sentence outside code (a name in backticks stays code), and an
    English notebook's reason is the one :func:`shown_test_reason` gives."""
    seen = 0
    for notebook in sorted((REPO_ROOT / "solutions").glob("*/*.ipynb")):
        for cell in read_notebook(notebook).cells:
            for verdict in hidden_verdicts(cell.source) if cell.cell_type == "code" else ():
                seen += 1
                assert hidden_check_in(verdict, "en") == shown_test_reason(verdict, after_hidden=True)
                said = hidden_check_in(verdict, "zh_CN")
                left = english_left(said)
                assert re.search(r"[\u4e00-\u9fff]", said) and not left, (notebook.name, cell.get("id"), said, left)
    assert seen >= 50, seen


def test_a_text_the_catalogue_lacks_stays_english_and_is_quoted_apart_on_the_chinese_page():
    """A hidden check whose words have no entry yet (an author added it after the last translation): the
    sentence around it is Chinese and the English is shown apart as code, never set in the sentence."""
    from autograder.core.outcomes import Verdict

    verdict = Verdict(Failure.HIDDEN_CHECK, "", words="the causal mask leaks future tokens",
                      hint="fill the masked scores before the softmax")
    assert verdict.words not in hidden_catalogue("zh_CN") and verdict.hint not in hidden_catalogue("zh_CN")
    key = next(c.key for c in load_plan(ASSIGNMENT, REPO_ROOT).notebooks[NOTEBOOK].cells if c.kind == TEST)
    _, row = graded_page("zh/exercises", key, verdict)
    assert f"<code>{verdict.words}</code>" in row and f"<code>{verdict.hint}</code>" in row, row
    assert "一项隐藏检查未通过" in row and "提示：" in row, row


def shipped_files() -> list[Path]:
    """What a learner receives: the released exercises of both editions and the files that installing the
    course (the Colab setup cell's pip install) puts in place, read from pyproject.toml's packages and
    package data as setuptools reads them (Python modules of each package, the data files its globs name)."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = config.get("package-dir", {})
    files = set()
    for package in config["packages"]:
        folder = REPO_ROOT / folders.get(package, package.replace(".", "/"))
        for pattern in ["*.py"] + config.get("package-data", {}).get(package, []):
            files |= {p for p in folder.glob(pattern) if p.is_file()}
    for released in ("exercises", "zh/exercises"):
        files |= {p for p in (REPO_ROOT / released).rglob("*") if p.is_file()}
    return sorted(files)


def test_a_released_course_holds_none_of_the_hidden_words():
    """The hidden catalogue is not in the package's data, no released notebook has a hidden region, and no
    text of a hidden check (a message, a name, a hint, as the referee reads them), nor its translation, is a
    text of what a learner receives: a released notebook's code as the referee reads it, or an entry of a
    catalogue that ships (its placeholders read as the referee's ``…``)."""
    path = hidden_text.hidden_catalogue_path(REPO_ROOT)
    entries = {m.id: m.string for m in read_catalogue(path) if m.id}
    assert len(entries) >= 50 and all(entries.values())
    shipped = shipped_files()
    assert path not in shipped and not any("autograder/engine/locales" in p.as_posix() for p in shipped)
    public = set()
    for file in shipped:
        if file.suffix == ".ipynb":
            nb = read_notebook(file)
            for cell in nb.cells:
                assert "BEGIN HIDDEN TESTS" not in cell.source, file
                if cell.cell_type == "code":       # every text an author wrote in it, as if it were hidden
                    public.update(hidden_words(f"### BEGIN HIDDEN TESTS\n{cell.source}\n### END HIDDEN TESTS"))
        elif file.suffix == ".po":
            for message in read_catalogue(file):
                public.update({re.sub(r"\{[^{}]+\}", "…", message.id or ""), message.string or ""})
    assert public, "the released notebooks hold visible tests"
    leaked = sorted(text for text in list(entries) + list(entries.values()) if text in public)
    assert not leaked, leaked


def test_i18n_check_names_a_hidden_text_without_its_entry_or_translation(tmp_path):
    """``i18n update`` puts every text of a hidden region into the hidden catalogue, with its cell's id; ``i18n
    check`` (:func:`edition.problems`) reports an untranslated one, and one an author added after it."""
    root = tmp_path
    shutil.copy(REPO_ROOT / "_config.yml", root / "_config.yml")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n", encoding="utf-8")
    (root / "book").mkdir()
    (root / "book" / "intro.md").write_text("# Intro\n\nWelcome.\n", encoding="utf-8")
    source = ('check_close(weights, expected, name="weights")\n### BEGIN HIDDEN TESTS\n'
              'for n in (3, 5):\n    check_close(attend(n), reference(n), name=f"weights for {n} keys",\n'
              '                hint="divide by the square root of the key size")\n'
              'assert ok, "the causal mask must hide later keys"\n### END HIDDEN TESTS\n')
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, id="test_weights")]
    notebook = root / "solutions" / "01-tiny" / "tiny.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text(dumps_normalized(nb), encoding="utf-8")

    def hidden_lines() -> list[str]:
        return [p for p in edition.problems(root, complete=True) if "hidden tests" in p]

    assert any("3 texts of hidden tests are missing" in p for p in hidden_lines()), hidden_lines()
    edition.update(root)
    path = hidden_text.hidden_catalogue_path(root)
    catalog = read_catalogue(path)
    assert [m.id for m in catalog if m.id] == ["weights for … keys", "divide by the square root of the key size",
                                               "the causal mask must hide later keys"]
    cell_id = read_notebook(notebook).cells[0].id
    assert all(m.auto_comments == [f"hidden test cell {cell_id}"] and m.locations == [("solutions/01-tiny/tiny.ipynb", 1)]
               for m in catalog if m.id)
    assert any("3 untranslated" in p for p in hidden_lines()), hidden_lines()
    for message, chinese in zip([m for m in catalog if m.id], ["有 … 个键时的权重", "除以键维度的平方根", "因果掩码必须挡住后面的键"]):
        message.string = chinese
    write_catalogue(catalog, path)
    assert hidden_lines() == []
    nb.cells[0].source = source.replace("### END", 'assert done, "the rows must sum to one"\n### END')
    notebook.write_text(dumps_normalized(nb), encoding="utf-8")
    assert any("1 texts of hidden tests are missing" in p and "the rows must sum to one" in p
               for p in hidden_lines()), hidden_lines()


def test_the_hidden_catalogue_is_in_step_with_the_solutions_and_translated():
    """Every text of the solutions' hidden regions has its translation (another helper's new hidden check
    shows up here, named, until ``i18n update`` and a translator add it)."""
    assert hidden_text.hidden_problems(REPO_ROOT) == []

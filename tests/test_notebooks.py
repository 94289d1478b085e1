"""Every committed notebook: normal form, setup cell, badges, exercises in sync, and a grading round trip.

Parametrised over the real chapters (book/*.ipynb) and assignments (solutions/*/), so chapters added
later are covered automatically; with none yet, the tests are skipped.
"""

import dataclasses
import hashlib
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import run_once

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.core.files import list_assignments
from autograder.course.i18n import catalogues, docstring_text
from autograder.course.notebooks import convention_problems, dumps_normalized, has_outputs, notebook_paths
from autograder.course.release import generate
from autograder.engine.batch import grade

ROOT = REPO_ROOT
ASSIGNMENTS = list_assignments(ROOT)
ALL_NOTEBOOKS = notebook_paths(ROOT)
COURSE_NOTEBOOKS = notebook_paths(ROOT, ["book", "solutions", "exercises"])


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".ipynb_checkpoints" not in p.parts}


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_id)
def test_notebook_is_stored_in_normal_form(path):
    nb = read_notebook(path)
    assert not has_outputs(nb), f"{_id(path)} carries outputs; run `make normalize`"
    assert path.read_text(encoding="utf-8") == dumps_normalized(nb), (
        f"{_id(path)} is not in normal form; run `make normalize`")


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=_id)
def test_notebook_starts_with_setup_cell_and_colab_badge(path):
    problems = convention_problems(path, ROOT)
    assert not problems, f"{_id(path)}: " + "; ".join(problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercises_are_in_sync_with_solutions(assignment, tmp_path):
    generate([assignment], root=ROOT, output_dir=tmp_path)
    committed = ROOT / "exercises" / assignment
    assert committed.is_dir(), f"exercises/{assignment} is missing; run `make exercises`"
    assert _digests(committed) == _digests(tmp_path / assignment), (
        f"exercises/{assignment} is out of date with solutions/{assignment}; run `make exercises`")


def _with_answers(exercise: Path, solution: Path, docstrings: dict[str, str] | None = None) -> str:
    """``exercise`` with each solution cell's source taken from ``solution`` (matched by grade id), its
    docstrings translated with ``docstrings`` (the Chinese edition's): what a learner who worked in
    that notebook hands in."""
    answers = {cell.metadata["nbgrader"]["grade_id"]: docstring_text.translate_docstrings(cell.source, docstrings or {})
               for cell in read_notebook(solution).cells if cell.metadata.get("nbgrader", {}).get("solution")}
    nb = read_notebook(exercise)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = answers[grade_id]
    return dumps_normalized(nb)


def _round_trips(work: Path) -> dict:
    """Grade the solution and the released blank exercise of every assignment, in both editions, as one
    batch (the job slots' referees start once, not once per assignment), then grade the written answers
    by hand.
    Returns ``{"<assignment>/<student>": result fields}``."""
    released = [a for a in ASSIGNMENTS if (ROOT / "exercises" / a).is_dir()]
    for assignment in released:
        for student, folder in (("solution", "solutions"), ("blank", "exercises")):
            shutil.copytree(ROOT / folder / assignment, work / "submissions" / student / assignment)
        # The Chinese edition: its blank exercise, and the same notebook with the solution's answers typed in.
        shutil.copytree(ROOT / "zh" / "exercises" / assignment, work / "submissions" / "zh-blank" / assignment)
        for notebook in (ROOT / "zh" / "exercises" / assignment).glob("*.ipynb"):
            target = work / "submissions" / "zh-solution" / assignment / notebook.name
            target.parent.mkdir(parents=True, exist_ok=True)
            docstrings = catalogues.translations(f"exercises/{assignment}/{notebook.stem}", ROOT,
                                                 context=docstring_text.DOCSTRING_CONTEXT)
            assert docstrings, f"the Chinese {assignment} has no translated docstrings"
            target.write_text(_with_answers(notebook, ROOT / "solutions" / assignment / notebook.name, docstrings),
                              encoding="utf-8")
    results = grade(work / "submissions", "all", work / "out", root=ROOT, progress=False)
    hand = _grade_by_hand(work / "out")
    return {f"{r.assignment}/{r.student}": {**dataclasses.asdict(r), **hand.get((r.student, r.assignment), {})}
            for r in results}


@pytest.fixture(scope="module")
def round_trip(request, tmp_path_factory):
    """One assignment's four graded notebooks (solution, blank, zh-solution, zh-blank), from the batch
    that grades every assignment once per session."""
    assignment = request.param
    if not (ROOT / "exercises" / assignment).is_dir():
        pytest.fail(f"exercises/{assignment} is missing; run `make exercises`")
    graded = run_once(tmp_path_factory, "round-trips", _round_trips)
    return {key.partition("/")[2]: SimpleNamespace(**fields) for key, fields in graded.items()
            if key.partition("/")[0] == assignment}


def _grade_by_hand(out: Path) -> dict[tuple[str, str], dict]:
    """Grade the written answers as an instructor on the review page would: full points for an answer,
    0 for a cell left as released; then merge. Returns, per learner and assignment, the hand-graded
    cells, which of them were blank, and the score and ``needs_manual_grade`` after the merge."""
    from autograder.instructor.manual import HandScore, merge_manual_scores, write_hand_scores
    from autograder.instructor.review import load_questions

    questions = load_questions(out, ROOT)
    scores = {(e.learner, q.assignment, q.key): HandScore(0.0 if e.blank else q.max_points, "", e.digest)
              for q in questions for e in q.entries}
    write_hand_scores(out, scores)
    merged = {(r.learner, r.assignment): r for r in merge_manual_scores(out, None).results}
    found: dict[tuple[str, str], dict] = {}
    for q in questions:
        for e in q.entries:
            mine = found.setdefault((e.learner, q.assignment), {"hand_graded": [], "blank_answers": [], "unstored": []})
            mine["hand_graded"].append(q.key)
            mine["blank_answers"] += [q.key] if e.blank else []
            mine["unstored"] += [q.key] if e.answer is None else []
    for pair, mine in found.items():
        mine.update(score_after_hand_grading=merged[pair].score,
                    waiting_after_hand_grading=merged[pair].needs_manual_grade)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("round_trip", ASSIGNMENTS, indirect=True)
@pytest.mark.parametrize("student", ["solution", "zh-solution"])
def test_solution_gets_full_marks_once_its_written_answers_are_graded(round_trip, student):
    result = round_trip[student]
    assert getattr(result, "hand_graded", None), "the assignment has no written answer graded by hand"
    assert not result.unstored, f"the grader stored no answer for {result.unstored}"
    assert not result.blank_answers, f"the model answers of {result.blank_answers} look blank"
    assert not result.waiting_after_hand_grading
    assert result.score_after_hand_grading == result.max_score


@pytest.mark.slow
@pytest.mark.parametrize("round_trip", ASSIGNMENTS, indirect=True)
@pytest.mark.parametrize("student", ["blank", "zh-blank"])
def test_blank_exercise_is_zero_after_hand_grading(round_trip, student):
    result = round_trip[student]
    assert sorted(result.blank_answers) == sorted(result.hand_graded), "an untouched answer cell counts as blank"
    assert result.score_after_hand_grading == 0 and not result.waiting_after_hand_grading


@pytest.mark.slow
@pytest.mark.parametrize("round_trip", ASSIGNMENTS, indirect=True)
@pytest.mark.parametrize("student", ["solution", "zh-solution"])
def test_solution_autogrades_to_full_marks(round_trip, student):
    result = round_trip[student]
    assert result.status == "graded", result.status
    autograded = {cell: score for cell, score in result.cells.items() if score is not None}
    assert autograded, "the assignment has no autograded cells"
    short = {cell: f"{score:g} of {result.cell_max_scores[cell]:g}" for cell, score in autograded.items()
             if score != result.cell_max_scores[cell]}
    assert not short, f"the solution loses points in {short}"
    assert not result.flags, f"the model answers are flagged for the instructor: {result.flags}"


@pytest.mark.slow
@pytest.mark.parametrize("round_trip", ASSIGNMENTS, indirect=True)
@pytest.mark.parametrize("student", ["blank", "zh-blank"])
def test_blank_exercise_autogrades_to_zero(round_trip, student):
    result = round_trip[student]
    assert result.status == "graded", f"the blank exercise must grade without crashing: {result.status}"
    earned = {cell: score for cell, score in result.cells.items() if score}
    assert not earned, f"the blank exercise earns points in {earned}; those tests pass without any code"
    assert result.score == 0


# \text{...} and the other text-mode commands: MathJax 3 (without its textmacros extension, which the
# book does not load) shows their content verbatim, so "\text{kv\_heads}" appears with its backslash.
# Math-mode names render an escaped underscore correctly: \mathrm{kv\_heads}, \operatorname{lm\_head}.
_TEXT_MODE = re.compile(r"\\(?:text|textrm|textit|textbf|texttt|textsf|textnormal|mbox)\s*\{")


def _escaped_underscores_in_text_mode(markdown: str) -> list[str]:
    """Every ``\\text{...}`` (or another text-mode command) of ``markdown`` whose braces hold ``\\_``."""
    found = []
    for match in _TEXT_MODE.finditer(markdown):
        depth, end = 1, match.end()
        while end < len(markdown) and depth:
            depth += {"{": 1, "}": -1}.get(markdown[end], 0) if markdown[end - 1] != "\\" else 0
            end += 1
        if "\\_" in markdown[match.end():end - 1]:
            found.append(markdown[match.start():end])
    return found


def test_escaped_underscores_in_text_mode_are_found():
    assert _escaped_underscores_in_text_mode(r"$n_\text{kv\_heads} + \text{a {b} c\_d}$") == [
        r"\text{kv\_heads}", r"\text{a {b} c\_d}"]
    assert _escaped_underscores_in_text_mode(
        r"$n_\mathrm{kv\_heads}$, $\operatorname{lm\_head}(h)$, $\text{kv}_\text{heads}$, `\_`") == []


def test_no_escaped_underscore_inside_text_mode_math():
    """MathJax would show the backslash: write \\mathrm{a\\_b} or a symbol such as n_\\text{kv} instead."""
    from babel.messages.pofile import read_po

    texts = []
    for path in notebook_paths(ROOT, ["book", "solutions", "exercises"]):
        texts += [(f"{_id(path)} cell {index}", cell.source)
                  for index, cell in enumerate(read_notebook(path).cells) if cell.cell_type == "markdown"]
    texts += [(_id(path), path.read_text(encoding="utf-8")) for path in sorted((ROOT / "book").glob("*.md"))]
    for path in sorted((ROOT / "locales").rglob("*.po")):
        with path.open("rb") as handle:
            catalog = read_po(handle)
        texts += [(f"{_id(path)}: {str(message.id)[:40]!r}", text) for message in catalog if message.id
                  for text in (message.id, message.string) if isinstance(text, str)]
    bad = [f"{where}: {snippet}" for where, text in texts for snippet in _escaped_underscores_in_text_mode(text)]
    assert not bad, ("text-mode math shows '\\_' verbatim on the published page; use \\mathrm{...} or a "
                     "subscript symbol instead:\n" + "\n".join(bad))

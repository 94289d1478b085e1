"""Hand grading by question: the review page in headless Chromium, and hand scores that survive re-grading.

A copy of the fixture course gets a written answer graded by hand (an nbgrader manually graded
Markdown cell, 2 points). Three learners are graded with the real grader: one with a good answer,
one who left the cell blank, one whose answer carries HTML. The review page is opened in Chromium
(the browser of ``tests/test_site.py``), graded with the keyboard only, and the scores must land in
``hand-scores.csv``, ``grades.csv`` and the feedback, and stay there through every later ``grade``
(with or without ``--regrade``), ``merge`` and ``export`` that is not told about them.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from autograder.__main__ import main
from autograder.core.files import read_notebook
from autograder.course.notebooks import dumps_normalized
from autograder.instructor.manual import HAND_SCORES, read_hand_scores
from autograder.instructor.review import ReviewServer, load_questions, split_solution

FIXTURE = Path(__file__).parent / "fixtures" / "course"
KEY = "fixture:essay"
ENTER, ARROW_DOWN = "\ue007", "\ue015"

pytestmark = pytest.mark.slow

ESSAY = {"cell_type": "markdown", "id": "essay", "metadata": {"nbgrader": {
    "grade": True, "grade_id": "essay", "locked": False, "points": 2, "schema_version": 3, "solution": True,
    "task": False}},
    "source": "### BEGIN SOLUTION\n**Model answer.** Subtracting the maximum keeps every exponent at most 0, so "
              "nothing overflows.\n\n**Rubric** (2 points):\n- 1 point: exponents at most 0\n- 1 point: same "
              "result, since the shift cancels\n### END SOLUTION"}
QUESTION = {"cell_type": "markdown", "id": "essay-question", "metadata": {},
            "source": "**Question.** Why does a stable softmax subtract the maximum?"}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _scores(out: Path) -> dict[str, str]:
    return {r["student"]: r["score"] for r in _rows(out / "grades.csv")}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The fixture course with a written answer (2 points, graded by hand) after the softmax part."""
    from autograder.course.release import generate

    root = tmp_path_factory.mktemp("review") / "course"
    shutil.copytree(FIXTURE, root)
    path = root / "solutions" / "00-fixture" / "fixture.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    at = next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_softmax")
    nb["cells"][at + 1:at + 1] = [QUESTION, ESSAY]
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    generate(root=root)
    return root


def _submission(course: Path, folder: Path, learner: str, essay: str | None, *, solved: bool = True) -> None:
    """``learner``'s notebook: the solution (or the blank exercise) with ``essay`` as the written answer."""
    source = course / ("solutions" if solved else "exercises") / "00-fixture" / "fixture.ipynb"
    nb = read_notebook(source)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "essay":
            cell.source = essay if essay is not None else "YOUR ANSWER HERE"
    target = folder / learner / "00-fixture" / "fixture.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(dumps_normalized(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """Three learners graded into one output folder."""
    work = tmp_path_factory.mktemp("graded")
    subs, out = work / "submissions", work / "out"
    _submission(course, subs, "ann", "The largest exponent becomes 0, so exp cannot overflow; the shift cancels.")
    _submission(course, subs, "bob", None, solved=False)
    _submission(course, subs, "cy", "<script>alert('x')</script> <b>because</b> of overflow")
    args = ["--root", str(course), "grade", str(subs), "--assignment", "00-fixture", "--out", str(out),
            "--jobs", "2", "--no-progress", "--timeout", "60"]
    assert main(args) == 0
    return subs, out, args


def test_the_question_rubric_and_answers_are_read_from_the_plan_and_the_answers(course, graded):
    _, out, _ = graded
    [question] = load_questions(out, course)
    assert (question.assignment, question.key, question.max_points) == ("00-fixture", KEY, 2.0)
    assert "subtract the maximum" in question.prompt
    assert question.model_answer.startswith("Subtracting the maximum") and question.rubric.startswith("**Rubric**")
    entries = {e.learner: e for e in question.entries}
    assert not entries["ann"].blank and entries["bob"].blank and "<script>" in entries["cy"].answer
    assert split_solution("no markers here") == ("no markers here", "")


def _post(server: ReviewServer, body: dict, token: str | None = None, host: str | None = None):
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}/api/score", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json",
                                                             "X-Review-Token": token or server.token})
    if host:
        request.add_unredirected_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_server_refuses_requests_without_the_token_or_from_another_host(course, graded):
    _, out, _ = graded
    server = ReviewServer(out, course)
    server.start()
    try:
        body = {"assignment": "00-fixture", "key": KEY, "learner": "ann", "points": "1"}
        assert _post(server, body, token="guess")[0] == 403
        assert _post(server, body, host="evil.example:80")[0] == 403, "a DNS-rebinding page is refused"
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=10)
        assert error.value.code == 403
        assert _post(server, {**body, "points": "3"}) == (400, {"error": "points must be from 0 to 2, not 3"})
        assert _post(server, {**body, "learner": "zed"})[0] == 400
        assert not (out / HAND_SCORES).exists(), "nothing was stored"
    finally:
        server.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from test_site import Browser, WebDriverError, _find_browser

    chromium, chromedriver = _find_browser()
    try:
        driven = Browser(chromium, chromedriver, tmp_path_factory.mktemp("chromium") / "profile")
    except WebDriverError as error:
        pytest.fail(f"Chromium is installed but could not be started: {error}")
    yield driven
    driven.quit()


def _press(browser, *keys: str) -> None:
    """Press and release each key in turn, as a person typing (WebDriver actions, to the page)."""
    actions = []
    for key in keys:
        actions += [{"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]
    browser._call("POST", browser._session + "/actions",
                  {"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})


def _wait(browser, script: str, what: str, seconds: float = 15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = browser.run(script)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"the page did not show {what}; it shows: {browser.run('return document.body.innerText')}")


def test_an_instructor_grades_a_question_with_the_keyboard_and_the_scores_survive(course, graded, browser,
                                                                                  tmp_path):
    subs, out, args = graded
    server = ReviewServer(out, course)
    server.start()
    try:
        browser.get(server.url)
        _wait(browser, "return document.getElementById('who').textContent.startsWith('ann')", "ann's answer")
        assert browser.run("return document.getElementById('answer').textContent").startswith("The largest")
        assert "0 of 3 graded" in browser.run("return document.getElementById('progress').textContent")
        _press(browser, "2", ENTER)                                   # ann: 2 points, next learner
        _wait(browser, "return document.getElementById('who').textContent.startsWith('bob')", "bob")
        assert "no answer" in browser.run("return document.getElementById('answer').textContent")
        _press(browser, "0", ENTER)                                   # bob: 0, next
        _wait(browser, "return document.getElementById('who').textContent.startsWith('cy')", "cy")
        # cy's HTML is shown as text, never run or rendered
        assert browser.run("return document.querySelectorAll('#answer script, #answer b').length") == 0
        assert "<script>" in browser.run("return document.getElementById('answer').textContent")
        _press(browser, "1", ".", "5", "c", *"explain the cancellation", ENTER)
        _wait(browser, "return document.getElementById('progress').dataset.done === '3'", "3 graded")
        _press(browser, "k", "k", ARROW_DOWN)                         # back to ann, then down to bob
        _wait(browser, "return document.getElementById('who').textContent.startsWith('bob')", "bob again")
        assert browser.run("return document.getElementById('points').value") == "0"
        browser.screenshot(tmp_path / "review.png")
        console = [m for m in browser.console() if m.get("level") == "SEVERE"]
        assert not console, console
    finally:
        server.close()

    stored = read_hand_scores(out)
    assert {k: (v.points, v.comment) for k, v in stored.items()} == {
        ("ann", "00-fixture", KEY): (2.0, ""), ("bob", "00-fixture", KEY): (0.0, ""),
        ("cy", "00-fixture", KEY): (1.5, "explain the cancellation")}
    hand = (out / HAND_SCORES).read_bytes()

    # `grade` again, with no option: every hand score is kept (resumed and re-graded learners alike)
    assert main(args) == 0
    assert _scores(out) == {"ann": "5", "bob": "0", "cy": "4.5"}
    assert main([*args, "--regrade", "ann"]) == 0
    rows = {r["student"]: r for r in _rows(out / "grades.csv")}
    assert rows["ann"]["score"] == "5" and rows["ann"][KEY] == "2" and rows["ann"]["needs_manual_grade"] == "no"
    assert (out / HAND_SCORES).read_bytes() == hand
    page = (out / "feedback" / "cy" / "00-fixture" / "fixture.html").read_text(encoding="utf-8")
    assert "explain the cancellation" in page
    # merge and export read the file by default too
    assert main(["--root", str(course), "merge", str(out), "--out", str(out)]) == 0
    assert _scores(out) == {"ann": "5", "bob": "0", "cy": "4.5"}
    assert main(["--root", str(course), "export", "--out", str(out), "--format", "plain"]) == 0
    exported = {r["student"]: r for r in _rows(out / "export-plain.csv")}
    assert exported["cy"][KEY] == "1.5"


def test_grade_without_the_option_keeps_every_hand_score_and_says_why_one_is_not_applied(course, graded, capsys):
    """After hand grading, a learner resubmits a broken notebook: `grade` keeps every score in the file,
    applies those it can and says which one waits."""
    subs, out, args = graded
    hand = out / HAND_SCORES
    if not hand.exists():
        hand.write_text("student,assignment,grade_id,points,comment,answer\n"
                        f"ann,00-fixture,{KEY},2,,\nbob,00-fixture,{KEY},0,,\ncy,00-fixture,{KEY},1.5,,\n",
                        encoding="utf-8")
    before = hand.read_bytes()
    broken = subs / "cy" / "00-fixture" / "fixture.ipynb"
    saved = broken.read_bytes()
    try:
        broken.write_text("{not json", encoding="utf-8")
        assert main(args) == 1                                     # cy cannot be graded now
        said = capsys.readouterr().out
        assert "hand-scores.csv line" in said and "kept in the file" in said
        assert hand.read_bytes() == before
        assert _scores(out)["ann"] == "5" and _scores(out)["cy"] == ""
    finally:
        broken.write_bytes(saved)
    assert main(args) == 0
    assert _scores(out) == {"ann": "5", "bob": "0", "cy": "4.5"}, "the kept score counts again"


def test_a_hand_score_belongs_to_the_answer_it_was_given_for(course, tmp_path, capsys):
    """Grade, hand-score, resubmit: a changed answer's old score is set aside (the cell waits again in
    grades.csv, on the page and in the review list) and the run says so; an unchanged resubmission
    keeps its score; a hand-scores file from before digests still counts."""
    from autograder.instructor.manual import HandScore, write_hand_scores
    from autograder.instructor.review import ReviewState

    subs, out = tmp_path / "submissions", tmp_path / "out"
    _submission(course, subs, "ann", "The largest exponent becomes 0, so nothing overflows.")
    _submission(course, subs, "dan", "Because exp of a big number overflows; the shift cancels.")
    args = ["--root", str(course), "grade", str(subs), "--assignment", "00-fixture", "--out", str(out),
            "--jobs", "2", "--no-progress", "--timeout", "60"]
    assert main(args) == 0
    [question] = load_questions(out, course)
    write_hand_scores(out, {(e.learner, "00-fixture", KEY): HandScore(2.0, "good", e.digest) for e in question.entries})
    assert main(args) == 0
    assert _scores(out) == {"ann": "5", "dan": "5"}
    capsys.readouterr()

    # ann resubmits a changed answer; dan resubmits the same answer (a new file, same text)
    _submission(course, subs, "ann", "I changed my mind: it is about underflow.")
    _submission(course, subs, "dan", "Because exp of a big number overflows; the shift cancels.")
    assert main([*args, "--regrade", "dan"]) == 0
    said = capsys.readouterr().out
    assert "1 hand score was set aside because its answer changed" in said and "ann / 00-fixture" in said
    rows = {r["student"]: r for r in _rows(out / "grades.csv")}
    assert rows["ann"][KEY] == "" and rows["ann"]["needs_manual_grade"] == "yes" and rows["ann"]["score"] == "3"
    assert rows["dan"][KEY] == "2" and rows["dan"]["needs_manual_grade"] == "no" and rows["dan"]["score"] == "5"
    page = (out / "feedback" / "ann" / "00-fixture" / "fixture.html").read_text(encoding="utf-8")
    assert "1 part still waits for your instructor" in page and "<td>good</td>" not in page
    assert "<td>? / 2</td><td class='wait'>waiting for your instructor</td>" in page
    page = (out / "feedback" / "dan" / "00-fixture" / "fixture.html").read_text(encoding="utf-8")
    assert "<td>2 / 2</td><td class='pass'>graded by your instructor</td>" in page
    assert "waiting for your instructor" not in page
    assert read_hand_scores(out)[("ann", "00-fixture", KEY)].points == 2.0, "the file keeps the old score"
    state = ReviewState(out, course)
    entry = {e.learner: e for e in state.questions[0].entries}
    assert state.scores[("ann", "00-fixture", KEY)].answer != entry["ann"].digest   # the list shows it as waiting
    assert state.scores[("dan", "00-fixture", KEY)].answer == entry["dan"].digest

    # a file written before digests: applied as before, and the run says so
    (out / HAND_SCORES).write_text(f"student,assignment,grade_id,points,comment\nann,00-fixture,{KEY},1,\n",
                                   encoding="utf-8")
    assert main(args) == 0
    assert "written before the grader kept the answer's digest" in capsys.readouterr().out
    assert _scores(out)["ann"] == "4"


def test_validate_says_a_written_answer_left_as_released_is_blank_and_what_it_is_worth(course, tmp_path):
    """The tests pass and the status stays ok (the notebook can be graded), but the verdict does not read
    as done: it names the blank written answer and its points; a written answer clears it."""
    from autograder.engine.validate import ALL_PASS, validate

    def learner(folder: Path, essay: str | None) -> None:
        """The released exercise with the solutions' code cells (no hidden tests) and ``essay``."""
        _submission(course, folder, "ann", essay)
        path = folder / "ann" / "00-fixture" / "fixture.ipynb"
        nb, released = read_notebook(path), read_notebook(course / "exercises" / "00-fixture" / "fixture.ipynb")
        tests = {c.metadata["nbgrader"]["grade_id"]: c.source for c in released.cells
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade") and c.cell_type == "code"
                 and not c.metadata["nbgrader"].get("solution")}
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in tests:
                cell.source = tests[grade_id]
        path.write_text(dumps_normalized(nb), encoding="utf-8")

    learner(tmp_path / "blank", None)
    ok, lines = validate(tmp_path / "blank" / "ann" / "00-fixture" / "fixture.ipynb", "00-fixture", root=course)
    assert ok, lines
    assert any(line.startswith("blank: the written answer essay is still the released placeholder; it is worth "
                               "2 points") for line in lines), lines
    assert lines[-1] == f"{ALL_PASS}, but 1 written answer is still blank (2 points graded by your instructor)"
    learner(tmp_path / "done", "Subtracting the maximum keeps exponents at most 0.")
    ok, lines = validate(tmp_path / "done" / "ann" / "00-fixture" / "fixture.ipynb", "00-fixture", root=course)
    assert ok and lines[-1] == ALL_PASS and not any(line.startswith("blank:") for line in lines), lines

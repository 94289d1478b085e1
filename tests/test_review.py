"""Hand grading by question: the review page in headless Chromium, and hand scores that survive re-grading.

A copy of the fixture course gets a written answer graded by hand (an nbgrader manually graded
Markdown cell, 2 points). Three learners are graded with the real grader: one with a good answer,
one who left the cell blank, one whose answer carries HTML. The review page is opened in Chromium
(the browser of ``tests/test_site.py``), graded with the keyboard only, and the scores must land in
``hand-scores.csv``, ``grades.csv`` and the feedback, and stay there through every later ``grade``
(with or without ``--regrade``), ``merge`` and ``export`` that is not told about them. At 1280 x 900 the
rubric stands beside the answer, Markdown and math are rendered, the list shows scores and changed
answers; the page is Chinese for a Chinese class, every fixed string from its catalogue.
"""

from __future__ import annotations

import csv
import json
import re
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
from autograder.engine.plan import split_solution
from autograder.instructor.review import ReviewServer, load_questions

FIXTURE = Path(__file__).parent / "fixtures" / "course"
KEY = "fixture:essay"
ENTER, ARROW_DOWN = "\ue007", "\ue015"

pytestmark = pytest.mark.slow

ESSAY = {"cell_type": "markdown", "id": "essay", "metadata": {"nbgrader": {
    "grade": True, "grade_id": "essay", "locked": False, "points": 2, "schema_version": 3, "solution": True,
    "task": False}},
    "source": "### BEGIN SOLUTION\n**Model answer.** Subtracting the maximum keeps every exponent at most 0, so "
              "nothing overflows: with $m = \\max_j s_j$,\n\n$$\n\\operatorname{softmax}(s)_i = "
              "\\frac{e^{s_i}}{\\sum_j e^{s_j}} = \\frac{e^{s_i - m}}{\\sum_j e^{s_j - m}},\n$$\n\n"
              "because the factor $e^{-m}$ cancels between the numerator and the denominator. "
              "Without the shift, a score of 100 already gives $e^{100} \\approx 2.7 \\times 10^{43}$, and in "
              "float32 anything above $e^{88.7}$ is `inf`; `inf / inf` is `NaN`, which then spreads into the loss "
              "and into the gradient of every parameter, so one large score ruins the whole training step.\n\n"
              "With the shift the largest term becomes $e^0 = 1$, so the sum is at least 1 and the division is "
              "always defined; very negative scores may underflow to 0, which is harmless, because their true "
              "weights are below float32's resolution anyway. The same trick gives a stable log-softmax, "
              "$\\log \\operatorname{softmax}(s)_i = s_i - m - \\log \\sum_j e^{s_j - m}$, and it is what "
              "`torch.softmax` does internally.\n\n**Rubric** (2 points):\n- 1 point: exponents at most 0, so "
              "$e^{s_i - m} \\le 1$ never overflows\n- 1 point: same result, since the shift $e^{-m}$ cancels\n"
              "- half a point off for naming overflow without saying why the result is unchanged\n### END SOLUTION"}
QUESTION = {"cell_type": "markdown", "id": "essay-question", "metadata": {},
            "source": "## Part W: a written answer (2 points, graded by hand)\n\n**Question.** Why does a stable "
                      "softmax subtract the maximum?\nShow that $\\operatorname{softmax}(s - c) = "
                      "\\operatorname{softmax}(s)$ for any constant $c$, and say what goes wrong in float32 "
                      "without the shift.\n\nWrite your answer in the Markdown cell below, in place of `YOUR "
                      "ANSWER HERE` (formulas in `$...$` are welcome)."}


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
    _submission(course, subs, "ann", "The largest exponent becomes 0, so exp cannot overflow; the shift cancels:\n"
                                      "$e^{s_i - m} / \\sum_j e^{s_j - m} = e^{s_i} / \\sum_j e^{s_j}$.")
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


_GEOMETRY = """
const box = (id) => { const r = document.getElementById(id).getBoundingClientRect();
                      return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height}; };
return {width: innerWidth, height: innerHeight, page_width: document.scrollingElement.scrollWidth,
        page_height: document.scrollingElement.scrollHeight, answer: box("answer"), rubric: box("rubric"),
        model: box("model"), prompt: box("prompt"), points: box("points"), save: box("save")};
"""


def _screen(browser, width: int = 1280, height: int = 900) -> None:
    """Make the page's viewport ``width`` x ``height`` (the window minus whatever the browser draws)."""
    browser._call("POST", browser._session + "/window/rect", {"width": width, "height": height})
    inner = browser.run("return [innerWidth, innerHeight]")
    browser._call("POST", browser._session + "/window/rect",
                  {"width": 2 * width - inner[0], "height": 2 * height - inner[1]})


def test_the_page_fits_a_laptop_screen_with_the_rubric_beside_the_answer(course, graded, browser, tmp_path):
    """Issue 30, the review page at 1 a.m.: at 1280 x 900 the rubric stands beside the answer, both and the
    points field within the window without scrolling; question, model answer, rubric and the learner's
    answer are Markdown with math as MathML (the page's policy runs no other script); the list shows each
    learner's score and marks the answer that changed since it was scored."""
    from autograder.instructor.manual import HandScore, write_hand_scores

    _, out, _ = graded
    [question] = load_questions(out, course)
    digest = {e.learner: e.digest for e in question.entries}
    write_hand_scores(out, {("ann", "00-fixture", KEY): HandScore(2.0, "", digest["ann"]),
                            ("cy", "00-fixture", KEY): HandScore(1.0, "", "0" * 12)})      # cy's answer changed
    server = ReviewServer(out, course)
    server.start()
    try:
        browser.get(server.url)
        _screen(browser)
        _wait(browser, "return document.getElementById('who').textContent.startsWith('ann')", "ann's answer")
        at = browser.run(_GEOMETRY)
        assert (at["width"], at["height"]) == (1280, 900), at
        assert at["page_width"] <= 1280 and at["page_height"] <= 900, f"the page itself scrolls: {at}"
        for name in ("answer", "rubric", "points", "save", "prompt", "model"):
            assert 0 <= at[name]["top"] and at[name]["bottom"] <= 900 and at[name]["right"] <= 1280, (name, at)
        assert at["rubric"]["left"] >= at["answer"]["right"], f"the rubric is not beside the answer: {at}"
        assert at["rubric"]["top"] < at["answer"]["bottom"] and at["answer"]["top"] < at["rubric"]["bottom"], at
        assert min(at["answer"]["height"], at["rubric"]["height"]) >= 100, at
        counts = browser.run("const n = (q) => document.querySelectorAll(q).length;"
                             "return {model_math: n('#model math'), prompt_math: n('#prompt math'),"
                             " answer_math: n('#answer math'), prompt_heading: n('#prompt h2, #prompt strong'),"
                             " rubric_items: n('#rubric li'), rubric_math: n('#rubric math'), code: n('#model code')};")
        assert all(counts.values()) and counts["rubric_items"] == 3, counts
        texts = browser.run("return ['prompt', 'model', 'rubric', 'answer'].map((id) => document.getElementById(id).textContent)")
        assert not any("$" in text.replace("$...$", "") for text in texts), f"TeX left as source: {texts}"
        rows = browser.run("return [...document.querySelectorAll('#side .row')].map((r) => [r.className, r.textContent])")
        assert [text for _, text in rows] == ["ann2 / 2", "bobblank\u2013 / 2", "cychanged, was 1"], rows
        assert "changed" in rows[2][0] and "done" in rows[0][0] and "blank" in rows[1][0], rows
        assert "1 of 3 graded" in browser.run("return document.getElementById('progress').textContent")
        # a link in a learner's answer never carries the page's address (and its token) elsewhere
        assert browser.run("return document.querySelector('meta[name=referrer]').content") == "no-referrer"
        browser.screenshot(tmp_path / "review-1280x900.png")
        console = [m for m in browser.console() if m.get("level") == "SEVERE"]
        assert not console, console
    finally:
        server.close()
        (out / HAND_SCORES).unlink()


ZH_QUESTION = ("## W 部分：书面回答（2 分，由老师人工评分）\n\n**问题。** 数值稳定的 softmax 为什么要减去最大值？"
               "请说明对任意常数 $c$ 都有 $\\operatorname{softmax}(s - c) = \\operatorname{softmax}(s)$，"
               "并说明不做平移时 float32 会出什么问题。")
ZH_MODEL = ("减去最大值后，每个指数都不超过 0，所以不会溢出：记 $m = \\max_j s_j$，\n\n$$\n\\operatorname{softmax}(s)_i = "
            "\\frac{e^{s_i}}{\\sum_j e^{s_j}} = \\frac{e^{s_i - m}}{\\sum_j e^{s_j - m}},\n$$\n\n"
            "因为因子 $e^{-m}$ 在分子和分母之间约掉了。")
ZH_RUBRIC = ("**评分标准**（2 分）：\n- 1 分：指数都不超过 0，所以 $e^{s_i - m} \\le 1$ 不会溢出\n"
             "- 1 分：结果不变，因为平移带来的 $e^{-m}$ 约掉了\n- 只说溢出而不说明结果为什么不变，扣半分")


def _chinese_edition(course: Path, root: Path) -> Path:
    """A copy of ``course`` with the Chinese edition's exercise (the question in Chinese) and its catalogue,
    whose model answer and rubric entries are what ``i18n update`` extracts from the solution region."""
    from autograder.course.i18n import catalogues, extract
    from autograder.engine.plan import MODEL_ANSWER_CONTEXT

    shutil.copytree(course, root)
    nb = json.loads((course / "exercises" / "00-fixture" / "fixture.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if "".join(cell["source"]).startswith("## Part W"):
            cell["source"] = ZH_QUESTION
    (root / "zh" / "exercises" / "00-fixture").mkdir(parents=True)
    (root / "zh" / "exercises" / "00-fixture" / "fixture.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    page = extract.Page("exercises/00-fixture/fixture", root / "exercises" / "00-fixture" / "fixture.ipynb")
    written = extract.written_answers(page, root)
    assert [context for context, _ in written] == ["model answer", "rubric"], written
    catalog = catalogues.catalogue_template([], "exercises/00-fixture/fixture.ipynb", written=written)
    for message in catalog:
        if message.id:
            message.string = ZH_MODEL if message.context == MODEL_ANSWER_CONTEXT else ZH_RUBRIC
    catalogues.write_catalogue(catalog, catalogues.catalogue_path(page.docname, root))
    return root


def _fixed_text(browser) -> list[str]:
    """The page's own words: headings, labels, buttons, the key line without its keys, the counters."""
    return browser.run("""
        const keys = document.querySelector('.keys').cloneNode(true);
        keys.querySelectorAll('kbd').forEach((k) => k.remove());
        const own = [...document.querySelectorAll('h3, label, button, #progress, #max')].map((e) => e.textContent);
        const title = document.getElementById('title').textContent.replace('00-fixture / fixture:essay', '');
        return [document.title, title, keys.textContent, document.getElementById('comment').placeholder,
                document.getElementById('zero').title, ...own,
                ...[...document.querySelectorAll('#side .score')].map((e) => e.textContent)];""")


def test_the_page_is_chinese_for_a_chinese_class(course, graded, browser, tmp_path):
    """Issue 29: with the page in Chinese, ``lang`` is zh-CN, every fixed string is Chinese (the keys stay
    j/k, n/p, c, Enter, Esc and still work), the question is the Chinese edition's, the model answer and
    the rubric come from its catalogue, rendered, and the server's refusals are Chinese too."""
    _, out, _ = graded
    zh_root = _chinese_edition(course, tmp_path / "course")
    server = ReviewServer(out, zh_root, language="zh-CN")
    server.start()
    try:
        browser.get(server.url)
        _wait(browser, "return document.getElementById('who').textContent.startsWith('ann')", "ann's answer")
        assert browser.run("return document.documentElement.lang") == "zh-CN"
        assert browser.run("return document.getElementById('prompt').textContent").startswith("W 部分")
        model, rubric = browser.run("return ['model', 'rubric'].map((id) => document.getElementById(id).textContent)")
        assert model.startswith("减去最大值后") and "Subtracting" not in model, model
        assert rubric.startswith("评分标准（2 分）") and "point" not in rubric, rubric
        assert browser.run("return [document.querySelectorAll('#model math').length, "
                           "document.querySelectorAll('#rubric li').length]") == [3, 3]
        fixed = _fixed_text(browser)
        english = [text for text in fixed if re.search(r"[A-Za-z]{2,}", text)]
        assert not english, f"English left on the Chinese page: {english}"
        assert all(re.search(r"[\u4e00-\u9fff]", text) for text in fixed if text.strip(" /0123456789.–\u2013")), fixed
        assert browser.run("return [...document.querySelectorAll('.keys kbd')].map((k) => k.textContent)") == [
            "j", "k", "n", "p", "c", "Enter", "Esc"]
        _press(browser, "3", ENTER)                                    # out of range: refused, in Chinese
        _wait(browser, "return document.getElementById('status').textContent.includes('分数必须在 0 到 2 之间')",
              "the refusal in Chinese")
        assert _post(server, {"assignment": "00-fixture", "key": KEY, "learner": "ann", "points": "x"}) == (
            400, {"error": "分数 'x' 不是数字（小数请用小数点）"})
        browser.screenshot(tmp_path / "review-zh.png")
        # the refused score's 400 is logged as a network error; nothing else (no policy violation)
        assert not [m for m in browser.console() if m.get("level") == "SEVERE" and m.get("source") != "network"]
    finally:
        server.close()
    assert not (out / HAND_SCORES).exists(), "nothing was stored"


def test_the_chinese_review_shows_the_catalogue_s_model_answer_and_rubric(course, graded, tmp_path):
    """Issue 29: a Chinese class's review page shows the model answer and the rubric its exercise's catalogue
    translates; the English page keeps the instructor's; an outdated (fuzzy) translation is not shown."""
    from autograder.course.i18n import catalogues

    _, out, _ = graded
    zh_root = _chinese_edition(course, tmp_path / "course")
    [chinese] = load_questions(out, zh_root, "zh_CN")
    assert (chinese.model_answer, chinese.rubric) == (ZH_MODEL, ZH_RUBRIC)
    assert "<math" in chinese.model_html and chinese.rubric_html.count("<li>") == 3
    [english] = load_questions(out, zh_root, "en")
    assert english.model_answer.startswith("Subtracting the maximum") and english.rubric.startswith("**Rubric**")
    path = catalogues.catalogue_path("exercises/00-fixture/fixture", zh_root)
    catalog = catalogues.read_catalogue(path)
    for message in catalog:
        if message.context == "rubric":
            message.flags.add("fuzzy")
    catalogues.write_catalogue(catalog, path)
    [outdated] = load_questions(out, zh_root, "zh_CN")
    assert outdated.model_answer == ZH_MODEL and outdated.rubric.startswith("**Rubric**")


def test_every_fixed_string_has_its_chinese_entry_and_the_class_language_decides():
    """The catalogue holds every string of :data:`TEXT` (no more), translated, with the same
    placeholders; the page's script and template use only those keys; a class whose written answers are
    mostly Chinese gets the Chinese page, and $COURSE_LANGUAGE overrides."""
    from autograder.instructor import review
    from course_runtime.language import read_po

    entries = [e for e in read_po(Path(str(review.CATALOGUE).format(language="zh_CN"))) if e.msgid]
    assert sorted(e.msgid for e in entries) == sorted(review.TEXT.values())
    for entry in entries:
        assert entry.msgstr and "fuzzy" not in entry.flags, entry.msgid
        assert set(re.findall(r"\{\w+\}", entry.msgstr)) == set(re.findall(r"\{\w+\}", entry.msgid)), entry.msgid
        assert not re.search(r"[A-Za-z]{2,}", re.sub(r"\{\w+\}|--regrade|review", "", entry.msgstr)), entry.msgstr
    folder = Path(review.__file__).parent
    used = set(re.findall(r'\bt\("(\w+)"', (folder / "review.js").read_text(encoding="utf-8")))
    used |= set(re.findall(r'"(zero_given(?:_one)?)"', (folder / "review.js").read_text(encoding="utf-8")))
    used |= set(re.findall(r"\$t_(\w+)", (folder / "review.html").read_text(encoding="utf-8")))
    server = Path(review.__file__).read_text(encoding="utf-8")
    used |= {key for pair in re.findall(r'_words\(self\.text, "(\w+)"|text\["(\w+)"\]', server) for key in pair if key}
    assert used == set(review.TEXT), (used ^ set(review.TEXT))

    def question(*answers: str) -> review.Question:
        q = review.Question("a", "nb:q", "", "", "", 2.0)
        q.entries = [review.Entry(f"l{i}", f"l{i}", text, False, "") for i, text in enumerate(answers)]
        return q

    chinese = "减去最大值后指数都不超过 0，所以不会溢出；分子分母同乘 $e^{-m}$，结果不变。"
    assert review.class_language([question(chinese, chinese, "exp overflows")]) == "zh_CN"
    assert review.class_language([question(chinese, "exp overflows", "the shift cancels")]) == "en"
    assert review.class_language([question()]) == "en"


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

"""What the grader writes for people to open is safe whatever learners put in it.

- CSV: no cell the grader writes starts a spreadsheet formula; numbers stay numbers; the files the
  grader reads back (hand-scores.csv) round-trip exactly.
- HTML: every page carries a strict Content-Security-Policy and holds no script, event handler or
  script link, also when a written answer smuggles markup through math (latex2mathml copies
  ``\\text{}`` raw into its output).
- Feedback after hidden tests: nothing the learner's code chose (an exception's message or class name)
  reaches a verdict once a hidden test has called it.
- Large submissions: pairing 24,000 own cells with their saved outputs stays correct (it was quadratic).
"""

from __future__ import annotations

import asyncio
import csv
import html
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from autograder.core.limits import Limits
from autograder.core.outcomes import UNLISTED_EXCEPTION, CellOutcome, Failure, Verdict
from autograder.core.results import GradeResult, Status, write_grades_csv
from autograder.core.safe_output import csv_text, from_spreadsheet_cell, safe_mathml, spreadsheet_cell
from autograder.engine import disclosure, feedback, pages
from autograder.engine.grade_one import run_notebook
from autograder.engine.plan import FREE, TEST, RunCell
from autograder.engine.referee import visible_failure
from autograder.engine.runner import outcome_of
from autograder.instructor import review, similarity
from autograder.instructor.manual import HandScore, read_hand_scores, write_hand_scores

REPO = Path(__file__).resolve().parent.parent
ATTACK_MATH = r"An answer: $\text{<img/src=x/onerror=alert(1)>}$ and $$\href{javascript:alert(2)}{x}$$"


# --- CSV ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["=HYPERLINK(\"http://x\")", "+1+1", "-x", "@SUM(A1)", "\tcmd", "\r=1", "'=1", "'"])
def test_a_cell_that_could_start_a_formula_is_quoted_and_reads_back_as_it_was(text):
    cell = spreadsheet_cell(text)
    assert cell.startswith("'") and cell[1:] == text
    assert from_spreadsheet_cell(cell) == text


@pytest.mark.parametrize("number", ["-3", "-0.5", "+2", "1e-3", "-.25", "12"])
def test_plain_numbers_stay_numbers(number):
    assert spreadsheet_cell(number) == number == from_spreadsheet_cell(number)


def test_no_module_of_the_grader_writes_csv_without_the_neutralising_helper():
    writers = [path.name for path in (REPO / "autograder").glob("*.py")
               if path.name != "safe_output.py" and "csv.writer(" in path.read_text(encoding="utf-8")]
    assert writers == []


def test_grades_csv_neutralises_names_and_keeps_negative_scores_numeric(tmp_path):
    result = GradeResult("=cmd|' /C calc'!A0", "@attention", status="graded", kind=Status.GRADED, score=-3.0, max_score=10.0,
                         cells={"nb:q1": -0.5}, cell_max_scores={"nb:q1": 1.0}, files=["-evil.ipynb"])
    write_grades_csv(tmp_path / "grades.csv", [result])
    row = next(csv.DictReader(io.StringIO((tmp_path / "grades.csv").read_text(encoding="utf-8"))))
    assert row["student"] == "'=cmd|' /C calc'!A0" and row["assignment"] == "'@attention"
    assert row["file"] == "'-evil.ipynb"
    assert row["score"] == "-3" and row["nb:q1"] == "-0.5"


def test_hand_scores_of_a_learner_named_like_a_formula_survive_a_round_trip(tmp_path):
    scores = {("=bob #7", "attention", "nb:q1"): HandScore(2.0, "+great", "d1"),
              ("'quoted", "attention", "nb:q1"): HandScore(1.5, "-x", "d2")}
    text = write_hand_scores(tmp_path, scores).read_text(encoding="utf-8")
    assert "\n=bob" not in text and "'=bob #7" in text
    assert read_hand_scores(tmp_path) == scores


def test_the_similarity_csv_neutralises_learner_names(tmp_path):
    match = similarity.Match("attention", "=evil", "+other", "learner", 0.9, 12, (("nb:q1", 0.9),))
    similarity.write_csv(tmp_path / "similarity.csv", similarity.Report([match], {}, {}, [], 2, 0.1))
    row = list(csv.reader(io.StringIO((tmp_path / "similarity.csv").read_text(encoding="utf-8"))))[1]
    assert row[1:3] == ["'=evil", "'+other"]


def test_csv_text_quotes_every_cell_of_every_row():
    rows = list(csv.reader(io.StringIO(csv_text([["a", "=1"], ["-2", "-b"]]))))
    assert rows == [["a", "'=1"], ["-2", "'-b"]]


# --- HTML ---------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """The tags, attributes and Content-Security-Policy of a page."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    @property
    def policy(self) -> str:
        return next(a["content"] for t, a in self.tags
                    if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")


def assert_runs_no_script(page: str) -> None:
    parsed = _Page(page)
    assert parsed.tags[:3][-1][0] == "meta", "the policy must come before anything it governs"
    policy = parsed.policy
    assert "default-src 'none'" in policy and "script-src" not in policy and "unsafe" not in policy
    for tag, attrs in parsed.tags:
        image = tag == "img" and attrs["src"].startswith("data:image/png;base64,")
        assert tag not in ("script", "iframe", "object", "embed", "img") or image, tag
        handlers = [name for name in attrs if name.startswith("on") or name in ("href", "style") and tag != "a"]
        assert not handlers, (tag, attrs)
        assert not any("javascript:" in (value or "") for value in attrs.values())


def test_math_in_a_written_answer_cannot_carry_markup_into_a_feedback_page():
    cells = [RunCell(FREE, None, "markdown", ATTACK_MATH, ATTACK_MATH, 0.0, "yours")]
    page = feedback.render_feedback(student="s", assignment="a", notebook="nb", cells=cells, outcomes=[None],
                                    scores={}, notes=[], hidden=[])
    assert_runs_no_script(page)
    assert "<math" in page and "&lt;img/src=x/onerror=alert(1)&gt;" in page


def test_mathml_keeps_the_math_and_escapes_everything_else():
    from latex2mathml.converter import convert

    honest = convert(r"\frac{QK^\top}{\sqrt{d_k}} + \mathbf{A}_{ij}")
    assert html.unescape(safe_mathml(honest)) == html.unescape(honest)
    hostile = convert(r"\text{</mtext></math><script>alert(1)</script>}")
    cleaned = safe_mathml(hostile)
    assert "<script" not in cleaned and "&lt;script&gt;" in cleaned
    assert cleaned.count("<math") == cleaned.count("</math>")


def test_the_status_and_similarity_pages_carry_the_policy():
    record = feedback.status_record(student="<b>x</b>", assignment="a", status="unreadable notebook <script>")
    page = pages.render_page(record, GradeResult("<b>x</b>", "a", "unreadable notebook", kind=Status.UNREADABLE))
    assert_runs_no_script(page)
    assert "<b>x</b>" not in page and "&lt;script&gt;" in page
    assert_runs_no_script(similarity.render_html(similarity.Report([], {}, {}, [], 2, 0.1)))


def test_the_review_page_runs_only_its_own_script_allowed_by_hash():
    policy = review.POLICY
    assert "unsafe-inline" not in policy and "'sha256-" in policy and "default-src 'none'" in policy
    for language in ("en", "zh_CN"):
        page = review.page(language)
        assert _Page(page).policy == policy, language
        assert not re.search(r"<[^>]*\son\w+\s*=", page), "inline event handlers need 'unsafe-inline'"


# --- Feedback after hidden tests ----------------------------------------------------------------

SECRET = "hidden args 0.8125 and 77"
VISIBLE_TEST = "out = attention(q)\nassert out.shape == (2, 3), f'got shape {out.shape}'"
HIDDEN_TEST = "x = 1\n### BEGIN HIDDEN TESTS\nattention(torch.full((7,), 0.8125))\n### END HIDDEN TESTS"


class _Referee:
    def __init__(self, verdicts):
        self.verdicts = list(verdicts)

    async def start_notebook(self, imports):
        pass

    async def run_test(self, source, kernel, timeout):
        verdict = self.verdicts.pop(0)
        return CellOutcome("error", verdict.text, verdict=verdict)


class _Kernel:
    """A kernel whose every cell ends with ``content``, the ``execute_reply`` the runner reads."""

    def __init__(self, content=None):
        self.content = content or {"status": "ok"}

    async def ask(self, request, timeout):
        return "{}"

    async def run(self, code, timeout, silent=False):
        return outcome_of({"content": self.content})

    async def sweep(self):
        pass


def _graded(verdicts, cells, kernel=None):
    return asyncio.run(run_notebook(kernel or _Kernel(), _Referee(verdicts), cells, [], Limits()))


def _test(source):
    return RunCell(TEST, "t", "code", source, source, 1.0, "course")


def test_a_visible_failure_after_a_hidden_test_shows_no_text_of_the_learners_code():
    reasons = [r.reason for r in _graded(
        [Verdict(Failure.HIDDEN_RAISED, "Leak_0_8125"),
         visible_failure(ValueError(SECRET), VISIBLE_TEST),
         visible_failure(AssertionError(f"got shape {SECRET}"), VISIBLE_TEST)],
        [_test(HIDDEN_TEST), _test(VISIBLE_TEST), _test(VISIBLE_TEST)])]
    assert not any("0.8125" in r or "77" in r or "Leak" in r for r in reasons), reasons
    assert disclosure.OWN_CLASS in reasons[0]
    assert reasons[1].startswith("ValueError (its message is not shown")
    assert reasons[2].startswith("AssertionError: got shape … (its message is not shown")


def test_a_visible_failure_before_any_hidden_test_keeps_its_full_message():
    source = VISIBLE_TEST + "\n" + HIDDEN_TEST
    [outcome] = _graded([visible_failure(AssertionError("got shape (3, 2)"), source)], [_test(source)])
    assert outcome.reason == "AssertionError: got shape (3, 2)"


def test_visible_code_after_a_hidden_region_in_the_same_cell_is_cut():
    source = HIDDEN_TEST + "\n" + VISIBLE_TEST
    [outcome] = _graded([visible_failure(ValueError(SECRET), source)], [_test(source)])
    assert SECRET not in outcome.reason and outcome.reason.startswith("ValueError")


def _own_cell_after_hidden_tests(content: dict) -> str:
    """What feedback says of a learner's own cell that ended with ``content`` after a hidden test ran."""
    own = RunCell(FREE, None, "code", "boom()", "boom()", 0.0, "yours")
    outcomes = _graded([Verdict(Failure.HIDDEN_RAISED, "ValueError")], [_test(HIDDEN_TEST), own],
                       kernel=_Kernel(content))
    return outcomes[1].reason


@pytest.mark.parametrize("ename", ["Recorded_0_8125", "ValueError: 0_8125", " ValueError", 8125, ["ValueError"],
                                   None])
def test_an_own_cell_after_hidden_tests_names_no_class_of_its_own(ename):
    """The class name the kernel sends is the learner's code's to choose (a class of its own can be named
    after the hidden data, even ``"ValueError: ..."``): only a standard name is shown, from the runner's
    field, never the start of the kernel's text."""
    content = {"status": "error", "evalue": "0_8125 recorded"}
    content.update({} if ename is None else {"ename": ename})
    reason = _own_cell_after_hidden_tests(content)
    assert "0_8125" not in reason and "8125" not in reason and reason.startswith(disclosure.OWN_CLASS), reason


@pytest.mark.parametrize("ename", ["ValueError", "KeyError", "ShortcutError", "KeyboardInterrupt"])
def test_an_own_cell_after_hidden_tests_keeps_a_standard_exception_name(ename):
    reason = _own_cell_after_hidden_tests({"status": "error", "ename": ename, "evalue": "0_8125"})
    assert reason == (f"{ename} (its message is not shown: this cell ran after hidden tests, whose data it "
                      "could hold)")


def test_the_runner_keeps_only_a_standard_exception_name_of_the_kernels_reply():
    assert outcome_of({"content": {"status": "ok"}}) == CellOutcome("ok")
    listed = outcome_of({"content": {"status": "error", "ename": "ZeroDivisionError", "evalue": "division by zero"}})
    assert (listed.status, listed.reason, listed.exception) == (
        "error", "ZeroDivisionError: division by zero", "ZeroDivisionError")
    own = outcome_of({"content": {"status": "error", "ename": "Leak_77", "evalue": "x"}})
    assert (own.reason, own.exception) == ("Leak_77: x", UNLISTED_EXCEPTION)    # the reason keeps the kernel's words
    odd = outcome_of({"content": {"status": "aborted"}})
    assert (odd.status, odd.reason, odd.exception) == ("error", "the kernel answered 'aborted'", UNLISTED_EXCEPTION)


def test_disclosure_reads_the_outcomes_field_not_its_text():
    named = CellOutcome("error", "Leak_0_8125: x", exception="KeyError")
    assert disclosure.after_hidden_cell(named).startswith("KeyError (its message is not shown")
    forged = CellOutcome("error", "KeyError: 0_8125", exception=UNLISTED_EXCEPTION)
    assert disclosure.after_hidden_cell(forged).startswith(disclosure.OWN_CLASS)


@pytest.mark.parametrize("verdict, kept", [
    (Verdict(Failure.KERNEL, message="your code ran longer than 10 s and was interrupted",
             words="your code ran longer than 10 s and was interrupted"),
     "your code ran longer than 10 s and was interrupted"),
    (Verdict(Failure.KERNEL, message="your code did not answer: the grading agent in your kernel did not answer "
                                     "(it sent 'leak 77')",
             words="your code did not answer: the grading agent in your kernel did not answer"),
     "your code did not answer: the grading agent in your kernel did not answer"),
    (Verdict(Failure.KERNEL, message="the kernel's answer could not be read: leak 77",
             words="the kernel's answer could not be read"), "the kernel's answer could not be read"),
    (Verdict(Failure.KERNEL, message="the kernel was stopped: leak 77"), f"this test failed ({disclosure.NOT_SHOWN})"),
    (Verdict(Failure.HIDDEN_CHECK, "Leak77", words="`q` is not correct"),
     f"a hidden check raised {disclosure.OWN_CLASS}: `q` is not correct"),
    (Verdict(Failure.HIDDEN_CHECK, words="got …, expected …"), "a hidden check failed: got …, expected …"),
])
def test_the_graders_own_words_are_kept_without_what_the_kernel_added(verdict, kept):
    assert disclosure.shown_test_reason(verdict, after_hidden=True) == kept


def test_a_hint_is_kept_only_when_the_visible_test_holds_it_whole():
    source = "check_close(attention(q), ref, name=f'attention of shape {s}', hint='scale by sqrt(d)')"
    verdict = visible_failure(AssertionError("`attention of shape (2,)` has 77\nHint: scale by sqrt(d)"), source)
    shown = disclosure.shown_test_reason(verdict, after_hidden=True)
    assert shown.startswith("AssertionError: `attention of shape …` is not correct")
    assert shown.endswith("\nHint: scale by sqrt(d)")
    forged = visible_failure(AssertionError("x\nHint: s"), source)
    assert "Hint" not in disclosure.shown_test_reason(forged, after_hidden=True)
    assert disclosure.shown_test_reason(forged, after_hidden=False) == "AssertionError: x\nHint: s"


# --- Large submissions --------------------------------------------------------------------------


def test_24000_own_cells_are_each_paired_with_their_own_saved_output():
    n = 24_000
    notebook = nbformat.v4.new_notebook()
    # One cell and one output made (and schema-checked) by nbformat, copied with each cell's own source,
    # id and text: checking 48,000 nodes against the schema one by one took 95% of this test's time.
    cell = nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output("stream", name="stdout", text="")])
    notebook.cells = [nbformat.from_dict({**cell, "id": f"cell-{i}", "source": "x = 1" if i % 2 else f"y{i} = {i}",
                                          "outputs": [{**cell.outputs[0], "text": f"{i}"}]})
                      for i in range(n)]
    cells = [RunCell(FREE, None, "code", c.source, c.source, 0.0, "yours") for c in notebook.cells]
    found = feedback.submitted_outputs(notebook, cells)
    assert [f[0]["text"] for f in found] == [str(i) for i in range(n)]
    page = feedback.render_feedback(student="s", assignment="a", notebook="nb", cells=cells,
                                    outcomes=[CellOutcome("ok")] * n, scores={}, notes=[],
                                    hidden=["check_close(secret(torch.ones(3)), expected)"], submitted=found)
    assert page.count("output from your own run") == n

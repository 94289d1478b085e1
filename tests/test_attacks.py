"""A hostile learner against the real grader: each attack class of issue 20 is a notebook built here and
graded through the command line next to an honest and a blank submission of 02-self-attention.

Delegating a part to the course library or to a switched-off built-in, by any route (an import, an
alias, a subclass, a thread, code hidden in an encoded string and run with ``exec``), earns nothing for
that part and says why; recording the hidden tests' arguments shows nothing in feedback; a wrong answer
on a hidden case is reported without its arguments or expected values; a broken set-up stops the batch
before the first submission.
"""

import csv
import html
import json
import re
import time
import unicodedata
from pathlib import Path

import pytest
from conftest import run_once

from autograder.__main__ import main
from autograder.engine import sandbox
from autograder.engine.plan import hidden_lines, load_plan

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "02-self-attention"
NOTEBOOK = "self_attention.ipynb"
pytestmark = pytest.mark.slow

SOLUTION = ROOT / "solutions" / ASSIGNMENT / NOTEBOOK
RELEASE = ROOT / "exercises" / ASSIGNMENT / NOTEBOOK
PARTS = ["test_project_qkv", "test_attention_scores", "test_stable_softmax", "test_attention",
         "test_self_attention_module"]

LIBRARY_ATTENTION = '''from transformer_core.attention import scaled_dot_product_attention as _library

def attention(q, k, v, mask=None):
    return _library(q, k, v, mask=mask, return_weights=True)
'''
LIBRARY_MODULE = '''import transformer_core.attention as _lib

class SelfAttention(_lib.MultiHeadAttention):
    def __init__(self, d_model, d_k):
        super().__init__(d_model, 1, bias=False)
'''
ALIASED_SOFTMAX = "_sm = torch.softmax\n\ndef stable_softmax(scores, dim=-1):\n    return _sm(scores, dim=dim)\n"
THREADED_SOFTMAX = '''import threading

def stable_softmax(scores, dim=-1):
    out = []
    worker = threading.Thread(target=lambda: out.append(torch.softmax(scores, dim=dim)))
    worker.start()
    worker.join()
    return out[0]
'''
ENCODED = "exec(bytes.fromhex('{}').decode())\n"
RECORDING_SOFTMAX = '''_seen = []

def stable_softmax(scores, dim=-1):
    _seen.append((tuple(scores.shape), dim, scores.flatten()[:3].tolist()))
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)
'''
PRINT_RECORDED = 'print("LE" + "AK", _seen)\n'
DISARM_GUARD = "import course_runtime.testing as _t\n_t.forbid_shortcuts = None\n"
WRONG_ON_VECTORS = '''def stable_softmax(scores, dim=-1):
    if scores.dim() == 1:
        return scores * 0 + 1 / scores.shape[0] + 0.125
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)
'''


def _answers() -> dict[str, str]:
    nb = json.loads(SOLUTION.read_text(encoding="utf-8"))
    return {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in nb["cells"]
            if c["metadata"].get("nbgrader", {}).get("solution")}


def notebook(changes: dict[str, str] | None = None, extra: list[str] = (), honest: bool = True) -> str:
    """The released exercise with the solution's answers (``honest``), some of them replaced, and the
    learner's own code cells appended at the end."""
    nb = json.loads(RELEASE.read_text(encoding="utf-8"))
    answers = {**(_answers() if honest else {}), **(changes or {})}
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers and cell["metadata"]["nbgrader"].get("solution") and cell["cell_type"] == "code":
            cell["source"] = answers[grade_id]
    for index, source in enumerate(extra):
        nb["cells"].append({"cell_type": "code", "id": f"mine-{index}", "metadata": {}, "source": source,
                            "outputs": [], "execution_count": None})
    return json.dumps(nb)


SUBMISSIONS = {
    "honest": notebook(),
    "blank": notebook(honest=False),
    "library": notebook({"attention": LIBRARY_ATTENTION, "self_attention_module": LIBRARY_MODULE}),
    "builtin": notebook({"stable_softmax": ALIASED_SOFTMAX}),
    "thread": notebook({"stable_softmax": THREADED_SOFTMAX}),
    "encoded": notebook({"attention": ENCODED.format(LIBRARY_ATTENTION.encode().hex())}, extra=[DISARM_GUARD]),
    "recorder": notebook({"stable_softmax": RECORDING_SOFTMAX}, extra=[PRINT_RECORDED]),
    "hidden_wrong": notebook({"stable_softmax": WRONG_ON_VECTORS}),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    def run(folder: Path) -> dict:
        subs, out = folder / "submissions", folder / "out"
        for student, text in SUBMISSIONS.items():
            (subs / student).mkdir(parents=True)
            (subs / student / NOTEBOOK).write_text(text, encoding="utf-8")
        status = main(["grade", str(subs), "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "2",
                       "--no-progress"])
        with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
            rows = {r["student"]: r for r in csv.DictReader(handle)}
        pages = {}
        for result in (out / "results").rglob("*.json"):
            record = json.loads(result.read_text(encoding="utf-8"))
            pages[record["student"]] = "".join((out / page).read_text(encoding="utf-8")
                                               for page in record.get("feedback", []))
        return {"status": status, "rows": rows, "pages": pages}

    return run_once(tmp_path_factory, "attacks-02", run)


def points(graded, student) -> dict[str, float]:
    row = graded["rows"][student]
    return {part: float(row[f"self_attention:{part}"]) for part in PARTS}


def full(graded) -> dict[str, float]:
    return points(graded, "honest")


def page(graded, student) -> str:
    return graded["pages"][student]


def test_honest_earns_full_marks_and_blank_nothing(graded):
    honest, blank = graded["rows"]["honest"], graded["rows"]["blank"]
    written = float(honest["max_score"]) - sum(float(v) for k, v in honest.items()
                                               if k.startswith("self_attention:") and v and not k.endswith("answer"))
    assert float(honest["score"]) == float(honest["max_score"]) - written and written <= 3, honest
    assert honest["needs_manual_grade"] == "yes", "only the written answer is left, for a person to grade"
    assert all(value == 0 for value in points(graded, "blank").values())
    assert float(blank["score"]) == 0


@pytest.mark.parametrize("student, lost, why", [
    ("library", {"test_attention", "test_self_attention_module"}, "reference library"),
    ("builtin", {"test_stable_softmax"}, "switched off"),
    ("thread", {"test_stable_softmax"}, "module not allowed"),
    ("encoded", {"test_attention"}, "dynamic code"),
])
def test_delegating_a_part_earns_nothing_for_it_and_says_why(graded, student, lost, why):
    earned = points(graded, student)
    assert {part for part, value in earned.items() if value == 0} == lost, earned
    assert all(earned[part] == full(graded)[part] for part in PARTS if part not in lost)
    text = unicodedata.normalize("NFKC", page(graded, student))
    assert why in text, "the feedback names the rule that was broken"
    # A rule of the source is judged before the cell runs; a switched-off built-in when the tests call it.
    assert ("breaks the exercise" in text) == (student != "builtin")


def test_disarming_the_kernels_guard_is_refused_and_said(graded):
    text = page(graded, "encoded")
    assert "grading machinery" in text and "it was not run" in text


def _visible_only(text: str) -> str:
    """Feedback text without whitespace and invisible characters (so nothing hides between them)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text)
                   if not ch.isspace() and unicodedata.category(ch) not in ("Cf", "Cc", "Zs"))


def test_recorded_hidden_arguments_never_reach_feedback(graded):
    assert points(graded, "recorder") == full(graded), "recording arguments is not against the rules"
    text = _visible_only(page(graded, "recorder"))
    assert "LEAK" not in text, "what learner code printed after hidden tests called it reached feedback"


def test_a_wrong_answer_on_a_hidden_case_is_reported_without_its_arguments_or_expected_values(graded):
    earned = points(graded, "hidden_wrong")
    assert earned["test_stable_softmax"] == 0 and earned["test_project_qkv"] == full(graded)["test_project_qkv"]
    text = html.unescape(re.sub(r"<[^>]+>", " ", page(graded, "hidden_wrong")))
    assert "hidden check failed" in text
    reason = text.split("hidden check failed", 1)[1].split("test_attention", 1)[0]
    assert "(9,)" not in text and not re.search(r"\d", reason), reason   # no shape, value or expected value
    assert "subtract the maximum" in reason, "the hint the test's author wrote is kept"


def test_no_feedback_page_holds_a_hidden_test_line(graded):
    plan = load_plan(ASSIGNMENT, ROOT)
    released = _visible_only(RELEASE.read_text(encoding="utf-8").replace("\\n", "\n").replace('\\"', '"'))
    secret = {_visible_only(line) for nb in plan.notebooks.values() for line in nb.hidden_lines
              if len(_visible_only(line)) > 20 and "HIDDENTESTS" not in _visible_only(line)}
    secret = {line for line in secret if line not in released}     # lines the visible tests also have
    for student, text in graded["pages"].items():
        squeezed = _visible_only(text)
        leaked = [line for line in secret if line in squeezed]
        assert not leaked, f"{student}'s feedback shows hidden test code: {leaked[:2]}"


def test_validate_judges_the_source_the_same_way(tmp_path, capsys):
    path = tmp_path / NOTEBOOK
    path.write_text(SUBMISSIONS["builtin"], encoding="utf-8")
    status = main(["validate", str(path)])
    said = capsys.readouterr().out
    assert status != 0 and "switched off" in said and "torch.softmax" in said


@pytest.mark.skipif(not sandbox.can_isolate(), reason="simulated through the sandbox's mounts (Linux, root)")
def test_a_broken_set_up_is_reported_before_the_first_submission(tmp_path, monkeypatch, capsys):
    # The kernels cannot import the course's runtime, as when this Python's install of the course points
    # at another checkout: new kernels (not forked from a server that already imported it) whose
    # sandbox lacks course_runtime.
    original = sandbox.readable_roots
    monkeypatch.setattr(sandbox, "readable_roots", lambda: [r for r in original() if "course_runtime" not in r])
    monkeypatch.setenv("AUTOGRADER_COLD_KERNELS", "1")
    for index in range(3):
        (tmp_path / "subs" / f"learner{index}").mkdir(parents=True)
        (tmp_path / "subs" / f"learner{index}" / NOTEBOOK).write_text(SUBMISSIONS["honest"], encoding="utf-8")
    start = time.monotonic()
    status = main(["grade", str(tmp_path / "subs"), "--assignment", ASSIGNMENT, "--out", str(tmp_path / "out"),
                   "--no-progress"])
    assert time.monotonic() - start < 60, "a timeout is for hangs; this one should stop at once"
    said = capsys.readouterr()
    message = (said.err + said.out).strip().splitlines()
    assert status == 2
    assert any("course_runtime" in line and "Fix:" in line for line in message), message
    assert not (tmp_path / "out" / "grades.csv").exists() or "learner0" not in (tmp_path / "out" / "grades.csv").read_text()


def test_the_hidden_check_message_keeps_its_hint():
    # The words kept for a hidden failure come from the test's own literal text (see the referee).
    plan = load_plan(ASSIGNMENT, ROOT)
    assert any(re.search(r"hint=\"subtract the maximum", line) for nb in plan.notebooks.values()
               for line in nb.hidden_lines)

"""The channel between a learner's kernel and the referee: the wire format, the agent, the proxies.

These run the agent in this process (its answers as JSON text, exactly what the kernel would send)
with a fake notebook namespace as ``__main__``; the grading tests run the same code across real,
sandboxed kernels.
"""

import json
import math

import pytest
from conftest import fake_main, in_process_referee
import torch

from autograder.core.outcomes import CellOutcome, Failure, Verdict
from autograder.engine.disclosure import shown_test_reason
from autograder.engine.grade_one import in_learners_language
from autograder.engine.plan import TEST, RunCell
from autograder.engine.referee import public_view
from course_runtime import agent, remote, wire
from course_runtime.testing import ShortcutError


# --- wire ---------------------------------------------------------------------------------------


def test_values_round_trip_as_plain_data():
    value = {"t": torch.arange(6, dtype=torch.float16).reshape(2, 3), "b": torch.tensor([True, False]),
             "c": (1, 2.5, float("nan"), float("-inf"), 1 + 2j, None, "x", [True]),
             "size": torch.Size([2, 3]), "dtype": torch.bfloat16, 7: torch.zeros(0, 4),
             "big": 2 ** 70, "p": torch.nn.Parameter(torch.ones(2))}
    back = wire.loads(wire.dumps(value))
    assert torch.equal(back["t"], value["t"]) and back["t"].dtype == torch.float16
    assert type(back["p"]) is torch.Tensor and back["p"].requires_grad
    assert back["c"][:2] == (1, 2.5) and math.isnan(back["c"][2]) and back["c"][3:] == (
        float("-inf"), 1 + 2j, None, "x", [True])
    assert back["size"] == torch.Size([2, 3]) and back["dtype"] is torch.bfloat16
    assert back[7].shape == (0, 4) and back["big"] == float(2 ** 70)


@pytest.mark.parametrize("document, why", [
    ('{"$tensor": {"dtype": "float32", "shape": [1000000, 1000000], "requires_grad": false, "data": ""}}',
     "needs"),
    ('{"$tensor": {"dtype": "object", "shape": [1], "requires_grad": false, "data": ""}}', "dtype"),
    ('{"$pickle": "gASV"}', "unknown entry"),
    ('{"a": 1}', "unknown entry"),
    ("[" * 100_000 + "]" * 100_000, "nested"),
    ('NaN', "bare NaN"),
    ('{"$ref": 1, "types": []}', "not accepted"),
])
def test_malformed_documents_are_refused_with_a_reason(document, why):
    with pytest.raises(wire.WireError, match=why):
        wire.loads(document)


def test_oversized_documents_are_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(wire, "MAX_CHARS", 100)
    with pytest.raises(wire.WireError, match="larger than"):
        wire.loads('"' + "x" * 200 + '"')


def test_the_agent_knows_every_operation_of_the_protocol_and_no_other(monkeypatch):
    fake_main(monkeypatch, "import torch.nn as nn\nlayer = nn.Linear(2, 2)")
    target = {"$ref": json.loads(agent.answer(wire.request_text(wire.Op.LOOKUP, name="layer")))["value"]["$ref"]}
    assert "unknown request 'exec'" in agent.answer(json.dumps({"op": "exec", "target": target}))
    for op in wire.Op:          # each is dispatched (whatever it then makes of these fields), none is unknown
        answer = agent.answer(wire.request_text(op, target=target, name="weight", key=0, args=[], kwargs={}))
        assert "unknown request" not in answer, (op, answer)
    assert json.loads(wire.RELEASE_REQUEST) == {"op": "release"}


# --- a referee against an in-process agent -------------------------------------------------------


LEARNER_CODE = '''
import torch
import torch.nn as nn

def double(x):
    return 2 * x

def wrong_double(x):
    return 3 * x

def scale_in_place(x):
    x.mul_(10)
    return x

def softmax_shortcut(x):
    return torch.softmax(x, -1)

def explode(x):
    raise ValueError("learner says no")

def call_helper(x):
    return helper(x)

def helper(x):
    return x + 1

def apply(fn, x):
    return fn(x)

answer_q1 = " B"
layer = nn.Linear(3, 2, bias=False)
'''


@pytest.fixture()
def notebook(monkeypatch):
    """A fake learner notebook as ``__main__``, and a referee talking to it through the agent."""
    main = fake_main(monkeypatch, LEARNER_CODE)
    referee = in_process_referee(["import torch", "import torch.nn as nn",
                                  "from course_runtime.testing import check_close, check_answer, forbid_shortcuts, "
                                  "standing_in, gradients, in_kernel, build"])
    return referee, main


def test_verdicts_come_from_the_values_the_learner_returns(notebook):
    referee, _ = notebook
    assert referee.run_test("x = torch.ones(3)\ncheck_close(double(x), 2 * x)") is None
    reason = referee.run_test("x = torch.ones(3)\ncheck_close(wrong_double(x), 2 * x, name='y')").text
    assert "`y` has the wrong values" in reason
    assert referee.run_test("check_answer(answer_q1, 'b', name='answer_q1')") is None


def test_learner_errors_keep_their_type_and_in_place_changes_come_back(notebook):
    referee, _ = notebook
    assert referee.run_test(
        "try:\n    explode(torch.ones(1))\nexcept ValueError as e:\n    assert 'learner says no' in str(e)\n"
        "else:\n    raise AssertionError('no error')") is None
    assert referee.run_test(
        "x = torch.ones(2)\nscale_in_place(x)\nassert torch.equal(x, torch.full((2,), 10.0))") is None


def test_shortcut_guards_and_stand_ins_apply_in_the_kernel(notebook):
    referee, main = notebook
    reason = referee.run_test(
        "with forbid_shortcuts('torch.softmax'):\n    softmax_shortcut(torch.ones(2))").text
    assert reason.startswith("ShortcutError") and "implement this yourself" in reason
    source = "def _ref_helper(x):\n    return x - 1\n\nwith standing_in(helper=_ref_helper):\n" \
             "    check_close(call_helper(torch.ones(2)), torch.zeros(2))\nassert call_helper(torch.ones(1)).item() == 2"
    assert referee.run_test(source) is None
    assert main.helper(torch.ones(1)).item() == 2  # restored


def test_code_from_hidden_tests_never_goes_to_the_kernel(notebook):
    referee, _ = notebook
    hidden = ("x = 1\n### BEGIN HIDDEN TESTS\ndef _secret(x):\n    return x * 2\n"
              "apply(_secret, torch.ones(1))\n### END HIDDEN TESTS")
    assert "_secret" not in public_view(hidden) and public_view(hidden).count("\n") == hidden.count("\n")
    reason = referee.run_test(hidden).text
    assert "visible part" in reason
    visible = "def _public(x):\n    return x * 2\n\nassert apply(_public, torch.ones(1)).item() == 2"
    assert referee.run_test(visible) is None


def test_modules_of_the_learner_work_through_proxies(notebook):
    referee, main = notebook
    source = """
assert isinstance(layer, nn.Linear) and isinstance(layer.weight, torch.Tensor)
assert layer.weight.shape == (2, 3) and sum(p.numel() for p in layer.parameters()) == 6
with torch.no_grad():
    layer.weight.copy_(torch.ones(2, 3))
check_close(layer(torch.ones(1, 3)), torch.full((1, 2), 3.0))
out, (grad_x,), grads = gradients(layer, torch.ones(1, 3), module=layer)
check_close(grads["weight"], torch.ones(2, 3))
opt = build("torch.optim.SGD", layer.parameters(), lr=1.0)
state = layer.state_dict()                          # an OrderedDict comes back as a plain dict
assert type(state) is dict and torch.equal(state["weight"], torch.ones(2, 3))
layer.load_state_dict({"weight": 2 * state["weight"]})
"""
    assert referee.run_test(source) is None
    assert torch.equal(main.layer.weight.detach(), torch.full((2, 3), 2.0))


def test_a_test_cannot_swallow_a_lost_kernel(notebook):
    referee, _ = notebook

    def lost(message):
        if message["type"] == "kernel":
            referee.receive = lambda: {"type": "unavailable", "reason": "the kernel was stopped: too much output"}

    referee.send = lost
    reason = referee.run_test("try:\n    double(torch.ones(1))\nexcept Exception:\n    pass").text
    assert reason == "the kernel was stopped: too much output"


def test_builtins_are_not_looked_up_and_learner_modules_are_not_trusted(notebook):
    referee, main = notebook
    main.math = torch  # a learner who rebinds a module name gets nothing from it
    reason = referee.run_test("math.sqrt(4)").text
    assert "NameError" in reason
    assert referee.run_test("assert len([1, 2]) == 2 and isinstance(3, int)") is None


def test_errors_map_to_builtin_types_and_shortcuts():
    assert isinstance(remote.learner_error(["ValueError", "Exception"], "m"), ValueError)
    assert isinstance(remote.learner_error(["ShortcutError", "RuntimeError"], "m"), ShortcutError)
    error = remote.learner_error(["MyError", "Exception", "BaseException", "object"], "m")
    assert isinstance(error, remote.LearnerError) and not isinstance(error, ValueError)


# --- what a failing hidden part may say ----------------------------------------------------------


def _hidden(code: str) -> str:
    return "y = 1\n### BEGIN HIDDEN TESTS\n" + code + "\n### END HIDDEN TESTS"


def test_a_failing_hidden_check_shows_its_written_words_but_no_value_or_argument(notebook):
    referee, _ = notebook
    reason = referee.run_test(_hidden(
        "x = torch.full((7, 3), 0.123456)\n"
        "check_close(wrong_double(x), 2 * x, name=f'double(x of shape {tuple(x.shape)})', "
        "hint='multiply by two, not three')")).text
    assert reason == "a hidden check failed: `double(x of shape …)` is not correct\nHint: multiply by two, not three"
    reason = referee.run_test(_hidden("n, m = 577, 576\nassert wrong_double(torch.ones(1)).item() == 2, f'got {n}, expected {m}'")).text
    assert reason == "a hidden check failed: got …, expected …"


def test_a_learners_exception_in_a_hidden_test_is_named_by_its_type_only(notebook):
    referee, main = notebook
    main.explode = lambda x: (_ for _ in ()).throw(ValueError(f"recorded {x.tolist()}"))
    reason = referee.run_test(_hidden("explode(torch.tensor([3.25, 4.5]))")).text
    assert reason.startswith("in a hidden test your code raised ValueError")
    assert "3.25" not in reason and "recorded" not in reason


def test_visible_failures_keep_their_full_message(notebook):
    referee, _ = notebook
    reason = referee.run_test("n = 577\nassert wrong_double(torch.ones(1)).item() == 2, f'got {n}, expected 576'").text
    assert "got 577, expected 576" in reason


def test_a_switched_off_call_in_a_hidden_test_says_so_without_the_kernels_text(notebook):
    referee, _ = notebook
    reason = referee.run_test(_hidden("with forbid_shortcuts('torch.softmax'):\n    softmax_shortcut(torch.ones(2))")).text
    assert reason.startswith("implement this yourself: in a hidden test")


# --- the verdict as fields, and in the learner's language ---------------------------------------


def test_a_visible_failure_comes_back_as_fields_with_its_hint_apart(notebook):
    referee, _ = notebook
    verdict = referee.run_test("x = torch.ones(3)\n"
                               "check_close(wrong_double(x), 2 * x, name=f'y of {3}', hint='multiply by two')")
    assert (verdict.failure, verdict.exception) == (Failure.VISIBLE, "AssertionError")
    assert verdict.message.startswith("`y of 3` has the wrong values") and "Hint" not in verdict.message
    assert (verdict.hint, verdict.hint_written, verdict.words) == ("multiply by two", True, "`y of …` is not correct")
    assert verdict.text == f"AssertionError: {verdict.message}\nHint: multiply by two"
    assert Verdict.from_json(json.loads(json.dumps(verdict.to_json())), 4000) == verdict
    # An author's message with a hint line is known without it; a hint the test does not hold whole is
    # no author's hint.
    verdict = referee.run_test("raise ValueError(f'bad {2}\\nHint: made up')")
    assert (verdict.words, verdict.hint, verdict.hint_written) == ("bad …", "made up", False)


def _chinese_outcome(verdict: Verdict) -> str:
    notebook = {"metadata": {"course": {"language": "zh_CN"}}, "cells": []}
    cell = RunCell(TEST, "t", "code", "", "", 1.0, "course")
    [outcome] = in_learners_language([cell], [CellOutcome("error", verdict.text, verdict=verdict)], notebook)
    return outcome.reason


def test_a_chinese_learner_reads_a_visible_failure_from_its_fields():
    # check_close's message, whose entry has no exception name in front; then its hint on its own line; the
    # label in backticks is the learner's variable and stays as written
    message = ("`weights` has the wrong values: 1 of 4 entries differ from the reference by more than the tolerance "
               "(atol=1e-05, rtol=0.0001).\nThe largest difference is 1 at index (0, 1): you returned 2, expected 1.")
    shown = _chinese_outcome(Verdict(Failure.VISIBLE, "AssertionError", message, hint="an unknown hint"))
    assert shown.startswith("AssertionError: `weights` 的数值不对：") and shown.endswith("\n提示：an unknown hint")
    # an entry written with the hint line in it (issue 29: it never matched, the line was cut off first)
    message = "causal_mask(4) is wrong at [0, 1]: it says True, expected False."
    shown = _chinese_outcome(Verdict(Failure.VISIBLE, "AssertionError", message, hint="mask the future"))
    assert shown == "AssertionError: causal_mask(4) 在 [0, 1] 处有误，值为 True，应为 False。\n提示：mask the future"


def test_an_exception_of_the_learners_code_borrows_no_authors_words(notebook):
    referee, main = notebook
    # the learner's exception copies the visible test's template and hint: which one it copies could
    # carry a hidden test's data, so after a hidden test nothing of it is shown
    main.explode = lambda x: (_ for _ in ()).throw(ValueError("got 1\nHint: multiply by two"))
    verdict = referee.run_test("y = explode(torch.ones(1))\nassert y == 2, f'got {y}'\nprint('multiply by two')")
    assert (verdict.exception, verdict.message, verdict.hint) == ("ValueError", "got 1", "multiply by two")
    assert (verdict.words, verdict.hint_written) == (None, False)
    assert shown_test_reason(verdict, after_hidden=True).startswith("ValueError (its message is not shown")
    assert shown_test_reason(verdict, after_hidden=False) == "ValueError: got 1\nHint: multiply by two"

"""A switched-off built-in that the kernel's guard refused during a test is carried as data, from the
referee's session to the cell's outcome and grades.csv's ``flags`` column (issue 27): the names come
from the test's own guards, never from the kernel's text, and honest code is never flagged.

The referee runs here against the grading agent in this process (as in ``test_referee.py``).
"""

import asyncio
import json

import pytest
from conftest import fake_main, in_process_referee

from autograder.engine.grade_one import refusal_flag
from autograder.engine.referee import RefereeProcess
from course_runtime import agent, wire

LEARNER_CODE = '''
import torch
from course_runtime.errors import ShortcutError


def own_softmax(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def delegated_softmax(x):
    return getattr(torch, "soft" + "max")(x, -1)


def caught_and_retried(x):
    try:
        return torch.softmax(x, -1)
    except ShortcutError:
        return own_softmax(x)


def forged(x):
    raise ShortcutError("implement this yourself: `torch.softmax` is switched off")
'''

GUARDED = "with forbid_shortcuts('torch.softmax', 'torch.Tensor.softmax'):\n    y = {call}(torch.ones(2, 3))\n"


@pytest.fixture()
def referee(monkeypatch):
    """A referee whose kernel is the grading agent in this process, with a fake notebook."""
    fake_main(monkeypatch, LEARNER_CODE)
    referee = in_process_referee(["import torch", "from course_runtime.testing import forbid_shortcuts"])
    yield referee
    agent.answer(wire.RELEASE_REQUEST)


def test_a_refused_built_in_is_recorded_with_the_tests_switched_off_names(referee):
    assert referee.run_test(GUARDED.format(call="delegated_softmax")) is not None
    assert list(referee.session.refused) == ["torch.softmax", "torch.Tensor.softmax"]


@pytest.mark.parametrize("call", ["own_softmax", "caught_and_retried"])
def test_code_that_reaches_no_switched_off_built_in_in_the_referee_is_not_recorded(referee, call):
    verdict = referee.run_test(GUARDED.format(call=call))
    assert verdict is None, verdict
    assert not referee.session.refused


def test_a_shortcut_error_raised_with_no_guard_on_is_the_learners_own_and_not_recorded(referee):
    assert referee.run_test("forged(torch.ones(2))") is not None and not referee.session.refused


def test_each_test_cell_starts_with_no_refusal(referee):
    referee.run_test(GUARDED.format(call="delegated_softmax"))
    assert referee.session.refused
    verdict = referee.run_test(GUARDED.format(call="own_softmax"))
    assert verdict is None, verdict
    assert not referee.session.refused and list(referee.session.guarded) == ["torch.softmax", "torch.Tensor.softmax"]


class _Pipe:
    """The referee process's end as :class:`RefereeProcess` reads it: one scripted verdict."""

    def __init__(self, verdict: dict) -> None:
        self.line = json.dumps(verdict).encode() + b"\n"

    async def readline(self) -> bytes:
        return self.line


def test_the_verdicts_refused_names_reach_the_cells_outcome(monkeypatch):
    process = RefereeProcess()

    async def send(message):
        pass

    monkeypatch.setattr(process, "_send", send)
    process.process = type("P", (), {"stdout": _Pipe({"type": "verdict", "ok": False,
                                                      "verdict": {"failure": "visible", "exception": "ShortcutError"},
                                                      "refused": ["torch.softmax"]})})()
    outcome = asyncio.run(process.run_test("x", kernel=None, timeout=5))
    assert (outcome.status, outcome.refused) == ("error", ("torch.softmax",))
    process.process = type("P", (), {"stdout": _Pipe({"type": "verdict", "ok": True})})()
    outcome = asyncio.run(process.run_test("x", kernel=None, timeout=5))
    assert (outcome.status, outcome.refused) == ("ok", ())


def test_the_flag_names_what_the_test_switched_off():
    assert refusal_flag(("torch.softmax",)) == "a switched-off built-in ran during its tests (torch.softmax)"
    names = ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "torch.special.softmax",
             "torch._softmax")
    assert refusal_flag(names) == ("a switched-off built-in ran during its tests (one of torch.softmax, "
                                   "torch.nn.functional.softmax, torch.Tensor.softmax and 2 more)")

"""Why a kernel stopped reaches the learner's feedback page in the notebook's language: every reason the
runner, the relay and the referee give has a Chinese entry in course_runtime's messages catalogue, found the way the
page looks it up (``translate(reason, "messages", language)``)."""

import re
import signal
from types import SimpleNamespace

import pytest

from autograder.core.limits import Limits
from autograder.engine import relay, stop_reasons
from autograder.engine.runner import SandboxedKernel
from course_runtime.language import CHINESE, translate

# What may stay Latin in a Chinese reason: units, signal and function names, file formats.
KEPT = {"MiB", "JSON", "CPU", "exit", "sys", "os", "SIGKILL", "SIGRTMAX", "SIGUSR"}


def every_reason() -> list[str]:
    """Each reason, as the runner and the relay make it, with values of the kinds grading sees."""
    reasons = [stop_reasons.exited(code) for code in (-signal.SIGKILL, 128 + signal.SIGKILL, -signal.SIGXCPU,
                                                        -signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS,
                                                        -signal.SIGTERM, -signal.SIGUSR2, -200, 0, 1)]
    reasons += [stop_reasons.out_of_memory(2048), stop_reasons.too_much_output(64, 20_000),
                stop_reasons.relay_ended(2048), stop_reasons.oversized(64),
                stop_reasons.not_interruptible(stop_reasons.THE_CELL, 10.0),
                stop_reasons.not_interruptible(stop_reasons.YOUR_CODE, 2.5), stop_reasons.interrupted(120.0),
                stop_reasons.code_too_slow(0.25), stop_reasons.past_deadline(900.0), stop_reasons.no_agent("error"),
                stop_reasons.odd_reply("aborted"), stop_reasons.NOT_RUNNING, stop_reasons.UNRESPONSIVE,
                stop_reasons.unanswered(stop_reasons.no_agent("error")), stop_reasons.unanswered(stop_reasons.NO_AGENT),
                stop_reasons.code_interrupted(10.0), stop_reasons.slow_test(2.5)]
    reasons += [relay.refusal_reason(kind, number) for kind, number in
                (("size", 70 * 2 ** 20), ("frames", 5_007), ("values", 123_456))]
    return reasons


@pytest.mark.parametrize("reason", every_reason())
def test_every_reason_reads_in_chinese(reason):
    for shown in (reason, f"not run: {reason} (in an earlier cell)"):   # the later cells' reason (grade_one)
        chinese = translate(shown, "messages", CHINESE)
        assert chinese != shown, f"no Chinese entry for {shown!r}"
        left = set(re.findall(r"[A-Za-z]{2,}", re.sub(r"'[^']*'", "", chinese))) - KEPT   # quoted: the kernel's words
        assert not left, f"{shown!r} -> {chinese!r} keeps English: {sorted(left)}"
        # Every number of the English is in the Chinese: the template's values are filled in.
        assert re.findall(r"\d[\d,.]*", shown) == re.findall(r"\d[\d,.]*", chinese), (shown, chinese)


def test_the_english_reasons_are_unchanged():
    assert stop_reasons.exited(-signal.SIGKILL) == stop_reasons.exited(128 + signal.SIGKILL) == (
        "the kernel stopped: it was killed (SIGKILL)")
    assert stop_reasons.exited(-signal.SIGUSR2) == "the kernel stopped: it got signal SIGUSR2"
    assert stop_reasons.exited(-200) == "the kernel stopped: it exited with status -200"
    assert stop_reasons.exited(3).startswith("the kernel exited (status 3): the code called exit()")
    assert relay.refusal_reason("size", 70 * 2 ** 20) == ("the kernel was stopped: it sent a message larger than "
                                                          "the grader accepts (70 MiB; at most 64 MiB)")
    assert relay.refusal_reason("values", 123_456).endswith("of 123,456 JSON values, more than the grader accepts "
                                                            "(100,000)")
    assert stop_reasons.too_much_output(64, 20_000) == ("the kernel was stopped: it sent more than 64 MiB or 20,000 "
                                                        "messages of output")
    assert stop_reasons.unanswered(stop_reasons.no_agent("error")) == (
        "your code did not answer: the grading agent in your kernel did not answer (it sent 'error')")
    assert stop_reasons.code_interrupted(10.0) == "your code ran longer than 10 s and was interrupted"
    assert stop_reasons.past_deadline(900.0) == "not run: the notebook used up its time limit of 900 s"


def test_the_runner_says_why_its_kernel_ended(tmp_path):
    kernel = SandboxedKernel(tmp_path, Limits(memory_mb=1024), 0)
    for code, said in ((-signal.SIGXCPU, "the kernel stopped: it used up its CPU time limit"),
                       (None, "the kernel stopped responding")):
        kernel.km = SimpleNamespace(provisioner=SimpleNamespace(process=SimpleNamespace(poll=lambda: code)))
        assert kernel.exit_reason() == said
        assert translate(said, "messages", CHINESE) != said

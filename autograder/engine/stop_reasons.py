"""What a learner reads when the grading kernel stops or a request to it is cut short, in one place.

:mod:`autograder.engine.runner` and :mod:`autograder.engine.relay` say why a kernel was stopped or did
not start with these words, :mod:`autograder.engine.referee` why a test's request to the learner's code
got no answer and :mod:`autograder.engine.grade_one` why a cell did not run or the grader failed. They are kept in this one module so that
``python -m autograder i18n update`` can collect its sentences whole (``LEARNER_TEXT`` in :mod:`autograder.course.i18n.runtime_text`). They reach the
learner's feedback page, which shows them in the notebook's language (:mod:`autograder.engine.pages`
looks each up in ``course_runtime``'s ``messages`` catalogue). Each is an English f-string whose
placeholders are plain names, so that its catalogue entry is a template (flagged ``course-pattern``:
``"the kernel stopped: {why}"`` -> ``"内核停止了：{why}"``), and a filled-in value that is itself one of
these words (``why``) is translated in turn. A value that is not (an exception's text, the kernel's
log) is detail: the page shows it quoted, apart from the sentence (:mod:`autograder.engine.pages`).
"""

from __future__ import annotations

import signal

# Why a kernel that a signal ended is gone, by signal (others are named: "it got signal SIGUSR2").
SIGNALS = {signal.SIGKILL: "it was killed (SIGKILL)", signal.SIGXCPU: "it used up its CPU time limit",
           signal.SIGSEGV: "it crashed (segmentation fault)", signal.SIGABRT: "it aborted",
           signal.SIGBUS: "it crashed (bus error)", signal.SIGTERM: "it was terminated"}
# What ran past its time: a cell the kernel ran, or the learner's code a test called.
THE_CELL, YOUR_CODE = "the cell", "your code"
NOT_RUNNING = "the kernel is not running"
UNRESPONSIVE = "the kernel stopped responding"
# The grader's own words for a request its agent did not answer, without what the kernel sent instead.
NO_AGENT = "the grading agent in your kernel did not answer"


def exited(code: int) -> str:
    """Why a kernel process that ended with ``code`` is gone (``Popen.poll``'s code: ``-N`` or
    ``128 + N`` for signal N, else the status it exited with).

    Example:
        >>> exited(-9)
        'the kernel stopped: it was killed (SIGKILL)'
    """
    if code < 0 or code > 128:
        number = -code if code < 0 else code - 128
        try:
            name = signal.Signals(number).name
            why = SIGNALS.get(signal.Signals(number), f"it got signal {name}")
        except ValueError:
            why = f"it exited with status {code}"
        return f"the kernel stopped: {why}"
    return (f"the kernel exited (status {code}): the code called exit(), sys.exit() in a thread, "
            "os._exit() or similar")


def out_of_memory(memory_mb: int) -> str:
    """The kernel's cgroup ran out of its ``memory_mb``."""
    return f"the kernel stopped: its processes together used more than the memory limit ({memory_mb} MiB)"


def too_much_output(message_mb: int, messages: int) -> str:
    """The kernel sent more than a notebook's message budget (``Limits.message_mb``, ``Limits.messages``)."""
    return f"the kernel was stopped: it sent more than {message_mb} MiB or {messages:,} messages of output"


def relay_ended(memory_mb: int) -> str:
    """The kernel's relay (:mod:`autograder.engine.relay`) ended, within the kernel's ``memory_mb``."""
    return (f"the kernel was stopped: the process that relays its messages ended (out of memory within "
            f"the kernel's {memory_mb} MiB, or killed)")


def oversized(cap_mib: int) -> str:
    """The kernel sent one frame over the channel's cap of ``cap_mib``."""
    return f"the kernel was stopped: it sent a message larger than the grader accepts (at most {cap_mib} MiB)"


def refused(kind: str, number: int, *, cap_mib: int, max_frames: int, max_values: int) -> str:
    """The kernel's relay refused a message (:mod:`autograder.engine.relay`): ``kind`` ``"size"`` (``number``
    bytes, over ``cap_mib``), ``"frames"`` (``number`` frames, over ``max_frames``) or ``"values"``
    (``number`` JSON values, over ``max_values``)."""
    mib = number / 2 ** 20
    details = {"size": f"it sent a message larger than the grader accepts ({mib:,.0f} MiB; at most {cap_mib} MiB)",
               "frames": f"it sent a message of {number:,} parts, more than the grader accepts ({max_frames})",
               "values": f"it sent a message of {number:,} JSON values, more than the grader accepts ({max_values:,})"}
    detail = details[kind]
    return f"the kernel was stopped: {detail}"


def not_interruptible(what: str, timeout: float) -> str:
    """``what`` (:data:`THE_CELL` or :data:`YOUR_CODE`) ran past ``timeout`` seconds and ignored the interrupt."""
    return f"{what} ran longer than {timeout:g} s and did not stop when interrupted, so the kernel was stopped"


def interrupted(timeout: float) -> str:
    """A cell ran past ``timeout`` seconds and was interrupted."""
    return f"the cell ran longer than {timeout:g} s and was interrupted"


def code_too_slow(timeout: float) -> str:
    """The learner's code, called by a test, ran past ``timeout`` seconds."""
    return f"your code ran longer than {timeout:g} s"


def past_deadline(notebook_timeout: float) -> str:
    """Nothing more runs: the notebook's ``notebook_timeout`` seconds are used up."""
    return f"not run: the notebook used up its time limit of {notebook_timeout:g} s"


def no_agent(sent: str) -> str:
    """The grading agent in the kernel did not answer a request; ``sent`` is what came instead.

    Example:
        >>> no_agent("error")
        "the grading agent in your kernel did not answer (it sent 'error')"
    """
    return f"{NO_AGENT} (it sent {sent!r})"


def unanswered(why: str) -> str:
    """A test's request to the learner's code got no answer, for ``why`` (:func:`no_agent`, with or
    without what the kernel sent), as the referee reports it."""
    return f"your code did not answer: {why}"


def code_interrupted(timeout: float) -> str:
    """The learner's code, called by a test, ran past the test's ``timeout`` seconds and was interrupted."""
    return f"your code ran longer than {timeout:g} s and was interrupted"


def slow_test(timeout: float) -> str:
    """A test cell ran past its ``timeout`` seconds and its referee was stopped."""
    return f"the test ran longer than {timeout:g} s and was stopped"


def odd_reply(status: object) -> str:
    """The kernel answered an execution with a status other than ``ok`` or ``error``."""
    return f"the kernel answered {status!r}"


def did_not_start(error: str, log: str = "") -> str:
    """The kernel did not start: ``error`` is what failed, ``log`` the end of the kernel's log ("" when
    it wrote none). The English words are also how an older result says the grader failed
    (:data:`autograder.core.results._PREVIOUS_FORMAT_FAILURES`).

    Example:
        >>> did_not_start("TimeoutError: no reply")
        'the kernel did not start (TimeoutError: no reply)'
    """
    if log:
        return f"the kernel did not start ({error}): {log}"
    return f"the kernel did not start ({error})"


def agent_failed(why: str) -> str:
    """The kernel started but the grading agent could not be installed in it, for ``why``."""
    return f"the kernel did not start (the grading agent failed: {why})"


def internal_error(detail: str) -> str:
    """The grader itself failed (its referee, or an error of its own): ``detail`` says what, in the
    grader's words, for the instructor."""
    return f"internal error: {detail}"

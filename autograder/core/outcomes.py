"""How one cell ended: :class:`CellOutcome`, read from the kernel by the runner or decided by the referee,
and :class:`Verdict`, the referee's account of a failed test as fields (what feedback may show of it is
decided on these fields by :mod:`autograder.engine.disclosure`, never by reading its text)."""

from __future__ import annotations

import builtins
from dataclasses import asdict, dataclass, field, fields
from enum import Enum

HINT_LINE = "\nHint: "
#: The exception class names feedback may show once hidden tests have run: Python's built-in exceptions,
#: and the course guard's ``ShortcutError``. A name the kernel sends is the learner's code's to choose
#: (a class of its own can be named after the hidden test's data), so only these are kept.
STANDARD_EXCEPTIONS = frozenset(
    [name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)]
    + ["ShortcutError"])
#: :attr:`CellOutcome.exception` of an error whose class is not one of :data:`STANDARD_EXCEPTIONS`.
UNLISTED_EXCEPTION = "an exception"


def listed_exception(name: object) -> str:
    """``name`` if it is one of :data:`STANDARD_EXCEPTIONS`, else :data:`UNLISTED_EXCEPTION` (``name`` is
    untrusted: anything the kernel sent, a string or not).

    Example:
        >>> listed_exception("ValueError"), listed_exception("Leak_0_8125"), listed_exception(["ValueError"])
        ('ValueError', 'an exception', 'an exception')
    """
    return name if type(name) is str and name in STANDARD_EXCEPTIONS else UNLISTED_EXCEPTION


class Failure(str, Enum):
    """How a test failed, as the referee saw it."""

    VISIBLE = "visible"                  # a visible part of the test raised (a check, an assert, the learner's code)
    TEST = "test"                        # the grader's proxies refused the test as written (a hidden region's mistake)
    HIDDEN_RAISED = "hidden raised"      # the learner's code raised while a hidden part called it
    HIDDEN_CHECK = "hidden check"        # a hidden check failed or raised
    HIDDEN_SHORTCUT = "hidden shortcut"  # the learner's code called a switched-off function in a hidden part
    KERNEL = "kernel"                    # the kernel could not answer, or its answer could not be read


@dataclass(frozen=True)
class Verdict:
    """A failed test as fields: the referee sends it to the grader as JSON (:meth:`to_json`).

    Attributes:
        failure: how the test failed.
        exception: the class name of the exception (``VISIBLE``, ``TEST``, ``HIDDEN_RAISED``; for
            ``HIDDEN_CHECK`` "" when an assertion failed), as the referee saw it: a class of the
            learner's keeps the learner's name.
        message: ``VISIBLE``, ``TEST``: the exception's message without its hint line; ``KERNEL``: the
            grader's reason with what the kernel added.
        hint: the text of the message's ``Hint:`` line (``VISIBLE``, ``TEST``), or the ``hint=`` the
            author wrote on a failing hidden check (``HIDDEN_CHECK``, computed parts as ``…``); None
            when there is none.
        words: what a test's author wrote for this failure, computed parts as ``…``: the template of
            the ``assert``/``raise`` message the failure's message is, or "`name` is not correct"
            for a check called with ``name=`` (``VISIBLE``, ``TEST``: found in the visible part;
            ``HIDDEN_CHECK``: on the failing line); ``KERNEL``: the grader's own words, nothing of
            the kernel's. None when there are none.
        hint_written: whether ``hint`` is a whole string literal of the test's visible part.

    Example:
        >>> Verdict(Failure.VISIBLE, "AssertionError", "got 3", hint="scale by sqrt(d)").text
        'AssertionError: got 3\\nHint: scale by sqrt(d)'
    """

    failure: Failure
    exception: str = ""
    message: str = ""
    hint: str | None = None
    words: str | None = None
    hint_written: bool = False

    @property
    def text(self) -> str:
        """The verdict in the referee's words (shown in full before any hidden test has run)."""
        hint = "" if self.hint is None else HINT_LINE + self.hint
        if self.failure in (Failure.VISIBLE, Failure.TEST):
            full = self.message + hint
            return f"{self.exception}: {full}" if full else self.exception
        if self.failure is Failure.HIDDEN_RAISED:
            return (f"in a hidden test your code raised {self.exception} (its message is not shown: it could "
                    "carry the hidden test's data); the part's text and the visible tests name the cases to handle.")
        if self.failure is Failure.HIDDEN_CHECK:           # each form whole: one sentence for a catalogue
            if self.exception:
                said = f"a hidden check raised {self.exception}: {self.words}" if self.words else \
                    f"a hidden check raised {self.exception}"
            else:
                said = f"a hidden check failed: {self.words}" if self.words else "a hidden check failed"
            return said + hint
        if self.failure is Failure.HIDDEN_SHORTCUT:
            return ("implement this yourself: in a hidden test your code called a function this part switches off "
                    "(`python -m autograder policy` and the visible tests name them).")
        return self.message

    def to_json(self) -> dict:
        """The verdict as JSON data (the referee's message to the grader)."""
        return {**asdict(self), "failure": self.failure.value}

    @classmethod
    def from_json(cls, data: object, max_chars: int) -> Verdict:
        """The verdict ``data`` describes, each text cut to ``max_chars``.

        Raises:
            ValueError: ``data`` is not a verdict.
        """
        if type(data) is not dict or set(data) - {f.name for f in fields(cls)}:
            raise ValueError("not a verdict")
        failure = Failure(data.get("failure"))
        texts = {key: str(data[key])[:max_chars] for key in ("exception", "message", "hint", "words")
                 if data.get(key) is not None}
        return cls(failure, **texts, hint_written=data.get("hint_written") is True)


@dataclass
class CellOutcome:
    """How one cell ended.

    Attributes:
        status: ``"ok"``, ``"error"`` (an exception), ``"timeout"`` (interrupted at its time limit),
            ``"stopped"`` (the kernel died or was stopped during it) or ``"not run"``.
        reason: for anything but ``"ok"``, one line saying why, e.g. ``"AssertionError: ..."``.
        outputs: ``{"kind": "stdout"|"stderr"|"result"|"error", "text": ...}`` in order, capped.
        seconds: wall time of the cell.
        refused: for a test cell, the names its guards switched off when the kernel's guard refused a
            built-in the learner's code reached (set by the referee from the test's own guards, never
            from the kernel's text); the grader flags them for the instructor.
        verdict: for a failed test, the referee's :class:`Verdict`, else None.
        exception: for an ``"error"`` the kernel reported from a cell it ran, the exception's class
            name if it is one of :data:`STANDARD_EXCEPTIONS`, else :data:`UNLISTED_EXCEPTION`
            (:func:`listed_exception` of the ``ename`` of its ``execute_reply``); "" for any other outcome.
    """

    status: str
    reason: str = ""
    outputs: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    refused: tuple[str, ...] = ()
    verdict: Verdict | None = None
    exception: str = ""

    @property
    def ok(self) -> bool:
        """Whether the cell ran to the end without an exception."""
        return self.status == "ok"

"""What feedback may say about a failure once a hidden test has called the learner's code.

From then on the learner's code may hold the hidden test's data (a function can record its arguments),
and anything it says can carry them: the text of an exception it raises, the name of its exception's
class, a value it returns that a visible check then quotes. So a failure after that point is reported
from words that are not the learner's code's to choose:

- an exception's type only from a fixed list (:data:`STANDARD_EXCEPTIONS`); any other class name
  becomes :data:`OWN_CLASS`;
- a visible test's failure as its exception type and the test author's own words (the literal parts
  of the ``assert`` or ``raise`` message, or the ``name=`` of the failing check, whose message text
  it matches), never the message itself; a hint only when the visible test's source holds it whole;
- a hidden test's verdict (:func:`autograder.engine.referee.hidden_failure`, already worded by the grader)
  with its exception type replaced as above;
- the grader's own reasons (time limits, a stopped kernel) as they are, cut before any detail that
  came from the kernel.

:func:`shown_test_reason` and :func:`after_hidden_cell` do the rewriting; :func:`runs_after_hidden_code`
tells whether a test cell's visible part can fail after its own hidden part ran.
"""

from __future__ import annotations

import ast
import builtins
import re

from autograder.engine.referee import _written_text, hidden_line_numbers, public_view

__all__ = ["NOT_SHOWN", "OWN_CLASS", "STANDARD_EXCEPTIONS", "after_hidden_cell", "exception_name",
           "runs_after_hidden_code", "shown_test_reason"]

#: The exception names feedback may show once hidden tests have run: Python's built-in exceptions, and
#: the course guard's ``ShortcutError``.
STANDARD_EXCEPTIONS = frozenset(
    [name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)]
    + ["ShortcutError"])
OWN_CLASS = "an exception of a class of your own or a library's (its name is not shown)"
NOT_SHOWN = ("its message is not shown: a hidden test had already called your code, and what your code says "
             "after that could carry the hidden test's data; run the visible test in your notebook to see it")
_HINT = "\nHint: "
# The grader's own reasons, kept up to the end of the match (what follows may come from the kernel).
_GRADER_REASONS = [re.compile(pattern) for pattern in (
    r"implement this yourself: in a hidden test [^\n]*",
    r"your code ran longer than [0-9.e+]+ s and was interrupted",
    r"your code did not answer: (?:your code ran longer than [0-9.e+]+ s"
    r"|the grading agent in your kernel did not answer)",
    r"the kernel's answer could not be read",
    r"the kernel (?:did not answer|stopped responding|stopped: [\w ]+|exited \(status -?\d+\)|is not running"
    r"|was stopped: it sent more than \d+ MiB)",
)]
_HIDDEN_RAISED = re.compile(r"in a hidden test your code raised (?P<kind>\S+) "
                            r"(?P<rest>\(its message is not shown[^\n]*)")
_HIDDEN_CHECK = re.compile(r"a hidden check (?:failed|raised (?P<kind>[^\s:]+))(?P<rest>.*)", re.DOTALL)
_VISIBLE = re.compile(r"(?P<kind>[^\s:]+)(?:: (?P<message>.*))?", re.DOTALL)


def exception_name(kind: str) -> str:
    """``kind`` if it is a standard exception name (:data:`STANDARD_EXCEPTIONS`), else :data:`OWN_CLASS`."""
    return kind if kind in STANDARD_EXCEPTIONS else OWN_CLASS


def after_hidden_cell(reason: str) -> str:
    """What feedback says of a learner's own cell that raised after hidden tests ran: the exception's
    type from the fixed list, no message. ``reason`` is the kernel's ``"Type: message"``."""
    kind = reason.split(":", 1)[0].strip()
    return (f"{exception_name(kind)} (its message is not shown: this cell ran after hidden tests, whose data "
            "it could hold)")


def runs_after_hidden_code(source: str) -> bool:
    """Whether a test cell has visible code after the start of its first hidden region: a failure
    there may come after the hidden part called the learner's code (a visible failure in a cell whose
    hidden part comes last happened before any of it ran)."""
    hidden = hidden_line_numbers(source)
    if not hidden:
        return False
    first = min(hidden)
    return any(number > first and number not in hidden and line.strip() and not line.lstrip().startswith("#")
               for number, line in enumerate(source.split("\n"), 1))


def shown_test_reason(reason: str, source: str, *, after_hidden: bool) -> str:
    """What feedback says of a failed test (see the module's docstring): a hidden test's verdict
    always with its exception type from the fixed list; any other failure as it is, or, once
    ``after_hidden``, in the grader's and the test author's words only.

    Args:
        reason: the referee's verdict text.
        source: the test cell's source (its visible part supplies the author's words and hints).
        after_hidden: whether a hidden test may have called the learner's code before this failure.

    Example:
        >>> shown_test_reason("AssertionError: got 3.25", "assert f(x) == 2, f'got {y}'", after_hidden=True)[:33]
        'AssertionError: got … (its messag'
    """
    body, _, hint = reason.partition(_HINT)
    match = _HIDDEN_RAISED.fullmatch(body)
    if match:                           # a hint in the learner's exception is the learner's to choose
        return f"in a hidden test your code raised {exception_name(match['kind'])} {match['rest']}"
    match = _HIDDEN_CHECK.fullmatch(reason)
    if match:
        kind = f"raised {exception_name(match['kind'])}" if match["kind"] else "failed"
        return f"a hidden check {kind}{match['rest']}"
    if not after_hidden:
        return reason
    for grader in _GRADER_REASONS:
        match = grader.match(reason)
        if match:
            return match.group(0)
    match = _VISIBLE.fullmatch(body)
    if not match:
        return f"this test failed ({NOT_SHOWN})"
    written = _TestWords(source)
    words = written.words_for(match["message"] or "")
    kind = exception_name(match["kind"])
    text = f"{kind}: {words} ({NOT_SHOWN})" if words else f"{kind} ({NOT_SHOWN})"
    return text + (_HINT + hint if hint and hint in written.literals else "")


class _TestWords:
    """The words a test's author wrote in the visible part of a test cell: the templates of its
    ``assert`` and ``raise`` messages, the ``name=`` of each check it calls, and every whole string
    literal (the hints a message may end with)."""

    def __init__(self, source: str) -> None:
        self.messages: list[tuple[re.Pattern, str]] = []     # (what a whole message matches, the words)
        self.names: list[tuple[re.Pattern, str]] = []        # (what a check's message starts with, the words)
        self.literals: set[str] = set()
        try:
            tree = ast.parse(public_view(source))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.literals.add(node.value)
            elif isinstance(node, ast.Assert):
                self._message(_written_text(node.msg))
            elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                self._message(_written_text(node.exc.args[0]))
            elif isinstance(node, ast.Call):
                name = next((_written_text(k.value) for k in node.keywords if k.arg == "name"), None)
                if name and name.strip("…"):
                    self.names.append((re.compile(f"`{_pattern(name)}`"), f"`{name}` is not correct"))

    def _message(self, template: str | None) -> None:
        if template and template.strip("…"):
            self.messages.append((re.compile(_pattern(template), re.DOTALL), template))

    def words_for(self, message: str) -> str | None:
        """The author's words for a failure whose text is ``message``: the template of the ``assert``
        or ``raise`` message it is, else the check named where it starts; None when none fits."""
        for pattern, words in self.messages:
            if pattern.fullmatch(message):
                return words
        for pattern, words in self.names:
            if pattern.match(message):
                return words
        return None


def _pattern(template: str) -> str:
    """A regular expression for the texts ``template`` (a message with ``…`` for computed parts) stands for."""
    return ".*?".join(re.escape(piece) for piece in template.split("…"))

"""What feedback may say about a failure once a hidden test has called the learner's code.

From then on the learner's code may hold the hidden test's data (a function can record its arguments),
and anything it says can carry them: the text of an exception it raises, the name of its exception's
class, a value it returns that a visible check then quotes. So a failure after that point is reported
from words that are not the learner's code's to choose. Every decision rests on the fields of the
referee's :class:`autograder.core.outcomes.Verdict`, never on its text:

- an exception's type only from a fixed list (:data:`autograder.core.outcomes.STANDARD_EXCEPTIONS`); any
  other class name becomes :data:`OWN_CLASS` (a learner's own cell's type is the runner's
  :attr:`autograder.core.outcomes.CellOutcome.exception`, already from that list);
- a visible test's failure as its exception type and the test author's own words (``words``: the
  template of the ``assert`` or ``raise`` message its message is, or the ``name=`` of the failing
  check), never the message itself; a hint only when the visible test's source holds it whole
  (``hint_written``);
- a hidden test's verdict (:func:`autograder.engine.referee.hidden_failure`, already in the author's
  words) with its exception type replaced as above;
- the grader's own reasons (time limits, an answer that could not be read) in the grader's words only
  (``words``), without what the kernel added.

:func:`shown_test_reason` and :func:`after_hidden_cell` do the wording; :func:`runs_after_hidden_code`
tells whether a test cell's visible part can fail after its own hidden part ran. :func:`hidden_check_in`
words a failed hidden check in the notebook's language: the author's words of a hidden region come from
the grader's own catalogue (:data:`HIDDEN_CATALOGUE`), which stays with the grader, since the catalogues
that learners install with the course would give the hidden tests' words away.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from pathlib import Path

from autograder.core.outcomes import HINT_LINE, STANDARD_EXCEPTIONS, CellOutcome, Failure, Verdict
from autograder.engine.referee import hidden_line_numbers
from course_runtime.language import ENGLISH, catalogue, read_po, template_parts, translate_message

__all__ = ["HIDDEN_CATALOGUE", "NOT_SHOWN", "OWN_CLASS", "after_hidden_cell", "exception_name", "hidden_catalogue",
           "hidden_check_in", "runs_after_hidden_code", "shown_test_reason"]

#: The translations of what the authors of hidden tests wrote (``python -m autograder i18n update`` extracts
#: them from the solutions' hidden regions): a file of the grader, not of the package's data, so that no
#: learner's install of the course holds it.
HIDDEN_CATALOGUE = Path(__file__).with_name("locales") / "{language}" / "LC_MESSAGES" / "hidden.po"
# A space between Chinese text and a Chinese word (written \x20: this module's sentences with a space are
# extracted for translation, and a pattern is none).
_SPACE_IN_CHINESE = re.compile(r"(?<=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])\x20(?=[\u4e00-\u9fff])")

OWN_CLASS = "an exception of a class of your own or a library's (its name is not shown)"
_HIDDEN_DATA = ("a hidden test had already called your code, and what your code says after that could carry the "
                "hidden test's data; run the visible test in your notebook to see it")
NOT_SHOWN = f"its message is not shown: {_HIDDEN_DATA}"


def exception_name(kind: str) -> str:
    """``kind`` if it is a standard exception name (:data:`autograder.core.outcomes.STANDARD_EXCEPTIONS`),
    else :data:`OWN_CLASS`."""
    return kind if kind in STANDARD_EXCEPTIONS else OWN_CLASS


def after_hidden_cell(outcome: CellOutcome) -> str:
    """What feedback says of a learner's own cell that raised after hidden tests ran: the exception's
    type from the fixed list (``outcome.exception``, which the runner kept from the kernel's reply only
    when it is on that list), no message; nothing of ``outcome.reason``, which the learner's code wrote."""
    kind = outcome.exception
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


def shown_test_reason(verdict: Verdict, *, after_hidden: bool) -> str:
    """What feedback says of a failed test (see the module's docstring): a hidden test's verdict
    always with its exception type from the fixed list; any other failure as the referee worded it,
    or, once ``after_hidden``, in the grader's and the test author's words only.

    Args:
        verdict: the referee's verdict.
        after_hidden: whether a hidden test may have called the learner's code before this failure.

    Example:
        >>> verdict = Verdict(Failure.VISIBLE, "AssertionError", "got 3.25", words="got …")
        >>> shown_test_reason(verdict, after_hidden=True)[:33]
        'AssertionError: got … (its messag'
    """
    if verdict.failure in (Failure.HIDDEN_RAISED, Failure.HIDDEN_CHECK):
        return replace(verdict, exception=verdict.exception and exception_name(verdict.exception)).text
    if not after_hidden or verdict.failure is Failure.HIDDEN_SHORTCUT:
        return verdict.text
    if verdict.failure is Failure.KERNEL:
        return verdict.words or f"this test failed ({NOT_SHOWN})"
    kind = exception_name(verdict.exception)
    # each form written out whole, so that a catalogue has it as one sentence to translate
    text = (f"{kind}: {verdict.words} (its message is not shown: {_HIDDEN_DATA})" if verdict.words
            else f"{kind} (its message is not shown: {_HIDDEN_DATA})")
    return text + (HINT_LINE + verdict.hint if verdict.hint and verdict.hint_written else "")


@functools.lru_cache(maxsize=None)
def hidden_catalogue(language: str) -> dict[str, str]:
    """English -> ``language`` for the hidden tests' words (:data:`HIDDEN_CATALOGUE`), finished entries
    only (not empty, not fuzzy); empty for English or a language without the file."""
    path = Path(str(HIDDEN_CATALOGUE).format(language=language))
    if language == ENGLISH or not path.is_file():
        return {}
    return {e.msgid: e.msgstr for e in read_po(path) if e.msgstr and "fuzzy" not in e.flags}


def _words_in(words: str, language: str) -> str:
    """A hidden verdict's ``words`` in ``language``: the author's text as the hidden catalogue translates
    it; a check's name framed as the runtime catalogue frames it ("`{name}` is not correct"), a translated
    name set as words, not as code; else ``words`` as they are (feedback shows English apart as code)."""
    table = hidden_catalogue(language)
    if words in table:
        return table[words]
    reading = catalogue("messages", language).reading(words)
    if reading is None or not any(value in table for value in reading[1].values()):
        return words
    template, english = reading
    # a translated value is marked, and the backticks that made the English name code go with the marks
    filled = "".join(text if name is None else f"\0{table[english[name]]}\0" if english[name] in table
                     else english[name] for text, name in template_parts(template))
    filled = filled.replace("`\0", "").replace("\0`", "").replace("\0", "")
    return _SPACE_IN_CHINESE.sub("", filled)


def hidden_check_in(verdict: Verdict, language: str) -> str:
    """What feedback says of a failed hidden check (``Failure.HIDDEN_CHECK``) in ``language``: the
    English of :func:`shown_test_reason`, its author's words and hint from the hidden catalogue
    (:func:`hidden_catalogue`) where it has them, the sentence around them from the runtime catalogue.

    Example:
        >>> verdict = Verdict(Failure.HIDDEN_CHECK, "", words="`mask` is not correct", hint="…")
        >>> hidden_check_in(verdict, "en") == shown_test_reason(verdict, after_hidden=True)
        True
    """
    shown = replace(verdict, exception=verdict.exception and exception_name(verdict.exception))
    if language == ENGLISH:
        return shown.text
    hint = verdict.hint and hidden_catalogue(language).get(verdict.hint, verdict.hint)
    words = verdict.words and _words_in(verdict.words, language)
    return translate_message(replace(shown, words=words, hint=hint).text, language)

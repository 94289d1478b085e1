"""The referee: the trusted process that runs the tests and decides every verdict.

A learner's code runs in a sandboxed kernel (:mod:`autograder.engine.runner`). The tests do not: each test
cell, visible and hidden parts together, runs here, in a separate process the learner's code cannot
reach, started by the grader. A name the test uses but does not define (``attention``, ``answer_q1``,
``SelfAttention``) is looked up in the learner's kernel and comes back as data or as a proxy
(:mod:`course_runtime.remote`); calling the proxy runs the learner's code in the kernel and
brings back its raw result. References, comparisons, hints and the verdict are computed here, so the
only way to earn a test's points is to make the kernel return the right values. Nothing of a test's
code travels to the kernel: only names, data and the public stand-ins of
:func:`course_runtime.testing.standing_in`.

The grader and the referee talk over the referee's stdin and stdout, one JSON object per line, whose
``"type"`` is a :class:`Message`:

========================================= =========================================================
grader -> referee                          referee -> grader
========================================= =========================================================
``{"type": "start", "prelude": [...]}``   ``{"type": "ready"}`` (the notebook's imports are done)
``{"type": "test", "source": ...}``       ``{"type": "kernel", "request": ...}`` (any number), then
                                          ``{"type": "verdict", "ok": ..., "verdict": ...,
                                          "refused": [...]}``
``{"type": "response", "text": ...}`` or  (the kernel's answer to the last request, or why there is
``{"type": "unavailable", "reason": ...,  none: ``words`` are the grader's own words in ``reason``,
"words": ...}``                           which hold nothing the kernel sent)
========================================= =========================================================

``verdict`` is a failed test's :class:`autograder.core.outcomes.Verdict` as JSON (absent when it passed):
how it failed, the exception's class, the message and its hint as separate fields, and the author's
words that a message is (:class:`AuthorsWords`), so that what feedback may show is decided on fields
(:mod:`autograder.engine.disclosure`). ``refused`` lists the names switched off by the guards under which
the kernel refused a built-in during the test (:attr:`course_runtime.remote.Session.refused`), for the
instructor's flags.

Whatever a test prints is discarded: feedback is built from verdicts only. :class:`RefereeProcess`
is the grader's end: one referee per job slot, reused for every notebook that slot grades.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import io
import json
import linecache
import os
import sys
import re
import time
from enum import Enum
from pathlib import Path

from autograder.core.outcomes import HINT_LINE, Failure, Verdict
from autograder.engine import stop_reasons
from course_runtime import remote, wire
from course_runtime.errors import ShortcutError

HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
MAX_REASON_CHARS = 4000


class Message(str, Enum):
    """The ``"type"`` of a message between the grader and the referee (see the module's docstring)."""

    START = "start"
    READY = "ready"
    TEST = "test"
    KERNEL = "kernel"
    VERDICT = "verdict"
    RESPONSE = "response"
    UNAVAILABLE = "unavailable"


class KernelGone(remote.KernelUnavailable):
    """The kernel cannot answer; ``words`` are the grader's own words in the reason (None: there are none)."""

    def __init__(self, reason: str, words: str | None) -> None:
        super().__init__(reason)
        self.words = words


class Namespace(dict):
    """A test cell's globals: what the test defines, else the learner's names through the session."""

    def __init__(self, session: remote.Session, base: dict) -> None:
        super().__init__(base)
        self.session = session
        self.fetched: set[str] = set()

    def __missing__(self, name: str) -> object:
        if hasattr(builtins, name) or name.startswith("__"):
            raise KeyError(name)
        try:
            value = self.session.lookup(name)
        except NameError:
            raise KeyError(name) from None
        if isinstance(value, type(sys)):  # the learner's own module names are not trusted
            raise KeyError(name)
        self[name] = value
        self.fetched.add(name)
        return value

    def forget_fetched(self) -> None:
        """Drop what came from the kernel, so the next cell sees the notebook as it is then."""
        for name in self.fetched:
            self.pop(name, None)
        self.fetched.clear()


def hidden_line_numbers(source: str) -> set[int]:
    """The 1-based line numbers of a test cell's hidden regions, markers included."""
    numbers, inside = set(), False
    for number, line in enumerate(source.split("\n"), 1):
        if HIDDEN_BEGIN in line:
            inside = True
        if inside:
            numbers.add(number)
        if HIDDEN_END in line:
            inside = False
    return numbers


def public_view(source: str) -> str:
    """``source`` with its hidden-test lines blanked (same line numbers), for ``inspect.getsource``:
    a stand-in defined in a hidden region cannot be sent to the kernel."""
    hidden = hidden_line_numbers(source)
    return "\n".join("" if number in hidden else line for number, line in enumerate(source.split("\n"), 1))


def public_definition_in(public: str, name: str) -> str | None:
    """The source of the last top-level ``def``/``class`` called ``name`` in ``public``, or None."""
    try:
        tree = ast.parse(public)
    except SyntaxError:
        return None
    lines = public.split("\n")
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found = "\n".join(lines[start - 1: node.end_lineno]) + "\n"
    return found


def describe(error: BaseException) -> str:
    """One line for feedback: ``Type: message`` (the learner's errors keep their own type name)."""
    kind = type(error).__name__
    try:
        message = str(error)
    except Exception:
        message = ""
    text = f"{kind}: {message}" if message else kind
    return text[:MAX_REASON_CHARS]


def _written_text(node: ast.AST | None) -> str | None:
    """The words a test's author wrote in a message expression, with every computed part shown as
    ``…``: ``f"got {x}, expected {y}"`` -> ``"got …, expected …"``; None when nothing is literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _written_text(node.left), _written_text(node.right)
        return None if left is None and right is None else f"{left or '…'}{right or '…'}"
    return None


def _statement_at(tree: ast.Module | None, line: int) -> ast.stmt | None:
    """The innermost statement of ``tree`` that starts on ``line``."""
    found = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.stmt) and node.lineno == line:
            found = node
    return found


def _raised_by_the_grader(error: BaseException) -> bool:
    """Whether ``error`` was raised by the grader's own proxies (a test that cannot be run as written,
    e.g. a stand-in defined in a hidden region), whose message holds no learner data."""
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    grader = {Path(remote.__file__).resolve(), Path(__file__).resolve()}
    return traceback is not None and Path(traceback.tb_frame.f_code.co_filename).resolve() in grader


def _author_nodes(node: ast.AST) -> tuple[ast.AST | None, ast.AST | None, ast.AST | None]:
    """``(message, name, hint)``: the expressions in which a test's author writes the words of a failure
    of ``node``: an ``assert``'s or ``raise``'s message, or the ``name=`` and ``hint=`` of a check it calls."""
    if isinstance(node, ast.Assert):
        return node.msg, None, None
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        return node.exc.args[0], None, None
    if isinstance(node, ast.Call):
        keywords = {k.arg: k.value for k in node.keywords}
        return None, keywords.get("name"), keywords.get("hint")
    return None, None, None


def _written_words(statement: ast.stmt | None) -> tuple[str | None, str | None]:
    """``(words, hint)`` a test's author wrote in a failing statement: an ``assert``'s or ``raise``'s
    message, or the ``name=`` and ``hint=`` of a check it calls (computed parts shown as ``…``)."""
    message = _author_nodes(statement)[0] if statement is not None else None
    if isinstance(statement, ast.Assert) or message is not None:
        return _written_text(message), None
    words, hint = None, None
    for node in ast.walk(statement) if statement is not None else ():
        _, name_node, hint_node = _author_nodes(node)
        name = _written_text(name_node)
        words = words or (f"`{name}` is not correct" if name else None)
        hint = hint or _written_text(hint_node)
    return words, hint


def hidden_words(source: str) -> list[str]:
    """Every text the author of test cell ``source`` wrote in its hidden regions that
    :func:`hidden_failure` can report, in the order written, each once: ``assert`` and ``raise``
    messages, checks' ``name=`` (a verdict's words are then "`name` is not correct") and ``hint=``,
    computed parts shown as ``…``.

    Example:
        >>> cell = ["### BEGIN HIDDEN TESTS", 'check(q, name=f"q of shape {s}", hint="scale it")',
        ...         "### END HIDDEN TESTS"]
        >>> hidden_words("\\n".join(cell))
        ['q of shape …', 'scale it']
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    hidden = hidden_line_numbers(source)
    nodes = sorted((n for n in ast.walk(tree) if getattr(n, "lineno", None) in hidden),
                   key=lambda n: (n.lineno, n.col_offset))
    texts = (_written_text(part) for node in nodes for part in _author_nodes(node))
    return list(dict.fromkeys(text for text in texts if text))


def hidden_failure(error: BaseException, source: str, lines: list[int]) -> Verdict:
    """The verdict on a hidden part of a test that failed: the author's written words only.

    The message a check built (expected values, the hidden call's arguments) and the text of an
    exception the learner's code raised (it may carry data recorded from hidden calls) stay here.
    What the verdict holds: the kind of failure and the literal parts of the failing check's message and
    hint (``check_close(..., name=f"q of shape {s}", hint="...")`` -> "`q of shape …` is not correct"),
    taken from the innermost statement of the cell that has them.

    Args:
        error: what the test raised.
        source: the test cell's source.
        lines: the cell's lines on the way to the failure, innermost first.
    """
    learner = error if isinstance(error, remote.LearnerError) else error.__context__
    if isinstance(learner, ShortcutError):       # the kernel's guard (its text is the learner's to forge)
        return Verdict(Failure.HIDDEN_SHORTCUT)
    if isinstance(learner, remote.LearnerError):  # no hint: one chosen by the learner's code could carry data
        return Verdict(Failure.HIDDEN_RAISED, (learner.types or (type(learner).__name__,))[0])
    if not isinstance(error, AssertionError) and _raised_by_the_grader(error):
        return visible_failure(error, source, Failure.TEST)   # a mistake in the test itself
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    words, hint = None, None
    for line in lines:
        found_words, found_hint = _written_words(_statement_at(tree, line))
        words, hint = words or found_words, hint or found_hint
    exception = "" if isinstance(error, AssertionError) else type(error).__name__
    return Verdict(Failure.HIDDEN_CHECK, exception, words=words, hint=hint)


def visible_failure(error: BaseException, source: str, failure: Failure = Failure.VISIBLE) -> Verdict:
    """The verdict on an exception a test cell raised outside its hidden parts (``failure`` is
    ``Failure.TEST`` for the grader's refusal of a hidden part): its class, its message and its hint
    line apart, and the words of the cell's visible part (:class:`AuthorsWords`) that the message is.
    An exception of the learner's code names none: its text is the learner's to choose, and picking
    which of the author's templates or hints it matches would say something once hidden tests ran.

    Args:
        error: what the test raised.
        source: the test cell's source.
        failure: how the test failed.

    Example:
        >>> visible_failure(AssertionError("got 3\\nHint: scale"), "assert y == 2, f'got {y}'").words
        'got …'
    """
    try:
        text = str(error)
    except Exception:
        text = ""
    message, has_hint, hint = text.partition(HINT_LINE)
    hint = hint[:MAX_REASON_CHARS] if has_hint else None
    if isinstance(error, remote.LearnerError):   # its text is the learner's code's: no author's words in it
        return Verdict(failure, type(error).__name__, message[:MAX_REASON_CHARS], hint=hint)
    words = AuthorsWords(public_view(source))
    return Verdict(failure, type(error).__name__, message[:MAX_REASON_CHARS], hint=hint,
                   words=words.words_for(message), hint_written=has_hint and hint in words.literals)


class AuthorsWords:
    """The words a test's author wrote in the visible part of a test cell: the templates of its
    ``assert`` and ``raise`` messages, the ``name=`` of each check it calls, and every whole string
    literal (the hints a message may end with).

    Args:
        public: the test cell's source with its hidden lines blanked (:func:`public_view`).
    """

    def __init__(self, public: str) -> None:
        self.messages: list[tuple[re.Pattern, str]] = []     # (what a whole message matches, the words)
        self.names: list[tuple[re.Pattern, str]] = []        # (what a check's message starts with, the words)
        self.literals: set[str] = set()
        try:
            tree = ast.parse(public)
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
                    self.names.append((re.compile(f"`{_template_pattern(name)}`"), f"`{name}` is not correct"))

    def _message(self, template: str | None) -> None:
        template = (template or "").partition(HINT_LINE)[0]    # a failure's message comes without its hint
        if template.strip("…"):
            self.messages.append((re.compile(_template_pattern(template), re.DOTALL), template))

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


def _template_pattern(template: str) -> str:
    """A regular expression for the texts ``template`` (a message with ``…`` for computed parts) stands for."""
    return ".*?".join(re.escape(piece) for piece in template.split("…"))


class Referee:
    """The process's state: one session and one namespace per graded notebook."""

    def __init__(self, receive, send) -> None:
        self.receive, self.send = receive, send
        self.session = remote.Session(self._transport, self.public_definition)
        self.namespace: Namespace | None = None
        self.cells = 0
        self.public: dict[str, str] = {}  # test cell file name -> its source without hidden lines

    def public_definition(self, value: object) -> dict:
        """The source of a top-level ``def`` or ``class`` of the visible part of a test cell."""
        name = getattr(value, "__name__", "?")
        code = getattr(value, "__code__", None)
        files = [code.co_filename] if code is not None else list(reversed(self.public))
        for filename in files:
            source = public_definition_in(self.public.get(filename, ""), name)
            if source is not None:
                return {"source": source, "name": name}
        raise ValueError(f"`{name}` must be defined with def or class at the top level of the visible "
                         "part of a test cell to be sent to the learner's kernel")

    def _transport(self, request: str) -> str:
        self.send({"type": Message.KERNEL, "request": request})
        message = self.receive()
        if message.get("type") == Message.RESPONSE and type(message.get("text")) is str:
            return message["text"]
        words = message.get("words")
        raise KernelGone(str(message.get("reason") or "the kernel did not answer"),
                         words if type(words) is str else None)

    def start(self, prelude: list[str]) -> None:
        for filename in self.public:
            linecache.cache.pop(filename, None)
        self.public.clear()
        base = {"__name__": "__main__", "__builtins__": builtins}
        for statement in prelude:
            exec(compile(statement, "<notebook imports>", "exec"), base)
        self.namespace = Namespace(self.session, base)

    def run_test(self, source: str) -> Verdict | None:
        """Run one test cell; return the verdict on its failure, or None when it passed."""
        self.cells += 1
        filename = f"<test cell {self.cells}>"
        public = public_view(source)
        linecache.cache[filename] = (len(public), None, [line + "\n" for line in public.split("\n")], filename)
        self.public[filename] = public
        self.namespace.forget_fetched()
        self.session.begin_test()
        try:
            with remote.active(self.session):
                exec(compile(source, filename, "exec"), self.namespace)
        except remote.KernelUnavailable as error:
            return Verdict(Failure.KERNEL, message=str(error), words=getattr(error, "words", None))
        except Exception as error:
            lines = self._hidden_lines(error, filename, source)
            if lines is not None:
                return hidden_failure(error, source, lines)
            if isinstance(error, wire.WireError):
                unread = "the kernel's answer could not be read"
                return Verdict(Failure.KERNEL, message=f"{unread}: {error}", words=unread)
            return visible_failure(error, source)
        return None

    @staticmethod
    def _hidden_lines(error: BaseException, filename: str, source: str) -> list[int] | None:
        """The cell's lines on the way to ``error``, innermost first, if any of them is in a hidden
        region; else None (a visible test failed)."""
        hidden = hidden_line_numbers(source)
        lines = []
        traceback = error.__traceback__
        while traceback is not None:
            if traceback.tb_frame.f_code.co_filename == filename:
                lines.append(traceback.tb_lineno)
            traceback = traceback.tb_next
        return lines[::-1] if any(line in hidden for line in lines) else None


# Seconds the referee may take to send its verdict after the learner's code used up the test's time
# (e.g. an infinite loop that was interrupted): without it, a loaded machine turned a timed-out test
# into a lost referee and the next test into an internal error.
VERDICT_GRACE_S = 5.0


class RefereeError(Exception):
    """The referee itself failed (not the learner's code); the submission should be graded again."""


def _no_answer(error, timeout: float) -> dict:
    """The ``reason`` and ``words`` of an ``unavailable`` message for a request the agent did not answer
    (:class:`autograder.engine.runner.AgentError`): past the time limit, or an answer that is not the
    agent's (what the kernel sent instead follows the grader's words in the error's text)."""
    if error.timed_out:
        reason = stop_reasons.code_interrupted(timeout)
        return {"reason": reason, "words": reason}
    return {"reason": stop_reasons.unanswered(str(error)), "words": stop_reasons.unanswered(stop_reasons.NO_AGENT)}


class RefereeProcess:
    """The grader's end of one referee process, started on first use and restarted when needed.

    Args:
        memory_mb: the referee's address-space limit (it handles data the learner's code chose).
    """

    def __init__(self, memory_mb: int = 4096) -> None:
        self.process: asyncio.subprocess.Process | None = None
        self.memory_mb = memory_mb

    async def prepare(self) -> None:
        """Start the process now, so that it loads torch while the grader starts the kernel."""
        await self._ensure()

    async def _ensure(self) -> asyncio.subprocess.Process:
        if self.process is None or self.process.returncode is not None:
            package_parent = str(Path(__file__).resolve().parents[2])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]),
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
                "TQDM_DISABLE": "1", "MPLBACKEND": "Agg"}
            from autograder.engine import forkserver
            from autograder.engine.runner import fork_server_socket

            # Forked from the grading run's fork server (torch and the checks already loaded: ready in
            # milliseconds once the server has warmed up, which the pre-flight waits for anyway; see
            # autograder/engine/forkserver.py), else a new process.
            server = await asyncio.to_thread(fork_server_socket)
            command = (forkserver.referee_command(server, self.memory_mb) if server
                       else [sys.executable, "-m", "autograder.engine.referee"])
            self.process = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
                limit=2 * wire.MAX_CHARS + 4096, preexec_fn=None if server else self._limit_memory)
        return self.process

    def _limit_memory(self) -> None:
        import resource

        size = max(self.memory_mb, 2048) * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        except (ValueError, OSError):  # a platform that refuses the limit
            pass

    async def _send(self, message: dict) -> None:
        process = await self._ensure()
        process.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
        await process.stdin.drain()

    async def _receive(self, timeout: float) -> dict:
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not line:
            await self.close()
            raise RefereeError("the referee process stopped unexpectedly")
        return json.loads(line)

    async def start_notebook(self, prelude: list[str], timeout: float = 120.0) -> None:
        """Begin a notebook: a fresh namespace holding the instructor's imports."""
        try:
            await self._send({"type": Message.START, "prelude": prelude})
            reply = await self._receive(timeout)
        except (asyncio.TimeoutError, OSError) as error:
            await self.close()
            raise RefereeError(f"the referee did not start ({type(error).__name__})") from None
        if reply.get("error"):
            raise RefereeError(f"the notebook's imports failed in the referee: {reply['error']}")

    async def run_test(self, source: str, kernel, timeout: float):
        """Run one test cell against ``kernel``; return its :class:`autograder.core.outcomes.CellOutcome`
        (``refused``: the names switched off by the guards under which the kernel refused a built-in;
        ``verdict``: the referee's :class:`autograder.core.outcomes.Verdict` on a failure).

        Raises:
            KernelStopped: the kernel died during the test (the test has failed).
            RefereeError: the referee failed.
        """
        from autograder.core.outcomes import CellOutcome
        from autograder.engine.runner import AgentError, KernelStopped

        deadline = time.monotonic() + timeout
        await self._send({"type": Message.TEST, "source": source})
        stopped: KernelStopped | None = None
        while True:
            remaining = deadline - time.monotonic()
            try:   # the referee is trusted: once the learner's time is spent, it still gets time to answer
                message = await self._receive(max(remaining, VERDICT_GRACE_S))
            except asyncio.TimeoutError:
                await self.close()
                return CellOutcome("timeout", stop_reasons.slow_test(timeout))
            if message.get("type") == Message.VERDICT:
                if stopped is not None:
                    raise stopped
                return await self._outcome(message)
            if message.get("type") != Message.KERNEL:
                await self.close()
                raise RefereeError(f"the referee sent an unexpected message {str(message)[:80]}")
            if stopped is not None:
                await self._send({"type": Message.UNAVAILABLE, "reason": str(stopped)})
                continue
            try:
                answer = await kernel.ask(message["request"], max(remaining, 0.001))
                await self._send({"type": Message.RESPONSE, "text": answer})
            except AgentError as error:
                await self._send({"type": Message.UNAVAILABLE, **_no_answer(error, timeout)})
            except KernelStopped as error:
                stopped = error
                await self._send({"type": Message.UNAVAILABLE, "reason": str(error)})

    async def _outcome(self, message: dict):
        """The cell's outcome from the referee's verdict message."""
        from autograder.core.outcomes import CellOutcome

        refused = tuple(str(name)[:200] for name in message.get("refused") or ())
        if message.get("ok"):
            return CellOutcome("ok", refused=refused)
        try:
            verdict = Verdict.from_json(message.get("verdict"), MAX_REASON_CHARS)
        except ValueError:
            await self.close()
            raise RefereeError(f"the referee sent a malformed verdict {str(message)[:80]}") from None
        return CellOutcome("error", verdict.text[:MAX_REASON_CHARS], refused=refused, verdict=verdict)

    async def close(self) -> None:
        """Stop the process (a later call starts a new one)."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.process = None


def main() -> None:
    """Serve the grader on stdin/stdout until stdin closes."""
    channel_in, channel_out = sys.stdin, sys.stdout
    sys.stdout = sys.stderr = io.StringIO()  # a test's prints go nowhere

    def receive() -> dict:
        line = channel_in.readline()
        if not line:
            raise SystemExit(0)
        return json.loads(line)

    def send(message: dict) -> None:
        channel_out.write(json.dumps(message) + "\n")
        channel_out.flush()

    referee = Referee(receive, send)
    while True:
        sys.stdout.seek(0)
        sys.stdout.truncate()
        message = receive()
        if message["type"] == Message.START:
            try:
                referee.start(message["prelude"])
                send({"type": Message.READY})
            except Exception as error:
                send({"type": Message.READY, "error": describe(error)})
        elif message["type"] == Message.TEST:
            verdict = referee.run_test(message["source"])
            send({"type": Message.VERDICT, "ok": verdict is None, "refused": list(referee.session.refused),
                  **({"verdict": verdict.to_json()} if verdict else {})})


if __name__ == "__main__":
    main()

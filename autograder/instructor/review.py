"""Hand grading by question: ``python -m autograder review --out DIR``.

A local web page that shows one question graded by hand (an nbgrader manually graded cell) at a
time, across every learner of a graded output folder: the learner's answer (as text, escaped), the
question, the model answer and the rubric from ``solutions/``, a points field and a comment. Grading
one question for the whole class in a row is how a class of 300 gets graded in an afternoon;
nbgrader's formgrader goes submission by submission instead.

Keys: ``j``/``k`` or the arrow keys move between learners, ``n``/``p`` between questions, a digit
types the points (a letter typed in the points field is a key again), ``c`` goes to the comment, ``Enter`` saves and moves to the next learner,
``Escape`` leaves a field.

The scores go to ``<out>/hand-scores.csv`` (:data:`autograder.instructor.manual.HAND_SCORES`), written
atomically after every save; ``grade``, ``merge`` and ``export`` read it by default, and grading
again never drops a line of it (:mod:`autograder.instructor.manual`).

The server listens on 127.0.0.1 only, on a free port, and answers only requests that carry the
secret token of the printed URL and name 127.0.0.1 as their host, so no other web page open in the
browser can read the answers or write scores. The page loads nothing from elsewhere.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import urllib.parse
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from string import Template

from autograder.core.errors import UsageError
from autograder.core.files import REPO_ROOT
from autograder.core.safe_output import content_security_policy
from autograder.engine.answers import answer_digest, is_blank, load_answers  # noqa: F401 - answer_digest is this module's too

MAX_BODY = 64 * 1024
MAX_COMMENT = 2000


@dataclass
class Entry:
    """One learner's answer to one question.

    Attributes:
        learner: the learner key.
        student: the name shown.
        answer: the answer as graded, or None when the grader stored none (an older version).
        blank: whether the learner wrote nothing beyond the released cell.
        digest: a digest of the answer, kept with the score to tell when the answer changed.
    """

    learner: str
    student: str
    answer: str | None
    blank: bool
    digest: str


@dataclass
class Question:
    """A cell graded by hand, with the instructor's material and every learner's answer.

    Attributes:
        assignment: the assignment.
        key: ``<notebook>:<grade_id>``.
        prompt: the question (the Markdown cell before the answer cell, as the instructor wrote it).
        model_answer: the model answer (the solution region before its ``**Rubric`` line).
        rubric: the rubric (from the ``**Rubric`` line to the end of the solution region).
        max_points: the cell's points.
        entries: one per graded learner, by learner key.
    """

    assignment: str
    key: str
    prompt: str
    model_answer: str
    rubric: str
    max_points: float
    entries: list[Entry] = field(default_factory=list)


def split_solution(source: str) -> tuple[str, str]:
    """The model answer and the rubric of a hand-graded cell's instructor source.

    The solution region (``### BEGIN SOLUTION`` to ``### END SOLUTION``) holds the model answer and,
    from a line starting with ``**Rubric``, the rubric; without such a line the whole region is the
    model answer."""
    from autograder.engine.plan import SOLUTION_BEGIN, SOLUTION_END

    inside, lines = False, []
    for line in source.split("\n"):
        if SOLUTION_BEGIN in line:
            inside = True
        elif SOLUTION_END in line:
            inside = False
        elif inside:
            lines.append(line)
    region = lines if any(SOLUTION_BEGIN in line for line in source.split("\n")) else source.split("\n")
    cut = next((i for i, line in enumerate(region) if line.lstrip().startswith("**Rubric")), len(region))
    model = "\n".join(region[:cut]).strip()
    model = model.removeprefix("**Model answer.**").strip()
    return model, "\n".join(region[cut:]).strip()


def load_questions(out_dir: Path | str, root: Path = REPO_ROOT) -> list[Question]:
    """Every hand-graded cell of the assignments graded in ``out_dir``, with each graded learner's answer.

    Raises:
        UsageError: ``out_dir`` holds no results.
    """
    from autograder.core.files import TEXT_STUB
    from autograder.core.results import load_results
    from autograder.engine.plan import FREE, MANUAL, PlanError, load_plan

    out_dir = Path(out_dir)
    results = [r for r in load_results(out_dir) if r.graded]
    if not (out_dir / "results").is_dir():
        raise UsageError(f"{out_dir} holds no results: give the --out folder of a `grade` run")
    questions: list[Question] = []
    for assignment in sorted({r.assignment for r in results}):
        try:
            plan = load_plan(assignment, root)
        except PlanError:
            continue
        own = sorted((r for r in results if r.assignment == assignment), key=lambda r: r.learner.casefold())
        answers = {r.learner: load_answers(out_dir, r) for r in own}
        for name, notebook in plan.notebooks.items():
            previous = None
            for cell in notebook.cells:
                if cell.kind == MANUAL:
                    key = f"{name}:{cell.key}"
                    model, rubric = split_solution(cell.source)
                    prompt = previous.source if previous is not None else ""
                    own_text = cell.released.replace(TEXT_STUB, "").strip()
                    question = Question(assignment, key, "\n\n".join(p for p in (prompt, own_text) if p),
                                        model, rubric, cell.points)
                    for result in own:
                        if key not in result.cell_max_scores:
                            continue
                        stored = (answers[result.learner] or {}).get(key)
                        text = stored.source if stored is not None else None
                        question.entries.append(Entry(result.learner, result.student, text,
                                                      text is not None and is_blank(text, cell.released),
                                                      answer_digest(text)))
                    questions.append(question)
                previous = cell if cell.kind == FREE and cell.cell_type == "markdown" else None
    return questions


class ReviewState:
    """The questions and the hand scores, shared by the server's threads (one lock)."""

    def __init__(self, out_dir: Path | str, root: Path = REPO_ROOT):
        from autograder.instructor.manual import read_hand_scores

        self.out_dir = Path(out_dir)
        self.questions = load_questions(self.out_dir, root)
        self.lock = threading.Lock()
        self.scores = read_hand_scores(self.out_dir)

    def as_json(self) -> dict:
        """Everything the page shows."""
        with self.lock:
            scores = {"\t".join(k): asdict(v) for k, v in self.scores.items()}
        return {"questions": [asdict(q) for q in self.questions], "scores": scores,
                "out": str(self.out_dir)}

    def save(self, data: dict) -> dict:
        """Store (or clear, with empty points) one score; returns the stored score.

        Raises:
            ValueError: naming what is wrong with the request.
        """
        from autograder.instructor.manual import HandScore, write_hand_scores

        if not isinstance(data, dict):
            raise ValueError("the request must be a JSON object")
        assignment, key, learner = (str(data.get(n) or "") for n in ("assignment", "key", "learner"))
        question = next((q for q in self.questions if q.assignment == assignment and q.key == key), None)
        if question is None:
            raise ValueError(f"no question {key!r} in {assignment!r}")
        entry = next((e for e in question.entries if e.learner == learner), None)
        if entry is None:
            raise ValueError(f"no learner {learner!r} answered {key!r}")
        comment = str(data.get("comment") or "").strip()
        if len(comment) > MAX_COMMENT:
            raise ValueError(f"the comment is longer than {MAX_COMMENT} characters")
        raw = str(data.get("points") if data.get("points") is not None else "").strip()
        index = (learner, assignment, key)
        with self.lock:
            if raw == "":
                self.scores.pop(index, None)
                stored = None
            else:
                try:
                    points = float(raw)
                except ValueError:
                    raise ValueError(f"points {raw!r} is not a number (write decimals with a dot)") from None
                if not 0 <= points <= question.max_points:
                    raise ValueError(f"points must be from 0 to {question.max_points:g}, not {raw}")
                stored = HandScore(points, comment, entry.digest)
                self.scores[index] = stored
            write_hand_scores(self.out_dir, self.scores)
        return {"stored": asdict(stored) if stored else None}


class _Handler(BaseHTTPRequestHandler):
    server: "ReviewServer"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", f"{POLICY}; frame-ancestors 'none'")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: dict) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json; charset=utf-8")

    def _allowed(self, token: str | None) -> bool:
        host = (self.headers.get("Host") or "").strip()
        return (host in self.server.hosts and token is not None
                and secrets.compare_digest(token, self.server.token))

    def do_GET(self):  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/":
            if not self._allowed((query.get("token") or [None])[0]):
                self._send(HTTPStatus.FORBIDDEN, b"Open the address the review command printed (it carries a token).",
                           "text/plain; charset=utf-8")
                return
            self._send(HTTPStatus.OK, PAGE.encode("utf-8"), "text/html; charset=utf-8")
        elif url.path == "/api/state":
            if not self._allowed(self.headers.get("X-Review-Token")):
                self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong token"})
                return
            self._json(HTTPStatus.OK, self.server.state.as_json())
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain; charset=utf-8")

    def do_POST(self):  # noqa: N802 - http.server's name
        if urllib.parse.urlsplit(self.path).path != "/api/score":
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        if not self._allowed(self.headers.get("X-Review-Token")):
            self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong token"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY or not (self.headers.get("Content-Type") or "").startswith("application/json"):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "send one JSON object"})
            return
        try:
            data = json.loads(self.rfile.read(length).decode("utf-8"))
            self._json(HTTPStatus.OK, self.server.state.save(data))
        except (ValueError, UnicodeDecodeError) as error:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(error)})
        except OSError as error:
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"could not write the hand scores: {error}"})


class ReviewServer(ThreadingHTTPServer):
    """The review page for ``out_dir`` on ``127.0.0.1:port`` (0: a free port)."""

    daemon_threads = True

    def __init__(self, out_dir: Path | str, root: Path = REPO_ROOT, port: int = 0):
        self.state = ReviewState(out_dir, root)
        self.token = secrets.token_urlsafe(24)
        super().__init__(("127.0.0.1", port), _Handler)
        self.port = self.server_address[1]
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        """The address to open (with the token)."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def start(self) -> threading.Thread:
        """Serve in a background thread (for tests); stop with :meth:`close`."""
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Stop serving and release the port."""
        self.shutdown()
        self.server_close()


def serve(out_dir: Path | str, root: Path = REPO_ROOT, port: int = 0) -> int:
    """Serve the review page until Ctrl-C; prints the address. Returns the exit status."""
    server = ReviewServer(out_dir, root, port)
    questions = server.state.questions
    answers = sum(len(q.entries) for q in questions)
    if not questions:
        print(f"nothing to grade by hand in {out_dir}: the graded assignments have no manually graded cells")
        server.server_close()
        return 0
    print(f"{len(questions)} question{'s' if len(questions) != 1 else ''} graded by hand, {answers} answers; "
          f"scores are saved to {Path(out_dir) / 'hand-scores.csv'}")
    print(f"open {server.url}  (Ctrl-C stops the server)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nstopped; every saved score is in the file")
    finally:
        server.server_close()
    return 0


# The page, its style and its script are package files next to this module.
_STYLE, _SCRIPT, _TEMPLATE = (Path(__file__).with_name(f"review.{kind}").read_text(encoding="utf-8")
                              for kind in ("css", "js", "html"))

# The page runs its own script only (allowed by its hash: no inline handler, nothing a learner wrote),
# and shows every learner-supplied text with textContent.
POLICY = content_security_policy(_STYLE, _SCRIPT, connect=True)
PAGE = Template(_TEMPLATE).substitute(policy=html.escape(POLICY, quote=True), style=_STYLE, script=_SCRIPT)

"""Hand grading by question: ``python -m autograder review --out DIR``.

A local web page that shows one question graded by hand (an nbgrader manually graded cell) at a
time, across every learner of a graded output folder: the learner's answer, the question, the model
answer and the rubric from ``solutions/``, a points field and a comment. Grading one question for the
whole class in a row is how a class of 300 gets graded in an afternoon; nbgrader's formgrader goes
submission by submission instead. The page fits a laptop's screen (1280 x 900): the rubric stands
beside the answer being graded, with the points field below the answer; the list of learners shows
each one's score for the question and marks an answer that changed since it was scored.

Markdown and math are rendered as on the feedback pages (:func:`autograder.engine.feedback._markdown`:
math as MathML, no script): the course's text as written, a learner's answer with every tag escaped.

The page is in Chinese (``lang="zh-CN"``) when the class answered in Chinese (most written answers
mostly Chinese, the rule of :func:`course_runtime.language.notebook_language`) or when
``$COURSE_LANGUAGE`` says so (``COURSE_LANGUAGE=zh_CN python -m autograder review ...``; ``en`` for
English): its fixed strings (:data:`TEXT`) come from the catalogue
``autograder/instructor/locales/zh_CN/LC_MESSAGES/review.po``, the question from the Chinese
edition's exercise (``zh/exercises/``), and the model answer and the rubric from that exercise's
catalogue (``locales/zh_CN/LC_MESSAGES/exercises/``, where ``python -m autograder i18n update`` puts them
from the solution region); one not translated yet is shown as the instructor wrote it.

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

import functools
import html
import json
import os
import re
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
from course_runtime.language import CHINESE, ENGLISH, ENV_LANGUAGE, normalize_language, notebook_language, read_po

MAX_BODY = 64 * 1024
MAX_COMMENT = 2000
CATALOGUE = Path(__file__).with_name("locales") / "{language}" / "LC_MESSAGES" / "review.po"
#: Where each language's edition keeps its released exercises (the question in that language) and their
#: catalogues (the model answers and rubrics in that language).
EDITIONS = {CHINESE: "zh/exercises"}
CATALOGUES = {CHINESE: "locales/zh_CN/LC_MESSAGES/exercises"}

#: Every fixed string of the page and of the server's answers, in English; ``{name}`` is filled in.
TEXT = {
    "page_title": "Hand grading",
    "learners": "learners",
    "loading": "Loading...",
    "keys": "{jk} or arrows: next/previous learner · {np}: next/previous question · digits: points · "
            "{c}: comment · {enter}: save and next · {esc}: leave a field",
    "question": "Question",
    "points": "points",
    "comment": "comment for the learner (optional)",
    "save": "Save",
    "zero": "0 to blank answers",
    "zero_title": "give 0 points to every blank answer of this question",
    "rubric": "Rubric",
    "model": "Model answer",
    "open_printed": "Open the address the review command printed (it carries a token).",
    "nothing": "Nothing to grade by hand in {out}",
    "title": "Question {n} of {total}: {assignment} / {key}",
    "progress": "{done} of {total} graded for this question; {all_done} of {all} in all",
    "none_written": "(none written)",
    "of_max": "of {max}",
    "nobody": "nobody answered",
    "who": "{student} ({n} of {total})",
    "not_stored": "(the answer was not stored: grade this learner again with --regrade)",
    "blank": "(no answer: the cell is as released)",
    "blank_mark": "blank",
    "blank_title": "no answer: the cell is as released (\"0 to blank answers\" scores every such answer 0)",
    "changed_mark": "changed, was",
    "changed_title": "the answer changed since it was graded: grade it again",
    "changed_note": "The answer changed since it was graded ({points} points, not counted): grade it again.",
    "saved": "saved {student}: {points}",
    "cleared": "cleared",
    "not_saved": "not saved: {error}",
    "zero_given_one": "gave 0 to 1 blank answer",
    "zero_given": "gave 0 to {n} blank answers",
    "not_a_number": "points {raw} is not a number (write decimals with a dot)",
    "out_of_range": "points must be from 0 to {max}, not {raw}",
    "too_long": "the comment is longer than {n} characters",
}


def page_text(language: str) -> dict[str, str]:
    """:data:`TEXT` in ``language``: each string's translation from the page's catalogue, or the English
    where it has none (an untranslated or fuzzy entry)."""
    if language == ENGLISH:
        return dict(TEXT)
    path = Path(str(CATALOGUE).format(language=language))
    known = {e.msgid: e.msgstr for e in read_po(path) if e.msgstr and "fuzzy" not in e.flags} if path.is_file() else {}
    return {key: known.get(english, english) for key, english in TEXT.items()}


def _words(text: dict[str, str], key: str, **values) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), m.group(0))), text[key])


@dataclass
class Entry:
    """One learner's answer to one question.

    Attributes:
        learner: the learner key.
        student: the name shown.
        answer: the answer as graded, or None when the grader stored none (an older version).
        blank: whether the learner wrote nothing beyond the released cell.
        digest: a digest of the answer, kept with the score to tell when the answer changed.
        answer_html: the answer rendered (Markdown, math as MathML, every tag the learner wrote escaped).
    """

    learner: str
    student: str
    answer: str | None
    blank: bool
    digest: str
    answer_html: str = ""


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
        prompt_html, model_html, rubric_html: the three texts rendered (Markdown, math as MathML).
    """

    assignment: str
    key: str
    prompt: str
    model_answer: str
    rubric: str
    max_points: float
    entries: list[Entry] = field(default_factory=list)
    prompt_html: str = ""
    model_html: str = ""
    rubric_html: str = ""

    def render(self) -> None:
        """Fill in the ``*_html`` fields from the texts."""
        from autograder.engine.feedback import _markdown

        self.prompt_html, self.model_html, self.rubric_html = (
            _markdown(text, trusted=True) if text else "" for text in (self.prompt, self.model_answer, self.rubric))
        for entry in self.entries:
            entry.answer_html = _markdown(entry.answer, trusted=False) if entry.answer and not entry.blank else ""


def _prompts(notebook) -> dict[str, str]:
    """The question of each hand-graded cell of a notebook plan, by grade id: the Markdown cell just
    before it and the cell's own released text (a stub aside)."""
    from autograder.core.files import TEXT_STUB
    from autograder.engine.plan import FREE, MANUAL

    found, previous = {}, None
    for cell in notebook.cells:
        if cell.kind == MANUAL:
            parts = (previous.source if previous is not None else "", cell.released.replace(TEXT_STUB, "").strip())
            found[cell.key] = "\n\n".join(part for part in parts if part)
        previous = cell if cell.kind == FREE and cell.cell_type == "markdown" else None
    return found


def instructor_texts(assignment: str, notebook: str, root: Path, language: str) -> dict[tuple[str, str], str]:
    """The model answers and rubrics of an exercise notebook in ``language``: ``(context, English)`` ->
    translation, for the finished entries of the edition's catalogue of the exercise (contexts
    :data:`~autograder.engine.plan.MODEL_ANSWER_CONTEXT` and :data:`~autograder.engine.plan.RUBRIC_CONTEXT`);
    empty for English or without a catalogue."""
    from autograder.engine.plan import MODEL_ANSWER_CONTEXT, RUBRIC_CONTEXT

    path = Path(root) / CATALOGUES[language] / assignment / f"{notebook}.po" if language in CATALOGUES else None
    if path is None or not path.is_file():
        return {}
    return {(e.context, e.msgid): e.msgstr for e in read_po(path)
            if e.context in (MODEL_ANSWER_CONTEXT, RUBRIC_CONTEXT) and e.msgstr and "fuzzy" not in e.flags}


def load_questions(out_dir: Path | str, root: Path = REPO_ROOT, language: str = ENGLISH) -> list[Question]:
    """Every hand-graded cell of the assignments graded in ``out_dir``, with each graded learner's answer;
    the question in ``language`` where its edition has the exercise, the model answer and the rubric where
    its catalogue translates them (else as the instructor wrote them).

    Raises:
        UsageError: ``out_dir`` holds no results.
    """
    from autograder.core.results import load_results
    from autograder.engine.plan import (MANUAL, MODEL_ANSWER_CONTEXT, RUBRIC_CONTEXT, PlanError, load_plan,
                                        load_released_plan, split_solution)

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
        try:
            edition = load_released_plan(assignment, Path(root) / EDITIONS[language]).notebooks if language in EDITIONS else {}
        except PlanError:
            edition = {}
        own = sorted((r for r in results if r.assignment == assignment), key=lambda r: r.learner.casefold())
        answers = {r.learner: load_answers(out_dir, r) for r in own}
        for name, notebook in plan.notebooks.items():
            prompts = {**_prompts(notebook), **(_prompts(edition[name]) if name in edition else {})}
            translated = instructor_texts(assignment, name, root, language)
            for cell in (c for c in notebook.cells if c.kind == MANUAL):
                key = f"{name}:{cell.key}"
                model, rubric = split_solution(cell.source)
                question = Question(assignment, key, prompts[cell.key],
                                    translated.get((MODEL_ANSWER_CONTEXT, model), model),
                                    translated.get((RUBRIC_CONTEXT, rubric), rubric), cell.points)
                for result in own:
                    if key not in result.cell_max_scores:
                        continue
                    stored = (answers[result.learner] or {}).get(key)
                    text = stored.source if stored is not None else None
                    question.entries.append(Entry(result.learner, result.student, text,
                                                  text is not None and is_blank(text, cell.released),
                                                  answer_digest(text)))
                question.render()
                questions.append(question)
    return questions


def class_language(questions: list[Question]) -> str:
    """The language the class answered in: Chinese when most of the written answers are mostly Chinese
    (:func:`course_runtime.language.notebook_language`'s rule for one answer), else English."""
    answered = [e.answer for q in questions for e in q.entries if e.answer and not e.blank]
    chinese = sum(notebook_language({"cells": [{"cell_type": "markdown", "source": a}]}) == CHINESE for a in answered)
    return CHINESE if answered and chinese * 2 > len(answered) else ENGLISH


class ReviewState:
    """The questions and the hand scores, shared by the server's threads (one lock)."""

    def __init__(self, out_dir: Path | str, root: Path = REPO_ROOT, language: str | None = None):
        """``language``: the page's (``"en"``, ``"zh_CN"``); None: ``$COURSE_LANGUAGE`` when set, else
        the class's (:func:`class_language`).

        Raises:
            UsageError: for a language the course does not have.
        """
        from autograder.instructor.manual import read_hand_scores

        self.out_dir = Path(out_dir)
        chosen = language or os.environ.get(ENV_LANGUAGE)
        try:
            self.language = normalize_language(chosen) if chosen else ENGLISH
        except ValueError as error:
            raise UsageError(f"${ENV_LANGUAGE}: {error}") from None
        self.questions = load_questions(self.out_dir, root, self.language)
        if not chosen and class_language(self.questions) != ENGLISH:
            self.language = class_language(self.questions)
            self.questions = load_questions(self.out_dir, root, self.language)
        self.text = page_text(self.language)
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
            raise ValueError(_words(self.text, "too_long", n=MAX_COMMENT))
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
                    raise ValueError(_words(self.text, "not_a_number", raw=repr(raw))) from None
                if not 0 <= points <= question.max_points:
                    raise ValueError(_words(self.text, "out_of_range", max=f"{question.max_points:g}", raw=raw))
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
                self._send(HTTPStatus.FORBIDDEN, self.server.state.text["open_printed"].encode("utf-8"),
                           "text/plain; charset=utf-8")
                return
            self._send(HTTPStatus.OK, page(self.server.state.language).encode("utf-8"), "text/html; charset=utf-8")
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

    def __init__(self, out_dir: Path | str, root: Path = REPO_ROOT, port: int = 0, language: str | None = None):
        self.state = ReviewState(out_dir, root, language)
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

# The page runs its own script only (allowed by its hash: no inline handler, nothing a learner wrote);
# it shows a learner's names and plain texts with textContent, and the HTML the server rendered from
# Markdown (every tag a learner wrote escaped, math as sanitised MathML).
POLICY = content_security_policy(_STYLE, _SCRIPT, connect=True)
_KEYS = {"jk": "j</kbd>/<kbd>k", "np": "n</kbd>/<kbd>p", "c": "c", "enter": "Enter", "esc": "Esc"}


@functools.lru_cache(maxsize=None)
def page(language: str) -> str:
    """The page in ``language``: its fixed strings escaped into the template, and as JSON for the script
    (a data block, which no browser runs)."""
    text = page_text(language)
    fixed = {f"t_{key}": html.escape(value, quote=True) for key, value in text.items()}
    fixed["t_keys"] = re.sub(r"\{(\w+)\}", lambda m: f"<kbd>{_KEYS[m.group(1)]}</kbd>", fixed["t_keys"])
    data = json.dumps(text, ensure_ascii=False).replace("<", "\\u003c")
    return Template(_TEMPLATE).substitute(policy=html.escape(POLICY, quote=True), style=_STYLE, script=_SCRIPT,
                                          lang="zh-CN" if language == CHINESE else "en", text=data, **fixed)

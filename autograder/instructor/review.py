"""Hand grading by question: ``python -m autograder review --out DIR``.

A local web page that shows one question graded by hand (an nbgrader manually graded cell) at a
time, across every learner of a graded output folder: the learner's answer (as text, escaped), the
question, the model answer and the rubric from ``solutions/``, a points field and a comment. Grading
one question for the whole class in a row is how a class of 300 gets graded in an afternoon;
nbgrader's formgrader goes submission by submission instead.

Keys: ``j``/``k`` or the arrow keys move between learners, ``n``/``p`` between questions, a digit
types the points (a letter typed in the points field is a key again), ``c`` goes to the comment, ``Enter`` saves and moves to the next learner,
``Escape`` leaves a field.

The scores go to ``<out>/hand-scores.csv`` (:data:`autograder.manual.HAND_SCORES`), written
atomically after every save; ``grade``, ``merge`` and ``export`` read it by default, and grading
again never drops a line of it (:mod:`autograder.manual`).

The server listens on 127.0.0.1 only, on a free port, and answers only requests that carry the
secret token of the printed URL and name 127.0.0.1 as their host, so no other web page open in the
browser can read the answers or write scores. The page loads nothing from elsewhere.
"""

from __future__ import annotations

import hashlib
import html
import json
import secrets
import threading
import urllib.parse
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from autograder.answers import load_answers
from autograder.course import UsageError
from autograder.notebooks import REPO_ROOT
from autograder.safe_output import content_security_policy

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


def answer_digest(text: str | None) -> str:
    """A short digest of an answer, whitespace at its ends ignored."""
    return hashlib.sha256((text or "").strip().encode("utf-8")).hexdigest()[:12]


def split_solution(source: str) -> tuple[str, str]:
    """The model answer and the rubric of a hand-graded cell's instructor source.

    The solution region (``### BEGIN SOLUTION`` to ``### END SOLUTION``) holds the model answer and,
    from a line starting with ``**Rubric``, the rubric; without such a line the whole region is the
    model answer."""
    from autograder.plan import SOLUTION_BEGIN, SOLUTION_END

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


def is_blank(answer: str, released: str) -> bool:
    """Whether ``answer`` adds nothing to the released cell (the stub ``YOUR ANSWER HERE`` left as it was)."""
    from autograder.nbgrader_config import TEXT_STUB

    return answer.replace(TEXT_STUB, "").strip() == released.replace(TEXT_STUB, "").strip()


def load_questions(out_dir: Path | str, root: Path = REPO_ROOT) -> list[Question]:
    """Every hand-graded cell of the assignments graded in ``out_dir``, with each graded learner's answer.

    Raises:
        UsageError: ``out_dir`` holds no results.
    """
    from autograder.nbgrader_config import TEXT_STUB
    from autograder.plan import FREE, MANUAL, PlanError, load_plan
    from autograder.results import load_results

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
        from autograder.manual import read_hand_scores

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
        from autograder.manual import HandScore, write_hand_scores

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


_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;display:flex;height:100vh}
#side{width:16rem;border-right:1px solid #ccc;overflow:auto;font-size:.9rem;flex:none}
#side div{padding:.2rem .6rem;cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#side div.on{background:#dde8ff}#side .done::before{content:"\\2713  ";color:#176f2c}
#side .todo::before{content:"\\2022  ";color:#b00020}
#main{flex:1;overflow:auto;padding:.8rem 1.2rem}
header{display:flex;gap:1rem;align-items:baseline;flex-wrap:wrap}
h1{font-size:1.2rem;margin:.2rem 0}.muted{color:#666;font-size:.9rem}
.cols{display:flex;gap:1.2rem;align-items:flex-start}.cols>section{flex:1;min-width:0}
.box{border:1px solid #ccc;border-radius:4px;padding:.6rem .8rem;white-space:pre-wrap;word-break:break-word;
background:#fcfcfc;margin:.3rem 0 1rem}
#answer{background:#fff;font-size:1.05rem;min-height:6rem}
.blank{color:#b00020;font-style:italic}
form{display:flex;gap:.6rem;align-items:center;flex-wrap:wrap;margin:.5rem 0}
input{font-size:1rem;padding:.25rem .4rem}#points{width:5rem}#comment{flex:1;min-width:14rem}
#status{min-height:1.2rem;font-size:.9rem}.err{color:#b00020}.ok{color:#176f2c}
kbd{border:1px solid #aaa;border-radius:3px;padding:0 .25rem;font-size:.8rem;background:#f4f4f4}
"""

_SCRIPT = """
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
let data = null, qi = 0, li = 0;
const $ = (id) => document.getElementById(id);
const keyOf = (q, e) => e.learner + "\\t" + q.assignment + "\\t" + q.key;
function scoreOf(q, e) { return data.scores[keyOf(q, e)]; }
function say(text, cls) { const s = $("status"); s.textContent = text; s.className = cls || ""; }
async function load() {
  const r = await fetch("/api/state", {headers: {"X-Review-Token": token}});
  if (!r.ok) { $("title").textContent = "Open the address the review command printed."; return; }
  data = await r.json();
  if (!data.questions.length) { $("title").textContent = "Nothing to grade by hand in " + data.out; return; }
  show();
}
function show() {
  const q = data.questions[qi], e = q.entries[li];
  $("title").textContent = "Question " + (qi + 1) + " of " + data.questions.length + ": " + q.assignment + " / " + q.key;
  const done = q.entries.filter((x) => scoreOf(q, x)).length;
  const all = data.questions.reduce((n, x) => n + x.entries.length, 0);
  const allDone = data.questions.reduce((n, x) => n + x.entries.filter((y) => scoreOf(x, y)).length, 0);
  $("progress").textContent = done + " of " + q.entries.length + " graded for this question; " + allDone + " of " + all + " in all";
  $("progress").dataset.done = done; $("progress").dataset.total = q.entries.length;
  $("prompt").textContent = q.prompt; $("model").textContent = q.model_answer || "(none written)";
  $("rubric").textContent = q.rubric || "(none written)";
  $("max").textContent = "of " + q.max_points;
  const side = $("side"); side.replaceChildren();
  q.entries.forEach((x, i) => {
    const d = document.createElement("div");
    d.textContent = x.student; d.className = (scoreOf(q, x) ? "done" : "todo") + (i === li ? " on" : "");
    d.onclick = () => { li = i; show(); }; side.appendChild(d);
  });
  if (!e) { $("who").textContent = "nobody answered"; $("answer").textContent = ""; return; }
  $("who").textContent = e.student + " (" + (li + 1) + " of " + q.entries.length + ")";
  const a = $("answer");
  if (e.answer === null) { a.textContent = "(the answer was not stored: grade this learner again with --regrade)"; a.className = "box blank"; }
  else if (e.blank) { a.textContent = "(no answer: the cell is as released)"; a.className = "box blank"; }
  else { a.textContent = e.answer; a.className = "box"; }
  const s = scoreOf(q, e);
  $("points").value = s ? s.points : ""; $("comment").value = s ? s.comment : "";
  $("changed").textContent = s && s.answer && s.answer !== e.digest ? "The answer changed since it was graded: check the score." : "";
  const on = side.children[li]; if (on) on.scrollIntoView({block: "nearest"});
}
async function post(q, e, points, comment) {
  const r = await fetch("/api/score", {method: "POST", headers: {"Content-Type": "application/json", "X-Review-Token": token},
    body: JSON.stringify({assignment: q.assignment, key: q.key, learner: e.learner, points: points, comment: comment})});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  if (body.stored) data.scores[keyOf(q, e)] = body.stored; else delete data.scores[keyOf(q, e)];
}
async function save(next) {
  const q = data.questions[qi], e = q.entries[li];
  if (!e) return;
  try {
    await post(q, e, $("points").value.trim(), $("comment").value.trim());
    say("saved " + e.student + ": " + ($("points").value.trim() || "cleared"), "ok");
    if (next && li < q.entries.length - 1) li += 1;
    document.activeElement.blur(); show();
  } catch (err) { say("not saved: " + err.message, "err"); }
}
async function zeroBlank() {
  const q = data.questions[qi]; let n = 0;
  try {
    for (const e of q.entries) if (e.blank && !scoreOf(q, e)) { await post(q, e, "0", ""); n += 1; }
    say("gave 0 to " + n + " blank answer" + (n === 1 ? "" : "s"), "ok"); show();
  } catch (err) { say("not saved: " + err.message, "err"); }
}
$("save").onclick = () => save(true); $("zero").onclick = zeroBlank;
$("form").addEventListener("submit", (ev) => ev.preventDefault());
document.addEventListener("keydown", (ev) => {
  if (!data || !data.questions.length || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const inField = ev.target.tagName === "INPUT";
  const q = data.questions[qi];
  if (ev.key === "Enter") { ev.preventDefault(); save(true); return; }
  if (ev.key === "Escape") { document.activeElement.blur(); return; }
  // the points field takes digits and a dot; a letter there is a command (c: comment, j/k, n/p)
  if (inField && !(ev.target.id === "points" && /^[a-z]$/.test(ev.key))) return;
  const move = (d) => { li = Math.max(0, Math.min(q.entries.length - 1, li + d)); show(); };
  const question = (d) => { qi = Math.max(0, Math.min(data.questions.length - 1, qi + d)); li = 0; show(); };
  if (ev.key === "j" || ev.key === "ArrowDown" || ev.key === "ArrowRight") { ev.preventDefault(); move(1); }
  else if (ev.key === "k" || ev.key === "ArrowUp" || ev.key === "ArrowLeft") { ev.preventDefault(); move(-1); }
  else if (ev.key === "n") question(1);
  else if (ev.key === "p") question(-1);
  else if (ev.key === "c") { ev.preventDefault(); $("comment").focus(); }
  else if (/^[0-9]$/.test(ev.key)) { ev.preventDefault(); const p = $("points"); p.value = ev.key; p.focus(); }
});
load();
"""

# The page runs its own script only (allowed by its hash: no inline handler, nothing a learner wrote),
# and shows every learner-supplied text with textContent.
POLICY = content_security_policy(_STYLE, _SCRIPT, connect=True)
PAGE = ("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content='""" + html.escape(POLICY, quote=True) + """'>
<title>Hand grading</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>""" + _STYLE + """</style></head>
<body>
<nav id="side" aria-label="learners"></nav>
<div id="main">
<header><h1 id="title">Loading...</h1><span id="progress" class="muted"></span></header>
<p class="muted"><kbd>j</kbd>/<kbd>k</kbd> or arrows: next/previous learner &middot; <kbd>n</kbd>/<kbd>p</kbd>:
next/previous question &middot; digits: points &middot; <kbd>c</kbd>: comment &middot; <kbd>Enter</kbd>: save and
next &middot; <kbd>Esc</kbd>: leave a field</p>
<div class="cols">
<section><h2 id="who">-</h2><div id="changed" class="err"></div><div id="answer" class="box"></div>
<form id="form">
<label>points <input id="points" inputmode="decimal" autocomplete="off"></label><span id="max"></span>
<input id="comment" placeholder="comment for the learner (optional)" autocomplete="off">
<button id="save" type="button">Save</button>
<button id="zero" type="button" title="give 0 points to every blank answer of this question">0 to blank answers</button>
</form><div id="status"></div></section>
<section><h3>Question</h3><div id="prompt" class="box"></div>
<h3>Model answer</h3><div id="model" class="box"></div>
<h3>Rubric</h3><div id="rubric" class="box"></div></section>
</div></div>
<script>""" + _SCRIPT + """</script></body></html>
""")

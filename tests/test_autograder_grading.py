"""Grading on the fixture course: faults, attacks, isolation, integrity and concurrency.

One module-scoped batch (two jobs) grades every submission below at once; each test then checks
that its submission got the grade it deserves and no more, and the shared checks confirm that the
batch finished and every other submission's grade is unaffected. A serial run of a subset must give
exactly the same grades. The batch runs once per session, shared by all xdist workers.
"""

import base64
import csv
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import html
import unicodedata

import pytest
from conftest import run_once

from autograder.__main__ import main
from autograder.core.limits import Limits
from autograder.core.results import path_name, url_safe_name
from autograder.course.release import generate
from autograder.engine.batch import grade
from autograder.engine.plan import hidden_lines, load_plan
from autograder.engine.policy import check_cells, read_policy
from autograder.engine.sandbox import can_isolate, cgroup_parent, isolation_warnings
from autograder.engine.validate import validate

FIXTURE = Path(__file__).parent / "fixtures" / "course"
ASSIGNMENT, OTHER = "00-fixture", "01-other"
NOTEBOOK = "fixture.ipynb"
LIMITS = ["--timeout", "10", "--notebook-timeout", "90", "--memory", "2048"]
pytestmark = pytest.mark.slow

GOOD_SOFTMAX = ("def softmax(x):\n    shifted = x - x.max(dim=-1, keepdim=True).values\n"
                "    e = torch.exp(shifted)\n    return e / e.sum(dim=-1, keepdim=True)")
WRONG_SOFTMAX = "def softmax(x):\n    return x / x.sum(dim=-1, keepdim=True)"
GOOD_SCALE = "def scale(scores, d_k):\n    return scores / d_k ** 0.5"
FULL = {"fixture:test_softmax": "2", "fixture:test_scale": "1"}
SCALE_ONLY = {"fixture:test_softmax": "0", "fixture:test_scale": "1"}
SOFTMAX_ONLY = {"fixture:test_softmax": "2", "fixture:test_scale": "0"}
NOTHING = {"fixture:test_softmax": "0", "fixture:test_scale": "0"}


def digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def edited(path: Path, sources: dict[str, str] | None = None, change=None) -> str:
    """The notebook at ``path`` with some cells' sources replaced (by grade id) and other edits."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id") or cell.get("id")
        if sources and grade_id in sources:
            cell["source"] = sources[grade_id]
        if change:
            change(grade_id, cell)
    if change:
        change(None, nb)
    return json.dumps(nb)


class Listener:
    """A TCP server on localhost that records whether anyone connected (to prove there is no network)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()


def build_submissions(course: Path, subs: Path, out: Path, port: int) -> None:
    """Write every fixture submission: the honest ones, the careless ones and the hostile ones."""
    solution = course / "solutions" / ASSIGNMENT / NOTEBOOK
    blank = course / "exercises" / ASSIGNMENT / NOTEBOOK
    other = course / "solutions" / OTHER / "other.ipynb"

    def put(student: str, text: str | bytes, *, layout: str = "flat") -> None:
        path = {"flat": subs / f"{student}.ipynb", "student": subs / student / NOTEBOOK,
                "assignment": subs / student / ASSIGNMENT / NOTEBOOK}[layout]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))

    def with_softmax(softmax: str, scale: str = GOOD_SCALE) -> str:
        return edited(solution, {"softmax": softmax, "scale": scale})

    put("alice", solution.read_text(encoding="utf-8"), layout="assignment")
    put("bob", blank.read_text(encoding="utf-8"), layout="student")
    put("carol", '{"cells": [')                                                           # corrupt JSON
    def drop_test_softmax(gid, cell):
        if gid is None:
            cell["cells"] = [c for c in cell["cells"] if c.get("id") != "test_softmax"]
    put("dave", edited(solution, change=drop_test_softmax))                               # deleted test
    put("erin", with_softmax("def softmax(x):\n    return torch.softmax(x, dim=-1)"))      # built-in
    put("frank", b"\x89PNG\r\n\x1a\n\x00\x00binary")                                        # not a notebook
    put("gina", '{"hello": "world"}')                                                      # JSON, not a notebook
    put("hank", other.read_text(encoding="utf-8"), layout="assignment")                   # wrong assignment
    put("ivan", solution.read_text(encoding="utf-8").replace("values", "valüs").encode("latin-1"))  # not UTF-8
    (subs / "judy" / ASSIGNMENT).mkdir(parents=True)
    (subs / "judy" / ASSIGNMENT / "report.pdf").write_bytes(b"%PDF-1.4")                  # no notebook at all
    put("edit_tests", edited(solution, {"softmax": WRONG_SOFTMAX, "test_softmax": "pass",
                                        "test_scale": 'print("all tests passed")'}))

    def retype(gid, cell):
        if gid in ("test_softmax", "test_scale"):
            cell["cell_type"] = "markdown" if gid == "test_softmax" else "raw"
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    put("retype", edited(solution, {"softmax": WRONG_SOFTMAX}, retype))

    def rewrite_metadata(gid, cell):
        if gid == "test_softmax":
            cell["metadata"]["nbgrader"].update(solution=True, grade=False, locked=False)
            cell["source"] = "pass"
        if gid == "test_scale":
            cell["metadata"]["nbgrader"]["points"] = 100
    put("metadata", edited(solution, {"softmax": WRONG_SOFTMAX}, rewrite_metadata))
    put("monkeypatch", with_softmax(
        WRONG_SOFTMAX + "\nimport numpy, course_runtime.testing as t\n"
        "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "numpy.allclose = lambda *a, **k: True\nt.check_close = lambda *a, **k: None\n"
        "check_close = lambda *a, **k: None\n"))
    put("early_patch", edited(solution, {"softmax": WRONG_SOFTMAX, "co-70bbb313fe": (
        "import torch\n_gt = torch.gt\n"
        "torch.gt = lambda a, b: _gt(a, b) if a.numel() < 4 else torch.zeros_like(a, dtype=torch.bool)\n"
        "import importlib, course_runtime.testing\n"
        "try:\n    importlib.reload(course_runtime.testing)\nexcept ImportError:\n    pass\n"
        "from course_runtime.testing import check_close, forbid_shortcuts, seeded")}))
    put("rigged", with_softmax(
        "class Rigged(torch.Tensor):\n    def __eq__(self, other):\n        return True\n"
        "    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return True\n\ndef softmax(x):\n    return torch.zeros_like(x).as_subclass(Rigged)"))
    put("alias", with_softmax("def softmax(x, _f=torch.softmax):\n    return _f(x, dim=-1)"))
    put("aten", with_softmax("def softmax(x):\n    return torch.ops.aten._softmax(x, -1, False)"))
    put("snoop", with_softmax(
        "import glob, json, os, socket\n"
        f"SOLUTION = {str(solution)!r}\nRESULTS = {str(out / 'results')!r}\nPEERS = {str(subs)!r}\n"
        "print('solutions visible:', os.path.exists(SOLUTION), '| peers visible:', os.path.exists(PEERS))\n"
        "try:\n    cells = json.load(open(SOLUTION))['cells']\n"
        "    exec(''.join(next(c['source'] for c in cells if c.get('id') == 'softmax')))\n"
        "except OSError:\n    " + WRONG_SOFTMAX.replace("\n", "\n    ") + "\n"
        "for target in glob.glob(RESULTS + '/*/*.json') + [RESULTS + '/alice/00-fixture.json']:\n"
        "    try:\n        open(target, 'w').write('{}')\n    except OSError:\n        pass\n"
        "try:\n    socket.create_connection(('127.0.0.1', " + str(port) + "), timeout=2).close()\n"
        "    print('network: reached the grader machine')\nexcept OSError as error:\n"
        "    print('network:', type(error).__name__)"))
    put("os_exit", with_softmax(GOOD_SOFTMAX, "def scale(scores, d_k):\n    import os\n    os._exit(0)"))
    put("sys_exit", with_softmax(GOOD_SOFTMAX + "\nimport sys\nsys.exit(1)"))
    put("fake_pass", with_softmax(
        WRONG_SOFTMAX + "\nprint('Part A: visible tests passed.')\n"
        "get_ipython().showtraceback = lambda *a, **k: print('All tests passed!')\n"))
    put("loop", with_softmax("def softmax(x):\n    while True:\n        pass"))
    # Ignores interrupts while it waits, as a blocked call does (the loop that spins is "loop"'s): the
    # kernel must be stopped, and waiting leaves the machine's cores to the rest of the suite.
    put("stubborn", with_softmax(GOOD_SOFTMAX, "def scale(scores, d_k):\n    import signal, time\n"
                                 "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                 "    while True:\n        time.sleep(0.05)"))
    put("memory_bomb", with_softmax("def softmax(x):\n    hog = []\n    while True:\n"
                                    "        hog.append(bytearray(64 * 2 ** 20))"))
    put("fork_bomb", with_softmax("def softmax(x):\n    import os\n    while True:\n        os.fork()"))
    put("huge_output", with_softmax(GOOD_SOFTMAX + "\nprint('x' * 20_000_000)\nfor i in range(20_000):\n"
                                    "    print(i)"))
    put("odd_text", with_softmax(GOOD_SOFTMAX + "\nimport os\nprint('\\udcff caf\\xe9 \\u2603')\n"
                                 "os.write(1, b'\\xff\\xfe raw bytes\\n')"))
    put("noisy", with_softmax("import sys, warnings\n" + GOOD_SOFTMAX.replace(
        "def softmax(x):\n", "def softmax(x):\n    warnings.warn('harmless', UserWarning)\n"
        "    print('10%|#         | 1/10', file=sys.stderr)\n")))
    put("leak", with_softmax(
        "import linecache, sys\n" + GOOD_SOFTMAX.replace(
            "def softmax(x):\n", "def softmax(x):\n    caller = sys._getframe(1).f_code.co_filename\n"
            "    print(''.join(linecache.getlines(caller)))\n")))
    # --- the attacks of issue 11: each one got full marks, a leak or a lost row before the referee ---
    put("trace_hook", with_softmax(
        "import sys\ndef _hook(frame, event, arg):\n"
        "    if event == 'call' and frame.f_code.co_name in ('check_close', '_require_plain_tensor'):\n"
        "        frame.f_locals.update(actual=frame.f_locals.get('expected'))\n"
        "        sys.settrace(None)\n    return _hook\nsys.settrace(_hook)\nsys.setprofile(_hook)\n"
        "def softmax(x):\n    return x"))
    put("code_swap", with_softmax(
        "import course_runtime.testing as _t\n_noop = lambda *a, **k: None\n"
        "for _name in ('check_close', 'check_shape', 'check_tensor', 'check_answer'):\n"
        "    getattr(_t, _name).__code__ = _noop.__code__\n"
        "def softmax(x):\n    return x", "def scale(scores, d_k):\n    return scores"))
    payload = ("get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'] "
               "if any('check_close' in l for l in lines) else lines)")
    put("transformer", with_softmax(
        f"import base64\nexec(base64.b64decode({base64.b64encode(payload.encode())!r}))\n"
        "def softmax(x):\n    return x", "def scale(scores, d_k):\n    return scores"))
    put("torch_swap", with_softmax(
        WRONG_SOFTMAX + "\ntorch.softmax = lambda x, dim=-1, **k: x / x.sum(dim, keepdim=True)\n"
        "torch.Tensor.softmax = lambda self, dim=-1, **k: self / self.sum(dim, keepdim=True)\n"
        "torch.nn.functional.softmax = torch.softmax"))
    put("history", with_softmax(GOOD_SOFTMAX, GOOD_SCALE + "\nimport sys\n"
        "hist = '\\n'.join(get_ipython().history_manager.input_hist_raw)\n"
        "print(hist.replace(' ', '\\u00a0').replace('_', '\\u200b_'))\n"
        "print([str(v)[:2000] for v in vars(sys.modules['course_runtime.agent']).values()])"))
    put("a:b", solution.read_text(encoding="utf-8"))                                  # same folder once:
    put("a_b", blank.read_text(encoding="utf-8"))                                     # a:b and a_b
    for lms_id, source in (("101", solution), ("202", blank)):                        # Moodle namesakes
        folder = subs / f"Ann Lee_{lms_id}_assignsubmission_file_"
        folder.mkdir()
        shutil.copy(source, folder / NOTEBOOK)
    put("deep", '{"cells": ' + "[" * 200_000 + "]" * 200_000 + "}")                   # deep JSON
    odd = subs / os.fsdecode(b"odd\xffname")                                          # not UTF-8
    odd.mkdir()
    shutil.copy(solution, odd / NOTEBOOK)
    (subs / "linked.ipynb").symlink_to(solution)                                      # a link to the key
    put("flood", with_softmax(GOOD_SOFTMAX, "from IPython.display import display\n"
        "for _ in range(400):\n    display({'text/plain': 'x' * 1_000_000}, raw=True)\n" + GOOD_SCALE))
    put("shared", with_softmax(GOOD_SOFTMAX, GOOD_SCALE + "\nimport os\n"
        "d = os.environ['JUPYTER_RUNTIME_DIR']\n"
        "try:\n    open(os.path.join(d, 'fill'), 'wb').write(b'x' * 1000)\n    print('shared: writable')\n"
        "except OSError as e:\n    print('shared:', type(e).__name__)\n"
        "try:\n    s = next(p for p in os.listdir(d) if p.startswith('s-'))\n"
        "    os.rename(os.path.join(d, s), os.path.join(d, 'moved'))\n    print('sockets: moved')\n"
        "except OSError as e:\n    print('sockets:', type(e).__name__)"))
    other_dir = subs / "olive" / OTHER
    other_dir.mkdir(parents=True)
    shutil.copy(other, other_dir / "other.ipynb")
    rigged_answer = edited(other, {"answer": (
        "class Always(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
        "    def strip(self):\n        return self\n    def lower(self):\n        return self\n"
        "answer = Always('z')")})
    (subs / "pat" / OTHER).mkdir(parents=True)
    (subs / "pat" / OTHER / "other.ipynb").write_text(rigged_answer, encoding="utf-8")


def make_course(folder: Path) -> str:
    shutil.copytree(FIXTURE, folder, dirs_exist_ok=True)
    generate(root=folder)
    return str(folder)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return Path(run_once(tmp_path_factory, "course", make_course))


def without_source_policy():
    """Let hostile code run: this file tests the sandbox and the referee *behind* the source policy
    (autograder/engine/policy.py stops most of these submissions before they run; tests/test_attacks.py and
    tests/test_policy.py test it), which must hold even where the policy has a gap."""
    patch = pytest.MonkeyPatch()
    patch.setattr("autograder.engine.grade_one.enforce", lambda plan, assembly: [])
    return patch


@pytest.fixture(scope="module")
def batch(course, tmp_path_factory):
    """Grade every submission with two jobs, through the command line, once per session."""

    def run(folder: Path) -> dict:
        subs, out = folder / "submissions", folder / "out"
        subs.mkdir()
        listener = Listener()
        build_submissions(course, subs, out, listener.port)
        before = {"course": digest(course), "submissions": digest(subs)}
        patch = without_source_policy()
        try:
            status = main(["--root", str(course), "grade", str(subs), "--assignment", "all", "--out", str(out),
                           "--jobs", "2", "--no-progress", *LIMITS])
        finally:
            patch.undo()
        with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        return {"status": status, "all_rows": rows, "out": str(out), "subs": str(subs), "before": before,
                "after": {"course": digest(course), "submissions": digest(subs)},
                "connections": listener.connections}

    result = run_once(tmp_path_factory, "batch", run)
    result.update(rows={r["student"]: r for r in result["all_rows"]}, out=Path(result["out"]),
                  subs=Path(result["subs"]), course=course)
    return result


def row(batch, student):
    return batch["rows"][student]


def cells(batch, student) -> dict[str, str]:
    r = row(batch, student)
    return {key: r[key] for key in FULL}


def feedback(batch, student, assignment=ASSIGNMENT, notebook="fixture") -> str:
    return (batch["out"] / "feedback" / url_safe_name(student) / assignment / f"{notebook}.html").read_text(encoding="utf-8")


def run_log(batch, student, assignment=ASSIGNMENT, notebook="fixture") -> str:
    """What the learner's cells printed in the grading kernel: the instructor's log, never feedback."""
    return (batch["out"] / "logs" / path_name(student) / assignment / f"{notebook}.txt").read_text(encoding="utf-8")


# --- the batch as a whole -------------------------------------------------------------------------


def test_the_batch_finishes_with_one_row_per_submission_and_exit_status_1(batch):
    assert batch["status"] == 1, "some submissions cannot be graded, so the exit status is 1"
    learners = [(r["student"], r["lms_id"]) for r in batch["all_rows"]]
    assert len(learners) == len(set(learners)) == 46
    assert {r["status"] for r in batch["all_rows"] if r["student"] in ("alice", "bob", "olive")} == {"graded"}


def test_honest_submissions_are_unaffected_by_the_hostile_ones(batch):
    assert (row(batch, "alice")["score"], cells(batch, "alice")) == ("3", FULL)
    assert (row(batch, "bob")["score"], cells(batch, "bob")) == ("0", NOTHING)
    olive = row(batch, "olive")
    assert (olive["status"], olive["score"], olive["max_score"]) == ("graded", "2", "2")


def test_originals_are_never_modified(batch):
    assert batch["before"] == batch["after"]


def _squeezed(text: str) -> str:
    text = unicodedata.normalize("NFKC", html.unescape(text))
    return "".join(c for c in text if not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf"))


def test_feedback_never_shows_hidden_tests(batch):
    hidden = [_squeezed(line) for nb in (batch["course"] / "solutions").glob("*/*.ipynb")
              for cell in json.loads(nb.read_text())["cells"] if cell["metadata"].get("nbgrader", {}).get("grade")
              for line in hidden_lines("".join(cell["source"]))]
    hidden = [line for line in hidden if len(line) >= 12]
    assert len(hidden) >= 4
    pages = list((batch["out"] / "feedback").rglob("*.html"))
    assert len(pages) >= 30
    for page in pages:
        text = page.read_text(encoding="utf-8")
        squeezed = _squeezed(text)
        assert "hidden-marker" not in squeezed and "<script" not in text.lower(), page
        assert not [line for line in hidden if line in squeezed], page


# --- careless submissions -------------------------------------------------------------------------


@pytest.mark.parametrize("student, why", [
    ("carol", "unreadable notebook"), ("frank", "unreadable notebook"), ("gina", "unreadable notebook"),
    ("ivan", "unreadable notebook"), ("judy", "report.pdf"), ("hank", "belongs to 01-other"),
])
def test_ungradable_submissions_get_a_row_that_says_why(batch, student, why):
    r = row(batch, student)
    assert why in r["status"] and r["score"] == "" and r["status"] != "graded"


def test_a_deleted_test_cell_is_restored_and_run(batch):
    assert (row(batch, "dave")["score"], cells(batch, "dave")) == ("3", FULL)
    assert "was missing from your notebook; it was put back and run" in feedback(batch, "dave")


def test_harmless_warnings_on_stderr_cost_nothing(batch):
    assert (row(batch, "noisy")["score"], cells(batch, "noisy")) == ("3", FULL)


def test_non_utf8_output_is_graded_and_reported(batch):
    assert (row(batch, "odd_text")["score"], cells(batch, "odd_text")) == ("3", FULL)
    assert "caf\u00e9 \u2603" in run_log(batch, "odd_text")


def test_huge_output_is_capped(batch):
    assert (row(batch, "huge_output")["score"], cells(batch, "huge_output")) == ("3", FULL)
    page = batch["out"] / "feedback" / url_safe_name("huge_output") / ASSIGNMENT / "fixture.html"
    assert page.stat().st_size < 500_000 and "output truncated" in run_log(batch, "huge_output")


def test_an_infinite_loop_fails_only_its_cell(batch):
    assert cells(batch, "loop") == SCALE_ONLY
    assert "ran longer than 10 s" in feedback(batch, "loop")


def test_a_loop_that_ignores_interrupts_keeps_the_points_earned_before(batch):
    assert cells(batch, "stubborn") == SOFTMAX_ONLY
    assert "the kernel was stopped" in feedback(batch, "stubborn")


def test_a_memory_bomb_fails_only_its_cell(batch):
    assert cells(batch, "memory_bomb") == SCALE_ONLY
    assert "MemoryError" in run_log(batch, "memory_bomb")


def test_a_fork_bomb_is_contained(batch):
    assert row(batch, "fork_bomb")["status"] == "graded"
    assert cells(batch, "fork_bomb")["fixture:test_softmax"] == "0"


def test_os_exit_keeps_the_points_earned_before(batch):
    assert cells(batch, "os_exit") == SOFTMAX_ONLY
    assert "the kernel exited" in feedback(batch, "os_exit")


def test_sys_exit_in_a_cell_does_not_stop_grading(batch):
    assert cells(batch, "sys_exit") == FULL


# --- hostile submissions --------------------------------------------------------------------------


def test_edited_test_cells_are_replaced_by_the_originals(batch):
    assert cells(batch, "edit_tests") == SCALE_ONLY
    assert "was changed in your notebook; the original was used" in feedback(batch, "edit_tests")


def test_changed_cell_types_are_restored(batch):
    assert cells(batch, "retype") == SCALE_ONLY


def test_changed_metadata_is_ignored(batch):
    r = row(batch, "metadata")
    assert (r["score"], r["max_score"], cells(batch, "metadata")) == ("1", "3", SCALE_ONLY)


def test_monkeypatched_comparisons_earn_nothing(batch):
    assert cells(batch, "monkeypatch") == SCALE_ONLY
    assert "has the wrong values" in feedback(batch, "monkeypatch")
    source = next(c["source"] for c in json.loads((batch["subs"] / "monkeypatch.ipynb")
                  .read_text(encoding="utf-8"))["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "softmax")
    (notebook,) = load_plan(ASSIGNMENT, batch["course"]).notebooks.values()
    found = check_cells(read_policy(notebook), [("softmax", "".join(source))])
    assert {"grading machinery", "monkeypatching"} <= {v.rule for v in found.get(0, [])}, (
        "with the source policy on (as in real grading) this cell would not even run")


@pytest.mark.parametrize("student, earned", [("trace_hook", SCALE_ONLY), ("code_swap", NOTHING),
                                             ("transformer", NOTHING), ("torch_swap", SCALE_ONLY)])
def test_rewriting_the_learners_own_process_earns_nothing(batch, student, earned):
    """Tracing hooks, swapped code objects, input transformers and patched torch functions all act
    on the learner's kernel; the tests, their references and the verdict live in the referee."""
    assert cells(batch, student) == earned
    assert row(batch, student)["status"] == "graded"


def test_printing_the_kernels_history_and_state_leaks_no_hidden_test(batch):
    assert cells(batch, "history") == FULL
    assert "input_hist_raw" in feedback(batch, "history")  # the learner's own cell and its output


def test_names_that_would_share_a_folder_stay_two_learners(batch):
    assert (row(batch, "a:b")["score"], row(batch, "a_b")["score"]) == ("3", "0")
    namesakes = sorted((r["lms_id"], r["score"]) for r in batch["all_rows"] if r["student"] == "Ann Lee")
    assert namesakes == [("101", "3"), ("202", "0")]
    assert {p.name for p in (batch["out"] / "results").iterdir()} >= {"a%3Ab", "a_b", "Ann Lee #101",
                                                                      "Ann Lee #202", "odd%FFname"}


def test_submissions_that_crashed_the_batch_get_their_own_row(batch):
    assert "nested too deeply" in row(batch, "deep")["status"]
    assert row(batch, "odd\ufffdname")["score"] == "3"
    assert "symbolic link" in row(batch, "linked")["status"] and row(batch, "linked")["score"] == ""


def test_a_flood_of_output_stops_only_its_own_kernel(batch):
    assert cells(batch, "flood") == SOFTMAX_ONLY
    assert "sent more than 256 MiB" in feedback(batch, "flood")


def test_the_grader_reads_a_requests_output_to_its_end_while_it_keeps_arriving(monkeypatch):
    """A request's output is charged to the budget before the grader goes on: :meth:`SandboxedKernel._drained`
    waits past the grace while bytes keep arriving (on a busy machine a fixed 5 s grace let a flood's unread
    tail pass the budget, the next test cell ran and earned its point: the flood test above failed so), and
    gives up after a grace with nothing arriving, or once the budget is spent."""
    import asyncio
    from types import SimpleNamespace

    from autograder.engine import runner

    monkeypatch.setattr(runner, "IOPUB_GRACE_S", 1.0)

    async def drain(trickle_s: float, spend_to_exceed: bool = False) -> tuple[bool, float]:
        kernel = SimpleNamespace(budget=runner.Budget(Limits(message_mb=1)), _within_deadline=lambda t: t)
        collector = runner._Collector(100)

        async def trickle():                      # a kilobyte every 50 ms for trickle_s, then the idle status
            for _ in range(int(trickle_s / 0.05)):
                await asyncio.sleep(0.05)
                kernel.budget.spend(600_000 if spend_to_exceed else 1000)
            if trickle_s:
                collector.message({"msg_type": "status", "content": {"execution_state": "idle"}})

        task = asyncio.ensure_future(trickle())
        start = time.monotonic()
        came = await runner.SandboxedKernel._drained(kernel, collector)
        seconds = time.monotonic() - start
        task.cancel()
        return came, seconds

    came, seconds = asyncio.run(drain(3.0))             # three graces of output, then idle
    assert came and seconds >= 2.9
    came, seconds = asyncio.run(drain(0.0))             # nothing arrives: one grace, then on
    assert not came and 0.9 <= seconds < 2.5
    came, seconds = asyncio.run(drain(3.0, spend_to_exceed=True))   # over the budget after two kilobytes' worth
    assert not came and seconds < 2.5


@pytest.mark.skipif(not can_isolate(), reason="full isolation needs Linux and root")
def test_the_folder_shared_with_the_grader_is_read_only_in_the_sandbox(batch):
    assert cells(batch, "shared") == FULL
    log = run_log(batch, "shared")
    assert "shared: OSError" in log and "sockets: OSError" in log


def test_patching_torch_before_the_helpers_are_imported_does_not_help(batch):
    assert cells(batch, "early_patch") == SCALE_ONLY


def test_objects_whose_comparisons_always_succeed_earn_nothing(batch):
    assert cells(batch, "rigged") == SCALE_ONLY
    pat = row(batch, "pat")
    assert (pat["other:test_answer"], pat["other:test_double"]) == ("0", "1")


@pytest.mark.parametrize("student", ["erin", "alias", "aten"])
def test_calling_the_built_in_earns_nothing(batch, student):
    assert cells(batch, student) == SCALE_ONLY
    assert "implement this yourself" in feedback(batch, student)


def test_fake_passed_output_earns_nothing(batch):
    assert cells(batch, "fake_pass") == SCALE_ONLY


def test_learner_code_reading_its_callers_source_finds_no_hidden_test(batch):
    assert cells(batch, "leak") == FULL
    assert "hidden-marker" not in feedback(batch, "leak")


@pytest.mark.skipif(not can_isolate(), reason="full isolation needs Linux and root")
def test_solutions_peers_gradebook_and_network_are_out_of_reach(batch):
    assert cells(batch, "snoop") == SCALE_ONLY
    log = run_log(batch, "snoop")
    assert "solutions visible: False | peers visible: False" in log
    assert "network: OSError" in log
    assert batch["connections"] == 0
    alice = json.loads((batch["out"] / "results" / "alice" / f"{ASSIGNMENT}.json").read_text())
    assert alice["score"] == 3.0


# --- integrity: concurrency, re-grading, resuming -------------------------------------------------

SERIAL = ["alice", "bob", "erin", "os_exit", "rigged", "retype", "carol"]


def test_a_serial_run_gives_exactly_the_grades_of_the_parallel_run(batch, tmp_path):
    subset = tmp_path / "subset"
    subset.mkdir()
    for student in SERIAL:
        for path in batch["subs"].glob(f"{student}*"):
            (shutil.copytree if path.is_dir() else shutil.copy)(path, subset / path.name)
    patch = without_source_policy()
    try:
        results = grade(subset, ASSIGNMENT, tmp_path / "out", jobs=1, root=batch["course"], progress=False,
                        limits=Limits(cell_timeout=10, notebook_timeout=90, memory_mb=2048))
    finally:
        patch.undo()
    assert [r.student for r in results] == sorted(SERIAL)
    for result in results:
        parallel = row(batch, result.student)
        assert result.status.split(":")[0] == parallel["status"].split(":")[0]
        assert {k: f"{v:g}" for k, v in result.cells.items()} == {
            k: parallel[k] for k in result.cells}


def test_a_chinese_page_takes_the_course_cells_from_the_root_it_was_graded_with(course, tmp_path):
    """``grade --root``: the course cells of a Chinese notebook's page come from that root's Chinese
    release (``zh/exercises``), not from the checkout the grader runs from (issue 28)."""
    root = tmp_path / "course"
    shutil.copytree(course, root)
    locked = {"grade": False, "grade_id": "softmax_intro", "locked": True, "schema_version": 3, "solution": False}
    for edition in ("solutions", "exercises"):          # the "## Softmax" cell becomes the course's
        path = root / edition / ASSIGNMENT / NOTEBOOK
        notebook = json.loads(path.read_text(encoding="utf-8"))
        [intro] = [c for c in notebook["cells"] if "".join(c["source"]).startswith("## Softmax")]
        intro["metadata"]["nbgrader"] = locked
        path.write_text(json.dumps(notebook), encoding="utf-8")
    release = notebook
    for cell in release["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = "## 第一节\n\n这一节的中文说明只在这门课的中文版里。"
    release["metadata"].setdefault("course", {})["language"] = "zh_CN"
    (root / "zh" / "exercises" / ASSIGNMENT).mkdir(parents=True)
    (root / "zh" / "exercises" / ASSIGNMENT / NOTEBOOK).write_text(json.dumps(release), encoding="utf-8")
    (tmp_path / "subs" / "lin").mkdir(parents=True)
    (tmp_path / "subs" / "lin" / NOTEBOOK).write_text(json.dumps(release), encoding="utf-8")
    [result] = grade(tmp_path / "subs", ASSIGNMENT, tmp_path / "out", jobs=1, root=root, progress=False,
                     limits=Limits(cell_timeout=10, notebook_timeout=90, memory_mb=2048))
    assert result.graded, result.status
    page = (tmp_path / "out" / result.feedback[0]).read_text(encoding="utf-8")
    assert "<html lang='zh-CN'>" in page
    assert "这一节的中文说明只在这门课的中文版里。" in page
    assert "Write a numerically stable softmax" not in page      # the English course cell


def test_a_chinese_test_cell_with_chinese_comments_is_the_courses_and_an_edited_one_still_runs_as_written(course, tmp_path):
    """A Chinese release whose test cell says its comment in Chinese: a learner who left it alone gets no note,
    full points and the Chinese comment on the page; one who rewrote its check to fail gets the note, and the
    instructor's cell runs (full points: the answer is right); no hidden line reaches either page."""
    root = tmp_path / "course"
    shutil.copytree(course, root)
    first = "x = torch.tensor([[1.0, 2.0, 3.0]])"
    for edition in ("solutions", "exercises"):             # the test cell gets a comment the edition translates
        path = root / edition / ASSIGNMENT / NOTEBOOK
        path.write_text(path.read_text(encoding="utf-8").replace(first, first + "  # one row"), encoding="utf-8")
    answers = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in json.loads(
        (root / "solutions" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8"))["cells"]
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    release = json.loads((root / "exercises" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8"))
    release["metadata"].setdefault("course", {})["language"] = "zh_CN"
    for cell in release["cells"]:
        source = "".join(cell["source"])
        cell["source"] = source.replace("# one row", "# 一行")
    (root / "zh" / "exercises" / ASSIGNMENT).mkdir(parents=True)
    (root / "zh" / "exercises" / ASSIGNMENT / NOTEBOOK).write_text(json.dumps(release), encoding="utf-8")
    for cell in release["cells"]:
        cell["source"] = answers.get(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id"), cell["source"])
    edited = json.loads(json.dumps(release))
    [test] = [c for c in edited["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "test_softmax"]
    test["source"] = test["source"].split("check_close")[0] + "assert False, '检查改坏了'  # 一行\n"   # fails if it ran
    for learner, notebook in (("lin", release), ("wu", edited)):
        (tmp_path / "subs" / learner).mkdir(parents=True)
        (tmp_path / "subs" / learner / NOTEBOOK).write_text(json.dumps(notebook), encoding="utf-8")
    results = grade(tmp_path / "subs", ASSIGNMENT, tmp_path / "out", jobs=1, root=root, progress=False,
                    limits=Limits(cell_timeout=10, notebook_timeout=90, memory_mb=2048))
    changed = html.escape("你的笔记本改动了课程单元格 `test_softmax`；批改时用的是原来的版本。", quote=False)
    pages = {}
    for result in results:
        assert result.graded and result.score == result.max_score == 3, (result.student, result.status, result.cells)
        pages[result.student] = (tmp_path / "out" / result.feedback[0]).read_text(encoding="utf-8")
        assert "hidden-marker" not in pages[result.student]       # the hidden tests' lines, as the fixture marks them
    assert "# 一行" in pages["lin"] and "# one row" not in pages["lin"] and changed not in pages["lin"]
    assert changed in pages["wu"] and "检查改坏了" not in pages["wu"], "the page shows the course's test, not the learner's"


def test_regrading_one_learner_leaves_the_others_untouched(batch):
    results_dir = batch["out"] / "results"
    before = digest(results_dir)
    patch = without_source_policy()
    try:
        status = main(["--root", str(batch["course"]), "grade", str(batch["subs"]), "--assignment", "all",
                       "--out", str(batch["out"]), "--jobs", "2", "--no-progress", "--regrade", "erin", *LIMITS])
    finally:
        patch.undo()
    after = digest(results_dir)
    assert status == 1
    changed = {path for path in after if after[path] != before.get(path)}
    assert changed == {f"erin/{ASSIGNMENT}.json"}
    erin = json.loads((results_dir / "erin" / f"{ASSIGNMENT}.json").read_text())
    assert erin["cells"] == {"fixture:test_softmax": 0.0, "fixture:test_scale": 1.0}


def test_a_killed_run_resumes_without_losing_or_duplicating_grades(course, tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    solution = course / "solutions" / ASSIGNMENT / NOTEBOOK
    for student in ("kim", "lee", "max"):
        (subs / student).mkdir(parents=True)
        shutil.copy(solution, subs / student / NOTEBOOK)
    command = [sys.executable, "-m", "autograder", "--root", str(course), "grade", str(subs),
               "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "1", "--no-progress", *LIMITS]
    # The killed grader cannot remove its temporary folder, so give it one this test removes.
    scratch = tempfile.mkdtemp(prefix="autograder-test-")
    try:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True, env={**os.environ, "TMPDIR": scratch})
        deadline = time.monotonic() + 300
        while not list((out / "results").glob("*/*.json")) and time.monotonic() < deadline:
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    first = {p.relative_to(out).as_posix(): p.read_bytes() for p in (out / "results").glob("*/*.json")}
    assert 1 <= len(first) < 3, "the run must be killed part-way"
    assert not (out / "grades.csv").exists()
    assert main(["--root", str(course), "grade", str(subs), "--assignment", ASSIGNMENT, "--out", str(out),
                 "--no-progress", *LIMITS]) == 0
    for name, content in first.items():
        assert (out / name).read_bytes() == content, "finished grades are kept, not redone"
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((r["student"], r["score"]) for r in rows) == [("kim", "3"), ("lee", "3"), ("max", "3")]
    assert not list(out.rglob("*.tmp")), "no temporary files are left behind"


def test_an_lms_zip_is_graded_and_an_entry_not_extracted_has_a_row_and_exit_status_1(course, tmp_path):
    archive = tmp_path / "canvas.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(course / "solutions" / ASSIGNMENT / NOTEBOOK, "smithjane_123_456_fixture.ipynb")
        zf.write(course / "exercises" / ASSIGNMENT / NOTEBOOK, "doejohn_LATE_124_457_fixture-1.ipynb")
        zf.writestr("../../escaped.ipynb", "{}")
    out = tmp_path / "out"
    assert main(["--root", str(course), "grade", str(archive), "--assignment", ASSIGNMENT, "--out", str(out),
                 "--no-progress", *LIMITS]) == 1
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {r["student"]: r["score"] for r in csv.DictReader(handle)}
    assert rows == {"smithjane": "3", "doejohn": "0", "../../escaped.ipynb": ""}
    assert not (tmp_path.parent / "escaped.ipynb").exists()


def test_validate_reports_visible_tests_and_repairs(course, tmp_path, capsys):
    notebook = tmp_path / NOTEBOOK
    notebook.write_text(edited(course / "solutions" / ASSIGNMENT / NOTEBOOK, {"test_scale": "pass"}))
    ok, lines = validate(notebook, root=course)
    assert not ok, "a changed test cell is reported"
    assert "passed  test_softmax" in lines and "passed  test_scale" in lines
    assert any("test_scale" in line and "changed" in line for line in lines)
    (tmp_path / "broken.ipynb").write_text("{")
    assert main(["--root", str(course), "validate", str(tmp_path / "broken.ipynb"),
                 "--assignment", ASSIGNMENT]) == 1
    assert "cannot be graded" in capsys.readouterr().out


def test_isolation_warnings_say_what_is_not_enforced(monkeypatch):
    assert (isolation_warnings() == []) == (can_isolate() and cgroup_parent() is not None)
    monkeypatch.setattr("autograder.engine.sandbox.can_isolate", lambda: False)
    warnings = isolation_warnings()
    assert any("network" in w for w in warnings) and any("process limit" in w for w in warnings)

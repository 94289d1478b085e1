"""Shared test settings and helpers.

make test runs one pytest-xdist worker per core, each with one torch thread. Expensive shared work
(the book build, a grading run) goes through :func:`run_once`, which does it once per session
whichever worker asks first: xdist's ``loadgroup`` grouping is not honoured by the pytest/xdist
versions installed here, so module-scoped fixtures alone would repeat it on every worker.
"""

import fcntl
import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
# The kernels and programs the tests start (nbclient kernels, the CLI, torchrun) run beside the other
# worker too: one thread each, as the workers' own torch, so that two workers never run four threads on
# two cores (torch's default is one thread per core, and oversubscribed threads wait on each other).
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import torch  # noqa: E402

from autograder.core.files import skip_iri_parser  # noqa: E402

torch.set_num_threads(1)
# Before any test module imports nbformat: each worker would spend a CPU second building jsonschema's
# RFC 3987 parser, which no test uses (skip_iri_parser says why nothing needs it).
skip_iri_parser()


def shared_folder(tmp_path_factory) -> Path:
    """A folder all xdist workers of this session share (this session's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"


def run_once(tmp_path_factory, name: str, make):
    """Run ``make(folder)`` once per session, whichever worker gets here first; return its result.

    ``make`` gets an empty folder of its own and returns something JSON can store; the other workers
    wait on a lock and read the stored result.
    """
    folder = shared_folder(tmp_path_factory)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = folder / f"{name}.json"
        if not result.exists():
            work = folder / name
            shutil.rmtree(work, ignore_errors=True)  # what a failed attempt on another worker left
            work.mkdir()
            result.write_text(json.dumps(make(work)), encoding="utf-8")
        return json.loads(result.read_text(encoding="utf-8"))


def fake_main(monkeypatch, code: str):
    """A module holding ``code``'s names, installed as ``__main__`` for the test (as a notebook's
    namespace is in a kernel), for tests that run the grading agent in this process."""
    import sys
    import types

    main = types.ModuleType("__main__")
    exec(code, main.__dict__)
    monkeypatch.setitem(sys.modules, "__main__", main)
    return main


def in_process_referee(imports: list[str]):
    """A referee whose kernel is the grading agent in this process (a fake notebook installed with
    :func:`fake_main` plays the learner's namespace), started with the notebook's ``imports``."""
    from autograder.engine.referee import Referee
    from course_runtime import agent, remote

    inbox: list[dict] = []

    def send(message):
        if message["type"] == "kernel":  # the kernel is another process: no session is active there
            sessions = remote._current[:]
            remote._current.clear()
            try:
                inbox.append({"type": "response", "text": agent.answer(message["request"])})
            finally:
                remote._current[:] = sessions

    referee = Referee(lambda: inbox.pop(0), send)
    referee.start(imports)
    return referee

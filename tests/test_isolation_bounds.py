"""One learner never costs another: every zip entry keeps its own file (and so its own row; an entry that
is not extracted gets a row saying why), the kernel channel charges its budget frame by frame and never
parses a huge header, a kernel's memory limit covers all its processes, and nothing of a learner's runs
after its deadline."""

import zipfile
from pathlib import Path

import pytest

from autograder.engine.submissions import _short_component, collect_submissions, extract_zip, newest_attempts_first


def _course(root: Path) -> Path:
    """The smallest course: one assignment ``a1`` with one notebook ``nb``."""
    (root / "solutions" / "a1").mkdir(parents=True)
    (root / "solutions" / "a1" / "nb.ipynb").write_text('{"cells": []}', encoding="utf-8")
    return root


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_every_zip_entry_gets_its_own_file_and_row(tmp_path):
    long_name = "x" * 300 + ".ipynb"
    entries = {
        long_name: b"long",
        _short_component(long_name): b"literal",        # another learner's literal name: the long one's short form
        "bob": b"a file named like a folder",
        "bob/nb.ipynb": b"bob's notebook",
        "carol.ipynb": b"carol's first",
        "carol.ipynb/nb.ipynb": b"a folder named like a file",
        "dave/nb.ipynb": b"dave, once",
        "erin.ipynb": b"erin",
        "erin-2.ipynb": b"another learner erin-2",
    }
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        zf.writestr("dave/nb.ipynb", b"dave, twice")     # the same name twice in one zip
    folder, skipped = extract_zip(archive, tmp_path / "out")
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert not skipped and len(files) == len(entries) + 1
    contents = sorted(p.read_bytes() for p in files)
    assert contents == sorted([*entries.values(), b"dave, twice"])
    assert (folder / "erin-2.ipynb").read_bytes() == b"another learner erin-2"   # a literal name keeps its name
    assert (folder / "bob" / "nb.ipynb").read_bytes() == b"bob's notebook"

    rows = newest_attempts_first(collect_submissions(folder, "a1", root=_course(tmp_path / "course")))
    graded = sorted(s.notebooks["nb"].read_bytes() for s in rows if not s.problem)
    notebooks = [data for name, data in entries.items() if name.endswith(".ipynb") and name != "dave/nb.ipynb"]
    assert graded == sorted([*notebooks, b"dave, twice"])      # the last of two same-named entries, as before
    dave = [s for s in rows if s.student == "dave"]
    assert len(dave) == 1 and dave[0].other_attempts[0].startswith("nb.ipynb")   # the other copy is named


def test_every_skipped_zip_entry_gets_a_row_that_says_why(tmp_path):
    import csv
    import stat

    from autograder.__main__ import main

    archive = tmp_path / "lms.zip"
    skipped = ["../../escape.ipynb", "/etc/absolute.ipynb", "export-link.ipynb"]
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice.ipynb", "{")                   # a learner's entry: its own row ("unreadable")
        zf.writestr(skipped[0], "{}")
        zf.writestr(skipped[1], "{}")
        link = zipfile.ZipInfo(skipped[2])
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    out = tmp_path / "out"
    assert main(["--root", str(_course(tmp_path / "course")), "grade", str(archive), "--assignment", "a1",
                 "--out", str(out), "--no-progress", "--jobs", "1"]) == 1        # some entries were not graded
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == sorted(["alice", *skipped])                        # one row per entry of the zip
    for entry in skipped:
        assert rows[entry]["status"].startswith(f"not graded: {entry} (not extracted from the zip: "), rows[entry]
        assert rows[entry]["score"] == "" and rows[entry]["assignment"] == ""
    assert not (tmp_path / "escape.ipynb").exists()


def test_the_grader_warns_when_the_memory_limit_cannot_cover_a_whole_kernel(monkeypatch):
    from autograder.engine import sandbox

    monkeypatch.setattr(sandbox, "can_isolate", lambda: True)
    monkeypatch.setattr(sandbox, "cgroup_parent", lambda: ("/sys/fs/cgroup/grader", 2))
    assert sandbox.isolation_warnings() == []
    monkeypatch.setattr(sandbox, "cgroup_parent", lambda: None)
    warnings = sandbox.isolation_warnings()
    assert len(warnings) == 1 and "the memory limit is per process, not per kernel" in warnings[0]


def _channel_pair(limits):
    """A kernel-side PUSH socket and the grader's counted channel reading it, over one Unix socket."""
    import tempfile

    import zmq
    import zmq.asyncio
    from jupyter_client.session import Session

    from autograder.engine.runner import Budget, _CountedChannel

    address = f"ipc://{tempfile.mkdtemp()}/s"
    session = Session(key=b"secret")
    receiver = zmq.asyncio.Context.instance().socket(zmq.PULL)
    receiver.bind(address)
    sender = zmq.Context.instance().socket(zmq.PUSH)
    sender.connect(address)
    channel = _CountedChannel(receiver, session)
    channel.budget = Budget(limits)
    return session, sender, channel


def test_the_channel_charges_each_frame_as_it_arrives_and_never_assembles_a_flood():
    import asyncio
    import tracemalloc

    from autograder.core.limits import Limits

    session, sender, channel = _channel_pair(Limits(message_mb=4))
    shared = bytearray(1 << 20)
    message = session.serialize(session.msg("stream", {"name": "stdout", "text": "hi"}))
    sender.send_multipart([*message, *[shared] * 24], copy=False)     # 24 MiB from one 1 MiB buffer
    tracemalloc.start()
    with pytest.raises(OverflowError):
        asyncio.run(channel.get_msg(timeout=10))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert channel.budget.exceeded and peak < (2 << 20)    # no frame was copied into the grader's memory


def test_the_channel_parses_honest_messages_and_refuses_huge_headers_without_reading_their_dates():
    import asyncio
    import json

    from autograder.core.limits import Limits

    session, sender, channel = _channel_pair(Limits())
    parent = session.msg("execute_request", {"code": "1"})
    sender.send_multipart(session.serialize(session.msg("stream", {"name": "stdout", "text": "hi"}, parent=parent)))
    msg = asyncio.run(channel.get_msg(timeout=10))
    assert msg["msg_type"] == "stream" and msg["content"]["text"] == "hi"
    assert msg["parent_header"]["msg_id"] == parent["header"]["msg_id"]
    flood = session.msg("stream", {"name": "stdout", "text": "x"})
    flood["header"]["dates"] = ["2024-01-01T00:00:00.000000Z"] * 20_000     # 600 KB of ISO dates
    sender.send_multipart(session.serialize(flood))
    with pytest.raises(ValueError, match="header larger than"):
        asyncio.run(channel.get_msg(timeout=10))
    odd = session.msg("stream", {"name": "stdout", "text": "x"})
    frames = session.serialize(odd)
    frames[3] = json.dumps([1, 2]).encode()                                   # a parent header that is a list
    frames[1] = session.sign(frames[2:6])
    sender.send_multipart(frames)
    with pytest.raises(ValueError, match="not JSON objects"):
        asyncio.run(channel.get_msg(timeout=10))


RE_FORKER = """
import os, subprocess, sys
code = "import os, time\\nwhile True:\\n    os.setsid() if os.fork() == 0 else os._exit(0)\\n    time.sleep(0.001)\\n"
subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
"""
LIVE_PROCESSES = ("import os\nprint(sum(open(f'/proc/{e}/stat').read().rpartition(')')[2].split()[0] != 'Z'"
                  " for e in os.listdir('/proc') if e.isdigit()))")
SLOW_DEL = """
import time
class Slow:
    def __del__(self):
        time.sleep(60)
slow = Slow()
"""


@pytest.mark.slow
def test_kernel_processes_share_one_memory_limit_and_nothing_runs_past_the_deadline(tmp_path):
    import asyncio
    import os
    import time

    from autograder.core.limits import Limits
    from autograder.engine import sandbox
    from autograder.engine.runner import AgentError, SandboxedKernel

    async def swept():
        """One memory limit for all of a kernel's processes, and no re-forking process outlives the sweep;
        with time to spare (a killed process may take seconds to be gone on a busy machine)."""
        kernel = SandboxedKernel(tmp_path / "swept", Limits(notebook_timeout=120, cell_timeout=30, memory_mb=4096), 0)
        await kernel.start()
        cgroup = kernel.cgroup
        try:
            if cgroup:      # every process of the kernel is in its cgroup, under one limit for all
                limit_file = "memory.max" if sandbox.cgroup_parent()[1] == 2 else "memory.limit_in_bytes"
                assert int(open(os.path.join(cgroup, limit_file)).read()) == 4096 * 1024 * 1024
                assert open(os.path.join(cgroup, "cgroup.procs")).read().split()
            if kernel.isolated:   # a process re-forking in new sessions does not outlive the sweep
                assert (await kernel.run(RE_FORKER, 10)).ok
                await asyncio.sleep(0.5)
                await kernel.sweep()
                # the init and the kernel; a re-forking survivor would keep the count above 2 for good
                give_up = time.monotonic() + 60
                while True:
                    await asyncio.sleep(0.2)
                    count = await kernel.run(LIVE_PROCESSES, 10)
                    if count.outputs[0]["text"].strip() == "2" or time.monotonic() > give_up:
                        break
                assert count.outputs[0]["text"].strip() == "2", count.outputs
        finally:
            await kernel.stop()
        assert not cgroup or not os.path.exists(cgroup)     # gone, and every process in it with it

    async def past_the_deadline():
        """A clean-up that would run past the notebook's deadline is cut to it; then nothing more is sent."""
        limits = Limits(notebook_timeout=8, cell_timeout=8, memory_mb=4096)
        kernel = SandboxedKernel(tmp_path / "deadline", limits, 0)
        await kernel.start()
        try:
            assert (await kernel.run(SLOW_DEL, 10)).ok
            start = time.monotonic()
            outcome = await kernel.run("del slow", 60)       # the clean-up's own 60 s are cut to the deadline
            assert outcome.status == "timeout" and time.monotonic() - start < limits.notebook_timeout + 1
            with pytest.raises(AgentError, match="time limit"):
                await kernel.ask('{"op": "release"}', 30)    # past the deadline nothing more is sent
        finally:
            await kernel.stop()

    asyncio.run(swept())
    asyncio.run(past_the_deadline())


def test_the_relay_drops_buffers_and_refuses_messages_over_its_caps():
    from autograder.engine.relay import KEPT_FRAMES, MAX_FRAMES, MAX_JSON_VALUES, checked

    signed = [b"sig", b'{"msg_id": "1"}', b"{}", b"{}", b'{"text": "hi"}']
    honest = [b"grader", b"<IDS|MSG>", *signed]
    assert checked(honest, 1000) == (honest, 0, None)                          # forwarded as it came
    kept, dropped, refusal = checked([*honest, b"b" * 300, b"c" * 200], 1000)
    assert (kept, dropped, refusal) == (honest, 500, None)                    # buffers dropped, charged
    assert checked([*honest, b"b" * 2000], 1000)[2] == f"size {sum(map(len, honest)) + 2000}"
    assert checked([*honest, *[b"."] * MAX_FRAMES], 10_000)[2] == f"frames {MAX_FRAMES + len(honest)}"
    no_delimiter = [b"x"] * (KEPT_FRAMES + 3)
    assert checked(no_delimiter, 1000) == (no_delimiter[:KEPT_FRAMES], 3, None)
    empty_lists = b'{"a": [' + b",".join([b"[]"] * MAX_JSON_VALUES) + b"]}"
    values = 3 + 1 + 1 + 3 + MAX_JSON_VALUES           # header (object, key, value), parent, metadata, content
    assert checked([b"grader", b"<IDS|MSG>", *signed[:4], empty_lists], 1 << 30)[2] == f"values {values}"
    assert checked([b"grader", b"<IDS|MSG>", *signed[:4], b"[" * 100_000], 1 << 30)[2].startswith("values ")


# A learner's own cells that write on the kernel's IOPub socket directly (what a gap in the source check
# would allow): one message of 48 frames of 16 MiB (768 MiB, all frames sharing one buffer), and one of
# 5,000 one-byte frames; the cell then waits, so that the kernel is stopped while it runs.
FRAMES_ATTACK = """
import time
_frames = [b"x", b"<IDS|MSG>", b"", b"{}", b"{}", b"{}", b"{}", *{buffers}]
get_ipython().kernel.iopub_socket.send_multipart(_frames, copy=False)
time.sleep(20)
"""
BIG_FRAMES = FRAMES_ATTACK.replace("{buffers}", "[bytes(16 << 20)] * 48")
TINY_FRAMES = FRAMES_ATTACK.replace("{buffers}", '[b"."] * 5000')


def _memory_kib(key: str) -> int:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(key + ":"))
    return int(line.split()[1])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's peak-memory reset")
def test_a_kernel_flooding_frames_is_stopped_and_the_grader_stays_within_its_stated_memory(tmp_path):
    import csv
    import json
    import shutil

    from autograder.__main__ import main
    from autograder.course.release import generate
    from autograder.engine.relay import memory_bound_per_slot

    course = tmp_path / "course"
    shutil.copytree(Path(__file__).parent / "fixtures" / "course", course)
    generate(root=course)
    solution = json.loads((course / "solutions" / "00-fixture" / "fixture.ipynb").read_text(encoding="utf-8"))
    subs = tmp_path / "submissions"
    for student, extra in (("honest", None), ("big", BIG_FRAMES), ("tiny", TINY_FRAMES)):
        cells = list(solution["cells"])
        if extra is not None:
            cells.append({"cell_type": "code", "id": "mine", "metadata": {}, "source": extra, "outputs": [],
                          "execution_count": None})
        (subs / student).mkdir(parents=True)
        (subs / student / "fixture.ipynb").write_text(json.dumps({**solution, "cells": cells}), encoding="utf-8")
    out = tmp_path / "out"
    patch = pytest.MonkeyPatch()
    patch.setattr("autograder.engine.grade_one.enforce", lambda plan, assembly: [])  # let the hostile cells run
    Path("/proc/self/clear_refs").write_text("5")         # the peak below is this grading's
    before = _memory_kib("VmRSS")
    try:
        main(["--root", str(course), "grade", str(subs), "--assignment", "00-fixture", "--out", str(out),
              "--jobs", "1", "--no-progress", "--timeout", "60", "--notebook-timeout", "120"])
    finally:
        patch.undo()
    growth = (_memory_kib("VmHWM") - before) * 1024
    assert growth < memory_bound_per_slot() < 768 << 20, f"{growth >> 20} MiB"  # 768 MiB never assembled
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows["honest"]["fixture:test_softmax"] == "2" and rows["honest"]["fixture:test_scale"] == "1"
    texts = {student: " ".join(path.read_text(encoding="utf-8", errors="replace")
                               for path in out.rglob("*") if path.is_file() and student in path.parts)
             for student in ("big", "tiny")}
    assert "it sent a message larger than the grader accepts (768 MiB" in texts["big"]
    assert "it sent a message of 5,007 parts, more than the grader accepts" in texts["tiny"]

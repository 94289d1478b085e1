"""Warm kernels (autograder/engine/forkserver.py): forked from a server that never runs learner code, each in
the sandbox a cold kernel gets, and nothing of one learner's kernel reaches the next.

Each test starts real kernels (warm ones from this process's fork server, cold ones for comparison)
through :class:`autograder.engine.runner.SandboxedKernel`, as grading does.
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.core.limits import Limits
from autograder.engine import forkserver
from autograder.engine.runner import FORK_SERVER, STATS, SandboxedKernel
from autograder.engine.sandbox import can_isolate

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(forkserver.available() is not None, reason="warm kernels need Linux 5.3+")]
LIMITS = Limits(cell_timeout=30, startup_timeout=120)

# What a learner leaves behind: files in the home and temporary folders, a module attribute, an
# environment variable, a thread, a background process, a registered module and a changed seed.
LEAVE_STATE = textwrap.dedent("""\
    import os, subprocess, sys, tempfile, threading, time, types, torch, course_runtime.testing
    open(os.path.expanduser("~/left.txt"), "w").write("learner A")
    open(os.path.join(tempfile.gettempdir(), "left.txt"), "w").write("learner A")
    torch.foo = 1
    course_runtime.testing.check_close = lambda *a, **k: None
    os.environ["LEFT_BY_A"] = "1"
    threading.Thread(target=time.sleep, args=(600,), name="left-by-a", daemon=True).start()
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    sys.modules["left_by_a"] = types.ModuleType("left_by_a")
    torch.manual_seed(1234)
    print("left")
""")
# What the next learner's kernel sees: one JSON line.
INSPECT = textwrap.dedent("""\
    import json, os, random, sys, tempfile, threading, torch, course_runtime.testing
    def command_line(pid):   # a process listed a moment ago may have exited since (any other test's)
        try:
            return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return ""
    print(json.dumps({
        "home_file": os.path.exists(os.path.expanduser("~/left.txt")),
        "tmp_file": os.path.exists(os.path.join(tempfile.gettempdir(), "left.txt")),
        "torch_attribute": hasattr(torch, "foo"),
        "patched_helper": course_runtime.testing.check_close.__name__ != "check_close",
        "environment": "LEFT_BY_A" in os.environ,
        "thread": any(t.name == "left-by-a" for t in threading.enumerate()),
        "module": "left_by_a" in sys.modules,
        "torch_seed": torch.initial_seed(),
        "random": random.random(),
        "grading_modules": sorted(m for m in sys.modules if m.split(".")[0] in
                                  ("autograder", "_autograder_sandbox", "_autograder_forkserver", "transformer_core")),
        "sleepers": sum(1 for p in os.listdir("/proc") if p.isdigit() and "time.sleep(600)" in command_line(p)),
    }))
""")


async def _session(workdir: Path, cells: list[str], *, warm: bool, isolated: bool | None = None) -> list[str]:
    """Start one kernel, run ``cells``, stop it; return each cell's stdout."""
    kernel = SandboxedKernel(workdir, LIMITS, 0, warm=warm)
    if isolated is not None:
        kernel.isolated = isolated
    await kernel.start()
    try:
        outputs = []
        for code in cells:
            outcome = await kernel.run(code, 60)
            assert outcome.ok, (outcome.reason, outcome.outputs, kernel.log_tail())
            outputs.append("".join(o["text"] for o in outcome.outputs if o["kind"] == "stdout"))
        return outputs
    finally:
        await kernel.stop()


@pytest.mark.parametrize("isolated", [
    pytest.param(True, marks=pytest.mark.skipif(not can_isolate(), reason="full isolation needs Linux and root")),
    False])
def test_a_learners_state_does_not_reach_the_next_learners_kernel(tmp_path, isolated):
    async def both() -> tuple[list[str], list[str]]:
        first = await _session(tmp_path / "a", [INSPECT, LEAVE_STATE, INSPECT], warm=True, isolated=isolated)
        second = await _session(tmp_path / "b", [INSPECT], warm=True, isolated=isolated)
        return first, second

    warm_before = STATS["warm_kernels"]
    (clean, left, dirty), (after,) = asyncio.run(both())
    assert STATS["warm_kernels"] == warm_before + 2, "both kernels came from the fork server"
    assert left.strip() == "left"
    dirty, clean, after = json.loads(dirty), json.loads(clean), json.loads(after)
    assert dirty["home_file"] and dirty["torch_attribute"] and dirty["thread"] and dirty["environment"], \
        "the first learner's state was there in their own kernel"
    for key in ("home_file", "tmp_file", "torch_attribute", "patched_helper", "environment", "thread", "module"):
        assert after[key] is False, f"{key} of the first learner reached the second one"
    assert after["torch_seed"] == clean["torch_seed"] != 1234, "torch's generator starts where a new process's does"
    assert after["random"] != clean["random"], "Python's random module is seeded afresh in each kernel"
    assert after["grading_modules"] == [], "no grading module and no reference module is loaded in a kernel"
    if isolated:
        assert after["sleepers"] == 0, "the first learner's background process ended with their kernel"


def _sandbox_facts() -> str:
    return textwrap.dedent("""\
        import json, os, resource, socket, sys
        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
        mounts = sorted({line.split()[4] for line in open("/proc/self/mountinfo")})
        home = os.environ["HOME"]
        print(json.dumps({
            "argv": sys.argv[:-1], "path": sys.path, "cwd": os.getcwd(), "uid": os.getuid(), "pid": os.getpid(),
            "environment": {k: v.replace(os.environ.get("JUPYTER_RUNTIME_DIR", "?"), "<shared>")
                                 .replace(home, "<home>") for k, v in os.environ.items()},
            "limits": {name: resource.getrlimit(vars(resource)[name]) for name in
                       ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_NPROC")},
            "no_new_privs": status.get("NoNewPrivs", "").strip(),
            "capabilities": status.get("CapEff", "").strip(),
            "hostname": socket.gethostname(),
            "interfaces": [name for _, name in socket.if_nameindex()],
            "mounts": [m.replace(os.environ.get("JUPYTER_RUNTIME_DIR", "?"), "<shared>") for m in mounts],
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
            "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        }))
    """)


@pytest.mark.skipif(not can_isolate(), reason="full isolation needs Linux and root")
def test_a_warm_kernel_gets_exactly_the_sandbox_of_a_cold_one(tmp_path):
    async def both() -> tuple[dict, dict]:
        warm = await _session(tmp_path / "warm", [_sandbox_facts()], warm=True)
        cold = await _session(tmp_path / "cold", [_sandbox_facts()], warm=False)
        return json.loads(warm[0]), json.loads(cold[0])

    warm, cold = asyncio.run(both())
    fds_warm, fds_cold = warm.pop("fds"), cold.pop("fds")
    processes_warm, processes_cold = warm.pop("processes"), cold.pop("processes")
    environment = {k: (warm["environment"].get(k), cold["environment"].get(k))
                   for k in {*warm["environment"], *cold["environment"]}
                   if warm["environment"].get(k) != cold["environment"].get(k)}
    assert environment == {}, "the same environment, variable by variable (warm, cold)"
    assert warm == cold
    assert warm["no_new_privs"] == "1" and warm["capabilities"] == "0000000000000000" and warm["uid"] != 0
    assert warm["interfaces"] in ([], ["lo"]) and warm["pid"] == 2, "own network and PID namespaces"
    assert processes_warm == processes_cold, "the kernel sees only its init, itself and its own threads' tasks"
    assert len(fds_warm) <= len(fds_cold) + 2, "no descriptor of the fork server is inherited"


def test_the_fork_server_runs_one_thread_and_never_imports_the_reference_library(tmp_path):
    asyncio.run(_session(tmp_path / "k", ["pass"], warm=True))
    server = FORK_SERVER.process.pid
    assert len(os.listdir(f"/proc/{server}/task")) == 1, "a fork copies only the calling thread: the server has one"
    maps = Path(f"/proc/{server}/maps").read_text()
    assert "transformer_core" not in maps
    fds = os.listdir(f"/proc/{server}/fd")
    assert len(fds) < 16, f"the server holds only its streams and sockets, not {len(fds)} descriptors"


GRADER = textwrap.dedent("""\
    import asyncio, json, os, sys, time
    from pathlib import Path
    from autograder.engine.runner import FORK_SERVER, SandboxedKernel
    from autograder.core.limits import Limits

    async def main():
        kernel = SandboxedKernel(Path(sys.argv[1]), Limits(startup_timeout=120), 0, warm=True)
        await kernel.start()
        await kernel.run("import subprocess, sys\\n"
                         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])", 30)
        print(json.dumps({"server": FORK_SERVER.process.pid, "relay": kernel.km.provisioner.process.pid}), flush=True)
        time.sleep(600)

    asyncio.run(main())
""")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.isdigit():
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_nothing_outlives_a_grader_that_is_killed(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1"}
    grader = subprocess.Popen([sys.executable, "-c", GRADER, str(tmp_path / "k")], stdout=subprocess.PIPE, env=env,
                              text=True)
    try:
        started = json.loads(grader.stdout.readline())
        processes = {started["server"], started["relay"]} | _descendants(started["server"])
        assert len(processes) >= 5, "server, relay, launcher, init, kernel and the learner's sleeper"
    finally:
        grader.send_signal(signal.SIGKILL)
        grader.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(map(_running, processes)):
        time.sleep(0.1)
    assert not [pid for pid in processes if _running(pid)], "every process of the grader's kernels ended with it"


def test_a_fork_server_that_dies_is_the_graders_failure_and_the_next_kernel_gets_a_new_one(tmp_path):
    from autograder.engine.runner import ForkServerLost

    async def run() -> str:
        kernel = SandboxedKernel(tmp_path / "a", LIMITS, 0, warm=True)
        await kernel.start()
        try:
            FORK_SERVER.process.kill()  # e.g. the out-of-memory killer
            with pytest.raises(ForkServerLost):
                await kernel.run("import time; time.sleep(30)", 60)
        finally:
            await kernel.stop()
        return (await _session(tmp_path / "b", ["print('again')"], warm=True))[0]

    assert asyncio.run(run()).strip() == "again"


def test_a_referee_is_forked_from_the_server_outside_the_sandbox_under_its_memory_limit(tmp_path):
    from autograder.engine.referee import RefereeProcess

    async def run() -> tuple[list[str], dict, float]:
        await _session(tmp_path / "k", ["pass"], warm=True)  # the server runs; its kernel is gone
        referee = RefereeProcess(memory_mb=3000)
        try:
            start = time.perf_counter()
            await referee.start_notebook(["import torch", "from course_runtime.testing import check_close"])
            seconds = time.perf_counter() - start
            relay = Path(f"/proc/{referee.process.pid}/cmdline").read_bytes().split(b"\0")
            (forked,) = _descendants(FORK_SERVER.process.pid)
            status = dict(line.split(":", 1) for line in Path(f"/proc/{forked}/status").read_text().splitlines())
            limits = Path(f"/proc/{forked}/limits").read_text()
            return [part.decode() for part in relay], {"uid": status["Uid"].split()[0], "limits": limits}, seconds
        finally:
            await referee.close()

    relay, forked, seconds = asyncio.run(run())
    assert "--referee" in relay, "the referee came from the fork server"
    assert forked["uid"] == str(os.getuid()), "the referee is the grader's, not a sandboxed learner's"
    address_space = next(line for line in forked["limits"].splitlines() if line.startswith("Max address space"))
    assert str(3000 * 1024 * 1024) in address_space
    assert seconds < 30

"""Warm kernels: a fork server that has loaded what every kernel loads, and forks a fresh one per notebook.

A new kernel used to pay, for every notebook, the interpreter's start, ``import torch``, ipykernel,
the grading agent and the test helpers, matplotlib and its font list, and the first use of a torch
dispatch mode (which imports ``torch._dynamo``): several seconds of CPU on a 2-core machine, more
than running the learner's code. The fork server pays them once per grading run.

Three kinds of process take part:

- **the server** (``serve``, one per grading process, started by :class:`ForkServer`) imports and
  warms those modules, then waits on a Unix socket in a folder only the grader's user can enter.
  It never runs learner code, never imports the reference library (:mod:`transformer_core`),
  starts no thread and no zmq context (fork copies only the calling thread), and holds no learner
  data: it receives the path of a kernel's :class:`autograder.engine.sandbox.KernelSpec` and forks.
- **a fresh process per notebook**, forked from the server, which builds exactly the sandbox of a
  cold kernel through :func:`autograder.engine.sandbox.launch` (namespaces, private root with the mounts,
  init as PID 1, own user id, rlimits, ``no_new_privs``, sealed sockets) and then, instead of
  starting a new interpreter, runs ipykernel in the forked process with the kernel's own
  environment, arguments and ``sys.path``. Nothing of one notebook's kernel can reach the next:
  each is a new process forked from the untouched server, on its own tmpfs, and ends with its
  PID namespace.
- **the relay**, the command jupyter_client starts as "the kernel" (:func:`relay_command`: this
  file run by a bare ``python -I -S``, a few milliseconds): it asks the server to fork, hands over
  its stdin/stdout/stderr (the kernel's log), forwards the signals jupyter_client sends (interrupt
  and the grader's sweep to the sandbox's process group, terminate to its launcher) and exits with
  the kernel's exit status, so that ``KernelManager``'s start, interrupt, kill and ``is_alive``
  work unchanged.

The server also forks each job slot's **referee** (``autograder/engine/referee.py``, when the server is
running): outside the sandbox, as the grader's user, under the referee's memory limit, through a
relay as well (its stdin/stdout are the grader's pipes). A referee is trusted; it comes from the
same untouched template as the kernels, which cannot write into it. It is ready in milliseconds
instead of seconds of importing torch.

Nothing outlives the grader: the server stops, killing its kernels, when its stdin closes (the
grader holds the only write end, so this happens however the grader ends, ``SIGKILL`` included);
each forked launcher dies with the server (``PR_SET_PDEATHSIG``), its init with it, and the PID
namespace with its init; a relay that goes away (``KernelManager`` kills it) makes the server kill
its kernel.

Where fork cannot be used (not Linux), or the server cannot start, the grader starts cold kernels
as before (:data:`autograder.engine.sandbox.KERNEL_BOOTSTRAP` in a new interpreter); set
``AUTOGRADER_COLD_KERNELS=1`` to ask for them.

This file is also run as a script (the relay): its top level imports only the standard library.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

SOCKET_NAME = "forkserver.sock"
READY = "autograder fork server: ready"
# What the server loads and warms before forking: what every kernel imports before learner code
# (the server does not start without it). ipykernel's own start loads the kernel class, the
# debugger (debugpy: 0.4 s), the shell, sqlite3 for the history and pdb; the notebooks import
# torch, the course runtime and pyplot (with its font list: 1 to 3 s per cold kernel).
WARM_IMPORTS = ("torch", "torch.nn", "torch.nn.functional", "ipykernel.kernelapp", "ipykernel.ipkernel",
                "ipykernel.zmqshell", "course_runtime.agent", "course_runtime.testing", "course_runtime.device")
# Loaded when installed (a kernel without them imports nothing of them either).
WARM_IF_INSTALLED = ("ipykernel.debugger", "sqlite3", "pdb", "course_runtime.viz", "matplotlib.pyplot")
# The names the server's own modules get in it (loaded from their files, not through the
# ``autograder`` package, so that the grading package is not in the kernels' ``sys.modules``).
SERVER_MODULES = ("_autograder_sandbox", "_autograder_forkserver")
SERVER_BOOTSTRAP = (
    "import importlib.util, sys\n"
    "def _load(name, path):\n"
    "    spec = importlib.util.spec_from_file_location(name, path)\n"
    "    module = sys.modules[name] = importlib.util.module_from_spec(spec)\n"
    "    spec.loader.exec_module(module)\n"
    "    return module\n"
    "_load('_autograder_sandbox', sys.argv[2])\n"
    "_load('_autograder_forkserver', sys.argv[3]).serve(sys.argv[1])\n"
)
START_TIMEOUT_S = 300.0
# How a relay ends when the server went away without telling how its kernel ended: a signal, which
# a kernel's own exit (relayed as a status) can never produce, so the grader tells the two apart.
SERVER_LOST = signal.SIGUSR2


# --- The relay: jupyter_client's "kernel process" -------------------------------------------------


def relay(socket_path: str, request: dict) -> None:
    """Ask the server to fork a kernel (``{"spec": ..., "connection_file": ...}``) or a referee
    (``{"referee": {...}}``) with this process's standard streams; relay signals; exit with its
    status."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.connect(socket_path)
        socket.send_fds(server, [(json.dumps(request) + "\n").encode()], [0, 1, 2])
        quiet = os.open(os.devnull, os.O_RDWR)  # the forked process has the streams now: a pipe's end
        os.dup2(quiet, 0)                       # held here would hide its end from the grader
        os.dup2(quiet, 1)
        replies = server.makefile("rb")
        first = json.loads(replies.readline() or b"{}")
    except (OSError, ValueError) as error:
        print(f"autograder fork server: no kernel ({error})", file=sys.stderr, flush=True)
        os._exit(1)
    if "pid" not in first:
        print(f"autograder fork server: no kernel ({first.get('error', 'no answer')})", file=sys.stderr, flush=True)
        os._exit(1)
    launcher = int(first["pid"])
    ended = [False]

    def forward(signum, _frame) -> None:
        # The launcher's process group holds the launcher and the sandbox's init (as a cold
        # kernel's does), so an interrupt reaches the kernel and a sweep the init. The server
        # keeps the launcher unreaped until this relay is gone, so its id cannot be reused.
        if not ended[0]:
            try:
                if signum == signal.SIGTERM:
                    os.kill(launcher, signal.SIGTERM)
                else:
                    os.killpg(launcher, signum)
            except ProcessLookupError:
                pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(signum, forward)
    try:
        last = json.loads(replies.readline() or b"{}")
    except (OSError, ValueError):
        last = {}
    ended[0] = True
    code = last.get("exit")
    if type(code) is not int or not 0 <= code < 256:
        signal.signal(SERVER_LOST, signal.SIG_DFL)
        os.kill(os.getpid(), SERVER_LOST)
    os._exit(code)


# --- The server ---------------------------------------------------------------------------------


def _warm() -> None:
    """Import what every kernel imports and use a torch function mode and a dispatch mode once
    (their first use imports ``torch._dynamo``), leaving torch's random state as it was."""
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    for name in WARM_IF_INSTALLED:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    import torch

    from course_runtime.testing import forbid_shortcuts

    state = torch.get_rng_state()
    with forbid_shortcuts("torch.softmax", "torch.nn.functional.scaled_dot_product_attention"):
        torch.ones(2, 2).exp().sum()
    torch.set_rng_state(state)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


_SET_BY_IMPORTS: dict[str, str] = {}


class _Kernel:
    """One forked launcher, as the server tracks it."""

    def __init__(self, pid: int, pidfd: int, relay: socket.socket) -> None:
        self.pid, self.pidfd, self.relay = pid, pidfd, relay
        self.exited = False


def serve(folder: str) -> None:
    """The server: warm up, then fork a kernel for each relay that connects; never returns."""
    sandbox = sys.modules.get("_autograder_sandbox") or __import__("autograder.engine.sandbox", fromlist=["launch"])
    # No PR_SET_PDEATHSIG here: it fires when the *thread* that started the server ends (the grader
    # starts it from a worker thread). The grader holds the only write end of our stdin, so the
    # end of file on it is the grader's end, however it ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    before = dict(os.environ)
    _warm()
    # Variables the imports set (debugpy sets PYDEVD_USE_FRAME_EVAL): a cold kernel has them too;
    # not those naming the server's folder (the warm-up's dispatch mode sets a compiler cache in it).
    _SET_BY_IMPORTS.update({k: v for k, v in os.environ.items() if before.get(k) != v and folder not in v})
    loaded = sorted(name for name in sys.modules if name.split(".")[0] == "transformer_core")
    if loaded:
        print(f"autograder fork server: refusing to serve, the reference library was imported ({loaded[0]})",
              file=sys.stderr, flush=True)
        os._exit(1)
    if _threads() != 1:
        print(f"autograder fork server: refusing to serve, {_threads()} threads were started while warming up",
              file=sys.stderr, flush=True)
        os._exit(1)
    import gc

    gc.collect()
    gc.freeze()  # the warm objects stay out of the kernels' collections (and their pages shared)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = os.path.join(folder, SOCKET_NAME)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    print(READY, flush=True)
    kernels: dict[int, _Kernel] = {}        # pidfd -> kernel
    relays: dict[int, _Kernel] = {}         # relay socket fd -> kernel
    while True:
        running = [pidfd for pidfd, kernel in kernels.items() if not kernel.exited]
        readable, _, _ = select.select([0, listener, *running, *relays], [], [])
        if 0 in readable and not os.read(0, 4096):  # the grader closed our stdin: stop everything
            for kernel in kernels.values():
                _kill(kernel)
            os._exit(0)
        for ready in readable:
            try:
                if ready is listener:
                    _accept(listener, sandbox, kernels, relays)
                elif ready in relays:
                    kernel = relays.pop(ready)
                    kernel.relay.close()
                    if kernel.exited:
                        _reap(kernel, kernels)
                    else:
                        _kill(kernel)  # the relay is gone (jupyter_client killed it): so is the kernel
                elif ready in kernels:
                    _ended(kernels[ready], kernels, relays)
            except OSError as error:  # one kernel's trouble (e.g. no process left to fork) is not all kernels'
                print(f"autograder fork server: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


def _kill(kernel: _Kernel) -> None:
    try:
        signal.pidfd_send_signal(kernel.pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _ended(kernel: _Kernel, kernels: dict, relays: dict) -> None:
    """The launcher exited: tell its relay (the zombie stays until the relay is gone, so that the
    relay never signals a reused process id), and kill what is left of its process group."""
    if kernel.exited:
        return
    info = os.waitid(os.P_PIDFD, kernel.pidfd, os.WEXITED | os.WNOWAIT)
    kernel.exited = True
    code = info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status
    try:
        os.killpg(kernel.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if kernel.relay.fileno() in relays:
        try:
            kernel.relay.sendall(json.dumps({"exit": code}).encode() + b"\n")
            return  # reaped when the relay closes its end
        except OSError:
            relays.pop(kernel.relay.fileno(), None)
            kernel.relay.close()
    _reap(kernel, kernels)


def _reap(kernel: _Kernel, kernels: dict) -> None:
    kernels.pop(kernel.pidfd, None)
    try:
        os.waitid(os.P_PIDFD, kernel.pidfd, os.WEXITED)
    except ChildProcessError:
        pass
    os.close(kernel.pidfd)


def _accept(listener: socket.socket, sandbox, kernels: dict, relays: dict) -> None:
    """Read one relay's request (with its three standard streams) and fork its kernel."""
    connection, _ = listener.accept()
    fds: list[int] = []
    try:
        import struct

        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", credentials)
        connection.settimeout(10)
        message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        while message and not message.endswith(b"\n"):
            more = connection.recv(1 << 16)
            if not more:
                break
            message += more
        request = json.loads(message)
        if uid != os.getuid() or len(fds) != 3:
            raise PermissionError("the request did not come from the grader")
        if "referee" in request:
            spec, connection_file = dict(request["referee"]), ""
            spec["memory_mb"], spec["path"] = int(spec["memory_mb"]), str(spec["path"])
        else:
            spec = sandbox.KernelSpec(**json.loads(open(request["spec"], encoding="utf-8").read()))
            connection_file = str(request["connection_file"])
    except (OSError, ValueError, TypeError, KeyError) as error:
        try:
            connection.sendall(json.dumps({"error": f"{type(error).__name__}: {error}"}).encode() + b"\n")
        except OSError:
            pass
        connection.close()
        for fd in fds:
            os.close(fd)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as error:
        connection.sendall(json.dumps({"error": f"fork failed: {error}"}).encode() + b"\n")
        connection.close()
        for fd in fds:
            os.close(fd)
        return
    if pid == 0:
        held = [listener, connection, *(k.relay for k in relays.values())]
        if type(spec) is dict:
            _referee_child(spec, fds, held)
        _child(sandbox, spec, connection_file, fds, held)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    kernel = _Kernel(pid, pidfd, connection)
    connection.settimeout(None)
    kernels[pidfd] = kernel
    relays[connection.fileno()] = kernel
    try:
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass  # the relay is gone; the select loop sees it and kills the kernel


def _child(sandbox, spec, connection_file: str, fds: list[int], sockets: list[socket.socket]) -> None:
    """The forked launcher: the relay's streams as its own, nothing else of the server's, then
    the sandbox as for a cold kernel, with the kernel run in this process; never returns."""
    try:
        for held in sockets:  # closed below; detached so that collecting them closes nothing later
            held.detach()
        for signum in (signal.SIGTERM, signal.SIGUSR1, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, _max_fd())  # no socket, pidfd or file of the server reaches the sandbox
        os.setsid()
        sandbox.launch(spec, connection_file, start_kernel=start_in_process)
    except BaseException as error:
        try:
            print(f"autograder fork server: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        finally:
            os._exit(1)
    os._exit(1)


def _referee_child(spec: dict, fds: list[int], sockets: list[socket.socket]) -> None:
    """A forked referee (``autograder/engine/referee.py``, trusted: no sandbox): the relay's streams, its
    memory limit, the grading package on the path, fresh random seeds; never returns."""
    code = 1
    try:
        import importlib.util
        import random
        import resource

        for held in sockets:
            held.detach()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, _max_fd())
        os.setsid()
        size = max(spec["memory_mb"], 2048) * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        except (ValueError, OSError):
            pass
        for name in SERVER_MODULES:
            sys.modules.pop(name, None)
        sys.path.insert(0, spec["path"])
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        source = importlib.util.spec_from_file_location("_autograder_referee",
                                                        os.path.join(spec["path"], "autograder", "engine", "referee.py"))
        referee = importlib.util.module_from_spec(source)
        sys.modules["_autograder_referee"] = referee
        source.loader.exec_module(referee)
        referee.main()
        code = 0
    except SystemExit as stop:
        code = stop.code if type(stop.code) is int else 0
    except BaseException as error:
        try:
            print(f"autograder fork server: referee: {type(error).__name__}: {error}", file=sys.__stderr__, flush=True)
        except BaseException:
            pass
    finally:
        os._exit(code)


def _max_fd() -> int:
    try:
        import resource

        return int(min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 20))
    except (ImportError, ValueError, OSError):
        return 4096


def start_in_process(spec, connection_file: str) -> None:
    """In the forked kernel process, inside its sandbox: become what ``python -c KERNEL_BOOTSTRAP``
    would be (environment, arguments, module path, fresh random seeds) and run ipykernel; never
    returns."""
    import atexit
    import random
    import tempfile

    os.environ.clear()
    os.environ.update(spec.env)
    for key, value in _SET_BY_IMPORTS.items():
        os.environ.setdefault(key, value)
    sys.argv = ["-c", *spec.argv[3:], connection_file]  # spec.argv: python -c BOOTSTRAP ARGS... -f
    for name in SERVER_MODULES:
        sys.modules.pop(name, None)
    tempfile.tempdir = None
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    code = 1
    try:
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        code = 0
    except SystemExit as stop:
        code = stop.code if type(stop.code) is int else (0 if stop.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


# --- The grader's end ---------------------------------------------------------------------------


def available() -> str | None:
    """Why warm kernels cannot be used here, or None when they can."""
    if os.environ.get("AUTOGRADER_COLD_KERNELS") == "1":
        return "AUTOGRADER_COLD_KERNELS=1 asks for cold kernels"
    if sys.platform != "linux" or not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
        return "forking a warm kernel needs Linux 5.3 or later"
    return None


class ForkServer:
    """The grader's handle on its fork server: started on first use, shared by every job slot."""

    def __init__(self) -> None:
        import threading

        self.process = None
        self.folder: str | None = None
        self.failure: str | None = None
        self.lock = threading.Lock()

    def socket_path(self, environment: dict[str, str]) -> str | None:
        """The server's socket, starting the server if needed (this blocks while it warms up);
        None if it cannot run here (see :attr:`failure`).

        Args:
            environment: the kernels' environment (:func:`autograder.engine.sandbox.kernel_environment`):
                the server imports its modules under it, as a cold kernel would.
        """
        with self.lock:
            if self.process is not None and self.process.poll() is None:
                return os.path.join(self.folder, SOCKET_NAME)
            if self.failure is not None:
                return None
            self._start(environment)
            return os.path.join(self.folder, SOCKET_NAME) if self.failure is None else None

    def running(self) -> str | None:
        """The socket of the server if it is running now (this starts nothing), else None."""
        if self.process is not None and self.process.poll() is None and self.folder is not None:
            return os.path.join(self.folder, SOCKET_NAME)
        return None

    def _start(self, environment: dict[str, str]) -> None:
        import subprocess
        import tempfile
        import time
        from pathlib import Path

        from autograder.engine import sandbox

        self.stop()
        self.folder = tempfile.mkdtemp(prefix="autograder-fork-")
        os.chmod(self.folder, 0o700)
        env = {**environment, "HOME": self.folder, "TMPDIR": self.folder,
               "MPLCONFIGDIR": os.path.join(self.folder, "matplotlib"), "JUPYTER_RUNTIME_DIR": self.folder}
        log = open(os.path.join(self.folder, "server.log"), "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER_BOOTSTRAP, self.folder, str(Path(sandbox.__file__).resolve()),
             str(Path(__file__).resolve())], cwd=self.folder, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        line = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if ready:
                line = self.process.stdout.readline()
                break
            if self.process.poll() is not None:
                break
        if line.decode(errors="replace").strip() != READY:
            tail = " ".join(Path(self.folder, "server.log").read_bytes()[-300:].decode(errors="replace").split())
            self.stop()
            self.failure = "the fork server did not start" + (f": {tail}" if tail else "")

    def stop(self) -> None:
        """Stop the server and every kernel it forked."""
        import shutil

        if self.process is not None:
            try:
                self.process.stdin.close()
                self.process.wait(5)
            except Exception:
                self.process.kill()
                self.process.wait()
            self.process.stdout.close()
            self.process = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def relay_command(socket_path: str, spec_path: str) -> list[str]:
    """The kernel command for jupyter_client: the relay, in a bare interpreter."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), socket_path, spec_path, "{connection_file}"]


def referee_command(socket_path: str, memory_mb: int) -> list[str]:
    """The command that starts a referee forked from the server (see :func:`_referee_child`)."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "--referee", socket_path, str(int(memory_mb)),
            package_parent]


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--referee":
        relay(sys.argv[2], {"referee": {"memory_mb": sys.argv[3], "path": sys.argv[4]}})
    elif len(sys.argv) == 4:
        relay(sys.argv[1], {"spec": sys.argv[2], "connection_file": sys.argv[3]})
    else:
        print("usage: python forkserver.py SOCKET SPEC.json CONNECTION_FILE (started by the grader)",
              file=sys.stderr)
        sys.exit(2)

"""The sandbox every learner's kernel runs in: resource limits and, on Linux as root, isolation.

The grader starts each kernel through :func:`launch`, given a JSON :class:`KernelSpec`: forked from
the grading run's fork server, which has loaded torch and ipykernel already (a warm kernel, see
:mod:`autograder.engine.forkserver`), or as ``python -m autograder.engine.sandbox SPEC CONNECTION_FILE`` (a cold
one, where fork cannot be used). Either way :func:`launch` builds the same sandbox, applies the
limits and then runs ipykernel (in the forked process, or a new interpreter).

With **full isolation** (Linux, run as root: a course server or a container) the launcher

1. creates new mount, network, PID, IPC and UTS namespaces, so the kernel has no network (not even
   loopback; it talks to the grader over Unix sockets) and sees only its own processes;
2. builds a fresh root file system: a size-limited tmpfs holding read-only bind mounts of the
   system folders, the Python installation, the site-packages and the course library, plus a
   writable, empty ``/home/learner`` (the working folder, also ``HOME``) and ``/tmp`` -- the
   repository, ``solutions/``, the gradebook, the output folder, the submissions and every other
   path of the host are simply absent;
3. runs as PID 1 of the new PID namespace a tiny init that reaps orphans, forwards interrupts, kills
   every process but the kernel when the grader asks (``SIGUSR1``, after each cell), and takes all
   of them down when the kernel ends or the grader goes away; once the kernel has created its
   sockets in the folder it shares with the grader, the init makes that folder read-only in the
   sandbox (:data:`SEALED`), so nothing of the host is writable from inside but its own tmpfs;
4. starts the kernel under an unprivileged user id of its own (one per concurrent job, so a fork
   bomb exhausts only its own process limit), with ``no_new_privs``, a minimal environment and the
   rlimits: address space, processes, file size, CPU time, open files, no core dumps.

Elsewhere (macOS, or Linux without root) only the rlimits, a fresh working folder and a minimal
environment apply; :func:`isolation_warnings` says what is missing, and the grader prints it at
start-up. The kernel imports the grading agent (:mod:`course_runtime.agent`) before any learner
code runs; the tests themselves never run in the kernel (see ``autograder/engine/referee.py``).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the launcher runs without the grading package (see forkserver.SERVER_MODULES)
    from autograder.core.limits import Limits

LEARNER_HOME = "/home/learner"
# The threads of a kernel's relay (its own, zmq's I/O thread and reaper), counted in its cgroup's pids.max.
RELAY_TASKS = 4
# Unprivileged user ids for kernels: one per concurrent job, offset by the grader's PID so that two
# grading runs on one machine do not share process limits.
UID_BASE = 2_000_000
# What the kernel runs: the grading agent and the test helpers are loaded (torch with them) before
# the kernel accepts any learner code, so that each request is quick.
KERNEL_BOOTSTRAP = (
    "import course_runtime.agent, course_runtime.testing\n"
    "from ipykernel import kernelapp\n"
    "kernelapp.launch_new_instance()\n"
)
KERNEL_ARGUMENTS = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
# The line the sandbox's init writes to the kernel log once the shared folder is read-only for the
# kernel: its sockets exist and can no longer be removed, replaced or joined by other files.
SEALED = "autograder sandbox: sockets sealed"
_SOCKETS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
_SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
                   "/sys/devices/system/cpu")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

# Linux constants (include/uapi/linux/sched.h, mount.h, prctl.h).
_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "ppc64le": 203, "s390x": 217}


@dataclass
class KernelSpec:
    """Everything the launcher needs, written as JSON by the grader.

    Attributes:
        argv: the kernel command, without the connection file (appended by the launcher).
        env: the kernel's whole environment.
        limits: the :class:`Limits` as a dict.
        isolate: use namespaces (requires Linux and root).
        uid: the unprivileged user id the kernel runs as (with ``isolate``).
        workdir: the kernel's working folder without ``isolate``.
        read_only: host folders bound read-only into the sandbox (with ``isolate``).
        hidden: host folders covered by an empty read-only tmpfs after ``read_only`` is bound.
        library: host files bound read-only back into a hidden folder.
        shared: the host folder holding the connection file and the kernel's Unix sockets, bound
            read-write at the same path (with ``isolate``).
        new_root: an empty host folder used as the mount point of the sandbox's root.
        cgroup: the kernel's own memory cgroup (:func:`make_cgroup`), which the launcher joins
            before anything else, so that the memory limit covers all the kernel's processes
            together; "" where this machine offers none.
    """

    argv: list[str]
    env: dict[str, str]
    limits: dict
    isolate: bool
    uid: int
    workdir: str
    shared: str
    new_root: str
    read_only: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    library: list[str] = field(default_factory=list)
    cgroup: str = ""


# --- What this platform can enforce ---------------------------------------------------------------


# Run in a throwaway child process: can this process create the sandbox's namespaces and mount in
# them? Root in a container without CAP_SYS_ADMIN (Docker's default, hosted notebooks) cannot.
_NAMESPACE_PROBE = (
    "import ctypes, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    f"if libc.unshare({_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWUTS}) != 0: sys.exit(1)\n"
    f"if libc.mount(None, b'/', None, ctypes.c_ulong({_MS_REC | _MS_PRIVATE}), None) != 0: sys.exit(1)\n"
    f"sys.exit(1 if libc.mount(b'tmpfs', b'/tmp', b'tmpfs', ctypes.c_ulong({_MS_NOSUID | _MS_NODEV}), b'size=1m') else 0)\n"
)


@functools.lru_cache(maxsize=1)
def _namespaces_work() -> bool:
    """Whether a child of this process may create namespaces and mount in them (asked once)."""
    if not all(Path(f"/proc/self/ns/{name}").exists() for name in ("mnt", "net", "pid", "ipc")):
        return False
    try:
        return subprocess.run([sys.executable, "-c", _NAMESPACE_PROBE], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def can_isolate() -> bool:
    """Whether kernels get full isolation here: Linux, root, a known architecture, namespaces that
    this process may actually create."""
    return isolation_off_reason() is None


def isolation_off_reason() -> str | None:
    """Why kernels cannot get full isolation here, in a few words; None when they can."""
    if sys.platform != "linux":
        return "this is not Linux"
    if os.geteuid() != 0:
        return "the grader is not running as root"
    if os.uname().machine not in _SYS_PIVOT_ROOT or not _namespaces_work():
        return "Linux namespaces or pivot_root are not available"
    return None


def isolation_warnings() -> list[str]:
    """What the sandbox cannot enforce on this machine, one sentence each; empty with full isolation
    and a writable memory cgroup (:func:`cgroup_parent`)."""
    warnings = []
    if not can_isolate():
        why = isolation_off_reason() or "Linux namespaces or pivot_root are not available"
        warnings += [
            f"full isolation is off because {why}: learner code can read any file this user can read "
            "(including solutions/, the submissions and the output folder) and can reach the network",
            "the process limit is not enforced per kernel (it would count all of this user's processes)",
            "background processes a learner starts are not stopped after each cell",
        ]
    if sys.platform != "linux":
        warnings.append("the memory limit (RLIMIT_AS) may not be enforced by this operating system")
    elif cgroup_parent() is None:
        warnings.append("no memory cgroup is writable here, so the memory limit is per process, not per kernel: "
                        "a kernel that starts worker processes (e.g. a DataLoader's) can use the limit once per "
                        "process (run the grader where /sys/fs/cgroup is writable, e.g. as root in a container, "
                        "or in a cgroup v2 slice that delegates the memory controller)")
    return warnings


def readable_roots() -> list[str]:
    """The host folders a sandboxed kernel needs, read-only: system, Python, packages and the
    learner-side runtime (:mod:`course_runtime`). The reference library is not among them: see
    :func:`library_mounts`."""
    import site

    import course_runtime

    candidates = [*_SYSTEM_FOLDERS, sys.base_prefix, sys.prefix, sys.exec_prefix,
                  *site.getsitepackages(), str(Path(course_runtime.__file__).resolve().parent)]
    roots: list[str] = []
    for path in candidates:
        path = os.path.realpath(path) if not os.path.islink(path) else path
        if os.path.lexists(path) and path not in roots:
            roots.append(path)
    return roots


def library_mounts(library: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(hidden, files)``: the reference library's folder, which the sandbox covers with an empty
    read-only tmpfs (it may lie inside a mounted site-packages), and the files of the modules in
    ``library`` mounted back into it (none for most assignments: see :mod:`autograder.engine.mounts`)."""
    from autograder.engine.mounts import library_files

    import transformer_core

    return [str(Path(transformer_core.__file__).resolve().parent)], library_files(library)


def kernel_environment(shared: Path, *, isolate: bool, workdir: Path) -> dict[str, str]:
    """The complete environment of a kernel: nothing of the grader's environment leaks through."""
    home = LEARNER_HOME if isolate else str(workdir)
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": home,
        "TMPDIR": "/tmp" if isolate else str(workdir / "tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{home}/.config/matplotlib",
        "JUPYTER_RUNTIME_DIR": str(shared),
        "JUPYTER_PLATFORM_DIRS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "TQDM_DISABLE": "1",
    }
    if sys.platform == "darwin":
        env["OBJC_DISABLE_INITIALIZE_FORK_SAFETY"] = "YES"
    return env


def kernel_uid(slot: int) -> int:
    """The user id of the kernel in job slot ``slot`` of this grading process."""
    return UID_BASE + (os.getpid() % 10_000) * 1000 + slot % 1000


# --- One memory cgroup per kernel --------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def cgroup_parent() -> tuple[str, int] | None:
    """``(folder, version)``: a cgroup folder this process may create kernels' memory cgroups in,
    with its cgroup version; None where there is none (then the memory limit is per process).

    Version 2: this process's own cgroup, if it delegates the ``memory`` controller to its children
    (``cgroup.subtree_control``) and is writable. Version 1: this process's cgroup in the ``memory``
    hierarchy, if writable (as root on most hosts and containers with ``/sys/fs/cgroup`` writable).
    """
    if sys.platform != "linux":
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                folder = mount + path.rstrip("/")
                try:
                    delegated = Path(folder, "cgroup.subtree_control").read_text(encoding="utf-8").split()
                except OSError:
                    continue
                if "memory" in delegated and os.access(folder, os.W_OK):
                    return folder, 2
        elif "memory" in controllers.split(","):
            folder = "/sys/fs/cgroup/memory" + path.rstrip("/")
            if os.path.isfile(folder + "/memory.limit_in_bytes") and os.access(folder, os.W_OK):
                return folder, 1
    return None


def make_cgroup(name: str, limits: Limits) -> str:
    """Create the memory cgroup ``name`` for one kernel, limited to ``limits.memory_mb`` for all its
    processes together (swap included where the kernel accounts it) and to ``limits.processes``
    processes (version 2; plus :data:`RELAY_TASKS` for the kernel's relay, :mod:`autograder.engine.relay`,
    which joins the cgroup so that what the kernel makes it hold is the kernel's); "" where this
    machine has no cgroup for it (:func:`cgroup_parent`)."""
    parent = cgroup_parent()
    if parent is None:
        return ""
    folder, version = parent
    path = os.path.join(folder, name)
    size = str(limits.memory_mb * 1024 * 1024)
    settings = ([("memory.max", size), ("memory.swap.max", "0"), ("pids.max", str(limits.processes + RELAY_TASKS))]
                if version == 2 else [("memory.limit_in_bytes", size), ("memory.memsw.limit_in_bytes", size)])
    os.mkdir(path)
    for file, value in settings:
        if os.path.exists(os.path.join(path, file)):
            Path(path, file).write_text(value, encoding="utf-8")
    return path


def cgroup_out_of_memory(path: str) -> bool:
    """Whether the kernel's cgroup ``path`` ran into its memory limit (so a process of it was killed)."""
    for file, key in (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")):
        try:
            counts = dict(line.split() for line in Path(path, file).read_text(encoding="utf-8").splitlines())
        except (OSError, ValueError):
            continue
        return int(counts.get(key, 0)) > 0
    try:
        return int(Path(path, "memory.failcnt").read_text(encoding="utf-8")) > 0
    except (OSError, ValueError):
        return False


def kill_cgroup(path: str, *, wait_s: float = 2.0) -> None:
    """Kill every process of the kernel's cgroup ``path`` and remove it; processes forked while it
    is being emptied are killed too (it is read again until it is empty, for at most ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            Path(path, "cgroup.kill").write_text("1", encoding="utf-8")
        except OSError:
            pass  # cgroup version 1, or a kernel before 5.14: kill one by one
        try:
            pids = Path(path, "cgroup.procs").read_text(encoding="utf-8").split()
        except FileNotFoundError:
            return
        except OSError:
            pids = []
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                continue
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)


def _join_cgroup(path: str) -> None:
    """Move this process (and so everything it starts) into the kernel's cgroup ``path``."""
    Path(path, "cgroup.procs").write_text(str(os.getpid()), encoding="utf-8")


# --- The launcher ---------------------------------------------------------------------------------


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(libc, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None):
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    _check(libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags),
                      encode(data)), f"mount {source or fstype} on {target}")


def _set_limits(limits: Limits, *, per_kernel_processes: bool) -> None:
    mib = 1024 * 1024
    settings = [(resource.RLIMIT_AS, limits.memory_mb * mib),
                (resource.RLIMIT_FSIZE, limits.file_mb * mib),
                (resource.RLIMIT_CPU, int(limits.notebook_timeout) + 60),
                (resource.RLIMIT_CORE, 0),
                (resource.RLIMIT_NOFILE, 1024)]
    if per_kernel_processes:
        settings.append((resource.RLIMIT_NPROC, limits.processes))
    for kind, value in settings:
        try:
            _, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (value, value))
        except (ValueError, OSError):  # a platform that refuses one limit still gets the others
            continue


def _bind(libc, new_root: str, path: str, *, writable: bool = False) -> None:
    target = new_root + path
    if os.path.islink(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        Path(target).touch()
    _mount(libc, path, target, None, _MS_BIND | _MS_REC)
    flags = _MS_BIND | _MS_REMOUNT | _MS_NOSUID | (0 if writable else _MS_RDONLY)
    if path.startswith("/dev/"):
        _mount(libc, None, target, None, flags)
    else:
        _mount(libc, None, target, None, flags | _MS_NODEV)


def _build_root(libc, spec: KernelSpec, limits: Limits) -> None:
    """In a fresh mount namespace: assemble the sandbox's file system and pivot into it."""
    root = spec.new_root
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount(libc, "tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={limits.disk_mb}m,mode=0755")
    for path in spec.read_only:
        _bind(libc, root, path)
    for folder in spec.hidden:  # the reference library: empty but for the modules the kernel needs
        os.makedirs(root + folder, exist_ok=True)
        _mount(libc, "tmpfs", root + folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64k,mode=0755")
        for path in spec.library:
            _bind(libc, root, path)
        _mount(libc, None, root + folder, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    for device in _DEVICES:
        if os.path.exists(device):
            _bind(libc, root, device, writable=True)
    _bind(libc, root, spec.shared, writable=True)
    for path in (spec.shared, *(str(p) for p in Path(spec.shared).iterdir())):
        os.chown(path, spec.uid, spec.uid)
    for folder in (LEARNER_HOME, "/tmp", "/proc", "/dev/shm"):
        os.makedirs(root + folder, exist_ok=True)
    for folder in (LEARNER_HOME, "/tmp", "/dev/shm"):
        os.chown(root + folder, spec.uid, spec.uid)
        os.chmod(root + folder, 0o1777 if folder != LEARNER_HOME else 0o700)
    os.chdir(root)
    _check(libc.syscall(_SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(libc.umount2(b".", _MNT_DETACH), "detach the host file system")
    os.chdir("/")
    _mount(libc, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def _seal(libc, spec: KernelSpec, connection_file: str, limits: Limits, kernel: int) -> int | None:
    """Once the kernel has created its sockets, make the shared folder read-only in the sandbox.

    The kernel can then neither fill the host's disk through it nor replace a socket with a link
    the grader would follow; the grader sends no learner code before it reads :data:`SEALED`.

    Returns:
        The kernel's wait status if it ended before creating its sockets (e.g. an import failed at
        start-up), so that the sandbox ends at once instead of waiting out the start-up time.
    """
    info = json.loads(Path(connection_file).read_text(encoding="utf-8"))
    paths = [f"{info['ip']}-{info[key]}" for key in _SOCKETS]
    deadline = time.monotonic() + limits.startup_timeout
    while not all(os.path.exists(path) for path in paths):
        pid, wait_status = os.waitpid(kernel, os.WNOHANG)
        if pid == kernel:
            return wait_status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)
    _mount(libc, None, spec.shared, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    print(SEALED, file=sys.stderr, flush=True)


def _become_learner(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


SWEEP_PASSES = 1000


def _sweep(kernel_pid: int) -> None:
    """Kill every process of the sandbox except PID 1 (this init) and the kernel, whatever session or
    group it is in; ``/proc`` is read again until a pass finds none (a process that forks again
    while it dies leaves a child for the next pass), for at most :data:`SWEEP_PASSES` passes."""
    for _ in range(SWEEP_PASSES):
        found = False
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in (1, kernel_pid) and not _zombie(entry):
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except ProcessLookupError:
                    continue
        if not found:
            return


def _zombie(pid: str) -> bool:
    """Whether process ``pid`` has ended (only its exit status is left, for the init to reap) or is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _init(spec: KernelSpec, connection_file: str, start_kernel) -> None:
    """PID 1 of the sandbox: build it, start the kernel, reap, forward signals; never returns."""
    libc = _libc()
    limits = SimpleNamespace(**spec.limits)
    status = 1
    try:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _build_root(libc, spec, limits)
        kernel = os.fork()
        if kernel == 0:
            try:
                os.setsid()
                os.chdir(LEARNER_HOME)
                _set_limits(limits, per_kernel_processes=True)
                _become_learner(spec.uid)
                libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
                start_kernel(spec, connection_file)
            finally:
                os._exit(127)
        signal.signal(signal.SIGINT, lambda *_: os.kill(kernel, signal.SIGINT))
        signal.signal(signal.SIGTERM, lambda *_: os.kill(kernel, signal.SIGKILL))
        signal.signal(signal.SIGUSR1, lambda *_: _sweep(kernel))
        ended = _seal(libc, spec, connection_file, limits, kernel)
        if ended is not None:
            status = os.waitstatus_to_exitcode(ended)
            os._exit(128 - status if status < 0 else status)
        while True:
            try:
                pid, wait_status = os.wait()
            except InterruptedError:
                continue
            except ChildProcessError:
                break
            if pid == kernel:
                status = os.waitstatus_to_exitcode(wait_status)
                status = 128 - status if status < 0 else status
                break
    except BaseException as error:  # report why the sandbox could not be built, then fail
        print(f"autograder sandbox: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    finally:
        os._exit(status)


def exec_kernel(spec: KernelSpec, connection_file: str) -> None:
    """Replace this process by a new interpreter running the kernel (``spec.argv``); never returns."""
    os.execve(spec.argv[0], [*spec.argv, connection_file], spec.env)


def launch(spec: KernelSpec, connection_file: str, start_kernel=exec_kernel) -> None:
    """Run the kernel described by ``spec`` under its limits; never returns.

    Args:
        spec: the sandbox and the kernel.
        connection_file: the kernel's connection file.
        start_kernel: called as ``start_kernel(spec, connection_file)`` in the kernel's process once
            the sandbox, the user id and the limits are in place; never returns. Default: a new
            interpreter (:func:`exec_kernel`); the fork server (:mod:`autograder.engine.forkserver`) runs
            ipykernel in the forked process instead.
    """
    limits = SimpleNamespace(**spec.limits)
    if sys.platform == "linux":  # die with the grader (or the fork server), even if it is killed
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if spec.cgroup:
        _join_cgroup(spec.cgroup)
    if not spec.isolate:
        os.chdir(spec.workdir)
        _set_limits(limits, per_kernel_processes=False)
        start_kernel(spec, connection_file)
        os._exit(127)  # start_kernel does not return
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWUTS),
           "unshare")
    init = os.fork()
    if init == 0:
        _init(spec, connection_file, start_kernel)
    # The grader signals this launcher's process group; the init, in the same group, gets the
    # interrupts and sweeps directly, so the launcher ignores them and only forwards a stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(init, signal.SIGKILL))
    while True:
        try:
            _, wait_status = os.waitpid(init, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(wait_status)
    os._exit(128 - code if code < 0 else code)


def main(argv: list[str] | None = None) -> None:
    """``python -m autograder.engine.sandbox SPEC.json CONNECTION_FILE``: the kernel command the grader uses."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m autograder.engine.sandbox SPEC.json CONNECTION_FILE", file=sys.stderr)
        sys.exit(2)
    spec = KernelSpec(**json.loads(Path(args[0]).read_text(encoding="utf-8")))
    launch(spec, args[1])


if __name__ == "__main__":
    main()

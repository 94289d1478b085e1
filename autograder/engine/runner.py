"""Running code in a sandboxed kernel and observing, from outside, how each cell ended.

:class:`SandboxedKernel` starts an IPython kernel through :mod:`autograder.engine.sandbox` (forked from the
run's fork server, :data:`FORK_SERVER`, where the platform allows: see :mod:`autograder.engine.forkserver`)
and talks to it over Unix sockets; :data:`STATS` counts kernels and requests.
:meth:`SandboxedKernel.run` sends one cell and returns a :class:`CellOutcome`: its status comes from the kernel's ``execute_reply`` (never from printed text), its outputs are
reduced to text and capped, a cell that outlives its time limit is interrupted (and the kernel
stopped if it does not respond), and a kernel that dies (``os._exit``, ``exit()``, a crash, the CPU
limit) raises :class:`KernelStopped` with the reason. :meth:`SandboxedKernel.ask` sends one request
to the grading agent in the kernel (:mod:`course_runtime.agent`, installed as the handler of a
message type of its own right after the kernel starts) and returns its raw answer.

Everything the kernel sends is bounded: it reaches the grader through the kernel's relay
(:mod:`autograder.engine.relay`, a process whose memory is the kernel's), which passes on one message of
at most :data:`MAX_MESSAGE_BYTES` and :data:`KEPT_FRAMES` frames; at most :data:`QUEUED_MESSAGES` wait
per socket, and per notebook at most ``Limits.message_mb`` and ``Limits.messages`` go through in all.
Past a limit, or when the relay refuses a message or ends, the kernel is stopped with the reason, so a
flood of output costs the grader neither memory nor the time of other learners. Those bounds rest on private parts of jupyter_client
(a channel's ``_recv``, a client's ``_create_connected_socket``, a manager's ``_kernel_spec``):
``tests/test_jupyter_client_contract.py`` fails when an installed version no longer uses them, and
``pyproject.toml`` pins the versions it passed with.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from queue import Empty

import zmq
from traitlets import Type
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.kernelspec import KernelSpec as JupyterKernelSpec
from jupyter_client.manager import AsyncKernelManager

from autograder.core.files import clean_text
from autograder.core.limits import Limits
from autograder.core.outcomes import UNLISTED_EXCEPTION, CellOutcome, listed_exception
from autograder.engine import forkserver, relay, sandbox, stop_reasons
from autograder.engine.relay import KEPT_FRAMES, MAX_MESSAGE_BYTES, QUEUED_MESSAGES, SMALL_MESSAGE_BYTES
from autograder.engine.sandbox import KERNEL_ARGUMENTS, KERNEL_BOOTSTRAP, SEALED, KernelSpec
from course_runtime.agent import REPLY_TYPE, REQUEST_TYPE

INSTALL_AGENT = "__import__('course_runtime.agent', fromlist=['install']).install()"
INTERRUPT_GRACE_S = 5.0
RECONNECT_MS = 5
IOPUB_GRACE_S = 5.0
SHUTDOWN_GRACE_S = 5.0
# The characters of a cell's error message kept as its reason.
MAX_REASON_CHARS = 20_000
# How long a kernel whose relay lost its connection may take to be seen ending before it counts as
# having sent a frame over the cap.
LOST_GRACE_S = 1.0
# The longest folder for the kernel's sockets (``<folder>/s-<n>`` must fit in a Unix socket address).
_MAX_SOCKET_DIR = 90
SANDBOX_SCRIPT = str(Path(sandbox.__file__).resolve())



# What this grading process asked of kernels: started kernels (warm or cold) and the agent's
# requests, for benchmarks (``benchmarks/grading_throughput.py``) and the batch's summary.
STATS = {"kernels": 0, "warm_kernels": 0, "requests": 0}
# Numbers the kernels' cgroups of this grading process (see :meth:`SandboxedKernel._make_cgroup`).
_CGROUP_NUMBERS = itertools.count()
# The fork server of this grading process (see :mod:`autograder.engine.forkserver`), shared by its job slots.
FORK_SERVER = forkserver.ForkServer()
atexit.register(FORK_SERVER.stop)


class KernelStopped(Exception):
    """The kernel is gone (or was stopped); the message says why, for the learner."""


class KernelDidNotStart(KernelStopped):
    """The kernel did not start: the grader's failure, not the submission's (graded again on the next run)."""


def fork_server_socket() -> str | None:
    """The socket of this process's fork server, starting it if needed (this blocks while it warms
    up); None where warm processes cannot be used (see :func:`autograder.engine.forkserver.available`)."""
    if forkserver.available() is not None:
        return None
    scratch = Path(tempfile.gettempdir())  # the server replaces the per-kernel folders with its own
    return FORK_SERVER.socket_path(sandbox.kernel_environment(scratch, isolate=sandbox.can_isolate(), workdir=scratch))


class ForkServerLost(RuntimeError):
    """The fork server stopped while its kernel ran: the grader failed, not the submission (the batch
    reports an internal error, and the next run grades the submission again)."""


class AgentError(Exception):
    """A request to the grading agent got no usable answer; the message says why.

    Attributes:
        timed_out: the learner's code was still running when the time was up.
    """

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class Budget:
    """What one kernel may still send: bytes and messages, over all its sockets.

    Attributes:
        exceeded: the kernel must be stopped (over a limit, or refused by its relay).
        reason: why, in words for the learner, once :attr:`exceeded` is set.
    """

    def __init__(self, limits: Limits) -> None:
        self.bytes_left = limits.message_mb * 1024 * 1024
        self.messages_left = limits.messages
        self.exceeded = False
        self.reason = ""
        self._limits = limits

    def spend(self, size: int, messages: int = 1) -> None:
        """Charge ``size`` bytes and ``messages`` messages; past either limit, :attr:`exceeded` is set."""
        self.bytes_left -= size
        self.messages_left -= messages
        if (self.bytes_left < 0 or self.messages_left < 0) and not self.exceeded:
            self.refuse(stop_reasons.too_much_output(self._limits.message_mb, self._limits.messages))

    def refuse(self, reason: str) -> None:
        """The kernel must be stopped, for ``reason`` (the first reason given is kept)."""
        if not self.exceeded:
            self.exceeded, self.reason = True, reason


class _CountedChannel(AsyncZMQSocketChannel):
    """A channel that charges every frame it receives to its kernel's :class:`Budget` as the frame
    arrives (a message of many frames sharing one buffer is never assembled first), keeps at most
    :data:`KEPT_FRAMES` frames of a message and parses it with :func:`autograder.engine.relay.deserialize`."""

    budget: Budget | None = None

    async def _recv(self, **kwargs) -> dict:
        frames: list[zmq.Frame] = []
        while True:
            frame = await self.socket.recv(copy=False, **kwargs)
            if self.budget is not None:
                self.budget.spend(len(frame), messages=0 if frames else 1)
            if len(frames) < KEPT_FRAMES and not (self.budget is not None and self.budget.exceeded):
                frames.append(frame)
            if not frame.more:
                break
            del frame  # a dropped frame's memory goes back to zmq before the next one is read
        if self.budget is not None and self.budget.exceeded:
            raise OverflowError("the kernel sent more than its limit")
        return relay.deserialize(self.session, frames)


class _Collector:
    """The outputs of one execution, reduced to text and capped at ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.outputs: list[dict] = []
        self.truncated = False
        self.done = asyncio.Event()

    def add(self, kind: str, text: str) -> None:
        if self.truncated or not text:
            return
        room = self.limit - self.used
        text = clean_text(str(text)[:room + 1])  # cut first: a message's text may be as large as the message
        if len(text) > room:
            text = text[:room] + f"\n[output truncated: more than {self.limit:,} characters]\n"
            self.truncated = True
        self.used += len(text)
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last["kind"] == kind and kind in ("stdout", "stderr"):
            last["text"] += text
        else:
            self.outputs.append({"kind": kind, "text": text})

    def message(self, msg: dict) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            self.add("stderr" if content.get("name") == "stderr" else "stdout", content.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            data = content.get("data", {})
            shown = data.get("text/plain") or "[" + ", ".join(sorted(data)) + " output]"
            self.add("result", str(shown) + "\n")
        elif kind == "error":
            traceback = "\n".join(content.get("traceback") or [])
            self.add("error", traceback or f"{content.get('ename')}: {content.get('evalue')}")
        elif kind == "clear_output":
            self.outputs.clear()
        elif kind == "status" and content.get("execution_state") == "idle":
            self.done.set()


class LimitedKernelClient(AsyncKernelClient):
    """A kernel client whose sockets refuse messages larger than :data:`MAX_MESSAGE_BYTES`, queue
    at most :data:`QUEUED_MESSAGES` and charge what they receive to one :class:`Budget`."""

    shell_channel_class = Type(_CountedChannel)
    iopub_channel_class = Type(_CountedChannel)
    control_channel_class = Type(_CountedChannel)
    stdin_channel_class = Type(_CountedChannel)

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.Socket:
        from jupyter_client.connect import channel_socket_types

        sock = self.context.socket(channel_socket_types[channel])
        sock.linger = 1000
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES if channel in ("shell", "iopub") else SMALL_MESSAGE_BYTES)
        sock.setsockopt(zmq.RCVHWM, QUEUED_MESSAGES)
        # The kernel binds its sockets a moment after this connects: retry every few milliseconds
        # instead of zmq's default 100 ms, which a warm kernel's start would mostly spend waiting.
        sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
        if identity:
            sock.identity = identity
        sock.connect(self._make_url(channel))
        return sock


class SandboxedKernel:
    """One kernel in its sandbox, for one notebook of one submission.

    Args:
        workdir: a fresh folder of the grader's for this kernel (connection file, sockets, log).
        limits: the resource limits.
        slot: the job slot (0 .. jobs-1), which picks the kernel's user id.
        library: the reference modules the kernel may import (:func:`autograder.engine.mounts.kernel_library`);
            with isolation, only their files of ``transformer_core`` are mounted.
        warm: fork the kernel from this process's fork server (:mod:`autograder.engine.forkserver`), in the
            same sandbox; default: where the platform allows it. Otherwise, or if the server cannot
            start, a new interpreter starts the kernel (:data:`autograder.engine.sandbox.KERNEL_BOOTSTRAP`).
    """

    def __init__(self, workdir: Path, limits: Limits, slot: int, *, library: tuple[str, ...] = (),
                 warm: bool | None = None) -> None:
        self.workdir = Path(workdir)
        self.warm = forkserver.available() is None if warm is None else warm
        self.library = tuple(library)
        self.limits = limits
        self.isolated = sandbox.can_isolate()
        self.slot = slot
        self.km: AsyncKernelManager | None = None
        self.kc: LimitedKernelClient | None = None
        self._collectors: dict[str, _Collector] = {}
        self._reader: asyncio.Task | None = None
        self._relay: asyncio.subprocess.Process | None = None
        self._relay_reader: asyncio.Task | None = None
        self._log = None
        self._own_shared: Path | None = None
        self.budget = Budget(limits)
        self.cgroup = ""
        self.deadline: float | None = None

    # --- life cycle ---

    async def start(self) -> None:
        """Start the kernel and wait until it answers.

        Raises:
            KernelStopped: if it does not start, with the end of its log.
        """
        sockets = self.workdir
        if len(str(sockets / "k")) > _MAX_SOCKET_DIR:  # Unix socket paths are limited to about 100 bytes
            sockets = Path(tempfile.mkdtemp(prefix="autograder-k-", dir="/tmp" if os.path.isdir("/tmp") else None))
            self._own_shared = sockets
        shared, grader_side = sockets / "k", sockets / "g"   # the kernel's sockets; the relay's, for the grader
        shared.mkdir(parents=True, exist_ok=True)
        grader_side.mkdir(mode=0o700, exist_ok=True)
        learner_dir = self.workdir / "learner"
        (learner_dir / "tmp").mkdir(parents=True)
        new_root = self.workdir / "root"
        new_root.mkdir()
        hidden, library = sandbox.library_mounts(self.library) if self.isolated else ([], [])
        spec = KernelSpec(
            argv=[sys.executable, "-c", KERNEL_BOOTSTRAP, *KERNEL_ARGUMENTS, "-f"],
            env=sandbox.kernel_environment(shared, isolate=self.isolated, workdir=learner_dir),
            limits=asdict(self.limits), isolate=self.isolated, uid=sandbox.kernel_uid(self.slot),
            workdir=str(learner_dir), shared=str(shared), new_root=str(new_root),
            read_only=sandbox.readable_roots() if self.isolated else [], hidden=hidden, library=library,
            cgroup=self._make_cgroup())
        spec_path = self.workdir / "sandbox.json"
        spec_path.write_text(json.dumps(asdict(spec)), encoding="utf-8")
        argv = [sys.executable, SANDBOX_SCRIPT, str(spec_path), "{connection_file}"]
        if self.warm:
            server = await asyncio.to_thread(FORK_SERVER.socket_path, sandbox.kernel_environment(
                shared, isolate=self.isolated, workdir=learner_dir))
            if server is not None:
                argv = forkserver.relay_command(server, str(spec_path))
            else:
                self.warm = False
        STATS["kernels"] += 1
        STATS["warm_kernels"] += self.warm
        self.km = AsyncKernelManager(transport="ipc", ip=str(shared / "s"),
                                     connection_file=str(shared / "kernel.json"))
        self.km.client_class = f"{__name__}.LimitedKernelClient"
        self.km._kernel_spec = JupyterKernelSpec(argv=argv, display_name="sandboxed Python", language="python",
                                                 interrupt_mode="signal")
        self._log = open(self.workdir / "kernel.log", "wb")
        try:
            await self.km.start_kernel(stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                       cwd=str(self.workdir))
            grader_ip = await self._start_relay(grader_side)
            self.kc = self.km.client()
            self.kc.ip = grader_ip
            self.kc.start_channels()
            for channel in (self.kc.shell_channel, self.kc.iopub_channel, self.kc.stdin_channel,
                            self.kc.control_channel):
                channel.budget = self.budget
            await self.kc.wait_for_ready(timeout=self.limits.startup_timeout)
            if self.isolated:
                await self._wait_until_sealed()
        except (RuntimeError, TimeoutError, OSError) as error:
            log = self.log_tail()
            await self.stop()
            raise KernelDidNotStart(stop_reasons.did_not_start(str(error), log)) from None
        self._reader = asyncio.ensure_future(self._read_iopub())
        installed = await self.run(INSTALL_AGENT, self.limits.startup_timeout, silent=True)
        if not installed.ok:
            await self.stop()
            raise KernelDidNotStart(stop_reasons.agent_failed(installed.reason))
        self.deadline = time.monotonic() + self.limits.notebook_timeout

    async def _start_relay(self, grader_side: Path) -> str:
        """Start the kernel's relay (:mod:`autograder.engine.relay`) in the kernel's cgroup, binding the
        grader's side of every channel in ``grader_side``; return the ipc address prefix to connect to."""
        info = self.km.get_connection_info()
        grader_ip = str(grader_side / "s")
        argv = relay.command(info["ip"], grader_ip, info, cgroup=self.cgroup, memory_mb=self.limits.memory_mb)
        self._relay = await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, start_new_session=True)
        self._relay_reader = asyncio.ensure_future(self._read_relay(self._relay.stdout))
        return grader_ip

    async def _read_relay(self, reports: asyncio.StreamReader) -> None:
        """Apply the relay's reports to the :class:`Budget`; once it ends, the kernel is stopped too."""
        await relay.follow(reports, self.budget, self._connection_lost)
        self.budget.refuse(self._memory_exhausted() or stop_reasons.relay_ended(self.limits.memory_mb))

    async def _connection_lost(self) -> None:
        """The relay's connection to the kernel broke: a kernel that ended is reported as such by
        :meth:`_reply`; one still running after :data:`LOST_GRACE_S` sent a frame over the cap."""
        deadline = time.monotonic() + LOST_GRACE_S
        while time.monotonic() < deadline:
            if not await self._alive():
                return
            await asyncio.sleep(0.02)
        self.budget.refuse(stop_reasons.oversized(MAX_MESSAGE_BYTES >> 20))

    def _make_cgroup(self) -> str:
        """The kernel's own memory cgroup (see :func:`autograder.engine.sandbox.make_cgroup`); "" where
        there is none, and then the memory limit applies to each of its processes alone."""
        try:
            self.cgroup = sandbox.make_cgroup(f"autograder-{os.getpid()}-{self.slot}-{next(_CGROUP_NUMBERS)}",
                                              self.limits)
        except OSError:
            self.cgroup = ""
        return self.cgroup

    async def stop(self) -> None:
        """Stop the kernel and everything in its sandbox; safe to call more than once."""
        for reader in (self._reader, self._relay_reader):
            if reader is not None:
                reader.cancel()
        self._reader = self._relay_reader = None
        if self.kc is not None:
            self.kc.stop_channels()
            self.kc = None
        if self.cgroup:  # at once: no process of the kernel's gets to run its own shutdown
            cgroup, self.cgroup = self.cgroup, ""
            await asyncio.to_thread(sandbox.kill_cgroup, cgroup)
        if self.km is not None:
            km, self.km = self.km, None
            try:
                if km.has_kernel:
                    await _kill_quickly(getattr(km.provisioner, "process", None))
                    await asyncio.wait_for(km.shutdown_kernel(now=True), SHUTDOWN_GRACE_S)
            except (RuntimeError, OSError, asyncio.TimeoutError):
                process = getattr(km.provisioner, "process", None)
                if process is not None and process.poll() is None:
                    process.kill()
            await km.cleanup_resources()
        if self._relay is not None:  # gone already with the kernel's cgroup, if it has one
            process, self._relay = self._relay, None
            try:
                process.kill()
            except ProcessLookupError:
                pass
            await process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_shared is not None:
            shutil.rmtree(self._own_shared, ignore_errors=True)
            self._own_shared = None

    async def _wait_until_sealed(self) -> None:
        """Wait for the sandbox to make the shared folder read-only for the kernel (see
        :mod:`autograder.engine.sandbox`); no learner code is sent before, so none can swap its sockets."""
        deadline = time.monotonic() + self.limits.startup_timeout
        while SEALED.encode() not in (self.workdir / "kernel.log").read_bytes()[:4096]:
            if time.monotonic() > deadline or not await self._alive():
                raise RuntimeError("the sandbox did not seal the kernel's sockets")
            await asyncio.sleep(0.01)

    def log_tail(self, limit: int = 400) -> str:
        """The end of the kernel's own log (sandbox and ipykernel messages), on one line."""
        try:
            text = (self.workdir / "kernel.log").read_bytes()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""
        return " ".join(text.split())

    def exit_reason(self) -> str:
        """Why the kernel is no longer running, in words for the learner."""
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            return stop_reasons.UNRESPONSIVE
        return self._memory_exhausted() or stop_reasons.exited(code)

    def _memory_exhausted(self) -> str:
        """Why the kernel stopped if its cgroup ran out of memory, else ""."""
        if self.cgroup and sandbox.cgroup_out_of_memory(self.cgroup):
            return stop_reasons.out_of_memory(self.limits.memory_mb)
        return ""

    # --- running code ---

    async def _read_iopub(self) -> None:
        while self.kc is not None and not self.budget.exceeded:
            try:
                msg = await self.kc.iopub_channel.get_msg()
            except asyncio.CancelledError:
                raise
            except Exception:  # a malformed, oversized or too deeply nested message: drop it
                continue
            collector = self._collectors.get(msg.get("parent_header", {}).get("msg_id"))
            if collector is not None:
                collector.message(msg)

    async def _alive(self) -> bool:
        return self.km is not None and await self.km.is_alive()

    async def _reply(self, msg_id: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise asyncio.TimeoutError
            if self.budget.exceeded:
                await self.stop()
                raise KernelStopped(self.budget.reason)
            try:
                msg = await self.kc.shell_channel.get_msg(timeout=min(1.0, remaining))
            except Empty:
                if not await self._alive():
                    process = getattr(getattr(self.km, "provisioner", None), "process", None)
                    if self.warm and process is not None and process.poll() == -forkserver.SERVER_LOST:
                        raise ForkServerLost("the grader's fork server stopped while the kernel ran") from None
                    raise KernelStopped(self.exit_reason()) from None
                continue
            except asyncio.CancelledError:
                raise
            except Exception:  # malformed, oversized, too deeply nested, or over the budget
                continue
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return msg

    async def _reply_in_time(self, msg_id: str, timeout: float, what: str) -> dict | None:
        """The reply to ``msg_id``; None if it took longer than ``timeout`` and was interrupted.

        Raises:
            KernelStopped: the kernel died, or ignored the interrupt and was stopped.
        """
        try:
            return await self._reply(msg_id, timeout)
        except asyncio.TimeoutError:
            await self.km.interrupt_kernel()
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return None  # the notebook's time is up: no grace; the grader stops the kernel next
        try:
            await self._reply(msg_id, INTERRUPT_GRACE_S)
        except asyncio.TimeoutError:
            await self.stop()
            raise KernelStopped(stop_reasons.not_interruptible(what, timeout)) from None
        return None

    async def run(self, code: str, timeout: float, *, silent: bool = False) -> CellOutcome:
        """Run ``code`` and report how it ended.

        Args:
            code: the cell's source.
            timeout: seconds it may take; then the kernel is interrupted.
            silent: run without recording history or outputs (for the grader's own checks).

        Raises:
            KernelStopped: if the kernel died, or had to be stopped because an interrupt did not
                end the cell; the kernel is unusable afterwards.
        """
        if self.kc is None:
            raise KernelStopped(stop_reasons.NOT_RUNNING)
        timeout = self._within_deadline(timeout)
        if timeout <= 0:
            return CellOutcome("timeout", self._past_deadline())
        start = time.monotonic()
        msg_id = self.kc.execute(code, silent=silent, store_history=not silent, allow_stdin=False,
                                 stop_on_error=False)
        collector = self._collectors[msg_id] = _Collector(self.limits.output_chars)
        try:
            reply = await self._reply_in_time(msg_id, timeout, stop_reasons.THE_CELL)
            ended = (CellOutcome("timeout", stop_reasons.interrupted(timeout)) if reply is None
                     else outcome_of(reply))
            if not await self._drained(collector):
                collector.add("stderr", "[some output may be missing: the kernel sent too much, or too "
                                        "large a message]\n")
        finally:
            self._collectors.pop(msg_id, None)
        await self._check_budget()
        return replace(ended, outputs=collector.outputs, seconds=time.monotonic() - start)

    async def _drained(self, collector: _Collector) -> bool:
        """Wait for the last message of ``collector``'s execution (the kernel's idle status), so that all a
        request's output is charged to the budget before the grader goes on. The wait ends without it only
        when :data:`IOPUB_GRACE_S` pass with no byte arriving, the budget is spent or the notebook's time is
        up: never on the clock alone while output still flows (on a busy machine a fixed grace let the
        unread tail of a flood pass the budget, and the next test ran and counted). Returns whether it came."""
        while not collector.done.is_set():
            spent = (self.budget.bytes_left, self.budget.messages_left)
            try:
                await asyncio.wait_for(collector.done.wait(), self._within_deadline(IOPUB_GRACE_S))
            except asyncio.TimeoutError:
                if (self.budget.exceeded or self._within_deadline(IOPUB_GRACE_S) <= 0
                        or spent == (self.budget.bytes_left, self.budget.messages_left)):
                    return False
        return True

    def _within_deadline(self, timeout: float) -> float:
        """``timeout``, cut to the time left before the notebook's deadline (set once the kernel has
        started: ``Limits.notebook_timeout``), so that every request, the grader's clean-ups
        included, ends by then (a request left no time is not sent at all)."""
        if self.deadline is None:
            return timeout
        return max(0.0, min(timeout, self.deadline - time.monotonic()))

    def _past_deadline(self) -> str:
        return stop_reasons.past_deadline(self.limits.notebook_timeout)

    async def _check_budget(self) -> None:
        if self.budget.exceeded:
            await self.stop()
            raise KernelStopped(self.budget.reason)

    async def ask(self, request: str, timeout: float) -> str:
        """Send one request to the grading agent in the kernel and return its answer (JSON text).

        Whatever the learner's code prints meanwhile is discarded.

        Raises:
            KernelStopped: if the kernel died or had to be stopped (see :meth:`run`).
            AgentError: if the learner's code ran past ``timeout`` (it is interrupted) or the
                kernel's answer is not one the agent gives (the learner replaced the agent).
        """
        if self.kc is None:
            raise KernelStopped(stop_reasons.NOT_RUNNING)
        timeout = self._within_deadline(timeout)
        if timeout <= 0:
            raise AgentError(self._past_deadline(), timed_out=True)
        STATS["requests"] += 1
        message = self.kc.session.msg(REQUEST_TYPE, {"request": request})
        msg_id = message["header"]["msg_id"]
        printed = self._collectors[msg_id] = _Collector(0)      # what the learner's code prints: charged, not kept
        try:
            self.kc.shell_channel.send(message)
            reply = await self._reply_in_time(msg_id, timeout, stop_reasons.YOUR_CODE)
            if reply is None:
                raise AgentError(stop_reasons.code_too_slow(timeout), timed_out=True)
            await self._drained(printed)
        finally:
            self._collectors.pop(msg_id, None)
        await self._check_budget()
        content = reply.get("content") if reply.get("msg_type") == REPLY_TYPE else None
        if not isinstance(content, dict) or content.get("status") != "ok" or not isinstance(content.get("text"), str):
            status = content.get("status") if isinstance(content, dict) else reply.get("msg_type")
            raise AgentError(stop_reasons.no_agent(str(status)[:40]),
                             timed_out=status == "interrupted")
        return content["text"]

    async def sweep(self) -> None:
        """Kill every process in the sandbox except the kernel (isolated kernels only)."""
        if self.isolated and self.km is not None:
            pgid = getattr(self.km.provisioner, "pgid", None)
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGUSR1)
                except ProcessLookupError:
                    return


async def _kill_quickly(process) -> None:
    """Kill the kernel's process and wait for it in steps of milliseconds: jupyter_client's own
    wait polls every 100 ms, which every submission would otherwise spend idle."""
    if process is None or process.poll() is not None:
        return
    process.kill()
    for _ in range(500):
        if process.poll() is not None:
            return
        await asyncio.sleep(0.002)


def outcome_of(reply: dict) -> CellOutcome:
    """How a cell ended, from the kernel's ``execute_reply`` (its outputs and time aside): ``"ok"``, or
    ``"error"`` with the ``"Type: message"`` line as its reason and the type, kept only if it is a standard
    exception's name (:func:`autograder.core.outcomes.listed_exception`: the kernel's ``ename`` is the
    learner's code's to choose), as its ``exception``.

    Example:
        >>> outcome_of({"content": {"status": "error", "ename": "Leak_77", "evalue": "x"}}).exception
        'an exception'
    """
    content = reply.get("content", {})
    status = content.get("status")
    if status == "ok":
        return CellOutcome("ok")
    if status == "error":
        ename = content.get("ename", "Error")
        error = f"{str(ename)[:200]}: {str(content.get('evalue', ''))[:MAX_REASON_CHARS]}"
        return CellOutcome("error", clean_text(error), exception=listed_exception(ename))
    return CellOutcome("error", stop_reasons.odd_reply(status), exception=UNLISTED_EXCEPTION)

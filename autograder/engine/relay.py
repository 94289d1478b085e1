"""The relay between a learner's kernel and the grader: every message the kernel sends is checked in a
process whose memory is the kernel's, before any of it reaches the grader.

libzmq hands a message of several frames to its reader only once all its frames have arrived, so a
kernel (learner code owns its process and may write anything on its sockets) could make the grader
hold one message of many large frames before any of the grader's code sees a frame. The relay takes
that cost instead: one per kernel, started by :class:`autograder.engine.runner.SandboxedKernel` as the
grader's user (trusted; outside the sandbox, so learner code can neither signal nor trace it) but in
the kernel's memory cgroup, and always under its own ``RLIMIT_AS`` of the kernel's memory limit.

The kernel binds its sockets on one set of Unix socket addresses (the folder it shares with the
sandbox); the relay connects to them, refusing any frame above the channel's cap (``MAXMSGSIZE``), and
binds the addresses the grader connects to (a folder the sandbox does not hold). It forwards shell,
control and stdin (the grader's DEALER to the relay's ROUTER, the relay's DEALER to the kernel's
ROUTER, so routing identities work as without it), IOPub (SUB to PUB) and the heartbeat. Of each
message from the kernel it forwards at most :data:`KEPT_FRAMES` frames (identities, delimiter,
signature, header, parent header, metadata, content: the parts the signature covers and the grader
reads); later frames are buffers, which the grader never uses, and are dropped. It writes to its
standard output, one line each, what the grader must know:

- ``charge BYTES``: buffers it dropped, which the kernel's message budget still pays for;
- ``refuse size BYTES`` / ``refuse frames COUNT``: a message over the channel's byte cap or over
  :data:`MAX_FRAMES` frames was dropped (the grader stops the kernel and says why);
- ``lost CHANNEL``: the connection to the kernel broke: the kernel ended, or sent a frame over the cap.

If the relay itself ends (its memory ran out inside the kernel's limit), its standard output closes
and the grader stops the kernel. It ends when its standard input closes (the grader's end, however
the grader ends) or when the grader kills it with the kernel.

Run as ``python -I -S relay.py CONFIG_JSON`` (see :func:`command`): its top level imports only the
standard library, and zmq is imported once the process is confined.
"""

from __future__ import annotations

import hmac
import json
import os
import resource
import sys

# The largest message (all its frames) the grader accepts from a kernel on shell or IOPub, where the
# grading agent's answers and the learner's outputs travel; a bigger one is refused, never buffered.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# The largest message on control, stdin and the heartbeat (interrupt and input replies, pings).
SMALL_MESSAGE_BYTES = 1024 * 1024
# Messages a grader's socket may hold before the grader reads them (beyond, the relay keeps them, in
# the kernel's memory, or drops them as zmq would).
QUEUED_MESSAGES = 2
# The frames of one message the grader gets: identities, delimiter, signature, header, parent header,
# metadata, content (honest messages have one or two identities).
KEPT_FRAMES = 16
# The largest header, parent header or metadata the grader parses (a kernel's own take under 1 KiB).
MAX_HEADER_BYTES = 64 * 1024
# The frames one message may have at all (buffers included: honest kernels send a few).
MAX_FRAMES = 256
# The JSON values (keys included) of a message's header, parent header, metadata and content
# together, so that parsing a message costs the grader about its size (an honest one has under a
# thousand; a message of empty lists would cost some twenty times its size once parsed).
MAX_JSON_VALUES = 100_000
DELIMITER = b"<IDS|MSG>"
# The identity of the relay's sockets towards the kernel: the same on shell and stdin, so that the
# kernel's input requests reach the client that sent the request.
IDENTITY = b"autograder-relay"
RECONNECT_MS = 5
# Per channel: the kernel's side (the relay connects), the grader's side (the relay binds), the cap.
CHANNELS = {"shell_port": ("DEALER", "ROUTER", MAX_MESSAGE_BYTES),
            "iopub_port": ("SUB", "PUB", MAX_MESSAGE_BYTES),
            "control_port": ("DEALER", "ROUTER", SMALL_MESSAGE_BYTES),
            "stdin_port": ("DEALER", "ROUTER", SMALL_MESSAGE_BYTES),
            "hb_port": ("DEALER", "ROUTER", SMALL_MESSAGE_BYTES)}


def command(kernel_ip: str, grader_ip: str, ports: dict[str, int], *, cgroup: str, memory_mb: int) -> list[str]:
    """The relay's command line.

    Args:
        kernel_ip: the kernel's ipc address prefix (its sockets are ``<kernel_ip>-<port>``).
        grader_ip: the prefix of the addresses the relay binds for the grader.
        ports: the connection file's ports (``shell_port``, ``iopub_port``, ...).
        cgroup: the kernel's memory cgroup, which the relay joins ("" for none).
        memory_mb: the relay's address-space limit, in MiB (the kernel's memory limit).
    """
    import zmq

    config = {"kernel": kernel_ip, "grader": grader_ip, "ports": {key: int(ports[key]) for key in CHANNELS},
              "cgroup": cgroup, "memory_mb": int(memory_mb),
              "path": os.path.dirname(os.path.dirname(os.path.abspath(zmq.__file__)))}
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), json.dumps(config)]


# The kinds of message the relay refuses: over the channel's byte cap, over MAX_FRAMES frames, over
# MAX_JSON_VALUES values (what the learner is told of each: :func:`refusal_reason`).
REFUSALS = ("size", "frames", "values")


def memory_bound_per_slot() -> int:
    """The most memory, in bytes, the grader holds for what one kernel (one job slot) sends: on each
    channel :data:`QUEUED_MESSAGES` messages queued and one being received, each at most its cap
    (:data:`MAX_MESSAGE_BYTES` on shell and IOPub, :data:`SMALL_MESSAGE_BYTES` on control, stdin and
    the heartbeat), plus one message being read: its frames, its text once parsed and once passed on
    (each at most its size), and its parsed values (at most :data:`MAX_JSON_VALUES`, 128 bytes each)."""
    queued = (QUEUED_MESSAGES + 1) * (2 * MAX_MESSAGE_BYTES + 3 * SMALL_MESSAGE_BYTES)
    return queued + 3 * MAX_MESSAGE_BYTES + MAX_JSON_VALUES * 128


def parse_report(line: bytes) -> tuple[str, int]:
    """One line the relay wrote, as ``(kind, number)``: ``("charge", bytes)``, ``("lost", 0)``, or a
    refusal (one of :data:`REFUSALS`) with its size or count; ``("", 0)`` for anything else."""
    words = line.decode("ascii", "replace").split()
    if len(words) == 2 and words[0] == "lost":
        return "lost", 0
    if len(words) == 2 and words[0] == "charge" and words[1].isdigit():
        return "charge", int(words[1])
    if len(words) == 3 and words[0] == "refuse" and words[1] in REFUSALS and words[2].isdigit():
        return words[1], int(words[2])
    return "", 0


def refusal_reason(kind: str, number: int) -> str:
    """Why the kernel was stopped, for the learner, after the relay refused a message (``kind`` is one of
    :data:`REFUSALS`, ``number`` the message's size or count): see :func:`autograder.engine.stop_reasons.refused`."""
    from autograder.engine import stop_reasons

    return stop_reasons.refused(kind, number, cap_mib=MAX_MESSAGE_BYTES >> 20, max_frames=MAX_FRAMES,
                                max_values=MAX_JSON_VALUES)


async def follow(reports, budget, connection_lost) -> None:
    """Apply the relay's reports (an ``asyncio.StreamReader`` on its standard output) to the kernel's
    :class:`autograder.engine.runner.Budget` until the relay ends: dropped buffers charged, a refused
    message a reason to stop the kernel; ``connection_lost()`` is awaited when a connection broke."""
    async for line in reports:
        kind, number = parse_report(line)
        if kind == "charge":
            budget.spend(number, messages=0)
        elif kind == "lost":
            await connection_lost()
        elif kind:
            budget.refuse(refusal_reason(kind, number))


def deserialize(session, frames: list) -> dict:
    """A Jupyter message from its frames, parsed as little as the grader needs.

    Used in the grader, on what the relay passed on. Unlike ``Session.deserialize``, the header,
    parent header and metadata are refused above :data:`MAX_HEADER_BYTES` and never searched for
    dates (jupyter_client turns every ISO date string in them into a ``datetime``: seconds of the
    shared event loop for a header full of them), each part must be a JSON object, and buffers are
    dropped (the grader uses none).

    Raises:
        ValueError: a malformed, unsigned, wrongly signed or oversized message.
    """
    _, parts = session.feed_identities(frames, copy=False)
    if len(parts) < 5:
        raise ValueError("a malformed message: fewer than 5 frames after the delimiter")
    signature, *packed = (part.bytes for part in parts[:5])
    if any(len(part) > MAX_HEADER_BYTES for part in packed[:3]):
        raise ValueError(f"a message header larger than {MAX_HEADER_BYTES} bytes")
    if session.auth is not None and not hmac.compare_digest(signature, session.sign(packed)):
        raise ValueError("a message with a wrong signature")
    header, parent, metadata, content = (session.unpack(part) for part in packed)
    if not all(type(part) is dict for part in (header, parent, metadata, content)):
        raise ValueError("a malformed message: its parts are not JSON objects")
    if type(header.get("msg_id")) is not str or type(header.get("msg_type")) is not str:
        raise ValueError("a malformed message: its header has no message id or type")
    return {"header": header, "msg_id": header["msg_id"], "msg_type": header["msg_type"], "parent_header": parent,
            "metadata": metadata, "content": content, "buffers": []}


def checked(frames: list, cap: int) -> tuple[list, int, str | None]:
    """``(kept, dropped_bytes, refusal)`` for one message from the kernel.

    Args:
        frames: the message's frames (anything with ``len``), identities first.
        cap: the channel's largest message, in bytes.

    Returns:
        The frames to forward (at most :data:`KEPT_FRAMES`: up to the content, the buffers dropped),
        the bytes dropped, and a refusal (``"size BYTES"``, ``"frames COUNT"`` or ``"values COUNT"``)
        when the whole message must be dropped instead.
    """
    if len(frames) > MAX_FRAMES:
        return [], 0, f"frames {len(frames)}"
    size = sum(len(frame) for frame in frames)
    if size > cap:
        return [], 0, f"size {size}"
    end = KEPT_FRAMES
    for index, frame in enumerate(frames[:KEPT_FRAMES]):
        if len(frame) == len(DELIMITER) and bytes(frame) == DELIMITER:
            end = min(index + 6, KEPT_FRAMES)  # the delimiter, signature and the four signed parts
            values = sum(json_values(part) for part in frames[index + 2:end])
            if values > MAX_JSON_VALUES:
                return [], 0, f"values {values}"
            break
    return frames[:end], sum(len(frame) for frame in frames[end:]), None


def json_values(part) -> int:
    """How many values (keys included) the JSON text ``part`` holds; 0 if it is not JSON (the grader
    refuses it unread), more than :data:`MAX_JSON_VALUES` if it is nested too deeply to parse."""
    try:
        value = json.loads(bytes(part))
    except RecursionError:
        return MAX_JSON_VALUES + 1
    except ValueError:
        return 0
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if type(item) is dict:
            count += len(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return count


def _confine(cgroup: str, memory_mb: int) -> None:
    """Join the kernel's memory cgroup (where there is one) and limit this process's address space."""
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w", encoding="utf-8") as procs:
                procs.write(str(os.getpid()))
        except OSError as error:
            print(f"autograder relay: could not join the kernel's cgroup ({error})", file=sys.stderr, flush=True)
    size = memory_mb * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    except (ValueError, OSError):
        pass


def _report(line: str) -> None:
    os.write(1, line.encode() + b"\n")


def serve(config: dict) -> None:
    """Relay between the kernel and the grader until the grader closes this process's standard input."""
    _confine(config["cgroup"], config["memory_mb"])
    sys.path.insert(0, config["path"])
    import zmq

    context = zmq.Context()
    poller = zmq.Poller()
    routes = {}          # socket -> (socket it forwards to, cap for what comes from the kernel, or None)
    monitors = {}        # monitor socket -> channel name
    for key, (kernel_type, grader_type, cap) in CHANNELS.items():
        port = config["ports"][key]
        kernel_side = context.socket(getattr(zmq, kernel_type))
        kernel_side.setsockopt(zmq.MAXMSGSIZE, cap)
        kernel_side.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
        kernel_side.linger = 0
        if kernel_type == "SUB":
            kernel_side.setsockopt(zmq.SUBSCRIBE, b"")
        else:
            kernel_side.setsockopt(zmq.IDENTITY, IDENTITY)
        monitor = kernel_side.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        kernel_side.connect(f"ipc://{config['kernel']}-{port}")
        grader_side = context.socket(getattr(zmq, grader_type))
        grader_side.linger = 0
        grader_side.bind(f"ipc://{config['grader']}-{port}")
        routes[kernel_side] = (grader_side, cap)
        routes[grader_side] = (kernel_side, None)
        monitors[monitor] = key.removesuffix("_port")
        for sock in (kernel_side, grader_side, monitor):
            poller.register(sock, zmq.POLLIN)
    poller.register(0, zmq.POLLIN)
    while True:
        for ready, _ in poller.poll():
            if ready == 0:
                if not os.read(0, 4096):
                    os._exit(0)
            elif ready in monitors:
                ready.recv_multipart()
                _report(f"lost {monitors[ready]}")
            else:
                _forward(ready, *routes[ready])


def _forward(source, target, cap: int | None) -> None:
    """One message from ``source`` to ``target``; what comes from the kernel (``cap`` given) checked."""
    import zmq

    frames = source.recv_multipart(copy=False)
    if cap is not None:
        frames, dropped, refusal = checked(frames, cap)
        if refusal is not None:
            _report(f"refuse {refusal}")
            return
        if dropped:
            _report(f"charge {dropped}")
    try:
        target.send_multipart(frames, copy=False, flags=zmq.NOBLOCK)
    except zmq.Again:  # the receiver reads nothing; its queue is full: the message is dropped, as zmq would
        pass


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python relay.py CONFIG_JSON (started by the grader)", file=sys.stderr)
        sys.exit(2)
    serve(json.loads(sys.argv[1]))

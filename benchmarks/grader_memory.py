"""The trusted grader's peak memory with a hostile submission in the batch (issue 27: the grader's memory
is bounded whatever a submission holds).

Two measurements, each in a process of its own (``--part``), of the peak resident set (``VmHWM``) of
the grading process itself (the referees and kernels are other processes, under their own limits):

``batch``
    ``python -m autograder grade``'s function, ``--jobs 2``, on a batch of ``solutions/02-self-attention``
    copies: an honest one, a blank one (the released exercise) and, with ``--hostile``, one whose extra
    own cell holds ``--cell-chars`` characters of plain assignments (the source check parses every
    cell; :data:`autograder.engine.cells.MAX_CELL_CHARS` is the largest it accepts).
``channel``
    the grader's kernel channel (:class:`autograder.engine.runner._CountedChannel`) receiving one message of
    ``--frames`` frames of ``--frame-mib`` MiB that share one buffer, as a kernel could send it, under
    the default budget.

    python benchmarks/grader_memory.py --part batch               # honest and blank only
    python benchmarks/grader_memory.py --part batch --hostile     # and the 190,000-character cell
    python benchmarks/grader_memory.py --part channel --frames 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from autograder.core.files import REPO_ROOT

ASSIGNMENT = "02-self-attention"


def peak_mib() -> float:
    """This process's peak resident set so far, in MiB (Linux ``VmHWM``)."""
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def current_mib() -> float:
    """This process's resident set now, in MiB (Linux ``VmRSS``)."""
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def own_cell(chars: int) -> str:
    """Plain assignments, one a line, up to ``chars`` characters."""
    lines, size, index = [], 0, 0
    while size + len(f"v{index} = {index}\n") <= chars:
        lines.append(f"v{index} = {index}\n")
        size += len(lines[-1])
        index += 1
    return "".join(lines)


def batch(hostile: bool, cell_chars: int) -> dict:
    """Grade the batch; the grading process's peak before and after."""
    from autograder.engine.batch import grade

    solution = next((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))
    blank = REPO_ROOT / "exercises" / ASSIGNMENT / solution.name
    with tempfile.TemporaryDirectory(prefix="grader-memory-") as tmp:
        subs = Path(tmp) / "subs"
        for learner, source in (("honest", solution), ("blank", blank)):
            (subs / learner).mkdir(parents=True)
            shutil.copy(source, subs / learner / solution.name)
        if hostile:
            nb = json.loads(solution.read_text(encoding="utf-8"))
            nb["cells"].append({"cell_type": "code", "id": "big", "metadata": {}, "outputs": [],
                                "execution_count": None, "source": own_cell(cell_chars)})
            (subs / "hostile").mkdir(parents=True)
            (subs / "hostile" / solution.name).write_text(json.dumps(nb), encoding="utf-8")
        before = peak_mib()
        results = grade(subs, ASSIGNMENT, Path(tmp) / "out", jobs=2, progress=False)
    return {"part": "batch", "hostile": hostile, "cell_chars": cell_chars if hostile else 0,
            "peak_before_mib": round(before, 1), "peak_after_mib": round(peak_mib(), 1),
            "rows": {r.student: (r.status, r.score) for r in results}}


def channel(frames: int, frame_mib: int) -> dict:
    """One message of ``frames`` frames of ``frame_mib`` MiB sharing one buffer, read by the grader's channel."""
    import zmq
    import zmq.asyncio
    from jupyter_client.session import Session

    from autograder.core.limits import Limits
    from autograder.engine.runner import Budget, _CountedChannel

    address = f"ipc://{tempfile.mkdtemp()}/s"
    session = Session(key=b"secret")
    receiver = zmq.asyncio.Context.instance().socket(zmq.PULL)
    receiver.bind(address)
    sender = zmq.Context.instance().socket(zmq.PUSH)
    sender.connect(address)
    reader = _CountedChannel(receiver, session)
    reader.budget = Budget(Limits())
    shared = bytearray(frame_mib << 20)
    message = session.serialize(session.msg("stream", {"name": "stdout", "text": "hi"}))
    before, now = peak_mib(), current_mib()
    sender.send_multipart([*message, *[shared] * frames], copy=False)
    try:
        asyncio.run(reader.get_msg(timeout=30))
        outcome = "read"
    except OverflowError:
        outcome = "refused: over the budget"
    return {"part": "channel", "frames": frames, "frame_mib": frame_mib, "outcome": outcome,
            "rss_before_mib": round(now, 1),
            "peak_before_mib": round(before, 1), "peak_after_mib": round(peak_mib(), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("batch", "channel"), required=True)
    parser.add_argument("--hostile", action="store_true", help="add the submission with the big own cell")
    parser.add_argument("--cell-chars", type=int, default=190_000)
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--frame-mib", type=int, default=1)
    args = parser.parse_args()
    measured = batch(args.hostile, args.cell_chars) if args.part == "batch" else channel(args.frames, args.frame_mib)
    print(json.dumps(measured))


if __name__ == "__main__":
    main()

"""The learners' answers, kept next to their results for hand grading and the similarity report.

When a submission is graded, the source of each of its solution cells (code, and the written
answers graded by hand) is stored in ``<out>/answers/<learner>/<assignment>.json`` (the names made
safe as for ``results/``), with the fingerprint of the result it belongs to. ``review`` shows the
written answers from there, and the similarity report compares the code. A submission graded
again replaces its file; an answers file whose fingerprint is not its result's is stale and ignored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from autograder.core.results import GradeResult, result_path, write_atomically

ANSWERS_DIR = "answers"
YOURS, RELEASED = "yours", "released"


@dataclass(frozen=True)
class Answer:
    """One solution cell as graded.

    Attributes:
        kind: the plan's kind, ``"solution"`` or ``"manual"`` (graded by hand).
        cell_type: ``"code"`` or ``"markdown"``.
        source: what was graded: the learner's source, or the released stub.
        origin: ``"yours"`` (from the learner's notebook) or ``"released"`` (the cell was missing, so
            the blank released cell was graded).
    """

    kind: str
    cell_type: str
    source: str
    origin: str


def answer_digest(text: str | None) -> str:
    """A short digest of an answer, whitespace at its ends ignored (kept with a hand score to tell
    when the answer changed)."""
    return hashlib.sha256((text or "").strip().encode("utf-8")).hexdigest()[:12]


def is_blank(answer: str, released: str) -> bool:
    """Whether ``answer`` adds nothing to the released cell (the stub ``YOUR ANSWER HERE`` left as it was)."""
    from autograder.core.files import TEXT_STUB

    return answer.replace(TEXT_STUB, "").strip() == released.replace(TEXT_STUB, "").strip()


def answers_path(out_dir: Path | str, learner: str, assignment: str) -> Path:
    """``<out>/answers/<learner>/<assignment>.json``, named as the learner's result is."""
    result = result_path(Path(out_dir), learner, assignment)
    return Path(out_dir) / ANSWERS_DIR / result.relative_to(Path(out_dir) / "results")


def save_answers(out_dir: Path | str, learner: str, assignment: str, assemblies: dict, fingerprint: str) -> Path:
    """Store the solution and hand-graded cells of a graded submission.

    Args:
        out_dir: the output folder.
        learner: the learner key (:attr:`autograder.core.results.GradeResult.learner`).
        assignment: the assignment.
        assemblies: notebook name -> :class:`autograder.engine.plan.Assembly`, the learner's notebooks as graded.
        fingerprint: the result's fingerprint (:attr:`autograder.core.results.GradeResult.fingerprint`).
    """
    from autograder.engine.plan import MANUAL, SOLUTION

    cells = {}
    for name, assembly in assemblies.items():
        for cell in assembly.cells:
            if cell.kind in (SOLUTION, MANUAL):
                origin = YOURS if cell.origin == YOURS else RELEASED
                cells[f"{name}:{cell.key}"] = asdict(Answer(cell.kind, cell.cell_type, cell.source, origin))
    path = answers_path(out_dir, learner, assignment)
    data = {"learner": learner, "assignment": assignment, "fingerprint": fingerprint, "cells": cells}
    # ASCII JSON: a learner key from a file name that was not UTF-8 holds surrogate escapes, which
    # only \u escapes carry (and read back) exactly.
    write_atomically(path, json.dumps(data, indent=1).encode("utf-8"))
    return path


def load_answers(out_dir: Path | str, result: GradeResult) -> dict[str, Answer] | None:
    """The stored answers of ``result`` (cell key -> :class:`Answer`), or None when there are none
    or they belong to another grading of the submission."""
    try:
        data = json.loads(answers_path(out_dir, result.learner, result.assignment).read_text(encoding="utf-8"))
        if data.get("fingerprint") != result.fingerprint:
            return None
        return {key: Answer(**value) for key, value in data["cells"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None

"""Properties of how a learner's code computes, checked where grading runs (issue 27).

09's blockwise attention must never build the full (n_q x n_k) score matrix, and 07's
``teacher_forcing_batch`` must return new tensors, not ``targets`` itself. Both are checked in the
kernel, next to the learner's code, and only the verdict comes back: naive attention, the full matrix
cut into blocks afterwards and labels that are the input tensor earn nothing for their part when graded
through the command line, as their visible tests say in Jupyter; honest code (blockwise, also with K
transposed up front) earns full marks. The model solution itself is graded to full marks by the round trip
of tests/test_notebooks.py (the same notebook once rebuilt on the plan), so it is not graded again here:
every other part must earn what the solution's metadata gives it.
"""

import contextlib
import csv
import json
import re
import sys
import types
from pathlib import Path

import pytest
from conftest import run_once

from autograder.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

NAIVE = '''def blockwise_attention(q, k, v, block_size):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    p = torch.exp(s - s.amax(dim=-1, keepdim=True))
    return (p / p.sum(dim=-1, keepdim=True)) @ v
'''
CUT_AFTERWARDS = '''def blockwise_attention(q, k, v, block_size):
    full = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype)
    l = torch.zeros((*q.shape[:-1], 1), dtype=q.dtype)
    o = torch.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = full[..., start:start + block_size]
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l * torch.exp(m - m_new) + p.sum(dim=-1, keepdim=True)
        o = o * torch.exp(m - m_new) + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''
TRANSPOSED_UP_FRONT = '''def blockwise_attention(q, k, v, block_size):
    k_t = k.transpose(-2, -1) / math.sqrt(q.shape[-1])       # (..., d, n_k): K transposed once
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype)
    l = torch.zeros((*q.shape[:-1], 1), dtype=q.dtype)
    o = torch.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k_t[..., start:start + block_size]
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l * torch.exp(m - m_new) + p.sum(dim=-1, keepdim=True)
        o = o * torch.exp(m - m_new) + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''
INPUT_AS_LABELS = '''def teacher_forcing_batch(targets, bos_id, pad_id=None):
    decoder_inputs = torch.cat([torch.full_like(targets[:, :1], bos_id), targets[:, :-1]], dim=1)
    if pad_id is None:
        return decoder_inputs, targets
    return decoder_inputs, torch.where(targets == pad_id, -100, targets)
'''

EXERCISES = {  # assignment: (notebook, the part under test, its solution cell, {student: its code})
    "09-complexity": ("complexity.ipynb", "test_blockwise_attention", "blockwise_attention",
                      {"transposed": TRANSPOSED_UP_FRONT, "naive": NAIVE, "cut": CUT_AFTERWARDS}),
    "07-three-architectures": ("three_architectures.ipynb", "test_teacher_forcing_batch", "teacher_forcing_batch",
                               {"aliased": INPUT_AS_LABELS}),
}
DISHONEST = {"naive", "cut", "aliased"}


def _cells(assignment: str, folder: str) -> list[dict]:
    notebook = EXERCISES[assignment][0]
    return json.loads((ROOT / folder / assignment / notebook).read_text(encoding="utf-8"))["cells"]


def _full_marks(assignment: str) -> dict[str, float | None]:
    """Each graded cell's column in grades.csv and what the model solution earns there: its points, or
    ``None`` for a written answer, which waits for a human grader."""
    stem = Path(EXERCISES[assignment][0]).stem
    return {f"{stem}:{c['metadata']['nbgrader']['grade_id']}":
            None if c["metadata"]["nbgrader"].get("solution") else float(c["metadata"]["nbgrader"]["points"])
            for c in _cells(assignment, "solutions") if c["metadata"].get("nbgrader", {}).get("grade")}


def submission(assignment: str, code: str) -> str:
    """The released exercise with the solution's answers, the part under test replaced by ``code``."""
    notebook, _, cell_id, _ = EXERCISES[assignment]
    answers = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in _cells(assignment, "solutions")
               if c["metadata"].get("nbgrader", {}).get("solution")}
    answers[cell_id] = code
    nb = json.loads((ROOT / "exercises" / assignment / notebook).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers and cell["metadata"]["nbgrader"].get("solution") and cell["cell_type"] == "code":
            cell["source"] = answers[grade_id]
    return json.dumps(nb)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every student of both assignments graded in one batch (one grader, one set of job slots), as the
    command line grades a folder of ``<student>/<assignment>/<notebook>``: ``{"<assignment>/<student>":
    {column: points, or None where the cell is empty}}`` for the columns of that student's notebook."""
    def run(folder: Path) -> dict:
        subs, out = folder / "submissions", folder / "out"
        for assignment, (notebook, _, _, students) in EXERCISES.items():
            for student, code in students.items():
                (subs / student / assignment).mkdir(parents=True)
                (subs / student / assignment / notebook).write_text(submission(assignment, code), encoding="utf-8")
        main(["grade", str(subs), "--assignment", "all", "--out", str(out), "--jobs", "2", "--no-progress"])
        with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        return {f"{row['assignment']}/{row['student']}":
                {column: float(value) if value else None for column, value in row.items()
                 if column.startswith(Path(EXERCISES[row["assignment"]][0]).stem + ":")} for row in rows}

    return run_once(tmp_path_factory, "properties-where-graded", run)


@pytest.mark.parametrize("assignment, student", [(a, s) for a, (*_, students) in EXERCISES.items() for s in students])
def test_the_property_decides_the_part_when_graded(graded, assignment, student):
    notebook, part, _, _ = EXERCISES[assignment]
    column, full = f"{Path(notebook).stem}:{part}", _full_marks(assignment)
    earned = graded[f"{assignment}/{student}"]
    assert earned[column] == (0.0 if student in DISHONEST else full[column]), earned
    assert {k: v for k, v in earned.items() if k != column} == {k: v for k, v in full.items() if k != column}, (
        "the other parts earn what the model solution earns")


def _visible_test(assignment: str) -> str:
    _, part, _, _ = EXERCISES[assignment]
    source = next("".join(c["source"]) for c in _cells(assignment, "exercises")
                  if c["metadata"].get("nbgrader", {}).get("grade_id") == part)
    return source.split("### BEGIN HIDDEN TESTS")[0]


@pytest.mark.parametrize("assignment, code, message", [
    ("09-complexity", NAIVE, "full (n_q x n_k) = (6 x 20) score matrix"),
    ("09-complexity", CUT_AFTERWARDS, "full (n_q x n_k) = (6 x 20) score matrix"),
    ("09-complexity", TRANSPOSED_UP_FRONT, None),
    ("07-three-architectures", INPUT_AS_LABELS, "`labels` shares memory with `targets`"),
])
def test_the_visible_test_gives_the_same_verdict_next_to_the_learners_code(monkeypatch, assignment, code, message):
    namespace = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", namespace)
    exec("import math\nimport torch\n" + code, namespace.__dict__)
    expectation = pytest.raises(AssertionError, match=re.escape(message)) if message else contextlib.nullcontext()
    with expectation:
        exec(_visible_test(assignment), namespace.__dict__)

"""The similarity report: near-copies among graded cells, found after normalising names and comments.

A batch of learners of ``02-self-attention`` is stored as the grader stores it (results and answers),
with two honest learners who wrote genuinely different correct code (checked against torch), one who
copied the first with renamed variables and other comments, one who pasted the published solution
and one who pasted the course library's attention. The report must name the copies and leave the
honest pair alone, and it must never touch a score.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import random
import time

import pytest
import torch
import torch.nn as nn

from autograder.core.files import REPO_ROOT, read_notebook
from autograder.core.results import GradeResult, Status, load_results, result_path, write_atomically
from autograder.engine.answers import load_answers, save_answers
from autograder.engine.plan import assemble, load_plan
from autograder.instructor.similarity import (SOLUTION, THRESHOLD, build_report, chosen_names, fingerprint_work,
                                   load_library, normalised_tokens, similarity_report, winnow)

ASSIGNMENT = "02-self-attention"
NOTEBOOK = "self_attention"

# Two honest learners: each cell solved in a way of their own.
HONEST_A = {
    "stable_softmax": '''def stable_softmax(scores, dim=-1):
    # subtract the largest score so that exp never overflows
    largest = torch.max(scores, dim=dim, keepdim=True).values
    e = torch.exp(scores - largest)
    total = torch.sum(e, dim=dim, keepdim=True)
    return e / total
''',
    "attention": '''def attention(q, k, v, mask=None):
    d = q.size(-1)
    raw = torch.matmul(q, k.transpose(-1, -2))
    raw = raw / d ** 0.5
    if mask is not None:
        raw = raw.masked_fill(mask.logical_not(), -math.inf)
    probabilities = stable_softmax(raw, dim=-1)
    output = torch.matmul(probabilities, v)
    return output, probabilities
''',
    "self_attention_module": '''class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k):
        super().__init__()
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_k, bias=False)
        self.out_proj = nn.Linear(d_k, d_model, bias=False)

    def forward(self, x, mask=None):
        queries = self.q_proj(x)
        keys = self.k_proj(x)
        values = self.v_proj(x)
        mixed, attn = attention(queries, keys, values, mask)
        return self.out_proj(mixed), attn
''',
}
HONEST_B = {
    "stable_softmax": '''def stable_softmax(scores, dim=-1):
    """Shift by the maximum, then normalise."""
    moved = scores.movedim(dim, -1)
    peak = moved.amax(-1).unsqueeze(-1)
    weights = (moved - peak).exp()
    weights = weights / weights.sum(-1).unsqueeze(-1)
    return weights.movedim(-1, dim)
''',
    "attention": '''def attention(q, k, v, mask=None):
    scale = 1.0 / math.sqrt(k.shape[-1])
    logits = torch.einsum("...id,...jd->...ij", q * scale, k)
    if mask is not None:
        blocked = torch.full_like(logits, float("-inf"))
        logits = torch.where(mask, logits, blocked)
    w = stable_softmax(logits)
    return torch.einsum("...ij,...jd->...id", w, v), w
''',
    "self_attention_module": '''class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k):
        super().__init__()
        for name, (fan_in, fan_out) in {"q_proj": (d_model, d_k), "k_proj": (d_model, d_k),
                                        "v_proj": (d_model, d_k), "out_proj": (d_k, d_model)}.items():
            setattr(self, name, nn.Linear(fan_in, fan_out, bias=False))

    def forward(self, x, mask=None):
        projected = [layer(x) for layer in (self.q_proj, self.k_proj, self.v_proj)]
        result, weights = attention(*projected, mask=mask)
        return self.out_proj(result), weights
''',
}
# The first honest learner's work with every variable renamed, other comments, other spacing.
COPIER = {
    "stable_softmax": '''def stable_softmax(scores, dim=-1):
    # numerically safe: take away the max first
    m = torch.max(scores, dim=dim, keepdim=True).values   # row maxima
    ex = torch.exp(scores - m)
    s = torch.sum(ex, dim=dim, keepdim=True)

    return ex / s
''',
    "attention": '''def attention(q, k, v, mask=None):
    # my own attention
    size = q.size(-1)
    sc = torch.matmul(q, k.transpose(-1, -2))
    sc = sc / size ** 0.5
    if mask is not None:
        sc = sc.masked_fill(mask.logical_not(), -math.inf)   # hide
    p = stable_softmax(sc, dim=-1)
    out = torch.matmul(p, v)
    return out, p
''',
    "self_attention_module": HONEST_A["self_attention_module"].replace("queries", "qs").replace("keys", "ks")
                                                             .replace("mixed", "o").replace("attn", "a"),
}
# A learner who pasted the course library's attention into the attention cell.
LIBRARY_PASTER = {
    "attention": '''def attention(q, k, v, mask=None):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension, got {q.shape[-1]} and "
                         f"{k.shape[-1]}.")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions, got {k.shape[-2]} and "
                         f"{v.shape[-2]}.")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = stable_softmax(scores, dim=-1)
    if mask is not None:
        weights = torch.where(mask, weights, 0.0)
    out = weights @ v
    return out, weights
''',
}


def _solution_sources() -> dict[str, str]:
    nb = read_notebook(REPO_ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}


def store_graded(out, learner: str, sources: dict[str, str]) -> GradeResult:
    """Store ``learner``'s submission of 02 as the grader does: the released exercise with ``sources``
    typed into its solution cells, rebuilt on the plan; a graded result and its answers."""
    plan = load_plan(ASSIGNMENT, REPO_ROOT)
    nb = read_notebook(REPO_ROOT / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in sources:
            cell.source = sources[grade_id]
    assembly = assemble(plan.notebooks[NOTEBOOK], nb)
    result = GradeResult(learner, ASSIGNMENT, "graded", kind=Status.GRADED, score=5.0, max_score=15.0,
                         cells={f"{NOTEBOOK}:test_attention": 3.0}, cell_max_scores={f"{NOTEBOOK}:test_attention": 3.0},
                         fingerprint=f"fp-{learner}")
    write_atomically(result_path(out, learner, ASSIGNMENT), json.dumps(dataclasses.asdict(result)).encode())
    save_answers(out, learner, ASSIGNMENT, {NOTEBOOK: assembly}, result.fingerprint)
    return result


def _namespace(sources: dict[str, str]) -> dict:
    namespace = {"torch": torch, "nn": nn, "math": math}
    for source in sources.values():
        exec(compile(source, "<learner>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("learner", [HONEST_A, HONEST_B, COPIER])
def test_the_honest_and_the_copied_code_is_correct(learner):
    """The test's learners wrote working code (compared with torch), so the honest pair is a fair test."""
    ns = _namespace(learner)
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 6, 4), torch.randn(2, 6, 3)
    mask = torch.rand(5, 6) > 0.3
    mask[:, 0] = True
    torch.testing.assert_close(ns["stable_softmax"](q, dim=1), torch.softmax(q, dim=1))
    out, weights = ns["attention"](q, k, v, mask)
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, reference)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5))
    layer = ns["SelfAttention"](8, 4)
    assert sorted(name for name, _ in layer.named_children()) == ["k_proj", "out_proj", "q_proj", "v_proj"]
    x = torch.randn(3, 5, 8)
    y, _ = layer(x)
    expected = layer.out_proj(torch.nn.functional.scaled_dot_product_attention(
        layer.q_proj(x), layer.k_proj(x), layer.v_proj(x)))
    torch.testing.assert_close(y, expected)


def test_normalising_ignores_names_comments_docstrings_and_spacing():
    a = "def f(x, y):\n    '''doc'''\n    # sum\n    total = x + y  # add\n    return torch.relu(total)\n"
    b = "def g(first, second):\n\n    result = first+second\n    return torch.relu(result)\n"
    tokens = [t for t, _ in normalised_tokens(a, chosen_names([a]))]
    assert tokens == [t for t, _ in normalised_tokens(b, chosen_names([b]))]
    assert "torch" in tokens and "relu" in tokens, "names the learner did not choose stay"
    assert "doc" not in " ".join(tokens) and "S" not in tokens, "the docstring is dropped"


def test_winnowing_keeps_the_rightmost_minimum_of_every_window():
    # the example of Schleimer et al. (2003), figure 2: windows of 4 over these hashes
    hashes = [77, 74, 42, 17, 98, 50, 17, 98, 8, 88, 67, 39, 77, 74, 42, 17, 98]
    assert [hashes[i] for i in winnow(hashes, 4)] == [17, 17, 8, 39, 17]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("similarity")
    solution = _solution_sources()
    stored = {name: store_graded(out, name, sources) for name, sources in
              [("honest_a", HONEST_A), ("honest_b", HONEST_B), ("copier", COPIER),
               ("paster", solution), ("library_paster", LIBRARY_PASTER), ("blank", {})]}
    before = {p: p.read_bytes() for p in (out / "results").rglob("*.json")}
    report = similarity_report(out, root=REPO_ROOT)
    return out, report, stored, before


def _pairs(report, kind):
    return {(m.learner, m.other): m for m in report.matches if m.kind == kind}


def test_a_copy_with_renamed_variables_is_paired_with_its_source(batch):
    _, report, _, _ = batch
    pairs = _pairs(report, "learner")
    match = pairs.get(("copier", "honest_a"))
    assert match is not None, f"the copy was not reported: {pairs}"
    assert match.overlap >= 0.8 and {key for key, _ in match.cells} >= {
        f"{NOTEBOOK}:stable_softmax", f"{NOTEBOOK}:attention"}


def test_pasting_the_published_solution_is_reported(batch):
    _, report, _, _ = batch
    solution = _pairs(report, "solution")
    assert ("paster", SOLUTION) in solution and solution["paster", SOLUTION].overlap == 1.0
    assert {learner for learner, _ in solution} == {"paster"}, "only the paster matches the solution"


def test_pasting_the_course_library_is_reported(batch):
    _, report, _, _ = batch
    library = _pairs(report, "library")
    assert ("library_paster", "attention.scaled_dot_product_attention") in library, library
    assert {learner for learner, _ in library} == {"library_paster"}


def test_honest_different_solutions_are_not_paired(batch):
    _, report, _, _ = batch
    flagged = {frozenset((m.learner, m.other)) for m in report.matches}
    for honest in ("honest_a", "honest_b"):
        others = {next(iter(pair - {honest})) for pair in flagged if honest in pair}
        assert others <= {"copier"}, f"{honest} was paired with {others}"
    assert not any("blank" in pair for pair in flagged), "a blank notebook matches nothing"
    works = {w.owner: w for w in report.works[ASSIGNMENT].values()}
    a, b = works["honest_a"].keys(), works["honest_b"].keys()
    assert len(a & b) / len(a | b) < THRESHOLD / 2, "the honest pair is far below the threshold"


def test_the_report_files_are_written_and_no_score_changes(batch):
    out, report, stored, before = batch
    assert {p: p.read_bytes() for p in (out / "results").rglob("*.json")} == before
    assert [r.score for r in load_results(out)] == [5.0] * len(stored)
    rows = list(csv.DictReader(open(out / "similarity.csv", encoding="utf-8")))
    assert {(r["learner"], r["other"], r["kind"]) for r in rows} == {
        (m.learner, m.other, m.kind) for m in report.matches}
    page = (out / "similarity.html").read_text(encoding="utf-8")
    assert "copier" in page and "no score was changed" in page and "<mark>" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", ""), "self-contained, no scripts"


def test_answers_of_another_grading_are_not_used(tmp_path):
    result = store_graded(tmp_path, "alice", HONEST_A)
    assert load_answers(tmp_path, result) is not None
    assert load_answers(tmp_path, dataclasses.replace(result, fingerprint="regraded")) is None


def _variant(rng: random.Random, sources: dict[str, str]) -> dict[str, str]:
    """``sources`` with names renamed and comments added at random (a copier's disguise)."""
    out = {}
    for key, source in sources.items():
        for name in ("largest", "total", "raw", "probabilities", "output", "queries", "keys", "values"):
            source = source.replace(name, f"{name[:2]}{rng.randrange(1000)}")
        out[key] = "\n".join(line + (f"  # note {rng.randrange(99)}" if rng.random() < 0.3 else "")
                             for line in source.split("\n"))
    return out


def test_a_class_of_300_is_compared_through_the_index():
    """300 learners (FULL_CLASS=1; 60 otherwise): 8 copies of one learner and the rest their own
    combinations are compared in one pass, and every copy is found."""
    count = 300 if os.environ.get("FULL_CLASS") == "1" else 60
    rng = random.Random(0)
    templates = {}
    library = load_library(REPO_ROOT / "transformer_core")
    works = []
    for i in range(count):
        if i < 8:
            sources = _variant(rng, HONEST_A)
        else:
            base = rng.choice([HONEST_B, {k: v for k, v in HONEST_A.items() if k != "attention"}])
            sources = {k: v.replace("weights", f"w{i}") for k, v in base.items()}
        works.append(fingerprint_work(f"learner{i:03d}", {f"{NOTEBOOK}:{k}": v for k, v in sources.items()},
                                      templates))
    start = time.perf_counter()
    report = build_report({ASSIGNMENT: works}, {}, library)
    seconds = time.perf_counter() - start
    print(f"compared {count} learners in {seconds:.2f} s")
    pairs = {(m.learner, m.other) for m in report.matches if m.kind == "learner"}
    copies = [f"learner{i:03d}" for i in range(8)]
    assert {(a, b) for i, a in enumerate(copies) for b in copies[i + 1:]} <= pairs

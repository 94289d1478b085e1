"""Honest learners who write unusual but fair code, and three hostile ones, graded through the real
command line in one batch (issue 27, item 6).

Each honest style starts from a released exercise (English ``exercises/`` or Chinese ``zh/exercises/``),
fills every solution cell with the course's answer from ``solutions/`` and changes one part to a style a
name-matching source check used to punish (one learner per assignment writes all its styles in one
notebook, so that each assignment runs once or twice, not once per style): a helper method named like a
switched-off function, getattr / setattr loops over computed names on ``self``, ``model.train()`` in a train step, ``.decode()`` /
``.generate()`` methods of the learner's own objects, ``x.grad`` reads, a top-level comparison with the
built-in the part replaces (in the same cell or in an extra one), an extra helper cell with ``torch.cat``,
parameters named ``input`` / ``vars`` / ``compile``, the Chinese edition (one learner of the Chinese class
writes the styles of two assignments there; ``tests/test_notebooks.py`` grades every assignment's), a setup
cell pinned to an earlier release. Each must earn every automatic point with no flag. The hostile notebooks switch the
kernel's guard off through a scope-blind name or an attribute path, or reach a switched-off built-in
through a computed ``getattr``: each earns nothing for the part it attacks.
"""

import csv
import json
import time
from pathlib import Path

import pytest
from conftest import run_once

from autograder.__main__ import main
from autograder.engine.plan import TEST, load_plan

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

NOTEBOOKS = {path.parent.name: path.name for path in sorted(ROOT.glob("solutions/*/*.ipynb"))}


def _answers(assignment: str) -> dict[str, str]:
    nb = json.loads((ROOT / "solutions" / assignment / NOTEBOOKS[assignment]).read_text(encoding="utf-8"))
    return {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in nb["cells"]
            if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")}


def _cell(source: str, index: int) -> dict:
    return {"cell_type": "code", "id": f"mine-{index}", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}


def notebook(assignment: str, changes: dict[str, str] | None = None, *, edition: str = "exercises",
             extra: list[str] = (), before: dict[str, str] | None = None, pin: str | None = None,
             honest: bool = True) -> str:
    """The released exercise of ``edition`` with the solution's answers, ``changes`` replacing some of
    them; ``extra`` cells appended at the end, ``before`` cells (grade id -> source) put just before that
    graded cell; the setup cell's install line pinned to ``pin`` instead of ``@main``."""
    nb = json.loads((ROOT / edition / assignment / NOTEBOOKS[assignment]).read_text(encoding="utf-8"))
    answers = {**(_answers(assignment) if honest else {}), **(changes or {})}
    cells, index = [], 0
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        grade_id = meta.get("grade_id")
        if grade_id in (before or {}):
            cells.append(_cell(before[grade_id], index))
            index += 1
        if grade_id in answers and meta.get("solution") and cell["cell_type"] == "code":
            cell["source"] = answers[grade_id]
        source = "".join(cell["source"])
        if pin and cell["cell_type"] == "code" and "transformer-core @ git+" in source:
            assert "@main" in source
            cell["source"] = source.replace("@main", f"@{pin}")
        cells.append(cell)
    nb["cells"] = cells + [_cell(source, index + i) for i, source in enumerate(extra)]
    return json.dumps(nb, ensure_ascii=False)


def _replace(assignment: str, grade_id: str, old: str, new: str) -> str:
    source = _answers(assignment)[grade_id]
    assert old in source, (assignment, grade_id, old)
    return source.replace(old, new)


# --- the honest styles ---------------------------------------------------------------------------

SOFTMAX_METHOD = '''class _Ops:
    """My own little toolbox: the method's name says what it computes."""

    def softmax(self, scores, dim):
        shifted = scores - scores.amax(dim=dim, keepdim=True)
        exps = torch.exp(shifted)
        return exps / exps.sum(dim=dim, keepdim=True)


_ops = _Ops()


def stable_softmax(scores, dim=-1):
    return _ops.softmax(scores, dim)
'''

SELF_ATTENTION_LOOPS = '''class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k):
        super().__init__()
        for name in ("q", "k", "v"):
            setattr(self, f"{name}_proj", nn.Linear(d_model, d_k, bias=False))
        setattr(self, "out" + "_proj", nn.Linear(d_k, d_model, bias=False))

    def forward(self, x, mask=None):
        q, k, v = (getattr(self, f"{name}_proj")(x) for name in "qkv")
        out, weights = attention(q, k, v, mask=mask)
        return getattr(self, "out_proj")(out), weights
'''

SOFTMAX_CHECK = ("_x = torch.randn(3, 5)\n"
                 "assert torch.allclose(stable_softmax(_x), torch.softmax(_x, -1), atol=1e-6)\n")

PROJECT_INPUT = '''def project_qkv(input, w_q, w_k, w_v):
    vars = (w_q, w_k, w_v)
    compile = [input @ w for w in vars]
    return tuple(compile)
'''

MHA_LOOPS = '''    def forward(self, x, context=None, mask=None):
        source = {"q": x, "k": x if context is None else context, "v": x if context is None else context}
        q, k, v = (split_heads(getattr(self, f"{n}_proj")(source[n]), self.n_heads) for n in "qkv")
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return getattr(self, "out_proj")(merge_heads(weights @ v)), weights
'''

MHA_CHECK = '''_mine = MultiHeadAttention(8, 2)
_ref = nn.MultiheadAttention(8, 2, batch_first=True)
with torch.no_grad():
    _ref.in_proj_weight.copy_(torch.cat([_mine.q_proj.weight, _mine.k_proj.weight, _mine.v_proj.weight]))
    _ref.in_proj_bias.copy_(torch.cat([_mine.q_proj.bias, _mine.k_proj.bias, _mine.v_proj.bias]))
    _ref.out_proj.weight.copy_(_mine.out_proj.weight)
    _ref.out_proj.bias.copy_(_mine.out_proj.bias)
_x = torch.randn(2, 5, 8)
assert torch.allclose(_mine(_x)[0], _ref(_x, _x, _x)[0], atol=1e-5)
'''

SPLIT_INPUT = '''def split_heads(input, n_heads):
    batch, n_tokens, width = input.shape
    vars = (batch, n_tokens, n_heads, width // n_heads)
    return input.reshape(*vars).transpose(1, 2)
'''

LAYER_NORM_METHOD = '''class _Normaliser:
    def __init__(self, eps):
        self.eps = eps

    def layer_norm(self, x, gamma, beta):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * gamma + beta


def layer_norm(x, gamma, beta, eps=1e-5):
    return _Normaliser(eps).layer_norm(x, gamma, beta)
'''

FEED_FORWARD_LOOPS = '''class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.activation = activation
        for name, (n_in, n_out) in {"up": (d_model, d_ff), "down": (d_ff, d_model)}.items():
            setattr(self, f"{name}_proj", nn.Linear(n_in, n_out))

    def forward(self, x):
        h = getattr(self, "up_proj")(x)
        h = torch.relu(h) if self.activation == "relu" else gelu(h)
        return getattr(self, "down_proj")(h)
'''

GRAD_DEMO = '''# My own check that gradients shrink over time: read x.grad after a backward pass.
_x = torch.randn(1, 6, 3, requires_grad=True)
_W_ih, _W_hh = torch.randn(4, 3) * 0.5, torch.randn(4, 4) * 0.3
_b = torch.zeros(4)
_, _h = rnn_forward(_x, _W_ih, _W_hh, _b, _b)
_h.sum().backward()
print("gradient norm per step:", _x.grad.norm(dim=-1))
assert _x.grad is not None and _x.grad.shape == _x.shape
'''

MASKED_COMPILE = '''def masked_attention(q, k, v, mask=None):
    compile = scaled_scores(q, k)
    if mask is None:
        return torch.softmax(compile, dim=-1) @ v, torch.softmax(compile, dim=-1)
    vars = torch.softmax(torch.where(mask, compile, float("-inf")), dim=-1)
    input = torch.where(mask, vars, 0.0)
    return input @ v, input
'''

ROPE_METHOD_06 = '''class _Rotary:
    def __init__(self, base):
        self.base = base

    def apply_rope(self, x, positions):
        d = x.shape[-1]
        theta = self.base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
        angles = positions.to(device=x.device, dtype=torch.float64)[:, None] * theta[None, :]
        cos, sin = torch.cos(angles), torch.sin(angles)
        even, odd = x[..., 0::2].double(), x[..., 1::2].double()
        out = torch.empty(x.shape, dtype=torch.float64, device=x.device)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out.to(x.dtype)


def rope(x, positions, base=10000.0):
    return _Rotary(base).apply_rope(x, positions)
'''

DECODER_LOOPS = '''class DecoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, norm_first=False, activation="relu", eps=1e-5):
        super().__init__()
        self.norm_first = norm_first
        for name in ("self_attn", "cross_attn"):
            setattr(self, name, MultiHeadAttention(d_model, n_heads))
            setattr(self, f"{name}_norm", LayerNorm(d_model, eps))
        self.ffn = FeedForward(d_model, d_ff, activation)
        self.ffn_norm = LayerNorm(d_model, eps)

    def _sublayer(self, name, x, fn):
        norm = getattr(self, f"{name}_norm")
        return x + fn(norm(x)) if self.norm_first else norm(x + fn(x))

    def forward(self, x, memory, memory_mask=None):
        causal = causal_mask(x.shape[1], device=x.device)
        x = self._sublayer("self_attn", x, lambda h: getattr(self, "self_attn")(h, mask=causal)[0])
        x = self._sublayer("cross_attn", x, lambda h: self.cross_attn(h, memory, mask=memory_mask)[0])
        return self._sublayer("ffn", x, self.ffn)
'''

BEAM_DECODE = '''class _Vocab:
    """Turns token ids into a readable string for my debugging."""

    def decode(self, ids):
        return " ".join(f"<{i}>" for i in ids)


_vocab = _Vocab()


def beam_search(next_log_probs, prompt, beam_size, n_steps):
    beams = [(0.0, tuple(int(t) for t in prompt))]
    for _ in range(n_steps):
        candidates = []
        for score, sequence in beams:
            log_probs = next_log_probs(sequence)
            for token, lp in enumerate(log_probs.tolist()):
                candidates.append((score + lp, sequence + (token,)))
        beams = sorted(candidates, key=lambda c: c[0], reverse=True)[:beam_size]
    score, sequence = beams[0]
    _label = _vocab.decode(sequence).encode("utf-8").decode("utf-8")
    return list(sequence[len(prompt):]), float(score)
'''

TOP_K_CHECK = ("\n_p = torch.softmax(torch.randn(4, 9), -1)\n"
               "assert torch.equal(top_k_probs(_p, 3) > 0, "
               "torch.zeros_like(_p).scatter(-1, torch.topk(_p, 3).indices, 1.0) > 0)\n")

CAT_HELPER = '''def merge_head_outputs(out):
    """(B, H, T, hd) -> (B, T, H * hd): the heads side by side."""
    return torch.cat(out.unbind(1), dim=-1)
'''

ONLINE_INPUT = '''def online_softmax(input, block_size):
    n = input.shape[-1]
    vars = dict(dtype=input.dtype, device=input.device)
    m = torch.full(input.shape[:-1], float("-inf"), **vars)
    l = torch.zeros(input.shape[:-1], **vars)
    maxima, sums = [], []
    for start in range(0, n, block_size):
        block = input[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)
        m = m_new
        maxima.append(m)
        sums.append(l)
    compile = torch.exp(input - m[..., None]) / l[..., None]
    return compile, torch.stack(maxima, dim=-1), torch.stack(sums, dim=-1)
'''

# Exercise 10's checkpoint under other keys, nested, deep-copied, with the step as a tensor; N counted module by
# module; a synchronize() after every timed step; a while loop, a tuple of losses and a scatter plot.
CHECKPOINT_NESTED = '''def save_checkpoint(model, optimizer, step, generator):
    import copy
    return {"weights": copy.deepcopy(model.state_dict()), "opt": copy.deepcopy(optimizer.state_dict()),
            "meta": {"step": torch.tensor(step), "rng": generator.get_state().clone()}}


def load_checkpoint(checkpoint, model, optimizer, generator):
    model.load_state_dict(checkpoint["weights"])
    optimizer.load_state_dict(checkpoint["opt"])
    generator.set_state(checkpoint["meta"]["rng"])
    return int(checkpoint["meta"]["step"].item())
'''

MFU_EVERY_STEP_SYNCED = '''import time


def matmul_weights(model):
    total = 0
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            total += module.weight.shape[0] * module.weight.shape[1]
    return total


def measure_mfu(model, train_one_step, tokens_per_step, context, peak_flops, *, warmup_steps=2, measured_steps=5,
                clock=time.perf_counter, synchronize=None):
    for _ in range(warmup_steps):
        train_one_step()
    if synchronize:
        synchronize()
    t0 = clock()
    for _ in range(measured_steps):
        train_one_step()
        if synchronize is not None:
            synchronize()
    t1 = clock()
    tps = tokens_per_step * measured_steps / (t1 - t0)
    L, d = len(model.layers), model.config.d_model
    flops = tps * (6 * matmul_weights(model) + 12 * L * context * d)
    return tps, flops, flops / peak_flops
'''

SWEEP_SCATTER = '''def final_loss(lr, n_steps, seed):
    torch.manual_seed(seed)
    net = DecoderOnlyLM(SWEEP_CONFIG)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    step = 0
    while step < n_steps:
        xb, yb = sweep_batch(gen)
        opt.zero_grad(set_to_none=True)
        loss = net(xb, yb)[1]
        loss.backward()
        opt.step()
        step += 1
    return float(sweep_val_loss(net))


def lr_sweep(lrs, n_steps, seed=0):
    losses = tuple(final_loss(lr, n_steps, seed) for lr in lrs)
    best, best_loss = None, math.inf
    for lr, loss in zip(lrs, losses):
        if math.isfinite(loss) and loss < best_loss:
            best, best_loss = lr, loss
    return losses, best


def plot_lr_sweep(lrs, losses):
    plt.figure()
    plt.scatter(lrs, losses)
    plt.xscale("log")
    plt.xlabel("lr")
    plt.ylabel("final loss")
    return plt.gca()
'''

GENERATE_CALL = '''_demo = GPT(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=1).eval()
_out = _demo.generate(torch.zeros(1, 2, dtype=torch.long), 3, temperature=0)
assert _out.shape == (1, 5)
'''


def _styles() -> dict[str, tuple[str, dict]]:
    """style -> (assignment, what :func:`notebook` changes for it: ``changes``, ``extra``, ``before``, ``pin``,
    and ``append``: grade id -> code added at the end of that cell, after the answer or another style's
    change of it)."""
    # The assignments these styles change, by number, from the folders: a later assignment adds none.
    numbered = {int(name.split("-")[0]): name for name in NOTEBOOKS}
    a01, a02, a03, a04, a05, a06, a07, a08, a09, a10, a11 = (numbered[n] for n in range(1, 12))
    return {
        "v01-grad-read": (a01, {"extra": [GRAD_DEMO]}),
        "v01-grad-same-cell": (a01, {"append": {"rnn_forward": "\n\n" + GRAD_DEMO}}),
        "v02-softmax-method": (a02, {"changes": {"stable_softmax": SOFTMAX_METHOD}}),
        "v02-setattr-loops": (a02, {"changes": {"self_attention_module": SELF_ATTENTION_LOOPS}}),
        "v02-check-same-cell": (a02, {"append": {"stable_softmax": "\n\n" + SOFTMAX_CHECK}}),
        "v02-check-extra-cell": (a02, {"extra": [SOFTMAX_CHECK]}),
        "v02-input-vars-compile": (a02, {"changes": {"project_qkv": PROJECT_INPUT}}),
        "v02-pinned-release": (a02, {"pin": "v2026.1.0"}),
        "v03-input-vars-compile": (a03, {"changes": {"masked_attention": MASKED_COMPILE}}),
        "v04-getattr-forward": (a04, {"changes": {"multi_head_attention":
            _answers(a04)["multi_head_attention"].split("    def forward")[0] + MHA_LOOPS}}),
        "v04-check-same-cell": (a04, {"append": {"multi_head_attention": "\n\n" + MHA_CHECK}}),
        "v04-check-extra-cell": (a04, {"extra": [MHA_CHECK]}),
        "v04-input-vars": (a04, {"changes": {"split_heads": SPLIT_INPUT}}),
        "v05-layer-norm-method": (a05, {"changes": {"layer_norm": LAYER_NORM_METHOD}}),
        "v05-setattr-loops": (a05, {"changes": {"feed_forward": FEED_FORWARD_LOOPS}}),
        "v06-apply-rope-method": (a06, {"changes": {"rope": ROPE_METHOD_06}}),
        "v06-pinned-release": (a06, {"pin": "v2026.1.0"}),
        "v07-setattr-loops": (a07, {"changes": {"decoder_block": DECODER_LOOPS}}),
        "v07-decode-method": (a07, {"changes": {"beam_search": BEAM_DECODE}}),
        "v07-check-same-cell": (a07, {"append": {"top_k_probs": TOP_K_CHECK}}),
        "v07-check-extra-cell": (a07, {"extra": [TOP_K_CHECK]}),
        "v08-cat-helper-cell": (a08, {"changes": {"cached_attention_step": _replace(
            a08, "cached_attention_step", "return out.transpose(1, 2).reshape(batch, n_new, d_model) @ w_o",
            "return merge_head_outputs(out) @ w_o")}, "before": {"cached_attention_step": CAT_HELPER}}),
        "v09-input-vars-compile": (a09, {"changes": {"online_softmax": ONLINE_INPUT}}),
        "v10-train-eval-modes": (a10, {"changes": {"train_step": _replace(
            a10, "train_step", "    _, loss = model(x, y)\n",
            "    was_training = model.training\n    model.train()\n    _, loss = model(x, y)\n").replace(
            "    return loss.item()", "    if not was_training:\n        model.eval()\n    return loss.item()")}}),
        "v10-pinned-release": (a10, {"pin": "v2026.1.0"}),
        "v10-checkpoint-mfu-sweep-styles": (a10, {"changes": {"save_checkpoint": CHECKPOINT_NESTED,
                                                             "matmul_weights": MFU_EVERY_STEP_SYNCED,
                                                             "final_loss": SWEEP_SCATTER}}),
        "v11-apply-rope-method": (a11, {"changes": {"attention": _replace(
            a11, "attention", "            q, k = rope(q, positions), rope(k, positions)\n",
            "            q, k = self.apply_rope(q, positions), self.apply_rope(k, positions)\n")
            + "\n    def apply_rope(self, t, positions):\n        return rope(t, positions)\n"}}),
        "v11-generate-method": (a11, {"changes": {"gpt": _answers(a11)["gpt"]
            + "\n    def generate(self, idx, max_new_tokens, **options):\n"
              "        return generate(self, idx, max_new_tokens, **options)\n"}, "extra": [GENERATE_CALL]}),
    }


# The assignments whose styles the learner of the Chinese class writes, in the Chinese edition.
CHINESE = ("01-rnn-limits", "02-self-attention")


def _learner(style: str) -> str:
    """The learner who hands in ``style``: one learner per assignment writes all of that assignment's
    styles in one notebook (each style is its own cell, its own addition to a cell, or its own part of the
    setup), so that a notebook is graded once and a style costs no full run of its assignment of its own
    (issue 33); the learner of the Chinese class writes those of :data:`CHINESE`, one notebook each."""
    assignment = _styles()[style][0]
    return f"zh-learner/{assignment}" if assignment in CHINESE else f"{style.split('-')[0]}-styles"


def _merged(styles: list[str]) -> tuple[str, str]:
    """(assignment, notebook text) for one learner who writes every style of ``styles`` (one assignment,
    no graded cell replaced twice; a cell's additions come after its answer or its replacement)."""
    specs = [_styles()[style] for style in styles]
    assignment = specs[0][0]
    changes, append, extra, before, pin = {}, {}, [], {}, None
    for style, (other, spec) in zip(styles, specs):
        assert other == assignment and not set(spec.get("changes", {})) & set(changes), style
        changes.update(spec.get("changes", {}))
        for grade_id, code in spec.get("append", {}).items():
            append[grade_id] = append.get(grade_id, "") + code
        extra += spec.get("extra", [])
        before.update(spec.get("before", {}))
        pin = spec.get("pin", pin)
    answers = _answers(assignment)
    changes.update({grade_id: changes.get(grade_id, answers[grade_id]) + code for grade_id, code in append.items()})
    edition = "zh/exercises" if assignment in CHINESE else "exercises"
    return assignment, notebook(assignment, changes, edition=edition, extra=extra, before=before, pin=pin)


def _honest() -> dict[str, tuple[str, str]]:
    """learner -> (assignment, notebook text): the honest styles, merged per learner. The learner of the
    Chinese class types the solution's answers (English docstrings and all) into the parts no style
    changes; every assignment's Chinese edition with the translated answers is graded by
    tests/test_notebooks.py's round trip, which also asks for no flag."""
    learners: dict[str, list[str]] = {}
    for style in _styles():
        learners.setdefault(_learner(style), []).append(style)
    return {learner: _merged(styles) for learner, styles in learners.items()}


# --- the hostile ones (02): each attacks stable_softmax ------------------------------------------

NEVER_CALLED_EXEC = '''def _never_called():
    exec = print
    exec("not the builtin here")


exec("import course_runtime.testing as _t\\n_t.forbid_shortcuts = lambda *a, **k: __import__('contextlib').nullcontext()")


def stable_softmax(scores, dim=-1):
    return torch.softmax(scores, dim=dim)
'''

SYS_MODULES = '''import contextlib

torch.sys.modules["course_runtime.testing"].forbid_shortcuts = lambda *a, **k: contextlib.nullcontext()


def stable_softmax(scores, dim=-1):
    return torch.softmax(scores, dim=dim)
'''

COMPUTED_GETATTR = '''def stable_softmax(scores, dim=-1):
    return getattr(torch, "soft" + "max")(scores, dim)
'''

HOSTILE = {
    "h02-never-called-exec": NEVER_CALLED_EXEC,
    "h02-torch-sys-modules": SYS_MODULES,
    "h02-computed-getattr": COMPUTED_GETATTR,
}
A02 = "02-self-attention"


def _submissions() -> dict[str, tuple[str, str]]:
    return {**_honest(), **{student: (A02, notebook(A02, {"stable_softmax": source}))
                            for student, source in HOSTILE.items()}}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    def run(folder: Path) -> dict:
        subs, out = folder / "submissions", folder / "out"
        for student, (assignment, text) in _submissions().items():
            learner, _, _ = student.partition("/")
            target = subs / learner / assignment / NOTEBOOKS[assignment]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        started = time.monotonic()
        status = main(["grade", str(subs), "--assignment", "all", "--out", str(out), "--jobs", "2",
                       "--no-progress"])
        seconds = time.monotonic() - started
        with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
            rows = {f"{r['student']}|{r['assignment']}": r for r in csv.DictReader(handle)}
        pages = {}
        for result in (out / "results").rglob("*.json"):
            record = json.loads(result.read_text(encoding="utf-8"))
            pages[f"{record['student']}|{record.get('assignment')}"] = "".join(
                (out / page).read_text(encoding="utf-8") for page in record.get("feedback", []))
        return {"status": status, "rows": rows, "pages": pages, "seconds": seconds, "out": str(out)}

    return run_once(tmp_path_factory, "honest-variants", run)


def automatic_points(assignment: str) -> dict[str, float]:
    """Each autograded test cell's column and what the solution earns on it (all its points)."""
    plan = load_plan(assignment, ROOT)
    return {f"{nb.name}:{cell.key}": cell.points for nb in plan.notebooks.values() for cell in nb.cells
            if cell.kind == TEST}


def _row(graded, student: str, assignment: str) -> dict:
    key = f"{student.partition('/')[0]}|{assignment}"
    assert key in graded["rows"], sorted(graded["rows"])
    return graded["rows"][key]


def _lost(graded, student, assignment) -> dict:
    row = _row(graded, student, assignment)
    return {column: (row[column], full) for column, full in automatic_points(assignment).items()
            if float(row[column] or 0) != full}


HONEST = sorted(_styles())


@pytest.mark.parametrize("style", HONEST)
def test_honest_variant_earns_every_automatic_point_with_no_flag(graded, style):
    """The notebook holding ``style`` (with the other styles of its learner) loses no automatic point and
    gets no flag."""
    student = _learner(style)
    assignment = _styles()[style][0]
    row = _row(graded, student, assignment)
    page = graded["pages"].get(f"{student.partition('/')[0]}|{assignment}", "")
    assert row["status"] == "graded", row["status"]
    assert not _lost(graded, student, assignment), (_lost(graded, student, assignment), page[-3000:])
    assert row["flags"] == "", row["flags"]


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_hostile_notebook_earns_nothing_for_the_part_it_attacks(graded, student):
    row = _row(graded, student, A02)
    assert float(row["self_attention:test_stable_softmax"]) == 0, row


def test_the_batch_has_every_variant(graded):
    assert len(HONEST) >= 28
    handed_in = set(graded["rows"])
    assert {f"{_learner(style).partition('/')[0]}|{_styles()[style][0]}" for style in _styles()} <= handed_in, \
        "every style is in a graded notebook"
    assert {f"zh-learner|{assignment}" for assignment in CHINESE} <= handed_in, "the Chinese edition is graded"
    print(f"batch of {len(graded['rows'])} rows graded in {graded['seconds']:.0f} s")


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_hostile_notebook_is_flagged_for_the_instructor(graded, student):
    assert _row(graded, student, A02)["flags"], "the instructor is told why the part earned nothing"


def test_a_built_in_refused_at_run_time_is_flagged_with_its_part(graded):
    flags = _row(graded, "h02-computed-getattr", A02)["flags"]
    assert "self_attention: test_stable_softmax: a switched-off built-in ran during its tests (one of torch.softmax" \
        in flags, flags

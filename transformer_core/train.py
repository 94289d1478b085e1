"""Training a decoder-only language model: presets, the learning-rate schedule, the loop, checkpoints.

The loop (:func:`train`) is the one the capstone chapter teaches, written to be fast enough to
matter:

* mixed precision with ``torch.autocast`` (bf16 where the GPU supports it, fp16 with a
  ``GradScaler`` on older GPUs such as a T4, float32 on CPU);
* AdamW (the fused kernel when PyTorch has one for the device), weight decay on matrices only;
* linear warm-up then cosine decay (:func:`lr_at`), gradient clipping;
* evaluation under ``torch.no_grad`` on fixed batches every ``eval_interval`` steps, so the curve
  compares like with like;
* no host-device synchronisation in the inner loop: per-step losses are written into a device
  tensor and read once at each evaluation;
* checkpoints with model, optimizer, both configs and the tokenizer, written atomically;
* a tqdm progress bar, tokens/s and model FLOPs utilisation (MFU) against the device's peak.

Example:
    >>> from course_runtime import data
    >>> from transformer_core import train
    >>> text = data.offline_corpus()
    >>> tok = data.CharTokenizer.from_text(text)
    >>> train_ids, val_ids = data.train_val_split(tok.encode(text, as_tensor=True))
    >>> config = train.PRESETS["tiny"]
    >>> model = train.build_model(config, tok.vocab_size)
    >>> result = train.train(model, train_ids, val_ids, config, progress=False)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import pathlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from transformer_core import complexity, distributed
from course_runtime.data import CharTokenizer, get_batch
from course_runtime.device import autocast_dtype, cpu_has_native_bfloat16, peak_flops, pick_device

__all__ = [
    "TrainConfig",
    "PRESETS",
    "RESUME_FILE",
    "ResumeError",
    "TrainResult",
    "Checkpoint",
    "lr_at",
    "resolve_amp_dtype",
    "build_model",
    "configure_optimizer",
    "apply_gradients",
    "evaluate",
    "evaluate_split",
    "sequential_batches",
    "train",
    "save_checkpoint",
    "load_checkpoint",
]

BatchFn = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]

# The largest seed: the batch streams are seeded with seed + slot, and PyTorch's generators take
# seeds below 2**64.
MAX_SEED = 2**63 - 1


@dataclass
class TrainConfig:
    """Everything one training run needs: the model's size and the optimisation recipe.

    Model (a GPT-style decoder-only LM, see :func:`build_model`):
        n_layers, n_heads, d_model: depth, attention heads, width.
        d_ff: feed-forward width; ``None`` means ``4 * d_model``.
        block_size: context length ``T`` of training windows (also the model's ``max_len``).
        dropout: dropout probability inside the model.
        activation, norm_first, position, tie_weights: passed to ``TransformerConfig``
            (GPT-2 style defaults: GELU, Pre-LN, learned positions, tied input/output embeddings).
        model_options: further ``TransformerConfig`` fields, e.g. ``{"bias": False}``.

    Optimisation:
        batch_size: sequences per optimizer step (per micro-batch with ``grad_accum_steps > 1``).
        grad_accum_steps: micro-batches whose gradients are summed before each step.
        max_iters: optimizer steps.
        learning_rate, min_lr, warmup_iters, lr_decay_iters: the schedule of :func:`lr_at`
            (``lr_decay_iters=None`` means ``max_iters``).
        weight_decay, beta1, beta2: AdamW.
        grad_clip: clip the global gradient norm to this value (0 turns clipping off).

    Evaluation, precision, bookkeeping:
        eval_interval: evaluate every this many steps (and after the last one).
        eval_iters: batches per split in each evaluation.
        dtype: ``"auto"`` (``autocast_dtype(device)``), ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        compile: wrap the model in ``torch.compile`` (GPU; the first steps are slow while it compiles).
        num_threads: CPU threads for PyTorch (``None`` leaves PyTorch's default: one per core;
            ``"auto"`` uses the cores other processes leave idle, at least one, measured at the start
            and again at every evaluation, see :class:`_CpuThreads`).
        seed: seeds batch sampling, ``0 .. 2**63 - 1`` (seed the model's initialisation yourself, see
            :func:`build_model`).
        out_dir: where to write ``ckpt.pt`` (the best validation loss so far); ``None`` writes nothing.
    """

    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    d_ff: int | None = None
    block_size: int = 64
    dropout: float = 0.0
    activation: str = "gelu"
    norm_first: bool = True
    position: str = "learned"
    tie_weights: bool = True
    model_options: dict = field(default_factory=dict)
    batch_size: int = 12
    grad_accum_steps: int = 1
    max_iters: int = 2000
    learning_rate: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 100
    lr_decay_iters: int | None = None
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_interval: int = 250
    eval_iters: int = 20
    dtype: str = "auto"
    compile: bool = False
    num_threads: int | str | None = None
    seed: int = 1337
    out_dir: str | None = None

    def __post_init__(self):
        positive = ["n_layers", "n_heads", "d_model", "block_size", "batch_size", "grad_accum_steps",
                    "max_iters", "eval_interval", "eval_iters"]
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainConfig.{name} must be an integer >= 1, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"TrainConfig: d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"TrainConfig.dropout must be in [0, 1), got {self.dropout}")
        if not 0 <= self.min_lr <= self.learning_rate:
            raise ValueError(f"TrainConfig.min_lr must satisfy 0 <= min_lr <= learning_rate (the cosine decays "
                             f"from learning_rate down to min_lr), got min_lr={self.min_lr}, "
                             f"learning_rate={self.learning_rate}")
        if isinstance(self.warmup_iters, bool) or not isinstance(self.warmup_iters, int) or self.warmup_iters < 0:
            raise ValueError(f"TrainConfig.warmup_iters must be an integer >= 0 (0 = no warm-up), "
                             f"got {self.warmup_iters!r}")
        if self.lr_decay_iters is not None and (isinstance(self.lr_decay_iters, bool)
                                                or not isinstance(self.lr_decay_iters, int) or self.lr_decay_iters < 0):
            raise ValueError(f"TrainConfig.lr_decay_iters must be None (= max_iters) or an integer >= 0 (the step "
                             f"where the decay reaches min_lr), got {self.lr_decay_iters!r}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"TrainConfig.dtype must be 'auto', 'float32', 'bfloat16' or 'float16', "
                             f"got {self.dtype!r}")
        if self.grad_clip < 0:
            raise ValueError(f"TrainConfig.grad_clip must be >= 0 (0 = off), got {self.grad_clip}")
        if self.num_threads is not None and self.num_threads != "auto" and (
                isinstance(self.num_threads, bool) or not isinstance(self.num_threads, int) or self.num_threads < 1):
            raise ValueError(f"TrainConfig.num_threads must be None, 'auto' or an integer >= 1, "
                             f"got {self.num_threads!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"TrainConfig.seed must be an integer from 0 to 2**63 - 1, got {self.seed!r}")

    def replace(self, **changes) -> "TrainConfig":
        """A copy with some fields changed, e.g. ``PRESETS["tiny"].replace(max_iters=10)``."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"TrainConfig has no field(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

    def model_config(self, vocab_size: int):
        """The ``TransformerConfig`` of the decoder-only LM this recipe trains."""
        from transformer_core.models import TransformerConfig

        return TransformerConfig(
            vocab_size=vocab_size, d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers,
            d_ff=self.d_ff or 4 * self.d_model, max_len=self.block_size, dropout=self.dropout,
            activation=self.activation, norm_first=self.norm_first, position=self.position,
            tie_weights=self.tie_weights, **self.model_options)


PRESETS: dict[str, TrainConfig] = {
    # nanoGPT's CPU recipe for Shakespeare (characters): about 0.8M parameters, 2000 steps. A CPU with
    # bfloat16 instructions runs a step about 20% faster under bfloat16 autocast, at the same loss
    # (benchmarks/results/training.md); elsewhere bfloat16 is emulated and slower, so float32.
    "shakespeare-cpu": TrainConfig(
        n_layers=4, n_heads=4, d_model=128, block_size=64, dropout=0.0, batch_size=12, max_iters=2000,
        learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, eval_interval=250, eval_iters=20,
        grad_clip=1.0, dtype="bfloat16" if cpu_has_native_bfloat16() else "float32",
        num_threads="auto", model_options={"bias": False}),
    # The capstone's GPU run, nanoGPT's shakespeare_char recipe: 10.75M parameters (nanoGPT's
    # "10.65M" leaves out the position table), no biases, bf16/fp16 autocast, fused attention.
    "shakespeare-gpu": TrainConfig(
        n_layers=6, n_heads=6, d_model=384, block_size=256, dropout=0.2, batch_size=64, max_iters=5000,
        learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, eval_interval=250, eval_iters=200,
        grad_clip=1.0, dtype="auto", compile=False, model_options={"bias": False}),
    # Seconds on a CPU: for tests and smoke runs.
    "tiny": TrainConfig(
        n_layers=2, n_heads=2, d_model=32, block_size=32, dropout=0.0, batch_size=8, max_iters=60,
        learning_rate=3e-3, min_lr=3e-4, warmup_iters=5, eval_interval=20, eval_iters=2,
        grad_clip=1.0, dtype="float32"),
}


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate at ``step`` (counted from 0): linear warm-up, then cosine decay, then flat.

    * ``step < warmup_steps``: ``max_lr * (step + 1) / warmup_steps`` (never 0, reaches ``max_lr``
      at the last warm-up step);
    * ``warmup_steps <= step < total_steps``: with ``r = (step - warmup_steps) / (total_steps - warmup_steps)``,
      ``min_lr + (max_lr - min_lr) * (1 + cos(pi * r)) / 2`` (``max_lr`` at ``r = 0``, the mean of
      the two at ``r = 1/2``);
    * ``step >= total_steps``: ``min_lr``.

    Example:
        >>> lr_at(0, max_lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=100)
        0.0001
        >>> lr_at(55, max_lr=1e-3, min_lr=1e-4, warmup_steps=10, total_steps=100)
        0.00055
    """
    if step < 0:
        raise ValueError(f"lr_at: step must be >= 0, got {step}")
    if warmup_steps < 0 or total_steps < warmup_steps:
        raise ValueError(f"lr_at: need 0 <= warmup_steps <= total_steps, got warmup_steps={warmup_steps}, "
                         f"total_steps={total_steps}")
    if not 0 <= min_lr <= max_lr:
        raise ValueError(f"lr_at: min_lr={min_lr} and max_lr={max_lr} must satisfy 0 <= min_lr <= max_lr (the "
                         f"cosine decays from max_lr down to min_lr)")
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    ratio = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * ratio))


def build_model(config: TrainConfig, vocab_size: int) -> torch.nn.Module:
    """A fresh ``DecoderOnlyLM`` of the size ``config`` describes (seed first for a repeatable init).

    Example:
        >>> from course_runtime.device import seed_everything
        >>> seed_everything(0); model = build_model(PRESETS["tiny"], vocab_size=65)  # doctest: +SKIP
    """
    from transformer_core.models import DecoderOnlyLM

    return DecoderOnlyLM(config.model_config(vocab_size))


def configure_optimizer(model: torch.nn.Module, config: TrainConfig,
                        device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (dim >= 2) only; biases and norm gains are not decayed.

    Uses PyTorch's fused AdamW kernel when it exists for ``device`` (CUDA and, since 2.4, CPU),
    else the multi-tensor ("foreach") implementation.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    kwargs = dict(lr=config.learning_rate, betas=(config.beta1, config.beta2))
    if device.type in ("cuda", "cpu"):
        try:
            return torch.optim.AdamW(groups, fused=True, **kwargs)
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.AdamW(groups, foreach=True, **kwargs)


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        history: lists indexed by evaluation: ``step``, ``train_loss``, ``val_loss``, ``lr``,
            ``elapsed_s`` (wall time since the start).
        iter_losses: the training loss of every optimizer step (last micro-batch).
        final_val_loss, best_val_loss: validation loss after the last step, and the lowest seen.
        tokens_per_second: training throughput, evaluation time excluded, first steps (warm-up,
            compilation) excluded when the run is long enough.
        flops_per_token: training FLOPs per token, ``6 N + 12 L d T``
            (:func:`transformer_core.complexity.flops_per_token`); ``None`` for a model without a
            ``TransformerConfig`` ``config``.
        mfu: model FLOPs utilisation in ``[0, 1]``; ``None`` where the device's peak is unknown (CPU).
        wall_time_s: total wall time including evaluation and checkpoints.
        n_params: parameters of the model.
        device, dtype: where and in which autocast dtype it ran (``"float32"`` = no autocast).
        checkpoint_path: the checkpoint written (``None`` without ``out_dir``).
        stopped_early: a callback asked to stop.
    """

    history: dict[str, list[float]]
    iter_losses: list[float]
    final_val_loss: float
    best_val_loss: float
    tokens_per_second: float
    flops_per_token: float | None
    mfu: float | None
    wall_time_s: float
    n_params: int
    device: str
    dtype: str
    checkpoint_path: str | None = None
    stopped_early: bool = False


def resolve_amp_dtype(config: TrainConfig, device: torch.device) -> torch.dtype | None:
    """The autocast dtype ``config.dtype`` asks for on ``device`` (``None`` = plain float32).

    Raises:
        ValueError: ``float16`` off CUDA (it needs a ``GradScaler``, which this loop only uses on GPUs).
    """
    if config.dtype == "auto":
        return autocast_dtype(device)
    dtype = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}[config.dtype]
    if dtype is torch.float16 and device.type != "cuda":
        raise ValueError(f"TrainConfig.dtype='float16' needs a CUDA GPU (it trains with a GradScaler); "
                         f"on {device.type} use 'float32' or 'bfloat16'")
    return dtype


def apply_gradients(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scaler: torch.amp.GradScaler, grad_clip: float) -> None:
    """The end of a training step, after ``backward()``: unscale, clip, step, zero the gradients.

    The gradients are unscaled before clipping (with float16 they carry the loss scale, and clipping
    scaled gradients would clip the true ones to ``grad_clip / scale``); ``grad_clip = 0`` skips
    clipping. With a disabled ``scaler`` (bf16, float32) the scaler calls are plain pass-throughs.
    """
    if grad_clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=True)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)


class _CpuThreads:
    """PyTorch's CPU threads for a run: a fixed number, PyTorch's default (``None``), or ``"auto"``.

    ``"auto"`` gives the run one thread per core that other processes leave idle (at least one, at
    most PyTorch's default). On a shared machine this matters more than anything else for a small
    model: threads that wait at every operation for a sibling whose core another process holds made
    a step of the shakespeare-cpu preset up to 8x slower with 2 threads than with 1 on a busy 2-core
    machine, while on an idle one 2 threads are faster. The idle cores are read from ``/proc/stat``
    (Linux; elsewhere ``"auto"`` keeps the default) over 0.2 s at the start, and at every
    :meth:`adjust` (each evaluation) over the span since the last one, less this process's own CPU
    time; the threads change only between steps, which changes no result beyond float rounding.
    """

    def __init__(self, num_threads: int | str | None):
        self.auto = num_threads == "auto"
        self.max = torch.get_num_threads()
        self._last = None
        if isinstance(num_threads, int):
            torch.set_num_threads(num_threads)
        elif self.auto:
            self._last = self._sample()
            if self._last is not None:
                time.sleep(0.2)
                self.adjust()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        """(busy seconds of all cores, this process's CPU seconds, wall seconds), or None off Linux."""
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = [int(v) for v in stat.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        busy = (sum(fields) - fields[3] - fields[4]) / ticks      # all but idle and iowait; steal counts as busy
        own = os.times()
        return busy, own.user + own.system, time.perf_counter()

    def adjust(self) -> None:
        """Set the threads to the cores other processes left idle since the last call (``"auto"`` only)."""
        if not self.auto or self._last is None:
            return
        now = self._sample()
        if now is None:
            return
        wall = now[2] - self._last[2]
        if wall < 0.05:
            return
        others = max(0.0, (now[0] - self._last[0]) - (now[1] - self._last[1])) / wall   # cores busy elsewhere
        self._last = now
        cores = os.cpu_count() or self.max
        torch.set_num_threads(max(1, min(self.max, int(cores - others + 0.5))))


class _StepLosses:
    """The training loss of every step, without a host-device synchronisation per step: each loss is
    written into a small device buffer, which is read (one synchronisation) when it is full and
    whenever :meth:`read` is called, e.g. at an evaluation. Memory grows with the steps run, not with
    ``max_iters``."""

    def __init__(self, size: int, device: torch.device):
        self.values: list[float] = []
        self._buffer = torch.zeros(size, device=device)
        self._filled = 0

    def record(self, loss: torch.Tensor) -> None:
        self._buffer[self._filled] = loss.detach()
        self._filled += 1
        if self._filled == len(self._buffer):
            self.read()

    def read(self) -> list[float]:
        """Every loss recorded so far, one per step."""
        if self._filled:
            self.values.extend(self._buffer[:self._filled].tolist())
            self._filled = 0
        return self.values


def _batch_source(data: torch.Tensor | BatchFn, config: TrainConfig, device: torch.device,
                  name: str) -> Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]]:
    if callable(data):
        def from_fn(generator):
            x, y = data(config.batch_size, generator)
            return x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        return from_fn
    if not isinstance(data, torch.Tensor) or data.dim() != 1:
        raise TypeError(f"train: {name} must be a 1-D tensor of token ids or a function "
                        f"(batch_size, generator) -> (x, y); got {type(data).__name__}"
                        f"{tuple(data.shape) if isinstance(data, torch.Tensor) else ''}")
    if len(data) <= config.block_size:
        raise ValueError(f"train: {name} has {len(data)} tokens; it needs more than block_size="
                         f"{config.block_size}. Use more text or a smaller block_size.")
    stream = data.long().cpu()
    return lambda generator: get_batch(stream, config.batch_size, config.block_size,
                                       generator=generator, device=device)


def _merge_batches(batches: list[tuple[torch.Tensor, torch.Tensor]],
                   max_tokens: int = 16384) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Concatenate consecutive ``(x, y)`` batches of full windows into batches of at most ``max_tokens``
    tokens (a batch already larger stays alone): :func:`evaluate` weights each batch by its sequences,
    so the mean loss is the same, reached in fewer, larger forward passes (the 20 evaluation batches
    of the shakespeare-cpu preset become one)."""
    merged, group = [], []
    for batch in batches:
        if group and sum(x.numel() for x, _ in group) + batch[0].numel() > max_tokens:
            merged.append(group)
            group = []
        group.append(batch)
    if group:
        merged.append(group)
    return [(torch.cat([x for x, _ in g]), torch.cat([y for _, y in g])) if len(g) > 1 else g[0] for g in merged]


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]], *,
             amp_dtype: torch.dtype | None = None) -> float:
    """Mean loss of ``model`` over ``batches`` (each ``(x, y)`` of shape ``(B, T)``), in eval mode.

    Each batch's loss is weighted by its number of sequences ``B``, so a smaller last batch counts
    for what it holds (with equal batches this is the plain mean). The model's training/eval mode
    is restored afterwards.
    """
    was_training = model.training
    model.eval()
    device_type = batches[0][0].device.type
    ctx = torch.autocast(device_type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
    total = torch.zeros((), device=batches[0][0].device)
    with ctx:
        for x, y in batches:
            _, loss = model(x, y)
            total += loss.float() * len(x)
    model.train(was_training)
    return total.item() / sum(len(x) for x, _ in batches)


def sequential_batches(ids: torch.Tensor, block_size: int, batch_size: int = 64, *,
                       device: str | torch.device = "cpu") -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Cut a whole token stream into non-overlapping full windows, each token predicted at most once.

    ``evaluate(model, sequential_batches(val_ids, T))`` is the loss on the split (all of it but a
    tail shorter than a window, which :func:`evaluate_split` adds), free of the sampling noise of a
    few random batches. Tokens near the start of a window see little
    context, as in training and in the loop's random windows, so the two measure the same thing;
    a sliding evaluation that gives every token a full context would read slightly lower.

    Args:
        ids: token ids, shape ``(N,)`` with ``N > block_size``.
        block_size: window length ``T``.
        batch_size: windows per batch (the last batch may be smaller).

    Returns:
        A list of ``(x, y)`` with ``x, y`` of shape ``(b, T)`` and ``y`` = ``x`` shifted by one;
        ``(N - 1) // T`` windows in all (the tail that does not fill a window is left out).
    """
    if ids.dim() != 1 or len(ids) <= block_size:
        raise ValueError(f"sequential_batches: need a 1-D stream longer than block_size={block_size}, "
                         f"got shape {tuple(ids.shape)}")
    n_windows = (len(ids) - 1) // block_size
    x = ids[:n_windows * block_size].view(n_windows, block_size)
    y = ids[1:n_windows * block_size + 1].view(n_windows, block_size)
    return [(x[i:i + batch_size].to(device), y[i:i + batch_size].to(device))
            for i in range(0, n_windows, batch_size)]


@torch.no_grad()
def evaluate_split(model: torch.nn.Module, ids: torch.Tensor, block_size: int, *, batch_size: int = 64,
                   amp_dtype: torch.dtype | None = None) -> float:
    """Mean next-token loss over a whole split, every token once: the ``N - 1`` targets of ``ids``.

    The windows of :func:`sequential_batches` (:func:`evaluate` of them), then one last, shorter
    window over the tail they leave out (``(N - 1) % block_size`` targets), each token weighted
    equally.

    Shapes:
        ids ``(N,)`` with ``N > block_size``; the model is evaluated where its parameters live.
    """
    device = next(model.parameters()).device
    ids = ids.long()
    loss = evaluate(model, sequential_batches(ids, block_size, batch_size, device=device), amp_dtype=amp_dtype)
    n_full = (len(ids) - 1) // block_size * block_size           # targets in the full windows
    n_tail = len(ids) - 1 - n_full
    if n_tail == 0:
        return loss
    tail = ids[n_full:]                                          # n_tail + 1 ids: n_tail inputs and targets
    tail_loss = evaluate(model, [(tail[:-1][None].to(device), tail[1:][None].to(device))], amp_dtype=amp_dtype)
    return (loss * n_full + tail_loss * n_tail) / (n_full + n_tail)


def train(model: torch.nn.Module, train_data: torch.Tensor | BatchFn, val_data: torch.Tensor | BatchFn,
          config: TrainConfig, *, device: str | torch.device | None = None, progress: bool = True,
          callback: Callable[[dict], bool | None] | None = None,
          tokenizer: CharTokenizer | None = None,
          resume: str | os.PathLike | None = None) -> TrainResult:
    """Train ``model`` with the recipe in ``config``; returns losses, throughput and MFU.

    Args:
        model: a language model whose ``forward(idx, targets)`` returns ``(logits, loss)`` (e.g.
            ``DecoderOnlyLM``); it is moved to ``device`` and trained in place.
        train_data, val_data: either a 1-D tensor of token ids, shape ``(N,)``, from which random
            windows of ``config.block_size`` are drawn (:func:`~course_runtime.data.get_batch`), or a
            function ``(batch_size, generator) -> (x, y)`` returning ``(B, T)`` batches (synthetic
            tasks; label ``-100`` marks positions without loss).
        config: the recipe (see :data:`PRESETS`).
        device: defaults to ``pick_device()``.
        progress: show a tqdm progress bar.
        callback: called after each evaluation with a dict (``step``, ``train_loss``, ``val_loss``,
            ``lr``, ``elapsed_s``); returning ``True`` stops training.
        tokenizer: stored in checkpoints so that ``generate`` can decode.
        resume: a training state (``<out_dir>/last.pt``, written at every evaluation) to continue
            from. The model, optimizer, gradient scaler, step, history and random number generators
            are restored, so the result equals a run that was never interrupted (exactly, on a CPU).
            The recipe, the tokenizer and the data (token ids, compared by SHA-256) must be the ones
            that wrote it; otherwise, or when the file is not an intact training state, a
            :class:`ResumeError` says what differs.

    With ``config.out_dir``, every evaluation writes the best model so far to ``ckpt.pt`` and the
    whole training state to ``last.pt`` (:data:`RESUME_FILE`).

    Returns:
        A :class:`TrainResult`.
    """
    run = _TrainingRun(model, train_data, val_data, config, device=device, callback=callback, tokenizer=tokenizer)
    start_step = run.restore(resume) if resume is not None else 0
    run.start_clock(start_step, progress)
    step, lr, stopped_early = run.loop(start_step, resumed=resume is not None)
    timed_end, timed_eval_time = run.finish(step, lr, stopped_early)
    tokens_per_second, utilisation = run.throughput(step, start_step, timed_end, timed_eval_time)
    return TrainResult(
        history=run.history, iter_losses=run.step_losses.read(),
        final_val_loss=run.history["val_loss"][-1], best_val_loss=run.best_val,
        tokens_per_second=tokens_per_second, flops_per_token=run.flops_per_token, mfu=utilisation,
        wall_time_s=time.perf_counter() - run.start, n_params=sum(p.numel() for p in model.parameters()),
        device=str(run.device), dtype=str(run.amp_dtype or torch.float32).removeprefix("torch."),
        checkpoint_path=(str(run.checkpoint_path) if run.checkpoint_path and run.checkpoint_path.exists()
                         else None),
        stopped_early=stopped_early)


class _TrainingRun:
    """One call of :func:`train`, step by step: the model placed for this device and these processes
    (DDP, ``torch.compile``), its optimizer and AMP, the batch streams, the evaluations with their
    checkpoints, and the clock behind tokens/s and MFU. Its methods are the loop's named steps, in the
    order :func:`train` calls them."""

    def __init__(self, model: torch.nn.Module, train_data: torch.Tensor | BatchFn, val_data: torch.Tensor | BatchFn,
                 config: TrainConfig, *, device: str | torch.device | None,
                 callback: Callable[[dict], bool | None] | None, tokenizer: CharTokenizer | None) -> None:
        self.model, self.config, self.callback, self.tokenizer = model, config, callback, tokenizer
        self.device = device = pick_device(device)
        self.threads = _CpuThreads(config.num_threads if device.type == "cpu" else None)
        self.ranks = distributed.current()
        if config.grad_accum_steps % self.ranks.world_size:
            raise ValueError(f"train: grad_accum_steps={config.grad_accum_steps} must be a multiple of the "
                             f"{self.ranks.world_size} processes, so that the global batch stays the same")
        self.local_steps = config.grad_accum_steps // self.ranks.world_size      # micro-batches of this process
        self.amp_dtype = resolve_amp_dtype(config, device)
        self._place_model()
        self.optimizer = configure_optimizer(model, config, device)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.amp_dtype is torch.float16)
        self.autocast = (torch.autocast(device.type, dtype=self.amp_dtype) if self.amp_dtype
                         else contextlib.nullcontext())
        self._batch_streams(train_data, val_data)
        self.decay_steps = config.max_iters if config.lr_decay_iters is None else config.lr_decay_iters
        self.warmup = min(config.warmup_iters, self.decay_steps)
        model_config = getattr(model, "config", None)
        self.flops_per_token = (float(complexity.flops_per_token(model_config, config.block_size, training=True))
                                if model_config is not None else None)
        self.checkpoint_path = pathlib.Path(config.out_dir) / "ckpt.pt" if config.out_dir else None
        self.resume_path = pathlib.Path(config.out_dir) / RESUME_FILE if config.out_dir else None
        self.history: dict[str, list[float]] = {"step": [], "train_loss": [], "val_loss": [], "lr": [],
                                                "elapsed_s": []}
        self.step_losses = _StepLosses(min(config.max_iters, config.eval_interval, 1024), device)
        self.best_val = math.inf
        self.data = {"tokenizer": tokenizer.to_dict() if tokenizer is not None else None,
                     "train": _fingerprint(train_data), "val": _fingerprint(val_data)}

    def _place_model(self) -> None:
        """The model on the device in training mode; ``fwd`` is what a training step calls (DDP around
        it with several processes, compiled on request), ``eval_fwd`` what an evaluation calls."""
        self.model.to(self.device)
        self.model.train()
        self.ddp = None
        if self.ranks.world_size > 1:      # averages the gradients of all processes after each backward pass
            self.ddp = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        wrapped = self.ddp or self.model
        self.fwd = torch.compile(wrapped) if self.config.compile else wrapped
        self.eval_fwd = self.fwd if self.ddp is None else self.model

    def _batch_streams(self, train_data: torch.Tensor | BatchFn, val_data: torch.Tensor | BatchFn) -> None:
        """The training batches' sources and generators, and the fixed evaluation batches."""
        config = self.config
        self.next_train = _batch_source(train_data, config, self.device, "train_data")
        next_val = _batch_source(val_data, config, self.device, "val_data")
        # One batch stream per micro-batch slot of a step, numbered over all processes: whatever the number
        # of processes, step s trains on the same global batch.
        self.slots = range(self.ranks.rank * self.local_steps, (self.ranks.rank + 1) * self.local_steps)
        self.train_gens = [torch.Generator().manual_seed(config.seed + slot) for slot in self.slots]
        eval_gen = torch.Generator().manual_seed(config.seed + 1)
        self.eval_batches = {"train": [self.next_train(eval_gen) for _ in range(config.eval_iters)],
                             "val": [next_val(eval_gen) for _ in range(config.eval_iters)]}
        for split, ids in (("train", train_data), ("val", val_data)):
            if isinstance(ids, torch.Tensor):         # equal windows: fewer, larger batches give the same mean
                self.eval_batches[split] = _merge_batches(self.eval_batches[split])

    def restore(self, resume: str | os.PathLike) -> int:
        """Continue from the training state ``resume``; returns the step to start from."""
        start_step, self.best_val = _restore_training_state(
            resume, self.config, self.data, self.model, self.optimizer, self.scaler, self.train_gens, self.slots,
            self.ranks, self.history, self.step_losses)
        return start_step

    def start_clock(self, start_step: int, progress: bool) -> None:
        """Start the wall clock and the progress bar; the timed span for tokens/s starts at ``skip``
        (the first steps, which warm up, are left out)."""
        config = self.config
        self.skip = start_step + min(10, (config.max_iters - start_step) // 10)
        self.timed_start: float | None = None
        self.eval_time = 0.0
        self.start = time.perf_counter()
        self.bar = tqdm(total=config.max_iters, desc="train", unit="step",
                        disable=not (progress and self.ranks.is_main))

    def lr(self, step: int) -> float:
        """The learning rate of ``step``: warm-up, then cosine decay (:func:`lr_at`)."""
        return lr_at(step, max_lr=self.config.learning_rate, min_lr=self.config.min_lr,
                     warmup_steps=self.warmup, total_steps=self.decay_steps)

    def loop(self, start_step: int, *, resumed: bool) -> tuple[int, float, bool]:
        """Steps ``start_step`` to ``max_iters``, evaluating every ``eval_interval`` steps; returns the
        step reached, its learning rate and whether the callback stopped the run there."""
        lr = self.lr(0)
        for step in range(start_step, self.config.max_iters):
            if step == self.skip:
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                self.timed_start = time.perf_counter()
            lr = self.lr(step)
            resumed_here = resumed and step == start_step     # that evaluation is in the history
            if step % self.config.eval_interval == 0 and not resumed_here and self.evaluate(step, lr):
                return step, lr, True
            self.train_step(lr)
        return self.config.max_iters, lr, False

    def train_step(self, lr: float) -> None:
        """One optimizer step: this process's micro-batches, forward and backward under AMP, gradients
        averaged across processes after the last one, then clipped and applied."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        for micro, generator in enumerate(self.train_gens):
            x, y = self.next_train(generator)
            last = micro == self.local_steps - 1    # DDP averages across processes after the last micro-batch only
            with contextlib.nullcontext() if self.ddp is None or last else self.ddp.no_sync():
                with self.autocast:
                    _, loss = self.fwd(x, y)
                self.scaler.scale(loss / self.local_steps).backward()
        apply_gradients(self.model, self.optimizer, self.scaler, self.config.grad_clip)
        self.step_losses.record(loss)
        self.bar.update(1)

    def evaluate(self, step: int, lr: float) -> bool:
        """Evaluate both splits, record them, write the checkpoints and ask the callback; returns whether
        to stop (every process stops at the same step)."""
        t0 = time.perf_counter()
        self.threads.adjust()
        losses = {split: evaluate(self.eval_fwd, batches, amp_dtype=self.amp_dtype)
                  for split, batches in self.eval_batches.items()}
        elapsed = time.perf_counter() - self.start
        for key, value in (("step", step), ("train_loss", losses["train"]), ("val_loss", losses["val"]),
                           ("lr", lr), ("elapsed_s", elapsed)):
            self.history[key].append(value)
        self._save(step, losses["val"])
        self.bar.set_postfix(train=f"{losses['train']:.4f}", val=f"{losses['val']:.4f}", refresh=False)
        stop = bool(self.callback({"step": step, "train_loss": losses["train"], "val_loss": losses["val"],
                                   "lr": lr, "elapsed_s": elapsed})) if self.callback else False
        stop = distributed.all_agree(stop, self.device)
        if self.timed_start is not None:
            self.eval_time += time.perf_counter() - t0
        return stop

    def _save(self, step: int, val_loss: float) -> None:
        """The best model so far to ``ckpt.pt``, the whole training state to ``last.pt`` (with ``out_dir``)."""
        if self.checkpoint_path is not None and val_loss < self.best_val and self.ranks.is_main:
            save_checkpoint(self.checkpoint_path, self.model, self.optimizer, train_config=self.config,
                            tokenizer=self.tokenizer, step=step, val_loss=val_loss)
        self.best_val = min(self.best_val, val_loss)
        if self.resume_path is not None:                 # collective: every process sends its generators
            generators = [state for rank_states in distributed.gather([g.get_state() for g in self.train_gens])
                          for state in rank_states]
            torch_rngs = distributed.gather(torch.get_rng_state())
            if self.ranks.is_main:
                _save_training_state(self.resume_path, self.config, self.data, self.model, self.optimizer,
                                     self.scaler, generators, torch_rngs, self.history, self.step_losses.read(),
                                     step=step, best_val=self.best_val)

    def finish(self, step: int, lr: float, stopped_early: bool) -> tuple[float, float]:
        """End the timed span, evaluate the last step (unless that is done) and close the bar; returns
        the end of the timed span and the evaluation time inside it."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        timed_end = time.perf_counter()
        timed_eval_time = self.eval_time          # evaluations inside the timed span; the final one is after it
        already_evaluated = bool(self.history["step"]) and self.history["step"][-1] == step   # a finished run, resumed
        if not stopped_early and not already_evaluated:
            self.evaluate(step, lr)
        self.bar.close()
        return timed_end, timed_eval_time

    def throughput(self, steps_done: int, start_step: int, timed_end: float,
                   timed_eval_time: float) -> tuple[float, float | None]:
        """Tokens per second over the timed steps (evaluations left out), and the model FLOPs
        utilisation per device against its peak (None where the peak or the model's FLOPs are unknown)."""
        config = self.config
        if self.timed_start is not None and steps_done > self.skip:
            timed_steps, timed_seconds = steps_done - self.skip, timed_end - self.timed_start - timed_eval_time
        else:
            timed_steps, timed_seconds = steps_done - start_step, timed_end - self.start
        tokens = timed_steps * config.batch_size * config.grad_accum_steps * config.block_size
        tokens_per_second = tokens / timed_seconds if timed_seconds > 0 and tokens > 0 else 0.0
        peak = peak_flops(self.device, self.amp_dtype or torch.float32)
        fpt = self.flops_per_token
        utilisation = (complexity.mfu(tokens_per_second / self.ranks.world_size, fpt, peak)       # per device
                       if peak is not None and fpt is not None and tokens_per_second > 0 else None)
        return tokens_per_second, utilisation


# ----------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------

RESUME_FILE = "last.pt"
_RESUME_FORMAT = "transformer_core.resume/1"
# Fields that may differ between the run that wrote a training state and the run that resumes it.
_RESUMABLE_CHANGES = {"out_dir", "num_threads", "compile"}


class ResumeError(ValueError):
    """A training state that cannot be resumed: not one, damaged, or written by another recipe or
    for other data. The message says what differs and what to do."""


def _fingerprint(data: torch.Tensor | BatchFn) -> dict | None:
    """What identifies a token stream: its length and the SHA-256 of its ids (``None`` for a batch
    function, which cannot be compared)."""
    if not isinstance(data, torch.Tensor):
        return None
    ids = data.detach().long().cpu().contiguous()
    return {"tokens": len(ids), "sha256": hashlib.sha256(ids.numpy().tobytes()).hexdigest()}


def _save_training_state(path: pathlib.Path, config: TrainConfig, data: dict, model: torch.nn.Module,
                         optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         generators: list[torch.Tensor], torch_rngs: list[torch.Tensor], history: dict,
                         step_losses: list[float], *, step: int, best_val: float) -> None:
    """Everything :func:`train` needs to continue from ``step`` exactly as if it had not stopped:
    ``generators`` holds the batch streams of all micro-batch slots, ``torch_rngs`` every process's
    global generator (dropout); ``data`` the tokenizer and the fingerprints of both splits, so that a
    resumed run can check it trains on the same text."""
    state = {
        "format": _RESUME_FORMAT, "step": step, "best_val": best_val,
        "train_config": dataclasses.asdict(config), "data": data, "model": model.state_dict(),
        "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
        "train_generators": generators, "torch_rngs": torch_rngs,
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "history": {key: list(values) for key, values in history.items()},
        "step_losses": torch.tensor(step_losses, dtype=torch.float32),
    }
    _atomic_save(state, path)


def _data_differences(saved: dict, wanted: dict) -> list[str]:
    """How the tokenizer and data of a training state differ from this run's (empty: the same, or
    not comparable because one side did not record it)."""
    differences = []
    old_tok, new_tok = saved.get("tokenizer"), wanted["tokenizer"]
    if old_tok is not None and new_tok is not None and old_tok != new_tok:
        old_chars, new_chars = old_tok.get("chars", ""), new_tok.get("chars", "")
        added = "".join(sorted(set(new_chars) - set(old_chars)))
        removed = "".join(sorted(set(old_chars) - set(new_chars)))
        detail = ", ".join(part for part in (f"new characters {added!r}" if added else "",
                                             f"missing characters {removed!r}" if removed else "") if part)
        differences.append(f"vocabulary: {len(old_chars)} -> {len(new_chars)} characters"
                           + (f" ({detail})" if detail else ""))
    for split in ("train", "val"):
        old, new = saved.get(split), wanted[split]
        if old is not None and new is not None and old != new:
            differences.append(f"{split} data: {old['tokens']:,} tokens (sha256 {old['sha256'][:12]}) -> "
                               f"{new['tokens']:,} tokens (sha256 {new['sha256'][:12]})")
    return differences


def _restore_training_state(path: str | os.PathLike, config: TrainConfig, data: dict, model: torch.nn.Module,
                            optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                            train_gens: list[torch.Generator], slots: range, ranks: distributed.Ranks,
                            history: dict, step_losses: "_StepLosses") -> tuple[int, float]:
    """Load a training state into the objects :func:`train` built; returns ``(step, best_val)``.

    Everything that can be compared (recipe, tokenizer, data, the structure of the file) is checked
    before anything is loaded.

    Raises:
        FileNotFoundError: no file at ``path``.
        ResumeError: the file is not an intact training state, or it was written with another recipe
            or for other data.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"train: no training state at {path} to resume from; it is written at every "
                                f"evaluation of a run with out_dir")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # whatever the file holds, it is not a training state
        raise ResumeError(f"train: {path} is not a training state ({type(err).__name__}); start afresh "
                          f"(--overwrite) or resume from an intact copy") from None
    if not isinstance(state, dict) or state.get("format") != _RESUME_FORMAT:
        raise ResumeError(f"train: {path} is not a training state written by transformer_core's train")
    damaged = (f"train: {path} is damaged, so the run cannot continue from it; start afresh (--overwrite) "
               f"or resume from an intact copy")
    kinds = {"step": int, "best_val": float, "train_config": dict, "model": dict, "optimizer": dict,
             "scaler": dict, "train_generators": list, "torch_rngs": list, "cuda_rng": list, "history": dict,
             "step_losses": torch.Tensor}
    wrong = [key for key, kind in kinds.items() if not isinstance(state.get(key), kind)]
    if wrong:
        raise ResumeError(f"{damaged} (missing or wrong: {', '.join(wrong)})")
    saved, wanted = state["train_config"], dataclasses.asdict(config)
    changed = sorted(key for key in wanted if key not in _RESUMABLE_CHANGES and saved.get(key) != wanted[key])
    if changed:
        details = ", ".join(f"{key}: {saved.get(key)!r} -> {wanted[key]!r}" for key in changed)
        raise ResumeError(f"train: {path} was written with another recipe ({details}); resume with the same "
                          f"settings, or start a new run in another folder")
    differences = _data_differences(state.get("data") or {}, data)
    if differences:
        raise ResumeError(f"train: {path} was trained on other data ({'; '.join(differences)}); resume with "
                          f"the data of that run, or start a new run on this data (--overwrite, or another "
                          f"folder)")
    weights, expected = state["model"], model.state_dict()
    if set(weights) != set(expected) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
        missing, unexpected = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
        raise ResumeError(f"{damaged} (its model weights do not match: missing {missing[:3]}, unexpected "
                          f"{unexpected[:3]})")
    reshaped = [f"{name} {tuple(t.shape)} -> {tuple(expected[name].shape)}" for name, t in weights.items()
                if t.shape != expected[name].shape]
    if reshaped:
        raise ResumeError(f"train: {path} holds a model of other sizes ({', '.join(reshaped[:2])}): the vocabulary "
                          f"of the data differs from that run's; resume with the data of that run, or start a "
                          f"new run on this data (--overwrite, or another folder)")
    step = state["step"]
    if (not 0 <= step <= config.max_iters or len(state["step_losses"]) != step
            or max(slots, default=-1) >= len(state["train_generators"]) or not state["torch_rngs"]):
        raise ResumeError(f"{damaged} (its step, losses and random generators do not agree)")
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        for generator, slot in zip(train_gens, slots):
            generator.set_state(state["train_generators"][slot])
        torch.set_rng_state(state["torch_rngs"][ranks.rank % len(state["torch_rngs"])])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        for key, values in state["history"].items():
            history[key].extend(values)
        step_losses.values[:] = state["step_losses"].tolist()
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as err:
        reason = (str(err).strip().splitlines() or [""])[0][:200]
        raise ResumeError(f"{damaged} ({type(err).__name__}: {reason})") from None
    return step, float(state["best_val"])


def _atomic_save(state: dict, path: pathlib.Path) -> None:
    """``torch.save`` to a temporary name, then rename: a crash never leaves a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        pathlib.Path(tmp).unlink(missing_ok=True)


@dataclass
class Checkpoint:
    """A loaded checkpoint: the rebuilt model (in eval mode) and what was saved with it."""

    model: torch.nn.Module
    model_config: object
    train_config: TrainConfig | None
    tokenizer: CharTokenizer | None
    optimizer_state: dict | None
    step: int | None
    val_loss: float | None


def save_checkpoint(path: str | os.PathLike, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer | None = None, *,
                    train_config: TrainConfig | None = None, tokenizer: CharTokenizer | None = None,
                    step: int | None = None, val_loss: float | None = None) -> pathlib.Path:
    """Write model weights, its ``config``, the optimizer state, the recipe and the tokenizer.

    The file is written to a temporary name and renamed, so a crash never leaves a half-written
    checkpoint. Everything is stored as tensors and plain Python values, so
    ``torch.load(weights_only=True)`` can read it.

    Args:
        path: the ``.pt`` file to write (parent folders are created).
        model: a model with a dataclass ``config`` (e.g. ``DecoderOnlyLM``).
        optimizer, train_config, tokenizer, step, val_loss: stored when given.

    Returns:
        ``path``.
    """
    config = getattr(model, "config", None)
    if not dataclasses.is_dataclass(config):
        raise TypeError(f"save_checkpoint: the model needs a dataclass `config` attribute to be rebuilt "
                        f"later; {type(model).__name__} has {type(config).__name__}")
    path = pathlib.Path(path)
    state = {
        "format": "transformer_core.checkpoint/1",
        "model_class": type(model).__name__,
        "model_config": dataclasses.asdict(config),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "train_config": dataclasses.asdict(train_config) if train_config is not None else None,
        "tokenizer": tokenizer.to_dict() if tokenizer is not None else None,
        "step": step,
        "val_loss": val_loss,
    }
    _atomic_save(state, path)
    return path


def load_checkpoint(path: str | os.PathLike, *, device: str | torch.device = "cpu") -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` and rebuild its model on ``device``.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a transformer_core checkpoint.
    """
    from transformer_core import models

    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"load_checkpoint: no checkpoint at {path}. Train one first, e.g. "
                                f"`python -m transformer_core train --preset tiny --out runs/tiny`.")
    not_a_checkpoint = (f"load_checkpoint: {path} is not a transformer_core checkpoint (the ckpt.pt files "
                        f"that `python -m transformer_core train --out DIR` writes)")
    if path.stat().st_size == 0:
        raise ValueError(f"{not_a_checkpoint}: the file is empty")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # text, random bytes, a pickled module: torch.load's errors vary by content
        raise ValueError(f"{not_a_checkpoint}: torch.load cannot read it ({type(err).__name__})") from None
    if not isinstance(state, dict) or state.get("format") != "transformer_core.checkpoint/1":
        raise ValueError(f"{not_a_checkpoint}: it holds {type(state).__name__}, not a checkpoint dictionary")
    missing = [key for key in ("model_class", "model_config", "model", "train_config", "tokenizer", "optimizer",
                               "step", "val_loss") if key not in state]
    if missing:
        raise ValueError(f"{not_a_checkpoint}: it lacks {', '.join(missing)}")
    model_class = getattr(models, state["model_class"], None)
    if model_class is None:
        raise ValueError(f"load_checkpoint: {path} holds a {state['model_class']}, which "
                         f"transformer_core.models does not define")
    model_config = models.TransformerConfig(**state["model_config"])
    model = model_class(model_config)
    weights = state["model"] if isinstance(state["model"], dict) else {}
    dtypes = {t.dtype for t in weights.values() if isinstance(t, torch.Tensor) and t.is_floating_point()}
    if len(dtypes) == 1:    # rebuild in the checkpoint's dtype (float64, bf16, fp16), not float32; mixed: as saved
        model.to(dtypes.pop())
    model.load_state_dict(state["model"])
    model.to(device).eval()
    train_config = TrainConfig(**state["train_config"]) if state["train_config"] else None
    tokenizer = CharTokenizer.from_dict(state["tokenizer"]) if state["tokenizer"] else None
    return Checkpoint(model=model, model_config=model_config, train_config=train_config,
                      tokenizer=tokenizer, optimizer_state=state["optimizer"], step=state["step"],
                      val_loss=state["val_loss"])

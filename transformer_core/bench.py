"""The benchmarks behind ``python -m transformer_core bench``.

Two measurements the course makes claims about:

1. **Attention**: naive attention (explicit ``softmax(Q K^T / sqrt(d)) V`` with a causal mask,
   which materialises the ``T x T`` score matrix) against PyTorch's fused
   ``F.scaled_dot_product_attention`` (FlashAttention / memory-efficient kernels on GPUs), at several
   sequence lengths, 6 heads of width 64. The outputs are checked to agree.
2. **KV cache**: greedy generation with and without the cache for a GPT-2-like
   ``DecoderOnlyLM`` (6 layers, 6 heads, width 384, vocabulary 50304, float32, a 16-token prompt),
   with the speed-up and a check that both produce identical tokens.
3. **Training step**: forward, backward, gradient clipping and a fused AdamW step of a GPT, timed
   after warm-up, as tokens/s, achieved TFLOP/s and model FLOPs utilisation (MFU) against the
   device's peak. On a GPU the model has GPT-2 small's shape (12 layers, 12 heads, width 768,
   context 1024, vocabulary 50304) under bf16 autocast (fp16 on GPUs without bf16) and
   ``torch.compile``; on a CPU a small GPT keeps the run short (no MFU: CPUs have no peak table).

Results are printed as a Markdown table and stored as JSON and Markdown under
``benchmarks/results/<device-name>[-quick].{json,md}`` so that runs on different machines can be
compared. Timings use ``torch.utils.benchmark`` (attention) and ``time.perf_counter`` with warm-up
and device synchronisation (generation). Timings are measurements, never test assertions.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import pathlib
import platform
import re
import statistics
import time
import warnings

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark
from tqdm.auto import tqdm

from course_runtime.device import peak_memory_bandwidth, pick_device, seed_everything

__all__ = [
    "naive_causal_attention",
    "bench_attention",
    "bench_generation",
    "bench_train_step",
    "device_name",
    "device_slug",
    "run_benchmarks",
    "format_markdown",
    "save_results",
]

FULL = {"seq_lens": (128, 256, 512, 1024), "batch_size": 4, "new_tokens": 512, "min_run_time": 0.5,
        "repeats": 3, "train_steps": 20}
QUICK = {"seq_lens": (128, 256, 512), "batch_size": 1, "new_tokens": 64, "min_run_time": 0.1,
         "repeats": 1, "train_steps": 3}

# The model of the training-step benchmark: GPT-2 small's shape on a GPU, a small GPT on a CPU
# (a GPT-2-small step takes tens of seconds there). Vocabulary 50304 = 50257 rounded up to a
# multiple of 64, as nanoGPT does, so the output matmul tiles evenly. No biases, as in the course's
# presets and nanoGPT's bench.py, so the two benchmarks time the same model.
TRAIN_STEP_SHAPES = {
    "gpt2-small": {"n_layers": 12, "n_heads": 12, "d_model": 768, "block_size": 1024, "batch_size": 16,
                   "bias": False},
    "cpu-small": {"n_layers": 4, "n_heads": 4, "d_model": 256, "block_size": 256, "batch_size": 4,
                  "bias": False},
}


def naive_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention the readable way: scores, mask, softmax, weighted sum.

    Shapes:
        q, k, v: ``(B, n_heads, T, head_dim)``; returns ``(B, n_heads, T, head_dim)``.
    """
    length, head_dim = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)                    # (B, H, T, T)
    allowed = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def bench_attention(seq_lens=FULL["seq_lens"], *, batch_size: int = 4, n_heads: int = 6, head_dim: int = 64,
                    device: str | torch.device | None = None, dtype: torch.dtype = torch.float32,
                    min_run_time: float = 0.5, progress: bool = True) -> list[dict]:
    """Time naive vs fused causal self-attention (forward only) at each sequence length.

    Returns:
        One dict per length: ``seq_len``, ``batch_size``, ``naive_ms``, ``fused_ms``, ``speedup``
        (naive / fused) and ``max_abs_diff`` between the two outputs.
    """
    device = pick_device(device)
    rows = []
    for length in tqdm(seq_lens, desc="attention", disable=not progress, leave=False):
        q, k, v = (torch.randn(batch_size, n_heads, length, head_dim, device=device, dtype=dtype)
                   for _ in range(3))
        with torch.no_grad():
            diff = (naive_causal_attention(q, k, v)
                    - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max().item()
        timings = {}
        for name, stmt in (("naive", "naive_causal_attention(q, k, v)"),
                           ("fused", "F.scaled_dot_product_attention(q, k, v, is_causal=True)")):
            timer = benchmark.Timer(stmt=stmt, globals={"q": q, "k": k, "v": v, "F": F,
                                                        "naive_causal_attention": naive_causal_attention},
                                    num_threads=torch.get_num_threads())
            timings[name] = timer.blocked_autorange(min_run_time=min_run_time).median * 1e3
        rows.append({"seq_len": length, "batch_size": batch_size, "naive_ms": timings["naive"],
                     "fused_ms": timings["fused"], "speedup": timings["naive"] / timings["fused"],
                     "max_abs_diff": diff})
    return rows


def bench_generation(new_tokens: int = 512, *, prompt_len: int = 16, repeats: int = 3,
                     device: str | torch.device | None = None, seed: int = 0, vocab_size: int = 50304,
                     d_model: int = 384, n_heads: int = 6, n_layers: int = 6, progress: bool = True,
                     compiled: bool | str = False, batch_sizes: tuple[int, ...] = ()) -> dict:
    """Time greedy generation with and without the KV cache for a GPT (float32), and optionally
    compiled decoding (``generate(compile=compiled)``, timed after one call that compiles).

    The defaults are the capstone's model: 6 layers, 6 heads, width 384, GPT-2's padded vocabulary
    of 50304 tokens; smaller sizes are for quick checks.

    Returns:
        ``new_tokens``, ``prompt_len``, ``n_params``, ``cached_s`` and ``uncached_s`` (median of
        ``repeats`` runs), tokens/s of each, ``speedup`` (uncached / cached) and ``identical``
        (both produced exactly the same tokens). With ``compiled``: ``compiled_s``,
        ``compiled_tokens_per_s``, ``compiled_identical`` (same tokens as eager). Always:
        ``bytes_per_token`` (the weights plus the average filled cache, which a decode step must
        read) and, on a GPU of :data:`~course_runtime.device.PEAK_MEMORY_BANDWIDTH_GBPS`,
        ``bandwidth_limit_tokens_per_s``, the speed at which reading them would take all the time.
        With ``batch_sizes``: ``batched``, a list of ``{"batch_size", "tokens_per_s"}`` for the same
        prompt decoded as that many sequences at once (compiled decoding when ``compiled``, else cached).
    """
    from transformer_core.generation import generate
    from transformer_core.models import DecoderOnlyLM, TransformerConfig

    device = pick_device(device)
    seed_everything(seed)
    config = TransformerConfig(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                               max_len=prompt_len + new_tokens, dropout=0.0, activation="gelu",
                               norm_first=True, position="learned", tie_weights=True)
    model = DecoderOnlyLM(config).to(device).eval()
    prompt = torch.randint(config.vocab_size, (1, prompt_len), device=device)
    outputs, seconds = {}, {}
    variants = {"cached": dict(use_cache=True), "uncached": dict(use_cache=False)}
    if compiled:
        variants["compiled"] = dict(use_cache=True, compile=compiled)
    with torch.no_grad():
        for name, options in variants.items():
            warm_up = new_tokens if name == "compiled" else min(8, new_tokens)   # compiles the step once
            generate(model, prompt, warm_up, **options)
            runs = []
            for _ in tqdm(range(repeats), desc=f"generation, {name}", disable=not progress, leave=False):
                _sync(device)
                start = time.perf_counter()
                outputs[name] = generate(model, prompt, new_tokens, **options)
                _sync(device)
                runs.append(time.perf_counter() - start)
            seconds[name] = statistics.median(runs)
        batched = []
        for batch_size in batch_sizes:        # the weights are read once per step for all the sequences
            options = variants["compiled" if compiled else "cached"]
            prompts = prompt.repeat(batch_size, 1)
            generate(model, prompts, new_tokens if compiled else min(8, new_tokens), **options)    # warm-up
            _sync(device)
            start = time.perf_counter()
            generate(model, prompts, new_tokens, **options)
            _sync(device)
            batched.append({"batch_size": batch_size,
                            "tokens_per_s": batch_size * new_tokens / (time.perf_counter() - start)})
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    mean_filled = prompt_len + new_tokens / 2
    cache_bytes = 2 * n_layers * config.n_kv_heads * config.head_dim * mean_filled * 4
    bytes_per_token = weight_bytes + cache_bytes
    bandwidth = peak_memory_bandwidth(device)
    return {"new_tokens": new_tokens, "prompt_len": prompt_len, "vocab_size": vocab_size,
            "d_model": d_model, "n_heads": n_heads, "n_layers": n_layers,
            "n_params": sum(p.numel() for p in model.parameters()),
            "cached_s": seconds["cached"], "uncached_s": seconds["uncached"],
            "cached_tokens_per_s": new_tokens / seconds["cached"],
            "uncached_tokens_per_s": new_tokens / seconds["uncached"],
            "speedup": seconds["uncached"] / seconds["cached"],
            "identical": bool(torch.equal(outputs["cached"], outputs["uncached"])),
            **({"compiled_s": seconds["compiled"], "compiled_tokens_per_s": new_tokens / seconds["compiled"],
                "compiled_identical": bool(torch.equal(outputs["compiled"], outputs["cached"]))}
               if compiled else {}),
            "bytes_per_token": bytes_per_token, **({"batched": batched} if batch_sizes else {}),
            "bandwidth_limit_tokens_per_s": bandwidth / bytes_per_token if bandwidth else None}


def bench_train_step(shape: str | dict | None = None, *, steps: int = 20, warmup_steps: int = 3,
                     device: str | torch.device | None = None, dtype: str = "auto",
                     compile: bool | None = None, vocab_size: int = 50304, seed: int = 0,
                     grad_clip: float = 1.0, progress: bool = True) -> dict:
    """Time full training steps of a GPT on random tokens and report throughput and MFU.

    One step is what :func:`transformer_core.train.train` does per iteration: forward and loss
    under autocast, backward, gradient-norm clipping to 1.0, a fused AdamW update, zeroing the
    gradients. Dropout is 0 (as in the MFU figures of nanoGPT and PaLM); attention takes the fused
    ``is_causal`` path (FlashAttention on recent GPUs).

    Args:
        shape: a key of :data:`TRAIN_STEP_SHAPES` or a dict with ``n_layers``, ``n_heads``,
            ``d_model``, ``block_size``, ``batch_size`` and optionally ``bias`` (default True);
            ``None`` picks ``"gpt2-small"`` on CUDA and
            ``"cpu-small"`` elsewhere.
        steps: timed steps (after ``warmup_steps`` untimed ones, which also absorb compilation).
        device: defaults to ``pick_device()``.
        dtype: ``"auto"`` (:func:`~course_runtime.device.autocast_dtype`), ``"float32"``,
            ``"bfloat16"`` or ``"float16"`` (CUDA only, with a ``GradScaler``).
        compile: wrap the model in ``torch.compile``; ``None`` means on CUDA only.
        vocab_size: vocabulary (default GPT-2's, padded to 50304).
        grad_clip: clipping threshold of the step; ``0`` leaves clipping out, as nanoGPT's
            ``bench.py`` does, so the two loops do the same work.

    Returns:
        ``shape`` (the dict used), ``n_params``, ``dtype``, ``compiled`` and ``compile_error``
        (``torch.compile`` failing, e.g. without a C compiler or Triton, falls back to the eager
        model with a warning instead of losing the run), ``ms_per_step`` (median),
        ``tokens_per_s``, ``flops_per_token`` (``6 N + 12 L d T``,
        :func:`~transformer_core.complexity.flops_per_token`), ``achieved_tflops``,
        ``peak_tflops`` and ``mfu`` (``None`` where the peak is unknown), ``nanogpt_mfu`` (the same
        throughput counted with nanoGPT's formula,
        :func:`~transformer_core.complexity.nanogpt_flops_per_token`), ``grad_clip``, ``peak_memory_gb``
        (CUDA only, else ``None``), ``first_loss`` and ``last_loss`` (the loss must fall on a
        repeated batch: a sanity check that the step really trains).
    """
    from transformer_core import complexity
    from course_runtime.device import peak_flops
    from transformer_core.train import (TrainConfig, apply_gradients, build_model, configure_optimizer,
                                        resolve_amp_dtype)

    device = pick_device(device)
    if shape is None:
        shape = "gpt2-small" if device.type == "cuda" else "cpu-small"
    if isinstance(shape, str):
        if shape not in TRAIN_STEP_SHAPES:
            raise ValueError(f"bench_train_step: unknown shape {shape!r}; choose one of "
                             f"{sorted(TRAIN_STEP_SHAPES)} or pass a dict")
        shape = TRAIN_STEP_SHAPES[shape]
    if steps < 1 or warmup_steps < 0:
        raise ValueError(f"bench_train_step: need steps >= 1 and warmup_steps >= 0, got {steps}, {warmup_steps}")
    compiled = device.type == "cuda" if compile is None else bool(compile)
    sizes = {key: value for key, value in shape.items() if key != "bias"}
    config = TrainConfig(**sizes, dropout=0.0, dtype=dtype, compile=compiled, max_iters=steps,
                         model_options={"bias": shape.get("bias", True)})
    seed_everything(seed)
    model = build_model(config, vocab_size).to(device).train()
    amp_dtype = resolve_amp_dtype(config, device)
    forward = torch.compile(model) if compiled else model
    optimizer = configure_optimizer(model, config, device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)
    generator = torch.Generator().manual_seed(seed)
    x, y = (torch.randint(vocab_size, (config.batch_size, config.block_size), generator=generator).to(device)
            for _ in range(2))

    def step() -> torch.Tensor:
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            _, loss = forward(x, y)
        scaler.scale(loss).backward()
        apply_gradients(model, optimizer, scaler, grad_clip=grad_clip)
        return loss.detach()

    first_loss, compile_error = None, None
    if compiled:
        try:
            first_loss = step().item()                     # compiles the training graph
        except Exception as error:  # no compiler or Triton here: time the eager model, keep the rest
            compile_error = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:200]}"
            warnings.warn(f"bench_train_step: torch.compile failed ({compile_error}); timing the eager "
                          f"model instead", RuntimeWarning, stacklevel=2)
            forward, compiled = model, False
            optimizer.zero_grad(set_to_none=True)
    for _ in tqdm(range(warmup_steps), desc="train step (warm-up)", disable=not progress, leave=False):
        loss = step()
        first_loss = first_loss if first_loss is not None else loss.item()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in tqdm(range(steps), desc="train step", disable=not progress, leave=False):
        _sync(device)
        start = time.perf_counter()
        loss = step()
        _sync(device)
        times.append(time.perf_counter() - start)
        first_loss = first_loss if first_loss is not None else loss.item()
    seconds = statistics.median(times)
    tokens_per_s = config.batch_size * config.block_size / seconds
    fpt = float(complexity.flops_per_token(model.config, config.block_size, training=True))
    nanogpt_fpt = float(complexity.nanogpt_flops_per_token(model, config.block_size))
    peak = peak_flops(device, amp_dtype or torch.float32)
    return {"shape": dict(shape), "n_params": sum(p.numel() for p in model.parameters()),
            "dtype": str(amp_dtype or torch.float32).removeprefix("torch."), "compiled": compiled,
            "compile_error": compile_error,
            "ms_per_step": seconds * 1e3, "tokens_per_s": tokens_per_s, "flops_per_token": fpt,
            "achieved_tflops": tokens_per_s * fpt / 1e12,
            "peak_tflops": peak / 1e12 if peak else None,
            "mfu": complexity.mfu(tokens_per_s, fpt, peak) if peak else None,
            "nanogpt_mfu": complexity.mfu(tokens_per_s, nanogpt_fpt, peak) if peak else None,
            "grad_clip": grad_clip,
            "peak_memory_gb": torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None,
            "first_loss": first_loss, "last_loss": loss.item()}


def device_name(device: str | torch.device | None = None) -> str:
    """A readable name of the hardware: the GPU's name, or the CPU's model and thread count."""
    device = pick_device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return f"Apple MPS ({platform.machine()})"
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return f"CPU {model or platform.processor() or platform.machine()} x{torch.get_num_threads()} threads"


def device_slug(name: str | None = None) -> str:
    """``name`` (default: :func:`device_name` of the current device) as a file-name stem, e.g.
    ``"nvidia-h100-80gb-hbm3"``: lower case, runs of other characters replaced by one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", (name or device_name()).lower()).strip("-")


def run_benchmarks(*, quick: bool = False, device: str | torch.device | None = None,
                   progress: bool = True) -> dict:
    """Run the three benchmarks (``quick``: shorter sequences, batch 1, 64 new tokens, 3 training
    steps) and return the results."""
    device = pick_device(device)
    settings = QUICK if quick else FULL
    attention = bench_attention(settings["seq_lens"], batch_size=settings["batch_size"], device=device,
                                min_run_time=settings["min_run_time"], progress=progress)
    generation = bench_generation(settings["new_tokens"], repeats=settings["repeats"], device=device,
                                  progress=progress, compiled=device.type == "cuda",
                                  batch_sizes=(1, 8, 64) if device.type == "cuda" else ())
    train_step = bench_train_step(steps=settings["train_steps"], device=device, progress=progress)
    return {"device": device_name(device), "device_type": device.type, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "quick": quick,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "attention": attention, "generation": generation, "train_step": train_step}


def format_markdown(results: dict) -> str:
    """The results as Markdown: a header line and two tables."""
    load = results.get("load_average")
    lines = [f"# Benchmarks on {results['device']}", "",
             f"torch {results['torch']}, {results['threads']} threads, "
             f"{'quick' if results['quick'] else 'full'} run, {results['date']}"
             + (f", load average {load:.2f}" if load is not None else ""), "",
             "## Causal self-attention, forward, float32, 6 heads x 64", "",
             "| seq len | batch | naive (ms) | fused SDPA (ms) | speed-up | max abs diff |",
             "|---:|---:|---:|---:|---:|---:|"]
    for row in results["attention"]:
        lines.append(f"| {row['seq_len']} | {row['batch_size']} | {row['naive_ms']:.3f} | {row['fused_ms']:.3f} "
                     f"| {row['speedup']:.2f}x | {row['max_abs_diff']:.1e} |")
    gen = results["generation"]
    lines += ["", f"## Greedy generation, {gen['n_layers']} layers x {gen['d_model']}, {gen['n_heads']} heads, "
              f"vocab {gen['vocab_size']}, float32, {gen['n_params'] / 1e6:.1f}M parameters, "
              f"prompt {gen['prompt_len']}, {gen['new_tokens']} new tokens", "",
              "| KV cache | time (s) | tokens/s |", "|---|---:|---:|",
              f"| on | {gen['cached_s']:.3f} | {gen['cached_tokens_per_s']:.1f} |",
              f"| off | {gen['uncached_s']:.3f} | {gen['uncached_tokens_per_s']:.1f} |"]
    if "compiled_s" in gen:
        lines.append(f"| on, compiled step | {gen['compiled_s']:.3f} | {gen['compiled_tokens_per_s']:.1f} |")
    lines += ["", f"Speed-up from the cache: {gen['speedup']:.2f}x; identical tokens: {gen['identical']}."]
    if "compiled_s" in gen:
        lines.append(f"Compiled decoding: {gen['compiled_tokens_per_s'] / gen['uncached_tokens_per_s']:.1f}x the "
                     f"uncached speed; identical tokens: {gen['compiled_identical']}.")
    limit = gen.get("bandwidth_limit_tokens_per_s")
    if limit:
        best = gen.get("compiled_tokens_per_s", gen["cached_tokens_per_s"])
        lines.append(f"Memory-bandwidth limit: {limit:,.0f} tokens/s ({gen['bytes_per_token'] / 1e6:.0f} MB read "
                     f"per token); the fastest decoding above reaches {100 * best / limit:.1f}% of it.")
    if gen.get("batched"):
        lines += ["", "| batch | tokens/s (all sequences) |", "|---:|---:|"]
        lines += [f"| {row['batch_size']} | {row['tokens_per_s']:,.0f} |" for row in gen["batched"]]
    lines.append("")
    if "train_step" in results:
        lines += _train_step_markdown(results["train_step"])
    return "\n".join(lines)


def _train_step_markdown(step: dict) -> list[str]:
    shape = step["shape"]

    def optional(value, fmt):
        return "n/a" if value is None else format(value, fmt)
    clip = "clip, " if step.get("grad_clip", 1.0) > 0 else ""
    lines = [f"## Training step (forward, backward, {clip}fused AdamW)", "",
             f"{shape['n_layers']} layers x {shape['d_model']}, {shape['n_heads']} heads, context "
             f"{shape['block_size']}, batch {shape['batch_size']}, {step['n_params'] / 1e6:.1f}M parameters"
             f"{'' if shape.get('bias', True) else ' (no biases)'}, "
             f"{step['dtype']}{', torch.compile' if step['compiled'] else ''}; FLOPs per token "
             f"6N + 12LdT = {step['flops_per_token'] / 1e6:.1f}M", "",
             "| ms/step | tokens/s | achieved TFLOP/s | peak TFLOP/s | MFU | MFU, nanoGPT's formula "
             "| peak memory (GB) |",
             "|---:|---:|---:|---:|---:|---:|---:|",
             f"| {step['ms_per_step']:.1f} | {step['tokens_per_s']:,.0f} | {step['achieved_tflops']:.2f} "
             f"| {optional(step['peak_tflops'], '.0f')} | {optional(step['mfu'], '.1%')} "
             f"| {optional(step.get('nanogpt_mfu'), '.1%')} | {optional(step['peak_memory_gb'], '.1f')} |", "",
             "nanoGPT's formula (`estimate_mfu`) counts every parameter but the position table, norms and "
             "biases included, against the same peak.", "",
             f"Loss on the repeated batch: {step['first_loss']:.3f} -> {step['last_loss']:.3f}."]
    if step.get("compile_error"):
        lines.append(f"torch.compile failed ({step['compile_error']}); these are eager timings.")
    return lines + [""]


def save_results(results: dict, out_dir: str | os.PathLike = "benchmarks/results") -> tuple[pathlib.Path, pathlib.Path]:
    """Write ``<out_dir>/<device-slug>[-quick].json`` and ``.md``; returns both paths."""
    stem = device_slug(results["device"]) + ("-quick" if results["quick"] else "")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    json_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(format_markdown(results), encoding="utf-8")
    return json_path, md_path

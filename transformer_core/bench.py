"""The benchmarks behind ``python -m transformer_core bench``.

Two measurements the course makes claims about:

1. **Attention**: naive attention (explicit ``softmax(Q K^T / sqrt(d)) V`` with a causal mask,
   which materialises the ``T x T`` score matrix) against PyTorch's fused
   ``F.scaled_dot_product_attention`` (FlashAttention / memory-efficient kernels on GPUs), at several
   sequence lengths, 6 heads of width 64. The outputs are checked to agree.
2. **KV cache**: greedy generation with and without the cache for a GPT-2-like
   ``DecoderOnlyLM`` (6 layers, 6 heads, width 384, vocabulary 50304, float32, a 16-token prompt),
   with the speed-up and a check that both produce identical tokens.

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

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark
from tqdm.auto import tqdm

from transformer_core.device import pick_device, seed_everything

__all__ = [
    "naive_causal_attention",
    "bench_attention",
    "bench_generation",
    "device_name",
    "run_benchmarks",
    "format_markdown",
    "save_results",
]

FULL = {"seq_lens": (128, 256, 512, 1024), "batch_size": 4, "new_tokens": 512, "min_run_time": 0.5,
        "repeats": 3}
QUICK = {"seq_lens": (128, 256, 512), "batch_size": 1, "new_tokens": 64, "min_run_time": 0.1,
         "repeats": 1}


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
                     d_model: int = 384, n_heads: int = 6, n_layers: int = 6) -> dict:
    """Time greedy generation with and without the KV cache for a GPT (float32).

    The defaults are the capstone's model: 6 layers, 6 heads, width 384, GPT-2's padded vocabulary
    of 50304 tokens; smaller sizes are for quick checks.

    Returns:
        ``new_tokens``, ``prompt_len``, ``n_params``, ``cached_s`` and ``uncached_s`` (median of
        ``repeats`` runs), tokens/s of each, ``speedup`` (uncached / cached) and ``identical``
        (both produced exactly the same tokens).
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
    with torch.no_grad():
        for use_cache in (True, False):
            generate(model, prompt, min(8, new_tokens), use_cache=use_cache)     # warm-up
            runs = []
            for _ in range(repeats):
                _sync(device)
                start = time.perf_counter()
                outputs[use_cache] = generate(model, prompt, new_tokens, use_cache=use_cache)
                _sync(device)
                runs.append(time.perf_counter() - start)
            seconds[use_cache] = statistics.median(runs)
    return {"new_tokens": new_tokens, "prompt_len": prompt_len, "vocab_size": vocab_size,
            "d_model": d_model, "n_heads": n_heads, "n_layers": n_layers,
            "n_params": sum(p.numel() for p in model.parameters()),
            "cached_s": seconds[True], "uncached_s": seconds[False],
            "cached_tokens_per_s": new_tokens / seconds[True],
            "uncached_tokens_per_s": new_tokens / seconds[False],
            "speedup": seconds[False] / seconds[True],
            "identical": bool(torch.equal(outputs[True], outputs[False]))}


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


def run_benchmarks(*, quick: bool = False, device: str | torch.device | None = None,
                   progress: bool = True) -> dict:
    """Run both benchmarks (``quick``: shorter sequences, batch 1, 64 new tokens) and return the results."""
    device = pick_device(device)
    settings = QUICK if quick else FULL
    attention = bench_attention(settings["seq_lens"], batch_size=settings["batch_size"], device=device,
                                min_run_time=settings["min_run_time"], progress=progress)
    generation = bench_generation(settings["new_tokens"], repeats=settings["repeats"], device=device)
    return {"device": device_name(device), "device_type": device.type, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "quick": quick,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "attention": attention, "generation": generation}


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
              f"| off | {gen['uncached_s']:.3f} | {gen['uncached_tokens_per_s']:.1f} |", "",
              f"Speed-up from the cache: {gen['speedup']:.2f}x; identical tokens: {gen['identical']}.", ""]
    return "\n".join(lines)


def save_results(results: dict, out_dir: str | os.PathLike = "benchmarks/results") -> tuple[pathlib.Path, pathlib.Path]:
    """Write ``<out_dir>/<device-slug>[-quick].json`` and ``.md``; returns both paths."""
    slug = re.sub(r"[^a-z0-9]+", "-", results["device"].lower()).strip("-")
    stem = slug + ("-quick" if results["quick"] else "")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    json_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(format_markdown(results), encoding="utf-8")
    return json_path, md_path

"""Train nanoGPT's Shakespeare-char recipe and this project's preset of the same recipe back to back,
on the same device, and print the wall times and validation losses side by side.

nanoGPT is not part of this repository: give the path of a checkout (its commit is recorded).

    python benchmarks/vs_nanogpt.py --nanogpt ~/nanoGPT --data tinyshakespeare.txt             # CPU recipe
    python benchmarks/vs_nanogpt.py --nanogpt ~/nanoGPT --data tinyshakespeare.txt --recipe gpu
    python benchmarks/vs_nanogpt.py --nanogpt ~/nanoGPT --recipe step                          # CUDA only

The CPU recipe is the one nanoGPT's README gives for a laptop (4 layers, 4 heads, width 128, context
64, batch 12, 2000 steps, no dropout); the GPU recipe is its config/train_shakespeare_char.py as
shipped. This project's presets are shakespeare-cpu and shakespeare-gpu. The step recipe times one
training step of GPT-2 small (bf16, torch.compile, batch 16 x 1024, no biases) with nanoGPT's bench.py
and with `transformer_core.bench.bench_train_step`, both without clipping (nanoGPT's loop has none) and
ours also with it, and prints both MFU formulas. The table goes to stdout and to
benchmarks/results/vs-nanogpt-<recipe>-<device>.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_runtime.data import tiny_shakespeare  # noqa: E402
from transformer_core.bench import device_name  # noqa: E402
from course_runtime.device import pick_device  # noqa: E402

NANOGPT_ARGS = {
    "cpu": ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
            "--log_interval=100", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
            "--n_embd=128", "--max_iters=2000", "--lr_decay_iters=2000", "--dropout=0.0"],
    "gpu": ["config/train_shakespeare_char.py"],
}
PRESET = {"cpu": "shakespeare-cpu", "gpu": "shakespeare-gpu"}
STEP_LINE = re.compile(r"step\s+(\d+): train loss ([\d.]+), val loss ([\d.]+)")
# nanoGPT's bench.py: GPT-2 small without biases, bf16, compiled, random tokens; it prints this line.
NANOGPT_BENCH_ARGS = ["--batch_size=16", "--real_data=False", "--compile=True"]
BENCH_LINE = re.compile(r"time per iteration: ([\d.]+)ms, MFU: ([\d.]+)%")
NANOGPT_PEAK = 312e12      # bench.py's MFU is against the A100's bf16 peak, whatever the GPU


def _commit(checkout: pathlib.Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def _timed(command: list[str], cwd: pathlib.Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def _last_step(output: str, who: str) -> tuple[int, float, float]:
    steps = STEP_LINE.findall(output)
    if not steps:
        raise SystemExit(f"{who} printed no 'step N: train loss X, val loss Y' line")
    step, train_loss, val_loss = steps[-1]
    return int(step), float(train_loss), float(val_loss)


def _training_rows(args, checkout: pathlib.Path, device) -> list[str]:
    """The cpu and gpu recipes: both trainers' whole commands, back to back."""
    data_dir = checkout / "data" / "shakespeare_char"
    (data_dir / "input.txt").write_text(tiny_shakespeare(path=args.data), encoding="utf-8")   # prepare.py skips its download
    subprocess.run([sys.executable, "prepare.py"], cwd=data_dir, check=True, capture_output=True)
    shutil.rmtree(data_dir / "__pycache__", ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="vs-nanogpt-") as tmp:
        nano_args = NANOGPT_ARGS[args.recipe] + [f"--out_dir={tmp}/nanogpt"]
        nano_s, nano_out = _timed([sys.executable, "train.py", *nano_args], checkout)
        ours_s, ours_out = _timed([sys.executable, "-m", "transformer_core", "train", "--preset", PRESET[args.recipe],
                                   "--data", str(args.data.resolve()), "--out", f"{tmp}/ours", "--quiet",
                                   "--device", device.type], ROOT)
    nano_step, _, nano_val = _last_step(nano_out, "nanoGPT")
    ours_step, _, ours_val = _last_step(ours_out, "transformer_core")
    return [
        "| | wall time, whole command (s) | last step | val loss at the last step |",
        "|---|---:|---:|---:|",
        f"| nanoGPT `train.py {' '.join(NANOGPT_ARGS[args.recipe])}` | {nano_s:.1f} | {nano_step} | {nano_val:.4f} |",
        f"| this project, `train --preset {PRESET[args.recipe]}` | {ours_s:.1f} | {ours_step} | {ours_val:.4f} |",
        "",
        f"Ratio of wall times (nanoGPT / this project): **{nano_s / ours_s:.2f}**. Each loss is the mean over the "
        "evaluation batches of its own trainer (nanoGPT: eval_iters random batches; this project: the preset's "
        "fixed batches), so losses within a few hundredths are equal within the noise of that estimate.",
    ]


def _step_rows(checkout: pathlib.Path, device, *, shape: str | dict = "gpt2-small", compile: bool = True) -> list[str]:
    """The step recipe: nanoGPT's bench.py, then this project's step without and with clipping
    (``shape`` and ``compile`` are for tests; nanoGPT's side is always its own GPT-2-small run)."""
    from transformer_core.bench import bench_train_step
    from course_runtime.device import peak_flops

    _, out = _timed([sys.executable, "bench.py", *NANOGPT_BENCH_ARGS], checkout)
    found = BENCH_LINE.findall(out)
    if not found:
        raise SystemExit("nanoGPT's bench.py printed no 'time per iteration: Xms, MFU: Y%' line")
    nano_ms, nano_a100_mfu = float(found[-1][0]), float(found[-1][1]) / 100
    ours = {clip: bench_train_step(shape, device=device, dtype="bfloat16", compile=compile, grad_clip=clip,
                                   progress=False) for clip in (0.0, 1.0)}
    peak = peak_flops(device, torch.bfloat16)
    nano_mfu = nano_a100_mfu * NANOGPT_PEAK / peak if peak else None

    def percent(value):
        return "n/a" if value is None else f"{value:.1%}"
    rows = [
        f"GPT-2 small's shape without biases, bf16, torch.compile, batch 16 x 1024, peak "
        f"{'unknown' if peak is None else f'{peak / 1e12:.0f} TFLOP/s'}.", "",
        "| | ms/step | MFU, nanoGPT's formula | MFU, this project's formula (6N + 12LdT) |",
        "|---|---:|---:|---:|",
        f"| nanoGPT `bench.py {' '.join(NANOGPT_BENCH_ARGS)}` (no clipping) | {nano_ms:.1f} | {percent(nano_mfu)} | |",
    ]
    for clip, step in ours.items():
        what = "the same loop, no clipping" if clip == 0 else "the training loop's step, clipping to 1.0"
        rows.append(f"| this project, {what} | {step['ms_per_step']:.1f} | {percent(step['nanogpt_mfu'])} "
                    f"| {percent(step['mfu'])} |")
    rows += ["", f"Ratio of step times without clipping (nanoGPT / this project): "
                 f"**{nano_ms / ours[0.0]['ms_per_step']:.2f}**. nanoGPT's bench.py reports its MFU against the "
                 f"A100's 312 TFLOP/s; the column above rescales it to this device's peak."]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", required=True, type=pathlib.Path, help="a nanoGPT checkout")
    parser.add_argument("--data", type=pathlib.Path, help="Tiny Shakespeare (checksum verified); "
                        "needed by the cpu and gpu recipes")
    parser.add_argument("--recipe", choices=("cpu", "gpu", "step"), default="cpu")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    checkout = args.nanogpt.expanduser().resolve()
    if not (checkout / "train.py").is_file():
        parser.error(f"--nanogpt {checkout}: no train.py there; give the folder of a nanoGPT checkout")
    if args.recipe != "step" and args.data is None:
        parser.error(f"--recipe {args.recipe} trains on Tiny Shakespeare: give its path with --data")
    device = pick_device("cpu" if args.recipe == "cpu" else None)
    if args.recipe == "step" and device.type != "cuda":
        parser.error("--recipe step times nanoGPT's bench.py, which runs on CUDA only; no CUDA GPU was found")
    rows = _step_rows(checkout, device) if args.recipe == "step" else _training_rows(args, checkout, device)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    data = "" if args.recipe == "step" else " --data tinyshakespeare.txt"
    lines = [
        f"# nanoGPT and this project, same recipe ({args.recipe}), back to back on {device_name(device)}", "",
        f"{date}; load average {load:.2f} at the end; nanoGPT commit `{_commit(checkout)}`; "
        f"command: `python benchmarks/vs_nanogpt.py --nanogpt PATH{data} --recipe {args.recipe}`", "", *rows]
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^a-z0-9]+", "-", device_name(device).lower()).strip("-")
    path = args.out / f"vs-nanogpt-{args.recipe}-{name}.md"
    path.write_text(table, encoding="utf-8")
    print(f"saved {path}")


if __name__ == "__main__":
    main()

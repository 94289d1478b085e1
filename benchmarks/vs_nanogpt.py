"""Train nanoGPT's Shakespeare-char recipe and this project's preset of the same recipe back to back,
on the same device, and print the wall times and validation losses side by side.

nanoGPT is not part of this repository: give the path of a checkout (its commit is recorded).

    python benchmarks/vs_nanogpt.py --nanogpt ~/nanoGPT --data tinyshakespeare.txt --rounds 3  # CPU recipe
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


def _training_rows(args, checkout: pathlib.Path, device, *, on_round=None) -> list[str]:
    """The cpu and gpu recipes: both trainers' whole commands, ``args.rounds`` times, alternating which
    goes first (odd rounds nanoGPT, even rounds this project), so that a machine whose load drifts
    during the run does not favour one side. ``on_round(rows)`` is called with the table so far after
    each round (the table is saved as it grows)."""
    data_dir = checkout / "data" / "shakespeare_char"
    (data_dir / "input.txt").write_text(tiny_shakespeare(path=args.data), encoding="utf-8")   # prepare.py skips its download
    subprocess.run([sys.executable, "prepare.py"], cwd=data_dir, check=True, capture_output=True)
    shutil.rmtree(data_dir / "__pycache__", ignore_errors=True)
    nano_cmd = [sys.executable, "train.py", *NANOGPT_ARGS[args.recipe]]
    ours_cmd = [sys.executable, "-m", "transformer_core", "train", "--preset", PRESET[args.recipe],
                "--data", str(args.data.resolve()), "--quiet", "--device", device.type]
    results = []       # (round, nano_s, nano_val, nano_step, ours_s, ours_val, ours_step, load)
    with tempfile.TemporaryDirectory(prefix="vs-nanogpt-") as tmp:
        for round_ in range(1, args.rounds + 1):
            runs = {}
            order = ("nanoGPT", "ours") if round_ % 2 else ("ours", "nanoGPT")
            for who in order:
                if who == "nanoGPT":
                    runs[who] = _timed(nano_cmd + [f"--out_dir={tmp}/nanogpt{round_}"], checkout)
                else:
                    runs[who] = _timed(ours_cmd + ["--out", f"{tmp}/ours{round_}"], ROOT)
            nano_step, _, nano_val = _last_step(runs["nanoGPT"][1], "nanoGPT")
            ours_step, _, ours_val = _last_step(runs["ours"][1], "transformer_core")
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            results.append((round_, order[0], runs["nanoGPT"][0], nano_val, nano_step, runs["ours"][0], ours_val,
                            ours_step, load))
            r = results[-1]
            print(f"round {round_} ({order[0]} first): nanoGPT {r[2]:.1f} s, val {r[3]:.4f}; this project "
                  f"{r[5]:.1f} s, val {r[6]:.4f}; ratio {r[5] / r[2]:.2f}; load {load:.2f}", flush=True)
            if on_round is not None:
                on_round(_round_table(args, results))
    return _round_table(args, results)


def _round_table(args, results) -> list[str]:
    rows = [
        f"nanoGPT: `train.py {' '.join(NANOGPT_ARGS[args.recipe])}`; this project: "
        f"`python -m transformer_core train --preset {PRESET[args.recipe]}`. Wall time of each whole command.", "",
        "| round | first | nanoGPT (s) | nanoGPT val loss | this project (s) | this project val loss | "
        "ratio (this project / nanoGPT) | val loss difference | load average after |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for round_, first, nano_s, nano_val, nano_step, ours_s, ours_val, ours_step, load in results:
        rows.append(f"| {round_} | {first} | {nano_s:.1f} | {nano_val:.4f} | {ours_s:.1f} | {ours_val:.4f} | "
                    f"{ours_s / nano_s:.2f} | {ours_val - nano_val:+.4f} | {load:.2f} |")
    nano_total = sum(r[2] for r in results)
    ours_total = sum(r[5] for r in results)
    ratios = sorted(r[5] / r[2] for r in results)
    nano_mean = sum(r[3] for r in results) / len(results)
    ours_mean = sum(r[6] for r in results) / len(results)
    rows += [
        f"| all | | {nano_total:.1f} | {nano_mean:.4f} | {ours_total:.1f} | {ours_mean:.4f} | "
        f"**{ours_total / nano_total:.2f}** | {ours_mean - nano_mean:+.4f} | |",
        "",
        f"Overall ratio of wall times (this project / nanoGPT, sums over {len(results)} round(s)): "
        f"**{ours_total / nano_total:.2f}**; per round {min(ratios):.2f} to {max(ratios):.2f}, median "
        f"{ratios[len(ratios) // 2]:.2f}. Last steps: nanoGPT {results[-1][4]}, this project {results[-1][7]}. "
        "Each loss is the mean over the evaluation batches of its own trainer at the last step (nanoGPT: "
        "eval_iters random batches; this project: the preset's fixed batches of the same number and size), so "
        "losses within a few hundredths are equal within the noise of that estimate.",
    ]
    return rows


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



def _earlier_sections(path: pathlib.Path, title: str, heading: str) -> str:
    """The sections of earlier runs in ``path`` (everything after its title), to keep below a new run's."""
    if not path.exists():
        return ""
    text = path.read_text(encoding="utf-8")
    if text.startswith(title):
        text = text[len(title):]
    text = text.strip("\n")
    if text.startswith(heading):          # a rerun within the same minute replaces its own section
        text = text[text.find("\n## ", 1) + 1:] if "\n## " in text else ""
    return "\n" + text + "\n" if text else ""

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", required=True, type=pathlib.Path, help="a nanoGPT checkout")
    parser.add_argument("--data", type=pathlib.Path, help="Tiny Shakespeare (checksum verified); "
                        "needed by the cpu and gpu recipes")
    parser.add_argument("--recipe", choices=("cpu", "gpu", "step"), default="cpu")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of both trainers (cpu, gpu)")
    parser.add_argument("--note", default="", help="a sentence for the saved table, e.g. who else used the machine")
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
    name = re.sub(r"[^a-z0-9]+", "-", device_name(device).lower()).strip("-")
    path = args.out / f"vs-nanogpt-{args.recipe}-{name}.md"
    data = "" if args.recipe == "step" else " --data tinyshakespeare.txt"
    rounds = "" if args.recipe == "step" else f" --rounds {args.rounds}"

    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"# nanoGPT and this project, same recipe ({args.recipe}), side by side on {device_name(device)}"
    heading = f"## {started}"
    earlier = _earlier_sections(path, title, heading)

    def table(rows: list[str]) -> str:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        lines = [
            title, "", heading, "",
            f"{os.cpu_count()} logical CPUs; load average {load:.2f} at the end; torch {torch.__version__}; "
            f"nanoGPT commit `{_commit(checkout)}`; command: "
            f"`python benchmarks/vs_nanogpt.py --nanogpt PATH{data} --recipe {args.recipe}{rounds}`", ""]
        if args.note:
            lines += [args.note, ""]
        return "\n".join(lines + rows) + "\n"

    def save(rows: list[str]) -> None:
        """This run's section first (rewritten after each round), the earlier runs' sections kept below it."""
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(table(rows) + earlier, encoding="utf-8")

    if args.recipe == "step":
        rows = _step_rows(checkout, device)
    else:
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        rows = _training_rows(args, checkout, device, on_round=save)
    print(table(rows))
    save(rows)
    print(f"saved {path}")

if __name__ == "__main__":
    main()

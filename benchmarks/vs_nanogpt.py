"""Train nanoGPT's Shakespeare-char recipe and this project's preset of the same recipe back to back,
on the same device, and print the wall times and validation losses side by side.

nanoGPT is not part of this repository: give the path of a checkout (its commit is recorded).

    python benchmarks/vs_nanogpt.py --nanogpt ~/nanoGPT --data tinyshakespeare.txt             # CPU recipe
    python benchmarks/vs_nanogpt.py --nanogpt ~/nanoGPT --data tinyshakespeare.txt --recipe gpu

The CPU recipe is the one nanoGPT's README gives for a laptop (4 layers, 4 heads, width 128, context
64, batch 12, 2000 steps, no dropout); the GPU recipe is its config/train_shakespeare_char.py as
shipped. This project's presets are shakespeare-cpu and shakespeare-gpu. The table goes to stdout and
to benchmarks/results/vs-nanogpt-<recipe>-<device>.md.
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

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformer_core.data import tiny_shakespeare  # noqa: E402
from transformer_core.bench import device_name  # noqa: E402
from transformer_core.device import pick_device  # noqa: E402

NANOGPT_ARGS = {
    "cpu": ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
            "--log_interval=100", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
            "--n_embd=128", "--max_iters=2000", "--lr_decay_iters=2000", "--dropout=0.0"],
    "gpu": ["config/train_shakespeare_char.py"],
}
PRESET = {"cpu": "shakespeare-cpu", "gpu": "shakespeare-gpu"}
STEP_LINE = re.compile(r"step\s+(\d+): train loss ([\d.]+), val loss ([\d.]+)")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", required=True, type=pathlib.Path, help="a nanoGPT checkout")
    parser.add_argument("--data", required=True, type=pathlib.Path, help="Tiny Shakespeare (checksum verified)")
    parser.add_argument("--recipe", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    checkout = args.nanogpt.expanduser().resolve()
    if not (checkout / "train.py").is_file():
        parser.error(f"--nanogpt {checkout}: no train.py there; give the folder of a nanoGPT checkout")
    text = tiny_shakespeare(path=args.data)                  # raises unless it is the right file
    device = pick_device("cpu" if args.recipe == "cpu" else None)

    data_dir = checkout / "data" / "shakespeare_char"
    (data_dir / "input.txt").write_text(text, encoding="utf-8")          # prepare.py then skips its download
    subprocess.run([sys.executable, "prepare.py"], cwd=data_dir, check=True, capture_output=True)

    with tempfile.TemporaryDirectory(prefix="vs-nanogpt-") as tmp:
        nano_args = NANOGPT_ARGS[args.recipe] + [f"--out_dir={tmp}/nanogpt"]
        nano_s, nano_out = _timed([sys.executable, "train.py", *nano_args], checkout)
        ours_s, ours_out = _timed([sys.executable, "-m", "transformer_core", "train", "--preset", PRESET[args.recipe],
                                   "--data", str(args.data.resolve()), "--out", f"{tmp}/ours", "--quiet",
                                   "--device", device.type], ROOT)
    nano_step, _, nano_val = _last_step(nano_out, "nanoGPT")
    ours_step, _, ours_val = _last_step(ours_out, "transformer_core")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"# nanoGPT and this project, same recipe ({args.recipe}), back to back on {device_name(device)}", "",
        f"{date}; load average {load:.2f} at the end; nanoGPT commit `{_commit(checkout)}`; "
        f"command: `python benchmarks/vs_nanogpt.py --nanogpt PATH --data tinyshakespeare.txt --recipe {args.recipe}`",
        "",
        "| | wall time, whole command (s) | last step | val loss at the last step |",
        "|---|---:|---:|---:|",
        f"| nanoGPT `train.py {' '.join(NANOGPT_ARGS[args.recipe])}` | {nano_s:.1f} | {nano_step} | {nano_val:.4f} |",
        f"| this project, `train --preset {PRESET[args.recipe]}` | {ours_s:.1f} | {ours_step} | {ours_val:.4f} |",
        "",
        f"Ratio of wall times (nanoGPT / this project): **{nano_s / ours_s:.2f}**. Each loss is the mean over the "
        "evaluation batches of its own trainer (nanoGPT: eval_iters random batches; this project: the preset's "
        "fixed batches), so losses within a few hundredths are equal within the noise of that estimate.",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^a-z0-9]+", "-", device_name(device).lower()).strip("-")
    path = args.out / f"vs-nanogpt-{args.recipe}-{name}.md"
    path.write_text(table, encoding="utf-8")
    print(f"saved {path}")
    shutil.rmtree(data_dir / "__pycache__", ignore_errors=True)


if __name__ == "__main__":
    main()

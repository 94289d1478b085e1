"""Execute every chapter and solution notebook and print how long each takes.

    .venv/bin/python benchmarks/notebook_times.py [--only 02-self-attention ...]

Each notebook runs in a fresh kernel in its own folder, as the book build and the autograder run it.
The table is printed and saved to ``benchmarks/results/notebook-times-<device-slug>.md`` (``--out``
chooses the folder) together with the
machine's load average at the start and the end, since a busy machine slows every row.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import nbclient
import nbformat
from tqdm import tqdm

from transformer_core.bench import device_name, device_slug

ROOT = pathlib.Path(__file__).resolve().parents[1]


def notebooks(only: list[str]) -> list[pathlib.Path]:
    """The chapter pages under book/ and the nbgrader sources under solutions/, in course order."""
    found = sorted(ROOT.glob("book/[0-9][0-9]-*.ipynb")) + sorted(ROOT.glob("solutions/*/*.ipynb"))
    return [path for path in found if not only or any(name in str(path) for name in only)]


def execute(path: pathlib.Path, timeout: int) -> tuple[float, str]:
    """Run one notebook; return (seconds, "ok" or the error's first line)."""
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    try:
        client.execute()
        status = "ok"
    except Exception as error:  # a failing notebook is a row in the table, not the end of the run
        status = f"{type(error).__name__}: {str(error).strip().splitlines()[-1][:80]}"
    return time.perf_counter() - start, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="substrings of the paths to run")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results",
                        help="folder for the table (default: benchmarks/results)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    for path in tqdm(notebooks(args.only), desc="notebooks", unit="nb"):
        seconds, status = execute(path, args.timeout)
        rows.append((path.relative_to(ROOT).as_posix(), seconds, status))
    load_after = os.getloadavg()[0]
    lines = [f"Notebook execution times on {device_name()} (load average {load_before:.1f} at the "
             f"start, {load_after:.1f} at the end; {os.cpu_count()} logical cores).", "",
             "| notebook | seconds | status |", "|---|---:|---|"]
    lines += [f"| {name} | {seconds:.1f} | {status} |" for name, seconds, status in rows]
    table = "\n".join(lines) + "\n"
    print(table)
    out = args.out / f"notebook-times-{device_slug()}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table, encoding="utf-8")
    print(f"saved to {out}")


if __name__ == "__main__":
    main()

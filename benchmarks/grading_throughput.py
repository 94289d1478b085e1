"""How fast the autograder grades honest submissions: a table of wall time and submissions per minute.

Grades N copies of an assignment's solution (full marks expected) with ``--jobs 1`` and with
``--jobs 2`` (or the values given), each into a fresh output folder, through the same function the
command line uses, and prints a Markdown table. Every copy must get full marks, or the run fails.

    python benchmarks/grading_throughput.py                        # 8 copies of 02-self-attention
    python benchmarks/grading_throughput.py --assignment 05-transformer-block --copies 4 --jobs 1 2 4
"""

from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from pathlib import Path

from autograder.batch import grade
from autograder.notebooks import REPO_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", default="02-self-attention")
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    notebook = next((REPO_ROOT / "solutions" / args.assignment).glob("*.ipynb"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        subs = Path(tmp) / "subs"
        for index in range(args.copies):
            (subs / f"learner{index:02d}").mkdir(parents=True)
            shutil.copy(notebook, subs / f"learner{index:02d}" / notebook.name)
        for jobs in args.jobs:
            out = Path(tmp) / f"out-{jobs}"
            start = time.perf_counter()
            results = grade(subs, args.assignment, out, jobs=jobs, progress=False)
            wall = time.perf_counter() - start
            wrong = [r.student for r in results if r.score != r.max_score]
            if wrong:
                raise SystemExit(f"not full marks for {wrong}: the benchmark needs honest submissions")
            per_submission = sum(r.seconds for r in results) / len(results)
            rows.append((jobs, wall, 60 * len(results) / wall, per_submission))
    print(f"{args.copies} copies of solutions/{args.assignment} on {platform.node() or 'this machine'} "
          f"({platform.processor() or platform.machine()}):\n")
    print("| jobs | wall time | submissions per minute | seconds per submission (each) |")
    print("|---|---|---|---|")
    for jobs, wall, per_minute, each in rows:
        print(f"| `--jobs {jobs}` | {wall:.1f} s | {per_minute:.1f} | {each:.1f} |")


if __name__ == "__main__":
    main()

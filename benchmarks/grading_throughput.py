"""How fast the autograder grades honest submissions, next to plain ``nbgrader autograde``, in one run.

Grades N copies of an assignment's solution (every automatically graded cell must get full marks,
in both graders, or the run fails):

1. with this grader (``python -m autograder grade``'s function, the default options unless
   ``--jobs`` is given; warm kernels from the fork server unless ``--cold``), each run into a fresh
   output folder with a fresh fork server, so its warm-up is counted;
2. with plain ``nbgrader autograde`` through nbgrader's own converter, in a throwaway course folder
   made from the same solution notebook (:func:`autograder.course.release.build_course`), one kernel per
   notebook with the tests inside it, as nbgrader does;

and prints a Markdown table with both times, their ratio and this grader's requests to the
grading agent per submission. ``--record`` appends it to ``benchmarks/results/grading-throughput.md``.

    python benchmarks/grading_throughput.py                         # 8 copies of 02-self-attention
    python benchmarks/grading_throughput.py --jobs 1 2 3 4 --cold   # also cold kernels, several --jobs
    python benchmarks/grading_throughput.py --rounds 3              # alternate the graders three times
    FULL_CLASS=1 python benchmarks/grading_throughput.py            # a class of 300, this grader only
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from autograder.core.files import REPO_ROOT  # noqa: E402
from autograder.engine import runner  # noqa: E402
from autograder.engine.batch import default_jobs, grade  # noqa: E402

RESULTS = REPO_ROOT / "benchmarks" / "results" / "grading-throughput.md"


def full_marks(result) -> bool:
    """Graded, and every automatically graded cell at its maximum (hand-graded cells are None)."""
    return result.graded and all(score == result.cell_max_scores[key]
                                 for key, score in result.cells.items() if score is not None)


def ours(subs: Path, out: Path, assignment: str, jobs: int | None, *, cold: bool) -> dict:
    """Grade with this grader; return the row's numbers."""
    runner.FORK_SERVER.stop()  # each run pays its own warm-up
    saved = os.environ.get("AUTOGRADER_COLD_KERNELS")
    if cold:
        os.environ["AUTOGRADER_COLD_KERNELS"] = "1"
    before = dict(runner.STATS)
    try:
        start = time.perf_counter()
        results = grade(subs, assignment, out, jobs=jobs, progress=False)
        wall = time.perf_counter() - start
    finally:
        if saved is None:
            os.environ.pop("AUTOGRADER_COLD_KERNELS", None)
        else:
            os.environ["AUTOGRADER_COLD_KERNELS"] = saved
        runner.FORK_SERVER.stop()
    wrong = [r.student for r in results if not full_marks(r)]
    if wrong:
        raise SystemExit(f"this grader did not give full marks to {wrong}: the benchmark needs honest submissions")
    count = len(results)
    requests = (runner.STATS["requests"] - before["requests"]) / count
    warm = runner.STATS["warm_kernels"] - before["warm_kernels"]
    kernels = runner.STATS["kernels"] - before["kernels"]
    label = f"this grader, {'cold' if cold else 'warm'} kernels ({warm} of {kernels} warm)"
    return {"grader": label, "jobs": jobs or default_jobs(), "default": jobs is None, "wall": wall, "count": count,
            "requests": requests}


def nbgrader(notebook: Path, copies: int, course: Path, assignment: str) -> dict:
    """Grade the same copies with ``nbgrader autograde`` in a throwaway course folder."""
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde

    from autograder.course.release import build_course, run_converter

    config = build_course(assignment, course)
    config.Autograde.create_student = True
    for index in range(copies):
        folder = course / "submitted" / f"learner{index:03d}" / assignment
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / notebook.name)
    start = time.perf_counter()
    run_converter(Autograde, config, assignment=assignment)
    wall = time.perf_counter() - start
    wrong = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for index in range(copies):
            student = f"learner{index:03d}"
            graded = gradebook.find_submission_notebook(notebook.stem, assignment, student)
            if any(g.auto_score is not None and g.auto_score != g.max_score for g in graded.grades) or not any(
                    g.auto_score is not None for g in graded.grades):
                wrong.append(student)
    if wrong:
        raise SystemExit(f"nbgrader did not give full marks to {wrong}: check the course set-up")
    return {"grader": "plain `nbgrader autograde`", "jobs": 1, "default": True, "wall": wall, "count": copies,
            "requests": None}


def table(rounds: list[tuple[list[dict], dict | None]]) -> str:
    """One row per measurement; each ratio is to nbgrader's time in the same round."""
    lines = ["| round | grader | jobs | wall time | submissions per minute | requests per submission "
             "| time / nbgrader's |", "|---|---|---|---|---|---|---|"]
    for number, (rows, reference) in enumerate(rounds, 1):
        for row in rows:
            ratio = f"{row['wall'] / reference['wall']:.2f}" if reference else "-"
            jobs = f"{row['jobs']}{' (default)' if row['default'] and row['requests'] is not None else ''}"
            requests = "-" if row["requests"] is None else f"{row['requests']:.0f}"
            lines.append(f"| {number} | {row['grader']} | {jobs} | {row['wall']:.1f} s "
                         f"| {60 * row['count'] / row['wall']:.1f} | {requests} | {ratio} |")
    measured = [(rows[0], reference) for rows, reference in rounds if reference and rows[0]["requests"] is not None]
    if len(measured) > 1:
        ours_total = sum(row["wall"] for row, _ in measured)
        theirs = sum(reference["wall"] for _, reference in measured)
        lines.append(f"\nOver {len(measured)} rounds: this grader {ours_total:.1f} s, nbgrader {theirs:.1f} s, "
                     f"ratio {ours_total / theirs:.2f}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", default="02-self-attention")
    parser.add_argument("--copies", type=int, default=None, help="default 8 (300 with FULL_CLASS=1)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[None],
                        help="this grader's --jobs values to measure (default: its default)")
    parser.add_argument("--cold", action="store_true", help="also grade with cold kernels (no fork server)")
    parser.add_argument("--no-nbgrader", action="store_true", help="skip nbgrader (default with FULL_CLASS=1)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat, alternating which grader goes first (on a shared machine the load drifts)")
    parser.add_argument("--record", action="store_true", help=f"append the table to {RESULTS.relative_to(REPO_ROOT)}")
    args = parser.parse_args()
    full_class = os.environ.get("FULL_CLASS") == "1"
    copies = args.copies or (300 if full_class else 8)
    notebook = next((REPO_ROOT / "solutions" / args.assignment).glob("*.ipynb"))
    rounds: list[tuple[list[dict], dict | None]] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        subs = Path(tmp) / "subs"
        for index in range(copies):
            (subs / f"learner{index:03d}").mkdir(parents=True)
            shutil.copy(notebook, subs / f"learner{index:03d}" / notebook.name)
        for number in range(args.rounds):
            rows: list[dict] = []
            reference = None
            if number % 2 and not (args.no_nbgrader or full_class):
                reference = nbgrader(notebook, copies, Path(tmp) / f"nbgrader-{number}", args.assignment)
            for index, jobs in enumerate(args.jobs):  # a value given twice is measured twice
                rows.append(ours(subs, Path(tmp) / f"out-{number}-{index}", args.assignment, jobs, cold=False))
                if args.cold:
                    rows.append(ours(subs, Path(tmp) / f"cold-{number}-{index}", args.assignment, jobs, cold=True))
            if not (number % 2 or args.no_nbgrader or full_class):
                reference = nbgrader(notebook, copies, Path(tmp) / f"nbgrader-{number}", args.assignment)
            rounds.append((rows + ([reference] if reference else []), reference))
    header = (f"{copies} copies of `solutions/{args.assignment}` on {os.cpu_count()} cores "
              f"({platform.processor() or platform.machine()}), {time.strftime('%Y-%m-%d %H:%M')}, load average "
              f"(1 min) {load_before:.1f} before and {os.getloadavg()[0]:.1f} after (the machine is shared):")
    text = header + "\n\n" + table(rounds)
    print(text)
    if args.record:
        with open(RESULTS, "a", encoding="utf-8") as file:
            file.write("\n" + text + "\n")

if __name__ == "__main__":
    main()

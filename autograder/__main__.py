"""``python -m autograder generate|normalize|grade``: see ``python -m autograder --help``.

Exit status: 0 success; 1 when something could not be done (a notebook out of normal form with
``--check``, a submission that could not be graded, nbgrader rejecting a source notebook);
2 for usage errors (a bad path, an unknown assignment).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.nbgrader_config import EXECUTE_TIMEOUT_S
from autograder.notebooks import REPO_ROOT, NotebookError, normalize_file, notebook_paths

USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder",
                                     description="Generate, normalise and grade the course's notebooks.")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="the course repository (default: the one this package lives in)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    generate = commands.add_parser(
        "generate", help="regenerate exercises/ from solutions/",
        description="Regenerate exercises/<assignment>/ from solutions/<assignment>/ with nbgrader, "
                    "in normal form.")
    generate.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: all assignments")

    normalize = commands.add_parser(
        "normalize", help="put notebooks into normal form",
        description="Strip outputs and normalise metadata, cell ids and JSON layout of the notebooks "
                    "in book/, solutions/ and exercises/.")
    normalize.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                           help="notebooks to process (default: all course notebooks)")
    normalize.add_argument("--check", action="store_true",
                           help="change nothing; list the files not in normal form and exit 1 if any")

    grade = commands.add_parser(
        "grade", help="autograde submissions",
        description="Autograde submissions with nbgrader and write DIR/grades.csv and "
                    "DIR/feedback/<student>/<assignment>/. SUBMISSIONS is one notebook or a folder "
                    "of <student>.ipynb files, <student>/<notebook>.ipynb or "
                    "<student>/<assignment>/<notebook>.ipynb.")
    grade.add_argument("submissions", type=Path, metavar="SUBMISSIONS")
    grade.add_argument("--assignment", required=True, metavar="NAME", help="an assignment, or 'all'")
    grade.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    grade.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="submissions graded at once; N > 1 uses N worker processes (default 1)")
    grade.add_argument("--timeout", type=int, default=EXECUTE_TIMEOUT_S, metavar="SECONDS",
                       help=f"time limit per notebook cell (default {EXECUTE_TIMEOUT_S})")
    grade.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def _generate(args: argparse.Namespace) -> int:
    from autograder.course import generate

    written = generate(args.assignments, root=args.root)
    print(f"wrote {len(written)} file{'s' if len(written) != 1 else ''} under {args.root / 'exercises'}")
    return 0


def _normalize(args: argparse.Namespace) -> int:
    paths = args.paths or notebook_paths(args.root)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"error: no such notebook: {', '.join(map(str, missing))}", file=sys.stderr)
        return USAGE_ERROR
    changed, broken = [], []
    for path in paths:
        try:
            if not normalize_file(path, check=args.check):
                changed.append(path)
        except NotebookError as error:
            broken.append(str(error))
    for message in broken:
        print(f"error: {message}", file=sys.stderr)
    if args.check:
        for path in changed:
            print(f"not in normal form: {path}")
        if changed:
            print("run `python -m autograder normalize` (or `make normalize`) to fix them")
        return 1 if changed or broken else 0
    print(f"normalised {len(changed)} of {len(paths)} notebooks")
    return 1 if broken else 0


def _grade(args: argparse.Namespace) -> int:
    from autograder.grading import grade

    results = grade(args.submissions, args.assignment, args.out, jobs=args.jobs, root=args.root,
                    timeout=args.timeout, progress=not args.no_progress)
    failed = [r for r in results if not r.graded]
    print(f"graded {len(results) - len(failed)} of {len(results)} submissions; "
          f"grades in {args.out / 'grades.csv'}")
    for r in failed:
        print(f"not graded: {r.student} / {r.assignment or '?'}: {r.status}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    from autograder.course import NbgraderRunError, UsageError

    args = _parser().parse_args(argv)
    args.root = args.root.resolve()
    handlers = {"generate": _generate, "normalize": _normalize, "grade": _grade}
    try:
        return handlers[args.command](args)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except NbgraderRunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

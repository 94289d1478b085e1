"""``python -m autograder generate|normalize|grade|merge|validate``: see ``python -m autograder --help``.

Exit status: 0 success; 1 when something could not be done (a notebook out of normal form with
``--check``, a submission that could not be graded, nbgrader rejecting a source notebook, a
notebook that fails validation); 2 for usage errors (a bad path, an unknown assignment); 130 when
stopped with Ctrl-C (what was finished is saved).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.nbgrader_config import EXECUTE_TIMEOUT_S
from autograder.notebooks import REPO_ROOT, NotebookError, normalize_file, notebook_paths
from autograder.sandbox import Limits

USAGE_ERROR = 2
INTERRUPTED = 130


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
    normalize.add_argument("--repoint", action="store_true",
                           help="also point every setup cell and Colab badge at the repository and branch "
                                "in _config.yml (after forking); run `generate` afterwards")

    grade = commands.add_parser(
        "grade", help="autograde submissions",
        description="Autograde submissions, each in its own sandbox, and write DIR/grades.csv, "
                    "DIR/results/<student>/<assignment>.json and DIR/feedback/<student>/<assignment>/. "
                    "SUBMISSIONS is one notebook, a zip, or a folder of <student>.ipynb files, "
                    "<student>/<notebook>.ipynb or <student>/<assignment>/<notebook>.ipynb. A run that "
                    "was stopped is resumed by running the same command again.")
    grade.add_argument("submissions", type=Path, metavar="SUBMISSIONS")
    grade.add_argument("--assignment", required=True, metavar="NAME", help="an assignment, or 'all'")
    grade.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    grade.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="submissions graded at once (default: the number of cores)")
    grade.add_argument("--regrade", action="append", default=[], metavar="STUDENT",
                       help="grade this learner again even if a result exists (repeatable)")
    grade.add_argument("--shard", metavar="I/N",
                       help="grade only shard I of N (learners split by a hash of their name), to share a "
                            "batch between N machines; combine their --out folders with `merge`")
    _limit_options(grade)
    grade.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    nbgrader = commands.add_parser(
        "nbgrader", help="run nbgrader's own command line with the course's configuration",
        description="Run `nbgrader ARGS` with this Python's scripts (alembic) on PATH and the course's "
                    "nbgrader_config.py, whether or not the virtual environment is activated; e.g. "
                    "`python -m autograder nbgrader db student list`.")
    nbgrader.add_argument("nbgrader_args", nargs=argparse.REMAINDER, metavar="ARGS")

    merge = commands.add_parser(
        "merge", help="combine the output folders of shards graded on several machines",
        description="Copy the results and feedback of every SHARD_OUT folder (graded with --shard I/N) into "
                    "DIR and write DIR/grades.csv with every learner. Refuses shards that did not split "
                    "one batch.")
    merge.add_argument("shards", nargs="+", type=Path, metavar="SHARD_OUT")
    merge.add_argument("--out", required=True, type=Path, metavar="DIR", help="the combined output folder")

    validate = commands.add_parser(
        "validate", help="check a notebook before submitting it",
        description="Run a notebook the way the grader will, with the visible tests only, and say "
                    "which tests pass and what the grader would repair. Exit status 0 when every visible "
                    "test passes and nothing needs repair.")
    validate.add_argument("notebook", type=Path, metavar="NOTEBOOK")
    validate.add_argument("--assignment", metavar="NAME", help="default: told from the notebook")
    _limit_options(validate)
    return parser


def _limit_options(parser: argparse.ArgumentParser) -> None:
    defaults = Limits()
    parser.add_argument("--timeout", type=float, default=EXECUTE_TIMEOUT_S, metavar="SECONDS",
                        help=f"time limit per notebook cell (default {EXECUTE_TIMEOUT_S})")
    parser.add_argument("--notebook-timeout", type=float, default=defaults.notebook_timeout,
                        metavar="SECONDS", help=f"time limit per notebook (default {defaults.notebook_timeout:g})")
    parser.add_argument("--memory", type=int, default=defaults.memory_mb, metavar="MIB",
                        help=f"address space per kernel (default {defaults.memory_mb})")
    parser.add_argument("--processes", type=int, default=defaults.processes, metavar="N",
                        help=f"processes and threads per kernel (default {defaults.processes})")


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(cell_timeout=args.timeout, notebook_timeout=args.notebook_timeout,
                  memory_mb=args.memory, processes=args.processes)


def _warn_isolation() -> None:
    from autograder.sandbox import isolation_warnings

    for warning in isolation_warnings():
        print(f"warning: {warning}", file=sys.stderr)


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
            if not normalize_file(path, check=args.check, repoint=args.repoint, root=args.root):
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
    from autograder.grading import grade, parse_shard, summary_table

    shard = None if args.shard is None else parse_shard(args.shard)
    _warn_isolation()
    results = grade(args.submissions, args.assignment, args.out, jobs=args.jobs, root=args.root,
                    limits=_limits(args), regrade=args.regrade, shard=shard, progress=not args.no_progress)
    failed = [r for r in results if not r.graded]
    print(summary_table(results))
    print(f"graded {len(results) - len(failed)} of {len(results)} submissions; "
          f"grades in {args.out / 'grades.csv'}, feedback in {args.out / 'feedback'}")
    return 1 if failed else 0


def _nbgrader(args: argparse.Namespace) -> int:
    import subprocess

    from autograder.course import nbgrader_environment

    arguments = list(args.nbgrader_args)
    if not any(a.startswith("--NbGrader.config_file") for a in arguments) and arguments[:1] != ["--help"]:
        arguments.append(f"--NbGrader.config_file={args.root / 'autograder' / 'nbgrader_config.py'}")
    with nbgrader_environment():
        return subprocess.run([sys.executable, "-m", "nbgrader", *arguments]).returncode


def _merge(args: argparse.Namespace) -> int:
    from autograder.grading import merge_results, summary_table

    results = merge_results(args.shards, args.out)
    print(summary_table(results))
    print(f"merged {len(args.shards)} folders: {len(results)} results in {args.out / 'grades.csv'}")
    return 0 if all(r.graded for r in results) else 1


def _validate(args: argparse.Namespace) -> int:
    from autograder.grading import validate

    _warn_isolation()
    ok, lines = validate(args.notebook, args.assignment, root=args.root, limits=_limits(args))
    print("\n".join(lines))
    print("all visible tests pass" if ok else "not ready: see above")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    from autograder.course import NbgraderRunError, UsageError
    from autograder.grading import GradingInterrupted

    args = _parser().parse_args(argv)
    args.root = args.root.resolve()
    handlers = {"generate": _generate, "normalize": _normalize, "grade": _grade, "merge": _merge,
                "nbgrader": _nbgrader, "validate": _validate}
    try:
        return handlers[args.command](args)
    except GradingInterrupted as error:
        print(f"\n{error}", file=sys.stderr)
        return INTERRUPTED
    except KeyboardInterrupt:
        print("\ninterrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except NbgraderRunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

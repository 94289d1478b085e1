"""``python -m autograder generate|normalize|grade|merge|export|validate``: see ``python -m autograder --help``.

Exit status: 0 success; 1 when something could not be done (a notebook out of normal form with
``--check``, a submission that could not be graded, nbgrader rejecting a source notebook, a
notebook that fails validation); 2 for usage errors (a bad path, an unknown assignment); 130 when
stopped with Ctrl-C (what was finished is saved).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.core.files import REPO_ROOT, NotebookError, skip_iri_parser
from autograder.core.limits import EXECUTE_TIMEOUT_S, Limits
from autograder.core.repository import ConfigError

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
                           help="also point every setup cell, Colab badge, GitHub link and install line in "
                                "book/, solutions/, exercises/ and the READMEs at the repository and ref "
                                "(repository.release, else repository.branch) in _config.yml (after forking); "
                                "run `generate` afterwards")

    release = commands.add_parser(
        "release", help="pin the course to a git tag for a term",
        description="Set repository.release in _config.yml to TAG, point every setup cell, Colab badge and "
                    "link at @TAG and /blob/TAG/, regenerate exercises/ and check that nothing points "
                    "elsewhere. Commits, tags and pushes nothing: it prints the git commands to run.")
    release.add_argument("tag", metavar="TAG", help="the new tag, e.g. v2026.1")

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
                            "batch between N machines; combine their --out folders with `merge`. Default: "
                            "from a Slurm job array (SLURM_ARRAY_TASK_ID, ..._COUNT or ..._MIN/MAX) or a "
                            "Kubernetes Indexed Job (JOB_COMPLETION_INDEX and AUTOGRADER_SHARD_COUNT) when "
                            "they are set, else the whole batch")
    _limit_options(grade)
    grade.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    grade.add_argument("--due", metavar="DATETIME",
                       help="the deadline, ISO (UTC unless a zone is given); saved in DIR/deadline.json, so that "
                            "every feedback page says how late its submission was before `export --late-policy` "
                            "sets what lateness costs")
    grade.add_argument("--manual-scores", type=Path, metavar="FILE",
                       help="the instructor's hand-grading CSV (student, assignment, grade_id, points, comment), "
                            "merged into grades.csv and the feedback on every run; never written. Without it, "
                            "DIR/hand-scores.csv (the review page's) and the last file given are merged anyway")
    _export_parser(commands)

    review = commands.add_parser(
        "review", help="grade written answers by hand, one question at a time across all learners",
        description="Serve a local page that shows one hand-graded question at a time across every learner "
                    "in DIR; the scores go to DIR/hand-scores.csv, which grade, merge and export read.")
    review.add_argument("--out", required=True, type=Path, metavar="DIR", help="the folder `grade` wrote")
    review.add_argument("--port", type=int, default=0, metavar="N", help="the local port (default: a free one)")

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
                    "one batch, and an incomplete set of shards (naming the missing ones).")
    merge.add_argument("shards", nargs="+", type=Path, metavar="SHARD_OUT")
    merge.add_argument("--out", required=True, type=Path, metavar="DIR", help="the combined output folder")
    merge.add_argument("--manual-scores", type=Path, metavar="FILE",
                       help="the instructor's hand-grading CSV, merged into the combined grades.csv and feedback "
                            "(DIR/hand-scores.csv and the last file given are merged anyway)")

    i18n = commands.add_parser(
        "i18n", help="the Chinese edition: catalogues, the zh/ book, checks",
        description="update: merge the English prose into locales/zh_CN/LC_MESSAGES/*.po (new paragraphs "
                    "untranslated, changed ones fuzzy); status: count what is translated; build: write zh/ "
                    "from the English pages and the catalogues; check: exit 1 on untranslated, fuzzy or "
                    "damaged translations, a stale zh/ or code that differs; html OUT: build the Chinese "
                    "site into OUT/_build/html/zh after the English one was built into OUT.")
    i18n.add_argument("action", choices=("update", "status", "build", "check", "html"))
    i18n.add_argument("out", nargs="?", type=Path, default=None, metavar="OUT",
                      help="for html: the --path-output of the English build (default: the repository)")

    book = commands.add_parser(
        "book", help="build both sites, each chapter executed once per edition, and print where the time went",
        description="Execute the chapters that the English and Chinese execution caches lack, in parallel "
                    "(longest first), then build the English site into OUT/_build/html and the Chinese one into "
                    "OUT/_build/html/zh with warnings as errors; print each chapter's seconds per edition, the "
                    "Sphinx builds' and the total. zh/ must be current (`i18n build`).")
    book.add_argument("out", nargs="?", type=Path, default=None, metavar="OUT",
                      help="where _build/ goes (default: the repository)")
    book.add_argument("--workers", type=int, default=None, metavar="N",
                      help="kernels at once (default: the number of cores)")

    validate = commands.add_parser(
        "validate", help="check a notebook before submitting it",
        description="Run a notebook the way the grader will, with the visible tests only, and say "
                    "which tests pass and what the grader would repair. Exit status 0 when every visible "
                    "test passes and nothing needs repair.")
    validate.add_argument("notebook", type=Path, metavar="NOTEBOOK")
    validate.add_argument("--assignment", metavar="NAME", help="default: told from the notebook")
    _limit_options(validate)

    policy = commands.add_parser(
        "policy", help="show what an assignment's graded code may not use",
        description="Print each part's switched-off names (read from its test cells), the library names "
                    "the notebook gives learners, and the rules for every assignment; the grader judges "
                    "submitted source against exactly this before running it.")
    policy.add_argument("assignment", metavar="ASSIGNMENT", help="e.g. 02-self-attention")
    return parser


def _export_parser(commands) -> None:
    """The ``export`` subcommand (see :mod:`autograder.instructor.export`)."""
    export = commands.add_parser(
        "export", help="write the grades as a file Canvas or Moodle imports",
        description="Read the results in DIR, merge the manual scores, match the learners to a roster, apply a "
                    "late policy and write a CSV file for the LMS. Every roster learner gets a row; learners "
                    "not on the roster are listed in a separate file. See autograder/README.md.")
    export.add_argument("--out", required=True, type=Path, metavar="DIR", help="the folder `grade` wrote")
    export.add_argument("--format", choices=("canvas", "moodle", "plain"), default="plain")
    export.add_argument("--roster", type=Path, metavar="FILE",
                        help="Canvas gradebook export, Moodle grades/participants export or student,lms_id CSV")
    export.add_argument("--manual-scores", type=Path, metavar="FILE",
                        help="the instructor's hand-grading CSV (DIR/hand-scores.csv and the last file given "
                             "are merged anyway)")
    export.add_argument("--late-policy", default=None, metavar="POLICY",
                        help="none, zero or per-day:P[,grace:H] (P %% of the maximum per started day late); "
                             "saved in DIR/late-policy.json for later runs and the feedback pages; default: "
                             "the saved one, else none")
    export.add_argument("--due", metavar="DATETIME",
                        help="the deadline, ISO (UTC unless a zone is given); default: the LMS's late marks")
    export.add_argument("--missing", choices=("blank", "zero"), default="blank",
                        help="the grade of a roster learner with no submission (default blank)")
    export.add_argument("--assignment", action="append", metavar="NAME", help="export only these (repeatable)")
    export.add_argument("--column", action="append", default=[], metavar="ASSIGNMENT=HEADER",
                        help="the LMS column of an assignment, e.g. 02-self-attention='Self-attention (4711)'")
    export.add_argument("--moodle-id", choices=("email", "idnumber"), default="email",
                        help="the identifier column of the Moodle file (default email)")
    export.add_argument("--output", type=Path, metavar="FILE", help="default DIR/export-<format>.csv")
    export.add_argument("--omit-ungraded", action="store_true",
                        help="leave learners without any grade out of a Canvas or Moodle file (Moodle imports an "
                             "empty cell as 'no grade', clearing a grade entered there)")


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
    from autograder.engine.sandbox import isolation_warnings

    for warning in isolation_warnings():
        print(f"warning: {warning}", file=sys.stderr)


def _generate(args: argparse.Namespace) -> int:
    from autograder.course.release import generate

    written = generate(args.assignments, root=args.root)
    print(f"wrote {len(written)} file{'s' if len(written) != 1 else ''} under {args.root / 'exercises'}")
    return 0


def _normalize(args: argparse.Namespace) -> int:
    from autograder.course.notebooks import repoint_all

    if args.repoint and not args.paths:
        changed, broken = repoint_all(args.root, check=args.check)
        total = None
    else:
        changed, broken, total = _normalize_paths(args)
        if changed is None:
            return USAGE_ERROR
    for message in broken:
        print(f"error: {message}", file=sys.stderr)
    if args.check:
        for path in changed:
            print(f"not in normal form: {path}" if path.suffix == ".ipynb" else f"links not repointed: {path}")
        if changed:
            print(f"run `python -m autograder normalize{' --repoint' if args.repoint else ''}` to fix them")
        return 1 if changed or broken else 0
    print(f"normalised {len(changed)} of {total} notebooks" if total is not None
          else f"repointed {len(changed)} files")
    return 1 if broken else 0


def _normalize_paths(args: argparse.Namespace) -> tuple[list[Path] | None, list[str], int]:
    """Normalise (and with ``--repoint`` repoint) the notebooks and Markdown files named, or all
    notebooks; ``changed`` is None after a usage error has been printed."""
    from autograder.course.notebooks import course_repositories, normalize_file, notebook_paths, repoint_text_file

    paths = args.paths or notebook_paths(args.root)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"error: no such notebook: {', '.join(map(str, missing))}", file=sys.stderr)
        return None, [], 0
    if not args.repoint and any(p.suffix != ".ipynb" for p in paths):
        print("error: only notebooks are normalised; Markdown files are rewritten with --repoint", file=sys.stderr)
        return None, [], 0
    sources = course_repositories(args.root) if args.repoint else None
    changed, broken = [], []
    for path in paths:
        try:
            if path.suffix == ".ipynb":
                same = normalize_file(path, check=args.check, repoint=args.repoint, root=args.root, sources=sources)
            else:
                same = repoint_text_file(path, check=args.check, root=args.root, sources=sources)
            if not same:
                changed.append(path)
        except (NotebookError, UnicodeDecodeError) as error:
            broken.append(str(error))
    return changed, broken, len(paths)


def _policy(args: argparse.Namespace) -> int:
    from autograder.core.errors import UsageError
    from autograder.engine.plan import PlanError, load_plan
    from autograder.engine.policy import describe, read_policy

    try:
        plan = load_plan(args.assignment, args.root)
    except PlanError as error:
        raise UsageError(f"{args.assignment}: {error}") from None
    for name, notebook in plan.notebooks.items():
        print(f"{plan.name}/{name}.ipynb\n{describe(read_policy(notebook))}")
    return 0


def _release(args: argparse.Namespace) -> int:
    from autograder.course.release import ReleaseError, release

    try:
        commands = release(args.tag, root=args.root)
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"prepared release {args.tag}: _config.yml pins it, every notebook and link says @{args.tag}, "
          "exercises/ regenerated.\nReview `git diff`, run `make test`, then publish it with:\n")
    print("\n".join(f"    {command}" for command in commands))
    print("\nThe tag must point at the commit whose files say @" + args.tag + ": commit first, then tag.")
    return 0


def _grade(args: argparse.Namespace) -> int:
    """``grade``, then the hand scores (``--manual-scores``, else the last file given, and
    ``hand-scores.csv``) merged into grades.csv and the feedback once, with the grade at the top of
    every page, and the similarity report (:func:`autograder.instructor.after_grading.after_grading`);
    a malformed manual-scores file is refused before grading starts."""
    from autograder.core.results import Status
    from autograder.engine.batch import grade
    from autograder.engine.shards import failed, parse_shard, shard_from_environment, summary_table
    from autograder.instructor.after_grading import after_grading
    from autograder.instructor.late_policy import parse_due, save_deadline
    from autograder.instructor.manual import read_manual_scores

    if args.manual_scores is not None:
        read_manual_scores(args.manual_scores)
    if args.due is not None:
        parse_due(args.due)                              # a bad date is refused before grading starts
    shard = None if args.shard is None else parse_shard(args.shard)
    if shard is None and (found := shard_from_environment()) is not None:
        shard, where = found
        print(f"grading shard {shard[0]}/{shard[1]} ({where}); combine the shards' --out folders with `merge`")
    _warn_isolation()
    results = grade(args.submissions, args.assignment, args.out, jobs=args.jobs, root=args.root,
                    limits=_limits(args), regrade=args.regrade, shard=shard, progress=not args.no_progress,
                    grades_csv=False)
    if args.due is not None:
        save_deadline(args.out, args.due)
    merged, finished = after_grading(args.out, args.root, args.manual_scores)
    results = _as_merged(results, merged.results)
    older = sum(r.kind is Status.OLDER_ATTEMPT for r in results)
    print(summary_table(results))
    print(f"graded {sum(r.graded for r in results)} of {len(results) - older} submissions"
          + (f" ({older} older attempt{'s' if older != 1 else ''} superseded)" if older else "")
          + f"; grades in {args.out / 'grades.csv'}, feedback in {args.out / 'feedback'}")
    print("\n".join(finished))
    return 1 if failed(results) else 0


def _as_merged(results: list, merged: list) -> list:
    """This run's ``results`` as ``grades.csv`` has them now, with the hand scores merged in."""
    graded = {(r.learner, r.assignment): r for r in merged if r.graded}
    return [graded.get((r.learner, r.assignment), r) if r.graded else r for r in results]


def _export(args: argparse.Namespace) -> int:
    from autograder.core.errors import UsageError
    from autograder.instructor.export import export

    names = dict(c.split("=", 1) for c in args.column if "=" in c)
    if len(names) != len(args.column):
        raise UsageError("--column takes ASSIGNMENT=HEADER, e.g. --column '02-self-attention=Self-attention (4711)'")
    report = export(args.out, fmt=args.format, roster_path=args.roster, manual_path=args.manual_scores,
                    late_policy=args.late_policy, due=args.due, missing=args.missing, output=args.output,
                    assignments=args.assignment, column_names=names, moodle_id=args.moodle_id,
                    omit_ungraded=args.omit_ungraded)
    print("\n".join(report.lines()))
    return 1 if report.unmatched else 0


def _nbgrader(args: argparse.Namespace) -> int:
    import subprocess

    from autograder.course.release import nbgrader_environment

    arguments = list(args.nbgrader_args)
    if not any(a.startswith("--NbGrader.config_file") for a in arguments) and arguments[:1] != ["--help"]:
        arguments.append(f"--NbGrader.config_file={args.root / 'autograder' / 'course' / 'nbgrader_config.py'}")
    with nbgrader_environment():
        return subprocess.run([sys.executable, "-m", "nbgrader", *arguments]).returncode


def _merge(args: argparse.Namespace) -> int:
    from autograder.engine.shards import failed, merge_results, summary_table
    from autograder.instructor.after_grading import after_grading
    from autograder.instructor.late_policy import save_deadline, saved_deadline
    from autograder.instructor.manual import read_manual_scores

    if args.manual_scores is not None:
        read_manual_scores(args.manual_scores)          # a malformed file is refused before anything is copied
    merge_results(args.shards, args.out, grades_csv=False)
    deadlines = {due for shard in args.shards if (due := saved_deadline(shard))}
    if len(deadlines) == 1 and saved_deadline(args.out) is None:   # the shards' `grade --due`, for the pages
        save_deadline(args.out, deadlines.pop())
    merged, finished = after_grading(args.out, args.root, args.manual_scores)
    print(summary_table(merged.results))
    print(f"merged {len(args.shards)} folders: {len(merged.results)} results in {args.out / 'grades.csv'}")
    print("\n".join(finished))
    return 1 if failed(merged.results) else 0


def _review(args: argparse.Namespace) -> int:
    from autograder.instructor.review import serve

    return serve(args.out, args.root, args.port)


def _i18n(args: argparse.Namespace) -> int:
    from autograder.course.i18n import edition, extract

    if args.action == "update":
        print(edition.dump_status(edition.update(args.root)))
        return 0
    if args.action == "status":
        print(edition.dump_status(edition.status(args.root)))
        return 0
    if args.action == "build":
        written = edition.build(args.root)
        print(f"wrote {len(written)} file{'s' if len(written) != 1 else ''} under {args.root / extract.ZH_ROOT}")
        return 0
    if args.action == "html":
        done = edition.build_html(args.out or args.root, args.root, extra_args=("--warningiserror", "--keep-going"))
        print(done.stdout[-3000:] + done.stderr[-3000:] if done.returncode else
              f"the Chinese site is in {(args.out or args.root) / '_build' / 'html' / 'zh'}")
        return done.returncode
    found = edition.problems(args.root) + [f"{path.relative_to(args.root)} is not what `i18n build` writes: run it"
                                            for path in edition.stale_outputs(args.root)]
    print("\n".join(found) if found else "the Chinese edition is complete and matches the English one")
    return 1 if found else 0


def _book(args: argparse.Namespace) -> int:
    from autograder.course import book_build

    built = book_build.build(args.out or args.root, args.root, workers=args.workers)
    if built.returncode:
        print(built.log[-6000:], file=sys.stderr)
    print(book_build.time_table(built))
    return built.returncode


def _validate_isolation_note() -> None:
    """A learner's check gets one line, not the grader's warnings, when the kernel cannot be isolated
    (e.g. on Colab, or not as root): the visible tests and their verdicts are the same either way."""
    from autograder.engine.sandbox import can_isolate, isolation_off_reason

    if not can_isolate():
        why = isolation_off_reason() or "Linux namespaces are not available"
        print(f"note: your notebook runs without the grader's full isolation here ({why}); "
              "the tests and their verdicts are the same", file=sys.stderr)


def _validate(args: argparse.Namespace) -> int:
    from autograder.engine.validate import validate

    _validate_isolation_note()
    ok, lines = validate(args.notebook, args.assignment, root=args.root, limits=_limits(args))
    print("\n".join(lines))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    from autograder.core.errors import GradingInterrupted
    from autograder.core.errors import NbgraderRunError
    from autograder.core.errors import UsageError

    args = _parser().parse_args(argv)
    args.root = args.root.resolve()
    skip_iri_parser()                    # before any command reads a notebook: a CPU second saved
    handlers = {"generate": _generate, "normalize": _normalize, "grade": _grade, "merge": _merge,
                "nbgrader": _nbgrader, "i18n": _i18n, "validate": _validate, "release": _release,
                "export": _export, "review": _review, "policy": _policy, "book": _book}
    try:
        return handlers[args.command](args)
    except GradingInterrupted as error:
        print(f"\n{error}", file=sys.stderr)
        return INTERRUPTED
    except KeyboardInterrupt:
        print("\ninterrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED
    except (UsageError, ConfigError) as error:
        print(getattr(error, "said", None) or f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except NbgraderRunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""Shards, their merge and the batch's summary: what ``grade --shard`` records and ``merge`` reads.

Light on purpose (the data layer and the instructor's publishing only): ``python -m autograder merge``
imports neither torch nor Jupyter. :func:`shard_of` decides which machine grades a learner;
:func:`merge_results` combines the ``--out`` folders of the shards; :func:`summary_table` prints what
a run did.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.results import GradeResult, Status, load_results, one_line, write_atomically, write_grades_csv
from autograder.engine.pages import RECORDS


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` (1 <= i <= N) -> ``(i, N)``; raises :class:`UsageError` with the form to use."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard {text!r}: write it as I/N with 1 <= I <= N, e.g. --shard 2/3 for the "
                         "second of three machines")
    return int(match[1]), int(match[2])


SHARD_RECORD = "shard.json"
# Where a batch job engine says which task this is, when --shard is not given.
SHARD_COUNT_VARIABLE = "AUTOGRADER_SHARD_COUNT"


def shard_from_environment(environ=None) -> tuple[tuple[int, int], str] | None:
    """``((i, N), where it came from)`` for a task of a Slurm job array or a Kubernetes Indexed Job,
    or None when the environment names neither.

    - Slurm (``sbatch --array=A-B[:S]``): ``SLURM_ARRAY_TASK_ID``, ``SLURM_ARRAY_TASK_MIN`` and
      ``SLURM_ARRAY_TASK_STEP`` give ``i``; ``SLURM_ARRAY_TASK_COUNT`` (or ``MIN``/``MAX``/``STEP``)
      gives ``N``. The array must be one range (``--array=0-7``, ``--array=1-8``, ``--array=0-14:2``).
    - Kubernetes (``completionMode: Indexed``): ``JOB_COMPLETION_INDEX`` (0-based) gives ``i``; the
      Job does not tell its pods its ``completions``, so ``N`` comes from
      ``AUTOGRADER_SHARD_COUNT`` (set it to ``completions`` in the pod template).

    Raises:
        UsageError: a variable that is not a number, an index outside the count, a Kubernetes task
            without ``AUTOGRADER_SHARD_COUNT``.
    """
    env = os.environ if environ is None else environ

    def number(name: str) -> int | None:
        value = env.get(name, "").strip()
        if not value:
            return None
        if not value.isdigit():
            raise UsageError(f"{name}={value!r} is not a whole number; pass --shard I/N instead")
        return int(value)

    if number("SLURM_ARRAY_TASK_ID") is not None:
        task, low, high = number("SLURM_ARRAY_TASK_ID"), number("SLURM_ARRAY_TASK_MIN"), number("SLURM_ARRAY_TASK_MAX")
        step = number("SLURM_ARRAY_TASK_STEP") or 1
        low = 0 if low is None else low
        count = number("SLURM_ARRAY_TASK_COUNT") or (None if high is None else (high - low) // step + 1)
        if count is None or (task - low) % step:
            raise UsageError(f"SLURM_ARRAY_TASK_ID={task}: cannot tell the shard (the array must be one range such "
                             "as --array=1-8; otherwise pass --shard I/N)")
        where = f"Slurm array task {task} of {low}-{low + (count - 1) * step}" + (f":{step}" if step > 1 else "")
        shard = ((task - low) // step + 1, count)
    elif number("JOB_COMPLETION_INDEX") is not None:
        count = number(SHARD_COUNT_VARIABLE)
        if not count:
            raise UsageError(f"JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but {SHARD_COUNT_VARIABLE} is "
                             "not: set it to the Job's completions in the pod template, or pass --shard I/N")
        where = f"Kubernetes JOB_COMPLETION_INDEX={number('JOB_COMPLETION_INDEX')}, {SHARD_COUNT_VARIABLE}={count}"
        shard = (number("JOB_COMPLETION_INDEX") + 1, count)
    else:
        return None
    if not 1 <= shard[0] <= shard[1]:
        raise UsageError(f"{where} gives shard {shard[0]} of {shard[1]}: the index is outside the count")
    return shard, where


def record_shard(out_dir: Path, shard: tuple[int, int]) -> None:
    """Note in ``<out>/shard.json`` which shard(s) of how many this folder holds, for :func:`merge_results`."""
    try:
        known = json.loads((out_dir / SHARD_RECORD).read_text(encoding="utf-8")).get("shards", [])
    except (OSError, ValueError, AttributeError):
        known = []
    shards = sorted({tuple(s) for s in known if isinstance(s, list) and len(s) == 2} | {tuple(shard)})
    write_atomically(out_dir / SHARD_RECORD, json.dumps({"shards": [list(s) for s in shards]}).encode("utf-8"))


def shards_in(folder: Path) -> set[tuple[int, int]]:
    try:
        data = json.loads((folder / SHARD_RECORD).read_text(encoding="utf-8"))
        return {(int(i), int(n)) for i, n in data.get("shards", [])}
    except (OSError, ValueError, TypeError, AttributeError):
        return set()


def check_complete(shard_dirs: list[Path]) -> str:
    """Refuse a set of shard folders that is not one whole batch; return a note about folders that
    were not graded with ``--shard`` ("" when there is none).

    Raises:
        UsageError: shards of different counts, or missing shards (named, with the command to run).
    """
    found = {folder: shards_in(folder) for folder in shard_dirs}
    counts = {n for shards in found.values() for _, n in shards}
    if len(counts) > 1:
        raise UsageError("these folders hold shards of different counts ("
                         + "; ".join(f"{f}: {', '.join(f'{i}/{n}' for i, n in sorted(s))}" for f, s in found.items() if s)
                         + "): grade every shard with the same --shard I/N count")
    plain = [str(f) for f, s in found.items() if not s]
    if counts:
        (count,) = counts
        missing = sorted(set(range(1, count + 1)) - {i for s in found.values() for i, _ in s})
        if missing:
            raise UsageError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(f'{i}/{count}' for i in missing)} "
                             f"{'are' if len(missing) > 1 else 'is'} missing: give the --out folder of every shard "
                             f"(grade the missing one{'s' if len(missing) > 1 else ''} with --shard "
                             f"{missing[0]}/{count} first); merging part of a batch would leave learners out")
    return (f"not graded with --shard, merged as they are: {', '.join(plain)}" if plain else "")


def shard_of(learner: str, n_shards: int) -> int:
    """The shard (1..N) that grades ``learner``: a hash of the name, the same on every machine, so
    each learner's submissions, and their duplicates, land in exactly one shard."""
    digest = hashlib.sha256(learner.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % n_shards + 1


def merge_results(shard_dirs: list[Path | str], out_dir: Path | str, *, grades_csv: bool = True) -> list[GradeResult]:
    """Combine the ``--out`` folders of shards graded on several machines into ``out_dir``.

    Copies each shard's ``results/``, ``feedback/``, page records and ``answers/`` files into ``out_dir`` (the
    folder may be one of the shards, or hold an earlier merge) and rebuilds ``grades.csv`` from all results
    (unless ``grades_csv`` is False: the command line writes it once, hand scores merged). A learner is
    graded by one shard only, so the same result file with different contents in two shards means
    the shards did not split one batch (e.g. different N): that is refused before anything is copied.
    So is a set of shards that is not complete (each ``grade --shard`` notes its shard in
    ``<out>/shard.json``; :func:`check_complete` names the missing ones).

    Returns:
        Every result in ``out_dir`` after the merge.

    Raises:
        UsageError: a shard folder without ``results/``, ``out_dir`` a file, conflicting results, or
            missing shards.
    """
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out must be a folder, but {out_dir} is a file")
    sources: dict[str, tuple[Path, bytes]] = {}
    for shard in map(Path, shard_dirs):
        if not (shard / "results").is_dir():
            raise UsageError(f"{shard} has no results/ folder: give the --out folders the shards graded into")
    folders = [Path(s) for s in shard_dirs]
    into_shard = (out_dir / SHARD_RECORD).is_file() and out_dir not in {f.resolve() for f in folders}
    note = check_complete(folders + ([out_dir] if into_shard else []))   # merging into a shard counts it too
    if note:
        print(f"note: {note}")
    for shard in map(Path, shard_dirs):
        for path in sorted(p for p in shard.rglob("*") if p.is_file() and p.parts[len(shard.parts)] in
                           ("results", "feedback", RECORDS, "answers", "logs") and not p.name.endswith(".tmp")):
            name = path.relative_to(shard).as_posix()
            data = path.read_bytes()
            if name in sources and sources[name][1] != data:
                raise UsageError(f"{name} differs between {sources[name][0]} and {shard}: these shards did not "
                                 "split one batch (use the same --shard I/N count on every machine)")
            sources[name] = (shard, data)
    for name, (shard, data) in sources.items():
        target = out_dir / name
        if shard.resolve() != out_dir:
            write_atomically(target, data)
    for shard in set().union(*(shards_in(f) for f in folders)):
        record_shard(out_dir, shard)                    # so that the merged folder can be merged again
    results = load_results(out_dir)
    if grades_csv:
        write_grades_csv(out_dir / "grades.csv", results)
    return results


def failed(results: list[GradeResult]) -> list[GradeResult]:
    """The submissions that were not graded and should have been: an older attempt, superseded by the
    learner's newest one, is not among them."""
    return [r for r in results if not r.graded and r.kind is not Status.OLDER_ATTEMPT]


def summary_table(results: list[GradeResult]) -> str:
    """A plain-text summary: counts and the mean score per assignment (of the results as given: pass
    them with the hand scores merged, so that the mean is ``grades.csv``'s), then every submission that
    was not graded and why, the older attempts apart, and the flagged ones."""
    lines = []
    by_assignment: dict[str, list[GradeResult]] = {}
    for r in results:
        by_assignment.setdefault(r.assignment or "?", []).append(r)
    width = max([len("assignment")] + [len(a) for a in by_assignment])
    lines.append(f"{'assignment':<{width}}  graded  not graded  older attempts  mean score")
    for name, group in sorted(by_assignment.items()):
        graded = [r for r in group if r.graded]
        older = sum(r.kind is Status.OLDER_ATTEMPT for r in group)
        mean = (f"{sum(r.score for r in graded) / len(graded):.2f} / {graded[0].max_score:g}"
                if graded else "-")
        lines.append(f"{name:<{width}}  {len(graded):>6}  {len(group) - len(graded) - older:>10}  {older:>14}  {mean}")
    for title, rows in (("not graded:", failed(results)),
                        ("older attempts, superseded by the newest (not graded, as it should be):",
                         [r for r in results if r.kind is Status.OLDER_ATTEMPT])):
        if rows:   # an older attempt's status names the newest file, so its own file goes first
            lines += ["", title] + [f"  {r.student} / {r.assignment or '?'}: "
                                    + ("; ".join(r.files) + ": " if r.kind is Status.OLDER_ATTEMPT else "")
                                    + one_line(r.status, 200) for r in rows]
    flagged = [r for r in results if r.graded and r.flags]
    if flagged:
        lines.append("")
        lines.append("graded, but flagged: the code reaches for the grading machinery or ran a switched-off "
                     "built-in during a test (review these):")
        for r in flagged:
            lines.append(f"  {r.student} / {r.assignment}: {r.score:g} / {r.max_score:g}; {'; '.join(r.flags)}")
    return "\n".join(lines)

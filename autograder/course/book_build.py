"""``python -m autograder book``: both sites built with each chapter executed once per edition, the two
editions' chapters in parallel, and where the time went.

myst-nb executes a chapter that its jupyter-cache lacks, one after the other, in the Sphinx build. Before
the two Sphinx builds, :func:`prime` executes every chapter of both editions that its edition's cache
lacks (English: ``<out>/_build/.jupyter_cache``, Chinese: ``edition.execution_cache(out)``) in a pool of
worker processes, longest first, and stores each result the way myst-nb stores it
(``myst_nb/core/execute/cache.py``: the notebook as ``nbformat.reads`` reads it, executed by
``single_nb_execution`` in its own folder, cached with its ``execution_seconds``). Each Sphinx build then
finds every chapter in its cache. A chapter that fails is not cached: myst-nb executes it again in its
build and reports the error there, in its own words.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path, PurePosixPath

from autograder.core.files import REPO_ROOT, skip_iri_parser

# Sphinx's log line for a chapter that myst-nb executed itself instead of finding it in the cache.
SPHINX_EXECUTED = "Executing notebook using"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# Variables of this process that a chapter's kernel must not inherit: MPLBACKEND=Agg (set by the test
# suite, by a headless shell) would keep ipykernel from choosing its inline backend, and every figure
# would be drawn to nowhere, leaving the chapter's page without its plots.
NOT_INHERITED = ("MPLBACKEND",)


def kernel_base_environment() -> dict[str, str]:
    """This process's environment without :data:`NOT_INHERITED`: what every chapter kernel starts from."""
    return {name: value for name, value in os.environ.items() if name not in NOT_INHERITED}


@dataclasses.dataclass(frozen=True)
class Edition:
    """One language's book: its source folder (holding ``_toc.yml`` and ``_config.yml``), the jupyter-cache
    its Sphinx build reads, and the variables its kernels get on top of this process's environment."""

    name: str
    source: Path
    cache: Path
    kernel_env: dict[str, str] = dataclasses.field(default_factory=dict)

    def config(self) -> dict:
        import yaml

        return yaml.safe_load((self.source / "_config.yml").read_text(encoding="utf-8"))

    def chapters(self) -> list[Path]:
        """The notebooks this edition's Sphinx build executes: the ``.ipynb`` files of ``_toc.yml`` that
        ``_config.yml``'s ``execute.exclude_patterns`` do not exclude (matched as myst-nb matches them);
        none when ``execute.execute_notebooks`` is not ``cache``."""
        import yaml

        execute = self.config().get("execute", {})
        if execute.get("execute_notebooks") != "cache":
            return []
        toc = yaml.safe_load((self.source / "_toc.yml").read_text(encoding="utf-8"))
        files = [toc["root"]] + [chapter["file"] for part in toc.get("parts", []) for chapter in part["chapters"]]
        notebooks = [(self.source / f"{name}.ipynb").resolve() for name in files]
        excluded = execute.get("exclude_patterns", [])
        return [path for path in notebooks if path.is_file()
                and not any(PurePosixPath(path.as_posix()).match(pattern) for pattern in excluded)]


@dataclasses.dataclass
class ChapterRun:
    """What priming did with one chapter of one edition: found it in the cache (``cached``), executed it in
    ``seconds``, or failed with ``error`` (the exception's class; the notebook stays uncached)."""

    edition: str
    path: Path
    cached: bool
    seconds: float | None = None
    error: str | None = None


@dataclasses.dataclass
class Priming:
    """One priming of the caches: every chapter's run, the wall time, the workers and threads per kernel."""

    runs: list[ChapterRun]
    wall_seconds: float
    workers: int
    threads: int

    @property
    def failed(self) -> list[ChapterRun]:
        return [run for run in self.runs if run.error]


@dataclasses.dataclass
class BookBuild:
    """Both sites built into ``<out>/_build/html`` (and ``/zh``): the priming, each Sphinx build's seconds
    (``None`` when it did not run), the builds' return code and log, the total seconds."""

    priming: Priming
    english_seconds: float
    chinese_seconds: float | None
    returncode: int
    log: str
    seconds: float

    @property
    def executed_by_sphinx(self) -> int:
        """How many chapters the Sphinx builds executed themselves (0 when priming cached them all)."""
        return self.log.count(SPHINX_EXECUTED)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _read(path: Path):
    """The notebook as myst-nb reads it for the cache lookup (``standard_nb_read``)."""
    import nbformat

    return nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)


def execute_chapter(path: str, timeout: str, allow_errors: str, result: str) -> None:
    """Execute one notebook as myst-nb does and write ``{"seconds", "error", "notebook"}`` as JSON to
    ``result`` (``error``: the failing exception's class name or null; ``notebook``: the executed notebook,
    null on failure). Run by :func:`prime` in a process of its own, whose environment the kernel inherits."""
    import json

    skip_iri_parser()
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    notebook = _read(Path(path))
    _poll_replies_in_slices()
    start = time.monotonic()
    try:
        run = single_nb_execution(notebook, cwd=str(Path(path).parent), allow_errors=allow_errors == "True",
                                  timeout=json.loads(timeout), meta_override=True)
        seconds, error = run.time, type(run.err).__name__ if run.err is not None else None
    except Exception as failure:     # a kernel that died or never started: the Sphinx build reports it
        seconds, error = time.monotonic() - start, type(failure).__name__
    Path(result).write_text(json.dumps({"seconds": seconds, "error": error,
                                        "notebook": None if error else nbformat.writes(notebook)}), encoding="utf-8")


def _poll_replies_in_slices(slice_s: float = 1.0) -> None:
    """Make this process's asynchronous kernel channels wait for a message in polls of at most ``slice_s``
    seconds, until the caller's own timeout, instead of one poll as long as that timeout (nbclient waits
    for a cell's reply with one poll of the cell's whole 600 s).

    On the busy 2-core machine, three builds stalled in the Chinese chapter 06's widget cell: the kernel
    idle in its event loop (py-spy) and nbclient idle in one long poll until the cell's timeout, with
    ipykernel 7.4 and 6.31 alike. A poll that starts again each second re-checks the socket, which one
    long poll does not do after a missed wake-up; the grading runner has always polled this way
    (``SandboxedKernel._reply``) and has never stalled. What a caller gets is unchanged: the first message,
    or ``queue.Empty`` once its timeout has passed. Only :func:`execute_chapter`'s process, one chapter's
    client, is changed."""
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    one_poll = AsyncZMQSocketChannel.get_msg

    async def get_msg(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_s if deadline is None else min(slice_s, max(0.0, deadline - time.monotonic()))
            try:
                return await one_poll(self, timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    AsyncZMQSocketChannel.get_msg = get_msg


def _execute(path: Path, env: dict[str, str], timeout: int | None, allow_errors: bool,
             result: Path) -> tuple[float, str | None, str | None]:
    """:func:`execute_chapter` in a new Python process with exactly ``env``: ``(seconds, error, notebook)``."""
    import json

    start = time.monotonic()
    code = "import sys; from autograder.course.book_build import execute_chapter; execute_chapter(*sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", code, str(path), json.dumps(timeout), str(allow_errors),
                           str(result)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if done.returncode or not result.is_file():       # the Sphinx build executes it again and says why
        return time.monotonic() - start, f"exit status {done.returncode}", None
    found = json.loads(result.read_text(encoding="utf-8"))
    return found["seconds"], found["error"], found["notebook"]


def _previous_seconds(caches: dict[str, object]) -> dict[str, float]:
    """``{notebook file name: execution_seconds}`` of the newest record of that name in either cache."""
    records = sorted((record for cache in caches.values() for record in cache.list_cache_records()),
                     key=lambda record: record.created)
    return {Path(record.uri).name: float(record.data["execution_seconds"])
            for record in records if (record.data or {}).get("execution_seconds") is not None}


def prime(editions: list[Edition], *, workers: int | None = None, progress: bool = True) -> Priming:
    """Execute, in parallel, every chapter of ``editions`` that its edition's cache lacks, and cache it.

    The jobs run longest first (by the seconds the newest cache record of the same file name holds, in
    either edition's cache, or this priming's run of it in the other edition; those without either
    first, in the tables of contents' order); ``workers`` defaults to the number of cores, at most
    the number of jobs, and each kernel gets ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` = cores // workers
    (at least 1), so the kernels together never run more threads than there are cores. Each chapter runs
    in a Python process of its own (:func:`execute_chapter`), whose environment its kernel inherits:
    this process's, the edition's ``kernel_env`` and the thread counts. Only this process writes to the caches.
    """
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from tqdm.auto import tqdm

    start = time.monotonic()
    caches = {edition.name: get_cache(str(edition.cache)) for edition in editions}
    runs, jobs = [], []
    for edition in editions:
        execute = edition.config()["execute"]
        for path in edition.chapters():
            try:
                caches[edition.name].match_cache_notebook(_read(path))
                runs.append(ChapterRun(edition.name, path, cached=True))
            except KeyError:
                jobs.append((edition, path, execute.get("timeout"), bool(execute.get("allow_errors", False))))
    known = _previous_seconds(caches)
    workers = max(1, min(workers or _cores(), len(jobs) or 1))
    threads = max(1, _cores() // workers)
    with ThreadPoolExecutor(workers) as pool, tempfile.TemporaryDirectory(prefix="book-chapters-") as folder, \
            tqdm(total=len(jobs), desc="executing chapters", unit="chapter", disable=not (progress and jobs)) as bar:
        running, names = {}, itertools.count()

        def start_next() -> None:
            """Start the longest job by what is known now (an edition's run times its twin in the other)."""
            job = min(jobs, key=lambda job: (job[1].name in known, -known.get(job[1].name, 0.0)))
            jobs.remove(job)
            edition, path, timeout, allow_errors = job
            env = dict(kernel_base_environment(), **edition.kernel_env,
                       **{name: str(threads) for name in THREAD_VARIABLES})
            result = Path(folder) / f"{next(names)}.json"
            running[pool.submit(_execute, path, env, timeout, allow_errors, result)] = (edition, path)

        for _ in range(min(workers, len(jobs))):
            start_next()
        while running:
            for future in wait(running, return_when=FIRST_COMPLETED).done:
                edition, path = running.pop(future)
                seconds, error, text = future.result()
                if error is None:
                    known[path.name] = seconds
                    cache = caches[edition.name]
                    record = cache.add_nb_to_project(str(path))
                    cache.cache_notebook_bundle(
                        CacheBundleIn(nbformat.reads(text, as_version=4), record.uri,
                                      data={"execution_seconds": seconds}),
                        check_validity=False, overwrite=True)
                runs.append(ChapterRun(edition.name, path, cached=False, seconds=seconds, error=error))
                bar.update()
                if progress:
                    bar.write(f"{edition.name} {path.stem}: " + (f"failed ({error}), left to the Sphinx build"
                                                                if error else f"{seconds:.1f} s"))
                if jobs:
                    start_next()
    return Priming(runs, time.monotonic() - start, workers, threads)


def editions(out: Path, root: Path = REPO_ROOT) -> list[Edition]:
    """The two editions of the course as ``make book`` builds them into ``out``: English from ``root``
    with myst-nb's cache ``<out>/_build/.jupyter_cache``, Chinese from ``zh/`` with its own cache and the
    kernel environment of :func:`autograder.course.i18n.edition.build_html`."""
    from autograder.course.i18n import edition
    from autograder.course.i18n.extract import ZH_ROOT

    out = Path(out).resolve()
    return [Edition("English", Path(root).resolve(), out / "_build" / ".jupyter_cache"),
            Edition("Chinese", (Path(root) / ZH_ROOT).resolve(), edition.execution_cache(out, root),
                    edition.kernel_environment(out, root))]


def build(out: Path = REPO_ROOT, root: Path = REPO_ROOT, *, workers: int | None = None,
          progress: bool = True) -> BookBuild:
    """Build both sites into ``<out>/_build/html`` with warnings as errors: prime both execution caches
    (:func:`prime`), then the English Sphinx build (``jupyter-book build``), then the Chinese one
    (:func:`autograder.course.i18n.edition.build_html`, which writes the stamp of the inputs as they were
    when this build started). ``zh/`` must be current (``python -m autograder i18n build``)."""
    from autograder.course.i18n import edition

    start = time.monotonic()
    out = Path(out).resolve()
    inputs = edition.book_inputs_key(root)
    (out / edition.BUILD_STAMP).unlink(missing_ok=True)        # a failed build must not pass as current
    (out / "_build").mkdir(parents=True, exist_ok=True)
    priming = prime(editions(out, root), workers=workers, progress=progress)
    english_start = time.monotonic()
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    done = subprocess.run([str(jupyter_book), "build", str(root), "--path-output", str(out),
                           "--warningiserror", "--keep-going"], capture_output=True, text=True)
    english = time.monotonic() - english_start
    log, chinese = done.stdout + done.stderr, None
    if done.returncode == 0:
        chinese_start = time.monotonic()
        done = edition.build_html(out, root, extra_args=("--warningiserror", "--keep-going"), inputs=inputs)
        chinese = time.monotonic() - chinese_start
        log += done.stdout + done.stderr
    return BookBuild(priming, english, chinese, done.returncode, log, time.monotonic() - start)


def time_table(built: BookBuild) -> str:
    """Where the build's time went: each chapter's seconds per edition (or ``cached``, or its failure),
    the priming's wall time, each Sphinx build's seconds, the total."""
    names = list(dict.fromkeys(run.edition for run in built.priming.runs))
    cells: dict[str, dict[str, str]] = {}
    for run in built.priming.runs:
        cells.setdefault(run.path.stem, {})[run.edition] = (
            "cached" if run.cached else f"failed ({run.error})" if run.error else f"{run.seconds:.1f} s")
    width = max([len("chapter")] + [len(stem) for stem in cells])
    lines = [f"{'chapter':<{width}}" + "".join(f"  {name:>16}" for name in names)]
    lines += [f"{stem:<{width}}" + "".join(f"  {row.get(name, '-'):>16}" for name in names)
              for stem, row in sorted(cells.items())]
    executed = [run for run in built.priming.runs if not run.cached and not run.error]
    hits = sum(run.cached for run in built.priming.runs)
    lines += ["",
              f"cache hits: {hits} of {len(built.priming.runs)}; executed: {len(executed)}, "
              f"{sum(run.seconds for run in executed):.1f} s of kernel time",
              f"executing the chapters ({built.priming.workers} workers, {built.priming.threads} thread"
              f"{'s' if built.priming.threads != 1 else ''} each): {built.priming.wall_seconds:.1f} s",
              f"English site (Sphinx): {built.english_seconds:.1f} s",
              "Chinese site (Sphinx): " + (f"{built.chinese_seconds:.1f} s" if built.chinese_seconds is not None
                                           else "not built (the English build failed)"),
              f"chapters the Sphinx builds executed again: {built.executed_by_sphinx}",
              f"total: {built.seconds:.1f} s"]
    return "\n".join(lines)

"""What is graded: the instructor's notebooks as a plan, and each learner notebook rebuilt on it.

The grader never runs a submitted notebook as it is. :func:`load_plan` reads the instructor's
source notebooks (``solutions/<assignment>/``: solutions, visible and hidden tests, points) and
:func:`assemble` builds the notebook to run from them:

- every test cell, locked cell and task comes from the instructor's copy, hidden tests included,
  whatever the learner did to it (edited, deleted, moved, changed its type or metadata);
- only the *source* of solution cells comes from the learner, matched by nbgrader ``grade_id``
  (or, when a tool dropped the metadata, by the cell id, which the course sets to the grade id);
  a solution cell whose type was changed, or that is missing, gets the released stub;
- the learner's own extra cells run too, after the course cell they followed; cells without
  nbgrader metadata that came with the assignment (the setup cell, imports) keep the learner's edits;
- points, cell kinds and order come from the instructor's copy only;
- course cells tagged ``demo`` (a training run, a plot, text sampled from the trained model) are
  what a learner runs to see their work in action; the grader skips them (and the learner's edits
  of them), so no test may depend on a name they define.

Every such repair is reported as a note in the feedback. A test or locked cell whose code is the released
one is not a repair, whatever its comments and docstrings say (the Chinese edition words them in Chinese);
feedback shows a Chinese notebook the Chinese edition's visible part of it (:func:`edition_view`).

A learner's own check (``validate``) may have no instructor's notebooks at hand (a clone without
``solutions/``, or Colab, where only the installed package exists). :func:`load_released_plan` then
plans from the *released* exercise the learner started from: its test cells are the visible tests
(there are no hidden ones), its solution cells' stubs are what a deleted answer is replaced by.
:func:`released_folders` says where released exercises are looked for: ``<root>/exercises/`` and the
copy shipped inside the installed package (:data:`PACKAGED_EXERCISES`, see ``pyproject.toml``).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.files import CODE_STUB, TEXT_STUB
from autograder.core.files import NotebookError, read_notebook
from autograder.engine.cells import line_map, same_code

TEST, SOLUTION, MANUAL, TASK, LOCKED, FREE = "test", "solution", "manual", "task", "locked", "free"
DEMO = "demo"  # a course cell without nbgrader metadata, tagged "demo": learners run it, the grader skips it
DEMO_TAG = "demo"
HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
SOLUTION_BEGIN, SOLUTION_END = "BEGIN SOLUTION", "END SOLUTION"
HIDDEN_NOTE = "# Hidden tests ran here; they are not shown in feedback."
# The released exercises as a wheel of the course package ships them (pyproject.toml maps the
# repository's exercises/ to the package autograder.exercises); absent in a source checkout.
PACKAGED_EXERCISES = Path(__file__).resolve().parents[1] / "exercises"


class PlanError(Exception):
    """The instructor's notebooks cannot be graded from (e.g. a duplicate grade id)."""


# The install line of a setup cell: which repository and ref it installs from changes with every fork
# and release, not what the cell is.
_INSTALL_REF = re.compile(r"git\+https?://[^\s\"'@]+@[^\s\"']+")
# Where the Chinese edition keeps its released exercises, relative to the repository root.
EDITIONS = ("zh/exercises",)


def _without_ref(source: str) -> str:
    return _INSTALL_REF.sub("git+REPOSITORY@REF", source)


def _marked_lines(source: str, begin: str = HIDDEN_BEGIN, end: str = HIDDEN_END):
    """Each line of a cell's source with where it lies: ``"open"`` (it opens a hidden-test region),
    ``"close"``, ``"inside"`` a region or ``"outside"`` (visible). A region left open runs to the end."""
    inside = False
    for line in source.split("\n"):
        if begin in line:
            inside = True
            yield line, "open"
        elif end in line:
            inside = False
            yield line, "close"
        else:
            yield line, "inside" if inside else "outside"


def strip_hidden_region(source: str, begin: str = HIDDEN_BEGIN, end: str = HIDDEN_END,
                        note: str | None = HIDDEN_NOTE) -> tuple[str, bool]:
    """Replace each hidden-test region of a cell's source with ``note`` (or drop it, for ``None``).

    Args:
        source: the cell's source.
        begin: the marker that opens a region (nbgrader's delimiter).
        end: the marker that closes it.
        note: the line left in place of each region, indented like the opening marker.

    Returns:
        ``(new_source, removed)``; ``removed`` says whether any region was found. A region left
        open runs to the end of the cell.
    """
    kept: list[str] = []
    removed = False
    for line, where in _marked_lines(source, begin, end):
        if where == "open":
            removed = True
            if note is not None:
                kept.append(line[: len(line) - len(line.lstrip())] + note)
        elif where == "outside":
            kept.append(line)
    return "\n".join(kept), removed


def hidden_spans(source: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` offsets of the hidden-test regions of a cell, markers included (a region left
    open runs to the end)."""
    spans, offset, start = [], 0, None
    for line in source.split("\n"):
        if HIDDEN_BEGIN in line and start is None:
            start = offset
        elif HIDDEN_END in line and start is not None:
            spans.append((start, offset + len(line)))
            start = None
        offset += len(line) + 1
    return spans + ([(start, len(source))] if start is not None else [])


def hidden_lines(source: str) -> list[str]:
    """The lines inside the hidden-test regions of ``source``, stripped, that are worth redacting."""
    return [line.strip() for line, where in _marked_lines(source) if where == "inside" and len(line.strip()) >= 8]


def edition_view(source: str, copy: str, note: str = HIDDEN_NOTE) -> str | None:
    """A test or locked cell as feedback shows it in another edition: the instructor's ``source`` with each
    hidden-test region replaced by :data:`HIDDEN_NOTE` and its visible lines taken from ``copy``, the cell as
    that edition released it (its comments and docstrings in the edition's language, a docstring perhaps on
    more or fewer lines).

    Args:
        note: the line in place of each hidden region, indented like its opening marker: :data:`HIDDEN_NOTE`
            in the edition's language.

    Returns:
        The cell to show, or None when ``copy`` is not the visible part of ``source`` with the same code
        (:func:`autograder.engine.cells.same_code`; an edition behind the instructor's notebook), or a hidden
        region would fall inside a docstring of it.
    """
    visible = [line for line, where in _marked_lines(source) if where == "outside"]
    rows = line_map("\n".join(visible), copy)
    if rows is None:
        return None
    theirs, shown, seen, taken = copy.split("\n"), [], 0, 0
    for line, where in _marked_lines(source):
        if where == "outside":
            seen += 1
        elif where == "open":
            if rows[seen] is None:
                return None
            shown += theirs[taken:rows[seen]] + [line[: len(line) - len(line.lstrip())] + note]
            taken = rows[seen]
    return "\n".join(shown + theirs[taken:])


def clear_solution(source: str, cell_type: str) -> str:
    """The released form of a solution cell: each solution region replaced by the stub."""
    stub = CODE_STUB if cell_type == "code" else TEXT_STUB
    kept: list[str] = []
    inside = replaced = False
    for line in source.split("\n"):
        if SOLUTION_BEGIN in line:
            inside = replaced = True
            indent = line[: len(line) - len(line.lstrip())]
            kept += [indent + stub_line for stub_line in stub.split("\n")]
        elif SOLUTION_END in line:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept) if replaced else stub


#: The contexts (msgctxt) of a written question's model answer and rubric in an edition's catalogue
#: of the exercise (``locales/<language>/LC_MESSAGES/exercises/<assignment>/<notebook>.po``).
MODEL_ANSWER_CONTEXT, RUBRIC_CONTEXT = "model answer", "rubric"


def split_solution(source: str) -> tuple[str, str]:
    r"""The model answer and the rubric of a hand-graded cell's instructor source.

    The solution region (``### BEGIN SOLUTION`` to ``### END SOLUTION``) holds the model answer
    (after its ``**Model answer.**`` label) and, from a line starting with ``**Rubric``, the rubric;
    without such a line the whole region is the model answer.

    Example:
        >>> split_solution("### BEGIN SOLUTION\n**Model answer.** Yes.\n\n**Rubric** (1 point):\n- yes\n### END SOLUTION")
        ('Yes.', '**Rubric** (1 point):\n- yes')
    """
    inside, lines = False, []
    for line in source.split("\n"):
        if SOLUTION_BEGIN in line:
            inside = True
        elif SOLUTION_END in line:
            inside = False
        elif inside:
            lines.append(line)
    region = lines if any(SOLUTION_BEGIN in line for line in source.split("\n")) else source.split("\n")
    cut = next((i for i, line in enumerate(region) if line.lstrip().startswith("**Rubric")), len(region))
    model = "\n".join(region[:cut]).strip().removeprefix("**Model answer.**").strip()
    return model, "\n".join(region[cut:]).strip()


@dataclass(frozen=True)
class PlanCell:
    """One cell of an instructor notebook.

    Attributes:
        kind: :data:`TEST` (autograded), :data:`SOLUTION`, :data:`MANUAL` (a graded answer a human
            marks), :data:`TASK`, :data:`LOCKED` (read-only), :data:`FREE` (no nbgrader role) or
            :data:`DEMO` (no nbgrader role, tagged ``demo``: skipped when grading).
        key: the nbgrader grade id, or the cell id for free cells.
        cell_type: ``"code"``, ``"markdown"`` or ``"raw"``.
        source: the instructor's source, solutions and hidden tests included.
        released: what learners got: solutions replaced by stubs, hidden tests removed.
        points: what the cell is worth (0 for cells that are not graded).
    """

    kind: str
    key: str
    cell_type: str
    source: str
    released: str
    points: float = 0.0


@dataclass
class NotebookPlan:
    """One instructor notebook: its name (without ``.ipynb``) and cells, in order.

    ``variants`` holds, per key of a course cell without nbgrader metadata (the setup cell, imports),
    the other sources the course has shipped it with: the Chinese edition's copy and the copies of
    earlier releases (:func:`course_variants`). A learner's cell equal to any of them is the course's.
    """

    name: str
    cells: list[PlanCell]
    variants: dict[str, set[str]] = field(default_factory=dict)

    def is_course_source(self, key: str | None, source: str) -> bool:
        """Whether ``source`` is the course cell ``key`` as some edition or release shipped it (the
        repository and ref its install line names do not matter)."""
        cell = next((c for c in self.cells if c.key == key), None)
        if cell is None:
            return False
        known = {cell.source, *self.variants.get(cell.key, ())}
        return _without_ref(source) in {_without_ref(s) for s in known}

    @property
    def grade_ids(self) -> set[str]:
        """The grade ids of the notebook's nbgrader cells."""
        return {c.key for c in self.cells if c.kind not in (FREE, DEMO)}

    @property
    def imports(self) -> list[str]:
        """The import statements of the instructor's own code cells: the referee runs them before the
        tests, so a test sees ``torch``, ``nn`` or ``math`` as the course imported them."""
        from autograder.engine.cells import import_statements

        return [statement for c in self.cells if c.kind in (FREE, LOCKED) and c.cell_type == "code"
                for statement in import_statements(c.source)]

    @property
    def hidden_lines(self) -> list[str]:
        """Every line of hidden test code in the notebook, for redacting feedback."""
        return [line for c in self.cells if c.kind == TEST for line in hidden_lines(c.source)]


@dataclass
class AssignmentPlan:
    """An assignment: its notebooks and a digest of the instructor's files (for resuming)."""

    name: str
    notebooks: dict[str, NotebookPlan]
    digest: str

    @property
    def grade_ids(self) -> set[str]:
        """All grade ids of the assignment."""
        return set().union(*(nb.grade_ids for nb in self.notebooks.values()))


def _classify(meta: dict) -> str:
    if meta.get("task"):
        return TASK
    if meta.get("solution"):
        return MANUAL if meta.get("grade") else SOLUTION
    if meta.get("grade"):
        return TEST
    if meta.get("locked"):
        return LOCKED
    return FREE


def load_notebook_plan(path: Path, *, visible_only: bool = False, released: bool = False) -> NotebookPlan:
    """Read one instructor notebook into a :class:`NotebookPlan`.

    Args:
        path: an nbgrader source notebook (solutions and hidden tests included).
        visible_only: plan with the released test cells (no hidden tests), as a learner's own
            check does.
        released: ``path`` is a released exercise, not a source notebook: its solution cells
            already hold the stubs learners got and are kept as they are (implies ``visible_only``).

    Raises:
        PlanError: if the notebook cannot be read or repeats a grade id.
    """
    try:
        nb = read_notebook(path)
    except NotebookError as error:
        raise PlanError(str(error)) from error
    cells, seen = [], set()
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        kind = _classify(meta)
        if kind == FREE and DEMO_TAG in (cell.get("metadata", {}).get("tags") or []):
            kind = DEMO
        key = str(meta.get("grade_id") or "") if kind not in (FREE, DEMO) else str(cell.get("id") or f"cell-{index}")
        if kind not in (FREE, DEMO) and not key:
            raise PlanError(f"{path}: cell {index} has nbgrader metadata but no grade_id")
        if key in seen:
            raise PlanError(f"{path}: the id {key!r} is used by more than one cell")
        seen.add(key)
        source = cell.source
        if kind in (SOLUTION, MANUAL):
            shipped = source if released else clear_solution(source, cell.cell_type)
        else:
            shipped = strip_hidden_region(source, note=None)[0]
        if (visible_only or released) and kind == TEST:
            source = shipped
        points = float(meta.get("points") or 0) if kind in (TEST, MANUAL, TASK) else 0.0
        cells.append(PlanCell(kind, key, cell.cell_type, source, shipped, points))
    return NotebookPlan(Path(path).stem, cells)


def load_plan(assignment: str, root: Path, *, visible_only: bool = False) -> AssignmentPlan:
    """Read ``<root>/solutions/<assignment>/*.ipynb`` into an :class:`AssignmentPlan`.

    Raises:
        PlanError: if the folder holds no notebooks, one cannot be read, or grade ids repeat.
    """
    return _load_folder(assignment, Path(root) / "solutions" / assignment, visible_only=visible_only)


def load_released_plan(assignment: str, exercises: Path) -> AssignmentPlan:
    """Read the released exercise ``<exercises>/<assignment>/*.ipynb`` into an :class:`AssignmentPlan`.

    The plan has the visible tests only (a released notebook has no hidden ones) and the stubs
    learners got as its solution cells; it is what a learner's check uses without ``solutions/``.

    Raises:
        PlanError: if the folder holds no notebooks, one cannot be read, or grade ids repeat.
    """
    return _load_folder(assignment, Path(exercises) / assignment, released=True)


def _load_folder(assignment: str, folder: Path, **options: bool) -> AssignmentPlan:
    """The plan of the notebooks in ``folder`` (``options`` go to :func:`load_notebook_plan`)."""
    paths = sorted(folder.glob("*.ipynb"))
    if not paths:
        raise PlanError(f"no notebooks in {folder}")
    digest = hashlib.sha256()
    notebooks = {}
    root = folder.resolve().parents[1]
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
        notebooks[path.stem] = load_notebook_plan(path, **options)
        notebooks[path.stem].variants = course_variants(notebooks[path.stem], root, assignment)
    ids = [key for nb in notebooks.values() for key in nb.grade_ids]
    if len(ids) != len(set(ids)):
        raise PlanError(f"{folder}: a grade id is used in more than one notebook")
    return AssignmentPlan(assignment, notebooks, digest.hexdigest())


def _free_code_cells(cells: list[dict], *, demo: bool = False) -> list[dict]:
    """The code cells without nbgrader metadata: the free ones, or with ``demo`` the ones tagged demo."""
    return [c for c in cells if c.get("cell_type") == "code" and not c.get("metadata", {}).get("nbgrader")
            and (DEMO_TAG in (c.get("metadata", {}).get("tags") or [])) == demo]


def _matched_sources(plan: NotebookPlan, shipped: dict) -> dict[str, str]:
    """The sources of ``shipped`` (another copy of the notebook) for the plan's free and demo code cells
    (each kind apart): by cell id, else by position among the cells of that kind when both copies have as
    many. A Chinese copy's cells differ in their comments and so in their ids."""
    found: dict[str, str] = {}
    for kind, demo in ((FREE, False), (DEMO, True)):
        ours = [c for c in plan.cells if c.kind == kind and c.cell_type == "code"]
        theirs = _free_code_cells(shipped.get("cells", []), demo=demo)
        by_id = {c.get("id"): c for c in theirs}
        positional = len(ours) == len(theirs)
        for index, cell in enumerate(ours):
            other = by_id.get(cell.key) or (theirs[index] if positional else None)
            if other is not None:
                source = other.get("source", "")
                found[cell.key] = "".join(source) if isinstance(source, list) else str(source)
    return found


def _release_tags(root: Path) -> list[str]:
    """The git tags of ``root`` (the releases of the course), or none without git."""
    try:
        result = subprocess.run(["git", "-C", str(root), "tag", "--list"], capture_output=True, text=True,
                                timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.split() if result.returncode == 0 else []


def _shipped_at(root: Path, tag: str, relative: str) -> dict | None:
    """The notebook ``relative`` as tag ``tag`` of ``root`` holds it, as JSON, or None."""
    try:
        result = subprocess.run(["git", "-C", str(root), "show", f"{tag}:{relative}"], capture_output=True,
                                timeout=30, check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def course_variants(plan: NotebookPlan, root: Path, assignment: str) -> dict[str, set[str]]:
    """Every source the course has shipped each of the notebook's free and demo code cells with, other than the
    plan's own: the copies in each edition's released exercise (:data:`EDITIONS`) and, in a git
    checkout, in the English and Chinese exercises of every tagged release.

    Args:
        plan: the notebook.
        root: the course repository.
        assignment: the assignment folder's name.
    """
    variants: dict[str, set[str]] = {}
    relatives = [f"{folder}/{assignment}/{plan.name}.ipynb" for folder in ("exercises", *EDITIONS)]
    copies = []
    for relative in relatives[1:]:
        try:
            copies.append(json.loads((root / relative).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    tags = _release_tags(root)
    copies += [copy for tag in tags for relative in relatives
               if (copy := _shipped_at(root, tag, relative)) is not None]
    for shipped in copies:
        for key, source in _matched_sources(plan, shipped).items():
            variants.setdefault(key, set()).add(source)
    return variants


def released_folders(root: Path) -> list[Path]:
    """Where released exercises are looked for, in order: ``<root>/exercises`` (a clone of the
    course) and :data:`PACKAGED_EXERCISES` (the copy inside an installed wheel); only those that
    exist."""
    candidates = [Path(root) / "exercises", PACKAGED_EXERCISES]
    found: list[Path] = []
    for folder in candidates:
        if folder.is_dir() and not any(folder.resolve() == f.resolve() for f in found):
            found.append(folder)
    return found


def released_assignments(exercises: Path) -> dict[str, list[str]]:
    """The assignments of a folder of released exercises: folder name -> notebook names (sorted)."""
    if not Path(exercises).is_dir():
        return {}
    return {p.name: sorted(n.stem for n in p.glob("*.ipynb"))
            for p in sorted(Path(exercises).iterdir())
            if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.ipynb"))}


# --- Rebuilding a learner's notebook --------------------------------------------------------------


@dataclass
class RunCell:
    """One cell of the notebook that is actually run.

    Attributes:
        kind: the plan's kind, or :data:`FREE` for the learner's own cells.
        key: the grade id (or cell id) of a course cell; None for the learner's extra cells.
        cell_type: as in the instructor's copy.
        source: what runs.
        shown: what feedback shows (hidden tests replaced by a note).
        points: what the cell is worth.
        origin: ``"yours"``, ``"course"`` or ``"released"`` (a stub put back for a missing cell).
    """

    kind: str
    key: str | None
    cell_type: str
    source: str
    shown: str
    points: float
    origin: str


@dataclass
class Assembly:
    """A learner notebook rebuilt on the plan.

    Attributes:
        cells: the cells to run, in order.
        notes: what was repaired, one sentence each, for the feedback.
        matched: how many of the plan's nbgrader cells were found in the learner's notebook.
        learner_code: the code the learner supplied (solution, edited and extra cells).
        advice: what the source check would warn a learner of without taking points (a switched-off
            built-in named in their code), for ``validate``.
    """

    cells: list[RunCell]
    notes: list[str] = field(default_factory=list)
    matched: int = 0
    learner_code: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)


def _learner_key(cell: dict, plan: NotebookPlan, solution_keys: set[str]) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    grade_id = meta.get("grade_id")
    if isinstance(grade_id, str) and grade_id in plan.grade_ids:
        return grade_id
    if not meta and cell.get("id") in solution_keys:
        return cell["id"]
    return None


def assemble(plan: NotebookPlan, learner) -> Assembly:
    """Rebuild a learner's notebook on the instructor's plan (see the module docstring).

    Args:
        plan: the instructor's notebook.
        learner: the learner's notebook (an nbformat ``NotebookNode`` as read from their file).

    Returns:
        The cells to run, the notes for feedback and how many course cells were found.
    """
    found = _LearnerCells(plan)
    for cell in learner.cells:
        found.read(cell)
    cells, learner_code = _rebuild(plan, found)
    return Assembly(cells, found.notes, found.matched, learner_code)


class _LearnerCells:
    """What a learner's notebook holds, read cell by cell against the plan (the first step of
    :func:`assemble`): the answers in its solution and written cells, its versions of free course
    cells, and its own code cells, each kept after the course cell it follows.

    Args:
        plan: the instructor's notebook.
    """

    def __init__(self, plan: NotebookPlan) -> None:
        self.plan = plan
        self.by_key = {c.key: c for c in plan.cells}
        self.solution_keys = {c.key for c in plan.cells if c.kind in (SOLUTION, MANUAL)}
        self.free_by_source: dict[str, str] = {}     # a free or demo course cell's source (any edition) -> its key
        for c in plan.cells:
            if c.kind in (FREE, DEMO):
                for source in (c.source, *plan.variants.get(c.key, ())):
                    self.free_by_source.setdefault(_without_ref(source), c.key)
        self.notes: list[str] = []
        self.answers: dict[str, str] = {}            # a solution or written cell's key -> the learner's source
        self.edited_free: dict[str, str] = {}        # a free course cell's key -> the learner's version of it
        self.extra: dict[str | None, list] = {}      # the course cell they follow (None: the start) -> own code cells
        self.seen: set[str] = set()
        self.anchor: str | None = None               # the last course cell read
        self.matched = 0                             # course cells found by their grade id

    def read(self, cell) -> None:
        """Take in the learner's next cell (an nbformat cell)."""
        key = _learner_key(cell, self.plan, self.solution_keys)
        nbgrader = cell.get("metadata", {}).get("nbgrader")
        if key is None and not nbgrader and self._read_free_cell(cell):
            return
        if key is not None and key not in self.seen:
            self._read_graded_cell(cell, key)
            return
        if key is not None:
            self.notes.append(f"Your notebook has the cell `{key}` more than once; only the first copy counts.")
            if self.by_key[key].kind not in (SOLUTION, MANUAL):
                return
        elif nbgrader:
            self.notes.append("A cell with nbgrader metadata that does not belong to this assignment was "
                              "run as your own code.")
        if cell.get("cell_type") == "code":
            self.extra.setdefault(self.anchor, []).append(cell)

    def _read_free_cell(self, cell) -> bool:
        """Whether ``cell`` is a free course cell not read before (by its id, else by its source); it
        then anchors the learner's cells that follow, and a version of the same type is kept."""
        candidate = cell.get("id")
        if candidate not in self.by_key or self.by_key[candidate].kind not in (FREE, DEMO):
            candidate = self.free_by_source.get(_without_ref(str(cell.get("source", ""))))
        if candidate is None or candidate in self.seen:
            return False
        self.seen.add(candidate)
        self.anchor = candidate
        if cell.get("cell_type") == self.by_key[candidate].cell_type:
            self.edited_free[candidate] = cell.get("source", "")
        return True

    def _read_graded_cell(self, cell, key: str) -> None:
        """The first copy of the course cell ``key``: an answer is kept if the cell kept its type; a
        changed course cell is noted (the original runs either way). A test or locked cell whose code is the
        released one is unchanged whatever its comments and docstrings say
        (:func:`autograder.engine.cells.same_code`): the Chinese edition words them in Chinese."""
        self.seen.add(key)
        self.matched += 1
        self.anchor = key
        expected = self.by_key[key]
        if expected.kind in (SOLUTION, MANUAL):
            if cell.get("cell_type") == expected.cell_type:
                self.answers[key] = cell.get("source", "")
            else:
                self.notes.append(f"Your cell `{key}` was changed from {expected.cell_type} to "
                                  f"{cell.get('cell_type')}; the blank released cell was graded instead.")
        elif cell.get("cell_type") != expected.cell_type or not same_code(cell.get("source", ""), expected.released):
            self.notes.append(f"The course cell `{key}` was changed in your notebook; the original was used.")


def _rebuild(plan: NotebookPlan, found: _LearnerCells) -> tuple[list[RunCell], list[str]]:
    """The second step of :func:`assemble`: the plan's cells in order, each with what the learner's
    notebook gives for it, and the learner's own code cells after the course cell they followed.

    Returns:
        The cells to run, and the learner's code among them.
    """
    cells: list[RunCell] = []
    learner_code: list[str] = []

    def add_extra(after: str | None) -> None:
        for cell in found.extra.get(after, []):
            cells.append(RunCell(FREE, None, "code", cell.source, cell.source, 0.0, "yours"))
            learner_code.append(cell.source)

    add_extra(None)
    for c in plan.cells:
        cell, own_code = _planned_cell(plan, c, found)
        if cell is not None:
            cells.append(cell)
        if own_code is not None:
            learner_code.append(own_code)
        add_extra(c.key)
    return cells, learner_code


def _planned_cell(plan: NotebookPlan, c: PlanCell, found: _LearnerCells) -> tuple[RunCell | None, str | None]:
    """The cell to run for the plan's cell ``c`` (None for a demo cell, which learners run and grading
    does not), and its source when it is the learner's code."""
    if c.kind in (SOLUTION, MANUAL):
        if c.key in found.answers:
            answer = found.answers[c.key]
            return RunCell(c.kind, c.key, c.cell_type, answer, answer, c.points, "yours"), answer
        if c.key not in found.seen:
            found.notes.append(f"Your notebook has no cell `{c.key}`; the blank released cell was graded.")
        return RunCell(c.kind, c.key, c.cell_type, c.released, c.released, c.points, "released"), None
    if c.kind == DEMO:
        return None, None
    if c.kind == FREE and c.key in found.edited_free:
        source = found.edited_free[c.key]
        return (RunCell(FREE, c.key, c.cell_type, source, source, 0.0, "yours"),
                None if plan.is_course_source(c.key, source) else source)
    if c.kind == TEST and c.key not in found.seen:
        found.notes.append(f"The test cell `{c.key}` was missing from your notebook; it was put back and run.")
    shown = strip_hidden_region(c.source)[0] if c.kind == TEST else c.source
    return RunCell(c.kind, c.key, c.cell_type, c.source, shown, c.points, "course"), None

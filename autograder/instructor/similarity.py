"""Near-copies among graded cells: the similarity report written after grading.

After a batch is graded, ``<out>/similarity.html`` and ``<out>/similarity.csv`` list the learners
whose graded code cells are near-copies of another learner's, of the published solutions
(``solutions/``) or of a function of the course library (``transformer_core/*.py``). The report
flags work for a human to look at; it never changes a score.

How code is compared:

1. **Normalise and fingerprint** each cell (:mod:`~autograder.instructor.similarity_fingerprints`):
   names the learner chose, comments, docstrings and whitespace do not count; winnowed fingerprints of
   runs of :data:`K` tokens, as MOSS does.
2. **Subtract what everybody has.** Fingerprints of the released cell (the signature and stub every
   learner starts from) are removed, and so are fingerprints found in the work of more than
   :data:`COMMON_SHARE` of the class (and more than :data:`COMMON_MIN` learners): an idiom is no
   evidence. Nor is code the course gives (:mod:`~autograder.instructor.similarity_given`): the
   released notebook's other cells, the code its text and hints spell out (a part's own inline code
   whole) and the code cells of its chapter, so a learner who typed what the text spells out is no
   copier, while what a solution adds to the text still counts.
3. **Compare through an index.** Learners are paired through an inverted index from fingerprint to
   learners, so only pairs that share something are ever looked at (a class of 300 takes about a
   second, not the 44,850 comparisons of every pair).

The **overlap** of two pieces of work is the Jaccard index of their fingerprint sets (shared / all
distinct), over all graded code cells of the assignment, each fingerprint tied to its cell. A pair is
reported from :data:`THRESHOLD` up when it shares at least :data:`MIN_SHARED` fingerprints (with the
published solution: all of them when the code given leaves it fewer, but never under
:data:`MIN_SHARED_SOLUTION`; exercise 04's solution is mostly the chapter's code). Against
the library, each cell is compared with each function, and the share of the cell's fingerprints
found in the function is reported.
"""

from __future__ import annotations

import ast
import functools
import html
import textwrap
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.files import REPO_ROOT
from autograder.core.safe_output import csv_text, page_head
from autograder.instructor.similarity_fingerprints import K, WINDOW, chosen_names
from autograder.instructor.similarity_given import GivenCode, cell_fingerprints, course_code

THRESHOLD = 0.5
MIN_SHARED = 6
MIN_SHARED_SOLUTION = 3
COMMON_SHARE = 0.1
COMMON_MIN = 10
SOLUTION = "published solution"
HTML_NAME = "similarity.html"
CSV_NAME = "similarity.csv"
CSV_COLUMNS = ["assignment", "learner", "other", "kind", "overlap", "shared", "cells"]


# --- 1. Works, and comparing them through an index ----------------------------------------------


@dataclass
class Work:
    """One learner's graded code cells of one assignment, fingerprinted.

    Attributes:
        owner: the learner key (or :data:`SOLUTION`).
        cells: cell key -> source.
        prints: cell key -> {fingerprint -> (first line, last line)}, the template's removed.
    """

    owner: str
    cells: dict[str, str]
    prints: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)

    def keys(self) -> set[tuple[str, int]]:
        """Every fingerprint, tied to its cell."""
        return {(cell, h) for cell, found in self.prints.items() for h in found}


@functools.lru_cache(maxsize=1024)
def _template_fingerprints(template: str) -> frozenset[int]:
    """The fingerprints of a released cell, its own names renamed (the signature's names are the
    learner's too), computed once per template."""
    return frozenset(cell_fingerprints(template, chosen_names([template])))


def fingerprint_work(owner: str, cells: dict[str, str], templates: dict[str, str],
                     given: GivenCode | None = None) -> Work:
    """Fingerprint a learner's ``cells`` (cell key -> source), less the fingerprints of the released
    ``templates`` (cell key -> the stub learners got) and of the code the course ``given``."""
    chosen = chosen_names(list(cells.values()))
    work = Work(owner, dict(cells))
    for key, source in cells.items():
        found = cell_fingerprints(source, chosen, given, key)
        template = templates.get(key)
        if template:
            for h in _template_fingerprints(template):
                found.pop(h, None)
        work.prints[key] = found
    return work


@dataclass(frozen=True)
class Match:
    """Two pieces of work that overlap.

    Attributes:
        assignment: the assignment.
        learner: the learner key.
        other: another learner's key, :data:`SOLUTION`, or a library function (``module.function``).
        kind: ``"learner"``, ``"solution"`` or ``"library"``.
        overlap: the Jaccard index of their fingerprints (library: the share of the cell's
            fingerprints found in the function), from 0 to 1.
        shared: how many fingerprints they share.
        cells: the cell keys that share fingerprints, with each cell's own overlap.
    """

    assignment: str
    learner: str
    other: str
    kind: str
    overlap: float
    shared: int
    cells: tuple[tuple[str, float], ...]


def _jaccard(a: set, b: set) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _cells_in_common(a: Work, b: Work) -> tuple[tuple[str, float], ...]:
    found = []
    for key in sorted(set(a.prints) & set(b.prints)):
        ours, theirs = set(a.prints[key]), set(b.prints[key])
        if ours & theirs:
            found.append((key, round(_jaccard(ours, theirs), 3)))
    return tuple(sorted(found, key=lambda c: -c[1]))


def compare_learners(assignment: str, works: list[Work], *, threshold: float = THRESHOLD,
                     min_shared: int = MIN_SHARED) -> list[Match]:
    """Pairs of learners whose work overlaps from ``threshold`` up, found through an inverted index
    (fingerprints common in the class, see :data:`COMMON_SHARE`, are left out)."""
    sets = {w.owner: w.keys() for w in works}
    holders: dict[tuple[str, int], list[str]] = defaultdict(list)
    for owner, keys in sets.items():
        for key in keys:
            holders[key].append(owner)
    common_limit = max(COMMON_MIN, COMMON_SHARE * len(works))
    common = {key for key, owners in holders.items() if len(owners) > common_limit}
    size = {owner: len(keys - common) for owner, keys in sets.items()}
    shared: Counter = Counter()
    for key, owners in holders.items():
        if key in common or len(owners) < 2:
            continue
        owners = sorted(owners)
        for i, first in enumerate(owners):
            for second in owners[i + 1:]:
                shared[first, second] += 1
    by_owner = {w.owner: w for w in works}
    matches = []
    for (first, second), count in shared.items():
        overlap = count / (size[first] + size[second] - count)
        if overlap >= threshold and count >= min_shared:
            matches.append(Match(assignment, first, second, "learner", round(overlap, 3), count,
                                 _cells_in_common(by_owner[first], by_owner[second])))
    return sorted(matches, key=lambda m: (-m.overlap, m.learner, m.other))


def compare_with_solution(assignment: str, works: list[Work], solution: Work, *, threshold: float = THRESHOLD,
                          min_shared: int = MIN_SHARED) -> list[Match]:
    """Learners whose work overlaps with the published solution from ``threshold`` up, sharing at
    least ``min_shared`` fingerprints or, where the code given leaves the solution fewer of its own,
    all of them (never fewer than :data:`MIN_SHARED_SOLUTION`)."""
    reference = solution.keys()
    needed = min(min_shared, max(len(reference), MIN_SHARED_SOLUTION))
    matches = []
    for work in works:
        keys = work.keys()
        count = len(keys & reference)
        overlap = _jaccard(keys, reference)
        if count >= needed and overlap >= threshold:
            matches.append(Match(assignment, work.owner, SOLUTION, "solution", round(overlap, 3), count,
                                 _cells_in_common(work, solution)))
    return sorted(matches, key=lambda m: (-m.overlap, m.learner))


@dataclass
class Library:
    """The course library's functions, fingerprinted, with an index from fingerprint to function.

    Attributes:
        functions: ``module.qualified_name`` -> its source.
        prints: the same names -> fingerprint set.
        index: fingerprint -> the names whose source has it.
    """

    functions: dict[str, str] = field(default_factory=dict)
    prints: dict[str, set[int]] = field(default_factory=dict)
    index: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))


def load_library(folder: Path) -> Library:
    """Every function and method of ``folder/*.py`` (the course library), fingerprinted on its own."""
    library = Library()
    for path in sorted(Path(folder).glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
            lines = text.split("\n")
        except (OSError, SyntaxError, ValueError):
            continue

        def visit(node, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    source = textwrap.dedent("\n".join(lines[first - 1:child.end_lineno]))
                    name = f"{path.stem}.{prefix}{child.name}"
                    library.functions[name] = source
                    library.prints[name] = set(cell_fingerprints(source, chosen_names([source])))
                    visit(child, f"{prefix}{child.name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")

        visit(tree, "")
    for name, found in library.prints.items():
        for h in found:
            library.index[h].append(name)
    return library


def compare_with_library(assignment: str, works: list[Work], library: Library, *, threshold: float = THRESHOLD,
                         min_shared: int = MIN_SHARED) -> list[Match]:
    """Cells of which at least ``threshold`` of the fingerprints are in one library function.

    A class's code is compared with the library's own (the names each function binds renamed within
    that function), so a learner who pasted ``transformer_core``'s code under other names is found."""
    matches = []
    for work in works:
        best: dict[str, tuple[int, list[tuple[str, float]]]] = {}
        for key, found in work.prints.items():
            if len(found) < min_shared:
                continue
            counts: Counter = Counter(name for h in found for name in library.index.get(h, ()))
            for name, count in counts.items():
                share = count / len(found)
                if count >= min_shared and share >= threshold:
                    total, cells = best.get(name, (0, []))
                    best[name] = (total + count, cells + [(key, round(share, 3))])
        for name, (count, cells) in best.items():
            matches.append(Match(assignment, work.owner, name, "library", max(s for _, s in cells), count,
                                 tuple(sorted(cells, key=lambda c: -c[1]))))
    return sorted(matches, key=lambda m: (-m.overlap, m.learner, m.other))


# --- 2. The report --------------------------------------------------------------------------------


@dataclass
class Report:
    """What the similarity report found.

    Attributes:
        matches: every reported pair, learners first, then the solution, then the library.
        works: assignment -> its learners' fingerprinted work (for showing the matched code).
        solutions: assignment -> the published solution's work.
        library: the library's functions.
        learners: how many graded submissions were compared.
        seconds: how long it took.
    """

    matches: list[Match]
    works: dict[str, dict[str, Work]]
    solutions: dict[str, Work]
    library: Library
    learners: int
    seconds: float = 0.0

    def summary(self) -> str:
        """One line for the command line."""
        kinds = Counter(m.kind for m in self.matches)
        return (f"similarity: {kinds['learner']} pair{'s' if kinds['learner'] != 1 else ''} of learners, "
                f"{kinds['solution']} near-cop{'ies' if kinds['solution'] != 1 else 'y'} of the published solution, "
                f"{kinds['library']} of the course library, among {self.learners} graded submission"
                f"{'s' if self.learners != 1 else ''} ({self.seconds:.1f} s); scores unchanged; see {HTML_NAME}")


def build_report(works_by_assignment: dict[str, list[Work]], solutions: dict[str, Work], library: Library, *,
                 threshold: float = THRESHOLD, min_shared: int = MIN_SHARED) -> Report:
    """Compare every assignment's works with each other, with its solution and with the library."""
    start = time.perf_counter()
    learners, solution_matches, library_matches = [], [], []
    for assignment, works in sorted(works_by_assignment.items()):
        learners += compare_learners(assignment, works, threshold=threshold, min_shared=min_shared)
        if assignment in solutions:
            solution_matches += compare_with_solution(assignment, works, solutions[assignment],
                                                      threshold=threshold, min_shared=min_shared)
        library_matches += compare_with_library(assignment, works, library, threshold=threshold,
                                                min_shared=min_shared)
    return Report(learners + solution_matches + library_matches,
                  {a: {w.owner: w for w in works} for a, works in works_by_assignment.items()}, solutions,
                  library, sum(len(w) for w in works_by_assignment.values()), time.perf_counter() - start)


def write_csv(path: Path, report: Report) -> None:
    """``similarity.csv``: one row per reported pair (columns :data:`CSV_COLUMNS`)."""
    from autograder.core.results import write_atomically

    rows = [CSV_COLUMNS] + [[m.assignment, m.learner, m.other, m.kind, f"{m.overlap:.3f}", m.shared,
                             "; ".join(f"{key} {share:.2f}" for key, share in m.cells)] for m in report.matches]
    write_atomically(path, csv_text(rows, lineterminator="\n").encode("utf-8"))


def _highlighted(source: str, lines: set[int]) -> str:
    """``source`` escaped, the ``lines`` (1-based) marked."""
    out = []
    for number, text in enumerate(source.split("\n"), start=1):
        escaped = html.escape(text) or " "
        out.append(f"<mark>{escaped}</mark>" if number in lines else escaped)
    return "\n".join(out)


def _shared_lines(found: dict[int, tuple[int, int]], shared: set[int]) -> set[int]:
    lines: set[int] = set()
    for h in shared:
        first, last = found[h]
        lines.update(range(first, last + 1))
    return lines


def _side_by_side(title_a: str, source_a: str, prints_a: dict, title_b: str, source_b: str, prints_b: dict) -> str:
    shared = set(prints_a) & set(prints_b)
    esc = html.escape
    return ("<div class='pair'>"
            f"<div><h4>{esc(title_a)}</h4><pre>{_highlighted(source_a, _shared_lines(prints_a, shared))}</pre></div>"
            f"<div><h4>{esc(title_b)}</h4><pre>{_highlighted(source_b, _shared_lines(prints_b, shared))}</pre></div>"
            "</div>")


def _details(report: Report, m: Match) -> str:
    """The matched cells of ``m`` side by side, shared lines marked."""
    work = report.works[m.assignment][m.learner]
    parts = []
    for key, share in m.cells:
        if m.kind == "library":
            source = report.library.functions[m.other]
            said, title, theirs = f"{share:.0%} of the cell's fingerprints are in {m.other}", m.other, (
                source, cell_fingerprints(source, chosen_names([source])))
        else:
            other = report.solutions[m.assignment] if m.kind == "solution" else report.works[m.assignment][m.other]
            said, title, theirs = f"overlap {share:.0%}", f"{m.other}: {key}", (other.cells[key], other.prints[key])
        parts.append(f"<p>{html.escape(f'{key}: {said}')}</p>" + _side_by_side(
            f"{m.learner}: {key}", work.cells[key], work.prints[key], title, *theirs))
    return "".join(parts)


# A fixed table layout: the code of a pair scrolls inside its own column, never the page sideways.
_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1400px}table{border-collapse:collapse;margin:.5em 0 1.5em;
table-layout:fixed;width:100%}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:left;vertical-align:top;
overflow-wrap:anywhere}th{background:#eee}th:nth-child(-n+2){width:13%}th:nth-child(n+3):nth-child(-n+4){width:7%}
.pair{display:flex;gap:1em}.pair>div{flex:1;min-width:0}details{margin:.3em 0}summary{cursor:pointer}
pre{background:#f7f7f7;padding:.5em;overflow:auto;font-size:85%;overflow-wrap:normal}mark{background:#ffe08a}
"""


def render_html(report: Report) -> str:
    """``similarity.html``: the reported pairs by assignment and kind, each with its matched code."""
    esc = html.escape
    titles = {"learner": "Pairs of learners", "solution": "Learners and the published solution",
              "library": "Learners and the course library (transformer_core)"}
    others = {"learner": "other learner", "solution": "compared with", "library": "library function"}
    parts = [page_head("Similarity report", _STYLE), "<h1>Similarity report</h1>",
             f"<p>{esc(report.summary())}.</p>",
             "<p>Graded code cells compared after normalising names, whitespace, comments and docstrings (winnowed "
             f"fingerprints of {K}-token runs, window {WINDOW}; left out: the released stubs, the code the exercise's "
             "hints and its chapter give, and fingerprints common in the class). Listed from an overlap of "
             f"{THRESHOLD:.0%} and {MIN_SHARED} shared fingerprints. This report only flags work for you to read: a high "
             "overlap is not proof of copying (short cells have few ways to be written), and <b>no score was changed</b>.</p>"]
    if not report.matches:
        parts.append("<p>Nothing to review: no pair reached the threshold.</p>")
    for assignment in sorted({m.assignment for m in report.matches}):
        parts.append(f"<h2>{esc(assignment)}</h2>")
        for kind in ("learner", "solution", "library"):
            found = [m for m in report.matches if m.assignment == assignment and m.kind == kind]
            if not found:
                continue
            parts.append(f"<h3>{titles[kind]}</h3><table><tr><th>learner</th><th>{others[kind]}</th>"
                         "<th>overlap</th><th>shared fingerprints</th><th>cells</th></tr>")
            for m in found:
                cells = ", ".join(f"{key} ({share:.0%})" for key, share in m.cells)
                parts.append(f"<tr><td>{esc(m.learner)}</td><td>{esc(m.other)}</td><td>{m.overlap:.0%}</td>"
                             f"<td>{m.shared}</td><td><details><summary>{esc(cells)}</summary>"
                             f"{_details(report, m)}</details></td></tr>")
            parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


# --- 3. From a graded output folder ---------------------------------------------------------------


def similarity_report(out_dir: Path | str, *, root: Path = REPO_ROOT, threshold: float = THRESHOLD,
                      min_shared: int = MIN_SHARED, write: bool = True) -> Report:
    """Compare the graded code cells of every graded submission in ``out_dir`` and write
    ``similarity.html`` and ``similarity.csv`` there (never touching a result or a score).

    The learners' cells come from the answers the grader stored (:mod:`autograder.engine.answers`); a
    submission graded by a version that stored none is left out.
    """
    from autograder.core.results import load_results, write_atomically
    from autograder.engine.answers import load_answers

    start = time.perf_counter()
    out_dir = Path(out_dir)
    by_assignment: dict[str, list[Work]] = defaultdict(list)
    solutions: dict[str, Work] = {}
    plans: dict[str, tuple[dict, dict, GivenCode]] = {}
    for result in load_results(out_dir):
        if not result.graded:
            continue
        if result.assignment not in plans:
            plans[result.assignment] = course_code(result.assignment, root)
        templates, solution, given = plans[result.assignment]
        answers = load_answers(out_dir, result)
        if answers is None:
            continue
        cells = {key: answer.source for key, answer in answers.items()
                 if key in templates and answer.origin == "yours"}
        by_assignment[result.assignment].append(fingerprint_work(result.learner, cells, templates, given))
    for assignment, (templates, solution, given) in plans.items():
        if solution:
            solutions[assignment] = fingerprint_work(SOLUTION, solution, templates, given)
    report = build_report(by_assignment, solutions, load_library(Path(root) / "transformer_core"),
                          threshold=threshold, min_shared=min_shared)
    report.seconds = time.perf_counter() - start
    if write:
        write_csv(out_dir / CSV_NAME, report)
        write_atomically(out_dir / HTML_NAME, render_html(report).encode("utf-8"))
    return report

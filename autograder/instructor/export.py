"""``python -m autograder export``: turn an ``--out`` folder of results into a file an LMS imports.

Reads every result under ``<out>/results`` (merging the instructor's manual-scores file, see
:mod:`autograder.instructor.manual`), matches the learners to a roster, applies a late policy and writes one
of three CSV formats:

``canvas``
    Canvas' gradebook import format, as documented in the Canvas Instructor Guide, "How do I import
    grades in the Gradebook?" (the version current in 2024-2025): the columns ``Student, ID,
    SIS User ID, SIS Login ID, Section``, then one column per assignment named
    ``<Assignment name> (<assignment id>)``; a second row ``Points Possible`` gives each column's
    maximum. Canvas matches learners by ``ID`` (or the SIS columns), updates the assignment whose
    name and id match a column and creates a new assignment for a column that matches none. An
    empty cell leaves the grade in Canvas as it is.
``moodle``
    Moodle's "Import grades from CSV file" (Grade administration > Import > CSV file, as documented
    for Moodle 4.x, "Grade import"): one identifier column (``ID number`` or ``Email address``,
    which the instructor maps to "Identify user by"), the names for reading, and one grade column per
    assignment, mapped to the grade item in the import form. Moodle imports an empty cell as "no
    grade": it clears a grade already in the gradebook. ``omit_ungraded`` leaves rows without any
    grade out of the file instead.
``plain``
    One row per learner: the score of each assignment, then every graded cell in notebook order,
    then per assignment the status, the submission time, the days late and the penalty.

Every roster learner gets a row; a learner without a submission gets status ``missing`` (grade empty,
or 0 with ``--missing zero``). Submissions of learners who are not on the roster are listed on the
terminal and in ``<output>-not-on-roster.csv``, so nobody is lost. Learners are matched to the
roster by LMS id first (Canvas' user ID, Moodle's participant number from a grading worksheet,
``lms_id`` in a plain roster), then by name without case or extra whitespace (also ``Last, First``
as ``First Last`` and Canvas' squashed ``lastfirst`` file names); a name that fits several roster
entries is reported, never guessed.

Late policies: :mod:`autograder.instructor.late_policy`.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.results import GradeResult, cell_columns, write_atomically
from autograder.core.safe_output import csv_text
from autograder.instructor.after_grading import publish
from autograder.instructor.late_policy import (LATE_RECORD, LatePolicy, days_late, lateness, parse_due,
                                               parse_late_policy, save_late_policy, saved_deadline, saved_policy)
from autograder.instructor.manual import squeeze_name

FORMATS = ("canvas", "moodle", "plain")
MISSING = "missing"
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


# --- Rosters --------------------------------------------------------------------------------------


@dataclass
class RosterEntry:
    """One learner of the roster.

    Attributes:
        name: the name as the roster writes it.
        lms_id: the id submissions carry (Canvas user ID, Moodle participant number, plain ``lms_id``).
        line: the roster line, for messages.
        fields: the roster's own columns (written back into the Canvas and Moodle files).
        names: the other spellings of the name to match (``First Last`` for ``Last, First``).
    """

    name: str
    lms_id: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)


@dataclass
class Roster:
    """A roster file: its kind (``canvas``, ``moodle``, ``moodle worksheet``, ``plain``), its learners,
    and for Canvas the assignment columns it already has (to name the import's columns)."""

    kind: str
    entries: list[RosterEntry]
    path: Path | None = None
    columns: list[str] = field(default_factory=list)


def _header_key(name: str) -> str:
    return " ".join((name or "").replace("\ufeff", "").split()).casefold()


def _read_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and the rows (with their line numbers) of a CSV file, keys as in the header."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"no such roster file: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"the roster {path} cannot be read ({error}); save it as UTF-8 CSV") from None
    dialect = csv.excel
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        pass
    reader = csv.DictReader(io.StringIO(text), dialect=dialect)
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    rows = []
    for record in reader:
        values = {k: (v or "").strip() for k, v in record.items() if isinstance(k, str)}
        if any(values.values()):
            rows.append((reader.line_num, values))
    return header, rows


def _column(header: list[str], *names: str) -> str | None:
    """The first header column whose name is one of ``names`` (compared without case)."""
    keys = {_header_key(h): h for h in header}
    return next((keys[_header_key(n)] for n in names if _header_key(n) in keys), None)


def _canvas_roster(header, rows) -> list[RosterEntry]:
    entries = []
    for line, row in rows:
        name = row.get("Student", "")
        if _header_key(name) in ("points possible", "student, test", "test student") or not name:
            continue
        entries.append(RosterEntry(name, row.get("ID", ""), line, {c: row.get(c, "") for c in CANVAS_COLUMNS}))
    return entries


def _moodle_roster(header, rows) -> list[RosterEntry]:
    first, last = _column(header, "First name"), _column(header, "Surname", "Last name")
    id_number, email = _column(header, "ID number"), _column(header, "Email address", "Email")
    entries = []
    for line, row in rows:
        name = " ".join(x for x in (row.get(first, ""), row.get(last, "")) if x)
        entries.append(RosterEntry(name, "", line, {"First name": row.get(first, ""), "Last name": row.get(last, ""),
                                                    "ID number": row.get(id_number, "") if id_number else "",
                                                    "Email address": row.get(email, "") if email else ""},
                                   [f"{row.get(last, '')} {row.get(first, '')}"]))
    return entries


def _moodle_worksheet(header, rows) -> list[RosterEntry]:
    identifier, full, email = _column(header, "Identifier"), _column(header, "Full name"), _column(
        header, "Email address", "Email")
    entries = []
    for line, row in rows:
        number = re.sub(r"\D", "", row.get(identifier, ""))
        entries.append(RosterEntry(row.get(full, ""), number, line,
                                   {"Email address": row.get(email, "") if email else "", "ID number": ""}))
    return entries


def _plain_roster(header, rows) -> list[RosterEntry]:
    student, lms_id = _column(header, "student", "name"), _column(header, "lms_id", "id")
    email = _column(header, "email", "email address")
    return [RosterEntry(row.get(student, ""), row.get(lms_id, "") if lms_id else "", line,
                        {"Email address": row.get(email, "") if email else "", "ID number": ""})
            for line, row in rows if row.get(student, "")]


def read_roster(path: Path | str) -> Roster:
    """Read a roster, telling its format from its columns.

    Accepted: Canvas' gradebook export (``Student, ID, SIS User ID, SIS Login ID, Section, ...``, with
    its ``Points Possible`` row), Moodle's grades or participants export (``First name``,
    ``Surname``/``Last name``, ``ID number``, ``Email address``), Moodle's grading worksheet
    (``Identifier, Full name, ...``, whose ``Participant N`` matches submission folders) and a plain
    ``student,lms_id`` file.

    Raises:
        UsageError: the file is missing or unreadable, or its columns fit none of these.
    """
    path = Path(path)
    header, rows = _read_csv(path)
    keys = {_header_key(h) for h in header}
    if {"student", "id"} <= keys and keys & {"sis user id", "sis login id", "section"}:
        kind, entries = "canvas", _canvas_roster(header, rows)
    elif "first name" in keys and keys & {"surname", "last name"}:
        kind, entries = "moodle", _moodle_roster(header, rows)
    elif {"identifier", "full name"} <= keys:
        kind, entries = "moodle worksheet", _moodle_worksheet(header, rows)
    elif keys & {"student", "name"}:
        kind, entries = "plain", _plain_roster(header, rows)
    else:
        raise UsageError(f"cannot tell what kind of roster {path} is (its columns are {', '.join(header) or 'none'}); "
                         "give Canvas' gradebook export (Student, ID, SIS User ID, ...), Moodle's grades or "
                         "participants export (First name, Surname, ID number, Email address), Moodle's grading "
                         "worksheet (Identifier, Full name, ...) or a CSV file with the columns student,lms_id")
    if not entries:
        raise UsageError(f"the roster {path} ({kind}) lists no learners")
    columns = [h for h in header if re.search(r"\(\d+\)\s*$", h)] if kind == "canvas" else []
    return Roster(kind, entries, path, columns)


# --- Matching -------------------------------------------------------------------------------------


def _compact(name: str) -> str:
    return "".join(c for c in name.casefold() if c.isalnum())


def _spellings(entry: RosterEntry) -> tuple[set[str], set[str]]:
    """The squeezed and the compact spellings of a roster name (``Last, First`` also as
    ``First Last``; compact also as Canvas' ``lastfirst``)."""
    names = [entry.name, *entry.names]
    if "," in entry.name:
        last, first = entry.name.split(",", 1)
        names += [f"{first} {last}", f"{last} {first}"]
    return {squeeze_name(n) for n in names if n.strip()}, {_compact(n) for n in names if _compact(n)}


@dataclass
class Learner:
    """One learner of the results: the learner key, name, LMS id, and their results by assignment."""

    key: str
    name: str
    lms_id: str
    results: dict[str, GradeResult] = field(default_factory=dict)


@dataclass
class Matching:
    """How the results' learners met the roster.

    Attributes:
        rows: per roster entry, the learners matched to it (usually one or none).
        unmatched: learners on no roster entry, each with the reason.
        by_id, by_name: how many learners were matched each way.
    """

    rows: list[tuple[RosterEntry, list[Learner]]]
    unmatched: list[tuple[Learner, str]]
    by_id: int = 0
    by_name: int = 0


def learners_of(results: list[GradeResult]) -> list[Learner]:
    """The learners in ``results``, each with one result per assignment (a graded one before a
    duplicate or a submission that could not be graded)."""
    learners: dict[str, Learner] = {}
    for r in sorted(results, key=lambda r: not r.graded):
        learner = learners.setdefault(r.learner, Learner(r.learner, r.student, r.lms_id))
        learner.results.setdefault(r.assignment, r)
    return sorted(learners.values(), key=lambda x: x.key)


def match_roster(roster: Roster, learners: list[Learner]) -> Matching:
    """Match each learner to a roster entry: by LMS id, then by name (see the module's docstring)."""
    by_id: dict[str, list[int]] = {}
    squeezed: dict[str, list[int]] = {}
    compact: dict[str, list[int]] = {}
    for index, entry in enumerate(roster.entries):
        if entry.lms_id:
            by_id.setdefault(entry.lms_id, []).append(index)
        names, compacts = _spellings(entry)
        for n in names:
            squeezed.setdefault(n, []).append(index)
        for n in compacts:
            compact.setdefault(n, []).append(index)
    matched: list[list[Learner]] = [[] for _ in roster.entries]
    matching = Matching([], [])
    for learner in learners:
        found = by_id.get(learner.lms_id, []) if learner.lms_id else []
        how = "id"
        if not found:
            how = "name"
            found = sorted(set(squeezed.get(squeeze_name(learner.name), []))) or sorted(
                set(compact.get(_compact(learner.name), [])))
        if len(found) == 1:
            matched[found[0]].append(learner)
            matching.by_id += how == "id"
            matching.by_name += how == "name"
        elif found:
            lines = ", ".join(f"{roster.entries[i].name} (line {roster.entries[i].line})" for i in found)
            matching.unmatched.append((learner, f"ambiguous: fits several roster entries by {how}: {lines}"))
        else:
            matching.unmatched.append((learner, "not on the roster"))
    matching.rows = list(zip(roster.entries, matched))
    return matching


def roster_from_results(learners: list[Learner]) -> Matching:
    """Without a roster file, every learner with a result is the roster."""
    return Matching([(RosterEntry(x.name, x.lms_id, 0), [x]) for x in learners], [])


# --- The export -----------------------------------------------------------------------------------


class Standing(Enum):
    """Where one learner's grade in one assignment stands; the export counts these, never the words."""

    MISSING = MISSING
    NOT_GRADED = "not graded"
    NEEDS_MANUAL = "needs manual grading"
    GRADED = "graded"


@dataclass
class Grade:
    """One learner's outcome in one assignment, as exported: ``status`` in words, ``standing`` for counting."""

    score: float | None
    status: str
    standing: Standing
    days_late: int = 0
    penalty: float = 0.0
    submitted_at: str = ""
    cells: dict[str, float | None] = field(default_factory=dict)


def grade_of(result: GradeResult | None, *, due: datetime | None, policy: LatePolicy, missing: str) -> Grade:
    """The exported grade of one result (None: no submission): the score after the late penalty, or
    empty while parts wait for manual grading or when it could not be graded."""
    if result is None:
        return Grade(0.0 if missing == "zero" else None, MISSING, Standing.MISSING)
    if not result.graded:
        return Grade(None, f"not graded: {' '.join(result.status.split())[:200]}", Standing.NOT_GRADED,
                     submitted_at=result.submitted_at)
    late = days_late(result, due, policy)
    penalty = policy.penalty(result.score or 0.0, result.max_score or 0.0, late)
    waiting = sum(v is None for v in result.cells.values())
    if waiting:
        return Grade(None, f"needs manual grading ({waiting} part{'s' if waiting != 1 else ''})",
                     Standing.NEEDS_MANUAL, late, penalty, result.submitted_at, dict(result.cells))
    status = "graded" + (f", {late} day{'s' if late != 1 else ''} late" if late else "")
    return Grade(round((result.score or 0.0) - penalty, 4), status, Standing.GRADED, late, round(penalty, 4),
                 result.submitted_at, dict(result.cells))


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _canvas_header(assignment: str, roster: Roster | None, names: dict[str, str]) -> str:
    """The Canvas column of an assignment: ``--column`` if given, else a column of a Canvas roster whose
    name (without `` (id)``) is the assignment id, else the assignment id (Canvas creates it)."""
    if assignment in names:
        return names[assignment]
    for column in (roster.columns if roster else []):
        if squeeze_name(re.sub(r"\s*\(\d+\)\s*$", "", column)) == squeeze_name(assignment):
            return column
    return assignment


def _canvas_column_warnings(assignments: list[str], roster: Roster | None, names: dict[str, str]) -> list[str]:
    """Warn about every Canvas column that matches no assignment of the gradebook: Canvas would
    import it as a new assignment. Says how to name it, with the roster's own columns."""
    warnings = []
    known = roster.columns if roster is not None and roster.kind == "canvas" else []
    for assignment in assignments:
        header = _canvas_header(assignment, roster, names)
        if header in known:
            continue
        example = known[0] if known else "Self-attention (4711)"
        if known:
            where = (f"matches no assignment column of the roster ({', '.join(known[:6])}"
                     f"{', ...' if len(known) > 6 else ''})")
        else:
            where = "cannot be checked: the roster is not Canvas' gradebook export"
        if not re.search(r"\(\d+\)\s*$", header) or known:
            warnings.append(f"the Canvas column {header!r} for {assignment} {where}; Canvas imports such a column as "
                            f"a NEW assignment. Name the existing one with --column \"{assignment}={example}\" "
                            "(the column's header in Canvas' gradebook export, with its id in parentheses)")
    return warnings


@dataclass
class ExportReport:
    """What :func:`export` did, for the terminal and the tests."""

    output: Path
    roster_kind: str
    rows: int
    missing: int
    late: int
    penalised: int
    waiting: int
    not_graded: int
    unmatched: list[tuple[str, str]]
    unmatched_file: Path | None
    by_id: int
    by_name: int
    manual: str = ""
    warnings: list[str] = field(default_factory=list)
    omitted: int = 0

    def lines(self) -> list[str]:
        """The report, line by line."""
        out = [f"roster: {self.roster_kind}; {self.by_id} learner(s) matched by LMS id, {self.by_name} by name"]
        if self.manual:
            out.append(self.manual)
        left = "left out of the file" if self.omitted else "grade left empty"
        out.append(f"wrote {self.rows} rows to {self.output}: {self.missing} missing, {self.late} late "
                   f"({self.penalised} penalised), {self.waiting} waiting for manual grading, "
                   f"{self.not_graded} not graded ({left})")
        out += [f"warning: {w}" for w in self.warnings]
        if self.unmatched:
            out.append(f"warning: {len(self.unmatched)} learner(s) with submissions are not in the export, "
                       f"listed in {self.unmatched_file}:")
            out += [f"  {name}: {why}" for name, why in self.unmatched]
        return out


def _assignments(results: list[GradeResult], chosen: list[str] | None) -> list[str]:
    known = sorted({r.assignment for r in results if r.assignment})
    if not chosen:
        return known
    unknown = [a for a in chosen if a not in known]
    if unknown:
        raise UsageError(f"no results for {', '.join(unknown)} in this --out folder; it has {', '.join(known) or 'none'}")
    return list(chosen)


def _plain_rows(pairs, assignments: list[str], columns: list[str], grades) -> list[list[str]]:
    """The header and rows of the plain format for ``pairs`` of (name, lms id, learner or None)."""
    many = len(assignments) > 1

    def label(what: str, assignment: str) -> str:
        return f"{assignment} {what}" if many else what

    header = ["student", "lms_id", *assignments, *columns]
    for a in assignments:
        header += [label("status", a), label("submitted_at", a), label("late_days", a), label("penalty", a)]
    rows = [header]
    for name, lms_id, learner in pairs:
        gs = {a: grades(learner, a) for a in assignments}
        cells = {k: v for g in gs.values() for k, v in g.cells.items()}
        row = [name, lms_id, *(_number(gs[a].score) for a in assignments), *(_number(cells.get(c)) for c in columns)]
        for a in assignments:
            row += [gs[a].status, gs[a].submitted_at, str(gs[a].days_late), _number(gs[a].penalty)]
        rows.append(row)
    return rows


def _csv_bytes(rows: list[list[str]]) -> bytes:
    """``rows`` as a UTF-8 CSV file, every cell neutralised against spreadsheet formulas."""
    return csv_text(rows).encode("utf-8")


def _lms_rows(fmt: str, matching: Matching, roster: Roster | None, assignments: list[str],
              grades, max_scores: dict[str, float], names: dict[str, str], moodle_id: str,
              omit_ungraded: bool = False) -> list[list[str]]:
    """The header and rows of the Canvas or Moodle import file (rows without any grade left out with
    ``omit_ungraded``)."""
    if fmt == "canvas":
        header = CANVAS_COLUMNS + [_canvas_header(a, roster, names) for a in assignments]
        rows = [header, ["Points Possible", "", "", "", ""] + [_number(max_scores.get(a)) for a in assignments]]
        for entry, learners in matching.rows:
            ids = entry.fields or {"Student": entry.name, "ID": entry.lms_id}
            scores = [_number(grades(learners[0] if learners else None, a).score) for a in assignments]
            if omit_ungraded and not any(scores):
                continue
            rows.append([ids.get(c, "") for c in CANVAS_COLUMNS] + scores)
        return rows
    column = {"email": "Email address", "idnumber": "ID number"}[moodle_id]
    # Moodle maps learners by the identifier column only; the name columns are for the instructor's eyes.
    # A roster with first and last names (grades or participants export) keeps them apart; one with a full
    # name only (a grading worksheet, a plain roster) is written as "Full name", never split by guesswork.
    split = any(entry.fields.get("First name") or entry.fields.get("Last name") for entry, _ in matching.rows)
    names_header = ["First name", "Last name"] if split else ["Full name"]
    rows = [[column, *names_header] + [names.get(a, a) for a in assignments]]
    for entry, learners in matching.rows:
        scores = [_number(grades(learners[0] if learners else None, a).score) for a in assignments]
        if omit_ungraded and not any(scores):
            continue
        shown = ([entry.fields.get("First name", "") or entry.name, entry.fields.get("Last name", "")] if split
                 else [entry.name])
        rows.append([entry.fields.get(column, ""), *shown] + scores)
    return rows


def _check_lms(fmt: str, roster: Roster | None, moodle_id: str) -> list[str]:
    """Refuse an LMS format the roster cannot key; return warnings for entries without a key."""
    if fmt == "moodle":
        column = {"email": "Email address", "idnumber": "ID number"}[moodle_id]
        if roster is None or not any(e.fields.get(column) for e in roster.entries):
            raise UsageError(f"--format moodle keys learners by {column}, and "
                             + ("no --roster was given" if roster is None else f"the roster {roster.path} has none")
                             + "; give Moodle's grades or participants export as --roster (or choose "
                             "--moodle-id email|idnumber to match the column it has)")
        blank = [e.name for e in roster.entries if not e.fields.get(column)]
        return [f"{len(blank)} roster learner(s) have no {column}, so Moodle cannot place their row: "
                + ", ".join(blank[:10])] if blank else []
    if fmt == "canvas" and (roster is None or roster.kind != "canvas"):
        return ["without Canvas' gradebook export as --roster, rows carry only the name and the Canvas user ID "
                "from the submissions (or the roster); Canvas needs the ID (or an SIS id) to place a row"]
    return []


def export(out_dir: Path | str, *, fmt: str = "plain", roster_path: Path | str | None = None,
           manual_path: Path | str | None = None, late_policy: str | None = None, due: str | None = None,
           missing: str = "blank", output: Path | str | None = None, assignments: list[str] | None = None,
           column_names: dict[str, str] | None = None, moodle_id: str = "email",
           omit_ungraded: bool = False) -> ExportReport:
    """Write the grades of ``out_dir`` in an LMS's import format (see the module's docstring).

    Args:
        out_dir: a ``grade --out`` folder.
        fmt: ``canvas``, ``moodle`` or ``plain``.
        roster_path: the class list (Canvas, Moodle or plain CSV); default: the learners with results.
        manual_path: the instructor's manual-scores file, merged first (also into ``grades.csv`` and
            the feedback pages).
        late_policy: ``none``, ``zero`` or ``per-day:P[,grace:H]``; default: the policy (and due time)
            the last export saved in ``out_dir``, else ``none``. A policy given is saved.
        due: the due date-time (ISO); default: the LMS's late marks decide.
        missing: ``blank`` or ``zero``: the grade of a roster learner without a submission.
        output: the file to write; default ``<out>/export-<fmt>.csv``.
        assignments: which assignments (default: all with results).
        column_names: assignment -> LMS column header (Canvas: ``Name (id)``; Moodle: the grade item).
        moodle_id: the identifier column of the Moodle file, ``email`` or ``idnumber``.
        omit_ungraded: leave learners without any grade (missing, not graded, waiting for hand
            grading) out of a Canvas or Moodle file, instead of an empty cell (which Moodle
            imports as "no grade", clearing a grade entered there).

    Raises:
        UsageError: a bad option, folder or roster; :class:`autograder.instructor.manual.ManualScoresError` for
            a manual-scores file that does not fit the results.
    """
    out_dir = Path(out_dir)
    _check_options(fmt, missing, moodle_id)
    saved = saved_policy(out_dir) if late_policy is None else None
    if saved is not None:
        late_policy, due = saved[0], due if due is not None else saved[1]
    due = due if due is not None else saved_deadline(out_dir)      # the deadline `grade --due` saved
    policy, due_at = parse_late_policy(late_policy or "none"), parse_due(due)
    if not (out_dir / "results").is_dir():
        raise UsageError(f"{out_dir} has no results/ folder: give the --out folder that `grade` wrote")
    roster = read_roster(roster_path) if roster_path else None
    warnings = _check_lms(fmt, roster, moodle_id)
    # hand-scores.csv and the last file, by default; grades.csv and the pages with this late policy
    merged = publish(out_dir, manual_path, lateness(policy, due_at))
    results, manual_line = merged.results, merged.summary(manual_path)
    if saved is not None:
        manual_line = "\n".join(filter(None, [manual_line, f"late policy: {late_policy}" + (f", due {due}" if due else "")
                                              + f" (saved by an earlier export in {out_dir / LATE_RECORD})"]))
    elif late_policy is not None:
        save_late_policy(out_dir, late_policy, due)
    chosen = _assignments(results, assignments)
    results = [r for r in results if r.assignment in chosen]
    learners = learners_of(results)
    matching = match_roster(roster, learners) if roster else roster_from_results(learners)
    max_scores = {r.assignment: r.max_score for r in results if r.graded and r.max_score is not None}
    columns = cell_columns(results)
    grades = _Grades(due_at, policy, missing)
    warnings += _first_match_only(matching)
    output = Path(output) if output else out_dir / f"export-{fmt}.csv"
    if fmt == "plain":
        rows = _plain_rows([(e.name, e.lms_id, m[0] if m else None) for e, m in matching.rows], chosen, columns,
                           grades)
    else:
        rows = _lms_rows(fmt, matching, roster, chosen, grades, max_scores, column_names or {}, moodle_id,
                         omit_ungraded)
        warnings += _lms_warnings(fmt, matching, roster, chosen, grades, column_names or {}, omit_ungraded)
    write_atomically(output, _csv_bytes(rows))
    unmatched_file = _write_not_on_roster(output, matching, chosen, columns, grades)
    exported = [grades(m[0] if m else None, a) for _, m in matching.rows for a in chosen]
    written = len(rows) - (2 if fmt == "canvas" else 1)               # the header, and Canvas' Points Possible
    return ExportReport(output, roster.kind if roster else "none (every learner with a result)",
                        written, sum(g.standing is Standing.MISSING for g in exported),
                        sum(g.days_late > 0 for g in exported), sum(g.penalty > 0 for g in exported),
                        sum(g.standing is Standing.NEEDS_MANUAL for g in exported),
                        sum(g.standing is Standing.NOT_GRADED for g in exported),
                        [(x.key, why) for x, why in matching.unmatched], unmatched_file,
                        matching.by_id, matching.by_name, manual_line, warnings, len(matching.rows) - written)


def _check_options(fmt: str, missing: str, moodle_id: str) -> None:
    """Refuse an option of :func:`export` that has no meaning, naming the choices."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if missing not in ("blank", "zero"):
        raise UsageError(f"--missing {missing!r}: choose blank or zero")
    if moodle_id not in ("email", "idnumber"):
        raise UsageError(f"--moodle-id {moodle_id!r}: choose email or idnumber")


class _Grades:
    """Each learner's exported grade of an assignment (:func:`grade_of`), worked out once; the grade of
    a roster entry without a learner (``None``) follows ``missing``."""

    def __init__(self, due_at, policy: LatePolicy, missing: str) -> None:
        self.due_at, self.policy, self.missing = due_at, policy, missing
        self.cache: dict[tuple[str, str], Grade] = {}

    def __call__(self, learner: Learner | None, assignment: str) -> Grade:
        if learner is None:
            return grade_of(None, due=self.due_at, policy=self.policy, missing=self.missing)
        key = (learner.key, assignment)
        if key not in self.cache:
            self.cache[key] = grade_of(learner.results.get(assignment), due=self.due_at, policy=self.policy,
                                       missing=self.missing)
        return self.cache[key]


def _first_match_only(matching: Matching) -> list[str]:
    """Keep the first learner a roster entry matches; list the others as not on the roster. Returns
    the warnings that say so."""
    warnings = []
    for entry, matched in matching.rows:
        if len(matched) > 1:
            warnings.append(f"{entry.name} (roster line {entry.line}) matches several learners: "
                            f"{', '.join(m.key for m in matched)}; the first is exported, the others are listed "
                            "as not on the roster")
            matching.unmatched += [(m, f"a second learner for roster entry {entry.name}") for m in matched[1:]]
            del matched[1:]
    return warnings


def _lms_warnings(fmt: str, matching: Matching, roster: Roster | None, chosen: list[str], grades: _Grades,
                  column_names: dict[str, str], omit_ungraded: bool) -> list[str]:
    """What an instructor should know before importing a Canvas or Moodle file: columns Canvas will not
    recognise, and rows without a grade (which Moodle imports as clearing one)."""
    warnings = _canvas_column_warnings(chosen, roster, column_names) if fmt == "canvas" else []
    empty = sum(1 for _, m in matching.rows if not any(grades(m[0] if m else None, a).score is not None
                                                      for a in chosen))
    if fmt == "moodle" and empty and not omit_ungraded:
        warnings.append(f"{empty} row(s) have no grade: Moodle imports an empty cell as \"no grade\", which "
                        "clears a grade already entered in Moodle; pass --omit-ungraded to leave them out")
    elif omit_ungraded and empty:
        warnings.append(f"{empty} learner(s) without a grade were left out of the file (--omit-ungraded)")
    return warnings


def _write_not_on_roster(output: Path, matching: Matching, chosen: list[str], columns: list[str],
                         grades: _Grades) -> Path | None:
    """Write the learners with results whom the roster does not list, with why, next to ``output``
    (``<name>-not-on-roster.csv``); returns that file, or None when there are none."""
    if not matching.unmatched:
        return None
    unmatched_file = output.with_name(f"{output.stem}-not-on-roster.csv")
    extra = _plain_rows([(x.name, x.lms_id, x) for x, _ in matching.unmatched], chosen, columns, grades)
    extra[0].append("why")
    for row, (_, why) in zip(extra[1:], matching.unmatched):
        row.append(why)
    write_atomically(unmatched_file, _csv_bytes(extra))
    return unmatched_file

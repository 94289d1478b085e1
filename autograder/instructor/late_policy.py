"""Late policies: what lateness costs, how late a submission is, and the policy an export saves.

Late policies (``--late-policy``):

- ``none``: no penalty (late days are still reported);
- ``zero``: a late submission scores 0;
- ``per-day:P[,grace:H]``: P % of the assignment's maximum off per started day late, counted from
  the due time plus H hours of grace; the score never goes below 0.

How late a submission is: with ``--due`` (an ISO date-time; without a zone it is UTC) the time from
``due + grace`` to the submission's ``submitted_at`` (the newest submitted file's time, from the LMS
zip), in started days. Without ``--due``, or for a submission with no recorded time, the LMS's own
late mark (Canvas' ``_LATE_``) counts as one started day late; grace cannot apply, as the LMS's mark
carries no duration.

An export with a late policy saves it in ``<out>/late-policy.json`` (:data:`LATE_RECORD`); the grade at
the top of every feedback page then shows the late days and the penalty, and later ``grade``,
``merge`` and ``export`` runs apply the same policy unless given another (:func:`saved_lateness`).
Before any policy is set, a page still says that its submission was late (:func:`lateness` of None):
by the LMS's mark, or by how much when ``grade --due`` saved the deadline in ``<out>/deadline.json``
(which ``export`` also uses when given no ``--due`` and none was saved with its policy).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.results import GradeResult, write_atomically

DAY_S = 86400.0
LATE_RECORD = "late-policy.json"
DEADLINE_RECORD = "deadline.json"


@dataclass(frozen=True)
class LatePolicy:
    """What lateness costs: ``kind`` is ``none``, ``zero`` or ``per-day`` (``percent`` of the maximum
    per started day late, after ``grace_hours``)."""

    kind: str = "none"
    percent: float = 0.0
    grace_hours: float = 0.0

    def penalty(self, score: float, max_score: float, days_late: int) -> float:
        """The points taken off ``score`` for ``days_late`` started days (never more than ``score``)."""
        if days_late <= 0 or self.kind == "none":
            return 0.0
        if self.kind == "zero":
            return score
        return min(score, max_score * min(100.0, self.percent * days_late) / 100.0)


def parse_late_policy(text: str) -> LatePolicy:
    """``none``, ``zero`` or ``per-day:P[,grace:H]`` -> :class:`LatePolicy`.

    Raises:
        UsageError: for anything else, showing the accepted forms.
    """
    text = (text or "").strip()
    if text in ("none", "zero"):
        return LatePolicy(text)
    match = re.fullmatch(r"per-day:\s*(\d+(?:\.\d+)?)\s*%?\s*(?:,\s*grace:\s*(\d+(?:\.\d+)?)\s*h?)?", text)
    if not match or float(match[1]) > 100:
        raise UsageError(f"--late-policy {text!r}: write none, zero or per-day:P[,grace:H] with P the percent of the "
                         "maximum taken off per started day late (0-100) and H hours of grace, e.g. "
                         "per-day:10,grace:2")
    return LatePolicy("per-day", float(match[1]), float(match[2] or 0))


def parse_due(text: str | None) -> datetime | None:
    """An ISO date-time (a date alone means its midnight; no zone means UTC), or None.

    Raises:
        UsageError: if it is not an ISO date-time.
    """
    if not text:
        return None
    try:
        due = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--due {text!r} is not an ISO date-time; write e.g. 2025-03-14T23:59 (UTC) or "
                         "2025-03-14T23:59+01:00") from None
    return due if due.tzinfo else due.replace(tzinfo=timezone.utc)


def days_late(result: GradeResult, due: datetime | None, policy: LatePolicy) -> int:
    """Started days late (see the module's docstring for the rule): from ``due`` plus the grace to
    ``submitted_at``; without ``due`` or a submission time, 1 if the LMS marked it late, else 0."""
    submitted = None
    if result.submitted_at:
        try:
            submitted = datetime.fromisoformat(result.submitted_at)
        except ValueError:
            submitted = None
    if due is None or submitted is None:
        return 1 if result.late else 0
    if submitted.tzinfo is None:
        submitted = submitted.replace(tzinfo=timezone.utc)
    seconds = (submitted - due).total_seconds() - policy.grace_hours * 3600
    return max(0, math.ceil(seconds / DAY_S)) if seconds > 0 else 0


def save_late_policy(out_dir: Path, late_policy: str, due: str | None) -> None:
    """Remember the late policy of an export in ``<out>/late-policy.json`` (see the module docstring)."""
    write_atomically(Path(out_dir) / LATE_RECORD, json.dumps({"late_policy": late_policy, "due": due}).encode("utf-8"))


def save_deadline(out_dir: Path, due: str) -> None:
    """Remember the deadline ``grade --due`` gave in ``<out>/deadline.json`` (:data:`DEADLINE_RECORD`), so
    that every page can say how late its submission was before a late policy is set.

    Raises:
        UsageError: if ``due`` is not an ISO date-time (nothing is saved).
    """
    parse_due(due)
    write_atomically(Path(out_dir) / DEADLINE_RECORD, json.dumps({"due": due}).encode("utf-8"))


def saved_deadline(out_dir: Path) -> str | None:
    """The deadline ``grade --due`` saved, or None."""
    try:
        due = json.loads((Path(out_dir) / DEADLINE_RECORD).read_text(encoding="utf-8"))["due"]
        parse_due(due)
        return due
    except (OSError, ValueError, KeyError, TypeError, UsageError):
        return None


def saved_policy(out_dir: Path) -> tuple[str, str | None] | None:
    """``(late policy, due)`` saved by the last export with a late policy, or None."""
    try:
        data = json.loads((Path(out_dir) / LATE_RECORD).read_text(encoding="utf-8"))
        return str(data["late_policy"]), data.get("due")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def lateness(policy: LatePolicy | None, due: datetime | None):
    """``result -> Lateness`` (:class:`autograder.engine.pages.Lateness`, what a feedback page says about
    when the work came in) under ``policy``; None: no late policy set yet, so the page says that the
    submission was late (by the LMS's mark, or by how much after ``due``) and costs nothing yet."""
    from autograder.engine.pages import Lateness

    def late(result: GradeResult) -> Lateness:
        seconds = None
        if due is not None and result.submitted_at:
            try:
                submitted = datetime.fromisoformat(result.submitted_at)
                submitted = submitted if submitted.tzinfo else submitted.replace(tzinfo=timezone.utc)
                seconds = (submitted - due).total_seconds() - (policy.grace_hours * 3600 if policy else 0.0)
            except ValueError:
                seconds = None
        standing = Lateness(seconds_late=seconds if seconds is not None and seconds > 0 else None,
                            marked=result.late, due=due.isoformat() if due else "")
        if policy is None:
            return standing
        days = days_late(result, due, policy)
        return replace(standing, days=days, penalty=policy.penalty(result.score or 0.0, result.max_score or 0.0, days),
                       policy=policy.kind, percent=policy.percent, grace_hours=policy.grace_hours)
    return late


def saved_lateness(out_dir: Path):
    """:func:`lateness` of the policy saved in ``out_dir``, or of none when no export saved one; the
    deadline is the policy's, else the one ``grade --due`` saved (:func:`saved_deadline`)."""
    saved, deadline = saved_policy(out_dir), saved_deadline(out_dir)
    try:
        if saved:
            return lateness(parse_late_policy(saved[0]), parse_due(saved[1] or deadline))
    except UsageError:
        pass
    return lateness(None, parse_due(deadline))

"""What ``grade``, ``merge`` and ``export`` do once the engine has written the results, in one pass.

:func:`publish` merges the hand scores (``<out>/hand-scores.csv``, and ``--manual-scores`` or else the
last file given) once, writes ``grades.csv`` once from the merged results, and renders every feedback
page again from its record, the merged result, the hand scores and the late standing
(:func:`autograder.engine.pages.write_feedback_pages`); :func:`after_grading` adds the similarity
report, which flags near-copies and changes no score.

How many pages a run changed is counted against what the last run left (:data:`PUBLISHED`), not against
what this step rewrote: ``grade`` writes a re-graded learner's page before this step renders it again,
so a page that changed (a hand score set aside for a resubmitted answer) may need no second write.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from autograder.core.results import GradeResult, write_atomically, write_grades_csv
from autograder.engine.pages import write_feedback_pages
from autograder.instructor.late_policy import saved_lateness
from autograder.instructor.manual import ManualMerge, merge_manual_scores
from autograder.instructor.similarity import similarity_report


# <out>/published-pages.json: each feedback page's SHA-256 as the last publish left it.
PUBLISHED = "published-pages.json"


def _page_digests(out_dir: Path, results: list[GradeResult]) -> dict[str, str]:
    """``page -> SHA-256`` of every feedback page of ``results`` that can be read."""
    digests = {}
    for result in results:
        for page in result.feedback:
            try:
                digests[page] = hashlib.sha256((out_dir / page).read_bytes()).hexdigest()
            except OSError:
                continue
    return digests


def _published(out_dir: Path) -> dict[str, str]:
    """What the last publish left (:data:`PUBLISHED`); empty when no run has published, or it cannot be read."""
    try:
        found = json.loads((out_dir / PUBLISHED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def publish(out_dir: Path, manual_path: Path | None, late=None) -> ManualMerge:
    """Merge the hand scores (:func:`autograder.instructor.manual.merge_manual_scores`), write
    ``grades.csv`` from the merged results and render the feedback pages from them.

    Args:
        out_dir: the ``--out`` folder.
        manual_path: the instructor's manual-scores file, or None.
        late: ``result -> Lateness`` (:func:`autograder.instructor.late_policy.lateness`); default: the
            policy an export saved in ``out_dir``, or none yet (:func:`autograder.instructor.late_policy.saved_lateness`).

    Returns:
        The :class:`autograder.instructor.manual.ManualMerge`, with how many pages differ from what the
        last run published (grading's changes included; in a folder never published, the pages this
        step wrote); a note names the pages an older grader wrote without a record, which stay as they were.
    """
    out_dir = Path(out_dir)
    merged = merge_manual_scores(out_dir, manual_path)
    write_grades_csv(out_dir / "grades.csv", merged.results)
    before = _published(out_dir)
    written, legacy = write_feedback_pages(out_dir, merged.results, automatic=merged.automatic,
                                           manual=merged.scores_by, late=late or saved_lateness(out_dir))
    now = _page_digests(out_dir, merged.results)
    # a folder no run has published yet: what this step wrote (grading's own pages are all new)
    merged.pages = sum(before.get(page) != digest for page, digest in now.items()) if before else written
    write_atomically(out_dir / PUBLISHED, json.dumps(now, indent=0, sort_keys=True).encode("utf-8"))
    if legacy:
        merged.notes.append(f"{legacy} feedback page{'s were' if legacy != 1 else ' was'} written by an older version "
                            f"of the grader and left as {'they were' if legacy != 1 else 'it was'}: grade again "
                            "(the next `grade` run regrades them) to show hand scores and lateness there")
    return merged


def after_grading(out_dir: Path, root: Path, manual_path: Path | None) -> tuple[ManualMerge, list[str]]:
    """The hand scores merged and the pages published (:func:`publish`), then the similarity report written.

    Returns:
        The merge (its results are every result of the folder, hand scores included) and the lines to
        print: what the merge did with the hand scores (none when there were none) and the similarity
        report's summary.
    """
    merged = publish(out_dir, manual_path)
    summary = merged.summary(manual_path)
    return merged, [*([summary] if summary else []), similarity_report(out_dir, root=root).summary()]

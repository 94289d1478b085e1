"""What ``grade`` and ``merge`` do once the engine has written the results, in one pass.

The hand scores (``<out>/hand-scores.csv``, and ``--manual-scores`` or else the last file given)
are merged into ``grades.csv`` and the feedback pages once, the grade each learner gets is written
at the top of their pages (after hand grading and, when an export saved a late policy in the folder,
after its penalty), and the similarity report flags near-copies (it changes no score).
"""

from __future__ import annotations

from pathlib import Path

from autograder.engine.feedback import refresh_grade_headers
from autograder.instructor.late_policy import saved_lateness
from autograder.instructor.manual import ManualMerge, merge_manual_scores
from autograder.instructor.similarity import similarity_report


def merge_hand_scores(out_dir: Path, manual_path: Path | None) -> ManualMerge:
    """Merge the hand scores into grades.csv and the feedback pages (:func:`autograder.instructor.manual.merge_manual_scores`),
    then write the grade each learner gets at the top of their pages (with the late penalty of
    :func:`autograder.instructor.late_policy.saved_lateness`).

    Returns:
        The :class:`autograder.instructor.manual.ManualMerge`.
    """
    merged = merge_manual_scores(out_dir, manual_path)
    refresh_grade_headers(out_dir, merged.results, saved_lateness(out_dir))
    return merged


def after_grading(out_dir: Path, root: Path, manual_path: Path | None) -> list[str]:
    """The hand scores merged (:func:`merge_hand_scores`), then the similarity report written.

    Returns:
        The lines to print: what the merge did with the hand scores (none when there were none)
        and the similarity report's summary.
    """
    summary = merge_hand_scores(out_dir, manual_path).summary(manual_path)
    return [*([summary] if summary else []), similarity_report(out_dir, root=root).summary()]

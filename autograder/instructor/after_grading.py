"""What ``grade``, ``merge`` and ``export`` do once the engine has written the results, in one pass.

:func:`publish` merges the hand scores (``<out>/hand-scores.csv``, and ``--manual-scores`` or else the
last file given) once, writes ``grades.csv`` once from the merged results, and renders every feedback
page again from its record, the merged result, the hand scores and the late standing
(:func:`autograder.engine.pages.write_feedback_pages`); :func:`after_grading` adds the similarity
report, which flags near-copies and changes no score.
"""

from __future__ import annotations

from pathlib import Path

from autograder.core.results import write_grades_csv
from autograder.engine.pages import write_feedback_pages
from autograder.instructor.late_policy import saved_lateness
from autograder.instructor.manual import ManualMerge, merge_manual_scores
from autograder.instructor.similarity import similarity_report


def publish(out_dir: Path, manual_path: Path | None, late=None) -> ManualMerge:
    """Merge the hand scores (:func:`autograder.instructor.manual.merge_manual_scores`), write
    ``grades.csv`` from the merged results and render the feedback pages from them.

    Args:
        out_dir: the ``--out`` folder.
        manual_path: the instructor's manual-scores file, or None.
        late: ``result -> Lateness`` (:func:`autograder.instructor.late_policy.lateness`); default: the
            policy an export saved in ``out_dir``, or none yet (:func:`autograder.instructor.late_policy.saved_lateness`).

    Returns:
        The :class:`autograder.instructor.manual.ManualMerge`, with how many pages were written; a note
        names the pages an older grader wrote without a record, which stay as they were.
    """
    out_dir = Path(out_dir)
    merged = merge_manual_scores(out_dir, manual_path)
    write_grades_csv(out_dir / "grades.csv", merged.results)
    merged.pages, legacy = write_feedback_pages(out_dir, merged.results, automatic=merged.automatic,
                                                manual=merged.scores_by, late=late or saved_lateness(out_dir))
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

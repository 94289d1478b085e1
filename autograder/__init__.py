"""The course's grading tools: nbgrader configuration and ``python -m autograder``.

Commands (run from anywhere; paths default to this repository)::

    python -m autograder generate [ASSIGNMENT ...]      # solutions/ -> exercises/, via nbgrader
    python -m autograder normalize [--check] [PATH ...] # notebooks into normal form
    python -m autograder grade SUBMISSIONS --assignment NAME|all --out DIR [--jobs N] [--regrade STUDENT]
    python -m autograder validate NOTEBOOK [--assignment NAME]  # a learner's check before submitting

Modules:

================= ===============================================================================
notebooks         normal form, the canonical setup cell, Colab badges, convention checks
nbgrader_config   the nbgrader settings (also usable as ``nbgrader --config`` file)
course            assignments, throwaway course directories, ``generate``
submissions       finding submissions: folders, LMS names, zips extracted safely
plan              the instructor's notebooks as a grading plan; rebuilding a learner's notebook on it
sandbox           resource limits and (Linux, root) namespace isolation of each kernel; the launcher
runner            running cells in a sandboxed kernel and observing how each one ended
referee           the trusted process that runs the test cells and decides the verdicts
grade_one         grading one submission: rebuild, run with the referee, points, its feedback page
results           ``GradeResult``, results on disk (atomic, safe names), ``grades.csv``
batch             ``grade`` and ``merge``: parallel jobs, resume, shards, the summary
validate          a learner's own check with the visible tests
feedback          feedback pages that never show hidden tests
export            grades for the LMS: rosters, late policies, Canvas and Moodle files
================= ===============================================================================

This package imports nbgrader, jupyter_client and nbconvert only when a command needs them, so
``normalize`` stays fast. See ``autograder/README.md`` for the instructor guide.
"""

from autograder.notebooks import (REPO_ROOT, colab_badge, colab_url, convention_problems,
                                  normalize_notebook, setup_cell_source)

__all__ = ["REPO_ROOT", "colab_badge", "colab_url", "convention_problems", "normalize_notebook",
           "setup_cell_source"]

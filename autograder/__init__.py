"""The course's grading tools: nbgrader configuration and ``python -m autograder``.

Commands (run from anywhere; paths default to this repository)::

    python -m autograder generate [ASSIGNMENT ...]      # solutions/ -> exercises/, via nbgrader
    python -m autograder normalize [--check] [PATH ...] # notebooks into normal form
    python -m autograder grade SUBMISSIONS --assignment NAME|all --out DIR [--jobs N]

Modules:

================= ===============================================================================
notebooks         normal form, the canonical setup cell, Colab badges, convention checks
nbgrader_config   the nbgrader settings (also usable as ``nbgrader --config`` file)
course            assignments, throwaway course directories, ``generate``
grading           finding submissions, grading each in isolation, ``grades.csv``, feedback
feedback          the feedback preprocessor that hides hidden tests
================= ===============================================================================

This package imports nbgrader only when a command needs it, so ``normalize`` stays fast.
"""

from autograder.notebooks import (REPO_ROOT, colab_badge, colab_url, convention_problems,
                                  normalize_notebook, setup_cell_source)

__all__ = ["REPO_ROOT", "colab_badge", "colab_url", "convention_problems", "normalize_notebook",
           "setup_cell_source"]

"""The grader's plain data layer: what every other part of ``autograder`` reads and writes.

Results and their statuses (:mod:`~autograder.core.results`), how a cell ended
(:mod:`~autograder.core.outcomes`), what a submission may use (:mod:`~autograder.core.limits`), the
course's files as the grader reads them (:mod:`~autograder.core.files`) and output that is safe to
show (:mod:`~autograder.core.safe_output`). It imports the standard library only (nbformat when a
notebook is read), so a command that only reads results starts without torch or Jupyter.
"""

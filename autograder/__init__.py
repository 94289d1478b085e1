"""The course's grader and its tooling: ``python -m autograder`` (see ``autograder/__main__.py``).

Packages by job, each importing only those before it: :mod:`autograder.core` (the plain data
layer), :mod:`autograder.engine` (the trusted grading engine), then :mod:`autograder.instructor`
(the instructor's tools after grading) and :mod:`autograder.course` (course tooling for
maintainers). ``ARCHITECTURE.md`` is the module index and follows one submission from the command
line to its feedback page; ``autograder/README.md`` is the instructor guide.
"""

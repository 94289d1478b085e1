"""The trusted grading engine: a submission rebuilt on the instructor's plan, run in a sandbox, judged by the referee.

In the order a submission meets them: the plan and the rules (:mod:`~autograder.engine.plan`,
:mod:`~autograder.engine.cells`, :mod:`~autograder.engine.scopes`, :mod:`~autograder.engine.policy`,
:mod:`~autograder.engine.mounts`, :mod:`~autograder.engine.submissions`), the execution layer
(:mod:`~autograder.engine.sandbox`, :mod:`~autograder.engine.forkserver`, :mod:`~autograder.engine.runner`,
:mod:`~autograder.engine.referee`, :mod:`~autograder.engine.disclosure`), and the pipeline
(:mod:`~autograder.engine.grade_one`, :mod:`~autograder.engine.answers`, :mod:`~autograder.engine.feedback`,
:mod:`~autograder.engine.batch`, :mod:`~autograder.engine.validate`). It imports :mod:`autograder.core` and
nothing of the instructor's tools or the course tooling; ``ARCHITECTURE.md`` follows one submission through it.
"""

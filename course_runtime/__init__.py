"""course_runtime: what runs next to a learner's notebook, and nothing that answers an exercise.

The course has two packages. :mod:`transformer_core` is the reference library: the finished
Transformer that the chapters explain and later exercises build on (attention, positions, layers,
cache, models, generation, complexity, train, convert). ``course_runtime`` is everything a notebook
needs to *run* that is not an answer, and it is the only course package a grading kernel always
sees (the grader mounts reference modules into a kernel only where an assignment builds on them;
see ``autograder/engine/mounts.py``):

========== ==============================================================
device     picking the device and the mixed-precision dtype; seeding
data       character tokenizer, corpora (download with checksum), batches, synthetic tasks
viz        plots and widgets the chapters and exercises share
testing    what notebook test cells call: friendly checks, the shortcut hint, dual-mode helpers
errors     ``ShortcutError``, shared by ``testing`` and ``remote``
wire       the checked JSON format between a learner's kernel and the grader's referee
agent      the grader's agent in a learner's kernel (calls their code, returns raw results)
remote     the learner's objects as the referee sees them (proxies)
========== ==============================================================

Nothing here imports :mod:`transformer_core`: the dependency runs one way, from the reference
library to the runtime.
"""

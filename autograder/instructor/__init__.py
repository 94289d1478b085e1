"""The instructor's tools after grading: hand scores, the review page, late policies, LMS export, similarity.

They read what the engine wrote in an output folder and never start a kernel, so they load neither
torch nor Jupyter (``tests/test_architecture.py`` checks ``export``).
"""

"""Course tooling for maintainers: notebooks in normal form, links and releases, ``generate``, the Chinese edition.

Nothing here grades; the grading engine imports none of it.
"""

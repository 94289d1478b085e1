"""The exception that a switched-off shortcut raises, shared by the checks and the referee's proxies.

It lives on its own so that :mod:`course_runtime.testing` (which raises it) and
:mod:`course_runtime.remote` (which re-raises it when a learner's kernel reports it) both import it
without importing each other.
"""


class ShortcutError(RuntimeError):
    """Raised when a learner's code calls a function that :func:`~course_runtime.testing.forbid_shortcuts`
    switched off."""

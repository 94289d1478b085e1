"""The errors the command line reports in one line each, with the exit status it returns for them."""


class UsageError(Exception):
    """The command was called wrongly (a bad path, an unknown assignment); exit status 2."""


class NbgraderRunError(RuntimeError):
    """nbgrader could not process an assignment or a submission; the message says why."""


class GradingInterrupted(Exception):
    """The run was stopped (Ctrl-C); every finished result is saved and ``grades.csv`` lists them."""

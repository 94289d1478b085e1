"""The errors the command line reports in one line each, with the exit status it returns for them."""


class UsageError(Exception):
    """The command was called wrongly (a bad path, an unknown assignment); exit status 2.

    Attributes:
        said: the whole line to print when it is already in the learner's language (``validate``);
            None: the command line prints ``error: <message>``.
    """

    def __init__(self, message: str = "", *, said: str | None = None) -> None:
        super().__init__(message)
        self.said = said


class NbgraderRunError(RuntimeError):
    """nbgrader could not process an assignment or a submission; the message says why."""


class GradingInterrupted(Exception):
    """The run was stopped (Ctrl-C); every finished result is saved and ``grades.csv`` lists them."""

"""How one cell ended: :class:`CellOutcome`, read from the kernel by the runner or decided by the referee."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CellOutcome:
    """How one cell ended.

    Attributes:
        status: ``"ok"``, ``"error"`` (an exception), ``"timeout"`` (interrupted at its time limit),
            ``"stopped"`` (the kernel died or was stopped during it) or ``"not run"``.
        reason: for anything but ``"ok"``, one line saying why, e.g. ``"AssertionError: ..."``.
        outputs: ``{"kind": "stdout"|"stderr"|"result"|"error", "text": ...}`` in order, capped.
        seconds: wall time of the cell.
        refused: for a test cell, the names its guards switched off when the kernel's guard refused a
            built-in the learner's code reached (set by the referee from the test's own guards, never
            from the kernel's text); the grader flags them for the instructor.
        exception: for a test whose visible part raised, the exception's class name (set by the
            referee), else "".
    """

    status: str
    reason: str = ""
    outputs: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    refused: tuple[str, ...] = ()
    exception: str = ""

    @property
    def ok(self) -> bool:
        """Whether the cell ran to the end without an exception."""
        return self.status == "ok"

"""What one submission may use: :class:`Limits`, given to the sandbox, the runner and the referee."""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Seconds one cell may run, in nbgrader's configuration and as ``--timeout``'s default.
EXECUTE_TIMEOUT_S = 120


@dataclass
class Limits:
    """What one submission may use.

    Attributes:
        cell_timeout: wall seconds one cell may run; then the kernel is interrupted (and stopped if
            it does not respond), the cell fails and grading goes on.
        notebook_timeout: wall seconds for the whole notebook; cells after it are not run.
        memory_mb: address space of the kernel process, in MiB (``RLIMIT_AS``).
        processes: processes and threads the kernel's user may have (``RLIMIT_NPROC``); enforced
            per kernel only with full isolation.
        file_mb: largest file the kernel may write, in MiB (``RLIMIT_FSIZE``); with full isolation
            all its files together live in a tmpfs of ``disk_mb``.
        disk_mb: size of the kernel's private file system (full isolation only).
        output_chars: characters of output kept per cell for feedback; the rest is dropped.
        startup_timeout: seconds the kernel may take to start.
        message_mb: MiB of messages (output, answers) the kernel may send per notebook; then it
            is stopped.
        messages: how many messages the kernel may send per notebook; then it is stopped.
    """

    cell_timeout: float = 120.0
    notebook_timeout: float = 600.0
    memory_mb: int = 4096
    processes: int = 64
    file_mb: int = 64
    disk_mb: int = 256
    output_chars: int = 20_000
    startup_timeout: float = 120.0
    message_mb: int = 256
    messages: int = 200_000

    def check(self) -> None:
        """Raise ``ValueError`` naming the first limit that is not positive."""
        for name, value in asdict(self).items():
            if value <= 0:
                raise ValueError(f"the limit {name} must be positive, got {value}")

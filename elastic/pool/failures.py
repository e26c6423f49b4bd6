"""How a task fails: the errors its future raises, and the words for how its process ended.

Split from :mod:`elastic.pool.tasks` (which re-exports every name here): a shell task's non-zero exit
(:class:`ShellTaskError`), a worker that died under a task (:class:`TaskCrashedError`), a result that
cannot be pickled (:class:`ResultPicklingError`), a task lost more often than its retries allow
(:class:`TaskLostError`), one killed on request (:class:`TaskKilledError`), and the traceback text of
an exception raised on an agent (:class:`RemoteTraceback`).
"""

from __future__ import annotations

import signal
from typing import Any

from elastic.errors import PoolError

__all__ = [
    "RemoteTraceback",
    "ResultPicklingError",
    "ShellTaskError",
    "TaskCrashedError",
    "TaskKilledError",
    "TaskLostError",
    "how_it_ended",
    "signal_name",
]


class RemoteTraceback(Exception):
    """Carries the traceback text of an exception raised on an agent (shown as the ``__cause__``)."""

    def __init__(self, tb: str) -> None:
        self.tb = tb
        super().__init__(tb)

    def __str__(self) -> str:
        return f'\n"""\n{self.tb}"""'


class ShellTaskError(PoolError):
    """A checked shell task exited with a non-zero code.

    Parameters
    ----------
    task_id : str
        The task.
    returncode : int
        Exit code of ``bash -c``.
    stdout, stderr : str
        Its output.
    """

    def __init__(self, task_id: str, returncode: int, stdout: str, stderr: str) -> None:
        self.task_id = task_id
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        tail = stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        super().__init__(
            f"shell task {task_id!r} {how_it_ended(returncode)}: {tail[0]}; "
            "pass check=False to get the ShellResult instead"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id, self.returncode, self.stdout, self.stderr))


class TaskCrashedError(PoolError):
    """A task failed in a way that left no exception to re-raise (its process died, or unpicklable).

    Parameters
    ----------
    task_id : str
        The task.
    error_type, error_message : str
        What is known of the failure.
    returncode : int or None
        Exit code of the child process.
    """

    def __init__(self, task_id: str, error_type: str, error_message: str, returncode: int | None) -> None:
        self.task_id = task_id
        self.error_type = error_type
        self.error_message = error_message
        self.returncode = returncode
        why = (
            f"exit code {returncode}"
            if returncode is not None
            else "the exception itself could not be brought back: it does not pickle, or unpickle here "
            "(an __init__ whose arguments are not its args), or is over 1 MiB"
        )
        super().__init__(f"task {task_id!r} failed: {error_type}: {error_message} ({why})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id, self.error_type, self.error_message, self.returncode))


class ResultPicklingError(PoolError):
    """A task returned a value that cannot be pickled to send back.

    Parameters
    ----------
    task_id : str
        The task.
    type_name : str
        Type of the value it returned.
    detail : str
        What the pickler said.
    """

    def __init__(self, task_id: str, type_name: str, detail: str) -> None:
        self.task_id = task_id
        self.type_name = type_name
        self.detail = detail
        super().__init__(
            f"task {task_id!r} returned a {type_name} that cannot be pickled to send back ({detail}); "
            "return plain data, or write it to a file and return the path"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id, self.type_name, self.detail))


class TaskLostError(PoolError):
    """A task was lost (agent died, allocation ended) more often than the pool's retry limit.

    Parameters
    ----------
    task_id : str
        The task.
    stage : str
        Its stage.
    losses : tuple of (str, str)
        ``(allocation id, cause)`` of every lost attempt, oldest first.
    max_retries : int
        The pool's limit.
    """

    def __init__(
        self, task_id: str, stage: str, losses: tuple[tuple[str, str], ...], max_retries: int
    ) -> None:
        self.task_id = task_id
        self.stage = stage
        self.losses = losses
        self.max_retries = max_retries
        where = "; ".join(f"attempt {i} on allocation {a!r}: {c}" for i, (a, c) in enumerate(losses, 1))
        super().__init__(
            f"task {task_id!r} (stage {stage!r}) was lost {len(losses)} times, more than max_retries="
            f"{max_retries}: {where}. Check the allocations' job logs, or raise Pool(max_retries=...)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id, self.stage, self.losses, self.max_retries))


class TaskKilledError(PoolError):
    """A running task was killed on request (:meth:`elastic.pool.Pool.kill`).

    Parameters
    ----------
    task_id : str
        The task.
    reason : str
        Why it was killed (what the caller said).
    """

    def __init__(self, task_id: str, reason: str) -> None:
        self.task_id = task_id
        self.reason = reason
        super().__init__(f"task {task_id!r} was killed: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id, self.reason))


def how_it_ended(returncode: int) -> str:
    """Say how a process ended: "exited with code 3", or "was killed by SIGTERM" for a code of -15."""
    if returncode < 0:  # subprocess reports death by signal N as -N
        return f"was killed by {signal_name(-returncode)}"
    return f"exited with code {returncode}"


def signal_name(signum: int) -> str:
    """Return ``"SIGTERM"`` for 15, ``"signal 99"`` for a number that names no signal."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"

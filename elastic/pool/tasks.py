"""Tasks: what the pool runs (:class:`Task`), what comes back (:class:`TaskResult`), and how it fails.

A task is either a Python callable with its arguments, serialised with :mod:`cloudpickle` (the
serialiser Parsl's and Prefect's workers also rely on; it pickles lambdas and closures by value), or a
shell command run by ``bash -c``. Each has a number of cores, an optional runtime estimate (seconds) and
a stage name.

Where it runs: an agent runs Python callables back to back in its long-lived worker processes
(:mod:`elastic.pool.worker`, one per core); shell commands, and callables that ask for ``isolate=True``,
in a fresh child process each (:mod:`elastic.pool.child`). Both run the task with :func:`execute`, here.
A task's standard input is ``/dev/null``. How a task fails (its errors) is in :mod:`elastic.pool.failures`,
re-exported here.

Size: a pickled call or value larger than :data:`elastic.pool.spool.INLINE_LIMIT` travels through a file
of the spool directory (:attr:`Task.payload_file`, :attr:`TaskResult.value_file`); error texts are cut to
:data:`TEXT_LIMIT` characters; shell commands are limited to what Linux passes to ``bash -c``
(:data:`MAX_COMMAND`), ids and stage names to :data:`MAX_NAME` characters.
"""

from __future__ import annotations

import dataclasses
import enum
import pickle
import subprocess
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle

from elastic.errors import ConfigError, PoolError
from elastic.pool import pickling
from elastic.pool import spool as _spool
from elastic.pool.failures import (
    RemoteTraceback,
    ResultPicklingError,
    ShellTaskError,
    TaskCrashedError,
    TaskKilledError,
    TaskLostError,
    how_it_ended,
    signal_name,
)

__all__ = [
    "MAX_COMMAND",
    "MAX_NAME",
    "TEXT_LIMIT",
    "RemoteTraceback",
    "ResultPicklingError",
    "ShellResult",
    "ShellTaskError",
    "Task",
    "TaskCrashedError",
    "TaskEvent",
    "TaskKilledError",
    "TaskKind",
    "TaskLostError",
    "TaskResult",
    "TaskState",
    "clip",
    "execute",
    "how_it_ended",
    "signal_name",
]

MAX_NAME = 1024
"""Characters of a task id or stage name at most."""

MAX_COMMAND = 131_071
"""Bytes of a shell command at most: Linux passes at most 128 KiB (with its NUL) in one argument."""

TEXT_LIMIT = 65_536
"""Characters of a task's error message and of its traceback kept in its result (the middle is cut)."""


class TaskKind(str, enum.Enum):
    """What a task runs."""

    CALL = "call"
    """A Python callable with arguments (cloudpickled)."""
    SHELL = "shell"
    """A shell command (``bash -c``)."""


class TaskState(str, enum.Enum):
    """Life cycle of a task in the pool."""

    QUEUED = "QUEUED"
    """Waiting for cores (first time, or again after it was lost or given back)."""
    ASSIGNED = "ASSIGNED"
    """Sent ahead to a busy agent (prefetch), to start there as soon as one of its cores frees; given back
    to the queue, not counted as lost, if the agent drains, stops or dies first."""
    RUNNING = "RUNNING"
    """Running on an agent (started on a free core, or reported started there)."""
    LOST = "LOST"
    """Its agent died or its allocation ended or was stopping (a signal killed it) while it ran; it is
    queued again if retries are left."""
    DONE = "DONE"
    """Returned a result."""
    FAILED = "FAILED"
    """Raised, exited non-zero, was killed by a signal on a healthy allocation, or was lost too often."""
    CANCELLED = "CANCELLED"
    """Its future was cancelled, or it was killed (:meth:`elastic.pool.Pool.kill`), before it started; or
    the pool closed. (A task killed while it runs ends FAILED, with :class:`TaskKilledError`.)"""


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of user work.

    Build tasks with :meth:`call` or :meth:`shell` rather than directly.

    Parameters
    ----------
    task_id : str
        Unique id in the pool.
    kind : TaskKind
        Callable or shell command.
    payload : bytes
        ``pickling.dumps((fn, args, kwargs))`` for CALL (cloudpickle keeping code's file names:
        :mod:`elastic.pool.pickling`), the UTF-8 command for SHELL.
    cores : int, default 1
        Cores it needs on one agent.
    estimate : float or None, default None
        Expected runtime in seconds; the pool does not start it on an allocation with less walltime left
        when another allocation can take it.
    stage : str, default "default"
        Workflow stage (for metrics).
    check : bool, default True
        SHELL only: a non-zero exit fails the task with :class:`ShellTaskError`.
    isolate : bool, default False
        CALL only: run it in a fresh interpreter of its own instead of a long-lived worker (for code that
        leaves state behind, changes the process or must not share it; costs ~100 ms more).
    agent : str or None, default None
        Run it on this agent only (its name, ``"<allocation>/<host>/<pid>"``, as
        :meth:`elastic.pool.Pool.agents` lists it); ``None``: on any agent. A task for one agent is never
        run elsewhere: when that agent is lost or gives it back, the task fails with
        :class:`TaskLostError` at once, whatever ``max_retries`` says (its submitter chose the agent, so it
        decides what to do next; see :mod:`elastic.pool.placement`).
    payload_file : str, default ""
        Set by the pool: the name of the spool file holding the payload when it is larger than
        :data:`elastic.pool.spool.INLINE_LIMIT` (``payload`` is then empty).

    Examples
    --------
    >>> t = Task.shell("echo hi", cores=2, estimate=5.0, stage="s1", task_id="t1")
    >>> (t.kind.value, t.command, t.cores)
    ('shell', 'echo hi', 2)
    """

    task_id: str
    kind: TaskKind
    payload: bytes
    cores: int = 1
    estimate: float | None = None
    stage: str = "default"
    check: bool = True
    isolate: bool = False
    agent: str | None = None
    payload_file: str = ""

    def __post_init__(self) -> None:
        if not self.task_id:
            raise ConfigError("Task.task_id must be a non-empty string")
        for field, value in (("task_id", self.task_id), ("stage", self.stage)):
            if len(value) > MAX_NAME:
                raise ConfigError(
                    f"Task.{field} has {len(value):,} characters; at most {MAX_NAME:,} are allowed "
                    f"(it starts {value[:40]!r})"
                )
        if self.cores < 1:
            raise ConfigError(f"Task.cores must be >= 1, got {self.cores} (task {self.task_id!r})")
        if self.estimate is not None and not self.estimate >= 0:
            raise ConfigError(
                f"Task.estimate must be >= 0 seconds or None, got {self.estimate} (task {self.task_id!r})"
            )
        if self.agent is not None and not self.agent:
            raise ConfigError(f"Task.agent must be an agent's name or None, got '' (task {self.task_id!r})")

    @classmethod
    def call(
        cls,
        fn: Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        cores: int = 1,
        estimate: float | None = None,
        stage: str = "default",
        task_id: str | None = None,
        isolate: bool = False,
    ) -> Task:
        """Make a task that calls ``fn(*args, **kwargs)`` on an agent and returns its value.

        Raises
        ------
        ConfigError
            ``fn`` is not callable, or it or its arguments cannot be pickled (the message names which).
        """
        if not callable(fn):
            raise ConfigError(f"Task.call needs a callable, got {type(fn).__name__}")
        try:
            payload = pickling.dumps((fn, tuple(args), dict(kwargs or {})))
        except Exception as exc:
            name = getattr(fn, "__qualname__", type(fn).__name__)
            raise ConfigError(
                f"Task.call({name}): the function or its arguments cannot be pickled to send to an agent "
                f"({type(exc).__name__}: {exc}); pass plain data (paths, numbers, arrays) instead of open "
                "files, locks, sockets or database connections"
            ) from exc
        return cls(_new_id(task_id), TaskKind.CALL, payload, cores, estimate, stage, True, isolate)

    @classmethod
    def shell(
        cls,
        command: str,
        *,
        cores: int = 1,
        estimate: float | None = None,
        stage: str = "default",
        task_id: str | None = None,
        check: bool = True,
        agent: str | None = None,
    ) -> Task:
        """Make a task that runs ``bash -c command``; its value is a :class:`ShellResult`.

        ``agent`` names the one agent it may run on (see :class:`Task`).
        """
        if not command.strip():
            raise ConfigError("Task.shell needs a non-empty command")
        size = len(command.encode())
        if size > MAX_COMMAND:
            raise ConfigError(
                f"Task.shell: the command has {size:,} bytes; Linux passes at most {MAX_COMMAND:,} to "
                "bash -c. Write it to a script file and run that, or pass the data in a file"
            )
        return cls(
            _new_id(task_id), TaskKind.SHELL, command.encode(), cores, estimate, stage, check, agent=agent
        )

    @property
    def command(self) -> str:
        """The shell command (SHELL tasks)."""
        if self.kind is not TaskKind.SHELL:
            raise ConfigError(f"task {self.task_id!r} is a {self.kind.value} task, not a shell command")
        return self.payload.decode()

    def load_payload(self, spool: Path | None) -> bytes:
        """Return the payload, read from the spool file when it went there (see :attr:`payload_file`)."""
        if not self.payload_file:
            return self.payload
        if spool is None:
            raise PoolError(f"task {self.task_id!r}: its payload is in a spool file, but no spool was given")
        return _spool.path(spool, self.payload_file).read_bytes()


def _new_id(task_id: str | None) -> str:
    return task_id if task_id is not None else uuid.uuid4().hex[:12]


@dataclass(frozen=True, slots=True)
class ShellResult:
    """What a shell task returns: exit code and captured output.

    Output longer than :data:`elastic.pool.spool.OUTPUT_LIMIT` bytes is cut: ``stdout`` (``stderr``) then
    starts with a line naming the file that keeps all of it, ``stdout_file`` (``stderr_file``), followed
    by its last :data:`~elastic.pool.spool.OUTPUT_LIMIT` bytes.
    """

    returncode: int
    stdout: str
    stderr: str
    stdout_file: str | None = None
    stderr_file: str | None = None


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What an agent sends back for one task run.

    Attributes
    ----------
    task_id : str
        The task.
    ok : bool
        Whether it returned normally (and, for checked shell tasks, exited 0).
    value : bytes
        cloudpickled return value (CALL) or :class:`ShellResult` (SHELL) when ``ok``.
    value_file : str
        The spool file holding ``value`` instead, when it was larger than
        :data:`elastic.pool.spool.INLINE_LIMIT`.
    error : bytes
        cloudpickled exception when not ``ok`` (empty if it could not be pickled).
    error_type, error_message, traceback : str
        The exception's type name, text and the remote traceback.
    returncode : int or None
        Exit code of the child process that ran it.
    stdout, stderr : str
        Output captured while it ran (cut, see :class:`ShellResult`).
    stdout_file, stderr_file : str or None
        Files keeping the whole output when it was cut.
    started, ended : float
        Epoch seconds on the agent's host.
    signal : int or None
        The signal that killed the task's process, or its shell command (``bash -c``), or the command's
        foreground program as the shell reports it (exit code 128 + N for SIGHUP, SIGINT, SIGKILL,
        SIGTERM); None otherwise. The pool re-queues such a task when its allocation was stopping (SIGTERM
        at the walltime or on ``scancel``) and fails it when the allocation was healthy.
    """

    task_id: str
    ok: bool
    value: bytes = b""
    error: bytes = b""
    error_type: str = ""
    error_message: str = ""
    traceback: str = ""
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    started: float = 0.0
    ended: float = 0.0
    signal: int | None = None
    value_file: str = ""
    stdout_file: str | None = None
    stderr_file: str | None = None

    @property
    def signal_name(self) -> str:
        """``"SIGTERM"``-style name of :attr:`signal` (``""`` when there is none)."""
        return "" if self.signal is None else signal_name(self.signal)

    def outcome(self, spool: Path | None = None) -> Any:
        """Return the task's value, or raise its exception with the remote traceback as ``__cause__``.

        Like :class:`concurrent.futures.ProcessPoolExecutor`, the original exception is re-raised when it
        can be unpickled here; otherwise a :class:`TaskCrashedError` carries its type, text and traceback.
        A value in a spool file (:attr:`value_file`) is read from ``spool`` and the file removed.
        """
        if self.ok:
            if self.value_file:
                if spool is None:
                    raise PoolError(f"task {self.task_id!r}: its value is in a spool file, but no spool")
                return pickle.loads(_spool.take(spool, self.value_file))
            return pickle.loads(self.value)
        exc: BaseException
        try:
            exc = pickle.loads(self.error) if self.error else self._crash()
        except Exception:  # the exception's class may not exist here
            exc = self._crash()
        if self.traceback:
            exc.__cause__ = RemoteTraceback(self.traceback)
        raise exc

    def _crash(self) -> TaskCrashedError:
        return TaskCrashedError(self.task_id, self.error_type, self.error_message, self.returncode)


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """A task changed state (recorded by the pool for metrics and plots).

    Attributes
    ----------
    time : float
        Epoch seconds (pool clock).
    task_id, stage : str
        The task.
    state : TaskState
        The state it entered.
    cores : int
        Its cores.
    alloc_id : str or None
        The allocation it runs or ran on.
    attempt : int
        1 for the first run, 2 after the first loss, ...
    detail : str
        Why, in words.
    """

    time: float
    task_id: str
    stage: str
    state: TaskState
    cores: int
    alloc_id: str | None = None
    attempt: int = 1
    detail: str = ""


# --------------------------------------------------------------------------------------------------------
# Running one task in this process (a worker's, or a fresh child's).


def execute(task: Task, spool: Path | None = None) -> TaskResult:
    """Run ``task`` in this process and return its result; the task's exception is captured, never raised.

    A shell command runs as ``bash -c`` with ``/dev/null`` as its standard input and this process' output;
    a callable is unpickled (from its spool file, if it went there) and called. The value is cloudpickled
    here, so an unpicklable value fails the task (:class:`ResultPicklingError`) instead of the process that
    runs it; with a ``spool``, a value larger than :data:`elastic.pool.spool.INLINE_LIMIT` is written to a
    spool file (:attr:`TaskResult.value_file`). Error texts are cut to :data:`TEXT_LIMIT` characters and an
    exception whose pickle is larger than the inline limit is sent by its type and text only.
    """
    started = time.time()
    try:
        if task.kind is TaskKind.SHELL:
            code = subprocess.run(
                ["bash", "-c", task.command], stdin=subprocess.DEVNULL, check=False
            ).returncode
            value: Any = ShellResult(code, "", "")
            if task.check and code != 0:
                raise ShellTaskError(task.task_id, code, "", "")
        else:
            fn, args, kwargs = pickle.loads(task.load_payload(spool))
            value = fn(*args, **kwargs)
        try:
            blob = cloudpickle.dumps(value)
        except Exception as exc:
            raise ResultPicklingError(
                task.task_id, type(value).__qualname__, f"{type(exc).__name__}: {exc}"
            ) from None
        if spool is not None and len(blob) > _spool.INLINE_LIMIT:
            result = TaskResult(task.task_id, ok=True, value_file=_spool.write(spool, blob, ".value"))
        else:
            result = TaskResult(task.task_id, ok=True, value=blob)
    except BaseException as exc:
        tb = "" if isinstance(exc, ShellTaskError) else clip(traceback.format_exc())
        try:
            error = cloudpickle.dumps(exc)
        except Exception:
            error = b""
        if len(error) > _spool.INLINE_LIMIT:
            error = b""  # the pool raises a TaskCrashedError with the type and the (cut) text
        result = TaskResult(
            task.task_id,
            ok=False,
            error=error,
            error_type=clip(type(exc).__qualname__, MAX_NAME),
            error_message=clip(str(exc)),
            traceback=tb,
        )
    return dataclasses.replace(result, started=started, ended=time.time())


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """Return ``text``, or its head and tail around a note of what was cut when longer than ``limit``.

    Examples
    --------
    >>> clip("abcdefghijklmnopqrstuvwxyz" * 4, 60)
    'abcdefghij[... 84 characters cut ...]qrstuvwxyz'
    """
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40) // 2
    return f"{text[:keep]}[... {len(text) - 2 * keep:,} characters cut ...]{text[len(text) - keep :]}"

"""Tasks: what the pool runs (:class:`Task`), what comes back (:class:`TaskResult`), and how it is run.

A task is either a Python callable with its arguments, serialised with :mod:`cloudpickle` (the
serialiser Parsl's and Prefect's workers also rely on; it pickles lambdas and closures by value), or a
shell command run by ``bash -c``. Each has a number of cores, an optional runtime estimate (seconds) and
a stage name.

An agent runs every task in a fresh child process, ``python -m elastic.pool.tasks RESULT_FILE``, fed the
task on its standard input. The child keeps reading its standard input: when the agent dies (the pipe
closes) the child kills the task and exits, so a dead agent leaves no orphan work behind. A fresh
interpreter per task costs about 80 ms here and keeps tasks from sharing state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle

from elastic.errors import ConfigError, PoolError

__all__ = [
    "RemoteTraceback",
    "ShellResult",
    "ShellTaskError",
    "Task",
    "TaskCrashedError",
    "TaskEvent",
    "TaskKind",
    "TaskLostError",
    "TaskResult",
    "TaskState",
    "run_in_child",
]

_LENGTH = struct.Struct("!Q")


class TaskKind(str, enum.Enum):
    """What a task runs."""

    CALL = "call"
    """A Python callable with arguments (cloudpickled)."""
    SHELL = "shell"
    """A shell command (``bash -c``)."""


class TaskState(str, enum.Enum):
    """Life cycle of a task in the pool."""

    QUEUED = "QUEUED"
    """Waiting for cores (first time, or again after it was lost)."""
    RUNNING = "RUNNING"
    """Placed on an agent."""
    LOST = "LOST"
    """Its agent died or its allocation ended or was stopping (a signal killed it) while it ran; it is
    queued again if retries are left."""
    DONE = "DONE"
    """Returned a result."""
    FAILED = "FAILED"
    """Raised, exited non-zero, was killed by a signal on a healthy allocation, or was lost too often."""
    CANCELLED = "CANCELLED"
    """Its future was cancelled before it started, or the pool closed."""


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
        ``cloudpickle.dumps((fn, args, kwargs))`` for CALL, the UTF-8 command for SHELL.
    cores : int, default 1
        Cores it needs on one agent.
    estimate : float or None, default None
        Expected runtime in seconds; the pool does not start it on an allocation with less walltime left
        when another allocation can take it.
    stage : str, default "default"
        Workflow stage (for metrics).
    check : bool, default True
        SHELL only: a non-zero exit fails the task with :class:`ShellTaskError`.

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

    def __post_init__(self) -> None:
        if not self.task_id:
            raise ConfigError("Task.task_id must be a non-empty string")
        if self.cores < 1:
            raise ConfigError(f"Task.cores must be >= 1, got {self.cores} (task {self.task_id!r})")
        if self.estimate is not None and not self.estimate >= 0:
            raise ConfigError(
                f"Task.estimate must be >= 0 seconds or None, got {self.estimate} (task {self.task_id!r})"
            )

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
    ) -> Task:
        """Make a task that calls ``fn(*args, **kwargs)`` on an agent and returns its value."""
        if not callable(fn):
            raise ConfigError(f"Task.call needs a callable, got {type(fn).__name__}")
        payload = cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))
        return cls(_new_id(task_id), TaskKind.CALL, payload, cores, estimate, stage)

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
    ) -> Task:
        """Make a task that runs ``bash -c command``; its value is a :class:`ShellResult`."""
        if not command.strip():
            raise ConfigError("Task.shell needs a non-empty command")
        return cls(_new_id(task_id), TaskKind.SHELL, command.encode(), cores, estimate, stage, check)

    @property
    def command(self) -> str:
        """The shell command (SHELL tasks)."""
        if self.kind is not TaskKind.SHELL:
            raise ConfigError(f"task {self.task_id!r} is a {self.kind.value} task, not a shell command")
        return self.payload.decode()


def _new_id(task_id: str | None) -> str:
    return task_id if task_id is not None else uuid.uuid4().hex[:12]


@dataclass(frozen=True, slots=True)
class ShellResult:
    """What a shell task returns: exit code and captured output."""

    returncode: int
    stdout: str
    stderr: str


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
    error : bytes
        cloudpickled exception when not ``ok`` (empty if it could not be pickled).
    error_type, error_message, traceback : str
        The exception's type name, text and the remote traceback.
    returncode : int or None
        Exit code of the child process that ran it.
    stdout, stderr : str
        Output captured while it ran.
    started, ended : float
        Epoch seconds on the agent's host.
    signal : int or None
        The signal that killed the task's process, or its shell command (``bash -c``); None when neither
        died by a signal. The pool re-queues such a task when its allocation was stopping (SIGTERM at the
        walltime or on ``scancel``) and fails it when the allocation was healthy.
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

    @property
    def signal_name(self) -> str:
        """``"SIGTERM"``-style name of :attr:`signal` (``""`` when there is none)."""
        return "" if self.signal is None else _signal_name(self.signal)

    def outcome(self) -> Any:
        """Return the task's value, or raise its exception with the remote traceback as ``__cause__``.

        Like :class:`concurrent.futures.ProcessPoolExecutor`, the original exception is re-raised when it
        can be unpickled here; otherwise a :class:`TaskCrashedError` carries its type, text and traceback.
        """
        if self.ok:
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
            f"shell task {task_id!r} {_how_it_ended(returncode)}: {tail[0]}; "
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
        super().__init__(f"task {task_id!r} failed: {error_type}: {error_message} (exit code {returncode})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id, self.error_type, self.error_message, self.returncode))


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
# Running one task in a child process.


def run_in_child(
    task: Task, workdir: Path, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Callable[[], TaskResult]]:
    """Start ``python -m elastic.pool.tasks`` for ``task``; return the process and a result collector.

    The caller keeps the process' standard input open while the task runs; closing it makes the child kill
    the task and exit. The collector must be called after the process has exited.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    base = workdir / uuid.uuid4().hex  # not the task id: that may hold any character
    out, err, res = (base.with_suffix(s) for s in (".out", ".err", ".result"))
    child_env = {**os.environ, **(env or {})}
    child_env["ELASTIC_TASK_ID"] = task.task_id
    child_env["ELASTIC_TASK_CORES"] = str(task.cores)
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(
            [sys.executable, "-m", "elastic.pool.tasks", str(res)],
            stdin=subprocess.PIPE,
            stdout=fo,
            stderr=fe,
            env=child_env,
            # Its own process group, so that stopping it (closing stdin) kills every process of the task.
            start_new_session=True,
        )
    assert proc.stdin is not None
    blob = pickle.dumps(task)
    try:
        proc.stdin.write(_LENGTH.pack(len(blob)) + blob)
        proc.stdin.flush()
    except BrokenPipeError:
        # The child died before it read its task: a signal to the agent's process group (a batch system
        # stopping the job) can reach it between fork and setsid. collect() reports how it ended.
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()

    def collect() -> TaskResult:
        stdout = out.read_text(errors="replace")
        stderr = err.read_text(errors="replace")
        try:
            result: TaskResult = pickle.loads(res.read_bytes())
        except (OSError, EOFError, pickle.UnpicklingError):
            result = TaskResult(
                task.task_id,
                ok=False,
                error_type="TaskCrashedError",
                error_message=f"the task's process {_how_it_ended(proc.returncode)} and left no result",
            )
        for path in (out, err, res):
            path.unlink(missing_ok=True)
        result = dataclasses.replace(result, returncode=proc.returncode, stdout=stdout, stderr=stderr)
        if proc.returncode < 0:
            result = dataclasses.replace(result, signal=-proc.returncode)
        return _with_shell_output(task, result) if task.kind is TaskKind.SHELL else result

    return proc, collect


def _with_shell_output(task: Task, result: TaskResult) -> TaskResult:
    """Put the captured output into a shell task's ShellResult or ShellTaskError (and its signal)."""
    if result.ok:
        code = pickle.loads(result.value).returncode
        value = ShellResult(code, result.stdout, result.stderr)
        result = dataclasses.replace(result, value=cloudpickle.dumps(value))
    elif result.error_type == ShellTaskError.__qualname__:
        code = pickle.loads(result.error).returncode
        exc = ShellTaskError(task.task_id, code, result.stdout, result.stderr)
        result = dataclasses.replace(result, error=cloudpickle.dumps(exc), error_message=str(exc))
    else:
        return result
    if code < 0 and result.signal is None:  # ``bash -c`` itself was killed (subprocess reports -N)
        result = dataclasses.replace(result, signal=-code)
    return result


def _how_it_ended(returncode: int) -> str:
    """Say how a process ended: "exited with code 3", or "was killed by SIGTERM" for a code of -15."""
    if returncode < 0:  # subprocess reports death by signal N as -N
        return f"was killed by {_signal_name(-returncode)}"
    return f"exited with code {returncode}"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _child_main(result_path: str) -> int:
    """Entry point of the child process: read the task from stdin, run it, write the result file."""
    stdin = sys.stdin.buffer
    (size,) = _LENGTH.unpack(stdin.read(_LENGTH.size))
    task: Task = pickle.loads(stdin.read(size))

    def watch_parent() -> None:
        # EOF on stdin means the agent died or wants the task stopped: stop now, leave no orphan.
        while stdin.read(4096):
            pass
        # The child leads its own process group (see run_in_child): this kills the task's whole tree.
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch_parent, daemon=True).start()
    started = time.time()
    try:
        if task.kind is TaskKind.SHELL:
            sys.stdout.flush()
            code = subprocess.run(["bash", "-c", task.command], check=False).returncode
            value: Any = ShellResult(code, "", "")
            if task.check and code != 0:
                raise ShellTaskError(task.task_id, code, "", "")
        else:
            fn, args, kwargs = pickle.loads(task.payload)
            value = fn(*args, **kwargs)
        result = TaskResult(task.task_id, ok=True, value=cloudpickle.dumps(value))
    except BaseException as exc:
        tb = "" if isinstance(exc, ShellTaskError) else traceback.format_exc()
        try:
            blob = cloudpickle.dumps(exc)
        except Exception:
            blob = b""
        result = TaskResult(
            task.task_id,
            ok=False,
            error=blob,
            error_type=type(exc).__qualname__,
            error_message=str(exc),
            traceback=tb,
        )
    result = dataclasses.replace(result, started=started, ended=time.time())
    sys.stdout.flush()
    sys.stderr.flush()
    tmp = Path(result_path + ".tmp")
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(result_path)  # atomic: the agent never reads half a result
    return 0


if __name__ == "__main__":
    # Run the copy imported as ``elastic.pool.tasks`` so pickled records name their real module, not __main__.
    from elastic.pool.tasks import _child_main as _main

    code = _main(sys.argv[1])
    # Leave at once: a normal shutdown would wait on the watcher thread blocked reading stdin.
    os._exit(code)

"""Running one task in a fresh child process: shell commands, and callables that ask for isolation.

:func:`run_in_child` starts ``python -m elastic.pool.child RESULT_FILE``, its own process group, fed the
task on its standard input. The child keeps that pipe open and watches it: when the agent dies (the pipe
closes) the child kills its whole process group, so a dead agent leaves no orphan work behind. The task
itself gets ``/dev/null`` as standard input; its output goes to files the agent reads back, cut to
:data:`elastic.pool.spool.OUTPUT_LIMIT` bytes per stream with the whole kept in the spool
(:func:`elastic.pool.spool.read_output`).

The caller learns that the child ended from :attr:`Child.exited_fd` (a pidfd, readable once the process
has exited: the agent polls it beside its socket instead of checking children on a timer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

import cloudpickle

from elastic.pool.cgroups import CgroupTree, Confinement, end_left
from elastic.pool.reaper import become_subreaper, end_descendants
from elastic.pool.spool import read_output
from elastic.pool.tasks import ShellResult, ShellTaskError, Task, TaskKind, TaskResult, execute, how_it_ended

__all__ = ["Child", "run_in_child"]

_LENGTH = struct.Struct("!Q")

_STOP_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGTERM})
"""Signals a batch system or a user sends to stop a job: a shell's exit code 128 + N for these is a death."""


@dataclasses.dataclass(slots=True)
class Child:
    """A task running in a child process of its own.

    Attributes
    ----------
    task : Task
        What it runs.
    proc : subprocess.Popen
        The child (leader of its own process group).
    exited_fd : int
        A pidfd of the child: readable once it has exited.
    """

    task: Task
    proc: subprocess.Popen[bytes]
    exited_fd: int
    _out: Path
    _err: Path
    _res: Path
    _spool: Path | None = None
    _cgroups: CgroupTree | None = None

    def stop(self) -> None:
        """Make the child kill its task (its whole process group) and exit: close its standard input."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()

    def collect(self) -> TaskResult:
        """Return the task's result; call once the child has exited (its files are removed)."""
        self.stop()
        self.proc.wait()
        end_left(self._cgroups, f"c{self.proc.pid}-")  # the task's cgroup, if the child died before it could
        os.close(self.exited_fd)
        stdout, stdout_file = read_output(self._out, self._spool, "stdout")
        stderr, stderr_file = read_output(self._err, self._spool, "stderr")
        try:
            result: TaskResult = pickle.loads(self._res.read_bytes())
        except (OSError, EOFError, pickle.UnpicklingError):
            result = TaskResult(
                self.task.task_id,
                ok=False,
                error_type="TaskCrashedError",
                error_message=f"the task's process {how_it_ended(self.proc.returncode)} and left no result",
            )
        self._res.unlink(missing_ok=True)
        result = dataclasses.replace(
            result,
            returncode=self.proc.returncode,
            stdout=stdout,
            stderr=stderr,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
        )
        if self.proc.returncode < 0:
            result = dataclasses.replace(result, signal=-self.proc.returncode)
        return _with_shell_output(self.task, result) if self.task.kind is TaskKind.SHELL else result


def run_in_child(
    task: Task,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    spool: Path | None = None,
    cgroups: CgroupTree | None = None,
) -> Child:
    """Start a child process running ``task``; return it (see :class:`Child`).

    ``workdir`` holds its output and result files while it runs; ``spool`` is the pool run's spool
    directory (large payloads, values and outputs: :mod:`elastic.pool.spool`), None to keep all inline.
    With ``cgroups`` (the agent's tree), the task runs in a cgroup of its own there, ``cPID-1``
    (:mod:`elastic.pool.cgroups`).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    base = workdir / uuid.uuid4().hex  # not the task id: that may hold any character
    out, err, res = (base.with_suffix(s) for s in (".out", ".err", ".result"))
    child_env = {**os.environ, **(env or {})}
    child_env["ELASTIC_TASK_ID"] = task.task_id
    child_env["ELASTIC_TASK_CORES"] = str(task.cores)
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "elastic.pool.child",
                str(res),
                str(spool or ""),
                "" if cgroups is None else cgroups.to_arg(),
            ],
            stdin=subprocess.PIPE,
            stdout=fo,
            stderr=fe,
            env=child_env,
            # Its own process group, so that stopping it (closing stdin) kills every process of the task.
            start_new_session=True,
        )
    exited_fd = os.pidfd_open(proc.pid)
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
    return Child(task, proc, exited_fd, out, err, res, spool, cgroups)


def _with_shell_output(task: Task, result: TaskResult) -> TaskResult:
    """Put the captured output into a shell task's ShellResult or ShellTaskError (and its signal)."""
    if result.ok:
        code = pickle.loads(result.value).returncode
        value = ShellResult(code, result.stdout, result.stderr, result.stdout_file, result.stderr_file)
        result = dataclasses.replace(result, value=cloudpickle.dumps(value))
    elif result.error_type == ShellTaskError.__qualname__:
        code = pickle.loads(result.error).returncode
        exc = ShellTaskError(task.task_id, code, result.stdout, result.stderr)
        result = dataclasses.replace(result, error=cloudpickle.dumps(exc), error_message=str(exc))
    else:
        return result
    if result.signal is None:
        if code < 0:  # ``bash -c`` itself was killed (subprocess reports -N)
            result = dataclasses.replace(result, signal=-code)
        elif code - 128 in _STOP_SIGNALS:
            # The shell outlived its foreground program, which a stop signal killed: bash exits 128 + N. A
            # batch system stopping the job signals every process; when the program dies first and the
            # shell exits before its own signal arrives, this is all that says the task was interrupted.
            result = dataclasses.replace(result, signal=code - 128)
    return result


def _child_main(result_path: str, spool: str = "", cgroups: str = "") -> int:
    """Entry point of the child process: read the task from stdin, run it, write the result file."""
    stdin = sys.stdin.buffer
    (size,) = _LENGTH.unpack(stdin.read(_LENGTH.size))
    task: Task = pickle.loads(stdin.read(size))
    # Keep the pipe from the agent for the watcher below, and give the task /dev/null as its standard
    # input: a task that reads stdin (cat, read, sys.stdin.read()) gets EOF instead of hanging on the pipe.
    control = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)

    confinement = Confinement(CgroupTree.from_arg(cgroups), f"c{os.getpid()}-") if cgroups else None

    def watch_parent() -> None:
        # EOF on the pipe means the agent died or wants the task stopped: stop now, leave no orphan.
        while os.read(control, 4096):
            pass
        if confinement is not None:
            confinement.end_orphaned()  # every process of the task, wherever it went (elastic.pool.cgroups)
        # The child leads its own process group (see run_in_child): this kills the task's whole tree.
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch_parent, daemon=True).start()
    become_subreaper()  # what the task leaves running stays here, to be ended before the child exits
    if confinement is not None:
        confinement.enter()
    result = execute(task, Path(spool) if spool else None)
    if confinement is not None:
        confinement.end()
    end_descendants()
    sys.stdout.flush()
    sys.stderr.flush()
    tmp = Path(result_path + ".tmp")
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(result_path)  # atomic: the agent never reads half a result
    return 0


if __name__ == "__main__":
    # Run the copy imported as ``elastic.pool.child`` so pickled records name their real module.
    from elastic.pool.child import _child_main as _main

    code = _main(sys.argv[1], *sys.argv[2:4])
    # Leave at once: a normal shutdown would wait on the watcher thread blocked reading the pipe.
    os._exit(code)

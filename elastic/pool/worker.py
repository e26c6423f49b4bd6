"""Warm workers: long-lived processes of an agent that run Python tasks back to back.

An agent keeps one :class:`Worker` per core (``python -m elastic.pool.worker``) and sends each a task at a
time over a socket pair (length-prefixed pickles, :class:`multiprocessing.connection.Connection`); the
worker runs it with :func:`elastic.pool.tasks.execute` and answers ``(TaskResult, resident bytes)``.
Starting an interpreter and importing the task's libraries is paid once per worker, not per task.

Safety, as for a fresh child (:mod:`elastic.pool.child`):

- every worker leads its own process group and holds the read end of a *life pipe* whose write end only
  the agent has: when the agent dies (even by SIGKILL) the pipe closes and a watcher thread kills the
  worker's whole process group, so tasks' subprocesses do not outlive it;
- where the agent has cgroups, it runs in a cgroup of its own (:mod:`elastic.pool.cgroups`), where the
  one task it runs at a time starts its processes: after the task it kills every other member, and the
  whole cgroup when the agent dies; it is also a child subreaper, and after each task it ends
  every process the task left running, daemons that left its process group included
  (:mod:`elastic.pool.reaper`);
- its standard input is ``/dev/null``;
- with ``memory_limit``, its address space is capped (``RLIMIT_AS``): a task that exhausts it gets a
  ``MemoryError`` (its future fails, the worker and the agent survive), and a worker whose resident size
  is still above :data:`RETIRE_AT` of the limit after a task (a leak) exits and is replaced by the agent;
- a worker that dies mid-task is noticed by the agent (its connection closes); the task is reported lost or
  failed as for a child, and a new worker takes the dead one's place.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from elastic.pool.cgroups import CgroupTree, Confinement, end_left
from elastic.pool.reaper import become_subreaper, end_descendants, has_children
from elastic.pool.tasks import Task, TaskResult, execute, how_it_ended

__all__ = ["RETIRE_AT", "Worker", "main", "resident_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE")

RETIRE_AT = 0.75
"""A worker whose resident size exceeds this share of its memory limit after a task is replaced."""


def resident_bytes(pid: int | None = None) -> int:
    """Resident set size of a process in bytes (0 when it is gone); from ``/proc/PID/statm``."""
    try:
        with open(f"/proc/{pid or 'self'}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class Worker:
    """The agent's handle on one warm worker process.

    Parameters
    ----------
    python : str
        Interpreter to start.
    memory_limit : int or None, default None
        Bytes of address space the worker may use (``RLIMIT_AS``); ``None``: no limit.
    env : mapping or None
        Extra environment variables.
    spool : Path or None, default None
        The pool run's spool directory (large calls and values go through files there).
    cgroups : CgroupTree or None, default None
        The agent's cgroup tree: each task runs in a cgroup of its own there; None: no cgroups.

    Attributes
    ----------
    task : Task or None
        The task it runs now.
    """

    def __init__(
        self,
        python: str,
        memory_limit: int | None = None,
        env: Mapping[str, str] | None = None,
        spool: Path | None = None,
        cgroups: CgroupTree | None = None,
    ):
        ours, theirs = socket.socketpair()
        life_read, self._life = os.pipe()
        argv = [python, "-m", "elastic.pool.worker", f"--conn-fd={theirs.fileno()}", f"--life-fd={life_read}"]
        if memory_limit is not None:
            argv.append(f"--memory-limit={memory_limit}")
        if spool is not None:
            argv.append(f"--spool-dir={spool}")
        if cgroups is not None:
            argv.append(f"--cgroups={cgroups.to_arg()}")
        try:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(), life_read),
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # its own process group: see the module docstring
            )
        finally:
            theirs.close()
            os.close(life_read)
        self.conn = Connection(ours.detach())
        self.memory_limit = memory_limit
        self.cgroups = cgroups
        self.task: Task | None = None
        self.retiring = False

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    def fileno(self) -> int:
        """Readable when a result arrives or the worker died (for polling)."""
        return self.conn.fileno()

    def run(self, task: Task) -> None:
        """Send ``task`` to the worker (it must be idle); raises OSError when the worker is gone."""
        self.task = task
        self.conn.send_bytes(pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))

    def receive(self) -> tuple[TaskResult, int]:
        """Return the finished task's result and the worker's resident bytes; EOFError if it died."""
        result, rss = pickle.loads(self.conn.recv_bytes())
        self.task = None
        return result, rss

    def death(self) -> TaskResult:
        """Return the result of the task it ran when it died, saying how it died (waits for the exit)."""
        code = self.proc.wait()
        task = self.task
        assert task is not None, "death() is only asked for a worker that was running a task"
        self.task = None
        return TaskResult(
            task.task_id,
            ok=False,
            error_type="TaskCrashedError",
            error_message=f"the worker process running it {how_it_ended(code)}",
            returncode=code,
            signal=-code if code < 0 else None,
        )

    def kill(self) -> None:
        """Make the worker kill its whole process group now (close its life pipe); do not wait."""
        if self._life >= 0:
            with contextlib.suppress(OSError):
                os.close(self._life)
            self._life = -1

    def stop(self, timeout: float = 2.0) -> None:
        """End the worker and every process of its group, at once (closing its pipes), then reap it.

        A task cgroup it left (it died before it could end it) is ended and removed too.
        """
        self.kill()
        self.conn.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        end_left(self.cgroups, f"w{self.pid}-")


# --------------------------------------------------------------------------------------------------------
# The worker process.


def _watch(life_fd: int, confinement: Confinement | None) -> None:
    """Block on the life pipe; when the agent closes it (or dies), kill the task's cgroup and this group."""
    while os.read(life_fd, 4096):
        pass
    if confinement is not None:
        confinement.end_orphaned()
    os.killpg(os.getpgrp(), signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve tasks on the connection until it closes; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m elastic.pool.worker")
    parser.add_argument("--conn-fd", type=int, required=True)
    parser.add_argument("--life-fd", type=int, required=True)
    parser.add_argument("--memory-limit", type=int)
    parser.add_argument("--spool-dir", type=Path)
    parser.add_argument("--cgroups", type=CgroupTree.from_arg)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent decides when its workers stop
    reaps = become_subreaper()  # what a task leaves running stays here, to be ended after it
    confinement = None if args.cgroups is None else Confinement(args.cgroups, f"w{os.getpid()}-")
    if confinement is not None:
        confinement.enter()  # its own cgroup, where the processes its tasks start are born
    threading.Thread(target=_watch, args=(args.life_fd, confinement), daemon=True).start()
    if args.memory_limit is not None:
        resource.setrlimit(resource.RLIMIT_AS, (args.memory_limit, args.memory_limit))
    conn = Connection(args.conn_fd)
    while True:
        try:
            blob = conn.recv_bytes()
        except (EOFError, OSError):
            return 0
        task: Task = pickle.loads(blob)
        os.environ["ELASTIC_TASK_ID"] = task.task_id
        os.environ["ELASTIC_TASK_CORES"] = str(task.cores)
        result = execute(task, args.spool_dir)
        if confinement is not None and (not reaps or has_children()):
            # what the task left in this worker's cgroup (elastic.pool.cgroups). As a subreaper with no
            # child, nothing is left: every process a task starts is a child of this one or below one,
            # orphans included, so the cgroup is read only then (one waitid instead of reading
            # cgroup.procs after every task: 0.1 ms a task, 8 % of bench_pool's throughput)
            confinement.clear()
        end_descendants()  # nothing a task started outlives it (elastic.pool.reaper)
        sys.stdout.flush()
        sys.stderr.flush()
        rss = resident_bytes()
        try:
            conn.send_bytes(pickle.dumps((result, rss), protocol=pickle.HIGHEST_PROTOCOL))
        except MemoryError:  # even the result does not fit: say so in a few bytes
            conn.send_bytes(pickle.dumps((_too_big(task), rss)))
        except OSError:
            return 0
        if args.memory_limit is not None and rss > RETIRE_AT * args.memory_limit:
            return 0  # leaked towards the limit: the agent replaces this worker


def _too_big(task: Task) -> TaskResult:
    return TaskResult(
        task.task_id, ok=False, error_type="MemoryError", error_message="no memory left to send the result"
    )


if __name__ == "__main__":
    # Run the copy imported as ``elastic.pool.worker`` so pickled records name their real module.
    from elastic.pool.worker import main as _main

    code = _main()
    os._exit(code)  # do not wait for the watcher thread

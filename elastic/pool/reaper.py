"""Keep tasks' processes from escaping: a subreaper that ends every descendant it is left with.

A task can leave processes behind that no process group reaches: a shell command's ``nohup cmd &``, or a
program that daemonizes (forks twice and calls ``setsid``). Their parent exits, and Linux gives the orphan
to the nearest ancestor that declared itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``),
else to init, where nothing the agent does could find it again.

The agent, each warm worker and each fresh child declare themselves subreapers (:func:`become_subreaper`),
so whatever a task starts stays among their descendants, and end them all (:func:`end_descendants`):

- a warm worker, after each task: what is still running then was started by that task;
- a fresh child (``isolate=True``), after its task, before it exits;
- the agent, when it stops (the pool closed, the allocation cancelled or at its walltime): whatever its
  workers and children left, including what a killed worker's tasks had started.

What is guaranteed where: on Linux, every process a task starts ends with the task (warm workers, fresh
children) or at the latest with its agent, unless it escapes the agent's tree itself (a process that is
handed to another parent, e.g. ``systemd-run``), or the agent is killed with SIGKILL before it can end
them: on Slurm, the job's cgroup (``proctrack/cgroup``) ends those too; the local and mock backends signal
the job's process tree as found by parent pid, which includes the orphans the agent had adopted. Elsewhere
(no ``prctl``), only process groups are signalled, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys

__all__ = ["PR_SET_CHILD_SUBREAPER", "become_subreaper", "descendants", "end_descendants", "has_children"]

logger = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
"""``prctl`` option (``linux/prctl.h``) making orphaned descendants this process' children."""

_ROUNDS = 20
"""Passes of :func:`end_descendants` at most (a process forking while it is killed needs another)."""


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants; return whether it worked (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        logger.warning(
            "reaper: cannot become a child subreaper (%s): escaping task processes may survive", exc
        )
        return False
    return True


def _stat(pid: int) -> tuple[int, int, bytes] | None:
    """Return ``(ppid, start time, state)`` of ``pid`` from ``/proc``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # the command name may hold spaces and ')'
    return int(fields[1]), int(fields[19]), fields[0]


def descendants(root: int | None = None) -> list[tuple[int, int, int, bytes]]:
    """Return ``(pid, ppid, start, state)`` of every descendant of ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[tuple[int, int, int, bytes]]] = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        st = _stat(int(name))
        if st is not None:
            children.setdefault(st[0], []).append((int(name), st[0], st[1], st[2]))
    out: list[tuple[int, int, int, bytes]] = []
    todo = [root]
    while todo:
        for proc in children.get(todo.pop(), ()):
            out.append(proc)
            todo.append(proc[0])
    return out


def end_descendants(keep: frozenset[int] = frozenset()) -> int:
    """Kill (SIGKILL) every descendant of this process but ``keep`` and their trees; return how many.

    Zombies among this process' own children are reaped, except those in ``keep`` (a
    :class:`subprocess.Popen` the caller still waits for).

    Parameters
    ----------
    keep : frozenset of int, default empty
        Pids to leave alone, with their descendants (e.g. the agent's live workers).
    """
    me = os.getpid()
    ended = 0
    if not keep and not has_children():
        return 0  # the common case after a task, without reading every process of the machine
    for _ in range(_ROUNDS):
        found = [p for p in descendants(me) if p[0] not in keep and not _under(p, keep)]
        if not found:
            break
        for pid, ppid, start, state in found:
            dying = state == b"Z"
            if not dying:
                st = _stat(pid)
                if st is not None and st[1] == start:  # the same process, not a reused pid
                    try:
                        os.kill(pid, signal.SIGKILL)
                        ended += 1
                        dying = True
                    except (ProcessLookupError, PermissionError):
                        pass
            if dying and ppid == me:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
    if ended:
        logger.info("reaper: ended %d process(es) left behind by tasks", ended)
    return ended


def has_children() -> bool:
    """Whether this process has a child (True when it cannot tell).

    A subreaper's leftovers are all its children or below them, so none means nothing to end. One
    ``waitid(P_ALL, WNOHANG | WNOWAIT)`` answers it (about 10x cheaper than reading
    ``/proc/self/task/*/children``, the fallback, and a worker asks after every task); ``WNOWAIT``
    leaves an ended child to be reaped by whoever waits for it (a :class:`subprocess.Popen`).
    """
    if hasattr(os, "waitid"):
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return False
        except OSError:
            return True
        return True  # a child, ended (its status left for its waiter) or not
    try:
        for entry in os.scandir("/proc/self/task"):
            with open(f"{entry.path}/children", "rb") as f:
                if f.read().strip():
                    return True
    except OSError:
        return True
    return False


def _under(proc: tuple[int, int, int, bytes], keep: frozenset[int]) -> bool:
    """Whether ``proc`` descends from a kept pid (its parent chain, read now, meets one)."""
    if not keep:
        return False
    ppid, seen = proc[1], 0
    while ppid > 1 and seen < 4096:
        if ppid in keep:
            return True
        st = _stat(ppid)
        if st is None:
            return False
        ppid, seen = st[0], seen + 1
    return False

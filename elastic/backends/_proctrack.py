"""Find and signal every process of a mock pilot job, like Slurm's ``proctrack/linuxproc``.

Slurm signals *all* processes of a job when it times out or is cancelled, including those that left
the job script's process group (the worker agent starts each task with ``setsid``). Signalling only the
script's process group would let tasks outlive their allocation on the mock backend while Slurm kills
them, and a strategy could tell the two apart. Like ``proctrack/linuxproc``, the job's processes are the
descendants of the job script by parent pid, found when the job is signalled.

The tree is read from ``/proc`` (Linux only, as Slurm's plugin). psutil would do the same; it is not a
dependency of Elastic and reading ``/proc/<pid>/stat`` is all that is needed. Each process is kept with
its start time (clock ticks since boot), so a pid reused by an unrelated process is never signalled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Proc", "alive", "process_tree", "signal_all"]


@dataclass(frozen=True, slots=True)
class Proc:
    """One process: its pid and start time (``/proc/<pid>/stat`` field 22, clock ticks since boot)."""

    pid: int
    start: int


def _stat(pid: int) -> tuple[int, int] | None:
    """Return ``(ppid, start)`` of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may contain spaces or ')'
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def process_tree(root: int) -> list[Proc]:
    """Return ``root`` and all its living descendants (by parent pid), ``root`` first."""
    children: dict[int, list[int]] = {}
    start: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        st = _stat(pid)
        if st is None:
            continue
        children.setdefault(st[0], []).append(pid)
        start[pid] = st[1]
    out: list[Proc] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in start:
            out.append(Proc(pid, start[pid]))
        todo.extend(children.get(pid, ()))
    return out


def _same(proc: Proc) -> bool:
    st = _stat(proc.pid)
    return st is not None and st[1] == proc.start


def signal_all(procs: list[Proc], sig: int) -> int:
    """Send ``sig`` to every process of ``procs`` that is still the same process; return how many."""
    sent = 0
    for proc in procs:
        if not _same(proc):
            continue
        try:
            os.kill(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            continue
        sent += 1
    return sent


def alive(procs: list[Proc]) -> bool:
    """Whether any process of ``procs`` is still running (zombies count as gone)."""
    for proc in procs:
        if not _same(proc):
            continue
        try:
            with open(f"/proc/{proc.pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z":
            return True
    return False

"""Confine each task's processes in a cgroup of its own, where the machine lets the agent create one.

A process cannot leave its cgroup by forking, by ``setsid`` or by losing its parent: only a write to
another cgroup's ``cgroup.procs``, which needs write access there, moves it. So a task's cgroup holds
every process the task started, whatever they did, and killing the cgroup ends them all; this is what
Slurm's ``proctrack/cgroup`` does for a job. Where no cgroup can be created, the subreaper of
:mod:`elastic.pool.reaper` is what keeps a task's processes findable (it is in place in both cases).

Layout. At its start the agent looks for a cgroup it may write: its own (cgroup v2, or the v1 ``freezer``
hierarchy), which is the job's or step's cgroup under Slurm (nested, so the job's limits still hold), or
the root when it runs as root on a machine without a batch system. There it creates
``elastic-PID-START`` (its pid and start time: a stale one is recognised by a pid that is gone or was
reused); each task gets a child cgroup of it: a fresh child (``cPID-1``) moves itself there before its
task runs, a warm worker (``wPID-1``) when it starts, for the tasks it runs one at a time. Whatever a task
starts is born there:

- after a task that left a child (the worker is a subreaper: whatever a task leaves is a child of it or
  below one, so one ``waitid`` tells), a warm worker kills every other member of its cgroup (nothing
  leaves it, so SIGKILL to each until only the worker is left ends them all); it stays in the one cgroup,
  since moving a process between cgroups costs about a millisecond, too much per task;
- before it exits a fresh child moves itself back, kills everything in its cgroup (``cgroup.kill``; on
  kernels before 5.14 and on the v1 freezer: freeze, SIGKILL every member, thaw, until it is empty) and
  removes the cgroup;
- when the agent dies, even by SIGKILL, each worker's and child's watcher (the life pipe closes) kills its
  task's cgroup before killing its own process group;
- when the agent stops it ends and removes its whole cgroup, including what a killed worker left;
- an agent that starts ends and removes the stale ``elastic-*`` cgroups of agents that are gone (their
  processes were killed together with their workers, e.g. a whole tree sent SIGKILL).

Set ``ELASTIC_TASK_CGROUPS=off`` in the agent's environment to use the subreaper alone.

Not covered: a task that may write another cgroup's ``cgroup.procs`` (root) can move itself out, as it
could leave Slurm's job cgroup.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

from elastic.pool.reaper import _stat

__all__ = ["ENV", "PREFIX", "CgroupTree", "Confinement", "agent_tree", "end_agents", "end_cgroup", "end_left"]

logger = logging.getLogger(__name__)

ENV = "ELASTIC_TASK_CGROUPS"
"""Environment variable of the agent: ``off`` confines tasks with the subreaper alone (default ``auto``)."""

PREFIX = "elastic-"
"""Name prefix of an agent's cgroup (``elastic-PID-START``)."""

_EMPTY_WAIT = 5.0
"""Seconds :func:`end_cgroup` waits for the killed members of a cgroup to leave it."""

_BUSY_WAIT = 0.2
"""Seconds :func:`end_cgroup` retries removing a cgroup with no member left that the kernel says is busy
(a member that exited and is not reaped yet; its parent may be the caller, so not longer)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CgroupTree:
    """Where an agent confines its tasks.

    Attributes
    ----------
    version : int
        2 (cgroup v2) or 1 (the cgroup v1 ``freezer`` hierarchy).
    home : Path
        The cgroup the agent runs in; workers and children return there after a task.
    root : Path
        The agent's own cgroup, ``home/elastic-PID-START``, parent of one cgroup per task.
    """

    version: int
    home: Path
    root: Path

    def to_arg(self) -> str:
        """Return the tree as one command-line argument (see :meth:`from_arg`)."""
        return json.dumps([self.version, str(self.home), str(self.root)])

    @classmethod
    def from_arg(cls, arg: str) -> CgroupTree:
        """Parse :meth:`to_arg`'s text."""
        version, home, root = json.loads(arg)
        return cls(int(version), Path(home), Path(root))


def _mounts() -> dict[str, Path]:
    """Mount points of cgroup v2 (key ``"2"``) and of the v1 freezer (key ``"1"``), from mountinfo."""
    found: dict[str, Path] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return found
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if rest[0] == "cgroup2":
            found.setdefault("2", point)
        elif rest[0] == "cgroup" and "freezer" in rest[2].split(","):
            found.setdefault("1", point)
    return found


def _own_cgroups() -> dict[str, str]:
    """Return this process' cgroup path in v2 (key ``"2"``) and in the v1 freezer hierarchy (key ``"1"``)."""
    found: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            found["2"] = parts[2]
        elif "freezer" in parts[1].split(","):
            found["1"] = parts[2]
    return found


def _start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/PID/stat``), None when it is gone or dead.

    A zombie (killed, not reaped yet) counts as gone.
    """
    stat = _stat(pid)  # the subreaper's reader of /proc/PID/stat
    return None if stat is None or stat[2] in (b"Z", b"X") else str(stat[1])


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path / "cgroup.procs", os.W_OK)


def _members(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _homes() -> list[tuple[str, Path]]:
    """Return this process' cgroup directories: v2 first (key ``"2"``), then the v1 freezer's."""
    mounts, own = _mounts(), _own_cgroups()
    return [(key, mounts[key] / own[key].lstrip("/")) for key in ("2", "1") if key in mounts and key in own]


def end_agents(agents: list[tuple[int, int]]) -> int:
    """End and remove the cgroups of agents ``(pid, start time)`` killed with their workers; how many.

    For a batch system that has just sent SIGKILL to a job's every process (the mock and local backends),
    as Slurm's ``proctrack/cgroup`` removes a job's cgroup: nothing a task started survives, and no cgroup
    is left behind. Agents started in this process' cgroup only (the others are left to :func:`clean_stale`).
    """
    ended = 0
    for key, home in _homes():
        for pid, start in agents:
            root = home / f"{PREFIX}{pid}-{start}"
            if root.is_dir():
                end_cgroup(root, int(key))
                ended += 1
    return ended


def agent_tree() -> CgroupTree | None:
    """Create this agent's cgroup and return it, after removing stale ones; None when it cannot.

    Looks at the agent's own cgroup in v2, then in the v1 freezer hierarchy; uses the first it may write.
    ``ELASTIC_TASK_CGROUPS=off`` returns None at once.
    """
    setting = os.environ.get(ENV, "auto").strip().lower()
    if setting in ("off", "0", "no", "false"):
        logger.info("cgroups: %s=%s, tasks are confined by the subreaper alone", ENV, setting)
        return None
    if setting not in ("auto", "", "on", "1", "yes", "true"):
        logger.warning("cgroups: %s=%r is not auto or off; taken as auto", ENV, setting)
    why = "no cgroup v2 or v1 freezer hierarchy is mounted"
    for key, home in _homes():
        if not _writable(home):
            why = f"{home} is not writable by this user (no delegated cgroup)"
            continue
        clean_stale(home, int(key))
        start = _start_time(os.getpid())
        root = home / f"{PREFIX}{os.getpid()}-{start}"
        try:
            root.mkdir(exist_ok=True)
        except OSError as exc:
            why = f"cannot create {root}: {exc.strerror}"
            continue
        if not _writable(root):
            with contextlib.suppress(OSError):
                root.rmdir()
            why = f"{root} is not writable"
            continue
        logger.info("cgroups: each task runs in a cgroup of its own under %s (v%s)", root, key)
        return CgroupTree(int(key), home, root)
    logger.info("cgroups: tasks are confined by the subreaper alone (%s)", why)
    return None


def clean_stale(home: Path, version: int) -> int:
    """End and remove the ``elastic-PID-START`` cgroups in ``home`` of agents that are gone; how many."""
    ended = 0
    try:
        entries = [e for e in os.scandir(home) if e.name.startswith(PREFIX) and e.is_dir()]
    except OSError:
        return 0
    for entry in entries:
        pid, _, start = entry.name[len(PREFIX) :].partition("-")
        if not pid.isdigit() or (start and _start_time(int(pid)) == start):
            continue  # a live agent's (or not ours)
        killed = end_cgroup(Path(entry.path), version)
        # an empty one is housekeeping (an agent killed before it removed its tree); processes left
        # running by a gone agent are worth a warning
        logger.log(
            logging.WARNING if killed else logging.INFO,
            "cgroups: removed the stale %s of a gone agent (%d processes)",
            entry.path,
            killed,
        )
        ended += 1
    return ended


def end_cgroup(cgroup: Path, version: int = 2) -> int:
    """Kill every process in ``cgroup`` and its descendants and remove them all; return how many killed.

    Uses ``cgroup.kill`` where the kernel has it (v2, Linux 5.14+), else freezes the cgroup, sends SIGKILL
    to each member and thaws it, until it is empty. A cgroup that is already gone counts as ended.
    """
    if not cgroup.is_dir():
        return 0
    killed = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(cgroup):
            if entry.is_dir(follow_symlinks=False):
                killed += end_cgroup(Path(entry.path), version)
    deadline = time.monotonic() + _EMPTY_WAIT
    members = _members(cgroup)
    killed += len(members)
    kill_file = cgroup / "cgroup.kill"
    while members and time.monotonic() < deadline:
        if version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        else:
            _freeze(cgroup, version, True)
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            _freeze(cgroup, version, False)
        time.sleep(0.005)
        members = _members(cgroup)
    retry_until = time.monotonic() + _BUSY_WAIT
    while True:
        try:
            cgroup.rmdir()
        except OSError as exc:
            if exc.errno == errno.EBUSY and not members:
                # No member left, yet busy: a process that exited is not released yet (its parent has not
                # reaped it, and that parent may be the caller). Try again briefly, then leave the empty
                # cgroup to the next agent's sweep of stale ones (clean_stale): nothing runs in it.
                if time.monotonic() < retry_until:
                    time.sleep(0.01)
                    members = _members(cgroup)
                    continue
                logger.info("cgroups: %s is empty but not released yet; left to the next sweep", cgroup)
            else:
                logger.warning(
                    "cgroups: cannot remove %s (%s); members left: %s", cgroup, exc.strerror, members
                )
        return killed


def end_left(tree: CgroupTree | None, prefix: str | None = None) -> None:
    """End the task cgroups named ``prefix...`` (a dead worker's or child's); None: the agent's whole tree."""
    if tree is None:
        return
    if prefix is None:
        end_cgroup(tree.root, tree.version)
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir(tree.root):
            if entry.name.startswith(prefix):
                end_cgroup(Path(entry.path), tree.version)


def _freeze(cgroup: Path, version: int, frozen: bool) -> None:
    """Freeze or thaw ``cgroup`` (so that nothing forks while its members are killed), when possible."""
    if version == 2:
        path, value = cgroup / "cgroup.freeze", ("1" if frozen else "0")
    else:
        path, value = cgroup / "freezer.state", ("FROZEN" if frozen else "THAWED")
    with contextlib.suppress(OSError):
        path.write_text(value)


class Confinement:
    """A worker's or fresh child's side: run each task in a cgroup of its own (see the module docstring).

    Parameters
    ----------
    tree : CgroupTree
        The agent's tree.
    prefix : str
        Start of the names of this process' task cgroups (``wPID-`` for a worker, ``cPID-`` for a child):
        the N-th task's is ``prefixN``.
    """

    def __init__(self, tree: CgroupTree, prefix: str) -> None:
        self.tree = tree
        self.prefix = prefix
        self.current: Path | None = None
        self._count = 0
        self._lock = threading.Lock()

    def enter(self) -> bool:
        """Create the next task's cgroup and move this process into it; False (logged) when it cannot."""
        with self._lock:
            self._count += 1
            cgroup = self.tree.root / f"{self.prefix}{self._count}"
            try:
                cgroup.mkdir()
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            except OSError as exc:
                logger.warning("cgroups: cannot confine the task in %s (%s): subreaper only", cgroup, exc)
                with contextlib.suppress(OSError):
                    cgroup.rmdir()
                return False
            self.current = cgroup
            return True

    def clear(self) -> int:
        """Kill every process of the current cgroup but this one; return how many (a warm worker's).

        A warm worker stays in its cgroup and runs one task at a time: what is left there after the task
        was started by it. Nothing leaves the cgroup, so SIGKILL to each member until only this process
        is left ends every one, even one that forks meanwhile. A single read when nothing was left.
        """
        with self._lock:
            if self.current is None:
                return 0
            me, killed = os.getpid(), 0
            deadline = time.monotonic() + _EMPTY_WAIT
            while True:
                others = [p for p in _members(self.current) if p != me and _start_time(p) is not None]
                if not others or time.monotonic() > deadline:
                    return killed
                for pid in others:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                        killed += 1

    def end(self) -> int:
        """Move this process home, then kill and remove the task's cgroup; return how many were killed."""
        with self._lock:
            cgroup, self.current = self.current, None
            if cgroup is None:
                return 0
            try:
                (self.tree.home / "cgroup.procs").write_text(str(os.getpid()))
            except OSError as exc:
                # Killing the cgroup would kill this process too; the agent ends the cgroup later.
                logger.warning("cgroups: cannot leave %s (%s)", cgroup, exc)
                return 0
            return end_cgroup(cgroup, self.tree.version)

    def end_orphaned(self) -> None:
        """End the task's cgroup (the life pipe closed); if the agent is dead, remove its cgroup if empty.

        The last worker or child of a SIGKILLed agent to get here removes the agent's cgroup; when they
        all die with it, the next agent's start does (:func:`clean_stale`).
        """
        self.end()
        pid, _, start = self.tree.root.name[len(PREFIX) :].partition("-")
        if pid.isdigit() and _start_time(int(pid)) != start:
            with contextlib.suppress(OSError):
                self.tree.root.rmdir()

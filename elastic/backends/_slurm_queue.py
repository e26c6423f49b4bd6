"""Reading a partition's queue from ``squeue`` into a :class:`~elastic.simulator.snapshot.QueueSnapshot`.

The Slurm backend's start-time estimate is the same simulation the mock backend runs
(:mod:`elastic.simulator.snapshot`); this module turns what any user may run, ``squeue -h -p PART -o
SNAPSHOT_FORMAT`` for every user's jobs, into its input. Pure functions, tested on captured text.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable

from elastic.backends import _slurm_parse as parse
from elastic.batch import DependencyKind, JobState, PendingReason
from elastic.errors import BackendError
from elastic.simulator.snapshot import PendingJob, QueueSnapshot, RunningJob

__all__ = [
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_STATES",
    "expand_hostlist",
    "parse_allocated",
    "parse_dependencies",
    "parse_snapshot",
    "queue_signature",
]

SNAPSHOT_FORMAT = "%i|%T|%r|%C|%D|%l|%Q|%S|%h|%E|%N"
"""``squeue -o`` format read by :func:`parse_snapshot` (id, state, reason, CPUs, nodes, time limit,
priority, start or begin time, oversubscribe, remaining dependencies, node list)."""

SNAPSHOT_STATES = "PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED"
"""``squeue -t`` states a snapshot reads: jobs that wait or hold cores."""

SIGNATURE_FORMAT = "%i|%T|%l|%r"
"""``squeue -o`` format read by :func:`queue_signature` (id, state, time limit, reason)."""

_HELD_REASONS = frozenset({"Dependency", "BeginTime", "JobHeldUser", "JobHeldAdmin"})


def queue_signature(lines: Iterable[str]) -> str:
    """Return a digest of a partition's queue that changes where the start estimate's input may have.

    ``lines`` are ``squeue -h -p PART -t SNAPSHOT_STATES -o SIGNATURE_FORMAT``: a job submitted, started,
    ended or cancelled, a time limit changed, or a job released from its hold (dependency, begin time,
    user or admin hold) changes it, as the mock backend's ``queue_version``; priorities that age, and
    pending reasons that move between ``Priority`` and ``Resources`` at every scheduler pass, do not.

    Examples
    --------
    >>> a = queue_signature(["7|PENDING|10:00|Priority", "5|RUNNING|1:00:00|None"])
    >>> a == queue_signature(["5|RUNNING|1:00:00|None", "7|PENDING|10:00|Resources"])
    True
    >>> a == queue_signature(["5|RUNNING|1:00:00|None"])
    False
    """
    rows = []
    for line in lines:
        fields = line.strip().split("|")
        if len(fields) < 4:
            continue
        job, state, limit, reason = fields[:4]
        rows.append(f"{job}|{state}|{limit}|{'held' if reason in _HELD_REASONS else ''}")
    return hashlib.blake2b("\n".join(sorted(rows)).encode(), digest_size=16).hexdigest()


_DEPENDENCY = re.compile(r"(\w+):(\d+)(?:\+\d+)?\((\w+)\)")
_RANGE = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?([^,]*)")


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm node list (``n[1-3,7],gpu05``) into names.

    >>> expand_hostlist("n[1-3,7],x[08-09]")
    ['n1', 'n2', 'n3', 'n7', 'x08', 'x09']

    Raises
    ------
    BackendError
        A range is not ``A-B`` of integers.
    """
    names: list[str] = []
    text = text.strip()
    pos = 0
    while pos < len(text):
        match = _RANGE.match(text, pos)
        assert match is not None  # every group is optional
        prefix, ranges, suffix = match.groups()
        if ranges is None:
            if prefix:
                names.append(prefix + suffix)
        else:
            for part in ranges.split(","):
                lo, _, hi = part.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    raise BackendError(f"cannot read Slurm node list {text!r}")
                for i in range(int(lo), int(hi or lo) + 1):
                    names.append(f"{prefix}{str(i).zfill(len(lo))}{suffix}")
        pos = match.end() + 1
    return names


def parse_dependencies(text: str) -> tuple[tuple[DependencyKind, str], ...] | None:
    """Unfulfilled dependencies in ``squeue %E`` (``afterok:12(unfulfilled),after:13(unfulfilled)``).

    None when one can never be satisfied, or is of a kind the simulation does not model (``singleton``,
    ``aftercorr``, ...): such a job is left out of the snapshot.

    >>> parse_dependencies("afterany:12(unfulfilled),afterok:13(failed)") is None
    True
    >>> parse_dependencies("afterok:12(unfulfilled)")
    ((<DependencyKind.AFTEROK: 'afterok'>, '12'),)
    """
    text = text.strip()
    if text in ("", "(null)"):
        return ()
    out: list[tuple[DependencyKind, str]] = []
    for part in re.split(r"[,?]", text):
        match = _DEPENDENCY.fullmatch(part.strip())
        if match is None or match.group(3) != "unfulfilled":
            return None
        try:
            out.append((DependencyKind(match.group(1)), match.group(2)))
        except ValueError:
            return None
    return tuple(out)


def parse_allocated(line: str) -> int:
    """Allocated CPUs from ``sinfo -h -p PART -o %C`` (``allocated/idle/other/total``).

    >>> parse_allocated("12/4/0/16")
    12
    """
    head = line.strip().split("/")[0]
    if not head.isdigit():
        raise BackendError(f"cannot read sinfo CPU counts {line!r}; expected A/I/O/T")
    return int(head)


def parse_snapshot(lines: Iterable[str], *, now: float, nodes: int, cores_per_node: int) -> QueueSnapshot:
    """Build the snapshot of a partition from ``squeue -h -t SNAPSHOT_STATES -o SNAPSHOT_FORMAT`` lines.

    Running jobs end at start + time limit (an unlimited one never in the estimate's horizon); pending
    jobs are ordered by priority (highest first, then by id), with their unfulfilled dependencies
    (:func:`parse_dependencies`; a job with one that never will be is left out); those held by
    ``--begin`` keep their begin time; ``OverSubscribe=NO`` (``--exclusive``) jobs
    take whole nodes. Running jobs' cores are placed on their listed nodes, spread evenly.

    Raises
    ------
    BackendError
        A line does not have the expected fields.
    """
    running: list[RunningJob] = []
    pending: list[tuple[float, int, PendingJob]] = []
    node_index: dict[str, int] = {}
    placements: list[list[str]] = []
    for line in lines:
        if not line.strip():
            continue
        fields = line.rstrip("\n").split("|")
        if len(fields) != 11:
            raise BackendError(f"cannot read squeue line {line!r}; expected format {SNAPSHOT_FORMAT!r}")
        job_id, code, reason, cpus, n_nodes, limit, prio, start, share, depends, nodelist = fields
        try:
            state = parse.parse_state(code)
            cores, width = int(cpus), int(n_nodes)
            walltime = parse.parse_duration(limit)
            priority = float(prio) if prio.strip() not in ("", "N/A") else 0.0
        except ValueError as exc:
            raise BackendError(f"cannot read squeue line {line!r}: {exc}") from None
        whole = width if share.strip().upper() == "NO" and cores_per_node > 1 else 0
        if state is JobState.RUNNING:
            began = parse.parse_time(start)
            end = math.inf if began is None or math.isinf(walltime) else began + walltime
            names = expand_hostlist(nodelist) if cores_per_node > 1 else []
            for name in names:
                node_index.setdefault(name, len(node_index))
            placements.append(names)
            running.append(RunningJob(job_id, cores, end, whole))
        elif state is JobState.PENDING:
            why = parse.parse_reason(reason, state)
            after = parse_dependencies(depends) if why is PendingReason.DEPENDENCY else ()
            if why is PendingReason.DEPENDENCY_NEVER_SATISFIED or after is None:
                continue
            begin = parse.parse_time(start) if why is PendingReason.BEGIN_TIME else None
            wall = walltime if math.isfinite(walltime) else 366 * 86400.0
            pid = int(job_id.split("_")[0]) if job_id.split("_")[0].isdigit() else 0
            pending.append((-priority, pid, PendingJob(job_id, cores, wall, whole, begin, after)))
    if cores_per_node > 1 and 0 < len(node_index) <= nodes:
        running = [
            RunningJob(r.job_id, r.cores, r.end, r.whole, _even(r.cores, [node_index[n] for n in names]))
            for r, names in zip(running, placements, strict=True)
        ]
    pending.sort(key=lambda p: (p[0], p[1]))
    return QueueSnapshot(now, nodes, cores_per_node, tuple(running), tuple(p for _, _, p in pending))


def _even(cores: int, nodes: list[int]) -> tuple[tuple[int, int], ...]:
    """``cores`` spread evenly over ``nodes`` (the first ones take the remainder)."""
    if not nodes:
        return ()
    share, extra = divmod(cores, len(nodes))
    return tuple((n, share + (i < extra)) for i, n in enumerate(nodes) if share + (i < extra))

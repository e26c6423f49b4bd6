"""The start-time estimate both backends give: our queue simulator run on a snapshot of the queue.

Why this estimate, and not ``sbatch --test-only``'s. Slurm 22.05 answers ``--test-only`` with
``job_start_data`` (``src/slurmctld/job_scheduler.c``): the select plugin's ``_will_run_test``
(``src/plugins/select/cons_common/job_test.c``) removes *running* jobs at their time limits, a few at a
time (ends grouped in 30 s windows that widen after each try), until the job fits; backfill is not run
and pending jobs take no cores there. ``_delayed_job_start_time`` then adds, for every pending job of
the partition whose priority is at least the new job's, ``max(cpus, nodes x cpus per node) x time
limit`` divided by the partition's CPUs: one area term, blind to shape. Measured on the local
22.05 cluster (4 nodes x 4 cores, a 16-core job running 10 min more, pending a 1-core 60-min and a
16-core 30-min job): ``--test-only`` answered 45 min for both a 1-core 5-min probe and a 16-core
10-min one (10 + (4 x 60 + 16 x 30) / 16, to the second), where Slurm's own backfill plan
(``squeue --start``) starts the 1-core probe after 10 min and the 16-core one after 100. So
``--test-only`` errs both ways on an ordinary queue, and emulating it on the mock would make every
simulated comparison plan with that error.

Instead both backends take a snapshot of the queue with ordinary user commands (``squeue`` on Slurm,
the engine's own state on the mock) and run the same simulation on it (:func:`estimate_start`):
running jobs hold their cores until their time limit (never their true runtime, which no real
scheduler knows, and never earlier for the caller's own jobs), pending jobs run for their full time
limit in priority order under the queue's policy, no further job arrives, and the probe joins the tail
of the queue. Jobs waiting for a dependency wait for it in the simulation too (a running parent ends
at its limit, taken as COMPLETED); one whose parent is not in the snapshot is left out.
The limits: a site that hides other users' jobs from ``squeue`` (``PrivateData=jobs``) leaves the
snapshot without them, and the Slurm backend then falls back to ``--test-only``
(:meth:`~elastic.backends.slurm.SlurmBackend.expected_start`); per-node placement on Slurm is read from
the node list, cores spread evenly over a job's nodes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elastic.batch import DependencyKind
from elastic.errors import ConfigError
from elastic.simulator import dependencies as _deps
from elastic.simulator.jobs import CANCELLED, PENDING, RUNNING, DepRecord

if TYPE_CHECKING:
    from elastic.simulator.base import QueuePolicy
    from elastic.simulator.engine import Engine

__all__ = ["PendingJob", "QueueSnapshot", "RunningJob", "estimate_start", "snapshot_of"]


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding cores in a :class:`QueueSnapshot`.

    Attributes
    ----------
    job_id : str
        The batch system's id.
    cores : int
        Cores it holds.
    end : float
        When its time limit ends (start + time limit); the estimate frees its cores then.
    whole : int
        Whole nodes it holds exclusively (0: cores only).
    placement : tuple of (int, int)
        ``(node index, cores)`` it holds; empty when nodes are not tracked.
    """

    job_id: str
    cores: int
    end: float
    whole: int = 0
    placement: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job waiting in a :class:`QueueSnapshot` (eligible, or held by a begin time or dependencies).

    Attributes
    ----------
    job_id : str
        The batch system's id.
    cores : int
        Cores it asks for.
    walltime : float
        Its time limit in seconds; the estimate runs it that long.
    whole : int
        Whole nodes it asks for (0: cores anywhere).
    begin : float or None
        Not before this time.
    after : tuple of (DependencyKind, str)
        Its dependencies not yet satisfied, on jobs of the snapshot (by id).
    """

    job_id: str
    cores: int
    walltime: float
    whole: int = 0
    begin: float | None = None
    after: tuple[tuple[DependencyKind, str], ...] = ()


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """What a user can read of one partition's queue at one time.

    Attributes
    ----------
    now : float
        When it was taken (backend clock).
    nodes, cores_per_node : int
        The partition's size.
    running : tuple of RunningJob
        Jobs holding cores.
    pending : tuple of PendingJob
        Waiting jobs, highest priority first.
    """

    now: float
    nodes: int
    cores_per_node: int
    running: tuple[RunningJob, ...]
    pending: tuple[PendingJob, ...]


def snapshot_of(engine: Engine, *, job_id: Mapping[int, str] | None = None) -> QueueSnapshot:
    """Return the snapshot of ``engine``'s queue that ``squeue`` would show (the mock backend's).

    Parameters
    ----------
    engine : Engine
        The live engine (not modified).
    job_id : mapping of int to str, default None
        Job index -> id to name it by; the index as a string where absent.

    Returns
    -------
    QueueSnapshot
        Running jobs end at start + walltime (never at their true runtime); pending jobs in rank order
        with their unsatisfied dependencies (one that can never be satisfied is left out).
    """
    jobs = engine.jobs
    cl = engine.cluster
    names = job_id or {}
    running = tuple(
        RunningJob(
            names.get(j, str(j)),
            jobs.cores[j],
            jobs.start[j] + jobs.walltime[j],
            jobs.whole[j],
            tuple(cl.placement(j)),
        )
        for _, j in engine.running
    )
    held = (j for j in engine.held if j not in jobs.dep_never)
    waiting = sorted([*engine.queue, *held], key=jobs.rank.__getitem__)
    pending = tuple(
        PendingJob(
            names.get(j, str(j)),
            jobs.cores[j],
            jobs.walltime[j],
            jobs.whole[j],
            jobs.begin[j] if jobs.begin[j] > engine.now else None,
            tuple((r.kind, names.get(r.parent, str(r.parent))) for r in jobs.deps.get(j, ()) if not r.status),
        )
        for j in waiting
    )
    return QueueSnapshot(engine.now, cl.nodes, cl.cores_per_node, running, pending)


def estimate_start(
    snapshot: QueueSnapshot,
    *,
    cores: int,
    walltime: float,
    nodes: int | None = None,
    begin: float | None = None,
    after: Sequence[tuple[DependencyKind, str]] = (),
    policy: str | QueuePolicy[Engine] = "easy",
    priority: str = "basic",
) -> float | None:
    """Return when a job like this would start if submitted now to the queue ``snapshot`` shows.

    Parameters
    ----------
    snapshot : QueueSnapshot
        The queue.
    cores, walltime, nodes, begin
        The probe, as for :meth:`Engine.submit`.
    after : sequence of (DependencyKind, str)
        Dependencies on jobs of ``snapshot`` (by id); the caller settles those on jobs no longer in it.
    policy : str or QueuePolicy, default "easy"
        The scheduler to simulate (a fresh instance; names as :func:`~elastic.simulator.base.make_policy`):
        Slurm's ``sched/backfill`` plans every pending job (``conservative``), the mock names its own.
    priority : str, default "basic"
        How a job held by its begin time ranks once eligible (:mod:`elastic.simulator.priority`).

    Returns
    -------
    float or None
        Simulated start, or None when the job could never start.

    Raises
    ------
    GeometryError
        The probe can never fit the partition.
    ConfigError
        ``after`` names a job the snapshot does not hold.
    """
    global _LAST_TRAJECTORY
    if isinstance(policy, str) and policy == "easy" and begin is None and not after:
        last = _LAST_TRAJECTORY
        if last is not None and last[0] is snapshot and last[1] == priority:
            trajectory = last[2]  # the same snapshot object again: not even hashed
        else:
            trajectory = None
            kept = last[2] if last is not None and last[1] == priority else None
            if kept is not None and last is not None and _same_queue(last[0], snapshot):
                trajectory = kept.shifted(snapshot.now)  # the same queue read later: no job ended since
            if trajectory is None:
                trajectory = _easy_trajectory(snapshot, priority)
            _LAST_TRAJECTORY = (snapshot, priority, trajectory)
        if trajectory is not None:  # the same answer, read off one simulation of the queue per snapshot
            return trajectory.start(cores, walltime, nodes)
    return _simulated_start(
        snapshot,
        cores=cores,
        walltime=walltime,
        nodes=nodes,
        begin=begin,
        after=after,
        policy=policy,
        priority=priority,
    )


def _simulated_start(
    snapshot: QueueSnapshot,
    *,
    cores: int,
    walltime: float,
    nodes: int | None,
    begin: float | None,
    after: Sequence[tuple[DependencyKind, str]],
    policy: str | QueuePolicy[Engine],
    priority: str,
) -> float | None:
    """:func:`estimate_start` by simulating the snapshot's queue with the probe in it."""
    copy, index = _copy(snapshot, policy, priority)
    copy.check_geometry(cores, nodes)
    now = snapshot.now
    cj = copy.jobs
    mapped: list[tuple[DependencyKind, int]] = []
    for kind, parent in after:
        if parent not in index:
            raise ConfigError(f"dependency on job {parent!r}, which the queue snapshot does not hold")
        k = index[parent]
        if DepRecord(kind, k).evaluate(cj.state[k], cj.state[k] == RUNNING) != 1:
            mapped.append((kind, k))
    probe = copy.submit(cores=cores, nodes=nodes, walltime=walltime, dependencies=mapped, begin=begin)
    while cj.state[probe] == PENDING and copy.step():
        pass
    start = cj.start[probe]
    return None if math.isnan(start) else max(start, now)


class _Trajectory:
    """The queue of one snapshot simulated once under EASY, without a probe, to tell when a probe starts.

    Under :class:`~elastic.simulator.easy.EasyBackfill` a probe that ranks last and never has a job
    ranked after it changes nothing for the jobs ahead of it until it starts: it is looked at last in
    every pass, after every start the pass makes, and its reservation (once it is the head) holds back no
    one. So the jobs ahead run the same with it or without it, and it starts at the first pass where
    EASY would start it given the state that pass leaves: where nothing is left ahead of it, once it
    fits; else, as a backfill, once it fits the free cores and ends by the head's shadow time or fits
    its extra cores. This holds for a snapshot with no job held by a dependency or a begin time (such a
    job joins the queue later, perhaps behind the probe): :func:`_easy_trajectory` builds none for it.

    Why: the planner asks the scheduler's estimate for many geometries of one queue (each request, each
    piece it may lower); simulating the queue once per geometry was most of a long simulated run's CPU
    (a 5,000-stage random DAG: 9 ms an estimate, 94 of 118 s). Each answer is now a scan of the passes.
    The same answers as the simulation with the probe in it, which a hypothesis test checks
    (``tests/simulator/test_easy_trajectory.py``).
    """

    __slots__ = ("_engine", "_passes", "_settled")

    def __init__(
        self, engine: Engine, passes: list[tuple[float, bool, int, int, float, int, bool]], settled: bool
    ) -> None:
        self._engine = engine  # its partition answers the probe's geometry
        self._passes = passes  # (time, nothing ahead, free cores, idle nodes, shadow, extra, whole-node head)
        self._settled = settled  # its first pass started no job

    def shifted(self, now: float) -> _Trajectory | None:
        """Return this trajectory for the same queue read at ``now``, or None where it may differ.

        The same queue (every job, limit and rank) read later, before the first job of the simulation
        ends: where the first pass started nothing, a pass at ``now`` starts nothing either (the head
        still does not fit the same free cores; a backfill must now end by the same shadow time from
        later) and leaves the same free cores, shadow and extra cores; every later pass is at a job's
        end, the same absolute time from either. So the passes are the same but the first one's time.
        Why: on a busy queue most decisions read the queue again at a later time with no job started
        or ended since (a 5,000-stage random DAG, busy synthetic queue: 11,330 snapshots of 1,144
        queue states). ``tests/simulator/test_easy_trajectory.py`` checks it against the simulation.
        """
        passes = self._passes
        first = passes[0][0]
        if not self._settled or now < first or (len(passes) > 1 and now >= passes[1][0]):
            return None
        return _Trajectory(self._engine, [(now, *passes[0][1:]), *passes[1:]], True)

    def start(self, cores: int, walltime: float, nodes: int | None) -> float | None:
        """Return when a probe of this geometry would start (as :func:`estimate_start`)."""
        cores, whole = self._engine.check_geometry(cores, nodes)
        walltime = float(walltime)
        for t, alone, free, idle, shadow, extra, node_head in self._passes:
            fits = cores <= free and (not whole or idle >= whole)
            if fits and (alone or t + walltime <= shadow or (cores <= extra and not node_head)):
                return t
        return None


_LAST_TRAJECTORY: tuple[QueueSnapshot, str, _Trajectory | None] | None = None
"""The last snapshot asked under EASY, by identity (hashing a snapshot of hundreds of jobs costs too)."""


@functools.lru_cache(maxsize=4)
def _easy_trajectory(snapshot: QueueSnapshot, priority: str) -> _Trajectory | None:
    """Return the snapshot's queue simulated under EASY (:class:`_Trajectory`), or None where it cannot say.

    Cached: the answers of one snapshot (its time included) are read off one simulation.
    """
    from elastic.simulator.easy import EasyBackfill

    copy, _ = _copy(snapshot, "easy", priority)
    policy = copy.policy
    if copy.held or type(policy) is not EasyBackfill:
        return None
    cl = copy.cluster
    whole = copy.jobs.whole
    queue = copy.queue
    passes: list[tuple[float, bool, int, int, float, int, bool]] = []

    def after_pass() -> None:
        if queue:
            shadow, extra = policy.backfill_window()
            passes.append((copy.now, False, cl.free, cl.idle_nodes, shadow, extra, whole[queue[0]] != 0))
        else:
            passes.append((copy.now, True, cl.free, cl.idle_nodes, math.inf, 0, False))

    running = len(copy.running)
    copy._schedule()  # the pass a probe's submission makes
    after_pass()
    settled = len(copy.running) == running
    while copy.step():  # every step ends a job here (each runs to its limit), so each makes a pass
        after_pass()
    return _Trajectory(copy, passes, settled)


def _same_queue(a: QueueSnapshot, b: QueueSnapshot) -> bool:
    """Whether ``b`` shows the same partition and jobs as ``a`` (their times aside), read no earlier."""
    return (
        b.now >= a.now
        and a.nodes == b.nodes
        and a.cores_per_node == b.cores_per_node
        and (a.running is b.running or a.running == b.running)
        and (a.pending is b.pending or a.pending == b.pending)
    )


def _copy(
    snapshot: QueueSnapshot, policy: str | QueuePolicy[Engine], priority: str
) -> tuple[Engine, dict[str, int]]:
    """Return an engine holding the snapshot's queue at its time (no probe yet), and its jobs by id."""
    from elastic.simulator.engine import Engine

    copy = Engine(
        nodes=snapshot.nodes, cores_per_node=snapshot.cores_per_node, policy=policy, priority=priority
    )
    now = snapshot.now
    copy._now = now
    cj = copy.jobs
    ccl = copy.cluster
    index: dict[str, int] = {}

    def add(job_id: str, cores: int, whole: int, walltime: float, runtime: float, begin: float) -> int:
        k = cj.append(
            job_id=job_id,
            name=None,
            user=None,
            cores=cores,
            whole=whole,
            walltime=walltime,
            runtime=runtime,
            submit=now,
            begin=begin,
            background=True,
            notify=False,
        )
        cj.rank[k] = float(k)
        index[job_id] = k
        return k

    for r in sorted(snapshot.running, key=lambda r: r.end):
        end = max(now, r.end)
        k = add(r.job_id, r.cores, r.whole, end - now, end - now, -math.inf)
        cj.state[k] = RUNNING
        cj.start[k] = now
        cj.est_end[k] = cj.plan_end[k] = end
        cj.plan_state[k] = 2
        copy.running.append((end, k))
        copy._push_end(k, end)
        ccl.free -= r.cores
        if ccl.per_node:
            placed = list(r.placement)
            if not placed or any(not 0 <= n < ccl.nodes or c > ccl.node_free[n] for n, c in placed):
                placed = _spread(ccl.node_free, r.cores, r.whole, ccl.cores_per_node)
            for n, c in placed:
                ccl.node_free[n] -= c
            ccl._placement[k] = placed
    if ccl.free < 0:
        raise ConfigError(f"queue snapshot holds more running cores than the partition's {ccl.total}")
    if ccl.per_node:
        ccl.idle_nodes = sum(f == ccl.cores_per_node for f in ccl.node_free)
    else:
        ccl.idle_nodes = ccl.free
    waiting = []
    for p in snapshot.pending:
        k = add(p.job_id, p.cores, p.whole, p.walltime, p.walltime, -math.inf if p.begin is None else p.begin)
        cj.state[k] = PENDING
        waiting.append((k, p))
    for k, p in waiting:  # dependencies once every parent is in the copy (a child may rank first)
        if p.after and all(parent in index for _, parent in p.after):
            _deps.attach(cj, k, [(kind, index[parent]) for kind, parent in p.after])
        if (p.after and k not in cj.deps) or k in cj.dep_never:
            cj.state[k] = CANCELLED  # a parent the snapshot does not hold: left out
        elif p.begin is not None and p.begin > now:
            copy.held.add(k)
            copy._push_begin(k, p.begin)
        elif cj.dep_pending.get(k, 0):
            copy.held.add(k)
        else:
            copy.queue.append(k)
    copy._rank_floor(float(len(cj)))
    return copy, index


def _spread(node_free: list[int], cores: int, whole: int, cpn: int) -> list[tuple[int, int]]:
    """Place a running job whose nodes are not known: whole idle nodes, else the fullest nodes first."""
    placed: list[tuple[int, int]] = []
    if whole:
        for n, f in enumerate(node_free):
            if f == cpn and len(placed) < whole:
                placed.append((n, cpn))
        return placed
    left = cores
    for f, n in sorted((f, n) for n, f in enumerate(node_free) if f > 0):
        take = min(f, left)
        placed.append((n, take))
        left -= take
        if not left:
            break
    return placed

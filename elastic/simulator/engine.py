"""The discrete-event engine: arrivals, ends and begin times of jobs on one partition.

Events live in a heap of ``(time, priority, seq, job)`` tuples (``seq`` from :func:`itertools.count`,
so ties resolve first-in first-out and a replay is identical). Preloaded background jobs are not put in
the heap: they are already sorted by submit time, so the loop merges them in with a cursor. After every
batch of simultaneous events the queue policy runs once (like one pass of Slurm's scheduler).

*Pinned* jobs (:meth:`Engine.pin`) never enter the queue: each starts at a fixed time and holds its
cores for a fixed duration, like a job of an advance reservation. Only a policy that plans around
them (``plans_pins = True``, see :mod:`elastic.simulator.pinned`) may be used with them.

Dependency resolution and pending reasons live in :mod:`elastic.simulator.dependencies`; the checks
that a request, a background workload or pinned jobs fit the partition in
:mod:`elastic.simulator.admission`; where a held job ranks once eligible (the priority model) in
:mod:`elastic.simulator.priority`. This module keeps the event loop and the jobs' lifecycle.

The engine never sleeps: :meth:`Engine.run` processes events as fast as it can up to a given
simulated time; the mock backend's clocks decide how simulated time relates to real time.

Over 500 lines because the event loop and the jobs' lifecycle are one state machine over one heap and
one set of invariants (pinned jobs included); what could stand apart already does (dependencies,
admission, priority).
"""

from __future__ import annotations

import itertools
import logging
import math
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Sequence
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Protocol

from elastic.simulator import dependencies as _deps
from elastic.simulator.admission import check_background, check_pins, request_geometry
from elastic.simulator.base import QueuePolicy, make_policy
from elastic.simulator.cluster import Cluster
from elastic.simulator.jobs import CANCELLED, COMPLETED, FAILED, PENDING, RUNNING, TIMEOUT, JobTable
from elastic.simulator.priority import DEFAULT_MAX_AGE, DEFAULT_PRIORITY, EligibleRanking

if TYPE_CHECKING:
    import pandas as pd
    from numpy.typing import ArrayLike

    from elastic.batch import DependencyKind, PendingReason
    from elastic.simulator.workload import Workload

__all__ = ["Engine", "Observer"]

logger = logging.getLogger(__name__)

_END = 0
_BEGIN = 1
_PIN = 2
_WAKE = 3  # a policy asked for a pass at this time (job index -1)
_AGED = 4  # a re-ranked job has been eligible for max_age: back to its submit rank
_INF = math.inf


class Observer(Protocol):
    """Told when jobs submitted with ``notify=True`` start and end (the mock backend's pilot runner)."""

    def job_started(self, job: int) -> None:
        """Job ``job`` has just started (``engine.now`` is its start time)."""
        ...

    def job_ended(self, job: int) -> None:
        """Job ``job`` has just ended, been cancelled or requeued (read its state from the table)."""
        ...


class Engine:
    """Discrete-event simulation of one Slurm-like partition under a queue policy.

    Parameters
    ----------
    nodes : int
        Nodes of the partition.
    cores_per_node : int, default 1
        Cores per node.
    policy : str or QueuePolicy, default "easy"
        Queue policy, by registry name (see :data:`elastic.simulator.base.POLICIES`) or instance.
    workload : Workload or None, default None
        Background jobs replayed as they arrive (sorted by submit time).
    kill_invalid_dep : bool, default False
        Cancel a job whose dependency can never be satisfied (Slurm's ``kill_invalid_depend``),
        instead of leaving it pending with reason DependencyNeverSatisfied.
    observer : Observer or None, default None
        Told about starts and ends of jobs submitted with ``notify=True``.
    priority : {"age", "basic", "accrue-always"}, default "age"
        Where a job held by a dependency or a begin time ranks once eligible
        (:mod:`elastic.simulator.priority`): ``age`` behind every job already eligible (Slurm's
        multifactor priority without ``ACCRUE_ALWAYS``), ``basic`` and ``accrue-always`` at its submit
        place.
    max_age : float, default 604800.0
        ``priority="age"``: seconds of eligibility after which the age factor is capped (Slurm's
        ``PriorityMaxAge``, default 7 days) and the job competes in submit order again; ``inf`` never.

    Attributes
    ----------
    jobs : JobTable
        Every job, by index.
    cluster : Cluster
        Core accounting.
    queue : list of int
        Eligible pending jobs (arrived, dependencies met, begin time passed), in priority order.
    held : set of int
        Pending jobs not in the queue yet (waiting for dependencies or their begin time).
    running : list of (float, int)
        Running jobs as ``(expected end, job)``, sorted; expected end = start + walltime, or the kill
        time of a speculative run.
    release_count : int
        Bumped whenever cores are released or the queue changes other than by appending; policies
        use it to skip work when only new jobs arrived since their last pass.
    replans : int
        Bumped when a queued job's request changed (:meth:`shorten`): a policy that keeps a plan of
        the queue plans every queued job again.
    ranking : EligibleRanking
        The priority model (``ranking.name``) and when each held job became eligible
        (``ranking.eligible_at``).
    pinned : list of int
        Indices of pinned jobs (see :meth:`pin`); their pinned start time is ``jobs.begin``.

    Examples
    --------
    >>> eng = Engine(nodes=4)
    >>> a = eng.submit(cores=4, walltime=100.0, runtime=50.0)
    >>> b = eng.submit(cores=2, walltime=10.0, runtime=10.0)
    >>> eng.run()
    >>> eng.jobs.start[b], eng.jobs.end[a]
    (50.0, 50.0)
    """

    def __init__(
        self,
        *,
        nodes: int,
        cores_per_node: int = 1,
        policy: str | QueuePolicy[Engine] = "easy",
        workload: Workload | None = None,
        kill_invalid_dep: bool = False,
        observer: Observer | None = None,
        priority: str = DEFAULT_PRIORITY,
        max_age: float = DEFAULT_MAX_AGE,
    ) -> None:
        self.ranking = EligibleRanking(priority, max_age=max_age)
        self.cluster = Cluster(nodes, cores_per_node)
        self.policy: QueuePolicy[Engine] = make_policy(policy) if isinstance(policy, str) else policy
        self.jobs = JobTable()
        self.queue: list[int] = []
        self.running: list[tuple[float, int]] = []
        self.held: set[int] = set()
        self.release_count = 0
        #: Changes whenever the queue, the running jobs or a job's limits may have changed (every public
        #: change and every batch of events): what read the engine at one version and time holds for it
        #: (the mock's queue snapshot for estimates, :func:`~elastic.simulator.expected.expected_start`).
        self.version = 0
        self.replans = 0
        self.kill_invalid_dep = kill_invalid_dep
        self.observer = observer
        #: Jobs in the order they ended (or were requeued), kept only for policies that ask for it
        #: (``wants_end_log``); the policy empties it.
        self.end_log: list[int] | None = [] if getattr(self.policy, "wants_end_log", False) else None
        self._now = 0.0
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = itertools.count()
        self._rank = itertools.count()
        self._cursor = 0
        self._preloaded = 0
        self._dirty = False
        self._in_pass = False
        self._deferred: list[int] = []
        self.pinned: list[int] = []
        if workload is not None:
            self._load(workload)

    @property
    def now(self) -> float:
        """Current simulated time in seconds."""
        return self._now

    # -- building the workload -------------------------------------------------------------------

    def _load(self, workload: Workload) -> None:
        check_background(workload, self.cluster.total)
        self.jobs.load(workload)
        self._preloaded = len(workload)

    def pin(self, workload: Workload, start: ArrayLike) -> range:
        """Add the jobs of ``workload`` as pinned jobs: job ``k`` starts at exactly ``start[k]``.

        A pinned job holds ``workload.cores[k]`` cores from ``start[k]`` for ``workload.runtime[k]``
        seconds whatever the queue holds (a known future occupancy the policy must plan around, e.g. a
        trace's recorded schedule). It is invisible (state FUTURE) until it starts, then ends COMPLETED
        (TIMEOUT if its runtime exceeds its walltime). Its records keep its submit time; its ``begin``
        is the pinned start.

        Parameters
        ----------
        workload : Workload
            The jobs (any order).
        start : array_like of float
            Pinned start per job, seconds, >= its submit time and >= :attr:`now`.

        Returns
        -------
        range
            Their job indices.

        Raises
        ------
        ConfigError
            The policy does not plan around pinned jobs, ``start`` has the wrong length, or a start
            is before the job's submit time or before now.
        GeometryError
            A job is larger than the partition.
        """
        at = check_pins(self.policy, workload, start, self._now, self.cluster.total)
        self.version += 1
        n = len(workload)
        first = len(self.jobs)
        self.jobs.load(workload)
        self.jobs.begin[first:] = at.tolist()
        idx = range(first, first + n)
        self.pinned.extend(idx)
        heap = self._heap
        seq = self._seq
        heap.extend((float(t), _PIN, next(seq), j) for t, j in zip(at.tolist(), idx, strict=True))
        heapify(heap)
        return idx

    def _start_pinned(self, j: int) -> None:
        jobs = self.jobs
        c = jobs.cores[j]
        cl = self.cluster
        t = self._now
        if jobs.runtime[j] <= 0:
            # An empty interval holds no cores (traces record zero-second jobs; SDSC-BLUE has 256-core
            # ones): it starts and ends at once, and policies plan no capacity for it either.
            jobs.rank[j] = next(self._rank)
            jobs.start[j] = jobs.end[j] = jobs.est_end[j] = jobs.plan_end[j] = t
            jobs.state[j] = jobs.plan_state[j] = COMPLETED
            if j in jobs.children:
                self._notify_children(j)
            if self.end_log is not None:
                self.end_log.append(j)
            self._dirty = True
            return
        if not cl.fits(c, 0):
            raise RuntimeError(
                f"invariant broken: pinned job {jobs.job_id[j]} needs {c} cores at {t} but only "
                f"{cl.free} are free (policy {self.policy.name!r} started a job into pinned cores)"
            )
        if cl.per_node:
            cl.allocate(j, c, 0)
        else:
            cl.free -= c
        jobs.state[j] = RUNNING
        jobs.rank[j] = next(self._rank)
        jobs.start[j] = t
        run = jobs.runtime[j]
        jobs.est_end[j] = jobs.plan_end[j] = t + run
        jobs.plan_state[j] = COMPLETED if run <= jobs.walltime[j] else TIMEOUT
        heappush(self._heap, (t + run, _END, next(self._seq), j))
        insort(self.running, (t + run, j))
        self._dirty = True  # a job chained after this one may start now

    def check_geometry(self, cores: int, nodes: int | None) -> tuple[int, int]:
        """Return ``(cores, whole nodes)`` of a request, or raise GeometryError if it can never fit."""
        return request_geometry(self.cluster, cores, nodes)

    def submit(
        self,
        *,
        cores: int,
        walltime: float,
        runtime: float | None = None,
        nodes: int | None = None,
        name: str | None = None,
        user: Hashable = None,
        dependencies: Sequence[tuple[DependencyKind, int]] = (),
        begin: float | None = None,
        job_id: Hashable = None,
        notify: bool = False,
        background: bool = False,
        defer_pass: bool = False,
    ) -> int:
        """Submit a job now and return its index; the policy runs at once (it may start right away).

        Parameters
        ----------
        cores : int
            Cores asked for.
        walltime : float
            Requested walltime in seconds.
        runtime : float or None, default None
            Actual runtime in seconds; None = runs until cancelled, ended by :meth:`finish` or killed
            at its walltime.
        nodes : int or None
            Whole nodes asked for instead of cores.
        name, user, job_id : optional
            Labels kept in the records (``job_id`` defaults to the index).
        dependencies : sequence of (DependencyKind, int)
            Dependencies on earlier job indices; all must hold (AND).
        begin : float or None
            Do not start before this simulated time.
        notify : bool, default False
            Tell the observer about its start and end.
        background : bool, default False
            Flag kept in the records.
        defer_pass : bool, default False
            Queue the job without running the policy now: the pass that ends the current batch of
            simultaneous events sees it. For a submission made from an observer's ``job_ended`` (a
            runtime system resubmitting a killed job at the instant of the kill), so that the pass
            never runs between the end and the resubmission, nor in the middle of an event batch.

        Raises
        ------
        GeometryError
            The job can never fit the partition.
        DependencyError
            A dependency names a job index that does not exist or has not arrived.
        """
        cores, whole = self.check_geometry(cores, nodes)
        jobs = self.jobs
        _deps.check_parents(jobs, dependencies)
        self.version += 1
        now = self._now
        j = jobs.append(
            job_id=len(jobs) if job_id is None else job_id,
            name=name,
            user=user,
            cores=cores,
            whole=whole,
            walltime=float(walltime),
            runtime=_INF if runtime is None else float(runtime),
            submit=now,
            begin=-_INF if begin is None else float(begin),
            background=background,
            notify=notify,
        )
        jobs.state[j] = PENDING
        jobs.rank[j] = next(self._rank)
        if dependencies:
            _deps.attach(jobs, j, dependencies)
        if begin is not None and begin > now:
            self._push_begin(j, float(begin))
        if j in jobs.dep_never and self.kill_invalid_dep:
            self._cancel_pending(j, now)
        elif self._eligible(j):
            self.queue.append(j)
        else:
            self.held.add(j)
        if defer_pass:
            self._dirty = True
        else:
            self._schedule()
        return j

    # -- the event loop ----------------------------------------------------------------------------

    def run(self, until: float = _INF, progress: Callable[[int], None] | None = None) -> None:
        """Process every event up to simulated time ``until`` (all of them by default).

        Afterwards :attr:`now` is ``until`` (if finite), or the time of the last event.

        Parameters
        ----------
        until : float, default inf
            Simulated time to stop at; events at exactly ``until`` are processed.
        progress : callable or None
            Called every 4096 event batches with the number of background jobs that have arrived.
        """
        # Hot loop: every name is a local, and the common end (no observer, no dependants, no
        # speculation, cores-only accounting) is handled inline instead of through _end().
        heap = self._heap
        jobs = self.jobs
        sub = jobs.submit
        state = jobs.state
        plan_end = jobs.plan_end
        plan_state = jobs.plan_state
        est_end = jobs.est_end
        end = jobs.end
        cores = jobs.cores
        notify = jobs.notify
        children = jobs.children
        rank = jobs.rank
        queue = self.queue
        running = self.running
        cl = self.cluster
        slow_release = cl.per_node
        n_pre = self._preloaded
        next_rank = self._rank
        schedule = self.policy.schedule
        end_log = self.end_log
        batches = 0
        while True:
            ai = self._cursor
            ta = sub[ai] if ai < n_pre else _INF
            th = heap[0][0] if heap else _INF
            t = ta if ta < th else th
            if t > until or t == _INF:
                break
            self._now = t
            self.version += 1
            while heap and heap[0][0] <= t:
                _, kind, _, j = heappop(heap)
                if kind == _END:
                    if state[j] == RUNNING and plan_end[j] == t:
                        final = plan_state[j]
                        if slow_release or final == PENDING or notify[j] or (children and j in children):
                            self._end(j, t)
                        else:
                            cl.free += cores[j]
                            del running[bisect_left(running, (est_end[j], j))]
                            state[j] = final
                            end[j] = t
                            self.release_count += 1
                            self._dirty = True
                            if end_log is not None:
                                end_log.append(j)
                elif kind == _PIN:
                    self._start_pinned(j)
                elif kind == _WAKE:
                    self._dirty = True
                elif kind == _AGED:
                    self._age_capped(j)
                elif state[j] == PENDING and self._eligible(j) and j not in queue:
                    self._became_eligible(j)
            while ai < n_pre and sub[ai] <= t:
                state[ai] = PENDING
                rank[ai] = next(next_rank)
                queue.append(ai)
                ai += 1
            if ai != self._cursor:
                self._cursor = ai
                self._dirty = True
            if self._dirty:
                self._dirty = False
                # Every job needs a core: with none free no policy can start anything, so skip the
                # pass (policies pick up the jobs that arrived meanwhile at their next pass).
                if cl.free and queue:
                    self._in_pass = True
                    schedule(self)
                    self._in_pass = False
                    if self._deferred:
                        self._schedule_deferred()
            batches += 1
            if progress is not None and not batches & 4095:
                progress(ai)
        if until != _INF and until > self._now:
            self._now = until

    def step(self) -> bool:
        """Process the next batch of simultaneous events; return False when there is none."""
        t = self.next_event_time()
        if t == _INF:
            return False
        self.run(until=t)
        return True

    def next_event_time(self) -> float:
        """Time of the next event (``inf`` when nothing more will happen by itself)."""
        ta = self.jobs.submit[self._cursor] if self._cursor < self._preloaded else _INF
        th = self._heap[0][0] if self._heap else _INF
        return min(ta, th)

    def _push_end(self, j: int, t: float) -> None:
        heappush(self._heap, (t, _END, next(self._seq), j))

    def _push_begin(self, j: int, t: float) -> None:
        heappush(self._heap, (t, _BEGIN, next(self._seq), j))

    def wake_at(self, t: float) -> None:
        """Run a scheduling pass at time ``t`` even if no job arrives, ends or becomes eligible then.

        For policies whose plan can start a job at a time no job event marks (e.g.
        :class:`~elastic.simulator.pinned.PinnedBackfill` when the usable capacity steps up).
        """
        if t > self._now:
            heappush(self._heap, (t, _WAKE, next(self._seq), -1))

    def _rank_floor(self, rank: float) -> None:
        """Make every rank given from now on larger than ``rank``."""
        self._rank = itertools.count(max(0, math.floor(rank) + 1))

    def _schedule_deferred(self) -> None:
        for j in self._deferred:
            self._insert(j)
        self._deferred.clear()
        self._schedule()

    def _schedule(self) -> None:
        # Jobs made eligible while the policy runs (an ``after`` dependency on a job it just started)
        # are queued after the pass, then the policy runs again, so it never sees the queue change
        # under its feet.
        while True:
            self._dirty = False
            if not (self.cluster.free and self.queue):
                return
            self._in_pass = True
            try:
                self.policy.schedule(self)
            finally:
                self._in_pass = False
            if not self._deferred:
                return
            for j in self._deferred:
                self._insert(j)
            self._deferred.clear()

    # -- starting and ending jobs ----------------------------------------------------------------

    def start(self, j: int, kill_at: float | None = None) -> None:
        """Start pending job ``j`` now; the caller checked that it fits and removes it from the queue.

        Parameters
        ----------
        j : int
            Job index.
        kill_at : float or None
            Speculative run: the job is killed at this time if it has not finished, and requeued.
        """
        jobs = self.jobs
        t = self._now
        self.version += 1
        cl = self.cluster
        if cl.per_node:
            cl.allocate(j, jobs.cores[j], jobs.whole[j])
        else:
            cl.free -= jobs.cores[j]
        jobs.state[j] = RUNNING
        jobs.start[j] = t
        wall = jobs.walltime[j]
        run = jobs.runtime[j]
        if kill_at is None:
            est = t + wall
            if run <= wall:
                plan, end_state = t + run, COMPLETED
            else:
                plan, end_state = est, TIMEOUT
        else:
            est = kill_at
            jobs.speculated[j] = True
            if t + run <= kill_at:
                plan, end_state = t + run, COMPLETED
            else:
                plan, end_state = kill_at, PENDING
        jobs.est_end[j] = est
        jobs.plan_end[j] = plan
        jobs.plan_state[j] = end_state
        heappush(self._heap, (plan, _END, next(self._seq), j))
        insort(self.running, (est, j))
        if jobs.children and j in jobs.children:
            self._notify_children(j)
        if jobs.notify[j] and self.observer is not None:
            self.observer.job_started(j)

    def _release(self, j: int) -> None:
        jobs = self.jobs
        self.cluster.release(j, jobs.cores[j])
        running = self.running
        del running[bisect_left(running, (jobs.est_end[j], j))]
        self.release_count += 1
        self._dirty = True

    def _end(self, j: int, t: float) -> None:
        jobs = self.jobs
        self._release(j)
        if self.end_log is not None:
            self.end_log.append(j)
        final = jobs.plan_state[j]
        if final == PENDING:  # failed speculative run: requeue with its normal request
            jobs.attempts.setdefault(j, []).append((jobs.start[j], t))
            jobs.state[j] = PENDING
            jobs.start[j] = math.nan
            jobs.requeues[j] += 1
            self._requeue(j)
        else:
            jobs.state[j] = final
            jobs.end[j] = t
            if j in jobs.children:
                self._notify_children(j)
        if jobs.notify[j] and self.observer is not None:
            self.observer.job_ended(j)

    def _requeue(self, j: int) -> None:
        # Back at its own priority, but never ahead of the job the policy reserved cores for.
        q = self.queue
        rank = self.jobs.rank
        if q and rank[j] < rank[q[0]]:
            rank[j] = rank[q[0]] + 0.5
        self._insert(j)

    def finish(self, j: int, exit_code: int) -> None:
        """End running job ``j`` now by itself (its pilot process exited with ``exit_code``)."""
        jobs = self.jobs
        if jobs.state[j] != RUNNING:
            return
        self.version += 1
        self._release(j)
        jobs.state[j] = COMPLETED if exit_code == 0 else FAILED
        jobs.exit_code[j] = exit_code
        jobs.end[j] = self._now
        if j in jobs.children:
            self._notify_children(j)
        if jobs.notify[j] and self.observer is not None:
            self.observer.job_ended(j)
        self._schedule()

    def cancel(self, j: int) -> None:
        """Cancel job ``j`` (pending or running) now; cancelling an ended job does nothing."""
        jobs = self.jobs
        st = jobs.state[j]
        self.version += 1
        if st == RUNNING:
            self._release(j)
            jobs.state[j] = CANCELLED
            jobs.end[j] = self._now
            if j in jobs.children:
                self._notify_children(j)
            if jobs.notify[j] and self.observer is not None:
                self.observer.job_ended(j)
        elif st == PENDING:
            self._cancel_pending(j, self._now)
        else:
            return
        self._schedule()

    def shorten(self, j: int, walltime: float) -> bool:
        """Lower pending job ``j``'s walltime to ``walltime`` seconds; return whether it was changed.

        Slurm lets a user lower (never raise) the time limit of a job (``scontrol update
        TimeLimit=...``); a shorter job fits gaps a longer one does not, so the policy plans the queue
        again at once. A job that is not pending, or whose walltime is already at most ``walltime``,
        is left alone (False).
        """
        jobs = self.jobs
        if jobs.state[j] != PENDING or not 0 < walltime < jobs.walltime[j]:
            return False
        jobs.walltime[j] = float(walltime)
        self.version += 1
        self.release_count += 1
        self.replans += 1
        self._schedule()
        return True

    def set_dependencies(self, j: int, dependencies: Sequence[tuple[DependencyKind, int]]) -> bool:
        """Replace pending job ``j``'s dependencies by ``dependencies``; return whether it was pending.

        Slurm lets a user change the dependencies of their pending job (``scontrol update
        Dependency=``, empty to clear them). The job keeps its rank: where a held job ranks once
        eligible is the priority model's, as for a dependency satisfied by its parent. A job that
        becomes eligible is queued and the policy runs at once; one that gains an unsatisfied
        dependency leaves the queue for the held jobs; one whose new dependency can never be satisfied
        is cancelled under ``kill_invalid_dep``. A job that is not pending is left alone (False).

        Raises
        ------
        DependencyError
            A dependency names a job index that does not exist or has not arrived.
        """
        jobs = self.jobs
        _deps.check_parents(jobs, dependencies)
        if jobs.state[j] != PENDING:
            return False
        _deps.detach(jobs, j)
        if dependencies:
            _deps.attach(jobs, j, dependencies)
        self.version += 1
        if j in jobs.dep_never and self.kill_invalid_dep:
            self._cancel_pending(j, self._now)
        elif self._eligible(j):
            if j in self.held:
                self._became_eligible(j)
        elif j in self.queue:
            self.queue.remove(j)
            self.release_count += 1
            self.held.add(j)
        self._schedule()
        return True

    def _cancel_pending(self, j: int, t: float) -> None:
        jobs = self.jobs
        self.held.discard(j)
        if j in self.queue:
            self.queue.remove(j)
            self.release_count += 1
        jobs.state[j] = CANCELLED
        jobs.end[j] = t
        if j in jobs.children:
            self._notify_children(j)
        if jobs.notify[j] and self.observer is not None:
            self.observer.job_ended(j)

    # -- eligibility (see elastic.simulator.dependencies) ---------------------------------------------------

    def _eligible(self, j: int) -> bool:
        return _deps.eligible(self.jobs, j, self._now)

    def _became_eligible(self, j: int) -> None:
        """Held job ``j`` may start from now on: rank it as the priority model says and queue it."""
        capped = self.ranking.became_eligible(self.jobs, j, self._now, self.queue, lambda: next(self._rank))
        if capped is not None:
            heappush(self._heap, (capped, _AGED, next(self._seq), j))
        self._insert(j)

    def _age_capped(self, j: int) -> None:
        """Job ``j``'s age factor is capped now: if it still waits, it moves to its submit place."""
        q = self.queue
        if self.jobs.state[j] != PENDING or j not in q:
            return
        q.remove(j)
        self.jobs.rank[j] = self.ranking.submit_rank(j)
        insort(q, j, key=self.jobs.rank.__getitem__)
        self.release_count += 1
        self._dirty = True

    def _insert(self, j: int) -> None:
        self.held.discard(j)
        if self._in_pass:
            self._deferred.append(j)
            return
        q = self.queue
        rank = self.jobs.rank
        if not q or rank[q[-1]] < rank[j]:
            q.append(j)
        else:
            insort(q, j, key=rank.__getitem__)
            self.release_count += 1
        self._dirty = True

    def _notify_children(self, parent: int) -> None:
        jobs = self.jobs
        for child in _deps.resolve_children(jobs, parent):
            if child in jobs.dep_never:
                if self.kill_invalid_dep:
                    logger.info("job %s: dependency can never be satisfied; cancelled", jobs.job_id[child])
                    self._cancel_pending(child, self._now)
            elif self._eligible(child):
                self._became_eligible(child)

    # -- queries -------------------------------------------------------------------------------------

    def reason(self, j: int) -> PendingReason:
        """Why pending job ``j`` has not started (Slurm's reason codes); NONE when not pending."""
        return _deps.pending_reason(self.jobs, j, self._now, self.queue)

    def records(self) -> pd.DataFrame:
        """Per-job records of every job that has arrived (see :meth:`JobTable.frame`)."""
        return self.jobs.frame()

"""Backfilling into the capacity that pinned jobs leave free (the recorded-schedule modes).

Pinned jobs (:meth:`Engine.pin <elastic.simulator.engine.Engine.pin>`) hold fixed cores at fixed
times, like advance reservations. :class:`PinnedBackfill` plans every queued job into the capacity they
leave, as conservative backfilling does with running jobs: in priority order, each job gets the earliest
slot where its cores stay free for its whole walltime (a trace's own jobs, ``trace_jobs``: its runtime),
and that slot is taken out of the profile. A job whose slot is now starts. Running queued jobs hold
their slot until its end; when one ends earlier, or the queue changes other than by new arrivals, every
queued job is planned again (Slurm rebuilds its backfill plan in the same situations). Between those
events a pass only starts the jobs whose slot has come, so a replay of a long trace stays linear in
practice.

Four optional constraints model what a trace does not record:

- ``reserve``: cores never available to queued jobs (fragmentation, limits, down nodes);
- ``capacity``: the machine's usable size as a step function of time (nodes down or drained, jobs
  missing from a cleaned trace); pinned and queued jobs together stay within it;
- ``chain``: job -> earlier job index; the job may not start before that one has started (a user's
  jobs start in submit order);
- ``priority``: job -> class; a better class is planned first (e.g. an interactive queue).

The free-capacity profile (:class:`~elastic.simulator.free_profile.FreeProfile`) covers only the near
future, so a replay of a long trace stays linear in practice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from elastic.batch import DependencyKind
from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.free_profile import FreeProfile
from elastic.simulator.jobs import COMPLETED, FUTURE, PENDING, RUNNING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["PINNED_ORDERS", "PinnedBackfill"]

#: Queue disciplines of :class:`PinnedBackfill`.
PINNED_ORDERS: tuple[str, ...] = ("conservative", "fcfs")


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common head of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class PinnedBackfill:
    """Plan queued jobs into the capacity pinned jobs leave free.

    Parameters
    ----------
    order : {"conservative", "fcfs"}, default "conservative"
        ``conservative``: a job may jump ahead if it delays no earlier job's slot (backfilling).
        ``fcfs``: no job starts before an earlier-queued one.
    reserve : int, default 0
        Cores never given to queued jobs (a load calibration), >= 0.
    chain : Mapping[int, int] or None, default None
        Job index -> index of a job that must start first (e.g. the same user's previous job).
    capacity : tuple of (sequence of float, sequence of int) or None, default None
        Breakpoint times (increasing) and the cores usable from each on; before the first breakpoint
        the whole partition. Queued jobs get at most ``capacity(t) - reserve`` minus the pinned jobs'
        cores at every time t (see :func:`elastic.simulator.availability.recorded_capacity`).
    trace_jobs : int, default 0
        Engine jobs ``0 .. trace_jobs - 1`` are a trace's own jobs, whose runtime the record gives:
        they are planned for ``min(runtime, walltime)``, the time they really held their cores. Every
        other queued job is planned for its walltime, as Slurm does. (Against pinned jobs, which the
        real scheduler never knew in advance, a walltime plan refuses gaps the trace's jobs really
        ran in.)
    priority : Mapping[int, int] or None, default None
        Job index -> priority class, <= 0 (lower first; jobs not listed: class 0). Queued jobs are planned
        class by class, in queue order within a class: a job of a better class that arrives later is
        planned ahead, and the jobs behind it are planned again (unless it can start at once beside
        their slots, which delays nobody). A job chained after a queued job of a worse class takes that
        class (it never starts before its parent).

    Attributes
    ----------
    reservations : dict of int to float
        First slot start planned for each queued job.

    Examples
    --------
    >>> import numpy as np
    >>> from elastic.simulator.engine import Engine
    >>> from elastic.simulator.workload import Workload
    >>> one = lambda x: np.array([x])
    >>> w = Workload(one(1), one(0.0), one(3), one(50.0), one(50.0), one(1), one(np.nan), 4, "pin")
    >>> eng = Engine(nodes=4, policy=PinnedBackfill())
    >>> _ = eng.pin(w, [10.0])               # 3 of 4 cores busy from 10 s to 60 s
    >>> a = eng.submit(cores=2, walltime=20.0)  # does not end by 10 s: waits for 60 s
    >>> b = eng.submit(cores=1, walltime=5.0)   # fits before and beside the pinned job
    >>> eng.run()
    >>> eng.jobs.start[a], eng.jobs.start[b]
    (60.0, 0.0)
    """

    name = "pinned"
    plans_pins = True

    def __init__(
        self,
        *,
        order: str = "conservative",
        reserve: int = 0,
        chain: Mapping[int, int] | None = None,
        capacity: tuple[Sequence[float], Sequence[int]] | None = None,
        trace_jobs: int = 0,
        priority: Mapping[int, int] | None = None,
    ) -> None:
        if order not in PINNED_ORDERS:
            raise UnknownNameError("order", order, PINNED_ORDERS)
        if reserve < 0:
            raise ConfigError(f"PinnedBackfill reserve must be >= 0 cores, got {reserve}")
        if capacity is not None:
            times, cores = capacity
            if len(times) != len(cores):
                raise ConfigError(
                    f"PinnedBackfill capacity needs one core count per breakpoint, got {len(times)} "
                    f"times and {len(cores)} counts"
                )
            if any(b <= a for a, b in pairwise(times)):
                raise ConfigError("PinnedBackfill capacity breakpoints must be strictly increasing")
            if any(c < 0 for c in cores):
                raise ConfigError("PinnedBackfill capacity must be >= 0 cores at every breakpoint")
        if priority is not None and any(c > 0 for c in priority.values()):
            raise ConfigError(
                "PinnedBackfill priority classes must be <= 0 (negative: planned before the default "
                f"class 0), got {max(priority.values())}"
            )
        self.order = order
        self.reserve = reserve
        self.chain = chain
        self.capacity = capacity
        self.trace_jobs = trace_jobs
        self.priority = priority
        self._rank = {j: c for j, c in (priority or {}).items() if c != 0} or None
        self.reservations: dict[int, float] = {}
        self._profile = FreeProfile([0.0], [0])  # built at the first pass
        self._pins = -1  # pinned jobs seen when the profile was built; -1 = not built
        self._slot: dict[int, float] = {}  # queued job -> planned slot start
        self._held: dict[int, tuple[float, float, int]] = {}  # queued or running job -> (start, end, cores)
        self._snap: list[int] = []  # the queue as planned at the end of the last pass
        self._next = math.inf  # earliest planned slot of a queued job
        self._wake = math.inf  # the last time the engine was asked to wake up for a slot
        self._releases = -1  # engine.release_count at the end of the last pass
        self._replans = 0  # engine.replans at the end of the last pass

    def _build(self, engine: Engine) -> None:
        self._profile = FreeProfile.of_pins(engine, self.reserve, self.capacity)
        self._pins = len(engine.pinned)

    # -- the policy ------------------------------------------------------------------------------

    def schedule(self, engine: Engine) -> None:
        """Start queued jobs whose slot has come; plan new or (after a change) all queued jobs."""
        now = engine.now
        if (
            engine.release_count == self._releases
            and len(engine.queue) == len(self._snap)
            and self._next > now
            and self._pins == len(engine.pinned)
        ):
            # Nothing was released, nothing queued or removed, no slot is due: the plan stands (most
            # passes, e.g. each pinned job's start).
            return
        jobs = engine.jobs
        state = jobs.state
        q = self._ordered(engine.queue)
        replan = False
        held = self._held
        slot = self._slot
        if self._pins != len(engine.pinned):  # first pass, or jobs pinned since: start afresh
            self._build(engine)
            for j in [j for j in held if j in slot or state[j] != RUNNING]:
                del held[j]
            slot.clear()
            for start, end, cores in held.values():
                self._profile.take(start, end, cores)
            replan = True
        for j in [j for j in held if j not in slot and state[j] != RUNNING]:
            _, end, cores = held.pop(j)
            stop = jobs.end[j]
            stop = now if stop != stop else stop  # NaN: requeued
            if stop < end:  # ended or cancelled before its walltime: give the rest back
                self._profile.take(max(stop, now), end, -cores)
                replan = True
        snap = self._snap
        if self._replans != engine.replans:  # a queued job's request changed: its slot is stale
            replan = True
        if self._next < now:
            # A slot passed without its job starting (its whole nodes were fragmented): plan every
            # job again from now, so that no slot is left at a time when nothing happens.
            replan = True
        inserted = False
        if replan:
            for j in slot:
                start, end, cores = held.pop(j)
                self._profile.take(start, end, -cores)
            slot.clear()
            new = 0
        else:
            # A job's slot depends only on the jobs planned before it: keep the plan of the queue's
            # unchanged head, plan the rest again (a new job of higher priority, or a job removed).
            new = _common_prefix(q, snap)
            inserted = new < len(snap) and self._start_inserted(engine, q, new, snap)
            if inserted:
                new = len(q)  # the new jobs start now around the plan: the plan stands
            for j in snap[new:]:
                if j in slot:
                    start, end, cores = held.pop(j)
                    self._profile.take(start, end, -cores)
                    del slot[j]
        self._profile.prune(now)
        if replan or inserted or new < len(q) or self._next <= now:
            q = self._plan(engine, q, new)
        self._snap = list(q)
        self._releases = engine.release_count
        self._replans = engine.replans

    def _start_inserted(self, engine: Engine, q: list[int], head: int, snap: list[int]) -> bool:
        """Give the jobs inserted into the planned queue a slot from now, if each has one.

        ``q[:head]`` is planned as before; the rest of ``q`` is ``snap[head:]`` (planned, same order)
        with new jobs of higher priority inserted. If every new job fits from now on beside every
        planned slot, taking those cores delays nobody and the plan stands: the new jobs get a slot
        at ``now`` and True is returned. Otherwise nothing changes and False is returned (the caller
        plans the tail again). The common case when a high-priority class starts at once.
        """
        slot = self._slot
        if self.order != "conservative" or [j for j in q[head:] if j in slot] != snap[head:]:
            return False
        jobs = engine.jobs
        now = engine.now
        chain = self.chain
        added = [j for j in q[head:] if j not in slot]
        taken: list[int] = []
        ok = True
        for j in added:
            c = jobs.cores[j]
            hold = min(jobs.runtime[j], jobs.walltime[j]) if j < self.trace_jobs else jobs.walltime[j]
            if (chain is not None and j in chain and self._chain_bound(engine, chain[j]) > now) or (
                self._profile.earliest(c, hold, now) != now
            ):
                ok = False
                break
            self._profile.take(now, now + hold, c)
            slot[j] = now
            self._held[j] = (now, now + hold, c)
            taken.append(j)
        if not ok:
            for j in taken:
                start, end, cores = self._held.pop(j)
                self._profile.take(start, end, -cores)
                del slot[j]
            return False
        for j in taken:
            self.reservations.setdefault(j, now)
        return True

    def _ordered(self, queue: list[int]) -> list[int]:
        """Return the queue in planning order: better (negative) classes first, then queue order."""
        rank = self._rank
        if rank is None:
            return queue
        special = [j for j in queue if j in rank]  # the few jobs of a better class (a C-level test)
        if not special:
            return queue
        chain = self.chain
        queued = set(queue) if chain else set()
        eff: dict[int, int] = {}
        for j in special:  # in queue order: a queued parent comes first
            c = rank[j]
            parent = chain.get(j) if chain else None
            if parent is not None and parent in queued:
                # Never ahead of a queued job it is chained after: the worse class of the two.
                c = max(c, eff.get(parent, 0))
            eff[j] = c
        head = sorted((j for j in special if eff[j] < 0), key=eff.__getitem__)
        if not head:
            return queue
        ahead = set(head)
        return head + [j for j in queue if j not in ahead]

    def _plan(self, engine: Engine, q: list[int], new: int) -> list[int]:
        """Start due jobs among ``q[:new]``, plan ``q[new:]``; return ``q`` without the started jobs."""
        now = engine.now
        jobs = engine.jobs
        cores = jobs.cores
        wall = jobs.walltime
        run = jobs.runtime
        known = self.trace_jobs
        whole = jobs.whole
        cl = engine.cluster
        slot = self._slot
        held = self._held
        chain = self.chain
        fcfs = self.order == "fcfs"
        started: list[int] = []
        floor = now
        nxt = math.inf
        for pos, j in enumerate(q):
            c = cores[j]
            if pos < new:
                at = slot[j]
            else:
                lb = floor
                if chain is not None and j in chain:
                    lb = max(lb, self._chain_bound(engine, chain[j]))
                hold = min(run[j], wall[j]) if j < known else wall[j]
                at = self._profile.earliest(c, hold, lb)
                if at == math.inf:
                    raise ConfigError(
                        f"job {jobs.job_id[j]} asks for {c} cores, more than the "
                        f"{engine.cluster.total - self.reserve} the pinned jobs, reserve={self.reserve}"
                        f"{' and the capacity' if self.capacity is not None else ''} ever leave free; "
                        "lower reserve or ask for fewer cores"
                    )
                self._profile.take(at, at + hold, c)
                slot[j] = at
                held[j] = (at, at + hold, c)
                self.reservations.setdefault(j, at)
            if at <= now and cl.fits(c, whole[j]):
                del slot[j]  # the job holds its slot [now, now + walltime) while it runs
                engine.start(j)
                started.append(j)
            elif at < nxt:
                nxt = at
            if fcfs and at > floor:
                floor = at
        if started:
            state = jobs.state
            eq = engine.queue
            eq[:] = [j for j in eq if state[j] == PENDING]
            q = [j for j in q if state[j] == PENDING]
        self._next = nxt
        if nxt != math.inf and nxt != self._wake:
            # A slot can open where no job event happens (the usable capacity steps up): make sure
            # a pass runs then, or the job would start late and overrun the slot it was planned in.
            engine.wake_at(nxt)
            self._wake = nxt
        return q

    def _chain_bound(self, engine: Engine, parent: int) -> float:
        """Earliest start of a job chained after ``parent``.

        The parent's start if it started, its planned slot if queued, its pinned start if pinned;
        a parent still held (dependency, begin time) does not constrain (``-inf``).
        """
        jobs = engine.jobs
        s = jobs.start[parent]
        if s == s:  # started (not NaN)
            return s
        if parent in self._slot:
            return self._slot[parent]
        if jobs.state[parent] == FUTURE:  # a pinned job (an earlier-submitted one has arrived)
            return jobs.begin[parent]
        return -math.inf

    def probe(
        self,
        engine: Engine,
        cores: int,
        walltime: float,
        *,
        begin: float | None = None,
        dependencies: Sequence[tuple[DependencyKind, int]] = (),
    ) -> float | None:
        """When a job like this would start if submitted now (its slot behind every queued job).

        Parameters
        ----------
        engine : Engine
            The engine this policy schedules (brought up to date by a pass first).
        cores, walltime, begin
            As for :meth:`Engine.submit`.
        dependencies : sequence of (DependencyKind, int)
            ``after`` waits for the parent's (planned) start, the other kinds for its planned end.

        Returns
        -------
        float or None
            Simulated start time; None when a parent's start is not planned (held itself).
        """
        self.schedule(engine)
        jobs = engine.jobs
        lb = engine.now if begin is None else max(engine.now, begin)
        if self.order == "fcfs" and self._slot:
            lb = max(lb, max(self._slot.values()))
        for kind, parent in dependencies:
            st = jobs.state[parent]
            if st >= COMPLETED:
                continue
            start = self._chain_bound(engine, parent)
            if start == -math.inf:
                return None
            if kind is DependencyKind.AFTER:
                bound = start
            elif st == RUNNING:
                bound = jobs.est_end[parent]
            elif st == FUTURE:  # pinned: its end is known
                bound = start + jobs.runtime[parent]
            else:
                bound = start + jobs.walltime[parent]
            lb = max(lb, bound)
        at = self._profile.earliest(cores, walltime, lb)
        return None if at == math.inf else at

"""Conservative backfilling: a reservation for every queued job.

Each pass builds the free-core profile of the future from the running jobs (each releases its cores at
start + walltime) and walks the queue in priority order: every job gets the earliest slot where enough
cores stay free for its whole walltime, and that slot is taken out of the profile. Jobs whose slot
starts now start. A job may thus only jump ahead if it delays no earlier job's reservation (Mu'alem &
Feitelson; like Slurm's backfill with a reservation for every job). Slurm estimates a reservation's
start more coarsely (grouped will-run tests, :func:`will_run_releases`); :class:`SlurmBackfill` plans
as it does and is the closer model of a real ``slurmctld`` (``benchmarks/slurm_oracle.py``; the figures
are in docs/results/simulator.md).

Like Slurm, the schedule is rebuilt from scratch on every pass in which cores were released, so a
reservation can move (usually earlier; when an earlier job moves into the slot of a later one, later).
A pass in which only new jobs arrived places just those into the kept profile.

Nodes requests on multi-core nodes are planned by core count only; a job whose slot is now but whose
whole nodes are not idle waits for the next pass.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import TYPE_CHECKING

from elastic.simulator.jobs import PENDING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["ConservativeBackfill", "Profile", "SlurmBackfill", "split_at", "will_run_releases"]


class Profile:
    """Free cores over future time: ``free[i]`` cores from ``times[i]`` until ``times[i + 1]``.

    Parameters
    ----------
    now : float
        Start of the profile.
    free : int
        Cores free at ``now``.

    Examples
    --------
    >>> p = Profile(0.0, 2)
    >>> p.release(10.0, 2)
    >>> p.earliest(3, 5.0)
    10.0
    >>> p.reserve(10.0, 5.0, 3); p.times, p.free
    ([0.0, 10.0, 15.0], [2, 1, 4])
    """

    __slots__ = ("free", "times")

    def __init__(self, now: float, free: int) -> None:
        self.times = [now]
        self.free = [free]

    def release(self, t: float, cores: int) -> None:
        """Add ``cores`` free cores from ``t`` on (``t`` >= the last breakpoint)."""
        times = self.times
        if t > times[-1]:
            times.append(t)
            self.free.append(self.free[-1] + cores)
        else:
            i = self._split(t)
            for k in range(i, len(times)):
                self.free[k] += cores

    def earliest(self, cores: int, duration: float) -> float:
        """Earliest breakpoint from which ``cores`` cores stay free for ``duration`` seconds."""
        times = self.times
        free = self.free
        n = len(times)
        i = 0
        while i < n:
            if free[i] < cores:
                i += 1
                continue
            end = times[i] + duration
            k = i + 1
            while k < n and times[k] < end and free[k] >= cores:
                k += 1
            if k == n or times[k] >= end:
                return times[i]
            i = k + 1
        return math.inf  # only if the job is larger than the partition

    def reserve(self, start: float, duration: float, cores: int) -> None:
        """Take ``cores`` cores from ``start`` to ``start + duration``."""
        i = self._split(start)
        k = self._split(start + duration)
        free = self.free
        for m in range(i, k):
            free[m] -= cores

    def advance(self, now: float) -> None:
        """Drop the part of the profile before ``now``."""
        times = self.times
        k = bisect_right(times, now) - 1
        if k > 0:
            del times[:k]
            del self.free[:k]
        times[0] = now

    def _split(self, t: float) -> int:
        """Make ``t`` a breakpoint; return its index."""
        return split_at(self.times, self.free, t)


def split_at(times: list[float], free: list[int], t: float) -> int:
    """Make ``t`` a breakpoint of the step function ``free`` over ``times``; return its index.

    ``free[i]`` holds on ``[times[i], times[i + 1])``; a new breakpoint copies the value of the step it
    splits. ``t`` must not be before ``times[0]``. Shared by every capacity profile of the planners.
    """
    i = bisect_right(times, t)
    if times[i - 1] == t:
        return i - 1
    times.insert(i, t)
    free.insert(i, free[i - 1])
    return i


class ConservativeBackfill:
    """Conservative backfilling: every queued job gets a reservation, in priority order.

    Attributes
    ----------
    reservations : dict of int to float
        First start time reserved for each job.
    """

    name = "conservative"

    def __init__(self) -> None:
        self.reservations: dict[int, float] = {}
        self._profile: Profile | None = None
        self._mark = -1
        self._scanned = 0

    def schedule(self, engine: Engine) -> None:
        """Plan every queued job into the profile; start those whose slot is now."""
        q = engine.queue
        if not q:
            self._profile = None
            return
        now = engine.now
        jobs = engine.jobs
        cl = engine.cluster
        profile = self._profile
        if profile is not None and self._mark == engine.release_count:
            profile.advance(now)
            first = self._scanned
        else:
            profile = Profile(now, cl.free)
            cores = jobs.cores
            running = engine.running
            for t, (_, j) in zip(self._releases([est for est, _ in running], now), running, strict=True):
                profile.release(t, cores[j])
            first = 0
        self._scanned = self._place(engine, profile, first)
        self._profile = profile
        self._mark = engine.release_count

    def _releases(self, ends: list[float], now: float) -> list[float]:
        """When each running job's cores count as free in the plan (sorted ``ends``: its walltime end)."""
        return ends

    def _place(self, engine: Engine, profile: Profile, first: int) -> int:
        """Plan ``queue[first:]``; return how many queued jobs are planned after the pass.

        Planning stops early once no core is free now: the rest could not start now anyway and are
        planned by a later pass (the kept profile stays valid until cores are released).
        """
        q = engine.queue
        now = engine.now
        jobs = engine.jobs
        cores = jobs.cores
        wall = jobs.walltime
        whole = jobs.whole
        cl = engine.cluster
        reservations = self.reservations
        started = 0
        stop = len(q)
        for i in range(first, len(q)):
            if not profile.free[0]:
                stop = i
                break
            j = q[i]
            c = cores[j]
            at = profile.earliest(c, wall[j])
            if at <= now and cl.fits(c, whole[j]):
                engine.start(j)
                started += 1
                at = now
            elif at <= now:
                at = now  # whole nodes fragmented: keep the slot, retry next pass
            if j not in reservations:
                reservations[j] = at
            profile.reserve(at, wall[j], c)
        if started:
            state = jobs.state
            q[:] = [j for j in q if state[j] == PENDING]
        return stop - started


def will_run_releases(
    ends: list[float], now: float, window: float = 30.0, origin: float = 0.0
) -> list[float]:
    """Slurm's will-run estimate: when each running job's cores count as free for a pending job's plan.

    ``_will_run_test`` (``src/plugins/select/cons_common/job_test.c``, 22.05) does not try every running
    job's end in turn: it removes the running jobs, in order of end time, in *groups*, and tests the
    pending job after each group. The first group holds every job ending up to ``window`` after a barrier
    (the first end rounded up to the next multiple of ``window``); the window then doubles (until the next
    job is inside it) after each group. A job that fits after a group is planned to start when the
    group's *last* job ends. So in the plan every job of a group frees its cores at the group's last end:
    later than it will, by up to the window, and the further out the coarser. What is free now is exact.

    Parameters
    ----------
    ends : list of float
        Running jobs' walltime ends, sorted.
    now : float
        Current time (a group ending in the past counts from now, Slurm's ``_guess_job_end``).
    window : float, default 30.0
        The first window, seconds (Slurm's fixed ``time_window = 30``; with ``bf_window_scale`` unset
        it doubles).
    origin : float, default 0.0
        Wall-clock time (Unix seconds) of time 0: Slurm aligns the barrier on the wall clock.

    Returns
    -------
    list of float
        Release time per job, in the order of ``ends``.

    Examples
    --------
    >>> will_run_releases([10.0, 50.0, 65.0, 100.0, 400.0], now=0.0)
    [50.0, 50.0, 65.0, 100.0, 400.0]
    """
    out: list[float] = []
    n = len(ends)
    if not n:
        return out
    first = ends[0] + origin
    barrier = first + (window - first % window) - origin
    w = window
    i = 0
    while i < n:
        k = i + 1
        while k < n and ends[k] <= barrier + w:
            k += 1
        out.extend([max(ends[k - 1], now)] * (k - i))
        w *= 2
        while k < n and ends[k] > barrier + w:
            w *= 2
        i = k
    return out


class SlurmBackfill(ConservativeBackfill):
    """Conservative backfilling planned as Slurm's ``sched/backfill`` plans it (22.05).

    Like :class:`ConservativeBackfill` (every queued job tested in priority order gets a reservation;
    what can start now starts), but a pending job's future start is estimated as Slurm's will-run test
    estimates it: running jobs free their cores at the end of their :func:`will_run_releases` group,
    not at their own walltime end. Slurm's reservations are therefore later than the exact earliest
    slot, and jobs behind them backfill into the gap that leaves; ``benchmarks/slurm_oracle.py`` shows
    the local ``slurmctld`` doing so (docs/results/simulator.md). The plan is rebuilt on every pass (the
    groups change whenever a job starts), so a pass costs more than :class:`ConservativeBackfill`'s.

    Parameters
    ----------
    window : float, default 30.0
        Slurm's first will-run window, seconds.
    origin : float, default 0.0
        Wall-clock time of simulated time 0 (Slurm aligns its windows on the wall clock; only its
        remainder modulo ``window`` matters).
    """

    name = "slurm"

    def __init__(self, window: float = 30.0, origin: float = 0.0) -> None:
        if not window > 0:
            raise ValueError(f"SlurmBackfill: window must be > 0 seconds, got {window!r}")
        super().__init__()
        self.window = window
        self.origin = origin % window

    def schedule(self, engine: Engine) -> None:
        """Plan every queued job from scratch (Slurm regroups all running jobs on every pass)."""
        self._profile = None
        super().schedule(engine)

    def _releases(self, ends: list[float], now: float) -> list[float]:
        return will_run_releases(ends, now, self.window, self.origin)

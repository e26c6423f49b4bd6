"""Slurm 22.05's backfill planned node by node: the ``slurm-nodes`` policy (one-core nodes).

The ``slurm`` policy (:class:`~elastic.simulator.conservative.SlurmBackfill`) plans cores and groups every
running job in its will-run estimate. ``slurmctld`` plans nodes (``_attempt_backfill`` in
``src/plugins/sched/backfill/backfill.c``, ``_will_run_test`` in
``src/plugins/select/cons_common/job_test.c``, ``_eval_nodes_busy`` in
``src/plugins/select/cons_tres/job_test.c``), and this policy does as they do on a partition of one-core
nodes (where a node is a core), with ``bf_busy_nodes`` set:

- a pending job may use only the nodes no higher-priority job has reserved anywhere in its window
  ``[start_res, start_res + limit]`` (both ends included, as ``node_space`` is scanned);
- its will-run estimate removes only the running jobs on those nodes, in :func:`will_run_groups` (the
  barrier taken from the first of them, but a group's end decided by the *next running job of all*, so a
  job elsewhere ending inside the window carries the next usable job into the group, however late it
  ends) and plans it at the end of the last job of the first group after which it fits;
- ``TRY_LATER``: if that start lies after the first time a node reserved in its window is released, it is
  tested again from there, on the nodes free then; and again when the nodes it chose overlap a reservation;
- a reservation takes the nodes running jobs now, lowest index first, then idle ones; when the busy
  nodes were enough, Slurm's second pass over idle nodes still runs once and takes one idle node more
  (its ``break`` leaves only the inner loop): a 10-CPU job's reservation shows as ``n[1-11]`` in the
  backfill map;
- a job that starts now takes the best fit of consecutive free nodes (``_eval_nodes``).

Checked against every recorded Slurm schedule of ``benchmarks/slurm_oracle.py`` (three synthetic runs,
two HPC2N windows, one SDSC Blue window; ``benchmarks/slurm_node_plan.py``): job-level Spearman of waits
0.989 and 0.971 on HPC2N (the ``slurm`` policy 0.796 and 0.665), 0.872 on SDSC Blue (0.838), 0.943,
0.947 and 0.878 on the synthetic runs (0.936, 0.915, 0.882); docs/results/simulator.md. The group rule
of :func:`will_run_groups` was found by replaying every backfill pass of logged synthetic runs
(``DebugFlags=Backfill``) through this planner: Slurm's reservation for a 16-core job lay 55 s later than
the planner's, exactly at the end of a job carried in by that rule; and :func:`add_reservation` keeps the
reservations as Slurm's merged ``node_space`` records. With both, on four fresh synthetic runs and two
HPC2N runs, the planner's planned starts equal Slurm's in 21,986 of 22,035 logged cases
(``benchmarks/slurm_pass_check.py``); end to end 0.925, 0.909, 0.898, 0.903 (synthetic) and 0.971, 0.978
(HPC2N), the rest being Slurm's one-second pass timing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from elastic.simulator.conservative import SlurmBackfill
from elastic.simulator.jobs import PENDING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["SlurmNodeBackfill", "add_reservation", "best_fit", "lowest", "will_run_groups"]


def _count(mask: int) -> int:
    return bin(mask).count("1")


def lowest(mask: int, need: int) -> int:
    """Return the ``need`` lowest-index nodes of the node set ``mask`` (bit ``i`` = node ``i``).

    Examples
    --------
    >>> lowest(0b10110, 2) == 0b00110
    True
    """
    out = 0
    while mask and need > 0:
        low = mask & -mask
        out |= low
        mask ^= low
        need -= 1
    return out


def will_run_groups(
    ends: Sequence[float], usable: Sequence[bool], window: float = 30.0, origin: float = 0.0
) -> list[list[int]]:
    """Slurm's will-run removal groups: which running jobs a pending job's estimate frees, and when.

    ``_will_run_test`` (``src/plugins/select/cons_common/job_test.c``, 22.05) walks *every* running job
    in order of end time. A job with no node the pending job may use is skipped; a usable one is removed,
    and the group closes when the next job in the list (usable or not) ends after the barrier plus the
    window. The barrier is the first usable job's end rounded up to ``window`` on the wall clock; the
    window doubles after each group until the next job is inside it. So a skipped job inside the window
    keeps the group open, and the usable job after it joins the group whatever its end: the pending job
    is planned at the end of the group's last job, which may lie far past the window.

    Parameters
    ----------
    ends : sequence of float
        Every running job's walltime end, sorted.
    usable : sequence of bool
        Per job: does it hold a node the pending job may use.
    window : float, default 30.0
        The first window, seconds (``time_window = 30``; doubling, as with ``bf_window_scale`` unset).
    origin : float, default 0.0
        Wall-clock time of time 0 (the barrier is aligned on the wall clock).

    Returns
    -------
    list of list of int
        Indices into ``ends`` of the usable jobs removed in each group, in order; the pending job is
        tested after each group and starts, if it fits, at the end of the group's last job.

    Examples
    --------
    >>> will_run_groups([42.0, 61.0, 97.0, 113.0], [True, False, True, True])
    [[0, 2], [3]]
    >>> will_run_groups([42.0, 97.0, 113.0], [True, True, True])  # without the job ending at 61 s
    [[0], [1, 2]]
    """
    groups: list[list[int]] = []
    n = len(ends)
    barrier = math.nan
    w = window
    i = 0
    more = True
    while more:
        group: list[int] = []
        peek = -1
        while True:
            if i >= n:
                more = False
                break
            k = i
            i += 1
            if not usable[k]:
                continue  # skipped, and no check of the next job's end
            if math.isnan(barrier):
                first = ends[k] + origin
                barrier = first + (window - first % window) - origin
            group.append(k)
            if i >= n:
                more = False
                break
            peek = i
            if ends[i] > barrier + w:
                break
        if not group:
            break
        groups.append(group)
        w *= 2
        while 0 <= peek < n and ends[peek] > barrier + w:
            w *= 2
    return groups


def add_reservation(space: list[list[float | int]], start: float, end: float, nodes: int) -> None:
    """Add a reservation of ``nodes`` over ``[start, end)`` to Slurm's ``node_space`` records, in place.

    ``space`` holds ``[begin, end, free nodes]`` records in time order, the first one beginning now (as
    ``_add_reservation`` in ``src/plugins/sched/backfill/backfill.c``, 22.05): the record holding
    ``start`` is split there, the one holding ``end`` is split there, the records between lose
    ``nodes``; then *one* pair of neighbouring records with the same free nodes, from the record before
    the reservation to the one after it, is merged. Merging decides where a later job's scan of the
    records stops and which record it compares with the next one (``later_start``).

    Examples
    --------
    >>> space = [[0.0, math.inf, 0b1111]]
    >>> add_reservation(space, 10.0, 20.0, 0b0011)
    >>> space
    [[0.0, 10.0, 15], [10.0, 20.0, 12], [20.0, inf, 15]]
    >>> add_reservation(space, 20.0, 30.0, 0b0011)  # the same free nodes from 10 s to 30 s: merged
    >>> space
    [[0.0, 10.0, 15], [10.0, 30.0, 12], [30.0, inf, 15]]
    """
    start = max(start, float(space[0][0]))
    one_before, one_after = 0, -1
    placed = False
    j = 0
    while j < len(space):
        if space[j][1] > start:  # split the record holding the start
            space.insert(j + 1, [start, space[j][1], space[j][2]])
            space[j][1] = start
            placed = True
            break
        if space[j][1] == start:
            placed = True
            break
        one_before = j
        j += 1
    if placed:
        j += 1
        while j < len(space):
            if end < space[j][1]:  # split the record holding the end
                space.insert(j + 1, [end, space[j][1], space[j][2]])
                space[j][1] = end
            space[j][2] = int(space[j][2]) & ~nodes
            if end == space[j][1]:
                if j + 1 < len(space):
                    one_after = j + 1
                break
            j += 1
    i = one_before
    while i != one_after and i + 1 < len(space):  # drop one record with identical nodes
        if space[i][2] == space[i + 1][2]:
            space[i][1] = space[i + 1][1]
            del space[i + 1]
            break
        i += 1


def best_fit(free: int, need: int, nodes: int) -> int:
    """Return Slurm's nodes for a job starting now on one-core nodes (``_eval_nodes``).

    The first ``need`` nodes of the smallest run of consecutive free nodes that holds it, else the
    largest runs first.

    Examples
    --------
    >>> bin(best_fit(0b1110011, 2, 7))  # runs of 2 (nodes 0-1) and 3 (4-6): the run of 2
    '0b11'
    """
    runs: list[tuple[int, int]] = []
    i = 0
    while i < nodes:
        if free >> i & 1:
            k = i
            while k < nodes and free >> k & 1:
                k += 1
            runs.append((i, k - i))
            i = k
        else:
            i += 1
    fit = [r for r in runs if r[1] >= need]
    chosen = [min(fit, key=lambda r: (r[1], r[0]))] if fit else sorted(runs, key=lambda r: (-r[1], r[0]))
    out = 0
    for start, length in chosen:
        take = min(length, need)
        out |= ((1 << take) - 1) << start
        need -= take
        if need <= 0:
            break
    return out


class SlurmNodeBackfill(SlurmBackfill):
    """Slurm's ``sched/backfill`` with ``bf_busy_nodes`` on one-core nodes, planned node by node.

    See the module docstring for what it adds to :class:`~elastic.simulator.conservative.SlurmBackfill`.
    The engine must have one core per node.

    Parameters
    ----------
    window : float, default 30.0
        Slurm's first will-run window, seconds.
    origin : float, default 0.0
        Wall-clock time of simulated time 0 (Slurm aligns its windows on the wall clock).

    Attributes
    ----------
    placement : dict of int to int
        Nodes of each running job, as a bit set (bit ``i`` = node ``i``).
    """

    name = "slurm-nodes"

    def __init__(self, window: float = 30.0, origin: float = 0.0) -> None:
        super().__init__(window=window, origin=origin)
        self.placement: dict[int, int] = {}

    def _will_run(
        self, avail: int, cores: int, now: float, running: list[tuple[float, int]], busy: int
    ) -> tuple[float | None, int, int]:
        """Earliest start on the nodes ``avail``; the nodes free now, and those freed by then."""
        free_now = avail & ~busy
        if _count(free_now) >= cores:
            return now, free_now, 0
        placed = [self.placement[j] for _, j in running]
        usable = [bool(m & avail) for m in placed]
        removed = 0
        for group in will_run_groups([end for end, _ in running], usable, self.window, self.origin):
            for k in group:
                removed |= placed[k] & avail
            if _count(free_now | removed) >= cores:
                return max(running[group[-1]][0], now), free_now, removed
        return None, free_now, removed

    def _reserve_nodes(self, free_now: int, removed: int, cores: int) -> int:
        """Busy nodes first (lowest index), then idle ones; one idle node more if the busy ones sufficed."""
        chosen = lowest(removed, cores)
        if _count(chosen) >= cores:
            return chosen | lowest(free_now, 1)
        return chosen | lowest(free_now, cores - _count(chosen))

    def schedule(self, engine: Engine) -> None:
        """One backfill pass: every queued job in priority order starts now or gets a node reservation."""
        q = engine.queue
        if not q:
            return
        if engine.cluster.cores_per_node != 1:
            raise ValueError(
                f"the slurm-nodes policy plans one-core nodes; this partition has "
                f"{engine.cluster.cores_per_node} cores per node (use the slurm policy)"
            )
        now = engine.now
        cores = engine.jobs.cores
        wall = engine.jobs.walltime
        nodes = engine.cluster.total
        full = (1 << nodes) - 1
        running = engine.running
        live = {j for _, j in running}
        self.placement = {j: m for j, m in self.placement.items() if j in live}
        busy = 0
        for m in self.placement.values():
            busy |= m
        for _, j in running:  # started outside this policy: the lowest free nodes
            if j not in self.placement:
                self.placement[j] = lowest(full & ~busy, int(cores[j]))
                busy |= self.placement[j]
        reserved: list[tuple[float, float, int]] = []
        space: list[list[float | int]] = [[now, math.inf, full]]  # Slurm's node_space records
        started = False
        for j in list(q):
            if busy == full:
                break  # nothing can start now; the next pass plans again
            c, limit = int(cores[j]), float(wall[j])
            start_res = now
            for _ in range(4 * len(reserved) + 8):  # each retry moves start_res to a later boundary
                kind, at, chosen = self._test(space, full, now, start_res, limit, c, running, busy)
                if kind == "none":
                    break
                if kind == "later":  # TRY_LATER from this time
                    start_res = at
                    continue
                if kind == "now":
                    m = best_fit(chosen, c, nodes)
                    engine.start(j)
                    started = True
                    self.placement[j] = m
                    busy |= m
                    self.reservations.setdefault(j, now)
                    break
                if at > start_res and any(s < at + limit and e > at and m & chosen for s, e, m in reserved):
                    start_res = at  # the chosen nodes overlap a reservation (_test_resv_overlap)
                    continue
                reserved.append((at, at + limit, chosen))
                add_reservation(space, at, at + limit, chosen)
                self.reservations.setdefault(j, at)
                break
        if started:
            state = engine.jobs.state
            q[:] = [j for j in q if state[j] == PENDING]

    def _test(
        self,
        space: list[list[float | int]],
        full: int,
        now: float,
        start_res: float,
        limit: float,
        cores: int,
        running: list[tuple[float, int]],
        busy: int,
    ) -> tuple[str, float, int]:
        """One test of a job from ``start_res`` on the records ``space``: ``(kind, time, nodes)``.

        ``("none", 0, 0)``: no reservation; ``("later", t, 0)``: test again from ``t``; ``("now", now,
        free nodes)``: it starts now; ``("reserve", start, nodes)``: a reservation. As
        ``_attempt_backfill`` scans ``node_space``: ``later_start`` is the end of the first record (from
        ``start_res`` on, up to and including the first record after the window) whose successor holds a
        node that is not in the nodes usable so far and free in it.
        """
        end_time = start_res + limit
        avail = full
        later: float | None = None
        for i, (b, e, m) in enumerate(space):
            b, e, m = float(b), float(e), int(m)
            if later is None and e > start_res and i + 1 < len(space) and int(space[i + 1][2]) & ~(avail & m):
                later = e  # a node reserved so far is released here
            if e <= start_res:
                continue
            if b > end_time:
                break
            avail &= m
        at: float | None = None
        free_now = removed = 0
        if _count(avail) >= cores:
            at, free_now, removed = self._will_run(avail, cores, now, running, busy)
        if at is None:
            return ("none", 0.0, 0) if later is None else ("later", later, 0)
        at = max(at, start_res)
        if at <= now:
            return "now", now, free_now
        if later is not None and at > later:
            return "later", later, 0
        return "reserve", at, self._reserve_nodes(free_now, removed, cores)

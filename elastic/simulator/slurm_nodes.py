"""Slurm 22.05's backfill planned node by node: the ``slurm-nodes`` policy (one-core nodes).

The ``slurm`` policy (:class:`~elastic.simulator.conservative.SlurmBackfill`) plans cores and groups every
running job in its will-run estimate. ``slurmctld`` plans nodes (``_attempt_backfill`` in
``src/plugins/sched/backfill/backfill.c``, ``_will_run_test`` in
``src/plugins/select/cons_common/job_test.c``, ``_eval_nodes_busy`` in
``src/plugins/select/cons_tres/job_test.c``), and this policy does as they do on a partition of one-core
nodes (where a node is a core), with ``bf_busy_nodes`` set:

- a pending job may use only the nodes no higher-priority job has reserved anywhere in its window
  ``[start_res, start_res + limit]`` (both ends included, as ``node_space`` is scanned);
- its will-run estimate groups only the running jobs on those nodes (:func:`will_run_releases`'s windows,
  the barrier taken from the first of them) and plans it at the end of the last job of the first group
  after which it fits;
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
0.947 and 0.878 on the synthetic runs (0.936, 0.915, 0.882); docs/results/simulator.md.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from elastic.simulator.conservative import SlurmBackfill, will_run_releases
from elastic.simulator.jobs import PENDING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["SlurmNodeBackfill", "best_fit", "lowest"]


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
        mine = [(end, self.placement[j]) for end, j in running if self.placement[j] & avail]
        if not mine:
            return None, free_now, 0
        releases = will_run_releases([end for end, _ in mine], -math.inf, self.window, self.origin)
        removed = 0
        for k, (_, nodes) in enumerate(mine):
            removed |= nodes & avail
            group_ends = k + 1 == len(mine) or releases[k + 1] != releases[k]
            if group_ends and _count(free_now | removed) >= cores:
                return max(releases[k], now), free_now, removed
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
        started = False
        for j in list(q):
            if busy == full:
                break  # nothing can start now; the next pass plans again
            c, limit = int(cores[j]), float(wall[j])
            start_res = now
            for _ in range(4 * len(reserved) + 8):  # each retry moves start_res to a later boundary
                kind, at, chosen = self._test(reserved, full, now, start_res, limit, c, running, busy)
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
                self.reservations.setdefault(j, at)
                break
        if started:
            state = engine.jobs.state
            q[:] = [j for j in q if state[j] == PENDING]

    def _test(
        self,
        reserved: list[tuple[float, float, int]],
        full: int,
        now: float,
        start_res: float,
        limit: float,
        cores: int,
        running: list[tuple[float, int]],
        busy: int,
    ) -> tuple[str, float, int]:
        """One test of a job from ``start_res``: ``(kind, time, nodes)``.

        ``("none", 0, 0)``: no reservation; ``("later", t, 0)``: test again from ``t``; ``("now", now,
        free nodes)``: it starts now; ``("reserve", start, nodes)``: a reservation.
        """
        bounds = sorted({now} | {t for s, e, _ in reserved for t in (s, e) if t > now})
        free_in: list[int] = []
        for b in bounds:
            taken = 0
            for s, e, m in reserved:
                if s <= b < e:
                    taken |= m
            free_in.append(full & ~taken)
        avail = full
        later: float | None = None
        for i, b in enumerate(bounds):
            last = i + 1 == len(bounds)
            end = math.inf if last else bounds[i + 1]
            if later is None and not last and end > start_res and free_in[i + 1] & ~(avail & free_in[i]):
                later = end  # a node reserved so far is released here
            if end <= start_res:
                continue
            if b > start_res + limit:
                break
            avail &= free_in[i]
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

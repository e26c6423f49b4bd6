"""CP-based dispatching on OR-Tools CP-SAT, after Galleguillos et al. (CP 2019), PCP3/HCP3.

At every scheduling pass the dispatcher builds a small scheduling model and starts the jobs the solution
starts now; the rest stay queued (the paper's on-line dispatching):

* **Model reduction** (paper, Section 3): at most ``window`` queued jobs are modelled, taken by priority
  (HCP's ``m = 100``); cores are pooled, as in HCP (one ``cumulative`` over the partition's cores). The
  paper also drops the jobs that do not fit in the resources free now; then a wide job never enters
  the model while narrower ones keep the cores busy, so it is an option (``fitting_only``) rather than
  the default: with the wider jobs in the model, their planned start keeps the others from starving
  them.
* **Durations**: a job's duration is its *prediction* (:class:`CpDispatch` takes a mapping; by default the
  requested walltime, the paper's "wall-time approach"). A running job occupies its cores for what its
  prediction leaves, and at least one second when it already ran longer than predicted (PCP2/HCP2's fix
  for underestimation).
* **Objective and search** (PCP3/HCP3): minimise the total slowdown ``sum (s_i - q_i + d_i) / d_i``, i.e.
  ``sum s_i / d_i`` up to a constant; priority = slowdown so far ``(t - q_i + d_i) / d_i``. The search
  branches on start times in priority order, smallest value first (the schedule-or-postpone heuristic),
  from a hint: the priority-order list schedule.
* **Time limit with fallback**: a decision takes about ``time_limit`` seconds (model building included;
  the solver gets the rest, at least 5 ms); without a solution by then, the hint's decision (the list
  schedule) is used, so a decision is always made.

OR-Tools is an optional dependency (the ``cp`` extra): building a :class:`CpDispatch` without it raises
:class:`~elastic.errors.ConfigError` naming the extra.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from elastic.errors import ConfigError
from elastic.simulator.conservative import Profile
from elastic.simulator.jobs import PENDING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["OBJECTIVES", "WINDOW", "CpDispatch", "require_ortools"]

WINDOW = 100
"""Queued jobs modelled per decision (HCP's ``m``)."""
OBJECTIVES = ("slowdown", "wait")
"""``slowdown``: PCP3/HCP3's total slowdown, priority by slowdown so far; ``wait``: total waiting time,
priority by waiting time (PCP1/HCP1 with a single queue, where the expected-wait weights are equal)."""


def require_ortools() -> Any:
    """Return OR-Tools' ``cp_model`` module, or raise a :class:`ConfigError` saying how to install it.

    Raises
    ------
    ConfigError
        OR-Tools is not installed.
    """
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:
        raise ConfigError(
            'CP dispatching needs OR-Tools, which is not installed: pip install "elastic-hpc[cp]" '
            "(the 'cp' extra; or pip install ortools)"
        ) from exc
    return cp_model


class CpDispatch:
    """CP-SAT dispatcher minimising total slowdown over the jobs that can start now.

    Parameters
    ----------
    durations : mapping of int to float or None
        Predicted duration (seconds) of each engine job; jobs missing from it (or None) use their
        requested walltime.
    time_limit : float
        Seconds per decision (> 0): building the model, then searching for what is left (at least 5 ms).
    window : int
        Queued jobs modelled per decision, by priority (>= 1).
    fitting_only : bool
        Model only the jobs that fit in the cores free now (the paper's reduction).
    objective : {"slowdown", "wait"}
        See :data:`OBJECTIVES`.
    work_limit : float or None
        Instead of ``time_limit``, stop each search after this many of CP-SAT's deterministic time
        units (``max_deterministic_time``), so that a simulation gives the same decisions however busy
        the machine is (for experiments; on-line, the wall-clock limit bounds the decision time).

    Attributes
    ----------
    decision_times : list of float
        Wall-clock seconds of each decision that had two or more candidate jobs and could not start
        them all (model building, solving, and the fallback when used).
    solved : int
        Decisions taken from a CP-SAT solution.
    fallbacks : int
        Decisions where the solver found no solution in time and the list schedule was used.

    Raises
    ------
    ConfigError
        OR-Tools is missing, or a parameter is out of range.
    """

    name = "cp"

    def __init__(
        self,
        durations: Mapping[int, float] | None = None,
        *,
        time_limit: float = 0.05,
        window: int = WINDOW,
        fitting_only: bool = False,
        objective: str = "slowdown",
        work_limit: float | None = None,
    ) -> None:
        self._cp = require_ortools()
        if not (math.isfinite(time_limit) and time_limit > 0):
            raise ConfigError(f"time_limit must be a positive number of seconds, got {time_limit}")
        if window < 1:
            raise ConfigError(f"window must be >= 1, got {window}")
        self.durations: Mapping[int, float] = durations if durations is not None else {}
        self.time_limit = time_limit
        self.window = window
        if objective not in OBJECTIVES:
            raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        if work_limit is not None and not (math.isfinite(work_limit) and work_limit > 0):
            raise ConfigError(f"work_limit must be a positive number, got {work_limit}")
        self.fitting_only = fitting_only
        self.work_limit = work_limit
        self.objective = objective
        self.reservations: dict[int, float] = {}
        self.decision_times: list[float] = []
        self.solved = 0
        self.fallbacks = 0

    def _duration(self, engine: Engine, j: int) -> int:
        d = self.durations.get(j)
        if d is None:
            d = engine.jobs.walltime[j]
        return max(1, math.ceil(d))

    def schedule(self, engine: Engine) -> None:
        """Start the queued jobs that the CP solution (or, failing it, the list schedule) starts now."""
        q = engine.queue
        free = engine.cluster.free
        if not q or not free:
            return
        jobs = engine.jobs
        cores = jobs.cores
        now = engine.now
        cand = [j for j in q if cores[j] <= free] if self.fitting_only else list(q)
        if not any(cores[j] <= free for j in cand):
            return
        dur = {j: self._duration(engine, j) for j in cand}
        submit = jobs.submit
        rank = jobs.rank
        if self.objective == "slowdown":
            cand = heapq.nsmallest(
                self.window, cand, key=lambda j: ((submit[j] - now - dur[j]) / dur[j], rank[j])
            )
        else:
            cand = heapq.nsmallest(self.window, cand, key=lambda j: (submit[j], rank[j]))
        if sum(cores[j] for j in cand) <= free:
            self._start(engine, cand)
            return
        t0 = time.perf_counter()
        chosen = self._decide(engine, cand, dur, t0)
        self.decision_times.append(time.perf_counter() - t0)
        self._start(engine, chosen)

    def _decide(self, engine: Engine, cand: list[int], dur: Mapping[int, int], t0: float) -> list[int]:
        cp = self._cp
        jobs = engine.jobs
        cores = jobs.cores
        now = engine.now
        capacity = engine.cluster.total
        # The running jobs' predicted remaining time (at least 1 s: PCP2's fix for underestimation).
        running = []
        for _, j in engine.running:
            left = max(1, math.ceil(jobs.start[j] + self._duration(engine, j) - now))
            running.append((left, cores[j]))
        # The hint and fallback: the list schedule in priority order.
        profile = Profile(0.0, capacity - sum(c for _, c in running))
        for left, c in sorted(running):
            profile.release(float(left), c)
        hint = {}
        for j in cand:
            at = profile.earliest(cores[j], dur[j])
            profile.reserve(at, dur[j], cores[j])
            hint[j] = int(at)
        horizon = max((left for left, _ in running), default=0) + sum(dur.values())
        model = cp.CpModel()
        intervals, demands = [], []
        for left, c in running:
            intervals.append(model.new_fixed_size_interval_var(0, left, ""))
            demands.append(c)
        starts = {}
        longest = max(dur.values())
        objective = []
        for j in cand:
            s = model.new_int_var(0, horizon, "")
            starts[j] = s
            intervals.append(model.new_fixed_size_interval_var(s, dur[j], ""))
            demands.append(cores[j])
            model.add_hint(s, hint[j])
            objective.append(max(1, round(longest / dur[j])) * s if self.objective == "slowdown" else s)
        model.add_cumulative(intervals, demands, capacity)
        model.minimize(sum(objective))
        model.add_decision_strategy([starts[j] for j in cand], cp.CHOOSE_FIRST, cp.SELECT_MIN_VALUE)
        solver = cp.CpSolver()
        if self.work_limit is not None:
            # Reproducible: CP-SAT's deterministic work units, whatever else runs on the machine.
            solver.parameters.max_deterministic_time = self.work_limit
        else:
            # The limit covers the whole decision: the solver gets what building the model left of it.
            solver.parameters.max_time_in_seconds = max(0.005, self.time_limit - (time.perf_counter() - t0))
        solver.parameters.num_workers = 1
        # The models are small and solved thousands of times: presolve costs more than it saves.
        solver.parameters.cp_model_presolve = False
        status = solver.solve(model)
        if status in (cp.OPTIMAL, cp.FEASIBLE):
            self.solved += 1
            return [j for j in cand if solver.value(starts[j]) == 0]
        self.fallbacks += 1
        return [j for j in cand if hint[j] == 0]

    def _start(self, engine: Engine, chosen: list[int]) -> None:
        cl = engine.cluster
        jobs = engine.jobs
        started = False
        for j in chosen:
            if cl.fits(jobs.cores[j], jobs.whole[j]):
                engine.start(j)
                started = True
        if started:
            state = jobs.state
            engine.queue[:] = [j for j in engine.queue if state[j] == PENDING]

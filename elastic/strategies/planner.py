"""``asa``: plan allocations across the whole remaining workflow, re-planned at every decision.

For the stages still to run, the planner chooses where each one runs: on the allocation it follows (the
one held now, or the one the stage before it runs on: :mod:`~elastic.strategies.hold`,
:mod:`~elastic.strategies.merge`), or on a new allocation of some width, requested at a time the timing
rule sets (:mod:`~elastic.strategies.timing`). Each choice is priced in core-seconds charged plus
``beta`` per second of makespan (``beta = weight x`` the widest stage's cores), and the cheapest
sequence of choices is found by a search stage by stage (:func:`plan`) that carries each partial plan's
delay as a distribution: allocations requested at once wait side by side, and the run is delayed by
the longer wait, not by the sum (:func:`timing.acquire_delayed`).

Which wait. Where the backend gives the scheduler's estimate of a new job's wait (``sbatch --test-only``:
:attr:`~elastic.strategies.base.RunView.estimate`), every new allocation's wait is priced by it, asked
afresh at every decision: on the synthetic queue and HPC2N replay it ranks the waits that follow at
0.89-0.95 (Spearman; the run's latest wait at 0.18-0.35), and it sees the hour-long wait a run meets
after minutes-long ones coming, which no learner fed by that run's waits can. It is pessimistic (every
running job is held to its walltime: the median wait that followed an estimate of over 10 minutes was
0.46-0.73x of it), which costs some idle cores bought early; ``estimates=False`` does without it.
``calibrate`` scales it by its bias learned from this run's own requests (the estimate each was made on
against the wait until its first piece started: :func:`estimate_bias`), which a Slurm user can compute.
A request for a stage that starts once this run's running allocation is released is priced by the
estimate with that allocation released when it will be (``releasing``,
:class:`~elastic.strategies.base.Estimate`): held to its walltime, it would make every such request look
long whenever the rest of the machine is busy (asked at the last decision before each wide allocation's
release, for the next request of that width, the estimate ranked the wait that followed at 0.76
plainly and 1.00 released on Statistics 56 on HPC2N replay, 0.65 and 0.75 on Statistics 112; with no
release at all, Statistics 112 cost 247.8 core-h instead of 235.8). ``benchmarks/bench_estimate_rank.py``
measures both.
Without an estimate: the wait of a
run's first allocation is a distribution (quantiles from
:meth:`~elastic.strategies.knowledge.Knowledge.wait_quantiles`), updated by every wait the runs sharing
its learner see. Once an allocation of the run has started, a follow-up's wait is priced as the run's
latest wait (:meth:`~elastic.strategies.base.RunView.latest_wait`; ``run_waits=False``: the learned
follow-up distribution instead). Waits within one run correlate at 0.76-0.81 (rank, synthetic queue and
HPC2N replay), while the learned distribution of a queue whose waits are mostly 0 with a few of hours
is a log-normal of huge spread whose mean is days: priced by it, every short narrow stage is worth
holding the wide allocation across, in every run. (The learner's quantiles are capped at the longest
wait it saw, :class:`~elastic.learners.ewma.LogEWMA`; the spread stays.) Issue 9's grid
(``docs/guide/asa-planning.md``) measured both.

What :meth:`Planner.decide` does, each time it is asked:

1. **For each running allocation**, at every decision (not only at its stage boundaries: a wide job
   that takes the machine while the current stage runs makes the release planned at its start wrong):
   plan the stages after the current one that no other allocation is kept for, with this allocation
   held; keep it for the leading stages the plan runs on it, as far as its walltime covers them
   (:func:`~elastic.strategies.hold.hold_through`), and no further (:class:`~elastic.strategies.base.Serve`).
   One that started before its stage can start and idles is released when idling until then costs more
   than asking again (:func:`~elastic.strategies.hold.release_early`), or when its stage cannot end on
   it (:func:`~elastic.strategies.hold.expires_idle`).
2. **For stages no allocation is kept for**: plan them from the moment they are needed (their
   predecessors' predicted end), and request each planned group's allocation (:func:`merge.groups`)
   when the timing rule says: at once with ``afterany`` on the allocation before it where held jobs
   keep their queue place, else at *need - lead* without a dependency. The walltime covers the group,
   and more where the scheduler's estimate says the longer request waits no longer
   (:meth:`Planner._headroom`): a batch job's walltime cannot be extended once it runs, and only then can
   step 1 hold it across a wait foreseen later, as Big-Job would. Unused walltime is not charged. Each
   allocation is asked for as ``pieces`` batch jobs (default 2): step 1 can keep some of them across a
   narrow stage (``plan``'s ``shrink``, the next wide stage in waves on them), and each asks walltime
   for two waves of its stages where the scheduler's estimate says that costs no wait, since it may
   start before the others (:meth:`Planner._waves_walltime`).
3. Release allocations whose stages are all done; walltime follow-ups as every strategy
   (:func:`~elastic.strategies.base.walltime_follow_ups`), requested ahead of the expiry by the timing
   rule's lead for a follow-up wait (its newsvendor quantile), not by the mean wait of every phase: on a
   queue whose follow-ups start at once, a follow-up requested hours early idles beside the allocation
   it replaces.
4. **Lower the walltime of requests that still wait once their stage is ready** (:func:`_shortened`,
   :class:`~elastic.strategies.base.Shorten`; Slurm: ``scontrol update TimeLimit``): the walltime asked
   to cover idling before the need can no longer be used, and a shorter job fits backfill gaps.

With a live demand (the front door) the plan is whatever is known: a stage that appears late is planned
when it does (requested at once once ready), and a stage that grows past its allocation runs in waves,
as under Per-Stage. Before any wait is known, getting cores is taken as free: stages of equal width share
an allocation, every other stage gets its own when it is needed (Per-Stage's behaviour).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from elastic.allocations import Allocation
from elastic.batch import DependencyKind
from elastic.errors import ConfigError
from elastic.strategies import hold, merge, timing
from elastic.strategies.base import (
    Action,
    Cancel,
    Decision,
    Releasing,
    RunView,
    Serve,
    StageView,
    Submit,
    release_idle,
    walltime_follow_ups,
)
from elastic.strategies.base import merge as merge_decisions
from elastic.strategies.merge import Choice
from elastic.strategies.planner_rules import (
    SHORTEN_SLACK,
    _as_planned,
    _beside,
    _dag_order,
    _follows_names,
    _known,
    _lead_caps,
    _minute,
    _pieces_for,
    _predecessor_label,
    _released,
    _shortened,
    _subset_widths,
)
from elastic.strategies.search import BEAM, WAVES, StagePlan, Waits, plan

__all__ = ["BEAM", "SHORTEN_SLACK", "WAVES", "Planner", "StagePlan", "Waits", "plan"]

logger = logging.getLogger(__name__)

HEADROOM_SLACK = 60.0
"""Seconds of estimated wait that walltime headroom may cost a request (:meth:`Planner._headroom`)."""

BIAS_FLOOR = 60.0
"""Seconds added to both sides of an estimate's ratio to the wait that followed (:func:`estimate_bias`):
an estimate of 0 followed by a wait of seconds says little."""

BIAS_PRIOR = 1.0
"""Pseudo-observations of an unbiased estimate (ratio 1) the run's own ratios are averaged with
(:func:`estimate_bias`): one short wait after a long estimate does not make every later estimate 0."""


def estimate_bias(ratios: Sequence[float], prior: float = BIAS_PRIOR) -> float:
    """Return the factor to scale the scheduler's estimate by, learned from this run's requests.

    ``ratios`` are ``(wait + BIAS_FLOOR) / (estimate + BIAS_FLOOR)`` of the run's requests so far: the
    wait that followed each estimate the planner requested on. The factor is their geometric mean shrunk
    toward 1 by ``prior`` pseudo-observations of 1: ``exp(sum(log r) / (n + prior))``.

    Examples
    --------
    >>> estimate_bias([])
    1.0
    >>> round(estimate_bias([0.25]), 3)  # one request that waited a quarter of its estimate
    0.5
    >>> round(estimate_bias([0.25, 0.25, 0.25]), 3)
    0.354
    """
    if not ratios:
        return 1.0
    return float(math.exp(sum(math.log(r) for r in ratios) / (len(ratios) + prior)))


class Planner:
    """The ``asa`` strategy: allocation planning across the remaining workflow (module docstring).

    Parameters
    ----------
    weight : float, default 1.0
        Seconds of makespan are priced at ``weight x`` the widest stage's cores per second (core-seconds
        per second), > 0: larger favours makespan (holding, merging, early requests), smaller
        core-hours.
    cover : float, default hold.COVER
        Walltime per second of expected work an allocation needs to be kept for more stages.
    run_waits : bool, default True
        Once an allocation of this run has started, price a follow-up's wait as this run's latest wait
        (of the same width if one started, else of any), not as the learned distribution (module
        docstring, "Which wait").
    estimates : bool, default True
        Where the backend gives the scheduler's estimate of a new job's wait (:attr:`RunView.estimate`),
        price every new allocation's wait by it (module docstring, "Which wait").
    pieces : int, default 2
        Batch jobs each new allocation is requested as (:attr:`~elastic.strategies.base.Submit.pieces`;
        at most one per core): a piece idle in its stage's tail is released, and a hold can keep some
        pieces across a narrow stage, the next wide stage then running on them in waves. 1: one job.
    reuse : bool, default False
        Reuse a search's result (:func:`plan`) while its inputs, in the backend's time, are the same:
        the stages it plans (width; work, or for a started one its expected end), when the first is
        needed, the cores held, the allocations it releases, the knowledge's version, the waits this run
        saw, and the queue the scheduler's estimate reads (:attr:`RunView.queue_version`; where the
        backend cannot say, every decision searches). Only the clock moves between two such searches;
        the timing rules (when to request, release, follow up or shorten) still run at every decision.
        This is not the same planner: the search prices waits against the time left until each stage's
        need, which the clock alone changes, so a kept result can differ from a fresh one.
        ``benchmarks/bench_planner_cost.py --reuse`` measures what it saves.
    calibrate : bool, default True
        Scale the scheduler's estimate by its bias learned from this run's own requests: each request
        made on an estimate (not chained by a dependency) is paired with the wait that followed (until
        its first piece started; one still pending counts once it has waited longer than the scaled
        estimate says), and the estimate is multiplied by :func:`estimate_bias` of those ratios
        (:meth:`Planner._calibrated`). Only what a Slurm user sees is read: the estimate given at
        submission (``sbatch --test-only``) and the job's start. Tuned on the published shapes
        (synthetic queue, 28 cores) and checked on the paper's chains (synthetic, 28 and 56 cores;
        Montage 28 on HPC2N replay) before it became the default: ``docs/results/strategies.md``.

    Examples
    --------
    >>> Planner().name
    'asa'
    """

    name = "asa"

    def __init__(
        self,
        *,
        weight: float = 1.0,
        cover: float = hold.COVER,
        run_waits: bool = True,
        estimates: bool = True,
        pieces: int = 2,
        reuse: bool = False,
        calibrate: bool = True,
    ) -> None:
        if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight > 0):
            raise ConfigError(f"asa: weight must be a finite number > 0, got {weight!r}")
        if not cover >= 1.0:
            raise ConfigError(f"asa: cover must be >= 1, got {cover!r}")
        if not (isinstance(pieces, int) and pieces >= 1):
            raise ConfigError(f"asa: pieces must be a whole number >= 1, got {pieces!r}")
        self.weight = float(weight)
        self.cover = float(cover)
        self.run_waits = bool(run_waits)
        self.estimates = bool(estimates)
        self.pieces = pieces
        self.reuse = bool(reuse)
        self.calibrate = bool(calibrate)
        self._given: dict[tuple[float, str], float] = {}  # (decision time, label): the estimate requested on
        self._bias: tuple[float | None, float] = (None, 1.0)
        self._plans: tuple[Hashable | None, dict[Hashable, tuple[float, tuple[Choice, ...]]]] = (None, {})
        self._asked: tuple[object, dict[tuple[int, Releasing], float | None]] = (None, {})
        self._requested: dict[str, tuple[str, ...]] = {}

    # -- what the view says ------------------------------------------------------------------------------

    def _prices(self, view: RunView) -> timing.Prices:
        return timing.Prices(beta=self.weight * max((s.width for s in view.stages), default=1))

    def _waits(self, view: RunView, cores: int, follow_up: bool, releasing: Releasing = ()) -> np.ndarray:
        """Return quantiles of a new allocation's wait (module docstring, "Which wait").

        The scheduler's estimate where it gives one, with this run's allocations in ``releasing`` ending
        when it releases them (those the allocation is requested to follow); else, for a follow-up once
        this run saw a wait, the run's latest wait; else the learned distribution.
        """
        estimate = self._estimate(view, cores, releasing)
        if estimate is not None:
            return np.full(len(timing.PROBS), estimate * self._calibrated(view))
        if follow_up and self.run_waits:
            latest = view.latest_wait(cores)
            if latest is not None:
                return np.full(len(timing.PROBS), latest)
        return view.knowledge.wait_quantiles(cores, timing.PROBS, follow_up=follow_up)

    def _estimate(self, view: RunView, cores: int, releasing: Releasing = ()) -> float | None:
        """Return the scheduler's estimate of the wait of ``cores`` cores asked for now (None: none, or off).

        Asked for the longest walltime a stage of that width still to run would request (of any stage
        if none is of that width), since a job's walltime decides where it can backfill, with the
        allocations in ``releasing`` ending when they are released; once per width and ``releasing`` per
        decision.
        """
        if not self.estimates or view.estimate is None:
            return None
        if self._asked[0] != (view.now, view.estimate):
            self._asked = ((view.now, view.estimate), {})
        answers = self._asked[1]
        key = (cores, releasing)
        if key not in answers:
            left = [s for s in view.stages if not s.complete]
            same = [s for s in left if s.width == cores] or left
            walltime = max((view.knowledge.walltime(s.name) for s in same), default=None)
            answers[key] = None if walltime is None else view.estimate(cores, walltime, releasing)
        return answers[key]

    def _calibrated(self, view: RunView) -> float:
        """Return the factor the scheduler's estimate is scaled by now (1 unless :attr:`calibrate`).

        Each request made on an estimate (:attr:`_given`, by decision time and label) is matched to the
        first request of that label submitted then; its wait is until its first piece started (from then
        its cores may idle; on the published shapes, synthetic queue, 28 cores, the last piece's start
        left 6 of 7 cells over 1.10x Per-Stage's core-hours, the first piece's 2). One none of whose
        pieces started counts, as a lower bound, once the ratio of its wait so far exceeds the factor
        from the started ones.
        """
        if not self.calibrate or not self._given:
            return 1.0
        if self._bias[0] == view.now:
            return self._bias[1]
        requests: dict[str, list[Allocation]] = {}
        for a in view.allocations:
            requests.setdefault(a.request, []).append(a)
        done: list[float] = []
        waiting: list[float] = []
        used: set[str] = set()
        for (t, label), given in self._given.items():
            match = next(
                (
                    r
                    for r, jobs in requests.items()
                    if r not in used
                    and jobs[0].stage == label
                    and jobs[0].submit_time is not None
                    and abs(jobs[0].submit_time - t) <= 1.0
                    and all(j.eligible_time is None or j.eligible_time <= t + 1.0 for j in jobs)
                ),
                None,
            )
            if match is None:
                continue
            used.add(match)
            jobs = requests[match]
            starts = [j.start_time for j in jobs]
            if any(s is not None for s in starts):  # its first piece: from then its cores may idle
                wait = min(s for s in starts if s is not None) - t
                done.append((wait + BIAS_FLOOR) / (given + BIAS_FLOOR))
            elif not any(j.ended and j.start_time is None for j in jobs):
                waiting.append((view.now - t + BIAS_FLOOR) / (given + BIAS_FLOOR))
        bias = estimate_bias(done)
        bias = estimate_bias(done + [r for r in waiting if r > bias])
        self._bias = (view.now, bias)
        return bias

    def _work(self, view: RunView, s: StageView) -> float:
        """Return the expected seconds of work ``s`` has left: no sooner than its re-run tasks can end.

        A task lost with its allocation starts again from scratch (:attr:`StageView.rerun_end`): HPC2N
        capacity, Statistics 28, run 1, the straggler of ``chunk_stats`` lost at its allocation's walltime
        after an hour ran another hour, while ``period_stats``'s 28 cores, started at that instant, idled
        through it, priced as if the stage ended at once, and were released only once they could no
        longer cover their stage (29 core-h idle).
        """
        k = view.knowledge
        if s.complete:
            return 0.0
        if s.start_time is None:
            return k.expected_duration(s.name)
        elapsed = view.now - s.start_time
        left = max(0.0, k.expected_duration(s.name, elapsed) - elapsed)
        if s.rerun_end is not None:
            left = max(left, s.rerun_end - view.now)
        return left

    def _chain_plans(self, view: RunView, chain: Sequence[StageView]) -> list[StagePlan]:
        """Return the search's stages for ``chain`` (:func:`_dag_order`), each with its siblings' cores."""
        works = [self._work(view, s) for s in chain]
        beside = _beside(chain, works)
        return [StagePlan(s.name, s.width, w, b) for s, w, b in zip(chain, works, beside, strict=True)]

    def _end(self, view: RunView, name: str, seen: dict[str, float | None]) -> float | None:
        """Predicted end of stage ``name`` (None: it has no allocation and is not ready to plan)."""
        if name in seen:
            return seen[name]
        seen[name] = None  # guards against cycles in a malformed live plan
        s = view.stage(name)
        if s.end_time is not None:
            end: float | None = s.end_time
        elif s.start_time is not None:
            end = view.now + self._work(view, s)
        else:
            start: float | None = view.now
            for dep in s.depends_on:
                e = self._end(view, dep, seen)
                start = None if e is None or start is None else max(start, e)
            live = view.allocations_serving(name, live_only=True)
            if start is not None and live:
                start = max(start, min(self._ready(view, a, seen) for a in live))
            end = None if start is None or not live else start + self._work(view, s)
        seen[name] = end
        return end

    def _ready(self, view: RunView, a: Allocation, seen: dict[str, float | None]) -> float:
        """Predicted start of allocation ``a`` (now if it runs)."""
        if a.running:
            return view.now
        eligible = a.eligible_time
        if eligible is None:
            eligible = a.submit_time if a.submit_time is not None else view.now
            for dep_id, _ in a.dependencies:
                dep = next((b for b in view.allocations if b.alloc_id == dep_id), None)
                if dep is None or dep.end_time is not None:
                    continue
                ends = [self._end(view, x, seen) for x in dep.labels if _known(view, x)]
                eligible = max([eligible, *(e for e in ends if e is not None)])
        waited = max(0.0, view.now - eligible)
        q = self._waits(view, a.cores, True)
        tail = q[q > waited]
        return max(view.now, eligible + (float(tail.mean()) if len(tail) else waited))

    def _wait_fn(self, view: RunView, releasing: Releasing = ()) -> Waits:
        """Return :meth:`_waits` for stages that start once the allocations in ``releasing`` are released."""
        return lambda cores, follow_up: self._waits(view, cores, follow_up, releasing)

    def _waves_walltime(
        self, view: RunView, width: int, walltime: float, idling: float = 0.0, releasing: Releasing = ()
    ) -> float:
        """Return the walltime a piece of ``width`` cores asks for stages of ``walltime``: one wave, or two.

        The pieces of a request wait in the queue apart: one that starts before the others runs its stages'
        tasks alone, in waves, until they do, and asked for one wave it can run out with tasks on it (HPC2N
        replay, Montage 56, run 21: ``background``'s first piece started 0.6 h before the second, timed
        out with its second wave running, and the follow-up waited 7 h). But a longer walltime waits longer
        where the scheduler plans every job's walltime (conservative backfill): on HPC2N capacity against
        baselines split as finely, pieces asking two waves took 1.05-1.64x the better baseline's makespan.
        So a piece asks :data:`WAVES` waves only where the scheduler's estimate starts it no later (within
        :data:`HEADROOM_SLACK`) than with one, as :meth:`_headroom` does for holds; without an estimate,
        one wave (the walltime rule's follow-up continues a piece that runs out). ``idling``: walltime
        asked on top, to idle until the stages' need.
        """
        one = walltime + idling
        if not self.estimates or view.estimate is None:
            return one
        short_wait = view.estimate(width, one, releasing)
        if short_wait is None:
            return one
        waves = walltime * WAVES + idling
        long_wait = view.estimate(width, waves, releasing)
        return waves if long_wait is not None and long_wait <= short_wait + HEADROOM_SLACK else one

    def _headroom(self, view: RunView, g: merge.Group, walltime: float, releasing: Releasing) -> float:
        """Return the walltime to request for group ``g``: ``walltime``, or more where it costs no wait.

        An allocation can be held across the stages after its own (:func:`hold.hold_through`) only if its
        walltime covers them, and a batch job's walltime cannot be extended once it runs. Two extensions,
        each asked of the scheduler's estimate (without one, or when it is off, nothing is added):

        - **For holds**: the stages after ``g`` up to the last one at least as wide as ``g`` (the stages a
          hold of this allocation could save a wait for), where the estimate starts the longer request no
          later (within :data:`HEADROOM_SLACK`) than ``walltime`` alone. Without it, Montage 28 on the
          busy synthetic queue (run 29) could not hold its first allocation across ``fit`` when the
          estimate said 20 h for the next 28 cores, and waited them.
        - **For every stage left** (a trailing narrow stage too: the allocation is then not killed at its
          walltime in the middle of a stage that runs long, which costs a lost task and a follow-up
          wait), only where both requests start at once: where the request waits, a longer walltime can
          lose the backfill holes that open when running jobs end before their walltime, which the
          estimate (every job held to its walltime) cannot see, and for a trailing narrow stage nothing
          is gained in return (BLAST 28 on HPC2N replay, run 16: a first request of 28 cores with merge's
          walltime added waited 23.8 h where Per-Stage's waited 10.3 h).

        Unused walltime is not charged.
        """
        if not self.estimates or view.estimate is None:
            return walltime
        order = [s.name for s in view.stages]
        last = max(order.index(x) for x in g.stages)
        rest = [s for s in view.stages[last + 1 :] if not s.complete and s.name not in g.stages]
        wide = [i for i, s in enumerate(rest) if s.width >= g.cores]
        k = view.knowledge
        cap = math.inf if k.max_walltime is None else max(k.max_walltime, walltime)

        def covering(stages: Sequence[StageView]) -> float:
            return min(walltime + sum(k.walltime(s.name) for s in stages), cap)

        short_wait = view.estimate(g.cores, walltime, releasing)
        if short_wait is None:
            return walltime
        asked = walltime
        everything = covering(rest)
        if everything > walltime and short_wait <= HEADROOM_SLACK:
            long_wait = view.estimate(g.cores, everything, releasing)
            if long_wait is not None and long_wait <= HEADROOM_SLACK:
                return everything
        if wide:
            for_holds = covering(rest[: wide[-1] + 1])
            long_wait = view.estimate(g.cores, for_holds, releasing) if for_holds > walltime else None
            if long_wait is not None and long_wait <= short_wait + HEADROOM_SLACK:
                asked = for_holds
        return asked

    def _released_by(
        self, view: RunView, kept: dict[str, tuple[str, ...]], need: float, seen: dict[str, float | None]
    ) -> Releasing:
        """Return this run's running allocations released by ``need``, each with when it is released.

        One is released when every stage kept on it has ended (predicted), if that is by ``need``; one not
        in ``kept`` is being released by this decision (now). A request for a stage needed at ``need``
        competes for the cores these give back from then on, not with them held to their walltime
        (:class:`~elastic.strategies.base.Estimate`).
        """
        out: list[tuple[str, float]] = []
        for a in view.allocations:
            if not a.running:
                continue
            if a.alloc_id not in kept:  # released by this decision
                out.append((a.alloc_id, _minute(view.now)))
                continue
            labels = [x for x in kept[a.alloc_id] if _known(view, x)]
            ends = [self._end(view, x, seen) for x in labels]
            if labels and all(e is not None and e <= need for e in ends):
                out.append((a.alloc_id, _minute(max(e for e in ends if e is not None))))
        return tuple(sorted(out))

    def _anchored(self, view: RunView, s: StageView, visited: frozenset[str] = frozenset()) -> bool:
        """Whether ``s``'s need rests on running allocations only, not on a pending one's wait to come.

        Every predecessor is done or started, or waits (as do its own predecessors) only on an allocation
        that runs. A need predicted through a pending allocation's wait compounds two guesses (a first
        wait is barely predictable: rank correlation about 0 with the wait that follows); an allocation
        requested on it without a dependency can start days early and idle, with a walltime to match.
        """
        for dep in s.depends_on:
            if dep in visited or not _known(view, dep):
                return False
            d = view.stage(dep)
            if d.complete or d.start_time is not None:
                continue
            if not any(a.running for a in view.allocations_serving(dep, live_only=True)):
                return False
            if not self._anchored(view, d, visited | {dep}):
                return False
        return True

    def _soonest_need(self, view: RunView, s: StageView, memo: dict[str, float]) -> float:
        """When stage ``s`` can start at the soonest: as :meth:`_need`, with no wait for stages before it.

        Where a stage before it has no allocation yet, :meth:`_need` cannot say; an allocation that idles
        until ``s`` can start is priced by this lower bound, so it is never released for idling longer
        than it can be expected to.
        """
        if s.ready:
            return view.now
        start = view.now
        for dep in s.depends_on:
            if dep not in memo:
                memo[dep] = view.now  # guards against cycles in a malformed live plan
                if _known(view, dep):
                    d = view.stage(dep)
                    if d.end_time is not None:
                        memo[dep] = d.end_time
                    elif d.start_time is not None:
                        memo[dep] = view.now + self._work(view, d)
                    else:
                        memo[dep] = self._soonest_need(view, d, memo) + self._work(view, d)
            start = max(start, memo[dep])
        return start

    def _need(self, view: RunView, s: StageView, seen: dict[str, float | None]) -> float | None:
        """When stage ``s`` can start: now if ready, else its predecessors' predicted end (None: unknown)."""
        if s.ready:
            return view.now
        ends = [self._end(view, d, seen) for d in s.depends_on]
        if not ends or any(e is None for e in ends):
            return None
        return max(view.now, *(e for e in ends if e is not None))

    # -- the decision ----------------------------------------------------------------------------------

    def decide(self, view: RunView) -> Decision:
        """Re-plan holds, request planned allocations, release, follow up."""
        inputs = self._inputs(view)
        if inputs is None or inputs != self._plans[0]:
            self._plans = (inputs, {})
        prices = self._prices(view)
        seen: dict[str, float | None] = {}
        held_actions, kept = self._holds(view, prices, seen)
        submits, wake = self._requests(view, prices, kept, seen)
        return merge_decisions(
            Decision(tuple(release_idle(_as_planned(view, kept)))),
            Decision(tuple(held_actions)),
            Decision(tuple(submits), wake),
            Decision(tuple(_shortened(view, lambda width, w: self._waves_walltime(view, width, w)))),
            walltime_follow_ups(
                view,
                [s.name for s in view.stages],
                lead=lambda cores: timing.lead_time(self._waits(view, cores, True), cores, prices),
            ),
        )

    def _inputs(self, view: RunView) -> Hashable | None:
        """Return what the searches of a decision read beside their own arguments (None: reuse nothing).

        The priority model, the knowledge (its version), the waits this run saw and, where the
        scheduler's estimate prices waits, the queue's version (:attr:`reuse`).
        """
        estimated = self.estimates and view.estimate is not None
        if not self.reuse or (estimated and view.queue_version is None):
            return None
        seen = tuple(
            (a.start_time, a.cores, a.queue_wait) for a in view.allocations if a.queue_wait is not None
        )
        return (
            view.priority,
            view.queue_version if estimated else None,
            id(view.knowledge),
            view.knowledge.version,
            seen,
            self._calibrated(view) if estimated else None,
        )

    def _search(
        self, view: RunView, tag: object, stages: list[StagePlan], releasing: Releasing, **kw: Any
    ) -> tuple[float, tuple[Choice, ...]]:
        """Return :func:`plan` of ``stages``, or its result kept while its inputs are alike (:attr:`reuse`).

        Its inputs in the backend's time, not in seconds from now: the stages (width; work left, or for
        one that started its expected end), when the first is needed, the cores held and the widths they
        can be cut to, the allocations ``releasing`` and the decision's other inputs (:meth:`_inputs`).
        ``tag`` tells the searches of one decision apart (which allocation is held, or none).
        """
        inputs, kept = self._plans
        if inputs is None:
            return plan(stages, **kw)
        now = view.now
        started = {s.name for s in view.stages if s.start_time is not None}
        shape = tuple(
            (p.name, p.cores, round(now + p.work, 3) if p.name in started else p.work) for p in stages
        )
        key = (
            tag,
            shape,
            kw["held"],
            round(now + kw["lead"], 3),
            tuple(kw.get("shrink", ())),
            kw.get("follow_up", True),
            kw["prices"],
            kw["model"],
            tuple((a, round(t, 3)) for a, t in releasing),
        )
        if key not in kept:
            if len(kept) > 1000:  # keys of past needs: keep the memory bounded
                kept.clear()
            kept[key] = plan(stages, **kw)
        return kept[key]

    def _holds(
        self, view: RunView, prices: timing.Prices, seen: dict[str, float | None]
    ) -> tuple[list[Action], dict[str, tuple[str, ...]]]:
        """Step 1: for each running allocation, choose the stages it is kept for, or release it early."""
        actions: list[Action] = []
        kept = {a.alloc_id: a.labels for a in view.allocations if not a.ended}
        order = {s.name: s.index for s in view.stages}
        # the batch jobs split from one request (its pieces, run control's job_cores) are planned as one
        # allocation while they are kept for the same stages
        units: dict[tuple[str, tuple[str, ...]], list[Allocation]] = {}
        for a in view.allocations:
            if not a.ended:
                units.setdefault((a.request, a.labels), []).append(a)
        for (unit, _), jobs in units.items():
            live = [b for b in jobs if b.running]
            if not live:
                continue
            a = live[0]
            # pieces still waiting were asked for these stages with the running ones: the plan counts them,
            # and none is cut away until all have started
            waiting = [b for b in jobs if b.pending]
            cores = sum(b.cores for b in live + waiting)
            open_labels = sorted(
                (x for x in a.labels if x in order and not view.stage(x).complete), key=order.__getitem__
            )
            if not open_labels:
                continue
            current = view.stage(open_labels[0])
            need = self._need(view, current, seen)
            current_work = self._work(view, current)
            busy = sum(view.busy_cores(b.alloc_id) for b in live)
            idle = not current.ready and busy == 0 and need is not None
            walltime_end = min(b.walltime_end or 0.0 for b in live)
            mine = {b.alloc_id for b in jobs}
            reason = None
            if idle and hold.expires_idle(walltime_end, need or 0.0, current_work):
                reason = f"started too early: {current.name} cannot end on it"
            elif not current.ready and busy == 0:
                soonest = self._soonest_need(view, current, {})
                back = self._waits(view, cores, True, _released(mine, view.now))  # to get them back
                early = soonest - view.now
                again = timing.acquire_cost(back, cores, prices, lead=early, model=view.priority)
                if hold.release_early(cores, early, again):
                    reason = f"started {soonest - view.now:.0f} s early for {current.name}: ask again later"
            if reason is not None:
                for b in jobs:
                    actions.append(Cancel(b.alloc_id, reason))
                    kept.pop(b.alloc_id)
                continue
            requested = self._requested.setdefault(unit, a.labels)  # before any hold changed them
            others = {x for b, labels in kept.items() if b not in mine for x in labels}
            after: list[StageView] = []
            here = {current.name}
            for s in view.stages[current.index + 1 :]:
                # kept for another allocation, or on a branch that does not start from this stage: planned
                # on its own (and so is every stage after it on that branch, which then waits for a stage
                # neither done nor here); a later sibling of a stage here still joins (:func:`_follows`)
                if s.complete or s.name in others or not _follows_names(view, s, here):
                    continue
                after.append(s)
                here.add(s.name)
            if not after:
                continue
            after = _dag_order([current, *after])[1:]
            plans = self._chain_plans(view, [current, *after])[1:]
            until = current_work + (0.0 if need is None else need - view.now)
            # a new allocation in this plan replaces this one, released once its current stage ends
            releasing = _released(mine, view.now + until)
            waits = self._wait_fn(view, releasing)
            model = view.priority
            cost, choices = self._search(
                view,
                unit,
                plans,
                releasing,
                held=cores,
                lead=until,
                waits=waits,
                prices=prices,
                model=model,
                shrink=() if waiting else _subset_widths([b.cores for b in live]),
            )
            logger.debug(
                "asa: boundary %s at %s (held %d): %s, cost %.0f",
                unit,
                current.name,
                cores,
                [(c.stage, c.cores, c.new) for c in choices],
                cost,
            )
            wanted = merge.groups(choices)[0]
            names = wanted.stages if wanted.held else ()
            keep = _pieces_for(live, wanted.cores, view.busy_cores) if names and not waiting else jobs
            keep_ids = {b.alloc_id for b in keep}
            waves = {p.name: math.ceil(p.cores / sum(b.cores for b in keep)) for p in plans}
            # stages it was requested for are covered by its walltime; more must fit in what is left
            planned = [x for x in names if x in requested and waves[x] == 1]
            extra = names[len(planned) :] if tuple(planned) == names[: len(planned)] else names
            in_planned, in_extra = set(planned), set(extra)  # sets: a chain's plans are many
            base = until + sum(p.work for p in plans if p.name in in_planned)
            works = [waves[p.name] * p.work for p in plans if p.name in in_extra]
            left = min(b.remaining(view.now) for b in keep)
            added = hold.hold_through(left, base, extra, works, cover=self.cover)
            names = (*names[: len(names) - len(extra)], *added)
            later = {s.name for s in after}
            own = tuple(x for x in a.labels if x not in later)
            held = ", ".join(names) or "nothing more"
            for b in jobs:
                serves = (*own, *names) if b.alloc_id in keep_ids else own
                if set(serves) != set(b.labels):
                    why = f"keep for {held}" if b.alloc_id in keep_ids else f"released after {current.name}"
                    if len(keep) < len(live) and b.alloc_id in keep_ids:
                        why += f" ({sum(c.cores for c in keep)} of {cores} cores: the rest are released)"
                    actions.append(Serve(b.alloc_id, serves, f"stage boundary at {current.name}: {why}"))
                    kept[b.alloc_id] = serves
        return actions, kept

    def _requests(
        self,
        view: RunView,
        prices: timing.Prices,
        kept: dict[str, tuple[str, ...]],
        seen: dict[str, float | None],
    ) -> tuple[list[Submit], float | None]:
        """Step 2: plan the stages no allocation is kept for, and request what is due."""
        covered = {x for labels in kept.values() for x in labels}
        segments: list[list[StageView]] = []
        names: dict[int, set[str]] = {}  # by id of a segment, its stages' names
        joinable: list[StageView] | None = None  # a stage without declared dependencies joins it
        for s in view.stages:
            if s.complete or s.name in covered:
                joinable = None
                continue
            # a ready stage is needed now, whatever comes before it in the plan: a stage of a remembered or
            # declared plan that has no task yet (the script changed since) must not hold it back. On a DAG
            # a stage joins the latest segment it follows (:func:`_follows`: a child of one of its stages,
            # with nothing else to wait for), not merely the one before it in the plan; one that follows
            # none (it waits for stages of two segments, or starts a branch) is planned from its own need
            home = None
            if not s.ready:
                if not s.depends_on:
                    home = joinable
                else:
                    home = next(
                        (seg for seg in reversed(segments) if _follows_names(view, s, names[id(seg)])), None
                    )
            if home is None:
                home = [s]
                segments.append(home)
                names[id(home)] = {s.name}
            else:
                home.append(s)
                names[id(home)].add(s.name)
            joinable = home
        caps = _lead_caps(view)
        submits: list[Submit] = []
        wake: float | None = None
        follow_up = bool(view.allocations)
        for segment in (seg for seg in segments if seg):
            segment = _dag_order(segment)
            first = segment[0]
            need = self._need(view, first, seen)
            if need is None:
                continue
            plans = self._chain_plans(view, segment)
            released = self._released_by(view, kept, need, seen)
            cost, choices = self._search(
                view,
                None,
                plans,
                released,
                held=0,
                lead=need - view.now,
                waits=self._wait_fn(view, released),
                prices=prices,
                model=view.priority,
                follow_up=follow_up,
            )
            logger.debug(
                "asa: plan from %s needed in %.0f s: %s, cost %.0f",
                first.name,
                need - view.now,
                [(c.stage, c.cores, c.new) for c in choices],
                cost,
            )
            before = _predecessor_label(view, first)
            work = {p.name: p.work for p in plans}
            ends: dict[str, tuple[float, str | None]] = {}  # stage: its predicted end, its group's label
            stopped: set[str] = set()  # stages of groups not requested yet, and of the groups after them
            previous: tuple[str, ...] = ()
            for i, g in enumerate(merge.groups(choices)):
                head = view.stage(g.stages[0])
                # on a DAG a group waits for its own predecessors only: a sibling's group is needed when
                # their stages end, not after the group before it in the plan, and is requested even where
                # that one is not yet (a stage with no declared dependency follows the group before it)
                preds = head.depends_on or previous
                previous = g.stages
                if any(d in stopped for d in preds):
                    stopped.update(g.stages)
                    continue
                inside = [ends[d] for d in preds if d in ends]
                if inside:
                    need, before = max(inside, key=lambda e: e[0])
                    own = self._need(view, head, seen)
                    need = need if own is None else max(need, own)
                waits = self._waits(view, g.cores, follow_up or i > 0, released)
                ready = view.stage(g.stages[0]).ready
                chain = timing.keeps_place(view.priority) and not ready
                if chain and before is None:
                    stopped.update(g.stages)  # the allocation before it is not requested yet: chain it then
                    continue
                walltime = merge.group_walltime(view.knowledge, g.stages)
                lead = min(timing.lead_time(waits, g.cores, prices), caps.get(g.stages[0], math.inf))
                at = view.now if ready or chain else need - lead
                # needed after more than its walltime, by a wait still to come
                guessed = (
                    not ready
                    and not chain
                    and need - view.now > walltime
                    and (i > 0 or not self._anchored(view, first))
                )
                if guessed and at > view.now:
                    # not expected to wait that long itself: ask once that wait came. One whose own wait
                    # is expected to reach its need is asked now, beside it, as :func:`plan` priced it
                    # (its wait then runs beside the one before it, not after it)
                    stopped.update(g.stages)
                    continue
                if at <= view.now:
                    early = 0.0 if chain else max(0.0, need - view.now)
                    # covers idling until the need, but not for days on a guessed need: a job asking
                    # weeks of walltime may never start (HPC2N capacity); one that starts that early is
                    # released (hold.expires_idle) and asked again
                    idling = min(early, walltime) if guessed else early
                    pieces = min(self.pieces, g.cores)
                    own = walltime + idling
                    if pieces > 1:  # the widest piece's
                        own = self._waves_walltime(view, -(-g.cores // pieces), walltime, idling, released)
                    asked = self._headroom(view, g, own, released)
                    given = None if chain else self._estimate(view, g.cores, released)
                    if self.calibrate and given is not None:
                        self._given[(view.now, g.stages[0])] = given
                    submits.append(
                        Submit(
                            g.stages[0],
                            g.cores,
                            math.ceil(asked),
                            after=(before,) if chain and before is not None else (),
                            dependency=DependencyKind.AFTERANY,
                            predicted_wait=None if chain else early,
                            serves=g.stages,
                            pieces=pieces,
                        )
                    )
                    before = g.stages[0]
                else:
                    wake = at if wake is None else min(wake, at)
                    before = None
                lead_left = max(0.0, need - max(at, view.now))
                need = max(need, view.now) + timing.expected_delay(waits, 0.0 if chain else lead_left)
                for x in g.stages:
                    need += work[x]
                    ends[x] = (need, before)
        return submits, wake

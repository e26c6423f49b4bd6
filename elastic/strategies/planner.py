"""``asa``: plan allocations across the whole remaining workflow, re-planned at every decision.

For the stages still to run, the planner chooses where each one runs: on the allocation it follows (the
one held now, or the one the stage before it runs on: :mod:`~elastic.strategies.hold`,
:mod:`~elastic.strategies.merge`), or on a new allocation of some width, requested at a time the timing
rule sets (:mod:`~elastic.strategies.timing`). Each choice is priced in core-seconds charged plus
``beta`` per second of makespan (``beta = weight x`` the widest stage's cores), and the cheapest
sequence of choices is found by a search stage by stage (:func:`plan`) that carries each partial plan's
delay as a distribution: allocations requested at once wait side by side, and the run is delayed by
the longer wait, not by the sum (:func:`timing.acquire_delayed`).

Which wait prices a new allocation (the scheduler's estimate, scaled by its bias learned from this run's
own requests; else this run's latest wait, or the learned distribution), and why:
:mod:`~elastic.strategies.planner_waits`. When each stage is needed and ends:
:mod:`~elastic.strategies.planner_timeline`.

What :meth:`Planner.decide` does, each time it is asked:

1. **For each running allocation**, at every decision (not only at its stage boundaries: a wide job
   that takes the machine while the current stage runs makes the release planned at its start wrong):
   plan the stages after the current one that no other allocation is kept for, with this allocation
   held; keep it for the leading stages the plan runs on it, as far as its walltime covers them
   (:func:`~elastic.strategies.hold.hold_through`), and no further (:class:`~elastic.strategies.base.Serve`).
   One that started before its stage can start and idles is released when idling until then costs more
   than asking again (:func:`~elastic.strategies.hold.release_early`), once what it idled costs that
   much (a stage after a straggler is predicted soon at every decision:
   :func:`~elastic.strategies.hold.idled_out`), or when its stage cannot end on it
   (:func:`~elastic.strategies.hold.expires_idle`), with its pieces still waiting. A piece idle
   while its stage's last tasks run on the others (or, before its stage, while another runs some other
   task) is released once the cores it idled cost what getting them back would, which is no more than
   the waves its absence adds to the stages it is kept for (:func:`~elastic.strategies.hold.idled_out`,
   :func:`~elastic.strategies.hold.slowdown`).
2. **For stages no allocation is kept for**: plan them from the moment they are needed (their
   predecessors' predicted end), and request each planned group's allocation (:func:`merge.groups`)
   when the timing rule says: at once with ``afterany`` on the allocation before it where held jobs
   keep their queue place, else at *need - lead* without a dependency. The walltime covers the group,
   and more where the scheduler's estimate says the longer request waits no longer
   (:meth:`QueueWaits.headroom`): a batch job's walltime cannot be extended once it runs, and only then can
   step 1 hold it across a wait foreseen later, as Big-Job would. Unused walltime is not charged. Each
   allocation is asked for as ``pieces`` batch jobs (default 2): step 1 can keep some of them across a
   narrow stage (``plan``'s ``shrink``, the next wide stage in waves on them), and each asks walltime
   for two waves of its stages where the scheduler's estimate says that costs no wait, since it may
   start before the others (:meth:`QueueWaits.waves_walltime`).
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

Each search plans at most :data:`~elastic.strategies.planner_rules.HORIZON` stages left (the planning
horizon): the stages after them are planned once they come within it.

Over 500 lines because the four steps of one decision share the planner's state (the searches kept,
the stages each request was made for) and read best side by side; the rules that read only the view are
in :mod:`~elastic.strategies.planner_rules`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Hashable
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
    Submit,
    release_idle,
    walltime_checks,
    walltime_follow_ups,
)
from elastic.strategies.base import merge as merge_decisions
from elastic.strategies.merge import Choice
from elastic.strategies.pieces import WAVES, waves_of, widest_job
from elastic.strategies.planner_rules import (
    HOLD_HORIZON,
    HORIZON,
    SHORTEN_SLACK,
    _all_placed,
    _as_planned,
    _dag_order,
    _done_dropped,
    _lead_cap,
    _pieces_for,
    _predecessor_label,
    _ran_out,
    _released,
    _shortened,
    _subset_widths,
    kept_short,
    plan_segments,
    stages_after,
    window,
    window_after,
)
from elastic.strategies.planner_timeline import Timeline
from elastic.strategies.planner_waits import HEADROOM_SLACK, QueueWaits, estimate_bias
from elastic.strategies.rules import backlog_held
from elastic.strategies.search import BEAM, StagePlan, Waits, plan

__all__ = [
    "BEAM",
    "HEADROOM_SLACK",
    "HOLD_HORIZON",
    "HORIZON",
    "SHORTEN_SLACK",
    "WAVES",
    "Planner",
    "StagePlan",
    "Waits",
    "estimate_bias",
    "plan",
]

logger = logging.getLogger(__name__)

WEIGHT = 0.1
"""The default price of a second of makespan, in seconds of the widest stage's cores (:class:`Planner`'s
``weight``). Chosen on issue 28's grid (the published suite and the paper's workflows x 5 queues x
peaks 28, 56, 112, 30 runs; ``benchmarks/bench_planner_grid.py``), against weights 1, 0.25 and 0.05:
its goal met in 76, 84, 97 and 97 of the 150 cells, the geometric mean of ``asa``'s core-hours over the
best Per-Stage's 1.090, 1.049, 1.032 and 1.027, of its makespan over the better baseline's 0.991,
0.995, 0.999 and 1.000; one cell slower than both baselines by more than 5 % at each. Checked on
what it was not chosen on: the Lublin-Feitelson trace (17 -> 24 of 30 cells met), the main job's
Montage 28 (4.29 h at 29.8 core-h -> 4.57 h at 26.3), the 40-stage chain (25.3 h -> 31.3 h, 232.9 ->
198.0 core-h) and the 100-stage DAG (35.1 h -> 37.3 h, 448.2 -> 433.2 core-h):
``docs/results/strategies.md``, "A lower default weight". 1 buys speed with idle cores as Big-Job
does."""

MAX_WEIGHT = 1e6
"""The largest ``weight``: a second of makespan priced at a million seconds of the peak allocation
already makes every choice the fastest one, and past it the prices overflow (1e307 made every run
fail)."""

PACE = 300.0
"""Backend seconds a decision with no action is kept at most while nothing it read changed
(:class:`~elastic.strategies.base.Paced`)."""


class Planner:
    """The ``asa`` strategy: allocation planning across the remaining workflow (module docstring).

    Parameters
    ----------
    weight : float, default WEIGHT
        Seconds of makespan are priced at ``weight x`` the widest stage's cores per second (core-seconds
        per second), > 0: larger favours makespan (holding, merging, early requests), smaller
        core-hours. 1 prices a second of makespan as a second of the whole peak allocation, as Big-Job
        pays it (the default until :data:`WEIGHT`'s measurements).
    cover : float, default hold.COVER
        Walltime per second of expected work an allocation needs to be kept for more stages.
    run_waits : bool, default True
        Once an allocation of this run has started, price a follow-up's wait as this run's latest wait
        (of the same width if one started, else of any), not as the learned distribution
        (:mod:`~elastic.strategies.planner_waits`).
    estimates : bool, default True
        Where the backend gives the scheduler's estimate of a new job's wait (:attr:`RunView.estimate`),
        price every new allocation's wait by it (:mod:`~elastic.strategies.planner_waits`).
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
    horizon : int or None, default HORIZON
        Stages not complete each search plans at most, the first in plan order (and every ready stage):
        the stages after them are planned once they come within it. None: the whole remaining workflow
        (each decision then costs as much as the stages left; :data:`HORIZON`).
    hold_horizon : int, default HOLD_HORIZON
        Stages after a running allocation its hold is planned over at most, once more than ``horizon``
        stages are left (:data:`~elastic.strategies.planner_rules.HOLD_HORIZON`); within ``horizon``,
        every stage after it.
    pace : float or None, default PACE
        Backend seconds a decision with no action is kept at most while the run's stages, allocations,
        busy cores, knowledge and the scheduler's queue (its version) stay the same
        (:class:`~elastic.strategies.base.Paced`): the planner is asked again at once when any of them
        changes (not a task's progress alone, nor a queue that left its estimates the same), at its own
        wake-up (a request's planned time), and otherwise every ``pace`` seconds, doubled after each
        decision that did nothing up to 4x (20 minutes at the default; ``pace`` again once one acts).
        None or 0: asked at every poll (30 s), as before. Asked at every poll, 4,035 of the 4,408
        decisions of a 40-stage chain's run saw the same inputs and queue and acted on none.
        Chosen on the published suite (synthetic queue, HPC2N replay and capacity, peaks 28 and 56, 10
        runs) and the 40-stage chain: on the synthetic queue and the replay mean makespans moved by at
        most 0.2 % and core-hours by at most 1.1 %; under capacity three small workflows' means moved
        (BWA 28 13 % faster, SoyKB 28 6 % faster, BWA 56 0.3 core-hours more), at 3-5x less CPU
        (``docs/results/strategies.md``, "Paced decisions"). On Slurm it also spares ``slurmctld`` the
        estimate's ``squeue`` and ``sinfo`` at every poll while nothing changed.
    calibrate : bool, default True
        Scale the scheduler's estimate by its bias learned from this run's own requests: each request
        made on an estimate (not chained by a dependency) is paired with the wait that followed (until
        its first piece started; one still pending counts once it has waited longer than the scaled
        estimate says), and the estimate is multiplied by :func:`estimate_bias` of those ratios
        (:meth:`QueueWaits.calibrated`). Only what a Slurm user sees is read: the estimate given at
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
        weight: float = WEIGHT,
        cover: float = hold.COVER,
        run_waits: bool = True,
        estimates: bool = True,
        pieces: int = 2,
        reuse: bool = False,
        calibrate: bool = True,
        horizon: int | None = HORIZON,
        pace: float | None = PACE,
        hold_horizon: int = HOLD_HORIZON,
    ) -> None:
        if not (
            isinstance(weight, (int, float))
            and not isinstance(weight, bool)
            and math.isfinite(weight)
            and 0 < weight <= MAX_WEIGHT
        ):
            raise ConfigError(f"asa: weight must be a number > 0 and <= {MAX_WEIGHT:g}, got {weight!r}")
        if not cover >= 1.0:
            raise ConfigError(f"asa: cover must be >= 1, got {cover!r}")
        if not (isinstance(pieces, int) and pieces >= 1):
            raise ConfigError(f"asa: pieces must be a whole number >= 1, got {pieces!r}")
        self.weight = float(weight)
        self.cover = float(cover)
        self.run_waits = bool(run_waits)
        self.estimates = bool(estimates)
        if horizon is not None and not (isinstance(horizon, int) and horizon >= 1):
            raise ConfigError(f"asa: horizon must be a whole number >= 1 or None, got {horizon!r}")
        if pace is not None and not (isinstance(pace, (int, float)) and math.isfinite(pace) and pace >= 0):
            raise ConfigError(f"asa: pace must be a finite number of seconds >= 0 or None, got {pace!r}")
        self.pace = None if not pace else float(pace)
        if not (isinstance(hold_horizon, int) and not isinstance(hold_horizon, bool) and hold_horizon >= 1):
            raise ConfigError(f"asa: hold_horizon must be a whole number >= 1, got {hold_horizon!r}")
        self.hold_horizon = hold_horizon
        self.pieces = pieces
        self.horizon = horizon
        self.reuse = bool(reuse)
        self.calibrate = bool(calibrate)
        self.queue = QueueWaits(
            run_waits=self.run_waits, estimates=self.estimates, calibrate=self.calibrate, horizon=horizon
        )
        """The waits new allocations are priced by, and the scheduler's estimate (:class:`QueueWaits`)."""
        self._plans: tuple[Hashable | None, dict[Hashable, tuple[float, tuple[Choice, ...]]]] = (None, {})
        self._requested: dict[str, tuple[str, ...]] = {}
        self._idle_since: dict[str, float] = {}
        """By batch job: when a decision first saw it idle beside the others, in the decisions since
        (:meth:`_idled_out`)."""
        self._early_since: dict[str, float] = {}
        """By batch job: when a decision first saw it idle before its stage, in the decisions since
        (:meth:`_holds`)."""

    # -- what the view says ------------------------------------------------------------------------------

    def _prices(self, view: RunView) -> timing.Prices:
        # a list of products, not the width property: read for every stage at every decision
        return timing.Prices(beta=self.weight * max([s.tasks * s.cores for s in view.stages], default=1))

    # -- the decision ----------------------------------------------------------------------------------

    def decide(self, view: RunView) -> Decision:
        """Re-plan holds, request planned allocations, release, follow up."""
        inputs = self._inputs(view)
        if inputs is None or inputs != self._plans[0]:
            self._plans = (inputs, {})
        prices = self._prices(view)
        timeline = Timeline(view, self.queue.wait_fn(view), forecast=self.queue.estimated(view))
        held_actions, kept, idlers = self._holds(view, prices, timeline)
        if view.backlog_full:
            # nothing goes before a queued request starts (which changes the allocations: planned then),
            # unless this decision cancels one (a 5,000-stage random DAG kept the backlog full for days,
            # and planned every ready stage at every task's end)
            releases = release_idle(_as_planned(view, kept))
            held = backlog_held(view, [*held_actions, *releases])
            submits, wake = ([], None) if held else self._requests(view, prices, kept, timeline)
        else:
            submits, wake = self._requests(view, prices, kept, timeline)
            releases = release_idle(_as_planned(view, kept))
        # after the release rule, which frees idle jobs knowing which one to keep for what the others
        # cannot cover: taking one of those first made it keep another (demo3 with job_cores=1: a 1-core
        # job idled 853 s for merge, which the straggler's job then ran)
        idled, idle_wake = self._idled_out(view, idlers, {c.alloc_id for c in releases}, prices, kept)
        active = [s.name for s in view.active_stages]  # one not ready or complete needs no follow-up
        return merge_decisions(
            Decision(tuple(releases)),
            Decision(tuple(idled), idle_wake),
            Decision(tuple(held_actions)),
            Decision(tuple(submits), wake),
            Decision(tuple(_shortened(view))),
            walltime_follow_ups(
                view,
                active,
                lead=lambda cores: timing.lead_time(self.queue.waits(view, cores, True), cores, prices),
            ),
            Decision((), walltime_checks(view, active)),  # paced: decide again before a walltime ends
        )

    def _inputs(self, view: RunView) -> Hashable | None:
        """Return what the searches of a decision read beside their own arguments (None: reuse nothing).

        The priority model, the knowledge (its version), the waits this run saw and, where the
        scheduler's estimate prices waits, the queue's version (:attr:`reuse`).
        """
        estimated = self.queue.estimated(view)
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
            self.queue.calibrated(view) if estimated else None,
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
        self, view: RunView, prices: timing.Prices, timeline: Timeline
    ) -> tuple[list[Action], dict[str, tuple[str, ...]], list[_Idler]]:
        """Step 1: for each running allocation, choose the stages it is kept for, or release it early.

        Also return the split allocations some of whose pieces may idle out (:meth:`_idled_out`).
        """
        actions: list[Action] = []
        kept = {a.alloc_id: a.labels for a in view.live_allocations}
        seen_early, self._early_since = self._early_since, {}  # only the pieces seen idle early now
        idlers: list[_Idler] = []
        # the batch jobs split from one request (its pieces, run control's job_cores) are planned as one
        # allocation while they are kept for the same stages
        units: dict[tuple[str, tuple[str, ...]], list[Allocation]] = {}
        for a in view.live_allocations:  # not ended, in submission order (all: 28 M reads on 5,000 stages)
            units.setdefault((a.request, a.labels), []).append(a)
        for (unit, _), jobs in units.items():
            live = [b for b in jobs if b.running]
            if not live:
                continue
            a = live[0]
            # pieces still waiting were asked for these stages with the running ones: the plan counts them,
            # and the holds cut none away until all have started (a started piece idle beside the stage's
            # last tasks may still idle out, below)
            waiting = [b for b in jobs if b.pending]
            cores = sum(b.cores for b in live + waiting)
            open_labels = sorted(
                (x for x in a.labels if view.has_stage(x) and not view.stage(x).complete),
                key=lambda x: view.stage(x).index,
            )
            if not open_labels:
                continue
            current = view.stage(open_labels[0])
            need = timeline.need(current)
            current_work = timeline.work(current)
            busy = sum(view.busy_cores(b.alloc_id) for b in live)
            idle = not current.ready and busy == 0 and need is not None
            walltime_end = min(b.walltime_end or 0.0 for b in live)
            mine = {b.alloc_id for b in jobs}
            reason = None
            if idle and hold.expires_idle(walltime_end, need or 0.0, current_work):
                reason = f"started too early: {current.name} cannot end on it"
            elif not current.ready and busy == 0:
                early = timeline.soonest_need(current) - view.now
                back = self.queue.waits(view, cores, True, _released(mine, view.now))  # to get them back
                again = timing.acquire_cost(back, cores, prices, lead=early, model=view.priority)
                # a stage after one that outlived every estimate is predicted to be needed soon at every
                # decision: its started pieces are also released once what they idled reaches ``again``
                # (the ski rental's break-even, as :meth:`_idled_out`)
                since = min(
                    self._early_since.setdefault(b.alloc_id, seen_early.get(b.alloc_id, view.now))
                    for b in live
                )
                idled = view.now - since
                if hold.release_early(cores, early, again):
                    reason = f"started {early:.0f} s early for {current.name}: ask again later"
                elif hold.idled_out(sum(b.cores for b in live), idled, again):
                    reason = f"idled {idled:.0f} s before {current.name}, due in {early:.0f} s: ask again"
            if reason is not None:
                for b in jobs:
                    actions.append(Cancel(b.alloc_id, reason))
                    kept.pop(b.alloc_id)
                continue
            if busy and len(live) > 1 and (not current.ready or _all_placed(current)):
                lead = current_work if current.ready else max(timeline.soonest_need(current) - view.now, 0.0)
                idlers.append(_Idler(tuple(live), current.name, lead, tuple(jobs), current.ready))
            requested = self._requested.setdefault(unit, a.labels)  # before any hold changed them
            others = {x for b, labels in kept.items() if b not in mine for x in labels}
            within = window_after(view, current, self.horizon, self.hold_horizon)
            after = stages_after(view, current, others, within)
            if not after:
                continue
            after = _dag_order([current, *after])[1:]
            plans = timeline.chain_plans([current, *after])[1:]
            until = current_work + (0.0 if need is None else need - view.now)
            # a new allocation in this plan replaces this one, released once its current stage ends
            releasing = _released(mine, view.now + until)
            waits = self.queue.wait_fn(view, releasing)
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
            own = _done_dropped(view, own, self.horizon)
            held = ", ".join(names) or "nothing more"
            for b in jobs:
                serves = (*own, *names) if b.alloc_id in keep_ids else own
                if set(serves) != set(b.labels):
                    why = f"keep for {held}" if b.alloc_id in keep_ids else f"released after {current.name}"
                    if len(keep) < len(live) and b.alloc_id in keep_ids:
                        why += f" ({sum(c.cores for c in keep)} of {cores} cores: the rest are released)"
                    actions.append(Serve(b.alloc_id, serves, f"stage boundary at {current.name}: {why}"))
                    kept[b.alloc_id] = serves
        return actions, kept, idlers

    def _idled_out(
        self,
        view: RunView,
        idlers: list[_Idler],
        released: set[str],
        prices: timing.Prices,
        kept: dict[str, tuple[str, ...]],
    ) -> tuple[list[Cancel], float | None]:
        """Release the pieces of split allocations that idled out beside the others; and when to look again.

        ``idlers`` (:meth:`_holds`): allocations of several pieces, some running tasks, where none is
        left for an idle piece: its stage runs every task it has left, or is not ready yet (another piece
        runs some other stage's task, such as a re-run the pool placed there). Each idle piece not
        ``released`` already is released once the cores it idled since a decision first saw it idle cost
        as much as getting them back for when they are needed, the idler's ``lead`` seconds from now as
        predicted (:func:`~elastic.strategies.hold.idled_out`); until then the decision wakes up when
        that is due. Getting them back delays the run by no more than the waves the piece's absence adds
        to the stages it is kept for, on the cores the other pieces kept for them have (those this
        decision releases left out: :func:`~elastic.strategies.hold.slowdown`), however long a new job
        waits: priced at a new job's whole wait, ``SeismogramSynthesis``'s 1-core jobs that started
        once every task of it had (CyberShake 56, synthetic queue, ``asa-fine``, run 0: 8 and 19 of
        them) idled up to 17 min each for ``PeakValCalcOkaya``, whose 56 tasks of 60 s one core fewer
        delays by one wave. Only where the other pieces' walltime covers those stages in those waves
        (with a hold's :attr:`cover`): else the stages need new cores, and the new job's wait is the
        price (Statistics 112, SDSC Blue capacity, ``asa``, run 12: one of two 56-core pieces released
        beside ``merge`` for a second wave of ``period_stats`` the other could not cover; new cores
        waited 8.8 h, 32.8 h against 16.1 h).

        Kept by the searches instead, on CyberShake 28 (SDSC Blue capacity, run 15), one of
        ``SeismogramSynthesis``'s two 14-core pieces idled 0.6 h beside a straggler (its 28 tasks of 860 s
        at a coefficient of variation of 0.71) for a 60-s stage after it, the stage's end predicted soon
        at every decision; and (run 13) its two pieces, started early, idled 27 of their 28 cores for
        1.7 h while one ran ``ExtractSGT``'s re-run, then could no longer cover their stage.

        Pieces of the request that still wait in the queue do not keep the started ones from idling out.
        A request in jobs of one task (``job_cores=1``) has jobs that wait hours after the others started:
        on CyberShake 28 (synthetic queue, run 29), 7 of ``SeismogramSynthesis``'s 28 jobs waited until
        the stage ended, and while they did, 18 started ones idled 0.5-0.7 h each beside its straggler
        (asa's core-hours 1.50x fine Per-Stage's in that cell, 1.15x with this). Checked on issue 28's
        grid with every strategy in jobs of one task (seed 1: 82 to 93 of 150 cells met, as many slower
        than both baselines; the main job, Montage 28 on the synthetic queue, among the 4 lost), at seed 2
        on the synthetic queue and the replay (32 to 36 of 60) and on the Lublin-Feitelson trace
        (``docs/results/strategies.md``, "Idle pieces go while others of their request wait"). A request
        of two pieces (``asa``'s own default) has no waiting piece beside two started ones: unchanged.
        """
        now = view.now
        seen, self._idle_since = self._idle_since, {}  # only the pieces seen idle at this decision
        out: list[Cancel] = []
        wake: float | None = None
        gone = set(released)
        for idler in idlers:
            for b in idler.pieces:
                if b.alloc_id in gone or view.cores_in_use(b.alloc_id):
                    continue
                since = self._idle_since[b.alloc_id] = seen.get(b.alloc_id, now)
                back = self.queue.waits(view, b.cores, True, _released({b.alloc_id}, now))
                slower = self._absence_delay(view, idler, b, kept, gone)
                back = np.minimum(back, max(idler.lead, 0.0) + slower)
                again = timing.acquire_cost(back, b.cores, prices, lead=idler.lead, model=view.priority)
                if hold.idled_out(b.cores, now - since, again):
                    gone.add(b.alloc_id)
                    out.append(Cancel(b.alloc_id, f"idled {now - since:.0f} s beside {idler.stage}'s tasks"))
                else:
                    due = since + again / b.cores
                    wake = due if wake is None else min(wake, due)
        return out, wake

    def _absence_delay(
        self, view: RunView, idler: _Idler, b: Allocation, kept: dict[str, tuple[str, ...]], gone: set[str]
    ) -> float:
        """Return the most that releasing idle piece ``b`` of ``idler`` delays the run, whatever the wait.

        Without it, the stages it is kept for run on the cores the other pieces kept for them have
        (``gone``: those released left out): the waves its absence adds (:meth:`_idled_out`). Inf where
        their walltime does not run those stages in those waves with a hold's :attr:`cover`.
        """
        now = view.now
        slower, span = 0.0, max(idler.lead, 0.0)
        ends: list[float] = []
        for x in kept.get(b.alloc_id, b.labels):
            s = view.stage(x) if view.has_stage(x) else None
            if s is None or s.complete or (x == idler.stage and idler.placed):
                continue
            others = [
                c
                for c in idler.jobs
                if c.alloc_id not in gone and c is not b and x in kept.get(c.alloc_id, c.labels)
            ]
            have = b.cores + sum(c.cores for c in others)
            task = view.knowledge.task_estimate(x)
            slower += hold.slowdown(s.tasks - s.done, s.cores, task, have, b.cores)
            waves = hold.waves(s.tasks - s.done, s.cores, have - b.cores)
            span += 0.0 if math.isinf(waves) else waves * view.knowledge.expected_duration(x)
            ends += [c.remaining(now) for c in others]
        if ends and min(ends) < self.cover * span:
            slower = math.inf
        return slower

    def _requests(
        self,
        view: RunView,
        prices: timing.Prices,
        kept: dict[str, tuple[str, ...]],
        timeline: Timeline,
    ) -> tuple[list[Submit], float | None]:
        """Step 2: plan the stages no allocation is kept for, and request what is due."""
        short = kept_short(view, kept)  # kept on cores some of their pieces left: planned for the rest
        covered = {x for labels in kept.values() for x in labels}.difference(short)
        segments = plan_segments(view, covered, window(view, self.horizon))
        submits: list[Submit] = []
        wake: float | None = None
        follow_up = bool(view.allocations)
        ran_out = _ran_out(view)  # a stage whose allocation ran out is asked for more (speculative sequence)
        # The submission-rate cap takes at most ``budget`` more jobs now and holds every request after them
        # back (first come, first served), to be asked again at a later step: those are planned in full;
        # the first one after them is requested as planned but without the walltime headroom (which asks
        # the scheduler's estimate: the costly part), so the cap holds it back and steps again when it
        # refills, and planning stops there. A 5,000-stage random DAG has 522 stages ready at once, and the
        # cap lets one job through every 2 s: planning all 522 at each of those steps was most of the run.
        budget = math.inf if view.submittable is None else view.submittable
        jobs = 0
        for segment in (seg for seg in segments if seg):
            if jobs > budget:
                break
            segment = _dag_order(segment)
            first = segment[0]
            need = timeline.need(first)
            if need is None:
                continue
            plans = timeline.chain_plans(segment, short)
            released = timeline.released_by(kept, need)
            cost, choices = self._search(
                view,
                None,
                plans,
                released,
                held=0,
                lead=need - view.now,
                waits=self.queue.wait_fn(view, released),
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
            todo = merge.groups(choices)
            for i, g in enumerate(todo):  # a group cut in two (_merge_cut) goes on with its second part
                if not g.held and len(g.stages) > 1 and self.queue.estimated(view):
                    cut = self._merge_cut(view, g, released, ran_out.get(g.stages[0], ()))
                    if cut is not None:
                        todo[i : i + 1] = cut
                        g = todo[i]
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
                    own = timeline.need(head)
                    need = need if own is None else max(need, own)
                waits = self.queue.waits(view, g.cores, follow_up or i > 0, released)
                ready = view.stage(g.stages[0]).ready
                chain = timing.keeps_place(view.priority) and not ready
                if chain and before is None:
                    stopped.update(g.stages)  # the allocation before it is not requested yet: chain it then
                    continue
                walltime = merge.group_walltime(view.knowledge, g.stages, ran_out.get(g.stages[0], ()))
                lead = min(timing.lead_time(waits, g.cores, prices), _lead_cap(view, g.stages[0]))
                at = view.now if ready or chain else need - lead
                # needed after more than its walltime, by a wait still to come
                guessed = (
                    not ready
                    and not chain
                    and need - view.now > walltime
                    and (i > 0 or not timeline.anchored(first))
                )
                if guessed and at > view.now:
                    # not expected to wait that long itself: ask once that wait came. One whose own wait
                    # is expected to reach its need is asked now, beside it, as :func:`plan` priced it
                    # (its wait then runs beside the one before it, not after it)
                    stopped.update(g.stages)
                    wake = at if wake is None else min(wake, at)  # asked then, unless its need moved
                    continue
                if at <= view.now:
                    early = 0.0 if chain else max(0.0, need - view.now)
                    # covers idling until the need, but not for days on a guessed need: a job asking
                    # weeks of walltime may never start (HPC2N capacity); one that starts that early is
                    # released (hold.expires_idle) and asked again
                    idling = min(early, walltime) if guessed else early
                    pieces = min(self.pieces, g.cores)
                    own = walltime + idling
                    # asked by the widest batch job the request becomes: each piece is split again at
                    # the run's ``job_cores`` (run control)
                    split = self._widest_job(view, g)
                    if split is not None and jobs < budget:
                        own = self.queue.waves_walltime(view, split, walltime, idling, released)
                    waves = waves_of(own - idling, walltime)
                    if jobs < budget:
                        asked = self.queue.headroom(view, g, own, released)
                    else:
                        asked = walltime + idling  # held back by the cap (above)
                    # one job at least (under max_cores, fewer than its pieces): counted so, the requests
                    # planned in full are never fewer than the cap takes
                    jobs += 1
                    given = None if chain else self.queue.estimate(view, g.cores, released)
                    if self.calibrate and given is not None:
                        self.queue.given[(view.now, g.stages[0])] = given
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
                            waves=waves,
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

    def _widest_job(self, view: RunView, g: merge.Group) -> int | None:
        """Return :func:`widest_job` of group ``g``'s request: its pieces, its stages' widest task."""
        return widest_job(
            view, g.cores, min(self.pieces, g.cores), max(view.stage(x).cores for x in g.stages)
        )

    def _merge_cut(
        self, view: RunView, g: merge.Group, releasing: Releasing, ran_out: tuple[float, ...]
    ) -> list[merge.Group] | None:
        """Return ``g`` cut before the first stage whose walltime makes its request wait longer, or None.

        A stage the search runs on the allocation before it adds its walltime to that allocation's request,
        but the search priced the request's wait by the estimate for the longest walltime of one stage of
        its width (:meth:`QueueWaits.estimate`). Where the scheduler's estimate starts the request with
        that stage later (beyond :data:`HEADROOM_SLACK`) than with the stages before it only (the first
        stage's walltime, then each one's added), the stage and those after it get a request of their
        own, as wide as the widest of them: the test :meth:`QueueWaits.headroom` (for holds) and
        :meth:`QueueWaits.waves_walltime` make of walltime asked beyond a request's stages. Asked of the
        widest batch job the request becomes (:func:`widest_job`). Found on the Lublin-Feitelson trace
        (CyberShake 28, ``asa`` in jobs of one task, run 5): ``PeakValCalcOkaya`` (471 s) on
        ``SeismogramSynthesis``'s jobs (4,431 s) took them past a backfill hole (estimate: at once for
        4,431 s, 10.3 h for 4,902 s), and they waited 10.3 h where fine Per-Stage's started at once.
        Checked on issue 28's grid, synthetic queue and HPC2N replay besides that trace: alone it moved
        no cell of ``asa`` in jobs of one task (``docs/results/strategies.md``, "A merged stage's
        walltime").
        """
        width = self._widest_job(view, g) or g.cores
        assert view.estimate is not None  # estimated (the caller's test)
        before = view.estimate(width, merge.group_walltime(view.knowledge, g.stages[:1], ran_out), releasing)
        for j in range(1, len(g.stages)):
            walltime = merge.group_walltime(view.knowledge, g.stages[: j + 1], ran_out)
            after = view.estimate(width, walltime, releasing)
            if before is None or after is None:
                return None
            if after > before + HEADROOM_SLACK:
                rest = g.stages[j:]
                cores = min(g.cores, max(view.stage(x).width for x in rest))
                return [merge.Group(g.stages[:j], g.cores, held=False), merge.Group(rest, cores, held=False)]
            before = after
        return None


@dataclasses.dataclass(frozen=True)
class _Idler:
    """A split allocation some of whose pieces may idle out (:meth:`Planner._idled_out`)."""

    pieces: tuple[Allocation, ...]
    """Its running pieces."""
    stage: str
    """The stage it is kept for first."""
    lead: float
    """Seconds until its cores are needed, as predicted: its stage's end, or its need if not ready."""
    jobs: tuple[Allocation, ...]
    """All its pieces, waiting ones too."""
    placed: bool
    """Its stage is ready (and every task of it placed): the stage needs none of its idle cores."""

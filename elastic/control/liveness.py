"""The liveness rule: a ready task that no allocation can run gets one, whatever the strategy decided.

Strategies plan from what they believe: a plan declared by the user or remembered from the last run of
the same workflow name, predicted stage ends, learned waits. When that belief disagrees with the tasks
that actually came (a script whose stages changed since the last run, a stage nobody announced, a task
wider than the pieces a request was split into), a strategy can leave a ready task with no allocation that
could ever run it, and the run stalls silently. This rule, applied by run control after every decision of
every strategy (:meth:`~elastic.control.controller.AllocationController.step`), makes that impossible:

    For every stage that is ready and has tasks waiting for cores, if no allocation that is kept for it
    (or for the whole workflow) and is not ended or being released is at least as wide as its widest
    task, and the strategy's decision requests none, request one now, as Per-Stage would: as wide as the
    cores its waiting tasks need (no more than the partition has beside what the run holds, no less than
    its widest task), with the walltime its speculative sequence gives next.

Tasks announced ready that wait for cores to be *offered* (:attr:`StageView.awaiting_offers`: a Mesos
framework launches only on the cores it is offered, so they are never queued in the pool) cannot wait for
a core to free as queued tasks do: a gang whose tasks wait for one another never frees one. For them "can
run" means a core to offer, so a second clause holds:

    For every stage that is ready, has tasks announced ready and none of its tasks queued or running, if
    no allocation kept for it (or for the whole workflow) and not ended or being released is pending, and
    those running have room for fewer of those tasks together (counting each allocation's free cores in
    whole tasks) than there are, and the strategy's decision requests none, request one now for the cores
    they lack (whole tasks, capped as above).

The front-end decides when such tasks are new demand: the Mesos master announces a framework's gang step,
or the part of its ``REQUEST`` its allocations lack, as a stage of its own, none of whose tasks runs, and a
framework that declines every offer while it runs nothing as its own stage's tasks made wider
(:mod:`elastic.front.mesos.frameworks`). A stage with tasks running (a framework's own stage, which
always announces one task while it waits for offers) is served by the allocations that run them. Per-Stage
and ASA request an allocation for such a stage themselves; under Big-Job, whose one allocation is kept for
every stage, this clause is what grows the run for demand learned while it runs. A declared workflow has
no announced tasks, so nothing changes for it.

A remembered or declared plan is thus a hint that the live tasks overrule, never a gate. A task wider
than the most cores an allocation may have (``max_cores``) cannot be served by any request: the front
door refuses it when it is submitted (:class:`~elastic.front.door.Elastic`), so it is skipped here.

Where the strategy's decision requests an allocation for a stage but one the rule finds too narrow (or,
for a re-run, too short), the rule's request replaces it: the strategy's, with the rule's cores and
walltime where those are more (:func:`combine`). A decision holds one request per stage, so a second one
beside it would be dropped.

The rule adds requests, and releases only what keeps one from ever starting: when a stage's wider
allocation (asked by the rule or the strategy, pending) and the run's running allocations together exceed
``max_cores``, the running allocations kept for that stage (or for the whole run) that run nothing, are
narrower than its tasks and have no other waiting task they could run are cancelled (``liveness:
allocation ... is too narrow``). Without that, a Mesos framework whose tasks were learned 2 cores wide
waited for ever on a 2-core machine: its declined 1-core allocation idled, and its 2-core one could not
start beside it. An allocation the rule requests is kept for its stage and released by
:func:`~elastic.strategies.base.release_idle` like any other once the stage is done.

A task lost with its allocation (walltime, a kill) runs again from scratch and takes longer than the
attempt it lost. The pool queues it with twice that as its estimate
(:func:`~elastic.pool.placement.estimate_after_loss`) and does not start it where less walltime is left
while an allocation with that much is live or requested; with none, it starts where the most is left. A
third clause keeps that from being a place where it must be lost again:

    For every stage that is ready and has tasks waiting for cores after a lost attempt, if no allocation
    kept for it (or for the whole workflow), at least as wide as its tasks and not ended or being
    released, has the pool's estimate of them left (twice the longest attempt they lost,
    :attr:`StageView.rerun_floor`; a pending one, as its walltime; or the partition's limit), and the
    strategy's decision requests none, request one now for the cores those tasks need, with the walltime
    its speculative sequence gives next and at least that estimate, within the partition's limit.

Without it the pool started such a task where it had to be lost again: a task of 2.8 h with no runtime
given, lost after 1.5 h on another stage's allocation, re-ran on its own stage's allocation, which had
1.5 h left (the follow-up rule saw no work beyond that), and was lost there too. Counting instead any
allocation with more time left than the lost attempt (where the task may still end) was tried: on the
front-door scenarios among the liveness benchmark's first 400 (seed 1, ``asa`` left out: 160 runs) it left
47 runs with a task lost too often, against 31 with the estimate and 51 without the clause; on the 101
runs none of the three lost a task in, mean makespans were 15.00 h and 15.23 h against 14.92 h.

The rule adds no more requests than the run's submission-rate cap lets through at this step
(:attr:`~elastic.strategies.base.RunView.submittable`, the decision's own counted first; one at least):
the cap would hold the rest back, and the rule is applied again at the step the cap refills at (a strategy
that stops planning there, as the planner does, leaves the stages after them to that step). While the
run's backlog is full (:attr:`~elastic.strategies.base.RunView.backlog_full`) and the decision cancels
none of the run's queued requests, it adds none: nothing goes before a queued request starts, and the
rule is applied again then.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable

from elastic.allocations import Allocation, AllocationState
from elastic.strategies.actions import Action, merge
from elastic.strategies.base import Cancel, Decision, RunView, Serve, StageView, Submit
from elastic.strategies.knowledge import TOTAL
from elastic.strategies.rules import backlog_held, rerun_need, walltimes_so_far

__all__ = ["LIVENESS_REASON", "combine", "unserved"]

logger = logging.getLogger(__name__)

LIVENESS_REASON = "liveness"
"""The :attr:`~elastic.strategies.base.Submit.reason` of the requests this rule adds."""


_Lasting = tuple[frozenset[str], int, float, float | None]
"""An allocation for the re-run clause: stages kept for, cores of one job, walltime left, when it ends."""


class _Able:
    """The run's allocations once a decision is carried out: the widest batch job kept for each stage.

    Indexed by label, with the cores held in all: a wide DAG has thousands of ready stages and as many
    allocations, and a scan of every allocation for every stage made a 5,000-stage run take minutes.
    """

    def __init__(self) -> None:
        self._widest: dict[str, int] = {}
        self.held = 0
        """Cores of every allocation (of one batch job each) together."""

    def add(self, labels: Iterable[str], cores: int) -> None:
        """Count an allocation of ``cores`` kept for ``labels`` (``TOTAL``: the whole run)."""
        for label in labels:
            self._widest[label] = max(self._widest.get(label, 0), cores)
        self.held += cores

    def widest(self, stage: str) -> int:
        """Return the widest allocation kept for ``stage`` or for the whole run (0: none)."""
        return max(self._widest.get(stage, 0), self._widest.get(TOTAL, 0))


def unserved(view: RunView, decision: Decision, *, max_cores: int | None = None) -> Decision:
    """Return the requests the liveness rule adds to ``decision`` (module docstring); often none.

    Parameters
    ----------
    view : RunView
        What the strategy saw when it decided.
    decision : Decision
        What it decided: its Submits count as allocations, its Cancels remove them, its Serves change the
        stages they are kept for.
    max_cores : int or None, default None
        The most cores one allocation may have; a stage whose tasks are wider is skipped.
    """
    cancelled = frozenset(a.alloc_id for a in decision.actions if isinstance(a, Cancel))
    serves = {a.alloc_id: a.stages for a in decision.actions if isinstance(a, Serve)}
    # allocations of the run, once the decision is carried out: (stages kept for, cores of one batch job)
    able = _Able()
    # of those, the ones that will offer cores: (stages kept for, pending, free cores now); read only for
    # a stage waiting for offers (none in a declared workflow, whose thousands of allocations are skipped)
    offers = any(_waits_for_offers(s) for s in view.active_stages)
    offering: list[tuple[frozenset[str], bool, int]] = []
    # of those, with the walltime each has left and when it runs out (None while pending): read only for
    # a stage with tasks waiting for a re-run (rare)
    reruns = any(s.rerun_floor is not None for s in view.active_stages)
    lasting: list[_Lasting] = []
    for a in view.live_allocations:
        if not a.ended and not a.cancelled and a.alloc_id not in cancelled:
            labels = serves.get(a.alloc_id, a.labels)
            able.add(labels, a.cores)
            if offers:
                offering.append((frozenset(labels), a.pending, _free(view, a)))
            if reruns:
                end = a.walltime_end
                left = a.walltime if end is None else end - view.now
                lasting.append((frozenset(labels), a.cores, left, end))
    for s in decision.actions:
        if isinstance(s, Submit):
            able.add(s.serves or (s.stage,), _capped(s.cores, max_cores))
            offering.append((frozenset(s.serves or (s.stage,)), True, 0))
            if reruns:
                lasting.append(
                    (frozenset(s.serves or (s.stage,)), _capped(s.cores, max_cores), s.walltime, None)
                )
    holds: list[float] = []  # when a running allocation stops having the time a re-run needs
    out: list[Submit] = []
    # every job after the cap's budget is held back (each request is one job at least); one is asked all
    # the same, so that the cap names the step it refills at
    room = None
    if backlog_held(view, decision.actions):
        room = 0  # none goes before a queued request starts, which changes the allocations: asked then
    elif view.submittable is not None:
        room = max(view.submittable, 1) - sum(1 for a in decision.actions if isinstance(a, Submit))
    for stage in view.active_stages:  # both tests below need a stage ready and not complete
        if room is not None and len(out) >= room:
            break
        if offers and _waits_for_offers(stage):
            if max_cores is not None and stage.cores > max_cores:
                continue
            want = stage.awaiting_offers * stage.cores
            mine = [(p, f) for labels, p, f in offering if stage.name in labels or TOTAL in labels]
            free = sum(f // stage.cores * stage.cores for _, f in mine)  # in whole tasks: a task is on one
            if any(p for p, _ in mine) or free >= want:
                continue
            cores = -(-(want - free) // stage.cores) * stage.cores  # what is missing, in whole tasks
            if max_cores is not None:
                cores = min(cores, max(max_cores - able.held, stage.cores))
            # routine (how Big-Job grows for a Mesos gang), not a plan that missed: logged at INFO
            why = "tasks announced ready wait for cores to be offered"
            out.append(_request(view, stage, cores, why, level=logging.INFO, leaving=cancelled))
            able.add((stage.name,), _capped(cores, max_cores))
            offering.append((frozenset({stage.name}), True, 0))
            continue
        if not _waits_for_cores(stage):
            continue
        if max_cores is not None and stage.cores > max_cores:
            continue
        if able.widest(stage.name) >= stage.cores:
            if stage.rerun_floor is not None:
                added, until = _rerun(view, stage, lasting, able, max_cores, cancelled)
                if added is not None:
                    out.append(added)
                    able.add((stage.name,), added.cores)
                    lasting.append((frozenset({stage.name}), added.cores, added.walltime, None))
                elif until is not None:
                    holds.append(until)
            continue
        cores = _queued(stage) * stage.cores
        if max_cores is not None:
            # beside what the run holds: a request the partition cannot start until the run's own
            # allocation ends would wait for ever under a strategy that keeps that one (Big-Job)
            cores = min(cores, max(max_cores - able.held, stage.cores))
        cores = max(cores, stage.cores)
        why = "the strategy's plan did not cover them"
        out.append(
            _request(view, stage, cores, why, walltime=math.ceil(rerun_need(stage)), leaving=cancelled)
        )
        able.add((stage.name,), _capped(cores, max_cores))
        offering.append((frozenset({stage.name}), True, 0))
    # the clock alone turns the re-run clause: a decision carried out again (Settles, Paced) holds no
    # later than the first time it would request
    wake = min(holds) if holds else None
    if max_cores is None:
        return Decision(tuple(out), wake)
    return Decision((*out, *_make_room(view, decision, out, max_cores, offers=offers)), wake)


def combine(decision: Decision, added: Decision) -> Decision:
    """Return ``decision`` carried out with the liveness rule's ``added`` actions (:func:`unserved`).

    A request the rule adds for a stage the decision requests too replaces the decision's, which it
    found too narrow or (for a re-run) too short: the decision's, with the rule's cores and walltime
    where those are more. Merged plainly (:func:`~elastic.strategies.actions.merge`, the first request
    of a stage wins) the strategy's request dropped the rule's: SDSC Blue capacity, BWA 28, run 3, the
    planner asked 3,863 s for ``cat_bwa`` just after its task was lost at 2,051 s, the rule's 4,102 s
    was dropped, and the task was lost again on the shorter one.
    """
    ours = {a.stage: a for a in added.actions if isinstance(a, Submit)}
    lifted: list[Action] = []
    used: set[str] = set()
    for a in decision.actions:
        if isinstance(a, Submit) and a.stage in ours and a.stage not in used:
            rule = ours[a.stage]
            used.add(a.stage)
            a = dataclasses.replace(
                a,
                cores=max(a.cores, rule.cores),
                walltime=max(a.walltime, rule.walltime),
                reason=rule.reason,
            )
        lifted.append(a)
    rest = tuple(a for a in added.actions if not (isinstance(a, Submit) and a.stage in used))
    return merge(Decision(tuple(lifted), decision.wake_at), Decision(rest, added.wake_at))


def _make_room(
    view: RunView, decision: Decision, added: list[Submit], max_cores: int, *, offers: bool = True
) -> list[Cancel]:
    """Release idle allocations too narrow for a waiting stage whose wider one cannot start beside them.

    For every stage waiting for cores (queued, or announced ready and waiting for offers) with a wider
    allocation kept for it (or for the whole run) pending or just requested, whose cores and those of the
    run's running allocations together exceed ``max_cores``: every running allocation kept for that stage
    (or for the whole run) that runs no task and is narrower than the stage's tasks is cancelled, unless a
    stage it is kept for has waiting tasks it could run. Such an allocation can run none of the stage's
    tasks (on a 2-core machine a framework's declined 1-core allocation would keep its 2-core one from
    ever starting); its stages get the wider one. ``offers=False``: no stage waits for offers.
    """
    cancelled = frozenset(a.alloc_id for a in decision.actions if isinstance(a, Cancel))
    serves = {a.alloc_id: a.stages for a in decision.actions if isinstance(a, Serve)}
    live = [a for a in view.live_allocations if not a.cancelled and a.alloc_id not in cancelled]
    requested = [s for s in (*decision.actions, *added) if isinstance(s, Submit)]
    # the widths of the requests and pending allocations kept for each label, found once: a wide DAG has
    # thousands of ready stages and as many requests (once per stage and request, a run of 5,000 stages
    # spent most of its time here)
    widths: dict[str, list[int]] = {}
    for r in requested:
        for label in r.serves or (r.stage,):
            widths.setdefault(label, []).append(_capped(r.cores, max_cores))
    for a in live:
        if a.pending:
            for label in serves.get(a.alloc_id, a.labels):
                widths.setdefault(label, []).append(a.cores)
    running = sum(a.cores for a in live if a.running)  # less those cancelled below (each runs)
    # the only ones released, each with the stages it is kept for, and where each is by label (found once,
    # not once per stage: a wide DAG has hundreds of stages waiting and as many idle allocations)
    idle = [
        (a, frozenset(serves.get(a.alloc_id, a.labels)))
        for a in live
        if a.running and view.busy_cores(a.alloc_id) == 0
    ]
    idle_for: dict[str, list[int]] = {}
    for i, (_, labels) in enumerate(idle):
        for label in labels:
            idle_for.setdefault(label, []).append(i)
    out: list[Cancel] = []
    gone: set[str] = set()  # of out
    everyone = widths.get(TOTAL, ())
    for stage in view.active_stages:  # both tests need a stage ready and not complete
        if not (stage.name in widths or everyone):  # no wider one (tested first: the cheapest)
            continue
        if not ((offers and _waits_for_offers(stage)) or _waits_for_cores(stage)):
            continue
        wider = [c for c in (*widths.get(stage.name, ()), *everyone) if c >= stage.cores]
        if not wider or running + min(wider) <= max_cores:
            continue
        # the idle ones kept for this stage or for the whole run, in their order
        mine, everything = idle_for.get(stage.name, []), idle_for.get(TOTAL, [])
        for i in sorted({*mine, *everything}) if mine and everything else mine or everything:
            a, labels = idle[i]
            if a.alloc_id in gone or a.cores >= stage.cores or _useful(view, a, labels):
                continue
            logger.info(
                "liveness: allocation %s (%d core(s), idle) is too narrow for stage %s's %d-core tasks and "
                "keeps the wider one from starting (%d cores at most): releasing it",
                a.alloc_id, a.cores, stage.name, stage.cores, max_cores,
            )  # fmt: skip
            out.append(Cancel(a.alloc_id, f"too narrow for stage {stage.name}; making room for a wider one"))
            gone.add(a.alloc_id)
            running -= a.cores
    return out


def _rerun(
    view: RunView,
    stage: StageView,
    lasting: list[_Lasting],
    able: _Able,
    max_cores: int | None,
    leaving: frozenset[str] = frozenset(),
) -> tuple[Submit | None, float | None]:
    """Return the request for ``stage``'s tasks waiting for a re-run if no allocation has their estimate left.

    Else None and, where only running allocations have it, the backend time until which one still does.
    """
    floor = stage.rerun_floor
    assert floor is not None
    need = rerun_need(stage)
    cap = view.knowledge.max_walltime
    if cap is not None:
        need = min(need, cap)  # the most any request can have: one with that much serves
    name, width = stage.name, stage.cores
    until: float | None = None
    for labels, c, left, end in lasting:
        if c >= width and left >= need and (name in labels or TOTAL in labels):
            if end is None:
                return None, None  # pending or requested: its walltime does not run down
            until = end - need if until is None else max(until, end - need)
    if until is not None:
        return None, until
    cores = max(stage.rerun_waiting, 1) * stage.cores
    if max_cores is not None:
        cores = min(cores, max(max_cores - able.held, stage.cores))
    walltime = math.ceil(rerun_need(stage))
    why = f"tasks lost after {floor:.0f} s run again; no allocation kept for them has {need:.0f} s left"
    # routine after a loss (the loss itself is the news), not a plan that missed: logged at INFO
    submit = _request(
        view, stage, _capped(cores, max_cores), why, level=logging.INFO, walltime=walltime, leaving=leaving
    )
    return submit, None


def _useful(view: RunView, a: Allocation, labels: frozenset[str]) -> bool:
    """Whether a stage ``a`` is kept for (every stage, if for the whole run) has waiting tasks that fit it."""
    return any(
        (s.name in labels or TOTAL in labels)
        and s.cores <= a.cores
        and (_waits_for_cores(s) or (s.ready and not s.complete and s.awaiting_offers > 0))
        for s in view.active_stages  # both tests need a stage ready and not complete
    )


def _request(
    view: RunView,
    stage: StageView,
    cores: int,
    why: str,
    *,
    level: int = logging.WARNING,
    walltime: float = 0.0,
    leaving: frozenset[str] = frozenset(),
) -> Submit:
    """Return the liveness request of ``cores`` cores for ``stage`` (logged at ``level`` with ``why``).

    Its walltime is the next of the stage's speculative sequence, at least ``walltime`` (within the
    partition's limit); the sequence so far leaves out the allocations the decision cancels (``leaving``).
    """
    previous = walltimes_so_far(view, stage.name, leaving)
    k = view.knowledge
    wanted = max(k.walltime(stage.name, previous), walltime)
    if k.max_walltime is not None:
        wanted = min(wanted, k.max_walltime)
    submit = Submit(
        stage.name,
        cores,
        wanted,
        reason=LIVENESS_REASON,
        predicted_wait=view.knowledge.predict_wait(cores),
    )
    logger.log(
        level,
        "liveness: stage %s has tasks of %d core(s) ready that no allocation can run (%s); "
        "requesting %d cores for %.0f s",
        stage.name,
        stage.cores,
        why,
        submit.cores,
        submit.walltime,
    )
    return submit


def _waits_for_offers(stage: StageView) -> bool:
    """Whether ``stage`` is ready, not complete, has tasks announced ready and none queued or running."""
    return (
        stage.ready
        and not stage.complete
        and stage.awaiting_offers > 0
        and stage.running == 0
        and not stage.queued
    )


def _free(view: RunView, a: Allocation) -> int:
    """Cores of ``a`` that run no task and may be offered (0 unless it is RUNNING: a draining one is not)."""
    if a.state is not AllocationState.RUNNING:
        return 0
    return max(0, a.cores - view.busy_cores(a.alloc_id))


def _waits_for_cores(stage: StageView) -> bool:
    """Whether ``stage`` is ready, not complete, and has tasks queued for cores."""
    return stage.ready and not stage.complete and _queued(stage) > 0


def _queued(stage: StageView) -> int:
    """Tasks of ``stage`` queued for cores (:attr:`StageView.queued`, else those neither done nor running)."""
    if stage.queued is not None:
        return stage.queued
    return max(0, stage.tasks - stage.done - stage.running)


def _capped(cores: int, max_cores: int | None) -> int:
    return cores if max_cores is None else min(cores, max_cores)

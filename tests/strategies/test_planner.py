"""The planner's hold/release and merge decisions on small hand-made queues with known answers (issue 9).

A "queue" here is a wait distribution: every quantile the same (the queue always waits ``W`` seconds),
so each decision has a break-even wait that can be worked out by hand from the prices.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import Allocation, AllocationState
from elastic.learners.ewma import LogEWMA
from elastic.strategies import Cancel, Knowledge, RunView, Serve, Shorten, StageView, Submit, make_strategy
from elastic.strategies.base import Releasing, walltime_follow_ups
from elastic.strategies.hold import hold_through, idled_out, keep_cost
from elastic.strategies.merge import Choice, groups
from elastic.strategies.planner import (
    HEADROOM_SLACK,
    WAVES,
    Planner,
    StagePlan,
    _pieces_for,
    _subset_widths,
    estimate_bias,
    plan,
)
from elastic.strategies.timing import PROBS, Prices, acquire_cost, acquire_delayed
from elastic.workflow import Stage, Workflow
from tests.strategies.views import alloc, split

BETA = 28.0  # weight 1 x the widest stage's 28 cores: a second of makespan is worth 28 core-seconds


def _queue(wait: float, model: str | None = "age") -> dict[str, Any]:
    """The queue arguments of :func:`plan` for a queue that always waits ``wait`` seconds."""
    waits = np.full(len(PROBS), wait)
    return {"waits": lambda cores, follow_up: waits, "prices": Prices(beta=BETA), "model": model}


WIDE_NARROW_WIDE = [StagePlan("narrow", 1, 600.0), StagePlan("wide2", 28, 1800.0)]


# -- hold / release ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("wait", "held"), [(0.0, False), (500.0, False), (700.0, True), (3600.0, True)])
def test_hold_across_a_short_narrow_stage_iff_the_wait_to_get_the_cores_back_costs_more(
    wait: float, held: bool
) -> None:
    # A 28-core allocation ends its stage now; next: 1 core x 600 s, then 28 cores x 1800 s.
    # Hold: 28 x 600 idle-or-used core-s. Release: 1 x 600, plus the 1-core wait now (28 W: needed at
    # once), plus the 28-core wait beyond the 600 s of notice (28 (W - 600)+). Break-even at W = 578.6 s.
    _, choices = plan(WIDE_NARROW_WIDE, held=28, lead=0.0, **_queue(wait))
    if held:
        assert choices == (Choice("narrow", 28, new=False), Choice("wide2", 28, new=False))
    else:
        assert choices == (Choice("narrow", 1, new=True), Choice("wide2", 28, new=True))


def test_hold_costs_what_the_held_cores_charge_and_release_what_the_waits_cost() -> None:
    cost_hold, _ = plan(WIDE_NARROW_WIDE, held=28, lead=0.0, **_queue(3600.0))
    assert cost_hold == pytest.approx(28 * 600 + 28 * 1800)
    cost_release, _ = plan(WIDE_NARROW_WIDE, held=28, lead=0.0, **_queue(300.0))
    assert cost_release == pytest.approx(1 * 600 + BETA * 300 + 28 * 1800)


def test_walltime_limits_the_hold_whatever_the_prices() -> None:
    # 3000 s left; 100 s of the current stage, then 600 s, 1800 s: 1.3 x 2500 > 3000, so only "narrow"
    assert hold_through(3000.0, 100.0, ["narrow", "wide2"], [600.0, 1800.0]) == ("narrow",)
    assert hold_through(4000.0, 100.0, ["narrow", "wide2"], [600.0, 1800.0]) == ("narrow", "wide2")


# -- the strategy at a stage boundary -------------------------------------------------------------------

WF = Workflow(
    "wnw",
    (
        Stage("wide1", tasks=28, cores=1, runtime=1800.0),
        Stage("narrow", tasks=1, cores=1, runtime=600.0),
        Stage("wide2", tasks=28, cores=1, runtime=1800.0),
    ),
)


def _knowledge(wait: float) -> Knowledge:
    """Knowledge whose learner has seen this queue: every wait ``wait`` (first and follow-up)."""
    k = Knowledge(WF, waits=LogEWMA(alpha=1.0))
    for cores in (1, 28):
        for follow_up in (False, True):
            k.observe_wait(cores, wait, follow_up=follow_up)
    return k


def _boundary_view(wait: float, waited: float | None = None) -> RunView:
    # wide1 has run 1700 of its 1800 s on a 28-core allocation with 20000 s of walltime, which waited
    # ``waited`` seconds in the queue (default: as the learner's ``wait``)
    stages = (
        StageView("wide1", 0, 28, 1, (), done=20, running=8, ready_time=0.0, start_time=0.0),
        StageView("narrow", 1, 1, 1, ("wide1",)),
        StageView("wide2", 2, 28, 1, ("narrow",)),
    )
    submit = -(wait if waited is None else waited)
    records, busy = split((alloc("a1", "wide1", 28, 20000.0, AllocationState.RUNNING, submit, 0.0, busy=8),))
    return RunView(1700.0, WF, stages, records, _knowledge(wait), busy)


def test_planner_holds_a_wide_allocation_across_the_narrow_stage_on_a_slow_queue() -> None:
    decision = Planner().decide(_boundary_view(3600.0))
    serves = [a for a in decision.actions if isinstance(a, Serve)]
    assert [(s.alloc_id, s.stages) for s in serves] == [("a1", ("wide1", "narrow", "wide2"))]
    assert not [a for a in decision.actions if isinstance(a, Submit)]  # nothing new to request


def test_planner_releases_and_times_the_next_requests_on_a_fast_queue() -> None:
    # a 60 s queue: request narrow's 1 core 60 s before wide1's predicted end (1800 s), hold nothing
    decision = Planner().decide(_boundary_view(60.0))
    assert not [a for a in decision.actions if isinstance(a, Serve)]
    assert not [a for a in decision.actions if isinstance(a, Submit)]
    assert decision.wake_at == pytest.approx(1740.0)


def test_a_follow_up_is_priced_by_this_runs_latest_wait_not_the_learned_one() -> None:
    # The learner has seen hour-long waits, but this run's wide1 allocation started at once: its follow-ups
    # are priced at 0 s, so nothing is held across narrow. And the reverse: a learner of 60-s waits, a run
    # whose allocation waited an hour holds. With run_waits=False the learned waits decide, as before.
    def held(planner: Planner, view: RunView) -> list[tuple[str, ...]]:
        return [a.stages for a in planner.decide(view).actions if isinstance(a, Serve)]

    kept = [("wide1", "narrow", "wide2")]
    assert held(Planner(), _boundary_view(3600.0, waited=0.0)) == []
    assert held(Planner(), _boundary_view(60.0, waited=3600.0)) == kept
    assert held(Planner(run_waits=False), _boundary_view(3600.0, waited=0.0)) == kept


def _estimated(view: RunView, wait: float, asked: list[tuple[int, float]] | None = None) -> RunView:
    """``view`` with a scheduler that estimates every new job's wait at ``wait`` seconds."""

    def estimate(cores: int, walltime: float, releasing: Releasing = ()) -> float:
        if asked is not None:
            asked.append((cores, walltime))
        return wait

    return dataclasses.replace(view, estimate=estimate)


def test_the_schedulers_estimate_prices_holds_where_the_run_saw_no_long_wait_yet() -> None:
    # This run's wide1 started at once, but the scheduler now says a new job waits an hour: hold across
    # narrow (the break-even wait is 578.6 s, as above). And the reverse: the run waited an hour, the
    # scheduler says the cores are free now: release. estimates=False keeps the run's latest wait.
    def held(planner: Planner, view: RunView) -> list[tuple[str, ...]]:
        return [a.stages for a in planner.decide(view).actions if isinstance(a, Serve)]

    kept = [("wide1", "narrow", "wide2")]
    assert held(Planner(), _estimated(_boundary_view(60.0, waited=0.0), 3600.0)) == kept
    assert held(Planner(), _estimated(_boundary_view(3600.0, waited=3600.0), 0.0)) == []
    assert held(Planner(estimates=False), _estimated(_boundary_view(60.0, waited=0.0), 3600.0)) == []
    assert held(Planner(estimates=False), _estimated(_boundary_view(3600.0, waited=3600.0), 0.0)) == kept


def test_a_request_goes_the_schedulers_estimate_ahead_of_its_need() -> None:
    # A 60-s queue by the run's own wait: narrow's core is requested 60 s before wide1's predicted end
    # (1800 s). The scheduler says 10 s: 10 s before; 40 s: 40 s before.
    asked: list[tuple[int, float]] = []
    assert Planner().decide(_estimated(_boundary_view(60.0), 10.0, asked)).wake_at == pytest.approx(1790.0)
    assert Planner().decide(_estimated(_boundary_view(60.0), 40.0)).wake_at == pytest.approx(1760.0)
    assert Planner(estimates=False).decide(_estimated(_boundary_view(60.0), 10.0)).wake_at == pytest.approx(
        1740.0
    )
    # asked with the walltime the stage still to run of that width would request
    k = _knowledge(60.0)
    assert set(asked) == {(1, k.walltime("narrow")), (28, k.walltime("wide2"))}


def test_the_latest_wait_is_of_the_nearest_width_that_started_and_counts_from_eligibility() -> None:
    records, busy = split(
        (
            alloc("a1", "wide1", 28, 9000.0, AllocationState.COMPLETED, 0.0, 500.0, 4000.0),
            alloc("a2", "narrow", 1, 9000.0, AllocationState.RUNNING, 3000.0, 3100.0, eligible_time=3050.0),
        )
    )
    view = RunView(3200.0, WF, _boundary_view(0.0).stages, records, _knowledge(0.0), busy)
    assert (view.latest_wait(28), view.latest_wait(1)) == (500.0, 50.0)
    # no 56-core or 8-core job started: the nearest width by ratio (28: 2x and 3.5x away; 1: 56x and 8x),
    # not the latest job of any width (the 1-core one, which started later)
    assert (view.latest_wait(56), view.latest_wait(8), view.latest_wait(3)) == (500.0, 500.0, 50.0)
    assert view.latest_wait() == 50.0  # any width: the latest
    assert RunView(0.0, WF, view.stages, (), _knowledge(0.0)).latest_wait(28) is None


def test_a_narrower_jobs_later_and_longer_wait_bounds_the_latest_wait_from_below() -> None:
    # the queue filled up after the 28-core job started at once: a 1-core job since waited 10 h, so a
    # wider job would now wait at least as long; a narrower job's short wait says nothing of a wider one
    records, busy = split(
        (
            alloc("a1", "wide1", 28, 9000.0, AllocationState.RUNNING, 0.0, 30.0),
            alloc("a2", "narrow", 1, 9000.0, AllocationState.RUNNING, 100.0, 36100.0),
        )
    )
    view = RunView(40000.0, WF, _boundary_view(0.0).stages, records, _knowledge(0.0), busy)
    assert (view.latest_wait(56), view.latest_wait(28), view.latest_wait(1)) == (36000.0, 36000.0, 36000.0)
    records, busy = split(
        (
            alloc("a1", "wide1", 28, 9000.0, AllocationState.RUNNING, 0.0, 36000.0),
            alloc("a2", "narrow", 1, 9000.0, AllocationState.RUNNING, 36000.0, 36030.0),
        )
    )
    view = RunView(40000.0, WF, _boundary_view(0.0).stages, records, _knowledge(0.0), busy)
    assert (view.latest_wait(56), view.latest_wait(28), view.latest_wait(1)) == (36000.0, 36000.0, 30.0)


def test_asa_is_the_planner_and_the_paper_is_kept() -> None:
    assert isinstance(make_strategy("asa"), Planner)
    assert make_strategy("asa-paper").name == "asa-paper"


# -- merge ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("wait", [0.0, 600.0, 36000.0])
def test_consecutive_stages_of_equal_width_share_one_allocation_on_any_queue(wait: float) -> None:
    stages = [StagePlan("a", 28, 1800.0), StagePlan("b", 28, 900.0)]
    _, choices = plan(stages, held=0, lead=0.0, **_queue(wait))
    assert choices == (Choice("a", 28, new=True), Choice("b", 28, new=False))
    assert [(g.stages, g.cores) for g in groups(choices)] == [(("a", "b"), 28)]


@pytest.mark.parametrize(("wait", "merged"), [(0.0, False), (3600.0, True)])
def test_wide_stages_around_a_short_narrow_one_merge_only_when_waits_are_long(
    wait: float, merged: bool
) -> None:
    stages = [StagePlan("w1", 28, 1800.0), *WIDE_NARROW_WIDE]
    _, choices = plan(stages, held=0, lead=0.0, **_queue(wait))
    got = [(g.stages, g.cores) for g in groups(choices)]
    if merged:
        assert got == [(("w1", "narrow", "wide2"), 28)]
    else:
        assert got == [(("w1",), 28), (("narrow",), 1), (("wide2",), 28)]


# -- overlapping waits --------------------------------------------------------------------------------------

SPLIT_WIDE = [StagePlan("split", 1, 600.0), StagePlan("wide", 28, 1800.0)]


def _two_queues(narrow: float, wide: float, wide_follow_up: float, model: str) -> dict[str, Any]:
    """A queue where 1 core waits ``narrow`` s and 28 cores ``wide`` s (``wide_follow_up`` once a job ran)."""

    def waits(cores: int, follow_up: bool) -> np.ndarray:
        wait = narrow if cores == 1 else wide_follow_up if follow_up else wide
        return np.full(len(PROBS), wait)

    return {"waits": waits, "prices": Prices(beta=BETA), "model": model}


@pytest.mark.parametrize(("model", "own"), [("age", True), ("basic", False)])
def test_a_short_narrow_first_stage_gets_its_own_cores_when_its_wait_hides_in_the_wide_one(
    model: str, own: bool
) -> None:
    # 1 core waits an hour, 28 cores five hours (30 h once a job of the run has started). Asked at once
    # (age), the wide cores come 5 h from now and the narrow stage is long done: the run is delayed
    # 5 h - 600 s, and only 1 core x 600 s is charged for split. Merged, the 28 cores idle through split
    # (28 x 600) and the run starts 600 s later. Summed (as each allocation's wait priced on its own),
    # split's hour came on top and merging won. Chained behind split (basic), the waits do add up.
    queue = _two_queues(3600.0, 5 * 3600.0, 30 * 3600.0, model)
    cost, choices = plan(SPLIT_WIDE, held=0, lead=0.0, follow_up=False, **queue)
    if own:
        assert choices == (Choice("split", 1, new=True), Choice("wide", 28, new=True))
        assert cost == pytest.approx(600 + 28 * 1800 + BETA * (5 * 3600 - 600))
    else:
        assert choices == (Choice("split", 28, new=True), Choice("wide", 28, new=False))
        assert cost == pytest.approx(28 * 2400 + BETA * 5 * 3600)


def test_a_request_made_once_an_allocation_of_the_run_started_is_priced_as_a_follow_up() -> None:
    # A 28-core allocation is held: new cores would be asked after it started. A first request of 28
    # cores starts at once, a follow-up waits 5 h: holding (28 x 600 idle-or-used) beats 5 h of delay.
    queue = _two_queues(0.0, 0.0, 5 * 3600.0, "age")
    _, choices = plan(SPLIT_WIDE, held=28, lead=0.0, **queue)
    assert choices == (Choice("split", 28, new=False), Choice("wide", 28, new=False))
    # Nothing of the run started yet, but a first request waits 0: the wide cores are asked when split
    # has its cores (at its need, 0 s ahead), so they are a follow-up too, and split is merged.
    _, fresh = plan(SPLIT_WIDE, held=0, lead=0.0, follow_up=False, **queue)
    assert fresh == (Choice("split", 28, new=True), Choice("wide", 28, new=False))


@settings(max_examples=200, deadline=None)
@given(
    waits=st.lists(st.floats(0.0, 200_000.0), min_size=len(PROBS), max_size=len(PROBS)),
    delay=st.lists(st.floats(0.0, 200_000.0), min_size=len(PROBS), max_size=len(PROBS)),
    need=st.floats(0.0, 50_000.0),
    cores=st.integers(1, 128),
    model=st.sampled_from(["age", "basic", "accrue-always", None]),
)
def test_a_delay_carried_in_never_shrinks_and_with_none_the_price_is_one_allocation_s(
    waits: list[float], delay: list[float], need: float, cores: int, model: str | None
) -> None:
    w, d = np.sort(np.asarray(waits)), np.sort(np.asarray(delay))
    prices = Prices(beta=BETA)
    idle, after = acquire_delayed(w, cores, prices, need=need, delay=d, model=model)
    assert idle >= 0.0 and len(after) == len(PROBS)
    assert np.all(np.diff(after) >= 0.0)  # quantiles, in order
    assert float(after.mean()) >= float(d.mean()) - 1e-6 * (1.0 + float(d.mean()))  # no delay is undone
    idle0, after0 = acquire_delayed(w, cores, prices, need=need, delay=np.zeros(len(PROBS)), model=model)
    alone = acquire_cost(w, cores, prices, lead=need, model=model)
    assert idle0 + prices.beta * float(after0.mean()) == pytest.approx(alone, rel=1e-9, abs=1e-6)


# -- the width invariant ----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    widths=st.lists(st.integers(1, 128), min_size=1, max_size=7),
    works=st.lists(st.floats(0.0, 20_000.0), min_size=7, max_size=7),
    held=st.integers(0, 256),
    shrink=st.lists(st.integers(1, 256), max_size=3),
    lead=st.floats(0.0, 50_000.0),
    waits=st.lists(st.floats(0.0, 200_000.0), min_size=len(PROBS), max_size=len(PROBS)),
    model=st.sampled_from(["age", "basic", "accrue-always", None]),
)
def test_the_planner_never_holds_more_cores_than_the_widest_remaining_stage_needs(
    widths: list[int],
    works: list[float],
    held: int,
    shrink: list[int],
    lead: float,
    waits: list[float],
    model: str | None,
) -> None:
    stages = [StagePlan(f"s{i}", w, works[i]) for i, w in enumerate(widths)]
    q = np.sort(np.asarray(waits))
    queue = {"waits": lambda cores, follow_up: q, "prices": Prices(beta=BETA), "model": model}
    _, choices = plan(stages, held=held, lead=lead, shrink=shrink, **queue)
    assert [c.stage for c in choices] == [s.name for s in stages]
    width, on_held = held, True
    for m, c in enumerate(choices):
        assert c.cores <= max(widths[m:])  # never wider than the widest stage left needs
        if c.new:
            assert c.cores >= widths[m]  # a new allocation is wide enough for its stage
            on_held = False
        elif on_held:
            # the held allocation, or the pieces of it kept (chosen before the first stage), runs a wider
            # stage in at most WAVES waves
            assert c.cores == width or (m == 0 and c.cores in shrink and c.cores < held)
            assert c.cores * WAVES >= widths[m]
        else:
            assert c.cores == width and c.cores >= widths[m]  # a new allocation kept: unchanged, no waves
        width = c.cores


def test_a_hold_keeps_some_pieces_when_the_next_wide_stage_can_run_in_waves_on_them() -> None:
    # 56 cores held as two pieces of 28; next: 1 core x 600 s, then 56 cores x 600 s; every new
    # allocation waits 3 h. Keeping all: 56 x 1200 = 67200 core-s. Keeping 28: 28 x 600 + 28 x 1200 and
    # 600 s of delay (a second wave). Releasing all: 600 + 56 x 600 and 3 h of delay.
    stages = [StagePlan("narrow", 1, 600.0), StagePlan("wide2", 56, 600.0)]
    waits = np.full(len(PROBS), 3 * 3600.0)
    for beta, kept in ((56.0, 56), (14.0, 28)):
        queue = {"waits": lambda cores, follow_up: waits, "prices": Prices(beta=beta), "model": "age"}
        cost, choices = plan(stages, held=56, lead=0.0, shrink=(28,), **queue)
        assert choices == (Choice("narrow", kept, new=False), Choice("wide2", kept, new=False))
        assert cost == pytest.approx(67200.0 if kept == 56 else 28 * 1800 + beta * 600)
    # without pieces to release, the allocation is kept whole
    queue = {"waits": lambda cores, follow_up: waits, "prices": Prices(beta=14.0), "model": "age"}
    assert plan(stages, held=56, lead=0.0, **queue)[1][0] == Choice("narrow", 56, new=False)


# -- regressions found while measuring issue 9's grid ----------------------------------------------------


def test_a_learner_that_saw_no_wait_of_a_geometry_predicts_zero_regression_9() -> None:
    # LogEWMA predicts only keys it has seen; Big-Job's follow-ups asked it for 1-core waits and the run
    # ended with "releasing every allocation"
    k = Knowledge(WF, waits=LogEWMA())
    assert k.predict_wait(1) == 0.0
    k.observe_wait(1, 600.0)
    assert k.predict_wait(1) == pytest.approx(600.0)


def test_a_walltime_follow_up_is_requested_ahead_by_the_lead_the_strategy_gives_regression_9() -> None:
    # at 1600 s wide1 has ~200 s left and a1 runs out at 1750 s; the learner's wait is an hour: by default
    # the follow-up is due an hour + 60 s ahead (now), with a lead of 0 s only at 1690 s
    stages = (
        StageView("wide1", 0, 28, 1, (), done=20, running=8, ready_time=0.0, start_time=0.0),
        StageView("narrow", 1, 1, 1, ("wide1",)),
        StageView("wide2", 2, 28, 1, ("narrow",)),
    )
    records, busy = split((alloc("a1", "wide1", 28, 1750.0, AllocationState.RUNNING, 0.0, 0.0, busy=8),))
    k = _knowledge(3600.0)
    for follow_up in (False, True):
        k.observe_wait(8, 3600.0, follow_up=follow_up)
    view = RunView(1600.0, WF, stages, records, k, busy)
    (s,) = walltime_follow_ups(view, ["wide1"]).actions
    # as wide as the 8 tasks not done need, not the stage's 28 cores
    assert isinstance(s, Submit) and (s.stage, s.reason, s.cores) == ("wide1", "walltime", 8)
    later = walltime_follow_ups(view, ["wide1"], lead=lambda cores: 0.0)
    assert not later.actions and later.wake_at == pytest.approx(1690.0)


def _split_boundary_view(wait: float) -> RunView:
    # the boundary of _boundary_view, with the 28 cores in 4 batch jobs of 7 split from one request
    base = _boundary_view(wait)
    jobs = tuple(
        alloc(f"a{i + 1}", "wide1", 7, 20000.0, AllocationState.RUNNING, -wait, 0.0, busy=b, piece_of="a1")
        for i, b in enumerate((7, 1, 0, 0))
    )
    records, busy = split(jobs)
    return RunView(base.now, base.workflow, base.stages, records, base.knowledge, busy)


def test_jobs_split_from_one_request_are_held_together_across_the_narrow_stage() -> None:
    # a slow queue: all four jobs are kept for the coming stages, none released though two are idle (at
    # weight 1; at the default, 0.1, wide2 runs in waves on the busy jobs: the regression_9 test below)
    decision = Planner(weight=1.0).decide(_split_boundary_view(3600.0))
    serves = {a.alloc_id: a.stages for a in decision.actions if isinstance(a, Serve)}
    assert serves == {f"a{i}": ("wide1", "narrow", "wide2") for i in range(1, 5)}
    assert not [a for a in decision.actions if isinstance(a, Cancel)]


def test_jobs_split_from_one_request_give_back_the_tail_when_nothing_is_held() -> None:
    # a fast queue: nothing is held, wide1 has no task waiting, so its two idle jobs go now
    decision = Planner().decide(_split_boundary_view(60.0))
    assert not [a for a in decision.actions if isinstance(a, Serve)]
    assert sorted(a.alloc_id for a in decision.actions if isinstance(a, Cancel)) == ["a3", "a4"]


WIDE_THEN_NARROW = Workflow(
    "wn",
    (Stage("wide1", tasks=28, cores=1, runtime=1800.0), Stage("narrow", tasks=1, cores=1, runtime=600.0)),
)


def _pending_first_view(now: float, running: bool) -> RunView:
    # wide1 is ready at 0 on a1 (28 cores), pending, or running since 3600 s; the last stage, narrow, needs
    # 1 core; 1-core waits are 10000 s, 28-core ones 3600 s
    k = Knowledge(WIDE_THEN_NARROW, waits=LogEWMA(alpha=1.0))
    for cores, wait in ((1, 10000.0), (28, 3600.0)):
        for follow_up in (False, True):
            k.observe_wait(cores, wait, follow_up=follow_up)
    started = 3600.0 if running else None
    stages = (
        StageView("wide1", 0, 28, 1, (), ready_time=0.0, start_time=started, running=28 if running else 0),
        StageView("narrow", 1, 1, 1, ("wide1",)),
    )
    state = AllocationState.RUNNING if running else AllocationState.REQUESTED
    a1 = alloc("a1", "wide1", 28, 20000.0, state, 0.0, started, busy=28 if running else 0)
    records, busy = split((a1,))
    return RunView(now, WIDE_THEN_NARROW, stages, records, k, busy)


def test_no_allocation_asks_for_days_of_walltime_on_the_wait_of_one_still_pending_regression_9() -> None:
    # Predicted from a1's wait still to come, narrow is needed at ~5400 s and its 1 core waits 10000 s:
    # its wait is expected to reach its need, so it is asked now, beside a1 (their waits run side by
    # side). Its walltime covers idling until that guessed need only up to its own walltime: on HPC2N
    # capacity, requests made so (1 core, 31 days of walltime, before the run's first allocation started)
    # never started, and 6 of 30 Montage runs gave up at the 4-day horizon.
    view = _pending_first_view(60.0, running=False)
    walltime = view.knowledge.walltime("narrow")
    before = Planner().decide(view)
    (early,) = [a for a in before.actions if isinstance(a, Submit)]
    assert (early.stage, early.cores, early.predicted_wait) == ("narrow", 1, pytest.approx(5340.0))
    assert early.walltime <= 2 * walltime + 1
    # Once a1 runs, narrow's need rests on it: asked at once (its wait is longer than the 1700 s left of
    # wide1), for the 1700 s it may idle plus its own walltime.
    after = Planner().decide(_pending_first_view(3700.0, running=True))
    (s,) = [a for a in after.actions if isinstance(a, Submit)]
    assert (s.stage, s.cores, s.predicted_wait) == ("narrow", 1, pytest.approx(1700.0))
    assert s.walltime < 1700 + 2 * 600 * 1.5


def test_a_request_left_for_a_wait_still_to_come_is_woken_for_when_it_is_due() -> None:
    # As above, but narrow's 1 core waits 600 s: predicted from a1's wait still to come, narrow is needed
    # at ~5400 s, more than its walltime away, and its own wait does not reach that: it is not asked now.
    # The decision wakes when it is due (its lead, the 600-s wait, before its need), unless its need moved
    # by then: a paced decision kept until then asks in time, not up to a pace late (without the wake,
    # 12 of 350 re-checks of a 100-stage DAG's run acted, most of them requests).
    view = _pending_first_view(60.0, running=False)
    k = Knowledge(WIDE_THEN_NARROW, waits=LogEWMA(alpha=1.0))
    for cores, wait in ((1, 600.0), (28, 3600.0)):
        for follow_up in (False, True):
            k.observe_wait(cores, wait, follow_up=follow_up)
    decision = Planner().decide(dataclasses.replace(view, knowledge=k))
    assert not [a for a in decision.actions if isinstance(a, Submit)]
    assert decision.wake_at == pytest.approx(5400.0 - 600.0)


# -- the scheduler's estimate with this run's own allocations released (issue 9) --------------------------


Asked = list[tuple[int, float, Releasing]]


def _asking(view: RunView, waits: dict[tuple[str, ...], float], asked: Asked) -> RunView:
    """``view`` with a scheduler whose estimate depends on which of this run's allocations are released."""

    def estimate(cores: int, walltime: float, releasing: Releasing = ()) -> float:
        asked.append((cores, walltime, releasing))
        return waits[tuple(a for a, _ in releasing)]

    return dataclasses.replace(view, estimate=estimate)


def test_the_wait_to_get_the_cores_back_is_asked_with_the_allocation_that_gives_them_back_released() -> None:
    # At wide1's end (1800 s), a 28-core request would wait an hour only because a1 itself holds 28 cores
    # to its walltime; released when wide1 ends, its cores are free at once. Released, the cores come
    # back: nothing is held. Priced by the plain estimate (an hour), the planner would hold a1.
    asked: Asked = []
    view = _asking(_boundary_view(60.0, waited=0.0), {(): 3600.0, ("a1",): 0.0}, asked)
    decision = Planner().decide(view)
    assert not [a for a in decision.actions if isinstance(a, Serve)]
    assert (28, _knowledge(60.0).walltime("wide2"), (("a1", 1800.0),)) in asked
    # the same queue with a1 not in the way: an hour's wait either way, a1 is held
    slow = _asking(_boundary_view(60.0, waited=0.0), {(): 3600.0, ("a1",): 3600.0}, [])
    assert [a.stages for a in Planner().decide(slow).actions if isinstance(a, Serve)] == [
        ("wide1", "narrow", "wide2")
    ]


def test_holds_are_planned_again_when_the_queue_changes_after_the_boundary() -> None:
    # At wide1's start the queue is empty: a1 is to be released after wide1. Before wide1 ends a large job
    # takes the machine and the estimate says an hour: the same planner now holds a1 across narrow (a
    # batch job's walltime cannot be extended later, but a1 has 20000 s).
    planner = Planner()
    first = _estimated(dataclasses.replace(_boundary_view(60.0, waited=0.0), now=10.0), 0.0)
    assert not [a for a in planner.decide(first).actions if isinstance(a, Serve)]
    later = _estimated(_boundary_view(60.0, waited=0.0), 3600.0)
    assert [a.stages for a in planner.decide(later).actions if isinstance(a, Serve)] == [
        ("wide1", "narrow", "wide2")
    ]


def _first_request_view(workflow: Workflow = WF, wait: float | None = None) -> RunView:
    # nothing requested yet; wide1 is ready now; the scheduler estimates every request at ``wait`` s, or
    # (None) at a tenth of its walltime (a longer request waits longer)
    stages = tuple(
        StageView(
            s.name,
            i,
            s.cores * s.tasks,
            1,
            (workflow.stages[i - 1].name,) if i else (),
            ready_time=0.0 if i == 0 else None,
        )
        for i, s in enumerate(workflow.stages)
    )
    estimate = (lambda c, w, releasing=(): w / 10) if wait is None else (lambda c, w, releasing=(): wait)
    return RunView(
        0.0, workflow, stages, (), Knowledge(workflow, waits=LogEWMA(alpha=1.0)), estimate=estimate
    )


def test_nothing_is_requested_while_the_backlog_is_full() -> None:
    view = _first_request_view(wait=3600.0)
    assert any(isinstance(a, Submit) for a in Planner().decide(view).actions)
    full = dataclasses.replace(view, backlog_full=True)
    assert not any(isinstance(a, Submit) for a in Planner().decide(full).actions)


def _requested_walltime(planner: Planner, view: RunView) -> float:
    (first,) = [a for a in planner.decide(view).actions if isinstance(a, Submit) and a.stage == "wide1"]
    return first.walltime


def test_a_request_covers_the_stages_after_it_where_the_longer_walltime_waits_no_longer() -> None:
    # A batch job's walltime cannot be extended once it runs, and only an allocation whose walltime
    # covers the later stages can be held across them.
    k = Knowledge(WF, waits=LogEWMA(alpha=1.0))
    own, narrow, wide2 = (k.walltime(s) for s in ("wide1", "narrow", "wide2"))
    # it starts at once either way: every stage left is covered
    assert _requested_walltime(Planner(pieces=1), _first_request_view(wait=0.0)) == math.ceil(
        own + narrow + wide2
    )
    # it waits 600 s either way: covered up to the last stage a hold could save a wait for (wide2)
    assert _requested_walltime(Planner(pieces=1), _first_request_view(wait=600.0)) == math.ceil(
        own + narrow + wide2
    )
    # the longer request would wait longer: wide1's own walltime
    assert _requested_walltime(Planner(pieces=1), _first_request_view()) == math.ceil(own)
    # no estimate (none given, or off): nothing tells what the longer walltime costs, and it is asked
    # up to the last stage a hold could save a wait for (asked never, no allocation could be held)
    for_holds = math.ceil(own + narrow + wide2)
    assert _requested_walltime(Planner(estimates=False, pieces=1), _first_request_view(wait=0.0)) == for_holds
    no_estimate = dataclasses.replace(_first_request_view(), estimate=None)
    assert _requested_walltime(Planner(pieces=1), no_estimate) == for_holds
    # asked as two batch jobs (the default) without an estimate: one wave of its stages, and the same cover
    assert _requested_walltime(Planner(), no_estimate) == for_holds


def test_a_piece_asks_two_waves_of_walltime_only_where_the_estimate_says_it_waits_no_longer() -> None:
    # One piece may start before the other and run its stage alone in two waves; but a longer walltime
    # waits longer where the scheduler plans every job's walltime (HPC2N capacity)
    k = Knowledge(WF, waits=LogEWMA(alpha=1.0))
    own, narrow, wide2 = (k.walltime(s) for s in ("wide1", "narrow", "wide2"))
    assert own / 10 > HEADROOM_SLACK  # below, a second wave's walltime waits own / 10 s longer
    # every request waits 600 s whatever its walltime: two waves, and the stages a hold could use
    assert _requested_walltime(Planner(), _first_request_view(wait=600.0)) == math.ceil(
        2 * own + narrow + wide2
    )
    # a longer request waits longer: one wave (and no cover for holds either)
    assert _requested_walltime(Planner(), _first_request_view()) == math.ceil(own)
    # the estimate off: one wave (and the cover for holds, asked without an estimate)
    assert _requested_walltime(Planner(estimates=False), _first_request_view(wait=600.0)) == math.ceil(
        own + narrow + wide2
    )


def test_a_trailing_narrow_stage_is_covered_only_where_the_request_starts_at_once() -> None:
    # wide1 then a last 1-core stage: no hold of wide1's allocation can save a wide wait. Covering narrow
    # too spares a walltime kill in a wide1 that runs long, but where the request waits the longer
    # walltime can lose backfill holes the estimate cannot see (BLAST 28 on HPC2N replay, run 16: 23.8 h
    # against Per-Stage's 10.3 h): only where it starts at once.
    k = Knowledge(WIDE_THEN_NARROW, waits=LogEWMA(alpha=1.0))
    own, narrow = k.walltime("wide1"), k.walltime("narrow")
    assert _requested_walltime(Planner(pieces=1), _first_request_view(WIDE_THEN_NARROW, 0.0)) == math.ceil(
        own + narrow
    )
    assert _requested_walltime(Planner(pieces=1), _first_request_view(WIDE_THEN_NARROW, 600.0)) == math.ceil(
        own
    )
    # without an estimate too: no later stage is as wide, so no hold could save a wait
    no_estimate = dataclasses.replace(_first_request_view(WIDE_THEN_NARROW, 0.0), estimate=None)
    assert _requested_walltime(Planner(pieces=1), no_estimate) == math.ceil(own)


def _early_view(now: float) -> RunView:
    # wide1 runs on a1 (ends ~1800 s); a2, asked early for wide2 (needed after narrow, ~2400 s), has just
    # started, idle, after a 100-s wait
    stages = (
        StageView("wide1", 0, 28, 1, (), done=10, running=18, ready_time=0.0, start_time=0.0),
        StageView("narrow", 1, 1, 1, ("wide1",)),
        StageView("wide2", 2, 28, 1, ("narrow",)),
    )
    records, busy = split(
        (
            alloc("a1", "wide1", 28, 20000.0, AllocationState.RUNNING, 0.0, 0.0, busy=18),
            alloc("a2", "wide2", 28, 20000.0, AllocationState.RUNNING, now - 100.0, now),
        )
    )
    return RunView(now, WF, stages, records, _knowledge(0.0), busy)


@pytest.mark.parametrize(
    ("wait", "released"), [(0.0, True), (100.0, True), (3600.0, True), (4500.0, True), (4700.0, False)]
)
def test_an_allocation_that_started_long_before_its_stage_is_released_if_asking_again_is_cheaper(
    wait: float, released: bool
) -> None:
    # a2 idles 2300 s x 28 cores until wide2 can start (wide1 ends at 1800 s, narrow takes 600 s). Asked
    # again, 28 cores wait ``wait`` (without a2): requested at once, they come ``wait - 2300`` s late, each
    # second priced at beta = 28 core-s (weight 1). Break-even at 4600 s: release below it, keep above.
    view = _estimated(_early_view(100.0), wait)
    cancelled = [a.alloc_id for a in Planner(weight=1.0).decide(view).actions if isinstance(a, Cancel)]
    assert ("a2" in cancelled) is released
    assert "a1" not in cancelled


def test_an_allocation_started_before_a_straggling_stage_goes_once_it_idled_what_asking_again_costs() -> None:
    # a2 started at 1700 s for wide2; wide1 then outlives its estimate, and every decision predicts its end
    # soon (wide2 needed ~0.1 x wide1's age + narrow's 600 s from now): idling that is cheaper than a
    # 3000-s wait for 28 cores again, so the early release alone keeps a2 at every decision. It goes once
    # what it idled (28 cores since 1700 s) reaches what asking again costs (28 x (3000 s - the lead)):
    # kept at 3600 s (1900 s idled, 2040 s of delay), released at 4000 s (2300 s against 2000 s)
    base = _early_view(1700.0)

    def at(now: float) -> list[Cancel]:
        view = _estimated(dataclasses.replace(base, now=now), 3000.0)
        return [a for a in planner.decide(view).actions if isinstance(a, Cancel)]

    planner = Planner(weight=1.0)
    assert not at(1700.0) and not at(3000.0) and not at(3600.0)
    (cancel,) = at(4000.0)
    assert cancel.alloc_id == "a2" and cancel.reason.startswith("idled 2300 s before wide2")
    # the clock is the planner's own memory of the allocation idle: one that did not see it before keeps it
    planner = Planner(weight=1.0)
    assert not at(4000.0)


@pytest.mark.parametrize(("rerun_end", "released"), [(None, False), (3400.0, True)])
def test_a_task_re_run_after_a_loss_delays_the_need_of_the_allocations_after_it(
    rerun_end: float | None, released: bool
) -> None:
    # At 1700 s the last wide1 task was lost after 1700 s and starts again from scratch. Without that,
    # wide1 is expected to end at 1800 s and wide2 needs a2 at 2400 s: 700 s idle, less than a 3000-s
    # wait to get 28 cores again costs (break-even at twice the idle time). With it, wide1 ends no sooner
    # than 3400 s: 2300 s idle costs more than the wait, and a2 is released.
    view = _early_view(1700.0)
    wide1 = dataclasses.replace(view.stages[0], done=27, running=1, rerun_end=rerun_end)
    view = _estimated(dataclasses.replace(view, stages=(wide1, *view.stages[1:]), busy={"a1": 1}), 3000.0)
    cancelled = [a.alloc_id for a in Planner(weight=1.0).decide(view).actions if isinstance(a, Cancel)]
    assert ("a2" in cancelled) is released


def _waiting_rerun_view(cores_from: str) -> RunView:
    # At 5000 s wide1's last task, lost after 1700 s at 1700 s, has not started again: it waits for cores
    # (``cores_from``: "running", a1 still runs with walltime for it; "pending", a1 ended and a3 was asked
    # at 4900 s). a2 runs idle for wide2, needed after wide1's re-run (~1800 s) and narrow (600 s).
    view = _early_view(5000.0)
    wide1 = dataclasses.replace(
        view.stages[0], done=27, running=0, rerun_end=3400.0, rerun_floor=1700.0, rerun_waiting=1
    )
    rows = [alloc("a2", "wide2", 28, 20000.0, AllocationState.RUNNING, 4900.0, 5000.0)]
    if cores_from == "running":
        rows.append(alloc("a1", "wide1", 28, 20000.0, AllocationState.RUNNING, 0.0, 0.0))
    else:
        rows.append(alloc("a1", "wide1", 28, 1700.0, AllocationState.TIMEOUT, 0.0, 0.0, 1700.0))
        rows.append(alloc("a3", "wide1", 1, 4000.0, AllocationState.REQUESTED, 4900.0, reason="liveness"))
    records, busy = split(tuple(rows))
    return dataclasses.replace(view, stages=(wide1, *view.stages[1:]), allocations=records, busy=busy)


@pytest.mark.parametrize("cores_from", ["running", "pending"])
@pytest.mark.parametrize(("floor", "released"), [(None, False), (1700.0, True)])
def test_a_task_waiting_to_run_again_delays_the_need_of_the_allocations_after_it_from_when_it_can_start(
    cores_from: str, floor: float | None, released: bool
) -> None:
    # Its end was counted from its loss (3400 s, long past), so wide1 looked as if it ended within
    # minutes and a2 was kept idle. It ends no sooner than its cores come plus a re-run of ~1800 s: a2
    # would idle 2400 s or more, which costs more than asking 28 cores again (a 3000-s wait), so a2 is
    # released. Without the waiting task (``floor`` None) the same view keeps a2.
    view = _waiting_rerun_view(cores_from)
    wide1 = dataclasses.replace(view.stages[0], rerun_floor=floor, rerun_waiting=0 if floor is None else 1)
    view = _estimated(dataclasses.replace(view, stages=(wide1, *view.stages[1:])), 3000.0)
    cancelled = [a.alloc_id for a in Planner(weight=1.0).decide(view).actions if isinstance(a, Cancel)]
    assert ("a2" in cancelled) is released


def test_an_allocation_released_for_starting_early_is_asked_again_only_when_due() -> None:
    # a2 is released (the queue gives 28 cores at once without it); wide2 is then asked again just before
    # its need, not at once: the estimate for it leaves a2, being released, out
    # (at 1000 s: wide2 is needed at 2400 s, within its own walltime, so only the wait decides when)
    view = dataclasses.replace(
        _early_view(1000.0),
        estimate=lambda c, w, releasing=(): 0.0 if ("a2", 1020.0) in releasing else 7200.0,
    )
    decision = Planner().decide(view)
    assert [a.alloc_id for a in decision.actions if isinstance(a, Cancel)] == ["a2"]
    assert not [a for a in decision.actions if isinstance(a, Submit) and "wide2" in (a.serves or (a.stage,))]


def _short_view(kept: int) -> RunView:
    # narrow runs on a1 (ends ~2400 s); of wide2's request, asked early, ``kept`` one-core jobs are left
    # (the others idled out and were released), each running one of wide1's last tasks again; the queue
    # waits an hour
    stages = (
        StageView("wide1", 0, 28, 1, (), done=28, ready_time=0.0, start_time=0.0, end_time=1800.0),
        StageView("narrow", 1, 1, 1, ("wide1",), running=1, ready_time=1800.0, start_time=1800.0),
        StageView("wide2", 2, 28, 1, ("narrow",)),
    )
    pieces = tuple(
        alloc(f"p{i}", "wide2", 1, 20000.0, AllocationState.RUNNING, 0.0, 50.0, busy=1, piece_of="p0")
        for i in range(kept)
    )
    records, busy = split(
        (alloc("a1", "narrow", 1, 20000.0, AllocationState.RUNNING, 0.0, 1800.0, busy=1), *pieces)
    )
    return RunView(2000.0, WF, stages, records, _knowledge(3600.0), busy)


@pytest.mark.parametrize(("kept", "asked"), [(1, 27), (13, 15), (14, None), (28, None)])
def test_a_stage_kept_on_what_some_of_its_pieces_left_is_asked_the_rest(kept: int, asked: int | None) -> None:
    # Regression: 1000Genome 112 (CTC SP2 capacity, in jobs of one task, run 14): the stage kept on the
    # one job left of 16 was never planned again and ran its tasks one after another (33.7 h, fine
    # Per-Stage 14.0 h). Kept on fewer cores than two waves need, the rest is asked (at once: the wait
    # is longer than the 400 s to its need); on half its width or more, it runs in waves as a hold plans
    decision = Planner().decide(_short_view(kept))
    submits = [a for a in decision.actions if isinstance(a, Submit) and "wide2" in (a.serves or (a.stage,))]
    assert [a.cores for a in submits] == ([] if asked is None else [asked])


# -- a pending request whose stage is ready, and an idle allocation its stage cannot end on ---------------


def _ready_view(asked: float) -> RunView:
    # wide1 and narrow are done; wide2 is ready at 3000 s and waits for a2, asked at 1000 s with
    # ``asked`` seconds of walltime (the walltime its stage needs, plus cover to idle until the need)
    stages = (
        StageView("wide1", 0, 28, 1, (), done=28, ready_time=0.0, start_time=0.0, end_time=1800.0),
        StageView(
            "narrow", 1, 1, 1, ("wide1",), done=1, ready_time=1800.0, start_time=1800.0, end_time=3000.0
        ),
        StageView("wide2", 2, 28, 1, ("narrow",), ready_time=3000.0),
    )
    a2 = alloc("a2", "wide2", 28, asked, AllocationState.REQUESTED, 1000.0, reason="initial")
    records, busy = split((a2,))
    return RunView(3000.0, WF, stages, records, _knowledge(3600.0), busy)


def test_a_request_still_waiting_when_its_stage_is_ready_drops_its_cover_for_idling() -> None:
    needed = _ready_view(1.0).knowledge.walltime("wide2")
    (shorten,) = [a for a in Planner().decide(_ready_view(needed + 2000.0)).actions if isinstance(a, Shorten)]
    assert (shorten.alloc_id, shorten.walltime) == ("a2", math.ceil(needed))
    # asked for what its stage needs (to the minute): nothing to lower (a walltime follow-up's cover is
    # the shared rule's: tests/strategies/test_rules.py)
    assert not [a for a in Planner().decide(_ready_view(needed + 30.0)).actions if isinstance(a, Shorten)]


def _expiring_view(replacement: bool, left: float) -> RunView:
    # wide2 is ready and needs ~1800 s; a2 runs idle with ``left`` seconds of walltime; a3, the follow-up
    # for wide2, is pending (or not asked yet)
    stages = (
        StageView("wide1", 0, 28, 1, (), done=28, ready_time=0.0, start_time=0.0, end_time=1800.0),
        StageView(
            "narrow", 1, 1, 1, ("wide1",), done=1, ready_time=1800.0, start_time=1800.0, end_time=3000.0
        ),
        StageView("wide2", 2, 28, 1, ("narrow",), ready_time=3000.0),
    )
    rows = [alloc("a2", "wide2", 28, 1000.0 + left, AllocationState.RUNNING, 0.0, 2000.0)]
    if replacement:
        rows.append(alloc("a3", "wide2", 28, 7200.0, AllocationState.REQUESTED, 3000.0, reason="walltime"))
    records, busy = split(tuple(rows))
    return RunView(3000.0, WF, stages, records, _knowledge(3600.0), busy)


@pytest.mark.parametrize(
    ("replacement", "left", "released"), [(True, 600.0, True), (False, 600.0, False), (True, 5000.0, False)]
)
def test_an_idle_allocation_its_ready_stage_cannot_end_on_is_released_once_replaced(
    replacement: bool, left: float, released: bool
) -> None:
    # HPC2N capacity, Statistics 28, run 1: an allocation asked for period_stats ran its predecessor's
    # tail, and with 0.6 h left it could not end period_stats (~0.85 h); the stage's tasks waited for its
    # follow-up (placement's time rule) while it idled 28 cores until its walltime (16.6 core-h)
    decision = Planner().decide(_expiring_view(replacement, left))
    cancelled = [a.alloc_id for a in decision.actions if isinstance(a, Cancel)]
    assert ("a2" in cancelled) is released
    assert "a3" not in cancelled


def test_a_hold_keeps_the_busy_piece_and_gives_back_the_idle_one_when_waves_cost_less_regression_9() -> None:
    # the boundary of _boundary_view, its 28 cores in two batch jobs of 14 split from one request, the
    # 8 tasks left running on the second. Every new allocation waits 20000 s; at weight 0.1 (2.8 core-s
    # per second of makespan) 14 cores kept across narrow, wide2 in two waves on them, cost less than
    # all 28 idling through narrow, and much less than the wait
    base = _boundary_view(20000.0)
    jobs = tuple(
        alloc(
            f"a{i + 1}", "wide1", 14, 20000.0, AllocationState.RUNNING, -20000.0, 0.0, busy=b, piece_of="a1"
        )
        for i, b in enumerate((0, 8))
    )
    records, busy = split(jobs)
    view = RunView(base.now, base.workflow, base.stages, records, base.knowledge, busy)
    decision = Planner(weight=0.1).decide(view)
    serves = {a.alloc_id: a.stages for a in decision.actions if isinstance(a, Serve)}
    assert serves == {"a2": ("wide1", "narrow", "wide2")}
    assert [a.alloc_id for a in decision.actions if isinstance(a, Cancel)] == ["a1"]
    assert not [a for a in decision.actions if isinstance(a, Submit)]
    # at weight 1 a second wave costs more than 14 idle cores: both are kept
    serves = {a.alloc_id: a.stages for a in Planner(weight=1.0).decide(view).actions if isinstance(a, Serve)}
    assert serves == {"a1": ("wide1", "narrow", "wide2"), "a2": ("wide1", "narrow", "wide2")}


def test_the_pieces_kept_are_the_busy_ones_whatever_their_number() -> None:
    # a 64-core request split into 1-core jobs (job_cores=1): choosing which 16 to keep is a subset sum,
    # not a search over the 2**64 subsets
    jobs = [Allocation(f"a{i}", cores=1, walltime=3600.0) for i in range(64)]
    busy = {f"a{i}": 1 for i in range(0, 64, 4)}  # 16 busy jobs
    kept = _pieces_for(jobs, 16, lambda alloc_id: busy.get(alloc_id, 0))
    assert sorted(b.alloc_id for b in kept) == sorted(busy)
    assert _pieces_for(jobs, 65, lambda alloc_id: 0) == jobs  # no subset makes it: all
    assert _subset_widths([20, 8, 20, 8]) == (8, 16, 20, 28, 36, 40, 48)


# -- the scheduler's estimate scaled by its bias learned from the run's own requests (issue 28) -----------


def _calibration_view(now: float, starts: tuple[float | None, ...]) -> RunView:
    # wide1's 28-core request was made at 0 on an estimate of an hour, as ``len(starts)`` pieces (two, or
    # many: jobs of one task); ``starts``: when each piece started (None: it still waits)
    view = _first_request_view(wait=3600.0)
    pieces = tuple(
        Allocation(f"a{i}", cores=28 // len(starts), walltime=9000.0, stage="wide1", submit_time=0.0,
                   state=AllocationState.REQUESTED if start is None else AllocationState.RUNNING,
                   start_time=start, eligible_time=0.0, piece_of="a1")
        for i, start in enumerate(starts, 1)
    )  # fmt: skip
    return dataclasses.replace(view, now=now, allocations=pieces)


def test_a_calibrated_planner_scales_the_estimate_by_the_waits_that_followed_its_own_requests() -> None:
    planner, plain = Planner(), Planner(calibrate=False)
    for p in (planner, plain):
        actions = p.decide(_first_request_view(wait=3600.0)).actions
        assert any(isinstance(a, Submit) and a.stage == "wide1" for a in actions)
    # its first piece started after 10 minutes where the estimate said an hour (from then its cores may
    # idle; the other piece still waits): later estimates are scaled down
    started = _calibration_view(900.0, (600.0, None))
    factor = math.exp(math.log(660.0 / 3660.0) / 2)  # one ratio and one pseudo-observation of 1
    assert planner.queue.waits(started, 28, True)[0] == pytest.approx(3600.0 * factor)
    assert plain.queue.waits(started, 28, True)[0] == pytest.approx(3600.0)
    # still waiting after two hours: the estimate was low, later ones are scaled up
    waiting = _calibration_view(7200.0, (None, None))
    assert planner.queue.waits(waiting, 28, True)[0] == pytest.approx(3600.0 * math.sqrt(7260.0 / 3660.0))
    # waiting for less than the estimate says nothing yet
    assert planner.queue.waits(_calibration_view(1800.0, (None, None)), 28, True)[0] == pytest.approx(3600.0)


def test_a_request_of_many_jobs_is_read_at_its_middle_job() -> None:
    planner = Planner()
    planner.decide(_first_request_view(wait=3600.0))
    # its first job backfilled at once, the others wait: that says nothing yet of when its cores come
    first_only = _calibration_view(1200.0, (60.0, None, None, None))
    assert planner.queue.waits(first_only, 28, True)[0] == pytest.approx(3600.0)
    # once half of them started, its wait is the middle job's, 20 minutes, not the first's minute
    half = _calibration_view(1500.0, (60.0, 1200.0, None, None))
    factor = math.exp(math.log(1260.0 / 3660.0) / 2)
    assert planner.queue.waits(half, 28, True)[0] == pytest.approx(3600.0 * factor)
    # of two pieces the first is the middle one, as before (the test above)
    two = Planner()
    two.decide(_first_request_view(wait=3600.0))
    assert two.queue.waits(_calibration_view(1500.0, (60.0, None)), 28, True)[0] == pytest.approx(
        3600.0 * math.exp(math.log(120.0 / 3660.0) / 2)
    )


def test_an_estimate_whose_request_was_held_back_is_forgotten_and_changes_nothing() -> None:
    planner = Planner()
    planner.decide(_first_request_view(wait=3600.0))
    # a request planned at t=300 that the submission cap or the backlog held back: no request was made
    # then, so it never matches one (each decision read all of these again: thousands on a wide DAG)
    planner.queue.given[(300.0, "wide1")] = 60.0
    started = _calibration_view(900.0, (600.0, None))
    factor = math.exp(math.log(660.0 / 3660.0) / 2)
    assert planner.queue.waits(started, 28, True)[0] == pytest.approx(3600.0 * factor)
    assert list(planner.queue.given) == [(0.0, "wide1")]
    # one of this very second may still be made: kept
    planner.queue.given[(1800.0, "wide1")] = 60.0
    assert planner.queue.waits(_calibration_view(1800.5, (600.0, None)), 28, True)[0] == pytest.approx(
        3600.0 * factor
    )
    assert (1800.0, "wide1") in planner.queue.given


@given(st.lists(st.floats(0.01, 100.0), max_size=8), st.floats(0.0, 4.0))
def test_the_learned_bias_lies_between_one_and_the_ratios_seen(ratios: list[float], prior: float) -> None:
    if prior == 0.0 and not ratios:
        return
    bias = estimate_bias(ratios, prior)
    assert min([1.0, *ratios]) * (1 - 1e-9) <= bias <= max([1.0, *ratios]) * (1 + 1e-9)


def _after_a_timeout(state: AllocationState) -> RunView:
    """A one-task stage whose first allocation (166 s) ended in ``state`` while its task ran."""
    wf = Workflow("ranout", (Stage("m", 1, 1, runtime=60.0),))
    stages = (StageView("m", 0, 1, 1, (), ready_time=0.0, start_time=0.0),)
    allocations, busy = split((alloc("a1", "m", 1, 166.0, state, 0.0, 0.0, 166.0),))
    return RunView(200.0, wf, stages, allocations, Knowledge(wf), busy)


def test_a_stage_whose_allocation_ran_out_is_asked_for_more_walltime() -> None:
    # SRASearch 56, synthetic queue, run 3: the same 123-166 s was asked again after each timeout
    again = [
        a
        for a in Planner().decide(_after_a_timeout(AllocationState.TIMEOUT)).actions
        if isinstance(a, Submit)
    ]
    killed = [
        a
        for a in Planner().decide(_after_a_timeout(AllocationState.CANCELLED)).actions
        if isinstance(a, Submit)
    ]
    assert again and killed
    assert again[0].walltime > 166.0  # the speculative sequence's next value after the one that ran out
    assert killed[0].walltime < 166.0  # cancelled from outside: not a walltime problem, the plain request


# -- a piece idle beside its stage's last tasks: released at the ski rental's break-even ----------------


def _straggling_view(now: float, busy: tuple[int, int] = (0, 8)) -> RunView:
    # wide1's last 8 tasks run on the second of its two 14-core pieces, the first idles; every new
    # allocation waits 20000 s. The stage's end is predicted 100 s after ``now`` at every decision (it
    # outlived its runtime estimate): the searches keep both pieces for wide2 at weight 1
    base = _boundary_view(20000.0)
    stages = (dataclasses.replace(base.stages[0], start_time=now - 1700.0), *base.stages[1:])
    jobs = tuple(
        alloc(f"a{i + 1}", "wide1", 14, 1e5, AllocationState.RUNNING, -20000.0, 0.0, busy=b, piece_of="a1")
        for i, b in enumerate(busy)
    )
    records, cores = split(jobs)
    return RunView(now, base.workflow, stages, records, base.knowledge, cores)


def test_a_piece_idle_beside_its_stages_last_tasks_goes_once_it_idled_what_asking_again_costs() -> None:
    planner = Planner(weight=1.0)
    first = planner.decide(_straggling_view(1700.0))
    assert not [a for a in first.actions if isinstance(a, Cancel)]
    due = first.wake_at
    # break-even: 14 idle cores against what releasing them delays the run, at 28 core-s a second
    # (weight 1): not the 20000-s wait of their replacement beyond the stage's predicted end, but the
    # second wave of wide2's 28 tasks of 1800 s that runs on the 14 cores left: 14 x idled = 28 x 1800
    assert due == pytest.approx(1700.0 + 28.0 * 1800.0 / 14.0, rel=0.01)
    # a decision before the break-even keeps it, the one at it releases it (and only it)
    assert not [a for a in planner.decide(_straggling_view(due - 1.0)).actions if isinstance(a, Cancel)]
    cancels = [a for a in planner.decide(_straggling_view(due)).actions if isinstance(a, Cancel)]
    assert [a.alloc_id for a in cancels] == ["a1"] and "idled" in cancels[0].reason
    # the clock is the planner's own memory of the piece idle: a planner that did not see it idle
    # before, or saw it busy since, keeps it
    assert not [a for a in Planner(weight=1.0).decide(_straggling_view(due)).actions if isinstance(a, Cancel)]
    again = Planner(weight=1.0)
    again.decide(_straggling_view(1700.0))
    again.decide(_straggling_view(due - 100.0, busy=(1, 7)))
    assert not [a for a in again.decide(_straggling_view(due)).actions if isinstance(a, Cancel)]


def test_an_idle_piece_is_priced_by_the_waves_its_absence_adds_on_the_pieces_left_for_its_stages() -> None:
    # three 14-core pieces for 28-core stages: the hold keeps two for wide2, the third goes now. The
    # first is then weighed on the 28 cores left, not the 42 there were: without it wide2 runs a second
    # wave of 1800 s, so it stays until it idled that (14 x idled = 28 x 1800), as in the test above
    planner = Planner(weight=1.0)
    first = planner.decide(_straggling_view(1700.0, busy=(0, 8, 0)))
    assert [a.alloc_id for a in first.actions if isinstance(a, Cancel)] == ["a3"]
    assert first.wake_at == pytest.approx(1700.0 + 28.0 * 1800.0 / 14.0, rel=0.01)


@pytest.mark.parametrize(("walltime", "released"), [(1e5, True), (9000.0, False)])
def test_an_idle_piece_is_priced_by_the_waves_it_adds_only_where_the_others_walltime_runs_them(
    walltime: float, released: bool
) -> None:
    # as above at 5300 s (3600 s idled, the break-even of a second wave of wide2): with 3700 s of
    # walltime left the other piece cannot run narrow and wide2 in two waves (4300 s, and a hold's
    # cover), so releasing the idle one leaves wide2 to new cores: priced by their 20000-s wait, kept
    def view(now: float) -> RunView:
        base = _straggling_view(now)
        return dataclasses.replace(
            base, allocations=tuple(dataclasses.replace(a, walltime=walltime) for a in base.allocations)
        )

    planner = Planner(weight=1.0)
    planner.decide(view(1700.0))
    cancels = [a.alloc_id for a in planner.decide(view(5300.0)).actions if isinstance(a, Cancel)]
    assert cancels == (["a1"] if released else [])


def test_a_piece_idle_beside_its_stages_last_tasks_goes_at_the_break_even_while_another_piece_waits() -> None:
    """A request in jobs of one task has pieces that wait long after the others started; they kept every
    started piece of the request, idle beside the stage's straggler, until the stage ended (CyberShake 28,
    synthetic queue, run 29, in 1-core jobs: 7 of 28 jobs pending, 18 idle for 0.5-0.7 h each)."""

    def view(now: float) -> RunView:
        # as _straggling_view, with the 28 cores asked as three pieces: 10 idle, 10 running the stage's
        # last 8 tasks, and 8 still waiting in the queue
        base = _straggling_view(now)
        running = AllocationState.RUNNING
        jobs = (
            alloc("a1", "wide1", 10, 1e5, running, -20000.0, 0.0, piece_of="a1"),
            alloc("a2", "wide1", 10, 1e5, running, -20000.0, 0.0, busy=8, piece_of="a1"),
            alloc("a3", "wide1", 8, 1e5, AllocationState.REQUESTED, -20000.0, piece_of="a1"),
        )
        records, busy = split(jobs)
        return RunView(now, base.workflow, base.stages, records, base.knowledge, busy)

    planner = Planner(weight=1.0)
    first = planner.decide(view(1700.0))
    assert not [a for a in first.actions if isinstance(a, Cancel)]
    assert first.wake_at is not None and first.wake_at > 1700.0  # due at the break-even
    assert not [a for a in planner.decide(view(first.wake_at - 1.0)).actions if isinstance(a, Cancel)]
    cancels = [a for a in planner.decide(view(first.wake_at)).actions if isinstance(a, Cancel)]
    # the idle piece goes; the busy one and the one still waiting stay
    assert [a.alloc_id for a in cancels] == ["a1"] and "idled" in cancels[0].reason


def test_a_piece_idle_while_its_stage_still_has_tasks_to_place_is_not_released_as_idled_out() -> None:
    # wide1 has tasks waiting for cores: an idle piece is about to get one, and is no straggler's
    planner = Planner(weight=1.0)
    v = _straggling_view(1700.0)
    waiting = (dataclasses.replace(v.stages[0], done=12), *v.stages[1:])  # 12 done, 8 running, 8 to place
    first = planner.decide(RunView(v.now, v.workflow, waiting, v.allocations, v.knowledge, v.busy))
    later = planner.decide(RunView(50000.0, v.workflow, waiting, v.allocations, v.knowledge, v.busy))
    assert not [a for d in (first, later) for a in d.actions if isinstance(a, Cancel) and "idled" in a.reason]


def test_a_piece_idle_before_its_stage_while_another_runs_a_re_run_goes_at_the_break_even_too() -> None:
    # second's two 14-core pieces started before their stage: first's task, lost with its own allocation,
    # runs again on one of them (the pool places a re-run on any allocation with the walltime for it),
    # and the other idles. The whole allocation is not idle, so the early release does not apply.
    wf = Workflow("fs", (Stage("first", 1, 1, runtime=1000.0), Stage("second", 28, 1, runtime=900.0)))
    k = Knowledge(wf, waits=LogEWMA(alpha=1.0))
    for cores in (1, 14, 28):
        for follow_up in (False, True):
            k.observe_wait(cores, 20000.0, follow_up=follow_up)

    def view(now: float) -> RunView:
        stages = (
            StageView("first", 0, 1, 1, (), running=1, ready_time=0.0, start_time=0.0),
            StageView("second", 1, 28, 1, ("first",)),
        )
        jobs = tuple(
            alloc(
                f"a{i + 1}", "second", 14, 1e5, AllocationState.RUNNING, -20000.0, 0.0, busy=b, piece_of="a1"
            )
            for i, b in enumerate((0, 1))
        )
        records, busy = split(jobs)
        return RunView(now, wf, stages, records, k, busy)

    planner = Planner(weight=1.0)
    first = planner.decide(view(1500.0))
    assert not [a for a in first.actions if isinstance(a, Cancel)]
    assert first.wake_at is not None and first.wake_at > 1500.0
    cancels = [a for a in planner.decide(view(first.wake_at)).actions if isinstance(a, Cancel)]
    assert [a.alloc_id for a in cancels] == ["a1"] and "idled" in cancels[0].reason


@settings(max_examples=300, deadline=None)
@given(
    cores=st.integers(1, 128),
    again=st.floats(0.0, 1e7),
    straggler=st.floats(0.0, 1e5),
    step=st.floats(1.0, 600.0),
)
def test_the_break_even_release_pays_at_most_twice_what_knowing_the_stragglers_end_would(
    cores: int, again: float, straggler: float, step: float
) -> None:
    # decisions every ``step`` seconds while the piece idles; the straggler ends after ``straggler`` s.
    # Knowing that, the cheaper of idling through it and getting the cores back; the rule, blind to it,
    # idles until the break-even (or the end), then pays ``again``: at most twice, plus one step's idle
    idled, released = 0.0, False
    while idled < straggler:
        if idled_out(cores, idled, again):
            released = True
            break
        idled = min(idled + step, straggler)
    paid = keep_cost(cores, idled) + (again if released else 0.0)
    best = min(keep_cost(cores, straggler), again)
    assert paid <= 2.0 * best + keep_cost(cores, step) + 1e-6 * (1.0 + paid)


# -- a request asks its estimate for the batch jobs it becomes, and merges no stage that makes it wait -----

TWO_WIDE = Workflow(
    "two-wide",
    (
        Stage("first", tasks=28, cores=1, runtime=1800.0, runtime_cv=0.0),
        Stage("second", tasks=28, cores=1, runtime=300.0, runtime_cv=0.0),
    ),
)


def _backfill_view(hole: float, job_cores: int | None) -> RunView:
    # a 28-core job waits 10 h whatever it asks; a job of one core starts at once if it asks no more than
    # ``hole`` seconds (a backfill hole), else it waits 10 h too
    def estimate(cores: int, walltime: float, releasing: Releasing = ()) -> float:
        return 0.0 if cores == 1 and walltime <= hole else 36_000.0

    stages = (
        StageView("first", 0, 28, 1, (), ready_time=0.0),
        StageView("second", 1, 28, 1, ("first",)),
    )
    widths = None if job_cores is None else (lambda cores, task: (job_cores,) * (cores // job_cores))
    knowledge = Knowledge(TWO_WIDE, waits=LogEWMA(alpha=1.0))
    return RunView(0.0, TWO_WIDE, stages, (), knowledge, estimate=estimate, job_widths=widths)


def _first_submit(view: RunView) -> Submit:
    return next(a for a in Planner().decide(view).actions if isinstance(a, Submit) and a.stage == "first")


def test_a_stage_that_takes_a_request_past_a_backfill_hole_is_not_merged_onto_it() -> None:
    # Regression: CyberShake 28, Lublin-Feitelson trace, in jobs of one task, run 5: PeakValCalcOkaya
    # merged onto SeismogramSynthesis's jobs made them ask more than the hole their stage alone fitted
    k = Knowledge(TWO_WIDE, waits=LogEWMA(alpha=1.0))
    first, second = k.walltime("first"), k.walltime("second")
    # in jobs of one core, the first stage alone fits the hole; with the second it does not
    submit = _first_submit(_backfill_view(hole=first, job_cores=1))
    assert submit.serves in ((), ("first",))
    # one wave (two would not fit the hole either); the headroom for holds is still asked of the request's
    # whole width (a 28-core job waits 10 h either way): asked of its jobs, Montage 28 on the busy synthetic
    # queue lost its holds (docs/results/strategies.md)
    assert submit.waves == 1 and submit.walltime < 2 * first
    # a hole wide enough for both: merged, as the search planned
    submit = _first_submit(_backfill_view(hole=2 * (first + second), job_cores=1))
    assert submit.serves == ("first", "second")
    # one job per piece (14 cores): the estimate says 10 h either way, merged
    assert _first_submit(_backfill_view(hole=first, job_cores=None)).serves == ("first", "second")


def test_a_piece_of_jobs_of_one_core_asks_its_second_wave_of_a_job_of_one_core() -> None:
    # the estimate is asked for the jobs run control submits, not for the 14-core piece they split: a
    # 14-core job waits 10 h with one wave or two, so two were asked, and the jobs of one core lost the
    # hole one wave fits
    k = Knowledge(TWO_WIDE, waits=LogEWMA(alpha=1.0))
    both = k.walltime("first") + k.walltime("second")
    submit = _first_submit(_backfill_view(hole=both, job_cores=1))
    assert (submit.serves, submit.waves, submit.walltime) == (("first", "second"), 1, math.ceil(both))
    submit = _first_submit(_backfill_view(hole=2 * both, job_cores=1))
    assert (submit.serves, submit.waves, submit.walltime) == (("first", "second"), 2, math.ceil(2 * both))
    # one job per piece: a 14-core job waits 10 h either way, and two waves are asked
    assert _first_submit(_backfill_view(hole=both, job_cores=None)).waves == 2

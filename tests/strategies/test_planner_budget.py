"""The planner under the submission-rate cap, and its walltime headroom summed once per view (issue 31).

A 5,000-stage random DAG has hundreds of stages ready at once, and the cap lets one job through every
2 s: the planner planned (and asked the scheduler's estimate for) every ready stage at each of those
steps, and summed the walltimes of every stage left for each request. Now it plans in full only the
requests the cap can take (:attr:`~elastic.strategies.base.RunView.submittable`), the liveness rule adds
no more than that either, and the sums come from prefix sums: the requests that go through are the same.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.backends.mock import MockBackend
from elastic.control.liveness import unserved
from elastic.control.rate import SubmissionRate
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.learners.ewma import LogEWMA
from elastic.strategies import merge
from elastic.strategies.base import Decision, Releasing, RunView, StageView, Submit
from elastic.strategies.knowledge import Knowledge
from elastic.strategies.planner import Planner
from elastic.strategies.planner_waits import HEADROOM_SLACK, QueueWaits
from elastic.workflow import Stage, Workflow


def _headroom_summed_each_time(
    self: QueueWaits, view: RunView, g: merge.Group, walltime: float, releasing: Releasing
) -> float:
    """:meth:`QueueWaits.headroom` as it was: every stage left summed again for each request."""
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


def _view(
    widths: list[int],
    ready: list[bool],
    done: list[bool],
    *,
    scale: float,
    max_walltime: float | None = None,
    submittable: int | None = None,
) -> RunView:
    """A view of a random DAG: stage i follows i-1 unless it is ready (a root); some complete."""
    stages = tuple(
        Stage(f"s{i}", w, 1, runtime=60.0 + 37.0 * (i % 7), depends_on=() if r or i == 0 else (f"s{i - 1}",))
        for i, (w, r) in enumerate(zip(widths, ready, strict=True))
    )
    workflow = Workflow("budget", stages)
    views = tuple(
        StageView(
            s.name,
            i,
            s.tasks,
            1,
            s.depends_on or (),
            ready_time=0.0 if (ready[i] or i == 0 or done[i]) else None,
            start_time=0.0 if done[i] else None,
            end_time=0.0 if done[i] else None,
            done=s.tasks if done[i] else 0,
        )
        for i, s in enumerate(stages)
    )
    knowledge = Knowledge(workflow, waits=LogEWMA(alpha=1.0), max_walltime=max_walltime)
    return RunView(
        0.0,
        workflow,
        views,
        (),
        knowledge,
        estimate=lambda c, w, releasing=(): max(0.0, w * scale - 300.0),  # longer asks wait longer
        submittable=submittable,
    )


shapes = st.integers(2, 30).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(1, 12), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


@settings(max_examples=60, deadline=None)
@given(shapes, st.sampled_from([0.0, 0.05, 0.2, 1.0]), st.sampled_from([None, 7200.0, 3600.5]))
def test_the_headroom_is_the_one_summed_stage_by_stage(
    shape: tuple[list[int], list[bool], list[bool]], scale: float, max_walltime: float | None
) -> None:
    widths, ready, done = shape
    view = _view(widths, ready, done, scale=scale, max_walltime=max_walltime)
    now, before = Planner(pieces=1), Planner(pieces=1)
    before.queue.headroom = types.MethodType(_headroom_summed_each_time, before.queue)  # type: ignore[method-assign]
    assert now.decide(view) == before.decide(view)


def _submits(decision: Decision) -> list[Submit]:
    return [a for a in decision.actions if isinstance(a, Submit)]


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 40), st.integers(0, 12), st.sampled_from([0.0, 0.05]))
def test_the_requests_the_cap_takes_are_planned_as_without_it(roots: int, budget: int, scale: float) -> None:
    widths = [1 + i % 5 for i in range(roots)]
    free = _view(widths, [True] * roots, [False] * roots, scale=scale)
    capped = dataclasses.replace(free, submittable=budget)
    full, got = _submits(Planner(pieces=1).decide(free)), _submits(Planner(pieces=1).decide(capped))
    assert len(full) == roots  # every ready root is requested
    # the first ``budget`` as without the cap; the next one too but for its walltime (the cap holds it
    # back, and names the step it refills at); none after
    assert len(got) == min(roots, budget + 1)
    assert got[:budget] == full[:budget]
    assert [dataclasses.replace(s, walltime=0) for s in got] == [
        dataclasses.replace(s, walltime=0) for s in full[: len(got)]
    ]


@given(st.integers(1, 30), st.integers(0, 12), st.integers(0, 5))
def test_the_liveness_rule_adds_no_more_than_the_cap_takes(stages: int, budget: int, planned: int) -> None:
    view = _view([2] * stages, [True] * stages, [False] * stages, scale=0.0, submittable=budget)
    planned = min(planned, stages)
    decision = Decision(tuple(Submit(f"s{i}", 2, 600) for i in range(planned)))
    added = _submits(unserved(view, decision))
    assert len(added) == max(0, min(stages - planned, max(budget, 1) - planned))
    # and without a cap, every stage left unserved
    free = dataclasses.replace(view, submittable=None)
    assert len(_submits(unserved(free, decision))) == stages - planned


moves = st.lists(
    st.tuples(st.floats(0.0, 30.0, allow_nan=False), st.integers(0, 4), st.booleans()), max_size=40
)


@given(moves, st.floats(1.0, 120.0), st.integers(1, 8))
def test_takes_is_what_allow_lets_through_or_one_more(
    steps: list[tuple[float, int, bool]], per_minute: float, burst: int
) -> None:
    rate, now = SubmissionRate(per_minute=per_minute, burst=burst), 0.0
    for gap, asks, fail in steps:
        now += gap
        bound = rate.takes(now)
        probe, let = copy.deepcopy(rate), 0
        while let <= bound and probe.allow(now):
            let += 1
        assert let <= bound <= let + 1
        for _ in range(asks):
            rate.allow(now)
        if fail:
            rate.ended(now, failed=True, ran=True)


def test_a_wide_fan_out_under_a_tight_cap_completes_planning_only_what_goes_through() -> None:
    roots = 60
    workflow = Workflow(
        "fan", tuple(Stage(f"r{i}", 1 + i % 3, 1, runtime=120.0, depends_on=()) for i in range(roots))
    )
    backend = MockBackend(nodes=16)
    runner = Runner(workflow, Planner(), backend, SimExecution(), Knowledge(workflow), seed=1)
    runner.controller.rate = SubmissionRate(per_minute=6, burst=4)
    asked: list[int] = []
    headroom = runner.controller.strategy.queue.headroom  # type: ignore[attr-defined]

    def counted(*args: object) -> float:
        asked[-1] += 1
        return headroom(*args)  # type: ignore[no-any-return]

    decide = runner.controller.strategy.decide

    def counting(view: RunView) -> Decision:
        asked.append(0)
        decision = decide(view)
        assert asked[-1] <= (view.submittable if view.submittable is not None else roots)
        return decision

    runner.controller.strategy.queue.headroom = counted  # type: ignore[attr-defined]
    runner.controller.strategy.decide = counting  # type: ignore[method-assign]
    result = runner.run()
    assert result.status == "completed"
    assert runner.controller.rate.held > 0  # the cap was reached
    assert max(asked) < roots  # no decision planned every ready stage in full


@settings(max_examples=40, deadline=None)
@given(
    shapes,
    st.lists(st.integers(0, 29), min_size=1, max_size=8),
    st.sampled_from([0.0, 0.05, 1.0]),
    st.sampled_from([None, 3600.5]),
    st.lists(st.tuples(st.integers(0, 29), st.sampled_from([30.0, 500.0, 4000.0, 90.5])), max_size=12),
)
def test_walltime_sums_kept_across_views_are_the_ones_summed_afresh(
    shape: tuple[list[int], list[bool], list[bool]],
    completing: list[int],
    scale: float,
    max_walltime: float | None,
    recorded: list[tuple[int, float]],
) -> None:
    # one planner asked at successive views of one run, stages completing between them and runtimes
    # recorded (from earlier runs, or a stage's own record before its view shows it complete): the
    # walltimes it keeps across views (only the stages whose record or runtimes changed read again) give
    # the decisions a planner summing every stage left afresh gives
    widths, ready, done = shape
    first = _view(widths, ready, done, scale=scale, max_walltime=max_walltime)
    knowledge = first.knowledge
    kept, afresh = Planner(pieces=1), Planner(pieces=1)
    afresh.queue.headroom = types.MethodType(_headroom_summed_each_time, afresh.queue)  # type: ignore[method-assign]
    stages = list(first.stages)
    for step, index in enumerate([-1, *completing]):
        if 0 <= index < len(stages) and not stages[index].complete:
            s = stages[index]
            stages[index] = dataclasses.replace(s, start_time=0.0, end_time=0.0, done=s.tasks, ready_time=0.0)
        for stage, runtime in recorded[step * 3 : step * 3 + 3]:  # the walltime learned once 3 are known
            if stage < len(stages):
                for _ in range(knowledge.min_history):
                    knowledge.record_runtime(f"s{stage}", runtime)
        view = dataclasses.replace(first, now=float(step), stages=tuple(stages))
        assert kept.decide(view) == afresh.decide(view)

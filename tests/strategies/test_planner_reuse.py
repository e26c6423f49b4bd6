"""``Planner(reuse=True)``: the search's result kept while only the clock moved (issue 28, item 5).

What is kept is keyed by every input the search reads, in the backend's time; a decision that searches afresh
decides exactly as a planner that never keeps anything. (A kept search can differ from a fresh one: the
clock alone moves what waits cost; ``benchmarks/bench_planner_cost.py --reuse`` measures both.)
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.experiments import simulate_runs
from elastic.simulator.synthetic import synthetic_workload
from elastic.strategies import RunView
from elastic.strategies import planner as planner_module
from elastic.strategies.planner import Planner
from elastic.workflow import Stage, Workflow
from tests.strategies.test_planner import _boundary_view, _estimated
from tests.strategies.views import alloc


def _counting(monkeypatch: object) -> list[int]:
    """Count the searches the planner runs (``planner.plan`` calls)."""
    calls: list[int] = []
    original = planner_module.plan

    def counted(*args: object, **kw: object) -> object:
        calls.append(1)
        return original(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(planner_module, "plan", counted)  # type: ignore[attr-defined]
    return calls


def test_a_search_is_kept_while_only_the_clock_moves_and_redone_on_any_change(monkeypatch: object) -> None:
    calls = _counting(monkeypatch)
    view = _boundary_view(3600.0)
    planner = Planner(reuse=True)
    planner.decide(view)
    searched = len(calls)
    assert searched > 0
    planner.decide(dataclasses.replace(view, now=view.now + 30.0))
    assert len(calls) == searched  # the clock alone: kept
    # a task ended: the search reads no task counts, kept
    stages = (dataclasses.replace(view.stages[0], done=21, running=7), *view.stages[1:])
    planner.decide(dataclasses.replace(view, now=view.now + 60.0, stages=stages))
    assert len(calls) == searched
    # the stage runs longer than expected (a runtime was learned): its end moved, searched again
    view.knowledge.record_runtime("wide1", 4000.0)
    planner.decide(dataclasses.replace(view, now=view.now + 60.0, stages=stages))
    assert len(calls) == 2 * searched
    # an allocation changed (a request appeared)
    extra, _ = alloc("a2", "narrow", 1, 600.0, AllocationState.REQUESTED, 1760.0)
    allocations = (*view.allocations, extra)
    changed = dataclasses.replace(view, now=view.now + 90.0, stages=stages, allocations=allocations)
    planner.decide(changed)
    assert len(calls) > 2 * searched
    # the knowledge learned a wait
    quiet = dataclasses.replace(view, now=view.now + 10.0, stages=stages)
    planner.decide(quiet)
    before = len(calls)
    planner.decide(dataclasses.replace(quiet, now=quiet.now + 20.0))
    assert len(calls) == before
    quiet.knowledge.observe_wait(28, 100.0, follow_up=True)
    planner.decide(dataclasses.replace(quiet, now=quiet.now + 40.0))
    assert len(calls) > before
    # never kept without reuse
    plain = Planner()
    before = len(calls)
    plain.decide(view)
    plain.decide(view)
    assert len(calls) == before + 2 * searched


def test_with_the_schedulers_estimate_a_search_is_kept_only_while_the_queue_version_is_the_same(
    monkeypatch: object,
) -> None:
    calls = _counting(monkeypatch)
    planner = Planner(reuse=True)
    unversioned = _estimated(_boundary_view(60.0, waited=0.0), 3600.0)
    planner.decide(unversioned)
    searched = len(calls)
    planner.decide(unversioned)
    assert len(calls) == 2 * searched  # the backend cannot say whether the queue changed: searched again
    versioned = dataclasses.replace(unversioned, queue_version=(1,))
    planner.decide(versioned)
    planner.decide(dataclasses.replace(versioned, now=versioned.now + 30.0))
    assert len(calls) == 3 * searched
    planner.decide(dataclasses.replace(versioned, now=versioned.now + 60.0, queue_version=(2,)))
    assert len(calls) == 4 * searched


def test_the_mock_queue_version_changes_with_the_queue_and_not_with_the_clock_alone() -> None:
    mock = MockBackend(nodes=4)
    first = mock.queue_version()
    assert mock.queue_version() == first
    running = mock.submit(JobSpec(cores=4, walltime=1000.0, runtime=500.0))
    started = mock.queue_version()
    assert started != first
    waiting = mock.submit(JobSpec(cores=4, walltime=600.0, runtime=100.0))
    queued = mock.queue_version()
    assert queued != started
    mock.sleep(30.0)
    assert mock.queue_version() == queued  # nothing happened but time
    assert mock.expected_start(JobSpec(cores=1, walltime=60.0)) is not None
    assert mock.queue_version() == queued  # asking the estimate changes nothing
    mock.cancel(waiting)
    assert mock.queue_version() != queued
    cancelled = mock.queue_version()
    mock.sleep(600.0)  # the running job ends
    assert mock.queue_version() != cancelled
    assert mock.state(running).state.is_final


def _workflow(draw: st.DrawFn) -> Workflow:
    n = draw(st.integers(2, 4))
    stages = []
    for i in range(n):
        deps = (
            ()
            if i == 0
            else tuple(
                sorted(draw(st.sets(st.sampled_from([f"s{j}" for j in range(i)]), min_size=1, max_size=2)))
            )
        )
        stages.append(
            Stage(
                f"s{i}",
                draw(st.integers(1, 6)),
                draw(st.sampled_from([1, 2, 4])),
                runtime=draw(st.sampled_from([300.0, 900.0, 1800.0])),
                depends_on=deps,
            )
        )
    return Workflow("random", tuple(stages))


@settings(max_examples=4, deadline=None, derandomize=True)
@given(st.composite(_workflow)(), st.integers(0, 3))
def test_a_decision_that_searches_afresh_is_the_one_without_reuse(workflow: Workflow, seed: int) -> None:
    # Through the simulator (a busy 32-core queue, the mock's estimate): at every decision of a run with
    # reuse that searches afresh, a planner that never keeps anything, in the same state, decides the same.
    original = Planner.decide
    compared: list[bool] = []

    def decide(self: Planner, view: RunView) -> object:
        if not self.reuse:
            return original(self, view)
        fresh = self._inputs(view) != self._plans[0]
        twin = Planner(weight=self.weight, cover=self.cover, pieces=self.pieces)
        twin._requested = dict(self._requested)
        twin.queue.given = dict(self.queue.given)  # the estimates its requests were made on (calibration)
        twin.queue._asked = self.queue._asked
        decision = original(self, view)
        if fresh:
            compared.append(original(twin, view) == decision)
        return decision

    Planner.decide = decide  # type: ignore[method-assign]
    try:
        background = synthetic_workload(jobs=400, processors=32, utilisation=0.9, max_cores=16, seed=seed)
        simulate_runs(
            workflow,
            "asa",
            runs=1,
            seed=seed,
            background=background,
            warmup=3600.0,
            strategy_options={"reuse": True},
        )
    finally:
        Planner.decide = original  # type: ignore[method-assign]
    assert compared and all(compared)

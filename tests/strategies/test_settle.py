"""How long a decision holds while only the clock moves (elastic/strategies/settle.py, Settles)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.strategies.base import RunView, StageView
from elastic.strategies.knowledge import Knowledge
from elastic.strategies.perstage import PerStage
from elastic.strategies.rules import remaining_work
from elastic.strategies.settle import SETTLE_MARGIN, work_fits_until
from elastic.workflow import Stage, Workflow
from tests.strategies.views import alloc, split

WORKFLOW = Workflow(
    "w", (Stage("a", 2, 1, runtime=1000.0), Stage("b", 1, 1, runtime=500.0, depends_on=("a",)))
)


def _view(now: float, walltime: float, knowledge: Knowledge) -> RunView:
    stages = (
        StageView("a", 0, 2, 1, (), running=2, ready_time=0.0, start_time=0.0),
        StageView("b", 1, 1, 1, ("a",)),
    )
    allocations, busy = split((alloc("a1", "a", 2, walltime, AllocationState.RUNNING, 0.0, 0.0, busy=2),))
    return RunView(now, WORKFLOW, stages, allocations, knowledge, busy)


def test_expected_duration_holds_until_the_next_recorded_runtime() -> None:
    k = Knowledge(WORKFLOW)
    for runtime in (100.0, 300.0, 700.0):
        k.record_runtime("a", runtime)
    assert k.expected_duration("a", 150.0) == k.expected_duration("a", 299.0) == 500.0
    assert k.expected_duration_until("a", 150.0) == 300.0
    assert k.expected_duration("a", 300.0) == 700.0
    assert k.expected_duration_until("a", 800.0) is None  # outlived every runtime: grows from here


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 3000.0), st.floats(500.0, 4000.0), st.floats(0.0, 3000.0))
def test_the_work_fits_until_the_time_it_says(now: float, walltime: float, later: float) -> None:
    # the test walltime_follow_ups makes, evaluated at a later clock, agrees with the time computed at now
    k = Knowledge(WORKFLOW)
    view = _view(now, walltime, k)
    end = walltime  # started at 0
    fits_now = remaining_work(view, "a") <= end - now
    until = work_fits_until(view, "a", end)
    if not fits_now:
        assert until <= now
        return
    t = now + later
    fits = remaining_work(view.at(t), "a") <= end - t
    if t < until - SETTLE_MARGIN:  # after it, it may stop fitting; never before
        assert fits


def test_perstage_promises_nothing_while_a_stage_needs_an_allocation() -> None:
    k = Knowledge(WORKFLOW)
    stages = (StageView("a", 0, 2, 1, (), ready_time=0.0), StageView("b", 1, 1, 1, ("a",)))
    view = RunView(10.0, WORKFLOW, stages, (), k, {})
    assert PerStage().decide(view).actions
    assert PerStage().settled_until(view)[0] <= view.now


def test_run_view_at_another_clock_keeps_everything_else() -> None:
    view = _view(10.0, 2000.0, Knowledge(WORKFLOW))
    later = view.at(70.0)
    assert later.now == 70.0 and view.now == 10.0
    assert later.stages is view.stages and later.allocations is view.allocations
    assert later.allocations_for("a") == view.allocations_for("a")


def test_mock_jobs_version_changes_when_a_submitted_job_does() -> None:
    backend = MockBackend(nodes=2)
    v0 = backend.jobs_version()
    backend.submit(JobSpec(cores=2, walltime=100.0, runtime=50.0))
    v1 = backend.jobs_version()
    assert v1 != v0
    backend.sleep(10.0)
    assert backend.jobs_version() == v1  # running, nothing changed
    backend.sleep(60.0)
    assert backend.jobs_version() != v1  # it ended


def test_mock_names_the_jobs_that_changed_since_a_version() -> None:
    backend = MockBackend(nodes=2)
    v0 = backend.jobs_version()
    first = backend.submit(JobSpec(cores=1, walltime=100.0, runtime=50.0))
    v1 = backend.jobs_version()
    assert backend.jobs_changed_since(v0) == {first}  # submitted
    second = backend.submit(JobSpec(cores=1, walltime=1000.0, runtime=500.0))
    backend.sleep(60.0)  # the first ended, the second runs
    v2 = backend.jobs_version()
    assert backend.jobs_changed_since(v1) == {first, second}
    backend.sleep(10.0)
    assert backend.jobs_version() == v2 and backend.jobs_changed_since(v2) == frozenset()

"""A request asked ahead stops following the allocation before it once its stage is ready (issue 28).

``asa`` asks a stage's allocation ahead with ``afterany`` on the allocation before it, so that it keeps
its queue place (``priority/basic``) and cannot start, and be charged, before its stage can use it. On
the local Slurm cluster the pool ran ``mDiffFit``'s first tasks on ``mProject``'s jobs as soon as they
came, which ``mDiffFit``'s own jobs followed: those started only once the tasks ended, and the stage ran
in two waves. The same happened where the plan kept ``mProject``'s jobs for ``mDiffFit``. Run control
now drops a pending request's dependencies once its stage is ready (``scontrol update Dependency=``;
the mock does the same, keeping the job's rank as Slurm's ``priority/basic`` does).
"""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import Dependency, DependencyKind, JobSpec, JobState
from elastic.control.execution import RunResult
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.errors import DependencyError, UnknownJobError
from elastic.metrics import EventKind
from elastic.strategies.actions import Cancel, Decision, Serve, Submit
from elastic.strategies.base import RunView
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow

WORKFLOW = Workflow(
    "w",
    (
        Stage("a", tasks=2, cores=1, runtime=600.0),
        Stage("b", tasks=4, cores=1, runtime=300.0, depends_on=("a",)),
    ),
)


class KeepsForTheNext:
    """Asks ``b``'s cores ahead, chained on ``a``'s; keeps ``a``'s for ``b`` once ``a`` is done.

    ``serve_at_submit``: keep ``a``'s allocation for both stages before ``b``'s request is made.
    """

    name = "keeps-for-the-next"

    def __init__(self, *, serve_at_submit: bool = False) -> None:
        self.serve_at_submit = serve_at_submit
        self.asked = False
        self.kept = False

    def decide(self, view: RunView) -> Decision:
        if not self.asked:
            self.asked = True
            return Decision((Submit("a", 2, 3600.0, reason="initial"),), wake_at=view.now + 1.0)
        [first, *_] = view.allocations_for("a")
        actions: list[Serve | Submit | Cancel] = []
        if first.running and not self.kept and (self.serve_at_submit or view.stage("a").complete):
            self.kept = True
            actions.append(Serve(first.alloc_id, ("a", "b") if self.serve_at_submit else ("b",)))
            if self.serve_at_submit:
                actions.append(Submit("b", 2, 3600.0, after=("a",), reason="initial"))
        elif first.running and len(view.allocations) == 1 and not self.serve_at_submit:
            actions.append(Submit("b", 2, 3600.0, after=("a",), reason="initial"))
        if view.stage("b").complete:
            actions += [Cancel(a.alloc_id) for a in view.live_allocations]
        return Decision(tuple(actions), wake_at=view.now + 1.0)


def _run(strategy: KeepsForTheNext) -> tuple[Runner, RunResult]:
    runner = Runner(
        WORKFLOW,
        strategy,
        MockBackend(nodes=8, priority="basic"),
        SimExecution(),
        Knowledge(WORKFLOW),
        max_duration=6 * 3600.0,
        poll_interval=1.0,
    )
    return runner, runner.run()


@pytest.mark.parametrize("serve_at_submit", [False, True])
def test_a_request_for_the_stage_an_allocation_is_kept_for_does_not_wait_for_it(
    serve_at_submit: bool,
) -> None:
    runner, result = _run(KeepsForTheNext(serve_at_submit=serve_at_submit))
    allocs = {a.stage: a for a in runner.controller.allocations}
    a, b = allocs["a"], allocs["b"]
    assert a.submit_time is not None and a.start_time is not None and b.start_time is not None
    a_done = a.start_time + 600.0
    # b's job went as soon as a's stage was done (or at once, chained on nothing), not when a's job
    # ended after b: b's 4 tasks ran on 4 cores in one wave, not in two on a's 2
    assert b.start_time <= a_done + 2.0
    assert b.dependencies == ()
    assert result.metrics.makespan == pytest.approx(a_done + 300.0 - a.submit_time, abs=5.0)
    # held until then (also where a's job was kept for b when b was asked): its queue wait counts from then
    assert b.eligible_time is not None and b.eligible_time == pytest.approx(a_done, abs=2.0)


def test_the_mock_changes_a_pending_jobs_dependencies_as_scontrol_update_does() -> None:
    backend = MockBackend(nodes=2, priority="basic")
    parent = backend.submit(JobSpec(cores=2, walltime=600.0))
    child = backend.submit(
        JobSpec(cores=1, walltime=60.0, dependencies=(Dependency(DependencyKind.AFTERANY, parent),))
    )
    backend.sleep(10.0)
    assert backend.state(child).state is JobState.PENDING  # held: the parent runs
    other = backend.submit(JobSpec(cores=2, walltime=60.0))  # a later job, with no dependency
    backend.set_dependencies(child, ())
    backend.sleep(10.0)
    assert backend.state(child).state is JobState.PENDING  # eligible now, but the cores are busy
    backend.cancel(parent)
    backend.sleep(1.0)
    # it kept its submit place under priority/basic: it goes before the later job (which then waits)
    assert backend.state(child).state is JobState.RUNNING
    assert backend.state(other).state is JobState.PENDING
    # a started job is left as it is; unknown ids are refused before anything changes
    backend.set_dependencies(child, (Dependency(DependencyKind.AFTERANY, other),))
    assert backend.state(child).state is JobState.RUNNING
    with pytest.raises(UnknownJobError):
        backend.set_dependencies("999999", ())
    with pytest.raises(DependencyError):
        backend.set_dependencies(other, (Dependency(DependencyKind.AFTERANY, "999999"),))
    assert backend.state(other).state is JobState.PENDING


def test_a_job_given_an_unsatisfied_dependency_leaves_the_queue_until_it_holds() -> None:
    backend = MockBackend(nodes=1, priority="basic")
    first = backend.submit(JobSpec(cores=1, walltime=600.0))
    second = backend.submit(JobSpec(cores=1, walltime=600.0))
    third = backend.submit(JobSpec(cores=1, walltime=600.0))
    backend.set_dependencies(second, (Dependency(DependencyKind.AFTERANY, third),))
    backend.cancel(first)
    backend.sleep(1.0)
    # second no longer goes first: it waits for third, which takes the freed core
    assert backend.state(third).state is JobState.RUNNING
    assert backend.state(second).state is JobState.PENDING
    backend.cancel(third)
    backend.sleep(1.0)
    assert backend.state(second).state is JobState.RUNNING


class SlowToRelease:
    """Asks ``b``'s cores ahead, chained on ``a``'s, and releases ``a``'s 30 s after ``a`` is done.

    ``b``'s tasks go to ``a``'s idle job meanwhile, as in a live run, where the pool places a ready
    stage's tasks at once, from its own thread, while the strategy decides at its next step.
    """

    name = "slow-to-release"

    def __init__(self) -> None:
        self.done_at: float | None = None

    def decide(self, view: RunView) -> Decision:
        if not view.allocations:
            return Decision(
                (
                    Submit("a", 2, 3600.0, reason="initial"),
                    Submit("b", 2, 3600.0, after=("a",), reason="initial"),
                ),
                wake_at=view.now + 1.0,
            )
        if view.stage("a").complete and self.done_at is None:
            self.done_at = view.now
        actions: list[Cancel] = []
        if self.done_at is not None and view.now >= self.done_at + 30.0:
            actions = [
                Cancel(a.alloc_id) for a in view.allocations_for("a") if not a.ended and not a.cancelled
            ]
        if view.stage("b").complete:
            actions = [Cancel(a.alloc_id) for a in view.live_allocations]
        return Decision(tuple(actions), wake_at=view.now + 1.0)


def test_a_request_does_not_wait_for_the_tasks_of_its_stage_on_the_allocation_it_follows() -> None:
    workflow = Workflow(
        "w",
        (
            Stage("a", tasks=2, cores=1, runtime=600.0),
            Stage("b", tasks=2, cores=1, runtime=300.0, depends_on=("a",)),
        ),
    )
    runner = Runner(
        workflow,
        SlowToRelease(),
        MockBackend(nodes=8, priority="basic"),
        SimExecution(),
        Knowledge(workflow),
        max_duration=6 * 3600.0,
        poll_interval=1.0,
    )
    result = runner.run()
    allocs = {a.stage: a for a in runner.controller.allocations}
    a, b = allocs["a"], allocs["b"]
    assert a.start_time is not None and b.start_time is not None
    a_done = a.start_time + 600.0
    # b's tasks started on a's idle job; b's own job, no longer held by it, started at once beside them
    # (before: it waited for them to end, 300 s after a)
    ran_on = {
        e.task: e.allocation for e in result.events if e.kind is EventKind.TASK_START and e.stage == "b"
    }
    assert set(ran_on.values()) == {a.alloc_id}
    assert b.start_time == pytest.approx(a_done, abs=2.0)
    assert b.dependencies == () and b.eligible_time == pytest.approx(a_done, abs=2.0)
    assert result.metrics.makespan == pytest.approx(a_done + 300.0 - (a.submit_time or 0.0), abs=5.0)

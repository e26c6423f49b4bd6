"""The front door with real agents: tasks from user code, stages learned as they come, all released."""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic, task
from elastic.allocations import AllocationState
from elastic.backends.local import LocalBackend
from elastic.backends.mock import MockBackend
from elastic.errors import ConfigError, UnknownNameError
from elastic.front.tasks import DependencyError
from elastic.metrics import EventKind
from elastic.pool.pool import PoolClosedError
from elastic.pool.tasks import ShellTaskError, Task, TaskEvent, TaskState
from elastic.store import Store
from elastic.strategies.base import Cancel, Decision, RunView, Submit
from elastic.workflow import Stage, Workflow

K = EventKind


def square(x: int) -> int:
    time.sleep(0.05)
    return x * x


def square_slowly(x: int, seconds: float) -> int:
    time.sleep(seconds)
    return x * x


def add_all(*xs: int) -> int:
    return sum(xs)


def boom(x: int) -> int:
    raise ValueError(f"bad input {x}")


@task(stage="prepare", runtime=0.3)
def prepare(n: int) -> list[int]:
    time.sleep(0.3)
    return list(range(n))


@task(stage="process", runtime=0.5)
def process(items: list[int], i: int) -> int:
    time.sleep(0.5)
    return items[i] * 10


@task(stage="merge", runtime=0.2)
def merge(*parts: int) -> int:
    time.sleep(0.2)
    return sum(parts)


def three_stages(el: Elastic, width: int = 4) -> int:
    """prepare (1 task) -> process (``width`` tasks) -> merge (1 task), submitted task by task."""
    items = el.submit(prepare, width)
    parts = [el.submit(process, items, i) for i in range(width)]
    return int(el.submit(merge, *parts).result(timeout=300))


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    with LocalBackend(cores=4) as backend:
        yield backend


def test_dataflow_on_this_machine(local: LocalBackend) -> None:
    with Elastic(local, "perstage", store=False, poll_interval=1.0) as el:
        parts = [el.submit(square, i) for i in range(6)]
        total = el.submit(add_all, *parts)
        assert total.result(timeout=60) == sum(i * i for i in range(6))
        assert list(el.map(square, range(3))) == [0, 1, 4]
        view = el.view()
        assert [s.name for s in view.stages][:2] == ["square", "add_all"]
        assert view.stages[1].depends_on == ("square",)  # learned from the futures passed as inputs
    result = el.result
    assert result is not None and result.status == "completed"
    assert [s.name for s in result.metrics.stages][:2] == ["square", "add_all"]
    assert all(not a.running for a in el.view().allocations)


class _CancelsWhileBusy:
    """A user strategy that cancels its allocation while a task runs on it.

    Built-in strategies cancel only allocations they saw idle, but the pool places tasks from its own
    thread, so a task can land between the strategy's look and the cancel: this makes that race certain.
    """

    name = "cancels-while-busy"

    def decide(self, view: RunView) -> Decision:
        if not view.allocations:
            return Decision((Submit("*", 1, 600.0),))
        (a,) = view.allocations
        if a.running and not a.cancelled and view.busy_cores(a.alloc_id) > 0:
            return Decision((Cancel(a.alloc_id, "released while busy"),))
        return Decision()


def test_a_cancel_of_a_busy_allocation_drains_it_and_the_task_is_not_lost(local: LocalBackend) -> None:
    with Elastic(local, _CancelsWhileBusy(), store=False, poll_interval=0.2, max_retries=0) as el:
        assert el.submit(square_slowly, 6, 2.0).result(timeout=60) == 36  # with no retry, a loss would fail
        (a,) = el.view().allocations
        assert a.cancelled  # cancelled by the strategy, still running its task
        deadline = time.monotonic() + 30
        while el.view().allocations[0].running and time.monotonic() < deadline:
            time.sleep(0.1)  # and cancelled once the task ended
        assert el.view().allocations[0].state is AllocationState.CANCELLED
        states = [e.state for e in el.pool.events if isinstance(e, TaskEvent)]
    assert states == [TaskState.QUEUED, TaskState.RUNNING, TaskState.DONE]  # not LOST, not rerun
    assert el.result is not None and el.result.status == "completed"


class _SubmitsOnce:
    """A user strategy that asks for one allocation for the first stage it sees, and nothing else."""

    name = "submits-once"

    def decide(self, view: RunView) -> Decision:
        return Decision() if view.allocations or not view.stages else Decision((Submit("s", 1, 600.0),))


def test_an_agent_joining_tells_the_controller_its_allocation_started_before_the_next_poll(
    local: LocalBackend,
) -> None:
    # no task is queued (an announced stage), so no task event wakes the control thread: the agent's
    # Register does, and the step asks the batch system for the start rather than wait out the poll
    with Elastic(local, _SubmitsOnce(), store=False, poll_interval=3600.0, progress=False) as el:
        el.expect("s", 1, ready=True)
        deadline = time.monotonic() + 30
        while (
            not (el.view().allocations and el.view().allocations[0].running) and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        (a,) = el.view().allocations
        assert a.running and a.start_time is not None and a.submit_time is not None
        assert a.start_time >= a.submit_time  # the batch system's start time, on the backend's clock
        el.expect("s", 0)
    assert el.result is not None
    starts = [e for e in el.result.events if e.kind is K.ALLOC_START]
    assert [(e.allocation, e.time) for e in starts] == [(a.alloc_id, a.start_time)]  # learned once


def test_a_wide_stage_split_into_one_core_jobs_gives_back_its_finished_cores(local: LocalBackend) -> None:
    # 4 tasks, one slow: in one 4-core job 3 cores would idle until it ends; as 1-core jobs, the idle
    # ones are cancelled while it runs (each is a real agent process in its own job)
    with Elastic(local, "perstage", store=False, poll_interval=0.2, job_cores=1) as el:
        futures = [el.submit_task(Task.shell(f"sleep {s}", stage="wide")) for s in (0.2, 0.2, 0.2, 6)]
        for f in futures:
            f.result(timeout=120)
        view = el.view()
    assert el.result is not None and el.result.status == "completed"
    jobs = view.allocations
    assert [a.cores for a in jobs] == [1, 1, 1, 1] and {a.piece_of for a in jobs} == {"a1"}
    events = el.result.events
    # the timeline names the request each job is a piece of: its wait is counted once, to the last piece
    assert {e.request for e in events if e.kind is K.ALLOC_SUBMIT} == {"a1"}
    (stage_end,) = [e.time for e in events if e.kind is K.STAGE_END and e.stage == "wide"]
    released_early = [a for a in jobs if a.end_time is not None and a.end_time < stage_end]
    assert len(released_early) >= 2, [(a.alloc_id, a.start_time, a.end_time, stage_end) for a in jobs]


def test_a_failing_task_fails_its_future_and_what_needs_it_not_the_front_door(local: LocalBackend) -> None:
    with Elastic(local, "bigjob", store=False, poll_interval=1.0) as el:
        bad = el.submit(boom, 3)
        after = el.submit(add_all, bad, 1)
        with pytest.raises(ValueError, match="bad input 3") as info:
            bad.result(timeout=60)
        assert "in boom" in str(info.value.__cause__)  # the remote traceback
        with pytest.raises(DependencyError, match="stage 'add_all' did not run: one of its inputs failed"):
            after.result(timeout=60)
        shell = el.submit_task(Task.shell("echo out; exit 3", stage="sh"))
        with pytest.raises(ShellTaskError, match="exited with code 3"):
            shell.result(timeout=60)
        ordered = el.submit_task(Task.shell("echo after", stage="sh"), after=[shell])  # ordering only
        assert ordered.result(timeout=60).stdout == "after\n"
        assert el.submit(square, 7).result(timeout=60) == 49
    assert el.result is not None and el.result.status == "completed"


def test_leaving_by_an_exception_cancels_what_did_not_start_and_releases_everything(
    local: LocalBackend,
) -> None:
    futures: list[concurrent.futures.Future[int]] = []
    with pytest.raises(KeyboardInterrupt), Elastic(local, "bigjob", store=False, poll_interval=1.0) as el:
        futures = [el.submit(square, i) for i in range(400)]
        futures[0].result(timeout=60)
        raise KeyboardInterrupt
    assert el.result is not None and el.result.status == "interrupted"
    assert any(f.cancelled() for f in futures)
    assert all(a.state.is_final for a in el.view().allocations)
    assert not local.queue(), "an allocation outlived the front door"
    with pytest.raises(PoolClosedError):
        el.submit(square, 1)


def test_bad_settings_are_refused_before_anything_starts() -> None:
    with pytest.raises(UnknownNameError, match="unknown backend 'pbs'"):
        Elastic("pbs")
    with pytest.raises(UnknownNameError, match="strategy"):
        Elastic("local", "fastest")
    with pytest.raises(ConfigError, match="learner must be one of"):
        Elastic(learner="smart", store=False)
    with pytest.raises(ConfigError, match=r"unknown options \['worker'\]"):
        Elastic(store=False, worker=3)
    with pytest.raises(ConfigError, match="job_cores must be a whole number of cores >= 1"):
        Elastic(store=False, job_cores=0)
    with pytest.raises(ConfigError, match="virtual clock, which cannot run real tasks"):
        Elastic(MockBackend(nodes=4), store=False)


def test_a_task_runtime_no_partition_could_run_is_refused_where_it_is_declared() -> None:
    # a real run took a 1e300-s runtime and planned with it; a stage declared so is refused likewise
    with pytest.raises(ConfigError, match=r"task\(runtime=...\): 1e\+300 s is more than a year"):
        task(runtime=1e300)(square)
    assert task(runtime=86400.0)(square) is square  # a day is a runtime


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_three_stages_on_the_scaled_mock_queue(strategy: str, tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    # speedup 5: a walltime of 1.5 x a stage's estimate + 60 s (scaled) is 3 s of real time at 20x, less
    # than an agent can take to start on a loaded machine; a task lost to it failed the run.
    with (
        MockBackend(nodes=8, clock="scaled", speedup=5.0) as backend,
        Elastic(backend, strategy, workflow="three", store=store, poll_interval=5.0, idle_timeout=30.0) as el,
    ):
        assert three_stages(el) == sum(i * 10 for i in range(4))
    result = el.result
    assert result is not None and result.status == "completed"
    m = result.metrics
    assert [s.name for s in m.stages] == ["prepare", "process", "merge"]
    assert all(s.execution_time > 0 for s in m.stages)
    assert 0 < m.core_seconds_used <= m.core_seconds_charged and m.makespan > 0
    assert {e.stage for e in result.events if e.kind is K.STAGE_END} == {"prepare", "process", "merge"}
    submitted = {e.stage for e in result.events if e.kind is K.ALLOC_SUBMIT}
    if strategy == "bigjob":  # without a plan, the whole workflow's walltime is a guess: follow-ups
        assert submitted == {"*"}
    elif strategy == "asa":
        # merge's one task may start on process's allocation as soon as it is submitted: a stage whose
        # tasks all run elsewhere is not asked for (a loop of full-width requests for it, issue 26)
        assert submitted >= {"prepare", "process"} and submitted <= {"prepare", "process", "merge"}
    else:
        assert submitted >= {"prepare", "process", "merge"}
    assert all(a.state.is_final for a in el.view().allocations) and not backend.queue()
    # the store has the run, its stages' runtimes, and the plan the next run starts from
    runs = store.runs(workflow="three")
    assert list(runs["status"]) == ["completed"] and runs["makespan"].iloc[0] == pytest.approx(m.makespan)
    assert [p["name"] for p in runs["params"].iloc[0]["plan"]] == ["prepare", "process", "merge"]
    assert len(store.stage_runtimes("three", "process")[0]) == 1
    with Elastic(LocalBackend(cores=2), "asa", workflow="three", store=store) as again:
        assert [s.name for s in again.view().stages] == ["prepare", "process", "merge"]  # before any task
    store.close()


def test_a_declared_plan_is_known_before_its_first_task(local: LocalBackend) -> None:
    plan = Workflow("declared", (Stage("a", 2, 1), Stage("b", 6, 1), Stage("c", 1, 1)))
    with Elastic(local, "bigjob", workflow=plan, store=False, poll_interval=1.0) as el:
        first = el.view()
        assert [(s.name, s.tasks, s.depends_on) for s in first.stages] == [
            ("a", 2, ()),
            ("b", 6, ("a",)),
            ("c", 1, ("b",)),
        ]
        deadline = time.monotonic() + 30
        while not el.view().allocations and time.monotonic() < deadline:
            time.sleep(0.05)
        (big,) = el.view().allocations
        assert big.cores == 4  # Big-Job sizes for the widest stage (6), capped by the 4-core partition
        el.expect("d", 3, after=["c"])
        assert el.view().stages[-1].name == "d"


def test_the_learned_waits_of_concurrent_front_doors_are_all_kept(tmp_path: Path) -> None:
    """Regression (issue 10): each run loaded the learner state at start and overwrote it at the end."""
    url = f"sqlite:///{tmp_path / 'store.db'}"

    def one_run(_: int) -> None:
        with Elastic(LocalBackend(cores=1), "perstage", store=url, poll_interval=0.5) as el:
            el.submit(square, 1).result(timeout=60)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        list(pool.map(one_run, range(3)))
    with Store(url) as store:
        # Per-Stage's learner is the default one; a first allocation's wait is learned per geometry, as a
        # first wait, and as a first wait of any geometry
        states = store.learner_states("ewma")
        assert set(states) == {"cores=1-1", "cores=1-1/first", "cores=any/first"}
        assert len(store.waits("cores=1-1")) == 3
        assert all(state["n"] == 3 for state in states.values())  # every run's observation is kept


@pytest.mark.skipif(os.cpu_count() is None, reason="needs to know the machine's cores")
def test_local_backend_is_the_default_and_sized_to_this_machine() -> None:
    with Elastic(store=False) as el:
        assert el.submit(square, 3).result(timeout=60) == 9
        assert el.view().allocations[0].cores <= (os.cpu_count() or 1)
    assert all(a.state is AllocationState.CANCELLED for a in el.view().allocations)

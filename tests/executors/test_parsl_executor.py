"""ElasticExecutor under a real Parsl DataFlowKernel, with real agents (issue 12).

This machine (``LocalBackend``) and the simulated Slurm queue on a scaled clock (``MockBackend``); the
local Slurm cluster is in ``test_parsl_executor_slurm.py``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from parsl.app.errors import BashExitFailure
from parsl.dataflow.errors import DependencyError
from parsl.dataflow.memoization import BasicMemoizer
from parsl.dataflow.states import States
from parsl.executors.errors import InvalidResourceSpecification
from parsl.jobs.states import JobState
from parsl.utils import get_all_checkpoints

from elastic.backends.local import LocalBackend
from elastic.backends.mock import MockBackend
from elastic.control.live import LiveDemand
from elastic.errors import ConfigError, UnknownNameError
from elastic.executors.parsl_app import AppExit
from elastic.executors.parsl_executor import ElasticExecutor
from elastic.learners.asa import ASAEstimator
from elastic.metrics import EventKind
from elastic.pool.tasks import TaskEvent, TaskState
from elastic.strategies.base import Decision, RunView, Submit, make_strategy
from tests.executors import apps

K = EventKind


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    with LocalBackend(cores=2) as backend:
        yield backend


def _executor(backend: object, strategy: object = "perstage", **options: object) -> ElasticExecutor:
    options = {"store": False, "poll_interval": 1.0, **options}
    return ElasticExecutor(backend=backend, strategy=strategy, **options)  # type: ignore[arg-type]


def test_bad_settings_are_refused_when_the_config_is_written() -> None:
    with pytest.raises(UnknownNameError, match="unknown backend 'pbs'"):
        ElasticExecutor(backend="pbs")
    with pytest.raises(UnknownNameError, match="strategy"):
        ElasticExecutor(strategy="fastest")
    with pytest.raises(ConfigError, match="learner must be one of"):
        ElasticExecutor(learner="smart")
    with pytest.raises(ConfigError, match=r"unknown options \['worker'\]"):
        ElasticExecutor(worker=3)
    with pytest.raises(ConfigError, match="plan_interval must be finite seconds >= 0, got -1"):
        ElasticExecutor(plan_interval=-1)
    with pytest.raises(ConfigError, match=r"is not started: load it with parsl\.load"):
        ElasticExecutor().submit(print, {})


class _FrontDoor:
    """The two calls of the front door the look at waiting tasks makes, on a real live demand."""

    def __init__(self) -> None:
        self.demand = LiveDemand("w", record=lambda e: None, clock=lambda: 0.0)

    def tasks_taken(self) -> dict[str, int]:
        return self.demand.taken()

    def expect(self, stage: str, tasks: int, **options: Any) -> None:
        self.demand.expect(stage, tasks, **options)


class _Tasks(dict[int, dict[str, Any]]):
    """A DataFlowKernel's task table whose pending tasks are submitted while it is being read."""

    def __init__(self, front: _FrontDoor, pending: int, submitted: int) -> None:
        super().__init__({i: _pending(i) for i in range(pending)})
        self.front, self.submitted = front, submitted

    def values(self) -> Any:
        records = list(super().values())
        for i in range(self.submitted):  # Parsl's Task-Launch thread, meanwhile
            self.front.demand.queued("process", 1, None, task=f"t{i}")
        return records


def _pending(i: int) -> dict[str, Any]:
    return {"id": i, "executor": "elastic", "func_name": "process", "status": States.pending, "depends": []}


@pytest.mark.parametrize("submitted", [0, 2, 3])
def test_tasks_submitted_while_the_executor_looks_are_not_announced_again(submitted: int) -> None:
    # the look reads the front door's own count of tasks taken before and after: a stage is announced
    # with what still waits, so the tasks that exist are counted once, queued or announced
    ex = ElasticExecutor(store=False)
    front = _FrontDoor()
    ex._elastic = front  # type: ignore[assignment]
    ex._dfk = SimpleNamespace(tasks=_Tasks(front, 3, submitted))  # type: ignore[assignment]
    assert ex.announce_waiting() == {"process"}
    (stage,) = front.demand.stages()
    assert (stage.queued, stage.outstanding) == (submitted, 3)
    assert front.tasks_taken() == {"process": submitted}


def test_three_stages_of_python_and_bash_apps_on_this_machine(local: LocalBackend, tmp_path: Path) -> None:
    ex = _executor(local, "perstage", plan_interval=0.1)
    with apps.loaded(ex, tmp_path):
        merged = apps.three_stages(width=4, pause=0.3)
        assert merged.result(timeout=120) == 0  # a bash app's value is its exit code
        assert Path(merged.stdout).read_text() == f"merged {apps.expected_total(4)}\n"
        assert "to stderr" in Path(merged.stderr).read_text()
        assert str(tmp_path) in merged.stdout  # AUTO_LOGNAME: under the run directory
        view = ex.view()
        assert [(s.name, s.tasks) for s in view.stages] == [("prepare", 1), ("process", 4), ("merge", 1)]
        assert view.stages[1].depends_on == ("prepare",)  # seen in the DataFlowKernel before they ran
        status = ex.status()
        assert set(status) == {a.alloc_id for a in view.allocations}
        assert all(
            s.state in (JobState.PENDING, JobState.RUNNING, JobState.CANCELLED) for s in status.values()
        )
    result = ex.front_door.result
    assert result is not None and result.status == "completed"
    assert all(a.state.is_final for a in ex.front_door.view().allocations) and not local.queue()
    assert all(s.terminal for s in ex.status().values())


USER_SCRIPT = """\
import parsl


def helper(y):
    return 10 / y


@parsl.python_app
def divide(x):
    return helper(x - x)  # line 10
"""


def test_a_by_value_apps_remote_traceback_names_the_users_file_and_line_regression_29(
    local: LocalBackend, tmp_path: Path
) -> None:
    """An app defined in the user's script travels by value; its traceback names the script, not
    ``<dynamic-code>`` (as HTEX's do)."""
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    names: dict[str, Any] = {"__name__": "__user_script__"}  # not importable: pickled by value
    exec(compile(USER_SCRIPT, str(script), "exec"), names)
    loaded = apps.loaded(_executor(local, "bigjob", progress=False), tmp_path / "run")
    with loaded, pytest.raises(ZeroDivisionError) as info:
        names["divide"](3).result(timeout=120)
    remote = str(info.value.__cause__)
    assert f'File "{script}", line 10, in divide' in remote, remote
    assert f'File "{script}", line 5, in helper' in remote, remote
    assert "<dynamic-code>" not in remote


def test_failures_reach_the_user_as_parsl_reports_them(local: LocalBackend, tmp_path: Path) -> None:
    ex = _executor(local, "bigjob")
    with apps.loaded(ex, tmp_path):
        bad = apps.boom(3)
        with pytest.raises(ValueError, match="bad input 3") as info:
            bad.result(timeout=120)
        assert "in boom" in str(info.value.__cause__)  # the remote traceback
        after = apps.add_one(bad)
        with pytest.raises(DependencyError):
            after.result(timeout=60)
        failed = apps.exit_with(3)
        with pytest.raises(BashExitFailure, match="bash_app exit_with failed with unix exit code 3") as bash:
            failed.result(timeout=60)
        assert bash.value.exitcode == 3
        assert Path(failed.stdout).read_text() == "before the failure\n"
        refused = apps.sleep_and_return(0.0, 1, parsl_resource_specification={"priority": 1})
        with pytest.raises(InvalidResourceSpecification, match="priority"):
            refused.result(timeout=60)
        assert apps.add_one(41).result(timeout=60) == 42  # nothing a task did stopped the executor
    assert ex.front_door.result is not None and ex.front_door.result.status == "completed"


def test_an_app_ending_by_sys_exit_fails_alone_and_later_apps_run(
    local: LocalBackend, tmp_path: Path
) -> None:
    """Found trying Parsl as a user: an app whose argparse exits (SystemExit) escaped Parsl's done callback
    into the pool's I/O thread, and that app and every later one hung."""
    ex = _executor(local, "bigjob")
    with apps.loaded(ex, tmp_path, retries=1):
        left = [apps.leave(how) for how in ("argparse", "cancelled", "interrupt")]
        for future, raised in zip(
            left, ("SystemExit(2)", "CancelledError()", "KeyboardInterrupt()"), strict=True
        ):
            with pytest.raises(AppExit, match=rf"app leave raised {re.escape(raised)}"):
                future.result(timeout=120)
        assert apps.add_one(41).result(timeout=60) == 42
    assert ex.front_door.result is not None and ex.front_door.result.status == "completed"


def test_retries_retry_handler_join_apps_and_memoization(local: LocalBackend, tmp_path: Path) -> None:
    costs: list[str] = []

    def handler(exc: Exception, record: dict[str, object]) -> float:
        costs.append(type(exc).__name__)
        return 0.5  # each failure costs half a retry

    ex = _executor(local, "bigjob")
    with apps.loaded(
        ex,
        tmp_path / "a",
        retries=1,
        retry_handler=handler,
        memoizer=BasicMemoizer(checkpoint_mode="task_exit"),
    ):
        flaky = apps.fail_until(str(tmp_path / "calls"), failures=2)
        assert flaky.result(timeout=120) == 3  # failed twice, at 0.5 each: within retries=1
        assert flaky.task_record["fail_count"] == 2 and costs == ["RuntimeError", "RuntimeError"]
        assert sum(apps.fan_out(5).result(timeout=60)) == sum(range(1, 6))
        marker = str(tmp_path / "counted")
        first, again = apps.counted(21, marker), None
        assert first.result(timeout=60) == 42
        again = apps.counted(21, marker)
        assert again.result(timeout=60) == 42 and again.task_record["from_memo"]
        assert Path(marker).read_text() == "21\n"  # ran once
    checkpoints = get_all_checkpoints(str(tmp_path / "a"))
    assert checkpoints
    ex2 = _executor(local, "bigjob")
    with apps.loaded(ex2, tmp_path / "b", memoizer=BasicMemoizer(checkpoint_files=checkpoints)):
        again = apps.counted(21, str(tmp_path / "counted"))
        assert again.result(timeout=60) == 42 and again.task_record["from_memo"]
    assert Path(tmp_path / "counted").read_text() == "21\n"  # the checkpoint answered, nothing ran


def test_a_killed_allocation_reruns_its_task_without_a_parsl_retry(
    local: LocalBackend, tmp_path: Path
) -> None:
    ex = _executor(local, "bigjob")
    running = threading.Event()
    on: list[str] = []

    def started(e: object) -> None:
        if isinstance(e, TaskEvent) and e.state is TaskState.RUNNING and e.alloc_id is not None:
            on.append(e.alloc_id)
            running.set()

    with apps.loaded(ex, tmp_path, retries=0):
        ex.front_door.pool.subscribe(started)
        fut = apps.sleep_and_return(3.0, 7)
        assert running.wait(60)
        (alloc,) = [a for a in ex.view().allocations if a.alloc_id == on[0]]
        assert alloc.backend_job_id is not None
        local.cancel(alloc.backend_job_id)  # killed from outside, as an operator's scancel would
        assert fut.result(timeout=120) == 7
        assert fut.task_record["fail_count"] == 0 and fut.task_record["try_id"] == 0  # no Parsl retry
        events = [e for e in ex.front_door.pool.events if isinstance(e, TaskEvent)]
        assert [e.state for e in events if e.state in (TaskState.LOST, TaskState.DONE)] == [
            TaskState.LOST,
            TaskState.DONE,
        ]
        assert events[-1].attempt == 2 and events[-1].alloc_id != alloc.alloc_id
    assert not local.queue()


class _ShortAndLong:
    """A user strategy (an object with ``name`` and ``decide``): one short and one long allocation at once."""

    name = "short-and-long"

    def decide(self, view: RunView) -> Decision:
        if view.allocations:
            return Decision()
        return Decision((Submit("short", 1, 120.0), Submit("long", 1, 3600.0)))


def test_a_task_longer_than_an_allocations_remaining_walltime_goes_to_one_that_has_the_time(
    local: LocalBackend, tmp_path: Path
) -> None:
    ex = _executor(local, _ShortAndLong(), drain_margin=5.0)
    with apps.loaded(ex, tmp_path):
        assert apps.add_one(0).result(timeout=60) == 1  # the strategy is asked once there is work
        deadline = time.monotonic() + 60
        while sum(a.running for a in ex.view().allocations) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        ids = {a.stage: a.alloc_id for a in ex.view().allocations if a.running}
        assert set(ids) == {"short", "long"}
        # and both agents joined with a free core (a running job's agent may still be starting under
        # load: a task queued before the short one's agent joined went to the long one)
        pool = ex.front_door.pool
        while time.monotonic() < deadline and not all(
            pool.free_cores().get(ids[s], 0) >= 1 for s in ("short", "long")
        ):
            time.sleep(0.1)
        long_task = apps.sleep_and_return(0.2, 1, parsl_resource_specification={"runtime": 600.0})
        short_task = apps.sleep_and_return(0.2, 2, parsl_resource_specification={"runtime": 1.0})
        assert long_task.result(timeout=60) == 1 and short_task.result(timeout=60) == 2
        ran_on = {
            e.task_id: e.alloc_id
            for e in ex.front_door.pool.events
            if isinstance(e, TaskEvent) and e.state is TaskState.DONE
        }
    long_id = long_task.task_record["exec_fu"].parsl_executor_task_id
    short_id = short_task.task_record["exec_fu"].parsl_executor_task_id
    assert ran_on[long_id] == ids["long"]  # 600 s does not fit in the short one's 120 s
    assert ran_on[short_id] == ids["short"]  # among those with time, the one with least time left


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_three_stages_on_the_scaled_mock_queue(strategy: str, tmp_path: Path) -> None:
    # a learner that predicts a 20 s wait (simulated), so ASA's pre-submission is deterministic to check;
    # the planner prices waits by it, not by the run's latest wait nor the scheduler's estimate (0 s here)
    learner = ASAEstimator(grid=[20.0, 1e5], policy="greedy")
    chosen = make_strategy("asa", run_waits=False, estimates=False) if strategy == "asa" else strategy
    with MockBackend(nodes=8, clock="scaled", speedup=20.0) as backend:
        ex = _executor(
            backend, chosen, learner=learner, idle_timeout=30.0, poll_interval=5.0, plan_interval=0.1
        )
        with apps.loaded(ex, tmp_path):
            merged = apps.three_stages(width=4, pause=1.5, runtime=1.5)
            assert merged.result(timeout=240) == 0
            assert Path(merged.stdout).read_text() == f"merged {apps.expected_total(4)}\n"
            assert ex.view().stages[1].depends_on == ("prepare",)
        assert all(a.state.is_final for a in ex.front_door.view().allocations) and not backend.queue()
    result = ex.front_door.result
    assert result is not None and result.status == "completed"
    assert [s.name for s in result.metrics.stages] == ["prepare", "process", "merge"]
    submits = [e for e in result.events if e.kind is K.ALLOC_SUBMIT]
    ends = {e.stage: e.time for e in result.events if e.kind is K.STAGE_END}
    if strategy == "bigjob":
        assert {e.stage for e in submits} == {"*"}
    else:
        first = {s: min(e.time for e in submits if e.stage == s) for s in ("prepare", "process", "merge")}
        if strategy == "asa":  # stage k+1's allocation requested while stage k still ran
            assert first["process"] < ends["prepare"] and first["merge"] < ends["process"]
        else:  # Per-Stage: once stage k ended
            assert first["process"] >= ends["prepare"] and first["merge"] >= ends["process"]

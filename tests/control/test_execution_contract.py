"""One scenario, two executions: simulated tasks and real agents place tasks by the same rule.

Pure simulation (``SimExecution``) and real runs (``PoolExecution`` over the pool and real agents started by
the mock backend's scaled clock) must not drift apart: the strategy comparisons of ``docs/results/`` come
from the first, real workflows run on the second. Both place with
:func:`elastic.pool.placement.plan_placement` and leave allocations within their drain margin alone.
"""

from __future__ import annotations

import time

import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.control.execution import Execution, TaskSpec
from elastic.control.pool_execution import PoolExecution
from elastic.control.sim_execution import SimExecution
from elastic.metrics import EventKind
from elastic.pool.tasks import TaskState

SPEEDUP = 60.0
# (id, cores, walltime in backend seconds); "ending" is within the 30 s drain margin from the start
ALLOCATIONS = (("long", 2, 3600.0), ("short", 2, 600.0), ("ending", 2, 20.0))
# (id, estimate, duration) in backend seconds, in queue order
TASKS = (("a", 1000.0, 300.0), ("b", 100.0, 300.0), ("c", 100.0, 300.0), ("d", 100.0, 300.0))
EXPECTED = {
    "a": "long",  # only "long" has 1000 s left
    "b": "short",  # enough time on both: the one with the least time left keeps "long" for long tasks
    "c": "short",
    "d": "long",  # "short" is full
}


def _specs() -> list[TaskSpec]:
    return [TaskSpec(t, "s", i, 1, est, dur) for i, (t, est, dur) in enumerate(TASKS)]


def _starts(execution: Execution, at: float) -> dict[str, str]:
    return {e.task: e.allocation for e in execution.advance(at) if e.kind is EventKind.TASK_START}  # type: ignore[misc]


def test_simulated_execution_places_the_scenario() -> None:
    sim = SimExecution(drain_margin=30.0)
    for alloc_id, cores, walltime in ALLOCATIONS:
        sim.register(alloc_id, cores, walltime, "s")
        sim.add_allocation(alloc_id, cores, walltime_end=walltime, at=0.0)
    for spec in _specs():
        sim.submit(spec)
    assert _starts(sim, 0.0) == EXPECTED


@pytest.mark.timeout(120)
def test_real_agents_place_the_scenario_the_same_way() -> None:
    with MockBackend(nodes=6, clock="scaled", speedup=SPEEDUP) as backend:
        pool_exec = PoolExecution(backend, speedup=SPEEDUP, drain_margin=30.0)
        try:
            for alloc_id, cores, walltime in ALLOCATIONS:
                pool_exec.register(alloc_id, cores, walltime, "s")
                script = pool_exec.job_script(alloc_id, cores, walltime, "s")
                backend.submit(JobSpec(cores=cores, walltime=walltime, script=script))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and set(pool_exec.pool.free_cores()) != {"long", "short"}:
                time.sleep(0.05)  # "ending" joins and is drained at once: it never offers cores
            assert set(pool_exec.pool.free_cores()) == {"long", "short"}
            for spec in _specs():
                pool_exec.submit(spec)
            starts: dict[str, str] = {}
            while time.monotonic() < deadline and len(starts) < len(TASKS):
                starts.update(_starts(pool_exec, backend.now()))
                time.sleep(0.05)
            assert starts == EXPECTED
        finally:
            pool_exec.close()


@pytest.mark.timeout(120)
def test_real_task_events_reach_a_step_only_once_its_clock_has_passed_them() -> None:
    """A step that read its clock at ``now`` sees no event the pool stamped later (it gets the next step's).

    Otherwise a stage could end before it started, or after what the step did at ``now``; the Statistics
    demo's short stages on the 60x mock queue recorded negative stage runtimes this way.
    """
    with MockBackend(nodes=2, clock="scaled", speedup=SPEEDUP) as backend:
        pool_exec = PoolExecution(backend, speedup=SPEEDUP, drain_margin=30.0)
        try:
            pool_exec.register("a1", 1, 3600.0, "s")
            script = pool_exec.job_script("a1", 1, 3600.0, "s")
            backend.submit(JobSpec(cores=1, walltime=3600.0, script=script))
            before = backend.now()
            pool_exec.submit(TaskSpec("t", "s", 0, 1, 60.0, 60.0))  # one backend minute: 1 s here
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "t" not in {
                e.task_id for e in pool_exec.pool.events if getattr(e, "state", None) is TaskState.DONE
            }:
                time.sleep(0.05)
            assert pool_exec.advance(before) == []  # everything happened after ``before``
            held = pool_exec.next_event_time()
            assert held is not None and held > before  # the step is woken for it
            events = pool_exec.advance(backend.now())
            assert [e.kind for e in events] == [EventKind.TASK_START, EventKind.TASK_END]
            assert events[0].time <= events[1].time and pool_exec.next_event_time() is None
        finally:
            pool_exec.close()

"""A run's end releases every allocation, even when the release itself loses a task once too often.

Found by ``benchmarks/bench_liveness.py`` (seed 1, scenario 473, ``asa-after``): the run failed with the
documented lost-task error, and while releasing every allocation the execution raised again for another
task that the release lost; the release stopped there and 14 batch jobs were left queued or running.
"""

from __future__ import annotations

from elastic.backends.mock import MockBackend
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.strategies import Knowledge, MemoryHistory, RunView, make_strategy
from elastic.workflow import Stage, Workflow


class _Interrupt:
    """Interrupt the run (as Ctrl-C does) once ``tasks`` tasks run, on at least two allocations."""

    def __init__(self, execution: SimExecution, tasks: int) -> None:
        self.execution = execution
        self.tasks = tasks

    def __call__(self, view: RunView) -> None:
        running = [a for a in view.allocations if a.running and self.execution.busy_cores(a.alloc_id) > 0]
        if len(running) >= 2 and sum(s.running for s in view.stages) >= self.tasks:
            raise KeyboardInterrupt


def test_a_task_lost_for_good_by_the_release_does_not_stop_it() -> None:
    workflow = Workflow("w", (Stage("a", 4, 1, runtime=3600.0),))
    backend = MockBackend(nodes=4)
    # no retries: the first allocation cancelled at the end loses its task for good, and the execution
    # raises (TaskRetriesExhaustedError) in the middle of the release
    execution = SimExecution(max_retries=0)
    runner = Runner(
        workflow,
        make_strategy("bigjob"),
        backend,
        execution,
        Knowledge(workflow, history=MemoryHistory()),
        job_cores=1,  # four 1-core batch jobs, each running one task
        on_iteration=_Interrupt(execution, 4),
    )
    result = runner.run()
    assert result.status == "interrupted"
    mine = {a.backend_job_id for a in runner.controller.allocations}
    assert len(mine) == 4
    left = [j.job_id for j in backend.queue() if j.job_id in mine and not j.state.is_final]
    assert left == []
    assert all(a.ended for a in runner.controller.allocations)

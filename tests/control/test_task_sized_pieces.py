"""Splits respect the tasks (issue 28, item 2), through the real control loop on the mock backend.

The lone 2-core task, a 28-core task on a 28-core request, and a 3 x 4-core stage complete under every
strategy and every ``job_cores`` setting; every batch job is at least as wide as the widest task of what
it was asked for and a whole number of those tasks wide, so no piece is one no task can run on.
"""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.learners.choice import make_wait_learner
from elastic.strategies import STRATEGY_NAMES, Knowledge, MemoryHistory, make_strategy, strategy_learner
from elastic.workflow import Stage, Workflow

CASES = {
    "lone 2-core task": Stage("two", 1, 2, runtime=300.0),
    "28-core task": Stage("wide", 1, 28, runtime=300.0),
    "3 x 4-core stage": Stage("quad", 3, 4, runtime=300.0),
}
JOB_CORES = (None, 1, 2, 3, 5, 14, 28)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_task_sized_requests_complete_under_every_strategy_and_job_cores(strategy: str, case: str) -> None:
    stage = CASES[case]
    workflow = Workflow(case.replace(" ", "-"), (stage,))
    for job_cores in JOB_CORES:  # one test per strategy and case keeps the collection short
        knowledge = Knowledge(
            workflow, waits=make_wait_learner(strategy_learner(strategy)), history=MemoryHistory()
        )
        runner = Runner(
            workflow,
            make_strategy(strategy),
            MockBackend(nodes=28),
            SimExecution(),
            knowledge,
            seed=1,
            max_duration=4 * 86400.0,
            job_cores=job_cores,
        )
        result = runner.run()
        where = f"{case} under {strategy}, job_cores={job_cores}"
        assert result.status == "completed", f"{where}: {result.status} {result.detail}"
        jobs = runner.controller.allocations
        assert jobs, where
        for a in jobs:
            assert a.cores >= stage.cores and a.cores % stage.cores == 0, (where, a.alloc_id, a.cores)
        # a finite number of requests: none replaced at every walltime for ever
        assert len(jobs) <= 2 * stage.tasks + 2, (where, [(a.alloc_id, a.cores) for a in jobs])

"""A merged request is priced at the walltime it asks: where that waits longer, stages get their own.

On a backfilling queue a longer walltime can miss a hole a shorter one fits (HPC2N replay, Statistics
112, run 2: at 12 h the scheduler's estimate for 56 cores was 1.7 h at 499 s of walltime and 13.7 h at
2165 s). The planner once asked the estimate at one walltime per width, so merging two stages into one
request looked as quick to start as a request for one.
"""

from __future__ import annotations

import numpy as np
import pytest

from elastic.backends.mock import MockBackend
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.learners.choice import make_wait_learner
from elastic.metrics import EventKind
from elastic.simulator.workload import Workload
from elastic.strategies import Knowledge, MemoryHistory, make_strategy, strategy_learner
from elastic.strategies.merge import Choice
from elastic.strategies.planner import StagePlan, plan
from elastic.strategies.timing import PROBS, Prices
from elastic.workflow import Stage, Workflow

HOLE = 3000.0
"""Seconds until a reservation for the whole machine: a job that ends before then backfills now."""


def _hole_waits(cores: int, follow_up: bool, walltime: float | None = None) -> np.ndarray:
    """A queue where a request of at most ``HOLE`` s of walltime starts now and a longer one in 10 h."""
    assert walltime is not None  # every stage below gives its walltime
    return np.full(len(PROBS), 0.0 if walltime <= HOLE else 36000.0)


@pytest.mark.parametrize(("walltime", "merged"), [(1000.0, True), (2000.0, False)])
def test_two_stages_share_a_request_only_where_its_longer_walltime_waits_no_longer(
    walltime: float, merged: bool
) -> None:
    # Two 4-core stages of 900 s. Each alone asks ``walltime``; both on one allocation ask twice that:
    # 2000 s fits the hole, 4000 s does not, and the merged request would wait 10 h.
    stages = [StagePlan("a", 4, 900.0, walltime=walltime), StagePlan("b", 4, 900.0, walltime=walltime)]
    _, choices = plan(stages, held=0, lead=0.0, waits=_hole_waits, prices=Prices(beta=4.0), model="age")
    assert choices[0] == Choice("a", 4, new=True)
    assert choices[1] == Choice("b", 4, new=not merged)


def _background() -> Workload:
    """4 of 8 cores busy until ``HOLE``; then a job of all 8 cores for 10 h (reserved at ``HOLE``)."""
    submit, cores, walltime = [0.0, 1.0], [4, 8], [HOLE, 36000.0]
    return Workload(
        job_id=np.array([101, 102], dtype=np.int64),
        submit=np.array(submit),
        cores=np.array(cores, dtype=np.int64),
        runtime=np.array(walltime),
        walltime=np.array(walltime),
        user=np.array([-1, -1], dtype=np.int64),
        recorded_wait=np.zeros(2),
        processors=8,
        source="a backfill hole",
    )


def test_on_a_backfilling_queue_each_stage_gets_its_own_request_that_fits_the_hole() -> None:
    # Two 4-core stages of 1000 s, each asking 1560 s (1.5 x 1000 + 60): alone, each ends before the
    # reservation at 3000 s; merged (3120 s) it would not, and would start after the 10-h job. Priced at
    # one walltime per width, both requests looked free and asa merged them (first start at 39000 s).
    workflow = Workflow("hole", (Stage("a", 4, 1, runtime=1000.0), Stage("b", 4, 1, runtime=1000.0)))
    backend = MockBackend(nodes=8, workload=_background(), policy="easy", start=10.0)
    knowledge = Knowledge(workflow, waits=make_wait_learner(strategy_learner("asa")), history=MemoryHistory())
    result = Runner(workflow, make_strategy("asa"), backend, SimExecution(), knowledge, seed=1).run()
    assert result.status == "completed", result.detail
    submitted = {e.stage for e in result.events if e.kind is EventKind.ALLOC_SUBMIT}
    assert submitted == {"a", "b"}  # a request per stage
    ends = [e.time for e in result.events if e.kind is EventKind.TASK_END]
    assert max(ends) < HOLE  # both ran in the hole, not after the 10-h job

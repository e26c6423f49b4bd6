"""demo3 end to end on the mock backend with a scaled clock and HPC2N background load (issue 4).

Real agent processes run real sleep tasks inside simulated allocations, while the whole HPC2N trace
(windowed around a start point) loads the same simulated queue as other users' jobs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.backends.mock import MockBackend
from elastic.control.pool_execution import PoolExecution
from elastic.control.runner import Runner
from elastic.experiments import start_points, window
from elastic.learners.asa import ASAEstimator
from elastic.metrics import EventKind
from elastic.simulator.trace import read_swf
from elastic.strategies import Knowledge, make_strategy
from elastic.workflow import builtin_workflow

SPEEDUP = 300.0  # demo3 takes ~45 simulated minutes: ~10 real seconds
WARMUP, HORIZON = 86400.0, 4 * 86400.0


@pytest.fixture(scope="module")
def hpc2n(hpc2n_trace: Path):
    return read_swf(hpc2n_trace)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("strategy", ["perstage", "asa"])  # the two that differ in when they submit
def test_demo3_completes_on_the_scaled_mock_with_hpc2n_background(hpc2n, strategy: str) -> None:
    workflow = builtin_workflow("demo3")
    (start,) = start_points(hpc2n, 1, seed=11, warmup=WARMUP, horizon=HORIZON)
    backend = MockBackend(
        nodes=hpc2n.processors,
        workload=window(hpc2n, start - WARMUP, start + HORIZON),
        start=WARMUP,
        clock="scaled",
        speedup=SPEEDUP,
    )
    # A learner that predicts a 30 s wait, so ASA's pre-submission is deterministic to check; the planner
    # prices follow-ups by it, not by the run's latest wait (the first allocation's here may be 0 s) nor by
    # the scheduler's estimate (0 s when cores are free).
    knowledge = Knowledge(workflow, waits=ASAEstimator(grid=[30.0, 1e5], policy="greedy"))
    executor = PoolExecution(backend, speedup=SPEEDUP)
    options = {"run_waits": False, "estimates": False} if strategy == "asa" else {}
    try:
        result = Runner(workflow, make_strategy(strategy, **options), backend, executor, knowledge).run()
    finally:
        executor.close()
        backend.close()
    assert result.status == "completed"
    events = result.events
    ends = [e for e in events if e.kind is EventKind.TASK_END]
    assert sorted(e.task or "" for e in ends) == sorted(
        [f"prepare.{i}" for i in range(1)] + [f"process.{i}" for i in range(8)] + ["merge.0"]
    )
    # other users' jobs really shared the queue: the backend ran background jobs during the run
    records = backend.records()
    (run_start,) = [e.time for e in events if e.kind is EventKind.RUN_START]
    (run_end,) = [e.time for e in events if e.kind is EventKind.RUN_END]
    busy = records[records["background"] & (records["start"] < run_end) & (records["end"] > run_start)]
    assert len(busy) > 0
    submits = [e for e in events if e.kind is EventKind.ALLOC_SUBMIT]
    (prepare_end,) = [e for e in events if e.kind is EventKind.STAGE_END and e.stage == "prepare"]
    process_submit = min(e.time for e in submits if e.stage == "process")
    if strategy == "asa":  # the ASA timing rule: submitted before its predecessor ended
        assert process_submit < prepare_end.time
    else:  # Per-Stage: only once it ended
        assert process_submit >= prepare_end.time

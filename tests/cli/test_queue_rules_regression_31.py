"""Queue rules a derived setting applies: off from every subcommand, not applied when weak (issue 31).

The capacity mode derives queue rules from a trace (fast queues simulated apart, short queues planned
first). ``elastic compare`` could not turn them off (the warning pointed at a Python-only argument), and on
one archive trace it sized the workflow's partition from 329 jobs of one queue, 0.07 % of the trace.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from elastic.backends.mock import MockBackend
from elastic.cli import _parser
from elastic.cli.arguments import check_background_arguments
from elastic.errors import ConfigError
from elastic.simulator.fidelity import backend_setup
from elastic.simulator.modes import MIN_RULE_SHARE, _Queues
from elastic.simulator.workload import Workload
from tests.simulator.test_fidelity_regression_11 import _interactive

CAPACITY = {
    "simulate": ["simulate", "--trace", "T", "--mode", "capacity"],
    "compare": ["compare", "--trace", "T", "--mode", "capacity"],
    "run": ["run", "--workflow", "demo3", "--strategy", "asa", "--trace", "T", "--mode", "capacity"],
    "fidelity": ["fidelity", "--trace", "T", "--modes", "capacity"],
}


@pytest.mark.parametrize("command", sorted(CAPACITY))
def test_every_subcommand_with_the_capacity_mode_can_turn_the_queue_rules_off(command: str) -> None:
    argv = CAPACITY[command]
    parser = _parser([argv[0]])
    assert parser.parse_args([*argv, "--no-queue-rules"]).no_queue_rules is True
    assert parser.parse_args(argv).no_queue_rules is False


@pytest.mark.parametrize("command", ["compare", "run"])
def test_no_queue_rules_outside_the_capacity_mode_is_refused(command: str) -> None:
    argv = [a if a != "capacity" else "recorded" for a in CAPACITY[command]]
    args = _parser([argv[0]]).parse_args([*argv, "--no-queue-rules"])
    with pytest.raises(
        ConfigError, match="--no-queue-rules applies to --mode capacity only, not --mode recorded"
    ):
        check_background_arguments(args)


def _capacity_backend(*, queue_rules: bool) -> MockBackend:
    return MockBackend(
        nodes=4,
        workload=_interactive(),
        mode="capacity",
        policy="conservative",
        fidelity_cores=(3, 3),
        capacity_window=86_400.0,
        queue_rules=queue_rules,
    )


def test_the_mock_backend_applies_the_queue_rules_only_when_asked() -> None:
    # queue 0 started at once: with the rules its jobs run apart and leave the batch partition
    with_rules = len(_capacity_backend(queue_rules=True).engine.jobs.submit)
    without = len(_capacity_backend(queue_rules=False).engine.jobs.submit)
    assert with_rules == 2 and without == 63


def _trace(queues: np.ndarray, waits: np.ndarray) -> Workload:
    n = len(queues)
    return Workload(
        job_id=np.arange(1, n + 1),
        submit=np.arange(n, dtype=np.float64),
        cores=np.ones(n, dtype=np.int64),
        runtime=np.full(n, 100.0),
        walltime=np.full(n, 3600.0),
        user=np.ones(n, dtype=np.int64),
        recorded_wait=waits,
        processors=64,
        source="t",
        queue=queues,
    )


def test_a_fast_queue_read_from_under_one_percent_of_the_jobs_is_weak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # queue 1: 60 jobs that started at once among 8,000 (0.75 %); queue 2: the rest, waiting 15 min
    queues = np.where(np.arange(8000) < 60, 1, 2)
    waits = np.where(queues == 1, 0.0, 900.0)
    others = np.zeros(8000, dtype=bool)
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.modes"):
        assert _Queues.of(_trace(queues, waits), others, enabled=True) == _Queues()
    assert "queue rules for queues [1] not applied" in caplog.text and "under 1%" in caplog.text
    # the same queue with 1 % of the jobs is a rule
    queues = np.where(np.arange(6000) < 60, 1, 2)
    waits = np.where(queues == 1, 0.0, 900.0)
    assert _Queues.of(_trace(queues, waits), np.zeros(6000, dtype=bool), enabled=True).fast == {1}
    assert MIN_RULE_SHARE <= 60 / 6000


def test_a_batch_partition_left_with_under_one_percent_of_the_jobs_is_reported_as_weak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # queue 1 started at once and holds 99.5 % of the jobs: the partition where submitted jobs go is
    # sized from 30 jobs, and the warning says so and how to turn the rule off
    queues = np.where(np.arange(6000) < 5970, 1, 2)
    waits = np.where(queues == 1, 0.0, 900.0)
    trace = _trace(queues, waits)
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.modes"):
        backend_setup(trace, "capacity", cores=(2, 2), window=86_400.0)
    assert "sized from 30 of the trace's 6000 jobs (under 1%: weak)" in caplog.text
    assert "--no-queue-rules" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.modes"):
        backend_setup(trace, "capacity", cores=(2, 2), window=86_400.0, queues=False)
    assert "weak" not in caplog.text

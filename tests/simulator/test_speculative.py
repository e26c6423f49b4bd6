"""Speculative backfilling: known answer and the ratio distribution."""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec, JobState
from elastic.errors import ConfigError
from elastic.simulator.engine import Engine
from elastic.simulator.speculative import RatioDistribution, SpeculativeEasy

# 4 cores. Rows: (submit, cores, walltime, runtime).
#   J0 t=0 2c w10 r10 ; J1 t=0 4c w10 r10 ; J2 t=1 2c w50 r3 ; J3 t=2 2c w50 r30
ROWS = [(0, 2, 10, 10), (0, 4, 10, 10), (1, 2, 50, 3), (2, 2, 50, 30)]


def test_speculative_known_answer(make_workload):
    # Ratio distribution: every past job used 10% of its request.
    # t=0: J0 runs; J1 (4c) blocks: shadow 10, extra 0.
    # t=1: J2 (w50) cannot backfill normally (ends 51 > 10, 2 > extra). Gap: 2 cores for 9 s;
    #      P(R <= 9/50) = 1 -> gain > 0 -> started speculatively, killed at 10 unless done; runs 3 s,
    #      completes at 4.
    # t=4: gap of 2 cores for 6 s; J3 (w50): P(R <= 6/50 = 0.12) = 1 -> speculated, but it really
    #      needs 30 s: killed at 10 and requeued behind the head J1.
    # t=10: J0 ends and J3 is killed: J1 starts (10..20); J3 restarts at 20 with its normal request.
    policy = SpeculativeEasy(min_samples=1)
    for _ in range(64):
        policy.ratios.add(0.1)
    eng = Engine(nodes=4, policy=policy, workload=make_workload(ROWS, 4))
    eng.run()
    rec = eng.records()
    assert list(rec["start"]) == [0.0, 10.0, 1.0, 20.0]
    assert list(rec["end"]) == [10.0, 20.0, 4.0, 50.0]
    assert list(rec["requeues"]) == [0, 0, 0, 1]
    assert eng.jobs.attempts == {3: [(4.0, 10.0)]}
    assert set(rec["state"]) == {"COMPLETED"}
    assert policy.speculations == 2


def test_plain_easy_same_workload(make_workload):
    # Without speculation J2 and J3 both wait for J1: they start together at 20.
    eng = Engine(nodes=4, policy="easy", workload=make_workload(ROWS, 4))
    eng.run()
    assert list(eng.records()["start"]) == [0.0, 10.0, 20.0, 20.0]


def test_no_speculation_without_history(make_workload):
    eng = Engine(nodes=4, policy=SpeculativeEasy(), workload=make_workload(ROWS, 4))
    eng.run()
    assert list(eng.records()["start"]) == [0.0, 10.0, 20.0, 20.0]


def test_submitted_jobs_are_never_speculated():
    b = MockBackend(nodes=4, speculative=True)
    b.engine.policy.min_samples = 0
    b.submit(JobSpec(cores=2, walltime=10.0, runtime=10.0))
    b.submit(JobSpec(cores=4, walltime=10.0, runtime=10.0))
    mine = b.submit(JobSpec(cores=2, walltime=50.0, runtime=1.0))
    b.sleep(100.0)
    assert b.state(mine).start_time == 20.0 and b.state(mine).state is JobState.COMPLETED


def test_ratio_distribution():
    d = RatioDistribution(window=3, refresh=1)
    for r in (0.5, 2.0, 0.25, 0.75):  # 2.0 is clipped to 1.0, then pushed out of the window
        d.add(r)
    assert len(d) == 3
    assert d.partial_mean(0.5) == pytest.approx(0.25 / 3)
    assert d.partial_mean(1.0) == pytest.approx((1.0 + 0.25 + 0.75) / 3)
    with pytest.raises(ConfigError, match="window must be >= 1"):
        RatioDistribution(window=0)

"""Tests of the synthetic background load generator (elastic/simulator/synthetic.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.engine import Engine
from elastic.simulator.synthetic import DEFAULT_UTILISATION, SIZE_DISTRIBUTIONS, synthetic_workload
from elastic.simulator.workload import Workload


def peak_demand_without_waiting(w: Workload) -> int:
    """Cores in use at the busiest instant if every job started at its submit time."""
    times = np.concatenate([w.submit, w.submit + w.runtime])
    deltas = np.concatenate([w.cores, -w.cores])
    order = np.lexsort((deltas, times))  # at equal times, ends (negative) before starts
    return int(np.cumsum(deltas[order]).max())


def test_deterministic_for_a_seed() -> None:
    a = synthetic_workload(jobs=500, seed=42)
    b = synthetic_workload(jobs=500, seed=42)
    c = synthetic_workload(jobs=500, seed=43)
    for name in ("job_id", "submit", "cores", "runtime", "walltime", "user"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.source == b.source
    assert not np.array_equal(a.submit, c.submit)


def test_defaults_queue_but_drain() -> None:
    w = synthetic_workload()
    assert len(w) == 10_000 and w.processors == 256
    assert w.job_id.tolist() == list(range(1, 10_001))
    assert w.submit[0] == 0.0 and np.all(np.diff(w.submit) >= 0)
    assert np.all((w.cores >= 1) & (w.cores <= 128))
    assert set(np.unique(w.cores).tolist()) == {1, 2, 4, 8, 16, 32, 64, 128}
    assert np.all(np.isnan(w.recorded_wait))
    np.testing.assert_allclose(w.walltime, 2.0 * w.runtime)
    # offered load close to the documented default ...
    offered = float(np.sum(w.cores * w.runtime)) / (w.processors * float(w.submit[-1]))
    assert offered == pytest.approx(DEFAULT_UTILISATION, rel=0.05)
    # ... and bursts ask for more cores than the machine has, so some jobs must wait
    assert peak_demand_without_waiting(w) > w.processors


def test_low_load_never_needs_to_wait() -> None:
    w = synthetic_workload(jobs=200, processors=256, arrival_rate=1e-6, max_cores=64, max_runtime=3600)
    assert peak_demand_without_waiting(w) <= w.processors


@pytest.mark.parametrize("rate", [0.01, 0.5])
def test_mean_interarrival_matches_rate(rate: float) -> None:
    w = synthetic_workload(jobs=20_000, arrival_rate=rate, seed=7)
    gaps = np.diff(w.submit)
    # 20,000 exponential gaps: the standard error of the mean is 0.7%; allow 4%
    assert gaps.mean() == pytest.approx(1.0 / rate, rel=0.04)
    # exponential: standard deviation equals the mean
    assert gaps.std() == pytest.approx(gaps.mean(), rel=0.05)
    assert f"arrival_rate={rate:.6g}/s" in w.source


@pytest.mark.parametrize("utilisation", [0.3, 0.9])
def test_utilisation_sets_offered_load(utilisation: float) -> None:
    w = synthetic_workload(jobs=20_000, processors=128, utilisation=utilisation, runtime_sigma=0.5, seed=3)
    offered = float(np.sum(w.cores * w.runtime)) / (w.processors * float(w.submit[-1]))
    assert offered == pytest.approx(utilisation, rel=0.05)


def test_runtime_distribution() -> None:
    w = synthetic_workload(jobs=20_000, runtime_median=600.0, runtime_sigma=1.0, seed=5)
    assert np.median(w.runtime) == pytest.approx(600.0, rel=0.05)
    assert np.std(np.log(w.runtime)) == pytest.approx(1.0, rel=0.05)
    fixed = synthetic_workload(jobs=50, runtime_median=90.0, runtime_sigma=0.0, estimate_ratio=0.5)
    assert np.all(fixed.runtime == 90.0) and np.all(fixed.walltime == 45.0)


def test_size_distributions() -> None:
    pow2 = synthetic_workload(jobs=5000, processors=100, size="power-of-two", min_cores=3, max_cores=70)
    assert set(np.unique(pow2.cores).tolist()) == {4, 8, 16, 32, 64}
    logu = synthetic_workload(jobs=5000, processors=100, size="log-uniform", min_cores=2, max_cores=50)
    assert logu.cores.min() == 2 and logu.cores.max() == 50
    # log-uniform: as many jobs in [2, 10) as in [10, 50]
    small = float(np.mean(logu.cores < 10))
    assert small == pytest.approx(math.log(10 / 2) / math.log(51 / 2), abs=0.03)
    uni = synthetic_workload(jobs=5000, processors=100, size="uniform", min_cores=5, max_cores=8)
    assert set(np.unique(uni.cores).tolist()) == {5, 6, 7, 8}


def test_users() -> None:
    w = synthetic_workload(jobs=2000, users=3)
    assert set(np.unique(w.user).tolist()) == {0, 1, 2}


def test_zero_and_one_job() -> None:
    assert len(synthetic_workload(jobs=0)) == 0
    one = synthetic_workload(jobs=1)
    assert one.submit.tolist() == [0.0]


def test_unknown_size_name() -> None:
    with pytest.raises(UnknownNameError, match="unknown size distribution 'zipf'; choose one of") as info:
        synthetic_workload(size="zipf")
    assert info.value.allowed == tuple(sorted(SIZE_DISTRIBUTIONS))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"jobs": -1}, "jobs must be >= 0"),
        ({"processors": 0}, "processors must be >= 1"),
        ({"min_cores": 0}, "min_cores"),
        ({"max_cores": 300}, r"max_cores must be in \[min_cores, processors\] = \[1, 256\], got 300"),
        ({"utilisation": 0.5, "arrival_rate": 0.1}, "not both"),
        ({"utilisation": 0.0}, "utilisation"),
        ({"arrival_rate": -1.0}, "arrival_rate"),
        ({"runtime_median": 0.0}, "runtime_median"),
        ({"runtime_sigma": -1.0}, "runtime_sigma"),
        ({"max_runtime": 0.5}, "max_runtime"),
        ({"estimate_ratio": 0.0}, "estimate_ratio"),
        ({"users": 0}, "users"),
        ({"size": "power-of-two", "min_cores": 5, "max_cores": 7, "processors": 8}, "power of two"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        synthetic_workload(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(
    jobs=st.integers(0, 300),
    processors=st.integers(1, 2048),
    size=st.sampled_from(SIZE_DISTRIBUTIONS),
    utilisation=st.floats(0.05, 2.0),
    estimate_ratio=st.floats(0.5, 5.0),
    seed=st.integers(0, 2**32),
)
def test_invariants(
    jobs: int, processors: int, size: str, utilisation: float, estimate_ratio: float, seed: int
) -> None:
    w = synthetic_workload(
        jobs=jobs,
        processors=processors,
        size=size,
        utilisation=utilisation,
        estimate_ratio=estimate_ratio,
        seed=seed,
    )
    assert len(w) == jobs and w.processors == processors
    for column in (w.submit, w.cores, w.runtime, w.walltime, w.user, w.recorded_wait):
        assert column.shape == (jobs,)
    assert np.all(np.diff(w.submit) >= 0) and np.all(w.submit >= 0)
    assert np.all((w.cores >= 1) & (w.cores <= max(1, processors // 2)))
    assert np.all((w.runtime >= 1) & (w.runtime <= 172_800))
    np.testing.assert_allclose(w.walltime, w.runtime * estimate_ratio)
    assert np.all(w.walltime > 0)


def test_defaults_replayed_under_easy_backfilling() -> None:
    """The documented defaults load the real simulator moderately: some jobs queue, the queue drains."""
    waits = {}
    for utilisation in (0.5, DEFAULT_UTILISATION, 0.9):
        w = synthetic_workload(utilisation=utilisation)
        engine = Engine(nodes=w.processors, workload=w)
        engine.run()
        records = engine.records()
        assert len(records) == len(w) and set(records["state"]) == {"COMPLETED"}
        waits[utilisation] = (records["start"] - records["submit"]).to_numpy()
    default = waits[DEFAULT_UTILISATION]
    assert 0.1 < float(np.mean(default > 0)) < 0.9  # waits are neither all zero nor universal
    assert float(np.max(default)) < 7 * 86_400  # the queue drains: nobody waits a week
    means = [float(np.mean(waits[u])) for u in (0.5, DEFAULT_UTILISATION, 0.9)]
    assert means == sorted(means)  # more load, longer waits

"""Small version of the CP-dispatching experiment: the direction of each headline effect, and the model."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError
from elastic.papers import cpdispatch as c
from elastic.papers.dispatchers import HistoryPredictor
from elastic.simulator.cpsat import CpDispatch
from elastic.simulator.engine import Engine


@pytest.fixture(scope="module")
def small() -> dict[tuple[str, str], c.Result]:
    # Few users and names, so that the data-driven predictor has a history to learn from.
    work = c.eurora_like(100, np.random.default_rng(1), cores=32, load=1.0, users=4)
    cases = [("easy", "R"), ("cp", "R"), ("pbs", "R"), ("easy", "D"), ("cp", "D"), ("cp1", "W")]
    return {case: c.simulate(work, *case, cores=32, work_limit=0.001) for case in cases}


def test_cp_beats_easy_with_the_same_durations(small: dict[tuple[str, str], c.Result]) -> None:
    for p in ("R", "D"):
        assert small[("cp", p)].mean("slowdown") < small[("easy", p)].mean("slowdown")
        assert small[("cp", p)].mean("wait") < small[("easy", p)].mean("wait")


def test_cp_beats_the_priority_rule_and_the_walltime_wait_objective(
    small: dict[tuple[str, str], c.Result],
) -> None:
    assert small[("cp", "R")].mean("slowdown") < small[("pbs", "R")].mean("slowdown")
    assert small[("cp", "D")].mean("slowdown") < small[("cp1", "W")].mean("slowdown")
    assert small[("cp", "R")].decision_times  # the solver was asked at least once


def _toy(policy: CpDispatch) -> tuple[float, float, float]:
    """Two cores, a blocker until t = 10, then queued: long (1 core), short (1 core), wide (2 cores)."""
    eng = Engine(nodes=2, policy=policy)
    eng.submit(cores=2, walltime=10.0, runtime=10.0)
    long_job = eng.submit(cores=1, walltime=1000.0, runtime=1000.0)
    short = eng.submit(cores=1, walltime=10.0, runtime=10.0)
    wide = eng.submit(cores=2, walltime=10.0, runtime=10.0)
    eng.run()
    return eng.jobs.start[long_job], eng.jobs.start[short], eng.jobs.start[wide]


@pytest.mark.parametrize("objective", ["slowdown", "wait"])
def test_the_solver_finds_the_optimal_order(objective: str) -> None:
    # Wide job first (both cores, 10 s), then short and long together: total slowdown 1.01 and wait 20;
    # short first instead leaves a core idle or makes the wide job wait for the long one.
    policy = CpDispatch({}, time_limit=0.5, objective=objective)
    assert _toy(policy) == (20.0, 20.0, 10.0)
    assert policy.solved >= 1


@pytest.mark.parametrize(("fitting_only", "starts"), [(False, (50.0, 60.0)), (True, (110.0, 10.0))])
def test_the_papers_reduction_lets_a_fitting_job_delay_a_wide_one(
    fitting_only: bool, starts: tuple[float, float]
) -> None:
    # Two cores; blockers free one core at t = 10 and the other at 50. Queued: wide (2 cores, 10 s) and
    # mid (1 core, 100 s). Modelling both, mid waits so that wide starts at 50 (slowdown 4.5 from t = 10);
    # modelling only the jobs that fit now, mid starts at 10 and wide waits until 110.
    eng = Engine(nodes=2, policy=CpDispatch({}, time_limit=0.5, fitting_only=fitting_only))
    eng.submit(cores=1, walltime=10.0, runtime=10.0)
    eng.submit(cores=1, walltime=50.0, runtime=50.0)
    wide = eng.submit(cores=2, walltime=10.0, runtime=10.0)
    mid = eng.submit(cores=1, walltime=100.0, runtime=100.0)
    eng.run()
    assert (eng.jobs.start[wide], eng.jobs.start[mid]) == starts


def test_a_work_limit_makes_the_decisions_reproducible() -> None:
    work = c.eurora_like(60, np.random.default_rng(3), cores=32, load=1.2, users=4)
    first, again = (c.simulate(work, "cp", "D", cores=32, work_limit=0.001) for _ in range(2))
    assert first.decision_times
    np.testing.assert_array_equal(first.wait, again.wait)


def test_the_predictor_learns_by_user_and_name() -> None:
    p = HistoryPredictor()
    assert p.predict(1, "a", 100.0) == 100.0  # nothing known: the request
    p.learn(1, "a", 10.0)
    p.learn(1, "a", 30.0)
    p.learn(1, "b", 90.0)
    assert p.predict(1, "a", 100.0) == 20.0
    assert p.predict(1, "c", 100.0) == 60.0  # the user's last two runs
    assert p.predict(1, "b", 50.0) == 50.0  # never above the request


def test_without_ortools_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ortools.sat.python", None)  # makes the import fail
    with pytest.raises(ConfigError, match=r"elastic-hpc\[cp\]"):
        CpDispatch({})
    with pytest.raises(ConfigError, match="OR-Tools"):
        c.reproduce()


def test_bad_input_is_refused_before_any_work() -> None:
    with pytest.raises(ConfigError, match="time_limit"):
        CpDispatch({}, time_limit=0)
    with pytest.raises(ConfigError, match="work_limit"):
        CpDispatch({}, work_limit=-1.0)
    with pytest.raises(ConfigError, match="objective"):
        CpDispatch({}, objective="makespan")
    with pytest.raises(ConfigError, match="dispatcher"):
        c.simulate(c.eurora_like(5, np.random.default_rng(0)), "sjf", "R")
    with pytest.raises(ConfigError, match="runs"):
        c.reproduce(runs=0)


_JOB = st.tuples(
    st.integers(0, 50),  # arrival
    st.integers(1, 4),  # cores
    st.integers(1, 40),  # runtime
    st.floats(0.3, 3.0),  # prediction / runtime
)


@settings(max_examples=12, deadline=None)
@given(st.lists(_JOB, min_size=1, max_size=8), st.booleans())
def test_every_job_runs_within_capacity_whatever_the_predictions(
    specs: list[tuple[int, int, int, float]], fitting_only: bool
) -> None:
    durations: dict[int, float] = {}
    eng = Engine(nodes=4, policy=CpDispatch(durations, time_limit=0.05, fitting_only=fitting_only))
    for arrival, cores, runtime, ratio in sorted(specs):
        eng.run(until=float(arrival))
        durations[len(eng.jobs)] = runtime * ratio
        eng.submit(cores=cores, walltime=float(runtime), runtime=float(runtime))
    eng.run()
    t = eng.jobs
    n = len(specs)
    assert all(t.end[j] == t.start[j] + t.runtime[j] and t.start[j] >= t.submit[j] for j in range(n))
    for j in range(n):  # cores in use just after each start
        busy = sum(t.cores[k] for k in range(n) if t.start[k] <= t.start[j] < t.end[k])
        assert busy <= 4

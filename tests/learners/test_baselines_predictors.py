"""Baseline wait predictors: last, running mean/median, QBETS-style bound, ask the scheduler (issue #3)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from elastic.backends.mock import MockBackend
from elastic.batch import Dependency, DependencyKind, JobSpec
from elastic.errors import ConfigError
from elastic.learners.base import (
    InvalidParameterError,
    NotFittedError,
    PredictionUnavailableError,
    WaitDistribution,
)
from elastic.learners.baselines import LastWait, QBETSUpperBound, RunningMean, RunningMedian, RunningQuantile
from elastic.learners.ewma import LogEWMA
from elastic.learners.reference import AlwaysZero, SchedulerEstimate

waits = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize("cls", [LastWait, RunningMean, RunningMedian, QBETSUpperBound])
def test_predict_before_any_observation_raises_not_fitted_naming_the_key(cls):
    predictor = cls().observe("other", 5.0)
    with pytest.raises(NotFittedError, match=r"no wait for key 'k'; call observe\(key, wait\) first"):
        predictor.predict("k")


@settings(max_examples=50, deadline=None)
@given(sequence=st.lists(waits, min_size=1, max_size=40), window=st.integers(1, 12))
def test_last_mean_median_follow_their_definitions(sequence, window):
    last, mean, median = LastWait(), RunningMean(window=window), RunningMedian(window=window)
    for wait in sequence:
        for p in (last, mean, median):
            p.observe("k", wait)
    recent = sequence[-window:]
    assert last.predict("k") == sequence[-1]
    assert mean.predict("k") == pytest.approx(np.mean(recent))
    assert median.predict("k") == pytest.approx(np.median(recent))


def test_running_mean_forgets_waits_older_than_the_window():
    m = RunningMean(window=3)
    for w in (1000.0, 10.0, 20.0, 30.0):
        m.observe("k", w)
    assert m.predict("k") == 20.0


# -- QBETS ----------------------------------------------------------------------------------------------


def test_qbets_returns_the_binomial_order_statistic():
    q = QBETSUpperBound(quantile=0.9, confidence=0.95, changepoint_alpha=None)
    sample = np.arange(1.0, 201.0)  # 1..200, observed in a shuffled order
    for w in np.random.default_rng(0).permutation(sample):
        q.observe("k", float(w))
    k = int(stats.binom.ppf(0.95, 200, 0.9))  # 0-based order statistic
    assert stats.binom.cdf(k, 200, 0.9) >= 0.95 > stats.binom.cdf(k - 1, 200, 0.9)
    assert q.predict("k") == sample[k]
    assert q.predict("k") > np.quantile(sample, 0.9)  # an upper bound on the plain quantile


def test_qbets_with_too_few_waits_predicts_the_largest_seen():
    q = QBETSUpperBound()  # 0.95 quantile at 95 %: needs 59 waits
    for w in (5.0, 50.0, 20.0):
        q.observe("k", w)
    assert q.predict("k") == 50.0


@pytest.mark.parametrize("seed", range(3))
def test_qbets_bound_covers_the_quantile_most_of_the_time(seed):
    """Coverage of the bound: at 95 % confidence it exceeds the true 0.9 quantile in >= ~95 % of trials."""
    rng = np.random.default_rng(seed)
    true_q = stats.expon.ppf(0.9, scale=600)
    covered = 0
    for _ in range(200):
        q = QBETSUpperBound(quantile=0.9, confidence=0.95, changepoint_alpha=None)
        for w in rng.exponential(600, size=80):
            q.observe("k", float(w))
        covered += q.predict("k") >= true_q
    assert covered / 200 >= 0.9


def test_qbets_detects_a_change_point_and_drops_old_history():
    q = QBETSUpperBound(quantile=0.5, confidence=0.5, changepoint_alpha=0.01)
    for _ in range(100):
        q.observe("k", 10.0)
    assert q.predict("k") == 10.0
    for _ in range(7):  # 0.5 ** 7 < 0.01: the queue changed
        q.observe("k", 5000.0)
    assert q.predict("k") == 5000.0
    assert len(q.history_["k"]) == 7
    assert q.misses_["k"] == 0


def test_qbets_without_change_points_keeps_the_history():
    q = QBETSUpperBound(quantile=0.5, confidence=0.5, changepoint_alpha=None)
    for _ in range(100):
        q.observe("k", 10.0)
    for _ in range(7):
        q.observe("k", 5000.0)
    assert q.predict("k") == 10.0
    assert len(q.history_["k"]) == 107


@pytest.mark.parametrize(
    ("params", "match"),
    [({"quantile": 1.0}, r"'quantile' must be a number in \(0, 1\); got 1.0"),
     ({"confidence": 0}, r"'confidence' must be a number in \(0, 1\)"),
     ({"history": 0}, r"'history' must be an integer in \[1, inf\]"),
     ({"changepoint_alpha": 2.0}, r"'changepoint_alpha' must be a number in \(0, 1\) or None")],
)  # fmt: skip
def test_qbets_parameters_are_checked_at_first_use(params, match):
    q = QBETSUpperBound(**params)
    with pytest.raises(InvalidParameterError, match=match):
        q.observe("k", 1.0)


def test_window_must_be_a_positive_integer():
    with pytest.raises(InvalidParameterError, match=r"RunningMedian: parameter 'window' must be an integer"):
        RunningMedian(window=0).observe("k", 1.0)
    with pytest.raises(InvalidParameterError, match="'window'"):
        RunningMean(window=2.5).observe("k", 1.0)


@pytest.mark.parametrize("cls", [LastWait, RunningMean, RunningMedian, QBETSUpperBound])
@pytest.mark.parametrize("wait", [-1.0, float("nan"), float("inf"), True])
def test_impossible_waits_are_rejected(cls, wait):
    with pytest.raises(ConfigError, match="'wait' must be a finite number >= 0 seconds"):
        cls().observe("k", wait)


@pytest.mark.parametrize("cls", [LastWait, RunningMean, RunningMedian, QBETSUpperBound])
def test_state_round_trips_through_json(cls):
    a = cls()
    for w in (5.0, 70.0, 3.0, 900.0):
        a.observe("k", w)
    b = cls().set_state("k", json.loads(json.dumps(a.get_state("k"))))
    assert b.predict("k") == a.predict("k")
    assert b.get_state("k") == a.get_state("k")
    with pytest.raises(ConfigError, match="'format' must be"):
        cls().set_state("k", {"format": "other/1", "waits": []})
    with pytest.raises(ConfigError, match="'wait' must be a finite number >= 0"):
        cls().set_state("k", a.get_state("k") | {"waits": [-5.0]})


# -- ask the scheduler (the mock backend) ---------------------------------------------------------------


def test_scheduler_estimate_is_the_backends_expected_start_minus_now():
    backend = MockBackend(nodes=4)
    backend.submit(JobSpec(cores=4, walltime=600.0, runtime=300.0))
    predictor = SchedulerEstimate(backend=backend, spec=JobSpec(cores=2, walltime=60.0))
    assert predictor.predict("k") == 600.0  # the scheduler only knows the walltime
    backend.sleep(100.0)
    assert predictor.predict("k") == 500.0
    backend.sleep(250.0)  # the job really ended at 300 s
    assert predictor.predict("k") == 0.0


def test_scheduler_estimate_matches_the_wait_a_probe_gets_when_jobs_use_their_walltime():
    backend = MockBackend(nodes=4)
    backend.submit(JobSpec(cores=3, walltime=200.0, runtime=200.0))
    backend.submit(JobSpec(cores=4, walltime=100.0, runtime=100.0))
    spec = JobSpec(cores=2, walltime=50.0, runtime=50.0)
    predicted = SchedulerEstimate(backend=backend, spec=lambda key: spec).predict("cores=2-2")
    probe = backend.submit(spec)
    backend.sleep(1000.0)
    assert backend.state(probe).wait == predicted == 300.0


def test_scheduler_estimate_without_an_answer_raises_prediction_unavailable():
    backend = MockBackend(nodes=4)
    failed = backend.submit(JobSpec(cores=4, walltime=10.0, runtime=100.0))  # will TIMEOUT
    backend.sleep(20.0)
    never = JobSpec(cores=1, walltime=10.0, dependencies=(Dependency(DependencyKind.AFTEROK, failed),))
    predictor = SchedulerEstimate(backend=backend, spec=never)
    with pytest.raises(PredictionUnavailableError, match="backend 'mock' gave no expected start for key 'k'"):
        predictor.predict("k")


def test_scheduler_estimate_counts_observations_and_checks_its_parameters():
    backend = MockBackend(nodes=2)
    predictor = SchedulerEstimate(backend=backend, spec=JobSpec(cores=1, walltime=5.0))
    predictor.observe("k", 3.0).partial_fit("k", 4.0)
    assert predictor.get_state("k") == {"format": "SchedulerEstimate/1", "observations": 2}
    assert SchedulerEstimate(backend=backend, spec=JobSpec(cores=1, walltime=5.0)).set_state(
        "k", {"format": "SchedulerEstimate/1", "observations": 2}
    ).get_state("k") == predictor.get_state("k")
    with pytest.raises(InvalidParameterError, match="'backend' must be a BatchBackend"):
        SchedulerEstimate(backend="slurm", spec=JobSpec(cores=1, walltime=5.0)).predict("k")
    with pytest.raises(ConfigError, match="'spec' must be a JobSpec or a callable"):
        SchedulerEstimate(backend=backend, spec=3).predict("k")
    with pytest.raises(ConfigError, match="not a JobSpec"):
        SchedulerEstimate(backend=backend, spec=lambda key: None).predict("k")
    assert math.isfinite(SchedulerEstimate(backend=backend, spec=JobSpec(cores=1, walltime=5.0)).predict("k"))


def test_always_zero_predicts_zero_and_counts():
    zero = AlwaysZero()
    assert zero.predict("unseen") == 0.0
    zero.observe("k", 500.0).observe("k", 0.0)
    assert zero.predict("k") == 0.0 and zero.get_state("k") == {"format": "AlwaysZero/1", "observations": 2}
    with pytest.raises(ConfigError, match="expected format 'AlwaysZero/1'"):
        zero.set_state("k", {"format": "LastWait/1", "waits": []})


def test_running_quantile_gives_the_window_quantiles_and_the_median_is_its_special_case():
    q = RunningQuantile(window=3, quantile=0.0)
    for w in (500.0, 10.0, 20.0, 30.0):  # 500 leaves the window
        q.observe("k", w)
    assert q.predict("k") == 10.0
    assert q.quantiles("k", [0.5, 1.0]).tolist() == [20.0, 30.0]
    assert isinstance(q, WaitDistribution)
    m = RunningMedian(window=3)
    for w in (500.0, 10.0, 20.0, 30.0):
        m.observe("k", w)
    assert m.predict("k") == 20.0 and m.get_params() == {"window": 3}
    assert m.get_state("k")["format"] == "RunningMedian/1"
    with pytest.raises(InvalidParameterError, match="'quantile' must be a number in \\[0, 1\\]"):
        RunningQuantile(quantile=1.5).observe("k", 1.0)
    with pytest.raises(NotFittedError):
        RunningQuantile().quantiles("unseen", [0.5])


def test_log_ewma_follows_the_recent_waits_on_a_log_scale():
    p = LogEWMA(alpha=0.5)
    with pytest.raises(NotFittedError, match="call observe"):
        p.predict("k")
    p.observe("k", 99.0)
    assert p.predict("k") == 99.0  # one wait: its own median, exactly
    p.observe("k", 9999.0)  # log(1 + w): 100 and 10,000 average to 1,000
    assert p.predict("k") == pytest.approx(999.0)
    lo, mid, hi = p.quantiles("k", [0.25, 0.5, 0.75])
    assert lo < mid < hi and mid == pytest.approx(999.0)
    assert (hi + 1) * (lo + 1) == pytest.approx((mid + 1) ** 2)  # symmetric on the log scale
    # the fit's 0.9 quantile would be 19,000 s: capped at the longest wait seen
    assert p.quantiles("k", [0.9, 0.99]).tolist() == [9999.0, 9999.0]
    for _ in range(30):  # the queue has moved: a run of 60 s waits
        p.observe("k", 60.0)
    assert p.predict("k") == pytest.approx(60.0, rel=1e-6)
    assert isinstance(p, WaitDistribution)
    errs_short = LogEWMA(alpha=0.5, quantile=0.25)
    for w in (99.0, 9999.0):
        errs_short.observe("k", w)
    assert errs_short.predict("k") < 999.0
    with pytest.raises(ConfigError, match="probabilities must be in \\(0, 1\\)"):
        p.quantiles("k", [0.0])
    with pytest.raises(InvalidParameterError, match="'alpha' must be a number in \\(0, 1\\]"):
        LogEWMA(alpha=0.0).observe("k", 1.0)
    with pytest.raises(ConfigError, match="expected format 'LogEWMA/1'"):
        LogEWMA().set_state("k", {"format": "LogEWMA/1", "n": 1, "mean": 1.0, "var": -1.0})


def test_log_ewma_state_keeps_the_cap_and_reads_states_written_without_it():
    p = LogEWMA(alpha=0.5)
    for w in (99.0, 9999.0):
        p.observe("k", w)
    state = p.get_state("k")
    assert state["max"] == 9999.0
    restored = LogEWMA(alpha=0.5).set_state("k", state)
    assert restored.quantiles("k", [0.9]).tolist() == [9999.0]
    old = {k: v for k, v in state.items() if k != "max"}  # written before the cap existed
    uncapped = LogEWMA(alpha=0.5).set_state("k", old)
    assert uncapped.quantiles("k", [0.9])[0] > 9999.0
    assert "max" not in uncapped.get_state("k")
    for bad in (-1.0, math.nan, math.inf, True, "9999"):
        with pytest.raises(ConfigError, match="'max' \\(optional\\) a finite number >= 0"):
            LogEWMA().set_state("k", {**state, "max": bad})


@settings(max_examples=200, deadline=None)
@given(
    waits=st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=30),
    q=st.floats(0, 1),
)
def test_running_quantile_matches_numpy(waits, q):
    predictor = RunningQuantile(window=30, quantile=q)
    for w in waits:
        predictor.observe("k", w)
    assert predictor.predict("k") == pytest.approx(float(np.quantile(waits, q)), rel=1e-12, abs=1e-9)

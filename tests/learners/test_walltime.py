"""ESDD discretisation, censoring, cost evaluators, baselines and WalltimeLearner (issue 3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from elastic.errors import ConfigError
from elastic.learners.base import InvalidParameterError, NotFittedError, clone
from elastic.learners.toptimal import toptimal
from elastic.learners.walltime import ESDD, WalltimeLearner, esdd, esdd_from_runtimes
from elastic.learners.walltime_baselines import (
    MASI,
    ClassicalHPC,
    FixedSequence,
    Neuroscience,
    strategy_expectation,
)
from elastic.learners.walltime_cost import CostModel, empirical_cost, expected_cost, expected_makespan

TABLE1 = stats.truncnorm(-4, 6, loc=8, scale=2)

# --- discretisation -------------------------------------------------------------------------------


def test_esdd_follows_the_paper_definition() -> None:
    d = esdd(TABLE1, 0.0, 20.0, 200)
    assert d.points == 200 and d.lower == 0.0 and d.upper == 20.0
    np.testing.assert_allclose(np.diff(d.values), 0.1)
    cdf = TABLE1.cdf(d.values)
    np.testing.assert_allclose(d.probs[1:], np.diff(cdf), atol=1e-15)
    assert d.probs[0] == pytest.approx(cdf[0])
    assert d.mean() == pytest.approx(TABLE1.mean(), abs=0.06)  # rounded up to the 0.1 grid


def test_esdd_conditions_on_the_upper_bound() -> None:
    d = esdd(stats.expon(scale=10.0), 0.0, 10.0, 10)
    assert d.probs.sum() == pytest.approx(1.0)
    assert d.probs[1] == pytest.approx(stats.expon(scale=10.0).cdf(1.0) / stats.expon(scale=10.0).cdf(10.0))


def test_esdd_rejects_nonsense() -> None:
    with pytest.raises(ConfigError, match="lower < upper"):
        esdd(TABLE1, 5.0, 5.0, 10)
    with pytest.raises(ConfigError, match="points must be an integer >= 1"):
        esdd(TABLE1, 0.0, 20.0, 0)
    with pytest.raises(ConfigError, match="no mass"):
        esdd(stats.uniform(100, 1), 0.0, 20.0, 10)


def test_runtimes_are_rounded_up_to_the_grid() -> None:
    d = esdd_from_runtimes([0.5, 1.0, 2.2, 4.0], points=4)
    np.testing.assert_allclose(d.values, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(d.probs, [0, 0.5, 0, 0.25, 0.25])


def test_censored_runs_move_mass_to_longer_runtimes() -> None:
    runtimes = [2.0, 3.0, 4.0, 5.0, 6.0, 5.0, 5.0, 8.0]
    censored = [False, False, False, False, False, True, True, True]  # killed at 5 h and 8 h walltimes
    used = esdd_from_runtimes(runtimes, censored, upper=12.0, points=12)
    dropped = esdd_from_runtimes(np.array(runtimes)[~np.array(censored)], upper=12.0, points=12)
    assert used.mean() > dropped.mean()
    assert np.all(np.cumsum(used.probs) <= np.cumsum(dropped.probs) + 1e-12)
    # The mass Kaplan-Meier leaves beyond the last observation (killed at 8 h) sits at the upper bound.
    assert used.probs[-1] > 0 and dropped.probs[-1] == 0
    # Dropping the kills makes the stage look cheaper than it is.
    assert (
        toptimal(dropped.values, dropped.probs).expected_cost
        < toptimal(used.values, used.probs).expected_cost
    )


def test_counting_kills_changes_the_first_request() -> None:
    # Three finished runs (2, 3, 4 h) and six killed at a 5 h walltime; the partition allows 8 h.
    runtimes = [2.0, 3.0, 4.0] + [5.0] * 6
    censored = [False] * 3 + [True] * 6
    used = toptimal(*_arrays(esdd_from_runtimes(runtimes, censored, upper=8.0, points=8)))
    dropped = toptimal(*_arrays(esdd_from_runtimes(runtimes[:3], upper=8.0, points=8)))
    assert dropped.requests == (4.0, 8.0)  # believes every run ends by 4 h
    assert used.requests == (8.0,)  # 2/3 of runs need more than 4 h: go straight to the limit


def _arrays(d: ESDD) -> tuple[np.ndarray, np.ndarray]:
    return d.values, d.probs


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 100.0, allow_nan=False), st.booleans()), min_size=1, max_size=40))
def test_censoring_never_makes_runs_look_shorter(runs: list[tuple[float, bool]]) -> None:
    x = np.array([r for r, _ in runs])
    c = np.array([flag for _, flag in runs])
    used = esdd_from_runtimes(x, c, upper=100.0, points=50)
    assert used.probs.sum() == pytest.approx(1.0) and np.all(used.probs >= 0)
    if (~c).any():
        dropped = esdd_from_runtimes(x[~c], upper=100.0, points=50)
        assert np.all(np.cumsum(used.probs) <= np.cumsum(dropped.probs) + 1e-9)


def test_largest_censored_runtime_needs_an_upper_bound() -> None:
    with pytest.raises(ConfigError, match=r"censored.*pass upper="):
        esdd_from_runtimes([1.0, 3.0], [False, True])
    d = esdd_from_runtimes([1.0, 3.0], [True, True], upper=4.0, points=4)
    np.testing.assert_allclose(d.probs, [0, 0, 0, 0, 1])  # nothing finished: all mass at the limit


@pytest.mark.parametrize(
    ("runtimes", "censored", "upper", "match"),
    [
        ([], None, None, "empty"),
        ([1.0, -2.0], None, None, r"runtimes\[1\] = -2.0"),
        ([1.0, 2.0], [True], None, "censored has 1 entries"),
        ([1.0, 30.0], None, 20.0, "exceeds upper"),
    ],
)
def test_bad_runtimes(
    runtimes: list[float], censored: list[bool] | None, upper: float | None, match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        esdd_from_runtimes(runtimes, censored, upper=upper)


# --- costs ----------------------------------------------------------------------------------------


def test_cost_model_validation() -> None:
    with pytest.raises(ConfigError, match="beta must be a finite number >= 0"):
        CostModel(beta=-1.0)
    with pytest.raises(ConfigError, match="at least one"):
        CostModel(0.0, 0.0, 0.0)


def test_expected_cost_by_hand() -> None:
    d = ESDD(np.array([2.0, 4.0, 6.0]), np.array([0.5, 0.25, 0.25]))
    # requests 2, 6: X=2 -> 2; X=4 -> 2 + 6; X=6 -> 2 + 6
    assert expected_cost([2.0, 6.0], d) == pytest.approx(0.5 * 2 + 0.5 * 8)
    # alpha=1, beta=1, gamma=10: X=2 -> 2+2+10; X=4 -> (2+2+10) + (6+4+10); X=6 -> 14 + 22
    cost = CostModel(1.0, 1.0, 10.0)
    assert expected_cost([2.0, 6.0], d, cost) == pytest.approx(0.5 * 14 + 0.25 * 34 + 0.25 * 36)
    assert empirical_cost([2.0, 6.0], [2.0, 4.0], cost) == pytest.approx((14 + 34) / 2)


def test_expected_makespan_by_hand() -> None:
    d = ESDD(np.array([2.0, 4.0, 6.0]), np.array([0.5, 0.25, 0.25]))
    # zeta = 0.5: X=2 -> max(2, 4) = 4; X=4 -> max(8, 12) = 12; X=6 -> max(8, 16) = 16
    assert expected_makespan([2.0, 6.0], d, 0.5) == pytest.approx(0.5 * 4 + 0.25 * 12 + 0.25 * 16)
    assert expected_makespan([2.0, 6.0], d, 0.0) == pytest.approx(expected_cost([2.0, 6.0], d))


def test_sequences_must_cover_every_runtime() -> None:
    d = ESDD(np.array([2.0, 4.0]), np.array([0.5, 0.5]))
    with pytest.raises(ConfigError, match="never finish"):
        expected_cost([2.0, 3.0], d)
    with pytest.raises(ConfigError, match="strictly increasing"):
        expected_cost([4.0, 4.0], d)
    with pytest.raises(ConfigError, match="never finish"):
        empirical_cost([2.0], [3.0])


# --- baselines ------------------------------------------------------------------------------------


def test_baseline_sequences() -> None:
    history = [1.0, 9.0, 3.0, 4.0]
    assert ClassicalHPC().requests(history, 20.0) == (20.0,)
    assert Neuroscience().requests(history, 20.0) == (9.0, 20.0)
    assert Neuroscience(window=2).requests(history, 20.0) == (4.0, 20.0)
    assert Neuroscience().requests([], 20.0) == (20.0,)
    assert Neuroscience().requests([25.0], 20.0) == (20.0,)
    np.testing.assert_allclose(MASI().requests([4.0, 6.0], 12.0), [5.0, 7.0, 9.8, 12.0])
    assert MASI().requests([30.0], 12.0) == (12.0,)
    assert FixedSequence("x", (1.0, 2.0)).requests(history, 2.0) == (1.0, 2.0)


def test_toptimal_is_cheapest_on_table1() -> None:
    d = esdd(TABLE1, 0.0, 20.0, 200)
    best = toptimal(d.values, d.probs).expected_cost
    assert best == pytest.approx(expected_cost(toptimal(d.values, d.probs).requests, d))
    classical = strategy_expectation(ClassicalHPC(), d, expected_cost, samples=10)
    assert classical == pytest.approx(20.0)
    for strategy in (Neuroscience(), MASI()):
        assert best < strategy_expectation(strategy, d, expected_cost, samples=200)


def test_strategy_expectation_is_reproducible() -> None:
    d = esdd(TABLE1, 0.0, 20.0, 50)
    first = strategy_expectation(Neuroscience(), d, expected_cost, samples=100, seed=3)
    assert first == strategy_expectation(Neuroscience(), d, expected_cost, samples=100, seed=3)


# --- learner --------------------------------------------------------------------------------------


def test_learner_needs_runs() -> None:
    learner = WalltimeLearner()
    with pytest.raises(NotFittedError, match="fit"):
        learner.next_request()
    assert not hasattr(learner, "requests_")


def test_learner_recovers_table1_from_samples() -> None:
    samples = TABLE1.rvs(size=20_000, random_state=np.random.default_rng(7))
    learner = WalltimeLearner(upper=20.0, points=200).fit(samples)
    assert learner.requests_[0] == pytest.approx(10.8, abs=0.3)
    assert learner.requests_[-1] == 20.0
    assert learner.next_request() == learner.requests_[0]
    assert learner.next_request(learner.requests_[:2]) == learner.requests_[2]


def test_learner_next_request_off_the_sequence() -> None:
    learner = WalltimeLearner(points=10).fit([3.0, 4.0, 5.0, 10.0])
    assert learner.requests_ == (5.0, 10.0)
    assert learner.next_request([4.5]) == 5.0  # runtime > 4.5: 5 is still the best next request
    assert learner.next_request([6.0]) == 10.0
    with pytest.raises(ConfigError, match="reached upper"):
        learner.next_request([10.0])


def test_learner_partial_fit_accumulates_and_fit_resets() -> None:
    learner = WalltimeLearner(upper=10.0, points=10).fit([2.0, 2.0])
    assert learner.requests_[0] == 2.0
    learner.partial_fit([9.0, 9.0, 9.0], censored=[True, False, False])
    assert learner.runtimes_.size == 5 and learner.censored_.tolist() == [False, False, True, False, False]
    # Kaplan-Meier: 2/5 at 2; at 9 two of the three runs at risk end -> 2/5 at 9, 1/5 left for the limit.
    np.testing.assert_allclose(learner.distribution_.probs[[2, 9, 10]], [0.4, 0.4, 0.2])
    assert learner.requests_ == (2.0, 10.0)  # 2 + 0.6 * 10 = 8 beats 2 + 0.6 * 9 + 0.2 * 10 = 9.4
    learner.fit([2.0])
    assert learner.runtimes_.tolist() == [2.0]


def test_learner_with_backfilling_uses_atoptimal() -> None:
    samples = TABLE1.rvs(size=5000, random_state=np.random.default_rng(1))
    plain = WalltimeLearner(upper=20.0, points=46).fit(samples)
    backfilled = WalltimeLearner(upper=20.0, points=46, zeta=0.9, at_points=23).fit(samples)
    assert len(backfilled.requests_) == 2 and backfilled.requests_[-1] == 20.0
    assert backfilled.requests_[0] > plain.requests_[0]


def test_learner_parameters() -> None:
    with pytest.raises(InvalidParameterError, match="'zeta' must be a number in"):
        WalltimeLearner(zeta=1.0).fit([1.0])
    learner = WalltimeLearner(points=20, gamma=5.0)
    assert clone(learner).get_params() == learner.get_params()
    assert learner.get_params()["points"] == 20

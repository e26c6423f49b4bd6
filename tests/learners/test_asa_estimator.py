"""ASAEstimator: the ASA learner update, policies, losses, state and parameters (issue #3)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError
from elastic.learners.asa import ASAEstimator
from elastic.learners.asa_grid import DEFAULT_GRID, geometry_key, key_cores, nearest_index
from elastic.learners.base import InvalidParameterError, clone
from elastic.learners.evaluation import iterations_to_converge

GRID = np.asarray(DEFAULT_GRID)
waits = st.floats(min_value=0, max_value=300_000, allow_nan=False, allow_infinity=False)


def run(est: ASAEstimator, truth: np.ndarray, key: str = "k") -> np.ndarray:
    """Predict-then-observe along ``truth``; return the predictions."""
    out = np.empty(len(truth))
    for i, wait in enumerate(truth):
        out[i] = est.predict(key)
        est.observe(key, float(wait))
    return out


# -- grid, keys ---------------------------------------------------------------------------------------


def test_default_grid_has_53_sorted_waits_from_0_to_100000_denser_in_tens_and_hundreds():
    assert len(GRID) == 53
    assert GRID[0] == 0 and GRID[-1] == 100_000
    assert np.all(np.diff(GRID) > 0)
    assert np.sum(GRID < 1_000) == 28  # tens and hundreds: more than half of the alternatives
    assert np.sum((GRID >= 1_000) & (GRID < 10_000)) == 13
    assert np.sum(GRID >= 10_000) == 12


@pytest.mark.parametrize(
    ("cores", "key"),
    [(1, "cores=1-1"), (2, "cores=2-2"), (3, "cores=3-4"), (28, "cores=17-32"), (32, "cores=17-32"),
     (33, "cores=33-64"), (56, "cores=33-64"), (112, "cores=65-128")],
)  # fmt: skip
def test_geometry_key_buckets_cores_by_powers_of_two(cores, key):
    assert geometry_key(cores) == key
    assert key_cores(key) == int(key.split("-")[1])


def test_geometry_key_adds_partition_and_user():
    assert geometry_key(28, partition="batch", user="alice") == "cores=17-32/partition=batch/user=alice"
    assert geometry_key(28, user="bob") == "cores=17-32/user=bob"
    assert key_cores("cores=17-32/user=bob") == 32
    assert key_cores("fig5") is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"cores": 0}, "'cores' must be an integer >= 1; got 0"),
     ({"cores": 2.5}, "'cores'"),
     ({"cores": 4, "user": "a/b"}, "'user' must be a non-empty string without '/'"),
     ({"cores": 4, "partition": "p=q"}, "'partition'")],
)  # fmt: skip
def test_geometry_key_rejects_bad_input(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        geometry_key(**kwargs)


def test_nearest_index_snaps_to_closest_grid_value_ties_down_and_clips():
    grid = [0.0, 10.0, 100.0]
    assert nearest_index(grid, [0, 4.9, 5, 5.1, 55, 56, 1e9, 100]).tolist() == [0, 0, 0, 1, 1, 2, 2, 2]


# -- the round update, known answers ------------------------------------------------------------------


def test_round_closes_when_incurred_loss_exceeds_bound_and_applies_exponential_weights():
    est = ASAEstimator(grid=[0, 10, 100], eta0=1.0, round_bound=1.0, uniform_mix=0.0)
    est.observe("k", 10)  # incurred 2/3 <= 1: the round stays open
    state = est.get_state("k")
    assert state["round"] == 1
    assert state["p"] == pytest.approx([1 / 3] * 3)
    assert state["round_loss"] == [1.0, 0.0, 1.0]
    assert state["incurred"] == pytest.approx(2 / 3)
    est.observe("k", 12)  # incurred 4/3 > 1: close with eta_1 = 1 and L = [2, 0, 2]
    state = est.get_state("k")
    z = 1 + 2 * math.exp(-2)
    assert state["p"] == pytest.approx([math.exp(-2) / z, 1 / z, math.exp(-2) / z])
    assert state["round"] == 2
    assert state["round_loss"] == [0.0, 0.0, 0.0]
    assert state["cumulative_loss"] == pytest.approx([2.0, 0.0, 2.0])


def test_second_round_uses_eta0_over_sqrt_r_and_uniform_mix():
    est = ASAEstimator(grid=[0, 10, 100], eta0=2.0, round_bound=0.5, uniform_mix=0.3)
    est.observe("k", 0)  # incurred 2/3 > 0.5: closes round 1 with eta 2
    p1 = np.array([1.0, math.exp(-2), math.exp(-2)])
    p1 = 0.7 * p1 / p1.sum() + 0.1
    assert est.get_state("k")["p"] == pytest.approx(p1.tolist())
    est.observe("k", 100)  # incurred p1[0] + p1[1] > 0.5: closes round 2 with eta 2 / sqrt 2
    p2 = p1 * np.exp(-math.sqrt(2) * np.array([1.0, 1.0, 0.0]))
    p2 = 0.7 * p2 / p2.sum() + 0.1
    state = est.get_state("k")
    assert state["p"] == pytest.approx(p2.tolist())
    assert state["round"] == 3
    assert state["cumulative_loss"] == pytest.approx([2 * 0 + math.sqrt(2), 2 + math.sqrt(2), 2.0])


def test_eta_min_floors_the_learning_rate():
    est = ASAEstimator(grid=[0, 10, 100], eta0=1.0, eta_min=0.9, round_bound=0.3, uniform_mix=0.0)
    est.observe("k", 0).observe("k", 0)  # round 1 with eta 1, round 2 with max(1/sqrt 2, 0.9) = 0.9
    state = est.get_state("k")
    assert state["round"] == 3
    assert state["cumulative_loss"] == pytest.approx([0.0, 1.9, 1.9])
    plain = ASAEstimator(grid=[0, 10, 100], eta0=1.0, round_bound=0.3, uniform_mix=0.0)
    plain.observe("k", 0).observe("k", 0)
    assert plain.get_state("k")["cumulative_loss"] == pytest.approx([0.0, 1 + 2**-0.5, 1 + 2**-0.5])


# -- invariants ---------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    observations=st.lists(st.tuples(st.sampled_from(["a", "b"]), waits), max_size=40),
    policy=st.sampled_from(["default", "tuned", "greedy"]),
    loss=st.sampled_from(["paper", "cost"]),
    uniform_mix=st.sampled_from([0.0, 1e-6, 0.01, 0.5]),
    eta0=st.sampled_from([0.01, 1.0, 50.0]),
    round_bound=st.sampled_from([0.01, 1.0, 25.0]),
)
def test_probabilities_stay_a_distribution_under_any_observation_sequence(
    observations, policy, loss, uniform_mix, eta0, round_bound
):
    est = ASAEstimator(
        policy=policy, loss=loss, uniform_mix=uniform_mix, eta0=eta0, round_bound=round_bound,
        repetitions=7, random_state=0,
    )  # fmt: skip
    for key, wait in observations:
        est.observe(key, wait)
        p = est.probabilities(key)
        assert np.all(np.isfinite(p))
        assert np.all(p >= 0)
        assert p.sum() == pytest.approx(1.0, abs=1e-9)
        assert np.all(p >= uniform_mix / len(p) * (1 - 1e-9)) or est.get_state(key)["round"] == 1
        assert est.predict(key) in DEFAULT_GRID


@settings(max_examples=40, deadline=None)
@given(
    sequence=st.lists(waits, min_size=1, max_size=30),
    repetitions=st.integers(2, 60),
    eta_min=st.sampled_from([0.0, 0.1]),
)
def test_tuned_equals_default_with_each_observation_repeated(sequence, repetitions, eta_min):
    """The fast paths of tuned (batched repetitions, 0/1 shortcut) change nothing but speed."""
    tuned = ASAEstimator(policy="tuned", repetitions=repetitions, eta_min=eta_min)
    plain = ASAEstimator(policy="default", eta_min=eta_min)
    for wait in sequence:
        tuned.observe("k", wait)
        for _ in range(repetitions):
            plain.observe("k", wait)
    a, b = tuned.get_state("k"), plain.get_state("k")
    assert a["round"] == b["round"]
    for field in ("p", "round_loss", "cumulative_loss"):
        np.testing.assert_allclose(a[field], b[field], rtol=1e-9, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(sequence=st.lists(waits, min_size=1, max_size=20), repetitions=st.integers(2, 20))
def test_tuned_cost_loss_equals_default_cost_loss_repeated(sequence, repetitions):
    tuned = ASAEstimator(policy="tuned", loss="cost", repetitions=repetitions)
    plain = ASAEstimator(policy="default", loss="cost")
    for wait in sequence:
        tuned.observe("cores=17-32", wait)
        for _ in range(repetitions):
            plain.observe("cores=17-32", wait)
    a, b = tuned.get_state("cores=17-32"), plain.get_state("cores=17-32")
    assert a["round"] == b["round"]
    np.testing.assert_allclose(a["p"], b["p"], rtol=1e-9, atol=1e-12)


# -- policies -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_tuned_converges_faster_than_default_after_a_step_change(seed):
    truth = np.r_[np.full(150, 30_000.0), np.full(250, 300.0)]
    default = run(ASAEstimator(policy="default", random_state=seed), truth)
    tuned = run(ASAEstimator(policy="tuned", random_state=seed), truth)
    d = iterations_to_converge(default, truth, [0, 150])
    t = iterations_to_converge(tuned, truth, [0, 150])
    assert t[1] is not None and t[1] <= 15
    assert d[1] is None or d[1] > t[1]
    assert np.mean(tuned[150:] == 300) > np.mean(default[150:] == 300)


def test_greedy_gets_stuck_after_the_true_wait_drops():
    """The paper's Figure 5: greedy reaches a local minimum when the wait drops and stays there."""
    truth = np.r_[np.full(200, 50_000.0), np.full(300, 100.0)]
    greedy = run(ASAEstimator(policy="greedy"), truth)
    tuned = run(ASAEstimator(policy="tuned", random_state=0), truth)
    assert greedy[0] == 0.0  # no data: the smallest alternative, i.e. Per-Stage behaviour
    assert np.all(greedy[5:200] == 50_000)
    assert np.all(greedy[200:] == 50_000)  # 300 iterations later it still predicts the old wait
    assert iterations_to_converge(greedy, truth, [0, 200])[1] is None
    assert iterations_to_converge(tuned, truth, [0, 200])[1] is not None


def test_default_prediction_before_any_observation_samples_the_uniform_prior():
    est = ASAEstimator(random_state=3)
    draws = [est.predict("never-seen") for _ in range(2000)]
    assert set(draws) <= set(DEFAULT_GRID)
    counts = np.array([draws.count(v) for v in DEFAULT_GRID])
    assert counts.min() > 10  # every alternative drawn (expected ~38 each)
    assert "never-seen" not in est.states_  # predicting learns nothing


def test_keys_learn_independently():
    est = ASAEstimator(policy="tuned", random_state=0)
    for _ in range(20):
        est.observe("small", 50).observe("large", 20_000)
    assert est.predict("small") == 50
    assert est.predict("large") == 20_000


def test_same_seed_same_predictions():
    truth = np.r_[np.full(50, 900.0), np.full(50, 40.0)]
    a = run(ASAEstimator(random_state=11), truth)
    b = run(ASAEstimator(random_state=11), truth)
    np.testing.assert_array_equal(a, b)


# -- losses -------------------------------------------------------------------------------------------


def test_paper_loss_is_zero_only_for_the_closest_alternative():
    loss = ASAEstimator().losses("k", 123.0)
    assert loss.tolist().count(0.0) == 1
    assert GRID[np.argmin(loss)] == 100
    assert set(loss.tolist()) == {0.0, 1.0}


def test_cost_loss_is_normalised_and_grows_away_from_the_truth():
    est = ASAEstimator(loss="cost", cores=28)
    loss = est.losses("k", 600.0)
    i = int(np.flatnonzero(GRID == 600)[0])
    assert loss[i] == 0.0 and loss.max() == pytest.approx(1.0) and loss.min() >= 0
    assert np.all(np.diff(loss[i:]) > 0) and np.all(np.diff(loss[: i + 1]) < 0)
    # 28 idle cores per early second cost more than one second of delay
    assert loss[GRID == 700][0] > loss[GRID == 500][0]
    # the core count comes from a geometry key when `cores` is None
    keyed = ASAEstimator(loss="cost").losses("cores=17-32", 600.0)
    one = ASAEstimator(loss="cost").losses("plain", 600.0)
    assert keyed[GRID == 700][0] > one[GRID == 700][0]


def test_cost_loss_weights_shift_the_balance():
    only_delay = ASAEstimator(loss="cost", idle_weight=0.0, cores=8).losses("k", 600.0)
    assert np.all(only_delay[GRID >= 600] == 0)
    assert np.all(only_delay[GRID < 600] > 0)


def test_cost_loss_learner_converges_to_a_stable_wait():
    est = ASAEstimator(policy="tuned", loss="cost", random_state=0)
    preds = run(est, np.full(100, 2_000.0), key="cores=33-64")
    assert np.mean(preds[50:] == 2_000) > 0.9


# -- state --------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(sequence=st.lists(waits, max_size=30), more=st.lists(waits, max_size=10))
def test_state_round_trips_through_json(sequence, more):
    a = ASAEstimator(policy="tuned", repetitions=5, random_state=1)
    for wait in sequence:
        a.observe("cores=17-32", wait)
    saved = json.loads(json.dumps(a.get_state("cores=17-32")))
    b = ASAEstimator(policy="tuned", repetitions=5, random_state=1).set_state("cores=17-32", saved)
    assert b.get_state("cores=17-32") == a.get_state("cores=17-32")
    for wait in more:  # they keep learning identically
        a.observe("cores=17-32", wait)
        b.observe("cores=17-32", wait)
    np.testing.assert_allclose(a.get_state("cores=17-32")["p"], b.get_state("cores=17-32")["p"])
    assert [a.predict("cores=17-32") for _ in range(5)] == [b.predict("cores=17-32") for _ in range(5)]


def test_state_of_an_unseen_key_is_the_uniform_prior():
    state = ASAEstimator().get_state("new")
    assert state["p"] == pytest.approx([1 / 53] * 53)
    assert state["round"] == 1 and state["observations"] == 0


@pytest.mark.parametrize(
    ("change", "match"),
    [({"format": "asa/0"}, "'format' must be 'asa/1'"),
     ({"grid": [0.0, 1.0]}, "another grid"),
     ({"p": [1.0] * 53}, "'p' must sum to 1"),
     ({"p": [-1.0] + [2 / 52] * 52}, "'p' must be 53 finite numbers >= 0"),
     ({"round": 0}, "'round' must be an integer >= 1"),
     ({"observations": -1}, "'observations'"),
     ({"incurred": float("nan")}, "'incurred'")],
)  # fmt: skip
def test_set_state_rejects_invalid_states(change, match):
    state = ASAEstimator().get_state("k") | change
    with pytest.raises(ConfigError, match=match):
        ASAEstimator().set_state("k", state)


# -- parameters ---------------------------------------------------------------------------------------


def test_init_stores_parameters_unchanged_and_validates_only_when_learning():
    est = ASAEstimator(policy="nonsense", repetitions=0)
    assert est.get_params()["policy"] == "nonsense"
    assert not hasattr(est, "states_")
    with pytest.raises(InvalidParameterError, match=r"'policy' must be one of 'default', 'greedy', 'tuned'"):
        est.observe("k", 1.0)


@pytest.mark.parametrize(
    ("params", "match"),
    [({"repetitions": 0}, r"'repetitions' must be an integer in \[1, inf\]; got 0"),
     ({"loss": "l2"}, r"'loss' must be one of 'cost', 'paper'; got 'l2'"),
     ({"eta0": 0.0}, r"'eta0' must be a number in \(0, inf\)"),
     ({"eta_min": -0.1}, r"'eta_min' must be a number in \[0, inf\]"),
     ({"uniform_mix": 1.0}, r"'uniform_mix' must be a number in \[0, 1\)"),
     ({"grid": [0, 10, 5]}, "'grid' must be a strictly increasing sequence"),
     ({"grid": [5]}, "'grid' must be a strictly increasing"),
     ({"grid": "0,1"}, "'grid' must be a sorted sequence of >= 2 waits >= 0 or None; got '0,1'"),
     ({"loss": "cost", "idle_weight": 0, "delay_weight": 0}, "must not both be 0")],
)  # fmt: skip
def test_invalid_parameters_name_the_parameter_and_allowed_values(params, match):
    with pytest.raises(ConfigError, match=match):
        ASAEstimator(**params).predict("k")


@pytest.mark.parametrize("wait", [-1.0, float("nan"), float("inf"), "10"])
def test_observe_rejects_impossible_waits(wait):
    with pytest.raises(ConfigError, match="'wait' must be a finite number >= 0 seconds"):
        ASAEstimator().observe("k", wait)


def test_clone_gives_an_unfitted_copy_and_set_params_checks_names():
    est = ASAEstimator(policy="tuned", repetitions=7).observe("k", 5.0)
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert not hasattr(copy, "states_")
    with pytest.raises(InvalidParameterError, match="parameter 'polcy' must be one of"):
        copy.set_params(polcy="greedy")
    assert "ASAEstimator(" in repr(copy) and "repetitions=7" in repr(copy)


def test_partial_fit_is_observe():
    a = ASAEstimator().partial_fit("k", 60.0)
    b = ASAEstimator().observe("k", 60.0)
    assert a.get_state("k") == b.get_state("k")


# -- shared state through the real store ----------------------------------------------------------------


def test_two_workflows_share_asa_state_through_the_store(tmp_path):
    from elastic.learners.base import load_shared, observe_shared
    from elastic.store import Store

    store = Store(f"sqlite:///{tmp_path / 'elastic.db'}")
    key = geometry_key(28, user="alice")
    first = ASAEstimator(policy="tuned", random_state=0)
    for _ in range(10):
        observe_shared(first, store, "asa-tuned", key, 900.0)
    second = load_shared(ASAEstimator(policy="tuned", random_state=0), store, "asa-tuned", key)
    assert second.get_state(key) == first.get_state(key)
    assert second.get_state(key)["observations"] == 10
    assert second.predict(key) == 900.0
    fresh = load_shared(ASAEstimator(), store, "asa-tuned", geometry_key(112))  # nothing saved: prior
    assert fresh.get_state(geometry_key(112))["observations"] == 0
    store.close()


def test_concurrent_observers_never_lose_an_observation(tmp_path):
    import threading

    from elastic.learners.base import observe_shared
    from elastic.store import Store

    url = f"sqlite:///{tmp_path / 'elastic.db'}"
    key = geometry_key(56)

    def workflow(wait: float) -> None:
        store = Store(url)
        est = ASAEstimator(policy="default", random_state=1)
        for _ in range(15):
            observe_shared(est, store, "asa", key, wait)
        store.close()

    threads = [threading.Thread(target=workflow, args=(w,)) for w in (60.0, 6_000.0, 600.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = Store(url)
    assert store.load_learner_state("asa", key)["observations"] == 45
    store.close()

"""Contract suite: every queue-wait predictor passes the same protocol tests (issue #3)."""

from __future__ import annotations

import inspect
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.errors import ConfigError
from elastic.learners.asa import ASAEstimator
from elastic.learners.base import NotFittedError, WaitPredictor
from elastic.learners.baselines import LastWait, QBETSUpperBound, RunningMean, RunningMedian, RunningQuantile
from elastic.learners.ewma import LogEWMA
from elastic.learners.reference import AlwaysZero, SchedulerEstimate

FACTORIES = {
    "asa-default": lambda: ASAEstimator(policy="default", random_state=0),
    "asa-tuned": lambda: ASAEstimator(policy="tuned", repetitions=10, random_state=0),
    "asa-greedy": lambda: ASAEstimator(policy="greedy"),
    "asa-cost": lambda: ASAEstimator(policy="tuned", loss="cost", random_state=0),
    "asa-floor": lambda: ASAEstimator(policy="tuned", eta_min=0.1, random_state=0),
    "last": LastWait,
    "mean": lambda: RunningMean(window=4),
    "median": lambda: RunningMedian(window=5),
    "qbets": lambda: QBETSUpperBound(quantile=0.8, confidence=0.9),
    "quantile": lambda: RunningQuantile(window=6, quantile=0.25),
    "ewma": lambda: LogEWMA(alpha=0.3),
    "zero": AlwaysZero,
    "scheduler": lambda: SchedulerEstimate(
        backend=MockBackend(nodes=8), spec=JobSpec(cores=2, walltime=60.0)
    ),
}
LEARNS = {name for name in FACTORIES if name not in ("scheduler", "zero")}  # those two learn nothing
DETERMINISTIC = {"asa-greedy", "last", "mean", "median", "qbets", "quantile", "ewma", "zero"}

waits = st.floats(min_value=0, max_value=200_000, allow_nan=False, allow_infinity=False)


# Every test runs once per predictor (parametrize rather than a fixture, so hypothesis tests can use it).
pytestmark = pytest.mark.parametrize("name", sorted(FACTORIES))


def test_implements_the_wait_predictor_protocol(name):
    predictor = FACTORIES[name]()
    assert isinstance(predictor, WaitPredictor)
    assert predictor.observe("k", 10.0) is predictor
    assert predictor.partial_fit("k", 20.0) is predictor


def test_init_is_keyword_only_and_stores_parameters_unchanged(name):
    predictor = FACTORIES[name]()
    signature = inspect.signature(type(predictor).__init__)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    assert set(predictor.get_params()) == {p.name for p in params}
    rebuilt = type(predictor)(**predictor.get_params())
    assert rebuilt.get_params() == predictor.get_params()
    assert not [a for a in vars(rebuilt) if a.endswith("_")]  # nothing learned in __init__


def test_predict_before_any_observation(name):
    predictor = FACTORIES[name]()
    if name.startswith("asa") or name in ("scheduler", "zero"):
        assert math.isfinite(predictor.predict("unseen"))  # ASA samples its prior; those two answer
    else:
        with pytest.raises(NotFittedError):
            predictor.predict("unseen")


@settings(max_examples=15, deadline=None)
@given(sequence=st.lists(waits, min_size=1, max_size=25))
def test_predictions_are_finite_non_negative_seconds(name, sequence):
    predictor = FACTORIES[name]()
    for wait in sequence:
        predictor.observe("k", wait)
        prediction = predictor.predict("k")
        assert isinstance(prediction, float)
        assert math.isfinite(prediction) and prediction >= 0


def test_keys_are_independent(name):
    predictor = FACTORIES[name]()
    predictor.observe("b", 700.0)
    before = predictor.get_state("b")
    for _ in range(5):
        predictor.observe("a", 30.0)
    assert predictor.get_state("b") == before


def test_state_is_json_and_round_trips(name):
    predictor = FACTORIES[name]()
    for wait in (40.0, 400.0, 4_000.0, 400.0):
        predictor.observe("k", wait)
    state = json.loads(json.dumps(predictor.get_state("k")))
    fresh = FACTORIES[name]().set_state("k", state)
    assert fresh.get_state("k") == predictor.get_state("k")
    if name in DETERMINISTIC:
        assert fresh.predict("k") == predictor.predict("k")


def test_learning_changes_the_state(name):
    predictor = FACTORIES[name]()
    before = predictor.get_state("k")
    predictor.observe("k", 900.0)
    assert predictor.get_state("k") != before


@pytest.mark.parametrize("wait", [-1.0, float("nan"), float("inf")])
def test_impossible_waits_are_rejected(name, wait):
    with pytest.raises(ConfigError, match="'wait' must be a finite number >= 0 seconds"):
        FACTORIES[name]().observe("k", wait)


def test_learners_follow_a_stable_queue(name):
    if name not in LEARNS:
        pytest.skip(f"the {name} baseline does not learn from observations")
    predictor = FACTORIES[name]()
    for _ in range(80):
        predictor.observe("k", 3_000.0)
    predictions = [predictor.predict("k") for _ in range(20)]
    assert sum(p == 3_000.0 for p in predictions) >= 15


def test_state_is_shared_through_the_real_store(name, tmp_path):
    from elastic.learners.base import load_shared, observe_shared
    from elastic.store import Store

    store = Store(f"sqlite:///{tmp_path / 'elastic.db'}")
    writer = FACTORIES[name]()
    for wait in (100.0, 250.0, 100.0):
        observe_shared(writer, store, name, "cores=17-32", wait)
    reader = load_shared(FACTORIES[name](), store, name, "cores=17-32")
    assert reader.get_state("cores=17-32") == writer.get_state("cores=17-32")
    store.close()

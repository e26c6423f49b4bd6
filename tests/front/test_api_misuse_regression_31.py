"""Issue 31: the API used wrongly gets a ConfigError naming the argument, before anything starts.

Every public constructor argument of :class:`~elastic.Elastic`, ``ElasticExecutor`` and
``ElasticTaskRunner`` is fed values of the wrong type (and out-of-range ones): each must be refused with
:class:`~elastic.errors.ConfigError` naming the argument, never a raw ``TypeError``/``AttributeError``,
and never after starting a backend, a pool or a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic import Elastic
from elastic.errors import ConfigError
from elastic.front.door import check_settings
from elastic.limits import MAX_SPEEDUP, MAX_STAGE_TASKS, MAX_STAGES, MIN_SPEEDUP
from elastic.workflow import Stage, Workflow

_junk = st.one_of(
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.builds(object),
    st.just(b"bytes"),
)
"""Values no argument accepts."""

_not_number = st.one_of(_junk, st.text(max_size=4), st.booleans())
_bad_seconds = st.one_of(
    _not_number,
    st.none(),
    st.floats(max_value=-1e-9),
    st.sampled_from([float("nan"), float("inf")]),
)
_bad_set_seconds = st.one_of(
    _not_number, st.floats(max_value=-1e-9), st.sampled_from([float("nan"), float("inf")])
)
"""Bad seconds for a setting where None means "the default" (the settings' value)."""
_bad_cores = st.one_of(
    _not_number, st.floats(allow_nan=True), st.integers(max_value=0), st.just("4"), st.just(4.0)
)

BAD: dict[str, tuple[str, st.SearchStrategy[Any]]] = {
    "backend": ("backend", st.one_of(_junk, st.integers(), st.floats(), st.just("pbs"))),
    "strategy": ("strategy", st.one_of(_junk, st.integers(), st.just("fastest"))),
    "workflow": ("workflow", st.one_of(_junk, st.integers(), st.floats(), st.just(""))),
    "store": ("store", st.one_of(_junk, st.integers(), st.floats())),
    "learner": ("learner", st.one_of(_junk, st.integers(), st.floats(), st.just("smart"))),
    "max_cores": ("max_cores", _bad_cores),
    "job_cores": ("job_cores", _bad_cores),
    "idle_timeout": ("idle_timeout", _bad_set_seconds),
    "drain_margin": ("drain_margin", _bad_set_seconds),
    "poll_interval": ("poll_interval", st.one_of(_not_number, st.floats(max_value=0), st.just(float("nan")))),
    "max_retries": ("max_retries", st.one_of(_not_number, st.floats(), st.integers(max_value=-1))),
    "speedup": ("speedup", st.one_of(_not_number, st.floats(min_value=0.01, max_value=100))),
    "name": (
        "name",
        st.one_of(_junk, st.integers(), st.just(""), st.just("a b"), st.just("x\ny")),
    ),
    "user": ("user", st.one_of(_junk, st.integers(), st.just(""))),
    "submission_rate": (
        "submission_rate",
        st.one_of(_not_number, st.floats(max_value=0), st.floats(min_value=600.001), st.just(float("nan"))),
    ),
    "workers": ("workers", st.one_of(_not_number, st.floats(), st.integers(max_value=0))),
    "worker_memory": ("worker_memory", st.one_of(_not_number, st.just("1G"), st.floats())),
    "prefetch_seconds": ("prefetch_seconds", _bad_seconds),
    "bind": ("bind", st.one_of(_junk, st.none(), st.integers(), st.just(""))),
    "port": ("port", st.one_of(_not_number, st.floats(), st.integers(max_value=-1), st.integers(65536))),
    "advertise": ("advertise", st.one_of(_junk, st.integers(), st.just(""))),
    "secret_dir": ("secret_dir", st.one_of(_junk, st.integers(), st.floats())),
    "heartbeat_interval": ("heartbeat_interval", _bad_seconds),
    "heartbeat_timeout": ("heartbeat_timeout", _bad_seconds),
    "events_kept": ("events_kept", st.one_of(_not_number, st.floats(), st.integers(max_value=0))),
}
"""Elastic's arguments (``speedup`` with the default local backend), with values it must refuse (None is
each setting's default: the :class:`~elastic.front.settings.Settings` value)."""


def _refused(make: Callable[[], Any]) -> ConfigError:
    """Call ``make``; it must raise ConfigError without starting a thread (else clean up and fail)."""
    threads = set(threading.enumerate())
    try:
        made = make()
    except ConfigError as exc:
        started = [t.name for t in set(threading.enumerate()) - threads if t.is_alive()]
        assert not started, f"threads started before the refusal: {started}"
        return exc
    shutdown = getattr(made, "shutdown", None)
    if callable(shutdown):
        shutdown()
    pytest.fail(f"{make} was not refused")


def _elastic(argument: str, value: Any) -> Callable[[], Any]:
    kwargs: dict[str, Any] = {"store": False}
    if argument in ("backend", "strategy"):
        return lambda: Elastic(**{**kwargs, argument: value})
    return lambda: Elastic("local", **{**kwargs, argument: value})


@pytest.mark.parametrize("argument", sorted(BAD))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_each_argument_of_elastic_refuses_wrong_values_by_name(argument: str, data: st.DataObject) -> None:
    named, values = BAD[argument]
    value = data.draw(values, label=argument)
    exc = _refused(_elastic(argument, value))
    assert named in str(exc), str(exc)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_cores": "4"}, "max_cores must be a whole number of cores >= 1 or None, got '4'"),
        (
            {"store": 123},
            "store must be None (the default store), False (none), a SQLAlchemy URL, a Store or a",
        ),
        ({"speedup": 60}, "speedup applies to backend='mock' only; backend='local' runs on the real clock"),
        ({"idle_timeout": "300"}, "idle_timeout must be finite seconds >= 0, got '300'"),
        ({"workers": "4"}, "workers must be a whole number >= 1 or None, got '4'"),
    ],
)
def test_the_findings_of_issue_31_are_refused_with_what_was_expected(
    kwargs: dict[str, Any], message: str
) -> None:
    exc = _refused(lambda: Elastic("local", **{"store": False, **kwargs}))
    assert message in str(exc)


@given(st.one_of(st.floats(max_value=MIN_SPEEDUP * 0.999), st.floats(MAX_SPEEDUP * 1.001)))
@settings(max_examples=25, deadline=None)
def test_a_mock_speedup_outside_the_documented_range_is_refused_with_the_range(speedup: float) -> None:
    exc = _refused(lambda: Elastic("mock", store=False, speedup=speedup))
    assert f"from {MIN_SPEEDUP:g} to {MAX_SPEEDUP:g}" in str(exc) or "must be a number" in str(exc)


def test_a_declared_workflow_beyond_the_limits_is_refused_with_the_limit() -> None:
    huge = Workflow("huge", (Stage("a", tasks=10_000_000, cores=1),))
    with pytest.raises(ConfigError, match=r"stage 'a': tasks: at most 100,000 allowed, got 10,000,000"):
        check_settings(workflow=huge)
    chain = Workflow("chain", tuple(Stage(f"s{i}", 1, 1) for i in range(MAX_STAGES + 1)))
    with pytest.raises(ConfigError, match=rf"stages: at most {MAX_STAGES:,} allowed, got {MAX_STAGES + 1:,}"):
        check_settings(workflow=chain)
    # each stage within its limit, together past the workflow's
    wide = Workflow("wide", tuple(Stage(f"w{i}", MAX_STAGE_TASKS, 1) for i in range(11)))
    with pytest.raises(ConfigError, match=r"tasks of all stages: at most 1,000,000 allowed, got 1,100,000"):
        check_settings(workflow=wide)


EXECUTOR_BAD = {k: v for k, v in BAD.items() if k not in ("name", "workflow")} | {
    "job_name": ("job_name", st.one_of(_junk, st.integers(), st.just(""), st.just("a b"))),
    "workflow": ("workflow", st.one_of(_junk, st.integers(), st.floats(), st.just(""))),
    "plan_interval": ("plan_interval", _bad_seconds),
    "storage_access": ("storage_access", st.one_of(st.integers(), st.text(max_size=3), st.builds(object))),
}


@pytest.mark.parametrize("argument", sorted(EXECUTOR_BAD))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_each_argument_of_the_parsl_executor_refuses_wrong_values_by_name(
    argument: str, data: st.DataObject
) -> None:
    from elastic.executors.parsl_executor import ElasticExecutor

    named, values = EXECUTOR_BAD[argument]
    value = data.draw(values, label=argument)
    exc = _refused(lambda: ElasticExecutor(**{"store": False, argument: value}))
    assert named in str(exc), str(exc)


RUNNER_BAD = {k: v for k, v in BAD.items() if k != "max_retries"} | {
    "cancel_poll_interval": ("cancel_poll_interval", st.one_of(_not_number, st.floats(max_value=0))),
}


@pytest.mark.parametrize("argument", sorted(RUNNER_BAD))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_each_argument_of_the_prefect_runner_refuses_wrong_values_by_name(
    argument: str, data: st.DataObject
) -> None:
    from elastic.executors.prefect_runner import ElasticTaskRunner

    named, values = RUNNER_BAD[argument]
    value = data.draw(values, label=argument)
    exc = _refused(lambda: ElasticTaskRunner(**{"store": False, argument: value}))
    assert named in str(exc), str(exc)


def test_the_prefect_runner_takes_drain_margin_as_documented() -> None:
    from elastic.executors.prefect_runner import ElasticTaskRunner

    ElasticTaskRunner(drain_margin=10.0, store=False)  # was refused as an unknown pool option

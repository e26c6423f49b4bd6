"""One settings object: every front-end takes the same options, as keywords or as one checked ``Settings``."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic import Elastic, Settings
from elastic.control.rate import SubmissionLimit
from elastic.errors import ConfigError, UnknownNameError
from elastic.executors.parsl_executor import ElasticExecutor
from elastic.executors.prefect_runner import ElasticTaskRunner
from elastic.front.settings import FIELDS, POOL_OPTIONS, settings_from

SHARED = frozenset(FIELDS) - {"pool"}
"""The options every front-end takes as keywords (pool options join ``Settings.pool``)."""

OWN = {
    "Elastic": frozenset(),
    "ElasticExecutor": frozenset(
        {"label", "job_name", "plan_interval", "storage_access", "remote_monitoring_radio"}
    ),
    "ElasticTaskRunner": frozenset({"cancel_poll_interval"}),
}
"""Each front-end's own options (documented with it, not in ``Settings``)."""

EXAMPLES: dict[str, Any] = {
    "backend": "mock",
    "strategy": "perstage",
    "workflow": "wf",
    "store": False,
    "learner": "ewma",
    "max_cores": 8,
    "job_cores": 4,
    "idle_timeout": 5.0,
    "poll_interval": 1.0,
    "max_retries": 1,
    "drain_margin": 3.0,
    "speedup": 30.0,
    "name": "job",
    "user": "alice",
    "site": None,
    "submission_rate": SubmissionLimit(per_minute=6, burst=2),
    "progress": True,
}
"""A value each shared option accepts (not its default)."""


def _named(cls: type) -> set[str]:
    params = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}


def test_every_shared_keyword_is_a_settings_field_and_the_front_ends_take_the_same_ones() -> None:
    assert set(EXAMPLES) == SHARED
    assert _named(Elastic) - OWN["Elastic"] == SHARED | {"settings"}
    assert _named(ElasticExecutor) - OWN["ElasticExecutor"] == SHARED | {"settings"}
    # the Prefect runner takes them through **options: each is accepted and lands in its settings
    assert _named(ElasticTaskRunner) - OWN["ElasticTaskRunner"] == {"backend", "strategy", "settings"}
    for option, value in EXAMPLES.items():
        if option == "max_retries":
            continue  # refused on purpose: the Prefect task's own retries count
        runner = ElasticTaskRunner(**{"store": False, "backend": "mock", option: value})
        assert runner._config is not None and getattr(runner._config.settings, option) == value, option


def test_the_mesos_command_builds_its_front_door_from_settings() -> None:
    import argparse

    from elastic.cli import mesos

    parser = argparse.ArgumentParser()
    mesos.register(parser.add_subparsers())
    args = parser.parse_args(
        ["mesos", "--backend", "mock", "--speedup", "30", "--max-cores", "8", "--no-store"]
    )
    built = mesos._settings(args, args.backend)
    assert (built.backend, built.speedup, built.max_cores, built.store) == ("mock", 30.0, 8, False)
    assert built.workflow == "mesos" and dict(built.pool) == {"bind": "127.0.0.1"}


def test_one_backend_name_check_with_one_error() -> None:
    messages = set()
    for make in (
        lambda: Settings(backend="pbs"),
        lambda: Elastic("pbs", store=False),
        lambda: ElasticExecutor(backend="pbs"),
        lambda: ElasticTaskRunner("pbs"),
    ):
        with pytest.raises(UnknownNameError) as info:
            make()
        messages.add(str(info.value))
    assert messages == {"unknown backend 'pbs'; choose one of: local, mock, slurm"}


def test_a_settings_object_is_taken_whole_and_keywords_replace_its_values() -> None:
    given_settings = Settings(
        backend="mock", strategy="bigjob", max_cores=16, store=False, pool={"workers": 2}
    )
    executor = ElasticExecutor(settings=given_settings)
    assert executor.settings == given_settings and executor.job_name == "parsl"
    runner = ElasticTaskRunner(settings=given_settings, max_cores=8, workers=3)
    assert runner._config is not None
    assert runner._config.settings == dataclasses.replace(given_settings, max_cores=8, pool={"workers": 3})
    # None keeps the object's value
    assert settings_from(given_settings, max_cores=None, strategy=None) == given_settings


def test_settings_are_frozen_and_their_pool_options_read_only_yet_copy_and_pickle() -> None:
    s = Settings(backend="mock", speedup=30.0, pool={"workers": 2})
    assert copy.deepcopy(s) == s and pickle.loads(pickle.dumps(s)) == s
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.max_cores = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.pool["workers"] = 3  # type: ignore[index]


def test_unknown_options_and_a_wrong_settings_object_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown options \['wrkers'\]; allowed: .*workers"):
        settings_from(None, wrkers=2)
    with pytest.raises(ConfigError, match=r"unknown options \['nodes'\]"):
        Settings(pool={"nodes": 2})
    with pytest.raises(ConfigError, match="settings must be a Settings object or None, got"):
        ElasticTaskRunner(settings={"backend": "mock"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_retries is not an option"):
        ElasticTaskRunner(settings=Settings(max_retries=1))
    with pytest.raises(ConfigError, match="job_name is name's earlier spelling; give one"):
        ElasticExecutor(name="a", job_name="b")


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "max_cores": st.integers(1, 512),
            "idle_timeout": st.floats(0, 1e6),
            "workers": st.integers(1, 64),
            "name": st.sampled_from(["a", "job-x"]),
        },
    )
)
def test_keywords_and_the_object_they_build_give_the_same_settings(options: dict[str, Any]) -> None:
    fields = {k: v for k, v in options.items() if k in FIELDS}
    pool = {k: v for k, v in options.items() if k in POOL_OPTIONS}
    assert settings_from(None, **options) == Settings(**fields, pool=pool)

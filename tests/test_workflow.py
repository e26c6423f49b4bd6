"""Workflows: built-ins, validation, TOML/JSON loading, runtime sampling."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError, UnknownNameError
from elastic.limits import MAX_RUNTIME
from elastic.workflow import Stage, Workflow, builtin_workflow, load_workflow, resolve_workflow


def test_demo3_is_the_issue_shape() -> None:
    wf = builtin_workflow("demo3")
    assert [(s.tasks, s.cores) for s in wf.stages] == [(1, 1), (8, 1), (1, 1)]
    assert [s.depends_on for s in wf.stages] == [(), ("prepare",), ("process",)]
    assert wf.max_width == 8


def test_unknown_builtin_lists_the_names() -> None:
    with pytest.raises(UnknownNameError, match="demo3") as info:
        builtin_workflow("nope")
    assert "demo3" in info.value.allowed


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tasks": 0}, "tasks must be an integer >= 1, got 0"),
        ({"cores": 1.5}, "cores must be an integer >= 1"),
        ({"runtime": -1.0}, "runtime must be a number of seconds > 0"),
        ({"runtime_cv": float("nan")}, "runtime_cv must be a number >= 0"),
        ({"runtime": 1e300}, "runtime 1e\\+300 s is more than a year"),
        ({"runtime": 366 * 86400.0}, "check that it is the mean task runtime in seconds"),
    ],
)
def test_stage_validation_names_the_field(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"name": "s", "tasks": 1, "cores": 1, "runtime": 10.0} | kwargs
    with pytest.raises(ConfigError, match=match):
        Stage(**args)  # type: ignore[arg-type]


def test_workflow_validation() -> None:
    a = Stage("a", 1, 1, 1.0)
    with pytest.raises(ConfigError, match="used twice"):
        Workflow("w", (a, a))
    with pytest.raises(ConfigError, match="depends on 'b', which is not an earlier stage"):
        Workflow("w", (Stage("a", 1, 1, 1.0, depends_on=("b",)), Stage("b", 1, 1, 1.0)))
    with pytest.raises(ConfigError, match="at least one stage"):
        Workflow("w", ())


def test_load_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "wf.toml"
    toml.write_text(
        'name = "x"\n[[stages]]\nname = "a"\ntasks = 2\ncores = 4\nruntime = 60\n'
        '[[stages]]\nname = "b"\ntasks = 1\ncores = 1\nruntime = 30\nruntime_cv = 0.5\ndepends_on = ["a"]\n'
    )
    wf = load_workflow(toml)
    assert wf.name == "x" and wf.max_width == 8 and wf.stage("b").runtime_cv == 0.5
    js = tmp_path / "other.json"
    js.write_text(json.dumps({"stages": [{"name": "a", "tasks": 1, "cores": 1, "runtime": 5}]}))
    assert resolve_workflow(str(js)).name == "other"


def test_a_stage_without_cores_has_tasks_of_one_core(tmp_path: Path) -> None:
    path = tmp_path / "wf.toml"
    path.write_text('[[stages]]\nname = "a"\ntasks = 3\nruntime = 60\n')
    assert load_workflow(path).stage("a").cores == 1


def test_a_runtime_of_a_year_is_kept_and_beyond_it_refused() -> None:
    assert Stage("s", 1, 1, runtime=MAX_RUNTIME).runtime == MAX_RUNTIME
    with pytest.raises(ConfigError, match="more than a year"):
        Stage("s", 1, 1, runtime=math.nextafter(MAX_RUNTIME, math.inf))


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"stages": [{"name": "a", "tasks": 0, "cores": 1, "runtime": 5}]}', r"stages\[0\].*tasks must be"),
        (
            '{"stages": [{"name": "a", "cores": 1, "runtime": 5}]}',
            r"stages\[0\]: missing required key 'tasks'",
        ),
        ('{"stages": [{"name": "a", "tasks": 1, "cores": 1, "runtime": 5, "gpu": 1}]}', "unknown keys"),
        ('{"stages": []}', "non-empty list"),
        ('{"stages": [\n{"name": }]}', r"bad\.json:2: invalid JSON"),
    ],
)
def test_bad_files_say_where(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=match):
        load_workflow(path)


def test_missing_file_and_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_workflow(tmp_path / "none.toml")
    (tmp_path / "w.yaml").write_text("x")
    with pytest.raises(ConfigError, match=r"\.toml or \.json"):
        load_workflow(tmp_path / "w.yaml")


@settings(max_examples=50, deadline=None)
@given(mean=st.floats(1.0, 1e5), cv=st.floats(0.0, 2.0), seed=st.integers(0, 2**32 - 1))
def test_sampled_runtimes_are_positive_and_reproducible(mean: float, cv: float, seed: int) -> None:
    stage = Stage("s", tasks=5, cores=1, runtime=mean, runtime_cv=cv)
    a = stage.sample_runtimes(np.random.default_rng(seed))
    b = stage.sample_runtimes(np.random.default_rng(seed))
    assert a.shape == (5,) and np.all(a > 0) and np.array_equal(a, b)


def test_sampled_runtime_mean_matches() -> None:
    stage = Stage("s", tasks=1, cores=1, runtime=100.0, runtime_cv=0.5)
    x = stage.sample_runtimes(np.random.default_rng(1), 20000)
    assert abs(x.mean() - 100.0) < 2.0 and abs(x.std() / x.mean() - 0.5) < 0.03

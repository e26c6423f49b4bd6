"""Resource specifications and the stages of the tasks a DataFlowKernel holds (issue 12)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parsl.dataflow.states import States
from parsl.executors.errors import InvalidResourceSpecification

from elastic.executors.parsl_plan import RESOURCE_KEYS, AppResources, app_resources, waiting_stages


def test_a_resource_specification_sets_stage_cores_and_runtime() -> None:
    assert app_resources({"stage": "mDiff", "cores": 4, "runtime": 12}, "diff") == AppResources(
        "mDiff", 4, 12.0
    )
    assert app_resources({}, "diff") == AppResources("diff", 1, None)
    assert app_resources({"cores": 2}, "diff") == AppResources("diff", 2, None)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"priority": 1}, r"\{'priority'\}.*accepts only cores, runtime, stage"),
        ({"stage": ""}, "stage must be a non-empty string, got ''"),
        ({"cores": 0}, "cores must be an integer >= 1, got 0"),
        ({"cores": 1.5}, "cores must be an integer >= 1, got 1.5"),
        ({"cores": True}, "cores must be an integer >= 1, got True"),
        ({"runtime": -1}, "runtime must be finite seconds >= 0 or None, got -1"),
        ({"runtime": math.inf}, "runtime must be finite seconds >= 0 or None, got inf"),
        ({"runtime": "1h"}, "runtime must be finite seconds >= 0 or None, got '1h'"),
    ],
)
def test_bad_resource_specifications_name_the_key_and_what_is_allowed(
    spec: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidResourceSpecification, match=match):
        app_resources(spec, "app")


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.integers(1, 64), max_size=4))
def test_any_key_outside_the_three_is_refused(spec: dict[str, int]) -> None:
    unknown = set(spec) - RESOURCE_KEYS
    if unknown:
        with pytest.raises(InvalidResourceSpecification) as info:
            app_resources(spec, "app")
        assert info.value.invalid_keys == unknown
    elif "stage" not in spec:
        assert app_resources(spec, "app").stage == "app"


class _Future:
    """What ``waiting_stages`` reads of a dependency: Parsl's AppFuture carries its task record."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.task_record = record


def _record(
    i: int, app: str, status: States = States.pending, deps: tuple[Any, ...] = (), **spec: Any
) -> dict[str, Any]:
    return {
        "id": i,
        "executor": "elastic",
        "func_name": app,
        "status": status,
        "resource_specification": spec,
        "depends": list(deps),
    }


def test_waiting_tasks_are_counted_by_stage_in_program_order_with_their_predecessors() -> None:
    prep = _record(0, "prepare", States.launched)
    procs = [_record(1 + i, "process", deps=(_Future(prep),), cores=2) for i in range(3)]
    merge = _record(4, "merge", deps=tuple(_Future(p) for p in procs), stage="mAdd")
    other = {**_record(5, "process"), "executor": "htex"}
    bad = _record(6, "odd", priority=3)  # refused at submit; counted here under its app name
    got = waiting_stages([merge, other, *procs, prep, bad], "elastic")
    assert [(w.stage, w.tasks, w.cores, w.after, w.first) for w in got] == [
        ("process", 3, 2, ("prepare",), 1),
        ("mAdd", 1, 1, ("process",), 4),
        ("odd", 1, 1, (), 6),
    ]


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(list(States))), max_size=40))
def test_every_pending_task_of_the_executor_is_counted_once(tasks: list[tuple[str, States]]) -> None:
    records = [_record(i, app, status) for i, (app, status) in enumerate(tasks)]
    got = waiting_stages(records, "elastic")
    assert sum(w.tasks for w in got) == sum(1 for _, s in tasks if s == States.pending)
    assert [w.first for w in got] == sorted(w.first for w in got)

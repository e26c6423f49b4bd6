"""WfCommons instances (WfFormat JSON) read as workflows of stages (``elastic.workflow_wfformat``).

The instances here are written in the shapes of the published ones (WfInstances: Pegasus' schema 1.4
``workflow.tasks`` with ``category``; schema 1.5's ``specification`` and ``execution`` joined by id,
with ``command.program``; Nextflow's process names), cut to a few tasks.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.cli import main
from elastic.errors import ConfigError
from elastic.workflow import load_workflow, resolve_workflow
from elastic.workflow_wfformat import MIN_STAGE_RUNTIME, is_wfformat, workflow_from_wfformat


def _v14(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "Run-20200413T154303Z-0", "schemaVersion": "1.4", "workflow": {"tasks": tasks}}


def _t14(name: str, category: str, runtime: float, parents: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "id": name[-9:],
        "category": category,
        "runtimeInSeconds": runtime,
        "parents": parents,
        **extra,
    }


def _v15(tasks: Sequence[tuple[str, str, float, list[str], int | None]]) -> dict[str, Any]:
    """Schema 1.5: (id, program, runtime, parent ids, cores) per task; names carry run-specific text."""
    spec = [
        {"name": f"{p}_{p}_sample{i}_{tid}", "id": tid, "parents": parents, "children": []}
        for i, (tid, p, _, parents, _) in enumerate(tasks)
    ]
    execution = []
    for tid, program, runtime, _, cores in tasks:
        run: dict[str, Any] = {
            "id": tid,
            "runtimeInSeconds": runtime,
            "command": {"program": program, "arguments": []},
        }
        if cores is not None:
            run["coreCount"] = cores
        execution.append(run)
    return {
        "name": "x",
        "schemaVersion": "1.5",
        "workflow": {
            "specification": {"tasks": spec, "files": []},
            "execution": {"makespanInSeconds": 1.0, "executedAt": "now", "tasks": execution},
        },
    }


def _read(data: dict[str, Any], name: str = "inst") -> Any:
    return workflow_from_wfformat(data, default_name=name, source=f"{name}.json")


def test_a_schema_1_4_instance_is_one_stage_per_category_with_its_tasks_mean_runtime_and_spread() -> None:
    wf = _read(
        _v14(
            [
                _t14("individuals_ID0000001", "individuals", 100.0, []),
                _t14("individuals_ID0000002", "individuals", 300.0, []),
                _t14("sifting_ID0000003", "sifting", 10.0, []),
                _t14(
                    "merge_ID0000004",
                    "individuals_merge",
                    50.0,
                    ["individuals_ID0000001", "individuals_ID0000002"],
                ),
                _t14("freq_ID0000005", "frequency", 20.0, ["merge_ID0000004", "sifting_ID0000003"], cores=4),
            ]
        ),
        name="1000genome-mini",
    )
    assert wf.name == "1000genome-mini"  # the file's stem, not the run's id
    got = {s.name: (s.tasks, s.cores, s.runtime, round(s.runtime_cv, 6), s.depends_on) for s in wf.stages}
    assert got == {
        "individuals": (2, 1, 200.0, 0.5, ()),
        "sifting": (1, 1, 10.0, 0.0, ()),
        "individuals_merge": (1, 1, 50.0, 0.0, ("individuals",)),
        "frequency": (1, 4, 20.0, 0.0, ("individuals_merge", "sifting")),
    }
    # parallel branches stay parallel: the two sources depend on nothing
    assert [s.name for s in wf.stages][:2] == ["individuals", "sifting"]


def test_a_schema_1_5_instance_joins_graph_and_runs_by_id_and_groups_by_the_program() -> None:
    wf = _read(
        _v15(
            [
                ("ID01", "fastqSplit", 40.0, [], None),
                ("ID02", "filterContams", 5.0, ["ID01"], 2),
                ("ID03", "filterContams", 7.0, ["ID01"], 1),
                ("ID04", "mapMerge", 0.0, ["ID02", "ID03"], None),
            ]
        )
    )
    got = {s.name: (s.tasks, s.cores, s.runtime, s.depends_on) for s in wf.stages}
    assert got == {
        "fastqSplit": (1, 1, 40.0, ()),
        "filterContams": (2, 2, 6.0, ("fastqSplit",)),  # the most cores any task used
        "mapMerge": (1, 1, MIN_STAGE_RUNTIME, ("filterContams",)),  # 0 s recorded
    }


def test_without_category_or_one_word_program_a_task_is_grouped_by_its_name_without_its_id() -> None:
    tasks = [
        {
            "name": "NFCORE.RNASEQ.FASTQC",
            "id": "NFCORE.RNASEQ.FASTQC_1",
            "runtimeInSeconds": 30,
            "parents": [],
            "command": {"program": "fastqc \\\n --quiet\n"},
        },
        {
            "name": "NFCORE.RNASEQ.FASTQC",
            "id": "NFCORE.RNASEQ.FASTQC_2",
            "runtimeInSeconds": 50,
            "parents": [],
            "command": {"program": "fastqc \\\n --quiet\n"},
        },
        {
            "name": "mProject_00012",
            "id": "NFCORE.RNASEQ.X_3",
            "runtimeInSeconds": 5,
            "parents": ["NFCORE.RNASEQ.FASTQC_1"],
        },
    ]
    wf = _read({"schemaVersion": "1.4", "workflow": {"tasks": tasks}})
    assert [(s.name, s.tasks) for s in wf.stages] == [("NFCORE.RNASEQ.FASTQC", 2), ("mProject", 1)]


def test_a_category_whose_tasks_wait_for_one_another_is_cut_by_depth() -> None:
    # a merge tree: four maps, two merges of two, a merge of those: "merge" depends on itself
    maps = [_t14(f"map_ID{i}", "map", 60.0, []) for i in range(4)]
    merges = [
        _t14("merge_IDa", "merge", 10.0, ["map_ID0", "map_ID1"]),
        _t14("merge_IDb", "merge", 10.0, ["map_ID2", "map_ID3"]),
        _t14("merge_IDc", "merge", 30.0, ["merge_IDa", "merge_IDb"]),
    ]
    wf = _read(_v14(maps + merges))
    assert [(s.name, s.tasks, s.runtime, s.depends_on) for s in wf.stages] == [
        ("map", 4, 60.0, ()),
        ("merge#1", 2, 10.0, ("map",)),
        ("merge#2", 1, 30.0, ("merge#1",)),
    ]


def test_categories_that_depend_on_each_other_both_ways_are_cut_into_a_dag() -> None:
    # a -> b -> a -> b (an alternation of two programs, as an iterative workflow records it)
    tasks = [
        _t14("a_ID1", "a", 1.0, []),
        _t14("b_ID2", "b", 2.0, ["a_ID1"]),
        _t14("a_ID3", "a", 3.0, ["b_ID2"]),
        _t14("b_ID4", "b", 4.0, ["a_ID3"]),
        _t14("c_ID5", "c", 5.0, []),
    ]
    wf = _read(_v14(tasks))
    names = [s.name for s in wf.stages]
    assert set(names) == {"a#1", "b#1", "a#2", "b#2", "c"}  # c needs no cut
    assert names.index("a#1") < names.index("b#1") < names.index("a#2") < names.index("b#2")
    assert {s.name: s.runtime for s in wf.stages} == {
        "a#1": 1.0,
        "b#1": 2.0,
        "a#2": 3.0,
        "b#2": 4.0,
        "c": 5.0,
    }


@st.composite
def _instances(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random task DAGs: each task's parents among the tasks before it, categories drawn from a few."""
    n = draw(st.integers(1, 40))
    cats = draw(st.lists(st.sampled_from("abcdef"), min_size=n, max_size=n))
    tasks = []
    for i in range(n):
        parents = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        runtime = draw(st.floats(0.0, 1e4))
        tasks.append(
            _t14(f"{cats[i]}_ID{i:04d}", cats[i], runtime, [f"{cats[p]}_ID{p:04d}" for p in parents])
        )
    return tasks


@settings(max_examples=150, deadline=None)
@given(tasks=_instances())
def test_any_task_dag_reads_as_a_valid_workflow_keeping_every_task_and_every_dependency(
    tasks: list[dict[str, Any]],
) -> None:
    wf = _read(_v14(tasks))  # the Workflow checks that every stage depends only on earlier ones
    assert sum(s.tasks for s in wf.stages) == len(tasks)
    category = {t["name"]: t["category"] for t in tasks}
    per_category: dict[str, int] = {}
    for s in wf.stages:
        per_category[s.name.split("#")[0]] = per_category.get(s.name.split("#")[0], 0) + s.tasks
        assert s.runtime >= MIN_STAGE_RUNTIME and math.isfinite(s.runtime_cv)
    assert per_category == {c: sum(1 for t in tasks if t["category"] == c) for c in set(category.values())}
    # every edge between categories is an edge between some of their stages (or a cut category's own)
    edges = {(s.name.split("#")[0], d.split("#")[0]) for s in wf.stages for d in s.depends_on}
    for t in tasks:
        for p in t["parents"]:
            assert (t["category"], category[p]) in edges


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([], "non-empty task list"),
        (
            [{"id": "x", "runtimeInSeconds": 1, "parents": []}],
            "task 0 must be an object with a non-empty 'name'",
        ),
        ([_t14("a_ID1", "a", 1.0, ["nope"])], "parent 'nope', which is no task"),
        ([_t14("a_ID1", "a", 1.0, []), _t14("a_ID1", "a", 2.0, [])], "appears twice"),
        ([{"name": "a", "parents": []}], "runtime must be a number of seconds, got None"),
        ([{"name": "a", "runtimeInSeconds": "5", "parents": []}], "runtime must be a number"),
        ([_t14("a_ID1", "a", 1.0, [], cores=0)], "cores must be a number > 0"),
        ([_t14("a_ID1", "a", 1.0, ["b_ID2"]), _t14("b_ID2", "b", 1.0, ["a_ID1"])], "parents form a cycle"),
        ([{"name": "a", "runtime": 1, "parents": "b"}], "parents must be a list of task names"),
        ([_t14("a_ID1", "a", -5.0, [])], "runtime must be >= 0 seconds, got -5.0"),
    ],
)
def test_a_broken_instance_is_refused_naming_the_file_and_the_task(tasks: list[Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        _read(_v14(tasks), name="broken")
    assert str(info.value).startswith("broken.json")


def test_an_instance_file_loads_by_path_and_runs_through_elastic_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _v15(
        [("ID01", "split", 600.0, [], None)]
        + [(f"ID1{i}", "work", 1200.0 + 60 * i, ["ID01"], None) for i in range(6)]
        + [("ID02", "merge", 300.0, [f"ID1{i}" for i in range(6)], None)]
    )
    path = tmp_path / "mini-instance.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert is_wfformat(data) and not is_wfformat({"stages": [], "workflow": {}})
    wf = resolve_workflow(str(path))
    assert wf == load_workflow(path) and [s.name for s in wf.stages] == ["split", "work", "merge"]
    assert main(["compare", "--workflow", str(path), "--runs", "2", "--processors", "32", "--seed", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "mini-instance: 2 runs per strategy" in out and "asa: gap closed" in out


def test_a_schema_1_5_task_without_a_recorded_run_is_refused_naming_it() -> None:
    data = _v15([("ID01", "split", 1.0, [], None), ("ID02", "work", 2.0, ["ID01"], None)])
    data["workflow"]["execution"]["tasks"].pop()
    with pytest.raises(ConfigError, match=r"task 'ID02' has no recorded run in workflow.execution.tasks"):
        _read(data)


def test_runtimes_near_the_float_limit_are_refused_as_a_stage_not_an_overflow() -> None:
    # their mean is finite (no overflow), and beyond a year: refused, naming the stage
    tasks = [_t14("a_ID1", "a", 1e300, []), _t14("a_ID2", "a", 1e308, []), _t14("a_ID3", "a", 1e308, [])]
    with pytest.raises(ConfigError, match=r"stage 'a': runtime [0-9.e+]+ s is more than a year"):
        _read(_v14(tasks))


def test_files_that_are_no_workflow_say_what_a_workflow_file_is(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory; give a workflow file"):
        load_workflow(tmp_path)
    other = tmp_path / "other.json"
    other.write_text('{"foo": 1}', encoding="utf-8")
    with pytest.raises(ConfigError, match="allowed: name, stages \\(or a WfCommons instance"):
        load_workflow(other)
    cut = tmp_path / "cut.json"
    cut.write_text('{"name": "x", "stages": [{"name": "a', encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"cut.json:1: invalid JSON: Unterminated string starting at \(column \d+\)"
    ):
        load_workflow(cut)


def test_many_categories_waiting_for_each_other_are_all_cut_by_depth_in_a_bounded_number_of_passes() -> None:
    # twelve pairs of programs that alternate (a -> b -> a -> b): each pass finds one pair's cycle,
    # so past a few passes every category is cut by depth at once, a lone one ("z") too
    tasks = [_t14("z_ID0", "z", 1.0, [])]
    for j in range(12):
        names = [f"a{j}_ID{j}0", f"b{j}_ID{j}1", f"a{j}_ID{j}2", f"b{j}_ID{j}3"]
        for i, name in enumerate(names):
            tasks.append(_t14(name, name.split("_")[0], 1.0 + i, names[i - 1 : i] if i else []))
    wf = _read(_v14(tasks))
    assert sum(s.tasks for s in wf.stages) == len(tasks)
    assert all("#" in s.name for s in wf.stages)
    assert {s.name for s in wf.stages} >= {"a0#1", "b0#1", "a0#2", "b0#2", "z#1"}

"""The published workflow shapes: DAGs that build, scale, and complete under every strategy and shape."""

from __future__ import annotations

import pytest

from elastic.errors import ConfigError, UnknownNameError
from elastic.experiments import simulate_runs
from elastic.report.scaling import scale_workflow
from elastic.workflow import (
    BUILTIN_WORKFLOWS,
    WORKFLOW_GROUPS,
    builtin_workflow,
    expand_workflow_names,
    resolve_workflow,
)
from elastic.workflow_suite import PUBLISHED_SHAPES

PUBLISHED = sorted(PUBLISHED_SHAPES)


def _ancestors(wf, name):
    out, todo = set(), list(wf.stage(name).depends_on or ())
    while todo:
        dep = todo.pop()
        if dep not in out:
            out.add(dep)
            todo.extend(wf.stage(dep).depends_on or ())
    return out


@pytest.mark.parametrize("name", PUBLISHED)
def test_each_shape_is_a_builtin_28_cores_wide(name: str) -> None:
    wf = builtin_workflow(name)
    assert wf.max_width == 28
    assert all(s.runtime is not None and s.runtime >= 60 for s in wf.stages)
    # 56 and 112 cores: the paper's other scales work for every shape, 4-core tasks included
    for peak in (56, 112):
        assert scale_workflow(wf, peak).max_width == peak


def test_the_suite_has_the_shapes_the_paper_lacks() -> None:
    wfs = [builtin_workflow(n) for n in PUBLISHED]

    # parallel branches: two stages of one workflow, neither an ancestor of the other, both with successors
    def has_parallel(wf) -> bool:
        names = wf.names
        return any(
            a != b and a not in _ancestors(wf, b) and b not in _ancestors(wf, a) for a in names for b in names
        )

    assert sum(has_parallel(wf) for wf in wfs) >= 4
    assert any(len(wf.stages) >= 14 for wf in wfs)  # a long chain
    assert sum(any(s.cores > 1 for s in wf.stages) for wf in wfs) >= 3  # multi-core tasks
    # and the paper's three have none of these
    assert not any(has_parallel(builtin_workflow(n)) for n in WORKFLOW_GROUPS["paper"])


def test_dependencies_follow_the_published_structure() -> None:
    genome = builtin_workflow("1000genome")
    assert genome.stage("sifting").depends_on == ()
    assert genome.stage("individuals").depends_on == ()
    assert set(genome.stage("frequency").depends_on) == {"individuals_merge", "sifting"}
    cyber = builtin_workflow("cybershake")
    assert "ZipSeis" not in _ancestors(cyber, "ZipPSA")
    assert builtin_workflow("srasearch").stage("bowtie2").cores == 4


def test_groups_expand_in_order_without_repeats() -> None:
    assert expand_workflow_names("montage, paper") == ["montage", "blast", "statistics"]
    assert expand_workflow_names("suite") == [*WORKFLOW_GROUPS["paper"], *PUBLISHED_SHAPES]
    assert expand_workflow_names(" , ") == []
    assert set(WORKFLOW_GROUPS["suite"]) <= set(BUILTIN_WORKFLOWS)
    with pytest.raises(UnknownNameError, match="cybershak"):
        resolve_workflow(expand_workflow_names("cybershak")[0])


def test_a_4_core_shape_refuses_a_peak_its_tasks_do_not_divide() -> None:
    with pytest.raises(ConfigError, match="multiple of 4"):
        scale_workflow(builtin_workflow("bwa"), 30)


@pytest.mark.parametrize(
    "strategy", ["bigjob", "bigjob-split", "perstage", "perstage-split", "asa", "asa-split"]
)
@pytest.mark.parametrize("name", ["1000genome", "srasearch"])
def test_dag_shapes_with_4_core_tasks_complete_under_every_strategy(name: str, strategy: str) -> None:
    (result,) = simulate_runs(builtin_workflow(name), strategy, runs=1, seed=1)
    assert result.status == "completed", f"{name} under {strategy}: {result.status} {result.detail}"

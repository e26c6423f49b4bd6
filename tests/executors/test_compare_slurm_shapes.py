"""The Slurm comparisons give the baselines ``elastic compare``'s split and fine shapes, by the same rule.

``benchmarks/compare_parsl_slurm.py`` and ``benchmarks/compare_prefect_slurm.py`` name their Elastic
configurations ``elastic-<row label>``: the label is read by :func:`elastic.experiments.parse_strategy`, and a
``-split`` one gets :func:`elastic.experiments.split_cores` of the workflow as ``job_cores``, a ``-fine`` one
1. Checked here without Slurm; the short runs of ``test_compare_parsl_slurm.py`` /
``test_compare_prefect_slurm.py`` check that the split runs submit more than one batch job.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.slurm_queue import elastic_strategy, stage_times
from elastic.experiments import BASELINES, parse_strategy, shaped_strategies
from elastic.strategies import STRATEGY_NAMES

ROOT = Path(__file__).resolve().parents[2]


def test_a_stage_waits_until_the_cores_for_all_its_tasks_are_there() -> None:
    # jobs of one task: the stage's first job started 2 s after the flow call, its last after 9 s; the
    # next stage's after 3 s and 4 s past the first one's last end (12 s). Its first start understated it.
    results = [[(2.0, 10.0, "1"), (9.0, 12.0, "2")], [(15.0, 20.0, "3"), (16.0, 18.0, "4")]]
    end, waits, used = stage_times(results, 0.0)
    assert (end, waits) == (20.0, (9.0, 4.0))
    assert used == pytest.approx((8 + 3 + 5 + 2) / 3600)


pytest.importorskip("parsl")

from benchmarks.compare_parsl_slurm import CONFIGS as PARSL_CONFIGS  # noqa: E402
from benchmarks.compare_parsl_slurm import htex_blocks  # noqa: E402

stages_st = st.lists(
    st.tuples(st.sampled_from("abcdef"), st.integers(1, 64), st.floats(1, 100)), min_size=1, max_size=6
)


def _elastic(configs: tuple[str, ...]) -> list[str]:
    return [c.removeprefix("elastic-") for c in configs if c.startswith("elastic-")]


def _prefect_configs() -> tuple[str, ...]:
    """The Prefect script's ``CONFIGS``, read from its source: importing it gives this process a private
    ``PREFECT_HOME``, which the other Prefect tests of the session must not see."""
    tree = ast.parse((ROOT / "benchmarks" / "compare_prefect_slurm.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "CONFIGS":
            configs = ast.literal_eval(node.value)
            assert isinstance(configs, tuple)
            return configs
    raise AssertionError("compare_prefect_slurm.py has no CONFIGS")


@pytest.mark.parametrize("front", ["parsl", "prefect"])
def test_every_baseline_is_there_in_every_shape_as_elastic_compare_has_them(front: str) -> None:
    configs = PARSL_CONFIGS if front == "parsl" else _prefect_configs()
    labels = _elastic(configs)
    expected = shaped_strategies([*BASELINES, "asa"], ["plain", "split", "fine"])
    assert "asa-fine" in labels  # asa in jobs of one task, as the README advises on a busy queue
    # asa under the split baselines' cap as well (Parsl): on nodes its own pieces stay whole nodes
    assert sorted(set(labels) - {"asa-split", "asa-fine"}) == sorted(expected)


@given(stages_st)
def test_a_split_configuration_gets_half_the_widest_stage_a_fine_one_1_and_a_plain_one_none(
    stages: list[tuple[str, int, float]],
) -> None:
    widest = max(t for _, t, _ in stages)
    named = [(f"{n}{i}", t, s) for i, (n, t, s) in enumerate(stages)]  # stage names are unique
    for label in _elastic(PARSL_CONFIGS):
        strategy, job_cores = elastic_strategy(f"elastic-{label}", named)
        assert strategy in STRATEGY_NAMES
        assert strategy == parse_strategy(label)[0]
        if label.endswith("-split"):
            assert job_cores == math.ceil(widest / 2)
        elif label.endswith("-fine"):
            assert job_cores == 1
        else:
            assert job_cores is None


@given(st.integers(1, 64), st.integers(1, 8))
def test_htex_split_blocks_hold_the_big_jobs_nodes_in_two_blocks_at_most(widest: int, per_node: int) -> None:
    nodes, one, one_max = htex_blocks("htex-bigjob", widest, per_node)
    assert (one, one_max) == (1, 1) and nodes * per_node >= widest > (nodes - 1) * per_node
    per_block, init, most = htex_blocks("htex-bigjob-split", widest, per_node)
    assert init == most == (2 if nodes > 1 else 1)  # two blocks, unless one node is the whole Big-Job
    assert nodes <= per_block * init <= nodes + 1  # the Big-Job's nodes, one more when they are odd
    assert per_block == math.ceil(nodes / 2)

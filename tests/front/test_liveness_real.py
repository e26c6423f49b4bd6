"""The random liveness scenarios, short version: through the real front door on the local Slurm cluster.

A few scenarios of ``tests/front/real_scenarios.py`` (small DAGs of sleeping tasks, any strategy, submitted
by user code in each of the three ways, undeclared or declared, with or without a disagreeing remembered
plan) run through :class:`elastic.Elastic` with real agents in real Slurm jobs; every task ends, nothing is
left in ``squeue``, the store says ``completed``. ``benchmarks/bench_liveness.py --slurm N`` runs more.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from elastic.backends.slurm import SlurmBackend
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.front.real_scenarios import random_real_scenario, run_real

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SEED = 20261129


@pytest.fixture
def cluster(slurm_cluster: LocalSlurmCluster) -> Iterator[LocalSlurmCluster]:
    slurm_cluster.cancel_all()
    yield slurm_cluster
    slurm_cluster.cancel_all()


def test_the_draws_cover_each_front_and_fit_a_node() -> None:
    scenarios = [random_real_scenario(np.random.default_rng([SEED, i])) for i in range(200)]
    assert {s.front for s in scenarios} == {"futures", "announce", "loop"}
    assert {s.remembered for s in scenarios if s.history} == {"same", "other", "first"}
    assert any(s.declares for s in scenarios) and not all(s.declares for s in scenarios)
    assert all(st.cores <= 4 for s in scenarios for st in s.stages)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("index", range(3))
def test_random_scenarios_on_slurm_never_stall_nor_leave_jobs(
    index: int, cluster: LocalSlurmCluster, tmp_path: Path
) -> None:
    scenario = random_real_scenario(np.random.default_rng([SEED, index]))
    backend = SlurmBackend(partition="debug", env=cluster.env, workdir=tmp_path, command_timeout=20)
    out = run_real(scenario, backend, f"sqlite:///{tmp_path / 'store.db'}", leftovers=cluster.queue)
    assert out.violations == [], (scenario, out)

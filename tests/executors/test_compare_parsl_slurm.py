"""The short version of ``benchmarks/compare_parsl_slurm.py``: every configuration runs and is measured.

The script starts its own local Slurm cluster, keeps it busy with background jobs and runs a small staged
Parsl workflow under HTEX + SlurmProvider (sized for the widest stage; Parsl's own scaling) and under
ElasticExecutor. Speed goals are the benchmark's business; here the measurements must be consistent.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.slurm_cluster import LocalSlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_the_comparison_runs_every_configuration_and_accounts_for_every_core_hour(tmp_path: Path) -> None:
    if LocalSlurmCluster.missing_binaries():
        pytest.skip(f"Slurm binaries missing: {LocalSlurmCluster.missing_binaries()}")
    out = tmp_path / "runs.csv"
    # Elastic under Per-Stage and ASA (its Big-Job on Slurm: tests/executors/test_parsl_executor_slurm.py)
    configs = ["htex-bigjob", "htex-auto", "elastic-perstage", "elastic-asa"]
    script = str(ROOT / "benchmarks" / "compare_parsl_slurm.py")
    args = ["--reps", "1", "--stages", "a:2:2,b:5:2", "--load", "0.3", "--warmup", "2", "--csv", str(out)]
    proc = subprocess.run(
        [sys.executable, script, *args, "--configs", ",".join(configs)],
        capture_output=True,
        text=True,
        timeout=880,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PriorityType = priority/basic" in proc.stdout  # the priority setting is stated
    rows = {r["config"]: r for r in csv.DictReader(out.open())}
    assert sorted(rows) == sorted(configs)
    used = (2 * 2 + 5 * 2) / 3600  # every task's own core-seconds
    for config, r in rows.items():
        assert float(r["core_h_used"]) == pytest.approx(used, rel=0.2), config
        # every task ran in a batch job that was charged; Slurm's records are whole seconds, so the
        # charge may fall short of the real holding time by up to cores x 1 s per job
        assert int(r["tasks_outside"]) == 0, f"{config}: a task ran in a batch job that was not charged"
        charged, resolution = float(r["core_h_charged"]), float(r["core_h_resolution"])
        assert charged >= float(r["core_h_used"]) - resolution, f"{config}: charged less than used"
        assert 0 < resolution <= int(r["jobs"]) * 16 / 3600, config  # at most the 16 cores of the cluster
        assert float(r["makespan_s"]) >= 4.0 and float(r["wait_a_s"]) >= 0 and float(r["wait_b_s"]) >= -1
    assert int(rows["htex-bigjob"]["jobs"]) == 1  # one block for the widest stage
    big = rows["htex-bigjob"]  # its block idles while the narrow stage runs, beyond what rounding explains
    assert float(big["core_h_idle"]) > float(big["core_h_resolution"])
    assert int(rows["elastic-perstage"]["jobs"]) >= 2  # one allocation per stage at least

"""What the short versions of the two Slurm comparisons share: run the script, check its accounting.

``benchmarks/compare_parsl_slurm.py`` and ``benchmarks/compare_prefect_slurm.py`` write one CSV row per
run; whatever the front-end, every task's core-seconds must be counted and charged to some batch job.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.fixtures.slurm_cluster import LocalSlurmCluster

__all__ = ["check_accounting", "run_comparison"]

ROOT = Path(__file__).resolve().parents[2]

CLUSTER_CORES = 16
"""Cores of the local test cluster (``tests/fixtures/slurm_cluster.py``)."""


def run_comparison(
    script: str, configs: list[str], stages: str, tmp_path: Path, timeout: float, extra: Sequence[str] = ()
) -> tuple[str, dict[str, dict[str, str]]]:
    """Run ``benchmarks/<script>`` once per configuration (one repetition, a light background queue).

    ``extra`` are more arguments for the script. Returns its standard output and its CSV rows by
    configuration; skips without Slurm binaries.
    """
    if LocalSlurmCluster.missing_binaries():
        pytest.skip(f"Slurm binaries missing: {LocalSlurmCluster.missing_binaries()}")
    out = tmp_path / "runs.csv"
    args = ["--reps", "1", "--stages", stages, "--load", "0.3", "--warmup", "2", "--csv", str(out)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args, "--configs", ",".join(configs), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["config"]: r for r in csv.DictReader(out.open())}
    assert sorted(rows) == sorted(configs)
    return proc.stdout, rows


def check_accounting(rows: dict[str, dict[str, str]], used_core_seconds: float) -> None:
    """Assert every run counted its tasks' core-seconds and charged every one of them to a batch job."""
    used = used_core_seconds / 3600
    for config, r in rows.items():
        # each task sleeps its seconds and reports when it started and ended: never less than the
        # nominal (a task missing would be), and over it by the machine's scheduling delays only, which
        # on this 2-core machine under a full test run once passed 20 % (the widest stage of the tests'
        # two-stage flows counted twice would be 1.67x and more); the file has 4 decimals of core-hours
        assert used - 0.5e-4 <= float(r["core_h_used"]) < used * 1.6, config
        # every task ran in a batch job that was charged; Slurm's records are whole seconds, so the
        # charge may fall short of the real holding time by up to cores x 1 s per job
        assert int(r["tasks_outside"]) == 0, f"{config}: a task ran in a batch job that was not charged"
        charged, resolution = float(r["core_h_charged"]), float(r["core_h_resolution"])
        assert charged >= float(r["core_h_used"]) - resolution, f"{config}: charged less than used"
        assert 0 < resolution <= int(r["jobs"]) * CLUSTER_CORES / 3600, config
        assert float(r["makespan_s"]) >= 4.0 and float(r["wait_a_s"]) >= 0 and float(r["wait_b_s"]) >= -1

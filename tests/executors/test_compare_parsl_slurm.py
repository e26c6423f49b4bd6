"""The short version of ``benchmarks/compare_parsl_slurm.py``: every configuration runs and is measured.

The script starts its own local Slurm cluster, keeps it busy with background jobs and runs a small staged
Parsl workflow under HTEX + SlurmProvider (sized for the widest stage, in one block or two; Parsl's own
scaling) and under ElasticExecutor (plain and split baselines). Speed goals are the benchmark's business;
here the measurements must be consistent.

``htex-auto`` (HTEX with Parsl's own scaling) runs only in the benchmark: its accounting is checked by the
same code as ``htex-bigjob``'s, and on a loaded machine its blocks can be submitted and cancelled over and
over (seen here: more than 80 one-node blocks in 14 minutes, none registered), which made this test's
time unbounded up to its timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.executors.slurm_comparison import check_accounting, run_comparison

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.mark.timeout(900)
def test_the_comparison_runs_every_configuration_and_accounts_for_every_core_hour(tmp_path: Path) -> None:
    # Elastic's plain configurations differ only in the strategy's name, and every strategy runs on Slurm
    # in tests/executors/test_parsl_executor_slurm.py: Per-Stage here, and both baselines split (they differ
    # in job_cores too); asa and htex-auto (see the module's docstring): the benchmark itself
    configs = ["htex-bigjob", "htex-bigjob-split", "elastic-perstage"]
    configs += ["elastic-bigjob-split", "elastic-perstage-split"]
    stdout, rows = run_comparison("compare_parsl_slurm.py", configs, "a:2:2,b:5:2", tmp_path, timeout=880)
    assert "PriorityType = priority/basic" in stdout  # the priority setting is stated
    check_accounting(rows, 2 * 2 + 5 * 2)  # every task's own core-seconds
    assert int(rows["htex-bigjob"]["jobs"]) == 1  # one block for the widest stage: 2 nodes of 4 cores
    assert int(rows["htex-bigjob"]["widest_job_cores"]) == 8
    # split: the same 2 nodes as two one-node blocks (both asked at once; the second may still be pending
    # when a short run ends)
    split = rows["htex-bigjob-split"]
    assert int(split["widest_job_cores"]) == 4 and 1 <= int(split["jobs"]) <= 2
    big = rows["htex-bigjob"]  # its block idles while the narrow stage runs, beyond what rounding explains
    assert float(big["core_h_idle"]) > float(big["core_h_resolution"])
    assert int(rows["elastic-perstage"]["jobs"]) >= 2  # one allocation per stage at least
    for config in ("elastic-bigjob-split", "elastic-perstage-split"):  # no job wider than ceil(5 / 2) cores
        assert 1 <= int(rows[config]["widest_job_cores"]) <= 3, config

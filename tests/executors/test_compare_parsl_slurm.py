"""The short version of ``benchmarks/compare_parsl_slurm.py``: every configuration runs and is measured.

The script starts its own local Slurm cluster, keeps it busy with background jobs and runs a small staged
Parsl workflow under HTEX + SlurmProvider (sized for the widest stage; Parsl's own scaling) and under
ElasticExecutor. Speed goals are the benchmark's business; here the measurements must be consistent.

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
    # Elastic under Per-Stage: its configurations differ only in the strategy's name, and every strategy
    # runs on Slurm in tests/executors/test_parsl_executor_slurm.py; all of them, and htex-auto (see the
    # module's docstring): the benchmark itself
    configs = ["htex-bigjob", "elastic-perstage"]
    stdout, rows = run_comparison("compare_parsl_slurm.py", configs, "a:2:2,b:5:2", tmp_path, timeout=880)
    assert "PriorityType = priority/basic" in stdout  # the priority setting is stated
    check_accounting(rows, 2 * 2 + 5 * 2)  # every task's own core-seconds
    assert int(rows["htex-bigjob"]["jobs"]) == 1  # one block for the widest stage
    big = rows["htex-bigjob"]  # its block idles while the narrow stage runs, beyond what rounding explains
    assert float(big["core_h_idle"]) > float(big["core_h_resolution"])
    assert int(rows["elastic-perstage"]["jobs"]) >= 2  # one allocation per stage at least

"""The short version of ``benchmarks/compare_prefect_slurm.py``: every configuration runs and is measured.

The script starts its own local Slurm cluster and Prefect server, keeps the queue busy with background jobs
and runs a small staged Prefect flow under DaskTaskRunner + dask-jobqueue (adaptive; fixed at the widest
stage) and under ElasticTaskRunner (plain and split baselines). Speed goals are the benchmark's business;
here the measurements must be consistent.

``dask-adapt`` (dask-jobqueue under Dask's ``Adaptive``) runs only in the benchmark: it differs from
``dask-fixed`` only in the cluster's arguments, its accounting is checked by the same code, and it was a
third of this test's time (its workers come and go, each a batch job starting Python).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.executors.slurm_comparison import check_accounting, run_comparison
from tests.fixtures.prefect_server import PrefectServer

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.mark.timeout(1200)
def test_the_comparison_runs_every_configuration_and_accounts_for_every_core_hour(
    tmp_path: Path, prefect_server: PrefectServer
) -> None:
    pytest.importorskip("prefect_dask")
    pytest.importorskip("dask_jobqueue")
    # Elastic's plain configurations differ only in the strategy's name, and every strategy runs on Slurm
    # in tests/executors/test_prefect_slurm.py: Per-Stage here, and both baselines split (they differ in
    # job_cores too); asa and dask-adapt (see the module's docstring): the benchmark itself
    configs = ["dask-fixed", "elastic-perstage", "elastic-bigjob-split", "elastic-perstage-split"]
    # the session's Prefect server, not a private one (starting one costs 20 s of CPU here)
    extra = ["--prefect-api-url", prefect_server.api_url]
    _, rows = run_comparison("compare_prefect_slurm.py", configs, "a:2:2,b:4:2", tmp_path, 1180, extra)
    check_accounting(rows, 2 * 2 + 4 * 2)  # every task's own core-seconds
    for config, r in rows.items():
        assert 0 <= int(r["released"]) <= int(r["jobs"]), config
    # scale(4): four single-core worker jobs, counted when they started (one may not before the flow ends)
    assert 1 <= int(rows["dask-fixed"]["jobs"]) <= 4
    assert int(rows["dask-fixed"]["released"]) == 0  # a fixed cluster keeps its workers to the end
    assert int(rows["elastic-perstage"]["jobs"]) >= 2  # one allocation per stage at least
    assert int(rows["dask-fixed"]["widest_job_cores"]) == 1  # one single-core worker per batch job
    for config in ("elastic-bigjob-split", "elastic-perstage-split"):  # no job wider than ceil(4 / 2) cores
        assert 1 <= int(rows[config]["widest_job_cores"]) <= 2, config

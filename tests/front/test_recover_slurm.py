"""Local Slurm cluster: a killed driver's job is cancelled by the next run, a job that took its id is not.

``elastic store recover`` does the same without starting a run, and ``elastic doctor`` names the run.

The next front door on the same store cancels what a driver killed by SIGKILL left queued or running
(:func:`~elastic.front.recovery.recover_abandoned`), but only jobs that are still the run's own: the name
run control gave the allocation and the submit time recorded with it. A job id recorded by the dead run
that names another job by then (another cluster sharing the store, ids reused) is left alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.store import Store
from tests.fixtures.processes import default_sighup
from tests.fixtures.slurm_cluster import LocalSlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

_DRIVER = textwrap.dedent(
    """
    import sys, time
    from elastic import Elastic

    def forever():
        time.sleep(600)

    with Elastic("slurm", "perstage", workflow="killed", store=sys.argv[1], poll_interval=1.0) as el:
        f = el.submit(forever)
        while not el.view().allocations:
            time.sleep(0.2)
        time.sleep(1.0)  # the submit is recorded in the store as its event is
        print("SUBMITTED", flush=True)
        f.result()
    """
)


def _squeue(cluster: LocalSlurmCluster) -> dict[str, str]:
    out = cluster.run(["squeue", "-h", "-o", "%i|%j"], timeout=10).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line)


@pytest.fixture
def on_the_cluster(slurm_cluster: LocalSlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point Slurm's commands at the test cluster, empty it, work in ``tmp_path``; return the store's URL."""
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(tmp_path)
    slurm_cluster.cancel_all()
    return f"sqlite:///{tmp_path / 'store.db'}"


def _kill_a_driver_after_its_submit(tmp_path: Path, url: str) -> None:
    """Start a driver on the store ``url``, SIGKILL it once its batch job is submitted and recorded."""
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    with default_sighup():
        proc = subprocess.Popen(
            [sys.executable, str(script), url], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "SUBMITTED"
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.timeout(240)
def test_the_next_run_cancels_the_killed_runs_job_and_leaves_a_foreign_one(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path, on_the_cluster: str
) -> None:
    url = on_the_cluster
    _kill_a_driver_after_its_submit(tmp_path, url)
    foreign = slurm_cluster.run(
        ["sbatch", "--parsable", "-J", "important", "-t", "10", "--wrap", "sleep 600"], timeout=30
    ).stdout.strip()
    with Store(url) as store:
        (params,) = store.runs(workflow="killed")["params"]
        (own,) = params["jobs"]
        assert own in _squeue(slurm_cluster), "the killed run's job outlived its driver"
        # the dead run also recorded the foreign job's id, as if ids had been reused (another cluster)
        meta = {**params["job_meta"], foreign: ["a9", params["job_meta"][own][1]]}
        store.add_run_params(
            int(store.runs(workflow="killed")["run_id"].iloc[0]), {"jobs": [own, foreign], "job_meta": meta}
        )
    try:
        with Elastic("slurm", "perstage", workflow="next", store=url, poll_interval=1.0) as el:
            assert el.submit(json.dumps, [1]).result(timeout=180) == "[1]"
        deadline = time.monotonic() + 20
        while own in _squeue(slurm_cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        queued = _squeue(slurm_cluster)
        assert own not in queued, "the killed run's job was not cancelled"
        assert queued.get(foreign) == "important", "a job that is not the run's own was cancelled"
        with Store(url) as store:
            runs = store.runs()
        assert dict(zip(runs["workflow"], runs["status"], strict=True)) == {
            "killed": "interrupted",
            "next": "completed",
        }
    finally:
        slurm_cluster.cancel_all()


def _elastic(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elastic", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


@pytest.mark.timeout(240)
def test_store_recover_cancels_a_killed_runs_job_without_starting_a_run(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path, on_the_cluster: str
) -> None:
    url = on_the_cluster
    try:
        # the cluster full: the run's job stays queued (a started agent whose driver is gone leaves, and
        # its job ends by itself; under CI load that raced the recovery)
        slurm_cluster.run(
            [
                "sbatch",
                "--parsable",
                "-J",
                "blocker",
                "-n",
                str(slurm_cluster.total_cores),
                "--wrap",
                "sleep 600",
            ]
        )
        _kill_a_driver_after_its_submit(tmp_path, url)
        with Store(url) as store:
            ((run_id, params),) = zip(store.runs()["run_id"], store.runs()["params"], strict=True)
        (own,) = params["jobs"]
        assert own in _squeue(slurm_cluster)
        doctor = _elastic("doctor", "--store", url)
        assert f"warn  store: {url} (1 runs); run(s) {run_id} were left running" in doctor.stdout
        assert "elastic store recover" in doctor.stdout
        dry = _elastic("store", "recover", "--store", url, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"run {run_id} of 'killed' (slurm, driver pid" in dry.stdout
        assert f"would cancel 1 batch job(s) ({own})" in dry.stdout
        assert own in _squeue(slurm_cluster), "a dry run cancelled the job"
        done = _elastic("store", "recover", "--store", url)
        assert done.returncode == 0, done.stderr
        assert f"cancelled 1 batch job(s) ({own}); marked interrupted" in done.stdout
        deadline = time.monotonic() + 20
        while own in _squeue(slurm_cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert own not in _squeue(slurm_cluster)
        with Store(url) as store:
            assert list(store.runs()["status"]) == ["interrupted"]
        again = _elastic("store", "recover", "--store", url)
        assert again.returncode == 0 and "no run of this host was left running" in again.stdout
    finally:
        slurm_cluster.cancel_all()

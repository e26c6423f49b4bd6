"""A signal to the driver's process group while ``sbatch`` is in flight leaves no job behind.

Found on the local Slurm cluster with a slow controller (an ``sbatch`` that submits, then takes seconds to
say the job id): SIGTERM to the process group killed ``sbatch`` too, after it had submitted and before it
printed the id; the run ended ``interrupted`` and the job stayed queued, recorded nowhere. Slurm commands
now run in their own session, so the submit completes, the job is known, and the run's end cancels it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

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

    with Elastic("slurm", "perstage", workflow="slow", store=False, poll_interval=1.0) as el:
        el.submit(forever).result()
    """
)


@pytest.mark.timeout(180)
def test_sigterm_to_the_group_during_a_slow_sbatch_leaves_no_job(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path
) -> None:
    slurm_cluster.cancel_all()
    # the cluster full: the run's job stays queued (once started, an agent whose driver is gone exits)
    blocker = slurm_cluster.run(
        ["sbatch", "--parsable", "-J", "blocker", "-n", str(slurm_cluster.total_cores), "--wrap", "sleep 600"]
    ).stdout.strip()
    real = subprocess.run(["which", "sbatch"], env=slurm_cluster.env, capture_output=True, text=True).stdout
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "submitted"
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(
        "#!/bin/bash\n"
        'if [[ " $* " == *" --test-only "* ]]; then exec ' + real.strip() + ' "$@"; fi\n'
        "out=$(" + real.strip() + ' "$@") || exit $?\n'
        f"touch {marker}\n"
        "sleep 4\n"  # a controller slow to answer: the job exists, its id not said yet
        'echo "$out"\n'
    )
    wrapper.chmod(0o755)
    env = {
        **slurm_cluster.env,
        "PATH": f"{bin_dir}:{slurm_cluster.env['PATH']}",
        "PYTHONPATH": str(ROOT),
        "ELASTIC_PROGRESS": "0",
    }
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    with default_sighup():
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            env=env,
            cwd=tmp_path,
            start_new_session=True,
            stderr=subprocess.PIPE,
        )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "sbatch was never called"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)  # as a terminal or a batch system signals a whole group
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while (left := [j for j in slurm_cluster.queue() if not j.startswith(f"{blocker} ")]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    slurm_cluster.cancel_all()
    assert left == [], f"a job submitted while the signal came was left behind: {left}"

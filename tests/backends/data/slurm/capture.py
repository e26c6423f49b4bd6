"""Capture real Slurm outputs into ``captured.json`` for the parsing tests (run by hand, ~2 minutes).

    .venv/bin/python tests/backends/data/slurm/capture.py

Starts a :class:`LocalSlurmCluster` (4 nodes x 4 cores, partition MaxTime 30 minutes), submits jobs in
every state the backend must read (completed, failed, running, pending for resources/dependency/begin
time, cancelled before and after starting, timed out, dependency never satisfied), and records each
command with its stdout, stderr and exit code. Times in the output are this machine's local time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))

from elastic.backends._slurm_parse import SQUEUE_FORMAT  # noqa: E402
from tests.fixtures.slurm_cluster import LocalSlurmCluster  # noqa: E402


def main() -> None:
    captured: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp, LocalSlurmCluster(Path(tmp) / "c", max_time="30") as cluster:
        work = Path(tmp) / "w"
        work.mkdir()

        def run(label: str, args: list[str], stdin: str | None = None) -> str:
            proc = subprocess.run(
                args, env=cluster.env, capture_output=True, text=True, input=stdin, cwd=work
            )
            captured[label] = {
                "args": args,
                "stdout": proc.stdout,
                "stderr": proc.stderr,
                "returncode": proc.returncode,
            }
            return proc.stdout.strip()

        def sbatch(label: str, *opts: str, body: str = "true") -> str:
            return run(label, ["sbatch", "--parsable", *opts, "--wrap", body])

        ids = {}
        ids["completed"] = sbatch("sbatch_completed", "-J", "my job, x=1", "-n", "2", body="srun true")
        ids["failed"] = sbatch("sbatch_failed", "-J", "fail", body="exit 3")
        ids["timeout"] = sbatch("sbatch_timeout", "-J", "to", "-t", "1", body="sleep 300")
        ids["running"] = sbatch("sbatch_running", "-J", "run", "-n", "2", "-t", "20", body="sleep 300")
        ids["cancelled_running"] = sbatch(
            "sbatch_cancelled_running", "-J", "cr", "-t", "20", body="sleep 300"
        )
        time.sleep(2)
        ids["pending_resources"] = sbatch("sbatch_pending_resources", "-J", "big", "-n", "16", body="sleep 1")
        ids["pending_priority"] = sbatch("sbatch_pending_priority", "-J", "prio", "-n", "1", body="sleep 1")
        ids["pending_dependency"] = sbatch(
            "sbatch_pending_dependency", "-J", "dep", f"--dependency=afterok:{ids['running']}", body="sleep 1"
        )
        ids["pending_begin"] = sbatch(
            "sbatch_pending_begin", "-J", "begin", "--begin=now+600", body="sleep 1"
        )
        ids["cancelled_pending"] = sbatch("sbatch_cancelled_pending", "-J", "cp", "--begin=now+600")
        ids["never"] = sbatch(
            "sbatch_never", "-J", "never", f"--dependency=afterok:{ids['failed']}", body="sleep 1"
        )
        time.sleep(2)
        run("scancel_pending", ["scancel", ids["cancelled_pending"]])
        run("scancel_running", ["scancel", ids["cancelled_running"]])
        run("scancel_finished", ["scancel", ids["completed"]])
        run("scancel_unknown", ["scancel", "99999"])
        for label, opts in {
            "too_many_cores": ["-n", "17"],
            "too_many_nodes": ["-N", "5"],
            "walltime_over_max": ["-t", "31"],
            "bad_dependency": ["--dependency=afterok:abc"],
            "bad_partition": ["-p", "nope"],
        }.items():
            sbatch(f"sbatch_error_{label}", *opts)
        run("test_only_ok", ["sbatch", "--test-only", "-n", "4", "--wrap", "true"])
        run("test_only_too_big", ["sbatch", "--test-only", "-n", "17", "--wrap", "true"])
        time.sleep(3)
        run("squeue_all", ["squeue", "-t", "all", "-h", "-o", SQUEUE_FORMAT])
        run("squeue_me", ["squeue", "--me", "-h", "-o", SQUEUE_FORMAT])
        run("squeue_unknown", ["squeue", "-t", "all", "-h", "-j", "99999", "-o", "%i"])
        run("scontrol_unknown", ["scontrol", "show", "job", "-o", "99999"])
        run("scontrol_partition", ["scontrol", "show", "partition", "-o"])
        run("scontrol_partition_unknown", ["scontrol", "show", "partition", "-o", "nope"])
        run("scontrol_config", ["scontrol", "show", "config"])
        # wait for the 1-minute job to time out (limits are checked every ~30 s)
        deadline = time.monotonic() + 150
        while "TIMEOUT" not in run("state_timeout", ["scontrol", "show", "job", "-o", ids["timeout"]]):
            if time.monotonic() > deadline:
                raise SystemExit("the timeout job did not time out within 150 s")
            time.sleep(2)
        for label, job_id in ids.items():
            run(f"scontrol_{label}", ["scontrol", "show", "job", "-o", job_id])
        captured["jobcomp"] = {
            "args": [],
            "stdout": cluster.jobcomp_path.read_text(),
            "stderr": "",
            "returncode": 0,
        }
        dead = Path(tmp) / "dead.conf"
        text = cluster.conf_path.read_text().replace(f"SlurmctldPort={cluster.ctld_port}", "SlurmctldPort=1")
        dead.write_text(text + "MessageTimeout=1\n")
        cluster.env["SLURM_CONF"] = str(dead)
        run("sbatch_controller_down", ["sbatch", "--parsable", "--wrap", "true"])
        run("squeue_controller_down", ["squeue", "-h"])
        cluster.env["SLURM_CONF"] = str(cluster.conf_path)
    captured["_ids"] = {"args": [], "stdout": json.dumps(ids), "stderr": "", "returncode": 0}
    (HERE / "captured.json").write_text(json.dumps(captured, indent=1, sort_keys=True) + "\n")
    print(f"wrote {HERE / 'captured.json'} ({len(captured)} outputs)")


if __name__ == "__main__":
    main()

"""``benchmarks/slurm_pass_check.py``: a logged backfill pass rebuilt from ``slurmctld.log`` and planned."""

from __future__ import annotations

from pathlib import Path

from benchmarks.slurm_pass_check import node_set, plan_pass, read_log

# One pass of a logged synthetic replay (DebugFlags=Backfill), trimmed to the lines the check reads:
# five jobs running, three pending (jobs 25, 28, 29); Slurm reserved 25 and 28 and started 29.
D, B = "2026-11-29T", "sched/backfill: "
LOG = "\n".join(
    [
        f"[{D}09:18:30.000] _slurm_rpc_submit_batch_job: JobId=22 InitPrio=1 usec=1",
        f"[{D}09:18:37.231] {B}_start_job: Started JobId=22 in oracle on n[46-53,56-59,61-64]",
        f"[{D}09:18:40.000] _slurm_rpc_submit_batch_job: JobId=23 InitPrio=1 usec=1",
        f"[{D}09:18:42.417] sched: Allocate JobId=23 NodeList=n[14-45] #CPUs=32 Partition=oracle",
        f"[{D}09:18:50.000] _slurm_rpc_submit_batch_job: JobId=24 InitPrio=1 usec=1",
        f"[{D}09:18:50.100] _slurm_rpc_submit_batch_job: JobId=25 InitPrio=1 usec=1",
        f"[{D}09:18:50.200] _slurm_rpc_submit_batch_job: JobId=26 InitPrio=1 usec=1",
        f"[{D}09:18:53.264] {B}_start_job: Started JobId=26 in oracle on n[55,60]",
        f"[{D}09:18:57.000] _slurm_rpc_submit_batch_job: JobId=27 InitPrio=1 usec=1",
        f"[{D}09:18:58.289] {B}_start_job: Started JobId=27 in oracle on n[3-5,54]",
        f"[{D}09:19:00.000] _slurm_rpc_submit_batch_job: JobId=28 InitPrio=1 usec=1",
        f"[{D}09:19:01.295] {B}_start_job: Started JobId=24 in oracle on n[6-13]",
        f"[{D}09:19:03.365] _slurm_rpc_submit_batch_job: JobId=29 InitPrio=1 usec=547",
        f"[{D}09:19:04.299] {B}_attempt_backfill: beginning",
        f"[{D}09:19:04.300] {B}_dump_job_test: Test JobId=25 at {D}09:19:04 on n[1-64]",
        f"[{D}09:19:04.300] {B}_dump_job_sched: JobId=25 to start at {D}09:20:01, end at {D}09:21:01",
        f"[{D}09:19:04.300] {B}_dump_job_test: Test JobId=28 at {D}09:19:04 on n[2-5,22-64]",
        f"[{D}09:19:04.300] {B}_dump_job_sched: JobId=28 to start at {D}09:20:37, end at {D}09:21:37",
        f"[{D}09:19:04.300] {B}_dump_job_test: Test JobId=29 at {D}09:19:04 on n[2-5,22-64]",
        f"[{D}09:19:04.301] {B}_start_job: Started JobId=29 in oracle on n2",
        f"[{D}09:19:04.301] {B}_attempt_backfill: completed testing 3(3) jobs, usec=1290",
    ]
)


def test_node_lists_parse_as_slurm_writes_them() -> None:
    assert node_set("n[1,3-4]") == 0b1101
    assert node_set("n64") == 1 << 63


def test_a_logged_pass_is_rebuilt_and_planned_as_slurm_planned_it(tmp_path: Path) -> None:
    path = tmp_path / "slurmctld.log"
    path.write_text(LOG)
    log = read_log(path)
    assert len(log.passes) == 1
    ps = log.passes[0]
    assert ps.started == [29] and ps.tested == [25, 28, 29]
    cores = [1] * 21 + [16, 32, 8, 16, 2, 4, 16, 1]  # job id i has cores[i - 1]
    minutes = [1] * 21 + [2, 1, 1, 1, 2, 2, 1, 1]
    policy = plan_pass(log, ps, cores, minutes, 64)
    assert policy is not None
    assert policy.started == [29]  # type: ignore[attr-defined]
    assert {j: policy.reservations[j] for j in (25, 28)} == ps.planned
    assert policy.placement[29] == node_set("n2")

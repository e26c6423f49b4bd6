"""One start-time estimate on both backends: the queue snapshot simulated (elastic.simulator.snapshot)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.backends._slurm_commands import SlurmCommands
from elastic.backends._slurm_queue import parse_snapshot
from elastic.backends.mock import MockBackend
from elastic.backends.slurm import SlurmBackend
from elastic.batch import Dependency, DependencyKind, JobSpec, JobState
from elastic.simulator.snapshot import estimate_start
from tests.fixtures.slurm_cluster import LocalSlurmCluster

# The hand-made queue of the comparison issue, on 64 one-core nodes: A (64 cores, limit 1000 s) runs
# from 0; B (1 core, limit 5000 s) waits for it. A 64-core probe waits for A, then for B:
# 6000 s. `sbatch --test-only` (Slurm 22.05's job_start_data) says A's end plus B's area over the
# partition, 1000 + 1 x 5000 / 64 = 1078 s; the old mock said 6000. Both backends now say 6000.
SQUEUE = [  # squeue -h -p debug -o "%i|%T|%r|%C|%D|%l|%Q|%S|%h|%E|%N", the clock at 2026-11-28T06:00:00
    "2|PENDING|Resources|1|1|1:23:20|4294901758|N/A|OK|(null)|",
    "1|RUNNING|None|64|64|16:40|4294901759|2026-11-28T06:00:00|OK|(null)|n[1-64]",
]


def test_the_hand_made_queue_gives_the_same_estimate_on_both_backends() -> None:
    mock = MockBackend(nodes=64, policy="conservative", priority="basic")
    mock.submit(JobSpec(cores=64, walltime=1000.0, runtime=200.0))  # really done at 200: no one knows
    mock.submit(JobSpec(cores=1, walltime=5000.0, runtime=10.0))
    probe = JobSpec(cores=64, walltime=600.0)
    assert mock.expected_start(probe) == 6000.0
    t0 = time.mktime(time.strptime("2026-11-28T06:00:00", "%Y-%m-%dT%H:%M:%S"))
    snap = parse_snapshot(SQUEUE, now=t0 + 30.0, nodes=64, cores_per_node=1)
    assert [p.job_id for p in snap.pending] == ["2"] and snap.running[0].end == t0 + 1000.0
    slurm = estimate_start(snap, cores=64, walltime=600.0, policy="conservative")
    assert slurm is not None and slurm - t0 == 6000.0
    # a one-core probe fits beside B once A is over, on both
    assert mock.expected_start(JobSpec(cores=1, walltime=600.0)) == 1000.0
    assert estimate_start(snap, cores=1, walltime=600.0, policy="conservative") == t0 + 1000.0


@pytest.fixture
def backend(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> Iterator[SlurmBackend]:
    slurm_cluster.cancel_all()
    yield SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    slurm_cluster.cancel_all()


@pytest.mark.slurm
def test_the_same_queue_on_the_mock_and_on_slurm_gets_the_same_estimate(backend: SlurmBackend) -> None:
    # 4 nodes x 4 cores: A (16 cores, 10 min) runs; B (1 core, 60 min) and C (16 cores, 30 min) wait,
    # D (8 cores, 10 min) waits for C to end. sbatch --test-only answers A's end plus every pending job's
    # CPU-minutes over 16 CPUs (a 1-core job counts as a 4-CPU node): 10 + (4 x 60 + 16 x 30 + 8 x 10) / 16
    # = 60 min for either probe. Both backends' estimate: 10 min for one core, 110 for 16 (after C, D).
    mock = MockBackend(nodes=4, cores_per_node=4, policy="conservative", priority="basic")
    a = backend.submit(JobSpec(cores=16, walltime=600.0))
    backend.submit(JobSpec(cores=1, walltime=3600.0))
    on_c = (Dependency(DependencyKind.AFTERANY, backend.submit(JobSpec(cores=16, walltime=1800.0))),)
    backend.submit(JobSpec(cores=8, walltime=600.0, dependencies=on_c))
    for spec in (JobSpec(cores=16, walltime=600.0), JobSpec(cores=1, walltime=3600.0)):
        mock.submit(spec)
    c = mock.submit(JobSpec(cores=16, walltime=1800.0))
    mock.submit(JobSpec(cores=8, walltime=600.0, dependencies=(Dependency(DependencyKind.AFTERANY, c),)))
    deadline = time.monotonic() + 30
    while (info := backend.state(a)).state is not JobState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.2)
    assert info.start_time is not None
    probes = ((JobSpec(cores=16, walltime=600.0), 6600.0), (JobSpec(cores=1, walltime=300.0), 600.0))
    for probe, expected in probes:
        assert mock.expected_start(probe) == expected
        on_slurm = backend.expected_start(probe)
        # Slurm's times are whole seconds and limits whole minutes (these are): the same to 2 s
        assert on_slurm is not None and abs(on_slurm - info.start_time - expected) <= 2.0
        test_only = backend.test_only_start(probe)
        assert test_only is not None and abs(test_only - info.start_time - 3600.0) <= 2.0


def test_slurm_falls_back_to_test_only_when_squeue_hides_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    # PrivateData=jobs: sinfo counts 64 allocated CPUs, squeue shows none of their jobs
    outputs = {
        "scontrol": "PartitionName=debug TotalNodes=64 TotalCPUs=64 MaxTime=UNLIMITED\n",
        "sinfo": "64/0/0/64\n",
        "squeue": "",
    }
    ran: list[str] = []

    def run(self: SlurmCommands, args: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(args[0])
        return subprocess.CompletedProcess(args, 0, outputs[args[0]], "")

    monkeypatch.setattr(SlurmCommands, "run", run)
    monkeypatch.setattr(SlurmBackend, "test_only_start", lambda self, spec: 1234.0)
    backend = SlurmBackend(partition="debug", env={})
    assert backend.expected_start(JobSpec(cores=1, walltime=60.0)) == 1234.0
    outputs["sinfo"] = "0/64/0/64\n"  # nothing hidden: the snapshot (an empty queue) answers now
    ran.clear()
    start = backend.expected_start(JobSpec(cores=1, walltime=60.0))
    assert start is not None and abs(start - time.time()) < 5 and "sbatch" not in ran


@settings(max_examples=40, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(st.integers(1, 8), st.sampled_from([60.0, 600.0, 3600.0]), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=12,
    ),
    cores=st.integers(1, 8),
    policy=st.sampled_from(["easy", "conservative", "fcfs"]),
)
def test_no_job_ends_before_its_time_limit_in_the_estimate(
    jobs: list[tuple[int, float, float]], cores: int, policy: str
) -> None:
    # Jobs really end early (runtime = a fraction of the limit); the estimate may not know it: the probe
    # starts no earlier than the first time enough cores are free with every running job at its limit.
    mock = MockBackend(nodes=8, policy=policy)
    for c, wall, frac in jobs:
        mock.submit(JobSpec(cores=c, walltime=wall, runtime=frac * wall))
    mock.sleep(30.0)
    start = mock.expected_start(JobSpec(cores=cores, walltime=60.0))
    running = sorted((j.start_time + j.walltime, j.cores) for j in mock.queue() if j.start_time is not None)
    free, bound = 8 - sum(c for _, c in running), mock.now()
    for end, c in running:
        if free >= cores:
            break
        free, bound = free + c, end
    assert start is not None and start >= bound


def test_slurm_queue_version_follows_squeue_and_survives_a_silent_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from elastic.backends import slurm
    from elastic.errors import BackendUnavailableError

    monkeypatch.setattr(slurm, "QUEUE_VERSION_TTL", 0.0)  # read squeue at every call
    state = {"squeue": "5|RUNNING|1:00:00|None\n7|PENDING|10:00|Priority\n", "down": False}

    def run(self: SlurmCommands, args: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        if state["down"]:
            raise BackendUnavailableError("squeue: timed out (slurmctld may be overloaded or unreachable)")
        out = "PartitionName=debug TotalNodes=64 TotalCPUs=64 MaxTime=UNLIMITED\n"
        return subprocess.CompletedProcess(args, 0, out if args[0] == "scontrol" else state["squeue"], "")

    monkeypatch.setattr(SlurmCommands, "run", run)
    backend = SlurmBackend(partition="debug", env={})
    first = backend.queue_version()
    state["squeue"] = "7|PENDING|10:00|Resources\n5|RUNNING|1:00:00|None\n"  # a scheduler pass: same queue
    assert backend.queue_version() == first
    state["squeue"] = "5|RUNNING|1:00:00|None\n"  # job 7 left
    second = backend.queue_version()
    assert second != first
    state["down"] = True  # no answer: a version equal to no other, never an exception in the control loop
    assert backend.queue_version() not in (first, second)

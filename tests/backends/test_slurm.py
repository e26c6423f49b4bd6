"""SlurmBackend against a real Slurm cluster on localhost (the session ``slurm_cluster`` fixture).

Every job here really runs under slurmctld/slurmd; nothing of Slurm is faked except in the tests of
command timeouts, which put a hanging ``sbatch`` first on PATH.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from elastic.backends import slurm
from elastic.backends.base import BatchBackend
from elastic.backends.mock import MockBackend
from elastic.backends.slurm import SlurmBackend
from elastic.batch import Dependency, DependencyKind, JobInfo, JobSpec, JobState, PartitionInfo, PendingReason
from elastic.errors import (
    BackendError,
    BackendUnavailableError,
    DependencyError,
    GeometryError,
    SubmitError,
    UnknownJobError,
)
from tests.fixtures.slurm_cluster import LocalSlurmCluster, _require_binaries

pytestmark = pytest.mark.slurm


@pytest.fixture
def backend(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> Iterator[SlurmBackend]:
    slurm_cluster.cancel_all()  # tests below count on an empty partition; the cluster is shared
    yield SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    slurm_cluster.cancel_all()


def wait_for(
    backend: SlurmBackend, job_id: str, done: Callable[[JobInfo], bool], timeout: float = 30.0
) -> JobInfo:
    deadline = time.monotonic() + timeout
    while True:
        info = backend.state(job_id)
        if done(info):
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {info} after {timeout} s")
        time.sleep(0.2)


def final(info: JobInfo) -> bool:
    return info.state.is_final


def running(info: JobInfo) -> bool:
    return info.state is JobState.RUNNING


def test_is_a_batch_backend_and_reads_the_partition(
    backend: SlurmBackend, slurm_cluster: LocalSlurmCluster
) -> None:
    assert isinstance(backend, BatchBackend)
    assert backend.name == "slurm"
    assert backend.partition() == PartitionInfo(name="debug", nodes=4, cores_per_node=4, max_walltime=None)
    assert SlurmBackend(env=slurm_cluster.env).partition().name == "debug"  # the default partition
    assert abs(backend.now() - time.time()) < 1


def test_script_runs_with_env_and_completes(backend: SlurmBackend, tmp_path: Path) -> None:
    value = "two words, 'quotes' and $dollar"
    spec = JobSpec(
        cores=1,
        walltime=5,  # becomes 1 minute
        name="elastic test",
        script='printf "%s|%s|%s" "$ELASTIC_JOB_ID" "$ELASTIC_JOB_CORES" "$MY_VALUE" > env.txt',
        env={"MY_VALUE": value},
    )
    before = time.time()
    job_id = backend.submit(spec)
    info = wait_for(backend, job_id, final)
    assert info.state is JobState.COMPLETED
    assert info.exit_code == 0
    assert (info.job_id, info.name, info.cores, info.walltime) == (job_id, "elastic test", 1, 60.0)
    assert info.reason is PendingReason.NONE
    assert info.start_time is not None and info.end_time is not None
    assert before - 1 <= info.submit_time <= info.start_time <= info.end_time <= time.time() + 1
    assert info.user
    assert (tmp_path / "env.txt").read_text() == f"{job_id}|1|{value}"
    assert (tmp_path / f"slurm-{job_id}.out").exists()


def test_exit_code_3_is_failed(backend: SlurmBackend) -> None:
    job_id = backend.submit(JobSpec(cores=1, walltime=60, script="echo oops >&2; exit 3"))
    info = wait_for(backend, job_id, final)
    assert (info.state, info.exit_code) == (JobState.FAILED, 3)
    assert "oops" in (backend.workdir / f"slurm-{job_id}.err").read_text()


def test_queue_state_and_cancel(backend: SlurmBackend) -> None:
    whole = backend.submit(JobSpec(cores=16, walltime=600, name="whole"))  # holds every core
    wait_for(backend, whole, running)
    waiting = backend.submit(JobSpec(cores=4, walltime=600, name="waiting"))
    info = wait_for(backend, waiting, lambda i: i.reason is not PendingReason.NONE)
    assert info.state is JobState.PENDING
    assert info.reason in (PendingReason.RESOURCES, PendingReason.PRIORITY)
    assert info.start_time is None and info.end_time is None and info.exit_code is None

    queued = {job.job_id: job for job in backend.queue()}
    assert queued[whole].state is JobState.RUNNING and queued[whole].cores == 16
    assert queued[waiting].state is JobState.PENDING and queued[waiting].name == "waiting"
    assert queued[whole].walltime == 600.0

    backend.cancel(waiting)
    cancelled = wait_for(backend, waiting, final)
    assert cancelled.state is JobState.CANCELLED and cancelled.start_time is None
    backend.cancel(whole)
    ended = wait_for(backend, whole, final)
    assert ended.state is JobState.CANCELLED and ended.start_time is not None and ended.end_time is not None
    assert not {whole, waiting} & {job.job_id for job in backend.queue()}
    backend.cancel(whole)  # cancelling a finished job does nothing


def test_expected_start(backend: SlurmBackend) -> None:
    spec = JobSpec(cores=4, walltime=60)
    now = time.time()
    empty = backend.expected_start(spec)
    assert empty is not None and now - 2 <= empty <= now + 5
    whole = backend.submit(JobSpec(cores=16, walltime=600))  # 10 minutes
    started = wait_for(backend, whole, running).start_time
    assert started is not None
    later = backend.expected_start(spec)
    assert later is not None and abs(later - (started + 600)) <= 5
    with pytest.raises(GeometryError, match="17 cores but the partition has 16"):  # as on the mock
        backend.expected_start(JobSpec(cores=17, walltime=60))


def test_queue_version_changes_with_the_queue_only(
    backend: SlurmBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slurm, "QUEUE_VERSION_TTL", 0.0)  # read squeue at every call
    whole = backend.submit(JobSpec(cores=16, walltime=600))
    wait_for(backend, whole, running)
    waiting = backend.submit(JobSpec(cores=4, walltime=600))
    wait_for(backend, waiting, lambda i: i.reason is not PendingReason.NONE)
    v1 = backend.queue_version()
    time.sleep(2.5)  # scheduler passes, ageing priorities, pending reasons moving: the same queue
    assert backend.queue_version() == v1
    backend.cancel(waiting)
    wait_for(backend, waiting, final)
    v2 = backend.queue_version()
    assert v2 != v1  # a job left the queue
    backend.cancel(whole)
    wait_for(backend, whole, final)
    assert backend.queue_version() not in (v1, v2)


def test_afterok_dependency_starts_after_its_parent(backend: SlurmBackend) -> None:
    parent = backend.submit(JobSpec(cores=1, walltime=60, script="sleep 2"))
    child = backend.submit(
        JobSpec(
            cores=1, walltime=60, script="true", dependencies=(Dependency(DependencyKind.AFTEROK, parent),)
        )
    )
    assert backend.state(child).state is JobState.PENDING
    assert wait_for(backend, child, lambda i: i.reason is PendingReason.DEPENDENCY, 5).reason
    child_info = wait_for(backend, child, final)
    parent_info = backend.state(parent)
    assert child_info.state is JobState.COMPLETED and parent_info.state is JobState.COMPLETED
    assert parent_info.end_time is not None and child_info.start_time is not None
    assert child_info.start_time >= parent_info.end_time


def test_afterok_on_a_failed_parent_is_cancelled(backend: SlurmBackend) -> None:
    parent = backend.submit(JobSpec(cores=1, walltime=60, script="exit 1"))
    wait_for(backend, parent, final)
    child = backend.submit(
        JobSpec(
            cores=1, walltime=60, script="true", dependencies=(Dependency(DependencyKind.AFTEROK, parent),)
        )
    )
    info = wait_for(backend, child, final)  # --kill-on-invalid-dep=yes: not pending forever
    assert info.state is JobState.CANCELLED and info.start_time is None


def test_unknown_dependencies_are_refused(backend: SlurmBackend) -> None:
    for bad in ("987654321", "abc"):
        dep = (Dependency(DependencyKind.AFTEROK, bad),)
        with pytest.raises(DependencyError, match=bad):
            backend.submit(JobSpec(cores=1, walltime=60, dependencies=dep))


def test_begin_time_holds_the_job(backend: SlurmBackend) -> None:
    begin = time.time() + 4
    job_id = backend.submit(JobSpec(cores=1, walltime=60, script="true", begin=begin))
    info = backend.state(job_id)
    assert (info.state, info.reason) == (JobState.PENDING, PendingReason.BEGIN_TIME)
    done = wait_for(backend, job_id, final, timeout=20)
    assert done.state is JobState.COMPLETED
    assert done.start_time is not None and done.start_time >= begin


@pytest.mark.parametrize(("cores", "nodes"), [(17, None), (4, 5)])
def test_geometry_larger_than_the_partition(backend: SlurmBackend, cores: int, nodes: int | None) -> None:
    with pytest.raises(GeometryError, match="never fit") as caught:
        backend.submit(JobSpec(cores=cores, nodes=nodes, walltime=60))
    assert caught.value.returncode == 1 and "sbatch: error" in caught.value.stderr


def test_other_refusals_keep_the_output(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> None:
    backend = SlurmBackend(partition="nope", env=slurm_cluster.env, workdir=tmp_path)
    with pytest.raises(SubmitError) as caught:
        backend.submit(JobSpec(cores=1, walltime=60))
    assert type(caught.value) is SubmitError
    assert caught.value.returncode == 1 and "Invalid partition name" in caught.value.stderr
    assert "Invalid partition name" in str(caught.value)


def test_multicore_job_runs_srun_on_its_cores(backend: SlurmBackend, tmp_path: Path) -> None:
    script = "srun bash -c 'echo $SLURM_PROCID $SLURMD_NODENAME' > tasks.txt"
    job_id = backend.submit(JobSpec(cores=8, walltime=60, script=script))
    info = wait_for(backend, job_id, final)
    assert info.state is JobState.COMPLETED and info.cores == 8
    lines = [line.split() for line in (tmp_path / "tasks.txt").read_text().splitlines()]
    assert sorted(int(rank) for rank, _ in lines) == list(range(8))
    assert len({node for _, node in lines}) >= 2  # 8 cores do not fit one 4-core node


def test_whole_nodes(backend: SlurmBackend, tmp_path: Path) -> None:
    script = "srun --ntasks-per-node=1 hostname | wc -l > nodes.txt"
    info = wait_for(backend, backend.submit(JobSpec(cores=2, nodes=2, walltime=60, script=script)), final)
    assert (info.state, info.cores) == (JobState.COMPLETED, 8)  # exclusive: 2 nodes x 4 cores
    assert (tmp_path / "nodes.txt").read_text().strip() == "2"


def test_unknown_job(backend: SlurmBackend) -> None:
    for bad in ("987654321", "abc", "1;rm"):
        with pytest.raises(UnknownJobError, match=bad.split(";")[0]):
            backend.state(bad)
    with pytest.raises(UnknownJobError):
        backend.cancel("not-a-job")


def test_finished_job_from_jobcomp_after_slurmctld_forgot_it(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path
) -> None:
    # A jobcomp line as slurmctld writes it (captured), for a job id slurmctld does not hold.
    line = (
        "JobId=987654 UserId=root(0) GroupId=root(0) Name=gone but kept JobState=FAILED Partition=debug "
        "TimeLimit=30 StartTime=2026-11-21T13:26:34 EndTime=2026-11-21T13:26:35 NodeList=n1 NodeCnt=1 "
        "ProcCnt=1 WorkDir=/tmp ReservationName= Tres=cpu=1,mem=1M,node=1,billing=1 Account= QOS= WcKey= "
        "Cluster=unknown SubmitTime=2026-11-21T13:26:33 EligibleTime=2026-11-21T13:26:33 "
        "DerivedExitCode=0:0 ExitCode=3:0 \n"
    )
    jobcomp = tmp_path / "jobcomp.txt"
    jobcomp.write_text(line)
    backend = SlurmBackend(env=slurm_cluster.env, workdir=tmp_path, jobcomp_path=jobcomp)
    info = backend.state("987654")
    assert (info.state, info.exit_code, info.name, info.walltime) == (
        JobState.FAILED,
        3,
        "gone but kept",
        1800,
    )
    assert info.end_time is not None and info.start_time is not None and info.end_time - info.start_time == 1
    # Without jobcomp_path the backend finds the file through `scontrol show config` (JobCompLoc).
    default = SlurmBackend(env=slurm_cluster.env, workdir=tmp_path)
    with pytest.raises(UnknownJobError):
        default.state("987655")
    with open(slurm_cluster.jobcomp_path, "a") as fh:  # as slurmctld appends
        fh.write(line.replace("JobId=987654", "JobId=987655"))
    assert default.state("987655").state is JobState.FAILED


def test_controller_down_is_unavailable(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> None:
    dead = tmp_path / "dead.conf"
    text = slurm_cluster.conf_path.read_text()
    dead.write_text(
        text.replace(f"SlurmctldPort={slurm_cluster.ctld_port}", "SlurmctldPort=1") + "MessageTimeout=1\n"
    )
    backend = SlurmBackend(env={**slurm_cluster.env, "SLURM_CONF": str(dead)}, workdir=tmp_path)
    with pytest.raises(BackendUnavailableError, match="slurmctld does not answer"):
        backend.submit(JobSpec(cores=1, walltime=60))
    with pytest.raises(BackendUnavailableError, match="slurmctld does not answer"):
        backend.queue()


def test_missing_slurm_is_unavailable(tmp_path: Path) -> None:
    no_path = SlurmBackend(env={"PATH": str(tmp_path)}, workdir=tmp_path)
    with pytest.raises(BackendUnavailableError, match="'sbatch' is not on PATH"):
        no_path.submit(JobSpec(cores=1, walltime=60))
    no_conf = SlurmBackend(env={"SLURM_CONF": str(tmp_path / "missing.conf")}, workdir=tmp_path)
    with pytest.raises(BackendUnavailableError, match=r"missing\.conf does not exist"):
        no_conf.queue()


def test_hanging_commands_time_out_with_their_name(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "squeue"):
        (bin_dir / name).write_text("#!/bin/sh\necho partial\nexec sleep 30\n")
        os.chmod(bin_dir / name, 0o755)
    env = {**slurm_cluster.env, "PATH": f"{bin_dir}:{slurm_cluster.env['PATH']}"}
    backend = SlurmBackend(env=env, workdir=tmp_path, command_timeout=0.5)
    with pytest.raises(SubmitError, match=r"`sbatch --parsable` did not finish within command_timeout=0.5 s"):
        backend.submit(JobSpec(cores=1, walltime=60))
    with pytest.raises(BackendError, match=r"`squeue --me .*` did not finish within"):
        backend.queue()


@pytest.mark.slow
def test_job_past_its_walltime_times_out(backend: SlurmBackend) -> None:
    job_id = backend.submit(JobSpec(cores=1, walltime=30, script="sleep 600"))  # 30 s -> 1 minute
    info = wait_for(backend, job_id, final, timeout=150)
    assert info.state is JobState.TIMEOUT
    assert info.start_time is not None and info.end_time is not None
    assert 60 <= info.end_time - info.start_time <= 100


def _held_then_fresh(backend: SlurmBackend, cores: int) -> tuple[float, float]:
    """A holds every core for ~4 s; H (afterany A) is submitted, then B a second later. Start times."""
    a = backend.submit(JobSpec(cores=cores, walltime=60, script="sleep 4"))
    wait_for(backend, a, running)
    h = backend.submit(
        JobSpec(
            cores=cores, walltime=60, script="sleep 1", dependencies=(Dependency(DependencyKind.AFTERANY, a),)
        )
    )
    time.sleep(1.1)
    b = backend.submit(JobSpec(cores=cores, walltime=60, script="sleep 1"))
    h_start = wait_for(backend, h, final, 60).start_time
    b_start = wait_for(backend, b, final, 60).start_time
    assert h_start is not None and b_start is not None
    return h_start, b_start


def test_the_cluster_reports_its_priority_setting_and_orders_a_released_job_as_the_mock_model(
    backend: SlurmBackend, slurm_cluster: LocalSlurmCluster
) -> None:
    # Issue 9: what `scontrol show config` says decides the mock's --priority; under priority/basic a
    # job released from its dependency keeps its submit place (before B), as MockBackend(priority="basic").
    assert slurm_cluster.priority_setting()["PriorityType"] == "priority/basic"
    assert backend.priority_model() == "basic"
    h_start, b_start = _held_then_fresh(backend, slurm_cluster.total_cores)
    assert h_start < b_start
    mock = MockBackend(nodes=16, priority="basic")  # the same queue, simulated
    a = mock.submit(JobSpec(cores=16, walltime=60, runtime=4.0))
    h = mock.submit(
        JobSpec(cores=16, walltime=60, runtime=1.0, dependencies=(Dependency(DependencyKind.AFTERANY, a),))
    )
    mock.sleep(1.1)
    b = mock.submit(JobSpec(cores=16, walltime=60, runtime=1.0))
    mock.sleep(60.0)
    assert (mock.state(h).start_time, mock.state(b).start_time) == (4.0, 5.0)


def test_multifactor_without_accounting_database_cannot_age_jobs(tmp_path: Path) -> None:
    # PriorityWeightAge needs slurmdbd (slurm.conf(5)); without it every priority stays equal and jobs go
    # in submit order: priority_model() says "basic", and the released job H still goes first.
    _require_binaries()
    conf = ["PriorityType=priority/multifactor", "PriorityWeightAge=1000", "PriorityCalcPeriod=1"]
    with LocalSlurmCluster(tmp_path / "mf", nodes=1, cores_per_node=2, extra_conf=conf) as cluster:
        setting = cluster.priority_setting()
        assert setting["PriorityType"] == "priority/multifactor" and setting["PriorityWeightAge"] == "1000"
        backend = SlurmBackend(env=cluster.env, workdir=tmp_path, command_timeout=20)
        assert backend.priority_model() == "basic"
        h_start, b_start = _held_then_fresh(backend, cluster.total_cores)
        assert h_start < b_start


def test_a_job_whose_dependency_is_dropped_keeps_its_submit_rank(backend: SlurmBackend) -> None:
    # priority/basic (the local cluster's): ranked by submission, also once a dependency no longer holds it
    # back; run control counts on it when it drops a request's dependencies once its stage is ready
    # (tests/control/test_unchain_ready.py shows the same on the mock in priority "basic")
    part = backend.partition()
    whole = backend.submit(JobSpec(cores=part.cores - 1, walltime=3600.0, name="whole"))
    parent = backend.submit(JobSpec(cores=1, walltime=3600.0, name="parent"))
    wait_for(backend, whole, running)
    wait_for(backend, parent, running)
    child = backend.submit(
        JobSpec(
            cores=part.cores,
            walltime=3600.0,
            name="child",
            dependencies=(Dependency(DependencyKind.AFTERANY, parent),),
        )
    )
    later = backend.submit(JobSpec(cores=part.cores, walltime=3600.0, name="later"))
    backend.set_dependencies(child, ())
    assert backend.state(child).state is JobState.PENDING
    backend.cancel(whole)
    backend.cancel(parent)
    wait_for(backend, child, running)
    assert backend.state(later).state is JobState.PENDING

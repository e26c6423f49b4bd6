"""Contract suite: the mock backend and real Slurm pass the same BatchBackend tests (issues #2 and #4).

Issue #2 asks for "the same submit/cancel/query API ... so strategies cannot tell the mock from Slurm
except by speed". Every test below therefore runs twice through the ``backend`` fixture:

- ``mock-scaled``: a :class:`MockBackend` with a partition shaped like the Slurm test cluster (4 nodes x
  4 cores, named ``debug``), no background load, on the scaled clock (:data:`SPEEDUP` simulated seconds per
  real second, so a 60-s walltime lasts one real second and job scripts really run);
- ``slurm``: :class:`SlurmBackend` on the real local cluster (``slurm_cluster`` fixture), emptied before
  and after each test.

Tests use only the protocol (``submit``/``cancel``/``state``/``queue``/``expected_start``/``now``/``sleep``/
``partition``) plus files written by the job scripts. Where the backends differ by design (Slurm's
whole-second times and whole-minute walltimes, its one-second scheduler tick), the difference is a field of
the backend's :class:`Profile`, never a looser assertion for both. TIMEOUT is not tested here: Slurm
enforces limits only every ~30 s (see tests/backends/test_slurm.py for it).

Scripts that must stay running while the test looks at them wait for a "go" file the test creates, so no
test depends on how fast this (shared, busy) machine runs a ``sleep``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic.backends.base import BatchBackend, ChangesDependencies, ShortensWalltime
from elastic.backends.mock import MockBackend
from elastic.backends.slurm import SlurmBackend
from elastic.batch import Dependency, DependencyKind, JobInfo, JobSpec, JobState, PartitionInfo, PendingReason
from elastic.errors import ConfigError, DependencyError, GeometryError, UnknownJobError

#: The partition both backends must report: the shape of the local Slurm test cluster (4 nodes x 4 cores).
PARTITION = PartitionInfo(name="debug", nodes=4, cores_per_node=4, max_walltime=None)

#: Simulated seconds per real second of the mock backend: a 60-s walltime lasts one real second.
SPEEDUP = 60.0

#: Walltime of jobs that must outlive the test (cancelled at its end): 1 real minute on the mock.
HOLD = 3600.0

#: Walltime of short script jobs: long enough for a slow ``bash`` start on a busy machine (10 real s on
#: the mock), and a whole number of minutes so Slurm keeps it as asked.
SHORT = 600.0

#: Real seconds a test may wait for one job to reach a state before failing.
REAL_TIMEOUT = 40.0

#: An id no backend of this suite has handed out (the mock numbers from 1, the fresh cluster too).
UNKNOWN_ID = "987654321"


@dataclass(frozen=True, slots=True)
class Profile:
    """What legitimately differs between backends: granularity and latency, in backend seconds.

    Attributes
    ----------
    time_resolution : float
        Reported times may be this much earlier than the true instant (Slurm truncates to whole seconds).
    walltime_step : float
        Walltimes are rounded up to a multiple of this (Slurm: whole minutes); 0 = kept as asked.
    start_latency : float
        Upper bound on the delay between a job becoming eligible (dependency satisfied, begin time
        reached) and its start (Slurm: scheduler tick of 1 s, dependents released ~1 s after the parent
        ends; the mock starts it at the same simulated instant).
    estimate_tolerance : float
        How far ``expected_start`` may be from the exact answer (Slurm: whole seconds and the scheduler
        tick; the mock computes it exactly).
    poll : float
        Backend seconds to sleep between two looks at a job (0.1 real seconds on both).
    delay : float
        A delay in backend seconds that lasts about two real seconds (used as a begin time).
    """

    time_resolution: float
    walltime_step: float
    start_latency: float
    estimate_tolerance: float
    poll: float
    delay: float


#: Slurm values measured on the local 4 x 4 test cluster (Slurm 22.05): dependents started 0-1 s after
#: their parent's end, begin times were met 0.1-0.3 s late, the estimate on a full partition was exact and
#: on an empty one up to 1 s early (truncated to the second). The latency bound leaves room for a busy host.
PROFILES = {
    "mock": Profile(
        time_resolution=0.0,
        walltime_step=0.0,
        start_latency=0.0,
        estimate_tolerance=1e-6,
        poll=0.1 * SPEEDUP,
        delay=2.0 * SPEEDUP,
    ),
    "slurm": Profile(
        time_resolution=1.0,
        walltime_step=60.0,
        start_latency=5.0,
        estimate_tolerance=2.0,
        poll=0.1,
        delay=2.0,
    ),
}


@pytest.fixture(params=["mock-scaled", pytest.param("slurm", marks=pytest.mark.slurm)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BatchBackend]:
    """The backend under test; the Slurm cluster is started only for the ``slurm`` parameter."""
    if request.param == "mock-scaled":
        with MockBackend(
            nodes=PARTITION.nodes,
            cores_per_node=PARTITION.cores_per_node,
            partition_name=PARTITION.name,
            clock="scaled",
            speedup=SPEEDUP,
            grace=0.5,
        ) as mock:
            yield mock
        return
    cluster = request.getfixturevalue("slurm_cluster")
    cluster.cancel_all()  # the cluster is shared by the session: start from an empty partition
    yield SlurmBackend(partition=PARTITION.name, env=cluster.env, workdir=tmp_path, command_timeout=20)
    cluster.cancel_all()


@pytest.fixture
def profile(backend: BatchBackend) -> Profile:
    """Granularities and latencies of ``backend``."""
    return PROFILES[backend.name]


# ---------------------------------------------------------------------------------------------- helpers


def wait_for(
    backend: BatchBackend, profile: Profile, job_id: str, done: Callable[[JobInfo], bool], what: str
) -> JobInfo:
    """Poll ``state(job_id)`` (sleeping on the backend's clock) until ``done``; fail after REAL_TIMEOUT."""
    deadline = time.monotonic() + REAL_TIMEOUT
    while True:
        info = backend.state(job_id)
        if done(info):
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"{backend.name}: job {job_id} not {what} after {REAL_TIMEOUT} s: {info}")
        backend.sleep(profile.poll)


def final(backend: BatchBackend, profile: Profile, job_id: str) -> JobInfo:
    """Wait until the job ended; an ended job has an end time and no pending reason."""
    info = wait_for(backend, profile, job_id, lambda i: i.state.is_final, "final")
    assert info.end_time is not None and info.reason is PendingReason.NONE, info
    return info


def running(backend: BatchBackend, profile: Profile, job_id: str) -> JobInfo:
    return wait_for(backend, profile, job_id, lambda i: i.state is JobState.RUNNING, "running")


def gated(go: Path, then: str = "exit 0") -> str:
    """A script that waits until the file ``go`` exists, then runs ``then``."""
    return f'while [ ! -e "{go}" ]; do sleep 0.05; done\n{then}'


def hold(cores: int = PARTITION.cores, name: str = "holder") -> JobSpec:
    """A job without script: it holds its cores until cancelled (or HOLD seconds)."""
    return JobSpec(cores=cores, walltime=HOLD, name=name)


def after(kind: DependencyKind, parent: str, script: str = "true") -> JobSpec:
    return JobSpec(
        cores=1, walltime=SHORT, name="child", script=script, dependencies=(Dependency(kind, parent),)
    )


def queued_ids(backend: BatchBackend) -> set[str]:
    return {job.job_id for job in backend.queue()}


def assert_times_consistent(info: JobInfo) -> None:
    """Submit <= start <= end, and ``wait`` is start - submit."""
    assert info.start_time is not None, info
    assert info.submit_time <= info.start_time, info
    assert info.wait == info.start_time - info.submit_time
    assert info.wait is not None and info.wait >= 0
    if info.end_time is not None:
        assert info.start_time <= info.end_time, info


# ---------------------------------------------------------------------------------------------- tests


def test_is_a_batch_backend_of_the_expected_partition(backend: BatchBackend) -> None:
    assert isinstance(backend, BatchBackend)
    assert backend.partition() == PARTITION
    assert backend.partition().cores == 16


def test_submit_returns_a_new_id(backend: BatchBackend, profile: Profile) -> None:
    specs = [hold(cores=1, name=f"job{k}") for k in range(3)]
    ids = [backend.submit(spec) for spec in specs]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 3
    for job_id, spec in zip(ids, specs, strict=True):
        info = backend.state(job_id)
        assert (info.job_id, info.name, info.cores) == (job_id, spec.name, spec.cores)
        assert spec.walltime <= info.walltime <= spec.walltime + profile.walltime_step
    for job_id in ids:
        backend.cancel(job_id)
    fresh = backend.submit(hold(cores=1))
    assert fresh not in ids  # ids of cancelled jobs are not reused
    backend.cancel(fresh)


def test_state_and_queue_show_pending_or_running_then_final(
    backend: BatchBackend, profile: Profile, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    job_id = backend.submit(JobSpec(cores=2, walltime=SHORT, name="gated", script=gated(go)))
    first = backend.state(job_id)
    assert first.state in (JobState.PENDING, JobState.RUNNING)
    assert first.end_time is None and first.exit_code is None
    in_queue = {job.job_id: job for job in backend.queue()}
    assert in_queue[job_id].state in (JobState.PENDING, JobState.RUNNING)
    assert (in_queue[job_id].name, in_queue[job_id].cores) == ("gated", 2)

    run = running(backend, profile, job_id)
    assert run.reason is PendingReason.NONE and run.end_time is None
    assert_times_consistent(run)
    assert {job.job_id: job.state for job in backend.queue()}[job_id] is JobState.RUNNING

    go.touch()
    done = final(backend, profile, job_id)
    assert (done.state, done.exit_code) == (JobState.COMPLETED, 0)
    assert done.start_time == run.start_time and done.submit_time == run.submit_time
    assert_times_consistent(done)
    assert done.end_time is not None and done.end_time <= backend.now()
    assert job_id not in queued_ids(backend)


@pytest.mark.parametrize(("code", "state"), [(0, JobState.COMPLETED), (3, JobState.FAILED)])
def test_exit_code_decides_completed_or_failed(
    backend: BatchBackend, profile: Profile, code: int, state: JobState
) -> None:
    job_id = backend.submit(JobSpec(cores=1, walltime=SHORT, script=f"exit {code}"))
    info = final(backend, profile, job_id)
    assert (info.state, info.exit_code) == (state, code)
    assert_times_consistent(info)
    backend.cancel(job_id)  # cancelling a finished job does nothing
    again = backend.state(job_id)
    assert (again.state, again.exit_code, again.end_time) == (state, code, info.end_time)


def test_cancel_pending_and_running(backend: BatchBackend, profile: Profile) -> None:
    whole = backend.submit(hold())
    running(backend, profile, whole)
    waiting = backend.submit(hold(cores=4, name="waiting"))
    pending = wait_for(
        backend, profile, waiting, lambda i: i.reason is not PendingReason.NONE, "given a pending reason"
    )
    assert pending.state is JobState.PENDING
    assert pending.reason in (PendingReason.RESOURCES, PendingReason.PRIORITY)
    assert pending.start_time is None and pending.wait is None

    backend.cancel(waiting)
    cancelled = final(backend, profile, waiting)
    assert cancelled.state is JobState.CANCELLED and cancelled.start_time is None
    assert cancelled.end_time is not None and cancelled.end_time >= cancelled.submit_time
    backend.cancel(whole)
    ended = final(backend, profile, whole)
    assert ended.state is JobState.CANCELLED
    assert_times_consistent(ended)
    assert not {whole, waiting} & queued_ids(backend)

    for job_id, before in ((waiting, cancelled), (whole, ended)):  # cancelling again does nothing
        backend.cancel(job_id)
        assert backend.state(job_id) == before


def test_shorten_lowers_a_pending_walltime_only(backend: BatchBackend, profile: Profile) -> None:
    assert isinstance(backend, ShortensWalltime)
    whole = running(backend, profile, backend.submit(hold()))
    waiting = backend.submit(hold(cores=4, name="waiting"))
    backend.shorten(waiting, 600.0)
    info = backend.state(waiting)
    assert info.state is JobState.PENDING and info.walltime == 600.0
    backend.shorten(waiting, 1200.0)  # a limit is never raised
    assert backend.state(waiting).walltime == 600.0
    backend.shorten(whole.job_id, 600.0)  # a running job's limit counts from its start: left alone
    assert backend.state(whole.job_id).walltime == HOLD
    for bad in (0.0, -60.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="walltime must be a number"):
            backend.shorten(waiting, bad)
    with pytest.raises(UnknownJobError):
        backend.shorten(UNKNOWN_ID, 600.0)
    assert backend.state(waiting).walltime == 600.0
    backend.cancel(waiting)
    backend.cancel(whole.job_id)


def test_set_dependencies_releases_a_held_job_and_leaves_a_started_one(
    backend: BatchBackend, profile: Profile, tmp_path: Path
) -> None:
    assert isinstance(backend, ChangesDependencies)
    go = tmp_path / "go"
    parent = backend.submit(JobSpec(cores=1, walltime=SHORT, name="parent", script=gated(go)))
    running(backend, profile, parent)
    child = backend.submit(after(DependencyKind.AFTERANY, parent, script=gated(go)))
    wait_for(
        backend, profile, child, lambda i: i.reason is PendingReason.DEPENDENCY, "held by its dependency"
    )
    for bad in (UNKNOWN_ID,):  # refused before anything changes
        with pytest.raises(DependencyError):
            backend.set_dependencies(child, (Dependency(DependencyKind.AFTERANY, bad),))
        with pytest.raises(UnknownJobError):
            backend.set_dependencies(bad, ())
    assert backend.state(child).reason is PendingReason.DEPENDENCY
    backend.set_dependencies(child, ())  # cleared: it starts beside its parent, which still runs
    running(backend, profile, child)
    assert backend.state(parent).state is JobState.RUNNING
    backend.set_dependencies(child, (Dependency(DependencyKind.AFTERANY, parent),))  # started: left alone
    assert backend.state(child).state is JobState.RUNNING
    go.touch()
    assert final(backend, profile, child).state is JobState.COMPLETED
    assert final(backend, profile, parent).state is JobState.COMPLETED


@pytest.mark.parametrize("job_id", [UNKNOWN_ID, "abc"])
def test_unknown_id(backend: BatchBackend, job_id: str) -> None:
    with pytest.raises(UnknownJobError, match=job_id) as caught:
        backend.state(job_id)
    assert caught.value.job_id == job_id


@pytest.mark.parametrize(
    ("cores", "nodes"),
    [
        (PARTITION.cores + 1, None),
        (1, PARTITION.nodes + 1),
        (PARTITION.cores + 1, PARTITION.nodes),
        # JobSpec.cores are tasks of one CPU each: 5 never fit on one whole node of 4 cores.
        (PARTITION.cores_per_node + 1, 1),
        (2 * PARTITION.cores_per_node + 1, 2),
    ],
)
def test_oversized_geometry_is_refused(backend: BatchBackend, cores: int, nodes: int | None) -> None:
    spec = JobSpec(cores=cores, nodes=nodes, walltime=60.0)
    with pytest.raises(GeometryError):
        backend.expected_start(spec)
    with pytest.raises(GeometryError):
        backend.submit(spec)
    assert backend.queue() == []


def test_whole_nodes_are_counted_whole(backend: BatchBackend, profile: Profile) -> None:
    # Checked once started: a pending whole-node job reports its task count on Slurm (see the report).
    job_id = backend.submit(JobSpec(cores=1, nodes=2, walltime=SHORT, name="nodes", script="true"))
    done = final(backend, profile, job_id)
    assert (done.state, done.cores) == (JobState.COMPLETED, 2 * PARTITION.cores_per_node)


@pytest.mark.parametrize("kind", list(DependencyKind))
def test_dependency_on_an_unknown_id_is_refused(backend: BatchBackend, kind: DependencyKind) -> None:
    with pytest.raises(DependencyError, match=UNKNOWN_ID):
        backend.submit(after(kind, UNKNOWN_ID))
    assert backend.queue() == []


def test_afterok_starts_only_after_the_parent_completed(
    backend: BatchBackend, profile: Profile, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    parent = backend.submit(JobSpec(cores=1, walltime=SHORT, name="parent", script=gated(go)))
    running(backend, profile, parent)
    child = backend.submit(after(DependencyKind.AFTEROK, parent))
    held = wait_for(
        backend, profile, child, lambda i: i.reason is PendingReason.DEPENDENCY, "held by its dependency"
    )
    assert held.state is JobState.PENDING and held.start_time is None

    go.touch()
    done = final(backend, profile, child)
    parent_info = backend.state(parent)
    assert (parent_info.state, done.state) == (JobState.COMPLETED, JobState.COMPLETED)
    assert parent_info.end_time is not None and done.start_time is not None
    assert parent_info.end_time <= done.start_time <= parent_info.end_time + profile.start_latency


@pytest.mark.parametrize(("kind", "code"), [(DependencyKind.AFTEROK, 3), (DependencyKind.AFTERNOTOK, 0)])
def test_unsatisfiable_dependency_never_starts(
    backend: BatchBackend, profile: Profile, kind: DependencyKind, code: int
) -> None:
    parent = backend.submit(JobSpec(cores=1, walltime=SHORT, name="parent", script=f"exit {code}"))
    final(backend, profile, parent)
    child = backend.submit(after(kind, parent))
    # Slurm (--kill-on-invalid-dep) cancels it; the mock may keep it pending with this reason instead.
    never = wait_for(
        backend,
        profile,
        child,
        lambda i: i.state.is_final or i.reason is PendingReason.DEPENDENCY_NEVER_SATISFIED,
        "known never to start",
    )
    assert never.state in (JobState.CANCELLED, JobState.PENDING)
    assert never.start_time is None
    if never.state is JobState.PENDING:  # and it stays so
        backend.sleep(profile.delay)
        assert backend.state(child).start_time is None


@pytest.mark.parametrize("kind", [DependencyKind.AFTERANY, DependencyKind.AFTERNOTOK])
def test_afterany_and_afternotok_start_after_a_failed_parent(
    backend: BatchBackend, profile: Profile, tmp_path: Path, kind: DependencyKind
) -> None:
    go = tmp_path / "go"
    parent = backend.submit(JobSpec(cores=1, walltime=SHORT, name="parent", script=gated(go, "exit 3")))
    running(backend, profile, parent)
    child = backend.submit(after(kind, parent))
    wait_for(
        backend, profile, child, lambda i: i.reason is PendingReason.DEPENDENCY, "held by its dependency"
    )
    assert backend.state(child).state is JobState.PENDING

    go.touch()
    done = final(backend, profile, child)
    parent_info = backend.state(parent)
    assert (parent_info.state, parent_info.exit_code) == (JobState.FAILED, 3)
    assert done.state is JobState.COMPLETED
    assert parent_info.end_time is not None and done.start_time is not None
    assert parent_info.end_time <= done.start_time <= parent_info.end_time + profile.start_latency


def test_after_starts_once_the_parent_started(backend: BatchBackend, profile: Profile) -> None:
    # Submit the child while the parent is still pending behind a job that holds the whole partition.
    whole = backend.submit(hold())
    running(backend, profile, whole)
    parent = backend.submit(hold(cores=1, name="parent"))
    child = backend.submit(after(DependencyKind.AFTER, parent))
    held = wait_for(
        backend, profile, child, lambda i: i.reason is PendingReason.DEPENDENCY, "held by its dependency"
    )
    assert held.state is JobState.PENDING
    assert backend.state(parent).state is JobState.PENDING

    backend.cancel(whole)
    parent_info = running(backend, profile, parent)
    done = final(backend, profile, child)
    assert done.state is JobState.COMPLETED
    assert parent_info.start_time is not None and done.start_time is not None
    assert parent_info.start_time <= done.start_time <= parent_info.start_time + profile.start_latency
    assert backend.state(parent).state is JobState.RUNNING  # "after" does not wait for the parent's end


def test_begin_time_is_respected(backend: BatchBackend, profile: Profile) -> None:
    begin = backend.now() + profile.delay
    spec = JobSpec(cores=1, walltime=SHORT, script="true", begin=begin)
    estimate = backend.expected_start(spec)
    assert estimate is not None
    assert begin <= estimate <= begin + profile.time_resolution + profile.estimate_tolerance
    job_id = backend.submit(spec)
    info = backend.state(job_id)
    assert info.state is JobState.PENDING
    held = wait_for(
        backend, profile, job_id, lambda i: i.reason is not PendingReason.NONE or i.state.is_final, "held"
    )
    assert (held.state, held.reason) == (JobState.PENDING, PendingReason.BEGIN_TIME)
    done = final(backend, profile, job_id)
    assert done.state is JobState.COMPLETED and done.start_time is not None
    assert begin <= done.start_time <= begin + profile.time_resolution + profile.start_latency


def test_expected_start_on_an_empty_partition_is_now(backend: BatchBackend, profile: Profile) -> None:
    tol = profile.estimate_tolerance
    before = backend.now()
    estimate = backend.expected_start(JobSpec(cores=PARTITION.cores, walltime=60.0))
    after_ = backend.now()
    assert estimate is not None
    assert before - tol - profile.time_resolution <= estimate <= after_ + tol


def test_expected_start_on_a_full_partition_is_the_walltime_end(
    backend: BatchBackend, profile: Profile
) -> None:
    whole = running(backend, profile, backend.submit(hold()))
    assert whole.start_time is not None
    for spec in (JobSpec(cores=1, walltime=60.0), JobSpec(cores=PARTITION.cores, walltime=60.0)):
        estimate = backend.expected_start(spec)
        assert estimate is not None
        assert abs(estimate - (whole.start_time + whole.walltime)) <= profile.estimate_tolerance
    assert queued_ids(backend) == {whole.job_id}  # asking submits nothing


def test_queue_never_lists_final_jobs(backend: BatchBackend, profile: Profile) -> None:
    ok = backend.submit(JobSpec(cores=1, walltime=SHORT, script="exit 0"))
    failed = backend.submit(JobSpec(cores=1, walltime=SHORT, script="exit 3"))
    cancelled = backend.submit(hold(cores=1))
    backend.cancel(cancelled)
    for job_id in (ok, failed, cancelled):
        final(backend, profile, job_id)
    live = backend.submit(hold(cores=PARTITION.cores - 1, name="live"))
    running(backend, profile, live)
    pending = backend.submit(hold(cores=2, name="pending"))  # only 1 core is free

    snapshot = backend.queue()
    assert {job.job_id for job in snapshot} == {live, pending}
    assert all(job.state in (JobState.PENDING, JobState.RUNNING) for job in snapshot)
    assert all(not job.state.is_final for job in snapshot)
    for job in snapshot:  # the snapshot agrees with state()
        assert job.state is backend.state(job.job_id).state


def test_job_environment_names_the_job_and_its_cores(
    backend: BatchBackend, profile: Profile, tmp_path: Path
) -> None:
    out = tmp_path / "env.txt"
    script = f'printf "%s %s %s" "$ELASTIC_JOB_ID" "$ELASTIC_JOB_CORES" "$EXTRA" > "{out}"'
    job_id = backend.submit(JobSpec(cores=3, walltime=SHORT, script=script, env={"EXTRA": "two words"}))
    assert final(backend, profile, job_id).state is JobState.COMPLETED
    assert out.read_text() == f"{job_id} 3 two words"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cores=st.integers(1, PARTITION.cores + 4), nodes=st.none() | st.integers(1, PARTITION.nodes + 1))
def test_expected_start_and_submit_agree_on_what_fits(
    backend: BatchBackend, cores: int, nodes: int | None
) -> None:
    """Property: a geometry fits iff it fits the partition; expected_start and submit say so alike."""
    spec = JobSpec(cores=cores, nodes=nodes, walltime=60.0)
    room = PARTITION.cores if nodes is None else nodes * PARTITION.cores_per_node
    if (nodes or 0) > PARTITION.nodes or cores > room:
        with pytest.raises(GeometryError):
            backend.expected_start(spec)
        with pytest.raises(GeometryError):
            backend.submit(spec)
        return
    assert backend.expected_start(spec) is not None
    job_id = backend.submit(spec)
    assert backend.state(job_id).state in (JobState.PENDING, JobState.RUNNING)
    backend.cancel(job_id)

"""A workflow under Big-Job, Per-Stage and ASA on real Slurm and on the mock, beside the same background.

The second half of ``benchmarks/slurm_oracle.py`` (``--strategies``). Everything is on the scaled clock
(K trace seconds per real second): the background is a synthetic workload scaled as the job-level replay
scales it (:func:`~tests.fixtures.slurm_oracle.scale_workload`: whole-minute limits, sleeps inside them)
and the workflow's task runtimes are divided by K.

- **On Slurm** (:func:`run_on_slurm`): the background jobs are submitted from a thread at their scaled
  times; after ``warmup`` seconds the workflow runs through the real run driver
  (:class:`~elastic.control.runner.Runner`), the Slurm backend and the agent pool
  (:class:`~elastic.control.pool_execution.PoolExecution`): pilots are batch jobs, tasks are ``sleep``
  processes in them. The cluster is emptied before the next run.
- **On the mock** (:func:`run_on_mock`): the same background jobs preloaded into
  :class:`~elastic.backends.mock.MockBackend` (the same policy as the job-level comparison, and the
  priority model the Slurm backend reads for the oracle cluster,
  :func:`~tests.fixtures.slurm_oracle.mock_priority`, so that the strategies plan with the same model
  on both backends), started ``warmup`` seconds in, the same run driver with simulated task execution
  (:class:`~elastic.control.sim_execution.SimExecution`) on the virtual clock. Walltime requests are
  rounded up to whole minutes as Slurm rounds them (:class:`MinuteMock`).

Run ``r`` of every strategy on both backends uses background seed ``r`` and task-duration seed ``r``
(the run driver samples the durations), so the comparison is paired; each run has a fresh wait learner.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from elastic.backends.mock import MockBackend
from elastic.backends.slurm import SlurmBackend
from elastic.batch import JobSpec
from elastic.control.execution import RunResult
from elastic.control.pool_execution import PoolExecution
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.learners.choice import make_wait_learner
from elastic.simulator.synthetic import synthetic_workload
from elastic.simulator.workload import Workload
from elastic.strategies import Knowledge, make_strategy, strategy_learner
from elastic.timeline import EventKind
from elastic.workflow import Workflow, builtin_workflow
from tests.fixtures.slurm_oracle import OracleCluster, ScaledJobs, mock_priority, scale_workload

__all__ = [
    "LAUNCH_GAPS",
    "MinuteMock",
    "WorkflowRun",
    "background_jobs",
    "compare_strategies",
    "launch_gaps",
    "measure_launch",
    "run_on_mock",
    "run_on_slurm",
    "scaled_workflow",
    "stage_names",
]


def scaled_workflow(name: str, k: float) -> Workflow:
    """A built-in workflow with its task runtimes divided by ``k`` (seconds on the scaled clock)."""
    wf = builtin_workflow(name)
    stages = tuple(replace(s, runtime=None if s.runtime is None else s.runtime / k) for s in wf.stages)
    return Workflow(f"{wf.name}/K{k:g}", stages)


def background_jobs(
    cores: int, *, load: float, span: float, k: float, seed: int, runtime_median: float = 1200.0
) -> ScaledJobs:
    """A synthetic background arriving over ``span`` scaled seconds, on the scaled clock.

    Generated in trace seconds (median runtime ``runtime_median``, walltime twice the runtime, at
    most half the partition wide, at most 4 h) and scaled by ``k``.
    """
    w = synthetic_workload(
        jobs=4000,
        processors=cores,
        utilisation=load,
        runtime_median=runtime_median,
        runtime_sigma=1.0,
        max_cores=cores // 2,
        estimate_ratio=2.0,
        max_runtime=2 * 3600.0,
        seed=seed,
    )
    jobs = scale_workload(w, k)
    if jobs.submit.max() < span:
        raise ValueError(f"4000 background jobs arrive over {jobs.submit.max():.0f} s, less than {span:g} s")
    keep = jobs.submit <= span
    return ScaledJobs(
        submit=jobs.submit[keep],
        cores=jobs.cores[keep],
        minutes=jobs.minutes[keep],
        sleep=jobs.sleep[keep],
        k=k,
    )


def _as_workload(jobs: ScaledJobs, cores: int) -> Workload:
    n = len(jobs)
    return Workload(
        job_id=np.arange(1, n + 1, dtype=np.int64),
        submit=jobs.submit.astype(float),
        cores=jobs.cores.astype(np.int64),
        runtime=jobs.sleep.astype(float),
        walltime=jobs.minutes.astype(float) * 60.0,
        user=np.zeros(n, dtype=np.int64),
        recorded_wait=np.full(n, np.nan),
        processors=cores,
        source="oracle background (scaled)",
    )


class MinuteMock(MockBackend):
    """The mock backend with Slurm's whole-minute time limits: every walltime is rounded up to minutes.

    ``sbatch -t`` takes whole minutes (the Slurm backend submits ``ceil(walltime / 60)``); at K = 60 a
    minute is an hour of the trace, so the mock must plan with the same rounded limits.
    """

    @staticmethod
    def _minutes(walltime: float) -> float:
        return max(1, math.ceil(walltime / 60.0 - 1e-9)) * 60.0

    def submit(self, spec: JobSpec) -> str:
        """Submit with the walltime rounded up to whole minutes."""
        return super().submit(replace(spec, walltime=self._minutes(spec.walltime)))

    def expected_start(self, spec: JobSpec) -> float | None:
        """Expected start of ``spec`` with its walltime rounded up to whole minutes."""
        return super().expected_start(replace(spec, walltime=self._minutes(spec.walltime)))

    def shorten(self, job_id: str, walltime: float) -> None:
        """Lower a pending job's walltime to ``walltime`` rounded up to whole minutes."""
        super().shorten(job_id, self._minutes(walltime))


@dataclasses.dataclass(frozen=True)
class WorkflowRun:
    """One run of the workflow (scaled seconds; core-seconds charged on the scaled clock)."""

    backend: str
    strategy: str
    rep: int
    status: str
    makespan: float
    charged: float
    used: float
    allocations: int
    stage_waits: tuple[float, ...]

    @classmethod
    def of(cls, backend: str, strategy: str, rep: int, result: RunResult) -> WorkflowRun:
        """Take the figures out of a run's result."""
        m = result.metrics
        return cls(
            backend=backend,
            strategy=strategy,
            rep=rep,
            status=result.status,
            makespan=float(m.makespan),
            charged=float(m.core_seconds_charged),
            used=float(m.core_seconds_used),
            allocations=int(m.allocations),
            stage_waits=tuple(float(s.queue_wait) for s in m.stages),
        )


def _knowledge(workflow: Workflow, strategy: str, rep: int, backend: str, k: float) -> Knowledge:
    # Every time a Knowledge takes is in backend seconds: the defaults (a minute of agent start-up
    # overhead, an hour's default runtime) are trace times, so they are scaled too.
    return Knowledge(
        workflow,
        waits=make_wait_learner(strategy_learner(strategy), seed=rep),
        backend=backend,
        overhead=max(5.0, 60.0 * 60.0 / k),
        default_runtime=3600.0 / k,
        refresh=1.0,
    )


def run_on_mock(
    workflow: Workflow,
    strategy: str,
    background: ScaledJobs,
    *,
    rep: int,
    cores: int,
    warmup: float,
    policy: str = "slurm",
    priority: str | None = None,
    poll_interval: float = 1.0,
    max_duration: float = 3600.0,
    drain_margin: float = 2.0,
    startup: float = 0.0,
    task_overhead: float = 0.0,
) -> WorkflowRun:
    """The workflow on the mock (virtual clock) after ``warmup`` seconds of ``background``.

    ``priority`` is the mock's priority model; None (default) is the one the Slurm backend reads for the
    oracle cluster (:func:`~tests.fixtures.slurm_oracle.mock_priority`).

    ``drain_margin`` (seconds before an allocation's end when no task is placed on it) is the Slurm
    runs' pool setting; ``startup`` and ``task_overhead`` are :class:`SimExecution`'s (seconds from an
    allocation's start to its first task, and that every task runs beyond its duration).
    """
    result = _mock_result(
        workflow, strategy, background, rep=rep, cores=cores, warmup=warmup, policy=policy,
        priority=mock_priority() if priority is None else priority, poll_interval=poll_interval,
        max_duration=max_duration, drain_margin=drain_margin, startup=startup, task_overhead=task_overhead,
    )  # fmt: skip
    return WorkflowRun.of("mock", strategy, rep, result)


def _mock_result(
    workflow: Workflow,
    strategy: str,
    background: ScaledJobs,
    *,
    rep: int,
    cores: int,
    warmup: float,
    policy: str,
    priority: str,
    poll_interval: float,
    max_duration: float,
    drain_margin: float,
    startup: float,
    task_overhead: float = 0.0,
) -> RunResult:
    backend = MinuteMock(
        nodes=cores,
        cores_per_node=1,
        policy=policy,
        priority=priority,
        workload=_as_workload(background, cores),
        start=warmup,
    )
    runner = Runner(
        workflow,
        make_strategy(strategy),
        backend,
        SimExecution(drain_margin=drain_margin, startup=startup, task_overhead=task_overhead),
        _knowledge(workflow, strategy, rep, "mock", background.k),
        seed=rep,
        poll_interval=poll_interval,
        max_duration=max_duration,
    )
    try:
        return runner.run()
    finally:
        backend.close()


class _Submitter:
    """Background jobs submitted to the cluster at their scaled times, from a thread."""

    def __init__(self, cluster: OracleCluster, jobs: ScaledJobs) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = 0.0

    def start(self) -> float:
        self.t0 = float(math.ceil(time.time()))
        self._thread.start()
        return self.t0

    def _run(self) -> None:
        j = self.jobs
        for i in range(len(j)):
            if self._stop.wait(max(0.0, self.t0 + float(j.submit[i]) - time.time())):
                return
            args = ["sbatch", "--parsable", "-J", "background", "-n", str(int(j.cores[i]))]
            args += ["-t", str(int(j.minutes[i])), "-o", "/dev/null", "--wrap"]
            args += [f"exec sleep {float(j.sleep[i]):.3f}"]
            if self.cluster.run(args, check=False, timeout=30).returncode != 0:
                self.refused += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def run_on_slurm(
    cluster: OracleCluster,
    workflow: Workflow,
    strategy: str,
    background: ScaledJobs,
    *,
    rep: int,
    warmup: float,
    workdir: Path,
    poll_interval: float = 1.0,
    max_duration: float = 1800.0,
    drain_margin: float = 2.0,
) -> WorkflowRun:
    """The workflow on the local Slurm cluster, ``warmup`` seconds after ``background`` starts arriving.

    The cluster is emptied first and afterwards (every job cancelled).
    """
    result = _slurm_result(
        cluster, workflow, strategy, background, rep=rep, warmup=warmup, workdir=workdir,
        poll_interval=poll_interval, max_duration=max_duration, drain_margin=drain_margin,
    )  # fmt: skip
    return WorkflowRun.of("slurm", strategy, rep, result)


def _slurm_result(
    cluster: OracleCluster,
    workflow: Workflow,
    strategy: str,
    background: ScaledJobs,
    *,
    rep: int,
    warmup: float,
    workdir: Path,
    poll_interval: float,
    max_duration: float,
    drain_margin: float,
) -> RunResult:
    cluster.cancel_all(wait=30.0)
    submitter = _Submitter(cluster, background)
    t0 = submitter.start()
    backend = SlurmBackend(partition=cluster.partition, env=cluster.env, workdir=workdir, command_timeout=30)
    executor: PoolExecution | None = None
    try:
        time.sleep(max(0.0, t0 + warmup - time.time()))
        executor = PoolExecution(backend, drain_margin=drain_margin)
        runner = Runner(
            workflow,
            make_strategy(strategy),
            backend,
            executor,
            _knowledge(workflow, strategy, rep, "slurm", background.k),
            seed=rep,
            poll_interval=poll_interval,
            max_duration=max_duration,
        )
        return runner.run()
    finally:
        if executor is not None:
            executor.close()
        submitter.stop()
        cluster.cancel_all(wait=30.0)


def compare_strategies(
    cluster: OracleCluster | None,
    workflow: Workflow,
    strategies: Sequence[str],
    *,
    reps: int,
    cores: int,
    load: float,
    span: float,
    warmup: float,
    k: float,
    workdir: Path,
    policies: Sequence[str] = ("slurm",),
    progress: Callable[[WorkflowRun], None] | None = None,
    startup: float = 0.0,
    task_overhead: float = 0.0,
) -> list[WorkflowRun]:
    """Every strategy ``reps`` times on the mock under each policy, and on Slurm when ``cluster`` is given.

    Runs are paired: repetition ``r`` has the same background and task durations everywhere. A mock
    run's ``backend`` is ``mock:<policy>``; ``startup`` and ``task_overhead`` are its
    :class:`SimExecution`'s.
    """
    runs: list[WorkflowRun] = []
    for rep in range(reps):
        bg = background_jobs(cores, load=load, span=span, k=k, seed=1000 + rep)
        for strategy in strategies:
            found = [
                dataclasses.replace(
                    run_on_mock(
                        workflow,
                        strategy,
                        bg,
                        rep=rep,
                        cores=cores,
                        warmup=warmup,
                        policy=policy,
                        startup=startup,
                        task_overhead=task_overhead,
                    ),
                    backend=f"mock:{policy}",
                )
                for policy in policies
            ]
            if cluster is not None:
                where = workdir / f"{strategy}-{rep}"
                where.mkdir(parents=True, exist_ok=True)
                found.append(
                    run_on_slurm(cluster, workflow, strategy, bg, rep=rep, warmup=warmup, workdir=where)
                )
            for r in found:
                runs.append(r)
                if progress is not None:
                    progress(r)
    return runs


def stage_names(workflow: Workflow) -> list[str]:
    """The workflow's stage names, in order."""
    return [s.name for s in workflow.stages]


LAUNCH_GAPS = (
    "task end to next stage ready",
    "submit to start",
    "start to first task",
    "stage ready to first task",
    "task overrun",
    "last task to run end",
)


def launch_gaps(result: RunResult, mock: RunResult | None = None) -> dict[str, list[float]]:
    """Where a run's allocations spend time that is neither queue nor task, from its timeline.

    Per stage after the first: the last task end before it became ready to that moment (the driver
    noticing the end). Per allocation that ran a task: its batch job's submit to its start as the batch
    system recorded it (``StartTime`` on Slurm: the scheduler's pass), and that start to the first task
    placed on it (on Slurm: ``slurmd`` launching the batch script, the agent's interpreter starting,
    registering with the pool and being offered the task). Per stage after the first: its tasks handed
    out (``STAGE_READY``) to its first task's start on an allocation already running. Per task, given
    the same run on the mock (same seed, so the same sampled durations): how much longer it ran than
    there (the task's process and its result's way back). Per run: the last task's end to the run's end.
    """
    submit: dict[str, float] = {}
    start: dict[str, float] = {}
    first: dict[str, float] = {}
    last_task = run_end = math.nan
    ready: dict[str, float] = {}
    stage_first: dict[str, tuple[float, str | None]] = {}
    for e in result.events:
        if e.kind is EventKind.STAGE_READY and e.stage is not None:
            ready.setdefault(e.stage, e.time)
        elif e.kind is EventKind.TASK_START and e.stage is not None:
            stage_first.setdefault(e.stage, (e.time, e.allocation))
        a = e.allocation
        if e.kind is EventKind.ALLOC_SUBMIT and a is not None:
            submit.setdefault(a, e.time)
        elif e.kind is EventKind.ALLOC_START and a is not None:
            start.setdefault(a, e.time)
        elif e.kind is EventKind.TASK_START and a is not None:
            first.setdefault(a, e.time)
        elif e.kind is EventKind.TASK_END:
            last_task = e.time if math.isnan(last_task) else max(last_task, e.time)
        elif e.kind is EventKind.RUN_END:
            run_end = e.time
    used = [a for a in first if a in start]
    handoff = [
        t - ready[s]
        for s, (t, a) in stage_first.items()
        if s in ready and a in start and start[a] < ready[s] and ready[s] > min(ready.values())
    ]
    overrun = []
    if mock is not None:
        ran = _task_times(result)
        for task, took in _task_times(mock).items():
            if task in ran:
                overrun.append(ran[task] - took)
    ends = sorted(e.time for e in result.events if e.kind is EventKind.TASK_END)
    noticed = []
    for t in sorted(ready.values())[1:]:
        before = [x for x in ends if x <= t]
        if before:
            noticed.append(t - before[-1])
    return {
        LAUNCH_GAPS[0]: noticed,
        LAUNCH_GAPS[1]: [start[a] - submit[a] for a in used if a in submit],
        LAUNCH_GAPS[2]: [first[a] - start[a] for a in used],
        LAUNCH_GAPS[3]: handoff,
        LAUNCH_GAPS[4]: overrun,
        LAUNCH_GAPS[5]: [run_end - last_task],
    }


def _task_times(result: RunResult) -> dict[str, float]:
    """Each task's successful attempt: end - start."""
    began: dict[tuple[str, str | None], float] = {}
    out: dict[str, float] = {}
    for e in result.events:
        if e.task is None:
            continue
        if e.kind is EventKind.TASK_START:
            began[e.task, e.allocation] = e.time
        elif e.kind is EventKind.TASK_END and (e.task, e.allocation) in began:
            out[e.task] = e.time - began[e.task, e.allocation]
    return out


def measure_launch(
    cluster: OracleCluster,
    workflow: Workflow,
    strategies: Sequence[str],
    *,
    reps: int,
    cores: int,
    k: float,
    workdir: Path,
    progress: Callable[[str], None] | None = None,
    startup: float = 0.0,
    task_overhead: float = 0.0,
) -> tuple[list[WorkflowRun], dict[str, list[float]]]:
    """The workflow on an idle cluster (no background) and on an idle mock: the gaps and both makespans.

    With no queue, every difference in makespan between the two is what Slurm and the agents add
    around the tasks (:func:`launch_gaps`, against a mock run without ``startup`` and ``task_overhead``
    so that task overruns are against the bare durations). The mock run returned is one with the given
    ``startup`` and ``task_overhead``: what is left of the gap with the model.
    """
    empty = ScaledJobs(
        submit=np.zeros(0), cores=np.zeros(0, dtype=np.int64), minutes=np.zeros(0, dtype=np.int64),
        sleep=np.zeros(0), k=k,
    )  # fmt: skip
    runs: list[WorkflowRun] = []
    gaps: dict[str, list[float]] = {g: [] for g in LAUNCH_GAPS}
    for rep in range(reps):
        for strategy in strategies:
            mocked = _mock_result(
                workflow, strategy, empty, rep=rep, cores=cores, warmup=0.0, policy="slurm",
                priority=mock_priority(), poll_interval=1.0, max_duration=3600.0, drain_margin=2.0,
                startup=0.0,
            )  # fmt: skip
            mock = run_on_mock(
                workflow, strategy, empty, rep=rep, cores=cores, warmup=0.0, startup=startup,
                task_overhead=task_overhead,
            )  # fmt: skip
            where = workdir / f"launch-{strategy}-{rep}"
            where.mkdir(parents=True, exist_ok=True)
            result = _slurm_result(
                cluster, workflow, strategy, empty, rep=rep, warmup=0.0, workdir=where,
                poll_interval=1.0, max_duration=1800.0, drain_margin=2.0,
            )  # fmt: skip
            slurm = WorkflowRun.of("slurm", strategy, rep, result)
            found = launch_gaps(result, mocked)
            for g in LAUNCH_GAPS:
                gaps[g] += found[g]
            runs += [mock, slurm]
            if progress is not None:
                cells = "; ".join(f"{g} " + " ".join(f"{x:.1f}" for x in found[g]) for g in LAUNCH_GAPS)
                progress(
                    f"{strategy} {rep}: makespan Slurm {slurm.makespan:.1f} s, mock {mock.makespan:.1f} s, "
                    f"({slurm.allocations} jobs); {cells}"
                )
    return runs, gaps

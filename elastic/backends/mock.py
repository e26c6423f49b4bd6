"""The mock batch backend: a simulated Slurm-like partition behind the :class:`BatchBackend` protocol.

Strategies and the pool use it exactly like real Slurm. Background load (a :class:`Workload`, from an
SWF trace or the synthetic generator) is replayed into the same queue, so submitted jobs wait behind
realistic competition.

Two clocks (see :mod:`elastic.simulator.clock`):

- ``clock="virtual"`` (default): simulated time moves only through :meth:`MockBackend.sleep`, as fast as
  the machine allows. Jobs are purely simulated (``JobSpec.runtime``, or hold their cores until
  cancelled or killed at the walltime); a ``script`` is refused.
- ``clock="scaled"``: simulated time runs ``speedup`` times faster than real time and a background
  thread keeps the simulation at that time. A job with a ``script`` is a *pilot*: when it starts,
  ``bash -c script`` runs as a local process in its own process group, with ``ELASTIC_JOB_ID`` and
  ``ELASTIC_JOB_CORES`` set; the job COMPLETES or FAILS when the process exits, and the whole process
  group gets SIGTERM (then SIGKILL after ``grace`` real seconds) at TIMEOUT, cancel or job end.

Every public method is thread-safe.

Over 500 lines because one class implements the whole
:class:`~elastic.backends.base.BatchBackend` contract (and its optional parts) on both clocks, around the
simulation engine.
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from elastic.backends._pilots import Pilots
from elastic.batch import Dependency, DependencyKind, JobInfo, JobSpec, JobState, PartitionInfo
from elastic.errors import ConfigError, DependencyError, SubmitError, UnknownJobError, UnknownNameError
from elastic.simulator.base import QueuePolicy, make_policy
from elastic.simulator.clock import ScaledClock, VirtualClock
from elastic.simulator.engine import Engine
from elastic.simulator.expected import expected_start
from elastic.simulator.jobs import FUTURE, RUNNING, STATES
from elastic.simulator.pinned import PINNED_ORDERS
from elastic.simulator.priority import DEFAULT_MAX_AGE, DEFAULT_PRIORITY, check_priority
from elastic.simulator.workload import Workload

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MockBackend"]

logger = logging.getLogger(__name__)

_CLOCKS = ("virtual", "scaled")


class MockBackend:
    """Simulated batch system implementing :class:`~elastic.backends.base.BatchBackend`.

    Parameters
    ----------
    nodes : int, default 16
        Nodes of the partition.
    cores_per_node : int, default 1
        Cores per node.
    policy : str or QueuePolicy, default "easy"
        Queue policy: ``easy``, ``conservative``, ``fcfs``, ``sejf``, ``lejf`` or an instance.
    speculative : bool, default False
        Speculative backfilling (with ``policy="easy"``).
    workload : Workload or None, default None
        Background jobs replayed into the queue; must fit the partition.
    clock : {"virtual", "scaled"}, default "virtual"
        How simulated time relates to real time (see the module docstring).
    speedup : float, default 1.0
        Scaled clock only: simulated seconds per real second (K).
    start : float, default 0.0
        Simulated time to start at; background jobs submitted before are simulated first (warm-up),
        so the queue is already busy.
    kill_invalid_dep : bool, default True
        Cancel jobs whose dependency can never be satisfied instead of leaving them pending with reason
        DependencyNeverSatisfied. True matches the Slurm backend, which always submits with
        ``--kill-on-invalid-dep=yes``.
    max_walltime : float or None, default None
        Partition time limit in seconds; longer requests are refused at submit.
    grace : float, default 2.0
        Real seconds between SIGTERM and SIGKILL when a pilot's process group is stopped.
    partition_name : str, default "mock"
        Name reported by :meth:`partition`.
    mode : {"replay", "recorded", "recorded-chain", "calibrated", "capacity"}, default "replay"
        How background jobs load the queue (see :mod:`elastic.simulator.fidelity`). ``replay``: they
        are queued and scheduled with submitted jobs. The other modes (``workload`` must come from a
        trace with recorded waits) pin every background job outside ``fidelity_cores`` at its
        recorded start and plan the others and the submitted jobs into the capacity left, with
        ``policy`` ``"conservative"`` or ``"fcfs"``: the set-up whose waits ``elastic fidelity``
        compares with the recorded ones. ``recorded-chain``, ``calibrated`` and ``capacity`` start a
        user's jobs in submit order (trace users, and ``JobSpec.user`` for submitted jobs);
        ``capacity`` offers only the cores the recorded schedule used in the last
        ``capacity_window`` (the closest to the traced centre's waits).
    reserve : int or None, default 0
        ``mode="calibrated"``: cores never given to queued jobs; None fits them to the trace
        (:func:`~elastic.simulator.fidelity.calibrate_reserve`, a few simulations of the trace).
    fidelity_cores : tuple of (int, int), default (16, 128)
        Recorded modes: size class (cores, inclusive) of the trace jobs that stay queued.
    capacity_window : float or None, default None
        ``mode="capacity"``: look-back in seconds of the usable-size estimate; None derives it from
        the trace (:func:`~elastic.simulator.recorded.capacity_window`).
    queue_rules : bool, default True
        ``mode="capacity"``: apply the queue rules derived from the trace (queues whose jobs started at
        once simulated apart, queues of short jobs planned first; :mod:`elastic.simulator.modes`).
        ``--no-queue-rules`` on the command line.
    priority : {"age", "basic", "accrue-always"}, default "age"
        How a job held by a dependency or ``begin`` ranks once eligible
        (:mod:`elastic.simulator.priority`): ``age`` behind every job already waiting (Slurm's
        multifactor priority, the common site setting), ``basic`` (FIFO) or ``accrue-always``
        (multifactor with ``PriorityFlags=ACCRUE_ALWAYS``) at its submit place.
    priority_max_age : float, default 604800.0
        ``priority="age"``: Slurm's ``PriorityMaxAge`` in seconds (age factor capped after it).

    Examples
    --------
    >>> from elastic.backends.base import JobSpec
    >>> b = MockBackend(nodes=4)
    >>> a = b.submit(JobSpec(cores=4, walltime=60.0, runtime=30.0))
    >>> b.expected_start(JobSpec(cores=1, walltime=10.0))
    60.0
    >>> b.sleep(45.0); b.state(a).state.value
    'COMPLETED'
    """

    def __init__(
        self,
        *,
        nodes: int = 16,
        cores_per_node: int = 1,
        policy: str | QueuePolicy[Engine] = "easy",
        speculative: bool = False,
        workload: Workload | None = None,
        clock: str = "virtual",
        speedup: float = 1.0,
        start: float = 0.0,
        kill_invalid_dep: bool = True,
        max_walltime: float | None = None,
        grace: float = 2.0,
        partition_name: str = "mock",
        mode: str = "replay",
        reserve: int | None = 0,
        fidelity_cores: tuple[int, int] = (16, 128),
        capacity_window: float | None = None,
        queue_rules: bool = True,
        priority: str = DEFAULT_PRIORITY,
        priority_max_age: float = DEFAULT_MAX_AGE,
    ) -> None:
        priority = check_priority(priority)
        if clock not in _CLOCKS:
            raise UnknownNameError("clock", clock, _CLOCKS)
        if max_walltime is not None and not max_walltime > 0:
            raise ConfigError(f"max_walltime must be > 0 seconds or None, got {max_walltime}")
        pinned = None
        self._recorded = mode != "replay"
        self._user_chain: dict[int, int] | None = None
        self._last_of_user: dict[str, int] = {}
        if mode != "replay":
            from elastic.simulator.fidelity import backend_setup

            if policy not in PINNED_ORDERS or speculative:
                raise ConfigError(
                    f"mode {mode!r} plans submitted jobs around the recorded schedule: it needs policy "
                    f"'conservative' or 'fcfs' without speculation, got policy {policy!r}"
                    + (" with speculation" if speculative else "")
                )
            assert isinstance(policy, str)
            pinned_policy, queued, pins, starts = backend_setup(
                workload,
                mode,
                order=policy,
                reserve=reserve,
                cores=fidelity_cores,
                window=capacity_window,
                queues=queue_rules,
            )
            pol: QueuePolicy[Engine] = pinned_policy
            pinned, workload = (pins, starts), queued
            self._user_chain = pinned_policy.chain  # type: ignore[assignment]
        else:
            pol = make_policy(policy, speculative=speculative) if isinstance(policy, str) else policy
        self._lock = threading.RLock()
        self._engine = Engine(
            nodes=nodes,
            cores_per_node=cores_per_node,
            policy=pol,
            workload=workload,
            kill_invalid_dep=kill_invalid_dep,
            observer=self,
            priority=priority,
            max_age=priority_max_age,
        )
        if pinned is not None:
            self._engine.pin(*pinned)
        self._partition = PartitionInfo(partition_name, nodes, cores_per_node, max_walltime)
        self._pilots = Pilots(grace)
        self._closed = False
        self._watched: dict[int, tuple[int, float, float, float]] = {}
        """Submitted jobs not seen final yet, with what :meth:`state` reported of them when last looked at."""
        self._job_changes = 0
        self._change_log: list[int] = []
        """The job of each change counted in :attr:`_job_changes`, in order (``jobs_changed_since``)."""
        if start:
            self._engine.run(until=float(start))
        self._clock: VirtualClock | ScaledClock
        if clock == "virtual":
            self._clock = VirtualClock(self._advance, lambda: self._engine.now)
        else:
            self._clock = ScaledClock(speedup, self._engine.now, self._tick)
            self._clock.start()
            # Pilot processes live in their own sessions: do not leave them behind if the caller
            # forgets close().
            atexit.register(self.close)

    # -- BatchBackend ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``"mock"``."""
        return "mock"

    @property
    def speedup(self) -> float | None:
        """Simulated seconds per real second on the scaled clock; None on the virtual clock."""
        return self._clock.speedup if isinstance(self._clock, ScaledClock) else None

    @property
    def priority(self) -> str:
        """The priority model held jobs are ranked by (see :mod:`elastic.simulator.priority`)."""
        return self._engine.ranking.name

    @property
    def estimates_see_ahead(self) -> bool:
        """Whether :meth:`expected_start` knows jobs not yet submitted (the recorded modes).

        The recorded modes pin the trace's jobs at their recorded starts, those submitted later
        included, and plan ours around them: the estimate is then the wait itself, which no real
        queue can tell. The run controller does not show such estimates to a strategy.
        """
        return self._recorded

    def priority_model(self) -> str:
        """Return :attr:`priority`, as :meth:`elastic.backends.slurm.SlurmBackend.priority_model` does."""
        return self.priority

    @property
    def engine(self) -> Engine:
        """The simulation engine (for records and metrics; do not drive it directly in scaled mode)."""
        return self._engine

    def now(self) -> float:
        """Return the current simulated time in seconds."""
        with self._lock:
            self._catch_up()
            return self._engine.now

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass (instantly on the virtual clock)."""
        if seconds < 0:
            raise ConfigError(f"sleep seconds must be >= 0, got {seconds}")
        self._clock.sleep(seconds)
        with self._lock:
            self._catch_up()

    def partition(self) -> PartitionInfo:
        """Return the simulated partition."""
        return self._partition

    def submit(self, spec: JobSpec) -> str:
        """Submit a job now and return its id (see :meth:`BatchBackend.submit`)."""
        self._check_spec(spec)
        with self._lock:
            self._catch_up()
            deps = self._dependencies(spec.dependencies)
            j = len(self._engine.jobs)
            if self._user_chain is not None and spec.user is not None:  # a user's jobs start in order
                if spec.user in self._last_of_user:
                    self._user_chain[j] = self._last_of_user[spec.user]
                self._last_of_user[spec.user] = j
            if spec.script is not None:
                self._pilots.scripts[j] = (spec.script, dict(spec.env))
            self._engine.submit(
                cores=spec.cores,
                nodes=spec.nodes,
                walltime=spec.walltime,
                runtime=spec.runtime,
                name=spec.name,
                user=spec.user,
                dependencies=deps,
                begin=spec.begin,
                job_id=_job_id(j),
                notify=spec.script is not None,
            )
            self._watched[j] = self._signature(j)
            self._job_changes += 1
            self._change_log.append(j)
            return _job_id(j)

    def _check_spec(self, spec: JobSpec, *, run: bool = True) -> None:
        if run and spec.script is not None:
            if self._clock.kind == "virtual":
                raise ConfigError(
                    "JobSpec.script needs clock='scaled': a virtual clock cannot run real processes "
                    "(drop the script and give JobSpec.runtime, or use MockBackend(clock='scaled'))"
                )
            if spec.runtime is not None:
                raise ConfigError("JobSpec.runtime must be None when JobSpec.script is set")
        limit = self._partition.max_walltime
        if limit is not None and spec.walltime > limit:
            raise SubmitError(
                f"requested walltime {spec.walltime} s exceeds the partition limit {limit} s; "
                f"ask for at most {limit} s"
            )

    def cancel(self, job_id: str) -> None:
        """Cancel a pending or running job; cancelling an ended one does nothing."""
        with self._lock:
            self._catch_up()
            self._engine.cancel(self._index(job_id))

    def shorten(self, job_id: str, walltime: float) -> None:
        """Lower a pending job's walltime (``scontrol update TimeLimit``); see :meth:`SlurmBackend.shorten`.

        A job that started or ended meanwhile, or whose walltime is already at most ``walltime``, is
        left as it is. Raises ConfigError for a walltime that is not a number > 0, and UnknownJobError
        for an id this backend never handed out.
        """
        if not (isinstance(walltime, (int, float)) and math.isfinite(walltime) and walltime > 0):
            raise ConfigError(f"shorten: walltime must be a number of seconds > 0, got {walltime!r}")
        with self._lock:
            self._catch_up()
            self._engine.shorten(self._index(job_id), float(walltime))

    def set_dependencies(self, job_id: str, dependencies: Sequence[Dependency]) -> None:
        """Replace a pending job's dependencies (``scontrol update Dependency=``).

        See :meth:`SlurmBackend.set_dependencies`. A job that started or ended meanwhile is left as it
        is. Raises UnknownJobError for an id this backend never handed out, and DependencyError for a
        dependency on one.
        """
        with self._lock:
            self._catch_up()
            j = self._index(job_id)
            if self._engine.set_dependencies(j, self._dependencies(tuple(dependencies))):
                self._job_changes += 1
                self._change_log.append(j)

    def state(self, job_id: str) -> JobInfo:
        """Return the current state of one job (ended ones included)."""
        with self._lock:
            self._catch_up()
            return self._info(self._index(job_id))

    def queue(self) -> list[JobInfo]:
        """Every pending or running job (background ones included), like ``squeue``."""
        with self._lock:
            self._catch_up()
            eng = self._engine
            jobs = sorted(
                [j for _, j in eng.running] + list(eng.queue) + list(eng.held), key=eng.jobs.rank.__getitem__
            )
            return [self._info(j) for j in jobs]

    def jobs_version(self) -> int:
        """Return a number that changes whenever a job submitted here may have changed (not background ones).

        Its state, start, end or time limit (what :meth:`state` reports of it), or a new submission
        (:class:`~elastic.backends.base.ReportsJobChanges`): run control reads the state of its open jobs
        only when this changed.
        """
        with self._lock:
            self._catch_up()
            watched = self._watched
            for j, signature in list(watched.items()):
                now = self._signature(j)
                if now != signature:
                    self._job_changes += 1
                    self._change_log.append(j)
                    if STATES[now[0]].is_final:
                        del watched[j]  # a final job changes no more
                    else:
                        watched[j] = now
            return self._job_changes

    def jobs_changed_since(self, version: int) -> frozenset[str]:
        """Return the ids of the jobs submitted here that changed since ``jobs_version()`` gave ``version``.

        As of the last :meth:`jobs_version` (:class:`~elastic.backends.base.NamesJobChanges`).
        """
        with self._lock:
            return frozenset(_job_id(j) for j in self._change_log[version:])

    def _signature(self, j: int) -> tuple[int, float, float, float]:
        jobs = self._engine.jobs
        return jobs.state[j], jobs.start[j], jobs.end[j], jobs.walltime[j]

    def queue_version(self) -> tuple[int, ...]:
        """Return a value that changes whenever :meth:`expected_start`'s queue snapshot may have changed.

        Jobs submitted, queue places taken or given up (a start, an end, a cancellation, a lowered time
        limit, a job released from its hold or moved by its priority): a strategy may reuse what it
        derived from the estimate while this is the same
        (:attr:`~elastic.strategies.base.RunView.queue_version`).
        """
        with self._lock:
            self._catch_up()
            eng = self._engine
            return (len(eng.jobs), eng.release_count, len(eng.running), len(eng.queue), len(eng.held))

    def expected_start(self, spec: JobSpec) -> float | None:
        """When ``spec`` would start if submitted now; refuses like submit.

        The same computation as the Slurm backend's (:mod:`elastic.simulator.snapshot`): the queue as
        ``squeue`` would show it, every job held to its time limit, simulated under this backend's
        policy (:func:`elastic.simulator.expected.expected_start`).
        """
        self._check_spec(spec, run=False)
        with self._lock:
            self._catch_up()
            deps = self._dependencies(spec.dependencies)
            return expected_start(
                self._engine,
                cores=spec.cores,
                walltime=spec.walltime,
                nodes=spec.nodes,
                dependencies=deps,
                begin=spec.begin,
            )

    def records(self) -> pd.DataFrame:
        """Return the per-job records of every job so far (see :meth:`Engine.records`), thread-safely."""
        with self._lock:
            self._catch_up()
            return self._engine.records()

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the clock thread and kill every pilot process still running, and theirs (idempotent)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._clock.stop()
        with self._lock:
            self._pilots.kill_all()

    def __enter__(self) -> MockBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- Observer (called by the engine, lock held) -----------------------------------------------

    def job_started(self, job: int) -> None:
        """Start the pilot process of ``job``."""
        self._pilots.start(job, _job_id(job), self._engine.jobs.cores[job])

    def job_ended(self, job: int) -> None:
        """Stop every process of the job (SIGTERM now, SIGKILL after the grace), as Slurm does.

        That is the pilot's process group and every descendant of the pilot, including tasks that
        started their own session (see :mod:`elastic.backends._pilots`).
        """
        if self._engine.jobs.state[job] != RUNNING:  # requeued: cannot happen for pilots
            self._pilots.ended(job)

    # -- internals -------------------------------------------------------------------------------

    def _advance(self, until: float) -> None:
        with self._lock:
            self._engine.run(until=until)

    def _catch_up(self) -> None:
        if self._clock.kind == "scaled":
            self._engine.run(until=self._clock.target())
            self._poll()

    def _tick(self) -> None:
        with self._lock:
            if not self._closed:
                self._catch_up()

    def _poll(self) -> None:
        eng = self._engine

        def exited(job: int, code: int) -> bool:
            if eng.jobs.state[job] != RUNNING:
                return False
            logger.info("job %s: pilot process exited with code %s", _job_id(job), code)
            eng.finish(job, code)
            return True

        self._pilots.poll(exited)

    def _index(self, job_id: str) -> int:
        try:
            j = int(job_id) - 1
        except (TypeError, ValueError):
            raise UnknownJobError(job_id) from None
        if not 0 <= j < len(self._engine.jobs) or self._engine.jobs.state[j] == FUTURE:
            raise UnknownJobError(job_id)
        return j

    def _dependencies(self, deps: tuple[Dependency, ...]) -> list[tuple[DependencyKind, int]]:
        out = []
        for dep in deps:
            try:
                out.append((DependencyKind(dep.kind), self._index(dep.job_id)))
            except UnknownJobError:
                raise DependencyError(
                    f"dependency {dep} names job {dep.job_id!r}, which this backend does not know; "
                    "depend only on ids returned by submit()"
                ) from None
        return out

    def _info(self, j: int) -> JobInfo:
        eng = self._engine
        jobs = eng.jobs
        st = STATES[jobs.state[j]]
        start = jobs.start[j]
        end = jobs.end[j]
        exit_code = jobs.exit_code[j]
        if exit_code is None and st is _COMPLETED:
            exit_code = 0
        name = jobs.name[j]
        user = jobs.user[j]
        return JobInfo(
            job_id=_job_id(j),
            name=name if name is not None else f"background-{jobs.job_id[j]}",
            state=st,
            reason=eng.reason(j),
            cores=jobs.cores[j],
            walltime=jobs.walltime[j],
            submit_time=jobs.submit[j],
            start_time=None if math.isnan(start) else start,
            end_time=None if math.isnan(end) else end,
            exit_code=exit_code,
            user=None if user is None else str(user),
        )


_COMPLETED = JobState.COMPLETED  # looked up once: an enum member read costs microseconds on Python 3.11


def _job_id(j: int) -> str:
    return str(j + 1)

"""The fidelity modes: queue waits on the mock backend that look like the traced centre's.

A plain replay of a trace under EASY gives waits far below the recorded ones, because the real centre
had priorities, limits and fragmentation the trace does not record. The modes here keep what the trace
*does* record, the schedule itself:

``replay``
    Every job is queued and scheduled by EASY backfilling (the plain simulator).
``recorded``
    Every background job is pinned at its recorded start for its recorded runtime
    (:meth:`Engine.pin <elastic.simulator.engine.Engine.pin>`); the evaluated ("foreground") jobs are
    queued and planned into the capacity left, by conservative backfilling
    (:class:`~elastic.simulator.pinned.PinnedBackfill`), each for its recorded runtime: the record says
    when it ended, and a walltime plan against pinned jobs (which the real scheduler never knew in
    advance) would refuse gaps the job really ran in. Jobs users submit to the mock backend are planned
    for their walltime, as Slurm does.
``recorded-chain``
    ``recorded``, and a job may not start before the same user's previous job (in submit order) has
    started: users whose earlier jobs still wait, wait (the strongest signal in HPC2N's waits).
``calibrated``
    ``recorded-chain`` with ``reserve`` cores never given to foreground jobs (fragmentation, limits and
    down nodes the trace does not record). ``reserve`` is fitted by bisection so that the median
    simulated wait of the first half of the evaluated jobs matches their recorded median; the report
    also shows the second half, which the fit never saw.
``capacity``
    ``recorded-chain`` on a machine whose usable size follows its recorded use: at time t, the most
    cores the recorded schedule had in use during the preceding ``window``
    (:func:`~elastic.simulator.availability.recorded_capacity`); down or drained nodes and jobs a
    cleaned trace removed are not offered. The window comes from the trace's own time scale, 3 x its
    median requested walltime (:func:`~elastic.simulator.recorded.capacity_window`: 12 h on HPC2N,
    where the factor was chosen). Queues whose other jobs mostly started at once
    (:func:`~elastic.simulator.recorded.fast_queues`, e.g. an interactive queue) had cores of their
    own: they are simulated apart, each partition on the capacity its own jobs used, and jobs
    submitted to the mock backend go to the batch partition. Among the batch queues, those whose jobs
    ask for short walltimes (:func:`~elastic.simulator.recorded.short_queues`, an express queue) are
    planned first. Nothing is fitted to the recorded waits of the evaluated jobs.

:func:`~elastic.simulator.fidelity_report.fidelity_report` runs the modes on a trace and compares, for
the trace's own jobs of a size class (16-128 cores by default), simulated and recorded waits.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.availability import recorded_capacity
from elastic.simulator.engine import Engine
from elastic.simulator.pinned import PinnedBackfill
from elastic.simulator.priority import DEFAULT_PRIORITY
from elastic.simulator.recorded import capacity_window, fast_queues, pinnable, short_queues, user_chain
from elastic.simulator.workload import Workload

__all__ = [
    "MIN_RULE_SHARE",
    "MODES",
    "FidelityResult",
    "check_pinnable",
    "evaluated_jobs",
    "mode_engine",
    "simulate_mode",
    "subset",
]

logger = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("replay", "recorded", "recorded-chain", "calibrated", "capacity")
"""Fidelity modes, from the plain simulator to the recorded schedule on the recorded capacity."""

_PARTITIONS: tuple[str, ...] = ("batch", "fast")
"""Partitions of the ``capacity`` mode: the batch queues, and the fast queues (when the trace has any)."""

_BoolArray = npt.NDArray[np.bool_]
_IntArray = npt.NDArray[np.int64]
_FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FidelityResult:
    """Simulated waits of the evaluated jobs under one mode.

    Attributes
    ----------
    mode : str
        One of :data:`MODES`.
    reserve : int
        Cores held back from foreground jobs (0 unless ``calibrated``).
    jobs : pandas.DataFrame
        One row per evaluated job: ``job_id, user, cores, submit, recorded_wait, wait``.
    window : float
        ``capacity``: look-back of the usable-size estimate in seconds (NaN in the other modes).
    fast_queues : frozenset of int
        ``capacity``: the queues simulated apart, on cores of their own
        (see :func:`~elastic.simulator.recorded.fast_queues`).
    short_queues : frozenset of int
        ``capacity``: the batch queues planned first (see :func:`~elastic.simulator.recorded.short_queues`).
    """

    mode: str
    reserve: int
    jobs: pd.DataFrame
    window: float = math.nan
    fast_queues: frozenset[int] = frozenset()
    short_queues: frozenset[int] = frozenset()


def subset(workload: Workload, mask: _BoolArray) -> Workload:
    """Return the jobs of ``workload`` where ``mask`` is True, as a Workload of the same machine."""
    return workload.select(mask)


def check_pinnable(workload: Workload | None, mode: str) -> Workload:
    """Return ``workload`` if ``mode`` can pin its recorded schedule (see :func:`pinned_setup`).

    Raises
    ------
    ConfigError
        No workload, or a workload without recorded waits.
    UnknownNameError
        ``mode`` is unknown, or ``replay`` (which pins nothing).
    """
    if mode not in MODES[1:]:
        raise UnknownNameError("mode", mode, MODES)
    if workload is None:
        raise ConfigError(
            f"mode {mode!r} pins the recorded schedule of a trace: give a workload read from an SWF "
            "trace with recorded waits (field 3), or use mode='replay'"
        )
    if len(workload) and np.isnan(workload.recorded_wait).all():
        # An empty workload (a quiet stretch of a trace) is fine: nothing to pin, nothing queued.
        raise ConfigError(
            f"mode {mode!r} pins the recorded schedule of a trace, but {workload.source!r} has no recorded "
            "waits (SWF field 3, wait_time, is -1 on every job); use mode='replay'"
        )
    return workload


def pinned_setup(
    workload: Workload | None,
    mode: str,
    *,
    order: str = "conservative",
    reserve: int = 0,
    cores: tuple[int, int] = (16, 128),
    window: float | None = None,
    queues: bool = True,
) -> tuple[PinnedBackfill, Workload, Workload, _FloatArray]:
    """Return :func:`~elastic.simulator.fidelity.backend_setup`'s set-up for a known ``reserve``.

    ``reserve`` applies to ``calibrated`` only (:func:`~elastic.simulator.fidelity.backend_setup`
    fits it first when it is not given); the other parameters, the result and the errors are
    :func:`~elastic.simulator.fidelity.backend_setup`'s.
    """
    checked = check_pinnable(workload, mode)
    x = reserve if mode == "calibrated" else 0
    evaluated = evaluated_jobs(checked, cores, require=False)
    setup = _parts(_Inputs.derive(checked, mode, evaluated, x, order, window, queues), "batch")
    return setup.policy, setup.queued, setup.pinned, setup.starts


@dataclass(frozen=True, slots=True)
class _Setup:
    """One partition's simulation set-up: policy, queued and pinned jobs, and which jobs are queued."""

    policy: PinnedBackfill
    queued: Workload
    pinned: Workload
    starts: _FloatArray
    evaluated: _BoolArray  # over the whole workload: the queued jobs


MIN_RULE_SHARE = 0.01
"""A queue rule resting on fewer than this share of a trace's jobs is weak and not applied (issue 31)."""


@dataclass(frozen=True, slots=True)
class _Queues:
    """The capacity mode's queue rules, derived once per trace from the jobs it does not evaluate."""

    fast: frozenset[int] = frozenset()
    """Queues simulated apart, on cores of their own (:func:`~elastic.simulator.recorded.fast_queues`)."""
    short: frozenset[int] = frozenset()
    """Batch queues planned first (:func:`~elastic.simulator.recorded.short_queues`)."""

    @classmethod
    def of(cls, workload: Workload, evaluated: _BoolArray, *, enabled: bool) -> _Queues:
        """Derive the rules (none when not ``enabled``: another mode, or ``queues=False``).

        A fast or short queue read from under :data:`MIN_RULE_SHARE` of the trace's jobs is weak: it is
        not applied, with a warning. (A batch partition that the fast queues leave with so few jobs is
        reported as weak where it is built, :func:`_parts`.)
        """
        if not enabled or workload.queue is None or len(workload) == 0:
            return cls()
        fast = fast_queues(workload, ~evaluated)
        short = short_queues(workload, ~evaluated) - fast
        least = MIN_RULE_SHARE * len(workload)
        names, counts = np.unique(workload.queue[~evaluated], return_counts=True)
        basis = dict(zip(names.tolist(), counts.tolist(), strict=True))
        weak = sorted(q for q in fast | short if basis.get(q, 0) < least)
        if weak:
            logger.warning(
                "%s: queue rules for queues %s not applied: each rests on under %.0f%% of the trace's %d "
                "jobs (weak)",
                workload.source,
                weak,
                100 * MIN_RULE_SHARE,
                len(workload),
            )
            fast, short = fast - set(weak), short - set(weak)
        return cls(frozenset(fast), frozenset(short))

    def in_fast(self, workload: Workload) -> _BoolArray:
        """Which jobs of ``workload`` are in a fast queue."""
        if not self.fast or workload.queue is None:
            return np.zeros(len(workload), dtype=bool)
        return np.isin(workload.queue, list(self.fast))


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What one simulation of a trace under a mode needs, derived once and shared by its partitions."""

    workload: Workload
    mode: str
    evaluated: _BoolArray
    reserve: int
    order: str
    look_back: float  # the capacity mode's look-back in seconds (NaN in other modes)
    queues: _Queues

    @classmethod
    def derive(
        cls,
        workload: Workload,
        mode: str,
        evaluated: _BoolArray,
        reserve: int,
        order: str,
        window: float | None,
        queues: bool,
    ) -> _Inputs:
        """Derive the look-back (None: from the trace) and the queue rules, for the capacity mode only."""
        capacity = mode == "capacity"
        look_back = math.nan if not capacity else capacity_window(workload) if window is None else window
        rules = _Queues.of(workload, evaluated, enabled=queues and capacity)
        return cls(workload, mode, evaluated, reserve, order, look_back, rules)


def _parts(inputs: _Inputs, partition: str) -> _Setup:
    """Build one partition's policy, queued and pinned jobs."""
    workload, evaluated, mode, look_back = inputs.workload, inputs.evaluated, inputs.mode, inputs.look_back
    everything = workload
    fast, short = inputs.queues.fast, inputs.queues.short
    capacity = None
    keep = np.ones(len(workload), dtype=bool)
    if mode == "capacity":
        if fast:
            # A queue whose other jobs started at once had cores of its own (an interactive
            # partition): it is simulated apart, on the capacity its own jobs used.
            in_fast = inputs.queues.in_fast(workload)
            keep = in_fast if partition == "fast" else ~in_fast
            if partition == "batch" and in_fast.all():
                logger.warning(
                    "capacity mode on %s: every job is in a queue whose jobs started at once (queues %s), "
                    "so the batch partition, where submitted jobs go, has no background; pass queues=False "
                    "(--no-queue-rules) to treat those queues as batch queues",
                    workload.source,
                    sorted(fast),
                )
            elif partition == "batch" and (~in_fast).sum() < MIN_RULE_SHARE * len(workload):
                logger.warning(
                    "capacity mode on %s: the batch partition, where submitted jobs go, is sized from %d of "
                    "the trace's %d jobs (under %.0f%%: weak), the others being in queues whose jobs started "
                    "at once (queues %s); pass queues=False (--no-queue-rules) to treat those queues as "
                    "batch queues",
                    workload.source,
                    int((~in_fast).sum()),
                    len(workload),
                    100 * MIN_RULE_SHARE,
                    sorted(fast),
                )
            workload, evaluated = workload.select(keep), evaluated[keep]
        times, usable = recorded_capacity(workload, window=look_back)
        capacity = (times.tolist(), usable.tolist())
        logger.info(
            "capacity mode on %s, %s partition: window %.1f h%s%s",
            workload.source,
            partition,
            look_back / 3600,
            f", queues {sorted(fast)} on cores of their own" if fast else "",
            f", queues {sorted(short)} planned first" if short else "",
        )
    fg = subset(workload, evaluated)
    pins = pinnable(workload, ~evaluated)
    bg = subset(workload, pins)
    # Priority class per job: short queues -1, every other job 0 (planned after them).
    rank = np.zeros(len(workload), dtype=np.int64)
    if short and workload.queue is not None:  # only the capacity mode has short queues
        rank[np.isin(workload.queue, list(short))] = -1
    chain: dict[int, int] | None = None
    if mode != "recorded":
        # Engine indices: queued jobs first (0..F-1, in submit order), then pinned jobs.
        engine_index = np.full(len(workload), -1, dtype=np.int64)
        engine_index[evaluated] = np.arange(len(fg))
        engine_index[pins] = len(fg) + np.arange(len(bg))
        prev = user_chain(workload)
        # A user's jobs start in submit order within a queue class: an express job does not wait for
        # the same user's batch job.
        prev = np.where((prev >= 0) & (rank[np.maximum(prev, 0)] == rank), prev, -1)[evaluated]
        parent = np.where(prev >= 0, engine_index[np.maximum(prev, 0)], -1)
        has = np.flatnonzero(parent >= 0)
        chain = dict(zip(has.tolist(), parent[has].tolist(), strict=True))
    ranked = np.flatnonzero(rank[evaluated])
    priority = dict.fromkeys(ranked.tolist(), -1) if ranked.size else None  # every other job: class 0
    policy = PinnedBackfill(
        order=inputs.order,
        reserve=inputs.reserve if mode == "calibrated" else 0,
        chain=chain,
        capacity=capacity,
        trace_jobs=len(fg),
        priority=priority,
    )
    queued = np.zeros(len(everything), dtype=bool)
    queued[np.flatnonzero(keep)[evaluated]] = True
    return _Setup(policy, fg, bg, bg.submit + bg.recorded_wait, queued)


def evaluated_jobs(workload: Workload, cores: tuple[int, int], *, require: bool = True) -> _BoolArray:
    """Return which jobs a report evaluates: ``cores[0]`` to ``cores[1]`` cores, recorded wait known.

    Raises
    ------
    ConfigError
        A bad ``cores`` range, or (``require``) no such job.
    """
    lo, hi = cores
    if not 1 <= lo <= hi:
        raise ConfigError(f"cores must be a range lo:hi with 1 <= lo <= hi, got {lo}:{hi}")
    mask = (workload.cores >= lo) & (workload.cores <= hi) & ~np.isnan(workload.recorded_wait)
    if require and not mask.any():
        raise ConfigError(
            f"no job of {workload.source!r} asks for {lo}-{hi} cores and has a recorded wait; "
            "choose another --cores range"
        )
    return np.asarray(mask, dtype=bool)


def mode_engine(
    workload: Workload,
    mode: str,
    *,
    cores: tuple[int, int] = (16, 128),
    reserve: int = 0,
    order: str = "conservative",
    window: float | None = None,
    queues: bool = True,
    priority: str = DEFAULT_PRIORITY,
    partition: str = "batch",
) -> tuple[Engine, _BoolArray]:
    """Build (not run) the engine that simulates ``workload`` under one fidelity mode.

    In ``replay`` every job is queued under EASY. In the other modes the evaluated jobs (``cores``
    range, recorded wait known) are queued, in submit order, as engine jobs ``0..F-1``; every other
    job with a recorded wait is pinned at its recorded start (jobs ``F..``). In ``capacity``, when the
    trace has fast queues, the engine simulates one partition: the batch queues (where jobs submitted
    to the mock backend go), or the fast queues (``partition="fast"``).

    Parameters
    ----------
    workload : Workload
        A trace with recorded waits.
    mode : str
        One of :data:`MODES`.
    cores : tuple of (int, int), default (16, 128)
        Evaluated jobs: those asking for ``lo`` to ``hi`` cores (inclusive) with a recorded wait.
    reserve : int, default 0
        Cores never given to queued jobs (``calibrated`` only; ignored otherwise).
    order : {"conservative", "fcfs"}, default "conservative"
        Queue discipline of queued jobs in the recorded modes.
    window : float or None, default None
        Look-back in seconds of the ``capacity`` mode's usable-size estimate (ignored otherwise);
        None derives it from the trace (:func:`~elastic.simulator.recorded.capacity_window`).
    queues : bool, default True
        ``capacity`` mode: simulate fast queues apart and plan short queues first (ignored otherwise;
        see :func:`~elastic.simulator.recorded.fast_queues` and
        :func:`~elastic.simulator.recorded.short_queues`).
    priority : str, default "age"
        Priority model of the engine (:mod:`elastic.simulator.priority`; no trace job is held).
    partition : {"batch", "fast"}, default "batch"
        ``capacity`` mode: which partition's engine (the same when the trace has no fast queue).

    Returns
    -------
    (Engine, ndarray of bool)
        The engine, and which workload jobs it queues (evaluated jobs of the partition), in order.

    Raises
    ------
    UnknownNameError
        Unknown ``mode`` or ``order``.
    ConfigError
        No evaluated job, or a bad ``cores`` range.
    """
    if mode not in MODES:
        raise UnknownNameError("mode", mode, MODES)
    if partition not in _PARTITIONS:
        raise UnknownNameError("partition", partition, _PARTITIONS)
    inputs = _Inputs.derive(workload, mode, evaluated_jobs(workload, cores), reserve, order, window, queues)
    return _engine(inputs, priority, partition)


def _engine(inputs: _Inputs, priority: str, partition: str) -> tuple[Engine, _BoolArray]:
    """Build one partition's engine (see :func:`mode_engine`); return it and the jobs it queues."""
    workload = inputs.workload
    if inputs.mode == "replay":
        engine = Engine(nodes=workload.processors, policy="easy", workload=workload, priority=priority)
        return engine, inputs.evaluated
    setup = _parts(inputs, partition)
    engine = Engine(nodes=workload.processors, policy=setup.policy, workload=setup.queued, priority=priority)
    engine.pin(setup.pinned, setup.starts)
    return engine, setup.evaluated


def simulate_mode(
    workload: Workload,
    mode: str,
    *,
    cores: tuple[int, int] = (16, 128),
    reserve: int = 0,
    order: str = "conservative",
    window: float | None = None,
    queues: bool = True,
) -> FidelityResult:
    """Simulate ``workload`` under one fidelity mode; return the evaluated jobs' waits.

    Parameters are those of :func:`mode_engine` (``calibrated`` uses ``reserve`` as given; see
    :func:`calibrate_reserve`).

    Returns
    -------
    FidelityResult
    """
    if mode not in MODES:
        raise UnknownNameError("mode", mode, MODES)
    evaluated = evaluated_jobs(workload, cores)
    inputs = _Inputs.derive(workload, mode, evaluated, reserve, order, window, queues)
    classes = inputs.queues
    partitions = _PARTITIONS if (evaluated & classes.in_fast(workload)).any() else _PARTITIONS[:1]
    start = np.full(len(workload), np.nan)
    for partition in partitions:
        engine, queued = _engine(inputs, DEFAULT_PRIORITY, partition)
        engine.run()
        starts = np.asarray(engine.jobs.start[: len(workload)], dtype=np.float64)
        start[queued] = starts[queued] if mode == "replay" else starts[: int(queued.sum())]
    start = start[evaluated]
    jobs = pd.DataFrame(
        {
            "job_id": workload.job_id[evaluated],
            "user": workload.user[evaluated],
            "cores": workload.cores[evaluated],
            "submit": workload.submit[evaluated],
            "recorded_wait": workload.recorded_wait[evaluated],
            "wait": start - workload.submit[evaluated],
        }
    )
    if mode != "capacity":
        return FidelityResult(mode, reserve if mode == "calibrated" else 0, jobs)
    return FidelityResult(mode, 0, jobs, inputs.look_back, classes.fast, classes.short)

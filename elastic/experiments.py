"""The experiment harness: many pure-simulation runs of one workflow under one strategy.

:func:`simulate_runs` is what ``elastic compare`` and ``elastic run --simulate`` call: it cuts one
background load (:func:`window`) at start points drawn once per comparison (:func:`start_points`, the same
for every strategy), builds a mock backend on the virtual clock for each run and drives the workflow with
:class:`~elastic.control.runner.Runner` and :class:`~elastic.control.sim_execution.SimExecution`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from elastic.control.execution import RunResult
from elastic.control.rate import SubmissionLimit
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.priority import DEFAULT_PRIORITY
from elastic.simulator.workload import Workload
from elastic.workflow import Workflow
from elastic.workflow_model import check_horizon

if TYPE_CHECKING:
    from elastic.learners.base import LearnerStateStore, WaitPredictor
    from elastic.strategies.knowledge import RuntimeHistory, WaitStore
    from elastic.strategies.view import RunView

__all__ = [
    "BASELINES",
    "DEFAULT_PROCESSORS",
    "DEFAULT_SHAPES",
    "HORIZON",
    "MAX_RUNS",
    "PAPER_SHAPES",
    "SHAPES",
    "baseline_kind",
    "default_background",
    "fine_cores",
    "interrupted",
    "parse_strategy",
    "shape_cores",
    "shape_label",
    "shaped_strategies",
    "simulate_runs",
    "split_cores",
    "start_points",
    "window",
]


DEFAULT_PROCESSORS = 128
"""Cores of the simulated partition when no trace is given."""

MAX_RUNS = 10_000
"""Most runs :func:`start_points` (and so :func:`simulate_runs`, ``elastic compare --runs``) accepts.

A pure-simulation run of ``montage`` takes about 0.1 s and its result (event timeline and metrics)
about 50 kB, all kept until the comparison is printed: 10,000 runs are about 15 minutes and 0.5 GB
per strategy."""


SHAPES = ("plain", "split", "fine")
"""Allocation shapes a comparison can give the baselines (``elastic compare --shapes``).

``plain``: one batch job per allocation, as in the ASA paper. ``split``: every allocation wider than
:func:`split_cores` (half the workflow's peak width, rounded up) is submitted as batch jobs of at most
that many cores (run control's ``job_cores``), each released on its own once idle. ``fine``: batch jobs
as narrow as the widest task of each request (:func:`fine_cores`; one core for single-core tasks), as a
user would run them as a job array. The shape is not a strategy: any strategy may be run in any shape; a
run in one is labelled ``<strategy>-split`` or ``<strategy>-fine``."""

DEFAULT_SHAPES = SHAPES
"""The shapes a comparison runs without ``--shapes``: all of them, so that every other strategy is read
against the strongest shape of each baseline. ``fine`` is the strongest on the busy synthetic queue and
the HPC2N replay, where narrow jobs start at once in backfill holes (``docs/results/strategies.md``,
"Baselines in jobs of one task")."""

PAPER_SHAPES = ("plain", "split")
"""The shapes ``elastic reproduce asa`` runs, as its published results page does."""

BASELINES = ("bigjob", "perstage")
"""The baseline kinds: a comparison reads every other strategy against the best run shape of each."""

_SUFFIXES = {"split": "-split", "fine": "-fine"}
"""The row-label suffix of each shape but ``plain``."""


def shape_label(strategy: str, shape: str) -> str:
    """Return the row label of ``strategy`` run in ``shape``: ``shape_label("asa", "fine") == "asa-fine"``."""
    return strategy if shape == "plain" else f"{strategy}{_SUFFIXES[shape]}"


def _unshaped(label: str) -> tuple[str, str]:
    """Return ``(label without its shape's suffix, shape)``: ``("bigjob", "fine")``, ``("asa", "plain")``."""
    for shape, suffix in _SUFFIXES.items():
        if label.endswith(suffix):
            return label.removesuffix(suffix), shape
    return label, "plain"


def split_cores(workflow: Workflow) -> int:
    """Return the ``job_cores`` of the ``split`` shape: half ``workflow``'s peak width, rounded up.

    Examples
    --------
    >>> from elastic.workflow import builtin_workflow
    >>> builtin_workflow("montage").max_width, split_cores(builtin_workflow("montage"))
    (28, 14)
    """
    return max(1, math.ceil(workflow.max_width / 2))


def fine_cores(workflow: Workflow) -> int:
    """Return the ``job_cores`` of the ``fine`` shape: 1, so each request's jobs are as narrow as its tasks.

    Run control never makes a job narrower than the widest task of what it is asked for
    (:func:`~elastic.control.scheduler.split_request`), so with ``job_cores=1`` each request is asked in
    jobs of its own widest task: Big-Job (one request for every stage) in jobs of the workflow's widest
    task, Per-Stage in jobs of each stage's. ``workflow`` is not read: the rule is the same for every
    workflow and strategy, and is kept as a function beside :func:`split_cores`.

    Examples
    --------
    >>> from elastic.workflow import builtin_workflow
    >>> fine_cores(builtin_workflow("montage")), fine_cores(builtin_workflow("bwa"))
    (1, 1)
    """
    del workflow  # the same for every workflow
    return 1


def shape_cores(workflow: Workflow, shape: str) -> int | None:
    """Return the ``job_cores`` of a run in ``shape`` (None: ``plain``, one batch job per allocation)."""
    return {"split": split_cores, "fine": fine_cores}[shape](workflow) if shape != "plain" else None


def parse_strategy(label: str) -> tuple[str, str]:
    """Return ``(strategy registry name, shape)`` of a comparison row label (``bigjob-split``).

    Raises
    ------
    UnknownNameError
        The label is no registered strategy, with or without the ``-split`` suffix.

    Examples
    --------
    >>> parse_strategy("bigjob-split"), parse_strategy("asa"), parse_strategy("perstage-fine")
    (('bigjob', 'split'), ('asa', 'plain'), ('perstage', 'fine'))
    """
    from elastic.strategies import STRATEGY_NAMES

    if label in STRATEGY_NAMES:
        return label, "plain"
    base, shape = _unshaped(label)
    if base in STRATEGY_NAMES:
        return base, shape
    shaped = [f"{s}{suffix}" for suffix in _SUFFIXES.values() for s in STRATEGY_NAMES]
    raise UnknownNameError("strategy", label, [*STRATEGY_NAMES, *shaped])


def baseline_kind(label: str) -> str | None:
    """Return the baseline kind (:data:`BASELINES`) a row label is a shape of, else None (any other label).

    Examples
    --------
    >>> [baseline_kind(s) for s in ("perstage-split", "bigjob-fine", "asa", "mine")]
    ['perstage', 'bigjob', None, None]
    """
    base = _unshaped(label)[0]
    return base if base in BASELINES else None


def shaped_strategies(strategies: Sequence[str], shapes: Sequence[str]) -> tuple[str, ...]:
    """Return the comparison's row labels: every baseline in every shape, other strategies once.

    Parameters
    ----------
    strategies : sequence of str
        Strategy registry names, in order.
    shapes : sequence of str
        From :data:`SHAPES`; ``split`` adds ``<baseline>-split`` after each baseline of
        :data:`BASELINES`, ``fine`` ``<baseline>-fine``. Strategies that are no baseline keep their
        own allocation shape (``asa`` plans its own pieces) and are run once.

    Raises
    ------
    ConfigError
        No shape, or one not in :data:`SHAPES`.

    Examples
    --------
    >>> shaped_strategies(["bigjob", "perstage", "asa"], ["plain", "split"])
    ('bigjob', 'bigjob-split', 'perstage', 'perstage-split', 'asa')
    >>> shaped_strategies(["bigjob", "asa"], ["split"])
    ('bigjob-split', 'asa')
    >>> shaped_strategies(["perstage"], ["plain", "split", "fine"])
    ('perstage', 'perstage-split', 'perstage-fine')
    """
    bad = [s for s in shapes if s not in SHAPES]
    if not shapes or bad:
        raise ConfigError(
            f"unknown allocation shape {', '.join(bad) or '(none)'}; choose from: {', '.join(SHAPES)}"
        )
    out: list[str] = []
    for s in strategies:
        if s not in BASELINES:
            out.append(s)
            continue
        if "plain" in shapes:
            out.append(s)
        out.extend(shape_label(s, shape) for shape in _SUFFIXES if shape in shapes)
    return tuple(dict.fromkeys(out))


def window(workload: Workload, start: float, end: float) -> Workload:
    """Return the background jobs submitted in ``[start, end)``, with submit times shifted by ``-start``.

    ``read_swf(window=...)`` does this while reading a file; here one trace read once is cut into the
    windows of many runs without reading it again.
    """
    keep = (workload.submit >= start) & (workload.submit < end)
    part = workload.select(keep)
    return replace(part, submit=part.submit - start, source=f"{workload.source} [{start:.0f}, {end:.0f})")


def default_background(processors: int = DEFAULT_PROCESSORS, *, seed: int = 0) -> Workload:
    """Synthetic background load for pure simulation: 90 % offered load on ``processors`` cores."""
    from elastic.simulator.synthetic import synthetic_workload

    return synthetic_workload(
        jobs=6000, processors=processors, utilisation=0.9, max_cores=max(1, processors // 2), seed=seed
    )


def _check_runs(runs: int) -> None:
    if not 1 <= runs <= MAX_RUNS:
        raise ConfigError(
            f"runs must be in [1, {MAX_RUNS:,}] (each run's result is kept until the end), got {runs!r}"
        )


HORIZON = 4 * 86400.0
"""Simulated seconds a run may take before it gives up (:func:`simulate_runs`' ``horizon``; a workflow
whose stages alone outlast it is refused, :func:`~elastic.workflow_model.check_horizon`)."""


def start_points(
    background: Workload, runs: int, *, seed: int = 0, warmup: float = 86400.0, horizon: float = HORIZON
) -> npt.NDArray[np.float64]:
    """Draw run starts: uniform, ``warmup`` after the first background job, ``horizon`` before the last.

    Times are on the background's clock, counted from its first job, not from 0: a trace whose first
    job comes a year into its clock would otherwise put most runs before any background.

    Raises
    ------
    ConfigError
        ``runs`` is not in ``[1, MAX_RUNS]``.
    """
    _check_runs(runs)
    rng = np.random.default_rng(seed)
    first = float(background.submit[0]) if len(background) else 0.0
    last = float(background.submit[-1]) if len(background) else 0.0
    low = first + warmup
    return rng.uniform(low, max(low, last - horizon), size=runs)


class _Heartbeat:
    """While a simulated run goes on, call ``progress`` every ``interval`` real seconds with how far it is."""

    def __init__(
        self,
        progress: Callable[[str], None] | None,
        interval: float,
        execution: SimExecution,
        workflow: Workflow,
        run: int,
        runs: int,
    ) -> None:
        self.progress, self.interval, self.execution = progress, interval, execution
        self.total = sum(stage.tasks for stage in workflow.stages)
        self.prefix = f"run {run + 1}/{runs}: " if runs > 1 else ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="elastic-sim-progress", daemon=True)

    def _beat(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.interval):
            assert self.progress is not None
            ex = self.execution
            self.progress(
                f"{self.prefix}simulating: {ex.tasks_ended:,} task attempts of {self.total:,} tasks ended, "
                f"simulated t={max(ex.now, 0.0):,.0f} s, {time.monotonic() - started:.0f} s of real time"
            )

    def __enter__(self) -> _Heartbeat:
        if self.progress is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def interrupted(results: Sequence[RunResult]) -> bool:
    """Return whether :func:`simulate_runs` was interrupted (its last run ended ``interrupted``)."""
    return bool(results) and results[-1].status == "interrupted"


def simulate_runs(
    workflow: Workflow,
    strategy: str,
    *,
    runs: int = 1,
    seed: int = 0,
    background: Workload | None = None,
    policy: str = "easy",
    mode: str = "replay",
    reserve: int = 0,
    priority: str = DEFAULT_PRIORITY,
    learner: str | None = None,
    warmup: float = 86400.0,
    horizon: float = HORIZON,
    poll_interval: float = 30.0,
    strategy_options: Mapping[str, Any] | None = None,
    waits: WaitPredictor | None = None,
    history: RuntimeHistory | None = None,
    wait_store: WaitStore | None = None,
    shared: LearnerStateStore | None = None,
    on_run: Callable[[int, RunResult], None] | None = None,
    job_cores: int | None = None,
    queue_rules: bool = True,
    submission_rate: SubmissionLimit | None = None,
    on_iteration: Callable[[RunView], None] | None = None,
    progress: Callable[[str], None] | None = None,
    progress_interval: float = 5.0,
) -> list[RunResult]:
    """Run ``workflow`` ``runs`` times under ``strategy`` in pure simulation (virtual clock, no processes).

    Run ``i`` starts at a point of the background load drawn from ``seed`` (the same points for every
    strategy, so strategies are compared on the same queue states), after ``warmup`` seconds of
    background so the queue is busy. One wait learner and one runtime history are shared by the runs, in
    order, as in the paper (the strategy learns across runs). Same arguments, same results.

    Parameters
    ----------
    workflow : Workflow
        What to run.
    strategy : str
        Registry name (``bigjob``, ``perstage``, ``asa``, ``asa-naive``), or a name with ``-split`` or
        ``-fine``: that shape of :data:`SHAPES` (``job_cores`` = :func:`split_cores` or
        :func:`fine_cores` of ``workflow``).
    runs : int, default 1
        How many runs.
    seed : int, default 0
        Seeds start points, task durations and the learner.
    background : Workload or None, default None
        Background jobs (a trace); ``None`` = :func:`default_background`. The partition has
        ``background.processors`` cores.
    policy : str, default "easy"
        Queue policy of the mock backend (``conservative`` or ``fcfs`` with a recorded ``mode``).
    mode : {"replay", "recorded", "recorded-chain", "calibrated", "capacity"}, default "replay"
        How the background loads the queue (:class:`~elastic.backends.mock.MockBackend` ``mode``):
        the recorded modes need a trace and give waits like the traced centre's.
    priority : {"age", "basic", "accrue-always"}, default "age"
        How the mock queue ranks a dependency- or begin-held job once eligible
        (:mod:`elastic.simulator.priority`).
    reserve : int, default 0
        ``mode="calibrated"``: cores withheld from queued jobs (fit it once with
        :func:`~elastic.simulator.fidelity.calibrate_reserve`).
    learner : str or None, default None
        Wait learner (:data:`elastic.learners.choice.WAIT_LEARNERS`); None = the strategy's own
        (:func:`~elastic.strategies.base.strategy_learner`: ``ewma``, the paper's learner for ``asa-paper``).
    warmup, horizon : float
        Background seconds simulated before each run starts, and kept after it.
    poll_interval : float, default 30.0
        Driver poll interval, backend seconds.
    strategy_options : mapping or None
        Extra keyword arguments for the strategy.
    waits, history, wait_store : optional
        Wait learner, runtime history and wait store to use (e.g. the project's store); default a fresh
        ``learner`` and an in-memory history. A given ``waits`` must be a ``learner`` (its state is
        shared under :func:`elastic.learners.choice.shared_name` of it).
    shared : LearnerStateStore or None
        Where the learner's state is shared with other runs, updated atomically on every observation.
    on_run : callable or None, default None
        Called with ``(index, result)`` after each run (progress bars, reports).
    job_cores : int or None, default None
        Submit an allocation wider than this as batch jobs of at most this many cores
        (:class:`~elastic.control.runner.Runner` ``job_cores``); None = one job per allocation (or the
        ``-split`` label's). Not with a ``-split`` label.
    queue_rules : bool, default True
        ``mode="capacity"``: apply the queue rules derived from the trace
        (:class:`~elastic.backends.mock.MockBackend` ``queue_rules``).
    submission_rate : SubmissionLimit or None, default None
        How fast each run may submit batch jobs, on the virtual clock
        (:class:`~elastic.control.runner.Runner` ``submission_rate``); None: 30 at once, then 30 a minute.
    on_iteration : callable or None, default None
        Called with the run view after each iteration of each run (:class:`~elastic.control.runner.Runner`).
    progress : callable or None, default None
        Called every ``progress_interval`` real seconds while a run goes on with one line saying how far it
        is (tasks ended of the workflow's, simulated time): a single decision of a large run can take
        seconds, so iterations alone may be silent for long.
    progress_interval : float, default 5.0
        Real seconds between two ``progress`` lines.

    Returns
    -------
    list of RunResult
        One per run; fewer where a run was interrupted (Ctrl-C, or SIGTERM turned into it): that run
        ends ``interrupted`` and is the last, so a caller running more strategies can stop too
        (:func:`interrupted`).
    """
    from elastic.backends.mock import MockBackend
    from elastic.control.runner import Runner
    from elastic.learners.choice import make_wait_learner, shared_name
    from elastic.strategies import Knowledge, MemoryHistory, make_strategy, strategy_learner

    _check_runs(runs)
    strategy, shape = parse_strategy(strategy)
    if shape != "plain":
        own = shape_cores(workflow, shape)
        if job_cores is not None:
            raise ConfigError(f"{strategy}-{shape} sets its own job_cores ({own}); got job_cores={job_cores}")
        job_cores = own
    if background is None:
        background = default_background(seed=seed)
    widest = max(workflow.stages, key=lambda s: s.cores)
    if widest.cores > background.processors:  # a stage wider than the partition runs in waves; a task cannot
        raise ConfigError(
            f"workflow {workflow.name!r}: stage {widest.name!r} has tasks of {widest.cores} cores but the "
            f"partition has {background.processors}; use a larger trace or --processors"
        )
    check_horizon(workflow, horizon)
    starts = start_points(background, runs, seed=seed, warmup=warmup, horizon=horizon)
    learner = learner or strategy_learner(strategy)
    if waits is None:
        waits = make_wait_learner(learner, seed=seed)
    if history is None:
        history = MemoryHistory()
    results = []
    for i, start in enumerate(starts):
        backend = MockBackend(
            nodes=background.processors,
            cores_per_node=1,
            policy=policy,
            workload=window(background, start - warmup, start + horizon),
            start=warmup,
            mode=mode,
            reserve=reserve,
            priority=priority,
            queue_rules=queue_rules,
        )
        knowledge = Knowledge(
            workflow,
            waits=waits,
            history=history,
            wait_store=wait_store,
            backend="mock",
            shared=shared,
            learner_name=shared_name(learner),
        )
        execution = SimExecution()
        runner = Runner(
            workflow,
            make_strategy(strategy, **(strategy_options or {})),
            backend,
            execution,
            knowledge,
            seed=seed * 100_003 + i,
            poll_interval=poll_interval,
            max_duration=horizon,
            job_cores=job_cores,
            submission_rate=submission_rate,
            on_iteration=on_iteration,
            label=f"run {i + 1} of {runs}",
        )
        try:
            with _Heartbeat(progress, progress_interval, execution, workflow, i, runs):
                result = runner.run()
        finally:
            backend.close()
        results.append(result)
        if on_run is not None:
            on_run(i, result)
        if result.status == "interrupted":  # Ctrl-C or SIGTERM: no further run starts
            break
    return results

"""The paper's experiment: workflows x peak core counts x strategies, repeated runs, one learner per strategy.

:class:`ExperimentPlan` names what to run; :func:`run_experiment` runs every cell (one workflow at one peak
core count under one strategy) ``runs`` times through a :class:`CellRunner` and keeps a
:class:`~elastic.report.records.RunRecord` of each run. As in the ASA paper ("Algorithm 1's state is kept
across different runs ... shared among the different workflow submissions"), each strategy has one wait
learner for the whole experiment: it sees every run of that strategy, all workflows and scales, in order
(its state is keyed by allocation geometry).

Two cell runners:

:class:`Simulation`
    Pure simulation on the mock backend's virtual clock (:func:`elastic.experiments.simulate_runs`):
    every cell starts its runs at the same points of the background, so strategies (and scales) are
    compared on the same queue states.
:func:`emulation`
    Real runs: ``emulation(run_one)`` calls ``run_one(request)`` once per run, where ``request`` is a
    :class:`RunRequest` (the scaled workflow, strategy, run index, seed and the strategy's shared wait
    learner) and ``run_one`` performs the run (e.g. a demo workflow through the front door on the mock
    backend's scaled clock) and returns its :class:`~elastic.control.execution.RunResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from elastic.control.execution import RunResult
from elastic.control.rate import SubmissionLimit
from elastic.errors import ConfigError
from elastic.experiments import MAX_RUNS, parse_strategy
from elastic.report.records import RunRecord
from elastic.report.scaling import scale_workflow
from elastic.simulator.priority import DEFAULT_PRIORITY
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from elastic.learners.base import WaitPredictor
    from elastic.simulator.workload import Workload

__all__ = [
    "Cell",
    "CellRunner",
    "ExperimentPlan",
    "ExperimentResult",
    "RunOne",
    "RunRequest",
    "Simulation",
    "emulation",
    "run_experiment",
]


@dataclass(frozen=True, slots=True)
class Cell:
    """One workflow at one peak core count under one strategy.

    Attributes
    ----------
    workflow : Workflow
        The scaled workflow that runs.
    base : str
        Its name before scaling (the report's row label).
    cores : int
        Peak cores (``workflow.max_width``).
    strategy : str
        Strategy registry name, or its ``-split`` shape (:func:`~elastic.experiments.parse_strategy`).
    """

    workflow: Workflow
    base: str
    cores: int
    strategy: str


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One run an emulated experiment asks ``run_one`` for.

    Attributes
    ----------
    cell : Cell
        What to run and under which strategy.
    index : int
        Run number within the cell.
    seed : int
        Seed of this run (task durations, sizes).
    waits : WaitPredictor
        The strategy's wait learner, shared by all its runs: pass it to the run (e.g.
        ``Knowledge(waits=...)``) so its state carries across runs.
    """

    cell: Cell
    index: int
    seed: int
    waits: WaitPredictor


RunOne = Callable[[RunRequest], RunResult]
"""Performs one emulated run and returns its result."""


class CellRunner(Protocol):
    """Runs one cell ``runs`` times, calling ``on_run(index, result)`` after each run."""

    @property
    def kind(self) -> str:
        """``simulation`` or ``emulation`` (named in the report)."""
        ...

    def check(self, cells: Sequence[Cell]) -> None:
        """Refuse cells it cannot run, before any work (raise ConfigError)."""
        ...

    def __call__(
        self, cell: Cell, runs: int, waits: WaitPredictor, on_run: Callable[[int, RunResult], None]
    ) -> None:
        """Run ``cell`` ``runs`` times with the strategy's learner ``waits``."""
        ...


@dataclass(frozen=True, slots=True)
class Simulation:
    """Pure simulation of every cell on the mock backend (virtual clock), over one background load.

    Parameters
    ----------
    background : Workload
        Background jobs; the partition has ``background.processors`` cores.
    policy, mode, reserve, priority, queue_rules, submission_rate : see
        :func:`elastic.experiments.simulate_runs`
    seed : int, default 0
        Seeds the start points (the same for every cell) and task durations.
    options : mapping, default empty
        Per strategy name, the options it is built with (:func:`~elastic.strategies.base.make_strategy`;
        a strategy not named: its defaults).
    explicit_peaks : bool, default True
        The cells' peaks were asked (``--peak-cores``): one wider than the partition is refused. False:
        each workflow at its own width, whose stages wider than the partition run in waves.
    """

    background: Workload
    policy: str = "easy"
    mode: str = "replay"
    reserve: int = 0
    priority: str = DEFAULT_PRIORITY
    seed: int = 0
    kind: str = "simulation"
    queue_rules: bool = True
    submission_rate: SubmissionLimit | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    explicit_peaks: bool = True

    def check(self, cells: Sequence[Cell]) -> None:
        """Refuse a peak or a task wider than the partition (naming it and the widths), or a run too long.

        A workflow at its own width whose stage is wider than the partition runs in waves, as in
        :func:`~elastic.experiments.simulate_runs`; a peak asked wider than the partition is a mistake
        in the peaks (``explicit_peaks``).
        """
        from elastic.experiments import HORIZON
        from elastic.workflow_model import check_horizon

        for c in cells:
            check_horizon(c.workflow, HORIZON, where=f"workflow {c.base!r}")
            widest_task = max(s.cores for s in c.workflow.stages)
            if widest_task > self.background.processors or (
                self.explicit_peaks and c.workflow.max_width > self.background.processors
            ):
                raise ConfigError(
                    f"workflow {c.base!r} at {c.cores} peak cores needs {c.workflow.max_width} cores but "
                    f"the partition has {self.background.processors}; use smaller --peak-cores, a larger "
                    "trace or --processors"
                )

    def __call__(
        self, cell: Cell, runs: int, waits: WaitPredictor, on_run: Callable[[int, RunResult], None]
    ) -> None:
        """Simulate ``runs`` runs of ``cell`` with :func:`~elastic.experiments.simulate_runs`."""
        from elastic.experiments import simulate_runs

        simulate_runs(
            cell.workflow,
            cell.strategy,
            runs=runs,
            seed=self.seed,
            background=self.background,
            policy=self.policy,
            mode=self.mode,
            reserve=self.reserve,
            priority=self.priority,
            waits=waits,
            on_run=on_run,
            queue_rules=self.queue_rules,
            submission_rate=self.submission_rate,
            strategy_options=self.options.get(cell.strategy),
        )


@dataclass(frozen=True, slots=True)
class _Emulation:
    run_one: RunOne
    seed: int
    kind: str = "emulation"

    def check(self, cells: Sequence[Cell]) -> None:
        return None

    def __call__(
        self, cell: Cell, runs: int, waits: WaitPredictor, on_run: Callable[[int, RunResult], None]
    ) -> None:
        for i in range(runs):
            on_run(i, self.run_one(RunRequest(cell, i, self.seed * 100_003 + i, waits)))


def emulation(run_one: RunOne, *, seed: int = 0) -> CellRunner:
    """Return a cell runner that performs each run with ``run_one`` (real runs on the scaled clock).

    Parameters
    ----------
    run_one : callable
        Takes a :class:`RunRequest`, performs that run, returns its RunResult.
    seed : int, default 0
        Run ``i`` of a cell gets seed ``seed * 100003 + i`` (as pure simulation does).
    """
    return _Emulation(run_one, seed)


@dataclass(frozen=True, slots=True)
class ExperimentPlan:
    """What to compare.

    Parameters
    ----------
    workflows : tuple of Workflow
        Workflow models, unscaled.
    strategies : tuple of str
        Strategy registry names, or their ``-split`` shapes (:func:`~elastic.experiments.shaped_strategies`).
    runs : int
        Runs per cell, in ``[1, MAX_RUNS]``.
    cores : tuple of int, default ()
        Peak core counts; empty: each workflow at its own width.
    scaling : {"strong", "weak"}, default "strong"
        How workflows are scaled (:func:`~elastic.report.scaling.scale_workflow`).
    seed : int, default 0
        Seeds the learners.
    learner : str or None, default None
        Wait learner for every strategy (:data:`elastic.learners.choice.WAIT_LEARNERS`); None: each strategy's
        own (:func:`~elastic.strategies.base.strategy_learner`).
    gantt_run : int or None, default None
        Run index whose busy cores are kept for the Gantt chart (default: the last run).
    """

    workflows: tuple[Workflow, ...]
    strategies: tuple[str, ...]
    runs: int
    cores: tuple[int, ...] = ()
    scaling: str = "strong"
    seed: int = 0
    learner: str | None = None
    gantt_run: int | None = None

    def cells(self) -> list[Cell]:
        """Every cell, workflow-major, then cores, then strategy; every scaling checked up front.

        Raises
        ------
        ConfigError
            No workflow or strategy, ``runs`` out of range, a workflow that cannot be scaled to a peak,
            or ``gantt_run`` not a run index.
        """
        if not self.workflows or not self.strategies:
            raise ConfigError("an experiment needs at least one workflow and one strategy")
        if not 1 <= self.runs <= MAX_RUNS:
            raise ConfigError(f"runs must be in [1, {MAX_RUNS:,}], got {self.runs!r}")
        if self.gantt_run is not None and not 0 <= self.gantt_run < self.runs:
            raise ConfigError(
                f"gantt_run must be a run index in [0, {self.runs - 1}], got {self.gantt_run!r}"
            )
        out: list[Cell] = []
        for wf in self.workflows:
            for peak in self.cores or (wf.max_width,):
                scaled = scale_workflow(wf, peak, scaling=self.scaling)
                out.extend(Cell(scaled, wf.name, peak, s) for s in self.strategies)
        return out


@dataclass(frozen=True, slots=True)
class ExperimentResult:
    """Every run's record, and how they were made.

    Attributes
    ----------
    plan : ExperimentPlan
        What was asked for.
    records : tuple of RunRecord
        One per run, in the order they ran.
    kind : str
        ``simulation`` or ``emulation``.
    elapsed : float
        Wall-clock seconds the runs took.
    gantt_run : int
        Run index whose busy cores were kept.
    """

    plan: ExperimentPlan
    records: tuple[RunRecord, ...]
    kind: str
    elapsed: float
    gantt_run: int = 0
    notes: tuple[str, ...] = field(default=())


def run_experiment(
    plan: ExperimentPlan,
    runner: CellRunner,
    *,
    on_run: Callable[[Cell, RunRecord], None] | None = None,
) -> ExperimentResult:
    """Run every cell of ``plan`` with ``runner``; one wait learner per strategy across all cells.

    Parameters
    ----------
    plan : ExperimentPlan
        What to run (checked before any run, with ``runner.check``).
    runner : CellRunner
        :class:`Simulation` or :func:`emulation`.
    on_run : callable or None, default None
        Called with the cell and the record after each run (progress bars).

    Returns
    -------
    ExperimentResult
    """
    from elastic.learners.choice import make_wait_learner
    from elastic.strategies import strategy_learner

    cells = plan.cells()
    runner.check(cells)
    gantt = plan.runs - 1 if plan.gantt_run is None else plan.gantt_run
    learners: dict[str, WaitPredictor] = {
        s: make_wait_learner(plan.learner or strategy_learner(parse_strategy(s)[0]), seed=plan.seed)
        for s in plan.strategies
    }
    seen: dict[str, int] = dict.fromkeys(plan.strategies, 0)
    records: list[RunRecord] = []
    began = time.perf_counter()
    for cell in cells:

        def keep(index: int, result: RunResult, cell: Cell = cell) -> None:
            record = RunRecord.from_result(
                result,
                workflow=cell.base,
                cores=cell.cores,
                strategy=cell.strategy,
                index=index,
                order=seen[cell.strategy],
                stages=cell.workflow.names,
                keep_busy=index == gantt,
            )
            seen[cell.strategy] += 1
            records.append(record)
            if on_run is not None:
                on_run(cell, record)

        runner(cell, plan.runs, learners[cell.strategy], keep)
    return ExperimentResult(plan, tuple(records), runner.kind, time.perf_counter() - began, gantt)

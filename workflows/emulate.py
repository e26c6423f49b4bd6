"""The comparison report's emulation: each run is a real demo through the front door on the scaled mock queue.

``elastic compare --emulate`` (:mod:`elastic.cli.compare_report`) runs the paper's experiment with
:func:`elastic.report.experiment.emulation` and :func:`demo_runner`: for every run of every cell, the demo
named by the cell (Montage, BLAST or Statistics, at one ``size``) generates its input, runs its real
programs in agents' warm workers on allocations the cell's strategy requests from a
:class:`~elastic.backends.mock.MockBackend` on the scaled clock, and its output is checked. The queue is
the same background as in pure simulation, cut at the same start points (run ``i`` of every cell starts
at the ``i``-th point), and the strategy's wait learner is the one the experiment keeps across its runs.
A cell's peak cores cap every allocation (``max_cores``): a stage wider than that runs in waves.

A run whose checks fail (:class:`DemoCheckError`) or whose program fails (:class:`ElasticError` naming
the run and its folder) stops the experiment: a comparison of wrong outputs would mean nothing.
"""

from __future__ import annotations

import dataclasses
import os

from elastic.backends.mock import MockBackend
from elastic.control.execution import RunResult
from elastic.control.rate import SubmissionLimit
from elastic.errors import ConfigError, ElasticError
from elastic.experiments import parse_strategy, split_cores, start_points, window
from elastic.front.door import Elastic
from elastic.limits import check_speedup
from elastic.report.experiment import RunOne, RunRequest
from elastic.simulator.workload import Workload
from elastic.workflows.dataflow import check_size, check_workdir
from elastic.workflows.demos import DEMOS, prepare

__all__ = ["DemoCheckError", "demo_runner"]

WARMUP = 86400.0
"""Background seconds before a run starts (as pure simulation and ``elastic run`` on the mock queue)."""
HORIZON = 4 * 86400.0
"""Background seconds kept after the start."""


class DemoCheckError(ElasticError):
    """An emulated run's output failed its demo's checks."""


@dataclasses.dataclass(frozen=True, slots=True)
class _DemoRunner:
    background: Workload
    starts: tuple[float, ...]
    size: int | None
    seed: int
    speedup: float
    workdir: str | None
    policy: str
    mode: str
    reserve: int
    priority: str
    cap: bool
    queue_rules: bool = True
    submission_rate: SubmissionLimit | None = None

    def __call__(self, request: RunRequest) -> RunResult:
        cell = request.cell
        demo, folder, inputs, _ = prepare(cell.base, size=self.size, seed=self.seed, workdir=self.workdir)
        start = self.starts[request.index]
        backend = MockBackend(
            nodes=self.background.processors,
            policy=self.policy,
            mode=self.mode,
            reserve=self.reserve,
            queue_rules=self.queue_rules,
            workload=window(self.background, start - WARMUP, start + HORIZON),
            clock="scaled",
            speedup=self.speedup,
            start=WARMUP,
            priority=self.priority,
        )
        strategy, shape = parse_strategy(cell.strategy)
        with backend:
            el = Elastic(
                backend,
                strategy,
                workflow=demo.name,
                store=False,
                learner=request.waits,
                max_cores=cell.cores if self.cap else None,
                job_cores=split_cores(cell.workflow) if shape == "split" else None,
                submission_rate=self.submission_rate,
            )
            try:
                with el:
                    output = demo.driver(el, inputs)
            except Exception as exc:  # a program failed (the driver waits for every task): say which run
                raise ElasticError(
                    f"{demo.name} run {request.index} under {cell.strategy} at {cell.cores} cores failed: "
                    f"{type(exc).__name__}: {exc}; files in {folder}"
                ) from exc
        verification = demo.verify(inputs, output)
        if not verification.ok:
            failed = ", ".join(c.name for c in verification.failed)
            raise DemoCheckError(
                f"{demo.name} run {request.index} under {cell.strategy} at {cell.cores} cores: the output "
                f"failed its checks ({failed}); files in {folder}"
            )
        result = el.result
        if result is None:  # the front door records every run it ends; this is a bug if reached
            raise ElasticError(f"{demo.name} run {request.index}: the front door recorded no result")
        return result


def demo_runner(
    background: Workload,
    runs: int,
    *,
    names: list[str],
    size: int | None = None,
    seed: int = 0,
    speedup: float = 60.0,
    workdir: str | os.PathLike[str] | None = None,
    policy: str = "easy",
    mode: str = "replay",
    reserve: int = 0,
    priority: str = "age",
    cap_cores: bool = True,
    queue_rules: bool = True,
    submission_rate: SubmissionLimit | None = None,
) -> RunOne:
    """Return the ``run_one`` of an emulated experiment over ``background`` (see the module docstring).

    Parameters
    ----------
    background : Workload
        The queue's background jobs (as for pure simulation).
    runs : int
        Runs per cell (start point ``i`` serves run ``i`` of every cell).
    names : list of str
        The demos the experiment runs (checked here, before any run).
    size : int or None, default None
        Every demo's size (None: each its default); checked against every demo's range here.
    seed : int, default 0
        Seeds the start points and the demos' input (the same input for every run of a demo).
    speedup : float, default 60.0
        The mock queue's clock runs this many times faster than real time.
    workdir : path or None, default None
        Where the runs' folders go (default: the temporary directory).
    policy, mode, reserve, priority : str, str, int, str
        The mock queue's settings, as in pure simulation.
    cap_cores : bool, default True
        Cap every allocation at the cell's peak cores (given ``--peak-cores``); else the demo's stages get
        their own widths.
    queue_rules : bool, default True
        ``mode="capacity"``: apply the queue rules derived from the trace, as in pure simulation.
    submission_rate : SubmissionLimit or None, default None
        How fast each run may submit batch jobs (:class:`elastic.Settings` ``submission_rate``).

    Raises
    ------
    ConfigError
        A name that is not a demo, a size out of a demo's range, a speedup <= 0, or a ``workdir`` that
        is not a writable folder.
    """
    unknown = [n for n in names if n not in DEMOS]
    if unknown:
        raise ConfigError(
            f"--emulate runs the demo workflows ({', '.join(sorted(DEMOS))}), not {', '.join(unknown)}"
        )
    if size is not None:
        for n in names:
            check_size(DEMOS[n], size)
    check_speedup(speedup, "--speedup")
    if workdir is not None:
        check_workdir(workdir)
    starts = start_points(background, runs, seed=seed, warmup=WARMUP, horizon=HORIZON)
    return _DemoRunner(
        background,
        tuple(float(s) for s in starts),
        size,
        seed,
        float(speedup),
        None if workdir is None else str(workdir),
        policy,
        mode,
        reserve,
        priority,
        cap_cores,
        queue_rules,
        submission_rate,
    )

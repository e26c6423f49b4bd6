"""``elastic run``: run one workflow under one strategy and print its metrics.

``elastic run --workflow FILE_OR_NAME --strategy bigjob|perstage|asa|asa-naive --backend mock|slurm
[--simulate] [--speedup K] [--trace PATH] [--seed S] [--poll SECONDS] [--store URL | --no-store]``

- ``--backend mock --simulate``: pure simulation (virtual clock, no processes).
- ``--backend mock``: real execution through the pool; the mock backend's clock runs ``--speedup`` times
  faster than real time, allocations start real agents as local processes, tasks are real processes
  (a stage's ``command``, else ``sleep`` of its sampled duration / K).
- ``--backend slurm``: real allocations on Slurm (``--partition``, ``--account``, ``--qos``), agents started
  by the job scripts connect back to this process (``--bind``).

While a real run goes on, a live view shows the stages' progress and the allocations. At the end the
run's metrics are printed. Unless ``--no-store``, the store (``--store URL``, else ``ELASTIC_STORE_URL``,
else a SQLite file in the user data directory) keeps stage runtimes, every observed queue wait, the ASA
learner's state (every wait learned into it atomically when it is seen, so concurrent runs lose nothing)
and the run with its metrics.

Ctrl-C or SIGTERM end the run ``interrupted`` and a failed task ends it ``failed``: every allocation is
cancelled, every agent and task stopped, the pool's secret removed, and the run is recorded with the
metrics of what ran (exit codes 130 and 1).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from elastic.cli.arguments import add_background_arguments, check_background_arguments, load_background
from elastic.cli.outputs import check_output, write_output
from elastic.cli.values import parse_seed, positive_float
from elastic.control.execution import Execution, RunResult
from elastic.control.runner import Runner
from elastic.errors import ConfigError, UnknownNameError
from elastic.metrics import RunMetrics
from elastic.simulator.priority import DEFAULT_PRIORITY, describe_priority
from elastic.strategies import STRATEGY_NAMES, Knowledge, MemoryHistory, RunView, make_strategy
from elastic.workflow import Workflow, resolve_workflow
from learners.asa import POLICIES as LEARNER_POLICIES
from learners.asa import ASAEstimator

if TYPE_CHECKING:
    from elastic.backends.base import BatchBackend
    from elastic.store import Store

__all__ = ["register"]

_LEARNER = "asa"
"""Name the ASA learner's state is kept under in the store."""


def register(subparsers: Any) -> None:
    """Add the ``run`` subcommand."""
    parser = subparsers.add_parser(
        "run",
        help="run a workflow under one strategy (mock or Slurm) and print its metrics",
        description="Run a workflow on pilot allocations chosen by a strategy; print the run's metrics.",
    )
    parser.add_argument("--workflow", required=True, help="built-in name (e.g. demo3) or .toml/.json file")
    parser.add_argument("--strategy", required=True, choices=STRATEGY_NAMES)
    parser.add_argument("--backend", default="mock", help="mock or slurm (default: mock)")
    parser.add_argument(
        "--simulate", action="store_true", help="pure simulation: virtual clock, no processes"
    )
    parser.add_argument(
        "--speedup", type=positive_float, default=60.0, help="mock clock speed-up K (default: 60)"
    )
    parser.add_argument(
        "--seed", type=parse_seed, default=0, help="seed of the start point, durations, learner (>= 0)"
    )
    parser.add_argument(
        "--poll",
        type=positive_float,
        default=None,
        help="poll interval, backend seconds (default: 30 on the mock backend, 10 on Slurm)",
    )
    parser.add_argument(
        "--learner", choices=LEARNER_POLICIES, default="tuned", help="ASA learner policy (default: tuned)"
    )
    parser.add_argument("--store", metavar="URL", help="SQLAlchemy URL of the store (default: see docs)")
    parser.add_argument("--no-store", action="store_true", help="keep nothing across runs")
    parser.add_argument("--partition", help="Slurm partition")
    parser.add_argument("--account", help="Slurm account")
    parser.add_argument("--qos", help="Slurm QOS")
    parser.add_argument("--bind", default="127.0.0.1", help="interface the pool listens on (Slurm)")
    parser.add_argument("--events", metavar="OUT.csv", help="write the run's event timeline as CSV")
    add_background_arguments(parser)
    parser.set_defaults(func=_run)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while a run goes on, so it ends as cleanly as on Ctrl-C."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"got signal {signum}")

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _live_view(view: RunView) -> Group:
    stages = Table(title=f"{view.workflow.name} at t={view.now:.0f} s")
    for col in ("stage", "done", "running", "tasks", "ready", "started", "ended"):
        stages.add_column(col, justify="left" if col == "stage" else "right")

    def t(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    for s in view.stages:
        stages.add_row(
            s.name, str(s.done), str(s.running), str(s.tasks), t(s.ready_time), t(s.start_time), t(s.end_time)
        )
    allocs = Table(title="allocations")
    for col in (
        "id",
        "stage",
        "cores",
        "phase",
        "submitted",
        "started",
        "ended",
        "walltime",
        "busy",
        "reason",
    ):
        allocs.add_column(col, justify="left" if col in ("id", "stage", "phase", "reason") else "right")
    for a in view.allocations[-12:]:
        allocs.add_row(
            a.alloc_id,
            a.stage or "",
            str(a.cores),
            a.state.value,
            t(a.submit_time),
            t(a.start_time),
            t(a.end_time),
            f"{a.walltime:.0f}",
            str(view.busy_cores(a.alloc_id)),
            a.reason,
        )
    return Group(stages, allocs)


def metrics_table(metrics: RunMetrics, title: str) -> Table:
    """Rich table of one run's metrics: totals, then one row per stage."""
    out = Table(title=title)
    out.add_column("metric")
    out.add_column("value", justify="right")
    rows = [
        ("makespan (s)", f"{metrics.makespan:.0f}"),
        ("queue wait (s)", f"{metrics.queue_wait:.0f}"),
        ("perceived wait (s)", f"{metrics.perceived_wait:.0f}"),
        ("core-hours charged", f"{metrics.core_hours_charged:.3f}"),
        ("core-hours used", f"{metrics.core_hours_used:.3f}"),
        ("overhead core-hours (idle)", f"{metrics.overhead_core_hours:.3f}"),
        ("allocations / resubmissions", f"{metrics.allocations} / {metrics.resubmissions}"),
        ("lost task attempts", str(metrics.lost_tasks)),
        (
            "wait predictions hit / over / under",
            f"{metrics.predictions.hits} / {metrics.predictions.over} / {metrics.predictions.under}",
        ),
    ]
    for s in metrics.stages:
        rows.append(
            (
                f"stage {s.name}: execution / queue wait / perceived wait (s)",
                f"{s.execution_time:.0f} / {s.queue_wait:.0f} / {s.perceived_wait:.0f}",
            )
        )
    for name, value in rows:
        out.add_row(name, value)
    return out


def _json_metrics(metrics: RunMetrics) -> dict[str, float | None]:
    return {k: (None if math.isnan(v) else v) for k, v in metrics.summary().items()}


def _simulate(
    args: argparse.Namespace, workflow: Workflow, learner: ASAEstimator, store: Store | None
) -> RunResult:
    from elastic.experiments import simulate_runs

    if args.backend != "mock":
        raise ConfigError(f"--simulate needs --backend mock, got --backend {args.backend}")
    setup = load_background(args)
    (result,) = simulate_runs(
        workflow,
        args.strategy,
        runs=1,
        seed=args.seed,
        background=setup.workload,
        policy=setup.policy,
        mode=setup.mode,
        reserve=setup.reserve,
        priority=setup.priority,
        waits=learner,
        history=store if store is not None else MemoryHistory(),
        wait_store=store,
        shared=store,
        poll_interval=args.poll or 30.0,
    )
    return result


def _real(
    args: argparse.Namespace, workflow: Workflow, learner: ASAEstimator, store: Store | None, console: Console
) -> RunResult:
    from elastic.control.pool_execution import PoolExecution

    backend: BatchBackend
    speedup = 1.0
    if args.backend == "mock":
        from elastic.backends.mock import MockBackend
        from elastic.experiments import start_points, window

        if not args.speedup > 0:
            raise ConfigError(f"--speedup must be > 0, got {args.speedup}")
        speedup = args.speedup
        setup = load_background(args)
        background = setup.workload
        warmup, horizon = 86400.0, 4 * 86400.0
        (start,) = start_points(background, 1, seed=args.seed, warmup=warmup, horizon=horizon)
        backend = MockBackend(
            nodes=background.processors,
            policy=setup.policy,
            mode=setup.mode,
            reserve=setup.reserve,
            workload=window(background, start - warmup, start + horizon),
            clock="scaled",
            speedup=speedup,
            start=warmup,
            priority=setup.priority,
        )
        poll = args.poll or 30.0
    elif args.backend == "slurm":
        from elastic.backends.slurm import SlurmBackend

        backend = SlurmBackend(args.partition, args.account, args.qos)
        poll = args.poll or 10.0
    else:
        raise UnknownNameError("backend", args.backend, ["mock", "slurm"])
    executor: Execution = PoolExecution(backend, speedup=speedup, bind=args.bind, fail_fast=True)
    knowledge = Knowledge(
        workflow,
        waits=learner,
        history=store if store is not None else MemoryHistory(),
        wait_store=store,
        partition=args.partition,
        backend=backend.name,
        max_walltime=backend.partition().max_walltime,
        shared=store,
        learner_name=_LEARNER,
    )
    try:
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            runner = Runner(
                workflow,
                make_strategy(args.strategy),
                backend,
                executor,
                knowledge,
                seed=args.seed,
                poll_interval=poll,
                on_iteration=lambda view: live.update(_live_view(view)),
            )
            return runner.run()
    finally:
        executor.close()
        close = getattr(backend, "close", None)
        if close is not None:
            close()


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse what cannot work before the store is opened and the run recorded."""
    if args.backend not in ("mock", "slurm"):
        raise UnknownNameError("backend", args.backend, ["mock", "slurm"])
    if args.simulate and args.backend != "mock":
        raise ConfigError(f"--simulate needs --backend mock, got --backend {args.backend}")
    if args.backend == "mock":
        check_background_arguments(args)
    check_output(args.events, "--events")


def _run(args: argparse.Namespace) -> int:
    _check_arguments(args)
    if args.priority is not None and args.backend != "mock":
        raise ConfigError(
            "--priority sets the mock backend's queue model; a Slurm queue ranks jobs as the site "
            "configured it (read it with: scontrol show config | grep -i -E 'PriorityType|PriorityFlags')"
        )
    workflow = resolve_workflow(args.workflow)
    console = Console()
    store: Store | None = None
    if not args.no_store:
        from elastic.store import Store

        store = Store(args.store)
    try:
        learner = ASAEstimator(policy=args.learner, random_state=args.seed)
        run_id = None
        if store is not None:
            run_id = store.record_run(
                workflow.name,
                args.strategy,
                args.backend + ("-sim" if args.simulate else ""),
                params={
                    "seed": args.seed,
                    "trace": args.trace,
                    "speedup": args.speedup,
                    "priority": (args.priority or DEFAULT_PRIORITY) if args.backend == "mock" else None,
                },
            )
        began = time.perf_counter()
        try:
            with _sigterm_interrupts():
                if args.simulate:
                    result = _simulate(args, workflow, learner, store)
                else:
                    result = _real(args, workflow, learner, store, console)
        except BaseException:
            if store is not None and run_id is not None:  # set up failed, or interrupted during it
                store.finish_run(run_id, "interrupted", {})
            raise
        elapsed = time.perf_counter() - began
        if store is not None and run_id is not None:  # before anything else can fail
            status = "failed" if result.status not in ("completed", "interrupted") else result.status
            store.finish_run(run_id, status, _json_metrics(result.metrics), params={"detail": result.detail})
        console.print(
            metrics_table(result.metrics, f"{workflow.name} under {result.strategy}: {result.status}")
        )
        if result.detail and result.status != "completed":
            console.print(f"the run {result.status}: {result.detail}", highlight=False)
        if args.backend == "mock":
            priority = describe_priority(args.priority or DEFAULT_PRIORITY)
            console.print(f"mock queue: {priority}", highlight=False)
        console.print(f"run took {elapsed:.1f} s of real time", highlight=False)
        if args.events:
            import pandas as pd

            events = pd.DataFrame([_event_row(e) for e in result.events])
            write_output(Path(args.events), "--events", lambda path: events.to_csv(path, index=False))
            console.print(f"event timeline written to {args.events}", highlight=False)
    finally:
        if store is not None:
            store.close()
    return {"completed": 0, "interrupted": 130}.get(result.status, 1)


def _event_row(e: Any) -> dict[str, Any]:
    return {
        "time": e.time,
        "kind": e.kind.value,
        "stage": e.stage,
        "allocation": e.allocation,
        "task": e.task,
        "cores": e.cores,
        "walltime": e.walltime,
        "predicted_wait": e.predicted_wait,
        "eligible": e.eligible,
        "job_id": e.job_id,
        "note": e.note,
    }

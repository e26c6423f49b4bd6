"""``elastic run``: run one workflow under one strategy and print its metrics.

``elastic run --workflow FILE_OR_NAME --strategy bigjob|perstage|asa|asa-naive --backend mock|slurm
[--simulate] [--speedup K] [--trace PATH] [--seed S] [--poll SECONDS] [--job-cores N]
[--store URL | --no-store]``

- ``--backend mock --simulate``: pure simulation (virtual clock, no processes).
- ``--backend mock``: real execution through the pool; the mock backend's clock runs ``--speedup`` times
  faster than real time, allocations start real agents as local processes, tasks are real processes
  (a stage's ``command``, else ``sleep`` of its sampled duration / K).
- ``--backend slurm``: real allocations on Slurm (``--partition``, ``--account``, ``--qos``), agents started
  by the job scripts connect back to this process (``--bind``).

``elastic run montage|blast|statistics --strategy ... [--frontend elastic|parsl|prefect] [--size N]
[--workdir DIR]`` runs a demo workflow with the real tools instead and checks its output
(:mod:`elastic.cli.run_demo`).

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
import math
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live

from elastic.cli.arguments import (
    add_background_arguments,
    add_submission_rate_argument,
    check_background_arguments,
    load_background,
    mock_backend,
)
from elastic.cli.commands import add_command
from elastic.cli.outputs import check_output
from elastic.cli.run_demo import add_demo_arguments, check_demo_arguments, print_outcome, run_demo
from elastic.cli.run_view import PlainLines, live_view, metrics_table, sigterm_interrupts, write_events
from elastic.cli.values import parse_seed, positive_float, positive_int, speedup
from elastic.cli.weight import add_weight_argument, check_weight, strategy_options
from elastic.control.execution import Execution, RunResult
from elastic.control.runner import Runner
from elastic.errors import ConfigError, UnknownNameError
from elastic.learners.base import WaitPredictor
from elastic.learners.choice import WAIT_LEARNERS, make_wait_learner, shared_name
from elastic.metrics import RunMetrics
from elastic.simulator.priority import DEFAULT_PRIORITY, describe_priority
from elastic.strategies import (
    STRATEGY_NAMES,
    Knowledge,
    MemoryHistory,
    make_strategy,
    strategy_learner,
)
from elastic.workflow import Workflow, resolve_workflow

if TYPE_CHECKING:
    from collections.abc import Callable

    from elastic.backends.base import BatchBackend
    from elastic.store.resilient import ResilientStore
    from elastic.strategies import RunView

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``run`` subcommand."""
    parser = add_command(
        subparsers,
        "run",
        _run,
        description="Run a workflow on pilot allocations chosen by a strategy; print the run's metrics.",
    )
    add_demo_arguments(parser)
    parser.add_argument("--workflow", help="built-in name (e.g. demo3) or .toml/.json file (or a DEMO)")
    parser.add_argument("--strategy", required=True, type=_strategy_name, choices=STRATEGY_NAMES)
    parser.add_argument(
        "--backend", default="mock", help="mock or slurm, or local for a DEMO (default: mock)"
    )
    parser.add_argument(
        "--simulate", action="store_true", help="pure simulation: virtual clock, no processes"
    )
    parser.add_argument(
        "--speedup",
        type=speedup,
        default=60.0,
        help="mock clock speed-up K, from 0.01 to 1000 (default: 60)",
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
        "--learner",
        choices=WAIT_LEARNERS,
        default=None,
        help="wait learner (default: the strategy's own: ewma, tuned for the paper's ASA)",
    )
    add_weight_argument(parser)
    parser.add_argument(
        "--job-cores",
        type=positive_int,
        default=None,
        metavar="N",
        help="ask each allocation as batch jobs of at most N cores, none narrower than the widest task it "
        "must run (1: jobs as narrow as that task, as a job array would run them); default: the "
        "strategy's own jobs",
    )
    parser.add_argument("--store", metavar="URL", help="SQLAlchemy URL of the store (default: see docs)")
    parser.add_argument("--no-store", action="store_true", help="keep nothing across runs")
    parser.add_argument("--partition", help="Slurm partition")
    parser.add_argument("--account", help="Slurm account")
    parser.add_argument("--qos", help="Slurm QOS")
    parser.add_argument("--bind", default="127.0.0.1", help="interface the pool listens on (Slurm)")
    parser.add_argument("--events", metavar="OUT.csv", help="write the run's event timeline as CSV")
    add_submission_rate_argument(parser)
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="show no progress while the run goes on (default: a live view on a terminal, else log lines)",
    )
    add_background_arguments(parser)


def _strategy_name(text: str) -> str:
    """Return ``text``; refuse a row label of ``elastic compare`` (``asa-fine``), saying what it is here."""
    if text in STRATEGY_NAMES:
        return text
    from elastic.experiments import parse_strategy

    try:
        name, shape = parse_strategy(text)
    except UnknownNameError:
        return text  # the choices say what is allowed
    how = "--job-cores 1" if shape == "fine" else "--job-cores N (compare's split: half the peak width)"
    raise argparse.ArgumentTypeError(
        f"{text} is a row label of elastic compare; here: --strategy {name} {how}"
    )


SIM_PROGRESS_INTERVAL = 5.0
"""Real seconds between two "simulating: ..." lines of ``elastic run --simulate`` while a run goes on."""


def _json_metrics(metrics: RunMetrics) -> dict[str, float | None]:
    return {k: (None if math.isnan(v) else v) for k, v in metrics.summary().items()}


def _simulate(
    args: argparse.Namespace,
    workflow: Workflow,
    learner: WaitPredictor,
    store: ResilientStore | None,
    console: Console,
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
        learner=args.learner,
        queue_rules=setup.queue_rules,
        strategy_options=strategy_options(args, args.strategy),
        waits=learner,
        history=store if store is not None else MemoryHistory(),
        wait_store=store,
        shared=store,
        poll_interval=args.poll or 30.0,
        submission_rate=args.submission_rate,
        job_cores=args.job_cores,
        # off a terminal, or on one: the same lines, as the run goes (a large one takes minutes)
        on_iteration=None if args.no_progress else PlainLines(console),
        progress=None
        if args.no_progress
        else lambda line: console.print(f"elastic: {line}", highlight=False),
        progress_interval=SIM_PROGRESS_INTERVAL,
    )
    return result


def _real(
    args: argparse.Namespace,
    workflow: Workflow,
    learner: WaitPredictor,
    store: ResilientStore | None,
    console: Console,
) -> RunResult:
    from elastic.control.pool_execution import PoolExecution

    backend: BatchBackend
    speedup = 1.0
    if args.backend == "mock":
        speedup = args.speedup
        backend = mock_backend(args)
        poll = args.poll or 30.0
    elif args.backend == "slurm":
        from elastic.backends.slurm import SlurmBackend

        backend = SlurmBackend(args.partition, args.account, args.qos)
        poll = args.poll or 10.0
    else:
        raise UnknownNameError("backend", args.backend, ["mock", "slurm"])
    executor: Execution = PoolExecution(  # it alone knows which backends start an agent per node
        backend, speedup=speedup, bind=args.bind, fail_fast=True, node_cores=backend.partition().node_cores
    )
    knowledge = Knowledge(
        workflow,
        waits=learner,
        history=store if store is not None else MemoryHistory(),
        wait_store=store,
        partition=args.partition,
        backend=backend.name,
        max_walltime=backend.partition().max_walltime,
        shared=store,
        learner_name=shared_name(args.learner or strategy_learner(args.strategy)),
    )
    live_on = not args.no_progress and console.is_terminal
    try:
        with Live(console=console, refresh_per_second=4, transient=True, auto_refresh=live_on) as live:
            on_iteration: Callable[[RunView], None] | None = None
            if live_on:  # the live view on a terminal
                on_iteration = lambda view: live.update(live_view(view))  # noqa: E731
            elif not args.no_progress:  # elsewhere one line per change
                on_iteration = PlainLines(console)
            runner = Runner(
                workflow,
                make_strategy(args.strategy, **strategy_options(args, args.strategy)),
                backend,
                executor,
                knowledge,
                seed=args.seed,
                poll_interval=poll,
                on_iteration=on_iteration,
                submission_rate=args.submission_rate,
                job_cores=args.job_cores,
            )
            return runner.run()
    finally:
        executor.close()
        close = getattr(backend, "close", None)
        if close is not None:
            close()


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse what cannot work before the store is opened and the run recorded."""
    if (args.demo is None) == (args.workflow is None):
        raise ConfigError(
            "give either a demo (elastic run montage|blast|statistics ...) or --workflow FILE_OR_NAME"
            + (", not both" if args.demo is not None else "")
        )
    if args.demo is not None:
        check_demo_arguments(args)
    else:
        for option, value in (
            ("--frontend", args.frontend),
            ("--size", args.size),
            ("--workdir", args.workdir),
        ):
            if value is not None:
                raise ConfigError(
                    f"{option} applies to the demos (elastic run montage|blast|statistics), not --workflow"
                )
        if args.backend == "local":  # the demos' backend, as --backend's help says
            raise ConfigError(
                "--backend local runs the demos (elastic run montage|blast|statistics) on this machine; "
                "a --workflow runs on --backend mock (add --simulate for a pure simulation) or slurm"
            )
        if args.backend not in ("mock", "slurm"):
            raise UnknownNameError("backend", args.backend, ["mock", "slurm"])
        if args.simulate and args.backend != "mock":
            raise ConfigError(f"--simulate needs --backend mock, got --backend {args.backend}")
    if args.backend == "mock":
        check_background_arguments(args)
    else:
        given = [o for o in _BACKGROUND_OPTIONS if getattr(args, o.lstrip("-").replace("-", "_")) is not None]
        if given or args.mode != "replay":
            raise ConfigError(
                f"{(given or ['--mode'])[0]} sets the mock backend's background load; "
                f"--backend {args.backend} has its own queue: drop it"
            )
    check_output(args.events, "--events")


_BACKGROUND_OPTIONS = ("--trace", "--load", "--processors", "--policy", "--reserve")
"""Options of the mock backend's background (with ``--mode`` and ``--priority``, checked apart)."""


def _run(args: argparse.Namespace) -> int:
    _check_arguments(args)
    check_weight(args, [args.strategy])
    if args.priority is not None and args.backend != "mock":
        raise ConfigError(
            "--priority sets the mock backend's queue model; a Slurm queue ranks jobs as the site "
            "configured it (read it with: scontrol show config | grep -i -E 'PriorityType|PriorityFlags')"
        )
    if args.demo is not None:
        return _run_demo(args)
    workflow = resolve_workflow(args.workflow)
    console = Console()
    store: ResilientStore | None = None
    if not args.no_store:
        from elastic.store import Store
        from elastic.store.resilient import ResilientStore

        store = ResilientStore(Store(args.store))
    try:
        learner = make_wait_learner(args.learner or strategy_learner(args.strategy), seed=args.seed)
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
            with sigterm_interrupts():
                if args.simulate:
                    result = _simulate(args, workflow, learner, store, console)
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
            write_events(args.events, result, console)
    finally:
        if store is not None:
            store.close()
    return {"completed": 0, "interrupted": 130}.get(result.status, 1)


def _run_demo(args: argparse.Namespace) -> int:
    """Run a demo (:mod:`elastic.cli.run_demo`), print its checks and metrics; 1 if a check failed."""
    console = Console()
    store: ResilientStore | None = None
    if not args.no_store:
        from elastic.store import Store
        from elastic.store.resilient import ResilientStore

        store = ResilientStore(Store(args.store))
    try:
        with sigterm_interrupts():
            outcome = run_demo(args, store)
        print_outcome(console, outcome, args, store)
        if args.events and outcome.result is not None:
            write_events(args.events, outcome.result, console)
    finally:
        if store is not None:
            store.close()
    if outcome.status != "completed":
        return 130 if outcome.status == "interrupted" else 1
    return 0 if outcome.verification is not None and outcome.verification.ok else 1

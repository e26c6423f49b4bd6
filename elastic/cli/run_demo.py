r"""``elastic run montage|blast|statistics``: a demo workflow with the real tools, checked, with its metrics.

``elastic run DEMO --strategy S --backend mock|slurm|local [--frontend elastic|parsl|prefect] [--size N]
[--seed S] [--workdir DIR]``

The demo's input is generated (seeded) in a fresh folder under ``--workdir`` (default: the system's
temporary directory; on Slurm it must be a file system the nodes share), then its dataflow runs through
the chosen front-end on allocations the strategy requests from the backend:

- ``elastic``: the front door (:class:`elastic.Elastic`);
- ``parsl``: Parsl ``python_app``\\ s on Elastic's ``ElasticExecutor``;
- ``prefect``: a Prefect flow on Elastic's ``ElasticTaskRunner`` (Prefect's API: ``PREFECT_API_URL``, else a
  temporary local server).

The run and its stages' runtimes are kept in the store under the demo's name (``montage``, ...), so
simulated comparisons can draw on what the real tools took. Then the output is checked against what the
input planted (:mod:`workflows`). Every argument is checked before anything is generated or submitted.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from elastic.cli.arguments import mock_backend
from elastic.cli.run_view import metrics_table
from elastic.errors import ConfigError, MissingExtraError
from elastic.extras import require

if TYPE_CHECKING:
    from elastic.backends.base import BatchBackend
    from elastic.control.execution import RunResult
    from elastic.store.resilient import ResilientStore
    from elastic.workflows.dataflow import Verification

__all__ = [
    "DEMO_BACKENDS",
    "DEMO_NAMES",
    "FRONTEND_NAMES",
    "DemoOutcome",
    "add_demo_arguments",
    "check_demo_arguments",
    "print_outcome",
    "run_demo",
]

DEMO_NAMES = ("montage", "blast", "statistics")
"""The demos (kept here so ``--help`` stays light; a test pins them equal to ``workflows.demos.DEMOS``)."""
FRONTEND_NAMES = ("elastic", "parsl", "prefect")
"""The front-ends a demo runs through (``elastic.workflows.frontends.FRONTENDS``)."""
DEMO_BACKENDS = ("mock", "slurm", "local")
"""Backends a demo runs on."""


#: demo -> the modules of the ``demos`` extra it imports (Montage's FITS and PNG checks; the statistics
#: workflow's Parquet chunks).
DEMO_MODULES: dict[str, tuple[str, ...]] = {
    "montage": ("astropy", "matplotlib"),
    "statistics": ("pyarrow",),
}


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the demo (positional) and ``--frontend``, ``--size``, ``--workdir``."""
    parser.add_argument(
        "demo",
        nargs="?",
        choices=DEMO_NAMES,
        metavar="DEMO",
        help="run a demo workflow with the real tools and check its output: montage, blast or statistics "
        "(instead of --workflow)",
    )
    parser.add_argument(
        "--frontend",
        choices=FRONTEND_NAMES,
        default=None,
        help="demos: run the dataflow through the front door (elastic, default), Parsl apps or a "
        "Prefect flow",
    )
    parser.add_argument(
        "--size",
        type=int,
        default=None,
        help="demos: input size (montage: tiles per side, default 3; blast: query chunks, default 8; "
        "statistics: weeks of data, default 8)",
    )
    parser.add_argument(
        "--workdir",
        metavar="DIR",
        default=None,
        help="demos: existing writable folder for the run's files (default: the temporary directory; on "
        "Slurm, a folder the nodes share)",
    )


def check_demo_arguments(args: argparse.Namespace) -> None:
    """Refuse what a demo run cannot use, before anything is generated or submitted.

    Raises
    ------
    ConfigError
        ``--simulate`` (a demo runs real programs), a backend other than mock, slurm, local, a size out of
        the demo's range, a front-end whose Elastic executor or task runner is not installed, or a
        ``--workdir`` that is not an existing writable folder.
    """
    from elastic.workflows.dataflow import check_size
    from elastic.workflows.demos import get_demo

    if args.simulate:
        raise ConfigError(f"--simulate runs no program; the {args.demo} demo runs real ones: drop --simulate")
    if args.backend not in DEMO_BACKENDS:
        from elastic.errors import UnknownNameError

        raise UnknownNameError("backend", args.backend, DEMO_BACKENDS)
    demo = get_demo(args.demo)
    check_size(demo, demo.default_size if args.size is None else args.size)
    if DEMO_MODULES.get(args.demo):
        require("demos", f"the {args.demo} demo", DEMO_MODULES[args.demo])
    if args.frontend in ("parsl", "prefect"):  # Elastic's executor or task runner must be installed
        import importlib

        module = {"parsl": "elastic.executors.parsl_executor", "prefect": "elastic.executors.prefect_runner"}[
            args.frontend
        ]
        if args.frontend == "prefect":  # without PREFECT_API_URL Prefect starts a temporary server, which
            # took over its default 20 s to start on a busy 2-core machine: give it 3 minutes unless set
            os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
            # and its telemetry heartbeat, which logged a 200-line "database is locked" traceback from
            # the temporary server's SQLite file while the run went on unaffected, off unless set
            os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        try:
            importlib.import_module(module)
        except MissingExtraError:  # names the extra to install
            raise
        except ImportError as exc:
            raise ConfigError(
                f"--frontend {args.frontend} runs on Elastic's {module.replace('.', '/')}.py, which this "
                f"installation lacks ({exc}); use --frontend elastic"
            ) from exc
    if args.workdir is not None:
        folder = Path(args.workdir)
        if not folder.is_dir():
            what = "is not a directory" if folder.exists() else "does not exist"
            raise ConfigError(f"--workdir {args.workdir!r} {what}: give an existing folder")
        import tempfile

        try:  # tried, not guessed from permission bits
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as exc:
            raise ConfigError(
                f"--workdir {args.workdir!r} cannot be written ({exc.strerror}): choose a writable folder"
            ) from exc


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    """How a demo run went, for the command to print.

    ``result`` is the front door's record of the run (metrics, events) when the front-end gives it back;
    ``verification`` is None when the workflow did not complete.
    """

    demo: str
    frontend: str
    folder: Path
    status: str
    detail: str
    result: RunResult | None
    verification: Verification | None
    generate_seconds: float
    run_seconds: float
    verify_seconds: float


def _backend(args: argparse.Namespace) -> BatchBackend:
    if args.backend == "mock":
        return mock_backend(args)
    if args.backend == "local":
        from elastic.backends.local import LocalBackend

        return LocalBackend()
    from elastic.backends.slurm import SlurmBackend

    return SlurmBackend(args.partition, args.account, args.qos)


def run_demo(args: argparse.Namespace, store: ResilientStore | None) -> DemoOutcome:
    """Generate the demo's input, run it through the chosen front-end, check the output.

    Ctrl-C (a ``KeyboardInterrupt``) ends the run ``interrupted`` (recorded, every allocation released);
    a failed task ends it ``failed``; both are returned, not raised.
    """
    from elastic.workflows.demos import prepare

    demo, folder, inputs, generated = prepare(args.demo, size=args.size, seed=args.seed, workdir=args.workdir)
    frontend = args.frontend or "elastic"
    backend = _backend(args)
    settings: dict[str, Any] = {
        "backend": backend,
        "strategy": _strategy(args),
        "workflow": demo.name,
        "store": store if store is not None else False,
        "learner": args.learner,
        "poll_interval": args.poll,
        "submission_rate": args.submission_rate,
        "job_cores": args.job_cores,
        "bind": args.bind,
        "progress": not getattr(args, "no_progress", False),
    }
    status, detail, output, result = "completed", "", None, None
    began = time.perf_counter()
    try:
        if frontend == "elastic":
            status, detail, output, result = _through_elastic(demo, inputs, settings)
        else:
            through = _through_workflow_system(frontend, demo, folder, inputs, settings)
            status, detail, output, result = through
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    ran = time.perf_counter() - began
    verification, checked = None, 0.0
    if status == "completed":
        began = time.perf_counter()
        verification = _verify(demo, inputs, output)
        checked = time.perf_counter() - began
    return DemoOutcome(
        demo.name, frontend, folder, status, detail, result, verification, generated, ran, checked
    )


def _through_elastic(demo: Any, inputs: Any, settings: dict[str, Any]) -> tuple[str, str, Any, Any]:
    from elastic.front.door import Elastic

    el = Elastic(**settings)
    status, detail, output = "completed", "", None
    try:
        with el:  # leaving by Ctrl-C ends the run interrupted and releases everything
            try:
                output = demo.driver(el, inputs)
            except Exception as exc:  # a task failed, so did the driver waiting for it
                status, detail = "failed", f"{type(exc).__name__}: {exc}"
                el.shutdown(wait=False, cancel_futures=True, status="failed")
    except KeyboardInterrupt as exc:
        status, detail = "interrupted", str(exc) or "interrupted"
    return status, detail, output, el.result


def _through_workflow_system(
    frontend: str, demo: Any, folder: Path, inputs: Any, settings: dict[str, Any]
) -> tuple[str, str, Any, Any]:
    from elastic.workflows.frontends import (
        elastic_parsl_config,
        elastic_prefect_runner,
        run_parsl,
        run_prefect,
    )

    status, detail, output = "completed", "", None
    if frontend == "parsl":
        config = elastic_parsl_config(label="elastic", run_dir=str(folder / "runinfo"), **settings)
        executor: Any = config.executors[0]
        # Parsl sets its loggers to DEBUG and writes them to runinfo/*/parsl.log; keep them off the terminal
        logging.getLogger("parsl").propagate = False
    else:
        runner = elastic_prefect_runner(**settings)
    try:
        if frontend == "parsl":
            output = run_parsl(demo.driver, inputs, config, executors=["elastic"])
        else:
            output = run_prefect(demo.driver, inputs, runner, name=demo.name)
    except KeyboardInterrupt as exc:
        status, detail = "interrupted", str(exc) or "interrupted"
    except Exception as exc:
        status, detail = "failed", f"{type(exc).__name__}: {exc}"
    result = None
    if frontend == "parsl":  # the front door behind the executor keeps the run's record
        door = getattr(executor, "front_door", None)
        result = getattr(door, "result", None)
    else:  # the task runner keeps one record per flow run it ran, newest last
        records = getattr(runner, "results", None) or [None]
        result = records[-1]
    return status, detail, output, result


def _verify(demo: Any, inputs: Any, output: Any) -> Verification:
    from elastic.workflows.dataflow import Check, Verification

    try:
        verification: Verification = demo.verify(inputs, output)
    except Exception as exc:  # missing or unreadable output: a failed check, with what went wrong
        return Verification(demo.name, (Check("output readable", False, f"{type(exc).__name__}: {exc}"),))
    return verification


def print_outcome(
    console: Console, outcome: DemoOutcome, args: argparse.Namespace, store: ResilientStore | None
) -> None:
    """Print the checks, the run's metrics (from the front door, else from the store) and where things are."""
    title = f"{outcome.demo} under {args.strategy} on {args.backend} through {outcome.frontend}"
    if outcome.verification is not None:
        checks = Table(title=f"{title}: checks")
        for col in ("check", "result", "detail"):
            checks.add_column(col)
        for c in outcome.verification.checks:
            checks.add_row(c.name, "[green]pass[/]" if c.ok else "[bold red]FAIL[/]", c.detail)
        console.print(checks)
    if outcome.result is not None:
        console.print(metrics_table(outcome.result.metrics, f"{title}: {outcome.status}"))
    else:
        _print_stored_metrics(console, outcome, store, title)
    if outcome.detail:
        console.print(f"the run {outcome.status}: {outcome.detail}", highlight=False)
    if args.backend == "mock":
        from elastic.simulator.priority import DEFAULT_PRIORITY, describe_priority

        console.print(f"mock queue: {describe_priority(args.priority or DEFAULT_PRIORITY)}", highlight=False)
    console.print(
        f"input generated in {outcome.generate_seconds:.1f} s, workflow ran in {outcome.run_seconds:.1f} s, "
        f"checked in {outcome.verify_seconds:.1f} s (real time); files in {outcome.folder}",
        highlight=False,
    )
    if outcome.verification is not None:
        verdict = "every check passed" if outcome.verification.ok else "a check FAILED"
        console.print(f"{outcome.demo}: {verdict}", highlight=False)
    if args.events and outcome.result is None:
        console.print(
            "no event timeline: this front-end does not give the run's record back", highlight=False
        )


def _print_stored_metrics(
    console: Console, outcome: DemoOutcome, store: ResilientStore | None, title: str
) -> None:
    """Metrics of the front-end's run as the store recorded them (the newest run of the demo's name)."""
    runs = store.runs(workflow=outcome.demo) if store is not None else None
    if runs is None or runs.empty:
        console.print("metrics: not available (this front-end keeps them in the store; run with one)")
        return
    row = runs.iloc[-1]
    table = Table(title=f"{title}: {row['status']} (from the store)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label in (
        ("makespan", "makespan (s)"),
        ("queue_wait", "queue wait (s)"),
        ("perceived_wait", "perceived wait (s)"),
        ("core_hours_charged", "core-hours charged"),
        ("core_hours_used", "core-hours used"),
        ("allocations", "allocations"),
    ):
        if key in row:
            table.add_row(label, f"{float(row[key]):.3f}")
    console.print(table)


def _strategy(args: argparse.Namespace) -> Any:
    """Return the strategy's name, or the strategy built with the command line's options (``--weight``)."""
    from elastic.cli.weight import strategy_options
    from elastic.strategies import make_strategy

    options = strategy_options(args, args.strategy)
    return make_strategy(args.strategy, **options) if options else args.strategy

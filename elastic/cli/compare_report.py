"""``elastic compare --out DIR``: the ASA paper's experiment and its report (Table 1, figures, CSV, HTML).

Run when ``compare`` is given ``--out``, several workflows (``--workflow montage,blast,statistics``) or
``--peak-cores 28,56,112``: every workflow at every peak core count (scaled by
:func:`~elastic.report.scaling.scale_workflow`) under every strategy, ``--runs`` times each, in pure
simulation over one background (the same start points for every cell), one wait learner per strategy
kept across all its runs (:func:`~elastic.report.experiment.run_experiment`). Prints Table 1 and, with
``--out``, writes the report there (:func:`~elastic.report.write.write_report`).

Everything the user gave is checked before the first run: the output directory can be written, every
workflow exists and scales to every peak, and fits the partition.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from elastic.cli.arguments import BackgroundSetup, load_background
from elastic.cli.weight import is_asa, options_by_strategy, weight_text
from elastic.errors import ConfigError
from elastic.experiments import (
    DEFAULT_SHAPES,
    baseline_kind,
    parse_strategy,
    shape_label,
    shaped_strategies,
)
from elastic.extras import require
from elastic.report.experiment import Cell, CellRunner, ExperimentPlan, Simulation, emulation, run_experiment
from elastic.report.records import RunRecord
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["rows", "run_report", "settings"]

_FIGURES_PER_WORKFLOW = 2  # breakdown and Gantt chart; plus one convergence figure


def rows(args: argparse.Namespace) -> tuple[str, ...]:
    """Return the comparison's row labels: ``--strategies`` with the baselines in every ``--shapes``.

    Without ``--shapes``: :data:`~elastic.experiments.DEFAULT_SHAPES`, ``plain`` with ``--emulate``
    (real runs of the demos cost minutes each).
    """
    if args.shapes and not any(baseline_kind(s) for s in args.strategies):
        # nothing to shape: said, not ignored
        shaped = [x for x in args.shapes if x != "plain"]
        example = shape_label(parse_strategy(args.strategies[0])[0], shaped[-1] if shaped else "fine")
        raise ConfigError(
            f"--shapes sets the baselines' allocation shapes, and --strategies {','.join(args.strategies)} "
            f"has no baseline (bigjob, perstage); add one, or give a strategy in a shape as NAME-split or "
            f"NAME-fine (--strategies {example})"
        )
    shapes = args.shapes or (["plain"] if args.emulate else list(DEFAULT_SHAPES))
    return shaped_strategies(args.strategies, shapes)


def settings(
    plan: ExperimentPlan,
    setup: BackgroundSetup,
    runtimes: str = "workflow model",
    execution: str | None = None,
    weight: float | None = None,
) -> list[tuple[str, str]]:
    """Return how the runs were made, for the report's header.

    ``execution``: how, if not simulated; ``weight``: ``asa``'s ``--weight``, None for its default.
    """
    peaks = ", ".join(map(str, plan.cores)) if plan.cores else "each workflow's own width"
    learner = f"wait learner {plan.learner}" if plan.learner else "each strategy's own wait learner"
    return [
        ("workflows", ", ".join(w.name for w in plan.workflows)),
        ("peak cores", f"{peaks} ({plan.scaling} scaling)"),
        ("strategies", ", ".join(plan.strategies)),
        (
            "allocation shapes",
            "plain: one batch job per allocation; -split: each allocation as batch jobs of at most half "
            "the workflow's peak width, rounded up; -fine: batch jobs as narrow as each request's widest "
            "task (others plan their own)",
        ),
        ("runs per cell", str(plan.runs)),
        (
            "execution",
            execution or f"pure simulation: mock backend, virtual clock, task runtimes from the {runtimes}",
        ),
        ("partition", f"{setup.workload.processors} cores"),
        ("background", setup.describe()),
        ("learner", f"{learner}, one per strategy, kept across all its runs in order"),
        ("seed", str(plan.seed)),
        *(
            [
                (
                    "asa's weight",
                    f"{weight_text(weight)}: a second of makespan priced at so many seconds of the peak",
                )
            ]
            if any(is_asa(s) for s in plan.strategies)
            else []
        ),
    ]


def run_report(
    args: argparse.Namespace, workflows: list[Workflow], console: Console, out: Path | None
) -> int:
    """Run the experiment the arguments describe, print Table 1 and write the report to ``out``.

    Parameters
    ----------
    args : argparse.Namespace
        ``compare``'s parsed arguments (``out`` already checked with :func:`check_output_dir`).
    workflows : list of Workflow
        The resolved ``--workflow`` list.
    console : Console
        Where tables and progress go.
    out : Path or None
        Report directory, or None to print the table only.
    """
    if out is not None:  # the report's figures; checked before any run
        require("demos", "the comparison report's figures (elastic compare --out)", ("matplotlib",))
    if args.runtimes == "store":
        from elastic.report.scaling import runtimes_from_store
        from elastic.store import Store

        with Store(args.store) as store:
            source = f"the store {store.url}"
            workflows = [runtimes_from_store(w, store, source=source) for w in workflows]
    elif args.store is not None:
        raise ConfigError("--store is read with --runtimes store only")
    if args.emulate and args.runtimes == "store":
        raise ConfigError("--runtimes store is for pure simulation; --emulate runs the real programs")
    plan = ExperimentPlan(
        tuple(workflows),
        rows(args),
        args.runs,
        cores=tuple(args.peak_cores or ()),
        scaling=args.scaling,
        seed=args.seed,
        learner=args.learner,
    )
    cells = plan.cells()  # every scaling checked before the background is read
    setup = load_background(args)
    runner: CellRunner
    if args.emulate:
        from elastic.workflows.emulate import demo_runner

        run_one = demo_runner(
            setup.workload,
            plan.runs,
            names=[w.name for w in workflows],
            size=args.size,
            seed=args.seed,
            speedup=args.speedup,
            workdir=args.workdir,
            policy=setup.policy,
            mode=setup.mode,
            reserve=setup.reserve,
            priority=setup.priority,
            cap_cores=bool(args.peak_cores),
            queue_rules=setup.queue_rules,
            submission_rate=args.submission_rate,
        )
        runner = emulation(run_one, seed=args.seed)
        size = "each demo's default size" if args.size is None else f"size {args.size}"
        execution = (
            f"emulation: the real demos ({size}) through the front door on the mock backend's scaled clock "
            f"({args.speedup:g}x real time)"
            + (", allocations capped at the peak cores" if args.peak_cores else "")
        )
        verb = "emulated"
    else:
        runner = Simulation(
            setup.workload,
            policy=setup.policy,
            mode=setup.mode,
            reserve=setup.reserve,
            priority=setup.priority,
            seed=args.seed,
            queue_rules=setup.queue_rules,
            submission_rate=args.submission_rate,
            options=options_by_strategy(args, plan.strategies),
            explicit_peaks=bool(args.peak_cores),
        )
        execution = None
        verb = "simulated"
    runner.check(cells)
    total = len(cells) * plan.runs
    figures = _FIGURES_PER_WORKFLOW * len(workflows) + 1 if out is not None else 0
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        runs = progress.add_task("emulating" if args.emulate else "simulating", total=total)

        done = [0]

        def advance(cell: Cell, record: RunRecord) -> None:
            done[0] += 1
            progress.update(runs, advance=1, description=f"{cell.workflow.name} {cell.strategy}")
            if not console.is_terminal and record.index == plan.runs - 1:  # no live bar in a file
                console.print(
                    f"{done[0]}/{total} runs: {cell.workflow.name} {cell.strategy} done", highlight=False
                )

        result = run_experiment(plan, runner, on_run=advance)
        files = None
        if out is not None:
            from elastic.report.write import write_report

            drawing = progress.add_task("drawing figures", total=figures)
            names = ", ".join(w.name for w in workflows)
            title = f"Elastic comparison: {names} on {setup.workload.processors} cores"
            files = write_report(
                result,
                out,
                title=title,
                settings=settings(
                    plan,
                    setup,
                    "store (recorded runs)" if args.runtimes == "store" else "workflow model",
                    execution,
                    args.weight,
                ),
                notes=[f"{total} runs {verb} in {result.elapsed:.1f} s."],
                on_figure=lambda name: progress.update(drawing, advance=1, description=f"drawing {name}"),
            )
    if files is None:
        from elastic.report.records import runs_frame
        from elastic.report.tables import table1

        table = table1(runs_frame(result.records), plan.strategies)
    else:
        table = files.table
    for t in table.rich_tables():
        console.print(t)
    console.print(
        f"{total} {verb} runs in {result.elapsed:.1f} s "
        f"({result.elapsed / total * 1000:.0f} ms per run); {setup.describe()}",
        highlight=False,
    )
    if files is not None:
        console.print(
            f"report written to {files.html} ({len(files.images)} figures, {files.runs_csv.name}, "
            f"{files.table_csv.name})",
            highlight=False,
        )
    return 0

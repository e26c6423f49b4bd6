"""Write a comparison's report into one directory: CSVs, PNGs and the self-contained HTML page.

:func:`write_report` takes an :class:`~elastic.report.experiment.ExperimentResult` and writes

``runs.csv``
    One row per run (:func:`~elastic.report.records.runs_frame`): workflow, peak cores, strategy, run
    index, learning order, status and every metric (seconds, core-hours, per-stage ``<stage>.<metric>``).
``table1.csv``
    Table 1, one row per (workflow, cores, strategy) (:meth:`~elastic.report.tables.Table1.flat`).
``breakdown-<workflow>.png``
    Makespan breakdown per workflow (the paper's Figures 6-8).
``gantt-<workflow>-<cores>c.png``
    Allocations of one run per strategy, at each workflow's largest core count.
``convergence.png``
    The wait learners' convergence.
``report.html``
    All of the above in one page, images embedded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure as MplFigure

from elastic.report.experiment import ExperimentResult
from elastic.report.figures import breakdown_figure, convergence_figure, gantt_figure, png
from elastic.report.html import Figure, page
from elastic.report.records import runs_frame
from elastic.report.tables import Table1, table1

__all__ = ["ReportFiles", "build_figures", "write_report"]


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """What :func:`write_report` wrote.

    Attributes
    ----------
    directory : Path
        The report's directory.
    html : Path
        The page.
    runs_csv, table_csv : Path
        Every run; Table 1.
    images : tuple of Path
        The PNGs, in page order.
    table : Table1
        Table 1's numbers (for the terminal).
    """

    directory: Path
    html: Path
    runs_csv: Path
    table_csv: Path
    images: tuple[Path, ...]
    table: Table1


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "workflow"


def build_figures(result: ExperimentResult, on_figure: Callable[[str], None] | None = None) -> list[Figure]:
    """Draw every figure of the report (PNG bytes), in page order.

    Parameters
    ----------
    result : ExperimentResult
        The comparison.
    on_figure : callable or None
        Called with each figure's file name once drawn (progress).
    """
    strategies = result.plan.strategies
    frame = runs_frame(result.records)
    stages: dict[str, tuple[str, ...]] = {}
    for r in result.records:
        stages.setdefault(r.workflow, r.stages)
    figures: list[Figure] = []

    def add(section: str, name: str, caption: str, fig: MplFigure) -> None:
        figures.append(Figure(section, name, caption, png(fig)))
        if on_figure is not None:
            on_figure(name)

    for workflow, names in stages.items():
        add(
            "Makespan breakdown",
            f"breakdown-{_slug(workflow)}.png",
            f"{workflow}: mean over the completed runs of the execution time and each stage's perceived "
            "queue wait, per peak core count and strategy",
            breakdown_figure(frame, workflow, names, strategies),
        )
    for workflow in stages:
        peak = max(r.cores for r in result.records if r.workflow == workflow)
        kept = [
            r for r in result.records if r.workflow == workflow and r.cores == peak and r.busy is not None
        ]
        add(
            "Allocations of one run per strategy",
            f"gantt-{_slug(workflow)}-{peak}c.png",
            f"{workflow} at {peak} peak cores, run {result.gantt_run} of each strategy (same start point "
            "in the background): each allocation's cores while pending and running, and the cores busy "
            "with tasks",
            gantt_figure(kept, strategies),
        )
    add(
        "Wait learner convergence",
        "convergence.png",
        "absolute error of each allocation's predicted queue wait, in the order each strategy's learner "
        "saw the runs (one learner per strategy, kept across all runs, workflows and core counts)",
        convergence_figure(result.records, strategies),
    )
    return figures


def write_report(
    result: ExperimentResult,
    directory: str | Path,
    *,
    title: str,
    settings: Sequence[tuple[str, str]] = (),
    notes: Sequence[str] = (),
    on_figure: Callable[[str], None] | None = None,
) -> ReportFiles:
    """Write the report of ``result`` into ``directory`` (created if missing; files overwritten).

    Parameters
    ----------
    result : ExperimentResult
        The comparison.
    directory : str or Path
        Where to write (check it first with :func:`elastic.cli.outputs.check_output_dir` from the CLI).
    title : str
        The page's title.
    settings : sequence of (str, str)
        How the runs were made, shown at the top of the page.
    notes : sequence of str
        Paragraphs under Table 1.
    on_figure : callable or None
        Called with each figure's file name once drawn.

    Returns
    -------
    ReportFiles
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    frame = runs_frame(result.records)
    table = table1(frame, result.plan.strategies)
    runs_csv, table_csv = out / "runs.csv", out / "table1.csv"
    frame.to_csv(runs_csv, index=False)
    table.flat().to_csv(table_csv, index=False)
    figures = build_figures(result, on_figure)
    images = []
    for f in figures:
        path = out / f.name
        path.write_bytes(f.data)
        images.append(path)
    report = out / "report.html"
    report.write_text(page(title, settings, table.html(), figures, notes), encoding="utf-8")
    return ReportFiles(out, report, runs_csv, table_csv, tuple(images), table)

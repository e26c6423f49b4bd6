"""The report's figures: makespan breakdowns, allocation Gantt charts, the wait learners' convergence.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state, no
display: the Agg canvas), and :func:`png` turns one into PNG bytes. Times are shown in hours.

:func:`breakdown_figure`
    The ASA paper's Figures 6-8 for one workflow: per peak core count, one bar per strategy, the mean
    execution time (makespan minus the stages' waits) with each stage's mean perceived wait stacked on it.
:func:`gantt_figure`
    One run per strategy (the same start point of the background): the cores its allocations hold
    over time, stacked: running (solid) under pending (light: submitted, not started); the cores busy
    with tasks drawn over them.
:func:`convergence_figure`
    Per strategy that predicts waits, the mean absolute error of each run's predicted queue waits, in
    the order the strategy's learner saw the runs, and its rolling mean.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from elastic.report.records import RunRecord

__all__ = ["breakdown_figure", "convergence_figure", "gantt_figure", "held_cores", "png", "stage_waits"]

_DPI = 100


def png(figure: Figure) -> bytes:
    """Render ``figure`` with the Agg canvas and return the PNG file's bytes."""
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight")
    return buffer.getvalue()


def stage_waits(runs: pd.DataFrame, stages: Sequence[str]) -> pd.DataFrame:
    """Return each completed run's execution time and per-stage perceived waits, hours.

    Parameters
    ----------
    runs : pandas.DataFrame
        The report's runs (:func:`~elastic.report.records.runs_frame`) of one workflow.
    stages : sequence of str
        Its stage names, in order.

    Returns
    -------
    pandas.DataFrame
        Columns ``cores``, ``strategy``, ``execution`` and one ``wait <stage>`` per stage; execution is
        the makespan minus the stages' waits (never below 0).
    """
    done = runs[runs["status"] == "completed"]
    out = pd.DataFrame({"cores": done["cores"], "strategy": done["strategy"]})
    total = np.zeros(len(done))
    for s in stages:
        column = f"{s}.perceived_wait"
        wait = done[column].fillna(0.0).to_numpy(dtype=float) if column in done else np.zeros(len(done))
        out[f"wait {s}"] = wait / 3600.0
        total += wait
    out["execution"] = np.maximum(done["makespan"].to_numpy(dtype=float) - total, 0.0) / 3600.0
    return out


def breakdown_figure(
    runs: pd.DataFrame, workflow: str, stages: Sequence[str], strategies: Sequence[str]
) -> Figure:
    """Return the makespan breakdown of ``workflow`` (the paper's Figures 6-8).

    Parameters
    ----------
    runs : pandas.DataFrame
        The report's runs; only ``workflow``'s completed runs are drawn.
    workflow : str
        Row label of the workflow.
    stages : sequence of str
        Its stage names, in order (one stacked segment each).
    strategies : sequence of str
        Bar order within each core count.
    """
    parts = stage_waits(runs[runs["workflow"] == workflow], stages)
    means = parts.groupby(["cores", "strategy"]).mean()
    cores = sorted({int(c) for c in runs.loc[runs["workflow"] == workflow, "cores"]})
    segments = ["execution", *(f"wait {s}" for s in stages)]
    legend = ["execution and the rest (makespan - waits)", *segments[1:]]
    colours: list[str | tuple[float, float, float]] = ["#4c72b0"]
    colours += [_shade(i, len(stages)) for i in range(len(stages))]
    fig = Figure(figsize=(max(6.0, 1.2 * len(cores) * len(strategies)), 4.2))
    ax = fig.add_subplot()
    width = 0.8 / len(strategies)
    ticks, labels = [], []
    top = 0.0
    for ci, c in enumerate(cores):
        for si, s in enumerate(strategies):
            x = ci + (si - (len(strategies) - 1) / 2) * width
            ticks.append(x)
            labels.append(s)
            if (c, s) not in means.index:
                continue
            heights = [float(v) for v in means.loc[(c, s), segments].to_numpy(dtype=float)]
            bottom = 0.0
            for value, colour in zip(heights, colours, strict=True):
                ax.bar(x, value, width * 0.9, bottom=bottom, color=colour, edgecolor="white", linewidth=0.5)
                bottom += value
            top = max(top, bottom)
    ax.set_xticks(ticks, labels, rotation=60, fontsize=8)
    for ci, c in enumerate(cores):
        ax.annotate(
            f"{c} cores", (ci, 0), xytext=(0, -58), textcoords="offset points", ha="center", fontsize=9
        )
    ax.set_ylim(0, max(top, 1e-3) * 1.08)
    ax.set_ylabel("mean makespan (h)")
    ax.set_title(f"{workflow}: makespan breakdown (execution and per-stage waits)")
    handles = [Patch(color=c, label=seg) for seg, c in zip(legend, colours, strict=True)]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _shade(i: int, n: int) -> tuple[float, float, float]:
    """Warm colours for the wait segments, light to dark."""
    level = 0.25 + 0.6 * (i / max(1, n - 1))
    return (0.95, 0.85 - 0.6 * level, 0.3 - 0.25 * level)


def gantt_figure(records: Sequence[RunRecord], strategies: Sequence[str]) -> Figure:
    """Return one Gantt panel per strategy, from the record of each that kept its busy cores.

    Parameters
    ----------
    records : sequence of RunRecord
        Runs of one cell (one workflow at one core count), one per strategy, ideally with ``busy``.
    strategies : sequence of str
        Panel order; a strategy without a record gets an empty panel that says so.
    """
    by = {r.strategy: r for r in records}
    horizon = max([r.end for r in records] + [1.0]) / 3600.0
    fig = Figure(figsize=(9.0, 1.9 * len(strategies) + 0.6))
    axes = fig.subplots(len(strategies), 1, sharex=True, squeeze=False)[:, 0]
    for ax, s in zip(axes, strategies, strict=True):
        record = by.get(s)
        ax.set_ylabel(f"{s}\ncores", fontsize=9)
        if record is None:
            ax.text(0.5, 0.5, "no run kept", transform=ax.transAxes, ha="center")
            continue
        t, pending, running = held_cores(record)
        ax.fill_between(t, 0, running, step="post", color="#4c72b0", linewidth=0)
        ax.fill_between(t, running, running + pending, step="post", color="#c9d6ea", linewidth=0)
        if record.busy:
            bt, busy = zip(*record.busy, strict=True)
            ax.step(np.asarray(bt) / 3600, busy, where="post", color="#dd8452", linewidth=1.2)
        ax.set_ylim(0, max(float((running + pending).max(initial=0)), 1.0) * 1.1)
        ax.set_title(
            f"{s}: makespan {record.metrics.get('makespan', math.nan) / 3600:.2f} h, "
            f"{record.metrics.get('core_hours_charged', math.nan):.1f} core-h",
            fontsize=9,
            loc="left",
        )
    axes[-1].set_xlim(0, horizon * 1.02)
    axes[-1].set_xlabel("hours since the workflow started")
    fig.legend(
        handles=[
            Patch(color="#c9d6ea", label="pending"),
            Patch(color="#4c72b0", label="running"),
            Patch(color="#dd8452", label="cores busy with tasks"),
        ],
        loc="upper right",
        fontsize=8,
        ncols=3,
    )
    if records:
        r = records[0]
        fig.suptitle(f"allocations of {r.workflow} at {r.cores} cores, run {r.index}", x=0.02, ha="left")
    return fig


def held_cores(
    record: RunRecord,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Return ``(hours, cores pending, cores running)`` at every change of a run's allocations.

    An allocation is pending from its submission to its start (or its end, if it never started) and
    running from its start to its end (the run's end if the timeline does not say).
    """
    changes: list[tuple[float, float, float]] = []
    for a in record.allocations:
        end = a.end if a.end is not None else record.end
        started = a.start if a.start is not None else end
        changes += [(a.submit, a.cores, 0.0), (started, -a.cores, 0.0)]
        if a.start is not None:
            changes += [(a.start, 0.0, a.cores), (end, 0.0, -a.cores)]
    if not changes:
        zero = np.zeros(1)
        return zero, zero, zero
    frame = pd.DataFrame(changes, columns=["t", "pending", "running"]).groupby("t").sum().cumsum()
    return (
        frame.index.to_numpy(dtype=float) / 3600.0,
        frame["pending"].to_numpy(dtype=float),
        frame["running"].to_numpy(dtype=float),
    )


def convergence_figure(records: Sequence[RunRecord], strategies: Sequence[str], window: int = 15) -> Figure:
    """Return the learners' convergence: each run's mean |predicted - actual wait| in learning order.

    Parameters
    ----------
    records : sequence of RunRecord
        Every run of the comparison.
    strategies : sequence of str
        Strategies to draw; those whose allocations carry no predicted wait are left out (said in the
        figure when none has any).
    window : int, default 15
        Runs in the rolling mean.
    """
    fig = Figure(figsize=(9.0, 3.8))
    ax = fig.add_subplot()
    drawn = 0
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]
    for k, s in enumerate(strategies):
        colour = palette[k % len(palette)]
        xs, errors = [], []
        for r in sorted((r for r in records if r.strategy == s), key=lambda r: r.order):
            run = [
                abs(a.predicted_wait - a.wait) / 3600.0
                for a in r.allocations
                if a.predicted_wait is not None and a.wait is not None
            ]
            if run:
                xs.append(r.order)
                errors.append(float(np.mean(run)))
        if not errors:
            continue
        drawn += 1
        ax.scatter(xs, errors, s=8, alpha=0.35, color=colour)
        running = pd.Series(errors).rolling(window, min_periods=1).mean()
        ax.plot(xs, running, color=colour, linewidth=1.8, label=f"{s} (rolling mean)")
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no strategy predicted queue waits", transform=ax.transAxes, ha="center")
    ax.set_xlabel("run, in the order the strategy's learner saw them (all workflows and core counts)")
    ax.set_ylabel("mean |predicted - actual wait| (h)")
    ax.set_title("wait learner convergence: error of the predicted queue waits of each run")
    return fig

"""The ASA paper's Table 1 from a comparison's runs: per workflow and peak cores, each strategy's figures.

For every row (workflow, peak cores) and strategy: the mean and median over the completed runs of the
makespan, the total wait (the workflow's perceived waits summed over its stages: the time its work
waited for cores, what the paper's makespan breakdowns stack) and the core-hours charged; beside each
mean, how far it is above the best mean of the row (the paper's percentages in parentheses). Below each
workflow, the *normalised average*: the mean over its rows of ``mean / best of the row - 1``, per
strategy and metric (the paper's "normalized average ... related to the lowest metric for each
resource scaling row"). A row whose best is 0 (no strategy waited) has no percentage and is left out
of that average.

Examples
--------
>>> import pandas as pd
>>> runs = pd.DataFrame({
...     "workflow": ["w"] * 4, "cores": [8] * 4, "strategy": ["a", "a", "b", "b"], "run": [0, 1, 0, 1],
...     "status": ["completed"] * 4, "makespan": [3600.0, 7200.0, 3600.0, 3600.0],
...     "perceived_wait": [0.0, 3600.0, 0.0, 0.0], "core_hours_charged": [8.0, 8.0, 4.0, 6.0]})
>>> t = table1(runs)
>>> row = t.cells.loc[("w", 8)]
>>> float(row[("a", "makespan", "mean")]), float(row[("a", "makespan", "over")])
(1.5, 0.5)
>>> norm = t.normalised.loc["w"]
>>> float(norm[("b", "core_hours_charged")]), float(norm[("a", "core_hours_charged")])
(0.0, 0.6000000000000001)
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from rich.table import Table

__all__ = ["METRICS", "Table1", "format_over", "table1"]

METRICS: tuple[tuple[str, str, float], ...] = (
    ("makespan", "makespan (h)", 3600.0),
    ("perceived_wait", "total wait (h)", 3600.0),
    ("core_hours_charged", "core-hours", 1.0),
)
"""Metrics of the table: (run column, title, divisor to its unit)."""


def format_over(over: float) -> str:
    """Return ``"(+13%)"`` for 0.13, ``""`` for the best (0) or no percentage (nan)."""
    if math.isnan(over) or round(over * 100) == 0:
        return ""
    return f"(+{over * 100:.0f}%)"


@dataclass(frozen=True, slots=True)
class Table1:
    """The table's numbers.

    Attributes
    ----------
    cells : pandas.DataFrame
        Index ``(workflow, cores)``; columns ``(strategy, metric, stat)`` with ``stat`` in ``mean``,
        ``median`` (in the metric's unit) and ``over`` (mean / best mean of the row - 1), plus
        ``(strategy, "runs", "completed")`` and ``(strategy, "runs", "total")``.
    normalised : pandas.DataFrame
        Index ``workflow``; columns ``(strategy, metric)``: mean over the workflow's rows of ``over``.
    strategies : tuple of str
        Column order.
    """

    cells: pd.DataFrame
    normalised: pd.DataFrame
    strategies: tuple[str, ...]

    def rich_tables(self) -> list[Table]:
        """One terminal table per metric: ``mean (+x%) / median`` per strategy, normalised averages."""
        out = []
        for key, title, _ in METRICS:
            t = Table(title=f"{title}: mean (% over the row's best) / median")
            t.add_column("workflow")
            t.add_column("peak cores", justify="right")
            for s in self.strategies:
                t.add_column(s, justify="right")
            for workflow, rows in self._groups():
                for cores, row in rows:
                    t.add_row(str(workflow), str(cores), *(self._cell(row, s, key) for s in self.strategies))
                t.add_row(
                    "",
                    "normalised",
                    *(_pct(self._norm(workflow, s, key)) for s in self.strategies),
                    end_section=True,
                )
            out.append(t)
        return out

    def _groups(self) -> list[tuple[str, list[tuple[int, pd.Series]]]]:
        """Rows grouped by workflow, in table order: ``(workflow, [(cores, row), ...])``."""
        groups: dict[str, list[tuple[int, pd.Series]]] = {}
        for i in range(len(self.cells)):
            workflow, cores = self.cells.index[i]
            groups.setdefault(str(workflow), []).append((int(cores), self.cells.iloc[i]))
        return list(groups.items())

    def _norm(self, workflow: str, strategy: str, key: str) -> float:
        """Normalised average of ``strategy``'s ``key`` over ``workflow``'s rows."""
        return float(self.normalised.to_numpy()[self._windex[workflow], self._ncol[(strategy, key)]])

    @property
    def _windex(self) -> dict[str, int]:
        return {str(w): i for i, w in enumerate(self.normalised.index)}

    @property
    def _ncol(self) -> dict[tuple[str, str], int]:
        return {(str(c[0]), str(c[1])): i for i, c in enumerate(self.normalised.columns)}

    def _cell(self, row: pd.Series, strategy: str, key: str) -> str:
        mean, median, over = (float(row[(strategy, key, stat)]) for stat in ("mean", "median", "over"))
        if math.isnan(mean):
            return "-"
        text = f"{mean:.2f} {format_over(over)}".rstrip()
        return f"{text} / {median:.2f}"

    def html(self) -> str:
        """Return the table as HTML (grouped headers per strategy, medians in small type under the means)."""
        strategies = self.strategies
        head1 = "".join(f'<th colspan="{len(METRICS)}">{html.escape(s)}</th>' for s in strategies)
        head2 = "".join(f"<th>{html.escape(title)}</th>" for s in strategies for _, title, _ in METRICS)
        rows = []
        for workflow, group in self._groups():
            first = True
            for cores, row in group:
                label = f'<th rowspan="{len(group) + 1}">{html.escape(str(workflow))}</th>' if first else ""
                first = False
                cells = []
                for s in strategies:
                    done, total = int(row[(s, "runs", "completed")]), int(row[(s, "runs", "total")])
                    for key, _, _ in METRICS:
                        mean = float(row[(s, key, "mean")])
                        if math.isnan(mean):
                            cells.append("<td>-</td>")
                            continue
                        over = float(row[(s, key, "over")])
                        best = ' class="best"' if not math.isnan(over) and round(over * 100) == 0 else ""
                        note = "" if done == total else f"<br><small>{done}/{total} runs completed</small>"
                        cells.append(
                            f"<td{best}>{mean:.2f} <span class=over>{format_over(over)}</span>"
                            f"<br><small>median {float(row[(s, key, 'median')]):.2f}</small>{note}</td>"
                        )
                rows.append(f"<tr>{label}<td>{cores}</td>{''.join(cells)}</tr>")
            cells = [
                f"<td>{_pct(self._norm(workflow, s, key))}</td>" for s in strategies for key, _, _ in METRICS
            ]
            rows.append(f'<tr class="norm"><td>normalised average</td>{"".join(cells)}</tr>')
        return (
            '<table class="table1"><thead>'
            f'<tr><th rowspan="2">workflow</th><th rowspan="2">peak cores</th>{head1}</tr>'
            f"<tr>{head2}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )

    def flat(self) -> pd.DataFrame:
        """One row per (workflow, cores, strategy) with every statistic (the report's ``table1.csv``)."""
        frame = pd.DataFrame(self.cells.stack(level=0, future_stack=True))
        frame.index = frame.index.set_names(["workflow", "cores", "strategy"])
        frame.columns = pd.Index([f"{col[0]}_{col[1]}" for col in frame.columns])
        return frame.reset_index()


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"+{value * 100:.0f}%"


def _over(means: pd.Series) -> pd.Series:
    """``mean / best - 1`` per strategy; nan when the best is 0 and the value is not."""
    best = float(means.min())
    if math.isnan(best):
        return means * math.nan
    if best == 0:
        return means.where(means != 0, 0.0).where(means == 0, math.nan)
    over: pd.Series = means / best - 1
    return over


def table1(runs: pd.DataFrame, strategies: tuple[str, ...] | None = None) -> Table1:
    """Compute the table from a frame of runs (:func:`~elastic.report.records.runs_frame`).

    Parameters
    ----------
    runs : pandas.DataFrame
        Columns ``workflow``, ``cores``, ``strategy``, ``status`` and the metrics of :data:`METRICS`.
    strategies : tuple of str or None, default None
        Column order (default: order of appearance).

    Returns
    -------
    Table1
        Means and medians over the completed runs of each cell.
    """
    if strategies is None:
        strategies = tuple(dict.fromkeys(runs["strategy"]))
    rows = list(dict.fromkeys(zip(runs["workflow"], runs["cores"], strict=True)))
    columns = pd.MultiIndex.from_tuples(
        [(s, key, stat) for s in strategies for key, _, _ in METRICS for stat in ("mean", "median", "over")]
        + [(s, "runs", stat) for s in strategies for stat in ("completed", "total")]
    )
    cells = pd.DataFrame(np.nan, index=pd.MultiIndex.from_tuples(rows), columns=columns)
    done = runs[runs["status"] == "completed"]
    for (workflow, cores), group in runs.groupby(["workflow", "cores"], sort=False):
        ok = done[(done["workflow"] == workflow) & (done["cores"] == cores)]
        for s in strategies:
            cells.loc[(workflow, cores), (s, "runs", "total")] = int((group["strategy"] == s).sum())
            cells.loc[(workflow, cores), (s, "runs", "completed")] = int((ok["strategy"] == s).sum())
        for key, _, divisor in METRICS:
            by = ok.groupby("strategy")[key]
            means = (by.mean() / divisor).reindex(list(strategies))
            medians = (by.median() / divisor).reindex(list(strategies))
            for s in strategies:
                cells.loc[(workflow, cores), (s, key, "mean")] = means[s]
                cells.loc[(workflow, cores), (s, key, "median")] = medians[s]
                cells.loc[(workflow, cores), (s, key, "over")] = _over(means)[s]
    norm_cols = pd.MultiIndex.from_tuples([(s, key) for s in strategies for key, _, _ in METRICS])
    workflows = list(dict.fromkeys(w for w, _ in rows))
    normalised = pd.DataFrame(np.nan, index=workflows, columns=norm_cols)
    for w in workflows:
        block = cells.loc[w]
        for s in strategies:
            for key, _, _ in METRICS:
                values = block[(s, key, "over")].to_numpy(dtype=float)
                if np.isfinite(values).any():
                    normalised.loc[w, (s, key)] = float(np.nanmean(values))
    return Table1(cells, normalised, tuple(strategies))

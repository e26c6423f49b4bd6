"""The ASA paper's Table 1 from a comparison's runs: per workflow and peak cores, each strategy's figures.

For every row (workflow, peak cores) and strategy: the mean and median of the makespan, the total wait
(the run's perceived wait: the time in which some ready stage waited for cores,
:mod:`elastic.metrics`) and the core-hours charged, over the runs **every** strategy of the row
completed (runs are paired by index: run ``i`` of every strategy starts at the same queue state; a run
that gave up has no makespan and charged only what it ran), with each strategy's completion count
beside them; beside each mean, how far it is above the best mean of the row (the paper's percentages
in parentheses). Below each
workflow, the *normalised average*: the mean over its rows of ``mean / best of the row - 1``, per
strategy and metric (the paper's "normalized average ... related to the lowest metric for each
resource scaling row"). A row whose best is 0 (no strategy waited) has no percentage and is left out
of that average.

Against the baselines (:func:`versus_baselines`): per row, the best Big-Job and the best Per-Stage of
the shapes run (:data:`~elastic.experiments.SHAPES`; the lowest mean makespan of each kind, the fewest
core-hours among shapes as fast), and for
every other strategy the share of their makespan gap it closes (:func:`~elastic.metrics.gap_closed`,
``n/a`` where the gap is within 5 % of the better makespan) and its core-hours over the best
Per-Stage's.

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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from rich.table import Table

from elastic.experiments import BASELINES, baseline_kind
from elastic.metrics import format_gap, gap_closed

__all__ = ["METRICS", "Table1", "Versus", "common_runs", "format_over", "table1", "versus_baselines"]

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
class Versus:
    """One row's strategies read against the best baseline of each kind.

    Attributes
    ----------
    bigjob, perstage : str
        Labels of the best Big-Job and the best Per-Stage run (lowest mean makespan of the kind's shapes;
        the fewest core-hours among those as fast).
    bigjob_makespan, perstage_makespan : float
        Their mean makespans.
    gap_closed : dict of str to float
        Per other strategy: the share of the gap it closes (:func:`~elastic.metrics.gap_closed`; nan =
        n/a).
    core_hours : dict of str to float
        Per other strategy: its mean core-hours over the best Per-Stage's.
    """

    bigjob: str
    perstage: str
    bigjob_makespan: float
    perstage_makespan: float
    gap_closed: dict[str, float]
    core_hours: dict[str, float]

    @property
    def better(self) -> str:
        """Label of the faster of the two best baselines (lower mean makespan; Big-Job on a tie)."""
        return self.bigjob if self.bigjob_makespan <= self.perstage_makespan else self.perstage

    def cell(self, strategy: str) -> str:
        """Return ``"75 %, 0.98x"`` (gap closed, x Per-Stage core-hours) for ``strategy``."""
        ratio = self.core_hours[strategy]
        return f"{format_gap(self.gap_closed[strategy])}, " + ("-" if math.isnan(ratio) else f"{ratio:.2f}x")


def versus_baselines(makespan: dict[str, float], core_hours: dict[str, float]) -> Versus | None:
    """Read every strategy that is no baseline against the best Big-Job and the best Per-Stage.

    The best of a kind has the lowest mean makespan, and of those as fast, the fewest core-hours.

    Parameters
    ----------
    makespan, core_hours : dict of str to float
        Mean makespan and core-hours per row label (``bigjob``, ``bigjob-split``, ``asa``...), over the
        same runs.

    Returns
    -------
    Versus or None
        None when a baseline kind has no label with a mean makespan.

    Examples
    --------
    >>> v = versus_baselines(
    ...     {"bigjob": 6.0, "bigjob-split": 4.0, "perstage": 16.0, "perstage-split": 7.0, "asa": 4.2},
    ...     {"bigjob": 42.0, "bigjob-split": 40.0, "perstage": 29.0, "perstage-split": 30.0, "asa": 29.4},
    ... )
    >>> v.bigjob, v.perstage, v.cell("asa")
    ('bigjob-split', 'perstage-split', '93 %, 0.98x')

    Of shapes as fast, the cheapest is the best:

    >>> tied = versus_baselines(
    ...     {"bigjob": 1.0, "perstage": 2.0, "perstage-fine": 2.0, "asa": 1.5},
    ...     {"bigjob": 9.0, "perstage": 6.0, "perstage-fine": 4.0, "asa": 5.0},
    ... )
    >>> tied.perstage, tied.cell("asa")
    ('perstage-fine', '50 %, 1.25x')
    """
    best: dict[str, str] = {}
    for kind in BASELINES:
        shapes = [s for s in makespan if baseline_kind(s) == kind and not math.isnan(makespan[s])]
        if not shapes:
            return None
        # the fastest; of shapes as fast, the cheapest: a Per-Stage that takes as long in jobs of one task
        # at fewer core-hours is the stronger baseline (demo3, one run: three shapes took 0.87 h, at
        # 5.31, 5.00 and 4.39 core-h, and asa was read against the 5.31)
        best[kind] = min(shapes, key=lambda s: (makespan[s], core_hours[s]))
    big, per = (makespan[best[k]] for k in BASELINES)
    others = [s for s in makespan if baseline_kind(s) is None]
    return Versus(
        best["bigjob"],
        best["perstage"],
        big,
        per,
        {s: gap_closed(big, per, makespan[s]) for s in others},
        {s: core_hours[s] / core_hours[best["perstage"]] for s in others},
    )


def common_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Return the completed runs whose run index every strategy of their row completed.

    ``runs`` has columns ``workflow``, ``cores``, ``strategy``, ``run`` and ``status``; a row is one
    (workflow, cores), and its strategies are those with a run in it.
    """
    keys = ["workflow", "cores"]
    done = runs["status"] == "completed"
    strategies = runs.groupby(keys)["strategy"].transform("nunique")
    completed = runs[done].groupby([*keys, "run"])["strategy"].transform("nunique")
    every = pd.Series(False, index=runs.index)
    every[completed.index] = completed.to_numpy() == strategies[completed.index].to_numpy()
    return runs[every]


@dataclass(frozen=True, slots=True)
class Table1:
    """The table's numbers.

    Attributes
    ----------
    cells : pandas.DataFrame
        Index ``(workflow, cores)``; columns ``(strategy, metric, stat)`` with ``stat`` in ``mean``,
        ``median`` (in the metric's unit; over the runs every strategy of the row completed) and
        ``over`` (mean / best mean of the row - 1), plus ``(strategy, "runs", "completed")``,
        ``(strategy, "runs", "total")`` and ``(strategy, "runs", "compared")`` (the row's common runs).
    normalised : pandas.DataFrame
        Index ``workflow``; columns ``(strategy, metric)``: mean over the workflow's rows of ``over``.
    strategies : tuple of str
        Column order.
    versus : dict of (str, int) to Versus
        Per row with both baseline kinds: the other strategies against the best of each.
    """

    cells: pd.DataFrame
    normalised: pd.DataFrame
    strategies: tuple[str, ...]
    versus: dict[tuple[str, int], Versus] = field(default_factory=dict)

    def rich_tables(self) -> list[Table]:
        """One terminal table per metric: ``mean (+x%) / median`` per strategy, normalised averages."""
        out = []
        for key, title, _ in METRICS:
            t = Table(
                title=f"{title}: mean (% over the row's best) / median over the runs every strategy "
                "completed [completed/total runs]"
            )
            t.add_column("workflow")
            t.add_column("peak cores", justify="right")
            t.add_column("runs compared", justify="right")
            for s in self.strategies:
                t.add_column(s, justify="right")
            for workflow, rows in self._groups():
                for cores, row in rows:
                    t.add_row(
                        str(workflow),
                        str(cores),
                        self._compared(row),
                        *(self._cell(row, s, key) for s in self.strategies),
                    )
                t.add_row(
                    "",
                    "normalised",
                    "",
                    *(_pct(self._norm(workflow, s, key)) for s in self.strategies),
                    end_section=True,
                )
            out.append(t)
        versus = self._versus_table()
        if versus is not None:
            out.append(versus)
        return out

    def _others(self) -> list[str]:
        """Strategies read against the baselines, in column order."""
        return [s for s in self.strategies if baseline_kind(s) is None]

    def _versus_table(self) -> Table | None:
        if not self.versus or not self._others():
            return None
        t = Table(
            title="against the best baseline of each kind (lowest mean makespan of its shapes): "
            "gap closed, x Per-Stage core-hours"
        )
        for name in ("workflow", "peak cores", "best Big-Job (h)", "best Per-Stage (h)", *self._others()):
            t.add_column(name, justify="left" if name == "workflow" else "right")
        for (workflow, cores), v in self.versus.items():
            t.add_row(
                str(workflow),
                str(cores),
                f"{v.bigjob} {v.bigjob_makespan:.2f}",
                f"{v.perstage} {v.perstage_makespan:.2f}",
                *(v.cell(s) for s in self._others()),
            )
        return t

    def _compared(self, row: pd.Series) -> str:
        counts = [row[(s, "runs", "compared")] for s in self.strategies]
        return (
            "-" if all(pd.isna(c) for c in counts) else str(int(np.nanmax(np.asarray(counts, dtype=float))))
        )

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
        done, total = (row[(strategy, "runs", stat)] for stat in ("completed", "total"))
        count = "" if pd.isna(total) else f" [{int(done)}/{int(total)}]"
        if math.isnan(mean):
            return f"-{count}"
        text = f"{mean:.2f} {format_over(over)}".rstrip()
        return f"{text} / {median:.2f}{count}"

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
                        note = f"<br><small>{done}/{total} runs completed</small>"
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
            "<p>Means and medians over the runs every strategy of the row completed (runs paired by their "
            "start point); each cell says how many runs its strategy completed.</p>" + self._versus_html()
        )

    def _versus_html(self) -> str:
        others = self._others()
        if not self.versus or not others:
            return ""
        head = "".join(
            f"<th>{html.escape(n)}</th>"
            for n in ("workflow", "peak cores", "best Big-Job (h)", "best Per-Stage (h)", *others)
        )
        rows = "".join(
            f"<tr><td>{html.escape(str(w))}</td><td>{c}</td>"
            f"<td>{html.escape(v.bigjob)} {v.bigjob_makespan:.2f}</td>"
            f"<td>{html.escape(v.perstage)} {v.perstage_makespan:.2f}</td>"
            + "".join(f"<td>{html.escape(v.cell(s))}</td>" for s in others)
            + "</tr>"
            for (w, c), v in self.versus.items()
        )
        return (
            "<h3>Against the best baseline of each kind</h3><p>Per row, the Big-Job and the Per-Stage shape "
            "with the lowest mean makespan (the fewest core-hours among shapes as fast); for every other "
            "strategy, the share of their makespan gap it "
            "closes (n/a where the gap is within 5 % of the better makespan) and its core-hours over the "
            f'best Per-Stage\'s.</p><table class="table1 versus"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>"
        )

    def flat(self) -> pd.DataFrame:
        """One row per (workflow, cores, strategy) with every statistic (the report's ``table1.csv``)."""
        frame = pd.DataFrame(self.cells.stack(level=0, future_stack=True))
        frame.index = frame.index.set_names(["workflow", "cores", "strategy"])
        frame.columns = pd.Index([f"{col[0]}_{col[1]}" for col in frame.columns])
        frame = frame.reset_index()
        gap, ratio = [], []
        for w, c, s in zip(frame["workflow"], frame["cores"], frame["strategy"], strict=True):
            v = self.versus.get((w, c))
            if v is not None and s in v.gap_closed:
                gap.append(v.gap_closed[s])
                ratio.append(v.core_hours[s])
            else:
                gap.append(math.nan)
                ratio.append(math.nan)
        frame["gap_closed"], frame["x_perstage_core_hours"] = gap, ratio
        return frame


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
        Means and medians over the runs every strategy of the row completed (:func:`common_runs`).
    """
    if strategies is None:
        strategies = tuple(dict.fromkeys(runs["strategy"]))
    rows = list(dict.fromkeys(zip(runs["workflow"], runs["cores"], strict=True)))
    columns = pd.MultiIndex.from_tuples(
        [(s, key, stat) for s in strategies for key, _, _ in METRICS for stat in ("mean", "median", "over")]
        + [(s, "runs", stat) for s in strategies for stat in ("completed", "total", "compared")]
    )
    cells = pd.DataFrame(np.nan, index=pd.MultiIndex.from_tuples(rows), columns=columns)
    done = runs[runs["status"] == "completed"]
    common = common_runs(runs)
    versus: dict[tuple[str, int], Versus] = {}
    for (workflow, cores), group in runs.groupby(["workflow", "cores"], sort=False):
        finished = done[(done["workflow"] == workflow) & (done["cores"] == cores)]
        ok = common[(common["workflow"] == workflow) & (common["cores"] == cores)]
        for s in strategies:
            cells.loc[(workflow, cores), (s, "runs", "total")] = int((group["strategy"] == s).sum())
            cells.loc[(workflow, cores), (s, "runs", "completed")] = int((finished["strategy"] == s).sum())
            cells.loc[(workflow, cores), (s, "runs", "compared")] = int((ok["strategy"] == s).sum())
        for key, _, divisor in METRICS:
            by = ok.groupby("strategy")[key]
            means = (by.mean() / divisor).reindex(list(strategies))
            medians = (by.median() / divisor).reindex(list(strategies))
            for s in strategies:
                cells.loc[(workflow, cores), (s, key, "mean")] = means[s]
                cells.loc[(workflow, cores), (s, key, "median")] = medians[s]
                cells.loc[(workflow, cores), (s, key, "over")] = _over(means)[s]
        by_strategy = ok.groupby("strategy")
        v = versus_baselines(
            {str(s): float(m) / 3600.0 for s, m in by_strategy["makespan"].mean().items()},
            {str(s): float(m) for s, m in by_strategy["core_hours_charged"].mean().items()},
        )
        if v is not None:
            versus[(str(workflow), int(group["cores"].iloc[0]))] = v
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
    return Table1(cells, normalised, tuple(strategies), versus)

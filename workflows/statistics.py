"""Statistics: summary statistics and correlations of a household's one-minute power measurements (pandas).

Two narrow and two wide stages, interleaved (functions of this module, named as their stages)::

    split (1) -> chunk_stats (one per chunk) -> merge (1) -> period_stats (one per calendar week)

- ``split``: read ``household_power_consumption.txt`` (:mod:`elastic.workflows.household`) and write it as
  ``size`` chunks of equal rows (``chunks/chunk_NNNN.parquet``);
- ``chunk_stats``: per chunk and measure, the count, mean, sum of squared deviations, minimum and maximum,
  and over the chunk's complete rows the co-moment matrix of the measures, plus the chunk's time range;
- ``merge``: the whole data set's count, mean, variance, standard deviation, minimum, maximum per measure
  and the correlation matrix, from the chunks' partial moments (:func:`combine`); then the calendar weeks
  (Monday to Sunday) the data covers, each with the chunks that hold its rows;
- ``period_stats``: per week, read the chunks that hold it and compute count, mean, median, standard
  deviation, variance, minimum and maximum per measure and the correlation matrix (this exchange of
  chunks between the wide stages is the paper's "communication among the parallel tasks").

:func:`verify` computes the same numbers directly on the whole data set with pandas and compares them
(relative tolerance 1e-9): every global statistic and correlation, every week's statistics and
correlations, and that the weeks cover every row exactly once.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from elastic.front.tasks import task
from elastic.workflows.dataflow import Check, Submitter, Verification
from elastic.workflows.household import MEASURES, read_household, write_household

__all__ = [
    "RTOL",
    "STAGES",
    "Moments",
    "Period",
    "PeriodStats",
    "StatisticsInput",
    "StatisticsOutput",
    "chunk_stats",
    "combine",
    "generate",
    "merge",
    "period_stats",
    "split",
    "summarize",
    "verify",
]

STAGES = ("split", "chunk_stats", "merge", "period_stats")
"""The stages in order."""
RTOL = 1e-9
"""Relative tolerance of the comparison with the direct computation."""
DATA = "household_power_consumption.txt"
"""The input file's name (the UCI data set's)."""

Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class StatisticsInput:
    """The generated input: the run folder and the number of chunks (the chunk_stats stage's width)."""

    folder: str
    chunks: int


@dataclass(frozen=True, slots=True)
class Moments:
    """Partial moments of the measures over some rows, mergeable with :func:`combine`.

    ``count``, ``mean``, ``m2`` (sum of squared deviations), ``low``, ``high`` per measure (NaN skipped);
    ``rows``, ``center`` and ``comoment`` over the rows where every measure is present.
    """

    count: Array
    mean: Array
    m2: Array
    low: Array
    high: Array
    rows: int
    center: Array
    comoment: Array
    first: pd.Timestamp
    last: pd.Timestamp


def moments(frame: pd.DataFrame) -> Moments:
    """Return the :class:`Moments` of a frame of :data:`MEASURES` (and ``datetime``)."""
    x = frame[list(MEASURES)].to_numpy(dtype=np.float64)
    count = np.sum(~np.isnan(x), axis=0).astype(np.float64)
    with warnings.catch_warnings():  # a measure missing in every row of the chunk: NaN, said once here
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.where(count > 0, np.nanmean(x, axis=0), 0.0)
        low, high = np.nanmin(x, axis=0), np.nanmax(x, axis=0)
    m2 = np.nansum((x - mean) ** 2, axis=0)
    complete = x[~np.isnan(x).any(axis=1)]
    center = complete.mean(axis=0) if len(complete) else np.zeros(x.shape[1])
    dev = complete - center
    times = frame["datetime"]
    return Moments(
        count, mean, m2, low, high, len(complete), center, dev.T @ dev, times.iloc[0], times.iloc[-1]
    )


def combine(a: Moments, b: Moments) -> Moments:
    """Merge two partial moments exactly (Chan, Golub and LeVeque's pairwise update, also for co-moments).

    numpy and pandas compute moments of one array but have no merge of partial results, hence this.
    """
    n = a.count + b.count
    safe = np.where(n > 0, n, 1.0)
    delta = b.mean - a.mean
    mean = a.mean + delta * b.count / safe
    m2 = a.m2 + b.m2 + delta**2 * a.count * b.count / safe
    rows = a.rows + b.rows
    d = b.center - a.center
    center = a.center + d * (b.rows / rows if rows else 0.0)
    comoment = a.comoment + b.comoment + np.outer(d, d) * (a.rows * b.rows / rows if rows else 0.0)
    return Moments(
        n,
        mean,
        m2,
        np.fmin(a.low, b.low),
        np.fmax(a.high, b.high),
        rows,
        center,
        comoment,
        min(a.first, b.first),
        max(a.last, b.last),
    )


@dataclass(frozen=True, slots=True)
class Period:
    """A calendar week ``[start, end)`` and the chunks that hold its rows."""

    start: pd.Timestamp
    end: pd.Timestamp
    chunks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PeriodStats:
    """Statistics of some rows: per measure (in :data:`MEASURES` order) and the correlation matrix."""

    start: pd.Timestamp
    rows: int
    table: dict[str, dict[str, float]]
    """Statistic (count, mean, median, std, var, min, max) -> measure -> value."""
    corr: list[list[float]]


@dataclass(frozen=True, slots=True)
class StatisticsOutput:
    """What the workflow computed: the whole data set's statistics and each week's."""

    overall: PeriodStats
    periods: tuple[PeriodStats, ...]


def _chunk(inp: StatisticsInput, i: int) -> Path:
    return Path(inp.folder, "chunks", f"chunk_{i:04d}.parquet")


# --- stages --------------------------------------------------------------------------------------


@task
def split(inp: StatisticsInput) -> int:
    """Narrow: read the data set and write it as ``inp.chunks`` chunks of equal rows."""
    frame = read_household(Path(inp.folder, DATA))
    Path(inp.folder, "chunks").mkdir(exist_ok=True)
    bounds = np.linspace(0, len(frame), inp.chunks + 1).round().astype(int)
    for i in range(inp.chunks):
        frame.iloc[bounds[i] : bounds[i + 1]].to_parquet(_chunk(inp, i), index=False)
    return len(frame)


@task
def chunk_stats(inp: StatisticsInput, i: int, _rows: int) -> Moments:
    """Wide, one per chunk: its partial moments and time range."""
    return moments(pd.read_parquet(_chunk(inp, i)))


@task
def merge(inp: StatisticsInput, *parts: Moments) -> tuple[PeriodStats, tuple[Period, ...]]:
    """Narrow: the whole data set's statistics from the chunks' moments, and the weeks to compute."""
    total = parts[0]
    for part in parts[1:]:
        total = combine(total, part)
    var = total.m2 / np.where(total.count > 1, total.count - 1, np.nan)
    scale = np.sqrt(np.diag(total.comoment))
    corr = total.comoment / np.outer(scale, scale)
    table = {
        "count": total.count,
        "mean": total.mean,
        "std": np.sqrt(var),
        "var": var,
        "min": total.low,
        "max": total.high,
    }
    overall = PeriodStats(
        total.first,
        int(total.count.max()),
        {k: dict(zip(MEASURES, map(float, v), strict=True)) for k, v in table.items()},
        corr.tolist(),
    )
    Path(inp.folder, "overall.json").write_text(json.dumps(_jsonable(overall)))
    first_monday = total.first.normalize() - pd.Timedelta(days=total.first.day_of_week)
    periods = []
    for start in pd.date_range(first_monday, total.last, freq="7D"):
        end = start + pd.Timedelta(days=7)
        holders = tuple(i for i, p in enumerate(parts) if p.first < end and p.last >= start)
        periods.append(Period(start, end, holders))
    return overall, tuple(periods)


@task
def period_stats(inp: StatisticsInput, period: Period) -> PeriodStats:
    """Wide, one per week: read the chunks holding it; its statistics and correlations."""
    frame = pd.concat([pd.read_parquet(_chunk(inp, i)) for i in period.chunks], ignore_index=True)
    rows = frame[(frame["datetime"] >= period.start) & (frame["datetime"] < period.end)]
    stats = summarize(rows, period.start)
    out = Path(inp.folder, "weeks")
    out.mkdir(exist_ok=True)
    (out / f"week_{period.start:%Y-%m-%d}.json").write_text(json.dumps(_jsonable(stats)))
    return stats


def summarize(rows: pd.DataFrame, start: pd.Timestamp) -> PeriodStats:
    """Count, mean, median, std, var, min, max per measure, and correlations, of ``rows`` (pandas)."""
    x = rows[list(MEASURES)]
    table = {
        "count": x.count(),
        "mean": x.mean(),
        "median": x.median(),
        "std": x.std(),
        "var": x.var(),
        "min": x.min(),
        "max": x.max(),
    }
    return PeriodStats(
        start,
        len(rows),
        {k: {m: float(v[m]) for m in MEASURES} for k, v in table.items()},
        x.corr().to_numpy().tolist(),
    )


def _jsonable(stats: PeriodStats) -> dict[str, object]:
    return {"start": str(stats.start), "rows": stats.rows, "statistics": stats.table, "corr": stats.corr}


# --- the dataflow --------------------------------------------------------------------------------


def statistics(submit: Submitter, inp: StatisticsInput) -> StatisticsOutput:
    """Run the Statistics dataflow (written once; see :mod:`elastic.workflows.dataflow` for ``submit``)."""
    rows = submit.submit(split, inp)
    parts = [submit.submit(chunk_stats, inp, i, rows) for i in range(inp.chunks)]
    overall, periods = submit.submit(merge, inp, *parts).result()
    weeks = [submit.submit(period_stats, inp, p) for p in periods]
    return StatisticsOutput(overall, tuple(w.result() for w in weeks))


# --- input and checks ----------------------------------------------------------------------------


def generate(folder: Path, size: int, seed: int) -> StatisticsInput:
    """Write ``size`` weeks of one-minute household measurements under ``folder``; ``size`` chunks."""
    write_household(folder / DATA, size, seed)
    return StatisticsInput(str(folder), size)


def _close(got: dict[str, dict[str, float]], want: dict[str, dict[str, float]]) -> bool:
    if set(got) != set(want):
        return False
    a = np.array([[got[k][m] for m in MEASURES] for k in want])
    b = np.array([[want[k][m] for m in MEASURES] for k in want])
    return bool(np.allclose(a, b, rtol=RTOL, atol=0.0, equal_nan=True))


def verify(inp: StatisticsInput, out: StatisticsOutput) -> Verification:
    """Compare the workflow's numbers with a direct computation on the whole data set."""
    frame = read_household(Path(inp.folder, DATA))
    direct = summarize(frame, frame["datetime"].iloc[0])
    wanted = {k: v for k, v in direct.table.items() if k != "median"}  # the merge has no median
    corr_ok = np.allclose(out.overall.corr, direct.corr, rtol=RTOL, atol=1e-12)
    weeks = frame.groupby(pd.Grouper(key="datetime", freq="W-MON", closed="left", label="left"))
    expected = {
        cast(pd.Timestamp, start): summarize(rows, cast(pd.Timestamp, start))
        for start, rows in weeks
        if len(rows)
    }
    got = {p.start: p for p in out.periods if p.rows}
    bad = [
        f"{start:%Y-%m-%d}"
        for start, want in expected.items()
        if start not in got
        or not _close(got[start].table, want.table)
        or not np.allclose(got[start].corr, want.corr, rtol=RTOL, atol=1e-12, equal_nan=True)
    ]
    covered = sum(p.rows for p in out.periods)
    checks = (
        Check(
            "overall statistics",
            _close(out.overall.table, wanted) and out.overall.rows == int(frame[MEASURES[0]].count()),
            f"count, mean, std, var, min, max of {len(MEASURES)} measures over {len(frame):,} rows "
            f"(relative tolerance {RTOL:g})",
        ),
        Check("overall correlations", bool(corr_ok), f"{len(MEASURES)} x {len(MEASURES)} matrix"),
        Check(
            "weekly statistics and correlations",
            not bad and len(got) == len(expected),
            f"{len(expected) - len(bad)} of {len(expected)} weeks match (workflow: {len(got)} weeks)"
            + (f"; differ: {', '.join(bad[:5])}" if bad else ""),
        ),
        Check("weeks cover every row once", covered == len(frame), f"{covered:,} of {len(frame):,} rows"),
    )
    return Verification("statistics", checks)

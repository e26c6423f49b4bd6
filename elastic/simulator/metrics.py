"""Pure metrics over the per-job records of a simulation (see :meth:`Engine.records`).

Wait = start - submit; response = end - submit; stretch (slowdown) = response / runtime; bounded
slowdown = max(1, response / max(runtime, tau)) with tau = 10 s (Feitelson's bound, so very short jobs
do not dominate); utilisation = core-seconds used / (partition cores x span from first submit to last
end). Only jobs that started are counted (a job cancelled while pending has no wait).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from elastic.errors import ConfigError

__all__ = ["DEFAULT_SIZE_BINS", "Summary", "by_size", "summarize"]

#: Job-size classes in cores: [1], [2, 4], [5, 16], [17, 64], [65, 128], [129, inf).
DEFAULT_SIZE_BINS: tuple[float, ...] = (1, 2, 5, 17, 65, 129, np.inf)


@dataclass(frozen=True, slots=True)
class Summary:
    """Aggregate metrics of a set of jobs; times in seconds, NaN when no job qualifies.

    Attributes
    ----------
    jobs : int
        Jobs that started.
    utilisation : float
        Fraction of the partition's core-seconds used between the first submit and the last end.
    mean_wait, median_wait, p90_wait : float
        Queue wait statistics.
    mean_response : float
        Mean of end - submit.
    mean_stretch : float
        Mean of response / runtime over jobs with runtime > 0.
    mean_bounded_slowdown : float
        Mean of max(1, response / max(runtime, tau)).
    started_at_once : float
        Fraction of jobs that waited 0 s.
    """

    jobs: int
    utilisation: float
    mean_wait: float
    median_wait: float
    p90_wait: float
    mean_response: float
    mean_stretch: float
    mean_bounded_slowdown: float
    started_at_once: float

    def as_dict(self) -> dict[str, float]:
        """Return the fields as a plain dict."""
        return asdict(self)


def _ran(records: pd.DataFrame) -> pd.DataFrame:
    done = records[records["start"].notna() & records["end"].notna()]
    return done


def summarize(records: pd.DataFrame, *, processors: int, tau: float = 10.0) -> Summary:
    """Return the :class:`Summary` of ``records``.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-job records with columns ``submit, start, end, cores`` (as from :meth:`Engine.records`).
    processors : int
        Cores of the partition, for utilisation.
    tau : float, default 10.0
        Bound of the bounded slowdown, in seconds.

    Raises
    ------
    ConfigError
        ``processors`` or ``tau`` is not positive.

    Examples
    --------
    >>> import pandas as pd
    >>> rec = pd.DataFrame({"submit": [0.0, 0.0], "start": [0.0, 10.0], "end": [10.0, 20.0], "cores": [1, 1]})
    >>> s = summarize(rec, processors=1)
    >>> s.utilisation, s.mean_wait, s.mean_bounded_slowdown
    (1.0, 5.0, 1.5)
    """
    if processors < 1:
        raise ConfigError(f"processors must be >= 1, got {processors}")
    if not tau > 0:
        raise ConfigError(f"tau must be > 0 seconds, got {tau}")
    done = _ran(records)
    nan = float("nan")
    if done.empty:
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan)
    submit = done["submit"].to_numpy(dtype=np.float64)
    start = done["start"].to_numpy(dtype=np.float64)
    end = done["end"].to_numpy(dtype=np.float64)
    cores = done["cores"].to_numpy(dtype=np.float64)
    wait = start - submit
    run = end - start
    response = end - submit
    span = end.max() - records["submit"].min()
    util = float((cores * run).sum() / (processors * span)) if span > 0 else nan
    positive = run > 0
    stretch = float(np.mean(response[positive] / run[positive])) if positive.any() else nan
    bsld = np.maximum(1.0, response / np.maximum(run, tau))
    return Summary(
        jobs=len(done),
        utilisation=util,
        mean_wait=float(wait.mean()),
        median_wait=float(np.median(wait)),
        p90_wait=float(np.percentile(wait, 90)),
        mean_response=float(response.mean()),
        mean_stretch=stretch,
        mean_bounded_slowdown=float(bsld.mean()),
        started_at_once=float(np.mean(wait == 0)),
    )


def by_size(
    records: pd.DataFrame, *, processors: int, bins: Sequence[float] = DEFAULT_SIZE_BINS, tau: float = 10.0
) -> pd.DataFrame:
    """Return one row of :class:`Summary` fields per job-size class.

    Parameters
    ----------
    records : pandas.DataFrame
        Per-job records.
    processors : int
        Cores of the partition (a class's utilisation is its core-seconds over the whole partition
        during its own span).
    bins : sequence of float
        Class edges in cores, increasing; class ``k`` holds ``bins[k] <= cores < bins[k + 1]``.
    tau : float, default 10.0
        Bound of the bounded slowdown.

    Returns
    -------
    pandas.DataFrame
        Indexed by a class label such as ``"5-16"``; columns are the :class:`Summary` fields.
    """
    edges = [float(b) for b in bins]
    if len(edges) < 2 or any(b >= c for b, c in pairwise(edges)):
        raise ConfigError(f"bins must be at least two increasing edges, got {list(bins)}")
    rows = {}
    cores = records["cores"].to_numpy()
    for lo, hi in pairwise(edges):
        label = (
            f"{int(lo)}+" if np.isinf(hi) else (f"{int(lo)}" if hi - lo == 1 else f"{int(lo)}-{int(hi) - 1}")
        )
        part = records[(cores >= lo) & (cores < hi)]
        rows[label] = summarize(part, processors=processors, tau=tau).as_dict() if len(part) else None
    frame = pd.DataFrame({k: v for k, v in rows.items() if v is not None}).T
    frame.index.name = "cores"
    return frame

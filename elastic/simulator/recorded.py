"""What the fidelity modes read from a trace's record, besides the waits they are judged on.

Every parameter here is derived from the trace itself, never fitted to the waits of the jobs a report
evaluates:

- :func:`user_chain`: each job's predecessor, the same user's previous job (a user's jobs start in
  submit order).
- :func:`pinnable`: which jobs can be pinned at their recorded start without over-allocating.
- :func:`capacity_window`: the look-back of the usable-capacity estimate, from the trace's own time
  scale: :data:`WINDOW_PER_REQUEST` x the median requested walltime. The factor, 3, was chosen on
  HPC2N, where it gives the 12 h window chosen there before (median request 4 h); CTC (3 h) gets
  9 h, SDSC Blue (1 h) 3 h. A centre whose jobs are short re-packs its machine faster, so its recent
  peak use forgets sooner.
- :func:`fast_queues`: queues (SWF field 15) whose *other* jobs, those the report does not evaluate,
  mostly started at once (interactive classes). The capacity mode simulates them apart, on the cores
  their own jobs used, as a partition of their own: the centre evidently kept cores for them. Chosen
  on SDSC Blue, whose interactive queue (a third of its 16-128-core jobs, 98 % of its jobs started
  within a minute) is the reason; a trace without queue numbers, or whose queues all wait, is
  unaffected. Planning them first on the shared machine instead (tried before) still made 46 % of
  them wait over a minute: the evaluated jobs' median wait came out 21 min against the recorded 1.6.
- :func:`short_queues`: queues whose jobs ask for walltimes far shorter than the longest queue's
  (express or debug classes), read from the requests of the other jobs, never from waits. They are
  planned before the other batch queues, as a centre that sets such a queue up serves it. Chosen on
  SDSC Blue (express: 2 h against 36 h); CTC's two classes (18 h each) and HPC2N (no queue numbers)
  have none.
"""

from __future__ import annotations

import logging

import numpy as np
import numpy.typing as npt
import pandas as pd

from elastic.simulator.workload import Workload

__all__ = [
    "FAST_MIN_JOBS",
    "FAST_SHARE",
    "FAST_WAIT",
    "SHORT_LIMIT_QUANTILE",
    "SHORT_LIMIT_SHARE",
    "WINDOW_PER_REQUEST",
    "WINDOW_STEP",
    "capacity_window",
    "fast_queues",
    "pinnable",
    "short_queues",
    "user_chain",
]

logger = logging.getLogger(__name__)

WINDOW_PER_REQUEST = 3.0
"""Capacity look-back in units of the trace's median requested walltime (chosen on HPC2N: 12 h)."""

WINDOW_STEP = 300.0
"""Grid of the usable-capacity estimate in seconds; the derived window is a whole number of steps."""

FAST_WAIT = 60.0
"""A job "started at once" when its recorded wait is at most this many seconds (a scheduler cycle)."""

FAST_SHARE = 0.5
"""A queue is fast when at least this share of its other jobs started at once..."""

FAST_MIN_JOBS = 50
"""...and it has at least this many other jobs with a recorded wait."""

SHORT_LIMIT_QUANTILE = 0.99
"""A queue's time limit, as read from its jobs: this quantile of their requested walltimes..."""

SHORT_LIMIT_SHARE = 0.25
"""...and a queue is short (an express or debug class) when that limit is at most this share of the
longest queue's."""

_BoolArray = npt.NDArray[np.bool_]
_IntArray = npt.NDArray[np.int64]


def user_chain(workload: Workload) -> _IntArray:
    """Index of each job's predecessor: the same user's previous job in submit order (-1: none).

    Jobs of unknown user (-1) have no predecessor.

    Examples
    --------
    >>> w = Workload(np.arange(4), np.zeros(4), np.ones(4, dtype=np.int64), np.ones(4), np.ones(4),
    ...              np.array([7, 8, 7, -1]), np.zeros(4), 4, "doc")
    >>> user_chain(w).tolist()
    [-1, -1, 0, -1]
    """
    idx = pd.Series(np.arange(len(workload)), dtype=np.int64)
    prev = idx.groupby(workload.user, sort=False).shift(1)
    out = prev.fillna(-1).to_numpy(dtype=np.int64, copy=True)
    out[workload.user < 0] = -1
    return out


def pinnable(workload: Workload, mask: _BoolArray) -> _BoolArray:
    """Which of the jobs in ``mask`` can be pinned at their recorded start without over-allocation.

    Jobs are taken in recorded-start order; one that would push the recorded occupancy above the
    machine (inconsistent traces, or requested > allocated processors) is left out. Jobs without a
    recorded wait cannot be pinned. Zero-runtime jobs hold no cores (the engine starts and ends them
    at once), so they never conflict and are not counted: counting them, their end (sorted before
    their start at the same instant) freed cores they did not hold yet, and a later job could be
    pinned into cores that were in use.

    Examples
    --------
    On 4 cores, a 4-core job runs over [0, 100); at 50 a zero-runtime 4-core job and a 2-core job
    start. The zero-runtime job is harmless; the 2-core job would need 6 cores.

    >>> n = np.array
    >>> w = Workload(n([1, 2, 3]), n([0.0, 50.0, 50.0]), n([4, 4, 2]), n([100.0, 0.0, 10.0]),
    ...              n([100.0, 1.0, 10.0]), n([1, 1, 1]), n([0.0, 0.0, 0.0]), 4, "doc")
    >>> pinnable(w, np.ones(3, dtype=bool)).tolist()
    [True, True, False]
    """
    ok = mask & ~np.isnan(workload.recorded_wait)
    idx = np.flatnonzero(ok & (workload.runtime > 0))
    start = workload.submit[idx] + workload.recorded_wait[idx]
    end = start + workload.runtime[idx]
    cores = workload.cores[idx]
    times = np.concatenate([start, end])
    delta = np.concatenate([cores, -cores])
    order = np.lexsort((delta, times))  # ends before starts at equal times
    level = np.cumsum(delta[order])
    if level.size == 0 or level.max() <= workload.processors:
        return ok
    # Rare: drop the offending jobs one at a time, in start order (a plain loop; few conflicts).
    keep = np.ones(idx.size, dtype=bool)
    used = 0
    for k in order.tolist():
        job = k % idx.size
        if k < idx.size:
            if used + int(cores[job]) > workload.processors:
                keep[job] = False
                continue
            used += int(cores[job])
        elif keep[job]:
            used -= int(cores[job])
    logger.warning(
        "trace %s: %d jobs left unpinned: their recorded schedule exceeds %d cores",
        workload.source,
        int((~keep).sum()),
        workload.processors,
    )
    out = ok.copy()
    out[idx[~keep]] = False
    return out


def capacity_window(workload: Workload) -> float:
    """Look-back of the usable-capacity estimate for ``workload``, in seconds.

    :data:`WINDOW_PER_REQUEST` x the median requested walltime of its jobs, rounded to whole
    :data:`WINDOW_STEP` steps (at least one).

    Examples
    --------
    >>> one, walltime = np.ones(3), np.array([3600.0, 14400.0, 7200.0])  # median 2 h
    >>> w = Workload(np.arange(3), np.zeros(3), np.ones(3, dtype=np.int64), one, walltime,
    ...              np.zeros(3, dtype=np.int64), np.zeros(3), 4, "doc")
    >>> capacity_window(w) / 3600
    6.0
    """
    if len(workload) == 0:
        return WINDOW_STEP
    steps = round(WINDOW_PER_REQUEST * float(np.median(workload.walltime)) / WINDOW_STEP)
    return WINDOW_STEP * max(1, steps)


def fast_queues(workload: Workload, others: _BoolArray) -> frozenset[int]:
    """Queues whose jobs among ``others`` mostly started at once (see the module docstring).

    Parameters
    ----------
    workload : Workload
        A trace with queue numbers (``queue``) and recorded waits.
    others : ndarray of bool
        The jobs whose recorded waits may be used: never the evaluated ones.

    Returns
    -------
    frozenset of int
        Queue numbers (never -1, unknown); empty when the workload has no queues.

    Examples
    --------
    >>> q = np.repeat([1, 2], 60)  # queue 1 starts at once, queue 2 waits 15 minutes
    >>> w = Workload(np.arange(120), np.zeros(120), np.ones(120, dtype=np.int64), np.ones(120),
    ...              np.ones(120), np.zeros(120, dtype=np.int64), np.where(q == 1, 0.0, 900.0), 4, "doc", q)
    >>> sorted(fast_queues(w, np.ones(120, dtype=bool)))
    [1]
    """
    if workload.queue is None:
        return frozenset()
    known = others & ~np.isnan(workload.recorded_wait) & (workload.queue >= 0)
    if not known.any():
        return frozenset()
    frame = pd.DataFrame({"queue": workload.queue[known], "fast": workload.recorded_wait[known] <= FAST_WAIT})
    stats = frame.groupby("queue")["fast"].agg(["mean", "size"])
    chosen = stats[(stats["size"] >= FAST_MIN_JOBS) & (stats["mean"] >= FAST_SHARE)]
    return frozenset(int(q) for q in chosen.index)


def short_queues(workload: Workload, others: _BoolArray) -> frozenset[int]:
    """Queues whose time limit is short beside the longest queue's (express or debug classes).

    A queue's limit is read from the walltimes its ``others`` jobs requested
    (:data:`SHORT_LIMIT_QUANTILE`), never from waits: a centre that sets up a queue of short jobs
    serves it before its long batch queues (SDSC Blue's express queue: 2 h against 36 h). Queues with
    fewer than :data:`FAST_MIN_JOBS` such jobs, and traces with fewer than two such queues, have none.

    Examples
    --------
    >>> q = np.repeat([1, 2], 60)  # queue 1 asks for at most 2 h, queue 2 for up to 36 h
    >>> wall = np.where(q == 1, 7200.0, np.linspace(3600, 36 * 3600, 120))
    >>> w = Workload(np.arange(120), np.zeros(120), np.ones(120, dtype=np.int64), np.ones(120),
    ...              wall, np.zeros(120, dtype=np.int64), np.zeros(120), 4, "doc", q)
    >>> sorted(short_queues(w, np.ones(120, dtype=bool)))
    [1]
    """
    if workload.queue is None:
        return frozenset()
    known = others & (workload.queue >= 0)
    if not known.any():
        return frozenset()
    frame = pd.DataFrame({"queue": workload.queue[known], "wall": workload.walltime[known]})
    groups = frame.groupby("queue")["wall"]
    stats = pd.DataFrame({"size": groups.size(), "limit": groups.quantile(SHORT_LIMIT_QUANTILE)})
    stats = stats[stats["size"] >= FAST_MIN_JOBS]
    if len(stats) < 2:
        return frozenset()
    chosen = stats[stats["limit"] <= SHORT_LIMIT_SHARE * stats["limit"].max()]
    return frozenset(int(q) for q in chosen.index)

"""How many of a traced machine's cores were really usable, estimated from its recorded schedule.

A cleaned SWF trace describes a machine of ``MaxProcs`` cores, but the centre rarely had all of them:
nodes were down or drained, and jobs removed from the log (HPC2N's cleaned trace drops 305,178 jobs of
one user) occupied cores the log no longer shows. HPC2N's recorded schedule uses 60 % of its 240 cores
on average and, in many weeks, never more than 150-200, while jobs wait for hours. A replay that offers
the whole machine starts those jobs at once.

:func:`recorded_capacity` estimates the usable size at time ``t`` as the most cores the recorded
schedule had in use during the preceding ``window`` (what the centre's monitoring would have shown
then: the estimate never looks ahead). It is a step function on a grid of ``step`` seconds, ready for
:class:`~elastic.simulator.pinned.PinnedBackfill`'s ``capacity``.

Caveat, measured on HPC2N: the estimate counts every traced job, the evaluated ones too, so a wide job
whose own recorded start is what raises the envelope can start in simulation one ``step`` after it. The
share of long-waiting (> 1 h) evaluated jobs that start within an hour after their recorded start is
5.5 % with the estimate and 4.5 % with a constant reserve; an envelope from the other jobs alone starves
the queue (the evaluated jobs are a third of the load), see ``docs/results/simulator.md``
("Fidelity of the mock queue").
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.ndimage import maximum_filter1d

from elastic.errors import ConfigError
from elastic.simulator.workload import Workload

__all__ = ["recorded_capacity", "recorded_occupancy"]

_FloatArray = npt.NDArray[np.float64]
_IntArray = npt.NDArray[np.int64]


def recorded_occupancy(workload: Workload) -> tuple[_FloatArray, _IntArray]:
    """Cores in use over time in the recorded schedule of ``workload``.

    Every job with a recorded wait holds its cores from ``submit + recorded_wait`` for ``runtime``;
    a job that ran for no time holds nothing.

    Returns
    -------
    (ndarray of float, ndarray of int)
        Event times (sorted; a job ending and another starting at the same time: the end first) and
        the cores in use just after each event.

    Examples
    --------
    >>> w = Workload(np.arange(2), np.array([0.0, 5.0]), np.array([2, 3]), np.array([10.0, 10.0]),
    ...              np.array([10.0, 10.0]), np.zeros(2, dtype=np.int64), np.array([0.0, 5.0]), 8, "doc")
    >>> t, used = recorded_occupancy(w)
    >>> t.tolist(), used.tolist()
    ([0.0, 10.0, 10.0, 20.0], [2, 0, 3, 0])
    """
    ok = ~np.isnan(workload.recorded_wait) & (workload.runtime > 0)
    start = workload.submit[ok] + workload.recorded_wait[ok]
    cores = workload.cores[ok]
    times = np.concatenate([start, start + workload.runtime[ok]])
    delta = np.concatenate([cores, -cores])
    order = np.lexsort((delta, times))  # ends (negative) before starts at equal times
    return times[order], np.cumsum(delta[order]).astype(np.int64)


def recorded_capacity(
    workload: Workload, *, window: float = 86_400.0, step: float = 300.0
) -> tuple[_FloatArray, _IntArray]:
    """Usable cores over time: the most the recorded schedule used in the preceding ``window``.

    Time is cut into cells of ``step`` seconds from the first recorded start. The capacity during a
    cell is the peak occupancy (:func:`recorded_occupancy`) over the ``ceil(window / step)`` cells
    before it, capped at ``workload.processors``. Before the first cell, in the first cell (no
    history yet) and after the cell of the last recorded event (the trace says nothing any more),
    the whole machine is usable.

    Parameters
    ----------
    workload : Workload
        A trace with recorded waits.
    window : float, default 86,400
        Look-back in seconds (> 0).
    step : float, default 300
        Grid in seconds (> 0); the estimate changes at most once per step.

    Returns
    -------
    (ndarray of float, ndarray of int)
        Breakpoint times (strictly increasing) and the usable cores from each on: the ``capacity``
        of :class:`~elastic.simulator.pinned.PinnedBackfill`. Empty when no job has a recorded wait.

    Raises
    ------
    ConfigError
        ``window`` or ``step`` is not positive.

    Examples
    --------
    On 10 cores, 6 + 2 cores are in use over [0, 100), then 2 until 1000: after a ``window`` of
    300 s the peak of 8 is forgotten, and once the recorded schedule is over the whole machine is back.

    >>> n = np.array
    >>> w = Workload(n([1, 2]), n([0.0, 0.0]), n([6, 2]), n([100.0, 1000.0]), n([100.0, 1000.0]),
    ...              n([0, 0]), n([0.0, 0.0]), 10, "doc")
    >>> t, c = recorded_capacity(w, window=300.0, step=100.0)
    >>> t.tolist(), c.tolist()
    ([100.0, 400.0, 1100.0], [8, 2, 10])
    """
    if not window > 0 or not step > 0:
        raise ConfigError(f"capacity window and step must be > 0 seconds, got window={window}, step={step}")
    times, used = recorded_occupancy(workload)
    full = workload.processors
    if times.size == 0:
        return np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64)
    # Events at the same instant: only the level after the last of them was ever in use (two jobs
    # ending at t leave no moment with one of them still running).
    last = np.append(times[1:] != times[:-1], True)
    times, used = times[last], used[last]
    t0 = float(np.floor(times[0] / step) * step)
    k = int(np.ceil(window / step))
    cells = int((times[-1] - t0) // step) + 1
    # Peak per cell: the level at the cell's start, and every level reached inside it.
    edges = t0 + step * np.arange(cells)
    at_edge = np.searchsorted(times, edges, side="right") - 1  # last event at or before each start
    peak = np.where(at_edge >= 0, used[np.maximum(at_edge, 0)], 0)
    np.maximum.at(peak, ((times - t0) // step).astype(np.int64), used)
    # Capacity of cell i >= 1: the maximum of peak[i-k .. i-1], a sliding maximum over the cells
    # before it (scipy's O(n) filter; the window is centred, hence the origin shift).
    ext = np.concatenate([np.zeros(k, dtype=np.int64), peak])
    sliding = maximum_filter1d(ext, size=k, origin=-(k // 2), mode="constant", cval=0)
    cap = np.empty(cells + 1, dtype=np.int64)
    cap[0] = full  # no history yet
    cap[1:cells] = sliding[1:cells]
    cap[cells] = full  # the recorded schedule is over: the trace says nothing any more
    cap = np.minimum(cap, full)
    at = t0 + step * np.arange(cap.size, dtype=np.float64)
    change = np.flatnonzero(np.diff(np.concatenate([[full], cap])))
    return at[change], cap[change]

"""The losses ASA scores its candidate waits with, against one observed wait ``w``.

Both return one loss in [0, 1] per alternative (full information), as the round bound of
:class:`elastic.learners.asa.ASAEstimator` expects.

``"paper"`` (:func:`paper_losses`)
    0 for the alternative closest to the observed wait, 1 for every other one (definition (3)).
``"cost"`` (:func:`cost_losses`)
    An alternative ``a`` that is too long makes the allocation start ``a - w`` seconds early and idle:
    ``idle_weight * cores * (a - w)`` core-seconds; one that is too short delays the stage by ``w - a``
    seconds: ``delay_weight * (w - a)``. The cost is mapped to [0, 1] as ``log1p(c) / max_i log1p(c_i)``
    so the round bound keeps its meaning; the log keeps alternatives distinguishable across the grid's
    five orders of magnitude (a linear scale would make every small wait cost ~0 next to 100,000 s).
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np
import numpy.typing as npt

__all__ = ["cost_losses", "paper_losses"]

FloatArray = npt.NDArray[np.float64]


def paper_losses(grid: FloatArray, wait: float) -> FloatArray:
    """Return the 0/1 loss of every alternative: 0 for the one closest to ``wait``, 1 for the others.

    Parameters
    ----------
    grid : ndarray of float64
        Sorted candidate waits in seconds.
    wait : float
        Observed wait in seconds.

    Returns
    -------
    ndarray of float64
        One loss per grid value.

    Examples
    --------
    >>> paper_losses(np.array([0.0, 10.0, 100.0]), 12.0).tolist()
    [1.0, 0.0, 1.0]
    """
    out = np.ones(len(grid))
    out[_nearest(grid, float(wait))] = 0.0
    return out


def _nearest(grid: FloatArray, wait: float) -> int:
    """:func:`~elastic.learners.asa_grid.nearest_index` for one wait.

    Hand-written with :func:`bisect.bisect_left` because this runs once per observation (about 50,000
    times in ``elastic waits`` on HPC2N) and numpy's array machinery costs ~30x more for one scalar.
    """
    k = len(grid)
    right = min(max(bisect_left(grid, wait), 1), k - 1) if k > 1 else 0
    if right == 0:
        return 0
    left = right - 1
    return right if grid[right] - wait < wait - grid[left] else left


def cost_losses(
    grid: FloatArray, wait: float, *, cores: int, idle_weight: float, delay_weight: float
) -> FloatArray:
    """Return the idle-or-delay cost of every alternative, log-scaled to [0, 1].

    Parameters
    ----------
    grid : ndarray of float64
        Sorted candidate waits in seconds.
    wait : float
        Observed wait in seconds.
    cores : int
        Cores an early start idles.
    idle_weight : float
        Weight of one idle core-second (>= 0).
    delay_weight : float
        Weight of one second of delay (>= 0).

    Returns
    -------
    ndarray of float64
        One loss per grid value; all 0 when every cost is 0.

    Examples
    --------
    >>> grid = np.array([0.0, 10.0, 100.0])
    >>> cost_losses(grid, 10.0, cores=1, idle_weight=1.0, delay_weight=1.0).round(2).tolist()
    [0.53, 0.0, 1.0]
    """
    early = np.maximum(grid - wait, 0.0)
    late = np.maximum(wait - grid, 0.0)
    cost = np.log1p(idle_weight * cores * early + delay_weight * late)
    top = float(cost.max())
    return cost / top if top > 0 else cost

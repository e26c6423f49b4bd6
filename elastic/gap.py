"""How much of the Per-Stage - Big-Job makespan gap a strategy closes, when comparing strategies.

The *gap closed*, comparing strategies (means over runs): the share of the Per-Stage - Big-Job makespan
gap a strategy closes, ``(Per-Stage - it) / (Per-Stage - Big-Job)`` (1 = Big-Job's makespan, above 1 =
faster), defined only where that gap exceeds :data:`GAP_MIN_SHARE` of the better of the two makespans: a
share of a gap close to 0 says nothing (printed ``n/a``).
"""

from __future__ import annotations

import math

__all__ = ["GAP_MIN_SHARE", "format_gap", "gap_closed"]

GAP_MIN_SHARE = 0.05
"""The Per-Stage - Big-Job makespan gap must exceed this share of the better makespan for "gap closed"."""


def gap_closed(bigjob: float, perstage: float, other: float, *, min_share: float = GAP_MIN_SHARE) -> float:
    """Return the share of the Per-Stage - Big-Job makespan gap ``other`` closes, or nan where undefined.

    Parameters
    ----------
    bigjob, perstage, other : float
        Mean makespans of Big-Job, Per-Stage and the strategy read against them (any one unit).
    min_share : float, default GAP_MIN_SHARE
        The gap ``perstage - bigjob`` must exceed this share of the better makespan (``min``), else nan:
        also where Per-Stage is the faster, or any makespan is nan.

    Examples
    --------
    >>> gap_closed(4.0, 8.0, 5.0), gap_closed(4.0, 4.1, 3.0), gap_closed(8.0, 4.0, 5.0)
    (0.75, nan, nan)
    """
    gap = perstage - bigjob
    if not gap > min_share * min(bigjob, perstage):
        return math.nan
    return (perstage - other) / gap


def format_gap(share: float) -> str:
    """Return a :func:`gap_closed` share as ``"75 %"``, or ``"n/a"`` where it is undefined (nan)."""
    return "n/a" if math.isnan(share) else f"{share * 100:.0f} %"

"""ASA's candidate waits and the keys its learned state is kept under.

* :data:`DEFAULT_GRID`: the 53 candidate waits (alternatives) of :class:`elastic.learners.asa.ASAEstimator`;
  :func:`nearest_index` maps an observed wait to its closest alternative.
* :func:`geometry_key`: the key (core bucket, partition, user) ASA state is learned and shared under;
  :func:`key_cores` reads the core count back.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.learners.base import Key

__all__ = [
    "DEFAULT_GRID",
    "geometry_key",
    "key_cores",
    "nearest_index",
]

IntArray = npt.NDArray[np.int64]


def _default_grid() -> tuple[float, ...]:
    steps = [
        (0, 100, 10),  # 0, 10, ..., 90                   10 values
        (100, 1_000, 50),  # 100, 150, ..., 950           18
        (1_000, 5_000, 500),  # 1,000, 1,500, ..., 4,500  8
        (5_000, 10_000, 1_000),  # 5,000, ..., 9,000      5
        (10_000, 30_000, 5_000),  # 10,000, ..., 25,000   4
        (30_000, 100_001, 10_000),  # 30,000, ..., 100,000 8
    ]
    return tuple(float(v) for lo, hi, step in steps for v in range(lo, hi, step))


DEFAULT_GRID: tuple[float, ...] = _default_grid()
"""The 53 default candidate waits in seconds, 0 to 100,000 (the paper's 28 h maximum).

Steps of 10 s below 100 s, 50 s below 1,000 s, 500 s below 5,000 s, 1,000 s below 10,000 s, 5,000 s
below 30,000 s and 10,000 s up to 100,000 s: denser in the tens and hundreds of seconds, where small
jobs' waits vary most, as in the paper (Section 4.3).
"""

_KEY_RE = re.compile(r"^cores=(\d+)-(\d+)(?:/|$)")


def geometry_key(cores: int, partition: str | None = None, user: str | None = None) -> Key:
    """Return the key ASA state is kept and shared under: a core bucket, plus partition and user.

    Cores are bucketed by powers of two: a request of ``c`` cores falls in ``(2**(k-1), 2**k]`` with
    ``2**k`` the smallest power of two >= ``c`` (1, 2, 3-4, 5-8, ..., 17-32, 33-64, 65-128, ...). Sizes
    in one bucket see similar queue waits and pool their observations; the paper's 28, 56 and 112-core
    geometries land in three different buckets.

    Parameters
    ----------
    cores : int
        Cores of the allocation, >= 1.
    partition : str or None, default None
        Slurm partition; ``None`` leaves it out of the key.
    user : str or None, default None
        Owner; ``None`` shares the state among all users.

    Returns
    -------
    str
        E.g. ``"cores=17-32/partition=batch/user=alice"``.

    Raises
    ------
    ConfigError
        ``cores`` < 1, or ``partition``/``user`` contain ``/`` or ``=``.

    Examples
    --------
    >>> geometry_key(28)
    'cores=17-32'
    >>> geometry_key(112, partition="batch")
    'cores=65-128/partition=batch'
    """
    if isinstance(cores, bool) or not isinstance(cores, (int, np.integer)) or cores < 1:
        raise ConfigError(f"geometry_key: parameter 'cores' must be an integer >= 1; got {cores!r}")
    hi = 1 << (int(cores) - 1).bit_length()
    lo = hi // 2 + 1 if hi > 1 else 1
    parts = [f"cores={lo}-{hi}"]
    for name, value in (("partition", partition), ("user", user)):
        if value is None:
            continue
        if "/" in value or "=" in value or not value:
            raise ConfigError(
                f"geometry_key: parameter {name!r} must be a non-empty string without '/' or '='; "
                f"got {value!r}"
            )
        parts.append(f"{name}={value}")
    return "/".join(parts)


def key_cores(key: Key) -> int | None:
    """Return the largest core count of a :func:`geometry_key` bucket, or ``None`` for other keys.

    >>> key_cores("cores=17-32/user=alice")
    32
    >>> key_cores("anything else") is None
    True
    """
    match = _KEY_RE.match(key)
    return int(match.group(2)) if match else None


def nearest_index(grid: npt.ArrayLike, waits: npt.ArrayLike) -> IntArray:
    """Return, for each wait, the index of the closest grid value (ties go to the smaller value).

    Parameters
    ----------
    grid : array_like of float
        Sorted candidate waits.
    waits : array_like of float
        Waits in seconds.

    Returns
    -------
    ndarray of int64
        Same shape as ``waits``.

    Examples
    --------
    >>> nearest_index([0.0, 10.0, 100.0], [4.0, 6.0, 55.0, 1e9]).tolist()
    [0, 1, 1, 2]
    """
    g = np.asarray(grid, dtype=np.float64)
    w = np.asarray(waits, dtype=np.float64)
    right = np.clip(np.searchsorted(g, w, side="left"), 1, len(g) - 1) if len(g) > 1 else None
    if right is None:
        return np.zeros(w.shape, dtype=np.int64)
    left = right - 1
    pick_right = (g[right] - w) < (w - g[left])
    return np.where(pick_right, right, left).astype(np.int64)

"""Optimal speculative walltime sequences: **TOptimal** and **ATOptimal** (pure functions).

A stage whose runtime ``X`` is random is submitted with walltime ``t1``; if it is killed at ``t1`` it
restarts from scratch with ``t2 > t1``, and so on until ``tk = b``, the largest runtime possible. The
functions here choose the sequence from a discrete runtime distribution ``(v_i, f_i)_{i=0..n}`` with
``v_0 < v_1 < ... < v_n = b`` and ``f_i = P(X = v_i)``.

* :func:`toptimal` minimises the expected cost of the iSBatch cost model: each submission of walltime
  ``t`` costs ``alpha * t + beta * min(X, t) + gamma``. With the defaults (``alpha=1``, ``beta=0``,
  ``gamma=0``) every reservation is paid in full, which is the paper's TOptimal objective (the expected
  makespan of Theorem 1 with ``zeta = 0``). Dynamic programme over "the runtime is known to exceed
  ``v_i``", O(n^2) time, one numpy vector operation per state.
* :func:`atoptimal` minimises the expected makespan of Theorem 1 of Gainaru et al., *Speculative
  Scheduling for Stochastic HPC Applications* (ICPP 2019), when a stream of backfilling work of rate
  ``zeta`` in [0, 1) can use what a reservation leaves idle. It is the paper's Theorem 2 dynamic
  programme (states: last reservation index and the sum of the reservations so far) on an
  equally-spaced distribution (ESDD).

Notes
-----
Two details of the paper's text are corrected here, both checked against its Table 1:

* Eq. (4) writes the threshold runtime as ``min((1-zeta) v_{pi(m+1)} - zeta S_m, v_{pi(m)})``; the
  makespan ``max(S_{m+1}, (S_m + X) / (1 - zeta))`` it comes from needs ``max``, as Theorem 2's
  ``x(i, m, k, i')`` has it.
* Theorem 2 rounds the threshold index up (``ceil``); the makespan formula needs the *first index where*
  ``(S_m + v_l) / (1 - zeta)`` *dominates* ``S_{m+1}``, which is what this module uses. With it, n = 23 or
  46 points reproduce Table 1's 13.043 h (zeta = 0.5) and 17.391 h (zeta = 0.9).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError

__all__ = [
    "MAX_ATOPTIMAL_CELLS",
    "MAX_ATOPTIMAL_STATES",
    "MAX_TOPTIMAL_POINTS",
    "ReservationSequence",
    "atoptimal",
    "toptimal",
    "toptimal_policy",
]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MAX_ATOPTIMAL_STATES = 5_000_000
"""Largest number of (index, reservation-sum) states :func:`atoptimal` will tabulate.

The ATOptimal state space grows like n^3 when ``zeta`` is small (n^4 when ``v_0 > 0``); beyond this
the call raises :class:`~elastic.errors.ConfigError` asking for fewer points instead of exhausting
memory."""

MAX_ATOPTIMAL_CELLS = 200_000_000
"""Largest number of (state, next request) transitions :func:`atoptimal` will evaluate (~ a minute)."""

MAX_TOPTIMAL_POINTS = 100_000
"""Largest ``n`` (intervals of the grid) :func:`toptimal_policy` accepts.

The programme is O(n^2): n = 10,000 takes about 0.2 s, n = 100,000 about 7 s and n = 1,000,000
would take over ten minutes, with no gain (the paper uses n = 200); beyond this the call raises
:class:`~elastic.errors.ConfigError` instead of running silently for minutes."""

_CHUNK_CELLS = 1_000_000  # transitions evaluated per numpy operation (bounds temporary memory)


@dataclass(frozen=True, slots=True)
class ReservationSequence:
    """An increasing sequence of walltime requests and its expected cost.

    Attributes
    ----------
    indices : tuple of int
        Grid indices ``i`` of the requests (into the distribution's ``values``), increasing, last = n.
    requests : tuple of float
        The requested walltimes ``v_i``, in the distribution's unit (seconds unless said otherwise).
    expected_cost : float
        Expected cost of the sequence under the distribution it was computed for: the cost model's
        expectation for :func:`toptimal`, the expected makespan (Theorem 1) for :func:`atoptimal`.
    """

    indices: tuple[int, ...]
    requests: tuple[float, ...]
    expected_cost: float

    def __len__(self) -> int:
        return len(self.requests)


def _check_distribution(values: npt.ArrayLike, probs: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Return ``values`` and ``probs`` as float arrays after checking they form a distribution."""
    v = np.asarray(values, dtype=np.float64)
    f = np.asarray(probs, dtype=np.float64)
    if v.ndim != 1 or v.shape != f.shape or v.size < 1:
        raise ConfigError(
            f"values and probs must be 1-d arrays of the same non-zero length; got shapes {v.shape} "
            f"and {f.shape}"
        )
    if not (np.all(np.isfinite(v)) and np.all(np.isfinite(f))):
        raise ConfigError("values and probs must be finite")
    if v.size > 1 and not np.all(np.diff(v) > 0):
        raise ConfigError("values must be strictly increasing")
    if v[0] < 0:
        raise ConfigError(f"values are runtimes and must be >= 0; got values[0]={v[0]!r}")
    if np.any(f < 0):
        raise ConfigError(f"probs must be >= 0; got min(probs)={f.min()!r}")
    total = float(f.sum())
    if abs(total - 1.0) > 1e-6:
        raise ConfigError(f"probs must sum to 1 (within 1e-6); they sum to {total!r}")
    return v, f


def _check_cost(alpha: float, beta: float, gamma: float) -> None:
    for name, value in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
        if not (np.isfinite(value) and value >= 0):
            raise ConfigError(f"{name} must be a finite number >= 0; got {value!r}")
    if alpha == 0 and beta == 0 and gamma == 0:
        raise ConfigError("at least one of alpha, beta, gamma must be > 0 (otherwise every sequence costs 0)")


def toptimal_policy(
    values: npt.ArrayLike,
    probs: npt.ArrayLike,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    gamma: float = 0.0,
) -> tuple[FloatArray, IntArray]:
    """Tabulate the TOptimal dynamic programme for every state "the runtime exceeds ``v_i``".

    Parameters
    ----------
    values : array_like of float, shape (n + 1,)
        Possible runtimes ``v_0 < ... < v_n`` (seconds); ``v_n`` is the upper bound ``b``.
    probs : array_like of float, shape (n + 1,)
        ``f_i = P(X = v_i)``, non-negative, summing to 1.
    alpha : float, default 1.0
        Cost per reserved second.
    beta : float, default 0.0
        Cost per used second (``min(X, t)`` of each submission).
    gamma : float, default 0.0
        Fixed cost per submission (e.g. an expected queue wait, in seconds).

    Returns
    -------
    cost : ndarray of float, shape (n + 1,)
        ``cost[0]`` is the optimal expected cost from the start; ``cost[i + 1]`` the optimal expected
        cost still to pay once the runtime is known to exceed ``v_i`` (unconditional weights: divide by
        ``P(X > v_i)`` for the conditional cost).
    next_index : ndarray of int, shape (n + 1,)
        The optimal next request (a grid index) from the same states.

    Raises
    ------
    ConfigError
        If the arrays do not form a distribution, a cost weight is negative, or there are more than
        :data:`MAX_TOPTIMAL_POINTS` + 1 values.

    Examples
    --------
    >>> cost, nxt = toptimal_policy([1.0, 2.0, 3.0], [0.5, 0.25, 0.25])
    >>> int(nxt[0]), float(cost[0])
    (0, 2.5)
    """
    v, f = _check_distribution(values, probs)
    _check_cost(alpha, beta, gamma)
    n = v.size - 1
    if n > MAX_TOPTIMAL_POINTS:
        raise ConfigError(
            f"toptimal with n={n:,} points would take minutes (O(n^2)); use at most "
            f"{MAX_TOPTIMAL_POINTS:,} points"
        )
    # survival[t] = P(X >= v_t) = P(X > v_{t-1}); state "exceeds v_i" has survival[i + 1].
    survival = np.concatenate((np.cumsum(f[::-1])[::-1], [0.0]))
    # partial[t] = sum_{l < t} f_l v_l
    partial = np.concatenate(([0.0], np.cumsum(f * v)))
    slope = alpha * v + gamma
    # offset[j] = beta * (sum_{l <= j} f_l v_l + v_j P(X > v_j)) + cost-to-go after reserving v_j.
    offset = np.empty(n + 1)
    cost = np.zeros(n + 1)
    next_index = np.full(n + 1, n, dtype=np.int64)
    offset[n] = beta * partial[n + 1]
    # Single loop over states, vectorised over the next request: O(n^2) work, O(n) Python steps.
    for state in range(n, -1, -1):  # state = i + 1 for "X > v_i", state 0 = nothing known
        s = survival[state]
        if s <= 0.0:
            cost[state], next_index[state] = 0.0, n
        else:
            candidates = s * slope[state:] + offset[state:]
            # A request that cannot succeed (no mass in (v_i, v_j]) is never useful; without this,
            # a free request (v_0 = 0 with alpha = 1, gamma = 0) would tie with the optimum.
            candidates[:-1][s - survival[state + 1 : n + 1] <= 0.0] = np.inf
            best = int(np.argmin(candidates))
            next_index[state] = state + best
            cost[state] = candidates[best] - beta * partial[state]
        if 0 < state <= n:
            j = state - 1
            offset[j] = beta * (partial[j + 1] + v[j] * survival[j + 1]) + cost[state]
    return cost, next_index


def toptimal(
    values: npt.ArrayLike,
    probs: npt.ArrayLike,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    gamma: float = 0.0,
) -> ReservationSequence:
    """Return the sequence of walltime requests with the smallest expected cost (TOptimal).

    Each submission of walltime ``t`` costs ``alpha * t + beta * min(X, t) + gamma``; a killed stage
    restarts from scratch with the next, longer request; the last request is ``v_n``.

    Parameters
    ----------
    values : array_like of float, shape (n + 1,)
        Possible runtimes ``v_0 < ... < v_n`` (seconds); need not be equally spaced.
    probs : array_like of float, shape (n + 1,)
        ``f_i = P(X = v_i)``, non-negative, summing to 1.
    alpha, beta, gamma : float
        Cost weights; see :func:`toptimal_policy`.

    Returns
    -------
    ReservationSequence
        Increasing requests ending at ``v_n``, and their expected cost.

    Raises
    ------
    ConfigError
        If the arrays do not form a distribution or a cost weight is negative.

    Examples
    --------
    >>> toptimal([1.0, 2.0, 3.0], [0.5, 0.25, 0.25]).requests
    (1.0, 3.0)
    """
    cost, next_index = toptimal_policy(values, probs, alpha=alpha, beta=beta, gamma=gamma)
    v = np.asarray(values, dtype=np.float64)
    n = v.size - 1
    indices: list[int] = []
    state = 0
    while True:
        j = int(next_index[state])
        indices.append(j)
        if j == n:
            break
        state = j + 1
    return ReservationSequence(tuple(indices), tuple(float(v[i]) for i in indices), float(cost[0]))


def atoptimal(values: npt.ArrayLike, probs: npt.ArrayLike, *, zeta: float) -> ReservationSequence:
    """Return the sequence minimising the expected makespan with backfilling rate ``zeta`` (ATOptimal).

    The makespan of a run whose runtime ``X`` lies in ``(t_m, t_{m+1}]`` is
    ``max(S_{m+1}, (S_m + X) / (1 - zeta))`` with ``S_m = t_1 + ... + t_m`` (Theorem 1): the reservations
    of the stage, or the stage plus the backfilling work that arrived meanwhile, whichever is longer.

    Parameters
    ----------
    values : array_like of float, shape (n + 1,)
        Equally spaced runtimes ``v_i = v_0 + i * delta`` (an ESDD), seconds.
    probs : array_like of float, shape (n + 1,)
        ``f_i = P(X = v_i)``, non-negative, summing to 1.
    zeta : float
        Backfilling work rate in [0, 1): work that arrives per second for this stage's processors, as a
        fraction of them. ``zeta = 0`` is TOptimal with the default cost model.

    Returns
    -------
    ReservationSequence
        Increasing requests ending at ``v_n``; ``expected_cost`` is the expected makespan.

    Raises
    ------
    ConfigError
        If ``zeta`` is outside [0, 1), the values are not equally spaced, the arrays do not form a
        distribution, or the state space exceeds :data:`MAX_ATOPTIMAL_STATES` (use fewer points).

    Notes
    -----
    States are (last index ``i``, ``m`` requests so far, ``k`` = sum of their indices), so the sum of
    the requests is ``m v_0 + k delta`` exactly (integers; ``m`` is dropped when ``v_0 = 0``). A state
    whose sum is so large that every remaining outcome is backfilling-dominated (``(S + v_{i+1}) /
    (1 - zeta) >= S + v_n``) has the closed form "request ``v_n`` next" and spawns no further states,
    which keeps the table small unless ``zeta`` is close to 0. All successors of all states of one index
    are evaluated in one numpy operation.

    Examples
    --------
    >>> import numpy as np
    >>> atoptimal(np.arange(5.0), [0.0, 0.1, 0.6, 0.2, 0.1], zeta=0.5).requests
    (4.0,)
    """
    v, f = _check_distribution(values, probs)
    if not (np.isfinite(zeta) and 0.0 <= zeta < 1.0):
        raise ConfigError(f"zeta must be in [0, 1); got {zeta!r}")
    n = v.size - 1
    if n == 0:
        return ReservationSequence((0,), (float(v[0]),), float(v[0]) / (1.0 - zeta))
    delta = (v[-1] - v[0]) / n
    if not np.allclose(np.diff(v), delta, rtol=1e-9, atol=1e-12 * max(1.0, float(v[-1]))):
        raise ConfigError(
            "atoptimal needs equally spaced values (an ESDD); use elastic.learners.walltime.esdd"
        )
    v = v[0] + delta * np.arange(n + 1)  # exact grid, so sums of requests are exact in (m, k)
    return _atoptimal(v, f, float(zeta), float(delta))


def _atoptimal(v: FloatArray, f: FloatArray, zeta: float, delta: float) -> ReservationSequence:
    n = v.size - 1
    v0 = float(v[0])
    cum_f = np.concatenate(([0.0], np.cumsum(f)))  # cum_f[t] = sum_{l < t} f_l
    cum_fv = np.concatenate(([0.0], np.cumsum(f * v)))
    k_span = n * (n + 1) // 2 + 1  # k <= sum of all indices
    m_step = k_span if v0 != 0.0 else 0  # key = m * k_span + k; m is irrelevant when v_0 = 0

    def sums(keys: IntArray) -> FloatArray:
        if not m_step:
            exact: FloatArray = np.asarray(keys * delta, dtype=np.float64)
            return exact
        result: FloatArray = (keys // k_span) * v0 + (keys % k_span) * delta
        return result

    def cutoff(i: int) -> float:
        """Sum from which every outcome above ``v_i`` is backfilling-dominated (closed form)."""
        if zeta == 0.0:
            return float("inf")
        return float(((1.0 - zeta) * v[n] - v[i + 1]) / zeta)

    # Forward pass: the states (keys) reachable at each index, keeping only those below the cutoff.
    kept: list[IntArray] = []
    pool = np.zeros(1, dtype=np.int64)  # keys of every kept state so far, plus the start (key 0)
    total = cells = 1
    for t in range(n):
        keys = np.unique(pool + m_step + t)
        keys = keys[sums(keys) < cutoff(t)]
        kept.append(keys)
        total += keys.size
        cells += keys.size * (n - t)
        if total > MAX_ATOPTIMAL_STATES or cells > MAX_ATOPTIMAL_CELLS:
            raise ConfigError(
                f"atoptimal with n={n} points and zeta={zeta} needs more than {MAX_ATOPTIMAL_STATES} "
                f"states or {MAX_ATOPTIMAL_CELLS} transitions; use fewer points (the paper finds "
                "n < 50 enough) or a larger zeta"
            )
        pool = np.union1d(pool, keys)
    logger.debug("atoptimal: n=%d zeta=%s: %d states, %d transitions", n, zeta, total, cells)

    # Global table of kept states, sorted by (index, key), for vectorised look-ups.
    key_limit = (n + 2) * k_span
    offsets = np.concatenate(([0], np.cumsum([keys.size for keys in kept])))
    global_keys = np.concatenate(
        [t * key_limit + keys for t, keys in enumerate(kept)] + [np.full(1, np.iinfo(np.int64).max)]
    )  # sorted; the sentinel keeps searchsorted in range and is never matched
    global_cost = np.zeros(global_keys.size)
    if m_step == 0 and n * k_span <= _CHUNK_CELLS * 16:
        # v_0 = 0: keys are small integers, so a dense (index, key) -> position table replaces the
        # binary search (several times faster); positions of unkept states point at the sentinel.
        dense = np.full((n + 1, k_span), global_keys.size - 1, dtype=np.int64)
        for t, keys in enumerate(kept):
            dense[t, keys] = offsets[t] + np.arange(keys.size)

        def position(t: IntArray, keys: IntArray) -> IntArray:
            result: IntArray = dense[t, np.minimum(keys, k_span - 1)]
            return result
    else:

        def position(t: IntArray, keys: IntArray) -> IntArray:
            return np.searchsorted(global_keys, t * key_limit + keys)

    cutoffs = np.array([cutoff(t) for t in range(n)] + [np.inf])

    def best_next(i: int, keys: IntArray) -> tuple[FloatArray, IntArray]:
        """Optimal cost-to-go and next index for the states ``keys`` of index ``i``."""
        s = sums(keys)[:, None]  # (A, 1) sum of the requests so far
        j = np.arange(i + 1, n + 1)[None, :]  # (1, B) next request index
        s_next = s + v[j]
        # Last outcome l whose makespan is the reservations' sum: (s + v_l) / (1 - zeta) <= s + v_j.
        x = np.clip(np.searchsorted(v, (1.0 - zeta) * s_next - s, side="right") - 1, i, j)
        lo = cum_f[i + 1]
        total_cost = s_next * (cum_f[x + 1] - lo) + (
            s * (cum_f[j + 1] - cum_f[x + 1]) + (cum_fv[j + 1] - cum_fv[x + 1])
        ) / (1.0 - zeta)
        if i + 1 < n:
            jj = j[:, :-1]
            new_keys = keys[:, None] + m_step + jj
            s_new = sums(new_keys)  # same arithmetic as the forward pass, so the cut-off agrees
            closed_form = (s_new * (1.0 - cum_f[jj + 1]) + (cum_fv[n + 1] - cum_fv[jj + 1])) / (1.0 - zeta)
            where = position(jj, new_keys)
            future = np.where(s_new >= cutoffs[jj], closed_form, global_cost[where])
            # A request that cannot succeed (no mass in (v_i, v_j]) is never useful.
            useless = cum_f[jj + 1] - lo <= 0.0
            total_cost[:, :-1] += np.where(useless, np.inf, future)
        best = np.argmin(total_cost, axis=1)
        return total_cost[np.arange(keys.size), best], i + 1 + best

    next_index = np.full(global_keys.size, n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        keys = kept[i]
        rows = max(1, _CHUNK_CELLS // (n - i))  # bound the temporaries' memory
        for first in range(0, keys.size, rows):
            lo_row, hi_row = offsets[i] + first, offsets[i] + min(first + rows, keys.size)
            global_cost[lo_row:hi_row], next_index[lo_row:hi_row] = best_next(i, keys[first : first + rows])
    start_costs, start_next = best_next(-1, np.zeros(1, dtype=np.int64))
    start_cost = float(start_costs[0])

    indices = [int(start_next[0])]
    key = m_step + indices[0]
    while indices[-1] != n:
        i = indices[-1]
        found = np.flatnonzero(global_keys == i * key_limit + key)
        nxt = int(next_index[found[0]]) if found.size else n  # not kept: closed form, request v_n
        indices.append(nxt)
        key += m_step + nxt
    return ReservationSequence(tuple(indices), tuple(float(v[i]) for i in indices), start_cost)

"""The timing rule: when to request a stage's cores, and what getting them is expected to cost.

An allocation requested too early idles (every core is charged from its start); one requested too late
delays the run. Both are priced in one currency (:class:`Prices`): ``alpha`` per core-second charged and
``beta`` per second of makespan, with ``beta = weight x`` the widest stage's cores (a second of makespan
is worth ``weight`` seconds of the whole workflow's peak allocation; the user sets ``weight``). This is
the trade :class:`elastic.learners.walltime_cost.CostModel` prices a walltime request with (reserved seconds
against seconds of delay), applied to queue waits.

The queue wait ``W`` of a new allocation is a distribution, given as quantiles at :data:`PROBS`
(:meth:`~elastic.strategies.knowledge.Knowledge.wait_quantiles`); an expectation over ``W`` is the mean
over those quantiles. What the rule can do depends on how the queue ranks a held job (the backend's
priority model, :mod:`elastic.simulator.priority`):

- **Held jobs keep their place** (``"basic"``, ``"accrue-always"``; :func:`keeps_place`): request the
  allocation at once with a batch dependency ``afterany`` on the allocation before it. It is charged
  nothing before it is eligible and gains queue position meanwhile, so no wait prediction is needed to
  time it; what is left is the wait after it became eligible, :func:`acquire_cost` ``= beta E[W]`` with
  ``W`` learned from such waits (follow-ups).
- **Held jobs are ranked when they become eligible** (``"age"``, Slurm's multifactor default; also
  assumed when the backend does not say): a dependency or a ``--begin`` time buys nothing, so the
  allocation is requested without one, ``L`` seconds before it is needed. The best ``L`` is the
  newsvendor quantile (:func:`lead_time`): ``P(W <= L) = beta / (beta + alpha x cores)``; an early start
  idles ``cores`` per second, a late one costs ``beta`` per second. When the need is closer than ``L``,
  the best is to request at once (``L`` = the time left): :func:`acquire_cost` is the expected cost at
  the best ``L`` the time left allows.

Examples
--------
>>> import numpy as np
>>> waits = np.full(len(PROBS), 3600.0)  # the queue always waits an hour
>>> prices = Prices(beta=28.0)
>>> lead_time(waits, 28, prices)  # request an hour ahead
3600.0
>>> acquire_cost(waits, 28, prices, lead=7200.0, model="age")  # two hours' notice: no idle, no delay
0.0
>>> acquire_cost(waits, 28, prices, lead=0.0, model="age")  # needed now: an hour of delay at beta = 28
100800.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError

__all__ = [
    "KEEPS_PLACE",
    "PROBS",
    "Prices",
    "Values",
    "acquire_cost",
    "acquire_delayed",
    "acquire_values",
    "expected_delay",
    "requested_now",
    "keeps_place",
    "lead_time",
    "mean_of",
    "single_wait",
]

FloatArray = npt.NDArray[np.float64]

PROBS: tuple[float, ...] = tuple((i + 0.5) / 20 for i in range(20))
"""Probabilities the wait distribution is read at: midpoints of 20 equal slices, so the mean of the
quantiles is the expectation (a 20-point quadrature)."""

KEEPS_PLACE = frozenset({"basic", "accrue-always"})
"""Priority models under which a held job keeps the queue place its submission gave it."""


def keeps_place(model: str | None) -> bool:
    """Whether a job held by a dependency keeps its submit place under ``model`` (None: assume not)."""
    return model in KEEPS_PLACE


@dataclass(frozen=True, slots=True)
class Prices:
    """What a core-second and a second of makespan cost.

    Parameters
    ----------
    beta : float
        Cost of one second of makespan (in core-seconds when ``alpha`` is 1), > 0.
    alpha : float, default 1.0
        Cost of one core-second charged, > 0.

    Raises
    ------
    ConfigError
        A price is not a finite number > 0.
    """

    beta: float
    alpha: float = 1.0

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"Prices: {name} must be a finite number > 0, got {value!r}")

    def critical_ratio(self, cores: int) -> float:
        """Return ``beta / (beta + alpha x cores)``: the wait quantile to request ``cores`` ahead by."""
        return self.beta / (self.beta + self.alpha * cores)


def _quantile(waits: FloatArray, tau: float) -> float:
    """Return the ``tau`` quantile of the distribution whose quantiles at :data:`PROBS` are ``waits``."""
    values = waits.tolist()
    if values.count(values[0]) == len(values):  # one value (the scheduler's estimate): np.interp's answer
        return float(values[0])
    return float(np.interp(tau, PROBS, np.sort(waits)))


def lead_time(waits: FloatArray, cores: int, prices: Prices) -> float:
    """Return how long before its need an allocation of ``cores`` is best requested, with no dependency.

    The ``critical_ratio(cores)`` quantile of the wait (interpolated between the quantiles given, clamped
    to the first and last): the lead that minimises ``alpha x cores x E[(L - W)+] + beta x E[(W - L)+]``.
    """
    return _quantile(waits, prices.critical_ratio(cores))


def expected_delay(waits: FloatArray, lead: float) -> float:
    """Return ``E[(W - lead)+]``: the expected seconds an allocation requested ``lead`` ahead comes late."""
    return float(np.maximum(waits - lead, 0.0).mean())


def acquire_cost(waits: FloatArray, cores: int, prices: Prices, *, lead: float, model: str | None) -> float:
    """Return the expected cost, beyond the work itself, of new ``cores`` needed ``lead`` seconds from now.

    Parameters
    ----------
    waits : ndarray
        The wait's quantiles at :data:`PROBS`, seconds.
    cores : int
        Width of the allocation.
    prices : Prices
        Core-second and makespan prices.
    lead : float
        Seconds until the cores are needed (0: now).
    model : str or None
        Priority model of the queue (see the module docstring); None is taken as ``"age"``.

    Returns
    -------
    float
        ``beta E[W]`` when held jobs keep their place (requested at once, with a dependency; ``W`` is
        the wait after it became eligible); otherwise the least of ``alpha x cores x E[(L - W)+] +
        beta x E[(W - L)+]`` over ``0 <= L <= lead`` (requested ``L`` before the need, without one).
    """
    idle, delay = acquire_delayed(
        waits, cores, prices, need=max(lead, 0.0), delay=np.zeros(len(PROBS)), model=model
    )
    return idle + prices.beta * float(delay.mean())


def acquire_delayed(
    waits: FloatArray,
    cores: int,
    prices: Prices,
    *,
    need: float,
    delay: FloatArray,
    model: str | None,
    lead: float | None = None,
    mean: float | None = None,
) -> tuple[float, FloatArray]:
    """Return what new ``cores`` cost in idle cores, and the delay the stages after them carry.

    The stage is needed ``need`` seconds from now plus ``delay``: the delay the stages before it carry
    (quantiles at :data:`PROBS`, independent of the wait). :func:`acquire_cost` prices one allocation
    alone; here the delay before it counts too, as the policy times its request:

    - **Requested now** (held jobs ranked at eligibility, and the newsvendor lead reaches back past now
      from the expected need): its wait runs *beside* the delay before it, and the stage starts at the
      later of the two: the delay after is ``max(delay, W - need)``, and the cores idle
      ``E[(need + delay - W)+]``. Two allocations requested at once for consecutive stages (a short
      narrow one and the wide one after it) delay the run by the longer wait, not by the sum.
    - **Requested later**, ``L`` before the expected need (:func:`lead_time`, at most ``need``): the
      delay after is ``delay + (W - L)+``, and the cores idle ``E[(L - W)+]``. The delay carried in
      gives no more notice: a need pushed back by a wait still to come is asked for once that wait is
      known (the planner requests an allocation on such a need only when it is close), as
      :func:`acquire_cost` prices it.
    - **Held jobs keep their place** (:func:`keeps_place`: chained with ``afterany`` on the allocation
      before it): its wait starts when that one ends, so the delay after is ``delay + W``; nothing idles.

    With no delay before it, the idle cost plus ``beta`` times the expected delay added is
    :func:`acquire_cost` at ``lead = need`` (which is computed so). ``lead``, if given, is
    :func:`lead_time` of ``waits`` (a caller pricing many steps on one distribution computes it once);
    ``mean``, if given, is ``delay``'s mean as ``ndarray.mean`` computes it (a caller that keeps it).

    Returns
    -------
    idle : float
        ``alpha x cores x`` the expected idle seconds.
    delay : ndarray
        The delay the stages after it carry, as quantiles at :data:`PROBS` (the ``20 x 20`` combinations
        of the two distributions, averaged in 20 equal slices: the mean is kept exactly).

    Examples
    --------
    >>> hour, five = np.full(len(PROBS), 3600.0), np.full(len(PROBS), 5 * 3600.0)
    >>> prices = Prices(beta=28.0)
    >>> # a wide stage needed 600 s from now, behind a narrow one whose cores wait an hour; the wide
    >>> # cores wait 5 h, so they are asked now too, and the narrow stage's wait hides in theirs
    >>> idle, after = acquire_delayed(five, 28, prices, need=600.0, delay=hour, model="age")
    >>> idle, float(after.mean())  # delayed 5 h - 600 s in all, not 1 h + 5 h - 600 s
    (0.0, 17400.0)
    >>> idle, after = acquire_delayed(five, 28, prices, need=600.0, delay=hour, model="basic")
    >>> idle, float(after.mean())  # chained behind the narrow allocation: the waits add up
    (0.0, 21600.0)
    """
    d = np.asarray(delay, dtype=float)
    w = np.asarray(waits, dtype=float)
    if keeps_place(model):
        return 0.0, _slices(d[:, None] + w[None, :])
    best = lead_time(w, cores, prices) if lead is None else lead
    single = single_wait(w, model)
    if single is not None and len(d) == len(PROBS):
        # one wait (the scheduler's estimate): the same sums on Python floats, in numpy's order
        idle, values = _one_wait(single, d.tolist(), cores, prices, need=need, best=best, mean=mean)
        return idle, np.array(values)
    now = requested_now(w, cores, prices, need=need, delay=d, model=model, lead=best, mean=mean)
    if now:
        at = need + d[:, None]
        idle = float(np.maximum(at - w[None, :], 0.0).mean())
    else:
        asked = min(best, max(need, 0.0))
        idle = float(np.maximum(asked - w, 0.0).mean())
    if now:
        after = np.maximum(d[:, None], w[None, :] - need)
    else:
        after = d[:, None] + np.maximum(w - asked, 0.0)[None, :]
    return prices.alpha * cores * idle, _slices(after)


Values = tuple[float, ...]
"""A distribution as Python floats: quantiles at :data:`PROBS`, ascending (:func:`acquire_values`)."""


def acquire_values(
    waits: FloatArray,
    cores: int,
    prices: Prices,
    *,
    need: float,
    delay: Values,
    model: str | None,
    single: float | None,
    lead: float | None = None,
    mean: float | None = None,
) -> tuple[float, Values]:
    """Return :func:`acquire_delayed` of ``delay`` given and returned as Python floats, bit for bit.

    The planner's search (:func:`~elastic.strategies.search.plan`) carries each partial plan's delay so:
    making arrays of 20 values and comparing them cost a third of a search's time, and a tuple of floats
    costs a fraction of that (the 40-stage chain of ``benchmarks/bench_planner_cost.py``). ``single``:
    :func:`single_wait` of ``waits`` and ``model`` (the caller computes it once per distribution).
    """
    if single is None or len(delay) != len(PROBS):
        idle, after = acquire_delayed(
            waits, cores, prices, need=need, delay=np.array(delay), model=model, lead=lead, mean=mean
        )
        return idle, tuple(after.tolist())
    best = lead_time(waits, cores, prices) if lead is None else lead
    idle, values = _one_wait(single, delay, cores, prices, need=need, best=best, mean=mean)
    return idle, tuple(values)


def single_wait(waits: FloatArray, model: str | None) -> float | None:
    """Return the one value of ``waits`` if every quantile is it and the wait is unchained, else None.

    The case :func:`acquire_delayed` prices on Python floats (the scheduler's estimate: one value).
    """
    if keeps_place(model):
        return None
    ws = np.asarray(waits, dtype=float).tolist()
    if len(ws) == len(PROBS) and ws.count(ws[0]) == len(ws):  # not NaN: NaN != NaN
        return float(ws[0])
    return None


def mean_of(values: Sequence[float]) -> float:
    """Return numpy's mean of ``values`` (``np.add.reduce`` divided by the count), bit for bit.

    Twenty values (:data:`PROBS`, the search's every step) are summed unrolled, in :func:`_pairwise`'s
    order: eight pairs, combined, then the last four in turn (half the cost of its loop).
    """
    if len(values) == 20:
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19 = values
        res = (((a0 + a8) + (a1 + a9)) + ((a2 + a10) + (a3 + a11))) + (
            ((a4 + a12) + (a5 + a13)) + ((a6 + a14) + (a7 + a15))
        )
        return ((((res + a16) + a17) + a18) + a19) / 20.0
    return _pairwise(values, 0, len(values)) / len(values)


def _one_wait(
    wait: float,
    delay: Sequence[float],
    cores: int,
    prices: Prices,
    *,
    need: float,
    best: float,
    mean: float | None,
) -> tuple[float, list[float]]:
    """:func:`acquire_delayed` of a wait of one value (every quantile ``wait``), unchained, bit for bit.

    ``delay`` as Python floats, ascending (:data:`Values`); the delay after is returned so. Each row of the
    ``20 x 20`` combinations is one value, so each slice of the delay after holds copies of one value (the
    row sorted, each value's mean of copies). Every mean is numpy's (:func:`_pairwise`) on the same values
    in the same order: numpy's cost per call on arrays of 20 values was much of a search's (issue 31).
    The row is ``delay`` plus one value, or floored at one value: it ascends as ``delay`` does (float
    addition and ``max`` keep order), so it is not sorted again; the mean of copies keeps order too, so
    the delay after ascends. Sorting it and making it in a second pass were a tenth of the 40-stage
    chain's search (``benchmarks/bench_planner_cost.py``).
    """
    if mean is None:
        mean = _pairwise(delay, 0, len(delay)) / len(delay)
    now = best >= need + mean  # requested_now
    n = len(PROBS)
    if now:
        # np.maximum(need + d[:, None] - w[None, :], 0.0).mean(): row i is n copies of one value, so the
        # same values in the same order (400 of them: numpy sums them faster than Python)
        flat = np.repeat(np.maximum(np.array(delay) + need - wait, 0.0), n)
        idle = float(_SUM(flat)) / len(flat)
        floor = wait - need
        row = [x if x > floor else floor for x in delay]  # _maximum inlined
        if n == 20:  # _copies_mean inlined (the search's most frequent step)
            return prices.alpha * cores * idle, [(16.0 * x + x + x + x + x) / 20.0 for x in row]
        return prices.alpha * cores * idle, [_copies_mean(x, n) for x in row]
    # min(best, max(need, 0.0)), _maximum(asked - wait, 0.0) and max(wait - asked, 0.0), spelled out (the
    # same operands returned: each builtin call cost more than the step's arithmetic)
    floor = 0.0 if need < 0.0 else need
    asked = floor if floor < best else best
    early = asked - wait
    idle = _copies_mean(early if early > 0.0 else 0.0, n)
    late = wait - asked
    late = 0.0 if late < 0.0 else late
    if n == 20:  # the row and _copies_mean inlined, in one pass (the search's most frequent step)
        return prices.alpha * cores * idle, [((y := x + late) * 16.0 + y + y + y + y) / 20.0 for x in delay]
    return prices.alpha * cores * idle, [_copies_mean(x + late, n) for x in delay]


_SUM = np.add.reduce


def _maximum(a: float, b: float) -> float:
    """``np.maximum(a, b)`` of two floats (not NaN): ``b`` where they are equal (``b``'s zero sign)."""
    return a if a > b else b


def _pairwise(a: Sequence[float], lo: int, n: int) -> float:
    """Return numpy's sum of ``a[lo:lo + n]`` (``np.add.reduce`` of a contiguous float64 array), bit for bit.

    numpy sums pairwise: under 8 values in order; up to 128 in 8 interleaved partial sums, combined as
    ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the rest in order; more, split in two at a
    multiple of 8 near the middle. A plain ``sum`` rounds differently.
    """
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[lo : lo + 8]
        i = lo + 8
        stop = lo + n - n % 8
        while i < stop:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for j in range(i, lo + n):
            res += a[j]
        return res
    half = n // 2
    half -= half % 8
    return _pairwise(a, lo, half) + _pairwise(a, lo + half, n - half)


def _copies_mean(x: float, n: int) -> float:
    """Return numpy's mean of ``n`` copies of ``x`` (not always ``x``: the sum rounds)."""
    if n == 20:  # _pairwise's order for 20 copies: 8 pairs, summed to 16 x (exact), then 4 more in turn
        return (16.0 * x + x + x + x + x) / 20.0  # left to right, as numpy adds them
    return _pairwise([x] * n, 0, n) / n


def requested_now(
    waits: FloatArray,
    cores: int,
    prices: Prices,
    *,
    need: float,
    delay: FloatArray | Sequence[float],
    model: str | None,
    lead: float | None = None,
    mean: float | None = None,
) -> bool:
    """Whether new cores needed ``need`` seconds plus ``delay`` from now are requested at once, unchained.

    Where held jobs are ranked at eligibility, when the newsvendor lead (:func:`lead_time`; ``lead`` if
    given) reaches back past now from the expected need (:func:`acquire_delayed`; ``mean``: ``delay``'s
    mean, if the caller keeps it).
    """
    if keeps_place(model):
        return False
    best = lead_time(waits, cores, prices) if lead is None else lead
    return best >= need + (float(np.mean(delay)) if mean is None else mean)


def _slices(values: FloatArray) -> FloatArray:
    """Return the distribution of equally likely ``values`` as :data:`PROBS` quantiles (slice means)."""
    flat = np.sort(values, axis=None)
    out: FloatArray = flat.reshape(len(PROBS), -1).mean(axis=1)
    return out

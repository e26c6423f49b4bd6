"""The timing rule's arithmetic on Python floats is numpy's, bit for bit (issue 31: the planner's cost).

:func:`~elastic.strategies.timing.acquire_delayed` prices a wait of one value (the scheduler's estimate)
with plain floats summed in numpy's pairwise order, since numpy's cost per call on arrays of 20 values was
much of a search's; a plain ``sum`` would round differently and change decisions.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.strategies import timing
from elastic.strategies.timing import PROBS, Prices, acquire_delayed

N = len(PROBS)
seconds = st.floats(0.0, 1e7, allow_nan=False, allow_infinity=False)


def _numpy_one_wait(
    wait: float, cores: int, prices: Prices, *, need: float, delay: np.ndarray, lead: float
) -> tuple[float, np.ndarray]:
    """The numpy computation ``acquire_delayed`` made for one wait (model "age") before issue 31."""
    w = np.full(N, wait)
    now = lead >= need + float(np.mean(delay))
    if now:
        idle = float(np.maximum(need + delay[:, None] - w[None, :], 0.0).mean())
        row = np.maximum(delay, w[0] - need)
    else:
        asked = min(lead, max(need, 0.0))
        idle = float(np.maximum(asked - w, 0.0).mean())
        row = delay + max(w[0] - asked, 0.0)
    return prices.alpha * cores * idle, np.repeat(np.sort(row), N).reshape(N, -1).mean(axis=1)


@settings(max_examples=300, deadline=None)
@given(
    seconds,
    st.lists(seconds, min_size=N, max_size=N),
    seconds,
    st.one_of(st.none(), seconds),
    st.integers(1, 256),
    st.floats(0.5, 500.0),
)
def test_one_wait_is_priced_as_numpy_prices_it(
    wait: float, delay: list[float], need: float, lead: float | None, cores: int, beta: float
) -> None:
    prices = Prices(beta=beta)
    d = np.sort(np.array(delay))
    best = timing.lead_time(np.full(N, wait), cores, prices) if lead is None else lead
    idle, after = acquire_delayed(np.full(N, wait), cores, prices, need=need, delay=d, model="age", lead=lead)
    want_idle, want_after = _numpy_one_wait(wait, cores, prices, need=need, delay=d, lead=best)
    assert idle == want_idle
    assert after.tobytes() == want_after.tobytes()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=700))
def test_the_pairwise_sum_is_numpys(values: list[float]) -> None:
    assert timing._pairwise(values, 0, len(values)) == float(np.add.reduce(np.array(values)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=40))
def test_the_mean_is_numpys_twenty_values_unrolled_included(values: list[float]) -> None:
    assert timing.mean_of(values) == float(np.mean(np.array(values)))
    twenty = (values * 20)[:20]
    assert timing.mean_of(twenty) == float(np.mean(np.array(twenty)))


@given(seconds)
def test_the_mean_of_copies_is_numpys_not_always_the_value(x: float) -> None:
    assert timing._copies_mean(x, N) == float(np.full(N, x).mean())
    assert timing._copies_mean(x, 7) == float(np.full(7, x).mean())


def test_the_mean_of_copies_can_differ_from_the_value() -> None:
    # why the copies are summed at all: 20 copies of 0.1 do not average to 0.1 in floats
    assert float(np.full(N, 0.1).mean()) != 0.1
    assert timing._copies_mean(0.1, N) == float(np.full(N, 0.1).mean())


@given(seconds, st.floats(0.0, 1.0))
def test_the_quantile_of_one_wait_is_numpys(wait: float, tau: float) -> None:
    assert timing._quantile(np.full(N, wait), tau) == float(np.interp(tau, PROBS, np.full(N, wait)))


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.lists(seconds, min_size=N, max_size=N),  # a learned distribution
        seconds.map(lambda w: [w] * N),  # the scheduler's estimate: one value
    ),
    st.lists(seconds, min_size=N, max_size=N),
    seconds,
    st.one_of(st.none(), seconds),
    st.integers(1, 256),
    st.sampled_from(["age", "basic", None]),
)
def test_the_search_s_floats_are_priced_as_the_arrays_are(
    waits: list[float], delay: list[float], need: float, lead: float | None, cores: int, model: str | None
) -> None:
    # the search carries delays as Python floats (timing.acquire_values): the same step, bit for bit
    prices = Prices(beta=28.0)
    w, d = np.sort(np.array(waits)), np.sort(np.array(delay))
    want_idle, want_after = acquire_delayed(w, cores, prices, need=need, delay=d, model=model, lead=lead)
    idle, after = timing.acquire_values(
        w,
        cores,
        prices,
        need=need,
        delay=tuple(d.tolist()),
        model=model,
        lead=lead,
        single=timing.single_wait(w, model),
    )
    assert idle == want_idle
    assert np.array(after).tobytes() == want_after.tobytes()
    assert timing.mean_of(after) == float(want_after.mean())


def test_a_chained_or_spread_wait_is_not_single() -> None:
    assert timing.single_wait(np.full(N, 60.0), "age") == 60.0
    assert timing.single_wait(np.full(N, 60.0), "basic") is None  # chained: priced on arrays
    assert timing.single_wait(np.linspace(0.0, 60.0, N), "age") is None
    assert timing.single_wait(np.full(N, np.nan), "age") is None

"""The widths the search asks a new allocation at: the narrowest of each reach (``search._useful_widths``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.strategies import search, timing
from elastic.strategies.search import StagePlan, plan


def _plans(widths: list[int], besides: list[int] | None = None) -> list[StagePlan]:
    besides = besides or [0] * len(widths)
    pairs = zip(widths, besides, strict=True)
    return [StagePlan(f"s{i}", w, 600.0 + 60.0 * i, b) for i, (w, b) in enumerate(pairs)]


def _useful(stages: list[StagePlan]) -> list[list[int]]:
    n = len(stages)
    widest = [max(s.cores for s in stages[m:]) for m in range(n)]
    left = [tuple(sorted({s.cores for s in stages[m:]})) for m in range(n)]
    return search._useful_widths(stages, left, widest)


def _reach(stages: list[StagePlan], m: int, c: int) -> int:
    """The first stage after ``m`` a new allocation of ``c`` cores for ``m`` cannot be kept for."""
    widest = [max(s.cores for s in stages[k:]) for k in range(len(stages))]
    k = m + 1
    while k < len(stages) and stages[k].cores + stages[k].beside <= c <= widest[k]:
        k += 1
    return k


def test_a_chain_keeps_the_narrowest_width_of_each_reach() -> None:
    # from s0 (4 cores): 4 reaches s1 (2), not s2 (8); 8 reaches s2 and s3 (6), not s4 (28); 6 reaches
    # s1 only, as 4 does, so it is not searched; 28 reaches the end
    stages = _plans([4, 2, 8, 6, 28])
    assert _useful(stages)[0] == [4, 8, 28]
    assert _useful(stages)[4] == [28]


def test_a_sibling_beside_a_stage_needs_the_width_of_both() -> None:
    # s1 runs beside a 4-core sibling: an allocation keeps it only if it is 6 cores wide or more
    stages = _plans([4, 2, 8], besides=[0, 4, 0])
    assert _useful(stages)[0] == [4, 8]  # 4 reaches s0 only; 8 reaches s1 (2 + 4 <= 8) and s2


@settings(max_examples=200, deadline=None)
@given(
    widths=st.lists(st.integers(1, 28), min_size=1, max_size=12),
    besides=st.lists(st.integers(0, 6), min_size=12, max_size=12),
)
def test_every_width_left_out_has_a_narrower_one_kept_that_reaches_as_far(
    widths: list[int], besides: list[int]
) -> None:
    stages = _plans(widths, besides[: len(widths)])
    useful = _useful(stages)
    for m, s in enumerate(stages):
        candidates = sorted({t.cores for t in stages[m:] if t.cores >= s.cores})
        kept = useful[m]
        assert kept == sorted(kept) and set(kept) <= set(candidates)
        assert kept[0] == candidates[0]  # the narrowest is always searched
        reaches = [_reach(stages, m, c) for c in kept]
        assert len(set(reaches)) == len(reaches)  # no two kept widths reach as far
        for c in candidates:
            if c not in kept:
                assert any(k < c and _reach(stages, m, k) == _reach(stages, m, c) for k in kept)


@settings(max_examples=60, deadline=None)
@given(
    widths=st.lists(st.integers(1, 28), min_size=1, max_size=8),
    wait=st.floats(0.0, 20000.0),
    lead=st.floats(0.0, 7200.0),
    held=st.sampled_from([0, 4, 28]),
)
def test_with_one_wait_for_every_width_the_search_finds_the_same_cost_as_over_every_width(
    widths: list[int], wait: float, lead: float, held: int
) -> None:
    # The same wait whatever the width: a wider allocation reaching no further charges more for the same
    # stages and waits as long, so leaving it out changes no optimum (searched with no beam limit)
    stages = _plans(widths)
    prices = timing.Prices(beta=float(max(widths)))

    def waits(cores: int, follow_up: bool) -> np.ndarray:
        return np.full(len(timing.PROBS), wait)

    def every(
        stages: list[StagePlan], widths_left: list[tuple[int, ...]], widest_left: list[int]
    ) -> list[list[int]]:
        return [[c for c in widths_left[m] if c >= s.cores] for m, s in enumerate(stages)]

    kw = {"held": held, "lead": lead, "waits": waits, "prices": prices, "model": "age"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(search, "BEAM", 10_000)
        restricted, _ = plan(stages, **kw)  # type: ignore[arg-type]
        mp.setattr(search, "_useful_widths", every)
        full, _ = plan(stages, **kw)  # type: ignore[arg-type]
    assert restricted == pytest.approx(full, rel=1e-9, abs=1e-6)

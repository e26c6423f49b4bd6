"""The new plans the search does not make (``search._admitted``): those :func:`search._pareto` would drop.

Plans of one width and one delay after differ only by their charge; the search makes only those no plan
ranked before them charges as little as. These tests check that the plans kept per width are the same
as when every plan is made, ties of the rounded cost and equal orders included.
"""

from __future__ import annotations

from operator import attrgetter

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.strategies import search

RANKED = attrgetter("cost", "order")

# charges on a coarse grid, so that equal charges and costs that round alike are frequent
charges = st.integers(0, 40).map(lambda k: 1000.0 + k * 2.5e-7)
orders = st.tuples(st.integers(0, 5), st.booleans(), st.sampled_from([4, 8]))
delays = st.sampled_from([(0.0,) * 20, (60.0,) * 20, tuple(float(i) for i in range(20))])


def _plan(charged: float, delay: tuple[float, ...], order: tuple[int, bool, int], key: int) -> search._Path:
    mean = sum(delay) / len(delay)
    cost = round(charged + 28.0 * mean, 6)
    return search._Path(charged, delay, None, True, False, mean, key, order, 0, cost)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(charges, delays, orders), min_size=1, max_size=30))
def test_the_plans_kept_are_those_kept_when_every_plan_is_made(
    made: list[tuple[float, tuple[float, ...], tuple[int, bool, int]]],
) -> None:
    keys: dict[tuple[float, ...], int] = {}
    every = [_plan(c, d, o, keys.setdefault(d, len(keys))) for c, d, o in made]
    groups: dict[int, list[search._Path]] = {}
    for p in every:  # as the search makes them, one width: grouped by their delay after
        rivals = groups.get(p.key)
        if rivals is None:
            groups[p.key] = rivals = []
        elif not search._admitted(rivals, p.cost, p.order, p.charged):  # type: ignore[arg-type]
            continue
        rivals.append(p)
    admitted = [p for rivals in groups.values() for p in rivals]
    want = search._pareto(sorted(every, key=RANKED))
    got = search._pareto(sorted(admitted, key=RANKED))
    assert [id(p) for p in got] == [id(p) for p in want]


def test_a_plan_of_equal_cost_and_lower_order_is_kept_beside_a_cheaper_one() -> None:
    # the charges differ by less than the rounding: the dearer plan ranks first by its order, and the
    # cheaper one is not beaten by it, so both are kept; the search keeps both too
    delay = (0.0,) * 20
    cheaper = _plan(1000.0, delay, (3, True, 4), 0)
    dearer = _plan(1000.0 + 2.5e-7, delay, (1, True, 4), 0)
    assert cheaper.cost == dearer.cost
    rivals = [cheaper]
    assert search._admitted(rivals, dearer.cost, dearer.order, dearer.charged)
    assert rivals == [cheaper]
    assert search._pareto(sorted([cheaper, dearer], key=RANKED)) == [dearer, cheaper]


def test_a_plan_that_charges_more_at_a_higher_cost_is_not_made() -> None:
    delay = (0.0,) * 20
    rivals = [_plan(1000.0, delay, (3, True, 4), 0)]
    assert not search._admitted(rivals, round(1001.0, 6), (0, True, 4), 1001.0)
    cheaper = _plan(999.0, delay, (5, True, 4), 0)
    assert search._admitted(rivals, cheaper.cost, cheaper.order, cheaper.charged)
    assert rivals == []  # it beats the one made before: that one would be dropped

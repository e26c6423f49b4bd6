"""Properties of the placement rule (:func:`elastic.pool.placement.plan_placement`)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from elastic.pool.placement import Offer, plan_placement
from elastic.pool.tasks import Task

tasks_st = st.lists(
    st.builds(
        lambda i, c, e: Task.shell("true", cores=c, estimate=e, task_id=f"t{i}"),
        st.integers(0, 10**6),
        st.integers(1, 8),
        st.none() | st.floats(0, 1000),
    ),
    max_size=25,
    unique_by=lambda t: t.task_id,
)
offers_st = st.lists(
    st.builds(
        lambda i, f, r: Offer(f"ag{i}".encode(), f"a{i % 3}", f, r),
        st.integers(0, 50),
        st.integers(0, 16),
        st.floats(0, 1000),
    ),
    max_size=6,
    unique_by=lambda o: o.agent,
)


@given(tasks_st, offers_st, st.booleans())
def test_placement_invariants(tasks: list[Task], offers: list[Offer], can_wait: bool) -> None:
    plan = plan_placement(tasks, offers, lambda t: can_wait)
    placed = [t.task_id for t, _ in plan]
    assert len(placed) == len(set(placed)), "a task placed twice"
    assert placed == [t.task_id for t in tasks if t.task_id in set(placed)], "not oldest first"
    used = Counter()
    for task, offer in plan:
        used[offer.agent] += task.cores
    for offer in offers:
        assert used[offer.agent] <= offer.free, "an agent got more cores than it offered"
    free = {o.agent: o.free for o in offers}
    for task, offer in plan:
        need = task.estimate or 0.0
        if need > offer.remaining:
            # Only when no offer with free cores left has the time, and nothing else may take it.
            assert not can_wait
            assert all(o.remaining < need for o in offers if free[o.agent] >= task.cores)
        free[offer.agent] -= task.cores


@given(tasks_st, offers_st)
def test_nothing_waits_needlessly(tasks: list[Task], offers: list[Offer]) -> None:
    """Without another allocation to wait for, every task that fits some offer's free cores is placed
    unless earlier tasks used those cores."""
    plan = plan_placement(tasks, offers, lambda t: False)
    placed = {t.task_id for t, _ in plan}
    free = {o.agent: o.free for o in offers}
    for task, offer in plan:
        free[offer.agent] -= task.cores
    for task in tasks:
        if task.task_id not in placed:
            assert all(f < task.cores for f in free.values()), f"{task.task_id} could still start"


def test_best_fit_by_remaining_time() -> None:
    offers = [Offer(b"x", "long", 4, 900.0), Offer(b"y", "mid", 4, 120.0), Offer(b"z", "short", 4, 30.0)]
    tasks = [Task.shell("true", estimate=e, task_id=f"e{e:g}") for e in (100.0, 10.0, 500.0)]
    plan = plan_placement(tasks, offers, lambda t: True)
    assert [(t.task_id, o.alloc_id) for t, o in plan] == [("e100", "mid"), ("e10", "short"), ("e500", "long")]

"""The simulated execution's skipped placement passes place exactly as making every pass would.

:class:`~elastic.control.sim_execution.SimExecution` does not pass over its queue again, while nothing
changed, at a time it already placed nothing at, nor before the first time a comparison of that pass with
the clock could turn (``_placement_holds_until``). Random allocations, requests, tasks and losses, polled
every 30 s as run control does: the events are the same as with a pass at every poll.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.control.execution import TaskSpec
from elastic.control.sim_execution import SimExecution

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("task"), st.integers(1, 4), st.floats(10, 3000), st.floats(10, 3000)),
        st.tuples(st.just("alloc"), st.integers(1, 8), st.floats(100, 6000), st.floats(0, 60)),
        st.tuples(st.just("request"), st.integers(1, 8), st.floats(100, 6000), st.just(0.0)),
        st.tuples(st.just("end"), st.integers(0, 10), st.just(0.0), st.just(0.0)),
    ),
    max_size=30,
)


def _run(ops: list[tuple[Any, ...]], startup: float, *, skip: bool) -> list[tuple[object, ...]]:
    ex = SimExecution(startup=startup)
    if not skip:  # a pass at every poll: no promise past the pass's own time
        ex._placement_holds_until = lambda t: t  # type: ignore[method-assign]
    now, events, allocs = 0.0, [], []
    for i, (kind, n, x, y) in enumerate(ops):
        if kind == "task":
            ex.submit(TaskSpec(f"t{i}", f"s{i % 3}", i, cores=n, estimate=x, duration=y))
        elif kind == "alloc":
            ex.register(f"a{i}", n, x, f"s{i % 3}")
            ex.add_allocation(f"a{i}", n, now + x, now + y)
            allocs.append(f"a{i}")
        elif kind == "request":
            ex.register(f"r{i}", n, x, f"s{i % 3}")
        elif allocs:
            try:
                ex.allocation_ended(allocs.pop(n % len(allocs)), now, AllocationState.CANCELLED)
            except Exception as exc:  # retries exhausted: the same in both
                events.append(("raised", type(exc).__name__))
                break
            ex.decided()
        for _ in range(20):  # polls, every 30 s, as run control makes them
            now += 30.0
            events += [(e.time, e.kind, e.allocation, e.task) for e in ex.advance(now)]
    return events


@settings(max_examples=60, deadline=None)
@given(_ops, st.sampled_from([0.0, 45.0]))
def test_skipped_passes_place_as_every_pass(ops: list[tuple[Any, ...]], startup: float) -> None:
    assert _run(ops, startup, skip=True) == _run(ops, startup, skip=False)

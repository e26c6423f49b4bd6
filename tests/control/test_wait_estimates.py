"""What a paced decision asked of the scheduler's estimate, asked again (``WaitEstimates.still``)."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from elastic.batch import JobSpec
from elastic.control.scheduler import ESTIMATE_TTL, WaitEstimates


class _Queue:
    """A backend's clock and estimate: each geometry starts at a set time (None: cannot say)."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.starts: dict[tuple[int, float], float | None] = {}
        self.asked = 0

    def now(self) -> float:
        return self.clock

    def expected_start(self, spec: JobSpec) -> float | None:
        self.asked += 1
        return self.starts[spec.cores, spec.walltime]


def _estimates(queue: _Queue) -> WaitEstimates:
    return WaitEstimates(queue, None, lambda _a: None)  # type: ignore[arg-type]


def test_the_same_start_times_are_the_same_answers_and_a_moved_one_is_not() -> None:
    queue = _Queue()
    queue.starts = {(4, 600.0): 1000.0, (8, 600.0): 5000.0, (2, 60.0): None}
    waits = _estimates(queue)
    waits.record()
    assert waits(4, 600.0) == 1000.0 and waits(8, 600.0) == 5000.0 and waits(2, 60.0) is None
    asked = waits.read()
    assert set(asked) == {(4, 600.0, ()), (8, 600.0, ()), (2, 60.0, ())}
    queue.clock = 300.0  # the queue changed, and the jobs would start when they would have
    assert waits.still(asked)
    queue.clock = 1200.0  # the first is due: a wait of 0 then and now
    assert waits.still(asked)
    queue.starts[8, 600.0] = 5300.0  # one moved
    assert not waits.still(asked)
    queue.starts[8, 600.0] = 5000.0
    queue.starts[2, 60.0] = 2000.0  # one that could not be said now can
    assert not waits.still(asked)


def test_still_asks_afresh_within_the_cache_and_leaves_the_answers_cached() -> None:
    queue = _Queue()
    queue.starts = {(4, 600.0): 1000.0}
    waits = _estimates(queue)
    waits.record()
    waits(4, 600.0)
    asked = waits.read()
    queue.clock = ESTIMATE_TTL / 2  # within the cache's time: still must not read the cache
    queue.starts[4, 600.0] = 900.0
    assert not waits.still(asked)
    count = queue.asked
    assert waits(4, 600.0) == 900.0 - queue.clock and queue.asked == count  # a decision now reuses it


@given(
    start=st.floats(0.0, 1e6),
    asked_at=st.floats(0.0, 1e6),
    later=st.floats(0.0, 1e6),
    moved=st.floats(-1e5, 1e5).filter(lambda x: abs(x) > 1e-3),
)
def test_a_start_is_the_same_answer_at_any_later_time_and_a_moved_one_is_not(
    start: float, asked_at: float, later: float, moved: float
) -> None:
    queue = _Queue()
    queue.clock = asked_at
    queue.starts = {(1, 60.0): start}
    waits = _estimates(queue)
    waits.record()
    waits(1, 60.0)
    asked = waits.read()
    queue.clock = asked_at + later
    assert waits.still(asked)
    queue.starts[1, 60.0] = start + moved
    # a move is seen unless both starts are already past (a wait of 0 either way; the answers are
    # compared to a microsecond, and a case that close to it is left out)
    latest = max(start, start + moved)
    assume(abs(latest - (queue.clock + 1e-6)) > 1e-7)
    assert waits.still(asked) is (latest <= queue.clock + 1e-6)

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.allocations import LEGAL_TRANSITIONS, Allocation, AllocationState, IllegalTransitionError
from elastic.batch import JobState
from elastic.errors import ConfigError

S = AllocationState


def test_life_cycle_stamps_start_and_end() -> None:
    a = Allocation("a1", cores=4, walltime=100.0, stage="s1", submit_time=10.0)
    a = a.transition(S.RUNNING, at=15.0)
    assert (a.start_time, a.end_time, a.walltime_end) == (15.0, None, 115.0)
    assert a.remaining(40.0) == 75.0
    a = a.transition(S.DRAINING, at=100.0)
    assert a.start_time == 15.0 and a.state.is_live
    a = a.transition(S.TIMEOUT, at=115.0)
    assert (a.state, a.end_time, a.remaining(116.0)) == (S.TIMEOUT, 115.0, 0.0)
    assert a.core_seconds(999.0) == 4 * 100.0


def test_illegal_transition_names_both_states() -> None:
    a = Allocation("a1", cores=1, walltime=10.0).transition(S.CANCELLED, at=1.0)
    with pytest.raises(
        IllegalTransitionError, match=r"'a1': illegal transition CANCELLED -> RUNNING"
    ) as info:
        a.transition(S.RUNNING, at=2.0)
    assert (info.value.old, info.value.new) == (S.CANCELLED, S.RUNNING)
    with pytest.raises(
        IllegalTransitionError, match="may go to: CANCELLED, COMPLETED, FAILED, RUNNING, TIMEOUT"
    ):
        Allocation("a2", cores=1, walltime=10.0).transition(S.DRAINING, at=0.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cores": 0}, "cores must be >= 1"),
        ({"walltime": 0.0}, "walltime must be > 0"),
        ({"nodes": 5}, r"nodes must be None or 1..cores=4"),
        ({"alloc_id": ""}, "alloc_id must be a non-empty"),
    ],
)
def test_bad_allocation_fields(kwargs: dict[str, object], match: str) -> None:
    fields: dict[str, object] = {"alloc_id": "a", "cores": 4, "walltime": 10.0, **kwargs}
    with pytest.raises(ConfigError, match=match):
        Allocation(**fields)  # type: ignore[arg-type]


def test_job_states_translate() -> None:
    assert AllocationState.from_job_state(JobState.TIMEOUT) is S.TIMEOUT
    assert AllocationState.from_job_state(JobState.PENDING) is S.REQUESTED
    with pytest.raises(ConfigError, match="UNKNOWN has no allocation state"):
        AllocationState.from_job_state(JobState.UNKNOWN)


@given(st.lists(st.tuples(st.sampled_from(list(S)), st.floats(0, 1e6)), max_size=12))
def test_transitions_follow_the_table(steps: list[tuple[AllocationState, float]]) -> None:
    """Any sequence of requests: legal ones apply, illegal ones raise and change nothing; times never move."""
    a = Allocation("a", cores=2, walltime=50.0)
    first_start: float | None = None
    for new, at in steps:
        if new in LEGAL_TRANSITIONS[a.state]:
            old_state = a.state
            a = a.transition(new, at)
            assert a.state is new
            if first_start is None and a.start_time is not None:
                first_start = a.start_time
            assert a.start_time == first_start
            assert (a.end_time is not None) == new.is_final
            assert not old_state.is_final
        else:
            with pytest.raises(IllegalTransitionError):
                a.transition(new, at)
    if a.state.is_final:
        assert all(s not in LEGAL_TRANSITIONS[a.state] for s in S)

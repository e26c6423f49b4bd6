"""The submission-rate cap (:mod:`elastic.control.rate`): never faster than documented (issue 31)."""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.backends.mock import MockBackend
from elastic.control.rate import MAX_BURST, MAX_PER_MINUTE, SubmissionRate
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError
from elastic.strategies.actions import Decision, Submit
from elastic.strategies.base import RunView
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow

asks = st.lists(
    st.tuples(st.floats(0.0, 120.0, allow_nan=False), st.integers(1, 6), st.booleans()), max_size=60
)


@given(asks, st.floats(1.0, 120.0), st.integers(1, 8))
def test_no_window_holds_more_jobs_than_the_burst_and_the_rate_allow(
    moves: list[tuple[float, int, bool]], per_minute: float, burst: int
) -> None:
    rate, now, let = SubmissionRate(per_minute=per_minute, burst=burst), 0.0, []
    for gap, jobs, fail in moves:
        now += gap
        jobs = min(jobs, burst)  # wider requests may overdraw once; checked apart below
        if rate.allow(now, jobs):
            let.extend([now] * jobs)
        else:
            assert rate.retry_at is not None and rate.retry_at > now  # a held request is told when
        if fail:
            rate.ended(now, failed=True, ran=True)
    for i, start in enumerate(let):
        in_window = [t for t in let[i:] if t >= start]
        for j, end in enumerate(in_window):
            assert j + 1 <= burst + per_minute * (end - start) / 60.0 + 1e-6


def test_a_request_wider_than_the_bucket_waits_for_a_full_one_and_leaves_it_in_debt() -> None:
    rate = SubmissionRate(per_minute=60, burst=4)
    assert rate.allow(0.0, 2)
    assert not rate.allow(0.0, 10) and rate.retry_at == 2.0  # two more tokens: 2 s at one a second
    assert rate.allow(2.0, 10)
    assert not rate.allow(2.0) and rate.retry_at == 9.0  # 6 in debt, plus the one asked for
    assert rate.submitted == 12 and rate.held == 2


def test_failures_back_off_in_steps_and_a_run_that_works_resets_them() -> None:
    rate = SubmissionRate(per_minute=600, burst=10, failure_delays=(0.0, 30.0, 120.0))
    rate.ended(0.0, failed=True, ran=True)
    assert not rate.allow(10.0) and rate.retry_at == 30.0
    assert rate.allow(30.0)
    rate.ended(40.0, failed=True, ran=False)
    rate.ended(41.0, failed=True, ran=True)  # three in a row: the last delay, for good
    assert not rate.allow(100.0) and rate.retry_at == 161.0
    assert rate.allow(161.0) and not rate.allow(200.0)
    rate.ended(250.0, failed=False, ran=False)  # cancelled in the queue: neither
    assert rate.failures == 3
    rate.ended(260.0, failed=False, ran=True)  # ran and ended by itself: back to the plain rate
    assert rate.failures == 0 and rate.allow(260.0)


def test_pending_forgets_a_request_nobody_makes_again() -> None:
    rate = SubmissionRate(per_minute=6, burst=1)
    assert rate.allow(0.0) and not rate.allow(1.0)
    assert rate.pending(5.0) == 10.0
    assert rate.pending(10.0) is None and rate.retry_at is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"per_minute": 0}, r"per_minute must be in \(0, 600\] jobs a minute, got 0"),
        ({"per_minute": MAX_PER_MINUTE * 2}, r"per_minute must be in \(0, 600\]"),
        ({"per_minute": math.nan}, "per_minute must be a finite number"),
        ({"per_minute": "30"}, "per_minute must be a finite number, got '30'"),
        ({"burst": 0}, rf"burst must be an integer in \[1, {MAX_BURST}\], got 0"),
        ({"burst": 2.5}, "burst must be an integer"),
        ({"failure_delays": ()}, "must start with 0"),
        ({"failure_delays": (5.0,)}, "must start with 0"),
        ({"failure_delays": (0.0, 60.0, 30.0)}, "must not decrease"),
        ({"failure_delays": (0.0, 1e9)}, r"at most 86400 s"),
        ({"failure_delays": "0,1"}, "a sequence of seconds"),
    ],
)
def test_limits_are_checked_up_front_with_the_limit_in_the_message(
    kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        SubmissionRate(**kwargs)  # type: ignore[arg-type]


def test_a_bad_job_count_is_refused() -> None:
    with pytest.raises(ConfigError, match="jobs must be an integer >= 1, got 0"):
        SubmissionRate().allow(0.0, 0)


class Runaway:
    """A broken strategy: asks for a new allocation at every step, every 0.5 s."""

    name = "runaway"

    def decide(self, view: RunView) -> Decision:
        return Decision((Submit("s", cores=1, walltime=60.0),), wake_at=view.now + 0.5)


def test_allocation_control_holds_a_runaway_strategy_to_the_documented_rate() -> None:
    # the mock backend's virtual clock; the stage never completes, so the run ends at max_duration
    workflow = Workflow("w", (Stage("s", tasks=1, cores=1, runtime=1e6),))
    backend = MockBackend(nodes=4)
    runner = Runner(
        workflow,
        Runaway(),
        backend,
        SimExecution(),
        Knowledge(workflow),
        max_duration=120.0,
        poll_interval=1.0,
    )
    runner.run()
    rate = runner.controller.rate
    submits = sorted(a.submit_time or 0.0 for a in runner.controller.allocations)
    assert rate.held > 0, "the runaway strategy was never held back"
    # 120 s at 30 a minute after a burst of 30: at most 90, against 240 asks
    assert len(submits) <= rate.burst + rate.per_minute * 120.0 / 60.0 + 1
    assert len(submits) >= rate.burst  # the cap slows, it does not stop
    first_minute = [t for t in submits if t < submits[0] + 60.0]
    assert len(first_minute) <= rate.burst + rate.per_minute


def test_a_token_short_only_by_float_rounding_is_there() -> None:
    # found by the property above: 60 s at one a minute refilled 0.9999999999999999 of a token, the
    # request was refused and told to retry at ``now`` itself
    rate = SubmissionRate(per_minute=1.0, burst=1)
    assert rate.allow(68.69733531049509)
    assert rate.allow(68.69733531049509 + 60.0)
    assert not rate.allow(68.69733531049509 + 61.0)
    assert rate.retry_at is not None and rate.retry_at > 68.69733531049509 + 61.0


def test_an_allocation_that_ends_does_not_forget_a_request_held_for_tokens() -> None:
    rate = SubmissionRate(per_minute=6, burst=2)  # one token every 10 s
    assert rate.allow(0.0) and rate.allow(0.0) and not rate.allow(0.0)
    assert rate.retry_at == 10.0
    rate.ended(5.0, failed=False, ran=True)  # ends the back-off after failures, not the bucket's wait
    assert rate.retry_at == 10.0 and rate.pending(5.0) == 10.0
    # held by the back-off alone: an allocation that ran lets it go at once
    backed = SubmissionRate(per_minute=60, burst=4)
    assert backed.allow(0.0)
    backed.ended(1.0, failed=True, ran=True)  # 30 s between submissions now
    assert not backed.allow(2.0) and backed.retry_at == 31.0
    backed.ended(3.0, failed=False, ran=True)
    assert backed.retry_at is None and backed.allow(3.0)


@given(
    st.lists(
        st.tuples(st.floats(0.0, 20.0, allow_nan=False), st.integers(1, 5), st.booleans()),
        max_size=40,
    ),
    st.floats(1.0, 120.0),
    st.integers(1, 8),
)
def test_a_held_request_is_told_when_it_may_go(
    moves: list[tuple[float, int, bool]], per_minute: float, burst: int
) -> None:
    # whenever a request is held back and the cap names no time for it, it may go now (allocations
    # that ran end in between; after a failure the back-off grows, and the next ask names a new time)
    rate, now, held = SubmissionRate(per_minute=per_minute, burst=burst), 0.0, 0
    for gap, jobs, ended in moves:
        now += gap
        if ended:
            rate.ended(now, failed=False, ran=True)
        if held and rate.pending(now) is None:
            probe = copy.deepcopy(rate)
            assert probe.allow(now, held), (now, held)
        if rate.allow(now, jobs):
            held = 0
        elif not held:
            held = jobs

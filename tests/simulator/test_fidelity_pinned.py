"""Pinned jobs and the PinnedBackfill policy: known answers on hand-made workloads, and invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic.batch import DependencyKind
from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.engine import Engine
from elastic.simulator.expected import expected_start
from elastic.simulator.jobs import CANCELLED, COMPLETED, TIMEOUT
from elastic.simulator.pinned import PinnedBackfill
from elastic.simulator.workload import Workload


def pins(
    rows: list[tuple[float, int, float, float]], processors: int, users: list[int] | None = None
) -> Workload:
    """Rows of (submit, cores, walltime, runtime)."""
    arr = np.array(rows, dtype=np.float64).reshape(len(rows), 4)
    n = len(rows)
    return Workload(
        job_id=np.arange(101, 101 + n, dtype=np.int64),
        submit=arr[:, 0].copy(),
        cores=arr[:, 1].astype(np.int64),
        walltime=arr[:, 2].copy(),
        runtime=arr[:, 3].copy(),
        user=np.array(users if users is not None else [-1] * n, dtype=np.int64),
        recorded_wait=np.zeros(n),
        processors=processors,
        source="hand-made pins",
    )


def engine(nodes: int = 4, **kw: object) -> Engine:
    return Engine(nodes=nodes, policy=PinnedBackfill(**kw))  # type: ignore[arg-type]


def test_queued_jobs_plan_around_a_pinned_job() -> None:
    eng = engine()
    (p,) = eng.pin(pins([(0.0, 3, 50.0, 50.0)], 4), [10.0])  # 3 of 4 cores in [10, 60)
    a = eng.submit(cores=2, walltime=20.0)  # overlaps the pin: waits for its end
    b = eng.submit(cores=2, walltime=10.0, runtime=10.0)  # ends exactly when the pin starts
    c = eng.submit(cores=1, walltime=100.0)  # beside the pin all along
    eng.run()
    assert (eng.jobs.start[a], eng.jobs.start[b], eng.jobs.start[c]) == (60.0, 0.0, 0.0)
    assert (eng.jobs.start[p], eng.jobs.end[p], eng.jobs.state[p]) == (10.0, 60.0, COMPLETED)
    rec = eng.records().set_index("index")
    assert rec.loc[p, "begin"] == 10.0 and rec.loc[p, "submit"] == 0.0 and rec.loc[p, "wait"] == 10.0


def test_pinned_job_that_ran_past_its_request_ends_timeout_at_its_recorded_end() -> None:
    eng = engine()
    (p,) = eng.pin(pins([(0.0, 1, 10.0, 25.0)], 4), [5.0])
    eng.run()
    assert (eng.jobs.end[p], eng.jobs.state[p]) == (30.0, TIMEOUT)


def test_early_end_compresses_the_plan() -> None:
    eng = engine()
    eng.pin(pins([(0.0, 4, 10.0, 10.0)], 4), [200.0])
    a = eng.submit(cores=3, walltime=100.0, runtime=10.0)
    b = eng.submit(cores=3, walltime=10.0, runtime=10.0)  # planned at 100, moves to 10 when a ends
    c = eng.submit(cores=3, walltime=150.0, runtime=1.0)  # planned after the pin, then before it
    eng.run()
    assert [eng.jobs.start[j] for j in (a, b, c)] == [0.0, 10.0, 20.0]
    assert eng.policy.reservations == {a: 0.0, b: 100.0, c: 210.0}


def test_cancelled_running_job_gives_its_cores_back() -> None:
    eng = engine()
    a = eng.submit(cores=4, walltime=100.0)
    b = eng.submit(cores=2, walltime=10.0)
    eng.run(until=30.0)
    eng.cancel(a)
    assert eng.jobs.state[a] == CANCELLED and eng.jobs.start[b] == 30.0


def test_chain_waits_for_the_users_pinned_job() -> None:
    eng = Engine(nodes=4, policy=PinnedBackfill(chain={1: 0}))
    (p,) = eng.pin(pins([(0.0, 1, 5.0, 5.0)], 4), [50.0])
    a = eng.submit(cores=1, walltime=10.0, runtime=10.0)  # chained after the pin
    assert (p, a) == (0, 1)
    eng.run()
    assert eng.jobs.start[a] == 50.0


def test_chain_follows_a_planned_predecessor_and_without_chain_nothing_waits() -> None:
    # b is chained after a, which waits for the pin; b itself would fit at once.
    for chain, expect in (({2: 1}, 40.0), (None, 0.0)):
        eng = Engine(nodes=4, policy=PinnedBackfill(chain=chain))
        eng.pin(pins([(0.0, 3, 40.0, 40.0)], 4), [0.0])
        eng.submit(cores=2, walltime=10.0, runtime=10.0)
        b = eng.submit(cores=1, walltime=10.0, runtime=10.0)
        eng.run()
        assert eng.jobs.start[b] == expect


def test_reserve_holds_cores_back() -> None:
    eng = engine(reserve=2)
    a = eng.submit(cores=2, walltime=10.0, runtime=10.0)
    b = eng.submit(cores=1, walltime=10.0, runtime=10.0)  # 2 cores free, but reserved
    eng.run()
    assert (eng.jobs.start[a], eng.jobs.start[b]) == (0.0, 10.0)
    with pytest.raises(ConfigError, match="reserve=2"):
        engine(reserve=2).submit(cores=3, walltime=1.0)


def test_fcfs_order_never_lets_a_later_job_start_first() -> None:
    for order, expect in (("conservative", 0.0), ("fcfs", 60.0)):
        eng = engine(order=order)
        eng.pin(pins([(0.0, 3, 50.0, 50.0)], 4), [10.0])
        eng.submit(cores=2, walltime=20.0)  # slot at 60
        b = eng.submit(cores=1, walltime=5.0)
        eng.run()
        assert eng.jobs.start[b] == expect, order


def test_probe_answers_the_next_slot() -> None:
    eng = engine()
    eng.pin(pins([(0.0, 3, 50.0, 50.0)], 4), [10.0])
    a = eng.submit(cores=2, walltime=20.0)
    pol = eng.policy
    assert isinstance(pol, PinnedBackfill)
    assert pol.probe(eng, 1, 5.0) == 0.0
    assert pol.probe(eng, 3, 5.0) == 0.0  # ends before the pin starts
    assert pol.probe(eng, 2, 20.0) == 60.0  # beside a's slot [60, 80)
    assert pol.probe(eng, 3, 20.0) == 80.0  # after a's slot
    assert pol.probe(eng, 1, 5.0, dependencies=[(DependencyKind.AFTEROK, a)]) == 80.0
    assert pol.probe(eng, 1, 5.0, begin=70.0) == 70.0
    # The public what-if answer (sbatch --test-only) asks the same plan: a what-if copy of the engine
    # would not see the pinned job and answer 0 for 2 cores x 20 s.
    assert expected_start(eng, cores=2, walltime=20.0) == 60.0
    assert expected_start(eng, cores=1, walltime=5.0, begin=70.0) == 70.0


def test_pin_refuses_bad_input() -> None:
    with pytest.raises(ConfigError, match="pinned jobs need a policy"):
        Engine(nodes=4).pin(pins([(0.0, 1, 5.0, 5.0)], 4), [0.0])
    with pytest.raises(ConfigError, match="before its submit time"):
        engine().pin(pins([(10.0, 1, 5.0, 5.0)], 4), [5.0])
    with pytest.raises(ConfigError, match="one time per job"):
        engine().pin(pins([(0.0, 1, 5.0, 5.0)], 4), [0.0, 1.0])
    with pytest.raises(UnknownNameError, match="order"):
        PinnedBackfill(order="easy")
    with pytest.raises(ConfigError, match="reserve must be >= 0"):
        PinnedBackfill(reserve=-1)


def test_jobs_pinned_later_are_planned_around() -> None:
    eng = engine()
    a = eng.submit(cores=1, walltime=100.0)
    eng.run(until=10.0)
    eng.pin(pins([(10.0, 2, 10.0, 10.0)], 4), [20.0])  # 2 cores in [20, 30)
    b = eng.submit(cores=2, walltime=20.0)  # would overlap the new pin beside a: waits for 30
    c = eng.submit(cores=1, walltime=10.0)  # fits before it
    eng.run(until=200.0)
    assert (eng.jobs.start[a], eng.jobs.start[b], eng.jobs.start[c]) == (0.0, 30.0, 10.0)


# -- invariants ------------------------------------------------------------------------------------

pin_st = st.tuples(st.integers(0, 60), st.integers(0, 40), st.integers(1, 6), st.integers(0, 40))
# Usable size steps (time, cores); the last step gives the whole machine back so every job can run.
cap_st = st.lists(st.tuples(st.integers(1, 100), st.integers(0, 6)), max_size=4, unique_by=lambda x: x[0])
fg_st = st.tuples(
    st.integers(0, 60), st.integers(1, 6), st.integers(1, 40), st.integers(0, 60), st.integers(0, 3)
)


def _feasible_pins(
    pin_rows: list[tuple[int, int, int, int]], total: int
) -> list[tuple[float, int, float, float]]:
    """Keep the drawn pinned jobs, in order, that fit ``total`` cores: ``(start, cores, runtime, submit)``."""
    kept: list[tuple[float, int, float, float]] = []

    def used_at(t: float) -> int:
        return sum(c for s, c, r, _ in kept if s <= t < s + r)

    for submit, delay, cores, run in pin_rows:
        start = float(submit + delay)
        # The peak over [start, start + run) is at its start or at a kept start inside it.
        points = [start] + [s for s, *_ in kept if start <= s < start + run]
        if run == 0 or max(used_at(t) for t in points) + cores <= total:  # empty: holds no cores
            kept.append((start, cores, float(run), float(submit)))
    return kept


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(pin_st, max_size=12),
    st.lists(fg_st, min_size=1, max_size=12),
    st.integers(0, 2),
    st.sampled_from(["conservative", "fcfs"]),
    st.booleans(),
    cap_st,
    st.booleans(),
    st.none() | st.lists(st.integers(-2, 0), min_size=12, max_size=12),
)
def test_never_over_allocates_and_respects_pins_chain_reserve_and_capacity(
    pin_rows: list[tuple[int, int, int, int]],
    fg_rows: list[tuple[int, int, int, int, int]],
    reserve: int,
    order: str,
    chained: bool,
    steps: list[tuple[int, int]],
    trace_jobs: bool,
    classes: list[int] | None,
) -> None:
    total = 6
    steps = sorted(steps)
    cap_t = [float(t) for t, _ in steps] + [200.0]
    cap_c = [c for _, c in steps] + [total]
    kept = _feasible_pins(pin_rows, total)
    fg = sorted(fg_rows)
    users = [u for *_, u in fg]
    chain: dict[int, int] = {}
    if chained:
        last: dict[int, int] = {}
        for i, u in enumerate(users):
            if u in last:
                chain[i] = last[u]
            last[u] = i
    fg_w = Workload(
        job_id=np.arange(len(fg), dtype=np.int64),
        submit=np.array([float(s) for s, *_ in fg]),
        cores=np.array([min(c, total - reserve) for _, c, *_ in fg], dtype=np.int64),
        walltime=np.array([float(w) for _, _, w, *_ in fg]),
        runtime=np.array([float(r) for *_, r, _ in fg]),
        user=np.array(users, dtype=np.int64),
        recorded_wait=np.full(len(fg), np.nan),
        processors=total,
        source="fg",
    )
    policy = PinnedBackfill(
        order=order,
        reserve=reserve,
        chain=chain,
        capacity=(cap_t, cap_c),
        trace_jobs=len(fg) if trace_jobs else 0,  # planned for their runtime
        priority=None if classes is None else dict(enumerate(classes[: len(fg)])),  # issue 11
    )
    eng = Engine(nodes=total, policy=policy, workload=fg_w)
    if kept:
        eng.pin(pins([(sub, c, r, r) for _, c, r, sub in kept], total), [s for s, *_ in kept])
    eng.run()  # a pinned job that found its cores taken would raise here
    rec = eng.records()
    assert len(rec) == len(fg) + len(kept)
    assert rec["state"].isin(["COMPLETED", "TIMEOUT"]).all()
    n_fg = len(fg)
    start, end, cores = eng.jobs.start, eng.jobs.end, eng.jobs.cores

    def busy(idx: range, t: float) -> int:
        return sum(cores[j] for j in idx if start[j] <= t < end[j])

    def usable(t: float) -> int:
        k = int(np.searchsorted(cap_t, t, side="right")) - 1
        return cap_c[k] if k >= 0 else total

    fg_idx, pin_idx = range(n_fg), range(n_fg, len(rec))
    for t in set(start) | set(cap_t):
        fg_used = busy(fg_idx, t)
        pinned = busy(pin_idx, t)
        assert pinned + fg_used <= total
        if fg_used:  # queued jobs only ever get what the capacity and reserve leave beside the pins
            assert pinned + fg_used <= usable(t) - reserve
    assert [start[j] for j in pin_idx] == [s for s, *_ in kept]
    assert all(start[j] >= fg_w.submit[j] for j in fg_idx)
    for child, parent in chain.items():
        assert start[child] >= start[parent]
    if order == "fcfs" and classes is None:  # fg jobs are in queue order already (sorted by submit)
        assert [start[j] for j in fg_idx] == sorted(start[j] for j in fg_idx)


def test_zero_second_pinned_job_holds_no_cores() -> None:
    # SDSC-BLUE records 256-core jobs that ran 0 s; pinned while every core is busy, they used to stop
    # the run with "invariant broken".
    eng = engine(4)
    a = eng.submit(cores=4, walltime=100.0, runtime=100.0)
    eng.pin(pins([(0.0, 4, 0.0, 0.0)], 4), [50.0])
    eng.run()
    assert eng.jobs.start[a] == 0.0
    z = len(eng.jobs) - 1
    assert (eng.jobs.start[z], eng.jobs.end[z], eng.jobs.state[z]) == (50.0, 50.0, COMPLETED)


def test_whole_node_job_waits_for_an_idle_node_without_taking_promised_cores() -> None:
    # 2 nodes x 2 cores. At 20 two cores are free by count but on different nodes, so the whole-node
    # job b cannot start in its slot; it starts only when a node is idle and its walltime fits before
    # the next pinned job.
    eng = Engine(nodes=2, cores_per_node=2, policy=PinnedBackfill())
    eng.pin(
        pins([(0.0, 1, 100.0, 100.0), (0.0, 1, 20.0, 20.0), (0.0, 2, 30.0, 30.0)], 4),
        [0.0, 0.0, 105.0],  # node 0 busy [0, 100) and [0, 20); 2 cores [105, 135)
    )
    eng.run(until=10.0)
    a = eng.submit(cores=1, walltime=100.0, runtime=100.0)  # [10, 110) on node 1
    eng.run(until=15.0)
    b = eng.submit(cores=2, nodes=1, walltime=10.0, runtime=10.0)
    eng.run()  # a pinned job finding its cores taken would raise
    assert eng.jobs.start[a] == 10.0
    assert eng.policy.reservations[b] == 20.0
    # At 100 node 0 is idle, but [100, 110) would overlap the pin at 105 beside a: b runs after it.
    assert eng.jobs.start[b] == 135.0


online_st = st.tuples(
    st.integers(0, 60),  # submit time
    st.integers(1, 4),  # cores
    st.booleans(),  # whole nodes instead of cores
    st.integers(1, 40),  # walltime
    st.one_of(st.none(), st.integers(0, 60)),  # runtime (None: until walltime)
    st.one_of(st.none(), st.integers(0, 80)),  # cancel after this long
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(pin_st, max_size=10),
    st.lists(online_st, min_size=1, max_size=10),
    st.sampled_from([1, 2]),
    st.integers(0, 1),
)
def test_online_submits_cancels_and_whole_nodes_never_take_pinned_cores(
    pin_rows: list[tuple[int, int, int, int]],
    jobs: list[tuple[int, int, bool, int, int | None, int | None]],
    cpn: int,
    reserve: int,
) -> None:
    total = 6
    kept = _feasible_pins(pin_rows, total)
    eng = Engine(nodes=total // cpn, cores_per_node=cpn, policy=PinnedBackfill(reserve=reserve))
    if kept:
        eng.pin(pins([(sub, c, r, r) for _, c, r, sub in kept], total), [s for s, *_ in kept])
    actions = sorted(
        [(float(s), 0, k) for k, (s, *_) in enumerate(jobs)]
        + [(float(s + cancel), 1, k) for k, (s, *_, cancel) in enumerate(jobs) if cancel is not None]
    )
    index: dict[int, int] = {}
    for t, kind, k in actions:
        eng.run(until=t)  # a pinned job that found its cores taken would raise here
        if kind == 0:
            _, cores, whole, wall, run, _ = jobs[k]
            cap = total - reserve
            if whole and cpn > 1:
                nodes = max(1, min(cores, cap // cpn))
                index[k] = eng.submit(cores=1, nodes=nodes, walltime=wall, runtime=run)
            else:
                index[k] = eng.submit(cores=min(cores, cap), walltime=wall, runtime=run)
        elif k in index:
            eng.cancel(index[k])
    eng.run()
    start, end, cores, state = eng.jobs.start, eng.jobs.end, eng.jobs.cores, eng.jobs.state
    n_pin = len(kept)
    assert [start[j] for j in range(n_pin)] == [s for s, *_ in kept]
    assert all(state[j] in (COMPLETED, TIMEOUT, CANCELLED) for j in range(len(eng.jobs)))
    ran = [j for j in range(len(eng.jobs)) if start[j] == start[j]]
    for t in {start[j] for j in ran}:
        busy = [j for j in ran if start[j] <= t < end[j]]
        fg_used = sum(cores[j] for j in busy if j >= n_pin)
        pin_used = sum(cores[j] for j in busy if j < n_pin)
        assert pin_used + fg_used <= (total - reserve if fg_used else total)


def test_slots_that_pass_unused_are_planned_again() -> None:
    # Found by hypothesis: pinned 1-core jobs fragment 3 nodes x 2 cores until 4; the 2-node job a
    # cannot start in its slot (3, by core count), and b's slot (5) followed a's old one. Everything is
    # planned again at 4: a runs [4, 6), b after it.
    eng = Engine(nodes=3, cores_per_node=2, policy=PinnedBackfill())
    eng.pin(pins([(0.0, 1, 3.0, 3.0), (0.0, 1, 4.0, 4.0), (0.0, 1, 4.0, 4.0)], 6), [0.0, 0.0, 0.0])
    a = eng.submit(cores=1, nodes=2, walltime=2.0)
    b = eng.submit(cores=1, nodes=2, walltime=1.0)
    eng.run()
    assert eng.policy.reservations == {a: 3.0, b: 5.0}
    assert (eng.jobs.start[a], eng.jobs.start[b]) == (4.0, 6.0)
    assert (eng.jobs.state[a], eng.jobs.state[b]) == (TIMEOUT, TIMEOUT)


def test_shorten_plans_a_queued_job_again_for_its_new_walltime() -> None:
    eng = engine()
    eng.pin(pins([(0.0, 3, 50.0, 50.0)], 4), [10.0])  # 3 of 4 cores in [10, 60)
    a = eng.submit(cores=2, walltime=20.0)  # overlaps the pin: planned at its end
    eng.run(until=1.0)
    assert eng.jobs.start[a] != eng.jobs.start[a]  # NaN: not started
    assert eng.shorten(a, 8.0)  # now ends before the pin starts: it goes at once
    eng.run()
    assert eng.jobs.start[a] == 1.0 and eng.jobs.end[a] == 9.0

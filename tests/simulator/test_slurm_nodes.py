"""The ``slurm-nodes`` policy: Slurm 22.05's backfill planned node by node (one-core nodes)."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.simulator.conservative import SlurmBackfill, will_run_releases
from elastic.simulator.engine import Engine
from elastic.simulator.jobs import PENDING
from elastic.simulator.slurm_nodes import (
    SlurmNodeBackfill,
    add_reservation,
    best_fit,
    lowest,
    will_run_groups,
)

#: The first 24 jobs of the HPC2N window replayed on the local Slurm cluster (64 one-CPU nodes, K = 60):
#: (submit s, cores, limit min, ran s). At 74 s nine 10-core jobs wait and 4 nodes are idle; the 2-core
#: 4-minute job submitted then waited 71 s on Slurm (twice: the replay and a short BackfillMap rerun,
#: whose map showed every 10-CPU reservation holding 10 busy nodes and one idle node, e.g. n[1-11]).
HPC2N_START = [
    (0, 1, 1, 2.0), (0, 9, 4, 233.0), (0, 2, 4, 239.0), (50, 2, 4, 238.0), (54, 9, 4, 239.0),
    (55, 6, 4, 239.0), (56, 2, 1, 11.0), (59, 9, 4, 238.0), (61, 9, 4, 238.0), (65, 2, 1, 9.0),
    (67, 10, 4, 2.0), (68, 2, 2, 70.0), (73, 2, 1, 11.0), (73, 10, 4, 238.0), (73, 10, 4, 238.0),
    (73, 10, 4, 238.0), (73, 10, 4, 238.0), (73, 10, 4, 239.0), (73, 10, 4, 239.0), (73, 10, 4, 238.0),
    (73, 10, 4, 81.0), (73, 10, 4, 26.0), (73, 10, 4, 20.0), (74, 2, 4, 93.0),
]  # fmt: skip
HPC2N_T0 = 1795861885.0  # that replay's wall-clock time 0 (aligns the will-run windows)


def _replay(policy: SlurmBackfill, until: float) -> list[float]:
    eng = Engine(nodes=64, policy=policy, priority="age")
    ids = []
    for at, cores, minutes, ran in HPC2N_START:
        eng.run(until=float(at))
        ids.append(eng.submit(cores=cores, walltime=60.0 * minutes, runtime=ran))
    eng.run(until=until)
    return [float(eng.jobs.start[j]) for j in ids]


def test_idle_nodes_in_reservations_hold_the_small_job_as_slurm_did() -> None:
    starts = _replay(SlurmNodeBackfill(origin=HPC2N_T0), until=300.0)
    # held until a 2-core job ended early on nodes no reservation holds (138 s; on Slurm 145 s, where a
    # 1-minute job submitted later had those nodes until 144 s)
    assert starts[-1] == 138.0
    # the core-counting plan started it at once: its reservations never take the idle cores
    assert _replay(SlurmBackfill(origin=HPC2N_T0), until=300.0)[-1] == 74.0
    assert starts[:13] == [float(at) for at, *_ in HPC2N_START[:13]]  # the rest started on arrival


def test_a_reservation_takes_busy_nodes_first_and_one_idle_node_more() -> None:
    p = SlurmNodeBackfill()
    busy_freed, idle = 0b1111_0000, 0b0000_0111
    assert p._reserve_nodes(idle, busy_freed, 3) == 0b0111_0000 | 0b1  # 3 busy + the lowest idle node
    assert p._reserve_nodes(idle, 0b1_0000, 3) == 0b1_0011  # busy ones short: idle ones fill, no extra


@settings(max_examples=80, deadline=None)
@given(st.integers(0, (1 << 16) - 1), st.integers(1, 16))
def test_node_choices_take_exactly_what_is_asked_from_what_is_free(free: int, need: int) -> None:
    have = bin(free).count("1")
    for chosen in (lowest(free, need), best_fit(free, need, 16)):
        assert chosen & ~free == 0
        assert bin(chosen).count("1") == min(need, have)


def test_best_fit_prefers_the_smallest_run_that_holds_the_job() -> None:
    assert best_fit(0b0111_1011, 2, 8) == 0b11  # runs of 2 (nodes 0-1) and 4 (3-6)
    assert best_fit(0b0111_1011, 3, 8) == 0b0011_1000


def test_multi_core_nodes_are_refused_with_a_clear_error() -> None:
    eng = Engine(nodes=4, cores_per_node=8, policy=SlurmNodeBackfill())
    with pytest.raises(ValueError, match="one-core nodes"):
        eng.submit(cores=8, walltime=60.0, runtime=10.0)
        eng.run()


def _nodes(*spans: tuple[int, int]) -> int:
    """Slurm's n[a-b] node names (1-based, both ends) as a bit set."""
    return sum(((1 << (b - a + 1)) - 1) << (a - 1) for a, b in spans)


def test_a_job_elsewhere_inside_the_window_carries_the_next_usable_job_into_the_group() -> None:
    # One backfill pass of a logged synthetic replay (DebugFlags=Backfill, 09:19:04 wall clock, so time
    # 0 is 4 s past a 30 s barrier): 62 of 64 nodes busy, three jobs pending in priority order.
    running = [  # (walltime end s, job), nodes below
        (38.0, 23), (57.0, 24), (93.0, 22), (109.0, 26), (114.0, 27),
    ]  # fmt: skip
    placement = {
        23: _nodes((14, 45)),
        24: _nodes((6, 13)),
        22: _nodes((46, 53), (56, 59), (61, 64)),
        26: _nodes((55, 55), (60, 60)),
        27: _nodes((3, 5), (54, 54)),
    }
    cores = np.zeros(30, dtype=np.int64)
    cores[[25, 28, 29]] = (16, 16, 1)
    state = np.full(30, PENDING)
    started: list[int] = []
    eng = SimpleNamespace(
        queue=[25, 28, 29],
        jobs=SimpleNamespace(cores=cores, walltime=np.full(30, 60.0), state=state),
        cluster=SimpleNamespace(total=64, cores_per_node=1),
        running=running,
        now=0.0,
        start=started.append,
    )
    policy = SlurmNodeBackfill(origin=4.0)
    policy.placement = dict(placement)
    policy.schedule(eng)  # type: ignore[arg-type]
    # Slurm: job 25 "to start at 09:20:01" (57 s) on n[1,6-21]; job 28 "to start at 09:20:37" (93 s) on
    # n[2,22-37]: only nodes 2-5 and 22-64 are open to it; job 24 (nodes 6-13, ending at 57 s, inside the
    # window after the barrier at 56 s) is skipped but keeps the group open, so job 22 (93 s) joins job
    # 23's group. The one-core, one-minute job then fits on node 2 before that reservation: Slurm started
    # it ("Started JobId=29 ... on n2"), where grouping only the usable jobs put job 28 at 38 s and held it.
    assert policy.reservations[25] == 57.0
    assert policy.reservations[28] == 93.0
    assert started == [29]
    assert policy.placement[29] == _nodes((2, 2))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 400), st.booleans()), max_size=12),
    st.integers(0, 29),
)
def test_will_run_groups_remove_each_usable_job_once_and_match_the_core_groups_when_all_are_usable(
    jobs: list[tuple[int, bool]], origin: int
) -> None:
    jobs = sorted(jobs)
    ends = [float(e) for e, _ in jobs]
    usable = [u for _, u in jobs]
    groups = will_run_groups(ends, usable, 30.0, float(origin))
    flat = [k for g in groups for k in g]
    assert flat == [k for k, u in enumerate(usable) if u]  # each usable job once, in end order
    assert all(groups)
    # with every job usable the groups are the core-counting policy's (will_run_releases)
    every = will_run_groups(ends, [True] * len(ends), 30.0, float(origin))
    releases = will_run_releases(ends, -math.inf, 30.0, float(origin))
    assert [releases[k] for g in every for k in g] == [ends[g[-1]] for g in every for _ in g]
    # jobs elsewhere change the groups only from between two usable jobs: before the first usable job
    # or after the last one, they change nothing
    kept = [k for k, u in enumerate(usable) if u]
    if kept and not any(not usable[k] for k in range(kept[0], kept[-1])):
        alone = will_run_groups([ends[k] for k in kept], [True] * len(kept), 30.0, float(origin))
        assert [[kept[k] for k in g] for g in alone] == groups


def test_reservation_records_merge_as_slurm_s_and_a_later_test_follows_the_merged_record() -> None:
    space: list[list[float | int]] = [[0.0, math.inf, 0b1111]]
    add_reservation(space, 1.0, 4.0, 0b0001)
    add_reservation(space, 4.0, 8.0, 0b0011)
    add_reservation(space, 8.0, 12.0, 0b0011)  # same free nodes as [4, 8): one record from 4 to 12 s
    assert space == [[0.0, 1.0, 0b1111], [1.0, 4.0, 0b1110], [4.0, 12.0, 0b1100], [12.0, math.inf, 0b1111]]
    p = SlurmNodeBackfill()
    # a 4-node, 2 s job: 3 nodes usable in its window; the record after the window (4-12 s) is followed
    # by one with nodes it cannot use now, so Slurm tests it again from 12 s (TRY_LATER) ...
    assert p._test(space, 0b1111, 0.0, 0.0, 2.0, 4, [], 0) == ("later", 12.0, 0)
    assert p._test(space, 0b1111, 0.0, 12.0, 2.0, 4, [], 0)[:2] == ("reserve", 12.0)
    # ... where unmerged records (4-8 s, 8-12 s) would stop the scan at 4-8 s and give it no reservation
    split = [*space[:2], [4.0, 8.0, 0b1100], [8.0, 12.0, 0b1100], space[3]]
    assert p._test(split, 0b1111, 0.0, 0.0, 2.0, 4, [], 0) == ("none", 0.0, 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 30), st.integers(1, 15)), max_size=8))
def test_reservation_records_stay_ordered_and_hold_what_every_reservation_leaves(
    res: list[tuple[int, int, int]],
) -> None:
    space: list[list[float | int]] = [[0.0, math.inf, 0b1111]]
    for start, length, nodes in res:
        add_reservation(space, float(start), float(start + length), nodes)
    assert space[0][0] == 0.0 and space[-1][1] == math.inf
    assert all(a[1] == b[0] and a[0] <= a[1] for a, b in itertools.pairwise(space))
    for b, e, m in space:  # merging never changes what is free when
        for t in np.arange(float(b) + 0.5, min(float(e), 90.0), 1.0):
            want = 0b1111
            for start, length, nodes in res:
                if start <= t < start + length:
                    want &= ~nodes
            assert m == want

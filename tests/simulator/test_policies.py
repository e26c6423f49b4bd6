"""Known-answer tests of conservative backfilling, SEJF and LEJF (start times computed by hand)."""

from __future__ import annotations

import pytest

from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.base import POLICIES, make_policy
from elastic.simulator.conservative import Profile
from elastic.simulator.engine import Engine

# 4 cores. Rows: (submit, cores, walltime, runtime); every job runs its full walltime.
#   J0 t=0 2c w10 ; J1 t=0 3c w10 ; J2 t=0 4c w10 ; J3 t=1 1c w100
RESERVATION_ROWS = [(0, 2, 10, 10), (0, 3, 10, 10), (0, 4, 10, 10), (1, 1, 100, 100)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # EASY: J0 at 0. J1 blocks: shadow 10, extra = 2 + 2 - 3 = 1. J2 waits behind it.
        # t=1: J3 (1c) does not end by 10 but 1 <= extra -> starts at 1 and holds 1 core until 101.
        # t=10: J1 starts (3 of 3 free cores), ends 20. J2 (4c) then waits for J3: starts at 101.
        ("easy", [0.0, 10.0, 101.0, 1.0]),
        # Conservative: J1 reserved [10, 20) 3c, J2 reserved [20, 30) 4c. At t=1 J3 (1c, 100 s) would
        # overlap J2's slot, where 0 cores are left; its earliest slot is 30.
        ("conservative", [0.0, 10.0, 20.0, 30.0]),
        # FCFS: strictly in order: J0 0, J1 10 (..20), J2 20 (..30), J3 30.
        ("fcfs", [0.0, 10.0, 20.0, 30.0]),
        # SEJF / LEJF: J0..J2 have equal estimates (arrival order); J3 fits at t=1 and starts (no
        # reservation protects anyone); J1 at 10; J2 (4c) only when J3 ends at 101.
        ("sejf", [0.0, 10.0, 101.0, 1.0]),
        ("lejf", [0.0, 10.0, 101.0, 1.0]),
    ],
)
def test_reservation_policies_known_answer(make_workload, policy, expected):
    eng = Engine(nodes=4, policy=policy, workload=make_workload(RESERVATION_ROWS, 4))
    eng.run()
    assert list(eng.records()["start"]) == expected


# 2 cores. J0 t=0 2c w10 ; J1 t=1 2c w50 ; J2 t=2 2c w20 ; J3 t=3 2c w5 (all run their walltime).
ORDER_ROWS = [(0, 2, 10, 10), (1, 2, 50, 50), (2, 2, 20, 20), (3, 2, 5, 5)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # At 10 the machine frees up with J1 (50), J2 (20), J3 (5) waiting.
        # SEJF: J3 10..15, J2 15..35, J1 35..85.
        ("sejf", [0.0, 35.0, 15.0, 10.0]),
        # LEJF: J1 10..60, J2 60..80, J3 80..85 (here the same as FCFS).
        ("lejf", [0.0, 10.0, 60.0, 80.0]),
        ("fcfs", [0.0, 10.0, 60.0, 80.0]),
    ],
)
def test_orderings_known_answer(make_workload, policy, expected):
    eng = Engine(nodes=2, policy=policy, workload=make_workload(ORDER_ROWS, 2))
    eng.run()
    assert list(eng.records()["start"]) == expected


def test_conservative_reservations_recorded(make_workload):
    eng = Engine(nodes=4, policy="conservative", workload=make_workload(RESERVATION_ROWS, 4))
    eng.run()
    assert eng.policy.reservations == {0: 0.0, 1: 10.0, 2: 20.0, 3: 30.0}


def test_profile_earliest_and_reserve():
    p = Profile(0.0, 1)
    p.release(5.0, 1)  # 2 free from 5
    p.release(20.0, 2)  # 4 free from 20
    assert p.earliest(2, 10.0) == 5.0
    p.reserve(5.0, 10.0, 2)  # 0 free in [5, 15)
    assert p.earliest(1, 10.0) == 15.0
    assert p.earliest(1, 3.0) == 0.0
    assert p.earliest(4, 1.0) == 20.0
    p.advance(16.0)
    assert p.times[0] == 16.0 and p.free[0] == 2


def test_registry():
    assert set(POLICIES) == {"easy", "conservative", "slurm", "slurm-nodes", "fcfs", "sejf", "lejf"}
    for name in POLICIES:
        assert make_policy(name).name == name
    with pytest.raises(UnknownNameError) as err:
        make_policy("sjf")
    assert err.value.allowed == ("conservative", "easy", "fcfs", "lejf", "sejf", "slurm", "slurm-nodes")
    with pytest.raises(ConfigError, match="speculative backfilling works only with policy 'easy'"):
        make_policy("fcfs", speculative=True)

"""The ``slurm-nodes`` policy: Slurm 22.05's backfill planned node by node (one-core nodes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.simulator.conservative import SlurmBackfill
from elastic.simulator.engine import Engine
from elastic.simulator.slurm_nodes import SlurmNodeBackfill, best_fit, lowest

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

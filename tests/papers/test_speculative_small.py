"""Small versions of the speculative-scheduling experiment: the direction of each headline effect."""

from __future__ import annotations

import numpy as np

from elastic.papers import speculative as s
from elastic.papers.held import HeldBackfill
from elastic.papers.replay import JobSpec, replay


def test_held_reservation_keeps_cores_from_large_jobs_but_lends_them_to_backfill() -> None:
    jobs = [
        JobSpec(0, 4, 50.0, (100.0,)),
        JobSpec(0, 4, 10.0, (100.0,)),
        JobSpec(0, 2, 5.0, (5.0,), speculable=False),
    ]
    held = replay(jobs, processors=4, policy=HeldBackfill())
    released = replay(jobs, processors=4, policy="easy")
    assert held.completion[1] > released.completion[1]  # no early release for the large job
    assert held.completion[2] <= 60.0  # the small job borrowed held cores


def test_toptimal_beats_classical_hpc_on_the_papers_model() -> None:
    law = s.DISTRIBUTIONS["exponential"]
    large = s._batch(law, "beta", 30, np.random.default_rng(1))
    hpc = s.simulate(large, "hpc", speculative=False, seed=0)
    top = s.simulate(large, "toptimal", speculative=False, seed=0)
    assert top.utilisation() > hpc.utilisation()
    assert top.response(large_only=True) < hpc.response(large_only=True)


def test_speculative_backfilling_helps_classical_hpc() -> None:
    large = s._batch(s._BIG, "beta", 40, np.random.default_rng(2))
    plain = s.simulate(large, "hpc", speculative=False, seed=0)
    spec = s.simulate(large, "hpc", speculative=True, seed=0)
    assert spec.utilisation() > plain.utilisation()

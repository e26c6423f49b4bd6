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


def test_utilisation_is_measured_until_the_large_jobs_and_the_backlog_are_done() -> None:
    """The paper's Eq. (1): backfilling work arriving after the last large job is outside the window."""
    jobs = [
        JobSpec(0, 4, 10.0, (10.0,)),
        JobSpec(5, 2, 10.0, (10.0,), large=False, speculable=False),  # arrived before, runs 10-20
        JobSpec(100, 4, 10.0, (10.0,), large=False, speculable=False),  # arrives after: not counted
    ]
    out = replay(jobs, processors=4, policy=HeldBackfill())
    assert out.utilisation(until_drained=True) == (40 + 20) / (4 * 20)
    assert out.utilisation() == (40 + 20 + 40) / (4 * 110)


def test_the_experiment_reports_eq1_utilisation() -> None:
    def draw(g: np.random.Generator) -> tuple[list[s.Large], list[JobSpec]]:
        late = JobSpec(10 * 3600.0, 100, 60.0, (60.0,), large=False, speculable=False)
        return [s.Large(s._BIG, 100, 3600.0)], [late]

    util = s._mean(1, draw, [("hpc", False)])[("hpc", False)][0]
    assert util == 1.0  # the large job's hour alone, not the idle hours before the late job


def test_toptimal_with_speculative_backfilling_beats_classical_hpc() -> None:
    """The headline's direction: speculation at submission and at backfilling over Classical HPC."""
    large = s._batch(s._BIG, "beta", 40, np.random.default_rng(3))
    hpc = s.simulate(large, "hpc", speculative=False, seed=0)
    both = s.simulate(large, "toptimal", speculative=True, seed=0)
    assert both.utilisation(until_drained=True) > hpc.utilisation(until_drained=True)
    assert both.response(large_only=True) < hpc.response(large_only=True)


def test_a_killed_large_run_is_resubmitted_ahead_of_queued_backfilling_jobs() -> None:
    """Section 3.2: no reservation is made for small jobs, so they never get ahead of a large job."""
    jobs = [
        JobSpec(0, 4, 10.0, (5.0, 20.0)),  # killed at 5, resubmitted with 20
        JobSpec(1, 4, 3.0, (3.0,), large=False, speculable=False),  # queued since t = 1
    ]
    out = replay(jobs, processors=4, policy=HeldBackfill())
    assert out.completion[0] == 15.0  # the rerun starts at once at t = 5, not behind the small job
    assert out.completion[1] == 18.0  # then the small job borrows the rerun's held cores (15-20)


def test_backfilling_jobs_run_on_the_fly_when_no_large_job_waits() -> None:
    jobs = [
        JobSpec(0, 2, 10.0, (10.0,)),
        JobSpec(0, 2, 30.0, (30.0,), large=False, speculable=False),  # ends after the large one
        JobSpec(0, 2, 5.0, (5.0,), large=False, speculable=False),
    ]
    out = replay(jobs, processors=4, policy=HeldBackfill())
    assert list(out.completion) == [10.0, 30.0, 15.0]


def test_a_killed_speculative_run_goes_back_to_the_top_of_the_queue() -> None:
    """Section 5: 'we simply reset its normal requested time and add it back to the top of the queue'."""
    jobs = [
        JobSpec(0, 2, 10.0, (10.0,)),  # runs 0-10
        JobSpec(0, 4, 5.0, (5.0,)),  # the blocked head: its reservation starts at 10
        JobSpec(0, 2, 20.0, (30.0,)),  # speculated into the 2-core gap 0-10, killed at 10
    ]
    policy = HeldBackfill(gain=lambda job, lower, d: d)
    out = replay(jobs, processors=4, policy=policy)
    assert policy.speculations == 1
    assert out.completion[2] == 30.0  # restarted first at t = 10, ahead of the former head
    assert out.completion[2] < out.completion[1]


def test_neuroscience_lies_between_classical_hpc_and_toptimal_and_nears_hpc_as_k_grows() -> None:
    """Fig. 4's direction: HPC < Neuroscience (k = 100) < Neuroscience (k = 10) < TOptimal."""
    large = s._batch(s.DISTRIBUTIONS["truncnorm"], "beta", 30, np.random.default_rng(1))
    util = {
        name: s.simulate(large, name, speculative=False, seed=0).utilisation(until_drained=True)
        for name in ("hpc", "neuro:100", "neuro:10", "toptimal")
    }
    assert util["hpc"] < util["neuro:100"] < util["neuro:10"] < util["toptimal"]


def test_speculative_backfilling_helps_classical_hpc_more_than_toptimal() -> None:
    """Fig. 5's direction: a drastic gain for HPC's long requests, a slight one for TOptimal's."""
    large = s._batch(s._BIG, "beta", 40, np.random.default_rng(2))

    def gain(name: str) -> float:
        plain = s.simulate(large, name, speculative=False, seed=0).utilisation(until_drained=True)
        return s.simulate(large, name, speculative=True, seed=0).utilisation(until_drained=True) / plain

    assert gain("hpc") > gain("toptimal") > 1.0


def test_with_a_backfilling_stream_atoptimal_packs_best_and_hpc_answers_slowest() -> None:
    """Figs. 6-7's directions at Z/P = 0.5: ATOptimal's utilisation highest, HPC's large jobs slowest."""
    g = np.random.default_rng(5)
    large = s._batch(s._STREAM_LAW, "beta", 12, g)
    small = s._stream(0.5, sum(j.cores * j.runtime for j in large) / s.P, g)
    runs = {
        name: s.simulate(large, name, speculative=False, seed=0, small=small)
        for name in ("hpc", "toptimal", "atoptimal:0.5")
    }
    util = {name: out.utilisation(until_drained=True) for name, out in runs.items()}
    response = {name: out.response(large_only=True) for name, out in runs.items()}
    assert util["atoptimal:0.5"] > max(util["hpc"], util["toptimal"])
    assert response["hpc"] > max(response["toptimal"], response["atoptimal:0.5"])

"""The ``slurm`` policy: conservative backfilling with Slurm's grouped will-run start estimates."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.simulator.conservative import SlurmBackfill, will_run_releases
from elastic.simulator.engine import Engine


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 5000, allow_nan=False), min_size=1, max_size=40),
    st.floats(0, 100),
    st.floats(0, 100),
)
def test_releases_are_group_ends_never_before_a_jobs_own_end(
    ends: list[float], now: float, origin: float
) -> None:
    ends = sorted(ends)
    out = will_run_releases(ends, now, 30.0, origin)
    assert len(out) == len(ends)
    assert all(r >= max(e, now) for r, e in zip(out, ends, strict=True))
    assert out == sorted(out)
    # each job is released at the end of the last job of its group (a job's own end), or now if later
    raw = will_run_releases(ends, -math.inf, 30.0, origin)
    assert out == [max(r, now) for r in raw]
    assert all(r in ends for r in raw)
    # groups are contiguous: a job released at r has every job ending in [its end, r] in its group
    for i, r in enumerate(raw):
        assert all(raw[k] == r for k in range(i, len(ends)) if ends[k] <= r)


def test_the_first_group_closes_a_window_after_the_aligned_barrier_and_the_window_doubles() -> None:
    # barrier 30 (10 rounded up), first group up to 60; then 120 (to 150), then 480 (to 510)
    assert will_run_releases([10.0, 50.0, 65.0, 100.0, 400.0], 0.0) == [50.0, 50.0, 65.0, 100.0, 400.0]
    assert will_run_releases([], 0.0) == []
    assert will_run_releases([5.0, 8.0], now=20.0) == [20.0, 20.0]  # overran: counted from now


def test_reproduces_the_start_slurmctld_planned() -> None:
    # Running jobs' limit ends in one local replay (seconds of the day: 10:15:34 ... 10:16:41);
    # slurmctld's backfill log planned the pending 32-node job "to start at 10:16:28".
    hms = ["10:15:34", "10:15:38", "10:15:43", "10:16:07", "10:16:23", "10:16:28", "10:16:36"]
    ends = [float(sum(int(x) * m for x, m in zip(t.split(":"), (3600, 60, 1), strict=True))) for t in hms]
    out = will_run_releases(ends, now=ends[0] - 60.0)
    assert out[0] == ends[5]  # 10:16:28: every job ending by 10:16:30 is one group


def _scenario(policy: SlurmBackfill | str) -> tuple[float, float]:
    """That replay's state: 47 of 64 cores busy, a 32-core job X, then a 4-core job Y behind it."""
    eng = Engine(nodes=64, policy=policy)
    running = [(16, 92, 120, 44), (2, 108, 120, 49), (4, 113, 120, 40), (1, 119, 60, 20), (2, 121, 120, 32)]
    running += [(16, 123, 60, 11), (1, 124, 120, 32), (4, 126, 120, 49), (1, 128, 60, 19)]
    x = y = -1
    for cores, at, wall, run in sorted(running, key=lambda r: r[1]):
        eng.run(until=float(at))
        eng.submit(cores=cores, walltime=float(wall), runtime=float(run))
        if at == 128 and x < 0:
            x = eng.submit(cores=32, walltime=60.0, runtime=30.0)
    eng.run(until=130.0)
    y = eng.submit(cores=4, walltime=60.0, runtime=16.0)
    eng.run()
    return float(eng.jobs.start[x]), float(eng.jobs.start[y])


def test_a_later_estimate_lets_a_small_job_backfill_as_slurm_did() -> None:
    # exact conservative backfilling plans X at 188 (35 cores free) and so holds Y (4 cores until 190)
    x_exact, y_exact = _scenario("conservative")
    assert y_exact > 130.0
    # Slurm planned X at the end of the will-run group (here 233): Y fits before it and started at once
    x_slurm, y_slurm = _scenario(SlurmBackfill(origin=5.0))
    assert y_slurm == 130.0
    assert math.isfinite(x_slurm) and math.isfinite(x_exact)


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window must be > 0"):
        SlurmBackfill(window=0.0)

"""The recorded-capacity estimate and the ``capacity`` fidelity mode: known answers and invariants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.cli import main
from elastic.cli.arguments import MODES as CLI_MODES
from elastic.cli.arguments import PRIORITIES as CLI_PRIORITIES
from elastic.errors import ConfigError
from elastic.simulator.availability import recorded_capacity, recorded_occupancy
from elastic.simulator.engine import Engine
from elastic.simulator.fidelity import MODES, simulate_mode
from elastic.simulator.fidelity_report import fidelity_report
from elastic.simulator.pinned import PinnedBackfill
from elastic.simulator.priority import DEFAULT_PRIORITY, PRIORITY_MODELS
from elastic.simulator.workload import Workload
from tests.simulator.test_fidelity import swf_text, trace

# 4 cores, cells of 300 s. Recorded use: 2 cores over [0, 300), 1 over [300, 1200) and 2 over
# [1200, 1300) (E's recorded run). With a 600 s window the usable size is 4 in the first cell, then
# 2 (peak of [0, 600)), from 900 on 1 (peak of [300, 900)), and 4 again once the schedule is over (1500).
CAP = [
    (0.0, 1, 1200.0, 1200.0, 1, 0.0),  # A: pinned [0, 1200)
    (0.0, 1, 300.0, 300.0, 2, 0.0),  # B: pinned [0, 300)
    (400.0, 2, 100.0, 100.0, 9, 800.0),  # E: evaluated (2 cores), recorded [1200, 1300)
]


def test_occupancy_and_capacity_known_answers() -> None:
    w = trace(CAP)
    times, used = recorded_occupancy(w)
    assert times.tolist() == [0.0, 0.0, 300.0, 1200.0, 1200.0, 1300.0]
    assert used.tolist() == [1, 2, 1, 0, 2, 0]  # A's end before E's start at 1200
    t, c = recorded_capacity(w, window=600.0, step=300.0)
    assert t.tolist() == [300.0, 900.0, 1500.0]
    assert c.tolist() == [2, 1, 4]
    # A shorter window forgets the peak sooner.
    t, c = recorded_capacity(w, window=300.0, step=300.0)
    assert (t.tolist(), c.tolist()) == ([300.0, 600.0, 1500.0], [2, 1, 4])


def test_capacity_refuses_bad_parameters_and_handles_traces_without_recorded_waits() -> None:
    w = trace(CAP)
    with pytest.raises(ConfigError, match="window and step must be > 0"):
        recorded_capacity(w, window=0.0)
    with pytest.raises(ConfigError, match="window and step must be > 0"):
        recorded_capacity(w, step=-1.0)
    none = trace([(0.0, 1, 10.0, 10.0, 1, float("nan"))])
    t, c = recorded_capacity(none)
    assert t.size == 0 and c.size == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5000), st.integers(1, 8), st.integers(0, 3000), st.integers(0, 800)),
        min_size=1,
        max_size=25,
    ),
    st.sampled_from([100.0, 300.0, 1000.0]),
    st.integers(1, 6),
)
@example(rows=[(0, 1, 0, 800), (0, 1, 1, 699), (0, 1, 1, 699)], step=100.0, cells=1)  # ran for no time
@example(rows=[(0, 1, 1, 499), (0, 1, 1, 499), (0, 1, 101, 499)], step=100.0, cells=1)  # ends at one instant
def test_capacity_is_the_peak_use_of_the_preceding_window(
    rows: list[tuple[int, int, int, int]], step: float, cells: int
) -> None:
    window = cells * step
    w = trace([(float(s), c, float(r), float(r), 1, float(wait)) for s, c, r, wait in rows], processors=8)
    times, used = recorded_occupancy(w)
    t, c = recorded_capacity(w, window=window, step=step)
    assert np.all(np.diff(t) > 0) and np.all((c >= 0) & (c <= 8))
    if times.size == 0:  # only jobs that ran for no time: nothing was ever in use, no limit
        assert t.size == 0 and c.size == 0
        return

    def level(x: float) -> int:  # cores in use at time x (events at x applied)
        k = np.searchsorted(times, x, side="right") - 1
        return int(used[k]) if k >= 0 else 0

    def capacity(x: float) -> int:
        k = np.searchsorted(t, x, side="right") - 1
        return int(c[k]) if k >= 0 else 8

    t0 = np.floor(times[0] / step) * step
    last_cell = t0 + (times[-1] - t0) // step * step
    assert capacity(t0) == 8  # no history yet
    for edge in np.arange(t0 + step, last_cell + step / 2, step):
        lo = max(edge - window, t0)  # nothing was recorded before the first cell
        inside = times[(times >= lo) & (times < edge)]
        expected = max([level(lo)] + [level(x) for x in inside])
        assert capacity(edge) == min(expected, 8), (edge, window)
    assert capacity(last_cell + step) == 8  # the schedule is over: the whole machine again


# -- PinnedBackfill with a capacity step function -------------------------------------------------------


def test_a_slot_that_opens_when_the_capacity_steps_up_is_used_on_time() -> None:
    # No job event happens at 500: the engine must still run a pass there (a policy wake-up).
    eng = Engine(nodes=4, policy=PinnedBackfill(capacity=([0.0, 500.0], [1, 4])))
    a = eng.submit(cores=2, walltime=100.0, runtime=100.0)
    b = eng.submit(cores=1, walltime=100.0, runtime=100.0)
    eng.run()
    assert (eng.jobs.start[a], eng.jobs.start[b]) == (500.0, 0.0)


def test_pinned_and_queued_jobs_together_stay_within_the_capacity() -> None:
    one = np.array
    pin = Workload(one([1]), one([0.0]), one([2]), one([1000.0]), one([1000.0]), one([1]), one([0.0]), 8, "p")
    eng = Engine(nodes=8, policy=PinnedBackfill(capacity=([0.0, 600.0], [3, 8])))
    eng.pin(pin, [0.0])
    a = eng.submit(cores=2, walltime=50.0, runtime=50.0)  # 3 - 2 pinned = 1 free until 600
    b = eng.submit(cores=1, walltime=700.0, runtime=700.0)  # fits in the one core from 0
    eng.run()
    assert (eng.jobs.start[a], eng.jobs.start[b]) == (600.0, 0.0)


def test_capacity_argument_is_checked() -> None:
    with pytest.raises(ConfigError, match="one core count per breakpoint"):
        PinnedBackfill(capacity=([0.0, 1.0], [1]))
    with pytest.raises(ConfigError, match="strictly increasing"):
        PinnedBackfill(capacity=([5.0, 5.0], [1, 2]))
    with pytest.raises(ConfigError, match=">= 0 cores"):
        PinnedBackfill(capacity=([0.0], [-1]))


def test_trace_jobs_are_planned_for_their_runtime_submitted_jobs_for_their_walltime() -> None:
    # A pinned job takes all 4 cores from 50. Trace job 0 runs 40 s of its 100 s request: it ran
    # before the pinned job, so it is planned for 40 s and starts at once. A submitted job with the
    # same request is planned for its walltime, as Slurm would, and waits for the pinned job to end.
    w = trace([(0.0, 2, 100.0, 40.0, 1, 0.0)])
    pin = trace([(0.0, 4, 60.0, 60.0, 2, 50.0)])
    eng = Engine(nodes=4, policy=PinnedBackfill(trace_jobs=1), workload=w)
    eng.pin(pin, [50.0])
    other = eng.submit(cores=2, walltime=100.0, runtime=40.0)
    eng.run()
    assert (eng.jobs.start[0], eng.jobs.start[other]) == (0.0, 110.0)


# -- the capacity mode --------------------------------------------------------------------------------


def test_capacity_mode_known_answer() -> None:
    w = trace(CAP)
    # E (submitted at 400, 2 cores) finds 3 free cores in the recorded modes; with the recorded
    # capacity only 1 is left beside A until 1200, 1 until 1500, then 4: it starts at 1500.
    assert simulate_mode(w, "recorded-chain", cores=(2, 2)).jobs["wait"].tolist() == [0.0]
    result = simulate_mode(w, "capacity", cores=(2, 2), window=600.0)
    assert result.jobs["wait"].tolist() == [1100.0]
    assert result.jobs["recorded_wait"].tolist() == [800.0]
    report = fidelity_report(w, cores=(2, 2), modes=("capacity",), window=600.0)
    assert report["mode"].tolist() == ["capacity", "capacity (1st half)", "capacity (2nd half)"]
    assert report["median_wait"].iloc[0] == 1100.0


def test_mock_backend_capacity_mode_offers_only_the_recorded_capacity() -> None:
    with MockBackend(
        nodes=4, workload=trace(CAP), mode="capacity", policy="conservative", capacity_window=600.0
    ) as b:
        # No trace job is queued (none of 16-128 cores): A, B and E are pinned. At 300 the usable size
        # is 2, with 1 core pinned: a 2-core job waits until the whole machine is back at 1500.
        b.sleep(300.0)
        spec = JobSpec(cores=2, walltime=50.0, runtime=50.0)
        assert b.expected_start(spec) == 1500.0
        job = b.submit(spec)
        small = b.submit(JobSpec(cores=1, walltime=50.0, runtime=50.0))  # the one core beside A
        b.sleep(2000.0)
        assert b.state(job).start_time == 1500.0
        assert b.state(small).start_time == 300.0


def test_every_mode_is_offered_by_the_cli() -> None:
    assert CLI_MODES == MODES
    assert CLI_PRIORITIES == PRIORITY_MODELS and PRIORITY_MODELS[0] == DEFAULT_PRIORITY


def test_cli_capacity_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    swf = tmp_path / "cap.swf"
    swf.write_text(swf_text(CAP))
    out = tmp_path / "report.csv"
    argv = [
        "fidelity",
        "--trace",
        str(swf),
        "--cores",
        "2:2",
        "--modes",
        "capacity",
        "--capacity-window",
        "10m",
    ]
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "capacity (2nd half)" in text
    # mode, reserve, window, fast queues, short queues (none: the trace has no queue numbers), jobs
    assert out.read_text().splitlines()[1].startswith("capacity,0,600.0,,,1,1100.0")
    sim = ["simulate", "--trace", str(swf), "--cores", "2:2"]
    assert main([*sim, "--mode", "capacity", "--capacity-window", "10m"]) == 0
    assert "usable cores from the last 0.166667 h" in capsys.readouterr().out
    assert main([*sim, "--mode", "recorded", "--capacity-window", "10m"]) == 2
    assert "--capacity-window applies to --mode capacity only" in capsys.readouterr().err

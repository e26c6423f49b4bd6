"""Fidelity modes on hand-made traces with hand-computed waits, calibration, the report and the CLI."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.cli import main
from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.fidelity import backend_setup, calibrate_reserve, simulate_mode
from elastic.simulator.fidelity_report import fidelity_report
from elastic.simulator.recorded import pinnable, user_chain
from elastic.simulator.synthetic import synthetic_workload
from elastic.simulator.trace import read_swf
from elastic.simulator.workload import Workload

# (submit, cores, walltime, runtime, user, recorded wait) on a 4-core machine.
SMALL = [
    (0.0, 4, 100.0, 100.0, 1, 0.0),  # pinned [0, 100)
    (10.0, 2, 50.0, 50.0, 2, 90.0),  # evaluated (2 cores)
    (20.0, 1, 10.0, 10.0, 3, 200.0),  # pinned [220, 230)
    (30.0, 2, 10.0, 10.0, 3, 5.0),  # evaluated; user 3's previous job is the pin at 220
]


def trace(rows: list[tuple[float, int, float, float, int, float]], processors: int = 4) -> Workload:
    arr = np.array(rows, dtype=np.float64)
    return Workload(
        job_id=np.arange(1, len(rows) + 1, dtype=np.int64),
        submit=arr[:, 0].copy(),
        cores=arr[:, 1].astype(np.int64),
        walltime=arr[:, 2].copy(),
        runtime=arr[:, 3].copy(),
        user=arr[:, 4].astype(np.int64),
        recorded_wait=arr[:, 5].copy(),
        processors=processors,
        source="hand-made trace",
    )


def swf_text(rows: list[tuple[float, int, float, float, int, float]], processors: int = 4) -> str:
    lines = [f"; MaxProcs: {processors}"]
    for k, (submit, cores, wall, run, user, wait) in enumerate(rows, 1):
        lines.append(
            f"{k} {submit:g} {wait:g} {run:g} {cores} -1 -1 {cores} {wall:g} -1 1 {user} -1 -1 -1 -1 -1 -1"
        )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("mode", "reserve", "waits"),
    [
        # EASY over every job: J1 starts when the pin-to-be ends (100); J3 when J2 ends (110).
        ("replay", 0, [90.0, 80.0]),
        # J3 fits beside J1 at 100.
        ("recorded", 0, [90.0, 70.0]),
        # J3 waits for its user's previous job (pinned at 220), then fits beside it.
        ("recorded-chain", 0, [90.0, 190.0]),
        # With 2 cores reserved only 2 are left: at 220 the pin takes 1, so J3 starts at 230.
        ("calibrated", 2, [90.0, 200.0]),
    ],
)
def test_modes_known_answers(mode: str, reserve: int, waits: list[float]) -> None:
    result = simulate_mode(trace(SMALL), mode, cores=(2, 2), reserve=reserve)
    assert result.jobs["job_id"].tolist() == [2, 4]
    assert result.jobs["wait"].tolist() == waits
    assert result.jobs["recorded_wait"].tolist() == [90.0, 5.0]
    assert result.reserve == (reserve if mode == "calibrated" else 0)


def test_user_chain_links_each_users_previous_job() -> None:
    w = trace([(0.0, 1, 1.0, 1.0, u, 0.0) for u in (5, 6, 5, -1, -1, 6, 5)])
    assert user_chain(w).tolist() == [-1, -1, 0, -1, -1, 1, 2]


def test_pinnable_leaves_out_jobs_whose_recorded_schedule_overflows(caplog: pytest.LogCaptureFixture) -> None:
    rows = [
        (0.0, 3, 10.0, 10.0, 1, 0.0),  # [0, 10) 3 cores
        (0.0, 2, 10.0, 10.0, 1, 5.0),  # [5, 15) 2 more: 5 > 4, left out
        (0.0, 1, 10.0, 10.0, 1, 5.0),  # [5, 15) 1 more: fits
        (0.0, 4, 10.0, 10.0, 1, 15.0),  # [15, 25): fits once both have ended
        (0.0, 1, 10.0, 10.0, 1, float("nan")),  # no recorded wait: cannot be pinned
    ]
    with caplog.at_level(logging.WARNING):
        keep = pinnable(trace(rows), np.ones(5, dtype=bool))
    assert keep.tolist() == [True, False, True, True, False]
    assert "1 jobs left unpinned" in caplog.text


def test_calibration_finds_the_reserve_that_reproduces_the_median() -> None:
    # Each evaluated 2-core job arrives while a pinned 3-core job runs for 1000 s on 5 cores: it starts
    # at once unless at least 1 core is reserved, then it waits 1000 s, as recorded.
    rows = []
    for t in (0.0, 10000.0, 20000.0, 30000.0):
        rows.append((t, 3, 1000.0, 1000.0, 1, 0.0))
        rows.append((t, 2, 10.0, 10.0, 2, 1000.0))
    w = trace(rows, processors=5)
    assert calibrate_reserve(w, cores=(2, 2)) == 1
    report = fidelity_report(w, cores=(2, 2), modes=("recorded", "calibrated"))
    halves = ["calibrated (1st half)", "calibrated (2nd half)"]
    assert report["mode"].tolist() == ["recorded", "calibrated", *halves]
    assert report["reserve"].tolist() == [0, 1, 1, 1]
    assert report["median_wait"].tolist() == [0.0, 1000.0, 1000.0, 1000.0]
    assert report["jobs"].tolist() == [4, 4, 2, 2]
    assert report["started_at_once"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert report["median_ratio"].tolist() == [0.0, 1.0, 1.0, 1.0]


def test_report_columns_and_goal() -> None:
    report = fidelity_report(trace(SMALL), cores=(2, 2), modes=("recorded-chain",))
    row = report.iloc[0]
    assert row["median_wait"] == 140.0 and row["recorded_median_wait"] == 47.5
    assert row["mean_wait"] == 140.0 and row["recorded_mean_wait"] == 47.5
    assert row["spearman"] == pytest.approx(-1.0)  # 90 < 190 but 90 > 5
    assert not row["meets_goal"]


def test_bad_input_is_refused_with_the_parameter_named() -> None:
    w = trace(SMALL)
    with pytest.raises(UnknownNameError, match="mode"):
        simulate_mode(w, "exact", cores=(2, 2))
    with pytest.raises(ConfigError, match=r"no job .* asks for 64-128 cores"):
        simulate_mode(w, "recorded", cores=(64, 128))
    with pytest.raises(ConfigError, match="reserve=3"):
        simulate_mode(w, "calibrated", cores=(2, 2), reserve=3)
    synthetic = synthetic_workload(jobs=20, processors=16, seed=1)
    with pytest.raises(ConfigError, match="recorded waits"):
        backend_setup(synthetic, "recorded")
    with pytest.raises(ConfigError, match="recorded waits"):
        backend_setup(None, "recorded-chain")


# -- the mock backend in a fidelity mode ---------------------------------------------------------------


def test_mock_backend_submitted_jobs_see_the_recorded_schedule() -> None:
    with MockBackend(nodes=4, workload=trace(SMALL), mode="recorded", policy="conservative") as b:
        # Trace jobs pinned: [0, 100) 4 cores, [100, 150) 2, [220, 230) 1; the last one's recorded
        # start (35) falls inside the first: it cannot be pinned and is left out.
        spec = JobSpec(cores=3, walltime=60.0, runtime=60.0)
        assert b.expected_start(spec) == 150.0
        job = b.submit(spec)
        b.sleep(300.0)
        info = b.state(job)
        assert (info.start_time, info.end_time, info.state.value) == (150.0, 210.0, "COMPLETED")
        assert b.expected_start(JobSpec(cores=4, walltime=10.0)) == 300.0


def test_mock_backend_chain_starts_a_users_jobs_in_submit_order() -> None:
    for mode, expect in (("recorded", 100.0), ("recorded-chain", 150.0)):
        with MockBackend(nodes=4, workload=trace(SMALL), mode=mode, policy="conservative") as b:
            b.sleep(100.0)
            first = b.submit(JobSpec(cores=3, walltime=50.0, runtime=50.0, user="ana"))  # waits for 150
            other = b.submit(JobSpec(cores=1, walltime=10.0, runtime=10.0, user="bo"))
            second = b.submit(JobSpec(cores=1, walltime=10.0, runtime=10.0, user="ana"))
            b.sleep(200.0)
            assert b.state(first).start_time == 150.0
            assert b.state(other).start_time == 100.0  # beside the pin [100, 150)
            # Fits at once too, unless it must wait for ana's first job (planned at 150).
            assert b.state(second).start_time == expect, mode


def test_mock_backend_mode_needs_a_planning_policy_and_a_trace() -> None:
    with pytest.raises(ConfigError, match="needs policy 'conservative' or 'fcfs'"):
        MockBackend(nodes=4, workload=trace(SMALL), mode="recorded")
    with pytest.raises(ConfigError, match="recorded waits"):
        MockBackend(nodes=4, mode="recorded", policy="fcfs")
    with pytest.raises(UnknownNameError, match="mode"):
        MockBackend(nodes=4, workload=trace(SMALL), mode="exact", policy="fcfs")


# -- CLI --------------------------------------------------------------------------------------------------


def test_cli_fidelity_prints_one_row_per_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the whole table on one line per mode
    swf = tmp_path / "small.swf"
    swf.write_text(swf_text(SMALL))
    assert len(read_swf(swf)) == 4
    out = tmp_path / "report.csv"
    code = main(["fidelity", "--trace", str(swf), "--cores", "2:2", "--reserve", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    for mode in ("replay", "recorded", "recorded-chain", "calibrated", "calibrated (1st half)", "(2nd half)"):
        assert mode in text
    assert "Spearman" in text and "goal" in text
    assert (
        out.read_text()
        .splitlines()[0]
        .startswith("mode,reserve,window,fast_queues,short_queues,jobs,mean_wait")
    )


def test_cli_fidelity_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    swf = tmp_path / "small.swf"
    swf.write_text(swf_text(SMALL))
    with pytest.raises(SystemExit):
        main(["fidelity", "--trace", str(swf), "--cores", "128:16"])
    assert "1 <= LO <= HI" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fidelity", "--trace", str(swf), "--modes", "replay,exact"])
    assert "comma-separated subset" in capsys.readouterr().err
    assert main(["fidelity", "--trace", str(swf), "--cores", "64:128"]) == 2
    assert "no job" in capsys.readouterr().err


def test_cli_simulate_mode_pins_the_recorded_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    swf = tmp_path / "small.swf"
    swf.write_text(swf_text(SMALL))
    out = tmp_path / "jobs.csv"
    argv = ["simulate", "--trace", str(swf), "--mode", "recorded-chain", "--cores", "2:2", "--out", str(out)]
    assert main(argv) == 0
    assert "2 jobs of 2-2 cores queued (conservative), 2 pinned" in capsys.readouterr().out

    jobs = pd.read_csv(out).set_index("job_id")
    assert jobs.loc[[2, 4], "wait"].tolist() == [90.0, 190.0]  # as in test_modes_known_answers
    assert jobs.loc[[1, 3], "wait"].tolist() == [0.0, 200.0]  # pinned: their recorded waits
    assert (
        main(["simulate", "--trace", str(swf), "--mode", "calibrated", "--cores", "2:2", "--policy", "sejf"])
        == 2
    )
    assert "--policy must be conservative or fcfs" in capsys.readouterr().err
    assert main(["simulate", "--mode", "recorded"]) == 2
    assert "needs --trace" in capsys.readouterr().err


def test_mock_backend_queues_the_traces_size_class_beside_submitted_jobs() -> None:
    # The trace's 2-core jobs stay queued (as in the fidelity report) and compete with ours.
    w = trace(SMALL)
    with MockBackend(nodes=4, workload=w, mode="recorded", policy="conservative", fidelity_cores=(2, 2)) as b:
        ours = b.submit(JobSpec(cores=1, walltime=50.0, runtime=50.0))  # waits for the pin [0, 100)
        b.sleep(400.0)
        assert b.state(ours).start_time == 100.0
        rec = b.records().set_index("job_id")
        # J2 [100, 150) beside ours; J4 finds 1 core left until 150.
        assert rec.loc[[2, 4], "start"].tolist() == [100.0, 150.0]
        assert rec.loc[[1, 3], "start"].tolist() == [0.0, 220.0]  # pinned at their recorded starts

"""``elastic run --job-cores N``: a run's allocations asked as batch jobs of at most N cores."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from elastic.cli import main

RUN = ["run", "--workflow", "demo3", "--no-store", "--no-progress", "--seed", "3", "--processors", "32"]


def _asked(events: Path) -> set[int]:
    table = pd.read_csv(events)
    return set(table[table["kind"] == "alloc_submit"]["cores"])


def test_a_simulated_run_asks_jobs_of_one_task(tmp_path: Path) -> None:
    # demo3's tasks take one core each: asa's own pieces are wider; with --job-cores 1, every job is 1 core
    own, fine = tmp_path / "own.csv", tmp_path / "fine.csv"
    assert main([*RUN, "--strategy", "asa", "--simulate", "--events", str(own)]) == 0
    assert max(_asked(own)) > 1
    assert main([*RUN, "--strategy", "asa", "--simulate", "--job-cores", "1", "--events", str(fine)]) == 0
    assert _asked(fine) == {1}


def test_a_run_through_the_pool_asks_jobs_of_one_task(tmp_path: Path) -> None:
    # real agents on the mock backend: the same option reaches run control there too
    events = tmp_path / "events.csv"
    args = [*RUN, "--strategy", "perstage", "--speedup", "1000", "--job-cores", "1", "--events", str(events)]
    assert main(args) == 0
    assert _asked(events) == {1}
    assert (pd.read_csv(events)["kind"] == "run_end").sum() == 1


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_job_cores_must_be_a_whole_number_of_cores(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*RUN, "--strategy", "asa", "--simulate", "--job-cores", value])
    assert exit_.value.code == 2
    assert "argument --job-cores: expected an integer >= 1" in capsys.readouterr().err

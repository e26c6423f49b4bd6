"""Issue 31: absurd sizes are refused up front with the limit in the message, instead of hanging.

``--speedup 1e9`` submitted thousands of allocations and ran no task; ``--speedup 1e-9`` ended in an
``OverflowError``; a stage of 10 million tasks printed nothing for minutes at 5 GB.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.errors import ConfigError
from elastic.limits import (
    MAX_PROCESSORS,
    MAX_SPEEDUP,
    MAX_STAGE_TASKS,
    MAX_STAGES,
    MAX_WORKFLOW_TASKS,
    MIN_SPEEDUP,
)
from elastic.workflow import load_workflow
from tests.cli.test_bad_input_regression_10 import refused as refused_with


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``elastic argv``; it must exit 2 having printed nothing on stdout; return stderr on one line."""
    return " ".join(refused_with(capsys, argv).split())


@pytest.mark.parametrize("speedup", ["1e9", "1e-9", "1001", "0.009"])
@pytest.mark.parametrize("command", [["run", "--workflow", "demo3", "--strategy", "asa"], ["mesos"]])
def test_a_speedup_outside_the_range_is_refused_with_the_range(
    command: list[str], speedup: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = refused(capsys, [*command, "--no-store", "--speedup", speedup])
    assert f"from {MIN_SPEEDUP:g} to {MAX_SPEEDUP:g} simulated seconds per real second" in err
    assert repr(speedup) in err
    assert ("above 1000" if float(speedup) > 1 else "below 0.01") in err


def test_the_speedups_at_the_limits_are_taken(capsys: pytest.CaptureFixture[str]) -> None:
    from elastic.cli.values import speedup

    assert speedup("0.01") == MIN_SPEEDUP and speedup("1000") == MAX_SPEEDUP


@pytest.mark.parametrize("option", ["--max-queued", "--max-allocations"])
def test_a_count_below_its_range_is_refused_with_the_whole_range(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from elastic.control.rate import MAX_ALLOCATIONS

    err = refused(capsys, ["compare", "--workflow", "montage", option, "0"])
    assert f"{option}: expected an integer from 1 to {MAX_ALLOCATIONS:,}; got '0'" in err


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--workflow", "demo3", "--strategy", "asa", "--no-store", "--simulate"],
        ["simulate", "--jobs", "10"],
        ["fidelity", "--trace", "nowhere.swf"],
    ],
)
def test_absurd_processors_are_refused_with_the_limit(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, [*command, "--processors", str(MAX_PROCESSORS + 1)])
    assert f"at most {MAX_PROCESSORS:,} is allowed" in err


def test_a_declared_stage_of_ten_million_tasks_is_refused_with_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wf = tmp_path / "big.toml"
    wf.write_text('[[stages]]\nname = "a"\ntasks = 10000000\ncores = 1\nruntime = 60\n')
    err = refused(
        capsys,
        [
            "run",
            "--workflow",
            str(wf),
            "--strategy",
            "asa",
            "--no-store",
            "--simulate",
            "--processors",
            "10000000",
        ],
    )
    assert f"stage 'a': tasks: at most {MAX_STAGE_TASKS:,} allowed, got 10,000,000" in err


def test_a_declared_chain_of_too_many_stages_is_refused_with_the_limit(tmp_path: Path) -> None:
    wf = tmp_path / "chain.toml"
    n = MAX_STAGES + 1
    wf.write_text(
        "".join(f'[[stages]]\nname = "s{i}"\ntasks = 1\ncores = 1\nruntime = 60\n' for i in range(n))
    )
    with pytest.raises(ConfigError, match=rf"stages: at most {MAX_STAGES:,} allowed, got {n:,}"):
        load_workflow(wf)
    ok = tmp_path / "ok.toml"
    ok.write_text(
        "".join(
            f'[[stages]]\nname = "s{i}"\ntasks = {MAX_WORKFLOW_TASKS // MAX_STAGES}\ncores = 1\n'
            for i in range(MAX_STAGES)
        )
    )
    assert len(load_workflow(ok).stages) == MAX_STAGES


def test_a_declared_workflow_of_too_many_tasks_in_all_is_refused_with_the_limit(tmp_path: Path) -> None:
    # each stage within the stage limit, together past the workflow's: refused before any work, naming it
    stages = MAX_WORKFLOW_TASKS // MAX_STAGE_TASKS + 1
    wf = tmp_path / "wide.toml"
    wf.write_text(
        "".join(f'[[stages]]\nname = "s{i}"\ntasks = {MAX_STAGE_TASKS}\ncores = 1\n' for i in range(stages))
    )
    total = stages * MAX_STAGE_TASKS
    with pytest.raises(
        ConfigError, match=rf"tasks of all stages: at most {MAX_WORKFLOW_TASKS:,} allowed, got {total:,}"
    ):
        load_workflow(wf)
    ok = tmp_path / "ok.toml"
    ok.write_text(
        "".join(
            f'[[stages]]\nname = "s{i}"\ntasks = {MAX_STAGE_TASKS}\ncores = 1\n' for i in range(stages - 1)
        )
    )
    assert sum(s.tasks for s in load_workflow(ok).stages) == MAX_WORKFLOW_TASKS

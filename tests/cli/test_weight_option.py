"""``elastic run --weight W``: ``asa``'s price of a second of makespan, given on the command line."""

from __future__ import annotations

import pytest

from elastic.cli import main
from elastic.experiments import simulate_runs
from elastic.workflow import resolve_workflow

RUN = [
    "run",
    "--workflow",
    "demo3",
    "--simulate",
    "--no-store",
    "--no-progress",
    "--seed",
    "3",
    "--processors",
    "32",
]


def _makespan(out: str) -> float:
    line = next(x for x in out.splitlines() if "makespan (s)" in x)
    return float(line.split("│")[2])


@pytest.mark.parametrize("weight", [1.0, 0.1])
def test_run_asks_the_planner_at_the_weight_given(weight: float, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--strategy", "asa", "--weight", str(weight)]) == 0
    from elastic.experiments import default_background

    (result,) = simulate_runs(
        resolve_workflow("demo3"),
        "asa",
        seed=3,
        background=default_background(32, seed=3),
        strategy_options={"weight": weight},
    )
    assert _makespan(capsys.readouterr().out) == pytest.approx(round(result.metrics.makespan))


def test_run_refuses_a_weight_for_a_strategy_that_has_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--strategy", "perstage", "--weight", "1"]) == 2
    assert "--weight is asa's option" in capsys.readouterr().err

"""``elastic run --weight W``: ``asa``'s price of a second of makespan, given on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from elastic.errors import ConfigError
from elastic.experiments import simulate_runs
from elastic.strategies import make_strategy
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
    err = capsys.readouterr().err
    assert "--weight is asa's option" in err and "use --strategy asa" in err


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("asa", {"weight": True}, "weight must be a number > 0 and <= 1e+06, got True"),
        ("asa", {"weight": 1e307}, "weight must be a number > 0 and <= 1e+06"),
        ("bigjob", {"weight": 1.0}, "strategy 'bigjob' takes no option weight (its options: none)"),
        ("asa", {"wieght": 1.0}, "strategy 'asa' takes no option wieght (its options: weight, "),
    ],
)
def test_a_strategy_refuses_an_option_it_cannot_take_by_name(
    name: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        make_strategy(name, **options)
    assert message in str(info.value)


def test_the_table_and_the_report_say_which_weight_asa_ran_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report made at ``--weight 1`` looked like one at the default (a new user's finding)."""
    base = ["compare", "--workflow", "demo3", "--runs", "1", "--processors", "32"]
    assert main([*base, "--weight", "1"]) == 0
    assert "asa's weight 1 (--weight)" in " ".join(capsys.readouterr().out.split())
    assert main([*base, "--strategies", "bigjob"]) == 0
    assert "weight" not in capsys.readouterr().out  # no asa, no weight
    out = tmp_path / "report"
    assert main([*base, "--peak-cores", "8", "--out", str(out)]) == 0
    assert "asa&#x27;s weight</td><td>0.1 (default)" in (out / "report.html").read_text()

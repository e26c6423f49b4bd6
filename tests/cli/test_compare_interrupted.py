"""Ctrl-C stops ``elastic compare``: the run in progress ends, and no other run or strategy starts.

Found by trying the command as a user would: without ``--out`` a Ctrl-C ended the simulated run in
progress (the runner turns it into an ``interrupted`` run and releases everything), and the comparison
went on with the next strategies and exited 0, reading over the runs that were left.
"""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.cli import main
from elastic.control.runner import Runner
from elastic.experiments import interrupted, simulate_runs
from elastic.workflow import builtin_workflow


def _ctrl_c_after(monkeypatch: pytest.MonkeyPatch, sleeps: int) -> list[str]:
    """Raise KeyboardInterrupt in the ``sleeps``-th backend sleep; return the strategies that ran."""
    ran: list[str] = []
    count = {"n": 0}
    real_sleep, real_init = MockBackend.sleep, Runner.__init__

    def sleep(self: MockBackend, seconds: float) -> None:
        count["n"] += 1
        if count["n"] == sleeps:
            raise KeyboardInterrupt
        real_sleep(self, seconds)

    def init(self: Runner, workflow: object, strategy: object, *args: object, **kwargs: object) -> None:
        ran.append(getattr(strategy, "name", "?"))
        real_init(self, workflow, strategy, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MockBackend, "sleep", sleep)
    monkeypatch.setattr(Runner, "__init__", init)
    return ran


def test_ctrl_c_stops_the_comparison_with_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = _ctrl_c_after(monkeypatch, sleeps=5)
    code = main(["compare", "--workflow", "montage", "--runs", "3", "--strategies", "bigjob,perstage,asa"])
    assert code == 130
    assert ran == ["bigjob"]  # the first run of the first strategy, interrupted; nothing after it
    assert "interrupted" in capsys.readouterr().err


def test_simulate_runs_returns_the_runs_so_far_the_last_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _ctrl_c_after(monkeypatch, sleeps=400)
    results = simulate_runs(builtin_workflow("montage"), "perstage", runs=4, seed=1)
    assert 1 <= len(results) < 4 and len(ran) == len(results)
    assert interrupted(results)
    assert [r.status for r in results[:-1]] == ["completed"] * (len(results) - 1)

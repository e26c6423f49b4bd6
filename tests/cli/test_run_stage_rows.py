"""``elastic run``'s metrics table shows at most :data:`STAGE_ROWS` stages, and says how many more.

A declared workflow may have 1,000 stages: a row for each, most of them ``nan`` where the run stopped
early, buried the run's totals under pages of stages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from elastic.cli.run_view import STAGE_ROWS


def _chain(tmp_path: Path, n: int) -> Path:
    toml = ['name = "long"'] + [
        f'[[stages]]\nname = "s{i}"\ntasks = 1\ncores = 1\nruntime = 30' for i in range(n)
    ]
    path = tmp_path / "long.toml"
    path.write_text("\n".join(toml) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("n", [STAGE_ROWS, STAGE_ROWS + 12])
def test_the_table_shows_the_first_stages_and_says_how_many_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int
) -> None:
    args = ["run", "--workflow", str(_chain(tmp_path, n)), "--strategy", "bigjob", "--simulate"]
    assert main([*args, "--no-store", "--no-progress"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("execution / queue wait / perceived wait (s)") == min(n, STAGE_ROWS)
    assert "makespan (s)" in out
    assert ("12 more stages" in out) == (n > STAGE_ROWS)
    assert (f"stage s{STAGE_ROWS}:" in out) is False  # the 31st stage's row is folded

"""A workflow whose stages alone outlast a simulated run's horizon is refused before any run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.cli import main
from elastic.errors import ConfigError
from elastic.experiments import HORIZON
from elastic.workflow import Stage, Workflow
from elastic.workflow_model import check_horizon, shortest_chain

HUGE = """name = "huge"
[[stages]]
name = "a"
tasks = 2
cores = 1
runtime = 60.0
[[stages]]
name = "b"
tasks = 1
cores = 1
runtime = {runtime}
"""


@pytest.mark.parametrize("runtime", ["1e7", "400000.0"])  # under a year: beyond it the stage is refused
def test_compare_and_run_refuse_it_before_any_run(
    runtime: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.toml"
    path.write_text(HUGE.format(runtime=runtime))
    out = tmp_path / "out"
    assert main(["compare", "--workflow", str(path), "--runs", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "workflow 'huge': its longest chain of stages takes at least" in err
    assert "beyond a simulated run's 96 h horizon" in err and "runtimes are in seconds" in err
    assert not out.exists()  # refused before any work: nothing written
    assert main(["run", "--workflow", str(path), "--strategy", "asa", "--simulate", "--no-store"]) == 2
    assert "so no run could complete" in capsys.readouterr().err


@given(
    st.lists(
        st.tuples(st.floats(1.0, 1e6), st.sampled_from([0.0, 0.5, 3.0]), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_the_shortest_chain_is_at_most_the_longest_chain_of_means(
    stages: list[tuple[float, float, bool]],
) -> None:
    # each stage after the one before it, or (False) after nothing: chains of random lengths side by side
    wf = Workflow(
        "w",
        tuple(
            Stage(f"s{i}", 1, 1, runtime=r, runtime_cv=cv, depends_on=None if chained else ())
            for i, (r, cv, chained) in enumerate(stages)
        ),
    )
    ends: dict[str, float] = {}
    for s in wf.stages:
        ends[s.name] = max((ends[d] for d in s.depends_on or ()), default=0.0) + float(s.runtime or 0.0)
    means = max(ends.values())
    chain = shortest_chain(wf)
    assert 0.0 < chain <= means * (1 + 1e-12)
    if all(cv == 0.0 for _, cv, _ in stages):
        assert math.isclose(chain, means, rel_tol=1e-12)


def test_a_long_spread_workflow_that_may_end_in_time_is_kept() -> None:
    # 100 h of mean runtime with cv 3: most runs take far less (the lognormal's median is a third of its
    # mean), so it is simulated, not refused
    wf = Workflow("spread", (Stage("a", 1, 1, runtime=100 * 3600.0, runtime_cv=3.0),))
    check_horizon(wf, HORIZON)
    with pytest.raises(ConfigError, match=r"takes at least 100\.0 h"):
        check_horizon(Workflow("flat", (Stage("a", 1, 1, runtime=100 * 3600.0),)), HORIZON)
    assert HORIZON == 96 * 3600.0

"""Each demo through the front door, under Big-Job, Per-Stage and ASA, on the scaled mock queue.

Real programs (Montage, BLAST+, pandas) in real agents' warm workers, allocations requested by the
strategy; the output checked against what the input planted; the run and every stage's runtimes kept in
the store under the demo's name (what simulated comparisons draw on).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.mock import MockBackend
from elastic.metrics import EventKind
from elastic.store import Store
from elastic.workflows.demos import DEMOS, run_demo
from elastic.workflows.frontends import run_elastic
from tests.workflows.conftest import SMALL

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_through_the_front_door(name: str, strategy: str, tmp_path: Path, store: Store) -> None:
    demo = DEMOS[name]
    backend = MockBackend(nodes=8, clock="scaled", speedup=20.0)
    with backend, Elastic(backend, strategy, workflow=name, store=store, poll_interval=5.0) as el:
        run = run_demo(
            name, lambda driver, inputs: run_elastic(driver, inputs, el), size=SMALL[name], workdir=tmp_path
        )
    assert run.verification.ok, run.verification.failed
    result = el.result
    assert result is not None and result.status == "completed"
    assert [s.name for s in result.metrics.stages] == list(demo.stages)
    assert all(s.execution_time >= 0 for s in result.metrics.stages)
    assert {e.stage for e in result.events if e.kind is EventKind.STAGE_END} == set(demo.stages)
    submitted = {e.stage for e in result.events if e.kind is EventKind.ALLOC_SUBMIT}
    if strategy == "bigjob":
        assert submitted == {"*"}  # one allocation for the whole workflow (and follow-ups)
    else:  # allocations per stage (a stage whose tasks all ran on a previous one's needs none)
        assert demo.stages[0] in submitted and submitted <= set(demo.stages)
        # asa may plan to keep the first allocation for every stage where they are as narrow as it (on the
        # scaled clock small Statistics ran all four stages on its 1-core allocation now and then)
        assert strategy == "asa" or len(submitted) >= 2
    assert not backend.queue(), "an allocation outlived the run"
    runs = store.runs(workflow=name)
    assert list(runs["status"]) == ["completed"] and runs["strategy"].iloc[0] == strategy
    for stage in demo.stages:
        runtimes, _ = store.stage_runtimes(name, stage)
        assert len(runtimes) == 1 and runtimes[0] > 0, stage

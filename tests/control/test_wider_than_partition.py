"""A stage with more tasks than the partition has cores runs in waves; a task wider than it is refused.

Found by trying WfCommons instances as a user would: a stage of 200 one-core tasks on a 128-core partition
was refused ("needs 200 cores"), 70 of 167 published instances with it, though every task fits and run
control already asks at most the partition's cores. A request so capped runs its tasks in waves (its
walltime stays the strategy's; follow-ups continue the waves).
"""

from __future__ import annotations

import pytest

from elastic.errors import ConfigError
from elastic.experiments import default_background, simulate_runs
from elastic.timeline import EventKind
from elastic.workflow_model import Stage, Workflow

PARTITION = 32


def _wide(width: int = 80, cores: int = 1) -> Workflow:
    return Workflow(
        "wide",
        (
            Stage("prep", tasks=1, cores=1, runtime=60.0),
            Stage("scatter", tasks=width // cores, cores=cores, runtime=600.0, runtime_cv=0.2),
            Stage("merge", tasks=1, cores=1, runtime=60.0),
        ),
    )


STRATEGIES = ["bigjob", "perstage", "asa", "bigjob-fine", "perstage-split", "asa-fine"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_stage_wider_than_the_partition_completes_in_waves(strategy: str) -> None:
    wf = _wide()
    results = simulate_runs(wf, strategy, runs=2, seed=3, background=default_background(PARTITION, seed=3))
    for r in results:
        assert r.status == "completed", r.detail
        asked = [e for e in r.events if e.kind is EventKind.ALLOC_SUBMIT]
        assert max(e.cores for e in asked) <= PARTITION
        scatter = [e.time for e in r.events if e.kind is EventKind.TASK_START and e.stage == "scatter"]
        assert len(scatter) >= 80


def test_a_capped_request_asks_the_partition_and_completes() -> None:
    # Big-Job's one request is capped at the partition; 80 tasks on 32 cores run in three waves
    (r,) = simulate_runs(_wide(), "bigjob", runs=1, seed=3, background=default_background(PARTITION, seed=3))
    first = next(e for e in r.events if e.kind is EventKind.ALLOC_SUBMIT)
    assert first.cores == PARTITION
    assert r.status == "completed"


def test_a_task_wider_than_the_partition_is_refused_naming_its_stage() -> None:
    with pytest.raises(ConfigError, match=r"stage 'scatter' has tasks of 40 cores but the partition has 32"):
        simulate_runs(_wide(80, cores=40), "perstage", background=default_background(PARTITION, seed=3))

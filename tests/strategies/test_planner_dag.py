"""Workflows as DAGs under ``asa`` (issue 28, item 4): a parallel branch is planned from its own need."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.backends.mock import MockBackend
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.learners.choice import make_wait_learner
from elastic.metrics import EventKind
from elastic.strategies import Knowledge, MemoryHistory, make_strategy, strategy_learner
from elastic.workflow import Stage, Workflow


def _stage_times(workflow: Workflow, nodes: int = 16) -> dict[str, tuple[float, float]]:
    """Run ``workflow`` under asa on an empty queue; return each stage's first task start and last end."""
    backend = MockBackend(nodes=nodes)
    knowledge = Knowledge(workflow, waits=make_wait_learner(strategy_learner("asa")), history=MemoryHistory())
    runner = Runner(workflow, make_strategy("asa"), backend, SimExecution(), knowledge, seed=1)
    result = runner.run()
    assert result.status == "completed", result.detail
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for e in result.events:
        if e.kind is EventKind.TASK_START and e.stage is not None:
            starts[e.stage] = min(starts.get(e.stage, e.time), e.time)
        elif e.kind is EventKind.TASK_END and e.stage is not None:
            ends[e.stage] = max(ends.get(e.stage, e.time), e.time)
    return {name: (starts[name], ends[name]) for name in starts}


def test_two_parallel_branches_on_an_empty_queue_do_not_wait_for_each_other() -> None:
    # a1 -> a2 and b1 -> b2, listed a1, b1, a2, b2: b2 follows b1 only, and b1 is short
    workflow = Workflow(
        "branches",
        (
            Stage("a1", 2, 1, runtime=3000.0),
            Stage("b1", 2, 1, runtime=300.0, depends_on=()),
            Stage("a2", 4, 1, runtime=600.0, depends_on=("a1",)),
            Stage("b2", 4, 1, runtime=600.0, depends_on=("b1",)),
        ),
    )
    t = _stage_times(workflow)
    # b2 starts within a poll or two of b1's end, not after a1 (3000 s) or a2
    assert t["b2"][0] < t["b1"][1] + 120.0, t
    assert t["b2"][0] < t["a1"][1], t


@settings(max_examples=6, deadline=None)
@given(
    works=st.lists(st.sampled_from([60.0, 600.0, 1800.0]), min_size=3, max_size=5),
    parents=st.lists(st.integers(0, 4), min_size=3, max_size=5),
)
def test_a_stage_starts_after_its_predecessors_and_no_sibling_delays_it_on_an_empty_queue(
    works: list[float], parents: list[int]
) -> None:
    stages = [Stage("s0", 2, 1, runtime=works[0])]
    for i, work in enumerate(works[1:], 1):
        parent = parents[i % len(parents)] % i
        stages.append(Stage(f"s{i}", 2, 1, runtime=work, depends_on=(f"s{parent}",)))
    workflow = Workflow("tree", tuple(stages))
    t = _stage_times(workflow)
    for s in workflow.stages:
        ready = max((t[d][1] for d in s.depends_on or ()), default=0.0)
        assert t[s.name][0] >= ready, (s.name, t)
        # an empty queue of 16 cores runs every 2-core stage at once: nothing but its ancestors delays it
        assert t[s.name][0] <= ready + 120.0, (s.name, t)

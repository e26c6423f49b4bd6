"""Workflows as DAGs under ``asa`` (issue 28, item 4): a parallel branch is planned from its own need."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.backends.mock import MockBackend
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.learners.choice import make_wait_learner
from elastic.learners.ewma import LogEWMA
from elastic.metrics import EventKind
from elastic.strategies import (
    Knowledge,
    MemoryHistory,
    RunView,
    Serve,
    StageView,
    Submit,
    make_strategy,
    strategy_learner,
)
from elastic.strategies.merge import Choice
from elastic.strategies.planner import Planner, StagePlan, plan
from elastic.strategies.timing import PROBS, Prices
from elastic.workflow import Stage, Workflow
from tests.strategies.views import alloc, split


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


# -- siblings in the plan (CyberShake's shape: a wide stage and a narrow one after the same stage) ----------

SIBLINGS = Workflow(
    "siblings",
    (
        Stage("wide1", tasks=28, cores=1, runtime=1800.0),
        Stage("narrow", tasks=1, cores=1, runtime=600.0, depends_on=("wide1",)),
        Stage("wide2", tasks=28, cores=1, runtime=1800.0, depends_on=("wide1",)),
    ),
)


def _sibling_view(wait: float) -> RunView:
    # wide1 has run 1700 of its 1800 s on a 28-core allocation; every new allocation waits ``wait`` s
    k = Knowledge(SIBLINGS, waits=LogEWMA(alpha=1.0))
    for cores in (1, 28):
        for follow_up in (False, True):
            k.observe_wait(cores, wait, follow_up=follow_up)
    stages = (
        StageView("wide1", 0, 28, 1, (), done=20, running=8, ready_time=0.0, start_time=0.0),
        StageView("narrow", 1, 1, 1, ("wide1",)),
        StageView("wide2", 2, 28, 1, ("wide1",)),
    )
    records, busy = split((alloc("a1", "wide1", 28, 20000.0, AllocationState.RUNNING, -wait, 0.0, busy=8),))
    return RunView(1700.0, SIBLINGS, stages, records, k, busy)


def test_an_allocation_is_kept_for_the_wide_sibling_and_the_narrow_one_gets_its_own() -> None:
    # On a slow queue the 28 cores are worth keeping for wide2, which runs after wide1 as narrow does, not
    # after narrow: the hold keeps them for it (a chain walk stopped at wide2, as it does not follow
    # narrow, and could keep them for narrow only). narrow would run beside wide2 and does not fit beside
    # it on 28 cores: it is not kept there, and is requested on its own, needed when wide1 ends
    decision = Planner().decide(_sibling_view(3600.0))
    serves = [(a.alloc_id, a.stages) for a in decision.actions if isinstance(a, Serve)]
    assert serves == [("a1", ("wide1", "wide2"))]
    submits = [a for a in decision.actions if isinstance(a, Submit)]
    assert [(a.stage, a.cores) for a in submits] == [("narrow", 1)]


def test_a_sibling_is_kept_on_the_allocation_before_it_only_if_it_fits_beside_the_others() -> None:
    waits = np.full(len(PROBS), 3600.0)
    queue = {"waits": lambda cores, follow_up: waits, "prices": Prices(beta=28.0), "model": "age"}
    # wide2 after narrow on a chain: both kept on the 28 cores held
    chain = [StagePlan("narrow", 1, 600.0), StagePlan("wide2", 28, 1800.0)]
    _, choices = plan(chain, held=28, lead=0.0, **queue)
    assert [c.new for c in choices] == [False, False]
    # the same two as siblings, the narrow one planned after the wide one: 28 + 1 cores do not fit 28
    siblings = [StagePlan("wide2", 28, 1800.0), StagePlan("narrow", 1, 600.0, beside=28)]
    _, choices = plan(siblings, held=28, lead=0.0, **queue)
    assert choices[0] == Choice("wide2", 28, new=False)
    assert choices[1].new
    # two wide siblings: the second does not wait behind the first on the cores held, it gets its own
    wide = [StagePlan("wide2", 28, 1800.0), StagePlan("wide3", 28, 1800.0, beside=28)]
    _, choices = plan(wide, held=28, lead=0.0, **queue)
    assert choices == (Choice("wide2", 28, new=False), Choice("wide3", 28, new=True))
    _, choices = plan([wide[0], StagePlan("wide3", 28, 1800.0)], held=28, lead=0.0, **queue)
    assert choices[1] == Choice("wide3", 28, new=False)  # on a chain it would be kept


# -- a ready stage whose last tasks all run on another stage's allocation ----------------------------------

TAIL = Workflow(
    "tail",
    (
        Stage("first", tasks=4, cores=1, runtime=600.0),
        Stage("last", tasks=15, cores=1, runtime=5000.0, runtime_cv=1.0, depends_on=("first",)),
    ),
)


def _tail_view(running: int) -> RunView:
    # ``last`` has 14 of its 15 tasks done; what is left runs (``running``) on a1, kept for ``first``
    k = Knowledge(TAIL, waits=LogEWMA(alpha=1.0))
    stages = (
        StageView("first", 0, 4, 1, (), done=4, ready_time=0.0, start_time=0.0, end_time=600.0),
        StageView("last", 1, 15, 1, ("first",), done=14, running=running, ready_time=600.0, start_time=600.0),
    )
    records, busy = split(
        (alloc("a1", "first", 4, 90000.0, AllocationState.RUNNING, 0.0, 0.0, busy=running),)
    )
    return RunView(20000.0, TAIL, stages, records, k, busy)


def test_a_stage_whose_tasks_all_run_elsewhere_is_not_asked_for_in_full() -> None:
    # seed 1, index 1,775 of the liveness scenarios: asa asked the stage's full width for its last task,
    # running on another stage's allocation; the idle jobs were released, and asked again, 9,993 times
    decision = Planner().decide(_tail_view(running=1))
    assert [a for a in decision.actions if isinstance(a, Submit) and a.stage == "last"] == []
    # the task queued again (its allocation lost it): then it is planned, for what waits
    decision = Planner().decide(_tail_view(running=0))
    assert [a.stage for a in decision.actions if isinstance(a, Submit)] == ["last"]

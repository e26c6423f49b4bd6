"""Tasks for one named agent, and killing tasks: the rule, the bookkeeping, and real agents.

A front-end that hands out one agent's cores (the Mesos offers of :mod:`elastic.front.mesos`) needs a task to
run on that agent and nowhere else, and a way to kill a task its user no longer wants.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.allocations import Allocation, AllocationState
from elastic.pool.messages import KillTasks, Register, RunTasks, TasksReturned
from elastic.pool.placement import Offer, plan_placement
from elastic.pool.pool import Pool
from elastic.pool.state import AgentView, PoolState
from elastic.pool.tasks import (
    ShellResult,
    Task,
    TaskEvent,
    TaskKilledError,
    TaskLostError,
    TaskState,
)
from tests.pool.conftest import AgentStarter, start_allocation, wait_for
from tests.pool.test_pool_state import Clock, done, join, killed, make_state, run_resolutions, take_outbox

AGENTS = [f"a{i}/h/{i}" for i in range(4)]

pinned_tasks_st = st.lists(
    st.builds(
        lambda i, c, e, a: Task.shell("true", cores=c, estimate=e, task_id=f"t{i}", agent=a),
        st.integers(0, 10**6),
        st.integers(1, 4),
        st.none() | st.floats(0, 1000),
        st.none() | st.sampled_from(AGENTS),
    ),
    max_size=25,
    unique_by=lambda t: t.task_id,
)
agent_offers_st = st.lists(
    st.builds(
        lambda i, f, r: Offer(AGENTS[i].encode(), f"a{i}", f, r),
        st.integers(0, 3),
        st.integers(0, 8),
        st.floats(0, 1000),
    ),
    max_size=4,
    unique_by=lambda o: o.agent,
)


@given(pinned_tasks_st, agent_offers_st, st.booleans())
def test_a_task_for_one_agent_goes_there_or_nowhere_and_never_waits_for_walltime(
    tasks: list[Task], offers: list[Offer], can_wait: bool
) -> None:
    plan = plan_placement(tasks, offers, lambda t: can_wait)
    used: Counter[bytes] = Counter()
    for task, offer in plan:
        assert task.agent is None or task.agent.encode() == offer.agent, "placed on another agent"
        used[offer.agent] += task.cores
    assert all(used[o.agent] <= o.free for o in offers)
    placed = {t.task_id for t, _ in plan}
    free = {o.agent: o.free - used[o.agent] for o in offers}
    for task in tasks:
        if task.task_id in placed or task.agent is None:
            continue
        # not placed: its agent offers too few cores (walltime never holds it back)
        assert free.get(task.agent.encode(), 0) < task.cores


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state(clock: Clock) -> PoolState:
    state = make_state(clock, max_retries=3)
    for alloc_id in ("a1", "a2"):
        state.add_allocation(Allocation(alloc_id, cores=2, walltime=600.0, stage="s"))
    return state


def sent(state: PoolState) -> dict[bytes, list[str]]:
    out: dict[bytes, list[str]] = {}
    for ident, msg in take_outbox(state):
        if isinstance(msg, RunTasks):
            out.setdefault(ident, []).extend(t.task_id for t in msg.tasks)
    return out


def states(state: PoolState, task_id: str) -> list[TaskState]:
    return [e.state for e in state.events if isinstance(e, TaskEvent) and e.task_id == task_id]


def test_a_task_for_one_agent_runs_there_even_when_another_is_free(state: PoolState, clock: Clock) -> None:
    first, second = join(state, "a1"), join(state, "a2")
    state.submit(Task.shell("true", task_id="t", agent=second.decode()))
    state.tick(clock.now)
    assert sent(state) == {second: ["t"]}
    views = {v.name: v for v in state.agent_views(clock.now)}
    assert views[second.decode()] == AgentView(second.decode(), "a2", "h", 2, 1, False, 600.0)
    assert views[first.decode()].free == 2


def test_a_task_for_one_agent_is_lost_once_with_it_whatever_max_retries_says(
    state: PoolState, clock: Clock
) -> None:
    ident = join(state, "a1")
    future = state.submit(Task.shell("sleep 9", task_id="t", agent=ident.decode()))
    waiting = state.submit(Task.shell("sleep 9", cores=2, task_id="w", agent=ident.decode()))  # no room yet
    state.submit(Task.shell("sleep 9", task_id="f"))
    state.tick(clock.now)
    assert sent(state) == {ident: ["t", "f"]}
    state.allocation_ended("a1", AllocationState.CANCELLED, "scancel")
    run_resolutions(state)
    with pytest.raises(TaskLostError, match="max_retries=0") as info:
        future.result()
    assert info.value.losses == (("a1", "allocation a1 ended CANCELLED"),)
    assert states(state, "t") == [TaskState.QUEUED, TaskState.RUNNING, TaskState.LOST, TaskState.FAILED]
    # the queued one for the gone agent fails without a LOST event (it never ran); the free one is re-queued
    with pytest.raises(TaskLostError):
        waiting.result()
    assert states(state, "w") == [TaskState.QUEUED, TaskState.FAILED]
    assert state.queued() == ["f"]
    # a task submitted for an agent that has gone is lost at once
    late = state.submit(Task.shell("true", task_id="late", agent=ident.decode()))
    run_resolutions(state)
    assert isinstance(late.exception(), TaskLostError) and "has gone" in str(late.exception())


def test_a_task_for_one_agent_given_back_is_lost(state: PoolState, clock: Clock) -> None:
    ident = join(state, "a1")
    future = state.submit(Task.shell("true", task_id="t", agent=ident.decode()))
    state.tick(clock.now)
    take_outbox(state)
    state.handle(ident, TasksReturned(("t",), "draining"))
    run_resolutions(state)
    assert isinstance(future.exception(), TaskLostError)


def test_kill_drops_a_queued_task_and_has_the_agent_kill_a_running_one(
    state: PoolState, clock: Clock
) -> None:
    ident = join(state, "a1")
    running = state.submit(Task.shell("sleep 9", cores=2, task_id="r"))
    queued = state.submit(Task.shell("sleep 9", task_id="q"))
    state.tick(clock.now)
    take_outbox(state)
    assert state.kill("q", "not wanted")
    run_resolutions(state)
    with pytest.raises(TaskKilledError, match="not wanted"):
        queued.result()
    assert states(state, "q") == [TaskState.QUEUED, TaskState.CANCELLED]
    assert state.kill("r", "the user asked")
    assert state.kill("r", "twice")  # asked once only
    assert take_outbox(state) == [(ident, KillTasks(("r",), "the user asked"))]
    state.handle(ident, killed("r"))  # the agent killed it: its result says so
    run_resolutions(state)
    with pytest.raises(TaskKilledError, match="the user asked"):
        running.result()
    assert states(state, "r")[-1] is TaskState.FAILED  # it ran: FAILED, as the run's metrics saw it start
    assert state.free_cores() == {"a1": 2}
    assert not state.kill("r", "again"), "an ended task is not known any more"


def test_a_task_that_finishes_before_its_kill_arrives_keeps_its_result(
    state: PoolState, clock: Clock
) -> None:
    ident = join(state, "a1")
    future = state.submit(Task.shell("true", task_id="t"))
    state.tick(clock.now)
    state.kill("t", "too late")
    state.handle(ident, done("t", 7))
    run_resolutions(state)
    assert future.result() == 7


def test_a_task_killed_while_its_agent_is_lost_is_not_rerun(state: PoolState, clock: Clock) -> None:
    ident = join(state, "a1")
    future = state.submit(Task.shell("sleep 9", task_id="t"))
    state.tick(clock.now)
    state.kill("t", "stop")
    state.handle(ident, Register("a1", 2, "h", 1))  # (a repeated registration changes nothing)
    state.allocation_ended("a1", AllocationState.CANCELLED, "")
    run_resolutions(state)
    assert isinstance(future.exception(), TaskKilledError) and state.queued() == []


# -- real agents -------------------------------------------------------------------------------------


def test_real_agents_run_a_named_agents_task_there_and_kill_a_running_one(
    pool: Pool, start_agent: AgentStarter, tmp_path: Path
) -> None:
    for alloc_id in ("a1", "a2"):
        start_allocation(pool, start_agent, Allocation(alloc_id, cores=1, walltime=600.0))
    wait_for(pool, lambda e: len(pool.agents()) == 2)
    names = {v.alloc_id: v.name for v in pool.agents()}
    pinned = pool.submit(Task.shell("echo $PPID", task_id="p", agent=names["a2"]))
    assert isinstance(pinned.result(timeout=20), ShellResult)
    assert [e.alloc_id for e in pool.events if isinstance(e, TaskEvent) and e.task_id == "p"][1:] == [
        "a2",
        "a2",
    ]
    marker = tmp_path / "survived"
    long = pool.submit(Task.shell(f"sleep 3; touch {marker}", task_id="long", agent=names["a1"]))
    wait_for(
        pool, lambda e: isinstance(e, TaskEvent) and e.task_id == "long" and e.state is TaskState.RUNNING
    )
    time.sleep(0.3)
    started = time.monotonic()
    assert pool.kill("long", "the user asked")
    with pytest.raises(TaskKilledError):
        long.result(timeout=10)
    assert time.monotonic() - started < 1.0, "a killed task's end is not held back like a signal death"
    time.sleep(3.2)
    assert not marker.exists(), "the killed task's processes lived on"
    assert pool.submit(Task.shell("true", agent=names["a1"])).result(timeout=20).returncode == 0
    assert not pool.kill("nope")

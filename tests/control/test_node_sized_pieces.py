"""Splits respect node boundaries (issue 28, item 2): where jobs are placed on nodes, a request split into
several batch jobs is split in whole nodes, and a task wider than a node is refused before any work.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic import Elastic
from elastic.backends.mock import MockBackend
from elastic.batch import PartitionInfo
from elastic.control.runner import Runner
from elastic.control.scheduler import split_request
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError
from elastic.front.tasks import task
from elastic.learners.choice import make_wait_learner
from elastic.strategies import STRATEGY_NAMES, Knowledge, MemoryHistory, make_strategy, strategy_learner
from elastic.workflow import Stage, Workflow


@st.composite
def _requests(draw: st.DrawFn) -> tuple[int, int, int | None, int, int]:
    node = draw(st.integers(2, 16))
    task = draw(st.integers(1, node))
    cores = draw(st.integers(1, 12 * node))
    pieces = draw(st.integers(1, 5))
    job_cores = draw(st.none() | st.integers(1, 6 * node))
    return cores, pieces, job_cores, task, node


@given(_requests())
def test_pieces_are_whole_nodes_and_fit_the_widest_task(case: tuple[int, int, int | None, int, int]) -> None:
    cores, pieces, job_cores, task, node = case
    widths = split_request(cores, pieces, job_cores, task, node)
    assert sum(widths) == cores
    assert all(w >= min(task, cores) for w in widths), "a job narrower than the widest task"
    if cores < node:
        return
    if job_cores is None or job_cores >= node:
        # whole nodes, but for the cores beyond whole nodes, which join one job: no job straddles a node
        # boundary it need not, and the jobs span no more nodes than the request does
        assert sum(w // node for w in widths) == cores // node
        assert sum(w % node != 0 for w in widths) <= (cores % node != 0)
        assert sum(-(-w // node) for w in widths) == -(-cores // node)
        if job_cores is None:
            assert len(widths) == min(pieces, cores // node)
        else:
            assert all(w <= max(job_cores // node * node, node) + cores % node for w in widths)
    else:
        # jobs narrower than a node each lie inside one node (the last may hold a few cores beyond)
        assert all(w <= node for w in widths[:-1])


def test_three_nodes_in_two_pieces_are_two_nodes_and_one() -> None:
    assert split_request(12, 2, None, 1, 4) == [8, 4]  # not [6, 6], each straddling two nodes
    assert split_request(12, 2, None, 1, None) == [6, 6]  # cores not in nodes: as before


def test_partition_node_cores() -> None:
    assert PartitionInfo("debug", 4, 4).node_cores == 4
    assert MockBackend(nodes=64).partition().node_cores is None  # the mock's default places no nodes


def _runner(workflow: Workflow, strategy: str, backend: MockBackend, job_cores: int | None) -> Runner:
    waits = make_wait_learner(strategy_learner(strategy))
    knowledge = Knowledge(workflow, waits=waits, history=MemoryHistory())
    return Runner(
        workflow,
        make_strategy(strategy),
        backend,
        SimExecution(),
        knowledge,
        seed=1,
        max_duration=4 * 86400.0,
        job_cores=job_cores,
    )


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_requests_split_in_whole_nodes_on_the_mock(strategy: str) -> None:
    # 3 nodes x 4 cores of work on a mock partition of 4-core nodes
    workflow = Workflow("nodes", (Stage("wide", 12, 1, runtime=600.0), Stage("pairs", 6, 2, runtime=300.0)))
    for job_cores in (None, 6, 3):
        runner = _runner(workflow, strategy, MockBackend(nodes=6, cores_per_node=4), job_cores)
        result = runner.run()
        where = f"{strategy}, job_cores={job_cores}"
        assert result.status == "completed", (where, result.detail)
        requests: dict[str, list[int]] = {}
        for a in runner.controller.allocations:
            requests.setdefault(a.piece_of or a.alloc_id, []).append(a.cores)
        for widths in requests.values():
            cores = sum(widths)
            if job_cores == 3:  # jobs narrower than a node: each inside one node
                assert all(w <= 4 for w in widths[:-1]), (where, widths)
            elif cores >= 4:
                assert sum(w % 4 != 0 for w in widths) <= (cores % 4 != 0), (where, widths)
        if strategy == "asa" and job_cores is None:  # asa asks in two pieces: 12 cores are 8 + 4
            assert [8, 4] in requests.values(), requests


def test_a_task_wider_than_a_node_is_refused_before_any_work() -> None:
    backend = MockBackend(nodes=4, cores_per_node=4)
    workflow = Workflow("too-wide", (Stage("ok", 2, 4, runtime=60.0), Stage("wide", 1, 6, runtime=60.0)))
    refused = r"stage 'wide' has tasks of 6 cores, wider than a node .*\(4 cores\)"
    with pytest.raises(ConfigError, match=refused):
        _runner(workflow, "asa", backend, None)
    assert backend.queue() == []
    # where the mock places no nodes, the same task runs (one 6-core job)
    assert _runner(workflow, "asa", MockBackend(nodes=8), None).run().status == "completed"


@pytest.mark.slurm
def test_a_task_wider_than_a_slurm_node_is_refused(slurm_cluster: object, tmp_path: Path) -> None:
    from elastic.backends.slurm import SlurmBackend
    from tests.fixtures.slurm_cluster import LocalSlurmCluster

    assert isinstance(slurm_cluster, LocalSlurmCluster)
    backend = SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    assert backend.partition().node_cores == 4  # 4 nodes x 4 cores, read from `scontrol show partition`
    workflow = Workflow("too-wide", (Stage("wide", 1, 6, runtime=5.0),))
    knowledge = Knowledge(workflow, waits=make_wait_learner(strategy_learner("asa")), history=MemoryHistory())
    with pytest.raises(ConfigError, match="wider than a node of the partition"):
        Runner(workflow, make_strategy("asa"), backend, SimExecution(), knowledge)


@task(cores=6, stage="wide")
def _six_cores() -> str:
    return "wide"


@pytest.mark.timeout(60)
def test_the_front_door_refuses_a_task_wider_than_a_node_at_once() -> None:
    with (
        MockBackend(nodes=4, cores_per_node=4, clock="scaled", speedup=5.0) as backend,
        Elastic(backend, "asa", store=False, poll_interval=5.0) as el,
    ):
        future = el.submit(_six_cores)
        with pytest.raises(ConfigError, match=r"asks for 6 cores, but a node of the partition has 4"):
            future.result(timeout=5)
        with pytest.raises(ConfigError, match=r"ask for 6 cores, but a node has 4"):
            el.expect("wide", 2, cores=6)
        assert el.view().allocations == ()


@pytest.mark.slurm
@pytest.mark.timeout(120)
def test_asa_asks_whole_nodes_on_slurm_and_each_node_runs_an_agent(
    slurm_cluster: object, tmp_path: Path
) -> None:
    from elastic.backends.slurm import SlurmBackend
    from elastic.control.pool_execution import PoolExecution
    from elastic.pool.events import AgentEvent, AgentEventKind
    from tests.fixtures.slurm_cluster import LocalSlurmCluster

    assert isinstance(slurm_cluster, LocalSlurmCluster)  # emptied and healed before the test (fixture)
    backend = SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    workflow = Workflow("nodes-slurm", (Stage("wide", 12, 1, runtime=1.0),))  # 3 nodes of 4 cores
    knowledge = Knowledge(workflow, waits=make_wait_learner(strategy_learner("asa")), history=MemoryHistory())
    execution = PoolExecution(backend, node_cores=backend.partition().node_cores)
    try:
        strategy = make_strategy("asa", estimates=False)
        runner = Runner(workflow, strategy, backend, execution, knowledge, poll_interval=1.0)
        result = runner.run()
        joined = [
            e for e in execution.pool.events if isinstance(e, AgentEvent) and e.kind is AgentEventKind.JOINED
        ]
    finally:
        execution.close()
        slurm_cluster.cancel_all()
    assert result.status == "completed", result.detail
    first = runner.controller.allocations[:2]
    assert [a.cores for a in first] == [8, 4], runner.controller.allocations  # not 6 + 6, across nodes
    assert first[1].piece_of == first[0].alloc_id  # one request, two batch jobs
    agents: dict[str, list[str]] = {}
    for e in joined:
        agents.setdefault(e.alloc_id, []).append(e.detail)
    # an agent on each node of the 2-node job, with that node's cores (not one claiming all 8 on one node)
    assert agents[first[0].alloc_id] == ["4 cores", "4 cores"], agents
    assert agents[first[1].alloc_id] == ["4 cores"], agents

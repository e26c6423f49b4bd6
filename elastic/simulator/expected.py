"""Expected start of a job if it were submitted now (what ``sbatch --test-only`` answers).

The answer comes from a what-if copy of the engine: running jobs release their cores at their expected
end (start + walltime), queued jobs run for their full requested walltime, no further background job
arrives, and the probe job joins the tail of the queue. The copy runs under the same policy (without
speculation; a policy object can name another through a ``what_if_policy()`` method) until the probe
starts. Jobs still waiting for a dependency are left out of the copy,
like Slurm's estimate, which ignores jobs that cannot start yet. Jobs the caller names in ``releasing``
(its own allocations, with when it will release them) end then instead of at their walltime: a running
one gives its cores back at that time, a queued one is left out. The copy ranks held jobs with the
engine's priority model (:mod:`elastic.simulator.priority`); a queued job keeps its current rank even
if its age factor would be capped during the copy's horizon.

A policy that plans around pinned jobs (``plans_pins``, e.g.
:class:`~elastic.simulator.pinned.PinnedBackfill`) already holds a plan of every queued job: its
``probe`` answers from that plan instead, since a copy would have to replay every future pinned job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from elastic.batch import DependencyKind
from elastic.errors import ConfigError
from elastic.simulator.jobs import PENDING, RUNNING, DepRecord

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["expected_start"]


def expected_start(
    engine: Engine,
    *,
    cores: int,
    walltime: float,
    nodes: int | None = None,
    dependencies: Sequence[tuple[DependencyKind, int]] = (),
    begin: float | None = None,
    releasing: Mapping[int, float] | None = None,
) -> float | None:
    """Return when a job like this would start if submitted to ``engine`` now.

    Parameters
    ----------
    engine : Engine
        The live engine (not modified; a planning policy may first run the pass due at the
        current time).
    cores, walltime, nodes, begin
        As for :meth:`Engine.submit`.
    dependencies : sequence of (DependencyKind, int)
        Dependencies on job indices of ``engine``.
    releasing : mapping of int to float, default None
        Job index -> when the caller releases it (the current time or later; earlier counts as now):
        a running job ends then rather than at its walltime, a queued or held one is left out (the
        caller's own allocations, as they will be once it has released them). Not supported by a policy
        that plans around pinned jobs.

    Returns
    -------
    float or None
        Simulated start time, or None when the job could never start (a dependency can never be
        satisfied, or one waits on a job that is itself held by a dependency).
    """
    from elastic.simulator.base import make_policy
    from elastic.simulator.engine import Engine

    cores, _ = engine.check_geometry(cores, nodes)
    probe_plan = getattr(engine.policy, "probe", None)
    if getattr(engine.policy, "plans_pins", False) and callable(probe_plan):
        if releasing:
            raise ConfigError(
                f"expected_start: policy {engine.policy.name!r} plans around pinned jobs and cannot end "
                "jobs early in its estimate (releasing=...); ask without releasing"
            )
        answer: float | None = probe_plan(engine, cores, walltime, begin=begin, dependencies=dependencies)
        return answer
    jobs = engine.jobs
    cl = engine.cluster
    # A policy may say which policy answers what-if questions for it (``what_if_policy()``);
    # otherwise a fresh policy of the same registry name, without speculation.
    factory = getattr(engine.policy, "what_if_policy", None)
    policy = factory() if callable(factory) else make_policy(engine.policy.name.split("+")[0])
    ranking = engine.ranking
    copy = Engine(
        nodes=cl.nodes,
        cores_per_node=cl.cores_per_node,
        policy=policy,
        priority=ranking.name,
        max_age=ranking.max_age,
    )
    copy._now = engine.now
    cj = copy.jobs
    index: dict[int, int] = {}

    def clone(j: int, runtime: float) -> int:
        k = cj.append(
            job_id=jobs.job_id[j],
            name=jobs.name[j],
            user=jobs.user[j],
            cores=jobs.cores[j],
            whole=jobs.whole[j],
            walltime=jobs.walltime[j],
            runtime=runtime,
            submit=jobs.submit[j],
            begin=jobs.begin[j],
            background=True,
            notify=False,
        )
        cj.rank[k] = jobs.rank[j]
        index[j] = k
        return k

    ccl = copy.cluster
    released = dict(releasing or {})
    # a released job ends when the caller releases it: its end frees its cores the usual way (per node too)
    running = sorted(
        (max(copy.now, min(released[j], est)) if j in released else est, j) for est, j in engine.running
    )
    for est, j in running:
        start = jobs.start[j]
        k = clone(j, est - start)
        cj.state[k] = RUNNING
        cj.start[k] = start
        cj.est_end[k] = est
        cj.plan_end[k] = est
        cj.plan_state[k] = 2
        copy.running.append((est, k))
        copy._push_end(k, est)
        placement = cl.placement(j)
        if placement:
            ccl._placement[k] = placement
    ccl.free = cl.free
    ccl.idle_nodes = cl.idle_nodes
    ccl.node_free = list(cl.node_free)
    for j in engine.queue:
        if j in released:
            continue
        k = clone(j, jobs.walltime[j])
        cj.state[k] = PENDING
        copy.queue.append(k)
    for j in sorted(engine.held, key=jobs.rank.__getitem__):
        if j in jobs.deps or j in released:
            continue
        k = clone(j, jobs.walltime[j])
        cj.state[k] = PENDING
        copy.held.add(k)
        copy._push_begin(k, jobs.begin[j])
    copy._rank_floor(max((jobs.rank[j] for j in index), default=-1.0))
    mapped: list[tuple[DependencyKind, int]] = []
    for kind, parent in dependencies:
        if parent in index:
            mapped.append((kind, index[parent]))
            continue
        status = DepRecord(kind, parent).evaluate(jobs.state[parent], not math.isnan(jobs.start[parent]))
        if status == 2 or (status == 0 and parent not in index):
            return None
    probe = copy.submit(cores=cores, nodes=nodes, walltime=walltime, dependencies=mapped, begin=begin)
    while cj.state[probe] == PENDING and copy.step():
        pass
    start = cj.start[probe]
    return None if math.isnan(start) else start

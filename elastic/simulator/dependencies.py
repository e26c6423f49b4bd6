"""Job dependencies and pending reasons: when a pending job becomes eligible to start, and why not.

A job is *eligible* once its begin time has passed and every dependency on an earlier job holds
(Slurm's AND of ``after``/``afterok``/``afterany``/``afternotok``, see
:meth:`~elastic.simulator.jobs.DepRecord.evaluate`). These are plain functions over the
:class:`~elastic.simulator.jobs.JobTable`; the engine decides what to do with the jobs they name
(queue them, or cancel them under ``kill_invalid_dep``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from elastic.batch import DependencyKind, PendingReason
from elastic.errors import DependencyError
from elastic.simulator.jobs import COMPLETED, FAILED, FUTURE, PENDING, TIMEOUT, DepRecord, JobTable

__all__ = ["attach", "check_parents", "detach", "eligible", "pending_reason", "resolve_children"]

_NONE = PendingReason.NONE  # looked up once: an enum member read costs microseconds on Python 3.11


def check_parents(jobs: JobTable, dependencies: Sequence[tuple[DependencyKind, int]]) -> None:
    """Raise DependencyError unless every parent of ``dependencies`` is a submitted job of ``jobs``."""
    for _, parent in dependencies:
        if not 0 <= parent < len(jobs) or jobs.state[parent] == FUTURE:
            raise DependencyError(f"dependency on job index {parent}, which has not been submitted")


def attach(jobs: JobTable, j: int, dependencies: Sequence[tuple[DependencyKind, int]]) -> None:
    """Record the dependencies of new job ``j`` and evaluate them against their parents' state now.

    Fills ``jobs.deps[j]``, ``jobs.dep_pending[j]`` (dependencies not yet satisfied), adds ``j`` to
    each parent's ``jobs.children`` and to ``jobs.dep_never`` if one can never be satisfied.
    """
    recs = [DepRecord(kind, parent) for kind, parent in dependencies]
    jobs.deps[j] = recs
    pending = 0
    for rec in recs:
        jobs.children.setdefault(rec.parent, []).append(j)
        p = rec.parent
        rec.status = rec.evaluate(jobs.state[p], not math.isnan(jobs.start[p]))
        if rec.status == 0:
            pending += 1
        elif rec.status == 2:
            jobs.dep_never.add(j)
    jobs.dep_pending[j] = pending


def detach(jobs: JobTable, j: int) -> None:
    """Forget every dependency of job ``j`` (before :func:`attach` gives it new ones)."""
    for rec in jobs.deps.pop(j, ()):
        children = jobs.children.get(rec.parent)
        if children is not None and j in children:
            children.remove(j)
    jobs.dep_pending.pop(j, None)
    jobs.dep_never.discard(j)


def eligible(jobs: JobTable, j: int, now: float) -> bool:
    """Whether job ``j`` is pending, past its begin time and has every dependency satisfied at ``now``."""
    return (
        jobs.begin[j] <= now
        and not jobs.dep_pending.get(j, 0)
        and j not in jobs.dep_never
        and jobs.state[j] == PENDING
    )


def resolve_children(jobs: JobTable, parent: int) -> Iterator[int]:
    """Re-evaluate the dependencies of ``parent``'s pending children after its state changed.

    Lazily yields each child one of whose dependencies just became satisfied or unsatisfiable; the
    caller acts on it (queues or cancels it) before the next child is evaluated, so a cancellation
    that cascades to a later child is seen by it exactly as if handled inline.
    """
    p_state = jobs.state[parent]
    started = not math.isnan(jobs.start[parent]) or p_state in (COMPLETED, FAILED, TIMEOUT)
    for child in jobs.children[parent]:
        if jobs.state[child] != PENDING:
            continue
        changed = False
        for rec in jobs.deps[child]:
            if rec.parent != parent or rec.status != 0:
                continue
            rec.status = rec.evaluate(p_state, started)
            if rec.status:
                changed = True
                jobs.dep_pending[child] -= 1
                if rec.status == 2:
                    jobs.dep_never.add(child)
        if changed:
            yield child


def pending_reason(jobs: JobTable, j: int, now: float, queue: Sequence[int]) -> PendingReason:
    """Why job ``j`` has not started at ``now`` (Slurm's reason codes); NONE when not pending.

    Parameters
    ----------
    jobs : JobTable
        The engine's job table.
    j : int
        Job index.
    now : float
        Current simulated time, seconds.
    queue : sequence of int
        Eligible pending jobs in priority order; the first one is waiting for resources.
    """
    if jobs.state[j] != PENDING:
        return _NONE
    if j in jobs.dep_never:
        return PendingReason.DEPENDENCY_NEVER_SATISFIED
    if jobs.dep_pending.get(j, 0):
        return PendingReason.DEPENDENCY
    if jobs.begin[j] > now:
        return PendingReason.BEGIN_TIME
    if queue and queue[0] == j:
        return PendingReason.RESOURCES
    return PendingReason.PRIORITY

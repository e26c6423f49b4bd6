"""The pool's placement rule: which queued tasks start now, on which agent (a pure function).

Placement is walltime-aware, like HyperQueue's time request: a task with a runtime estimate is not
started on an agent whose allocation has less walltime left than the estimate while another allocation
(live or still requested) with enough time and cores exists; if none exists, it goes to the agent with the
most time left. Among agents with enough time the one with the least time left is chosen, keeping long
allocations for long tasks. :class:`elastic.pool.pool.Pool` builds the :class:`Offer` records and applies the
plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from elastic.pool.tasks import Task

__all__ = ["Offer", "plan_placement"]


@dataclass(frozen=True, slots=True)
class Offer:
    """Free cores an agent offers, with the walltime its allocation has left.

    Attributes
    ----------
    agent : bytes
        The agent's identity.
    alloc_id : str
        Its allocation.
    free : int
        Cores not running a task.
    remaining : float
        Seconds of walltime the allocation has left.
    """

    agent: bytes
    alloc_id: str
    free: int
    remaining: float


def plan_placement(
    tasks: Sequence[Task], offers: Sequence[Offer], can_wait: Callable[[Task], bool]
) -> list[tuple[Task, Offer]]:
    """Decide which queued tasks start now, and where; the pool's placement rule as a pure function.

    Tasks are taken oldest first; one that cannot start now does not hold back younger ones. A task
    goes to an offer with enough free cores and at least ``task.estimate`` seconds left, choosing the
    least time left (then the most free cores). When no offer has the time, the task waits if
    ``can_wait(task)`` (another allocation, live or requested, could take it), and otherwise goes to the
    fitting offer with the most time left.

    Parameters
    ----------
    tasks : sequence of Task
        Queued tasks, oldest first.
    offers : sequence of Offer
        Current offers (each agent at most once).
    can_wait : callable
        Whether a task may wait for another allocation with enough walltime.

    Returns
    -------
    list of (Task, Offer)
        Placements in order; the offers are the ones given (their ``free`` is not updated).

    Examples
    --------
    >>> short, long = Offer(b"s", "a1", 1, 20.0), Offer(b"l", "a2", 1, 600.0)
    >>> t = Task.shell("true", estimate=60.0, task_id="t")
    >>> [(task.task_id, o.alloc_id) for task, o in plan_placement([t], [short, long], lambda t: True)]
    [('t', 'a2')]
    """
    free = {o.agent: o.free for o in offers}
    plan: list[tuple[Task, Offer]] = []
    for task in tasks:
        if max(free.values(), default=0) == 0:
            break
        fits = [o for o in offers if free[o.agent] >= task.cores]
        if not fits:
            continue
        need = task.estimate or 0.0
        in_time = [o for o in fits if o.remaining >= need]
        if in_time:
            offer = min(in_time, key=lambda o: (o.remaining, -free[o.agent]))
        elif can_wait(task):
            continue
        else:
            offer = max(fits, key=lambda o: o.remaining)
        free[offer.agent] -= task.cores
        plan.append((task, offer))
    return plan

"""Big-Job: one allocation as wide as the widest stage, for the whole run.

The walltime is the first value of the speculative sequence of the workflow's *total* runtime (history
label ``"*"``); two of it where run control submits the allocation as several batch jobs and that costs
no wait (:func:`~elastic.strategies.pieces.initial_request`). If the allocation is about to reach its
walltime with work left, the next value of that sequence is pre-submitted (as wide as the widest stage
still to run); lost tasks re-run on it.
"""

from __future__ import annotations

from elastic.strategies.base import (
    Decision,
    RunView,
    merge,
    needs_allocation,
    release_idle,
    walltime_follow_ups,
)
from elastic.strategies.knowledge import TOTAL
from elastic.strategies.pieces import initial_request
from elastic.strategies.settle import follow_ups_until, release_idle_until

__all__ = ["BigJob"]


class BigJob:
    """The Big-Job strategy (the paper's over-allocation baseline: fastest, most idle core-hours).

    Examples
    --------
    >>> BigJob().name
    'bigjob'
    """

    name = "bigjob"

    def decide(self, view: RunView) -> Decision:
        """Submit the one big allocation at the start; follow up on walltime; release at the end."""
        if needs_allocation(view, TOTAL) and not view.done:
            task = max((s.cores for s in view.open_stages), default=1)
            return Decision((initial_request(view, TOTAL, view.label_width(TOTAL), task),))
        return merge(walltime_follow_ups(view, [TOTAL]), Decision(tuple(release_idle(view))))

    def settled_until(self, view: RunView) -> tuple[float, None]:
        """Return until when :meth:`decide` of ``view`` holds while only the clock moves, and no wake-up.

        (:class:`~elastic.strategies.base.Settles`.) Its own rule does not read the clock; the shared
        rules' parts do (:mod:`~elastic.strategies.settle`).
        """
        if needs_allocation(view, TOTAL) and not view.done:
            return view.now, None
        return min(follow_ups_until(view, [TOTAL]), release_idle_until(view)), None

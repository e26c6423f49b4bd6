"""Per-Stage: the allocation for a stage is submitted when the stage becomes ready (E-HPC's strategy).

Stage ``k``'s allocation is requested once every stage it depends on has completed, exactly as wide as
stage ``k``, with the first walltime of stage ``k``'s speculative sequence (two waves of it where run
control submits the request as several batch jobs and that costs no wait:
:func:`~elastic.strategies.pieces.initial_request`). An allocation whose stage is done is released at once.
Cheapest in core-hours; each stage pays a full queue wait.
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
from elastic.strategies.pieces import initial_request
from elastic.strategies.rules import backlog_held
from elastic.strategies.settle import follow_ups_until, release_idle_until

__all__ = ["PerStage"]


class PerStage:
    """The Per-Stage strategy.

    Examples
    --------
    >>> PerStage().name
    'perstage'
    """

    name = "perstage"

    def decide(self, view: RunView) -> Decision:
        """Submit for every ready stage that has no allocation yet; follow up on walltime; release.

        While the run's backlog is full (:func:`~elastic.strategies.rules.backlog_held`), none: they
        would be held back, and the strategy is asked again when a queued request starts.
        """
        releases = tuple(release_idle(view))
        submits = (
            ()
            if backlog_held(view, releases)
            else tuple(
                initial_request(view, s.name, s.width, s.cores)
                for s in view.active_stages
                if needs_allocation(view, s.name)
            )
        )
        return merge(
            Decision(releases),
            Decision(submits),
            # the rule skips every stage not ready or complete: only the active ones are passed
            walltime_follow_ups(view, [s.name for s in view.active_stages]),
        )

    def settled_until(self, view: RunView) -> tuple[float, None]:
        """Return until when :meth:`decide` of ``view`` holds while only the clock moves, and no wake-up.

        (:class:`~elastic.strategies.base.Settles`.) Its own rule does not read the clock; the shared
        rules' parts do (:mod:`~elastic.strategies.settle`).
        """
        if not view.backlog_full and any(needs_allocation(view, s.name) for s in view.active_stages):
            return view.now, None  # (while the backlog is full, only a change of allocations can free it)
        active = [s.name for s in view.active_stages]
        return min(release_idle_until(view), follow_ups_until(view, active)), None

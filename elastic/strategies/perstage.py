"""Per-Stage: the allocation for a stage is submitted when the stage becomes ready (E-HPC's strategy).

Stage ``k``'s allocation is requested once every stage it depends on has completed, exactly as wide as
stage ``k``, with the first walltime of stage ``k``'s speculative sequence. An allocation whose stage is
done is released at once. Cheapest in core-hours; each stage pays a full queue wait.
"""

from __future__ import annotations

from elastic.strategies.base import (
    Decision,
    RunView,
    Submit,
    merge,
    needs_allocation,
    release_idle,
    walltime_follow_ups,
)

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
        """Submit for every ready stage that has no allocation yet; follow up on walltime; release."""
        submits = tuple(
            Submit(s.name, s.width, view.knowledge.walltime(s.name), reason="initial")
            for s in view.stages
            if s.ready and not s.complete and needs_allocation(view, s.name)
        )
        return merge(
            Decision(tuple(release_idle(view))),
            Decision(submits),
            walltime_follow_ups(view, [s.name for s in view.stages]),
        )

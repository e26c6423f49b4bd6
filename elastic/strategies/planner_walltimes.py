"""The walltimes the stages left would request, summed over runs of consecutive stages, kept across views.

:meth:`~elastic.strategies.planner_waits.QueueWaits.headroom` asks, for each group a decision requests,
the walltime of every stage left after it; :class:`WalltimesLeft` answers from prefix sums that a later
view of the same run updates where a stage's record or runtimes changed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet

from elastic.strategies.base import RunView, StageView
from elastic.strategies.knowledge import Knowledge

__all__ = ["WalltimesLeft", "knowledge_key"]


def knowledge_key(k: Knowledge) -> tuple[object, ...]:
    """Return what a stage's first walltime request depends on but its name and its own runtimes.

    :meth:`Knowledge.walltime`; a stage's runtimes recorded since are told by
    :meth:`Knowledge.recorded_since`.
    """
    return (k, k.workflow, k.max_walltime, k.min_history, k.default_runtime, k.slack, k.overhead)


class WalltimesLeft:
    """The walltimes the stages left of one view would request, summed over runs of consecutive stages.

    :meth:`~elastic.strategies.planner_waits.QueueWaits.headroom` asks, for each group a decision
    requests, the walltime of every stage left after it and of those up to the last one as wide. Summed
    afresh each time, that was a scan of every
    stage per request: a 5,000-stage random DAG, whose first decisions request hundreds of ready stages,
    spent 15 s of CPU per decision there. Prefix sums answer each in constant time. They are the same
    sums: every walltime :meth:`~elastic.strategies.knowledge.Knowledge.walltime` gives is a whole
    number of seconds (or the partition's limit), whose float sums are exact in any order; where one is
    not whole, each sum is taken stage by stage as before.
    """

    __slots__ = ("_exact", "_prefix", "_view", "_walltimes", "_widest", "key", "recorded", "stages")

    def __init__(
        self,
        view: RunView,
        key: tuple[object, ...],
        walltime_of: Callable[[str], float],
        inexact: AbstractSet[str],
        before: WalltimesLeft | None = None,
        recorded: Iterable[str] = (),
    ) -> None:
        """Sum the walltimes of ``view``'s stages left.

        ``walltime_of``: a stage's walltime for ``key`` (:meth:`QueueWaits._walltimes_known`), and
        ``inexact``: the stages it gave a walltime not whole. ``before``: the sums of an earlier view with
        the same key; only the stages whose record changed since are read again (a task's start or end
        changes one stage of thousands), and ``recorded``, the stages whose runtimes were recorded since.
        """
        self.stages = stages = view.stages
        self.key = key
        self.recorded = 0
        """The knowledge's runtimes recorded when these were read (:meth:`Knowledge.recorded_since`)."""
        self._view = view

        def walltime(st: StageView) -> float:
            return 0.0 if st.complete else walltime_of(st.name)

        old = before.stages if before is not None else ()
        walltimes: list[float]
        if before is not None and len(old) == len(stages):
            walltimes = list(before._walltimes)
            for i, (was, st) in enumerate(zip(old, stages, strict=True)):
                if was is not st:
                    if was.name != st.name:  # another plan: read every stage
                        walltimes = [walltime(x) for x in stages]
                        break
                    walltimes[i] = walltime(st)
            else:
                for name in recorded:
                    if view.has_stage(name):
                        i = view.stage_position(name)
                        walltimes[i] = walltime(stages[i])
        else:
            walltimes = [walltime(st) for st in stages]
        self._walltimes: list[float] = walltimes
        # a stage not whole, complete in this view, only makes the sums below be taken one by one (equal)
        self._exact = not inexact
        self._prefix = [0.0, *itertools.accumulate(walltimes)]
        self._widest: dict[int, int] = {}

    def position(self, name: str) -> int:
        """Where stage ``name`` comes in the plan."""
        return self._view.stage_position(name)

    def between(self, start: int, stop: int | None) -> float:
        """Return the sum of the walltimes of the stages left at positions ``start`` to ``stop`` - 1."""
        stop = len(self.stages) if stop is None else stop
        if start >= stop:
            return 0
        if self._exact:
            return self._prefix[stop] - self._prefix[start]
        k = self._view.knowledge
        return sum(k.walltime(s.name) for s in self.stages[start:stop] if not s.complete)

    def last_at_least(self, cores: int) -> int:
        """Return the position of the last stage left at least ``cores`` wide (-1: none)."""
        found = self._widest.get(cores)
        if found is None:
            found = next(
                (
                    i
                    for i in range(len(self.stages) - 1, -1, -1)
                    if not self.stages[i].complete and self.stages[i].width >= cores
                ),
                -1,
            )
            self._widest[cores] = found
        return found

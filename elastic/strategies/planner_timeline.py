"""When ``asa``'s stages are needed and end: one decision's predicted timeline of the run.

:class:`Timeline` predicts, from the run view, each stage's work left, its end (through the predicted
start of the allocation kept for it: its wait to come), when a stage can start (its need), and which of
the run's running allocations are released by a need. The planner
(:class:`~elastic.strategies.planner.Planner`) makes one per decision: the predicted ends are memoised
for that decision's view only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elastic.allocations import Allocation
from elastic.strategies.base import Releasing, RunView, StageView
from elastic.strategies.planner_rules import _beside, _known, _minute
from elastic.strategies.search import StagePlan, Waits

__all__ = ["Timeline"]


class Timeline:
    """One decision's predictions of when the run's stages are needed and end.

    Parameters
    ----------
    view : RunView
        The run as the decision sees it.
    waits : Waits
        ``waits(cores, follow_up)``: a new allocation's wait, quantiles at :data:`timing.PROBS` (a pending
        allocation's start is predicted by its follow-up wait).
    forecast : bool, default False
        ``waits`` is the scheduler's estimate, made now (not a wait seen before): a pending allocation
        that waited past it is taken to start at once (:meth:`ready`).
    """

    def __init__(self, view: RunView, waits: Waits, *, forecast: bool = False) -> None:
        self.view = view
        self._waits = waits
        self.forecast = forecast
        self._seen: dict[str, float | None] = {}  # stage: its predicted end, memoised
        self._ready: dict[str, tuple[Allocation, float]] = {}  # pending allocation: its predicted start

    def work(self, s: StageView) -> float:
        """Return the expected seconds of work ``s`` has left: no sooner than its re-run tasks can end.

        A task lost with its allocation starts again from scratch (:attr:`StageView.rerun_end`): HPC2N
        capacity, Statistics 28, run 1, the straggler of ``chunk_stats`` lost at its allocation's walltime
        after an hour ran another hour, while ``period_stats``'s 28 cores, started at that instant, idled
        through it, priced as if the stage ended at once, and were released only once they could no
        longer cover their stage (29 core-h idle).
        """
        k = self.view.knowledge
        if s.complete:
            return 0.0
        if s.start_time is None:
            return k.expected_duration(s.name)
        elapsed = self.view.now - s.start_time
        left = max(0.0, k.expected_duration(s.name, elapsed) - elapsed)
        if s.rerun_end is not None:
            left = max(left, s.rerun_end - self.view.now)
        if s.rerun_floor is not None:
            # a task lost and not started again waits for cores, then runs as long as a run of the stage
            # that outlived its lost attempt: its end is counted from those cores, not from its loss
            # (CyberShake 28, synthetic queue, run 20: an ``ExtractSGT`` task lost at its walltime after
            # 3.3 h waited 11 h for cores while ``SeismogramSynthesis``'s 28 cores, asked for its predicted
            # end, started and idled 2.5 h, priced as if the re-run ended 3.3 h after the loss; issue 28's
            # grid: 75 to 76 of 150 cells met, the held-out Lublin-Feitelson trace 19 of 30 either way)
            came = self._cores_for(s, s.rerun_floor)
            left = max(left, came - self.view.now + k.expected_duration(s.name, s.rerun_floor))
        return left

    def _cores_for(self, s: StageView, floor: float) -> float:
        """When cores come for the tasks of ``s`` that wait to run again after a loss of ``floor`` seconds.

        Now if an allocation kept for it runs with more walltime left than ``floor``, else the soonest
        predicted start of a pending one (:meth:`ready`), else now (none asked yet: the liveness rule asks).
        """
        now = self.view.now
        starts = []
        for a in self.view.allocations_serving(s.name, live_only=True):
            if a.running and a.remaining(now) > floor:
                return now
            if a.pending:
                starts.append(self.ready(a))
        return min(starts, default=now)

    def chain_plans(
        self, chain: Sequence[StageView], held: Mapping[str, int] | None = None
    ) -> list[StagePlan]:
        """Return the search's stages for ``chain`` (:func:`_dag_order`), each with its siblings' cores.

        A ready stage is as wide as its tasks not done need (:meth:`RunView.width_left`), as the walltime
        follow-ups and the liveness rule ask. ``held``: per stage, cores allocations already kept for it
        have; the stage is planned for the rest (at least one task).
        """
        works = [self.work(s) for s in chain]
        beside = _beside(chain, works)
        view = self.view
        held = held or {}
        out = []
        for s, w, b in zip(chain, works, beside, strict=True):
            width = view.width_left(s.name) if s.ready else s.width
            if s.name in held:
                width = max(width - held[s.name], s.cores)
            out.append(StagePlan(s.name, width, w, b))
        return out

    def end(self, name: str) -> float | None:
        """Predicted end of stage ``name`` (None: it has no allocation and is not ready to plan)."""
        if name in self._seen:
            return self._seen[name]
        self._seen[name] = None  # guards against cycles in a malformed live plan
        s = self.view.stage(name)
        if s.end_time is not None:
            end: float | None = s.end_time
        elif s.start_time is not None:
            end = self.view.now + self.work(s)
        else:
            start: float | None = self.view.now
            for dep in s.depends_on:
                e = self.end(dep)
                start = None if e is None or start is None else max(start, e)
            live = self.view.allocations_serving(name, live_only=True)
            if start is not None and live:
                start = max(start, min(self.ready(a) for a in live))
            end = None if start is None or not live else start + self.work(s)
        self._seen[name] = end
        return end

    def ready(self, a: Allocation) -> float:
        """Predicted start of allocation ``a`` (now if it runs)."""
        if a.running:
            return self.view.now
        if a.eligible_time is None and a.dependencies:
            # read through the predicted ends of the stages it waits for, some of which may be being
            # predicted (a cycle's guard): not kept
            return self._predicted_start(a)
        found = self._ready.get(a.alloc_id)
        if found is None or found[0] is not a:
            found = self._ready[a.alloc_id] = (a, self._predicted_start(a))
        return found[1]

    def _predicted_start(self, a: Allocation) -> float:
        """:meth:`ready` of a pending allocation, predicted afresh.

        Its wait to come: the mean of its wait's quantiles above what it has waited. One that has waited
        past all of them waits as long again, where its wait was priced by waits seen before (no
        scheduler's estimate): queue waits are heavy-tailed, and in the three traces of issue 28's
        capacity queues the median wait still to come of a 16-128-core job that had waited 10 min to
        12 h was 1.1-68x what it had waited (recorded waits: HPC2N, CTC SP2, SDSC Blue). Taken to start
        at once, such a request made its stage's successors needed early: Epigenomics 112 on SDSC Blue
        capacity asked their wide allocations hours early, which idled until their stage came (1.27x
        split Per-Stage's core-hours, against 1.06x). Past the scheduler's estimate (:attr:`forecast`),
        which holds every running job to its walltime and is made afresh at every decision, it is taken
        to start at once, as before: as long again there released allocations that had started early
        and ran the stages before theirs (SoyKB 56, HPC2N replay, run 3: 62.8 h against 41.4 h).
        """
        eligible = a.eligible_time
        if eligible is None:
            eligible = a.submit_time if a.submit_time is not None else self.view.now
            for dep_id, _ in a.dependencies:
                dep = next((b for b in self.view.allocations if b.alloc_id == dep_id), None)
                if dep is None or dep.end_time is not None:
                    continue
                ends = [self.end(x) for x in dep.labels if _known(self.view, x)]
                eligible = max([eligible, *(e for e in ends if e is not None)])
        waited = max(0.0, self.view.now - eligible)
        q = self._waits(a.cores, True)
        tail = q[q > waited]
        if len(tail):
            return max(self.view.now, eligible + float(tail.mean()))
        return self.view.now if self.forecast else eligible + 2.0 * waited

    def released_by(self, kept: dict[str, tuple[str, ...]], need: float) -> Releasing:
        """Return this run's running allocations released by ``need``, each with when it is released.

        One is released when every stage kept on it has ended (predicted), if that is by ``need``; one not
        in ``kept`` is being released by this decision (now). A request for a stage needed at ``need``
        competes for the cores these give back from then on, not with them held to their walltime
        (:class:`~elastic.strategies.base.Estimate`).
        """
        out: list[tuple[str, float]] = []
        for a in self.view.live_allocations:  # a running one is live (all: 57 M reads on 5,000 stages)
            if not a.running:
                continue
            if a.alloc_id not in kept:  # released by this decision
                out.append((a.alloc_id, _minute(self.view.now)))
                continue
            labels = [x for x in kept[a.alloc_id] if _known(self.view, x)]
            ends = [self.end(x) for x in labels]
            if labels and all(e is not None and e <= need for e in ends):
                out.append((a.alloc_id, _minute(max(e for e in ends if e is not None))))
        return tuple(sorted(out))

    def anchored(self, s: StageView, visited: frozenset[str] = frozenset()) -> bool:
        """Whether ``s``'s need rests on running allocations only, not on a pending one's wait to come.

        Every predecessor is done or started, or waits (as do its own predecessors) only on an allocation
        that runs. A need predicted through a pending allocation's wait compounds two guesses (a first
        wait is barely predictable: rank correlation about 0 with the wait that follows); an allocation
        requested on it without a dependency can start days early and idle, with a walltime to match.
        """
        for dep in s.depends_on:
            if dep in visited or not _known(self.view, dep):
                return False
            d = self.view.stage(dep)
            if d.complete or d.start_time is not None:
                continue
            if not any(a.running for a in self.view.allocations_serving(dep, live_only=True)):
                return False
            if not self.anchored(d, visited | {dep}):
                return False
        return True

    def soonest_need(self, s: StageView) -> float:
        """When stage ``s`` can start at the soonest: as :meth:`need`, with no wait for stages before it.

        Where a stage before it has no allocation yet, :meth:`need` cannot say; an allocation that idles
        until ``s`` can start is priced by this lower bound, so it is never released for idling longer
        than it can be expected to.
        """
        return self._soonest(s, {})

    def _soonest(self, s: StageView, memo: dict[str, float]) -> float:
        if s.ready:
            return self.view.now
        start = self.view.now
        for dep in s.depends_on:
            if dep not in memo:
                memo[dep] = self.view.now  # guards against cycles in a malformed live plan
                if _known(self.view, dep):
                    d = self.view.stage(dep)
                    if d.end_time is not None:
                        memo[dep] = d.end_time
                    elif d.start_time is not None:
                        memo[dep] = self.view.now + self.work(d)
                    else:
                        memo[dep] = self._soonest(d, memo) + self.work(d)
            start = max(start, memo[dep])
        return start

    def need(self, s: StageView) -> float | None:
        """When stage ``s`` can start: now if ready, else its predecessors' predicted end (None: unknown)."""
        if s.ready:
            return self.view.now
        ends = [self.end(d) for d in s.depends_on]
        if not ends or any(e is None for e in ends):
            return None
        return max(self.view.now, *(e for e in ends if e is not None))

"""ASA: pre-submit each stage's allocation so that it starts when its predecessor ends.

**The ASA timing rule.** For a stage ``k`` with predecessors ``P`` (its ``depends_on``), the allocation
for ``k`` (as wide as ``k``, walltime from ``k``'s speculative sequence) is submitted at::

    t_submit(k) = max over p in P of predicted_end(p)  -  predicted_wait(geometry of k)

where ``predicted_wait`` comes from the ASA learner for ``k``'s geometry (:meth:`Knowledge.predict_wait`,
one sample per planned allocation, kept until it is submitted) and ``predicted_end(p)`` is

- the end time, when ``p`` has completed;
- ``start(p) + E[duration(p) | duration(p) > elapsed]`` when ``p`` is running: its runtime history and its
  progress so far (:meth:`Knowledge.expected_duration`);
- ``max(ready time of p's allocation, predicted end of p's predecessors) + E[duration(p)]`` when ``p``
  has an allocation but has not started; the allocation is expected to be ready at ``submit + the wait
  predicted for it`` (or now, if it runs already);
- unknown while ``p`` has no allocation: ``k`` waits (stages are planned in order).

The first stage is submitted at once. Stage ``k``'s allocation may start before ``p`` ends; then it first
takes remaining tasks of ``p`` if they fit (the pool places any ready task on any live allocation, oldest
stage first - our improvement over the paper), otherwise it idles, and the idle core-seconds show up as
overhead in :mod:`elastic.metrics`.

Options (the paper's sensitivity analysis, Section 4.5):

``dependency="afterany"`` (default, the paper's default)
    ``k``'s allocation depends ``afterany`` on its predecessors' allocations: it cannot start (and be
    charged) before they ended, which the driver does as soon as the predecessor stage is done.
``dependency="after"``
    It may start once the predecessors' allocations have *started*: earlier, so it can take their
    remaining tasks, at the risk of idling.
``dependency=None, naive=True`` ("ASA naive")
    No batch dependencies; an allocation that starts more than ``early_tolerance`` seconds before its
    stage can use it and has no task to take is cancelled, and re-submitted by the timing rule above
    (``reason="resubmit"``). The re-submission plans with at most the wait that allocation just had,
    so a learner that over-predicts cannot make it cancel and re-submit over and over.

Walltime follow-ups and releasing finished stages' allocations are shared with the other strategies
(:func:`~elastic.strategies.base.walltime_follow_ups`, :func:`~elastic.strategies.base.release_idle`).
The driver feeds every real wait to the learner, so predictions improve across stages and runs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass

from elastic.allocations import Allocation
from elastic.batch import DependencyKind
from elastic.errors import ConfigError
from elastic.strategies.base import (
    Action,
    Cancel,
    Decision,
    RunView,
    StageView,
    Submit,
    WakeAt,
    merge,
    release_idle,
    walltime_follow_ups,
)
from elastic.strategies.settle import SETTLE_MARGIN, follow_ups_until, release_idle_until

__all__ = ["ASA"]

logger = logging.getLogger(__name__)

_DEPENDENCIES = {"afterany": DependencyKind.AFTERANY, "after": DependencyKind.AFTER, None: None}


def _to_time(view: RunView) -> Iterator[tuple[StageView, list[Allocation]]]:
    """Yield the stages the timing rule decides for, with their allocations so far.

    A stage is left out when it is complete, has an allocation not ended yet, or ended under us with work
    queued (the walltime follow-up rule replaces that one).
    """
    for s in view.open_stages:
        mine = view.allocations_for(s.name)
        if any(not a.ended for a in mine):
            continue
        if mine and s.ready and not mine[-1].cancelled:
            continue
        yield s, mine


class ASA:
    """The ASA strategy.

    Parameters
    ----------
    dependency : {"afterany", "after", None}, default "afterany"
        Batch dependency of a stage's allocation on its predecessors' allocations; ``None`` = none.
    naive : bool, default False
        Cancel and re-submit allocations that start much too early (meant for ``dependency=None``).
    early_tolerance : float, default 600.0
        Seconds an idle allocation may wait for its stage before ``naive`` cancels it.

    Examples
    --------
    >>> ASA().name, ASA(dependency=None, naive=True).name
    ('asa-paper', 'asa-naive')
    """

    def __init__(
        self, *, dependency: str | None = "afterany", naive: bool = False, early_tolerance: float = 600.0
    ) -> None:
        if dependency not in _DEPENDENCIES:
            raise ConfigError(
                f"ASA: dependency must be one of 'afterany', 'after' or None, got {dependency!r}"
            )
        if not early_tolerance >= 0:
            raise ConfigError(f"ASA: early_tolerance must be >= 0 seconds, got {early_tolerance!r}")
        self.dependency = dependency
        self.naive = naive
        self.early_tolerance = early_tolerance
        self._planned_wait: dict[str, float] = {}
        self._wait_cap: dict[str, float] = {}

    @property
    def name(self) -> str:
        """``"asa-paper"``; ``"asa-after"`` with ``after`` dependencies; ``"asa-naive"`` without, cancels."""
        if self.naive and self.dependency is None:
            return "asa-naive"
        return "asa-after" if self.dependency == "after" else "asa-paper"

    # -- predictions ---------------------------------------------------------------------------------

    def _wait(self, view: RunView, stage: StageView) -> float:
        """Return the wait planned for ``stage``'s next allocation (sampled once, kept until submitted)."""
        if stage.name not in self._planned_wait:
            predicted = view.knowledge.predict_wait(stage.width)
            # after a too-early start the wait just seen is fresher evidence than the learner's sample
            self._planned_wait[stage.name] = min(predicted, self._wait_cap.get(stage.name, predicted))
        return self._planned_wait[stage.name]

    def predicted_end(self, view: RunView, name: str) -> float | None:
        """Predicted end time of stage ``name`` (see the module docstring), or None if it has no plan."""
        return self._predicted_end(view, name, {})

    def _predicted_end(self, view: RunView, name: str, memo: dict[str, float | None]) -> float | None:
        """:meth:`predicted_end`, each stage's value computed once per ``memo`` (one view).

        Without the memo a stage's end was recomputed through every path of the DAG that reaches it, for
        every stage asked about at every step (exponential in a DAG's depth of joins).
        """
        if name in memo:
            return memo[name]
        s = view.stage(name)
        k = view.knowledge
        result: float | None
        if s.end_time is not None:
            result = s.end_time
        elif s.start_time is not None:
            elapsed = view.now - s.start_time
            result = max(view.now, s.start_time + k.expected_duration(name, elapsed))
        else:
            live = view.allocations_for(name, live_only=True)
            result = None
            if live:
                ready = min(_ready_at(view, a) for a in live)
                ends = []
                for dep in s.depends_on:
                    end = self._predicted_end(view, dep, memo)
                    if end is None:
                        break
                    ends.append(end)
                else:
                    result = max([ready, *ends]) + k.expected_duration(name)
        memo[name] = result
        return result

    # -- the decision --------------------------------------------------------------------------------

    def decide(self, view: RunView) -> Decision:
        """Apply the timing rule to every unplanned stage; naive cancels; walltime follow-ups; release."""
        actions: list[Action] = []
        wake: float | None = None
        memo: dict[str, float | None] = {}  # predicted ends of this view (decide changes neither)
        for s, mine in _to_time(view):
            prev_end = 0.0
            known = True
            for dep in s.depends_on:
                end = self._predicted_end(view, dep, memo)
                if end is None:
                    known = False
                    break
                prev_end = max(prev_end, end)
            if not known:
                continue
            wait = self._wait(view, s)
            at = prev_end - wait if s.depends_on else view.now
            if view.now < at:
                wake = at if wake is None else min(wake, at)
                continue
            kind = _DEPENDENCIES[self.dependency]
            after = s.depends_on if kind is not None and not s.ready else ()
            actions.append(
                Submit(
                    s.name,
                    s.width,
                    view.knowledge.walltime(s.name),
                    after=after,
                    dependency=kind or DependencyKind.AFTERANY,
                    reason="resubmit" if mine else "initial",
                    predicted_wait=wait,
                )
            )
            self._planned_wait.pop(s.name, None)
            logger.debug(
                "asa: submit %s at %.0f (predecessors end ~%.0f, predicted wait %.0f)",
                s.name,
                view.now,
                prev_end,
                wait,
            )
        if self.naive:
            actions.extend(self._too_early(view, memo))
        return merge(
            Decision(tuple(release_idle(view))),
            Decision(tuple(actions), wake),
            walltime_follow_ups(view, [s.name for s in view.active_stages]),  # it skips the others
        )

    def _too_early(self, view: RunView, memo: dict[str, float | None]) -> list[Cancel]:
        out: list[Cancel] = []
        for s in view.open_stages:
            if s.ready:
                continue
            prev_end = max(
                (self._predicted_end(view, d, memo) or view.now for d in s.depends_on), default=view.now
            )
            if prev_end - view.now <= self.early_tolerance:
                continue
            for a in view.allocations_for(s.name):
                if a.running and view.busy_cores(a.alloc_id) == 0:
                    assert a.start_time is not None, "a running allocation has a start time"
                    assert a.submit_time is not None, "a requested allocation has a submit time"
                    self._wait_cap[s.name] = a.start_time - a.submit_time
                    self._planned_wait.pop(s.name, None)
                    early = prev_end - view.now
                    out.append(Cancel(a.alloc_id, f"started {early:.0f} s before stage {s.name} can use it"))
        return out

    # -- how long a decision holds (Settles) ------------------------------------------------------------

    def settled_until(self, view: RunView) -> tuple[float, WakeAt | None]:
        """Return until when :meth:`decide` of ``view`` holds while only the clock moves, and its wake-up.

        (:class:`~elastic.strategies.base.Settles`.) The timing rule reads the clock through the
        predicted ends of the stages a request waits for, and its test ``now < t_submit``. Each such end
        is the clock, a time, or runs ahead of the clock (a stage that outlived every estimate is expected
        to end ever later) until some time (:meth:`_course`): the test holds until ``t_submit`` for a
        time, for ever for an end that runs far enough ahead, and fails at once for the clock. The
        wake-up, ``t_submit`` of the soonest, is computed as :meth:`decide` computes it, for a later
        clock. ``naive`` reads the clock through the test of a too early start, which once passed stays
        passed while no end runs ahead. The shared rules as :mod:`~elastic.strategies.settle` says.
        """
        now = view.now
        until = math.inf
        waiting: list[tuple[tuple[str, ...], float]] = []  # (predecessors, planned wait) of each wake-up
        memo: dict[str, _Course | None] = {}
        for s, _ in _to_time(view):
            if not s.depends_on:
                return now, None  # requested now
            courses = [_Course(_CONST, 0.0, math.inf)]  # decide's max starts at 0.0
            for dep in s.depends_on:
                course = self._course(view, dep, memo)
                if course is None:
                    break
                courses.append(course)
            else:
                wait = self._planned_wait.get(s.name)
                if wait is None:
                    return now, None
                prev = _latest(courses, now)
                until = min(until, prev.until)
                if prev.kind == _CONST and now < prev.value - wait:
                    until = min(until, prev.value - wait)
                elif not (prev.kind == _AHEAD and prev.value - wait > SETTLE_MARGIN):
                    return now, None
                waiting.append((s.depends_on, wait))
        if self.naive:
            until = min(until, self._too_early_until(view, memo))
        names = [s.name for s in view.active_stages]  # follow_ups_until skips every other stage
        until = min(until, release_idle_until(view), follow_ups_until(view, names))

        # the predicted ends that hold as they are until then, and those that are unknown, are not computed
        # again (each is the very value decide computes); the others follow the clock
        fixed = {
            name: None if c is None else c.value
            for name, c in memo.items()
            if c is None or (c.kind == _CONST and c.until >= until)
        }

        def wake_at(t: float) -> float | None:
            later = view.at(t)
            ends = dict(fixed)
            wake: float | None = None
            for deps, wait in waiting:  # as decide: max from 0.0 over the predecessors, less the wait
                prev_end = 0.0
                for dep in deps:
                    end = self._predicted_end(later, dep, ends)
                    assert end is not None, "a predecessor's end is known while the decision holds"
                    prev_end = max(prev_end, end)
                at = prev_end - wait
                wake = at if wake is None else min(wake, at)
            return wake

        if not waiting:
            return until, None
        if all(dep in fixed for deps, _ in waiting for dep in deps):
            # every end it reads holds as it is: the same wake-up at every clock, computed once (it is
            # asked at every poll while the decision holds)
            wake = wake_at(now)
            return until, lambda t: wake
        return until, wake_at

    def _course(self, view: RunView, name: str, memo: dict[str, _Course | None]) -> _Course | None:
        """Return how :meth:`predicted_end` of ``name`` moves with the clock (None: unknown, as it is).

        It reads the clock as ``max(now, c)``: a running stage expected to end at ``c`` (its expected
        duration holds until its progress passes the next recorded runtime:
        :meth:`~elastic.strategies.knowledge.Knowledge.expected_duration_until`; one that outlived every
        estimate is expected to end ever later, ahead of the clock), an allocation expected to start at
        ``c`` (a running one: now).
        """
        if name in memo:
            return memo[name]
        s = view.stage(name)
        k = view.knowledge
        now = view.now
        out: _Course | None
        if s.end_time is not None:
            out = _Course(_CONST, s.end_time, math.inf)
        elif s.start_time is not None:
            elapsed = now - s.start_time
            steady = k.expected_duration_until(name, elapsed)
            ends = s.start_time + k.expected_duration(name, elapsed)
            if steady is None:  # OUTLIVED x elapsed: ahead of the clock by ever more
                out = _Course(_AHEAD, max(now, ends) - now, math.inf)
            elif ends > now:
                out = _Course(_CONST, ends, min(ends, s.start_time + steady))
            else:
                out = _Course(_CLOCK, 0.0, s.start_time + steady)
        else:
            live = view.allocations_for(name, live_only=True)
            out = None
            if live:
                ready = _Course(_CLOCK, 0.0, math.inf)  # a running allocation is ready now
                if not any(a.running for a in live):
                    starts = [
                        a.submit_time + a.predicted_wait
                        for a in live
                        if a.submit_time is not None and a.predicted_wait is not None
                    ]
                    if len(starts) < len(live):  # it asks the learner, or reads the clock: not promised
                        ready = _Course(_CLOCK, 0.0, now)
                    elif min(starts) > now:
                        ready = _Course(_CONST, min(starts), min(starts))
                courses = [ready]
                for dep in s.depends_on:
                    course = self._course(view, dep, memo)
                    if course is None:
                        break
                    courses.append(course)
                else:
                    top = _latest(courses, now)
                    duration = k.expected_duration(name)
                    kind = _CONST if top.kind == _CONST else _AHEAD
                    out = _Course(kind, top.value + duration, top.until)
        memo[name] = out
        return out

    def _too_early_until(self, view: RunView, memo: dict[str, _Course | None]) -> float:
        """Until when :meth:`_too_early` cancels nothing, as it does now.

        For a stage with an idle running allocation, ``max(ends of its predecessors, now) - now <=
        early_tolerance`` holds now (else it would cancel), and keeps holding as the clock moves while no
        end runs ahead of the clock.
        """
        now = view.now
        until = math.inf
        for s in view.open_stages:
            if s.ready:
                continue
            if not any(a.running and view.busy_cores(a.alloc_id) == 0 for a in view.allocations_for(s.name)):
                continue
            for dep in s.depends_on:
                course = self._course(view, dep, memo)
                if course is None or (course.kind == _CONST and not course.value):
                    continue  # None or 0.0: the clock (``or view.now``)
                if course.kind == _AHEAD or (
                    course.kind == _CONST and course.value - now > self.early_tolerance
                ):
                    return now
                until = min(until, course.until)
        return until


_CONST, _CLOCK, _AHEAD = 0, 1, 2


@dataclass(frozen=True, slots=True)
class _Course:
    """How a predicted end moves with the clock ``t`` over ``[now, until)`` (``until <= now``: unknown).

    ``_CONST``: it is ``value``; ``_CLOCK``: it is ``t``; ``_AHEAD``: it is at least ``t + value``.
    """

    kind: int
    value: float
    until: float


def _latest(courses: list[_Course], now: float) -> _Course:
    """Return the course of the latest of ``courses`` (their ``max``)."""
    until = min(c.until for c in courses)
    ahead = [c for c in courses if c.kind == _AHEAD]
    if ahead:
        return _Course(_AHEAD, max(c.value for c in ahead), min(c.until for c in ahead))
    top = max((c.value for c in courses if c.kind == _CONST), default=-math.inf)
    if not any(c.kind == _CLOCK for c in courses):
        return _Course(_CONST, top, until)
    if top > now:  # the clock reaches it at ``top``
        return _Course(_CONST, top, min(until, top))
    return _Course(_CLOCK, 0.0, until)


def _ready_at(view: RunView, a: Allocation) -> float:
    if a.running:
        return view.now
    planned = a.predicted_wait if a.predicted_wait is not None else view.knowledge.predict_wait(a.cores)
    submitted = a.submit_time if a.submit_time is not None else view.now
    return max(view.now, submitted + planned)

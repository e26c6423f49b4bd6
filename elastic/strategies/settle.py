"""How long a decision holds while only the clock moves: the time-dependent parts of the shared rules.

Run control asks a strategy at every poll (every 30 backend seconds), and over a run of days most polls
see nothing new: the same stages, allocations and busy cores, only a later clock. A strategy that can say
until when its decision stays the same (:class:`~elastic.strategies.base.Settles`) is not asked again
before then, and its last decision is carried out instead: the same decision it would have made, at the
same polls, so a run is the same run, only cheaper on a virtual clock.

What the clock alone changes in the rules every strategy shares (:mod:`~elastic.strategies.rules`):

- :func:`~elastic.strategies.rules.release_idle` releases an idle allocation whose stages are ready once
  its walltime left falls below a stage's expected duration (its follow-up takes the tasks):
  :func:`release_idle_until`;
- :func:`~elastic.strategies.rules.walltime_follow_ups` asks for a follow-up once a running allocation's
  walltime left falls below its stages' expected work left: :func:`follow_ups_until`. The work left of a
  running stage is a step function of its progress (:meth:`~elastic.strategies.knowledge.Knowledge.
  expected_duration_until`) that falls one second a second, or grows with it once the stage outlived
  every estimate; the walltime left falls one second a second. The first crossing is solved for.

Each function returns a backend time ``T``: the rule's result stays what it is at ``view.now`` for every
clock in ``[view.now, T)`` while nothing else changes (``math.inf``: for ever; ``view.now`` or earlier:
no promise). A result that asks the wait learner for a prediction (a follow-up's lead, a drained job's
check) is not covered here: the learner may draw it at random, so run control re-asks where a decision
asked for one (:attr:`~elastic.strategies.knowledge.Knowledge.predictions`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from elastic.allocations import Allocation
from elastic.strategies.knowledge import OUTLIVED, TOTAL
from elastic.strategies.rules import _all_done, _known, followed
from elastic.strategies.view import RunView

__all__ = ["SETTLE_MARGIN", "follow_ups_until", "release_idle_until", "work_fits_until"]

SETTLE_MARGIN = 1e-3
"""Backend seconds of slack on every time computed here: a decision is taken again this long before a
computed time, which may differ from the decision's own comparisons in the last bits."""


def release_idle_until(view: RunView) -> float:
    """Return until when :func:`~elastic.strategies.rules.release_idle` of ``view`` stays the same.

    ``view.now`` where it releases something now (a decision with actions is not reused).
    """
    until = math.inf
    for a in view.live_allocations:  # every ended one is skipped below
        labels = a.labels
        if a.ended or not labels:
            continue
        if _all_done(view, labels):
            if a.pending or view.busy_cores(a.alloc_id) == 0:
                return view.now
            continue  # a busy job of done stages: drained or not by the queue's state, not by the clock
        if a.cancelled or not a.running or view.cores_in_use(a.alloc_id) > 0:
            continue
        known = [x for x in labels if _known(view, x)]
        until = min(until, _replaced_until(view, a, known))
    return until


def _replaced_until(view: RunView, a: Allocation, labels: Sequence[str]) -> float:
    """Until when :func:`~elastic.strategies.rules._replaced` of running ``a`` stays the same.

    Its walltime left only falls: a stage whose expected duration fits it now stops fitting once the
    clock passes ``walltime_end - duration``; one that does not fit never will again.
    """
    open_ = [x for x in labels if not view.label_done(x)]
    if not open_ or TOTAL in open_ or not all(view.stage(x).ready for x in open_):
        return math.inf
    end = a.walltime_end
    if end is None:
        return view.now
    left = a.remaining(view.now)
    until = math.inf
    for x in open_:
        duration = view.knowledge.expected_duration(x)
        if duration <= left:
            until = min(until, end - duration)
    return until


def follow_ups_until(view: RunView, labels: Sequence[str]) -> float:
    """Return until when :func:`~elastic.strategies.rules.walltime_follow_ups` (default lead) stays the same.

    For ``labels`` as the strategy passes them. ``view.now`` where it requests a follow-up now, or where
    an allocation's walltime left is already below its expected work (the rule then asks the learner for
    a lead at every decision, and run control never reuses such a decision).
    """
    until = math.inf
    for label, mine in followed(view, labels):
        running = [a for a in mine if a.running]
        if not running:
            if mine[-1].cancelled:
                continue
            return view.now  # it requests the replacement now
        current = max(running, key=lambda a: a.walltime_end or 0.0)
        end = current.walltime_end
        if end is None:
            return view.now
        until = min(until, work_fits_until(view, label, end))
    return until


def work_fits_until(view: RunView, label: str, end: float) -> float:
    """Return until when the expected work left of ``label`` fits before ``end``, as it does at ``view.now``.

    The test :func:`~elastic.strategies.rules.walltime_follow_ups` makes:
    ``remaining_work(view, label) <= end - now``. Between two changes of a stage's expected duration (its
    progress passing a recorded runtime) and two ends of expected work, both sides are linear in the
    clock: the walltime left falls at one second a second, each started stage's work left falls at one
    (while some is left) or grows at ``OUTLIVED - 1`` (a stage that outlived every estimate). The
    result is the first crossing within that stretch, or its end; ``view.now`` if the work does not fit
    now.
    """
    k = view.knowledge
    now = view.now
    gap = now - end  # expected work left minus walltime left, summed below (<= 0: it fits)
    slope = 1.0  # of gap per second of clock: the walltime left falls by one a second
    stretch = math.inf  # the first time a stage's expected duration or the slope changes
    unstarted = k.unstarted_durations()  # a dict lookup for each stage not started, in the same order
    for s in view.open_stages if label == TOTAL else (view.stage(label),):
        name = s.name
        if s.complete:
            continue
        if s.start_time is None:
            expected0 = unstarted.get(name)
            gap += k.expected_duration(name) if expected0 is None else expected0
            continue
        elapsed = now - s.start_time
        expected = k.expected_duration(name, elapsed)
        gap += max(0.0, expected - elapsed)
        steady = k.expected_duration_until(name, elapsed)
        if steady is None:  # outlived every estimate: expected OUTLIVED x elapsed, its work left grows
            slope += OUTLIVED - 1.0
            continue
        stretch = min(stretch, s.start_time + steady)
        ends = s.start_time + expected
        if ends > now:  # its work left falls a second a second until it is expected to end
            slope -= 1.0
            stretch = min(stretch, ends)
    if gap > 0.0:
        return now
    if slope <= 0.0:
        return stretch
    return min(stretch, now - gap / slope)

"""Which wait prices a new allocation for ``asa``, and the walltime a request asks where it costs no wait.

:class:`QueueWaits` answers the planner (:class:`~elastic.strategies.planner.Planner`): the scheduler's
estimate where the backend gives one, scaled by its bias learned from this run's own requests
(:func:`estimate_bias`); else, for a follow-up once the run saw a wait, the run's latest wait; else the
learned distribution. The same estimate says how much walltime a request can ask beyond its stages'
without waiting longer (:meth:`QueueWaits.headroom`, :meth:`QueueWaits.waves_walltime`); without one, a
request asks the walltime of the later stages a hold of it could save a wait for.

Where the backend gives the scheduler's estimate of a new job's wait (``sbatch --test-only``:
:attr:`~elastic.strategies.base.RunView.estimate`), every new allocation's wait is priced by it, asked
afresh at every decision: on the synthetic queue and HPC2N replay it ranks the waits that follow at
0.89-0.95 (Spearman; the run's latest wait at 0.18-0.35), and it sees the hour-long wait a run meets after
minutes-long ones coming, which no learner fed by that run's waits can. It is pessimistic (every running
job is held to its walltime: the median wait that followed an estimate of over 10 minutes was 0.46-0.73x
of it), which costs some idle cores bought early; ``estimates=False`` (the planner's option) does without
it. ``calibrate`` (the planner's option) scales it by its bias learned from this run's own requests (the
estimate each was made on against the wait until its first piece started: :func:`estimate_bias`), which a
Slurm user can compute. A request for a stage that starts once this run's running allocation is released
is priced by the estimate with that allocation released when it will be (``releasing``,
:class:`~elastic.strategies.base.Estimate`): held to its walltime, it would make every such request look
long whenever the rest of the machine is busy (asked at the last decision before each wide allocation's
release, for the next request of that width, the estimate ranked the wait that followed at 0.76 plainly
and 1.00 released on Statistics 56 on HPC2N replay, 0.65 and 0.75 on Statistics 112; with no release at
all, Statistics 112 cost 247.8 core-h instead of 235.8). ``benchmarks/bench_estimate_rank.py`` measures
both.

Without an estimate: the wait of a run's first allocation is a distribution (quantiles from
:meth:`~elastic.strategies.knowledge.Knowledge.wait_quantiles`), updated by every wait the runs sharing
its learner see. Once an allocation of the run has started, a follow-up's wait is priced as the run's
latest wait (:meth:`~elastic.strategies.base.RunView.latest_wait`; the planner's ``run_waits=False``: the
learned follow-up distribution instead). Waits within one run correlate at 0.76-0.81 (rank, synthetic
queue and HPC2N replay), while the learned distribution of a queue whose waits are mostly 0 with a few of
hours is a log-normal of huge spread whose mean is days: priced by it, every short narrow stage is worth
holding the wide allocation across, in every run. (The learner's quantiles are capped at the longest wait
it saw, :class:`~elastic.learners.ewma.LogEWMA`; the spread stays.) Issue 9's grid
(``docs/guide/asa-planning.md``) measured both.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from elastic.allocations import Allocation
from elastic.strategies import merge, pieces, timing
from elastic.strategies.base import Releasing, RunView
from elastic.strategies.planner_rules import window
from elastic.strategies.planner_walltimes import WalltimesLeft, knowledge_key
from elastic.strategies.search import Waits

__all__ = ["BIAS_FLOOR", "BIAS_PRIOR", "HEADROOM_SLACK", "QueueWaits", "estimate_bias"]

HEADROOM_SLACK = 60.0
"""Seconds of estimated wait that walltime headroom may cost a request (:meth:`QueueWaits.headroom`)."""

BIAS_FLOOR = 60.0
"""Seconds added to both sides of an estimate's ratio to the wait that followed (:func:`estimate_bias`):
an estimate of 0 followed by a wait of seconds says little."""

BIAS_PRIOR = 1.0
"""Pseudo-observations of an unbiased estimate (ratio 1) the run's own ratios are averaged with
(:func:`estimate_bias`): one short wait after a long estimate does not make every later estimate 0."""


def estimate_bias(ratios: Sequence[float], prior: float = BIAS_PRIOR) -> float:
    """Return the factor to scale the scheduler's estimate by, learned from this run's requests.

    ``ratios`` are ``(wait + BIAS_FLOOR) / (estimate + BIAS_FLOOR)`` of the run's requests so far: the
    wait that followed each estimate the planner requested on. The factor is their geometric mean shrunk
    toward 1 by ``prior`` pseudo-observations of 1: ``exp(sum(log r) / (n + prior))``.

    Examples
    --------
    >>> estimate_bias([])
    1.0
    >>> round(estimate_bias([0.25]), 3)  # one request that waited a quarter of its estimate
    0.5
    >>> round(estimate_bias([0.25, 0.25, 0.25]), 3)
    0.354
    """
    return _bias_of([math.log(r) for r in ratios], prior)


def _bias_of(logs: list[float], prior: float = BIAS_PRIOR) -> float:
    """:func:`estimate_bias` of the ratios whose logs are ``logs`` (the calibration keeps each log)."""
    if not logs:
        return 1.0
    return float(math.exp(sum(logs) / (len(logs) + prior)))


class QueueWaits:
    """A new allocation's wait as the planner prices it, and the scheduler's estimate it reads.

    One per planner: it keeps the estimates the planner's requests were made on (:attr:`given`, for the
    calibration), and memoises, per decision, the estimates asked and the calibration factor.

    Parameters
    ----------
    run_waits : bool, default True
        Price a follow-up's wait as this run's latest wait once one started (the planner's option).
    estimates : bool, default True
        Price every new allocation's wait by the scheduler's estimate where the backend gives one.
    calibrate : bool, default True
        Scale the scheduler's estimate by its bias learned from this run's own requests.
    """

    def __init__(
        self,
        *,
        run_waits: bool = True,
        estimates: bool = True,
        calibrate: bool = True,
        horizon: int | None = None,
    ) -> None:
        self.run_waits = bool(run_waits)
        self.horizon = horizon
        """The planner's horizon: the stages whose walltimes an estimate is asked with (:func:`window`)."""
        self.estimates = bool(estimates)
        self.calibrate = bool(calibrate)
        self.given: dict[tuple[float, str], float] = {}
        """By decision time and label, the estimate each request was made on (the planner records it)."""
        self._bias: tuple[float | None, float] = (None, 1.0)
        # the log of the ratio of each request given whose outcome cannot change any more, or None where
        # it is left out (:meth:`calibrated`), read in :attr:`given`'s order: the sums add up the same
        self._final: dict[tuple[float, str], float | None] = {}
        # how many requests at the head of :attr:`given` are settled, and the logs of their ratios
        self._settled: tuple[int, tuple[float, ...]] = (0, ())
        self._asked: tuple[object, dict[tuple[int, Releasing], float | None]] = (None, {})
        # per width, the walltime an estimate is asked with, and the longest of any width (with _asked)
        self._walltimes: tuple[dict[int, float], float | None] | None = None
        self._left: WalltimesLeft | None = None  # the walltimes of the stages left, for headroom
        # each stage's walltime, and those not whole, for the knowledge's key (_walltimes_left)
        # and how many runtimes the knowledge had recorded then (:meth:`Knowledge.recorded_since`)
        self._walltime_of: tuple[tuple[object, ...] | None, dict[str, float], set[str], int] = (
            None,
            {},
            set(),
            0,
        )

    def estimated(self, view: RunView) -> bool:
        """Whether the scheduler's estimate prices waits now (:attr:`estimates` on, the backend gives it).

        The methods here that then call ``view.estimate`` write the test out, so that the type checker
        knows it is not None.
        """
        return self.estimates and view.estimate is not None

    def waits(self, view: RunView, cores: int, follow_up: bool, releasing: Releasing = ()) -> np.ndarray:
        """Return quantiles of a new allocation's wait (:mod:`~elastic.strategies.planner`, "Which wait").

        The scheduler's estimate where it gives one, with this run's allocations in ``releasing`` ending
        when it releases them (those the allocation is requested to follow); else, for a follow-up once
        this run saw a wait, the run's latest wait; else the learned distribution.
        """
        estimate = self.estimate(view, cores, releasing)
        if estimate is not None:
            return np.full(len(timing.PROBS), estimate * self.calibrated(view))
        if follow_up and self.run_waits:
            latest = view.latest_wait(cores)
            if latest is not None:
                return np.full(len(timing.PROBS), latest)
        return view.knowledge.wait_quantiles(cores, timing.PROBS, follow_up=follow_up)

    def estimate(self, view: RunView, cores: int, releasing: Releasing = ()) -> float | None:
        """Return the scheduler's estimate of the wait of ``cores`` cores asked for now (None: none, or off).

        Asked for the longest walltime a stage of that width still to run within the planner's horizon
        (:attr:`horizon`) would request (of any stage if none is of that width), since a job's walltime
        decides where it can backfill, with the allocations in ``releasing`` ending when they are
        released; once per width and ``releasing`` per decision.
        """
        if not self.estimates or view.estimate is None:
            return None
        if self._asked[0] != (view.now, view.estimate):
            self._asked = ((view.now, view.estimate), {})
            self._walltimes = None
        answers = self._asked[1]
        key = (cores, releasing)
        if key not in answers:
            if self._walltimes is None:
                # the longest walltime per width of the stages left the planner plans, and of all of them,
                # in one pass a decision (a pass per width read every ready stage of a wide DAG each time)
                widest: dict[int, float] = {}
                longest: float | None = None
                walltime_of = self._walltimes_known(view)
                for s in window(view, self.horizon):
                    w = walltime_of(s.name)
                    width = s.width
                    if width not in widest or w > widest[width]:
                        widest[width] = w
                    if longest is None or w > longest:
                        longest = w
                self._walltimes = (widest, longest)
            walltime = self._walltimes[0].get(cores, self._walltimes[1])
            answers[key] = None if walltime is None else view.estimate(cores, walltime, releasing)
        return answers[key]

    def calibrated(self, view: RunView) -> float:
        """Return the factor the scheduler's estimate is scaled by now (1 unless :attr:`calibrate`).

        Each request made on an estimate (:attr:`given`, by decision time and label) is matched to the
        first request of that label submitted then; its wait is until half its pieces started: the first
        of two (from then its cores may idle; on the published shapes, synthetic queue, 28 cores, the last
        piece's start left 6 of 7 cells over 1.10x Per-Stage's core-hours, the first piece's 2), the
        middle one of many. A request in jobs of one task (``job_cores=1``: a 28-core request is 28 jobs)
        has a first job that backfills at once and a last that may wait hours; read at its first job the
        factor fell towards 0, so that each later request was asked too late for most of its jobs. Tuned
        on issue 28's grid with every strategy in jobs of one task (seed 1: read at the first job 76 of
        150 cells met, at the middle one 82, none more slower than both baselines); checked at seed 2 on
        the synthetic queue and the replay (30 to 32 of 60) and on the Lublin-Feitelson trace (21 to 23
        of 30) (``docs/results/strategies.md``, "A request of many jobs read at its middle job"). One
        fewer than half of whose pieces started counts, as a lower bound, once the ratio of its wait so
        far exceeds the factor from the started ones.
        """
        if not self.calibrate or not self.given:
            return 1.0
        if self._bias[0] == view.now:
            return self._bias[1]
        final = self._final
        # the settled requests at the head of ``given`` (every one before them settled too) are not read
        # at all: their logs are kept in order, and the walk starts after them
        settled, head = self._settled
        rest = list(itertools.islice(self.given.items(), settled, None))
        # the labels and times of the requests whose outcome may still change: a request made within 2 s
        # of another of its stage's may take the other's jobs, so neither is settled while both are open
        near: dict[str, list[float]] = {}
        for key, _ in rest:
            if key not in final:
                near.setdefault(key[1], []).append(key[0])
        # the requests by their stage, in order, each with its jobs: a request's pieces share its stage,
        # so the view's index by stage has them all (grouping every allocation of the run at each decision
        # was most of this on a 5,000-stage DAG); only the labels of open requests are grouped
        of_stage: dict[str, dict[str, list[Allocation]]] = {}
        logs = list(head)  # of the ratios of the requests that started, in ``given``'s order
        waiting: list[float] = []
        used: set[str] = set()
        unmatched: list[tuple[float, str]] = []
        for key, given in rest:
            if key in final:  # settled at an earlier decision: its ratio's log, or left out (None)
                outcome = final[key]
                if outcome is not None:
                    logs.append(outcome)
                continue
            t, label = key
            requests = of_stage.get(label)
            if requests is None:
                requests = of_stage[label] = {}
                for a in view.allocations_for(label):
                    requests.setdefault(a.request, []).append(a)
            match = next((r for r, jobs in requests.items() if r not in used and _made_at(jobs, t)), None)
            if match is None:
                if t < view.now - 1.0:
                    # no request was made then (the submission cap or the backlog held it back): every
                    # request made within a second of ``t`` is in the view, so it never matches
                    unmatched.append(key)
                continue
            used.add(match)
            jobs = requests[match]
            starts = [j.start_time for j in jobs]
            started = sorted(s for s in starts if s is not None)
            middle = (len(starts) - 1) // 2  # the first of two pieces, the middle one of many
            log: float | None = None
            if len(started) > middle:  # half its pieces started: from then its cores may idle
                wait = started[middle] - t
                log = math.log((wait + BIAS_FLOOR) / (given + BIAS_FLOOR))
                logs.append(log)
            elif not any(j.ended and j.start_time is None for j in jobs):
                waiting.append((view.now - t + BIAS_FLOOR) / (given + BIAS_FLOOR))
                continue
            # Settled once no piece is pending (a pending job's eligible time, which the match reads, may
            # still be set; a later piece's start is no earlier than the first) and no other open request
            # of its stage was made within 2 s of it, nor can be (every one made from now on is later):
            # kept, so each decision reads only the open requests (thousands on a 5,000-stage DAG)
            if (
                t < view.now - 2.0
                and not any(j.pending for j in jobs)
                and all(abs(u - t) > 2.0 or u == t for u in near[label])
            ):
                final[key] = log
        for key in unmatched:  # forgotten: each decision read them all again (thousands held back)
            del self.given[key]
        # the head grows by the settled requests that now follow it (none of them is ever forgotten)
        grown = list(head)
        for key in itertools.islice(self.given, settled, None):
            if key not in final:
                break
            settled += 1
            outcome = final[key]
            if outcome is not None:
                grown.append(outcome)
        self._settled = (settled, tuple(grown))
        # estimate_bias's factor, from the logs (each taken once): the same sums, in the same order
        bias = _bias_of(logs)
        bias = _bias_of(logs + [math.log(r) for r in waiting if r > bias])
        self._bias = (view.now, bias)
        return bias

    def wait_fn(self, view: RunView, releasing: Releasing = ()) -> Waits:
        """Return :meth:`waits` for stages that start once the allocations in ``releasing`` are released."""
        return lambda cores, follow_up: self.waits(view, cores, follow_up, releasing)

    def waves_walltime(
        self, view: RunView, width: int, walltime: float, idling: float = 0.0, releasing: Releasing = ()
    ) -> float:
        """Return the walltime a piece of ``width`` cores asks for stages of ``walltime``: one wave, or two.

        The pieces of a request wait in the queue apart: one that starts before the others runs its stages'
        tasks alone, in waves, until they do, and asked for one wave it can run out with tasks on it (HPC2N
        replay, Montage 56, run 21: ``background``'s first piece started 0.6 h before the second, timed
        out with its second wave running, and the follow-up waited 7 h). But a longer walltime waits longer
        where the scheduler plans every job's walltime (conservative backfill): on HPC2N capacity against
        baselines split as finely, pieces asking two waves took 1.05-1.64x the better baseline's makespan.
        So a piece asks :data:`~elastic.strategies.pieces.WAVES` waves only where the scheduler's
        estimate starts it no later than with one, as :meth:`headroom` does for holds; without an
        estimate (or with ``estimates`` off), one wave (the walltime rule's follow-up continues a piece
        that runs out). ``idling``: walltime asked on top, to idle until the stages' need. The rule is
        every strategy's (:func:`elastic.strategies.pieces.waves_walltime`): Big-Job and Per-Stage ask it
        for the jobs run control splits their requests into.
        """
        if not self.estimates:
            return walltime + idling
        return pieces.waves_walltime(view, width, walltime, idling, releasing)

    def headroom(self, view: RunView, g: merge.Group, walltime: float, releasing: Releasing) -> float:
        """Return the walltime to request for group ``g``: ``walltime``, or more where it costs no wait.

        An allocation can be held across the stages after its own (:func:`hold.hold_through`) only if its
        walltime covers them, and a batch job's walltime cannot be extended once it runs. Two extensions,
        each asked of the scheduler's estimate:

        - **For holds**: the stages after ``g`` up to the last one at least as wide as ``g`` (the stages a
          hold of this allocation could save a wait for), where the estimate starts the longer request no
          later (within :data:`HEADROOM_SLACK`) than ``walltime`` alone. Without it, Montage 28 on the
          busy synthetic queue (run 29) could not hold its first allocation across ``fit`` when the
          estimate said 20 h for the next 28 cores, and waited them. Without an estimate (none given,
          or the planner's ``estimates`` off) nothing tells what the longer walltime costs, and it is
          always asked: asked never, no allocation could be held and ``asa`` ran as Per-Stage does,
          asking ahead (1000Genome 112 on HPC2N capacity, run 23: ``individuals``' 56 cores ended with
          it, and the next 56 waited 25 h, where split Big-Job ran every stage after it on its first
          piece). On issue 28's three capacity queues, where strategies get no estimate, 69 of 90
          cells met against 60, at lower core-hours (``docs/results/strategies.md``).
        - **For every stage left** (a trailing narrow stage too: the allocation is then not killed at its
          walltime in the middle of a stage that runs long, which costs a lost task and a follow-up
          wait), only where both requests start at once: where the request waits, a longer walltime can
          lose the backfill holes that open when running jobs end before their walltime, which the
          estimate (every job held to its walltime) cannot see, and for a trailing narrow stage nothing
          is gained in return (BLAST 28 on HPC2N replay, run 16: a first request of 28 cores with merge's
          walltime added waited 23.8 h where Per-Stage's waited 10.3 h).

        Unused walltime is not charged.
        """
        left = self._walltimes_left(view)
        last = max(left.position(x) for x in g.stages)
        k = view.knowledge
        cap = math.inf if k.max_walltime is None else max(k.max_walltime, walltime)
        widest = left.last_at_least(g.cores)  # the last stage left at least as wide as g
        for_holds = min(walltime + left.between(last + 1, widest + 1), cap) if widest > last else walltime
        if not self.estimates or view.estimate is None:  # nothing says what it costs: asked for holds
            return for_holds
        short_wait = view.estimate(g.cores, walltime, releasing)
        if short_wait is None:
            return walltime
        asked = walltime
        # every stage left after g's (g's own all lie at or before ``last``)
        everything = min(walltime + left.between(last + 1, None), cap)
        if everything > walltime and short_wait <= HEADROOM_SLACK:
            long_wait = view.estimate(g.cores, everything, releasing)
            if long_wait is not None and long_wait <= HEADROOM_SLACK:
                return everything
        if for_holds > walltime:
            long_wait = view.estimate(g.cores, for_holds, releasing)
            if long_wait is not None and long_wait <= short_wait + HEADROOM_SLACK:
                asked = for_holds
        return asked

    def _walltimes_known(self, view: RunView) -> Callable[[str], float]:
        """Return ``walltime(stage)`` of ``view``'s knowledge, kept across views while its key holds."""
        k = view.knowledge
        key = knowledge_key(k)
        if self._walltime_of[0] != key:
            self._walltime_of = (key, {}, set(), k.recorded_since(0)[0])
        else:
            # a stage's walltime changes only with its own runtimes: those recorded since are read again
            # (every stage again at each runtime recorded was a tenth of a 5,000-stage DAG's run)
            count, labels = k.recorded_since(self._walltime_of[3])
            for name in labels:
                self._walltime_of[1].pop(name, None)
                self._walltime_of[2].discard(name)
            self._walltime_of = (*self._walltime_of[:3], count)
        known, inexact = self._walltime_of[1], self._walltime_of[2]

        def walltime(name: str) -> float:
            w = known.get(name)
            if w is None:
                w = known[name] = k.walltime(name)
                if not w.is_integer():
                    inexact.add(name)
            return w

        return walltime

    def _walltimes_left(self, view: RunView) -> WalltimesLeft:
        """Return the walltimes of ``view``'s stages left, built once per list of stages and knowledge."""
        k = view.knowledge
        key = knowledge_key(k)
        left = self._left
        recorded = k.recorded_since(0 if left is None else left.recorded)
        if left is None or left.stages is not view.stages or left.key != key or recorded[1]:
            # each stage's walltime depends on the knowledge (the key) and its own runtimes only: kept
            # across views, so a view whose stages changed (a task started or ended) looks up what did not
            # change instead of asking the speculative sequence for every stage left again (a 5,000-stage
            # DAG: 17 ms a view); a stage whose runtime was recorded since is read again
            walltime_of = self._walltimes_known(view)
            before = left if left is not None and left.key == key else None
            left = self._left = WalltimesLeft(
                view, key, walltime_of, self._walltime_of[2], before, recorded[1] if before else ()
            )
            left.recorded = recorded[0]
        return left


def _made_at(jobs: Sequence[Allocation], t: float) -> bool:
    """Whether the request of ``jobs`` was made at decision time ``t`` (within a second), unchained."""
    first = jobs[0].submit_time
    return (
        first is not None
        and abs(first - t) <= 1.0
        and all(j.eligible_time is None or j.eligible_time <= t + 1.0 for j in jobs)
    )

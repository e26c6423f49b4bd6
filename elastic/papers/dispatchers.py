"""The baselines and the predictor of the CP-dispatching experiment (:mod:`elastic.papers.cpdispatch`).

* :class:`HistoryPredictor`: the data-driven duration heuristic (mean of the last two runtimes of the same
  user and job name), learnt on-line;
* :class:`PriorityRule`: a PBS-like priority-rule dispatcher (longest wait first, no reservation);
* :class:`PredictedEasy`: FCFS with EASY backfilling planned on given durations instead of the requests.

The two dispatchers are queue policies of :class:`~elastic.simulator.engine.Engine` (hence of the mock
backend) and take the duration of each engine job from a mapping the caller fills before submitting.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Hashable, Mapping

from elastic.simulator.engine import Engine
from elastic.simulator.jobs import PENDING

__all__ = ["HistoryPredictor", "PredictedEasy", "PriorityRule"]


class HistoryPredictor:
    """The data-driven heuristic: mean of the last two runtimes of the same user and job name.

    Falls back to the user's last two runtimes, then to the request; never above the request. Learnt
    on-line: :meth:`learn` is called as each job ends.
    """

    def __init__(self) -> None:
        self._by_name: dict[Hashable, deque[float]] = defaultdict(lambda: deque(maxlen=2))
        self._by_user: dict[Hashable, deque[float]] = defaultdict(lambda: deque(maxlen=2))

    def predict(self, user: Hashable, name: Hashable, request: float) -> float:
        """Return the predicted runtime (seconds) of a job about to be submitted."""
        hist = self._by_name.get((user, name)) or self._by_user.get(user)
        if not hist:
            return request
        return min(request, sum(hist) / len(hist))

    def learn(self, user: Hashable, name: Hashable, runtime: float) -> None:
        """Record the runtime of a job that just ended."""
        self._by_name[(user, name)].append(runtime)
        self._by_user[user].append(runtime)


class PriorityRule:
    """PBS-like priority-rule dispatcher: longest-waiting job first, smaller demand on ties; no reservation.

    Parameters
    ----------
    durations : mapping of int to float
        Duration of each engine job, for the demand tie-break (cores x duration).
    """

    name = "pbs"

    def __init__(self, durations: Mapping[int, float]) -> None:
        self.durations = durations
        self.reservations: dict[int, float] = {}

    def schedule(self, engine: Engine) -> None:
        """Start, in priority order, every queued job that fits."""
        q = engine.queue
        jobs = engine.jobs
        cores = jobs.cores
        cl = engine.cluster
        d = self.durations
        started = False
        for j in sorted(q, key=lambda j: (jobs.submit[j], cores[j] * d[j], jobs.rank[j])):
            if not cl.free:
                break
            if cl.fits(cores[j], jobs.whole[j]):
                engine.start(j)
                started = True
        if started:
            q[:] = [j for j in q if jobs.state[j] == PENDING]


class PredictedEasy:
    """FCFS with EASY backfilling planned on the given durations instead of the requests.

    A running job is expected to end at ``start + duration``, or in one second when it already ran longer
    (as the CP dispatcher assumes); a queued job may jump the blocked head if it fits now and ends by the
    head's shadow time by its duration, or uses only the cores the head leaves over.

    Parameters
    ----------
    durations : mapping of int to float
        Duration of each engine job.
    """

    name = "easy"

    def __init__(self, durations: Mapping[int, float]) -> None:
        self.durations = durations
        self.reservations: dict[int, float] = {}

    def schedule(self, engine: Engine) -> None:
        """Start the head jobs that fit, then backfill behind the blocked head."""
        q = engine.queue
        jobs = engine.jobs
        cores = jobs.cores
        cl = engine.cluster
        k = 0
        while k < len(q) and cores[q[k]] <= cl.free:
            engine.start(q[k])
            k += 1
        del q[:k]
        if not q or not cl.free:
            return
        now = engine.now
        d = self.durations
        head = q[0]
        ends = sorted((max(jobs.start[j] + d[j], now + 1.0), cores[j]) for _, j in engine.running)
        avail, shadow, extra = cl.free, math.inf, 0
        for end, c in ends:
            avail += c
            if avail >= cores[head]:
                shadow, extra = end, avail - cores[head]
                break
        self.reservations.setdefault(head, shadow)
        started = False
        for j in q[1:]:
            c = cores[j]
            if c > cl.free:
                continue
            in_time = now + d[j] <= shadow
            if in_time or c <= extra:
                if not in_time:
                    extra -= c
                engine.start(j)
                started = True
                if not cl.free:
                    break
        if started:
            q[:] = [j for j in q if jobs.state[j] == PENDING]

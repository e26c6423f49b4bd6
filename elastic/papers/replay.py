"""Replay jobs with uncertain runtimes on the simulator, resubmitting each killed run with a longer request.

Both stochastic-scheduling papers model a runtime system on top of the batch scheduler: a job is
submitted with the first request of its sequence; if it is killed at its walltime it is submitted again
(at the kill, before the scheduler's next pass, at the tail of the queue) with the next, longer request,
until a run completes. :func:`replay` drives :class:`~elastic.simulator.engine.Engine` this way and
returns, per job, when its successful run completed and how many runs it took.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.papers.held import LARGE
from elastic.simulator.base import QueuePolicy
from elastic.simulator.engine import Engine
from elastic.simulator.jobs import PENDING, TIMEOUT

__all__ = ["JobSpec", "Replayed", "replay"]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of an experiment.

    Attributes
    ----------
    arrival : float
        Submit time of its first run (seconds).
    cores : int
        Processors it needs (rigid).
    runtime : float
        Its actual runtime (seconds, > 0); every run, failed or not, restarts from scratch.
    requests : tuple of float
        Walltime requests in submission order, increasing; a run with request ``r < runtime`` is killed
        at ``r`` and the next request is submitted. The last request must be ``>= runtime``.
    large : bool
        Counted among the large jobs (response time "large jobs apart").
    speculable : bool
        A stochastic job: its engine jobs are named ``"large"`` (reservation held by
        :class:`~elastic.papers.held.HeldBackfill`, may be started speculatively into a gap) and flagged
        background (``easy+speculative`` speculates those); False for backfilling jobs.
    """

    arrival: float
    cores: int
    runtime: float
    requests: tuple[float, ...]
    large: bool = True
    speculable: bool = True


@dataclass(frozen=True, slots=True)
class Replayed:
    """Per-job outcome of :func:`replay` (arrays in the order of the given jobs).

    Attributes
    ----------
    arrival, completion, runtime : ndarray of float
        First submit time, end of the successful run, actual runtime (seconds).
    cores : ndarray of int
    runs : ndarray of int
        Runs started, the successful one included (speculative runs killed at a gap's end count too).
    large : ndarray of bool
    processors : int
        Size of the simulated machine.
    """

    arrival: npt.NDArray[np.float64]
    completion: npt.NDArray[np.float64]
    runtime: npt.NDArray[np.float64]
    cores: npt.NDArray[np.int64]
    runs: npt.NDArray[np.int64]
    large: npt.NDArray[np.bool_]
    processors: int

    def utilisation(self, *, until_drained: bool = False) -> float:
        """Return useful work over the machine's capacity, from the first arrival.

        Killed runs are wasted: only ``cores * runtime`` of each job's successful run counts.

        Parameters
        ----------
        until_drained : bool, default False
            False: the window ends at the last completion of any job. True: the speculative-scheduling
            paper's Eq. (1) (Gainaru et al., ICPP 2019): the window ends at ``sigma``, the first time
            after the last large job completes at which every backfilling job that arrived before it
            has completed, and only the work that arrived before ``sigma`` counts (later arrivals of
            the backfilling stream are outside the measured window).
        """
        start = float(self.arrival.min())
        if not until_drained or not self.large.any():
            span = float(self.completion.max()) - start
            return float((self.cores * self.runtime).sum()) / (self.processors * span)
        small = ~self.large
        sigma = float(self.completion[self.large].max())
        while True:
            late = small & (self.arrival < sigma) & (self.completion > sigma)
            if not late.any():
                break
            sigma = float(self.completion[late].max())
        counted = self.large | (small & (self.arrival < sigma))
        work = float((self.cores * self.runtime)[counted].sum())
        return work / (self.processors * (sigma - start))

    def response(self, large_only: bool = False) -> float:
        """Mean of completion - arrival (seconds), over all jobs or the large ones only."""
        mask = self.large if large_only else np.ones_like(self.large)
        return float((self.completion - self.arrival)[mask].mean())

    def stretch(self) -> float:
        """Mean of (completion - arrival) / runtime over all jobs."""
        return float(((self.completion - self.arrival) / self.runtime).mean())


class _Ends:
    """Observer handing each ended run to ``on_end`` at the instant it ends (before the next pass)."""

    def __init__(self) -> None:
        self.on_end: Callable[[int], None] = lambda job: None

    def job_started(self, job: int) -> None:
        """Nothing to do when a run starts."""

    def job_ended(self, job: int) -> None:
        """Pass the run on; ``on_end`` reads its state from the engine's table."""
        self.on_end(job)


def _check(jobs: Sequence[JobSpec], processors: int) -> None:
    if processors < 1:
        raise ConfigError(f"processors must be >= 1, got {processors}")
    if not jobs:
        raise ConfigError("no jobs to replay")
    for i, s in enumerate(jobs):
        if not 1 <= s.cores <= processors:
            raise ConfigError(f"job {i} needs {s.cores} cores; the machine has {processors}")
        if not (math.isfinite(s.runtime) and s.runtime > 0 and math.isfinite(s.arrival)):
            raise ConfigError(f"job {i}: runtime must be finite and > 0, arrival finite")
        r = s.requests
        if not r or any(b <= a for a, b in itertools.pairwise(r)) or r[-1] < s.runtime:
            raise ConfigError(
                f"job {i}: requests must be increasing and end at or above its runtime {s.runtime}; got {r}"
            )


def replay(
    jobs: Sequence[JobSpec],
    *,
    processors: int,
    policy: str | QueuePolicy[Engine],
    on_submit: Callable[[int, int, int], None] | None = None,
    on_done: Callable[[Engine], None] | None = None,
) -> Replayed:
    """Simulate the jobs on ``processors`` one-core nodes under ``policy``; resubmit killed runs.

    Jobs arriving at the same time are submitted in the given order (so the caller sets the initial
    queue order of a batch).

    Parameters
    ----------
    jobs : sequence of JobSpec
    processors : int
        Processors of the machine.
    policy : str or QueuePolicy
        A queue policy name (``easy``, ``conservative``, ``sejf``, ...) or instance.
    on_submit : callable or None
        Called as ``on_submit(engine_job, job, request_index)`` for every run submitted (so a policy can
        look up what it knows of the job, e.g. the distribution of its runtime).
    on_done : callable or None
        Called with the engine once every job has completed (to read its job table and policy, e.g. to
        break the machine time down into useful, killed and idle parts).

    Returns
    -------
    Replayed

    Raises
    ------
    ConfigError
        A job does not fit, has no request covering its runtime, or the list is empty.
    """
    _check(jobs, processors)
    ends = _Ends()
    eng = Engine(nodes=processors, policy=policy, observer=ends)
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival)
    owner: dict[int, tuple[int, int]] = {}  # engine index -> (job, request index)
    runs = np.zeros(len(jobs), dtype=np.int64)
    completion = np.full(len(jobs), np.nan)

    def submit(i: int, k: int, defer_pass: bool = False) -> None:
        s = jobs[i]
        if on_submit is not None:  # before the submit: its scheduling pass may already ask about it
            on_submit(len(eng.jobs), i, k)
        j = eng.submit(
            cores=s.cores,
            walltime=s.requests[k],
            runtime=s.runtime,
            notify=True,
            background=s.speculable,
            name=LARGE if s.speculable else "small",
            defer_pass=defer_pass,
        )
        owner[j] = (i, k)

    def ended(j: int) -> None:
        i, k = owner[j]
        state = eng.jobs.state[j]
        if state == PENDING:  # a speculative run killed at the gap's end: requeued as is
            return
        runs[i] += 1 + eng.jobs.requeues[j]
        if state == TIMEOUT:  # resubmitted at the kill, before the scheduler's next pass
            submit(i, k + 1, defer_pass=True)
        else:
            completion[i] = eng.jobs.end[j]

    ends.on_end = ended

    nxt = 0
    while True:
        ta = jobs[order[nxt]].arrival if nxt < len(order) else math.inf
        te = eng.next_event_time()
        if ta == math.inf and te == math.inf:
            break
        if ta <= te:
            eng.run(until=ta)
            while nxt < len(order) and jobs[order[nxt]].arrival == ta:
                submit(order[nxt], 0)
                nxt += 1
        else:
            eng.step()
    if np.isnan(completion).any():
        raise ConfigError("some jobs never completed (the policy starved them)")
    if on_done is not None:
        on_done(eng)
    return Replayed(
        arrival=np.array([s.arrival for s in jobs], dtype=np.float64),
        completion=completion,
        runtime=np.array([s.runtime for s in jobs], dtype=np.float64),
        cores=np.array([s.cores for s in jobs], dtype=np.int64),
        runs=runs,
        large=np.array([s.large for s in jobs]),
        processors=processors,
    )

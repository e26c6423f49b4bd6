"""The submission-rate cap: allocation control never asks a batch system for jobs faster than a set rate.

A strategy that goes wrong (a clock far too fast, allocations that end before their agents connect, a job
script that fails at once) must not turn into thousands of ``sbatch`` calls: a run once submitted 11,761
allocations in 200 s and ran no task. :class:`SubmissionRate` is the one gate every batch job of a run
passes (:meth:`~elastic.control.controller.AllocationController.step` asks it before each request); a
request it holds back is asked for again at the next step, which comes no later than
:meth:`SubmissionRate.pending` says.

Four rules, on the backend's clock (real seconds on Slurm and the local backend, simulated seconds on
the mock's virtual clock):

- **A token bucket**: at most ``burst`` jobs at once, then ``per_minute`` jobs a minute. In any window of
  ``T`` seconds at most ``burst + per_minute * T / 60`` jobs are submitted (a request of more jobs than
  ``burst``, the pieces of one wide request, waits for a full bucket and then counts against the
  following ones). The defaults, 30 at once and 30 a minute, are below Slurm's own RPC rate limit
  (``SlurmctldParameters=rl_enable``: a bucket of 30 refilled by 2 a second) and far above what a
  workflow's stages ask for.
- **A back-off after failures**, as HyperQueue's allocation queues have (``RateLimiter`` in
  ``crates/hyperqueue/src/server/autoalloc/state.rs``: escalating delays between submissions after
  failures, the queue paused after too many): after ``k`` allocations in a row ended ``FAILED``, the
  next job waits ``failure_delays[k]`` seconds (the last delay for more) after the latest submission or
  failure. An allocation that ran and ended any other way resets ``k``. Where HyperQueue pauses the queue
  until a user resumes it, a run here goes on at the slowest rate (one job per 30 min by default) and
  says so: a run is never stalled by the cap, only slowed.
- **A total**: at most ``max_allocations`` batch jobs in one run (20,000 by default: four for each stage
  of the largest declared workflow, :data:`elastic.limits.MAX_STAGES`). A run that reaches it, a strategy
  resubmitting for ever, stops there with :class:`~elastic.errors.LimitReachedError` (the run ends
  ``failed`` with the limit and how to raise it in the message; a front door fails its tasks with it)
  instead of submitting at the sustained rate for hours.
- **A backlog**: at most ``max_queued`` requests of the run waiting for cores in the batch queue at once
  (32 by default), as HyperQueue's allocation queues keep at most ``--backlog`` allocations queued. A
  request counts while one of its batch jobs is pending and not held by a dependency on another of the
  run's jobs (those wait for the run, not for cores); the pieces of one request count once. A request
  over the backlog waits until one queued starts or leaves the queue (it is asked again at the next step),
  so a wide random DAG with hundreds of stages ready at once on a small partition keeps a few dozen
  requests queued instead of hundreds (each costs the batch system's scheduler, and each decision of a
  strategy that plans around them). Every queued request starts or leaves the queue in time, so the
  backlog never stalls a run; a request while none is queued always goes. The default is above what the
  published suite keeps queued (at most 9 requests, 1000Genome, over the synthetic queue and SDSC Blue
  capacity at peaks 28-112, every strategy and shape), so it changes none of those runs.

A user sets the cap with :class:`SubmissionLimit` (frozen, checked when built), or with a number of jobs a
minute (:func:`submission_limit`), through the ``submission_rate`` setting of every front-end
(:class:`elastic.Settings`) and ``--submission-rate`` of ``elastic run`` and ``elastic compare``; each run
makes its own :class:`SubmissionRate` from it. Limits on what a user may set are checked up front
(:data:`MAX_PER_MINUTE`, :data:`MAX_BURST`, :data:`MAX_FAILURE_DELAY`, :data:`MAX_ALLOCATIONS`), with the
limit in the message. ``--max-allocations N`` of the same subcommands sets the total, ``--max-queued N``
the backlog.

Over 500 lines because the four rules are one gate (a request is let through only when all of them
allow it, and each refusal says when to ask again), with the checks of what a user may set and the
doctests that pin each rule.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from elastic.errors import ConfigError, LimitReachedError

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_MAX_ALLOCATIONS",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_PER_MINUTE",
    "FAILURE_DELAYS",
    "MAX_ALLOCATIONS",
    "MAX_BURST",
    "MAX_FAILURE_DELAY",
    "MAX_PER_MINUTE",
    "SubmissionLimit",
    "SubmissionRate",
    "submission_limit",
]

logger = logging.getLogger(__name__)

DEFAULT_PER_MINUTE = 30.0
"""Batch jobs a minute, sustained, by default (one every 2 s)."""

DEFAULT_BURST = 30
"""Batch jobs submitted at once by default, before the sustained rate applies."""

FAILURE_DELAYS: tuple[float, ...] = (0.0, 30.0, 120.0, 600.0, 1800.0)
"""Seconds between submissions after 0, 1, 2, 3 and 4 or more allocations in a row ended ``FAILED``."""

_ROUNDING_S = 1e-6
"""A token due within this many seconds counts as there (the refill's float rounding).

Above the rounding of a backend time (2.4e-7 s at epoch seconds), so a refused request is always told a
retry time after ``now``."""

MAX_PER_MINUTE = 600.0
"""Most jobs a minute a user may allow: ten ``sbatch`` calls a second, the most a shared controller
should take from one user's workflow."""

MAX_BURST = 1000
"""Most jobs a user may allow at once."""

MAX_FAILURE_DELAY = 86400.0
"""Longest back-off a user may set after failures (a day, in seconds)."""

DEFAULT_MAX_ALLOCATIONS = 20_000
"""Batch jobs (allocations, each piece of a split request counted) one run may submit in all, by default:
four per stage of a workflow of :data:`elastic.limits.MAX_STAGES` stages, unless something resubmits for
ever. A user's 5,000-stage DAG under ``asa`` submitted 5,178 (a run that completed) and 6,488 (one that
reached the simulation's 96 hours), one job per request; split into two pieces, twice as many. The run
holds few at once (:data:`DEFAULT_MAX_QUEUED` queued), well within Slurm's default ``MaxJobCount`` of
10,000 jobs in its controller at a time."""

MAX_ALLOCATIONS = 1_000_000
"""Most batch jobs a user may allow one run to submit."""

DEFAULT_MAX_QUEUED = 32
"""Requests of one run waiting for cores in the batch queue at once, by default (the backlog)."""


def _number(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a finite real number, else raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _count(value: object, name: str, what: str) -> None:
    """Raise naming ``name`` (a count of ``what``) unless ``value`` is an integer in [1, MAX_ALLOCATIONS]."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ALLOCATIONS:
        raise ConfigError(f"{name} must be an integer in [1, {MAX_ALLOCATIONS:,}] ({what}), got {value!r}")


def _checked(
    per_minute: object,
    burst: object,
    failure_delays: object,
    max_allocations: object,
    where: str,
    max_queued: object = DEFAULT_MAX_QUEUED,
) -> tuple[float, int, tuple[float, ...]]:
    """Return the cap's values checked against the documented limits; raise naming each as ``where.x``."""
    _count(max_queued, f"{where}max_queued", "requests of one run waiting in the batch queue at once")
    _count(max_allocations, f"{where}max_allocations", "batch jobs one run may submit")
    rate = _number(per_minute, f"{where}per_minute")
    if not 0 < rate <= MAX_PER_MINUTE:
        raise ConfigError(
            f"{where}per_minute must be in (0, {MAX_PER_MINUTE:g}] jobs a minute, got {per_minute!r}"
        )
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= MAX_BURST:
        raise ConfigError(f"{where}burst must be an integer in [1, {MAX_BURST}], got {burst!r}")
    if isinstance(failure_delays, (str, bytes)) or not isinstance(failure_delays, Sequence):
        raise ConfigError(f"{where}failure_delays must be a sequence of seconds, got {failure_delays!r}")
    delays = tuple(_number(d, f"{where}failure_delays") for d in failure_delays)
    if not delays or delays[0] != 0.0:
        raise ConfigError(f"{where}failure_delays must start with 0 (no failure), got {delays!r}")
    if any(b < a for a, b in itertools.pairwise(delays)) or delays[-1] > MAX_FAILURE_DELAY:
        raise ConfigError(
            f"{where}failure_delays must not decrease and be at most {MAX_FAILURE_DELAY:g} s, got {delays!r}"
        )
    return rate, burst, delays


@dataclass(frozen=True)
class SubmissionLimit:
    """How fast a run may submit batch jobs: what a user sets; each run makes a :class:`SubmissionRate`.

    Parameters
    ----------
    per_minute : float, default 30.0
        Jobs a minute, sustained; in ``(0, MAX_PER_MINUTE]``.
    burst : int, default 30
        Jobs at once (the bucket's size); in ``[1, MAX_BURST]``.
    failure_delays : sequence of float, default ``FAILURE_DELAYS``
        Seconds between submissions after ``k`` allocations in a row failed (index ``k``; the last entry
        for more); non-decreasing, the first 0, each at most ``MAX_FAILURE_DELAY``. Kept as a tuple.
    max_allocations : int, default 20,000
        Batch jobs one run may submit in all; in ``[1, MAX_ALLOCATIONS]``. A run that reaches it stops
        with :class:`~elastic.errors.LimitReachedError`.
    max_queued : int, default 32
        Requests of one run waiting for cores in the batch queue at once (the backlog, module docstring);
        in ``[1, MAX_ALLOCATIONS]``.

    Raises
    ------
    ConfigError
        A value outside its range (the message names it and gives the range).

    Examples
    --------
    >>> SubmissionLimit(per_minute=6, burst=2).rate().burst
    2
    >>> SubmissionLimit(burst=0)
    Traceback (most recent call last):
    ...
    elastic.errors.ConfigError: SubmissionLimit: burst must be an integer in [1, 1000], got 0
    """

    per_minute: float = DEFAULT_PER_MINUTE
    burst: int = DEFAULT_BURST
    failure_delays: Sequence[float] = field(default=FAILURE_DELAYS)
    max_allocations: int = DEFAULT_MAX_ALLOCATIONS
    max_queued: int = DEFAULT_MAX_QUEUED

    def __post_init__(self) -> None:
        """Check every value (see the class docstring); keep the delays as a tuple."""
        rate, _, delays = _checked(
            self.per_minute,
            self.burst,
            self.failure_delays,
            self.max_allocations,
            "SubmissionLimit: ",
            self.max_queued,
        )
        object.__setattr__(self, "per_minute", rate)
        object.__setattr__(self, "failure_delays", delays)

    def rate(self) -> SubmissionRate:
        """Return a fresh cap with these values (one per run: it counts what the run submitted)."""
        return SubmissionRate(
            per_minute=self.per_minute,
            burst=self.burst,
            failure_delays=self.failure_delays,
            max_allocations=self.max_allocations,
            max_queued=self.max_queued,
        )


def submission_limit(value: object, name: str = "submission_rate") -> SubmissionLimit:
    """Return the limit a user's ``submission_rate`` value stands for, checked.

    Parameters
    ----------
    value : None, number or SubmissionLimit
        None: the defaults (30 jobs at once, then 30 a minute). A number ``N``: ``N`` jobs a minute, at
        most a minute's worth at once (``ceil(N)``, between 1 and the default burst of 30), so no minute
        sees more than about ``2 N`` jobs; the default back-off after failures. A
        :class:`SubmissionLimit`: as it is.
    name : str, default "submission_rate"
        How the caller names the value in an error (``"Elastic: submission_rate"``, ``"--submission-rate"``).

    Returns
    -------
    SubmissionLimit

    Raises
    ------
    ConfigError
        Neither of the above, or a number outside ``(0, MAX_PER_MINUTE]``; the message names ``name``.

    Examples
    --------
    >>> limit = submission_limit(6)
    >>> limit.per_minute, limit.burst, limit.max_allocations
    (6.0, 6, 20000)
    >>> submission_limit(None) == SubmissionLimit()
    True
    """
    if value is None:
        return SubmissionLimit()
    if isinstance(value, SubmissionLimit):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"{name} must be jobs a minute (a number in (0, {MAX_PER_MINUTE:g}]), a SubmissionLimit or "
            f"None (30 at once, then 30 a minute), got {value!r}"
        )
    if not (math.isfinite(value) and 0 < value <= MAX_PER_MINUTE):
        raise ConfigError(f"{name} must be in (0, {MAX_PER_MINUTE:g}] jobs a minute, got {value!r}")
    return SubmissionLimit(per_minute=float(value), burst=min(DEFAULT_BURST, max(1, math.ceil(value))))


class SubmissionRate:
    """Cap on how fast one run submits batch jobs: a token bucket and a back-off after failures.

    Parameters
    ----------
    per_minute : float, default 30.0
        Jobs a minute, sustained; in ``(0, MAX_PER_MINUTE]``.
    burst : int, default 30
        Jobs at once (the bucket's size); in ``[1, MAX_BURST]``.
    failure_delays : sequence of float, default ``FAILURE_DELAYS``
        Seconds between submissions after ``k`` allocations in a row failed (index ``k``; the last entry
        for more); non-decreasing, the first 0, each at most ``MAX_FAILURE_DELAY``.
    max_allocations : int, default 20,000
        Batch jobs this run may submit in all; in ``[1, MAX_ALLOCATIONS]``.
    max_queued : int, default 32
        Requests of this run waiting for cores in the batch queue at once (the backlog); in
        ``[1, MAX_ALLOCATIONS]``. The caller says how many wait (``queued`` of :meth:`allow`).

    Raises
    ------
    ConfigError
        A value outside its range (the message gives the range).

    Examples
    --------
    >>> rate = SubmissionRate(per_minute=6, burst=2)  # two at once, then one every 10 s
    >>> [rate.allow(0.0), rate.allow(0.0), rate.allow(0.0)]
    [True, True, False]
    >>> rate.retry_at
    10.0
    >>> rate.allow(10.0), rate.retry_at is None
    (True, True)
    >>> rate.ended(20.0, failed=True, ran=True)  # one allocation failed: 30 s between submissions
    >>> rate.allow(40.0), rate.allow(50.0)
    (False, True)
    >>> fifo = SubmissionRate(per_minute=6, burst=2)
    >>> fifo.allow(0.0), fifo.allow(0.0, 2), fifo.retry_at  # two jobs wait for a second token
    (True, False, 10.0)
    >>> fifo.allow(0.0), fifo.retry_at  # one token is left, but a request held back goes first
    (False, 10.0)
    >>> fifo.allow(10.0, 2)
    True
    >>> backlog = SubmissionRate(max_queued=2)  # two requests waiting in the batch queue at most
    >>> backlog.allow(0.0, queued=1), backlog.allow(0.0, queued=2), backlog.retry_at is None
    (True, False, True)
    """

    def __init__(
        self,
        *,
        per_minute: float = DEFAULT_PER_MINUTE,
        burst: int = DEFAULT_BURST,
        failure_delays: Sequence[float] = FAILURE_DELAYS,
        max_allocations: int = DEFAULT_MAX_ALLOCATIONS,
        max_queued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        rate, burst, delays = _checked(
            per_minute, burst, failure_delays, max_allocations, "SubmissionRate: ", max_queued
        )
        self.max_queued = max_queued
        self.per_minute = rate
        self.burst = burst
        self.failure_delays = delays
        self.max_allocations = max_allocations
        self._tokens = float(burst)
        self._refilled: float | None = None
        self._last: float | None = None
        """Backend time of the latest submission or failure (the back-off counts from it)."""
        self.failures = 0
        """Allocations in a row that ended ``FAILED``."""
        self.submitted = 0
        """Jobs let through so far."""
        self.held = 0
        """Requests held back so far."""
        self.retry_at: float | None = None
        """When a held-back request may go (backend seconds); None when nothing is held back."""
        self._refilled_for_held = -math.inf
        self._backlog_said = False  # the backlog's hold was logged (once a run)
        """When the bucket holds the tokens of the request held back (its wait without the back-off)."""

    def _tokens_at(self, now: float) -> float:
        """Return the tokens in the bucket at ``now`` (refilled since the last count; changes nothing)."""
        if self._refilled is not None and now > self._refilled:
            return min(float(self.burst), self._tokens + (now - self._refilled) * self.per_minute / 60.0)
        return self._tokens

    def _refill(self, now: float) -> None:
        self._tokens = self._tokens_at(now)
        if self._refilled is None or now > self._refilled:
            self._refilled = now

    def _delay(self) -> float:
        """Return the seconds the back-off after failures puts between two jobs now (0: none)."""
        return self.failure_delays[min(self.failures, len(self.failure_delays) - 1)]

    def _not_before(self) -> float:
        """When the back-off after failures lets the next job go (``-inf``: it does not hold any)."""
        delay = self._delay()
        return -math.inf if delay == 0.0 or self._last is None else self._last + delay

    def allow(self, now: float, jobs: int = 1, queued: int = 0) -> bool:
        """Take ``jobs`` submissions at backend time ``now`` if the cap allows them now.

        Parameters
        ----------
        now : float
            Backend seconds.
        jobs : int, default 1
            Batch jobs of the request (the pieces of a split request go together).
        queued : int, default 0
            The run's requests waiting for cores in the batch queue now (the backlog's count, module
            docstring); at ``max_queued`` or more the request is held.

        Returns
        -------
        bool
            True: submit them (they are counted). False: hold the request; :attr:`retry_at` says when
            to ask again (None: when a queued request starts or leaves the queue, which the caller's
            next poll sees).

        Raises
        ------
        LimitReachedError
            The run would submit more than ``max_allocations`` jobs in all.
        """
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ConfigError(f"SubmissionRate.allow: jobs must be an integer >= 1, got {jobs!r}")
        if self.submitted + jobs > self.max_allocations:
            raise LimitReachedError(
                "allocations per run",
                self.max_allocations,
                f"this run has submitted {self.submitted:,} batch jobs and asks for {jobs:,} more, over its "
                f"limit of {self.max_allocations:,}; a workflow rarely needs so many, so look for "
                "allocations that end before they run a task (a walltime too short, a job script that "
                "fails); raise the limit with --max-allocations or SubmissionLimit(max_allocations=...) "
                f"(at most {MAX_ALLOCATIONS:,})",
            )
        if queued >= self.max_queued:
            self.held += 1
            if not self._backlog_said:
                self._backlog_said = True
                logger.info(
                    "submission backlog: %d requests of this run wait in the batch queue (at most %d); "
                    "holding more until one starts (raise it with SubmissionLimit(max_queued=...))",
                    queued,
                    self.max_queued,
                )
            return False
        self._refill(now)
        need = float(min(jobs, self.burst))
        not_before = self._not_before()
        # First come, first served: while a request is held back, a later one (narrower, so it would fit
        # in the tokens left) waits too, else a wide request could be overtaken at every step for ever
        # (a liveness scenario found a 9-job stage held while 3-job requests kept taking the tokens).
        queue_free = self.retry_at is None or now >= self.retry_at
        # seconds until the bucket holds ``need`` tokens; a shortfall due within a microsecond is float
        # rounding of the refill (60 s at one a minute can refill 0.9999999999999999 of a token), not a
        # wait: refusing it would tell the caller to retry at ``now`` itself
        short = max(0.0, need - self._tokens) * 60.0 / self.per_minute
        if queue_free and now >= not_before and short <= _ROUNDING_S:
            self._tokens -= jobs  # a request wider than the bucket leaves it in debt
            self._last = now if self._last is None else max(self._last, now)
            self.submitted += jobs
            self.retry_at = None
            return True
        retry = max(now + short, not_before)
        if queue_free:
            self._refilled_for_held = now + short  # the bucket's part of the wait (the back-off may end)
        if self.retry_at is None:
            logger.info(
                "submission-rate cap: holding a request of %d job(s) until t=%.0f s (%g jobs a minute, "
                "%d at once, %d failed allocation(s) in a row)",
                jobs,
                retry,
                self.per_minute,
                self.burst,
                self.failures,
            )
        if queue_free:  # else the request at the head of the queue keeps its time
            self.retry_at = retry
        self.held += 1
        return False

    def takes(self, now: float, queued: int = 0) -> int:
        """Return at most how many requests :meth:`allow` would let through at ``now``, one by one.

        An upper bound, one more than that at most (never fewer): 0 while a request held back waits or the
        back-off after failures holds, else the whole tokens in the bucket at ``now`` (at most one while
        the back-off spaces jobs out; each request is one job at least) or the room ``queued`` leaves in
        the backlog, the smaller, plus one; 0 while the backlog is full. A strategy
        whose requests are costly to plan (the planner, :attr:`~elastic.strategies.base.RunView.submittable`)
        plans no more than these in full; the rest would be held back all the same. Changes nothing.

        Examples
        --------
        >>> rate = SubmissionRate(per_minute=6, burst=2)
        >>> rate.takes(0.0), rate.allow(0.0), rate.allow(0.0), rate.takes(0.0)
        (3, True, True, 1)
        >>> rate.allow(0.0), rate.takes(0.0), rate.takes(10.0)  # held back until t=10
        (False, 0, 2)
        >>> SubmissionRate(max_queued=2).takes(0.0, queued=1)  # one more fits in the backlog
        2
        """
        if (self.retry_at is not None and now < self.retry_at) or now < self._not_before():
            return 0
        whole = max(0, math.floor(self._tokens_at(now) + _ROUNDING_S * self.per_minute / 60.0))
        if self._delay() > 0.0:
            whole = min(whole, 1)  # after failures each job waits the delay after the one before it
        if queued >= self.max_queued:
            return 0  # none goes before a queued one starts
        return min(whole, self.max_queued - queued) + 1

    def pending(self, now: float) -> float | None:
        """Return when a request held back may go, if one is held and that time is after ``now``.

        A request the strategy no longer makes is forgotten here, so the caller never wakes for it twice.
        """
        if self.retry_at is not None and self.retry_at <= now:
            self.retry_at = None
        return self.retry_at

    def ended(self, now: float, *, failed: bool, ran: bool) -> None:
        """Count an allocation's end: a failure backs off, an allocation that ran otherwise resets.

        Parameters
        ----------
        now : float
            Backend seconds.
        failed : bool
            It ended ``FAILED`` (its job script failed, or the batch system failed it).
        ran : bool
            It started before it ended (one cancelled in the queue neither fails nor resets).
        """
        if failed:
            self.failures += 1
            self._last = now if self._last is None else max(self._last, now)
            if self.failures + 1 >= len(self.failure_delays):
                logger.warning(
                    "submission-rate cap: %d allocations in a row failed; submitting at most one job per "
                    "%.0f s until one runs and ends without failing",
                    self.failures,
                    self.failure_delays[-1],
                )
        elif ran:
            self.failures = 0
            if self.retry_at is not None:
                # the back-off ends, but not the bucket's wait: a request held for tokens is still held
                # until they are there (cleared here, the step that refills them was never made: a
                # liveness scenario's liveness requests waited for the next poll instead)
                held_for = self._refilled_for_held
                self.retry_at = held_for if held_for > now else None

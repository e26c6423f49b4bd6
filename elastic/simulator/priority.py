"""Priority models: where a job held by a dependency or a begin time ranks once it becomes eligible.

A job submitted with ``--dependency`` or ``--begin`` cannot start before its parents ended (or started)
and its begin time passed. What happens to its place in the queue meanwhile depends on the site's
priority plugin, and decides whether submitting early buys anything:

``"basic"`` (Slurm's ``PriorityType=priority/basic``)
    First in, first out by submission: a held job keeps the place its submit time gave it and, once
    eligible, goes ahead of every job submitted after it. slurm.conf(5), PriorityType: "priority/basic:
    Jobs are evaluated in a First In, First Out (FIFO) manner."
``"age"`` (``PriorityType=priority/multifactor`` without ``ACCRUE_ALWAYS``; the default here)
    The age factor counts only time spent *eligible*: "The age factor represents the length of time a
    job has been sitting in the queue and eligible to run. [...] the age factor for a dependent job
    will not change while it waits for the job it depends on to complete" (Slurm, *Multifactor
    Priority Plugin*, section "Age Factor", ``doc/html/priority_multifactor.shtml``). In the code, the
    age is ``now - details->accrue_time``, set when the job becomes eligible
    (``set_priority_factors()`` in ``src/plugins/priority/multifactor/priority_multifactor.c``; older
    releases used ``details->begin_time``, the eligible time). So a held job ranks as if submitted when
    it became eligible: behind every job that was already waiting. The age factor "maxes out to 1.0"
    at ``PriorityMaxAge`` (default ``7-0``, 7 days): a job eligible that long ties with every other such
    job, and ties go by "Job priority, Job submit time, Job ID" (slurm.conf(5), PriorityType), so it
    competes in submit order again.
``"accrue-always"`` (multifactor with ``PriorityFlags=ACCRUE_ALWAYS``)
    "If set, priority age factor will be increased despite job ineligibility due to either
    dependencies, holds or begin time in the future" (slurm.conf(5), PriorityFlags); the older code
    reads ``use_time = job_ptr->details->submit_time`` under this flag. Age counts from submission.

The mock ranks jobs by age alone: the other multifactor terms (fair-share, job size, partition, QOS,
nice) are taken equal between the competing jobs, since a trace does not record them. Under that
assumption ``"accrue-always"`` orders jobs exactly as ``"basic"`` does: an age counted from submission,
capped or not, is a non-increasing function of the submit time, and ties go by submit time. The two
differ at a real site only through the other factors. The mock keeps both names so that a comparison
says which site setting it stands for; ``"age"`` is the one that changes what early submission buys.

**Why ``"age"`` is the default.** Current Slurm documentation states that the multifactor plugin is the
default priority plugin ("By default, Slurm has the priority/multifactor plugin set", *Multifactor
Priority Plugin*; releases before it defaulted to ``priority/basic``), and ``PriorityFlags`` is empty
unless a site sets it, so ``ACCRUE_ALWAYS`` is an opt-in. A site with multifactor and a non-zero
``PriorityWeightAge`` therefore re-ranks a held job at eligibility, which is the case where
pre-submitting with a dependency buys no queue position; assuming ``"basic"`` would flatter early
submission. (With every weight left at 0, the multifactor default, all priorities tie and jobs go in
submit order: read the site's setting, see ``docs/guide/slurm.md``.)

**How the engine ranks** (:class:`~elastic.simulator.engine.Engine`, ``rank``: lower runs first). Every
job gets the next value of one counter when it arrives or is submitted, so ranks follow submit time.
Under ``"age"`` a held job gets, when it becomes eligible, :func:`eligible_rank`: a rank just below that
of the jobs arriving at the same instant, with a fraction that orders the jobs becoming eligible at that
instant by their submit rank (equal age: Slurm's tie-break by submit time). When it has been eligible
for ``max_age`` seconds and still waits, it gets its submit rank back, which is exactly where the capped
age puts it: ahead of every job still accruing age (each became eligible later, so holds a higher rank)
and, among the capped ones, in submit order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from elastic.errors import ConfigError, UnknownNameError

if TYPE_CHECKING:
    from elastic.simulator.jobs import JobTable

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_PRIORITY",
    "PRIORITY_MODELS",
    "EligibleRanking",
    "check_priority",
    "describe_priority",
    "eligible_rank",
    "reranks_on_eligibility",
]

PRIORITY_MODELS: tuple[str, ...] = ("age", "basic", "accrue-always")
"""Priority model names (see the module docstring)."""

DEFAULT_PRIORITY = "age"
"""The model used unless one is named: multifactor, age counted from eligibility."""

DEFAULT_MAX_AGE = 7 * 86400.0
"""Slurm's default ``PriorityMaxAge`` (``7-0``), seconds: the age factor is capped after this long."""

_SLURM_SETTING = {
    "age": "priority/multifactor, age from eligibility",
    "basic": "priority/basic, submit order",
    "accrue-always": "priority/multifactor with PriorityFlags=ACCRUE_ALWAYS, age from submit",
}


def check_priority(name: str) -> str:
    """Return ``name`` if it is a priority model, else raise.

    Raises
    ------
    UnknownNameError
        ``name`` is not one of :data:`PRIORITY_MODELS`; the message lists them.
    """
    if name not in PRIORITY_MODELS:
        raise UnknownNameError("priority model", name, PRIORITY_MODELS)
    return name


def reranks_on_eligibility(name: str) -> bool:
    """Whether a held job is ranked by the time it became eligible (``"age"``) instead of its submit."""
    return check_priority(name) == "age"


def describe_priority(name: str) -> str:
    """One line naming the model and the Slurm setting it stands for, for titles and summaries.

    Examples
    --------
    >>> describe_priority("age")
    'priority age (priority/multifactor, age from eligibility)'
    """
    return f"priority {name} ({_SLURM_SETTING[check_priority(name)]})"


def eligible_rank(base: int, submit_rank: float) -> float:
    """Rank of a held job that becomes eligible at an instant whose first rank is ``base``, under ``"age"``.

    Parameters
    ----------
    base : int
        The lowest rank a job arriving at this instant has (or would have): larger than the rank of
        every job that arrived earlier.
    submit_rank : float
        The job's rank at submission (an integer >= 0 and < ``base``: it was submitted earlier).

    Returns
    -------
    float
        ``base - 1 + (submit_rank + 1) / (base + 1)``: strictly between ``base - 1`` and ``base``, so the
        job goes after every job that arrived before this instant, before every job arriving at it (same
        age, earlier submit time) and, among jobs becoming eligible at this instant, in submit order.

    Examples
    --------
    >>> 9 < eligible_rank(10, 3.0) < eligible_rank(10, 7.0) < 10
    True
    """
    return base - 1 + (submit_rank + 1) / (base + 1)


class EligibleRanking:
    """The engine's side of a priority model: ranks held jobs as they become eligible.

    Parameters
    ----------
    name : {"age", "basic", "accrue-always"}
        The priority model.
    max_age : float, default 604800.0
        ``"age"``: seconds of eligibility after which the age factor is capped (``PriorityMaxAge``),
        > 0; ``inf``: never.

    Attributes
    ----------
    eligible_at : dict of int to float
        Time each held job (dependency or begin time) became eligible, by job index.

    Raises
    ------
    UnknownNameError
        ``name`` is not a priority model.
    ConfigError
        ``max_age`` is not > 0.
    """

    __slots__ = ("_base", "_base_time", "_rerank", "_submit", "eligible_at", "max_age", "name")

    def __init__(self, name: str, *, max_age: float = DEFAULT_MAX_AGE) -> None:
        self._rerank = reranks_on_eligibility(name)
        if not max_age > 0:
            raise ConfigError(f"priority max_age must be > 0 seconds (inf: never capped), got {max_age}")
        self.name = name
        self.max_age = float(max_age)
        self.eligible_at: dict[int, float] = {}
        self._submit: dict[int, float] = {}  # re-ranked job -> its rank at submission
        self._base_time = -math.inf  # instant the last base was drawn
        self._base = 0

    def became_eligible(
        self, jobs: JobTable, j: int, now: float, queue: Sequence[int], draw: Callable[[], int]
    ) -> float | None:
        """Record that held job ``j`` became eligible at ``now`` and set its rank in ``jobs.rank``.

        Parameters
        ----------
        jobs : JobTable
            The engine's job table.
        j : int
            Job index.
        now : float
            Current simulated time, seconds.
        queue : sequence of int
            The engine's eligible queue, sorted by rank: jobs that arrived at ``now`` are at its tail.
        draw : callable
            Draws the next value of the engine's rank counter.

        Returns
        -------
        float or None
            When its age factor will be capped (the engine then calls :meth:`submit_rank`), or None
            when its rank will not change again.
        """
        self.eligible_at[j] = now
        if not self._rerank:
            return None
        rank = jobs.rank
        if now != self._base_time:
            self._base_time = now
            self._base = self._first_rank_at(jobs, now, queue, draw)
        self._submit[j] = rank[j]
        rank[j] = eligible_rank(self._base, rank[j])
        return now + self.max_age if self.max_age != math.inf else None

    def _first_rank_at(
        self, jobs: JobTable, now: float, queue: Sequence[int], draw: Callable[[], int]
    ) -> int:
        """Lowest rank among the queued jobs that arrived at ``now``; a fresh counter value if none.

        Jobs that arrived at ``now`` and already started no longer compete, so only queued ones count.
        """
        submit = jobs.submit
        rank = jobs.rank
        first = None
        for k in reversed(queue):
            if submit[k] == now:
                first = rank[k]
            elif self.eligible_at.get(k) != now:  # older than this instant: the rest are too
                break
        return int(first) if first is not None else draw()

    def submit_rank(self, j: int) -> float:
        """Rank re-ranked job ``j`` had at submission (where it competes once its age is capped)."""
        return self._submit[j]

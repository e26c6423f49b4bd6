"""The bounds on sizes a user gives, in one place: what is refused up front instead of running for hours.

Each limit is far beyond what a real workflow or machine needs, and low enough that the work it allows
ends in minutes and fits in memory on a laptop. Every check names the option, the value and the limit,
and says why the limit is there. The checks raise :class:`~elastic.errors.ConfigError` before any work.

==========================  ===================  ===========================================================
limit                       value                why
==========================  ===================  ===========================================================
:data:`MIN_SPEEDUP`         0.01                 a mock clock slower than 1 simulated second per 100 real
                                                 seconds only makes runs take days (below ~1e-6 the clock's
                                                 dates overflow)
:data:`MAX_SPEEDUP`         1,000                an agent takes about a real second to start: at 1,000x
                                                 that is already 17 simulated minutes of each allocation's
                                                 walltime; far beyond, allocations end before their agents
                                                 connect and are requested again and again, running nothing
:data:`MAX_STAGES`          5,000                stages of one declared workflow: a run's cost grows
                                                 up to the square of its stages; a chain or a random DAG
                                                 of 5,000 simulates in under a minute of CPU under every
                                                 strategy (``asa``: 15-37 s; a user's DAG of 1-7 tasks a
                                                 stage, 53 s), beyond that ``asa`` grows past a minute
:data:`MAX_STAGE_TASKS`     100,000              tasks of one declared stage: simulating a stage of 100,000
                                                 tasks takes about 90 s, and the cost grows faster than the
                                                 count
:data:`MAX_WORKFLOW_TASKS`  1,000,000            tasks of one declared workflow, all stages together: ten
                                                 stages at the stage limit (5,000 stages of 100,000 tasks
                                                 each would take days)
:data:`MAX_PROCESSORS`      20,000,000           cores of a simulated partition (``--processors``): twice
                                                 the largest machine built so far (10.6 million cores);
                                                 also the most processors of one trace job
:data:`MAX_TRACE_SECONDS`   100 years            a time in a trace (submit, wait, runtime, requested
                                                 time): beyond it, a field is a unit or typing error
:data:`MAX_RUNTIME`         1 year               a stage's mean task runtime, or ``task(runtime=...)``: no
                                                 batch partition runs one job that long (a site's limit
                                                 is hours to weeks); beyond it the runtime is a unit or
                                                 typing error (:func:`check_runtime`)
:data:`MAX_WALLTIME`        100 years            a batch job's walltime; a request beyond it is asked at
                                                 it. A job script computes its end in nanoseconds in
                                                 bash's 64-bit integers, which overflow about 230 years
                                                 from now (the allocation then ended at once, drained)
==========================  ===================  ===========================================================

Limits that belong to one module are kept beside their code: :data:`elastic.simulator.synthetic.MAX_JOBS`
(synthetic jobs), :data:`elastic.experiments.MAX_RUNS` (runs per experiment),
:data:`elastic.workflow.MAX_RUNTIME_CV`, :data:`elastic.cli.waits.MAX_ITERATIONS`,
:data:`elastic.pool.agent_command.MAX_CORES` (cores of one agent), :data:`elastic.pool.protocol.MAX_MESSAGE`,
:data:`elastic.pool.tasks.MAX_NAME` and ``MAX_COMMAND``, :data:`elastic.front.mesos.fields.MAX_BODY`,
:data:`elastic.learners.toptimal.MAX_TOPTIMAL_POINTS` (and ``MAX_ATOPTIMAL_STATES``, ``MAX_ATOPTIMAL_CELLS``),
:data:`elastic.learners.walltime_baselines.MAX_SAMPLED_RUNTIMES`, and the submission-rate cap's
:data:`elastic.control.rate.MAX_PER_MINUTE` and ``MAX_BURST`` (how fast a run submits batch jobs), and
the allocations-per-run cap, :data:`elastic.control.rate.DEFAULT_MAX_ALLOCATIONS` (a setting, at most
``MAX_ALLOCATIONS``).
"""

from __future__ import annotations

import math

from elastic.errors import ConfigError

__all__ = [
    "MAX_PROCESSORS",
    "MAX_RUNTIME",
    "MAX_SPEEDUP",
    "MAX_STAGES",
    "MAX_STAGE_TASKS",
    "MAX_WORKFLOW_TASKS",
    "MAX_TRACE_SECONDS",
    "MAX_WALLTIME",
    "MIN_SPEEDUP",
    "SPEEDUP_RANGE",
    "check_count",
    "check_runtime",
    "check_speedup",
    "speedup_problem",
]

MIN_SPEEDUP = 0.01
"""Slowest mock clock: simulated seconds per real second."""

MAX_SPEEDUP = 1000.0
"""Fastest mock clock: simulated seconds per real second (agents must connect within an allocation's
walltime, and they take about a real second to start)."""

MAX_STAGES = 5_000
"""Most stages in one declared workflow."""

MAX_STAGE_TASKS = 100_000
"""Most tasks in one stage of a declared workflow."""

MAX_WORKFLOW_TASKS = 1_000_000
"""Most tasks in one declared workflow, all its stages together."""

MAX_PROCESSORS = 20_000_000
"""Most cores of a simulated partition (``--processors``), and of one job of a trace."""

MAX_TRACE_SECONDS = 100 * 365.25 * 86400.0
"""Longest time a trace field may hold (100 years, in seconds)."""

MAX_RUNTIME = 365.25 * 86400.0
"""Longest mean task runtime a declared stage may have (a year, in seconds)."""

MAX_WALLTIME = 100 * 365.25 * 86400.0
"""Longest walltime a batch job is asked for (100 years, in seconds); longer requests are asked at it."""


def speedup_problem(speedup: object) -> str | None:
    """Say what is wrong with ``speedup`` as a mock clock speed-up (None: nothing).

    Examples
    --------
    >>> speedup_problem(60) is None
    True
    >>> speedup_problem(1e9)
    'above 1000, allocations end before their agents (about a real second to start) connect'
    """
    if isinstance(speedup, bool) or not isinstance(speedup, (int, float)) or not math.isfinite(speedup):
        return "not a finite number"
    if speedup > MAX_SPEEDUP:
        return (
            f"above {MAX_SPEEDUP:g}, allocations end before their agents (about a real second to start) "
            "connect"
        )
    if speedup < MIN_SPEEDUP:
        return f"below {MIN_SPEEDUP:g}, a run takes days of real time"
    return None


SPEEDUP_RANGE = f"from {MIN_SPEEDUP:g} to {MAX_SPEEDUP:g} simulated seconds per real second"
"""The allowed speed-ups, as messages and help texts say it."""


def check_speedup(speedup: object, name: str = "speedup") -> float:
    """Return ``speedup`` as a float if it is a number in ``[MIN_SPEEDUP, MAX_SPEEDUP]``.

    Parameters
    ----------
    speedup : object
        The value given.
    name : str, default "speedup"
        How the user gave it (``"--speedup"``, ``"Elastic: speedup"``), for the message.

    Returns
    -------
    float

    Raises
    ------
    ConfigError
        Not a number, or outside the range; the message gives the range and why.

    Examples
    --------
    >>> check_speedup(60)
    60.0
    """
    problem = speedup_problem(speedup)
    if problem is not None:
        raise ConfigError(
            f"{name} must be {SPEEDUP_RANGE}, got {speedup!r} ({problem}; limits in elastic.limits)"
        )
    return float(speedup)  # type: ignore[arg-type]  # a finite int or float: speedup_problem said so


def check_count(value: int, limit: int, what: str, why: str) -> None:
    """Refuse ``value`` above ``limit``, naming ``what`` it counts and ``why`` the limit is there.

    Raises
    ------
    ConfigError
        ``value > limit``.

    Examples
    --------
    >>> check_count(3, MAX_STAGES, "stages", "planning takes hours")
    """
    if value > limit:
        raise ConfigError(
            f"{what}: at most {limit:,} allowed, got {value:,} ({why}; limits in elastic.limits)"
        )


def check_runtime(runtime: float, said: str, what: str) -> None:
    """Refuse a ``runtime`` of more than :data:`MAX_RUNTIME` (a year): ``said`` names it, ``what`` it means.

    One rule for every place a runtime is declared (a workflow's stage, ``task(runtime=...)``).

    Raises
    ------
    ConfigError
        ``runtime > MAX_RUNTIME``.

    Examples
    --------
    >>> check_runtime(3600.0, "task(runtime=...):", "one task's runtime")
    """
    if runtime > MAX_RUNTIME:
        raise ConfigError(
            f"{said} {runtime:g} s is more than a year ({MAX_RUNTIME:g} s), longer than any batch partition "
            f"runs one job; check that it is {what} in seconds"
        )

"""The workflow model: a :class:`Workflow` is an ordered list of :class:`Stage` objects.

Each stage is a set of identical tasks; :func:`check_scale` enforces the limits on their number (see
:mod:`elastic.workflow`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from elastic.errors import ConfigError, UnknownNameError
from elastic.limits import MAX_STAGE_TASKS, MAX_STAGES, MAX_WORKFLOW_TASKS, check_count, check_runtime

__all__ = [
    "MAX_RUNTIME_CV",
    "STAGES_WHY",
    "TASKS_WHY",
    "Stage",
    "Workflow",
    "check_horizon",
    "check_scale",
    "finite_number",
    "shortest_chain",
    "workflow_from_stages",
]


MAX_RUNTIME_CV = 100.0
"""Largest ``runtime_cv`` a stage may have. At cv = 100 the lognormal's median is already 100 times
below its mean (almost every task is short, a rare one takes days); far beyond it the sampled
durations overflow or round to zero."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of a workflow: ``tasks`` identical tasks of ``cores`` cores each.

    Parameters
    ----------
    name : str
        Unique within the workflow.
    tasks : int
        Number of tasks, >= 1.
    cores : int
        Cores per task, >= 1.
    runtime : float or None, default None
        Mean task runtime in seconds, > 0 and at most a year (:data:`~elastic.limits.MAX_RUNTIME`; also
        the user's estimate before any history exists); ``None`` when unknown (a plan for the front door;
        running a declared workflow needs it).
    runtime_cv : float, default 0.0
        Coefficient of variation of the task runtime (standard deviation / mean), in
        ``[0, MAX_RUNTIME_CV]``. Durations follow a lognormal distribution with this mean and cv; 0 means
        every task takes exactly ``runtime``.
    depends_on : tuple of str or None, default None
        Stages that must complete before this one starts; ``None`` means the previous stage (none for the
        first stage). Set by :class:`Workflow` to the resolved tuple.
    command : str or None, default None
        Shell command a real task runs (a non-empty string); ``None`` means "sleep for the sampled
        duration".
    """

    name: str
    tasks: int
    cores: int
    runtime: float | None = None
    runtime_cv: float = 0.0
    depends_on: tuple[str, ...] | None = None
    command: str | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ConfigError(f"Stage.name must be a non-empty string, got {self.name!r}")
        where = f"stage {self.name!r}"
        if isinstance(self.tasks, bool) or not isinstance(self.tasks, int) or self.tasks < 1:
            raise ConfigError(f"{where}: tasks must be an integer >= 1, got {self.tasks!r}")
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 1:
            raise ConfigError(f"{where}: cores must be an integer >= 1, got {self.cores!r}")
        if self.runtime is not None and (finite_number(self.runtime) is None or self.runtime <= 0):
            raise ConfigError(
                f"{where}: runtime must be a number of seconds > 0 (or left out), got {self.runtime!r}"
            )
        if self.runtime is not None:
            check_runtime(self.runtime, f"{where}: runtime", "the mean task runtime")
        if finite_number(self.runtime_cv) is None or not 0 <= self.runtime_cv <= MAX_RUNTIME_CV:
            allowed = f">= 0 and <= {MAX_RUNTIME_CV:g}"
            raise ConfigError(f"{where}: runtime_cv must be a number {allowed}, got {self.runtime_cv!r}")
        if self.command is not None and not (isinstance(self.command, str) and self.command.strip()):
            raise ConfigError(
                f"{where}: command must be a non-empty shell command string (or left out to sleep for "
                f"the sampled duration), got {self.command!r}"
            )

    @property
    def width(self) -> int:
        """Cores needed to run every task of the stage at once (tasks x cores)."""
        return self.tasks * self.cores

    def sample_runtimes(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Draw task durations in seconds (lognormal with mean ``runtime`` and cv ``runtime_cv``).

        Parameters
        ----------
        rng : numpy.random.Generator
            Source of randomness (seeded by the caller for reproducible runs).
        n : int or None, default None
            How many; ``None`` means one per task.

        Returns
        -------
        ndarray of float64
            Durations, all > 0.

        Raises
        ------
        ConfigError
            The stage has no runtime model.
        """
        if self.runtime is None:
            raise ConfigError(f"stage {self.name!r} has no runtime model to draw task durations from")
        size = self.tasks if n is None else n
        if self.runtime_cv == 0:
            return np.full(size, float(self.runtime))
        mu, sigma = self._lognormal()
        return rng.lognormal(mu, sigma, size)

    def runtime_quantile(self, z: float) -> float:
        """Return the task runtime at the standard normal quantile ``z`` (``runtime`` when the cv is 0).

        The runtime model is the lognormal :meth:`sample_runtimes` draws from; 0 when the stage has none.
        """
        if self.runtime is None:
            return 0.0
        if self.runtime_cv == 0:
            return float(self.runtime)
        mu, sigma = self._lognormal()
        return math.exp(mu + z * sigma)

    def _lognormal(self) -> tuple[float, float]:
        """Return ``(mu, sigma)`` of the lognormal of mean ``runtime`` and cv ``runtime_cv``."""
        assert self.runtime is not None
        # from mean m and cv c: sigma^2 = ln(1 + c^2), mu = ln(m) - sigma^2 / 2
        sigma2 = math.log1p(self.runtime_cv**2)
        return math.log(self.runtime) - sigma2 / 2, math.sqrt(sigma2)


@dataclass(frozen=True, slots=True)
class Workflow:
    """An ordered list of stages; dependencies may only point to earlier stages.

    Parameters
    ----------
    name : str
        Workflow name (the key runtime history is stored under).
    stages : tuple of Stage
        At least one, unique names. Stages whose ``depends_on`` is ``None`` are given the previous stage.

    Raises
    ------
    ConfigError
        No stages, duplicate names, or a dependency on an unknown or later stage.
    """

    name: str
    stages: tuple[Stage, ...]
    _positions: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)
    """Each stage's position by name (:meth:`stage` and :meth:`index` in constant time: planners ask them
    for every stage at every decision, and a scan made a run of n stages cost n cubed)."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("Workflow.name must be a non-empty string")
        if not self.stages:
            raise ConfigError(f"workflow {self.name!r}: needs at least one stage")
        resolved: list[Stage] = []
        seen: set[str] = set()
        for i, stage in enumerate(self.stages):
            if stage.name in seen:
                raise ConfigError(f"workflow {self.name!r}: stage name {stage.name!r} is used twice")
            deps = stage.depends_on
            if deps is None:
                deps = (self.stages[i - 1].name,) if i > 0 else ()
            for dep in deps:
                if dep not in seen:
                    earlier = ", ".join(sorted(seen)) or "none"
                    raise ConfigError(
                        f"workflow {self.name!r}: stage {stage.name!r} depends on {dep!r}, which is not an "
                        f"earlier stage (earlier stages: {earlier})"
                    )
            seen.add(stage.name)
            resolved.append(_replace_deps(stage, tuple(deps)))
        object.__setattr__(self, "stages", tuple(resolved))
        object.__setattr__(self, "_positions", {s.name: i for i, s in enumerate(resolved)})

    @property
    def max_width(self) -> int:
        """Cores of the widest stage."""
        return max(s.width for s in self.stages)

    @property
    def names(self) -> tuple[str, ...]:
        """Stage names in order."""
        return tuple(s.name for s in self.stages)

    def stage(self, name: str) -> Stage:
        """Return the stage called ``name``; raise UnknownNameError."""
        return self.stages[self.index(name)]

    def index(self, name: str) -> int:
        """Return the position of stage ``name``; raise UnknownNameError."""
        i = self._positions.get(name)
        if i is None:
            raise UnknownNameError("stage", name, self.names)
        return i


def _replace_deps(stage: Stage, deps: tuple[str, ...]) -> Stage:
    return Stage(
        name=stage.name,
        tasks=stage.tasks,
        cores=stage.cores,
        runtime=stage.runtime,
        runtime_cv=stage.runtime_cv,
        depends_on=deps,
        command=stage.command,
    )


def finite_number(x: object) -> float | None:
    """Return ``x`` as a float if it is an int or float (not a bool) and finite, else None.

    What a field of seconds or cores read from a file may be.
    """
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


STAGES_WHY = (
    "a run costs up to the square of its stages: a chain or a random DAG of 5,000 simulates in under a "
    "minute under every strategy, more stages take longer under asa"
)
"""Why a workflow holds at most :data:`~elastic.limits.MAX_STAGES` stages."""
TASKS_WHY = "simulating a stage costs more than its task count: 100,000 tasks take about 90 s"
"""Why a stage holds at most :data:`~elastic.limits.MAX_STAGE_TASKS` tasks."""
WORKFLOW_TASKS_WHY = "simulating a workflow costs more than its task count: 100,000 tasks take about 90 s"
"""Why a workflow holds at most :data:`~elastic.limits.MAX_WORKFLOW_TASKS` tasks in all."""


def check_scale(workflow: Workflow, source: str | None = None) -> None:
    """Refuse a declared workflow too big to plan or simulate in minutes (:mod:`elastic.limits`).

    Parameters
    ----------
    workflow : Workflow
        The declared workflow.
    source : str or None, default None
        Where it came from (a file), for the message; default: the workflow's name.

    Raises
    ------
    ConfigError
        More than :data:`~elastic.limits.MAX_STAGES` stages, a stage of more than
        :data:`~elastic.limits.MAX_STAGE_TASKS` tasks, or more than
        :data:`~elastic.limits.MAX_WORKFLOW_TASKS` in all; the message gives the limit.
    """
    where = source if source is not None else f"workflow {workflow.name!r}"
    check_count(len(workflow.stages), MAX_STAGES, f"{where}: stages", STAGES_WHY)
    for stage in workflow.stages:
        check_count(stage.tasks, MAX_STAGE_TASKS, f"{where}: stage {stage.name!r}: tasks", TASKS_WHY)
    total = sum(stage.tasks for stage in workflow.stages)
    check_count(total, MAX_WORKFLOW_TASKS, f"{where}: tasks of all stages", WORKFLOW_TASKS_WHY)


_Z_999 = 3.090232306167813
"""The standard normal distribution's 99.9 % quantile, ``scipy.stats.norm.ppf(0.999)``, written out so that
reading a workflow does not import ``scipy.stats`` (0.6 s of start-up for every command)."""


def shortest_chain(workflow: Workflow) -> float:
    """Return the seconds ``workflow``'s longest chain of dependent stages takes at the least.

    Each stage counts its tasks' runtime at its 0.1 % quantile (the lognormal of mean ``runtime`` and
    cv ``runtime_cv``; ``runtime`` itself when the cv is 0; 0 when undeclared): a stage lasts at least
    as long as one of its tasks, so a run is all but sure to take longer.

    Examples
    --------
    >>> wf = Workflow("w", (Stage("a", 4, 1, runtime=600.0), Stage("b", 1, 1, runtime=60.0),
    ...                     Stage("c", 2, 1, runtime=3600.0, depends_on=("a",))))
    >>> shortest_chain(wf)  # a then c; b runs beside c
    4200.0
    """
    ends: dict[str, float] = {}
    for s in workflow.stages:  # every stage's dependencies come before it
        low = s.runtime_quantile(-_Z_999)
        ends[s.name] = max((ends[d] for d in s.depends_on or ()), default=0.0) + low
    return max(ends.values())


def check_horizon(workflow: Workflow, horizon: float, *, where: str | None = None) -> None:
    """Refuse a workflow whose stages alone outlast a simulated run's ``horizon`` seconds (none could end).

    ``horizon`` is :data:`elastic.experiments.HORIZON` for every simulated run.

    Raises
    ------
    ConfigError
        :func:`shortest_chain` exceeds ``horizon``; the message gives both, and what to check.
    """
    chain = shortest_chain(workflow)
    if chain > horizon:
        name = where if where is not None else f"workflow {workflow.name!r}"
        hours = chain / 3600
        took = f"{hours:,.1f}" if hours < 1e6 else f"{hours:.3g}"
        raise ConfigError(
            f"{name}: its longest chain of stages takes at least {took} h (each stage's "
            f"shortest likely runtime), beyond a simulated run's {horizon / 3600:,.0f} h horizon, so no "
            "run could complete; check that its runtimes are in seconds (a real run, without --simulate, "
            "has no such bound)"
        )


def workflow_from_stages(name: str, stages: tuple[Stage, ...], source: str) -> Workflow:
    """Return ``Workflow(name, stages)`` read from ``source``, checked for scale; errors name ``source``.

    Raises
    ------
    ConfigError
        The stages do not make a workflow (:class:`Workflow`), or it is too large (:func:`check_scale`).
    """
    try:
        workflow = Workflow(name, stages)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    check_scale(workflow, source)
    return workflow

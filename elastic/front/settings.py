"""One settings object for every front-end: :class:`Settings`, checked once, when it is built.

:class:`elastic.Elastic`, :class:`~elastic.executors.parsl_executor.ElasticExecutor`,
:class:`~elastic.executors.prefect_runner.ElasticTaskRunner` and ``elastic mesos`` take the same settings,
either as one object or as keywords::

    from elastic import Elastic, Settings

    settings = Settings(backend="mock", strategy="perstage", max_cores=64, pool={"workers": 4})
    with Elastic(settings=settings) as el:  # or Elastic("mock", "perstage", max_cores=64, workers=4)
        ...
    ElasticExecutor(label="htc", settings=settings)
    ElasticTaskRunner(settings=settings, name="nightly")  # a keyword given replaces the object's value

A keyword left out (or ``None``) keeps the object's value; the front-end's own options (``label`` and
``plan_interval`` of the Parsl executor, ``cancel_poll_interval`` of the Prefect runner, the Mesos
server's ``--host``...) stay its own. A field left at ``None`` takes the front-end's default (``workflow``:
``"default"``, the Parsl workflow's name, the Prefect flow's name; ``name``: ``"elastic"``, ``"parsl"``).

Every value is checked in :meth:`Settings.__post_init__`, its type included, before anything starts; a
bad one raises :class:`~elastic.errors.ConfigError` naming the setting, the value and what is allowed (an
unknown backend or strategy name: :class:`~elastic.errors.UnknownNameError`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from elastic.backends.base import BatchBackend
from elastic.control.rate import SubmissionLimit, submission_limit
from elastic.errors import ConfigError, UnknownNameError
from elastic.front.progress import ProgressLogger, check_progress
from elastic.limits import check_speedup
from elastic.site import SiteConfig, load_site
from elastic.workflow import Workflow, check_scale

if TYPE_CHECKING:
    from elastic.learners.base import WaitPredictor
    from elastic.store import Store
    from elastic.store.resilient import ResilientStore
    from elastic.strategies.base import Strategy

__all__ = [
    "FIELDS",
    "POOL_OPTIONS",
    "Settings",
    "SubmissionLimit",
    "check_settings",
    "settings_from",
    "site_of",
    "submission_limit",
]


def _real(value: object) -> TypeGuard[float]:
    """Tell whether ``value`` is a real number (not a bool, not a string holding one)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _whole(value: object) -> TypeGuard[int]:
    """Tell whether ``value`` is a whole number (not a bool)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(f"Elastic: {message}")


def _seconds(name: str, value: object, *, low: float, strict: bool) -> None:
    ok = _real(value) and math.isfinite(value) and (value > low if strict else value >= low)
    _check(ok, f"{name} must be finite seconds {'>' if strict else '>='} {low:g}, got {value!r}")


_POOL_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "workers": (lambda v: v is None or (_whole(v) and v >= 1), "a whole number >= 1 or None"),
    "worker_memory": (lambda v: v is None or (_whole(v) and v >= 1), "whole bytes >= 1 or None"),
    "prefetch_seconds": (lambda v: _real(v) and 0 <= v < math.inf, "finite seconds >= 0"),
    "bind": (lambda v: isinstance(v, str) and bool(v), "an interface name or address (a non-empty string)"),
    "port": (lambda v: _whole(v) and 0 <= v <= 65535, "a TCP port from 0 (any) to 65535"),
    "advertise": (lambda v: v is None or (isinstance(v, str) and bool(v)), "a host name or None"),
    "secret_dir": (lambda v: v is None or isinstance(v, (str, os.PathLike)), "a directory path or None"),
    "heartbeat_interval": (lambda v: _real(v) and 0 < v < math.inf, "finite seconds > 0"),
    "heartbeat_timeout": (lambda v: _real(v) and 0 < v < math.inf, "finite seconds > 0"),
    "events_kept": (lambda v: _whole(v) and v >= 1, "a whole number >= 1"),
}
"""Each pool option's check and what it expects (the pool's own checks assume these types)."""

POOL_OPTIONS = frozenset(_POOL_CHECKS)
"""The options of :class:`~elastic.pool.pool.Pool` a front-end passes on (:attr:`Settings.pool`)."""


@dataclass(frozen=True)
class Settings:
    """What every front-end needs to run tasks on pilot allocations (see the module docstring).

    Parameters
    ----------
    backend : {"local", "mock", "slurm"} or BatchBackend, default "local"
        Where allocations come from (:mod:`elastic.front.setup`).
    strategy : str or Strategy, default "asa"
        When and how big to request allocations: ``"bigjob"``, ``"perstage"``, ``"asa"`` (or any registry
        name), or a strategy object.
    workflow : str, Workflow or None, default None
        The workflow's name (its runtime history and remembered plan are kept under it), or a declared plan
        of its stages. None: the front-end's (``"default"``; the Parsl workflow's or the Prefect flow's
        name).
    store : None, False, str or Store, default None
        Where runs, runtimes, waits and learner state are kept: the default store, none, a SQLAlchemy URL,
        a store (wrapped in a :class:`~elastic.store.resilient.ResilientStore`, flushed but not closed at
        the end), or a ``ResilientStore`` the caller keeps and closes.
    learner : str, WaitPredictor or None, default None
        Wait learner by name (:data:`elastic.learners.choice.WAIT_LEARNERS`), or an object with
        ``predict(key)`` and ``observe(key, wait)``; None: the strategy's own.
    max_cores : int or None, default None
        No allocation wider (default: the backend's partition).
    job_cores : int or None, default None
        Most cores in one batch job: a wider allocation is requested as several jobs of at most this many
        cores, each released as soon as its cores are not needed. None: one job per allocation.
    idle_timeout : float, default 300.0
        Backend seconds a stage with nothing left to run keeps its allocations when nothing comes after it.
    poll_interval : float or None, default None
        Backend seconds between polls of allocation states (default 10 on Slurm, 30 otherwise).
    max_retries : int or None, default None
        Losses a task survives before its future fails. None: 2 (the Prefect runner: none, a lost task run
        counts against the Prefect task's own ``retries``; it refuses any other value).
    drain_margin : float, default 30.0
        Backend seconds before an allocation's walltime end when it takes no new task.
    speedup : float or None, default None
        ``backend="mock"`` only: simulated seconds per real second (default 60).
    name : str or None, default None
        Prefix of batch job names (1 to 64 printable characters, no spaces). None: the front-end's
        (``"elastic"``; ``"parsl"`` for the Parsl executor).
    user : str or None, default None
        Owner of the jobs (mock backend accounting).
    site : SiteConfig or None, default None
        The site's job settings (:mod:`elastic.site`). None: with ``"slurm"``, the site file; a backend
        object brings its own.
    submission_rate : float, SubmissionLimit or None, default None
        How fast allocation control may submit batch jobs (:mod:`elastic.control.rate`), on every backend
        and clock: a number ``N`` is ``N`` jobs a minute (in ``(0, 600]``), at most a minute's worth at
        once (``ceil(N)``, 1 to 30); a :class:`~elastic.control.rate.SubmissionLimit` sets the rate, the
        burst and the back-off after failed allocations. Kept as a ``SubmissionLimit``. None: 30 jobs at
        once, then 30 a minute. A request held back waits for its turn; the run is slowed, never stopped.
    progress : bool, logging.Logger or None, default None
        Show the run's progress (:mod:`elastic.front.progress`): a live view on a terminal, log lines
        elsewhere; a logger (or logger adapter) to write the lines to; False: nothing. None: the
        front-end decides (on by default everywhere).
    pool : Mapping[str, Any], default {}
        Options of the pool the agents join (:data:`POOL_OPTIONS`): ``workers``, ``worker_memory``,
        ``prefetch_seconds``, ``bind``, ``port``, ``advertise``, ``secret_dir``, ``heartbeat_interval``,
        ``heartbeat_timeout``, ``events_kept``. Front-ends also take them as keywords (``workers=4``).

    Raises
    ------
    ConfigError
        The first bad setting, named with its value and what is allowed.
    UnknownNameError
        An unknown backend or strategy name.

    Examples
    --------
    >>> Settings(backend="mock", max_cores=64).max_cores
    64
    >>> Settings(backend="pbs")
    Traceback (most recent call last):
    ...
    elastic.errors.UnknownNameError: unknown backend 'pbs'; choose one of: local, mock, slurm
    """

    backend: str | BatchBackend = "local"
    strategy: str | Strategy = "asa"
    workflow: str | Workflow | None = None
    store: Store | ResilientStore | str | bool | None = None
    learner: str | WaitPredictor | None = None
    max_cores: int | None = None
    job_cores: int | None = None
    idle_timeout: float = 300.0
    poll_interval: float | None = None
    max_retries: int | None = None
    drain_margin: float = 30.0
    speedup: float | None = None
    name: str | None = None
    user: str | None = None
    site: SiteConfig | None = None
    submission_rate: float | SubmissionLimit | None = None
    progress: bool | ProgressLogger | None = None
    pool: Mapping[str, Any] = field(default_factory=dict)

    __hash__ = None  # type: ignore[assignment]  # the pool options are a mapping

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle and copy as the fields (the read-only pool options as a plain dict), checked again."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return (_rebuild, ({**values, "pool": dict(self.pool)},))

    def __post_init__(self) -> None:
        """Check every setting (see the class docstring); freeze the pool options."""
        _check(isinstance(self.pool, Mapping), f"pool must be a mapping of pool options, got {self.pool!r}")
        object.__setattr__(self, "pool", types.MappingProxyType(dict(self.pool)))
        _check_backend(self.backend, self.speedup)
        from elastic.front.setup import resolve_strategy

        resolve_strategy(self.strategy)  # refuses what is neither a name nor a Strategy
        _check_workflow(self.workflow)
        _check_store(self.store)
        _check_learner(self.learner)
        _seconds("idle_timeout", self.idle_timeout, low=0, strict=False)
        _seconds("drain_margin", self.drain_margin, low=0, strict=False)
        if self.poll_interval is not None:
            _seconds("poll_interval", self.poll_interval, low=0, strict=True)
        for key in ("max_cores", "job_cores"):
            value = getattr(self, key)
            _check(
                value is None or (_whole(value) and value >= 1),
                f"{key} must be a whole number of cores >= 1 or None, got {value!r}",
            )
        _check(
            self.max_retries is None or (_whole(self.max_retries) and self.max_retries >= 0),
            f"max_retries must be a whole number >= 0, got {self.max_retries!r}",
        )
        name = self.name
        _check(
            name is None
            or (
                isinstance(name, str)
                and 0 < len(name) <= 64
                and name.isprintable()
                and not any(c.isspace() for c in name)
            ),
            f"name (the prefix of batch job names) must be 1 to 64 printable characters without spaces, "
            f"got {name!r}",
        )
        _check(
            self.user is None or (isinstance(self.user, str) and bool(self.user) and self.user.isprintable()),
            f"user must be a user name (a non-empty string) or None, got {self.user!r}",
        )
        _check(
            self.site is None or isinstance(self.site, SiteConfig),
            f"site must be a SiteConfig or None, got {self.site!r}",
        )
        if self.submission_rate is not None:
            limit = submission_limit(self.submission_rate, "Elastic: submission_rate")
            object.__setattr__(self, "submission_rate", limit)
        if self.progress is not None:
            check_progress(self.progress, "Settings")
        unknown = set(self.pool) - POOL_OPTIONS
        _check(not unknown, f"unknown options {sorted(unknown)}; allowed: {', '.join(sorted(POOL_OPTIONS))}")
        for option, value in self.pool.items():
            ok, expected = _POOL_CHECKS[option]
            _check(ok(value), f"{option} must be {expected}, got {value!r}")


FIELDS = tuple(f.name for f in dataclasses.fields(Settings))


def _rebuild(values: dict[str, Any]) -> Settings:
    return Settings(**values)


"""The names of :class:`Settings`' fields, in order."""


def settings_from(settings: Settings | None, /, **options: Any) -> Settings:
    """Return ``settings`` (default: ``Settings()``) with the keyword ``options`` in place of its values.

    Parameters
    ----------
    settings : Settings or None
        The settings given as one object, if any.
    **options
        :class:`Settings` fields (one left at ``None`` keeps the object's value) and pool options (they
        join :attr:`Settings.pool`; ``None`` is a pool option's value too).

    Returns
    -------
    Settings
        The settings in force, checked.

    Raises
    ------
    ConfigError
        ``settings`` is not a :class:`Settings`, an option is unknown, or a value is bad.
    """
    _check(
        settings is None or isinstance(settings, Settings),
        f"settings must be a Settings object or None, got {settings!r}",
    )
    base = settings if settings is not None else Settings()
    fields = {k: v for k, v in options.items() if k in FIELDS and k != "pool" and v is not None}
    pool = {k: v for k, v in options.items() if k not in FIELDS}
    unknown = set(pool) - POOL_OPTIONS
    if unknown:
        allowed = ", ".join(sorted({*FIELDS, *POOL_OPTIONS} - {"pool"}))
        _check(False, f"unknown options {sorted(unknown)}; allowed: {allowed}")
    if isinstance(options.get("pool"), Mapping):
        pool = {**options["pool"], **pool}
    if not fields and not pool:
        return base
    return dataclasses.replace(base, **fields, pool={**base.pool, **pool})


def site_of(settings: Settings) -> SiteConfig | None:
    """Return the site configuration the settings' backend will use, read and checked now.

    The settings' own; else, on ``"slurm"``, the site file (:func:`~elastic.site.load_site`: a bad one is
    refused here, before anything starts); a backend object's own; else None.
    """
    backend = settings.backend
    if isinstance(backend, str):
        if backend == "slurm" and settings.site is None:
            return load_site()
        return settings.site
    from elastic.front.setup import resolve_backend

    return resolve_backend(backend, site=settings.site).site


def _check_backend(backend: object, speedup: object) -> None:
    from elastic.front.setup import BACKENDS

    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise UnknownNameError("backend", backend, BACKENDS)
    else:
        _check(
            isinstance(backend, BatchBackend),
            f"backend must be one of {', '.join(BACKENDS)} or a BatchBackend object, got {backend!r}",
        )
    if speedup is not None:
        if backend == "mock":
            check_speedup(speedup, "Elastic: speedup")
        else:
            where = (
                f"backend={backend!r} runs on the real clock"
                if isinstance(backend, str)
                else "a backend object brings its own clock (MockBackend(clock='scaled', speedup=...))"
            )
            _check(False, f"speedup applies to backend='mock' only; {where}: drop speedup={speedup!r}")


def _check_workflow(workflow: object) -> None:
    if isinstance(workflow, Workflow):
        check_scale(workflow)
    else:
        _check(
            workflow is None or (isinstance(workflow, str) and bool(workflow)),
            f"workflow must be a name (a non-empty string) or a Workflow, got {workflow!r}",
        )


def _check_store(store: object) -> None:
    if not (store is None or isinstance(store, (bool, str))):
        from elastic.store import Store
        from elastic.store.resilient import ResilientStore

        _check(
            isinstance(store, (Store, ResilientStore)),
            "store must be None (the default store), False (none), a SQLAlchemy URL, a Store or a "
            f"ResilientStore, got {store!r}",
        )


def _check_learner(learner: object) -> None:
    from elastic.learners.choice import WAIT_LEARNERS

    if isinstance(learner, str):
        _check(
            learner in WAIT_LEARNERS,
            f"learner must be one of {', '.join(WAIT_LEARNERS)} (or None: the strategy's own), "
            f"got {learner!r}",
        )
    elif learner is not None:  # None: the strategy's own
        _check(
            callable(getattr(learner, "predict", None)) and callable(getattr(learner, "observe", None)),
            f"learner must be a policy name or have predict(key) and observe(key, wait), got {learner!r}",
        )


def check_settings(**settings: Any) -> None:
    """Refuse the settings :class:`~elastic.front.door.Elastic` would refuse, without starting anything.

    Kept for callers of the keyword form: build a :class:`Settings` instead (it checks itself when built).
    ``pool_options`` is the mapping of pool options (:attr:`Settings.pool`).

    Raises
    ------
    ConfigError
        The first bad setting, named with its value and what is allowed.
    """
    pool = settings.pop("pool_options", None) or {}
    settings_from(None, **settings, **pool)

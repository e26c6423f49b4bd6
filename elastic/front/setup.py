"""What the front door is built from: a backend, a strategy and a store, given by name or as objects.

Names a user may give (errors list the allowed ones):

- backend: ``"local"`` (this machine, :class:`~elastic.backends.local.LocalBackend`; the default),
  ``"mock"`` (the simulated Slurm queue on its scaled clock, busy with synthetic background load), ``"slurm"``
  (the cluster ``SLURM_CONF`` points at, default partition, with the site file's settings:
  :mod:`elastic.site`), or any object with the
  :class:`~elastic.backends.base.BatchBackend` protocol (``MockBackend(clock="scaled", ...)``,
  ``SlurmBackend(partition=..., account=...)``);
- strategy: a registry name (``bigjob``, ``perstage``, ``asa``, ...) or a
  :class:`~elastic.strategies.base.Strategy`;
- store: ``None`` (the default store: ``$ELASTIC_STORE_URL`` or a SQLite file in the user's data
  directory), ``False`` (nothing kept across runs), a SQLAlchemy URL, or a :class:`~elastic.store.Store`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic.backends.base import BatchBackend
from elastic.errors import ConfigError, UnknownNameError
from elastic.site import SiteConfig, describe
from elastic.strategies.base import Strategy, make_strategy
from elastic.workflow import Stage, Workflow

if TYPE_CHECKING:
    from elastic.learners.base import WaitPredictor
    from elastic.store import Store
    from elastic.store.resilient import ResilientStore

logger = logging.getLogger(__name__)

__all__ = [
    "BACKENDS",
    "Backend",
    "note_site",
    "plan_from_json",
    "plan_to_json",
    "resolve_backend",
    "resolve_learner",
    "resolve_store",
    "resolve_strategy",
]

BACKENDS = ("local", "mock", "slurm")
"""Backend names the front door knows."""


@dataclass(frozen=True, slots=True)
class Backend:
    """A resolved backend: the object, its clock speed and whether the front door closes it."""

    backend: BatchBackend
    speedup: float
    """Backend seconds per real second (the mock backend's scaled clock; 1 elsewhere)."""
    owned: bool
    site: SiteConfig | None = None
    """The site configuration in force: the Slurm backend's, or the one given for another backend."""


def resolve_backend(
    backend: str | BatchBackend, *, speedup: float | None = None, site: SiteConfig | None = None
) -> Backend:
    """Return the backend ``backend`` names (see the module docstring), with the site configuration.

    ``"slurm"`` is created with ``site`` (None: the site file, :func:`elastic.site.load_site`). A
    ``SlurmBackend`` object brings its own site; ``site`` may then only repeat it. Other backends keep
    ``site`` as given (only its ``python`` applies there) and read no site file.

    Raises
    ------
    UnknownNameError
        An unknown name.
    ConfigError
        A mock backend on the virtual clock (it cannot run real tasks), ``speedup`` with a backend
        other than ``"mock"`` (the local and Slurm backends run on the real clock; a backend object
        brings its own), ``site`` not a :class:`~elastic.site.SiteConfig`, or a backend object whose own
        site differs from ``site``.
    SiteConfigError
        ``"slurm"`` without ``site`` and a bad site file.
    """
    if site is not None and not isinstance(site, SiteConfig):
        raise ConfigError(f"site must be a SiteConfig or None, got {type(site).__name__}")
    if isinstance(backend, str):
        if speedup is not None and backend != "mock":
            raise ConfigError(
                f"speedup applies to backend='mock' only; backend={backend!r} runs on the real clock: "
                f"drop speedup={speedup!r}"
            )
        if backend == "local":
            from elastic.backends.local import LocalBackend

            return Backend(LocalBackend(), 1.0, True, site)
        if backend == "mock":
            from elastic.backends.mock import MockBackend
            from elastic.experiments import default_background

            k = 60.0 if speedup is None else speedup
            load = default_background(64)
            mock = MockBackend(nodes=64, workload=load, clock="scaled", speedup=k, start=86400.0)
            return Backend(mock, k, True, site)
        if backend == "slurm":
            from elastic.backends.slurm import SlurmBackend

            slurm = SlurmBackend(site=site)
            return Backend(slurm, 1.0, True, slurm.site)
        raise UnknownNameError("backend", backend, BACKENDS)
    if not isinstance(backend, BatchBackend):
        raise ConfigError(
            f"backend must be one of {', '.join(BACKENDS)} or a BatchBackend object, "
            f"got {type(backend).__name__}"
        )
    if speedup is not None:
        raise ConfigError("speedup applies to backend='mock' only; a backend object brings its own clock")
    own_speed = getattr(backend, "speedup", 1.0)
    if own_speed is None:
        raise ConfigError(
            "this mock backend runs on the virtual clock, which cannot run real tasks: create it with "
            "clock='scaled' and a speedup"
        )
    own_site = getattr(backend, "site", None)
    if isinstance(own_site, SiteConfig):
        if site is not None and site != own_site:
            raise ConfigError(
                f"site={site!r} differs from the site of the backend object ({own_site!r}): give it once, "
                f"as {type(backend).__name__}(site=...)"
            )
        site = own_site
    return Backend(backend, float(own_speed), False, site)


def resolve_strategy(strategy: str | Strategy) -> Strategy:
    """Return the strategy ``strategy`` names, or the object itself."""
    if isinstance(strategy, str):
        return make_strategy(strategy)
    if not isinstance(strategy, Strategy):
        raise ConfigError(f"strategy must be a registry name or a Strategy, got {type(strategy).__name__}")
    return strategy


def resolve_learner(
    learner: str | WaitPredictor | None, strategy: str | Strategy
) -> tuple[WaitPredictor, str]:
    """Return the wait learner and the name its state is shared under in the store.

    ``learner`` None: the one the strategy runs with when it is a registry name
    (:func:`~elastic.strategies.strategy_learner`), else the default; a name: that learner; a learner
    object: itself, its state shared under its kind's name (``ewma`` or ``asa``).
    """
    from elastic.learners.choice import DEFAULT_WAIT_LEARNER, make_wait_learner, shared_name
    from elastic.strategies import STRATEGY_NAMES, strategy_learner

    if learner is None:
        named = strategy if isinstance(strategy, str) and strategy in STRATEGY_NAMES else None
        learner = strategy_learner(named) if named is not None else DEFAULT_WAIT_LEARNER
    if isinstance(learner, str):
        return make_wait_learner(learner), shared_name(learner)
    from elastic.learners.ewma import LogEWMA

    return learner, "ewma" if isinstance(learner, LogEWMA) else "asa"


def resolve_store(
    store: str | Store | ResilientStore | bool | None,
) -> tuple[ResilientStore | None, bool]:
    """Return the run's store (None: none), wrapped so that it never blocks it, and whether to close it.

    A store the front door opens is closed with it; a :class:`~elastic.store.Store` the user gave is
    wrapped and only flushed at the end (``owns=False``); a ``ResilientStore`` the user gave is used as
    it is and left open for the user.
    """
    if store is False:
        return None, False
    if store is True:
        store = None
    from elastic.store import Store
    from elastic.store.resilient import ResilientStore

    if isinstance(store, ResilientStore):
        return store, False
    if store is None or isinstance(store, str):
        return ResilientStore(Store(store)), True
    return ResilientStore(store, owns=False), True


def plan_to_json(plan: Workflow) -> list[dict[str, Any]]:
    """Return the plan as JSON-able records (kept with a run, read back by the next run of that name)."""
    return [
        {
            "name": s.name,
            "tasks": s.tasks,
            "cores": s.cores,
            "runtime": s.runtime,
            "depends_on": list(s.depends_on or ()),
        }
        for s in plan.stages
    ]


def plan_from_json(name: str, records: object) -> Workflow | None:
    """Rebuild a plan from :func:`plan_to_json` records; None when they do not make a valid one."""
    if not isinstance(records, list) or not records:
        return None
    try:
        stages = tuple(
            Stage(
                r["name"],
                int(r["tasks"]),
                int(r["cores"]),
                None if r.get("runtime") is None else float(r["runtime"]),
                depends_on=tuple(r.get("depends_on", ())),
            )
            for r in records
            if isinstance(r, Mapping)
        )
        return Workflow(name, stages)
    except (ConfigError, KeyError, TypeError, ValueError):
        return None


def remembered_plan(store: Store | ResilientStore, name: str) -> Workflow | None:
    """Return the plan of the last completed run of workflow ``name`` kept in ``store``, if any."""
    runs = store.runs(workflow=name)
    if runs.empty:
        return None
    done = runs[runs["status"] == "completed"]
    for params in reversed(list(done["params"])):
        plan = plan_from_json(name, (params or {}).get("plan"))
        if plan is not None:
            return plan
    return None


def note_site(site: SiteConfig, backend: str) -> None:
    """Log the site settings in force; warn about those the backend does not use (all but ``python``)."""
    settings = describe(site)
    if not settings:
        return
    logger.info("front door: site settings %s", settings)
    unused = sorted(set(settings) - {"python"})
    if backend != "slurm" and unused:
        logger.warning(
            "front door: site settings %s apply to Slurm jobs only; on the %s backend only python is used",
            unused,
            backend,
        )

"""The parts of one front door's run, built from its settings and wired together.

:func:`assemble` is where :class:`~elastic.front.door.Elastic` gets everything it runs: the backend (and
its clock speed and site), the store and the run's record, the live demand (with the declared or
remembered plan), the knowledge (wait learner and runtime history), the pool, the execution between the
controller and the pool, the allocation controller and the intake of tasks. Each part is made once, here,
and handed the others it needs; the front door only starts, watches and ends them.

What must be closed is put in the caller's clean-up list as soon as it exists, so that a failure half-way
(a bad site, a store that cannot be opened, a port in use) leaves nothing running once the caller runs
that list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elastic.backends.base import BatchBackend
from elastic.batch import PartitionInfo
from elastic.control.controller import AllocationController
from elastic.control.live import LiveDemand
from elastic.control.pool_execution import PoolExecution
from elastic.front.intake import Intake
from elastic.front.record import RunRecord
from elastic.front.settings import Settings, submission_limit
from elastic.front.setup import (
    note_site,
    remembered_plan,
    resolve_backend,
    resolve_learner,
    resolve_store,
    resolve_strategy,
)
from elastic.pool.pool import Pool
from elastic.site import SiteConfig
from elastic.strategies.base import Strategy
from elastic.strategies.knowledge import Knowledge, MemoryHistory
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from elastic.store.resilient import ResilientStore

__all__ = ["RunParts", "assemble"]


@dataclass(frozen=True, slots=True)
class RunParts:
    """The parts of one run, wired together (:func:`assemble`)."""

    strategy: Strategy
    backend: BatchBackend
    speedup: float
    """Backend seconds per real second."""
    site: SiteConfig | None
    """The site configuration in force (None: none given, not on Slurm)."""
    store: ResilientStore | None
    record: RunRecord
    name: str
    """The workflow's name (its plan and runtimes are kept under it)."""
    demand: LiveDemand
    knowledge: Knowledge
    pool: Pool
    partition: PartitionInfo
    execution: PoolExecution
    controller: AllocationController
    intake: Intake


def assemble(
    settings: Settings,
    *,
    poke: threading.Event,
    closed: threading.Event,
    cleanup: list[Callable[[], None]],
) -> RunParts:
    """Build the parts of a run from ``settings`` and record its start.

    Parameters
    ----------
    settings : Settings
        The run's settings (checked already).
    poke : threading.Event
        Set to wake the control thread (by the intake and by the pool's events).
    closed : threading.Event
        Set when the front door stops taking tasks.
    cleanup : list of callable
        Each part that must be closed is appended as it is made (closed in reverse order by the caller,
        also when this raises).

    Raises
    ------
    ConfigError, UnknownNameError
        A bad setting (a learner, strategy or backend name; the site's options refused by ``sbatch
        --test-only`` on Slurm).
    """
    s = settings
    workflow = "default" if s.workflow is None else s.workflow
    pool_options = dict(s.pool)
    waits, learner_name = resolve_learner(s.learner, s.strategy)
    strategy = resolve_strategy(s.strategy)
    resolved = resolve_backend(s.backend, speedup=s.speedup, site=s.site)
    backend, speedup, site = resolved.backend, resolved.speedup, resolved.site
    close_backend = getattr(backend, "close", None)
    if resolved.owned and callable(close_backend):
        cleanup.append(close_backend)
    check_site = getattr(backend, "check_site", None)  # Slurm: sbatch --test-only
    if callable(check_site):
        check_site()
    store, close_store = resolve_store(s.store)
    if store is not None and close_store:
        cleanup.append(store.close)
    record = RunRecord(store)
    name = workflow.name if isinstance(workflow, Workflow) else str(workflow)
    plan = workflow if isinstance(workflow, Workflow) else None
    if plan is None and store is not None:
        plan = remembered_plan(store, name)
    demand = LiveDemand(
        name,
        record=record.add,
        clock=backend.now,
        plan=plan,
        idle_timeout=s.idle_timeout,
        speedup=speedup,
    )
    knowledge = Knowledge(
        demand.plan,
        waits=waits,
        history=store if store is not None else MemoryHistory(),
        wait_store=store,
        backend=backend.name,
        max_walltime=backend.partition().max_walltime,
        shared=store,
        learner_name=learner_name,
    )
    if site is not None:
        note_site(site, backend.name)
        if site.python is not None:
            pool_options = {**pool_options, "python": site.python}
    pool = Pool(
        max_retries=2 if s.max_retries is None else s.max_retries,
        drain_margin=s.drain_margin / speedup,
        **pool_options,
    )
    partition = backend.partition()
    execution = PoolExecution(
        backend, speedup=speedup, pool=pool, on_event=poke.set, node_cores=partition.node_cores
    )
    cleanup.append(execution.close)
    controller = AllocationController(
        strategy,
        backend,
        execution,
        knowledge,
        demand,
        record=record.add,
        poll_interval=s.poll_interval or (10.0 if backend.name == "slurm" else 30.0),
        name="elastic" if s.name is None else s.name,
        user=s.user,
        max_cores=min(partition.cores, s.max_cores or partition.cores),
        job_cores=s.job_cores,
        node_cores=partition.node_cores,
    )
    controller.rate = submission_limit(s.submission_rate).rate()
    intake = Intake(
        pool,
        demand,
        poke=poke,
        closed=closed,
        max_cores=controller.max_cores,
        max_walltime=partition.max_walltime,
        speedup=speedup,
        node_cores=partition.node_cores,
    )
    record.start(name, strategy.name, backend)
    return RunParts(
        strategy,
        backend,
        speedup,
        site,
        store,
        record,
        name,
        demand,
        knowledge,
        pool,
        partition,
        execution,
        controller,
        intake,
    )

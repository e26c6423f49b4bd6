"""``ElasticExecutor``: Parsl apps on pilot allocations that a strategy (Big-Job, Per-Stage, ASA) chooses.

One line in a Parsl configuration::

    parsl.load(Config(executors=[ElasticExecutor(backend="slurm", strategy="asa")], strategy="none"))

The executor is a thin adapter around :class:`elastic.Elastic` (the front door), which owns the backend,
the pool of agents, the strategy, the wait learner and the store: :meth:`ElasticExecutor.start` creates it,
:meth:`ElasticExecutor.submit` hands it one task per app invocation, :meth:`ElasticExecutor.shutdown`
releases every allocation. What it adds is what only Parsl knows:

- **Stages**: an app's stage is its function's name, or ``parsl_resource_specification["stage"]``; ``cores``
  and ``runtime`` (expected seconds, used for walltime-aware placement and the first walltime requests)
  come from the same dictionary (:func:`elastic.executors.parsl_plan.app_resources`).
- **Coming stages**: every ``plan_interval`` seconds a thread counts the tasks the DataFlowKernel holds for
  this executor, waiting on their inputs, by stage, and announces them with :meth:`elastic.Elastic.expect`
  (:func:`elastic.executors.parsl_plan.waiting_stages`), so ASA can pre-submit stage k+1's allocation while
  stage k
  runs and Big-Job can size for a stage whose tasks are not ready yet. The DataFlowKernel is the one
  calling :meth:`start` (``DataFlowKernel.add_executors`` calls ``executor.start()``,
  ``parsl/dataflow/dflow.py:1127``), else the one ``parsl.dfk()`` returns.
- **Tasks**: Parsl hands ``submit`` the app's function wrapped by ``parsl.app.errors.wrap_error``
  (``parsl/app/python.py:42``, ``parsl/app/bash.py:131``), which returns exceptions as a
  ``RemoteExceptionWrapper`` value. The executor sends the function inside instead, so a worker does not
  import Parsl (about 1.3 s on this machine) to run a ``python_app``; its exception then fails the future
  itself, with the remote traceback as ``__cause__``, which the DataFlowKernel handles exactly like a
  wrapped one (``_unwrap_remote_exception_wrapper`` re-raises either, ``dflow.py:575-579``). Any other
  wrapper (``walltime=``, monitoring, file staging) is sent as it is.
- **Lost tasks** (an allocation killed, an agent dead) are re-run by the pool itself, up to ``max_retries``
  times, before Parsl sees anything: they never count against Parsl's ``retries``.

Functions are pickled with cloudpickle: an app defined with ``@python_app`` in a module is sent by value
(the module's name then refers to the app object, not the function); a plain function referenced by its
module (``python_app(fn)``) is imported by the worker, whose ``PYTHONPATH`` must find it (the
allocations inherit the environment of the Parsl process).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic.extras import require

try:
    from parsl.executors.base import ParslExecutor
    from parsl.jobs.states import JobStatus
except ImportError:  # say which extra installs it, not only that a module is missing
    require("parsl", "the Parsl executor (elastic.parsl)")
    raise

from elastic.allocations import AllocationEvent
from elastic.backends.base import BatchBackend
from elastic.control.rate import SubmissionLimit
from elastic.errors import ConfigError
from elastic.executors.parsl_app import run_app
from elastic.executors.parsl_blocks import block_changes, block_messages, block_statuses
from elastic.executors.parsl_plan import app_resources, calling_dfk, loaded_dfk, waiting_stages
from elastic.front.door import Elastic, FrontDoorView
from elastic.front.settings import Settings, settings_from, site_of
from elastic.front.setup import resolve_strategy
from elastic.pool.events import PoolEvent
from elastic.pool.tasks import Task
from elastic.site import SiteConfig

if TYPE_CHECKING:
    from parsl.dataflow.dflow import DataFlowKernel

    from elastic.store import Store
    from elastic.strategies.base import Strategy
    from elastic.workflow import Workflow

__all__ = ["ElasticExecutor", "worker_callable"]

logger = logging.getLogger(__name__)

#: The logger of the run's progress lines: a child of Parsl's, so they land in Parsl's run log.
PROGRESS_LOGGER = "parsl.elastic"


class ElasticExecutor(ParslExecutor):
    """A Parsl executor that runs apps on pilot allocations chosen by Big-Job, Per-Stage or ASA.

    Parameters
    ----------
    label : str, default "elastic"
        Unique name of the executor in the Parsl configuration (``@python_app(executors=[label])``).
    backend : {"local", "mock", "slurm"}, BatchBackend or None, default None
        Where allocations come from (default: the settings', ``"local"``): this machine, the simulated
        Slurm queue on a scaled clock, the Slurm cluster ``SLURM_CONF`` points at (job files under the run
        directory), or a backend object (``SlurmBackend(partition=...)``, ``MockBackend(clock="scaled")``).
    strategy : str, Strategy or None, default None
        ``"bigjob"``, ``"perstage"``, ``"asa"`` (or any registry name), or a strategy object (default: the
        settings', ``"asa"``).
    settings : Settings or None, default None
        The options every front-end shares, at once (:class:`~elastic.front.settings.Settings`).
    workflow, store, learner, max_cores, job_cores, idle_timeout, poll_interval : optional
        As the :class:`~elastic.front.settings.Settings` fields (a keyword given replaces the object's
        value). ``workflow`` None: the DataFlowKernel's workflow name (the script's file name).
    max_retries, drain_margin, speedup, name, user, site, submission_rate, progress : optional
        As the :class:`~elastic.front.settings.Settings` fields. ``max_retries`` counts losses (allocation
        or agent gone), not Parsl's retries; ``name`` None: ``"parsl"``; ``site`` None with ``"slurm"``:
        the site file, read and checked here; ``progress`` None: True, and the lines also go to Parsl's
        run log (``runinfo/NNN/parsl.log``, logger ``parsl.elastic``).
    job_name : str or None, default None
        ``name`` under its earlier name (give one of the two).
    plan_interval : float, default 1.0
        Real seconds between two looks at the tasks the DataFlowKernel holds (0: never look).
    storage_access : list or None, default None
        Parsl staging providers (``None``: Parsl's default staging).
    remote_monitoring_radio : RadioConfig or None, default None
        How tasks report to Parsl monitoring (``Config(monitoring=MonitoringHub(...))``). None: Parsl's
        ``FilesystemRadio``, as Parsl's WorkQueue and TaskVine executors default to (HTEX's own radio
        needs HTEX's result channel): tasks write messages under the run directory, which the allocations
        see already (the pool's secret is there).
    **pool_options
        Passed to the pool: ``workers``, ``worker_memory``, ``prefetch_seconds``, ``bind``, ``port``,
        ``advertise``, ``secret_dir``, ``heartbeat_interval``, ``heartbeat_timeout``, ``events_kept``.

    Raises
    ------
    ConfigError
        A bad setting (before anything starts).
    UnknownNameError
        An unknown backend or strategy name.
    """

    status_polling_interval: float = 2.0
    """Seconds between two looks at the allocations' states for Parsl monitoring's block table (as
    ``BlockProviderExecutor.status_polling_interval``)."""

    def __init__(
        self,
        label: str = "elastic",
        backend: str | BatchBackend | None = None,
        strategy: str | Strategy | None = None,
        *,
        settings: Settings | None = None,
        workflow: str | Workflow | None = None,
        store: Store | str | bool | None = None,
        learner: Any = None,
        max_cores: int | None = None,
        job_cores: int | None = None,
        idle_timeout: float | None = None,
        poll_interval: float | None = None,
        max_retries: int | None = None,
        drain_margin: float | None = None,
        speedup: float | None = None,
        name: str | None = None,
        user: str | None = None,
        site: SiteConfig | None = None,
        submission_rate: float | SubmissionLimit | None = None,
        progress: bool | None = None,
        job_name: str | None = None,
        plan_interval: float = 1.0,
        storage_access: list[Any] | None = None,
        remote_monitoring_radio: Any = None,
        **pool_options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(label, str) or not label:
            raise ConfigError(f"ElasticExecutor: label must be a non-empty string, got {label!r}")
        interval_ok = isinstance(plan_interval, (int, float)) and not isinstance(plan_interval, bool)
        if not (interval_ok and 0 <= plan_interval < float("inf")):
            raise ConfigError(
                f"ElasticExecutor: plan_interval must be finite seconds >= 0, got {plan_interval!r}"
            )
        if job_name is not None:
            if not (isinstance(job_name, str) and job_name and not any(c.isspace() for c in job_name)):
                raise ConfigError(
                    f"ElasticExecutor: job_name must be a non-empty prefix without spaces, got {job_name!r}"
                )
            if name is not None and name != job_name:
                raise ConfigError(
                    f"ElasticExecutor: job_name is name's earlier spelling; give one, got name={name!r} "
                    f"and job_name={job_name!r}"
                )
        if storage_access is not None and not isinstance(storage_access, list):
            raise ConfigError(
                "ElasticExecutor: storage_access must be a list of Parsl staging providers or None, "
                f"got {storage_access!r}"
            )
        self.settings = settings_from(
            settings,
            backend=backend,
            strategy=strategy,
            workflow=workflow,
            store=store,
            learner=learner,
            max_cores=max_cores,
            job_cores=job_cores,
            idle_timeout=idle_timeout,
            poll_interval=poll_interval,
            max_retries=max_retries,
            drain_margin=drain_margin,
            speedup=speedup,
            name=job_name if name is None else name,
            user=user,
            site=site,
            submission_rate=submission_rate,
            progress=progress,
            **pool_options,
        )
        """The settings in force (:class:`~elastic.front.settings.Settings`, keywords applied)."""
        self.label = label
        self.backend = self.settings.backend
        self.site = site_of(self.settings)  # a bad site file is refused now, before anything is submitted
        self.strategy = resolve_strategy(self.settings.strategy)
        self.workflow = self.settings.workflow
        self.job_name = "parsl" if self.settings.name is None else self.settings.name
        self.plan_interval = plan_interval
        self.storage_access = storage_access
        self.progress = True if self.settings.progress is None else self.settings.progress
        if remote_monitoring_radio is None:
            from parsl.monitoring.radios.filesystem import FilesystemRadio

            remote_monitoring_radio = FilesystemRadio()
        self.remote_monitoring_radio = remote_monitoring_radio
        self._elastic: Elastic | None = None
        self._dfk: DataFlowKernel | None = None
        self._own_backend: BatchBackend | None = None
        self._stop = threading.Event()
        self._planner: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._blocks: dict[str, JobStatus] = {}  # the allocations' states last sent to Parsl monitoring
        self._block_sender: Any = None
        self._monitor: threading.Thread | None = None
        self._blocks_changed = threading.Event()  # set by the pool's allocation events

    def __repr__(self) -> str:
        backend = self.backend if isinstance(self.backend, str) else type(self.backend).__name__
        return f"ElasticExecutor(label={self.label!r}, backend={backend!r}, strategy={self.strategy.name!r})"

    # -- life cycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the front door (backend, pool, allocation control) and the look at waiting tasks.

        Called by the DataFlowKernel once it has set :attr:`run_dir` and :attr:`run_id`.
        """
        self._dfk = calling_dfk()
        if self._dfk is None:
            self._dfk = loaded_dfk()
        options = dict(self.settings.pool)
        backend: str | BatchBackend = self.backend
        if backend == "slurm":  # job files and the pool's secret beside Parsl's run directory
            from elastic.backends.slurm import SlurmBackend

            workdir = Path(self.run_dir) / "elastic" / "slurm"
            backend = self._own_backend = SlurmBackend(workdir=workdir, site=self.site)
            options.setdefault("secret_dir", str(Path(self.run_dir) / "elastic"))
        workflow = self.workflow
        if workflow is None:
            workflow = str(getattr(self._dfk, "workflow_name", None) or "parsl")
        self._elastic = Elastic(
            backend,
            self.strategy,
            settings=self.settings,
            workflow=workflow,
            name=self.job_name,
            site=self.site,
            # Parsl's run log is its "parsl" logger's file: our lines go there too
            progress=logging.getLogger(PROGRESS_LOGGER) if self.progress is True else self.progress,
            **options,
        )
        self._unsubscribe = self._elastic.pool.subscribe(self._log_allocation)
        messages = getattr(self, "monitoring_messages", None)
        if messages is not None:  # Config(monitoring=MonitoringHub(...))
            from parsl.monitoring.radios.multiprocessing import MultiprocessingQueueRadioSender

            self._block_sender = MultiprocessingQueueRadioSender(messages)
            self._monitor = threading.Thread(
                target=self._monitor_loop, name=f"{self.label}-blocks", daemon=True
            )
            self._monitor.start()
        if self._dfk is not None and self.plan_interval > 0:
            self._planner = threading.Thread(target=self._plan_loop, name=f"{self.label}-plan", daemon=True)
            self._planner.start()
        else:
            logger.info(
                "%s: no DataFlowKernel to look at: stages are known from the declared or remembered plan "
                "and from the tasks as they are submitted",
                self.label,
            )
        logger.info(
            "%s: started (%s on %s)", self.label, self.strategy.name, getattr(backend, "name", backend)
        )

    def submit(
        self, func: Callable[..., Any], resource_specification: Mapping[str, Any], *args: Any, **kwargs: Any
    ) -> Future[Any]:
        """Queue one app invocation as a task; return its future (never blocks).

        Raises
        ------
        InvalidResourceSpecification
            ``resource_specification`` has a key other than ``stage``, ``cores`` and ``runtime``, or a bad
            value. Parsl fails that try of the task with it.
        """
        front = self._front
        app = str(getattr(func, "__name__", None) or "parsl")
        res = app_resources(resource_specification, app)
        task = Task.call(  # run_app: a SystemExit or KeyboardInterrupt the app raises fails only that app
            run_app,
            (worker_callable(func), *args),
            kwargs,
            cores=res.cores,
            estimate=res.runtime,
            stage=res.stage,
        )
        future = front.submit_task(task)
        future.parsl_executor_task_id = task.task_id  # type: ignore[attr-defined]  # Parsl logs it
        return future

    def shutdown(self) -> None:
        """Release every allocation and stop the front door (``parsl.dfk().cleanup()`` calls it).

        Tasks still queued are cancelled and running ones stop with their allocations, as Parsl's own
        executors do; the run is recorded as ``completed`` when nothing was left, else ``cancelled``. When
        it returns, no allocation of this executor is left in the batch queue.
        """
        self._stop.set()
        if self._planner is not None:
            self._planner.join()
        if self._monitor is not None:
            self._blocks_changed.set()
            self._monitor.join()
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._elastic is not None:
            left = self._elastic.outstanding
            self._elastic.shutdown(wait=False, cancel_futures=left > 0)
            if self._block_sender is not None:  # the allocations' final states (all ended now)
                self.send_block_changes()
            logger.info(
                "%s: shut down (%s)", self.label, self._elastic.result.status if self._elastic.result else "?"
            )
        if self._own_backend is not None and hasattr(self._own_backend, "close"):
            self._own_backend.close()
        super().shutdown()

    # -- watching ------------------------------------------------------------------------------------

    @property
    def front_door(self) -> Elastic:
        """The :class:`elastic.Elastic` behind the executor (its pool, its result after shutdown)."""
        return self._front

    def view(self) -> FrontDoorView:
        """Stages, allocations, busy cores and queued tasks now (:meth:`elastic.Elastic.view`)."""
        return self._front.view()

    def status(self) -> dict[str, JobStatus]:
        """Every allocation by id, as Parsl's ``BlockProviderExecutor.status()`` gives its blocks."""
        return block_statuses(self._front.view().allocations)

    def send_block_changes(self) -> dict[str, JobStatus]:
        """Send the allocations whose state changed to Parsl monitoring as blocks; return what was sent.

        What Parsl's ``BlockProviderExecutor.poll_facade`` does for HTEX's blocks: every allocation is a
        block (its id the block id, its batch job id the job id), and a message of type ``BLOCK_INFO``
        goes to the monitoring database's ``block`` table at each change of state, so ``parsl-visualize``
        shows the allocations. Called at each allocation event of the pool and every
        ``status_polling_interval`` seconds while the executor runs with monitoring on, and once more at
        shutdown; without monitoring it sends nothing.
        """
        if self._block_sender is None:
            return {}
        from parsl.monitoring.message_type import MessageType

        jobs = {a.alloc_id: a.backend_job_id for a in self._front.view().allocations}
        changed = block_changes(self.status(), self._blocks)
        if changed:
            messages = block_messages(changed, jobs, self.run_id, self.label)
            self._block_sender.send((MessageType.BLOCK_INFO, messages))
        return changed

    def _monitor_loop(self) -> None:
        while not self._stop.is_set():
            self._blocks_changed.wait(self.status_polling_interval)
            self._blocks_changed.clear()
            if self._stop.is_set():
                return
            try:
                self.send_block_changes()
            except Exception:  # the front door is ending: the last states go out at shutdown
                logger.debug("%s: sending block states to Parsl monitoring failed", self.label, exc_info=True)

    @property
    def _front(self) -> Elastic:
        if self._elastic is None:
            raise ConfigError(
                f"ElasticExecutor {self.label!r} is not started: load it with parsl.load(Config(...))"
            )
        return self._elastic

    def _log_allocation(self, event: PoolEvent) -> None:
        if isinstance(event, AllocationEvent):
            self._blocks_changed.set()  # the monitoring thread looks at once (not from the pool's thread)
            logger.info(
                "%s: allocation %s (stage %s, %d cores) %s%s",
                self.label,
                event.alloc_id,
                event.stage,
                event.cores,
                event.state.value,
                f": {event.detail}" if event.detail else "",
            )

    # -- coming stages -------------------------------------------------------------------------------

    def _plan_loop(self) -> None:
        announced: set[str] = set()
        while not self._stop.wait(self.plan_interval):
            try:
                announced = self.announce_waiting(announced)
            except Exception:  # the DataFlowKernel changed under us: look again next time
                logger.exception("%s: counting the DataFlowKernel's waiting tasks failed", self.label)

    def announce_waiting(self, announced: Iterable[str] = ()) -> set[str]:
        """Announce the DataFlowKernel's waiting tasks of this executor by stage; return the stages announced.

        ``announced`` are the stages announced last time: those with no waiting task left are set to 0.
        Tasks submitted while the records were read are taken off, so a stage is not kept open by tasks
        it already has: how many the front door took of each stage is read before and after the look
        (:meth:`elastic.Elastic.tasks_taken`, the run's one count per stage).
        """
        tasks = getattr(self._dfk, "tasks", None)
        if tasks is None:
            return set()
        front = self._front
        before = front.tasks_taken()
        # a copy of the values is atomic under the GIL (as DataFlowKernel.wait_for_current_tasks does)
        waiting = waiting_stages(list(tasks.values()), self.label)
        now: set[str] = set()
        for w in waiting:
            during = front.tasks_taken().get(w.stage, 0) - before.get(w.stage, 0)
            front.expect(w.stage, max(0, w.tasks - during), cores=w.cores, after=w.after, runtime=w.runtime)
            now.add(w.stage)
        for stage in set(announced) - now:
            front.expect(stage, 0)
        return now


def worker_callable(func: Callable[..., Any]) -> Callable[..., Any]:
    """Return what a worker should call for ``func``.

    That is the app's function when ``func`` is Parsl's error wrapper around it (see the module docstring),
    else ``func`` itself.

    Examples
    --------
    >>> from parsl.app.errors import wrap_error
    >>> def f(x):
    ...     return x
    >>> worker_callable(wrap_error(f)) is f, worker_callable(f) is f
    (True, True)
    """
    inner = getattr(func, "__wrapped__", None)
    if inner is not None and callable(inner) and getattr(func, "__code__", None) is _wrap_error_code():
        return inner  # type: ignore[no-any-return]
    return func


def _wrap_error_code() -> Any:
    global _WRAP_ERROR_CODE
    if _WRAP_ERROR_CODE is None:
        from parsl.app.errors import wrap_error

        _WRAP_ERROR_CODE = wrap_error(len).__code__
    return _WRAP_ERROR_CODE


_WRAP_ERROR_CODE: Any = None

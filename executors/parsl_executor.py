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

import datetime
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic.extras import require

try:
    from parsl.executors.base import ParslExecutor
    from parsl.jobs.states import JobState, JobStatus
except ImportError:  # say which extra installs it, not only that a module is missing
    require("parsl", "the Parsl executor (elastic.parsl)")
    raise

from elastic.allocations import AllocationEvent, AllocationState
from elastic.backends.base import BatchBackend
from elastic.errors import ConfigError, UnknownNameError
from elastic.executors.parsl_plan import app_resources, waiting_stages
from elastic.front.door import Elastic, FrontDoorView, check_settings
from elastic.front.setup import BACKENDS, resolve_backend, resolve_strategy
from elastic.pool.events import PoolEvent
from elastic.pool.tasks import Task
from elastic.site import SiteConfig, load_site

if TYPE_CHECKING:
    from parsl.dataflow.dflow import DataFlowKernel

    from elastic.store import Store
    from elastic.strategies.base import Strategy
    from elastic.workflow import Workflow

__all__ = ["ElasticExecutor", "worker_callable"]

logger = logging.getLogger(__name__)

#: The logger of the run's progress lines: a child of Parsl's, so they land in Parsl's run log.
PROGRESS_LOGGER = "parsl.elastic"

_JOB_STATES = {
    AllocationState.REQUESTED: JobState.PENDING,
    AllocationState.RUNNING: JobState.RUNNING,
    AllocationState.DRAINING: JobState.RUNNING,
    AllocationState.COMPLETED: JobState.COMPLETED,
    AllocationState.FAILED: JobState.FAILED,
    AllocationState.TIMEOUT: JobState.TIMEOUT,
    AllocationState.CANCELLED: JobState.CANCELLED,
}
"""Our allocation states as Parsl's block states (``parsl/jobs/states.py:9-56``)."""


def _rank(state: JobState) -> int:
    """How far on a block state is: pending 0, running 1, ended 2."""
    if state is JobState.PENDING:
        return 0
    return 1 if state is JobState.RUNNING else 2


class ElasticExecutor(ParslExecutor):
    """A Parsl executor that runs apps on pilot allocations chosen by Big-Job, Per-Stage or ASA.

    Parameters
    ----------
    label : str, default "elastic"
        Unique name of the executor in the Parsl configuration (``@python_app(executors=[label])``).
    backend : {"local", "mock", "slurm"} or BatchBackend, default "local"
        Where allocations come from: this machine, the simulated Slurm queue on a scaled clock, the Slurm
        cluster ``SLURM_CONF`` points at (job files under the run directory), or a backend object
        (``SlurmBackend(partition=..., account=...)``, ``MockBackend(clock="scaled", ...)``).
    strategy : str or Strategy, default "asa"
        ``"bigjob"``, ``"perstage"``, ``"asa"`` (or any registry name), or a strategy object.
    workflow : str, Workflow or None, default None
        Name the runtime history and the remembered plan are kept under (default: the DataFlowKernel's
        workflow name, i.e. the script's file name), or a declared plan of the stages.
    store : None, False, str or Store, default None
        Where runs, runtimes, waits and learner state are kept: the default store, none, a SQLAlchemy URL,
        a store.
    learner : str, WaitPredictor or None, default None
        Wait learner by name (``"ewma"``, or the paper's learner's policy ``"tuned"``, ``"default"``,
        ``"greedy"``), or a learner object; None: the strategy's own.
    max_cores : int or None, default None
        No allocation wider.
    job_cores : int or None, default None
        Most cores in one batch job: wider allocations are split into jobs released one by one as their
        cores stop being needed (see :class:`elastic.Elastic`). None: one job per allocation.
    idle_timeout : float, default 300.0
        Backend seconds a stage with nothing left keeps its allocations when nothing comes after it.
    poll_interval : float or None, default None
        Backend seconds between polls of allocation states (default 10 on Slurm, 30 otherwise).
    max_retries : int, default 2
        Losses (allocation or agent gone) a task survives before its future fails; not Parsl's retries.
    drain_margin : float, default 30.0
        Backend seconds before an allocation's walltime end when it takes no new task.
    speedup : float or None, default None
        ``backend="mock"`` only: simulated seconds per real second.
    job_name : str, default "parsl"
        Prefix of batch job names.
    plan_interval : float, default 1.0
        Real seconds between two looks at the tasks the DataFlowKernel holds (0: never look).
    storage_access : list or None, default None
        Parsl staging providers (``None``: Parsl's default staging).
    remote_monitoring_radio : RadioConfig or None, default None
        How tasks report to Parsl monitoring (``Config(monitoring=MonitoringHub(...))``). None: Parsl's
        ``FilesystemRadio``, as Parsl's WorkQueue and TaskVine executors default to (HTEX's own radio
        needs HTEX's result channel): tasks write messages under the run directory, which the allocations
        see already (the pool's secret is there).
    site : SiteConfig or None, default None
        The site's job settings (:mod:`elastic.site`: ``#SBATCH`` options, ``worker_init``, environment,
        the agents' ``python``). None: with ``backend="slurm"``, the site file
        (``~/.config/elastic/site.toml`` or ``$ELASTIC_SITE``), read and checked here.
    progress : bool, default True
        Show the run's progress (:mod:`elastic.front.progress`): a live view of stages and allocations on a
        terminal, else one line per stage and allocation event on standard error; the lines also go to
        Parsl's run log (``runinfo/NNN/parsl.log``, logger ``parsl.elastic``). False: show nothing.
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
        backend: str | BatchBackend = "local",
        strategy: str | Strategy = "asa",
        *,
        workflow: str | Workflow | None = None,
        store: Store | str | bool | None = None,
        learner: Any = None,
        max_cores: int | None = None,
        job_cores: int | None = None,
        idle_timeout: float = 300.0,
        poll_interval: float | None = None,
        max_retries: int = 2,
        drain_margin: float = 30.0,
        speedup: float | None = None,
        job_name: str = "parsl",
        plan_interval: float = 1.0,
        storage_access: list[Any] | None = None,
        remote_monitoring_radio: Any = None,
        site: SiteConfig | None = None,
        progress: bool = True,
        **pool_options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(progress, bool):
            raise ConfigError(f"ElasticExecutor: progress must be True or False, got {progress!r}")
        if not isinstance(label, str) or not label:
            raise ConfigError(f"ElasticExecutor: label must be a non-empty string, got {label!r}")
        if isinstance(backend, str) and backend not in BACKENDS:
            raise UnknownNameError("backend", backend, BACKENDS)
        if not isinstance(backend, (str, BatchBackend)):
            raise ConfigError(
                f"ElasticExecutor: backend must be one of {', '.join(BACKENDS)} or a BatchBackend, "
                f"got {type(backend).__name__}"
            )
        interval_ok = isinstance(plan_interval, (int, float)) and not isinstance(plan_interval, bool)
        if not (interval_ok and 0 <= plan_interval < float("inf")):
            raise ConfigError(
                f"ElasticExecutor: plan_interval must be finite seconds >= 0, got {plan_interval!r}"
            )
        if not (isinstance(job_name, str) and job_name and not any(c.isspace() for c in job_name)):
            raise ConfigError(
                f"ElasticExecutor: job_name must be a non-empty prefix without spaces, got {job_name!r}"
            )
        if storage_access is not None and not isinstance(storage_access, list):
            raise ConfigError(
                "ElasticExecutor: storage_access must be a list of Parsl staging providers or None, "
                f"got {storage_access!r}"
            )
        check_settings(
            backend=backend,
            strategy=strategy,
            workflow="parsl" if workflow is None else workflow,  # None: the DataFlowKernel's name
            store=store,
            learner=learner,
            max_cores=max_cores,
            job_cores=job_cores,
            idle_timeout=idle_timeout,
            poll_interval=poll_interval,
            max_retries=max_retries,
            drain_margin=drain_margin,
            speedup=speedup,
            name=job_name,
            pool_options=pool_options,
        )
        if isinstance(backend, str):
            if site is not None and not isinstance(site, SiteConfig):
                raise ConfigError(f"ElasticExecutor: site must be a SiteConfig or None, got {site!r}")
            if backend == "slurm" and site is None:
                site = load_site()  # checked now, before anything is submitted
        else:
            site = resolve_backend(backend, speedup=speedup, site=site).site  # a backend object's own
        self.label = label
        self.backend = backend
        self.site = site
        self.strategy = resolve_strategy(strategy)
        self.workflow = workflow
        self.store = store
        self.learner = learner
        self.max_cores = max_cores
        self.job_cores = job_cores
        self.idle_timeout = idle_timeout
        self.poll_interval = poll_interval
        self.max_retries = max_retries
        self.drain_margin = drain_margin
        self.speedup = speedup
        self.job_name = job_name
        self.plan_interval = plan_interval
        self.storage_access = storage_access
        self.progress = progress
        if remote_monitoring_radio is None:
            from parsl.monitoring.radios.filesystem import FilesystemRadio

            remote_monitoring_radio = FilesystemRadio()
        self.remote_monitoring_radio = remote_monitoring_radio
        self.pool_options = dict(pool_options)
        self._elastic: Elastic | None = None
        self._dfk: DataFlowKernel | None = None
        self._own_backend: BatchBackend | None = None
        self._stop = threading.Event()
        self._planner: threading.Thread | None = None
        self._submitted: dict[str, int] = {}  # tasks submitted by stage (only the Task-Launch thread adds)
        self._unsubscribe: Callable[[], None] | None = None
        self._blocks: dict[str, JobStatus] = {}  # the allocations' states last sent to Parsl monitoring
        self._block_sender: Any = None
        self._monitor: threading.Thread | None = None
        self._pool_states: dict[str, AllocationState] = {}  # the pool's newest state of each allocation
        self._blocks_changed = threading.Event()  # set by the pool's allocation events

    def __repr__(self) -> str:
        backend = self.backend if isinstance(self.backend, str) else type(self.backend).__name__
        return f"ElasticExecutor(label={self.label!r}, backend={backend!r}, strategy={self.strategy.name!r})"

    # -- life cycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the front door (backend, pool, allocation control) and the look at waiting tasks.

        Called by the DataFlowKernel once it has set :attr:`run_dir` and :attr:`run_id`.
        """
        self._dfk = _calling_dfk()
        if self._dfk is None:
            self._dfk = _loaded_dfk()
        options = dict(self.pool_options)
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
            workflow=workflow,
            store=self.store,
            learner=self.learner,
            max_cores=self.max_cores,
            job_cores=self.job_cores,
            idle_timeout=self.idle_timeout,
            poll_interval=self.poll_interval,
            max_retries=self.max_retries,
            drain_margin=self.drain_margin,
            speedup=self.speedup,
            name=self.job_name,
            site=self.site,
            # Parsl's run log is its "parsl" logger's file: our lines go there too
            progress=logging.getLogger(PROGRESS_LOGGER) if self.progress else False,
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
        task = Task.call(
            worker_callable(func), args, kwargs, cores=res.cores, estimate=res.runtime, stage=res.stage
        )
        future = front.submit_task(task)
        future.parsl_executor_task_id = task.task_id  # type: ignore[attr-defined]  # Parsl logs it
        self._submitted[res.stage] = self._submitted.get(res.stage, 0) + 1
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
        out = {}
        for a in self._front.view().allocations:
            message = f"job {a.backend_job_id}, stage {a.stage}, {a.cores} cores, {a.state.value.lower()}"
            out[a.alloc_id] = JobStatus(_JOB_STATES[a.state], message=message)
        return out

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
        changed = {}
        for bid, s in self.status().items():
            # the pool sees an allocation start or end before allocation control's next poll does: take
            # whichever is further on, and never send a block back to an earlier state
            pool = self._pool_states.get(bid)
            if pool is not None and _rank(_JOB_STATES[pool]) > _rank(s.state):
                s = JobStatus(_JOB_STATES[pool], message=s.message)
            last = self._blocks.get(bid)
            if last is None or (_rank(s.state) >= _rank(last.state) and s.state != last.state):
                changed[bid] = self._blocks[bid] = s
        if changed:
            now = datetime.datetime.now()
            messages = [
                {
                    "run_id": self.run_id,
                    "status": s.status_name,
                    "timestamp": now,
                    "executor_label": self.label,
                    "job_id": jobs.get(bid),
                    "block_id": bid,
                }
                for bid, s in changed.items()
            ]
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
            self._pool_states[event.alloc_id] = event.state
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
        it already has.
        """
        tasks = getattr(self._dfk, "tasks", None)
        if tasks is None:
            return set()
        before = self._submitted.copy()
        # a copy of the values is atomic under the GIL (as DataFlowKernel.wait_for_current_tasks does)
        waiting = waiting_stages(list(tasks.values()), self.label)
        front = self._front
        now: set[str] = set()
        for w in waiting:
            during = self._submitted.get(w.stage, 0) - before.get(w.stage, 0)
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


def _calling_dfk() -> DataFlowKernel | None:
    """Return the DataFlowKernel whose ``add_executors`` is calling :meth:`ElasticExecutor.start`, if any.

    ``DataFlowKernel.__init__`` calls ``self.add_executors(config.executors)`` (``dflow.py:206``), which
    sets ``run_dir``/``run_id`` and calls ``executor.start()`` (``dflow.py:1127``): the DataFlowKernel is
    ``self`` two frames up. It is not yet what ``parsl.dfk()`` returns (``parsl.load`` sets that after
    the constructor returns), and its ``tasks`` table is created after (``dflow.py:210``).
    """
    from parsl.dataflow.dflow import DataFlowKernel

    frame = inspect.currentframe()
    try:
        for _ in range(4):
            frame = frame.f_back if frame is not None else None
            candidate = frame.f_locals.get("self") if frame is not None else None
            if isinstance(candidate, DataFlowKernel):
                return candidate
        return None
    finally:
        del frame


def _loaded_dfk() -> DataFlowKernel | None:
    from parsl.dataflow.dflow import DataFlowKernelLoader
    from parsl.errors import NoDataFlowKernelError

    try:
        return DataFlowKernelLoader.dfk()
    except NoDataFlowKernelError:
        return None

"""What run control asks of the batch scheduler besides submit and cancel, and how a request becomes jobs.

- :class:`WaitEstimates`: the scheduler's estimate of a new job's wait (``sbatch --test-only`` on Slurm),
  as strategies read it through :attr:`~elastic.strategies.base.RunView.estimate`, cached per geometry for
  :data:`ESTIMATE_TTL` backend seconds;
- :func:`priority_model`: how the backend's queue ranks held jobs, read once per run;
- :func:`split_request`: the widths of the batch jobs one request is submitted as (the strategy's pieces
  and ``job_cores``, in whole numbers of the widest task, and in whole nodes where jobs are placed on
  nodes); :func:`job_nodes`: the whole nodes a job is asked as; :func:`check_node_fit` refuses tasks
  wider than a node;
- :func:`eligible_since` and :func:`eligible_by`: when a job held by its dependencies or begin time
  could start, as the scheduler sees it (its queue wait counts from then).

:class:`~elastic.control.controller.AllocationController` uses all three.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping

from elastic.allocations import Allocation
from elastic.backends.base import BatchBackend, EstimatesReleasing
from elastic.batch import DependencyKind, JobSpec
from elastic.errors import ConfigError, ElasticError
from elastic.limits import MAX_WALLTIME
from elastic.strategies.base import Releasing, Submit
from elastic.strategies.knowledge import TOTAL

__all__ = [
    "ESTIMATE_TTL",
    "Asked",
    "WaitEstimates",
    "eligible_by",
    "check_node_fit",
    "eligible_since",
    "failure_note",
    "job_nodes",
    "priority_model",
    "split_request",
    "widest_task",
]

logger = logging.getLogger(__name__)

Asked = Mapping[tuple[int, float, Releasing], tuple[float | None, float]]
"""What a decision asked of :class:`WaitEstimates`: per (cores, walltime, releasing), the answer and the
backend time it was asked at."""

ESTIMATE_TTL = 5.0
"""Backend seconds a scheduler estimate is reused for (:class:`WaitEstimates`)."""


class WaitEstimates:
    """The scheduler's estimates of new jobs' waits, asked of the backend at most once per geometry per TTL.

    Parameters
    ----------
    backend : BatchBackend
        Asked (:meth:`~elastic.backends.base.BatchBackend.expected_start`).
    user : str or None
        Owner of the hypothetical job.
    job_of : callable
        ``job_of(alloc_id)``: the batch job id of one of the run's allocations that has not ended, else
        None (such allocations are left out of ``releasing``).
    """

    def __init__(self, backend: BatchBackend, user: str | None, job_of: Callable[[str], str | None]) -> None:
        self.backend = backend
        self.user = user
        self._job_of = job_of
        self._estimates: dict[tuple[int, float, tuple[tuple[str, float], ...]], float | None] = {}
        self._estimated_at: float | None = None
        self._read: dict[tuple[int, float, Releasing], tuple[float | None, float]] | None = None
        """What was asked since :meth:`record`: each ask's answer, with the time it was asked of the backend
        (None: not recording)."""
        # a runtime-checkable Protocol's isinstance reads every attribute it names: once, not at each ask
        self._releasing = backend if isinstance(backend, EstimatesReleasing) else None

    def version(self) -> Hashable | None:
        """Return the backend's ``queue_version()`` (estimates hold while it is the same), else None."""
        versioned = getattr(self.backend, "queue_version", None)
        return versioned() if callable(versioned) else None

    def record(self) -> None:
        """Start a record of what is asked (read by :meth:`read`), replacing the last one."""
        self._read = {}

    def read(self) -> Asked:
        """Return what was asked since :meth:`record`, to be checked again by :meth:`still`."""
        return {} if self._read is None else dict(self._read)

    def still(self, asked: Asked) -> bool:
        """Whether every estimate ``asked`` (a :meth:`read`) would start its job when it said it would.

        Asked afresh (the queue changed since: what is cached is of no use) and compared as start times:
        the same answer is the wait then less the seconds since (none below 0), which is what the
        estimate gives while the queue holds. Stops at the first that differs; what was asked stays
        cached for a decision made now.
        """
        now = self.backend.now()
        self._estimates.clear()
        self._estimated_at = now
        for (cores, walltime, releasing), (wait, then) in asked.items():
            fresh = self(cores, walltime, releasing)
            held = None if wait is None else max(0.0, wait - (now - then))  # the answer had the queue held
            if fresh is None or held is None:
                if fresh is not held:
                    return False
            elif abs(fresh - held) > 1e-6:
                return False
        return True

    def __call__(self, cores: int, walltime: float, releasing: Releasing = ()) -> float | None:
        """Return the scheduler's estimate of the wait of this geometry asked for now (None: unknown).

        Asked of the backend (``sbatch --test-only`` on Slurm) once per geometry per
        :data:`ESTIMATE_TTL` backend seconds: a strategy asks for the same geometry several times while
        it decides, and on a real clock no two of those asks see the same time. ``releasing`` (this run's
        allocations and when it will release them, :class:`~elastic.strategies.base.Estimate`) reaches
        the backend where it can end a job early in its estimate (``estimates_releasing``); elsewhere the
        estimate holds them to their walltime. Allocations without a job, or ended, are left out.
        """
        now = self.backend.now()
        if self._estimated_at is None or not 0.0 <= now - self._estimated_at < ESTIMATE_TTL:
            self._estimates.clear()
            self._estimated_at = now
        backend = self.backend
        jobs: tuple[tuple[str, float], ...] = ()
        may_release = self._releasing
        if releasing and may_release is not None and may_release.estimates_releasing:
            found = ((self._job_of(a), at) for a, at in releasing)
            jobs = tuple(sorted((job, at) for job, at in found if job is not None))
        key = (cores, walltime, jobs)
        if key not in self._estimates:
            spec = JobSpec(cores=cores, walltime=min(walltime, MAX_WALLTIME), user=self.user)  # as submitted
            try:
                if jobs and may_release is not None:
                    start = may_release.expected_start(spec, releasing=dict(jobs))
                else:
                    start = backend.expected_start(spec)
            except ElasticError as exc:  # a geometry the partition refuses, or squeue/sbatch failed
                logger.debug("no scheduler estimate for %d cores x %.0f s: %s", cores, walltime, exc)
                start = None
            self._estimates[key] = None if start is None else max(0.0, start - now)
        answer = self._estimates[key]
        if self._read is not None:
            self._read[(cores, walltime, releasing)] = (answer, self._estimated_at)
        return answer


def failure_note(backend: BatchBackend, job_id: str) -> str | None:
    """Return what the backend says of why job ``job_id`` failed (None if it has no ``failure_note()``).

    The Slurm backend gives the end of the job's error file, with its path; a backend that cannot read
    it says nothing, and a note that cannot be read never stops the run.
    """
    read = getattr(backend, "failure_note", None)
    if not callable(read):
        return None
    try:
        note = read(job_id)
    except (ElasticError, OSError) as exc:
        logger.debug("cannot read why job %s failed: %s", job_id, exc)
        return None
    return note if isinstance(note, str) and note else None


def priority_model(backend: BatchBackend) -> str | None:
    """Return the backend's priority model for held jobs (None if it has no ``priority_model()``)."""
    read = getattr(backend, "priority_model", None)
    if not callable(read):
        return None
    try:
        model = read()
    except ElasticError as exc:  # e.g. scontrol failed: plan as if holding bought nothing
        logger.warning("cannot read the backend's priority setting (%s); planning as under 'age'", exc)
        return None
    return model if isinstance(model, str) else None


def split_request(
    cores: int, pieces: int, job_cores: int | None, task: int = 1, node_cores: int | None = None
) -> list[int]:
    """Return the widths of the batch jobs a request of ``cores`` is submitted as.

    ``pieces`` near-equal jobs (the strategy's :attr:`Submit.pieces`), each split again into jobs of at
    most ``job_cores``, in whole numbers of the widest task's ``task`` cores: a task runs inside one job,
    so no job is narrower than ``task`` (a lone 2-core task asked in two pieces gets one 2-core job, not
    two 1-core jobs it could never run on), and cores beyond a whole number of tasks go to the first job.
    Where ``job_cores`` is narrower than ``task``, a job is ``task`` cores wide.

    With ``node_cores`` (the partition's cores per node, where allocations are in nodes), a request of at
    least a node is split in whole nodes instead: ``pieces`` near-equal numbers of nodes (the first pieces
    get the extra nodes), each split again into jobs of at most ``job_cores // node_cores`` nodes, so no job
    straddles a node boundary it need not (on a site that gives whole nodes, a job of 1.5 nodes is charged
    2, and a half node left beside it is of no use to a task of another job). Cores beyond whole nodes
    (the request is not a whole number of nodes) join the last job, unless that would make it wider than
    ``job_cores`` and they hold a task: then they are a job of their own. Where ``job_cores`` is narrower
    than a node, each node is split on its own as above, so every job lies inside one node (cores beyond
    whole nodes are split likewise, or join the last job where they hold no task). A request
    narrower than a node is split as without ``node_cores``. A task runs inside one node's agent, so a
    task wider than a node is refused.

    Parameters
    ----------
    cores : int
        Width of the request (>= 1).
    pieces : int
        Jobs the strategy asks it as (>= 1; fewer where the request holds fewer tasks or nodes).
    job_cores : int or None
        Most cores in one job (None: no cap).
    task : int, default 1
        Cores of the widest task the request must run.
    node_cores : int or None, default None
        Cores per node, where allocations are in nodes (None: cores are not grouped in nodes).

    Returns
    -------
    list of int
        The jobs' widths, summing to ``cores``.

    Raises
    ------
    ConfigError
        ``task`` is wider than ``node_cores``: no node can run it.

    Examples
    --------
    >>> split = split_request
    >>> split(56, 1, None), split(56, 2, None), split(7, 2, None), split(56, 2, 20)
    ([56], [28, 28], [4, 3], [20, 8, 20, 8])
    >>> split(2, 2, None, task=2), split(28, 2, 14, task=28), split(12, 2, 5, task=4)
    ([2], [28], [4, 4, 4])

    In nodes of 4 cores: 3 nodes in two pieces are 2 nodes and 1, never two jobs of 1.5 nodes; cores
    beyond whole nodes join the last job; ``job_cores`` below a node splits each node on its own.

    >>> split(12, 2, None, node_cores=4), split(14, 2, None, node_cores=4), split(3, 2, None, node_cores=4)
    ([8, 4], [8, 6], [2, 1])
    >>> split(16, 2, 6, node_cores=4), split(8, 1, 3, node_cores=4), split(12, 3, None, task=3, node_cores=4)
    ([4, 4, 4, 4], [3, 1, 3, 1], [4, 4, 4])
    >>> split(8, 1, None, task=6, node_cores=4)
    Traceback (most recent call last):
    ...
    elastic.errors.ConfigError: a task of 6 cores is wider than a node of the partition (4 cores): ...
    """
    if node_cores is not None and node_cores < 1:
        raise ConfigError(f"node_cores must be >= 1 or None, got {node_cores!r}")
    if node_cores is not None and task > node_cores:
        raise ConfigError(
            f"a task of {task} cores is wider than a node of the partition ({node_cores} cores): a task "
            f"runs inside one node; ask for tasks of at most {node_cores} cores or use a partition with "
            "wider nodes"
        )
    if node_cores is None or node_cores <= 1 or cores < node_cores:
        return _split_in_tasks(cores, pieces, job_cores, task)
    nodes, rest = divmod(cores, node_cores)
    if job_cores is not None and job_cores < node_cores:  # every job inside one node
        out = _split_in_tasks(node_cores, 1, job_cores, task) * nodes
        if rest >= task:
            out += _split_in_tasks(rest, 1, job_cores, task)
        else:  # too few to hold a task: a job of their own could run nothing
            out[-1] += rest
        return out
    per_job = None if job_cores is None else job_cores // node_cores
    out = [n * node_cores for n in _split_in_tasks(nodes, pieces, per_job, 1)]
    if rest:
        if job_cores is not None and out[-1] + rest > job_cores and rest >= task:
            out.append(rest)
        else:
            out[-1] += rest
    return out


def job_nodes(cores: int, node_cores: int | None) -> int | None:
    """Return the whole nodes a batch job of ``cores`` is asked as, or None to ask it in cores.

    A job that is a whole number of nodes (as :func:`split_request` makes them where ``node_cores`` is
    known) is asked as those nodes (``JobSpec.nodes``: Slurm's ``--nodes``, whole nodes), so the batch
    system places it on them and the pool starts one agent per node; any other job is asked in cores.

    Examples
    --------
    >>> job_nodes(8, 4), job_nodes(4, 4), job_nodes(6, 4), job_nodes(3, 4), job_nodes(8, None)
    (2, 1, None, None, None)
    """
    if node_cores is None or node_cores <= 1 or cores % node_cores:
        return None
    return cores // node_cores


def check_node_fit(stage: str, task: int, node_cores: int | None) -> None:
    """Refuse a stage whose widest task (``task`` cores) is wider than a node of ``node_cores`` cores.

    A task runs inside one node's agent (a job of several nodes starts one agent per node), so no
    allocation could ever run it. ``node_cores`` None: cores are not grouped in nodes; nothing to check.

    Raises
    ------
    ConfigError
        It is wider, with what to do about it.

    Examples
    --------
    >>> check_node_fit("mAdd", 4, 4), check_node_fit("mAdd", 64, None)
    (None, None)
    >>> check_node_fit("mAdd", 6, 4)
    Traceback (most recent call last):
    ...
    elastic.errors.ConfigError: stage 'mAdd' has tasks of 6 cores, wider than a node of the partition (4 ...
    """
    if node_cores is not None and task > node_cores:
        raise ConfigError(
            f"stage {stage!r} has tasks of {task} cores, wider than a node of the partition ({node_cores} "
            f"cores): a task runs inside one node; ask for tasks of at most {node_cores} cores or use a "
            "partition with wider nodes"
        )


def _split_in_tasks(cores: int, pieces: int, job_cores: int | None, task: int) -> list[int]:
    """Return :func:`split_request`'s widths where cores are not grouped in nodes."""
    task = max(1, min(task, cores))
    units, spare = divmod(cores, task)
    per_job = None if job_cores is None else max(1, job_cores // task)
    pieces = max(1, min(pieces, units))
    base, extra = divmod(units, pieces)
    out: list[int] = []
    for i in range(pieces):
        width = base + (1 if i < extra else 0)
        if per_job is None or width <= per_job:
            out.append(width)
        else:
            whole, rest = divmod(width, per_job)
            out.extend([per_job] * whole + ([rest] if rest else []))
    out = [w * task for w in out]
    out[0] += spare
    return out


def eligible_since(a: Allocation, allocs: Mapping[str, Allocation], now: float) -> float | None:
    """Return when ``a``'s dependencies and begin time were all satisfied, or None if they are not yet.

    ``allocs`` holds the allocations it depends on, by id.
    """
    submitted = a.submit_time if a.submit_time is not None else now
    since = max(submitted, a.begin if a.begin is not None else submitted)
    if since > now:
        return None
    for dep_id, kind in a.dependencies:
        dep = allocs[dep_id]
        released = dep.start_time if kind is DependencyKind.AFTER else dep.end_time
        if released is None:
            return None
        since = max(since, released)
    return since


def eligible_by(a: Allocation, allocs: Mapping[str, Allocation], at: float) -> float:
    """Return when ``a`` could start as far as its dependencies and begin time go (never after ``at``).

    An eligibility run control recorded already stands: found as here at a poll, or the moment it
    dropped the job's dependencies (its record then names none).
    """
    if a.eligible_time is not None:
        return min(a.eligible_time, at)
    submitted = a.submit_time if a.submit_time is not None else at
    eligible = max(submitted, a.begin if a.begin is not None else submitted)
    for dep_id, kind in a.dependencies:
        dep = allocs[dep_id]
        released = dep.start_time if kind is DependencyKind.AFTER else dep.end_time
        eligible = max(eligible, released if released is not None else at)
    return min(eligible, at)


def widest_task(task_cores: Mapping[str, int], action: Submit) -> int:
    """Cores of the widest task ``action``'s stages have (every stage's for the whole workflow).

    ``task_cores`` maps each known stage to its widest task's cores.
    """
    labels = set(action.serves or (action.stage,))
    if TOTAL in labels:
        return max(task_cores.values(), default=1)
    # by the labels, not by every stage: a request serves a few stages of a workflow of thousands
    return max((task_cores[name] for name in labels if name in task_cores), default=1)

"""The Slurm backend: :class:`BatchBackend` over ``sbatch``, ``scancel``, ``squeue`` and ``scontrol``.

No ``slurmdbd`` is assumed (so no ``sacct``). A job's state comes from ``scontrol show job -o`` while
slurmctld keeps its record (``MinJobAge``, 300 s by default) and, once the record is purged, from the
``jobcomp/filetxt`` file when the cluster writes one.

Walltimes are whole minutes in Slurm: a request of ``walltime`` seconds becomes
``--time=ceil(walltime / 60)`` minutes, at least 1, so the job may run up to 59 s longer than asked;
:attr:`JobInfo.walltime` reports the limit Slurm actually set.

:class:`SlurmBackend` is the :class:`~elastic.backends.base.BatchBackend` contract (submit, state, cancel,
shorten, estimate, partition, the site check) over Slurm's commands. Apart from it: the job script
(:mod:`~elastic.backends._slurm_script`), running the commands and reading the jobcomp file
(:mod:`~elastic.backends._slurm_commands`), the parsing of their output
(:mod:`~elastic.backends._slurm_parse`) and of the queue snapshot its start estimate simulates
(:mod:`~elastic.backends._slurm_queue`).

Over 500 lines because each method of the contract wraps its Slurm command with that command's own
failure handling (what may be retried, refused or read from the jobcomp file); the parsing they share is
in the modules above.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

import platformdirs

from elastic.backends import _slurm_parse as parse
from elastic.backends import _slurm_queue as _queue
from elastic.backends._slurm_commands import Jobcomp, SlurmCommands
from elastic.backends._slurm_script import render_job_script
from elastic.batch import Dependency, DependencyKind, JobInfo, JobSpec, JobState, PartitionInfo
from elastic.errors import (
    BackendError,
    ConfigError,
    DependencyError,
    GeometryError,
    SubmitError,
    UnknownJobError,
)
from elastic.simulator.snapshot import estimate_start
from elastic.site import SiteConfig, SiteConfigError, load_site

__all__ = ["SlurmBackend", "render_job_script"]

logger = logging.getLogger(__name__)

_JOB_ID = re.compile(r"\d+")

QUEUE_VERSION_TTL = 5.0
"""Seconds :meth:`SlurmBackend.queue_version` reuses its last ``squeue`` (one decision reads it several
times; the run polls every 30 s)."""


class SlurmBackend:
    """Submit allocations to Slurm with its command-line tools.

    Parameters
    ----------
    partition, account, qos : str or None, default None
        Passed to ``sbatch`` unless the :class:`JobSpec` names its own; None uses Slurm's default.
    env : Mapping[str, str] or None, default None
        Extra environment for every Slurm command (e.g. ``{"SLURM_CONF": "/path/slurm.conf"}``), on top
        of ``os.environ`` at construction time. Jobs are submitted with ``--export=ALL``, so they see it.
    command_timeout : float, default 30.0
        Seconds any Slurm command may take before it is abandoned with an error naming it.
    workdir : str or Path or None, default None
        Working directory of the jobs, where ``slurm-<id>.out``/``.err`` go; it must be visible from the
        compute nodes. Default: ``<user state dir>/elastic/slurm`` (``~/.local/state/...`` on Linux).
    jobcomp_path : str or Path or None, default None
        The ``jobcomp/filetxt`` file to read final states from once slurmctld forgot a job. Default: the
        ``JobCompLoc`` of ``scontrol show config`` when ``JobCompType=jobcomp/filetxt``, else none.
    site : SiteConfig or None, default None
        Site options written into every job script (:mod:`elastic.site`): further ``#SBATCH`` options,
        environment, ``worker_init``; its partition, account and QOS are used where the arguments above
        are None. None: the site file (:func:`elastic.site.load_site`; none at all without one).

    Raises
    ------
    ConfigError
        ``command_timeout`` is not positive.
    SiteConfigError
        ``site`` is None and the site file cannot be read or holds a bad setting.

    Examples
    --------
    >>> backend = SlurmBackend(partition="debug", env={"SLURM_CONF": "/etc/slurm/slurm.conf"})
    >>> backend.name
    'slurm'
    """

    def __init__(
        self,
        partition: str | None = None,
        account: str | None = None,
        qos: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        command_timeout: float = 30.0,
        workdir: str | os.PathLike[str] | None = None,
        jobcomp_path: str | os.PathLike[str] | None = None,
        site: SiteConfig | None = None,
    ) -> None:
        if not command_timeout > 0:
            raise ConfigError(f"SlurmBackend command_timeout must be > 0 seconds, got {command_timeout!r}")
        if site is not None and not isinstance(site, SiteConfig):
            raise ConfigError(f"SlurmBackend site must be a SiteConfig or None, got {type(site).__name__}")
        self.site = site if site is not None else load_site()
        """The site configuration written into every job script."""
        self.partition_name = partition if partition is not None else self.site.partition
        self.account = account if account is not None else self.site.account
        self.qos = qos if qos is not None else self.site.qos
        self.workdir = (
            Path(workdir) if workdir is not None else platformdirs.user_state_path("elastic") / "slurm"
        ).resolve()
        self._commands = SlurmCommands({**os.environ, **(env or {})}, float(command_timeout))
        self._jobcomp = Jobcomp(self._commands, Path(jobcomp_path) if jobcomp_path is not None else None)
        self._est_partition: PartitionInfo | None = None
        self._est_model: tuple[str, str] | None = None
        self._queue_version: tuple[float, str] | None = None

    @property
    def command_timeout(self) -> float:
        """Seconds any Slurm command may take before it is abandoned with an error naming it."""
        return self._commands.timeout

    # ------------------------------------------------------------------ BatchBackend
    @property
    def name(self) -> str:
        """``"slurm"``."""
        return "slurm"

    def now(self) -> float:
        """Epoch seconds (:func:`time.time`); Slurm's clock is the machine's."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """Really sleep ``seconds``."""
        time.sleep(max(0.0, seconds))

    def partition(self) -> PartitionInfo:
        """Return the partition jobs go to (``scontrol show partition -o``): the named one or the default.

        Raises
        ------
        ConfigError
            The named partition does not exist.
        """
        args = ["scontrol", "show", "partition", "-o"]
        if self.partition_name:
            args.append(self.partition_name)
        proc = self._commands.run(args, check=False)
        if proc.returncode != 0:
            if "not found" in proc.stderr.lower() or "invalid partition" in proc.stderr.lower():
                raise ConfigError(
                    f"SlurmBackend partition={self.partition_name!r} does not exist; "
                    f"see `sinfo -s` for the partitions ({proc.stderr.strip()})"
                )
            self._commands.fail(args, proc)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("PartitionName=")]
        if not self.partition_name:
            lines = [line for line in lines if " Default=YES" in line]
        if not lines:
            raise ConfigError(
                "SlurmBackend partition=None but the cluster has no default partition; pass partition=NAME"
            )
        return parse.parse_partition(lines[0])

    def priority_model(self) -> str | None:
        """Return the mock priority model this cluster's priority setting stands for.

        Reads ``PriorityType``, ``PriorityFlags`` and ``PriorityWeightAge`` from ``scontrol show config``
        (see :func:`elastic.backends._slurm_parse.priority_model`): ``"age"`` means a job held by a
        dependency or ``--begin`` queues behind every job already eligible when it is released, so
        submitting it early buys no queue position; ``"basic"``/``"accrue-always"`` mean it keeps its
        submit place. None for a priority plugin the mock does not model.

        Raises
        ------
        BackendError
            ``scontrol show config`` failed.
        """
        args = ["scontrol", "show", "config"]
        proc = self._commands.run(args, check=False)
        if proc.returncode != 0:
            self._commands.fail(args, proc)
        return parse.priority_model(parse.parse_config(proc.stdout))

    def submit(self, spec: JobSpec) -> str:
        """Submit ``spec`` with ``sbatch --parsable`` (script on stdin) and return the job id.

        The job runs as the current user (``spec.user`` is for the mock backend's accounting only).

        Raises
        ------
        GeometryError
            Slurm says the request can never be satisfied (too many cores or nodes, walltime over the
            partition's ``MaxTime``; needs ``EnforcePartLimits``).
        DependencyError
            A dependency is not a Slurm job id or names a job Slurm has never heard of.
        SubmitError
            Any other refusal or a timeout; keeps ``stdout``, ``stderr`` and ``returncode``.
        BackendUnavailableError
            Slurm is not installed here or slurmctld does not answer.
        """
        self._check_dependencies(spec.dependencies)
        self.workdir.mkdir(parents=True, exist_ok=True)
        script = self._script(spec)
        args = ["sbatch", "--parsable"]
        proc = self._commands.run(args, stdin=script, error=SubmitError, check=False)
        job_id = parse.parse_sbatch_job_id(proc.stdout) if proc.returncode == 0 else None
        if job_id is None:
            self._commands.submit_failed(args, proc)
        logger.info(
            "slurm: submitted job %s %r (%d cores, %d min)",
            job_id,
            spec.name,
            spec.cores,
            parse.walltime_minutes(spec.walltime),
        )
        return str(job_id)

    def cancel(self, job_id: str) -> None:
        """Cancel a job with ``scancel``; a finished or forgotten job is left alone (as ``scancel`` does).

        Raises
        ------
        UnknownJobError
            ``job_id`` is not a Slurm job id.
        """
        self._require_id(job_id)
        args = ["scancel", job_id]
        proc = self._commands.run(args, check=False)
        if proc.returncode != 0:
            if "already completing or completed" in proc.stderr or "Invalid job id" in proc.stderr:
                logger.debug("slurm: cancel %s: %s", job_id, proc.stderr.strip())
                return
            self._commands.fail(args, proc)
        logger.info("slurm: cancelled job %s", job_id)

    def shorten(self, job_id: str, walltime: float) -> None:
        """Lower a pending job's time limit: ``scontrol update JobId=ID TimeLimit=MINUTES``.

        Slurm lets a user lower (not raise) the limit of their own job, and a shorter job fits gaps in
        the schedule (backfill) that a longer one does not, keeping its place in the queue. A job that
        is no longer pending is left alone: its limit counts from its start, which has passed. So is one
        whose limit is already at most ``walltime`` (whole minutes, rounded up, as at submission).

        Raises
        ------
        ConfigError
            ``walltime`` is not a number of seconds > 0.
        UnknownJobError
            ``job_id`` is not a Slurm job id, or Slurm does not know it.
        """
        if not (isinstance(walltime, (int, float)) and math.isfinite(walltime) and walltime > 0):
            raise ConfigError(f"shorten: walltime must be a number of seconds > 0, got {walltime!r}")
        minutes = parse.walltime_minutes(walltime)
        info = self.state(job_id)
        if info.state is not JobState.PENDING or info.walltime <= minutes * 60.0:
            return
        if self._update_pending(job_id, f"TimeLimit={minutes}"):
            logger.info("slurm: job %s time limit lowered to %d min", job_id, minutes)

    def set_dependencies(self, job_id: str, dependencies: Sequence[Dependency]) -> None:
        """Replace a pending job's dependencies: ``scontrol update JobId=ID Dependency=LIST``.

        An empty ``dependencies`` clears them (``Dependency=``). Slurm lets a user change the
        dependencies of their own pending job, and ``priority/basic`` keeps the rank its submission
        gave it. A job that is no longer pending is left alone.

        Raises
        ------
        UnknownJobError
            ``job_id`` is not a Slurm job id, or Slurm does not know it.
        DependencyError
            A dependency is not a Slurm job id or names a job Slurm has never heard of.
        """
        deps = tuple(dependencies)
        self._check_dependencies(deps)
        if self.state(job_id).state is not JobState.PENDING:
            return
        listed = ",".join(str(d) for d in deps)
        if self._update_pending(job_id, f"Dependency={listed}"):
            logger.info("slurm: job %s now depends on %s", job_id, listed or "nothing")

    def _update_pending(self, job_id: str, setting: str) -> bool:
        """Run ``scontrol update JobId=ID SETTING`` on a job read as pending; False if it started meanwhile.

        Raises BackendError naming the command for any other refusal.
        """
        args = ["scontrol", "update", f"JobId={job_id}", setting]
        proc = self._commands.run(args, check=False)
        if proc.returncode == 0:
            return True
        if "no longer pending" in proc.stderr or "already completing or completed" in proc.stderr:
            logger.debug("slurm: %s %s: %s", setting, job_id, proc.stderr.strip())  # it started meanwhile
            return False
        self._commands.fail(args, proc)

    def state(self, job_id: str) -> JobInfo:
        """State of one job: ``scontrol show job -o``, or the jobcomp file once slurmctld forgot it.

        Raises
        ------
        UnknownJobError
            Neither slurmctld nor the jobcomp file knows the job.
        """
        self._require_id(job_id)
        args = ["scontrol", "show", "job", "-o", job_id]
        proc = self._commands.run(args, check=False)
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                record = parse.parse_record(line)
                if record.get("JobId") == job_id:
                    return parse.job_from_record(record, "scontrol")
        elif "Invalid job id" not in proc.stderr:
            self._commands.fail(args, proc)
        info = self._jobcomp.get(job_id)
        if info is None:
            raise UnknownJobError(job_id)
        return info

    def failure_note(self, job_id: str, lines: int = 3) -> str | None:
        """Return the last ``lines`` lines of job ``job_id``'s error file, with its path (None: none).

        What a job script that failed said (``slurm-<id>.err`` in :attr:`workdir`, as the batch script
        asks): an interpreter that does not exist, a ``worker_init`` line that failed.
        """
        self._require_id(job_id)
        path = self.workdir / f"slurm-{job_id}.err"
        try:
            with path.open("rb") as f:
                f.seek(max(0, path.stat().st_size - 4096))  # the end is enough, however long the file
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return None
        tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return f"{path} ends: {' | '.join(tail)}" if tail else None

    def queue(self) -> list[JobInfo]:
        """Pending and running jobs of the current user (``squeue --me``)."""
        args = ["squeue", "--me", "-h", "-o", parse.SQUEUE_FORMAT]
        proc = self._commands.run(args)
        jobs = []
        for line in proc.stdout.splitlines():
            if not line.strip():
                continue
            try:
                job = parse.job_from_squeue(line)
            except BackendError as exc:  # one odd line must not hide the whole queue
                logger.warning("slurm: skipping unreadable squeue line: %s", exc)
                continue
            if job.state in (JobState.PENDING, JobState.RUNNING):
                jobs.append(job)
        return jobs

    def check_site(self) -> None:
        """Ask Slurm whether it takes the site's options, before any allocation is submitted.

        Runs ``sbatch --test-only`` on a one-core, one-minute job carrying :attr:`site`'s options (no job
        is created, a job id is consumed). Does nothing when the site adds no ``#SBATCH`` option.

        Raises
        ------
        SiteConfigError
            ``sbatch`` refused them: an option it does not know, a value it cannot read, a reservation,
            feature or resource the partition does not have; the message carries its words.
        BackendUnavailableError
            Slurm is not installed here or slurmctld does not answer.
        """
        options = self.site.sbatch_options()
        if not options:
            return
        args = ["sbatch", "--test-only"]
        probe = JobSpec(cores=1, walltime=60.0, name="elastic-site-check")
        proc = self._commands.run(args, stdin=self._script(probe), check=False)
        if proc.returncode != 0:
            raise SiteConfigError(
                "sbatch options",
                options,
                f"`sbatch --test-only` refused them (exit {proc.returncode}): {proc.stderr.strip()}",
            )

    def expected_start(self, spec: JobSpec) -> float | None:
        """When ``spec`` would start if submitted now; None if Slurm cannot say.

        The same computation as the mock backend's (:mod:`elastic.simulator.snapshot`, where the module
        docstring says why it is not ``sbatch --test-only``'s): the partition's queue read with
        ``squeue`` (every user's jobs), each running job held to its time limit, pending jobs run for
        their limits in priority order under the scheduler this cluster runs (``sched/backfill``: every
        pending job planned, ``conservative``; ``sched/builtin``: ``fcfs``), the probe last. Where
        ``squeue`` cannot see every job that holds cores (a site with ``PrivateData=jobs``: fewer CPUs
        in the snapshot than ``sinfo`` counts allocated), it falls back to :meth:`test_only_start`.

        Raises
        ------
        GeometryError
            The job could never run on the partition (``sbatch`` would reject it too).
        BackendError
            ``squeue``, ``sinfo`` or ``scontrol`` failed.
        """
        part = self._estimate_partition()
        for attempt in range(2):  # a job ending between sinfo and squeue looks hidden once
            info = ["sinfo", "-h", "-p", part.name, "-o", "%C"]
            alloc = self._commands.run(info, check=False)
            if alloc.returncode != 0:
                self._commands.fail(info, alloc)
            now = self.now()
            args = ["squeue", "-h", "-p", part.name, "-t", _queue.SNAPSHOT_STATES]
            args += ["-o", _queue.SNAPSHOT_FORMAT]
            proc = self._commands.run(args, check=False)
            if proc.returncode != 0:
                self._commands.fail(args, proc)
            snap = _queue.parse_snapshot(
                proc.stdout.splitlines(), now=now, nodes=part.nodes, cores_per_node=part.cores_per_node
            )
            allocated = _queue.parse_allocated(alloc.stdout.splitlines()[0] if alloc.stdout.strip() else "0")
            if allocated <= sum(r.cores for r in snap.running):
                break
            if attempt:
                logger.info("slurm: squeue shows fewer allocated CPUs than sinfo (hidden); using --test-only")
                return self.test_only_start(spec)
        after: list[tuple[DependencyKind, str]] = []
        listed = {r.job_id for r in snap.running} | {p.job_id for p in snap.pending}
        for dep in spec.dependencies:
            if dep.job_id in listed:
                after.append((DependencyKind(dep.kind), dep.job_id))
            elif not _settled(DependencyKind(dep.kind), self.state(dep.job_id)):
                return None
        policy, priority = self._estimate_model()
        return estimate_start(
            snap,
            cores=spec.cores,
            walltime=parse.walltime_minutes(spec.walltime) * 60.0,
            nodes=spec.nodes,
            begin=spec.begin,
            after=after,
            policy=policy,
            priority=priority,
        )

    def test_only_start(self, spec: JobSpec) -> float | None:
        """Slurm's own answer, ``sbatch --test-only``: running jobs end at their limits, plus an area term.

        See :mod:`elastic.simulator.snapshot` for what Slurm 22.05 computes. None if Slurm cannot say.

        Raises
        ------
        GeometryError
            The job could never run on the partition (``sbatch`` would reject it too).
        """
        args = ["sbatch", "--test-only"]
        proc = self._commands.run(args, stdin=self._script(spec), check=False)
        if proc.returncode != 0:
            kind = parse.classify_submit_error(proc.stderr)
            if kind is GeometryError:
                self._commands.submit_failed(args, proc)
            logger.warning("slurm: %s failed (exit %s): %s", " ".join(args), proc.returncode, proc.stderr)
            return None
        return parse.parse_test_only(proc.stderr + "\n" + proc.stdout)

    def queue_version(self) -> Hashable:
        """Return a value that changes whenever :meth:`expected_start`'s queue snapshot may have changed.

        A digest of the partition's queue as ``squeue`` shows every user's jobs
        (:func:`~elastic.backends._slurm_queue.queue_signature`: jobs submitted, started, ended or
        cancelled, time limits, holds released), read at most once per :data:`QUEUE_VERSION_TTL` seconds:
        a strategy may keep what it derived from the estimate while it is the same, as on the mock backend
        (:attr:`~elastic.strategies.base.RunView.queue_version`). Where ``squeue`` fails, a value equal to
        no other (nothing is kept).
        """
        now = time.monotonic()
        kept = self._queue_version
        if kept is not None and 0.0 <= now - kept[0] < QUEUE_VERSION_TTL:
            return kept[1]
        try:  # a version is a hint: a Slurm that does not answer now must not stop the decision reading it
            args = ["squeue", "-h", "-p", self._estimate_partition().name, "-t", _queue.SNAPSHOT_STATES]
            args += ["-o", _queue.SIGNATURE_FORMAT]
            proc = self._commands.run(args, check=False)
        except BackendError as exc:
            logger.info("slurm: queue version unknown: %s", exc)
            return object()
        if proc.returncode != 0:
            logger.info("slurm: %s failed (exit %s): queue version unknown", " ".join(args), proc.returncode)
            return object()
        version = _queue.queue_signature(proc.stdout.splitlines())
        self._queue_version = (now, version)
        return version

    def _estimate_partition(self) -> PartitionInfo:
        """Return the partition the estimate simulates (read once)."""
        if self._est_partition is None:
            self._est_partition = self.partition()
        return self._est_partition

    def _estimate_model(self) -> tuple[str, str]:
        """Return (simulated policy, priority model) of this cluster's scheduler (read once)."""
        if self._est_model is None:
            args = ["scontrol", "show", "config"]
            proc = self._commands.run(args, check=False)
            if proc.returncode != 0:
                self._commands.fail(args, proc)
            config = parse.parse_config(proc.stdout)
            policy = "fcfs" if config.get("SchedulerType") == "sched/builtin" else "conservative"
            self._est_model = (policy, parse.priority_model(config) or "basic")
        return self._est_model

    # ------------------------------------------------------------------ helpers
    def _script(self, spec: JobSpec) -> str:
        return render_job_script(
            spec,
            workdir=self.workdir,
            partition=self.partition_name,
            account=self.account,
            qos=self.qos,
            site=self.site,
        )

    @staticmethod
    def _require_id(job_id: str) -> None:
        if not _JOB_ID.fullmatch(job_id):
            raise UnknownJobError(job_id)

    def _check_dependencies(self, dependencies: Sequence[Dependency]) -> None:
        """Refuse dependencies Slurm would silently treat as satisfied (ids it has never seen)."""
        if not dependencies:
            return
        ids = sorted({dep.job_id for dep in dependencies})
        bad = [i for i in ids if not _JOB_ID.fullmatch(i)]
        if bad:
            raise DependencyError(f"dependencies name {bad}, which are not Slurm job ids (digits)")
        args = ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i"]
        proc = self._commands.run(args, check=False)
        if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
            self._commands.fail(args, proc)
        known = set(proc.stdout.split())
        unknown = [i for i in ids if i not in known and self._jobcomp.get(i) is None]
        if unknown:
            raise DependencyError(
                f"dependencies name jobs {unknown} unknown to Slurm (neither slurmctld nor the "
                "jobcomp file has them); Slurm would treat them as satisfied, so this is refused"
            )


def _settled(kind: DependencyKind, parent: JobInfo) -> bool:
    """Whether a dependency on ``parent`` (no longer in the queue snapshot) holds now."""
    state = parent.state
    if kind is DependencyKind.AFTER:
        return state is not JobState.PENDING
    if not state.is_final:
        return False
    if kind is DependencyKind.AFTEROK:
        return state is JobState.COMPLETED
    if kind is DependencyKind.AFTERNOTOK:
        return state is not JobState.COMPLETED
    return True

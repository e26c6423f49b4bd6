"""The Slurm backend: :class:`BatchBackend` over ``sbatch``, ``scancel``, ``squeue`` and ``scontrol``.

No ``slurmdbd`` is assumed (so no ``sacct``). A job's state comes from ``scontrol show job -o`` while
slurmctld keeps its record (``MinJobAge``, 300 s by default) and, once the record is purged, from the
``jobcomp/filetxt`` file when the cluster writes one. Output parsing lives in
:mod:`elastic.backends._slurm_parse`.

Walltimes are whole minutes in Slurm: a request of ``walltime`` seconds becomes
``--time=ceil(walltime / 60)`` minutes, at least 1, so the job may run up to 59 s longer than asked;
:attr:`JobInfo.walltime` reports the limit Slurm actually set.

Over 500 lines because :class:`SlurmBackend` is one implementation of the
:class:`~elastic.backends.base.BatchBackend` contract (submit, state, cancel, shorten, estimate,
partition, the site check) over Slurm's commands and its jobcomp file, with the job script it submits;
the parsing of their output is already apart.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import platformdirs

from elastic.backends import _slurm_parse as parse
from elastic.backends import _slurm_queue as _queue
from elastic.batch import DependencyKind, JobInfo, JobSpec, JobState, PartitionInfo
from elastic.errors import (
    BackendError,
    BackendUnavailableError,
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

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JOB_ID = re.compile(r"\d+")


def _quote(value: str) -> str:
    """Quote an ``#SBATCH`` option value (Slurm honours double quotes there)."""
    if '"' in value or "\n" in value:
        raise ConfigError(f"Slurm option value {value!r} may not contain '\"' or a newline")
    return f'"{value}"'


def render_job_script(
    spec: JobSpec,
    *,
    workdir: Path,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    site: SiteConfig | None = None,
) -> str:
    """Return the batch script for ``spec``: ``#SBATCH`` options, then the environment, then the body.

    Parameters
    ----------
    spec : JobSpec
        What to submit. ``spec.partition``/``account``/``qos`` win over the backend's defaults.
    workdir : Path
        Working directory of the job, where ``slurm-<id>.out`` and ``slurm-<id>.err`` are written.
    partition, account, qos : str or None
        The backend's defaults, passed through unchanged.
    site : SiteConfig or None, default None
        The site's further options (:meth:`SiteConfig.sbatch_options`, after Elastic's own), its
        environment (exported before ``spec.env``, which wins) and its ``worker_init`` lines (run after
        the environment, before the body). Its partition, account and QOS are not read here: the backend
        passes them as its defaults.

    Returns
    -------
    str
        A bash script. The body is ``spec.script``; with no script it is ``sleep <runtime>`` when
        ``spec.runtime`` is set, else ``sleep infinity`` (the job holds its cores until cancelled or its
        walltime). ``ELASTIC_JOB_ID`` and ``ELASTIC_JOB_CORES`` are exported, as on the mock backend.

    Raises
    ------
    ConfigError
        An environment variable name is not a shell identifier, or a value cannot be passed to Slurm.
    """
    opts: list[str] = [f"--job-name={_quote(spec.name)}"]
    if spec.nodes is not None:
        opts += [f"--nodes={spec.nodes}", "--exclusive"]
        if spec.cores >= spec.nodes:
            opts.append(f"--ntasks={spec.cores}")
    else:
        opts.append(f"--ntasks={spec.cores}")
    opts += ["--cpus-per-task=1", f"--time={parse.walltime_minutes(spec.walltime)}"]
    if spec.dependencies:
        opts.append("--dependency=" + ",".join(str(dep) for dep in spec.dependencies))
        opts.append("--kill-on-invalid-dep=yes")
    if spec.begin is not None:
        opts.append(f"--begin={parse.format_time(spec.begin)}")
    for option, value in (
        ("partition", spec.partition or partition),
        ("account", spec.account or account),
        ("qos", spec.qos or qos),
    ):
        if value:
            opts.append(f"--{option}={_quote(value)}")
    if site is not None:
        opts += [o for o in site.sbatch_options() if o not in opts]  # --exclusive may be there already
    opts += [
        f"--chdir={_quote(str(workdir))}",
        f"--output={_quote(str(workdir / 'slurm-%j.out'))}",
        f"--error={_quote(str(workdir / 'slurm-%j.err'))}",
        "--export=ALL",
    ]
    lines = ["#!/bin/bash", *(f"#SBATCH {opt}" for opt in opts), ""]
    lines += ['export ELASTIC_JOB_ID="$SLURM_JOB_ID"', f"export ELASTIC_JOB_CORES={spec.cores}"]
    if site is not None:
        lines += [f"export {key}={shlex.quote(value)}" for key, value in site.env.items()]
    for key, value in spec.env.items():
        if not _ENV_NAME.fullmatch(key):
            raise ConfigError(f"JobSpec.env key {key!r} is not a valid environment variable name")
        lines.append(f"export {key}={shlex.quote(value)}")
    if site is not None and site.worker_init.strip():
        lines += ["", "# worker_init (site configuration)", *site.worker_init.strip("\n").splitlines()]
    lines.append("")
    if spec.script is not None:
        lines.append(spec.script)
    elif spec.runtime is not None:
        lines.append(f"sleep {spec.runtime:g}")
    else:
        lines.append("exec sleep infinity")
    return "\n".join(lines) + "\n"


class _JobcompIndex:
    """Final job records from a ``jobcomp/filetxt`` file, read incrementally (new lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._jobs: dict[str, JobInfo] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str) -> JobInfo | None:
        with self._lock:
            self._refresh()
            return self._jobs.get(job_id)

    def _refresh(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size < self._offset:  # rotated or truncated: read it again
            self._offset, self._jobs = 0, {}
        if size == self._offset:
            return
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        complete = data.rfind(b"\n") + 1  # a line being written is read next time
        self._offset += complete
        for raw in data[:complete].decode(errors="replace").splitlines():
            info = parse.parse_jobcomp_line(raw)
            if info is not None:
                self._jobs[info.job_id] = info  # a reused id (state wiped): the newest line wins


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
        self.command_timeout = float(command_timeout)
        self.workdir = (
            Path(workdir) if workdir is not None else platformdirs.user_state_path("elastic") / "slurm"
        ).resolve()
        self._env = {**os.environ, **(env or {})}
        self._jobcomp: _JobcompIndex | None = None
        self._lock = threading.Lock()  # guards the one-time jobcomp lookup; commands run unlocked
        self._jobcomp_resolved = jobcomp_path is not None
        self._est_partition: PartitionInfo | None = None
        self._est_model: tuple[str, str] | None = None
        if jobcomp_path is not None:
            self._jobcomp = _JobcompIndex(Path(jobcomp_path))

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
        proc = self._run(args, check=False)
        if proc.returncode != 0:
            if "not found" in proc.stderr.lower() or "invalid partition" in proc.stderr.lower():
                raise ConfigError(
                    f"SlurmBackend partition={self.partition_name!r} does not exist; "
                    f"see `sinfo -s` for the partitions ({proc.stderr.strip()})"
                )
            self._fail(args, proc)
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
        proc = self._run(args, check=False)
        if proc.returncode != 0:
            self._fail(args, proc)
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
        self._check_dependencies(spec)
        self.workdir.mkdir(parents=True, exist_ok=True)
        script = self._script(spec)
        args = ["sbatch", "--parsable"]
        proc = self._run(args, stdin=script, error=SubmitError, check=False)
        job_id = parse.parse_sbatch_job_id(proc.stdout) if proc.returncode == 0 else None
        if job_id is None:
            self._submit_failed(args, proc)
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
        proc = self._run(args, check=False)
        if proc.returncode != 0:
            if "already completing or completed" in proc.stderr or "Invalid job id" in proc.stderr:
                logger.debug("slurm: cancel %s: %s", job_id, proc.stderr.strip())
                return
            self._fail(args, proc)
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
        args = ["scontrol", "update", f"JobId={job_id}", f"TimeLimit={minutes}"]
        proc = self._run(args, check=False)
        if proc.returncode != 0:
            if "no longer pending" in proc.stderr or "already completing or completed" in proc.stderr:
                logger.debug("slurm: shorten %s: %s", job_id, proc.stderr.strip())  # it started meanwhile
                return
            self._fail(args, proc)
        logger.info("slurm: job %s time limit lowered to %d min", job_id, minutes)

    def state(self, job_id: str) -> JobInfo:
        """State of one job: ``scontrol show job -o``, or the jobcomp file once slurmctld forgot it.

        Raises
        ------
        UnknownJobError
            Neither slurmctld nor the jobcomp file knows the job.
        """
        self._require_id(job_id)
        args = ["scontrol", "show", "job", "-o", job_id]
        proc = self._run(args, check=False)
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                record = parse.parse_record(line)
                if record.get("JobId") == job_id:
                    return parse.job_from_record(record, "scontrol")
        elif "Invalid job id" not in proc.stderr:
            self._fail(args, proc)
        info = self._from_jobcomp(job_id)
        if info is None:
            raise UnknownJobError(job_id)
        return info

    def queue(self) -> list[JobInfo]:
        """Pending and running jobs of the current user (``squeue --me``)."""
        args = ["squeue", "--me", "-h", "-o", parse.SQUEUE_FORMAT]
        proc = self._run(args)
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
        proc = self._run(args, stdin=self._script(probe), check=False)
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
            alloc = self._run(info, check=False)
            if alloc.returncode != 0:
                self._fail(info, alloc)
            now = self.now()
            args = ["squeue", "-h", "-p", part.name, "-t", _queue.SNAPSHOT_STATES]
            args += ["-o", _queue.SNAPSHOT_FORMAT]
            proc = self._run(args, check=False)
            if proc.returncode != 0:
                self._fail(args, proc)
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
        proc = self._run(args, stdin=self._script(spec), check=False)
        if proc.returncode != 0:
            kind = parse.classify_submit_error(proc.stderr)
            if kind is GeometryError:
                self._submit_failed(args, proc)
            logger.warning("slurm: %s failed (exit %s): %s", " ".join(args), proc.returncode, proc.stderr)
            return None
        return parse.parse_test_only(proc.stderr + "\n" + proc.stdout)

    def _estimate_partition(self) -> PartitionInfo:
        """Return the partition the estimate simulates (read once)."""
        if self._est_partition is None:
            self._est_partition = self.partition()
        return self._est_partition

    def _estimate_model(self) -> tuple[str, str]:
        """Return (simulated policy, priority model) of this cluster's scheduler (read once)."""
        if self._est_model is None:
            args = ["scontrol", "show", "config"]
            proc = self._run(args, check=False)
            if proc.returncode != 0:
                self._fail(args, proc)
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

    def _check_dependencies(self, spec: JobSpec) -> None:
        """Refuse dependencies Slurm would silently treat as satisfied (ids it has never seen)."""
        if not spec.dependencies:
            return
        ids = sorted({dep.job_id for dep in spec.dependencies})
        bad = [i for i in ids if not _JOB_ID.fullmatch(i)]
        if bad:
            raise DependencyError(f"JobSpec.dependencies name {bad}, which are not Slurm job ids (digits)")
        args = ["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i"]
        proc = self._run(args, check=False)
        if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
            self._fail(args, proc)
        known = set(proc.stdout.split())
        unknown = [i for i in ids if i not in known and self._from_jobcomp(i) is None]
        if unknown:
            raise DependencyError(
                f"JobSpec.dependencies name jobs {unknown} unknown to Slurm (neither slurmctld nor the "
                "jobcomp file has them); Slurm would treat them as satisfied, so this is refused"
            )

    def _from_jobcomp(self, job_id: str) -> JobInfo | None:
        with self._lock:
            self._resolve_jobcomp()
        return self._jobcomp.get(job_id) if self._jobcomp is not None else None

    def _resolve_jobcomp(self) -> None:
        """Find the jobcomp file from ``scontrol show config`` once (retried if the command failed)."""
        if not self._jobcomp_resolved:
            proc = self._run(["scontrol", "show", "config"], check=False)
            if proc.returncode != 0:
                logger.warning("slurm: `scontrol show config` failed: %s", proc.stderr.strip())
                return
            self._jobcomp_resolved = True
            config = parse.parse_config(proc.stdout)
            if config.get("JobCompType") == "jobcomp/filetxt" and config.get("JobCompLoc"):
                self._jobcomp = _JobcompIndex(Path(config["JobCompLoc"]))
            else:
                logger.info(
                    "slurm: JobCompType is %r, not jobcomp/filetxt; finished jobs are known only while "
                    "slurmctld keeps them (MinJobAge)",
                    config.get("JobCompType"),
                )

    def _run(
        self,
        args: Sequence[str],
        *,
        stdin: str | None = None,
        error: type[BackendError] = BackendError,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run one Slurm command with the timeout; map "not installed" and "no answer" to errors."""
        conf = self._env.get("SLURM_CONF")
        if conf and not Path(conf).is_file():
            # Slurm commands would retry reading it for 60 s before failing.
            raise BackendUnavailableError(f"SLURM_CONF={conf} does not exist; point it at the slurm.conf")
        command = " ".join(args)
        try:
            proc = subprocess.run(
                list(args),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.command_timeout,
                env=self._env,
                check=False,
            )
        except FileNotFoundError:
            raise BackendUnavailableError(
                f"Slurm command {args[0]!r} is not on PATH; install the Slurm client tools (Debian: "
                "slurm-client) or pass env={'PATH': ...} to SlurmBackend"
            ) from None
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
            message = (
                f"`{command}` did not finish within command_timeout={self.command_timeout:g} s; "
                "slurmctld may be overloaded or unreachable (raise command_timeout if it is just slow)"
            )
            if issubclass(error, SubmitError):
                raise error(message, stdout=out, stderr=err, returncode=None) from None
            raise error(message) from None
        logger.debug("slurm: `%s` exit %d", command, proc.returncode)
        if proc.returncode != 0 and parse.is_controller_unreachable(proc.stderr):
            raise BackendUnavailableError(
                f"`{command}`: slurmctld does not answer ({proc.stderr.strip()}); check that it runs and "
                "that SLURM_CONF points at its slurm.conf"
            )
        if check and proc.returncode != 0:
            self._fail(args, proc)
        return proc

    @staticmethod
    def _fail(args: Sequence[str], proc: subprocess.CompletedProcess[str]) -> NoReturn:
        raise BackendError(
            f"`{' '.join(args)}` failed with exit code {proc.returncode}: {proc.stderr.strip()}"
        )

    @staticmethod
    def _submit_failed(args: Sequence[str], proc: subprocess.CompletedProcess[str]) -> NoReturn:
        kind = parse.classify_submit_error(proc.stderr)
        what = {
            GeometryError: "the request can never fit the partition (cores, nodes or walltime too large)",
            DependencyError: "a dependency is invalid",
        }.get(kind, "the submission was refused")
        detail = proc.stderr.strip() or f"no job id in its output {proc.stdout.strip()!r}"
        raise kind(
            f"`{' '.join(args)}` exit {proc.returncode}: {what}: {detail}",
            stdout=proc.stdout,
            stderr=proc.stderr,
            returncode=proc.returncode,
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

"""How the Slurm backend talks to Slurm: its commands (timeout, errors) and its jobcomp file.

- :class:`SlurmCommands` runs one Slurm command with the backend's environment and timeout, and turns
  "not installed", "no answer" and refusals into Elastic's errors, named with the command.
- :class:`JobcompIndex` reads the final job records of a ``jobcomp/filetxt`` file incrementally, and
  :class:`Jobcomp` finds that file from ``scontrol show config`` once: a job's final state is read there
  once slurmctld has forgotten the job (``MinJobAge``), as no ``slurmdbd`` (so no ``sacct``) is assumed.

What the commands print is parsed in :mod:`elastic.backends._slurm_parse`; what they are asked is
:class:`~elastic.backends.slurm.SlurmBackend`'s.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from elastic.backends import _slurm_parse as parse
from elastic.batch import JobInfo
from elastic.errors import (
    BackendError,
    BackendUnavailableError,
    DependencyError,
    GeometryError,
    SubmitError,
)

__all__ = ["Jobcomp", "JobcompIndex", "SlurmCommands"]

logger = logging.getLogger("elastic.backends.slurm")


class SlurmCommands:
    """Run Slurm's commands with one environment and timeout (see the module docstring).

    Parameters
    ----------
    env : Mapping[str, str]
        The whole environment of every command.
    timeout : float
        Seconds a command may take before it is abandoned with an error naming it.
    """

    def __init__(self, env: Mapping[str, str], timeout: float) -> None:
        self.env = dict(env)
        """The environment of every command."""
        self.timeout = timeout
        """Seconds a command may take."""

    def run(
        self,
        args: Sequence[str],
        *,
        stdin: str | None = None,
        error: type[BackendError] = BackendError,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run one Slurm command with the timeout; map "not installed" and "no answer" to errors.

        Raises
        ------
        BackendUnavailableError
            The command is not on ``PATH``, ``SLURM_CONF`` names no file, or slurmctld does not answer.
        BackendError
            ``error`` (a :class:`~elastic.errors.BackendError` kind) when the command timed out; a
            :class:`~elastic.errors.BackendError` when it failed and ``check`` is set.
        """
        conf = self.env.get("SLURM_CONF")
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
                timeout=self.timeout,
                env=self.env,
                check=False,
                # its own session: a Ctrl-C or SIGTERM sent to the driver's process group does not kill
                # an sbatch in flight after it submitted and before it said the job id (a job no one
                # would know of, left behind); the command ends by itself, within the timeout
                start_new_session=True,
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
                f"`{command}` did not finish within command_timeout={self.timeout:g} s; "
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
            self.fail(args, proc)
        return proc

    @staticmethod
    def fail(args: Sequence[str], proc: subprocess.CompletedProcess[str]) -> NoReturn:
        """Raise a :class:`~elastic.errors.BackendError` naming the failed command, its exit and its words."""
        raise BackendError(
            f"`{' '.join(args)}` failed with exit code {proc.returncode}: {proc.stderr.strip()}"
        )

    @staticmethod
    def submit_failed(args: Sequence[str], proc: subprocess.CompletedProcess[str]) -> NoReturn:
        """Raise the :class:`~elastic.errors.SubmitError` kind ``sbatch``'s words say (geometry...)."""
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


class JobcompIndex:
    """Final job records from a ``jobcomp/filetxt`` file, read incrementally (new lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        """The ``jobcomp/filetxt`` file."""
        self._offset = 0
        self._jobs: dict[str, JobInfo] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str) -> JobInfo | None:
        """Return the final record of ``job_id`` in the file (None: not there, or no file yet)."""
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


class Jobcomp:
    """The cluster's jobcomp file, found once from ``scontrol show config`` unless given.

    Parameters
    ----------
    commands : SlurmCommands
        How ``scontrol`` is run.
    path : Path or None
        The file (None: ``JobCompLoc`` when ``JobCompType=jobcomp/filetxt``, else none).
    """

    def __init__(self, commands: SlurmCommands, path: Path | None) -> None:
        self._commands = commands
        self._index = JobcompIndex(path) if path is not None else None
        self._resolved = path is not None
        self._lock = threading.Lock()  # guards the one-time lookup; commands run unlocked otherwise

    def get(self, job_id: str) -> JobInfo | None:
        """Return the final record of ``job_id`` (None: no jobcomp file, or not in it)."""
        with self._lock:
            self._resolve()
        return self._index.get(job_id) if self._index is not None else None

    def _resolve(self) -> None:
        """Find the jobcomp file from ``scontrol show config`` once (retried if the command failed)."""
        if not self._resolved:
            proc = self._commands.run(["scontrol", "show", "config"], check=False)
            if proc.returncode != 0:
                logger.warning("slurm: `scontrol show config` failed: %s", proc.stderr.strip())
                return
            self._resolved = True
            config = parse.parse_config(proc.stdout)
            if config.get("JobCompType") == "jobcomp/filetxt" and config.get("JobCompLoc"):
                self._index = JobcompIndex(Path(config["JobCompLoc"]))
            else:
                logger.info(
                    "slurm: JobCompType is %r, not jobcomp/filetxt; finished jobs are known only while "
                    "slurmctld keeps them (MinJobAge)",
                    config.get("JobCompType"),
                )

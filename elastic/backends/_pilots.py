"""Pilot processes of the mock backend's scaled clock: start, poll, stop them as Slurm would.

A job with a ``script`` on :class:`~elastic.backends.mock.MockBackend` (``clock="scaled"``) runs
``bash -c script`` as a local process in its own session when it starts. When the job ends (TIMEOUT,
cancel, its own exit) the process group and every descendant of the pilot, including tasks that started
a session of their own (:mod:`elastic.backends._proctrack`), get SIGTERM, then SIGKILL after ``grace``
real seconds. The caller holds its lock around every method.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable

from elastic.backends._proctrack import Proc, alive, process_tree, signal_all
from elastic.pool.cgroups import end_agents

__all__ = ["Pilots"]

logger = logging.getLogger(__name__)


class Pilots:
    """The pilot processes of one backend, by job index.

    Parameters
    ----------
    grace : float
        Real seconds between SIGTERM and SIGKILL.
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.scripts: dict[int, tuple[str, dict[str, str]]] = {}
        """Job index -> (script, environment) of each job submitted with a script."""
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        # pgid -> (real time to send SIGKILL, the job's processes when it was stopped)
        self._stopping: dict[int, tuple[float, list[Proc]]] = {}

    def start(self, job: int, job_id: str, cores: int) -> None:
        """Start the pilot process of ``job`` with ``ELASTIC_JOB_ID`` and ``ELASTIC_JOB_CORES`` set."""
        script, env = self.scripts[job]
        full_env = {**os.environ, **env, "ELASTIC_JOB_ID": job_id, "ELASTIC_JOB_CORES": str(cores)}
        logger.info("job %s: starting pilot process", job_id)
        self._procs[job] = subprocess.Popen(["bash", "-c", script], env=full_env, start_new_session=True)

    def ended(self, job: int) -> None:
        """Stop every process of ``job`` (SIGTERM now, SIGKILL after the grace), if it has a pilot."""
        proc = self._procs.get(job)
        if proc is not None:
            self._stop(proc.pid)

    def poll(self, exited: Callable[[int, int], bool]) -> None:
        """Tell ``exited(job, code)`` of each pilot that exited; SIGKILL what outlived its grace.

        ``exited`` returns whether the job was still running (then its leftovers are stopped).
        """
        for job, proc in list(self._procs.items()):
            code = proc.poll()
            if code is None:
                continue
            del self._procs[job]
            if exited(job, code):
                self._stop(proc.pid)  # leftovers of the script
        if self._stopping:
            now = time.monotonic()
            for pgid, (deadline, procs) in list(self._stopping.items()):
                if not _group_alive(pgid) and not alive(procs):
                    del self._stopping[pgid]
                elif now >= deadline:
                    _killpg(pgid, signal.SIGKILL)
                    signal_all(procs, signal.SIGKILL)
                    end_agents([(p.pid, p.start) for p in procs])  # and the tasks' cgroups
                    del self._stopping[pgid]

    def kill_all(self) -> None:
        """SIGKILL every pilot still running, its descendants, and every job being stopped."""
        for proc in list(self._procs.values()):
            # every descendant too: tasks started with setsid have left the pilot's group (as _stop)
            descendants = process_tree(proc.pid)
            _killpg(proc.pid, signal.SIGKILL)
            signal_all(descendants, signal.SIGKILL)
            end_agents([(p.pid, p.start) for p in descendants])  # and the tasks' cgroups
            proc.wait()
        self._procs.clear()
        for pgid, (_, procs) in self._stopping.items():  # SIGTERMed jobs not gone yet
            _killpg(pgid, signal.SIGKILL)
            signal_all(procs, signal.SIGKILL)
            end_agents([(p.pid, p.start) for p in procs])
        self._stopping.clear()

    def _stop(self, pid: int) -> None:
        """SIGTERM the process group led by ``pid`` and every descendant of ``pid``; SIGKILL later."""
        procs = process_tree(pid)
        group = _killpg(pid, signal.SIGTERM)
        if signal_all(procs, signal.SIGTERM) or group:
            self._stopping[pid] = (time.monotonic() + self.grace, procs)


def _killpg(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; return whether the group existed."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's reused group id
        return False
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True

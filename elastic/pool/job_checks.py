"""What an agent checks about its batch job and its pool before and while it works.

:func:`granted_end`: when the batch job really ends (Slurm grants whole minutes, so an agent drains by
the limit it was granted, not the one its script was given); :func:`pool_listening`: whether the pool it
was started for still listens (a job held by a dependency that starts after its driver died leaves at
once, doing no work). Used by :class:`~elastic.pool.agent.Agent`, which re-exports both.
"""

from __future__ import annotations

import os
import socket
import time

__all__ = ["granted_end", "pool_listening"]


def granted_end(walltime_end: float | None) -> float | None:
    """Return when this batch job really ends: Slurm's end time where it is later than ``walltime_end``.

    The script computes ``walltime_end`` from the walltime *requested*; Slurm grants whole minutes (68 s
    asked, 120 s granted), and an agent draining by the request would leave the rest of its job unused.
    Asked of ``squeue`` for ``SLURM_JOB_ID`` (its end time, ``%e``, in the node's local time); outside a
    Slurm job, or when ``squeue`` does not answer within 5 s, ``walltime_end`` as given.
    """
    job = os.environ.get("SLURM_JOB_ID")
    if walltime_end is None or not job:
        return walltime_end
    import datetime
    import subprocess

    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%e"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        end = datetime.datetime.fromisoformat(out).timestamp()  # naive: local time, as squeue prints it
    except (OSError, subprocess.SubprocessError, ValueError):
        return walltime_end
    return max(walltime_end, end) if end < walltime_end + 86400 * 366 else walltime_end


def pool_listening(address: str, *, tries: int = 3, pause: float = 0.5, timeout: float = 5.0) -> bool:
    """Whether something accepts TCP connections at the pool's ``tcp://host:port`` address.

    A refused connection, ``tries`` times ``pause`` seconds apart, means nothing listens there: the
    driver that owned the pool has exited (ZeroMQ itself would retry silently until the registration
    timeout). A timeout or any other error is not proof of that, and answers True (registration then
    tells). Addresses that are not TCP answer True.
    """
    if not address.startswith("tcp://"):
        return True
    host, _, port = address[len("tcp://") :].rpartition(":")
    host = host.strip("[]")
    try:
        port_number = int(port)
    except ValueError:
        return True
    for attempt in range(tries):
        try:
            with socket.create_connection((host, port_number), timeout=timeout):
                return True
        except ConnectionRefusedError:
            if attempt + 1 < tries:
                time.sleep(pause)
        except OSError:
            return True
    return False

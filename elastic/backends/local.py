"""The local backend: allocations on this machine, started as soon as its cores allow.

:class:`LocalBackend` is what the front door uses when no batch system is configured, so that a workflow
runs on a laptop with nothing else set up. It is the mock backend's scaled clock at real speed
(``speedup=1``) with no background load, on a partition the size of this machine: an allocation starts at
once when its cores are free, its job script (the agent) runs as a local process group, walltimes are
enforced, cancelling kills the group. Nothing is simulated but the queue of this machine's cores.
"""

from __future__ import annotations

import os

from elastic.backends.mock import MockBackend
from elastic.errors import ConfigError

__all__ = ["LocalBackend"]


class LocalBackend(MockBackend):
    """A batch backend on this machine (see the module docstring).

    Parameters
    ----------
    cores : int or None, default None
        Cores allocations may hold together; ``None``: this machine's (``os.cpu_count()``).
    max_walltime : float or None, default None
        Longest walltime accepted, seconds.
    grace : float, default 2.0
        Real seconds between SIGTERM and SIGKILL when an allocation's processes are stopped.

    Examples
    --------
    >>> from elastic.batch import JobSpec
    >>> with LocalBackend(cores=2) as local:
    ...     job = local.submit(JobSpec(cores=2, walltime=60.0, script="exit 0"))
    ...     local.name, local.partition().cores
    ('local', 2)
    """

    def __init__(
        self, cores: int | None = None, *, max_walltime: float | None = None, grace: float = 2.0
    ) -> None:
        n = os.cpu_count() or 1 if cores is None else cores
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"LocalBackend(cores=...) must be an integer >= 1 or None, got {cores!r}")
        super().__init__(
            nodes=n,
            cores_per_node=1,
            clock="scaled",
            speedup=1.0,
            max_walltime=max_walltime,
            grace=grace,
            partition_name="local",
        )

    @property
    def name(self) -> str:
        """``"local"``."""
        return "local"

"""Admission checks: whether a request, a background workload or a set of pinned jobs may enter a partition.

Each function raises an error naming the job, the bad value and what to ask for instead, before the
engine changes any state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from elastic.errors import ConfigError, GeometryError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from elastic.simulator.cluster import Cluster
    from elastic.simulator.workload import Workload

__all__ = ["check_background", "check_pins", "request_geometry"]


class _Policy(Protocol):
    """What the checks read of the engine's policy (a :class:`~elastic.simulator.base.QueuePolicy`).

    Declared here, not imported, so that this module (which the engine imports) does not import the
    policies' module, which names the engine.
    """

    name: str


def request_geometry(cluster: Cluster, cores: int, nodes: int | None) -> tuple[int, int]:
    """Return ``(cores, whole nodes)`` of a request, or raise GeometryError if it can never fit.

    Parameters
    ----------
    cluster : Cluster
        The partition.
    cores : int
        Cores asked for.
    nodes : int or None
        Whole nodes asked for instead of cores (then ``cores`` is every core of those nodes).

    Raises
    ------
    GeometryError
        The request is larger than the partition or than the nodes it asks for.
    """
    cl = cluster
    whole = 0
    if nodes is not None:
        if nodes > cl.nodes:
            raise GeometryError(
                f"job asks for {nodes} nodes but the partition has {cl.nodes}; ask for at most {cl.nodes}"
            )
        if cores > nodes * cl.cores_per_node:
            raise GeometryError(
                f"job asks for {cores} cores on {nodes} whole nodes of {cl.cores_per_node} cores; "
                f"ask for at most {nodes * cl.cores_per_node} cores or more nodes"
            )
        cores = nodes * cl.cores_per_node
        whole = nodes if cl.per_node else 0
    if cores > cl.total:
        raise GeometryError(
            f"job asks for {cores} cores but the partition has {cl.total}; ask for at most {cl.total}"
        )
    return cores, whole


def check_background(workload: Workload, total: int) -> None:
    """Raise unless ``workload`` is sorted by submit time and each job fits ``total`` cores.

    Raises
    ------
    ConfigError
        The workload is not sorted by submit time.
    GeometryError
        A job asks for more cores than the partition has.
    """
    if not len(workload):
        return
    if np.any(np.diff(workload.submit) < 0):
        raise ConfigError(f"workload {workload.source!r} is not sorted by submit time")
    too_big = workload.cores > total
    if np.any(too_big):
        k = int(np.argmax(too_big))
        raise GeometryError(
            f"background job {int(workload.job_id[k])} of {workload.source!r} asks for "
            f"{int(workload.cores[k])} cores but the partition has {total}; "
            "scale the workload to the partition (processors=...) or use a bigger partition"
        )


def check_pins(
    policy: _Policy, workload: Workload, start: ArrayLike, now: float, total: int
) -> NDArray[np.float64]:
    """Check that ``workload`` may be pinned at ``start`` and return the starts as a float array.

    Parameters
    ----------
    policy : QueuePolicy
        The engine's policy; it must plan around pinned jobs (``plans_pins = True``).
    workload : Workload
        The jobs to pin.
    start : array_like of float
        Pinned start per job, seconds.
    now : float
        Current simulated time, seconds.
    total : int
        Cores of the partition.

    Raises
    ------
    ConfigError
        The policy does not plan around pinned jobs, ``start`` has the wrong length, or a start
        is before the job's submit time or before now.
    GeometryError
        A job is larger than the partition.
    """
    if not getattr(policy, "plans_pins", False):
        raise ConfigError(
            f"pinned jobs need a policy that plans around them (elastic.simulator.pinned); "
            f"policy {policy.name!r} would start queued jobs into their cores"
        )
    at = np.asarray(start, dtype=np.float64)
    n = len(workload)
    if at.shape != (n,):
        raise ConfigError(f"pin start must have one time per job ({n}), got shape {at.shape}")
    bad = ~(at >= np.maximum(workload.submit, now)) if n else np.zeros(0, dtype=bool)
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ConfigError(
            f"pinned job {int(workload.job_id[k])} of {workload.source!r}: start {at[k]} is before "
            f"its submit time {workload.submit[k]} or before now ({now})"
        )
    if n and int(workload.cores.max()) > total:
        k = int(np.argmax(workload.cores))
        raise GeometryError(
            f"pinned job {int(workload.job_id[k])} of {workload.source!r} asks for "
            f"{int(workload.cores[k])} cores but the partition has {total}"
        )
    _check_overlap(workload, at, total)
    return at


def _check_overlap(workload: Workload, at: NDArray[np.float64], total: int) -> None:
    """Raise ConfigError when the pinned jobs together need more than ``total`` cores at some time.

    Zero-runtime jobs hold no cores. Without this check the engine would find out only when a pinned
    job cannot start, and blame the policy.
    """
    held = np.flatnonzero(workload.runtime > 0)
    if held.size == 0:
        return
    start = at[held]
    times = np.concatenate([start, start + workload.runtime[held]])
    cores = workload.cores[held]
    delta = np.concatenate([cores, -cores])
    order = np.lexsort((delta, times))  # at equal times, ends (negative) first
    level = np.cumsum(delta[order])
    worst = int(np.argmax(level))
    if level[worst] > total:
        k = held[int(order[worst]) % held.size]
        raise ConfigError(
            f"pinned jobs of {workload.source!r} need {int(level[worst])} cores at {times[order[worst]]:g} s "
            f"(when job {int(workload.job_id[k])} starts) but the partition has {total}: pin only jobs whose "
            "recorded schedule fits (elastic.simulator.fidelity.pinnable drops the conflicting ones)"
        )

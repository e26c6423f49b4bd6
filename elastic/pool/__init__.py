"""The pool: every live allocation's agents as one pool of cores, and the tasks that run on it.

Modules
-------
pool
    :class:`~elastic.pool.pool.Pool`: the I/O thread, the synchronous API, futures.
state
    :class:`~elastic.pool.state.PoolState`: the bookkeeping without sockets or threads.
placement
    :func:`~elastic.pool.placement.plan_placement`: the walltime-aware placement rule.
protocol
    The wire protocol: messages, encoding, authentication, sockets.
agent
    The worker agent, ``python -m elastic.pool.agent``, run inside each allocation.
tasks
    :class:`~elastic.pool.tasks.Task`, results, errors, and running a task in a fresh process.
events
    The records the pool emits.

The names most users need are re-exported here. They are loaded on first use, so that an agent or a task
process importing one submodule does not pay for the others (ZeroMQ, threads).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elastic.pool.pool import Pool, PoolClosedError
    from elastic.pool.tasks import (
        ShellResult,
        ShellTaskError,
        Task,
        TaskCrashedError,
        TaskLostError,
        TaskState,
    )

__all__ = [
    "Pool",
    "PoolClosedError",
    "ShellResult",
    "ShellTaskError",
    "Task",
    "TaskCrashedError",
    "TaskLostError",
    "TaskState",
]

_WHERE = {
    "Pool": "elastic.pool.pool",
    "PoolClosedError": "elastic.pool.pool",
    "ShellResult": "elastic.pool.tasks",
    "ShellTaskError": "elastic.pool.tasks",
    "Task": "elastic.pool.tasks",
    "TaskCrashedError": "elastic.pool.tasks",
    "TaskLostError": "elastic.pool.tasks",
    "TaskState": "elastic.pool.tasks",
}


def __getattr__(name: str) -> Any:
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'elastic.pool' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)

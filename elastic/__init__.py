"""Elastic: run HPC workflows on several pilot batch allocations as one resource pool.

``from elastic import Elastic, Settings, task`` gives the front door (:class:`elastic.front.door.Elastic`)
and its settings (:class:`elastic.front.settings.Settings`), loaded on first use so that
``import elastic`` stays light for agents, workers and the command line.

Subpackages
-----------
front
    The front door: tasks from user code.
pool
    Agents in allocations as one pool of cores.
control
    Allocation control (the controller, the declared-workflow driver, executions).
strategies
    Big-Job, Per-Stage, ASA.
backends
    The :class:`~elastic.backends.base.BatchBackend` protocol, the local, mock (simulated) and Slurm backends.
simulator
    The trace-driven discrete-event queue simulator behind the mock backend.
store
    Runs, runtimes, waits and learner state in a database.
cli
    The ``elastic`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elastic.front import Elastic, Settings, task

__all__ = ["Elastic", "Settings", "__version__", "task"]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("Elastic", "Settings", "task"):
        import elastic.front

        return getattr(elastic.front, name)
    raise AttributeError(f"module 'elastic' has no attribute {name!r}")

"""Elastic: run HPC workflows on several pilot batch allocations as one resource pool.

Subpackages
-----------
backends
    The :class:`~elastic.backends.base.BatchBackend` protocol, the mock (simulated) backend and Slurm.
simulator
    The trace-driven discrete-event queue simulator behind the mock backend.
cli
    The ``elastic`` command.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"

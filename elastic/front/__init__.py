"""The front door: tasks from user code on pilot allocations chosen by a strategy.

:class:`~elastic.front.door.Elastic` is the object users create (also importable as ``elastic.Elastic``);
:func:`~elastic.front.tasks.task` marks a function with its stage, cores and runtime.

Modules
-------
door
    :class:`~elastic.front.door.Elastic` and its live view.
assembly
    The parts of one run, built from its settings and wired together.
intake
    Tasks coming in: refused, queued in the pool, or held until their inputs are done.
record
    The run's events, metrics and store row.
settings
    :class:`~elastic.front.settings.Settings`, the options every front-end shares.
tasks
    :func:`~elastic.front.tasks.task`, task options, inputs given as futures.
setup
    Backends, strategies and stores by name.
"""

from __future__ import annotations

from elastic.front.door import Elastic, FrontDoorView
from elastic.front.settings import Settings
from elastic.front.tasks import DependencyError, task

__all__ = ["DependencyError", "Elastic", "FrontDoorView", "Settings", "task"]

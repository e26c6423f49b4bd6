"""Mesos-style offers: frameworks written against pymesos run unmodified on the front door's allocations.

:class:`~elastic.front.mesos.server.MesosServer` serves the part of the Mesos v1 scheduler HTTP API that
pymesos' ``MesosSchedulerDriver`` uses, in front of an :class:`~elastic.front.door.Elastic`: offers are the
free cores of the live allocations' agents, launched commands run as pool tasks on the offered agent, and
the frameworks' demand feeds the front door's strategy (Big-Job, Per-Stage, ASA), which decides the
allocations. ``docs/guide/mesos.md`` lists the calls and fields served, beside Mesos'.

Modules
-------
server
    The HTTP endpoint (Starlette on uvicorn), bodies read while they stream in, :class:`MesosServer`.
auth
    Framework authentication as Mesos: off on loopback, credentials per principal from a file.
connections
    Keep-alive, connection caps, header timeouts, idle sockets evicted.
master
    Frameworks, calls, offers made from the pool, launched tasks, status updates.
offers
    The offer rule: what is offered to whom, filters, rescinds.
launch
    TaskInfo as pool tasks; which launches run and which are refused (TASK_ERROR, TASK_DROPPED).
states
    Pool task states as Mesos task states.
updates
    Status updates resent until acknowledged.
frameworks
    A framework's record, its stage and its demand.
calls, fields, events
    The calls' JSON (checked field by field), the events' JSON and RecordIO.
"""

from __future__ import annotations

from elastic.extras import require

try:
    import starlette
    import uvicorn
except ImportError:  # say which extra installs them, not only that a module is missing
    require("mesos", "the Mesos scheduler API (elastic mesos)")
    raise

from elastic.front.mesos.master import MesosMaster
from elastic.front.mesos.server import MesosServer

del starlette, uvicorn

__all__ = ["MesosMaster", "MesosServer"]

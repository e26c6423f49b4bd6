"""The :class:`QueuePolicy` protocol and the registry of queue policies by name.

A policy decides which pending jobs start now. The engine calls :meth:`QueuePolicy.schedule` once
after every batch of simultaneous events (arrivals, ends, releases); the policy reads the engine's
eligible queue (``engine.queue``: job indices in priority order), the free cores (``engine.cluster``)
and the running jobs sorted by expected end (``engine.running``), and starts jobs with
``engine.start(job)``, removing them from ``engine.queue`` itself. Since every job needs a core, the
engine skips the pass when no core is free or the queue is empty; jobs that arrived meanwhile are at
the tail of the queue at the next pass.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from elastic.errors import ConfigError, UnknownNameError

__all__ = ["POLICIES", "QueuePolicy", "make_policy"]


EngineT = TypeVar("EngineT", contravariant=True)
"""The engine a policy schedules (:class:`elastic.simulator.engine.Engine`)."""


@runtime_checkable
class QueuePolicy(Protocol[EngineT]):
    """Decides which queued jobs start now.

    Generic in the engine it schedules (the engine holds a ``QueuePolicy[Engine]``), so that this
    module, which the engine imports, does not import the engine.

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"easy"``.
    reservations : Mapping[int, float]
        For reservation-based policies, the start time the policy promised each job (job index ->
        simulated seconds) when it first reserved cores for it; empty for the others. Tests check that
        promised jobs never start later.
    """

    name: str

    @property
    def reservations(self) -> Mapping[int, float]:
        """Start time promised to each job the policy reserved cores for."""
        ...

    def schedule(self, engine: EngineT) -> None:
        """Start every job that may start now under this policy."""
        ...


#: Policy name -> ``"module:Class"``; imported lazily so a policy costs nothing unless used.
POLICIES: dict[str, str] = {
    "easy": "elastic.simulator.easy:EasyBackfill",
    "conservative": "elastic.simulator.conservative:ConservativeBackfill",
    "slurm": "elastic.simulator.conservative:SlurmBackfill",
    "slurm-nodes": "elastic.simulator.slurm_nodes:SlurmNodeBackfill",
    "fcfs": "elastic.simulator.fcfs:Fcfs",
    "sejf": "elastic.simulator.ordering:Sejf",
    "lejf": "elastic.simulator.ordering:Lejf",
}

_SPECULATIVE = "elastic.simulator.speculative:SpeculativeEasy"


def make_policy(name: str, *, speculative: bool = False) -> QueuePolicy[Any]:
    """Return a new policy instance by registry name.

    Parameters
    ----------
    name : str
        One of :data:`POLICIES` (``easy``, ``conservative``, ``fcfs``, ``sejf``, ``lejf``).
    speculative : bool, default False
        Add speculative backfilling (only with ``easy``).

    Raises
    ------
    UnknownNameError
        ``name`` is not a known policy.
    ConfigError
        ``speculative`` with a policy other than ``easy``.
    """
    if name not in POLICIES:
        raise UnknownNameError("policy", name, POLICIES)
    target = POLICIES[name]
    if speculative:
        if name != "easy":
            raise ConfigError(f"speculative backfilling works only with policy 'easy', got policy {name!r}")
        target = _SPECULATIVE
    module, cls = target.split(":")
    factory: Callable[[], QueuePolicy[Any]] = getattr(importlib.import_module(module), cls)
    return factory()

"""Expected start of a job if it were submitted to an engine now: the mock backend's estimate.

The engine's queue is read as ``squeue`` would show it (:func:`~elastic.simulator.snapshot.snapshot_of`:
running jobs end at their time limit, pending jobs in rank order with their dependencies)
and the probe is simulated on that snapshot with :func:`~elastic.simulator.snapshot.estimate_start`, the
same computation the Slurm backend runs on its ``squeue`` snapshot; see that module for why this
estimate and not ``sbatch --test-only``'s. The copy runs the engine's policy without speculation.

A policy that plans around pinned jobs (``plans_pins``, e.g.
:class:`~elastic.simulator.pinned.PinnedBackfill`, the recorded modes) already holds a plan of every
queued job, future pinned ones included: its ``probe`` answers from that plan instead. No real queue can
give that answer, and the run controller does not show it to strategies
(:attr:`~elastic.backends.mock.MockBackend.estimates_see_ahead`).
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from elastic.batch import DependencyKind
from elastic.simulator.jobs import DepRecord
from elastic.simulator.snapshot import QueueSnapshot, estimate_start, snapshot_of

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["expected_start"]

_SNAPSHOTS: weakref.WeakKeyDictionary[Engine, tuple[tuple[int, float], QueueSnapshot]] = (
    weakref.WeakKeyDictionary()
)


def _snapshot(engine: Engine) -> QueueSnapshot:
    """Return :func:`snapshot_of` ``engine``, taken once per engine version and time.

    A decision asks the estimate for many geometries of one queue; building the snapshot of a queue of
    hundreds of jobs for each was most of what an estimate cost once each answer was read off one
    simulation per snapshot (``snapshot._Trajectory``). :attr:`Engine.version` changes with every
    change of the engine's jobs.
    """
    key = (engine.version, engine._now)
    cached = _SNAPSHOTS.get(engine)
    if cached is not None and cached[0] == key:
        return cached[1]
    if cached is not None and cached[0][0] == key[0]:
        # no event since (every batch of events changes the version: a start, an end, a begin time or
        # a dependency reached, a rank moved): the same jobs, limits and ranks, read later
        snap = dataclasses.replace(cached[1], now=engine._now)
    else:
        snap = snapshot_of(engine)
    _SNAPSHOTS[engine] = (key, snap)
    return snap


def expected_start(
    engine: Engine,
    *,
    cores: int,
    walltime: float,
    nodes: int | None = None,
    dependencies: Sequence[tuple[DependencyKind, int]] = (),
    begin: float | None = None,
) -> float | None:
    """Return when a job like this would start if submitted to ``engine`` now.

    Parameters
    ----------
    engine : Engine
        The live engine (not modified; a planning policy may first run the pass due at the
        current time).
    cores, walltime, nodes, begin
        As for :meth:`Engine.submit`.
    dependencies : sequence of (DependencyKind, int)
        Dependencies on job indices of ``engine``.

    Returns
    -------
    float or None
        Simulated start time, or None when the job could never start (a dependency can never be
        satisfied).
    """
    engine.check_geometry(cores, nodes)
    probe_plan = getattr(engine.policy, "probe", None)
    if getattr(engine.policy, "plans_pins", False) and callable(probe_plan):
        answer: float | None = probe_plan(engine, cores, walltime, begin=begin, dependencies=dependencies)
        return answer
    snap = _snapshot(engine)
    after: list[tuple[DependencyKind, str]] = []
    if dependencies:  # the jobs the snapshot holds, read only for these (a set of every job per estimate)
        held = {p.job_id for p in snap.pending} | {r.job_id for r in snap.running}
        jobs = engine.jobs
    for kind, parent in dependencies:
        if str(parent) in held:
            after.append((kind, str(parent)))
            continue
        status = DepRecord(kind, parent).evaluate(jobs.state[parent], not math.isnan(jobs.start[parent]))
        if status != 1:  # never satisfied, or its parent waits on a dependency of its own
            return None
    return estimate_start(
        snap,
        cores=cores,
        walltime=walltime,
        nodes=nodes,
        begin=begin,
        after=after,
        policy=engine.policy.name.split("+")[0],
        priority=engine.ranking.name,
    )

"""The placement rule: which queued tasks start now, on which offer (pure functions).

Placement is walltime-aware, like HyperQueue's time request: a task with a runtime estimate is not
started on an agent whose allocation has less walltime left than the estimate while another allocation
(live or still requested) with enough time and cores exists; if none exists, it goes to the agent with the
most time left. Among agents with enough time the one with the least time left is chosen, keeping long
allocations for long tasks. A task lost when its allocation ended is re-queued with an estimate of at
least twice the time it ran there (:func:`estimate_after_loss`): it takes longer than that, so an agent
with less time left would lose it again.

A task may name the one agent it runs on (``agent``, e.g. a Mesos launch on an offer: see
:mod:`elastic.front.mesos`): it goes to that agent's offer only (:func:`admits`), and never waits for
another allocation's walltime, since no other agent may take it.

The same rule places real tasks (:class:`elastic.pool.Pool`, one offer per agent) and simulated ones
(:class:`~elastic.control.sim_execution.SimExecution`, one offer per allocation), so pure simulation and
real runs cannot drift apart: both call :func:`plan_placement`, and both leave out allocations within
their drain margin of the walltime end (:func:`usable`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = [
    "Offer",
    "Placeable",
    "Room",
    "admits",
    "estimate_after_loss",
    "has_room",
    "plan_placement",
    "usable",
]


class Placeable(Protocol):
    """What placement needs to know of a task."""

    @property
    def cores(self) -> int:
        """Cores it needs."""
        ...

    @property
    def estimate(self) -> float | None:
        """Runtime estimate in seconds, if any."""
        ...


T = TypeVar("T", bound=Placeable)


@dataclass(frozen=True, slots=True)
class Offer:
    """Free cores an agent (or a simulated allocation) offers, with the walltime its allocation has left.

    Attributes
    ----------
    agent : bytes
        The agent's identity (the allocation id for simulated allocations).
    alloc_id : str
        Its allocation.
    free : int
        Cores not running a task.
    remaining : float
        Seconds of walltime the allocation has left.
    stage : str or None
        The stage its allocation was requested for (None: not known); a task of that stage prefers it.
    """

    agent: bytes
    alloc_id: str
    free: int
    remaining: float
    stage: str | None = None


def estimate_after_loss(estimate: float | None, ran: float) -> float | None:
    """Return a lost task's estimate for its next attempt: at least twice the ``ran`` seconds it ran and lost.

    The attempt starts over and takes longer than ``ran`` (a re-run is no shorter than the attempt that did
    not finish). With only ``ran`` as its estimate, a re-run went to any allocation with a little more time
    left than the last one, and a heavy-tailed task was lost on each in turn until its retries ran out
    (1000genome's ``mutation_overlap`` under ``perstage-split``: lost after 1069 s, 1069 s, 1671 s and
    1961 s while a 2433-s allocation and longer follow-ups were requested for it). Doubling is the
    speculative walltime sequence's own step (:meth:`~elastic.strategies.knowledge.Knowledge.walltime`):
    a task needing ``T`` s is lost at most ``log2(T / first)`` times. A task that ran for no time keeps its
    estimate.

    Examples
    --------
    >>> estimate_after_loss(55.0, 225.0), estimate_after_loss(600.0, 225.0), estimate_after_loss(None, 0.0)
    (450.0, 600.0, None)
    """
    if ran <= 0:
        return estimate
    return max(estimate or 0.0, 2.0 * ran)


RETRY_GROWTH = 1.5
"""How many times as long as every earlier lost attempt of a task an attempt must run for its loss not to
count against the retry limit (:func:`counts_against_retries`)."""


def counts_against_retries(ran: float, earlier: Sequence[float], estimate: float | None) -> bool:
    """Whether a task's lost attempt, which ran ``ran`` seconds, counts against its retry limit.

    ``earlier``: how long each of its earlier lost attempts ran; ``estimate``: the seconds the attempt was
    expected to take when it started (None: not known). An attempt that outlived what was expected of it
    (its estimate, and :data:`RETRY_GROWTH` times every earlier lost attempt) does not count: it was lost
    because the allocation it ran on ended before the task could (a walltime asked too short), and each
    such loss asks the next one longer (:func:`estimate_after_loss`). Counting them made the speculative
    walltime sequence's probes into faults: a task whose runtime drew long was lost at 717 s, 1,458 s,
    2,916 s and 5,832 s while 11,727 s was asked for it, and its run failed, under every strategy but
    Big-Job (``elastic compare --workflow suite --trace CTC-SP2-1996-3.1-cln.swf.gz --peak-cores 28
    --scaling weak``: BWA's ``cat_bwa`` in run 3; the same on the Lublin-Feitelson trace). A loss that
    comes sooner (an agent that dies, a task that kills its node, an allocation that stops growing)
    counts, so a task is lost at most ``max_retries + 1`` times more than ``log(T / t) /
    log(RETRY_GROWTH)`` for the longest allocation ``T`` and the first uncounted attempt's ``t``
    seconds.

    Examples
    --------
    >>> counts_against_retries(900.0, [], 840.0), counts_against_retries(1458.0, [717.0], 1434.0)
    (False, False)
    >>> counts_against_retries(717.0, [], 840.0), counts_against_retries(1000.0, [717.0], 900.0)
    (True, True)
    >>> counts_against_retries(900.0, [], None), counts_against_retries(6.0, [0.0], None)  # nothing expected
    (True, True)
    """
    expected = max(estimate or 0.0, RETRY_GROWTH * max(earlier, default=0.0))
    # nothing expected of it (no estimate, no earlier attempt that ran): a fault, as far as is known
    return not (expected > 0 and ran >= expected)


def usable(remaining: float, drain_margin: float) -> bool:
    """Whether an allocation with ``remaining`` seconds left may take new tasks (not within the margin)."""
    return remaining > drain_margin


def admits(task: Placeable, agent: bytes) -> bool:
    """Whether the agent with identity ``agent`` may take ``task``: it names no agent, or this one.

    A task names its agent with an ``agent`` attribute (the agent's name, its identity as text; see
    :class:`elastic.pool.tasks.Task`); tasks without the attribute (simulated ones) go anywhere.
    """
    wanted = getattr(task, "agent", None)
    return wanted is None or wanted.encode() == agent


def requested_for(task: Placeable, offer: Offer) -> bool:
    """Whether ``offer``'s allocation was requested for ``task``'s stage.

    Any allocation may take any task, but where two can, the one requested for the task's stage takes
    it: a task lost with its allocation and re-queued while the next stage's allocation just started
    went there (least walltime left), beside the follow-up requested for it, and held the next stage's
    28 cores, 27 idle, for the hour it ran (HPC2N capacity, Statistics 28, run 1).

    Examples
    --------
    >>> from elastic.pool.tasks import Task
    >>> t = Task.shell("true", stage="a", task_id="t")
    >>> requested_for(t, Offer(b"x", "a1", 1, 60.0, "a")), requested_for(t, Offer(b"y", "a2", 1, 60.0))
    (True, False)
    """
    return offer.stage is not None and offer.stage == getattr(task, "stage", None)


def has_room(task: Placeable, capacities: Iterable[tuple[int, float]], need: float | None = None) -> bool:
    """Whether one of ``(cores per agent, walltime left)`` has the cores and ``need`` seconds for ``task``.

    ``need`` defaults to the task's estimate (0 without one).
    """
    if need is None:
        need = task.estimate or 0.0
    return any(cores >= task.cores and left >= need for cores, left in capacities)


class Room:
    """:func:`has_room` over one fixed list of capacities, answered without a scan per task.

    ``Room(capacities).has(task, need)`` is ``has_room(task, capacities, need)``: one of them has the
    task's cores and ``need`` seconds exactly when the most walltime left among those with the cores is
    at least ``need``. That most is found once per width asked. A simulated pass over a wide DAG's
    queue asks it for every queued task, each time over every allocation live or requested (thousands
    of each on a 5,000-stage workflow: most of such a run's cost).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> task = SimpleNamespace(cores=2, estimate=60.0)
    >>> room = Room([(1, 600.0), (2, 30.0), (4, 90.0)])
    >>> room.has(task), room.has(task, 120.0), has_room(task, [(1, 600.0), (2, 30.0), (4, 90.0)])
    (True, False, True)
    """

    __slots__ = ("_capacities", "_most")

    def __init__(self, capacities: Iterable[tuple[int, float]]) -> None:
        self._capacities = list(capacities)
        self._most: dict[int, float | None] = {}

    def most(self, cores: int) -> float | None:
        """Return the most walltime left among the capacities of at least ``cores`` cores (None: none)."""
        if cores in self._most:
            return self._most[cores]
        lefts = [left for c, left in self._capacities if c >= cores]
        most = max(lefts) if lefts else None
        self._most[cores] = most
        return most

    def has(self, task: Placeable, need: float | None = None) -> bool:
        """Return ``has_room(task, capacities, need)``."""
        if need is None:
            need = task.estimate or 0.0
        most = self.most(task.cores)
        return most is not None and most >= need


def plan_placement(
    tasks: Iterable[T],
    offers: Sequence[Offer],
    can_wait: Callable[[T], bool],
    waits_longer: Callable[[T, float], bool] | None = None,
    kind: Callable[[T], Hashable] | None = None,
) -> list[tuple[T, Offer]]:
    """Decide which queued tasks start now, and where; the placement rule as a pure function.

    Tasks are taken oldest first; one that cannot start now does not hold back younger ones. A task
    goes to an offer with enough free cores and at least ``task.estimate`` seconds left, choosing one
    requested for the task's stage if there is one (:func:`requested_for`), then the least time left
    (then the most free cores). When no offer has the time, the task waits if
    ``can_wait(task)`` (another allocation, live or requested, could take it); failing that, it still waits
    if ``waits_longer(task, seconds)`` says another allocation has ``seconds``: more than the best fitting
    offer has left and at least half its estimate (for a task lost before, whose estimate is twice what it
    ran, at least as long as that attempt ran: the walltime follow-up asked for it, a little short of the
    doubled estimate, rather than an allocation about to end). Otherwise it goes to the fitting offer with
    the most time left. A task that names its agent considers that agent's offer only (:func:`admits`)
    and never waits for another. ``tasks`` is read lazily and no further than the last placement that
    can still happen (it stops once every offered core is taken).

    Parameters
    ----------
    tasks : iterable of tasks with ``cores`` and ``estimate``
        Queued tasks, oldest first.
    offers : sequence of Offer
        Current offers (each agent at most once).
    can_wait : callable
        Whether a task may wait for another allocation with enough walltime.
    waits_longer : callable or None, default None
        ``waits_longer(task, seconds)``: whether another allocation (live or requested) has the task's
        cores and at least ``seconds`` left; None: a task no allocation has the time for is not held back.
    kind : callable or None, default None
        ``kind(task)``: a value equal for tasks that ``can_wait`` and ``waits_longer`` answer alike when
        they have the same cores and estimate and name no agent. A task of the cores, estimate, agent
        and kind of one that did not start since the last placement does not start either, and is passed
        over without asking (a simulated wide DAG queues thousands of tasks of a few kinds, and this runs
        at every task's end). None: every task is asked about.

    Returns
    -------
    list of (task, Offer)
        Placements in order; the offers are the ones given (their ``free`` is not updated).

    Examples
    --------
    >>> from elastic.pool.tasks import Task
    >>> short, long = Offer(b"s", "a1", 1, 20.0), Offer(b"l", "a2", 1, 600.0)
    >>> t = Task.shell("true", estimate=60.0, task_id="t")
    >>> [(task.task_id, o.alloc_id) for task, o in plan_placement([t], [short, long], lambda t: True)]
    [('t', 'a2')]
    """
    free = {o.agent: o.free for o in offers}
    left = sum(free.values())
    plan: list[tuple[T, Offer]] = []
    if left == 0:
        return plan
    # the offers that fit a task and those with its time depend on its cores, the agent it names and its
    # estimate only, until a placement takes cores: found once per such kind of task in between (a wide
    # DAG queues thousands of tasks of a few kinds)
    kinds: dict[tuple[int, str | None, float], tuple[list[Offer], list[Offer]]] = {}
    passed: set[tuple[int, str | None, float, Hashable]] = set()  # kinds not started since the last placement
    widest = max(free.values())  # a task wider than every offer's free cores fits none (the common case)
    for task in tasks:
        if task.cores > widest:
            continue
        need = task.estimate or 0.0
        agent = getattr(task, "agent", None)
        shape = (task.cores, agent, need)
        if kind is not None:
            key = (*shape, kind(task))
            if key in passed:
                continue
            passed.add(key)  # taken out again below if it starts
        found = kinds.get(shape)
        if found is None:
            fits = [o for o in offers if free[o.agent] >= task.cores and admits(task, o.agent)]
            found = kinds[shape] = (fits, [o for o in fits if o.remaining >= need])
        fits, in_time = found
        if not fits:
            continue
        if in_time:
            offer = min(in_time, key=lambda o: (not requested_for(task, o), o.remaining, -free[o.agent]))
        elif agent is None and can_wait(task):
            continue
        else:
            offer = max(fits, key=lambda o: o.remaining)
            longer = max(math.nextafter(offer.remaining, math.inf), need / 2)
            if agent is None and waits_longer is not None and waits_longer(task, longer):
                continue
        free[offer.agent] -= task.cores
        left -= task.cores
        plan.append((task, offer))
        kinds.clear()
        passed.clear()
        widest = max(free.values())
        if left == 0:
            break
    return plan

"""The hold rule: keep a running allocation across the next stages, or release it.

When a stage ends, its allocation's cores can be given back (and the next wide stage must wait in the
queue for cores again) or kept for the stages that follow (they run on it at once, and every core the
narrower ones do not use is charged idle). Holding a width ``H`` through a stage of ``c`` cores and
expected ``d`` seconds costs ``alpha x H x d`` (:func:`keep_cost`), against ``alpha x c x d`` plus the
expected cost of getting new cores (:func:`elastic.strategies.timing.acquire_cost`, which prices the
wait to get the cores back). The planner (:mod:`elastic.strategies.planner`) weighs the two over all the
remaining stages at every stage boundary, with the waits this run and the runs before it just saw.

Limits that apply whatever the prices say:

- **Walltime.** An allocation is kept for *more* stages than it was requested for only while its
  remaining walltime covers ``cover`` (default :data:`COVER` = 1.3) times the expected work it is kept
  for (:func:`hold_through`): an allocation killed at its walltime mid-stage loses its running tasks.
  The stages it was requested for are covered by its request (:func:`merge.group_walltime`).
- **Too early.** An idle allocation that started so early that its stage cannot end before its walltime
  is released (:func:`expires_idle`): it would only idle until it is killed. One that started well before
  its stage needs it is released when idling until then costs more than asking again
  (:func:`release_early`): a request timed by a pessimistic wait (the scheduler's estimate holds every
  running job to its walltime) can start an hour early where the queue turned out empty.
- **Idle beside the stage's last tasks.** A batch job of a split request (a piece) whose tasks are done
  while the stage's last ones run on the others (or that started before its stage while another piece
  runs some other task, such as a re-run) is released once the cores it idled cost as much as getting
  them back for when they are needed would (:func:`idled_out`), even while other pieces of its request
  still wait in the queue: the stage's end is a guess that a straggler keeps pushing on, and this
  break-even rule of the ski-rental problem pays at most twice what knowing the end would have.
- **Width.** No allocation is kept wider than the widest stage left needs (the planner never plans
  it; a property test checks it).

Examples
--------
>>> keep_cost(28, 600.0, alpha=1.0)  # 28 cores held through 600 s
16800.0
>>> # 1000 s of walltime left, 100 s left of the current stage, then three stages of 300 s
>>> hold_through(1000.0, 100.0, ["b", "c", "d"], [300.0, 300.0, 300.0])
('b', 'c')
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from elastic.errors import ConfigError

__all__ = [
    "COVER",
    "expires_idle",
    "hold_through",
    "idled_out",
    "keep_cost",
    "release_early",
    "slowdown",
    "waves",
]

COVER = 1.3
"""Remaining walltime / expected work an allocation must have to be kept for more stages."""


def keep_cost(held: int, work: float, *, alpha: float = 1.0) -> float:
    """Return what running ``work`` seconds on an allocation of ``held`` cores charges: ``alpha H d``."""
    return alpha * held * max(work, 0.0)


def hold_through(
    remaining: float,
    current: float,
    stages: Sequence[str],
    works: Sequence[float],
    *,
    cover: float = COVER,
) -> tuple[str, ...]:
    """Return the leading ``stages`` an allocation can be kept for within its walltime.

    Parameters
    ----------
    remaining : float
        Seconds of walltime the allocation has left.
    current : float
        Expected seconds of work left on it before ``stages`` (its current stage's).
    stages : sequence of str
        The stages the planner would keep it for, in order.
    works : sequence of float
        Their expected seconds of work.
    cover : float, default COVER
        Walltime needed per second of expected work, >= 1.

    Returns
    -------
    tuple of str
        The longest prefix of ``stages`` with ``cover x (current + their work) <= remaining``.

    Raises
    ------
    ConfigError
        ``stages`` and ``works`` differ in length, or ``cover`` < 1.
    """
    if len(stages) != len(works):
        raise ConfigError(f"hold_through: {len(stages)} stages but {len(works)} works")
    if not cover >= 1.0:
        raise ConfigError(f"hold_through: cover must be >= 1, got {cover!r}")
    need = max(current, 0.0)
    kept: list[str] = []
    for name, work in zip(stages, works, strict=True):
        need += max(work, 0.0)
        if cover * need > remaining:
            break
        kept.append(name)
    return tuple(kept)


def expires_idle(walltime_end: float, need: float, work: float) -> bool:
    """Return whether an idle allocation's walltime ends before its stage can end on it.

    The stage can start at ``need`` and is expected to take ``work`` seconds; the allocation is killed at
    ``walltime_end``.

    Examples
    --------
    >>> expires_idle(1000.0, need=900.0, work=300.0), expires_idle(1000.0, need=600.0, work=300.0)
    (True, False)
    """
    return need + max(work, 0.0) > walltime_end


def release_early(held: int, idle_for: float, again: float, *, alpha: float = 1.0) -> bool:
    """Return whether an allocation that started before its stage needs it is better released.

    Keeping it idles ``held`` cores for the ``idle_for`` seconds until the stage can start
    (:func:`keep_cost`); releasing it costs ``again``, the expected cost of new cores requested to be
    there by then (:func:`elastic.strategies.timing.acquire_cost`, with the wait the queue now gives a
    job of that width). Ties keep it.

    Examples
    --------
    >>> release_early(56, 4320.0, again=0.0)  # an hour and more early, the cores come back at once
    True
    >>> release_early(56, 1400.0, again=56 * 2700.0)  # 23 min early, asking again costs 45 min of delay
    False
    """
    return again < keep_cost(held, idle_for, alpha=alpha)


def waves(tasks: int, task_cores: int, cores: int) -> float:
    """Return how many waves ``tasks`` tasks of ``task_cores`` take on ``cores``: inf where none fits.

    Examples
    --------
    >>> waves(56, 1, 28), waves(0, 4, 2), waves(3, 4, 2)
    (2, 0, inf)
    """
    if tasks <= 0:
        return 0
    side_by_side = cores // task_cores
    return math.inf if side_by_side < 1 else math.ceil(tasks / side_by_side)


def slowdown(tasks: int, task_cores: int, runtime: float, cores: int, leaving: int) -> float:
    """Return how much longer ``tasks`` tasks of ``task_cores`` take on ``leaving`` fewer of ``cores``.

    Each wave of tasks (:func:`waves`) takes ``runtime`` seconds; inf where the cores left cannot run one
    task.

    Examples
    --------
    >>> slowdown(56, 1, 60.0, cores=56, leaving=1), slowdown(56, 1, 60.0, cores=58, leaving=1)
    (60.0, 0.0)
    >>> slowdown(28, 4, 120.0, cores=8, leaving=4), slowdown(2, 4, 120.0, cores=4, leaving=1)
    (1680.0, inf)
    """
    after = waves(tasks, task_cores, cores - leaving)
    if after == 0 or math.isinf(after):
        return float(after)
    return runtime * (after - waves(tasks, task_cores, cores))


def idled_out(held: int, idled: float, again: float, *, alpha: float = 1.0) -> bool:
    """Return whether a piece idle while its stage's last tasks run elsewhere is better released now.

    The piece's ``held`` cores have idled ``idled`` seconds; getting them back for when they are needed
    (the stage that follows) costs ``again`` (:func:`elastic.strategies.timing.acquire_cost`). The
    remaining time of a stage whose last tasks outlive every estimate cannot be known, and every decision
    that predicts "soon" keeps the piece a little longer. Instead the piece is kept until what it idled
    (:func:`keep_cost`) reaches ``again``: the break-even rule of the ski-rental problem (Karlin,
    Manasse, Rudolph and Sleator, 1988), which costs at most twice what knowing the stage's end would.

    Examples
    --------
    >>> idled_out(14, 600.0, again=14 * 900.0), idled_out(14, 900.0, again=14 * 900.0)
    (False, True)
    """
    return keep_cost(held, idled, alpha=alpha) >= again

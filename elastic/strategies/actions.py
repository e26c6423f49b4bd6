"""What a strategy returns: actions, and the :class:`Decision` holding them.

The actions are :class:`Submit`, :class:`Cancel`, :class:`Serve` and :class:`Shorten`; :func:`merge`
combines several decisions into one.

Run control (:mod:`elastic.control.controller`) carries them out; a strategy never talks to the backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic.batch import DependencyKind
from elastic.errors import ConfigError

__all__ = ["Action", "Cancel", "Decision", "Serve", "Shorten", "Submit", "merge"]


@dataclass(frozen=True, slots=True)
class Submit:
    """Request an allocation.

    Parameters
    ----------
    stage : str
        Stage it is for (a label for metrics and release; any task may run on it), or ``"*"``.
    cores : int
        Width.
    walltime : float
        Requested walltime, seconds.
    after : tuple of str, default ()
        Stages whose current allocations it depends on (resolved by the driver to batch job ids).
    dependency : DependencyKind, default AFTERANY
        Kind of the dependencies in ``after``.
    begin : float or None, default None
        Do not start before this backend time.
    reason : str, default "initial"
        ``"initial"``, ``"walltime"`` (follow-up of a walltime), ``"lost"`` (replacement of an allocation
        that ended under us) or ``"resubmit"`` (ASA naive: cancelled for starting too early).
    predicted_wait : float or None, default None
        The queue wait the strategy planned with, if any (for hit/miss metrics).
    serves : tuple of str, default ()
        Stages the allocation is kept for (it is released once they are all done); ``()`` = ``stage``
        only. ``stage`` labels it in metrics and is resolved by later ``after`` references.
    pieces : int, default 1
        Batch jobs to split the request into, of near-equal width (:attr:`Allocation.piece_of` names the
        first): the pool runs the stages' tasks on whichever have started, an idle piece is released in
        a stage's tail (:func:`release_idle`), and a strategy can keep some pieces across a narrow stage
        and release the others. At most ``cores``.
    waves : int, default 1
        Waves of its stages' tasks the walltime was asked for
        (:func:`~elastic.strategies.pieces.waves_walltime`: two where the scheduler's estimate said
        that costs no wait). Kept on the allocation
        (:attr:`Allocation.waves`): a request of several jobs still waiting when its stages are ready is
        lowered to no fewer waves than it asked (the planner's ``_shortened``).

    Raises
    ------
    ConfigError
        ``pieces`` is not a whole number between 1 and ``cores``.
    """

    stage: str
    cores: int
    walltime: float
    after: tuple[str, ...] = ()
    dependency: DependencyKind = DependencyKind.AFTERANY
    begin: float | None = None
    reason: str = "initial"
    predicted_wait: float | None = None
    serves: tuple[str, ...] = ()
    pieces: int = 1
    waves: int = 1

    def __post_init__(self) -> None:
        if not (isinstance(self.waves, int) and self.waves >= 1):
            raise ConfigError(f"Submit.waves must be a whole number >= 1, got {self.waves!r}")
        if not (isinstance(self.pieces, int) and 1 <= self.pieces <= max(self.cores, 1)):
            raise ConfigError(f"Submit.pieces must be a whole number in 1..{self.cores}, got {self.pieces!r}")


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel (release) an allocation, pending or running."""

    alloc_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Serve:
    """Keep allocation ``alloc_id`` for ``stages`` (replacing the stages it was kept for).

    A planner holds a running allocation across the next stages this way (their tasks run on it, as any
    task may run on any allocation), or gives up a hold it planned; :func:`release_idle` releases the
    allocation once every stage in ``stages`` is done.
    """

    alloc_id: str
    stages: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Shorten:
    """Lower pending allocation ``alloc_id``'s walltime to ``walltime`` seconds (never raise it).

    A request asked with walltime to cover idling before its stage (in case it starts early) no longer
    needs that cover once its stage is ready and it still waits; with a shorter limit it fits backfill
    gaps a longer one does not, at the queue place it has (Slurm: ``scontrol update TimeLimit``). Run
    control does nothing where the backend cannot (:class:`~elastic.backends.base.ShortensWalltime`), or
    once the allocation started.
    """

    alloc_id: str
    walltime: float
    reason: str = ""


Action = Submit | Cancel | Serve | Shorten


@dataclass(frozen=True, slots=True)
class Decision:
    """What :meth:`Strategy.decide` returns: actions now, and when to be asked again at the latest."""

    actions: tuple[Action, ...] = ()
    wake_at: float | None = None


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def merge(*decisions: Decision) -> Decision:
    """Concatenate actions and take the earliest wake-up.

    One Submit per stage label at most, and one Cancel or Serve per allocation (first wins; a Serve of
    an allocation also cancelled is dropped).
    """
    actions: list[Action] = []
    labels: set[str] = set()
    touched: set[str] = set()
    wake: float | None = None
    for d in decisions:
        for a in d.actions:
            if isinstance(a, Submit):
                if a.stage in labels:
                    continue
                labels.add(a.stage)
            elif a.alloc_id in touched:
                continue
            else:
                touched.add(a.alloc_id)
            actions.append(a)
        wake = _min(wake, d.wake_at)
    return Decision(tuple(actions), wake)

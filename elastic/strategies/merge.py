"""The merge rule: consecutive stages that fit one allocation share it.

The pool lets any task run on any live allocation, so stages that follow one another can run on one
allocation as wide as the widest of them: the later stages then wait for no cores at all, at the price of
the cores the narrower ones leave idle. Which stages share is the planner's choice
(:mod:`elastic.strategies.planner`, priced by :mod:`elastic.strategies.timing` and
:mod:`elastic.strategies.hold`); this module turns its per-stage choices into allocations:

- :func:`groups`: a stage planned on the allocation before it joins that allocation's group; a stage
  planned on a new allocation starts a group as wide as the planner chose;
- :func:`group_walltime`: the walltime of a group's allocation covers *that group only*: the sum of its
  stages' own walltime requests (each the next value of its speculative sequence). Requesting the whole
  remaining workflow instead was measured to lengthen queue waits where the queue plans every job's
  walltime (conservative backfilling, the capacity mode), for cores the later stages may not want.

Examples
--------
>>> plan = [Choice("a", 28, new=True), Choice("b", 28, new=False), Choice("c", 1, new=True)]
>>> [(g.stages, g.cores, g.held) for g in groups(plan)]
[(('a', 'b'), 28, False), (('c',), 1, False)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elastic.errors import ConfigError
from elastic.strategies.knowledge import Knowledge

__all__ = ["Choice", "Group", "group_walltime", "groups"]


@dataclass(frozen=True, slots=True)
class Choice:
    """Where the planner runs one stage.

    Parameters
    ----------
    stage : str
        The stage.
    cores : int
        Width of the allocation it runs on.
    new : bool
        On a new allocation (True) or on the one it follows (False: the one before it, or the allocation
        held when planning started).
    """

    stage: str
    cores: int
    new: bool


@dataclass(frozen=True, slots=True)
class Group:
    """Consecutive stages that run on one allocation.

    Parameters
    ----------
    stages : tuple of str
        The stages, in order (at least one).
    cores : int
        Width of the allocation.
    held : bool
        Whether it is the allocation held when planning started (no new request).
    """

    stages: tuple[str, ...]
    cores: int
    held: bool

    def __post_init__(self) -> None:
        if not self.stages:
            raise ConfigError("Group.stages must name at least one stage")


def groups(choices: Sequence[Choice]) -> list[Group]:
    """Return the allocations a sequence of per-stage choices amounts to, in order.

    Leading choices with ``new=False`` form the held group (``held=True``); every ``new=True`` choice
    starts a group that the following ``new=False`` choices join.
    """
    out: list[Group] = []
    for c in choices:
        if c.new or not out:
            out.append(Group((c.stage,), c.cores, held=not c.new))
        else:
            last = out[-1]
            out[-1] = Group((*last.stages, c.stage), last.cores, last.held)
    return out


def group_walltime(knowledge: Knowledge, stages: Sequence[str], previous: Sequence[float] = ()) -> float:
    """Return the walltime to request for an allocation that serves ``stages`` (in order) and nothing more.

    The first stage's request is the next value of its speculative sequence after ``previous`` (requests
    that ran out); each later stage adds its own first request. The sum is capped at the partition's
    limit (``knowledge.max_walltime``); stages it then does not cover are dropped from the allocation by
    the hold rule before it runs out (:func:`elastic.strategies.hold.hold_through`).
    """
    if not stages:
        raise ConfigError("group_walltime: needs at least one stage")
    first, *rest = stages
    total = knowledge.walltime(first, previous) + sum(knowledge.walltime(s) for s in rest)
    return total if knowledge.max_walltime is None else min(total, knowledge.max_walltime)

"""The offer rule: which agent's free cores are offered to which framework, and when offers end.

:class:`OfferBook` keeps the outstanding offers and the frameworks' filters; it has no threads and no
network (the master calls it under its lock). The rule, in one place:

- **What is offered**: an agent's cores that run nothing, are promised to no task, and are not held by a
  launched task still waiting to start there; never on an agent that drains, whose allocation is stopping
  or ended. ``mem`` is offered in proportion (``mem_per_core`` MB per core).
- **One offer per agent** at a time, to one framework: while an offer is outstanding, cores that free up
  on its agent wait for the framework's answer (or the rescind).
- **To whom**: frameworks that are connected and not suppressed, whose filters allow it; the agent's own
  stage's frameworks first (an allocation requested for a stage is offered to that stage's frameworks
  before others), then the one offered to least recently, so frameworks take turns.
- **Filters** (``refuse_seconds``, as Mesos' allocator): a framework that declined an agent's ``n`` cores,
  or left ``n`` unused when it accepted, is not offered ``n`` or fewer cores of that agent again before
  the filter expires; more cores (a task ended) are offered at once. REVIVE removes the framework's filters.
- **Rescinds**: an offer ends when its agent is gone or drains (the allocation drains, ends, or nears its
  walltime), when the agent's free cores fall below the offer (the pool gave them to other tasks: offers
  are not reservations), when the framework disconnects, and after ``offer_timeout`` if one is set.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from elastic.pool.state import AgentView

__all__ = ["Offer", "OfferBook", "Wanting"]


@dataclass(frozen=True, slots=True)
class Offer:
    """One outstanding offer: ``cores`` free cores of one agent, offered to one framework.

    Attributes
    ----------
    offer_id, framework_id : str
        Its id, and the framework it was made to.
    agent : AgentView
        The agent (name, allocation, host, walltime left when offered).
    cores : int
        Cores offered.
    stage : str
        Stage of the agent's allocation.
    made : float
        When it was made (epoch seconds).
    """

    offer_id: str
    framework_id: str
    agent: AgentView
    cores: int
    stage: str
    made: float


@dataclass(frozen=True, slots=True)
class Wanting:
    """A framework that may get offers now: connected and not suppressed."""

    framework_id: str
    stage: str


class OfferBook:
    """Outstanding offers and filters (see the module docstring).

    Parameters
    ----------
    prefix : str
        Prefix of offer ids (unique to the run).
    offer_timeout : float or None, default None
        Seconds after which an unanswered offer is rescinded; None: never.
    """

    def __init__(self, prefix: str, *, offer_timeout: float | None = None) -> None:
        self.prefix = prefix
        self.offer_timeout = offer_timeout
        self.outstanding: dict[str, Offer] = {}
        self._by_agent: dict[str, str] = {}  # agent name -> its outstanding offer
        self._filters: dict[tuple[str, str], tuple[int, float]] = {}  # (framework, agent) -> (cores, until)
        self._last_offered: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._turn = itertools.count(1)

    def make(
        self,
        now: float,
        agents: Sequence[AgentView],
        wanting: Sequence[Wanting],
        held: Mapping[str, int],
        stages: Mapping[str, str],
    ) -> list[Offer]:
        """Make the offers due now, one per agent with free cores and no outstanding offer.

        Parameters
        ----------
        now : float
            Epoch seconds.
        agents : sequence of AgentView
            The pool's agents now.
        wanting : sequence of Wanting
            Frameworks that may get offers.
        held : mapping of str to int
            Cores of launched tasks not started yet, by agent name.
        stages : mapping of str to str
            Stage of each allocation, by allocation id.
        """
        made: list[Offer] = []
        if not wanting:
            return made
        for agent in agents:
            free = self.free(agent, held)
            if free <= 0 or agent.name in self._by_agent:
                continue
            stage = stages.get(agent.alloc_id, "*")
            takers = [w for w in wanting if not self._filtered(w.framework_id, agent.name, free, now)]
            if not takers:
                continue
            taker = min(takers, key=lambda w: (w.stage != stage, self._last_offered.get(w.framework_id, 0)))
            offer = Offer(f"{self.prefix}-O{next(self._ids)}", taker.framework_id, agent, free, stage, now)
            self.outstanding[offer.offer_id] = offer
            self._by_agent[agent.name] = offer.offer_id
            self._last_offered[taker.framework_id] = next(self._turn)
            made.append(offer)
        return made

    @staticmethod
    def free(agent: AgentView, held: Mapping[str, int]) -> int:
        """Cores of ``agent`` that may be offered now (0 when it drains)."""
        return 0 if agent.draining else agent.free - held.get(agent.name, 0)

    def invalid(self, now: float, agents: Sequence[AgentView], held: Mapping[str, int]) -> list[Offer]:
        """Remove and return the offers to rescind now (see the module docstring)."""
        live = {a.name: a for a in agents}
        out = []
        for offer in list(self.outstanding.values()):
            agent = live.get(offer.agent.name)
            expired = self.offer_timeout is not None and now - offer.made >= self.offer_timeout
            if agent is None or self.free(agent, held) < offer.cores or expired:
                out.append(self._remove(offer))
        return out

    def take(self, framework_id: str, offer_ids: Iterable[str]) -> tuple[list[Offer], list[str]]:
        """Remove the framework's offers ``offer_ids``; return ``(the valid ones, why each other is not)``.

        Every offer named is used up, valid or not (as in Mesos: an offer is answered once).
        """
        valid, errors = [], []
        for offer_id in offer_ids:
            offer = self.outstanding.get(offer_id)
            if offer is None:
                errors.append(f"Offer {offer_id} is no longer valid")
            elif offer.framework_id != framework_id:
                errors.append(f"Offer {offer_id} was made to another framework")
            else:
                valid.append(self._remove(offer))
        if len({o.agent.name for o in valid}) > 1:
            errors.append(f"Offers {', '.join(o.offer_id for o in valid)} are on different agents")
        return valid, errors

    def refuse(self, framework_id: str, agent: str, cores: int, seconds: float, now: float) -> None:
        """Do not offer ``cores`` or fewer of ``agent``'s cores to the framework for ``seconds``."""
        if cores > 0 and seconds > 0:
            self._filters[(framework_id, agent)] = (cores, now + seconds)

    def revive(self, framework_id: str) -> None:
        """Remove every filter of the framework."""
        for key in [k for k in self._filters if k[0] == framework_id]:
            del self._filters[key]

    def drop(self, framework_id: str) -> list[Offer]:
        """Remove and return the framework's outstanding offers (it disconnected or left)."""
        return [self._remove(o) for o in list(self.outstanding.values()) if o.framework_id == framework_id]

    def drop_agent(self, agent: str) -> list[Offer]:
        """Remove and return the outstanding offers of ``agent`` (it is leaving)."""
        return [self._remove(o) for o in list(self.outstanding.values()) if o.agent.name == agent]

    def next_expiry(self, now: float) -> float | None:
        """When the next filter or offer timeout expires (epoch seconds), if any."""
        times = [until for _, until in self._filters.values() if until > now]
        if self.offer_timeout is not None:
            times += [o.made + self.offer_timeout for o in self.outstanding.values()]
        return min(times, default=None)

    def _filtered(self, framework_id: str, agent: str, cores: int, now: float) -> bool:
        found = self._filters.get((framework_id, agent))
        if found is None:
            return False
        refused, until = found
        if now >= until:
            del self._filters[(framework_id, agent)]
            return False
        return cores <= refused

    def _remove(self, offer: Offer) -> Offer:
        del self.outstanding[offer.offer_id]
        if self._by_agent.get(offer.agent.name) == offer.offer_id:
            del self._by_agent[offer.agent.name]
        return offer

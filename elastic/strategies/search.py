"""The planner's search: the cheapest way to run a chain of stages, each on a held or a new allocation.

:func:`plan` prices each choice with the timing rule (:mod:`~elastic.strategies.timing`) and the hold
rule's charge (:mod:`~elastic.strategies.hold`), and keeps per width held the partial plans no other
beats on both core-seconds and delay. :class:`~elastic.strategies.planner.Planner` decides what to plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter, le

import numpy as np

from elastic.strategies import hold, timing
from elastic.strategies.merge import Choice

__all__ = ["BEAM", "WAVES", "StagePlan", "Waits", "plan"]


@dataclass(frozen=True, slots=True)
class StagePlan:
    """A stage as the planner sees it: its width and its expected seconds of work left.

    ``beside``: cores of the stages before it in the plan that may run at the same time (on a DAG, its
    siblings and their branches: stages it does not depend on). It is kept on the allocation before it only
    if that one is wide enough for it and them side by side; otherwise it would wait behind a sibling it
    does not depend on (issue 28, item 4), and it gets an allocation of its own.
    """

    name: str
    cores: int
    work: float
    beside: int = 0


BEAM = 8
"""Partial plans :func:`plan` keeps per stage and width held (after dropping dominated ones)."""

WAVES = 2
"""Most waves a stage is planned to run in on an allocation it follows that is narrower than the stage
(half the width: a wide allocation cut to the pieces kept across a narrow stage)."""

Waits = Callable[[int, bool], np.ndarray]
"""``waits(cores, follow_up)``: a new allocation's wait, quantiles at :data:`timing.PROBS`."""


_Trail = tuple["_Trail | None", tuple[str, int, bool]] | None
"""A plan's choices, last first: (the trail before it, the last choice); None: no choice yet.

A choice is kept as the fields of a :class:`Choice` (stage, cores, new), made into one only for the plan
returned: a frozen dataclass per step cost the 40-stage chain of ``benchmarks/bench_planner_cost.py``
about 3 % of its run."""


@dataclass(slots=True)
class _Path:
    """A partial plan: core-seconds charged so far, the delay it carries (quantiles), its choices.

    The delay is Python floats (:func:`timing.acquire_values`: arrays of 20 values cost more to make and
    compare than the search's arithmetic on them). Its choices are a trail shared with the plans it grew
    from (copying them at each stage made a search over n stages cost n squared). ``order`` ranks it
    among the plans of its stage by its choices, compared from the first (kept before new, then
    narrower): its parent's ``rank`` among the plans of the stage before, then its own choice. ``rank`` is
    set once the plans of its stage are kept.
    """

    charged: float
    delay: timing.Values
    choices: _Trail
    opened: bool = False  # it has a new allocation (requested by this plan: not started yet)
    held: bool = False  # it still runs on the allocation held when planning started (stages may run in waves)
    mean: float = 0.0  # the delay's mean as numpy computes it (computed once: the search compares it often)
    key: int = 0  # the delay's number among the distinct delays of the search (the key of the steps priced)
    order: tuple[int, bool, int] | tuple[()] = ()
    rank: int = 0
    # what plans are ranked by, with ``order``: charged plus the priced delay, rounded (to 1e-6: sums in
    # another order tie); made with the plan (a key function per plan sorted cost more)
    cost: float = 0.0


def _choices(trail: _Trail) -> tuple[Choice, ...]:
    out: list[Choice] = []
    while trail is not None:
        trail, (stage, cores, new) = trail
        out.append(Choice(stage, cores, new))
    return tuple(reversed(out))


def plan(
    stages: Sequence[StagePlan],
    *,
    held: int,
    lead: float,
    waits: Waits,
    prices: timing.Prices,
    model: str | None,
    follow_up: bool = True,
    shrink: Sequence[int] = (),
) -> tuple[float, tuple[Choice, ...]]:
    """Return the cheapest way to run ``stages`` in order, and its expected cost.

    A plan's cost is the core-seconds it charges (work, and cores that idle before their stage) plus
    ``beta`` times its expected delay. The delay is carried along the plan as a distribution
    (:func:`timing.acquire_delayed`): a new allocation requested at once beside another one still
    waiting delays the run by the longer of the two waits, one requested later or chained behind it by
    their sum. Pricing each allocation's wait on its own (the sum, always) made a short narrow first
    stage on its own allocation look as dear as both waits together, so the planner merged it into the
    wide allocation after it and paid the wide cores idle while it ran.

    The search goes stage by stage, keeping per width held the partial plans no other one beats on both
    core-seconds charged and delay (every quantile), at most :data:`BEAM` of them.

    Parameters
    ----------
    stages : sequence of StagePlan
        The stages, in the order they run.
    held : int
        Cores of the allocation held when the first stage starts (0: none).
    lead : float
        Seconds from now until the first stage starts.
    waits : callable
        ``waits(cores, follow_up)``: quantiles of a new allocation's wait.
    prices : timing.Prices
        Core-second and makespan prices.
    model : str or None
        Priority model of the queue (:func:`timing.keeps_place`).
    follow_up : bool, default True
        Whether a first new allocation (with nothing held) is a follow-up wait. A later one is, unless
        it is requested at once beside the plan's earlier new ones while nothing of the run has started
        (``follow_up`` False): it then waits in the queue they wait in (the controller labels waits so).
    shrink : sequence of int, default ()
        Narrower widths the held allocation can be cut to before the first stage (it is made of batch
        jobs, :attr:`~elastic.strategies.base.Submit.pieces`, some of which can be released). A stage
        wider than the held allocation, cut or not, runs on it in waves (at most :data:`WAVES`).

    Returns
    -------
    cost : float
        Expected core-seconds charged plus priced delay.
    choices : tuple of Choice
        Per stage: the width it runs on and whether that allocation is new. A stage runs on the
        allocation before it only if that one is no wider than the widest stage left and as wide as the
        stage, or, on the held allocation, at least half as wide: it then runs in waves (:data:`WAVES`),
        each adding the stage's work to the delay. A new allocation is as wide as one of the stages
        left, at least the stage's own width, and the narrowest of those that can be kept for as many
        stages after it (:func:`_useful_widths`). Ties go to keeping (no wait), then to the narrower
        allocation, from the first stage on.
    """
    n = len(stages)
    starts: list[float] = []
    done = 0.0
    for s in stages:
        starts.append(lead + done)
        done += s.work
    widest_left = [0] * n
    widths_left: list[tuple[int, ...]] = [()] * n  # the distinct widths from each stage on, ascending
    for m in range(n - 1, -1, -1):
        after = widths_left[m + 1] if m + 1 < n else ()
        widest_left[m] = max(stages[m].cores, widest_left[m + 1] if m + 1 < n else 0)
        widths_left[m] = after if stages[m].cores in after else tuple(sorted({*after, stages[m].cores}))
    useful = _useful_widths(stages, widths_left, widest_left)
    quantiles: dict[tuple[int, bool], tuple[np.ndarray, float, float | None]] = {}
    # per step priced: the idle cost, the delay after, its mean and key (shared by every plan taking it)
    steps: dict[tuple[int, bool, int, int], tuple[float, timing.Values, float, int]] = {}
    now_or_later: dict[tuple[int, int, int], bool] = {}
    keys: dict[timing.Values, int] = {}  # per distinct delay, its number (a tuple's hash is not kept)

    def quantile(cores: int, fu: bool) -> tuple[np.ndarray, float, float | None]:
        if (cores, fu) not in quantiles:
            q = np.sort(np.asarray(waits(cores, fu), dtype=float))
            quantiles[cores, fu] = q, timing.lead_time(q, cores, prices), timing.single_wait(q, model)
        return quantiles[cores, fu]

    def path(
        charged: float,
        delay: timing.Values,
        choices: _Trail,
        opened: bool,
        held: bool,
        order: tuple[int, bool, int] | tuple[()],
    ) -> _Path:
        mean = timing.mean_of(delay)
        return _Path(
            charged,
            delay,
            choices,
            opened,
            held,
            mean,
            keys.setdefault(delay, len(keys)),
            order,
            0,
            round(charged + beta * mean, 6),
        )

    def follows(cores: int, m: int, p: _Path) -> bool:
        # whether a new allocation requested beside plan p's first ones (not yet started) is asked later
        # (a follow-up wait) rather than now, in the queue they wait in
        now_key = (cores, m, p.key)
        if now_key not in now_or_later:
            first, first_lead, _ = quantile(cores, False)
            now_or_later[now_key] = not timing.requested_now(
                first,
                cores,
                prices,
                need=starts[m],
                delay=p.delay,
                model=model,
                lead=first_lead,
                mean=p.mean,
            )
        return now_or_later[now_key]

    def acquire(cores: int, fu: bool, m: int, p: _Path) -> tuple[float, timing.Values, float, int]:
        # the step priced once per key (the search looks the key up first: a call per step cost more)
        q, q_lead, single = quantile(cores, fu)
        idle, delay = timing.acquire_values(
            q,
            cores,
            prices,
            need=starts[m],
            delay=p.delay,
            model=model,
            lead=q_lead,
            mean=p.mean,
            single=single,
        )
        step = idle, delay, timing.mean_of(delay), keys.setdefault(delay, len(keys))
        steps[cores, fu, m, p.key] = step
        return step

    beta = prices.beta
    ranked = attrgetter("cost", "order")
    nothing = (0.0,) * len(timing.PROBS)
    frontier = {
        w: [path(0.0, nothing, None, False, True, ())] for w in {held, *(w for w in shrink if 0 < w < held)}
    }
    for m, s in enumerate(stages):
        grown: dict[int, list[_Path]] = {}
        groups: dict[tuple[int, int], list[_Path]] = {}  # new plans, per width and delay after (_admitted)
        widths = useful[m]
        new_choices = [(c, (s.name, c, True)) for c in widths]  # shared by every plan taking them
        for h, paths in frontier.items():
            kept = (s.name, h, False)
            for p in paths:
                waves = math.ceil(s.cores / h) if h > 0 else 0
                if (
                    0 < waves <= (WAVES if p.held else 1)
                    and h <= widest_left[m]
                    and (s.beside == 0 or h >= s.cores + s.beside)
                ):
                    charged = p.charged + hold.keep_cost(h, waves * s.work)
                    order = (p.rank, False, h)
                    if waves == 1:
                        grown.setdefault(h, []).append(
                            _Path(
                                charged,
                                p.delay,
                                (p.choices, kept),
                                p.opened,
                                p.held,
                                p.mean,
                                p.key,
                                order,
                                0,
                                round(charged + beta * p.mean, 6),
                            )
                        )
                    else:
                        extra = (waves - 1) * s.work
                        grown.setdefault(h, []).append(
                            path(
                                charged,
                                tuple([x + extra for x in p.delay]),
                                (p.choices, kept),
                                p.opened,
                                p.held,
                                order,
                            )
                        )
                # a follow-up wait, unless nothing of the run has started when it is requested: requested
                # now beside this plan's first allocations (not yet started), it waits in their queue
                fu = follow_up or (h > 0 and not p.opened)
                ask = not fu and h > 0
                pkey = p.key
                for c, new in new_choices:
                    f = follows(c, m, p) if ask else fu
                    step = steps.get((c, f, m, pkey))
                    idle, delay, mean, key = acquire(c, f, m, p) if step is None else step
                    charged = p.charged + c * s.work + idle
                    cost = round(charged + beta * mean, 6)
                    order = (p.rank, True, c)
                    rivals = groups.get((c, key))
                    if rivals is None:
                        groups[c, key] = rivals = []
                    elif not _admitted(rivals, cost, order, charged):
                        continue  # not made: _pareto would drop it
                    made = _Path(charged, delay, (p.choices, new), True, False, mean, key, order, 0, cost)
                    rivals.append(made)
        for (c, _), rivals in groups.items():
            grown.setdefault(c, []).extend(rivals)
        frontier = {h: _pareto(sorted(paths, key=ranked)) for h, paths in grown.items()}
        # rank the kept plans by their choices (equal choices, equal rank) for the next stage's ties
        kept_paths = sorted((p for paths in frontier.values() for p in paths), key=attrgetter("order"))
        rank, previous = -1, None
        for p in kept_paths:
            if p.order != previous:
                rank, previous = rank + 1, p.order
            p.rank = rank
    best = min((p for paths in frontier.values() for p in paths), key=ranked)
    return best.charged + prices.beta * best.mean, _choices(best.choices)


def _useful_widths(
    stages: Sequence[StagePlan], widths_left: Sequence[tuple[int, ...]], widest_left: Sequence[int]
) -> list[list[int]]:
    """Return per stage the widths a new allocation for it is searched at: the narrowest for each reach.

    A new allocation for stage ``m`` can be kept for the stages after it while each fits on it (as wide as
    the stage, with its siblings beside it, :attr:`StagePlan.beside`) and it is no wider than the widest
    stage left. Of the widths that reach as far, the narrowest charges less for every stage it runs. A
    wider one could still price lower where it waits longer and so idles less before its stage; but that
    is a saving of asking late, which the narrower one asked later makes too, not of its width: the wider
    ones are not searched. Where every width waits as long the optimum is the same as over every width
    (``tests/strategies/test_search_widths.py``). On the 40-stage chain of
    ``benchmarks/bench_planner_cost.py`` (widths 1-28) a new allocation had about 20 widths at each stage,
    of which 3 or 4 reach further than a narrower one: the run's CPU went from 2.4 s to 1.4 s.
    """
    n = len(stages)
    every = widths_left[0] if n else ()
    # per width: the first stage after the one being read that an allocation that wide cannot be kept for
    # (read from the last stage back: each stage's test is made once per width, not once per stage before it)
    reach = dict.fromkeys(every, n)
    out: list[list[int]] = [[] for _ in range(n)]
    for m in range(n - 1, -1, -1):
        s = stages[m]
        reaches: set[int] = set()
        for c in widths_left[m]:  # ascending
            if c >= s.cores and reach[c] not in reaches:
                reaches.add(reach[c])
                out[m].append(c)
        fits = s.cores + s.beside
        for c in every:
            if not fits <= c <= widest_left[m]:
                reach[c] = m
    return out


def _admitted(rivals: list[_Path], cost: float, order: tuple[int, bool, int], charged: float) -> bool:
    """Whether a new plan can be kept beside ``rivals``, the new plans of its width and delay made so far.

    ``rivals`` all have one cost, ranked first among those made; they lose those the plan beats (gone
    from the list). Plans of one width and one delay after differ only by their charge, and
    :func:`_pareto` keeps none for which a plan ranked before it charges no more: it drops it when it
    comes to it, whether that plan was kept or dropped for another that beats both. So such a plan is
    not made at all. The cost ranks them as the charge does (rounded, it can tie where the charges
    differ): a plan of lower cost charges less; of equal cost, the order decides (equal orders: the first
    made ranks first). Why: 62 % of the new plans of the 40-stage chain of
    ``benchmarks/bench_planner_cost.py`` were beaten so, and making, sorting and dropping them were a
    sixth of its run.
    """
    first = rivals[0].cost
    if cost > first:
        return False
    if cost < first:
        rivals.clear()
        return True
    if any(r.order <= order and r.charged <= charged for r in rivals):
        return False
    rivals[:] = [r for r in rivals if not (order < r.order and charged <= r.charged)]
    return True


def _pareto(paths: Sequence[_Path]) -> list[_Path]:
    """Keep, in order, the paths no earlier kept one beats on both charge and delay; at most :data:`BEAM`."""
    kept: list[_Path] = []
    for p in paths:
        # a delay no greater at every quantile has a mean no greater (float sums are monotone): the
        # cheap tests go first (a plain loop: a generator's frame per path cost more than the tests)
        for k in kept:
            if (
                k.charged <= p.charged
                and k.mean <= p.mean
                and k.opened == p.opened
                and k.held == p.held
                and all(map(le, k.delay, p.delay))
            ):
                break
        else:
            kept.append(p)
            if len(kept) == BEAM:
                break
    return kept

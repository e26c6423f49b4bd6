"""The planner's rules on the run view: lowering walltimes, lead caps, pieces kept, chains of a DAG.

Functions of :class:`~elastic.strategies.planner.Planner`'s decision that read the view and no state of
the planner's own.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from elastic.allocations import Allocation, AllocationState
from elastic.strategies import merge
from elastic.strategies.base import Releasing, RunView, Shorten, StageView
from elastic.strategies.rules import SHORTEN_SLACK
from elastic.strategies.search import WAVES

__all__ = [
    "HOLD_HORIZON",
    "HORIZON",
    "SHORTEN_SLACK",
    "kept_short",
    "plan_segments",
    "stages_after",
    "window",
    "window_after",
]


HORIZON = 64
"""Stages not complete each search of a decision plans at most, in plan order (``Planner(horizon=)``).

Beyond them nothing would be requested yet: a stage 64 stages ahead is needed after 64 stages' work and
waits, far past any lead the timing rule asks. Planning the whole remaining workflow made each decision
cost as much as the stages left, and a run of ``n`` stages cost ``n`` squared (a 1,000-stage chain: 208 s
of CPU; 5,000 stages: hours). A workflow with at most 64 stages left is planned whole, as before: every
workflow published (Montage, BLAST, Statistics: under 20 stages) and the liveness scenarios (up to 50)
decide exactly as without a horizon. Chosen above the liveness scenarios' 50 stages (a horizon of 32
ran a 5,000-stage chain in 55 s rather than about 70, but changed those scenarios' decisions); checked on
the 100-stage random DAG of ``benchmarks/bench_planner_cost.py --horizon-check`` (busy synthetic queue,
64 cores, 3 runs: makespan and core-hours no worse, all complete; on a 200-stage DAG 2-3 % worse) and its
5,000-stage chain (quiet queue): ``docs/results/performance.md``. Not checked yet on real traces' queues.
"""

HOLD_HORIZON = 16
"""Stages after a running allocation its hold is planned over at most, once more than :data:`HORIZON`
stages are left (``Planner(hold_horizon=)``); within :data:`HORIZON` every stage after it, as before.

A hold keeps an allocation for the stages that follow it while its walltime lasts; a hold is searched
for each running allocation at each decision, and on a 5,000-stage random DAG on a busy 64-core queue
those searches over 64 stages each were most of a run (its first simulated day: 30 s of CPU; 16:
14 s; the whole run 83 s). Workflows of at most 64 stages (the published suite, the liveness scenarios)
decide as before. Chosen on that DAG and checked on ``benchmarks/bench_planner_cost.py --hold-check``'s
100- and 200-stage DAGs (the same makespans and core-hours) and 200-stage chain (busy synthetic queue):
``docs/results/performance.md``.
"""


def _shortened(view: RunView) -> list[Shorten]:
    """Step 3: lower the walltime of requests that still wait once their first stage is ready.

    A request asks for walltime to idle until its stage's need as well (:meth:`Planner._requests`), in
    case it starts before the need. Once the stage is ready that cover can no longer be used, and a
    shorter request fits gaps in the schedule a longer one does not: HPC2N capacity, Statistics 28, run
    5: the request for ``period_stats`` asked 2.5 h, still waited when the stage was ready at 11.3 h and
    started at 30.7 h, where Per-Stage's request of 1.25 h, asked then, started at once. Each is lowered
    to what its stages need (:func:`merge.group_walltime`), times the waves it asked
    (:attr:`~elastic.allocations.Allocation.waves`: a piece asked two where the scheduler's estimate
    said that cost no wait). The waves are not chosen again here: asked again at a later decision, on
    the queue as it then stood, they were lowered to one whenever two would have waited longer, and the
    piece ran out with a task on it (Seismology 28, busy synthetic queue, run 15: two 14-core pieces
    asked 40,328 s, one was lowered to 20,164 s while it waited and lost a straggler at 9.8 h; the run
    took 16.7 h against both split baselines' 11.1 h, which keep what they asked). Walltime follow-ups
    ask no cover and are left.
    """
    out: list[Shorten] = []
    ran_out: dict[str, tuple[float, ...]] | None = None  # read once, where something may be lowered
    for a in view.live_allocations:  # a pending one is live (a run's ended ones are thousands)
        if not a.pending or a.cancelled or a.reason != "initial":
            continue
        labels = sorted(
            (x for x in a.labels if view.has_stage(x) and not view.stage(x).complete),
            key=lambda x: view.stage(x).index,
        )
        if not labels or not view.stage(labels[0]).ready:
            continue
        if ran_out is None:
            ran_out = _ran_out(view)
        needed = merge.group_walltime(view.knowledge, labels, ran_out.get(labels[0], ())) * a.waves
        if a.walltime > needed + SHORTEN_SLACK:
            out.append(Shorten(a.alloc_id, math.ceil(needed), f"{labels[0]} is ready: no idling to cover"))
    return out


def _ran_out(view: RunView) -> dict[str, tuple[float, ...]]:
    """Per stage, the walltimes of this run's allocations for it that ran out (TIMEOUT), in request order.

    They are the speculative sequence's ``previous``
    (:meth:`~elastic.strategies.knowledge.Knowledge.walltime`): a stage whose task was lost to its
    allocation's walltime is asked for more the next time, never the same again.

    Found by the published suite (SRASearch at 56 cores, synthetic queue, run 3): the ``merge`` task ran
    over 5 times its hint, and each new request for it asked the same 123-166 s, losing it 4 times (the
    run failed with the documented lost-task error) where walltime follow-ups and the liveness rule
    already grew theirs.
    """
    out: dict[str, list[float]] = {}
    for a in view.allocations:
        if a.state is AllocationState.TIMEOUT and a.stage is not None:
            out.setdefault(a.stage, []).append(a.walltime)
    return {stage: tuple(walltimes) for stage, walltimes in out.items()}


def _lead_cap(view: RunView, label: str) -> float:
    """Return the wait of an allocation for ``label`` that started too early and ended unused (lead cap).

    After such an allocation, the stage is requested at most that wait ahead of its need, as the paper's
    naive ASA re-plans with the wait it just saw: a wait distribution with a long tail cannot make the
    planner request, idle and release over and over. Infinite where there is none. Read per stage asked,
    from the allocations kept for it: every allocation of the run at each decision was a quarter of a
    5,000-stage DAG's run.
    """
    if not _known(view, label):
        return math.inf
    s = view.stage(label)
    cap = math.inf
    for a in view.allocations_serving(label):
        if not a.ended or a.start_time is None or a.submit_time is None or a.end_time is None:
            continue
        if a.labels[0] != label:  # an allocation counts for the first stage it is kept for
            continue
        if s.start_time is None or s.start_time > a.end_time:
            cap = min(cap, a.start_time - a.submit_time)
    return cap


def _as_planned(view: RunView, kept: dict[str, tuple[str, ...]]) -> RunView:
    """``view`` with each allocation kept for the stages the holds just chose (``kept``; absent: cancelled).

    Release then goes by what the allocations are kept for from now on: a batch job split from a request
    that was just kept for the next stages is needed for them (:func:`release_idle`).
    """
    changed: dict[str, Allocation] = {}
    for a in view.live_allocations:  # an ended one is kept as it is (all: 55 M reads on 5,000 stages)
        if kept.get(a.alloc_id) == a.labels:
            continue
        if a.alloc_id in kept:
            changed[a.alloc_id] = dataclasses.replace(a, serves=kept[a.alloc_id])
        else:
            changed[a.alloc_id] = dataclasses.replace(a, cancelled=True)
    return view.replacing(changed)  # the same view where nothing changed


def _done_dropped(view: RunView, labels: tuple[str, ...], horizon: int | None) -> tuple[str, ...]:
    """Return ``labels`` (an allocation's) without its complete stages where they are more than ``horizon``.

    An allocation held across a long chain is kept for every stage it ran, and every rule reads each label
    of each allocation at each decision: the run cost the square of its stages. The latest stage is kept
    if all are complete (:func:`~elastic.strategies.base.release_idle` then releases it as before). Never
    on a workflow of at most ``horizon`` stages (None: never), whose decisions stay as they were.
    """
    if horizon is None or len(labels) <= horizon:
        return labels
    return tuple(x for x in labels if not (view.has_stage(x) and view.stage(x).complete)) or labels[-1:]


def _subset_widths(widths: Sequence[int]) -> tuple[int, ...]:
    """Return the widths some of the batch jobs ``widths`` make together, narrower than all of them.

    Examples
    --------
    >>> _subset_widths([28, 28]), _subset_widths([56]), _subset_widths([10, 10, 5])
    ((28,), (), (5, 10, 15, 20))
    """
    sums = {0}
    for w in widths:
        sums |= {x + w for x in sums}
    return tuple(sorted(x for x in sums if 0 < x < sum(widths)))


def _pieces_for(live: Sequence[Allocation], width: int, busy: Callable[[str], int]) -> list[Allocation]:
    """Return running batch jobs of one request that make ``width`` cores together (all: none does).

    Jobs with more busy cores come first (the others are released as their tasks end,
    :func:`~elastic.strategies.base.release_idle`, an idle one at once), then those with more walltime
    left (they are kept for the stages to come): the first jobs in that order whose widths sum to
    ``width`` (a subset-sum over cores, linear in the jobs: a request split into 1-core jobs has as many
    as it has cores).

    Examples
    --------
    >>> from elastic.allocations import Allocation
    >>> jobs = [Allocation(f"a{i}", cores=c, walltime=3600.0) for i, c in enumerate((20, 8, 20, 8))]
    >>> [b.alloc_id for b in _pieces_for(jobs, 28, {"a2": 5}.get)]  # a2 is busy: kept, with an 8
    ['a2', 'a1']
    """
    order = sorted(live, key=lambda b: (-(busy(b.alloc_id) or 0), -(b.walltime_end or math.inf)))
    reach: dict[int, tuple[Allocation, ...]] = {0: ()}
    for b in order:
        for total, jobs in list(reach.items()):
            reach.setdefault(total + b.cores, (*jobs, b))
    return list(reach.get(width, live))


def _released(ids: Iterable[str], at: float) -> Releasing:
    """Return ``ids`` released at ``at`` (to the minute), as an :class:`~elastic.strategies.base.Estimate`."""
    return tuple(sorted((x, _minute(at)) for x in ids))


def _minute(t: float) -> float:
    """``t`` to the minute: release times vary by seconds from one decision to the next (estimates cache)."""
    return round(t / 60.0) * 60.0


def _known(view: RunView, label: str) -> bool:
    return view.has_stage(label)


def _follows(view: RunView, s: StageView, chain: Sequence[StageView]) -> bool:
    """Whether ``s`` can be planned on ``chain``: it depends on a stage of it and on nothing outside it.

    The search (:func:`plan`) runs the stages it is given one after another. A stage joins a chain if it
    depends on some stage of the chain and every other stage it depends on is in the chain or done: on a
    chain every stage follows the one before it, and on a DAG the children of one stage join it side by
    side as siblings (CyberShake: ``ZipSeis`` and ``PeakValCalcOkaya`` both after ``SeismogramSynthesis``),
    so an allocation can be kept or merged across both (issue 28, item 4); the planner times a new
    allocation of a sibling by its own predecessors' end, never behind the sibling before it in the chain
    (:meth:`~elastic.strategies.planner.Planner._requests`). A stage that depends on a stage of another
    chain not done is planned from its own need instead. A stage that declares no dependency (a live
    plan's stage announced before its tasks) follows the stage before it, as before. The rule has no
    parameter: it was found on CyberShake's timelines (synthetic queue, run 0) and checked on the
    published shapes x two queues (the reduced grid in ``docs/results/strategies.md``).
    """
    return not chain or _follows_names(view, s, {c.name for c in chain})


def _follows_names(view: RunView, s: StageView, names: AbstractSet[str]) -> bool:
    """:func:`_follows` on a chain given by its stages' names, not empty (kept by callers that grow it)."""
    if not s.depends_on:
        return True
    if not any(d in names for d in s.depends_on):
        return False
    return all(d in names or (_known(view, d) and view.stage(d).complete) for d in s.depends_on)


def stages_after(
    view: RunView,
    current: StageView,
    others: AbstractSet[str],
    stages: Sequence[StageView] | None = None,
) -> list[StageView]:
    """Return the stages after ``current`` a hold of its allocation is planned for (step 1), in plan order.

    Not complete, not in ``others`` (kept for another allocation), and on a branch that starts from
    ``current``. ``stages``: the stages after ``current`` to choose from, in plan order (default every
    stage after it; the planner passes those within its horizon, :func:`window_after`).
    """
    after: list[StageView] = []
    here = {current.name}
    for s in view.stages[current.index + 1 :] if stages is None else stages:
        # kept for another allocation, or on a branch that does not start from this stage: planned
        # on its own (and so is every stage after it on that branch, which then waits for a stage
        # neither done nor here); a later sibling of a stage here still joins (:func:`_follows`)
        if s.complete or s.name in others or not _follows_names(view, s, here):
            continue
        after.append(s)
        here.add(s.name)
    return after


def kept_short(view: RunView, kept: Mapping[str, tuple[str, ...]]) -> dict[str, int]:
    """Return the stages kept on too few cores to run in two waves, with the cores kept for them.

    ``kept``: per allocation not ended, the stages it is kept for (step 1's holds). A stage not complete
    (nor ready with every task placed) kept on less than ``1 / WAVES`` of the cores its tasks not done
    need (:meth:`RunView.width_left`) is short: a hold plans at most :data:`~elastic.strategies.search.WAVES`
    waves, so that width is what a request's pieces left; step 2 plans the rest for it.

    Found on 1000Genome 112 (CTC SP2 capacity, in jobs of one task, run 14): 14 of
    ``individuals_merge``'s 16 one-core jobs started 1.7 h early, idled out beside the two that ran
    ``individuals``' tasks, and were released to be asked again for their need; the stage, kept for
    on the two left, was never planned again, ran its 16 tasks one after another on one core until a
    liveness request, and the run took 33.7 h against fine Per-Stage's 14.0 h.
    """
    cores = {a.alloc_id: a.cores for a in view.live_allocations}
    have: dict[str, int] = {}
    for alloc_id, labels in kept.items():
        for label in labels:
            have[label] = have.get(label, 0) + cores.get(alloc_id, 0)
    short: dict[str, int] = {}
    for label, held in have.items():
        if not _known(view, label):  # "*", or a label no stage has yet
            continue
        s = view.stage(label)
        if s.complete or (s.ready and _all_placed(s)):
            continue
        if held * WAVES < view.width_left(label):
            short[label] = held
    return short


def plan_segments(
    view: RunView, covered: AbstractSet[str], stages: Sequence[StageView] | None = None
) -> list[list[StageView]]:
    """Return the stages to plan from their own need: not complete, not in ``covered``, in segments.

    Step 2 of :meth:`~elastic.strategies.planner.Planner.decide` plans each segment (in
    :func:`_dag_order`) from its first stage's need. ``covered``: the stages an allocation is kept for.
    ``stages``: the stages to plan, in plan order (default every stage; the planner passes those within
    its horizon, :func:`window`). A segment may be empty.
    """
    segments: list[list[StageView]] = []
    names: dict[int, set[str]] = {}  # by id of a segment, its stages' names
    joinable: list[StageView] | None = None  # a stage without declared dependencies joins it
    for s in view.stages if stages is None else stages:
        if s.complete or s.name in covered or (s.ready and _all_placed(s)):
            joinable = None
            continue
        # a ready stage is needed now, whatever comes before it in the plan: a stage of a remembered or
        # declared plan that has no task yet (the script changed since) must not hold it back. On a DAG
        # a stage joins the latest segment it follows (:func:`_follows`: a child of one of its stages,
        # with nothing else to wait for), not merely the one before it in the plan; one that follows
        # none (it waits for stages of two segments, or starts a branch) is planned from its own need
        home = None
        if not s.ready:
            if not s.depends_on:
                home = joinable
            else:
                home = next(
                    (seg for seg in reversed(segments) if _follows_names(view, s, names[id(seg)])), None
                )
        if home is None:
            home = [s]
            segments.append(home)
            names[id(home)] = {s.name}
        else:
            home.append(s)
            names[id(home)].add(s.name)
        joinable = home
    return segments


def _all_placed(s: StageView) -> bool:
    """Whether every task of ready stage ``s`` that may still run is running (on allocations kept for others).

    Such a stage needs no allocation of its own: planned, it was asked for in full, and the idle jobs
    released at once, then asked again at every decision (random scenarios, seed 1, index 1,775: asa,
    ``job_cores=1``, 9,993 jobs in 32 virtual hours for the last, heavy-tailed task of a 15-task stage,
    which ran on another stage's allocation). A task lost there is queued again, and planned then.
    """
    left = s.outstanding if s.outstanding is not None else s.tasks - s.done
    return left - s.running <= 0


def window(view: RunView, horizon: int | None) -> tuple[StageView, ...]:
    """Return the stages step 2 plans: the first ``horizon`` stages not complete, and every ready one.

    In plan order. None, or no more stages left than ``horizon``: every stage not complete (the plan over
    the whole remaining workflow). A ready stage beyond the first ``horizon`` (a wide fan-out) is planned
    too: it is needed now, and a stage nobody plans is never requested.
    """
    left = view.open_stages
    if horizon is None or len(left) <= horizon:
        return left
    near = left[:horizon]
    last = near[-1].index
    return near + tuple(s for s in view.active_stages if s.index > last)


def window_after(
    view: RunView, current: StageView, horizon: int | None, hold: int | None = None
) -> tuple[StageView, ...] | None:
    """Return the stages after ``current`` step 1 chooses a hold from: the next ``hold`` not complete.

    In plan order; None (every stage after it) where ``horizon`` is None or no more stages than it are
    left. ``hold`` (default ``horizon``, never more): how many are read then (:data:`HOLD_HORIZON`).
    """
    left = view.open_stages
    if horizon is None or len(left) <= horizon:
        return None
    start = bisect_right(left, current.index, key=lambda s: s.index)
    return left[start : start + (horizon if hold is None else min(hold, horizon))]


def _dag_order(chain: Sequence[StageView]) -> list[StageView]:
    """Return ``chain`` in an order the search can plan it in: every stage after its predecessors in it.

    Among stages whose predecessors in ``chain`` are placed, the widest goes first (then plan order): a
    sibling of a wide stage is then the one that runs beside it (:func:`_beside`), so an allocation kept
    across a narrow sibling (CyberShake's ``ZipSeis`` beside ``PeakValCalcOkaya``) can still be kept for
    the wide stage. A stage without declared dependencies follows the stage before it in plan order.

    Examples
    --------
    >>> from elastic.strategies.base import StageView
    >>> a, b = StageView("a", 0, 2, 1, ()), StageView("b", 1, 1, 1, ("a",))
    >>> [s.name for s in _dag_order([a, b, StageView("c", 2, 28, 1, ("a",))])]
    ['a', 'c', 'b']
    """
    # Kahn's order with a heap (widest, then plan order, among the placeable stages): the same order as
    # picking from every stage left at each step, in n log n rather than n squared
    position = {s.name: m for m, s in enumerate(chain)}
    unmet = [0] * len(chain)
    children: list[list[int]] = [[] for _ in chain]
    open_ended: list[int] = []  # stages without declared dependencies: placeable once all before them are
    for m, s in enumerate(chain):
        if not s.depends_on:
            open_ended.append(m)
            continue
        for d in {d for d in s.depends_on if d in position}:
            children[position[d]].append(m)
            unmet[m] += 1
    placed = [False] * len(chain)
    prefix = 0  # every stage before it is placed
    free = [(-chain[m].width, m) for m in range(len(chain)) if chain[m].depends_on and unmet[m] == 0]
    heapq.heapify(free)
    waiting = 0  # next of open_ended not yet placeable
    out: list[StageView] = []
    while len(out) < len(chain):
        while waiting < len(open_ended) and open_ended[waiting] <= prefix:
            heapq.heappush(free, (-chain[open_ended[waiting]].width, open_ended[waiting]))
            waiting += 1
        if free:
            _, m = heapq.heappop(free)
        else:  # a malformed cycle: the first stage left
            m = prefix
        placed[m] = True
        out.append(chain[m])
        for c in children[m]:
            unmet[c] -= 1
            if unmet[c] == 0 and not placed[c]:
                heapq.heappush(free, (-chain[c].width, c))
        while prefix < len(chain) and placed[prefix]:
            prefix += 1
    return out


def _beside(chain: Sequence[StageView], works: Sequence[float]) -> list[int]:
    """Per stage of ``chain`` (a plan's stages in order), the cores of earlier ones that run beside it.

    An earlier stage runs beside it if it is not one of its predecessors (it is on another branch of the
    DAG) and is expected to run while it could (:attr:`StagePlan.beside`): each stage is expected to start
    once its predecessors in ``chain`` end, and to take ``works`` seconds. A stage that declares no
    dependency follows every stage before it.

    Examples
    --------
    >>> from elastic.strategies.base import StageView
    >>> a, b = StageView("a", 0, 4, 1, ()), StageView("b", 1, 2, 1, ("a",))
    >>> c, d = StageView("c", 2, 8, 1, ("a",)), StageView("d", 3, 8, 1, ("b",))
    >>> _beside([a, b, c, d], [60.0, 60.0, 600.0, 60.0])  # c runs beside b, and d beside c
    [0, 0, 2, 8]
    >>> _beside([a, b, c, d], [60.0, 600.0, 60.0, 60.0])  # c runs beside b; c ends before d starts
    [0, 0, 2, 0]
    """
    # A stage starts at the latest end of its predecessors in the chain (ends only grow along
    # dependencies, so of its direct ones; of every earlier stage for one that declares none), and no
    # predecessor ends after it starts: the stages beside it are the earlier ones that end after its start.
    # Their cores are summed over a Fenwick tree of the ends (n log n, not n squared).
    end: dict[str, float] = {}
    starts: list[float] = []
    latest = 0.0  # the latest end so far
    for s, work in zip(chain, works, strict=True):
        own = (end[d] for d in s.depends_on if d in end)
        start = max(own, default=0.0) if s.depends_on else latest
        end[s.name] = start + max(work, 0.0)
        latest = max(latest, end[s.name])
        starts.append(start)
    ends = sorted(set(end.values()))
    tree = [0] * (len(ends) + 1)
    total = 0
    out: list[int] = []
    for s, start in zip(chain, starts, strict=True):
        # cores of earlier stages ending at or before ``start``, from the tree
        at_or_before = 0
        i = bisect_right(ends, start)
        while i > 0:
            at_or_before += tree[i]
            i -= i & -i
        out.append(total - at_or_before)
        i = bisect_right(ends, end[s.name])  # its 1-based rank
        while i < len(tree):
            tree[i] += s.width
            i += i & -i
        total += s.width
    return out


def _predecessor_label(view: RunView, s: StageView) -> str | None:
    """Label of the live allocation kept for ``s``'s predecessors (what a chained request depends on)."""
    for dep in s.depends_on:
        for a in reversed(view.allocations_serving(dep, live_only=True)):
            if a.stage is not None:
                return a.stage
    return None

"""Rules every strategy shares, as plain functions of the :class:`~elastic.strategies.view.RunView`.

:func:`release_idle` gives back allocations whose stages are done; :func:`walltime_follow_ups`, when an
allocation will reach its walltime with work left, pre-submits the next value of its stage's speculative
sequence, ahead of the expiry by the predicted queue wait, and replaces allocations that ended under us;
:func:`needs_allocation`, :func:`remaining_work` and :func:`cores_waited_for` are what they test.

Over 500 lines because the walltime follow-ups (asked ahead, narrowed, lowered, and how long each must
be to take the tasks it follows, :func:`outlived_need`, :func:`rerun_need`) and the release rule read
the same allocations by label and must agree on what a follow-up is; each rule carries the run that
showed why it is so. Moving the follow-ups to a module of their own is the next split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Sequence

from elastic.allocations import Allocation, AllocationState
from elastic.pool.placement import estimate_after_loss
from elastic.strategies.actions import Action, Cancel, Decision, Shorten, Submit
from elastic.strategies.knowledge import TOTAL
from elastic.strategies.view import RunView, StageView

__all__ = [
    "SHORTEN_SLACK",
    "cores_waited_for",
    "needs_allocation",
    "outlived_need",
    "release_idle",
    "remaining_work",
    "rerun_need",
    "walltime_checks",
    "walltime_follow_ups",
    "walltimes_so_far",
]

SHORTEN_SLACK = 60.0
"""Seconds a pending request may ask beyond what it needs before it is lowered (Slurm's limits are whole
minutes)."""


def rerun_need(stage: StageView) -> float:
    """Return what ``stage``'s tasks waiting for a re-run need left to be placed (0: none waits)."""
    return estimate_after_loss(None, stage.rerun_floor or 0.0) or 0.0


def outlived_need(view: RunView, label: str, end: float) -> float:
    """Return what ``label``'s oldest running attempt needs to run again if lost at ``end`` (0: none runs).

    Twice what it will have run then (:attr:`StageView.running_since`), as the pool places a lost task's
    re-run (:func:`~elastic.pool.placement.estimate_after_loss`). ``label`` ``"*"``: over the open stages.
    """
    stages = view.open_stages if label == TOTAL else (view.stage(label),)
    since = min((s.running_since for s in stages if s.running_since is not None), default=None)
    if since is None or since >= end:
        return 0.0
    return estimate_after_loss(None, end - since) or 0.0


def walltimes_so_far(view: RunView, label: str, leaving: Collection[str] = ()) -> list[float]:
    """Return the walltimes of ``label``'s own allocations that ran out or may: its sequence so far.

    ``leaving``: allocations a decision cancels, left out like those already cancelled. A request asked
    beside one the same decision cancels is its replacement, not the next step of the sequence: counted,
    the liveness rule's request for a lost task's re-run, released by the strategy as not needed at each
    poll, was asked again each time at twice the walltime (1000Genome 112, CTC SP2 capacity, in jobs of
    one task: from 9,732 s to 2.6e9 s in five minutes, a job that never started, the run given up).

    They are :meth:`~elastic.strategies.knowledge.Knowledge.walltime`'s ``previous`` (walltimes that ran
    out: the next request is longer than all). An allocation we cancelled did not run out and says
    nothing of the stage's length: an early request released before its stage was ready, or a piece
    released idle in its stage's tail. Counted, they pushed the sequence on: CyberShake 28 on the SDSC
    Blue capacity queue, run 25, ``asa`` released two 10,138-s requests made early, and a task lost
    later was asked 23,120 s instead of the sequence's next after the 4,620 s that ran out; a one-core
    job that long waited 28.8 h there (40.5 h against split Per-Stage's 4.5 h). The planner reads its
    own, narrower form for groups it has not requested yet (``planner_rules._ran_out``: TIMEOUT only).
    """
    return [a.walltime for a in view.allocations_for(label) if not a.cancelled and a.alloc_id not in leaving]


def remaining_work(view: RunView, label: str) -> float:
    """Return the expected seconds of work left for ``label`` (a stage, or ``"*"``: all stages)."""
    k = view.knowledge
    unstarted = k.unstarted_durations()  # a dict lookup for each stage not started, in the same order
    total = 0.0
    for s in view.open_stages if label == TOTAL else (view.stage(label),):
        if s.complete:
            continue
        if s.start_time is None:
            expected = unstarted.get(s.name)
            total += k.expected_duration(s.name) if expected is None else expected
        else:
            elapsed = view.now - s.start_time
            total += max(0.0, k.expected_duration(s.name, elapsed) - elapsed)
    return total


def needs_allocation(view: RunView, label: str) -> bool:
    """Whether ``label`` needs a first allocation: it has none, or all ended and we released the last.

    The second case is a label whose work was done (its allocation released) and that has work again: a
    front door's stage that gets new tasks after it completed.

    An allocation that ended under us (walltime, ``scancel``) is replaced by :func:`walltime_follow_ups`.
    """
    mine = view.allocations_for(label)
    return not mine or (all(a.ended for a in mine) and mine[-1].cancelled)


def release_idle(view: RunView) -> list[Cancel]:
    """Cancel allocations whose stages are all complete: pending ones, and running ones with no task left.

    An allocation's stages are :attr:`Allocation.labels`: the stages a planner keeps it for, else the
    stage it was requested for. A batch job split from a wider request (:attr:`Allocation.piece_of`) is
    also released, idle, as soon as the idle cores of the other running jobs kept for its stages can take
    every task of those stages that waits for cores (:func:`cores_waited_for`): the finished cores of a
    stage's tail, the cores a narrow stage after a wide one does not use; and such a job still waiting in
    the queue goes under the same test, before it starts only to be released. The tasks a job of stages all
    done runs with less walltime left than a task's estimate count as waiting (they will run again). An
    idle allocation whose stages are ready but cannot end on it, each with another allocation asked or
    running for it (the walltime follow-up, which their tasks wait for), is released too
    (:func:`_replaced`). A job running a task is never released by this rule; but one whose stages are
    done and that a pending job depends on is drained (cancelled: it takes no new task and ends with its
    current one), so that the dependent jobs are not held back while it runs the next stage's tasks
    alone.
    """
    out: list[Cancel] = []
    released: set[str] = set()
    for a in view.live_allocations:  # every ended one is skipped below
        labels = a.labels
        if a.ended or not labels:
            continue
        if _all_done(view, labels):
            what = "stage " + ", ".join(labels) + (" is" if len(labels) == 1 else " are")
            if a.pending:
                out.append(Cancel(a.alloc_id, f"{what} done; not needed any more"))
            elif view.busy_cores(a.alloc_id) == 0:
                out.append(Cancel(a.alloc_id, f"{what} done; releasing idle cores"))
                released.add(a.alloc_id)
            elif a.piece_of is not None and not a.cancelled and _holds_back(view, a.alloc_id):
                out.append(
                    Cancel(a.alloc_id, f"{what} done; the jobs waiting for it would be faster (drained)")
                )
            continue
        if a.pending:
            # a piece still waiting that the rule below would release idle as soon as it started goes now,
            # before it starts for nothing (CyberShake 56, synthetic queue, in jobs of one task: 68 of fine
            # Per-Stage's jobs per run started after their stage's tasks were all placed, and went at once)
            if not a.cancelled and a.piece_of is not None and a.reason not in _FOLLOW_UPS:
                open_ = {x for x in labels if _known(view, x) and not view.label_done(x)}
                if open_ and _covered(view, a, open_, released):
                    out.append(
                        Cancel(
                            a.alloc_id,
                            f"not needed: other jobs have idle cores for what {_names(open_)} need",
                        )
                    )
            continue
        # not idle either: cores a front-end promised to its own placement (a Mesos framework's, offered
        # to it or running a task it has not heard the end of): it launches there at any moment, and a
        # release then loses the task, and the width (test_pymesos_mock[asa] on a loaded machine: both
        # pieces' tasks ended at once and, their cores offered again, one piece was released as idle)
        if a.cancelled or not a.running or view.cores_in_use(a.alloc_id) > 0:
            continue
        known = [x for x in labels if _known(view, x)]
        if _replaced(view, a, known):
            released.add(a.alloc_id)
            out.append(
                Cancel(a.alloc_id, "cannot end its stage; its tasks wait for the allocation that replaces it")
            )
            continue
        if a.piece_of is None or a.reason in _FOLLOW_UPS:
            # a follow-up idles by design until the jobs it replaces run out of walltime: releasing it
            # for the idle cores those jobs have now made the follow-up rule ask again, for ever, each
            # time with the next (doubled) walltime of the sequence (found by the random scenarios:
            # asa-paper, job_cores=5, 2-core tasks)
            continue
        open_ = {x for x in known if not view.label_done(x)}
        if _covered(view, a, open_, released):
            released.add(a.alloc_id)
            out.append(Cancel(a.alloc_id, f"idle; other jobs have idle cores for what {_names(open_)} need"))
    return out


def _names(labels: set[str]) -> str:
    return ", ".join(sorted(labels))


def _covered(view: RunView, a: Allocation, open_: set[str], released: set[str]) -> bool:
    """Whether the idle cores of the running jobs other than ``a`` kept for ``open_`` take every waiting task.

    Those of jobs in ``released`` count for nothing.
    """
    need = max(cores_waited_for(view, x) for x in open_)
    # Tasks running on a job of stages all done (any task runs on any allocation) with less walltime
    # left than a task's estimate will run again: that job's walltime was asked for its own stages,
    # not for them. 1000Genome 112, HPC2N capacity, run 22: ``frequency``'s two fresh 56-core pieces
    # were released as idle while its tasks ran on ``mutation_overlap``'s job, 4 minutes from its
    # walltime; they were lost with it, and their follow-up waited 15 h. (Counting the stage's own
    # jobs so too kept split Per-Stage's idle pieces while its last tasks ended in time: 1.4 % more
    # core-hours on issue 28's grid, no faster.)
    estimate = max((view.knowledge.task_estimate(x) for x in open_ if x != TOTAL), default=0.0)
    # Tasks lost with their job run again only where twice the attempt they lost is left (the pool's
    # placement, :func:`rerun_need`): idle cores with less left take none of them, and ``a`` with less
    # left is no use to them either. Counting such cores made the request the liveness rule asks for
    # them look surplus while it waited, released at each poll and asked again (1000Genome 112, CTC SP2
    # capacity, in jobs of one task: 7 of 30 runs given up); keeping a piece too short for them kept it
    # from going where it was surplus (the same on HPC2N capacity, run 16: 41.6 h against 13.0 h)
    rerun = max((rerun_need(view.stage(x)) for x in open_ if x != TOTAL), default=0.0)
    rerun_cores = 0
    if rerun > 0.0:
        rerun_cores = sum(
            s.rerun_waiting * s.cores
            for s in (view.stage(x) for x in open_ if x != TOTAL)
            if s.rerun_floor is not None
        )
        if a.remaining(view.now) < rerun:  # ``a`` cannot take them: whether it is surplus is of the others
            need, rerun, rerun_cores = max(0, need - rerun_cores), 0.0, 0
    idle = short = 0  # idle cores with the re-run's time left, and with less
    for b in view.live_allocations:
        if not b.running or b.alloc_id == a.alloc_id or b.alloc_id in released:
            continue
        if open_.intersection(b.labels):
            if not b.cancelled:
                free = max(0, b.cores - view.cores_in_use(b.alloc_id))
                if b.remaining(view.now) >= rerun:
                    idle += free
                else:
                    short += free
        elif b.remaining(view.now) < estimate and _all_done(view, b.labels):
            need += view.busy_cores(b.alloc_id)  # its tasks run out with it
    return idle + min(short, max(0, need - rerun_cores)) >= need


def _may_run_again(view: RunView, label: str) -> bool:
    """Whether a task of ``label`` may still run (``"*"``: of any stage not complete).

    A front-door stage whose tasks all ended stays open for a while (more may come): a task lost with no
    retries left ended failed, and a follow-up requested for it would only idle. A declared stage's
    tasks not done all may run (:attr:`StageView.outstanding` is None). ``"*"`` with every stage complete
    is left to the caller's other tests, as before.
    """
    stages = view.open_stages if label == TOTAL else (view.stage(label),)
    return not stages or any(s.outstanding is None or s.outstanding > 0 for s in stages)


def _all_done(view: RunView, labels: Sequence[str]) -> bool:
    """Whether every label of ``labels`` the view knows is done (``"*"``: every stage), last ones first.

    A long hold's open stages are its last. One look-up per label: asked of every live allocation at
    every decision.
    """
    for x in reversed(labels):
        if x == TOTAL:
            if not view.done:
                return False
        elif view.has_stage(x) and not view.stage(x).complete:
            return False
    return True


def backlog_held(view: RunView, actions: Sequence[Action]) -> bool:
    """Whether a request made beside ``actions`` is held by the run's full backlog.

    True where the backlog is full (:attr:`RunView.backlog_full`) and none of ``actions`` cancels one
    of the run's requests still waiting in the batch queue (such a cancel frees the backlog at once).
    """
    if not view.backlog_full:
        return False
    pending = {a.alloc_id for a in view.live_allocations if a.pending}
    return not any(isinstance(x, Cancel) and x.alloc_id in pending for x in actions)


def _may_follow_up(view: RunView, label: str) -> bool:
    """Whether ``label`` is not done, a task of it may still run and (a stage) it is ready.

    What :func:`walltime_follow_ups` tests first of each label, with one look-up of the stage (it is
    asked for every stage ready on a wide DAG, at every decision).
    """
    if label == TOTAL:
        return not view.done and _may_run_again(view, TOTAL)
    s = view.stage(label)
    return not s.complete and (s.outstanding is None or s.outstanding > 0) and s.ready


def followed(view: RunView, labels: Sequence[str]) -> Iterator[tuple[str, list[Allocation]]]:
    """Yield the ``labels`` :func:`walltime_follow_ups` looks at, each with its allocations, none pending.

    Those ready with work left (:func:`_may_follow_up`) that had an allocation kept for them, none of
    which waits in the queue: the rules that follow walltimes (and :mod:`~elastic.strategies.settle`,
    which says until when their result holds) read the same ones.
    """
    for label in labels:
        # not ready: nothing to lose yet (the strategy's own rule (re)submits for stages not ready)
        if not _may_follow_up(view, label):
            continue
        mine = view.allocations_serving(label)  # after the cheap tests: a long chain has few stages open
        if not mine or any(a.pending for a in mine):  # most stages of a wide DAG wait for their first one
            continue
        yield label, mine


_FOLLOW_UPS = frozenset({"walltime", "lost"})
"""Reasons of the requests :func:`walltime_follow_ups` makes."""


def _replaced(view: RunView, a: Allocation, labels: Sequence[str]) -> bool:
    """Whether idle running ``a`` cannot end any of its stages, all ready, and each has another allocation.

    Its stages' tasks then wait for the other (the walltime follow-up): placement's time rule starts a
    task only where its estimate (:meth:`Knowledge.task_estimate`, as run control gives it) fits the
    walltime left while another allocation has the time. Kept, it would
    idle until killed (HPC2N capacity, Statistics 28, run 1: 28 cores for 0.6 h). The same estimate
    placement uses, not the stage's expected work left: an allocation whose agents have not joined yet
    (idle for that reason) is kept wherever its stage's tasks would be placed on it.
    """
    open_ = [x for x in labels if not view.label_done(x)]
    if not open_ or TOTAL in open_ or not all(view.stage(x).ready for x in open_):
        return False
    left = a.remaining(view.now)
    for x in open_:
        if view.knowledge.task_estimate(x) <= left:
            return False
        others = [b for b in view.allocations_serving(x, live_only=True) if b.alloc_id != a.alloc_id]
        if not any(b.piece_of is None or b.piece_of != a.piece_of for b in others):
            return False
    return True


def _holds_back(view: RunView, alloc_id: str) -> bool:
    """Whether a job of a done stage, running a later stage's task, holds back pending jobs it should not.

    Any task may run on any allocation, so the jobs of a done stage take the next stage's tasks while
    that stage's own jobs, submitted with a dependency on them, wait for them to end. With enough of
    them that is free cores; with one or two, they take the tasks a few at a time, wave after wave, while
    the jobs that would take them all at once are held back. Drain them (no new task, cancelled when
    the current one ends) when the waves left on them would take longer than one wave on the dependent
    jobs after their predicted queue wait.
    """
    dependents = [
        b for b in view.live_allocations if b.pending and any(d == alloc_id for d, _ in b.dependencies)
    ]
    if not dependents:
        return False
    blockers = {d for b in dependents for d, _ in b.dependencies}
    held = sum(
        c.cores for c in view.live_allocations if c.alloc_id in blockers and c.running and not c.cancelled
    )
    for b in dependents:
        for label in b.labels:
            if not _known(view, label) or view.label_done(label):
                continue
            waiting = cores_waited_for(view, label)
            if held == 0 or waiting == 0:
                continue
            # a wave takes a task's time (the whole workflow's for a Big-Job allocation, as before)
            k = view.knowledge
            task = k.expected_duration(label) if label == TOTAL else k.task_estimate(label)
            if math.ceil(waiting / held) * task > task + view.knowledge.predict_wait(b.cores):
                return True
    return False


def cores_waited_for(view: RunView, label: str) -> int:
    """Cores the tasks of ``label`` not running yet need at once (``"*"``: the most of any stage)."""
    if label == TOTAL:
        return max((_waiting(s) for s in view.stages), default=0)
    return _waiting(view.stage(label))


def _waiting(stage: StageView) -> int:
    return 0 if stage.complete else max(0, stage.tasks - stage.done - stage.running) * stage.cores


def _known(view: RunView, label: str) -> bool:
    return label == TOTAL or view.has_stage(label)


def walltime_follow_ups(
    view: RunView,
    labels: Sequence[str],
    *,
    margin: float = 60.0,
    lead: Callable[[int], float] | None = None,
) -> Decision:
    """Follow-up requests for allocations that run out of walltime, or ended under us, with work left.

    For each ``label`` that already had an allocation kept for it (:meth:`RunView.allocations_serving`),
    is ready (its tasks are queued or running) and still has work:

    - no allocation pending or running, and the last one ended without us cancelling it (walltime,
      ``scancel`` from outside, failure): request the next walltime of the sequence now (``"walltime"``
      after a TIMEOUT, else ``"lost"``);
    - the running allocation ends (``start + walltime``) before the expected remaining work: submit the
      next walltime of the sequence at ``walltime_end - lead - margin``, so the new allocation is there
      when the old one is killed (lost tasks re-run on it), with the seconds until then added to its
      walltime (it may start at once and idle until then; capped at the partition's limit). It asks at
      least what the label's oldest running attempt needs to run again if lost then, as the pool places
      it (:func:`outlived_need`).

    A follow-up is for ``label`` only, also when the allocation it follows was kept for more stages
    (:attr:`Allocation.labels`): the stages after it are planned by the strategy when they come. It is as
    wide as the label's tasks not done yet need (:meth:`RunView.width_left`), not the stage's width: a
    wide stage whose last task outlives the first request needs one core more, and 56 cores asked for it
    idled 55 of them for the hours that task ran again (BLAST 56 on the busy synthetic queue, run 14:
    150 core-h, and the 56-core request waited 5.4 h where a narrow one backfills).
    Replacing the whole group (as wide as its widest stage, walltime the sum) was measured worse on the
    main job (montage, busy synthetic 64-core queue, 30 runs: ``asa`` 9.66 h and 43.3 core-h against
    6.66 h and 34.4): a wide request with a long walltime waits longer, and holds cores the later
    stages may not need.

    ``lead(cores)`` is how long ahead of its need an allocation of ``cores`` is requested; default the
    predicted wait (:meth:`~elastic.strategies.knowledge.Knowledge.predict_wait`). The planner passes the
    timing rule's lead for a follow-up (:func:`elastic.strategies.timing.lead_time`).

    A follow-up still waiting in the queue that asks at least twice the cores its label's tasks not done
    need by now is replaced by one as wide as they need, and one still waiting once the allocations it
    was to take over from have ended no longer asks the walltime to cover until then
    (:func:`_waiting_follow_ups`).
    """
    actions: list[Action] = _waiting_follow_ups(view, labels)
    wake: float | None = None
    k = view.knowledge
    for label, mine in followed(view, labels):
        previous = walltimes_so_far(view, label)  # the label's own sequence
        cores = view.width_left(label)
        running = [a for a in mine if a.running]
        if not running:
            last = mine[-1]
            if last.cancelled:
                continue
            reason = "walltime" if last.state is AllocationState.TIMEOUT else "lost"
            wait = k.predict_wait(cores)
            actions.append(
                Submit(label, cores, k.walltime(label, previous), reason=reason, predicted_wait=wait)
            )
            continue
        current = max(running, key=lambda a: a.walltime_end or 0.0)
        end = current.walltime_end
        assert end is not None, "a running allocation has a start time"
        if remaining_work(view, label) <= end - view.now:
            continue
        wait = k.predict_wait(cores) if lead is None else lead(cores)
        at = end - wait - margin
        if view.now >= at:
            # it may start at once and idle until the allocation it follows is killed, the tasks lost then
            # re-running on it: its walltime covers that too, or the re-run gets less than the sequence's
            # next value (SDSC Blue capacity, BWA 28, run 18: asked 1,343 s ahead, it started at once and
            # the re-run lost again after 3,958 of its 5,301 s; the next request, 21,898 s, waited 14.8 h).
            # Checked on issue 28's five-queue grid (76 of 150 cells met with it and without) and the
            # Lublin-Feitelson trace (18 of 30, 19 without: it helped split Per-Stage more than asa there)
            #
            # And at least what an attempt running now needs to run again if it is lost at ``end``, as
            # the pool places it (twice what it will have run, :func:`outlived_need`): shorter, the
            # follow-up cannot take it, and the liveness rule asks another, longer one, which waits longer
            # (SDSC Blue capacity, Seismology 28, run 17: ``asa`` asked 37,120 s 60 s before the end for a
            # task started with the allocation 19,914 s before, its re-run needed 39,828 s, the liveness
            # rule's 90,304-s request started 44 h later; the baselines, asking 3 h ahead, covered it).
            floor = max(k.walltime(label, previous), math.ceil(outlived_need(view, label, end)))
            walltime = floor + math.ceil(max(0.0, end - view.now))
            if k.max_walltime is not None:
                walltime = min(walltime, k.max_walltime)
            actions.append(Submit(label, cores, walltime, reason="walltime", predicted_wait=wait))
        else:
            wake = at if wake is None else min(wake, at)
    return Decision(tuple(actions), wake)


def _waiting_follow_ups(view: RunView, labels: Sequence[str]) -> list[Action]:
    """Narrow or lower follow-ups still waiting in the queue to what their label's tasks need now.

    **Narrowed.** A follow-up asked ahead is as wide as the label's tasks not done then
    (:meth:`RunView.width_left`); most of them may end before the allocation it follows runs out, leaving
    the follow-up for the few that do not. Seismology 28 on the busy synthetic queue, run 15: ``asa``
    asked 28 cores for ``sG1IterDecon`` right after its first allocation started (a 12-h wait predicted),
    27 of its 28 tasks ended within 3.3 h, the last one was lost at the walltime, and the 28-core
    follow-up started 21 h later and ran it alone for 6.8 h: 184 idle core-hours. A follow-up that asks
    at least twice the cores the label's tasks need now is replaced (same reason; each pending job of
    the request cancelled, none if one of them started) by one as wide as they need. It fits holes the
    wide one does not, at the price of its place in the queue.

    **Lowered.** A follow-up asked before the allocation it follows runs out also asks the seconds until
    then, in case it starts at once and idles until the lost tasks re-run on it
    (:func:`walltime_follow_ups`). Once no allocation of the label runs any more, that cover can no
    longer be used, and a shorter limit fits backfill holes a longer one does not: SDSC Blue capacity,
    BLAST 28, run 3, in jobs of one task, ``asa`` asked the follow-up of two tasks lost at 2.6 h with
    4,011 s of cover (27,225 s) and it started at 32.9 h, where Per-Stage's, asked at the walltime's end
    with 61 s of cover (23,214 s), started at 14.3 h. Each of its waiting jobs is lowered (:class:`Shorten`,
    at its place in the queue) to what a follow-up asked now would ask: the label's next walltime after
    those that ran before it, at most the partition's limit. Every strategy that follows walltimes gets
    it (Big-Job and Per-Stage too: theirs are asked ahead by the predicted wait).
    """
    out: list[Action] = []
    for label in labels:
        if not _may_follow_up(view, label):  # the labels a follow-up is asked for, as the rule reads them
            continue
        requests: dict[str, list[Allocation]] = {}
        running = False
        for a in view.allocations_serving(label):
            running = running or a.running
            if a.reason in _FOLLOW_UPS and a.stage == label and not a.ended and not a.cancelled:
                requests.setdefault(a.request, []).append(a)
        if not requests:
            continue
        need = view.width_left(label)
        for jobs in requests.values():
            if any(not a.pending for a in jobs):
                continue
            first = jobs[0]
            uncovered = None if running else _uncovered_walltime(view, label, first)
            walltime = first.walltime if uncovered is None else min(first.walltime, uncovered)
            cores = sum(a.cores for a in jobs)
            if cores >= 2 * need:
                out.extend(Cancel(a.alloc_id, f"{label} needs {need} of its {cores} cores now") for a in jobs)
                out.append(
                    Submit(label, need, walltime, reason=first.reason, predicted_wait=first.predicted_wait)
                )
            elif uncovered is not None:
                why = f"no allocation of {label} runs: no cover to keep"
                lower = [a for a in jobs if a.walltime > uncovered + SHORTEN_SLACK]
                out.extend(Shorten(a.alloc_id, uncovered, why) for a in lower)
    return out


def _uncovered_walltime(view: RunView, label: str, follow_up: Allocation) -> float:
    """Return the walltime ``follow_up`` of ``label`` would ask without cover: the sequence's next value.

    At least what the label's tasks lost at the walltime need to run again, as the pool places them
    (:func:`~elastic.pool.placement.estimate_after_loss`, the liveness rule's floor): lowered below it,
    the follow-up could not take them, and the liveness rule asked another (HPC2N capacity, Seismology
    28, run 15, `asa`: a follow-up lowered to 38,436 s for a task lost after 19,986 s, a liveness
    request of 117,271 s asked beside it, which started 39 h later). The sequence's ``previous`` are
    those :func:`walltimes_so_far` read when it was asked: the label's allocations asked before it and
    not cancelled by then. The allocations it followed may have been
    cancelled since (released idle once it was asked, as they could not end the stage): read without
    them, the sequence started again and CyberShake 112 on the busy synthetic queue, run 27, had its
    19,102-s follow-up lowered to the first value, 4,359 s, replaced at once, and 3.4x the core-hours.
    """
    asked = follow_up.submit_time
    assert asked is not None, "a request has a submit time"
    previous = [
        a.walltime
        for a in view.allocations_for(label)
        if a.submit_time is not None
        and a.submit_time < asked
        and not (a.cancelled and a.end_time is not None and a.end_time <= asked)
    ]
    k = view.knowledge
    stages = view.open_stages if label == TOTAL else (view.stage(label),)
    need = max((rerun_need(s) for s in stages), default=0.0)
    walltime = max(k.walltime(label, previous), float(math.ceil(need)))
    return walltime if k.max_walltime is None else min(walltime, k.max_walltime)


def walltime_checks(view: RunView, labels: Sequence[str], *, margin: float = 60.0) -> float | None:
    """Return when a paced strategy must decide again for :func:`walltime_follow_ups`, or None.

    ``margin`` seconds before the walltime of each running allocation the rule would follow up (that of
    a ``label`` ready with work left, none of whose allocations is pending) ends, the earliest of those
    still ahead. A stage that outlives what is expected of it gets its follow-up there, before its
    allocation is killed. A strategy asked at every poll, or until the rule's result changes
    (:func:`~elastic.strategies.settle.follow_ups_until`), needs none; one whose decisions are kept for
    a pace (:class:`~elastic.strategies.base.Paced`, the planner) would otherwise look again only after
    the loss: SDSC Blue capacity, BWA 28, run 3, the planner's decisions came 0.17 h and then 0.32 h
    apart, ``cat_bwa`` outlived its allocation in between, and the follow-up of its re-run, asked after
    the loss, waited 8.3 h. No wait is predicted here (a prediction may be drawn at random, and a
    decision that asks for one is not kept: :attr:`~elastic.strategies.knowledge.Knowledge.predictions`).
    """
    wake: float | None = None
    for _, mine in followed(view, labels):
        ends = [a.walltime_end for a in mine if a.running and a.walltime_end is not None]
        if ends:
            check = max(ends) - margin
            if check > view.now:
                wake = check if wake is None else min(wake, check)
    return wake

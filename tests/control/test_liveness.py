"""The liveness rule (elastic/control/liveness.py) and the task-aware split of requests into batch jobs."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import Allocation, AllocationState
from elastic.control.liveness import LIVENESS_REASON, combine, unserved
from elastic.control.scheduler import split_request as _split
from elastic.strategies import Cancel, Decision, Knowledge, RunView, Serve, StageView, Submit
from elastic.workflow import Stage, Workflow


def _view(stages: tuple[StageView, ...], allocations: tuple[Allocation, ...] = ()) -> RunView:
    wf = Workflow("w", tuple(Stage(s.name, s.tasks, s.cores, 60.0, depends_on=()) for s in stages))
    return RunView(100.0, wf, stages, allocations, Knowledge(wf))


def _ready(name: str, tasks: int, cores: int, *, index: int = 0, queued: int | None = None) -> StageView:
    return StageView(name, index, tasks, cores, (), ready_time=0.0, queued=queued)


def _alloc(alloc_id: str, stage: str, cores: int, *, running: bool = False, **kw: object) -> Allocation:
    a = Allocation(alloc_id, cores=cores, walltime=600.0, stage=stage, submit_time=0.0, **kw)  # type: ignore[arg-type]
    return a.transition(AllocationState.RUNNING, 10.0) if running else a


def test_a_ready_stage_with_no_allocation_gets_one_sized_for_its_queued_tasks() -> None:
    view = _view((_ready("b", 3, 2, queued=2),))
    [s] = unserved(view, Decision()).actions
    assert isinstance(s, Submit)
    assert (s.stage, s.cores, s.reason) == ("b", 4, LIVENESS_REASON)
    assert s.walltime > 0


def test_nothing_is_added_while_the_backlog_is_full() -> None:
    # nothing goes before a queued request starts; the rule is applied again once the allocations change
    view = dataclasses.replace(_view((_ready("b", 3, 2, queued=2),)), backlog_full=True)
    assert unserved(view, Decision()).actions == ()


def test_nothing_is_added_where_an_allocation_kept_for_the_stage_can_run_its_tasks() -> None:
    view = _view((_ready("b", 3, 2),), (_alloc("a1", "b", 2),))
    assert unserved(view, Decision()).actions == ()
    # one for the whole workflow serves every stage
    view = _view((_ready("b", 3, 2),), (_alloc("a1", "*", 6, running=True),))
    assert unserved(view, Decision()).actions == ()


def test_an_allocation_narrower_than_the_widest_task_does_not_count() -> None:
    view = _view((_ready("c", 1, 8),), (_alloc("a1", "c", 4), _alloc("a2", "c", 4)))
    [s] = unserved(view, Decision()).actions
    assert isinstance(s, Submit) and s.cores == 8


def test_the_decision_is_taken_into_account() -> None:
    stages = (_ready("b", 1, 2),)
    view = _view(stages, (_alloc("a1", "b", 2),))
    # the strategy cancels the only allocation: one is added
    assert len(unserved(view, Decision((Cancel("a1"),))).actions) == 1
    # it keeps it for another stage only: one is added
    assert len(unserved(view, Decision((Serve("a1", ("a",)),))).actions) == 1
    # it requests one itself: nothing is added
    view = _view(stages)
    assert unserved(view, Decision((Submit("b", 2, 60.0),))).actions == ()


def test_tasks_not_queued_do_not_call_for_cores() -> None:
    # a front-door stage whose only tasks wait for their inputs (held), none queued
    assert unserved(_view((_ready("b", 3, 2, queued=0),)), Decision()).actions == ()
    # a stage not ready, or complete
    assert unserved(_view((StageView("b", 0, 3, 2, ()),)), Decision()).actions == ()
    done = dataclasses.replace(_ready("b", 3, 2), end_time=50.0)
    assert unserved(_view((done,)), Decision()).actions == ()


def test_a_stage_wider_than_any_allocation_may_be_is_left_to_the_front_door() -> None:
    assert unserved(_view((_ready("c", 1, 8),)), Decision(), max_cores=4).actions == ()


def test_an_idle_narrow_allocation_that_keeps_the_wider_one_from_starting_is_released() -> None:
    # a framework's declined 1-core allocation and the 2-core one its learned tasks need, on 2 cores
    stages = (_announced("fw", 1, cores=2),)
    narrow = _alloc("a1", "fw", 1, running=True)
    [s, c] = unserved(_view(stages, (narrow,)), Decision(), max_cores=2).actions
    assert isinstance(s, Submit) and s.cores == 2
    assert isinstance(c, Cancel) and c.alloc_id == "a1"
    # the wider one already pending: released as well; so is the run's own (Big-Job's) idle one
    wide = _alloc("a2", "fw", 2)
    assert unserved(_view(stages, (narrow, wide)), Decision(), max_cores=2).actions == (c,)
    whole = _alloc("a1", "*", 1, running=True)
    [c] = unserved(_view(stages, (whole, wide)), Decision(), max_cores=2).actions
    assert isinstance(c, Cancel) and c.alloc_id == "a1"


def test_a_narrow_allocation_is_kept_where_the_wider_one_fits_or_it_has_work() -> None:
    stages = (_announced("fw", 1, cores=2),)
    narrow, wide = _alloc("a1", "fw", 1, running=True), _alloc("a2", "fw", 2)
    assert unserved(_view(stages, (narrow, wide)), Decision(), max_cores=3).actions == ()  # room for both
    assert unserved(_view(stages, (narrow, wide)), Decision()).actions == ()  # no limit known
    busy = _busy(_view(stages, (narrow, wide)), {"a1": 1})
    assert unserved(busy, Decision(), max_cores=2).actions == ()  # it runs a task
    # kept for the whole run, and another stage has a 1-core task waiting for it
    whole = _alloc("a1", "*", 1, running=True)
    both = (*stages, _ready("b", 1, 1, index=1, queued=1))
    assert unserved(_view(both, (whole, wide)), Decision(), max_cores=2).actions == ()


def _announced(name: str, waiting: int, *, running: int = 0, cores: int = 1) -> StageView:
    """A front-door stage with ``waiting`` tasks announced ready (they wait for cores to be offered)."""
    tasks = max(1, waiting + running)
    return StageView(
        name, 0, tasks, cores, (), running=running, ready_time=0.0, queued=0, outstanding=waiting + running,
        awaiting_offers=waiting,
    )  # fmt: skip


def _busy(view: RunView, busy: dict[str, int]) -> RunView:
    return dataclasses.replace(view, busy=busy)


def test_a_gang_step_under_one_full_allocation_for_the_whole_run_gets_its_own() -> None:
    # Big-Job's one core runs the framework's first task; its own stage still announces one task (it
    # waits for offers) and is served by the allocation running its task; the learned step is not
    whole = _alloc("a1", "*", 1, running=True)
    stages = (_announced("fw", 1, running=1), _announced("fw+gang1", 1))
    [s] = unserved(_busy(_view(stages, (whole,)), {"a1": 1}), Decision()).actions
    assert isinstance(s, Submit)
    assert (s.stage, s.cores, s.reason) == ("fw+gang1", 1, LIVENESS_REASON)


def test_announced_tasks_are_served_by_a_free_core_or_an_allocation_coming() -> None:
    stages = (_announced("fw+gang1", 2),)
    free = _alloc("a1", "*", 4, running=True)
    assert unserved(_busy(_view(stages, (free,)), {"a1": 2}), Decision()).actions == ()
    assert unserved(_view(stages, (_alloc("a1", "fw+gang1", 1),)), Decision()).actions == ()  # pending
    assert unserved(_view(stages), Decision((Submit("fw+gang1", 2, 60.0),))).actions == ()  # Per-Stage
    # too few free cores (two tasks beside one idle core): what they lack
    [s] = unserved(_busy(_view(stages, (free,)), {"a1": 3}), Decision()).actions
    assert isinstance(s, Submit) and s.cores == 1
    [s] = unserved(_busy(_view(stages, (free,)), {"a1": 4}), Decision()).actions
    assert isinstance(s, Submit) and s.cores == 2
    # a draining allocation offers nothing; one kept for another stage does not count
    draining = free.transition(AllocationState.DRAINING, 20.0)
    assert len(unserved(_view(stages, (draining,)), Decision()).actions) == 1
    assert len(unserved(_view(stages, (_alloc("a2", "other", 4, running=True),)), Decision()).actions) == 1
    # capped beside what the run holds, never below one task
    [s] = unserved(_busy(_view(stages, (free,)), {"a1": 4}), Decision(), max_cores=5).actions
    assert isinstance(s, Submit) and s.cores == 1


def test_free_cores_count_in_whole_tasks_for_announced_tasks_wider_than_each_allocation() -> None:
    # a framework whose tasks were learned to be two cores wide, beside two idle one-core allocations
    stages = (_announced("fw", 1, cores=2),)
    narrow = (_alloc("a1", "fw", 1, running=True), _alloc("a2", "fw", 1, running=True))
    [s] = unserved(_view(stages, narrow), Decision()).actions
    assert isinstance(s, Submit) and (s.stage, s.cores) == ("fw", 2)
    assert unserved(_view(stages, (_alloc("a3", "fw", 2, running=True),)), Decision()).actions == ()


@given(
    waiting=st.integers(0, 4),
    running=st.integers(0, 3),
    cores=st.integers(1, 4),
    allocs=st.lists(
        st.tuples(st.sampled_from(["s", "*", "t"]), st.integers(1, 8), st.booleans(), st.integers(0, 8)),
        max_size=3,
    ),
)
def test_after_the_rule_announced_tasks_have_cores_to_be_offered(
    waiting: int, running: int, cores: int, allocs: list[tuple[str, int, bool, int]]
) -> None:
    stage = _announced("s", waiting, running=running, cores=cores)
    allocations = tuple(_alloc(f"a{i}", lab, n, running=up) for i, (lab, n, up, _) in enumerate(allocs))
    busy = {f"a{i}": min(b, n) for i, (_, n, up, b) in enumerate(allocs) if up}
    view = _busy(_view((stage,), allocations), busy)
    added = [a for a in unserved(view, Decision()).actions if isinstance(a, Submit)]
    mine = [a for a in allocations if a.stage in ("s", "*")]
    free = sum((a.cores - busy.get(a.alloc_id, 0)) // cores * cores for a in mine if a.running)  # whole tasks
    if waiting == 0 or running > 0:
        assert added == []  # nothing announced, or the stage runs on what it has
    elif any(a.pending for a in mine) or free >= waiting * cores:
        assert added == []
    else:  # what they lack, in whole tasks: with the free cores, enough for all of them
        [(stage_name, got)] = [(a.stage, a.cores) for a in added]
        assert stage_name == "s" and got % cores == 0
        assert got + free >= waiting * cores > got + free - cores


@st.composite
def _scenes(draw: st.DrawFn) -> tuple[RunView, Decision, int]:
    n = draw(st.integers(1, 4))
    stages = []
    for i in range(n):
        tasks = draw(st.integers(1, 6))
        stages.append(
            StageView(
                f"s{i}",
                i,
                tasks,
                draw(st.integers(1, 8)),
                (),
                done=draw(st.integers(0, tasks)),
                ready_time=draw(st.sampled_from([None, 0.0])),
                queued=draw(st.one_of(st.none(), st.integers(0, tasks))),
            )
        )
    names = [s.name for s in stages] + ["*"]
    allocs = tuple(
        _alloc(f"a{j}", draw(st.sampled_from(names)), draw(st.integers(1, 10)), running=draw(st.booleans()))
        for j in range(draw(st.integers(0, 4)))
    )
    actions = draw(
        st.lists(
            st.one_of(
                st.builds(Cancel, st.sampled_from([a.alloc_id for a in allocs] or ["x"])),
                st.builds(Submit, st.sampled_from(names), st.integers(1, 10), st.just(60.0)),
            ),
            max_size=3,
        )
    )
    return _view(tuple(stages), allocs), Decision(tuple(actions)), draw(st.integers(1, 12))


@given(_scenes())
@settings(max_examples=300, deadline=None)
def test_after_the_rule_every_ready_stage_with_queued_tasks_has_an_allocation_it_fits(
    scene: tuple[RunView, Decision, int],
) -> None:
    view, decision, most = scene
    added = unserved(view, decision, max_cores=most).actions
    cancelled = {a.alloc_id for a in (*decision.actions, *added) if isinstance(a, Cancel)}
    able = [
        (set(a.labels), a.cores)
        for a in view.allocations
        if not a.ended and not a.cancelled and a.alloc_id not in cancelled
    ]
    able += [({s.stage}, min(s.cores, most)) for s in (*decision.actions, *added) if isinstance(s, Submit)]
    for s in view.stages:
        queued = s.queued if s.queued is not None else s.tasks - s.done - s.running
        if not s.ready or s.complete or queued <= 0 or s.cores > most:
            continue
        assert any((s.name in labels or "*" in labels) and c >= s.cores for labels, c in able), s
    # and it adds nothing where nothing is missing: at most one request per stage, only for ready stages
    requests = [a for a in added if isinstance(a, Submit)]
    assert len({a.stage for a in requests}) == len(requests)
    assert all(view.stage(a.stage).ready for a in requests)
    # and it releases only running allocations that run nothing
    for c in added:
        if isinstance(c, Cancel):
            a = next(a for a in view.allocations if a.alloc_id == c.alloc_id)
            assert a.running and view.busy_cores(a.alloc_id) == 0, (a, view.busy)


@given(
    cores=st.integers(1, 300),
    pieces=st.integers(1, 8),
    job_cores=st.one_of(st.none(), st.integers(1, 64)),
    task=st.integers(1, 64),
)
def test_split_pieces_are_whole_tasks_wide(cores: int, pieces: int, job_cores: int | None, task: int) -> None:
    widths = _split(cores, pieces, job_cores, task)
    assert sum(widths) == cores
    fit = min(task, cores)
    assert all(w >= fit for w in widths)  # every job can run the widest task
    assert all((w - (cores % fit if i == 0 else 0)) % fit == 0 for i, w in enumerate(widths))
    if job_cores is not None and job_cores >= fit:
        assert all(w <= job_cores for w in widths[1:])
    if task == 1:  # one-core tasks: exactly the split it always was
        assert len(widths) >= min(pieces, cores)


def test_split_known_answers() -> None:
    assert _split(2, 2, None, 2) == [2]  # a lone 2-core task: one 2-core job, not two 1-core jobs
    assert _split(28, 2, 14, 28) == [28]  # a 28-core task on a 28-core request, whatever job_cores says
    assert _split(12, 2, 5, 4) == [4, 4, 4]  # a 3 x 4-core stage under job_cores=5
    assert _split(56, 2, 20) == [20, 8, 20, 8]  # 1-core tasks: unchanged


# -- the re-run clause: tasks waiting after a lost attempt get an allocation they can end on -----------------


def _rerun(name: str, floor: float, waiting: int = 1, cores: int = 1) -> StageView:
    return dataclasses.replace(
        _ready(name, 6, cores, queued=waiting), start_time=0.0, rerun_floor=floor, rerun_waiting=waiting
    )


def test_a_re_run_with_no_allocation_that_has_its_estimate_left_gets_one() -> None:
    # at t=100 a1 has 510 s left (started at 10, 600 s): a task lost after 300 s is placed by 600 s
    view = _view((_rerun("b", 300.0, waiting=2),), (_alloc("a1", "b", 6, running=True),))
    [s] = unserved(view, Decision()).actions
    assert isinstance(s, Submit) and s.reason == LIVENESS_REASON
    assert (s.stage, s.cores) == ("b", 2)  # the two tasks waiting, not the stage's six
    assert s.walltime >= 600.0  # the pool's estimate: twice the attempt lost
    # with that much left, nothing is asked, and the decision holds until the time left runs below it
    decision = unserved(_view((_rerun("b", 200.0),), (_alloc("a1", "b", 6, running=True),)), Decision())
    assert decision.actions == () and decision.wake_at == 610.0 - 400.0


def test_a_re_run_is_served_by_a_pending_or_requested_allocation_with_its_estimate() -> None:
    long = dataclasses.replace(_alloc("a2", "b", 1), walltime=2000.0)
    assert unserved(_view((_rerun("b", 1000.0),), (long,)), Decision()).actions == ()
    assert unserved(_view((_rerun("b", 1000.0),)), Decision((Submit("b", 1, 2000.0),))).actions == ()
    # less than twice the lost attempt, too narrow, or kept for another stage: does not count
    for alloc in (
        dataclasses.replace(_alloc("a2", "b", 2), walltime=1999.0),
        dataclasses.replace(_alloc("a2", "b", 1), walltime=2000.0),
        dataclasses.replace(_alloc("a2", "c", 2), walltime=2000.0),
    ):
        view = _view((_rerun("b", 1000.0, cores=2),), (alloc,))
        assert len(unserved(view, Decision()).actions) == 1, alloc


def test_a_re_run_longer_than_the_partition_allows_asks_the_limit_once() -> None:
    stages = (_rerun("b", 10_000.0),)
    wf = Workflow("w", (Stage("b", 6, 1, 60.0),))
    knowledge = Knowledge(wf, max_walltime=3600.0)
    [s] = unserved(RunView(100.0, wf, stages, (), knowledge), Decision()).actions
    assert isinstance(s, Submit) and s.walltime == 3600.0
    # once that one is pending, no more: it is the most any request can have
    pending = dataclasses.replace(_alloc("a2", "b", 1), walltime=3600.0)
    assert unserved(RunView(100.0, wf, stages, (pending,), knowledge), Decision()).actions == ()


def test_a_re_run_continues_the_walltime_sequence_from_what_ran_out_not_from_requests_we_cancelled() -> None:
    # Regression: CyberShake 28 on SDSC Blue capacity, run 25: two early requests released unused
    # (10,138 s) made a lost task's re-run ask 23,120 s, and that one-core job waited 28.8 h
    early = dataclasses.replace(
        _alloc("a1", "b", 6), walltime=10_138.0, state=AllocationState.CANCELLED, cancelled=True, end_time=5.0
    )
    ran_out = dataclasses.replace(
        _alloc("a2", "b", 6, running=True), walltime=80.0, state=AllocationState.TIMEOUT, end_time=90.0
    )
    view = _view((_rerun("b", 500.0),), (early, ran_out))
    [s] = unserved(view, Decision()).actions
    assert isinstance(s, Submit)
    k = view.knowledge
    assert s.walltime == max(k.walltime("b", [80.0]), 1000.0)  # the sequence after 80 s, at least 2 x 500 s
    assert s.walltime < k.walltime("b", [10_138.0, 80.0])


def test_a_re_run_request_the_decision_cancels_is_replaced_not_followed_in_the_sequence() -> None:
    # Regression: 1000Genome 112 on CTC SP2 capacity, in jobs of one task: the strategy released the
    # rule's pending request at each poll, and the rule asked again with the next walltime of the
    # sequence each time (9,732 s to 2.6e9 s in five minutes: a job that never started)
    ran_out = dataclasses.replace(
        _alloc("a2", "b", 6, running=True), walltime=80.0, state=AllocationState.TIMEOUT, end_time=90.0
    )
    view = _view((_rerun("b", 500.0),), (ran_out,))
    [first] = unserved(view, Decision()).actions
    assert isinstance(first, Submit)
    asked = dataclasses.replace(_alloc("a3", "b", 1), walltime=first.walltime, reason=LIVENESS_REASON)
    again = _view((_rerun("b", 500.0),), (ran_out, asked))
    [s] = unserved(again, Decision((Cancel("a3", "not needed"),))).actions
    assert isinstance(s, Submit) and s.walltime == first.walltime
    # while it stays, it serves the re-run: nothing more is asked
    assert unserved(again, Decision()).actions == ()


def test_a_strategy_request_too_short_for_a_re_run_is_lifted_not_dropped_beside_the_rule_s() -> None:
    # Regression: SDSC Blue capacity, BWA 28, run 3: the planner asked 3,863 s for a stage whose task was
    # lost after 2,051 s; the rule's request (twice that) was dropped as a second request of the stage,
    # and the task was lost again on the shorter allocation
    view = _view((_rerun("b", 1000.0),))
    decision = Decision((Submit("b", 1, 1500.0, reason="initial", pieces=1),), wake_at=900.0)
    added = unserved(view, decision)
    [rule] = added.actions
    assert isinstance(rule, Submit) and rule.walltime >= 2000.0
    [s] = combine(decision, added).actions
    assert isinstance(s, Submit)
    assert (s.stage, s.walltime, s.reason) == ("b", rule.walltime, LIVENESS_REASON)
    assert combine(decision, added).wake_at == 900.0
    # a wider request of the strategy keeps its cores; a long enough one needs no lift
    wide = Decision((Submit("b", 4, 1500.0),))
    [s] = combine(wide, unserved(view, wide)).actions
    assert isinstance(s, Submit) and (s.cores, s.walltime) == (4, rule.walltime)
    enough = Decision((Submit("b", 1, 5000.0),))
    assert unserved(view, enough).actions == ()
    assert combine(enough, unserved(view, enough)) == enough


def test_a_strategy_request_too_narrow_for_a_stage_s_tasks_is_widened() -> None:
    view = _view((_ready("c", 1, 8),))
    decision = Decision((Submit("c", 4, 600.0, serves=("c", "d")),))
    [s] = combine(decision, unserved(view, decision)).actions
    assert isinstance(s, Submit) and (s.cores, s.serves) == (8, ("c", "d"))
    assert s.walltime >= 600.0


@given(
    widths=st.lists(st.integers(1, 16), min_size=1, max_size=4),
    asked=st.lists(st.tuples(st.integers(1, 16), st.floats(1.0, 10_000.0)), max_size=4),
    floor=st.one_of(st.none(), st.floats(1.0, 5_000.0)),
)
@settings(max_examples=60, deadline=None)
def test_combining_keeps_one_request_per_stage_and_never_asks_less(
    widths: list[int], asked: list[tuple[int, float]], floor: float | None
) -> None:
    stages = tuple(
        dataclasses.replace(
            _ready(f"s{i}", 2, w, index=i, queued=2),
            start_time=0.0,
            rerun_floor=floor,
            rerun_waiting=1 if floor is not None else 0,
        )
        for i, w in enumerate(widths)
    )
    view = _view(stages)
    decision = Decision(tuple(Submit(f"s{i}", c, wt) for i, (c, wt) in enumerate(asked[: len(widths)])))
    added = unserved(view, decision)
    out = combine(decision, added)
    submits = [a for a in out.actions if isinstance(a, Submit)]
    assert len({s.stage for s in submits}) == len(submits)  # one request per stage
    mine = {s.stage: s for s in decision.actions if isinstance(s, Submit)}
    rule = {s.stage: s for s in added.actions if isinstance(s, Submit)}
    for s in submits:
        for other in (mine.get(s.stage), rule.get(s.stage)):
            if other is not None:  # as wide and as long as each request of its stage
                assert s.cores >= other.cores and s.walltime >= other.walltime
    # and after it, the rule has nothing more to add
    assert not [a for a in unserved(view, out).actions if isinstance(a, Submit)]

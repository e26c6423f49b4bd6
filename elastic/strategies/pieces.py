"""The walltime of a request submitted as several batch jobs: one wave of its tasks, or two.

Run control submits a request as several batch jobs where the run's shape caps a job's width
(``job_cores``: ``elastic compare``'s ``split`` and ``fine`` shapes) or the strategy asks for pieces
(:attr:`~elastic.strategies.actions.Submit.pieces`: the planner's own). The jobs wait in the queue
apart: one that starts before the others runs the request's tasks alone, in waves, until they do, and
asked for one wave it can run out with tasks on it (a lost task, and a follow-up's wait). So each job
asks :data:`WAVES` waves where the scheduler's estimate starts it no later (within :data:`WAVES_SLACK`)
than with one (:func:`waves_walltime`); without an estimate, one wave (the walltime rule's follow-up
continues a job that runs out). Unused walltime is not charged.

One rule for every strategy: the planner asks it for its pieces
(:meth:`~elastic.strategies.planner_waits.QueueWaits.waves_walltime`), Big-Job and Per-Stage for the
jobs run control splits their requests into (:func:`split_walltime`, from
:attr:`~elastic.strategies.view.RunView.job_widths`). Until the baselines asked it too, the comparison
gave it to the planner alone: on Seismology 56 (busy synthetic queue, 30 runs) `asa` was the fastest of
the three, 10.49 h against split Big-Job's and split Per-Stage's 12.65 h, at 1.11x split Per-Stage's
core-hours, and in the 19 runs where no strategy lost a task to its walltime the three were the same;
in the other 11, the split baselines' first jobs ran ``sG1IterDecon`` in two waves on a one-wave
walltime and lost a straggler. With the rule, split Per-Stage took 10.30 h at 224.9 core-hours and
split Big-Job 10.19 h at 226.3, against `asa`'s 10.49 h at 222.5 (``docs/results/strategies.md``,
"Every strategy's pieces ask two waves").
"""

from __future__ import annotations

from elastic.strategies.actions import Submit
from elastic.strategies.view import Releasing, RunView

__all__ = [
    "WAVES",
    "WAVES_SLACK",
    "initial_request",
    "split_walltime",
    "waves_of",
    "waves_walltime",
    "widest_job",
]

WAVES = 2
"""Waves of its request's tasks a batch job asks walltime for where that costs no wait."""

WAVES_SLACK = 60.0
"""Seconds more of estimated wait that still count as no later (Slurm's limits are whole minutes)."""


def waves_walltime(
    view: RunView, width: int, walltime: float, idling: float = 0.0, releasing: Releasing = ()
) -> float:
    """Return the walltime a batch job of ``width`` cores asks for tasks of ``walltime``: one wave, or two.

    :data:`WAVES` times ``walltime`` where the scheduler's estimate (:attr:`RunView.estimate`) starts a
    job asking it no later, within :data:`WAVES_SLACK`, than one asking ``walltime``; never more than the
    partition's limit (``knowledge.max_walltime``). ``idling``: walltime asked on top of either, to idle
    until the tasks' need. ``releasing``: allocations of the run released by then, as the estimate takes.

    Examples
    --------
    >>> from elastic.strategies.knowledge import Knowledge
    >>> from elastic.workflow import builtin_workflow
    >>> wf = builtin_workflow("montage")
    >>> def view(waits):  # the estimate: a wait for a job asking up to 1 h, another above
    ...     est = lambda cores, walltime, releasing=(): waits[walltime > 3600]
    ...     return RunView(0.0, wf, (), (), Knowledge(wf), estimate=est)
    >>> waves_walltime(view((600.0, 630.0)), 14, 3600.0), waves_walltime(view((600.0, 5000.0)), 14, 3600.0)
    (7200.0, 3600.0)
    """
    one = walltime + idling
    if view.estimate is None:
        return one
    waves = walltime * WAVES + idling
    cap = view.knowledge.max_walltime
    if cap is not None:
        waves = min(waves, max(cap, one))
    if waves <= one:
        return one
    short_wait = view.estimate(width, one, releasing)
    if short_wait is None:
        return one
    long_wait = view.estimate(width, waves, releasing)
    return waves if long_wait is not None and long_wait <= short_wait + WAVES_SLACK else one


def split_walltime(view: RunView, cores: int, walltime: float, task: int = 1) -> float:
    """Return the walltime of a request of ``cores`` asked in one piece, for tasks of ``task`` cores.

    Where run control submits it as several batch jobs (:attr:`RunView.job_widths`), the walltime
    :func:`waves_walltime` gives its widest job; else ``walltime``.
    """
    widest = widest_job(view, cores, 1, task)
    return walltime if widest is None else waves_walltime(view, widest, walltime)


def widest_job(view: RunView, cores: int, pieces: int, task: int = 1) -> int | None:
    """Return the width of the widest batch job a request of ``cores`` in ``pieces`` is submitted as.

    Each of the near-equal pieces is split again where run control submits a piece as several jobs
    (:attr:`RunView.job_widths`: the run's ``job_cores``), for tasks of ``task`` cores. None where the
    request is one job: its walltime is its stages' (one wave).

    A strategy asks the scheduler's estimate for that job (:func:`waves_walltime`). Asked for the piece
    instead, a request of jobs of one task was priced as a 14-core job where its jobs were of one core:
    CyberShake 28 on the Lublin-Feitelson trace, run 5, ``asa`` in jobs of one task asked two waves
    (9,804 s) because a 14-core job waited 13 h either way, and its jobs of one core, which would have
    started at once with one wave, waited 10.3 h; fine Per-Stage's (4,431 s) started at once. Checked
    on issue 28's grid (``asa`` in jobs of one task against every shape): HPC2N replay 13 to 15 cells
    met, synthetic queue 6 to 7 (but SRASearch 56 there now slower than both baselines), the held-out
    trace 12 to 15 (``docs/results/strategies.md``, "A merged stage's walltime").

    >>> from elastic.strategies.knowledge import Knowledge
    >>> from elastic.workflow import builtin_workflow
    >>> wf = builtin_workflow("montage")
    >>> plain = RunView(0.0, wf, (), (), Knowledge(wf))
    >>> fine = RunView(0.0, wf, (), (), Knowledge(wf), job_widths=lambda cores, task: (1,) * cores)
    >>> widest_job(plain, 28, 1), widest_job(plain, 28, 2), widest_job(fine, 28, 2), widest_job(fine, 1, 1)
    (None, 14, 1, None)
    """
    pieces = min(pieces, cores)
    piece = -(-cores // pieces)
    widths = (piece,) if view.job_widths is None else view.job_widths(piece, task)
    if pieces < 2 and len(widths) < 2:
        return None
    return max(widths)


def waves_of(asked: float, walltime: float) -> int:
    """Return the waves of tasks of ``walltime`` that a request asking ``asked`` (no cover in it) holds.

    :data:`WAVES` where it holds them all, else 1 (:attr:`~elastic.strategies.actions.Submit.waves`).

    >>> waves_of(7200.0, 3600.0), waves_of(5000.0, 3600.0)
    (2, 1)
    """
    return WAVES if asked >= walltime * WAVES else 1


def initial_request(view: RunView, label: str, cores: int, task: int = 1) -> Submit:
    """Return the first request for ``label`` (a stage, or ``"*"``) of ``cores``, for tasks of ``task``.

    The first value of ``label``'s speculative sequence, two waves of it where run control submits the
    request as several batch jobs and that costs no wait (:func:`split_walltime`), with the waves it
    asked recorded (:attr:`~elastic.strategies.actions.Submit.waves`): Big-Job's and Per-Stage's rule.
    """
    walltime = view.knowledge.walltime(label)
    asked = split_walltime(view, cores, walltime, task)
    return Submit(label, cores, asked, reason="initial", waves=waves_of(asked, walltime))

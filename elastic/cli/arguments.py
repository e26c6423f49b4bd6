"""Option groups shared by several ``elastic`` subcommands.

The fidelity-mode options (``simulate``, ``fidelity``), the priority model (``simulate``, ``compare``,
``run``) and the mock backend's background options (``compare``, ``run``) are defined once here, so the
subcommands agree on spelling, defaults and error messages; the types of single values (durations,
windows, core ranges, seeds, bounded counts) are in :mod:`elastic.cli.values`.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic.cli.values import (
    max_allocations,
    parse_cores,
    parse_reserve,
    positive_duration,
    positive_float,
    processors,
    submission_rate,
)
from elastic.errors import ConfigError

if TYPE_CHECKING:
    from elastic.backends.mock import MockBackend
    from elastic.simulator.trace import SwfReading
    from elastic.simulator.workload import Workload

__all__ = [
    "BackgroundSetup",
    "MODES",
    "PRIORITIES",
    "add_background_arguments",
    "add_capacity_window",
    "add_mode_arguments",
    "add_priority_argument",
    "add_queue_rules_argument",
    "add_submission_rate_argument",
    "capacity_window",
    "check_background_arguments",
    "load_background",
    "mock_backend",
    "mode_engine_from_args",
    "read_trace",
]

MODES: tuple[str, ...] = ("replay", "recorded", "recorded-chain", "calibrated", "capacity")
"""Mock-backend modes (:class:`~elastic.backends.mock.MockBackend` ``mode=``), kept here so ``--help`` stays
light; a test pins it equal to :data:`elastic.simulator.fidelity.MODES`."""

PRIORITIES: tuple[str, ...] = ("age", "basic", "accrue-always")
"""Priority models (:data:`elastic.simulator.priority.PRIORITY_MODELS`, the first the default), kept here
so ``--help`` stays light; a test pins them equal."""


def read_trace(path: str, command: str, *, needs_waits: str | None = None, **options: Any) -> SwfReading:
    """Read an SWF trace for a subcommand and print, on stderr, every assumption the reader made.

    Parameters
    ----------
    path : str
        The ``--trace`` argument.
    command : str
        Subcommand name, for the warning prefix (``elastic simulate: warning: ...``).
    needs_waits : str or None
        When the command compares with recorded waits, what it does with them: a trace without any
        raises :class:`~elastic.errors.TraceError` saying so (before any simulation).
    **options
        Keyword arguments of :func:`~elastic.simulator.trace.read_swf`.

    Returns
    -------
    SwfReading
    """
    import sys

    from elastic.simulator.trace import read_swf_report, require_recorded_waits

    reading = read_swf_report(path, **options)
    for message in reading.warnings:
        if needs_waits is not None and "no recorded waits" in message:
            continue  # the error below says it
        print(f"elastic {command}: warning: {message}", file=sys.stderr)
    if needs_waits is not None:
        require_recorded_waits(reading.workload, needs_waits)
    return reading


def add_capacity_window(parser: argparse.ArgumentParser) -> None:
    """Add ``--capacity-window`` (the capacity mode's look-back, e.g. ``12h``)."""
    parser.add_argument(
        "--capacity-window",
        type=positive_duration,
        default=None,
        metavar="DURATION",
        help="capacity mode: look-back of the usable-size estimate, e.g. 12h (default: 3 x the trace's "
        "median requested walltime)",
    )


def add_priority_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--priority`` (where a dependency- or ``--begin``-held job ranks once eligible)."""
    parser.add_argument(
        "--priority",
        choices=PRIORITIES,
        default=None,
        help="how the simulated queue ranks a job held by a dependency or --begin once it is eligible: "
        "age = Slurm multifactor, age counted from eligibility, behind every job already waiting "
        "(default); basic = priority/basic, its submit place; accrue-always = multifactor with "
        "PriorityFlags=ACCRUE_ALWAYS, age from submit (same order as basic when age is the only factor)",
    )


def add_submission_rate_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--submission-rate``, ``--max-allocations`` and ``--max-queued`` (where allocation control runs).

    Both set one value, ``submission_rate``: a :class:`~elastic.control.rate.SubmissionLimit` (None: the
    default cap), whichever order they are given in.
    """
    parser.add_argument(
        "--submission-rate",
        type=submission_rate,
        action=_MergeLimit,
        default=None,
        metavar="JOBS_PER_MIN",
        help="submit batch jobs at most this fast, on the backend's clock: N jobs a minute, in (0, 600], "
        "at most a minute's worth (1 to 30) at once (default: 30 at once, then 30 a minute); a run is "
        "slowed, never stopped, by it",
    )
    parser.add_argument(
        "--max-allocations",
        dest="submission_rate",
        type=max_allocations,
        action=_MergeLimit,
        const="max_allocations",
        metavar="N",
        help="batch jobs one run may submit in all, from 1 to 1,000,000 (default 20,000); a run that "
        "reaches it stops, failed, saying so",
    )
    parser.add_argument(
        "--max-queued",
        dest="submission_rate",
        type=max_allocations,
        action=_MergeLimit,
        const="max_queued",
        metavar="N",
        help="requests of one run waiting in the batch queue at once (the backlog), from 1 to 1,000,000 "
        "(default 32); more wait until one starts",
    )


class _MergeLimit(argparse.Action):
    """Fold ``--submission-rate``, ``--max-allocations`` or ``--max-queued`` into the limit so far.

    A rate is a limit; the other two are an int, for the field the argument's ``const`` names.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from dataclasses import replace

        from elastic.control.rate import SubmissionLimit

        current = getattr(namespace, self.dest, None)
        if isinstance(values, SubmissionLimit):
            limit = (
                values
                if current is None
                else replace(values, max_allocations=current.max_allocations, max_queued=current.max_queued)
            )
        else:
            limit = replace(current or SubmissionLimit(), **{self.const: values})
        setattr(namespace, self.dest, limit)


def add_queue_rules_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-queue-rules`` (every subcommand with ``--mode capacity`` has it)."""
    parser.add_argument(
        "--no-queue-rules",
        "--no-fast-queues",
        dest="no_queue_rules",
        action="store_true",
        help="--mode capacity: apply none of the queue rules derived from the trace (by default queues "
        "whose jobs started at once run apart, on cores of their own, and queues of short jobs are "
        "planned first)",
    )


def add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--mode``, ``--cores``, ``--reserve`` and ``--capacity-window`` (used by ``elastic simulate``)."""
    from elastic.simulator.fidelity import MODES

    parser.add_argument(
        "--mode",
        choices=MODES,
        default="replay",
        help=(
            "replay: queue every trace job (default); recorded: pin every job outside --cores at its "
            "recorded start and queue the --cores jobs into the capacity left; recorded-chain: and a "
            "user's jobs start in submit order; calibrated: and --reserve cores held back; capacity: "
            "recorded-chain on the cores the recorded schedule used in the last --capacity-window"
        ),
    )
    parser.add_argument(
        "--cores",
        type=parse_cores,
        default=(16, 128),
        metavar="LO:HI",
        help="recorded modes: size class of the queued jobs (default: 16:128)",
    )
    parser.add_argument(
        "--reserve",
        type=parse_reserve,
        metavar="CORES",
        help="calibrated mode: cores held back (default: fitted on the first half of the queued jobs)",
    )
    add_capacity_window(parser)
    add_queue_rules_argument(parser)


def capacity_window(args: argparse.Namespace) -> float | None:
    """Return ``--capacity-window`` in seconds, or None (derived from the trace)."""
    return None if args.capacity_window is None else float(args.capacity_window)


def mode_engine_from_args(args: argparse.Namespace, workload: Any, console: Any) -> Any:
    """Build the engine of ``elastic simulate --mode`` (a recorded mode) from the parsed arguments."""
    from elastic.simulator.fidelity import calibrate_reserve, evaluated_jobs, mode_engine
    from elastic.simulator.pinned import PINNED_ORDERS

    order = args.policy or "conservative"
    if order not in PINNED_ORDERS or args.speculative:
        raise ConfigError(
            f"--mode {args.mode} plans the queued jobs around the recorded schedule: --policy must be "
            f"conservative or fcfs without --speculative, got --policy {order}"
        )
    reserve = args.reserve or 0
    if args.mode == "calibrated" and args.reserve is None:
        with console.status("fitting --reserve on the first half of the queued jobs"):
            reserve = calibrate_reserve(workload, cores=args.cores, order=order)
        console.print(f"calibrated reserve: {reserve} cores")
    if args.capacity_window is not None and args.mode != "capacity":
        raise ConfigError(f"--capacity-window applies to --mode capacity only, not --mode {args.mode}")
    if args.no_queue_rules and args.mode != "capacity":
        raise ConfigError(f"--no-queue-rules applies to --mode capacity only, not --mode {args.mode}")
    window = capacity_window(args)
    if args.mode == "capacity" and window is None:
        from elastic.simulator.recorded import capacity_window as derived_window

        window = derived_window(workload)
    engine, evaluated = mode_engine(
        workload,
        args.mode,
        cores=args.cores,
        reserve=reserve,
        order=order,
        window=window,
        queues=not args.no_queue_rules,
        priority=args.priority or PRIORITIES[0],
    )
    lo, hi = args.cores
    full = evaluated_jobs(workload, args.cores)
    console.print(
        f"mode {args.mode}: {int(evaluated.sum()):,} jobs of {lo}-{hi} cores queued ({order}), "
        f"{len(engine.pinned):,} pinned at their recorded start"
        + (f", {reserve} cores reserved" if args.mode == "calibrated" else "")
        + (f", usable cores from the last {(window or 0) / 3600:g} h" if args.mode == "capacity" else "")
        + (
            f", {len(first):,} of short queues planned first"
            if (first := getattr(engine.policy, "priority", None))
            else ""
        )
        + (
            f" ({apart:,} of queues with cores of their own simulated apart, not shown)"
            if args.mode == "capacity" and (apart := int(full.sum() - evaluated.sum()))
            else ""
        ),
        highlight=False,
    )
    return engine


def add_background_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the mock backend's background options (shared with ``elastic run``).

    ``--trace``, ``--load``, ``--processors``, ``--policy``, ``--priority``, and the fidelity options
    ``--mode`` and ``--reserve`` (see ``elastic fidelity``): with a trace, ``--mode capacity`` gives
    allocations the queue waits of the traced centre instead of the much shorter waits of a plain EASY
    replay.
    """
    from elastic.experiments import DEFAULT_PROCESSORS
    from elastic.simulator.base import POLICIES

    parser.add_argument("--trace", metavar="PATH", help="SWF trace as background load (default: synthetic)")
    parser.add_argument(
        "--load",
        type=positive_float,
        default=None,
        metavar="FACTOR",
        help="trace arrival-rate factor, with --trace (default: 1)",
    )
    parser.add_argument(
        "--processors",
        type=processors,
        default=None,
        help=f"partition cores: scale the trace to this size, or size of the synthetic machine "
        f"(default: the trace's size, {DEFAULT_PROCESSORS} for synthetic load)",
    )
    parser.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        default=None,
        help="queue policy of the mock backend (default: easy; conservative with a recorded --mode)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="replay",
        help="how the trace loads the queue: replay it (default), or pin its recorded schedule "
        "(recorded, recorded-chain, calibrated, capacity: waits like the real centre's, capacity the "
        "closest; needs --trace)",
    )
    parser.add_argument(
        "--reserve",
        type=parse_reserve,
        default=None,
        metavar="CORES",
        help="--mode calibrated: cores withheld from queued jobs (default: fitted to the trace)",
    )
    add_queue_rules_argument(parser)
    add_priority_argument(parser)


@dataclass(frozen=True, slots=True)
class BackgroundSetup:
    """Background load and how the mock backend replays it, resolved from the command line."""

    workload: Workload
    policy: str
    mode: str
    reserve: int
    priority: str = PRIORITIES[0]
    queue_rules: bool = True
    """``--mode capacity``: apply the queue rules derived from the trace (``--no-queue-rules``: not)."""

    def describe(self) -> str:
        """One line for titles: source, mode, reserve, queue policy and priority model."""
        source = _short_source(self.workload.source)
        extra = "" if self.mode == "replay" else f", mode {self.mode}"
        if self.mode == "calibrated":
            extra += f" (reserve {self.reserve} cores)"
        if self.mode == "capacity" and not self.queue_rules:
            extra += " (no queue rules)"
        from elastic.simulator.priority import describe_priority

        return f"background {source}{extra}, policy {self.policy}, {describe_priority(self.priority)}"


def _short_source(source: str) -> str:
    """Return a workload's source for a title: a synthetic load by job count and seed, a long path by its end.

    Examples
    --------
    >>> _short_source("synthetic(jobs=2000, processors=64, arrival_rate=0.01/s, seed=3)")
    'synthetic load (2000 jobs, seed 3)'
    >>> _short_source("traces/hpc2n.swf.gz")
    'traces/hpc2n.swf.gz'
    """
    if source.startswith("synthetic("):
        fields = dict(re.findall(r"(\w+)=([^,()\[\]]+)", source))
        if "jobs" in fields and "seed" in fields:
            return f"synthetic load ({fields['jobs']} jobs, seed {fields['seed']})"
    return source if len(source) <= 60 else "..." + source[-57:]


def check_background_arguments(args: argparse.Namespace) -> None:
    """Refuse background options that contradict each other (before anything is read or simulated).

    Raises
    ------
    ConfigError
        A recorded ``--mode`` without ``--trace`` or with a ``--policy`` it cannot plan with,
        ``--load`` without ``--trace``, or ``--reserve`` outside ``--mode calibrated``.
    """
    mode = args.mode
    if mode != "replay" and args.trace is None:
        raise ConfigError(
            f"--mode {mode} pins a trace's recorded schedule: give --trace PATH (synthetic load has no "
            "recorded waits), or use --mode replay"
        )
    if args.load is not None and args.trace is None:
        raise ConfigError(
            f"--load {args.load:g} scales a trace's arrival rate: give --trace PATH with it (the "
            "synthetic background has a fixed 90 % offered load), or drop --load"
        )
    if args.reserve is not None and mode != "calibrated":
        raise ConfigError(f"--reserve applies to --mode calibrated only, not --mode {mode}")
    if args.no_queue_rules and mode != "capacity":
        raise ConfigError(f"--no-queue-rules applies to --mode capacity only, not --mode {mode}")
    if mode != "replay" and args.policy is not None:
        from elastic.simulator.pinned import PINNED_ORDERS

        if args.policy not in PINNED_ORDERS:
            raise ConfigError(
                f"--mode {mode} plans the queued jobs around the recorded schedule: --policy must be "
                f"{' or '.join(PINNED_ORDERS)}, got --policy {args.policy}"
            )


def load_background(args: argparse.Namespace) -> BackgroundSetup:
    """Return the background workload and replay settings the arguments ask for.

    For ``--mode calibrated`` without ``--reserve`` the reserve is fitted once here
    (:func:`~elastic.simulator.fidelity.calibrate_reserve`, a few simulations of the trace), not once
    per run.
    """
    from elastic.experiments import DEFAULT_PROCESSORS, default_background
    from elastic.simulator.priority import check_priority

    check_background_arguments(args)
    priority = check_priority(args.priority or PRIORITIES[0])
    mode = args.mode
    policy = args.policy or ("easy" if mode == "replay" else "conservative")
    if args.processors is not None and args.processors < 1:
        raise ConfigError(f"--processors must be >= 1 cores, got {args.processors}")
    if args.trace is not None:
        command = getattr(args, "command", None) or "run"
        needs = None if mode == "replay" else f"--mode {mode} pins the recorded schedule"
        load = 1.0 if args.load is None else args.load
        workload = read_trace(
            args.trace, command, needs_waits=needs, load=load, processors=args.processors
        ).workload
    else:
        processors = DEFAULT_PROCESSORS if args.processors is None else args.processors
        workload = default_background(processors, seed=args.seed)
    reserve = 0
    if mode == "calibrated":
        if args.reserve is not None:
            reserve = args.reserve
        else:
            from elastic.simulator.fidelity import calibrate_reserve

            reserve = calibrate_reserve(workload, order=policy)
    return BackgroundSetup(workload, policy, mode, reserve, priority, not args.no_queue_rules)


def mock_backend(args: argparse.Namespace) -> MockBackend:
    """Return the mock backend of a real run (``elastic run``): the background, on the scaled clock.

    One day of the background runs before the run starts (warm-up), at a start point drawn with
    ``--seed``; four days of it after. The clock runs ``--speedup`` times faster than real time.
    """
    from elastic.backends.mock import MockBackend
    from elastic.experiments import start_points, window

    if not args.speedup > 0:
        raise ConfigError(f"--speedup must be > 0, got {args.speedup}")
    setup = load_background(args)
    background = setup.workload
    warmup, horizon = 86400.0, 4 * 86400.0
    (start,) = start_points(background, 1, seed=args.seed, warmup=warmup, horizon=horizon)
    return MockBackend(
        nodes=background.processors,
        policy=setup.policy,
        mode=setup.mode,
        reserve=setup.reserve,
        workload=window(background, start - warmup, start + horizon),
        clock="scaled",
        speedup=args.speedup,
        start=warmup,
        priority=setup.priority,
        queue_rules=setup.queue_rules,
    )

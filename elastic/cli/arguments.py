"""Argument types and option groups shared by several ``elastic`` subcommands.

Durations, windows and core ranges (``simulate``, ``fidelity``, ``compare``, ``run``), the fidelity-mode
options (``simulate``, ``fidelity``) and the mock backend's background options (``compare``, ``run``) are
defined once here, so the subcommands agree on spelling, defaults and error messages.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic.errors import ConfigError

if TYPE_CHECKING:
    from elastic.simulator.trace import SwfReading
    from elastic.simulator.workload import Workload

__all__ = [
    "BackgroundSetup",
    "MODES",
    "add_background_arguments",
    "add_capacity_window",
    "add_mode_arguments",
    "capacity_window",
    "load_background",
    "mode_engine_from_args",
    "parse_cores",
    "parse_duration",
    "parse_modes",
    "parse_reserve",
    "parse_window",
    "positive_float",
    "positive_int",
    "read_trace",
]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$")

MODES: tuple[str, ...] = ("replay", "recorded", "recorded-chain", "calibrated", "capacity")
"""Mock-backend modes (:class:`~elastic.backends.mock.MockBackend` ``mode=``), kept here so ``--help`` stays
light; a test pins it equal to :data:`elastic.simulator.fidelity.MODES`."""


def parse_duration(text: str) -> float:
    """Parse ``"3600"``, ``"90m"``, ``"720h"`` or ``"30d"`` into seconds.

    Examples
    --------
    >>> parse_duration("2h"), parse_duration("90"), parse_duration("1.5d")
    (7200.0, 90.0, 129600.0)
    """
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"expected a duration like 3600, 90m, 720h or 30d (units s, m, h, d); got {text!r}"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_window(text: str) -> tuple[float, float]:
    """Parse ``START:END`` (each a duration; END may be empty for "to the end") into seconds.

    Examples
    --------
    >>> parse_window("0h:720h")
    (0.0, 2592000.0)
    >>> parse_window("10d:")
    (864000.0, inf)
    """
    start, sep, end = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected START:END like 0h:720h; got {text!r}")
    lo = parse_duration(start) if start.strip() else 0.0
    hi = parse_duration(end) if end.strip() else float("inf")
    if not hi > lo:
        raise argparse.ArgumentTypeError(f"window END must be after START; got {text!r}")
    return lo, hi


def positive_float(text: str) -> float:
    """Parse a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0; got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0; got {text!r}")
    return value


def positive_int(text: str) -> int:
    """Parse an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1; got {text!r}")
    return value


def parse_cores(text: str) -> tuple[int, int]:
    """Parse ``"16:128"`` (or one number, ``"64"``) into an inclusive core range.

    Examples
    --------
    >>> parse_cores("16:128"), parse_cores("64")
    ((16, 128), (64, 64))
    """
    lo, sep, hi = text.partition(":")
    try:
        low = int(lo)
        high = int(hi) if sep else low
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a core range LO:HI like 16:128; got {text!r}") from None
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"core range needs 1 <= LO <= HI; got {text!r}")
    return low, high


def parse_modes(text: str) -> tuple[str, ...]:
    """Parse a comma-separated list of fidelity modes (``replay,capacity``)."""
    from elastic.simulator.fidelity import MODES

    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(
            f"modes must be a comma-separated subset of {','.join(MODES)}; got {text!r}"
        )
    return modes


def parse_reserve(text: str) -> int:
    """Parse a number of reserved cores (>= 0)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of cores >= 0; got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of cores >= 0; got {text!r}")
    return value


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
        type=parse_duration,
        default=None,
        metavar="DURATION",
        help="capacity mode: look-back of the usable-size estimate, e.g. 12h (default: 3 x the trace's "
        "median requested walltime)",
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


def capacity_window(args: argparse.Namespace) -> float | None:
    """Return ``--capacity-window`` in seconds, or None (derived from the trace)."""
    return None if args.capacity_window is None else float(args.capacity_window)


def mode_engine_from_args(args: argparse.Namespace, workload: Any, console: Any) -> Any:
    """Build the engine of ``elastic simulate --mode`` (a recorded mode) from the parsed arguments."""
    from elastic.simulator.fidelity import calibrate_reserve, mode_engine
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
    window = capacity_window(args)
    if args.mode == "capacity" and window is None:
        from elastic.simulator.recorded import capacity_window as derived_window

        window = derived_window(workload)
    engine, evaluated = mode_engine(
        workload, args.mode, cores=args.cores, reserve=reserve, order=order, window=window
    )
    lo, hi = args.cores
    console.print(
        f"mode {args.mode}: {int(evaluated.sum()):,} jobs of {lo}-{hi} cores queued ({order}), "
        f"{len(engine.pinned):,} pinned at their recorded start"
        + (f", {reserve} cores reserved" if args.mode == "calibrated" else "")
        + (f", usable cores from the last {(window or 0) / 3600:g} h" if args.mode == "capacity" else "")
        + (
            f", {len(first):,} of fast queues planned first"
            if (first := getattr(engine.policy, "priority", None))
            else ""
        ),
        highlight=False,
    )
    return engine


def add_background_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the mock backend's background options (shared with ``elastic run``).

    ``--trace``, ``--load``, ``--processors``, ``--policy``, and the fidelity options ``--mode`` and
    ``--reserve`` (see ``elastic fidelity``): with a trace, ``--mode capacity`` gives allocations the
    queue waits of the traced centre instead of the much shorter waits of a plain EASY replay.
    """
    from elastic.experiments import DEFAULT_PROCESSORS

    parser.add_argument("--trace", metavar="PATH", help="SWF trace as background load (default: synthetic)")
    parser.add_argument("--load", type=float, default=1.0, help="trace arrival-rate factor (default: 1)")
    parser.add_argument(
        "--processors",
        type=int,
        default=None,
        help=f"partition cores: scale the trace to this size, or size of the synthetic machine "
        f"(default: the trace's size, {DEFAULT_PROCESSORS} for synthetic load)",
    )
    parser.add_argument(
        "--policy",
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
        type=int,
        default=None,
        metavar="CORES",
        help="--mode calibrated: cores withheld from queued jobs (default: fitted to the trace)",
    )


@dataclass(frozen=True, slots=True)
class BackgroundSetup:
    """Background load and how the mock backend replays it, resolved from the command line."""

    workload: Workload
    policy: str
    mode: str
    reserve: int

    def describe(self) -> str:
        """One line for titles: source, mode and reserve."""
        source = self.workload.source
        if len(source) > 60:  # e.g. synthetic(jobs=..., ...): keep the name, drop the parameter list
            source = source.split("(", 1)[0] + "(...)" if "(" in source else "..." + source[-57:]
        extra = "" if self.mode == "replay" else f", mode {self.mode}"
        if self.mode == "calibrated":
            extra += f" (reserve {self.reserve} cores)"
        return f"background {source}{extra}, policy {self.policy}"


def load_background(args: argparse.Namespace) -> BackgroundSetup:
    """Return the background workload and replay settings the arguments ask for.

    For ``--mode calibrated`` without ``--reserve`` the reserve is fitted once here
    (:func:`~elastic.simulator.fidelity.calibrate_reserve`, a few simulations of the trace), not once
    per run.
    """
    from elastic.experiments import DEFAULT_PROCESSORS, default_background

    mode = args.mode
    if mode != "replay" and args.trace is None:
        raise ConfigError(
            f"--mode {mode} pins a trace's recorded schedule: give --trace PATH (synthetic load has no "
            "recorded waits), or use --mode replay"
        )
    policy = args.policy or ("easy" if mode == "replay" else "conservative")
    if args.processors is not None and args.processors < 1:
        raise ConfigError(f"--processors must be >= 1 cores, got {args.processors}")
    if args.trace is not None:
        command = getattr(args, "command", None) or "run"
        needs = None if mode == "replay" else f"--mode {mode} pins the recorded schedule"
        workload = read_trace(
            args.trace, command, needs_waits=needs, load=args.load, processors=args.processors
        ).workload
    else:
        workload = default_background(args.processors or DEFAULT_PROCESSORS, seed=args.seed)
    reserve = 0
    if mode == "calibrated":
        if args.reserve is not None:
            if args.reserve < 0:
                raise ConfigError(f"--reserve must be >= 0 cores, got {args.reserve}")
            reserve = args.reserve
        else:
            from elastic.simulator.fidelity import calibrate_reserve

            reserve = calibrate_reserve(workload, order=policy)
    elif args.reserve is not None:
        raise ConfigError(f"--reserve applies to --mode calibrated only, not --mode {mode}")
    return BackgroundSetup(workload, policy, mode, reserve)

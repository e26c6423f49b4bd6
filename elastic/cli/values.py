"""Types of single option values shared by the ``elastic`` subcommands (argparse ``type=``).

Durations, windows, core ranges, seeds, finite numbers and bounded counts are parsed once here, so the
subcommands agree on spelling and error messages: a bad value is refused by argparse (exit code 2)
with the option, the value and what is allowed, before any work.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from elastic.control.rate import SubmissionLimit

__all__ = [
    "finite_float",
    "int_in_range",
    "nonnegative_float",
    "parse_cores",
    "parse_duration",
    "max_allocations",
    "parse_modes",
    "parse_peaks",
    "parse_reserve",
    "parse_seed",
    "parse_window",
    "positive_duration",
    "positive_float",
    "positive_int",
    "name_list",
    "processors",
    "speedup",
    "submission_rate",
]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$")


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


def positive_duration(text: str) -> float:
    """Parse a duration (as :func:`parse_duration`) that must be > 0 seconds."""
    value = parse_duration(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a duration > 0 like 90m or 12h; got {text!r}")
    return value


def _finite(text: str, allowed: str, ok: Callable[[float], bool]) -> float:
    """Parse a finite number for which ``ok`` holds; the error says it expected ``allowed``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {allowed}; got {text!r}") from None
    if not (math.isfinite(value) and ok(value)):
        raise argparse.ArgumentTypeError(f"expected {allowed}; got {text!r}")
    return value


def positive_float(text: str) -> float:
    """Parse a finite number > 0 (``nan`` and ``inf`` are refused).

    Examples
    --------
    >>> positive_float("1.5")
    1.5
    """
    return _finite(text, "a finite number > 0", lambda value: value > 0)


def nonnegative_float(text: str) -> float:
    """Parse a finite number >= 0 (``nan`` and ``inf`` are refused)."""
    return _finite(text, "a finite number >= 0", lambda value: value >= 0)


def finite_float(text: str) -> float:
    """Parse a finite number (``nan`` and ``inf`` are refused)."""
    return _finite(text, "a finite number", lambda value: True)


def positive_int(text: str) -> int:
    """Parse an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1; got {text!r}")
    return value


def speedup(text: str) -> float:
    """Parse a mock clock speed-up within :data:`~elastic.limits.MIN_SPEEDUP` .. ``MAX_SPEEDUP``.

    Examples
    --------
    >>> speedup("60")
    60.0
    """
    from elastic.limits import SPEEDUP_RANGE, speedup_problem

    try:
        problem = speedup_problem(float(text))
    except ValueError:
        problem = "not a number"
    if problem is not None:
        raise argparse.ArgumentTypeError(f"expected a speed-up {SPEEDUP_RANGE} ({problem}); got {text!r}")
    return float(text)


def submission_rate(text: str) -> SubmissionLimit:
    """Parse ``--submission-rate``: batch jobs a minute, in ``(0, MAX_PER_MINUTE]``.

    At most a minute's worth go at once (:func:`~elastic.control.rate.submission_limit`).

    Examples
    --------
    >>> submission_rate("6").burst
    6
    """
    from elastic.control.rate import MAX_PER_MINUTE, submission_limit

    allowed = f"jobs a minute, a number in (0, {MAX_PER_MINUTE:g}]"
    return submission_limit(_finite(text, allowed, lambda value: 0 < value <= MAX_PER_MINUTE))


def max_allocations(text: str) -> int:
    """Parse ``--max-allocations``: batch jobs one run may submit, from 1 to ``MAX_ALLOCATIONS``.

    Examples
    --------
    >>> max_allocations("500")
    500
    """
    from elastic.control.rate import MAX_ALLOCATIONS

    return int_in_range(1, MAX_ALLOCATIONS, "limits in elastic.control.rate")(text)


def processors(text: str) -> int:
    """Parse a partition size in cores, from 1 to :data:`~elastic.limits.MAX_PROCESSORS`.

    Examples
    --------
    >>> processors("512")
    512
    """
    from elastic.limits import MAX_PROCESSORS

    return int_in_range(1, MAX_PROCESSORS, "twice the largest machine built; limits in elastic.limits")(text)


def parse_seed(text: str) -> int:
    """Parse a random seed: an integer >= 0 (what :func:`numpy.random.default_rng` accepts).

    Examples
    --------
    >>> parse_seed("7")
    7
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed, an integer >= 0; got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a seed, an integer >= 0; got {text!r}")
    return value


def int_in_range(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """Return an argparse type that accepts integers in ``[low, high]``.

    Parameters
    ----------
    low, high : int
        Smallest and largest value accepted.
    why : str, default ""
        Why ``high`` is the limit (e.g. what the run would cost above it), shown when it is exceeded.

    Examples
    --------
    >>> int_in_range(1, 10)("3")
    3
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer from {low:,} to {high:,}; got {text!r}"
            ) from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer from {low:,} to {high:,}; got {text!r}")
        if value > high:
            reason = f" ({why})" if why else ""
            raise argparse.ArgumentTypeError(f"at most {high:,} is allowed{reason}; got {text!r}")
        return value

    parse.__name__ = f"integer in [{low}, {high}]"  # what argparse names the type in its messages
    return parse


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


def parse_peaks(text: str) -> tuple[int, ...]:
    """Parse a comma-separated list of peak core counts, e.g. ``"28,56,112"`` (each >= 1, no repeats).

    Examples
    --------
    >>> parse_peaks("28, 56,112")
    (28, 56, 112)
    """
    items = [t.strip() for t in text.split(",")]
    if not all(t.isdigit() and int(t) >= 1 for t in items):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated whole numbers of cores >= 1, like 28,56,112; got {text!r}"
        )
    peaks = tuple(int(t) for t in items)
    if len(set(peaks)) != len(peaks):
        raise argparse.ArgumentTypeError(f"a peak core count is repeated in {text!r}")
    return peaks


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


def name_list(kind: str, choices: Collection[str]) -> Callable[[str], list[str]]:
    """Return an argparse ``type`` parsing a comma-separated list of names, each one of ``choices``.

    Parameters
    ----------
    kind : str
        What the names are, for the message (``"strategy"``, ``"predictor(s)"``).
    choices : collection of str
        The names allowed, in the order the message lists them.

    Examples
    --------
    >>> name_list("strategy", ["bigjob", "asa"])(" asa, bigjob,")
    ['asa', 'bigjob']
    >>> name_list("strategy", ["bigjob", "asa"])("fast")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: unknown strategy fast; choose from: bigjob, asa
    """

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in choices]
        if not names or bad:
            raise argparse.ArgumentTypeError(
                f"unknown {kind} {', '.join(bad) or '(none)'}; choose from: {', '.join(choices)}"
            )
        return names

    return parse

"""``elastic walltime``: speculative walltime sequences and what each strategy is expected to cost.

- ``elastic walltime --dist truncnorm --mu 8 --sigma 2 --lower 0 --upper 20 --points 200 --unit h
  [--zeta 0.5]``: any ``scipy.stats`` continuous distribution by name, its shape parameters with
  ``--param NAME=VALUE``, location/scale with ``--mu``/``--loc`` and ``--sigma``/``--scale``.
- ``elastic walltime --runtimes FILE [--upper SECONDS]``: one runtime in seconds per line, optional
  second column ``1`` when the run was killed at its walltime (censored, a lower bound).

Prints the request sequence and the expected cost of TOptimal, ATOptimal (with ``--zeta``), Classical
HPC, Neuroscience and MASI side by side; for a runtimes file also each strategy's mean cost when the
file is replayed in order.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from scipy import stats

from elastic.cli.commands import add_command
from elastic.cli.values import (
    finite_float,
    int_in_range,
    nonnegative_float,
    parse_seed,
    positive_float,
)
from elastic.errors import ConfigError, TraceError, UnknownNameError
from elastic.learners.toptimal import MAX_TOPTIMAL_POINTS, atoptimal, toptimal
from elastic.learners.walltime import ESDD, esdd, esdd_from_runtimes
from elastic.learners.walltime_baselines import (
    MASI,
    MAX_SAMPLED_RUNTIMES,
    ClassicalHPC,
    FixedSequence,
    Neuroscience,
    WalltimeStrategy,
    strategy_expectation,
)
from elastic.learners.walltime_cost import CostModel, empirical_cost, expected_cost, expected_makespan

__all__ = ["continuous_distribution", "read_runtimes", "register"]

_UNITS = {"s": 1.0, "h": 3600.0}


def register(subparsers: Any) -> None:
    """Add the ``walltime`` subcommand."""
    parser = add_command(
        subparsers,
        "walltime",
        _run,
        description=(
            "Compute the walltime requests a stage with an uncertain runtime should make in turn "
            "(each killed run restarts with the next, longer request) and compare the expected cost "
            "of TOptimal, ATOptimal, Classical HPC, Neuroscience and MASI."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--runtimes", metavar="FILE", help="observed runtimes: 'SECONDS [CENSORED 0|1]' per line"
    )
    source.add_argument(
        "--dist", metavar="NAME", help="a scipy.stats continuous distribution, e.g. truncnorm"
    )
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="shape parameter")
    parser.add_argument(
        "--mu", "--loc", dest="loc", type=finite_float, default=None, help="location (mean of norm)"
    )
    parser.add_argument("--sigma", "--scale", dest="scale", type=positive_float, default=None, help="scale")
    parser.add_argument(
        "--lower", type=nonnegative_float, default=None, help="smallest runtime a (default 0 / support)"
    )
    parser.add_argument(
        "--upper", type=positive_float, default=None, help="largest request b (default: support/data)"
    )
    points = int_in_range(1, MAX_TOPTIMAL_POINTS, "TOptimal is O(n^2): more would run for minutes")
    parser.add_argument(
        "--points", type=points, default=200, help="intervals of the discretisation (default 200)"
    )
    parser.add_argument("--zeta", type=float, default=None, help="backfilling rate in [0, 1): adds ATOptimal")
    parser.add_argument("--at-points", type=points, default=50, help="intervals for ATOptimal (default 50)")
    parser.add_argument(
        "--unit", choices=sorted(_UNITS), default="s", help="unit of times given and printed (file: seconds)"
    )
    parser.add_argument(
        "--alpha", type=nonnegative_float, default=1.0, help="cost per reserved time unit (default 1)"
    )
    parser.add_argument(
        "--beta", type=nonnegative_float, default=0.0, help="cost per used time unit (default 0)"
    )
    parser.add_argument(
        "--gamma", type=nonnegative_float, default=0.0, help="cost per submission, in --unit (default 0)"
    )
    draws = int_in_range(1, MAX_SAMPLED_RUNTIMES, "the histories are drawn at once")
    parser.add_argument(
        "--history", type=draws, default=10, help="runs Neuroscience/MASI look back (default 10)"
    )
    parser.add_argument(
        "--samples", type=draws, default=1000, help="sampled histories for them (default 1000)"
    )
    parser.add_argument(
        "--seed", type=parse_seed, default=0, help="seed of the sampled histories (default 0)"
    )


def _continuous_names() -> list[str]:
    return sorted(name for name in dir(stats) if isinstance(getattr(stats, name), stats.rv_continuous))


def continuous_distribution(
    name: str,
    params: Sequence[str] = (),
    *,
    loc: float | None = None,
    scale: float | None = None,
    lower: float | None = None,
    upper: float | None = None,
) -> Any:
    """Freeze a ``scipy.stats`` continuous distribution from command-line style arguments.

    Parameters
    ----------
    name : str
        Distribution name, e.g. ``"lognorm"``.
    params : sequence of str
        Shape parameters as ``"NAME=VALUE"``. For ``truncnorm`` the shapes ``a``, ``b`` default to
        ``(lower - loc) / scale`` and ``(upper - loc) / scale``.
    loc, scale : float or None
        Location and scale (``scipy.stats`` defaults 0 and 1).
    lower, upper : float or None
        Bounds, used for ``truncnorm``'s defaults.

    Returns
    -------
    frozen scipy.stats distribution

    Raises
    ------
    UnknownNameError
        ``name`` is not a continuous distribution; lists close matches.
    ConfigError
        An unknown, missing or non-numeric shape parameter, or parameters scipy rejects.
    """
    names = _continuous_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=8, cutoff=0.5)
        raise UnknownNameError("distribution", name, close or names)
    family = getattr(stats, name)
    shape_names = [s.strip() for s in (family.shapes or "").split(",") if s.strip()]
    shapes: dict[str, float] = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in shape_names:
            allowed = ", ".join(shape_names) or "none"
            raise ConfigError(f"--param {item!r}: {name} takes shape parameters: {allowed} (as NAME=VALUE)")
        try:
            shapes[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--param {item!r}: {value!r} is not a number") from None
    kwargs: dict[str, float] = {}
    if loc is not None:
        kwargs["loc"] = loc
    if scale is not None:
        if scale <= 0:
            raise ConfigError(f"--sigma/--scale must be > 0; got {scale!r}")
        kwargs["scale"] = scale
    if name == "truncnorm":
        centre, spread = kwargs.get("loc", 0.0), kwargs.get("scale", 1.0)
        if "a" not in shapes and lower is not None:
            shapes["a"] = (lower - centre) / spread
        if "b" not in shapes and upper is not None:
            shapes["b"] = (upper - centre) / spread
    missing = [s for s in shape_names if s not in shapes]
    if missing:
        raise ConfigError(f"{name} needs " + " ".join(f"--param {s}=VALUE" for s in missing))
    frozen = family(**shapes, **kwargs)
    if any(math.isnan(float(bound)) for bound in frozen.support()):
        raise ConfigError(
            f"scipy.stats rejects {name} with shapes {shapes} and {kwargs}: check the parameters"
        )
    return frozen


def read_runtimes(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Read ``SECONDS [CENSORED]`` lines; ``#`` starts a comment, blank lines are skipped.

    Parameters
    ----------
    path : str
        The file.

    Returns
    -------
    runtimes : ndarray of float
        Seconds, in file order.
    censored : ndarray of bool
        True where the second column is ``1``.

    Raises
    ------
    TraceError
        With the file and line of the first bad line, or when the file has no runtime.
    """
    # Hand-parsed rather than numpy.loadtxt so that every error names its line.
    runtimes: list[float] = []
    censored: list[bool] = []
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(path, None, f"cannot read the runtimes file: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(
            path,
            line,
            f"byte 0x{data[exc.start]:02x} is not UTF-8 text: a runtimes file is text, "
            "'SECONDS [CENSORED 0|1]' per line",
        ) from None
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split("#", 1)[0].replace(",", " ").split()
        if not fields:
            continue
        if len(fields) > 2:
            raise TraceError(path, number, f"expected 'SECONDS [CENSORED 0|1]', got {raw.strip()!r}")
        try:
            value = float(fields[0])
        except ValueError:
            raise TraceError(path, number, f"runtime {fields[0]!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0:
            raise TraceError(path, number, f"runtime must be a finite number of seconds >= 0; got {value}")
        flag = fields[1] if len(fields) == 2 else "0"
        if flag not in ("0", "1"):
            raise TraceError(path, number, f"censored flag must be 0 or 1; got {flag!r}")
        runtimes.append(value)
        censored.append(flag == "1")
    if not runtimes:
        raise TraceError(path, None, "no runtimes found (one 'SECONDS [CENSORED 0|1]' per line)")
    return np.asarray(runtimes, dtype=np.float64), np.asarray(censored, dtype=bool)


def _replay(
    strategy: WalltimeStrategy,
    runtimes: np.ndarray,
    censored: np.ndarray,
    upper: float,
    cost: CostModel,
    window: int,
) -> float:
    """Mean cost over the uncensored runs, each seeing only the last ``window`` runtimes before it."""
    finished = np.flatnonzero(~censored)
    if finished.size == 0:
        return math.nan
    if isinstance(strategy, (FixedSequence, ClassicalHPC)):
        return empirical_cost(strategy.requests((), upper), runtimes[finished], cost)
    costs = [
        empirical_cost(
            strategy.requests(runtimes[max(0, r - window) : r].tolist(), upper), runtimes[r : r + 1], cost
        )
        for r in finished
    ]
    return float(np.mean(costs))


def _run(args: argparse.Namespace) -> int:
    unit = _UNITS[args.unit]

    def to_s(value: float | None) -> float | None:
        return None if value is None else value * unit

    if args.samples * args.history > MAX_SAMPLED_RUNTIMES:
        raise ConfigError(
            f"--samples {args.samples:,} x --history {args.history:,} runtimes to draw; at most "
            f"{MAX_SAMPLED_RUNTIMES:,} are allowed: lower one of them"
        )
    cost = CostModel(alpha=args.alpha, beta=args.beta, gamma=args.gamma * unit)
    runtimes = censored = None
    if args.runtimes is not None:
        runtimes, censored = read_runtimes(args.runtimes)
        largest = float(runtimes.max())
        if args.upper is None and bool(censored[runtimes == largest].any()):
            raise ConfigError(  # said here in the command's words, not the library's upper=
                f"{args.runtimes}: the longest run ({largest:g} s) was killed (censored), so runs can last "
                f"longer: give --upper, in {args.unit}, the largest walltime you may request (e.g. the "
                "partition's time limit)"
            )
        if args.upper is not None and largest > (to_s(args.upper) or 0.0):
            raise ConfigError(
                f"{args.runtimes}: a run took {largest:g} s, more than --upper {args.upper:g} {args.unit}; "
                "raise --upper or check the file"
            )
        lower = to_s(args.lower) or 0.0
        dist = esdd_from_runtimes(runtimes, censored, lower=lower, upper=to_s(args.upper), points=args.points)
        coarse = esdd_from_runtimes(runtimes, censored, lower=lower, upper=dist.upper, points=args.at_points)
        source = f"{runtimes.size} runs from {args.runtimes} ({int(censored.sum())} censored, Kaplan-Meier)"
    else:
        frozen = continuous_distribution(
            args.dist,
            args.param,
            loc=to_s(args.loc),
            scale=to_s(args.scale),
            lower=to_s(args.lower),
            upper=to_s(args.upper),
        )
        low, high = (float(x) for x in frozen.support())
        lower = args.lower * unit if args.lower is not None else max(0.0, low)
        upper = args.upper * unit if args.upper is not None else high
        if not math.isfinite(upper):
            raise ConfigError(f"--upper is required: {args.dist} is unbounded above")
        dist = esdd(frozen, lower, upper, args.points)
        coarse = esdd(frozen, lower, upper, args.at_points)
        source = f"{args.dist} on [{lower / unit:g}, {upper / unit:g}] {args.unit}"

    strategies: list[tuple[WalltimeStrategy, str]] = []
    # ATOptimal first: it refuses a state space too large for --at-points before TOptimal's work.
    adaptive = None if args.zeta is None else atoptimal(coarse.values, coarse.probs, zeta=args.zeta)
    optimal = toptimal(dist.values, dist.probs, alpha=cost.alpha, beta=cost.beta, gamma=cost.gamma)
    strategies.append((FixedSequence("TOptimal", optimal.requests), ""))
    if adaptive is not None:
        strategies.append((FixedSequence(f"ATOptimal (zeta={args.zeta:g})", adaptive.requests), ""))
    strategies.append((ClassicalHPC(), ""))
    strategies.append((Neuroscience(window=args.history), f"max(last {args.history}) then b"))
    strategies.append((MASI(window=args.history), f"mean(last {args.history}), x1.4 per kill"))

    table = _table(args, strategies, dist, cost, runtimes, censored, unit)
    console = Console(width=max(100, Console().width))
    delta = (dist.upper - dist.lower) / dist.points / unit
    console.print(
        f"Runtime distribution: {source}; ESDD n={dist.points} (delta={delta:g} {args.unit}), "
        f"mean {dist.mean() / unit:.4g} {args.unit}",
        markup=False,
    )
    console.print(table)
    notes = [
        f"cost = {args.alpha:g} x reserved + {args.beta:g} x used + {args.gamma:g} {args.unit} per "
        f"submission, in {args.unit}",
        f"Neuroscience, MASI: mean over {args.samples} histories of {args.history} runs drawn from the "
        f"distribution (seed {args.seed})",
    ]
    if args.zeta is not None:
        notes.append(
            f"ATOptimal computed on n={args.at_points}; makespan with backfilling rate zeta={args.zeta:g}"
        )
    if runtimes is not None:
        notes.append(
            "replay: runs in file order (uncensored only); Neuroscience/MASI see earlier runs only, "
            "TOptimal/ATOptimal are fitted on the whole file (in-sample)"
        )
    for note in notes:
        console.print(note, style="dim", markup=False)
    return 0


def _table(
    args: argparse.Namespace,
    strategies: list[tuple[WalltimeStrategy, str]],
    dist: ESDD,
    cost: CostModel,
    runtimes: np.ndarray | None,
    censored: np.ndarray | None,
    unit: float,
) -> Table:
    table = Table(title=f"Walltime requests ({args.unit})")
    table.add_column("strategy", no_wrap=True)
    table.add_column("requests", overflow="fold")
    table.add_column("expected cost", justify="right")
    if args.zeta is not None:
        table.add_column(escape(f"E[makespan], zeta={args.zeta:g}"), justify="right")
    if runtimes is not None:
        table.add_column("replay cost", justify="right")

    def expect(strategy: WalltimeStrategy, metric: Callable[[tuple[float, ...], ESDD], float]) -> float:
        if isinstance(strategy, (FixedSequence, ClassicalHPC)):
            return metric(strategy.requests((), dist.upper), dist)
        return strategy_expectation(
            strategy, dist, metric, history=args.history, samples=args.samples, seed=args.seed
        )

    for strategy, description in strategies:
        if description and runtimes is not None:
            shown = strategy.requests(runtimes.tolist(), dist.upper)
            requests = ", ".join(f"{t / unit:.6g}" for t in shown) + " (next run)"
        elif description:
            requests = description
        else:
            requests = ", ".join(f"{t / unit:.6g}" for t in strategy.requests((), dist.upper))
        row = [
            strategy.name,
            requests,
            f"{expect(strategy, lambda t, d: expected_cost(t, d, cost)) / unit:.4f}",
        ]
        if args.zeta is not None:
            makespan = expect(strategy, functools.partial(expected_makespan, zeta=float(args.zeta)))
            row.append(f"{makespan / unit:.4f}")
        if runtimes is not None and censored is not None:
            replayed = _replay(strategy, runtimes, censored, dist.upper, cost, args.history)
            row.append(f"{replayed / unit:.4f}")
        table.add_row(*row)
    return table

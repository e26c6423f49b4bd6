"""``--weight W`` of ``elastic run`` and ``elastic compare``: ``asa``'s price of a second of makespan.

Given to ``asa`` only (``Planner(weight=...)``, :data:`elastic.strategies.planner.WEIGHT` by default),
refused before any work where it would change nothing or is out of range, and said in the tables and
reports it was used for.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from elastic.cli.values import positive_float
from elastic.errors import ConfigError, UnknownNameError

__all__ = [
    "add_weight_argument",
    "check_weight",
    "is_asa",
    "options_by_strategy",
    "strategy_options",
    "weight_text",
]


def is_asa(label: str) -> bool:
    """Whether a strategy row label is ``asa`` in any allocation shape (``--weight`` is its option).

    Examples
    --------
    >>> [is_asa(s) for s in ("asa", "asa-fine", "asa-paper", "bigjob-split", "nonsense")]
    [True, True, False, False, False]
    """
    from elastic.experiments import parse_strategy

    try:
        return parse_strategy(label)[0] == "asa"
    except UnknownNameError:
        return False


def add_weight_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--weight W``: ``asa``'s price of a second of makespan (``Planner(weight=...)``)."""
    parser.add_argument(
        "--weight",
        type=positive_float,
        default=None,
        metavar="W",
        help="asa's price of a second of makespan, in seconds of the workflow's peak allocation, > 0 and "
        "<= 1e6 (default 0.1: core-hours first; 1: a second of makespan priced as Big-Job pays it)",
    )


def options_by_strategy(args: argparse.Namespace, labels: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Return, per row label of ``labels``, the options the command line gives it (if any)."""
    return {label: options for label in labels if (options := strategy_options(args, label))}


def strategy_options(args: argparse.Namespace, strategy: str) -> dict[str, Any]:
    """Return the options the command line gives ``strategy`` (a row label): ``--weight``, ``asa``'s alone."""
    weight = getattr(args, "weight", None)
    return {"weight": weight} if weight is not None and is_asa(strategy) else {}


def check_weight(args: argparse.Namespace, strategies: list[str]) -> None:
    """Refuse a ``--weight`` out of range, or where no strategy run is ``asa`` (it would change nothing)."""
    from elastic.strategies.planner import MAX_WEIGHT

    weight = getattr(args, "weight", None)
    if weight is None:
        return
    if weight > MAX_WEIGHT:
        raise ConfigError(
            f"--weight must be <= {MAX_WEIGHT:g} (a second of makespan at a million seconds of "
            f"the peak allocation is already priced above every core), got {weight:g}"
        )
    if not any(is_asa(s) for s in strategies):
        advice = "use --strategy asa" if len(strategies) == 1 else "add asa to --strategies"
        raise ConfigError(
            f"--weight is asa's option (its price of a second of makespan), not "
            f"{' or '.join(strategies)}'s: {advice}, or leave --weight out"
        )


def weight_text(weight: float | None) -> str:
    """Return ``asa``'s weight as a table or a report says it: ``0.1 (default)`` or ``1 (--weight)``."""
    from elastic.strategies.planner import WEIGHT

    return f"{WEIGHT:g} (default)" if weight is None else f"{weight:g} (--weight)"

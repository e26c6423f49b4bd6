"""What a reproduced paper returns: its tables (the paper's numbers beside ours) and a verdict per figure.

A figure is *reproduced* when every effect the paper states for it has the stated direction and, where
the paper prints a size, ours lies within a factor 1.5 of the printed range; *reproduced in trend* when
the directions hold but a size falls outside that band; *not reproduced* when a direction fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "REPRODUCED",
    "IN_TREND",
    "NOT_REPRODUCED",
    "Check",
    "PaperReport",
    "Table",
    "check_request",
    "size_verdict",
]

REPRODUCED = "reproduced"
IN_TREND = "in trend"
NOT_REPRODUCED = "not reproduced"

#: A printed size counts as matched within this factor of the paper's range.
SIZE_SLACK = 1.5


def check_request(paper: str, figures: Sequence[int], available: Sequence[int], runs: int) -> None:
    """Refuse a figure ``paper`` does not have, or ``runs < 1``, before any work (a ConfigError)."""
    from elastic.errors import ConfigError

    bad = sorted(set(figures) - set(available))
    if bad:
        raise ConfigError(f"the {paper} paper has no figure {bad[0]}; choose from {tuple(available)}")
    if runs < 1:
        raise ConfigError(f"runs must be >= 1, got {runs}")


def size_verdict(direction: bool, size: float | None, low: float, high: float) -> str:
    """Return the verdict of one effect.

    Parameters
    ----------
    direction : bool
        Whether the effect has the direction the paper states.
    size : float or None
        Our size of the effect (e.g. a relative improvement of 0.27), None when the paper prints none.
    low, high : float
        The paper's printed range for the size (``low <= high``; equal for a single number).

    Returns
    -------
    str
        :data:`REPRODUCED`, :data:`IN_TREND` or :data:`NOT_REPRODUCED`.

    Examples
    --------
    >>> size_verdict(True, 0.27, 0.25, 0.30), size_verdict(True, 0.05, 0.25, 0.30)
    ('reproduced', 'in trend')
    """
    if not direction:
        return NOT_REPRODUCED
    if size is None:
        return REPRODUCED
    return REPRODUCED if low / SIZE_SLACK <= size <= high * SIZE_SLACK else IN_TREND


def worst(verdicts: Sequence[str]) -> str:
    """Return the weakest of several verdicts (a figure is only as reproduced as its weakest effect)."""
    for v in (NOT_REPRODUCED, IN_TREND):
        if v in verdicts:
            return v
    return REPRODUCED


@dataclass(frozen=True, slots=True)
class Check:
    """One figure's verdict.

    Attributes
    ----------
    figure : str
        The paper's figure or table, e.g. ``"Fig. 8"``.
    paper : str
        What the paper prints or states for it.
    ours : str
        What we measured.
    verdict : str
        :data:`REPRODUCED`, :data:`IN_TREND` or :data:`NOT_REPRODUCED`.
    reason : str
        Why (which effect held or failed, and what differs from the paper's setup).
    """

    figure: str
    paper: str
    ours: str
    verdict: str
    reason: str


@dataclass(frozen=True, slots=True)
class Table:
    """A result table: a title, column names and rows of printable cells."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def markdown(self) -> str:
        """Return the table as GitHub-flavoured markdown, preceded by its title in bold."""
        head = "| " + " | ".join(self.columns) + " |"
        rule = "|" + "|".join("---" for _ in self.columns) + "|"
        body = ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join([f"**{self.title}**", "", head, rule, *body])


@dataclass(slots=True)
class PaperReport:
    """Everything one ``elastic reproduce PAPER`` prints.

    Attributes
    ----------
    paper : str
        Short name (``speculative``, ``onthefly``, ``asa``).
    title : str
        The paper's title and venue.
    runs : int
        Random repetitions averaged per point.
    choices : list of str
        Parameters the paper leaves unstated: what was chosen and why.
    tables : list of Table
        Our numbers (and the paper's, where it prints them).
    checks : list of Check
        One verdict per figure.
    """

    paper: str
    title: str
    runs: int
    choices: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def verdicts(self) -> Table:
        """Return the per-figure verdicts as a table (paper beside ours)."""
        return Table(
            "Paper beside ours",
            ("Figure", "Paper", "Ours", "Verdict", "Why"),
            tuple((c.figure, c.paper, c.ours, c.verdict, c.reason) for c in self.checks),
        )

    def markdown(self) -> str:
        """Return the whole report as markdown."""
        parts = [f"### {self.title}", "", f"Runs per point: {self.runs}.", ""]
        if self.checks:
            parts += [self.verdicts().markdown(), ""]
        for t in self.tables:
            parts += [t.markdown(), ""]
        if self.choices:
            parts += ["Parameters the paper does not state:", ""]
            parts += [f"- {c}" for c in self.choices]
            parts.append("")
        return "\n".join(parts)

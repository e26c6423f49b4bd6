"""The small comparison the report's tests write once per session and read (shared constants)."""

from __future__ import annotations

#: The comparison the report tests read: 3 workflows x 2 peak core counts x 3 strategies x 3 runs.
WORKFLOWS = ("montage", "blast", "statistics")
PEAKS = (8, 16)
STRATEGIES = ("bigjob", "perstage", "asa")
RUNS = 3
ARGV = [
    "compare",
    "--workflow",
    ",".join(WORKFLOWS),
    "--peak-cores",
    ",".join(map(str, PEAKS)),
    "--strategies",
    ",".join(STRATEGIES),
    "--runs",
    str(RUNS),
    "--processors",
    "32",
    "--seed",
    "3",
]

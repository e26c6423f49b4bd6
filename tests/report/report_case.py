"""The small comparison the report's tests write once per session and read (shared constants)."""

from __future__ import annotations

#: The comparison the report tests read: 3 workflows x 2 peak core counts x 3 strategies x 3 runs, the
#: baselines in both allocation shapes (5 rows: ``bigjob``, ``bigjob-split``, ...).
WORKFLOWS = ("montage", "blast", "statistics")
PEAKS = (8, 16)
ASKED = ("bigjob", "perstage", "asa")
STRATEGIES = ("bigjob", "bigjob-split", "perstage", "perstage-split", "asa")
RUNS = 3
ARGV = [
    "compare",
    "--workflow",
    ",".join(WORKFLOWS),
    "--peak-cores",
    ",".join(map(str, PEAKS)),
    "--strategies",
    ",".join(ASKED),
    "--shapes",
    "plain,split",
    "--runs",
    str(RUNS),
    "--processors",
    "32",
    "--seed",
    "3",
]

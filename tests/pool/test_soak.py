"""Issue 10's soak, kept short for CI: 2,000 tasks on two agents while a third connection attacks the pool.

The full 20,000 tasks: ``.venv/bin/python benchmarks/bench_soak.py``.
"""

from __future__ import annotations

from tests.pool.soak import soak


def test_every_result_correct_and_once_under_attack_with_bounded_memory() -> None:
    report = soak(2000)
    assert report.wrong == []
    assert len(report.done_events) == 2000 and set(report.done_events.values()) == {1}
    assert report.reruns == 0 and report.lost_agents == 0
    assert report.agents_used == 2
    # ~2,000 refusals a second from the attacker's loop; the tasks take about a second
    assert report.refused > 500, "the attacker was heard while the tasks ran"
    assert report.rss_peak - report.rss_start < 200 * 2**20, "the pool's memory grew without bound"

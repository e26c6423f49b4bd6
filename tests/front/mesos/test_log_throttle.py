"""The HTTP server's repeated lines are throttled per message, and the next window says how many were held."""

from __future__ import annotations

import logging

from elastic.front.mesos.server import LOG_WINDOW, LOGGED_PER_WINDOW, _Throttle


def _record(msg: str) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, msg, None, None)


def test_each_message_passes_a_few_times_a_window_then_says_how_many_it_held() -> None:
    now = [0.0]
    throttle = _Throttle(clock=lambda: now[0])
    passed = [throttle.filter(_record("Invalid HTTP request received.")) for _ in range(20)]
    assert sum(passed) == LOGGED_PER_WINDOW
    assert throttle.filter(_record("another line"))  # counted apart
    now[0] = LOG_WINDOW + 1.0
    later = _record("Invalid HTTP request received.")
    assert throttle.filter(later)
    assert (
        later.getMessage()
        == f"Invalid HTTP request received. (15 more like it in {LOG_WINDOW + 1:.0f} s not shown)"
    )
    assert (
        sum(throttle.filter(_record("Invalid HTTP request received.")) for _ in range(10))
        == LOGGED_PER_WINDOW - 1
    )


def test_what_is_still_held_is_said_when_asked_once() -> None:
    throttle = _Throttle(clock=lambda: 0.0)
    for _ in range(LOGGED_PER_WINDOW + 3):
        throttle.filter(_record("Invalid HTTP request received."))
    throttle.filter(_record("shown once"))
    assert throttle.held_back() == ["Invalid HTTP request received. (3 more like it not shown)"]
    assert throttle.held_back() == []

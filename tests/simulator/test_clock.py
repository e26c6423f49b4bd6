"""The two clocks of the mock backend."""

from __future__ import annotations

import time

import pytest

from elastic.backends.mock import MockBackend
from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.clock import ScaledClock, VirtualClock


def test_virtual_clock_advances_only_on_sleep():
    now = [0.0]
    clock = VirtualClock(lambda t: now.__setitem__(0, t), lambda: now[0])
    assert clock.target() == 0.0
    time.sleep(0.01)
    assert clock.target() == 0.0
    clock.sleep(42.5)
    assert now[0] == 42.5


def test_scaled_clock_target_and_sleep():
    ticks: list[float] = []
    clock = ScaledClock(500.0, 1000.0, lambda: ticks.append(1.0), period=0.005)
    clock.start()
    try:
        t0 = clock.target()
        real = time.monotonic()
        clock.sleep(50.0)  # 0.1 real seconds
        elapsed = time.monotonic() - real
        assert elapsed >= 0.095
        assert clock.target() - t0 >= 50.0 - 1e-6
        assert t0 >= 1000.0
    finally:
        clock.stop()
    assert ticks  # the background thread ticked
    n = len(ticks)
    time.sleep(0.05)
    assert len(ticks) == n  # and stopped


def test_bad_clock_settings():
    with pytest.raises(ConfigError, match=r"speedup must be from 0\.01 to 1000 simulated seconds per real"):
        ScaledClock(0.0, 0.0, lambda: None)
    with pytest.raises(
        ConfigError, match=r"speedup must be from 0\.01 to 1000 .* got 1000000000\.0 \(above 1000"
    ):
        ScaledClock(1e9, 0.0, lambda: None)
    with pytest.raises(UnknownNameError, match="unknown clock 'wall'; choose one of: scaled, virtual"):
        MockBackend(clock="wall")
    with pytest.raises(ConfigError, match="sleep seconds must be >= 0"):
        MockBackend().sleep(-1.0)

"""How simulated time relates to real time: the virtual clock and the scaled wall clock.

With the :class:`VirtualClock` simulated time only moves when asked (``sleep(s)`` processes every event
of the next ``s`` simulated seconds as fast as possible). With the :class:`ScaledClock` simulated time
runs ``speedup`` times faster than real time, so real processes can run "inside" simulated jobs: the
simulation is advanced to ``offset + speedup * (real elapsed)`` on every call and by a background
thread every ``tick`` real seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from elastic.limits import check_speedup

__all__ = ["ScaledClock", "VirtualClock"]


class VirtualClock:
    """Simulated time advances only through :meth:`sleep`.

    Parameters
    ----------
    advance : callable
        ``advance(t)`` processes every event up to simulated time ``t``.
    now : callable
        Returns the current simulated time.
    """

    kind = "virtual"

    def __init__(self, advance: Callable[[float], None], now: Callable[[], float]) -> None:
        self._advance = advance
        self._now = now

    def target(self) -> float:
        """Return the simulated time the simulation should have reached: where it is."""
        return self._now()

    def sleep(self, seconds: float) -> None:
        """Advance the simulation by ``seconds`` simulated seconds, at once."""
        self._advance(self._now() + seconds)

    def start(self) -> None:
        """Nothing to start."""

    def stop(self) -> None:
        """Nothing to stop."""


class ScaledClock:
    """Simulated time = ``offset + speedup * (real seconds since start)``.

    Parameters
    ----------
    speedup : float
        Simulated seconds per real second (K), from :data:`~elastic.limits.MIN_SPEEDUP` to
        :data:`~elastic.limits.MAX_SPEEDUP`.
    offset : float
        Simulated time at :meth:`start`.
    tick : callable
        Called with no argument by the background thread every ``period`` real seconds; it advances
        the simulation to :meth:`target` and polls pilot processes.
    period : float, default 0.01
        Real seconds between two ticks.
    """

    kind = "scaled"

    def __init__(self, speedup: float, offset: float, tick: Callable[[], None], period: float = 0.01) -> None:
        self.speedup = check_speedup(speedup)
        self.offset = float(offset)
        self._tick = tick
        self._period = period
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def target(self) -> float:
        """Return the simulated time that corresponds to the real time now."""
        return self.offset + self.speedup * (time.monotonic() - self._t0)

    def sleep(self, seconds: float) -> None:
        """Really sleep ``seconds / speedup`` real seconds (simulated time keeps running meanwhile)."""
        if seconds > 0:
            time.sleep(seconds / self.speedup)

    def start(self) -> None:
        """Start the real-time origin and the background thread."""
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="elastic-mock-clock", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread (idempotent)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            self._tick()

"""SIGTERM and SIGHUP end a front door's run as Ctrl-C does.

Python turns Ctrl-C (SIGINT) into :class:`KeyboardInterrupt`, which unwinds the program: a ``with
Elastic(...)`` block ends its run ``interrupted``, and the interpreter's exit handlers release what is left.
SIGTERM and SIGHUP, by default, kill the process at once: no exit handler runs, every batch job of the run
stays queued or running, and the store keeps the run as ``running``. That is what a ``timeout``, a
scheduler ending a login-node process, ``kill`` or a closed terminal send.

While a front door is open, :func:`install` makes both signals raise :class:`Terminated` (a
:class:`SystemExit` with the shell's exit status ``128 + signal``) in the main thread, so the program
unwinds as for Ctrl-C: ``with`` blocks and ``finally`` clauses run, then the exit handlers, which end every
open front door ``interrupted`` (held and pending jobs cancelled, running allocations released). A second
signal while that happens is logged and otherwise ignored, so the clean-up is not cut short; a first one
that arrives while a run releases its allocations (:func:`deferred`: a normal ``shutdown()`` or the end of
a ``with`` block) lets the release finish and is raised right after it; SIGKILL
still kills at once (the next run on the same store then finds the run and cancels its jobs:
:meth:`elastic.store.Store.abandoned_runs`).

A handler is installed only where the signal still has its default action and only from the main thread:
a program (or a host such as a Prefect worker) that handles the signal itself keeps its own handler. The
default action is put back when the last front door closes.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ["SIGNALS", "Terminated", "deferred", "install", "received", "uninstall"]

logger = logging.getLogger(__name__)

SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)
"""The signals a front door turns into an orderly end."""


class Terminated(SystemExit):
    """Raised in the main thread by SIGTERM or SIGHUP while a front door is open."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal = signal.Signals(signum)


_lock = threading.Lock()
_users = 0
_ours: dict[signal.Signals, Any] = {}
_received: signal.Signals | None = None
_deferring = 0  # releases under way in the main thread (only it changes or reads this: no lock needed)
_held: signal.Signals | None = None  # received while deferring: raised once the outermost release ends


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received, _held
    if _received is not None:
        logger.warning("%s received again: still ending the run", signal.Signals(signum).name)
        return
    _received = signal.Signals(signum)
    if _deferring:
        _held = _received
        logger.warning("%s received while allocations are released: ending once they are", _received.name)
        return
    logger.warning("%s received: ending the run as interrupted (cancelling its allocations)", _received.name)
    raise Terminated(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Let the body (the release of a run's allocations) finish before a SIGTERM or SIGHUP ends the program.

    In the main thread (the one the handler interrupts): a signal that arrives meanwhile is recorded
    (:func:`received`) and raised as :class:`Terminated` once the outermost such body has ended without an
    exception of its own. Elsewhere it does nothing: the signal interrupts the main thread, not this one.
    """
    global _deferring, _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        held = _held if _deferring == 0 else None
        if held is not None:
            _held = None
    if held is not None:
        raise Terminated(held)


def install() -> None:
    """Turn SIGTERM and SIGHUP into :class:`Terminated` while a front door is open (module docstring).

    Counted: each call is matched by one :func:`uninstall`. Does nothing outside the main thread or for a
    signal that already has a handler other than the default.
    """
    global _users
    with _lock:
        _users += 1
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in SIGNALS:
            if sig in _ours:
                continue
            try:
                if signal.getsignal(sig) is not signal.SIG_DFL:
                    continue
                signal.signal(sig, _handler)
            except (ValueError, OSError):  # not the main interpreter, or a signal this platform lacks
                continue
            _ours[sig] = _handler


def uninstall() -> None:
    """Undo one :func:`install`; the last one puts the default actions back where ours are still set."""
    global _users, _received
    with _lock:
        _users = max(0, _users - 1)
        if _users:
            return
        _received = None  # every front door has ended: the next one starts afresh
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in list(_ours):
            try:
                if signal.getsignal(sig) is _handler:
                    signal.signal(sig, signal.SIG_DFL)
            except (ValueError, OSError):
                continue
            del _ours[sig]


def received() -> signal.Signals | None:
    """Return the termination signal received while a front door was open (None: none)."""
    return _received

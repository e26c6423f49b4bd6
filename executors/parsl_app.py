"""What a worker runs for a Parsl app: the app, with a ``BaseException`` it raises made an app failure.

Parsl handles an app's failure as an ``Exception``: the DataFlowKernel's done callback reads the result
and catches ``Exception`` only. An app that ends by ``SystemExit`` (``sys.exit``, an ``argparse`` error in
a wrapped ``main()``), ``KeyboardInterrupt`` or ``asyncio.CancelledError`` is lost on Parsl's own
executors (HTEX: ``WorkerLost``). Delivered as it is, it escaped Parsl's callback into the pool's I/O
thread and stopped every later app. Here it fails its app with :class:`AppExit`, whose cause is the
exception raised, so Parsl's retries and dependency errors apply as to any failed app.

This module imports nothing of Parsl: workers import it to run every app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["AppExit", "run_app"]


class AppExit(Exception):
    """A Parsl app ended by an exception that is not an ``Exception`` (its ``__cause__``)."""


def run_app(app: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Return ``app(*args, **kwargs)``; raise :class:`AppExit` from a ``BaseException`` it raises."""
    try:
        return app(*args, **kwargs)
    except Exception:
        raise
    except BaseException as exc:
        name = getattr(app, "__name__", "the app")
        raise AppExit(
            f"app {name} raised {type(exc).__name__}({', '.join(map(repr, exc.args))}), which is not an "
            "Exception; it counts as the app's failure"
        ) from exc

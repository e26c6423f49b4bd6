"""What a run shows while it goes on, without configuration: a live view on a terminal, log lines elsewhere.

Every front-end (:class:`elastic.Elastic`, the Parsl executor, the Prefect task runner, ``elastic run``)
reports its run through one :class:`RunProgress`, fed with the run's events (:class:`elastic.metrics.Event`:
stages ready and done, allocations submitted, started and ended) as the front door records them.

- **Log lines**, always: one line per stage and allocation event, at INFO, on the host's logger: Parsl's
  (``parsl.elastic``, so they land in ``runinfo/NNN/parsl.log``), Prefect's flow-run logger (the flow run's
  logs in the UI and on the console), or ``elastic.progress`` for the front door used directly.
- **On a terminal** (the stream is a TTY): a compact live view (rich) below the program's output: stages
  with tasks done/total, the allocations with their state, the queue wait so far and the predicted wait.
- **Elsewhere** (a batch job's output, a pipe, a captured stream): the log lines are also written to the
  stream, unless the logger already reaches it (a handler of its own or of an ancestor writes there).

``progress=False`` on a front-end turns all of this off.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Set
from typing import TYPE_CHECKING, Any, TextIO

from elastic.allocations import AllocationState
from elastic.metrics import Event, EventKind

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.live import Live

__all__ = [
    "DEFAULT_LOGGER",
    "ProgressLogger",
    "RunProgress",
    "check_progress",
    "ended_word",
    "event_line",
    "short_duration",
]

#: The logger of the front door's progress lines when no host logger is given.
DEFAULT_LOGGER = "elastic.progress"

ProgressLogger = logging.Logger | logging.LoggerAdapter  # type: ignore[type-arg]
"""Where progress lines go: a logger, or an adapter such as Prefect's run logger."""

_LOGGED = frozenset(
    {
        EventKind.RUN_START,
        EventKind.RUN_END,
        EventKind.STAGE_READY,
        EventKind.STAGE_END,
        EventKind.ALLOC_SUBMIT,
        EventKind.ALLOC_START,
        EventKind.ALLOC_END,
    }
)
_WAITING = (AllocationState.REQUESTED,)
_LIVE = (AllocationState.REQUESTED, AllocationState.RUNNING, AllocationState.DRAINING)


def short_duration(seconds: float | None) -> str:
    """Return seconds as ``42 s``, ``12 min`` or ``3.1 h``; ``?`` when unknown (None)."""
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


_s = short_duration


def ended_word(state: str, started: bool) -> str:
    """Return how a progress line words an allocation's end state (``CANCELLED``, ``TIMEOUT``, ...).

    A batch job cancelled after it started was given back (the strategy released its cores, or the run
    ended): ``released``; cancelled while it waited: ``cancelled``. Other states are their name.

    Examples
    --------
    >>> ended_word("CANCELLED", started=True), ended_word("CANCELLED", started=False)
    ('released', 'cancelled')
    >>> ended_word("TIMEOUT", started=True)
    'timeout'
    """
    word = state.lower()
    return "released" if word == "cancelled" and started else word


def event_line(
    event: Event, *, submitted: dict[str, float] | None = None, started: Set[str] = frozenset()
) -> str | None:
    """Return the progress line of one run event, or None for events not shown (task events).

    Parameters
    ----------
    event
        A run event.
    submitted
        Submission times by allocation id, so an ALLOC_START line can say how long the allocation waited.
    started
        Allocations that started, so an ALLOC_END line can say a running one was released
        (:func:`ended_word`).
    """
    kind = event.kind
    if kind not in _LOGGED:
        return None
    if kind is EventKind.RUN_START:
        return f"run started ({event.note})" if event.note else "run started"
    if kind is EventKind.RUN_END:
        return f"run ended: {event.note}" if event.note else "run ended"
    if kind is EventKind.STAGE_READY:
        return f"stage {event.stage}: ready"
    if kind is EventKind.STAGE_END:
        return f"stage {event.stage}: done"
    alloc = event.allocation or "?"
    if kind is EventKind.ALLOC_SUBMIT:
        job = f" (job {event.job_id})" if event.job_id else ""
        reason = f" ({event.note})" if event.note else ""
        wait = "" if event.predicted_wait is None else f", predicted wait {_s(event.predicted_wait)}"
        return (
            f"allocation {alloc}{job}: requested {event.cores} core{'' if event.cores == 1 else 's'} for "
            f"stage {event.stage}, "
            f"walltime {_s(event.walltime)}{wait}{reason}"
        )
    if kind is EventKind.ALLOC_START:
        since = event.eligible if event.eligible is not None else (submitted or {}).get(alloc)
        waited = f" after {_s(event.time - since)} in the queue" if since is not None else ""
        return f"allocation {alloc}: running{waited}"
    # the batch job's end state, worded as ``elastic run``'s lines word it ("allocation a1: released")
    if not event.note:
        return f"allocation {alloc}: ended"
    return f"allocation {alloc}: {ended_word(event.note, alloc in started)}"


def _reaches(logger: logging.Logger, stream: TextIO) -> bool:
    """Whether a record of ``logger`` at INFO is written to ``stream`` by some handler on its way up."""
    if not logger.isEnabledFor(logging.INFO):
        return False
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if (
                isinstance(handler, logging.StreamHandler)
                and getattr(handler, "stream", None) is stream
                and handler.level <= logging.INFO
            ):
                return True
        current = current.parent if current.propagate else None
    return False


class RunProgress:
    """Show one run's progress (see the module docstring); fed by :meth:`event`, ended by :meth:`stop`.

    Parameters
    ----------
    logger
        Where the lines go (a logger or a logger adapter); default: ``elastic.progress``.
    view
        Returns what the run is doing now (a :class:`~elastic.front.door.FrontDoorView`), for the live
        view; called from the view's own thread.
    stream
        Where the live view, or the lines when it is not a terminal, are written; default ``sys.stderr``.
    live
        Force the live view on or off; default: on when ``stream`` is a terminal.
    """

    def __init__(
        self,
        logger: ProgressLogger | None = None,
        *,
        view: Callable[[], Any] | None = None,
        stream: TextIO | None = None,
        live: bool | None = None,
    ) -> None:
        self.logger: ProgressLogger = logger if logger is not None else logging.getLogger(DEFAULT_LOGGER)
        self._view = view
        self._stream = stream if stream is not None else sys.stderr
        isatty = getattr(self._stream, "isatty", None)
        self.live = bool(live if live is not None else (callable(isatty) and isatty()))
        self._submitted: dict[str, float] = {}
        self._started: set[str] = set()
        self._t0: float | None = None  # the run's start, backend seconds
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._handler: logging.Handler | None = None
        self._stopped = False
        base = self.logger.logger if isinstance(self.logger, logging.LoggerAdapter) else self.logger
        self._base: logging.Logger = base

    def start(self) -> None:
        """Start showing: the live view on a terminal, else a stream handler unless one reaches it."""
        base = self._base
        if base.level == logging.NOTSET and base.getEffectiveLevel() > logging.INFO:
            base.setLevel(logging.INFO)  # our lines are INFO: let them through (kept for later runs)
        if self.live and self._view is not None:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self._stream)
            self._live = Live(
                get_renderable=self._render, console=console, refresh_per_second=2, transient=False
            )
            self._live.start()
        elif not _reaches(base, self._stream):
            handler = logging.StreamHandler(self._stream)
            handler.setLevel(logging.INFO)
            handler.addFilter(self._own)  # several runs at once share the logger: each writes its own
            handler.setFormatter(logging.Formatter("%(asctime)s elastic: %(message)s", "%H:%M:%S"))
            base.addHandler(handler)
            self._handler = handler

    def event(self, event: Event) -> None:
        """Take one run event; log its line, if it has one (quick, never raises, takes no run lock)."""
        try:
            with self._lock:
                if self._stopped:
                    return
                if event.kind is EventKind.RUN_START:
                    self._t0 = event.time
                if event.kind is EventKind.ALLOC_SUBMIT and event.allocation is not None:
                    self._submitted[event.allocation] = event.time
                if event.kind is EventKind.ALLOC_START and event.allocation is not None:
                    self._started.add(event.allocation)
                line = event_line(event, submitted=self._submitted, started=self._started)
            if line is not None:
                self.logger.info(line, extra={"elastic_progress": id(self)})
        except Exception:  # progress must never break a run
            logging.getLogger(__name__).debug("progress line failed", exc_info=True)

    def stop(self) -> None:
        """Stop showing: the live view's last frame stays on screen; the stream handler is removed."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._live is not None:
            try:
                self._live.stop()
            except Exception:  # a closed stream at interpreter exit
                logging.getLogger(__name__).debug("live view stop failed", exc_info=True)
        if self._handler is not None:
            self._base.removeHandler(self._handler)

    def _own(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is one of this run's lines (a record through an adapter may have lost it)."""
        return getattr(record, "elastic_progress", id(self)) == id(self)

    def _render(self) -> RenderableType:
        """Render the live view: stages with tasks done/total, then allocations with state and waits."""
        from rich.table import Table
        from rich.text import Text

        assert self._view is not None
        try:
            view = self._view()
        except Exception as exc:  # the run is ending: keep the last words short
            return Text(f"elastic: {exc}")
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        for col in ("stage", "done/total", "running", "allocation", "cores", "state", "waited", "predicted"):
            table.add_column(col, justify="left" if col in ("stage", "allocation", "state") else "right")
        stages = list(view.stages)
        allocs = [a for a in view.allocations if a.state in _LIVE] or list(view.allocations[-3:])
        for i in range(max(len(stages), len(allocs))):
            row: list[Any] = ["", "", ""]
            if i < len(stages):
                s = stages[i]
                row = [s.name, f"{s.done}/{s.tasks}", str(s.running)]
            if i < len(allocs):
                a = allocs[i]
                if a.start_time is not None and a.submit_time is not None:
                    waited = a.start_time - (a.eligible_time or a.submit_time)
                elif a.submit_time is not None:
                    waited = view.now - (a.eligible_time or a.submit_time)
                else:
                    waited = None
                if a.ended:  # the last ones, once none is live: worded as the progress lines word them
                    state = ended_word(a.state.value, started=a.start_time is not None)
                else:
                    state = a.state.value.lower() + (" (queued)" if a.state in _WAITING else "")
                row += [a.alloc_id, str(a.cores), state, _s(waited), _s(a.predicted_wait)]
            else:
                row += ["", "", "", "", ""]
            table.add_row(*row)
        since = f"{_s(view.now - self._t0)} into the run" if self._t0 is not None else f"t={view.now:.0f} s"
        title = Text(f"elastic: {since}, {view.queued} tasks queued for cores", style="bold")
        from rich.console import Group

        return Group(title, table)


def check_progress(value: object, owner: str = "Elastic") -> None:
    """Refuse a ``progress`` option that is not a bool, a logger or a logger adapter.

    Raises
    ------
    ConfigError
        Naming the option, its value and what it may be.
    """
    if not isinstance(value, (bool, logging.Logger, logging.LoggerAdapter)):
        from elastic.errors import ConfigError

        raise ConfigError(
            f"{owner}: progress must be True (show the run's progress), False (do not) or a logger to "
            f"write its lines to, got {value!r}"
        )

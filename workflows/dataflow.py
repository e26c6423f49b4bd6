"""What the demo workflows share: the adapter their dataflow is written against, programs, checks, folders.

Each demo (:mod:`elastic.workflows.montage`, :mod:`elastic.workflows.blast`,
:mod:`elastic.workflows.statistics`) is written once,
as a *driver*: a function ``driver(submit, inputs)`` that calls ``submit.submit(fn, *args)`` for every
task and passes the returned futures as arguments of later tasks. The three systems that run it all take
that shape (:mod:`elastic.workflows.frontends`):

- :class:`elastic.Elastic` (the front door) *is* a :class:`Submitter`: futures among a task's arguments
  are waited for and replaced by their results;
- Parsl: a ``python_app`` per stage function; AppFutures passed as arguments are dependencies;
- Prefect: a ``task`` per stage function, called with ``.submit``; PrefectFutures passed as arguments are
  dependencies.

Only top-level arguments count as inputs in all three, so a driver passes futures directly (``*parts``),
never inside a list. Stage functions live at module level (workers import them by reference) and their
name is the stage's name in every system.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from elastic.errors import ConfigError, ElasticError

__all__ = [
    "Check",
    "Demo",
    "Handle",
    "ProgramError",
    "Submitter",
    "Verification",
    "check_size",
    "check_workdir",
    "new_run_folder",
    "run_program",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Handle(Protocol[T_co]):
    """A task's future as the three systems return it.

    A ``concurrent.futures.Future``, a Parsl AppFuture or a PrefectFuture: its result, once the task ran.
    """

    def result(self, timeout: float | None = None) -> T_co:
        """Wait for the task and return its value (or raise its exception)."""
        ...


class Submitter(Protocol):
    """What a driver submits its tasks through (see the module docstring)."""

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Handle[T]:
        """Run ``fn(*args)`` as a task; futures among ``args`` are its inputs."""
        ...


class ProgramError(ElasticError):
    """A scientific program (a Montage module, makeblastdb, blastn) failed.

    Parameters
    ----------
    command : sequence of str
        The command line.
    returncode : int
        Its exit code.
    output : str
        What it printed (standard output, then standard error), for the message.
    """

    def __init__(self, command: Sequence[str], returncode: int, output: str) -> None:
        self.command = tuple(command)
        self.returncode = returncode
        self.output = output
        shown = output.strip()[-2000:] or "(no output)"
        super().__init__(f"{' '.join(self.command)} exited with code {returncode}: {shown}")

    def __reduce__(self) -> tuple[Any, ...]:  # it travels back from the worker pickled
        return (type(self), (self.command, self.returncode, self.output))


def run_program(command: Sequence[str], *, cwd: str | os.PathLike[str] | None = None) -> str:
    """Run ``command`` (no shell) and return its standard output.

    Raises
    ------
    ProgramError
        It exited non-zero (its output is in the message).
    FileNotFoundError
        The program is not installed.
    """
    done = subprocess.run(
        list(command), cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    if done.returncode != 0:
        raise ProgramError(command, done.returncode, done.stdout + done.stderr)
    return done.stdout


@dataclass(frozen=True, slots=True)
class Check:
    """One property a demo checked on its output."""

    name: str
    ok: bool
    detail: str
    """What was measured, against what was expected."""


@dataclass(frozen=True, slots=True)
class Verification:
    """Every check of one demo run; :attr:`ok` when all passed."""

    demo: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """Whether every check passed (and there was at least one)."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        """The checks that did not pass."""
        return tuple(c for c in self.checks if not c.ok)


@dataclass(frozen=True, slots=True)
class Demo:
    """A demo workflow: how its input is made, its dataflow, and how its output is checked.

    Attributes
    ----------
    name : str
        ``montage``, ``blast`` or ``statistics`` (also its workflow name in the store).
    summary : str
        One line for ``--help`` and the README.
    size_meaning : str
        What ``size`` counts, e.g. ``"tiles per side of the mosaic"``.
    default_size, min_size, max_size : int
        The default ``size`` (a run of seconds) and the sizes accepted.
    generate : callable
        ``generate(folder, size, seed) -> inputs``: writes the input under ``folder`` (deterministic for a
        seed) and returns what the driver needs (small, picklable: paths and names).
    driver : callable
        ``driver(submit, inputs) -> output``: the dataflow, written against :class:`Submitter`.
    verify : callable
        ``verify(inputs, output) -> Verification``: checks the output against what was planted.
    stages : tuple of str
        The stage names in order (the stage functions' names).
    """

    name: str
    summary: str
    size_meaning: str
    default_size: int
    min_size: int
    max_size: int
    generate: Callable[[Path, int, int], Any]
    driver: Callable[[Submitter, Any], Any]
    verify: Callable[[Any, Any], Verification]
    stages: tuple[str, ...] = field(default=())


def check_size(demo: Demo, size: object) -> int:
    """Return ``size`` if ``demo`` accepts it.

    Raises
    ------
    ConfigError
        Not an integer in ``[demo.min_size, demo.max_size]``; the message says what size counts.
    """
    if isinstance(size, bool) or not isinstance(size, int) or not demo.min_size <= size <= demo.max_size:
        raise ConfigError(
            f"{demo.name}: size must be an integer in [{demo.min_size}, {demo.max_size}] "
            f"({demo.size_meaning}), got {size!r}"
        )
    return size


def check_workdir(workdir: str | os.PathLike[str] | None) -> Path:
    """Return ``workdir`` (default: the system's temporary directory) once it is known to take new folders.

    Raises
    ------
    ConfigError
        ``workdir`` does not exist, is not a directory, or cannot be written (tried, not guessed from
        permission bits).
    """
    base = Path(tempfile.gettempdir() if workdir is None else workdir)
    if not base.exists():
        raise ConfigError(f"--workdir {str(base)!r} does not exist: create it first, or choose another")
    if not base.is_dir():
        raise ConfigError(f"--workdir {str(base)!r} is not a directory")
    try:
        with tempfile.TemporaryDirectory(dir=base):
            pass
    except OSError as exc:
        raise _unwritable(base, exc) from exc
    return base


def _unwritable(base: Path, exc: OSError) -> ConfigError:
    return ConfigError(
        f"--workdir {str(base)!r} cannot be written ({exc.strerror}): choose a writable directory"
    )


def new_run_folder(workdir: str | os.PathLike[str] | None, demo: str) -> Path:
    """Create a fresh folder for one run under ``workdir`` (default: the system's temporary directory).

    Every run gets its own folder (``<demo>-<date>-<random>``), so a run never reads a previous run's
    files and never deletes anything. ``workdir`` must be an existing, writable directory on a file
    system every allocation sees (on Slurm: a shared one).

    Raises
    ------
    ConfigError
        ``workdir`` does not exist, is not a directory, or cannot be written (:func:`check_workdir`).
    """
    base = check_workdir(workdir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        return Path(tempfile.mkdtemp(prefix=f"{demo}-{stamp}-", dir=base)).resolve()
    except OSError as exc:  # e.g. the directory was made read-only since the check
        raise _unwritable(base, exc) from exc

"""The :class:`ElasticError` tree.

Every error Elastic raises on purpose derives from :class:`ElasticError`. Errors keep their data as
attributes (not only in the message) and their message says what to do. Where callers would expect a
built-in exception, the error also subclasses it (for example :class:`TraceError` is a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "ConfigError",
    "DependencyError",
    "ElasticError",
    "GeometryError",
    "LimitReachedError",
    "MissingExtraError",
    "PoolError",
    "SubmitError",
    "TraceError",
    "UnknownJobError",
    "UnknownNameError",
]


class ElasticError(Exception):
    """Root of every error raised on purpose by Elastic."""


class ConfigError(ElasticError, ValueError):
    """A parameter has a value that cannot work; the message names the parameter and the value."""


class LimitReachedError(ElasticError):
    """A run reached a limit it was given (allocations per run) and stops rather than go on for hours.

    Parameters
    ----------
    what : str
        The limit, e.g. ``"allocations per run"``.
    limit : int
        Its value.
    reason : str
        What the run did, why it stops, and how to raise the limit.
    """

    def __init__(self, what: str, limit: int, reason: str) -> None:
        self.what = what
        self.limit = limit
        self.reason = reason
        super().__init__(f"{what} limit reached: {reason}")


class UnknownNameError(ConfigError):
    """A name (policy, strategy, backend, predictor, distribution) is not one of the known names.

    Parameters
    ----------
    kind : str
        What was being looked up, e.g. ``"policy"``.
    name : str
        The name given.
    allowed : Iterable[str]
        The names that would have worked.
    """

    def __init__(self, kind: str, name: str, allowed: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.allowed = tuple(sorted(allowed))
        super().__init__(f"unknown {kind} {name!r}; choose one of: {', '.join(self.allowed)}")


class TraceError(ElasticError, ValueError):
    """A workload trace cannot be read.

    Parameters
    ----------
    path : str
        The trace file.
    line : int or None
        1-based line number of the offending line, when one line is to blame.
    reason : str
        What is wrong and, where possible, what to do.
    """

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


class BackendError(ElasticError):
    """A batch backend (mock or Slurm) could not do what was asked."""


class BackendUnavailableError(BackendError, RuntimeError):
    """The backend cannot be used at all here (e.g. Slurm commands are not installed)."""


class SubmitError(BackendError):
    """A submission was refused.

    Parameters
    ----------
    message : str
        What went wrong and what to do.
    stdout, stderr : str
        Output of the submit command, when there was one (Slurm).
    returncode : int or None
        Exit code of the submit command, when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        stdout: str = "",
        stderr: str = "",
        returncode: int | None = None,
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        super().__init__(message)


class GeometryError(SubmitError, ValueError):
    """The requested geometry can never run on the partition (too many cores or nodes).

    Like Slurm with ``EnforcePartLimits=ALL``, such a job is rejected at submit instead of pending forever.
    """


class DependencyError(SubmitError, ValueError):
    """A dependency names a job that does not exist or can never be satisfied."""


class UnknownJobError(BackendError, KeyError):
    """No job with this id is known to the backend."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"no job with id {job_id!r} is known to this backend")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class MissingExtraError(ElasticError, ImportError):
    """An optional part of Elastic is used but its install extra is not installed.

    Attributes
    ----------
    extra
        The extra that brings the missing modules (``parsl``, ``prefect``, ``mesos``, ``demos``, ...).
    feature
        What needed it.
    modules
        The modules that could not be found.
    """

    def __init__(self, extra: str, feature: str, modules: Iterable[str]) -> None:
        self.extra = extra
        self.feature = feature
        self.modules = tuple(modules)
        names = self.modules
        listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)
        verb = "are" if len(names) > 1 else "is"
        super().__init__(
            f'{feature} needs {listed}, which {verb} not installed: pip install "elastic-hpc[{extra}]"'
        )


class PoolError(ElasticError):
    """The pool, an agent, the wire protocol or a task failed (base of every pool-side error)."""

"""Optional extras: which install extra brings which modules, and a clear error when one is missing.

The core package (``pip install elastic-hpc``) runs the front door, the pool, the strategies, the local,
mock and Slurm backends, the store and the command line. Each integration is an extra:

========== ======================================== ===============================================
extra      brings                                   needed by
========== ======================================== ===============================================
parsl      ``parsl``                                :mod:`elastic.parsl` (``ElasticExecutor``)
prefect    ``prefect``                              :mod:`elastic.prefect` (``ElasticTaskRunner``)
mesos      ``uvicorn``, ``starlette``               ``elastic mesos`` (frameworks bring pymesos)
demos      ``astropy``, ``matplotlib``, ``pyarrow`` the demo workflows, ``elastic compare``'s figures
postgres   ``psycopg2``                             a ``postgresql://`` store
cp         ``ortools``                              CP-SAT dispatching, ``elastic reproduce cp``
all        every extra above
========== ======================================== ===============================================

A front-end checks its extra when it is imported (:func:`require`), so a missing one is reported as
``pip install "elastic-hpc[parsl]"`` rather than as a ``ModuleNotFoundError`` deep inside.
"""

from __future__ import annotations

import importlib.util
from typing import Final

from elastic.errors import MissingExtraError

__all__ = ["DISTRIBUTION", "EXTRAS", "missing", "require"]

#: The name the package is installed under (``pip install elastic-hpc``).
DISTRIBUTION: Final = "elastic-hpc"

#: extra -> the top-level modules it installs that Elastic imports (as imported, not as distributed).
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "parsl": ("parsl",),
    "prefect": ("prefect",),
    "mesos": ("uvicorn", "starlette"),
    "demos": ("astropy", "matplotlib", "pyarrow"),
    "postgres": ("psycopg2",),
    "cp": ("ortools",),
}


def missing(extra: str, modules: tuple[str, ...] | None = None) -> list[str]:
    """Return the modules of ``extra`` (or only ``modules`` of it) that cannot be imported here.

    Parameters
    ----------
    extra
        A key of :data:`EXTRAS`.
    modules
        Check only these modules (each one of the extra's); default: all of them.

    Returns
    -------
    list of str
        The missing modules, in the extra's order; empty when everything is installed.

    Raises
    ------
    ValueError
        ``extra`` is not a key of :data:`EXTRAS`.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    wanted = EXTRAS[extra] if modules is None else modules
    return [m for m in wanted if importlib.util.find_spec(m) is None]


def require(extra: str, feature: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`~elastic.errors.MissingExtraError` unless the modules of ``extra`` are installed.

    Parameters
    ----------
    extra
        A key of :data:`EXTRAS`.
    feature
        What needs it, for the message (e.g. ``"the Parsl executor (elastic.parsl)"``).
    modules
        Check only these modules of the extra (e.g. ``("matplotlib",)`` for figures); default: all.

    Raises
    ------
    MissingExtraError
        Naming the feature, the missing modules and the command that installs them.
    """
    absent = missing(extra, modules)
    if absent:
        raise MissingExtraError(extra, feature, absent)

"""Errors of the store: :class:`StoreError` and its subclasses, all carrying the masked URL."""

from __future__ import annotations

from elastic.errors import ElasticError

__all__ = ["StoreError", "StoreURLError", "UnknownRunError"]


class StoreError(ElasticError):
    """The store cannot be opened or used.

    Parameters
    ----------
    url : str
        The store URL, password masked (``***``).
    reason : str
        What went wrong and what to do.
    """

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"store {url}: {reason}")


class StoreURLError(StoreError, ValueError):
    """The store URL cannot be parsed, or names a database driver that is missing or unusable."""


class UnknownRunError(StoreError, LookupError):
    """No run with this id was recorded in the store.

    Parameters
    ----------
    url : str
        The store URL, password masked.
    run_id : int
        The id asked for.
    """

    def __init__(self, url: str, run_id: int) -> None:
        self.run_id = run_id
        super().__init__(url, f"no run with id {run_id}; use an id returned by record_run")

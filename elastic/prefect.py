"""Prefect on Elastic: ``from elastic.prefect import ElasticTaskRunner``.

:class:`ElasticTaskRunner` is a Prefect 3 task runner whose task runs execute on the pilot allocations a
strategy (Big-Job, Per-Stage, ASA) chooses; see the Prefect guide (``docs/guide/prefect.md``). Needs the
``prefect`` extra (``pip install "elastic-hpc[prefect]"``); importing this module without it raises
:class:`~elastic.errors.MissingExtraError`, which names the extra.
"""

from __future__ import annotations

from elastic.executors.prefect_runner import ElasticTaskRunner

__all__ = ["ElasticTaskRunner"]

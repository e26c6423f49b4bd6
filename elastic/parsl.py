"""Parsl on Elastic: ``from elastic.parsl import ElasticExecutor``.

:class:`ElasticExecutor` is a Parsl executor whose apps run on the pilot allocations a strategy (Big-Job,
Per-Stage, ASA) chooses; see the Parsl guide (``docs/guide/parsl.md``). Needs the ``parsl`` extra
(``pip install "elastic-hpc[parsl]"``); importing this module without it raises
:class:`~elastic.errors.MissingExtraError`, which names the extra.
"""

from __future__ import annotations

from elastic.executors.parsl_executor import ElasticExecutor

__all__ = ["ElasticExecutor"]

"""Workflow-system front-ends on the Elastic pool (Parsl executor, Prefect task runner)."""

from __future__ import annotations

__all__: list[str] = []

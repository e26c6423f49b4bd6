"""Demo workflows (Montage, BLAST, Statistics) and the built-in small test workflows."""

from __future__ import annotations

__all__: list[str] = []

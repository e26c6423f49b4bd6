"""A griffe extension for the API reference: Sphinx roles in docstrings become inline code.

The docstrings use Sphinx cross-reference roles (``:class:`~elastic.front.door.Elastic```), which
mkdocstrings does not read and would print as they are. This extension, named in ``mkdocs.yml``
(``extensions:`` of the Python handler), rewrites each role as inline code: the last dotted part when
the target starts with ``~`` (as Sphinx shows it), else the whole target. The docstrings themselves
are not changed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|ref):`(?P<tilde>~?)(?P<target>[^`]+)`"
)


def plain(text: str) -> str:
    """Return ``text`` with every Sphinx role written as inline code."""

    def code(match: re.Match[str]) -> str:
        target = match["target"]
        return f"`{target.rsplit('.', 1)[-1] if match['tilde'] else target}`"

    return ROLE.sub(code, text)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles as inline code in every docstring griffe loads."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring, if it has one."""
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)

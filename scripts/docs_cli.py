"""The CLI reference page, rendered from the ``elastic`` command's own argparse parsers.

Used two ways:

- as an MkDocs hook (``hooks:`` in ``mkdocs.yml``): ``on_page_markdown`` replaces the marker
  ``<!-- elastic-cli-help -->`` in ``docs/reference/cli.md`` with the ``--help`` text of ``elastic`` and
  of every subcommand (and their own subcommands, e.g. ``elastic traces download``), so the page is
  regenerated on every build and cannot drift from the parsers;
- as a script, ``python scripts/docs_cli.py``, which prints the same Markdown.

The help is rendered at a fixed width (``COLUMNS=100``) so the page does not depend on the terminal.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- elastic-cli-help -->"
WIDTH = "100"


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Yield each subcommand parser of ``parser``, in the order ``--help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _help(parser: argparse.ArgumentParser) -> str:
    """Return ``parser``'s ``--help`` text at the fixed width."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _sections(prog: str, parser: argparse.ArgumentParser, level: int) -> Iterator[str]:
    """Yield a Markdown section with ``parser``'s help, then one per subcommand, recursively."""
    yield f"{'#' * level} `{prog}`\n\n```text\n{_help(parser)}\n```\n"
    for name, sub in _subcommands(parser):
        yield from _sections(f"{prog} {name}", sub, level + 1)


def render() -> str:
    """Return the Markdown of every ``elastic`` help text: the top level, then each subcommand."""
    from elastic import cli

    top = cli._parser([])
    parts = [f"## `elastic`\n\n```text\n{_help(top)}\n```\n"]
    for name in cli._COMMANDS:
        full = dict(_subcommands(cli._parser([name])))[name]
        parts.extend(_sections(f"elastic {name}", full, 3))
    return "\n".join(parts)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Put the rendered help where the page has the marker (the MkDocs hook)."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())


if __name__ == "__main__":
    print(render())

"""One self-contained HTML page: the settings, Table 1 and every figure, images embedded as data URIs.

The page references no file, script, font or style sheet outside itself (the PNGs are embedded as
``data:image/png;base64,...`` and the style is inline), so it opens offline, mailed or copied alone.
The CSV files beside it are linked by relative name for whoever has the directory.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Figure", "data_uri", "page"]

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 75em; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table.table1 { border-collapse: collapse; font-size: 0.85em; }
table.table1 th, table.table1 td { border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: right; }
table.table1 thead th { background: #eef; text-align: center; }
table.table1 td.best { background: #e6f4e6; font-weight: bold; }
table.table1 tr.norm td { background: #f4f4f4; font-style: italic; }
table.settings td { padding: 0.1em 1em 0.1em 0; vertical-align: top; }
span.over { color: #a33; } small { color: #666; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; }
"""


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure of the page.

    Attributes
    ----------
    section : str
        Heading it is shown under.
    name : str
        File name of the PNG beside the page (also the image's ``alt`` text).
    caption : str
        What it shows.
    data : bytes
        The PNG.
    """

    section: str
    name: str
    caption: str
    data: bytes


def data_uri(data: bytes, mime: str = "image/png") -> str:
    r"""Return ``data`` as a ``data:`` URI.

    Examples
    --------
    >>> data_uri(b"\x89PNG")
    'data:image/png;base64,iVBORw=='
    """
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def page(
    title: str,
    settings: Sequence[tuple[str, str]],
    table: str,
    figures: Sequence[Figure],
    notes: Sequence[str] = (),
) -> str:
    """Return the report page.

    Parameters
    ----------
    title : str
        Page title and heading.
    settings : sequence of (str, str)
        How the runs were made (shown as a two-column table).
    table : str
        Table 1 as HTML (:meth:`~elastic.report.tables.Table1.html`), inserted as is.
    figures : sequence of Figure
        Shown in order, grouped under their sections.
    notes : sequence of str
        Paragraphs under the table (plain text, escaped).
    """
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in settings)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<table class="settings">{rows}</table>',
        '<h2 id="table1">Table 1: makespan, total wait and core-hours per strategy</h2>',
        "<p>Mean over the completed runs of each cell, in parentheses how far it is above the best mean "
        "of its row, median below; the normalised average of each workflow is the mean over its rows of "
        '(mean / best of the row - 1). Files: <a href="runs.csv">runs.csv</a> (every run), '
        '<a href="table1.csv">table1.csv</a>.</p>',
        table,
        *(f"<p>{esc(n)}</p>" for n in notes),
    ]
    section = None
    for f in figures:
        if f.section != section:
            section = f.section
            parts.append(f"<h2>{esc(section)}</h2>")
        parts.append(
            f'<figure><img src="{data_uri(f.data)}" alt="{esc(f.name)}">'
            f"<figcaption>{esc(f.caption)} ({esc(f.name)})</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)

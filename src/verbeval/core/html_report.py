"""The HTML of the Snakemake report's pages: one page style (:func:`html_page`) and one table builder
(:func:`table`, :func:`row`, :func:`cell`), used by Table 2, Table 3, the worst lemmas and every CSV
table shown as a page (``verbeval report-table``).
"""

from __future__ import annotations

import html
from collections.abc import Iterable

#: the one style sheet of the report's pages (``td.correct`` and the others: Table 3's marks)
STYLE = (
    "body{font-family:sans-serif;font-size:14px;margin:1em}table{border-collapse:collapse;margin:0 0 1.5em}"
    "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}th{background:#f0f0f0}"
    "td.correct{background:#d9f2d9}td.incorrect{background:#f8d7d7}td.ambiguous{background:#fff3cd}"
    "td.num{text-align:right}td.num,th{white-space:nowrap}td.note{font-size:13px;color:#333;border-top:0}"
    "th.pair{background:#e6ebf2;text-align:left}table.compact{font-size:13px}table.compact td{padding:2px 6px}"
)


def html_page(title: str, body: str) -> str:
    """A standalone HTML page (an item of the Snakemake report): ``title`` as its title and heading,
    then ``body``."""
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def cell(
    content: object = "",
    *,
    head: bool = False,
    num: bool = False,
    cls: str | None = None,
    span: dict[str, int] | None = None,
    markup: bool = False,
    title: str | None = None,
) -> str:
    """One cell: ``<th>`` when ``head``, else ``<td>``; ``num``: right-aligned (class ``num``), or class
    ``cls``; ``span``: ``{"rowspan": 2}``, ``{"colspan": 4}``. ``content`` is escaped unless it is
    ``markup`` (HTML built by the caller from escaped parts). ``title``: the text the browser shows
    when the pointer rests on the cell (escaped)."""
    tag = "th" if head else "td"
    attrs = "".join(f' {k}="{v}"' for k, v in (span or {}).items())
    klass = "num" if num else cls
    if klass:
        attrs += f' class="{klass}"'
    if title:
        attrs += f' title="{html.escape(title)}"'
    text = str(content) if markup else html.escape(str(content))
    return f"<{tag}{attrs}>{text}</{tag}>"


def row(cells: Iterable[str]) -> str:
    """A table row of :func:`cell` strings."""
    return "<tr>" + "".join(cells) + "</tr>"


def table(rows: Iterable[str], head: Iterable[str] | None = None, cls: str | None = None) -> str:
    """A table of :func:`row` strings: on one line, or, with ``head`` (its header rows), as ``<thead>``
    and ``<tbody>`` sections with a row per line; ``cls``: its class (``compact``: smaller)."""
    tag = f'<table class="{cls}">' if cls else "<table>"
    if head is None:
        return tag + "".join(rows) + "</table>"
    return tag + "\n<thead>" + "".join(head) + "</thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"

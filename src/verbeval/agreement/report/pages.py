"""The standalone HTML page of an agreement report item (Table 2, Table 3, the worst lemmas), with
its one style sheet.
"""

from __future__ import annotations

import html


def html_page(title: str, body: str) -> str:
    """A standalone HTML page (an item of the Snakemake report): ``title`` as its title and heading,
    then ``body``."""
    style = (
        "body{font-family:sans-serif;font-size:14px;margin:1em}table{border-collapse:collapse;margin:0 0 1.5em}"
        "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}th{background:#f0f0f0}"
        "td.correct{background:#d9f2d9}td.incorrect{background:#f8d7d7}td.ambiguous{background:#fff3cd}"
        "td.num{text-align:right}"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )

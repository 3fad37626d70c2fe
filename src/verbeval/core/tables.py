"""The one renderer of the studies' Markdown and LaTeX tables, and the one number format in them.

A writer builds its header and rows as text (the numbers through :func:`format_number`, or
:func:`format_rows` with one format per column of a DataFrame), then :func:`markdown_table` writes
a pipe table and :func:`latex_tabular` a booktabs ``tabular`` (its header lines may hold
``\\multicolumn`` and ``\\cmidrule``: :func:`latex_row` writes one row).
The report's HTML pages write every p-value by :func:`format_p` (one rule: 3 decimals from 0.001
up, 3 significant digits in scientific notation below).

Why these small functions rather than ``tabulate`` or pandas' ``Styler.to_latex``: the files the
studies publish (Table 2, the lexicon modes, SimVerb-3500, veridicality, the KL tables) are pipe
tables with unpadded cells and an alignment row of ``---`` / ``---:``, and booktabs tabulars with
hand-laid multi-level headers. ``tabulate`` pads every column to its widest cell and writes
``:---`` alignment rows; ``Styler.to_latex`` writes the index, its own header rules and number
formats. Neither gives those bytes, which must not change, so the renderer is this module.
(``DataFrame.to_markdown``, i.e. ``tabulate``, still writes the lexicon modes' coverage
summaries, whose bytes are tabulate's.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: a missing number (None or NaN) in every table
MISSING = "–"

#: a column's format: the cell text of one value
Format = Callable[[Any], str]


def format_number(x: Any, digits: int = 2, *, tiny_below: float = 0.0, tiny_digits: int = 2) -> str:
    """``x`` with ``digits`` decimals; :data:`MISSING` for None or a float NaN.

    ``tiny_below``: a non-zero ``|x|`` below it is written in scientific notation with
    ``tiny_digits`` (``1.23e-05``), so that small values do not print as zero.
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return MISSING
    if tiny_below and x != 0 and abs(x) < tiny_below:
        return f"{x:.{tiny_digits}e}"
    return f"{x:.{digits}f}"


#: a p-value below this is written in scientific notation (:func:`format_p`)
P_TINY = 1e-3


def format_p(p: Any) -> str:
    """A p-value as every page of the report writes it, by one rule: from :data:`P_TINY` (0.001) up
    with 3 decimals (``0.034``, ``1.000``); below it, 3 significant digits in scientific notation
    (``2.44e-04``, ``1.08e-09``); exactly 0 as ``0``; :data:`MISSING` for None, NaN or pandas' NA."""
    try:
        p = float(p)
    except TypeError:  # None, pandas' NA
        return MISSING
    if math.isnan(p):
        return MISSING
    if p == 0:
        return "0"
    return f"{p:.2e}" if abs(p) < P_TINY else f"{p:.3f}"


#: the columns of the studies' tables that hold p-values (and any column named ``..._p_value``):
#: the comparisons', the lexicon modes' Mann-Whitney test, the SimVerb-3500 join's Spearman tests
P_COLUMNS = frozenset({"p", "p_value", "p_adjusted", "mannwhitney_p", "p_accuracy", "p_log10_prob"})


def is_p_column(name: str) -> bool:
    """Whether a table's column ``name`` holds p-values (written by :func:`format_p`): one of
    :data:`P_COLUMNS` or a name ending in ``_p_value`` (not ``top_p``: a cutoff)."""
    return name in P_COLUMNS or name.endswith("_p_value")


def number(digits: int = 2, **kwargs: Any) -> Format:
    """The column format writing each value with :func:`format_number` (same arguments)."""
    return lambda x: format_number(x, digits, **kwargs)


def format_rows(frame: pd.DataFrame, formats: Mapping[str, Format] | None = None) -> list[list[str]]:
    """The cells of every row of ``frame``: a column's value through its format in ``formats``,
    or ``str`` for a column without one."""
    fmts = [(formats or {}).get(c, str) for c in frame.columns]
    return [[f(v) for f, v in zip(fmts, row)] for row in frame.itertuples(index=False)]


def md_escape(text: Any) -> str:
    """``text`` as one Markdown table cell that renders as the text itself: ``\\`` and ``|``
    backslash-escaped, ``<``, ``>`` and an ``&`` that would start an entity (``&amp;``) as HTML
    entities (a name is never markup), line breaks as spaces."""
    s = str(text).replace("\\", "\\\\").replace("|", r"\|")
    s = re.sub(r"&(?=#?\w+;)", "&amp;", s).replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"[\r\n]+", " ", s)


def md_escaped_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its column names and text cells through :func:`md_escape` (for ``DataFrame.to_markdown``)."""
    out = frame.rename(columns=lambda c: md_escape(c))
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype).startswith("str"):
            out[col] = out[col].map(lambda v: v if not isinstance(v, str) else md_escape(v))
    return out


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str) -> list[str]:
    """A pipe table's lines: the header, the alignment row (``align``: one letter per column, ``l``
    or ``r``), then one line per row; every header and cell through :func:`md_escape`."""
    marks = {"l": "---", "r": "---:"}
    return [
        "| " + " | ".join(map(md_escape, header)) + " |",
        "|" + "|".join(marks[a] for a in align) + "|",
        *("| " + " | ".join(map(md_escape, cells)) + " |" for cells in rows),
    ]


def latex_row(cells: Sequence[str]) -> str:
    """One row of a tabular: the cells joined by ``&``, ended by ``\\\\``."""
    return " & ".join(cells) + r" \\"


def latex_tabular(colspec: str, *sections: Iterable[str]) -> list[str]:
    """A booktabs tabular's lines: ``\\toprule``, the ``sections`` (lists of lines, e.g. a header
    and its rows) separated by ``\\midrule``, ``\\bottomrule``."""
    lines = [r"\begin{tabular}{" + colspec + "}", r"\toprule"]
    for i, section in enumerate(sections):
        lines += ([r"\midrule"] if i else []) + list(section)
    return lines + [r"\bottomrule", r"\end{tabular}"]


def tex_escape(s: str) -> str:
    """``s`` with the characters LaTeX treats specially (\\ & % _ # $) escaped."""
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
        s = s.replace(a, b)
    return s

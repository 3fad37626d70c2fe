"""A CSV table as an HTML page of the Snakemake report (``report-table``): the SimVerb-3500 and
veridicality tables, the KL tables, the counterfactual coverage and the lexicon modes, which the
report would otherwise hand out as CSV downloads.

The page is the CSV's rows and columns as they are (no row or column added or dropped), with
:func:`verbeval.core.tables.format_number`'s number format (:data:`DIGITS` decimals; scientific
notation below :data:`TINY`, so that a KL divergence of 1e-11 is not written as 0), numbers right
aligned, in the report's one page style and table builder (:mod:`verbeval.core.html_report`).
A comparisons table (``comparisons.csv``: columns ``significant`` and ``mdd``) says in the
``significant`` cell of a row that is not significant but had the power what it would have detected
(:func:`verbeval.agreement.report.comparisons.power_note`).
A top-level module, because it serves every study and the studies do not import each other.
"""

from __future__ import annotations

import html
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: decimals of a non-integer number
DIGITS = 3
#: a non-zero number below this (in absolute value) is written in scientific notation
TINY = 1e-4


def csv_page(csv: Path, title: str) -> str:
    """The HTML page of ``csv`` under the heading ``title``.

    A table whose ``random_init`` column is true in some row gets a bold line naming the random
    models (those of its ``model`` column) above it. Raises :class:`verbeval.core.errors.InputError` naming ``csv`` when it is not a readable CSV table.
    """
    import pandas as pd

    from verbeval.core.errors import InputError
    from verbeval.core.html_report import cell, html_page, row, table
    from verbeval.core.tables import format_number

    try:
        # index_col=False: a first field is never taken for an index; a row longer than the header is
        # refused (pandas would drop its last fields with a ParserWarning). Nullable dtypes: an integer
        # column with an empty cell stays integer.
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                csv, keep_default_na=False, na_values=[""], index_col=False, dtype_backend="numpy_nullable"
            )
    except pd.errors.ParserWarning:
        raise InputError(csv, "not a readable CSV table (a row has more fields than the header)") from None
    except (OSError, ValueError) as e:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise InputError(csv, f"not a readable CSV table ({e})") from e
    frame = _power_notes(frame)
    # per column: the decimals of its numbers (0 for an integer column), None for a text or boolean one
    digits = [
        None
        if pd.api.types.is_bool_dtype(frame[c]) or not pd.api.types.is_numeric_dtype(frame[c])
        else 0
        if pd.api.types.is_integer_dtype(frame[c])
        else DIGITS
        for c in frame
    ]

    def value_cell(value: object, decimals: int | None) -> str:
        if decimals is None:
            return cell("" if pd.isna(value) else value)
        value = float("nan") if pd.isna(value) else value  # pd.NA of a nullable column
        return cell(format_number(value, decimals, tiny_below=TINY if decimals else 0.0), num=True, markup=True)

    head = row(cell(c, head=True) for c in frame.columns)
    rows = [row(value_cell(v, d) for v, d in zip(values, digits)) for values in frame.itertuples(index=False)]
    warning = _random_warning(frame)
    intro = f"<p><strong>{html.escape(warning)}</strong></p>\n" if warning else ""
    return html_page(title, intro + table(rows, head=[head]))


def _power_notes(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with, when it is a comparisons table, the ``significant`` cell of each row that is not
    significant, whose interval does not exclude 0 and that has a finite ``mdd`` replaced by the
    sentence of :func:`verbeval.agreement.report.comparisons.power_note` (the others keep True / False,
    and an empty cell, a row without a verdict, stays empty: its ``note`` says why)."""
    import numpy as np
    import pandas as pd

    from verbeval.agreement.report.comparisons import power_note
    from verbeval.core.tables import format_number

    if not {"significant", "mdd"} <= set(frame.columns):
        return frame
    mdd = frame["mdd"].to_numpy(dtype=np.float64, na_value=np.nan)
    ends = [
        frame[c].to_numpy(dtype=np.float64, na_value=np.nan) if c in frame else np.full(len(frame), np.nan)
        for c in ("ci_low", "ci_high")
    ]
    with np.errstate(invalid="ignore"):
        excludes = (ends[0] > 0) | (ends[1] < 0)
    flags = [None if pd.isna(v) else str(v) for v in frame["significant"].astype(object)]
    quiet = np.array([f is not None and f.lower() == "false" for f in flags], bool) & np.isfinite(mdd) & ~excludes
    notes = [power_note(format_number(d, DIGITS, tiny_below=TINY)) if q else f for f, d, q in zip(flags, mdd, quiet)]
    return frame.assign(significant=notes)


def _random_warning(frame: pd.DataFrame) -> str | None:
    """The line that says which of ``frame``'s numbers are a random model's, None when none is."""
    from verbeval.core.provenance import random_note

    if "random_init" not in frame.columns:
        return None
    random = frame["random_init"].astype(str).str.lower() == "true"
    if not random.any():
        return None
    if "model" in frame.columns:
        return random_note(sorted(set(frame.loc[random, "model"].astype(str))), mark="")
    return "The model is randomly initialised, so the numbers are meaningless."

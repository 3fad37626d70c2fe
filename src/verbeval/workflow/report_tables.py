"""A CSV table as an HTML page of the Snakemake report (``report-table``): the SimVerb-3500 and
veridicality tables, the KL tables, the counterfactual coverage and the lexicon modes, which the
report would otherwise hand out as CSV downloads.

The page is the CSV's rows and columns as they are (no row or column added or dropped), with
:func:`verbeval.core.tables.format_number`'s number format (:data:`DIGITS` decimals; scientific
notation below :data:`TINY`, so that a KL divergence of 1e-11 is not written as 0) and p-values by
:func:`verbeval.core.tables.format_p`, numbers right aligned and never wrapped, in the report's one
page style and table builder (:mod:`verbeval.core.html_report`).
A comparisons table (``comparisons.csv``: columns ``significant`` and ``mdd``) is laid out to fit the
report's frame (:func:`comparisons_body`): per pair, the numbers first, and below a row its sentences
(what a row that is not significant but had the power would have detected:
:func:`verbeval.agreement.report.comparisons.power_note`; its ``note``).
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
    from verbeval.core.tables import format_number, format_p, is_p_column

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
    if COMPARISON_PAGE_COLUMNS <= set(frame.columns):
        return html_page(title, comparisons_body(frame))
    # per column: the decimals of its numbers (0 for an integer column), None for a text or boolean one
    digits = [
        None
        if pd.api.types.is_bool_dtype(frame[c]) or not pd.api.types.is_numeric_dtype(frame[c])
        else 0
        if pd.api.types.is_integer_dtype(frame[c])
        else DIGITS
        for c in frame
    ]

    def value_cell(value: object, decimals: int | None, p: bool) -> str:
        if decimals is None:
            return cell("" if pd.isna(value) else value)
        if p:
            return cell(format_p(value), num=True, markup=True)
        value = float("nan") if pd.isna(value) else value  # pd.NA of a nullable column
        return cell(format_number(value, decimals, tiny_below=TINY if decimals else 0.0), num=True, markup=True)

    ps = [is_p_column(str(c)) for c in frame.columns]
    head = row(cell(c, head=True) for c in frame.columns)
    rows = [row(value_cell(v, d, p) for v, d, p in zip(values, digits, ps)) for values in frame.itertuples(index=False)]
    warning = _random_warning(frame)
    intro = f"<p><strong>{html.escape(warning)}</strong></p>\n" if warning else ""
    return html_page(title, intro + table(rows, head=[head], cls="compact"))


#: the columns that make a table a comparisons table (``comparisons.csv``), shown by :func:`comparisons_body`
COMPARISON_PAGE_COLUMNS = frozenset({"significant", "mdd"})

#: what a pair's ``kind`` says in its heading row
PAIR_KIND_TEXT = {
    "configured": "a configured pair",
    "against_first": "against the first model of Table 2",
    "consecutive": "consecutive revisions",
}


#: below the comparisons table: what its columns are (the report's caption says more)
COMPARISONS_LEGEND = (
    "<p><small>B - A: B's value minus A's. Interval: for EW and MW a paired-bootstrap CI at the level "
    "shown, Bonferroni across groups (column correction of the CSV; under a clustering, TSE has one too). "
    "p: for TSE McNemar's exact test "
    "(under a clustering Durkalski's), p adj.: Holm's across groups. mdd: the smallest difference the "
    "row's test detects with power 0.8. A / B only: the TSE rows only A / only B gets right. "
    "Data: comparisons.csv.</small></p>\n"
)


def _power_sentences(frame: pd.DataFrame) -> list[str | None]:
    """Per row of a comparisons table, the sentence of
    :func:`verbeval.agreement.report.comparisons.power_note` for a row that is not significant, whose
    interval does not exclude 0 and that has a finite ``mdd``; None for every other row (a significant
    one, one without an mdd, one without a verdict: its ``note`` says why)."""
    import numpy as np
    import pandas as pd

    from verbeval.agreement.report.comparisons import power_note
    from verbeval.core.tables import format_number

    mdd = frame["mdd"].to_numpy(dtype=np.float64, na_value=np.nan)
    ends = [
        frame[c].to_numpy(dtype=np.float64, na_value=np.nan) if c in frame else np.full(len(frame), np.nan)
        for c in ("ci_low", "ci_high")
    ]
    with np.errstate(invalid="ignore"):
        excludes = (ends[0] > 0) | (ends[1] < 0)
    flags = [None if pd.isna(v) else str(v) for v in frame["significant"].astype(object)]
    quiet = np.array([f is not None and f.lower() == "false" for f in flags], bool) & np.isfinite(mdd) & ~excludes
    return [power_note(format_number(d, DIGITS, tiny_below=TINY)) if q else None for d, q in zip(mdd, quiet)]


def comparisons_body(frame: pd.DataFrame) -> str:
    """The page of a comparisons table (``comparisons.csv``), laid out to be read in the report's
    frame: a bold line naming the random models (marked † in the table), then per pair (``kind``,
    ``model_a``, ``model_b``) a heading row and one row per group and metric with the numbers first
    (the values of A and B, the difference B - A, its interval, the p-value and its adjusted value by
    :func:`verbeval.core.tables.format_p`, the mdd, the verdict ``yes`` / ``no``, empty when there is
    none, ``n`` and TSE's discordant rows ``a_only`` / ``b_only``); no number cell wraps. A row's
    sentences (the power sentence of a row that is not significant: :func:`_power_sentences`; its
    ``note``) are the row below it, as wide as the table. A column the table lacks is shown as missing.
    So the page fits a frame of about 900 px (the report's beside its menu) at any number of rows."""
    import pandas as pd

    from verbeval.core.html_report import cell, row, table
    from verbeval.core.provenance import marked, random_note
    from verbeval.core.tables import MISSING, format_number, format_p

    def column(name: str) -> list[object]:
        """The column's values, None for a missing cell (or every cell, when the table lacks it)."""
        if name not in frame:
            return [None] * len(frame)
        return [None if pd.isna(v) else v for v in frame[name].astype(object)]

    def number(value: object) -> str:
        return format_number(float("nan") if value is None else float(value), DIGITS, tiny_below=TINY)

    def flag(value: object) -> bool:
        return value is not None and str(value).lower() == "true"

    col = {c: column(c) for c in ("kind", "model_a", "model_b", "group", "metric", "value_a", "value_b",
                                  "difference", "ci_low", "ci_high", "p_value", "p_adjusted", "mdd",
                                  "significant", "n", "note", "a_only", "b_only")}  # fmt: skip

    random = {
        str(m) for side in ("a", "b") for m, f in zip(col[f"model_{side}"], column(f"random_init_{side}")) if flag(f)
    }
    confidence = column("confidence")
    levels = {float(c) for c in confidence if c is not None}
    one_level = len(levels) == 1  # the level in the header, else in each interval's cell
    interval = f"{100 * next(iter(levels)):g}% interval" if one_level else "interval"
    heads = ["group", "metric", "A", "B", "B - A", interval, "p", "p adj.", "mdd", "significant", "n", "A / B only"]
    head = row(cell(h, head=True) for h in heads)
    sentences = _power_sentences(frame)
    rows, pair = [], None
    for i, pair_here in enumerate(zip(col["kind"], col["model_a"], col["model_b"])):
        if pair_here != pair:
            pair = kind, a, b = pair_here
            names = [MISSING if m is None else marked(str(m), str(m) in random) for m in (b, a)]
            text = f"B {names[0]} - A {names[1]}" + ("" if kind is None else f" ({PAIR_KIND_TEXT.get(kind, kind)})")
            rows.append(row([cell(text, head=True, cls="pair", span={"colspan": len(heads)})]))
        r = {c: MISSING if v[i] is None else v[i] for c, v in col.items()}
        ci = MISSING if MISSING in (r["ci_low"], r["ci_high"]) else f"[{number(r['ci_low'])}, {number(r['ci_high'])}]"
        if ci != MISSING and not one_level and confidence[i] is not None:
            ci = f"<small>{100 * float(confidence[i]):g}%</small> {ci}"
        notes = [str(t) for t in (sentences[i], col["note"][i]) if t]
        only = MISSING if MISSING in (r["a_only"], r["b_only"]) else f"{int(r['a_only'])} / {int(r['b_only'])}"
        verdict = "" if r["significant"] == MISSING else "yes" if flag(r["significant"]) else "no"
        numbers = [number(col[c][i]) for c in ("value_a", "value_b", "difference")]
        numbers += [ci, format_p(col["p_value"][i]), format_p(col["p_adjusted"][i]), number(col["mdd"][i])]
        rows.append(
            row(
                [cell(r["group"]), cell(r["metric"])]
                + [cell(v, num=True, markup=True) for v in numbers]
                + [cell(verdict), cell(r["n"] if r["n"] == MISSING else int(r["n"]), num=True), cell(only, num=True)]
            )
        )
        if notes:  # the sentences: below the row, as wide as the table
            rows.append(row([cell(""), cell("; ".join(notes), cls="note", span={"colspan": len(heads) - 1})]))
    warning = random_note(sorted(random)) if random else None
    intro = f"<p><strong>{html.escape(warning)}</strong></p>\n" if warning else ""
    return intro + table(rows, head=[head], cls="compact") + COMPARISONS_LEGEND


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

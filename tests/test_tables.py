"""The one table renderer (core.tables) behind the studies' Markdown and LaTeX files."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from verbeval.core.tables import (
    MISSING,
    format_number,
    format_rows,
    latex_row,
    latex_tabular,
    markdown_table,
    number,
    tex_escape,
)


def test_format_number() -> None:
    assert [format_number(x) for x in (0.125, -1.0, 1234567.891, 1e-9, np.float64(0.5), 3)] == [
        "0.12",
        "-1.00",
        "1234567.89",
        "0.00",
        "0.50",
        "3.00",
    ]
    assert format_number(None) == format_number(float("nan")) == format_number(np.nan) == MISSING == "–"
    assert format_number(0.123456, 3) == "0.123" and format_number(math.inf, 3) == "inf"
    # small values in scientific notation below a threshold (the KL tables); zero stays fixed
    kl = number(4, tiny_below=1e-3)
    assert [kl(x) for x in (0.0, -0.0, 1e-4, -2.5e-5, 0.001, 12345.6789)] == [
        "0.0000",
        "-0.0000",
        "1.00e-04",
        "-2.50e-05",
        "0.0010",
        "12345.6789",
    ]


def test_format_rows_uses_each_columns_format_or_str() -> None:
    frame = pd.DataFrame({"name": ["a_b", "c"], "n": [3, 12], "rho": [0.5, np.nan]})
    assert format_rows(frame, {"rho": number(3)}) == [["a_b", "3", "0.500"], ["c", "12", "–"]]
    assert format_rows(frame) == [["a_b", "3", "0.5"], ["c", "12", "nan"]]


def test_markdown_table() -> None:
    assert markdown_table(["Group", "TSE"], [["Simple", "0.50"], ["Across & co", "–"]], "lr") == [
        "| Group | TSE |",
        "|---|---:|",
        "| Simple | 0.50 |",
        "| Across & co | – |",
    ]
    assert markdown_table(["a", "b", "c"], [], "llr") == ["| a | b | c |", "|---|---|---:|"]


def test_latex_tabular_sections_and_rows() -> None:
    head = [latex_row(["", r"\multicolumn{2}{c}{m}"]), r"\cmidrule(lr){2-3}", latex_row(["Group", "EW", "MW"])]
    rows = [latex_row([tex_escape("Across PP & co_1"), "0.50", "–"])]
    assert latex_tabular("lcc", head, rows) == [
        r"\begin{tabular}{lcc}",
        r"\toprule",
        r" & \multicolumn{2}{c}{m} \\",
        r"\cmidrule(lr){2-3}",
        r"Group & EW & MW \\",
        r"\midrule",
        r"Across PP \& co\_1 & 0.50 & – \\",
        r"\bottomrule",
        r"\end{tabular}",
    ]
    # several blocks (one per model): a rule between each, none after the last
    assert latex_tabular("l", ["A"], ["1"], ["B"], ["2"])[2:-2] == [
        "A",
        r"\midrule",
        "1",
        r"\midrule",
        "B",
        r"\midrule",
        "2",
    ]
    assert latex_tabular("l", ["h"], []) == [
        r"\begin{tabular}{l}",
        r"\toprule",
        "h",
        r"\midrule",
        r"\bottomrule",
        r"\end{tabular}",
    ]


def test_tex_escape() -> None:
    assert tex_escape(r"50% of a_b & c #1 $5 \x") == r"50\% of a\_b \& c \#1 \$5 \textbackslash{}x"


def test_markdown_cells_are_escaped_everywhere() -> None:
    """A custom group's name with a pipe or HTML stays one cell of text (table2.md and every pipe table)."""
    from verbeval.agreement.report.tables import to_markdown
    from verbeval.core.tables import md_escaped_frame

    name = "A|B <script>alert(1)</script> &amp; back\\slash\nnext"
    escaped = r"A\|B &lt;script&gt;alert(1)&lt;/script&gt; &amp;amp; back\\slash next"
    table = pd.DataFrame({"group": ["custom"], "name": [name], "m.tse": [0.5], "m.ew": [0.25], "m.mw": [np.nan]})
    lines = to_markdown(table, ["m"]).splitlines()
    assert lines[2] == f"| {escaped} | 0.50 | 0.25 | – |"
    assert markdown_table([name], [[name]], "l")[0] == f"| {escaped} |"
    frame = md_escaped_frame(pd.DataFrame({"a|b": [name], "n": [3]}))
    assert list(frame.columns) == [r"a\|b", "n"] and frame.iloc[0].tolist() == [escaped, 3]

"""The lexicon-modes table: TSE, EW and MW (p = 1) per group, model and mode
(:mod:`verbeval.agreement.lexicon_modes.modes`) in Markdown, LaTeX and DVC metrics, and the lemma
coverage of each mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.lexicon_modes.modes import METRICS, MODES, mode_masks
from verbeval.agreement.scores.registry import label_of
from verbeval.agreement.scores.registry import metric as registry_metric
from verbeval.core.tables import format_number, latex_row, latex_tabular, markdown_table, tex_escape


def modes_table(summary: pd.DataFrame, groups: Sequence[dict], models: Sequence[str]) -> pd.DataFrame:
    """Long-to-wide: one row per (group, model, mode) with TSE, EW, MW, CIs and coverage."""
    recs = []
    for g in groups:
        for m in models:
            for mode in MODES:
                sel = summary[(summary["group"] == g["id"]) & (summary["model"] == m) & (summary["mode"] == mode)]
                if sel.empty:
                    continue
                r: dict[str, Any] = {"group": g["id"], "name": g["name"], "model": m, "mode": mode}
                for name in METRICS:
                    metric = registry_metric(name)
                    hit = sel[sel["metric"] == name].iloc[0]
                    for col, field in metric.columns:
                        r[col] = hit[field]
                    if metric.unit == "row":  # rows whose verb forms count in the mode / all rows
                        for col, field in metric.counts:
                            r[col] = int(hit[field])
                r["n_lemmas"] = int(sel["n_lemmas"].iloc[0])
                recs.append(r)
    return pd.DataFrame(recs)


def to_markdown(table: pd.DataFrame, models: Sequence[str], headline: str) -> str:
    """Groups as rows; per model and mode TSE / EW / MW (headline mode first), lemma counts in the header."""
    order = [headline] + [m for m in MODES if m != headline]
    header = ["Group"]
    for m in models:
        for mode in order:
            sel = table[(table["model"] == m) & (table["mode"] == mode)]
            n = int(sel["n_lemmas"].iloc[0]) if len(sel) else 0
            header += [f"{m} {mode} ({n}) {label_of(k)}" for k in METRICS]
    rows = []
    for gid in dict.fromkeys(table["group"]):
        g = table[table["group"] == gid]
        cells = [str(g["name"].iloc[0])]
        for m in models:
            for mode in order:
                sel = g[(g["model"] == m) & (g["mode"] == mode)]
                cells += [format_number(float(sel[k].iloc[0]) if len(sel) else None) for k in METRICS]
        rows.append(cells)
    return "\n".join(markdown_table(header, rows, "l" + "r" * (len(header) - 1))) + "\n"


def to_latex(table: pd.DataFrame, models: Sequence[str], headline: str) -> str:
    """One block per model: rows are groups, columns TSE/EW/MW for each mode."""
    order = [headline] + [m for m in MODES if m != headline]
    sections: list[list[str]] = []
    for m in models:
        heads = []
        for mode in order:
            sel = table[(table["model"] == m) & (table["mode"] == mode)]
            n = int(sel["n_lemmas"].iloc[0]) if len(sel) else 0
            heads.append(rf"\multicolumn{{{len(METRICS)}}}{{c}}{{{tex_escape(mode)} ({n})}}")
        rows = []
        for gid in dict.fromkeys(table["group"]):
            g = table[(table["group"] == gid) & (table["model"] == m)]
            cells = [tex_escape(str(table[table["group"] == gid]["name"].iloc[0]))]
            for mode in order:
                sel = g[g["mode"] == mode]
                cells += [format_number(float(sel[k].iloc[0]) if len(sel) else None) for k in METRICS]
            rows.append(latex_row(cells))
        sections += [
            [
                latex_row([rf"\multicolumn{{{1 + len(METRICS) * len(order)}}}{{l}}{{\textbf{{{tex_escape(m)}}}}}"]),
                latex_row([""] + heads),
                latex_row(["Group"] + [" & ".join(label_of(k) for k in METRICS)] * len(order)),
            ],
            rows,
        ]
    return "\n".join(latex_tabular("l" + "c" * len(METRICS) * len(order), *sections)) + "\n"


def to_metrics(table: pd.DataFrame, models: Sequence[str], headline: str, coverage: pd.DataFrame) -> dict[str, Any]:
    """``{model: {headline_mode, coverage: {mode: n}, <mode>: {group: {tse, ew, mw}}}}``; NaN -> null."""
    out: dict[str, Any] = {}
    for m in models:
        entry: dict[str, Any] = {"headline_mode": headline}
        cov = coverage[coverage["model"] == m]
        entry["coverage"] = {mode: int(cov[f"n_{mode}"].iloc[0]) for mode in MODES} if len(cov) else {}
        for mode in [headline] + [x for x in MODES if x != headline]:
            sel = table[(table["model"] == m) & (table["mode"] == mode)]
            entry[mode] = {
                str(r["group"]): {k: (None if np.isnan(r[k]) else float(r[k])) for k in METRICS}
                for _, r in sel.iterrows()
            }
        out[m] = entry
    return out


def coverage_table(forms: dict[str, pd.DataFrame], common: pd.DataFrame) -> pd.DataFrame:
    """Lemma coverage per model and mode (lexicon lemmas only)."""
    recs = []
    for m, f in forms.items():
        masks = mode_masks(f, common)
        lex = f["in_lexicon"].to_numpy(bool)
        recs.append(
            {
                "model": m,
                "n_lexicon": int(lex.sum()),
                **{f"n_{mode}": int(masks[mode][lex].sum()) for mode in MODES},
                "n_multi_token": int(((f["n_sing"] > 1) | (f["n_plur"] > 1))[lex].sum()),
            }
        )
    return pd.DataFrame(recs)

"""Table 2 of Newman et al. (2021): TSE, EW and MW (p = 1) per template group, one column block per model."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.scores.registry import HEADLINE, NAMES, headline_rows, label_list
from verbeval.core.html_report import cell, html_page, row
from verbeval.core.html_report import table as html_table
from verbeval.core.provenance import RANDOM_MARK, marked, random_flags, random_note
from verbeval.core.tables import format_number, latex_row, latex_tabular, markdown_table, tex_escape


def table2(summary: pd.DataFrame, groups: Sequence[dict], models: Sequence[str]) -> pd.DataFrame:
    """Wide Table 2: rows are groups (in ``groups`` order), columns ``<model>.<metric>`` plus CIs.

    EW and MW are read at top-p cutoff 1.0 (the whole vocabulary). ``<model>.random_init`` says
    whether the model is randomly initialised (the summaries' ``random_init`` column,
    :mod:`verbeval.core.provenance`); the writers below mark such a model and add a note.
    ``<model>.n_nonfinite`` (only when some summary has an ``n_nonfinite`` column, i.e. a model ran
    under ``inference.allow_nonfinite`` and had such contexts): contexts whose logits were not finite,
    which have no score; the writers add a note per model and group that has any. ``<model>.cluster``
    (only when some summary has a ``cluster`` column: ``agreement.bootstrap.cluster`` other than
    ``context``): what the model's intervals resample; the writers add a note.
    """
    random = random_flags(summary)
    clusters = summary.groupby("model", sort=False)["cluster"].first().to_dict() if "cluster" in summary else None
    nonfinite = _nonfinite_counts(summary)
    at_one = summary[headline_rows(summary)]
    rows = []
    for g in groups:
        row: dict[str, object] = {"group": g["id"], "name": g["name"]}
        for m in models:
            row[f"{m}.random_init"] = random.get(m, False)
            sel = at_one[(at_one["group"] == g["id"]) & (at_one["model"] == m)]
            for metric in HEADLINE:
                hit = sel[sel["metric"] == metric.name]
                val = hit.iloc[0] if len(hit) else None
                for col, field in metric.columns:
                    row[f"{m}.{col}"] = float(val[field]) if val is not None else np.nan
                for col, field in metric.counts:  # e.g. TSE: rows with single-token forms / all rows
                    row[f"{m}.{col}"] = int(val[field]) if val is not None else 0
            if nonfinite is not None:
                row[f"{m}.n_nonfinite"] = nonfinite.get((m, g["id"]), 0)
            if clusters is not None:
                row[f"{m}.cluster"] = clusters.get(m) if isinstance(clusters.get(m), str) else "context"
        rows.append(row)
    return pd.DataFrame(rows)


def _nonfinite_counts(summary: pd.DataFrame) -> dict[tuple[str, str], int] | None:
    """``{(model, group): contexts with non-finite logits}`` from the summaries' optional
    ``n_nonfinite`` column (``verbeval aggregate`` writes it only when there are any); None without it."""
    if "n_nonfinite" not in summary.columns:
        return None
    counts = summary.groupby(["model", "group"], sort=False)["n_nonfinite"].max().fillna(0)
    return {(str(m), str(g)): int(n) for (m, g), n in counts.items() if n > 0}


def nonfinite_notes(table: pd.DataFrame, models: Sequence[str]) -> list[str]:
    """One note per (model, group) of ``table`` with contexts whose logits were not finite (kept under
    ``inference.allow_nonfinite``): how many, and that they are left out of every mean."""
    notes = []
    for _, r in table.iterrows():
        for m in models:
            n = int(r.get(f"{m}.n_nonfinite", 0) or 0)
            if n:
                notes.append(
                    f"{m}, {r['name']}: {n} of {int(r[f'{m}.n_contexts'])} contexts had non-finite "
                    "logits (NaN or inf) and were kept under inference.allow_nonfinite: they have no "
                    f"{label_list(conjunction='or')} and are left out of the means; check the model's weights."
                )
    return notes


def random_models(table: pd.DataFrame, models: Sequence[str]) -> list[str]:
    """The models of ``table`` (:func:`table2`) that are randomly initialised, in ``models`` order."""
    return [m for m in models if f"{m}.random_init" in table.columns and bool(table[f"{m}.random_init"].any())]


def _notes(table: pd.DataFrame, models: Sequence[str], notes: Sequence[str]) -> list[str]:
    """The random-model note (when a model is random) before the other notes."""
    note = random_note(random_models(table, models))
    return ([note] if note else []) + nonfinite_notes(table, models) + cluster_notes(table, models) + list(notes)


def cluster_notes(table: pd.DataFrame, models: Sequence[str]) -> list[str]:
    """One note naming what the CIs resample when a model's are clustered (``agreement.bootstrap.cluster``)."""
    by = {m: str(table[f"{m}.cluster"].iloc[0]) for m in models if f"{m}.cluster" in table.columns and len(table)}
    clustered = {m: c for m, c in by.items() if c != "context"}
    if not clustered:
        return []
    kinds = ", ".join(f"{m}: {c}" for m, c in clustered.items())
    return [
        f"The CIs resample clusters, not single contexts and rows (agreement.bootstrap.cluster; {kinds}); "
        "docs/metrics.md, 'Clustered intervals'."
    ]


def to_metrics(table: pd.DataFrame, models: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Table 2 as nested ``{model: {group: {tse, ew, mw, random_init}}}`` (metrics.json); NaN becomes
    null. ``random_init``: the model is randomly initialised, its numbers meaningless (in every group's
    record, so that a model's keys are its groups alone). A group with contexts whose logits were not
    finite (``inference.allow_nonfinite``) also holds ``nonfinite_contexts``: how many, all without a
    score."""
    random = set(random_models(table, models))
    out: dict[str, dict[str, Any]] = {}
    for m in models:
        out[m] = {}
        for _, r in table.iterrows():
            vals = {k: float(r[f"{m}.{k}"]) for k in NAMES}
            entry: dict[str, Any] = {k: (None if np.isnan(v) else v) for k, v in vals.items()}
            entry["random_init"] = m in random
            n_bad = int(r.get(f"{m}.n_nonfinite", 0) or 0)
            if n_bad:  # contexts without a score (inference.allow_nonfinite)
                entry["nonfinite_contexts"] = n_bad
            out[m][str(r["group"])] = entry
    return out


def errata_notes(
    flagged: pd.DataFrame, templates: pd.DataFrame | None, groups: Sequence[dict], dropped: bool
) -> list[str]:
    """Table 2 notes on the flagged errata rows (``flagged``: ``source, line, reason``, from
    :func:`verbeval.agreement.data.errata.flagged_errata`), one note per group that has any.

    ``templates`` (the normalised table, with ``source`` and ``line``) gives how many of them are
    among the scored rows (fewer under ``max_rows_per_source``); ``dropped``: whether
    ``agreement.drop_flagged_errata`` removed them.
    """
    notes = []
    scored = set(zip(templates["source"], templates["line"].astype(int))) if templates is not None else set()
    for g in groups:
        sel = flagged[flagged["source"].isin(g["sources"])]
        if sel.empty:
            continue
        per_source = ", ".join(f"{n} in {s}" for s, n in sel.groupby("source", sort=False).size().items())
        kinds = "; ".join(dict.fromkeys(str(r).split(":")[0] for r in sel["reason"]))
        if dropped:
            what = "dropped (agreement.drop_flagged_errata)"
        else:
            n_in = sum((s, int(ln)) in scored for s, ln in zip(sel["source"], sel["line"]))
            what = (
                f"{n_in} of them are among the scored rows and are kept, as in the paper "
                "(agreement.drop_flagged_errata drops them)"
            )
        notes.append(
            f"{g['name']}: {len(sel)} rows of the published files are flagged in the errata list "
            f"({kinds}; {per_source}); {what}."
        )
    return notes


def to_markdown(table: pd.DataFrame, models: Sequence[str], digits: int = 2, notes: Sequence[str] = ()) -> str:
    random = set(random_models(table, models))
    notes = _notes(table, models, notes)
    header = ["Group"] + [f"{marked(m, m in random)} {k.label}" for m in models for k in HEADLINE]
    rows = [
        [str(r["name"])] + [format_number(r[f"{m}.{k}"], digits) for m in models for k in NAMES]
        for _, r in table.iterrows()
    ]
    lines = markdown_table(header, rows, "l" + "r" * (len(header) - 1))
    if notes:
        lines += ["", "Notes:", ""] + [f"* {n}" for n in notes]
    return "\n".join(lines) + "\n"


def tse_wilson(summary: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """Per (model, group), TSE's Wilson interval (``wilson_low``, ``wilson_high`` of the summaries'
    ``tse`` rows); empty for summaries written before they had one."""
    if not {"wilson_low", "wilson_high"} <= set(summary.columns):
        return {}
    t = summary[summary["metric"] == "tse"]
    return {
        (str(m), str(g)): (float(lo), float(hi))
        for m, g, lo, hi in zip(t["model"], t["group"], t["wilson_low"], t["wilson_high"])
    }


def to_html(
    table: pd.DataFrame,
    models: Sequence[str],
    digits: int = 2,
    notes: Sequence[str] = (),
    confidence: float | None = None,
    wilson: Mapping[tuple[str, str], tuple[float, float]] | None = None,
) -> str:
    """Table 2 as a standalone HTML page (an item of the Snakemake report): per model TSE, EW and MW
    with their bootstrap CIs below the value (a cell is two lines, neither wraps), and the counts behind
    them (rows with single-token forms / all rows, contexts); the notes follow the table. ``wilson``
    (:func:`tse_wilson`): TSE's Wilson interval per (model, group), the tooltip of TSE's cell."""
    level = f"{confidence:.0%} " if confidence else ""
    wilson = wilson or {}
    random = set(random_models(table, models))
    notes = _notes(table, models, notes)
    head1 = row(
        [cell("Group", head=True, span={"rowspan": 2})]
        + [cell(marked(m, m in random), head=True, span={"colspan": len(HEADLINE) + 1}) for m in models]
    )
    per_model = [cell(k.label, head=True) for k in HEADLINE] + [cell("rows / contexts", head=True)]
    rows = [head1, row(per_model * len(models))]
    for _, r in table.iterrows():
        cells = [cell(r["name"])]
        for m in models:
            for k in NAMES:
                lo, hi = r[f"{m}.{k}_ci_low"], r[f"{m}.{k}_ci_high"]
                ci = (
                    ""
                    if np.isnan(lo) or np.isnan(hi)
                    else f"<br><small>[{format_number(lo, digits)}, {format_number(hi, digits)}]</small>"
                )
                w_lo, w_hi = wilson.get((m, str(r["group"])), (np.nan, np.nan)) if k == "tse" else (np.nan, np.nan)
                # two lines at most: TSE's Wilson interval is the cell's tooltip
                tip = (
                    None
                    if np.isnan(w_lo) or np.isnan(w_hi)
                    else f"Wilson [{format_number(w_lo, digits)}, {format_number(w_hi, digits)}]"
                )
                value = format_number(r[f"{m}.{k}"], digits)
                cells.append(cell(f"{value}{ci}", num=True, markup=True, title=tip))
            counts = (
                f"{int(r[f'{m}.n_rows'])}/{int(r[f'{m}.n_rows_total'])} rows<br>{int(r[f'{m}.n_contexts'])} contexts"
            )
            cells.append(cell(f"<small>{counts}</small>", num=True, markup=True))
        rows.append(row(cells))
    body = [
        f"<p>TSE over template rows whose two verb forms are single tokens; EW and MW over contexts at "
        f"top p = 1. Below each value: its {html.escape(level)}percentile bootstrap CI"
        + ("; TSE's Wilson interval at the same level shows when the pointer rests on its value" if wilson else "")
        + ".</p>",
        html_table(rows),
    ]
    if notes:
        body.append("<p>Notes:</p><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    return html_page(f"Table 2: {label_list()} per template group", "\n".join(body))


def to_latex(table: pd.DataFrame, models: Sequence[str], digits: int = 2, notes: Sequence[str] = ()) -> str:
    random = set(random_models(table, models))
    dagger = r"$^\dagger$"
    k = len(HEADLINE)
    head = [
        latex_row(
            [""] + [rf"\multicolumn{{{k}}}{{c}}{{{tex_escape(m)}{dagger if m in random else ''}}}" for m in models]
        ),
        " ".join(rf"\cmidrule(lr){{{2 + k * i}-{1 + k * (i + 1)}}}" for i in range(len(models))),
        latex_row(["Group"] + [metric.label for _ in models for metric in HEADLINE]),
    ]
    rows = [
        latex_row([tex_escape(str(r["name"]))] + [format_number(r[f"{m}.{n}"], digits) for m in models for n in NAMES])
        for _, r in table.iterrows()
    ]
    out = latex_tabular("l" + "c" * k * len(models), head, rows)
    note = random_note(random_models(table, models))
    if note:
        out.append(r"\par\smallskip{\footnotesize " + dagger + tex_escape(note.removeprefix(RANDOM_MARK)) + r"\par}")
    for n in [*nonfinite_notes(table, models), *cluster_notes(table, models), *notes]:
        out.append(r"\par\smallskip{\footnotesize " + tex_escape(n) + r"\par}")
    return "\n".join(out) + "\n"

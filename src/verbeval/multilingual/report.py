"""The multilingual study's tables, figures and comparisons, from the models' summaries.

* :func:`language_groups`: a language's groups in table order (its constructions), named as in
  Marvin & Linzen's table; Table 2 per language is the agreement study's own
  (:func:`verbeval.agreement.report.tables.table2`), over these groups.
* :func:`overview`: one model's TSE, EW and MW per construction with the languages side by side.
* :func:`compare_languages`: the differences between two languages on the same construction. The
  items are different sentences, so every test is **unpaired**: TSE by Fisher's exact test on the
  two languages' correct and defined rows; EW and MW (top p = 1) by Welch's t-test on their contexts'
  scores. ``significant`` is read from the Holm-adjusted p-value of the same test, over every row of
  the model.
* :func:`english_against_ml`: per construction, TSE of the English CLAMS file against TSE of the
  Marvin & Linzen file of the same construction, for the same model (the agreement study's rows of
  that source); the same unpaired test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.scores.registry import CUTOFF_METRICS, NAMES, headline_rows
from verbeval.multilingual.clams import CONSTRUCTION_NAMES, CONSTRUCTIONS, group_id

#: the study's languages in table order, with their names
LANGUAGE_NAMES: dict[str, str] = {"en": "English", "fr": "French", "de": "German", "he": "Hebrew", "ru": "Russian"}
#: the headline metrics of the tables (the registry's), read at top p = 1 for those with cutoff curves
TABLE_METRICS = NAMES
#: the metrics compared by Welch's t-test on the contexts' scores (at top p = 1); TSE by Fisher's exact test
CONTEXT_METRICS = CUTOFF_METRICS
#: columns of :func:`compare_languages` and :func:`english_against_ml`
COMPARISON_COLUMNS = (
    "model", "construction", "metric", "a", "b", "value_a", "value_b", "difference", "n_a", "n_b", "test",
    "p_value", "p_holm", "significant",
)  # fmt: skip


def language_of(group: str) -> str:
    """The language of a CLAMS group id (``clams-fr.simple_agrmt`` -> ``fr``)."""
    return group.split(".", 1)[0].removeprefix("clams-")


def construction_of(group: str) -> str:
    """The construction of a CLAMS group id (``clams-fr.simple_agrmt`` -> ``simple_agrmt``)."""
    return group.split(".", 1)[1]


def language_groups(language: str, present: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The groups of ``language`` (among ``present`` when given) as a groups file lists them."""
    out = []
    for c in CONSTRUCTIONS:
        gid = group_id(language, c)
        if present is None or gid in present:
            out.append({"id": gid, "name": CONSTRUCTION_NAMES[c], "sources": [gid]})
    return out


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """TSE, and EW and MW at top p = 1, one row per model, group and metric."""
    out = summary[headline_rows(summary)].copy()
    out["language"] = out["group"].map(language_of)
    out["construction"] = out["group"].map(construction_of)
    return out


def overview(summary: pd.DataFrame, model: str, languages: Sequence[str], digits: int = 2) -> str:
    """Markdown: rows are constructions, columns the languages' TSE / EW / MW for ``model``."""
    h = headline(summary[summary["model"] == model])
    head = "| construction | " + " | ".join(f"{LANGUAGE_NAMES[lang]} TSE / EW / MW" for lang in languages) + " |"
    lines = [head, "|---|" + "---|" * len(languages)]
    for c in CONSTRUCTIONS:
        cells = []
        for lang in languages:
            vals = []
            for metric in TABLE_METRICS:
                hit = h[(h["language"] == lang) & (h["construction"] == c) & (h["metric"] == metric)]
                v = float(hit["value"].iloc[0]) if len(hit) else np.nan
                vals.append("–" if np.isnan(v) else f"{v:.{digits}f}")
            cells.append(" / ".join(vals))
        lines.append(f"| {CONSTRUCTION_NAMES[c]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table_markdown(
    table: pd.DataFrame, summary: pd.DataFrame, models: Sequence[str], title: str, digits: int = 2
) -> str:
    """A language's Table 2 (:func:`verbeval.agreement.report.tables.table2`'s frame) in Markdown with
    its intervals: TSE with its Wilson interval (over rows), EW and MW (top p = 1) with their bootstrap
    intervals (over contexts), and the counts; ``–`` where a metric is undefined (no eligible lemma)."""
    from verbeval.agreement.report.tables import tse_wilson
    from verbeval.core.provenance import marked, random_flags

    wilson = tse_wilson(summary)
    random = random_flags(summary)

    def cell(v: float, lo: float, hi: float) -> str:
        if pd.isna(v):
            return "–"
        return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"

    head = ["construction"]
    for m in models:
        head += [f"{marked(m, random.get(m, False))} TSE", "rows", "EW", "MW", "contexts"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (5 * len(models))]
    for r in table.to_dict("records"):
        cells = [str(r["name"])]
        for m in models:
            lo, hi = wilson.get((m, r["group"]), (np.nan, np.nan))
            cells += [
                cell(r[f"{m}.tse"], lo, hi),
                f"{r[f'{m}.n_rows']} of {r[f'{m}.n_rows_total']}",
                cell(r[f"{m}.ew"], r[f"{m}.ew_ci_low"], r[f"{m}.ew_ci_high"]),
                cell(r[f"{m}.mw"], r[f"{m}.mw_ci_low"], r[f"{m}.mw_ci_high"]),
                str(r[f"{m}.n_contexts"]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return f"# {title}\n\n" + "\n".join(lines) + "\n"


def _holm(p: np.ndarray) -> np.ndarray:
    from verbeval.agreement.scores.paired_tests import holm

    return holm(p) if len(p) else p


def _fisher(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    from scipy.stats import fisher_exact

    if n_a == 0 or n_b == 0:
        return float("nan")
    return float(fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]]).pvalue)


def _welch(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import ttest_ind

    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return 1.0 if a[0] == b[0] else 0.0
    return float(ttest_ind(a, b, equal_var=False).pvalue)


def _with_holm(rows: list[dict[str, Any]], alpha: float) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=[c for c in COMPARISON_COLUMNS if c not in ("p_holm", "significant")])
    parts = []
    for _, part in df.groupby("model", sort=False):
        part = part.copy()
        p = part["p_value"].to_numpy(dtype=float)
        adj = np.full(len(p), np.nan)
        ok = ~np.isnan(p)
        adj[ok] = _holm(p[ok])
        part["p_holm"] = adj
        part["significant"] = adj < alpha  # NaN (no test) compares False
        parts.append(part)
    out = pd.concat(parts, ignore_index=True) if parts else df.assign(p_holm=[], significant=[])
    return out[list(COMPARISON_COLUMNS)]


def _tse_counts(h: pd.DataFrame, model: str, group: str) -> tuple[float, int, int]:
    hit = h[(h["model"] == model) & (h["group"] == group) & (h["metric"] == "tse")]
    if not len(hit):
        return np.nan, 0, 0
    value, n = float(hit["value"].iloc[0]), int(hit["n"].iloc[0])
    return value, int(round(value * n)) if n else 0, n


def compare_languages(
    summary: pd.DataFrame, contexts: pd.DataFrame, models: Sequence[str], languages: Sequence[str], alpha: float
) -> pd.DataFrame:
    """Every pair of ``languages`` on every construction both have, per model (module docstring)."""
    h = headline(summary)
    rows: list[dict[str, Any]] = []
    for model in models:
        for c in CONSTRUCTIONS:
            for a, b in combinations(languages, 2):
                ga, gb = group_id(a, c), group_id(b, c)
                if not ((h["group"] == ga) & (h["model"] == model)).any():
                    continue
                if not ((h["group"] == gb) & (h["model"] == model)).any():
                    continue
                va, ka, na = _tse_counts(h, model, ga)
                vb, kb, nb = _tse_counts(h, model, gb)
                base = {"model": model, "construction": c, "a": a, "b": b}
                rows.append({**base, "metric": "tse", "value_a": va, "value_b": vb, "difference": va - vb,
                             "n_a": na, "n_b": nb, "test": "Fisher exact, unpaired", "p_value": _fisher(ka, na, kb, nb)})  # fmt: skip
                for metric in CONTEXT_METRICS:
                    sel = contexts["model"] == model
                    xa = contexts.loc[sel & (contexts["group"] == ga), metric].to_numpy(dtype=float)
                    xb = contexts.loc[sel & (contexts["group"] == gb), metric].to_numpy(dtype=float)
                    if not (np.isfinite(xa).any() and np.isfinite(xb).any()):
                        continue  # a language without EW or MW here (no eligible lemma): nothing to compare
                    ma = float(np.nanmean(xa)) if np.isfinite(xa).any() else np.nan
                    mb = float(np.nanmean(xb)) if np.isfinite(xb).any() else np.nan
                    rows.append({**base, "metric": metric, "value_a": ma, "value_b": mb, "difference": ma - mb,
                                 "n_a": int(np.isfinite(xa).sum()), "n_b": int(np.isfinite(xb).sum()),
                                 "test": "Welch t, unpaired", "p_value": _welch(xa, xb)})  # fmt: skip
    return _with_holm(rows, alpha)


def english_against_ml(
    summary: pd.DataFrame, ml_templates: pd.DataFrame, ml_tse: Mapping[str, Sequence[pd.DataFrame]], alpha: float
) -> pd.DataFrame:
    """Per model and construction: TSE of the English CLAMS file against the Marvin & Linzen file of the
    same construction (source ``ml_<construction>``); ``ml_tse``: the model's agreement ``tse.parquet``
    tables, each with its group's ``group`` column added (module docstring)."""
    h = headline(summary)
    rows: list[dict[str, Any]] = []
    for model, tables in ml_tse.items():
        if not tables:
            continue
        tse = pd.concat(tables, ignore_index=True)
        for c in CONSTRUCTIONS:
            source = f"ml_{c}"
            g = group_id("en", c)
            if not ((h["group"] == g) & (h["model"] == model)).any():
                continue
            in_source = []
            for group, part in tse.groupby("group", sort=False):
                rows_of = ml_templates[ml_templates["group"] == group].reset_index(drop=True)
                src = rows_of["source"].to_numpy()[part["row"].to_numpy()]
                in_source.append(part["tse"].to_numpy(dtype=float)[src == source])
            vals = np.concatenate(in_source) if in_source else np.zeros(0)
            vals = vals[~np.isnan(vals)]
            if not len(vals):
                continue
            va, ka, na = _tse_counts(h, model, g)
            kb, nb = int((vals == 1.0).sum()), len(vals)
            rows.append({"model": model, "construction": c, "metric": "tse", "a": "CLAMS en", "b": "Marvin & Linzen",
                         "value_a": va, "value_b": kb / nb, "difference": va - kb / nb, "n_a": na, "n_b": nb,
                         "test": "Fisher exact, unpaired", "p_value": _fisher(ka, na, kb, nb)})  # fmt: skip
    return _with_holm(rows, alpha)


def comparisons_markdown(table: pd.DataFrame, title: str, note: str, digits: int = 3) -> str:
    """A comparison table in Markdown under ``title``, with ``note`` below."""
    from verbeval.core.tables import format_p

    lines = [f"## {title}", "", "| model | construction | metric | a | b | a value | b value | difference | n a | n b "
             "| test | p | p (Holm) | significant |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in table.itertuples(index=False):

        def num(x: float) -> str:
            return "–" if pd.isna(x) else f"{x:.{digits}f}"

        lines.append(
            f"| {r.model} | {CONSTRUCTION_NAMES[r.construction]} | {r.metric.upper()} | {r.a} | {r.b} | {num(r.value_a)} "
            f"| {num(r.value_b)} | {num(r.difference)} | {r.n_a} | {r.n_b} | {r.test} | {format_p(r.p_value)} "
            f"| {format_p(r.p_holm)} | {'yes' if r.significant else 'no'} |"
        )
    return "\n".join([*lines, "", note, ""])

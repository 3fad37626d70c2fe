"""The data behind each agreement figure, as DataFrames (drawing is in :mod:`verbeval.agreement.report.plots`).

Every function here reads the aggregates (``summary_all.csv``) or per-lemma statistics and returns
exactly what a figure shows; the workflow writes it as the CSV next to the figure.

* :func:`cutoff_curves`: Figures 1-4 of Newman et al. (2021): EW/MW, counted probability mass or
  the share of invalid contexts against the top-p / bottom-p cutoff, per model and group, with
  the bootstrap CI of the summary, the share of contexts behind each estimate and whether it
  rests on fewer than ``min_contexts`` contexts (``low_n``); :func:`shown_cutoffs`: the cutoffs
  a figure's x axis spans.
* :func:`model_comparison`: TSE, EW and MW (top p = 1) per group, all models side by side.
* :func:`lemma_accuracy`: per-lemma agreement accuracy against mean log-probability.
* :func:`checkpoint_curves`: TSE, EW and MW (top p = 1) of the revisions of swept models against
  training step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.scores.registry import CUTOFF_METRICS, HEADLINE, LABELS, NAMES, headline_rows, label_list
from verbeval.agreement.steps import PLOT_CUTOFFS, PLOT_LEMMAS
from verbeval.core.errors import VerbevalError

#: the label of every metric a figure shows: the headline metrics' (the registry's), then the others
METRIC_LABELS = {
    **LABELS,
    "prob_counted": "Probability mass counted",
    "prob_counted_forms": "Probability mass of the counted forms in the set",
    "invalid": "Share of invalid contexts",
}
SIDE_LABELS = {"top": "top-p cutoff", "bottom": "bottom-p cutoff"}


@dataclass(frozen=True)
class CutoffFigure:
    """Which summary metrics and sides a cutoff figure shows; one panel row per (metric, side)."""

    stem: str
    title: str
    metrics: tuple[str, ...]
    sides: tuple[str, ...]
    log_y_bottom: bool = False  # log y axis on bottom-p panels
    has_ci: bool = True  # the summary has bootstrap CIs for the metric
    valid_share_row: bool = False  # a panel row with the share of contexts where the metric is defined


#: the cutoff figures, by the name the CLI takes
CUTOFF_FIGURES: dict[str, CutoffFigure] = {
    "scores-top": CutoffFigure(
        "fig1_top_p",
        f"{label_list(CUTOFF_METRICS)} against top-p cutoff",
        CUTOFF_METRICS,
        ("top",),
        valid_share_row=True,
    ),
    "scores-bottom": CutoffFigure(
        "fig2_bottom_p",
        f"{label_list(CUTOFF_METRICS)} against bottom-p cutoff",
        CUTOFF_METRICS,
        ("bottom",),
        valid_share_row=True,
    ),
    "prob-counted": CutoffFigure(
        "fig3_prob_counted",
        "Probability mass of the counted lemmas' inflections",
        ("prob_counted",),
        ("top", "bottom"),
        log_y_bottom=True,
    ),
    "invalid": CutoffFigure(
        "fig4_invalid",
        "Share of contexts with no eligible lemma (invalid)",
        ("invalid",),
        ("top", "bottom"),
        has_ci=False,
    ),
}

CURVE_COLUMNS = (
    "model",
    "group",
    "group_name",
    "metric",
    "side",
    "cutoff",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "n_total",
    "valid_share",
    "low_n",
)

#: metrics that are a counted probability mass (0, never NaN, where no lemma counts)
COUNTED_MASSES = ("prob_counted", "prob_counted_forms")

#: estimates averaged over fewer contexts are marked low_n: the schema's default (``plot-cutoffs --min-contexts``)
DEFAULT_MIN_CONTEXTS: int = PLOT_CUTOFFS.default("min_contexts")


def contexts_averaged(curves: pd.DataFrame) -> np.ndarray:
    """How many contexts each estimate of a cutoff summary averages: ``n`` (the contexts where the
    metric is defined) for EW, MW and the counted masses; ``n_total`` for ``invalid``, a share of
    all contexts (its ``n`` counts the invalid ones)."""
    is_share = (curves["metric"] == "invalid").to_numpy()
    return np.where(is_share, curves["n_total"].to_numpy(), curves["n"].to_numpy()).astype(np.int64)


def low_n_flags(curves: pd.DataFrame, min_contexts: int) -> tuple[np.ndarray, np.ndarray]:
    """``(valid_share, low_n)`` of each row: the share of the group's contexts the estimate
    averages (:func:`contexts_averaged` / ``n_total``; 0 for an empty group) and whether that is
    fewer than ``min_contexts`` contexts (also when there is none, i.e. the value is NaN)."""
    if min_contexts < 1:
        raise VerbevalError(f"min_contexts must be at least 1, not {min_contexts}")
    used = contexts_averaged(curves)
    total = curves["n_total"].to_numpy().astype(np.int64)
    share = np.divide(used, total, out=np.zeros(len(used), float), where=total > 0)
    return share, used < min_contexts


def shown_cutoffs(curves: pd.DataFrame, side: str, *, hide_low_n: bool = False) -> np.ndarray:
    """The cutoffs of ``side`` that a figure's x axis spans: from the smallest to the largest
    cutoff at which at least one model and group has an estimate that is drawn (averaged over at
    least one context, and not ``low_n`` when low-n estimates are hidden). A counted mass
    (:data:`COUNTED_MASSES`) of 0 is no estimate: no lemma counted in any context (EW undefined
    there), so Figure 3 leaves out the cutoffs Figure 2 leaves out (and 0 has no place on its log
    axis). All cutoffs of the side when no estimate is drawn at all (the figure then shows empty
    panels over the configured range). Sorted ascending."""
    part = curves[curves["side"] == side]
    cuts = np.unique(part["cutoff"].to_numpy(float))
    values = part["value"].to_numpy(float)
    drawn = (contexts_averaged(part) > 0) & np.isfinite(values)
    drawn &= ~part["metric"].isin(COUNTED_MASSES).to_numpy() | (values > 0)
    if hide_low_n:
        drawn &= ~part["low_n"].to_numpy(bool)
    if not drawn.any():
        return cuts
    at = part["cutoff"].to_numpy(float)[drawn]
    return cuts[(cuts >= at.min()) & (cuts <= at.max())]


def _group_names(groups: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {str(g["id"]): str(g["name"]) for g in groups}


def _order(df: pd.DataFrame, col: str, values: Sequence[str]) -> pd.Series:
    return df[col].map({v: i for i, v in enumerate(values)})


def _check_cutoff_rows(
    part: pd.DataFrame, side: str, cuts: np.ndarray, models: Sequence[str], gids: Sequence[str], metrics: Sequence[str]
) -> None:
    """Every (model, group, metric) of ``part`` (one side's rows at its configured cutoffs) has one row
    at each of ``cuts``; else :class:`VerbevalError` naming the first (model, group, metric) in that order
    that has none at some cutoff (its first such cutoff) or more than one. Counted in one pass, so that
    a sweep's thousand revisions cost what reading them costs."""
    if not len(cuts):
        return
    at = np.isclose(part["cutoff"].to_numpy()[:, None], cuts[None, :], rtol=1e-9, atol=0).argmax(axis=1)
    keys = pd.MultiIndex.from_arrays([part["model"], part["group"], part["metric"], at])
    counts = pd.Series(1, index=keys).groupby(level=[0, 1, 2, 3]).sum()
    grid = pd.MultiIndex.from_product([list(models), list(gids), list(metrics), range(len(cuts))])
    n = counts.reindex(grid, fill_value=0).to_numpy().reshape(-1, len(cuts))
    bad = np.flatnonzero((n != 1).any(axis=1))
    if not len(bad):
        return
    m, g, metric = grid[bad[0] * len(cuts)][:3]
    row = n[bad[0]]
    if (row == 0).any():
        raise VerbevalError(
            f"summary has no {metric} ({side}) for model {m!r}, group {g!r} at cutoff "
            f"{cuts[np.flatnonzero(row == 0)[0]]:g} (stale summary? rerun aggregate)"
        )
    raise VerbevalError(f"summary has duplicate {metric} ({side}) rows for model {m!r}, group {g!r}")


def cutoff_curves(
    summary: pd.DataFrame,
    *,
    metrics: Sequence[str],
    sides: Sequence[str],
    models: Sequence[str],
    groups: Sequence[Mapping[str, Any]],
    cutoffs: Mapping[str, Sequence[float]],
    min_contexts: int = DEFAULT_MIN_CONTEXTS,
) -> pd.DataFrame:
    """Rows of ``summary`` for ``metrics`` x ``sides`` x ``models`` x ``groups`` at exactly the
    configured ``cutoffs`` (``{"top": [...], "bottom": [...]}``), in model, metric, side, group
    and cutoff order. ``ci_low``/``ci_high`` are the summary's bootstrap bounds; ``valid_share``
    and ``low_n`` are :func:`low_n_flags` with ``min_contexts``.

    Raises :class:`VerbevalError` naming the first missing (model, group, metric, side, cutoff),
    e.g. when the summary is stale after a cutoff change.
    """
    names = _group_names(groups)
    gids = list(names)
    s = summary[
        summary["metric"].isin(metrics)
        & summary["side"].isin(sides)
        & summary["model"].isin(models)
        & summary["group"].isin(gids)
    ].copy()
    s["cutoff"] = s["cutoff"].astype(float)
    parts = []
    for side in sides:
        cuts = np.asarray(sorted(float(c) for c in cutoffs[side]), dtype=float)
        part = s[s["side"] == side]
        keep = (
            np.isclose(part["cutoff"].to_numpy()[:, None], cuts[None, :], rtol=1e-9, atol=0).any(axis=1)
            if len(cuts)
            else np.zeros(len(part), bool)
        )
        part = part[keep]
        _check_cutoff_rows(part, side, cuts, models, gids, metrics)
        parts.append(part)
    out = pd.concat(parts, ignore_index=True) if parts else s.iloc[:0]
    out["group_name"] = out["group"].map(names)
    out = out.assign(
        _m=_order(out, "model", models),
        _me=_order(out, "metric", metrics),
        _s=_order(out, "side", sides),
        _g=_order(out, "group", gids),
    )
    out = out.sort_values(["_m", "_me", "_s", "_g", "cutoff"], kind="stable")
    out["valid_share"], out["low_n"] = low_n_flags(out, min_contexts)
    return out[list(CURVE_COLUMNS)].reset_index(drop=True)


COMPARISON_COLUMNS = ("model", "group", "group_name", "metric", "value", "ci_low", "ci_high", "n", "n_total")


def model_comparison(
    summary: pd.DataFrame, *, models: Sequence[str], groups: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """TSE (over rows) and EW, MW (over contexts, top p = 1) per model and group, with CIs: the
    numbers of Table 2, long format, in group, metric, model order."""
    names = _group_names(groups)
    gids = list(names)
    s = summary[summary["model"].isin(models) & summary["group"].isin(gids)]
    out = s[headline_rows(s, rtol=0, atol=1e-12)].reset_index(drop=True)
    for m in models:
        for g in gids:
            for metric in HEADLINE:
                n = ((out["model"] == m) & (out["group"] == g) & (out["metric"] == metric.name)).sum()
                if n != 1:
                    what = f"{metric.label} at top p = 1" if metric.cutoff_curves else metric.label
                    raise VerbevalError(f"summary has {n} rows of {what} for model {m!r}, group {g!r} (expected 1)")
    out = out.assign(
        group_name=out["group"].map(names),
        _g=_order(out, "group", gids),
        _me=_order(out, "metric", NAMES),
        _m=_order(out, "model", models),
    )
    out = out.sort_values(["_g", "_me", "_m"], kind="stable")
    return out[list(COMPARISON_COLUMNS)].reset_index(drop=True)


CHECKPOINT_COLUMNS = (
    "sweep",
    "step",
    "model",
    "group",
    "group_name",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "n_total",
)


def checkpoint_curves(
    summary: pd.DataFrame, *, checkpoints: Sequence[tuple[str, str, int]], groups: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """TSE, EW and MW (top p = 1, with CIs) of training checkpoints, one row per (checkpoint, group,
    metric), in sweep, group, metric and step order.

    ``checkpoints``: (sweep, model, step) of each checkpoint, where ``sweep`` is the swept model
    (``checkpoint_of``) and ``model`` the checkpoint's model name in ``summary``. The numbers are
    those of :func:`model_comparison` (Table 2). Raises :class:`VerbevalError` for no checkpoints, a
    model listed twice, two checkpoints of one sweep at the same step, or a missing summary row.
    """
    if not checkpoints:
        raise VerbevalError("no checkpoints given")
    ck = pd.DataFrame([(str(a), str(b), int(c)) for a, b, c in checkpoints], columns=["sweep", "model", "step"])
    dup = ck[ck["model"].duplicated()]
    if len(dup):
        raise VerbevalError(f"model {dup['model'].iloc[0]!r} is listed as a checkpoint twice")
    dup = ck[ck.duplicated(["sweep", "step"])]
    if len(dup):
        raise VerbevalError(f"sweep {dup['sweep'].iloc[0]!r} has two checkpoints at step {dup['step'].iloc[0]}")
    data = model_comparison(summary, models=list(ck["model"]), groups=groups)
    out = data.merge(ck, on="model", how="left", validate="many_to_one")
    sweeps = list(dict.fromkeys(ck["sweep"]))
    out = out.assign(
        _s=_order(out, "sweep", sweeps),
        _g=_order(out, "group", list(_group_names(groups))),
        _me=_order(out, "metric", NAMES),
    )
    out = out.sort_values(["_s", "_g", "_me", "step"], kind="stable")
    return out[list(CHECKPOINT_COLUMNS)].reset_index(drop=True)


def _num(x: Any) -> float | None:
    v = float(x)
    return None if np.isnan(v) else round(v, 6)


LEMMA_ACCURACY_COLUMNS = (
    "model",
    "lemma",
    "sing",
    "plur",
    "n_contexts",
    "accuracy",
    "mean_prob",
    "mean_log10_prob",
    "bin",
    "bin_log10_prob",
    "bin_accuracy",
)


def lemma_accuracy(stats: pd.DataFrame, models: Sequence[str], n_bins: int | None = None) -> pd.DataFrame:
    """Per-lemma accuracy against mean log10 probability, one row per (model, lemma).

    ``bin``: the lemma's quantile bin of ``mean_log10_prob`` within its model (0 = least probable,
    up to ``n_bins`` equal-count bins; None: the schema's, ``plot-lemmas --bins``); ``bin_log10_prob``
    / ``bin_accuracy``: the bin's mean x and mean accuracy (the trend line of the figure).
    """
    if n_bins is None:
        n_bins = int(PLOT_LEMMAS.default("bins"))
    present = set(stats["model"])
    missing = [m for m in models if m not in present]
    if missing:
        raise VerbevalError(f"no lemma statistics for model(s) {missing}")
    by_model = dict(list(stats.groupby("model", sort=False)))  # one pass (a sweep: every revision)
    parts = []
    for m in models:
        part = by_model[m].copy()
        x = part["mean_log10_prob"].to_numpy(dtype=float)
        if len(part) == 0:
            part["bin"] = pd.Series(dtype="int64")
        else:
            ranks = pd.Series(x).rank(method="first").to_numpy() - 1  # ties broken by lemma order
            part["bin"] = np.minimum((ranks * n_bins / len(part)).astype(int), n_bins - 1)
        grouped = part.groupby("bin")
        part["bin_log10_prob"] = grouped["mean_log10_prob"].transform("mean")
        part["bin_accuracy"] = grouped["accuracy"].transform("mean")
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    return out[list(LEMMA_ACCURACY_COLUMNS)].reset_index(drop=True)


def lemma_metrics(data: pd.DataFrame) -> dict[str, Any]:
    """Per model: number of lemmas, mean per-lemma accuracy and the Spearman correlation between
    accuracy and mean log10 probability (``null`` when either is constant)."""
    from scipy.stats import spearmanr

    out: dict[str, Any] = {}
    for m, part in data.groupby("model", sort=False):
        x, y = part["mean_log10_prob"].to_numpy(float), part["accuracy"].to_numpy(float)
        ok = ~(np.isnan(x) | np.isnan(y))
        rho = None
        if ok.sum() > 2 and np.ptp(x[ok]) > 0 and np.ptp(y[ok]) > 0:
            rho = _num(spearmanr(x[ok], y[ok]).statistic)
        out[str(m)] = {
            "n_lemmas": int(len(part)),
            "mean_accuracy": _num(np.nanmean(y)) if ok.any() else None,
            "spearman_accuracy_log10_prob": rho,
        }
    return out

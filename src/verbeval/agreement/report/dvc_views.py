"""DVC views of finished results: the same numbers, shaped for ``dvc metrics show`` and ``dvc plots show``.

``dvc metrics show`` prints one row per metrics file with one column per (flattened) key, so
Table 2 is split into one file per model and group holding ``{tse, ew, mw}``
(:func:`split_metrics`): a table of three columns with the model and group in the path (and a
``random_init`` column marking the randomly initialised models).

``dvc plots show`` cannot facet or split a file's rows into series; it draws one series per y
column. :func:`wide_curves` turns the long data of a cutoff figure (``figures/fig*.csv``) into
one CSV per side and group, one row per cutoff and one column per model and metric
(:func:`series_column`), which :mod:`verbeval.workflow.dvc_yaml` declares as plots. Nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.scores.registry import CUTOFF_METRICS, LABELS, NAMES, headline_rows, label_list, label_of
from verbeval.core.errors import VerbevalError

#: DVC plot template of the cutoff curves (.dvc/plots/verbeval_lines.json): straight lines through
#: the points, no smoothing, one colour per y column (model and metric), one dash per revision.
#: DVC's own line templates colour by revision and tell series apart by 7 dash patterns only
#: (``linear`` and ``smooth`` also apply a loess transform).
TEMPLATE = "verbeval_lines"

#: legend label of each cutoff-figure metric in the DVC plot data
METRIC_LABELS = {**{m: LABELS[m] for m in CUTOFF_METRICS}, "prob_counted": "mass counted", "invalid": "invalid"}

#: y-axis label of the DVC plots of a cutoff figure, by its metrics
Y_LABELS = {
    CUTOFF_METRICS: " / ".join(LABELS[m] for m in CUTOFF_METRICS),
    ("prob_counted",): "probability mass counted",
    ("invalid",): "share of invalid contexts",
}


def series_column(model: str, metric: str) -> str:
    """The column (and legend entry) of one model and metric in the DVC plot data."""
    return f"{model} {METRIC_LABELS.get(metric, metric)}"


def x_column(side: str) -> str:
    """The x column of a side's DVC plots: the cutoff, on a log10 scale for bottom-p."""
    return "log10_cutoff" if side == "bottom" else "cutoff"


def split_metrics(
    metrics: Mapping[str, Any], models: Sequence[str], groups: Sequence[str], source: str = "metrics"
) -> dict[tuple[str, str], dict[str, float | bool | None]]:
    """``{model: {group: {tse, ew, mw}}}`` (Table 2's metrics.json) -> ``{(model, group): {tse, ew, mw}}``
    for every model and group asked for; a randomly initialised model's entries (``random_init:
    true`` in metrics.json's group records, or beside the groups in a file of an older verbeval) also
    hold ``random_init: true``, a column of ``dvc metrics show``, and a group with contexts whose
    logits were not finite holds their count (``nonfinite_contexts``). Raises
    :class:`VerbevalError` naming ``source`` and the first missing model, group or metric."""
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    for m in models:
        if not isinstance(metrics.get(m), Mapping):
            raise VerbevalError(f"{source}: no model {m!r} (has {sorted(metrics)})")
        for g in groups:
            entry = metrics[m].get(g)
            if not isinstance(entry, Mapping):
                raise VerbevalError(f"{source}: model {m!r} has no group {g!r}")
            missing = [k for k in NAMES if k not in entry]
            if missing:
                raise VerbevalError(f"{source}: model {m!r}, group {g!r} has no {missing[0]!r}")
            out[(m, g)] = {k: entry[k] for k in NAMES}
            # in the group's record (beside the groups in a metrics.json of an older verbeval)
            if entry.get("random_init") is True or metrics[m].get("random_init") is True:
                out[(m, g)]["random_init"] = True  # so `dvc metrics show` says so beside its numbers
            if entry.get("nonfinite_contexts"):  # contexts without a score (inference.allow_nonfinite)
                out[(m, g)]["nonfinite_contexts"] = entry["nonfinite_contexts"]
    return out


def wide_curves(
    curves: pd.DataFrame,
    *,
    side: str,
    models: Sequence[str],
    groups: Sequence[str],
    metrics: Sequence[str],
    source: str = "curves",
) -> dict[str, pd.DataFrame]:
    """Per group: the ``side`` rows of a cutoff figure's data (``verbeval.agreement.report.figures.CURVE_COLUMNS``)
    as ``cutoff, log10_cutoff`` and one value column per model and metric (:func:`series_column`,
    models outer, metrics inner), one row per cutoff in increasing order. A missing value (an
    undefined score) stays empty.

    Raises :class:`VerbevalError` naming ``source`` when a group, model or metric has no rows,
    when a series lacks a cutoff another series has, or on duplicate rows.
    """
    need = {"model", "group", "metric", "side", "cutoff", "value"}
    if not need <= set(curves.columns):
        raise VerbevalError(f"{source}: missing column(s) {sorted(need - set(curves.columns))}")
    part = curves[
        (curves["side"] == side)
        & curves["model"].isin(models)
        & curves["group"].isin(groups)
        & curves["metric"].isin(metrics)
    ]
    keys = ["group", "model", "metric", "cutoff"]
    dup = part.duplicated(keys)
    if dup.any():
        r = part[dup].iloc[0]
        raise VerbevalError(
            f"{source}: duplicate rows for model {r['model']!r}, group {r['group']!r}, "
            f"{r['metric']} ({side}) at cutoff {float(r['cutoff']):g}"
        )
    wide = part.assign(cutoff=part["cutoff"].astype(float)).pivot(
        index=["group", "cutoff"], columns=["model", "metric"], values="value"
    )
    out: dict[str, pd.DataFrame] = {}
    for g in groups:
        if g not in wide.index.get_level_values("group"):
            raise VerbevalError(f"{source}: no {side}-p rows for group {g!r}")
        rows = wide.loc[g]
        # a series with no row at some cutoff of the group (a value that is there but undefined is NaN in
        # `part`, so the two are told apart by counting the rows)
        counts = part[part["group"] == g].groupby(["model", "metric"]).size()
        cutoffs = rows.index.to_numpy(float)
        columns: dict[str, np.ndarray] = {"cutoff": cutoffs, "log10_cutoff": np.log10(cutoffs)}
        for m in models:
            for metric in metrics:
                n = int(counts.get((m, metric), 0))
                if n != len(rows):
                    raise VerbevalError(
                        f"{source}: model {m!r}, group {g!r}: {n} {metric} ({side}) rows, "
                        f"expected one per cutoff ({len(rows)})"
                    )
                columns[series_column(m, metric)] = rows[(m, metric)].to_numpy(float)
        # built at once: a column at a time costs the square of a sweep's revisions
        table = pd.DataFrame(columns)
        out[g] = table.sort_values("cutoff", kind="stable").reset_index(drop=True)
    return out


def plot_definitions(
    path_of: Mapping[str, str], *, stem: str, title: str, side: str, metrics: Sequence[str], models: Sequence[str]
) -> list[dict[str, Any]]:
    """DVC top-level ``plots`` entries for one cutoff figure and side: one plot per group
    (``path_of``: group -> CSV path relative to the dvc.yaml), one series per model and metric,
    straight lines through the points (:data:`TEMPLATE`: no smoothing)."""
    number = stem[3] if stem.startswith("fig") and stem[3:4].isdigit() else ""
    x_label = "log10 bottom-p cutoff" if side == "bottom" else "top-p cutoff"
    which = "" if f"{side}-p" in title else f" ({side}-p)"
    columns = [series_column(m, metric) for m in models for metric in metrics]
    return [
        {
            f"{stem}/{side}/{g}": {
                "template": TEMPLATE,
                "x": x_column(side),
                "y": {path: list(columns)},
                "title": f"{'Figure ' + number + ': ' if number else ''}{title}{which}, {g}",
                "x_label": x_label,
                "y_label": Y_LABELS.get(tuple(metrics), ", ".join(metrics)),
            }
        }
        for g, path in path_of.items()
    ]


# ---------------------------------------------------------------- the acquisition curves


#: the metrics of the acquisition curves' DVC plots: Table 2's (TSE over rows, EW and MW at top p = 1)
ACQUISITION_METRICS = NAMES


def acquisition_series(family: str, seed: str, metric: str) -> str:
    """The column (and legend entry) of one family, seed and metric in the acquisition curves' DVC plot data."""
    who = f"{family} seed {seed}" if seed else family
    return f"{who} {label_of(metric)}"


def wide_acquisition_curves(
    curves: pd.DataFrame, *, series: Sequence[tuple[str, str]], groups: Sequence[str], source: str = "curves"
) -> dict[str, pd.DataFrame]:
    """Per group: the acquisition learning curves (``acquisition/curves.csv``: one row per family, seed,
    step, group, metric, side and cutoff) of TSE, and EW and MW at top p = 1, as ``step`` and one column
    per (family, seed) of ``series`` and metric (:func:`acquisition_series`), one row per step in
    increasing order; a step one series lacks stays empty. Raises :class:`VerbevalError` naming
    ``source`` when a column is missing or a series has no rows in a group."""
    need = {"family", "seed", "step", "group", "metric", "side", "cutoff", "value"}
    if not need <= set(curves.columns):
        raise VerbevalError(f"{source}: missing column(s) {sorted(need - set(curves.columns))}")
    c = curves.assign(
        seed=curves["seed"].fillna("").astype(str),
        family=curves["family"].astype(str),
        side=curves["side"].fillna("").astype(str),
    )
    c = c[headline_rows(c) & c["metric"].isin(ACQUISITION_METRICS)]
    out: dict[str, pd.DataFrame] = {}
    for g in groups:
        part = c[c["group"] == g]
        cols: dict[str, pd.Series] = {}
        for family, seed in series:
            rows = part[(part["family"] == family) & (part["seed"] == seed)]
            if rows.empty:
                who = f"family {family!r}" + (f", seed {seed!r}" if seed else "")
                raise VerbevalError(f"{source}: {who} has no rows in group {g!r}")
            for metric in ACQUISITION_METRICS:
                m = rows[rows["metric"] == metric]
                cols[acquisition_series(family, seed, metric)] = m.groupby("step")["value"].first()
        table = pd.DataFrame(cols).sort_index()
        table.index.name = "step"
        out[g] = table.reset_index()
    return out


def acquisition_plot_definitions(
    path_of: Mapping[str, str], columns: Sequence[str], x_label: str = "training step"
) -> list[dict[str, Any]]:
    """DVC top-level ``plots`` entries of the acquisition curves: one plot per group (``path_of``: group
    -> CSV path relative to the dvc.yaml), one series per family, seed and metric; ``x_label``: what
    the ``step`` column holds (``tokens seen``, ``words seen``: ``agreement.checkpoint_axis``)."""
    return [
        {
            f"acquisition/{g}": {
                "template": TEMPLATE,
                "x": "step",
                "y": {path: list(columns)},
                "title": f"Acquisition: {label_list(ACQUISITION_METRICS)} (top p = 1) against {x_label}, {g}",
                "x_label": x_label,
                "y_label": " / ".join(label_of(m) for m in ACQUISITION_METRICS),
            }
        }
        for g, path in path_of.items()
    ]

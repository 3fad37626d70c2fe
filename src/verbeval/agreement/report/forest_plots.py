"""The forest figure of the paired comparisons (``comparisons.<fmt>``): one panel per headline metric,
a row per group, for each pair (but a sweep's consecutive revisions: ``first_gains.csv`` names those)
its difference b - a with its simultaneous CI (EW, MW, and TSE under ``agreement.bootstrap.cluster``
``template`` or ``template_and_lemma``; else TSE has McNemar's p instead). A filled marker is a
significant difference, a hollow one is not; the dashed line is no difference."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from verbeval.agreement.scores.registry import HEADLINE
from verbeval.core.plots import CHANCE_STYLE, apply_style, palette, panel_grid, save_figure

#: the most pairs one figure shows (the first, in comparisons.csv order); the caption says so
MAX_PAIRS = 12


def forest_figure(rows: pd.DataFrame, paths: Sequence[str | Path], random: Sequence[str] = ()) -> list[str]:
    """Draw the forest figure of ``rows`` (``comparisons.csv``) to ``paths``; returns the pairs shown
    (``"b vs a"``). A pair with a randomly initialised model is labelled so."""
    apply_style()
    shown = rows[rows["kind"] != "consecutive"]
    pairs = list(dict.fromkeys(zip(shown["model_a"], shown["model_b"])))[:MAX_PAIRS]
    labels = [f"{b} vs {a}" + (" (random init)" if {a, b} & set(random) else "") for a, b in pairs]
    colours = palette(labels, kind="model")
    groups = list(dict.fromkeys(rows["group"]))
    fig, axes = panel_grid(len(HEADLINE))
    for ax, metric in zip(axes.flat, HEADLINE):
        d = shown[shown["metric"] == metric.name]
        for k, ((a, b), label) in enumerate(zip(pairs, labels)):
            p = d[(d["model_a"] == a) & (d["model_b"] == b)].set_index("group").reindex(groups)
            y = np.arange(len(groups)) + (k - (len(pairs) - 1) / 2) * 0.8 / max(len(pairs), 1)
            x = p["difference"].to_numpy(float)
            err = np.vstack([x - p["ci_low"].to_numpy(float), p["ci_high"].to_numpy(float) - x])
            ax.errorbar(x, y, xerr=np.where(np.isfinite(err), err, 0), fmt="none", ecolor=colours[label], lw=1)
            sig = p["significant"].fillna(False).to_numpy(bool)
            ax.scatter(x[sig], y[sig], color=colours[label], s=18, zorder=3, label=label)
            ax.scatter(x[~sig], y[~sig], facecolors="white", edgecolors=colours[label], s=18, zorder=3)
        ax.axvline(0, **CHANCE_STYLE)
        ax.set_title(metric.headline_label)
        ax.set_yticks(range(len(groups)), groups)
        ax.set_xlabel("difference (b − a)")
    axes.flat[0].invert_yaxis()  # the first group on top (the y axis is shared)
    for ax in list(axes.flat)[len(HEADLINE) :]:
        ax.set_visible(False)
    if pairs:
        fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside lower center", ncols=min(3, len(pairs)))
    else:  # a run of one sweep: its consecutive revisions only
        fig.text(
            0.5,
            0.0,
            "No pair of models to show: a checkpoint sweep's consecutive revisions are compared in comparisons.csv "
            "and first_gains.csv (and drawn in the checkpoint figure).",
            ha="center",
            va="top",
            fontsize="small",
        )
    save_figure(fig, paths)
    return labels

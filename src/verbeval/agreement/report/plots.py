"""Drawing the agreement figures from the DataFrames of :mod:`verbeval.agreement.report.figures`.

Style, palettes and saving are in :mod:`verbeval.core.plots`; shared legends sit outside the panels.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

# isort: off
from verbeval.core.plots import CHANCE_STYLE, apply_style, palette, panel_grid  # first: it selects the Agg backend
# isort: on

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from verbeval.agreement.report.figures import METRIC_LABELS, SIDE_LABELS, CutoffFigure, shown_cutoffs
from verbeval.agreement.scores.registry import BY_NAME, HEADLINE, NAMES, label_list
from verbeval.core.provenance import display_name, random_note

#: random models a figure's note names one by one; beyond, the first and last few and their number
NAMED_IN_NOTE = 8


def _random_notes(models: Sequence[str], random: Collection[str]) -> list[str]:
    """The note naming the randomly initialised models among ``models`` (none: no note); of more than
    :data:`NAMED_IN_NOTE` (a sweep's revisions) the first three, the last and how many (a note naming
    a thousand revisions would be a figure a thousand names wide)."""
    names = [m for m in models if m in random]
    if len(names) > NAMED_IN_NOTE:
        names = [*names[:3], f"… ({len(names) - 4} more) …", names[-1]]
    note = random_note(names, mark="")
    return [note] if note else []


def _notes_below(fig: Figure, notes: Sequence[str]) -> None:
    if notes:
        fig.text(0.5, 0.0, "\n".join(notes), ha="center", va="top", fontsize="small")


def _legend(
    fig: Figure,
    colours: Mapping[str, Any],
    labels: Mapping[str, str],
    title: str,
    marker: str = "o",
    extra: Sequence[tuple[Any, str]] = (),
) -> None:
    handles = [plt.Line2D([], [], color=c, marker=marker, markersize=4, linewidth=1.5) for c in colours.values()]
    texts = [labels.get(k, k) for k in colours]
    handles += [h for h, _ in extra]
    texts += [t for _, t in extra]
    fig.legend(
        handles,
        texts,
        title=title,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        fontsize="small",
        title_fontsize="small",
    )


def _cutoff_label(c: float) -> str:
    return f"{c:g}"


def _set_cutoff_axis(ax: Any, side: str, shown: np.ndarray) -> None:
    """x limits (and top-p ticks) over the shown cutoffs; bottom-p on a log axis."""
    if not len(shown):
        return
    if side == "bottom":
        ax.set_xscale("log")
        ax.set_xlim(shown.min() / 2, shown.max() * 2)
    else:
        lo, hi = shown.min() - 0.05, shown.max() + 0.03
        ax.set_xlim(lo, hi)
        ticks = [t for t in (0.2, 0.4, 0.6, 0.8, 1.0) if lo <= t <= hi]
        if len(ticks) >= 2:  # no 0.0 label next to the neighbour's 1.0
            ax.set_xticks(ticks)


def _draw_curve(ax: Any, d: pd.DataFrame, colour: Any, hide_low_n: bool) -> None:
    """One group's line: estimates from enough contexts solid with their CI band; the others
    (``low_n``) hollow on a faint dotted line, or not at all when ``hide_low_n``."""
    x = d["cutoff"].to_numpy(float)
    v = d["value"].to_numpy(float)
    low = d["low_n"].to_numpy(bool)
    ok = np.where(low, np.nan, v)
    faded = low & np.isfinite(v)
    if not hide_low_n and faded.any():
        ax.plot(x, v, linestyle=":", linewidth=1.0, color=colour, alpha=0.5, zorder=1)
        ax.scatter(
            x[faded], v[faded], s=14, facecolors="none", edgecolors=[colour], linewidths=0.9, alpha=0.7, zorder=2
        )
    ax.plot(x, ok, marker="o", markersize=3, linewidth=1.3, color=colour, zorder=3)
    lo = np.where(low, np.nan, d["ci_low"].to_numpy(float))
    hi = np.where(low, np.nan, d["ci_high"].to_numpy(float))
    if np.isfinite(lo).any():
        ax.fill_between(x, lo, hi, color=colour, alpha=0.15, linewidth=0)


def plot_cutoff_curves(
    data: pd.DataFrame,
    spec: CutoffFigure,
    models: Sequence[str],
    confidence: float | None = None,
    *,
    min_contexts: int | None = None,
    hide_low_n: bool = False,
    random: Collection[str] = (),
    notes: Sequence[str] = (),
) -> Figure:
    """One panel per model (columns) and (metric, side) (rows): a line per group with its CI band.
    Bottom-p panels have a log x axis.

    Estimates flagged ``low_n`` (fewer than ``min_contexts`` contexts) are drawn hollow on a faint
    dotted line without CI band, or left out when ``hide_low_n``. The x axis of each side spans
    :func:`verbeval.agreement.report.figures.shown_cutoffs` (the same in every panel); configured cutoffs outside it
    are named under the figure. With ``spec.valid_share_row`` a last, lower panel row per side
    shows the share of each group's contexts where the metric is defined (``valid_share``). The
    panels of ``random`` models (randomly initialised) say so in their title and in a note; ``notes``
    are further lines under the figure."""
    apply_style()
    rows: list[tuple[str, str]] = [(m, s) for m in spec.metrics for s in spec.sides]
    if spec.valid_share_row:
        rows += [("valid_share", s) for s in spec.sides]
    groups = list(dict.fromkeys(data["group"]))
    names = dict(zip(data["group"], data["group_name"]))
    colours = palette(groups, "group")
    shown = {s: shown_cutoffs(data, s, hide_low_n=hide_low_n) for s in spec.sides}
    heights = [0.45 if m == "valid_share" else 1.0 for m, _ in rows]
    fig, axes = plt.subplots(
        len(rows),
        len(models),
        figsize=(3.4 * len(models) + 0.4, 2.7 * sum(heights)),
        squeeze=False,
        sharey="row",
        sharex="col" if len(spec.sides) == 1 else False,
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    share_metric = spec.metrics[0]
    for i, (metric, side) in enumerate(rows):
        for j, model in enumerate(models):
            ax = axes[i][j]
            source = share_metric if metric == "valid_share" else metric
            panel = data[(data["model"] == model) & (data["metric"] == source) & (data["side"] == side)]
            for g in groups:
                d = panel[panel["group"] == g].sort_values("cutoff")
                if d.empty:
                    continue
                if metric == "valid_share":
                    ax.plot(
                        d["cutoff"].to_numpy(float),
                        d["valid_share"].to_numpy(float),
                        linewidth=1.0,
                        marker="o",
                        markersize=2,
                        color=colours[g],
                    )
                else:
                    _draw_curve(ax, d, colours[g], hide_low_n)
            _set_cutoff_axis(ax, side, shown[side])
            if side == "bottom" and spec.log_y_bottom and metric != "valid_share":
                ax.set_yscale("log", nonpositive="mask")
            chance = BY_NAME[metric].chance if metric in BY_NAME else None
            if chance is not None:
                ax.axhline(chance, **CHANCE_STYLE)
            if metric in ("invalid", "valid_share"):
                ax.set_ylim(-0.03, 1.03)
            if i == 0:
                ax.set_title(display_name(model, model in random))
            last_of_side = all(s != side for _, s in rows[i + 1 :])
            if last_of_side or not spec.valid_share_row:
                ax.set_xlabel(SIDE_LABELS[side] + (" (log scale)" if side == "bottom" else ""))
            if j == 0:
                if metric == "valid_share":
                    ax.set_ylabel(f"valid share\n({METRIC_LABELS[share_metric]} defined)", fontsize="small")
                else:
                    ax.set_ylabel(
                        (BY_NAME[metric].y_label if metric in BY_NAME else METRIC_LABELS[metric])
                        + (" (log scale)" if side == "bottom" and spec.log_y_bottom else "")
                    )
    if spec.has_ci:
        band = f"bands: {confidence:.0%} bootstrap CI" if confidence else "bands: bootstrap CI"
        fig.suptitle(f"{spec.title} ({band})", fontsize="medium")
    else:
        fig.suptitle(spec.title, fontsize="medium")
    extra: list[tuple[Any, str]] = []
    below: list[str] = _random_notes(models, random)
    low = data["low_n"].to_numpy(bool) & np.isfinite(data["value"].to_numpy(float))
    if min_contexts is not None and low.any():
        if hide_low_n:
            below.append(f"Estimates from fewer than {min_contexts} contexts are not drawn.")
        else:
            extra.append(
                (
                    plt.Line2D(
                        [],
                        [],
                        color="0.4",
                        linestyle=":",
                        marker="o",
                        markerfacecolor="none",
                        markersize=4,
                        linewidth=1.0,
                    ),
                    f"< {min_contexts} contexts\n(no CI band)",
                )
            )
    for s in spec.sides:
        every = np.unique(data.loc[data["side"] == s, "cutoff"].to_numpy(float))
        left_out = every[~np.isin(every, shown[s])]
        if len(left_out):
            what = (
                "no lemma counts in any context of any model or group"
                if not hide_low_n
                else f"no model or group has an estimate from {min_contexts or 1}+ contexts"
            )
            below.append(f"Not shown: {SIDE_LABELS[s]} {', '.join(map(_cutoff_label, left_out))} ({what}).")
    _legend(fig, colours, names, "template group", extra=extra)
    _notes_below(fig, [*below, *notes])
    return fig


def plot_model_comparison(data: pd.DataFrame, models: Sequence[str], random: Collection[str] = ()) -> Figure:
    """TSE, EW and MW per group (rows) with one bar per model and its CI; a panel per metric.
    ``random`` models (randomly initialised) are named so in the legend and a note."""
    apply_style()
    metrics = list(HEADLINE)
    groups = list(dict.fromkeys(data["group"]))
    names = dict(zip(data["group"], data["group_name"]))
    colours = palette(list(models), "model")
    n_m = max(len(models), 1)
    height = 0.8 / n_m
    fig, axes = plt.subplots(
        1,
        len(metrics),
        figsize=(3.3 * len(metrics) + 2.2, 0.2 * len(groups) * max(n_m, 2) + 1.4),
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    y0 = np.arange(len(groups))
    for j, metric in enumerate(metrics):
        ax = axes[0][j]
        for k, m in enumerate(models):
            d = data[(data["metric"] == metric.name) & (data["model"] == m)].set_index("group").reindex(groups)
            v = d["value"].to_numpy(float)
            lo = np.nan_to_num(v - d["ci_low"].to_numpy(float), nan=0.0)
            hi = np.nan_to_num(d["ci_high"].to_numpy(float) - v, nan=0.0)
            y = y0 - 0.4 + height * (k + 0.5)
            ax.barh(
                y,
                np.nan_to_num(v),
                height=height * 0.95,
                color=colours[m],
                xerr=np.vstack([lo, hi]),
                error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "0.2"},
                label=m,
            )
        if metric.chance is not None:
            ax.axvline(metric.chance, **CHANCE_STYLE)
        ax.set_xlim(0, 1)
        ax.set_title(metric.headline_label)
        ax.set_xlabel("accuracy")
        ax.set_yticks(y0, [names[g] for g in groups])
        if j == 0:  # shared y axis: the first group on top
            ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
    fig.suptitle(f"{label_list()} per template group (error bars: bootstrap CI; dashed: chance)", fontsize="medium")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[m]) for m in models]
    fig.legend(
        handles,
        [display_name(m, m in random) for m in models],
        title="model",
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        fontsize="small",
        title_fontsize="small",
    )
    _notes_below(fig, _random_notes(models, random))
    return fig


def plot_lemma_accuracy(
    data: pd.DataFrame,
    models: Sequence[str],
    metrics: Mapping[str, Any] | None = None,
    random: Collection[str] = (),
    notes: Sequence[str] = (),
) -> Figure:
    """Per model: each eligible lemma's agreement accuracy against its mean log10 probability,
    with the mean accuracy of equal-count probability bins as a trend line. ``random`` models
    (randomly initialised) say so in their panel title and a note; ``notes`` are further lines
    under the figure."""
    apply_style()
    colours = palette(list(models), "model")
    fig, axes = plt.subplots(
        1, len(models), figsize=(3.6 * len(models), 3.2), squeeze=False, sharey=True, layout="constrained"
    )
    for j, m in enumerate(models):
        ax = axes[0][j]
        d = data[data["model"] == m]
        ax.scatter(d["mean_log10_prob"], d["accuracy"], s=5, alpha=0.35, color=colours[m], linewidths=0, label="lemma")
        bins = d.drop_duplicates("bin").sort_values("bin")
        ax.plot(
            bins["bin_log10_prob"],
            bins["bin_accuracy"],
            color="0.15",
            marker="o",
            markersize=3.5,
            linewidth=1.3,
            label="bin mean",
        )
        ax.axhline(0.5, **CHANCE_STYLE)
        title = display_name(m, m in random)
        rho = (metrics or {}).get(m, {}).get("spearman_accuracy_log10_prob")
        if rho is not None:
            title += f"\nSpearman ρ = {rho:.2f}"
        ax.set_title(title)
        ax.set_xlabel("mean log10 P(lemma) in context")
        if j == 0:
            ax.set_ylabel("agreement accuracy (EW test)")
            ax.legend(loc="lower right", fontsize="small")
    fig.suptitle("Per-lemma agreement accuracy against the lemma's probability", fontsize="medium")
    _notes_below(fig, [*_random_notes(models, random), *notes])
    return fig


#: line styles of the sweeps of the checkpoint figure (colour = metric)
SWEEP_STYLES = ("-", "--", ":", "-.")
SWEEP_MARKERS = ("o", "s", "^", "D")


def plot_checkpoints(
    data: pd.DataFrame,
    log_x: bool = False,
    confidence: float | None = None,
    random: Collection[str] = (),
    x_label: str = "training step",
) -> Figure:
    """TSE, EW and MW (top p = 1) against training step, one panel per group (in data order): a line
    per metric (colour) and sweep (line style), with its CI band. ``log_x``: logarithmic step axis,
    symmetric-log (linear below the smallest positive step) when a step is 0. Checkpoints among
    ``random`` (randomly initialised models) are named in a note, their sweep in the legend.
    ``x_label``: what the ``step`` column holds (``tokens seen``, ``words seen``), named on the axis
    and in the title."""
    apply_style()
    metrics = list(NAMES)
    groups = list(dict.fromkeys(data["group"]))
    names = dict(zip(data["group"], data["group_name"]))
    sweeps = list(dict.fromkeys(data["sweep"]))
    colours = dict(zip(metrics, sns.color_palette("colorblind", len(metrics))))
    fig, axes = panel_grid(len(groups))
    n_rows, n_cols = axes.shape
    steps = data["step"].to_numpy(float)
    scale = ""
    if log_x and len(steps):
        scale = " (symmetric log scale)" if (steps <= 0).any() else " (log scale)"
    for k, ax in enumerate(axes.flat):
        if k >= len(groups):
            ax.set_visible(False)
            continue
        g = groups[k]
        for si, sweep in enumerate(sweeps):
            for metric in metrics:
                d = data[(data["group"] == g) & (data["sweep"] == sweep) & (data["metric"] == metric)].sort_values(
                    "step"
                )
                if d.empty:
                    continue
                x = d["step"].to_numpy(float)
                ax.plot(
                    x,
                    d["value"].to_numpy(float),
                    color=colours[metric],
                    linestyle=SWEEP_STYLES[si % 4],
                    marker=SWEEP_MARKERS[si % 4],
                    markersize=3,
                    linewidth=1.3,
                )
                lo, hi = d["ci_low"].to_numpy(float), d["ci_high"].to_numpy(float)
                if np.isfinite(lo).any():
                    ax.fill_between(x, lo, hi, color=colours[metric], alpha=0.15, linewidth=0)
        ax.axhline(0.5, **CHANCE_STYLE)
        ax.set_ylim(-0.03, 1.03)
        if log_x and len(steps):
            positive = steps[steps > 0]
            if (steps <= 0).any():
                ax.set_xscale("symlog", linthresh=float(positive.min()) if len(positive) else 1.0)
            else:
                ax.set_xscale("log")
        ax.set_title(names[g])
        if k // n_cols == n_rows - 1 or k + n_cols >= len(groups):
            ax.set_xlabel(x_label + scale)
        if k % n_cols == 0:
            ax.set_ylabel("accuracy")
    band = f"{confidence:.0%} bootstrap CI" if confidence else "bootstrap CI"
    fig.suptitle(f"{label_list()} (top p = 1) against {x_label} (bands: {band}; dashed: chance)", fontsize="medium")
    handles = [plt.Line2D([], [], color=colours[m], linewidth=1.5) for m in metrics]
    labels = [METRIC_LABELS[m] for m in metrics]
    random_sweeps = set(data.loc[data["model"].isin(list(random)), "sweep"])
    if len(sweeps) > 1:
        handles += [
            plt.Line2D([], [], color="0.3", linestyle=SWEEP_STYLES[i % 4], marker=SWEEP_MARKERS[i % 4], markersize=4)
            for i in range(len(sweeps))
        ]
        labels += [display_name(sw, sw in random_sweeps) for sw in sweeps]
    fig.legend(
        handles,
        labels,
        title="metric" + (" / model" if len(sweeps) > 1 else ""),
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        fontsize="small",
        title_fontsize="small",
    )
    _notes_below(fig, _random_notes(list(dict.fromkeys(data["model"])), random))
    return fig

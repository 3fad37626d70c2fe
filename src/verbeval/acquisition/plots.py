"""The acquisition figures: learning curves per group with seed bands, AoA against frequency with
labelled outliers, and a lemma x step heat map of correct-form preference.

A family whose checkpoints are randomly initialised says "random init" in its label, one trained as
a toy model "toy model" (:func:`family_label`); the figure titles repeat it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

# isort: off
from verbeval.core.plots import CHANCE_STYLE, apply_style, palette, panel_grid  # first: it selects the Agg backend
# isort: on

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FixedFormatter, FixedLocator, LogLocator, NullFormatter, NullLocator, ScalarFormatter

from verbeval.agreement.scores.registry import LABELS
from verbeval.core.provenance import display_name

#: label of each learning-curve metric (:mod:`verbeval.agreement.scores.registry`), in legend order
METRIC_LABELS = dict(LABELS)
STYLES = ("-", "--", ":", "-.")
#: most tick labels drawn on an axis (every k-th label beyond)
MAX_TICK_LABELS = 40


def family_label(family: str, random: bool, toy: bool) -> str:
    """A family's name as figures show it: ``(random init)`` and/or ``(toy model)`` appended."""
    name = display_name(family, random)
    return f"{name} (toy model)" if toy else name


def thin_ticks(n: int, most: int = MAX_TICK_LABELS) -> np.ndarray:
    """Positions of the tick labels kept among ``n``: every k-th, k the smallest with at most ``most``."""
    k = max(1, -(-n // most))
    return np.arange(0, n, k)


def _title_note(random: Collection[str], toy: Collection[str]) -> str:
    notes = []
    if random:
        notes.append("random init: meaningless numbers")
    if toy:
        notes.append("toy model")
    return f" [{'; '.join(notes)}]" if notes else ""


#: most step labels on a learning curve's x axis (the checkpoints' own steps, every k-th beyond)
MAX_STEP_LABELS = 6


def compact_count(value: float) -> str:
    """A count of tokens or words seen as a tick label: 1000000 -> ``1M``, 2500000000 -> ``2.5B``,
    below 1000 the plain number."""
    for scale, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{int(value):d}" if float(value).is_integer() else f"{value:g}"


def _step_axis(ax: plt.Axes, steps: np.ndarray, compact: bool = False) -> str:
    """A log (or symmetric-log) step axis labelled at the checkpoints' own steps, as plain integers
    (``compact``: as :func:`compact_count`, for tokens or words seen), at most MAX_STEP_LABELS of
    them and no minor labels (matplotlib's default labels the minor ticks of a log axis spanning
    less than a decade or two, and they run together)."""
    positive = steps[steps > 0]
    if (steps <= 0).any():
        ax.set_xscale("symlog", linthresh=float(positive.min()) if len(positive) else 1.0)
        scale = " (symmetric log scale)"
    else:
        ax.set_xscale("log")
        scale = " (log scale)"
    ticks = np.unique(steps)
    ticks = ticks[thin_ticks(len(ticks), MAX_STEP_LABELS)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    plain = [f"{int(t):d}" if float(t).is_integer() else f"{t:g}" for t in ticks]
    ax.xaxis.set_major_formatter(FixedFormatter([compact_count(t) for t in ticks] if compact else plain))
    ax.xaxis.set_minor_locator(NullLocator())
    return scale


def plot_curves(
    curves: pd.DataFrame,
    random: Collection[str] = (),
    toy: Collection[str] = (),
    confidence: float = 0.95,
    x_label: str = "training step",
) -> Figure:
    """TSE, EW and MW (top p = 1) against step, one panel per group: a line per metric (colour) and
    family (line style); band: the min-max range over seeds (several seeds, line = their mean) or
    the bootstrap CI (one seed)."""
    apply_style()
    groups = sorted(dict.fromkeys(curves["group"]))
    families = sorted(dict.fromkeys(curves["family"]))
    colours = dict(zip(METRIC_LABELS, sns.color_palette("colorblind", len(METRIC_LABELS))))
    fig, axes = panel_grid(len(groups))
    n_rows, n_cols = axes.shape
    steps = curves["step"].to_numpy(float)
    scale = ""
    for i, ax in enumerate(axes.flat):
        if i >= len(groups):
            ax.set_visible(False)
            continue
        g = curves[curves["group"] == groups[i]]
        for fi, fam in enumerate(families):
            for metric, colour in colours.items():
                d = g[(g["family"] == fam) & (g["metric"] == metric)]
                if d.empty:
                    continue
                by = d.groupby("step", sort=True)
                x = np.array(list(by.groups), dtype=float)
                if d["seed"].nunique() > 1:
                    y, lo, hi = by["value"].mean(), by["value"].min(), by["value"].max()
                else:
                    y, lo, hi = by["value"].first(), by["ci_low"].first(), by["ci_high"].first()
                ax.plot(x, y.to_numpy(float), color=colour, linestyle=STYLES[fi % 4], marker="o", markersize=2.5)
                if np.isfinite(lo.to_numpy(float)).any():
                    ax.fill_between(x, lo.to_numpy(float), hi.to_numpy(float), color=colour, alpha=0.15, linewidth=0)
        ax.axhline(0.5, **CHANCE_STYLE)
        ax.set_ylim(-0.03, 1.03)
        scale = _step_axis(ax, steps, compact=x_label != "training step")
        ax.set_title(groups[i])
        if i % n_cols == 0:
            ax.set_ylabel("accuracy")
        if i + n_cols >= len(groups):
            ax.set_xlabel(x_label + scale)
    handles = [plt.Line2D([], [], color=c, linewidth=1.5) for c in colours.values()]
    labels = list(METRIC_LABELS.values())
    for fi, fam in enumerate(families):
        handles.append(plt.Line2D([], [], color="0.3", linestyle=STYLES[fi % 4]))
        labels.append(family_label(fam, fam in random, fam in toy))
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    fig.suptitle(
        f"Learning curves (top p = 1; bands: seed range, or {confidence:.0%} bootstrap CI for one seed)"
        + _title_note(random, toy),
        fontsize="medium",
    )
    return fig


def plot_aoa_frequency(
    lemma_aoa: pd.DataFrame,
    random: Collection[str] = (),
    toy: Collection[str] = (),
    max_labels: int = 12,
    unit: str = "step",
) -> Figure:
    """log AoA against Zipf frequency, one panel per family (a colour per seed), the regression line
    of each seed and its outliers labelled (the ``max_labels`` largest residuals per panel)."""
    apply_style()
    families = sorted(dict.fromkeys(lemma_aoa["family"]))
    fig, axes = plt.subplots(
        1, max(1, len(families)), figsize=(4.2 * max(1, len(families)) + 0.4, 3.4), squeeze=False, layout="constrained"
    )
    for ax, fam in zip(axes.flat, families):
        d = lemma_aoa[(lemma_aoa["family"] == fam)]
        seeds = sorted(dict.fromkeys(d["seed"]))
        colours = palette([str(s) for s in seeds], kind="model")
        for s in seeds:
            e = d[(d["seed"] == s) & np.isfinite(d["aoa_step"]) & np.isfinite(d["zipf"])]
            c = colours[str(s)]
            ax.scatter(e["zipf"], e["aoa_step"], s=10, color=c, alpha=0.7, label=f"seed {s}" if s else None)
            if len(e) >= 3 and np.ptp(e["zipf"].to_numpy(float)) > 0:
                slope, icpt = np.polyfit(e["zipf"].to_numpy(float), e["aoa_log10_step"].to_numpy(float), 1)
                xs = np.linspace(e["zipf"].min(), e["zipf"].max(), 50)
                ax.plot(xs, 10 ** (icpt + slope * xs), color=c, linewidth=1)
            out = e[e["outlier"] != ""].reindex()
            out = out.loc[out["residual"].abs().sort_values(ascending=False, kind="stable").index].head(max_labels)
            for r in out.itertuples(index=False):
                ax.annotate(
                    r.lemma, (r.zipf, r.aoa_step), fontsize="x-small", xytext=(3, 3), textcoords="offset points"
                )
                ax.scatter([r.zipf], [r.aoa_step], s=22, facecolors="none", edgecolors="black", linewidths=0.8)
        ax.set_yscale("log")
        # plain step labels at 1, 2 and 5 times a power of ten (not 2x10^2, 3x10^2 on the minor ticks)
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("frequency (Zipf)")
        ax.set_ylabel(f"age of acquisition ({unit})")
        ax.set_title(family_label(fam, fam in random, fam in toy), fontsize="small")
        if len(seeds) > 1:
            ax.legend(fontsize="x-small")
    fig.suptitle(
        "Age of acquisition against frequency (circled, labelled: outliers)" + _title_note(random, toy),
        fontsize="medium",
    )
    return fig


def plot_lemma_heatmap(
    lemma_curves: pd.DataFrame,
    lemma_aoa: pd.DataFrame,
    random: Collection[str] = (),
    toy: Collection[str] = (),
    x_label: str = "training step",
) -> Figure:
    """Each lemma's share of contexts preferring the correct form (pooled over groups), lemma x step,
    one panel per family (its first seed); lemmas ordered by AoA, those without one last (by their
    final share)."""
    apply_style()
    pooled = lemma_curves[lemma_curves["group"] == ""]
    families = sorted(dict.fromkeys(pooled["family"]))
    n_lemmas = pooled["lemma"].nunique()
    height = min(max(3.0, 0.12 * n_lemmas + 1.5), 16.0)
    fig, axes = plt.subplots(
        1,
        max(1, len(families)),
        figsize=(4.6 * max(1, len(families)) + 0.8, height),
        squeeze=False,
        layout="constrained",
    )
    image = None
    for ax, fam in zip(axes.flat, families):
        d = pooled[pooled["family"] == fam]
        seed = sorted(dict.fromkeys(d["seed"]))[0]
        d = d[d["seed"] == seed]
        grid = d.pivot(index="lemma", columns="step", values="share")
        a = lemma_aoa[(lemma_aoa["family"] == fam) & (lemma_aoa["seed"] == seed)].set_index("lemma")
        order = pd.DataFrame(
            {"aoa": a["aoa_step"].reindex(grid.index), "final": grid.iloc[:, -1]}, index=grid.index
        ).sort_values(["aoa", "final"], ascending=[True, False], na_position="last", kind="stable")
        grid = grid.loc[order.index]
        image = ax.imshow(grid.to_numpy(float), aspect="auto", cmap="RdBu", vmin=0.0, vmax=1.0, interpolation="nearest")
        xt = thin_ticks(grid.shape[1], 12)
        shown = np.asarray(grid.columns)[xt]
        ticks = [compact_count(s) for s in shown] if x_label != "training step" else [str(s) for s in shown]
        ax.set_xticks(xt, ticks, rotation=60, fontsize="x-small")
        yt = thin_ticks(grid.shape[0])
        ax.set_yticks(yt, [str(x) for x in np.asarray(grid.index)[yt]], fontsize="xx-small")
        ax.grid(False)
        ax.set_xlabel(x_label)
        ax.set_ylabel("lemma (by AoA)")
        label = family_label(fam, fam in random, fam in toy)
        ax.set_title(label + (f", seed {seed}" if seed else ""), fontsize="small")
    if image is not None:
        fig.colorbar(image, ax=list(axes.flat), shrink=0.6, label="share of contexts: correct form preferred")
    fig.suptitle("Correct-form preference per lemma and step" + _title_note(random, toy), fontsize="medium")
    return fig


def figure_paths(folder: str, name: str, formats: Sequence[str]) -> list[str]:
    """``<folder>/<name>.<fmt>`` for each format."""
    return [f"{folder}/{name}.{fmt}" for fmt in formats]

"""The veridicality outputs: the signature table as Markdown and LaTeX, and the human-vs-model
scatter (Figure 1 of Ross & Pavlick 2019) with the CSV behind it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.tables import format_rows, latex_row, latex_tabular, markdown_table, number, tex_escape
from verbeval.veridicality.data import ENVIRONMENTS
from verbeval.veridicality.statistics import TABLE_COLUMNS

#: the headings of :data:`TABLE_COLUMNS` in the Markdown file, and the number formats
_HEADER = ["Signature", "Environment", "n", "Accuracy", "Pearson", "Spearman"]
_FORMATS = dict.fromkeys(("accuracy", "pearson", "spearman"), number(3))


def _tex_signature(signature: str) -> str:
    """``+/o`` as ``$+/\\circ$`` (``overall`` as it is)."""
    return signature if signature == "overall" else "$" + signature.replace("o", r"\circ") + "$"


def to_markdown(table: pd.DataFrame, model: str) -> str:
    """The signature table (:func:`signature_table`) as a Markdown pipe table under a title line."""
    rows = format_rows(table[TABLE_COLUMNS], _FORMATS)
    return "\n".join([f"Verb veridicality, {model}", "", *markdown_table(_HEADER, rows, "llrrrr")]) + "\n"


def to_latex(table: pd.DataFrame, model: str) -> str:
    """The signature table as a booktabs tabular (signatures in math mode) under a comment line."""
    head = [latex_row([("$n$" if h == "n" else h) for h in _HEADER])]
    rows = format_rows(table[TABLE_COLUMNS], {**_FORMATS, "signature": _tex_signature})
    out = [rf"% Verb veridicality, {tex_escape(model)}", *latex_tabular("llrrrr", head, map(latex_row, rows))]
    return "\n".join(out) + "\n"


SCATTER_COLUMNS = ["index", "verb", "signature", "environment", "human_mean", "score"]


def scatter_data(predictions: pd.DataFrame) -> pd.DataFrame:
    """The points of Figure 1 (one per item and environment), sorted: the CSV behind the figure."""
    out = predictions[SCATTER_COLUMNS].copy()
    out["environment"] = pd.Categorical(out["environment"], ENVIRONMENTS, ordered=True)
    out = out.sort_values(["signature", "environment", "index"], kind="stable", ignore_index=True)
    out["environment"] = out["environment"].astype(str)
    return out


#: drawing only (never in the CSV): the half-widths of the uniform jitter added to x (mean human
#: rating, in steps of 1/3 for three raters: below half a step, so ratings stay apart) and y (the
#: model score, which saturates at -1 and 1), the seed, and the points' opacity and markers
SCATTER_JITTER = (0.06, 0.04)
SCATTER_SEED = 0
SCATTER_ALPHA = 0.4
SCATTER_MARKERS = {"positive": "o", "negative": "^"}


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser over uint64 (wraps around by design)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def scatter_jitter(
    points: pd.DataFrame, seed: int = SCATTER_SEED, widths: tuple[float, float] = SCATTER_JITTER
) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic (dx, dy) offsets, uniform in ±``widths``, one per row of ``points``.

    Each offset is a hash of (``seed``, item ``index``, environment), so a point moves the same
    way whatever the row order, the other rows or the model (an item sits at the same x in every
    model's figure). Used only to draw the scatter."""
    env = points["environment"].map({e: i for i, e in enumerate(ENVIRONMENTS)}).to_numpy(np.int64)
    key = (
        points["index"].to_numpy(np.int64).astype(np.uint64) * np.uint64(4)
        + env.astype(np.uint64) * np.uint64(2)
        + np.uint64(seed) * np.uint64(0x2545F4914F6CDD1D)
    )
    with np.errstate(over="ignore"):
        u = [(_mix64(key + np.uint64(k)) >> np.uint64(11)).astype(np.float64) / float(1 << 53) for k in (0, 1)]
    return (2 * u[0] - 1) * widths[0], (2 * u[1] - 1) * widths[1]


def draw_order(points: pd.DataFrame) -> list[str]:
    """The environments of ``points`` in drawing order: the larger class first, so that the smaller
    one is drawn on top of it; equal classes in :data:`ENVIRONMENTS` order (negative on top)."""
    counts = points["environment"].value_counts()
    present = [e for e in ENVIRONMENTS if counts.get(e, 0) > 0]
    return sorted(present, key=lambda e: -int(counts[e]))  # stable: ties keep ENVIRONMENTS order


def plot_scatter(predictions: pd.DataFrame, model: str) -> Any:
    """Figure 1 of Ross & Pavlick (2019): mean human rating (x) against model score (y), one panel
    per signature, the positive and negative environments in two colours and markers.

    Points are drawn with :data:`SCATTER_ALPHA` and a small deterministic jitter
    (:func:`scatter_jitter`) against the overplotting at integer ratings and scores of ±1; in each
    panel the smaller environment is drawn on top (:func:`draw_order`)."""
    import matplotlib.pyplot as plt

    from verbeval.core.plots import apply_style, palette

    apply_style()
    sigs = sorted(predictions["signature"].unique())
    colours = palette(list(ENVIRONMENTS), kind="environment")
    ncols = min(4, len(sigs))
    nrows = -(-len(sigs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.0 * nrows), sharex=True, sharey=True, squeeze=False)
    points = scatter_data(predictions)
    dx, dy = scatter_jitter(points)
    x, y = points["human_mean"].to_numpy(float) + dx, points["score"].to_numpy(float) + dy
    for ax, sig in zip(axes.flat, sigs):
        in_sig = (points["signature"] == sig).to_numpy()
        for rank, env in enumerate(draw_order(points[in_sig])):
            sel = in_sig & (points["environment"] == env).to_numpy()
            ax.scatter(
                x[sel],
                y[sel],
                s=10,
                alpha=SCATTER_ALPHA,
                color=colours[env],
                marker=SCATTER_MARKERS[env],
                linewidths=0,
                label=env,
                zorder=2 + rank,
            )
        ax.axhline(0, color="0.8", lw=0.6, zorder=0)
        ax.axvline(0, color="0.8", lw=0.6, zorder=0)
        ax.set_title(f"{sig}  (n={int(in_sig.sum()) // 2})")
        ax.set_xlim(-2.1, 2.1)
        ax.set_ylim(-1.08, 1.08)
    for ax in axes.flat[len(sigs) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("mean human rating")
    for ax in axes[:, 0]:
        ax.set_ylabel("P(E) − P(C)")
    handles = [
        plt.Line2D([], [], linestyle="", marker=SCATTER_MARKERS[e], color=colours[e], markersize=5)
        for e in ENVIRONMENTS
    ]
    fig.legend(handles, list(ENVIRONMENTS), title="environment", loc="upper right")
    fig.suptitle(
        f"Verb veridicality: {model} (points jittered by up to ±{SCATTER_JITTER[0]:g} in x, "
        f"±{SCATTER_JITTER[1]:g} in y)",
        fontsize="medium",
    )
    return fig

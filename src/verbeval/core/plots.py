"""The figure style and saving shared by every study (seaborn/matplotlib, ``Agg`` backend).

One style for every figure (:func:`apply_style`): seaborn's ``whitegrid`` theme in ``paper``
context, one colour per template group (in Table 2 order) and one per model (:func:`palette`).
Figures are saved without timestamps so that reruns give identical files (:func:`save_figure`).
The agreement figures themselves are drawn in :mod:`verbeval.agreement.report.plots`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from verbeval.core.io import atomic_path

#: the scipy modules seaborn imports only for what verbeval never draws (KDEs, clustered heat maps)
SCIPY_FOR_SEABORN = ("scipy.stats", "scipy.cluster")


def import_seaborn() -> ModuleType:
    """seaborn, imported without scipy when ``scipy.stats`` is not loaded yet.

    seaborn imports ``scipy.stats`` (for ``gaussian_kde``) and ``scipy.cluster`` when scipy is
    installed, each in a ``try`` that falls back to seaborn's own KDE; ``scipy.stats`` alone was
    about 0.6-0.9 CPU-s of a figure job's 2-3 s (docs/performance.md). verbeval uses seaborn's theme
    and palettes only, which do not read scipy, so while seaborn loads those two modules are
    marked absent (``sys.modules[name] = None``: an ``ImportError``) and the marks are removed after:
    a later ``import scipy.stats`` in the process loads it as usual. When seaborn or ``scipy.stats``
    is already loaded, a plain import."""
    if "seaborn" not in sys.modules and "scipy.stats" not in sys.modules:
        hidden = [m for m in SCIPY_FOR_SEABORN if m not in sys.modules]
        for m in hidden:
            sys.modules[m] = None  # type: ignore[assignment]
        try:
            import seaborn
        finally:
            for m in hidden:
                if m in sys.modules and sys.modules[m] is None:
                    del sys.modules[m]
        return seaborn
    import seaborn

    return seaborn


sns = import_seaborn()  # before the studies' figure modules import seaborn themselves

FORMATS = ("png", "pdf", "svg")
DPI = 150
CHANCE_STYLE = {"color": "0.4", "linestyle": "--", "linewidth": 0.8, "zorder": 0}


def panel_grid(n_panels: int, columns: int = 3) -> tuple[Figure, Any]:
    """A figure of one panel per item (at most ``columns`` a row; one empty panel for none): its
    ``axes`` an array (``squeeze=False``) sharing x and y, each panel 3.6 x 2.8 inches; panels past
    ``n_panels`` are the caller's to hide."""
    n_cols = min(columns, max(n_panels, 1))
    n_rows = max(1, -(-n_panels // n_cols))
    return plt.subplots(
        n_rows,
        n_cols,
        figsize=(3.6 * n_cols + 0.4, 2.8 * n_rows),
        squeeze=False,
        sharex=True,
        sharey=True,
        layout="constrained",
    )


def apply_style() -> None:
    """The common style of every verbeval figure."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams.update(
        {
            "svg.hashsalt": "verbeval",
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "legend.frameon": False,
            "axes.titleweight": "bold",
        }
    )


def palette(names: Sequence[str], kind: str = "group") -> dict[str, Any]:
    """A fixed colour per name: ``tab10`` for up to 10 groups, ``Set2``-like ``colorblind`` for models."""
    n = len(names)
    base = "tab10" if kind == "group" else "colorblind"
    colours = sns.color_palette(base, n) if n <= 10 else sns.color_palette("husl", n)
    return dict(zip(names, colours))


def save_figure(fig: Figure, paths: Sequence[str | Path]) -> None:
    """Save ``fig`` to each path (format from the suffix: png, pdf or svg), atomically and
    without creation dates."""
    for p in paths:
        fmt = Path(p).suffix.lstrip(".").lower()
        if fmt not in FORMATS:
            raise ValueError(f"{p}: unsupported figure format {fmt!r} (use {', '.join(FORMATS)})")
        metadata: dict[str, Any] = {
            "png": {"Software": None},
            "pdf": {"CreationDate": None, "Producer": None},
            "svg": {"Date": None},
        }[fmt]
        with atomic_path(p) as tmp:
            fig.savefig(tmp, format=fmt, metadata=metadata, bbox_inches="tight")
    plt.close(fig)

"""``dvc-metrics`` and ``dvc-plot-data``: Table 2 and the cutoff figures as DVC metrics and plots."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from verbeval.agreement.steps import DVC_METRICS, DVC_PLOT_DATA
from verbeval.core.cliutil import Add
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import GROUPS, Input, Option, Output, add_options

log = logging.getLogger("verbeval")


def cmd_dvc_metrics(a: argparse.Namespace) -> None:
    import json

    from verbeval.agreement.report.dvc_views import split_metrics
    from verbeval.core.io import write_json

    try:
        metrics = json.loads(Path(a.metrics).read_text())
    except (OSError, ValueError) as exc:
        raise VerbevalError(f"{a.metrics}: cannot read JSON metrics: {exc}") from exc
    if not isinstance(metrics, dict):
        raise VerbevalError(f"{a.metrics}: expected {{model: {{group: {{tse, ew, mw}}}}}}")
    parts = split_metrics(metrics, a.models.split(","), a.groups.split(","), source=a.metrics)
    for (model, group), values in parts.items():
        write_json(Path(a.out_dir) / model / f"{group}.json", values)
    log.info("%d metrics files (model x group) -> %s", len(parts), a.out_dir)


def register_dvc_metrics(add: Add) -> None:
    s = add(
        "dvc-metrics",
        cmd_dvc_metrics,
        "split Table 2's metrics.json into one {tse, ew, mw} file per model and group (DVC metrics)",
        "The numbers are copied, not recomputed; `dvc metrics show` prints one row per model and group "
        "(docs/workflow.md, 'DVC'). Run by the rule dvc_metrics.",
    )
    add_options(
        s,
        DVC_METRICS.file("--metrics"),
        Option("--models", "comma-separated model names (one directory each)", required=True),
        GROUPS.but(help="comma-separated group ids (one file per group)"),
        *DVC_METRICS.settings,
        DVC_METRICS.file("--out-dir"),
    )


def cmd_dvc_plot_data(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.dvc_views import series_column, wide_curves
    from verbeval.agreement.report.figures import CUTOFF_FIGURES
    from verbeval.core.io import write_csv
    from verbeval.core.provenance import random_flags

    spec = CUTOFF_FIGURES[a.figure]
    if a.side not in spec.sides:
        raise VerbevalError(f"figure {a.figure} has no {a.side}-p side (sides: {', '.join(spec.sides)})")
    curves = pd.read_csv(a.curves, keep_default_na=False, na_values=[""])
    models = a.models.split(",")
    tables = wide_curves(
        curves, side=a.side, models=models, groups=a.groups.split(","), metrics=spec.metrics, source=a.curves
    )
    random = random_flags(curves)  # the figure data's random_init column
    for group, table in tables.items():
        # one `<model> random_init` column per model (true/false), after the series: not a declared plot series
        flags = pd.DataFrame({series_column(m, "random_init"): random.get(m, False) for m in models}, index=table.index)
        write_csv(pd.concat([table, flags], axis=1), Path(a.out_dir) / f"{group}.csv", float_format="%.10g")
    log.info("%s (%s-p): %d DVC plot data files -> %s", spec.stem, a.side, len(tables), a.out_dir)


def register_dvc_plot_data(add: Add) -> None:
    s = add(
        "dvc-plot-data",
        cmd_dvc_plot_data,
        "a cutoff figure's data as one CSV per group with a column per model and metric (DVC plots)",
        "Read by the top-level plots of dvc.yaml (`dvc plots show`, docs/workflow.md, 'DVC'). Run by the "
        "rule dvc_plot_data, one job per figure and side.",
    )
    add_options(
        s,
        Option(
            "--figure",
            "which cutoff figure the data belong to (as in plot-cutoffs)",
            required=True,
            choices=["scores-top", "scores-bottom", "prob-counted", "invalid"],
        ),
        DVC_PLOT_DATA.file("--curves"),
        Option("--side", "top-p or bottom-p cutoffs", required=True, choices=["top", "bottom"]),
        Option("--models", "comma-separated model names (columns, in this order)", required=True),
        GROUPS.but(help="comma-separated group ids (one file per group)"),
        *DVC_PLOT_DATA.settings,
        DVC_PLOT_DATA.file("--out-dir"),
    )


def cmd_dvc_acquisition_plots(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.dvc_views import wide_acquisition_curves
    from verbeval.core.io import write_csv

    curves = pd.read_csv(a.curves, keep_default_na=False, na_values=[""], dtype={"seed": str, "family": str})
    series = [(family, seed) for family, seed in a.series]
    tables = wide_acquisition_curves(curves, series=series, groups=a.groups.split(","), source=a.curves)
    for group, table in tables.items():
        write_csv(table, Path(a.out_dir) / f"{group}.csv", float_format="%.10g")
    log.info("acquisition curves: %d DVC plot data files -> %s", len(tables), a.out_dir)


def register_dvc_acquisition_plots(add: Add) -> None:
    s = add(
        "dvc-acquisition-plots",
        cmd_dvc_acquisition_plots,
        "the acquisition learning curves as one CSV per group with a column per family, seed and metric (DVC plots)",
        "TSE, and EW and MW at top p = 1, against training step (read from acquisition/curves.csv); read by the "
        "top-level plots of dvc.yaml. Run by the rule dvc_acquisition_plots.",
    )
    add_options(
        s,
        Input("--curves", "curves.csv written by `verbeval acquisition`"),
        Option(
            "--series",
            "a family and seed label ('' for none): its columns, in this order (repeat)",
            nargs=2,
            action="append",
            required=True,
            metavar=("FAMILY", "SEED"),
        ),
        GROUPS.but(help="comma-separated group ids (one file per group)"),
        Output("--out-dir", "writes OUT_DIR/<group>.csv"),
    )

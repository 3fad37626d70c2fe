"""The figure sub-commands: ``plot-cutoffs``, ``plot-models``, ``plot-checkpoints`` and ``plot-lemmas``."""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from verbeval.agreement.cli.common import run_groups
from verbeval.agreement.steps import PLOT_CHECKPOINTS, PLOT_CUTOFFS, PLOT_LEMMAS, PLOT_MODELS
from verbeval.core.cliutil import Add
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import Option, add_options

log = logging.getLogger("verbeval")


def _random_in(frame: Any) -> set[str]:
    """The models a summary or lemma-statistics table marks randomly initialised (``random_init``)."""
    from verbeval.core.provenance import random_flags

    return {m for m, r in random_flags(frame).items() if r}


def _write_data(data: Any, path: str, source: Any) -> None:
    """A figure's data CSV, with the ``random_init`` column of ``source`` (the summary or lemma
    statistics it was read from) for each row's model."""
    from verbeval.core.io import write_csv
    from verbeval.core.provenance import random_flags, with_random_init

    write_csv(with_random_init(data, random_flags(source)), path, float_format="%.10g")


def _drawn(data: Any, models: list[str], draw: str | None, csv: str) -> tuple[Any, list[str], list[str]]:
    """The rows a figure draws (of ``data``, its CSV's rows), their models (``--draw``, default every
    model of ``--models``) and the note under the figure when that is not all of them (a sweep's figures
    draw a few of its revisions; the CSV keeps all)."""
    if not draw:
        return data, models, []
    drawn = draw.split(",")
    unknown = [m for m in drawn if m not in models]
    if unknown:
        raise VerbevalError(f"--draw: {', '.join(unknown)} not among --models")
    shown = data if drawn == models else data[data["model"].isin(drawn)]
    if len(drawn) == len(models):
        return shown, drawn, []
    note = (
        f"Drawn: {len(drawn)} of {len(models)} models (of a checkpoint sweep its first, table and last revisions and "
        f"its figure_revisions); every model is in {os.path.basename(csv)}."
    )
    return shown, drawn, [note]


DRAW_OPTION = Option(
    "--draw",
    "comma-separated models the figure draws, among --models (default: all of them); the data CSV keeps every "
    "model of --models. The workflow draws a checkpoint sweep's first, table and last revisions and its "
    "figure_revisions",
)


def cmd_plot_cutoffs(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.figures import CUTOFF_FIGURES, cutoff_curves
    from verbeval.agreement.report.plots import plot_cutoff_curves
    from verbeval.core.plots import save_figure

    spec = CUTOFF_FIGURES[a.figure]
    summary = pd.read_csv(a.summary)
    models = a.models.split(",")
    groups = run_groups(a.groups_file, summary["group"].unique())
    data = cutoff_curves(
        summary,
        metrics=spec.metrics,
        sides=spec.sides,
        models=models,
        groups=groups,
        cutoffs={"top": a.top_cutoffs, "bottom": a.bottom_cutoffs},
        min_contexts=a.min_contexts,
    )
    _write_data(data, a.csv, summary)
    shown, drawn, notes = _drawn(data, models, a.draw, a.csv)
    save_figure(
        plot_cutoff_curves(
            shown,
            spec,
            drawn,
            a.confidence,
            min_contexts=a.min_contexts,
            hide_low_n=a.low_n == "hide",
            random=_random_in(summary),
            notes=notes,
        ),
        a.out,
    )
    log.info("%s: %d points -> %s", spec.stem, len(data), ", ".join([a.csv, *a.out]))


def register_plot_cutoffs(add: Add) -> None:
    s = add(
        "plot-cutoffs",
        cmd_plot_cutoffs,
        "Figures 1-4: a metric against top-p / bottom-p cutoff, per model and group",
        "Reads only summary_all.csv; writes the figure's data (--csv) and images (--out). Run by the rule "
        "figure_cutoffs, one job per figure.",
    )
    add_options(
        s,
        Option(
            "--figure",
            "scores-top (Fig. 1: EW, MW vs top p), scores-bottom (Fig. 2, log axis), "
            "prob-counted (Fig. 3), invalid (Fig. 4)",
            required=True,
            choices=["scores-top", "scores-bottom", "prob-counted", "invalid"],
        ),
        *PLOT_CUTOFFS.inputs,
        Option("--models", "comma-separated model names, in panel order", required=True),
        DRAW_OPTION,
        *PLOT_CUTOFFS.settings,
        *PLOT_CUTOFFS.outputs,
    )


def cmd_plot_models(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.figures import model_comparison
    from verbeval.agreement.report.plots import plot_model_comparison
    from verbeval.core.plots import save_figure

    summary = pd.read_csv(a.summary)
    models = a.models.split(",")
    groups = run_groups(a.groups_file, summary["group"].unique())
    data = model_comparison(summary, models=models, groups=groups)
    _write_data(data, a.csv, summary)
    save_figure(plot_model_comparison(data, models, random=_random_in(summary)), a.out)
    log.info("model comparison (%d models x %d groups) -> %s", len(models), len(groups), ", ".join([a.csv, *a.out]))


def register_plot_models(add: Add) -> None:
    s = add(
        "plot-models",
        cmd_plot_models,
        "TSE, EW and MW per group, all models side by side",
        "Top p = 1, with the bootstrap CIs of summary_all.csv. Run by the rule figure_models.",
    )
    add_options(
        s,
        *PLOT_MODELS.inputs,
        Option("--models", "comma-separated model names", required=True),
        *PLOT_MODELS.settings,
        *PLOT_MODELS.outputs,
    )


def cmd_plot_checkpoints(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.figures import checkpoint_curves
    from verbeval.agreement.report.plots import plot_checkpoints
    from verbeval.core.model_entries import CHECKPOINT_AXES
    from verbeval.core.plots import save_figure

    key, x_label = CHECKPOINT_AXES[a.x_axis]
    checkpoints = []
    for sweep, model, step in a.checkpoint:
        try:
            checkpoints.append((sweep, model, int(step)))
        except ValueError:
            raise VerbevalError(f"--checkpoint {sweep} {model} {step}: the {key} must be an integer") from None
    summary = pd.read_csv(a.summary)
    groups = run_groups(a.groups_file, summary["group"].unique())
    data = checkpoint_curves(summary, checkpoints=checkpoints, groups=groups)
    # the CSV names the x column by its axis (step, tokens or words)
    _write_data(data.rename(columns={"step": key}), a.csv, summary)
    fig = plot_checkpoints(data, log_x=a.log_x, confidence=a.confidence, random=_random_in(summary), x_label=x_label)
    save_figure(fig, a.out)
    log.info(
        "checkpoint figure (%d checkpoints x %d groups) -> %s",
        len(checkpoints),
        len(groups),
        ", ".join([a.csv, *a.out]),
    )


def register_plot_checkpoints(add: Add) -> None:
    s = add(
        "plot-checkpoints",
        cmd_plot_checkpoints,
        "TSE, EW and MW (top p = 1, with CIs) against training step (or tokens or words seen), one panel per group",
        "For models with `revisions:` (docs/config.md). Run by the rule figure_checkpoints.",
    )
    add_options(
        s,
        *PLOT_CHECKPOINTS.inputs,
        Option(
            "--checkpoint",
            "a checkpoint: the swept model (one line style each), the checkpoint's model name in the "
            "summary and its training step (or tokens or words seen, --x-axis); repeat per checkpoint",
            nargs=3,
            action="append",
            required=True,
            metavar=("SWEEP", "MODEL", "STEP"),
        ),
        *PLOT_CHECKPOINTS.settings,
        *PLOT_CHECKPOINTS.outputs,
    )


def cmd_plot_lemmas(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.figures import lemma_accuracy, lemma_metrics
    from verbeval.agreement.report.plots import plot_lemma_accuracy
    from verbeval.agreement.report.worst_lemmas import worst_lemmas_html, worst_lemmas_markdown
    from verbeval.agreement.scores.lemma_diagnostics import worst_lemmas
    from verbeval.core.io import write_json, write_text
    from verbeval.core.plots import save_figure
    from verbeval.core.provenance import random_flags, with_random_field

    stats = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in a.stats], ignore_index=True)
    models = a.models.split(",")
    data = lemma_accuracy(stats, models, n_bins=a.bins)
    metrics = lemma_metrics(data)
    _write_data(data, a.csv, stats)
    if a.metrics_json:
        write_json(a.metrics_json, with_random_field(metrics, random_flags(stats)))
    shown, drawn, notes = _drawn(data, models, a.draw, a.csv)
    save_figure(plot_lemma_accuracy(shown, drawn, metrics, random=_random_in(stats), notes=notes), a.out)
    worst = worst_lemmas(stats, a.worst_lemmas, models)
    _write_data(worst, a.worst_csv, stats)
    if a.worst_md:
        write_text(a.worst_md, worst_lemmas_markdown(worst, random=_random_in(stats)))
    if a.worst_html:
        write_text(a.worst_html, worst_lemmas_html(worst, random=_random_in(stats)))
    log.info("lemma diagnostics of %d models -> %s, %s", len(models), ", ".join([a.csv, *a.out]), a.worst_csv)


def register_plot_lemmas(add: Add) -> None:
    s = add(
        "plot-lemmas",
        cmd_plot_lemmas,
        "per-lemma accuracy against log-probability, and the worst-conjugated lemmas",
        "Reads the lemma-stats CSVs of the models. Run by the rule figure_lemmas.",
    )
    add_options(
        s,
        PLOT_LEMMAS.file("--stats"),
        Option("--models", "comma-separated model names, in panel order", required=True),
        DRAW_OPTION,
        *PLOT_LEMMAS.settings,
        *PLOT_LEMMAS.outputs,
    )

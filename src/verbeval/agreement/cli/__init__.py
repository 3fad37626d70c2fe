"""Sub-commands of the agreement study, one module per sub-pipeline, each command's handler next
to its parser set-up (``register_<command>``).

Holds: data (lexicon, templates, lemmas), inference (infer, and the model, batch and shard-store
options and helpers that infer-forms and ``verbeval run-model`` share), aggregate (aggregate,
lemma-stats), tables (table: Table 2; topk-table: Table 3), figures (plot-cutoffs, plot-models,
plot-checkpoints, plot-lemmas), comparisons (compare: paired comparisons of models),
precision (precision-audit: ties and fragile decisions; flip-set), dvc_views (dvc-metrics, dvc-plot-data, dvc-acquisition-plots),
lexicon_modes (lexicon-forms to lexicon-modes-table), export (export: one model's results in the
Every Eval Ever schema) and common (shard paths from manifests, a run's groups).

May import: ``verbeval.core`` and the agreement study (part of it).

:func:`register`, :func:`register_dvc_views` and :func:`register_lexicon_modes` are what
``verbeval.commands`` calls (their order is the order of the sub-commands in ``verbeval --help``).
"""

from __future__ import annotations

from verbeval.agreement.cli import (
    aggregate,
    comparisons,
    data,
    dvc_views,
    export,
    figures,
    inference,
    lexicon_modes,
    precision,
    tables,
)
from verbeval.core.cliutil import Add


def register(add: Add) -> None:
    """The agreement pipeline: ``lexicon`` to ``topk-table``, then ``compare`` to ``export``."""
    data.register_lexicon(add)
    data.register_templates(add)
    data.register_lemmas(add)
    inference.register_infer(add)
    aggregate.register_aggregate(add)
    tables.register_table(add)
    aggregate.register_lemma_stats(add)
    figures.register_plot_cutoffs(add)
    figures.register_plot_models(add)
    figures.register_plot_checkpoints(add)
    figures.register_plot_lemmas(add)
    tables.register_topk_table(add)
    comparisons.register_compare(add)
    precision.register_precision_audit(add)
    precision.register_flip_set(add)
    export.register_export(add)


def register_dvc_views(add: Add) -> None:
    """``dvc-metrics``, ``dvc-plot-data`` and ``dvc-acquisition-plots``: Table 2, the cutoff figures and the
    acquisition curves as DVC metrics and plots."""
    dvc_views.register_dvc_metrics(add)
    dvc_views.register_dvc_plot_data(add)
    dvc_views.register_dvc_acquisition_plots(add)


def register_lexicon_modes(add: Add) -> None:
    """The lexicon modes (single_token, all, common): ``lexicon-forms`` to ``lexicon-modes-table``."""
    lexicon_modes.register_lexicon_forms(add)
    lexicon_modes.register_lexicon_common(add)
    lexicon_modes.register_infer_forms(add)
    lexicon_modes.register_lexicon_modes(add)
    lexicon_modes.register_lexicon_modes_table(add)

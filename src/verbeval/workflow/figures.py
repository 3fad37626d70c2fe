"""The plan of what the workflow draws and reshapes from the agreement results (no model is run):
the figures (Figures 1-4, the model comparison, the checkpoint and per-lemma figures), Table 3, and
the DVC views of Table 2 and Figures 1-4 (their paths, outputs and command options). Built by
:class:`verbeval.workflow.plan.Plan` as ``PLAN.figures``; ``workflow/rules/figures.smk`` and
``dvc_views.smk`` bind their rules to it."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from verbeval.agreement.report.figures import CUTOFF_FIGURES
from verbeval.agreement.report.table3 import table3_groups
from verbeval.core.model_entries import CHECKPOINT_AXES, checkpoint_axis, entry_models
from verbeval.workflow.layout import Layout
from verbeval.workflow.model_steps import ModelSteps
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.params import RuleRecord, alternatives, output_files, quoted, wrapped


class FiguresPlan:
    """The figures, Table 3 and the DVC views (``agreement.figures``), in ``<results_dir>/agreement/figures``."""

    def __init__(self, layout: Layout, model: ModelsPlan, model_steps: ModelSteps) -> None:
        self.layout = layout
        self.model = model
        self.model_steps = model_steps
        self.out = f"{layout.agreement_dir}/figures"
        self.config: dict[str, Any] = layout.agreement["figures"]
        self.t3_groups = table3_groups(layout.group_ids, self.config["contexts"], self.config["context_groups"])
        unknown = [g for g in self.t3_groups if g not in layout.group_ids]
        if unknown:
            raise layout.error(
                ["agreement", "figures", "contexts"],
                f"agreement.figures.contexts: group(s) {unknown} are not run (groups: {layout.group_ids})",
            )
        # the checkpoint figure: drawn when some model has `revisions:` (and figures.checkpoints.enabled)
        self.checkpoint_figure = bool(layout.checkpoints) and self.config["checkpoints"]["enabled"]
        #: Figures 1-4 by file stem (the wildcard of rules figure_cutoffs and dvc_plot_data): the name
        #: `verbeval plot-cutoffs --figure` takes, and the sides (top, bottom) the figure shows
        self.cutoff_figures = {spec.stem: (name, spec.sides) for name, spec in CUTOFF_FIGURES.items()}
        #: each rule's record, by rule name (``PLAN.figures.rules.table3``)
        self.rules = SimpleNamespace(**self._rules())

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.agreement.steps import PLOT_CHECKPOINTS, PLOT_CUTOFFS, PLOT_LEMMAS, TOPK_TABLE

        layout, config, out = self.layout, self.layout.config, self.layout.agreement_dir
        logs = f"{layout.logs}/agreement/figures"
        summary = {"summary": f"{out}/summary_all.csv", "groups_file": layout.run_groups_file}
        random_models = {"random_models": self.model.random_models}  # named in the report captions
        models, stems = ",".join(layout.models), {"stem": alternatives(list(self.cutoff_figures))}
        return {
            # Figures 1-4 (fig1_top_p, fig2_bottom_p, fig3_prob_counted, fig4_invalid), one job each
            "figure_cutoffs": RuleRecord(
                summary,
                self.rule_outputs("figure_cutoffs"),
                f"{logs}/{{stem}}.log",
                {
                    "figure": lambda wc: self.cutoff_figures[wc.stem][0],
                    "models": models,
                    **random_models,
                    "settings": shlex.join(PLOT_CUTOFFS.argv(config)),
                },
                stems,
            ),
            "figure_models": RuleRecord(
                summary,
                self.rule_outputs("figure_models"),
                f"{logs}/model_comparison.log",
                {"models": ",".join(self.comparison_models()), **random_models},
            ),
            "figure_checkpoints": RuleRecord(
                summary,
                self.rule_outputs("figure_checkpoints"),
                f"{logs}/checkpoints.log",
                {
                    "args": self.checkpoint_args(),
                    "settings": shlex.join(PLOT_CHECKPOINTS.argv(config)),
                    **random_models,
                },
            ),
            "figure_lemmas": RuleRecord(
                {"stats": layout.per_model(f"{out}/{{model}}/lemma_stats.csv")},
                self.rule_outputs("figure_lemmas"),
                f"{logs}/lemma_accuracy.log",
                {"models": models, "settings": shlex.join(PLOT_LEMMAS.argv(config)), **random_models},
            ),
            "table3": RuleRecord(
                {
                    "templates": f"{out}/templates.parquet",
                    "lemmas": layout.per_model(f"{out}/{{model}}/lemmas.parquet"),
                    "manifests": layout.per_model(layout.shard_manifest(out)),
                    "tokenizers": self.table3_tokenizers(),
                },
                self.rule_outputs("table3"),
                f"{logs}/table3_topk.log",
                {
                    # derived from the inputs: no rerun trigger of its own
                    "args": lambda wc, input: self.table3_args(),
                    "settings": shlex.join(TOPK_TABLE.argv(config)),
                    **random_models,
                },
            ),
            "dvc_metrics": RuleRecord(
                f"{out}/metrics.json",  # rule table2's metrics
                self.rule_outputs("dvc_metrics"),
                f"{layout.logs}/agreement/dvc_metrics.log",
                {
                    "models": ",".join(layout.table_models),  # the models of metrics.json (agreement.table_models)
                    "groups": ",".join(layout.group_ids),
                    "out_dir": lambda wc, output: os.path.dirname(os.path.dirname(output[0])),  # OUT/metrics
                },
            ),
            "dvc_plot_data": RuleRecord(
                self.rule_outputs("figure_cutoffs")["csv"],
                self.rule_outputs("dvc_plot_data"),
                f"{logs}/dvc_{{stem}}_{{side}}.log",
                {
                    "figure": lambda wc: self.cutoff_figures[wc.stem][0],
                    "models": models,
                    "groups": ",".join(layout.group_ids),
                    "out_dir": lambda wc, output: os.path.dirname(output[0]),
                },
                {**stems, "side": "top|bottom"},
            ),
        }

    def images(self, stem: str) -> list[str]:
        """The image files of figure ``stem`` (the first is registered in the report)."""
        return [f"{self.out}/{stem}.{ext}" for ext in self.config["formats"]]

    def comparison_models(self) -> list[str]:
        """The models of the model comparison figure: one per ``models[]`` entry (a sweep's
        ``table_revision``, else its last revision), whatever ``agreement.table_models`` says."""
        return entry_models(list(self.layout.models.values()))

    def checkpoint_args(self) -> str:
        """--checkpoint SWEEP MODEL POSITION options of `verbeval plot-checkpoints` (the position on
        ``agreement.checkpoint_axis``; the axis and its scale are the step's settings)."""
        axis = checkpoint_axis(self.layout.config)
        key = CHECKPOINT_AXES[axis][0]
        args = []
        for m in self.layout.checkpoints:
            args += ["--checkpoint", m["checkpoint_of"], m["name"], str(m[key])]
        return quoted(args)

    def table3_args(self) -> str:
        """--model/--revision/--gguf-file/--lemmas/--shards/--context options of `verbeval topk-table`."""
        layout = self.layout
        args = []
        for name, m in layout.models.items():
            args += ["--model", f"{name}={m['id']}", "--lemmas", f"{name}={layout.agreement_dir}/{name}/lemmas.parquet"]
            args += self.model.source(name).named_options(name)
        args.append("--shards")
        args += [f"{name}={layout.shard_manifest(layout.agreement_dir).format(model=name)}" for name in layout.models]
        for c in self.config["contexts"] or []:
            args += ["--context", c["group"], c["left"], "*" if c["right"] is None else c["right"]]
        return quoted(args)

    def table3_tokenizers(self) -> list[str]:
        return [d for m in self.layout.models.values() for d in self.model.dir_input(m["id"])]

    # ------------------------------------------------------------------ rule outputs

    def rule_outputs(self, rule: str, **wrap: Callable[[Any], Any]) -> dict[str, Any]:
        """The named outputs of ``rule`` (patterns with its wildcards: ``{stem}`` of Figures 1-4,
        ``{side}`` of their DVC views), written once: the rule's ``output:`` (``wrap``: a function of an
        output's files, per name: its ``report(...)``), and, with the wildcards filled in, the targets
        of rule all (:meth:`outputs`, :meth:`dvc_view_outputs`)."""
        figs, agreement_dir = self.out, self.layout.agreement_dir
        outputs: dict[str, dict[str, Any]] = {
            "figure_cutoffs": {"csv": f"{figs}/{{stem}}.csv", "images": self.images("{stem}")},
            "figure_models": {"csv": f"{figs}/model_comparison.csv", "images": self.images("model_comparison")},
            "figure_checkpoints": {"csv": f"{figs}/checkpoints.csv", "images": self.images("checkpoints")},
            "figure_lemmas": {
                "csv": f"{figs}/lemma_accuracy.csv",
                "metrics": f"{figs}/lemma_metrics.json",
                "images": self.images("lemma_accuracy"),
                "worst_csv": f"{figs}/worst_lemmas.csv",
                "worst_md": f"{figs}/worst_lemmas.md",
                "worst_html": f"{figs}/worst_lemmas.html",
            },
            "table3": {
                "csv": f"{figs}/table3_topk.csv",
                "md": f"{figs}/table3_topk.md",
                "html": f"{figs}/table3_topk.html",
            },
            # Table 2 as one {tse, ew, mw} file per model and group (the DVC metrics)
            "dvc_metrics": {
                "metrics": [
                    f"{agreement_dir}/metrics/{m}/{g}.json"
                    for m in self.layout.table_models
                    for g in self.layout.group_ids
                ]
            },
            # the data of one side of a cutoff figure, one CSV per group (the DVC plots)
            "dvc_plot_data": {"plots": self.layout.per_group(f"{figs}/dvc/{{stem}}/{{side}}/{{group}}.csv")},
        }
        return wrapped(outputs[rule], wrap)

    def outputs(self) -> list[str]:
        """The figures, Table 3, the per-lemma statistics and the checkpoint figure (when drawn)."""
        cutoffs, lemmas = self.rule_outputs("figure_cutoffs"), self.rule_outputs("figure_lemmas")
        steps = self.model_steps
        return (
            [f for stem in self.cutoff_figures for f in output_files(cutoffs, stem=stem)]
            + output_files(lemmas, ["csv", "images"])
            + output_files(self.rule_outputs("figure_models"))
            + output_files(self.rule_outputs("table3"))
            + output_files(lemmas, ["worst_csv", "worst_md", "worst_html", "metrics"])
            + [f for m in self.layout.models for f in steps.step_files("lemma-stats", m)[1]]
            + (output_files(self.rule_outputs("figure_checkpoints")) if self.checkpoint_figure else [])
        )

    # ------------------------------------------------------------------ DVC views

    def dvc_metrics_files(self) -> list[str]:
        """Table 2 as one ``{tse, ew, mw}`` file per model and group (the DVC metrics)."""
        return output_files(self.rule_outputs("dvc_metrics"))

    def dvc_view_outputs(self) -> list[str]:
        plots = self.rule_outputs("dvc_plot_data")
        return self.dvc_metrics_files() + [
            f
            for stem, (_, sides) in self.cutoff_figures.items()
            for side in sides
            for f in output_files(plots, stem=stem, side=side)
        ]

"""The plan of what the workflow draws and reshapes from the agreement results (no model is run):
the figures (Figures 1-4, the model comparison, the checkpoint and per-lemma figures), Table 3, and
the DVC views of Table 2 and Figures 1-4 (their paths, outputs and command options). Built by
:class:`verbeval.workflow.plan.Plan` as ``PLAN.figures``; ``workflow/rules/figures.smk`` and
``dvc_views.smk`` bind their rules to it."""

from __future__ import annotations

import os
import shlex
from types import SimpleNamespace
from typing import Any

from verbeval.agreement.report.figures import CUTOFF_FIGURES
from verbeval.agreement.report.table3 import table3_groups
from verbeval.core.model_entries import CHECKPOINT_AXES, checkpoint_axis, entry_models, figure_models
from verbeval.workflow.layout import Layout
from verbeval.workflow.model_steps import ModelSteps
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.params import RuleRecord, alternatives, output_files, quoted


class FiguresPlan:
    """The figures, Table 3 and the DVC views (``agreement.figures``), in ``<results_dir>/agreement/figures``."""

    def __init__(self, layout: Layout, model: ModelsPlan, model_steps: ModelSteps) -> None:
        self.layout = layout
        self.model = model
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
        rules = self.rules
        cutoffs, lemmas = rules.figure_cutoffs.output, rules.figure_lemmas.output
        #: the targets of rule all: the figures, Table 3, the per-lemma statistics and the checkpoint figure
        #: (when drawn)
        self.outputs = (
            [f for stem in self.cutoff_figures for f in output_files(cutoffs, stem=stem)]
            + output_files(lemmas, ["csv", "images"])
            + output_files(rules.figure_models.output)
            + output_files(rules.table3.output)
            + output_files(lemmas, ["worst_csv", "worst_md", "worst_html", "metrics"])
            + [f for m in layout.models for f in model_steps.step_files("lemma-stats", m)[1]]
            + (output_files(rules.figure_checkpoints.output) if self.checkpoint_figure else [])
        )
        #: the targets of rule all of the DVC views: Table 2 as one {tse, ew, mw} file per model and group
        #: (the DVC metrics), and each side of each cutoff figure
        self.dvc_view_outputs = output_files(rules.dvc_metrics.output) + [
            f
            for stem, (_, sides) in self.cutoff_figures.items()
            for side in sides
            for f in output_files(rules.dvc_plot_data.output, stem=stem, side=side)
        ]

    def _rules(self) -> dict[str, RuleRecord]:
        """Each rule's record; its named outputs patterns with its wildcards (``{stem}`` of Figures 1-4,
        ``{side}`` of their DVC views), which the rule's ``output:`` declares (wrapped in ``report(...)``
        there) and, with the wildcards filled in, the targets of rule all (:attr:`outputs`)."""
        from verbeval.agreement.steps import PLOT_CHECKPOINTS, PLOT_CUTOFFS, PLOT_LEMMAS, TOPK_TABLE

        layout, config, out, figs = self.layout, self.layout.config, self.layout.agreement_dir, self.out
        logs = f"{layout.logs}/agreement/figures"
        summary = {"summary": f"{out}/summary_all.csv", "groups_file": layout.run_groups_file}
        random_models = {"random_models": self.model.random_models}  # named in the report captions
        models, stems = ",".join(layout.models), {"stem": alternatives(list(self.cutoff_figures))}
        # the models Figures 1-4 and the per-lemma figure draw: of a sweep a few revisions (its first, table
        # and last, its figure_revisions), so that their cost does not grow with it; their CSVs keep all
        drawn = figure_models(list(layout.models.values()))
        draw = "" if drawn == list(layout.models) else shlex.join(["--draw", ",".join(drawn)])

        def images(stem: str) -> list[str]:  # the image files of a figure (the first is registered in the report)
            return [f"{figs}/{stem}.{ext}" for ext in self.config["formats"]]

        # --checkpoint SWEEP MODEL POSITION options of `verbeval plot-checkpoints` (the position on
        # agreement.checkpoint_axis; the axis and its scale are the step's settings)
        key = CHECKPOINT_AXES[checkpoint_axis(config)][0]
        checkpoints = [
            w for m in layout.checkpoints for w in ("--checkpoint", m["checkpoint_of"], m["name"], str(m[key]))
        ]
        # --model/--revision/--gguf-file/--lemmas/--shards/--context options of `verbeval topk-table`
        table3 = []
        for name, m in layout.models.items():
            table3 += ["--model", f"{name}={m['id']}", "--lemmas", f"{name}={out}/{name}/lemmas.parquet"]
            table3 += self.model.source(name).named_options(name)
        table3.append("--shards")
        table3 += [f"{name}={layout.shard_manifest(out).format(model=name)}" for name in layout.models]
        for c in self.config["contexts"] or []:
            table3 += ["--context", c["group"], c["left"], "*" if c["right"] is None else c["right"]]
        cutoff_outputs = {"csv": f"{figs}/{{stem}}.csv", "images": images("{stem}")}
        return {
            # Figures 1-4 (fig1_top_p, fig2_bottom_p, fig3_prob_counted, fig4_invalid), one job each
            "figure_cutoffs": RuleRecord(
                summary,
                cutoff_outputs,
                f"{logs}/{{stem}}.log",
                {
                    "figure": lambda wc: self.cutoff_figures[wc.stem][0],
                    "models": models,
                    "draw": draw,
                    **random_models,
                    "settings": shlex.join(PLOT_CUTOFFS.argv(config)),
                },
                stems,
            ),
            # the model comparison: one model per models[] entry (a sweep's table_revision, else its last
            # revision), whatever agreement.table_models says
            "figure_models": RuleRecord(
                summary,
                {"csv": f"{figs}/model_comparison.csv", "images": images("model_comparison")},
                f"{logs}/model_comparison.log",
                {"models": ",".join(entry_models(list(layout.models.values()))), **random_models},
            ),
            "figure_checkpoints": RuleRecord(
                summary,
                {"csv": f"{figs}/checkpoints.csv", "images": images("checkpoints")},
                f"{logs}/checkpoints.log",
                {"args": quoted(checkpoints), "settings": shlex.join(PLOT_CHECKPOINTS.argv(config)), **random_models},
            ),
            "figure_lemmas": RuleRecord(
                {"stats": layout.per_model(f"{out}/{{model}}/lemma_stats.csv")},
                {
                    "csv": f"{figs}/lemma_accuracy.csv",
                    "metrics": f"{figs}/lemma_metrics.json",
                    "images": images("lemma_accuracy"),
                    "worst_csv": f"{figs}/worst_lemmas.csv",
                    "worst_md": f"{figs}/worst_lemmas.md",
                    "worst_html": f"{figs}/worst_lemmas.html",
                },
                f"{logs}/lemma_accuracy.log",
                {"models": models, "draw": draw, "settings": shlex.join(PLOT_LEMMAS.argv(config)), **random_models},
            ),
            "table3": RuleRecord(
                {
                    "templates": f"{out}/templates.parquet",
                    "lemmas": layout.per_model(f"{out}/{{model}}/lemmas.parquet"),
                    "manifests": layout.per_model(layout.shard_manifest(out)),
                    "tokenizers": [d for m in layout.models.values() for d in self.model.dir_input(m["id"])],
                },
                {"csv": f"{figs}/table3_topk.csv", "md": f"{figs}/table3_topk.md", "html": f"{figs}/table3_topk.html"},
                f"{logs}/table3_topk.log",
                {
                    # derived from the inputs: no rerun trigger of its own
                    "args": lambda wc, input: quoted(table3),
                    "settings": shlex.join(TOPK_TABLE.argv(config)),
                    **random_models,
                },
            ),
            # Table 2 as one {tse, ew, mw} file per model and group (the DVC metrics)
            "dvc_metrics": RuleRecord(
                f"{out}/metrics.json",  # rule table2's metrics
                {"metrics": [f"{out}/metrics/{m}/{g}.json" for m in layout.table_models for g in layout.group_ids]},
                f"{layout.logs}/agreement/dvc_metrics.log",
                {
                    "models": ",".join(layout.table_models),  # the models of metrics.json (agreement.table_models)
                    "groups": ",".join(layout.group_ids),
                    "out_dir": lambda wc, output: os.path.dirname(os.path.dirname(output[0])),  # OUT/metrics
                },
            ),
            # the data of one side of a cutoff figure, one CSV per group (the DVC plots)
            "dvc_plot_data": RuleRecord(
                cutoff_outputs["csv"],
                {"plots": layout.per_group(f"{figs}/dvc/{{stem}}/{{side}}/{{group}}.csv")},
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

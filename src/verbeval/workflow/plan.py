"""The workflow's plan: from a configuration, everything the rules of ``workflow/rules/*.smk`` need.

:func:`verbeval.workflow.loading.build_plan` validates the configuration (the schema fills in its defaults), reads the
manifest and the groups file, and raises :class:`PlanError` naming the configuration file that set
a bad key. The :class:`Plan` it returns holds the models, groups, sources, result paths, the
output lists of every part of the workflow and the command options of each rule; the ``.smk``
files only bind rules to it. Building a plan reads files and never writes one: a stale shard store
or a raw copy that no longer verifies is *reported* (:class:`verbeval.workflow.repairs.RepairsPlan`),
and the job that runs repairs it.

The plan is composed bottom-up: :class:`verbeval.workflow.layout.Layout` (the configuration, models,
directories, groups and sources, computed once; its fields read as the plan's own: ``PLAN.group_ids``)
is built first, and each sub-plan takes it and the sub-plans it needs: :mod:`verbeval.workflow.acquisition`
(the acquisition analysis and the toy models: ``PLAN.acquisition``), :mod:`verbeval.workflow.models`
(each model's sources, options and folders, the tiny and pip models: ``PLAN.model``),
:mod:`verbeval.workflow.studies` (SimVerb-3500, veridicality: ``PLAN.simverb``, ``PLAN.veridicality``),
:mod:`verbeval.workflow.model_steps` (each model's steps: ``PLAN.model_steps``), :mod:`verbeval.workflow.figures`
(figures, Table 3, DVC views: ``PLAN.figures``), :mod:`verbeval.workflow.lexicon_modes` (``PLAN.lexicon_modes``),
:mod:`verbeval.workflow.comparisons`, :mod:`verbeval.workflow.queues`
and :mod:`verbeval.workflow.repairs` (pinned files, shard stores and raw copies to repair: ``PLAN.repairs``).
No sub-plan imports this module. Beside it: :mod:`verbeval.workflow.loading` (configuration files to a
plan), :mod:`verbeval.workflow.params` (params and wildcard constraints).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from verbeval.core.config import Layer
from verbeval.core.manifest import Source
from verbeval.workflow.acquisition import AcquisitionPlan
from verbeval.workflow.comparisons import ComparisonsPlan
from verbeval.workflow.figures import FiguresPlan
from verbeval.workflow.layout import Layout, PlanError
from verbeval.workflow.lexicon_modes import LexiconModesPlan
from verbeval.workflow.model_steps import ModelSteps
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.multilingual import MultilingualPlan
from verbeval.workflow.params import RuleRecord, Untracked, alternatives, output_files, quoted
from verbeval.workflow.queues import QueuesPlan
from verbeval.workflow.repairs import RepairsPlan
from verbeval.workflow.studies import SimverbPlan, VeridicalityPlan

__all__ = ["Plan", "PlanError"]


class Plan:
    """Everything the rules need, from a validated configuration (:func:`build_plan`): the layout's
    fields (read as the plan's own) and the sub-plans built on it."""

    def __init__(
        self, config: dict[str, Any], layers: list[Layer], manifest: dict[str, Source], all_groups: list[dict[str, Any]]
    ) -> None:
        layout = self.layout = Layout(config, layers, manifest, all_groups)
        self.acquisition = AcquisitionPlan(layout)  # the acquisition analysis of the sweeps; the toy models
        layout.check_built_folders()
        self.model = ModelsPlan(layout, self.acquisition)  # each model's sources, options and folders
        self.veridicality = VeridicalityPlan(layout, self.model)
        self.simverb = SimverbPlan(layout, self.model)
        self.model_steps = ModelSteps(layout, self.model, self.acquisition, self.simverb)  # files, command lines
        self.figures = FiguresPlan(layout, self.model, self.model_steps)
        self.lexicon_modes = LexiconModesPlan(layout, self.model)  # multi-token forms, three lexicon modes
        self.comparisons = ComparisonsPlan(layout, self.figures, self.model_steps)  # paired comparisons, the audit
        self.multilingual = MultilingualPlan(layout, self.model)  # the CLAMS languages (off without languages)
        self.plan_queues(local_gpu=False)
        # the manifest sources this run reads: templates, verb lists, SimVerb (with its split files), veridicality
        sources = [self.simverb.config["source"], *self.simverb.splits.values(), self.veridicality.config["source"],
                   *self.multilingual.read_sources]  # fmt: skip
        self.repairs = RepairsPlan(layout, self.model, list(dict.fromkeys(self.sources + sources)))
        #: the records of the rules of fetch.smk and agreement.smk's lexicon, templates and table2, by rule name
        self.rules = SimpleNamespace(**self._rules())

    def _rules(self) -> dict[str, RuleRecord]:
        agr, out, config = self.agreement, self.agreement_dir, self.config
        manifest = Untracked(config["manifest"])  # where the formats are read: no rerun trigger

        def inputs(names: Sequence[str]) -> str:  # --input=NAME=PATH of the raw copies of these sources
            return quoted([f"--input={s}={self.raw_path(s)}" for s in names])

        custom = []  # `verbeval templates` options of the custom groups (agreement.custom_groups)
        for g in self.custom_groups:
            custom.append(f"--custom-group={g.id}={g.path}")
            if g.name != g.id:
                custom.append(f"--custom-name={g.id}={g.name}")
            if g.sha256:
                custom.append(f"--custom-sha256={g.id}={g.sha256}")
            custom.append(f"--custom-format={g.id}={g.format}")
        mirror = config["data_mirror"]
        return {
            "fetch": RuleRecord(
                None,
                f"{self.raw_dir}/{{name}}/{{filename}}",
                f"{self.logs}/fetch/{{name}}/{{filename}}.log",
                {
                    # the accepted checksums: a changed entry fetches again
                    "sha256": lambda wc: " ".join(self.manifest[wc.name].sha256),
                    "manifest": manifest,
                    # --mirror DIR (data_mirror), no rerun trigger: the bytes are checked either way
                    "mirror": Untracked(f"--mirror {shlex.quote(mirror)}" if mirror else ""),
                },
                {"name": alternatives(list(self.manifest))},
            ),
            "lexicon": RuleRecord(
                {"lists": [self.raw_path(s) for s in agr["verb_lists"]], "overrides": agr["inflection_overrides"]},
                f"{out}/lexicon.parquet",
                f"{self.logs}/agreement/lexicon.log",
                {"manifest": manifest, "inputs": inputs(agr["verb_lists"])},
            ),
            "templates": RuleRecord(
                {
                    "sources": [self.raw_path(s) for s in self.template_sources],
                    "groups_file": agr["groups_file"],
                    "errata": agr["errata"],
                    "custom": [str(g.path) for g in self.custom_groups],
                },
                {
                    "table": f"{out}/templates.parquet",
                    "rejects": f"{out}/template_rejects.csv",
                    "groups": self.run_groups_file,
                },
                f"{self.logs}/agreement/templates.log",
                {
                    "manifest": manifest,
                    "inputs": inputs(self.template_sources),
                    "groups": shlex.quote("--groups=" + ",".join(g["id"] for g in self.groups)),  # empty: custom only
                    "custom": quoted(custom),
                    "settings": self.settings("templates"),
                },
            ),
            "table2": RuleRecord(
                {
                    "summaries": [f for m in self.models for f in self.per_group(f"{out}/{m}/{{group}}/summary.csv")],
                    "groups_file": self.run_groups_file,
                    "errata": agr["errata"],
                    "templates": f"{out}/templates.parquet",
                },
                {
                    "csv": f"{out}/table2.csv",
                    "md": f"{out}/table2.md",
                    "tex": f"{out}/table2.tex",
                    "html": f"{out}/table2.html",
                    "all_csv": f"{out}/summary_all.csv",
                    "metrics": f"{out}/metrics.json",
                },
                f"{self.logs}/agreement/table2.log",
                {
                    "models": ",".join(self.models),
                    "table_models": (
                        f"--table-models {','.join(self.table_models)}"
                        if self.table_models != list(self.models)
                        else ""
                    ),
                    "random_models": self.model.random_models,  # named in the report caption
                    "settings": self.settings("table"),
                },
            ),
        }

    def __getattr__(self, name: str) -> Any:
        """The layout's fields and helpers as the plan's own (``PLAN.agreement_dir``, ``PLAN.per_group``)."""
        if name == "layout":  # not built yet
            raise AttributeError(name)
        return getattr(self.layout, name)

    def plan_queues(self, local_gpu: bool) -> None:
        """The queue jobs (``PLAN.queues``: a sweep's chunks of revisions; with ``local_gpu``, a run whose
        jobs run on this machine, the models sharing its GPU): :mod:`verbeval.workflow.queues`."""
        self.queues = QueuesPlan(self.layout, self.model, self.model_steps, local_gpu)

    def needed_ids(self, jobs: Sequence[tuple[str, Mapping[str, str]]]) -> set[str]:
        """The ids of the models that these jobs (rule name, wildcards) load (table3: every model's tokenizer)."""
        ids: set[str] = set()
        for rule, wc in jobs:
            if rule == "table3":
                ids.update(m["id"] for m in self.models.values())
            if wc.get("model") in self.models:
                ids.add(self.models[wc["model"]]["id"])
            if wc.get("svmodel") in self.simverb.models:
                ids.add(self.simverb.models[wc["svmodel"]]["id"])
            if wc.get("vmodel") in self.veridicality.real:
                ids.add(self.veridicality.real[wc["vmodel"]])
        return ids

    def settings(self, command: str) -> str:
        """The options of declared step ``command``'s settings for this configuration, as shell words
        (:meth:`verbeval.core.steps.Step.argv`): a rule's ``params.settings``."""
        from verbeval.workflow.steps import declared_step

        return shlex.join(declared_step(command).argv(self.config))

    def all_outputs(self) -> list[str]:
        """The targets of rule all: Table 2's files, every model's outputs of its agreement steps (lemmas,
        its shard manifest, each group's scores, TSE and summary: :mod:`verbeval.workflow.model_steps`; a
        per-group output deleted alone is regenerated), and those of every other part."""
        steps = self.model_steps
        per_model = [
            p
            for m in self.models
            for p in [
                *steps.step_files("lemmas", m)[1],
                steps.files(m)["manifest"],
                *steps.step_files("aggregate", m)[1],
            ]
        ]
        return (
            output_files(self.rules.table2.output)
            + per_model
            + self.figures.outputs
            + self.veridicality.outputs
            + self.simverb.outputs
            + self.lexicon_modes.outputs
            + self.figures.dvc_view_outputs
            + self.acquisition.outputs
            + self.comparisons.outputs
            + self.multilingual.outputs
        )

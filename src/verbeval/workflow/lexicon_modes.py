"""The plan of the lexicon modes (``agreement.multitoken``, ``agreement.lexicon_mode``): every model's
lexicon forms, the common pairs, each model's scores in the three modes, their table and page. Each
rule's files, params and log are one record (:attr:`LexiconModesPlan.rules`), which
``workflow/rules/lexicon_modes.smk`` reads by name (``LM.lexicon_modes.input``); the form shards
come from the model's one job (:mod:`verbeval.workflow.model_steps`). Built by
:class:`verbeval.workflow.plan.Plan` as ``PLAN.lexicon_modes``.
"""

from __future__ import annotations

import shlex
from types import SimpleNamespace

from verbeval.agreement.steps import LEXICON_MODES, LEXICON_MODES_TABLE
from verbeval.workflow.layout import Layout
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.params import RuleRecord, output_files, quoted


class LexiconModesPlan:
    """The lexicon modes' rules and outputs (see the module docstring)."""

    def __init__(self, layout: Layout, model: ModelsPlan) -> None:
        self.layout = layout
        lm, out = layout.lexicon_modes_dir, layout.agreement_dir
        self.files: dict[str, dict[str, str]] = {
            "lexicon_forms": {"forms": f"{lm}/{{model}}/forms.parquet"},
            "lexicon_common": {"common": f"{lm}/common.parquet"},
            "lexicon_modes": {
                "summary": f"{lm}/{{model}}/summary.csv",
                "lemmas": f"{lm}/{{model}}/lemmas.csv",
                "diff": f"{lm}/{{model}}/lemma_differences.csv",
                "consistency": f"{lm}/{{model}}/consistency.csv",
            },
            "lexicon_modes_table": {
                "csv": f"{lm}/table.csv",
                "md": f"{lm}/table.md",
                "tex": f"{lm}/table.tex",
                "metrics": f"{lm}/metrics.json",
                "coverage": f"{lm}/coverage.csv",
                "diff": f"{lm}/lemma_differences.csv",
            },
            "lexicon_modes_page": {"html": f"{lm}/lexicon_modes.html"},
        }
        forms, per_model = self.files["lexicon_forms"]["forms"], self.files["lexicon_modes"]
        common = self.files["lexicon_common"]["common"]
        # NAME=PATH of every model's forms table
        forms_options = quoted([f"{m}={forms.replace('{model}', m)}" for m in layout.models])
        random_models = {"random_models": model.random_models}  # named in the report captions
        logs = f"{layout.logs}/lexicon_modes"
        #: each rule's record, by rule name (``PLAN.lexicon_modes.rules.lexicon_modes``)
        self.rules = SimpleNamespace(
            lexicon_forms=RuleRecord(
                {
                    "lexicon": f"{out}/lexicon.parquet",
                    "templates": f"{out}/templates.parquet",
                    "model": lambda wc: model.dir_input(layout.models[wc.model]["id"]),
                },
                self.files["lexicon_forms"],
                f"{logs}/{{model}}/forms.log",
                {
                    "model": lambda wc: layout.models[wc.model]["id"],
                    "version": lambda wc: model.version(wc.model),
                    "revision": lambda wc: shlex.join(model.source(wc.model).options()),
                },
            ),
            lexicon_common=RuleRecord(
                {"forms": layout.per_model(forms)},
                self.files["lexicon_common"],
                f"{logs}/common.log",
                {"forms": forms_options, **random_models},
            ),
            lexicon_modes=RuleRecord(
                {
                    "forms": forms,
                    "common": common,
                    "manifest": layout.shard_manifest(lm),
                    "table2": layout.per_group(f"{out}/{{model}}/{{group}}/summary.csv", layout.multitoken_groups),
                },
                per_model,
                f"{logs}/{{model}}/modes.log",
                {"settings": shlex.join(LEXICON_MODES.argv(layout.config))},
            ),
            lexicon_modes_table=RuleRecord(
                {
                    "summaries": layout.per_model(per_model["summary"]),
                    "diffs": layout.per_model(per_model["diff"]),
                    "consistency": layout.per_model(per_model["consistency"]),
                    "forms": layout.per_model(forms),
                    "common": common,
                    "groups_file": layout.run_groups_file,
                },
                self.files["lexicon_modes_table"],
                f"{logs}/table.log",
                {
                    "models": ",".join(layout.models),
                    "settings": shlex.join(LEXICON_MODES_TABLE.argv(layout.config)),
                    "forms": forms_options,
                    **random_models,
                },
            ),
            lexicon_modes_page=RuleRecord(
                self.files["lexicon_modes_table"]["csv"],
                self.files["lexicon_modes_page"],
                f"{logs}/page.log",
                random_models,
            ),
        )
        #: the targets of rule all: the lexicon-modes table, its page and common pairs, each model's scores
        #: and form shards (the form shards: the model's one job, :mod:`verbeval.workflow.model_steps`)
        self.outputs: list[str] = []
        if layout.multitoken_on:
            table = self.files["lexicon_modes_table"]
            self.outputs = (
                output_files(table, ["csv", "md", "tex"])
                + output_files(self.files["lexicon_modes_page"])
                + output_files(table, ["metrics", "coverage", "diff"])
                + output_files(self.files["lexicon_common"])
                + [
                    f
                    for m in layout.models
                    for f in output_files(per_model, ["summary", "lemmas", "consistency"], model=m)
                ]
                + layout.per_model(layout.shard_manifest(layout.lexicon_modes_dir))
            )

"""The multilingual study's part of the plan (``multilingual:``): its languages, models, files and the
records of its four rules (``workflow/rules/multilingual.smk``): ``clams_lexicon`` (one job per
language), ``clams_templates``, ``clams_score`` (one job per model: every language, the model loaded
once) and ``clams_table``. With ``multilingual.languages`` empty it plans no job and no file.
"""

from __future__ import annotations

import os
import shlex
from types import SimpleNamespace
from typing import Any

from verbeval.workflow.layout import Layout
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.params import RuleRecord, alternatives, quoted

#: the cutoff figures of each language (stems of verbeval.agreement.report.figures.CUTOFF_FIGURES)
FIGURES = ("fig1_top_p", "fig2_bottom_p")


class MultilingualPlan:
    """The CLAMS languages scored TSE, EW and MW over each language's lexicon (docs/multilingual.md)."""

    def __init__(self, layout: Layout, model: ModelsPlan) -> None:
        from verbeval.multilingual.clams import CONSTRUCTIONS, source_name

        self.layout = layout
        self.model = model
        ml = self.config = layout.config["multilingual"]
        self.res = f"{layout.results_dir}/multilingual"
        self.languages: list[str] = list(ml["languages"])
        chosen = ml["models"]
        if chosen is not None:
            unknown = [m for m in chosen if m not in layout.models]
            if unknown:
                raise layout.error(["multilingual", "models"], f"multilingual.models: {unknown} are not among `models`")
        self.models: list[str] = (list(layout.models) if chosen is None else list(chosen)) if self.languages else []
        self.sources = [source_name(lang, c) for lang in self.languages for c in CONSTRUCTIONS]
        self.hspell: str | None = ml["hspell_deb"]  # None: the job downloads it into the cache
        needed = list(self.sources)
        missing = [s for s in needed if s not in layout.manifest]
        if missing:
            raise layout.error(["multilingual", "languages"], f"the manifest lists no source {', '.join(missing)}")
        #: the manifest sources the study reads
        self.read_sources = needed
        #: English CLAMS against Marvin & Linzen: the models the agreement study scores on the M&L groups too
        self.ml_groups = [g["id"] for g in layout.groups if any(s.startswith("ml_") for s in g["sources"])]
        self.ml_models = list(self.models) if "en" in self.languages and self.ml_groups else []
        self.rules = SimpleNamespace(**self._rules())
        #: rule all's targets
        self.outputs: list[str] = [] if not self.languages else self._outputs()

    def lexicon(self, lang: str) -> str:
        return f"{self.res}/lexicons/{lang}.parquet"

    def model_files(self, name: str) -> dict[str, str]:
        d = f"{self.res}/models/{name}"
        return {"summary": f"{d}/summary_all.csv", "eligible": f"{d}/eligible.csv", "contexts": f"{d}/contexts.parquet"}

    def table_files(self) -> dict[str, Any]:
        r, formats = self.res, self.layout.config["agreement"]["figures"]["formats"]
        figures = [
            f"{r}/{lang}/{stem}.{ext}" for lang in self.languages for stem in FIGURES for ext in ("csv", *formats)
        ]
        return {
            "tables": [f"{r}/{lang}/table2.{ext}" for lang in self.languages for ext in ("csv", "md", "html")],
            "figures": figures,
            "languages": f"{r}/languages.md",
            "eligible": [f"{r}/eligible.csv", f"{r}/eligible.md"],
            "comparisons": [f"{r}/comparisons.md", f"{r}/comparisons.csv"],
            "summary": f"{r}/summary_all.csv",
        }

    def _outputs(self) -> list[str]:
        from verbeval.workflow.params import output_files

        return output_files(self.table_files())

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.multilingual.steps import CLAMS_SCORE, CLAMS_TABLE, CLAMS_TEMPLATES
        from verbeval.workflow.model_steps import model_settings
        from verbeval.workflow.models import random_init_option
        from verbeval.workflow.params import Untracked

        layout, model, config = self.layout, self.model, self.layout.config
        logs = f"{layout.logs}/multilingual"
        lexicons = quoted([f"--lexicon={lang}={self.lexicon(lang)}" for lang in self.languages])
        agreement = layout.agreement_dir

        def lexicon_inputs(wc: Any) -> dict[str, str]:
            if wc.lang == "he" and self.hspell:
                return {"hspell": self.hspell}
            if wc.lang == "en":
                return {"english": f"{agreement}/lexicon.parquet"}
            return {}

        ml_tse = [f"{agreement}/{m}/{g}/tse.parquet" for m in self.ml_models for g in self.ml_groups]
        table_inputs: dict[str, Any] = {
            "summaries": [self.model_files(m)["summary"] for m in self.models],
            "eligible": [self.model_files(m)["eligible"] for m in self.models],
            "contexts": [self.model_files(m)["contexts"] for m in self.models],
        }
        ml_options = ""
        if self.ml_models:
            table_inputs.update(ml_summary=f"{agreement}/summary_all.csv", ml_templates=f"{agreement}/templates.parquet",
                                ml_tse=ml_tse)  # fmt: skip
            ml_options = quoted(
                [f"--ml-summary={agreement}/summary_all.csv", f"--ml-templates={agreement}/templates.parquet"]
                + [f"--ml-tse={m}={agreement}/{m}/{g}/tse.parquet" for m in self.ml_models for g in self.ml_groups]
            )
        formats = config["agreement"]["figures"]["formats"]
        return {
            "clams_lexicon": RuleRecord(
                lexicon_inputs,
                {"lexicon": f"{self.res}/lexicons/{{lang}}.parquet", "counts": f"{self.res}/lexicons/{{lang}}.json"},
                f"{logs}/lexicon_{{lang}}.log",
                {"inputs": lambda wc: quoted([f"--{k}={v}" for k, v in lexicon_inputs(wc).items()])},
                {"lang": alternatives(self.languages)},
            ),
            "clams_templates": RuleRecord(
                {
                    "sources": [layout.raw_path(s) for s in self.sources],
                    "lexicons": [self.lexicon(x) for x in self.languages],
                },
                {"table": f"{self.res}/templates.parquet", "cells": f"{self.res}/cells.csv"},
                f"{logs}/templates.log",
                {
                    "inputs": Untracked(quoted([f"--input={s}={layout.raw_path(s)}" for s in self.sources])),
                    "lexicons": Untracked(lexicons),
                    "settings": shlex.join(CLAMS_TEMPLATES.argv(config)),
                },
            ),
            "clams_score": RuleRecord(
                {
                    "templates": f"{self.res}/templates.parquet",
                    "lexicons": [self.lexicon(x) for x in self.languages],
                    "model": lambda wc: model.dir_input(layout.models[wc.mlmodel]["id"]),
                },
                self.model_files("{mlmodel}"),
                f"{logs}/{{mlmodel}}/score.log",
                {
                    "model": lambda wc: layout.models[wc.mlmodel]["id"],
                    "source": lambda wc: shlex.join(model.source(wc.mlmodel).options()),
                    "model_settings": lambda wc, threads: shlex.join(model_settings(layout, wc.mlmodel, threads)),
                    "random_init": lambda wc: random_init_option(layout.models[wc.mlmodel]["random_init"]),
                    "lexicons": Untracked(lexicons),
                    "settings": shlex.join(CLAMS_SCORE.argv(config)),
                    "version": lambda wc: model.version(wc.mlmodel),
                    "out_dir": lambda wc, output: os.path.dirname(output.summary),  # the model's folder
                },
                {"mlmodel": alternatives(self.models)},
            ),
            "clams_table": RuleRecord(
                table_inputs,
                self.table_files(),
                f"{logs}/table.log",
                {
                    "settings": shlex.join(CLAMS_TABLE.argv(config)),
                    "ml": Untracked(ml_options),
                    "formats": shlex.quote("--formats=" + ",".join(formats)),
                    "out_dir": lambda wc, output: os.path.dirname(output.languages),  # results/multilingual
                },
            ),
        }

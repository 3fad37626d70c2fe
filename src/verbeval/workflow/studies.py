"""The plan of the two studies beside agreement: SimVerb-3500 and verb veridicality (their models,
split files, paths, outputs and command options). Built by :class:`verbeval.workflow.plan.Plan`.

Each rule's files, params and log are one record (``PLAN.simverb.rules``, ``PLAN.veridicality.rules``),
its named outputs patterns (``{svmodel}``, ``{vmodel}``) of the same files that ``outputs`` (rule all)
lists for every model.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any

from verbeval.core.errors import VerbevalError
from verbeval.core.manifest import mirror_location
from verbeval.core.model_ids import ModelRef
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import model_plan_version
from verbeval.workflow.layout import Layout
from verbeval.workflow.models import ModelsPlan, random_init_option
from verbeval.workflow.params import RuleRecord, alternatives, quoted


def _flat(files: Iterable[str | list[str]]) -> list[str]:
    """Files and lists of files (a figure's formats) as one list, in order."""
    return [f for v in files for f in ([v] if isinstance(v, str) else v)]


def _simverb_files(res: str, m: str, formats: Sequence[str]) -> dict[str, Any]:
    """SimVerb model ``m``'s files by name (``m`` ``{svmodel}``: the rules' patterns), in the order rule all
    asks for them; a figure is a list, one file per format of ``simverb.formats``."""
    d = f"{res}/{m}"
    return {
        "sims": f"{d}/similarities.parquet",
        "verbs": f"{d}/verbs.csv",
        "csv": f"{d}/table.csv",
        "md": f"{d}/table.md",
        "tex": f"{d}/table.tex",
        "page": f"{d}/simverb_{m}.html",
        "layers_csv": f"{d}/simverb_layers.csv",
        "metrics": f"{d}/metrics.json",
        "layers": [f"{d}/layers.{ext}" for ext in formats],
        "scatter": [f"{d}/scatter.{ext}" for ext in formats],
        "joined": f"{d}/agreement_join.csv",
        "summary": f"{d}/agreement_join_summary.csv",
    }


def _veridicality_files(res: str, m: str, formats: Sequence[str]) -> tuple[dict[str, Any], ...]:
    """Veridicality model ``m``'s files by name (``m`` ``{vmodel}``: the rules' patterns), each in rule
    all's order: every model's (the figure a list, one file per format of ``veridicality.formats``), a
    real NLI model's counterfactual ones, and the manipulated pairs' (one set for every model)."""
    d, cf = f"{res}/{m}", f"{res}/counterfactuals"
    every = {
        "predictions": f"{d}/predictions.parquet",
        "csv": f"{d}/signatures.csv",
        "md": f"{d}/signatures.md",
        "tex": f"{d}/signatures.tex",
        "page": f"{d}/signatures_{m}.html",
        "data": f"{d}/veridicality_scatter.csv",
        "figure": [f"{d}/scatter.{ext}" for ext in formats],
    }
    real = {
        "counterfactuals": f"{d}/counterfactual_predictions.parquet",
        **{f"t{t}_{ext}": f"{d}/kl_table{t}.{ext}" for t in (7, 8) for ext in ("csv", "md", "tex")},
        **{f"t{t}": f"{d}/kl_table{t}_{m}.html" for t in (7, 8)},
    }
    pairs = {
        "pairs": f"{cf}/pairs.parquet",
        "unhandled": f"{cf}/unhandled.csv",
        "coverage": f"{cf}/coverage.csv",
        "unhandled_page": f"{cf}/unhandled.html",
        "coverage_page": f"{cf}/coverage.html",
    }
    return every, real, pairs


def _check_source(layout: Layout, study: str) -> str:
    """The raw copy of study ``study``'s data source (``<study>.source``), which the manifest must list
    and the fetch jobs' mirror hold."""
    source = layout.config[study]["source"]
    if source not in layout.manifest:
        raise layout.error(
            [study, "source"], f"{study}.source: {layout.config['manifest']} has no source named {source!r}"
        )
    layout.check_mirror_has(source)
    return layout.raw_path(source)


def _simverb_models(layout: Layout, sv: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {id, source, join, random_init}. An id listed in simverb.models is joined
    with the agreement model of that id: when several share it (the revisions of a swept hub
    model), the first one without a revision, else the first one; null: every agreement model."""
    by_id: dict[str, dict[str, Any]] = {}
    for m in layout.models.values():
        if m["id"] not in by_id or (by_id[m["id"]]["revision"] and not m["revision"]):
            by_id[m["id"]] = m
    sources = (
        [(i, by_id.get(i)) for i in sv["models"]]
        if sv["models"] is not None
        else [(m["id"], m) for m in layout.models.values()]
    )
    models: dict[str, dict[str, Any]] = {}
    for model_id, m in sources:
        name = m["name"] if m else ModelRef(model_id).name
        if name in models:
            raise layout.error(["simverb", "models"], f"simverb.models: two models named {name!r}")
        models[name] = {
            "id": model_id,
            "source": ModelSource.from_entry(m) if m else ModelSource(model_id),
            "join": bool(m) and sv["agreement_join"],
            # an agreement model's random_init applies here too; else the folder's marker
            "random_init": m["random_init"] if m else None,
        }
    return models


class SimverbPlan:
    """SimVerb-3500 (``simverb:``): which models, which official splits, which job scores each model."""

    #: each rule's named outputs (names of :func:`_simverb_files`)
    RULE_FILES: dict[str, tuple[str, ...]] = {
        "simverb_score": ("sims", "verbs"),
        "simverb_table": ("csv", "md", "tex", "layers_csv", "metrics", "layers", "scatter"),
        "simverb_page": ("page",),
        "simverb_join": ("joined", "summary"),
    }

    def __init__(self, layout: Layout, model: ModelsPlan) -> None:
        from verbeval.simverb.data import score_bins

        self.layout = layout
        self.model = model
        sv = self.config = layout.config["simverb"]
        self.res = f"{layout.results_dir}/simverb"
        self.data = _check_source(layout, "simverb")
        try:
            score_bins(sv["bins"])
        except VerbevalError as exc:
            raise layout.error(["simverb", "bins"], f"simverb.bins: {exc}") from None
        # an official split file is used when the manifest lists it and, with a mirror (data_mirror, else
        # $VERBEVAL_DATA_MIRROR: the fetch jobs' own), the mirror has it
        mirror = layout.fetch_mirror
        self.splits = {
            name: src
            for name, src in sorted(sv["split_sources"].items())
            if src in layout.manifest and (not mirror or mirror_location(layout.manifest[src], mirror).exists())
        }
        self.split_files = [layout.raw_path(src) for src in self.splits.values()]
        self.models = _simverb_models(layout, sv)
        # SimVerb models scored in their agreement model's own job (rule infer): same id and revision,
        # float32 weights as simverb-score loads; the others keep their own SimVerb job
        self.in_infer = [
            n
            for n, m in self.models.items()
            if n in layout.models
            and layout.models[n]["id"] == m["id"]
            and layout.models[n]["revision"] == m["source"].revision
            and layout.models[n]["dtype"] == "float32"
        ]
        self.alone = [n for n in self.models if n not in self.in_infer]
        self.joined = [n for n, m in self.models.items() if m["join"]]
        #: each rule's record, by rule name (``PLAN.simverb.rules.simverb_score``)
        self.rules = SimpleNamespace(**self._rules())
        #: every model's files (rule all): those of its rules, simverb_join's when it is joined
        self.outputs = [
            f
            for name, m in self.models.items()
            for k, v in _simverb_files(self.res, name, sv["formats"]).items()
            if any(k in files for r, files in self.RULE_FILES.items() if r != "simverb_join" or m["join"])
            for f in _flat([v])
        ]

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.simverb.steps import SIMVERB_SCORE, SIMVERB_TABLE

        layout, config, models, model = self.layout, self.layout.config, self.models, self.model
        p = _simverb_files(self.res, "{svmodel}", self.config["formats"])
        out = {rule: {k: p[k] for k in names} for rule, names in self.RULE_FILES.items()}
        logs = f"{layout.logs}/simverb/{{svmodel}}"
        every = {"svmodel": alternatives(list(models))}
        # the model's name when it is randomly initialised (named in the report captions), else ''
        random_models = {
            "random_models": lambda wc: (
                wc.svmodel if model.random_init(models[wc.svmodel]["id"], models[wc.svmodel]["random_init"]) else ""
            )
        }

        def version(name: str) -> str:  # its GGUF file never was part of it
            source = models[name]["source"]
            return model_plan_version(ModelSource(source.id, source.revision))

        frames = [w for frame in self.config["frames"] for w in ("--frame", frame)]
        return {
            "simverb_score": RuleRecord(
                {
                    "data": self.data,
                    "splits": self.split_files,
                    "model": lambda wc: model.dir_input(models[wc.svmodel]["id"]),
                },
                out["simverb_score"],
                f"{logs}/score.log",
                {
                    "model": lambda wc: quoted([*models[wc.svmodel]["source"].options(model=True), *frames]),
                    "random_init": lambda wc: random_init_option(models[wc.svmodel]["random_init"]),
                    # --split NAME=PATH of each official split file
                    "splits": lambda wc, input: " ".join(
                        f"--split {shlex.quote(name + '=' + path)}" for name, path in zip(self.splits, input.splits)
                    ),
                    "version": lambda wc: version(wc.svmodel),
                    "settings": shlex.join(SIMVERB_SCORE.argv(config)),
                    "threads": config["inference"]["threads"],  # a change reruns the job (the command uses {threads})
                },
                {"svmodel": alternatives(self.alone)},  # the others: rule infer (models.smk)
            ),
            "simverb_table": RuleRecord(
                out["simverb_score"],
                out["simverb_table"],
                f"{logs}/table.log",
                {"settings": shlex.join(SIMVERB_TABLE.argv(config)), **random_models},
                every,
            ),
            "simverb_page": RuleRecord(p["csv"], out["simverb_page"], f"{logs}/page.log", random_models, every),
            "simverb_join": RuleRecord(
                # the agreement model's lemma statistics: rule lemma_stats's output
                {"sims": p["sims"], "stats": f"{layout.agreement_dir}/{{svmodel}}/lemma_stats.csv"},
                out["simverb_join"],
                f"{logs}/join.log",
                constraints={"svmodel": alternatives(self.joined)},
            ),
        }


class VeridicalityPlan:
    """Verb veridicality (``veridicality:``): the released pseudo-model and real NLI models."""

    #: each rule's named outputs (names of :func:`_veridicality_files`); veridicality_predict's
    #: ``counterfactuals`` when they are on
    RULE_FILES: dict[str, tuple[str, ...]] = {
        "veridicality_released": ("predictions",),
        "veridicality_predict": ("predictions", "counterfactuals"),
        "veridicality_table": ("csv", "md", "tex", "data", "figure"),
        "veridicality_page": ("page",),
        "veridicality_counterfactuals": ("pairs", "unhandled", "coverage"),
        "veridicality_counterfactual_pages": ("unhandled_page", "coverage_page"),
        "veridicality_kl": ("t7_csv", "t7_md", "t7_tex", "t8_csv", "t8_md", "t8_tex"),
        "veridicality_kl_pages": ("t7", "t8"),
    }

    def __init__(self, layout: Layout, model: ModelsPlan) -> None:
        from verbeval.veridicality.data import PSEUDO_MODEL

        self.layout = layout
        self.model = model
        ver = self.config = layout.config["veridicality"]
        self.cf: dict[str, Any] = ver["counterfactual"]
        self.res = f"{layout.results_dir}/veridicality"
        self.models = {(m if m == PSEUDO_MODEL else ModelRef(m).name): m for m in ver["models"]}
        # the counterfactual manipulations need a model that scores new sentences: not the pseudo-model
        self.real = {name: m for name, m in self.models.items() if m != PSEUDO_MODEL}
        self.released = [name for name in self.models if name not in self.real]
        self.data = _check_source(layout, "veridicality")
        self.counterfactuals_on = bool(self.cf["enabled"] and self.real)
        #: each rule's record, by rule name (``PLAN.veridicality.rules.veridicality_kl``)
        self.rules = SimpleNamespace(**self._rules())
        #: every model's files (rule all); with the counterfactuals on, theirs and each real model's
        files = {m: _veridicality_files(self.res, m, ver["formats"]) for m in self.models}
        self.outputs = _flat(f for m in self.models for f in files[m][0].values())
        if self.counterfactuals_on:
            self.outputs += _flat(next(iter(files.values()))[2].values())
            self.outputs += _flat(f for m in self.real for f in files[m][1].values())

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.veridicality.steps import VERIDICALITY_COUNTERFACTUALS, VERIDICALITY_PREDICT

        config, real_models, model = self.layout.config, self.real, self.model
        p = {k: v for d in _veridicality_files(self.res, "{vmodel}", self.config["formats"]) for k, v in d.items()}
        out = {rule: {k: p[k] for k in names} for rule, names in self.RULE_FILES.items()}
        if not self.counterfactuals_on:
            del out["veridicality_predict"]["counterfactuals"]
        logs = f"{self.layout.logs}/veridicality"
        every, real = {"vmodel": alternatives(list(self.models))}, {"vmodel": alternatives(list(real_models))}
        # the model's name when it is randomly initialised (named in the report captions), else ''
        random_models = {
            "random_models": lambda wc: (
                wc.vmodel if wc.vmodel in real_models and model.random_init(real_models[wc.vmodel]) else ""
            )
        }
        return {
            # the released probabilities of the pseudo-model: no model runs, so no GPU (a rule of its own)
            "veridicality_released": RuleRecord(
                {"data": self.data},
                out["veridicality_released"],
                f"{logs}/{{vmodel}}/predict.log",
                constraints={"vmodel": alternatives(self.released)},
            ),
            "veridicality_predict": RuleRecord(
                {
                    "data": self.data,
                    "model": lambda wc: model.dir_input(real_models[wc.vmodel]),
                    **({"pairs": p["pairs"]} if self.counterfactuals_on else {}),
                },
                out["veridicality_predict"],
                f"{logs}/{{vmodel}}/predict.log",
                {
                    "model": lambda wc: real_models[wc.vmodel],
                    "settings": shlex.join(VERIDICALITY_PREDICT.argv(config)),
                    # the counterfactual branch of the prediction job, when it has one (the job's named files)
                    "counterfactuals": lambda wc, input, output: (
                        f"--counterfactual-pairs {shlex.quote(str(input.pairs))} "
                        f"--counterfactual-out {shlex.quote(str(output.counterfactuals))}"
                        if self.counterfactuals_on
                        else ""
                    ),
                },
                real,
            ),
            "veridicality_table": RuleRecord(
                p["predictions"], out["veridicality_table"], f"{logs}/{{vmodel}}/table.log", random_models, every
            ),
            "veridicality_counterfactuals": RuleRecord(
                self.data,
                out["veridicality_counterfactuals"],
                f"{logs}/counterfactuals.log",
                {"settings": shlex.join(VERIDICALITY_COUNTERFACTUALS.argv(config))},
            ),
            "veridicality_kl": RuleRecord(
                {"predictions": p["predictions"], "counterfactuals": p["counterfactuals"]},
                out["veridicality_kl"],
                f"{logs}/{{vmodel}}/kl.log",
                constraints=real,
            ),
            "veridicality_page": RuleRecord(
                p["csv"], out["veridicality_page"], f"{logs}/{{vmodel}}/page.log", random_models, every
            ),
            "veridicality_kl_pages": RuleRecord(
                {"t7": p["t7_csv"], "t8": p["t8_csv"]},
                out["veridicality_kl_pages"],
                f"{logs}/{{vmodel}}/kl_pages.log",
                constraints=real,
            ),
            "veridicality_counterfactual_pages": RuleRecord(
                {"unhandled": p["unhandled"], "coverage": p["coverage"]},
                out["veridicality_counterfactual_pages"],
                f"{logs}/counterfactual_pages.log",
            ),
        }

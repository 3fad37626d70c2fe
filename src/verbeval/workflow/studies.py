"""The plan of the two studies beside agreement: SimVerb-3500 and verb veridicality (their models,
split files, paths, outputs and command options). Built by :class:`verbeval.workflow.plan.Plan`.

Each rule's outputs are written once, here: :meth:`SimverbPlan.rule_outputs` and
:meth:`VeridicalityPlan.rule_outputs` give a rule's named outputs as patterns (``{svmodel}``,
``{vmodel}``), which the rule's ``output:`` declares, and ``outputs()`` (rule all) expands the same
files over the models.
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
from verbeval.core.models import model_fingerprint
from verbeval.workflow.layout import Layout
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.params import RuleRecord, alternatives


def _flat(files: Iterable[str | list[str]]) -> list[str]:
    """Files and lists of files (a figure's formats) as one list, in order."""
    return [f for v in files for f in ([v] if isinstance(v, str) else v)]


class SimverbPlan:
    """SimVerb-3500 (``simverb:``): which models, which official splits, which job scores each model."""

    #: each rule's named outputs (names of :meth:`files`)
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
        if sv["source"] not in layout.manifest:
            raise layout.error(
                ["simverb", "source"],
                f"simverb.source: {layout.config['manifest']} has no source named {sv['source']!r}",
            )
        layout.check_mirror_has(sv["source"])
        try:
            score_bins(sv["bins"])
        except VerbevalError as exc:
            raise layout.error(["simverb", "bins"], f"simverb.bins: {exc}") from None
        self.splits = {name: src for name, src in sorted(sv["split_sources"].items()) if self._split_available(src)}
        self.models = self._models()
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

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.simverb.steps import SIMVERB_SCORE, SIMVERB_TABLE

        config, p, out = self.layout.config, self.pattern, self.rule_outputs
        logs = f"{self.layout.logs}/simverb/{{svmodel}}"
        every = {"svmodel": alternatives(list(self.models))}
        random_models = {"random_models": lambda wc: self.random_models(wc.svmodel)}  # named in the report captions
        return {
            "simverb_score": RuleRecord(
                {"data": self.data(), "splits": self.split_files(), "model": lambda wc: self.local_model(wc.svmodel)},
                out("simverb_score"),
                f"{logs}/score.log",
                {
                    "model": lambda wc: self.model_args(wc.svmodel),
                    "random_init": lambda wc: self.random_init_option(wc.svmodel),
                    "splits": lambda wc, input: self.split_args(list(input.splits)),
                    "version": lambda wc: self.version(wc.svmodel),
                    "settings": shlex.join(SIMVERB_SCORE.argv(config)),
                    "threads": config["inference"]["threads"],  # a change reruns the job (the command uses {threads})
                },
                {"svmodel": alternatives(self.alone)},  # the others: rule infer (models.smk)
            ),
            "simverb_table": RuleRecord(
                out("simverb_score"),
                out("simverb_table"),
                f"{logs}/table.log",
                {"settings": shlex.join(SIMVERB_TABLE.argv(config)), **random_models},
                every,
            ),
            "simverb_page": RuleRecord(p("csv"), out("simverb_page"), f"{logs}/page.log", random_models, every),
            "simverb_join": RuleRecord(
                # the agreement model's lemma statistics: rule lemma_stats's output
                {"sims": p("sims"), "stats": f"{self.layout.agreement_dir}/{{svmodel}}/lemma_stats.csv"},
                out("simverb_join"),
                f"{logs}/join.log",
                constraints={"svmodel": alternatives(self.joined)},
            ),
        }

    def _split_available(self, source: str) -> bool:
        """An official split file is used when the manifest lists it and, with a mirror (data_mirror, else
        $VERBEVAL_DATA_MIRROR: the fetch jobs' own), the mirror has it."""
        layout = self.layout
        if source not in layout.manifest:
            return False
        mirror = layout.fetch_mirror
        return not mirror or mirror_location(layout.manifest[source], mirror).exists()

    def _models(self) -> dict[str, dict[str, Any]]:
        """name -> {id, source, join, random_init}. An id listed in simverb.models is joined
        with the agreement model of that id: when several share it (the revisions of a swept hub
        model), the first one without a revision, else the first one; null: every agreement model."""
        layout, sv = self.layout, self.config
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

    def data(self) -> str:
        return self.layout.raw_path(self.config["source"])

    def split_files(self) -> list[str]:
        return [self.layout.raw_path(src) for src in self.splits.values()]

    def random_init_option(self, name: str) -> str:
        """``--random-init`` of simverb-score: the agreement model's random_init, else auto."""
        declared = self.models[name]["random_init"]
        return "auto" if declared is None else str(declared).lower()

    def random_models(self, name: str) -> str:
        """The model's name when it is randomly initialised (for the report captions), else ''."""
        m = self.models[name]
        return name if self.model.random_init(m["id"], m["random_init"]) else ""

    def split_args(self, split_files: Sequence[str]) -> str:
        """--split NAME=PATH options of `verbeval simverb-score`."""
        return " ".join(f"--split {shlex.quote(name + '=' + path)}" for name, path in zip(self.splits, split_files))

    def model_args(self, name: str) -> str:
        m = self.models[name]
        args = m["source"].options(model=True)
        for frame in self.config["frames"]:
            args += ["--frame", frame]
        return " ".join(shlex.quote(a) for a in args)

    def version(self, name: str) -> str:
        source = self.models[name]["source"]
        return model_fingerprint(ModelSource(source.id, source.revision))  # its GGUF file never was part of it

    def local_model(self, name: str) -> list[str]:
        return self.model.dir_input(self.models[name]["id"])

    def files(self, m: str) -> dict[str, Any]:
        """Model ``m``'s files by name (``m`` ``{svmodel}``: the rules' patterns), in the order rule all
        asks for them; a figure is a list, one file per format of ``simverb.formats``."""
        d = f"{self.res}/{m}"
        return {
            "sims": f"{d}/similarities.parquet",
            "verbs": f"{d}/verbs.csv",
            "csv": f"{d}/table.csv",
            "md": f"{d}/table.md",
            "tex": f"{d}/table.tex",
            "page": f"{d}/simverb_{m}.html",
            "layers_csv": f"{d}/simverb_layers.csv",
            "metrics": f"{d}/metrics.json",
            "layers": [f"{d}/layers.{ext}" for ext in self.config["formats"]],
            "scatter": [f"{d}/scatter.{ext}" for ext in self.config["formats"]],
            "joined": f"{d}/agreement_join.csv",
            "summary": f"{d}/agreement_join_summary.csv",
        }

    def pattern(self, name: str) -> Any:
        """File ``name`` of :meth:`files` as a pattern with ``{svmodel}``."""
        return self.files("{svmodel}")[name]

    def rule_outputs(self, rule: str) -> dict[str, Any]:
        """The named outputs of ``rule`` (:data:`RULE_FILES`), patterns with ``{svmodel}``."""
        return {k: self.pattern(k) for k in self.RULE_FILES[rule]}

    def outputs(self) -> list[str]:
        """Every model's files (rule all): those of its rules, simverb_join's when it is joined."""
        out = []
        for name, m in self.models.items():
            rules = [r for r in self.RULE_FILES if r != "simverb_join" or m["join"]]
            kept = {k for r in rules for k in self.RULE_FILES[r]}
            out += _flat(v for k, v in self.files(name).items() if k in kept)
        return out


class VeridicalityPlan:
    """Verb veridicality (``veridicality:``): the released pseudo-model and real NLI models."""

    #: each rule's named outputs (names of :meth:`model_files`, :meth:`real_files` and
    #: :meth:`counterfactual_files`); veridicality_predict's ``counterfactuals`` when they are on
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
        if ver["source"] not in layout.manifest:
            raise layout.error(
                ["veridicality", "source"],
                f"veridicality.source: {layout.config['manifest']} has no source named {ver['source']!r}",
            )
        layout.check_mirror_has(ver["source"])
        self.counterfactuals_on = bool(self.cf["enabled"] and self.real)
        #: each rule's record, by rule name (``PLAN.veridicality.rules.veridicality_kl``)
        self.rules = SimpleNamespace(**self._rules())

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.veridicality.steps import VERIDICALITY_COUNTERFACTUALS, VERIDICALITY_PREDICT

        config, p = self.layout.config, self.pattern
        logs = f"{self.layout.logs}/veridicality"
        every, real = {"vmodel": alternatives(list(self.models))}, {"vmodel": alternatives(list(self.real))}
        random_models = {"random_models": lambda wc: self.random_models(wc.vmodel)}  # named in the report captions
        return {
            # the released probabilities of the pseudo-model: no model runs, so no GPU (a rule of its own)
            "veridicality_released": RuleRecord(
                {"data": self.data()},
                self.rule_outputs("veridicality_released"),
                f"{logs}/{{vmodel}}/predict.log",
                constraints={"vmodel": alternatives(self.released)},
            ),
            "veridicality_predict": RuleRecord(
                {
                    "data": self.data(),
                    "model": lambda wc: self.local_model(wc.vmodel),
                    **({"pairs": p("pairs")} if self.counterfactuals_on else {}),
                },
                self.rule_outputs("veridicality_predict"),
                f"{logs}/{{vmodel}}/predict.log",
                {
                    "model": lambda wc: self.real[wc.vmodel],
                    "settings": shlex.join(VERIDICALITY_PREDICT.argv(config)),
                    "counterfactuals": lambda wc, input, output: self.counterfactual_options(input, output),
                },
                real,
            ),
            "veridicality_table": RuleRecord(
                p("predictions"),
                self.rule_outputs("veridicality_table"),
                f"{logs}/{{vmodel}}/table.log",
                random_models,
                every,
            ),
            "veridicality_counterfactuals": RuleRecord(
                self.data(),
                self.rule_outputs("veridicality_counterfactuals"),
                f"{logs}/counterfactuals.log",
                {"settings": shlex.join(VERIDICALITY_COUNTERFACTUALS.argv(config))},
            ),
            "veridicality_kl": RuleRecord(
                {"predictions": p("predictions"), "counterfactuals": p("counterfactuals")},
                self.rule_outputs("veridicality_kl"),
                f"{logs}/{{vmodel}}/kl.log",
                constraints=real,
            ),
            "veridicality_page": RuleRecord(
                p("csv"), self.rule_outputs("veridicality_page"), f"{logs}/{{vmodel}}/page.log", random_models, every
            ),
            "veridicality_kl_pages": RuleRecord(
                {"t7": p("t7_csv"), "t8": p("t8_csv")},
                self.rule_outputs("veridicality_kl_pages"),
                f"{logs}/{{vmodel}}/kl_pages.log",
                constraints=real,
            ),
            "veridicality_counterfactual_pages": RuleRecord(
                {"unhandled": p("unhandled"), "coverage": p("coverage")},
                self.rule_outputs("veridicality_counterfactual_pages"),
                f"{logs}/counterfactual_pages.log",
            ),
        }

    def data(self) -> str:
        return self.layout.raw_path(self.config["source"])

    def random_models(self, name: str) -> str:
        """The model's name when it is randomly initialised (for the report captions), else ''."""
        return name if name in self.real and self.model.random_init(self.real[name]) else ""

    def local_model(self, name: str) -> list[str]:
        return self.model.dir_input(self.real[name])

    def counterfactual_options(self, inputs: Any, outputs: Any) -> str:
        """Options of the counterfactual branch of the prediction job (``inputs.pairs`` and
        ``outputs.counterfactuals``: the job's named files), when it has one."""
        if not self.counterfactuals_on:
            return ""
        return (
            f"--counterfactual-pairs {shlex.quote(str(inputs.pairs))} "
            f"--counterfactual-out {shlex.quote(str(outputs.counterfactuals))}"
        )

    def model_files(self, m: str) -> dict[str, Any]:
        """Every model's files by name (``m`` ``{vmodel}``: the rules' patterns), in the order rule all
        asks for them; the figure a list, one file per format of ``veridicality.formats``."""
        d = f"{self.res}/{m}"
        return {
            "predictions": f"{d}/predictions.parquet",
            "csv": f"{d}/signatures.csv",
            "md": f"{d}/signatures.md",
            "tex": f"{d}/signatures.tex",
            "page": f"{d}/signatures_{m}.html",
            "data": f"{d}/veridicality_scatter.csv",
            "figure": [f"{d}/scatter.{ext}" for ext in self.config["formats"]],
        }

    def real_files(self, m: str) -> dict[str, Any]:
        """A real NLI model's counterfactual files by name (``m`` ``{vmodel}``: patterns), in rule all's order."""
        d = f"{self.res}/{m}"
        return {
            "counterfactuals": f"{d}/counterfactual_predictions.parquet",
            **{f"t{t}_{ext}": f"{d}/kl_table{t}.{ext}" for t in (7, 8) for ext in ("csv", "md", "tex")},
            **{f"t{t}": f"{d}/kl_table{t}_{m}.html" for t in (7, 8)},
        }

    def counterfactual_files(self) -> dict[str, str]:
        """The manipulated pairs' files (one set for every model) by name, in rule all's order."""
        d = f"{self.res}/counterfactuals"
        return {
            "pairs": f"{d}/pairs.parquet",
            "unhandled": f"{d}/unhandled.csv",
            "coverage": f"{d}/coverage.csv",
            "unhandled_page": f"{d}/unhandled.html",
            "coverage_page": f"{d}/coverage.html",
        }

    def pattern(self, name: str) -> Any:
        """File ``name`` (of :meth:`model_files`, :meth:`real_files`, :meth:`counterfactual_files`), a
        model's as a pattern with ``{vmodel}``."""
        m = "{vmodel}"
        return {**self.model_files(m), **self.real_files(m), **self.counterfactual_files()}[name]

    def rule_outputs(self, rule: str) -> dict[str, Any]:
        """The named outputs of ``rule`` (:data:`RULE_FILES`), patterns with ``{vmodel}``."""
        names = self.RULE_FILES[rule]
        if rule == "veridicality_predict" and not self.counterfactuals_on:
            names = tuple(n for n in names if n != "counterfactuals")
        return {k: self.pattern(k) for k in names}

    def outputs(self) -> list[str]:
        """Every model's files (rule all); with the counterfactuals on, theirs and each real model's."""
        out = _flat(f for m in self.models for f in self.model_files(m).values())
        if self.counterfactuals_on:
            out += _flat(self.counterfactual_files().values())
            out += _flat(f for m in self.real for f in self.real_files(m).values())
        return out

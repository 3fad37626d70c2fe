"""The plan of the agreement models' sources and options: what each model's jobs are told about it
(revision, GGUF file, pin, device map, BOS, random init, version), which local folders are their
inputs, and the models the workflow builds itself (``tiny_models``: rule tiny_model; pip models:
rule pip_model; the checkpoint folders of ``toy_models``: rule train_toy, planned by
:mod:`verbeval.workflow.acquisition`). Built by :class:`verbeval.workflow.plan.Plan` as ``PLAN.model`` (``PLAN.models``
holds the entries by name); ``workflow/rules/agreement.smk``, ``lexicon_modes.smk``,
``tiny_models.smk`` and ``pip_models.smk`` bind their rules to it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from verbeval.core.model_entries import normalise_model_path, pip_models, tiny_model_specs
from verbeval.core.model_ids import ModelRef
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import model_fingerprint
from verbeval.core.provenance import resolve_random_init
from verbeval.workflow.acquisition import AcquisitionPlan
from verbeval.workflow.layout import Layout


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

    def source_options(self, name: str) -> str:
        """``--revision``, ``--gguf-file`` and ``--sha256`` (a pip model's pin) of a model (those it has):
        :meth:`verbeval.core.model_sources.source.ModelSource.options`."""
        return shlex.join(self.source(name).options())

    def random_init_option(self, name: str) -> str:
        """``--random-init`` of the inference job: the config's random_init, else auto (the folder's marker)."""
        declared = self.layout.models[name]["random_init"]
        return "auto" if declared is None else str(declared).lower()

    def version(self, name: str) -> str:
        """Changes when the model's files (local) or resolved commit (hub) change, so that
        Snakemake's params trigger reruns its eligibility and inference jobs."""
        m = self.layout.models[name]
        built = self.tiny.get(normalise_model_path(m["id"]))
        if built is not None:  # built by the workflow (tiny_model, deterministic): its recipe, not its files
            return f"tiny_model {json.dumps(built, sort_keys=True)}"
        toy = self.acquisition.toy_version(m["id"])
        if toy is not None:  # trained by the workflow (train_toy, deterministic): its recipe and step
            return toy
        if m["pip"] is not None:  # assembled by rule pip_model and checked against this sha256
            return f"gguf-sha256:{m['pip']['sha256']}"
        if name not in self._fingerprints:
            self._fingerprints[name] = model_fingerprint(self.source(name))
        return self._fingerprints[name]

    def dir_input(self, model_id: str) -> list[str]:
        """A local model directory is an input (a DVC dependency too; the output of rule tiny_model
        or pip_model for a model the workflow assembles; for a toy model's checkpoint folder, the
        output of rule train_toy: the toy model's folder); a hub model is not."""
        path = normalise_model_path(model_id)
        toy = self.acquisition.toy_dir(model_id)
        if toy is not None:
            return [toy]
        return [path] if ModelRef(model_id).is_dir or path in self.tiny or path in self.pip_models else []

    def local_model(self, name: str) -> list[str]:
        return self.dir_input(self.layout.models[name]["id"])

    def gpus(self, name: str, local: bool = True) -> int:
        """Resource ``gpu`` of a model's inference job (:meth:`verbeval.workflow.layout.Layout.gpu_resource`
        of its gpus and device map)."""
        m = self.layout.models[name]
        return self.layout.gpu_resource(m["gpus"], m["device_map"], local)

    # ------------------------------------------------------------------ tiny and pip models

    def tiny_inputs(self, tiny: str) -> list[str]:
        spec = self.tiny[tiny]
        if spec["tokenizer"] != "words":
            return [spec["tokenizer"]] if ModelRef(spec["tokenizer"]).is_dir else []
        # the word-level tokenizer's vocabulary: every word of the workflow's own data
        layout = self.layout
        return [
            f"{layout.agreement_dir}/lexicon.parquet",
            f"{layout.agreement_dir}/templates.parquet",
            layout.raw_path(layout.config["simverb"]["source"]),
            layout.raw_path(layout.config["veridicality"]["source"]),
        ]

    def tiny_source(self, tiny: str, inputs: Sequence[str]) -> str:
        spec = self.tiny[tiny]
        if spec["tokenizer"] == "words":
            return shlex.join(["--word-corpus", *inputs])
        return shlex.join(["--tokenizer", spec["tokenizer"]])

    def pip_parts(self, name: str) -> str:
        from verbeval.core.model_sources.pip_package import PipSpec

        return shlex.join(f"--part={p}" for p in PipSpec.from_entry(self.pip_by_name[name]).part_args())

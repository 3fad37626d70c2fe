"""What every part of the plan reads, computed once from the validated configuration: the
:class:`Layout` record (the configuration, the models by name, the directories, the run's groups and
sources, the lexicon modes' switch) and :class:`PlanError`.

It is built first (:class:`verbeval.workflow.plan.Plan`), and each sub-plan (models, acquisition,
studies, model steps, figures, comparisons, queues, repairs) takes it, with the sub-plans it
needs, in its constructor: no module of the plan imports the whole plan.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from verbeval.agreement.data.custom_pairs import CustomGroup, custom_groups
from verbeval.agreement.engine.shardstore import MANIFEST_NAME
from verbeval.core.cli import MIRROR_ENV  # the fetch jobs' mirror, as `verbeval fetch` reads it
from verbeval.core.config import Layer, config_origin
from verbeval.core.errors import VerbevalError
from verbeval.core.manifest import Source, local_filename, mirror_location
from verbeval.core.model_entries import checkpoint_models, entry_models, model_entries, select_models


class PlanError(VerbevalError):
    """A setup error found before any job runs, its message naming the configuration file."""


def shard_manifest(root: str) -> str:
    """The manifest of a model's shard store under ``root`` (a pattern with ``{model}``): the
    output of its inference job; the shards beside it are not job outputs, so a failed job's
    clean-up never deletes finished ones."""
    return f"{root}/{{model}}/shards/{MANIFEST_NAME}"


class Layout:
    """The run's configuration, models, directories, groups and sources, checked and computed once."""

    shard_manifest = staticmethod(shard_manifest)

    def __init__(
        self, config: dict[str, Any], layers: list[Layer], manifest: dict[str, Source], all_groups: list[dict[str, Any]]
    ) -> None:
        self.config = config
        self.layers = layers
        self.manifest = manifest
        self.all_groups = all_groups
        self.agreement: dict[str, Any] = config["agreement"]
        self.raw_dir: str = config["raw_dir"]
        self.results_dir: str = config["results_dir"]
        self.agreement_dir = f"{self.results_dir}/agreement"
        self.logs = f"{self.results_dir}/logs"
        self.models: dict[str, dict[str, Any]] = {m["name"]: m for m in model_entries(config)}
        self.checkpoints = checkpoint_models(list(self.models.values()))
        # Table 2's models: agreement.table_models, else one per models[] entry (a sweep's table_revision)
        tm = self.agreement["table_models"]
        self.table_models = (
            entry_models(list(self.models.values())) if tm is None else select_models(list(self.models), tm)
        )
        # the mirror the fetch jobs read: data_mirror, else $VERBEVAL_DATA_MIRROR (as `verbeval fetch`
        # reads it; the fetch commands name only data_mirror), else None (download)
        self.fetch_mirror: str | None = config["data_mirror"] or os.environ.get(MIRROR_ENV) or None
        # the run's groups and sources
        agr = self.agreement
        self.groups = [g for g in self.all_groups if agr["groups"] is None or g["id"] in agr["groups"]]
        if agr["groups"] is not None:
            unknown = sorted(set(agr["groups"]) - {g["id"] for g in self.all_groups})
            if unknown:
                raise self.error(["agreement", "groups"], f"agreement.groups: unknown group(s) {unknown}")
        try:
            self.custom_groups: list[CustomGroup] = custom_groups(agr["custom_groups"], self.all_groups)
        except VerbevalError as exc:
            raise self.error(["agreement", "custom_groups"], str(exc)) from None
        missing = [str(g.path) for g in self.custom_groups if not g.path.is_file()]
        if missing:
            raise self.error(
                ["agreement", "custom_groups"], f"agreement.custom_groups: file(s) not found: {', '.join(missing)}"
            )
        # the paper's groups (from manifest sources), then the user's own (local files)
        self.group_ids = [g["id"] for g in self.groups] + [g.id for g in self.custom_groups]
        # the run's groups as a groups file (written by the templates rule): what the tables and figures show
        self.run_groups_file = f"{self.agreement_dir}/groups.yaml"
        self.template_sources = [s for g in self.groups for s in g["sources"]]
        self.sources = list(dict.fromkeys(self.template_sources + agr["verb_lists"]))
        for src in self.sources:
            if src not in self.manifest:
                raise PlanError(f"{self.config['manifest']}: no source named {src!r}")
        self.check_mirror_has(self.sources)
        # the lexicon modes (multi-token verbs)
        self.multitoken: dict[str, Any] = self.agreement["multitoken"]
        self.lexicon_modes_dir = f"{self.agreement_dir}/lexicon_modes"
        mt_groups = self.multitoken["groups"]
        self.multitoken_groups = self.group_ids if mt_groups is None else [g for g in self.group_ids if g in mt_groups]
        if mt_groups is not None:
            unknown = sorted(set(mt_groups) - set(self.group_ids))
            if unknown:
                raise self.error(
                    ["agreement", "multitoken", "groups"],
                    f"agreement.multitoken.groups: {unknown} are not among the run's groups",
                )
        if self.agreement["lexicon_mode"] != "single_token" and not self.multitoken["enabled"]:
            raise self.error(
                ["agreement", "lexicon_mode"],
                f"agreement.lexicon_mode {self.agreement['lexicon_mode']!r} needs agreement.multitoken.enabled: true",
            )
        self.multitoken_on = bool(self.multitoken["enabled"] and self.multitoken_groups)
        # the shard stores' roots: the agreement's, and the lexicon modes' forms
        self.store_roots = [self.agreement_dir] + ([self.lexicon_modes_dir] if self.multitoken_on else [])

    # ------------------------------------------------------------------ errors

    def error(self, keypath: Sequence[str | int], reason: str) -> PlanError:
        """PlanError '<file that set keypath>: <reason>'."""
        return PlanError(f"{config_origin(keypath, self.layers)}: {reason}")

    def check_built_folders(self) -> None:
        """A ``tiny_models``/``toy_models`` ``out`` that its rule may not replace (a folder the
        command did not write, a tracked folder, the working folder: verbeval.core.outfolders) stops
        the run here: Snakemake removes a job's output folder before the job runs."""
        from verbeval.core.outfolders import ADVICE, replace_problem

        rules = {"tiny_models": "tiny-model", "toy_models": "train-toy"}
        for section, command in rules.items():
            for i, entry in enumerate(self.config.get(section) or []):
                problem = replace_problem(entry["out"], command)
                if problem is not None:
                    raise self.error(
                        [section, i, "out"],
                        f"{section}.{i}.out {entry['out']}: the workflow would replace it: {problem}; {ADVICE}",
                    )

    # ------------------------------------------------------------------ sources

    def raw_path(self, name: str) -> str:
        """Where the fetched copy of manifest source ``name`` lives."""
        return f"{self.raw_dir}/{name}/{local_filename(self.manifest[name])}"

    def check_mirror_has(self, sources: str | Sequence[str]) -> None:
        """PlanError when the fetch jobs' mirror lacks a file of these sources (a source, or a list of them)
        that has no raw copy yet (a fetched copy is not fetched again, so the mirror need not hold it)."""
        mirror = self.fetch_mirror
        if not mirror:
            return
        names = [sources] if isinstance(sources, str) else sources
        missing = [
            str(mirror_location(self.manifest[s], mirror))
            for s in names
            if not os.path.exists(self.raw_path(s)) and not mirror_location(self.manifest[s], mirror).exists()
        ]
        if not missing:
            return
        reason = (
            f"missing {missing[0]}"
            if isinstance(sources, str)
            else f"missing {len(missing)} file(s), e.g. {missing[0]}"
        )
        if self.config["data_mirror"]:
            raise self.error(["data_mirror"], f"data_mirror {self.config['data_mirror']}: {reason}")
        raise PlanError(f"{MIRROR_ENV}={mirror} (the data mirror of the fetch jobs): {reason}")

    def per_group(self, pattern: str, groups: Sequence[str] | None = None) -> list[str]:
        """``pattern`` (which may hold ``{model}``) with ``{group}`` filled in for every group."""
        return [pattern.replace("{group}", g) for g in (self.group_ids if groups is None else groups)]

    def per_model(self, pattern: str, models: Sequence[str] | None = None) -> list[str]:
        return [pattern.replace("{model}", m) for m in (self.models if models is None else models)]

    # ------------------------------------------------------------------ resources

    def gpu_resource(self, gpus: int, device_map: Any = None, local: bool = True) -> int:
        """Snakemake resource ``gpu`` of a job configured with ``gpus`` (``models[].gpus``,
        ``inference.gpus``): 0 when the run executes its jobs on this machine (``local``:
        :func:`verbeval.workflow.snakemake.jobs_run_here`) and the job runs on its CPU (:func:`verbeval.core.devices.runs_on_cpu`:
        device ``cpu``, or ``auto`` with no GPU here), so that CPU jobs of several models run side by
        side instead of queueing for the profile's one GPU token; else ``gpus`` (a GPU machine, and
        a cluster, whose jobs run on the nodes the resources ask for)."""
        from verbeval.core.devices import runs_on_cpu

        if local and runs_on_cpu(self.config["inference"]["device"], device_map):
            return 0
        return gpus

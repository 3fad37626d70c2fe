"""The workflow's plan: from a configuration, everything the rules of ``workflow/rules/*.smk`` need.

:func:`verbeval.workflow.loading.build_plan` validates the configuration (the schema fills in its defaults), reads the
manifest and the groups file, and raises :class:`PlanError` naming the configuration file that set
a bad key. The :class:`Plan` it returns holds the models, groups, sources, result paths, the
output lists of every part of the workflow and the command options of each rule; the ``.smk``
files only bind rules to it. Building a plan reads files and never writes one: a stale shard store
or a raw copy that no longer verifies is *reported* (:class:`verbeval.workflow.repairs.RepairsPlan`),
and the job that runs repairs it.

Beside it: :mod:`verbeval.workflow.loading` (configuration files to a plan), :mod:`verbeval.workflow.params`
(params and wildcard constraints), :mod:`verbeval.workflow.models` (each model's sources, options and
folders, the tiny and pip models: ``PLAN.model``), :mod:`verbeval.workflow.figures` (figures, Table 3,
DVC views: ``PLAN.figures``), :mod:`verbeval.workflow.studies` (SimVerb-3500, veridicality: ``PLAN.simverb``,
``PLAN.veridicality``), :mod:`verbeval.workflow.acquisition` (the acquisition analysis and the toy models: ``PLAN.acquisition``), :mod:`verbeval.workflow.repairs` (pinned files, shard stores and raw copies to repair:
``PLAN.repairs``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from verbeval.agreement.data.custom_pairs import CustomGroup, custom_groups
from verbeval.agreement.engine.shardstore import MANIFEST_NAME
from verbeval.core.cli import MIRROR_ENV  # the fetch jobs' mirror, as `verbeval fetch` reads it
from verbeval.core.config import Layer, config_origin
from verbeval.core.errors import VerbevalError
from verbeval.core.manifest import Source, local_filename, mirror_location
from verbeval.core.model_entries import checkpoint_models, entry_models, model_entries, select_models
from verbeval.core.steps import settings_argv
from verbeval.simverb.steps import SCORE_SETTINGS
from verbeval.workflow.params import Untracked, output_files, quoted, wrapped


class PlanError(VerbevalError):
    """A setup error found before any job runs, its message naming the configuration file."""


class Plan:
    """Everything the rules need, from a validated configuration (:func:`build_plan`)."""

    def __init__(
        self, config: dict[str, Any], layers: list[Layer], manifest: dict[str, Source], all_groups: list[dict[str, Any]]
    ) -> None:
        from verbeval.workflow.acquisition import AcquisitionPlan
        from verbeval.workflow.comparisons import ComparisonsPlan
        from verbeval.workflow.figures import FiguresPlan
        from verbeval.workflow.model_steps import ModelSteps
        from verbeval.workflow.models import ModelsPlan
        from verbeval.workflow.repairs import RepairsPlan
        from verbeval.workflow.studies import SimverbPlan, VeridicalityPlan

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
        self.model = ModelsPlan(self)  # each model's sources, options and folders; the tiny and pip models
        self.checkpoints = checkpoint_models(list(self.models.values()))
        # Table 2's models: agreement.table_models, else one per models[] entry (a sweep's table_revision)
        tm = self.agreement["table_models"]
        self.table_models = (
            entry_models(list(self.models.values())) if tm is None else select_models(list(self.models), tm)
        )
        self._plan_groups()
        self.acquisition = AcquisitionPlan(self)  # the acquisition analysis of the sweeps; the toy models
        self._check_built_folders()
        self.random_models = ", ".join(
            n for n, m in self.models.items() if self.model.random_init(m["id"], m["random_init"])
        )
        self.figures = FiguresPlan(self)
        self.veridicality = VeridicalityPlan(self)
        self.simverb = SimverbPlan(self)
        self._plan_lexicon_modes()
        self.model_steps = ModelSteps(self)  # each model's steps: their files and command lines
        self.comparisons = ComparisonsPlan(self)  # the paired comparisons and the precision audit
        self.plan_queues(local_gpu=False)
        self.repairs = RepairsPlan(self)

    def plan_queues(self, local_gpu: bool) -> None:
        """The queue jobs (``PLAN.queues``: a sweep's chunks of revisions; with ``local_gpu``, a run whose
        jobs run on this machine, the models sharing its GPU): :mod:`verbeval.workflow.queues`."""
        from verbeval.workflow.queues import QueuesPlan

        self.queues = QueuesPlan(self, local_gpu)

    # ------------------------------------------------------------------ errors

    def error(self, keypath: Sequence[str | int], reason: str) -> PlanError:
        """PlanError '<file that set keypath>: <reason>'."""
        return PlanError(f"{config_origin(keypath, self.layers)}: {reason}")

    def _check_built_folders(self) -> None:
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

    # ------------------------------------------------------------------ groups and sources

    def _plan_groups(self) -> None:
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
        if self.fetch_mirror:
            missing = self.mirror_missing(self.sources)
            if missing:
                raise self._mirror_error(f"missing {len(missing)} file(s), e.g. {missing[0]}")

    def raw_path(self, name: str) -> str:
        """Where the fetched copy of manifest source ``name`` lives."""
        return f"{self.raw_dir}/{name}/{local_filename(self.manifest[name])}"

    @property
    def fetch_mirror(self) -> str | None:
        """The mirror the fetch jobs read: data_mirror, else $VERBEVAL_DATA_MIRROR (as `verbeval
        fetch` reads it; the fetch commands name only data_mirror), else None (download)."""
        return self.config["data_mirror"] or os.environ.get(MIRROR_ENV) or None

    def _mirror_error(self, reason: str) -> PlanError:
        mirror = self.config["data_mirror"]
        if mirror:
            return self.error(["data_mirror"], f"data_mirror {mirror}: {reason}")
        return PlanError(f"{MIRROR_ENV}={self.fetch_mirror} (the data mirror of the fetch jobs): {reason}")

    def mirror_missing(self, names: Sequence[str]) -> list[str]:
        """The mirror files of these sources that are missing, for the sources that have no raw copy
        yet (a fetched copy is not fetched again, so the mirror need not hold it)."""
        mirror = self.fetch_mirror
        assert mirror is not None
        return [
            str(mirror_location(self.manifest[s], mirror))
            for s in names
            if not os.path.exists(self.raw_path(s)) and not mirror_location(self.manifest[s], mirror).exists()
        ]

    def check_mirror_has(self, source: str) -> None:
        """PlanError when the fetch jobs' mirror lacks ``source`` (with no raw copy yet)."""
        mirror = self.fetch_mirror
        if mirror and self.mirror_missing([source]):
            raise self._mirror_error(f"missing {mirror_location(self.manifest[source], mirror)}")

    def used_sources(self) -> list[str]:
        """The manifest sources this run reads: templates, verb lists, SimVerb (with its split files)
        and veridicality."""
        return list(
            dict.fromkeys(
                self.sources
                + [self.simverb.config["source"], *self.simverb.splits.values(), self.veridicality.config["source"]]
            )
        )

    def source_sha256(self, name: str) -> str:
        """The accepted checksums of source ``name``: a param of its fetch job (a changed entry fetches again)."""
        return " ".join(self.manifest[name].sha256)

    @property
    def manifest_param(self) -> Untracked:
        """The manifest's path as a param: where the formats are read, no rerun trigger."""
        return Untracked(self.config["manifest"])

    @property
    def mirror_option(self) -> Untracked:
        """``--mirror DIR`` of the fetch jobs (data_mirror), no rerun trigger: the bytes are checked either way."""
        mirror = self.config["data_mirror"]
        return Untracked(f"--mirror {shlex.quote(mirror)}" if mirror else "")

    def source_inputs(self, names: Sequence[str]) -> str:
        """``--input=NAME=PATH`` options of the raw copies of these sources."""
        return quoted([f"--input={s}={self.raw_path(s)}" for s in names])

    def custom_group_options(self) -> str:
        """`verbeval templates` options of the custom groups (agreement.custom_groups)."""
        opts = []
        for g in self.custom_groups:
            opts.append(f"--custom-group={g.id}={g.path}")
            if g.name != g.id:
                opts.append(f"--custom-name={g.id}={g.name}")
            if g.sha256:
                opts.append(f"--custom-sha256={g.id}={g.sha256}")
            opts.append(f"--custom-format={g.id}={g.format}")
        return quoted(opts)

    def templates_params(self) -> dict[str, str]:
        """The plan-computed options of `verbeval templates` (its settings: :meth:`settings`)."""
        return {
            "manifest": self.manifest_param,
            "inputs": self.source_inputs(self.template_sources),
            "groups": shlex.quote("--groups=" + ",".join(g["id"] for g in self.groups)),  # empty: custom only
            "custom": self.custom_group_options(),
        }

    # ------------------------------------------------------------------ shard stores

    @staticmethod
    def shard_manifest(root: str) -> str:
        """The manifest of a model's shard store under ``root`` (a pattern with ``{model}``): the
        output of its inference job; the shards beside it are not job outputs, so a failed job's
        clean-up never deletes finished ones."""
        return f"{root}/{{model}}/shards/{MANIFEST_NAME}"

    def store_roots(self) -> list[str]:
        return [self.agreement_dir] + ([self.lexicon_modes_dir] if self.multitoken_on else [])

    def infer_input(self) -> dict[str, Any]:
        """Inputs of the model's one job, besides the SimVerb data (patterns with ``{model}``; the
        model's folder is a function of the job's wildcards): :mod:`verbeval.workflow.model_steps`."""
        return self.model_steps.rule_inputs("run-model")

    def infer_output(self) -> dict[str, str]:
        return self.model_steps.rule_outputs("run-model")

    def infer_options(self, name: str) -> dict[str, Any]:
        """The per-model params of the model's inference job besides its declared settings
        (:data:`verbeval.core.steps.MODEL_SETTINGS`, from its entry)."""
        m = self.models[name]
        return {
            "model": m["id"],
            "version": self.model.version(name),
            "revision": self.model.source_options(name),
            "random_init": self.model.random_init_option(name),
        }

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

    def model_gpus(self, name: str, local: bool = True) -> int:
        """Resource ``gpu`` of a model's inference job (:meth:`gpu_resource` of its gpus and device map)."""
        m = self.models[name]
        return self.gpu_resource(m["gpus"], m["device_map"], local)

    def run_model_branches(self, files: Mapping[str, Any]) -> list[str]:
        """`verbeval run-model` options of the optional branches its job writes (forms, SimVerb);
        ``files``: the model's files (:meth:`verbeval.workflow.model_steps.ModelSteps.files`: ``sims``
        among them when its job has a SimVerb branch, ``forms`` when it has a forms branch)."""
        opts = []
        if self.multitoken_on and "forms" in files:
            opts += [
                f"--forms={files['forms']}",
                f"--forms-groups={','.join(self.multitoken_groups)}",
                f"--forms-manifest={files['forms_manifest']}",
            ]
        if "sims" in files:
            sv = self.simverb.config
            opts += ["--simverb-data", files["simverb_data"]]
            for name, path in zip(self.simverb.splits, files["simverb_splits"]):
                opts.append(f"--simverb-split={name}={path}")
            for frame in sv["frames"]:
                opts.append(f"--simverb-frame={frame}")
            opts += [
                # simverb-score's settings under run-model's names (--simverb-multi-token, ...)
                *settings_argv([s.with_option("--simverb-" + s.option[2:]) for s in SCORE_SETTINGS], self.config),
                "--simverb-out",
                files["sims"],
                "--simverb-verbs",
                files["verbs"],
            ]
        return opts

    def settings(self, command: str) -> str:
        """The options of declared step ``command``'s settings for this configuration, as shell words
        (:meth:`verbeval.core.steps.Step.argv`): a rule's ``params.settings``."""
        from verbeval.workflow.steps import declared_step

        return shlex.join(declared_step(command).argv(self.config))

    def table2_params(self) -> dict[str, Any]:
        """The plan-computed options of `verbeval table` (its settings: :meth:`settings`)."""
        return {
            "models": ",".join(self.models),
            "table_models": (
                f"--table-models {','.join(self.table_models)}" if self.table_models != list(self.models) else ""
            ),
            "random_models": self.random_models,  # named in the report caption
        }

    def table2_outputs(self, **wrap: Callable[[Any], Any]) -> dict[str, Any]:
        """The named outputs of rule table2, written once: its ``output:`` (``wrap``: :func:`wrapped`)
        and rule all's targets (:meth:`agreement_outputs`)."""
        out = self.agreement_dir
        return wrapped(
            {
                "csv": f"{out}/table2.csv",
                "md": f"{out}/table2.md",
                "tex": f"{out}/table2.tex",
                "html": f"{out}/table2.html",
                "all_csv": f"{out}/summary_all.csv",
                "metrics": f"{out}/metrics.json",
            },
            wrap,
        )

    def per_group(self, pattern: str, groups: Sequence[str] | None = None) -> list[str]:
        """``pattern`` (which may hold ``{model}``) with ``{group}`` filled in for every group."""
        return [pattern.replace("{group}", g) for g in (self.group_ids if groups is None else groups)]

    def per_model(self, pattern: str, models: Sequence[str] | None = None) -> list[str]:
        return [pattern.replace("{model}", m) for m in (self.models if models is None else models)]

    def agreement_outputs(self) -> list[str]:
        """Table 2's files and every model's outputs of its agreement steps (lemmas, its shard
        manifest, each group's scores, TSE and summary: :mod:`verbeval.workflow.model_steps`); a
        per-group output deleted alone is regenerated."""
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
        return output_files(self.table2_outputs()) + per_model

    # ------------------------------------------------------------------ lexicon modes (multi-token verbs)

    def _plan_lexicon_modes(self) -> None:
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

    def forms_options(self) -> str:
        """``NAME=PATH`` of every model's forms table."""
        forms = self.lexicon_modes_rule_outputs("lexicon_forms")["forms"]
        return quoted([f"{m}={forms.replace('{model}', m)}" for m in self.models])

    def lexicon_modes_rule_outputs(self, rule: str, **wrap: Callable[[Any], Any]) -> dict[str, Any]:
        """The named outputs of lexicon-modes rule ``rule`` (patterns with ``{model}``), written once:
        the rule's ``output:`` (``wrap``: :func:`wrapped`) and rule all's targets
        (:meth:`lexicon_modes_outputs`)."""
        lm = self.lexicon_modes_dir
        outputs: dict[str, dict[str, str]] = {
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
        return wrapped(outputs[rule], wrap)

    def lexicon_modes_outputs(self) -> list[str]:
        """The lexicon-modes table, its page and common pairs, each model's scores and form shards
        (the form shards: the model's one job, :mod:`verbeval.workflow.model_steps`)."""
        if not self.multitoken_on:
            return []
        table = self.lexicon_modes_rule_outputs("lexicon_modes_table")
        per_model = self.lexicon_modes_rule_outputs("lexicon_modes")
        return (
            output_files(table, ["csv", "md", "tex"])
            + output_files(self.lexicon_modes_rule_outputs("lexicon_modes_page"))
            + output_files(table, ["metrics", "coverage", "diff"])
            + output_files(self.lexicon_modes_rule_outputs("lexicon_common"))
            + [f for m in self.models for f in output_files(per_model, ["summary", "lemmas", "consistency"], model=m)]
            + self.per_model(self.shard_manifest(self.lexicon_modes_dir))
        )

    # ------------------------------------------------------------------ everything

    def all_outputs(self) -> list[str]:
        """The targets of rule all."""
        return (
            self.agreement_outputs()
            + self.figures.outputs()
            + self.veridicality.outputs()
            + self.simverb.outputs()
            + self.lexicon_modes_outputs()
            + self.figures.dvc_view_outputs()
            + self.acquisition.outputs()
            + self.comparisons.outputs()
        )

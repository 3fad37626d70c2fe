"""One model's steps, each written once: the files it reads and writes and the ``verbeval`` command
line that runs it (``lemmas``, ``run-model``, ``aggregate``, ``lemma-stats``, ``lemma-contexts``).

The per-model rules (``workflow/rules/agreement.smk``, ``models.smk``, ``figures.smk``,
``acquisition.smk``) read their record by name, :attr:`ModelSteps.rules` (``STEP.aggregate.input``:
patterns with ``{model}``, params, log), and write the step's command in their ``shell:`` with it; the
queue jobs (:mod:`verbeval.workflow.queues`) run :meth:`ModelSteps.argv` of the same steps, the same
words (``tests/test_plan.py`` checks each rule's command against it). A step's settings
come from its declaration (:mod:`verbeval.agreement.steps`). Built as ``PLAN.model_steps``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from verbeval.agreement.steps import AGGREGATE, RUN_MODEL
from verbeval.core.model_entries import normalise_model_path
from verbeval.core.steps import model_argv, settings_argv
from verbeval.simverb.steps import SCORE_SETTINGS
from verbeval.workflow.acquisition import AcquisitionPlan
from verbeval.workflow.layout import Layout
from verbeval.workflow.models import ModelsPlan, random_init_option
from verbeval.workflow.params import RuleRecord
from verbeval.workflow.studies import SimverbPlan

#: the per-group files that ``aggregate`` writes for each group, in the order of its outputs
AGGREGATE_FILES = ("scores", "tse", "summary")
_AGGREGATE_NAMES = {"scores": "scores.parquet", "tse": "tse.parquet", "summary": "summary.csv"}


#: each step's inputs and outputs: names of :func:`step_paths` (a missing one: the step does not
#: have it for this model); ``sims`` and ``verbs`` are flagged ``update`` (run-model's stamp decides)
STEP_FILES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "lemmas": (("lexicon", "model_dirs"), ("lemmas",)),
    "run-model": (
        ("templates", "lemmas", "model_dirs", "forms", "simverb_data", "simverb_splits"),
        ("manifest", "forms_manifest", "sims", "verbs"),
    ),
    "aggregate": (("templates", "manifest"), AGGREGATE_FILES),
    "lemma-stats": (("lemmas", "manifest"), ("lemma_stats",)),
    "lemma-contexts": (("lemmas", "manifest"), ("lemma_contexts",)),
}
KEPT = ("sims", "verbs")

#: the per-model step of each per-model rule (its record: :attr:`ModelSteps.rules`); rule infer's record
#: has the SimVerb branch (its inputs and its outputs ``sims`` and ``verbs``), infer_no_simverb's has not
RULE_STEPS = {
    "lemmas": "lemmas",
    "infer": "run-model",
    "infer_no_simverb": "run-model",
    "aggregate": "aggregate",
    "lemma_stats": "lemma-stats",
    "lemma_contexts": "lemma-contexts",
}


def step_paths(layout: Layout, m: str) -> dict[str, Any]:
    """The files of model ``m``'s steps (``m`` may be ``{model}``: the rules' patterns)."""
    out = layout.agreement_dir
    found: dict[str, Any] = {
        "templates": f"{out}/templates.parquet",
        "lexicon": f"{out}/lexicon.parquet",
        "lemmas": f"{out}/{m}/lemmas.parquet",
        "manifest": layout.shard_manifest(out).replace("{model}", m),
        **{kind: layout.per_group(f"{out}/{m}/{{group}}/{_AGGREGATE_NAMES[kind]}") for kind in AGGREGATE_FILES},
        "out_dir": f"{out}/{m}",
        "lemma_stats": f"{out}/{m}/lemma_stats.csv",
        "lemma_contexts": f"{out}/{m}/lemma_contexts.parquet",
    }
    if layout.multitoken_on:
        found["forms"] = f"{layout.lexicon_modes_dir}/{m}/forms.parquet"
        found["forms_manifest"] = layout.shard_manifest(layout.lexicon_modes_dir).replace("{model}", m)
    found["sims"] = f"{layout.results_dir}/simverb/{m}/similarities.parquet"
    found["verbs"] = f"{layout.results_dir}/simverb/{m}/verbs.csv"
    return found


def variant_paths(layout: Layout, m: str, dtype: str) -> dict[str, Any]:
    """The files of model ``m``'s run in another dtype (``agreement.precision_audit.dtypes``): its
    shards, aggregates, flip set and comparison (``m``, ``dtype`` may be ``{model}``, ``{dtype}``)."""
    d = f"{layout.agreement_dir}/{m}/precision/{dtype}"
    return {
        "manifest": f"{d}/shards/manifest.json",
        "out_dir": d,
        **{kind: layout.per_group(f"{d}/{{group}}/{_AGGREGATE_NAMES[kind]}") for kind in AGGREGATE_FILES},
        "flips": f"{d}/flips.csv",
        "comparison": f"{d}/comparison.csv",
    }


def model_settings(layout: Layout, name: str, threads: int | None = None, dtype: str | None = None) -> list[str]:
    """run-model's options of model ``name``'s declared settings (:data:`verbeval.core.steps.MODEL_SETTINGS`,
    from its entry); ``threads``: the job's (default ``inference.threads``), ``dtype``: another dtype's run."""
    inf = layout.config["inference"]
    entry = {**layout.models[name], "threads": inf["threads"] if threads is None else threads,
             **({"dtype": dtype} if dtype else {})}  # fmt: skip
    return model_argv(entry)


class ModelSteps:
    """Every per-model step of a plan (see the module docstring)."""

    def __init__(self, layout: Layout, model: ModelsPlan, acquisition: AcquisitionPlan, simverb: SimverbPlan) -> None:
        self.layout = layout
        self.model = model
        self.acquisition = acquisition
        self.simverb = simverb
        self._cache: dict[str, dict[str, Any]] = {}
        #: ``--toy`` of `verbeval lemma-contexts` for a toy model's checkpoint (its figures say so), by model
        self.toy_option = {
            n: "--toy" if normalise_model_path(m["id"]) in acquisition.toy_checkpoints else ""
            for n, m in layout.models.items()
        }
        #: each per-model rule's record, by rule name (``STEP.aggregate``)
        self.rules = SimpleNamespace(**{rule: self._rule(rule, step) for rule, step in RULE_STEPS.items()})

    def _rule(self, rule: str, command: str) -> RuleRecord:
        """Rule ``rule``'s record: the named inputs and outputs of its step (patterns with ``{model}``;
        the model's folders a function of the job's wildcards), its params and log."""
        layout, model = self.layout, self.model
        groups = ",".join(layout.group_ids)
        source = {  # the model's id and source options (--revision, --gguf-file, --sha256: those it has)
            "model": lambda wc: layout.models[wc.model]["id"],
            "source": lambda wc: shlex.join(model.source(wc.model).options()),
        }
        version = {"version": lambda wc: model.version(wc.model)}  # a rerun trigger: the model's files or commit
        params: dict[str, dict[str, Any]] = {
            "lemmas": {**source, **version},
            "run-model": {
                **source,
                "model_settings": lambda wc, threads: shlex.join(model_settings(layout, wc.model, threads)),
                "random_init": lambda wc: random_init_option(layout.models[wc.model]["random_init"]),
                "groups": groups,
                "settings": shlex.join(RUN_MODEL.argv(layout.config)),
                "branches": lambda wc: shlex.join(self.run_model_branches(self.files(wc.model))),
                "nonfinite": "--allow-nonfinite" if layout.config["inference"]["allow_nonfinite"] else "",
                **version,
            },
            "aggregate": {
                "groups": groups,
                "settings": shlex.join(AGGREGATE.argv(layout.config)),
                "out_dir": lambda wc: self.files(wc.model)["out_dir"],
            },
            "lemma-stats": {},
            "lemma-contexts": {"toy": lambda wc: self.toy_option[wc.model]},
        }
        pattern = step_paths(layout, "{model}")
        simverb = rule == "infer"  # its SimVerb branch: the data, the split files, the kept outputs
        if simverb:
            pattern.update(simverb_data=self.simverb.data, simverb_splits=self.simverb.split_files)
        ins, outs = STEP_FILES[command]
        inputs: dict[str, Any] = {}
        for k in ins:
            if k == "model_dirs":  # the model's folders: a function of the job's wildcards
                inputs["model"] = lambda wc: model.dir_input(layout.models[wc.model]["id"])
            elif k in pattern:
                inputs[k] = pattern[k]
        return RuleRecord(
            inputs,
            {k: pattern[k] for k in outs if k in pattern and (simverb or k not in KEPT)},
            f"{layout.logs}/agreement/{{model}}/{'infer' if command == 'run-model' else rule}.log",  # infer_no_simverb's
            params[command],
        )

    def files(self, name: str) -> dict[str, Any]:
        """Model ``name``'s files (:func:`step_paths`) that its steps use: without SimVerb's for a model
        whose job has no SimVerb branch, without ``lemma_contexts`` for one no sweep analyses; with its
        model folders (``model_dirs``)."""
        if name not in self._cache:
            f = step_paths(self.layout, name)
            if name in self.simverb.in_infer:
                f["simverb_data"] = self.simverb.data
                f["simverb_splits"] = self.simverb.split_files
            else:
                del f["sims"], f["verbs"]
            if name not in self.acquisition.models:
                f["lemma_contexts"] = None
            f["model_dirs"] = self.model.dir_input(self.layout.models[name]["id"])
            self._cache[name] = f
        return self._cache[name]

    def step_files(self, command: str, name: str) -> tuple[list[str], list[str]]:
        """Step ``command``'s input and output files for model ``name`` (:data:`STEP_FILES`), flat."""
        f = self.files(name)

        def flat(keys: tuple[str, ...]) -> list[str]:
            found: list[str] = []
            for k in keys:
                v = f.get(k)
                found += [] if v is None else [v] if isinstance(v, str) else list(v)
            return found

        ins, outs = STEP_FILES[command]
        return flat(ins), flat(outs)

    # ------------------------------------------------------------------ command lines

    def argv(self, command: str, name: str, threads: int | None = None, dtype: str | None = None) -> list[str]:
        """The ``verbeval`` command line (without ``verbeval``) of step ``command`` for model ``name``;
        ``threads``: run-model's (default ``inference.threads``; a job gets what Snakemake gives it);
        ``dtype``: the model's run in that dtype (run-model and aggregate: its own inputs and
        :func:`variant_paths`; no forms or SimVerb branch)."""
        layout = self.layout
        f = self.files(name)
        if dtype is not None:
            branches = ("forms", "forms_manifest", "sims", "verbs", "simverb_data", "simverb_splits")
            f = {**{k: v for k, v in f.items() if k not in branches}, **variant_paths(layout, name, dtype)}
        if command == "lemmas":
            return ["lemmas", "--model", layout.models[name]["id"], *self.model.source(name).options(),
                    "--lexicon", f["lexicon"], "--out", f["lemmas"]]  # fmt: skip
        if command == "run-model":
            return ["run-model", "--model", layout.models[name]["id"], *self.model.source(name).options(),
                    *model_settings(layout, name, threads, dtype), "--random-init",
                    random_init_option(layout.models[name]["random_init"]), "--templates", f["templates"],
                    "--lemmas", f["lemmas"], "--groups", ",".join(layout.group_ids), *RUN_MODEL.argv(layout.config),
                    *self.run_model_branches(f), "--no-progress",
                    *(["--allow-nonfinite"] if layout.config["inference"]["allow_nonfinite"] else []),
                    "--manifest", f["manifest"]]  # fmt: skip
        if command == "aggregate":
            return ["aggregate", "--templates", f["templates"], "--groups", ",".join(layout.group_ids),
                    "--model-name", name, "--manifest", f["manifest"], *AGGREGATE.argv(layout.config),
                    "--out-dir", f["out_dir"]]  # fmt: skip
        if command == "lemma-stats":
            return ["lemma-stats", "--lemmas", f["lemmas"], "--shards", f["manifest"], "--model-name", name,
                    "--out", f["lemma_stats"]]  # fmt: skip
        if command == "lemma-contexts":
            return ["lemma-contexts", "--lemmas", f["lemmas"], "--shards", f["manifest"], "--model-name", name,
                    *shlex.split(self.toy_option[name]), "--out", f["lemma_contexts"]]  # fmt: skip
        raise KeyError(f"no per-model step {command!r}")

    def run_model_branches(self, files: Mapping[str, Any]) -> list[str]:
        """`verbeval run-model` options of the optional branches its job writes (forms, SimVerb);
        ``files``: the model's files (:meth:`files`: ``sims``
        among them when its job has a SimVerb branch, ``forms`` when it has a forms branch)."""
        opts = []
        if self.layout.multitoken_on and "forms" in files:
            opts += [
                f"--forms={files['forms']}",
                f"--forms-groups={','.join(self.layout.multitoken_groups)}",
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
                *settings_argv(
                    [s.with_option("--simverb-" + s.option[2:]) for s in SCORE_SETTINGS], self.layout.config
                ),
                "--simverb-out",
                files["sims"],
                "--simverb-verbs",
                files["verbs"],
            ]
        return opts

    def steps(self, name: str, gpu_queue: bool = False) -> list[str]:
        """The per-model steps of model ``name`` in a queue, in order: its lemmas (not in a GPU's queue,
        whose models' lemmas run first in their own jobs), run-model, aggregate, lemma-stats and, for an
        analysed sweep, lemma-contexts."""
        commands = [*([] if gpu_queue else ["lemmas"]), "run-model", "aggregate", "lemma-stats"]
        return commands + (["lemma-contexts"] if self.files(name)["lemma_contexts"] else [])

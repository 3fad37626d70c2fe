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
from verbeval.core.steps import model_argv, settings_argv
from verbeval.simverb.steps import SCORE_SETTINGS
from verbeval.workflow.acquisition import AcquisitionPlan
from verbeval.workflow.layout import Layout
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.params import RuleRecord
from verbeval.workflow.studies import SimverbPlan

#: the per-group files that ``aggregate`` writes for each group, in the order of its outputs
AGGREGATE_FILES = ("scores", "tse", "summary")
_AGGREGATE_NAMES = {"scores": "scores.parquet", "tse": "tse.parquet", "summary": "summary.csv"}


#: each step's inputs and outputs: names of :meth:`ModelSteps.files` (a missing one: the step does not
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

#: the per-model step of each per-model rule (its record: :attr:`ModelSteps.rules`)
RULE_STEPS = {
    "lemmas": "lemmas",
    "infer": "run-model",
    "aggregate": "aggregate",
    "lemma_stats": "lemma-stats",
    "lemma_contexts": "lemma-contexts",
}


class ModelSteps:
    """Every per-model step of a plan (see the module docstring)."""

    def __init__(self, layout: Layout, model: ModelsPlan, acquisition: AcquisitionPlan, simverb: SimverbPlan) -> None:
        self.layout = layout
        self.model = model
        self.acquisition = acquisition
        self.simverb = simverb
        self._cache: dict[str, dict[str, Any]] = {}
        #: each per-model rule's record, by rule name (``STEP.aggregate``)
        self.rules = SimpleNamespace(**{rule: self._rule(rule, step) for rule, step in RULE_STEPS.items()})

    def _rule(self, rule: str, command: str) -> RuleRecord:
        layout, model = self.layout, self.model
        groups = ",".join(layout.group_ids)
        version = {"version": lambda wc: model.version(wc.model)}  # a rerun trigger: the model's files or commit
        params: dict[str, dict[str, Any]] = {
            "lemmas": {
                "model": lambda wc: layout.models[wc.model]["id"],
                "source": lambda wc: model.source_options(wc.model),
                **version,
            },
            "run-model": {
                "model": lambda wc: layout.models[wc.model]["id"],
                "source": lambda wc: model.source_options(wc.model),
                "model_settings": lambda wc, threads: shlex.join(self.model_settings(wc.model, threads)),
                "random_init": lambda wc: model.random_init_option(wc.model),
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
            "lemma-contexts": {"toy": lambda wc: self.acquisition.toy_option(wc.model)},
        }
        return RuleRecord(
            self.rule_inputs(command),
            self.rule_outputs(command),
            f"{layout.logs}/agreement/{{model}}/{rule}.log",
            params[command],
        )

    def paths(self, m: str) -> dict[str, Any]:
        """The files of model ``m``'s steps (``m`` may be ``{model}``: the rules' patterns)."""
        layout = self.layout
        out = layout.agreement_dir
        found: dict[str, Any] = {
            "templates": f"{out}/templates.parquet",
            "lexicon": f"{out}/lexicon.parquet",
            "lemmas": f"{out}/{m}/lemmas.parquet",
            "manifest": layout.shard_manifest(out).replace("{model}", m),
            **{kind: layout.per_group(f"{out}/{m}/{{group}}/{_AGGREGATE_NAMES[kind]}") for kind in AGGREGATE_FILES},
            "out_dir": f"{out}/{m}",
            "lemma_stats": f"{out}/{m}/lemma_stats.csv",
            "lemma_contexts": self.acquisition.lemma_contexts(m),
        }
        if layout.multitoken_on:
            found["forms"] = f"{layout.lexicon_modes_dir}/{m}/forms.parquet"
            found["forms_manifest"] = layout.shard_manifest(layout.lexicon_modes_dir).replace("{model}", m)
        found["sims"] = f"{self.simverb.res}/{m}/similarities.parquet"
        found["verbs"] = f"{self.simverb.res}/{m}/verbs.csv"
        return found

    def files(self, name: str) -> dict[str, Any]:
        """Model ``name``'s files (:meth:`paths`) that its steps use: without SimVerb's for a model
        whose job has no SimVerb branch, without ``lemma_contexts`` for one no sweep analyses; with its
        model folders (``model_dirs``)."""
        if name not in self._cache:
            f = self.paths(name)
            if name in self.simverb.in_infer:
                f["simverb_data"] = self.simverb.data()
                f["simverb_splits"] = self.simverb.split_files()
            else:
                del f["sims"], f["verbs"]
            if name not in self.acquisition.models:
                f["lemma_contexts"] = None
            f["model_dirs"] = self.model.local_model(name)
            self._cache[name] = f
        return self._cache[name]

    def variant_paths(self, m: str, dtype: str) -> dict[str, Any]:
        """The files of model ``m``'s run in another dtype (``agreement.precision_audit.dtypes``): its
        shards, aggregates, flip set and comparison (``m``, ``dtype`` may be ``{model}``, ``{dtype}``)."""
        d = f"{self.layout.agreement_dir}/{m}/precision/{dtype}"
        return {
            "manifest": f"{d}/shards/manifest.json",
            "out_dir": d,
            **{kind: self.layout.per_group(f"{d}/{{group}}/{_AGGREGATE_NAMES[kind]}") for kind in AGGREGATE_FILES},
            "flips": f"{d}/flips.csv",
            "comparison": f"{d}/comparison.csv",
        }

    def variant_files(self, name: str, dtype: str) -> dict[str, Any]:
        """Model ``name``'s files for its run in ``dtype``: its own inputs (templates, lemmas, its
        folders) and :meth:`variant_paths`; no forms or SimVerb branch."""
        branches = ("forms", "forms_manifest", "sims", "verbs", "simverb_data", "simverb_splits")
        base = {k: v for k, v in self.files(name).items() if k not in branches}
        return {**base, **self.variant_paths(name, dtype)}

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

    def rule_inputs(self, command: str) -> dict[str, Any]:
        """The named inputs of step ``command``'s own rule: patterns with ``{model}``; the model's
        folders a function of the job's wildcards."""
        pattern = self.paths("{model}")
        found: dict[str, Any] = {}
        for k in STEP_FILES[command][0]:
            if k == "model_dirs":
                found["model"] = lambda wc: self.model.local_model(wc.model)
            elif k in pattern:
                found[k] = pattern[k]
        return found

    def rule_outputs(self, command: str) -> dict[str, Any]:
        """The named outputs of step ``command``'s own rule (patterns with ``{model}``)."""
        pattern = self.paths("{model}")
        return {k: pattern[k] for k in STEP_FILES[command][1] if k in pattern and k not in KEPT}

    # ------------------------------------------------------------------ command lines

    def argv(self, command: str, name: str, threads: int | None = None, dtype: str | None = None) -> list[str]:
        """The ``verbeval`` command line (without ``verbeval``) of step ``command`` for model ``name``;
        ``threads``: run-model's (default ``inference.threads``; a job gets what Snakemake gives it);
        ``dtype``: the model's run in that dtype (run-model and aggregate: :meth:`variant_files`)."""
        layout = self.layout
        f = self.files(name) if dtype is None else self.variant_files(name, dtype)
        if command == "lemmas":
            m = layout.models[name]
            return ["lemmas", "--model", m["id"], *shlex.split(self.model.source_options(name)),
                    "--lexicon", f["lexicon"], "--out", f["lemmas"]]  # fmt: skip
        if command == "run-model":
            return self._run_model(name, f, threads, dtype)
        if command == "aggregate":
            return ["aggregate", "--templates", f["templates"], "--groups", ",".join(layout.group_ids),
                    "--model-name", name, "--manifest", f["manifest"], *AGGREGATE.argv(layout.config),
                    "--out-dir", f["out_dir"]]  # fmt: skip
        if command == "lemma-stats":
            return ["lemma-stats", "--lemmas", f["lemmas"], "--shards", f["manifest"], "--model-name", name,
                    "--out", f["lemma_stats"]]  # fmt: skip
        if command == "lemma-contexts":
            return ["lemma-contexts", "--lemmas", f["lemmas"], "--shards", f["manifest"], "--model-name", name,
                    *shlex.split(self.acquisition.toy_option(name)), "--out", f["lemma_contexts"]]  # fmt: skip
        raise KeyError(f"no per-model step {command!r}")

    def _run_model(self, name: str, f: dict[str, Any], threads: int | None, dtype: str | None = None) -> list[str]:
        layout = self.layout
        return ["run-model", "--model", layout.models[name]["id"], *self.model.source(name).options(),
                *self.model_settings(name, threads, dtype), "--random-init", self.model.random_init_option(name),
                "--templates", f["templates"], "--lemmas", f["lemmas"], "--groups", ",".join(layout.group_ids),
                *RUN_MODEL.argv(layout.config), *self.run_model_branches(f), "--no-progress",
                *(["--allow-nonfinite"] if layout.config["inference"]["allow_nonfinite"] else []),
                "--manifest", f["manifest"]]  # fmt: skip

    def model_settings(self, name: str, threads: int | None = None, dtype: str | None = None) -> list[str]:
        """run-model's options of the model's declared settings (:data:`verbeval.core.steps.MODEL_SETTINGS`,
        from its entry); ``threads``: the job's (default ``inference.threads``), ``dtype``: another dtype's run."""
        inf = self.layout.config["inference"]
        entry = {**self.layout.models[name], "threads": inf["threads"] if threads is None else threads,
                 **({"dtype": dtype} if dtype else {})}  # fmt: skip
        return model_argv(entry)

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

    def command(self, command: str, name: str, threads: int | None = None, dtype: str | None = None) -> str:
        """:meth:`argv` as the rule's shell words (``verbeval {params.command} 2> {log:q}``)."""
        return shlex.join(self.argv(command, name, threads, dtype))

    def steps(self, name: str, gpu_queue: bool = False, threads: int | None = None) -> list[list[str]]:
        """Every step of model ``name`` in a queue, in order: its lemmas (not in a GPU's queue, whose
        models' lemmas run first in their own jobs), run-model, aggregate, lemma-stats and, for an
        analysed sweep, lemma-contexts."""
        return [self.argv(c, name, threads) for c in self.step_names(name, gpu_queue)]

    def step_names(self, name: str, gpu_queue: bool = False) -> list[str]:
        """The commands of :meth:`steps`."""
        commands = [*([] if gpu_queue else ["lemmas"]), "run-model", "aggregate", "lemma-stats"]
        return commands + (["lemma-contexts"] if self.files(name)["lemma_contexts"] else [])

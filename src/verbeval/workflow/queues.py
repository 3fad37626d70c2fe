"""The queue jobs: models scored one after another by one warm process (``verbeval run-queue``).

Two kinds of queue (docs/workflow.md, "Sweeps and queues"):

* **a sweep's revisions**: the revisions of a ``models[]`` entry with ``revisions`` are cut into
  consecutive chunks of ``inference.revisions_per_job``; each chunk is one job that runs, per
  revision, the steps that would otherwise be five jobs (``lemmas``, ``run-model``, ``aggregate``,
  ``lemma-stats`` and, for an analysed sweep, ``lemma-contexts``). The DAG grows with entries and
  chunks, not with checkpoints;
* **a GPU's models**: on a run whose jobs run on this machine and use its GPU
  (``inference.gpu_queue``), the models without revisions that claim a GPU share one job
  (``run-model``, ``aggregate`` and ``lemma-stats`` of each), so each model loads while the one
  before computes and is aggregated beside the next.

Each step is the command line its own rule would run, with the same outputs, so the files are the
same byte for byte; the per-model rules keep the models that are in no queue. Built by
:class:`verbeval.workflow.plan.Plan` as ``PLAN.queues``; ``workflow/rules/queues.smk`` defines one
rule per queue (``queue_0``, ``queue_1``, ...).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verbeval.workflow.plan import Plan


@dataclass
class Queue:
    """One queue job: its rule name, what it is (for the log file's name), its models in order."""

    rule: str
    label: str
    models: list[str]
    gpu_queue: bool  # the GPU's queue of models (no lemmas step: those run in their own jobs first)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class QueuesPlan:
    """The queue jobs of a run (see the module docstring)."""

    def __init__(self, plan: Plan, local_gpu: bool = False) -> None:
        """``local_gpu``: the run's jobs run on this machine (no SLURM profile), so the models that
        claim a GPU share it (:meth:`verbeval.workflow.plan.Plan.gpu_resource`)."""
        self.plan = plan
        inf = plan.config["inference"]
        self.post_workers: int = inf["post_workers"]
        self.queues: list[Queue] = []
        per_job = inf["revisions_per_job"]
        if per_job > 0:
            sweeps: dict[str, list[str]] = {}
            for name, m in plan.models.items():
                if m.get("checkpoint_of") is not None:
                    sweeps.setdefault(m["checkpoint_of"], []).append(name)
            for entry, names in sweeps.items():
                parts = _chunks(names, per_job)
                for k, part in enumerate(parts, 1):
                    label = entry if len(parts) == 1 else f"{entry}.{k}-of-{len(parts)}"
                    self._add(label, part, gpu_queue=False)
        if inf["gpu_queue"] and local_gpu:
            gpu_models = [
                n
                for n, m in plan.models.items()
                if m.get("checkpoint_of") is None and plan.model_gpus(n, local=True) > 0 and m["device_map"] is None
            ]
            if len(gpu_models) > 1:
                self._add("gpu", gpu_models, gpu_queue=True)
        self.queued = {m for q in self.queues for m in q.models}
        self._file_cache: dict[str, dict[str, Any]] = {}

    def _add(self, label: str, models: list[str], gpu_queue: bool) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label)
        self.queues.append(Queue(f"queue_{len(self.queues)}", safe, models, gpu_queue))

    def lemma_rule_models(self) -> list[str]:
        """The models whose lemmas rule ``lemmas`` makes: all but a sweep queue's (a GPU queue's models
        read their lemmas, made beside each other before the queue starts)."""
        in_sweeps = {m for q in self.queues if not q.gpu_queue for m in q.models}
        return [n for n in self.plan.models if n not in in_sweeps]

    def unqueued(self, names: list[str] | None = None) -> list[str]:
        """``names`` (default: every model) without the queued ones: the models of the per-model rules."""
        return [n for n in (self.plan.models if names is None else names) if n not in self.queued]

    # ------------------------------------------------------------------ one queue's files

    def _files(self, name: str) -> dict[str, Any]:
        """Every file of one model's steps (inputs and outputs), as its own rules name them."""
        if name not in self._file_cache:
            self._file_cache[name] = self._model_files(name)
        return self._file_cache[name]

    def _model_files(self, name: str) -> dict[str, Any]:
        plan = self.plan
        out, m = plan.out, name
        files: dict[str, Any] = {
            "templates": f"{out}/templates.parquet",
            "lexicon": f"{out}/lexicon.parquet",
            "lemmas": f"{out}/{m}/lemmas.parquet",
            "manifest": plan.shard_manifest(out).replace("{model}", m),
            "model_dirs": plan.model.local_model(m),
            "summaries": plan.per_group(f"{out}/{m}/{{group}}/summary.csv"),
            "per_group": [
                f"{out}/{m}/{g}/{n}" for g in plan.group_ids for n in ("scores.parquet", "tse.parquet", "summary.csv")
            ],
            "lemma_stats": f"{out}/{m}/lemma_stats.csv",
            "lemma_contexts": plan.acq.lemma_contexts(m) if m in plan.acq.models else None,
        }
        if plan.mt_on:
            files["forms"] = f"{plan.lmout}/{m}/forms.parquet"
            files["forms_manifest"] = plan.shard_manifest(plan.lmout).replace("{model}", m)
        if m in plan.sv.in_infer:
            files["simverb_data"] = plan.sv.data()
            files["simverb_splits"] = plan.sv.split_files()
            files["sims"] = f"{plan.sv.res}/{m}/similarities.parquet"
            files["verbs"] = f"{plan.sv.res}/{m}/verbs.csv"
        return files

    def inputs(self, q: Queue) -> list[str]:
        """The queue's inputs: the files its steps read that no step of it writes."""
        found: list[str] = []
        for m in q.models:
            f = self._files(m)
            found += [f["templates"], *f["model_dirs"]]
            found += [f["lemmas"]] if q.gpu_queue else [f["lexicon"]]
            if "forms" in f:
                found.append(f["forms"])
            if "simverb_data" in f:
                found += [f["simverb_data"], *f["simverb_splits"]]
        return list(dict.fromkeys(found))

    def outputs(self, q: Queue) -> list[str]:
        """The queue's outputs (SimVerb's, which Snakemake keeps before the job, in :meth:`kept_outputs`)."""
        found: list[str] = []
        for m in q.models:
            f = self._files(m)
            found += [] if q.gpu_queue else [f["lemmas"]]
            found += [f["manifest"], *([f["forms_manifest"]] if "forms_manifest" in f else [])]
            found += [*f["per_group"], f["lemma_stats"]]
            found += [f["lemma_contexts"]] if f["lemma_contexts"] else []
        return found

    def kept_outputs(self, q: Queue) -> list[str]:
        """SimVerb outputs of the queue's models (flagged ``update`` as in rule infer: their stamp decides)."""
        return [p for m in q.models for k in ("sims", "verbs") if (p := self._files(m).get(k))]

    # ------------------------------------------------------------------ one queue's steps

    def step_commands(self, name: str, gpu_queue: bool = False, threads: int | None = None) -> list[list[str]]:
        """The ``verbeval`` command lines (argument lists, without ``verbeval``) of one model's steps,
        exactly as its own rules (lemmas, infer, aggregate, lemma_stats, lemma_contexts) run them;
        ``threads``: the job's threads (``inference.threads``, as Snakemake cuts it to ``--cores``)."""
        plan = self.plan
        f = self._files(name)
        m = plan.models[name]
        o = plan.infer_options(name)
        inf = plan.config["inference"]
        agr = plan.agr
        steps: list[list[str]] = []
        if not gpu_queue:
            steps.append(
                [
                    "lemmas",
                    "--model",
                    m["id"],
                    *shlex.split(plan.model.source_options(name)),
                    "--lexicon",
                    f["lexicon"],
                    "--out",
                    f["lemmas"],
                ]
            )
        branches = plan.run_model_branches(
            SimpleNamespace(**{k: f[k] for k in ("forms", "simverb_data", "simverb_splits") if k in f}),
            _Outputs({k: f[k] for k in ("forms_manifest", "sims", "verbs") if k in f}),
        )
        steps.append(
            ["run-model", "--model", o["model"], *shlex.split(o["revision"]), "--kind", o["kind"], "--dtype", o["dtype"],
             "--device", inf["device"], *shlex.split(o["device_map"]), "--batch-size", str(o["batch_size"]),
             "--threads", str(inf["threads"] if threads is None else threads), "--top-k", str(inf["top_k"]), "--prepend-bos", o["bos"],
             "--random-init", o["random_init"], "--templates", f["templates"], "--lemmas", f["lemmas"],
             "--groups", ",".join(plan.group_ids), "--n-chunks", str(agr["chunks"]), *shlex.split(branches),
             "--no-progress", *(["--allow-nonfinite"] if inf["allow_nonfinite"] else []),
             "--manifest", f["manifest"]]
        )  # fmt: skip
        boot = agr["bootstrap"]
        steps.append(
            ["aggregate", "--templates", f["templates"], "--groups", ",".join(plan.group_ids), "--model-name", name,
             "--manifest", f["manifest"], "--top-cutoffs", plan.cutoffs("top_cutoffs"),
             "--bottom-cutoffs", plan.cutoffs("bottom_cutoffs"), "--resamples", str(boot["resamples"]),
             "--seed", str(boot["seed"]), "--confidence", str(boot["confidence"]),
             "--out-dir", f"{plan.out}/{name}"]
        )  # fmt: skip
        steps.append(
            ["lemma-stats", "--lemmas", f["lemmas"], "--shards", f["manifest"], "--model-name", name,
             "--out", f["lemma_stats"]]
        )  # fmt: skip
        if f["lemma_contexts"]:
            steps.append(
                ["lemma-contexts", "--lemmas", f["lemmas"], "--shards", f["manifest"], "--model-name", name,
                 *shlex.split(plan.acq.toy_option(name)), "--out", f["lemma_contexts"]]
            )  # fmt: skip
        return steps

    def jobs_option(self, q: Queue, threads: int | None = None) -> str:
        """``--job '...'`` of every step of the queue, in order (the shell words of rule queue_N)."""
        return " ".join(
            "--job " + shlex.quote(shlex.join(step))
            for m in q.models
            for step in self.step_commands(m, q.gpu_queue, threads)
        )

    def versions(self, q: Queue) -> list[str]:
        """Each model's version (its files or commit): a rerun trigger, as in the per-model rules."""
        return [self.plan.model.version(m) for m in q.models]

    def gpus(self, q: Queue, local: bool) -> int:
        return max(self.plan.model_gpus(m, local) for m in q.models)


class _Outputs(dict):
    """A job's named outputs as :meth:`verbeval.workflow.plan.Plan.run_model_branches` reads them."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

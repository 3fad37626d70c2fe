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

from verbeval.workflow.layout import Layout
from verbeval.workflow.model_steps import KEPT, ModelSteps
from verbeval.workflow.models import ModelsPlan
from verbeval.workflow.params import RuleRecord

#: the queue rules' names: ``queue_0``, ``queue_1``, ...
QUEUE_RULE_PREFIX = "queue_"


def is_queue_rule(rule: str) -> bool:
    """Whether ``rule`` is a queue rule (its DVC params: :func:`verbeval.workflow.steps.queue_config_keys`)."""
    return re.fullmatch(rf"{QUEUE_RULE_PREFIX}\d+", rule) is not None


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

    def __init__(self, layout: Layout, model: ModelsPlan, model_steps: ModelSteps, local_gpu: bool = False) -> None:
        """``local_gpu``: the run's jobs run on this machine (no SLURM profile), so the models that
        claim a GPU share it (:meth:`verbeval.workflow.plan.Plan.gpu_resource`)."""
        self.layout = layout
        self.model = model
        self.model_steps = model_steps
        inf = layout.config["inference"]
        self.post_workers: int = inf["post_workers"]
        found: list[tuple[str, list[str], bool]] = []  # each queue's label, models and whether a GPU's queue
        per_job = inf["revisions_per_job"]
        if per_job > 0:
            sweeps: dict[str, list[str]] = {}
            for name, m in layout.models.items():
                if m.get("checkpoint_of") is not None:
                    sweeps.setdefault(m["checkpoint_of"], []).append(name)
            for entry, names in sweeps.items():
                parts = _chunks(names, per_job)
                for k, part in enumerate(parts, 1):
                    found.append((entry if len(parts) == 1 else f"{entry}.{k}-of-{len(parts)}", part, False))
        if inf["gpu_queue"] and local_gpu:
            gpu_models = [
                n
                for n, m in layout.models.items()
                if m.get("checkpoint_of") is None and model.gpus(n, local=True) > 0 and m["device_map"] is None
            ]
            if len(gpu_models) > 1:
                found.append(("gpu", gpu_models, True))
        self.queues = [
            Queue(f"{QUEUE_RULE_PREFIX}{i}", re.sub(r"[^A-Za-z0-9._-]+", "_", label), models, gpu_queue)
            for i, (label, models, gpu_queue) in enumerate(found)
        ]
        self.queued = {m for q in self.queues for m in q.models}
        #: the models whose lemmas rule ``lemmas`` makes: all but a sweep queue's (a GPU queue's models
        #: read their lemmas, made beside each other before the queue starts)
        in_sweeps = {m for q in self.queues if not q.gpu_queue for m in q.models}
        self.lemma_rule_models = [n for n in layout.models if n not in in_sweeps]

    def unqueued(self, names: list[str] | None = None) -> list[str]:
        """``names`` (default: every model) without the queued ones: the models of the per-model rules."""
        return [n for n in (self.layout.models if names is None else names) if n not in self.queued]

    def record(self, q: Queue) -> RuleRecord:
        """What rule ``q.rule`` reads by name: its inputs (the files its steps read that no step of it
        writes, from each step's declared files: :data:`verbeval.workflow.model_steps.STEP_FILES`), its
        outputs (``steps``; ``kept``: SimVerb's, flagged ``update`` as in rule infer, their stamp decides),
        its log and params: ``jobs`` (``--job '...'`` of every step, in order: the command lines its
        models' own rules run, :meth:`verbeval.workflow.model_steps.ModelSteps.argv`), ``versions`` (each
        model's files or commit: a rerun trigger, as in the per-model rules) and ``post_workers``."""
        steps = self.model_steps
        inputs: dict[str, None] = {}
        outputs: dict[str, None] = {}  # ordered sets: a sweep's queue writes thousands of files
        for m in q.models:
            for command in steps.steps(m, q.gpu_queue):
                ins, outs = steps.step_files(command, m)
                inputs.update((p, None) for p in ins if p not in outputs)
                outputs.update((p, None) for p in outs)
        kept = [p for m in q.models for k in KEPT if (p := steps.files(m).get(k))]
        return RuleRecord(
            list(inputs),
            {"steps": [p for p in outputs if p not in set(kept)], "kept": kept},
            f"{self.layout.logs}/queues/{q.label}.log",
            {
                "jobs": lambda wc: " ".join(
                    "--job " + shlex.quote(shlex.join(steps.argv(c, m)))
                    for m in q.models
                    for c in steps.steps(m, q.gpu_queue)
                ),
                "versions": lambda wc: [self.model.version(m) for m in q.models],
                "post_workers": self.post_workers,
            },
        )

    def gpus(self, q: Queue, local: bool) -> int:
        return max(self.model.gpus(m, local) for m in q.models)

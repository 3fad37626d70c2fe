"""The plan of the acquisition analysis (``agreement.acquisition``) and of the toy models the
workflow trains (``toy_models``): which sweeps are analysed, their seeds (``models[].family`` and
``seed``), the checkpoint index's rows, the lemma-contexts tables, the training jobs and every
output under ``<results_dir>/agreement/acquisition``. Built by :class:`verbeval.workflow.plan.Plan`
as ``PLAN.acquisition``; ``workflow/rules/acquisition.smk`` binds its rules to it.

A *sweep* is a model entry with ``revisions`` (one model per checkpoint); a *family* is the sweeps
that share a ``family:`` (seeds of one model; an entry without one is a family of its own). Setup
errors name the entry's key and the cause on one line: a checkpoint without a step, a step listed
twice, a family whose members are not the same model (kind, dtype, toy recipe, architecture in
``config.json``, checkpoint steps), a seed label used twice, too few checkpoints (with
``enabled: true``).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from verbeval.acquisition.analysis import FIGURES, OUTPUTS
from verbeval.core.model_entries import (
    CHECKPOINT_AXES,
    checkpoint_axis,
    normalise_model_path,
    toy_checkpoint_folders,
    toy_model_specs,
)
from verbeval.workflow.layout import Layout
from verbeval.workflow.params import RuleRecord, alternatives, quoted

#: the tables and figures of the analysis (file names under <results_dir>/agreement/acquisition, and
#: figure stems under its figures/, one file per configured format): the analysis's own lists
TABLES = OUTPUTS

#: config.json keys that two seeds of one model must share (when their folders are already there)
ARCH_KEYS = ("model_type", "architectures", "hidden_size", "n_embd", "num_hidden_layers", "n_layer", "vocab_size")


@dataclass
class Sweep:
    """One model entry with revisions: its key path's index, name, family, seed label and checkpoint
    models, each checkpoint's position on agreement.checkpoint_axis (``steps``)."""

    index: int
    name: str
    family: str
    seed_given: Any
    seed: str
    models: list[dict[str, Any]]
    steps: list[Any]


@dataclass(frozen=True)
class ToyCheckpoint:
    """A checkpoint folder of a toy model the workflow trains (rule train_toy): the toy model's folder
    (the rule's output), its version (recipe and step: a rerun trigger) and its training recipe less
    what seeds differ in (seed, out)."""

    dir: str
    version: str
    recipe: dict[str, Any]


class AcquisitionPlan:
    """The acquisition analysis and the toy models (``PLAN.acquisition``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        cfg = self.config = layout.agreement["acquisition"]
        self.out = f"{layout.agreement_dir}/acquisition"
        self.figures_out = f"{self.out}/figures"
        self.index = f"{self.out}/checkpoints.csv"
        self.toy = toy_model_specs(layout.config)  # trained by rule train_toy, by out folder
        #: the checkpoint folders of the toy models, by folder (normalised)
        self.toy_checkpoints: dict[str, ToyCheckpoint] = {}
        for folder, (out, step) in toy_checkpoint_folders(layout.config).items():
            spec = self.toy[out]
            recipe = {k: v for k, v in spec.items() if k not in ("seed", "out", "threads")}
            recipe["corpus_seed"] = spec["seed"] if spec["corpus_seed"] is None else spec["corpus_seed"]  # in force
            version = json.dumps({k: v for k, v in spec.items() if k != "threads"}, sort_keys=True)
            self.toy_checkpoints[folder] = ToyCheckpoint(out, f"toy_model {version} step {step}", recipe)
        self.axis = checkpoint_axis(layout.config)  # agreement.checkpoint_axis: steps, tokens or words
        self.key, self.x_label = CHECKPOINT_AXES[self.axis]  # the revisions' key of that axis, its label
        self.sweeps = _sweeps(layout, cfg, self.key, self.axis)
        self.families = _families(layout, self.sweeps, self.toy_checkpoints)
        #: the checkpoint models whose lemma contexts the analysis reads, in config order
        self.models = [m["name"] for s in self.sweeps for m in s.models]
        self.on = bool(self.sweeps)
        # the frequency file: wordfreq, a file, or one a toy model's training job writes into its folder
        freq = self.frequencies = str(cfg["frequencies"])
        toy = next((out for out in self.toy if Path(normalise_model_path(freq)).parent == Path(out)), None)
        #: the frequency file (or the toy model folder it is written into) as an input
        self.frequency_inputs = [] if freq == "wordfreq" else [toy] if toy is not None else [freq]
        if self.on and freq != "wordfreq" and toy is None and not Path(freq).is_file():
            raise layout.error(
                ["agreement", "acquisition", "frequencies"],
                f"agreement.acquisition.frequencies: {freq}: no such file (wordfreq, or a CSV lemma,zipf|count)",
            )
        #: each rule's record, by rule name (``PLAN.acquisition.rules.acquisition``)
        self.rules = SimpleNamespace(**self._rules())
        #: the targets of rule all: the index, the analysis' tables and figures, the lemma contexts, the DVC plots
        acq = self.rules.acquisition.output
        self.outputs = (
            [self.index, *acq["tables"], *(f for stem in FIGURES for f in acq[stem])]
            + self.rules.acquisition_index.input["lemma_contexts"]
            + self.rules.dvc_acquisition_plots.output
            if self.on
            else []
        )

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.acquisition.steps import ACQUISITION, ACQUISITION_INDEX

        layout, toy = self.layout, self.toy
        logs, out = f"{layout.logs}/agreement/acquisition", layout.agreement_dir
        # --checkpoint MODEL FAMILY SEED STEP LEMMA_CONTEXTS of every analysed checkpoint (`verbeval
        # acquisition-index`), in config order, STEP its position on agreement.checkpoint_axis (the
        # step's setting --axis)
        index_args = [
            w
            for s in self.sweeps
            for m, pos in zip(s.models, s.steps)
            for w in (
                "--checkpoint",
                m["name"],
                s.family,
                s.seed,
                str(pos),
                f"{out}/{m['name']}/lemma_contexts.parquet",
            )
        ]
        train = {
            "seed": lambda wc: toy[wc.toy]["seed"],
            "steps": lambda wc: toy[wc.toy]["steps"],
            "checkpoints": lambda wc: ",".join(str(c) for c in toy[wc.toy]["checkpoints"]),
            "corpus_seed": lambda wc: (
                "" if toy[wc.toy]["corpus_seed"] is None else f"--corpus-seed {toy[wc.toy]['corpus_seed']}"
            ),
        }
        return {
            # a toy causal LM trained from scratch on a synthetic agreement corpus (a CPU job)
            "train_toy": RuleRecord(
                {"templates": f"{out}/templates.parquet", "lexicon": f"{out}/lexicon.parquet"},
                "{toy}",
                f"{layout.logs}/toy_models/{{toy}}.log",
                train,
                {"toy": alternatives(list(toy))},
            ),
            "acquisition_index": RuleRecord(
                {
                    "summary": f"{out}/summary_all.csv",
                    "lemma_contexts": [f"{out}/{m}/lemma_contexts.parquet" for m in self.models],
                },
                self.index,
                f"{logs}/checkpoints.log",
                {"args": quoted(index_args), "settings": shlex.join(ACQUISITION_INDEX.argv(layout.config))},
            ),
            "acquisition": RuleRecord(
                {"index": self.index, "frequencies": self.frequency_inputs},
                {
                    "tables": [f"{self.out}/{t}" for t in TABLES],
                    **{
                        stem: [f"{self.figures_out}/{stem}.{ext}" for ext in self.config["formats"]] for stem in FIGURES
                    },
                },
                f"{logs}/acquisition.log",
                # every setting of the step: the config is the single source of the values, each a rerun trigger
                {
                    "options": shlex.join(ACQUISITION.argv(layout.config)),
                    # the folder of the tables, from the job's outputs (a hardcoded prefix fails `snakemake --lint`)
                    "out_dir": lambda wc, output: os.path.dirname(output.tables[0]),
                },
            ),
            # the learning curves as DVC plot data, one CSV per group, the columns each sweep's
            # --series FAMILY SEED (in config order); x_label: the x axis of the DVC plots (dvc.yaml)
            "dvc_acquisition_plots": RuleRecord(
                f"{self.out}/curves.csv",
                layout.per_group(f"{self.out}/dvc/{{group}}.csv"),
                f"{logs}/dvc_plots.log",
                {
                    "series": quoted([w for s in self.sweeps for w in ("--series", s.family, s.seed)]),
                    "x_label": self.x_label,
                    "groups": ",".join(layout.group_ids),
                    "out_dir": lambda wc, output: os.path.dirname(output[0]),  # acquisition/dvc
                },
            ),
        }


# ------------------------------------------------------------------ sweeps and families (setup checks)


def _sweeps(layout: Layout, cfg: dict[str, Any], key: str, axis: str) -> list[Sweep]:
    """The analysed sweeps, each checked: enough checkpoints, each with its position on the axis
    (``key``: step, tokens or words), no position twice."""
    by_entry: dict[str, list[dict[str, Any]]] = {}
    for m in layout.checkpoints:
        by_entry.setdefault(str(m["checkpoint_of"]), []).append(dict(m))
    if cfg["enabled"] is False:
        return []
    sweeps: list[Sweep] = []
    names = iter(by_entry)
    for i, entry in enumerate(layout.config["models"]):
        if entry.get("revisions") is None:
            continue
        models = by_entry[next(names)]
        name, seed = str(models[0]["checkpoint_of"]), entry.get("seed")
        sweep = Sweep(
            i, name, str(entry.get("family") or name), seed, "" if seed is None else str(seed), models,
            [m[key] for m in models],
        )  # fmt: skip
        n, need = len(sweep.models), cfg["min_checkpoints"]
        if n < need:
            if cfg["enabled"]:
                raise layout.error(
                    ["models", i, "revisions"],
                    f"models.{i} ({sweep.name}): {n} checkpoint(s), the acquisition analysis needs at least "
                    f"{need} (agreement.acquisition.min_checkpoints) for its sigmoid fits",
                )
            continue
        seen: dict[int, int] = {}
        for j, (m, pos) in enumerate(zip(sweep.models, sweep.steps)):
            at = ["models", sweep.index, "revisions", j]
            if pos is None:
                what = "training step" if key == "step" else f"{key} seen (agreement.checkpoint_axis: {axis})"
                raise layout.error(
                    at,
                    f"models.{sweep.index}.revisions.{j} ({m['name']}): no {what}; the acquisition "
                    f"analysis needs one per checkpoint: set `{key}:`, or agreement.acquisition.enabled: false",
                )
            if pos in seen:
                raise layout.error(
                    at,
                    f"models.{sweep.index}.revisions.{j} ({m['name']}): {key} {pos} is also the {key} of "
                    f"item {seen[pos]}",
                )
            seen[pos] = j
        sweeps.append(sweep)
    if cfg["enabled"] and not sweeps:
        raise layout.error(
            ["agreement", "acquisition", "enabled"],
            "agreement.acquisition.enabled: true, but no model entry has revisions (a checkpoint sweep)",
        )
    return sweeps


def _families(layout: Layout, sweeps: list[Sweep], toys: Mapping[str, ToyCheckpoint]) -> dict[str, list[Sweep]]:
    """The sweeps by family, each family's seeds labelled once and checked to be seeds of one model."""
    families: dict[str, list[Sweep]] = {}
    for s in sweeps:
        families.setdefault(s.family, []).append(s)
    for family, members in families.items():
        first = members[0]
        labels: dict[str, Sweep] = {}
        for s in members:
            if len(members) > 1 and s.seed_given is None:
                s.seed = s.name
            if s.seed in labels:
                raise layout.error(
                    ["models", s.index, "seed"],
                    f"models.{s.index} ({s.name}): seed {s.seed!r} of family {family!r} is also the seed of "
                    f"models.{labels[s.seed].index} ({labels[s.seed].name})",
                )
            labels[s.seed] = s
            if s is not first:
                why = _not_same_model(first, s, toys)
                if why:
                    raise layout.error(
                        ["models", s.index, "family"],
                        f"models.{s.index} ({s.name}): family {family!r}: not a seed of the same model as "
                        f"models.{first.index} ({first.name}): {why}",
                    )
    return families


def _not_same_model(a: Sweep, b: Sweep, toys: Mapping[str, ToyCheckpoint]) -> str | None:
    """Why sweeps ``a`` and ``b`` are not seeds of one model, or None."""
    if sorted(a.steps) != sorted(b.steps):
        return f"checkpoint steps differ ({_steps_text(a.steps)} vs {_steps_text(b.steps)})"
    ma, mb = a.models[0], b.models[0]
    for key in ("kind", "dtype"):
        if ma[key] != mb[key]:
            return f"{key} differs ({ma[key]} vs {mb[key]})"
    toy_a, toy_b = toys.get(normalise_model_path(ma["id"])), toys.get(normalise_model_path(mb["id"]))
    if (toy_a is None) != (toy_b is None):
        return "one is a toy model trained by the workflow (toy_models), the other is not"
    if toy_a is not None and toy_b is not None:
        ta, tb = toy_a.recipe, toy_b.recipe
        diff = sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))
        return f"their toy_models differ in {', '.join(diff)}" if diff else None
    ca, cb = _arch(ma["id"]), _arch(mb["id"])
    if ca is not None and cb is not None:
        diff = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
        if diff:
            k = diff[0]
            return f"config.json {k} differs ({ca.get(k)} vs {cb.get(k)})"
    return None  # hub sweeps (e.g. PolyPythias seeds): kind, dtype and steps are all the plan can compare


def _steps_text(steps: Sequence[int | None]) -> str:
    shown = sorted(s for s in steps if s is not None)
    return "[" + ", ".join(map(str, shown[:6])) + (", ...]" if len(shown) > 6 else "]")


def _arch(model_id: str) -> dict[str, Any] | None:
    """The architecture keys (:data:`ARCH_KEYS`) of a local model folder's config.json, else None."""
    path = Path(model_id) / "config.json"
    if not path.is_file():
        return None
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {k: cfg[k] for k in ARCH_KEYS if k in cfg}

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
import shlex
from collections.abc import Mapping, Sequence
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


class Sweep:
    """One model entry with revisions: its key path, name, family, seed label and checkpoint models."""

    def __init__(self, index: int, entry: Mapping[str, Any], models: list[dict[str, Any]], key: str = "step") -> None:
        self.index = index
        self.name = str(models[0]["checkpoint_of"])
        self.family = str(entry.get("family") or self.name)
        self.seed_given = entry.get("seed")
        self.seed = "" if self.seed_given is None else str(self.seed_given)
        self.models = models
        #: each checkpoint's position on agreement.checkpoint_axis (``key``: step, tokens or words)
        self.steps = [m[key] for m in models]

    @property
    def where(self) -> list[str | int]:
        return ["models", self.index]


class AcquisitionPlan:
    """The acquisition analysis and the toy models (``PLAN.acquisition``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.config: dict[str, Any] = layout.agreement["acquisition"]
        self.out = f"{layout.agreement_dir}/acquisition"
        self.figures_out = f"{self.out}/figures"
        self.index = f"{self.out}/checkpoints.csv"
        self.toy = toy_model_specs(layout.config)  # trained by rule train_toy, by out folder
        self.toy_folders = toy_checkpoint_folders(layout.config)  # {out/step-N: (out, N)}
        self.axis = checkpoint_axis(layout.config)  # agreement.checkpoint_axis: steps, tokens or words
        self.key, self.x_label = CHECKPOINT_AXES[self.axis]  # the revisions' key of that axis, its label
        self.sweeps = self._sweeps()
        self.families = self._families()
        #: the checkpoint models whose lemma contexts the analysis reads, in config order
        self.models = [m["name"] for s in self.sweeps for m in s.models]
        self.on = bool(self.sweeps)
        self._check_frequencies()
        #: each rule's record, by rule name (``PLAN.acquisition.rules.acquisition``)
        self.rules = SimpleNamespace(**self._rules())

    def _rules(self) -> dict[str, RuleRecord]:
        from verbeval.acquisition.steps import ACQUISITION, ACQUISITION_INDEX

        layout = self.layout
        logs, out = f"{layout.logs}/agreement/acquisition", layout.agreement_dir

        def toy(key: str) -> Any:
            return lambda wc: self.train_params(wc.toy)[key]

        return {
            # a toy causal LM trained from scratch on a synthetic agreement corpus (a CPU job)
            "train_toy": RuleRecord(
                {"templates": f"{out}/templates.parquet", "lexicon": f"{out}/lexicon.parquet"},
                "{toy}",
                f"{layout.logs}/toy_models/{{toy}}.log",
                {k: toy(k) for k in ("seed", "steps", "checkpoints", "corpus_seed")},
                {"toy": alternatives(list(self.toy))},
            ),
            "acquisition_index": RuleRecord(
                {"summary": f"{out}/summary_all.csv", "lemma_contexts": [self.lemma_contexts(m) for m in self.models]},
                self.index,
                f"{logs}/checkpoints.log",
                {"args": self.index_args(), "settings": shlex.join(ACQUISITION_INDEX.argv(layout.config))},
            ),
            "acquisition": RuleRecord(
                {"index": self.index, "frequencies": self.frequency_inputs()},
                {"tables": [f"{self.out}/{t}" for t in TABLES], **{stem: self.images(stem) for stem in FIGURES}},
                f"{logs}/acquisition.log",
                # every setting of the step: the config is the single source of the values, each a rerun trigger
                {"options": shlex.join(ACQUISITION.argv(layout.config)), "out_dir": self.out},
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
                    "out_dir": f"{self.out}/dvc",
                },
            ),
        }

    # ------------------------------------------------------------------ sweeps and families

    def _sweeps(self) -> list[Sweep]:
        layout, cfg = self.layout, self.config
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
            sweep = Sweep(i, entry, by_entry[next(names)], self.key)
            n, need = len(sweep.models), cfg["min_checkpoints"]
            if n < need:
                if cfg["enabled"]:
                    raise layout.error(
                        ["models", i, "revisions"],
                        f"models.{i} ({sweep.name}): {n} checkpoint(s), the acquisition analysis needs at least "
                        f"{need} (agreement.acquisition.min_checkpoints) for its sigmoid fits",
                    )
                continue
            self._check_steps(sweep)
            sweeps.append(sweep)
        if cfg["enabled"] and not sweeps:
            raise layout.error(
                ["agreement", "acquisition", "enabled"],
                "agreement.acquisition.enabled: true, but no model entry has revisions (a checkpoint sweep)",
            )
        return sweeps

    def _check_steps(self, sweep: Sweep) -> None:
        seen: dict[int, int] = {}
        key = self.key
        for j, (m, pos) in enumerate(zip(sweep.models, sweep.steps)):
            at = ["models", sweep.index, "revisions", j]
            if pos is None:
                what = "training step" if key == "step" else f"{key} seen (agreement.checkpoint_axis: {self.axis})"
                raise self.layout.error(
                    at,
                    f"models.{sweep.index}.revisions.{j} ({m['name']}): no {what}; the acquisition "
                    f"analysis needs one per checkpoint: set `{key}:`, or agreement.acquisition.enabled: false",
                )
            if pos in seen:
                raise self.layout.error(
                    at,
                    f"models.{sweep.index}.revisions.{j} ({m['name']}): {key} {pos} is also the {key} of "
                    f"item {seen[pos]}",
                )
            seen[pos] = j

    def _families(self) -> dict[str, list[Sweep]]:
        families: dict[str, list[Sweep]] = {}
        for s in self.sweeps:
            families.setdefault(s.family, []).append(s)
        for family, members in families.items():
            first = members[0]
            labels: dict[str, Sweep] = {}
            for s in members:
                if len(members) > 1 and s.seed_given is None:
                    s.seed = s.name
                if s.seed in labels:
                    raise self.layout.error(
                        [*s.where, "seed"],
                        f"models.{s.index} ({s.name}): seed {s.seed!r} of family {family!r} is also the seed of "
                        f"models.{labels[s.seed].index} ({labels[s.seed].name})",
                    )
                labels[s.seed] = s
                if s is not first:
                    why = self._not_same_model(first, s)
                    if why:
                        raise self.layout.error(
                            [*s.where, "family"],
                            f"models.{s.index} ({s.name}): family {family!r}: not a seed of the same model as "
                            f"models.{first.index} ({first.name}): {why}",
                        )
        return families

    def _not_same_model(self, a: Sweep, b: Sweep) -> str | None:
        """Why sweeps ``a`` and ``b`` are not seeds of one model, or None."""
        if sorted(a.steps) != sorted(b.steps):
            return f"checkpoint steps differ ({_steps_text(a.steps)} vs {_steps_text(b.steps)})"
        ma, mb = a.models[0], b.models[0]
        for key in ("kind", "dtype"):
            if ma[key] != mb[key]:
                return f"{key} differs ({ma[key]} vs {mb[key]})"
        ta, tb = self.toy_recipe(ma["id"]), self.toy_recipe(mb["id"])
        if (ta is None) != (tb is None):
            return "one is a toy model trained by the workflow (toy_models), the other is not"
        if ta is not None and tb is not None:
            diff = sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))
            return f"their toy_models differ in {', '.join(diff)}" if diff else None
        ca, cb = _arch(ma["id"]), _arch(mb["id"])
        if ca is not None and cb is not None:
            diff = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
            if diff:
                k = diff[0]
                return f"config.json {k} differs ({ca.get(k)} vs {cb.get(k)})"
        return None  # hub sweeps (e.g. PolyPythias seeds): kind, dtype and steps are all the plan can compare

    def toy_recipe(self, model_id: str) -> dict[str, Any] | None:
        """The training recipe of a toy checkpoint folder, less what seeds differ in (seed, out), else None."""
        found = self.toy_folders.get(normalise_model_path(model_id))
        if found is None:
            return None
        spec = self.toy[found[0]]
        recipe = {k: v for k, v in spec.items() if k not in ("seed", "out", "threads")}
        recipe["corpus_seed"] = spec["seed"] if spec["corpus_seed"] is None else spec["corpus_seed"]  # the one in force
        return recipe

    # ------------------------------------------------------------------ frequencies

    @property
    def frequencies(self) -> str:
        return str(self.config["frequencies"])

    def _check_frequencies(self) -> None:
        freq = self.frequencies
        if not self.on or freq == "wordfreq" or self.frequency_toy() is not None:
            return
        if not Path(freq).is_file():
            raise self.layout.error(
                ["agreement", "acquisition", "frequencies"],
                f"agreement.acquisition.frequencies: {freq}: no such file (wordfreq, or a CSV lemma,zipf|count)",
            )

    def frequency_toy(self) -> str | None:
        """The toy model whose folder holds the frequency file (written by its training job), else None."""
        path = normalise_model_path(self.frequencies)
        return next((out for out in self.toy if Path(path).parent == Path(out)), None)

    def frequency_inputs(self) -> list[str]:
        """The frequency file (or the toy model folder it is written into) as an input."""
        if self.frequencies == "wordfreq":
            return []
        toy = self.frequency_toy()
        return [toy] if toy is not None else [self.frequencies]

    # ------------------------------------------------------------------ the toy models' jobs

    def toy_version(self, model_id: str) -> str | None:
        """The version of a toy checkpoint folder (its recipe and step: a rerun trigger), else None."""
        found = self.toy_folders.get(normalise_model_path(model_id))
        if found is None:
            return None
        out, step = found
        spec = {k: v for k, v in self.toy[out].items() if k != "threads"}
        return f"toy_model {json.dumps(spec, sort_keys=True)} step {step}"

    def toy_dir(self, model_id: str) -> str | None:
        """The toy model folder (rule train_toy's output) holding this checkpoint folder, else None."""
        found = self.toy_folders.get(normalise_model_path(model_id))
        return None if found is None else found[0]

    def train_params(self, toy: str) -> dict[str, Any]:
        spec = self.toy[toy]
        return {
            "seed": spec["seed"],
            "steps": spec["steps"],
            "checkpoints": ",".join(str(c) for c in spec["checkpoints"]),
            "threads": spec["threads"],
            "corpus_seed": "" if spec["corpus_seed"] is None else f"--corpus-seed {spec['corpus_seed']}",
        }

    # ------------------------------------------------------------------ the analysis' jobs

    def lemma_contexts(self, model: str) -> str:
        return f"{self.layout.agreement_dir}/{model}/lemma_contexts.parquet"

    def index_args(self) -> str:
        """``--checkpoint MODEL FAMILY SEED STEP LEMMA_CONTEXTS`` of every analysed checkpoint
        (`verbeval acquisition-index`), in config order, STEP its position on
        ``agreement.checkpoint_axis`` (the step's setting ``--axis``: ``PLAN.settings``)."""
        args: list[str] = []
        for s in self.sweeps:
            for m, pos in zip(s.models, s.steps):
                args += ["--checkpoint", m["name"], s.family, s.seed, str(pos), self.lemma_contexts(m["name"])]
        return quoted(args)

    def toy_option(self, model: str) -> str:
        """``--toy`` of `verbeval lemma-contexts` for a toy model's checkpoint (its figures say so)."""
        return "--toy" if self.toy_dir(self.layout.models[model]["id"]) is not None else ""

    def images(self, stem: str) -> list[str]:
        return [f"{self.figures_out}/{stem}.{ext}" for ext in self.config["formats"]]

    # ------------------------------------------------------------------ the DVC plots of the curves

    def outputs(self) -> list[str]:
        if not self.on:
            return []
        return (
            [self.index]
            + self.rules.acquisition.output["tables"]
            + [f for stem in FIGURES for f in self.images(stem)]
            + [self.lemma_contexts(m) for m in self.models]
            + self.rules.dvc_acquisition_plots.output
        )


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

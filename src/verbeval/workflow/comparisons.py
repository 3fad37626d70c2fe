"""The plan of the paired comparisons, the precision audit and the exports (``agreement.comparisons``,
``agreement.precision_audit``, ``agreement.export``): which pairs of models are compared, their files
and command lines; each model's Every Eval Ever export on request (``docs/export.md``).
Built by :class:`verbeval.workflow.plan.Plan` as ``PLAN.comparisons``; ``workflow/rules/comparisons.smk``
binds its rules to it.

The pairs (:attr:`ComparisonsPlan.pairs`, each ``(kind, a, b)``: b compared with a), in order:
the configured ones, each model of Table 2 against the first, each revision of a sweep against the
one before it; a pair already listed is not listed again. Each is one job for the whole run (the DAG
does not grow with a sweep's revisions).
"""

from __future__ import annotations

import shlex
from types import SimpleNamespace
from typing import Any

from verbeval.agreement.steps import COMPARE, EXPORT, FLIP_SET, PRECISION_AUDIT
from verbeval.core.config import config_sha256
from verbeval.core.steps import config_value
from verbeval.workflow.figures import FiguresPlan
from verbeval.workflow.layout import Layout
from verbeval.workflow.model_steps import AGGREGATE_FILES, ModelSteps, model_settings, variant_paths
from verbeval.workflow.params import RuleRecord, alternatives, quoted

#: the clustering whose comparisons read each model's shards and lemmas (``agreement.bootstrap.cluster``)
LEMMA_DRAW = "template_and_lemma"
#: those files (names of :meth:`verbeval.workflow.model_steps.ModelSteps.files`) and ``verbeval compare``'s
#: options for them
FORMS = {"manifest": "shards", "lemmas": "lemmas"}


class ComparisonsPlan:
    """The comparisons and the precision audit, in ``<results_dir>/agreement``."""

    #: each rule's named outputs (names of :attr:`files`)
    RULE_FILES: dict[str, tuple[str, ...]] = {
        "comparisons": ("csv", "first_gains", "figure"),
        "comparisons_page": ("page",),
        "precision_audit": ("audit",),
        "precision_audit_page": ("audit_page",),
    }

    def __init__(self, layout: Layout, figures: FiguresPlan, model_steps: ModelSteps) -> None:
        self.layout = layout
        self.model_steps = model_steps
        self.config: dict[str, Any] = layout.agreement["comparisons"]
        self.audit_config: dict[str, Any] = layout.agreement["precision_audit"]
        self.pairs = _pairs(layout, self.config) if self.config["enabled"] else []
        #: the models of the pairs, in order of first appearance
        self.models = list(dict.fromkeys(m for _, a, b in self.pairs for m in (a, b)))
        self.on = bool(self.pairs)
        self.audit_on = bool(self.audit_config["enabled"])
        self.export_config: dict[str, Any] = layout.agreement["export"]
        #: every model's Every Eval Ever export (agreement.export.every_eval_ever)
        self.export_on = bool(self.export_config["every_eval_ever"])
        #: (model, dtype) of each rerun in another dtype (agreement.precision_audit.dtypes): each model of
        #: Table 2 in each listed dtype but its own
        self.dtype_runs: list[tuple[str, str]] = [
            (m, d) for d in self.audit_config["dtypes"] for m in layout.table_models if layout.models[m]["dtype"] != d
        ]
        out = layout.agreement_dir
        #: the files by name, in the order rule all asks for them; the figure one per format
        self.files: dict[str, Any] = {
            "csv": f"{out}/comparisons.csv",
            "first_gains": f"{out}/first_gains.csv",
            "figure": [f"{out}/figures/comparisons.{ext}" for ext in figures.config["formats"]],
            "page": f"{out}/comparisons.html",
            "audit": f"{out}/precision_audit.csv",
            "audit_page": f"{out}/precision_audit.html",
        }
        #: each rule's record, by rule name (``PLAN.comparisons.rules.comparisons``)
        self.rules = SimpleNamespace(**self._rules())
        #: the files of rule all: the comparisons' when there are pairs, the audit's when it is on, the flip sets
        shown = [*(self.RULE_FILES["comparisons"] + ("page",) if self.on else ())]
        shown += ["audit", "audit_page"] if self.audit_on else []
        self.outputs = [
            f for k in shown for f in ([self.files[k]] if isinstance(self.files[k], str) else self.files[k])
        ]
        self.outputs += [variant_paths(layout, m, d)[k] for m, d in self.dtype_runs for k in ("flips", "comparison")]
        self.outputs += [self.export_dir(m) for m in layout.models] if self.export_on else []

    def export_dir(self, model: str) -> str:
        """The folder of model ``model``'s Every Eval Ever export (``{model}``: the rule's pattern)."""
        return f"{self.layout.agreement_dir}/{model}/every_eval_ever"

    def _rules(self) -> dict[str, RuleRecord]:
        layout, steps, f = self.layout, self.model_steps, self.files
        logs, groups = f"{layout.logs}/agreement", ",".join(layout.group_ids)
        models = list(layout.models)
        variant = variant_paths(layout, "{model}", "{dtype}")
        templates = f"{layout.agreement_dir}/templates.parquet"

        def aggregates(names: list[str]) -> list[str]:
            return [p for m in names for kind in ("tse", "scores", "summary") for p in steps.files(m)[kind]]

        def flip_inputs(model: str, dtype: str) -> list[str]:
            own, other = steps.files(model), variant_paths(layout, model, dtype)
            return [*own["tse"], *own["scores"], own["manifest"], own["lemmas"], *other["tse"], *other["scores"],
                    other["manifest"]]  # fmt: skip

        # the models and dtypes of the reruns in another dtype (their rules' wildcard constraints)
        dtypes = {
            "model": alternatives(list(dict.fromkeys(m for m, _ in self.dtype_runs))),
            "dtype": alternatives(list(dict.fromkeys(d for _, d in self.dtype_runs))),
        }
        wheel = self.export_config["schemas"]
        # template_and_lemma draws lemmas for EW and MW: the compared models' shards and lemmas (else none)
        lemma_models = self.models if config_value(layout.config, COMPARE.setting("cluster").key) == LEMMA_DRAW else []
        return {
            "export_every_eval_ever": RuleRecord(
                {
                    "templates": templates,
                    "manifest": lambda wc: steps.files(wc.model)["manifest"],
                    "aggregates": lambda wc: aggregates([wc.model]),
                    **({"schemas": wheel} if wheel else {}),
                },
                {"export": self.export_dir("{model}")},
                f"{logs}/{{model}}/export_every_eval_ever.log",
                {
                    "results": lambda wc: f"{layout.agreement_dir}/{wc.model}",
                    "groups": groups,
                    "schemas": quoted(["--schemas", wheel]) if wheel else "",
                    "config_sha256": config_sha256(layout.config),
                    "settings": shlex.join(EXPORT.argv(layout.config)),
                },
                {"model": alternatives(models)},
            ),
            "comparisons": RuleRecord(
                [*aggregates(self.models), *[steps.files(m)[k] for m in lemma_models for k in FORMS], templates],
                {k: f[k] for k in self.RULE_FILES["comparisons"]},
                f"{logs}/comparisons.log",
                {
                    "named": quoted(  # each model's aggregates (and, under template_and_lemma, shards and lemmas)
                        [f"--results={m}={layout.agreement_dir}/{m}" for m in self.models]
                        + [f"--{o}={m}={steps.files(m)[k]}" for m in lemma_models for k, o in FORMS.items()]
                    ),
                    "templates": lambda wc, input: input[-1],  # the run's templates.parquet (its last input)
                    "groups": groups,
                    "pairs": quoted([f"--pair={k}={a},{b}" for k, a, b in self.pairs]),
                    "settings": shlex.join(COMPARE.argv(layout.config)),
                },
            ),
            "comparisons_page": RuleRecord(f["csv"], f["page"], f"{logs}/comparisons_page.log"),
            "precision_audit": RuleRecord(
                aggregates(models) + [steps.files(m)[k] for m in models for k in ("manifest", "lemmas")],
                {"audit": f["audit"]},
                f"{logs}/precision_audit.log",
                {
                    "named": quoted(
                        [
                            word
                            for m in models
                            for word in (
                                f"--results={m}={layout.agreement_dir}/{m}",
                                f"--shards={m}={steps.files(m)['manifest']}",
                                f"--lemmas={m}={steps.files(m)['lemmas']}",
                            )
                        ]
                    ),
                    "groups": groups,
                    "settings": shlex.join(PRECISION_AUDIT.argv(layout.config)),
                },
            ),
            "precision_audit_page": RuleRecord(f["audit"], f["audit_page"], f"{logs}/precision_audit_page.log"),
            # the model's run in another dtype: rule infer's command (no forms or SimVerb branch)
            "precision_infer": RuleRecord(
                {k: v for k, v in steps.rules.infer.input.items() if k in ("templates", "lemmas", "model")},
                {"manifest": variant["manifest"]},
                f"{logs}/{{model}}/precision_{{dtype}}_infer.log",
                {
                    **{k: v for k, v in steps.rules.infer.params.items() if k != "version"},
                    "model_settings": lambda wc, threads: shlex.join(
                        model_settings(layout, wc.model, threads, wc.dtype)
                    ),
                    "branches": "",
                },
                dtypes,
            ),
            "precision_aggregate": RuleRecord(
                {"templates": templates, "manifest": variant["manifest"]},
                {k: variant[k] for k in AGGREGATE_FILES},
                f"{logs}/{{model}}/precision_{{dtype}}_aggregate.log",
                {
                    **steps.rules.aggregate.params,
                    "out_dir": lambda wc: variant_paths(layout, wc.model, wc.dtype)["out_dir"],
                },
                dtypes,
            ),
            "flip_set": RuleRecord(
                lambda wc: flip_inputs(wc.model, wc.dtype),
                {"flips": variant["flips"], "comparison": variant["comparison"]},
                f"{logs}/{{model}}/precision_{{dtype}}_flips.log",
                {
                    "reference_results": lambda wc: f"{layout.agreement_dir}/{wc.model}",
                    "reference_shards": lambda wc: steps.files(wc.model)["manifest"],
                    "other_results": lambda wc: variant_paths(layout, wc.model, wc.dtype)["out_dir"],
                    "other_shards": lambda wc: variant_paths(layout, wc.model, wc.dtype)["manifest"],
                    "lemmas": lambda wc: steps.files(wc.model)["lemmas"],
                    "groups": groups,
                    "settings": shlex.join(FLIP_SET.argv(layout.config)),
                },
                dtypes,
            ),
        }


def _pairs(layout: Layout, config: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The pairs ``(kind, a, b)`` (see the module docstring), each model checked to be one of the run."""
    pairs: list[tuple[str, str, str]] = []
    seen = set()

    def add(kind: str, a: str, b: str) -> None:
        if a != b and (a, b) not in seen:
            seen.add((a, b))
            pairs.append((kind, a, b))

    for i, (a, b) in enumerate(config["pairs"]):
        for m in (a, b):
            if m not in layout.models:
                raise layout.error(
                    ["agreement", "comparisons", "pairs", i],
                    f"agreement.comparisons.pairs: {m!r} is not a model of the run (models: {', '.join(layout.models)})",
                )
        add("configured", a, b)
    if config["against_first"] and layout.table_models:
        first = layout.table_models[0]
        for m in layout.table_models[1:]:
            add("against_first", first, m)
    if config["consecutive_revisions"]:
        sweeps: dict[str, list[str]] = {}
        for m in layout.checkpoints:
            sweeps.setdefault(str(m["checkpoint_of"]), []).append(str(m["name"]))
        for revisions in sweeps.values():
            for a, b in zip(revisions, revisions[1:]):
                add("consecutive", a, b)
    return pairs

"""The agreement study's workflow steps that read the models' aggregates after Table 2: the paired
comparisons, the precision audit, the flip sets and the Every Eval Ever export, each declared once
(:class:`verbeval.core.steps.Step`). :mod:`verbeval.agreement.steps` declares the settings they share
with its other steps (each setting's key is written in a steps module only), passes them here, and
names the steps (``COMPARE``, ``PRECISION_AUDIT``, ``FLIP_SET``, ``EXPORT``, and ``STEPS``)."""

from __future__ import annotations

from verbeval.core.steps import Input, Output, Setting, Step


def comparison_steps(
    *, bootstrap: tuple[Setting, ...], cluster: Setting, fragile_ulps: Setting, templates_file: Input, formats_key: str
) -> tuple[Step, Step, Step, Step]:
    """``(compare, precision-audit, flip-set, export)``, declared with the study's shared settings and
    files: the agreement CIs' ``bootstrap`` settings and ``cluster``, the audit's ``fragile_ulps``, the
    ``templates_file`` input and the figures' ``formats_key``."""
    #: paired comparisons of the run's models (rule comparisons): McNemar's exact test per group for TSE,
    #: paired bootstrap differences for EW and MW (:mod:`verbeval.agreement.scores.paired`)
    compare = Step(
        "compare",
        settings=(*bootstrap, cluster),
        keys=(
            "models",
            "agreement.groups",
            "agreement.custom_groups",
            "agreement.table_models",
            "agreement.comparisons",
            formats_key,
        ),
        rules=("comparisons",),
        inputs=(
            Input(
                "--results",
                "a model's aggregate folder (<DIR>/<group>/tse.parquet, scores.parquet); repeatable",
                action="append",
                metavar="NAME=DIR",
            ),
            Input(
                "--templates",
                "the templates.parquet the results were scored on (every model's, or NAME's); each pair's rows are "
                "paired by their template identity (source:line), and runs that differ in it are refused "
                "(without: paired by row number)",
                action="append",
                default=[],
                metavar="[NAME=]PATH",
                required=False,
            ),
            Input(
                "--shards",
                "a model's shard manifest, whose form statistics EW and MW at p = 1 are rescored with under "
                "agreement.bootstrap.cluster template_and_lemma (read then only, and then needed for every model "
                "compared); repeatable",
                action="append",
                default=[],
                metavar="NAME=PATH",
                required=False,
            ),
            Input(
                "--lemmas",
                "a model's lemmas.parquet (the lemmas of its shards), for template_and_lemma as --shards; repeatable",
                action="append",
                default=[],
                metavar="NAME=PATH",
                required=False,
            ),
        ),
        outputs=(
            Output("--csv", "output: comparisons.csv (one row per pair, group and metric)"),
            Output("--first-gains", "output: first_gains.csv (a sweep's first significant gain)"),
            Output("--figure", "output: the forest figure, one path per format", nargs="+"),
        ),
    )

    #: one model's ties and fragile decisions (rule precision_audit; :mod:`verbeval.agreement.scores.precision`)
    precision_audit = Step(
        "precision-audit",
        settings=(fragile_ulps,),
        keys=("models", "agreement.groups", "agreement.custom_groups", "agreement.precision_audit"),
        rules=("precision_audit",),
        inputs=(
            Input(
                "--results",
                "a model's aggregate folder (<DIR>/<group>/tse.parquet); repeatable, one per model",
                action="append",
                metavar="NAME=DIR",
            ),
            Input(
                "--shards", "a model's shard manifest", action="append", default=[], metavar="NAME=PATH", required=False
            ),
            Input(
                "--lemmas", "a model's lemmas.parquet", action="append", default=[], metavar="NAME=PATH", required=False
            ),
        ),
        outputs=(Output("--out", "output: precision_audit.csv (a row per model, group and metric)"),),
    )

    #: a model's flip set against its run in another dtype (rule flip_set; agreement.precision_audit.dtypes)
    flip_set = Step(
        "flip-set",
        settings=bootstrap,
        keys=("models", "agreement.groups", "agreement.custom_groups", "agreement.precision_audit"),
        rules=("flip_set",),
        inputs=(
            *(
                Input(f"--{side}-{what}", f"the {side} run's {help}")
                for side in ("reference", "other")
                for what, help in (("results", "aggregate folder"), ("shards", "shard manifest"))
            ),
            Input("--lemmas", "the model's lemmas.parquet (both runs')"),
        ),
        outputs=(
            Output("--flips", "output: flips.csv (one row per flipped decision)"),
            Output("--comparison", "output: the paired comparison of the two runs (CSV)"),
        ),
    )

    #: one model's results in the Every Eval Ever schema (docs/export.md); its CIs' settings are read from
    #: the results (summary.csv), so it has no settings of its own
    export = Step(
        "export",
        keys=("agreement.groups", "agreement.custom_groups", "agreement.export"),
        rules=("export_every_eval_ever",),
        inputs=(
            templates_file,
            Input("--manifest", "the model's shard manifest (verbeval infer --manifest): model id, revision, dtype"),
            Input("--results", "the model's aggregate folder (verbeval aggregate --out-dir): <group>/summary.csv, ..."),
            Input(
                "--configfile",
                "the run's configuration (YAML), whose sha256 (canonical JSON of the validated config, defaults "
                "filled) the export names; its agreement.bootstrap must be the one the results were aggregated with",
                required=False,
            ),
            Input(
                "--schemas",
                "every_eval_ever-0.3.0-py3-none-any.whl to read the schemas from (sha256 checked); "
                "default: the installed every-eval-ever (pip install 'verbeval[export]', Python >= 3.12)",
                required=False,
            ),
        ),
        outputs=(
            Output(
                "--out-dir", "writes <out-dir>/data/verbeval/<developer>/<model>/<uuid>.json and <uuid>_samples.jsonl"
            ),
        ),
    )
    return compare, precision_audit, flip_set, export

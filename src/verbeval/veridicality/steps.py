"""The veridicality study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`): the
configuration keys that each command takes as options, and the other keys its jobs depend on. The
command's options, the rule's command line, the DVC params and the API's defaults derive from them."""

from __future__ import annotations

from verbeval.core.steps import INFERENCE_DEVICE, Input, Output, Setting, Step

#: NLI probabilities of one model (rule veridicality_predict: a real NLI model, with the counterfactual
#: pairs' branch when it is on) or the released ones of the pseudo-model (rule veridicality_released:
#: no model runs, no settings)
VERIDICALITY_PREDICT = Step(
    "veridicality-predict",
    settings=(
        Setting("veridicality.batch_size", "--batch-size", int, "premise-hypothesis pairs per forward pass"),
        INFERENCE_DEVICE,
    ),
    keys=("veridicality.source",),
    rules=("veridicality_predict", "veridicality_released"),
    rule_keys={"veridicality_predict": ("veridicality.models", "veridicality.counterfactual")},
    bare_rules=("veridicality_released",),
    inputs=(
        Input("--data", "verb_veridicality_evaluation.tsv (Ross & Pavlick 2019)"),
        Input(
            "--counterfactual-pairs",
            "manipulated pairs (verbeval veridicality-counterfactuals --pairs): also predict them with the "
            "same loaded model, as veridicality-counterfactual-predict would (real NLI models only)",
            required=False,
        ),
    ),
    outputs=(
        Output("--out", "output: predictions parquet (one row per item and environment)"),
        Output("--counterfactual-out", "output: NLI probabilities per manipulated pair (parquet)", required=False),
    ),
)

#: the per-signature table and the human-vs-model scatter of one model
VERIDICALITY_TABLE = Step(
    "veridicality-table",
    keys=("veridicality.models", "veridicality.formats"),
    rules=("veridicality_table",),
    inputs=(Input("--predictions", "predictions.parquet (verbeval veridicality-predict)"),),
    outputs=(
        Output("--csv", "output: n, accuracy, Pearson, Spearman per signature and environment (CSV)"),
        Output("--md", "output: the same table in Markdown"),
        Output("--tex", "output: the same table in LaTeX"),
        Output("--scatter-csv", "output: the points of the scatter figure (CSV, a DVC plot)", required=False),
        Output("--figure", "output: scatter figure files (.png, .pdf, .svg)", nargs="+", default=[], required=False),
    ),
)

#: the manipulated pairs (section 6.3 of Ross & Pavlick 2019)
VERIDICALITY_COUNTERFACTUALS = Step(
    "veridicality-counterfactuals",
    settings=(
        Setting("veridicality.counterfactual.samples", "--samples", int, "replacement verbs per item and manipulation"),
        Setting("veridicality.counterfactual.seed", "--seed", int, "seed of the replacement-verb sampling"),
    ),
    # veridicality.counterfactual whole: the DVC params name the section (enabled decides the rule runs)
    keys=("veridicality.source", "veridicality.counterfactual"),
    rules=("veridicality_counterfactuals",),
    inputs=(Input("--data", "verb_veridicality_evaluation.tsv"),),
    outputs=(
        Output("--pairs", "output: manipulated pairs (parquet)"),
        Output("--unhandled", "output: CSV: manipulation, item, environment, reason"),
        Output("--coverage", "output: CSV: handled and unhandled items per manipulation"),
    ),
)

#: KL tables 7 and 8 of one real NLI model
VERIDICALITY_KL = Step(
    "veridicality-kl",
    keys=("veridicality.models", "veridicality.counterfactual"),
    rules=("veridicality_kl",),
    inputs=(
        Input("--predictions", "predictions.parquet of the original pairs"),
        Input("--counterfactuals", "predictions of the manipulated pairs"),
    ),
    outputs=(
        Output(
            "--table7",
            "output: Table 7 (verb replacements) as CSV, Markdown and LaTeX",
            nargs=3,
            metavar=("CSV", "MD", "TEX"),
        ),
        Output(
            "--table8",
            "output: Table 8 (complement type swap) as CSV, Markdown and LaTeX",
            nargs=3,
            metavar=("CSV", "MD", "TEX"),
        ),
    ),
)

#: every step declared here
STEPS: tuple[Step, ...] = (VERIDICALITY_PREDICT, VERIDICALITY_TABLE, VERIDICALITY_COUNTERFACTUALS, VERIDICALITY_KL)

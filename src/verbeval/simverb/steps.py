"""The SimVerb-3500 study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`): the
configuration keys that each command takes as options, and the other keys its jobs depend on. The
command's options, the rule's command line, the DVC params and the API's defaults derive from them."""

from __future__ import annotations

from verbeval.core.cliutil import float_list
from verbeval.core.steps import INFERENCE_DEVICE, INFERENCE_THREADS, Input, Output, Setting, Step, bootstrap_settings

#: simverb-score's settings that run-model's SimVerb branch takes too (as ``--simverb-...``)
MULTI_TOKEN = Setting(
    "simverb.multi_token",
    "--multi-token",
    str,
    "mean over a multi-token verb's sub-tokens, or leave its pairs out",
    choices=("mean", "skip"),
)
BATCH_SIZE = Setting("simverb.batch_size", "--batch-size", int, "verbs per forward pass")
SCORE_SETTINGS = (MULTI_TOKEN, BATCH_SIZE)

#: one model's cosines (simverb-table, simverb-join)
SIMILARITIES = Input("--similarities", "similarities parquet (verbeval simverb-score --out)")

#: one model's cosine per pair and representation (rule simverb_score; a model scored in its agreement
#: job runs it as run-model's SimVerb branch: rule infer, whose keys list these)
SIMVERB_SCORE = Step(
    "simverb-score",
    settings=(*SCORE_SETTINGS, INFERENCE_DEVICE),
    keys=(
        "models",
        "simverb.source",
        "simverb.split_sources",
        "simverb.models",
        "simverb.frames",
        INFERENCE_THREADS.key,
    ),
    rules=("simverb_score",),
    inputs=(
        Input("--data", "SimVerb-3500.txt (the full 3,500-pair file)"),
        Input(
            "--split",
            "an official split file (dev=SimVerb-500-dev.txt, test=SimVerb-3000-test.txt); repeatable",
            action="append",
            default=[],
            metavar="NAME=PATH",
            required=False,
        ),
    ),
    outputs=(
        Output("--out", "output: similarities parquet (one row per pair and representation)"),
        Output("--verbs", "output: per-verb tokens and coverage (CSV)"),
    ),
)

#: Spearman's rho with bootstrap CIs per representation and subset, the layer curve and the scatter
SIMVERB_TABLE = Step(
    "simverb-table",
    settings=(
        *bootstrap_settings("simverb.bootstrap"),
        Setting("simverb.bins", "--bins", float_list, "comma-separated rating range edges on the 0-10 scale"),
    ),
    # simverb.bootstrap whole: the DVC params name the section (its keys are the settings above)
    keys=("simverb.bootstrap", "simverb.formats"),
    rules=("simverb_table",),
    inputs=(SIMILARITIES, Input("--verbs", "per-verb CSV (verbeval simverb-score --verbs)")),
    outputs=(
        Output("--csv", "output: rho with CIs per representation and subset (CSV)"),
        Output("--md", "output: the table in Markdown"),
        Output("--tex", "output: the table in LaTeX"),
        Output("--layers-csv", "output: data of the per-layer figure (CSV)"),
        Output(
            "--metrics-json",
            "output: JSON with the best representation, verb coverage and rho of every representation on the full set",
            required=False,
        ),
        Output(
            "--layers-figure",
            "output: per-layer figure files (.png, .pdf, .svg)",
            nargs="+",
            default=[],
            required=False,
        ),
        Output(
            "--scatter-figure",
            "output: human-vs-model scatter files of the best representation (.png, .pdf, .svg)",
            nargs="+",
            default=[],
            required=False,
        ),
    ),
)

#: per-verb rank errors joined with the agreement study's per-lemma statistics
SIMVERB_JOIN = Step(
    "simverb-join",
    keys=("simverb.agreement_join",),
    rules=("simverb_join",),
    inputs=(SIMILARITIES, Input("--lemma-stats", "lemma_stats.csv of the same model (verbeval lemma-stats)")),
    outputs=(
        Output("--out", "output: per-verb joined rows (CSV)"),
        Output("--summary", "output: per-representation correlations (CSV)"),
    ),
)

#: every step declared here
STEPS: tuple[Step, ...] = (SIMVERB_SCORE, SIMVERB_TABLE, SIMVERB_JOIN)

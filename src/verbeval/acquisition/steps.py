"""The acquisition study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`)."""

from __future__ import annotations

from verbeval.agreement.steps import LEMMAS_FILE
from verbeval.core.cliutil import format_list
from verbeval.core.model_entries import CHECKPOINT_AXES
from verbeval.core.steps import Input, Output, Setting, Step

KEY = "agreement.acquisition"

#: one scored checkpoint's per-lemma, per-context correctness (from its shards)
LEMMA_CONTEXTS = Step(
    "lemma-contexts",
    rules=("lemma_contexts",),
    inputs=(
        LEMMAS_FILE,
        Input(
            "--shards",
            "the model's shards (every chunk of each group), or its shard manifest (every shard it lists)",
            nargs="+",
        ),
    ),
    outputs=(Output("--out", "output: lemma_contexts.parquet"),),
)

#: the analysis of the sweeps (:class:`verbeval.acquisition.analysis.AcquisitionSettings`: its
#: settings by their key's last part)
ACQUISITION = Step(
    "acquisition",
    settings=(
        Setting(
            f"{KEY}.frequencies",
            "--frequencies",
            str,
            "lemma frequency source: wordfreq, or a CSV with columns lemma and zipf or count",
        ),
        Setting(f"{KEY}.resamples", "--bootstrap", int, "bootstrap resamples of the AoA and correlation CIs (0: none)"),
        Setting(f"{KEY}.seed", "--seed", int, "bootstrap seed"),
        Setting(f"{KEY}.confidence", "--confidence", float, "confidence level of the CIs"),
        Setting(
            f"{KEY}.min_checkpoints",
            "--min-checkpoints",
            int,
            "fewest distinct steps of a family seed (and of a curve) for a sigmoid fit",
        ),
        Setting(
            f"{KEY}.min_rise",
            "--min-rise",
            float,
            "a curve rises above chance when a share (and the fit's upper asymptote) exceeds 0.5 + this",
        ),
        Setting(f"{KEY}.min_r2", "--min-r2", float, "a fit with a lower R^2 has failed"),
        Setting(
            f"{KEY}.changepoint_penalty",
            "--changepoint-penalty",
            float,
            "beta of the changepoint penalty beta * sigma^2 * ln(T), segments linear in log step",
        ),
        Setting(
            f"{KEY}.outlier_sd",
            "--outlier-sd",
            float,
            "an AoA-frequency outlier lies beyond this many robust SDs of the regression's residuals",
        ),
        Setting(f"{KEY}.formats", "--formats", format_list, "comma-separated figure formats (png, pdf, svg)"),
    ),
    keys=(f"{KEY}.enabled",),
    rules=("acquisition",),
    inputs=(Input("--index", "checkpoints.csv: one row per scored checkpoint"),),
    outputs=(Output("--out", "output folder"),),
)

#: the x axis of the checkpoint sweeps: what a checkpoint's position counts (the index's column axis)
CHECKPOINT_AXIS = Setting(
    "agreement.checkpoint_axis",
    "--axis",
    str,
    "what STEP holds: training steps, tokens seen or words seen; other than steps, the index gets a column "
    "axis naming it, and the analysis reports AoA in that unit",
    choices=tuple(CHECKPOINT_AXES),
)

#: a toy model trained from scratch (its per-entry values, toy_models[].seed, steps, ...: the plan's
#: params of its job, the ``train_toy`` record of :class:`verbeval.workflow.acquisition.AcquisitionPlan`)
TRAIN_TOY = Step(
    "train-toy",
    keys=("toy_models",),
    rules=("train_toy",),
    inputs=(
        Input("--templates", "the template table (templates.parquet)", metavar="PARQUET"),
        Input("--lexicon", "the verb lexicon (lexicon.parquet)", metavar="PARQUET"),
    ),
    outputs=(
        Output(
            "--out",
            "output folder (built beside it, then renamed into place; an existing folder is replaced only "
            "when it is an earlier train-toy output, else refused)",
            metavar="DIR",
        ),
    ),
)

#: the checkpoint index of the sweeps (which models are analysed: models, enabled, min_checkpoints)
ACQUISITION_INDEX = Step(
    "acquisition-index",
    settings=(CHECKPOINT_AXIS,),
    keys=("models", f"{KEY}.enabled", f"{KEY}.min_checkpoints"),
    rules=("acquisition_index",),
    inputs=(Input("--summary", "summary_all.csv holding every checkpoint model's rows"),),
    outputs=(Output("--out", "output: checkpoints.csv"),),
)

#: the learning curves as DVC plot data (the checkpoint axis: the x label of the DVC plots, a param of
#: the rule, not an option of the command)
DVC_ACQUISITION_PLOTS = Step("dvc-acquisition-plots", keys=(CHECKPOINT_AXIS.key,), rules=("dvc_acquisition_plots",))

#: every step declared here
STEPS: tuple[Step, ...] = (LEMMA_CONTEXTS, ACQUISITION, TRAIN_TOY, ACQUISITION_INDEX, DVC_ACQUISITION_PLOTS)

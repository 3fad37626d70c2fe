"""The agreement study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`): the
configuration keys that each command takes as options, and the other keys its jobs depend on. The
command's options, the rule's command line, the DVC params and the in-process API's defaults are
derived from these declarations."""

from __future__ import annotations

import argparse

from verbeval.core.cliutil import float_list
from verbeval.core.steps import INFERENCE_DEVICE, Setting, Step, bootstrap_settings


def positive_int(text: str) -> int:
    """An option's positive integer (``--min-contexts``)."""
    if text.strip().isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")


def optional_int(text: str) -> int | None:
    """An option's integer, or ``none`` (null in the configuration: the command's default)."""
    return None if text.strip().lower() in ("none", "null", "") else int(text)


# ------------------------------------------------------------------ settings of several steps

TOP_CUTOFFS = Setting(
    "agreement.top_cutoffs",
    "--top-cutoffs",
    float_list,
    "comma-separated top-p cutoffs (docs/metrics.md), e.g. 0.5,0.9,1",
)
BOTTOM_CUTOFFS = Setting(
    "agreement.bottom_cutoffs",
    "--bottom-cutoffs",
    float_list,
    "comma-separated bottom-p cutoffs (docs/metrics.md), e.g. 0.5,0.01,1e-6",
)
#: resamples, seed and confidence of the agreement CIs
BOOTSTRAP = bootstrap_settings("agreement.bootstrap")
CONFIDENCE = BOOTSTRAP[2]
DROP_FLAGGED_ERRATA = Setting(
    "agreement.drop_flagged_errata",
    "--drop-flagged-errata",
    bool,
    "the errata rows whose action is flag are dropped too (by templates; Table 2's notes say so)",
)

# ------------------------------------------------------------------ data

#: the lexicon of verb forms, from the verb lists (the inflection overrides: an input file)
LEXICON = Step("lexicon", keys=("agreement.verb_lists", "agreement.inflection_overrides"), rules=("lexicon",))

#: the templates of the run's groups and custom groups as one table (the groups, the groups file and
#: the errata: plan-computed options and inputs)
TEMPLATES = Step(
    "templates",
    settings=(
        Setting(
            "agreement.skip_bad_rows",
            "--skip-bad-rows",
            bool,
            "malformed rows go to --rejects, and an empty or all-rejected source file is a warning "
            "(default: either is an error)",
        ),
        DROP_FLAGGED_ERRATA,
        Setting(
            "agreement.max_rows_per_source",
            "--max-rows-per-source",
            optional_int,
            "keep at most K evenly spaced rows of each source file, both labels kept when K >= 2 (none: every row)",
        ),
    ),
    keys=("agreement.groups", "agreement.custom_groups", "agreement.groups_file", "agreement.errata"),
    rules=("templates",),
)

#: per-context scores, per-row TSE and per-group summaries of one model
AGGREGATE = Step(
    "aggregate",
    settings=(TOP_CUTOFFS, BOTTOM_CUTOFFS, *BOOTSTRAP),
    keys=("agreement.groups", "agreement.custom_groups"),
    rules=("aggregate", "precision_aggregate"),
)

#: per-lemma agreement statistics of one model
LEMMA_STATS = Step("lemma-stats", rules=("lemma_stats",))

#: the eligible lemmas of one model's tokenizer
LEMMAS = Step("lemmas", keys=("models",), rules=("lemmas",))

#: the agreement shards' settings, taken by ``run-model`` and ``infer`` (``shard_options``)
TOP_K = Setting("inference.top_k", "--top-k", int, "top tokens (ids and probabilities) stored per context, for Table 3")
N_CHUNKS = Setting(
    "agreement.chunks", "--n-chunks", int, "shards per group: contiguous slices of its contexts, the unit of resuming"
)
#: the multi-token form shards' batch, taken by ``run-model`` and ``infer-forms``
FORMS_BATCH_SIZE = Setting(
    "agreement.multitoken.batch_size", "--forms-batch-size", int, "trie rows (prefixes / masked sequences) per pass"
)

#: one model, one load: its agreement shards, form shards and SimVerb-3500 embeddings (rules infer and
#: infer_no_simverb, and the queue jobs); the per-model options (dtype, batch size, BOS, ...) come from
#: its entry in ``models`` (the plan: ``ModelSteps.model_settings``)
RUN_MODEL = Step(
    "run-model",
    settings=(INFERENCE_DEVICE, TOP_K, N_CHUNKS, FORMS_BATCH_SIZE),
    keys=(
        "models",
        "inference",
        "agreement.groups",
        "agreement.custom_groups",
        "agreement.multitoken.enabled",
        "agreement.multitoken.groups",
    ),
    rules=("infer", "infer_no_simverb", "precision_infer"),
    rule_keys={
        # the SimVerb branch of the job (simverb.models: which models have it)
        "infer": (
            "simverb.source",
            "simverb.split_sources",
            "simverb.models",
            "simverb.frames",
            "simverb.multi_token",
            "simverb.batch_size",
        ),
        "infer_no_simverb": ("simverb.models",),
        "precision_infer": ("agreement.precision_audit",),
    },
)

# ------------------------------------------------------------------ tables

#: Table 2, summary_all.csv and metrics.json of every model (the models of agreement.table_models:
#: a plan-computed option)
TABLE = Step(
    "table",
    settings=(CONFIDENCE, DROP_FLAGGED_ERRATA),
    keys=("models", "agreement.groups", "agreement.custom_groups", "agreement.errata", "agreement.table_models"),
    rules=("table2",),
)

#: Table 3: the top-k tokens of selected contexts (the explicit contexts: plan-computed options)
TOPK_TABLE = Step(
    "topk-table",
    settings=(
        Setting(
            "agreement.figures.context_groups",
            "--default-groups",
            str,
            "without --context: the first rows of each label of these comma-separated groups",
        ),
        Setting(
            "agreement.figures.contexts_per_label", "--per-label", int, "without --context: rows per label and group"
        ),
    ),
    keys=("models", "agreement.figures.contexts"),
    rules=("table3",),
)

# ------------------------------------------------------------------ figures

#: the image formats of every figure (the rules' outputs)
FORMATS_KEY = "agreement.figures.formats"

#: Figures 1-4, one job each
PLOT_CUTOFFS = Step(
    "plot-cutoffs",
    settings=(
        TOP_CUTOFFS,
        BOTTOM_CUTOFFS,
        CONFIDENCE,
        Setting(
            "agreement.figures.min_contexts",
            "--min-contexts",
            positive_int,
            "estimates averaged over fewer contexts are flagged low_n in the CSV and faded or hidden in the figure",
        ),
        Setting(
            "agreement.figures.low_n",
            "--low-n",
            str,
            "fade: draw low_n estimates hollow on a dotted line without CI band; hide: leave them out",
            choices=("fade", "hide"),
        ),
    ),
    keys=("models", "agreement.bootstrap", FORMATS_KEY),
    rules=("figure_cutoffs",),
)

#: TSE, EW and MW per group, every models[] entry side by side
PLOT_MODELS = Step("plot-models", keys=("models", FORMATS_KEY), rules=("figure_models",))

#: the checkpoint figure (the checkpoints and their positions: plan-computed options)
PLOT_CHECKPOINTS = Step(
    "plot-checkpoints",
    settings=(
        Setting(
            "agreement.checkpoint_axis",
            "--x-axis",
            str,
            "what the checkpoints' STEP values are: training steps, tokens seen or words seen; "
            "names the x axis and the CSV's x column (step, tokens or words)",
            choices=("steps", "tokens", "words"),
        ),
        Setting(
            "agreement.figures.checkpoints.log_x",
            "--log-x",
            bool,
            "logarithmic x axis (symmetric-log when a value is 0)",
        ),
        CONFIDENCE,
    ),
    keys=("models", "agreement.bootstrap", FORMATS_KEY, "agreement.figures.checkpoints"),
    rules=("figure_checkpoints",),
)

#: per-lemma accuracy against log-probability, and the worst-conjugated lemmas
PLOT_LEMMAS = Step(
    "plot-lemmas",
    settings=(
        Setting("agreement.figures.lemma_bins", "--bins", int, "equal-count probability bins of the trend line"),
        Setting("agreement.figures.worst_lemmas", "--worst-lemmas", int, "lemmas per model in the worst-lemmas table"),
    ),
    keys=("models", FORMATS_KEY),
    rules=("figure_lemmas",),
)

# ------------------------------------------------------------------ DVC views

#: Table 2 as one {tse, ew, mw} file per model (of agreement.table_models) and group
DVC_METRICS = Step("dvc-metrics", keys=("agreement.table_models",), rules=("dvc_metrics",))

#: a cutoff figure's data as one CSV per group (no configuration key: the figure's CSV is its input)
DVC_PLOT_DATA = Step("dvc-plot-data", rules=("dvc_plot_data",))

# ------------------------------------------------------------------ lexicon modes (multi-token verbs)

#: the token ids of every verb form of one model
LEXICON_FORMS = Step("lexicon-forms", keys=("models",), rules=("lexicon_forms",))

#: the verb pairs single-token in every model
LEXICON_COMMON = Step("lexicon-common", keys=("models",), rules=("lexicon_common",))

#: one model's scores in the three lexicon modes
LEXICON_MODES = Step(
    "lexicon-modes",
    settings=BOOTSTRAP,
    keys=("agreement.multitoken.groups", "agreement.bootstrap"),
    rules=("lexicon_modes",),
)

#: the groups x models x lexicon modes table
LEXICON_MODES_TABLE = Step(
    "lexicon-modes-table",
    settings=(
        Setting(
            "agreement.lexicon_mode",
            "--lexicon-mode",
            str,
            "headline mode (first in the table, headline_mode in the metrics)",
            choices=("single_token", "all", "common"),
        ),
    ),
    keys=("models", "agreement.multitoken.groups"),
    rules=("lexicon_modes_table",),
)

#: paired comparisons of the run's models (rule comparisons): McNemar's exact test per group for TSE,
#: paired bootstrap differences for EW and MW (:mod:`verbeval.agreement.scores.paired`)
COMPARE = Step(
    "compare",
    settings=BOOTSTRAP,
    keys=(
        "models",
        "agreement.groups",
        "agreement.custom_groups",
        "agreement.table_models",
        "agreement.comparisons",
        FORMATS_KEY,
    ),
    rules=("comparisons",),
)

#: one model's ties and fragile decisions (rule precision_audit; :mod:`verbeval.agreement.scores.precision`)
PRECISION_AUDIT = Step(
    "precision-audit",
    settings=(
        Setting(
            "agreement.precision_audit.fragile_ulps",
            "--fragile-ulps",
            float,
            "a decision whose margin is below this many float32 spacings at its magnitude is fragile",
        ),
    ),
    keys=("models", "agreement.groups", "agreement.custom_groups", "agreement.precision_audit"),
    rules=("precision_audit",),
)

#: a model's flip set against its run in another dtype (rule flip_set; agreement.precision_audit.dtypes)
FLIP_SET = Step(
    "flip-set",
    settings=BOOTSTRAP,
    keys=("models", "agreement.groups", "agreement.custom_groups", "agreement.precision_audit"),
    rules=("flip_set",),
)

#: every step declared here
STEPS: tuple[Step, ...] = (
    LEXICON,
    TEMPLATES,
    LEMMAS,
    RUN_MODEL,
    AGGREGATE,
    LEMMA_STATS,
    TABLE,
    TOPK_TABLE,
    PLOT_CUTOFFS,
    PLOT_MODELS,
    PLOT_CHECKPOINTS,
    PLOT_LEMMAS,
    DVC_METRICS,
    DVC_PLOT_DATA,
    LEXICON_FORMS,
    LEXICON_COMMON,
    LEXICON_MODES,
    LEXICON_MODES_TABLE,
    COMPARE,
    PRECISION_AUDIT,
    FLIP_SET,
)

"""The agreement study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`): the
configuration keys that each command takes as options, and the other keys its jobs depend on. The
command's options, the rule's command line, the DVC params and the in-process API's defaults are
derived from these declarations. Those of compare, precision-audit, flip-set and export are declared
in :mod:`verbeval.agreement.comparison_steps`, with the settings this module passes."""

from __future__ import annotations

import argparse

from verbeval.agreement.comparison_steps import comparison_steps
from verbeval.core.cliutil import float_list
from verbeval.core.steps import CLUSTERINGS, INFERENCE_DEVICE, Input, Option, Output, Setting, Step, bootstrap_settings


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
#: what the agreement CIs resample: contexts (or rows), templates, templates crossed with verbs, or lexical items
CLUSTER = Setting(
    "agreement.bootstrap.cluster",
    "--cluster",
    str,
    "what the bootstrap resamples: context (each context or TSE row), template, template_and_lemma, or the rows' "
    "lexical items: subject, verb, subject_and_verb (docs/metrics.md, 'Clustered intervals')",
    choices=CLUSTERINGS,
)
DROP_FLAGGED_ERRATA = Setting(
    "agreement.drop_flagged_errata",
    "--drop-flagged-errata",
    bool,
    "the errata rows whose action is flag are dropped too (by templates; Table 2's notes say so)",
)

# ------------------------------------------------------------------ files of several steps

#: the data manifest (lexicon, templates)
DATA_MANIFEST = Input("--manifest", "data manifest (YAML); gives the format of each --input source")
#: the template table
TEMPLATES_FILE = Input("--templates", "templates.parquet (verbeval templates)")
#: a model's eligible lemmas (lemma-stats, lemma-contexts)
LEMMAS_FILE = Input("--lemmas", "the model's lemmas.parquet (verbeval lemmas)")
#: the lexicon
LEXICON_FILE = Input("--lexicon", "lexicon.parquet (verbeval lexicon)")
#: the groups file of a table (its rows)
TABLE_GROUPS_FILE = Input("--groups-file", "agreement groups YAML: row order and group names")
#: the verb pairs single-token in every model
COMMON_FILE = Input("--common", "common.parquet (verbeval lexicon-common)")
#: every summary of the run (a figure's input)
SUMMARY_ALL = Input("--summary", "summary_all.csv (verbeval table --all-csv)")
#: the groups file of a figure (its panels)
FIGURE_GROUPS_FILE = Input("--groups-file", "agreement groups YAML: group order and names")
#: a figure's data
FIGURE_DATA = Output("--csv", "output: the data behind the figure (CSV)")
#: a figure's image files
FIGURE_FILES = Output("--out", "output: figure files (.png, .pdf, .svg)", nargs="+")

# ------------------------------------------------------------------ data

#: the lexicon of verb forms, from the verb lists (the inflection overrides: an input file)
LEXICON = Step(
    "lexicon",
    keys=("agreement.verb_lists", "agreement.inflection_overrides"),
    rules=("lexicon",),
    inputs=(
        DATA_MANIFEST,
        Input(
            "--input",
            "a fetched verb list, NAME its manifest source (format verb_csv or giant_verb_list, text "
            "or PDF); repeatable, at most one verb_csv",
            action="append",
            default=[],
            metavar="NAME=PATH",
            required=False,
        ),
        Input(
            "--overrides",
            "CSV lemma,sing,plur,reason: forms that replace the inflector's (lemminflect) "
            "for the Giant Verb List (default: none; the workflow passes "
            "resources/inflection_overrides.csv)",
            required=False,
        ),
    ),
    outputs=(Output("--out", "output: lexicon.parquet (lemma, sing, plur, source)"),),
)

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
    inputs=(
        DATA_MANIFEST,
        Input(
            "--groups-file", "YAML list of agreement groups ({id, name, sources}), e.g. resources/agreement_groups.yaml"
        ),
        Input(
            "--input",
            "a fetched template file, NAME its manifest source; repeatable",
            action="append",
            default=[],
            metavar="NAME=PATH",
            required=False,
        ),
        Input(
            "--errata",
            "CSV (source,line,action,reason) of known-bad rows of the published files: "
            "action reject drops the row (to --rejects), flag keeps it",
            required=False,
        ),
        Input(
            "--custom-group",
            "a group of your own minimal pairs (JSONL or CSV, docs/data.md), after the groups file's",
            action="append",
            default=[],
            metavar="ID=PATH",
            required=False,
        ),
    ),
    outputs=(
        Output(
            "--out", "output: templates.parquet (group, source, line, left, right, correct, incorrect, label, plural)"
        ),
        Output("--rejects", "output: CSV of the rows left out (source, line, reason, raw)"),
        Output(
            "--groups-out",
            "output: write the run's groups (selected ones, then custom ones) as a groups file for "
            "the table and figure commands",
            required=False,
        ),
    ),
)

#: per-context scores, per-row TSE and per-group summaries of one model
AGGREGATE = Step(
    "aggregate",
    settings=(TOP_CUTOFFS, BOTTOM_CUTOFFS, *BOOTSTRAP, CLUSTER),
    keys=("agreement.groups", "agreement.custom_groups"),
    rules=("aggregate", "precision_aggregate"),
    inputs=(TEMPLATES_FILE, Input("--manifest", "the model's shard manifest (verbeval infer --manifest)")),
    outputs=(Output("--out-dir", "writes <out-dir>/<group>/scores.parquet, tse.parquet and summary.csv"),),
)

#: per-lemma agreement statistics of one model
LEMMA_STATS = Step(
    "lemma-stats",
    rules=("lemma_stats",),
    inputs=(
        LEMMAS_FILE,
        Input("--shards", "the model's shards (any groups), or its shard manifest (every shard it lists)", nargs="+"),
    ),
    outputs=(Output("--out", "output: CSV, one row per eligible lemma"),),
)

#: the eligible lemmas of one model's tokenizer
LEMMAS = Step(
    "lemmas",
    keys=("models",),
    rules=("lemmas",),
    inputs=(LEXICON_FILE,),
    outputs=(Output("--out", "output: lemmas.parquet, the eligible lemmas with their token ids"),),
)

#: the precision audit's threshold; the forward job counts each chunk's fragile decisions with it
FRAGILE_ULPS = Setting(
    "agreement.precision_audit.fragile_ulps",
    "--fragile-ulps",
    float,
    "a decision whose margin is below this many float32 spacings at its magnitude is fragile",
)
#: the agreement shards' settings, taken by ``run-model`` and ``infer`` (``shard_options``)
TOP_K = Setting("inference.top_k", "--top-k", int, "top tokens (ids and probabilities) stored per context, for Table 3")
N_CHUNKS = Setting(
    "agreement.chunks", "--n-chunks", int, "shards per group: contiguous slices of its contexts, the unit of resuming"
)
#: the multi-token form shards' batch, taken by ``run-model`` and ``infer-forms``
FORMS_BATCH_SIZE = Setting(
    "agreement.multitoken.batch_size", "--forms-batch-size", int, "trie rows (prefixes / masked sequences) per pass"
)

#: the agreement shard store's manifest (``infer``, ``run-model``; ``infer-forms``: the form store's)
SHARD_MANIFEST = Output(
    "--manifest", "output: the store's manifest.json; shards go to <its folder>/<group>/<k>-of-<n>.parquet"
)
ALLOW_NONFINITE = Option(
    "--allow-nonfinite",
    "write contexts whose logits hold NaN or inf (their scores are NaN; each shard and the "
    "manifest record n_nonfinite) instead of stopping (default: stop, naming the model and group)",
    action="store_true",
)
#: run-model's optional multi-token form branch (as ``infer-forms``)
FORMS_FILE = Input("--forms", "the model's forms.parquet (verbeval lexicon-forms)", required=False)
FORMS_GROUPS = Option("--forms-groups", "comma-separated template groups of the form shards")
FORMS_MANIFEST = Output(
    "--forms-manifest",
    "output: the form store's manifest.json (shards beside it); --n-chunks as for the agreement shards",
    required=False,
)

#: one model, one load: its agreement shards, form shards and SimVerb-3500 embeddings (rules infer and
#: infer_no_simverb, and the queue jobs); the per-model options (dtype, batch size, BOS, ...) come from
#: its entry in ``models`` (the plan: ``ModelSteps.model_settings``)
RUN_MODEL = Step(
    "run-model",
    settings=(INFERENCE_DEVICE, TOP_K, N_CHUNKS, FORMS_BATCH_SIZE, TOP_CUTOFFS, BOTTOM_CUTOFFS, FRAGILE_ULPS),
    keys=(
        "models",
        "inference",
        "agreement.groups",
        "agreement.custom_groups",
        "agreement.multitoken.enabled",
        "agreement.multitoken.groups",
    ),
    rules=("infer", "infer_no_simverb", "precision_infer"),
    inputs=(TEMPLATES_FILE, LEMMAS_FILE, FORMS_FILE),
    outputs=(SHARD_MANIFEST, FORMS_MANIFEST),
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
    inputs=(
        TABLE_GROUPS_FILE,
        Input("--summaries", "per-group summary.csv files (verbeval aggregate) of every model and group", nargs="+"),
        Input("--errata", "errata CSV: Table 2's notes count its flag rows per group", required=False),
        Input("--templates", "templates.parquet: how many flag rows are among the scored rows", required=False),
    ),
    outputs=(
        Output("--csv", "output: Table 2 with CIs and counts (CSV)"),
        Output("--md", "output: Table 2 in Markdown (two decimals)"),
        Output("--tex", "output: Table 2 in LaTeX (two decimals)"),
        Output(
            "--html",
            "output: Table 2 as an HTML page with CIs and counts (an item of the Snakemake report)",
            required=False,
        ),
        Output("--all-csv", "output: all summaries (every metric and cutoff) in one CSV"),
        Output("--metrics", "output: Table 2 as JSON {model: {group: {tse, ew, mw, random_init}}} (DVC metrics)"),
    ),
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
    inputs=(
        TEMPLATES_FILE,
        Input(
            "--lemmas",
            "a model's lemmas.parquet; repeatable, one per --model",
            action="append",
            default=[],
            metavar="NAME=PATH",
            required=False,
        ),
        Input(
            "--shards",
            "a model's shard manifest, or its shards of the selected groups",
            nargs="+",
            default=[],
            metavar="NAME=PATH",
            required=False,
        ),
    ),
    outputs=(
        Output("--csv", "output: Table 3, one row per context, model and rank (CSV)"),
        Output("--md", "output: Table 3 in Markdown"),
        Output("--html", "output: Table 3 in HTML", required=False),
    ),
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
    inputs=(SUMMARY_ALL, FIGURE_GROUPS_FILE),
    outputs=(FIGURE_DATA, FIGURE_FILES),
)

#: TSE, EW and MW per group, every models[] entry side by side
PLOT_MODELS = Step(
    "plot-models",
    keys=("models", FORMATS_KEY),
    rules=("figure_models",),
    inputs=(SUMMARY_ALL, FIGURE_GROUPS_FILE),
    outputs=(FIGURE_DATA, FIGURE_FILES),
)

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
    inputs=(SUMMARY_ALL, Input("--groups-file", "the groups (Table 2 rows) file: panel titles and order")),
    outputs=(FIGURE_DATA, FIGURE_FILES),
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
    inputs=(Input("--stats", "lemma_stats.csv files (verbeval lemma-stats), one per model", nargs="+"),),
    outputs=(
        FIGURE_DATA,
        Output(
            "--metrics-json",
            "output: JSON per model: lemmas, mean accuracy, Spearman correlation, random_init",
            required=False,
        ),
        FIGURE_FILES,
        Output("--worst-csv", "output: the worst-lemmas table (CSV)"),
        Output("--worst-md", "output: the worst-lemmas table in Markdown", required=False),
        Output("--worst-html", "output: the worst-lemmas table in HTML", required=False),
    ),
)

# ------------------------------------------------------------------ DVC views

#: Table 2 as one {tse, ew, mw} file per model (of agreement.table_models) and group
DVC_METRICS = Step(
    "dvc-metrics",
    keys=("agreement.table_models",),
    rules=("dvc_metrics",),
    inputs=(Input("--metrics", "metrics.json written by `verbeval table`"),),
    outputs=(Output("--out-dir", "writes OUT_DIR/<model>/<group>.json"),),
)

#: a cutoff figure's data as one CSV per group (no configuration key: the figure's CSV is its input)
DVC_PLOT_DATA = Step(
    "dvc-plot-data",
    rules=("dvc_plot_data",),
    inputs=(Input("--curves", "the figure's data CSV written by plot-cutoffs --csv"),),
    outputs=(Output("--out-dir", "writes OUT_DIR/<group>.csv"),),
)

# ------------------------------------------------------------------ lexicon modes (multi-token verbs)

#: the token ids of every verb form of one model
LEXICON_FORMS = Step(
    "lexicon-forms",
    keys=("models",),
    rules=("lexicon_forms",),
    inputs=(LEXICON_FILE, Input("--templates", "templates.parquet: its verb pairs not in the lexicon are added")),
    outputs=(Output("--out", "output: the model's forms.parquet"),),
)

#: the verb pairs single-token in every model
LEXICON_COMMON = Step(
    "lexicon-common",
    keys=("models",),
    rules=("lexicon_common",),
    inputs=(Input("--forms", "each model's forms.parquet (verbeval lexicon-forms)", nargs="+", metavar="NAME=PATH"),),
    outputs=(Output("--out", "output: common.parquet"),),
)

#: one model's scores in the three lexicon modes
LEXICON_MODES = Step(
    "lexicon-modes",
    settings=BOOTSTRAP,
    keys=("agreement.multitoken.groups", "agreement.bootstrap"),
    rules=("lexicon_modes",),
    inputs=(
        Input("--forms", "the model's forms.parquet (verbeval lexicon-forms)"),
        COMMON_FILE,
        Input("--shards", "the model's form shards (all groups), or their manifest (every shard it lists)", nargs="+"),
        Input(
            "--table2-summaries",
            "the single-token pipeline's summary.csv files, compared in --consistency-out; their random_init "
            "column marks the outputs of a randomly initialised model",
            nargs="*",
            default=[],
            required=False,
        ),
    ),
    outputs=(
        Output("--summary-out", "output: metrics per group and lexicon mode with CIs (CSV)"),
        Output("--lemmas-out", "output: per-lemma CSV"),
        Output("--diff-out", "output: single- vs multi-token lemma comparison CSV"),
        Output("--consistency-out", "output: single_token mode vs Table 2 CSV", required=False),
    ),
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
    inputs=(
        TABLE_GROUPS_FILE,
        Input("--summaries", "each model's summary CSV (lexicon-modes --summary-out)", nargs="+"),
        Input("--diffs", "each model's lemma comparison CSV (lexicon-modes --diff-out)", nargs="+"),
        Input("--forms", "each model's forms.parquet", nargs="+", metavar="NAME=PATH"),
        COMMON_FILE,
        Input(
            "--consistency",
            "each model's consistency CSV (lexicon-modes --consistency-out), summarised in --md",
            nargs="*",
            default=[],
            required=False,
        ),
    ),
    outputs=(
        Output("--csv", "output: the table (CSV)"),
        Output("--md", "output: the table, coverage and lemma comparison in Markdown"),
        Output("--tex", "output: the table in LaTeX"),
        Output("--metrics", "output: JSON of the table and coverage (DVC metrics)"),
        Output("--coverage", "output: lemma coverage per model and mode (CSV)"),
        Output("--diff-csv", "output: every model's single- vs multi-token comparison (CSV)"),
    ),
)

#: paired comparisons of the run's models (compare), one model's ties and fragile decisions
#: (precision-audit), its flip set against its run in another dtype (flip-set), its results in the Every
#: Eval Ever schema (export): declared in :mod:`verbeval.agreement.comparison_steps`
COMPARE, PRECISION_AUDIT, FLIP_SET, EXPORT = comparison_steps(
    bootstrap=BOOTSTRAP,
    cluster=CLUSTER,
    fragile_ulps=FRAGILE_ULPS,
    templates_file=TEMPLATES_FILE,
    formats_key=FORMATS_KEY,
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
    EXPORT,
)

"""The multilingual study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`): the
configuration keys each command takes as options and the files it reads and writes. The command's
options, the rule's command line, the DVC params and the API's defaults derive from them."""

from __future__ import annotations

from verbeval.agreement.steps import BOOTSTRAP, BOTTOM_CUTOFFS, CONFIDENCE, TOP_CUTOFFS, optional_int
from verbeval.core.steps import Input, Option, Output, Setting, Step

#: the languages of the study, in table order
LANGUAGE = Option("--language", "a CLAMS language: en, fr, de, he or ru", required=True,
                  choices=("en", "fr", "de", "he", "ru"))  # fmt: skip
#: a language's lexicon, per language (clams-templates, clams-score)
LEXICONS = Input(
    "--lexicon", "a language's lexicon parquet (verbeval clams-lexicon); repeatable", action="append",
    default=[], metavar="LANG=PATH",
)  # fmt: skip
TEMPLATES = Input("--templates", "the study's templates.parquet (verbeval clams-templates)")

#: a language's verb lexicon (lemma, sing, plur, cell, source) from its morphology package
CLAMS_LEXICON = Step(
    "clams-lexicon",
    keys=("multilingual.languages", "multilingual.hspell_deb"),
    rules=("clams_lexicon",),
    inputs=(
        Input(
            "--hspell", "he: Debian's hspell 1.4-3.1 .deb (default: downloaded into the verbeval cache)", required=False
        ),  # fmt: skip
        Input("--english", "en: the agreement study's lexicon.parquet (verbeval lexicon)", required=False),
    ),
    outputs=(
        Output("--out", "output: the language's lexicon parquet (lemma, sing, plur, cell, source)"),
        Output("--counts", "output: JSON: lemmas per cell, the source's own count, its package, version and licence"),
    ),
)

#: the CLAMS pairs of every language, split at the first differing word, each given its lexicon cell
CLAMS_TEMPLATES = Step(
    "clams-templates",
    settings=(
        Setting(
            "multilingual.max_rows_per_source",
            "--max-rows-per-source",
            optional_int,
            "keep at most this many pairs of each CLAMS file, evenly spaced, both numbers kept (none: all)",
        ),
    ),
    keys=("multilingual.languages",),
    rules=("clams_templates",),
    inputs=(
        Input(
            "--input",
            "a CLAMS file as SOURCE=PATH (manifest source clams_<lang>_<construction>); repeatable",
            action="append",
            default=[],
            metavar="SOURCE=PATH",
        ),  # fmt: skip
        LEXICONS,
    ),
    outputs=(
        Output("--out", "output: templates.parquet (the agreement template columns, language, cell, differs_after)"),
        Output("--cells", "output: CSV of rows per language, group and cell, and the word pairs of no cell"),
    ),
)

#: one model on every language: each cell's lemmas, shards and scores, pooled per group
CLAMS_SCORE = Step(
    "clams-score",
    settings=(TOP_CUTOFFS, BOTTOM_CUTOFFS, *BOOTSTRAP),
    keys=("multilingual.models", "models"),
    rules=("clams_score",),
    inputs=(TEMPLATES, LEXICONS),
    outputs=(Output("--out-dir", "output: the model's folder (summary_all.csv, eligible.csv, a folder per language)"),),
)

#: Table 2 per language, the languages side by side, the cutoff figures, the comparisons
CLAMS_TABLE = Step(
    "clams-table",
    settings=(CONFIDENCE,),
    keys=("multilingual.languages", "agreement.figures.formats"),
    rules=("clams_table",),
    inputs=(
        Input("--summaries", "each model's summary_all.csv (verbeval clams-score)", nargs="+"),
        Input("--eligible", "each model's eligible.csv (verbeval clams-score)", nargs="+"),
        Input("--contexts", "each model's contexts.parquet (verbeval clams-score)", nargs="+"),
        Input(
            "--ml-summary",
            "the agreement study's summary_all.csv: English CLAMS against Marvin & Linzen",
            required=False,
        ),  # fmt: skip
        Input("--ml-templates", "the agreement study's templates.parquet (with --ml-summary)", required=False),
        Input(
            "--ml-tse",
            "a model's agreement tse.parquet of a group as MODEL=PATH; repeatable",
            action="append",
            default=[],
            metavar="MODEL=PATH",
            required=False,
        ),  # fmt: skip
    ),
    outputs=(Output("--out-dir", "output: results/multilingual (tables, figures, comparisons)"),),
)

#: the study's steps (verbeval.workflow.steps.declared_steps)
STEPS: tuple[Step, ...] = (CLAMS_LEXICON, CLAMS_TEMPLATES, CLAMS_SCORE, CLAMS_TABLE)

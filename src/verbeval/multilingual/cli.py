"""Sub-commands of the multilingual study: ``clams-lexicon``, ``clams-templates``, ``clams-score`` and
``clams-table`` (one Snakemake rule each)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from verbeval.core.cliutil import Add, check_outputs, split_pair
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import MODEL_NAME, NO_PROGRESS, add_options
from verbeval.multilingual.steps import CLAMS_LEXICON, CLAMS_SCORE, CLAMS_TABLE, CLAMS_TEMPLATES, LANGUAGE

log = logging.getLogger("verbeval")


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, value = split_pair(item, option)
        if name in out:
            raise VerbevalError(f"{option}: {name!r} given twice")
        out[name] = value
    return out


# --------------------------------------------------------------------------- clams-lexicon


def cmd_clams_lexicon(a: argparse.Namespace) -> None:
    from verbeval.core.io import write_json, write_parquet
    from verbeval.multilingual.lexicons.build import build_language_lexicon

    check_outputs(a.out, a.counts)
    lexicon, counts = build_language_lexicon(a.language, hspell=a.hspell, english=a.english)
    write_parquet(lexicon, a.out)
    write_json(a.counts, counts)
    cells = ", ".join(f"{c} {n}" for c, n in counts["lemmas_per_cell"].items())
    log.info("%s lexicon: %d lemmas (%s) from %s -> %s", a.language, counts["lemmas"], cells, counts["package"], a.out)


def register_clams_lexicon(add: Add) -> None:
    s = add(
        "clams-lexicon",
        cmd_clams_lexicon,
        "a language's verb lexicon for EW and MW: lemmas with the forms each agreement contrast opposes",
        "From a package made for the language's morphology, pinned by version (docs/multilingual.md). Run by the "
        "rule clams_lexicon, one job per language.",
    )
    add_options(s, LANGUAGE, *CLAMS_LEXICON.inputs, *CLAMS_LEXICON.outputs)


# --------------------------------------------------------------------------- clams-templates


def cmd_clams_templates(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.core.io import write_csv, write_parquet
    from verbeval.multilingual.clams import read_clams_inputs
    from verbeval.multilingual.templates import cell_counts, clams_templates, uncovered_pairs

    check_outputs(a.out, a.cells)
    inputs = _pairs(a.input, "--input")
    lexicons = {lang: pd.read_parquet(p) for lang, p in _pairs(a.lexicon, "--lexicon").items()}
    pairs = read_clams_inputs(inputs, a.max_rows_per_source)
    missing = sorted(set(pairs) - set(lexicons))
    if missing:
        raise VerbevalError(f"--lexicon: none given for language(s) {', '.join(missing)}")
    table = pd.concat([clams_templates(p, lexicons[lang], lang) for lang, p in pairs.items()], ignore_index=True)
    counts = cell_counts(table)
    write_parquet(table, a.out)
    write_csv(counts, a.cells)
    for lang, top in uncovered_pairs(table).items():
        n = int(((table["language"] == lang) & (table["cell"] == "none")).sum())
        shown = ", ".join(f"{c}/{i} ({k})" for c, i, k in top[:5])
        log.info("%s: %d of %d pairs are no contrast of the lexicon (TSE only), e.g. %s", lang, n,
                 int((table["language"] == lang).sum()), shown)  # fmt: skip
    log.info("%d CLAMS pairs of %d languages -> %s", len(table), len(pairs), a.out)


def register_clams_templates(add: Add) -> None:
    s = add(
        "clams-templates",
        cmd_clams_templates,
        "the CLAMS pairs of every language as agreement template rows, each with its lexicon cell",
        "Each pair is split at the first word where its two sentences differ (docs/metrics.md). Run by the rule "
        "clams_templates.",
    )
    CLAMS_TEMPLATES.add_options(s)


# --------------------------------------------------------------------------- clams-score


def cmd_clams_score(a: argparse.Namespace) -> None:
    from verbeval.agreement.cli.inference import model_run
    from verbeval.multilingual.scoring import ClamsScoreRun, score_model

    score_model(
        model_run(a),
        ClamsScoreRun(
            a.templates,
            _pairs(a.lexicon, "--lexicon"),
            a.model_name,
            a.out_dir,
            progress=not a.no_progress,
            top_cutoffs=tuple(a.top_cutoffs),
            bottom_cutoffs=tuple(a.bottom_cutoffs),
            resamples=a.resamples,
            seed=a.seed,
            confidence=a.confidence,
        ),
    )


def register_clams_score(add: Add) -> None:
    from verbeval.agreement.cli.inference import model_options
    from verbeval.core.cliutil import random_init_option
    from verbeval.core.steps import INFERENCE_BATCH_SIZE, MODEL_PREPEND_BOS

    s = add(
        "clams-score",
        cmd_clams_score,
        "one model on every language: each lexicon cell's eligible lemmas, shards and scores, pooled per group",
        "The model is loaded once; each (language, cell) is one run of the agreement study's steps "
        "(docs/multilingual.md). Run by the rule clams_score, one job per model (resources: gpu=1).",
    )
    model_options(s)
    MODEL_PREPEND_BOS.add_to(s)
    random_init_option(s)
    INFERENCE_BATCH_SIZE.add_to(s)
    add_options(s, MODEL_NAME.but(help="model name written into the summaries"), NO_PROGRESS)
    CLAMS_SCORE.add_options(s)


# --------------------------------------------------------------------------- clams-table


def cmd_clams_table(a: argparse.Namespace) -> None:
    from verbeval.multilingual.tables import TableRun, write_tables

    write_tables(
        TableRun(
            tuple(a.summaries),
            tuple(a.eligible),
            tuple(a.contexts),
            a.out_dir,
            confidence=a.confidence,
            formats=tuple(a.formats),
            ml_summary=a.ml_summary,
            ml_templates=a.ml_templates,
            ml_tse=tuple(a.ml_tse),
        )
    )


def register_clams_table(add: Add) -> None:
    from verbeval.core.steps import Option

    s = add(
        "clams-table",
        cmd_clams_table,
        "Table 2 per language, the languages side by side, the cutoff figures and the unpaired comparisons",
        "Reads the models' summaries only. Run by the rule clams_table.",
    )
    CLAMS_TABLE.add_options(s)
    add_options(
        s,
        Option(
            "--formats",
            "comma-separated image formats of the figures",
            type=lambda t: [x for x in t.split(",") if x],
            default=["png"],
        ),  # fmt: skip
    )


def register(add: Add) -> None:
    """Every sub-command of the multilingual study."""
    register_clams_lexicon(add)
    register_clams_templates(add)
    register_clams_score(add)
    register_clams_table(add)

"""The sub-commands that read a model's shards: ``aggregate`` and ``lemma-stats``."""

from __future__ import annotations

import argparse
import logging

from verbeval.agreement.runs import AggregateRun, LemmaStatsRun, aggregate, lemma_stats
from verbeval.agreement.steps import AGGREGATE, LEMMA_STATS
from verbeval.core.cliutil import Add
from verbeval.core.steps import GROUPS, MODEL_NAME, Option, add_options

log = logging.getLogger("verbeval")


def aggregate_run(a: argparse.Namespace) -> AggregateRun:
    """``aggregate``'s options as its typed step value."""
    return AggregateRun(
        a.templates,
        tuple(g for g in a.groups.split(",") if g),
        a.model_name,
        a.manifest,
        a.out_dir,
        top_cutoffs=tuple(a.top_cutoffs),
        bottom_cutoffs=tuple(a.bottom_cutoffs),
        resamples=a.resamples,
        seed=a.seed,
        confidence=a.confidence,
        keep_bad_shards=a.keep_bad_shards,
        cluster=a.cluster,
    )


def cmd_aggregate(a: argparse.Namespace) -> None:
    aggregate(aggregate_run(a))


def register_aggregate(add: Add) -> None:
    s = add(
        "aggregate",
        cmd_aggregate,
        "per-context scores, per-row TSE and per-group summaries (bootstrap CIs) of one model from its shards",
        "Every shard's size and sha256 are checked against the manifest first. Run by the rule aggregate, "
        "one job per model.",
    )
    add_options(
        s,
        AGGREGATE.file("--templates"),
        GROUPS.but(help="comma-separated groups to aggregate"),
        MODEL_NAME.but(help="model name written into the summaries"),
        AGGREGATE.file("--manifest"),
        *AGGREGATE.settings,
        AGGREGATE.file("--out-dir"),
        Option(
            "--keep-bad-shards",
            "leave an unusable shard in place (default: move it to <name>.corrupt so a rerun recomputes it)",
            action="store_true",
        ),
    )


def lemma_stats_run(a: argparse.Namespace) -> LemmaStatsRun:
    """``lemma-stats``' options as its typed step value."""
    return LemmaStatsRun(a.lemmas, tuple(a.shards), a.model_name, a.out)


def cmd_lemma_stats(a: argparse.Namespace) -> None:
    lemma_stats(lemma_stats_run(a))


def register_lemma_stats(add: Add) -> None:
    s = add(
        "lemma-stats",
        cmd_lemma_stats,
        "per-lemma agreement accuracy and mean probability of one model from its shards",
        "Pooled over every context of every group; a tie counts as a failure. Run by the rule lemma_stats, "
        "one job per model.",
    )
    add_options(
        s, *LEMMA_STATS.inputs, MODEL_NAME.but(help="model name written into the model column"), *LEMMA_STATS.outputs
    )

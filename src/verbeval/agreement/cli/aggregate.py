"""The sub-commands that read a model's shards: ``aggregate`` and ``lemma-stats``."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from verbeval.agreement.cli.common import expand_shards, verified_shards
from verbeval.agreement.steps import AGGREGATE, LEMMA_STATS
from verbeval.core.cliutil import Add, check_outputs
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import GROUPS, MODEL_NAME, Option, add_options

log = logging.getLogger("verbeval")


def cmd_aggregate(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.engine.shardstore import manifest_random_init
    from verbeval.agreement.scores.aggregate import (
        context_scores,
        quarantine_bad_shard,
        read_shards,
        row_tse,
        summarise,
    )
    from verbeval.core.errors import ShardError
    from verbeval.core.io import write_csv, write_parquet

    groups = [g for g in a.groups.split(",") if g]
    out = Path(a.out_dir)
    check_outputs(*[str(out / g / "summary.csv") for g in groups])
    by_group = verified_shards(a.manifest, groups, a.keep_bad_shards)
    templates = pd.read_parquet(a.templates)
    random_init = manifest_random_init(a.manifest)
    for group in groups:
        try:
            shards = read_shards(by_group[group])
        except ShardError as exc:
            raise quarantine_bad_shard(exc, a.keep_bad_shards, a.manifest) from None
        if shards.meta["group"] != group:
            raise VerbevalError(f"shards are for group {shards.meta['group']!r}, not {group!r}")
        g = templates[templates["group"] == group].reset_index(drop=True)
        scores = context_scores(shards, a.top_cutoffs, a.bottom_cutoffs)
        tse = row_tse(shards, g)
        summary = summarise(
            scores, tse, model=a.model_name, group=group, resamples=a.resamples, seed=a.seed, confidence=a.confidence
        ).assign(random_init=random_init)
        if shards.n_nonfinite:  # kept under --allow-nonfinite: Table 2 and metrics.json say so
            summary = summary.assign(n_nonfinite=shards.n_nonfinite)
        write_parquet(scores, out / group / "scores.parquet")
        write_parquet(tse, out / group / "tse.parquet")
        write_csv(summary, out / group / "summary.csv", float_format="%.10g")
        head = summary[summary["metric"] == "tse"].iloc[0]
        log.info("%s / %s: %d contexts, %d rows, TSE %.4f", a.model_name, group, len(scores), len(tse), head["value"])


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


def cmd_lemma_stats(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.engine.shardstore import manifest_random_init
    from verbeval.agreement.scores.lemma_diagnostics import lemma_stats
    from verbeval.core.io import write_csv

    lemmas = pd.read_parquet(a.lemmas)
    random_init = any(manifest_random_init(p) for p in a.shards if p.endswith(".json"))
    stats = lemma_stats(expand_shards(a.shards), lemmas, a.model_name).assign(random_init=random_init)
    write_csv(stats, a.out, float_format="%.10g")
    n = int(stats["n_contexts"].iloc[0]) if len(stats) else 0
    log.info(
        "%s: %d lemmas over %d contexts, mean accuracy %.4f -> %s",
        a.model_name,
        len(stats),
        n,
        stats["accuracy"].mean() if len(stats) else float("nan"),
        a.out,
    )


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

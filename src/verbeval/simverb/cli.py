"""Sub-commands of the SimVerb-3500 study: scoring, the Spearman table and the join with agreement."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from verbeval.core.cliutil import Add, check_outputs, model_source_options, random_init_option, split_pair
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import INFERENCE_THREADS, MODEL_NAME, Option, add_options
from verbeval.simverb.steps import SCORE_SETTINGS, SIMVERB_JOIN, SIMVERB_SCORE, SIMVERB_TABLE

log = logging.getLogger("verbeval")


def read_pairs(data: str, split_items: Sequence[str]) -> Any:
    """The SimVerb-3500 pairs of ``data``, with their official split when ``split_items`` (NAME=PATH) name the
    split files."""
    from verbeval.simverb.data import assign_splits, read_simverb

    pairs = read_simverb(data)
    splits = {name: read_simverb(path) for name, path in (split_pair(s, "--split", "PATH") for s in split_items)}
    return assign_splits(pairs, splits) if splits else pairs


def write_scores(
    sims: Any, verbs: Any, n_pairs: int, model: str, out: str, verbs_out: str, *, random_init: bool
) -> None:
    """Write the outputs of ``simverb-score`` (``--out``, ``--verbs``); ``random_init`` is recorded in the
    similarities' Parquet attributes (:func:`verbeval.core.provenance.tag_frame`) and the verbs' column."""
    from verbeval.core.io import write_csv, write_parquet
    from verbeval.core.provenance import tag_frame, with_random_init

    write_parquet(tag_frame(sims, random_init), out)
    write_csv(with_random_init(verbs, random_init), verbs_out)
    log.info(
        "simverb %s: %d pairs, %d verbs (%d multi-token, %d covered), %d representations -> %s",
        model,
        n_pairs,
        len(verbs),
        int((verbs["n_tokens"] > 1).sum()),
        int(verbs["covered"].sum()),
        sims["representation"].nunique(),
        out,
    )


def cmd_simverb_score(a: argparse.Namespace) -> None:
    check_outputs(a.out, a.verbs)
    import torch

    from verbeval.core.provenance import resolve_random_init
    from verbeval.simverb.vectors import score_model

    torch.set_num_threads(a.threads)
    pairs = read_pairs(a.data, a.split)
    source = ModelSource.from_options(a)
    if source.pin:  # the file checked against its pin before anything reads it
        source.gguf_location()
    sims, verbs = score_model(
        pairs,
        source,
        frames=a.frame or ["to {verb}"],
        multi_token=a.multi_token,
        batch_size=a.batch_size,
        device=a.device,
    )
    write_scores(
        sims, verbs, len(pairs), a.model, a.out, a.verbs, random_init=resolve_random_init(a.model, a.random_init)
    )


#: simverb-score's frames (run-model's SimVerb branch: ``--simverb-frame``)
FRAME = Option(
    "--frame",
    "context with {verb}, repeatable; layer vectors are averaged over the frames, the static one "
    "uses the first (default: 'to {verb}')",
    action="append",
    default=[],
)


def score_options(s: Any, prefix: str = "") -> None:
    """The SimVerb inputs and outputs of ``simverb-score`` (``prefix`` ``""``, all required; its settings
    are :data:`verbeval.simverb.steps.SIMVERB_SCORE`'s) or the inputs, settings and outputs of the SimVerb
    branch of ``run-model`` (``prefix`` ``"simverb-"``, the branch runs when ``--simverb-out`` is given)."""

    def prefixed(option: Option) -> Option:  # run-model's branch: --simverb-data ..., none required
        return option.but(option=f"--{prefix}{option.option.lstrip('-')}", required=option.required and not prefix)

    # simverb-score's settings under run-model's prefix (simverb-score adds them with its step's)
    settings = [st.with_option(f"--{prefix}{st.option.lstrip('-')}") for st in SCORE_SETTINGS] if prefix else []
    add_options(
        s, *map(prefixed, SIMVERB_SCORE.inputs), prefixed(FRAME), *settings, *map(prefixed, SIMVERB_SCORE.outputs)
    )


def cmd_simverb_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.core.io import write_csv, write_json, write_text
    from verbeval.core.provenance import display_name, frame_random, with_random_init
    from verbeval.simverb.report import coverage_summary, plot_layers, plot_scatter, to_latex, to_markdown
    from verbeval.simverb.statistics import best_representation, layer_curve, results_table
    from verbeval.simverb.vectors import split_pairs_and_sims

    scored = pd.read_parquet(a.similarities)
    random = frame_random(scored)
    name = display_name(a.model_name, random)  # a random model says so in every title
    pairs, sims = split_pairs_and_sims(scored)
    verbs = pd.read_csv(a.verbs, keep_default_na=False)
    t = results_table(
        pairs, sims, a.model_name, resamples=a.resamples, seed=a.seed, confidence=a.confidence, bins=a.bins
    )
    write_csv(with_random_init(t, random), a.csv, float_format="%.6f")
    write_text(a.md, to_markdown(t, name, verbs))
    write_text(a.tex, to_latex(t, name))
    write_csv(with_random_init(layer_curve(t), random), a.layers_csv, float_format="%.6f")
    best = best_representation(t)
    if a.metrics_json:
        full = t[t["subset"] == "full"]
        write_json(
            a.metrics_json,
            {
                "model": a.model_name,
                "random_init": random,
                "best_representation": best,
                "coverage": coverage_summary(verbs),
                "rho_full": {r.representation: round(float(r.rho), 6) for r in full.itertuples()},
            },
        )
    from verbeval.core.plots import save_figure

    if a.layers_figure:
        save_figure(plot_layers(t, name), a.layers_figure)
    if a.scatter_figure:
        save_figure(plot_scatter(pairs, sims, best, name), a.scatter_figure)
    log.info("simverb table of %s (%d rows; best %s) -> %s", a.model_name, len(t), best, a.csv)


def cmd_simverb_join(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.core.io import write_csv
    from verbeval.core.provenance import frame_random, random_flags, with_random_init
    from verbeval.simverb.join import agreement_join, verb_errors
    from verbeval.simverb.vectors import split_pairs_and_sims

    scored, stats = pd.read_parquet(a.similarities), pd.read_csv(a.lemma_stats)
    pairs, sims = split_pairs_and_sims(scored)
    joined, summary = agreement_join(verb_errors(pairs, sims), stats, a.model_name)
    # the similarities' record, or the lemma statistics' column (one model's numbers both)
    random = frame_random(scored) or any(random_flags(stats).values())
    write_csv(with_random_init(joined, random), a.out, float_format="%.6f")
    write_csv(with_random_init(summary, random), a.summary, float_format="%.6f")
    log.info(
        "simverb x agreement for %s: %d verbs in both -> %s",
        a.model_name,
        int(summary["n_verbs"].max()) if len(summary) else 0,
        a.summary,
    )


def register(add: Add) -> None:
    """``simverb-score``, ``simverb-table``, ``simverb-join``."""
    s = add(
        "simverb-score",
        cmd_simverb_score,
        "SimVerb-3500: cosine of every verb pair under the static embedding and every layer of one model",
        "See docs/simverb.md. Run by the rule simverb_score, one job per model.",
    )
    model_source_options(s, "(any model; loaded without its head)")
    random_init_option(s)
    add_options(s, *SIMVERB_SCORE.settings, INFERENCE_THREADS)
    score_options(s)

    s = add(
        "simverb-table",
        cmd_simverb_table,
        "SimVerb-3500: Spearman's rho with bootstrap CIs per representation, split, relation and rating range",
        "Also the per-layer curve and the human-vs-model scatter. Run by the rule simverb_table, one job per model.",
    )
    add_options(
        s,
        *SIMVERB_TABLE.inputs,
        MODEL_NAME.but(help="model name in the tables and figures"),
        *SIMVERB_TABLE.settings,
        *SIMVERB_TABLE.outputs,
    )

    s = add(
        "simverb-join",
        cmd_simverb_join,
        "SimVerb-3500 x agreement: per-verb rank error against per-lemma agreement accuracy",
        "Run by the rule simverb_join (simverb.join.agreement_join), one job per model that has agreement results.",
    )
    add_options(s, *SIMVERB_JOIN.inputs, MODEL_NAME, *SIMVERB_JOIN.outputs)

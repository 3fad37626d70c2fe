"""Sub-commands of the SimVerb-3500 study: scoring, the Spearman table and the join with agreement."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from verbeval.core.cliutil import Add, check_outputs, model_source_options, random_init_option, split_pair
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import INFERENCE_THREADS
from verbeval.simverb.steps import SCORE_SETTINGS, SIMVERB_SCORE, SIMVERB_TABLE

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


def score_options(s: Any, prefix: str = "") -> None:
    """The SimVerb inputs and outputs of ``simverb-score`` (``prefix`` ``""``, all required; its settings
    are :data:`verbeval.simverb.steps.SIMVERB_SCORE`'s) or the inputs, settings and outputs of the SimVerb
    branch of ``run-model`` (``prefix`` ``"simverb-"``, the branch runs when ``--simverb-out`` is given)."""
    req = not prefix
    s.add_argument(f"--{prefix}data", required=req, help="SimVerb-3500.txt (the full 3,500-pair file)")
    s.add_argument(
        f"--{prefix}split",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="an official split file (dev=SimVerb-500-dev.txt, test=SimVerb-3000-test.txt); repeatable",
    )
    s.add_argument(
        f"--{prefix}frame",
        action="append",
        default=[],
        help="context with {verb}, repeatable; layer vectors are averaged over the frames, the static one "
        "uses the first (default: 'to {verb}')",
    )
    if prefix:  # simverb-score's settings, under run-model's prefix
        for setting in SCORE_SETTINGS:
            setting.with_option(f"--{prefix}{setting.option.lstrip('-')}").add_to(s)
    s.add_argument(
        f"--{prefix}out", required=req, help="output: similarities parquet (one row per pair and representation)"
    )
    s.add_argument(f"--{prefix}verbs", required=req, help="output: per-verb tokens and coverage (CSV)")


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
    SIMVERB_SCORE.add_options(s)
    INFERENCE_THREADS.add_to(s)
    score_options(s)

    s = add(
        "simverb-table",
        cmd_simverb_table,
        "SimVerb-3500: Spearman's rho with bootstrap CIs per representation, split, relation and rating range",
        "Also the per-layer curve and the human-vs-model scatter. Run by the rule simverb_table, one job per model.",
    )
    s.add_argument("--similarities", required=True, help="similarities parquet (verbeval simverb-score --out)")
    s.add_argument("--verbs", required=True, help="per-verb CSV (verbeval simverb-score --verbs)")
    s.add_argument("--model-name", required=True, help="model name in the tables and figures")
    SIMVERB_TABLE.add_options(s)
    s.add_argument("--csv", required=True, help="output: rho with CIs per representation and subset (CSV)")
    s.add_argument("--md", required=True, help="output: the table in Markdown")
    s.add_argument("--tex", required=True, help="output: the table in LaTeX")
    s.add_argument("--layers-csv", required=True, help="output: data of the per-layer figure (CSV)")
    s.add_argument(
        "--metrics-json",
        help="output: JSON with the best representation, verb coverage and rho of every representation on the full set",
    )
    s.add_argument("--layers-figure", nargs="+", default=[], help="output: per-layer figure files (.png, .pdf, .svg)")
    s.add_argument(
        "--scatter-figure",
        nargs="+",
        default=[],
        help="output: human-vs-model scatter files of the best representation (.png, .pdf, .svg)",
    )

    s = add(
        "simverb-join",
        cmd_simverb_join,
        "SimVerb-3500 x agreement: per-verb rank error against per-lemma agreement accuracy",
        "Run by the rule simverb_join (simverb.join.agreement_join), one job per model that has agreement results.",
    )
    s.add_argument("--similarities", required=True, help="similarities parquet (verbeval simverb-score --out)")
    s.add_argument("--lemma-stats", required=True, help="lemma_stats.csv of the same model (verbeval lemma-stats)")
    s.add_argument("--model-name", required=True, help="model name written into the outputs")
    s.add_argument("--out", required=True, help="output: per-verb joined rows (CSV)")
    s.add_argument("--summary", required=True, help="output: per-representation correlations (CSV)")

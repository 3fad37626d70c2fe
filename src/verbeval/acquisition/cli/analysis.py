"""The acquisition sub-commands: ``lemma-contexts`` (one scored model's per-lemma, per-context
correctness, from its shards) and ``acquisition`` (the analysis of a checkpoint sweep)."""

from __future__ import annotations

import argparse
import logging

from verbeval.agreement.cli.common import expand_shards
from verbeval.core.cliutil import Add, ConfigDefault, check_outputs

log = logging.getLogger("verbeval")

KEY = "agreement.acquisition"


def format_list(text: str) -> list[str]:
    """``--formats``: comma-separated figure formats (png, pdf, svg)."""
    from verbeval.core.plots import FORMATS

    items = [x.strip().lower() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in FORMATS]
    if not items or bad:
        raise argparse.ArgumentTypeError(f"expected comma-separated formats among {', '.join(FORMATS)}, got {text!r}")
    return items


def cmd_lemma_contexts(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.engine.shardstore import manifest_random_init
    from verbeval.agreement.scores.lemma_contexts import forms_of, lemma_contexts_from_shards, write_lemma_contexts

    check_outputs(a.out)
    lemmas = pd.read_parquet(a.lemmas)
    random_init = any(manifest_random_init(p) for p in a.shards if p.endswith(".json"))
    table = lemma_contexts_from_shards(expand_shards(a.shards), lemmas)
    meta = {"model": a.model_name, "random_init": random_init, "toy": bool(a.toy), "forms": forms_of(lemmas)}
    write_lemma_contexts(table, a.out, meta)
    log.info(
        "%s: %d groups x %d lemmas, %d contexts -> %s",
        a.model_name,
        table["group"].nunique(),
        table["lemma"].nunique(),
        int(table.groupby("group")["n_contexts"].first().sum()) if len(table) else 0,
        a.out,
    )


def register_lemma_contexts(add: Add) -> None:
    s = add(
        "lemma-contexts",
        cmd_lemma_contexts,
        "per (group, lemma) the contexts where one model prefers the correct form, from its shards",
        "Writes lemma_contexts.parquet (docs/metrics.md, 'Acquisition over training'), which the acquisition "
        "analysis reads per checkpoint. Run by the workflow once per scored checkpoint.",
    )
    s.add_argument("--lemmas", required=True, help="the model's lemmas.parquet (verbeval lemmas)")
    s.add_argument(
        "--shards",
        nargs="+",
        required=True,
        help="the model's shards (every chunk of each group), or its shard manifest (every shard it lists)",
    )
    s.add_argument("--model-name", required=True, help="model name recorded in the table's metadata")
    s.add_argument("--toy", action="store_true", help="mark the model as a toy model (the figures say so)")
    s.add_argument("--out", required=True, help="output: lemma_contexts.parquet")


def cmd_acquisition(a: argparse.Namespace) -> None:
    from pathlib import Path

    from verbeval.acquisition.analysis import OUTPUTS, AcquisitionSettings, run_acquisition

    out = Path(a.out)
    check_outputs(*[str(out / name) for name in OUTPUTS], str(out / "figures" / "curves.png"))
    settings = AcquisitionSettings(
        frequencies=a.frequencies,
        resamples=a.bootstrap,
        seed=a.seed,
        confidence=a.confidence,
        min_checkpoints=a.min_checkpoints,
        min_rise=a.min_rise,
        min_r2=a.min_r2,
        changepoint_penalty=a.changepoint_penalty,
        outlier_sd=a.outlier_sd,
        formats=tuple(a.formats),
    )
    run_acquisition(a.index, out, settings)


def register_acquisition(add: Add) -> None:
    s = add(
        "acquisition",
        cmd_acquisition,
        "acquisition over training of a checkpoint sweep: learning curves, per-lemma and per-group AoA, "
        "frequency, phases, seeds",
        "Reads a checkpoint index (checkpoints.csv) and writes curves.csv, lemma_curves.parquet, lemma_aoa.csv, "
        "group_aoa.csv, aoa_frequency.csv, changepoints.csv, seeds.csv, seed_aoa.csv, acquisition.json and "
        "figures/{curves,aoa_frequency,lemma_heatmap}.<format> under --out (docs/metrics.md, 'Acquisition "
        "over training').",
    )
    s.add_argument("--index", required=True, help="checkpoints.csv: one row per scored checkpoint")
    s.add_argument("--out", required=True, help="output folder")
    s.add_argument(
        "--frequencies",
        default=ConfigDefault(f"{KEY}.frequencies"),
        help="lemma frequency source: wordfreq, or a CSV with columns lemma and zipf or count",
    )
    s.add_argument(
        "--bootstrap",
        type=int,
        default=ConfigDefault(f"{KEY}.resamples"),
        help="bootstrap resamples of the AoA and correlation CIs (0: none)",
    )
    s.add_argument("--seed", type=int, default=ConfigDefault(f"{KEY}.seed"), help="bootstrap seed")
    s.add_argument(
        "--confidence", type=float, default=ConfigDefault(f"{KEY}.confidence"), help="confidence level of the CIs"
    )
    s.add_argument(
        "--min-checkpoints",
        type=int,
        default=ConfigDefault(f"{KEY}.min_checkpoints"),
        help="fewest distinct steps of a family seed (and of a curve) for a sigmoid fit",
    )
    s.add_argument(
        "--min-rise",
        type=float,
        default=ConfigDefault(f"{KEY}.min_rise"),
        help="a curve rises above chance when a share (and the fit's upper asymptote) exceeds 0.5 + this",
    )
    s.add_argument(
        "--min-r2", type=float, default=ConfigDefault(f"{KEY}.min_r2"), help="a fit with a lower R^2 has failed"
    )
    s.add_argument(
        "--changepoint-penalty",
        type=float,
        default=ConfigDefault(f"{KEY}.changepoint_penalty"),
        help="beta of the changepoint penalty beta * sigma^2 * ln(T), segments linear in log step",
    )
    s.add_argument(
        "--outlier-sd",
        type=float,
        default=ConfigDefault(f"{KEY}.outlier_sd"),
        help="an AoA-frequency outlier lies beyond this many robust SDs of the regression's residuals",
    )
    s.add_argument(
        "--formats",
        type=format_list,
        default=ConfigDefault(f"{KEY}.formats"),
        help="comma-separated figure formats (png, pdf, svg)",
    )

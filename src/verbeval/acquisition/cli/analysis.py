"""The acquisition sub-commands: ``lemma-contexts`` (one scored model's per-lemma, per-context
correctness, from its shards) and ``acquisition`` (the analysis of a checkpoint sweep)."""

from __future__ import annotations

import argparse
import logging

from verbeval.acquisition.runs import LemmaContextsRun, lemma_contexts
from verbeval.acquisition.steps import ACQUISITION, LEMMA_CONTEXTS
from verbeval.core.cliutil import Add, check_outputs
from verbeval.core.steps import MODEL_NAME, Option, add_options

log = logging.getLogger("verbeval")


def lemma_contexts_run(a: argparse.Namespace) -> LemmaContextsRun:
    """``lemma-contexts``' options as its typed step value."""
    return LemmaContextsRun(a.lemmas, tuple(a.shards), a.model_name, a.out, bool(a.toy))


def cmd_lemma_contexts(a: argparse.Namespace) -> None:
    lemma_contexts(lemma_contexts_run(a))


def register_lemma_contexts(add: Add) -> None:
    s = add(
        "lemma-contexts",
        cmd_lemma_contexts,
        "per (group, lemma) the contexts where one model prefers the correct form, from its shards",
        "Writes lemma_contexts.parquet (docs/metrics.md, 'Acquisition over training'), which the acquisition "
        "analysis reads per checkpoint. Run by the workflow once per scored checkpoint.",
    )
    add_options(
        s,
        *LEMMA_CONTEXTS.inputs,
        MODEL_NAME.but(help="model name recorded in the table's metadata"),
        Option("--toy", "mark the model as a toy model (the figures say so)", action="store_true"),
        LEMMA_CONTEXTS.file("--out"),
    )


def cmd_acquisition(a: argparse.Namespace) -> None:
    from pathlib import Path

    from verbeval.acquisition.analysis import OUTPUTS, AcquisitionSettings, run_acquisition

    out = Path(a.out)
    check_outputs(*[str(out / name) for name in OUTPUTS], str(out / "figures" / "curves.png"))
    settings = AcquisitionSettings.from_options(a)
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
    add_options(
        s, ACQUISITION.file("--index"), ACQUISITION.file("--out"), *ACQUISITION.settings
    )  # agreement.acquisition's keys (verbeval.acquisition.steps)

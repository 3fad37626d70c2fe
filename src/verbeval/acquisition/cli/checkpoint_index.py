"""``acquisition-index``: the checkpoint index (``checkpoints.csv``) of the workflow's checkpoint
sweeps, which ``verbeval acquisition`` reads (the training callback writes the same file)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from verbeval.acquisition.steps import ACQUISITION_INDEX
from verbeval.core.cliutil import Add
from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.steps import Option, add_options

log = logging.getLogger("verbeval")


def cmd_acquisition_index(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.checkpoint_index import write_checkpoint_index
    from verbeval.core.provenance import random_flags

    summary = pd.read_csv(a.summary, keep_default_na=False, na_values=[""])
    if "model" not in summary.columns:
        raise InputError(a.summary, "not a summary_all.csv: no column model")
    random = random_flags(summary)
    scored = set(summary["model"].astype(str))
    folder = Path(a.out).parent
    rows = []
    for model, family, seed, step, contexts in a.checkpoint:
        if model not in scored:
            raise InputError(a.summary, f"no rows of checkpoint model {model!r}")
        if not step.isdigit():
            raise VerbevalError(f"--checkpoint {model}: step {step!r} is not a non-negative integer")
        if not Path(contexts).is_file():
            raise InputError(contexts, f"no lemma-contexts file of checkpoint model {model!r}")
        rows.append(
            {
                "model": model,
                "family": family,
                "seed": seed,
                "step": int(step),
                "random_init": random.get(model, False),
                # relative to the index's folder, so that the results folder can move as a whole
                "summary": os.path.relpath(a.summary, folder),
                "lemma_contexts": os.path.relpath(contexts, folder),
                **({"axis": a.axis} if a.axis != "steps" else {}),  # steps: no column (the contract's default)
            }
        )
    write_checkpoint_index(pd.DataFrame(rows), a.out)
    log.info("%d checkpoint(s) of %d family(ies) -> %s", len(rows), len({r["family"] for r in rows}), a.out)


def register_acquisition_index(add: Add) -> None:
    s = add(
        "acquisition-index",
        cmd_acquisition_index,
        "write the checkpoint index (checkpoints.csv) of a workflow's checkpoint sweeps",
        "One row per checkpoint: model, family, seed, step, random_init (from the summary), the summary "
        "(summary_all.csv, filtered by model when read) and the lemma-contexts file, paths relative to the "
        "index's folder (docs/metrics.md, 'Acquisition'). Run by the rule acquisition_index; `verbeval "
        "acquisition --index` reads it.",
    )
    add_options(
        s,
        ACQUISITION_INDEX.file("--summary"),
        Option(
            "--checkpoint",
            "a scored checkpoint: its model name, family, seed label ('' for none), training step (or "
            "tokens or words seen, --axis) and lemma_contexts.parquet (repeat per checkpoint)",
            nargs=5,
            action="append",
            required=True,
            metavar=("MODEL", "FAMILY", "SEED", "STEP", "LEMMA_CONTEXTS"),
        ),
        *ACQUISITION_INDEX.settings,
        ACQUISITION_INDEX.file("--out"),
    )

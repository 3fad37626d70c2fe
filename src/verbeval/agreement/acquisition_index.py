"""The checkpoint index of a training sweep (``checkpoints.csv``): one row per scored checkpoint,
naming its summary and lemma contexts files, read by the acquisition analysis.

Columns (:data:`CHECKPOINT_INDEX_COLUMNS`): ``model`` (the scored model's name, as in
summary_all.csv), ``family`` (the model entry it belongs to), ``seed`` (seed label, empty for a
single seed), ``step`` (training step), ``random_init``, ``summary`` and ``lemma_contexts`` (paths,
relative to the index's folder or absolute).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verbeval.core.errors import InputError
from verbeval.core.io import write_csv

#: the columns of checkpoints.csv, in order
CHECKPOINT_INDEX_COLUMNS = ("model", "family", "seed", "step", "random_init", "summary", "lemma_contexts")


def read_checkpoint_index(path: str | Path) -> pd.DataFrame:
    """Read ``checkpoints.csv``; a missing column or a step that is not an integer is an
    :class:`~verbeval.core.errors.InputError` naming the file (and line)."""
    try:
        df = pd.read_csv(path, dtype={"model": str, "family": str, "seed": str}, keep_default_na=False)
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    missing = [c for c in CHECKPOINT_INDEX_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"not a checkpoint index: no column(s) {', '.join(missing)}")
    steps = pd.to_numeric(df["step"], errors="coerce")
    bad = steps.isna() | (steps != steps.round())
    if bad.any():
        line = int(bad.to_numpy().argmax()) + 2
        raise InputError(path, f"step {df['step'].iloc[line - 2]!r} is not an integer", line)
    df["step"] = steps.astype("int64")
    df["random_init"] = df["random_init"].astype(str).str.lower().isin(["true", "1"])
    return df


def write_checkpoint_index(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``checkpoints.csv`` atomically, its rows sorted by family, seed and step."""
    out = df[list(CHECKPOINT_INDEX_COLUMNS)].sort_values(["family", "seed", "step"], kind="stable")
    write_csv(out, path)

"""Per-checkpoint lemma contexts: for each (group, lemma), which of the group's contexts prefer the
correct form (the table the acquisition analysis reads, one file per scored model).

One row per (group, lemma), sorted by group then lemma, with the columns of
:data:`LEMMA_CONTEXTS_COLUMNS`: ``n_contexts`` (the group's contexts with finite scores),
``n_correct`` (of them, contexts where P(correct form | c) > P(incorrect form | c), strictly: the EW
indicator at top p = 1) and ``correct_bits`` (``np.packbits(correct, bitorder="little")`` of the
per-context indicator, contexts in the group's fixed order, the order of the shards).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval.core.errors import InputError
from verbeval.core.io import atomic_path

#: the columns of a lemma contexts table, in order
LEMMA_CONTEXTS_COLUMNS = ("group", "lemma", "n_contexts", "n_correct", "correct_bits")

_SCHEMA = pa.schema(
    [
        ("group", pa.string()),
        ("lemma", pa.string()),
        ("n_contexts", pa.int32()),
        ("n_correct", pa.int32()),
        ("correct_bits", pa.binary()),
    ]
)
META_KEY = b"verbeval"


def lemma_contexts_from_stats(group: str, prob: np.ndarray, plural: np.ndarray, lemmas: pd.DataFrame) -> pd.DataFrame:
    """The rows of one group: ``prob`` ``[N, L, 2]`` each context's (singular, plural) probability of
    every eligible lemma (``FormStats.prob``, lemmas in ``lemmas`` order), ``plural`` ``[N]`` the
    contexts' labels. Contexts with a non-finite probability are left out (as their scores are).
    """
    p = np.asarray(prob)
    pl = np.asarray(plural, dtype=bool)
    if p.ndim != 3 or p.shape[2] != 2 or p.shape[1] != len(lemmas) or pl.shape != (p.shape[0],):
        raise ValueError(f"prob must be [N, {len(lemmas)}, 2] and plural [N], got {p.shape} and {pl.shape}")
    valid = np.isfinite(p).reshape(len(p), -1).all(axis=1)
    p, pl = p[valid], pl[valid]
    right = np.where(pl[:, None], p[:, :, 1], p[:, :, 0])
    wrong = np.where(pl[:, None], p[:, :, 0], p[:, :, 1])
    correct = right > wrong  # [N, L]
    bits = [np.packbits(correct[:, j], bitorder="little").tobytes() for j in range(correct.shape[1])]
    df = pd.DataFrame(
        {
            "group": group,
            "lemma": lemmas["lemma"].astype(str).to_numpy(),
            "n_contexts": np.full(correct.shape[1], len(p), np.int32),
            "n_correct": correct.sum(axis=0).astype(np.int32),
            "correct_bits": bits,
        }
    )
    return df.sort_values("lemma", kind="stable").reset_index(drop=True)


def combine(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Several groups' rows as one table, sorted by group then lemma."""
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=t.to_pandas_dtype()) for c, t in zip(_SCHEMA.names, _SCHEMA.types)})
    df = pd.concat(parts, ignore_index=True)
    return df.sort_values(["group", "lemma"], kind="stable").reset_index(drop=True)


def correct_vector(row: Mapping[str, Any]) -> np.ndarray:
    """The per-context indicator of one row (``n_contexts`` booleans)."""
    n = int(row["n_contexts"])
    raw = np.frombuffer(row["correct_bits"], dtype=np.uint8)
    return np.unpackbits(raw, count=n, bitorder="little").astype(bool)


def write_lemma_contexts(df: pd.DataFrame, path: str | Path, meta: Mapping[str, Any] | None = None) -> None:
    """Write the table atomically (Parquet, the column types of the contract); ``meta`` (JSON) goes
    under the schema metadata key ``verbeval``."""
    table = pa.Table.from_pandas(df[list(LEMMA_CONTEXTS_COLUMNS)], schema=_SCHEMA, preserve_index=False)
    table = table.replace_schema_metadata({META_KEY: json.dumps(dict(meta or {}), sort_keys=True).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_lemma_contexts(path: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_lemma_contexts`; a file without its columns is an
    :class:`~verbeval.core.errors.InputError` naming them."""
    try:
        df = pq.read_table(path).to_pandas()
    except (pa.ArrowException, OSError) as exc:
        raise InputError(path, f"unreadable lemma contexts table ({str(exc).splitlines()[0]})") from None
    missing = [c for c in LEMMA_CONTEXTS_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"not a lemma contexts table: no column(s) {', '.join(missing)}")
    return df

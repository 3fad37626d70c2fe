"""Per-context scores computed where the probabilities are: by the forward job, beside each shard.

The job that runs the model holds each chunk's form statistics in memory when it writes the shard;
its writer thread (beside the next chunk's forward pass) scores the chunk's contexts at the run's
cutoffs with the very function ``aggregate`` uses (:func:`verbeval.agreement.scores.aggregate.context_scores`,
on the float32 values the shard stores, so the scores are the same numbers) and writes them to
``<store>/scores/<group>/<k>-of-<n>.parquet``. ``aggregate`` then reads these small tables instead of
the shards' per-form statistics. The shards stay: any other cutoff is still recomputed from them.

A score file is used only when its metadata names the sha256 of the shard the manifest lists (so it
was computed from exactly that shard), the same cutoffs and :data:`SCORES_VERSION`; otherwise the
group is scored from its shards as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval.agreement.engine.shardstore import scores_path
from verbeval.agreement.scores.metrics import FormStats
from verbeval.core.io import atomic_path

log = logging.getLogger(__name__)

#: the version of the per-context score files (bumped when their content changes)
SCORES_VERSION = 1
#: the key of a score file's metadata in its Parquet schema
META_KEY = b"verbeval_scores"


def _cutoffs(values: Sequence[float]) -> list[float]:
    return [float(x) for x in values]


def write_chunk_scores(
    shard: str | Path,
    shard_sha256: str,
    context_id: np.ndarray,
    plural: np.ndarray,
    stats: FormStats,
    top_cutoffs: Sequence[float],
    bottom_cutoffs: Sequence[float],
) -> Path:
    """Score one chunk's contexts (``stats`` as the shard stores them: float32 ``[n, L, 2]``) and write
    them beside the shard ``shard`` (:func:`scores_path`), naming its sha256 and the cutoffs."""
    from verbeval.agreement.scores.aggregate import score_contexts

    frame = score_contexts(context_id, plural, stats, top_cutoffs, bottom_cutoffs)
    meta = {
        "scores_version": SCORES_VERSION,
        "shard_sha256": shard_sha256,
        "top_cutoffs": _cutoffs(top_cutoffs),
        "bottom_cutoffs": _cutoffs(bottom_cutoffs),
    }
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: json.dumps(meta).encode()})
    out = scores_path(shard)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return out


def read_chunk_scores(
    shard: str | Path, shard_sha256: str, top_cutoffs: Sequence[float], bottom_cutoffs: Sequence[float]
) -> pd.DataFrame | None:
    """The per-context scores of the shard ``shard`` (whose manifest sha256 is ``shard_sha256``) at
    these cutoffs, or None when its score file is missing, unreadable, of another shard or of other
    cutoffs (the caller then scores the shard itself)."""
    path = scores_path(shard)
    try:
        table = pq.read_table(path)
        meta: dict[str, Any] = json.loads((table.schema.metadata or {})[META_KEY])
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    if (
        meta.get("scores_version") != SCORES_VERSION
        or meta.get("shard_sha256") != shard_sha256
        or meta.get("top_cutoffs") != _cutoffs(top_cutoffs)
        or meta.get("bottom_cutoffs") != _cutoffs(bottom_cutoffs)
    ):
        log.debug("%s: not the scores of this shard at these cutoffs; scoring the shard", path)
        return None
    return table.to_pandas()

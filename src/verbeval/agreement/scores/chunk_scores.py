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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval.agreement.engine.shardstore import scores_path
from verbeval.agreement.scores.metrics import FormStats
from verbeval.core.io import atomic_path, sha256_file

if TYPE_CHECKING:  # the forward job's type; scoring itself needs no torch
    from verbeval.agreement.engine.inference import ComputedChunk

log = logging.getLogger(__name__)

#: the version of the per-context score files (bumped when their content changes)
SCORES_VERSION = 1
#: the key of a score file's metadata in its Parquet schema
META_KEY = b"verbeval_scores"


def _cutoffs(values: Sequence[float]) -> list[float]:
    return [float(x) for x in values]


@dataclass(frozen=True)
class ChunkScoring:
    """What the forward job computes beside each new shard: its contexts' scores at these cutoffs (the
    aggregate step's) and its EW decisions' counts at the precision audit's ``fragile_ulps``."""

    top_cutoffs: tuple[float, ...]
    bottom_cutoffs: tuple[float, ...]
    fragile_ulps: float

    def meta(self) -> dict[str, Any]:
        return {
            "top_cutoffs": _cutoffs(self.top_cutoffs),
            "bottom_cutoffs": _cutoffs(self.bottom_cutoffs),
            "fragile_ulps": float(self.fragile_ulps),
        }


def write_chunk_scores(
    shard: str | Path,
    shard_sha256: str,
    context_id: np.ndarray,
    plural: np.ndarray,
    stats: FormStats,
    scoring: ChunkScoring,
) -> Path:
    """Score one chunk's contexts (``stats`` as the shard stores them: float32 ``[n, L, 2]``) and count
    its EW decisions, and write both beside the shard ``shard`` (:func:`scores_path`), naming its sha256
    and the settings."""
    from verbeval.agreement.scores.aggregate import score_contexts
    from verbeval.agreement.scores.precision import ew_decisions

    frame = score_contexts(context_id, plural, stats, scoring.top_cutoffs, scoring.bottom_cutoffs)
    meta = {
        "scores_version": SCORES_VERSION,
        "shard_sha256": shard_sha256,
        **scoring.meta(),
        "audit": ew_decisions(plural, stats.prob, scoring.fragile_ulps),
    }
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: json.dumps(meta).encode()})
    out = scores_path(shard)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return out


def score_written_chunk(shard: Path, chunk: ComputedChunk, scoring: ChunkScoring) -> Path:
    """:func:`write_chunk_scores` of a chunk the forward job computed and just wrote to ``shard`` (its
    form statistics as the shard stores them: float32)."""
    r = chunk.result
    shape = (len(chunk.contexts), r.prob.shape[1] // 2, 2)
    stats = FormStats(*(np.asarray(x, dtype=np.float32).reshape(shape) for x in (r.prob, r.cum_above, r.cum_below)))
    return write_chunk_scores(
        shard,
        sha256_file(shard),
        chunk.contexts["context_id"].to_numpy(dtype=np.int64),
        chunk.contexts["plural"].to_numpy(dtype=bool),
        stats,
        scoring,
    )


def _meta(shard: str | Path, shard_sha256: str) -> dict[str, Any] | None:
    """The metadata of the shard's score file when it is of this shard and version, else None."""
    try:
        meta: dict[str, Any] = json.loads((pq.read_schema(scores_path(shard)).metadata or {})[META_KEY])
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    if meta.get("scores_version") != SCORES_VERSION or meta.get("shard_sha256") != shard_sha256:
        return None
    return meta


def read_chunk_scores(
    shard: str | Path, shard_sha256: str, top_cutoffs: Sequence[float], bottom_cutoffs: Sequence[float]
) -> pd.DataFrame | None:
    """The per-context scores of the shard ``shard`` (whose manifest sha256 is ``shard_sha256``) at
    these cutoffs, or None when its score file is missing, unreadable, of another shard or of other
    cutoffs (the caller then scores the shard itself)."""
    meta = _meta(shard, shard_sha256)
    if (
        meta is None
        or meta.get("top_cutoffs") != _cutoffs(top_cutoffs)
        or meta.get("bottom_cutoffs") != _cutoffs(bottom_cutoffs)
    ):
        log.debug("%s: no scores of this shard at these cutoffs; scoring the shard", scores_path(shard))
        return None
    try:
        return pq.read_table(scores_path(shard)).to_pandas()
    except (OSError, ValueError, pa.ArrowException):
        return None


def read_chunk_audit(shard: str | Path, shard_sha256: str, threshold: float) -> dict[str, int] | None:
    """The EW decision counts of the shard ``shard`` (:func:`ew_decisions`) at ``threshold``, from its
    score file, or None when there are none of this shard at this threshold (the caller reads the shard)."""
    meta = _meta(shard, shard_sha256)
    if meta is None or meta.get("fragile_ulps") != float(threshold) or not isinstance(meta.get("audit"), dict):
        return None
    return {k: int(meta["audit"][k]) for k in ("decisions", "ties", "fragile", "right")}

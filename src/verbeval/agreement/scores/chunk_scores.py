"""Per-context scores computed where the probabilities are: by the forward job, beside each shard.

The job that runs the model holds each chunk's form statistics in memory when it writes the shard;
its writer thread (beside the next chunk's forward pass) scores the chunk's contexts at the run's
cutoffs with the very function ``aggregate`` uses (:func:`verbeval.agreement.scores.aggregate.context_scores`,
on the float32 values the shard stores, so the scores are the same numbers) and writes them to
``<store>/scores/<group>/<k>-of-<n>.parquet``. ``aggregate`` then reads these small tables instead of
the shards' per-form statistics. The shards stay: any other cutoff is still recomputed from them.

The forward job records each score file's sha256 and size in its shard's entry of the store's
journal and manifest (:data:`verbeval.agreement.engine.shardstore.SCORES_ENTRY`). A score file is
used only when it has exactly those bytes (none recorded, an older store: not used), its metadata
names the sha256 of the shard the manifest lists (so it was computed from exactly that shard), the
same cutoffs and :data:`SCORES_VERSION`, and its values pass :func:`frame_problem` (the shard's
contexts, probabilities in [0, 1] or NaN) and its audit counts :func:`audit_problem`. A file that
fails a check is damaged: it is moved aside (``<name>.corrupt``), one warning line names it and the
reason, and the group is scored from its shards (the same numbers). A file of other cutoffs or
another version is not damaged: it is left in place and the shards are scored.
"""

from __future__ import annotations

import hashlib
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

from verbeval.agreement.engine.shardstore import SCORES_ENTRY, ListedShard, scores_path
from verbeval.agreement.scores.metrics import FormStats
from verbeval.core import io as core_io
from verbeval.core.errors import VerbevalError
from verbeval.core.io import atomic_path, sha256_file

if TYPE_CHECKING:  # the forward job's type; scoring itself needs no torch
    from verbeval.agreement.engine.inference import ComputedChunk

log = logging.getLogger(__name__)

#: the version of the per-context score files (bumped when their content changes)
SCORES_VERSION = 1
#: the key of a score file's metadata in its Parquet schema
META_KEY = b"verbeval_scores"
#: the keys of a score file's audit counts (:func:`verbeval.agreement.scores.precision.ew_decisions`)
AUDIT_KEYS = ("decisions", "ties", "fragile", "right")
#: how far above 1 a probability mass in a score file may be: float32 rounding of the model's softmax
SLACK = 1e-4


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


def scores_entry(path: Path) -> dict[str, Any]:
    """What the shard's journal and manifest entry record of its score file ``path``: its sha256 and
    size (:data:`verbeval.agreement.engine.shardstore.SCORES_ENTRY`)."""
    return dict(zip(SCORES_ENTRY, (sha256_file(path), path.stat().st_size), strict=True))


def score_written_chunk(shard: Path, chunk: ComputedChunk, scoring: ChunkScoring) -> dict[str, Any]:
    """:func:`write_chunk_scores` of a chunk the forward job computed and just wrote to ``shard`` (its
    form statistics as the shard stores them: float32); returns the entries that record the score
    file beside the shard's (:func:`scores_entry`)."""
    r = chunk.result
    shape = (len(chunk.contexts), r.prob.shape[1] // 2, 2)
    stats = FormStats(*(np.asarray(x, dtype=np.float32).reshape(shape) for x in (r.prob, r.cum_above, r.cum_below)))
    out = write_chunk_scores(
        shard,
        sha256_file(shard),
        chunk.contexts["context_id"].to_numpy(dtype=np.int64),
        chunk.contexts["plural"].to_numpy(dtype=bool),
        stats,
        scoring,
    )
    return scores_entry(out)


def set_aside(path: Path, reason: str, instead: str) -> None:
    """Move the damaged score file ``path`` aside (``<name>.corrupt``, as a damaged shard) with one
    warning line (:func:`verbeval.core.io.set_aside`)."""
    core_io.set_aside(path, reason, f"{instead} instead", log)


def _checked(shard: ListedShard, instead: str) -> tuple[bytes, dict[str, Any]] | None:
    """The bytes and metadata of the shard's score file when it is the file recorded in the manifest
    (size, sha256) with readable metadata of this shard; else None, the file set aside when damaged."""
    path = scores_path(shard.path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        set_aside(path, f"unreadable ({exc.strerror or exc})", instead)
        return None
    if shard.scores_sha256 is None:  # a store of an older verbeval: nothing vouches for the file
        log.debug("%s: no sha256 recorded in the shard manifest; not used", path)
        return None
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != shard.scores_bytes or digest != shard.scores_sha256:
        what = (
            f"{len(data)} bytes, but the shard manifest lists {shard.scores_bytes}"
            if len(data) != shard.scores_bytes
            else f"sha256 {digest[:12]}... differs from the shard manifest's {str(shard.scores_sha256)[:12]}..."
        )
        set_aside(path, f"{what} (the file changed after it was written)", instead)
        return None
    try:
        meta = json.loads((pq.read_schema(pa.BufferReader(data)).metadata or {})[META_KEY])
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        set_aside(path, f"unreadable metadata ({type(exc).__name__})", instead)
        return None
    if meta.get("scores_version") != SCORES_VERSION:  # another release's file: not damaged, not used
        return None
    if meta.get("shard_sha256") != shard.sha256:
        set_aside(path, "its metadata names another shard than the manifest's", instead)
        return None
    return data, meta


def frame_problem(
    frame: pd.DataFrame, context_id: np.ndarray, plural: np.ndarray, columns: Sequence[str]
) -> str | None:
    """Why ``frame``, read from a score file, is not the scores of a shard's contexts (``context_id``
    and ``plural`` as the shard stores them) with these ``columns``
    (:func:`verbeval.agreement.scores.aggregate.score_columns`), else None: the columns and their
    types, the shard's context ids and ``plural`` flags in its order, and every score (EW, MW, counted
    masses: shares and probabilities) in [0, 1] (up to :data:`SLACK`) or NaN."""
    want = list(columns) if len(frame) else list(columns)[:2]
    if list(frame.columns) != want:
        return "its columns are not the scores at these cutoffs"
    if frame["context_id"].dtype != np.int64 or not np.array_equal(frame["context_id"].to_numpy(), context_id):
        return "its context ids are not the shard's"
    if frame["plural"].dtype != bool or not np.array_equal(frame["plural"].to_numpy(), plural):
        return "its plural flags are not the shard's"
    values = frame.iloc[:, 2:]
    if not all(dt == np.float64 for dt in values.dtypes):
        return "a score column is not float64"
    v = values.to_numpy()
    bad = ~np.isnan(v) & ~((v >= 0.0) & (v <= 1.0 + SLACK))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        return f"{values.columns[c]} = {v[r, c]!r} of context {int(frame['context_id'].iloc[r])} is not in [0, 1]"
    return None


def read_chunk_scores(
    shard: ListedShard,
    top_cutoffs: Sequence[float],
    bottom_cutoffs: Sequence[float],
    contexts: tuple[np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame | None:
    """The per-context scores of the manifest's shard ``shard`` at these cutoffs, or None when its
    score file is missing, unrecorded, of other cutoffs or damaged (then set aside with one warning:
    module docstring); the caller then scores the shard itself. ``contexts``: the shard's context ids
    and ``plural`` flags when the caller has read them (``aggregate``), else they are read from it."""
    from verbeval.agreement.scores.aggregate import score_columns

    instead = "scoring the shard"
    checked = _checked(shard, instead)
    if checked is None:
        return None
    data, meta = checked
    path = scores_path(shard.path)
    if meta.get("top_cutoffs") != _cutoffs(top_cutoffs) or meta.get("bottom_cutoffs") != _cutoffs(bottom_cutoffs):
        log.debug("%s: scores at other cutoffs; scoring the shard", path)
        return None
    if contexts is None:
        try:  # the shard's contexts (the shard itself checked by the caller; its own errors are reported there)
            ref = pq.read_table(shard.path, columns=["context_id", "plural"])
            contexts = (ref["context_id"].to_numpy(), ref["plural"].to_numpy(zero_copy_only=False))
        except (OSError, KeyError, ValueError, pa.ArrowException):
            return None
    context_id, plural = contexts[0], np.asarray(contexts[1]).astype(bool)
    try:
        frame = pq.read_table(pa.BufferReader(data)).to_pandas()
        problem = frame_problem(frame, context_id, plural, score_columns(top_cutoffs, bottom_cutoffs))
    except (OSError, ValueError, KeyError, TypeError, IndexError, pa.ArrowException) as exc:
        problem = f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    if problem is not None:
        set_aside(path, problem, instead)
        return None
    return frame


def audit_problem(audit: Any, n_contexts: int, n_lemmas: int) -> str | None:
    """Why ``audit`` (a score file's EW decision counts, :func:`verbeval.agreement.scores.precision.ew_decisions`)
    cannot be the counts of a shard of ``n_contexts`` contexts and ``n_lemmas`` lemmas, else None: each
    an integer, at most ``n_contexts x n_lemmas`` decisions (one per context and lemma, NaN pairs left
    out), and ties, fragile decisions (never ties) and right ones (never ties) within them."""
    if not isinstance(audit, dict) or any(type(audit.get(k)) is not int for k in AUDIT_KEYS):
        return "its audit counts are not integers"
    d, ties, fragile, right = (audit[k] for k in AUDIT_KEYS)
    if not 0 <= d <= n_contexts * n_lemmas:
        return f"{d} decisions, but the shard has {n_contexts} contexts x {n_lemmas} lemmas"
    if min(ties, fragile, right) < 0 or ties + fragile > d or ties + right > d:
        return f"audit counts {ties} ties, {fragile} fragile, {right} right do not fit {d} decisions"
    return None


def read_chunk_audit(shard: ListedShard, threshold: float) -> dict[str, int] | None:
    """The EW decision counts of the manifest's shard ``shard`` (:func:`ew_decisions`) at ``threshold``,
    from its score file, or None when there are none of this shard at this threshold or the file is
    damaged (set aside with one warning: module docstring); the caller then reads the shard."""
    from verbeval.agreement.engine.shards import read_shard_meta

    instead = "counting the shard's decisions"
    checked = _checked(shard, instead)
    if checked is None:
        return None
    _, meta = checked
    if meta.get("fragile_ulps") != float(threshold):
        return None
    try:
        shard_meta = read_shard_meta(shard.path)
        problem = audit_problem(meta.get("audit"), int(shard_meta["n_contexts"]), int(shard_meta["n_lemmas"]))
    except (VerbevalError, KeyError, TypeError, ValueError):  # the shard's own check reports it
        return None
    if problem is not None:
        set_aside(scores_path(shard.path), problem, instead)
        return None
    return {k: int(meta["audit"][k]) for k in AUDIT_KEYS}

"""Shard format: what one inference shard holds, and the contexts and chunks it is cut from.

Nothing here imports torch, so that the commands that only read shards start quickly.
A *context* is what the model sees: ``left [MASK] right.`` for a masked LM, ``left`` for a causal
LM. Template rows that share a context (and label) share its forward pass.

A shard (Parquet, one row per context) holds, for every eligible form, its probability and the mass
ranked above and below it (enough to recompute every metric at every cutoff without the model),
each row's TSE pair probabilities and the context's top-k tokens. Its schema metadata records the
model id, revision, tokenizer fingerprint and lemma set, so stale shards are recognisable.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval.core.errors import MismatchError, ShardError, VerbevalError
from verbeval.core.io import atomic_path

log = logging.getLogger("verbeval.agreement.engine.inference")


SHARD_SCHEMA_VERSION = 1
META_KEY = b"verbeval"


def build_contexts(templates: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct contexts of a template table, in order of first appearance.

    Returns ``(contexts, row_context)``: contexts has columns ``context_id, left, right, plural``;
    ``row_context[i]`` is the context id of template row ``i`` (positional).
    A context is keyed by its text and its label (a causal LM ignores the right context).
    """
    right = templates["right"] if kind == "masked" else pd.Series("", index=templates.index)
    keys = pd.DataFrame(
        {
            "left": templates["left"].to_numpy(),
            "right": right.to_numpy(),
            "plural": templates["plural"].to_numpy(dtype=bool),
        }
    )
    codes = keys.groupby(["left", "right", "plural"], sort=False).ngroup().to_numpy()
    ctx = keys.drop_duplicates().reset_index(drop=True)
    ctx.insert(0, "context_id", np.arange(len(ctx), dtype=np.int64))
    conflicts = ctx.duplicated(["left", "right"], keep=False).sum()
    if conflicts:
        log.warning("%d contexts occur with both labels; each label is scored separately", conflicts // 2)
    return ctx, codes.astype(np.int64)


def chunk_range(n: int, n_chunks: int, chunk: int) -> tuple[int, int]:
    """Contiguous ``[start, stop)`` of chunk ``chunk`` (0-based) of ``n`` items split ``n_chunks`` ways."""
    if not 0 <= chunk < n_chunks:
        raise VerbevalError(f"chunk {chunk} out of range for {n_chunks} chunks")
    bounds = np.linspace(0, n, n_chunks + 1).round().astype(int)
    return int(bounds[chunk]), int(bounds[chunk + 1])


def capped_chunks(n: int, n_chunks: int) -> int:
    """Chunks a group of ``n`` contexts is cut into: ``n_chunks``, but never more than ``n`` (at
    least 1), so that ``agreement.chunks`` larger than a group writes no empty shards."""
    return max(1, min(n_chunks, n))


def lemma_set_hash(lemmas: pd.DataFrame) -> str:
    payload = lemmas[["sing", "plur", "sing_id", "plur_id"]].to_csv(index=False).encode()
    return hashlib.sha256(payload).hexdigest()


@dataclass
class ChunkResult:
    prob: np.ndarray  # [n, F] float32
    cum_above: np.ndarray
    cum_below: np.ndarray
    topk_ids: np.ndarray  # [n, k] int32
    topk_probs: np.ndarray  # [n, k] float32
    tse_p: np.ndarray  # [R, 2] float64, probabilities of each row's (singular, plural) form; NaN if invalid
    nonfinite: np.ndarray | None = None  # [n] bool: the context's logits held NaN or +-inf (not written)


def check_finite(
    model_id: str, group: str, chunk: int, n_chunks: int, n_bad: int, n_contexts: int, allow: bool
) -> None:
    """Stop on contexts whose logits (or log-probabilities) are not finite: NaN or infinite model
    weights give numbers otherwise, silently. With ``allow`` (``inference.allow_nonfinite``) it is a
    warning, and the shard records ``n_nonfinite`` (the manifest and aggregate then say so)."""
    if not n_bad:
        return
    where = (
        f"model {model_id!r}, group {group!r}: {n_bad} of {n_contexts} contexts of chunk {chunk + 1}/{n_chunks} "
        "have non-finite logits (NaN or inf: are the model's weights damaged?)"
    )
    if not allow:
        raise VerbevalError(
            f"{where}; nothing written for them. Check the checkpoint, or set "
            "inference.allow_nonfinite: true (--allow-nonfinite) to keep them as NaN scores"
        )
    log.warning("%s; written anyway (allow_nonfinite): their scores are NaN or meaningless", where)


def _fixed_list(values: np.ndarray, pa_type: pa.DataType) -> pa.Array:
    n, width = values.shape
    flat = pa.array(values.reshape(-1), type=pa_type)
    return pa.FixedSizeListArray.from_arrays(flat, width)


def write_shard(
    path: str | Path, contexts: pd.DataFrame, rows: pd.DataFrame, result: ChunkResult, meta: dict[str, Any]
) -> dict[str, Any]:
    """Write one shard atomically.

    ``contexts``: the chunk's contexts (``context_id``, ``plural``); ``rows``: its TSE rows with
    ``row`` (index in the group's template table) and ``context_id``.
    """
    order = rows.sort_values(["context_id", "row"], kind="stable")
    offsets = np.searchsorted(order["context_id"].to_numpy(), contexts["context_id"].to_numpy(), side="left")
    offsets = np.append(offsets, len(order)).astype(np.int32)
    tse = result.tse_p[order.index.to_numpy()] if len(order) else np.zeros((0, 2))

    def lists(values: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, type=typ))

    table = pa.table(
        {
            "context_id": pa.array(contexts["context_id"].to_numpy(), pa.int64()),
            "plural": pa.array(contexts["plural"].to_numpy(dtype=bool)),
            "prob": _fixed_list(result.prob, pa.float32()),
            "cum_above": _fixed_list(result.cum_above, pa.float32()),
            "cum_below": _fixed_list(result.cum_below, pa.float32()),
            "topk_ids": _fixed_list(result.topk_ids, pa.int32()),
            "topk_probs": _fixed_list(result.topk_probs, pa.float32()),
            "rows": lists(order["row"].to_numpy(), pa.int64()),
            "tse_p_sing": lists(tse[:, 0], pa.float64()),
            "tse_p_plur": lists(tse[:, 1], pa.float64()),
        }
    )
    meta = {**meta, "schema_version": SHARD_SCHEMA_VERSION, "n_contexts": len(contexts), "n_rows": len(rows)}
    write_shard_table(path, table, meta, ("prob", "cum_above", "cum_below", "topk_probs"))
    return meta


def write_shard_table(
    path: str | Path, table: pa.Table, meta: dict[str, Any], float_lists: Sequence[str], meta_key: bytes = META_KEY
) -> None:
    """Write a shard's ``table`` atomically with ``meta`` under ``meta_key`` in its schema metadata
    (agreement shards here, form shards in :mod:`verbeval.agreement.lexicon_modes.form_shards`).
    ``float_lists``: its float list columns."""
    table = table.replace_schema_metadata({meta_key: json.dumps(meta, sort_keys=True).encode()})
    with atomic_path(path) as tmp:
        # float columns: no dictionary (it only grows them), byte-stream-split before zstd
        pq.write_table(
            table,
            tmp,
            compression="zstd",
            use_dictionary=["context_id", "plural"],
            use_byte_stream_split=[f"{c}.list.element" for c in float_lists],
        )


def read_shard_meta(path: str | Path) -> dict[str, Any]:
    try:
        md = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError) as exc:
        raise ShardError(path, f"unreadable shard ({str(exc).splitlines()[0]})") from None
    if META_KEY not in md:
        raise ShardError(path, "not a verbeval shard (no metadata)")
    return json.loads(md[META_KEY])


def check_shard_lemmas(
    path: str | Path, meta: dict[str, Any], lemmas: pd.DataFrame, lemma_hash: str, ref: dict[str, Any] | None
) -> None:
    """A shard read with ``lemmas`` (``lemma_hash``: their :func:`lemma_set_hash`) was made with that lemma
    set and, when ``ref`` (the first shard's metadata) is given, by the same model and tokenizer."""
    if meta.get("n_lemmas") != len(lemmas) or meta.get("lemma_set_sha256") != lemma_hash:
        raise VerbevalError(
            f"{path}: shard was made with a different lemma set than the given lemmas file (stale shard?)"
        )
    if ref is not None:
        for key in ("model_id", "revision", "tokenizer_fingerprint"):
            if meta.get(key) != ref.get(key):
                raise VerbevalError(f"{path}: {key}={meta.get(key)!r} differs from the other shards: {ref.get(key)!r}")


def check_lemma_set(manifest: str | Path, lemmas_path: str | Path) -> int:
    """The number of lemmas of ``lemmas_path`` (a model's lemmas.parquet), checked against the lemma
    set the manifest's shards were computed with (``n_lemmas``, ``lemma_set_sha256``)."""
    from verbeval.agreement.engine.shardstore import manifest_meta

    lemmas = pd.read_parquet(lemmas_path)
    meta = manifest_meta(manifest)
    n, want = len(lemmas), meta.get("n_lemmas")
    if want is not None and int(want) != n:
        raise MismatchError(
            f"{manifest}: shards of {want} lemmas but {lemmas_path} lists {n}: "
            "not the lemma set the shards were computed with"
        )
    digest = meta.get("lemma_set_sha256")
    if digest and {"sing", "plur", "sing_id", "plur_id"} <= set(lemmas.columns) and lemma_set_hash(lemmas) != digest:
        raise MismatchError(
            f"{manifest}: shards of another lemma set than {lemmas_path} (both {n} lemmas, "
            "their lemma_set_sha256 differs)"
        )
    return n


def fixed_list_values(col: pa.ChunkedArray, width: int, dtype: type) -> np.ndarray:
    """A fixed-size list column read from a shard (``prob``, ``topk_ids``, ...) as a ``[rows, width]``
    array of ``dtype``."""
    if width == 0:
        return np.zeros((len(col), 0), dtype)
    flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=dtype).reshape(-1, width)


def group_contexts(templates: pd.DataFrame, group: str, kind: str) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """One group's rows, its distinct contexts and each row's context index (:func:`build_contexts`)."""
    g = templates[templates["group"] == group].reset_index(drop=True)
    if g.empty:
        raise VerbevalError(f"group {group!r} has no template rows")
    contexts, row_context = build_contexts(g, kind)
    return g, contexts, row_context


def group_digest(g: pd.DataFrame) -> str:
    """sha256 of what a group's shards depend on in its template rows."""
    cols = ["left", "right", "correct", "incorrect", "plural"]
    return hashlib.sha256(g[cols].to_csv(index=False).encode()).hexdigest()

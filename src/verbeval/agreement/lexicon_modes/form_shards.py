"""The form shards of the lexicon modes (:mod:`verbeval.agreement.lexicon_modes.modes`): the log-probability
of both forms of every verb pair of a model's form table in every context, one Parquet shard per
(group, chunk), written by a model run and read back per group.

The contexts and chunks are those of the agreement shards (:mod:`verbeval.agreement.engine.shards`); the
store and its manifest are :mod:`verbeval.agreement.engine.shardstore`'s, so a killed run resumes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval import __version__
from verbeval.agreement.data.eligibility import tokenizer_fingerprint
from verbeval.agreement.engine.shards import (
    capped_chunks,
    check_finite,
    chunk_range,
    group_contexts,
    group_digest,
    write_shard_table,
)
from verbeval.agreement.engine.shardstore import PlannedShard, run_plan, shard_key, shard_relpath
from verbeval.agreement.lexicon_modes.modes import row_pairs
from verbeval.core.devices import describe_device
from verbeval.core.errors import ShardError, VerbevalError
from verbeval.core.models import LoadedModel, matmul_precision, run_precision

log = logging.getLogger(__name__)

FORMS_SHARD_VERSION = 1
META_KEY = b"verbeval_forms"


def forms_hash(forms: pd.DataFrame) -> str:
    """The sha256 of a form table's verb pairs and token ids (``forms_sha256`` in every form shard)."""
    payload = forms[["sing", "plur"]].to_csv(index=False) + json.dumps(
        [[int(x) for x in a] + [-1] + [int(x) for x in b] for a, b in zip(forms["sing_ids"], forms["plur_ids"])]
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def infer_forms_chunk(
    lm: LoadedModel,
    templates: pd.DataFrame,
    forms: pd.DataFrame,
    group: str,
    chunk: int,
    n_chunks: int,
    out: str | Path,
    *,
    batch_size: int = 256,
    prepend_bos: bool | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Log-probability of both forms of every pair of ``forms`` in every context of one chunk.

    Contexts and chunks are those of :func:`verbeval.agreement.engine.inference.infer_chunk`. The shard holds, per
    context, ``logp`` (``2 * n_pairs`` float64, pair-major, singular then plural) and the template
    rows (``rows``) with their pair index (``row_pair``). The workflow runs
    :func:`infer_forms_model` (every group and chunk of a model in one process).
    """
    fp = tokenizer_fingerprint(lm.tokenizer)
    prepared = group_contexts(templates, group, lm.kind)
    with run_precision(lm.model_id, lm.dtype, lm.device):
        write = _forms_chunk(
            lm,
            group,
            prepared,
            forms,
            chunk,
            n_chunks,
            fp,
            forms_hash(forms),
            batch_size=batch_size,
            prepend_bos=prepend_bos,
            progress=progress,
        )
    return write(Path(out))


def _forms_chunk(
    lm: LoadedModel,
    group: str,
    prepared: tuple[pd.DataFrame, pd.DataFrame, np.ndarray],
    forms: pd.DataFrame,
    chunk: int,
    n_chunks: int,
    fingerprint: str,
    forms_sha: str,
    *,
    batch_size: int,
    prepend_bos: bool | None,
    progress: bool,
    bar: Any = None,
    allow_nonfinite: bool = False,
) -> Callable[[Path], dict[str, Any]]:
    """Compute one chunk of a group prepared once (:func:`group_contexts`); returns the function
    that writes its shard."""
    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.agreement.lexicon_modes.multitoken import form_logprobs

    g, contexts, row_context = prepared
    start, stop = chunk_range(len(contexts), n_chunks, chunk)
    chunk_ctx = contexts.iloc[start:stop].reset_index(drop=True)
    in_chunk = (row_context >= start) & (row_context < stop)
    rows = np.flatnonzero(in_chunk)
    pair_of = pd.Series(forms["pair"].to_numpy(), index=pd.MultiIndex.from_frame(forms[["sing", "plur"]]))
    pair_of = pair_of[~pair_of.index.duplicated()]
    rp = row_pairs(g.iloc[rows])
    row_pair = pair_of.reindex(pd.MultiIndex.from_frame(rp)).to_numpy()
    if np.isnan(row_pair.astype(float)).any():
        raise VerbevalError("a template verb pair is missing from the form table (stale forms.parquet?)")
    seqs = [list(x) for pair in zip(forms["sing_ids"], forms["plur_ids"]) for x in pair]
    encoded = encode_contexts(lm, chunk_ctx, prepend_bos)
    log.debug(
        "%s %s chunk %d/%d: %d contexts, %d forms on %s",
        lm.model_id,
        group,
        chunk + 1,
        n_chunks,
        len(chunk_ctx),
        len(seqs),
        describe_device(lm.device),
    )
    logp = form_logprobs(
        lm,
        encoded,
        seqs,
        batch_size=batch_size,
        progress=progress and bar is None,
        desc=f"forms {group} {chunk + 1}/{n_chunks}",
    )
    if bar is not None:
        bar.update(len(chunk_ctx))
    n_bad = int((~np.isfinite(logp).all(axis=1)).sum()) if logp.size else 0
    check_finite(lm.model_id, group, chunk, n_chunks, n_bad, len(chunk_ctx), allow_nonfinite)
    rctx = row_context[rows]
    order = np.lexsort((rows, rctx))
    offsets = np.append(
        np.searchsorted(rctx[order], chunk_ctx["context_id"].to_numpy(), side="left"), len(order)
    ).astype(np.int32)

    def lists(values: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, type=typ))

    meta = {
        "model_id": lm.model_id,
        "revision": lm.revision,
        "kind": lm.kind,
        "dtype": lm.dtype,
        **_matmul(lm),
        "tokenizer_fingerprint": fingerprint,
        "forms_sha256": forms_sha,
        "prepend_bos": encoded.bos,
        "n_pairs": len(forms),
        "group": group,
        "chunk": chunk,
        "n_chunks": n_chunks,
        "context_start": start,
        "context_stop": stop,
        "n_group_contexts": len(contexts),
        "n_contexts": len(chunk_ctx),
        "n_rows": len(rows),
        "schema_version": FORMS_SHARD_VERSION,
        "verbeval_version": __version__,
        "method": "chain-rule" if lm.kind == "causal" else "pll-word-l2r",
        **({"n_nonfinite": n_bad} if n_bad else {}),
    }

    def write(out: Path) -> dict[str, Any]:
        width = logp.shape[1]
        table = pa.table(
            {
                "context_id": pa.array(chunk_ctx["context_id"].to_numpy(), pa.int64()),
                "plural": pa.array(chunk_ctx["plural"].to_numpy(dtype=bool)),
                "logp": pa.FixedSizeListArray.from_arrays(pa.array(logp.reshape(-1), pa.float64()), width),
                "rows": lists(rows[order].astype(np.int64), pa.int64()),
                "row_pair": lists(row_pair[order].astype(np.int64), pa.int64()),
            }
        )
        write_shard_table(out, table, meta, ("logp",), META_KEY)
        return meta

    return write


def infer_forms_model(
    lm: LoadedModel,
    templates: pd.DataFrame,
    forms: pd.DataFrame,
    groups: list[str],
    n_chunks: int,
    manifest: str | Path,
    *,
    batch_size: int = 256,
    prepend_bos: bool | None = None,
    progress: bool = True,
    allow_nonfinite: bool = False,
) -> dict[str, Any]:
    """Every form shard of one model in one process (model loaded once; finished shards kept, so
    a killed run resumes), then the store's manifest. See :func:`verbeval.agreement.engine.shardstore.run_plan`.
    A group is cut into at most as many chunks as it has contexts; non-finite log-probabilities stop
    the run unless ``allow_nonfinite`` (:func:`verbeval.agreement.engine.shards.check_finite`)."""

    fp, fsha = tokenizer_fingerprint(lm.tokenizer), forms_hash(forms)
    bos = prepend_bos if lm.kind == "causal" else None
    # what both a shard's key and the manifest hold first
    model_fields = {
        "model_id": lm.model_id,
        "revision": lm.revision,
        "kind": lm.kind,
        "dtype": lm.dtype,
        **_matmul(lm),
        "tokenizer_fingerprint": fp,
        "forms_sha256": fsha,
    }
    plan = []
    for group in groups:
        prepared = group_contexts(templates, group, lm.kind)
        g, contexts, _ = prepared
        digest = group_digest(g)
        n = capped_chunks(len(contexts), n_chunks)
        for chunk in range(n):

            def compute(
                bar: Any, group: str = group, prepared: tuple[Any, ...] = prepared, chunk: int = chunk, n: int = n
            ) -> Callable[[Path], dict[str, Any]]:
                return _forms_chunk(
                    lm,
                    group,
                    prepared,
                    forms,
                    chunk,
                    n,
                    fp,
                    fsha,  # type: ignore[arg-type]
                    batch_size=batch_size,
                    prepend_bos=prepend_bos,
                    progress=False,
                    bar=bar,
                    allow_nonfinite=allow_nonfinite,
                )

            key = shard_key(
                {
                    **model_fields,
                    "prepend_bos": bos,
                    "schema_version": FORMS_SHARD_VERSION,
                    "group": group,
                    "group_sha256": digest,
                    "chunk": chunk,
                    "n_chunks": n,
                }
            )
            start, stop = chunk_range(len(contexts), n, chunk)
            plan.append(PlannedShard(shard_relpath(group, chunk, n), key, stop - start, compute))
    meta = {**model_fields, "groups": groups, "n_chunks": n_chunks}
    with run_precision(lm.model_id, lm.dtype, lm.device):  # tf32: TF32 matrix products for this run only
        return run_plan(
            manifest, plan, meta, desc=f"forms {lm.model_id}", progress=progress, allow_nonfinite=allow_nonfinite
        )


def _matmul(lm: LoadedModel) -> dict[str, str]:
    """A tf32 run's ``matmul`` (:func:`verbeval.core.models.matmul_precision`) for its shards' metadata
    and keys; nothing for any other dtype."""
    m = matmul_precision(lm.dtype, lm.device)
    return {} if m is None else {"matmul": m}


_CONSISTENT = (
    "model_id",
    "revision",
    "kind",
    "dtype",
    "tokenizer_fingerprint",
    "forms_sha256",
    "prepend_bos",
    "group",
    "n_chunks",
    "n_group_contexts",
    "schema_version",
)


def form_shards_by_group(paths: Sequence[str | Path]) -> dict[str, list[str]]:
    """Form shard paths by the group their Parquet metadata names (in the order given)."""
    by_group: dict[str, list[str]] = {}
    for path in paths:
        md = pq.read_schema(path).metadata or {}
        if META_KEY not in md:
            raise VerbevalError(f"{path}: not a verbeval form shard")
        by_group.setdefault(json.loads(md[META_KEY])["group"], []).append(str(path))
    return by_group


def read_form_shards(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Concatenate the shards of one (model, group): ``logp [N, P, 2]``, ``plural [N]``,
    ``rows``, ``row_context`` (position in the concatenated contexts) and ``row_pair``."""
    if not paths:
        raise VerbevalError("no shards given")
    metas = []
    for p in paths:
        md = pq.read_schema(p).metadata or {}
        if META_KEY not in md:
            raise ShardError(p, "not a verbeval form shard (no metadata)")
        metas.append(json.loads(md[META_KEY]))
    ref = metas[0]
    for p, m in zip(paths, metas):
        for key in _CONSISTENT:
            if m.get(key) != ref.get(key):
                raise VerbevalError(f"{p}: {key}={m.get(key)!r} differs from {paths[0]} (stale shard?)")
    if sorted(m["chunk"] for m in metas) != list(range(ref["n_chunks"])):
        raise VerbevalError(f"form shards do not cover chunks 0..{ref['n_chunks'] - 1} exactly once")
    logp, plural, rows, rctx, rpair = [], [], [], [], []
    for i in np.argsort([m["chunk"] for m in metas]):
        t = pq.read_table(paths[i])
        if t.num_rows != metas[i]["n_contexts"]:
            raise ShardError(paths[i], "context count differs from its metadata (truncated shard)")
        width = 2 * ref["n_pairs"]
        logp.append(t["logp"].combine_chunks().flatten().to_numpy().reshape(-1, width))
        plural.append(t["plural"].to_numpy(zero_copy_only=False).astype(bool))
        lens = t["rows"].combine_chunks().value_lengths().to_numpy(zero_copy_only=False)
        rows.append(t["rows"].combine_chunks().flatten().to_numpy())
        rpair.append(t["row_pair"].combine_chunks().flatten().to_numpy())
        rctx.append(np.repeat(t["context_id"].to_numpy(), lens))
    lp = np.concatenate(logp)
    if len(lp) != ref["n_group_contexts"]:
        raise VerbevalError(f"form shards hold {len(lp)} contexts, expected {ref['n_group_contexts']}")
    return {
        "meta": ref,
        "logp": lp.reshape(len(lp), ref["n_pairs"], 2),
        "plural": np.concatenate(plural),
        "rows": np.concatenate(rows),
        "row_context": np.concatenate(rctx),
        "row_pair": np.concatenate(rpair),
    }

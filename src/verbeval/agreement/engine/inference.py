"""Inference of one model: every (group, chunk) shard prepared, computed and written, one forward
pass per distinct context.

Template rows that share a context (and label) share its forward pass; TSE rows read their own
verb pair's probabilities from it. A chunk's contexts are encoded by :mod:`verbeval.agreement.engine.encoding`
and run by :mod:`verbeval.agreement.engine.forward_pass`; the shard format is in
:mod:`verbeval.agreement.engine.shards`, the resumable store of a model's shards in
:mod:`verbeval.agreement.engine.shardstore`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verbeval import __version__
from verbeval.agreement.data.eligibility import single_token_ids, tokenizer_fingerprint
from verbeval.agreement.engine.encoding import encode_contexts
from verbeval.agreement.engine.forward_pass import run_contexts
from verbeval.agreement.engine.shards import (
    SHARD_SCHEMA_VERSION,
    ChunkResult,
    capped_chunks,
    check_finite,
    chunk_range,
    group_contexts,
    group_digest,
    lemma_set_hash,
    write_shard,
)
from verbeval.agreement.engine.shardstore import (
    PlannedShard,
    finish_if_complete,
    has_journal,
    run_plan,
    shard_key,
    shard_relpath,
)
from verbeval.core.devices import DeviceMap, describe_device
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import (
    LoadedModel,
    ModelIdentity,
    adds_bos,
    check_token_ids,
    matmul_precision,
    model_identity,
    run_precision,
)
from verbeval.core.warm import memo

log = logging.getLogger(__name__)

__all__ = ["compute_chunk", "infer_chunk", "infer_model", "manifest_if_complete"]


@dataclass
class GroupWork:
    """A group prepared once per process: rows, distinct contexts, TSE pair ids."""

    group: str
    rows: pd.DataFrame
    contexts: pd.DataFrame
    row_context: np.ndarray
    tse_ids: np.ndarray  # [R, 2] (singular id, plural id), -1 where not a single token
    digest: str
    n_same_id: int = 0  # rows whose two forms are one token id (excluded from TSE)


def prepare_group(
    lm: LoadedModel | ModelIdentity, templates: pd.DataFrame, group: str, templates_key: Any = None
) -> GroupWork:
    """A group's rows, distinct contexts and TSE ids for ``lm``'s tokenizer (a loaded model or its identity). With ``templates_key`` (the
    content key of the templates' file) the work is shared by every model of the same tokenizer in
    this process (:mod:`verbeval.core.warm`)."""
    key = (
        None if templates_key is None or lm.tokenizer_key is None else (lm.tokenizer_key, lm.kind, group, templates_key)
    )
    work = memo("group", key, lambda: _prepare_group(lm, templates, group))
    if work.n_same_id:
        log.warning(
            "%s: group %s: %d of %d row(s) whose correct and incorrect forms have the same token id are "
            "excluded from TSE",
            lm.model_id,
            group,
            work.n_same_id,
            len(work.tse_ids),
        )
    return work


def _prepare_group(lm: LoadedModel | ModelIdentity, templates: pd.DataFrame, group: str) -> GroupWork:
    g, contexts, row_context = group_contexts(templates, group, lm.kind)
    sing = np.where(g["plural"], g["incorrect"], g["correct"]).tolist()
    plur = np.where(g["plural"], g["correct"], g["incorrect"]).tolist()
    # one tokenizer call for both forms of every row (each call inspects the tokenizer's pipeline)
    tse_ids = single_token_ids(lm.tokenizer, sing + plur).reshape(2, -1).T.copy()
    # a pair whose two forms are the same token (an undeclared unknown token) cannot be told apart:
    # excluded from TSE like a pair of multi-token forms, and counted, never scored as an error
    same = (tse_ids[:, 0] == tse_ids[:, 1]) & (tse_ids[:, 0] >= 0)
    tse_ids[same] = -1
    return GroupWork(group, g, contexts, row_context, tse_ids, group_digest(g), int(same.sum()))


@dataclass
class ModelContext:
    """What every shard of one loaded model shares, computed once per process."""

    form_ids: np.ndarray
    meta: dict[str, Any]  # model-level shard metadata
    prepend_bos: bool | None


def model_context(lm: LoadedModel, lemmas: pd.DataFrame, top_k: int, prepend_bos: bool | None) -> ModelContext:
    """What every shard of ``lm`` shares (:func:`shard_context`); the lemma forms' token ids checked against
    its embeddings (:func:`verbeval.core.models.check_token_ids`, as each chunk's context ids are in
    :func:`compute_chunk`)."""
    mc = shard_context(lm.identity, lemmas, top_k, prepend_bos, matmul_precision(lm.dtype, lm.device))
    if len(mc.form_ids):
        check_token_ids(lm, int(mc.form_ids.max()), "the lemma forms")
    return mc


def shard_context(
    lm: ModelIdentity, lemmas: pd.DataFrame, top_k: int, prepend_bos: bool | None, matmul: str | None = None
) -> ModelContext:
    """What every shard of the model ``lm`` identifies shares (no weights needed). ``matmul``: a tf32
    run's matrix products on its device (:func:`verbeval.core.models.matmul_precision`), recorded beside
    its dtype; None (every other dtype) records nothing."""
    if lm.kind == "causal":
        bos = adds_bos(lm.tokenizer) if prepend_bos is None else bool(prepend_bos)
    else:
        bos = False
    meta = {
        "model_id": lm.model_id,
        "revision": lm.revision,
        "kind": lm.kind,
        "cased": lm.cased,
        "dtype": lm.dtype,
        **({} if matmul is None else {"matmul": matmul}),
        "tokenizer_fingerprint": memo(
            "tokenizer_fingerprint", lm.tokenizer_key, lambda: tokenizer_fingerprint(lm.tokenizer)
        ),
        "lemma_set_sha256": lemma_set_hash(lemmas),
        "prepend_bos": bos,
        "n_lemmas": len(lemmas),
        "top_k": top_k,
        "verbeval_version": __version__,
    }
    form_ids = lemmas[["sing_id", "plur_id"]].to_numpy(dtype=np.int64).reshape(-1)
    return ModelContext(form_ids, meta, bos if lm.kind == "causal" else None)


@dataclass
class ComputedChunk:
    contexts: pd.DataFrame
    rows: pd.DataFrame
    result: ChunkResult
    meta: dict[str, Any]


def compute_chunk(
    lm: LoadedModel,
    mc: ModelContext,
    work: GroupWork,
    chunk: int,
    n_chunks: int,
    *,
    batch_size: int | str | None = None,
    progress: bool = True,
    bar: Any = None,
    allow_nonfinite: bool = False,
) -> ComputedChunk:
    """Forward one chunk of a prepared group (nothing written). Non-finite logits stop it
    (:func:`verbeval.agreement.engine.shards.check_finite`) unless ``allow_nonfinite``."""
    start, stop = chunk_range(len(work.contexts), n_chunks, chunk)
    chunk_ctx = work.contexts.iloc[start:stop].reset_index(drop=True)
    rc = work.row_context
    in_chunk = (rc >= start) & (rc < stop)
    rows = pd.DataFrame({"row": np.flatnonzero(in_chunk), "context_id": rc[in_chunk]})
    tse_ids = work.tse_ids[rows["row"].to_numpy()] if len(rows) else np.zeros((0, 2), np.int64)
    # the same contexts, tokenizer and settings give the same ids: shared by the models of one tokenizer
    key = (
        None
        if lm.tokenizer_key is None
        else (lm.tokenizer_key, lm.kind, lm.cased, lm.mask_token, mc.prepend_bos, work.digest, start, stop)
    )
    encoded = memo("encoded", key, lambda: encode_contexts(lm, chunk_ctx, mc.prepend_bos))
    check_token_ids(lm, max((max(seq) for seq in encoded.ids if seq), default=-1), f"the {work.group} contexts")
    log.debug(
        "%s %s chunk %d/%d: %d contexts, %d rows on %s",
        lm.model_id,
        work.group,
        chunk + 1,
        n_chunks,
        len(chunk_ctx),
        len(rows),
        describe_device(lm.device),
    )
    result = run_contexts(
        lm,
        encoded,
        mc.form_ids,
        rows["context_id"].to_numpy() - start,
        tse_ids,
        batch_size=batch_size,
        top_k=mc.meta["top_k"],
        progress=progress and bar is None,
        desc=f"{work.group} {chunk + 1}/{n_chunks}",
        bar=bar,
    )
    n_bad = int(result.nonfinite.sum()) if result.nonfinite is not None else 0
    check_finite(lm.model_id, work.group, chunk, n_chunks, n_bad, len(chunk_ctx), allow_nonfinite)
    meta = {
        **mc.meta,
        "prepend_bos": encoded.bos,
        "group": work.group,
        "chunk": chunk,
        "n_chunks": n_chunks,
        "context_start": start,
        "context_stop": stop,
        "n_group_contexts": len(work.contexts),
        **({"n_nonfinite": n_bad} if n_bad else {}),
    }
    return ComputedChunk(chunk_ctx, rows, result, meta)


def infer_chunk(
    lm: LoadedModel,
    templates: pd.DataFrame,
    lemmas: pd.DataFrame,
    group: str,
    chunk: int,
    n_chunks: int,
    out: str | Path,
    *,
    batch_size: int | str | None = None,
    top_k: int = 10,
    prepend_bos: bool | None = None,
    progress: bool = True,
    allow_nonfinite: bool = False,
) -> dict[str, Any]:
    """Run one (group, chunk) and write its shard. Returns the shard metadata.

    The workflow runs :func:`infer_model` (every group and chunk of a model in one process); this
    is the same computation for one shard, for scripts and tests."""
    mc = model_context(lm, lemmas, top_k, prepend_bos)
    with run_precision(lm.model_id, lm.dtype, lm.device):
        done = compute_chunk(
            lm,
            mc,
            prepare_group(lm, templates, group),
            chunk,
            n_chunks,
            batch_size=batch_size,
            progress=progress,
            allow_nonfinite=allow_nonfinite,
        )
    return write_shard(out, done.contexts, done.rows, done.result, done.meta)


def plan_shards(
    lm: ModelIdentity,
    mc: ModelContext,
    templates: pd.DataFrame,
    groups: list[str],
    n_chunks: int,
    templates_key: Any = None,
    compute: Callable[[GroupWork, int, int], Callable[[Any], Callable[[Path], dict[str, Any]]]] | None = None,
) -> list[PlannedShard]:
    """Every shard of the model ``lm`` identifies, with its key (model version, tokenizer, lemma set,
    the group's rows, chunking, dtype, top-k, BOS): one computation of the keys for the run that loads
    the model and for :func:`manifest_if_complete`, which does not. ``compute(work, chunk, n)``: how to
    compute a shard (None: the plan is only checked against the store)."""
    plan = []
    for w in (prepare_group(lm, templates, g, templates_key) for g in groups):
        n = capped_chunks(len(w.contexts), n_chunks)
        for chunk in range(n):
            key = shard_key(
                {
                    **mc.meta,
                    "verbeval_version": None,
                    "schema_version": SHARD_SCHEMA_VERSION,
                    "group": w.group,
                    "group_sha256": w.digest,
                    "chunk": chunk,
                    "n_chunks": n,
                }
            )
            start, stop = chunk_range(len(w.contexts), n, chunk)
            run = None if compute is None else compute(w, chunk, n)
            plan.append(PlannedShard(shard_relpath(w.group, chunk, n), key, stop - start, run))
    return plan


def manifest_meta(mc: ModelContext, groups: list[str], n_chunks: int, random_init: bool) -> dict[str, Any]:
    """The ``meta`` of a store's manifest."""
    meta = {k: v for k, v in mc.meta.items() if k != "verbeval_version"}
    return {**meta, "groups": groups, "n_chunks": n_chunks, "random_init": bool(random_init)}


def infer_model(
    lm: LoadedModel,
    templates: pd.DataFrame,
    lemmas: pd.DataFrame,
    groups: list[str],
    n_chunks: int,
    manifest: str | Path,
    *,
    batch_size: int | str | None = None,
    top_k: int = 10,
    prepend_bos: bool | None = None,
    progress: bool = True,
    random_init: bool = False,
    allow_nonfinite: bool = False,
    templates_key: Any = None,
    after_write: Callable[[Path, ComputedChunk], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Every shard of one model, in one process, then the store's manifest.

    ``random_init`` (:func:`verbeval.core.provenance.resolve_random_init`) is recorded in the
    manifest's ``meta`` for the tables and figures; it is not part of any shard's key.

    Shards already in the store with the same key (model version, tokenizer, lemma set, the
    group's rows, chunking, dtype, top-k, BOS) and an intact checksum are kept, so a killed run
    resumes where it stopped. A group is cut into at most as many chunks as it has contexts
    (:func:`capped_chunks`). Non-finite logits stop the run
    (:func:`verbeval.agreement.engine.shards.check_finite`) unless ``allow_nonfinite``; the shards already
    written stay for the rerun. Each shard is written by a background thread while the next chunk
    is computed. ``templates_key`` (the content key of the templates' file, :func:`verbeval.core.warm.frame_key`)
    lets the models of one tokenizer in this process share each group's preparation. ``after_write(path,
    chunk)``: what the writer thread does next with each new shard and its computed chunk (the agreement
    runs: its scores beside it, :mod:`verbeval.agreement.scores.chunk_scores`); the entries it returns
    (:data:`~verbeval.agreement.engine.shardstore.SCORES_ENTRY`) are recorded with the shard's. Returns the manifest
    body, with timing figures under ``"timing"`` (not written). Without loading the model:
    :func:`manifest_if_complete`.
    """
    mc = model_context(lm, lemmas, top_k, prepend_bos)

    def compute(w: GroupWork, chunk: int, n: int) -> Callable[[Any], Callable[[Path], dict[str, Any]]]:
        def run(bar: Any) -> Callable[[Path], dict[str, Any]]:
            done = compute_chunk(lm, mc, w, chunk, n, batch_size=batch_size, bar=bar, allow_nonfinite=allow_nonfinite)

            def write(path: Path) -> dict[str, Any]:
                meta = write_shard(path, done.contexts, done.rows, done.result, done.meta)
                if after_write is not None:  # what it returns is recorded in the shard's entry
                    meta = {**meta, **(after_write(path, done) or {})}
                return meta

            return write

        return run

    plan = plan_shards(lm.identity, mc, templates, groups, n_chunks, templates_key, compute)
    log.info("%s: %d groups, %d lemmas on %s", lm.model_id, len(groups), len(lemmas), describe_device(lm.device))
    with run_precision(lm.model_id, lm.dtype, lm.device):  # tf32: TF32 matrix products for this run only
        return run_plan(
            manifest,
            plan,
            manifest_meta(mc, groups, n_chunks, random_init),
            desc=f"inference {lm.model_id}",
            progress=progress,
            allow_nonfinite=allow_nonfinite,
        )


def manifest_if_complete(
    source: ModelSource,
    templates: pd.DataFrame,
    lemmas: pd.DataFrame,
    groups: list[str],
    n_chunks: int,
    manifest: str | Path,
    *,
    kind: str = "auto",
    dtype: str = "float32",
    device: str = "auto",
    device_map: DeviceMap = None,
    top_k: int = 10,
    prepend_bos: bool | None = None,
    random_init: bool = False,
    allow_nonfinite: bool = False,
    templates_key: Any = None,
) -> dict[str, Any] | None:
    """The manifest :func:`infer_model` would write, written without loading the model's weights,
    when every shard it needs is already in the store (a sweep's revision scored before the queue job
    stopped or was rerun for another step): the shard keys come from the tokenizer, the config and the
    model's version alone (:func:`verbeval.core.models.model_identity`, :func:`plan_shards`), and the
    store says whether it holds them (:func:`verbeval.agreement.engine.shardstore.finish_if_complete`).
    Returns the manifest body; None (nothing written) when a shard is missing, when the store has no
    journal yet (a first run: nothing to keep, no tokenizer load spent on asking), or for a GGUF file or
    a device map (loaded as usual). ``device`` (a run's ``--device``) decides only a tf32 run's
    ``matmul`` (:func:`verbeval.core.models.matmul_precision`)."""
    if not has_journal(Path(manifest).parent) or source.file or device_map is not None:
        return None
    ident = model_identity(source, kind=kind, dtype=dtype)
    mc = shard_context(ident, lemmas, top_k, prepend_bos, matmul_precision(dtype, device))
    return finish_if_complete(
        manifest,
        plan_shards(ident, mc, templates, groups, n_chunks, templates_key),
        manifest_meta(mc, groups, n_chunks, random_init),
        desc=f"inference {ident.model_id}",
        allow_nonfinite=allow_nonfinite,
    )

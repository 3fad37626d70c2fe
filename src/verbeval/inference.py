"""Inference: one forward pass per distinct context, written as probability shards.

A *context* is what the model sees: ``left [MASK] right.`` for a masked LM, ``left`` for a causal
LM. Template rows that share a context (and label) share its forward pass; TSE rows read their own
verb pair's probabilities from it.

A shard (Parquet, one row per context) holds, for every eligible form, its probability and the mass
ranked above and below it (enough to recompute every metric at every cutoff without the model),
each row's TSE pair probabilities and the context's top-k tokens. Its schema metadata records the
model id, revision, tokenizer fingerprint and lemma set, so stale shards are recognisable.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm.auto import tqdm

from . import __version__
from .agreement import form_statistics
from .eligibility import single_token_ids, tokenizer_fingerprint
from .errors import ShardError, VerbevalError
from .io import atomic_path
from .models import LoadedModel, adds_bos, describe_device
from .templates import render_context

log = logging.getLogger(__name__)

SHARD_SCHEMA_VERSION = 1
META_KEY = b"verbeval"


def build_contexts(templates: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct contexts of a template table, in order of first appearance.

    Returns ``(contexts, row_context)``: contexts has columns ``context_id, left, right, plural``;
    ``row_context[i]`` is the context id of template row ``i`` (positional).
    A context is keyed by its text and its label (a causal LM ignores the right context).
    """
    right = templates["right"] if kind == "masked" else pd.Series("", index=templates.index)
    keys = pd.DataFrame({"left": templates["left"].to_numpy(), "right": right.to_numpy(),
                         "plural": templates["plural"].to_numpy(dtype=bool)})
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


def lemma_set_hash(lemmas: pd.DataFrame) -> str:
    payload = lemmas[["sing", "plur", "sing_id", "plur_id"]].to_csv(index=False).encode()
    return hashlib.sha256(payload).hexdigest()


@dataclass
class Encoded:
    ids: list[list[int]]
    target: np.ndarray  # position of the predicted token in each sequence
    bos: bool = False  # whether a BOS token was prepended (causal LMs)


def encode_contexts(lm: LoadedModel, contexts: pd.DataFrame, prepend_bos: bool | None = None) -> Encoded:
    """Token ids and target position for each context."""
    tok = lm.tokenizer
    masked = lm.kind == "masked"
    texts = [render_context(l, r, cased=lm.cased, masked=masked, mask_token=lm.mask_token)
             for l, r in zip(contexts["left"], contexts["right"])]
    ids: list[list[int]] = tok(texts, add_special_tokens=masked)["input_ids"] if texts else []
    if masked:
        mask_id = tok.mask_token_id
        target = np.empty(len(ids), dtype=np.int64)
        for i, seq in enumerate(ids):
            pos = [j for j, t in enumerate(seq) if t == mask_id]
            if len(pos) != 1:
                raise VerbevalError(f"context {texts[i]!r} encodes to {len(pos)} mask tokens (expected 1)")
            target[i] = pos[0]
    else:
        bos = tok.bos_token_id
        if prepend_bos is None:
            prepend_bos = adds_bos(tok)
        if prepend_bos:
            if bos is None:
                raise VerbevalError(f"prepend_bos requested but {lm.model_id!r} has no BOS token")
            ids = [[bos, *seq] for seq in ids]
        if any(len(seq) == 0 for seq in ids):
            raise VerbevalError("a causal context is empty (the verb is the first word) and the model has no BOS token")
        target = np.array([len(seq) - 1 for seq in ids], dtype=np.int64)
        return Encoded(ids, target, bool(prepend_bos))
    return Encoded(ids, target)


def _batches(lengths: np.ndarray, batch_size: int) -> Iterator[np.ndarray]:
    """Indices grouped into batches of similar length (longest first, so OOM shows up early)."""
    order = np.argsort(-lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def _pad(seqs: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        att[i, : len(s)] = 1
    return ids.to(device), att.to(device)


def split_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """``(body, head)`` of an LM whose head maps hidden states to vocabulary logits, else None.

    Hugging Face LMs are a base model (``model.base_model``) plus exactly one head module
    (BERT: ``cls``, RoBERTa: ``lm_head``, GPT-2: ``lm_head``). Applying the head only at the
    position being predicted skips the vocabulary projection of every other position, which is
    most of the cost of a small model on a large vocabulary.
    """
    body = getattr(model, "base_model", None)
    if body is None or body is model:
        return None
    heads = [m for _, m in model.named_children() if m is not body]
    return (body, heads[0]) if len(heads) == 1 else None


def target_logits(model: torch.nn.Module, ids: torch.Tensor, att: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """``[B, V]`` logits at position ``tgt[b]`` of each sequence.

    The model is called as usual (``model(input_ids=..., attention_mask=...)``); a forward
    pre-hook on its head hands the head only the hidden state at each target position, so the
    vocabulary projection runs once per sequence instead of once per token. Models whose head
    cannot be found are run whole and their logits indexed.
    """
    rows = torch.arange(len(ids), device=ids.device)
    parts = split_head(model)
    fired: list[bool] = []

    def gather(_mod: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        hidden = args[0] if args else next(iter(kwargs.values()))
        if not (isinstance(hidden, torch.Tensor) and hidden.dim() == 3 and hidden.shape[:2] == ids.shape):
            return None
        fired.append(True)
        picked = hidden[rows, tgt].unsqueeze(1)
        return ((picked, *args[1:]), kwargs) if args else ((picked,), {})

    handle = parts[1].register_forward_pre_hook(gather, with_kwargs=True) if parts is not None else None
    try:
        logits = model(input_ids=ids, attention_mask=att).logits
    finally:
        if handle is not None:
            handle.remove()
    if fired and logits.shape[1] == 1:
        return logits[:, 0]
    return logits[rows, tgt]


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


@dataclass
class ChunkResult:
    prob: np.ndarray  # [n, F] float32
    cum_above: np.ndarray
    cum_below: np.ndarray
    topk_ids: np.ndarray  # [n, k] int32
    topk_probs: np.ndarray  # [n, k] float32
    tse_p: np.ndarray  # [R, 2] float64, probabilities of each row's (singular, plural) form; NaN if invalid


def run_contexts(
    lm: LoadedModel,
    encoded: Encoded,
    form_ids: np.ndarray,
    row_context: np.ndarray,
    row_tse_ids: np.ndarray,
    *,
    batch_size: int = 64,
    top_k: int = 10,
    progress: bool = True,
    desc: str = "inference",
) -> ChunkResult:
    """Forward every context once and collect form statistics, TSE probabilities and top-k tokens.

    ``form_ids``: ``[F]`` eligible form ids (lemma-major, singular then plural).
    ``row_context``: ``[R]`` context index (into ``encoded``) of each TSE row; ``row_tse_ids``: ``[R, 2]``
    (singular id, plural id) with -1 for a form that is not a single token.
    """
    n, f = len(encoded.ids), len(form_ids)
    out = ChunkResult(
        prob=np.zeros((n, f), np.float32), cum_above=np.zeros((n, f), np.float32),
        cum_below=np.zeros((n, f), np.float32), topk_ids=np.zeros((n, top_k), np.int32),
        topk_probs=np.zeros((n, top_k), np.float32), tse_p=np.full((len(row_context), 2), np.nan),
    )
    if n == 0:
        return out
    dev = lm.device
    forms = torch.as_tensor(form_ids, dtype=torch.long, device=dev)
    pad_id = lm.tokenizer.pad_token_id
    if pad_id is None:
        pad_id = lm.tokenizer.eos_token_id or 0
    lengths = np.array([len(s) for s in encoded.ids])
    rows_by_ctx = pd.Series(np.arange(len(row_context))).groupby(row_context).apply(np.asarray).to_dict()
    bs = max(1, batch_size)
    pending = list(_batches(lengths, bs))
    bar = tqdm(total=n, desc=desc, unit="ctx", disable=not progress, mininterval=1.0)
    with torch.inference_mode():
        while pending:
            idx = pending.pop(0)
            try:
                ids, att = _pad([encoded.ids[i] for i in idx], pad_id, dev)
                tgt = torch.as_tensor(encoded.target[idx], device=dev)
                picked = target_logits(lm.model, ids, att, tgt)
                probs = torch.softmax(picked.to(torch.float64), dim=-1)
                p, above, below = form_statistics(probs, forms)
                tk = torch.topk(probs, k=min(top_k, probs.shape[1]), dim=-1)
            except RuntimeError as exc:  # includes torch.OutOfMemoryError
                if not _is_oom(exc) or len(idx) == 1:
                    raise
                del exc
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                half = len(idx) // 2
                log.warning("out of memory at batch size %d; retrying with %d", len(idx), half)
                pending[:0] = [idx[:half], idx[half:]]
                continue
            out.prob[idx] = p.float().cpu().numpy()
            out.cum_above[idx] = above.float().cpu().numpy()
            out.cum_below[idx] = below.float().cpu().numpy()
            out.topk_ids[idx, : tk.indices.shape[1]] = tk.indices.int().cpu().numpy()
            out.topk_probs[idx, : tk.values.shape[1]] = tk.values.float().cpu().numpy()
            rows = [rows_by_ctx[i] for i in idx if i in rows_by_ctx]
            if rows:
                r = np.concatenate(rows)
                local = {int(c): j for j, c in enumerate(idx)}
                ctx_pos = torch.as_tensor([local[int(c)] for c in row_context[r]], device=dev)
                pair = torch.as_tensor(row_tse_ids[r], device=dev)
                vals = probs[ctx_pos.unsqueeze(1), pair.clamp(min=0)]
                vals = torch.where(pair >= 0, vals, torch.full_like(vals, float("nan")))
                out.tse_p[r] = vals.cpu().numpy()
            bar.update(len(idx))
    bar.close()
    return out


def _fixed_list(values: np.ndarray, pa_type: pa.DataType) -> pa.Array:
    n, width = values.shape
    flat = pa.array(values.reshape(-1), type=pa_type)
    return pa.FixedSizeListArray.from_arrays(flat, width)


def write_shard(path: str | Path, contexts: pd.DataFrame, rows: pd.DataFrame, result: ChunkResult,
                meta: dict[str, Any]) -> dict[str, Any]:
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

    table = pa.table({
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
    })
    meta = {**meta, "schema_version": SHARD_SCHEMA_VERSION, "n_contexts": len(contexts), "n_rows": len(rows)}
    table = table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True).encode()})
    with atomic_path(path) as tmp:
        # float columns: no dictionary (it only grows them), byte-stream-split before zstd
        pq.write_table(table, tmp, compression="zstd", use_dictionary=["context_id", "plural"],
                       use_byte_stream_split=["prob.list.element", "cum_above.list.element",
                                              "cum_below.list.element", "topk_probs.list.element"])
    return meta


def read_shard_meta(path: str | Path) -> dict[str, Any]:
    try:
        md = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError) as exc:
        raise ShardError(path, f"unreadable shard ({str(exc).splitlines()[0]})") from None
    if META_KEY not in md:
        raise ShardError(path, "not a verbeval shard (no metadata)")
    return json.loads(md[META_KEY])


def select_chunk(
    templates: pd.DataFrame, group: str, kind: str, chunk: int, n_chunks: int
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, int, int]:
    """One group's rows, its distinct contexts, each row's context index and chunk ``chunk``'s
    context range ``[start, stop)``: the unit of work of an inference job (any scorer)."""
    g = templates[templates["group"] == group].reset_index(drop=True)
    if g.empty:
        raise VerbevalError(f"group {group!r} has no template rows")
    contexts, row_context = build_contexts(g, kind)
    start, stop = chunk_range(len(contexts), n_chunks, chunk)
    return g, contexts, row_context, start, stop


def infer_chunk(
    lm: LoadedModel,
    templates: pd.DataFrame,
    lemmas: pd.DataFrame,
    group: str,
    chunk: int,
    n_chunks: int,
    out: str | Path,
    *,
    batch_size: int = 64,
    top_k: int = 10,
    prepend_bos: bool | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run one (group, chunk) and write its shard. Returns the shard metadata."""
    g, contexts, row_context, start, stop = select_chunk(templates, group, lm.kind, chunk, n_chunks)
    chunk_ctx = contexts.iloc[start:stop].reset_index(drop=True)
    in_chunk = (row_context >= start) & (row_context < stop)
    rows = pd.DataFrame({"row": np.flatnonzero(in_chunk), "context_id": row_context[in_chunk]})
    sub = g.iloc[rows["row"].to_numpy()]
    sing = np.where(sub["plural"], sub["incorrect"], sub["correct"]).tolist()
    plur = np.where(sub["plural"], sub["correct"], sub["incorrect"]).tolist()
    # one tokenizer call for both forms (each call inspects the tokenizer's pipeline)
    tse_ids = single_token_ids(lm.tokenizer, sing + plur).reshape(2, -1).T.copy() \
        if len(sub) else np.zeros((0, 2), np.int64)
    form_ids = lemmas[["sing_id", "plur_id"]].to_numpy(dtype=np.int64).reshape(-1)
    encoded = encode_contexts(lm, chunk_ctx, prepend_bos)
    log.info("%s %s chunk %d/%d: %d contexts, %d rows, %d lemmas on %s", lm.model_id, group, chunk + 1, n_chunks,
             len(chunk_ctx), len(rows), len(lemmas), describe_device(lm.device))
    result = run_contexts(lm, encoded, form_ids, rows["context_id"].to_numpy() - start, tse_ids,
                          batch_size=batch_size, top_k=top_k, progress=progress,
                          desc=f"{group} {chunk + 1}/{n_chunks}")
    meta = {
        "model_id": lm.model_id, "revision": lm.revision, "kind": lm.kind, "cased": lm.cased, "dtype": lm.dtype,
        "tokenizer_fingerprint": tokenizer_fingerprint(lm.tokenizer), "lemma_set_sha256": lemma_set_hash(lemmas),
        "prepend_bos": encoded.bos,
        "n_lemmas": len(lemmas), "group": group, "chunk": chunk, "n_chunks": n_chunks,
        "context_start": start, "context_stop": stop, "n_group_contexts": len(contexts), "top_k": top_k,
        "verbeval_version": __version__,
    }
    return write_shard(out, chunk_ctx, rows, result, meta)


def chunk_label(chunk: int, n_chunks: int) -> str:
    """File stem of a shard: 1-based ``"<k>-of-<n>"`` (the workflow's ``{chunk}`` wildcard)."""
    return f"{chunk + 1}-of-{n_chunks}"

"""The forward pass: every context of a chunk run once through the model, in batches of similar
length cut to the free memory, and each context's form statistics, TSE pair probabilities and top-k
tokens collected (:func:`run_contexts`). The vocabulary projection runs only at the predicted
position (:func:`target_logits`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from verbeval.agreement.engine.encoding import Encoded
from verbeval.agreement.engine.kernels import form_statistics, probabilities
from verbeval.agreement.engine.shards import ChunkResult
from verbeval.core.memory import fit_batch_size, free_memory, is_oom, model_shape, per_context_bytes
from verbeval.core.models import LoadedModel
from verbeval.core.steps import batch_size_on

#: the inference job's logger (its out-of-memory warnings)
log = logging.getLogger("verbeval.agreement.engine.inference")

__all__ = ["fit_contexts", "run_contexts", "target_logits"]


def _batches(lengths: np.ndarray, batch_size: int) -> Iterator[np.ndarray]:
    """Indices grouped into batches of similar length (longest first, so OOM shows up early)."""
    order = np.argsort(-lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def padding_id(tokenizer: Any) -> int:
    """The id that pads a causal batch: the tokenizer's padding token, else its EOS, else 0 (the padded
    positions are masked out, so any id works that the embedding has)."""
    if tokenizer.pad_token_id is not None:
        return int(tokenizer.pad_token_id)
    return int(tokenizer.eos_token_id or 0)


def _pad(seqs: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    mask = np.arange(width) < lens[:, None]
    ids_np = np.full((len(seqs), width), pad_id, dtype=np.int64)
    ids_np[mask] = np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(lens.sum()))
    ids, att = torch.from_numpy(ids_np), torch.from_numpy(mask.astype(np.int64))
    if device.type == "cuda":  # pinned host memory: the copy does not block the host
        return ids.pin_memory().to(device, non_blocking=True), att.pin_memory().to(device, non_blocking=True)
    return ids, att


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
        # a model split by a device map hands the head hidden states on the last layer's device
        picked = hidden[rows.to(hidden.device), tgt.to(hidden.device)].unsqueeze(1)
        return ((picked, *args[1:]), kwargs) if args else ((picked,), {})

    handle = parts[1].register_forward_pre_hook(gather, with_kwargs=True) if parts is not None else None
    try:
        logits = model(input_ids=ids, attention_mask=att).logits
    finally:
        if handle is not None:
            handle.remove()
    logits = logits.to(ids.device)  # no-op unless a device map left the logits on another device
    if fired and logits.shape[1] == 1:
        return logits[:, 0]
    return logits[rows, tgt]


#: bytes per vocabulary entry of one context at the peak after its forward pass, besides its float32
#: logits. CPU: the float64 probabilities (8) and the float64 copy of the logits the softmax makes
#: (8), the finiteness test's temporaries before them (7, freed), 4 of slack: a tiny GPT-2 peaked at
#: 21-24 bytes per entry with the logits (VmHWM, batches of 2,000). Accelerators: the probabilities
#: (8) and form_statistics' sort values and indices, flipped copy and two cumulative sums (5 x 8),
#: 4 of slack (32 measured for the torch kernels on CPU, besides the probabilities)
CPU_VOCAB_BYTES = 20
ACCELERATOR_VOCAB_BYTES = 52


def fit_contexts(lm: LoadedModel, encoded: Encoded, batch_size: int) -> int:
    """``batch_size`` cut to the number of contexts and to what fits in the free memory of the
    model's device (:func:`verbeval.core.memory.fit_batch_size`), estimated from the model's output
    size, hidden size and layers and the longest context; one context that cannot fit stops here,
    before any forward pass."""
    shape = model_shape(lm.model)
    longest = max((len(s) for s in encoded.ids), default=1)
    per = per_context_bytes(
        shape,
        longest,
        logit_positions=1 if split_head(lm.model) is not None else longest,
        vocab_entry_bytes=CPU_VOCAB_BYTES if lm.device.type == "cpu" else ACCELERATOR_VOCAB_BYTES,
    )
    return fit_batch_size(
        batch_size,
        len(encoded.ids),
        per,
        free_memory(lm.device),
        what=lm.model_id,
        detail=f"vocabulary {shape.vocab}, {longest} tokens",
    )


class _Batches:
    """The batches still to run (similar lengths, longest first); after an out-of-memory error a batch
    is halved and retried, and every later batch is cut to that half (one warning per cut)."""

    def __init__(self, lengths: np.ndarray, batch_size: int) -> None:
        self.pending = list(_batches(lengths, batch_size))
        self.cap: int | None = None

    def __bool__(self) -> bool:
        return bool(self.pending)

    def next(self) -> np.ndarray:
        idx = self.pending.pop(0)
        if self.cap is not None and len(idx) > self.cap:  # consecutive slices: the same contexts, in order
            cap = self.cap
            self.pending[:0] = [idx[i : i + cap] for i in range(cap, len(idx), cap)]
            idx = idx[:cap]
        return idx

    def halve(self, idx: np.ndarray) -> None:
        """Run ``idx`` again as two halves, and cut every later batch to that half."""
        half = len(idx) // 2
        if self.cap is None or half < self.cap:
            log.warning("out of memory at batch size %d; retrying with %d, and later batches too", len(idx), half)
        self.cap = half if self.cap is None else min(self.cap, half)
        self.pending[:0] = [idx[:half], idx[half:]]


class _ProbBuffer:
    """On the CPU, one float64 buffer for every batch's probabilities (no fresh 512 MB per batch at
    256k x 256: page faults), as large as the largest batch so far (the first: batches are cut from
    one size, longest first); nothing computed from it keeps a view of it past its batch."""

    def __init__(self) -> None:
        self.buf: torch.Tensor | None = None

    def rows(self, n: int, width: int) -> torch.Tensor:
        if self.buf is None or self.buf.shape[0] < n or self.buf.shape[1] != width:
            self.buf = None  # the smaller one goes before the larger one is allocated
            self.buf = torch.empty((n, width), dtype=torch.float64)
        return self.buf[:n]


class _Collector:
    """A batch's results copied to the host and stored in ``out``: on CUDA into pinned memory without
    waiting, and stored one batch later (the GPU already runs the next batch meanwhile)."""

    def __init__(self, out: ChunkResult, cuda: bool, bar: Any) -> None:
        self.out, self.cuda, self.bar = out, cuda, bar
        self.in_flight: tuple[Any, ...] | None = None
        self.flagged: list[tuple[np.ndarray, torch.Tensor]] = []  # (contexts, whether each one's logits are finite)

    def host(self, t: torch.Tensor) -> torch.Tensor:
        """Start the copy of a result to the CPU; on CUDA into pinned memory, without waiting."""
        if not self.cuda:
            return t
        buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        buf.copy_(t, non_blocking=True)
        return buf

    def submit(self, idx: np.ndarray, r: np.ndarray, tensors: tuple[torch.Tensor, ...], tse: Any) -> None:
        """Queue a computed batch (its copies started: :meth:`host`) and store the one before it."""
        event = None
        if self.cuda:
            event = torch.cuda.Event()
            event.record()
        if self.in_flight is not None:
            self._store(self.in_flight)
        self.in_flight = (idx, r, event, *tensors, tse)

    def _store(self, job: tuple[Any, ...]) -> None:
        idx, r, event, p, above, below, tki, tkp, tse = job
        if event is not None:
            event.synchronize()
        out = self.out
        out.prob[idx] = p.numpy()
        out.cum_above[idx] = above.numpy()
        out.cum_below[idx] = below.numpy()
        out.topk_ids[idx, : tki.shape[1]] = tki.numpy()
        out.topk_probs[idx, : tkp.shape[1]] = tkp.numpy()
        if tse is not None:
            out.tse_p[r] = tse.numpy()
        self.bar.update(len(idx))

    def finish(self, dev: torch.device) -> None:
        """Store the last batch, wait for the device, and mark the contexts whose logits were not finite."""
        if self.in_flight is not None:
            self._store(self.in_flight)
        if self.cuda:
            torch.cuda.synchronize(dev)
        for idx, finite in self.flagged:
            self.out.nonfinite[idx] = ~finite.numpy()


class _TseRows:
    """The TSE rows of each context (``rows_sorted[starts[c]:starts[c + 1]]`` are context ``c``'s) and
    their pair probabilities picked from a batch's probabilities."""

    def __init__(self, n: int, row_context: np.ndarray, row_tse_ids: np.ndarray, dev: torch.device) -> None:
        self.row_context, self.row_tse_ids, self.dev = row_context, row_tse_ids, dev
        self.rows_sorted = np.argsort(row_context, kind="stable")
        self.starts = np.searchsorted(row_context[self.rows_sorted], np.arange(n + 1), side="left")
        self.local = np.empty(n, dtype=np.int64)  # position of a context inside its batch

    def of_batch(self, idx: np.ndarray, probs: torch.Tensor, host: Any) -> tuple[np.ndarray, Any]:
        """(the batch's TSE rows, their (singular, plural) probabilities on the way to the host, NaN for a
        form that is not one token; None when the batch has no TSE row)."""
        bounds = np.stack([self.starts[idx], self.starts[idx + 1]], axis=1)
        r = np.concatenate([self.rows_sorted[a:b] for a, b in bounds]) if len(bounds) else np.zeros(0, np.int64)
        if not len(r):
            return r, None
        self.local[idx] = np.arange(len(idx))
        ctx_pos = torch.as_tensor(self.local[self.row_context[r]]).to(self.dev, non_blocking=True)
        pair = torch.as_tensor(self.row_tse_ids[r]).to(self.dev, non_blocking=True)
        vals = probs[ctx_pos.unsqueeze(1), pair.clamp(min=0)]
        return r, host(torch.where(pair >= 0, vals, torch.full_like(vals, float("nan"))))


def run_contexts(
    lm: LoadedModel,
    encoded: Encoded,
    form_ids: np.ndarray,
    row_context: np.ndarray,
    row_tse_ids: np.ndarray,
    *,
    batch_size: int | str | None = None,
    top_k: int = 10,
    progress: bool = True,
    desc: str = "inference",
    bar: Any = None,
) -> ChunkResult:
    """Forward every context once and collect form statistics, TSE probabilities and top-k tokens.

    ``form_ids``: ``[F]`` eligible form ids (lemma-major, singular then plural).
    ``row_context``: ``[R]`` context index (into ``encoded``) of each TSE row; ``row_tse_ids``: ``[R, 2]``
    (singular id, plural id) with -1 for a form that is not a single token.
    ``batch_size``: contexts per forward pass at most (``auto`` or None: ``inference.batch_size``'s
    default on the model's device, :func:`verbeval.core.steps.batch_size_on`), cut to the number of contexts and to what
    fits in the device's free memory (:func:`fit_contexts`); a batch that runs out of memory all
    the same (CUDA, or the CPU allocator) is halved and retried, and every later batch is cut to
    that half (one warning per cut, not one failed allocation per batch).
    """
    n, f = len(encoded.ids), len(form_ids)
    out = ChunkResult(
        prob=np.zeros((n, f), np.float32),
        cum_above=np.zeros((n, f), np.float32),
        cum_below=np.zeros((n, f), np.float32),
        topk_ids=np.zeros((n, top_k), np.int32),
        topk_probs=np.zeros((n, top_k), np.float32),
        tse_p=np.full((len(row_context), 2), np.nan),
        nonfinite=np.zeros(n, bool),
    )
    if n == 0:
        return out
    dev = lm.device
    cuda = dev.type == "cuda"
    forms = torch.as_tensor(form_ids, dtype=torch.long, device=dev)
    pad_id = padding_id(lm.tokenizer)
    tse_rows = _TseRows(n, row_context, row_tse_ids, dev)
    batches = _Batches(
        np.array([len(s) for s in encoded.ids]), fit_contexts(lm, encoded, batch_size_on(batch_size, dev.type))
    )
    own_bar = bar is None
    if own_bar:
        bar = tqdm(total=n, desc=desc, unit="ctx", disable=not progress, mininterval=1.0)
    collector = _Collector(out, cuda, bar)
    host = collector.host
    prob_buf = _ProbBuffer()
    with torch.inference_mode():
        while batches:
            idx = batches.next()
            try:
                ids, att = _pad([encoded.ids[i] for i in idx], pad_id, dev)
                tgt = torch.as_tensor(encoded.target[idx]).to(dev, non_blocking=True)
                picked = target_logits(lm.model, ids, att, tgt)
                finite = torch.isfinite(picked).all(dim=-1)
                if cuda:
                    probs = probabilities(picked)
                else:
                    probs = probabilities(picked, out=prob_buf.rows(len(idx), picked.shape[1]))
                p, above, below = form_statistics(probs, forms)
                tk = torch.topk(probs, k=min(top_k, probs.shape[1]), dim=-1)
            except (RuntimeError, MemoryError) as exc:  # includes torch.OutOfMemoryError
                if not is_oom(exc) or len(idx) == 1:
                    raise
                del exc
                prob_buf.buf = None  # its batch was too large; the halves allocate their own
                if cuda:
                    torch.cuda.empty_cache()
                batches.halve(idx)
                continue
            collector.flagged.append((idx, host(finite)))
            r, tse = tse_rows.of_batch(idx, probs, host)
            tensors = (host(p.float()), host(above.float()), host(below.float()))
            tensors += (host(tk.indices.int()), host(tk.values.float()))
            collector.submit(idx, r, tensors, tse)
        collector.finish(dev)
    if own_bar:
        bar.close()
    return out

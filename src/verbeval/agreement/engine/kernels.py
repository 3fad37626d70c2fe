"""The torch kernels of inference: the float64 softmax of a batch of logits and, for the lemma forms,
their probability and the probability mass ranked above and below them (the arrays of
:class:`verbeval.agreement.scores.metrics.FormStats`, from which every score at every cutoff is computed).

They run on any device: on an accelerator in torch, on CPU in numpy (one context at a time, shared
among threads). Both rank the vocabulary by descending probability, ties broken by token id, and
give the same bits as a full stable sort.
"""

from __future__ import annotations

import concurrent.futures

import numpy as np
import torch

ArrayLike = np.ndarray | torch.Tensor


def as_tensor(x: ArrayLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x`` as a tensor (anything else is copied into one: inputs may be read-only), in ``dtype`` when given."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.array(x))
    return t.to(dtype) if dtype is not None else t


def _numpy_path(t: torch.Tensor) -> bool:
    """Whether a kernel takes its numpy (CPU) implementation rather than the torch one used on
    accelerators (the tests switch this off to run the accelerator code on CPU)."""
    return t.device.type == "cpu"


#: on accelerators, rows with more tied forms than this are ranked by a full stable sort (see form_statistics)
MAX_COUNTED_TIES = 8


def _stable_ranks(probs: torch.Tensor, form_ids: torch.Tensor) -> torch.Tensor:
    """Rank of each form in descending probability, ties by token id (a full stable sort)."""
    b, v = probs.shape
    order = torch.sort(probs, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(v, device=probs.device).expand(b, v))
    return ranks[:, form_ids]


def _tie_rank(probs: torch.Tensor, rows: torch.Tensor, form_ids: torch.Tensor, block: int = 256) -> torch.Tensor:
    """For each (row, form) pair, how many vocabulary items with a smaller id have exactly its
    probability (accelerators; on CPU :func:`_tie_counts`)."""
    out = torch.empty(len(rows), dtype=torch.long, device=probs.device)
    ar = torch.arange(probs.shape[1], device=probs.device)
    for s in range(0, len(rows), block):
        r, f = rows[s : s + block], form_ids[s : s + block]
        pr = probs[r]
        eq = (pr == pr.gather(1, f.unsqueeze(1))) & (ar.unsqueeze(0) < f.unsqueeze(1))
        out[s : s + block] = eq.sum(dim=1)
    return out


def form_statistics(probs: torch.Tensor, form_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Probability, mass ranked above and mass ranked below for ``form_ids`` in each row of ``probs``.

    ``probs``: ``[B, V]`` float64 probabilities (any device). ``form_ids``: ``[F]`` token ids.
    Returns three ``[B, F]`` float64 tensors on the same device. Cumulative sums are float64, so
    the tail of a peaked distribution is not lost to saturation (a pitfall of the paper's code).

    The ranking is descending probability with ties broken by token id. Only the sorted *values*
    are needed: the mass above a form is the running sum of the descending values up to its rank,
    the mass below the running sum of the ascending values, and a form's rank is the number of
    items more probable than it (a binary search in the sorted values) plus the number of equally
    probable items with a smaller id (counted exactly, only for tied forms: :func:`_tie_rank`). The
    sums are accumulated in the same order as a full stable sort would give, so the results are
    identical, bit for bit, to sorting the vocabulary with its permutation, at a fraction of the cost.
    """
    if probs.dtype != torch.float64:
        raise TypeError("form_statistics needs float64 probabilities")
    b, v = probs.shape
    if _numpy_path(probs):
        return _form_statistics_numpy(probs, form_ids)
    asc = torch.sort(probs, dim=-1).values
    asc_cum = torch.cumsum(asc, dim=-1)  # mass of the i+1 least probable items
    desc_cum = torch.cumsum(torch.flip(asc, dims=[-1]), dim=-1)  # mass of the i+1 most probable items
    p_f = probs[:, form_ids].contiguous()
    le = torch.searchsorted(asc, p_f, right=True)  # items with probability <= p_f (the form included)
    rank = v - le  # items strictly more probable
    tied = (le >= 2) & (asc.gather(1, (le - 2).clamp(min=0)) == p_f)  # another item has the same probability
    if bool(tied.any()):
        # a few tied forms in a row: count the equal items with a smaller id directly (one pass
        # over the vocabulary per form); many (low-precision logits, e.g. bfloat16): rank the
        # row with a full stable sort instead
        heavy = tied.sum(dim=1) > MAX_COUNTED_TIES
        r_idx, f_idx = (tied & ~heavy.unsqueeze(1)).nonzero(as_tuple=True)
        if len(r_idx):
            rank[r_idx, f_idx] += _tie_rank(probs, r_idx, form_ids[f_idx])
        if bool(heavy.any()):
            rows = heavy.nonzero(as_tuple=True)[0]
            rank[rows] = _stable_ranks(probs[rows], form_ids)
    zero = torch.zeros((), dtype=probs.dtype, device=probs.device)
    above = torch.where(rank > 0, desc_cum.gather(1, (rank - 1).clamp(min=0)), zero)
    below_idx = v - 2 - rank  # ascending position of the form, minus one
    below = torch.where(below_idx >= 0, asc_cum.gather(1, below_idx.clamp(min=0)), zero)
    return p_f, above, below


def _form_statistics_numpy(
    probs: torch.Tensor, form_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`form_statistics` on CPU, one context at a time (each row's arrays stay in cache).

    Per context: numpy's SIMD sort of the values (no permutation), two sorted binary searches of
    the forms, the exact tie count of :func:`_tie_counts` for the forms that share their probability
    with another item, and two one-dimensional ``torch.cumsum`` (the same sequential float64 sums
    as a full sort's cumulative sum, several times faster than the row-wise two-dimensional one).
    The contexts are shared among ``torch.get_num_threads()`` threads (numpy and torch release the
    GIL in these calls).
    """
    p_all, ids = probs.numpy(), form_ids.numpy().astype(np.int64, copy=False)
    b, v = p_all.shape
    p_f = np.ascontiguousarray(p_all[:, ids])
    above = np.zeros((b, len(ids)))
    below = np.zeros((b, len(ids)))

    def rows(start: int, stop: int) -> None:
        scratch = _RowScratch(v)  # one set of row buffers per thread, reused: no page faults per row
        for i in range(start, stop):
            above[i], below[i] = _row_statistics(p_all[i], p_f[i], ids, scratch)

    workers = max(1, min(torch.get_num_threads(), b, _MAX_THREADS))
    bounds = np.linspace(0, b, workers + 1).astype(int)
    if workers == 1:
        rows(0, b)
    else:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for fut in [pool.submit(rows, int(x), int(y)) for x, y in zip(bounds[:-1], bounds[1:])]:
                fut.result()
    return torch.from_numpy(p_f), torch.from_numpy(above), torch.from_numpy(below)


#: most threads :func:`_form_statistics_numpy` shares a batch among
_MAX_THREADS = 16


class _RowScratch:
    """Buffers of one vocabulary row reused from context to context by one thread of
    :func:`_form_statistics_numpy` (fresh 2 MB arrays per row at a 256k vocabulary cost page faults)."""

    def __init__(self, v: int) -> None:
        self.asc = np.empty(v)  # the row's values, ascending
        self.desc = np.empty(v)  # the same, descending
        self.cum = torch.empty(v, dtype=torch.float64)  # running sums


def _row_statistics(
    p: np.ndarray, pf: np.ndarray, ids: np.ndarray, scratch: _RowScratch
) -> tuple[np.ndarray, np.ndarray]:
    """Mass above and mass below each form of one context (``pf = p[ids]``)."""
    v = len(p)
    asc = scratch.asc
    np.copyto(asc, p)
    asc.sort()  # in place: the same values as np.sort(p), without a new array
    order = np.argsort(pf)
    ranked = pf[order]
    le = np.empty(len(pf), dtype=np.int64)
    le[order] = np.searchsorted(asc, ranked, side="right")  # items <= p_f, the form included
    lt = np.empty(len(pf), dtype=np.int64)
    lt[order] = np.searchsorted(asc, ranked, side="left")  # items < p_f
    rank = v - le  # items strictly more probable
    tied = le - lt >= 2  # another item has the same probability
    if tied.any():
        rank[tied] += _tie_counts(p, asc, pf[tied], lt[tied], ids[tied])
    cum, c = scratch.cum, scratch.cum.numpy()
    np.copyto(scratch.desc, asc[::-1])
    torch.cumsum(torch.from_numpy(scratch.desc), 0, out=cum)  # mass of the k+1 most probable items
    above = np.where(rank > 0, c[np.maximum(rank - 1, 0)], 0.0)
    below_idx = v - 2 - rank  # ascending position of the form, minus one
    torch.cumsum(torch.from_numpy(asc), 0, out=cum)  # mass of the k+1 least probable items
    below = np.where(below_idx >= 0, c[np.maximum(below_idx, 0)], 0.0)
    return above, below


#: up to this many distinct tied values, :func:`_tie_counts` compares the vocabulary with each
#: (one fast pass each); beyond it, it argsorts the row. A float32 model at a 256k vocabulary has
#: about 12 (up to 18 seen) tied form values per context; at 256k one pass took 0.05 ms and the
#: argsort 5.7 ms (AMD Zen 4, numpy's AVX2 kernels), so 32 passes still cost a third of the argsort.
#: bfloat16 logits give about 1,100 and take the argsort.
_COMPARED_TIES = 32


def _tie_counts(
    p: np.ndarray, asc: np.ndarray, values: np.ndarray, starts: np.ndarray, form_ids: np.ndarray
) -> np.ndarray:
    """For each tied form (``values[j]`` = ``p[form_ids[j]]``, first found at ``asc[starts[j]]`` in
    the ascending values ``asc``), how many items of ``p`` with a smaller id have exactly its probability.

    With few distinct tied values (float32 logits), the row is compared with each of them (one
    fast pass each). With many (low-precision logits such as bfloat16, where most of the
    vocabulary shares a handful of values), the row is argsorted once, the items are keyed by
    (start of their run of equal values, id), and each form's count is a binary search in the
    sorted keys.
    """
    uniq = np.unique(values)
    if len(uniq) <= _COMPARED_TIES:
        vi = np.searchsorted(uniq, values)
        equal_ids = [np.flatnonzero(p == u) for u in uniq]  # ascending ids of the items equal to each value
        return np.array(
            [np.searchsorted(equal_ids[j], f) for j, f in zip(vi.tolist(), form_ids.tolist())], dtype=np.int64
        )
    n = len(p)
    order = np.argsort(p)  # ascending; equal values in any order
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.not_equal(asc[1:], asc[:-1], out=new_run[1:])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0))
    keys = run_start * n + order  # (run, id): sorted, the runs' items in id order
    keys.sort()
    return np.searchsorted(keys, starts * n + form_ids) - starts


def probabilities(logits: ArrayLike, out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax in float64 of ``[N, V]`` logits.

    The softmax converts its input to float64 itself (``dtype=``), bit-identical to converting
    first, without a float64 copy of the logits (at a 256k vocabulary the copy alone was about a
    sixth of the post-processing time).

    ``out``: a contiguous float64 ``[N, V]`` tensor on the logits' device to write into and return,
    reused by the caller from batch to batch. The same kernel writes the same bits; a fresh
    ``[256, 256000]`` float64 result is 512 MB whose first touch costs page faults (2.0 against 1.2 ms
    per context at 2 threads, AMD Zen 3). The caller must not keep the result past its next call.
    """
    t = as_tensor(logits)
    if out is None:
        return torch.softmax(t, dim=-1, dtype=torch.float64)
    if out.shape != t.shape or out.dtype != torch.float64 or out.device != t.device or not out.is_contiguous():
        raise ValueError(
            f"probabilities: out must be a contiguous float64 tensor of shape {tuple(t.shape)} "
            f"on {t.device}, not {out.dtype} {tuple(out.shape)} on {out.device}"
        )
    return torch.ops.aten.softmax.int_out(t, -1, torch.float64, out=out)

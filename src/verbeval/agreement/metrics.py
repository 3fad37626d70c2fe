"""Agreement metrics of Newman et al. (2021): TSE, EW and MW, with top-p / bottom-p cutoffs.

Definitions (see ``docs/metrics.md`` and DESIGN.md). For a context with distribution ``P`` over the
vocabulary and a set ``S`` of vocabulary items:

* EW(S) = mean over *counted* lemmas of 1[P(l+) > P(l-)]
* MW(S) = sum of P(f) over correct forms f in S / sum of P(f) over all eligible forms f in S
  (top-p), or, for bottom-p, the same sums restricted to counted lemmas' two forms.
* prob_counted(S) = sum of P(l_sg) + P(l_pl) over counted lemmas (both forms, as in the paper's
  code and Figure 3); prob_counted_forms(S) = the mass of the counted lemmas' forms that are in S.
  At bottom-p a counted lemma has both forms in S, so the two coincide.

For top-p, a lemma counts when *either* of its forms is in ``S``; for bottom-p, only when *both*
are. ``S`` is the set of vocabulary ranks strictly before the straddling rank ("pre") or up to and
including it ("post"); the reported score interpolates linearly between the two with
``alpha = (p - cum[r*-1]) / (cum[r*] - cum[r*-1])``. As in the paper's released code, when only one
of pre/post is defined, the defined one is reported; when neither is, the score is NaN ("invalid").
``p >= 1`` means the whole vocabulary.

Everything here is vectorised: the per-form statistics (probability, mass ranked above, mass
ranked below) are computed once per context; each side (top, bottom) then sorts the eligible forms
once per context, and every pre/post set at every cutoff is a prefix of that order, answered with
prefix sums and a batched binary search: no Python loop over lemmas, vocabulary or cutoffs.

Example (the paper's Table 1 toy: one plural context, two lemmas)::

    >>> import numpy as np
    >>> from verbeval.agreement import score_logits
    >>> probs = np.array([[0.1, 0.6, 0.2, 0.1]])  # ids: 0 "is", 1 "are", 2 "exists", 3 "exist"
    >>> res = score_logits(np.log(probs), plural=np.array([True]),
    ...                    lemma_ids=np.array([[0, 1], [2, 3]]),
    ...                    top_cutoffs=[1.0], bottom_cutoffs=[1.0], tse_ids=np.array([[0, 1]]))
    >>> float(res.tse[0]), float(res.ew_top[0, 0]), round(float(res.mw_top[0, 0]), 6)
    (1.0, 0.5, 0.7)
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

ArrayLike = np.ndarray | torch.Tensor

#: The paper's cutoffs (Newman et al. 2021, Figures 1-2).
PAPER_TOP_CUTOFFS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 1.0)
PAPER_BOTTOM_CUTOFFS: tuple[float, ...] = (0.5, 0.1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)


@dataclass(frozen=True)
class FormStats:
    """Per-context statistics of every eligible form, enough to recompute any metric and cutoff.

    All arrays have shape ``[N, L, 2]``: context, lemma, form (0 = singular, 1 = plural).

    * ``prob``: probability of the form in the context.
    * ``cum_above``: total probability of the vocabulary items ranked strictly above the form
      (descending probability, ties broken by token id).
    * ``cum_below``: total probability of the items ranked strictly below it.
    """

    prob: np.ndarray
    cum_above: np.ndarray
    cum_below: np.ndarray


@dataclass(frozen=True)
class AgreementScores:
    """Per-context scores. ``[N]`` for ``tse``; ``[N, n_cutoffs]`` otherwise; NaN where undefined."""

    tse: np.ndarray
    ew_top: np.ndarray
    mw_top: np.ndarray
    prob_counted_top: np.ndarray
    ew_bottom: np.ndarray
    mw_bottom: np.ndarray
    prob_counted_bottom: np.ndarray
    prob_counted_forms_top: np.ndarray
    prob_counted_forms_bottom: np.ndarray


@dataclass(frozen=True)
class SideScores:
    """One side's scores, ``[N, n_cutoffs]``.

    ``prob_counted``: both forms' mass of every counted lemma (the paper's Figure 3 quantity);
    ``prob_counted_forms``: the mass of the counted lemmas' forms inside the set (equal to
    ``prob_counted`` at bottom-p, where a counted lemma has both forms in the set).
    """

    ew: np.ndarray
    mw: np.ndarray
    prob_counted: np.ndarray
    prob_counted_forms: np.ndarray


def _as_tensor(x: ArrayLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.array(x))  # copy: inputs may be read-only
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


def _form_statistics_numpy(probs: torch.Tensor, form_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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


def _row_statistics(p: np.ndarray, pf: np.ndarray, ids: np.ndarray,
                    scratch: _RowScratch) -> tuple[np.ndarray, np.ndarray]:
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


def _tie_counts(p: np.ndarray, asc: np.ndarray, values: np.ndarray, starts: np.ndarray,
                form_ids: np.ndarray) -> np.ndarray:
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
        return np.array([np.searchsorted(equal_ids[j], f) for j, f in zip(vi.tolist(), form_ids.tolist())],
                        dtype=np.int64)
    n = len(p)
    order = np.argsort(p)  # ascending; equal values in any order
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.not_equal(asc[1:], asc[:-1], out=new_run[1:])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0))
    keys = run_start * n + order  # (run, id): sorted, the runs' items in id order
    keys.sort()
    return np.searchsorted(keys, starts * n + form_ids) - starts


def _stable_order(keys: torch.Tensor) -> torch.Tensor:
    """Permutation sorting each row of ``[N, F]`` keys ascending, ties kept in position order.

    Keys read from shards are float32 values >= 0, whose bit patterns sort like the values: each
    is packed with its position into one int64 and sorted with numpy's SIMD sort, several times
    faster than a stable ``torch.sort``; other keys take ``torch.sort(stable=True)``. Same result.
    """
    n, f = keys.shape
    if _numpy_path(keys) and keys.dtype == torch.float64 and f < 2**31:
        k32 = keys.to(torch.float32) + 0.0  # + 0.0 turns -0.0 into +0.0
        if bool(((k32 >= 0) & (k32.to(torch.float64) == keys)).all()):
            packed = (k32.numpy().view(np.int32).astype(np.int64) << 32) | np.arange(f, dtype=np.int64)
            packed.sort(axis=-1)
            return torch.from_numpy(packed & 0xFFFFFFFF)
    return torch.sort(keys, dim=-1, stable=True).indices


def _cutoff_tensor(cutoffs: Sequence[float] | np.ndarray, n: int) -> torch.Tensor:
    c = torch.as_tensor(np.asarray(cutoffs, dtype=np.float64))
    if c.ndim != 1:
        raise ValueError("cutoffs must be a 1-d sequence")
    if bool(((c <= 0) | torch.isnan(c)).any()):
        raise ValueError(f"cutoffs must be > 0, got {c.tolist()}")
    return c.expand(n, c.shape[0]).contiguous()


def _prefix(values: torch.Tensor) -> torch.Tensor:
    """Cumulative sums with a leading zero column: ``out[:, k]`` is the sum of the first k values."""
    out = torch.empty((values.shape[0], values.shape[1] + 1), dtype=values.dtype)
    out[:, 0] = 0
    out[:, 1:] = values
    return out.cumsum_(dim=-1)  # in place on a contiguous tensor: ~3x faster than out=<a strided view>


def _count_below(sorted_keys: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Number of keys strictly below each cutoff; ``p >= 1`` selects every key."""
    p_eff = torch.where(p >= 1.0, torch.full_like(p, float("inf")), p)
    return torch.searchsorted(sorted_keys.contiguous(), p_eff, side="left")


def _ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    out = num / torch.where(den > 0, den, torch.ones_like(den))
    return torch.where(den > 0, out, torch.full_like(out, float("nan")))


def _interpolate(pre: torch.Tensor, post: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """(1 - alpha) * pre + alpha * post; a NaN side takes the other side's value (paper's code)."""
    pre_f = torch.where(torch.isnan(pre), post, pre)
    post_f = torch.where(torch.isnan(post), pre, post)
    return pre_f + alpha * (post_f - pre_f)


def side_scores(
    prob: ArrayLike,
    excl: ArrayLike,
    plural: ArrayLike,
    cutoffs: Sequence[float] | np.ndarray,
    *,
    both_forms: bool,
) -> SideScores:
    """EW, MW and counted mass for one side of the distribution.

    ``prob``, ``excl``: ``[N, L, 2]`` (form order singular, plural); ``excl`` is the mass ranked
    strictly before the form when walking from the end being cut (``cum_above`` for top-p,
    ``cum_below`` for bottom-p). ``both_forms``: a lemma counts only when both forms are in the set
    (bottom-p) rather than either (top-p).
    """
    prob_t = _as_tensor(prob, torch.float64)
    excl_t = _as_tensor(excl, torch.float64)
    plural_t = _as_tensor(plural).to(torch.bool)
    n, n_lemmas, two = prob_t.shape
    if two != 2 or excl_t.shape != prob_t.shape or plural_t.shape != (n,):
        raise ValueError("prob/excl must be [N, L, 2] and plural [N]")
    p = _cutoff_tensor(cutoffs, n)
    if n_lemmas == 0:
        nan = np.full(tuple(p.shape), np.nan)
        return SideScores(nan, nan.copy(), np.zeros(tuple(p.shape)), np.zeros(tuple(p.shape)))

    f = 2 * n_lemmas
    right_idx = plural_t.long().view(n, 1, 1).expand(n, n_lemmas, 1)
    p_right = prob_t.gather(2, right_idx).squeeze(2)
    p_wrong = prob_t.gather(2, 1 - right_idx).squeeze(2)
    lemma_ok = (p_right > p_wrong).to(torch.float64)
    is_right_form = torch.zeros_like(prob_t)
    is_right_form.scatter_(2, right_idx, 1.0)

    # One sort per context: the forms in ranking order from the end being cut. Every set scored
    # below (pre/post at every cutoff) is a prefix of this order.
    flat_excl = excl_t.reshape(n, f)
    order = _stable_order(flat_excl)
    excl_s = flat_excl.gather(1, order)
    prob_s = prob_t.reshape(n, f).gather(1, order)
    # inclusive mass is nondecreasing along the ranking; cummax only irons out storage rounding
    incl_s = torch.cummax(excl_s + prob_s, dim=-1).values
    n_pre = _count_below(incl_s, p)  # forms entirely before the cutoff
    n_post = _count_below(excl_s, p)  # forms starting before it (pre + the straddling form)

    # position of each form in the ranking; a lemma enters the set with its first form (top-p,
    # either form counts) or its second form (bottom-p, both forms must be in)
    pos = torch.empty_like(order)
    pos.scatter_(1, order, torch.arange(f).expand(n, f))
    pos = pos.view(n, n_lemmas, 2)
    enter = (torch.maximum if both_forms else torch.minimum)(pos[:, :, 0], pos[:, :, 1])  # [N, L]

    def at_entry(values: torch.Tensor) -> torch.Tensor:
        """Lemma values placed at the ranking position where the lemma enters the set."""
        return torch.zeros((n, f), dtype=torch.float64).scatter_(1, enter, values)

    sums = {
        "count": at_entry(torch.ones_like(lemma_ok)),
        "ok": at_entry(lemma_ok),
    }
    # counted mass, lemma level: both forms of every counted lemma (the paper's code, Figure 3)
    sums["mass"] = at_entry(p_right + p_wrong)
    if both_forms:  # MW over counted lemmas, both forms' mass (= the lemma-level counted mass)
        sums["num"] = at_entry(p_right)
        sums["den"] = sums["mass"]
    else:  # MW over the forms in the set (= the form-level counted mass)
        sums["num"] = (prob_t * is_right_form).reshape(n, f).gather(1, order)
        sums["den"] = prob_s
    prefix = {k: _prefix(v) for k, v in sums.items()}

    def scores_at(k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        count, ok, num, den, mass = (prefix[key].gather(1, k) for key in ("count", "ok", "num", "den", "mass"))
        ew = _ratio(ok, count)
        mw = torch.where(count > 0, _ratio(num, den), torch.full_like(num, float("nan")))
        return ew, mw, mass, den

    pre, post = scores_at(n_pre), scores_at(n_post)
    # straddling rank: the first form not entirely before the cutoff, if it starts before it
    cand = n_pre.clamp(max=f - 1)
    c_excl, c_prob = excl_s.gather(1, cand), prob_s.gather(1, cand)
    straddles = (n_pre < f) & (c_excl < p) & (p < 1.0) & (c_prob > 0)
    alpha = (p - c_excl) / torch.where(c_prob > 0, c_prob, torch.ones_like(c_prob))
    alpha = torch.where(straddles, alpha.clamp(0.0, 1.0), torch.zeros_like(alpha))
    ew = _interpolate(pre[0], post[0], alpha)
    mw = _interpolate(pre[1], post[1], alpha)
    counted = pre[2] + alpha * (post[2] - pre[2])
    counted_forms = pre[3] + alpha * (post[3] - pre[3])
    return SideScores(ew.numpy(), mw.numpy(), counted.numpy(), counted_forms.numpy())


def tse_scores(p_sing: ArrayLike, p_plur: ArrayLike, plural: ArrayLike, valid: ArrayLike | None = None) -> np.ndarray:
    """TSE per row: 1.0 if the correct form is strictly more probable than the incorrect one,
    0.0 if not, NaN where ``valid`` is False (a form that is not a single token)."""
    ps, pp = np.asarray(p_sing, dtype=np.float64), np.asarray(p_plur, dtype=np.float64)
    pl = np.asarray(plural, dtype=bool)
    right = np.where(pl, pp, ps)
    wrong = np.where(pl, ps, pp)
    out = (right > wrong).astype(np.float64)
    if valid is not None:
        out[~np.asarray(valid, dtype=bool)] = np.nan
    return out


def scores_from_stats(
    stats: FormStats,
    plural: ArrayLike,
    top_cutoffs: Sequence[float] | np.ndarray,
    bottom_cutoffs: Sequence[float] | np.ndarray,
) -> tuple[SideScores, SideScores]:
    """EW/MW/counted mass for the top-p and bottom-p cutoffs from stored form statistics."""
    top = side_scores(stats.prob, stats.cum_above, plural, top_cutoffs, both_forms=False)
    bottom = side_scores(stats.prob, stats.cum_below, plural, bottom_cutoffs, both_forms=True)
    return top, bottom


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
    t = _as_tensor(logits)
    if out is None:
        return torch.softmax(t, dim=-1, dtype=torch.float64)
    if out.shape != t.shape or out.dtype != torch.float64 or out.device != t.device or not out.is_contiguous():
        raise ValueError(f"probabilities: out must be a contiguous float64 tensor of shape {tuple(t.shape)} "
                         f"on {t.device}, not {out.dtype} {tuple(out.shape)} on {out.device}")
    return torch.ops.aten.softmax.int_out(t, -1, torch.float64, out=out)


def score_logits(
    logits: ArrayLike,
    plural: ArrayLike,
    lemma_ids: ArrayLike,
    top_cutoffs: Sequence[float] | np.ndarray = PAPER_TOP_CUTOFFS,
    bottom_cutoffs: Sequence[float] | np.ndarray = PAPER_BOTTOM_CUTOFFS,
    tse_ids: ArrayLike | None = None,
) -> AgreementScores:
    """Score contexts from raw logits: the library entry point for users with their own models.

    Args:
        logits: ``[N, V]`` float array, one row per context (mask-position or next-token logits).
        plural: ``[N]`` bool, True where the correct verb is plural.
        lemma_ids: ``[L, 2]`` int (singular-form id, plural-form id) per eligible lemma.
        top_cutoffs, bottom_cutoffs: probability-mass cutoffs (``p >= 1`` = whole vocabulary).
        tse_ids: optional ``[N, 2]`` int, each row's own (singular id, plural id); -1 where a form
            is not a single token (TSE is then NaN).

    Returns:
        :class:`AgreementScores` with numpy arrays; NaN where undefined. ``prob_counted_*`` is
        the mass of both forms of every counted lemma (the paper's Figure 3);
        ``prob_counted_forms_*`` only the counted forms inside the cutoff set (the two are equal
        at bottom-p).
    """
    probs = probabilities(logits)
    n, v = probs.shape
    ids = _as_tensor(lemma_ids).long().reshape(-1, 2)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= v):
        raise ValueError(f"lemma_ids must be in [0, {v})")
    prob, above, below = form_statistics(probs, ids.reshape(-1))
    shape = (n, ids.shape[0], 2)
    stats = FormStats(prob.reshape(shape).numpy(), above.reshape(shape).numpy(), below.reshape(shape).numpy())
    plural_np = np.asarray(plural, dtype=bool)
    top, bottom = scores_from_stats(stats, plural_np, top_cutoffs, bottom_cutoffs)
    if tse_ids is None:
        tse = np.full(n, np.nan)
    else:
        t_ids = _as_tensor(tse_ids).long().reshape(n, 2)
        valid = (t_ids >= 0).all(dim=1)
        safe = t_ids.clamp(min=0)
        pt = probs.gather(1, safe)
        tse = tse_scores(pt[:, 0].numpy(), pt[:, 1].numpy(), plural_np, valid.numpy())
    return AgreementScores(
        tse=tse,
        ew_top=top.ew,
        mw_top=top.mw,
        prob_counted_top=top.prob_counted,
        ew_bottom=bottom.ew,
        mw_bottom=bottom.mw,
        prob_counted_bottom=bottom.prob_counted,
        prob_counted_forms_top=top.prob_counted_forms,
        prob_counted_forms_bottom=bottom.prob_counted_forms,
    )

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

Everything here is vectorised numpy: the per-form statistics (probability, mass ranked above, mass
ranked below: :class:`FormStats`, computed once per context by the torch kernels of
:mod:`verbeval.agreement.engine.kernels` at inference) are all the scores need; each side (top, bottom)
then sorts the eligible forms once per context, and every pre/post set at every cutoff is a prefix
of that order, answered with prefix sums and a binary search per context: no Python loop over
lemmas, vocabulary or cutoffs. Only :func:`score_logits` (raw logits in) imports torch, when called,
so that aggregation (``verbeval aggregate``) runs without it.

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

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


def finite_contexts(stats: FormStats) -> np.ndarray:
    """``[N]`` bool: contexts whose form statistics (probability, mass above, mass below) are all
    finite; the others (kept under ``inference.allow_nonfinite``) have no EW or MW, as in aggregation."""
    n = np.asarray(stats.prob).shape[0]
    arrays = (stats.prob, stats.cum_above, stats.cum_below)
    return np.logical_and.reduce([np.isfinite(np.asarray(a)).reshape(n, -1).all(axis=1) for a in arrays])


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


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """Permutation sorting each row of ``[N, F]`` keys ascending, ties kept in position order.

    Keys read from shards are float32 values >= 0, whose bit patterns sort like the values: each
    is packed with its position into one int64 and sorted with numpy's SIMD sort, several times
    faster than a stable argsort; other keys take ``np.argsort(kind="stable")``. Same result.
    """
    n, f = keys.shape
    if keys.dtype == np.float64 and f < 2**31:
        k32 = keys.astype(np.float32) + np.float32(0.0)  # + 0.0 turns -0.0 into +0.0
        if bool(((k32 >= 0) & (k32.astype(np.float64) == keys)).all()):
            packed = (k32.view(np.int32).astype(np.int64) << 32) | np.arange(f, dtype=np.int64)
            packed.sort(axis=-1)
            return packed & 0xFFFFFFFF
    return np.argsort(keys, axis=-1, kind="stable")


def _cutoff_array(cutoffs: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
    c = np.asarray(cutoffs, dtype=np.float64)
    if c.ndim != 1:
        raise ValueError("cutoffs must be a 1-d sequence")
    if bool(((c <= 0) | np.isnan(c)).any()):
        raise ValueError(f"cutoffs must be > 0, got {c.tolist()}")
    return np.ascontiguousarray(np.broadcast_to(c, (n, c.shape[0])))


def _prefix(values: np.ndarray) -> np.ndarray:
    """Cumulative sums along each row of ``[N, F]`` ``values``, with a leading zero column:
    ``out[:, k]`` is the sum of the first k values (float64 sums run in sequence along the row)."""
    out = np.empty((values.shape[0], values.shape[1] + 1), dtype=values.dtype)
    out[:, 0] = 0
    out[:, 1:] = values
    return np.cumsum(out, axis=-1, out=out)  # from the zero: 0 + -0.0 is +0.0, as in a sum


def _count_below(sorted_keys: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Number of keys strictly below each cutoff, per row (``[N, F]`` keys, ``[N, C]`` cutoffs);
    ``p >= 1`` selects every key.

    One binary search per row and cutoff, all run at once: the lower bound with the step
    ``!(key >= p)`` of ``torch.searchsorted``, so that a row holding NaN (a context with non-finite
    logits) gives the same counts as there too (``numpy.searchsorted`` sorts NaN last instead).
    """
    n, f = sorted_keys.shape
    p_eff = np.where(p >= 1.0, np.inf, p)
    flat = sorted_keys.ravel()
    row_start = (np.arange(n, dtype=np.int64) * f)[:, None]
    lo = np.zeros(p.shape, dtype=np.int64)
    hi = np.full(p.shape, f, dtype=np.int64)
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = lo + ((hi - lo) >> 1)
        right = ~(flat.take(row_start + np.minimum(mid, f - 1)) >= p_eff)
        lo = np.where(open_ & right, mid + 1, lo)
        hi = np.where(open_ & ~right, mid, hi)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = num / np.where(den > 0, den, 1.0)
    return np.where(den > 0, out, np.nan)


def _interpolate(pre: np.ndarray, post: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """(1 - alpha) * pre + alpha * post; a NaN side takes the other side's value (paper's code)."""
    pre_f = np.where(np.isnan(pre), post, pre)
    post_f = np.where(np.isnan(post), pre, post)
    return pre_f + alpha * (post_f - pre_f)


def side_scores(
    prob: ArrayLike, excl: ArrayLike, plural: ArrayLike, cutoffs: Sequence[float] | np.ndarray, *, both_forms: bool
) -> SideScores:
    """EW, MW and counted mass for one side of the distribution.

    ``prob``, ``excl``: ``[N, L, 2]`` (form order singular, plural); ``excl`` is the mass ranked
    strictly before the form when walking from the end being cut (``cum_above`` for top-p,
    ``cum_below`` for bottom-p). ``both_forms``: a lemma counts only when both forms are in the set
    (bottom-p) rather than either (top-p).
    """
    prob_a = np.array(prob, dtype=np.float64)
    excl_a = np.array(excl, dtype=np.float64)
    plural_a = np.asarray(plural).astype(bool)
    n, n_lemmas, two = prob_a.shape
    if two != 2 or excl_a.shape != prob_a.shape or plural_a.shape != (n,):
        raise ValueError("prob/excl must be [N, L, 2] and plural [N]")
    p = _cutoff_array(cutoffs, n)
    if n_lemmas == 0:
        nan = np.full(p.shape, np.nan)
        return SideScores(nan, nan.copy(), np.zeros(p.shape), np.zeros(p.shape))

    f = 2 * n_lemmas
    row_start = (np.arange(n, dtype=np.int64) * f)[:, None]  # flat index of each row's first form
    right = plural_a[:, None]  # the plural form (index 1) is the correct one
    p_right = np.where(right, prob_a[:, :, 1], prob_a[:, :, 0])
    p_wrong = np.where(right, prob_a[:, :, 0], prob_a[:, :, 1])
    lemma_ok = p_right > p_wrong

    # One sort per context: the forms in ranking order from the end being cut. Every set scored
    # below (pre/post at every cutoff) is a prefix of this order.
    flat_excl = excl_a.reshape(n, f)
    ranked = _stable_order(flat_excl) + row_start  # flat index of the form at each rank
    excl_s = flat_excl.ravel().take(ranked)
    prob_s = prob_a.ravel().take(ranked)
    # inclusive mass is nondecreasing along the ranking; the running maximum only irons out storage rounding
    incl_s = np.maximum.accumulate(excl_s + prob_s, axis=-1)
    n_pre = _count_below(incl_s, p)  # forms entirely before the cutoff
    n_post = _count_below(excl_s, p)  # forms starting before it (pre + the straddling form)

    # rank of each form; a lemma enters the set with its first form (top-p, either form counts)
    # or its second form (bottom-p, both forms must be in)
    pos = np.empty(n * f, dtype=np.int64)
    pos[ranked] = np.arange(f)
    pos = pos.reshape(n, n_lemmas, 2)
    enter = (np.maximum if both_forms else np.minimum)(pos[:, :, 0], pos[:, :, 1])  # [N, L]
    prefix_start = (np.arange(n, dtype=np.int64) * (f + 1))[:, None]  # flat index of a prefix row
    entry = prefix_start + 1 + enter

    def entered(values: np.ndarray) -> np.ndarray:
        """Prefix sums (:func:`_prefix`) of lemma values placed at the rank where the lemma enters the set."""
        out = np.zeros(n * (f + 1), dtype=values.dtype)
        out[entry] = values
        out = out.reshape(n, f + 1)
        return np.cumsum(out, axis=-1, out=out)

    # lemmas counted and lemmas right, packed into one exact integer prefix sum: count + (right << 32)
    counts = entered(lemma_ok.astype(np.int64) << 32 | 1)
    # counted mass, lemma level: both forms of every counted lemma (the paper's code, Figure 3)
    prefix = {"mass": entered(p_right + p_wrong)}
    if both_forms:  # MW over counted lemmas, both forms' mass (= the lemma-level counted mass)
        prefix["num"] = entered(p_right)
        prefix["den"] = prefix["mass"]
    else:  # MW over the forms in the set (= the form-level counted mass)
        is_right_form = np.zeros_like(prob_a)
        is_right_form[:, :, 1] = right
        is_right_form[:, :, 0] = ~right
        prefix["num"] = _prefix((prob_a * is_right_form).ravel().take(ranked))
        prefix["den"] = _prefix(prob_s)

    def scores_at(k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        at = prefix_start + k
        packed = counts.ravel().take(at)
        count, ok = (packed & 0xFFFFFFFF).astype(np.float64), (packed >> 32).astype(np.float64)
        num, den, mass = (prefix[key].ravel().take(at) for key in ("num", "den", "mass"))
        ew = _ratio(ok, count)
        mw = np.where(count > 0, _ratio(num, den), np.nan)
        return ew, mw, mass, den

    pre, post = scores_at(n_pre), scores_at(n_post)
    # straddling rank: the first form not entirely before the cutoff, if it starts before it
    cand = np.minimum(n_pre, f - 1) + row_start
    c_excl, c_prob = excl_s.ravel().take(cand), prob_s.ravel().take(cand)
    straddles = (n_pre < f) & (c_excl < p) & (p < 1.0) & (c_prob > 0)
    alpha = (p - c_excl) / np.where(c_prob > 0, c_prob, 1.0)
    alpha = np.where(straddles, np.clip(alpha, 0.0, 1.0), 0.0)
    ew = _interpolate(pre[0], post[0], alpha)
    mw = _interpolate(pre[1], post[1], alpha)
    counted = pre[2] + alpha * (post[2] - pre[2])
    counted_forms = pre[3] + alpha * (post[3] - pre[3])
    return SideScores(ew, mw, counted, counted_forms)


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


def score_logits(
    logits: ArrayLike,
    plural: ArrayLike,
    lemma_ids: ArrayLike,
    top_cutoffs: Sequence[float] | np.ndarray = PAPER_TOP_CUTOFFS,
    bottom_cutoffs: Sequence[float] | np.ndarray = PAPER_BOTTOM_CUTOFFS,
    tse_ids: ArrayLike | None = None,
) -> AgreementScores:
    """Score contexts from raw logits: the library entry point for users with their own models (it
    runs the torch kernels of :mod:`verbeval.agreement.engine.kernels`, on the logits' device).

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
    from verbeval.agreement.engine.kernels import as_tensor, form_statistics, probabilities

    probs = probabilities(logits)
    n, v = probs.shape
    ids = as_tensor(lemma_ids).long().reshape(-1, 2)
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
        t_ids = as_tensor(tse_ids).long().reshape(n, 2)
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

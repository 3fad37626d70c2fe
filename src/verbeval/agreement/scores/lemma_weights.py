"""EW and MW at top p = 1 with the lemmas weighted by a bootstrap draw (the lemma dimension of a
clustered, template-and-lemma bootstrap).

With a draw ``v`` (multinomial counts over a model's ``L`` eligible lemmas), a context ``c`` scores

    EW_c(v) = sum_l v_l 1[P(l+|c) > P(l-|c)] / sum_l v_l
    MW_c(v) = sum_l v_l P(l+|c) / sum_l v_l (P(l+|c) + P(l-|c))

(at p = 1 every eligible lemma counts, with both forms). With ``v`` all ones these are the
``ew_top@1`` and ``mw_top@1`` columns of :func:`verbeval.agreement.scores.aggregate.score_contexts`:
a tie counts as wrong, a context with a non-finite form statistic is NaN, and a context (or a draw)
where no lemma counts, or whose counted forms have no mass (MW), is NaN.

Lemma order: a model's ``L`` lemmas are its ``lemmas.parquet`` rows (``verbeval lemmas``, i.e.
:func:`verbeval.agreement.data.eligibility.eligible_lemmas`: the lexicon's eligible rows in lexicon
order), which is the order of the ``L`` axis of its shards' form statistics (the shards record the
set as ``n_lemmas`` and ``lemma_set_sha256``, :func:`verbeval.agreement.engine.shards.lemma_set_hash`,
checked by :func:`verbeval.agreement.engine.shards.check_shard_lemmas`). Two models (a BERT and a
GPT-2) have different eligible sets; :func:`union_lemma_index` keys lemmas by their forms
``(sing, plur)`` (a lexicon lemma name can have two rows, *quiz*) and gives each model's columns in
the union, so that one ``[b, U]`` draw over the union weighs both (:func:`model_lemma_counts`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd

from verbeval.agreement.scores.metrics import FormStats, finite_contexts
from verbeval.core.errors import MismatchError, VerbevalError

#: contexts scored per slice by :func:`lemma_weighted_p1` (bounds its temporaries, see there)
CONTEXT_BLOCK = 1024


def lemma_weighted_p1(
    stats: FormStats, plural: np.ndarray, lemma_counts: np.ndarray, block: int = CONTEXT_BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """EW and MW at top p = 1 of every context under each lemma draw.

    Args:
        stats: one group's form statistics, ``[C, L, 2]`` (form 0 singular, 1 plural), as
            :func:`verbeval.agreement.scores.aggregate.read_shards` reads them.
        plural: ``[C]`` bool, True where the context's correct verb is plural.
        lemma_counts: ``[b, L]`` lemma weights (a block of multinomial draws; all ones is the
            unweighted score), in the order of the ``L`` axis of ``stats``.
        block: contexts per slice (the result does not depend on it).

    Returns:
        ``(ew, mw)``, each ``[b, C]`` float64; NaN for a non-finite context, where a draw gives
        no lemma weight, and (MW) where the weighted forms have no mass.

    Three matrix products per slice of contexts (``[b, L] @ [L, block]``), no loop over contexts
    or lemmas. Peak memory beyond the inputs: the two outputs, ``16 b C`` bytes (80 MB at b = 100,
    C = 50,000), plus about ``45 block L`` bytes of slice temporaries, whatever C and b (58 MB
    measured at block = 1,024, L = 1,300: 138 MB in all at b = 100, C = 50,000). Time: 2.6 s
    measured at b = 100, C = 50,000, L = 1,300 on two busy CPU cores.
    """
    prob = np.asarray(stats.prob)
    pl = np.asarray(plural).astype(bool)
    v = np.asarray(lemma_counts, dtype=np.float64)
    if prob.ndim != 3 or prob.shape[2] != 2 or pl.shape != (prob.shape[0],):
        raise ValueError(f"stats must be [C, L, 2] and plural [C], got {prob.shape} and {pl.shape}")
    n_ctx, n_lemmas = prob.shape[:2]
    if v.ndim != 2 or v.shape[1] != n_lemmas:
        raise MismatchError(f"lemma counts of shape {v.shape} do not weigh the form statistics' {n_lemmas} lemmas")
    weight = v.sum(axis=1)[:, None]  # [b, 1]: at p = 1 every lemma of a finite context counts
    ew = np.empty((v.shape[0], n_ctx))
    mw = np.empty((v.shape[0], n_ctx))
    for start in range(0, n_ctx, block):
        sl = slice(start, start + block)
        bad = ~finite_contexts(FormStats(prob[sl], stats.cum_above[sl], stats.cum_below[sl]))
        right = np.where(pl[sl, None], prob[sl, :, 1], prob[sl, :, 0]).astype(np.float64)
        wrong = np.where(pl[sl, None], prob[sl, :, 0], prob[sl, :, 1]).astype(np.float64)
        right[bad] = 0.0  # NaN would spread through the products; these contexts are set NaN below
        wrong[bad] = 0.0
        correct = (right > wrong).astype(np.float64)  # strict: a tie counts as wrong
        mass = np.add(right, wrong, out=wrong)
        num_mw, den_mw = v @ right.T, v @ mass.T
        ew_sl = np.where(weight > 0, (v @ correct.T) / np.where(weight > 0, weight, 1.0), np.nan)
        mw_sl = np.where(den_mw > 0, num_mw / np.where(den_mw > 0, den_mw, 1.0), np.nan)
        ew_sl[:, bad] = np.nan
        mw_sl[:, bad] = np.nan
        ew[:, sl], mw[:, sl] = ew_sl, mw_sl
    return ew, mw


def lemma_keys(lemmas: pd.DataFrame | Sequence[Hashable]) -> list[Hashable]:
    """The keys of a model's lemmas, in its order: ``(sing, plur)`` per row of a ``lemmas.parquet``
    frame (the forms identify a lexicon row; a lemma name can have two), or the items of a sequence."""
    if isinstance(lemmas, pd.DataFrame):
        return list(zip(lemmas["sing"].astype(str), lemmas["plur"].astype(str)))
    return list(lemmas)


def union_lemma_index(*lemma_sets: pd.DataFrame | Sequence[Hashable]) -> tuple[list[Hashable], list[np.ndarray]]:
    """The union of several models' lemmas (sorted keys of :func:`lemma_keys`, so the same whatever
    the order of the models) and, per model, the ``int64`` union column of each of its lemmas."""
    keys = [lemma_keys(s) for s in lemma_sets]
    for k in keys:
        if len(set(k)) != len(k):
            twice = next(x for i, x in enumerate(k) if x in k[:i])
            raise VerbevalError(f"lemma {twice!r} is listed twice in one model's lemmas")
    union = sorted(set().union(*keys))
    col = {key: j for j, key in enumerate(union)}
    return union, [np.array([col[x] for x in k], dtype=np.int64) for k in keys]


def model_lemma_counts(union_counts: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """A model's ``[b, L]`` lemma counts from a ``[b, U]`` draw over the union (``columns``: the
    model's entry of :func:`union_lemma_index`), for :func:`lemma_weighted_p1`."""
    return np.asarray(union_counts, dtype=np.float64)[:, columns]

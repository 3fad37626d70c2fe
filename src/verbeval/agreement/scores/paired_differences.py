"""The paired bootstrap differences of EW and MW (top p = 1) of a comparison
(:mod:`verbeval.agreement.scores.paired`): over the contexts both models define, resampled by
context, by template row (two models of other contexts), by cluster, or by template and lemma."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from verbeval.agreement.scores.lemma_weights import lemma_weighted_p1, model_lemma_counts
from verbeval.agreement.scores.metrics import FormStats
from verbeval.core.bootstrap import Clusters, bootstrap_statistic, mean_of_rows, percentile_ci, weighted_nanmean
from verbeval.core.errors import MismatchError


def _columns(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v[:, None] if v.ndim == 1 else v


def paired_mean_difference(
    a: np.ndarray,
    b: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
    block: int = 100,
    clusters: Clusters | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``mean(b) - mean(a)`` per column of the paired ``[n, k]`` (or ``[n]``) values, both means over
    the rows both define (a row NaN for either model is left out for both), and its percentile CI over
    resamples of the rows drawn jointly for both: ``(difference, ci_low, ci_high)``, each ``[k]``.
    ``clusters``: the rows' clusters are drawn instead (:class:`verbeval.core.bootstrap.Clusters`; fewer
    than 2: NaN CIs)."""
    va, vb = _columns(a), _columns(b)
    if va.shape != vb.shape:
        raise MismatchError(f"paired values of different shapes: {va.shape} and {vb.shape}")
    n, k = va.shape
    ok = ~np.isnan(va) & ~np.isnan(vb)
    fa, fb = np.where(ok, va, 0.0), np.where(ok, vb, 0.0)
    w = ok.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = fb.sum(0) / w.sum(0) - fa.sum(0) / w.sum(0)
    if n == 0 or resamples <= 0 or (clusters is not None and clusters.too_few()):
        nan = np.full(k, np.nan)
        return diff, nan, nan.copy()

    def differences(counts: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (counts @ fb) / (counts @ w) - (counts @ fa) / (counts @ w)

    stats = bootstrap_statistic(differences, n, resamples, seed, block, "counts", k, clusters)
    lo, hi = percentile_ci(stats, confidence)
    return diff, lo, hi


def _row_sides(
    a: np.ndarray, a_context: np.ndarray, b: np.ndarray, b_context: np.ndarray
) -> tuple[list[tuple[Any, np.ndarray, np.ndarray]], np.ndarray]:
    """Each side's ``(mean_of_rows matrix, values with NaN as 0, defined as 1.0)`` and the ``[rows, k]``
    mask of the rows whose contexts both models define."""
    rows = len(a_context)
    if len(b_context) != rows:
        raise MismatchError(f"paired rows of different lengths: {rows} and {len(b_context)}")
    va, vb = _columns(a), _columns(b)
    ia, ib = np.asarray(a_context, dtype=np.int64), np.asarray(b_context, dtype=np.int64)
    both = ~np.isnan(va[ia]) & ~np.isnan(vb[ib]) if rows else np.zeros((0, va.shape[1]), bool)
    sides = []
    for v, i in ((va, ia), (vb, ib)):
        ok = ~np.isnan(v)
        sides.append((mean_of_rows(i, len(v)), np.where(ok, v, 0.0), ok.astype(np.float64)))
    return sides, both


def _row_means(drawn: np.ndarray, side: tuple[Any, np.ndarray, np.ndarray], both: np.ndarray) -> np.ndarray:
    """The side's ``[b, k]`` means of the resamples ``drawn`` (``[rows, b]`` counts, C-contiguous: the
    sparse product reads them as they are, with no copy), each context weighing the share of its rows
    drawn among those whose contexts both models define (``both``, per column)."""
    m, filled, valid = side
    with np.errstate(invalid="ignore", divide="ignore"):
        if both.all():  # every row's contexts defined: one product for every column
            w = np.asarray((m.T @ drawn).T)  # [b, contexts]: the share of each context's rows drawn
            return (w @ filled) / (w @ valid)
        out = np.empty((drawn.shape[1], filled.shape[1]))
        for j in range(filled.shape[1]):
            w = np.asarray((m.T @ np.ascontiguousarray(drawn * both[:, j : j + 1])).T)
            out[:, j] = (w @ filled[:, j]) / (w @ valid[:, j])
    return out


def paired_means(
    a: np.ndarray, a_context: np.ndarray, b: np.ndarray, b_context: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each model's ``[k]`` mean over the template rows whose contexts both define (``a`` ``[contexts_a,
    k]`` per-context values, ``a_context`` each row's index into them; two models of the same contexts:
    ``a_context = b_context = arange``), a context weighing the share of its rows among them: the
    comparison's ``value_a`` and ``value_b``."""
    sides, both = _row_sides(a, a_context, b, b_context)
    ones = np.ones((len(both), 1))
    return _row_means(ones, sides[0], both)[0], _row_means(ones, sides[1], both)[0]


def paired_row_difference(
    a: np.ndarray,
    a_context: np.ndarray,
    b: np.ndarray,
    b_context: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
    block: int = 100,
    clusters: Clusters | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`paired_mean_difference` for two models whose contexts differ: ``a`` ``[contexts_a, k]``
    and ``b`` ``[contexts_b, k]`` per-context values, ``a_context`` / ``b_context`` the index of each
    template row's context (``[rows]``, paired by row). The rows are resampled (``clusters``: the rows'
    clusters, the rows weighing their clusters' counts); a context's weight is the share of its rows
    drawn among the rows whose contexts both models define (per column: :func:`paired_means`)."""
    rows = len(a_context)
    sides, both = _row_sides(a, a_context, b, b_context)
    k = both.shape[1]
    ones = np.ones((rows, 1))
    diff = _row_means(ones, sides[1], both)[0] - _row_means(ones, sides[0], both)[0]
    if rows == 0 or resamples <= 0 or (clusters is not None and clusters.too_few()):
        nan = np.full(k, np.nan)
        return diff, nan, nan.copy()

    def differences(counts: np.ndarray) -> np.ndarray:
        drawn = np.ascontiguousarray(counts.T)  # once for both sides
        return _row_means(drawn, sides[1], both) - _row_means(drawn, sides[0], both)

    stats = bootstrap_statistic(differences, rows, resamples, seed, block, "counts", k, clusters)
    lo, hi = percentile_ci(stats, confidence)
    return diff, lo, hi


@dataclass(frozen=True)
class LemmaSide:
    """One model's side of a template-and-lemma draw (:func:`paired_lemma_difference`): its contexts'
    form statistics and ``plural`` flags, one ``(stats, plural)`` segment per group (a group row has
    one, the pooled row every group's, in order), and its lemmas' ``columns`` in the union
    (:func:`verbeval.agreement.scores.lemma_weights.union_lemma_index`)."""

    segments: tuple[tuple[FormStats, np.ndarray], ...]
    columns: np.ndarray

    def scores(self, union_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ew, mw)`` at top p = 1, each ``[b, contexts]``, of every context under the ``[b, U]`` draw."""
        v = model_lemma_counts(union_counts, self.columns)
        parts = [lemma_weighted_p1(stats, plural, v) for stats, plural in self.segments]
        return np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1)


def paired_lemma_difference(
    sides: tuple[LemmaSide, LemmaSide],
    row_contexts: tuple[np.ndarray, np.ndarray],
    templates: Sequence[object],
    union_counts: np.ndarray,
    seed: int,
    confidence: float,
    block: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """The percentile CI of ``mean(b) - mean(a)`` of EW and MW at top p = 1 (``(ci_low, ci_high)``,
    each ``[2]``) over resamples of templates and lemmas, both drawn once for both models.

    A resample draws the templates of ``a``'s rows (``templates``, paired by row: the ``counts`` stream
    of the templates, ``seed``) and takes its row of ``union_counts`` (``[resamples, U]``, the lemma
    draw over the union of the two models' lemmas). Each model's contexts are rescored under the
    lemma draw (:meth:`LemmaSide.scores`), and its mean weighs each context by the mean of its rows'
    template counts (``row_contexts``: each model's context of each row, an index into its contexts),
    over the rows whose contexts both models define under the draw, as :func:`paired_mean_difference` (same contexts) and :func:`paired_row_difference`
    (through the rows) weigh them; with every lemma drawn once it is their template interval.
    Fewer than 2 templates, no resamples or no lemma: NaN."""
    resamples = len(union_counts)
    rows = len(row_contexts[0])
    if len(row_contexts[1]) != rows or len(templates) != rows:
        raise MismatchError(f"paired rows of different lengths: {rows}, {len(row_contexts[1])} and {len(templates)}")
    clusters = Clusters.of(templates)
    nan = np.full(2, np.nan)
    if rows == 0 or resamples == 0 or np.asarray(union_counts).shape[1] == 0 or clusters.too_few():
        return nan, nan.copy()
    n_ctx = [sum(len(plural) for _, plural in side.segments) for side in sides]
    index = [np.asarray(i, dtype=np.int64) for i in row_contexts]
    to_contexts = [mean_of_rows(i, n) for i, n in zip(index, n_ctx)]
    stats = np.empty((resamples, 2))
    for drawn, w in clusters.weights(resamples, seed, block):
        values = [np.stack(side.scores(union_counts[drawn])) for side in sides]  # each [2, b, contexts]
        # [2 * b, rows]: a row's template weight where both models define its contexts under the draw
        both = ~np.isnan(values[0][:, :, index[0]]) & ~np.isnan(values[1][:, :, index[1]])
        w_rows = np.ascontiguousarray((w[None] * both).reshape(-1, rows).T)  # [rows, 2 * b]
        means = []
        for v, m in zip(values, to_contexts):
            w_ctx = np.asarray((m.T @ w_rows).T).reshape(v.shape)  # each context's share of its rows drawn
            means.append(weighted_nanmean(w_ctx, v))  # [2, b]
        stats[drawn] = (means[1] - means[0]).T
    return percentile_ci(stats, confidence)

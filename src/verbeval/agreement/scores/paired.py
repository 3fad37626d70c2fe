"""Paired comparisons of two models (or two checkpoints) of one run: the same template rows and
contexts, scored by both.

Per group, with ``a`` the reference and ``b`` the model compared with it (differences are b - a):

* **TSE**: McNemar's exact test on the rows where both models' forms are single tokens (both TSE
  values defined). ``a_only`` counts the rows only ``a`` gets right, ``b_only`` those only ``b``
  does; the two-sided p-value is the exact binomial one, ``min(1, 2 P(X <= min(a_only, b_only)))``
  with ``X ~ Binomial(a_only + b_only, 1/2)`` (``scipy.stats.binomtest``); 1 when no row is
  discordant. A row is correct when P(correct) > P(incorrect): a tie counts as wrong for both
  (docs/metrics.md, "Ties"). Under ``agreement.bootstrap.cluster`` ``template`` (and
  ``template_and_lemma``) the p-value is Durkalski's clustered McNemar test over the templates
  (:func:`clustered_mcnemar`), and the row gets the clustered paired bootstrap interval of its
  difference (:func:`_clustered_tse`).
* **EW and MW** (top p = 1): the difference of the two group means, each NaN-ignoring over the
  contexts as in the summaries, with a percentile CI from a paired bootstrap (the ``counts`` stream of
  :mod:`verbeval.core.bootstrap` with the configured seed, one draw for both models). Two models with
  the same contexts (two of one kind: a sweep's revisions, a model in two dtypes) have their contexts
  resampled jointly. A masked and a causal LM do not share contexts (a causal LM's context is the
  prefix several template rows share): their template rows are resampled jointly, and each model's
  mean weighs each of its contexts by the share of the context's rows drawn (every row drawn once:
  the group mean of the summaries). Under ``agreement.bootstrap.cluster`` ``template`` (and
  ``template_and_lemma``) the draw is of whole templates, once for both models (:func:`compare_groups`).
  Under ``template_and_lemma`` it is of templates and lemmas: one lemma draw over the union of the two
  models' lemmas, shared by every group of the comparison, each model's contexts rescored under it
  (:func:`paired_lemma_difference`).

The two models' rows are paired by their template identity (``source:line`` of ``templates.parquet``,
:func:`template_row_ids`) when it is given, else by row number; two runs that disagree on it (another
data version, other errata) are refused with one line (:class:`verbeval.core.errors.MismatchError`).
Rows in another order are paired by identity, and then so are their contexts (through the rows).

Across the groups of one comparison, the TSE p-values are Holm-adjusted (``p_adjusted``) and the EW
and MW intervals are Bonferroni-simultaneous (each at level ``1 - (1 - confidence) / groups``); the
``correction`` column says which. ``significant``: adjusted p below ``1 - confidence`` (TSE), or an
interval that excludes 0 (EW, MW).

``mdd``: the minimum absolute difference the row's test detects with power :data:`POWER` at the row's
level (a group row's Bonferroni level, the Holm step's worst case; the overall row's nominal one): TSE
from the discordant rate (:func:`mcnemar_mdd`), EW and MW (and TSE under a clustering) from the
interval's width (:func:`bootstrap_mdd`).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.scores import item_clusters
from verbeval.agreement.scores.item_clusters import cluster_columns, context_labels
from verbeval.agreement.scores.lemma_weights import lemma_weighted_p1, model_lemma_counts, union_lemma_index
from verbeval.agreement.scores.metrics import FormStats
from verbeval.agreement.scores.registry import HEADLINE
from verbeval.core import count_draws
from verbeval.core.bootstrap import (
    Clusters,
    bootstrap_statistic,
    mean_of_rows,
    percentile_ci,
    stream_seed,
    too_few_clusters,
    weighted_nanmean,
)
from verbeval.core.errors import MismatchError, VerbevalError

log = logging.getLogger(__name__)

#: the columns of ``comparisons.csv`` (one row per pair, group and metric)
COMPARISON_COLUMNS = (
    "model_a",
    "model_b",
    "group",
    "metric",
    "value_a",
    "value_b",
    "difference",
    "ci_low",
    "ci_high",
    "confidence",
    "n",
    "a_only",
    "b_only",
    "p_value",
    "p_adjusted",
    "significant",
    "correction",
    "mdd",
)

#: the power at which ``mdd`` (the minimum detectable difference of a comparison row) is computed
POWER = 0.8

#: the per-context columns of the headline metrics with cutoff curves (EW, MW) at top p = 1 (``scores.parquet``)
CONTEXT_METRICS = {m.name: f"{m.name}_top@1" for m in HEADLINE if m.cutoff_curves}


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test of two paired binary outcomes."""

    n: int  #: paired rows
    a_only: int  #: rows only ``a`` gets right
    b_only: int  #: rows only ``b`` gets right
    p_value: float


def mcnemar_exact(a_correct: np.ndarray, b_correct: np.ndarray) -> McNemar:
    """McNemar's exact two-sided test of paired outcomes (module docstring)."""
    from scipy.stats import binomtest

    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    if a.shape != b.shape:
        raise MismatchError(f"paired outcomes of different lengths: {a.shape} and {b.shape}")
    a_only, b_only = int((a & ~b).sum()), int((b & ~a).sum())
    discordant = a_only + b_only
    p = 1.0 if discordant == 0 else float(binomtest(min(a_only, b_only), discordant, 0.5).pvalue)
    return McNemar(len(a), a_only, b_only, p)


def clustered_mcnemar(a_correct: np.ndarray, b_correct: np.ndarray, cluster: Sequence[object]) -> float:
    """The two-sided p-value of Durkalski et al.'s (2003) McNemar test of clustered matched pairs:
    ``chi2 = (sum_k (b_k - c_k))^2 / sum_k (b_k - c_k)^2`` on 1 df, ``b_k`` and ``c_k`` the rows of
    cluster ``k`` (``cluster``: each row's) only ``a`` and only ``b`` gets right. With one row per
    cluster it is McNemar's chi-square without continuity correction, ``(b - c)^2 / (b + c)``. 1 when
    every cluster's discordant rows balance (none discordant); NaN with fewer than 2 clusters."""
    from scipy.stats import chi2

    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    code = Clusters.of(cluster).codes[0]
    if a.shape != b.shape or a.shape != code.shape:
        raise MismatchError(f"clustered paired outcomes of different lengths: {a.shape}, {b.shape} and {code.shape}")
    per_cluster = np.bincount(code, weights=(a & ~b).astype(np.float64) - (b & ~a), minlength=code.max(initial=-1) + 1)
    if len(per_cluster) < 2:
        return float("nan")
    spread = float((per_cluster**2).sum())
    return 1.0 if spread == 0 else float(chi2.sf(per_cluster.sum() ** 2 / spread, 1))


def mcnemar_mdd(n: int, discordant: int, alpha: float, power: float = POWER) -> float:
    """The smallest ``|b - a|`` (a share of the ``n`` paired rows) that McNemar's test at two-sided
    level ``alpha`` detects with ``power`` when the discordant rate is ``discordant / n``: Connor's (1987)
    normal approximation ``n = (z_{1-alpha/2} sqrt(p_d) + z_power sqrt(p_d - d^2))^2 / d^2`` solved for
    ``d`` (it falls as ``d`` grows). NaN without discordant rows (the rate the power rests on is 0), and
    when even ``d = p_d`` (every discordant row one way) needs more than ``n`` rows."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    if n <= 0 or discordant <= 0:
        return float("nan")
    p_d = discordant / n
    z_a, z_b = norm.ppf(1.0 - alpha / 2.0), norm.ppf(power)

    def excess(d: float) -> float:  # Connor's n at d, less n
        return (z_a * np.sqrt(p_d) + z_b * np.sqrt(max(p_d - d * d, 0.0))) ** 2 / (d * d) - n

    if excess(p_d) > 0:
        return float("nan")
    return float(brentq(excess, p_d * 1e-9, p_d, xtol=1e-12))


def bootstrap_mdd(ci_low: np.ndarray, ci_high: np.ndarray, level: float, power: float = POWER) -> np.ndarray:
    """The smallest ``|b - a|`` a normal test at two-sided level ``1 - level`` detects with ``power``,
    its standard error read off the percentile interval at ``level``: ``se = (ci_high - ci_low) /
    (2 z_{(1+level)/2})``, ``mdd = (z_{(1+level)/2} + z_power) se``; NaN where the interval is, and where
    it has no width (every resample gave the same difference: no spread to read a standard error off)."""
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2.0)
    se = (np.asarray(ci_high, dtype=np.float64) - np.asarray(ci_low, dtype=np.float64)) / (2.0 * z)
    return np.where(se > 0, (z + norm.ppf(power)) * se, np.nan)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries left out and kept NaN)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = len(idx)
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def paired_mean_difference(
    a: np.ndarray,
    b: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
    block: int = 100,
    clusters: Clusters | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``mean(b) - mean(a)`` per column of the paired ``[n, k]`` (or ``[n]``) values, each mean
    NaN-ignoring, and its percentile CI over resamples of the rows drawn jointly for both:
    ``(difference, ci_low, ci_high)``, each ``[k]``. ``clusters``: the rows' clusters are drawn
    instead (:class:`verbeval.core.bootstrap.Clusters`; fewer than 2: NaN CIs)."""
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if va.ndim == 1:
        va, vb = va[:, None], vb[:, None]
    if va.shape != vb.shape:
        raise MismatchError(f"paired values of different shapes: {va.shape} and {vb.shape}")
    n, k = va.shape
    ok_a, ok_b = ~np.isnan(va), ~np.isnan(vb)
    fa, fb = np.where(ok_a, va, 0.0), np.where(ok_b, vb, 0.0)
    wa, wb = ok_a.astype(np.float64), ok_b.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = fb.sum(0) / wb.sum(0) - fa.sum(0) / wa.sum(0)
    if n == 0 or resamples <= 0 or (clusters is not None and clusters.too_few()):
        nan = np.full(k, np.nan)
        return diff, nan, nan.copy()

    def differences(counts: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (counts @ fb) / (counts @ wb) - (counts @ fa) / (counts @ wa)

    stats = bootstrap_statistic(differences, n, resamples, seed, block, "counts", k, clusters)
    lo, hi = percentile_ci(stats, confidence)
    return diff, lo, hi


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
    drawn (module docstring)."""
    from scipy import sparse

    rows = len(a_context)
    if len(b_context) != rows:
        raise MismatchError(f"paired rows of different lengths: {rows} and {len(b_context)}")

    va, vb = (np.asarray(v, dtype=np.float64) for v in (a, b))
    va, vb = (v[:, None] if v.ndim == 1 else v for v in (va, vb))
    sides = []
    for v, index in ((va, np.asarray(a_context)), (vb, np.asarray(b_context))):
        ok = ~np.isnan(v)
        sides.append((mean_of_rows(index, len(v)), np.where(ok, v, 0.0), ok.astype(np.float64)))

    def means(drawn: np.ndarray, side: tuple[sparse.csr_matrix, np.ndarray, np.ndarray]) -> np.ndarray:
        """The side's means of the resamples ``drawn`` (``[rows, b]`` counts, C-contiguous: the sparse
        product reads them as they are, with no copy)."""
        m, filled, valid = side
        w = np.asarray((m.T @ drawn).T)  # [b, contexts]: the share of each context's rows drawn
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w @ filled) / (w @ valid)

    ones = np.ones((rows, 1))
    diff = means(ones, sides[1])[0] - means(ones, sides[0])[0]
    if rows == 0 or resamples <= 0 or (clusters is not None and clusters.too_few()):
        nan = np.full(va.shape[1], np.nan)
        return diff, nan, nan.copy()

    def differences(counts: np.ndarray) -> np.ndarray:
        drawn = np.ascontiguousarray(counts.T)  # once for both sides
        return means(drawn, sides[1]) - means(drawn, sides[0])

    stats = bootstrap_statistic(differences, rows, resamples, seed, block, "counts", va.shape[1], clusters)
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
    NaN-ignoring, as :func:`paired_mean_difference` (same contexts) and :func:`paired_row_difference`
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
    to_contexts = [mean_of_rows(np.asarray(index), n) for index, n in zip(row_contexts, n_ctx)]
    stats = np.empty((resamples, 2))
    for drawn, w in clusters.weights(resamples, seed, block):
        w_rows = np.ascontiguousarray(w.T)  # [rows, b], once for both sides
        means = []
        for side, m in zip(sides, to_contexts):
            w_ctx = np.asarray((m.T @ w_rows).T)  # [b, contexts]: each context's share of its rows drawn
            means.append(weighted_nanmean(w_ctx, np.stack(side.scores(union_counts[drawn]))))  # [2, b]
        stats[drawn] = (means[1] - means[0]).T
    return percentile_ci(stats, confidence)


#: the ``group`` of the overall rows: every group's rows and contexts pooled
OVERALL = "all"
#: the column of ``a``'s per-row TSE that names each row's template cluster (``group``, tab, ``source``)
TEMPLATE = "template_cluster"
#: the column of ``a``'s per-row TSE that names each row's verb cluster under ``template_and_lemma``
#: (its verb pair, ``laugh/laughs``: the same verb in every group, so the pooled rows share it)
VERB = "verb_cluster"


def _group_records(
    group: str,
    tse: tuple[pd.DataFrame, pd.DataFrame],
    scores: tuple[pd.DataFrame, pd.DataFrame],
    names: tuple[str, str],
    resamples: int,
    seed: int,
    level: float,
    by_row: bool = False,
    lemma_draw: tuple[tuple[LemmaSide, LemmaSide], np.ndarray] | None = None,
) -> list[dict[str, object]]:
    """The TSE, EW and MW rows of one group (or of every group pooled), EW and MW at CI ``level``, each
    row's ``mdd`` for a test at level ``1 - level``; ``by_row``: pair the contexts through the template
    rows even when both have the same context ids (the rows were paired by identity, not number:
    :func:`pair_rows`). When ``a``'s rows carry a :data:`TEMPLATE` column, EW and MW resample their
    templates (:func:`compare_groups`' ``cluster``), and so does their ``mdd``; ``lemma_draw`` (the two
    models' sides and the ``[resamples, U]`` lemma draw): their templates and lemmas
    (:func:`paired_lemma_difference`)."""
    ta, tb = (t.set_index("row")["tse"] for t in tse)
    if not ta.index.equals(tb.index):
        raise MismatchError(f"group {group!r}: {names[0]} and {names[1]} were scored on different template rows")
    both = ta.notna().to_numpy() & tb.notna().to_numpy()
    test = mcnemar_exact(ta.to_numpy()[both] == 1.0, tb.to_numpy()[both] == 1.0)
    va, vb = (t.to_numpy()[both].mean() if both.any() else np.nan for t in (ta, tb))
    records: list[dict[str, object]] = [
        {
            "group": group,
            "metric": "tse",
            "value_a": va,
            "value_b": vb,
            "difference": vb - va,
            "ci_low": np.nan,
            "ci_high": np.nan,
            "confidence": np.nan,
            "n": test.n,
            "a_only": test.a_only,
            "b_only": test.b_only,
            "p_value": test.p_value if test.n else np.nan,
            "mdd": mcnemar_mdd(test.n, test.a_only + test.b_only, 1.0 - level),
        }  # fmt: skip
    ]
    if cluster_columns(tse[0])[0]:  # clustered: the TSE row's interval, p-value and mdd (the default's bytes stay)
        records[0].update(_clustered_tse(group, tse[0], ta.to_numpy(), tb.to_numpy(), both, resamples, seed, level))
    sa, sb = (s.set_index("context_id") for s in scores)
    cols = list(CONTEXT_METRICS.values())
    templates = context_labels(tse[0])  # the clusters the contexts are drawn by (None: one by one)
    drawn = resamples if lemma_draw is None else 0  # the lemma draw's interval replaces the templates' below
    if sa.index.equals(sb.index) and not by_row:
        unit = len(sa)
        clusters = None
        if templates is not None:  # a context weighs the mean of its rows' template counts
            row_contexts = (sa.index.get_indexer(tse[0]["context_id"].to_numpy()),) * 2
            clusters = Clusters.of(templates, units=mean_of_rows(row_contexts[0], len(sa)))
        diff, lo, hi = paired_mean_difference(
            sa[cols].to_numpy(), sb[cols].to_numpy(), drawn, seed, level, clusters=clusters
        )
    else:  # different contexts (a masked and a causal LM): paired by template row
        ra, rb = (t.set_index("row")["context_id"] for t in tse)
        unit = len(ra)
        row_contexts = (sa.index.get_indexer(ra.to_numpy()), sb.index.get_indexer(rb.to_numpy()))
        diff, lo, hi = paired_row_difference(
            sa[cols].to_numpy(),
            row_contexts[0],
            sb[cols].to_numpy(),
            row_contexts[1],
            drawn,
            seed,
            level,
            clusters=None if templates is None else Clusters.of(templates),
        )
    if lemma_draw is not None and templates is not None:  # EW and MW at p = 1: templates and lemmas
        ew_mw = paired_lemma_difference(lemma_draw[0], row_contexts, templates, lemma_draw[1], seed, level)
        lo, hi = (x[[("ew", "mw").index(m) for m in CONTEXT_METRICS]] for x in ew_mw)
    mdd = bootstrap_mdd(lo, hi, level)
    for j, (metric, col) in enumerate(CONTEXT_METRICS.items()):
        records.append(
            {
                "group": group,
                "metric": metric,
                "value_a": float(np.nanmean(sa[col])) if sa[col].notna().any() else np.nan,
                "value_b": float(np.nanmean(sb[col])) if sb[col].notna().any() else np.nan,
                "difference": diff[j],
                "ci_low": lo[j],
                "ci_high": hi[j],
                "confidence": level,
                "n": unit,
                "a_only": pd.NA,
                "b_only": pd.NA,
                "p_value": np.nan,
                "mdd": mdd[j],
            }  # fmt: skip
        )
    return records


def _clustered_tse(
    group: str,
    rows: pd.DataFrame,
    a: np.ndarray,
    b: np.ndarray,
    both: np.ndarray,
    resamples: int,
    seed: int,
    level: float,
) -> dict[str, object]:
    """The TSE comparison row's ``ci_low``, ``ci_high``, ``confidence``, ``p_value`` and ``mdd`` under a
    clustering (``rows``: ``a``'s per-row TSE with its :data:`TEMPLATE` and, under
    ``template_and_lemma``, :data:`VERB` columns; ``a``, ``b``: both models' per-row TSE; ``both``: the
    rows both define): the paired bootstrap interval of ``b - a`` over those rows, each weighing its
    clusters' counts (:func:`paired_mean_difference`), the ``mdd`` read off it (:func:`bootstrap_mdd`),
    and Durkalski's p-value over the templates (:func:`clustered_mcnemar`: its clusters must be
    independent, and crossed templates and verbs are not nested). Fewer than 2 clusters in a
    dimension: a NaN interval and ``mdd`` (fewer than 2 templates: a NaN p-value too), and one
    warning when the group's rows had enough (else :func:`too_few_group_clusters`' warning said so)."""
    columns, names = cluster_columns(rows)
    labels = [rows[c].to_numpy()[both] for c in columns]
    clusters = Clusters.of(*labels)
    p_value = clustered_mcnemar(a[both] == 1.0, b[both] == 1.0, labels[0])  # NaN with fewer than 2 templates
    if clusters.too_few():
        if not Clusters.of(*(rows[c].to_numpy() for c in columns)).too_few():
            what = "interval and p-value are" if np.isnan(p_value) else "interval is"
            log.warning(too_few_clusters(group, clusters, names, f"its TSE comparison's {what} NaN"))
        return {"ci_low": np.nan, "ci_high": np.nan, "confidence": level, "p_value": p_value, "mdd": np.nan}
    _, lo, hi = paired_mean_difference(a[both], b[both], resamples, seed, level, clusters=clusters)
    return {
        "ci_low": lo[0],
        "ci_high": hi[0],
        "confidence": level,
        "p_value": p_value,
        "mdd": bootstrap_mdd(lo, hi, level)[0],
    }


def too_few_group_clusters(group: str, clusters: pd.DataFrame, cluster: str) -> str | None:
    """The warning line of a comparison's group whose rows (``clusters``: the ``template`` and ``verb``
    of each, :func:`verbeval.agreement.scores.aggregate.row_clusters`) have too few clusters under
    ``agreement.bootstrap.cluster`` ``cluster`` (not ``context``), or None: fewer than 2 templates, every
    interval is NaN; under ``template_and_lemma`` fewer than 2 verbs, the TSE row's interval (its
    p-value is over the templates); the item clusterings alike
    (:func:`verbeval.agreement.scores.item_clusters.too_few_group_clusters`)."""
    return item_clusters.too_few_group_clusters(group, clusters, cluster)


def template_row_ids(templates_group: pd.DataFrame) -> np.ndarray:
    """The identity of each template row of a group (``templates.parquet``'s rows of the group, in
    order: ``tse.parquet``'s ``row`` indexes them): ``source:line``."""
    return (templates_group["source"].astype(str) + ":" + templates_group["line"].astype(str)).to_numpy(dtype=object)


def _first(keys: Sequence[object], n: int) -> str:
    return f" (first {keys[0]})" if n else ""


def pair_rows(
    group: str,
    names: tuple[str, str],
    tse: tuple[pd.DataFrame, pd.DataFrame],
    ids: tuple[Sequence[object], Sequence[object]] | None = None,
) -> tuple[pd.DataFrame, bool]:
    """``b``'s per-row TSE (``tse[1]``) with its ``row`` numbers those of ``a``'s rows of the same
    identity (``ids``: each frame's rows' identities, in its order; None: the row numbers), and
    whether any row was renumbered. Two runs whose rows differ are a :class:`MismatchError` naming how
    many rows only each has, with the first of each."""
    ta, tb = tse
    keys = [list(ids[i]) if ids is not None else [f"row {r}" for r in t["row"]] for i, t in enumerate(tse)]
    for side, k in enumerate(keys):
        if len(k) != len(tse[side]):
            raise MismatchError(f"group {group!r}: {len(k)} row identities for {len(tse[side])} rows of {names[side]}")
    if keys[0] == keys[1] and ta["row"].equals(tb["row"]):
        return tb, False
    seen = [set(k) for k in keys]
    only = [[x for x in keys[i] if x not in seen[1 - i]] for i in (0, 1)]
    if only[0] or only[1] or len(seen[0]) != len(keys[0]) or len(seen[1]) != len(keys[1]):
        raise MismatchError(
            f"group {group!r}: {names[0]} and {names[1]} were scored on different template rows: "
            f"{len(only[0])} only in {names[0]}{_first(only[0], len(only[0]))}, "
            f"{len(only[1])} only in {names[1]}{_first(only[1], len(only[1]))}"
            + ("" if only[0] or only[1] else " (a template row given twice)")
        )
    number = dict(zip(keys[0], ta["row"]))
    tb = tb.assign(row=[number[k] for k in keys[1]]).sort_values("row", kind="stable").reset_index(drop=True)
    return tb, True


def _pooled(frames: Sequence[pd.DataFrame], keys: Sequence[str]) -> pd.DataFrame:
    """The groups' frames as one, each id column (``row``, ``context_id``) offset past the groups before."""
    out, offsets = [], dict.fromkeys(keys, 0)
    for f in frames:
        f = f.copy()
        for k in (k for k in keys if k in f):
            ids = f[k].to_numpy()
            f[k] = ids + offsets[k]
            offsets[k] += int(ids.max()) + 1 if len(ids) else 0
        out.append(f)
    return pd.concat(out, ignore_index=True)


def _lemma_draw(
    groups: Sequence[str],
    context_scores: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]],
    forms: Mapping[str, tuple[tuple[FormStats, np.ndarray], tuple[FormStats, np.ndarray]]] | None,
    lemmas: tuple[Any, Any] | None,
    resamples: int,
    seed: int,
) -> tuple[dict[str, tuple[LemmaSide, LemmaSide]], np.ndarray]:
    """Each group's two :class:`LemmaSide` and the ``[resamples, U]`` lemma draw over the union of the
    two models' lemmas (:func:`compare_groups`, ``template_and_lemma``)."""
    from verbeval.agreement.scores.aggregate import LEMMA_DIMENSION

    lacking = [g for g in groups if forms is None or g not in forms]
    if lemmas is None or lacking:
        what = "lemmas" if lemmas is None else f"form statistics of group {lacking[0]!r}"
        raise VerbevalError(f"agreement.bootstrap.cluster template_and_lemma needs both models' {what}")
    union, columns = union_lemma_index(*lemmas)
    sides = {}
    for g in groups:
        for i, (stats, plural) in enumerate(forms[g]):  # type: ignore[index]
            n_lemmas = np.asarray(stats.prob).shape[1]
            if len(columns[i]) != n_lemmas:
                raise MismatchError(
                    f"group {g!r}: form statistics of {n_lemmas} lemmas, but {len(columns[i])} lemmas given"
                )
            if len(plural) != len(context_scores[g][i]) or len(stats.prob) != len(plural):
                raise MismatchError(
                    f"group {g!r}: {len(stats.prob)} contexts of form statistics for {len(context_scores[g][i])} "
                    "scored contexts"
                )
        sides[g] = tuple(LemmaSide(((st, np.asarray(pl)),), columns[i]) for i, (st, pl) in enumerate(forms[g]))  # type: ignore[index]
    n = len(union)
    counts = count_draws.counts(n, resamples, stream_seed(seed, LEMMA_DIMENSION), 100) if n and resamples > 0 else None
    return sides, np.zeros((0, n)) if counts is None else counts  # type: ignore[return-value]


def _pooled_sides(sides: Sequence[tuple[LemmaSide, LemmaSide]]) -> tuple[LemmaSide, LemmaSide]:
    """The two models' sides of the pooled row: every group's segments, in order (as :func:`_pooled`
    concatenates the groups' contexts)."""
    return tuple(LemmaSide(tuple(seg for s in sides for seg in s[i].segments), sides[0][i].columns) for i in (0, 1))  # type: ignore[return-value]


def compare_groups(
    model_a: str,
    model_b: str,
    row_tse: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]],
    context_scores: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]],
    *,
    resamples: int,
    seed: int,
    confidence: float,
    row_ids: Mapping[str, tuple[Sequence[object], Sequence[object]]] | None = None,
    cluster: str = "context",
    templates: Mapping[str, Sequence[object] | pd.DataFrame] | None = None,
    forms: Mapping[str, tuple[tuple[FormStats, np.ndarray], tuple[FormStats, np.ndarray]]] | None = None,
    lemmas: tuple[pd.DataFrame | Sequence[Hashable], pd.DataFrame | Sequence[Hashable]] | None = None,
) -> pd.DataFrame:
    """The comparison rows (:data:`COMPARISON_COLUMNS`) of ``model_b`` against ``model_a``: per group,
    then overall (group :data:`OVERALL`: every group's rows and contexts pooled, at the nominal level,
    no correction).

    ``row_tse[group]``: both models' per-row TSE (``tse.parquet``: ``row``, ``context_id``, ``tse``),
    paired by the rows' identity (``row_ids[group]``: each frame's rows' :func:`template_row_ids`, in
    its order; None: by ``row``, :func:`pair_rows`); ``context_scores[group]``: both models' per-context
    scores (``scores.parquet``), paired on ``context_id`` when both have the same contexts and rows in
    the same order, else through their rows (module docstring; ``n`` counts the unit resampled). A
    group whose template rows differ between the two is a :class:`MismatchError`: they were not scored
    on the same data.

    ``cluster`` (``agreement.bootstrap.cluster``): ``context``, the contexts (or rows) are resampled one
    by one; ``template`` and ``template_and_lemma``, EW and MW resample ``templates[group]`` (each of
    ``model_a``'s rows' template, indexed by its ``row``: a sequence, or the ``template`` column of
    :func:`verbeval.agreement.scores.aggregate.row_clusters`) once for both models, the pooled groups by
    (group, template); ``comparisons.csv`` then gets a ``cluster`` column. The TSE row then gets the
    clustered bootstrap interval of its difference (``template_and_lemma``: templates crossed with the
    ``verb`` column of ``row_clusters``), Durkalski's p-value over the templates and the ``mdd`` of
    that interval (:func:`_clustered_tse`). ``template_and_lemma`` also draws lemmas for EW and MW
    (:func:`paired_lemma_difference`): ``forms[group]``, both models' ``(form statistics, plural)`` of
    the group's contexts in the order of ``context_scores[group]``'s rows, and ``lemmas``, both models'
    lemmas in the order of their statistics' lemma axis (``lemmas.parquet`` frames or keys,
    :func:`verbeval.agreement.scores.lemma_weights.lemma_keys`). One lemma draw over the union of the
    two models' lemmas serves every group and the pooled row (the lemmas are the same in every group):
    the ``counts`` stream of the ``U`` union lemmas, seed :func:`verbeval.core.bootstrap.stream_seed`
    ``(seed, LEMMA_DIMENSION)``, each model weighing its own lemmas by their union counts. It is its
    own stream: over ``U`` lemmas, not a model's ``L``, so its counts are not those of the model's
    per-model intervals (``verbeval aggregate``) unless ``U = L``."""
    dims = item_clusters.cluster_dimensions(cluster)
    groups = list(row_tse)
    alpha = 1.0 - confidence
    simultaneous = 1.0 - alpha / max(len(groups), 1)
    names = (model_a, model_b)
    records: list[dict[str, object]] = []
    paired: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}
    renumbered = False
    draw = (
        _lemma_draw(groups, context_scores, forms, lemmas, resamples, seed) if cluster == "template_and_lemma" else None
    )
    for group in groups:
        ids = None if row_ids is None else row_ids.get(group)
        tb, moved = pair_rows(group, names, row_tse[group], ids)
        ta = row_tse[group][0]
        if dims:
            if templates is None or group not in templates:
                raise MismatchError(f"group {group!r}: agreement.bootstrap.cluster {cluster} needs the rows' templates")
            of_row = templates[group]
            table = of_row if isinstance(of_row, pd.DataFrame) else pd.DataFrame({"template": list(of_row)})
            ta = item_clusters.with_row_clusters(ta, table, cluster, group)
        paired[group], renumbered = (ta, tb), renumbered or moved
        lemma_draw = None if draw is None else (draw[0][group], draw[1])
        records += _group_records(
            group, paired[group], context_scores[group], names, resamples, seed, simultaneous, moved, lemma_draw
        )
    if len(groups) > 1:
        tse = tuple(_pooled([paired[g][i] for g in groups], ["row", "context_id"]) for i in (0, 1))
        scores = tuple(_pooled([context_scores[g][i] for g in groups], ["context_id"]) for i in (0, 1))
        pooled = None if draw is None else (_pooled_sides([draw[0][g] for g in groups]), draw[1])
        records += _group_records(OVERALL, tse, scores, names, resamples, seed, confidence, renumbered, pooled)  # type: ignore[arg-type]
    out = pd.DataFrame.from_records(records)
    if out.empty:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    out.insert(0, "model_b", model_b)
    out.insert(0, "model_a", model_a)
    is_tse, overall = out["metric"] == "tse", out["group"] == OVERALL
    out["p_adjusted"] = np.nan
    out.loc[is_tse & ~overall, "p_adjusted"] = holm(out.loc[is_tse & ~overall, "p_value"].to_numpy())
    out.loc[is_tse & overall, "p_adjusted"] = out.loc[is_tse & overall, "p_value"]
    out["significant"] = np.where(is_tse, out["p_adjusted"] < alpha, (out["ci_low"] > 0) | (out["ci_high"] < 0)).astype(
        bool
    )
    out["correction"] = np.where(overall, "none", np.where(is_tse, "holm", "bonferroni"))
    out[["a_only", "b_only"]] = out[["a_only", "b_only"]].astype("Int64")
    if dims:  # the intervals' resampling, for readers (the default's columns stay as they are)
        return out[list(COMPARISON_COLUMNS)].assign(cluster=cluster)
    return out[list(COMPARISON_COLUMNS)]

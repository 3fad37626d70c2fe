"""Paired comparisons of two models (or two checkpoints) of one run: the same template rows and
contexts, scored by both.

Per group, with ``a`` the reference and ``b`` the model compared with it (differences are b - a):

* **TSE**: McNemar's exact test on the rows where both models' forms are single tokens (both TSE
  values defined). ``a_only`` counts the rows only ``a`` gets right, ``b_only`` those only ``b``
  does; the two-sided p-value is the exact binomial one, ``min(1, 2 P(X <= min(a_only, b_only)))``
  with ``X ~ Binomial(a_only + b_only, 1/2)`` (``scipy.stats.binomtest``); 1 when no row is
  discordant. A row is correct when P(correct) > P(incorrect): a tie counts as wrong for both
  (docs/metrics.md, "Ties"). Under a clustering (``agreement.bootstrap.cluster`` other than
  ``context``) Durkalski's clustered McNemar test over the clusters of its first dimension (the
  templates) decides, and gives the row its p-value, its interval and its ``mdd``
  (:class:`~verbeval.agreement.scores.paired_tests.Durkalski`, :func:`_clustered_tse`).
* **EW and MW** (top p = 1): the difference of the two group means, each over the contexts both
  models define (:mod:`.paired_differences`), with a percentile CI from a paired bootstrap (the ``counts`` stream of
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
interval that excludes 0 (EW, MW); empty where the row's test is not defined (no paired row, fewer
than 2 clusters, no interval) or, under a clustering, cannot reject whatever the data (``note``).

``mdd``: the minimum absolute difference the row's test detects with power :data:`POWER` at the row's
level (a group row's Bonferroni level, the Holm step's worst case; the overall row's nominal one): TSE
from the discordant rate (:func:`mcnemar_mdd`), under a clustering from Durkalski's test
(:meth:`Durkalski.mdd <verbeval.agreement.scores.paired_tests.Durkalski.mdd>`), EW and MW from the
interval's width (:func:`bootstrap_mdd`). The tests and mdds are in :mod:`.paired_tests`, the paired
bootstrap differences in :mod:`.paired_differences`; their names are importable from here.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.scores import item_clusters
from verbeval.agreement.scores.item_clusters import cluster_columns, context_labels
from verbeval.agreement.scores.lemma_weights import union_lemma_index
from verbeval.agreement.scores.metrics import FormStats
from verbeval.agreement.scores.paired_differences import (
    LemmaSide,
    paired_lemma_difference,
    paired_mean_difference,
    paired_means,
    paired_row_difference,
)
from verbeval.agreement.scores.paired_tests import (
    POWER,
    Durkalski,
    McNemar,
    bootstrap_mdd,
    clustered_mcnemar,
    durkalski,
    excludes_zero,
    holm,
    mcnemar_exact,
    mcnemar_mdd,
)
from verbeval.agreement.scores.registry import HEADLINE
from verbeval.core import count_draws
from verbeval.core.bootstrap import FEW_CLUSTERS, Clusters, mean_of_rows, stream_seed, too_few_clusters
from verbeval.core.errors import MismatchError, VerbevalError

log = logging.getLogger(__name__)

#: the public names, those of :mod:`.paired_tests` and :mod:`.paired_differences` included (importable from here)
__all__ = [
    "COMPARISON_COLUMNS",
    "CONTEXT_METRICS",
    "OVERALL",
    "POWER",
    "Durkalski",
    "LemmaSide",
    "McNemar",
    "bootstrap_mdd",
    "clustered_mcnemar",
    "compare_groups",
    "comparison_cluster_warnings",
    "durkalski",
    "holm",
    "mcnemar_exact",
    "mcnemar_mdd",
    "pair_rows",
    "paired_lemma_difference",
    "paired_mean_difference",
    "paired_means",
    "paired_row_difference",
    "template_row_ids",
    "too_few_group_clusters",
]

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

#: the per-context columns of the headline metrics with cutoff curves (EW, MW) at top p = 1 (``scores.parquet``)
CONTEXT_METRICS = {m.name: f"{m.name}_top@1" for m in HEADLINE if m.cutoff_curves}


#: the ``group`` of the overall rows: every group's rows and contexts pooled
OVERALL = "all"
#: the column of ``a``'s per-row TSE that names each row's cluster (``group``, tab, the row's cluster of the
#: clustering's first dimension: its template): what EW and MW resample and Durkalski's test clusters by
TEMPLATE = "template_cluster"


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
    :func:`pair_rows`). When ``a``'s rows carry cluster columns (:func:`~verbeval.agreement.scores.item_clusters.with_row_clusters`), EW and MW resample their
    templates (:func:`compare_groups`' ``cluster``), and so does their ``mdd``, and TSE is Durkalski's
    test over them (:func:`_clustered_tse`); each such row carries ``_clusters`` (for :func:`_notes`); ``lemma_draw`` (the two
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
    if cluster_columns(tse[0])[0]:  # clustered: Durkalski's test decides (only then: the default's bytes stay)
        records[0].update(_clustered_tse(group, tse[0], ta.to_numpy(), tb.to_numpy(), both, level))
    sa, sb = (s.set_index("context_id") for s in scores)
    cols = list(CONTEXT_METRICS.values())
    templates = context_labels(tse[0])  # the clusters the contexts are drawn by (None: one by one)
    drawn = resamples if lemma_draw is None else 0  # the lemma draw's interval replaces the templates' below
    va, vb = sa[cols].to_numpy(np.float64), sb[cols].to_numpy(np.float64)
    if sa.index.equals(sb.index) and not by_row:
        unit = len(sa)
        clusters = None
        if templates is not None:  # a context weighs the mean of its rows' template counts
            row_contexts = (sa.index.get_indexer(tse[0]["context_id"].to_numpy()),) * 2
            clusters = Clusters.of(templates, units=mean_of_rows(row_contexts[0], len(sa)))
        diff, lo, hi = paired_mean_difference(va, vb, drawn, seed, level, clusters=clusters)
        defined = ~np.isnan(va) & ~np.isnan(vb)  # the contexts both define
        values = [[_nanmean(np.where(defined[:, j], v[:, j], np.nan)) for j in range(len(cols))] for v in (va, vb)]
    else:  # different contexts (a masked and a causal LM): paired by template row
        ra, rb = (t.set_index("row")["context_id"] for t in tse)
        unit = len(ra)
        row_contexts = (sa.index.get_indexer(ra.to_numpy()), sb.index.get_indexer(rb.to_numpy()))
        diff, lo, hi = paired_row_difference(
            va,
            row_contexts[0],
            vb,
            row_contexts[1],
            drawn,
            seed,
            level,
            clusters=None if templates is None else Clusters.of(templates),
        )
        if (~np.isnan(va[row_contexts[0]]) & ~np.isnan(vb[row_contexts[1]])).all():  # the group means, as before
            values = [[_nanmean(v[:, j]) for j in range(len(cols))] for v in (va, vb)]
        else:  # over the rows whose contexts both define
            values = [list(m) for m in paired_means(va, row_contexts[0], vb, row_contexts[1])]
    if lemma_draw is not None and templates is not None:  # EW and MW at p = 1: templates and lemmas
        ew_mw = paired_lemma_difference(lemma_draw[0], row_contexts, templates, lemma_draw[1], seed, level)
        lo, hi = (x[[("ew", "mw").index(m) for m in CONTEXT_METRICS]] for x in ew_mw)
    mdd = bootstrap_mdd(lo, hi, level)
    k = {} if templates is None else {"_clusters": Clusters.of(templates).sizes[0]}
    for j, metric in enumerate(CONTEXT_METRICS):
        records.append(
            {
                "group": group,
                "metric": metric,
                "value_a": values[0][j],
                "value_b": values[1][j],
                "difference": diff[j],
                "ci_low": lo[j],
                "ci_high": hi[j],
                "confidence": level,
                "n": unit,
                "a_only": pd.NA,
                "b_only": pd.NA,
                "p_value": np.nan,
                "mdd": mdd[j],
                **k,
            }  # fmt: skip
        )
    return records


def _nanmean(v: np.ndarray) -> float:
    """The mean of the defined values, NaN when none is (no warning)."""
    return float(np.nanmean(v)) if (~np.isnan(v)).any() else np.nan


def _clustered_tse(
    group: str, rows: pd.DataFrame, a: np.ndarray, b: np.ndarray, both: np.ndarray, level: float
) -> dict[str, object]:
    """The TSE comparison row's ``ci_low``, ``ci_high``, ``confidence``, ``p_value`` and ``mdd`` under a
    clustering, all of Durkalski's test over the clusters of the clustering's first dimension (``rows``: ``a``'s per-row
    TSE with that column; ``a``, ``b``: both models' per-row TSE; ``both``: the rows both define):
    its p-value, its interval at ``level`` (which excludes 0 exactly when it rejects at ``1 - level``)
    and its ``mdd`` at ``1 - level`` (NaN when its power point lies beyond the largest statistic the
    clusters allow: :meth:`~verbeval.agreement.scores.paired_tests.Durkalski.mdd`), and ``_clusters``,
    their number (``compare_groups`` reads it for the ``note``). Fewer than 2 clusters: all NaN, and one
    warning when the group's rows had enough (else :func:`too_few_group_clusters`' warning said so)."""
    columns, what = cluster_columns(rows)
    labels = rows[columns[0]].to_numpy()  # the clustering's first dimension
    test = durkalski(a[both] == 1.0, b[both] == 1.0, labels[both])
    if test.clusters < 2 and Clusters.of(labels).sizes[0] >= 2:
        log.warning(
            too_few_clusters(group, Clusters.of(labels[both]), what[:1], "its TSE comparison's test is not defined")
        )
    low, high = test.interval(level)
    return {
        "ci_low": low,
        "ci_high": high,
        "confidence": level,
        "p_value": test.p_value,
        "mdd": test.mdd(1.0 - level),
        "_clusters": test.clusters,
    }


def too_few_group_clusters(group: str, clusters: pd.DataFrame, cluster: str) -> str | None:
    """The warning line of a comparison's group (or of the pooled :data:`OVERALL`) whose rows
    (``clusters``: the clusters of each, :func:`verbeval.agreement.scores.item_clusters.row_clusters`)
    have too few clusters under ``agreement.bootstrap.cluster`` ``cluster`` (not ``context``), or None
    (:func:`verbeval.agreement.scores.item_clusters.too_few_group_clusters`: fewer than 2, NaN; fewer
    than :data:`verbeval.core.bootstrap.FEW_CLUSTERS`, the intervals undercover, and Durkalski's test
    may be unable to reject: the row's ``note`` says when)."""
    return item_clusters.too_few_group_clusters(group, clusters, cluster)


def comparison_cluster_warnings(clusters: Mapping[str, pd.DataFrame], cluster: str) -> list[str]:
    """:func:`too_few_group_clusters`' lines of every group of a comparison (``clusters[group]``: its
    rows' clusters) and, with more than one group, of the pooled :data:`OVERALL`: a template is a
    group's (group, template), a subject or verb the same cluster in every group
    (:func:`verbeval.agreement.scores.item_clusters.cluster_labels`)."""
    lines = [too_few_group_clusters(g, c, cluster) for g, c in clusters.items()]
    if len(clusters) > 1:
        dims = [d for d in item_clusters.cluster_dimensions(cluster) if all(d in c for c in clusters.values())]
        pooled = pd.DataFrame(
            {d: [f"{g}\t{x}" if d == "template" else x for g, c in clusters.items() for x in c[d]] for d in dims}
        )
        lines.append(too_few_group_clusters(OVERALL, pooled, cluster))
    return [line for line in lines if line is not None]


def _notes(out: pd.DataFrame, alpha: float, simultaneous: float, dim: str) -> tuple[list[str], np.ndarray]:
    """The ``note`` of each clustered comparison row (``out``: the rows with their ``_clusters``, the
    clusters of the rows each is over, and ``p_adjusted``), and which TSE rows' test cannot reject
    whatever the data: Durkalski's ``p >= P(chi2_1 > K)``, so a group row cannot reject when Holm's
    adjustment of every group's smallest possible p-value (Holm's adjusted values only grow with the
    p-values) leaves it at ``alpha`` or more, and the pooled row when its own smallest p is. The notes:
    a test or interval that is not defined (fewer than 2 clusters), a test that cannot reject, an
    ``mdd`` left empty because the test's power point needs a statistic above ``K``, and an EW or MW
    interval from fewer than :data:`~verbeval.core.bootstrap.FEW_CLUSTERS` clusters (it undercovers)."""
    from scipy.stats import chi2, norm

    k = out["_clusters"].to_numpy(dtype=np.float64, na_value=np.nan)
    is_tse, overall = (out["metric"] == "tse").to_numpy(), (out["group"] == OVERALL).to_numpy()
    floor = np.where(is_tse & (k >= 2), chi2.sf(np.where(k >= 2, k, 2.0), 1), np.nan)
    best = floor.copy()
    groups = is_tse & ~overall & out["p_value"].notna().to_numpy()
    best[groups] = holm(floor[groups])
    unable = is_tse & (best >= alpha)
    notes = []
    for i in range(len(out)):
        size = "" if np.isnan(k[i]) else f"{int(k[i])} {dim}{'' if k[i] == 1 else 's'}"
        level = 1.0 - alpha if overall[i] else simultaneous
        power = (norm.ppf(0.5 + level / 2.0) + norm.ppf(POWER)) ** 2
        if np.isnan(k[i]):
            notes.append("")
        elif k[i] < 2:
            notes.append(f"no {'test' if is_tse[i] else 'interval'}: {size} (a clustered one needs 2)")
        elif unable[i]:
            held = "" if overall[i] else f" and Holm's adjusted p >= {best[i]:.3g}"
            notes.append(
                f"cannot reject with {size}: Durkalski's chi-square is at most {int(k[i])}, so p >= {floor[i]:.3g}"
                f"{held}, never below {alpha:g}"
            )
        elif not is_tse[i] and k[i] < FEW_CLUSTERS:
            notes.append(f"{size}: a clustered interval from fewer than {FEW_CLUSTERS} undercovers")
        elif is_tse[i] and k[i] < power:
            notes.append(
                f"no mdd with {size}: power {POWER:g} at level {1.0 - level:.3g} needs a chi-square of {power:.3g}, "
                f"and Durkalski's is at most {int(k[i])}"
            )
        else:
            notes.append("")
    return notes, unable


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
    ``model_a``'s rows' template, indexed by its ``row``: a sequence, or the column of
    :func:`verbeval.agreement.scores.aggregate.row_clusters` that the clustering's first dimension names,
    :func:`~verbeval.agreement.scores.aggregate.cluster_dimensions`) once for both models, the pooled
    groups by (group, template); ``comparisons.csv`` then gets the columns ``note`` (:func:`_notes`) and
    ``cluster``. The TSE row then gets Durkalski's test over the templates: its p-value, its interval
    and its ``mdd`` (:func:`_clustered_tse`). ``template_and_lemma`` also draws lemmas for EW and MW
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
    decided = np.where(is_tse, out["p_adjusted"].notna(), out["ci_low"].notna() & out["ci_high"].notna())
    rejects = np.where(is_tse, out["p_adjusted"] < alpha, excludes_zero(out["ci_low"], out["ci_high"]))
    if dims:  # a TSE row whose test cannot reject whatever the data has no verdict either (_notes)
        out["note"], unable = _notes(out, alpha, simultaneous, item_clusters.NAMES[dims[0]])
        decided &= ~unable
    out["significant"] = pd.array(np.where(decided, rejects, False), dtype="boolean")
    out.loc[~decided, "significant"] = pd.NA
    out["correction"] = np.where(overall, "none", np.where(is_tse, "holm", "bonferroni"))
    out[["a_only", "b_only"]] = out[["a_only", "b_only"]].astype("Int64")
    if dims:  # the clustered rows' notes and the intervals' resampling (the default's columns stay as they are)
        return out[[*COMPARISON_COLUMNS, "note"]].assign(cluster=cluster)
    return out[list(COMPARISON_COLUMNS)]

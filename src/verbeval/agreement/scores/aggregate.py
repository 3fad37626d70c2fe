"""Aggregation: probability shards -> per-context scores -> per-group summary with bootstrap CIs.

No model is needed here: every metric and cutoff is recomputed from the stored form statistics.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from verbeval.agreement.engine.shards import SHARD_SCHEMA_VERSION, fixed_list_values, read_shard_meta
from verbeval.agreement.scores.item_clusters import (
    cluster_dimensions,
    cluster_labels,
    context_dimension,
    names,
    row_clusters,
)
from verbeval.agreement.scores.lemma_weights import lemma_weighted_p1
from verbeval.agreement.scores.metrics import FormStats, scores_from_stats, tse_scores
from verbeval.agreement.scores.registry import HEADLINE
from verbeval.core import count_draws
from verbeval.core.bootstrap import (
    Clusters,
    bootstrap_means,
    few_clusters,
    mean_of_rows,
    percentile_ci,
    stream_seed,
    too_few_clusters,
    weighted_nanmean,
)
from verbeval.core.errors import MismatchError, ShardError, VerbevalError
from verbeval.core.io import quarantine

log = logging.getLogger(__name__)

#: metadata fields that must agree across the shards of one (model, group)
CONSISTENT_META = (
    "model_id",
    "revision",
    "kind",
    "dtype",
    "tokenizer_fingerprint",
    "lemma_set_sha256",
    "prepend_bos",
    "group",
    "n_chunks",
    "n_group_contexts",
    "top_k",
    "schema_version",
)


@dataclass
class GroupShards:
    meta: dict[str, Any]
    context_id: np.ndarray
    plural: np.ndarray
    stats: FormStats | None  # None: read without the form statistics (read_shards(forms=False))
    rows: np.ndarray  # template row index of each TSE row
    row_context: np.ndarray
    tse_p: np.ndarray  # [R, 2] (singular, plural) probabilities
    topk_ids: np.ndarray
    topk_probs: np.ndarray
    n_nonfinite: int = 0  # contexts written with non-finite logits (inference.allow_nonfinite); NaN scores


#: the shard columns of the contexts and TSE rows, without the per-form statistics
LIGHT_COLUMNS = ("context_id", "plural", "rows", "tse_p_sing", "tse_p_plur")


def read_shards(paths: Sequence[str | Path], forms: bool = True) -> GroupShards:
    """Read and validate the shards of one (model, group): consistent metadata, every chunk present
    exactly once, row counts matching the metadata. ``forms`` False: without the per-form statistics
    and top-k columns (``stats`` None; the contexts and TSE rows only)."""
    if not paths:
        raise VerbevalError("no shards given")
    metas = [read_shard_meta(p) for p in paths]
    ref = metas[0]
    for p, m in zip(paths, metas):
        if m.get("schema_version") != SHARD_SCHEMA_VERSION:
            raise ShardError(p, f"shard schema version {m.get('schema_version')} != {SHARD_SCHEMA_VERSION}")
        for key in CONSISTENT_META:
            if m.get(key) != ref.get(key):
                raise VerbevalError(
                    f"{p}: {key}={m.get(key)!r} differs from {paths[0]}: {ref.get(key)!r} (stale shard?)"
                )
    chunks = sorted(m["chunk"] for m in metas)
    if chunks != list(range(ref["n_chunks"])):
        n = ref["n_chunks"]
        lacking = [f"{k + 1}-of-{n}.parquet" for k in range(n) if k not in set(chunks)] or ["(a chunk given twice)"]
        raise VerbevalError(
            f"model {ref.get('model_id')!r}, group {ref.get('group')!r}: shard "
            f"{', '.join(lacking)} of {Path(paths[0]).parent} is not among the shards given "
            f"(they cover chunks {[c + 1 for c in chunks]} of {n}): rerun the model's inference job"
        )
    n_bad = sum(int(m.get("n_nonfinite") or 0) for m in metas)
    if n_bad:
        log.warning(
            "model %r, group %r: %d contexts have non-finite logits (written with allow_nonfinite); "
            "their scores are NaN",
            ref.get("model_id"),
            ref.get("group"),
            n_bad,
        )
    order = np.argsort([m["chunk"] for m in metas])
    f = 2 * ref["n_lemmas"]
    parts: dict[str, list[np.ndarray]] = {
        k: [] for k in ("cid", "plural", "prob", "above", "below", "rows", "rctx", "ps", "pp", "tki", "tkp")
    }
    for i in order:
        path, m = paths[i], metas[i]
        t = pq.read_table(path) if forms else pq.read_table(path, columns=list(LIGHT_COLUMNS))
        n = t.num_rows
        if n != m["n_contexts"] or n != m["context_stop"] - m["context_start"]:
            raise ShardError(path, f"{n} contexts but metadata says {m['n_contexts']} (truncated shard)")
        cid = t["context_id"].to_numpy()
        if not np.array_equal(cid, np.arange(m["context_start"], m["context_stop"])):
            raise ShardError(path, "context ids do not match the chunk range (corrupted shard)")
        parts["cid"].append(cid)
        parts["plural"].append(t["plural"].to_numpy(zero_copy_only=False))
        if forms:
            parts["prob"].append(fixed_list_values(t["prob"], f, np.float32))
            parts["above"].append(fixed_list_values(t["cum_above"], f, np.float32))
            parts["below"].append(fixed_list_values(t["cum_below"], f, np.float32))
            k = m["top_k"]
            parts["tki"].append(fixed_list_values(t["topk_ids"], k, np.int32))
            parts["tkp"].append(fixed_list_values(t["topk_probs"], k, np.float32))
        lens = t["rows"].combine_chunks().value_lengths().to_numpy(zero_copy_only=False)
        rows = t["rows"].combine_chunks().flatten().to_numpy()
        if len(rows) != m["n_rows"]:
            raise ShardError(path, f"{len(rows)} TSE rows but metadata says {m['n_rows']} (corrupted shard)")
        parts["rows"].append(rows)
        parts["rctx"].append(np.repeat(cid, lens))
        parts["ps"].append(t["tse_p_sing"].combine_chunks().flatten().to_numpy(zero_copy_only=False))
        parts["pp"].append(t["tse_p_plur"].combine_chunks().flatten().to_numpy(zero_copy_only=False))
    cat = {k: np.concatenate(v) for k, v in parts.items() if v}
    n_ctx = len(cat["cid"])
    if n_ctx != ref["n_group_contexts"]:
        raise VerbevalError(f"shards hold {n_ctx} contexts, expected {ref['n_group_contexts']}")
    shape = (n_ctx, ref["n_lemmas"], 2)
    stats = (
        FormStats(cat["prob"].reshape(shape), cat["above"].reshape(shape), cat["below"].reshape(shape))
        if forms
        else None
    )
    if not forms:
        cat["tki"] = np.zeros((n_ctx, 0), np.int32)
        cat["tkp"] = np.zeros((n_ctx, 0), np.float32)
    return GroupShards(
        ref,
        cat["cid"],
        cat["plural"].astype(bool),
        stats,
        cat["rows"],
        cat["rctx"],
        np.stack([cat["ps"], cat["pp"]], axis=1),
        cat["tki"],
        cat["tkp"],
        n_bad,
    )


def quarantine_bad_shard(exc: ShardError, keep: bool, manifest: str | None = None) -> VerbevalError:
    """The error to raise for an unusable shard (``exc``); unless ``keep``, the file is moved aside
    first (:func:`quarantine`) and the store's ``manifest`` (when given) removed, so that the next
    run, Snakemake's or ``dvc repro``, runs the model's inference job again: it keeps every intact
    shard and recomputes this one. (A manifest left in place would make every ``dvc repro`` fail.)"""
    if keep:
        return VerbevalError(f"{exc}: rerun the model's inference job to recompute it")
    done = []
    if Path(exc.path).exists():
        done.append(f"moved it to {quarantine(exc.path)}")
    if manifest is not None and Path(manifest).exists():
        Path(manifest).unlink()
        done.append(f"removed the stale manifest {manifest}")
    what = f"; {' and '.join(done)}" if done else ""
    return VerbevalError(f"{exc}{what}: rerun the workflow (snakemake or dvc repro) to recompute it")


def _fmt_cutoff(p: float) -> str:
    return f"{p:g}"


def context_scores(
    shards: GroupShards, top_cutoffs: Sequence[float], bottom_cutoffs: Sequence[float], block: int = 128
) -> pd.DataFrame:
    """Per-context EW, MW and counted mass at every cutoff (wide table, one row per context) of a
    group's shards (:func:`score_contexts`)."""
    if shards.stats is None:
        raise VerbevalError(f"group {shards.meta.get('group')!r}: read without its form statistics")
    return score_contexts(shards.context_id, shards.plural, shards.stats, top_cutoffs, bottom_cutoffs, block)


def score_columns(top_cutoffs: Sequence[float], bottom_cutoffs: Sequence[float]) -> list[str]:
    """The columns of :func:`score_contexts`'s table (of at least one context), in its order."""
    metrics = [*(m.name for m in HEADLINE if m.cutoff_curves), "prob_counted", "prob_counted_forms"]
    cols = [f"{m}_{side}@{_fmt_cutoff(p)}" for side, cuts in (("top", top_cutoffs), ("bottom", bottom_cutoffs))
            for m in metrics for p in cuts]  # fmt: skip
    return ["context_id", "plural", *dict.fromkeys(cols)]


def score_contexts(
    context_id: np.ndarray,
    plural: np.ndarray,
    stats: FormStats,
    top_cutoffs: Sequence[float],
    bottom_cutoffs: Sequence[float],
    block: int = 128,
) -> pd.DataFrame:
    """Per-context EW, MW and counted mass at every cutoff (wide table, one row per context) from
    the contexts' form statistics (``[n, L, 2]``, as a shard stores them) and ``plural`` flags.

    Each context's scores depend on its own row only, so a chunk scored alone gives the rows the
    whole group gives (:mod:`verbeval.agreement.scores.chunk_scores`). Contexts are scored ``block``
    at a time: the scoring is a few dozen passes over ``[block, forms]`` arrays, and blocks whose
    temporaries stay in the CPU caches (128 contexts x 2,000 forms x 8 bytes = 2 MB) are 4-5x faster
    than blocks of 2,048; the result does not depend on it.
    """
    n = len(context_id)
    cols: dict[str, list[np.ndarray]] = {}
    for start in range(0, n, block):
        sl = slice(start, start + block)
        st = FormStats(stats.prob[sl], stats.cum_above[sl], stats.cum_below[sl])
        top, bottom = scores_from_stats(st, plural[sl], top_cutoffs, bottom_cutoffs)
        for side, res, cuts in (("top", top, top_cutoffs), ("bottom", bottom, bottom_cutoffs)):
            for metric, arr in (
                # the headline metrics scored at every cutoff (the registry's), then the counted masses
                *((m.name, getattr(res, m.score_column)) for m in HEADLINE if m.cutoff_curves),
                ("prob_counted", res.prob_counted),
                ("prob_counted_forms", res.prob_counted_forms),
            ):
                for j, p in enumerate(cuts):
                    cols.setdefault(f"{metric}_{side}@{_fmt_cutoff(p)}", []).append(arr[:, j])
    out = pd.DataFrame({"context_id": context_id, "plural": plural})
    wide = pd.DataFrame({k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()})
    # contexts whose model output was not finite (kept under inference.allow_nonfinite) have no
    # score: comparisons with NaN would otherwise count as "not above" and give EW 0
    bad = ~(np.isfinite(stats.prob) & np.isfinite(stats.cum_above) & np.isfinite(stats.cum_below)).reshape(n, -1).all(
        axis=1
    )
    if bad.any():
        wide.loc[bad, :] = np.nan
    return pd.concat([out, wide], axis=1)


def row_tse(shards: GroupShards, templates_group: pd.DataFrame) -> pd.DataFrame:
    """TSE per template row of the group (NaN where the row's verb forms are not single tokens)."""
    plural = templates_group["plural"].to_numpy(dtype=bool)[shards.rows]
    tse = tse_scores(shards.tse_p[:, 0], shards.tse_p[:, 1], plural, ~np.isnan(shards.tse_p).any(axis=1))
    df = pd.DataFrame(
        {
            "row": shards.rows,
            "context_id": shards.row_context,
            "tse": tse,
            "p_sing": shards.tse_p[:, 0],
            "p_plur": shards.tse_p[:, 1],
        }
    )
    return df.sort_values("row", kind="stable").reset_index(drop=True)


def wilson_interval(correct: np.ndarray, confidence: float) -> tuple[float, float]:
    """The Wilson score interval at ``confidence`` of the share of 1s among the defined values of
    ``correct`` (0, 1 or NaN: per-row TSE), by ``scipy.stats.binomtest``; NaN without a defined value."""
    from scipy.stats import binomtest

    values = np.asarray(correct, dtype=np.float64)
    values = values[~np.isnan(values)]
    if not len(values):
        return np.nan, np.nan
    ci = binomtest(int((values == 1.0).sum()), len(values)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def summarise(
    scores: pd.DataFrame,
    tse: pd.DataFrame,
    *,
    model: str,
    group: str,
    resamples: int | None = None,
    seed: int | None = None,
    confidence: float | None = None,
    cluster: str | None = None,
    templates_group: pd.DataFrame | None = None,
    lemma_stats: tuple[FormStats, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Long summary: one row per (metric, side, cutoff) with value, CI and counts.

    Metrics: ``tse`` (over rows), ``ew``/``mw`` (over contexts, NaN ignored), ``prob_counted``
    (mean counted mass: both forms of every counted lemma, the paper's Figure 3),
    ``prob_counted_forms`` (mean mass of the counted forms inside the set; equal to
    ``prob_counted`` at bottom-p), ``invalid`` (share of contexts where no lemma counts).
    ``resamples``, ``seed``, ``confidence``, ``cluster``: ``agreement.bootstrap``'s (None: its default,
    :data:`verbeval.agreement.steps.AGGREGATE`). ``cluster``: ``agreement.bootstrap.cluster``
    (:func:`summary_clusters`; not ``context``: ``templates_group``, the group's template rows, gives
    each row's template, verb and items, and the summary gets a ``cluster`` column). ``lemma_stats``: the
    contexts' ``(form statistics, plural)`` in the rows' order of ``scores``, which ``template_and_lemma``
    needs for EW and MW at cutoff 1 (:func:`lemma_draw_context_scores`). ``wilson_low``,
    ``wilson_high``: TSE's Wilson score interval at ``confidence`` (:func:`wilson_interval`; over
    independent rows, whatever ``cluster``), NaN for the other metrics.
    """
    from verbeval.agreement.steps import AGGREGATE

    resamples = AGGREGATE.default("resamples") if resamples is None else resamples
    seed = AGGREGATE.default("seed") if seed is None else seed
    confidence = AGGREGATE.default("confidence") if confidence is None else confidence
    cluster = AGGREGATE.default("cluster") if cluster is None else cluster
    metric_cols = [c for c in scores.columns if "@" in c]
    by_row, by_context = summary_clusters(cluster, group, scores, tse, templates_group)
    mean, lo, hi = bootstrap_means(scores[metric_cols].to_numpy(), resamples, seed, confidence, clusters=by_context)
    drawn = [j for j, col in enumerate(metric_cols) if lemma_drawn(col)] if cluster == "template_and_lemma" else []
    if drawn:  # EW and MW at p = 1: templates crossed with lemmas (the other columns: templates)
        if lemma_stats is None:
            raise VerbevalError(
                f"group {group!r}: agreement.bootstrap.cluster template_and_lemma needs the group's form statistics"
            )
        stats, plural = lemma_stats
        if len(plural) != len(scores) or stats.prob.shape[0] != len(scores):
            raise MismatchError(
                f"group {group!r}: {stats.prob.shape[0]} contexts of form statistics for {len(scores)} scored contexts"
            )
        if by_context is not None and resamples > 0 and len(scores) and not by_context.too_few():
            d_lo, d_hi = percentile_ci(
                lemma_draw_context_scores(stats, np.asarray(plural), by_context, resamples, seed), confidence
            )
            for j in drawn:
                k = 0 if metric_cols[j].startswith("ew_") else 1
                lo[j], hi[j] = d_lo[k], d_hi[k]
    records: list[dict[str, Any]] = []
    tse_vals = tse["tse"].to_numpy()
    t_mean, t_lo, t_hi = bootstrap_means(tse_vals, resamples, seed, confidence, clusters=by_row)
    w_lo, w_hi = wilson_interval(tse_vals, confidence)
    records.append(
        {
            "metric": "tse",
            "side": "",
            "cutoff": np.nan,
            "value": t_mean[0],
            "ci_low": t_lo[0],
            "ci_high": t_hi[0],
            "n": int((~np.isnan(tse_vals)).sum()),
            "n_total": len(tse_vals),
            "wilson_low": w_lo,
            "wilson_high": w_hi,
        }
    )
    n_ctx = len(scores)
    for j, col in enumerate(metric_cols):
        name, cut = col.split("@")
        metric, side = name.rsplit("_", 1)
        vals = scores[col].to_numpy()
        n_valid = int((~np.isnan(vals)).sum())
        records.append(
            {
                "metric": metric,
                "side": side,
                "cutoff": float(cut),
                "value": mean[j],
                "ci_low": lo[j],
                "ci_high": hi[j],
                "n": n_valid,
                "n_total": n_ctx,
            }
        )
        if metric == "ew":
            records.append(
                {
                    "metric": "invalid",
                    "side": side,
                    "cutoff": float(cut),
                    "value": (1 - n_valid / n_ctx) if n_ctx else np.nan,
                    "ci_low": np.nan,
                    "ci_high": np.nan,
                    "n": n_ctx - n_valid,
                    "n_total": n_ctx,
                }
            )
    df = pd.DataFrame.from_records(records)
    df.insert(0, "group", group)
    df.insert(0, "model", model)
    if cluster != "context":  # the intervals' resampling, for readers (the default's columns stay as they are)
        df["cluster"] = cluster
    return df


def summary_clusters(
    cluster: str, group: str, scores: pd.DataFrame, tse: pd.DataFrame, templates_group: pd.DataFrame | None
) -> tuple[Clusters | None, Clusters | None]:
    """The clusters of a group's TSE rows and of its contexts under ``agreement.bootstrap.cluster``
    ``cluster`` (docs/metrics.md, "Clustered intervals"; each row's cluster ids:
    :func:`verbeval.agreement.scores.item_clusters.cluster_labels`); ``(None, None)`` for ``context``
    (rows and contexts resampled one by one). A row weighs the product of its clusters' counts in the
    clustering's dimensions; a context the mean of its rows' counts in the context dimension (the
    template or the subject; None under ``verb``: the contexts one by one). ``template_and_lemma``: EW
    and MW at p = 1 also draw lemmas (:func:`lemma_draw_context_scores`). Fewer than 2 clusters: one
    warning line (:func:`too_few_clusters`) naming the intervals that are NaN."""
    dims = cluster_dimensions(cluster)
    if not dims:
        return None, None
    if templates_group is None:
        raise VerbevalError(f"group {group!r}: agreement.bootstrap.cluster {cluster} needs the group's template rows")
    rows = tse["row"].to_numpy()
    labels = [lab[rows] for lab in cluster_labels(row_clusters(templates_group), cluster, group)]
    by_row = Clusters.of(*labels)
    context = context_dimension(cluster)
    by_context = None
    if context is not None:
        index = pd.Index(scores["context_id"]).get_indexer(tse["context_id"].to_numpy())
        by_context = Clusters.of(labels[dims.index(context)], units=mean_of_rows(index, len(scores)))
    # too few in the context dimension: every interval is NaN; in another: TSE's only
    why = (
        (too_few_clusters(group, by_context, names([context])) if by_context is not None else None)
        or too_few_clusters(group, by_row, names(dims), nan="its TSE interval is NaN")
        or few_clusters(group, by_row, names(dims))
    )
    if why is not None:
        log.warning(why)
    return by_row, by_context


#: the :func:`verbeval.core.bootstrap.stream_seed` dimension of the lemma draw of EW and MW (0: the
#: templates, 1: the TSE rows' verbs)
LEMMA_DIMENSION = 2


def lemma_drawn(column: str) -> bool:
    """Whether a score column's interval draws lemmas under ``template_and_lemma``: EW and MW at
    cutoff 1, top or bottom (at p = 1 both count every lemma, :mod:`verbeval.agreement.scores.lemma_weights`)."""
    name, _, cut = column.partition("@")
    return name.rsplit("_", 1)[0] in ("ew", "mw") and float(cut) == 1.0


def lemma_draw_context_scores(
    stats: FormStats, plural: np.ndarray, by_context: Clusters, resamples: int, seed: int, block: int = 100
) -> np.ndarray:
    """``[resamples, 2]``: the group's EW and MW at p = 1 in every template-and-lemma resample.

    Per block of resamples: the contexts' template weights ``W`` (:meth:`Clusters.weights`, as for the
    other columns), the lemma counts ``v`` (the ``counts`` stream of the ``L`` lemmas of ``stats``, seed
    :func:`verbeval.core.bootstrap.stream_seed` ``(seed, LEMMA_DIMENSION)``), each context scored under
    ``v`` (:func:`verbeval.agreement.scores.lemma_weights.lemma_weighted_p1`), and the statistic
    ``sum_c W_c EW_c(v) / sum_c W_c`` over the contexts where ``EW_c(v)`` is defined (MW alike)."""
    n_lemmas = stats.prob.shape[1]
    out = np.full((resamples, 2), np.nan)
    if n_lemmas == 0:
        return out
    lemmas = count_draws.counts(n_lemmas, resamples, stream_seed(seed, LEMMA_DIMENSION), block)
    for rows, w in by_context.weights(resamples, seed, block):
        for k, values in enumerate(lemma_weighted_p1(stats, plural, lemmas[rows])):
            out[rows, k] = weighted_nanmean(w, values)
    return out


#: the last columns of a summary: the ``agreement.bootstrap`` settings its intervals were drawn with
#: (the clustering is its ``cluster`` column, absent for ``context``); the export labels the intervals with them
INTERVAL_SETTINGS = ("resamples", "confidence")


def with_interval_settings(summary: pd.DataFrame, resamples: int, confidence: float) -> pd.DataFrame:
    """``summary`` with :data:`INTERVAL_SETTINGS` as its last columns: the resamples and the
    confidence of its ``ci_low``/``ci_high`` (and ``wilson_low``/``wilson_high``) intervals."""
    return summary.assign(resamples=int(resamples), confidence=float(confidence))

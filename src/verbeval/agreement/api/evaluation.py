"""The in-process API: :func:`evaluate` scores a model object already in memory on an
:class:`~verbeval.agreement.api.suite.AgreementSuite` and returns an :class:`AgreementResult`.

It runs the workflow's own engine with nothing written to disk: each group's contexts are prepared
(:func:`verbeval.agreement.engine.inference.prepare_group`) and forwarded chunk by chunk
(:func:`verbeval.agreement.engine.inference.compute_chunk`), the chunks are read as the group's shards
would be (float32 form statistics, the TSE rows in shard order), scored by
:func:`verbeval.agreement.scores.aggregate.context_scores` and :func:`~verbeval.agreement.scores.aggregate.row_tse`,
summarised by :func:`~verbeval.agreement.scores.aggregate.summarise` and tabled by
:func:`verbeval.agreement.report.tables.table2`. So the numbers equal the workflow's (``infer``,
``aggregate``, ``table``) for the same model, rows and lexicon, batch size and chunks;
``tests/test_evaluation.py`` compares them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.api.suite import AgreementSuite
from verbeval.agreement.report.tables import table2
from verbeval.agreement.scores.aggregate import (
    GroupShards,
    context_scores,
    row_clusters,
    row_tse,
    summarise,
    with_interval_settings,
)
from verbeval.agreement.scores.lemma_contexts import forms_of, lemma_contexts_from_stats, write_lemma_contexts
from verbeval.agreement.scores.metrics import FormStats
from verbeval.agreement.scores.paired import template_row_ids
from verbeval.agreement.scores.registry import HEADLINE, NAMES
from verbeval.agreement.steps import AGGREGATE
from verbeval.core import api_args as args
from verbeval.core.bootstrap import CLUSTERINGS
from verbeval.core.errors import VerbevalError
from verbeval.core.io import write_csv

log = logging.getLogger(__name__)

__all__ = ["AgreementResult", "evaluate"]


@dataclass
class AgreementResult:
    """What :func:`evaluate` found for one model.

    ``summary``: the rows ``summary_all.csv`` would hold for this model (its columns and sort order):
    every metric, side and cutoff of every group with its bootstrap CI and counts. ``table2``: Table 2
    for this model (the columns of ``table2.csv``). ``lemma_contexts``: per (group, lemma), the
    contexts where the correct form wins (:mod:`verbeval.agreement.scores.lemma_contexts`).
    ``context_scores`` and ``row_tse``: per group, the per-context scores and per-row TSE
    (``scores.parquet`` and ``tse.parquet`` of ``verbeval aggregate``). ``lemmas``: the model's eligible
    lemmas. ``seconds``: the time :func:`evaluate` took.
    """

    model: str
    groups: list[dict[str, Any]]
    summary: pd.DataFrame
    table2: pd.DataFrame
    lemma_contexts: pd.DataFrame
    lemmas: pd.DataFrame
    context_scores: dict[str, pd.DataFrame] = field(repr=False)
    row_tse: dict[str, pd.DataFrame] = field(repr=False)
    random_init: bool = False
    seconds: float = 0.0
    #: per group, the identity (``source:line``) of each of its template rows, which ``row_tse``'s ``row`` indexes
    row_ids: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: per group, each of its template rows' template and verb (:func:`~verbeval.agreement.scores.aggregate.row_clusters`,
    #: indexed as ``row_ids``): the clusters of :meth:`compare`'s ``cluster``
    row_clusters: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    #: per group, its contexts' form statistics and ``plural`` flags, in the order of ``context_scores``
    #: (kept by :func:`evaluate` under ``cluster="template_and_lemma"`` only): what :meth:`compare`'s
    #: ``template_and_lemma`` draws lemmas from
    form_stats: dict[str, tuple[FormStats, np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def per_group(self) -> pd.DataFrame:
        """One row per group: ``group, name, tse, ew, mw`` (EW and MW at top p = 1), their CIs,
        ``n_rows`` (TSE rows whose forms are single tokens) and ``n_contexts``."""
        t = self.table2
        cols = {"group": t["group"], "name": t["name"]}
        for metric in HEADLINE:  # Table 2's metrics, read at top p = 1
            for col, _ in metric.columns:
                cols[col] = t[f"{self.model}.{col}"]
        cols["n_rows"] = t[f"{self.model}.n_rows"]
        cols["n_contexts"] = t[f"{self.model}.n_contexts"]
        return pd.DataFrame(cols)

    @property
    def per_lemma(self) -> pd.DataFrame:
        """One row per (group, lemma): ``sing, plur, n_contexts, n_correct`` and ``accuracy`` (the share
        of the group's contexts where the lemma's correct form is more probable)."""
        lc = self.lemma_contexts.drop(columns="correct_bits")
        forms = self.lemmas[["lemma", "sing", "plur"]].drop_duplicates("lemma")
        out = lc.merge(forms, on="lemma", how="left", sort=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["accuracy"] = out["n_correct"] / out["n_contexts"].where(out["n_contexts"] > 0)
        return out[["group", "lemma", "sing", "plur", "n_contexts", "n_correct", "accuracy"]]

    def log_values(self, prefix: str = "agreement") -> dict[str, float]:
        """``{"<prefix>/<group>/<metric>": value}`` for TSE, EW and MW (top p = 1) of every group: what
        :class:`verbeval.agreement.api.callback.AgreementCallback` hands to the Trainer's logging."""
        pg = self.per_group
        return {f"{prefix}/{r.group}/{m}": float(getattr(r, m)) for r in pg.itertuples() for m in NAMES}

    def compare(
        self,
        other: AgreementResult,
        *,
        resamples: int | None = None,
        seed: int | None = None,
        confidence: float | None = None,
        cluster: str | None = None,
    ) -> pd.DataFrame:
        """``other`` against this result on the same rows and contexts, per group: TSE by McNemar's
        exact test, EW and MW (top p = 1) by a paired bootstrap, corrected across the groups
        (:func:`verbeval.agreement.scores.paired.compare_groups`: the rows of ``comparisons.csv``,
        differences ``other - self``). The rows are paired by their template identity (source and line);
        results of other groups or rows are a :class:`~verbeval.core.errors.MismatchError` (also a
        ``ValueError``). The bootstrap settings default to ``agreement.bootstrap``'s; too few
        resamples for the corrected intervals are one warning (:func:`verbeval.core.bootstrap.few_resamples`).
        ``cluster`` (``agreement.bootstrap.cluster``): ``template`` or ``template_and_lemma`` resample
        this result's templates (:attr:`row_clusters`), and TSE gets a clustered interval and p-value;
        a group (or the pooled ``all``) with fewer than 20 templates is one warning
        (:func:`~verbeval.agreement.scores.paired.comparison_cluster_warnings`). ``template_and_lemma`` also draws lemmas for
        EW and MW from both results' :attr:`form_stats` and :attr:`lemmas` (a result evaluated under
        another clustering has none: one-line :class:`~verbeval.core.errors.VerbevalError`)."""
        from verbeval.agreement.scores.paired import compare_groups, comparison_cluster_warnings
        from verbeval.agreement.steps import COMPARE
        from verbeval.core.bootstrap import warn_few_resamples
        from verbeval.core.errors import MismatchError

        if not isinstance(other, AgreementResult):
            raise VerbevalError(f"compare: expected an AgreementResult, got {type(other).__name__}")
        missing = sorted(set(self.row_tse) ^ set(other.row_tse))
        if missing:
            raise MismatchError(f"{self.model} and {other.model} were not evaluated on the same groups: {missing}")
        groups = list(self.row_tse)
        ids = None
        if all(g in r.row_ids for g in groups for r in (self, other)):
            ids = {g: tuple(r.row_ids[g][r.row_tse[g]["row"].to_numpy()] for r in (self, other)) for g in groups}
        resamples = COMPARE.default("resamples") if resamples is None else resamples
        confidence = COMPARE.default("confidence") if confidence is None else confidence
        cluster = args.one_of(
            "compare", "cluster", COMPARE.default("cluster") if cluster is None else cluster, CLUSTERINGS
        )
        warn_few_resamples(resamples, confidence, len(groups), "resamples")
        lemma_draw = cluster == "template_and_lemma"
        lacking = [r.model for r in (self, other) if any(g not in r.form_stats for g in groups)]
        if lemma_draw and lacking:
            raise VerbevalError(
                f"compare: cluster='template_and_lemma' draws lemmas from both results' form statistics, but "
                f"{lacking[0]!r} was not evaluated with cluster='template_and_lemma'"
            )
        if cluster != "context":
            known = {g: self.row_clusters[g] for g in groups if g in self.row_clusters}
            for why in comparison_cluster_warnings(known, cluster):
                log.warning(why)
        return compare_groups(
            self.model,
            other.model,
            {g: (self.row_tse[g], other.row_tse[g]) for g in groups},
            {g: (self.context_scores[g], other.context_scores[g]) for g in groups},
            resamples=resamples,
            seed=COMPARE.default("seed") if seed is None else seed,
            confidence=confidence,
            row_ids=ids,
            cluster=cluster,
            templates=self.row_clusters if cluster != "context" else None,
            forms={g: (self.form_stats[g], other.form_stats[g]) for g in groups} if lemma_draw else None,
            lemmas=(self.lemmas, other.lemmas) if lemma_draw else None,
        )

    def to_files(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``summary.csv`` (summary_all.csv's columns and number format), ``table2.csv`` (Table
        2's) and ``lemma_contexts.parquet`` into ``out_dir``, each atomically; returns their paths."""
        out = Path(out_dir)
        paths = {n: out / n for n in ("summary.csv", "table2.csv", "lemma_contexts.parquet")}
        write_csv(self.summary, paths["summary.csv"], float_format="%.10g")
        write_csv(self.table2, paths["table2.csv"], float_format="%.6f")
        meta = {"model": self.model, "random_init": self.random_init, "forms": forms_of(self.lemmas)}
        write_lemma_contexts(self.lemma_contexts, paths["lemma_contexts.parquet"], meta)
        return paths


def _kind(model: Any, kind: str | None) -> str:
    """``kind`` when given, else from the config's ``architectures`` or, for a model built in
    process (no ``architectures`` yet), from its class name."""
    from verbeval.core.models import detect_kind

    if kind is not None:
        if kind not in ("masked", "causal"):
            raise VerbevalError(f"unknown model kind {kind!r}; use masked or causal")
        return kind
    cfg = getattr(model, "config", None)
    archs = list(getattr(cfg, "architectures", None) or []) or [type(model).__name__]
    try:
        return detect_kind(SimpleNamespace(architectures=archs, model_type=getattr(cfg, "model_type", "?")))
    except VerbevalError:
        raise VerbevalError(
            f"cannot tell whether {type(model).__name__} (architectures {archs}) is a masked or a causal LM: "
            "pass kind='masked' or kind='causal' to evaluate"
        ) from None


def _group_shards(chunks: Sequence[Any], n_lemmas: int) -> GroupShards:
    """A group's computed chunks as :func:`verbeval.agreement.scores.aggregate.read_shards` reads their shards
    back: form statistics as stored (float32), TSE rows in shard order (by context, then row)."""
    ctx = pd.concat([c.contexts for c in chunks], ignore_index=True)
    rows = pd.concat([c.rows for c in chunks], ignore_index=True)
    tse_p = np.concatenate([c.result.tse_p for c in chunks])
    order = rows.sort_values(["context_id", "row"], kind="stable")
    shape = (len(ctx), n_lemmas, 2)

    def cat(attr: str) -> np.ndarray:
        return np.concatenate([getattr(c.result, attr) for c in chunks])

    stats = FormStats(cat("prob").reshape(shape), cat("cum_above").reshape(shape), cat("cum_below").reshape(shape))
    return GroupShards(
        chunks[0].meta,
        ctx["context_id"].to_numpy(dtype=np.int64),
        ctx["plural"].to_numpy(dtype=bool),
        stats,
        order["row"].to_numpy(dtype=np.int64),
        order["context_id"].to_numpy(dtype=np.int64),
        tse_p[order.index.to_numpy()] if len(order) else np.zeros((0, 2)),
        cat("topk_ids"),
        cat("topk_probs"),
        sum(int(c.meta.get("n_nonfinite") or 0) for c in chunks),
    )


def evaluate(
    model: Any,
    tokenizer: Any,
    suite: AgreementSuite | None = None,
    groups: Sequence[str] | None = None,
    max_rows: int | None = None,
    *,
    name: str = "model",
    batch_size: int | None = None,
    chunks: int = 1,
    device: str | None = None,
    kind: str | None = None,
    prepend_bos: bool | None = None,
    top_cutoffs: Sequence[float] | None = None,
    bottom_cutoffs: Sequence[float] | None = None,
    resamples: int | None = None,
    seed: int | None = None,
    confidence: float | None = None,
    cluster: str | None = None,
    random_init: bool = False,
    allow_nonfinite: bool = False,
    progress: bool = False,
) -> AgreementResult:
    """Score ``model`` (a masked or causal LM, e.g. ``AutoModelForCausalLM``) with ``tokenizer`` on
    ``suite`` (default: :meth:`AgreementSuite.from_sources`, from the repository's root).

    ``groups``: group ids to score (default: every group of the suite); ``max_rows``: at most that
    many rows per template source (:meth:`AgreementSuite.select`). ``name``: the model's name in
    the tables. ``batch_size``: contexts per forward pass (cut to the free memory, as ``infer``
    does; None: ``inference.batch_size``'s default, ``auto``: 512 on CUDA, 64 on CPU); ``chunks``: each group's contexts run in that many slices, as ``agreement.chunks`` cuts
    them into shards. A forward pass's last bits depend on the batch it is in, so the numbers equal a
    run's exactly when both settings are the run's (``inference.batch_size``, ``agreement.chunks``),
    and to float32 rounding otherwise. ``device``: where to run (default: where the model is;
    another device moves the model there and back). ``kind``: masked or causal (default: from the model). ``prepend_bos``, the
    cutoffs and the bootstrap settings (``cluster`` too): as ``inference.prepend_bos``, ``agreement.top_cutoffs``,
    ``agreement.bottom_cutoffs`` and ``agreement.bootstrap``: None takes the configuration's default
    (:data:`verbeval.agreement.steps.AGGREGATE`, read from the schema).
    ``random_init``: the model is randomly initialised or a toy (recorded, and marked in Table 2).
    The model is put in eval mode and its mode restored afterwards; no gradient is computed.
    """
    import torch

    from verbeval.agreement.data.eligibility import eligible_lemmas
    from verbeval.agreement.engine.inference import compute_chunk, model_context, prepare_group
    from verbeval.agreement.engine.lengths import check_context_lengths, position_limit
    from verbeval.agreement.engine.shards import capped_chunks
    from verbeval.core.model_state import borrowed
    from verbeval.core.models import LoadedModel, is_cased

    t0 = time.perf_counter()
    where = "evaluate"
    batch_size = None if batch_size is None else args.positive_int(where, "batch_size", batch_size)
    chunks = args.positive_int(where, "chunks", chunks)
    max_rows = args.positive_int(where, "max_rows", max_rows, optional=True)
    top_cutoffs, bottom_cutoffs, resamples, seed, confidence, cluster = (
        AGGREGATE.default(k) if v is None else v
        for k, v in (
            ("top_cutoffs", top_cutoffs),
            ("bottom_cutoffs", bottom_cutoffs),
            ("resamples", resamples),
            ("seed", seed),
            ("confidence", confidence),
            ("cluster", cluster),
        )
    )
    resamples = args.non_negative_int(where, "resamples", resamples)
    confidence = args.open_unit(where, "confidence", confidence)
    cluster = args.one_of(where, "cluster", cluster, CLUSTERINGS)
    groups = args.group_ids(where, "groups", groups)
    args.loaded_model(where, model)
    suite = (suite or AgreementSuite.from_sources()).select(groups, max_rows)
    kind_ = _kind(model, kind)
    if kind_ == "masked" and getattr(tokenizer, "mask_token", None) is None:
        raise VerbevalError(f"model {name!r} is masked but its tokenizer has no mask token")
    home = next(model.parameters()).device
    dev = torch.device(device) if device is not None else home
    tok_key = ("tokenizer", id(tokenizer), kind_)
    # the tokenizer itself is kept in the cache entry, so that its id is not reused while cached
    _, lemmas, cased = suite.prepared(
        tok_key, lambda: (tokenizer, eligible_lemmas(suite.lexicon, tokenizer), is_cased(tokenizer))
    )
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    lm = LoadedModel(name, model, tokenizer, kind_, cased, dev, dtype, "in-memory")  # type: ignore[arg-type]
    cfg = getattr(model, "config", None) or SimpleNamespace()
    suite.prepared(  # contexts longer than the model reads: one line naming the longest, before any forward pass
        (*tok_key, "lengths", prepend_bos, position_limit(cfg, tokenizer)),
        lambda: check_context_lengths(
            name, kind_, suite.templates, suite.group_ids, prepend_bos, tokenizer=tokenizer, config=cfg
        ),
    )
    mc = suite.prepared((*tok_key, "context", prepend_bos), lambda: model_context(lm, lemmas, 10, prepend_bos))
    parts, scores, tses, stats, ids, clusters = [], {}, {}, {}, {}, {}
    with borrowed(model, None if device is None else dev), torch.no_grad():
        for gid in suite.group_ids:
            work = suite.prepared((*tok_key, "group", gid), lambda gid=gid: prepare_group(lm, suite.templates, gid))
            n = capped_chunks(len(work.contexts), chunks)
            done = [
                compute_chunk(
                    lm, mc, work, k, n, batch_size=batch_size, progress=progress, allow_nonfinite=allow_nonfinite
                )
                for k in range(n)
            ]
            shards = _group_shards(done, len(lemmas))
            scores[gid] = context_scores(shards, top_cutoffs, bottom_cutoffs)
            tses[gid] = row_tse(shards, work.rows)
            if {"source", "line"} <= set(work.rows.columns):  # a suite of the user's may have no line numbers
                ids[gid] = template_row_ids(work.rows)
            clusters[gid] = row_clusters(work.rows)
            summary = summarise(
                scores[gid], tses[gid], model=name, group=gid, resamples=resamples, seed=seed, confidence=confidence,
                cluster=cluster, templates_group=work.rows, lemma_stats=(shards.stats, shards.plural),
            ).assign(random_init=bool(random_init))  # fmt: skip
            if shards.n_nonfinite:
                summary = summary.assign(n_nonfinite=shards.n_nonfinite)
            parts.append(with_interval_settings(summary, resamples, confidence))
            stats[gid] = (shards.stats, shards.plural)
    summary = pd.concat(parts, ignore_index=True)
    summary = summary.sort_values(["model", "group", "metric", "side", "cutoff"], kind="stable").reset_index(drop=True)
    return AgreementResult(
        model=name,
        groups=[{"id": g["id"], "name": g["name"]} for g in suite.groups],
        summary=summary,
        table2=table2(summary, suite.groups, [name]),
        lemma_contexts=lemma_contexts_from_stats(stats, lemmas),
        lemmas=lemmas,
        context_scores=scores,
        row_tse=tses,
        random_init=bool(random_init),
        seconds=time.perf_counter() - t0,
        row_ids=ids,
        row_clusters=clusters,
        form_stats=stats if cluster == "template_and_lemma" else {},
    )

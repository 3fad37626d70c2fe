"""The agreement steps of a model as functions of typed values: ``lemmas``, the agreement shards
(``infer``, and ``run-model``'s agreement branch), ``aggregate`` and ``lemma-stats``.

Each step takes one frozen record of its inputs, settings and outputs (:class:`LemmasRun`,
:class:`ShardRun` with a :class:`~verbeval.core.model_runs.ModelRun`, :class:`AggregateRun`,
:class:`LemmaStatsRun`) and the :class:`~verbeval.core.session.Session` it runs in (its warm caches
and prefetcher; a fresh one when none is given). The commands' handlers build the records from their
options; the warm queue (:mod:`verbeval.model_queue`) calls the same functions with the records its
command line parsed once. The records hold plain values (paths as text), so they pickle to a worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from verbeval.agreement.steps import (
    AGGREGATE,
    BOTTOM_CUTOFFS,
    FORMS_BATCH_SIZE,
    FRAGILE_ULPS,
    N_CHUNKS,
    TOP_CUTOFFS,
    TOP_K,
)
from verbeval.core.cliutil import check_outputs
from verbeval.core.model_runs import ModelRun
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.session import Session

log = logging.getLogger("verbeval")


@contextmanager
def in_session(session: Session | None) -> Iterator[Session]:
    """``session`` active (:meth:`Session.active`), or a fresh session for the block, closed after it."""
    if session is not None:
        with session.active():
            yield session
        return
    with Session() as own, own.active():
        yield own


# --------------------------------------------------------------------------- lemmas


@dataclass(frozen=True)
class LemmasRun:
    """``lemmas``: the eligible lemmas of ``source``'s tokenizer among ``lexicon``'s, to ``out``."""

    source: ModelSource
    lexicon: str
    out: str


def lemmas(run: LemmasRun, session: Session | None = None) -> None:
    """The lemmas of ``run`` whose both forms are single tokens of the model's tokenizer; a session's
    models that share their tokenizer files and lexicon file compute them once."""
    import pandas as pd

    from verbeval.agreement.data.eligibility import eligible_lemmas
    from verbeval.core.fasttok import load_text_tokenizer
    from verbeval.core.io import write_parquet
    from verbeval.core.warm import frame_key, memo, tokenizer_files_key

    check_outputs(run.out)

    def compute() -> tuple[pd.DataFrame, int]:
        tok = load_text_tokenizer(run.source)  # tokenizers alone where safe: no torch import
        lex = pd.read_parquet(run.lexicon)
        return eligible_lemmas(lex, tok), len(lex)

    with in_session(session):
        tok_key, lex_key = tokenizer_files_key(run.source), frame_key(run.lexicon)
        elig, n_lex = memo("lemmas", None if tok_key is None or lex_key is None else (tok_key, lex_key), compute)
    write_parquet(elig, run.out)
    log.info("%s: %d of %d lemmas eligible (both forms single tokens) -> %s", run.source.id, len(elig), n_lex, run.out)


# --------------------------------------------------------------------------- the agreement shards


@dataclass(frozen=True)
class ShardRun:
    """The agreement shards of a model: their inputs, settings and store (``manifest``)."""

    templates: str
    lemmas: str
    groups: tuple[str, ...]
    manifest: str
    n_chunks: int = field(default_factory=N_CHUNKS.default)
    top_k: int = field(default_factory=TOP_K.default)
    allow_nonfinite: bool = False
    progress: bool = True
    # the cutoffs each new chunk's contexts are scored at, beside its shard, for aggregate
    # (verbeval.agreement.scores.chunk_scores): the aggregate step's
    top_cutoffs: tuple[float, ...] = field(default_factory=lambda: tuple(TOP_CUTOFFS.default()))
    bottom_cutoffs: tuple[float, ...] = field(default_factory=lambda: tuple(BOTTOM_CUTOFFS.default()))
    # and each new chunk's EW decisions counted for the precision audit at its threshold
    fragile_ulps: float = field(default_factory=FRAGILE_ULPS.default)


def load_checked_lm(
    run: ModelRun, templates: Any, templates_path: str, groups: list[str] | tuple[str, ...], session: Session,
    extra: int = 0,
) -> tuple[Any, float]:  # fmt: skip
    """The model of ``run`` and its load time, once no context of ``groups`` is longer than it reads
    (:func:`verbeval.agreement.engine.lengths.check_context_lengths`): checked before the load from the
    tokenizer and config, or, for a GGUF file (which a tokenizer load would parse a second time), right
    after it and before any forward pass. The model is the session's (loaded ahead when announced)."""
    import torch

    from verbeval.agreement.engine.lengths import check_context_lengths, check_context_lengths_once

    source, groups = run.source, list(groups)
    with session.active():
        if not source.file:  # a sweep's revisions in one session share the check
            check_context_lengths_once(source, run.kind, templates, templates_path, groups, run.prepend_bos, extra)
    t = time.perf_counter()
    torch.set_num_threads(run.threads)
    lm = session.take(run.load_request())
    load_s = time.perf_counter() - t
    if source.file:  # the loaded model's kind: a GGUF config names no architecture
        check_context_lengths(
            source, lm.kind, templates, groups, run.prepend_bos, extra, tokenizer=lm.tokenizer, config=lm.model.config
        )
    return lm, load_s


def run_shards(
    lm: Any,
    run: ModelRun,
    shards: ShardRun,
    session: Session,
    load_s: float = 0.0,
    *,
    templates: Any = None,
    lemmas: Any = None,
    started: float | None = None,
) -> dict[str, Any]:
    """The agreement shards of the loaded model ``lm`` (``infer`` and ``run-model``'s agreement branch):
    :func:`~verbeval.agreement.engine.inference.infer_model`, then the log line. Its total is the whole
    command since ``started`` (``infer``: model load included), or else the load (``load_s``, shared by
    every branch of ``run-model``) plus this branch. ``templates`` and ``lemmas``: the tables when
    already read. Returns the manifest body."""

    from verbeval.agreement.engine.inference import infer_model
    from verbeval.agreement.scores.chunk_scores import ChunkScoring, score_written_chunk

    # each new chunk's scores and audit counts, beside its shard, on the writer thread
    scoring = ChunkScoring(shards.top_cutoffs, shards.bottom_cutoffs, shards.fragile_ulps)
    from verbeval.core.steps import batch_size_on
    from verbeval.core.warm import frame_key, read_parquet

    with session.active():
        templates = read_parquet(shards.templates) if templates is None else templates
        lemmas = read_parquet(shards.lemmas) if lemmas is None else lemmas
        body = infer_model(
            lm,
            templates,
            lemmas,
            list(shards.groups),
            shards.n_chunks,
            shards.manifest,
            batch_size=batch_size_on(run.batch_size, lm.device.type),
            top_k=shards.top_k,
            prepend_bos=run.prepend_bos,
            progress=shards.progress,
            random_init=run.is_random(),
            allow_nonfinite=shards.allow_nonfinite,
            templates_key=frame_key(shards.templates),
            after_write=partial(score_written_chunk, scoring=scoring),
        )
    t = body["timing"]
    if started is not None:  # total: the whole command, model load included
        total, note = time.perf_counter() - started, ""
    else:
        total, note = load_s + t["total_s"], " (load included)"
    log.info(
        "%s: %d shards -> %s; model load %.1f s, %d contexts computed in %.1f s (%.1f contexts/s), "
        "writer busy %.1f s, total %.1f s%s",
        run.name,
        len(body["shards"]),
        shards.manifest,
        load_s,
        t["contexts"],
        t["compute_s"],
        t["contexts_per_s"],
        t["writer_busy_s"],
        total,
        note,
    )
    return body


def kept_manifest(run: ModelRun, shards: ShardRun, session: Session) -> dict[str, Any] | None:
    """The manifest of ``shards``' store written without loading the model when the store already
    holds every shard (:func:`verbeval.agreement.engine.inference.manifest_if_complete`); else None."""
    from verbeval.agreement.engine.inference import manifest_if_complete
    from verbeval.core.warm import frame_key, read_parquet

    with session.active():
        return manifest_if_complete(
            run.source,
            read_parquet(shards.templates),
            read_parquet(shards.lemmas),
            list(shards.groups),
            shards.n_chunks,
            shards.manifest,
            kind=run.kind,
            dtype=run.dtype,
            device=run.device,
            device_map=run.device_map,
            top_k=shards.top_k,
            prepend_bos=run.prepend_bos,
            random_init=run.is_random(warn=False),  # warned by the caller when kept, else by the branch that runs
            allow_nonfinite=shards.allow_nonfinite,
            templates_key=frame_key(shards.templates),
        )


def infer(run: ModelRun, shards: ShardRun, session: Session | None = None) -> None:
    """``infer``: one model, every group and chunk of ``shards`` (the model loaded once)."""
    import pandas as pd

    check_outputs(shards.manifest)
    t0 = time.perf_counter()
    with in_session(session) as s:
        templates = pd.read_parquet(shards.templates)
        lemmas_ = pd.read_parquet(shards.lemmas)
        lm, load_s = load_checked_lm(run, templates, shards.templates, shards.groups, s)
        run_shards(lm, run, shards, s, load_s, templates=templates, lemmas=lemmas_, started=t0)


# --------------------------------------------------------------------------- after the shards


def verified_shards(
    manifest: str | Path, groups: list[str] | None = None, keep_bad: bool = False
) -> dict[str, list[Path]]:
    """``{group: [shard paths]}`` of a manifest, every shard checked against the size and sha256 it
    lists (:func:`verbeval.agreement.engine.shardstore.manifest_shards`). A damaged shard is moved
    aside and the manifest removed (unless ``keep_bad``), so that the next run recomputes it
    (:func:`verbeval.agreement.scores.aggregate.quarantine_bad_shard`); the error says so."""
    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.scores.aggregate import quarantine_bad_shard
    from verbeval.core.errors import ShardError

    try:
        return manifest_shards(manifest, groups)
    except ShardError as exc:
        raise quarantine_bad_shard(exc, keep_bad, str(manifest)) from None


def expand_shards(items: Sequence[str], keep_bad: bool = False) -> list[str]:
    """Shard paths from shard files and shard-store manifests (``manifest.json``: every shard it
    lists, each checked against the size and sha256 recorded there: :func:`verified_shards`)."""
    out: list[str] = []
    for item in items:
        if not item.endswith(".json"):
            out.append(item)
            continue
        out += [str(p) for paths in verified_shards(item, keep_bad=keep_bad).values() for p in paths]
    return out


@dataclass(frozen=True)
class AggregateRun:
    """``aggregate``: one model's per-context scores, per-row TSE and per-group summaries."""

    templates: str
    groups: tuple[str, ...]
    model_name: str
    manifest: str
    out_dir: str
    # the declared settings of the step (verbeval.agreement.steps.AGGREGATE), their defaults the schema's
    top_cutoffs: tuple[float, ...] = field(default_factory=lambda: tuple(AGGREGATE.default("top_cutoffs")))
    bottom_cutoffs: tuple[float, ...] = field(default_factory=lambda: tuple(AGGREGATE.default("bottom_cutoffs")))
    resamples: int = field(default_factory=lambda: AGGREGATE.default("resamples"))
    seed: int = field(default_factory=lambda: AGGREGATE.default("seed"))
    confidence: float = field(default_factory=lambda: AGGREGATE.default("confidence"))
    keep_bad_shards: bool = False
    cluster: str = field(default_factory=lambda: AGGREGATE.default("cluster"))


def aggregate(run: AggregateRun, session: Session | None = None) -> None:
    """Per group of ``run``: scores.parquet, tse.parquet and summary.csv under ``out_dir``/<group>.

    The per-context scores come from the score files the forward job wrote beside the shards
    (:mod:`verbeval.agreement.scores.chunk_scores`) when they are those of the manifest's shards at
    the run's cutoffs and pass its checks (a damaged one is set aside with a warning), else from the
    shards' form statistics (the same numbers); the bootstrap's counts of every group
    are drawn on threads meanwhile (:mod:`verbeval.core.count_draws`). ``template_and_lemma`` reads the
    form statistics in any case: its EW and MW at p = 1 are rescored per lemma draw."""
    import numpy as np
    import pandas as pd

    from verbeval.agreement.engine.shards import read_shard_meta
    from verbeval.agreement.engine.shardstore import listed_shards, manifest_random_init
    from verbeval.agreement.scores.aggregate import (
        context_scores,
        quarantine_bad_shard,
        read_shards,
        row_tse,
        summarise,
        with_interval_settings,
    )
    from verbeval.agreement.scores.chunk_scores import read_chunk_scores
    from verbeval.core import count_draws
    from verbeval.core.errors import ShardError, VerbevalError
    from verbeval.core.io import write_csv, write_parquet

    groups = list(run.groups)
    out = Path(run.out_dir)
    check_outputs(*[str(out / g / "summary.csv") for g in groups])
    by_group = verified_shards(run.manifest, groups, run.keep_bad_shards)
    listed = {str(s.path): s for s in listed_shards(run.manifest, groups)}
    # every group's resample counts (its contexts, its rows), drawn while the scores are read
    streams = []
    ranges: dict[str, tuple[int, int]] = {}  # each shard's contexts (its metadata's range)
    for group in groups:
        metas = [read_shard_meta(p) for p in by_group[group]]
        ranges.update(
            {str(p): (int(m["context_start"]), int(m["context_stop"])) for p, m in zip(by_group[group], metas)}
        )
        if metas and run.cluster == "context":  # clustered: the streams of the templates (small) instead
            n_rows = sum(int(m.get("n_rows") or 0) for m in metas)
            streams += [
                (int(metas[0]["n_group_contexts"]), run.resamples, run.seed, 100),
                (n_rows, run.resamples, run.seed, 100),
            ]
    count_draws.prefetch(streams)
    templates = pd.read_parquet(run.templates)
    random_init = manifest_random_init(run.manifest)
    top, bottom = list(run.top_cutoffs), list(run.bottom_cutoffs)
    for group in groups:
        paths = by_group[group]
        lemma_draw = run.cluster == "template_and_lemma"  # EW and MW at p = 1 rescored per lemma draw
        try:  # the contexts and rows (the form statistics too when the lemma draw needs them)
            shards = read_shards(paths, forms=lemma_draw)
        except ShardError as exc:
            raise quarantine_bad_shard(exc, run.keep_bad_shards, run.manifest) from None
        if shards.meta["group"] != group:
            raise VerbevalError(f"shards are for group {shards.meta['group']!r}, not {group!r}")
        # each score file checked against its shard's contexts as just read (read_shards: each shard's ids
        # are its metadata's range)
        in_chunk = [(shards.context_id >= ranges[str(p)][0]) & (shards.context_id < ranges[str(p)][1]) for p in paths]
        chunks = [
            read_chunk_scores(listed[str(p)], top, bottom, contexts=(shards.context_id[m], shards.plural[m]))
            for p, m in zip(paths, in_chunk)
        ]
        scored = all(c is not None for c in chunks)
        g = templates[templates["group"] == group].reset_index(drop=True)
        if scored:  # the chunks in context order (read_shards checked that they cover the group once)
            order = sorted(
                range(len(paths)), key=lambda i: int(chunks[i]["context_id"].iloc[0]) if len(chunks[i]) else -1
            )
            scores = pd.concat([chunks[i] for i in order], ignore_index=True)
            if not np.array_equal(scores["context_id"].to_numpy(), shards.context_id):
                scored = False
        if not scored:
            if shards.stats is None:
                shards = read_shards(paths)
            scores = context_scores(shards, top, bottom)
        tse = row_tse(shards, g)
        summary = summarise(
            scores, tse, model=run.model_name, group=group, resamples=run.resamples, seed=run.seed,
            confidence=run.confidence, cluster=run.cluster, templates_group=g,
            lemma_stats=(shards.stats, shards.plural) if lemma_draw and shards.stats is not None else None,
        ).assign(random_init=random_init)  # fmt: skip
        if shards.n_nonfinite:  # kept under --allow-nonfinite: Table 2 and metrics.json say so
            summary = summary.assign(n_nonfinite=shards.n_nonfinite)
        summary = with_interval_settings(summary, run.resamples, run.confidence)
        write_parquet(scores, out / group / "scores.parquet")
        write_parquet(tse, out / group / "tse.parquet")
        write_csv(summary, out / group / "summary.csv", float_format="%.10g")
        head = summary[summary["metric"] == "tse"].iloc[0]
        log.info(
            "%s / %s: %d contexts, %d rows, TSE %.4f (scores %s)",
            run.model_name,
            group,
            len(scores),
            len(tse),
            head["value"],
            "from the forward job" if scored else "from the shards",
        )


@dataclass(frozen=True)
class LemmaStatsRun:
    """``lemma-stats``: per-lemma accuracy of one model from its shards (or their manifest)."""

    lemmas: str
    shards: tuple[str, ...]
    model_name: str
    out: str


def lemma_stats(run: LemmaStatsRun, session: Session | None = None) -> None:
    """One CSV row per eligible lemma of ``run``, pooled over every context of every group."""
    import pandas as pd

    from verbeval.agreement.engine.shardstore import manifest_random_init
    from verbeval.agreement.scores.lemma_diagnostics import lemma_stats as stats_of
    from verbeval.core.io import write_csv

    lemmas_ = pd.read_parquet(run.lemmas)
    random_init = any(manifest_random_init(p) for p in run.shards if p.endswith(".json"))
    stats = stats_of(expand_shards(list(run.shards)), lemmas_, run.model_name).assign(random_init=random_init)
    write_csv(stats, run.out, float_format="%.10g")
    n = int(stats["n_contexts"].iloc[0]) if len(stats) else 0
    log.info(
        "%s: %d lemmas over %d contexts, mean accuracy %.4f -> %s",
        run.model_name,
        len(stats),
        n,
        stats["accuracy"].mean() if len(stats) else float("nan"),
        run.out,
    )


# --------------------------------------------------------------------------- the multi-token form shards


@dataclass(frozen=True)
class FormsRun:
    """The multi-token form shards of a model (``infer-forms``, ``run-model``'s form branch)."""

    templates: str
    forms: str
    groups: tuple[str, ...]
    manifest: str
    n_chunks: int = field(default_factory=N_CHUNKS.default)
    batch_size: int = field(default_factory=FORMS_BATCH_SIZE.default)
    allow_nonfinite: bool = False
    progress: bool = True


def forms_extra_tokens(forms: Any) -> int:
    """Tokens the longest multi-token form adds to a context beyond its first (forms.parquet)."""
    return (int(forms[["n_sing", "n_plur"]].to_numpy().max()) if len(forms) else 1) - 1


def run_forms(lm: Any, run: ModelRun, forms_run: FormsRun, templates: Any = None, forms: Any = None) -> None:
    """The form shards of the loaded model ``lm`` into ``forms_run``'s store, logged (``templates``,
    ``forms``: the tables when already read)."""
    import pandas as pd

    from verbeval.agreement.lexicon_modes.form_shards import infer_forms_model

    templates = pd.read_parquet(forms_run.templates) if templates is None else templates
    forms = pd.read_parquet(forms_run.forms) if forms is None else forms
    body = infer_forms_model(
        lm,
        templates,
        forms,
        list(forms_run.groups),
        forms_run.n_chunks,
        forms_run.manifest,
        batch_size=forms_run.batch_size,
        prepend_bos=run.prepend_bos,
        progress=forms_run.progress,
        allow_nonfinite=forms_run.allow_nonfinite,
    )
    t = body["timing"]
    log.info(
        "%s: %d form shards -> %s; %d contexts computed in %.1f s (%.2f contexts/s)",
        run.name,
        len(body["shards"]),
        forms_run.manifest,
        t["contexts"],
        t["compute_s"],
        t["contexts_per_s"],
    )


def infer_forms(run: ModelRun, forms_run: FormsRun, session: Session | None = None) -> None:
    """``infer-forms``: one model's form shards (the model loaded once)."""
    import pandas as pd

    check_outputs(forms_run.manifest)
    with in_session(session) as s:
        templates, forms = pd.read_parquet(forms_run.templates), pd.read_parquet(forms_run.forms)
        lm, _ = load_checked_lm(run, templates, forms_run.templates, forms_run.groups, s, forms_extra_tokens(forms))
        run_forms(lm, run, forms_run, templates, forms)

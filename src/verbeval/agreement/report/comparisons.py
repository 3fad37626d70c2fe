"""Paired comparisons of a run's models from their aggregates (``verbeval compare``): ``comparisons.csv``
(:data:`verbeval.agreement.scores.paired.COMPARISON_COLUMNS` after ``kind``, one row per pair, group and
metric) and, for a sweep's consecutive revisions, the first checkpoint that beats its predecessor
significantly per group and metric (``first_gains.csv``).

The report's page of ``comparisons.csv`` (``verbeval report-table``) reads a row that is not
significant but had the power with :func:`power_note`.

A pair's ``kind``: ``configured`` (``agreement.comparisons.pairs``), ``against_first`` (a model against
the first of Table 2) or ``consecutive`` (a sweep's revision against the one before it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from verbeval.agreement.scores.item_clusters import ITEM_COLUMNS, row_clusters
from verbeval.agreement.scores.metrics import FormStats
from verbeval.agreement.scores.paired import (
    COMPARISON_COLUMNS,
    compare_groups,
    comparison_cluster_warnings,
    template_row_ids,
)
from verbeval.agreement.steps import BOOTSTRAP
from verbeval.core.bootstrap import warn_few_resamples
from verbeval.core.errors import InputError, MismatchError, VerbevalError

log = logging.getLogger(__name__)

#: the kinds of pair, in the order their rows are written
PAIR_KINDS = ("configured", "against_first", "consecutive")
FIRST_GAIN_COLUMNS = (
    "sweep",
    "random_init",
    "group",
    "metric",
    "first_gain",
    "difference",
    "p_adjusted",
    "ci_low",
    "ci_high",
)


def read_results(
    model_dir: str | Path, groups: Sequence[str], full_tse: bool = False
) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """One model's per-row TSE and per-context scores of each group (``<model_dir>/<group>/tse.parquet``
    and ``scores.parquet``, written by ``verbeval aggregate``); ``full_tse``: with the probabilities."""
    tse, scores = {}, {}
    for g in groups:
        for name, into, columns in (
            ("tse.parquet", tse, None if full_tse else ["row", "context_id", "tse"]),
            ("scores.parquet", scores, None),
        ):
            path = Path(model_dir) / g / name
            try:
                into[g] = pd.read_parquet(path, columns=columns)
            except (OSError, ValueError) as e:
                raise InputError(
                    path, f"not readable ({str(e).splitlines()[0]}): run `verbeval aggregate` first"
                ) from None
    return tse, scores


def row_templates(templates: str | Path) -> dict[str, pd.DataFrame]:
    """Per group of the run's ``templates.parquet``, each template row's template, verb and lexical items
    (:func:`verbeval.agreement.scores.item_clusters.row_clusters`; in order: ``tse.parquet``'s ``row``
    indexes them): the clusters of ``agreement.bootstrap.cluster``."""
    try:
        items = [c for c in ITEM_COLUMNS.values() if c in pq.read_schema(templates).names]
        table = pd.read_parquet(templates, columns=["group", "source", "correct", "incorrect", *items])
    except (OSError, ValueError) as e:
        raise InputError(templates, f"not readable ({str(e).splitlines()[0]})") from None
    return {str(g): row_clusters(t) for g, t in table.groupby("group", sort=False)}


def group_row_ids(templates: str | Path) -> dict[str, np.ndarray]:
    """Per group of the run's ``templates.parquet``, the identity (``source:line``,
    :func:`verbeval.agreement.scores.paired.template_row_ids`) of each of its template rows, in order."""
    try:
        table = pd.read_parquet(templates, columns=["group", "source", "line"])
    except (OSError, ValueError) as e:
        raise InputError(templates, f"not readable ({str(e).splitlines()[0]})") from None
    return {str(g): template_row_ids(t.reset_index(drop=True)) for g, t in table.groupby("group", sort=False)}


def row_identities(
    templates: str | Path,
    row_tse: Mapping[str, pd.DataFrame],
    model: str,
    known: dict[str, dict[str, np.ndarray]] | None = None,
) -> dict[str, list[object]]:
    """Per group, the identity (``source:line``, :func:`verbeval.agreement.scores.paired.template_row_ids`)
    of each row of ``model``'s per-row TSE, from the run's ``templates.parquet`` (its ``row`` indexes the
    group's template rows). ``known``: :func:`group_row_ids` by templates path, filled as files are read
    (a sweep's revisions share one run's templates: read once)."""
    known = {} if known is None else known
    if str(templates) not in known:
        known[str(templates)] = group_row_ids(templates)
    by_group = known[str(templates)]
    out = {}
    for g, t in row_tse.items():
        ids = by_group.get(str(g), np.array([], dtype=object))
        rows = t["row"].to_numpy()
        if len(rows) and (rows.min() < 0 or rows.max() >= len(ids)):
            raise MismatchError(
                f"group {g!r}: {model}'s tse.parquet has row {int(rows.max())} but {templates} has {len(ids)} "
                "rows of the group: not the templates of its run"
            )
        out[g] = list(ids[rows])
    return out


def read_forms(
    manifest: str | Path, lemmas_path: str | Path, scores: Mapping[str, pd.DataFrame], model: str
) -> tuple[dict[str, tuple[FormStats, np.ndarray]], pd.DataFrame]:
    """One model's form statistics and ``plural`` flags of each group of ``scores`` (its scores.parquet
    frames), from the shards of ``manifest`` as ``verbeval aggregate`` reads them (every shard checked
    against the manifest; a damaged one is left in place, the error says to rerun the model's inference),
    and its lemmas (``lemmas_path``, checked to be the shards' lemma set): what ``template_and_lemma``
    rescores EW and MW at p = 1 with."""
    from verbeval.agreement.engine.shards import check_lemma_set
    from verbeval.agreement.runs import verified_shards
    from verbeval.agreement.scores.aggregate import quarantine_bad_shard, read_shards
    from verbeval.core.errors import ShardError

    check_lemma_set(manifest, lemmas_path)
    lemmas = pd.read_parquet(lemmas_path, columns=["sing", "plur"])
    by_group = verified_shards(manifest, list(scores), keep_bad=True)
    out = {}
    for g, frame in scores.items():
        try:
            shards = read_shards(by_group[g], forms=True)
        except ShardError as exc:
            raise quarantine_bad_shard(exc, keep=True) from None
        if shards.stats is None or not np.array_equal(frame["context_id"].to_numpy(), shards.context_id):
            raise MismatchError(
                f"group {g!r}: the shards of {manifest} hold other contexts than {model}'s scores.parquet: "
                "not the shards it was aggregated from"
            )
        out[g] = (shards.stats, shards.plural)
    return out, lemmas


def read_random_init(model_dir: str | Path, groups: Sequence[str]) -> bool:
    """Whether the model of an aggregate folder is randomly initialised: the ``random_init`` column of
    its groups' ``summary.csv`` (``verbeval aggregate`` copies it from the shards' metadata)."""
    for g in groups:
        path = Path(model_dir) / g / "summary.csv"
        try:
            flags = pd.read_csv(path, usecols=["random_init"])["random_init"]
        except (OSError, ValueError) as e:
            raise InputError(path, f"not readable ({str(e).splitlines()[0]}): run `verbeval aggregate` first") from None
        if flags.astype(str).str.lower().eq("true").any():
            return True
    return False


def comparisons(
    pairs: Sequence[tuple[str, str, str]],
    model_dirs: Mapping[str, str | Path],
    groups: Sequence[str],
    *,
    resamples: int,
    seed: int,
    confidence: float,
    random: Sequence[str] = (),
    templates: Mapping[str, str | Path] | None = None,
    cluster: str = "context",
    forms: Mapping[str, tuple[str | Path, str | Path]] | None = None,
) -> pd.DataFrame:
    """The rows of every ``(kind, model_a, model_b)`` pair, in order (``kind`` first), each side's
    ``random_init`` flag beside it (``random``: the randomly initialised models). ``templates``: each
    model's ``templates.parquet``, whose rows' identities pair the two models' rows
    (:func:`row_identities`); a model without one is paired by row number. Too few resamples for
    the intervals corrected across the groups are one warning
    (:func:`verbeval.core.bootstrap.warn_few_resamples`). ``cluster``: ``agreement.bootstrap.cluster``
    (not ``context``: EW and MW resample ``model_a``'s templates, from its ``templates``; a group, or the
    pooled ``all``, with fewer than 20 is one warning: :func:`comparison_cluster_warnings`). ``forms``: each model's shard manifest and lemmas.parquet, which
    ``template_and_lemma`` reads (:func:`read_forms`) to draw lemmas for EW and MW, and needs for every
    model of a pair; the other clusterings do not read them."""
    cache: dict[str, tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]] = {}
    lemma_forms: dict[str, tuple[dict[str, tuple[FormStats, np.ndarray]], pd.DataFrame]] = {}
    ids: dict[str, dict[str, list[object]]] = {}
    row_ids: dict[str, dict[str, np.ndarray]] = {}  # each templates file's row identities, read once
    frames = []
    sources: dict[str, dict[str, pd.DataFrame]] = {}
    if pairs:
        warn_few_resamples(resamples, confidence, len(groups), BOOTSTRAP[0].key)  # the groups' Bonferroni intervals
    if pairs and cluster != "context":
        lacking = sorted({a for _, a, _ in pairs} - set(templates or {}))
        if lacking:
            raise VerbevalError(
                f"model {lacking[0]!r}: agreement.bootstrap.cluster {cluster} needs the templates.parquet of its run "
                "(--templates)"
            )
        for path in dict.fromkeys(str(templates[a]) for _, a, _ in pairs):  # type: ignore[index]
            sources[path] = row_templates(path)
        first = sources[str(templates[pairs[0][1]])]  # type: ignore[index]
        empty = pd.DataFrame({c: [] for c in next(iter(first.values()), pd.DataFrame({"template": []})).columns})
        for why in comparison_cluster_warnings({g: first.get(g, empty) for g in groups}, cluster):
            log.warning(why)
    if pairs and cluster == "template_and_lemma":
        lacking = [m for m in dict.fromkeys(m for _, a, b in pairs for m in (a, b)) if m not in (forms or {})]
        if lacking:
            raise VerbevalError(
                f"model {lacking[0]!r}: agreement.bootstrap.cluster template_and_lemma needs its shard manifest "
                "and lemmas.parquet (--shards, --lemmas)"
            )
    for kind, a, b in pairs:
        for m in (a, b):
            if m not in cache:
                cache[m] = read_results(model_dirs[m], groups)
                if templates and m in templates:
                    ids[m] = row_identities(templates[m], cache[m][0], m, row_ids)
                if cluster == "template_and_lemma":
                    lemma_forms[m] = read_forms(*forms[m], cache[m][1], m)  # type: ignore[index]
        rows = compare_groups(
            a,
            b,
            {g: (cache[a][0][g], cache[b][0][g]) for g in groups},
            {g: (cache[a][1][g], cache[b][1][g]) for g in groups},
            resamples=resamples,
            seed=seed,
            confidence=confidence,
            row_ids={g: (ids[a][g], ids[b][g]) for g in groups} if a in ids and b in ids else None,
            cluster=cluster,
            templates=sources[str(templates[a])] if cluster != "context" else None,  # type: ignore[index]
            forms={g: (lemma_forms[a][0][g], lemma_forms[b][0][g]) for g in groups} if lemma_forms else None,
            lemmas=(lemma_forms[a][1], lemma_forms[b][1]) if lemma_forms else None,
        )
        frames.append(with_flags(rows, kind, random))
    if not frames:
        return pd.DataFrame(columns=["kind", *COMPARISON_COLUMNS[:2], *RANDOM_COLUMNS, *COMPARISON_COLUMNS[2:]])
    return pd.concat(frames, ignore_index=True)


#: each side's random_init flag, after model_a and model_b
RANDOM_COLUMNS = ("random_init_a", "random_init_b")


def with_flags(rows: pd.DataFrame, kind: str, random: Sequence[str]) -> pd.DataFrame:
    """``rows`` (:func:`verbeval.agreement.scores.paired.compare_groups`) with ``kind`` first and each
    side's ``random_init`` flag after the model names."""
    rows = rows.copy()
    rows.insert(0, "kind", kind)
    for i, side in enumerate(("a", "b")):
        rows.insert(3 + i, f"random_init_{side}", rows[f"model_{side}"].isin(list(random)))
    return rows


def power_note(mdd: str) -> str:
    """What a comparison row that is not significant (and whose interval does not exclude 0) says when
    its minimum detectable difference (``mdd``, as the page writes numbers) is known: no difference of
    that size was missed."""
    return f"not significant, and a difference of {mdd} or more would have been detected"


def first_gains(rows: pd.DataFrame) -> pd.DataFrame:
    """Per sweep (named by its first revision: ``model_a`` of its first consecutive pair), group and metric, the
    first revision whose difference from its predecessor is significant and positive (empty
    ``first_gain`` when none is)."""
    c = rows[rows["kind"] == "consecutive"]
    records = []
    if c.empty:
        return pd.DataFrame(columns=list(FIRST_GAIN_COLUMNS))
    # a sweep is a chain of pairs: a pair starts a new chain when its model_a is no earlier pair's model_b
    chain_of: dict[str, str] = {}
    for a, b in dict.fromkeys(zip(c["model_a"], c["model_b"])):
        chain_of[b] = chain_of.get(a, a)
    c = c.assign(sweep=[chain_of[b] for b in c["model_b"]])
    for (sweep, group, metric), d in c.groupby(["sweep", "group", "metric"], sort=False):
        gained = d["significant"].eq(True).fillna(False).to_numpy(bool)  # an empty verdict is no gain
        hit = d[gained & (d["difference"] > 0).to_numpy()]
        first = hit.iloc[0] if len(hit) else None
        records.append(
            {
                "sweep": sweep,
                "random_init": bool(d["random_init_b"].any()) if "random_init_b" in d else False,
                "group": group,
                "metric": metric,
                "first_gain": "" if first is None else first["model_b"],
                "difference": float("nan") if first is None else first["difference"],
                "p_adjusted": float("nan") if first is None else first["p_adjusted"],
                "ci_low": float("nan") if first is None else first["ci_low"],
                "ci_high": float("nan") if first is None else first["ci_high"],
            }
        )
    return pd.DataFrame.from_records(records, columns=list(FIRST_GAIN_COLUMNS))

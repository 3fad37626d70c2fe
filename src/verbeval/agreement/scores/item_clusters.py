"""What a clustered bootstrap draws (``agreement.bootstrap.cluster``; docs/metrics.md, "Clustered
intervals"): the one place where a clustering's name becomes each template row's cluster ids, for the
per-model intervals (:func:`verbeval.agreement.scores.aggregate.summary_clusters`) and the paired
comparisons (:func:`verbeval.agreement.scores.paired.compare_groups`).

A clustering crosses one or two *dimensions* of :func:`row_clusters`' columns (:data:`DIMENSIONS`); a
resample draws each dimension's clusters with its own count stream
(:func:`verbeval.core.bootstrap.stream_seed` of the dimension's position), and a TSE row weighs the
product of its clusters' counts. A context (EW, MW, counted masses) weighs the mean of its rows' counts
in the clustering's *context dimension* (:func:`context_dimension`): the template or the subject, which
every row of a context shares; the verb is not part of a context (EW and MW score every eligible lemma
there, whatever the row's verb), so under ``verb`` the contexts are drawn one by one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from verbeval.core.bootstrap import CLUSTERINGS, Clusters, few_clusters, too_few_clusters
from verbeval.core.errors import MismatchError, VerbevalError

#: each clustering's dimensions, in the order of their count streams (the first: Durkalski's clusters)
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "context": (),
    "template": ("template",),
    "template_and_lemma": ("template", "verb"),
    "subject": ("subject",),
    "verb": ("verb_item",),
    "subject_and_verb": ("subject", "verb_item"),
}
#: what a warning calls one cluster of each dimension
NAMES = {"template": "template", "verb": "verb", "subject": "subject", "verb_item": "verb"}
#: the ``templates.parquet`` columns of the lexical items (:mod:`verbeval.agreement.data.items`)
ITEM_COLUMNS = {"subject": "subject_item", "verb_item": "verb_item"}
#: the suffix of the column of a compared row's cluster in a dimension (``template_cluster``, ...)
SUFFIX = "_cluster"


def cluster_dimensions(cluster: str) -> list[str]:
    """The :func:`row_clusters` columns a TSE row's resamples cross under ``agreement.bootstrap.cluster``
    ``cluster`` (:data:`DIMENSIONS`); another name is a :class:`VerbevalError`."""
    if cluster not in CLUSTERINGS or cluster not in DIMENSIONS:
        raise VerbevalError(f"agreement.bootstrap.cluster: unknown clustering {cluster!r}")
    return list(DIMENSIONS[cluster])


def context_dimension(cluster: str) -> str | None:
    """The dimension a context's weight is drawn by under ``cluster`` (the template or the subject, shared
    by every row of a context), or None: the contexts one by one (``context``, and ``verb``)."""
    return next((d for d in cluster_dimensions(cluster) if d in ("template", "subject")), None)


def names(dims: list[str]) -> list[str]:
    """What the warnings call the clusters of ``dims``."""
    return [NAMES[d] for d in dims]


def row_clusters(templates_group: pd.DataFrame) -> pd.DataFrame:
    """Per template row of a group (``templates.parquet``'s rows of the group, in order: ``tse.parquet``'s
    ``row`` indexes them), its clusters: ``template`` (its ``source``: a template file, a BLiMP paradigm, a
    custom pair file), ``verb`` (its verb pair, ``laugh/laughs``: the two forms sorted) and, when the table
    has the item columns, ``subject`` (its ``subject_item``; a row without one: its template, as
    ``<group>\\t<source>``) and ``verb_item`` (its ``verb_item``; without one: its verb pair)."""
    source = templates_group["source"].astype(str).to_numpy()
    pairs = zip(templates_group["correct"].astype(str), templates_group["incorrect"].astype(str))
    out = pd.DataFrame({"template": source, "verb": ["/".join(sorted(p)) for p in pairs]})
    if ITEM_COLUMNS["subject"] in templates_group:
        groups = templates_group["group"].astype(str) if "group" in templates_group else [""] * len(out)
        subjects = templates_group[ITEM_COLUMNS["subject"]].fillna("").astype(str)
        out["subject"] = [s or f"{g}\t{t}" for s, g, t in zip(subjects, groups, source)]
    if ITEM_COLUMNS["verb_item"] in templates_group:
        verbs = templates_group[ITEM_COLUMNS["verb_item"]].fillna("").astype(str)
        out["verb_item"] = [v or pair for v, pair in zip(verbs, out["verb"])]
    return out


def cluster_labels(table: pd.DataFrame, cluster: str, group: str) -> list[np.ndarray]:
    """Each template row's cluster id in each of ``cluster``'s dimensions (``table``: :func:`row_clusters`
    of the group's rows, or a frame with their ``template`` alone): a template is ``<group>\\t<source>``
    (so that the pooled group ``all`` draws (group, template)); a verb, a subject and a verb item are the
    same cluster in every group. A dimension ``table`` lacks is a :class:`MismatchError`."""
    out = []
    for d in cluster_dimensions(cluster):
        if d not in table:
            hint = " (a templates.parquet written before verbeval recovered them: rerun `verbeval templates`)"
            raise MismatchError(
                f"group {group!r}: agreement.bootstrap.cluster {cluster} needs the rows' {NAMES[d]}s"
                + (hint if d in ITEM_COLUMNS else "")
            )
        labels = table[d].to_numpy(dtype=object)
        out.append(np.array([f"{group}\t{t}" for t in labels], dtype=object) if d == "template" else labels)
    return out


def with_row_clusters(rows: pd.DataFrame, table: pd.DataFrame, cluster: str, group: str) -> pd.DataFrame:
    """``rows`` (a model's per-row TSE, ``row`` indexing ``table``) with a ``<dimension>_cluster`` column
    per dimension of ``cluster`` (:func:`cluster_labels`), in the dimensions' order."""
    index = rows["row"].to_numpy()
    labels = cluster_labels(table, cluster, group)
    return rows.assign(**{d + SUFFIX: lab[index] for d, lab in zip(cluster_dimensions(cluster), labels)})


def cluster_columns(rows: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The ``<dimension>_cluster`` columns of compared rows (:func:`with_row_clusters`), in their
    dimensions' order, and what the warnings call their clusters; ``([], [])`` when not clustered."""
    dims = [c.removesuffix(SUFFIX) for c in rows.columns if c.endswith(SUFFIX) and c.removesuffix(SUFFIX) in NAMES]
    return [d + SUFFIX for d in dims], names(dims)


def context_labels(rows: pd.DataFrame) -> np.ndarray | None:
    """The clusters compared rows' contexts are drawn by (the context dimension's column of
    :func:`with_row_clusters`), or None: their contexts one by one."""
    column = next((d + SUFFIX for d in ("template", "subject") if d + SUFFIX in rows), None)
    return None if column is None else rows[column].to_numpy()


def too_few_group_clusters(group: str, clusters: pd.DataFrame, cluster: str) -> str | None:
    """The warning line of a comparison's group whose rows (``clusters``: :func:`row_clusters`) have too
    few clusters under ``cluster`` (not ``context``) in the dimensions a comparison draws, or None: the
    context dimension (:func:`context_dimension`; fewer than 2: every interval is NaN) and the first
    dimension (Durkalski's clusters for the TSE row; fewer than 2: its test is not defined); 2 to 19 in the
    first dimension, the few-clusters line. A dimension ``clusters`` lacks is left to
    :func:`cluster_labels`' error."""
    dims = [d for d in cluster_dimensions(cluster) if d in clusters]
    if not dims:
        return None
    first, context = dims[0], context_dimension(cluster)
    if context in dims:
        what = "its intervals are NaN" + (" and its TSE test is not defined" if context == first else "")
        why = too_few_clusters(group, Clusters.of(clusters[context]), [NAMES[context]], what)
        if why is not None:
            return why
    if first != context:
        why = too_few_clusters(
            group, Clusters.of(clusters[first]), [NAMES[first]], "its TSE comparison's test is not defined"
        )
        if why is not None:
            return why
    return few_clusters(group, Clusters.of(clusters[first]), [NAMES[first]])

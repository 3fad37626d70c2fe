"""The per-checkpoint lemma-contexts table: for each (group, lemma), in which of the group's contexts
the lemma's correct form beats its incorrect one (what the acquisition analysis reads per checkpoint).

One row per (group, lemma), sorted by group then lemma (``lemma_contexts.parquet``):

* ``group``, ``lemma``: the agreement group and the eligible lemma (``lemmas.parquet``'s ``lemma``);
* ``n_contexts`` (int32): the group's valid contexts (those whose form statistics are all finite;
  a context kept under ``inference.allow_nonfinite`` is left out, as EW leaves it out);
* ``n_correct`` (int32): of them, contexts where P(correct form | c) > P(incorrect form | c), strictly
  (the EW indicator at top p = 1; a tie is a failure, as in :mod:`verbeval.agreement.scores.lemma_diagnostics`);
* ``correct_bits`` (binary): ``np.packbits(correct, bitorder="little").tobytes()`` of the per-context
  indicator (length ``n_contexts``, in the group's fixed context order: the order of the shards).

Every lemma is scored in every context of a group (EW), so a group's rows share one context order
and ``n_contexts``. The Parquet metadata key ``verbeval`` (JSON) carries provenance: ``model``,
``random_init`` and ``forms`` (``{lemma: [singular, plural]}``, when the lemmas file was given).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval.agreement.scores.metrics import finite_contexts
from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.io import atomic_path

COLUMNS = ("group", "lemma", "n_contexts", "n_correct", "correct_bits")
META_KEY = b"verbeval"

SCHEMA = pa.schema(
    [
        ("group", pa.string()),
        ("lemma", pa.string()),
        ("n_contexts", pa.int32()),
        ("n_correct", pa.int32()),
        ("correct_bits", pa.binary()),
    ]
)


def pack_bits(correct: np.ndarray) -> bytes:
    """The ``correct_bits`` of a boolean vector."""
    return np.packbits(np.asarray(correct, dtype=bool), bitorder="little").tobytes()


def unpack_bits(bits: bytes, n: int) -> np.ndarray:
    """The boolean vector of length ``n`` that ``bits`` (:func:`pack_bits`) holds."""
    return np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=n, bitorder="little").astype(bool)


def group_correct(prob: np.ndarray, plural: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """``[N_valid, L]`` booleans: P(correct) > P(incorrect) for each valid context and lemma, from
    ``prob`` ``[N, L, 2]`` (singular, plural form) and the contexts' labels ``plural`` ``[N]``;
    ``valid`` (default: contexts whose probabilities are all finite) selects the contexts."""
    p = np.asarray(prob, dtype=np.float64)
    pl = np.asarray(plural, dtype=bool)
    if p.ndim != 3 or p.shape[2] != 2 or pl.shape != (p.shape[0],):
        raise ValueError(f"prob must be [N, L, 2] and plural [N], got {p.shape} and {pl.shape}")
    if valid is None:
        valid = np.isfinite(p).reshape(p.shape[0], -1).all(axis=1)
    p, pl = p[valid], pl[valid]
    right = np.where(pl[:, None], p[:, :, 1], p[:, :, 0])
    wrong = np.where(pl[:, None], p[:, :, 0], p[:, :, 1])
    return right > wrong


def _lemma_names(lemmas: Sequence[str] | pd.DataFrame) -> list[str]:
    if isinstance(lemmas, pd.DataFrame):
        return [str(x) for x in lemmas["lemma"]]
    return [str(x) for x in lemmas]


def lemma_contexts_from_stats(
    groups: Mapping[str, tuple[Any, np.ndarray]], lemmas: Sequence[str] | pd.DataFrame
) -> pd.DataFrame:
    """The lemma-contexts table from in-memory per-context probabilities.

    ``groups``: ``{group: (prob, plural)}`` with ``prob`` the ``[N, L, 2]`` form probabilities (or a
    :class:`~verbeval.agreement.scores.metrics.FormStats`, whose ``prob`` is used and whose non-finite
    contexts are left out as in aggregation) and ``plural`` the ``[N]`` labels, contexts in the
    group's fixed order; ``lemmas``: the ``L`` lemma names (or ``lemmas.parquet``'s frame), in the
    order of the probability arrays.
    """
    names = _lemma_names(lemmas)
    if len(set(names)) != len(names):
        raise VerbevalError("lemmas: a lemma is listed twice")
    records: list[dict[str, Any]] = []
    for group in sorted(groups):
        stats, plural = groups[group]
        valid = None
        if hasattr(stats, "prob"):
            valid = finite_contexts(stats)
            stats = stats.prob
        prob = np.asarray(stats)
        if prob.ndim != 3 or prob.shape[1] != len(names):
            raise VerbevalError(f"group {group!r}: probabilities of shape {prob.shape} do not hold {len(names)} lemmas")
        correct = group_correct(prob, plural, valid)
        n_ctx = correct.shape[0]
        for j, lemma in enumerate(names):
            col = correct[:, j]
            records.append(
                {
                    "group": str(group),
                    "lemma": lemma,
                    "n_contexts": n_ctx,
                    "n_correct": int(col.sum()),
                    "correct_bits": pack_bits(col),
                }
            )
    return sort_lemma_contexts(pd.DataFrame.from_records(records, columns=list(COLUMNS)))


def sort_lemma_contexts(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the contract's columns, types and row order (group, then lemma)."""
    out = df[list(COLUMNS)].sort_values(["group", "lemma"], kind="stable").reset_index(drop=True)
    out = out.astype({"group": str, "lemma": str, "n_contexts": np.int32, "n_correct": np.int32})
    out.attrs = dict(df.attrs)
    return out


def lemma_contexts_from_shards(shards: Sequence[str | Path], lemmas: pd.DataFrame) -> pd.DataFrame:
    """The lemma-contexts table of one model from its shards (any groups; every chunk of each),
    read and validated by :func:`verbeval.agreement.scores.aggregate.read_shards`; every shard must have
    been made with ``lemmas`` (same lemma set)."""
    from verbeval.agreement.engine.shards import check_shard_lemmas, lemma_set_hash, read_shard_meta
    from verbeval.agreement.scores.aggregate import read_shards

    if not shards:
        raise VerbevalError("no shards given")
    lemma_hash = lemma_set_hash(lemmas)
    by_group: dict[str, list[str | Path]] = {}
    ref: dict[str, Any] | None = None
    for path in shards:
        meta = read_shard_meta(path)
        check_shard_lemmas(path, meta, lemmas, lemma_hash, ref)
        ref = ref or meta
        by_group.setdefault(str(meta.get("group")), []).append(path)
    stats = {}
    for group, paths in by_group.items():
        gs = read_shards(paths)
        stats[group] = (gs.stats, gs.plural)
    return lemma_contexts_from_stats(stats, lemmas)


def forms_of(lemmas: pd.DataFrame) -> dict[str, list[str]]:
    """``{lemma: [singular, plural]}`` of a ``lemmas.parquet`` frame (provenance of the table)."""
    return {str(r.lemma): [str(r.sing), str(r.plur)] for r in lemmas[["lemma", "sing", "plur"]].itertuples()}


def write_lemma_contexts(df: pd.DataFrame, path: str | Path, meta: Mapping[str, Any] | None = None) -> None:
    """Write the table atomically (rows sorted, the contract's types); ``meta`` (and ``df.attrs``'
    ``verbeval`` entry) go into the Parquet metadata key ``verbeval``."""
    out = sort_lemma_contexts(df)
    info = {**dict(df.attrs.get("verbeval", {})), **dict(meta or {})}
    table = pa.Table.from_pandas(out, schema=SCHEMA, preserve_index=False)
    table = table.replace_schema_metadata({META_KEY: json.dumps(info, sort_keys=True).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_lemma_contexts(path: str | Path) -> pd.DataFrame:
    """Read and validate a lemma-contexts table; its ``verbeval`` metadata lands in
    ``df.attrs["verbeval"]``. Bad input is an :class:`InputError` naming the file and cause."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "no such lemma-contexts file")
    try:
        table = pq.read_table(p)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(p, f"unreadable Parquet file ({str(exc).splitlines()[0]})") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(p, f"not a lemma-contexts table: no column {', '.join(missing)}")
    md = table.schema.metadata or {}
    df = table.select(list(COLUMNS)).to_pandas()
    df = df.astype({"group": str, "lemma": str})
    if df[["group", "lemma"]].duplicated().any():
        g, lem = df.loc[df[["group", "lemma"]].duplicated(), ["group", "lemma"]].iloc[0]
        raise InputError(p, f"group {g!r}, lemma {lem!r} appears twice")
    n_ctx = df.groupby("group")["n_contexts"].nunique()
    if (n_ctx > 1).any():
        raise InputError(p, f"group {n_ctx[n_ctx > 1].index[0]!r}: its lemmas have different n_contexts")
    nbytes = df["correct_bits"].map(len).to_numpy()
    if (nbytes != (df["n_contexts"].to_numpy() + 7) // 8).any() or (df["n_correct"] > df["n_contexts"]).any():
        i = int(
            np.flatnonzero((nbytes != (df["n_contexts"].to_numpy() + 7) // 8) | (df["n_correct"] > df["n_contexts"]))[0]
        )
        raise InputError(
            p,
            f"row {i + 1} (group {df['group'].iloc[i]!r}, lemma {df['lemma'].iloc[i]!r}): "
            "correct_bits or n_correct do not fit n_contexts",
        )
    out = sort_lemma_contexts(df)
    out.attrs["verbeval"] = json.loads(md[META_KEY]) if META_KEY in md else {}
    return out


def correct_matrix(df: pd.DataFrame, group: str, lemmas: Sequence[str]) -> np.ndarray:
    """``[n_contexts, len(lemmas)]`` booleans of one group of a lemma-contexts table, the lemmas in
    the given order (each must be present)."""
    g = df[df["group"] == group].set_index("lemma")
    n = int(g["n_contexts"].iloc[0]) if len(g) else 0
    if not lemmas:
        return np.zeros((n, 0), dtype=bool)
    raw = np.frombuffer(b"".join(g["correct_bits"].loc[list(lemmas)]), dtype=np.uint8)
    packed = raw.reshape(len(lemmas), (n + 7) // 8)
    return np.unpackbits(packed, axis=1, count=n, bitorder="little").astype(bool).T

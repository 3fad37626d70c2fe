"""Per-lemma diagnostics from the shards: each eligible lemma's accuracy and in-context probability,
and the lemmas each model most often conjugates wrongly.

No model is run: shards hold every eligible form's probability in every context.

Per-lemma statistics (:func:`lemma_stats`), pooled over every context of every group a model was
run on (each distinct context once, as for EW):

* ``n_correct``: contexts where P(correct form) > P(incorrect form), the EW test (a tie is a
  failure); ``n_wrong = n_contexts - n_correct``; ``accuracy = n_correct / n_contexts``.
* ``mean_prob``: mean over contexts of the lemma's in-context probability P(sing) + P(plur).
* ``mean_log10_prob``: mean over contexts of log10(P(sing) + P(plur)); a probability that
  underflowed to 0 in the float32 shard counts as the smallest normal float32 (about 1.2e-38).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from verbeval.agreement.engine.shards import check_shard_lemmas, fixed_list_values, lemma_set_hash, read_shard_meta
from verbeval.core.errors import VerbevalError

#: probability floor for the log of a lemma's mass (float32 shards underflow to 0 below ~1e-45)
PROB_FLOOR = float(np.finfo(np.float32).tiny)

LEMMA_STATS_COLUMNS = (
    "model",
    "lemma",
    "sing",
    "plur",
    "n_contexts",
    "n_correct",
    "n_wrong",
    "accuracy",
    "mean_prob",
    "mean_log10_prob",
)


@dataclass
class LemmaCounts:
    """Running per-lemma sums over contexts (arrays of length L)."""

    n_contexts: int
    n_correct: np.ndarray
    sum_prob: np.ndarray
    sum_log10_prob: np.ndarray

    @classmethod
    def zeros(cls, n_lemmas: int) -> LemmaCounts:
        return cls(0, np.zeros(n_lemmas, np.int64), np.zeros(n_lemmas), np.zeros(n_lemmas))

    def add(self, prob: np.ndarray, plural: np.ndarray) -> None:
        """Add contexts: ``prob`` ``[N, L, 2]`` (singular, plural form), ``plural`` ``[N]`` labels."""
        p = np.asarray(prob, dtype=np.float64)
        pl = np.asarray(plural, dtype=bool)
        if p.ndim != 3 or p.shape[2] != 2 or p.shape[1] != len(self.n_correct) or pl.shape != (p.shape[0],):
            raise ValueError(f"prob must be [N, {len(self.n_correct)}, 2] and plural [N], got {p.shape} and {pl.shape}")
        right = np.where(pl[:, None], p[:, :, 1], p[:, :, 0])
        wrong = np.where(pl[:, None], p[:, :, 0], p[:, :, 1])
        mass = p.sum(axis=2)
        self.n_contexts += p.shape[0]
        self.n_correct += (right > wrong).sum(axis=0)
        self.sum_prob += mass.sum(axis=0)
        self.sum_log10_prob += np.log10(np.maximum(mass, PROB_FLOOR)).sum(axis=0)


def lemma_table(lemmas: pd.DataFrame, counts: LemmaCounts, model: str) -> pd.DataFrame:
    """One row per eligible lemma (``lemmas.parquet`` order) with the columns of :data:`LEMMA_STATS_COLUMNS`."""
    n = counts.n_contexts
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = counts.n_correct / n if n else np.full(len(lemmas), np.nan)
        mean_prob = counts.sum_prob / n if n else np.full(len(lemmas), np.nan)
        mean_log = counts.sum_log10_prob / n if n else np.full(len(lemmas), np.nan)
    return pd.DataFrame(
        {
            "model": model,
            "lemma": lemmas["lemma"].to_numpy(),
            "sing": lemmas["sing"].to_numpy(),
            "plur": lemmas["plur"].to_numpy(),
            "n_contexts": n,
            "n_correct": counts.n_correct,
            "n_wrong": n - counts.n_correct,
            "accuracy": acc,
            "mean_prob": mean_prob,
            "mean_log10_prob": mean_log,
        },
        columns=list(LEMMA_STATS_COLUMNS),
    )


def lemma_stats(shards: Sequence[str | Path], lemmas: pd.DataFrame, model: str) -> pd.DataFrame:
    """Per-lemma accuracy and mean in-context probability of one model, pooled over ``shards``.

    Reads only the ``plural`` and ``prob`` columns, one shard at a time. Every shard must have been
    made with ``lemmas`` (same lemma set) and by the same model; a context that appears in two
    shards (a shard given twice) is an error.
    """
    if not shards:
        raise VerbevalError("no shards given")
    lemma_hash = lemma_set_hash(lemmas)
    counts = LemmaCounts.zeros(len(lemmas))
    ref: dict[str, Any] | None = None
    seen: set[tuple[str, int]] = set()
    for path in shards:
        meta = read_shard_meta(path)
        check_shard_lemmas(path, meta, lemmas, lemma_hash, ref)
        ref = ref or meta
        key = (str(meta.get("group")), int(meta.get("chunk", -1)))
        if key in seen:
            raise VerbevalError(f"{path}: chunk {key[1]} of group {key[0]!r} given twice")
        seen.add(key)
        t = pq.read_table(path, columns=["plural", "prob"])
        prob = fixed_list_values(t["prob"], 2 * len(lemmas), np.float32).reshape(t.num_rows, len(lemmas), 2)
        counts.add(prob, t["plural"].to_numpy(zero_copy_only=False))
    return lemma_table(lemmas, counts, model)


WORST_COLUMNS = (
    "model",
    "rank",
    "lemma",
    "sing",
    "plur",
    "n_contexts",
    "n_wrong",
    "accuracy",
    "mean_prob",
    "mean_log10_prob",
)


def worst_lemmas(stats: pd.DataFrame, n: int, models: Sequence[str] | None = None) -> pd.DataFrame:
    """Per model, the ``n`` lemmas most often conjugated wrongly (most EW failures; ties in
    alphabetical order of the lemma)."""
    models = list(models) if models is not None else list(dict.fromkeys(stats["model"]))
    by_model = dict(list(stats.groupby("model", sort=False)))  # one pass (a sweep: every revision)
    parts = []
    for m in models:
        s = by_model.get(m, stats.iloc[:0])
        s = s.sort_values(["n_wrong", "lemma"], ascending=[False, True], kind="stable").head(n)
        s = s.assign(rank=np.arange(1, len(s) + 1))
        parts.append(s)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(WORST_COLUMNS))
    return out[list(WORST_COLUMNS)].reset_index(drop=True)

"""Learning curves of a checkpoint sweep: each group's TSE, EW and MW against step (with the bootstrap
CIs of the checkpoints' summaries), each lemma's share of correct contexts against step, and the
context resamples behind the AoA confidence intervals.

* Group curves (:func:`group_curves`): the summary rows of metrics ``tse``, ``ew`` and ``mw`` (every
  side and cutoff the summaries hold: top p = 1 is Table 2's) of every checkpoint, with its family,
  seed and step; value and CI are the summary's, unchanged.
* Per-lemma curves (:func:`lemma_curves`): per checkpoint and (group, lemma) the share
  ``n_correct / n_contexts`` of the lemma-contexts table, and per lemma pooled over groups
  (``group`` empty): the sum of ``n_correct`` over the sum of ``n_contexts``.
* :class:`SweepData`: one family seed's correctness arrays ``[steps, contexts, lemmas]`` per group,
  and :func:`lemma_shares` / :func:`group_shares` the curves of every bootstrap resample: contexts
  are resampled within each group (multinomial counts, the same resample at every step and for
  every lemma), so a resampled curve is the same set of contexts followed over training.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from verbeval.agreement.scores.lemma_contexts import correct_matrix
from verbeval.agreement.scores.registry import NAMES, headline_rows
from verbeval.core.errors import InputError

SUMMARY_COLUMNS = ("model", "group", "metric", "side", "cutoff", "value", "ci_low", "ci_high", "n", "n_total")
#: the metrics of the learning curves: the headline metrics (:mod:`verbeval.agreement.scores.registry`)
CURVE_METRICS = NAMES
#: the columns naming a checkpoint, first in both curve tables
KEY_COLUMNS = ("family", "seed", "step", "model", "random_init")
CURVE_COLUMNS = (*KEY_COLUMNS, *SUMMARY_COLUMNS[1:])
LEMMA_CURVE_COLUMNS = (*KEY_COLUMNS, "group", "lemma", "n_contexts", "n_correct", "share")


class SummaryFiles:
    """Summary CSVs (summary_all.csv's columns), each read and split by model once: a workflow's
    checkpoint index names the same ``summary_all.csv`` for every checkpoint of a sweep, which read
    once per checkpoint would cost the square of the sweep."""

    def __init__(self) -> None:
        self._by_model: dict[str, dict[str, pd.DataFrame]] = {}

    def rows(self, path: str | Path, model: str) -> pd.DataFrame:
        """``model``'s rows of the summary CSV ``path``; one-line error otherwise."""
        key = str(path)
        if key not in self._by_model:
            try:
                df = pd.read_csv(path, keep_default_na=False, na_values=[""])
            except (OSError, ValueError) as exc:
                raise InputError(path, f"unreadable summary CSV ({str(exc).splitlines()[0]})") from None
            missing = [c for c in SUMMARY_COLUMNS if c not in df.columns]
            if missing:
                raise InputError(path, f"not a summary table: no column {', '.join(missing)}")
            names = df["model"].astype(str)
            self._by_model[key] = {m: rows.reset_index(drop=True) for m, rows in df.groupby(names, sort=False)}
        rows = self._by_model[key].get(model)
        if rows is None:
            raise InputError(path, f"no rows of model {model!r}")
        return rows.copy()


def group_curves(index: pd.DataFrame, summaries: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Curve rows (:data:`CURVE_COLUMNS`) of every checkpoint of ``index`` (``summaries``: model ->
    its summary rows), sorted by family, seed, group, metric, side, cutoff and step."""
    parts = []
    for r in index.itertuples(index=False):
        s = summaries[r.model]
        s = s[s["metric"].isin(CURVE_METRICS)].copy()
        s["side"] = s["side"].fillna("").astype(str)
        s = s.assign(family=r.family, seed=r.seed, step=int(r.step), random_init=bool(r.random_init))
        parts.append(s)
    out = pd.concat(parts, ignore_index=True)[list(CURVE_COLUMNS)]
    out["cutoff"] = out["cutoff"].astype(float)
    out = out.sort_values(
        ["family", "seed", "group", "metric", "side", "cutoff", "step"], kind="stable", na_position="first"
    )
    return out.reset_index(drop=True)


def headline(curves: pd.DataFrame) -> pd.DataFrame:
    """The Table 2 rows of :func:`group_curves`: TSE, and EW and MW at top p = 1."""
    return curves[headline_rows(curves)].reset_index(drop=True)


def lemma_curves(index: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-lemma rows (:data:`LEMMA_CURVE_COLUMNS`) of every checkpoint: one per (group, lemma) and
    one per lemma pooled over groups (``group`` empty), sorted by family, seed, group, lemma, step."""
    parts = []
    for r in index.itertuples(index=False):
        t = tables[r.model]
        pooled = t.groupby("lemma", sort=True)[["n_contexts", "n_correct"]].sum().reset_index().assign(group="")
        both = pd.concat([t[["group", "lemma", "n_contexts", "n_correct"]], pooled], ignore_index=True)
        both = both.assign(
            family=r.family, seed=r.seed, step=int(r.step), model=r.model, random_init=bool(r.random_init)
        )
        parts.append(both)
    out = pd.concat(parts, ignore_index=True)
    out["n_contexts"] = out["n_contexts"].astype(np.int64)
    out["n_correct"] = out["n_correct"].astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["share"] = np.where(
            out["n_contexts"] > 0, out["n_correct"] / out["n_contexts"].where(out["n_contexts"] > 0, 1), np.nan
        )
    out = out.sort_values(["family", "seed", "group", "lemma", "step"], kind="stable")
    return out[list(LEMMA_CURVE_COLUMNS)].reset_index(drop=True)


@dataclass
class SweepData:
    """One family seed: ``steps`` ``[T]`` (ascending), ``models`` ``[T]``, ``lemmas`` (sorted),
    ``groups`` (sorted) and ``correct[group]``: ``[T, n_contexts, L]`` booleans."""

    steps: np.ndarray
    models: list[str]
    lemmas: list[str]
    groups: list[str]
    correct: dict[str, np.ndarray]

    @classmethod
    def from_tables(cls, rows: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> SweepData:
        """From the index rows of one family seed and their lemma-contexts tables (all the same
        groups, lemmas and contexts: :func:`~verbeval.agreement.report.checkpoint_index.check_family_members`)."""
        rows = rows.sort_values("step", kind="stable")
        models = [str(m) for m in rows["model"]]
        first = tables[models[0]]
        lemmas = sorted(set(first["lemma"]))
        groups = sorted(set(first["group"]))
        correct = {g: np.stack([correct_matrix(tables[m], g, lemmas) for m in models]) for g in groups}
        return cls(rows["step"].to_numpy(np.int64), models, lemmas, groups, correct)

    @property
    def n_contexts(self) -> int:
        return sum(c.shape[1] for c in self.correct.values())

    def lemma_point(self) -> np.ndarray:
        """``[L, T]``: each lemma's share of correct contexts, pooled over groups."""
        total = sum(c.sum(axis=1, dtype=np.int64) for c in self.correct.values())
        return (np.asarray(total, dtype=np.float64) / max(self.n_contexts, 1)).T

    def group_point(self, group: str) -> np.ndarray:
        """``[T]``: the group's share of correct (context, lemma) pairs: its EW at top p = 1."""
        c = self.correct[group]
        return c.mean(axis=(1, 2)) if c.shape[1] and c.shape[2] else np.full(len(self.steps), np.nan)


def context_resamples(data: SweepData, resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Per group, ``[resamples, n_contexts]`` multinomial counts of its contexts
    (:func:`verbeval.core.bootstrap.draw_counts`), drawn jointly: one generator,
    ``numpy.random.default_rng(seed)``, groups in sorted order, so that the groups' curves are
    resampled together."""
    from verbeval.core.bootstrap import draw_counts

    rng = np.random.default_rng(seed)
    out = {}
    for g in data.groups:
        n = data.correct[g].shape[1]
        out[g] = draw_counts(rng, n, resamples) if n else np.zeros((resamples, 0))
    return out


def lemma_shares(data: SweepData, counts: Mapping[str, np.ndarray]) -> np.ndarray:
    """``[B, L, T]``: each lemma's pooled share in each resample of ``counts``."""
    t, n_l = len(data.steps), len(data.lemmas)
    total = None
    for g in data.groups:
        c = data.correct[g]  # [T, n, L]
        m = c.transpose(1, 0, 2).reshape(c.shape[1], t * n_l).astype(np.float64)
        part = counts[g] @ m
        total = part if total is None else total + part
    b = next(iter(counts.values())).shape[0] if counts else 0
    if total is None:
        return np.full((b, n_l, t), np.nan)
    return (total / max(data.n_contexts, 1)).reshape(b, t, n_l).transpose(0, 2, 1)


def group_shares(data: SweepData, counts: Mapping[str, np.ndarray], group: str) -> np.ndarray:
    """``[B, T]``: the group's EW (top p = 1) in each resample of its contexts."""
    c = data.correct[group]
    per_context = c.mean(axis=2).T  # [n, T]
    n = c.shape[1]
    return counts[group] @ per_context / max(n, 1)

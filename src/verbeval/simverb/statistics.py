"""Spearman's rho between cosines and human ratings, with percentile bootstrap CIs, per representation
and subset of pairs (full set, official splits, tokenisation, relation label, rating range), the
best representation and the per-layer curve.

Rho is computed on covered pairs (scipy) and every row of the results says how many pairs that was;
the bootstrap is seeded, and every representation of a subset sees the same resamples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from verbeval.core.bootstrap import bootstrap_statistic, percentile_ci
from verbeval.simverb.data import DEFAULT_BINS, RELATIONS, score_bins

TABLE_COLUMNS = [
    "model",
    "representation",
    "layer",
    "subset",
    "n_pairs",
    "n_covered",
    "coverage",
    "rho",
    "ci_low",
    "ci_high",
]
#: columns of ``simverb_layers.csv`` (a DVC plot: x = layer, y = rho)
LAYER_COLUMNS = ("model", "representation", "layer", "n_covered", "rho", "ci_low", "ci_high")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (scipy.stats.spearmanr, average ranks for ties); NaN for fewer than 2
    points or a constant input."""
    from scipy import stats

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y)[0])


def bootstrap_spearman(
    x: np.ndarray, y: np.ndarray, resamples: int, seed: int, confidence: float, block: int = 200
) -> tuple[float, float]:
    """Percentile bootstrap CI of Spearman's rho over pairs, vectorised over resamples.

    Resample ``b`` draws ``n`` pair indices with replacement (:mod:`verbeval.core.bootstrap`,
    ``draw="indices"``: equal ``n`` and seed give equal resamples); its rho is the Pearson
    correlation of the average ranks (``scipy.stats.rankdata`` along each row), exactly what
    ``spearmanr`` computes. Resamples with a constant column are left out.
    """
    from scipy import stats

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n = len(x)
    if n < 2 or resamples <= 0:
        return float("nan"), float("nan")

    def rhos(idx: np.ndarray) -> np.ndarray:
        rx = stats.rankdata(x[idx], axis=1)
        ry = stats.rankdata(y[idx], axis=1)
        rx -= rx.mean(axis=1, keepdims=True)
        ry -= ry.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (rx * ry).sum(1) / np.sqrt((rx * rx).sum(1) * (ry * ry).sum(1))

    lo, hi = percentile_ci(bootstrap_statistic(rhos, n, resamples, seed, block, "indices"), confidence)
    return float(lo), float(hi)


def subsets(
    pairs: pd.DataFrame, bins: Sequence[float] = DEFAULT_BINS, single_token: np.ndarray | None = None
) -> list[tuple[str, np.ndarray]]:
    """(name, boolean mask over ``pairs``) for ``full``, each split present, ``tokens:single`` /
    ``tokens:multi`` (both verbs one sub-token / at least one split into several; when
    ``single_token`` is given), each relation and each rating range."""
    out: list[tuple[str, np.ndarray]] = [("full", np.ones(len(pairs), bool))]
    for name in sorted(s for s in pairs["split"].unique() if s):
        out.append((name, (pairs["split"] == name).to_numpy()))
    if single_token is not None:
        out += [("tokens:single", np.asarray(single_token, bool)), ("tokens:multi", ~np.asarray(single_token, bool))]
    for rel in RELATIONS:
        out.append((f"relation:{rel}", (pairs["relation"] == rel).to_numpy()))
    score = pairs["score"].to_numpy(float)
    ranges = score_bins(bins)
    for k, (lo, hi, label) in enumerate(ranges):
        upper = score <= hi if k == len(ranges) - 1 else score < hi
        out.append((f"range:{label}", (score >= lo) & upper))
    return out


def results_table(
    pairs: pd.DataFrame,
    sims: pd.DataFrame,
    model: str,
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    bins: Sequence[float] = DEFAULT_BINS,
) -> pd.DataFrame:
    """One row per representation and subset (:data:`TABLE_COLUMNS`): pairs in the subset,
    covered pairs, coverage, rho on the covered pairs and its bootstrap CI."""
    human = pairs.set_index("pair")["score"]
    rows = []
    reps = list(dict.fromkeys(sims["representation"]))
    first = sims[sims["representation"] == reps[0]].set_index("pair")
    single = first["single_token"].reindex(pairs["pair"]).to_numpy(bool) if "single_token" in sims else None
    for sub, mask in subsets(pairs, bins, single):
        ids = set(pairs["pair"].to_numpy()[mask].tolist())
        for rep in reps:
            s = sims[(sims["representation"] == rep) & sims["pair"].isin(ids)]
            c = s[s["covered"]]
            x, y = c["cosine"].to_numpy(float), human.loc[c["pair"]].to_numpy(float)
            lo, hi = bootstrap_spearman(x, y, resamples, seed, confidence)
            rows.append(
                {
                    "model": model,
                    "representation": rep,
                    "layer": int(s["layer"].iat[0]) if len(s) else -1,
                    "subset": sub,
                    "n_pairs": len(s),
                    "n_covered": len(c),
                    "coverage": len(c) / len(s) if len(s) else float("nan"),
                    "rho": spearman(x, y),
                    "ci_low": lo,
                    "ci_high": hi,
                }
            )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def best_representation(table: pd.DataFrame) -> str:
    """The representation with the highest full-set rho (the first in table order on a tie)."""
    full = table[table["subset"] == "full"].reset_index(drop=True)
    if full["rho"].isna().all():
        return str(full["representation"].iat[0])
    return str(full["representation"].iat[int(full["rho"].fillna(-np.inf).to_numpy().argmax())])


def layer_curve(table: pd.DataFrame) -> pd.DataFrame:
    """The per-layer figure's data (full set): representation, layer, rho, CI."""
    full = table[table["subset"] == "full"]
    return full[list(LAYER_COLUMNS)].reset_index(drop=True)

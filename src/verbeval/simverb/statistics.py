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

from verbeval.core.bootstrap import percentile_ci, resample_blocks
from verbeval.simverb.data import DEFAULT_BINS, RELATIONS, score_bins
from verbeval.simverb.steps import SIMVERB_TABLE

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


def resample_ranks(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Average ranks of ``values[idx]`` along each row of ``idx`` (``[b, n]`` indices into
    ``values``), equal to ``scipy.stats.rankdata(values[idx], axis=1)`` bit for bit, without
    sorting every row: each row's ranks follow from how often it drew each distinct value (a
    count and a running sum over the values sorted once). Every rank is an integer or a half, exact
    in float64. Values with NaN are ranked by scipy (it gives NaN rows)."""
    values = np.asarray(values, float)
    if np.isnan(values).any():
        from scipy import stats

        return stats.rankdata(values[idx], axis=1)
    distinct, dense = np.unique(values, return_inverse=True)  # dense: each value's place among the distinct
    b, u = idx.shape[0], len(distinct)
    drawn = dense[idx]  # [b, n]
    counts = np.bincount((drawn + (np.arange(b) * u)[:, None]).ravel(), minlength=b * u).reshape(b, u)
    below = np.cumsum(counts, axis=1) - counts  # drawn values smaller than each distinct value
    average = below + (counts + 1) / 2.0  # scipy: 0.5 * (end + start + 1) of the tied block
    return np.take_along_axis(average, drawn, axis=1)


def bootstrap_spearman_many(
    xs: Sequence[np.ndarray], y: np.ndarray, resamples: int, seed: int, confidence: float, block: int = 200
) -> list[tuple[float, float]]:
    """Percentile bootstrap CIs of Spearman's rho of each of ``xs`` against the same ``y`` over
    the same pairs (one subset's representations), vectorised over resamples.

    Resample ``b`` draws ``n`` pair indices with replacement (:mod:`verbeval.core.bootstrap`,
    ``draw="indices"``: equal ``n`` and seed give equal resamples, so every representation sees the
    same ones); its rho is the Pearson correlation of the average ranks (:func:`resample_ranks`,
    ``scipy.stats.rankdata`` along each row), exactly what ``spearmanr`` computes. The ranks of
    ``y`` are computed once per resample block for every representation. Resamples with a constant
    column are left out.
    """
    y = np.asarray(y, float)
    xs = [np.asarray(x, float) for x in xs]
    n = len(y)
    if n < 2 or resamples <= 0:
        return [(float("nan"), float("nan")) for _ in xs]
    out = np.empty((resamples, len(xs)))
    for rows, idx in resample_blocks(n, resamples, seed, block, "indices"):
        ry = resample_ranks(y, idx)
        ry -= ry.mean(axis=1, keepdims=True)
        ryy = (ry * ry).sum(1)
        for k, x in enumerate(xs):
            rx = resample_ranks(x, idx)
            rx -= rx.mean(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[rows, k] = (rx * ry).sum(1) / np.sqrt((rx * rx).sum(1) * ryy)
    lo, hi = percentile_ci(out, confidence)
    return [(float(a), float(b)) for a, b in zip(lo, hi)]


def bootstrap_spearman(
    x: np.ndarray, y: np.ndarray, resamples: int, seed: int, confidence: float, block: int = 200
) -> tuple[float, float]:
    """Percentile bootstrap CI of Spearman's rho over pairs (:func:`bootstrap_spearman_many` of one ``x``)."""
    return bootstrap_spearman_many([x], y, resamples, seed, confidence, block)[0]


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
    resamples: int | None = None,
    seed: int | None = None,
    confidence: float | None = None,
    bins: Sequence[float] = DEFAULT_BINS,
) -> pd.DataFrame:
    """One row per representation and subset (:data:`TABLE_COLUMNS`): pairs in the subset,
    covered pairs, coverage, rho on the covered pairs and its bootstrap CI. ``resamples``, ``seed``,
    ``confidence``: ``simverb.bootstrap``'s (None: its default, :data:`verbeval.simverb.steps.SIMVERB_TABLE`)."""
    resamples = SIMVERB_TABLE.default("resamples") if resamples is None else resamples
    seed = SIMVERB_TABLE.default("seed") if seed is None else seed
    confidence = SIMVERB_TABLE.default("confidence") if confidence is None else confidence
    human = pairs.set_index("pair")["score"]
    rows = []
    reps = list(dict.fromkeys(sims["representation"]))
    first = sims[sims["representation"] == reps[0]].set_index("pair")
    single = first["single_token"].reindex(pairs["pair"]).to_numpy(bool) if "single_token" in sims else None
    # each representation's rows once, as arrays (in the order of ``sims``): a subset selects from them
    columns = {
        rep: (
            frame["pair"].to_numpy(),
            frame["covered"].to_numpy(bool),
            frame["cosine"].to_numpy(float),
            frame["layer"].to_numpy(),
        )
        for rep, frame in ((rep, sims[sims["representation"] == rep]) for rep in reps)
    }
    for sub, mask in subsets(pairs, bins, single):
        ids = pairs["pair"].to_numpy()[mask]
        found = []
        for rep in reps:
            pair, covered, cosine, layer = columns[rep]
            chosen = np.isin(pair, ids)
            kept = chosen & covered
            n_pairs = int(chosen.sum())
            layer_of = int(layer[chosen][0]) if n_pairs else -1
            x = cosine[kept]
            y = human.loc[pair[kept]].to_numpy(float)
            found.append((rep, n_pairs, int(kept.sum()), layer_of, x, y))
        # representations that cover the same pairs share the human ratings' ranks of each resample
        sharing: dict[bytes, list[int]] = {}
        for i, (*_, y) in enumerate(found):
            sharing.setdefault(y.tobytes(), []).append(i)
        cis: dict[int, tuple[float, float]] = {}
        for members in sharing.values():
            y = found[members[0]][5]
            many = bootstrap_spearman_many([found[i][4] for i in members], y, resamples, seed, confidence)
            cis.update(zip(members, many))
        for i, (rep, n_pairs, n_covered, layer_of, x, y) in enumerate(found):
            lo, hi = cis[i]
            rows.append(
                {
                    "model": model,
                    "representation": rep,
                    "layer": layer_of,
                    "subset": sub,
                    "n_pairs": n_pairs,
                    "n_covered": n_covered,
                    "coverage": n_covered / n_pairs if n_pairs else float("nan"),
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

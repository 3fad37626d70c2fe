"""Phases of a learning curve: changepoints of each group's TSE, EW and MW (top p = 1) against step.

A curve (values ``v_1..v_T`` at ascending steps, ``x_t = log10(step)`` with step 0 placed as in
:func:`verbeval.acquisition.fit.step_positions`) is cut into segments, each a straight line
in ``x`` (a plateau, a rise, ...), by penalised exact search: the segmentation, of segments of at
least :data:`MIN_SIZE` checkpoints, that minimises the cost (cost ``linear``: the residual sum of
squares of each segment's least-squares line ``v = a + b x``) plus ``pen`` per changepoint, over every
segmentation: the optimal-partitioning dynamic programme (Jackson et al. 2005), ``F(e) = min_s F(s) +
cost(s, e) + pen``, each segment's cost from cumulative sums (so a curve of ``T`` checkpoints costs
``O(T^2)`` arithmetic: a 1,000-checkpoint sweep in well under a second), the fewer changepoints on a
tie. ``ruptures.Dynp`` (exact, for each number of changepoints) gives the same cuts and was used
before, but its search grows with ``T^3`` (4 s at 128 checkpoints, hours at 1,000);
``tests/test_acquisition.py`` checks the programme against it and against every segmentation
enumerated. (``ruptures.Pelt`` prunes candidates and, with segments of at least 3 points, can miss the
best cut: the tests hold a curve where it does.) The penalty is the BIC-like ``pen = beta * sigma^2 * ln(T)``: ``beta`` is the configured ``changepoint_penalty`` (3: each
changepoint adds a location, an intercept and a slope, BIC's ``ln T`` per parameter in units of the
noise variance) and ``sigma^2`` the noise variance of one value, the mean of
``((ci_high - ci_low) / (2 z))^2`` over the curve's bootstrap CIs (``z`` the normal quantile of the
CI's confidence), or, without CIs, ``(1.4826 * MAD of the first differences)^2 / 2``. A changepoint
lies between two checkpoints; it is reported with the last step before and the first step after, the
values there, and the slopes (change per decade of steps) of the segments on either side.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from verbeval.acquisition.fit import step_positions

#: fewest checkpoints of one phase (so a 10-checkpoint sweep has at most 3 phases)
MIN_SIZE = 3

CHANGEPOINT_COLUMNS = (
    "family",
    "seed",
    "random_init",
    "group",
    "metric",
    "changepoint",
    "n_changepoints",
    "step_before",
    "step_after",
    "value_before",
    "value_after",
    "slope_before",
    "slope_after",
    "penalty",
)


def noise_variance(values: np.ndarray, ci_low: np.ndarray, ci_high: np.ndarray, confidence: float) -> float:
    """The variance of one value of the curve (module docstring)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    width = np.asarray(ci_high, float) - np.asarray(ci_low, float)
    width = width[np.isfinite(width)]
    if len(width) and z > 0:
        return float(np.mean((width / (2 * z)) ** 2))
    d = np.diff(np.asarray(values, float))
    if len(d) == 0:
        return 0.0
    return float((1.4826 * np.median(np.abs(d - np.median(d)))) ** 2 / 2)


def segment_slope(x: np.ndarray, v: np.ndarray) -> float:
    """The slope of the least-squares line of ``v`` on ``x`` (0 for a single point or one ``x``)."""
    if len(x) < 2 or np.ptp(x) == 0:
        return 0.0
    return float(np.polyfit(x, v, 1)[0])


def segment_costs(values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``[T + 1, T + 1]``: at ``[s, e]`` the residual sum of squares of the least-squares line
    ``v = a + b x`` over values ``s..e-1`` (cost ``linear``), from cumulative sums of the centred values;
    ``inf`` where the segment has fewer than :data:`MIN_SIZE` values. A segment whose ``x`` are all
    equal has no line's residual: 0, as ``ruptures``' linear cost gives."""
    v = np.asarray(values, float) - np.mean(values)
    x = np.asarray(x, float) - np.mean(x)
    t = len(v)

    def cum(a: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(a)])

    sx, sy, sxx, sxy, syy = cum(x), cum(v), cum(x * x), cum(x * v), cum(v * v)
    s, e = np.arange(t + 1)[:, None], np.arange(t + 1)[None, :]
    n = (e - s).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        cxx = (sxx[e] - sxx[s]) - (sx[e] - sx[s]) ** 2 / n
        cxy = (sxy[e] - sxy[s]) - (sx[e] - sx[s]) * (sy[e] - sy[s]) / n
        cyy = (syy[e] - syy[s]) - (sy[e] - sy[s]) ** 2 / n
        rss = np.where(cxx > 1e-12 * np.maximum(sxx[e] - sxx[s], 1e-300), cyy - cxy**2 / cxx, 0.0)
    return np.where(e - s >= MIN_SIZE, np.maximum(rss, 0.0), np.inf)


def changepoints(values: np.ndarray, x: np.ndarray, sigma2: float, beta: float) -> tuple[list[int], float]:
    """Indices ``i`` (1..T-1) where a new phase starts at value ``i``, and the penalty used: the
    segmentation with the lowest cost + ``pen`` per changepoint (module docstring)."""
    v = np.asarray(values, float)
    t = len(v)
    pen = beta * max(sigma2, 1e-12) * np.log(max(t, 2))
    if t < 2 * MIN_SIZE or not np.isfinite(v).all():
        return [], float(pen)
    cost = segment_costs(v, np.asarray(x, float))
    best = np.full(t + 1, np.inf)  # F(e): the lowest total of values 0..e-1, counting pen per segment
    best[0] = -pen  # the first segment starts no changepoint
    cuts = np.zeros(t + 1, dtype=np.int64)  # segments of that best
    start = np.zeros(t + 1, dtype=np.int64)  # where its last segment starts
    for e in range(MIN_SIZE, t + 1):
        s = np.arange(e - MIN_SIZE + 1)
        total = best[s] + cost[s, e] + pen
        j = np.lexsort((cuts[s], total))[0]  # the lowest total; on a tie the fewer changepoints
        best[e], start[e], cuts[e] = total[j], s[j], cuts[s[j]] + 1
    found, e = [], t
    while start[e] > 0:
        e = int(start[e])
        found.append(e)
    return sorted(found), float(pen)


def curve_changepoints(
    curves: pd.DataFrame,
    *,
    beta: float,
    confidence: float,
    key: tuple[str, ...] = ("family", "seed", "group", "metric"),
) -> pd.DataFrame:
    """Changepoint rows (:data:`CHANGEPOINT_COLUMNS`) of every curve of ``curves`` (the headline rows
    of :func:`verbeval.acquisition.curves.headline`, one value per step)."""
    records: list[dict[str, Any]] = []
    for k, d in curves.groupby(list(key), sort=True):
        d = d.sort_values("step", kind="stable")
        v = d["value"].to_numpy(float)
        s = d["step"].to_numpy(np.int64)
        x = step_positions(s)
        sigma2 = noise_variance(v, d["ci_low"].to_numpy(float), d["ci_high"].to_numpy(float), confidence)
        cps, pen = changepoints(v, x, sigma2, beta)
        bounds = [0, *cps, len(v)]
        ident = dict(zip(key, k))
        for j, c in enumerate(cps, start=1):
            records.append(
                {
                    **ident,
                    "random_init": bool(d["random_init"].any()),
                    "changepoint": j,
                    "n_changepoints": len(cps),
                    "step_before": int(s[c - 1]),
                    "step_after": int(s[c]),
                    "value_before": float(v[c - 1]),
                    "value_after": float(v[c]),
                    "slope_before": segment_slope(x[bounds[j - 1] : c], v[bounds[j - 1] : c]),
                    "slope_after": segment_slope(x[c : bounds[j + 1]], v[c : bounds[j + 1]]),
                    "penalty": pen,
                }
            )
    return pd.DataFrame.from_records(records, columns=list(CHANGEPOINT_COLUMNS))

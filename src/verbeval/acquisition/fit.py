"""Sigmoid learning curves and the age of acquisition (AoA), after Chang & Bergen (2022).

A curve is a share of correct answers ``y_t`` at training steps ``s_t``. It is fitted over
``x = log10(step)`` with the four-parameter sigmoid

    f(x) = lo + (hi - lo) / (1 + exp(-k (x - x0)))

by least squares (unweighted; ``lo, hi`` in [0, 1], ``k`` in [0, :data:`K_MAX`], ``x0`` within
:data:`X0_MARGIN` decades of the steps). Step 0 has no logarithm: it is placed one decade before the
smallest positive step (``x = log10(s_min) - 1``, :func:`step_positions`), so an untrained
checkpoint anchors the lower asymptote.

The AoA is the step where the fit crosses the midpoint ``m = (0.5 + hi) / 2`` between chance and its
upper asymptote: ``x_aoa = x0 - ln((hi - lo) / (m - lo) - 1) / k``, ``AoA = 10 ** x_aoa``. A curve
gets no AoA, and a ``reason`` instead (:data:`REASONS`), when it has too few steps, its data never
rise above chance (no step's share above ``0.5 + min_rise``), its fit fails (non-finite, or R^2
below ``min_r2``: the sigmoid does not describe the curve), its fitted upper asymptote is not above ``0.5 + min_rise``
(or not above its lower one), or the crossing lies outside the observed steps (before the first:
acquired before it; after the last: not yet acquired). Nothing is extrapolated.

The fit is a Levenberg-Marquardt iteration run on every curve at once (numpy, ``[curves, steps]``
arrays; bounds by projection), from three starting midpoints per curve, keeping the best; bootstrap
refits start from the point fit (warm start), so thousands of curves fit in well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: largest slope (per decade of steps) a fit may take: a step function between two checkpoints
K_MAX = 50.0
#: how far (decades) beyond the observed steps the fitted midpoint x0 may lie
X0_MARGIN = 2.0

#: a fit stops when its damping grows past this (no step improves it: a minimum, or one on a bound)
LAMBDA_MAX = 1e4

#: the reasons a curve gets no AoA (an empty reason: it has one)
REASONS = {
    "too_few_steps": "fewer steps with contexts than min_checkpoints",
    "never_above_chance": "no step's share is above 0.5 + min_rise",
    "fit_failed": "the sigmoid fit is not finite, or its R^2 is below min_r2 (it does not describe the curve)",
    "no_rise_in_fit": "the fitted upper asymptote is not above 0.5 + min_rise (or not above the lower one)",
    "acquired_before_first_checkpoint": "the fit crosses the midpoint before the first checkpoint",
    "not_acquired_by_last_checkpoint": "the fit crosses the midpoint after the last checkpoint",
}


def step_positions(steps: np.ndarray) -> np.ndarray:
    """``log10(step)``; step 0 one decade before the smallest positive step (-1 when there is none)."""
    s = np.asarray(steps, dtype=np.float64)
    positive = s[s > 0]
    zero_at = np.log10(positive.min()) - 1.0 if len(positive) else -1.0
    with np.errstate(divide="ignore"):
        return np.where(s > 0, np.log10(np.where(s > 0, s, 1.0)), zero_at)


def sigmoid(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """``f(x)`` for ``params`` ``[..., 4]`` (lo, hi, k, x0) at ``x`` ``[T]``: ``[..., T]``."""
    lo, hi, k, x0 = (params[..., i : i + 1] for i in range(4))
    return lo + (hi - lo) / (1.0 + np.exp(-k * (x - x0)))


@dataclass
class SigmoidFits:
    """Fits of ``n`` curves: ``params`` ``[n, 4]`` (lo, hi, k, x0), ``sse``, ``r2``, ``converged`` ``[n]``
    (the iteration stopped on its own before the iteration cap; a fit at the cap is usually at its
    minimum up to a tiny change, so it is recorded, not a failure)."""

    params: np.ndarray
    sse: np.ndarray
    r2: np.ndarray
    converged: np.ndarray


def _bounds(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lower = np.array([0.0, 0.0, 0.0, x.min() - X0_MARGIN])
    upper = np.array([1.0, 1.0, K_MAX, x.max() + X0_MARGIN])
    return lower, upper


def _sse(x: np.ndarray, y: np.ndarray, w: np.ndarray, p: np.ndarray) -> np.ndarray:
    r = (y - sigmoid(x, p)) * w
    return (r * r).sum(-1)


def _levenberg_marquardt(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, p0: np.ndarray, iterations: int, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares of every curve at once from ``p0``; (params, sse, converged)."""
    lower, upper = _bounds(x)
    p = np.clip(p0.astype(np.float64), lower, upper)
    lam = np.full(len(p), 1e-2)
    sse = _sse(x, y, w, p)
    done = np.zeros(len(p), dtype=bool)
    w2 = w * w
    eye = np.eye(4)
    for _ in range(iterations):
        act = np.flatnonzero(~done)
        if not len(act):
            break
        pa, ya, wa = p[act], y[act], w2[act]
        lo, hi, k, x0 = (pa[:, i : i + 1] for i in range(4))
        s = 1.0 / (1.0 + np.exp(-k * (x - x0)))
        ds = (hi - lo) * s * (1.0 - s)
        jac = np.stack([1.0 - s, s, ds * (x - x0), -ds * k], axis=-1)  # [A, T, 4]
        r = ya - (lo + (hi - lo) * s)
        jw = jac * wa[..., None]
        jwt = jw.transpose(0, 2, 1)
        a = jwt @ jac
        g = (jwt @ r[..., None])[..., 0]
        diag = np.diagonal(a, axis1=1, axis2=2)
        damp = a + (lam[act, None] * np.maximum(diag, 1e-12))[:, :, None] * eye + 1e-12 * eye
        try:
            delta = np.linalg.solve(damp, g[..., None])[..., 0]
        except np.linalg.LinAlgError:  # pragma: no cover - damped and regularised: not singular
            delta = np.zeros_like(g)
        cand = np.clip(pa + delta, lower, upper)
        new_sse = _sse(x, ya, np.sqrt(wa), cand)
        better = new_sse < sse[act]
        gain = sse[act] - new_sse
        p[act[better]] = cand[better]
        small = (np.abs(gain) <= tol * np.maximum(sse[act], 1e-12)) | (np.abs(cand - pa).max(-1) < 1e-10)
        sse[act[better]] = new_sse[better]
        lam[act] = np.where(better, lam[act] / 3.0, lam[act] * 4.0)
        done[act[small | (lam[act] > LAMBDA_MAX)]] = True
    return p, sse, done


def initial_params(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A starting point per curve: lo, hi from the first and last observed shares, x0 where the data
    first reach their midpoint, k a rise over about a decade."""
    obs = w > 0
    first = np.argmax(obs, axis=1)
    last = y.shape[1] - 1 - np.argmax(obs[:, ::-1], axis=1)
    rows = np.arange(len(y))
    lo = np.clip(y[rows, first], 0.0, 1.0)
    hi = np.clip(np.where(obs, y, -np.inf).max(1), 0.0, 1.0)
    hi = np.maximum(hi, y[rows, last])
    mid = (lo + hi) / 2
    reach = obs & (y >= mid[:, None])
    idx = np.where(reach.any(1), np.argmax(reach, axis=1), y.shape[1] - 1)
    x0 = x[idx]
    k = np.full(len(y), 4.0)
    return np.stack([lo, hi, k, x0], axis=1)


def fit_sigmoids(
    x: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | None = None,
    init: np.ndarray | None = None,
    iterations: int = 200,
    tol: float = 1e-8,
) -> SigmoidFits:
    """Fit :func:`sigmoid` to every row of ``y`` ``[n, T]`` over ``x`` ``[T]`` (``weights``
    ``[n, T]``: 1 observed, 0 missing; NaN in ``y`` counts as missing). Without ``init``, three
    starts per curve (midpoint at the data's midpoint crossing, and at the first and last third of
    the steps) and the best fit kept; with ``init`` ``[n, 4]`` one warm start each."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=np.float64).copy()
    w[np.isnan(y)] = 0.0
    y = np.where(np.isnan(y), 0.0, y)
    n = len(y)
    if init is not None:
        starts = [np.asarray(init, dtype=np.float64)]
    else:
        base = initial_params(x, y, w)
        starts = [base]
        for q in (1 / 3, 2 / 3):
            alt = base.copy()
            alt[:, 3] = x.min() + q * (x.max() - x.min())
            starts.append(alt)
    m = len(starts)
    p, sse, conv = _levenberg_marquardt(
        x, np.tile(y, (m, 1)), np.tile(w, (m, 1)), np.concatenate(starts), iterations, tol
    )
    best = np.argmin(np.where(np.isfinite(sse), sse, np.inf).reshape(m, n), axis=0)
    pick = best * n + np.arange(n)
    params, sse_b, conv_b = p[pick], sse[pick], conv[pick]
    wsum = w.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (y * w).sum(1) / wsum
        sst = (((y - mean[:, None]) * w) ** 2).sum(1)
        r2 = np.where(sst > 0, 1.0 - sse_b / sst, np.where(sse_b <= 1e-20, 1.0, np.nan))
    return SigmoidFits(params, sse_b, r2, conv_b)


def crossing(params: np.ndarray) -> np.ndarray:
    """``x`` where each fit crosses ``(0.5 + hi) / 2``; NaN where it never does (``hi <= lo``,
    ``k = 0``), -inf where it starts above it (the midpoint is at or below ``lo``)."""
    lo, hi, k, x0 = params.T
    mid = (0.5 + hi) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        q = (mid - lo) / (hi - lo)
        x = x0 - np.log(1.0 / q - 1.0) / k
    x = np.where((hi > lo) & (k > 0) & (q > 0) & (q < 1), x, np.nan)
    return np.where((hi > lo) & (k > 0) & (q <= 0), -np.inf, x)


def aoa_reasons(
    x: np.ndarray,
    y: np.ndarray,
    fits: SigmoidFits,
    *,
    n_steps: np.ndarray,
    min_checkpoints: int,
    min_rise: float,
    min_r2: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``(x_aoa, reason)`` per curve: the crossing (:func:`crossing`) where it is an AoA, NaN and a
    :data:`REASONS` key where it is not (first reason that applies, in the order listed there)."""
    cross = crossing(fits.params)
    lo, hi = fits.params[:, 0], fits.params[:, 1]
    y_max = np.nanmax(np.where(np.isnan(y), -np.inf, y), axis=1)
    finite = np.isfinite(fits.params).all(1) & np.isfinite(fits.sse)
    checks = [
        ("too_few_steps", n_steps < min_checkpoints),
        ("never_above_chance", ~(y_max > 0.5 + min_rise)),
        ("fit_failed", ~finite | ~(fits.r2 >= min_r2)),
        ("no_rise_in_fit", ~(hi >= 0.5 + min_rise) | ~(hi > lo) | np.isnan(cross) & np.isfinite(fits.params).all(1)),
        ("acquired_before_first_checkpoint", cross < x.min()),
        ("not_acquired_by_last_checkpoint", cross > x.max()),
    ]
    reason = np.full(len(y), "", dtype=object)
    for name, bad in checks:
        reason[(reason == "") & bad] = name
    x_aoa = np.where(reason == "", cross, np.nan)
    return x_aoa, reason


AOA_COLUMNS = ("aoa_step", "aoa_log10_step", "ci_low", "ci_high", "boot_share", "lo", "hi", "k", "x0", "r2", "reason")


def aoa_estimates(
    steps: np.ndarray,
    point: np.ndarray,
    boot: np.ndarray | None,
    *,
    min_checkpoints: int,
    min_rise: float,
    min_r2: float,
    confidence: float,
) -> pd.DataFrame:
    """AoA of ``K`` curves with percentile bootstrap CIs: one row per curve (:data:`AOA_COLUMNS`).

    ``point`` ``[K, T]``: the curves at ``steps`` ``[T]`` (NaN: no contexts at that step); ``boot``
    ``[B, K, T]``: the same curves in ``B`` resamples of their contexts (or None: no CI). Each
    resample of a curve that has an AoA is refitted from the point fit; its AoA, or none (the same
    :data:`REASONS`, with the point estimate's steps), enters the percentile interval over the
    resamples that have one (``boot_share``: their share). ``aoa_step`` and the CI are in steps.
    """
    from verbeval.core.bootstrap import percentile_ci

    x = step_positions(steps)
    k = len(point)
    n_steps = (~np.isnan(point)).sum(1)
    fits = fit_sigmoids(x, point)
    x_aoa, reason = aoa_reasons(
        x, point, fits, n_steps=n_steps, min_checkpoints=min_checkpoints, min_rise=min_rise, min_r2=min_r2
    )
    lo_ci = np.full(k, np.nan)
    hi_ci = np.full(k, np.nan)
    share = np.full(k, np.nan)
    has = np.flatnonzero(reason == "")
    if boot is not None and len(boot) and len(has):
        b = boot.shape[0]
        yb = boot[:, has, :].reshape(b * len(has), -1)
        init = np.tile(fits.params[has], (b, 1))
        bf = fit_sigmoids(x, yb, init=init)
        bx, _ = aoa_reasons(
            x,
            yb,
            bf,
            n_steps=np.tile(n_steps[has], b),
            min_checkpoints=min_checkpoints,
            min_rise=min_rise,
            min_r2=min_r2,
        )
        bx = bx.reshape(b, len(has))
        lo, hi = percentile_ci(bx, confidence)
        lo_ci[has], hi_ci[has] = 10.0**lo, 10.0**hi
        share[has] = np.isfinite(bx).mean(0)
    return pd.DataFrame(
        {
            "aoa_step": 10.0**x_aoa,
            "aoa_log10_step": x_aoa,
            "ci_low": lo_ci,
            "ci_high": hi_ci,
            "boot_share": share,
            "lo": fits.params[:, 0],
            "hi": fits.params[:, 1],
            "k": fits.params[:, 2],
            "x0": fits.params[:, 3],
            "r2": fits.r2,
            "reason": reason.astype(str),
        },
        columns=list(AOA_COLUMNS),
    )

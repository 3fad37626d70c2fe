"""The tests of a paired comparison (:mod:`verbeval.agreement.scores.paired`) and their minimum
detectable differences: McNemar's exact test, Durkalski et al.'s clustered McNemar test with the
interval and ``mdd`` of that same test, the ``mdd`` read off a bootstrap interval, and Holm's
adjustment (docs/metrics.md, "Paired comparisons")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verbeval.core.bootstrap import Clusters
from verbeval.core.errors import MismatchError

#: the power at which ``mdd`` (the minimum detectable difference of a comparison row) is computed
POWER = 0.8

#: an interval whose ends lie within this (times the larger of 1 and its ends' magnitude) of each other has
#: no real width (rounding noise of equal differences: no ``mdd``), and an end within it of 0 does not
#: exclude 0 (:func:`no_width`, :func:`excludes_zero`)
NO_WIDTH = 1e-12


def _tolerance(ci_low: np.ndarray, ci_high: np.ndarray) -> np.ndarray:
    return NO_WIDTH * np.fmax(1.0, np.fmax(np.abs(ci_low), np.abs(ci_high)))


def no_width(ci_low: np.ndarray, ci_high: np.ndarray) -> np.ndarray:
    """Whether each interval has no real width: its ends equal up to :data:`NO_WIDTH` of their scale."""
    lo, hi = np.asarray(ci_low, dtype=np.float64), np.asarray(ci_high, dtype=np.float64)
    return (hi - lo) <= _tolerance(lo, hi)


def excludes_zero(ci_low: np.ndarray, ci_high: np.ndarray) -> np.ndarray:
    """Whether each interval excludes 0 by more than rounding (:data:`NO_WIDTH`); NaN ends: False."""
    lo, hi = np.asarray(ci_low, dtype=np.float64), np.asarray(ci_high, dtype=np.float64)
    tol = _tolerance(lo, hi)
    return (lo > tol) | (hi < -tol)


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test of two paired binary outcomes."""

    n: int  #: paired rows
    a_only: int  #: rows only ``a`` gets right
    b_only: int  #: rows only ``b`` gets right
    p_value: float


def mcnemar_exact(a_correct: np.ndarray, b_correct: np.ndarray) -> McNemar:
    """McNemar's exact two-sided test of paired outcomes (:mod:`verbeval.agreement.scores.paired`)."""
    from scipy.stats import binomtest

    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    if a.shape != b.shape:
        raise MismatchError(f"paired outcomes of different lengths: {a.shape} and {b.shape}")
    a_only, b_only = int((a & ~b).sum()), int((b & ~a).sum())
    discordant = a_only + b_only
    p = 1.0 if discordant == 0 else float(binomtest(min(a_only, b_only), discordant, 0.5).pvalue)
    return McNemar(len(a), a_only, b_only, p)


@dataclass(frozen=True)
class Durkalski:
    """Durkalski et al.'s (2003) McNemar test of clustered matched pairs: with ``d_k`` the rows of
    cluster ``k`` only ``a`` gets right less those only ``b`` does, ``chi2 = (sum_k d_k)^2 / sum_k d_k^2``
    on 1 df. ``b - a`` (a share of the ``n`` rows) is ``-sum_k d_k / n``, and the test is the normal
    test of it with standard error ``se = sqrt(sum_k d_k^2) / n``: its interval (:meth:`interval`)
    excludes 0 exactly when it rejects, and its ``mdd`` (:meth:`mdd`) is read off that ``se``. By
    Cauchy-Schwarz ``chi2 <= K`` (the clusters), so ``p >= P(chi2_1 > K)`` (:meth:`floor`) whatever the
    data: with few clusters the test cannot reject at all."""

    n: int  #: paired rows
    clusters: int  #: K, the clusters of those rows
    total: float  #: sum_k d_k (a_only - b_only)
    spread: float  #: sum_k d_k^2

    @property
    def p_value(self) -> float:
        """Two-sided; 1 when every cluster's discordant rows balance, NaN with fewer than 2 clusters."""
        from scipy.stats import chi2

        if self.clusters < 2:
            return float("nan")
        return 1.0 if self.spread == 0 else float(chi2.sf(self.total**2 / self.spread, 1))

    @property
    def floor(self) -> float:
        """The smallest p-value ``K`` clusters allow, ``P(chi2_1 > K)`` (NaN with fewer than 2)."""
        from scipy.stats import chi2

        return float(chi2.sf(self.clusters, 1)) if self.clusters >= 2 else float("nan")

    def interval(self, level: float) -> tuple[float, float]:
        """The test's two-sided interval of ``b - a`` at ``level``: ``-total / n +- z_{(1+level)/2} se``
        (NaN with fewer than 2 clusters)."""
        from scipy.stats import norm

        if self.clusters < 2 or self.n == 0:
            return float("nan"), float("nan")
        z, diff = norm.ppf(0.5 + level / 2.0), -self.total / self.n
        half = z * math.sqrt(self.spread) / self.n
        return diff - half, diff + half

    def reaches(self, alpha: float, power: float = POWER) -> bool:
        """Whether the test's power point at two-sided level ``alpha`` (the difference whose statistic
        is ``z_{1-alpha/2} + z_power`` standard errors) is within its largest statistic, ``sqrt(K)``."""
        from scipy.stats import norm

        return self.clusters >= 2 and (norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power)) ** 2 <= self.clusters

    def mdd(self, alpha: float, power: float = POWER) -> float:
        """The smallest ``|b - a|`` the test at two-sided level ``alpha`` detects with ``power``,
        ``(z_{1-alpha/2} + z_power) se``; NaN where it does not :meth:`reach` that point with ``K``
        clusters, and where ``se`` is 0 (no discordant row: no spread to read it off)."""
        from scipy.stats import norm

        if not self.reaches(alpha, power) or self.spread == 0:
            return float("nan")
        return float((norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power)) * math.sqrt(self.spread) / self.n)


def durkalski(a_correct: np.ndarray, b_correct: np.ndarray, cluster: Sequence[object]) -> Durkalski:
    """Durkalski's test of the paired outcomes, ``cluster`` each row's cluster (:class:`Durkalski`)."""
    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    code = Clusters.of(cluster).codes[0]
    if a.shape != b.shape or a.shape != code.shape:
        raise MismatchError(f"clustered paired outcomes of different lengths: {a.shape}, {b.shape} and {code.shape}")
    per_cluster = np.bincount(code, weights=(a & ~b).astype(np.float64) - (b & ~a), minlength=code.max(initial=-1) + 1)
    return Durkalski(len(a), len(per_cluster), float(per_cluster.sum()), float((per_cluster**2).sum()))


def clustered_mcnemar(a_correct: np.ndarray, b_correct: np.ndarray, cluster: Sequence[object]) -> float:
    """The two-sided p-value of Durkalski et al.'s (2003) McNemar test of clustered matched pairs
    (:class:`Durkalski`; ``cluster``: each row's). With one row per cluster it is McNemar's chi-square
    without continuity correction, ``(b - c)^2 / (b + c)``. 1 when every cluster's discordant rows
    balance (none discordant); NaN with fewer than 2 clusters."""
    return durkalski(a_correct, b_correct, cluster).p_value


def mcnemar_mdd(n: int, discordant: int, alpha: float, power: float = POWER) -> float:
    """The smallest ``|b - a|`` (a share of the ``n`` paired rows) that McNemar's test at two-sided
    level ``alpha`` detects with ``power`` when the discordant rate is ``discordant / n``: Connor's (1987)
    normal approximation ``n = (z_{1-alpha/2} sqrt(p_d) + z_power sqrt(p_d - d^2))^2 / d^2`` solved for
    ``d`` (it falls as ``d`` grows). NaN without discordant rows (the rate the power rests on is 0), and
    when even ``d = p_d`` (every discordant row one way) needs more than ``n`` rows."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    if n <= 0 or discordant <= 0:
        return float("nan")
    p_d = discordant / n
    z_a, z_b = norm.ppf(1.0 - alpha / 2.0), norm.ppf(power)

    def excess(d: float) -> float:  # Connor's n at d, less n
        return (z_a * np.sqrt(p_d) + z_b * np.sqrt(max(p_d - d * d, 0.0))) ** 2 / (d * d) - n

    if excess(p_d) > 0:
        return float("nan")
    return float(brentq(excess, p_d * 1e-9, p_d, xtol=1e-12))


def bootstrap_mdd(ci_low: np.ndarray, ci_high: np.ndarray, level: float, power: float = POWER) -> np.ndarray:
    """The smallest ``|b - a|`` a normal test at two-sided level ``1 - level`` detects with ``power``,
    its standard error read off the percentile interval at ``level``: ``se = (ci_high - ci_low) /
    (2 z_{(1+level)/2})``, ``mdd = (z_{(1+level)/2} + z_power) se``; NaN where the interval is, and where
    it has no real width (:func:`no_width`: every resample gave the same difference, up to rounding, so
    there is no spread to read a standard error off)."""
    from scipy.stats import norm

    lo, hi = np.asarray(ci_low, dtype=np.float64), np.asarray(ci_high, dtype=np.float64)
    z = norm.ppf(0.5 + level / 2.0)
    se = (hi - lo) / (2.0 * z)
    with np.errstate(invalid="ignore"):
        return np.where(~no_width(lo, hi) & (se > 0), (z + norm.ppf(power)) * se, np.nan)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries left out and kept NaN). Each is non-decreasing in
    every input p-value, so the adjusted values of the smallest inputs possible are the smallest possible."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = len(idx)
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out

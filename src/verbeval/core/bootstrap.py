"""The percentile bootstrap every study reports its confidence intervals with.

One seeded generator (``numpy.random.default_rng(seed)``) draws every resample of ``n`` rows,
``block`` resamples at a time (:func:`resample_blocks`), so equal ``n``, seed and block give equal
resamples; a statistic is computed for a whole block at once (no Python loop over rows), and its CI
is the percentile interval of its values over the resamples, NaN resamples left out
(:func:`percentile_ci`). A resample is drawn in one of two ways:

* ``counts``: how often each row is drawn (multinomial counts, ``[block, n]`` float64), for a
  statistic that is a weighted sum over the rows, such as the column means of :func:`bootstrap_means`
  (a matrix product; the agreement study's per-group summaries);
* ``indices``: the drawn row indices (``[block, n]`` int64), for a statistic of the resampled values
  themselves, such as Spearman's rho of their ranks (:func:`verbeval.simverb.statistics.bootstrap_spearman`).

The two take different numbers from the generator, so each statistic keeps the way it was
published with.

A clustered bootstrap (:class:`Clusters`; ``agreement.bootstrap.cluster``, docs/metrics.md) draws
clusters of rows instead of rows: the ``counts`` stream of the ``G`` clusters, and each row weighs
its cluster's count (with two crossed dimensions, the product of its two clusters' counts).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from verbeval.core import count_draws
from verbeval.core.steps import CLUSTERINGS as CLUSTERINGS  # re-exported: the choices of agreement.bootstrap.cluster

log = logging.getLogger(__name__)

Draw = Literal["counts", "indices"]

#: resamples a percentile interval should have beyond each of its ends (fewer: an end is a handful of draws)
MIN_TAIL_DRAWS = 10


def draw_counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """``[size, n]`` float64 multinomial counts of ``n`` rows drawn with replacement (``counts`` draws)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=size).astype(np.float64)


def resample_blocks(n: int, resamples: int, seed: int, block: int, draw: Draw) -> Iterator[tuple[slice, np.ndarray]]:
    """``(rows, resampled)`` per block: ``rows`` the block's slice of the ``resamples`` resamples,
    ``resampled`` its ``[len(rows), n]`` draw (see the module docstring for ``draw``)."""
    if draw not in ("counts", "indices"):
        raise ValueError(f"draw must be 'counts' or 'indices', not {draw!r}")
    if draw == "counts" and n > 0:  # the same counts, drawn once per stream (verbeval.core.count_draws)
        stream = count_draws.counts(n, resamples, seed, block)
        for start in range(0, resamples, block):
            rows = slice(start, min(start + block, resamples))
            yield rows, stream[rows].astype(np.float64)
        return
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, block):
        b = min(block, resamples - start)
        if draw == "counts":
            resampled = draw_counts(rng, n, b)
        else:
            resampled = rng.integers(0, n, size=(b, n))
        yield slice(start, start + b), resampled


def stream_seed(seed: int, dimension: int) -> int:
    """The seed of dimension ``dimension``'s count stream of a clustered bootstrap: ``seed`` itself for
    the first (the templates), ``SeedSequence([seed, dimension])``'s first 64-bit word for the others
    (the verbs: an independent stream, whatever the seed)."""
    if dimension == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(dimension)]).generate_state(1, np.uint64)[0])


@dataclass(frozen=True)
class Clusters:
    """The clusters of a bootstrap's rows in one or more crossed dimensions (a template; a template and
    a verb): ``codes[d]`` ``[rows]`` each row's cluster of dimension ``d`` (``0 .. sizes[d] - 1``).

    A resample draws each dimension's clusters with replacement (the ``counts`` stream of its
    ``sizes[d]`` clusters, seeded by :func:`stream_seed`), and a row weighs the product of its
    clusters' counts. ``units``: a ``[rows, units]`` matrix that turns the rows' weights into the
    weights of the units the statistic is over (a context: the mean of its rows'); None: the rows."""

    codes: tuple[np.ndarray, ...]
    sizes: tuple[int, ...]
    units: Any = None

    @classmethod
    def of(cls, *labels: Sequence[object], units: Any = None) -> Clusters:
        """The clusters of rows labelled ``labels`` (one label sequence per dimension)."""
        codes, sizes = [], []
        for lab in labels:
            code, uniques = _factorize(lab)
            codes.append(code)
            sizes.append(len(uniques))
        return cls(tuple(codes), tuple(sizes), units)

    @property
    def n(self) -> int:
        """The units the statistic is over."""
        return self.units.shape[1] if self.units is not None else len(self.codes[0])

    def too_few(self) -> bool:
        """Whether a dimension has fewer than 2 clusters (no clustered interval: NaN)."""
        return min(self.sizes, default=0) < 2

    def weights(self, resamples: int, seed: int, block: int) -> Iterator[tuple[slice, np.ndarray]]:
        """``(rows, weights)`` per block: the block's slice of the resamples and its ``[b, n]`` weights."""
        streams = [count_draws.counts(g, resamples, stream_seed(seed, d), block) for d, g in enumerate(self.sizes)]
        for start in range(0, resamples, block):
            rows = slice(start, min(start + block, resamples))
            w = streams[0][rows][:, self.codes[0]].astype(np.float64)
            for stream, code in zip(streams[1:], self.codes[1:]):
                w *= stream[rows][:, code]
            if self.units is not None:
                w = np.asarray((self.units.T @ np.ascontiguousarray(w.T)).T)
            yield rows, w


def mean_of_rows(unit: np.ndarray, n_units: int) -> Any:
    """The sparse ``[rows, n_units]`` matrix that turns the rows' weights into their units' means
    (``unit``: each row's unit, e.g. its context; a unit with no row weighs 0)."""
    from scipy import sparse

    unit = np.asarray(unit, dtype=np.int64)
    rows = len(unit)
    per_unit = np.bincount(unit, minlength=n_units).astype(np.float64)
    return sparse.csr_matrix((1.0 / per_unit[unit], (np.arange(rows), unit)), shape=(rows, n_units))


def _factorize(labels: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of ``labels`` in order of first appearance (``pandas.factorize``)."""
    import pandas as pd

    codes, uniques = pd.factorize(pd.Series(list(labels), dtype=object), sort=False)
    return np.asarray(codes, dtype=np.int64), np.asarray(uniques)


#: clusters below which a clustered percentile interval (and Durkalski's test) undercovers: a warning
FEW_CLUSTERS = 20


def too_few_clusters(
    group: str, clusters: Clusters, names: Sequence[str], nan: str = "its intervals are NaN"
) -> str | None:
    """The warning line of a group whose clusters are too few for a clustered interval, or None
    (``nan``: which of its intervals are NaN)."""
    for size, name in zip(clusters.sizes, names):
        if size < 2:
            return (
                f"group {group!r}: {size} {name}{'' if size == 1 else 's'}: a clustered interval needs at least 2 "
                f"(agreement.bootstrap.cluster), so {nan}"
            )
    return None


def few_clusters(group: str, clusters: Clusters, names: Sequence[str]) -> str | None:
    """The warning line of a group with at least 2 but fewer than :data:`FEW_CLUSTERS` clusters in a
    dimension (its clustered interval undercovers: a lower bound on the uncertainty), or None."""
    for size, name in zip(clusters.sizes, names):
        if 2 <= size < FEW_CLUSTERS:
            return (
                f"group {group!r}: {size} {name}s: a clustered interval from fewer than {FEW_CLUSTERS} undercovers "
                "(agreement.bootstrap.cluster); read it as a lower bound on the uncertainty"
            )
    return None


def weighted_nanmean(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The NaN-ignoring mean of ``values`` along their last axis, each weighed by ``weights``
    (broadcast against them: a resample's weights of the units): ``sum w v / sum w`` over the defined
    values; NaN where no weight falls on one."""
    valid = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights * np.where(valid, values, 0.0)).sum(-1) / (weights * valid).sum(-1)


def bootstrap_statistic(
    statistic: Callable[[np.ndarray], np.ndarray],
    n: int,
    resamples: int,
    seed: int,
    block: int,
    draw: Draw,
    k: int | None = None,
    clusters: Clusters | None = None,
) -> np.ndarray:
    """``statistic`` of every resample: ``[resamples]`` (``k`` None) or ``[resamples, k]``.

    ``statistic`` maps one block's draw (:func:`resample_blocks`) to its ``[b]`` or ``[b, k]`` values;
    with ``clusters`` (``counts`` draws only), the block's weights of the units (:meth:`Clusters.weights`)."""
    out = np.empty((resamples,) if k is None else (resamples, k))
    if clusters is None:
        blocks = resample_blocks(n, resamples, seed, block, draw)
    else:
        blocks = clusters.weights(resamples, seed, block)
    for rows, resampled in blocks:
        out[rows] = statistic(resampled)
    return out


def percentile_ci(stats: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of ``stats`` (``[resamples]`` or ``[resamples, k]``, along the
    resamples) at level ``confidence``, NaN resamples left out; NaN where every resample is NaN."""
    alpha = (1.0 - confidence) / 2
    with warnings.catch_warnings():  # a statistic undefined in every resample gives NaN, as it should
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = _nanquantile(stats, alpha)
        hi = _nanquantile(stats, 1 - alpha)
    return lo, hi


def _nanquantile(stats: np.ndarray, q: float) -> np.ndarray:
    """``np.nanquantile(stats, q, axis=0)``, bit for bit, with the columns that hold no NaN in one
    vectorised ``np.quantile`` (``nanquantile`` takes each column on its own along an axis: most of a
    small aggregation's time)."""
    stats = np.asarray(stats, dtype=np.float64)
    nan = np.isnan(stats).any(axis=0)
    if not np.any(nan):
        return np.quantile(stats, q, axis=0)
    if stats.ndim == 1:
        return np.nanquantile(stats, q)
    out = np.empty(stats.shape[1:])
    out[~nan] = np.quantile(stats[:, ~nan], q, axis=0)
    out[nan] = np.nanquantile(stats[:, nan], q, axis=0)
    return out


def bootstrap_means(
    values: np.ndarray, resamples: int, seed: int, confidence: float, block: int = 100, clusters: Clusters | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NaN-ignoring column means of ``values`` ``[n, k]`` (or ``[n]``) with percentile bootstrap CIs
    over rows: ``(mean, ci_low, ci_high)``, each ``[k]``.

    The resamples are multinomial counts (``draw="counts"``) and each block's means a matrix product,
    so every column shares the same resamples and no Python loop runs over rows. No rows or no
    resamples: NaN CIs. ``clusters``: the resamples draw the rows' clusters (:class:`Clusters`) and
    weigh each row accordingly; fewer than 2 clusters in a dimension: NaN CIs.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    n, k = v.shape
    valid = ~np.isnan(v)
    filled = np.where(valid, v, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(0) / valid.sum(0)
    if n == 0 or resamples <= 0 or (clusters is not None and clusters.too_few()):
        nan = np.full(k, np.nan)
        return mean, nan, nan.copy()
    weights = valid.astype(np.float64)

    def means(counts: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (counts @ filled) / (counts @ weights)

    stats = bootstrap_statistic(means, n, resamples, seed, block, "counts", k, clusters)
    lo, hi = percentile_ci(stats, confidence)
    all_nan = ~valid.any(0)
    lo[all_nan] = np.nan
    hi[all_nan] = np.nan
    return mean, lo, hi


def corrected_resamples_needed(confidence: float, tests: int) -> int:
    """The fewest resamples that put :data:`MIN_TAIL_DRAWS` beyond each end of a percentile interval
    Bonferroni-corrected across ``tests`` (at level ``1 - (1 - confidence) / tests``):
    ``MIN_TAIL_DRAWS * 2 * tests / (1 - confidence)``, rounded up (3,600 for 9 groups at 95%)."""
    return math.ceil(round(MIN_TAIL_DRAWS * 2 * tests / (1.0 - confidence), 9))


def few_resamples(resamples: int, confidence: float, tests: int, setting: str) -> str | None:
    """Why ``resamples`` are too few for intervals corrected across ``tests`` groups (fewer than
    :data:`MIN_TAIL_DRAWS` beyond each end: :func:`corrected_resamples_needed`), or None (also for
    one group, no correction, and for no resamples, no intervals); ``setting``: what sets them."""
    if tests < 2 or resamples <= 0:
        return None
    needed = corrected_resamples_needed(confidence, tests)
    if resamples >= needed:
        return None
    tail = (1.0 - confidence) / tests / 2
    return (
        f"{resamples} bootstrap resamples leave {resamples * tail:.4g} beyond each end of the intervals corrected "
        f"across {tests} groups (level {1 - 2 * tail:.2%}, quantiles {tail:.2%} and {1 - tail:.2%}): set "
        f"{setting} to at least {needed} ({MIN_TAIL_DRAWS} beyond each end)"
    )


def warn_few_resamples(resamples: int, confidence: float, tests: int, setting: str) -> None:
    """Log :func:`few_resamples`' line as a warning, when it has one."""
    why = few_resamples(resamples, confidence, tests, setting)
    if why is not None:
        log.warning(why)

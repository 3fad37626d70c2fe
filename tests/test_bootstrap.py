"""The one percentile bootstrap (core.bootstrap) behind the agreement summaries and the SimVerb CIs:
values recorded from the two implementations it replaced, and a loop-over-resamples reference."""

from __future__ import annotations

import numpy as np
import pytest

from verbeval.core.bootstrap import bootstrap_means, bootstrap_statistic, percentile_ci, resample_blocks
from verbeval.simverb.statistics import bootstrap_spearman

VALUES = np.array(
    [
        [0.0, 1.0, np.nan],
        [1.0, np.nan, np.nan],
        [1.0, 0.5, np.nan],
        [0.0, 0.25, np.nan],
        [1.0, 1.0, np.nan],
        [0.5, 0.0, np.nan],
    ]
)
X = np.array([0.1, 0.4, 0.35, 0.8, 0.2, 0.9, 0.5, 0.55])
Y = np.array([1.0, 3.0, 2.0, 8.0, 2.0, 7.5, 4.0, 9.0])


def test_bootstrap_means_recorded_values() -> None:
    """Bit for bit what agreement.aggregate.bootstrap_means gave before it moved to core."""
    mean, lo, hi = bootstrap_means(VALUES, resamples=37, seed=11, confidence=0.9, block=10)
    assert mean[:2].tolist() == [0.5833333333333334, 0.55]
    assert lo[:2].tolist() == [0.2333333333333333, 0.2833333333333333]
    assert hi[:2].tolist() == [0.9166666666666666, 0.8999999999999995]
    assert np.isnan(mean[2]) and np.isnan(lo[2]) and np.isnan(hi[2])  # an all-NaN column


def test_bootstrap_spearman_recorded_values() -> None:
    """Bit for bit what simverb.statistics.bootstrap_spearman gave with its own resampling loop."""
    assert bootstrap_spearman(X, Y, resamples=41, seed=5, confidence=0.8, block=16) == (
        0.5609756097560974,
        0.9815368735540919,
    )


def test_bootstrap_means_equals_a_loop_over_resamples() -> None:
    """Each resample's NaN-ignoring mean taken row by row from its counts, the percentile CI by numpy."""
    rng = np.random.default_rng(3)
    v = rng.random((23, 2))
    v[rng.random((23, 2)) < 0.3] = np.nan
    resamples, block = 45, 20
    draws = np.concatenate([rng_block for _, rng_block in resample_blocks(23, resamples, 4, block, "counts")])
    assert draws.shape == (resamples, 23) and (draws.sum(axis=1) == 23).all()
    ref = np.array(
        [
            [
                np.nansum(np.repeat(v[:, j], c.astype(int))) / np.repeat(~np.isnan(v[:, j]), c.astype(int)).sum()
                for j in range(2)
            ]
            for c in draws
        ]
    )
    mean, lo, hi = bootstrap_means(v, resamples, seed=4, confidence=0.9, block=block)
    np.testing.assert_allclose(mean, np.nanmean(v, axis=0), rtol=1e-12)
    np.testing.assert_allclose(lo, np.quantile(ref, 0.05, axis=0), rtol=1e-12)
    np.testing.assert_allclose(hi, np.quantile(ref, 0.95, axis=0), rtol=1e-12)


def test_resamples_do_not_depend_on_the_statistic() -> None:
    """The same seed gives the same resamples whatever is computed from them; blocks only group them."""
    idx = [r for _, r in resample_blocks(8, 10, 5, 4, "indices")]
    assert [len(r) for r in idx] == [4, 4, 2] and all(r.shape[1] == 8 and r.min() >= 0 and r.max() < 8 for r in idx)
    again = bootstrap_statistic(lambda r: r[:, 0].astype(float), 8, 10, 5, 4, "indices")
    assert again.tolist() == np.concatenate(idx)[:, 0].tolist()
    with pytest.raises(ValueError, match="draw"):
        next(resample_blocks(8, 10, 5, 4, "rows"))  # type: ignore[arg-type]


def test_percentile_ci_ignores_nan_resamples() -> None:
    stats = np.array([[1.0, np.nan], [2.0, np.nan], [np.nan, np.nan], [3.0, np.nan], [4.0, np.nan]])
    lo, hi = percentile_ci(stats, confidence=0.5)
    assert lo.tolist()[0] == 1.75 and hi.tolist()[0] == 3.25
    assert np.isnan(lo[1]) and np.isnan(hi[1])

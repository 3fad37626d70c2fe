"""The one percentile bootstrap (core.bootstrap) behind the agreement summaries and the SimVerb CIs:
values recorded from the two implementations it replaced, and a loop-over-resamples reference."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO_ROOT
from verbeval.core.bootstrap import (
    bootstrap_means,
    bootstrap_statistic,
    corrected_resamples_needed,
    few_resamples,
    percentile_ci,
    resample_blocks,
)
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

#: the setting the warnings of the agreement bootstrap name
KEY = "agreement.bootstrap.resamples"


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


@pytest.mark.parametrize("seed", range(4))
def test_percentile_ci_is_numpys_nanquantile_bit_for_bit(seed: int) -> None:
    """The vectorised columns without NaN give numpy's ``nanquantile`` bytes, whatever the mix of
    columns with NaN, all NaN or none, their scale and ties."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        r, k = int(rng.integers(1, 120)), int(rng.integers(1, 12))
        stats = rng.normal(size=(r, k)) * 10 ** rng.uniform(-8, 3)
        stats[rng.random((r, k)) < rng.choice([0.0, 0.1, 0.5])] = np.nan
        if rng.random() < 0.3:
            stats = np.round(stats, 1)  # ties
        if rng.random() < 0.2:
            stats[:, 0] = np.nan
        for s in (stats, stats[:, 0]):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                alpha = (1.0 - 0.95) / 2  # as percentile_ci computes it (not 0.025 exactly)
                want = (np.nanquantile(s, alpha, axis=0), np.nanquantile(s, 1 - alpha, axis=0))
            got = percentile_ci(s, confidence=0.95)
            assert [np.asarray(g).tobytes() for g in got] == [np.asarray(w).tobytes() for w in want]


# --------------------------------------------------------------------------- resamples of corrected intervals


def test_corrected_intervals_need_ten_draws_beyond_each_end() -> None:
    """Bonferroni across G groups at 95%: each end at (0.05 / G) / 2, so 10 draws beyond it need
    20 G / 0.05 resamples; 200 (the acquisition demo's old setting) leave about half a draw."""
    assert [corrected_resamples_needed(0.95, g) for g in (2, 9, 10)] == [800, 3600, 4000]
    assert corrected_resamples_needed(0.99, 10) == 20000
    assert few_resamples(200, 0.95, 9, KEY) == (
        "200 bootstrap resamples leave 0.5556 beyond each end of the intervals corrected across 9 groups "
        "(level 99.44%, quantiles 0.28% and 99.72%): set agreement.bootstrap.resamples to at least 3600 "
        "(10 beyond each end)"
    )
    # the default (1,000) for the paper configuration's 10 groups
    assert few_resamples(1000, 0.95, 10, KEY) == (
        "1000 bootstrap resamples leave 2.5 beyond each end of the intervals corrected across 10 groups "
        "(level 99.50%, quantiles 0.25% and 99.75%): set agreement.bootstrap.resamples to at least 4000 "
        "(10 beyond each end)"
    )
    assert few_resamples(3599, 0.95, 9, "resamples") is not None
    assert few_resamples(3600, 0.95, 9, KEY) is None
    assert few_resamples(1000, 0.95, 2, KEY) is None  # 12.5 beyond each end
    assert few_resamples(200, 0.95, 1, KEY) is None  # one group: no correction
    assert few_resamples(0, 0.95, 9, KEY) is None  # no resamples: no intervals


def _aggregate_dir(root: Path, groups: list[str], ew: float) -> Path:
    """An aggregate folder as `verbeval compare` reads it: each group's tse.parquet and scores.parquet."""
    for g in groups:
        (root / g).mkdir(parents=True)
        pd.DataFrame({"row": [0, 1], "context_id": [0, 1], "tse": [1.0, 0.0]}).to_parquet(root / g / "tse.parquet")
        pd.DataFrame({"context_id": [0, 1], "ew_top@1": [ew, ew], "mw_top@1": [ew, ew]}).to_parquet(
            root / g / "scores.parquet"
        )
    return root


def test_comparisons_warn_once_of_too_few_resamples(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`verbeval compare` (report.comparisons.comparisons): one warning for the run, not one per pair."""
    from verbeval.agreement.report.comparisons import comparisons

    groups = [f"g{i}" for i in range(9)]
    dirs = {m: _aggregate_dir(tmp_path / m, groups, ew) for m, ew in (("a", 0.5), ("b", 0.6), ("c", 0.7))}
    pairs = [("consecutive", "a", "b"), ("consecutive", "b", "c")]
    with caplog.at_level(logging.WARNING, logger="verbeval.core.bootstrap"):
        comparisons(pairs, dirs, groups, resamples=200, seed=0, confidence=0.95)
    assert [r.getMessage() for r in caplog.records] == [few_resamples(200, 0.95, 9, KEY)]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="verbeval.core.bootstrap"):
        comparisons(pairs, dirs, groups, resamples=3600, seed=0, confidence=0.95)
    assert caplog.records == []


def test_the_acquisition_demo_has_enough_resamples() -> None:
    """config/acquisition-demo.yaml compares its revisions over its groups without the warning."""
    from verbeval.core.config import validate_config
    from verbeval.workflow.loading import merged_config

    cfg = validate_config(merged_config([REPO_ROOT / "config" / "acquisition-demo.yaml"]))
    boot = cfg["agreement"]["bootstrap"]
    assert len(cfg["agreement"]["groups"]) == 9 and boot["confidence"] == 0.95
    assert few_resamples(boot["resamples"], boot["confidence"], 9, KEY) is None
    assert boot["resamples"] == 4000  # 3,600 needed (10 beyond each end), rounded up


def test_agreement_result_compare_warns_too(caplog: pytest.LogCaptureFixture) -> None:
    """The in-process comparison (AgreementResult.compare) warns of its own `resamples` argument."""
    from verbeval.agreement.api.evaluation import AgreementResult

    def result(name: str, ew: float) -> AgreementResult:
        tse = pd.DataFrame({"row": [0, 1], "context_id": [0, 1], "tse": [1.0, 0.0]})
        scores = pd.DataFrame({"context_id": [0, 1], "ew_top@1": [ew, ew], "mw_top@1": [ew, ew]})
        empty = pd.DataFrame()
        return AgreementResult(
            name, [], empty, empty, empty, empty, {"g1": scores, "g2": scores}, {"g1": tse, "g2": tse}
        )

    with caplog.at_level(logging.WARNING, logger="verbeval.core.bootstrap"):
        rows = result("a", 0.5).compare(result("b", 0.6), resamples=400)
    assert len(rows) == 9
    assert [r.getMessage() for r in caplog.records] == [
        "400 bootstrap resamples leave 5 beyond each end of the intervals corrected across 2 groups (level 97.50%, "
        "quantiles 1.25% and 98.75%): set resamples to at least 800 (10 beyond each end)"
    ]


# --------------------------------------------------------------------------- count streams


def _drawn_each_time(n: int, resamples: int, seed: int, block: int) -> list[np.ndarray]:
    """The counts as the bootstrap drew them before streams were kept: numpy's multinomial, block by block."""
    rng = np.random.default_rng(seed)
    p = np.full(n, 1.0 / n)
    return [
        rng.multinomial(n, p, size=min(block, resamples - s)).astype(np.float64) for s in range(0, resamples, block)
    ]


@pytest.mark.parametrize(("n", "resamples", "block"), [(1, 30, 100), (2, 250, 100), (7, 10, 3), (3000, 120, 50)])
def test_count_streams_are_the_counts_drawn_each_time(
    n: int, resamples: int, block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream kept in memory, on disk, or drawn on a thread gives the very counts numpy draws block by
    block (so every interval keeps its bytes), stored one byte per count."""
    from verbeval.core import count_draws
    from verbeval.core.bootstrap import resample_blocks

    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("VERBEVAL_COUNT_CACHE")
    count_draws.forget()
    expected = _drawn_each_time(n, resamples, 5, block)

    def blocks() -> list[np.ndarray]:
        return [b for _, b in resample_blocks(n, resamples, 5, block, "counts")]

    for how in ("drawn", "memory", "disk", "thread"):
        if how == "disk":
            count_draws.forget()
        if how == "thread":
            count_draws.forget()
            monkeypatch.setenv("VERBEVAL_COUNT_CACHE", "0")
            count_draws.prefetch([(n, resamples, 5, block)], threads=2)
        got = blocks()
        assert len(got) == len(expected) and all(g.dtype == np.float64 for g in got), how
        assert all(np.array_equal(g, e) for g, e in zip(got, expected)), how
    assert count_draws.counts(n, resamples, 5, block).dtype == np.uint8
    assert sorted(p.name for p in (tmp_path / "bootstrap-counts").rglob("counts-*")) == [
        f"counts-n{n}-r{resamples}-s5-b{block}.npy",
        f"counts-n{n}-r{resamples}-s5-b{block}.sha256",
    ]


def test_a_damaged_count_stream_on_disk_is_drawn_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from verbeval.core import count_draws

    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("VERBEVAL_COUNT_CACHE")
    count_draws.forget()
    first = count_draws.counts(500, 40, 1, 100).copy()
    (path,) = (tmp_path / "bootstrap-counts").rglob("*.npy")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one count changed: the sha256 beside it no longer matches
    path.write_bytes(bytes(data))
    count_draws.forget()
    with caplog.at_level(logging.WARNING):
        again = count_draws.counts(500, 40, 1, 100)
    assert np.array_equal(again, first)
    assert caplog.messages == [
        f"{path}: differs from its sha256; not used (moved to {path.name}.corrupt), drawing its counts again"
    ]
    assert path.with_name(path.name + ".corrupt").read_bytes() == bytes(data)  # set aside, not deleted


def test_count_streams_on_disk_stay_within_their_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Least recently used first out, and only the files the cache names (a user's file stays)."""
    from verbeval.core import count_draws

    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("VERBEVAL_COUNT_CACHE")
    monkeypatch.setattr(count_draws, "DISK_BYTES", 45_000)  # two streams of 20 kB
    count_draws.forget()
    folder = count_draws._disk_path((1, 1, 0, 1)).parent
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    for n in (10_000, 10_001, 10_002, 10_003):
        count_draws.counts(n, 2, 0, 100)
    kept = sorted(p.name for p in folder.glob("*.npy"))
    assert kept == ["counts-n10002-r2-s0-b100.npy", "counts-n10003-r2-s0-b100.npy"]
    assert (folder / "notes.txt").read_text() == "mine"

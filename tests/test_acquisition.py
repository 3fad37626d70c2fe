"""Acquisition over training (issue 32 item 1): the lemma-contexts table, the checkpoint index and
its one-line errors, the sigmoid fits and AoA, frequency, changepoints, seeds and the whole
analysis, on synthetic sweeps with planted ground truth.

A synthetic sweep: every context ``c`` of a lemma has a fixed latent threshold ``u_c ~ U(0, 1)``
and is correct at step ``s`` when ``u_c < p_l(s)``, ``p_l`` the lemma's planted sigmoid (so a
context, once right, stays right, and the contexts of a resample are the same at every step, as in
a real sweep). The planted AoA is where ``p_l`` crosses its midpoint (0.5 + hi) / 2.
"""

from __future__ import annotations

import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from verbeval.acquisition.analysis import AcquisitionSettings, run_acquisition
from verbeval.acquisition.fit import REASONS, aoa_estimates, crossing, fit_sigmoids, sigmoid, step_positions
from verbeval.acquisition.frequency import aoa_frequency, file_zipf, spearman_rows, wordfreq_zipf
from verbeval.acquisition.phases import changepoints, curve_changepoints
from verbeval.acquisition.seeds import seed_aoa_agreement, seed_band
from verbeval.agreement.engine.shards import ChunkResult, lemma_set_hash, write_shard
from verbeval.agreement.report.checkpoint_index import (
    INDEX_COLUMNS,
    add_checkpoint,
    check_fit_ready,
    read_checkpoint_index,
    write_checkpoint_index,
)
from verbeval.agreement.scores.lemma_contexts import (
    lemma_contexts_from_shards,
    lemma_contexts_from_stats,
    pack_bits,
    read_lemma_contexts,
    unpack_bits,
    write_lemma_contexts,
)
from verbeval.agreement.scores.lemma_diagnostics import lemma_stats
from verbeval.cli import main
from verbeval.core.errors import InputError

STEPS = np.array([0, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000])
GROUPS = ("g_a", "g_b", "g_c")
N_PER_GROUP = 60  # contexts per group: 180 per lemma, pooled
SETTINGS = dict(min_checkpoints=4, min_rise=0.1, min_r2=0.5, confidence=0.95)


def planted_lemmas(n: int = 16) -> pd.DataFrame:
    """``n`` rising lemmas with known sigmoids over log10 step (AoAs spread over 10^1.6..10^4.4),
    one that never rises (flat at chance) and one whose curve no sigmoid describes (zigzag)."""
    x0 = np.linspace(1.8, 4.2, n)
    rows = [
        {"lemma": f"v{i:02d}", "lo": 0.5, "hi": 0.95, "k": 4.0, "x0": float(x0[i]), "kind": "sigmoid"} for i in range(n)
    ]
    rows.append({"lemma": "zflat", "lo": 0.5, "hi": 0.5, "k": 0.0, "x0": 3.0, "kind": "flat"})
    rows.append({"lemma": "zzigzag", "lo": 0.0, "hi": 0.0, "k": 0.0, "x0": 0.0, "kind": "zigzag"})
    return pd.DataFrame(rows)


def true_share(lem: pd.Series, steps: np.ndarray) -> np.ndarray:
    x = step_positions(steps)
    if lem["kind"] == "zigzag":
        return np.where(np.arange(len(steps)) % 2 == 0, 0.9, 0.15)
    return sigmoid(x, np.array([lem["lo"], lem["hi"], lem["k"], lem["x0"]]))


def true_aoa(lem: pd.Series) -> float:
    return float(crossing(np.array([[lem["lo"], lem["hi"], lem["k"], lem["x0"]]]))[0])


def synthetic_tables(lemmas: pd.DataFrame, seed: int, steps: np.ndarray = STEPS) -> list[pd.DataFrame]:
    """One lemma-contexts table per step (module docstring)."""
    rng = np.random.default_rng(seed)
    u = {g: rng.uniform(size=(N_PER_GROUP, len(lemmas))) for g in GROUPS}
    tables = []
    for t in range(len(steps)):
        p = np.array([true_share(lem, steps)[t] for _, lem in lemmas.iterrows()])
        rows = []
        for g in GROUPS:
            correct = u[g] < p[None, :]
            for j, lemma in enumerate(lemmas["lemma"]):
                rows.append((g, lemma, N_PER_GROUP, int(correct[:, j].sum()), pack_bits(correct[:, j])))
        tables.append(pd.DataFrame(rows, columns=["group", "lemma", "n_contexts", "n_correct", "correct_bits"]))
    return tables


def summary_rows(model: str, table: pd.DataFrame, random_init: bool, jump: bool) -> pd.DataFrame:
    """summary_all.csv-like rows: EW (top p = 1) = the group's share over (context, lemma); TSE and
    MW planted; group g_a's TSE jumps from 0.55 to 0.9 at step 1000 when ``jump``."""
    rows = []
    step = int(model.rsplit("-", 1)[1])
    for g, d in table.groupby("group"):
        ew = d["n_correct"].sum() / d["n_contexts"].sum()
        tse = (0.9 if step >= 1000 else 0.55) if (jump and g == "g_a") else ew
        for metric, side, cutoff, v in (("tse", "", np.nan, tse), ("ew", "top", 1.0, ew), ("mw", "top", 1.0, ew)):
            rows.append(
                dict(
                    model=model,
                    group=g,
                    metric=metric,
                    side=side,
                    cutoff=cutoff,
                    value=v,
                    ci_low=v - 0.02,
                    ci_high=v + 0.02,
                    n=60,
                    n_total=60,
                    random_init=random_init,
                )
            )
        rows.append(
            dict(
                model=model,
                group=g,
                metric="invalid",
                side="top",
                cutoff=1.0,
                value=0.0,
                ci_low=np.nan,
                ci_high=np.nan,
                n=0,
                n_total=60,
                random_init=random_init,
            )
        )
    return pd.DataFrame(rows)


def write_sweep(
    root: Path, seeds: tuple[str, ...] = ("",), jump: bool = True, lemmas: pd.DataFrame | None = None
) -> Path:
    """A sweep's files and its checkpoints.csv under ``root`` (family 'toy', one row per step and seed)."""
    lemmas = planted_lemmas() if lemmas is None else lemmas
    index = []
    for si, seed in enumerate(seeds):
        for step, table in zip(STEPS, synthetic_tables(lemmas, 100 + si)):
            model = f"toy{seed}@step-{step}"
            folder = root / model
            write_lemma_contexts(table, folder / "lemma_contexts.parquet", {"model": model, "toy": True})
            summary_rows(model, table, False, jump).to_csv(folder / "summary.csv", index=False)
            index.append(
                dict(
                    model=model,
                    family="toy",
                    seed=seed,
                    step=int(step),
                    random_init=False,
                    summary=f"{model}/summary.csv",
                    lemma_contexts=f"{model}/lemma_contexts.parquet",
                )
            )
    write_checkpoint_index(pd.DataFrame(index), root / "checkpoints.csv")
    return root / "checkpoints.csv"


def freq_file(path: Path, lemmas: pd.DataFrame, drop: str | None = None) -> Path:
    """Planted Zipf frequencies: earlier-acquired lemmas are more frequent (zipf = 8 - x0 + noise)."""
    rng = np.random.default_rng(7)
    d = lemmas[lemmas["lemma"] != drop]
    zipf = 8.0 - d["x0"].to_numpy() + rng.normal(0, 0.15, len(d))
    pd.DataFrame({"lemma": d["lemma"], "zipf": zipf}).to_csv(path, index=False)
    return path


def settings(**kw: object) -> AcquisitionSettings:
    base = dict(resamples=60, formats=("png",), frequencies="wordfreq")
    return AcquisitionSettings.defaults(**{**base, **kw})


# --------------------------------------------------------------------------- lemma-contexts table


def _random_shards(tmp_path: Path, rng: np.random.Generator, lemmas: pd.DataFrame) -> list[Path]:
    """Shards of two groups (one in two chunks) with random probabilities and some ties."""
    paths = []
    meta0 = {
        "model_id": "org/tiny",
        "revision": "r1",
        "kind": "causal",
        "cased": False,
        "dtype": "float32",
        "tokenizer_fingerprint": "f" * 64,
        "lemma_set_sha256": lemma_set_hash(lemmas),
        "prepend_bos": False,
        "n_lemmas": len(lemmas),
        "top_k": 2,
        "verbeval_version": "test",
    }
    for group, sizes in (("ga", (7, 5)), ("gb", (9,))):
        n_group, start = sum(sizes), 0
        for chunk, n in enumerate(sizes):
            prob = rng.uniform(size=(n, 2 * len(lemmas))).astype(np.float32)
            prob[0, :2] = 0.25  # a tie: a failure
            res = ChunkResult(
                prob,
                np.zeros_like(prob),
                np.zeros_like(prob),
                np.zeros((n, 2), np.int32),
                np.zeros((n, 2), np.float32),
                np.zeros((0, 2)),
            )
            ctx = pd.DataFrame({"context_id": np.arange(start, start + n), "plural": rng.uniform(size=n) < 0.5})
            meta = {
                **meta0,
                "group": group,
                "chunk": chunk,
                "n_chunks": len(sizes),
                "context_start": start,
                "context_stop": start + n,
                "n_group_contexts": n_group,
            }
            p = tmp_path / f"{group}-{chunk}.parquet"
            write_shard(
                p, ctx, pd.DataFrame({"row": np.zeros(0, np.int64), "context_id": np.zeros(0, np.int64)}), res, meta
            )
            paths.append(p)
            start += n
    return paths


LEMMAS = pd.DataFrame(
    {
        "lemma": ["walk", "bake", "cry", "eat"],
        "sing": ["walks", "bakes", "cries", "eats"],
        "plur": ["walk", "bake", "cry", "eat"],
        "sing_id": [1, 3, 5, 7],
        "plur_id": [2, 4, 6, 8],
    }
)


def test_lemma_contexts_from_shards_match_lemma_stats(tmp_path: Path) -> None:
    """n_correct summed over groups equals lemma_diagnostics' n_correct (an independent path over the
    same shards); the bits unpack to the same counts; the file round-trips with its metadata."""
    shards = _random_shards(tmp_path, np.random.default_rng(3), LEMMAS)
    table = lemma_contexts_from_shards(shards, LEMMAS)
    assert list(table["group"]) == ["ga"] * 4 + ["gb"] * 4
    assert list(table["lemma"][:4]) == sorted(LEMMAS["lemma"])
    assert set(table.groupby("group")["n_contexts"].first().to_dict().items()) == {("ga", 12), ("gb", 9)}
    stats = lemma_stats(shards, LEMMAS, "tiny").set_index("lemma")
    pooled = table.groupby("lemma")[["n_contexts", "n_correct"]].sum()
    assert pooled["n_correct"].to_dict() == stats["n_correct"].to_dict()
    assert pooled["n_contexts"].to_dict() == stats["n_contexts"].to_dict()
    for r in table.itertuples():
        assert unpack_bits(r.correct_bits, r.n_contexts).sum() == r.n_correct
    out = tmp_path / "lc.parquet"
    write_lemma_contexts(table, out, {"model": "tiny", "toy": True})
    back = read_lemma_contexts(out)
    pd.testing.assert_frame_equal(back, table)
    assert back.attrs["verbeval"] == {"model": "tiny", "toy": True}
    assert str(back["n_contexts"].dtype) == "int32"


def test_lemma_contexts_from_stats_by_hand() -> None:
    # two contexts (plural, singular), two lemmas; (P(sing), P(plur)) per lemma
    prob = np.array([[[0.1, 0.3], [0.2, 0.2]], [[0.3, 0.1], [0.1, 0.4]]])
    nan_ctx = np.full((1, 2, 2), np.nan)
    t = lemma_contexts_from_stats(
        {"g": (np.concatenate([prob, nan_ctx]), np.array([True, False, True]))}, ["walk", "bake"]
    )
    assert list(t["lemma"]) == ["bake", "walk"]  # sorted
    assert t["n_contexts"].tolist() == [2, 2]  # the non-finite context is left out
    assert t["n_correct"].tolist() == [0, 2]  # bake: a tie and a wrong one; walk: both right
    assert unpack_bits(t["correct_bits"].iloc[1], 2).tolist() == [True, True]
    assert pack_bits(np.array([True, False, True])) == bytes([0b101])


def test_lemma_contexts_cli(tmp_path: Path) -> None:
    shards = _random_shards(tmp_path, np.random.default_rng(4), LEMMAS)
    lemmas = tmp_path / "lemmas.parquet"
    LEMMAS.to_parquet(lemmas)
    out = tmp_path / "m" / "lemma_contexts.parquet"
    args = ["-q", "lemma-contexts", "--lemmas", str(lemmas), "--model-name", "tiny", "--out", str(out)]
    assert main([*args, "--shards", *map(str, shards)]) == 0
    t = read_lemma_contexts(out)
    assert t.attrs["verbeval"]["forms"]["cry"] == ["cries", "cry"]
    assert t["n_correct"].sum() == lemma_stats(shards, LEMMAS, "tiny")["n_correct"].sum()


def test_read_lemma_contexts_rejects_bad_tables(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such lemma-contexts file"):
        read_lemma_contexts(tmp_path / "none.parquet")
    bad = tmp_path / "bad.parquet"
    pd.DataFrame(
        {"group": ["g"], "lemma": ["x"], "n_contexts": [3], "n_correct": [1], "correct_bits": [b"\x01\x00"]}
    ).to_parquet(bad)
    with pytest.raises(InputError, match="do not fit n_contexts"):
        read_lemma_contexts(bad)


# --------------------------------------------------------------------------- sigmoid fit and AoA


def test_sigmoid_fit_matches_scipy_curve_fit() -> None:
    """An independent float64 reference: scipy's curve_fit (Levenberg-Marquardt) on one noisy curve."""
    from scipy.optimize import curve_fit

    x = step_positions(STEPS)
    rng = np.random.default_rng(11)
    y = sigmoid(x, np.array([0.48, 0.9, 3.0, 3.1])) + rng.normal(0, 0.02, len(x))
    ours = fit_sigmoids(x, y[None])

    def f(x: np.ndarray, lo: float, hi: float, k: float, x0: float) -> np.ndarray:
        return lo + (hi - lo) / (1.0 + np.exp(-k * (x - x0)))

    ref, _ = curve_fit(f, x, y, p0=[0.5, 0.8, 2.0, 2.5], maxfev=20000)
    np.testing.assert_allclose(ours.params[0], ref, rtol=1e-4, atol=1e-5)
    assert ours.r2[0] > 0.98 and bool(ours.converged[0])


def test_step_zero_sits_one_decade_before_the_first_step() -> None:
    np.testing.assert_allclose(step_positions(np.array([0, 10, 100])), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(step_positions(np.array([0, 250])), [np.log10(250) - 1, np.log10(250)])


def test_planted_aoas_are_recovered_with_covering_cis() -> None:
    lemmas = planted_lemmas()
    tables = synthetic_tables(lemmas, 1)
    from verbeval.acquisition.curves import SweepData, context_resamples, lemma_shares

    index = pd.DataFrame({"model": [f"m{i}" for i in range(len(STEPS))], "step": STEPS})
    data = SweepData.from_tables(index, dict(zip(index["model"], tables)))
    counts = context_resamples(data, 200, 0)
    est = aoa_estimates(data.steps, data.lemma_point(), lemma_shares(data, counts), **SETTINGS)
    est.index = data.lemmas
    rising = lemmas[lemmas["kind"] == "sigmoid"].set_index("lemma")
    truth = np.array([true_aoa(r) for _, r in rising.iterrows()])
    got = est.loc[rising.index]
    assert (got["reason"] == "").all()
    err = np.abs(got["aoa_log10_step"].to_numpy() - truth)
    assert err.max() < 0.25  # a quarter decade, with 180 contexts per lemma
    covered = (np.log10(got["ci_low"]) <= truth + 1e-9) & (truth - 1e-9 <= np.log10(got["ci_high"]))
    assert covered.mean() >= 0.8  # 95% CIs; a few misses among 16 are chance
    assert est.loc["zflat", "reason"] == "never_above_chance" and np.isnan(est.loc["zflat", "aoa_step"])
    assert est.loc["zzigzag", "reason"] == "fit_failed" and est.loc["zzigzag", "r2"] < 0.5
    assert set(est["reason"]) <= {"", *REASONS}


def test_no_aoa_outside_the_observed_steps() -> None:
    x = STEPS[1:]  # steps 10 to 1e5 (log10 1 to 5)
    early = sigmoid(step_positions(x), np.array([0.5, 0.95, 5.0, 0.5]))  # crossed before step 10
    late = sigmoid(step_positions(x), np.array([0.5, 0.95, 2.0, 5.4]))  # crosses after step 1e5
    est = aoa_estimates(x, np.stack([early, late]), None, **SETTINGS)
    assert est["reason"].tolist() == ["acquired_before_first_checkpoint", "not_acquired_by_last_checkpoint"]
    assert est["aoa_step"].isna().all()
    short = aoa_estimates(x[:3], early[None, :3], None, **SETTINGS)
    assert short["reason"].tolist() == ["too_few_steps"]


# --------------------------------------------------------------------------- frequency, phases, seeds


def test_frequency_sources(tmp_path: Path) -> None:
    freq, info = wordfreq_zipf({"walk": ("walks", "walk"), "xqzv": ("xqzvs", "xqzv")})
    import wordfreq

    expected = np.log10(wordfreq.word_frequency("walks", "en") + wordfreq.word_frequency("walk", "en")) + 9
    assert freq["zipf"].iloc[0] == pytest.approx(expected)
    assert np.isnan(freq["zipf"].iloc[1]) and freq["frequency_reason"].iloc[1] == "unknown_to_wordfreq"
    assert info["library"] == "wordfreq" and info["version"] == version("wordfreq") == "3.1.1"
    counts = tmp_path / "c.csv"
    pd.DataFrame({"lemma": ["a", "b", "c"], "count": [900, 100, 0]}).to_csv(counts, index=False)
    f, _ = file_zipf(counts, ["a", "b", "c", "d"])
    np.testing.assert_allclose(f["zipf"][:2], [np.log10(0.9) + 9, np.log10(0.1) + 9])
    assert f["frequency_reason"].tolist() == ["", "", "zero_count", "not_in_frequency_file"]
    bad = tmp_path / "bad.csv"
    bad.write_text("lemma,count\na,1\na,2\n")
    with pytest.raises(InputError, match=r"bad.csv:3: lemma 'a' is listed twice"):
        file_zipf(bad, ["a"])


def test_a_frequency_file_of_another_corpus_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    counts = tmp_path / "other.csv"
    pd.DataFrame({"lemma": ["x", "y", "walk"], "count": [5, 3, 2]}).to_csv(counts, index=False)
    with caplog.at_level("WARNING"):
        file_zipf(counts, ["walk", "run", "swim"])  # 1 of 3: below the share
    assert [r.getMessage() for r in caplog.records] == [
        f"{counts}: the frequency file lists 1 of the sweep's 3 lemmas (fewer than 50%): is it this sweep's "
        "corpus? Only those enter the frequency analysis"
    ]
    caplog.clear()
    with caplog.at_level("WARNING"):
        file_zipf(counts, ["walk", "x"])  # 2 of 2
    assert caplog.records == []


def test_aoa_frequency_correlation_and_outliers() -> None:
    rng = np.random.default_rng(5)
    z = rng.uniform(2, 6, 80)
    la = 6.0 - 0.8 * z + rng.normal(0, 0.1, 80)
    la[3] += 1.5  # acquired much later than its frequency predicts
    la[7] -= 1.5  # much earlier
    summary, res, out = aoa_frequency(la, z, resamples=200, seed=0, confidence=0.95, outlier_sd=2.5)
    assert summary["spearman"] < -0.9 and summary["ci_low"] < summary["spearman"] < summary["ci_high"] < -0.8
    assert summary["slope"] == pytest.approx(-0.8, abs=0.05)
    assert out[3] == "later" and out[7] == "earlier" and (out != "").sum() == 2
    from scipy.stats import spearmanr

    assert float(spearman_rows(la[None], z[None])[0]) == pytest.approx(spearmanr(la, z).statistic)
    tied = np.array([[3.0, 1.0, 3.0, 2.0, 1.0]])
    assert float(spearman_rows(tied, np.array([[1.0, 2, 3, 4, 5]]))[0]) == pytest.approx(
        spearmanr(tied[0], [1, 2, 3, 4, 5]).statistic
    )


def test_planted_changepoint_found() -> None:
    x = step_positions(STEPS)
    rng = np.random.default_rng(2)
    v = np.r_[np.full(5, 0.55), np.full(5, 0.9)] + rng.normal(0, 0.01, 10)
    cps, _ = changepoints(v, x, 0.01**2, 3.0)
    assert cps == [5]
    flat, _ = changepoints(0.6 + rng.normal(0, 0.01, 10), x, 0.01**2, 3.0)
    assert flat == []
    # a sigmoid in log step: plateau, rise, plateau
    s = sigmoid(x, np.array([0.5, 0.9, 3.0, 3.0])) + rng.normal(0, 0.005, 10)
    rise, _ = changepoints(s, x, 0.005**2, 3.0)
    assert len(rise) == 2 and rise[0] in (3, 4) and rise[1] in (6, 7)
    curves = pd.DataFrame(
        {
            "family": "f",
            "seed": "",
            "group": "g",
            "metric": "tse",
            "step": STEPS,
            "value": v,
            "ci_low": v - 0.0196,
            "ci_high": v + 0.0196,
            "random_init": False,
        }
    )
    rows = curve_changepoints(curves, beta=3.0, confidence=0.95)
    assert rows[["step_before", "step_after"]].values.tolist() == [[300, 1000]]
    assert rows["value_before"].iloc[0] == pytest.approx(0.55, abs=0.03)
    assert rows["value_after"].iloc[0] == pytest.approx(0.9, abs=0.03)
    assert abs(rows["slope_before"].iloc[0]) < 0.03 and abs(rows["slope_after"].iloc[0]) < 0.03  # two plateaus


def test_seed_band_and_agreement() -> None:
    curves = pd.DataFrame(
        {
            "family": "f",
            "seed": ["s1", "s1", "s2", "s2"],
            "group": "g",
            "metric": "ew",
            "side": "top",
            "cutoff": 1.0,
            "step": [10, 20, 10, 20],
            "value": [0.5, 0.7, 0.6, 0.9],
            "random_init": False,
        }
    )
    band = seed_band(curves)
    assert band[["step", "n_seeds", "mean", "min", "max"]].values.tolist() == [
        [10, 2, 0.55, 0.5, 0.6],
        [20, 2, 0.8, 0.7, 0.9],
    ]
    aoa = pd.DataFrame(
        {
            "family": "f",
            "seed": ["s1"] * 4 + ["s2"] * 4,
            "lemma": list("abcd") * 2,
            "aoa_log10_step": [1.0, 2.0, 3.0, np.nan, 1.2, 2.1, 3.3, 2.0],
            "random_init": False,
        }
    )
    agree = seed_aoa_agreement(aoa)
    assert agree[["seed_a", "seed_b", "n_lemmas"]].values.tolist() == [["s1", "s2", 3]]
    assert agree["spearman"].iloc[0] == pytest.approx(1.0)
    assert agree["mean_abs_log10_diff"].iloc[0] == pytest.approx((0.2 + 0.1 + 0.3) / 3)


# --------------------------------------------------------------------------- index errors


def _index_rows(tmp_path: Path, n: int = 4) -> pd.DataFrame:
    rows = []
    for i in range(n):
        for name in ("s.csv", "lc.parquet"):
            (tmp_path / f"m{i}").mkdir(exist_ok=True)
            (tmp_path / f"m{i}" / name).write_text("x")
        rows.append(
            dict(
                model=f"m{i}",
                family="f",
                seed="",
                step=10**i,
                random_init=False,
                summary=f"m{i}/s.csv",
                lemma_contexts=f"m{i}/lc.parquet",
            )
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d.assign(step=d["step"].astype(object).where(d.index != 2, "")),
            r"checkpoints.csv:4: checkpoint 'm2' has no step",
        ),
        (
            lambda d: d.assign(step=[1, 10, 10, 1000]),
            r"checkpoints.csv:4: family 'f' has two checkpoints at step 10 \(also line 3\)",
        ),
        (
            lambda d: d.assign(summary=["m0/s.csv", "m1/s.csv", "gone.csv", "m3/s.csv"]),
            r"checkpoints.csv:4: checkpoint 'm2': summary file .*gone.csv not found",
        ),
        (lambda d: d.assign(model=["m0", "m1", "m1", "m3"]), r"checkpoints.csv:4: model 'm1' is listed twice"),
    ],
)
def test_index_errors_are_one_line(tmp_path: Path, change, message: str) -> None:
    path = tmp_path / "checkpoints.csv"
    change(_index_rows(tmp_path))[list(INDEX_COLUMNS)].to_csv(path, index=False)
    with pytest.raises(InputError, match=message) as exc:
        read_checkpoint_index(path)
    assert "\n" not in str(exc.value)


def test_add_checkpoint_appends_and_replaces(tmp_path: Path) -> None:
    rows = _index_rows(tmp_path, 4)
    path = tmp_path / "checkpoints.csv"
    for r in rows.iloc[[2, 0, 1]].to_dict("records"):
        add_checkpoint(path, r)
    add_checkpoint(path, {**rows.iloc[0].to_dict(), "random_init": True})  # the same model again: replaced
    add_checkpoint(path, rows.iloc[3].to_dict())
    index = read_checkpoint_index(path)
    assert index["model"].tolist() == ["m0", "m1", "m2", "m3"] and index["step"].tolist() == [1, 10, 100, 1000]
    assert index["random_init"].tolist() == [True, False, False, False]
    assert index["seed"].tolist() == [""] * 4


def test_figure_labels_say_random_and_toy() -> None:
    from verbeval.acquisition.plots import _title_note, family_label, thin_ticks

    assert family_label("toy", False, True) == "toy (toy model)"
    assert family_label("pythia", True, False) == "pythia (random init)"
    assert _title_note({"a"}, {"b"}) == " [random init: meaningless numbers; toy model]"
    assert thin_ticks(300).tolist() == list(range(0, 300, 8)) and thin_ticks(10).tolist() == list(range(10))


def test_step_axis_is_labelled_at_the_checkpoints_steps() -> None:
    """The log step axis names the checkpoints' own steps as plain integers (every k-th of many) and
    labels no minor tick: matplotlib's defaults ran '3x10^1 4x10^1 6x10^1' together on a sweep of less
    than two decades."""
    import matplotlib.pyplot as plt

    from verbeval.acquisition.plots import MAX_STEP_LABELS, _step_axis

    fig, ax = plt.subplots()
    steps = np.array([32, 45, 64, 91, 128, 181, 256, 362, 512])
    ax.plot(steps, np.linspace(0.5, 1, len(steps)))
    assert _step_axis(ax, steps) == " (log scale)"
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["32", "64", "128", "256", "512"] and len(labels) <= MAX_STEP_LABELS
    assert [t.get_text() for t in ax.get_xticklabels(minor=True)] == []
    fig2, ax2 = plt.subplots()
    assert _step_axis(ax2, np.array([0, 1, 10, 100])) == " (symmetric log scale)"
    fig2.canvas.draw()
    assert [t.get_text() for t in ax2.get_xticklabels()] == ["0", "1", "10", "100"]
    plt.close(fig)
    plt.close(fig2)


def test_index_too_few_checkpoints_and_missing_index(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.csv"
    write_checkpoint_index(_index_rows(tmp_path, 3), path)
    index = read_checkpoint_index(path)
    assert index["step"].tolist() == [1, 10, 100]
    with pytest.raises(
        InputError, match=r"family 'f' has 3 checkpoints with distinct steps; a sigmoid fit needs at least 4"
    ):
        check_fit_ready(index, 4)
    with pytest.raises(InputError, match="no such checkpoint index"):
        read_checkpoint_index(tmp_path / "none.csv")


def test_seeds_that_are_not_the_same_model(tmp_path: Path) -> None:
    index = write_sweep(tmp_path, seeds=("s1", "s2"))
    # seed s2's last checkpoint lost two lemmas: not the same model (another lemma set)
    lc = tmp_path / "toys2@step-100000" / "lemma_contexts.parquet"
    t = read_lemma_contexts(lc)
    write_lemma_contexts(t[~t["lemma"].isin(["v00", "v01"])], lc)
    with pytest.raises(
        InputError,
        match=r"family 'toy': seed 'toys2@step-100000' is not the same model as "
        r"'toys1@step-0' \(lemmas 2 missing \(v00, v01\)\)",
    ) as exc:
        run_acquisition(index, tmp_path / "out", settings())
    assert "\n" not in str(exc.value)


# --------------------------------------------------------------------------- the whole analysis


def test_acquisition_end_to_end_with_seeds_and_planted_frequencies(tmp_path: Path) -> None:
    lemmas = planted_lemmas()
    index = write_sweep(tmp_path / "sweep", seeds=("s1", "s2"))
    freq = freq_file(tmp_path / "freq.csv", lemmas, drop="v05")
    out = tmp_path / "out"
    summary = run_acquisition(index, out, settings(frequencies=str(freq)), figures=False)  # figures: below
    for name in (
        "curves.csv",
        "lemma_curves.parquet",
        "lemma_aoa.csv",
        "group_aoa.csv",
        "aoa_frequency.csv",
        "changepoints.csv",
        "seeds.csv",
        "seed_aoa.csv",
        "acquisition.json",
    ):
        assert (out / name).is_file(), name
    aoa = pd.read_csv(out / "lemma_aoa.csv", keep_default_na=False, na_values=[""])
    assert "random_init" in aoa.columns and len(aoa) == 2 * len(lemmas)
    s1 = aoa[aoa["seed"] == "s1"].set_index("lemma")
    truth = {r["lemma"]: true_aoa(r) for _, r in lemmas.iterrows() if r["kind"] == "sigmoid"}
    err = [abs(s1.loc[k, "aoa_log10_step"] - v) for k, v in truth.items()]
    assert max(err) < 0.25
    assert s1.loc["zflat", "reason"] == "never_above_chance"
    assert s1.loc["zzigzag", "reason"] == "fit_failed"
    assert np.isnan(s1.loc["v05", "zipf"]) and s1.loc["v05", "frequency_reason"] == "not_in_frequency_file"
    fr = pd.read_csv(out / "aoa_frequency.csv", keep_default_na=False, na_values=[""])
    assert len(fr) == 2 and (fr["spearman"] < -0.9).all() and (fr["ci_high"] < -0.7).all()
    assert (fr["n_lemmas"] == 15).all()  # 16 rising lemmas, one without a frequency
    groups = pd.read_csv(out / "group_aoa.csv", keep_default_na=False, na_values=[""])
    # the group curve is the group's EW at top p = 1: the same as the summaries' EW at the last step
    last = pd.read_csv(tmp_path / "sweep" / "toys1@step-100000" / "summary.csv")
    ew = last[last["metric"] == "ew"].set_index("group")["value"]
    g1 = groups[groups["seed"] == "s1"].set_index("group")["final_share"]
    np.testing.assert_allclose(g1.to_numpy(), ew.loc[g1.index].to_numpy(), rtol=1e-9)  # %.10g in the CSV
    assert groups["reason"].isna().all() and groups["group"].tolist() == list(GROUPS) * 2
    cps = pd.read_csv(out / "changepoints.csv", keep_default_na=False, na_values=[""])
    tse_a = cps[(cps["group"] == "g_a") & (cps["metric"] == "tse")]
    assert tse_a[["step_before", "step_after"]].values.tolist() == [[300, 1000]] * 2  # each seed
    band = pd.read_csv(out / "seeds.csv", keep_default_na=False, na_values=[""])
    assert (band["n_seeds"] == 2).all() and (band["min"] <= band["mean"]).all() and (band["mean"] <= band["max"]).all()
    agree = pd.read_csv(out / "seed_aoa.csv")
    assert agree["n_lemmas"].iloc[0] == 16 and agree["spearman"].iloc[0] > 0.95
    assert summary["toy_families"] == ["toy"] and summary["lemma_reasons"] == {"fit_failed": 2, "never_above_chance": 2}
    curves = pd.read_csv(out / "curves.csv", keep_default_na=False, na_values=[""])
    assert set(curves["metric"]) == {"tse", "ew", "mw"} and "random_init" in curves.columns
    lc = pd.read_parquet(out / "lemma_curves.parquet")
    pooled = lc[(lc["group"] == "") & (lc["seed"] == "s1") & (lc["lemma"] == "zflat")]
    assert (pooled["n_contexts"] == 3 * N_PER_GROUP).all()


def test_acquisition_reruns_byte_identical(tmp_path: Path) -> None:
    """Two runs give the same bytes in every table (the figures' own reproducibility is
    :func:`verbeval.core.plots.save_figure`'s); the command line writes the figures too."""
    index = write_sweep(tmp_path / "sweep")
    outs = [tmp_path / "out0", tmp_path / "out1"]
    run_acquisition(index, outs[0], settings(resamples=30), figures=False)
    assert (
        main(
            ["-q", "acquisition", "--index", str(index), "--out", str(outs[1]), "--bootstrap", "30", "--formats", "png"]
        )
        == 0
    )
    tables = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file())
    assert len(tables) == 9
    for f in tables:
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f
    figures = sorted(p.name for p in (outs[1] / "figures").iterdir())
    assert figures == ["aoa_frequency.png", "curves.png", "lemma_heatmap.png"]


def test_acquisition_cli_too_few_checkpoints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = write_sweep(tmp_path / "sweep")
    d = pd.read_csv(index, keep_default_na=False)
    d[d["step"] <= 30].to_csv(index, index=False)
    assert main(["-q", "acquisition", "--index", str(index), "--out", str(tmp_path / "o")]) == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "family 'toy' has 3 checkpoints with distinct steps" in err[0]


def test_benchmark_acquisition_speed(tmp_path: Path) -> None:
    """Printed benchmark (not a timed test): the fits of ~10 checkpoints x 9 groups x 300 lemmas x
    100 contexts with 200 resamples."""
    from verbeval.acquisition.curves import SweepData, context_resamples, group_shares, lemma_shares

    rng = np.random.default_rng(0)
    n_l, n_g, n_c = 300, 9, 100
    x0 = rng.uniform(1.5, 4.5, n_l)
    p = sigmoid(step_positions(STEPS), np.column_stack([np.full(n_l, 0.5), np.full(n_l, 0.9), np.full(n_l, 4.0), x0]))
    correct = {f"g{g}": rng.uniform(size=(1, n_c, n_l)) < p.T[:, None, :] for g in range(n_g)}
    data = SweepData(
        STEPS, [f"m{i}" for i in range(len(STEPS))], [f"l{i}" for i in range(n_l)], sorted(correct), correct
    )
    t0 = time.perf_counter()
    counts = context_resamples(data, 200, 0)
    est = aoa_estimates(data.steps, data.lemma_point(), lemma_shares(data, counts), **SETTINGS)
    gboot = np.stack([group_shares(data, counts, g) for g in data.groups], axis=1)
    aoa_estimates(data.steps, np.stack([data.group_point(g) for g in data.groups]), gboot, **SETTINGS)
    dt = time.perf_counter() - t0
    print(
        f"\nacquisition fits: {n_l} lemmas x {n_g} groups x {n_c} contexts x {len(STEPS)} steps, 200 resamples: "
        f"{dt:.2f} s"
    )
    assert (est["reason"] == "").mean() > 0.9


# --------------------------------------------------------------------------- sweeps by words or tokens seen


def test_index_by_words_seen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`acquisition-index --axis words` keeps each checkpoint's words seen in the step column and
    records the axis; the analysis reports it and labels its figures in words seen."""
    sweep = tmp_path / "sweep"
    write_sweep(sweep)
    words = {int(s): (int(s) + 1) * 1_000_000 for s in STEPS}  # chck_1M ... (0 steps: 1M words)
    summary_all = sweep / "summary_all.csv"
    pd.concat([pd.read_csv(sweep / f"toy@step-{s}" / "summary.csv") for s in STEPS]).to_csv(summary_all, index=False)
    argv = ["-q", "acquisition-index", "--summary", str(summary_all)]
    for s in STEPS:
        m = f"toy@step-{s}"
        argv += ["--checkpoint", m, "toy", "", str(words[int(s)]), str(sweep / m / "lemma_contexts.parquet")]
    index = tmp_path / "checkpoints.csv"
    assert main([*argv, "--axis", "words", "--out", str(index)]) == 0
    raw = pd.read_csv(index, keep_default_na=False)
    assert list(raw.columns) == [*INDEX_COLUMNS, "axis"] and set(raw["axis"]) == {"words"}
    d = read_checkpoint_index(index)
    assert d.attrs["axis"] == "words" and d["step"].tolist() == [words[int(s)] for s in STEPS]
    assert d["step"].iloc[-1] == 100_001_000_000
    # the default: no axis column, byte for byte the index of before
    steps_index = tmp_path / "steps.csv"
    assert main([*argv, "--out", str(steps_index)]) == 0
    assert (
        "axis" not in pd.read_csv(steps_index).columns and read_checkpoint_index(steps_index).attrs["axis"] == "steps"
    )
    # one axis per index
    mixed = raw.assign(axis=["words"] * (len(raw) - 1) + ["tokens"])
    mixed.to_csv(index, index=False)
    with pytest.raises(InputError, match=r"checkpoints.csv:11: axis tokens, but line 2 has axis words"):
        read_checkpoint_index(index)
    raw.assign(axis="epochs").to_csv(index, index=False)
    with pytest.raises(InputError, match=r"checkpoints.csv:2: axis 'epochs' is not one of steps, tokens, words"):
        read_checkpoint_index(index)
    # the analysis: AoA in words seen, named in acquisition.json and the figures
    raw.to_csv(index, index=False)
    summary = run_acquisition(index, tmp_path / "out", settings(resamples=20), figures=False)
    assert summary["axis"] == "words"
    curves = pd.read_csv(tmp_path / "out" / "curves.csv")
    assert curves["step"].min() == 1_000_000
    from verbeval.acquisition.plots import plot_curves

    fig = plot_curves(curves, x_label="words seen")
    ax = next(a for a in fig.axes if a.get_xlabel() == "words seen (log scale)")
    labels = ax.xaxis.get_major_formatter().seq  # ticks at the checkpoints (thinned), compact
    assert labels[0] == "1M" and {x[-1] for x in labels} == {"M", "B"}
    from verbeval.agreement.report.dvc_views import acquisition_plot_definitions

    [plot] = acquisition_plot_definitions({"g_a": "dvc/g_a.csv"}, ["toy tse"], "words seen")
    assert plot["acquisition/g_a"]["x_label"] == "words seen"


def _best_segmentation(v: np.ndarray, x: np.ndarray, pen: float, min_size: int = 3) -> tuple[list[int], float]:
    """Every segmentation enumerated (segments of at least min_size points), each segment's cost the
    residual sum of squares of its least-squares line by numpy: the penalised optimum, without ruptures."""
    import itertools

    def rss(a: int, b: int) -> float:
        design = np.column_stack([x[a:b], np.ones(b - a)])
        coef = np.linalg.lstsq(design, v[a:b], rcond=None)[0]
        return float(((v[a:b] - design @ coef) ** 2).sum())

    t, best = len(v), ([], float("inf"))
    for k in range(t // min_size):
        for cuts in itertools.combinations(range(min_size, t - min_size + 1), k):
            b = [0, *cuts, t]
            if all(b[i + 1] - b[i] >= min_size for i in range(k + 1)):
                total = sum(rss(b[i], b[i + 1]) for i in range(k + 1)) + k * pen
                if total < best[1]:
                    best = (list(cuts), total)
    return best


def test_changepoints_are_the_exact_penalised_optimum_where_pelt_misses_it() -> None:
    """A curve where ruptures' PELT (pruned) cuts after 3 points, while the documented objective is
    lowest for the cut after 4 (0.01327 against PELT's higher total): the search finds the optimum that
    every segmentation enumerated finds; so it does on random sigmoid curves."""
    import ruptures

    v = np.array([0.5296, 0.5049, 0.5317, 0.7022, 0.8603, 0.8851, 0.9299, 0.8712])
    x = np.array([0.0, 0.30103, 0.750858, 1.200687, 1.650515, 2.100343, 2.550172, 3.0])
    sigma2 = 0.02**2
    cps, pen = changepoints(v, x, sigma2, 3.0)
    assert pen == pytest.approx(3 * sigma2 * np.log(8))
    best, total = _best_segmentation(v, x, pen)
    assert cps == best == [4] and total == pytest.approx(0.0132652, abs=1e-6)
    signal = np.column_stack([v, x, np.ones(8)])
    assert ruptures.Pelt(model="linear", min_size=3, jump=1).fit(signal).predict(pen=pen)[:-1] == [3]
    rng = np.random.default_rng(7)
    for _ in range(40):
        t = int(rng.integers(6, 12))
        xs = np.log10(np.r_[1, np.geomspace(2, 1000, t - 1)])
        vs = 0.5 + 0.4 / (1 + np.exp(-(xs - rng.uniform(0.5, 2.5)) * rng.uniform(1, 6))) + rng.normal(0, 0.02, t)
        found, pen = changepoints(vs, xs, sigma2, 3.0)
        assert found == _best_segmentation(vs, xs, pen)[0]


def _dynp_changepoints(v: np.ndarray, x: np.ndarray, pen: float) -> list[int]:
    """The cuts of the documented objective by ruptures' exact Dynp, one search per number of
    changepoints (what verbeval ran before issue 63): an independent reference."""
    import ruptures

    t = len(v)
    algo = ruptures.Dynp(model="linear", min_size=3, jump=1).fit(np.column_stack([v, x, np.ones(t)]))
    best, best_total = [t], algo.cost.sum_of_costs([t])
    for k in range(1, t // 3):
        bkps = algo.predict(n_bkps=k)
        total = algo.cost.sum_of_costs(bkps) + k * pen
        if total < best_total:
            best, best_total = bkps, total
    return [int(b) for b in best[:-1]]


def test_changepoints_are_ruptures_dynp_cuts_on_longer_curves() -> None:
    """The optimal-partitioning programme finds the cuts of ruptures' Dynp on curves too long to
    enumerate (12-40 checkpoints: plateaus, one or two rises, noise of several sizes), and a
    1,000-checkpoint curve costs it a fraction of a second's arithmetic (Dynp: hours)."""
    rng = np.random.default_rng(11)
    n_cuts = []
    for _ in range(30):
        t = int(rng.integers(12, 41))
        xs = np.log10(np.r_[1, np.geomspace(2, 10**5, t - 1)])
        rises = [0.4 / (1 + np.exp(-(xs - rng.uniform(0.5, 4.5)) * rng.uniform(1, 8))) for _ in range(2)]
        vs = 0.3 + rises[0] + rng.choice([0.0, 1.0]) * rises[1] + rng.normal(0, rng.choice([0.005, 0.02, 0.05]), t)
        sigma2 = float(rng.choice([0.005, 0.02])) ** 2
        found, pen = changepoints(vs, xs, sigma2, 3.0)
        assert found == _dynp_changepoints(vs, xs, pen)
        n_cuts.append(len(found))
    assert len(set(n_cuts)) >= 3  # curves of several numbers of phases
    xs = np.log10(np.arange(1, 1001))
    vs = 0.5 + 0.4 / (1 + np.exp(-(xs - 2) * 4)) + rng.normal(0, 0.01, 1000)
    found, _ = changepoints(vs, xs, 0.01**2, 3.0)
    assert 1 <= len(found) <= 10 and all(b - a >= 3 for a, b in zip([0, *found], [*found, 1000]))

"""Ties and fragile decisions (verbeval.agreement.scores.precision) on constructed probabilities with
known ties and near-ties, their margins checked against float32 spacings computed by hand; and the
commands that read a run's shards (precision-audit, flip-set) on synthetic stores: a damaged shard, another
lemma set, another model."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from verbeval.agreement.scores.precision import decision_counts, margin_ulps, tse_ties_correct
from verbeval.core.config import schema_default


def test_margins_in_float32_spacings_ties_and_near_ties() -> None:
    unit = float(np.spacing(np.float32(5.0)))  # 4.76837158203125e-07: float32 spacing at magnitude 5
    assert unit == 2.0**-21
    ps = np.exp(np.array([-5.0, -5.0, -5.0, -5.0, -60.0, 0.0, np.nan]))
    pp = np.exp(np.array([-5.0, -5.0 + 3 * unit, -5.0 - 100 * unit, -2.0, -np.inf, -np.inf, -1.0]))
    pp[4] = 0.0
    ps[5], pp[5] = 0.0, 0.0  # both underflowed: a tie
    m = margin_ulps(ps, pp)
    assert m[0] == 0.0  # an exact tie
    assert m[1] == pytest.approx(3.0, abs=1e-6)  # 3 spacings at magnitude 5
    # magnitude 5 + 100 units is still below 8, where the spacing doubles: 100 spacings
    assert m[2] == pytest.approx(100.0, abs=1e-6)
    assert m[3] == pytest.approx(3.0 / unit)  # a clear decision
    assert m[4] == np.inf and m[5] == 0.0 and np.isnan(m[6])
    counts = decision_counts(ps, pp)
    assert counts == {"n": 6, "ties": 2, "fragile": 1}  # the 3-spacing pair; 100 > FRAGILE_ULPS
    assert schema_default("agreement.precision_audit.fragile_ulps") == 16.0
    assert decision_counts(ps, pp, threshold=101)["fragile"] == 2


@pytest.mark.parametrize("threshold", [1.0, 16.0, 1000.0])
def test_decision_counts_equal_counting_every_margin(threshold: float) -> None:
    """decision_counts computes margins only where the relative difference allows a fragile one; its
    counts equal those of every pair's margin_ulps, on planted near-ties (a few float32 spacings apart),
    ties, zeros, NaN and float64 probabilities below float32's range."""
    rng = np.random.default_rng(7)
    for trial in range(120):
        n = int(rng.integers(1, 800))
        ps = rng.random(n).astype(np.float32).astype(np.float64) ** int(rng.integers(1, 30))
        near = rng.choice(n, int(rng.integers(0, n + 1)), replace=False)
        pp = ps.copy()
        steps = np.float32(2**-23) * rng.integers(-200, 200, len(near)).astype(np.float32)
        pp[near] = ((np.float32(1) + steps).astype(np.float64) * ps[near]).astype(np.float32)
        if trial % 5 == 0:
            pp[rng.integers(0, n)] = np.nan
        if trial % 7 == 0:
            ps[rng.integers(0, n)] = 0.0
        if trial % 13 == 0:
            ps = rng.random(n) * 1e-300
            pp = ps * (1 + 1e-13 * rng.integers(-50, 50, n))
        m = margin_ulps(ps, pp)
        valid = ~np.isnan(m)
        ties = valid & (ps == pp)
        expected = {
            "n": int(valid.sum()),
            "ties": int(ties.sum()),
            "fragile": int((valid & ~ties & (m < threshold)).sum()),
        }
        assert decision_counts(ps, pp, threshold) == expected
    assert decision_counts(np.zeros(0), np.zeros(0), threshold) == {"n": 0, "ties": 0, "fragile": 0}


def test_tse_with_ties_counted_correct_as_lm_evaluation_harness_does() -> None:
    tse = np.array([1.0, 0.0, 0.0, np.nan])
    ps = np.array([0.6, 0.3, 0.2, np.nan])
    pp = np.array([0.4, 0.3, 0.5, 0.1])
    assert np.nanmean(tse) == pytest.approx(1 / 3)  # verbeval: the tie (row 1) is wrong
    assert tse_ties_correct(tse, ps, pp) == pytest.approx(2 / 3)
    assert np.isnan(tse_ties_correct(np.array([np.nan]), ps[:1], pp[:1]))


def test_a_softmax_tie_of_equal_logits_is_found_in_float64() -> None:
    """Two equal logits give equal probabilities (a tie), one float32 step apart a fragile decision."""
    logits = np.array([2.5, 2.5, np.float64(np.nextafter(np.float32(2.5), np.float32(3))), -1.0])
    p = np.exp(logits - np.log(np.exp(logits).sum()))
    counts = decision_counts(p[[0, 0]], p[[1, 2]])
    assert counts == {"n": 2, "ties": 1, "fragile": 1}


# ---- the commands that read shards (precision-audit, flip-set): damaged shards, other lemma sets and models


def _run(root: Path, meta: dict[str, object]) -> tuple[Path, list[Path], Path]:
    """A synthetic shard store of group g1 (tests/test_aggregate.py's) with ``meta`` in its manifest, and
    its aggregates (``root/out``)."""
    from test_aggregate import _aggregate_args, _store
    from verbeval.cli import main

    root.mkdir(parents=True)
    manifest, shards = _store(root, meta)
    assert main(["-q", *_aggregate_args(root, manifest)]) == 0
    return manifest, shards, root / "out"


def _lemmas(path: Path, n: int) -> Path:
    pd.DataFrame({"lemma": [f"v{i}" for i in range(n)]}).to_parquet(path)
    return path


def _audit_args(tmp_path: Path, results: Path, manifest: Path, lemmas: Path) -> list[str]:
    return ["precision-audit", f"--results=m={results}", f"--shards=m={manifest}", f"--lemmas=m={lemmas}",
            "--groups=g1", "--out", str(tmp_path / "audit.csv")]  # fmt: skip


def _flip_args(tmp_path: Path, ref: tuple[Path, Path], other: tuple[Path, Path], lemmas: Path) -> list[str]:
    return ["flip-set", "--model-name=m", "--dtype=bfloat16", f"--reference-results={ref[1]}",
            f"--reference-shards={ref[0]}", f"--other-results={other[1]}", f"--other-shards={other[0]}",
            f"--lemmas={lemmas}", "--groups=g1", "--resamples=10", "--flips", str(tmp_path / "flips.csv"),
            "--comparison", str(tmp_path / "comparison.csv")]  # fmt: skip


META = {"model_id": "org/tiny", "revision": "abc123", "dtype": "float32", "n_lemmas": 4}


def _damage(shard: Path) -> tuple[str, str]:
    """Four bytes of ``shard`` flipped in place (same size): its sha256 before and after."""
    from verbeval.core.io import sha256_file

    before = sha256_file(shard)
    data = bytearray(shard.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 4):
        data[i] ^= 0xFF
    shard.write_bytes(bytes(data))
    return before, sha256_file(shard)


@pytest.mark.parametrize("command", ["precision-audit", "flip-set"])
def test_a_damaged_shard_is_moved_aside_and_its_manifest_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """As aggregate does: the next plain run (Snakemake's or dvc repro) lacks the manifest, so it
    reruns the model's inference job, which keeps the intact shards and recomputes this one."""
    from verbeval.cli import main

    manifest, shards, results = _run(tmp_path / "ref", META)
    lemmas = _lemmas(tmp_path / "lemmas.parquet", 4)
    if command == "precision-audit":
        args = _audit_args(tmp_path, results, manifest, lemmas)
    else:
        other = _run(tmp_path / "bf16", {**META, "dtype": "bfloat16"})
        args = _flip_args(tmp_path, (manifest, results), (other[0], other[2]), lemmas)
    listed, found = _damage(shards[1])
    assert main(["-q", *args]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"verbeval {command}: error: {shards[1]}: sha256 {found[:12]}... differs from the shard manifest's "
        f"{listed[:12]}... (the file changed after it was written); moved it to {shards[1]}.corrupt and removed "
        f"the stale manifest {manifest}: rerun the workflow (snakemake or dvc repro) to recompute it"
    ]
    assert not shards[1].exists() and shards[1].with_name(shards[1].name + ".corrupt").exists()
    assert not manifest.exists() and shards[0].exists() and shards[2].exists()


@pytest.mark.parametrize("command", ["precision-audit", "flip-set"])
def test_shards_of_another_lemma_set_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Before: ``ValueError: cannot reshape array of size ... into shape (...)``."""
    from verbeval.cli import main

    manifest, _, results = _run(tmp_path / "ref", META)
    lemmas = _lemmas(tmp_path / "lemmas.parquet", 5)
    if command == "precision-audit":
        args = _audit_args(tmp_path, results, manifest, lemmas)
    else:
        other = _run(tmp_path / "bf16", {**META, "dtype": "bfloat16"})
        args = _flip_args(tmp_path, (manifest, results), (other[0], other[2]), lemmas)
    assert main(["-q", *args]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"verbeval {command}: error: {manifest}: shards of 4 lemmas but {lemmas} lists 5: "
        "not the lemma set the shards were computed with"
    ]
    assert manifest.exists()  # nothing is wrong with the shards


def test_shards_of_another_lemma_set_of_the_same_size_are_refused(tmp_path: Path) -> None:
    from verbeval.agreement.engine.shards import check_lemma_set, lemma_set_hash
    from verbeval.core.errors import MismatchError

    lemmas = pd.DataFrame({"lemma": ["a", "b"], "sing": ["is", "has"], "plur": ["are", "have"],
                           "sing_id": [1, 2], "plur_id": [3, 4]})  # fmt: skip
    lemmas.to_parquet(tmp_path / "lemmas.parquet")
    manifest, _, _ = _run(tmp_path / "ref", {"n_lemmas": 2, "lemma_set_sha256": lemma_set_hash(lemmas)})
    assert check_lemma_set(manifest, tmp_path / "lemmas.parquet") == 2
    lemmas.assign(plur_id=[3, 5]).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(MismatchError) as e:
        check_lemma_set(manifest, tmp_path / "other.parquet")
    assert str(e.value) == (
        f"{manifest}: shards of another lemma set than {tmp_path / 'other.parquet'} (both 2 lemmas, "
        "their lemma_set_sha256 differs)"
    )


@pytest.mark.parametrize(
    "other_meta, message",
    [
        ({"model_id": "org/other"}, "{other}: model_id 'org/other', but the reference run {ref} has 'org/tiny': "
         "a flip set compares one model in two dtypes"),
        ({"revision": "def456"}, "{other}: revision 'def456', but the reference run {ref} has 'abc123': "
         "a flip set compares one model in two dtypes"),
        ({"dtype": "float32"}, "{other}: shards in float32, not --dtype bfloat16"),
        (None, "{ref}: the reference run is in bfloat16 too: a flip set compares two dtypes"),
    ],
)  # fmt: skip
def test_flip_set_compares_one_model_in_two_dtypes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], other_meta: dict[str, str] | None, message: str
) -> None:
    """Before: another float32 model given as the bfloat16 run gave its flips silently."""
    from verbeval.cli import main

    ref_meta = {**META, "dtype": "bfloat16"} if other_meta is None else META
    ref, _, ref_results = _run(tmp_path / "ref", ref_meta)
    other, _, other_results = _run(tmp_path / "bf16", {**META, "dtype": "bfloat16", **(other_meta or {})})
    lemmas = _lemmas(tmp_path / "lemmas.parquet", 4)
    assert main(["-q", *_flip_args(tmp_path, (ref, ref_results), (other, other_results), lemmas)]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "verbeval flip-set: error: " + message.format(other=other, ref=ref)
    ]


def test_flip_set_of_one_model_in_two_dtypes_runs(tmp_path: Path) -> None:
    """The same shards as float32 and bfloat16 runs (the checks pass): nothing flips, nothing moves."""
    from verbeval.cli import main

    ref, _, ref_results = _run(tmp_path / "ref", META)
    other, _, other_results = _run(tmp_path / "bf16", {**META, "dtype": "bfloat16"})
    lemmas = _lemmas(tmp_path / "lemmas.parquet", 4)
    assert main(["-q", *_flip_args(tmp_path, (ref, ref_results), (other, other_results), lemmas)]) == 0
    assert pd.read_csv(tmp_path / "flips.csv").empty
    assert (pd.read_csv(tmp_path / "comparison.csv")["difference"] == 0).all()


TF32_CPU, TF32_GPU = {**META, "dtype": "tf32", "matmul": "float32"}, {**META, "dtype": "tf32", "matmul": "tf32"}


@pytest.mark.parametrize(
    "ref_meta, other_meta, dtype, kind",
    [
        (META, TF32_CPU, "tf32", "tf32 on CPU = float32"),
        (TF32_CPU, META, "float32", "tf32 on CPU = float32"),  # a model configured in tf32, on a CPU
        (META, TF32_GPU, "tf32", "dtype"),  # on a GPU: a flip set as bfloat16's
        (TF32_CPU, {**META, "dtype": "bfloat16"}, "bfloat16", "dtype"),
    ],
)
def test_a_tf32_flip_set_computed_on_a_cpu_says_it_is_float32(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    ref_meta: dict[str, object],
    other_meta: dict[str, object],
    dtype: str,
    kind: str,
) -> None:
    """A tf32 run's shards record its matrix products (``matmul``): float32 where it ran on a CPU, where
    the run is a float32 run. Its flip set against float32 then says ``tf32 on CPU = float32`` in
    comparison.csv where a flip set says ``dtype``, and the log says that its flips are no finding."""
    from verbeval.cli import main

    ref, _, ref_results = _run(tmp_path / "ref", ref_meta)
    other, _, other_results = _run(tmp_path / "other", other_meta)
    lemmas = _lemmas(tmp_path / "lemmas.parquet", 4)
    args = [a.replace("--dtype=bfloat16", f"--dtype={dtype}") for a in _flip_args(tmp_path, (ref, ref_results), (other, other_results), lemmas)]  # fmt: skip
    assert main(["-q", *args]) == 0
    flips, moves = pd.read_csv(tmp_path / "flips.csv"), pd.read_csv(tmp_path / "comparison.csv")
    assert flips.empty and (moves["difference"] == 0).all() and len(moves) == 3  # TSE, EW, MW of g1
    assert moves["model_b"].unique().tolist() == [f"m@{dtype}"] and moves["kind"].unique().tolist() == [kind]
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if kind == "dtype":
        assert warned == []
    else:
        assert warned == [
            f"m in {dtype}: tf32 on CPU = float32 (both runs' matrix products were float32): 0 decisions flipped, "
            f"no finding about TF32 -> {tmp_path / 'flips.csv'}"
        ]

"""Paired comparisons (verbeval.agreement.scores.paired) against planted ground truth: McNemar's exact
p-value by hand and by scipy, Holm by hand, a paired bootstrap CI that covers a planted difference at
its nominal rate, and two models that differ on known rows."""

from __future__ import annotations

import dataclasses
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, norm

from test_callback import GROUPS, suite  # noqa: F401 - the hand-made suite of the in-process test
from tiny_cache import tiny_model
from verbeval.agreement.scores.paired import (
    COMPARISON_COLUMNS,
    POWER,
    bootstrap_mdd,
    compare_groups,
    holm,
    mcnemar_exact,
    mcnemar_mdd,
    paired_mean_difference,
)
from verbeval.core.errors import MismatchError, VerbevalError


def test_mcnemar_exact_is_the_two_sided_binomial_p_of_the_discordant_rows() -> None:
    a = np.array([1] * 8 + [0] * 2 + [1] * 30 + [0] * 5, bool)  # 8 rows only a, 2 only b, 30 both, 5 neither
    b = np.array([0] * 8 + [1] * 2 + [1] * 30 + [0] * 5, bool)
    test = mcnemar_exact(a, b)
    assert (test.n, test.a_only, test.b_only) == (45, 8, 2)
    by_hand = 2 * sum(comb(10, k) for k in range(3)) / 2**10  # 112 / 1024
    assert test.p_value == pytest.approx(by_hand, rel=1e-12) == pytest.approx(0.109375)
    assert test.p_value == pytest.approx(binomtest(2, 10, 0.5).pvalue, rel=1e-12)
    assert mcnemar_exact(a, a).p_value == 1.0  # no discordant row
    assert mcnemar_exact(np.ones(6, bool), np.zeros(6, bool)).p_value == pytest.approx(2 / 64)
    with pytest.raises(ValueError, match="different lengths"):
        mcnemar_exact(a, b[:-1])


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04 -> running maximum 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, np.nan]).tolist()[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert np.isnan(holm([0.01, 0.04, 0.03, np.nan])[3])
    assert holm([0.5, 0.9]).tolist() == [1.0, 1.0]  # capped at 1
    assert holm([]).tolist() == []


def test_paired_bootstrap_ci_covers_a_planted_difference_at_its_nominal_rate() -> None:
    """Contexts with a shared difficulty (so a and b are strongly correlated) and a planted mean
    difference of 0.03: over 200 data sets the 90% CI covers it about 90% of the time, and it is far
    narrower than the two unpaired CIs would suggest."""
    rng = np.random.default_rng(11)
    covered, widths = 0, []
    reps, n, delta = 200, 150, 0.03
    for rep in range(reps):
        difficulty = rng.normal(0.7, 0.15, n)
        a = difficulty + rng.normal(0, 0.02, n)
        b = difficulty + delta + rng.normal(0, 0.02, n)
        diff, lo, hi = paired_mean_difference(a, b, resamples=400, seed=rep, confidence=0.9)
        assert diff[0] == pytest.approx(b.mean() - a.mean())
        covered += lo[0] <= delta <= hi[0]
        widths.append(hi[0] - lo[0])
    assert 0.84 <= covered / reps <= 0.95
    unpaired = 2 * 1.645 * np.sqrt(2 * (0.15**2 + 0.02**2) / n)  # the width independent samples would give
    assert np.mean(widths) < unpaired / 5


def test_paired_difference_ignores_nan_per_model_and_uses_the_bootstrap_stream() -> None:
    a = np.array([[1.0, np.nan], [0.0, 0.5], [1.0, 1.0], [np.nan, 0.0]])
    b = np.array([[1.0, 1.0], [1.0, 0.5], [1.0, np.nan], [1.0, 0.0]])
    diff, lo, hi = paired_mean_difference(a, b, resamples=50, seed=3, confidence=0.95)
    assert diff.tolist() == pytest.approx([1.0 - 2 / 3, 0.5 - 0.5])
    again = paired_mean_difference(a, b, resamples=50, seed=3, confidence=0.95)
    assert np.array_equal(lo, again[1]) and np.array_equal(hi, again[2])  # seeded: the same draws
    assert np.isnan(paired_mean_difference(a, b, resamples=0, seed=3, confidence=0.95)[1]).all()


@pytest.mark.parametrize(("n", "discordant", "alpha"), [(2000, 200, 0.05), (400, 100, 0.05 / 3)])
def test_mcnemar_mdd_is_detected_with_its_power_in_a_simulation(n: int, discordant: int, alpha: float) -> None:
    """Planted rates: a discordant rate p_d = discordant / n split so that b's rate exceeds a's by the
    computed mdd. In 20,000 simulated data sets McNemar's exact test (binomtest) at ``alpha`` rejects
    about POWER of the time. Tolerance 0.03: the Monte Carlo error (sd 0.003, so 3 sd < 0.01) plus the
    exact test's conservatism against Connor's normal approximation (it rejects about 0.02 less often)."""
    d = mcnemar_mdd(n, discordant, alpha)
    p_d = discordant / n
    assert 0 < d < p_d
    z_a, z_b = norm.ppf(1 - alpha / 2), norm.ppf(POWER)  # Connor's n at d is n
    assert (z_a * np.sqrt(p_d) + z_b * np.sqrt(p_d - d * d)) ** 2 / d**2 == pytest.approx(n, rel=1e-9)
    rng = np.random.default_rng(0)
    counts = rng.multinomial(n, [(p_d - d) / 2, (p_d + d) / 2, 1 - p_d], size=20_000)[:, :2]  # a_only, b_only
    pairs, which = np.unique(counts, axis=0, return_inverse=True)
    p = np.array([binomtest(int(min(x, y)), int(x + y), 0.5).pvalue if x + y else 1.0 for x, y in pairs])
    power = float(np.mean(p[which.ravel()] < alpha))
    assert power == pytest.approx(POWER, abs=0.03)


def test_mcnemar_mdd_without_discordant_rows_or_with_too_few_rows_is_nan() -> None:
    assert np.isnan(mcnemar_mdd(1000, 0, 0.05))  # no discordant row: the rate the power rests on is 0
    assert np.isnan(mcnemar_mdd(0, 0, 0.05))
    # 2 of 10 rows discordant: even d = 0.2 (both one way) needs
    # (1.96 sqrt(0.2) + 0.8416 sqrt(0.2 - 0.04))^2 / 0.04 = 36.8 rows
    assert np.isnan(mcnemar_mdd(10, 2, 0.05))
    # p_d = 0.1: d = p_d needs (1.96 sqrt(0.1) + 0.8416 sqrt(0.09))^2 / 0.01 = 76.1 rows, so 70 rows
    # detect nothing and 80 a difference just under 0.1
    assert np.isnan(mcnemar_mdd(70, 7, 0.05))
    assert 0.09 < mcnemar_mdd(80, 8, 0.05) < 0.1


def test_bootstrap_mdd_of_a_known_standard_error() -> None:
    """An interval at level 0.95 of half-width 1.96 has se 1: mdd = z_0.975 + z_0.8 = 2.8016."""
    z = norm.ppf(0.975)
    assert bootstrap_mdd(np.array([-z]), np.array([z]), 0.95)[0] == pytest.approx(z + norm.ppf(0.8))
    assert bootstrap_mdd(np.array([0.0]), np.array([2 * z * 0.01]), 0.95)[0] == pytest.approx(0.028016, abs=1e-6)
    assert np.isnan(bootstrap_mdd(np.array([np.nan]), np.array([1.0]), 0.95)[0])
    # every context's difference 0 (two revisions that decide alike): a [0, 0] interval has no spread to
    # read a standard error off, so no minimum detectable difference (not 0: "a difference of 0.000")
    assert np.isnan(bootstrap_mdd(np.array([0.0]), np.array([0.0]), 0.95)[0])
    same = np.full((50, 2), 0.7)
    _, lo, hi = paired_mean_difference(same, same.copy(), resamples=200, seed=0, confidence=0.95)
    assert (lo == 0).all() and (hi == 0).all() and np.isnan(bootstrap_mdd(lo, hi, 0.95)).all()


def test_bootstrap_mdd_of_a_planted_normal_difference() -> None:
    """Paired differences b - a ~ N(0.01, 0.2^2) over 2,000 contexts: the mean difference has se
    0.2 / sqrt(2000), so a test at 0.95 detects (z_0.975 + z_0.8) * se = 0.01253 with power 0.8; the
    bootstrap's mdd is within 5% of it (the sample sd: about 1.6%; the interval's ends over 2,000
    resamples: about 3%)."""
    rng = np.random.default_rng(5)
    n = 2000
    a = rng.normal(0.5, 0.1, n)
    b = a + rng.normal(0.01, 0.2, n)
    _, lo, hi = paired_mean_difference(a, b, resamples=2000, seed=1, confidence=0.95)
    expected = (norm.ppf(0.975) + norm.ppf(0.8)) * 0.2 / np.sqrt(n)
    assert expected == pytest.approx(0.012530, abs=1e-6)
    assert bootstrap_mdd(lo, hi, 0.95)[0] == pytest.approx(expected, rel=0.05)


def _tse(values: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"row": range(len(values)), "tse": values})


def _scores(ew: list[float], mw: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"context_id": range(len(ew)), "ew_top@1": ew, "mw_top@1": mw})


def test_two_models_that_differ_on_known_rows() -> None:
    """Group g1: b gets 12 more rows right than a and 1 fewer, with a NaN row (a form that is not a
    single token for b) left out; group g2: no discordant row. Holm over the two TSE p-values."""
    a1 = [0.0] * 12 + [1.0] + [1.0] * 20 + [1.0]
    b1 = [1.0] * 12 + [0.0] + [1.0] * 20 + [np.nan]
    rows = {"g1": (_tse(a1), _tse(b1)), "g2": (_tse([1.0, 0.0]), _tse([1.0, 0.0]))}
    ew_a, ew_b = [0.5] * 40, [0.9] * 40
    contexts = {
        "g1": (_scores(ew_a, [0.6] * 40), _scores(ew_b, [0.6] * 40)),
        "g2": (_scores([1.0, 1.0], [0.5, 0.7]), _scores([1.0, 1.0], [0.5, 0.7])),
    }
    out = compare_groups("a", "b", rows, contexts, resamples=200, seed=0, confidence=0.95)
    assert list(out.columns) == list(COMPARISON_COLUMNS) and len(out) == 9  # 2 groups and overall
    t1 = out[(out.group == "g1") & (out.metric == "tse")].iloc[0]
    assert (t1.n, t1.a_only, t1.b_only) == (33, 1, 12)
    p = binomtest(1, 13, 0.5).pvalue
    assert t1.p_value == pytest.approx(p) and t1.p_adjusted == pytest.approx(min(1.0, 2 * p))
    assert t1.value_a == pytest.approx(21 / 33) and t1.value_b == pytest.approx(32 / 33) and bool(t1.significant)
    assert t1.mdd == mcnemar_mdd(33, 13, 0.05 / 2)  # at Holm's worst-case step: Bonferroni's level
    t2 = out[(out.group == "g2") & (out.metric == "tse")].iloc[0]
    assert t2.p_value == 1.0 and t2.p_adjusted == 1.0 and not t2.significant and np.isnan(t2.mdd)
    ew1 = out[(out.group == "g1") & (out.metric == "ew")].iloc[0]
    assert ew1.difference == pytest.approx(0.4) and ew1.ci_low == pytest.approx(0.4) and ew1.significant
    assert ew1.confidence == pytest.approx(0.975) and ew1.correction == "bonferroni"
    assert np.isnan(ew1.mdd)  # every context differs by 0.4: the interval has no width, so no mdd
    mw2 = out[(out.group == "g2") & (out.metric == "mw")].iloc[0]
    assert mw2.difference == 0.0 and not mw2.significant
    # overall: both groups' rows and contexts pooled, no correction, the nominal level
    t_all = out[(out.group == "all") & (out.metric == "tse")].iloc[0]
    assert (t_all.n, t_all.a_only, t_all.b_only) == (35, 1, 12) and t_all.correction == "none"
    assert t_all.p_value == pytest.approx(p) and t_all.p_adjusted == t_all.p_value
    assert t_all.mdd == mcnemar_mdd(35, 13, 0.05) and 0.2 < t_all.mdd < t1.mdd < 13 / 33
    ew_all = out[(out.group == "all") & (out.metric == "ew")].iloc[0]
    assert ew_all.n == 42 and ew_all.confidence == 0.95 and COMPARISON_COLUMNS[-1] == "mdd"
    assert ew_all.mdd == pytest.approx(bootstrap_mdd(ew_all.ci_low, ew_all.ci_high, 0.95)) and ew_all.mdd > 0
    assert ew_all.difference == pytest.approx((40 * 0.9 + 2) / 42 - (40 * 0.5 + 2) / 42)
    bad = {"g1": (_tse([1.0]), _tse([1.0, 0.0]))}
    with pytest.raises(MismatchError) as e:  # a VerbevalError (one line), and a ValueError as before
        compare_groups("a", "b", bad, contexts, resamples=10, seed=0, confidence=0.95)
    assert isinstance(e.value, ValueError) and str(e.value) == (
        "group 'g1': a and b were scored on different template rows: 0 only in a, 1 only in b (first row 1)"
    )


def test_agreement_result_compare_in_process(
    suite: Any,  # noqa: F811
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    tokenizer_path: Any,
) -> None:
    """``AgreementResult.compare``: two tiny GPT-2s (random weights, different seeds) on a hand-made
    suite; the discordant rows are those a pandas merge of the two results' row TSE finds, the EW
    difference is that of the two per-group values, and a result compared with itself differs nowhere."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verbeval.agreement.api.evaluation import evaluate

    results = []
    for seed in (0, 1):
        model_dir = tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path / f"m{seed}", seed=seed)
        model, tok = AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
        results.append(evaluate(model, tok, suite, name=f"seed{seed}", resamples=200))
    a, b = results
    rows = a.compare(b)
    assert list(rows["group"].unique()) == [*GROUPS, "all"]
    assert set(rows["correction"]) == {"holm", "bonferroni", "none"}
    for g in GROUPS:
        m = a.row_tse[g].merge(b.row_tse[g], on="row", suffixes=("_a", "_b")).dropna(subset=["tse_a", "tse_b"])
        t = rows[(rows.group == g) & (rows.metric == "tse")].iloc[0]
        assert t.a_only == int(((m.tse_a == 1) & (m.tse_b == 0)).sum())
        assert t.b_only == int(((m.tse_a == 0) & (m.tse_b == 1)).sum())
        ew = rows[(rows.group == g) & (rows.metric == "ew")].iloc[0]
        per_a, per_b = (r.per_group.set_index("group").loc[g, "ew"] for r in (a, b))
        assert ew.difference == pytest.approx(per_b - per_a, abs=1e-9)
        assert ew.ci_low <= ew.difference <= ew.ci_high
    same = a.compare(a)
    assert (same["difference"] == 0).all() and not same["significant"].any()
    assert (same.loc[same.metric == "tse", "p_value"] == 1.0).all()
    with pytest.raises(VerbevalError) as e:  # before: AttributeError: 'str' object has no attribute 'row_tse'
        a.compare("x")  # type: ignore[arg-type]
    assert str(e.value) == "compare: expected an AgreementResult, got str"
    # the rows are paired by their template identity: another run's rows (same count) are refused
    g = GROUPS[0]
    ids = b.row_ids[g].copy()
    ids[0] = "other.jsonl:1"
    other = dataclasses.replace(b, row_ids={**b.row_ids, g: ids})
    with pytest.raises(MismatchError) as e:
        a.compare(other)
    assert str(e.value) == (
        f"group {g!r}: seed0 and seed1 were scored on different template rows: 1 only in seed0 "
        f"(first {a.row_ids[g][0]}), 1 only in seed1 (first other.jsonl:1)"
    )


def test_each_side_of_a_pair_says_whether_it_is_random() -> None:
    """comparisons.csv flags each side (random_init_a, random_init_b) after the model names."""
    from verbeval.agreement.report.comparisons import with_flags

    rows = compare_groups(
        "a",
        "b",
        {"g": (_tse([1.0, 0.0]), _tse([1.0, 1.0]))},
        {"g": (_scores([0.5, 0.5], [0.5, 0.5]), _scores([0.6, 0.6], [0.6, 0.6]))},
        resamples=10,
        seed=0,
        confidence=0.95,
    )
    flagged = with_flags(rows, "configured", random=["b"])
    assert list(flagged.columns[:5]) == ["kind", "model_a", "model_b", "random_init_a", "random_init_b"]
    assert not flagged["random_init_a"].any() and flagged["random_init_b"].all()


def _ids(rows: list[int]) -> list[str]:
    return [f"s.jsonl:{r + 1}" for r in rows]


def test_rows_are_paired_by_their_template_identity() -> None:
    """Matching identities give the rows of the comparison by row number, bit for bit; the same
    rows in another order are paired by identity (contexts through the rows); the same count of other
    rows (another data version, other errata) is refused, naming how they differ."""
    a, b = [1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]
    rows = {"g": (_tse(a), _tse(b))}
    contexts = {"g": (_scores([0.5, 0.6, 0.7, 0.8], [0.1] * 4), _scores([0.6, 0.6, 0.8, 0.9], [0.2] * 4))}
    kw: dict[str, Any] = {"resamples": 50, "seed": 0, "confidence": 0.95}
    plain = compare_groups("a", "b", rows, contexts, **kw)
    same = compare_groups("a", "b", rows, contexts, **kw, row_ids={"g": (_ids([0, 1, 2, 3]), _ids([0, 1, 2, 3]))})
    pd.testing.assert_frame_equal(plain, same)
    # b's templates list rows 2 and 3 the other way round: b's row 2 is a's row 3 (and its context)
    swapped_b = pd.DataFrame({"row": range(4), "context_id": [0, 1, 3, 2], "tse": [1.0, 1.0, 0.0, 1.0]})
    swapped = compare_groups(
        "a",
        "b",
        {"g": (_tse(a).assign(context_id=range(4)), swapped_b)},
        contexts,
        **kw,
        row_ids={"g": (_ids([0, 1, 2, 3]), _ids([0, 1, 3, 2]))},
    )
    t = swapped[swapped.metric == "tse"].iloc[0]
    assert (t.n, t.a_only, t.b_only) == (4, 0, 1)  # by row number: (4, 1, 2)
    assert t.value_b == 0.75
    ew = swapped[swapped.metric == "ew"].iloc[0]
    assert ew.difference == pytest.approx(0.075) and ew.n == 4
    with pytest.raises(MismatchError) as e:
        compare_groups("a", "b", rows, contexts, **kw, row_ids={"g": (_ids([0, 1, 2, 3]), _ids([0, 1, 2, 4]))})
    assert str(e.value) == (
        "group 'g': a and b were scored on different template rows: 1 only in a (first s.jsonl:4), "
        "1 only in b (first s.jsonl:5)"
    )


def _results(root: Path, tse: list[float], ew: list[float]) -> Path:
    from verbeval.core.io import write_csv, write_parquet

    write_parquet(_tse(tse).assign(context_id=range(len(tse))), root / "g" / "tse.parquet")
    write_parquet(_scores(ew, ew), root / "g" / "scores.parquet")
    write_csv(pd.DataFrame({"random_init": [False]}), root / "g" / "summary.csv")
    return root


def _templates(path: Path, lines: list[int]) -> Path:
    pd.DataFrame({"group": "g", "source": "s.jsonl", "line": lines}).to_parquet(path)
    return path


def _compare(tmp_path: Path, a: Path, b: Path, *templates: str) -> int:
    from verbeval.cli import main

    return main(["-q", "compare", f"--results=a={a}", f"--results=b={b}", *(f"--templates={t}" for t in templates),
                 "--groups=g", "--pair=configured=a,b", "--resamples=20", "--csv", str(tmp_path / "c.csv"),
                 "--first-gains", str(tmp_path / "f.csv"), "--figure", str(tmp_path / "c.png")])  # fmt: skip


def test_compare_refuses_runs_of_other_template_rows_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a 21-line traceback (rows of another count), or a silent pairing (the same count)."""
    a = _results(tmp_path / "a", [1.0, 0.0, 1.0], [0.5, 0.6, 0.7])
    b = _results(tmp_path / "b", [1.0, 1.0], [0.5, 0.6])
    assert _compare(tmp_path, a, b) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "verbeval compare: error: group 'g': a and b were scored on different template rows: 1 only in a "
        "(first row 2), 0 only in b"
    ]
    # the same row count, another data version: one erratum dropped line 2, another line 3
    b = _results(tmp_path / "b3", [1.0, 1.0, 0.0], [0.5, 0.6, 0.7])
    ta, tb = _templates(tmp_path / "ta.parquet", [1, 3, 4]), _templates(tmp_path / "tb.parquet", [1, 2, 4])
    assert _compare(tmp_path, a, b, f"a={ta}", f"b={tb}") == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "verbeval compare: error: group 'g': a and b were scored on different template rows: 1 only in a "
        "(first s.jsonl:3), 1 only in b (first s.jsonl:2)"
    ]
    # one templates.parquet for both (the workflow's): the rows match, the CSV is that of row numbers
    assert _compare(tmp_path, a, b, str(ta)) == 0
    with_ids = (tmp_path / "c.csv").read_bytes()
    assert _compare(tmp_path, a, b) == 0
    assert (tmp_path / "c.csv").read_bytes() == with_ids

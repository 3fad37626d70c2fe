"""Paired comparisons (verbeval.agreement.scores.paired) against planted ground truth: McNemar's exact
p-value by hand and by scipy, Holm by hand, a paired bootstrap CI that covers a planted difference at
its nominal rate, and two models that differ on known rows."""

from __future__ import annotations

from math import comb
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from test_callback import GROUPS, suite  # noqa: F401 - the hand-made suite of the in-process test
from verbeval.agreement.scores.paired import (
    COMPARISON_COLUMNS,
    compare_groups,
    holm,
    mcnemar_exact,
    paired_mean_difference,
)


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
    t2 = out[(out.group == "g2") & (out.metric == "tse")].iloc[0]
    assert t2.p_value == 1.0 and t2.p_adjusted == 1.0 and not t2.significant
    ew1 = out[(out.group == "g1") & (out.metric == "ew")].iloc[0]
    assert ew1.difference == pytest.approx(0.4) and ew1.ci_low == pytest.approx(0.4) and ew1.significant
    assert ew1.confidence == pytest.approx(0.975) and ew1.correction == "bonferroni"
    mw2 = out[(out.group == "g2") & (out.metric == "mw")].iloc[0]
    assert mw2.difference == 0.0 and not mw2.significant
    # overall: both groups' rows and contexts pooled, no correction, the nominal level
    t_all = out[(out.group == "all") & (out.metric == "tse")].iloc[0]
    assert (t_all.n, t_all.a_only, t_all.b_only) == (35, 1, 12) and t_all.correction == "none"
    assert t_all.p_value == pytest.approx(p) and t_all.p_adjusted == t_all.p_value
    ew_all = out[(out.group == "all") & (out.metric == "ew")].iloc[0]
    assert ew_all.n == 42 and ew_all.confidence == 0.95
    assert ew_all.difference == pytest.approx((40 * 0.9 + 2) / 42 - (40 * 0.5 + 2) / 42)
    bad = {"g1": (_tse([1.0]), _tse([1.0, 0.0]))}
    with pytest.raises(ValueError, match="different template rows"):
        compare_groups("a", "b", bad, contexts, resamples=10, seed=0, confidence=0.95)


def test_agreement_result_compare_in_process(suite: Any, tmp_path: Path, tokenizer_path: Any) -> None:  # noqa: F811
    """``AgreementResult.compare``: two tiny GPT-2s (random weights, different seeds) on a hand-made
    suite; the discordant rows are those a pandas merge of the two results' row TSE finds, the EW
    difference is that of the two per-group values, and a result compared with itself differs nowhere."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verbeval.agreement.api.evaluation import evaluate
    from verbeval.core.tiny_models import make_tiny_model

    results = []
    for seed in (0, 1):
        model_dir = make_tiny_model(tokenizer_path("gpt2"), "gpt2", tmp_path / f"m{seed}", seed=seed)
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

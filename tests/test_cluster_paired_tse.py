"""The TSE row of a paired comparison under ``agreement.bootstrap.cluster`` (issue 55) against planted
truth: Durkalski's clustered McNemar p-value (computed here by hand), its reduction to McNemar's
chi-square with one row per cluster, the clustered interval's coverage, the default's values as before,
and the in-memory API's ``cluster``."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from verbeval.agreement.api.evaluation import AgreementResult
from verbeval.agreement.report.comparisons import comparisons, row_templates
from verbeval.agreement.scores.aggregate import row_clusters
from verbeval.agreement.scores.paired import clustered_mcnemar, compare_groups, mcnemar_mdd, paired_mean_difference
from verbeval.core.errors import MismatchError, VerbevalError

M = 5  # rows per template


def _chi2_1df_sf(x: float) -> float:
    """P(chi2_1 > x) = erfc(sqrt(x / 2)), without scipy."""
    return math.erfc(math.sqrt(x / 2))


def _exact_mcnemar(b: int, c: int) -> float:
    """min(1, 2 P(X <= min(b, c))) for X ~ Binomial(b + c, 1/2), by hand."""
    n = b + c
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def _durkalski(a: np.ndarray, b: np.ndarray, cluster: list[str]) -> float:
    """Durkalski et al. (2003), by hand: (sum_k (b_k - c_k))^2 / sum_k (b_k - c_k)^2 on 1 df."""
    d: dict[str, int] = {}
    for x, y, k in zip(a, b, cluster):
        d[k] = d.get(k, 0) + int(x == 1 and y == 0) - int(x == 0 and y == 1)
    return _chi2_1df_sf(sum(d.values()) ** 2 / sum(v * v for v in d.values()))


def _durkalski_interval(a: np.ndarray, b: np.ndarray, cluster: list[str], level: float) -> tuple[float, float]:
    """Durkalski's test as a normal test of b - a, by hand: -sum d / n +- z sqrt(sum d^2) / n."""
    from scipy.stats import norm

    d: dict[str, int] = {}
    for x, y, k in zip(a, b, cluster):
        d[k] = d.get(k, 0) + int(x == 1 and y == 0) - int(x == 0 and y == 1)
    diff, half = (
        -sum(d.values()) / len(a),
        norm.ppf((1 + level) / 2) * math.sqrt(sum(v * v for v in d.values())) / len(a),
    )
    return diff - half, diff + half


def _correlated() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """6 templates of M rows, every row of a template the same pair: t0..t3 only a right (a_only 20),
    t4 only b right (b_only 5), t5 both right."""
    pattern = [(1, 0)] * 4 + [(0, 1), (1, 1)]
    a = np.repeat([p[0] for p in pattern], M).astype(float)
    b = np.repeat([p[1] for p in pattern], M).astype(float)
    return a, b, list(np.repeat([f"t{i}" for i in range(6)], M))


def _frames(a: np.ndarray, b: np.ndarray) -> tuple[tuple[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, ...]]:
    n = len(a)
    ta = pd.DataFrame({"row": range(n), "context_id": range(n), "tse": a})
    scores = pd.DataFrame({"context_id": range(n), "ew_top@1": np.linspace(0, 1, n), "mw_top@1": 0.5})
    return (ta, ta.assign(tse=b)), (scores, scores.assign(**{"ew_top@1": np.linspace(0.1, 1, n)}))


KW = {"resamples": 400, "seed": 3, "confidence": 0.95}


def test_correlated_templates_give_durkalskis_p_value_not_mcnemars() -> None:
    a, b, labels = _correlated()
    rows, scores = _frames(a, b)
    groups = {"g1": rows, "g2": rows}
    contexts = {"g1": scores, "g2": scores}
    plain = compare_groups("a", "b", groups, contexts, **KW)
    out = compare_groups("a", "b", groups, contexts, **KW, cluster="template", templates={"g1": labels, "g2": labels})
    tse, tse_plain = (o[o.metric == "tse"].set_index("group") for o in (out, plain))
    # per group: sum d = 4 * 5 - 5 = 15, sum d^2 = 4 * 25 + 25 = 125: chi2 = 1.8
    assert _durkalski(a, b, labels) == pytest.approx(_chi2_1df_sf(1.8), rel=1e-12)
    assert tse.loc["g1", "p_value"] == pytest.approx(_chi2_1df_sf(1.8), rel=1e-12) == pytest.approx(0.179712, abs=1e-6)
    assert tse_plain.loc["g1", "p_value"] == pytest.approx(_exact_mcnemar(20, 5), rel=1e-12)
    assert tse_plain.loc["g1", "p_value"] == pytest.approx(0.0040773, abs=1e-7)
    assert tse.loc["g1", "p_value"] > 40 * tse_plain.loc["g1", "p_value"]
    assert (tse.loc["g1", "a_only"], tse.loc["g1", "b_only"], tse.loc["g1", "n"]) == (20, 5, 30)
    # Holm over the two equal p-values: 2p; significant no longer (McNemar's rows: significant)
    assert tse.loc["g1", "p_adjusted"] == pytest.approx(2 * _chi2_1df_sf(1.8), rel=1e-12)
    assert not tse.loc["g1", "significant"] and tse_plain.loc["g1", "significant"]
    # the interval is the test's own, at the Bonferroni level: -0.5 +- z(0.9875) sqrt(125) / 30
    level = 1 - 0.05 / 2
    low, high = _durkalski_interval(a, b, labels, level)
    assert (tse.loc["g1", "ci_low"], tse.loc["g1", "ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert low == pytest.approx(-0.5 - 2.241403 * math.sqrt(125) / 30, rel=1e-6) and high > 0
    assert tse.loc["g1", "confidence"] == level
    # its mdd needs a chi-square of (z(0.9875) + z(0.8))^2 = 9.50 at power 0.8; 6 templates give at most 6
    assert np.isnan(tse.loc["g1", "mdd"])
    assert tse.loc["g1", "note"] == (
        "no mdd with 6 templates: power 0.8 at level 0.025 needs a chi-square of 9.51, and Durkalski's is at most 6"
    )
    # the pooled row: 12 (group, template) clusters, sum d = 30, sum d^2 = 250: chi2 = 3.6, nominal level
    assert tse.loc["all", "p_value"] == pytest.approx(_chi2_1df_sf(3.6), rel=1e-12)
    assert tse.loc["all", "p_adjusted"] == tse.loc["all", "p_value"]
    assert tse.loc["all", "confidence"] == 0.95
    pooled = [f"{g}\t{t}" for g in ("g1", "g2") for t in labels]
    low, high = _durkalski_interval(np.tile(a, 2), np.tile(b, 2), pooled, 0.95)
    assert (tse.loc["all", "ci_low"], tse.loc["all", "ci_high"]) == (pytest.approx(low), pytest.approx(high))
    # 12 clusters reach the power point (1.96 + 0.84)^2 = 7.85: mdd = 2.80 sqrt(250) / 60
    assert tse.loc["all", "mdd"] == pytest.approx((1.959964 + 0.841621) * math.sqrt(250) / 60, rel=1e-6)
    assert tse.loc["all", "note"] == "" and not tse.loc["all", "significant"]


def test_one_row_per_cluster_is_mcnemars_chi_square_without_continuity_correction() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.random(60) < 0.5, rng.random(60) < 0.7
    bb, cc = int((a & ~b).sum()), int((b & ~a).sum())
    assert (bb, cc) == (9, 23)
    want = _chi2_1df_sf((bb - cc) ** 2 / (bb + cc))  # 196 / 32 = 6.125
    assert want == pytest.approx(math.erfc(1.75), rel=1e-12) == pytest.approx(0.013328, abs=1e-6)
    assert clustered_mcnemar(a, b, [f"r{i}" for i in range(60)]) == pytest.approx(want, rel=1e-12)
    rows, scores = _frames(a.astype(float), b.astype(float))
    out = compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW, cluster="template",
                         templates={"g": [f"r{i}" for i in range(60)]})  # fmt: skip
    assert out.loc[out.metric == "tse", "p_value"].item() == pytest.approx(want, rel=1e-12)
    # no discordant row (or every cluster's balancing): 1; fewer than 2 clusters: NaN
    assert clustered_mcnemar(a, a, [f"r{i}" for i in range(60)]) == 1.0
    assert np.isnan(clustered_mcnemar(a, b, ["t"] * 60))


def test_the_clustered_tse_interval_covers_the_planted_difference_and_the_per_row_one_does_not() -> None:
    """40 data sets of G = 40 templates of 16 rows, each template's rows all right with probability
    0.5 (a) and 0.6 (b): the planted difference is 0.1."""
    g, m, sets = 40, 16, 40
    labels = list(np.repeat([f"t{i}" for i in range(g)], m))
    rng = np.random.default_rng(55)
    a = np.repeat((rng.random((g, sets)) < 0.5).astype(float), m, axis=0)
    b = np.repeat((rng.random((g, sets)) < 0.6).astype(float), m, axis=0)
    covered = 0
    for s in range(sets):
        rows, scores = _frames(a[:, s], b[:, s])
        out = compare_groups("a", "b", {"g": rows}, {"g": scores}, resamples=1000, seed=0, confidence=0.95,
                             cluster="template", templates={"g": labels})  # fmt: skip
        t = out[out.metric == "tse"].iloc[0]
        covered += bool(t.ci_low <= 0.1 <= t.ci_high)
    _, lo, hi = paired_mean_difference(a, b, 1000, 0, 0.95)  # the rows drawn one by one
    # clustered: nominal 0.95, 3 binomial SDs over 40 sets (3 x 0.034) and the percentile interval's
    # undercoverage with 40 clusters put it at 33 of 40 or more
    assert covered >= 33
    # per row: its SE is sqrt(16) = 4 times too small, so it covers P(|Z| < 1.96 / 4) = 0.38 of the
    # time; 24 of 40 is 3 binomial SDs (0.077) above that
    assert int(((lo <= 0.1) & (0.1 <= hi)).sum()) <= 24


def test_the_default_keeps_mcnemars_exact_test_and_its_columns() -> None:
    a, b, labels = _correlated()
    rows, scores = _frames(a, b)
    for out in (
        compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW),
        compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW, cluster="context", templates={"g": labels}),
    ):
        assert "cluster" not in out.columns
        t = out[out.metric == "tse"].iloc[0]
        assert t.p_value == pytest.approx(_exact_mcnemar(20, 5), rel=1e-12)
        assert np.isnan(t.ci_low) and np.isnan(t.ci_high) and np.isnan(t.confidence)
        assert t.mdd == mcnemar_mdd(30, 25, 0.05)
        assert t.significant


def _lemma_forms(contexts: int) -> dict[str, Any]:
    """``compare_groups``' ``forms`` and ``lemmas`` under template_and_lemma, which its EW and MW rows
    draw lemmas from: two lemmas' form statistics in each context of group g (a right on both, b on
    neither; tests/test_paired_lemma_draw.py's helpers)."""
    from test_paired_lemma_draw import _lemmas, _stats

    plural = np.zeros(contexts, dtype=bool)
    stats = (_stats(np.ones((contexts, 2), dtype=bool)), _stats(np.zeros((contexts, 2), dtype=bool)))
    return {"forms": {"g": tuple((s, plural) for s in stats)}, "lemmas": (_lemmas("go", "see"),) * 2}


def test_template_and_lemma_tests_tse_over_the_templates_as_template_does() -> None:
    a, b, labels = _correlated()
    verbs = [["go/goes", "be/is", "do/does", "see/sees", "run/runs"][i % M] for i in range(len(a))]
    rows, scores = _frames(a, b)
    table = pd.DataFrame({"template": labels, "verb": verbs})
    forms = _lemma_forms(len(a))
    out = compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW, cluster="template_and_lemma",
                         templates={"g": table}, **forms)  # fmt: skip
    t = out[out.metric == "tse"].iloc[0]
    assert (t.ci_low, t.ci_high) == pytest.approx(_durkalski_interval(a, b, labels, 0.95))  # the verbs play no part
    assert t.p_value == pytest.approx(_chi2_1df_sf(1.8), rel=1e-12)  # the templates, as under template
    assert out["cluster"].tolist() == ["template_and_lemma"] * 3
    plain = compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW, cluster="template", templates={"g": labels})
    cols = ["ci_low", "ci_high", "p_value", "mdd", "note", "significant"]
    pd.testing.assert_frame_equal(out.loc[out.metric == "tse", cols], plain.loc[plain.metric == "tse", cols])
    with pytest.raises(VerbevalError) as e:
        compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW, cluster="lemma", templates={"g": labels})
    assert str(e.value) == "agreement.bootstrap.cluster: unknown clustering 'lemma'"


def test_tse_rows_of_one_template_give_nan_and_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Two templates, but only t0's rows have single-token forms in both models."""
    a, b, labels = _correlated()
    b = np.where(np.array(labels) == "t0", b, np.nan)
    rows, scores = _frames(a, b)
    with caplog.at_level(logging.WARNING, logger="verbeval.agreement.scores.paired"):
        out = compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW, cluster="template", templates={"g": labels})
    t = out[out.metric == "tse"].iloc[0]
    assert t.n == M and np.isnan(t.p_value) and np.isnan(t.ci_low) and np.isnan(t.ci_high) and np.isnan(t.mdd)
    assert t.significant is pd.NA and t.note == "no test: 1 template (a clustered one needs 2)"  # no verdict
    assert [r.getMessage() for r in caplog.records] == [
        "group 'g': 1 template: a clustered interval needs at least 2 (agreement.bootstrap.cluster), so its TSE "
        "comparison's test is not defined"
    ]


def _result(name: str, tse: pd.DataFrame, scores: pd.DataFrame, labels: list[str]) -> AgreementResult:
    n = len(tse)
    templates = pd.DataFrame({"source": labels, "line": range(n), "correct": "goes", "incorrect": "go", "group": "g"})
    empty = pd.DataFrame()
    return AgreementResult(
        name, [], empty, empty, empty, empty, {"g": scores}, {"g": tse},
        row_ids={"g": np.array([f"{s}:{i}" for i, s in enumerate(labels)], dtype=object)},
        row_clusters={"g": row_clusters(templates)},
    )  # fmt: skip


def test_agreement_result_compare_takes_the_clustering(caplog: pytest.LogCaptureFixture) -> None:
    a, b, labels = _correlated()
    rows, scores = _frames(a, b)
    ra, rb = _result("a", rows[0], scores[0], labels), _result("b", rows[1], scores[1], labels)
    with caplog.at_level(logging.WARNING):
        out = ra.compare(rb, resamples=400, seed=3, confidence=0.95, cluster="template")
    assert [r.getMessage() for r in caplog.records] == [  # 6 templates: too few to cover at the nominal level
        "group 'g': 6 templates: a clustered interval from fewer than 20 undercovers (agreement.bootstrap.cluster); "
        "read it as a lower bound on the uncertainty"
    ]
    caplog.clear()
    want = compare_groups("a", "b", {"g": rows}, {"g": scores}, **KW, cluster="template", templates={"g": labels})
    pd.testing.assert_frame_equal(out, want)
    assert out.loc[out.metric == "tse", "p_value"].item() == pytest.approx(_chi2_1df_sf(1.8), rel=1e-12)
    # the default: agreement.bootstrap.cluster's (context), McNemar's exact test
    plain = ra.compare(rb, resamples=400, seed=3, confidence=0.95)
    assert "cluster" not in plain.columns
    assert plain.loc[plain.metric == "tse", "p_value"].item() == pytest.approx(_exact_mcnemar(20, 5), rel=1e-12)
    with pytest.raises(VerbevalError) as e:
        ra.compare(rb, cluster="lemma")
    assert str(e.value) == (
        "compare: cluster='lemma': expected one of context, template, template_and_lemma, subject, verb, "
        "subject_and_verb"
    )
    one = [_result(m, rows[i], scores[i], ["t0"] * len(a)) for i, m in enumerate("cd")]
    with caplog.at_level(logging.WARNING):
        out = one[0].compare(one[1], resamples=400, cluster="template")
    assert out.loc[out.metric == "tse", "p_value"].isna().all() and out["significant"].isna().all()
    assert [r.getMessage() for r in caplog.records] == [
        "group 'g': 1 template: a clustered interval needs at least 2 (agreement.bootstrap.cluster), so its "
        "intervals are NaN and its TSE test is not defined"
    ]
    with pytest.raises(MismatchError) as e:
        AgreementResult("x", [], *[pd.DataFrame()] * 4, ra.context_scores, ra.row_tse).compare(rb, cluster="template")
    assert str(e.value) == "group 'g': agreement.bootstrap.cluster template needs the rows' templates"


def test_agreement_result_compare_draws_lemmas_under_template_and_lemma() -> None:
    """AgreementResult.compare(cluster="template_and_lemma") draws lemmas from both results'
    form_stats and lemmas (which evaluate keeps under that clustering only): a right on both lemmas
    in every context (EW 1, MW 0.75), b on neither (0, 0.25), so every draw's EW difference is -1
    and MW's -0.5."""
    from test_paired_lemma_draw import _scores

    a, b, labels = _correlated()
    rows, _ = _frames(a, b)
    forms = _lemma_forms(len(a))
    scores = tuple(_scores(stats) for stats, _ in forms["forms"]["g"])
    ra, rb = (_result(m, rows[i], scores[i], labels) for i, m in enumerate("ab"))
    kw = {"resamples": 400, "seed": 3, "confidence": 0.95, "cluster": "template_and_lemma"}
    with pytest.raises(VerbevalError) as e:
        ra.compare(rb, **kw)
    assert str(e.value) == (
        "compare: cluster='template_and_lemma' draws lemmas from both results' form statistics, but 'a' was "
        "not evaluated with cluster='template_and_lemma'"
    )
    for i, r in enumerate((ra, rb)):
        r.form_stats, r.lemmas = {"g": forms["forms"]["g"][i]}, forms["lemmas"][i]
    out = ra.compare(rb, **kw)
    want = compare_groups("a", "b", {"g": rows}, {"g": scores}, **kw, templates=ra.row_clusters, **forms)
    pd.testing.assert_frame_equal(out, want)
    out = out.set_index("metric")
    assert out.loc["ew", ["difference", "ci_low", "ci_high"]].tolist() == [-1.0, -1.0, -1.0]
    assert out.loc["mw", ["difference", "ci_low", "ci_high"]].tolist() == pytest.approx([-0.5] * 3)


def test_one_verb_under_template_and_lemma_changes_nothing_in_the_tse_row(caplog: pytest.LogCaptureFixture) -> None:
    """Under template_and_lemma the TSE row is Durkalski's test over the templates: rows of one verb pair
    (and 6 templates) get its p-value, interval and note, with no warning about the verbs."""
    from test_paired_lemma_draw import _scores

    a, b, labels = _correlated()
    rows, _ = _frames(a, b)
    forms = _lemma_forms(len(a))
    scores = tuple(_scores(stats) for stats, _ in forms["forms"]["g"])
    ra, rb = (_result(m, rows[i], scores[i], labels) for i, m in enumerate("ab"))  # every row goes/go
    for i, r in enumerate((ra, rb)):
        r.form_stats, r.lemmas = {"g": forms["forms"]["g"][i]}, forms["lemmas"][i]
    with caplog.at_level(logging.WARNING):
        out = ra.compare(rb, resamples=400, seed=3, confidence=0.95, cluster="template_and_lemma")
    t = out[out.metric == "tse"].iloc[0]
    assert t.p_value == t.p_adjusted == pytest.approx(_chi2_1df_sf(1.8), rel=1e-12)
    assert (t.ci_low, t.ci_high) == pytest.approx(_durkalski_interval(a, b, labels, 0.95))
    assert np.isnan(t.mdd) and t.note.startswith("no mdd with 6 templates") and not t.significant
    assert [r.getMessage() for r in caplog.records] == [
        "group 'g': 6 templates: a clustered interval from fewer than 20 undercovers (agreement.bootstrap.cluster); "
        "read it as a lower bound on the uncertainty"
    ]


def test_compare_reads_the_verbs_of_template_and_lemma_from_the_templates(tmp_path: Path) -> None:
    """comparisons() (``verbeval compare``) under template_and_lemma: each row's verb is the pair of its
    ``correct`` and ``incorrect`` forms in templates.parquet, in either order, crossed with its
    template in the TSE interval; the p-value is Durkalski's over the templates. EW and MW read the
    shards and lemmas (tests/test_aggregate.py's synthetic store of group g1, for both models)."""
    from test_aggregate import LEMMA_IDS, PLURAL, TSE_ROWS, _store
    from test_paired_lemma_draw import _lemmas

    manifest, _ = _store(tmp_path)
    lemmas = tmp_path / "lemmas.parquet"
    _lemmas(*(f"v{i}" for i in range(len(LEMMA_IDS)))).to_parquet(lemmas)
    lemma_of = {int(sing): i for i, (sing, _) in enumerate(LEMMA_IDS)}
    forms = [(f"v{lemma_of[sing]}", f"v{lemma_of[sing]}s") for _, sing, _ in TSE_ROWS]
    plural = [bool(PLURAL[c]) for c, _, _ in TSE_ROWS]
    labels = ["t0", "t0", "t1", "t1", "t1", "t2", "t2"]
    pd.DataFrame(
        {"group": "g1", "source": labels, "line": range(len(labels)), "correct": [f[p] for f, p in zip(forms, plural)],
         "incorrect": [f[1 - p] for f, p in zip(forms, plural)], "plural": plural}
    ).to_parquet(tmp_path / "templates.parquet")  # fmt: skip
    verbs = row_templates(tmp_path / "templates.parquet")["g1"]["verb"].tolist()
    assert plural[:2] == [False, True]  # so row 1's correct form is its plural v1s
    assert verbs == ["v0/v0s", "v1/v1s", "v2/v2s", "v3/v3s", "v0/v0s", "v1/v1s", "v3/v3s"]
    # row 4's plural form is no single token: no TSE in either model
    a = np.array([1, 1, 1, 0, np.nan, 1, 1])
    b = np.array([0, 0, 1, 1, np.nan, 0, 1])
    for name, tse, ew in (("a", a, 0.5), ("b", b, 0.75)):
        (tmp_path / name / "g1").mkdir(parents=True)
        rows = pd.DataFrame({"row": range(len(tse)), "context_id": [c for c, _, _ in TSE_ROWS], "tse": tse})
        rows.to_parquet(tmp_path / name / "g1" / "tse.parquet")
        scores = pd.DataFrame({"context_id": range(len(PLURAL)), "ew_top@1": ew, "mw_top@1": ew})
        scores.to_parquet(tmp_path / name / "g1" / "scores.parquet")
    out = comparisons([("configured", "a", "b")], {m: tmp_path / m for m in "ab"}, ["g1"], **KW,
                      templates={m: tmp_path / "templates.parquet" for m in "ab"}, cluster="template_and_lemma",
                      forms={m: (manifest, lemmas) for m in "ab"})  # fmt: skip
    t = out[out.metric == "tse"].iloc[0]
    both = ~np.isnan(a)
    kept = [(lab, v) for lab, v, keep in zip(labels, verbs, both) if keep]
    want = _durkalski_interval(a[both], b[both], [lab for lab, _ in kept], 0.95)
    assert (t.ci_low, t.ci_high) == pytest.approx(want)
    # per template a_only - b_only: t0 2, t1 -1, t2 1: chi2 = 2^2 / 6
    assert (t.a_only, t.b_only, t.n) == (3, 1, 6)
    assert t.p_value == pytest.approx(_durkalski(a[both], b[both], [lab for lab, _ in kept]), rel=1e-12)
    assert t.p_value == pytest.approx(_chi2_1df_sf(4 / 6), rel=1e-12)

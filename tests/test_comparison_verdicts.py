"""Each comparison row's verdict agrees with its own test (issue 61): Durkalski's interval, floor and
mdd against scipy and a direct loop; a clustered test that cannot reject says so and has no mdd; a
test that is not defined has an empty ``significant``; an interval of no real width has no mdd; two
identical models with NaN contexts do not differ; and over random comparisons no row says "not
significant" beside an interval that excludes 0."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2, norm

from verbeval.agreement.report.comparisons import first_gains, with_flags
from verbeval.agreement.scores.paired import (
    POWER,
    bootstrap_mdd,
    compare_groups,
    comparison_cluster_warnings,
    durkalski,
    paired_mean_difference,
    paired_means,
    paired_row_difference,
)
from verbeval.agreement.scores.paired_tests import excludes_zero, no_width
from verbeval.core.io import write_csv
from verbeval.workflow.report_tables import csv_page

KW = {"resamples": 400, "seed": 5, "confidence": 0.95}


def _frames(a: np.ndarray, b: np.ndarray, ew_a: np.ndarray, ew_b: np.ndarray) -> tuple[tuple, tuple]:
    n = len(a)
    ta = pd.DataFrame({"row": range(n), "context_id": range(n), "tse": a})
    sa = pd.DataFrame({"context_id": range(n), "ew_top@1": ew_a, "mw_top@1": ew_a / 2})
    return (ta, ta.assign(tse=b)), (sa, sa.assign(**{"ew_top@1": ew_b, "mw_top@1": ew_b / 2}))


def _loop_durkalski(a: np.ndarray, b: np.ndarray, cluster: list[str]) -> tuple[int, float, float]:
    """(K, sum d, sum d^2) by a direct loop over the rows."""
    d: dict[str, float] = {}
    for x, y, k in zip(a, b, cluster):
        d[k] = d.get(k, 0.0) + (x and not y) - (y and not x)
    return len(d), sum(d.values()), sum(v * v for v in d.values())


@pytest.mark.parametrize("seed", range(6))
def test_durkalskis_interval_excludes_0_exactly_when_it_rejects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 40))
    cluster = [f"t{i}" for i in rng.integers(0, k, 400)]
    a, b = rng.random(400) < 0.5, rng.random(400) < 0.5 + 0.1 * rng.random()
    test = durkalski(a, b, cluster)
    kk, total, spread = _loop_durkalski(a, b, cluster)
    assert (test.clusters, test.total, test.spread) == (kk, total, spread)
    assert test.p_value == pytest.approx(chi2.sf(total**2 / spread, 1), rel=1e-12)
    assert test.floor == pytest.approx(chi2.sf(kk, 1), rel=1e-12) and test.p_value >= test.floor
    for level in (0.9, 0.95, 0.99, 0.995):
        low, high = test.interval(level)
        assert (low + high) / 2 == pytest.approx((b.sum() - a.sum()) / 400)  # b - a over the rows
        assert bool(low > 0 or high < 0) == bool(test.p_value < 1 - level)
        z, zp = norm.ppf((1 + level) / 2), norm.ppf(POWER)
        mdd = test.mdd(1 - level)
        if (z + zp) ** 2 <= kk:  # its power point is reachable: read off the interval's se
            assert mdd == pytest.approx((z + zp) * (high - low) / (2 * z), rel=1e-9)
        else:
            assert np.isnan(mdd)


def _clustered(k: tuple[int, ...], shift: float, seed: int = 0) -> pd.DataFrame:
    """A comparison of len(k) groups, group i of k[i] templates of 10 rows each; b right more often by
    ``shift`` (whole templates right or wrong: strongly clustered)."""
    rng = np.random.default_rng(seed)
    rows, contexts, templates = {}, {}, {}
    for i, kk in enumerate(k):
        a = np.repeat(rng.random(kk) < 0.4, 10).astype(float)
        b = np.repeat(rng.random(kk) < 0.4 + shift, 10).astype(float)
        ew = rng.random(10 * kk)
        rows[f"g{i}"], contexts[f"g{i}"] = _frames(a, b, ew, np.clip(ew + shift, 0, 1))
        templates[f"g{i}"] = [f"t{j}" for j in range(kk) for _ in range(10)]
    return compare_groups("a", "b", rows, contexts, **KW, cluster="template", templates=templates)


def test_two_templates_cannot_reject_and_say_so_instead_of_an_mdd() -> None:
    """Every template of b right and of a wrong: each group's difference is 1, yet with K = 2 Durkalski's
    chi-square is at most 2 (p >= 0.157), so no group row can reject, whatever the data."""
    out = _clustered((2, 2, 2), shift=1.0).set_index(["group", "metric"])
    floor = chi2.sf(2, 1)
    assert floor == pytest.approx(0.157299, abs=1e-6)
    for g in ("g0", "g1", "g2"):
        t = out.loc[(g, "tse")]
        if t.a_only == t.b_only == 0:
            continue
        assert t.p_value >= floor - 1e-12
        assert pd.isna(t.significant) and np.isnan(t.mdd)
        held = min(1.0, 3 * floor)  # Holm over three floors of 0.157: 0.472
        assert t.note == (
            f"cannot reject with 2 templates: Durkalski's chi-square is at most 2, so p >= {floor:.3g} and Holm's "
            f"adjusted p >= {held:.3g}, never below 0.05"
        )
    # the pooled row: 6 (group, template) clusters, chi2 <= 6 (p >= 0.0143) can reject at 0.05, but power 0.8
    # needs (1.96 + 0.84)^2 = 7.85: significant decided, no mdd
    t = out.loc[("all", "tse")]
    assert t.significant is not pd.NA and np.isnan(t.mdd) and t.note.startswith("no mdd with 6 templates")


def test_holms_best_case_decides_whether_a_row_can_reject() -> None:
    """Holm's adjusted p-values only grow with the p-values, so a row can reject when Holm of every
    row's smallest possible p (P(chi2_1 > K)) is below alpha: 4 templates beside 30 can (0.0455 at the
    last step), 4 beside 4 cannot (2 x 0.0455)."""
    floors = chi2.sf([4, 30], 1)
    assert floors[0] == pytest.approx(0.0455, abs=1e-4)
    beside_30 = _clustered((4, 30), shift=0.5).set_index(["group", "metric"])
    assert not beside_30.loc[("g0", "tse"), "note"].startswith("cannot")
    assert beside_30.loc[("g0", "tse"), "significant"] is not pd.NA
    beside_4 = _clustered((4, 4), shift=0.5, seed=1).set_index(["group", "metric"])
    for g in ("g0", "g1"):
        assert pd.isna(beside_4.loc[(g, "tse"), "significant"])
        assert beside_4.loc[(g, "tse"), "note"].startswith("cannot reject with 4 templates")


def test_one_template_leaves_significant_empty_in_the_csv(tmp_path: Path) -> None:
    out = _clustered((1, 3), shift=0.3)
    g0 = out[out.group == "g0"].set_index("metric")
    assert g0["significant"].isna().all() and g0["mdd"].isna().all()
    assert g0.loc["tse", "note"] == "no test: 1 template (a clustered one needs 2)"
    assert g0.loc["ew", "note"] == "no interval: 1 template (a clustered one needs 2)"
    g1 = out[out.group == "g1"].set_index("metric")
    assert g1.loc["mw", "note"] == "3 templates: a clustered interval from fewer than 20 undercovers"
    write_csv(out, tmp_path / "c.csv", float_format="%.10g")
    back = pd.read_csv(tmp_path / "c.csv", keep_default_na=False)
    assert back.loc[back.group == "g0", "significant"].tolist() == ["", "", ""]
    assert set(back.loc[back.group != "g0", "significant"]) <= {"True", "False", ""}
    # the page keeps the empty cell (no "not significant" sentence, no "<NA>") and shows the note
    page = csv_page(tmp_path / "c.csv", "comparisons")
    assert "<NA>" not in page and "no test: 1 template" in page
    # first_gains reads an empty verdict as no gain
    rows = with_flags(out, "consecutive", [])
    assert first_gains(rows).loc[lambda f: f.group == "g0", "first_gain"].eq("").all()


def test_the_default_has_no_verdict_without_paired_rows_or_interval() -> None:
    (ta, tb), (sa, sb) = _frames(np.ones(4), np.full(4, np.nan), np.ones(4), np.ones(4))
    out = compare_groups("a", "b", {"g": (ta, tb)}, {"g": (sa, sb)}, resamples=0, seed=0, confidence=0.95)
    assert "note" not in out.columns
    assert out["significant"].isna().all()  # TSE: no row both define; EW, MW: no resamples, no interval


def test_an_interval_of_no_real_width_has_no_mdd_and_does_not_exclude_0() -> None:
    assert np.isnan(bootstrap_mdd(np.array([0.25]), np.array([0.25 + 3.6e-17]), 0.95)[0])
    assert np.isnan(bootstrap_mdd(np.array([-2.9e-16]), np.array([0.0]), 0.95)[0])
    assert bootstrap_mdd(np.array([0.1]), np.array([0.1 + 1e-9]), 0.95)[0] > 0  # a real, small width
    assert no_width(np.array([1e6]), np.array([1e6 + 1e-7])).item()  # relative to the ends' scale
    assert not excludes_zero(np.array([1e-17]), np.array([3e-17])).item()
    assert excludes_zero(np.array([0.4]), np.array([0.4])).item()  # every difference 0.4: excludes 0
    assert not excludes_zero(np.array([np.nan]), np.array([np.nan])).item()


def test_two_identical_models_one_with_nan_contexts_do_not_differ() -> None:
    """b is a, with EW and MW undefined in 3 contexts: the means are over the contexts both define,
    so the difference is exactly 0 in every resample (was significant when each mean took its own)."""
    rng = np.random.default_rng(3)
    n = 60
    tse = (rng.random(n) < 0.6).astype(float)
    ew = rng.random(n)
    ew_b = ew.copy()
    ew_b[[4, 17, 40]] = np.nan
    rows, contexts = _frames(tse, tse, ew, ew_b)
    for kw in ({}, {"cluster": "template", "templates": {"g": [f"t{i % 12}" for i in range(n)]}}):
        out = compare_groups("a", "b", {"g": rows}, {"g": contexts}, **KW, **kw).set_index("metric")
        for m in ("ew", "mw"):
            r = out.loc[m]
            assert r.difference == 0.0 and r.ci_low == 0.0 and r.ci_high == 0.0
            assert not r.significant and np.isnan(r.mdd)
            assert (
                r.value_a == r.value_b == pytest.approx(np.delete(ew, [4, 17, 40]).mean() * (1 if m == "ew" else 0.5))
            )
    # the same through the rows (two models of other contexts): a causal-like b with contexts in another order
    order = rng.permutation(n)
    diff, lo, hi = paired_row_difference(ew, np.arange(n), ew_b[order], np.argsort(order), 300, 1, 0.95)
    assert abs(diff[0]) < 1e-15 and no_width(lo, hi).item() and not excludes_zero(lo, hi).item()  # rounding only
    assert np.isnan(bootstrap_mdd(lo, hi, 0.95)[0])
    diff, lo, hi = paired_mean_difference(ew, ew_b, 300, 1, 0.95)
    assert (diff[0], lo[0], hi[0]) == (0.0, 0.0, 0.0)


def test_paired_means_through_rows_against_a_direct_loop() -> None:
    """a's contexts are shared by 2 or 3 rows (a causal LM's prefixes), b has one context per row; a
    row counts when both its contexts are defined, a context weighs the share of its rows counted."""
    rng = np.random.default_rng(9)
    a_context = np.array([0, 0, 1, 1, 1, 2, 2, 3, 3, 3])
    a = rng.random(4)
    a[2] = np.nan
    b = rng.random(10)
    b[[0, 8]] = np.nan
    ma, mb = paired_means(a, a_context, b, np.arange(10))
    kept = [r for r in range(10) if not np.isnan(a[a_context[r]]) and not np.isnan(b[r])]
    rows_of = np.bincount(a_context)
    wa: dict[int, float] = {}
    for r in kept:
        wa[a_context[r]] = wa.get(a_context[r], 0.0) + 1 / rows_of[a_context[r]]
    assert ma[0] == pytest.approx(sum(w * a[c] for c, w in wa.items()) / sum(wa.values()), rel=1e-12)
    assert mb[0] == pytest.approx(np.mean(b[kept]), rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_no_row_says_not_significant_beside_an_interval_that_excludes_0(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    k = tuple(int(x) for x in rng.integers(1, 40, 3))
    for cluster in ("context", "template"):
        rows, contexts, templates = {}, {}, {}
        for i, kk in enumerate(k):
            n = 8 * kk
            a = (rng.random(n) < 0.5).astype(float)
            b = (rng.random(n) < 0.5 + 0.2 * rng.random()).astype(float)
            b[rng.random(n) < 0.05] = np.nan
            ew = rng.random(n)
            ew_b = np.clip(ew + rng.normal(0.05 * rng.random(), 0.1, n), 0, 1)
            ew_b[rng.random(n) < 0.05] = np.nan
            rows[f"g{i}"], contexts[f"g{i}"] = _frames(a, b, ew, ew_b)
            templates[f"g{i}"] = [f"t{j % kk}" for j in range(n)]
        kw = {} if cluster == "context" else {"cluster": cluster, "templates": templates}
        out = compare_groups("a", "b", rows, contexts, **KW, **kw)
        excl = excludes_zero(out["ci_low"].to_numpy(float), out["ci_high"].to_numpy(float))
        said_no = out["significant"].eq(False).fillna(False).to_numpy(bool)
        assert not (said_no & excl).any()
        interval = out["metric"] != "tse"
        assert (
            out.loc[interval, "significant"].eq(True).fillna(False).to_numpy(bool) == excl[interval.to_numpy()]
        ).all()
        if cluster != "context":
            unable = out["note"].str.startswith("cannot reject").to_numpy(bool)
            assert out.loc[unable, "significant"].isna().all() and out.loc[unable, "mdd"].isna().all()


def test_the_few_clusters_warning_names_the_pooled_row_too(caplog: pytest.LogCaptureFixture) -> None:
    clusters = {g: pd.DataFrame({"template": ["x", "y"] * 5, "verb": "go/goes"}) for g in ("g1", "g2")}
    lines = comparison_cluster_warnings(clusters, "template")
    assert [line.split(":")[0] for line in lines] == ["group 'g1'", "group 'g2'", "group 'all'"]
    assert lines[-1] == (
        "group 'all': 4 templates: a clustered interval from fewer than 20 undercovers "
        "(agreement.bootstrap.cluster); read it as a lower bound on the uncertainty"
    )
    many = {g: pd.DataFrame({"template": [f"t{i}" for i in range(12)]}) for g in ("g1", "g2")}
    assert [line.split(":")[0] for line in comparison_cluster_warnings(many, "template")] == [
        "group 'g1'",
        "group 'g2'",
    ]
    with caplog.at_level(logging.WARNING):
        assert comparison_cluster_warnings({"g1": many["g1"]}, "template_and_lemma")[0].startswith("group 'g1': 12")
    assert math.isfinite(POWER)


def test_the_worked_row_of_docs_metrics() -> None:
    """docs/metrics.md's worked TSE row: 10 templates of 4 rows, d = (2 x 7, -1, 0, 0)."""
    a_only, b_only = [2] * 7 + [0, 0, 1], [0] * 7 + [1, 0, 1]
    a: list[int] = []
    b: list[int] = []
    for x, y in zip(a_only, b_only):
        a += [1] * x + [0] * y + [1] * (4 - x - y)
        b += [0] * x + [1] * y + [1] * (4 - x - y)
    (ta, tb), contexts = _frames(np.array(a, float), np.array(b, float), np.full(40, 0.5), np.full(40, 0.5))
    out = compare_groups("A", "B", {"g": (ta, tb)}, {"g": contexts}, resamples=1000, seed=0, confidence=0.95,
                         cluster="template", templates={"g": [f"t{k}" for k in range(10) for _ in range(4)]})  # fmt: skip
    t = out[out.metric == "tse"].iloc[0]
    assert (t.n, t.a_only, t.b_only, t.difference) == (40, 15, 2, pytest.approx(-0.325))
    assert t.p_value == pytest.approx(chi2.sf(169 / 29, 1), rel=1e-12) == pytest.approx(0.015777, abs=1e-6)
    se = math.sqrt(29) / 40
    assert (t.ci_low, t.ci_high) == pytest.approx((-0.325 - norm.ppf(0.975) * se, -0.325 + norm.ppf(0.975) * se))
    assert (round(t.ci_low, 5), round(t.ci_high, 5)) == (-0.58887, -0.06113)
    assert t.mdd == pytest.approx((norm.ppf(0.975) + norm.ppf(0.8)) * se) and round(t.mdd, 5) == 0.37717
    assert t.significant and t.note == ""


def test_the_page_never_writes_not_significant_beside_an_interval_that_excludes_0(tmp_path: Path) -> None:
    csv = tmp_path / "c.csv"
    csv.write_text(
        "model_a,model_b,group,metric,ci_low,ci_high,significant,mdd\n"
        "a,b,g,tse,0.1,0.3,False,0.05\n"  # contradictory by hand: the page does not add the sentence
        "a,b,g,ew,-0.1,0.3,False,0.05\n"
        "a,b,g,mw,,,,0.05\n"
    )
    page = csv_page(csv, "comparisons")
    assert page.count("not significant") == 1 and "<NA>" not in page

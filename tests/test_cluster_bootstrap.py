"""Clustered bootstrap intervals (``agreement.bootstrap.cluster``, issue 55) against planted ground
truth: templates perfectly correlated inside widen the interval by sqrt(rows per template), and the
clustered interval covers at its nominal rate where the per-row one does not; the default keeps
today's values; fewer than 2 templates give NaN and one warning; the schema, the steps and the
command lines carry the setting."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest

from test_lemma_weights import _form_stats as lemma_form_stats
from verbeval.agreement.cli.aggregate import aggregate_run
from verbeval.agreement.report.comparisons import comparisons
from verbeval.agreement.report.tables import table2, to_markdown
from verbeval.agreement.scores.aggregate import LEMMA_DIMENSION, score_contexts, summarise
from verbeval.agreement.scores.lemma_weights import lemma_weighted_p1
from verbeval.agreement.scores.metrics import FormStats
from verbeval.agreement.scores.paired import compare_groups, paired_mean_difference, paired_row_difference
from verbeval.agreement.steps import AGGREGATE, COMPARE
from verbeval.commands import build_parser
from verbeval.core import count_draws
from verbeval.core.bootstrap import Clusters, bootstrap_means, mean_of_rows, stream_seed
from verbeval.core.cliutil import with_config_defaults
from verbeval.core.config import validate_config
from verbeval.core.errors import MismatchError, VerbevalError

G, M = 40, 16  # templates, rows per template
Z = 1.959964  # the normal 97.5% quantile


def _labels() -> np.ndarray:
    return np.repeat([f"t{i}" for i in range(G)], M)


def test_correlated_templates_widen_the_interval_by_sqrt_of_the_rows_per_template() -> None:
    """Half the templates all 1, half all 0 (p = 1/2): the per-row bootstrap's SE is
    sqrt(p(1-p)/(G M)), the template bootstrap's sqrt(p(1-p)/G), so the widths differ by sqrt(M) = 4."""
    values = np.repeat(np.arange(G) % 2, M).astype(float)
    mean, lo, hi = bootstrap_means(values, 2000, 0, 0.95)
    c_mean, c_lo, c_hi = bootstrap_means(values, 2000, 0, 0.95, clusters=Clusters.of(_labels()))
    assert mean[0] == c_mean[0] == 0.5
    naive, clustered = hi[0] - lo[0], c_hi[0] - c_lo[0]
    want_naive, want_clustered = 2 * Z * math.sqrt(0.25 / (G * M)), 2 * Z * math.sqrt(0.25 / G)
    # each width is off by up to one step of its statistic's lattice (1/(G M) per row, 1/G per
    # template) and by the Monte Carlo error of two quantiles of 2,000 resamples (< 5%)
    rel_naive, rel_clustered = 1 / (G * M) / want_naive + 0.05, 1 / G / want_clustered + 0.05
    assert naive == pytest.approx(want_naive, rel=rel_naive)
    assert clustered == pytest.approx(want_clustered, rel=rel_clustered)
    assert clustered / naive == pytest.approx(math.sqrt(M), rel=rel_naive + rel_clustered)


def test_the_clustered_interval_covers_at_its_nominal_rate_and_the_per_row_one_does_not() -> None:
    """200 data sets of G templates, each template's M rows all 1 with probability p = 0.3, else all
    0 (one column each: every data set sees the same resamples, as every column of a summary does)."""
    p, sets = 0.3, 200
    rng = np.random.default_rng(55)
    values = np.repeat((rng.random((G, sets)) < p).astype(float), M, axis=0)  # [G M, sets]
    _, lo, hi = bootstrap_means(values, 1000, 0, 0.95)
    _, c_lo, c_hi = bootstrap_means(values, 1000, 0, 0.95, clusters=Clusters.of(_labels()))
    naive = float(((lo <= p) & (p <= hi)).mean())
    clustered = float(((c_lo <= p) & (p <= c_hi)).mean())
    # clustered: nominal 0.95; 3 binomial SDs over 200 sets (3 x 0.0154) and the percentile
    # interval's undercoverage with 40 clusters (about 1%) put it above 0.88
    assert clustered >= 0.88
    # per row: its SE is sqrt(M) = 4 times too small, so it covers P(|Z| < 1.96 / 4) = 0.38 of the
    # time; 0.55 is 5 binomial SDs (0.034) above that
    assert naive <= 0.55


def _group(sources: list[str], verbs: list[str]) -> pd.DataFrame:
    """A group's template rows: their template (source) and verb pair."""
    plural = [i % 2 == 1 for i in range(len(sources))]
    sing, plur = zip(*(v.split("/") for v in verbs))
    return pd.DataFrame(
        {
            "group": "g",
            "source": sources,
            "line": range(1, len(sources) + 1),
            "correct": [pl if x else s for s, pl, x in zip(sing, plur, plural)],
            "incorrect": [s if x else pl for s, pl, x in zip(sing, plur, plural)],
            "plural": plural,
        }
    )


def _causal() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """8 rows of 3 templates and 3 verbs; context 1 is the prefix of a row of t0 and a row of t1."""
    sources = ["t0", "t0", "t1", "t1", "t1", "t2", "t2", "t2"]
    verbs = ["go/goes", "be/is", "go/goes", "do/does", "be/is", "go/goes", "do/does", "be/is"]
    tse = pd.DataFrame(
        {"row": range(8), "context_id": [0, 1, 1, 2, 3, 4, 5, 6], "tse": [1.0, 0.0, 1.0, 1.0, np.nan, 0.0, 1.0, 1.0]}
    )
    scores = pd.DataFrame(
        {
            "context_id": range(7),
            "plural": [False] * 7,
            "ew_top@1": [1.0, 0.5, 0.0, 1.0, np.nan, 0.25, 1.0],
            "mw_top@1": [0.9, 0.4, 0.1, 0.8, 0.7, 0.3, 0.6],
        }
    )
    return scores, tse, _group(sources, verbs)


def test_the_default_is_todays_bootstrap_over_contexts_and_rows() -> None:
    scores, tse, templates = _causal()
    today = summarise(scores, tse, model="m", group="g", resamples=300, seed=4, confidence=0.9)
    same = summarise(scores, tse, model="m", group="g", resamples=300, seed=4, confidence=0.9, cluster="context")
    pd.testing.assert_frame_equal(today, same)
    assert "cluster" not in today.columns
    _, lo, hi = bootstrap_means(tse["tse"].to_numpy(), 300, 4, 0.9)
    t = today[today["metric"] == "tse"].iloc[0]
    assert (t["ci_low"], t["ci_high"]) == (lo[0], hi[0])
    _, lo, hi = bootstrap_means(scores[["ew_top@1", "mw_top@1"]].to_numpy(), 300, 4, 0.9)
    ew = today[today["metric"] == "ew"].iloc[0]
    assert (ew["ci_low"], ew["ci_high"]) == (lo[0], hi[0])


def test_template_clusters_weigh_rows_by_their_template_and_contexts_by_their_rows_mean() -> None:
    scores, tse, templates = _causal()
    s = summarise(scores, tse, model="m", group="g", resamples=300, seed=4, confidence=0.9, cluster="template",
                  templates_group=templates)  # fmt: skip
    assert (s["cluster"] == "template").all()
    counts = count_draws.counts(3, 300, 4, 100).astype(float)  # the 3 templates' stream
    row_t = np.array([0, 0, 1, 1, 1, 2, 2, 2])
    w = counts[:, row_t]  # [300, rows]
    v = tse["tse"].to_numpy()
    ok = ~np.isnan(v)
    stats = (w[:, ok] @ v[ok]) / w[:, ok].sum(1)
    t = s[s["metric"] == "tse"].iloc[0]
    assert t["value"] == pytest.approx(np.nanmean(v))
    assert (t["ci_low"], t["ci_high"]) == pytest.approx(tuple(np.quantile(stats, [0.05, 0.95])))
    # context 1 (rows 1 and 2, of t0 and t1) weighs the mean of their counts
    wc = np.stack([w[:, 0], (w[:, 1] + w[:, 2]) / 2, w[:, 3], w[:, 4], w[:, 5], w[:, 6], w[:, 7]], axis=1)
    ew = scores["ew_top@1"].to_numpy()
    okc = ~np.isnan(ew)
    stats = (wc[:, okc] @ ew[okc]) / wc[:, okc].sum(1)
    e = s[s["metric"] == "ew"].iloc[0]
    assert (e["ci_low"], e["ci_high"]) == pytest.approx(tuple(np.quantile(stats, [0.05, 0.95])))


def test_template_and_lemma_crosses_the_rows_templates_with_their_verbs() -> None:
    scores, tse, templates = _causal()
    stats = _form_stats(np.random.default_rng(1).dirichlet(np.ones(7), 7), 3)
    s = summarise(scores, tse, model="m", group="g", resamples=300, seed=4, confidence=0.9,
                  cluster="template_and_lemma", templates_group=templates, lemma_stats=(stats, scores["plural"]))  # fmt: skip
    ct = count_draws.counts(3, 300, 4, 100).astype(float)
    assert stream_seed(4, 0) == 4 and stream_seed(4, 1) == int(
        np.random.SeedSequence([4, 1]).generate_state(1, np.uint64)[0]
    )
    cv = count_draws.counts(3, 300, stream_seed(4, 1), 100).astype(float)  # be/is, do/does, go/goes: first seen
    row_t, row_v = np.array([0, 0, 1, 1, 1, 2, 2, 2]), np.array([0, 1, 0, 2, 1, 0, 2, 1])
    w = ct[:, row_t] * cv[:, row_v]
    v = tse["tse"].to_numpy()
    ok = ~np.isnan(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = (w[:, ok] @ v[ok]) / w[:, ok].sum(1)
    t = s[s["metric"] == "tse"].iloc[0]
    assert (t["ci_low"], t["ci_high"]) == pytest.approx(tuple(np.nanquantile(stats, [0.05, 0.95])))
    # EW and MW: by template alone without their form statistics (the lemma draw needs them)
    with pytest.raises(VerbevalError) as exc:
        summarise(scores, tse, model="m", group="g", resamples=300, seed=4, confidence=0.9,
                  cluster="template_and_lemma", templates_group=templates)  # fmt: skip
    assert (
        str(exc.value) == "group 'g': agreement.bootstrap.cluster template_and_lemma needs the group's form statistics"
    )


def _form_stats(probs: np.ndarray, n_lemmas: int) -> FormStats:
    """Form statistics of distributions ``probs`` ``[C, V]`` whose first ``2 L`` tokens are the lemmas'
    forms (singular, plural): tests/test_lemma_weights.py's, on token ids 0 .. 2 L - 1."""
    return lemma_form_stats(probs, np.arange(2 * n_lemmas).reshape(n_lemmas, 2))


def _lemma_run(
    probs: np.ndarray, n_lemmas: int, templates: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, tuple]:
    """Scores (cutoffs 0.5 and 1, both sides), one TSE row per context (3 verbs in turn) and the template
    rows of contexts with distributions ``probs`` (singular contexts) in ``templates``."""
    n = len(probs)
    stats, plural = _form_stats(probs, n_lemmas), np.zeros(n, dtype=bool)
    scores = score_contexts(np.arange(n), plural, stats, [0.5, 1.0], [0.5, 1.0])
    tse = pd.DataFrame({"row": range(n), "context_id": range(n), "tse": (np.arange(n) % 3 > 0).astype(float)})
    verbs = [("go/goes", "be/is", "do/does")[i % 3] for i in range(n)]
    return scores, tse, _group(templates, verbs).assign(plural=False), (stats, plural)


def _by_metric(s: pd.DataFrame) -> pd.DataFrame:
    return s.set_index(["metric", "side", "cutoff"])


def test_lemmas_right_or_wrong_in_every_context_widen_ew_at_p1_by_the_lemma_draw() -> None:
    """G templates of 2 contexts; half the templates easy (every lemma right), half hard (the L / 2
    good lemmas right, the others wrong, in every context). A resample of template share e (easy, by
    weight) and good-lemma share s scores EW = e + (1 - e) s = 1 - u (1 - s), u = 1 - e. By template
    alone s = 1/2: SD sqrt(Var u) / 2 with Var u = 1/(4 G). Templates and lemmas (independent, Var s =
    1/(4 L)): Var(u (1 - s)) = Var u / 4 + Var s / 4 + Var u Var s, so the widths' ratio is
    sqrt(1 + G / L + 1 / L) = sqrt(1 + 4 + 1/16) = 2.25 at G = 64, L = 16."""
    n_t, per, n_lemmas = 64, 2, 16
    n = n_t * per
    templates = [f"t{c // per}" for c in range(n)]
    easy = np.array([int(t[1:]) % 2 == 0 for t in templates])
    good = np.arange(n_lemmas) < n_lemmas // 2
    right = np.where(easy[:, None] | good[None, :], 0.02, 0.01)  # [C, L]: the singular (right) form
    probs = np.zeros((n, 2 * n_lemmas + 1))
    probs[:, 0 : 2 * n_lemmas : 2], probs[:, 1 : 2 * n_lemmas : 2] = right, 0.03 - right
    probs[:, -1] = 1 - probs.sum(1)
    scores, tse, group, lemma_stats = _lemma_run(probs, n_lemmas, templates)
    assert scores["ew_top@1"].tolist() == [1.0 if e else 0.5 for e in easy]
    kw = {"model": "m", "group": "g", "resamples": 2000, "seed": 3, "confidence": 0.95, "templates_group": group}
    both = _by_metric(summarise(scores, tse, **kw, cluster="template_and_lemma", lemma_stats=lemma_stats))
    alone = _by_metric(summarise(scores, tse, **kw, cluster="template"))
    pd.testing.assert_series_equal(both["value"], alone["value"])
    ew, ew_t = both.loc[("ew", "top", 1.0)], alone.loc[("ew", "top", 1.0)]
    assert ew["value"] == 0.75
    width, width_t = ew["ci_high"] - ew["ci_low"], ew_t["ci_high"] - ew_t["ci_low"]
    assert width_t == pytest.approx(2 * Z * math.sqrt(1 / (4 * n_t)) / 2, rel=1 / (2 * n_t) / width_t + 0.05)
    # the template lattice (1 / (2 G), 6% of the template width) and the Monte Carlo error of 2,000
    # resamples (5% per width) bound the ratio's error
    assert width / width_t == pytest.approx(2.25, rel=1 / (2 * n_t) / width_t + 0.1)
    # bottom@1 counts every lemma too: the same draw; cutoff 0.5 and the counted masses: templates alone
    for metric in ("ew", "mw"):
        top, bottom = both.loc[(metric, "top", 1.0)], both.loc[(metric, "bottom", 1.0)]
        assert (top["ci_low"], top["ci_high"]) == (bottom["ci_low"], bottom["ci_high"])
    at_p1 = (both.index.get_level_values("cutoff") == 1.0) & both.index.get_level_values("metric").isin(["ew", "mw"])
    assert (both.loc[at_p1, "ci_low"] != alone.loc[at_p1, "ci_low"]).all()
    rest = ~at_p1 & (both.index.get_level_values("metric") != "tse")
    pd.testing.assert_frame_equal(both.loc[rest].drop(columns="cluster"), alone.loc[rest].drop(columns="cluster"))


def test_the_lemma_draw_weighs_templates_and_lemmas_and_one_lemma_is_the_template_interval() -> None:
    rng = np.random.default_rng(8)
    n, n_lemmas = 30, 5
    templates = [f"t{c % 6}" for c in range(n)]
    probs = rng.dirichlet(np.ones(2 * n_lemmas + 3), n)
    scores, tse, group, lemma_stats = _lemma_run(probs, n_lemmas, templates)
    kw = {"model": "m", "group": "g", "resamples": 300, "seed": 4, "confidence": 0.9, "templates_group": group}
    both = _by_metric(summarise(scores, tse, **kw, cluster="template_and_lemma", lemma_stats=lemma_stats))
    # by hand: the templates' stream (seed 4), the lemmas' (stream_seed(4, 2): not the TSE verbs' (4, 1))
    assert LEMMA_DIMENSION == 2
    w = count_draws.counts(6, 300, 4, 100).astype(float)[:, np.arange(n) % 6]
    v = count_draws.counts(n_lemmas, 300, stream_seed(4, 2), 100).astype(float)
    for k, values in enumerate(lemma_weighted_p1(*lemma_stats, v)):
        stats = (w * values).sum(1) / w.sum(1)
        row = both.loc[(("ew", "mw")[k], "top", 1.0)]
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(np.quantile(stats, [0.05, 0.95])), rel=1e-12)
    # one lemma: every draw counts it once, so the interval is the template one
    one_probs = np.concatenate([probs[:, :2], probs[:, 2:].sum(1, keepdims=True)], axis=1)
    scores, tse, group, lemma_stats = _lemma_run(one_probs, 1, templates)
    kw["templates_group"] = group
    one = _by_metric(summarise(scores, tse, **kw, cluster="template_and_lemma", lemma_stats=lemma_stats))
    alone = _by_metric(summarise(scores, tse, **kw, cluster="template"))
    ctx = one.index.get_level_values("metric") != "tse"
    pd.testing.assert_frame_equal(
        one.loc[ctx].drop(columns="cluster"), alone.loc[ctx].drop(columns="cluster"), check_exact=False, rtol=1e-12
    )
    assert one.loc[("ew", "top", 1.0), "ci_high"] > one.loc[("ew", "top", 1.0), "ci_low"]


def test_one_verb_under_template_and_lemma_makes_only_tse_nan(caplog: pytest.LogCaptureFixture) -> None:
    scores, tse, templates = _causal()
    one_verb = templates.assign(correct="is", incorrect="are")
    stats = _form_stats(np.random.default_rng(1).dirichlet(np.ones(7), 7), 3)
    with caplog.at_level(logging.WARNING):
        s = summarise(scores, tse, model="m", group="g", resamples=300, seed=4, confidence=0.9,
                      cluster="template_and_lemma", templates_group=one_verb, lemma_stats=(stats, scores["plural"]))  # fmt: skip
    assert [r.getMessage() for r in caplog.records] == [
        "group 'g': 1 verb: a clustered interval needs at least 2 (agreement.bootstrap.cluster), "
        "so its TSE interval is NaN"
    ]
    assert s.loc[s["metric"] == "tse", ["ci_low", "ci_high"]].isna().all().all()
    assert s.loc[s["metric"].isin(["ew", "mw"]), ["ci_low", "ci_high"]].notna().all().all()


def test_fewer_than_two_templates_give_nan_intervals_and_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    scores, tse, templates = _causal()
    one = templates.assign(source="simple_agrmt")
    with caplog.at_level(logging.WARNING):
        s = summarise(scores, tse, model="m", group="simple", resamples=300, seed=4, confidence=0.9,
                      cluster="template", templates_group=one)  # fmt: skip
    assert [r.getMessage() for r in caplog.records] == [
        "group 'simple': 1 template: a clustered interval needs at least 2 (agreement.bootstrap.cluster), "
        "so its intervals are NaN"
    ]
    today = summarise(scores, tse, model="m", group="simple", resamples=300, seed=4, confidence=0.9)
    assert s["value"].equals(today["value"])
    assert s[["ci_low", "ci_high"]].isna().all().all()


def _pair_scores(per_template_diff: np.ndarray, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(per_template_diff) * M
    base = rng.random(n)
    ew_b = base + np.repeat(per_template_diff, M)
    a = pd.DataFrame({"context_id": range(n), "ew_top@1": base, "mw_top@1": base})
    b = pd.DataFrame({"context_id": range(n), "ew_top@1": ew_b, "mw_top@1": base})
    return a, b


def test_paired_comparisons_draw_the_templates_once_for_both_models() -> None:
    """Two groups whose templates share a name (each group's template is its own cluster when pooled);
    the difference b - a is planted per template, so the template interval is wider than the per-context one."""
    rng = np.random.default_rng(0)
    diffs = {"g1": rng.normal(0.1, 0.2, G), "g2": rng.normal(0.1, 0.2, G)}
    labels = {g: list(_labels()) for g in diffs}  # the same names t0 .. t39 in both groups
    rows, scores = {}, {}
    for g, d in diffs.items():
        a, b = _pair_scores(d, rng)
        scores[g] = (a, b)
        t = pd.DataFrame({"row": range(len(a)), "context_id": range(len(a)), "tse": 1.0})
        rows[g] = (t, t)
    kw = {"resamples": 400, "seed": 2, "confidence": 0.95}
    plain = compare_groups("a", "b", rows, scores, **kw)
    assert "cluster" not in plain.columns
    out = compare_groups("a", "b", rows, scores, **kw, cluster="template", templates=labels)
    assert (out["cluster"] == "template").all()
    level = 1 - 0.05 / 2
    for g in diffs:
        a, b = scores[g]
        cols = ["ew_top@1", "mw_top@1"]
        want = paired_mean_difference(a[cols].to_numpy(), b[cols].to_numpy(), 400, 2, level)
        ew = plain[(plain.group == g) & (plain.metric == "ew")].iloc[0]
        assert (ew.ci_low, ew.ci_high) == (want[1][0], want[2][0])  # the default: today's intervals
        clusters = Clusters.of(labels[g], units=mean_of_rows(np.arange(len(a)), len(a)))
        want = paired_mean_difference(a[cols].to_numpy(), b[cols].to_numpy(), 400, 2, level, clusters=clusters)
        ew_c = out[(out.group == g) & (out.metric == "ew")].iloc[0]
        assert (ew_c.ci_low, ew_c.ci_high) == (want[1][0], want[2][0])
        assert ew_c.ci_high - ew_c.ci_low > 2 * (ew.ci_high - ew.ci_low)
    # overall: 80 clusters, (group, template)
    a_all = pd.concat([scores[g][0] for g in diffs], ignore_index=True)
    b_all = pd.concat([scores[g][1] for g in diffs], ignore_index=True)
    pooled = [f"{g}\t{t}" for g in diffs for t in labels[g]]
    n = len(a_all)
    clusters = Clusters.of(pooled, units=mean_of_rows(np.arange(n), n))
    assert clusters.sizes == (2 * G,)
    want = paired_mean_difference(a_all[cols].to_numpy(), b_all[cols].to_numpy(), 400, 2, 0.95, clusters=clusters)
    ew_all = out[(out.group == "all") & (out.metric == "ew")].iloc[0]
    assert (ew_all.ci_low, ew_all.ci_high) == (want[1][0], want[2][0])
    with pytest.raises(MismatchError) as e:
        compare_groups("a", "b", rows, scores, **kw, cluster="template")
    assert str(e.value) == "group 'g1': agreement.bootstrap.cluster template needs the rows' templates"


def test_masked_against_causal_draws_the_rows_templates() -> None:
    """Different contexts: the rows are paired; their templates are drawn, and each context weighs its
    drawn rows' share."""
    scores, tse, templates = _causal()
    masked = pd.DataFrame({"context_id": range(8), "ew_top@1": np.linspace(0, 1, 8), "mw_top@1": 0.5})
    masked_tse = tse.assign(context_id=range(8))
    cols = ["ew_top@1", "mw_top@1"]
    out = compare_groups("c", "m", {"g": (tse, masked_tse)}, {"g": (scores, masked)}, resamples=300, seed=1,
                         confidence=0.9, cluster="template", templates={"g": list(templates["source"])})  # fmt: skip
    want = paired_row_difference(scores[cols].to_numpy(), tse["context_id"].to_numpy(), masked[cols].to_numpy(),
                                 np.arange(8), 300, 1, 0.9, clusters=Clusters.of(list(templates["source"])))  # fmt: skip
    ew = out[(out.group == "g") & (out.metric == "ew")].iloc[0]
    assert (ew.ci_low, ew.ci_high) == (want[1][0], want[2][0]) and not np.isnan(ew.ci_low)


def test_compare_needs_the_templates_under_a_clustering(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(VerbevalError) as e:
        comparisons([("configured", "a", "b")], {"a": tmp_path, "b": tmp_path}, ["g"], resamples=10, seed=0,
                    confidence=0.95, cluster="template")  # fmt: skip
    assert str(e.value) == (
        "model 'a': agreement.bootstrap.cluster template needs the templates.parquet of its run (--templates)"
    )


def test_the_schema_takes_the_six_clusterings_for_agreement_only() -> None:
    for choice in ("context", "template", "template_and_lemma", "subject", "verb", "subject_and_verb"):
        cfg = validate_config({"models": [{"id": "gpt2"}], "agreement": {"bootstrap": {"cluster": choice}}})
        assert cfg["agreement"]["bootstrap"] == {"resamples": 1000, "seed": 0, "confidence": 0.95, "cluster": choice}
    with pytest.raises(VerbevalError) as e:
        validate_config({"models": [{"id": "gpt2"}], "agreement": {"bootstrap": {"cluster": "lemma"}}})
    assert str(e.value) == (
        "config: invalid value at agreement.bootstrap.cluster: 'lemma' is not one of "
        "['context', 'template', 'template_and_lemma', 'subject', 'verb', 'subject_and_verb']"
    )
    with pytest.raises(VerbevalError) as e:
        validate_config({"models": [{"id": "gpt2"}], "simverb": {"bootstrap": {"cluster": "template"}}})
    assert str(e.value) == (
        "config: invalid value at simverb.bootstrap: Additional properties are not allowed ('cluster' was unexpected)"
    )
    cfg = validate_config({"models": [{"id": "gpt2"}]})
    assert cfg["simverb"]["bootstrap"] == {"resamples": 1000, "seed": 0, "confidence": 0.95}


def test_aggregate_and_compare_take_the_clustering_as_an_option() -> None:
    config = {"agreement": {"bootstrap": {"resamples": 7, "seed": 3, "confidence": 0.9, "cluster": "template"}}}
    for step in (AGGREGATE, COMPARE):
        assert step.setting("cluster").key == "agreement.bootstrap.cluster"
        assert step.default("cluster") == "context"
        assert "--cluster=template" in step.argv({**config, "agreement": {**config["agreement"], "top_cutoffs": [1],
                                                                          "bottom_cutoffs": [1]}})  # fmt: skip
    argv = ["aggregate", "--templates", "t.parquet", "--groups", "g", "--model-name", "m", "--manifest", "x.json",
            "--out-dir", "o"]  # fmt: skip
    args = with_config_defaults(build_parser().parse_args([*argv, "--cluster", "template_and_lemma"]))
    assert aggregate_run(args).cluster == "template_and_lemma"
    assert aggregate_run(with_config_defaults(build_parser().parse_args(argv))).cluster == "context"
    args = with_config_defaults(build_parser().parse_args([*argv, "--cluster", "subject_and_verb"]))
    assert aggregate_run(args).cluster == "subject_and_verb"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--cluster", "lemma"])
    args = build_parser().parse_args(["compare", "--results", "a=d", "--groups", "g", "--csv", "c", "--first-gains",
                                      "f", "--figure", "x.png", "--cluster", "template"])  # fmt: skip
    assert args.cluster == "template"


def test_table2_says_what_its_intervals_resample() -> None:
    scores, tse, templates = _causal()
    kw = {"model": "m", "group": "g", "resamples": 50, "seed": 0, "confidence": 0.95}
    clustered = summarise(scores, tse, **kw, cluster="template", templates_group=templates)
    table = table2(clustered, [{"id": "g", "name": "G"}], ["m"])
    assert table["m.cluster"].tolist() == ["template"]
    assert to_markdown(table, ["m"]).endswith(
        "Notes:\n\n* The CIs resample clusters, not single contexts and rows (agreement.bootstrap.cluster; "
        "m: template); docs/metrics.md, 'Clustered intervals'.\n"
    )
    plain = table2(summarise(scores, tse, **kw), [{"id": "g", "name": "G"}], ["m"])
    assert "m.cluster" not in plain.columns and "Notes" not in to_markdown(plain, ["m"])


def test_few_clusters_warns_below_twenty_and_not_from_twenty() -> None:
    """2 to 19 clusters in a dimension: one line (the interval undercovers); 20 and more, or fewer than 2
    (too_few_clusters' case), none."""
    from verbeval.core.bootstrap import FEW_CLUSTERS, Clusters, few_clusters

    assert FEW_CLUSTERS == 20
    assert few_clusters("prep", Clusters.of(["a", "b", "a"]), ["template"]) == (
        "group 'prep': 2 templates: a clustered interval from fewer than 20 undercovers "
        "(agreement.bootstrap.cluster); read it as a lower bound on the uncertainty"
    )
    many = [f"t{i}" for i in range(20)]
    assert few_clusters("g", Clusters.of(many), ["template"]) is None
    assert few_clusters("g", Clusters.of(many, ["v0", "v1", "v2"] * 6 + ["v0", "v1"]), ["template", "verb"]) == (
        "group 'g': 3 verbs: a clustered interval from fewer than 20 undercovers "
        "(agreement.bootstrap.cluster); read it as a lower bound on the uncertainty"
    )
    assert few_clusters("g", Clusters.of(["a"] * 3), ["template"]) is None

"""The lemma dimension of paired comparisons under ``agreement.bootstrap.cluster: template_and_lemma``
(verbeval.agreement.scores.paired.paired_lemma_difference, ``verbeval compare --cluster``): EW and MW
at p = 1 resample templates and lemmas, one lemma draw over the union of the two models' lemmas."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from verbeval.agreement.scores.aggregate import row_clusters
from verbeval.agreement.scores.lemma_weights import lemma_weighted_p1
from verbeval.agreement.scores.metrics import FormStats
from verbeval.agreement.scores.paired import compare_groups
from verbeval.core import count_draws
from verbeval.core.bootstrap import stream_seed
from verbeval.core.errors import MismatchError


def _stats(right: np.ndarray) -> FormStats:
    """Form statistics of singular contexts ``[C, L]``: a lemma right (P(sing) 0.3, P(plur) 0.1: MW 0.75)
    or wrong (0.1, 0.3: MW 0.25) in each context."""
    sing = np.where(right, 0.3, 0.1)
    prob = np.stack([sing, 0.4 - sing], axis=2).astype(np.float32)
    zeros = np.zeros_like(prob)
    return FormStats(prob, zeros, zeros)


def _scores(stats: FormStats) -> pd.DataFrame:
    """The per-context EW and MW at top p = 1 (every lemma drawn once)."""
    ew, mw = lemma_weighted_p1(stats, np.zeros(len(stats.prob), dtype=bool), np.ones((1, stats.prob.shape[1])))
    return pd.DataFrame({"context_id": range(len(ew[0])), "ew_top@1": ew[0], "mw_top@1": mw[0]})


def _rows(contexts: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"row": range(len(contexts)), "context_id": contexts, "tse": 1.0})


def _lemmas(*names: str) -> pd.DataFrame:
    return pd.DataFrame({"lemma": list(names), "sing": list(names), "plur": [f"{n}s" for n in names]})


def _row_clusters(sources: list[str], verbs: list[str]) -> pd.DataFrame:
    """Each row's template and verb pair (:func:`row_clusters`) from its ``templates.parquet`` columns:
    ``source``, and the singular ``correct`` and plural ``incorrect`` form of its verb (``v``, ``vs``)."""
    return row_clusters(pd.DataFrame({"source": sources, "correct": verbs, "incorrect": [f"{v}s" for v in verbs]}))


def test_a_difference_carried_by_two_lemmas_widens_the_paired_interval() -> None:
    """Two models of the same contexts (G = 40 templates of 2 contexts, L = 16 lemmas): b is right on
    lemmas 0 and 1 in every context where a is wrong, and on lemma 2 too in the odd templates. Under a
    draw (template share u of odd templates, lemma counts v summing to 16) the difference of the EW
    means is D = (v0 + v1 + v2 u) / 16.

    Templates alone (v = 1): D = (2 + u) / 16, Var D = Var u / 256 = 1 / (1024 G). Templates and lemmas
    (u independent of the multinomial v): Var(v0 + v1) = 16 (2/16)(14/16) = 7/4, Var(v2 u) = E v2^2
    E u^2 - (E v2 E u)^2 = (31/16)(1/4 + 1/(4G)) - 1/4, Cov(v0 + v1, v2 u) = E u Cov(v0 + v1, v2) =
    -1/16, so 256 Var D = 1.859 + 0.484 / G and the widths' ratio is about sqrt(7.44 G + 1.94) = 17.3
    at G = 40 (the percentile ends of these lattice draws are coarse: we ask for more than 10). The
    template interval is too narrow to cover the lemma-borne difference 2/16 of the planted lemmas; the
    template-and-lemma one covers it and the point estimate 5/32."""
    n_t, per, n_lemmas = 40, 2, 16
    n = n_t * per
    right_a = np.random.default_rng(0).random((n, n_lemmas)) < 0.5
    right_a[:, :3] = False
    right_b = right_a.copy()
    right_b[:, :2] = True
    odd = (np.arange(n) // per) % 2 == 1
    right_b[odd, 2] = True
    stats = (_stats(right_a), _stats(right_b))
    plural = np.zeros(n, dtype=bool)
    rows = {"g": (_rows(list(range(n))), _rows(list(range(n))))}
    scores = {"g": tuple(_scores(s) for s in stats)}
    templates = {"g": _row_clusters([f"t{c // per}" for c in range(n)], [f"v{c % n_lemmas:02d}" for c in range(n)])}
    lemmas = (_lemmas(*(f"v{i:02d}" for i in range(n_lemmas))),) * 2  # the union sorts them in this order
    kw: dict[str, Any] = {"resamples": 1000, "seed": 3, "confidence": 0.95, "templates": templates}
    forms = {"g": tuple((s, plural) for s in stats)}
    both = compare_groups("a", "b", rows, scores, **kw, cluster="template_and_lemma", forms=forms, lemmas=lemmas)
    alone = compare_groups("a", "b", rows, scores, **kw, cluster="template")
    ew, ew_t = (f[f.metric == "ew"].iloc[0] for f in (both, alone))
    assert ew.difference == ew_t.difference == 5 / 32 and (both["cluster"] == "template_and_lemma").all()
    # by hand: the templates' stream (seed 3, one row per context) and the lemmas' over the 16 (U = L)
    w = count_draws.counts(n_t, 1000, 3, 100).astype(float)[:, np.arange(n) // per]
    v = count_draws.counts(n_lemmas, 1000, stream_seed(3, 2), 100).astype(float)
    d = [(w * lemma_weighted_p1(s, plural, v)[0]).sum(1) / w.sum(1) for s in stats]
    assert (ew.ci_low, ew.ci_high) == pytest.approx(tuple(np.quantile(d[1] - d[0], [0.025, 0.975])), rel=1e-12)
    assert (ew.ci_high - ew.ci_low) / (ew_t.ci_high - ew_t.ci_low) > 10
    assert ew.ci_low <= 2 / 16 <= 5 / 32 <= ew.ci_high and not ew_t.ci_low <= 2 / 16 <= ew_t.ci_high
    # TSE draws no lemmas: no row is discordant, so both clusterings give Durkalski's p = 1 and the
    # interval [0, 0] (templates, crossed with the rows' 16 verbs under template_and_lemma)
    tse = both[both.metric == "tse"].iloc[0]
    assert (tse.p_value, tse.ci_low, tse.ci_high, tse.a_only, tse.b_only, tse.n) == (1.0, 0.0, 0.0, 0, 0, n)
    pd.testing.assert_frame_equal(
        both[both.metric == "tse"].drop(columns="cluster"), alone[alone.metric == "tse"].drop(columns="cluster")
    )


def test_two_models_of_other_lemmas_weigh_their_own_lemmas_of_one_draw_over_the_union() -> None:
    """A causal model a (lemmas x, y; contexts 0 and 1, each a prefix of a row of templates t0 and t1)
    against a masked model b (lemmas y, z; one context per row), one resample at seed 4.

    The union is (x, y, z), drawn v = (1, 0, 2) (stream_seed(4, 2) over 3 lemmas: a's own stream over
    its 2 lemmas would be (1, 1)): a counts x once and y not at all, b counts z twice and y not at all.
    The templates (t0, t1) are drawn (2, 0): rows 0 and 2 weigh 2, rows 1 and 3 nothing, so a's two
    contexts weigh (2 + 0) / 2 = 1 each and b's four contexts 2, 0, 2, 0.
    EW: a is right on x in context 0 only, so mean_a = (1 + 0) / 2 = 1/2; b is right on z in contexts
    0, 1 and 2, so mean_b = (2 + 2) / 4 = 1; the difference is 1/2. MW alike from 0.75 (right) and 0.25
    (wrong): mean_a = (0.75 + 0.25) / 2 = 0.5, mean_b = 0.75, the difference 0.25.
    By templates alone (every lemma once): a's EW (1, 1/2), b's (1/2, 1/2, 1/2, 0) give 3/4 and 1/2: -1/4."""
    assert count_draws.counts(3, 1, stream_seed(4, 2), 100)[0].tolist() == [1, 0, 2]
    assert count_draws.counts(2, 1, stream_seed(4, 2), 100)[0].tolist() == [1, 1]
    assert count_draws.counts(2, 1, 4, 100)[0].tolist() == [2, 0]
    stats_a = _stats(np.array([[True, True], [False, True]]))  # x, y
    stats_b = _stats(np.array([[False, True], [False, True], [False, True], [False, False]]))  # y, z
    rows = {"g": (_rows([0, 0, 1, 1]), _rows([0, 1, 2, 3]))}
    scores = {"g": (_scores(stats_a), _scores(stats_b))}
    templates = {"g": _row_clusters(["t0", "t1", "t0", "t1"], ["x", "y", "y", "z"])}
    kw: dict[str, Any] = {"resamples": 1, "seed": 4, "confidence": 0.95, "templates": templates}
    forms = {"g": ((stats_a, np.zeros(2, dtype=bool)), (stats_b, np.zeros(4, dtype=bool)))}
    lemmas = (_lemmas("x", "y"), _lemmas("y", "z"))
    out = compare_groups("a", "b", rows, scores, **kw, cluster="template_and_lemma", forms=forms, lemmas=lemmas)
    out = out.set_index("metric")
    assert out.loc["ew", ["value_a", "value_b", "difference"]].tolist() == [0.75, 0.375, -0.375]
    assert out.loc["ew", ["ci_low", "ci_high"]].tolist() == [0.5, 0.5]
    assert out.loc["mw", ["ci_low", "ci_high"]].tolist() == pytest.approx([0.25, 0.25])
    alone = compare_groups("a", "b", rows, scores, **kw, cluster="template").set_index("metric")
    assert alone.loc["ew", ["ci_low", "ci_high"]].tolist() == [-0.25, -0.25]
    # the lemmas given must be those of the form statistics' lemma axis
    with pytest.raises(MismatchError) as e:
        compare_groups(
            "a", "b", rows, scores, **kw, cluster="template_and_lemma", forms=forms, lemmas=(_lemmas("x"), lemmas[1])
        )
    assert str(e.value) == "group 'g': form statistics of 2 lemmas, but 1 lemmas given"


# ------------------------------------------------------------------ verbeval compare, in process


def _run(tmp_path: Path) -> dict[str, list[str]]:
    """Two models' shard stores (the synthetic shards of tests/test_aggregate.py, other logits), their
    lemmas, the run's templates (two templates; each row's forms those of its lemma, ``v<l>`` and
    ``v<l>s``: four verbs) and their aggregates: compare's options but the pair's."""
    from test_aggregate import LEMMA_IDS, PLURAL, TSE_ROWS, _logits, write_synthetic_shards
    from verbeval.agreement.engine.shardstore import ShardStore
    from verbeval.cli import main

    n = len(TSE_ROWS)
    lemma_of = {int(sing): i for i, (sing, _) in enumerate(LEMMA_IDS)}
    forms = [(f"v{lemma_of[sing]}", f"v{lemma_of[sing]}s") for _, sing, _ in TSE_ROWS]
    plural = [bool(PLURAL[c]) for c, _, _ in TSE_ROWS]
    templates = tmp_path / "templates.parquet"
    pd.DataFrame(
        {
            "group": "g1",
            "source": [f"s{i % 2}" for i in range(n)],
            "line": range(n),
            "correct": [f[p] for f, p in zip(forms, plural)],
            "incorrect": [f[1 - p] for f, p in zip(forms, plural)],
            "plural": plural,
        }
    ).to_parquet(templates)
    lemmas = tmp_path / "lemmas.parquet"
    _lemmas(*(f"v{i}" for i in range(len(LEMMA_IDS)))).to_parquet(lemmas)
    named: dict[str, list[str]] = {"results": [], "shards": [], "lemmas": []}
    for seed, m in enumerate(("a", "b")):
        root = tmp_path / m / "store"
        paths = write_synthetic_shards(root / "g1", logits=_logits(seed))
        store, rels = ShardStore(root), [p.relative_to(root).as_posix() for p in paths]
        for rel in rels:
            store.record(rel, "key")
        store.finish(root / "manifest.json", rels, {})
        out = tmp_path / m / "results"
        assert main(["-q", "aggregate", "--templates", str(templates), "--groups", "g1", "--model-name", m,
                     "--manifest", str(root / "manifest.json"), "--top-cutoffs", "1", "--bottom-cutoffs", "0.5",
                     "--resamples", "10", "--out-dir", str(out)]) == 0  # fmt: skip
        named["results"].append(f"--results={m}={out}")
        named["shards"].append(f"--shards={m}={root / 'manifest.json'}")
        named["lemmas"].append(f"--lemmas={m}={lemmas}")
    named["run"] = [f"--templates={templates}", "--groups=g1", "--pair=configured=a,b", "--resamples=300"]
    return named


def _compare(tmp_path: Path, *options: str) -> int:
    from verbeval.cli import main

    return main(["-q", "compare", *options, "--csv", str(tmp_path / "c.csv"), "--first-gains",
                 str(tmp_path / "f.csv"), "--figure", str(tmp_path / "c.png")])  # fmt: skip


def test_compare_cli_draws_lemmas_for_ew_and_mw_under_template_and_lemma(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = _run(tmp_path)
    base = [*named["results"], *named["run"], "--seed=7"]
    out = {}
    for cluster in ("template", "template_and_lemma"):
        assert _compare(tmp_path, *base, *named["shards"], *named["lemmas"], f"--cluster={cluster}") == 0
        out[cluster] = pd.read_csv(tmp_path / "c.csv").set_index("metric")
    both, alone = out["template_and_lemma"], out["template"]
    assert both.index.tolist() == ["tse", "ew", "mw"] and (both["cluster"] == "template_and_lemma").all()
    assert (both.loc[["ew", "mw"], "ci_low"] != alone.loc[["ew", "mw"], "ci_low"]).all()
    assert (both.loc[["ew", "mw"], "ci_high"] != alone.loc[["ew", "mw"], "ci_high"]).all()
    same = ["value_a", "value_b", "difference", "n"]
    pd.testing.assert_frame_equal(both[same], alone[same])
    # TSE draws no lemmas; its clustered row is Durkalski's test over the templates under both, with
    # that test's interval
    tse = ["value_a", "value_b", "difference", "n", "a_only", "b_only", "p_value", "p_adjusted", "confidence"]
    tse += ["ci_low", "ci_high", "mdd", "note", "significant"]
    pd.testing.assert_series_equal(both.loc["tse", tse], alone.loc["tse", tse])
    a, b = (pd.read_parquet(tmp_path / m / "results" / "g1" / "tse.parquet") for m in "ab")
    rows = a.loc[a["tse"].notna() & b["tse"].notna(), "row"].to_numpy()  # the 6 rows both define
    x, y = a["tse"].to_numpy()[rows], b["tse"].to_numpy()[rows]
    t = pd.read_parquet(tmp_path / "templates.parquet").iloc[rows]  # each row's source and lemma (v<l>)
    template, verb = (pd.factorize(c)[0] for c in (t["source"], t["correct"].str.rstrip("s")))
    d = np.bincount(template, weights=(x > y).astype(float) - (y > x))  # per template: a_only - b_only
    assert (alone.loc["tse", "a_only"], alone.loc["tse", "b_only"]) == (1, 2)
    assert d.tolist() == [0.0, -1.0] and alone.loc["tse", "p_value"] == pytest.approx(
        math.erfc(math.sqrt(d.sum() ** 2 / (d**2).sum() / 2)), rel=1e-9
    )  # chi2 = 1 / 1 on 1 df: 0.3173, not McNemar's exact 1 (a_only 1, b_only 2)
    level = alone.loc["tse", "confidence"]
    half = norm.ppf((1 + level) / 2) * math.sqrt((d**2).sum()) / len(rows)
    assert alone.loc["tse", ["ci_low", "ci_high"]].tolist() == pytest.approx([-d.sum() / 6 - half, -d.sum() / 6 + half])
    assert alone.loc["tse", "note"].startswith("cannot reject with 2 templates")  # p >= P(chi2_1 > 2) = 0.157
    assert pd.isna(alone.loc["tse", "significant"]) and np.isnan(alone.loc["tse", "mdd"])
    # the shards and lemmas are needed under template_and_lemma only, for every model compared
    assert _compare(tmp_path, *base, "--cluster=template") == 0
    assert pd.read_csv(tmp_path / "c.csv").set_index("metric").equals(alone)
    capsys.readouterr()
    assert _compare(tmp_path, *base, named["shards"][0], named["lemmas"][0], "--cluster=template_and_lemma") == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "verbeval compare: error: model 'b': agreement.bootstrap.cluster template_and_lemma needs its shard "
        "manifest and lemmas.parquet (--shards, --lemmas)"
    ]


def test_template_and_lemma_needs_the_shards_and_lemmas_of_every_compared_model(tmp_path: Path) -> None:
    from verbeval.agreement.report.comparisons import comparisons
    from verbeval.core.errors import VerbevalError

    templates = tmp_path / "templates.parquet"
    pd.DataFrame(
        {"group": "g", "source": ["s0", "s1"], "line": [1, 2], "correct": ["v0", "v1s"], "incorrect": ["v0s", "v1"],
         "plural": [False, True]}
    ).to_parquet(templates)  # fmt: skip
    kw: dict[str, Any] = {"resamples": 10, "seed": 0, "confidence": 0.95, "templates": {"a": templates, "b": templates}}
    with pytest.raises(VerbevalError) as e:
        comparisons(
            [("configured", "a", "b")], {"a": tmp_path, "b": tmp_path}, ["g"], **kw, cluster="template_and_lemma"
        )
    assert str(e.value) == (
        "model 'a': agreement.bootstrap.cluster template_and_lemma needs its shard manifest and lemmas.parquet "
        "(--shards, --lemmas)"
    )

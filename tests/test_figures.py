"""Tests of the data behind the figures, Table 3 and the per-lemma diagnostics (not the pixels).

Shards are written with :func:`verbeval.agreement.engine.shards.write_shard` from hand-chosen probabilities, so
every expected number below is worked out by hand.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from verbeval.agreement.engine.shards import ChunkResult, lemma_set_hash, write_shard
from verbeval.agreement.report.figures import (
    CUTOFF_FIGURES,
    DEFAULT_MIN_CONTEXTS,
    checkpoint_curves,
    cutoff_curves,
    lemma_accuracy,
    lemma_metrics,
    low_n_flags,
    model_comparison,
    shown_cutoffs,
)
from verbeval.agreement.report.table3 import (
    ModelTopK,
    form_numbers,
    mark_tokens,
    select_rows,
    table3_groups,
    table3_html,
    table3_markdown,
    topk_table,
)
from verbeval.agreement.report.worst_lemmas import worst_lemmas_html, worst_lemmas_markdown
from verbeval.agreement.scores.lemma_diagnostics import PROB_FLOOR, lemma_stats, worst_lemmas
from verbeval.cli import main
from verbeval.core.config import validate_config
from verbeval.core.errors import VerbevalError

# --------------------------------------------------------------------------- per-lemma statistics

LEMMAS = pd.DataFrame(
    {
        "lemma": ["arrive", "bake", "cry"],
        "sing": ["arrives", "bakes", "cries"],
        "plur": ["arrive", "bake", "cry"],
        "sing_id": [1, 3, 5],
        "plur_id": [2, 4, 6],
    }
)
# four contexts (label, then (P(sing), P(plur)) of arrive, bake, cry):
CONTEXTS = [
    (True, [(0.1, 0.3), (0.2, 0.2), (0.05, 0.01)]),  # plural:   arrive ok, bake tie (wrong), cry wrong
    (False, [(0.3, 0.1), (0.1, 0.3), (0.02, 0.01)]),  # singular: arrive ok, bake wrong, cry ok
    (True, [(0.1, 0.2), (0.01, 0.1), (0.0, 0.0)]),  # plural:   arrive ok, bake ok, cry tie at 0 (wrong)
    (False, [(0.05, 0.15), (0.4, 0.1), (0.001, 0.002)]),  # singular: arrive wrong, bake ok, cry wrong
]


def _shard(
    path: Path,
    group: str,
    contexts: list[tuple[bool, list[tuple[float, float]]]],
    *,
    chunk: int = 0,
    n_chunks: int = 1,
    start: int = 0,
    n_group: int | None = None,
    lemmas: pd.DataFrame = LEMMAS,
    topk: tuple[np.ndarray, np.ndarray] | None = None,
    kind: str = "masked",
) -> Path:
    n = len(contexts)
    prob = np.array([[p for pair in c[1] for p in pair] for c in contexts], dtype=np.float32)
    k = 3
    ids, probs = topk if topk is not None else (np.zeros((n, k), np.int32), np.zeros((n, k), np.float32))
    result = ChunkResult(
        prob=prob,
        cum_above=np.zeros_like(prob),
        cum_below=np.zeros_like(prob),
        topk_ids=np.asarray(ids, np.int32),
        topk_probs=np.asarray(probs, np.float32),
        tse_p=np.zeros((0, 2)),
    )
    ctx = pd.DataFrame({"context_id": np.arange(start, start + n), "plural": [c[0] for c in contexts]})
    meta = {
        "model_id": "org/tiny",
        "revision": "r1",
        "kind": kind,
        "cased": False,
        "dtype": "float32",
        "tokenizer_fingerprint": "f" * 64,
        "lemma_set_sha256": lemma_set_hash(lemmas),
        "prepend_bos": False,
        "n_lemmas": len(lemmas),
        "group": group,
        "chunk": chunk,
        "n_chunks": n_chunks,
        "context_start": start,
        "context_stop": start + n,
        "n_group_contexts": n_group or n,
        "top_k": int(np.asarray(ids).shape[1]),
        "verbeval_version": "test",
    }
    write_shard(
        path, ctx, pd.DataFrame({"row": np.zeros(0, np.int64), "context_id": np.zeros(0, np.int64)}), result, meta
    )
    return path


@pytest.fixture()
def lemma_shards(tmp_path: Path) -> list[Path]:
    """The four contexts in three shards of two groups (pooling across chunks and groups)."""
    return [
        _shard(tmp_path / "g1-1.parquet", "g1", CONTEXTS[0:2], chunk=0, n_chunks=2, start=0, n_group=3),
        _shard(tmp_path / "g1-2.parquet", "g1", CONTEXTS[2:3], chunk=1, n_chunks=2, start=2, n_group=3),
        _shard(tmp_path / "g2-1.parquet", "g2", CONTEXTS[3:4]),
    ]


def test_lemma_stats_by_hand(lemma_shards: list[Path]) -> None:
    s = lemma_stats(lemma_shards, LEMMAS, "tiny").set_index("lemma")
    assert list(s.index) == ["arrive", "bake", "cry"]
    assert (s["model"] == "tiny").all() and (s["n_contexts"] == 4).all()
    assert s["n_correct"].tolist() == [3, 2, 1]
    assert s["n_wrong"].tolist() == [1, 2, 3]
    assert s["accuracy"].tolist() == [0.75, 0.5, 0.25]
    # mean of P(sing) + P(plur) over the four contexts
    np.testing.assert_allclose(
        s["mean_prob"],
        [(0.4 + 0.4 + 0.3 + 0.2) / 4, (0.4 + 0.4 + 0.11 + 0.5) / 4, (0.06 + 0.03 + 0.0 + 0.003) / 4],
        rtol=1e-6,
    )
    log = math.log10
    np.testing.assert_allclose(s.loc["arrive", "mean_log10_prob"], (2 * log(0.4) + log(0.3) + log(0.2)) / 4, rtol=1e-6)
    # a mass of 0 counts as the float32 floor, not -inf
    assert PROB_FLOOR == pytest.approx(1.1754944e-38)
    np.testing.assert_allclose(
        s.loc["cry", "mean_log10_prob"], (log(0.06) + log(0.03) + log(PROB_FLOOR) + log(0.003)) / 4, rtol=1e-6
    )


def test_lemma_stats_refuses_stale_or_repeated_shards(lemma_shards: list[Path], tmp_path: Path) -> None:
    other = LEMMAS.assign(sing_id=[1, 3, 7])
    with pytest.raises(VerbevalError, match="different lemma set"):
        lemma_stats(lemma_shards, other, "tiny")
    with pytest.raises(VerbevalError, match="given twice"):
        lemma_stats([*lemma_shards, lemma_shards[0]], LEMMAS, "tiny")


def test_worst_lemmas(lemma_shards: list[Path]) -> None:
    s = pd.concat(
        [
            lemma_stats(lemma_shards, LEMMAS, "m1"),
            lemma_stats(lemma_shards[:1], LEMMAS, "m2"),
            lemma_stats(lemma_shards[2:], LEMMAS, "m3"),
        ]
    )
    w = worst_lemmas(s, 2, ["m2", "m1", "m3"])
    assert w["model"].tolist() == ["m2", "m2", "m1", "m1", "m3", "m3"]
    assert w["rank"].tolist() == [1, 2, 1, 2, 1, 2]
    # m1 (all contexts): cry 3 wrong, bake 2; m2 (contexts 0-1): bake 2, cry 1;
    # m3 (context 3): arrive and cry 1 each, in alphabetical order
    assert w["lemma"].tolist() == ["bake", "cry", "cry", "bake", "arrive", "cry"]
    assert w["n_wrong"].tolist() == [2, 1, 3, 2, 1, 1]
    assert w["accuracy"].tolist() == [0.0, 0.5, 0.25, 0.5, 0.0, 0.0]


def test_lemma_stats_cli(lemma_shards: list[Path], tmp_path: Path) -> None:
    lemmas = tmp_path / "lemmas.parquet"
    LEMMAS.to_parquet(lemmas)
    out = tmp_path / "stats.csv"
    assert (
        main(
            [
                "-q",
                "lemma-stats",
                "--lemmas",
                str(lemmas),
                "--shards",
                *map(str, lemma_shards),
                "--model-name",
                "tiny",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    got = pd.read_csv(out)
    assert got["accuracy"].tolist() == [0.75, 0.5, 0.25]
    assert got["n_contexts"].tolist() == [4, 4, 4]


# --------------------------------------------------------------------------- lemma accuracy figure


def _stats(model: str, x: list[float], acc: list[float]) -> pd.DataFrame:
    n = len(x)
    return pd.DataFrame(
        {
            "model": model,
            "lemma": [f"l{i}" for i in range(n)],
            "sing": "s",
            "plur": "p",
            "n_contexts": 10,
            "n_correct": 0,
            "n_wrong": 0,
            "accuracy": acc,
            "mean_prob": 0.1,
            "mean_log10_prob": x,
        }
    )


def test_lemma_accuracy_bins_and_correlation() -> None:
    # six lemmas, 3 bins of 2 by probability; accuracy rises with probability
    a = _stats("a", [-3.0, -1.0, -2.0, -6.0, -5.0, -4.0], [0.6, 0.9, 0.7, 0.1, 0.3, 0.4])
    b = _stats("b", [-1.0, -2.0, -3.0], [0.5, 0.5, 0.5])
    d = lemma_accuracy(pd.concat([a, b]), ["a", "b"], n_bins=3)
    da = d[d["model"] == "a"].set_index("lemma")
    assert da["bin"].tolist() == [1, 2, 2, 0, 0, 1]
    np.testing.assert_allclose(da["bin_accuracy"], [0.5, 0.8, 0.8, 0.2, 0.2, 0.5])
    np.testing.assert_allclose(da["bin_log10_prob"], [-3.5, -1.5, -1.5, -5.5, -5.5, -3.5])
    assert d[d["model"] == "b"]["bin"].tolist() == [2, 1, 0]
    m = lemma_metrics(d)
    assert m["a"] == {"n_lemmas": 6, "mean_accuracy": 0.5, "spearman_accuracy_log10_prob": 1.0}
    assert m["b"]["spearman_accuracy_log10_prob"] is None  # constant accuracy
    with pytest.raises(VerbevalError, match="no lemma statistics"):
        lemma_accuracy(a, ["a", "zzz"])


# --------------------------------------------------------------------------- cutoff curves and model comparison

GROUPS = [{"id": "simple", "name": "Simple", "sources": ["x"]}, {"id": "blimp", "name": "BLiMP", "sources": ["y"]}]
TOP, BOTTOM = [0.5, 1.0], [0.01, 0.5]


def _summary() -> pd.DataFrame:
    """A summary_all-like table with 3 models, 3 groups and one unconfigured cutoff per side."""
    rows = []
    rng = np.random.default_rng(0)
    for m in ("m1", "m2", "m3"):
        for g in ("simple", "blimp", "prep"):
            v = rng.uniform(0.3, 0.7)
            rows.append(
                {
                    "model": m,
                    "group": g,
                    "metric": "tse",
                    "side": np.nan,
                    "cutoff": np.nan,
                    "value": v,
                    "ci_low": v - 0.1,
                    "ci_high": v + 0.1,
                    "n": 9,
                    "n_total": 10,
                }
            )
            for side, cuts in (("top", [*TOP, 0.9]), ("bottom", [*BOTTOM, 1e-6])):
                for metric in ("ew", "mw", "prob_counted", "invalid"):
                    for c in cuts:
                        v = rng.uniform(0, 1)
                        ci = (np.nan, np.nan) if metric == "invalid" else (v - 0.05, v + 0.07)
                        rows.append(
                            {
                                "model": m,
                                "group": g,
                                "metric": metric,
                                "side": side,
                                "cutoff": c,
                                "value": v,
                                "ci_low": ci[0],
                                "ci_high": ci[1],
                                "n": 5,
                                "n_total": 5,
                            }
                        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("figure", sorted(CUTOFF_FIGURES))
def test_cutoff_curves_hold_exactly_the_configured_cutoffs_groups_and_models(figure: str) -> None:
    spec = CUTOFF_FIGURES[figure]
    summary = _summary()
    d = cutoff_curves(
        summary,
        metrics=spec.metrics,
        sides=spec.sides,
        models=["m2", "m1"],
        groups=GROUPS,
        cutoffs={"top": TOP, "bottom": BOTTOM},
    )
    assert list(dict.fromkeys(d["model"])) == ["m2", "m1"]
    assert list(dict.fromkeys(d["group"])) == ["simple", "blimp"]  # groups-file order, prep not asked for
    assert set(d["group_name"]) == {"Simple", "BLiMP"}
    assert set(d["metric"]) == set(spec.metrics) and set(d["side"]) == set(spec.sides)
    for side in spec.sides:
        for _, part in d[d["side"] == side].groupby(["model", "group", "metric"]):
            assert part["cutoff"].tolist() == sorted(TOP if side == "top" else BOTTOM)
    assert len(d) == 2 * 2 * len(spec.metrics) * sum(len(TOP if s == "top" else BOTTOM) for s in spec.sides)
    # values and CI bands are the summary's, row for row
    key = ["model", "group", "metric", "side", "cutoff"]
    merged = d.merge(summary, on=key, suffixes=("", "_s"), validate="one_to_one")
    assert len(merged) == len(d)
    for col in ("value", "ci_low", "ci_high", "n", "n_total"):
        np.testing.assert_array_equal(merged[col].to_numpy(float), merged[f"{col}_s"].to_numpy(float))


def test_cutoff_curves_missing_cutoff_is_an_error() -> None:
    with pytest.raises(VerbevalError, match=r"no ew \(top\) for model 'm1', group 'simple' at cutoff 0.3"):
        cutoff_curves(
            _summary(),
            metrics=("ew",),
            sides=("top",),
            models=["m1"],
            groups=GROUPS,
            cutoffs={"top": [0.3, 1.0], "bottom": BOTTOM},
        )


def _bottom_curves(n: dict[str, list[int]], n_total: int = 20, metric: str = "ew") -> pd.DataFrame:
    """Bottom-p curves of one group per model: cutoffs 1e-6 ... 0.5, n valid contexts each."""
    cuts = [1e-6, 1e-4, 1e-3, 1e-2, 0.5]
    rows = []
    for m, ns in n.items():
        for c, k in zip(cuts, ns):
            v = 0.6 if k else np.nan
            rows.append(
                {
                    "model": m,
                    "group": "simple",
                    "group_name": "Simple",
                    "metric": metric,
                    "side": "bottom",
                    "cutoff": c,
                    "value": v,
                    "ci_low": v - 0.1,
                    "ci_high": v + 0.1,
                    "n": k,
                    "n_total": n_total,
                }
            )
    return pd.DataFrame(rows)


def test_low_n_flags_from_n_and_threshold() -> None:
    d = _bottom_curves({"m1": [0, 2, 5, 10, 20]})
    share, low = low_n_flags(d, 5)
    np.testing.assert_allclose(share, [0.0, 0.1, 0.25, 0.5, 1.0])
    assert low.tolist() == [True, True, False, False, False]  # n = 0 (NaN) and n = 2 < 5; n = 5 is enough
    assert low_n_flags(d, 11)[1].tolist() == [True, True, True, True, False]
    assert low_n_flags(d, 1)[1].tolist() == [True, False, False, False, False]
    # the invalid share averages over all n_total contexts (its n counts the invalid ones)
    inv = d.assign(metric="invalid", n=20 - d["n"], value=1 - d["n"] / 20)
    share, low = low_n_flags(inv, 5)
    assert share.tolist() == [1.0] * 5 and not low.any()
    assert low_n_flags(inv, 21)[1].all()  # a group of 20 contexts is itself below 21
    # an empty group: share 0, low
    share, low = low_n_flags(d.assign(n=0, n_total=0), 1)
    assert share.tolist() == [0.0] * 5 and low.all()
    with pytest.raises(VerbevalError, match="at least 1"):
        low_n_flags(d, 0)


def test_cutoff_curves_flag_low_n_rows() -> None:
    summary = _summary()
    ew = (summary["metric"] == "ew") & (summary["side"] == "bottom") & (summary["cutoff"] == 0.01)
    summary.loc[ew & (summary["model"] == "m1"), ["n", "n_total"]] = [2, 20]
    summary.loc[ew & (summary["model"] == "m2"), ["n", "n_total"]] = [7, 20]
    d = cutoff_curves(
        summary,
        metrics=("ew",),
        sides=("bottom",),
        models=["m1", "m2"],
        groups=GROUPS,
        cutoffs={"top": TOP, "bottom": BOTTOM},
        min_contexts=3,
    )
    assert list(d.columns[-2:]) == ["valid_share", "low_n"]
    at = d[d["cutoff"] == 0.01].set_index(["model", "group"])
    assert at.loc[("m1", "simple"), "low_n"] and not at.loc[("m2", "simple"), "low_n"]
    assert at.loc[("m1", "simple"), "valid_share"] == pytest.approx(0.1)
    assert at.loc[("m2", "blimp"), "valid_share"] == pytest.approx(0.35)
    assert (d.loc[d["cutoff"] == 0.5, "valid_share"] == 1.0).all()
    # every other row has n = n_total = 5 >= 3
    assert d["low_n"].sum() == 2  # m1 at 0.01 in both groups
    # the default threshold (10) flags all of them (n = 5)
    d10 = cutoff_curves(
        summary,
        metrics=("ew",),
        sides=("bottom",),
        models=["m1"],
        groups=GROUPS,
        cutoffs={"top": TOP, "bottom": BOTTOM},
    )
    assert DEFAULT_MIN_CONTEXTS == 10 and d10["low_n"].all()


def test_shown_cutoffs_drop_the_all_invalid_end() -> None:
    # m1 has valid contexts from 1e-3 on (2 of them at 1e-3), m2 from 1e-2 on: nothing anywhere below 1e-3
    d = _bottom_curves({"m1": [0, 0, 2, 8, 20], "m2": [0, 0, 0, 12, 20]})
    d["valid_share"], d["low_n"] = low_n_flags(d, 5)
    assert shown_cutoffs(d, "bottom").tolist() == [1e-3, 1e-2, 0.5]
    # hiding the low-n estimates (n = 2 at 1e-3) moves the start to 1e-2
    assert shown_cutoffs(d, "bottom", hide_low_n=True).tolist() == [1e-2, 0.5]
    # a gap inside the range stays (the axis is one interval)
    gap = _bottom_curves({"m1": [3, 0, 0, 8, 20]}).assign(low_n=False)
    assert shown_cutoffs(gap, "bottom").tolist() == [1e-6, 1e-4, 1e-3, 1e-2, 0.5]
    # all invalid: the whole configured range; the invalid share is drawn everywhere
    none = _bottom_curves({"m1": [0] * 5}).assign(low_n=True)
    assert shown_cutoffs(none, "bottom").tolist() == [1e-6, 1e-4, 1e-3, 1e-2, 0.5]
    inv = none.assign(metric="invalid", value=1.0, n=20, low_n=False)
    assert shown_cutoffs(inv, "bottom").tolist() == [1e-6, 1e-4, 1e-3, 1e-2, 0.5]
    assert shown_cutoffs(d, "top").tolist() == []


def test_figure3_bottom_axis_follows_figure2() -> None:
    """Where no lemma counts (EW undefined in every context) the counted mass is 0, not an estimate:
    Figure 3's bottom-p axis leaves out the cutoffs Figure 2's leaves out."""
    n = {"m1": [0, 0, 2, 8, 20], "m2": [0, 0, 0, 12, 20]}
    ew = _bottom_curves(n).assign(low_n=False)
    mass = _bottom_curves(n, metric="prob_counted")
    # prob_counted is never NaN: 0 with every context counted where no lemma counts
    mass = mass.assign(value=np.where(mass["n"] > 0, 1e-4, 0.0), n=20, low_n=False)
    assert shown_cutoffs(ew, "bottom").tolist() == [1e-3, 1e-2, 0.5]
    assert shown_cutoffs(mass, "bottom").tolist() == shown_cutoffs(ew, "bottom").tolist()
    # the invalid share (Figure 4) is an estimate everywhere
    assert shown_cutoffs(mass.assign(metric="invalid", value=1.0), "bottom").tolist() == [1e-6, 1e-4, 1e-3, 1e-2, 0.5]


def test_figure1_draws_the_chance_line_at_half() -> None:
    """Figure 1's EW and MW panels carry a dashed line at 0.5 (chance for both), inside the y range, so that a
    random model's 0.48-0.51 reads as noise around chance and not as an effect (issue 21)."""
    import matplotlib.pyplot as plt

    from verbeval.agreement.report.plots import plot_cutoff_curves
    from verbeval.core.plots import CHANCE_STYLE

    spec = CUTOFF_FIGURES["scores-top"]
    summary = _summary()
    summary["value"] = np.where(summary["metric"].isin(["ew", "mw"]), 0.49 + 0.02 * (summary["cutoff"] == 1.0), 0.3)
    data = cutoff_curves(
        summary,
        metrics=spec.metrics,
        sides=spec.sides,
        models=["m1", "m2"],
        groups=GROUPS,
        cutoffs={"top": TOP, "bottom": BOTTOM},
    )
    fig = plot_cutoff_curves(data, spec, ["m1", "m2"], 0.95)
    rows = len(fig.axes) // 2  # EW, MW (and a valid-share row where the figure has one) x two models
    score_axes = np.array(fig.axes[: rows * 2]).reshape(rows, 2)[:2].ravel()
    assert [ax.get_ylabel().split()[0] for ax in score_axes[::2]] == ["EW", "MW"]
    for ax in score_axes:
        chance = [
            ln
            for ln in ax.get_lines()
            if ln.get_linestyle() == CHANCE_STYLE["linestyle"] and list(ln.get_ydata()) == [0.5, 0.5]
        ]
        assert len(chance) == 1, ax.get_ylabel()
        low, high = ax.get_ylim()
        assert low < 0.5 < high
    plt.close(fig)


def _texts(fig: Any) -> str:
    """Every title, legend entry and note of a figure."""
    parts = [t.get_text() for t in fig.texts] + [ax.get_title() for ax in fig.axes]
    parts += [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    if fig._suptitle is not None:
        parts.append(fig._suptitle.get_text())
    return "\n".join(parts)


def test_figures_label_random_models_and_only_them() -> None:
    import matplotlib.pyplot as plt

    from verbeval.agreement.report.plots import (
        plot_checkpoints,
        plot_cutoff_curves,
        plot_lemma_accuracy,
        plot_model_comparison,
    )

    note = "Randomly initialised, so the numbers are meaningless: m2."
    summary = _summary()
    for figure in ("scores-top", "prob-counted"):
        spec = CUTOFF_FIGURES[figure]
        data = cutoff_curves(
            summary,
            metrics=spec.metrics,
            sides=spec.sides,
            models=["m1", "m2"],
            groups=GROUPS,
            cutoffs={"top": TOP, "bottom": BOTTOM},
        )
        fig = plot_cutoff_curves(data, spec, ["m1", "m2"], 0.95, random={"m2", "m3"})
        assert [ax.get_title() for ax in fig.axes[:2]] == ["m1", "m2 (random init)"]
        assert note in _texts(fig) and "m3" not in _texts(fig)
        plt.close(fig)
        fig = plot_cutoff_curves(data, spec, ["m1", "m2"], 0.95)
        assert [ax.get_title() for ax in fig.axes[:2]] == ["m1", "m2"] and "andom" not in _texts(fig)
        plt.close(fig)
    comparison = model_comparison(summary, models=["m1", "m2"], groups=GROUPS)
    fig = plot_model_comparison(comparison, ["m1", "m2"], random={"m2"})
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["m1", "m2 (random init)"] and note in _texts(fig)
    plt.close(fig)
    fig = plot_model_comparison(comparison, ["m1", "m2"])
    assert "andom" not in _texts(fig)
    plt.close(fig)
    stats = pd.concat([_stats("m1", [-3.0, -1.0, -2.0], [0.6, 0.9, 0.7]), _stats("m2", [-1.0, -2.0], [0.5, 0.4])])
    lemmas = lemma_accuracy(stats, ["m1", "m2"], n_bins=2)
    fig = plot_lemma_accuracy(lemmas, ["m1", "m2"], random={"m2"})
    assert [ax.get_title() for ax in fig.axes] == ["m1", "m2 (random init)"] and note in _texts(fig)
    plt.close(fig)
    ck = checkpoint_curves(summary, checkpoints=[("m", "m1", 0), ("m", "m2", 10), ("n", "m3", 10)], groups=GROUPS)
    fig = plot_checkpoints(ck, random={"m2"})
    assert "m (random init)" in _texts(fig) and "\nn\n" in _texts(fig) + "\n" and note in _texts(fig)
    plt.close(fig)
    fig = plot_checkpoints(ck)
    assert "andom" not in _texts(fig)
    plt.close(fig)
    # the worst-lemma pages name the random model in its heading
    worst = worst_lemmas(stats, 1, ["m1", "m2"])
    assert "## m2 (random init)" in worst_lemmas_markdown(worst, random={"m2"})
    assert "## m1\n" in worst_lemmas_markdown(worst, random={"m2"}) and "andom" not in worst_lemmas_markdown(worst)
    assert "<h2>m2 (random init)</h2>" in worst_lemmas_html(worst, random={"m2"})


def test_plot_commands_read_random_init_from_their_inputs() -> None:
    from verbeval.agreement.cli.figures import _random_in

    summary = _summary()
    assert _random_in(summary) == set()  # an older summary without the column
    assert _random_in(summary.assign(random_init=summary["model"] == "m3")) == {"m3"}
    assert _random_in(pd.DataFrame({"model": ["a", "a", "b"], "random_init": ["True", "True", "False"]})) == {"a"}


def _figure2(d: pd.DataFrame, **kw: Any) -> Any:
    from verbeval.agreement.report.plots import plot_cutoff_curves

    data = pd.concat([d, d.assign(metric="mw")], ignore_index=True)
    data["valid_share"], data["low_n"] = low_n_flags(data, 5)
    return plot_cutoff_curves(data, CUTOFF_FIGURES["scores-bottom"], ["m1", "m2"], 0.95, min_contexts=5, **kw)


def test_figure2_axis_low_n_points_and_valid_share_row() -> None:
    import matplotlib.pyplot as plt

    d = _bottom_curves({"m1": [0, 0, 2, 8, 20], "m2": [0, 0, 0, 12, 20]})
    fig = _figure2(d)
    axes = np.array(fig.axes).reshape(3, 2)  # EW, MW, valid share x two models
    for ax in axes.flat:  # the x axis starts half a decade below 1e-3, not at 1e-6
        np.testing.assert_allclose(ax.get_xlim(), (1e-3 / 2, 0.5 * 2))
    # m1's EW panel: the low-n point at 1e-3 hollow (no face colour), the solid line without it
    hollow = [c for c in axes[0][0].collections if len(c.get_offsets()) and not len(c.get_facecolors())]
    assert len(hollow) == 1 and np.asarray(hollow[0].get_offsets()).tolist() == [[1e-3, 0.6]]
    solid = [ln for ln in axes[0][0].get_lines() if ln.get_linestyle() == "-" and ln.get_marker() == "o"]
    assert len(solid) == 1 and np.isnan(solid[0].get_ydata()[:3]).all() and solid[0].get_ydata()[3] == 0.6
    # the valid-share row: n / n_total of m2
    share = axes[2][1].get_lines()[0]
    np.testing.assert_allclose(share.get_ydata(), [0, 0, 0, 0.6, 1.0])
    assert axes[2][0].get_ylabel().startswith("valid share")
    note = " ".join(t.get_text() for t in fig.texts)
    assert "Not shown: bottom-p cutoff 1e-06, 0.0001" in note
    plt.close(fig)
    fig = _figure2(d, hide_low_n=True)
    axes = np.array(fig.axes).reshape(3, 2)
    np.testing.assert_allclose(axes[0][0].get_xlim(), (1e-2 / 2, 0.5 * 2))
    assert not [c for c in axes[0][0].collections if len(c.get_offsets()) and not len(c.get_facecolors())]
    assert "fewer than 5 contexts are not drawn" in " ".join(t.get_text() for t in fig.texts)
    plt.close(fig)


def test_model_comparison_is_table2_long() -> None:
    summary = _summary()
    d = model_comparison(summary, models=["m1", "m3"], groups=GROUPS)
    assert len(d) == 2 * 2 * 3
    assert d[["group", "metric", "model"]].head(6).values.tolist() == [
        ["simple", "tse", "m1"],
        ["simple", "tse", "m3"],
        ["simple", "ew", "m1"],
        ["simple", "ew", "m3"],
        ["simple", "mw", "m1"],
        ["simple", "mw", "m3"],
    ]
    for r in d.itertuples(index=False):
        s = summary[(summary["model"] == r.model) & (summary["group"] == r.group) & (summary["metric"] == r.metric)]
        if r.metric != "tse":
            s = s[(s["side"] == "top") & (s["cutoff"] == 1.0)]
        assert len(s) == 1
        assert (r.value, r.ci_low, r.ci_high) == (s["value"].iloc[0], s["ci_low"].iloc[0], s["ci_high"].iloc[0])
    with pytest.raises(VerbevalError, match="EW at top p = 1"):
        model_comparison(
            summary[~((summary["metric"] == "ew") & (summary["cutoff"] == 1.0))], models=["m1"], groups=GROUPS
        )


def test_plot_commands_write_csv_and_images(tmp_path: Path) -> None:
    summary = tmp_path / "summary_all.csv"
    _summary().to_csv(summary, index=False)
    groups = tmp_path / "groups.yaml"
    groups.write_text(
        "groups:\n"
        + "".join(f"  - {{id: {g['id']}, name: {g['name']}, sources: [{g['sources'][0]}]}}\n" for g in GROUPS)
    )
    csv = tmp_path / "fig2.csv"
    images = [tmp_path / "fig2.png", tmp_path / "fig2.pdf", tmp_path / "fig2.svg"]
    assert (
        main(
            [
                "-q",
                "plot-cutoffs",
                "--figure",
                "scores-bottom",
                "--summary",
                str(summary),
                "--groups-file",
                str(groups),
                "--models",
                "m1,m2",
                "--top-cutoffs",
                "0.5,1",
                "--bottom-cutoffs",
                "0.01,0.5",
                "--confidence",
                "0.95",
                "--csv",
                str(csv),
                "--out",
                *map(str, images),
            ]
        )
        == 0
    )
    d = pd.read_csv(csv)
    assert set(d["cutoff"]) == {0.01, 0.5} and set(d["metric"]) == {"ew", "mw"} and set(d["side"]) == {"bottom"}
    assert images[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert images[1].read_bytes()[:5] == b"%PDF-" and b"CreationDate" not in images[1].read_bytes()
    assert b"<svg" in images[2].read_bytes()[:2000]
    first = [p.read_bytes() for p in images]
    csv2 = tmp_path / "m.csv"
    assert (
        main(
            [
                "-q",
                "plot-models",
                "--summary",
                str(summary),
                "--groups-file",
                str(groups),
                "--models",
                "m1,m2",
                "--csv",
                str(csv2),
                "--out",
                str(tmp_path / "m.png"),
            ]
        )
        == 0
    )
    assert pd.read_csv(csv2)["metric"].tolist()[:2] == ["tse", "tse"]
    # a rerun gives identical files (no timestamps)
    assert (
        main(
            [
                "-q",
                "plot-cutoffs",
                "--figure",
                "scores-bottom",
                "--summary",
                str(summary),
                "--groups-file",
                str(groups),
                "--models",
                "m1,m2",
                "--top-cutoffs",
                "0.5,1",
                "--bottom-cutoffs",
                "0.01,0.5",
                "--csv",
                str(csv),
                "--confidence",
                "0.95",
                "--out",
                *map(str, images),
            ]
        )
        == 0
    )
    assert [p.read_bytes() for p in images] == first
    # the threshold flows from --min-contexts into the CSV (every estimate of _summary() has n = 5)
    for k, flagged in ((5, False), (6, True)):
        assert (
            main(
                [
                    "-q",
                    "plot-cutoffs",
                    "--figure",
                    "scores-bottom",
                    "--summary",
                    str(summary),
                    "--groups-file",
                    str(groups),
                    "--models",
                    "m1,m2",
                    "--top-cutoffs",
                    "0.5,1",
                    "--bottom-cutoffs",
                    "0.01,0.5",
                    "--min-contexts",
                    str(k),
                    "--low-n",
                    "hide",
                    "--csv",
                    str(csv),
                    "--out",
                    str(images[0]),
                ]
            )
            == 0
        )
        d = pd.read_csv(csv)
        assert d["low_n"].tolist() == [flagged] * len(d) and (d["valid_share"] == 1.0).all()


def test_plot_lemmas_cli(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    _stats("a", [-3.0, -1.0, -2.0, -6.0], [0.6, 0.9, 0.7, 0.1]).assign(n_wrong=[4, 1, 3, 9]).to_csv(a, index=False)
    out = {k: tmp_path / f"out.{k}" for k in ("csv", "json", "png", "wcsv", "md", "html")}
    assert (
        main(
            [
                "-q",
                "plot-lemmas",
                "--stats",
                str(a),
                "--models",
                "a",
                "--bins",
                "2",
                "--worst-lemmas",
                "2",
                "--csv",
                str(out["csv"]),
                "--metrics-json",
                str(out["json"]),
                "--out",
                str(out["png"]),
                "--worst-csv",
                str(out["wcsv"]),
                "--worst-md",
                str(out["md"]),
                "--worst-html",
                str(out["html"]),
            ]
        )
        == 0
    )
    assert json.loads(out["json"].read_text())["a"]["spearman_accuracy_log10_prob"] == 1.0
    assert pd.read_csv(out["wcsv"])["lemma"].tolist() == ["l3", "l0"]
    assert pd.read_csv(out["csv"])["bin"].tolist() == [0, 1, 1, 0]  # probability ranks 2, 4, 3, 1 of 4
    assert "| 1 | l3 |" in out["md"].read_text() and "<td>l3</td>" in out["html"].read_text()


def test_figure_data_files_say_which_model_is_random(tmp_path: Path) -> None:
    """Every figure's data CSV carries the summary's (or lemma statistics') random_init as its last
    column, per row's model; lemma_metrics.json a random_init field per model."""
    summary, stats = tmp_path / "summary_all.csv", tmp_path / "stats.csv"
    _summary().assign(random_init=lambda d: d["model"] == "m2").to_csv(summary, index=False)
    groups = tmp_path / "groups.yaml"
    groups.write_text(
        "groups:\n"
        + "".join(f"  - {{id: {g['id']}, name: {g['name']}, sources: [{g['sources'][0]}]}}\n" for g in GROUPS)
    )
    common = ["--summary", str(summary), "--groups-file", str(groups), "--out", str(tmp_path / "f.png")]
    cutoffs = ["--top-cutoffs", "0.5,1", "--bottom-cutoffs", "0.01,0.5"]
    runs = {
        "cutoffs.csv": ["plot-cutoffs", "--figure", "invalid", "--models", "m1,m2", *cutoffs],
        "models.csv": ["plot-models", "--models", "m1,m2"],
        "checkpoints.csv": ["plot-checkpoints", "--checkpoint", "m", "m1", "0", "--checkpoint", "m", "m2", "10"],
    }
    for name, args in runs.items():
        assert main(["-q", *args, *common, "--csv", str(tmp_path / name)]) == 0, name
    pd.concat(
        [
            _stats("a", [-3.0, -1.0, -2.0], [0.6, 0.9, 0.7]),
            _stats("b", [-1.0, -2.0], [0.5, 0.4]).assign(random_init=True),
        ]
    ).assign(random_init=lambda d: d["random_init"].fillna(False).astype(bool)).to_csv(stats, index=False)
    out = {k: tmp_path / f"lemmas.{k}" for k in ("csv", "json", "png", "worst.csv")}
    args = ["plot-lemmas", "--stats", str(stats), "--models", "a,b", "--bins", "2", "--worst-lemmas", "1"]
    args += ["--csv", str(out["csv"]), "--metrics-json", str(out["json"]), "--out", str(out["png"])]
    assert main(["-q", *args, "--worst-csv", str(out["worst.csv"])]) == 0
    expected = {"cutoffs.csv": ["m1", "m2"], "models.csv": ["m1", "m2"], "checkpoints.csv": ["m1", "m2"]}
    expected |= {"lemmas.csv": ["a", "b"], "lemmas.worst.csv": ["a", "b"]}
    for name, models in expected.items():
        data = pd.read_csv(tmp_path / name)
        assert data.columns[-1] == "random_init", name
        flags = data.groupby("model")["random_init"].unique().map(list).to_dict()
        assert flags == {models[0]: [False], models[1]: [True]}, name
    metrics = json.loads(out["json"].read_text())
    assert metrics["a"]["random_init"] is False and metrics["b"]["random_init"] is True
    assert metrics["a"]["n_lemmas"] == 3  # beside the per-model numbers, which are unchanged


# --------------------------------------------------------------------------- Table 3

TEMPLATES = pd.DataFrame(
    {
        "group": ["simple", "simple", "obj_rel_within", "obj_rel_within", "obj_rel_within", "obj_rel_within"],
        "source": "x",
        "line": [1, 2, 1, 2, 3, 4],
        "left": [
            "the dog",
            "the dogs",
            "the cat that the boy",
            "the cat that the boy",
            "the cats that the boys",
            "the cats that the boys",
        ],
        "right": ["", "", "likes", "hates", "likes", "hates"],
        "correct": ["is", "are", "arrives", "bakes", "arrive", "bake"],
        "incorrect": ["are", "is", "arrive", "bake", "arrives", "bakes"],
        "label": ["singular", "plural", "singular", "singular", "plural", "plural"],
        "plural": [False, True, False, False, True, True],
    }
)


def test_select_rows_default_and_explicit() -> None:
    sel = select_rows(TEMPLATES, ["simple", "obj_rel_within"])
    assert sel["group"].tolist() == ["obj_rel_within", "obj_rel_within"]
    assert sel["row"].tolist() == [0, 2] and sel["plural"].tolist() == [False, True]
    assert sel["selection"].tolist() == [0, 1]
    # default groups not run: the first group that was
    assert select_rows(TEMPLATES, ["simple"], default_groups=["obj_rel_across"])["line"].tolist() == [1, 2]
    assert table3_groups(["simple"], None, ["obj_rel_across"]) == ["simple"]
    sel = select_rows(
        TEMPLATES,
        ["simple", "obj_rel_within"],
        [
            {"group": "obj_rel_within", "left": "The Cat  that the boy", "right": "HATES"},
            {"group": "simple", "left": "the dogs", "right": None},
        ],
    )
    assert sel["row"].tolist() == [1, 1] and sel["group"].tolist() == ["obj_rel_within", "simple"]
    assert table3_groups(["simple", "obj_rel_within"], [{"group": "simple", "left": "x"}]) == ["simple"]
    with pytest.raises(VerbevalError, match="no row of group 'simple' has left context 'the cow'"):
        select_rows(TEMPLATES, ["simple"], [{"group": "simple", "left": "the cow"}])
    with pytest.raises(VerbevalError, match="was not run"):
        select_rows(TEMPLATES, ["simple"], [{"group": "blimp", "left": "the dog"}])


def test_mark_tokens() -> None:
    lemmas = pd.DataFrame(
        {
            "lemma": ["arrive", "put", "bake"],
            "sing": ["arrives", "puts", "bakes"],
            "plur": ["arrive", "put", "bake"],
            "sing_id": [1, 9, 3],
            "plur_id": [2, 10, 9],
        }
    )
    numbers = form_numbers(lemmas, [(7, 8, "is/are"), (-1, 11, "xs/x")])
    marks, names = mark_tokens([2, 1, 8, 7, 9, 0, 11, 5], True, numbers)
    assert marks == ["correct", "incorrect", "correct", "incorrect", "ambiguous", "", "correct", ""]
    assert names == ["arrive", "arrive", "is/are", "is/are", "bake/put", "", "xs/x", ""]
    marks, _ = mark_tokens([2, 1, 8, 7], False, numbers)
    assert marks == ["incorrect", "correct", "incorrect", "correct"]


def _topk_model(kind: str, topk: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> ModelTopK:
    vocab = {
        1: "arrives",
        2: "arrive",
        3: "bakes",
        4: "bake",
        5: "cries",
        6: "cry",
        7: "is",
        8: "are",
        20: "the",
        21: ".",
    }
    return ModelTopK(
        name=f"{kind}-lm",
        kind=kind,
        topk=topk,
        lemmas=LEMMAS,
        decode=lambda ids: [vocab[i] for i in ids],
        verb_ids=lambda words: np.array([{"is": 7, "are": 8}.get(w, -1) for w in words]),
        render=lambda left, right: f"{left} [MASK] {right}." if kind == "masked" else left,
    )


def test_topk_table_marks_correct_and_incorrect_forms() -> None:
    # masked LM: the 4 obj_rel_within rows are 4 contexts; causal LM: 2 (the right context is unseen)
    masked = {
        "obj_rel_within": (
            np.arange(4),
            np.array([[1, 2, 20], [20, 21, 1], [2, 1, 21], [3, 4, 6]]),
            np.array([[0.5, 0.3, 0.1], [0.4, 0.2, 0.1], [0.6, 0.2, 0.1], [0.3, 0.2, 0.1]]),
        ),
        "simple": (np.arange(2), np.array([[7, 8, 20], [7, 8, 21]]), np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.05]])),
    }
    causal = {
        "obj_rel_within": (
            np.arange(2),
            np.array([[6, 5, 21], [4, 3, 20]]),
            np.array([[0.2, 0.1, 0.05], [0.3, 0.1, 0.01]]),
        ),
        "simple": (np.arange(2), np.array([[8, 7, 21], [8, 7, 20]]), np.array([[0.5, 0.4, 0.1], [0.5, 0.3, 0.2]])),
    }
    models = [_topk_model("masked", masked), _topk_model("causal", causal)]
    sel = select_rows(
        TEMPLATES,
        ["simple", "obj_rel_within"],
        [
            {"group": "obj_rel_within", "left": "the cats that the boys", "right": "hates"},
            {"group": "simple", "left": "the dog"},
        ],
    )
    t = topk_table(sel, TEMPLATES, models)
    assert len(t) == 2 * 2 * 3
    assert t[["selection", "model"]].drop_duplicates().values.tolist() == [
        [0, "masked-lm"],
        [0, "causal-lm"],
        [1, "masked-lm"],
        [1, "causal-lm"],
    ]
    first = t[(t["selection"] == 0) & (t["model"] == "masked-lm")]  # masked context 3 (plural)
    assert first["token"].tolist() == ["bakes", "bake", "cry"]
    assert first["mark"].tolist() == ["incorrect", "correct", "correct"]
    assert first["lemma"].tolist() == ["bake", "bake", "cry"]
    assert first["prob"].tolist() == pytest.approx([0.3, 0.2, 0.1])
    assert first["rank"].tolist() == [1, 2, 3]
    assert first["context"].iloc[0] == "the cats that the boys ___ hates."
    assert first["label"].iloc[0] == "plural"
    assert first["model_input"].iloc[0] == "the cats that the boys [MASK] hates."
    causal_rows = t[(t["selection"] == 0) & (t["model"] == "causal-lm")]  # causal context 1
    assert causal_rows["token"].tolist() == ["bake", "bakes", "the"]
    assert causal_rows["mark"].tolist() == ["correct", "incorrect", ""]
    assert causal_rows["model_input"].iloc[0] == "the cats that the boys"
    # the row's own verb (is/are, not an eligible lemma) is marked too; singular context
    simple = t[(t["selection"] == 1) & (t["model"] == "masked-lm")]
    assert simple["token"].tolist() == ["is", "are", "the"]
    assert simple["mark"].tolist() == ["correct", "incorrect", ""]
    md = table3_markdown(t)
    assert "## the cats that the boys ___ hates. (plural; obj_rel_within)" in md
    assert "| 1 | bakes (0.3) ✗ | bake (0.3) ✓ |" in md
    html = table3_html(t)
    assert '<td class="correct">bake (0.2) ✓</td>' in html and '<td class="incorrect">bakes (0.3) ✗</td>' in html
    # a randomly initialised model is named so in the column header, the other one is not
    assert "random init" not in md and "random init" not in html
    models = list(dict.fromkeys(t["model"]))
    md = table3_markdown(t, random={models[1]})
    assert f"| rank | {models[0]} | {models[1]} (random init) |" in md
    assert f"<th>{models[1]} (random init)</th>" in table3_html(t, random={models[1]})


def test_topk_table_cli(tmp_path: Path, tokenizer_path: Callable[[str], Path]) -> None:
    """Real GPT-2 tokenizer: decoding and the marking of the row's own verb."""
    from verbeval.agreement.data.eligibility import single_token_ids
    from verbeval.core.models import load_tokenizer

    tok_dir = tokenizer_path("gpt2")
    tok = load_tokenizer(str(tok_dir))
    is_id, are_id, the_id = (int(i) for i in single_token_ids(tok, ["is", "are", "the"]))
    lemmas = pd.DataFrame(
        {"lemma": ["arrive", "play", "run"], "sing": ["arrives", "plays", "runs"], "plur": ["arrive", "play", "run"]}
    )
    lemmas[["sing_id", "plur_id"]] = np.array([single_token_ids(tok, list(lemmas[c])) for c in ("sing", "plur")]).T
    assert (lemmas[["sing_id", "plur_id"]] > 0).all().all()
    templates = TEMPLATES.copy()
    tpath, lpath = tmp_path / "templates.parquet", tmp_path / "lemmas.parquet"
    templates.to_parquet(tpath)
    lemmas.to_parquet(lpath)
    ids = np.array([[are_id, is_id, the_id], [is_id, are_id, int(lemmas["plur_id"][0])]])
    shard = _shard(
        tmp_path / "simple.parquet",
        "simple",
        [(False, [(0.1, 0.1)] * 3), (True, [(0.1, 0.1)] * 3)],
        lemmas=lemmas,
        kind="causal",
        topk=(ids, np.array([[0.5, 0.3, 0.1], [0.4, 0.3, 0.2]])),
    )
    # the same shard in a store whose manifest says its model is random (meta.random_init): model "rnd"
    from verbeval.agreement.engine.shardstore import ShardStore

    store = ShardStore(tmp_path / "store")
    (tmp_path / "store" / "simple").mkdir()
    store.path("simple/1-of-1.parquet").write_bytes(shard.read_bytes())
    store.record("simple/1-of-1.parquet", "key")
    store.finish(tmp_path / "store" / "manifest.json", ["simple/1-of-1.parquet"], {"random_init": True})
    out = {k: tmp_path / f"t3.{k}" for k in ("csv", "md", "html")}
    assert (
        main(
            [
                "-q",
                "topk-table",
                "--templates",
                str(tpath),
                "--model",
                f"gpt={tok_dir}",
                "--model",
                f"rnd={tok_dir}",
                "--lemmas",
                f"gpt={lpath}",
                "--lemmas",
                f"rnd={lpath}",
                "--shards",
                f"gpt={shard}",
                f"rnd={tmp_path / 'store' / 'manifest.json'}",
                "--default-groups",
                "simple",
                "--csv",
                str(out["csv"]),
                "--md",
                str(out["md"]),
                "--html",
                str(out["html"]),
            ]
        )
        == 0
    )
    table = pd.read_csv(out["csv"], keep_default_na=False)
    t = table[table["model"] == "gpt"]
    assert t["token"].tolist() == ["are", "is", "the", "is", "are", "arrive"]  # decoded, leading space stripped
    assert t["mark"].tolist() == ["incorrect", "correct", "", "incorrect", "correct", "correct"]
    assert t["model_input"].tolist()[:1] == ["the dog"]  # causal, uncased shard: left context only
    # the random model says so: in the CSV's last column (and the real one is false), the Markdown and HTML
    assert table.columns[-1] == "random_init"
    assert table.groupby("model")["random_init"].unique().map(list).to_dict() == {"gpt": [False], "rnd": [True]}
    assert "rnd (random init)" in out["md"].read_text() and "rnd (random init)" in out["html"].read_text()


# --------------------------------------------------------------------------- configuration


def test_figure_config_defaults() -> None:
    cfg = validate_config({"models": [{"id": "gpt2"}]})
    assert cfg["agreement"]["figures"] == {
        "formats": ["png", "pdf"],
        "worst_lemmas": 20,
        "lemma_bins": 10,
        "min_contexts": 10,
        "low_n": "fade",
        "contexts": None,
        "context_groups": ["obj_rel_within", "obj_rel_across"],
        "contexts_per_label": 1,
        "checkpoints": {"enabled": True, "log_x": False},
    }
    cfg: dict[str, Any] = validate_config(
        {
            "models": [{"id": "gpt2"}],
            "agreement": {"figures": {"formats": ["svg"], "contexts": [{"group": "simple", "left": "the dog"}]}},
        }
    )
    assert cfg["agreement"]["figures"]["contexts"] == [{"group": "simple", "left": "the dog", "right": None}]
    for bad in (
        {"formats": ["gif"]},
        {"formats": []},
        {"contexts": [{"left": "x"}]},
        {"worst_lemmas": 0},
        {"min_contexts": 0},
        {"low_n": "drop"},
    ):
        with pytest.raises(VerbevalError, match="agreement.figures"):
            validate_config(copy.deepcopy({"models": [{"id": "gpt2"}], "agreement": {"figures": bad}}))


# --------------------------------------------------------------------------- the workflow's rules

REPO = Path(__file__).resolve().parents[1]


def test_table2_is_a_report_item(ci_rules: Any) -> None:
    from snakemake.io import is_flagged

    rule = ci_rules.get_rule("table2")
    flagged = {Path(f).name: f.flags["report"] for f in rule.output if is_flagged(f, "report")}
    assert list(flagged) == ["table2.html"]
    item = flagged["table2.html"]
    assert (item.category, item.subcategory) == ("Agreement", "Tables")
    assert Path(item.caption.get_path_or_uri(secret_free=True)).resolve() == REPO / "workflow/report/table2.rst"
    assert "--html {output.html:q}" in rule.shellcmd and "{params.settings}" in rule.shellcmd
    assert "--confidence=0.95" in rule.params.settings.split()  # the declared setting (verbeval.agreement.steps)


def test_cutoff_figure_rule_passes_the_threshold(ci_rules: Any) -> None:
    r = ci_rules.get_rule("figure_cutoffs")  # Figures 1-4, one job each (wildcard stem)
    figs = ci_rules.config["agreement"]["figures"]
    assert (figs["min_contexts"], figs["low_n"]) == (10, "fade")
    assert {"--min-contexts=10", "--low-n=fade"} <= set(r.params.settings.split())
    assert "{params.settings}" in r.shellcmd

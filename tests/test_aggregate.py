"""Tests for verbeval.agreement.scores.aggregate (shard validation, bootstrap, summaries) and verbeval.agreement.report.tables.

Shards are written with :func:`verbeval.agreement.engine.shards.write_shard` from synthetic distributions, so no
model is needed.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from verbeval.agreement.engine.kernels import form_statistics
from verbeval.agreement.engine.shards import META_KEY, ChunkResult, chunk_range, read_shard_meta, write_shard
from verbeval.agreement.engine.shardstore import chunk_label
from verbeval.agreement.report.tables import (
    random_models,
    table2,
    to_html,
    to_latex,
    to_markdown,
    to_metrics,
    tse_wilson,
)
from verbeval.agreement.scores.aggregate import context_scores, read_shards, row_tse, summarise, wilson_interval
from verbeval.agreement.scores.metrics import score_logits
from verbeval.core.bootstrap import bootstrap_means
from verbeval.core.errors import VerbevalError

V = 40  # vocabulary size of the synthetic distributions
LEMMA_IDS = np.array([[3, 4], [10, 11], [20, 21], [30, 31]])  # (singular id, plural id)
N_CTX = 7
N_CHUNKS = 3


def _logits(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(scale=3.0, size=(N_CTX, V))


PLURAL = np.array([False, True, True, False, True, False, True])
# TSE rows: (context, singular id, plural id); context 2 has two rows, context 5 none; one row
# has a form that is not a single token (-1)
TSE_ROWS = [(0, 3, 4), (1, 10, 11), (2, 20, 21), (2, 30, 31), (3, 3, -1), (4, 10, 11), (6, 30, 31)]


def _base_meta() -> dict[str, Any]:
    return {
        "model_id": "org/tiny",
        "revision": "abc123",
        "kind": "masked",
        "cased": True,
        "dtype": "float32",
        "tokenizer_fingerprint": "f" * 64,
        "lemma_set_sha256": "e" * 64,
        "prepend_bos": False,
        "n_lemmas": len(LEMMA_IDS),
        "group": "g1",
        "n_chunks": N_CHUNKS,
        "n_group_contexts": N_CTX,
        "top_k": 5,
        "verbeval_version": "test",
    }


def write_synthetic_shards(out: Path, logits: np.ndarray | None = None) -> list[Path]:
    """Shards of one (model, group) with N_CTX contexts split N_CHUNKS ways."""
    logits = _logits() if logits is None else logits
    probs = torch.softmax(torch.as_tensor(logits, dtype=torch.float64), dim=-1)
    p, above, below = form_statistics(probs, torch.as_tensor(LEMMA_IDS.reshape(-1)))
    topk = torch.topk(probs, 5, dim=-1)
    row_ctx = np.array([r[0] for r in TSE_ROWS])
    pairs = np.array([r[1:] for r in TSE_ROWS])
    tse_p = probs.numpy()[row_ctx[:, None], np.clip(pairs, 0, None)]
    tse_p[pairs < 0] = np.nan
    paths = []
    for k in range(N_CHUNKS):
        start, stop = chunk_range(N_CTX, N_CHUNKS, k)
        sl = slice(start, stop)
        in_chunk = (row_ctx >= start) & (row_ctx < stop)
        rows = pd.DataFrame({"row": np.flatnonzero(in_chunk), "context_id": row_ctx[in_chunk]})
        result = ChunkResult(
            prob=p[sl].float().numpy(),
            cum_above=above[sl].float().numpy(),
            cum_below=below[sl].float().numpy(),
            topk_ids=topk.indices[sl].int().numpy(),
            topk_probs=topk.values[sl].float().numpy(),
            tse_p=tse_p[in_chunk].reshape(-1, 2),
        )
        contexts = pd.DataFrame({"context_id": np.arange(start, stop), "plural": PLURAL[sl]})
        path = out / f"{chunk_label(k, N_CHUNKS)}.parquet"
        write_shard(
            path, contexts, rows, result, {**_base_meta(), "chunk": k, "context_start": start, "context_stop": stop}
        )
        paths.append(path)
    return paths


def _rewrite_meta(path: Path, **changes: Any) -> None:
    table = pq.read_table(path)
    meta = {**read_shard_meta(path), **changes}
    pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()}), path)


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    return write_synthetic_shards(tmp_path / "shards")


# --------------------------------------------------------------------------- reading shards


def test_read_shards_roundtrip(shards: list[Path]) -> None:
    g = read_shards(shards[::-1])  # order of the paths does not matter
    assert g.context_id.tolist() == list(range(N_CTX))
    assert g.plural.tolist() == PLURAL.tolist()
    assert g.stats.prob.shape == (N_CTX, len(LEMMA_IDS), 2)
    assert g.rows.tolist() == list(range(len(TSE_ROWS)))
    assert g.row_context.tolist() == [r[0] for r in TSE_ROWS]
    assert g.topk_ids.shape == (N_CTX, 5)
    assert g.meta["model_id"] == "org/tiny"

    top, bottom = [0.1, 0.5, 0.9, 1.0], [0.5, 0.1, 0.01]
    scores = context_scores(g, top, bottom)
    direct = score_logits(_logits(), PLURAL, LEMMA_IDS, top, bottom)
    for side, cuts in (("top", top), ("bottom", bottom)):
        for metric in ("ew", "mw", "prob_counted"):
            for j, p in enumerate(cuts):
                np.testing.assert_allclose(
                    scores[f"{metric}_{side}@{p:g}"], getattr(direct, f"{metric}_{side}")[:, j], rtol=1e-5, atol=1e-6
                )

    templates = pd.DataFrame({"plural": PLURAL[[r[0] for r in TSE_ROWS]]})
    tse = row_tse(g, templates)
    want = score_logits(
        _logits()[[r[0] for r in TSE_ROWS]],
        templates["plural"].to_numpy(),
        LEMMA_IDS,
        [1.0],
        [1.0],
        tse_ids=np.array([r[1:] for r in TSE_ROWS]),
    ).tse
    assert np.array_equal(tse["tse"].to_numpy(), want, equal_nan=True)
    assert np.isnan(tse["tse"].iloc[4]) and not np.isnan(tse["tse"].drop(index=4)).any()


def test_read_shards_rejects_missing_chunk(shards: list[Path]) -> None:
    with pytest.raises(VerbevalError) as err:
        read_shards([shards[0], shards[2]])
    assert str(err.value) == (
        f"model 'org/tiny', group 'g1': shard 2-of-3.parquet of {shards[0].parent} is not "
        "among the shards given (they cover chunks [1, 3] of 3): rerun the model's inference job"
    )
    with pytest.raises(VerbevalError, match=r"a chunk given twice.*chunks \[1, 1, 2, 3\]"):
        read_shards([shards[0], *shards])
    with pytest.raises(VerbevalError, match="no shards"):
        read_shards([])


def test_read_shards_rejects_truncated_shard(shards: list[Path]) -> None:
    table = pq.read_table(shards[1])
    meta = read_shard_meta(shards[1])
    assert table.num_rows >= 2
    pq.write_table(table.slice(0, table.num_rows - 1), shards[1])
    assert read_shard_meta(shards[1]) == meta  # same metadata, one context fewer
    with pytest.raises(VerbevalError, match=r"1-of-3|2-of-3") as exc:
        read_shards(shards)
    assert "truncated" in str(exc.value) and str(shards[1]) in str(exc.value)


@pytest.mark.parametrize("key", ["revision", "tokenizer_fingerprint", "model_id", "lemma_set_sha256", "prepend_bos"])
def test_read_shards_rejects_inconsistent_metadata(shards: list[Path], key: str) -> None:
    _rewrite_meta(shards[2], **{key: "something-else"})
    with pytest.raises(VerbevalError) as exc:
        read_shards(shards)
    msg = str(exc.value)
    assert f"{key}='something-else'" in msg and str(shards[2]) in msg and "stale" in msg
    assert "\n" not in msg


def test_read_shards_rejects_other_schema_version(shards: list[Path]) -> None:
    _rewrite_meta(shards[0], schema_version=0)
    with pytest.raises(VerbevalError, match="schema version 0"):
        read_shards(shards)


def test_read_shards_rejects_non_verbeval_parquet(shards: list[Path], tmp_path: Path) -> None:
    other = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(other)
    with pytest.raises(VerbevalError, match="not a verbeval shard") as exc:
        read_shards([shards[0], other, shards[2]])
    assert str(other) in str(exc.value)


@pytest.mark.parametrize("damage", ["half", "empty"])
def test_read_shards_rejects_corrupt_file(shards: list[Path], damage: str) -> None:
    """A shard cut short at the byte level (disk full, partial copy) is a one-line VerbevalError too."""
    data = shards[1].read_bytes()
    shards[1].write_bytes(data[: len(data) // 2] if damage == "half" else b"")
    with pytest.raises(VerbevalError) as exc:
        read_shards(shards)
    assert str(shards[1]) in str(exc.value)


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_means_nan_ignoring_mean() -> None:
    v = np.array([[1.0, np.nan, 0.5], [2.0, 4.0, 0.5], [3.0, np.nan, 0.5], [np.nan, 6.0, 0.5]])
    mean, lo, hi = bootstrap_means(v, resamples=200, seed=0, confidence=0.9)
    np.testing.assert_allclose(mean, [2.0, 5.0, 0.5])
    assert mean.shape == lo.shape == hi.shape == (3,)
    assert np.all(lo <= mean) and np.all(mean <= hi)
    assert lo[2] == hi[2] == 0.5  # a constant column has a degenerate interval
    assert 1.0 <= lo[0] <= 2.0 <= hi[0] <= 3.0  # resampled means stay within the data range


def test_bootstrap_means_ci_contains_mean_and_is_seeded() -> None:
    rng = np.random.default_rng(1)
    v = rng.random((50, 4))
    v[rng.random((50, 4)) < 0.2] = np.nan
    mean, lo, hi = bootstrap_means(v, resamples=300, seed=7, confidence=0.95)
    np.testing.assert_allclose(mean, np.nanmean(v, axis=0))
    assert np.all(lo < mean) and np.all(mean < hi)
    again = bootstrap_means(v, resamples=300, seed=7, confidence=0.95)
    for a, b in zip((mean, lo, hi), again):
        np.testing.assert_array_equal(a, b)
    other = bootstrap_means(v, resamples=300, seed=8, confidence=0.95)
    assert not np.array_equal(lo, other[1])
    narrow = bootstrap_means(v, resamples=300, seed=7, confidence=0.5)
    assert np.all(narrow[1] >= lo) and np.all(narrow[2] <= hi)


def test_bootstrap_means_edge_cases() -> None:
    v = np.array([[1.0, np.nan], [3.0, np.nan]])
    mean, lo, hi = bootstrap_means(v, resamples=0, seed=0, confidence=0.95)
    assert mean[0] == 2.0 and np.isnan(mean[1])
    assert np.isnan(lo).all() and np.isnan(hi).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an all-NaN column is expected, not worth a warning
        mean, lo, hi = bootstrap_means(v, resamples=50, seed=0, confidence=0.95)
    assert mean[0] == 2.0 and 1.0 <= lo[0] <= hi[0] <= 3.0
    assert np.isnan(mean[1]) and np.isnan(lo[1]) and np.isnan(hi[1])  # all-NaN column
    one_d = bootstrap_means(np.array([0.0, 1.0, 1.0, 1.0]), resamples=20, seed=0, confidence=0.95)
    assert [x.shape for x in one_d] == [(1,)] * 3 and one_d[0][0] == 0.75
    empty = bootstrap_means(np.zeros((0, 2)), resamples=20, seed=0, confidence=0.95)
    assert all(np.isnan(x).all() for x in empty)


# --------------------------------------------------------------------------- summaries


def _hand_scores() -> tuple[pd.DataFrame, pd.DataFrame]:
    scores = pd.DataFrame(
        {
            "context_id": [0, 1, 2, 3],
            "plural": [False, True, False, True],
            "ew_top@1": [1.0, 0.5, np.nan, 0.0],
            "mw_top@1": [0.9, 0.6, np.nan, 0.3],
            "prob_counted_top@1": [0.2, 0.1, 0.0, 0.3],
            "ew_bottom@0.5": [np.nan, np.nan, np.nan, 1.0],
            "mw_bottom@0.5": [np.nan, np.nan, np.nan, 0.8],
            "prob_counted_bottom@0.5": [0.0, 0.0, 0.0, 0.4],
            "ew_bottom@1e-06": [np.nan] * 4,
            "mw_bottom@1e-06": [np.nan] * 4,
            "prob_counted_bottom@1e-06": [0.0] * 4,
        }
    )
    tse = pd.DataFrame({"row": [0, 1, 2, 3, 4], "context_id": [0, 0, 1, 2, 3], "tse": [1.0, 0.0, 1.0, np.nan, 1.0]})
    return scores, tse


def test_summarise_by_hand() -> None:
    scores, tse = _hand_scores()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the all-NaN column must not warn
        s = summarise(scores, tse, model="m", group="g", resamples=100, seed=0, confidence=0.95)
    assert list(s.columns) == [
        "model",
        "group",
        "metric",
        "side",
        "cutoff",
        "value",
        "ci_low",
        "ci_high",
        "n",
        "n_total",
        "wilson_low",
        "wilson_high",
    ]
    assert (s["model"] == "m").all() and (s["group"] == "g").all()

    def one(metric: str, side: str = "", cutoff: float | None = None) -> pd.Series:
        sel = s[(s["metric"] == metric) & (s["side"] == side)]
        sel = sel[sel["cutoff"].isna()] if cutoff is None else sel[np.isclose(sel["cutoff"], cutoff)]
        assert len(sel) == 1, (metric, side, cutoff)
        return sel.iloc[0]

    t = one("tse")
    assert t["value"] == 0.75 and t["n"] == 4 and t["n_total"] == 5
    assert t["ci_low"] <= 0.75 <= t["ci_high"]
    assert (t["wilson_low"], t["wilson_high"]) == pytest.approx(_wilson_by_formula(3, 4, 0.95), rel=1e-9)
    assert (t["wilson_low"], t["wilson_high"]) == pytest.approx((0.3006418, 0.9544127), abs=1e-6)
    assert s.loc[s["metric"] != "tse", ["wilson_low", "wilson_high"]].isna().all().all()  # TSE's only
    ew = one("ew", "top", 1.0)
    assert ew["value"] == 0.5 and ew["n"] == 3 and ew["n_total"] == 4
    mw = one("mw", "top", 1.0)
    assert mw["value"] == pytest.approx(0.6) and mw["n"] == 3
    assert one("prob_counted", "top", 1.0)["value"] == pytest.approx(0.15)
    inv = one("invalid", "top", 1.0)
    assert inv["value"] == 0.25 and inv["n"] == 1 and inv["n_total"] == 4 and np.isnan(inv["ci_low"])
    assert one("ew", "bottom", 0.5)["value"] == 1.0
    assert one("mw", "bottom", 0.5)["value"] == pytest.approx(0.8)
    assert one("invalid", "bottom", 0.5)["value"] == 0.75
    assert np.isnan(one("ew", "bottom", 1e-6)["value"])
    assert one("invalid", "bottom", 1e-6)["value"] == 1.0
    # one row per metric column, plus tse, plus one invalid row per EW column
    assert len(s) == 1 + 9 + 3


def _wilson_by_formula(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson's closed form: (p + z^2/2n -+ z sqrt(p(1 - p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


@pytest.mark.parametrize(("k", "n", "confidence"), [(3, 4, 0.95), (0, 10, 0.95), (20, 20, 0.9), (417, 1000, 0.99)])
def test_wilson_interval_is_the_closed_form(k: int, n: int, confidence: float) -> None:
    rows = np.array([1.0] * k + [0.0] * (n - k) + [np.nan] * 3)  # NaN rows (multi-token forms) left out
    assert wilson_interval(rows, confidence) == pytest.approx(_wilson_by_formula(k, n, confidence), rel=1e-9, abs=1e-12)


def test_wilson_interval_without_a_defined_row_is_nan() -> None:
    assert np.isnan(wilson_interval(np.array([np.nan, np.nan]), 0.95)).all()
    assert np.isnan(wilson_interval(np.array([]), 0.95)).all()


# --------------------------------------------------------------------------- Table 2


def _hand_summary() -> pd.DataFrame:
    recs = []

    def add(
        model: str,
        group: str,
        metric: str,
        side: str,
        cutoff: float,
        value: float,
        lo: float,
        hi: float,
        n_total: int,
        n: int | None = None,
    ) -> None:
        recs.append(
            {
                "model": model,
                "group": group,
                "metric": metric,
                "side": side,
                "cutoff": cutoff,
                "value": value,
                "ci_low": lo,
                "ci_high": hi,
                "n": n_total if n is None else n,
                "n_total": n_total,
            }
        )

    for model, base, tse in (("bert-a", 0.0, 0.876), ("gpt_b", 0.1, 0.886)):
        add(model, "simple", "tse", "", np.nan, tse, 0.8, 0.95, 120, n=110)
        add(model, "simple", "ew", "top", 1.0, 0.6234 + base, 0.6, 0.7, 60)
        add(model, "simple", "mw", "top", 1.0, 0.5 + base, 0.4, 0.6, 60)
        # distractors that table2 must ignore
        add(model, "simple", "ew", "top", 0.5, 0.111, 0.1, 0.2, 60)
        add(model, "simple", "ew", "bottom", 1.0, 0.222, 0.1, 0.3, 60)
        add(model, "simple", "invalid", "top", 1.0, 0.0, np.nan, np.nan, 60)
    # group "prep" only for bert-a
    add("bert-a", "prep", "tse", "", np.nan, 0.5, 0.4, 0.6, 10)
    add("bert-a", "prep", "ew", "top", 1.0, 0.25, 0.2, 0.3, 5)
    add("bert-a", "prep", "mw", "top", 1.0, 0.333333, 0.3, 0.4, 5)
    return pd.DataFrame(recs)


GROUPS = [
    {"id": "simple", "name": "Simple", "sources": []},
    {"id": "prep", "name": "Across prepositional phrase & co", "sources": []},
]
MODELS = ["bert-a", "gpt_b"]


def test_table2_values() -> None:
    t = table2(_hand_summary(), GROUPS, MODELS)
    assert t["group"].tolist() == ["simple", "prep"]
    assert t["name"].tolist() == ["Simple", "Across prepositional phrase & co"]
    r = t.iloc[0]
    assert r["bert-a.tse"] == 0.876 and r["bert-a.tse_ci_low"] == 0.8 and r["bert-a.tse_ci_high"] == 0.95
    assert r["bert-a.ew"] == 0.6234 and r["bert-a.mw"] == 0.5
    assert r["gpt_b.tse"] == 0.886 and r["gpt_b.ew"] == pytest.approx(0.7234)
    # n_rows: rows with a defined TSE (both forms single tokens); n_rows_total: all rows
    assert r["bert-a.n_rows"] == 110 and r["bert-a.n_rows_total"] == 120 and r["bert-a.n_contexts"] == 60
    p = t.iloc[1]
    assert p["bert-a.ew"] == 0.25
    assert np.isnan(p["gpt_b.tse"]) and np.isnan(p["gpt_b.mw"]) and p["gpt_b.n_rows"] == 0
    assert p["bert-a.n_rows"] == p["bert-a.n_rows_total"] == 10
    assert list(t.columns[:2]) == ["group", "name"]
    assert "bert-a.mw_ci_high" in t.columns and "bert-a.n_contexts" in t.columns


def test_table2_markdown_and_latex() -> None:
    t = table2(_hand_summary(), GROUPS, MODELS)
    md = to_markdown(t, MODELS)
    lines = md.splitlines()
    assert md.endswith("\n") and len(lines) == 4
    assert lines[0] == "| Group | bert-a TSE | bert-a EW | bert-a MW | gpt_b TSE | gpt_b EW | gpt_b MW |"
    assert lines[1] == "|---|---:|---:|---:|---:|---:|---:|"
    assert lines[2] == "| Simple | 0.88 | 0.62 | 0.50 | 0.89 | 0.72 | 0.60 |"
    assert lines[3] == "| Across prepositional phrase & co | 0.50 | 0.25 | 0.33 | – | – | – |"
    assert (
        to_markdown(t, MODELS, digits=3).splitlines()[2] == "| Simple | 0.876 | 0.623 | 0.500 | 0.886 | 0.723 | 0.600 |"
    )

    tex = to_latex(t, MODELS)
    assert tex.splitlines() == [
        r"\begin{tabular}{lcccccc}",
        r"\toprule",
        r" & \multicolumn{3}{c}{bert-a} & \multicolumn{3}{c}{gpt\_b} \\",
        r"\cmidrule(lr){2-4} \cmidrule(lr){5-7}",
        r"Group & TSE & EW & MW & TSE & EW & MW \\",
        r"\midrule",
        r"Simple & 0.88 & 0.62 & 0.50 & 0.89 & 0.72 & 0.60 \\",
        r"Across prepositional phrase \& co & 0.50 & 0.25 & 0.33 & – & – & – \\",
        r"\bottomrule",
        r"\end{tabular}",
    ]


def test_table2_html() -> None:
    import re

    t = table2(_hand_summary(), GROUPS, MODELS)
    page = to_html(t, MODELS, notes=["Simple: 2 rows <flagged> & kept."], confidence=0.9)
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    assert len(rows) == 2 + len(t)  # two header rows, one per group
    assert re.findall(r"<th[^>]*>([^<]*)</th>", rows[0]) == ["Group", "bert-a", "gpt_b"]
    assert re.findall(r"<th>([^<]*)</th>", rows[1]) == ["TSE", "EW", "MW", "rows / contexts"] * 2
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[2])
    assert cells[0] == "Simple"
    # value, then its CI; then the counts
    assert cells[1] == "0.88<br><small>[0.80, 0.95]</small>"
    assert cells[4] == "<small>110/120 rows<br>60 contexts</small>"
    across = re.findall(r"<td[^>]*>(.*?)</td>", rows[3])
    assert across[0] == "Across prepositional phrase &amp; co"  # escaped
    assert across[5] == "–" and across[8].startswith("<small>0/")  # gpt_b has no TSE in prep: no CI either
    assert "90% percentile bootstrap CI" in page
    assert "<li>Simple: 2 rows &lt;flagged&gt; &amp; kept.</li>" in page


def test_table2_html_gives_tse_s_wilson_interval_as_its_cell_s_tooltip() -> None:
    """Summaries with the Wilson columns: TSE's Wilson interval is its cell's tooltip, so that the cell
    stays two lines (value, bootstrap CI); none where the model has no TSE, nor on EW and MW;
    summaries written before them give the page as it was."""
    import re

    old = _hand_summary()
    is_tse = old["metric"] == "tse"
    summary = old.assign(
        wilson_low=np.where(is_tse, 0.8123, np.nan),
        wilson_high=np.where(is_tse & (old["model"] == "bert-a"), 0.9234, np.nan),
    )
    summary.loc[is_tse & (summary["model"] == "gpt_b"), "wilson_high"] = 0.94
    wilson = tse_wilson(summary)
    assert wilson[("bert-a", "simple")] == (0.8123, 0.9234) and wilson[("gpt_b", "simple")] == (0.8123, 0.94)
    t = table2(summary, GROUPS, MODELS)
    page = to_html(t, MODELS, confidence=0.9, wilson=wilson)
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    cells = re.findall(r"<td([^>]*)>(.*?)</td>", rows[2])
    assert cells[1] == (' class="num" title="Wilson [0.81, 0.92]"', "0.88<br><small>[0.80, 0.95]</small>")
    assert cells[5] == (' class="num" title="Wilson [0.81, 0.94]"', "0.89<br><small>[0.80, 0.95]</small>")
    assert "Wilson" not in "".join(cells[2] + cells[3])  # EW, MW: the bootstrap CI only
    assert all(c.count("<br>") <= 1 for _, c in cells)  # two lines at most
    assert (
        "Below each value: its 90% percentile bootstrap CI; TSE's Wilson interval at the same level shows "
        "when the pointer rests on its value." in page
    )
    assert tse_wilson(old) == {}
    pd.testing.assert_frame_equal(table2(old, GROUPS, MODELS), t)  # table2.csv: unchanged
    assert to_html(table2(old, GROUPS, MODELS), MODELS, wilson=tse_wilson(old)) == to_html(t, MODELS)


def test_table2_labels_a_random_model_and_only_it() -> None:
    """A model whose summaries say random_init is marked in every Table 2 output; the other is not,
    and a table without any random model has no mark or note at all."""
    summary = _hand_summary()
    marked = summary.assign(random_init=summary["model"] == "gpt_b")
    t = table2(marked, GROUPS, MODELS)
    assert t["gpt_b.random_init"].tolist() == [True, True] and t["bert-a.random_init"].tolist() == [False, False]
    assert random_models(t, MODELS) == ["gpt_b"]
    md = to_markdown(t, MODELS)
    assert md.splitlines()[0] == "| Group | bert-a TSE | bert-a EW | bert-a MW | gpt_b† TSE | gpt_b† EW | gpt_b† MW |"
    assert "* † randomly initialised, so the numbers are meaningless: gpt_b." in md
    page = to_html(t, MODELS)
    assert '<th colspan="4">gpt_b†</th>' in page and '<th colspan="4">bert-a</th>' in page
    assert "<li>† randomly initialised, so the numbers are meaningless: gpt_b.</li>" in page
    tex = to_latex(t, MODELS)
    assert r"\multicolumn{3}{c}{gpt\_b$^\dagger$}" in tex and r"\multicolumn{3}{c}{bert-a}" in tex
    assert r"{\footnotesize $^\dagger$ randomly initialised, so the numbers are meaningless: gpt\_b.\par}" in tex
    metrics = to_metrics(t, MODELS)
    # the flag is in every group's record: a model's keys are its groups alone
    assert list(metrics["gpt_b"]) == ["simple", "prep"] == list(metrics["bert-a"])
    assert [metrics["gpt_b"][g]["random_init"] for g in metrics["gpt_b"]] == [True, True]
    assert [metrics["bert-a"][g]["random_init"] for g in metrics["bert-a"]] == [False, False]
    assert metrics["gpt_b"]["simple"] == {
        "tse": 0.886,
        "ew": pytest.approx(0.7234),
        "mw": pytest.approx(0.6),
        "random_init": True,
    }
    # the errata notes follow the random-model note
    assert to_markdown(t, MODELS, notes=["Simple: x."]).splitlines()[-2:] == [
        "* † randomly initialised, so the numbers are meaningless: gpt_b.",
        "* Simple: x.",
    ]
    # no model random (or summaries of an older verbeval without the column): no mark, no note
    for plain in (summary, summary.assign(random_init=False)):
        t = table2(plain, GROUPS, MODELS)
        assert random_models(t, MODELS) == []
        for text in (to_markdown(t, MODELS), to_html(t, MODELS), to_latex(t, MODELS)):
            assert "†" not in text and "dagger" not in text and "randomly initialised" not in text
        assert all(r["random_init"] is False for v in to_metrics(t, MODELS).values() for r in v.values())


def _store(tmp_path: Path, meta: dict[str, Any] | None = None) -> tuple[Path, list[Path]]:
    """A shard store of group g1 (the synthetic shards) with its manifest."""
    from verbeval.agreement.engine.shardstore import ShardStore

    root = tmp_path / "store"
    paths = write_synthetic_shards(root / "g1")
    store = ShardStore(root)
    rels = [p.relative_to(root).as_posix() for p in paths]
    for rel in rels:
        store.record(rel, "key")
    store.finish(root / "manifest.json", rels, meta or {})
    return root / "manifest.json", paths


def _scored_store(
    tmp_path: Path,
    top: tuple[float, ...] = (1.0,),
    bottom: tuple[float, ...] = (0.5,),
    fragile_ulps: float = 16.0,
    meta: dict[str, Any] | None = None,
) -> tuple[Path, list[Path]]:
    """:func:`_store` with each shard's score file (the forward job's, at these cutoffs and threshold)
    written beside it and recorded in its entry, as the forward job records it."""
    from verbeval.agreement.engine.shardstore import ShardStore
    from verbeval.agreement.scores.chunk_scores import ChunkScoring, scores_entry, write_chunk_scores
    from verbeval.core.io import sha256_file

    manifest, paths = _store(tmp_path, meta)
    store, scoring = ShardStore(manifest.parent), ChunkScoring(top, bottom, fragile_ulps)
    for p in paths:
        gs = read_shards([p, *[q for q in paths if q != p]])  # all chunks: take this one's contexts
        mine = np.isin(gs.context_id, pq.read_table(p, columns=["context_id"])["context_id"].to_numpy())
        stats = type(gs.stats)(*(getattr(gs.stats, f)[mine] for f in ("prob", "cum_above", "cum_below")))
        out = write_chunk_scores(p, sha256_file(p), gs.context_id[mine], gs.plural[mine], stats, scoring)
        store.record(p.relative_to(manifest.parent).as_posix(), "key", scores_entry(out))
    store.finish(manifest, [p.relative_to(manifest.parent).as_posix() for p in paths], meta or {})
    return manifest, paths


def _aggregate_args(tmp_path: Path, manifest: Path) -> list[str]:
    templates = pd.DataFrame({"group": "g1", "plural": [False] * len(TSE_ROWS)})
    tpath = tmp_path / "templates.parquet"
    templates.to_parquet(tpath)
    return [
        "aggregate",
        "--templates",
        str(tpath),
        "--groups",
        "g1",
        "--model-name",
        "m",
        "--manifest",
        str(manifest),
        "--top-cutoffs",
        "1",
        "--bottom-cutoffs",
        "0.5",
        "--resamples",
        "10",
        "--out-dir",
        str(tmp_path / "out"),
    ]


def test_aggregate_cli_writes_every_group_output(tmp_path: Path) -> None:
    from verbeval.cli import main

    manifest, paths = _store(tmp_path)
    assert main(_aggregate_args(tmp_path, manifest)) == 0
    scores = pd.read_parquet(tmp_path / "out" / "g1" / "scores.parquet")
    expected = context_scores(read_shards(paths), [1.0], [0.5])
    pd.testing.assert_frame_equal(scores, expected)
    assert (tmp_path / "out" / "g1" / "tse.parquet").exists() and (tmp_path / "out" / "g1" / "summary.csv").exists()


def test_aggregate_cli_does_not_import_torch(tmp_path: Path) -> None:
    """``verbeval aggregate`` scores with numpy only (agreement.metrics; the torch kernels sit in
    agreement.kernels): its jobs never pay torch's import."""
    import os
    import subprocess
    import sys

    import verbeval

    manifest, _ = _store(tmp_path)
    code = (
        "import sys; from verbeval.cli import main; "
        f"rc = main({_aggregate_args(tmp_path, manifest)!r}); print(rc, 'torch' in sys.modules)"
    )
    # a process: what a command imports shows only in a fresh interpreter (pytest's has torch loaded)
    env = {**os.environ, "PYTHONPATH": str(Path(verbeval.__file__).resolve().parents[1])}  # this checkout's package
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split()[-2:] == ["0", "False"]
    summary = pd.read_csv(tmp_path / "out" / "g1" / "summary.csv")
    assert summary["metric"].iloc[0] == "tse" and summary["n_total"].iloc[0] == len(TSE_ROWS)


@pytest.mark.parametrize("meta", [{"random_init": True}, {"random_init": False}, {}])
def test_aggregate_cli_carries_random_init_from_the_manifest(tmp_path: Path, meta: dict[str, Any]) -> None:
    """The summary's random_init column is the manifest's meta.random_init (absent: an older
    manifest, False)."""
    from verbeval.cli import main

    manifest, _ = _store(tmp_path, meta)
    assert main(_aggregate_args(tmp_path, manifest)) == 0
    summary = pd.read_csv(tmp_path / "out" / "g1" / "summary.csv")
    assert summary["random_init"].tolist() == [meta.get("random_init", False)] * len(summary)


def test_aggregate_cli_moves_a_truncated_shard_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from verbeval.cli import main

    manifest, shards = _store(tmp_path)
    table = pq.read_table(shards[1])
    pq.write_table(table.slice(0, table.num_rows - 1), shards[1])
    assert main(_aggregate_args(tmp_path, manifest)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lists" in err[0] and "truncated or replaced" in err[0], err
    assert err[0].endswith(
        f"moved it to {shards[1]}.corrupt and removed the stale manifest {manifest}: rerun the "
        "workflow (snakemake or dvc repro) to recompute it"
    )
    # the bad shard is out of the way and the manifest gone (so Snakemake and dvc repro both run the
    # model's inference again, which recomputes it), nothing was written
    assert not shards[1].exists() and shards[1].with_name(shards[1].name + ".corrupt").exists()
    assert not manifest.exists()
    assert (
        not (tmp_path / "out" / "g1" / "summary.csv").exists()
        and not (tmp_path / "out" / "g1" / "scores.parquet").exists()
    )
    assert shards[0].exists() and shards[2].exists()


def test_aggregate_cli_removes_a_manifest_whose_shard_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A listed shard that is gone (DVC's run-cache restored the manifest alone, or it was deleted):
    the stale manifest is removed, so the next `dvc repro` reruns the inference stage instead of
    failing here every time."""
    from verbeval.cli import main

    manifest, shards = _store(tmp_path)
    shards[0].unlink()
    assert main(_aggregate_args(tmp_path, manifest)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"verbeval aggregate: error: {shards[0]}: missing (listed in the shard manifest); removed the stale "
        f"manifest {manifest}: rerun the workflow (snakemake or dvc repro) to recompute it"
    ]
    assert not manifest.exists() and shards[1].exists() and shards[2].exists()


@pytest.mark.parametrize("where", [0.2, 0.5, 0.8, 0.97])
def test_aggregate_cli_detects_bytes_flipped_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: float
) -> None:
    """Four bytes XOR-ed anywhere in a shard (same size, often still decodable) are detected by
    the manifest's sha256, every time."""
    from verbeval.cli import main

    manifest, shards = _store(tmp_path)
    data = bytearray(shards[2].read_bytes())
    at = int(len(data) * where)
    for i in range(at, at + 4):
        data[i] ^= 0xFF
    shards[2].write_bytes(bytes(data))
    assert main(_aggregate_args(tmp_path, manifest)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("verbeval aggregate: error: ") and "sha256" in err[0], err
    assert "changed after it was written" in err[0] and str(shards[2]) in err[0]
    assert shards[2].with_name(shards[2].name + ".corrupt").exists() and not shards[2].exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.parquet"))


def test_a_killed_aggregate_leaves_no_summary_and_reruns_to_identical_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after scores.parquet, while tse.parquet is written (a SIGKILL's leftover temporary put
    beside it): summary.csv, the job's last output, is not there, so the job reruns; the rerun removes
    the leftover and writes outputs byte-identical to a run that was never killed."""
    import shutil

    import verbeval.core.io as vio
    from verbeval.cli import main

    manifest, _ = _store(tmp_path)
    args = _aggregate_args(tmp_path, manifest)
    out = tmp_path / "out" / "g1"
    assert main(args) == 0
    clean = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(clean) == ["scores.parquet", "summary.csv", "tse.parquet"]
    shutil.rmtree(tmp_path / "out")
    real, calls = vio.write_parquet, [0]

    def killed_on_second(df: pd.DataFrame, path: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:
            (Path(path).parent / f".{Path(path).name}.k1ll3d_x.tmp").write_bytes(b"PAR1 partial")
            raise KeyboardInterrupt  # stands for the kill: nothing after this line runs
        real(df, path)

    monkeypatch.setattr(vio, "write_parquet", killed_on_second)
    assert main(args) == 130  # the interrupted command's status (verbeval.cli)
    assert sorted(p.name for p in out.iterdir()) == [".tse.parquet.k1ll3d_x.tmp", "scores.parquet"]
    monkeypatch.undo()
    assert main(args) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == clean  # the leftover is gone, every byte equal


def test_aggregate_cli_clusters_by_template(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``--cluster template``: the rows' templates come from templates.parquet's ``source``; a group
    of one template gets NaN intervals, one warning and the ``cluster`` column."""
    from verbeval.cli import main

    manifest, _ = _store(tmp_path)
    args = _aggregate_args(tmp_path, manifest)
    n = len(TSE_ROWS)
    for sources in (["one"] * n, [f"s{i % 2}" for i in range(n)]):
        templates = pd.DataFrame(
            {"group": "g1", "source": sources, "correct": "is", "incorrect": "are", "plural": [False] * n}
        )
        templates.to_parquet(tmp_path / "templates.parquet")
        caplog.clear()
        assert main([*args, "--cluster", "template"]) == 0
        summary = pd.read_csv(tmp_path / "out" / "g1" / "summary.csv")
        assert (summary["cluster"] == "template").all()
        warned = [r.getMessage() for r in caplog.records if "clustered interval" in r.getMessage()]
        if len(set(sources)) == 1:
            assert summary[["ci_low", "ci_high"]].isna().all().all()
            assert warned == [
                "group 'g1': 1 template: a clustered interval needs at least 2 (agreement.bootstrap.cluster), "
                "so its intervals are NaN"
            ]
        else:
            assert summary.loc[summary["metric"] == "tse", "ci_low"].notna().all()
            assert warned == [
                f"group 'g1': {len(set(sources))} templates: a clustered interval from fewer than 20 undercovers "
                "(agreement.bootstrap.cluster); read it as a lower bound on the uncertainty"
            ]


def test_aggregate_cli_template_and_lemma_draws_lemmas_for_ew_and_mw_at_p1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--cluster template_and_lemma`` against ``template`` on the same shards (with the forward
    job's score files): only EW and MW at cutoff 1 get other intervals; TSE is the template x verb
    interval; the shards are read with their form statistics only under template_and_lemma."""
    from verbeval.agreement.engine.shardstore import listed_shards
    from verbeval.agreement.scores import aggregate as agg
    from verbeval.agreement.scores.chunk_scores import read_chunk_scores
    from verbeval.agreement.steps import AGGREGATE
    from verbeval.cli import main
    from verbeval.core.bootstrap import Clusters

    manifest, _ = _scored_store(tmp_path, fragile_ulps=0.0)
    assert all(read_chunk_scores(s, [1.0], [0.5]) is not None for s in listed_shards(manifest))
    args = [*_aggregate_args(tmp_path, manifest), "--resamples", "400"]
    n = len(TSE_ROWS)
    sources, verbs = [f"s{i % 2}" for i in range(n)], ["is", "runs", "goes"]
    templates = pd.DataFrame(
        {
            "group": "g1",
            "source": sources,
            "correct": [verbs[i % 3] for i in range(n)],
            "incorrect": "are",
            "plural": [False] * n,
        }
    )
    templates.to_parquet(tmp_path / "templates.parquet")
    forms: list[bool] = []
    read = agg.read_shards

    def recorded(paths: list[Path], forms_: bool = True, **kw: Any) -> agg.GroupShards:
        forms.append(kw.get("forms", forms_))
        return read(paths, **kw)

    monkeypatch.setattr(agg, "read_shards", recorded)
    summaries = {}
    for cluster in ("template", "template_and_lemma"):
        forms.clear()
        assert main([*args, "--cluster", cluster]) == 0
        summaries[cluster] = pd.read_csv(tmp_path / "out" / "g1" / "summary.csv").set_index(
            ["metric", "side", "cutoff"]
        )
        assert forms == [cluster == "template_and_lemma"]
    both, alone = summaries["template_and_lemma"], summaries["template"]
    assert (both["cluster"] == "template_and_lemma").all()
    drawn = both.index.isin([("ew", "top", 1.0), ("mw", "top", 1.0)])
    assert (both.loc[drawn, "ci_low"] != alone.loc[drawn, "ci_low"]).all()
    assert (both.loc[drawn, "ci_high"] != alone.loc[drawn, "ci_high"]).all()
    rest = ~drawn & (both.index.get_level_values("metric") != "tse")
    pd.testing.assert_frame_equal(both.loc[rest].drop(columns="cluster"), alone.loc[rest].drop(columns="cluster"))
    tse = pd.read_parquet(tmp_path / "out" / "g1" / "tse.parquet")
    rows = templates.iloc[tse["row"].to_numpy()]
    clusters = Clusters.of(
        rows["source"].to_numpy(), ["/".join(sorted(p)) for p in zip(rows["correct"], rows["incorrect"])]
    )
    _, lo, hi = bootstrap_means(
        tse["tse"].to_numpy(), 400, AGGREGATE.default("seed"), AGGREGATE.default("confidence"), clusters=clusters
    )
    t = both[both.index.get_level_values("metric") == "tse"].iloc[0]
    assert (t["ci_low"], t["ci_high"]) == pytest.approx((lo[0], hi[0]))

"""SimVerb-3500: reading, hand-computed Spearman, bootstrap against a loop oracle, verb token
spans on the real tokenizers, coverage, the agreement join, and the CLI on a small pair file."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tiny_cache import tiny_model
from verbeval.cli import main
from verbeval.core.errors import InputError, VerbevalError
from verbeval.simverb.data import assign_splits, read_simverb, score_bins
from verbeval.simverb.join import agreement_join, verb_errors
from verbeval.simverb.report import to_latex, to_markdown
from verbeval.simverb.statistics import best_representation, bootstrap_spearman, resample_ranks, results_table, spearman
from verbeval.simverb.vectors import check_frames, cosine_rows, pair_similarities, verb_token_spans, verb_vectors

# five pairs; human ratings 1..5
PAIRS = """\
walk\trun\tV\t1.00\tNONE
eat\tdine\tV\t2.00\tSYNONYMS
give\ttake\tV\t3.00\tANTONYMS
run\tsprint\tV\t4.00\tHYPER/HYPONYMS
walk\tstroll\tV\t5.00\tSYNONYMS
"""


def _write(tmp_path: Path, text: str, name: str = "pairs.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _sims(pairs: pd.DataFrame, cosines: dict[str, list[float]], covered: list[bool] | None = None) -> pd.DataFrame:
    parts = []
    for rep, cos in cosines.items():
        parts.append(
            pd.DataFrame(
                {
                    "pair": pairs["pair"],
                    "representation": rep,
                    "layer": -1 if rep == "static" else int(rep.removeprefix("layer")),
                    "covered": covered if covered is not None else True,
                    "cosine": cos,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------- reading


def test_read_simverb(tmp_path: Path) -> None:
    df = read_simverb(_write(tmp_path, PAIRS))
    assert df["pair"].tolist() == [0, 1, 2, 3, 4]
    assert df["verb1"].tolist() == ["walk", "eat", "give", "run", "walk"]
    assert df["score"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert df["relation"].tolist() == ["NONE", "SYNONYMS", "ANTONYMS", "HYPER/HYPONYMS", "SYNONYMS"]
    assert (df["split"] == "").all()


@pytest.mark.parametrize(
    "line, reason",
    [
        ("walk\trun\tV\t1.0", "expected 5 tab-separated fields"),
        ("walk\trun\tN\t1.0\tNONE", "part of speech 'N'"),
        ("walk\trun\tV\t11\tNONE", "outside [0, 10]"),
        ("walk\trun\tV\tx\tNONE", "is not a number"),
        ("walk\trun\tV\t1.0\tSIMILAR", "unknown relation 'SIMILAR'"),
        ("Walk1\trun\tV\t1.0\tNONE", "not a verb"),
        ("walk\trun\tV\t2.0\tNONE", "repeats line 1"),
    ],
)
def test_read_simverb_errors_name_the_line(tmp_path: Path, line: str, reason: str) -> None:
    p = _write(tmp_path, "walk\trun\tV\t1.00\tNONE\n" + line + "\n")
    with pytest.raises(InputError, match=re.escape(reason)) as err:
        read_simverb(p)
    assert ":2" in str(err.value) and str(p) in str(err.value)


def test_mirror_file_has_3500_pairs(data_dir: Path) -> None:
    df = read_simverb(data_dir / "simverb/SimVerb-3500.txt")
    assert len(df) == 3500
    assert len(set(df["verb1"]) | set(df["verb2"])) == 827
    assert df["relation"].value_counts().to_dict() == {
        "NONE": 2093,
        "HYPER/HYPONYMS": 800,
        "SYNONYMS": 306,
        "COHYPONYMS": 190,
        "ANTONYMS": 111,
    }


def test_assign_splits(tmp_path: Path) -> None:
    full = read_simverb(_write(tmp_path, PAIRS))
    dev = read_simverb(_write(tmp_path, "eat\tdine\tV\t2.00\tSYNONYMS\n", "dev.txt"))
    test = read_simverb(_write(tmp_path, "walk\trun\tV\t1.00\tNONE\nwalk\tstroll\tV\t5.00\tSYNONYMS\n", "test.txt"))
    out = assign_splits(full, {"dev": dev, "test": test})
    assert out["split"].tolist() == ["test", "dev", "", "", "test"]
    with pytest.raises(VerbevalError, match="in split 'dev' and in split 'test'"):
        assign_splits(full, {"dev": dev, "test": dev})
    bad = read_simverb(_write(tmp_path, "eat\tdine\tV\t9.00\tSYNONYMS\n", "bad.txt"))
    with pytest.raises(VerbevalError, match="rated 9.0 there"):
        assign_splits(full, {"dev": bad})
    missing = read_simverb(_write(tmp_path, "eat\tsup\tV\t2.00\tSYNONYMS\n", "missing.txt"))
    with pytest.raises(VerbevalError, match="not in the full set"):
        assign_splits(full, {"dev": missing})


def test_score_bins_and_frames() -> None:
    assert score_bins([0, 2.5, 5]) == [(0.0, 2.5, "[0, 2.5)"), (2.5, 5.0, "[2.5, 5]")]
    with pytest.raises(VerbevalError):
        score_bins([0, 0])
    with pytest.raises(VerbevalError, match="exactly once"):
        check_frames(["to walk"])
    with pytest.raises(VerbevalError, match="exactly once"):
        check_frames(["{verb} and {verb}"])


# --------------------------------------------------------------------------- statistics


def test_spearman_hand_computed(tmp_path: Path) -> None:
    pairs = read_simverb(_write(tmp_path, PAIRS))
    # cosine ranks 1 3 2 5 4 against human ranks 1 2 3 4 5: sum d^2 = 4, rho = 1 - 6*4/(5*24) = 0.8
    cos = [0.1, 0.3, 0.2, 0.5, 0.4]
    assert spearman(np.array(cos), pairs["score"].to_numpy()) == pytest.approx(0.8, abs=1e-12)
    # reversed: rho = -1; a tie in the cosines (average ranks 1.5 1.5 3 4 5): rho = 0.9746794344808963
    sims = _sims(pairs, {"static": cos, "layer0": [5, 4, 3, 2, 1], "layer1": [1, 1, 3, 4, 5]})
    t = results_table(pairs, sims, "m", resamples=0)
    full = t[t["subset"] == "full"].set_index("representation")
    assert full.loc["static", "rho"] == pytest.approx(0.8, abs=1e-12)
    assert full.loc["layer0", "rho"] == pytest.approx(-1.0, abs=1e-12)
    # Pearson of (1.5,1.5,3,4,5) with (1..5): cov 9.5/... computed by hand: 9.5 / sqrt(9.5 * 10)
    assert full.loc["layer1", "rho"] == pytest.approx(9.5 / np.sqrt(9.5 * 10), abs=1e-12)
    assert full.loc["static", "n_pairs"] == 5 and full.loc["static", "coverage"] == 1.0
    assert best_representation(t) == "layer1"
    # subsets: SYNONYMS has pairs 1 and 4 (human 2, 5; cosine 0.3, 0.4): rho = 1
    syn = t[(t["subset"] == "relation:SYNONYMS") & (t["representation"] == "static")].iloc[0]
    assert syn["n_pairs"] == 2 and syn["rho"] == pytest.approx(1.0)
    # ANTONYMS has one pair: undefined
    ant = t[(t["subset"] == "relation:ANTONYMS") & (t["representation"] == "static")].iloc[0]
    assert ant["n_pairs"] == 1 and np.isnan(ant["rho"])
    # ranges [0, 2.5) = human 1, 2; [2.5, 5) = 3, 4; [5, 7.5) = 5; [7.5, 10] = none
    ranges = t[t["subset"].str.startswith("range:") & (t["representation"] == "static")]
    assert ranges["n_pairs"].tolist() == [2, 2, 1, 0]


def test_uncovered_pairs_are_left_out(tmp_path: Path) -> None:
    pairs = read_simverb(_write(tmp_path, PAIRS))
    # pair 1 not covered: rho over pairs 0, 2, 3, 4 (cosines 0.1 0.2 0.5 0.4 vs 1 3 4 5) = 0.8
    sims = _sims(pairs, {"static": [0.1, 9.0, 0.2, 0.5, 0.4]}, covered=[True, False, True, True, True])
    full = results_table(pairs, sims, "m", resamples=0).query("subset == 'full'").iloc[0]
    assert full["n_pairs"] == 5 and full["n_covered"] == 4 and full["coverage"] == pytest.approx(0.8)
    assert full["rho"] == pytest.approx(0.8)


def test_bootstrap_matches_a_loop_over_scipy() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    y[:5] = y[5]  # ties
    lo, hi = bootstrap_spearman(x, y, resamples=300, seed=7, confidence=0.9, block=64)
    # oracle: the same resamples (block sizes do not change the draws' order), scipy per resample
    draws = np.random.default_rng(7)
    rhos = []
    for start in range(0, 300, 64):
        b = min(64, 300 - start)
        for row in draws.integers(0, 40, size=(b, 40)):
            rhos.append(stats.spearmanr(x[row], y[row])[0])
    assert lo == pytest.approx(np.nanquantile(rhos, 0.05), abs=1e-12)
    assert hi == pytest.approx(np.nanquantile(rhos, 0.95), abs=1e-12)
    assert (lo, hi) == bootstrap_spearman(x, y, resamples=300, seed=7, confidence=0.9, block=64)
    assert lo < spearman(x, y) < hi


def _reference_bootstrap_spearman(
    x: np.ndarray, y: np.ndarray, resamples: int, seed: int, confidence: float, block: int = 200
) -> tuple[float, float]:
    """The bootstrap as it was before issue 35 (scipy's rankdata of every resample, y re-ranked for
    each representation), kept as the reference the shared-rank implementation must equal bit for bit."""
    from verbeval.core.bootstrap import bootstrap_statistic, percentile_ci

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n = len(x)
    if n < 2 or resamples <= 0:
        return float("nan"), float("nan")

    def rhos(idx: np.ndarray) -> np.ndarray:
        rx = stats.rankdata(x[idx], axis=1)
        ry = stats.rankdata(y[idx], axis=1)
        rx -= rx.mean(axis=1, keepdims=True)
        ry -= ry.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (rx * ry).sum(1) / np.sqrt((rx * rx).sum(1) * (ry * ry).sum(1))

    lo, hi = percentile_ci(bootstrap_statistic(rhos, n, resamples, seed, block, "indices"), confidence)
    return float(lo), float(hi)


def _reference_results_table(
    pairs: pd.DataFrame, sims: pd.DataFrame, model: str, resamples: int, seed: int, confidence: float
) -> pd.DataFrame:
    """results_table as it was before issue 35 (a pandas filter per representation and subset, the
    reference bootstrap above), kept as the reference of the table's bytes."""
    from verbeval.simverb.data import DEFAULT_BINS
    from verbeval.simverb.statistics import TABLE_COLUMNS, subsets

    human = pairs.set_index("pair")["score"]
    rows = []
    reps = list(dict.fromkeys(sims["representation"]))
    first = sims[sims["representation"] == reps[0]].set_index("pair")
    single = first["single_token"].reindex(pairs["pair"]).to_numpy(bool) if "single_token" in sims else None
    for sub, mask in subsets(pairs, DEFAULT_BINS, single):
        ids = set(pairs["pair"].to_numpy()[mask].tolist())
        for rep in reps:
            s = sims[(sims["representation"] == rep) & sims["pair"].isin(ids)]
            c = s[s["covered"]]
            x, y = c["cosine"].to_numpy(float), human.loc[c["pair"]].to_numpy(float)
            lo, hi = _reference_bootstrap_spearman(x, y, resamples, seed, confidence)
            rows.append(
                {
                    "model": model,
                    "representation": rep,
                    "layer": int(s["layer"].iat[0]) if len(s) else -1,
                    "subset": sub,
                    "n_pairs": len(s),
                    "n_covered": len(c),
                    "coverage": len(c) / len(s) if len(s) else float("nan"),
                    "rho": spearman(x, y),
                    "ci_low": lo,
                    "ci_high": hi,
                }
            )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def test_resample_ranks_are_scipys_average_ranks_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    values = np.round(rng.normal(size=60), 1)  # many ties
    values[:4] = -0.0  # -0.0 and 0.0 tie, as in scipy
    values[4:6] = 0.0
    idx = rng.integers(0, 60, size=(37, 60))
    got = resample_ranks(values, idx)
    assert got.dtype == np.float64 and np.array_equal(got, stats.rankdata(values[idx], axis=1))
    with_nan = values.copy()
    with_nan[7] = np.nan
    assert np.array_equal(resample_ranks(with_nan, idx), stats.rankdata(with_nan[idx], axis=1), equal_nan=True)


def test_results_table_equals_the_reference_bootstrap_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """table.csv is unchanged by the shared ranks (issue 35): every CI equals the reference's bits,
    with ties, partly covered representations (their own y) and constant subsets."""
    import verbeval.simverb.statistics as st

    rng = np.random.default_rng(11)
    n = 300
    pairs = pd.DataFrame(
        {
            "pair": np.arange(n),
            "verb1": "a",
            "verb2": "b",
            "score": np.round(rng.uniform(0, 10, n), 1),
            "relation": rng.choice(["SYNONYMS", "ANTONYMS", "NONE"], n),
            "split": rng.choice(["dev", "test"], n),
        }
    )
    base = rng.normal(size=n)
    cosines = {"static": np.round(base, 2).tolist()}
    cosines.update({f"layer{k}": np.round(base + rng.normal(scale=k + 1, size=n), 3).tolist() for k in range(4)})
    sims = _sims(pairs, cosines)
    sims.loc[(sims["representation"] == "layer2") & (sims["pair"] % 7 == 0), "covered"] = False
    sims["single_token"] = sims["pair"] % 3 > 0
    new = results_table(pairs, sims, "m", resamples=250, seed=4, confidence=0.9)
    reference = _reference_results_table(pairs, sims, "m", resamples=250, seed=4, confidence=0.9)
    assert new.to_csv(index=False, float_format="%r") == reference.to_csv(index=False, float_format="%r")
    pd.testing.assert_frame_equal(new, reference, check_exact=True)
    calls = []

    def reference_many(xs, y, resamples, seed, confidence, block=200):  # noqa: ANN001, ANN202
        calls.append(len(xs))
        return [_reference_bootstrap_spearman(x, y, resamples, seed, confidence, block) for x in xs]

    monkeypatch.setattr(st, "bootstrap_spearman_many", reference_many)
    old = results_table(pairs, sims, "m", resamples=250, seed=4, confidence=0.9)
    assert 4 in calls and 1 in calls  # four representations share y where layer2 covers other pairs
    assert new["ci_low"].notna().sum() >= 60  # real intervals, not NaN = NaN
    assert new.to_csv(index=False, float_format="%r") == old.to_csv(index=False, float_format="%r")
    pd.testing.assert_frame_equal(new, old, check_exact=True)


# --------------------------------------------------------------------------- representations


def test_cosine_and_coverage() -> None:
    assert cosine_rows(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[1.0, 1.0], [1.0, 0.0]]))[0] == pytest.approx(
        1 / np.sqrt(2)
    )
    pairs = pd.DataFrame(
        {
            "pair": [0, 1, 2],
            "verb1": ["a", "a", "b"],
            "verb2": ["b", "c", "c"],
            "score": [1.0, 2.0, 3.0],
            "relation": "NONE",
            "split": "",
        }
    )
    verbs = pd.DataFrame(
        {
            "verb": ["a", "b", "c"],
            "tokens": ["a", "b ##b", "[UNK]"],
            "n_tokens": [1, 2, 1],
            "unknown": [False, False, True],
        }
    )
    reps = {"static": np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])}
    sims, vt = pair_similarities(pairs, verbs, reps, "mean")
    assert vt["covered"].tolist() == [True, True, False]
    assert sims["covered"].tolist() == [True, False, False]
    assert sims["cosine"].tolist() == pytest.approx([1 / np.sqrt(2), 0.0, 1 / np.sqrt(2)])
    sims, vt = pair_similarities(pairs, verbs, reps, "skip")
    assert vt["covered"].tolist() == [True, False, False]
    assert sims["covered"].tolist() == [False, False, False]


#: "abduct" in the WordPiece vocabularies (wordpiece_path: bert-base-cased, else bert-base-uncased)
ABDUCT = {"bert-base-cased": ["a", "##b", "##duct"], "bert-base-uncased": ["abd", "##uc", "##t"]}


def test_verb_token_spans_real_tokenizers(tokenizer_path: Callable[[str], Path], wordpiece_path: Path) -> None:
    from transformers import AutoTokenizer

    gpt2 = AutoTokenizer.from_pretrained(tokenizer_path("gpt2"))
    enc, spans = verb_token_spans(gpt2, ["walk", "abstain"], "to {verb}")
    toks = [gpt2.convert_ids_to_tokens(enc["input_ids"][i][s].tolist()) for i, s in enumerate(spans)]
    assert toks == [["Ġwalk"], ["Ġabst", "ain"]]  # the word-initial (leading-space) form
    bert = AutoTokenizer.from_pretrained(wordpiece_path)
    enc, spans = verb_token_spans(bert, ["walk", "abduct"], "I want to {verb} now")
    toks = [bert.convert_ids_to_tokens(enc["input_ids"][i][s].tolist()) for i, s in enumerate(spans)]
    assert toks == [["walk"], ABDUCT[wordpiece_path.name]]
    assert spans[0] == [4]  # [CLS] I want to walk


def test_verb_vectors_tiny_bert(wordpiece_path: Path) -> None:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(wordpiece_path)
    torch.manual_seed(0)
    model = BertModel(
        BertConfig(
            vocab_size=len(tok),
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        )
    ).eval()
    verbs = ["walk", "abduct"]
    table, reps = verb_vectors(model, tok, verbs, ["to {verb}", "they {verb} ."], batch_size=1)
    assert list(reps) == ["static", "layer0", "layer1", "layer2"]
    assert table["n_tokens"].tolist() == [1, 3]
    assert table["tokens"].tolist() == ["walk", " ".join(ABDUCT[wordpiece_path.name])]
    emb = model.get_input_embeddings().weight.detach().double().numpy()
    ids = tok("abduct", add_special_tokens=False)["input_ids"]
    np.testing.assert_allclose(reps["static"][1], emb[ids].mean(0), rtol=1e-12)
    # oracle for layer 2 of "abduct": mean over its three tokens in each frame, then over frames
    with torch.no_grad():
        h1 = model(**tok("to abduct", return_tensors="pt"), output_hidden_states=True).hidden_states[2][0, 2:5]
        h2 = model(**tok("they abduct .", return_tensors="pt"), output_hidden_states=True).hidden_states[2][0, 2:5]
    expected = (h1.double().mean(0) + h2.double().mean(0)).numpy() / 2
    np.testing.assert_allclose(reps["layer2"][1], expected, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- agreement join


def test_verb_errors_and_join(tmp_path: Path) -> None:
    pairs = read_simverb(_write(tmp_path, PAIRS))
    sims = _sims(pairs, {"static": [0.1, 0.3, 0.2, 0.5, 0.4]})
    err = verb_errors(pairs, sims).set_index("verb")
    # |cosine rank - human rank| / 5 per pair: 0, .2, .2, .2, .2
    assert err.loc["walk", "n_pairs"] == 2 and err.loc["walk", "rank_error"] == pytest.approx(0.1)
    assert err.loc["run", "rank_error"] == pytest.approx(0.1)
    assert err.loc["eat", "rank_error"] == pytest.approx(0.2)
    lemma_stats = pd.DataFrame(
        {
            "lemma": ["walk", "eat", "give", "sprint", "jump"],
            "accuracy": [0.9, 0.5, 0.4, 0.1, 0.7],
            "mean_log10_prob": [-3.0, -4.0, -5.0, -6.0, -2.0],
            "n_contexts": 10,
        }
    )
    joined, summary = agreement_join(verb_errors(pairs, sims), lemma_stats, "m")
    assert joined["verb"].tolist() == ["eat", "give", "sprint", "walk"]
    row = summary.iloc[0]
    assert row["n_verbs"] == 4
    # rank errors (eat .2, give .2, sprint .2, walk .1) vs accuracy (.5, .4, .1, .9)
    assert row["rho_accuracy"] == pytest.approx(stats.spearmanr([0.2, 0.2, 0.2, 0.1], [0.5, 0.4, 0.1, 0.9])[0])
    assert row["rho_accuracy"] < 0


# --------------------------------------------------------------------------- CLI on a small pair file


def test_cli_score_table_join(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, tokenizer_path: Callable[[str], Path]
) -> None:

    model = tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path / "tiny-gpt2")
    data = _write(tmp_path, PAIRS)
    dev = _write(tmp_path, "eat\tdine\tV\t2.00\tSYNONYMS\nwalk\trun\tV\t1.00\tNONE\n", "dev.txt")
    out = {
        k: tmp_path / v
        for k, v in dict(
            sims="s.parquet",
            verbs="v.csv",
            csv="t.csv",
            md="t.md",
            tex="t.tex",
            layers="l.csv",
            metrics="m.json",
            fig="l.png",
            sc="s.png",
        ).items()
    }
    assert (
        main(
            [
                "simverb-score",
                "--data",
                str(data),
                "--split",
                f"dev={dev}",
                "--model",
                str(model),
                "--device",
                "cpu",
                "--threads",
                "1",
                "--out",
                str(out["sims"]),
                "--verbs",
                str(out["verbs"]),
            ]
        )
        == 0
    )
    first: dict[str, bytes] = {}
    for run in range(2):  # byte-identical rerun
        assert (
            main(
                [
                    "simverb-table",
                    "--similarities",
                    str(out["sims"]),
                    "--verbs",
                    str(out["verbs"]),
                    "--model-name",
                    "tiny",
                    "--resamples",
                    "50",
                    "--csv",
                    str(out["csv"]),
                    "--md",
                    str(out["md"]),
                    "--tex",
                    str(out["tex"]),
                    "--layers-csv",
                    str(out["layers"]),
                    "--metrics-json",
                    str(out["metrics"]),
                    "--layers-figure",
                    str(out["fig"]),
                    "--scatter-figure",
                    str(out["sc"]),
                ]
            )
            == 0
        )
        if run == 0:
            first = {k: p.read_bytes() for k, p in out.items()}
    assert {k: p.read_bytes() for k, p in out.items()} == first
    t = pd.read_csv(out["csv"])
    assert set(t["subset"]) >= {"full", "dev", "relation:SYNONYMS", "range:[7.5, 10]"}
    assert set(t["representation"]) == {"static", "layer0", "layer1", "layer2"}
    assert t.query("subset == 'dev'")["n_pairs"].unique().tolist() == [2]
    # only eat/dine has a multi-token verb
    assert t.query("subset == 'tokens:multi'")["n_pairs"].unique().tolist() == [1]
    assert t.query("subset == 'tokens:single'")["n_pairs"].unique().tolist() == [4]
    # the table's rho is scipy's Spearman of the stored cosines
    sims = pd.read_parquet(out["sims"])
    s = sims[sims["representation"] == "layer1"]
    assert t.query("subset == 'full' and representation == 'layer1'")["rho"].iat[0] == pytest.approx(
        stats.spearmanr(s["cosine"], s["score"])[0], abs=1e-6
    )
    # eight verbs; GPT-2 splits " dine" into "Ġd" "ine"
    assert json.loads(out["metrics"].read_text())["coverage"] == {
        "verbs": 8,
        "single_token": 7,
        "multi_token": 1,
        "unknown": 0,
        "covered": 8,
    }
    verbs = pd.read_csv(out["verbs"]).set_index("verb")
    assert verbs.loc["dine", "tokens"] == "Ġd ine" and verbs.loc["dine", "n_tokens"] == 2
    md = out["md"].read_text()
    assert "| static |" in md and "dev: rho [CI]" in md and "By relation" in md
    # a tiny model (verbeval_tiny.json) is labelled; declared not random (--random-init false), it is not
    assert "tiny (random init)" in md and "tiny (random init)" in out["tex"].read_text()
    assert json.loads(out["metrics"].read_text())["random_init"] is True
    for data_file in ("csv", "layers", "verbs"):  # and so does every data file, in a last column
        got = pd.read_csv(out[data_file])
        assert got.columns[-1] == "random_init" and got["random_init"].tolist() == [True] * len(got), data_file
    assert (
        main(
            [
                "-q",
                "simverb-score",
                "--data",
                str(data),
                "--model",
                str(model),
                "--random-init",
                "false",
                "--device",
                "cpu",
                "--threads",
                "1",
                "--out",
                str(out["sims"]),
                "--verbs",
                str(out["verbs"]),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "simverb-table",
                "--similarities",
                str(out["sims"]),
                "--verbs",
                str(out["verbs"]),
                "--model-name",
                "tiny",
                "--resamples",
                "5",
                "--csv",
                str(out["csv"]),
                "--md",
                str(out["md"]),
                "--tex",
                str(out["tex"]),
                "--layers-csv",
                str(out["layers"]),
                "--metrics-json",
                str(out["metrics"]),
            ]
        )
        == 0
    )
    assert "random init" not in out["md"].read_text() and "random init" not in out["tex"].read_text()
    assert json.loads(out["metrics"].read_text())["random_init"] is False
    for data_file in ("csv", "layers", "verbs"):
        got = pd.read_csv(out[data_file])
        assert got["random_init"].tolist() == [False] * len(got), data_file
    ls = tmp_path / "lemma_stats.csv"
    pd.DataFrame(
        {
            "model": "tiny",
            "lemma": ["walk", "eat", "run"],
            "sing": ["walks", "eats", "runs"],
            "plur": ["walk", "eat", "run"],
            "n_contexts": 3,
            "n_correct": [3, 2, 1],
            "n_wrong": [0, 1, 2],
            "accuracy": [1.0, 2 / 3, 1 / 3],
            "mean_prob": 0.1,
            "mean_log10_prob": [-1.0, -2.0, -3.0],
        }
    ).to_csv(ls, index=False)
    assert (
        main(
            [
                "simverb-join",
                "--similarities",
                str(out["sims"]),
                "--lemma-stats",
                str(ls),
                "--model-name",
                "tiny",
                "--out",
                str(tmp_path / "j.csv"),
                "--summary",
                str(tmp_path / "js.csv"),
            ]
        )
        == 0
    )
    js = pd.read_csv(tmp_path / "js.csv")
    assert js["n_verbs"].tolist() == [3, 3, 3, 3]
    joined = pd.read_csv(tmp_path / "j.csv")
    assert js["random_init"].tolist() == [False] * 4 and joined["random_init"].tolist() == [False] * len(joined)
    # lemma statistics of a random model (their random_init column) mark the join as random too
    pd.read_csv(ls).assign(random_init=True).to_csv(ls, index=False)
    join = ["-q", "simverb-join", "--similarities", str(out["sims"]), "--lemma-stats", str(ls), "--model-name", "tiny"]
    assert main([*join, "--out", str(tmp_path / "j.csv"), "--summary", str(tmp_path / "js.csv")]) == 0
    for name in ("j.csv", "js.csv"):
        got = pd.read_csv(tmp_path / name)
        assert got.columns[-1] == "random_init" and got["random_init"].all() and len(got) > 0, name


def test_latex_and_markdown_without_splits(tmp_path: Path) -> None:
    pairs = read_simverb(_write(tmp_path, PAIRS))
    t = results_table(pairs, _sims(pairs, {"static": [0.1, 0.3, 0.2, 0.5, 0.4]}), "m_1", resamples=0)
    tex = to_latex(t, "m_1")
    assert r"\multicolumn{3}{c}{full}" in tex and "dev" not in tex and r"m\_1" in tex
    assert "0.800 [–, –]" in to_markdown(t, "m_1")


# --------------------------------------------------------------------------- workflow: official split files


def test_workflow_uses_split_files_when_present(tmp_path: Path, data_dir: Path) -> None:
    """With manifest entries and mirror files for the splits, the SimVerb job gets their split options;
    without them (the shipped manifest), it does not."""
    import hashlib
    import shutil

    import yaml

    from conftest import REPO_ROOT as repo
    from conftest import checkout_view
    from inprocess import dry_run
    from verbeval.core.manifest import load_manifest

    mirror = tmp_path / "mirror"
    shutil.copytree(data_dir, mirror)
    lines = (mirror / "simverb/SimVerb-3500.txt").read_text().splitlines(keepends=True)
    (mirror / "simverb/SimVerb-500-dev.txt").write_text("".join(lines[:500]))  # stand-ins for the official files
    (mirror / "simverb/SimVerb-3000-test.txt").write_text("".join(lines[500:]))
    manifest = yaml.safe_load((repo / "resources/manifest.yaml").read_text())
    base = manifest["sources"]["simverb_3500"]
    for name, member in (("simverb_500_dev", "SimVerb-500-dev.txt"), ("simverb_3000_test", "SimVerb-3000-test.txt")):
        manifest["sources"][name] = {
            **base,
            "archive_member": f"data/{member}",
            "mirror_path": f"simverb/{member}",
            "sha256": hashlib.sha256((mirror / "simverb" / member).read_bytes()).hexdigest(),
        }
    (tmp_path / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    assert "simverb_500_dev" in load_manifest(tmp_path / "manifest.yaml")

    def simverb_commands(manifest_path: Path) -> str:
        """The commands `snakemake simverb_all -n` schedules (in process)."""
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "data_mirror": str(mirror),
                    "manifest": str(manifest_path),
                    "raw_dir": str(tmp_path / "raw"),
                    "results_dir": str(tmp_path / "res"),
                    "models": [{"id": "gpt2"}],
                }
            )
        )
        run = dry_run(checkout_view(tmp_path / "wd"), [cfg], targets=["simverb_all"])
        return "\n".join(j["cmd"] for j in run.jobs)

    with_splits = simverb_commands(tmp_path / "manifest.yaml")
    # gpt2 is an agreement model too: its SimVerb branch runs in its one model job (verbeval run-model)
    assert f"--simverb-split=dev={tmp_path}/raw/simverb_500_dev/SimVerb-500-dev.txt" in with_splits
    assert f"--simverb-split=test={tmp_path}/raw/simverb_3000_test/SimVerb-3000-test.txt" in with_splits
    assert "verbeval run-model --model gpt2 " in with_splits
    assert "--simverb-split" not in simverb_commands(repo / "resources/manifest.yaml")


@pytest.mark.parametrize("n_layers", [6, 30, 48])
def test_layer_plot_ticks_are_readable(n_layers: int) -> None:
    """The x axis of the layer plot names every layer of a small model, and for a 30- or 48-layer
    model integer ticks whose labels do not run into each other (issue 33: '9101112131415...')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from verbeval.simverb.report import MAX_LAYER_TICKS, plot_layers

    layers = np.arange(n_layers + 1)
    rho = 0.2 + 0.1 * np.sin(layers / 5)
    table = pd.DataFrame(
        {
            "subset": "full",
            "representation": [f"layer{i}" for i in layers],
            "layer": layers,
            "rho": rho,
            "ci_low": rho - 0.02,
            "ci_high": rho + 0.02,
        }
    )
    table = pd.concat(
        [
            table,
            pd.DataFrame(
                [
                    {
                        "subset": "full",
                        "representation": "static",
                        "layer": -1,
                        "rho": 0.1,
                        "ci_low": 0.08,
                        "ci_high": 0.12,
                    }
                ]
            ),
        ],
        ignore_index=True,
    )
    fig = plot_layers(table, f"model with {n_layers} layers")
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    shown = [(t, lab) for t, lab in zip(ax.get_xticks(), ax.get_xticklabels()) if lo <= t <= hi and lab.get_text()]
    values = [t for t, _ in shown]
    assert all(float(v).is_integer() for v in values)
    if n_layers + 1 <= MAX_LAYER_TICKS:
        assert values == list(layers)
    else:
        assert 4 <= len(values) <= MAX_LAYER_TICKS + 2
        assert values[0] <= 5 and values[-1] >= n_layers - 10  # the range is covered
    boxes = [lab.get_window_extent() for _, lab in shown]
    gaps = [b.x0 - a.x1 for a, b in zip(boxes, boxes[1:])]
    assert min(gaps) > 0, gaps  # no label overlaps the next
    plt.close(fig)

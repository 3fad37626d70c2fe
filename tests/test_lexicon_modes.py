"""Lexicon modes (verbeval.agreement.lexicon_modes.modes): hand-worked metrics, mode masks, the form table on the
real tokenizers, and single_token mode against the single-token pipeline on tiny models."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tiny_cache import tiny_model
from verbeval.agreement.data.eligibility import eligible_lemmas
from verbeval.agreement.engine.inference import infer_chunk
from verbeval.agreement.lexicon_modes.form_shards import infer_forms_chunk, read_form_shards
from verbeval.agreement.lexicon_modes.modes import (
    MODES,
    common_pairs,
    context_mode_scores,
    form_table,
    group_summary,
    lemma_differences,
    lemma_scores,
    mode_masks,
    row_mode_tse,
)
from verbeval.agreement.lexicon_modes.table import coverage_table, modes_table, to_latex, to_markdown, to_metrics
from verbeval.agreement.scores.aggregate import context_scores, read_shards, row_tse
from verbeval.core.models import load_model, load_tokenizer

LEXICON = pd.DataFrame(
    [
        ("laugh", "laughs", "laugh"),
        ("be", "is", "are"),
        ("swim", "swims", "swim"),
        ("run", "runs", "run"),
        ("know", "knows", "know"),
        ("abdicate", "abdicates", "abdicate"),
    ],
    columns=["lemma", "sing", "plur"],
)
ROWS = [
    ("the author", "", "laughs", "laugh", False),
    ("the authors", "", "swim", "swims", True),
    ("the pilots that the guard likes", "to the guards", "are", "is", True),
    ("the farmer next to the guards", "in the park", "runs", "run", False),
    ("the author", "", "smiles", "smile", False),  # verb pair not in the lexicon (TSE only)
    ("the dancers", "every night", "abdicate", "abdicates", True),
]


def templates() -> pd.DataFrame:
    df = pd.DataFrame(ROWS, columns=["left", "right", "correct", "incorrect", "plural"])
    df.insert(0, "group", "g1")
    df["label"] = np.where(df["plural"], "plural", "singular")
    return df


# --------------------------------------------------------------------------- hand-worked metrics


def test_context_mode_scores_by_hand() -> None:
    # one plural context, three lemmas; P(sing), P(plur):
    #   l0: 0.1, 0.6 (right: plural 0.6 > 0.1)   l1: 0.2, 0.05 (wrong)   l2: 0.01, 0.04 (right)
    p = np.array([[[0.1, 0.6], [0.2, 0.05], [0.01, 0.04]]])
    lp = np.log(p)
    ew, mw = context_mode_scores(lp, np.array([True]), np.array([True, True, True]))
    assert ew[0] == pytest.approx(2 / 3)
    assert mw[0] == pytest.approx((0.6 + 0.05 + 0.04) / (0.7 + 0.25 + 0.05))
    ew, mw = context_mode_scores(lp, np.array([True]), np.array([True, False, True]))
    assert ew[0] == 1.0 and mw[0] == pytest.approx(0.64 / 0.75)
    ew, mw = context_mode_scores(lp, np.array([False]), np.array([False, True, False]))  # singular context
    assert ew[0] == 1.0 and mw[0] == pytest.approx(0.2 / 0.25)
    ew, mw = context_mode_scores(lp, np.array([True]), np.zeros(3, bool))
    assert np.isnan(ew[0]) and np.isnan(mw[0])
    # a tie is wrong; MW is stable for very small log-probabilities
    ew, mw = context_mode_scores(np.array([[[-900.0, -900.0], [-1000.0, -999.0]]]), np.array([True]), np.ones(2, bool))
    assert ew[0] == 0.5
    assert mw[0] == pytest.approx((1 + np.exp(-99.0)) / (2 + np.exp(-100.0) + np.exp(-99.0)))


def test_row_mode_tse_by_hand() -> None:
    logp = np.log(np.array([[[0.3, 0.2], [0.1, 0.4]], [[0.5, 0.5], [0.2, 0.1]]]))  # [N=2, P=2, 2]
    plural = np.array([False, True])
    row_context = np.array([0, 0, 1, 1])
    row_pair = np.array([0, 1, 0, 1])
    out = row_mode_tse(logp, plural, row_context, row_pair, np.array([True, True]))
    # ctx0 singular: pair0 0.3>0.2 right; pair1 0.1<0.4 wrong. ctx1 plural: pair0 tie wrong; pair1 0.1<0.2 wrong
    np.testing.assert_array_equal(out, [1.0, 0.0, 0.0, 0.0])
    out = row_mode_tse(logp, plural, row_context, row_pair, np.array([True, False]))
    np.testing.assert_array_equal(out, [1.0, np.nan, 0.0, np.nan])


def _fake_forms(single: list[bool], scorable: list[bool]) -> pd.DataFrame:
    n = len(single)
    return pd.DataFrame(
        {
            "pair": np.arange(n),
            "lemma": [f"l{i}" for i in range(n)],
            "sing": [f"l{i}s" for i in range(n)],
            "plur": [f"l{i}" for i in range(n)],
            "in_lexicon": True,
            "n_sing": [1 if s else 2 for s in single],
            "n_plur": 1,
            "single_token": single,
            "scorable": scorable,
        }
    )


def test_mode_masks_and_common() -> None:
    a = _fake_forms([True, True, False, False], [True] * 4)
    b = _fake_forms([True, False, True, False], [True, True, True, False])
    common = common_pairs([a, b])
    assert common[["sing", "plur"]].values.tolist() == [["l0s", "l0"]]
    m = mode_masks(b, common)
    np.testing.assert_array_equal(m["single_token"], [True, False, True, False])
    np.testing.assert_array_equal(m["all"], [True, True, True, False])
    np.testing.assert_array_equal(m["common"], [True, False, False, False])
    cov = coverage_table({"a": a, "b": b}, common)
    assert cov[["n_single_token", "n_all", "n_common", "n_multi_token"]].values.tolist() == [[2, 4, 1, 2], [2, 3, 1, 2]]


def test_group_summary_lemmas_and_tables_by_hand() -> None:
    forms = _fake_forms([True, False], [True, True])
    # two contexts (singular, plural), two lemmas; one TSE row per context on pair 0 / pair 1
    p = np.array(
        [
            [[0.5, 0.1], [0.1, 0.2]],  # singular ctx: l0 right, l1 wrong
            [[0.3, 0.3], [0.05, 0.4]],
        ]
    )  # plural ctx:   l0 tie (wrong), l1 right
    shards = {
        "logp": np.log(p),
        "plural": np.array([False, True]),
        "rows": np.array([0, 1]),
        "row_context": np.array([0, 1]),
        "row_pair": np.array([0, 1]),
    }
    masks = mode_masks(forms, common_pairs([forms]))
    s = group_summary(shards, masks, 2, model="m", group="g", resamples=0, seed=0, confidence=0.95)
    val = s.set_index(["mode", "metric"])["value"]
    assert val["single_token", "ew"] == pytest.approx(0.5)  # (1 + 0) / 2
    assert val["single_token", "mw"] == pytest.approx((0.5 / 0.6 + 0.3 / 0.6) / 2)
    assert val["all", "ew"] == pytest.approx((0.5 + 0.5) / 2)
    assert val["all", "mw"] == pytest.approx(((0.5 + 0.1) / 0.9 + (0.3 + 0.4) / 1.05) / 2)
    # row 0: singular ctx, pair 0: 0.5 > 0.1 right; row 1: plural ctx, pair 1: P(plur) 0.4 > 0.05 right
    assert val["all", "tse"] == 1.0
    assert s.set_index(["mode", "metric"]).loc[("all", "tse"), "n"] == 2
    assert val["single_token", "tse"] == 1.0  # only row 0 (pair 0 is single-token)
    assert s.set_index(["mode", "metric"]).loc[("common", "tse"), "n"] == 1
    assert set(s["n_lemmas"]) == {1, 2}

    lem = lemma_scores(shards["logp"], shards["plural"], forms, masks, "m")
    assert lem["accuracy"].tolist() == [0.5, 0.5] and lem["n_correct"].tolist() == [1, 1]
    assert lem["mean_log10_prob"].tolist() == pytest.approx(
        [(np.log10(0.6) + np.log10(0.6)) / 2, (np.log10(0.3) + np.log10(0.45)) / 2]
    )
    diff = lemma_differences(lem, resamples=10, seed=0, confidence=0.9)
    assert diff.loc[0, "n_single"] == 1 and diff.loc[0, "n_multi"] == 1 and diff.loc[0, "acc_diff"] == 0.0
    assert diff.loc[0, "mannwhitney_p"] == pytest.approx(1.0)

    t = modes_table(s, [{"id": "g", "name": "G"}], ["m"])
    assert len(t) == 3 and list(t["mode"]) == list(MODES)
    md = to_markdown(t, ["m"], "all")
    assert md.splitlines()[0].startswith("| Group | m all (2) TSE")
    assert r"single\_token (1)" in to_latex(t, ["m"], "common")
    met = to_metrics(t, ["m"], "all", coverage_table({"m": forms}, common_pairs([forms])))
    assert met["m"]["headline_mode"] == "all" and met["m"]["coverage"] == {"single_token": 1, "all": 2, "common": 1}
    assert met["m"]["all"]["g"]["ew"] == pytest.approx(0.5)


# --------------------------------------------------------------------------- real tokenizers


@pytest.mark.parametrize("name,expected_single", [("wordpiece", 4), ("gpt2", 4)])
def test_form_table_real_tokenizers(
    tokenizer_path: Callable[[str], Path], wordpiece_path: Path, name: str, expected_single: int
) -> None:
    # wordpiece: bert-base-cased, else bert-base-uncased (the same counts)
    tok = load_tokenizer(str(wordpiece_path if name == "wordpiece" else tokenizer_path(name)))
    t = form_table(LEXICON, templates(), tok)
    lex = t[t["in_lexicon"]]
    # single_token is exactly the paper's eligibility test
    assert lex.loc[lex["single_token"], "lemma"].tolist() == eligible_lemmas(LEXICON, tok)["lemma"].tolist()
    assert int(lex["single_token"].sum()) == expected_single
    assert lex["scorable"].all()
    # the template-only pair (smiles, smile) comes after the lexicon
    assert t[~t["in_lexicon"]][["sing", "plur"]].values.tolist() == [["smiles", "smile"]]
    swim = lex[lex["lemma"] == "swim"].iloc[0]
    assert swim["n_sing"] == 2 and swim["n_plur"] == 1 and not swim["single_token"]


# --------------------------------------------------------------------------- against the single-token pipeline


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory, tokenizer_path: Callable[[str], Path]) -> Path:
    """One tiny GPT-2 (seed 0) for the tests that only load it: each loads its own model object."""
    return tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path_factory.mktemp("tiny-gpt2") / "m")


@pytest.mark.parametrize("arch,tokenizer", [("bert", "wordpiece"), ("gpt2", "gpt2")])
def test_single_token_mode_equals_table2_pipeline(
    tokenizer_path: Callable[[str], Path],
    wordpiece_path: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    arch: str,
    tokenizer: str,
) -> None:
    tok = wordpiece_path if tokenizer == "wordpiece" else tokenizer_path(tokenizer)
    lm = load_model(str(tiny_model(tmp_path_factory, tok, arch, tmp_path / "m")), device="cpu")
    tpl = templates()
    forms = form_table(LEXICON, tpl, lm.tokenizer)
    lemmas = eligible_lemmas(LEXICON, lm.tokenizer)
    for chunk in range(2):
        infer_chunk(lm, tpl, lemmas, "g1", chunk, 2, tmp_path / f"s{chunk}.parquet", progress=False)
        infer_forms_chunk(lm, tpl, forms, "g1", chunk, 2, tmp_path / f"f{chunk}.parquet", batch_size=7, progress=False)
    ref = read_shards([tmp_path / "s0.parquet", tmp_path / "s1.parquet"])
    ref_scores = context_scores(ref, [1.0], [0.5])
    ref_tse = row_tse(ref, tpl)
    sh = read_form_shards([tmp_path / "f1.parquet", tmp_path / "f0.parquet"])
    masks = mode_masks(forms, common_pairs([forms]))
    n_lex = len(LEXICON)
    ew, mw = context_mode_scores(sh["logp"][:, :n_lex], sh["plural"], masks["single_token"][:n_lex])
    np.testing.assert_allclose(ew, ref_scores["ew_top@1"], atol=1e-6)
    np.testing.assert_allclose(mw, ref_scores["mw_top@1"], atol=1e-6)
    # single-token probabilities themselves (float32 in the Table 2 shards)
    lp_single = sh["logp"][:, :n_lex][:, masks["single_token"][:n_lex]]
    np.testing.assert_allclose(np.exp(lp_single), ref.stats.prob, rtol=1e-5, atol=1e-9)
    order = np.argsort(sh["rows"])
    tse = row_mode_tse(sh["logp"], sh["plural"], sh["row_context"], sh["row_pair"], masks["single_token"])[order]
    np.testing.assert_array_equal(np.isnan(tse), np.isnan(ref_tse["tse"].to_numpy()))
    np.testing.assert_array_equal(tse[~np.isnan(tse)], ref_tse["tse"].to_numpy()[~np.isnan(tse)])
    # mode all: every row has a TSE, multi-token forms included
    assert not np.isnan(row_mode_tse(sh["logp"], sh["plural"], sh["row_context"], sh["row_pair"], masks["all"])).any()
    assert sh["meta"]["method"] == ("pll-word-l2r" if arch == "bert" else "chain-rule")


def test_infer_forms_model_equals_per_chunk_shards_and_resumes(tiny_gpt2: Path, tmp_path: Path) -> None:
    """One process for every form shard of a model: the same bytes as the per-chunk path, a manifest
    with their checksums, and nothing recomputed on a rerun."""
    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.lexicon_modes.form_shards import infer_forms_model

    lm = load_model(str(tiny_gpt2), device="cpu")
    tpl = templates()
    forms = form_table(LEXICON, tpl, lm.tokenizer)
    manifest = tmp_path / "store" / "manifest.json"
    body = infer_forms_model(lm, tpl, forms, ["g1"], 2, manifest, batch_size=7, progress=False)
    assert [s["path"] for s in body["shards"]] == ["g1/1-of-2.parquet", "g1/2-of-2.parquet"]
    for chunk, path in enumerate(manifest_shards(manifest)["g1"]):
        ref = tmp_path / f"f{chunk}.parquet"
        infer_forms_chunk(lm, tpl, forms, "g1", chunk, 2, ref, batch_size=7, progress=False)
        assert path.read_bytes() == ref.read_bytes()
    again = infer_forms_model(lm, tpl, forms, ["g1"], 2, manifest, batch_size=7, progress=False)
    assert again["timing"]["contexts"] == 0 and again["shards"] == body["shards"]


def test_a_tf32_run_s_form_shards_say_tf32_and_hold_the_float32_numbers_on_a_cpu(
    tiny_gpt2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The form shards of a tf32 run on this CPU: ``dtype: tf32`` and ``matmul: float32`` in each shard and
    in the manifest, TF32 on while they are computed and restored after, the float32 run's log-probabilities."""
    import torch

    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.lexicon_modes import multitoken
    from verbeval.agreement.lexicon_modes.form_shards import infer_forms_model

    path = tiny_gpt2
    tpl = templates()
    flags, logp, seen = [], {}, []
    real = multitoken.form_logprobs  # the forward passes

    def spy(lm: Any, *a: Any, **k: Any) -> Any:
        seen.append((lm.dtype, torch.backends.cuda.matmul.allow_tf32))
        return real(lm, *a, **k)

    monkeypatch.setattr(multitoken, "form_logprobs", spy)
    before = torch.backends.cuda.matmul.allow_tf32
    for dtype in ("float32", "tf32"):
        lm = load_model(str(path), device="cpu", dtype=dtype)
        forms = form_table(LEXICON, tpl, lm.tokenizer)
        manifest = tmp_path / dtype / "manifest.json"
        infer_forms_model(lm, tpl, forms, ["g1"], 2, manifest, batch_size=7, progress=False)
        meta = json.loads(manifest.read_text())["meta"]
        sh = read_form_shards(manifest_shards(manifest)["g1"])
        assert (meta["dtype"], meta.get("matmul")) == (sh["meta"]["dtype"], sh["meta"].get("matmul"))
        flags.append((meta["dtype"], meta.get("matmul")))
        logp[dtype] = sh["logp"]
    assert seen == [("float32", before)] * 2 + [("tf32", True)] * 2
    assert flags == [("float32", None), ("tf32", "float32")] and torch.backends.cuda.matmul.allow_tf32 == before
    np.testing.assert_array_equal(logp["tf32"], logp["float32"])


def test_lexicon_modes_outputs_say_which_model_is_random(tiny_gpt2: Path, tmp_path: Path) -> None:
    """lexicon-modes reads whether its model is random from the model's Table 2 summaries
    (random_init column) and writes it into each of its CSVs; lexicon-modes-table carries it into
    its CSVs and into each model's record of metrics.json. Two models on one store: rnd (random)
    and real (not)."""
    from verbeval.agreement.lexicon_modes.form_shards import infer_forms_model
    from verbeval.cli import main

    lm = load_model(str(tiny_gpt2), device="cpu")
    tpl = templates()
    forms = form_table(LEXICON, tpl, lm.tokenizer)
    manifest = tmp_path / "store" / "manifest.json"
    infer_forms_model(lm, tpl, forms, ["g1"], 1, manifest, batch_size=7, progress=False)
    forms.to_parquet(tmp_path / "forms.parquet")
    common = tmp_path / "common.parquet"
    assert main(["-q", "lexicon-common", "--forms", f"rnd={tmp_path / 'forms.parquet'}", "--out", str(common)]) == 0
    groups = tmp_path / "groups.yaml"
    groups.write_text("groups:\n  - {id: g1, name: Group one, sources: [x]}\n")
    out: dict[str, dict[str, Path]] = {}
    for model in ("rnd", "real"):
        table2 = tmp_path / f"{model}-summary.csv"
        pd.DataFrame(
            {"model": model, "group": "g1", "metric": ["tse"], "side": [np.nan], "cutoff": [np.nan], "value": 0.5}
        ).assign(n=4, random_init=model == "rnd").to_csv(table2, index=False)
        out[model] = {k: tmp_path / f"{model}-{k}.csv" for k in ("summary", "lemmas", "diff", "consistency")}
        args = ["lexicon-modes", "--forms", str(tmp_path / "forms.parquet"), "--common", str(common)]
        args += ["--model-name", model, "--shards", str(manifest), "--table2-summaries", str(table2)]
        args += ["--resamples", "5", *[f"--{k}-out={p}" for k, p in out[model].items()]]
        assert main(["-q", *args]) == 0
        for name, path in out[model].items():
            got = pd.read_csv(path)
            assert got.columns[-1] == "random_init" and got["random_init"].tolist() == [model == "rnd"] * len(got), name
    table = {k: tmp_path / f"table.{k}" for k in ("csv", "md", "tex", "json", "coverage.csv", "diff.csv")}
    args = ["lexicon-modes-table", "--groups-file", str(groups), "--models", "rnd,real", "--lexicon-mode", "all"]
    args += ["--summaries", *[str(out[m]["summary"]) for m in ("rnd", "real")]]
    args += ["--diffs", *[str(out[m]["diff"]) for m in ("rnd", "real")], "--common", str(common)]
    args += ["--forms", *[f"{m}={tmp_path / 'forms.parquet'}" for m in ("rnd", "real")]]
    args += ["--csv", str(table["csv"]), "--md", str(table["md"]), "--tex", str(table["tex"])]
    args += ["--metrics", str(table["json"]), "--coverage", str(table["coverage.csv"])]
    assert main(["-q", *args, "--diff-csv", str(table["diff.csv"])]) == 0
    for name in ("csv", "coverage.csv", "diff.csv"):
        got = pd.read_csv(table[name])
        assert got.columns[-1] == "random_init", name
        assert got.groupby("model")["random_init"].unique().map(list).to_dict() == {"rnd": [True], "real": [False]}
    metrics = json.loads(table["json"].read_text())
    assert metrics["rnd"]["random_init"] is True and metrics["real"]["random_init"] is False
    assert sorted(metrics["rnd"]) == ["all", "common", "coverage", "headline_mode", "random_init", "single_token"]
    assert "random_init" not in table["md"].read_text()  # the Markdown names no column it did not name before

"""The in-process API (verbeval.agreement.api.evaluation, verbeval.agreement.api.suite): its numbers equal the
workflow's own sub-commands (``lemmas``, ``infer``, ``aggregate``, ``table``, run in process) for the
same tiny model, rows and lexicon, for a causal and a masked model.

The tiny models are randomly initialised: their numbers are meaningless, which does not matter for
an equality test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from conftest import REPO_ROOT
from tiny_cache import tiny_model
from verbeval.agreement.api.evaluation import AgreementResult, evaluate
from verbeval.agreement.api.suite import AgreementSuite
from verbeval.agreement.scores.lemma_contexts import read_lemma_contexts, unpack_bits
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.io import write_csv, write_parquet

ROWS = 8  # rows per template source: every group, a few seconds per model
GROUPS = ["simple", "sent_comp", "obj_rel_within", "blimp"]
TOP = "0.1,0.5,0.9,0.97,1"
BOTTOM = "0.5,0.01,1e-6"


@pytest.fixture(scope="module")
def run_inputs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A results folder as a run leaves it (templates, lexicon, groups), built from the sources."""
    tmp = tmp_path_factory.mktemp("sources")
    suite = AgreementSuite.from_sources(
        manifest=REPO_ROOT / "resources" / "manifest.yaml",
        groups_file=REPO_ROOT / "resources" / "agreement_groups.yaml",
        inflection_overrides=REPO_ROOT / "resources" / "inflection_overrides.csv",
        errata=REPO_ROOT / "resources" / "template_errata.csv",
        groups=GROUPS,
        max_rows_per_source=ROWS,
        raw_dir=tmp / "raw",
        mirror=data_dir,
    )
    out = tmp / "results" / "agreement"
    write_parquet(suite.templates, out / "templates.parquet")
    write_parquet(suite.lexicon, out / "lexicon.parquet")
    from verbeval.agreement.data.groups import write_groups

    write_groups(out / "groups.yaml", suite.groups)
    return tmp / "results"


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory, tokenizer_path: Any) -> Path:
    """One tiny GPT-2 (seed 0) for the tests that only load it: each loads its own model object."""
    return tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path_factory.mktemp("tiny-gpt2") / "model")


def _workflow(model: Path, results: Path, out: Path, chunks: int, batch: int) -> dict[str, Any]:
    """The workflow's sub-commands, in process: summary_all.csv, table2.csv, lemma_stats.csv."""
    agr = results / "agreement"
    groups = ",".join(GROUPS)
    assert main(["-q", "lemmas", "--model", str(model), "--lexicon", str(agr / "lexicon.parquet"), "--out", str(out / "lemmas.parquet")]) == 0  # fmt: skip
    common = ["--templates", str(agr / "templates.parquet"), "--groups", groups]
    manifest = str(out / "shards" / "manifest.json")
    infer = ["-q", "infer", "--model", str(model), "--device", "cpu", "--threads", "1", "--batch-size", str(batch)]
    assert main([*infer, *common, "--lemmas", str(out / "lemmas.parquet"), "--n-chunks", str(chunks), "--manifest", manifest, "--no-progress"]) == 0  # fmt: skip
    assert main(["-q", "aggregate", *common, "--model-name", "tiny", "--manifest", manifest, "--top-cutoffs", TOP, "--bottom-cutoffs", BOTTOM, "--out-dir", str(out / "tiny")]) == 0  # fmt: skip
    summaries = [str(out / "tiny" / g / "summary.csv") for g in GROUPS]
    names = {n: str(out / n) for n in ("table2.csv", "t.md", "t.tex", "metrics.json", "summary_all.csv")}
    assert main(["-q", "table", "--groups-file", str(agr / "groups.yaml"), "--models", "tiny", "--summaries", *summaries, "--csv", names["table2.csv"], "--md", names["t.md"], "--tex", names["t.tex"], "--metrics", names["metrics.json"], "--all-csv", names["summary_all.csv"]]) == 0  # fmt: skip
    assert main(["-q", "lemma-stats", "--lemmas", str(out / "lemmas.parquet"), "--shards", manifest, "--model-name", "tiny", "--out", str(out / "lemma_stats.csv")]) == 0  # fmt: skip
    return {"out": out, "manifest": manifest}


def _text(df: pd.DataFrame, path: Path, fmt: str) -> str:
    write_csv(df, path, float_format=fmt)
    return path.read_text()


# (architecture, tokenizer, agreement.chunks, batch size): one chunk per group, and several
# chunks with small batches (the last bits of a forward pass depend on its batch)
CASES = [("gpt2", "gpt2", 1, 64), ("bert", "bert-base-cased", 4, 3)]


@pytest.mark.parametrize(("arch", "tok", "chunks", "batch"), CASES)
def test_evaluate_equals_the_workflow(
    arch: str,
    tok: str,
    chunks: int,
    batch: int,
    run_inputs: Path,
    tokenizer_path: Any,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    model_dir = tiny_model(tmp_path_factory, tokenizer_path(tok), arch, tmp_path / "model")
    wf = _workflow(model_dir, run_inputs, tmp_path / "wf", chunks, batch)
    cls = AutoModelForCausalLM if arch == "gpt2" else AutoModelForMaskedLM
    model = cls.from_pretrained(model_dir)
    model.train()  # evaluate scores in eval mode and gives the mode back
    suite = AgreementSuite.from_results(run_inputs)
    top = [float(x) for x in TOP.split(",")]
    bottom = [float(x) for x in BOTTOM.split(",")]
    res = evaluate(
        model,
        AutoTokenizer.from_pretrained(model_dir),
        suite,
        name="tiny",
        batch_size=batch,
        chunks=chunks,
        top_cutoffs=top,
        bottom_cutoffs=bottom,
        random_init=True,
    )
    assert isinstance(res, AgreementResult) and model.training
    out = wf["out"]
    # summary_all.csv and table2.csv: the same text, every value, CI and count
    assert _text(res.summary, tmp_path / "s.csv", "%.10g") == (out / "summary_all.csv").read_text()
    assert _text(res.table2, tmp_path / "t.csv", "%.6f") == (out / "table2.csv").read_text()
    assert res.summary["n"].sum() > 0 and res.summary["random_init"].all()
    # per-context scores and per-row TSE: the aggregate's scores.parquet and tse.parquet
    for g in GROUPS:
        pd.testing.assert_frame_equal(res.context_scores[g], pd.read_parquet(out / "tiny" / g / "scores.parquet"))
        pd.testing.assert_frame_equal(res.row_tse[g], pd.read_parquet(out / "tiny" / g / "tse.parquet"))
    # per lemma: pooled over the groups, the n_correct of lemma-stats (its own computation from the shards)
    stats = pd.read_csv(out / "lemma_stats.csv").set_index("lemma")
    pooled = res.per_lemma.groupby("lemma")[["n_contexts", "n_correct"]].sum()
    assert set(pooled.index) == set(stats.index) and len(pooled) > 100
    assert (pooled["n_correct"] == stats.loc[pooled.index, "n_correct"]).all()
    assert (pooled["n_contexts"] == stats.loc[pooled.index, "n_contexts"]).all()
    # the same files from to_files; the bits unpack to n_correct
    paths = res.to_files(tmp_path / "api")
    assert paths["summary.csv"].read_text() == (out / "summary_all.csv").read_text()
    lc = read_lemma_contexts(paths["lemma_contexts.parquet"])
    assert list(lc["group"]) == sorted(lc["group"]) and lc.groupby("group")["lemma"].is_monotonic_increasing.all()
    assert all(unpack_bits(r["correct_bits"], r["n_contexts"]).sum() == r["n_correct"] for r in lc.to_dict("records"))
    assert str(lc["n_contexts"].dtype) == "int32"


def test_suite_selection_and_errors(run_inputs: Path, tokenizer_path: Any, tmp_path: Path) -> None:
    suite = AgreementSuite.from_results(run_inputs / "agreement", groups=["simple", "blimp"], max_rows_per_source=4)
    assert suite.group_ids == ["simple", "blimp"]
    counts = suite.templates.groupby("source").size()
    assert counts.max() == 4 and len(counts) == 5  # simple_agrmt and BLiMP's four sources
    assert suite.select() is suite and suite.select(["blimp"]) is suite.select(["blimp"])
    with pytest.raises(VerbevalError, match=r"unknown agreement group\(s\) \['nope'\]"):
        suite.select(["nope"])
    with pytest.raises(VerbevalError, match="no templates.parquet"):
        AgreementSuite.from_results(tmp_path)


def test_evaluate_max_rows_and_groups(run_inputs: Path, tiny_gpt2: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = AutoModelForCausalLM.from_pretrained(tiny_gpt2), AutoTokenizer.from_pretrained(tiny_gpt2)
    suite = AgreementSuite.from_results(run_inputs)
    res = evaluate(model, tok, suite, groups=["simple"], max_rows=4, resamples=0)
    assert list(res.per_group["group"]) == ["simple"]
    assert res.per_group["n_rows"].iloc[0] <= 4 and res.per_group["n_contexts"].iloc[0] <= 4
    assert res.summary["ci_low"].isna().all()  # no resamples: no CI
    values = res.log_values()
    assert set(values) == {"agreement/simple/tse", "agreement/simple/ew", "agreement/simple/mw"}
    assert all(0 <= v <= 1 for v in values.values())
    again = evaluate(model, tok, suite, groups=["simple"], max_rows=4, resamples=0)
    pd.testing.assert_frame_equal(res.summary, again.summary)
    assert np.isfinite(res.per_group[["tse", "ew", "mw"]].to_numpy()).all()


def test_api_bench_part_runs_and_prints(
    data_dir: Path, tokenizer_path: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path, capsys: Any
) -> None:
    """The bench's api part (verbeval bench --parts api) on a one-layer model and two rows per source."""
    from verbeval.bench.api_calls import bench_api
    from verbeval.bench.report import print_report

    monkeypatch.chdir(repo_view)  # the suite's default resources/ paths
    res = bench_api(
        tokenizer_path("gpt2"), tmp_path, data_dir, max_rows=2, groups=["simple"], repeats=1, models={"t": (1, 16, 2)}
    )
    (row,) = res["results"]
    assert row["groups"] == 1 and row["contexts"] == 2 and row["rows"] == 2
    assert row["call_s"] > 0 and row["call_with_suite_s"] == pytest.approx(row["call_s"] + res["suite_s"], abs=2e-3)
    print_report({"quick": True, "machine": {"load_avg_start": [0.0]}, "api": res})
    assert "t (1 layers x 16, random init): 1 groups, 2 contexts, 2 rows" in capsys.readouterr().out


def test_evaluate_bad_input(run_inputs: Path, tiny_gpt2: Path, tmp_path: Path) -> None:
    """One line naming the cause: a context longer than the model reads, a model of unknown kind."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = AutoModelForCausalLM.from_pretrained(tiny_gpt2), AutoTokenizer.from_pretrained(tiny_gpt2)
    suite = AgreementSuite.from_results(run_inputs, groups=["simple"])
    long = suite.templates.assign(left="the " + "very " * 200 + "old author")
    with pytest.raises(VerbevalError, match=r"reads at most 128 positions, but \d+ context\(s\) are longer"):
        evaluate(model, tok, AgreementSuite(long, suite.lexicon, suite.groups), name="tiny")

    class Body(torch.nn.Module):  # neither a masked nor a causal LM by its name
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Linear(2, 2)

    with pytest.raises(VerbevalError, match="pass kind='masked' or kind='causal' to evaluate"):
        evaluate(Body(), tok, suite)


def _small_vocab_gpt2(rows: int = 1000) -> Any:
    """A one-layer GPT-2 whose input embeddings hold ``rows`` token ids: fewer than GPT-2's tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=rows, n_positions=128, n_embd=16, n_layer=1, n_head=2)
    return GPT2LMHeadModel(cfg).eval()


def test_a_tokenizer_larger_than_the_model_is_one_line(run_inputs: Path, tokenizer_path: Any) -> None:
    """evaluate() with a tokenizer whose ids exceed the model's embeddings: one VerbevalError naming
    both sizes before any forward pass (torch's IndexError, a device-side assert on CUDA, before)."""
    from transformers import AutoTokenizer

    from verbeval.agreement.data.eligibility import eligible_lemmas

    suite = AgreementSuite.from_results(run_inputs, groups=["simple"])
    tok = AutoTokenizer.from_pretrained(tokenizer_path("gpt2"))
    top = int(eligible_lemmas(suite.lexicon, tok)[["sing_id", "plur_id"]].to_numpy().max())
    with pytest.raises(VerbevalError) as err:
        evaluate(_small_vocab_gpt2(), tok, suite, name="small", resamples=0)
    assert str(err.value) == (
        f"model 'small': its tokenizer has 50257 tokens but its input embeddings only 1000 rows: the lemma forms "
        f"include token id {top}; use the model's own tokenizer (or resize the embeddings: "
        "model.resize_token_embeddings(len(tokenizer)))"
    )


def test_the_workflow_checks_token_ids_too(
    run_inputs: Path, tokenizer_path: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run-model's path (verbeval infer) shares the check: a saved model folder whose tokenizer is larger
    than its embeddings stops with the same line, exit 1."""
    from transformers import AutoTokenizer

    folder = tmp_path / "small"
    _small_vocab_gpt2().save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_path("gpt2")).save_pretrained(folder)
    agr = run_inputs / "agreement"
    lemmas = str(tmp_path / "lemmas.parquet")
    assert (
        main(["-q", "lemmas", "--model", str(folder), "--lexicon", str(agr / "lexicon.parquet"), "--out", lemmas]) == 0
    )
    capsys.readouterr()
    infer = ["-q", "infer", "--model", str(folder), "--device", "cpu", "--threads", "1", "--templates", str(agr / "templates.parquet")]  # fmt: skip
    assert main([*infer, "--groups", "simple", "--lemmas", lemmas, "--manifest", str(tmp_path / "m" / "manifest.json"), "--no-progress"]) == 1  # fmt: skip
    top = int(pd.read_parquet(lemmas)[["sing_id", "plur_id"]].to_numpy().max())
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after transformers' loading bar
    assert err == (
        f"verbeval infer: error: model '{folder}': its tokenizer has 50257 tokens but its input embeddings only "
        f"1000 rows: the lemma forms include token id {top}; use the model's own tokenizer (or resize the "
        "embeddings: model.resize_token_embeddings(len(tokenizer)))"
    )


def test_check_token_ids_bounds() -> None:
    """The largest id a model reads is its embeddings' rows - 1; a model without embeddings is not checked."""
    from types import SimpleNamespace

    from verbeval.core.models import check_token_ids, embedding_rows

    model = _small_vocab_gpt2(10)
    lm = SimpleNamespace(model_id="m", model=model, tokenizer=list(range(12)))
    assert embedding_rows(model) == 10 and embedding_rows(None) is None
    check_token_ids(lm, 9, "the simple contexts")  # type: ignore[arg-type]
    with pytest.raises(VerbevalError, match=r"^model 'm': its tokenizer has 12 tokens but its input embeddings only 10 rows: the simple contexts include token id 10; "):  # fmt: skip
        check_token_ids(lm, 10, "the simple contexts")  # type: ignore[arg-type]
    check_token_ids(SimpleNamespace(model_id="m", model=None, tokenizer=[]), 10**6, "x")  # type: ignore[arg-type]


def test_evaluate_and_compare_take_the_clustering(run_inputs: Path, tiny_gpt2: Path, tmp_path: Path) -> None:
    """``cluster``: agreement.bootstrap.cluster's default (context) when None; ``template`` draws the
    suite's templates (BLiMP's four sources) in the summary and in :meth:`AgreementResult.compare`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verbeval.core.bootstrap import Clusters, bootstrap_means

    model, tok = AutoModelForCausalLM.from_pretrained(tiny_gpt2), AutoTokenizer.from_pretrained(tiny_gpt2)
    suite = AgreementSuite.from_results(run_inputs, groups=["blimp"], max_rows_per_source=4)
    with pytest.raises(VerbevalError) as e:
        evaluate(model, tok, suite, cluster="lemma")
    assert str(e.value) == (
        "evaluate: cluster='lemma': expected one of context, template, template_and_lemma, subject, verb, "
        "subject_and_verb"
    )
    kw = {"resamples": 50, "seed": 0, "confidence": 0.95}
    res, plain = evaluate(model, tok, suite, **kw, cluster="template"), evaluate(model, tok, suite, **kw)
    assert (res.summary["cluster"] == "template").all() and "cluster" not in plain.summary.columns
    labels = res.row_clusters["blimp"]["template"].to_numpy()
    assert sorted(set(labels)) == sorted(set(suite.templates["source"]))
    tse = res.row_tse["blimp"]
    _, lo, hi = bootstrap_means(tse["tse"].to_numpy(), 50, 0, 0.95, clusters=Clusters.of(labels[tse["row"]]))
    got = res.summary[res.summary["metric"] == "tse"].iloc[0]
    assert (got["ci_low"], got["ci_high"]) == (lo[0], hi[0])
    clustered, today = res.compare(plain, **kw, cluster="template"), res.compare(plain, **kw)
    assert (clustered["cluster"] == "template").all() and "cluster" not in today.columns
    t = clustered[clustered["metric"] == "tse"].iloc[0]  # the same model twice: no discordant row
    assert (t["p_value"], t["ci_low"], t["ci_high"], t["confidence"]) == (1.0, 0.0, 0.0, 0.95)
    assert np.isnan(today[today["metric"] == "tse"].iloc[0]["ci_low"])
    # template_and_lemma keeps the form statistics that compare draws lemmas from (the others do not)
    assert res.form_stats == {} and plain.form_stats == {}
    both = evaluate(model, tok, suite, **kw, cluster="template_and_lemma")  # its summary draws lemmas too
    assert (both.summary["cluster"] == "template_and_lemma").all()
    stats, plural = both.form_stats["blimp"]
    assert stats.prob.shape[:2] == (len(plural), len(both.lemmas)) and len(plural) == len(both.context_scores["blimp"])
    same = both.compare(both, **kw, cluster="template_and_lemma").set_index("metric")  # the same model twice
    assert (same["cluster"] == "template_and_lemma").all()
    assert same.loc[["ew", "mw"], ["difference", "ci_low", "ci_high"]].to_numpy().tolist() == [[0.0] * 3] * 2

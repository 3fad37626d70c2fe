"""Models whose weights hold NaN or inf: inference stops with one line, unless allowed and recorded.

Tiny in-process BERT and GPT-2 (as in test_inference.py) with one LM-head weight set to NaN, +inf
or -inf; the agreement path (``infer_model``) and the multi-token form path (``infer_forms_model``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from test_inference import LEXICON, template_frame
from tiny_cache import tiny_model
from verbeval.agreement.data.eligibility import eligible_lemmas
from verbeval.agreement.engine.inference import infer_model
from verbeval.agreement.engine.shards import read_shard_meta
from verbeval.agreement.engine.shardstore import JOURNAL_NAME
from verbeval.core.errors import VerbevalError
from verbeval.core.models import LoadedModel, load_model


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def clean_lm(
    request: pytest.FixtureRequest,
    tokenizer_path: Callable[[str], Path],
    wordpiece_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> LoadedModel:
    tok = wordpiece_path if request.param == "bert" else tokenizer_path("gpt2")
    path = tiny_model(tmp_path_factory, tok, request.param, tmp_path_factory.mktemp(request.param))
    return load_model(str(path), device="cpu")


def _damaged(lm: LoadedModel, value: float) -> LoadedModel:
    """A copy of ``lm`` whose LM head holds ``value`` in one weight of the row of the token 'is'
    (GPT-2 ties it to the input embedding, so contexts holding that token break earlier too)."""
    bad = copy.copy(lm)
    bad.model = copy.deepcopy(lm.model)
    row = lm.tokenizer.convert_tokens_to_ids("is")
    with torch.no_grad():
        bad.model.get_output_embeddings().weight[row, 0] = value
    return bad


def _lemmas(lm: LoadedModel) -> object:
    return eligible_lemmas(LEXICON, lm.tokenizer)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "+inf", "-inf"])
def test_nonfinite_logits_stop_inference_naming_model_group_and_count(
    clean_lm: LoadedModel, value: float, tmp_path: Path
) -> None:
    lm = _damaged(clean_lm, value)
    templates = template_frame()
    manifest = tmp_path / "store" / "manifest.json"
    # independent count: contexts whose logits at the predicted position are not all finite
    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.agreement.engine.forward_pass import _pad
    from verbeval.agreement.engine.inference import prepare_group

    work = prepare_group(lm, templates, "g2")
    enc = encode_contexts(lm, work.contexts)
    ids, att = _pad(enc.ids, lm.tokenizer.pad_token_id or 0, torch.device("cpu"))
    with torch.inference_mode():
        logits = lm.model(input_ids=ids, attention_mask=att).logits[torch.arange(len(ids)), torch.as_tensor(enc.target)]
    expected_bad = int((~torch.isfinite(logits).all(-1)).sum())
    assert expected_bad == len(work.contexts) == 1  # one weight per token row: every logit vector holds it
    with pytest.raises(VerbevalError) as err:
        infer_model(lm, templates, _lemmas(lm), ["g2"], 2, manifest, batch_size=4, progress=False)
    msg = str(err.value)
    assert "\n" not in msg
    assert f"model {lm.model_id!r}, group 'g2': 1 of 1 contexts of chunk 1/1 have non-finite logits" in msg
    assert "allow_nonfinite" in msg
    assert not manifest.exists() and not list((tmp_path / "store").rglob("*.parquet"))


def test_finished_groups_stay_and_allow_nonfinite_records_it(clean_lm: LoadedModel, tmp_path: Path) -> None:
    lm = _damaged(clean_lm, float("nan"))
    templates = template_frame()
    manifest = tmp_path / "store" / "manifest.json"
    with pytest.raises(VerbevalError, match="group 'g1'"):
        infer_model(lm, templates, _lemmas(lm), ["g1"], 2, manifest, batch_size=4, progress=False)
    assert not manifest.exists() and not list((tmp_path / "store").rglob("*.parquet"))
    # with the switch: written, and the shards, journal and manifest say how many contexts
    body = infer_model(
        lm, templates, _lemmas(lm), ["g1"], 2, manifest, batch_size=4, progress=False, allow_nonfinite=True
    )
    n_ctx = [s["n_contexts"] for s in body["shards"]]
    assert [s["n_nonfinite"] for s in body["shards"]] == n_ctx
    assert json.loads(manifest.read_text())["shards"][0]["n_nonfinite"] == n_ctx[0]
    shard = tmp_path / "store" / body["shards"][0]["path"]
    assert read_shard_meta(shard)["n_nonfinite"] == n_ctx[0]
    # without the switch again, such shards are not reused silently: the run stops
    with pytest.raises(VerbevalError, match="non-finite logits"):
        infer_model(lm, templates, _lemmas(lm), ["g1"], 2, manifest, batch_size=4, progress=False)


def test_clean_model_writes_no_nonfinite_field(clean_lm: LoadedModel, tmp_path: Path) -> None:
    manifest = tmp_path / "store" / "manifest.json"
    body = infer_model(
        clean_lm, template_frame(), _lemmas(clean_lm), ["g1", "g2"], 2, manifest, batch_size=4, progress=False
    )
    assert all("n_nonfinite" not in s for s in body["shards"])
    journal = (tmp_path / "store" / JOURNAL_NAME).read_text().splitlines()
    assert sorted(json.loads(line)["path"] for line in journal) == sorted(s["path"] for s in body["shards"])


def test_form_scores_stop_on_nonfinite_too(clean_lm: LoadedModel, tmp_path: Path) -> None:
    """The multi-token form path (lexicon modes) checks its log-probabilities the same way."""
    from verbeval.agreement.lexicon_modes.form_shards import infer_forms_model
    from verbeval.agreement.lexicon_modes.modes import form_table

    lm = _damaged(clean_lm, float("nan"))
    templates = template_frame()
    forms = form_table(LEXICON.assign(source="test"), templates, lm.tokenizer)
    with pytest.raises(VerbevalError, match=r"group 'g2': 1 of 1 contexts of chunk 1/1 have non-finite"):
        infer_forms_model(
            lm, templates, forms, ["g2"], 3, tmp_path / "forms" / "manifest.json", batch_size=8, progress=False
        )
    assert not list((tmp_path / "forms").rglob("*.parquet"))
    clean = infer_forms_model(
        clean_lm, templates, forms, ["g2"], 3, tmp_path / "ok" / "manifest.json", batch_size=8, progress=False
    )
    assert [s["path"] for s in clean["shards"]] == ["g2/1-of-1.parquet"]  # 3 chunks capped at 1 context
    assert "n_nonfinite" not in clean["shards"][0]


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_simverb_stops_on_nonfinite_verb_vectors(wordpiece_path: Path, value: float) -> None:
    """SimVerb reads hidden states, not logits: a damaged embedding weight of a verb's token gives
    non-finite vectors, which stop the scoring naming the model and the count."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from verbeval.simverb.vectors import check_finite_vectors, verb_vectors

    tok = AutoTokenizer.from_pretrained(wordpiece_path)
    torch.manual_seed(0)
    model = BertModel(
        BertConfig(
            vocab_size=len(tok),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        )
    ).eval()
    verbs = ["abduct", "run", "walk"]
    _, reps = verb_vectors(model, tok, verbs, ["to {verb}"])
    check_finite_vectors("tiny", verbs, reps)  # a clean model passes
    with torch.no_grad():
        model.get_input_embeddings().weight[tok.convert_tokens_to_ids("walk"), 3] = value
    _, reps = verb_vectors(model, tok, verbs, ["to {verb}"])
    with pytest.raises(VerbevalError) as err:
        check_finite_vectors("tiny", verbs, reps)
    assert str(err.value) == (
        "model 'tiny': non-finite verb vectors (NaN or inf: are the model's weights damaged?) in "
        "3 representation(s), first static: 1 of 3 verbs; nothing written"
    )


def test_allowed_nonfinite_contexts_score_nan_not_zero(clean_lm: LoadedModel, tmp_path: Path) -> None:
    """Under allow_nonfinite the damaged contexts get NaN EW/MW/TSE (no score), not EW 0."""
    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.scores.aggregate import context_scores, read_shards, row_tse

    lm = _damaged(clean_lm, float("nan"))
    templates = template_frame()
    manifest = tmp_path / "store" / "manifest.json"
    infer_model(lm, templates, _lemmas(lm), ["g1"], 1, manifest, batch_size=4, progress=False, allow_nonfinite=True)
    shards = read_shards(manifest_shards(manifest)["g1"])
    scores = context_scores(shards, [0.5, 1.0], [0.5])
    metric_cols = [c for c in scores.columns if "@" in c]
    assert scores[metric_cols].isna().all().all()
    g1 = templates[templates.group == "g1"].reset_index(drop=True)
    assert row_tse(shards, g1)["tse"].isna().all()


def test_allowed_nonfinite_contexts_are_named_in_table2_and_its_metrics(clean_lm: LoadedModel, tmp_path: Path) -> None:
    """The outputs say so: with allow_nonfinite, `verbeval aggregate` records the count in the summary and
    `verbeval table` adds a note per (model, group) to Table 2 (md, tex, html) and the count to metrics.json
    (and the DVC per-group metrics); the clean model beside it gets neither."""
    import pandas as pd

    from verbeval.agreement.report.dvc_views import split_metrics
    from verbeval.cli import main

    templates = template_frame()
    tpath = tmp_path / "templates.parquet"
    templates.to_parquet(tpath)
    summaries = []
    for name, lm in (("damaged", _damaged(clean_lm, float("nan"))), ("clean", clean_lm)):
        manifest = tmp_path / name / "shards" / "manifest.json"
        infer_model(lm, templates, _lemmas(lm), ["g1"], 2, manifest, batch_size=4, progress=False, allow_nonfinite=True)
        assert (
            main(
                [
                    "-q",
                    "aggregate",
                    "--templates",
                    str(tpath),
                    "--groups",
                    "g1",
                    "--model-name",
                    name,
                    "--manifest",
                    str(manifest),
                    "--top-cutoffs",
                    "0.5,1",
                    "--bottom-cutoffs",
                    "0.5",
                    "--out-dir",
                    str(tmp_path / name),
                    "--resamples",
                    "10",
                ]
            )
            == 0
        )
        summaries.append(str(tmp_path / name / "g1" / "summary.csv"))
    damaged, clean = (pd.read_csv(p) for p in summaries)
    n_ctx = int(damaged.loc[damaged["metric"] == "ew", "n_total"].iloc[0])
    assert n_ctx > 0 and (damaged["n_nonfinite"] == n_ctx).all()  # every context: the head's NaN reaches all
    assert "n_nonfinite" not in clean.columns
    groups = tmp_path / "groups.yaml"
    groups.write_text("groups:\n  - {id: g1, name: Simple agreement, sources: [test]}\n")
    out = {k: tmp_path / f"table2.{k}" for k in ("csv", "md", "tex", "html")}
    assert (
        main(
            [
                "-q",
                "table",
                "--groups-file",
                str(groups),
                "--models",
                "damaged,clean",
                "--summaries",
                *summaries,
                "--csv",
                str(out["csv"]),
                "--md",
                str(out["md"]),
                "--tex",
                str(out["tex"]),
                "--html",
                str(out["html"]),
                "--all-csv",
                str(tmp_path / "all.csv"),
                "--metrics",
                str(tmp_path / "metrics.json"),
            ]
        )
        == 0
    )
    note = (
        f"damaged, Simple agreement: {n_ctx} of {n_ctx} contexts had non-finite logits (NaN or inf) and were "
        "kept under inference.allow_nonfinite: they have no TSE, EW or MW and are left out of the means; "
        "check the model's weights."
    )
    md = out["md"].read_text()
    assert f"* {note}" in md and md.count("non-finite") == 1
    assert "| Simple agreement | – | – | – |" in md  # no number for the damaged model
    assert "non-finite logits" in out["tex"].read_text() and "non-finite logits" in out["html"].read_text()
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["damaged"]["g1"] == {
        "tse": None,
        "ew": None,
        "mw": None,
        "nonfinite_contexts": n_ctx,
        "random_init": False,
    }
    assert "nonfinite_contexts" not in metrics["clean"]["g1"] and metrics["clean"]["g1"]["ew"] is not None
    table = pd.read_csv(out["csv"])
    assert table["damaged.n_nonfinite"].tolist() == [n_ctx] and table["clean.n_nonfinite"].tolist() == [0]
    views = split_metrics(metrics, ["damaged", "clean"], ["g1"])
    assert (
        views[("damaged", "g1")]["nonfinite_contexts"] == n_ctx and "nonfinite_contexts" not in views[("clean", "g1")]
    )

"""Verb veridicality: label mapping, signatures, aggregation, NLI scoring and the pseudo-model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from verbeval.core.errors import InputError, VerbevalError
from verbeval.veridicality.data import PREDICTION_COLUMNS, parse_signature, pseudo_model_predictions, read_dataset
from verbeval.veridicality.predict import label_index, score_nli
from verbeval.veridicality.statistics import signature_table

#: the Ross & Pavlick data file inside a data mirror (the ``data_dir`` fixture)
DATA_IN_MIRROR = (
    "github.com/alexisjihyeross/verb_veridicality/raw/"
    "981c35b0402083e0562e221d8078aa4ea88e327f/verb_veridicality_evaluation.tsv"
)


@pytest.fixture()
def data(data_dir: Path) -> Path:
    return data_dir / DATA_IN_MIRROR


@pytest.fixture()
def uncased_tokenizer(tokenizer_path: Callable[[str], Path]) -> Path:
    return tokenizer_path("bert-base-uncased")


def test_label_index_by_name_in_any_order() -> None:
    assert label_index(SimpleNamespace(id2label={0: "contradiction", 1: "entailment", 2: "neutral"})) == {
        "contradiction": 0,
        "entailment": 1,
        "neutral": 2,
    }
    assert label_index(SimpleNamespace(id2label={0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"})) == {
        "entailment": 0,
        "neutral": 1,
        "contradiction": 2,
    }
    assert label_index(SimpleNamespace(id2label={2: "Entailment", 0: "Neutral", 1: "Contradiction"})) == {
        "entailment": 2,
        "neutral": 0,
        "contradiction": 1,
    }


def test_label_index_refuses_positional_and_missing_names() -> None:
    with pytest.raises(VerbevalError, match="positional"):
        label_index(SimpleNamespace(id2label={0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}))
    with pytest.raises(VerbevalError, match="no label named"):
        label_index(SimpleNamespace(id2label={0: "positive", 1: "negative"}))


def test_parse_signature() -> None:
    assert parse_signature("+/-") == {"positive": "entailment", "negative": "contradiction"}
    assert parse_signature("o/+") == {"positive": "neutral", "negative": "entailment"}
    assert parse_signature("+/\u2212") == {"positive": "entailment", "negative": "contradiction"}
    with pytest.raises(VerbevalError):
        parse_signature("+-")


def _preds() -> pd.DataFrame:
    # probabilities ordered (entailment, neutral, contradiction)
    p = [
        (0.8, 0.1, 0.1),
        (0.6, 0.3, 0.1),
        (0.2, 0.3, 0.5),  # +/- positive: argmax e, e, c
        (0.1, 0.2, 0.7),
        (0.3, 0.5, 0.2),
        (0.1, 0.1, 0.8),
    ]  # +/- negative: argmax c, n, c
    df = pd.DataFrame(p, columns=["p_entailment", "p_neutral", "p_contradiction"])
    df.insert(0, "index", [0, 1, 2, 0, 1, 2])
    df.insert(1, "verb", ["know", "manage", "realize"] * 2)
    df.insert(2, "signature", "+/-")
    df.insert(3, "environment", ["positive"] * 3 + ["negative"] * 3)
    df["score"] = df["p_entailment"] - df["p_contradiction"]
    df["human_mean"] = [2.0, 1.0, 0.0, -1.0, 0.0, -2.0]
    return df[PREDICTION_COLUMNS]


def test_signature_table_hand_computed() -> None:
    preds = _preds()
    t = signature_table(preds).set_index(["signature", "environment"])
    assert list(t.reset_index().columns) == ["signature", "environment", "n", "accuracy", "pearson", "spearman"]
    assert list(t.index) == [("+/-", "positive"), ("+/-", "negative"), ("overall", "positive"), ("overall", "negative")]
    pos = t.loc[("+/-", "positive")]
    assert pos["n"] == 3
    assert pos["accuracy"] == pytest.approx(2 / 3)
    # scores 0.7, 0.5, -0.3 against 2, 1, 0: same order -> Spearman 1
    assert pos["spearman"] == pytest.approx(1.0)
    assert pos["pearson"] == pytest.approx(stats.pearsonr([0.7, 0.5, -0.3], [2, 1, 0])[0])
    assert pos["pearson"] == pytest.approx(1 / np.sqrt(1.12), abs=1e-12)  # cov 1.0 over sqrt(0.56 * 2)
    neg = t.loc[("+/-", "negative")]
    assert neg["accuracy"] == pytest.approx(2 / 3)
    # scores -0.6, 0.1, -0.7 against -1, 0, -2
    assert neg["spearman"] == pytest.approx(1.0)
    assert neg["pearson"] == pytest.approx(stats.pearsonr([-0.6, 0.1, -0.7], [-1, 0, -2])[0])
    assert neg["pearson"] == pytest.approx(0.8 / np.sqrt(0.76), abs=1e-12)  # cov 0.8 over sqrt(0.38 * 2)
    assert t.loc[("overall", "positive")].tolist() == pytest.approx(pos.tolist())


def test_signature_table_constant_scores_give_nan() -> None:
    preds = _preds().iloc[:1]
    t = signature_table(preds)
    assert t.iloc[0]["n"] == 1 and np.isnan(t.iloc[0]["pearson"]) and np.isnan(t.iloc[0]["spearman"])


def test_score_nli_tiny_bert(uncased_tokenizer: Path) -> None:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(uncased_tokenizer)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
        id2label={0: "contradiction", 1: "entailment", 2: "neutral"},
        label2id={"contradiction": 0, "entailment": 1, "neutral": 2},
    )
    model = BertForSequenceClassification(cfg)
    premises = [
        "Nike declined to be a sponsor.",
        "I know that it rains.",
        "She managed to leave.",
        "He pretended to sleep.",
        "They forgot to call.",
    ]
    hyps = ["Nike was a sponsor.", "It rains.", "She left.", "He slept.", "They called."]
    out = score_nli(model, tok, premises, hyps, batch_size=2, device="cpu")
    assert list(out.columns) == ["p_entailment", "p_neutral", "p_contradiction"]
    assert out.shape == (5, 3)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-5)
    # the columns follow the label names, not the positions
    with torch.inference_mode():
        enc = tok(premises[:1], hyps[:1], return_tensors="pt")
        probs = torch.softmax(model(**enc).logits, -1)[0].numpy()
    assert out.iloc[0]["p_contradiction"] == pytest.approx(probs[0], abs=1e-5)
    assert out.iloc[0]["p_entailment"] == pytest.approx(probs[1], abs=1e-5)
    assert out.iloc[0]["p_neutral"] == pytest.approx(probs[2], abs=1e-5)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_score_nli_stops_on_nonfinite_weights(uncased_tokenizer: Path, value: float) -> None:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(uncased_tokenizer)
    torch.manual_seed(0)
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=tok.vocab_size,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            num_labels=3,
            id2label={0: "contradiction", 1: "entailment", 2: "neutral"},
        )
    )
    with torch.no_grad():
        model.classifier.weight[1, 0] = value
    with pytest.raises(
        VerbevalError,
        match=r"2 of 2 premise/hypothesis pairs have non-finite NLI probabilities "
        r"\(the first: 'Nike declined to be a sponsor.' / 'Nike was a sponsor.'\)",
    ):
        score_nli(
            model,
            tok,
            ["Nike declined to be a sponsor.", "She managed to leave."],
            ["Nike was a sponsor.", "She left."],
            batch_size=1,
            device="cpu",
        )


def test_pseudo_model_on_the_mirror(data: Path) -> None:
    data = read_dataset(data)
    assert len(data) == 1498
    preds = pseudo_model_predictions(data)
    assert len(preds) == 2996
    assert list(preds.columns) == PREDICTION_COLUMNS
    t = signature_table(preds).set_index(["signature", "environment"])
    assert t.loc[("overall", "positive"), "n"] == 1498
    assert t.loc[("o/o", "positive"), "n"] == 935
    assert t.loc[("+/+", "positive"), "n"] == 212
    assert t.loc[("overall", "positive"), "accuracy"] == pytest.approx(0.335113, abs=1e-6)
    assert t.loc[("overall", "negative"), "accuracy"] == pytest.approx(0.339119, abs=1e-6)
    assert t.loc[("overall", "positive"), "pearson"] == pytest.approx(0.634297, abs=1e-6)
    assert t.loc[("overall", "negative"), "pearson"] == pytest.approx(0.565576, abs=1e-6)


def test_read_dataset_names_file_and_line(tmp_path: Path, data: Path) -> None:
    lines = data.read_text().splitlines()[:4]
    bad = lines[3].split("\t")
    bad[-1] = "x/+"
    lines[3] = "\t".join(bad)
    p = tmp_path / "v.tsv"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"v\.tsv:4: bad signature"):
        read_dataset(p)


def test_scatter_data_and_facets() -> None:
    from verbeval.veridicality.report import plot_scatter, scatter_data

    preds = _preds()
    other = preds.copy()
    other["signature"] = "o/o"
    other["index"] += 10
    both = pd.concat([other, preds], ignore_index=True)
    pts = scatter_data(both)
    assert list(pts.columns) == ["index", "verb", "signature", "environment", "human_mean", "score"]
    # sorted by signature, environment (positive first), index
    assert pts["signature"].tolist() == ["+/-"] * 6 + ["o/o"] * 6
    assert pts["environment"].tolist()[:6] == ["positive"] * 3 + ["negative"] * 3
    assert pts["score"].tolist()[:3] == pytest.approx([0.7, 0.5, -0.3])
    fig = plot_scatter(both, "toy")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["+/-  (n=3)", "o/o  (n=3)"]  # one panel per signature
    assert [len(c.get_offsets()) for c in visible[0].collections] == [3, 3]  # positive, negative


def test_tiny_nli_model_labels_by_name(tmp_path: Path, tokenizer_path: Callable[[str], Path]) -> None:
    from verbeval.core.tiny_models import TINY_NLI_LABELS, make_tiny_model
    from verbeval.veridicality.predict import load_nli

    out = make_tiny_model(tokenizer_path("bert-base-uncased"), "bert-nli", tmp_path / "nli")
    model, tok, device = load_nli(str(out), device="cpu")
    assert dict(model.config.id2label) == TINY_NLI_LABELS
    assert label_index(model.config) == {"contradiction": 0, "entailment": 1, "neutral": 2}
    probs = score_nli(model, tok, ["Nike declined to be a sponsor."], ["Nike was a sponsor."], device=device)
    assert probs.shape == (1, 3) and probs.iloc[0].sum() == pytest.approx(1.0, abs=1e-6)


def test_load_nli_refuses_positional_labels(tmp_path: Path, uncased_tokenizer: Path) -> None:
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from verbeval.veridicality.predict import load_nli

    tok = AutoTokenizer.from_pretrained(uncased_tokenizer)
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=tok.vocab_size,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            num_labels=3,
        )
    )
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(VerbevalError, match="positional"):
        load_nli(str(tmp_path), device="cpu")


def test_scatter_jitter_is_deterministic_per_item_and_drawing_only() -> None:
    from verbeval.veridicality.report import SCATTER_JITTER, plot_scatter, scatter_data, scatter_jitter

    preds = _preds()
    pts = scatter_data(preds)
    before = pts.copy()
    dx, dy = scatter_jitter(pts)
    assert (np.abs(dx) <= SCATTER_JITTER[0]).all() and (np.abs(dy) <= SCATTER_JITTER[1]).all()
    assert len(set(np.round(dx, 12))) == len(pts)  # every point moves differently
    again = scatter_jitter(pts)
    np.testing.assert_array_equal(again[0], dx)
    np.testing.assert_array_equal(again[1], dy)
    # the offset belongs to (item, environment): the same after reordering or dropping other rows
    rev = scatter_jitter(pts.iloc[::-1])
    np.testing.assert_array_equal(rev[0][::-1], dx)
    sub = scatter_jitter(pts.iloc[[4]])
    assert sub[0][0] == dx[4] and sub[1][0] == dy[4]
    # another seed, other offsets
    assert not np.allclose(scatter_jitter(pts, seed=1)[0], dx)
    pd.testing.assert_frame_equal(pts, before)  # the data (the CSV) is untouched
    # the drawn points are the data plus exactly these offsets
    fig = plot_scatter(preds, "toy")
    ax = fig.axes[0]
    drawn = {c.get_label(): np.asarray(c.get_offsets()) for c in ax.collections}
    for env in ("positive", "negative"):
        sel = (pts["environment"] == env).to_numpy()
        np.testing.assert_allclose(drawn[env][:, 0] - dx[sel], pts.loc[sel, "human_mean"], atol=1e-12)
        np.testing.assert_allclose(drawn[env][:, 1] - dy[sel], pts.loc[sel, "score"], atol=1e-12)
    assert all(c.get_alpha() < 1 for c in ax.collections)


def test_scatter_draws_the_smaller_class_on_top() -> None:
    from verbeval.veridicality.report import draw_order, plot_scatter

    preds = _preds()
    assert draw_order(preds) == ["positive", "negative"]  # equal: fixed order, negative on top
    fewer_pos = preds.drop(index=[0, 1])  # 1 positive, 3 negative
    assert draw_order(fewer_pos) == ["negative", "positive"]
    assert draw_order(preds[preds["environment"] == "negative"]) == ["negative"]
    ax = plot_scatter(fewer_pos, "toy").axes[0]
    z = {c.get_label(): c.get_zorder() for c in ax.collections}
    assert z["positive"] > z["negative"]

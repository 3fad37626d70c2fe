"""Counterfactual manipulations of the veridicality data: hand-picked sentences, seeded choices, KL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from verbeval.veridicality.counterfactual import PAIR_COLUMNS, build_pairs, coverage
from verbeval.veridicality.kl_tables import attach_kl, kl_divergence, kl_markdown, table7, table8
from verbeval.veridicality.sentence_edits import (
    Unhandled,
    context_tag,
    replace_complement_verb,
    replace_main_verb,
    that_to,
    to_that,
    tokens,
)

#: the Ross & Pavlick data file inside a data mirror (the ``data_dir`` fixture)
DATA_IN_MIRROR = (
    "github.com/alexisjihyeross/verb_veridicality/raw/"
    "981c35b0402083e0562e221d8078aa4ea88e327f/verb_veridicality_evaluation.tsv"
)


@pytest.fixture()
def data(data_dir: Path) -> Path:
    return data_dir / DATA_IN_MIRROR


@pytest.mark.parametrize(
    "sentence, lemma, index, tag",
    [
        ("Nike declined to be a sponsor.", "decline", 1, "VBD"),
        ("Nike did not decline to be a sponsor.", "decline", 3, "VB"),
        ("Authorities have moved to protect it.", "move", 2, "VBN"),
        ("It was implied that it rained.", "imply", 2, "VBN"),
        ("She knows that it rains.", "know", 1, "VBZ"),
        ("People wishing to get lessons came.", "wish", 1, "VBG"),
        ("They want to leave.", "want", 1, "VBP"),
    ],
)
def test_context_tag(sentence: str, lemma: str, index: int, tag: str) -> None:
    assert context_tag(tokens(sentence), index, lemma) == tag


@pytest.mark.parametrize(
    "premise, lemma, task, new, expected",
    [
        ("Nike declined to be a sponsor.", "decline", "to", "refuse", "Nike refused to be a sponsor."),
        ("Nike did not decline to be a sponsor.", "decline", "to", "manage", "Nike did not manage to be a sponsor."),
        (
            "Authorities have moved to protect the areas.",
            "move",
            "to",
            "try",
            "Authorities have tried to protect the areas.",
        ),
        (
            "People wishing to get lessons have the chance.",
            "wish",
            "to",
            "hope",
            "People hoping to get lessons have the chance.",
        ),
        (
            "It was implied that there was an increase.",
            "imply",
            "that",
            "know",
            "It was known that there was an increase.",
        ),
        ("She knows that it rains.", "know", "that", "think", "She thinks that it rains."),
        ("He tried to stop the car.", "try", "to", "strive", "He strove to stop the car."),
        ("Deciding that it rained, Ann stayed.", "decide", "that", "say", "Saying that it rained, Ann stayed."),
    ],
)
def test_replace_main_verb_keeps_the_form(premise: str, lemma: str, task: str, new: str, expected: str) -> None:
    out, old = replace_main_verb(premise, lemma, task, new)
    assert out == expected
    assert old.lower() in premise.lower()


def test_replace_main_verb_needs_the_complementizer_right_after() -> None:
    with pytest.raises(Unhandled, match="directly followed by 'to'"):
        replace_main_verb("Nike declined, to be fair.", "decline", "to", "refuse")


@pytest.mark.parametrize(
    "premise, hypothesis, lemma, task, new, expected",
    [
        (
            "He tried to stop the car.",
            "He stopped the car.",
            "try",
            "to",
            "drive",
            ("He tried to drive the car.", "He drove the car.", "stopped"),
        ),
        (
            "People wishing to get lessons have the chance.",
            "People getting lessons have the chance.",
            "wish",
            "to",
            "take",
            ("People wishing to take lessons have the chance.", "People taking lessons have the chance.", "getting"),
        ),
        (
            "Poirot decided that Miss Howard must be kept in the dark.",
            "Miss howard must be kept in the dark.",
            "decide",
            "that",
            "hide",
            (
                "Poirot decided that Miss Howard must be hidden in the dark.",
                "Miss howard must be hidden in the dark.",
                "kept",
            ),
        ),
        ("I know that it rains.", "It rains.", "know", "that", "snow", ("I know that it snows.", "It snows.", "rains")),
        (
            "The doctor believed that the theory was correct.",
            "The theory was correct.",
            "believe",
            "that",
            "seem",
            ("The doctor believed that the theory seemed correct.", "The theory seemed correct.", "was"),
        ),
    ],
)
def test_replace_complement_verb_in_premise_and_hypothesis(
    premise: str, hypothesis: str, lemma: str, task: str, new: str, expected: tuple[str, str, str]
) -> None:
    assert replace_complement_verb(premise, hypothesis, lemma, task, new) == expected


def test_complement_verb_unhandled_cases() -> None:
    with pytest.raises(Unhandled, match="negated clause"):
        replace_complement_verb("He knew that it was not true.", "It was not true.", "know", "that", "seem")
    with pytest.raises(Unhandled, match="no form of the complement verb"):
        replace_complement_verb("He tried to stop the car.", "The car halted.", "try", "to", "drive")


@pytest.mark.parametrize(
    "premise, hypothesis, lemma, expected",
    [
        ("He tried to stop the car.", "He stopped the car.", "try", "He tried that he stopped the car."),
        ("He did not try to stop the car.", "He stopped the car.", "try", "He did not try that he stopped the car."),
        ("Nike declined to be a sponsor.", "Nike was a sponsor.", "decline", "Nike declined that Nike was a sponsor."),
    ],
)
def test_to_that(premise: str, hypothesis: str, lemma: str, expected: str) -> None:
    assert to_that(premise, hypothesis, lemma) == expected


def test_to_that_unhandled() -> None:
    with pytest.raises(Unhandled, match="does not start with the main verb's subject"):
        to_that(
            "When Edinburgh ceased to be a capital, people left.", "When edinburgh was a capital, people left.", "cease"
        )
    with pytest.raises(Unhandled, match="participle"):
        to_that("My brain refusing to command properly.", "My brain not commanding properly.", "refuse")
    with pytest.raises(Unhandled, match="subordinate or relative clause"):
        to_that("There are rules that aimed to modify it.", "There are rules that modified it.", "aim")


@pytest.mark.parametrize(
    "premise, hypothesis, lemma, expected",
    [
        (
            "The doctor believed that the theory was correct.",
            "The theory was correct.",
            "believe",
            "The doctor believed the theory to be correct.",
        ),
        ("I know that he left.", "He left.", "know", "I know him to leave."),
        (
            "Poirot decided that Miss Howard must be kept in the dark.",
            "Miss howard must be kept in the dark.",
            "decide",
            "Poirot decided Miss Howard to be kept in the dark.",
        ),
        (
            "She said that they had already left.",
            "They had already left.",
            "say",
            "She said them to have already left.",
        ),
        ("He said that Mary did leave.", "Mary did leave.", "say", "He said Mary to leave."),
    ],
)
def test_that_to(premise: str, hypothesis: str, lemma: str, expected: str) -> None:
    assert that_to(premise, hypothesis, lemma) == expected


def _toy() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "index": [0, 1, 2, 3],
            "task": ["to", "to", "to", "that"],
            "verb": ["decline", "manage", "try", "know"],
            "sentence": [
                "Nike declined to be a sponsor.",
                "She managed to leave.",
                "He tried to stop the car.",
                "She knows that it rains.",
            ],
            "neg_sentence": [
                "Nike did not decline to be a sponsor.",
                "She did not manage to leave.",
                "He did not try to stop the car.",
                "She does not know that it rains.",
            ],
            "complement": ["Nike was a sponsor.", "She left.", "He stopped the car.", "It rains."],
            "signature": ["-/o", "+/-", "o/o", "+/+"],
        }
    )


def test_build_pairs_is_seeded_and_complete() -> None:
    pairs, unhandled = build_pairs(_toy(), samples=1, seed=0)
    again, _ = build_pairs(_toy(), samples=1, seed=0)
    pd.testing.assert_frame_equal(pairs, again)
    assert list(pairs.columns) == PAIR_COLUMNS
    # pools: to = [decline, manage, try], that = [know], complement = [leave, stop] (be is excluded)
    # the that-item has no other that-verb to take its place: unhandled in both environments
    un = unhandled.groupby(["manipulation", "index"]).size().to_dict()
    assert un == {("main_verb_matched", 3): 2}
    cv = pairs[pairs["manipulation"] == "complement_verb"].set_index(["index", "environment"])
    assert cv.loc[(1, "positive"), "premise"] == "She managed to stop."
    assert cv.loc[(1, "positive"), "hypothesis"] == "She stopped."
    assert cv.loc[(2, "negative"), "premise"] == "He did not try to leave the car."
    assert cv.loc[(2, "negative"), "hypothesis"] == "He left the car."
    mm = pairs[(pairs["manipulation"] == "main_verb_mismatched") & (pairs["index"] == 0)].set_index("environment")
    assert set(mm["replacement"]) == {"know"}  # the only that-verb
    assert mm.loc["positive", "premise"] == "Nike knew to be a sponsor."
    assert mm.loc["negative", "premise"] == "Nike did not know to be a sponsor."
    m = pairs[pairs["manipulation"] == "main_verb_matched"]
    assert (m["replacement"] != m["verb"]).all()
    # the same replacement verb in both environments of an item
    assert (m.groupby("index")["replacement"].nunique() == 1).all()
    sw = pairs[pairs["manipulation"] == "that_to"].set_index("environment")
    assert sw.loc["negative", "premise"] == "She does not know it to rain."
    assert (sw["hypothesis"] == "It rains.").all()
    # a different seed may choose other verbs, but never the original
    other, _ = build_pairs(_toy(), samples=2, seed=1)
    m2 = other[other["manipulation"] == "main_verb_matched"]
    assert (m2.groupby(["index", "environment"]).size() == 2).all()
    assert (m2["replacement"] != m2["verb"]).all()


def test_build_pairs_reports_unhandled() -> None:
    data = _toy()
    data.loc[0, "sentence"] = "Nike declined, to be fair, a sponsor."
    pairs, unhandled = build_pairs(data, samples=1, seed=0)
    bad = unhandled[unhandled["index"] == 0]
    assert set(bad["environment"]) == {"positive"}
    assert set(bad["manipulation"]) == {"main_verb_matched", "main_verb_mismatched", "complement_verb", "to_that"}
    assert bad["reason"].str.contains("directly followed by 'to'").all()
    cov = coverage(data, pairs, unhandled).set_index(["manipulation", "environment"])
    assert cov.loc[("to_that", "positive")].tolist() == [3, 2, 1]
    assert cov.loc[("to_that", "negative")].tolist() == [3, 3, 0]


def test_kl_divergence_hand_computed() -> None:
    p = np.array([[0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3]])
    q = np.array([[0.25, 0.25, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    kl = kl_divergence(p, q)
    # 0.5 ln 2 + 0.25 ln 0.5 = 0.25 ln 2
    assert kl[0] == pytest.approx(0.25 * np.log(2), abs=1e-12)
    assert kl[1] == pytest.approx(0.0, abs=1e-12)


def test_kl_tables() -> None:
    orig = pd.DataFrame(
        {
            "index": [0, 0, 1, 1],
            "environment": ["positive", "negative"] * 2,
            "p_entailment": [0.5, 0.2, 0.6, 0.1],
            "p_neutral": [0.25, 0.6, 0.2, 0.1],
            "p_contradiction": [0.25, 0.2, 0.2, 0.8],
        }
    )
    man = pd.DataFrame(
        {
            "manipulation": ["main_verb_matched", "main_verb_matched", "to_that", "that_to"],
            "index": [0, 1, 0, 1],
            "task": ["to", "that", "to", "that"],
            "signature": ["-/o", "+/+", "-/o", "+/+"],
            "environment": ["positive"] * 4,
            "p_entailment": [0.25, 0.6, 0.5, 0.2],
            "p_neutral": [0.25, 0.2, 0.25, 0.2],
            "p_contradiction": [0.5, 0.2, 0.25, 0.6],
        }
    )
    scored = attach_kl(orig, man)
    assert scored["kl"].tolist() == pytest.approx([0.25 * np.log(2), 0.0, 0.0, 0.6 * np.log(3) + 0.2 * np.log(1 / 3)])
    t7 = table7(scored).set_index(["manipulation", "task", "environment"])
    assert t7.loc[("main_verb_matched", "all", "positive"), "n"] == 2
    assert t7.loc[("main_verb_matched", "all", "positive"), "mean_kl"] == pytest.approx(0.125 * np.log(2))
    assert t7.loc[("main_verb_matched", "to", "positive"), "median_kl"] == pytest.approx(0.25 * np.log(2))
    assert t7.loc[("main_verb_matched", "all", "negative"), "n"] == 0
    assert np.isnan(t7.loc[("complement_verb", "all", "negative"), "mean_kl"])
    t8 = table8(scored).set_index(["direction", "signature", "environment"])
    assert t8.loc[("that_to", "+/+", "positive"), "mean_kl"] == pytest.approx(0.4 * np.log(3))
    assert t8.loc[("that_to", "overall", "positive"), "n"] == 1
    assert t8.loc[("to_that", "overall", "positive"), "mean_kl"] == pytest.approx(0.0)
    md = kl_markdown(t8.reset_index(), "Table 8")
    assert "| that_to | +/+ | positive | 1 | 0.4394 | 0.4394 |" in md


def test_coverage_on_the_mirror(data: Path) -> None:
    from verbeval.veridicality.data import read_dataset

    data = read_dataset(data)
    pairs, unhandled = build_pairs(data, samples=1, seed=0)
    cov = coverage(data, pairs, unhandled)
    assert (cov["handled"] + cov["unhandled"] == cov["items"]).all()
    # every handled pair differs from the original premise (or hypothesis)
    orig = data.set_index("index")
    for r in pairs.sample(200, random_state=0).itertuples():
        o = orig.loc[r.index]
        before = o["sentence"] if r.environment == "positive" else o["neg_sentence"]
        assert (r.premise, r.hypothesis) != (before, o["complement"])


def test_cli_end_to_end_on_a_slice(tmp_path: Path, tokenizer_path: Callable[[str], Path], data: Path) -> None:
    """veridicality-predict, -counterfactuals, -counterfactual-predict and -kl with a tiny NLI model
    on the first 12 items; the pseudo-model is refused by the counterfactual scorer."""
    from verbeval.cli import main

    lines = data.read_text().splitlines()
    data = tmp_path / "v.tsv"
    data.write_text("\n".join(lines[:13]) + "\n")
    model = tmp_path / "tiny-nli"
    assert (
        main(
            [
                "-q",
                "tiny-model",
                "--tokenizer",
                str(tokenizer_path("bert-base-uncased")),
                "--arch",
                "bert-nli",
                "--out",
                str(model),
            ]
        )
        == 0
    )
    t = tmp_path
    assert (
        main(
            [
                "-q",
                "veridicality-predict",
                "--data",
                str(data),
                "--model",
                str(model),
                "--device",
                "cpu",
                "--threads",
                "1",
                "--out",
                str(t / "pred.parquet"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "veridicality-counterfactuals",
                "--data",
                str(data),
                "--pairs",
                str(t / "pairs.parquet"),
                "--unhandled",
                str(t / "un.csv"),
                "--coverage",
                str(t / "cov.csv"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "veridicality-counterfactual-predict",
                "--pairs",
                str(t / "pairs.parquet"),
                "--model",
                str(model),
                "--device",
                "cpu",
                "--threads",
                "1",
                "--out",
                str(t / "cf.parquet"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "veridicality-counterfactual-predict",
                "--pairs",
                str(t / "pairs.parquet"),
                "--model",
                "ross-pavlick-2019-bert",
                "--out",
                str(t / "x.parquet"),
            ]
        )
        == 1
    )
    assert (
        main(
            [
                "-q",
                "veridicality-kl",
                "--predictions",
                str(t / "pred.parquet"),
                "--counterfactuals",
                str(t / "cf.parquet"),
                "--model-name",
                "tiny",
                "--table7",
                str(t / "t7.csv"),
                str(t / "t7.md"),
                str(t / "t7.tex"),
                "--table8",
                str(t / "t8.csv"),
                str(t / "t8.md"),
                str(t / "t8.tex"),
            ]
        )
        == 0
    )
    # the tiny model (verbeval_tiny.json) is labelled in the KL and signature tables; the pseudo-model is not
    assert "Table 7 (KL, verb replacements), tiny (random init)" in (t / "t7.md").read_text()
    assert (
        main(
            [
                "-q",
                "veridicality-table",
                "--predictions",
                str(t / "pred.parquet"),
                "--model-name",
                "tiny",
                "--csv",
                str(t / "s.csv"),
                "--md",
                str(t / "s.md"),
                "--tex",
                str(t / "s.tex"),
                "--scatter-csv",
                str(t / "sc.csv"),
            ]
        )
        == 0
    )
    assert (t / "s.md").read_text().startswith("Verb veridicality, tiny (random init)")
    for name in ("s.csv", "sc.csv", "t7.csv", "t8.csv"):  # and every data file, in its last column
        got = pd.read_csv(t / name)
        assert got.columns[-1] == "random_init" and got["random_init"].tolist() == [True] * len(got), name
    assert (
        main(
            [
                "-q",
                "veridicality-predict",
                "--data",
                str(data),
                "--model",
                "ross-pavlick-2019-bert",
                "--out",
                str(t / "rp.parquet"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "veridicality-table",
                "--predictions",
                str(t / "rp.parquet"),
                "--model-name",
                "rp",
                "--csv",
                str(t / "s.csv"),
                "--md",
                str(t / "s.md"),
                "--tex",
                str(t / "s.tex"),
            ]
        )
        == 0
    )
    assert (t / "s.md").read_text().startswith("Verb veridicality, rp\n")
    assert not pd.read_csv(t / "s.csv")["random_init"].any()
    pairs = pd.read_parquet(t / "pairs.parquet")
    cf = pd.read_parquet(t / "cf.parquet")
    assert len(cf) == len(pairs) and np.allclose(cf[["p_entailment", "p_neutral", "p_contradiction"]].sum(axis=1), 1)
    cov = pd.read_csv(t / "cov.csv")
    assert (cov["handled"] + cov["unhandled"] == cov["items"]).all()
    t7 = pd.read_csv(t / "t7.csv")
    assert list(t7.columns) == ["manipulation", "task", "environment", "n", "mean_kl", "median_kl", "random_init"]
    assert len(t7) == 3 * 3 * 2
    all7 = t7[t7["task"] == "all"].set_index(["manipulation", "environment"])
    counts = pairs.groupby(["manipulation", "environment"]).size()
    for key in all7.index:
        assert all7.loc[key, "n"] == counts.get(key, 0)
    assert (t7["mean_kl"].dropna() >= 0).all()
    t8 = pd.read_csv(t / "t8.csv")
    assert set(t8["direction"]) == {"to_that", "that_to"}
    # reruns are byte-identical
    before = {p.name: p.read_bytes() for p in (t / "t7.csv", t / "t8.csv", t / "un.csv")}
    assert (
        main(
            [
                "-q",
                "veridicality-counterfactuals",
                "--data",
                str(data),
                "--pairs",
                str(t / "pairs.parquet"),
                "--unhandled",
                str(t / "un.csv"),
                "--coverage",
                str(t / "cov.csv"),
            ]
        )
        == 0
    )
    assert (t / "un.csv").read_bytes() == before["un.csv"]

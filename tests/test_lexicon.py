"""Tests for verbeval.agreement.data.lexicon: inflection, overrides, the combined csv, the union lexicon."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from verbeval.agreement.data.lexicon import (
    DEFAULT_OVERRIDES_PATH,
    LEXICON_COLUMNS,
    build_lexicon,
    inflect,
    inflect_lemmas,
    load_overrides,
    read_verb_csv,
)
from verbeval.core.errors import InputError

REPO_ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = REPO_ROOT / "resources" / "inflection_overrides.csv"
TSE_COMMIT = "db423f80246ba2d7c2fc602fc514943949cfaf71"


def verb_csv(data_dir: Path) -> Path:
    return (
        data_dir
        / "github.com"
        / "bnewm0609"
        / "refining-tse"
        / "raw"
        / TSE_COMMIT
        / "data"
        / "verbs"
        / "combined_verb_list.csv"
    )


def giant_verbs(data_dir: Path) -> list[str]:
    """The Giant Verb List lemmas: first word of each line (later words are PDF footnote marks)."""
    text = (data_dir / "giant-verb-list" / "giant-verb-list-3250.txt").read_text(encoding="utf-8")
    return [line.split()[0] for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------- inflect


@pytest.mark.parametrize(
    ("lemma", "forms"),
    [
        ("run", ("runs", "run")),
        ("be", ("is", "are")),
        ("have", ("has", "have")),
        ("do", ("does", "do")),
        ("go", ("goes", "go")),
        ("try", ("tries", "try")),
        ("bus", ("buses", "bus")),
        ("quiz", ("quizzes", "quiz")),
        ("fizz", ("fizzes", "fizz")),
        ("wish", ("wishes", "wish")),
        ("box", ("boxes", "box")),
        ("focus", ("focuses", "focus")),
        ("veto", ("vetoes", "veto")),
        ("say", ("says", "say")),
        ("x-ray", ("x-rays", "x-ray")),  # out of lemminflect's vocabulary: no VBP, plural = lemma
        ("dare", ("dares", "dare")),
    ],
)
def test_inflect(lemma: str, forms: tuple[str, str]) -> None:
    assert inflect(lemma) == forms


def test_overrides_file_fixes_real_lemminflect_mistakes() -> None:
    overrides = load_overrides(OVERRIDES)
    assert overrides == {
        "instill": ("instills", "instill"),
        "overeat": ("overeats", "overeat"),
        "proofread": ("proofreads", "proofread"),
        "torpedo": ("torpedoes", "torpedo"),
        "weave": ("weaves", "weave"),
    }
    # Each override is justified: lemminflect's own answer differs.
    assert inflect("instill") == ("instils", "instill")
    assert inflect("overeat") == ("over-eats", "overeat")
    assert inflect("proofread") == ("proof reads", "proofread")
    assert inflect("torpedo") == ("torpedo", "torpedo")
    assert inflect("weave") == ("weaves", "wove")
    for lemma, forms in overrides.items():
        assert inflect(lemma, overrides) == forms
    assert DEFAULT_OVERRIDES_PATH == OVERRIDES


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("lemma,sing,plur\nrun,runs,run\n", 1, "missing column"),
        ("lemma,sing,plur,reason\nrun,runs,run,ok\nrun,runz,run,again\n", 3, "duplicate override"),
        ("lemma,sing,plur,reason\nrun,run s,run,bad\n", 2, "invalid verb form"),
        ("lemma,sing,plur,reason\nrun,runs,run,\n", 2, "no reason"),
    ],
)
def test_load_overrides_errors(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "o.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=reason) as info:
        load_overrides(path)
    assert info.value.line == line


# --------------------------------------------------------------------------- the combined csv


def test_read_verb_csv_real(data_dir: Path) -> None:
    df = read_verb_csv(verb_csv(data_dir))
    assert len(df) == 1951
    # idx is "_" on every row: keying by it would give one lemma; keyed by forms, all are distinct
    assert pd.read_csv(verb_csv(data_dir))["idx"].unique().tolist() == ["_"]
    assert df["lemma"].nunique() == 1951
    assert (df["lemma"] == df["plur"]).all()
    assert df.iloc[0].tolist() == ["abandon", "abandons", "abandon"]
    by_lemma = df.set_index("lemma")["sing"]
    # Surprises of the published list, kept as published:
    assert by_lemma["are"] == "is" and by_lemma["were"] == "was"  # be appears as are and were
    assert by_lemma["have"] == "haves"  # not "has"
    assert by_lemma["quiz"] == "quizes" and by_lemma["woo"] == "wooes" and by_lemma["stomach"] == "stomaches"
    assert by_lemma["fine-tune"] == "fine-tunines"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("idx,sing,plur,freq\n_,runs,run,_\n_,,walk,_\n", 3, "empty form"),
        ("idx,sing,plur,freq\n_,runs,run,_\n_,walk s,walk,_\n", 3, "invalid verb form"),
        ("idx,sing,plur,freq\n_,runs,runs,_\n", 2, "both 'runs'"),
        ("idx,sing,freq\n_,runs,_\n", 1, "missing column"),
        ("idx,sing,plur,freq\n_,runs,run,_,extra\n", 2, "more fields"),
    ],
)
def test_read_verb_csv_errors(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "v.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=reason) as info:
        read_verb_csv(path)
    assert info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_inflect_lemmas_dedupes_and_validates() -> None:
    df = inflect_lemmas(["run", "walk", "run", " be "])
    assert df.values.tolist() == [["run", "runs", "run"], ["walk", "walks", "walk"], ["be", "is", "are"]]
    with pytest.raises(InputError, match="entry 2: empty form"):
        inflect_lemmas(["run", ""])
    with pytest.raises(InputError, match="entry 1: invalid verb form"):
        inflect_lemmas(["agree 1 RB"])


# --------------------------------------------------------------------------- build_lexicon


def test_build_lexicon_sizes_real(data_dir: Path) -> None:
    combined = build_lexicon(verb_csv(data_dir), None, OVERRIDES)
    giant = build_lexicon(None, giant_verbs(data_dir), OVERRIDES)
    union = build_lexicon(verb_csv(data_dir), giant_verbs(data_dir), OVERRIDES)
    assert list(union.columns) == list(LEXICON_COLUMNS)
    assert (len(combined), len(giant), len(union)) == (1951, 3250, 3557)
    assert set(combined["source"]) == {"combined"} and set(giant["source"]) == {"giant"}
    assert union["source"].value_counts().to_dict() == {"both": 1644, "giant": 1606, "combined": 307}
    assert union["lemma"].nunique() == 3555  # quiz and woo have two rows (csv typos)
    assert not union.duplicated(["sing", "plur"]).any()
    assert union.equals(union.sort_values(["lemma", "sing", "plur"]).reset_index(drop=True))
    rows = {r.lemma + ":" + r.sing: r.source for r in union.itertuples()}
    assert rows["be:is"] == "both"  # the csv's is/are (lemma "are") merges with giant's be
    assert "are:is" not in rows
    assert rows["were:was"] == "combined"
    assert rows["quiz:quizes"] == "combined" and rows["quiz:quizzes"] == "giant"
    assert rows["instill:instills"] == "both"  # only with the override (lemminflect: instils)
    assert rows["weave:weaves"] == "giant"
    assert union.loc[union["lemma"] == "weave", "plur"].tolist() == ["weave"]
    no_overrides = build_lexicon(verb_csv(data_dir), giant_verbs(data_dir), None)
    assert len(no_overrides) == 3558  # instils/instill and instills/instill both survive


def test_build_lexicon_synthetic(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("idx,sing,plur,freq\n_,walks,walk,_\n_,is,are,_\n_,quizes,quiz,_\n", encoding="utf-8")
    lex = build_lexicon(path, ["run", "be", "walk", "quiz"])
    assert lex.values.tolist() == [
        ["be", "is", "are", "both"],
        ["quiz", "quizes", "quiz", "combined"],
        ["quiz", "quizzes", "quiz", "giant"],
        ["run", "runs", "run", "giant"],
        ["walk", "walks", "walk", "both"],
    ]
    assert lex.index.tolist() == list(range(5))
    with pytest.raises(ValueError):
        build_lexicon(None, None)

"""Tests for the agreement templates (minimal_pairs, template_files, groups, errata, templates): minimal pairs,
number derivation, reading, subsampling, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from verbeval.agreement.data.groups import load_groups
from verbeval.agreement.data.minimal_pairs import Number, derive_number, split_minimal_pair
from verbeval.agreement.data.template_files import ML_LABELS, REJECT_COLUMNS, TEMPLATE_COLUMNS, read_template_file
from verbeval.agreement.data.templates import build_template_table, render_context, subsample
from verbeval.core.errors import InputError, VerbevalError

REPO_ROOT = Path(__file__).resolve().parent.parent
GROUPS_YAML = REPO_ROOT / "resources" / "agreement_groups.yaml"
TSE_COMMIT = "db423f80246ba2d7c2fc602fc514943949cfaf71"
BLIMP_COMMIT = "3e56b06fcabca9b30822fc66435fca6b1aa40bb1"
BLIMP_SETS = (
    "distractor_agreement_relational_noun",
    "distractor_agreement_relative_clause",
    "irregular_plural_subject_verb_agreement_1",
    "regular_plural_subject_verb_agreement_1",
)


def tse_dir(data_dir: Path) -> Path:
    return data_dir / "github.com" / "bnewm0609" / "refining-tse" / "raw" / TSE_COMMIT / "data"


def blimp_dir(data_dir: Path) -> Path:
    return data_dir / "github.com" / "alexwarstadt" / "blimp" / "raw" / BLIMP_COMMIT / "data"


def real_inputs(data_dir: Path) -> dict[str, tuple[Path, str]]:
    """Source name -> (path, format) for every template source, as the manifest names them."""
    inputs: dict[str, tuple[Path, str]] = {}
    for path in sorted((tse_dir(data_dir) / "ML").glob("*_all.jsonl")):
        inputs["ml_" + path.stem.removesuffix("_all")] = (path, "ml_jsonl")
    for uid in BLIMP_SETS:
        inputs["blimp_" + uid] = (blimp_dir(data_dir) / f"{uid}.jsonl", "blimp_jsonl")
    # the paper's copy of distractor_agreement_relative_clause (a different sample of 1,000 pairs)
    inputs["blimp_distractor_agreement_relative_clause_paper"] = (
        tse_dir(data_dir) / "blimp" / "distractor_agreement_relative_clause.jsonl",
        "blimp_jsonl",
    )
    return inputs


def write_jsonl(path: Path, rows: list[object | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- split_minimal_pair


def test_split_minimal_pair_verb_last_without_period() -> None:
    assert split_minimal_pair("the authors laugh", "the authors laughs") == ("the authors", "", "laugh", "laughs")


def test_split_minimal_pair_strips_final_period_and_keeps_right_context() -> None:
    good = "The authors that the guards like are tall."
    bad = "The authors that the guards like is tall."
    assert split_minimal_pair(good, bad) == ("The authors that the guards like", "tall", "are", "is")


def test_split_minimal_pair_period_on_the_verb_and_contraction() -> None:
    assert split_minimal_pair("Some dogs appear.", "Some dogs appears.") == ("Some dogs", "", "appear", "appears")
    assert split_minimal_pair(
        "A niece of most senators hasn't descended most slopes.",
        "A niece of most senators haven't descended most slopes.",
    ) == ("A niece of most senators", "descended most slopes", "hasn't", "haven't")


def test_split_minimal_pair_detached_period_and_punctuation_kept_in_context() -> None:
    assert split_minimal_pair("the dogs run .", "the dogs runs .") == ("the dogs", "", "run", "runs")
    assert split_minimal_pair("the dogs run, and bark", "the dogs runs, and bark") == (
        "the dogs",
        ", and bark",
        "run",
        "runs",
    )


@pytest.mark.parametrize(
    ("good", "bad", "reason"),
    [
        ("the authors laugh", "the authors laugh", "identical"),
        ("the authors laugh.", "the authors laugh", "identical"),
        ("the author laughs", "the authors laugh", "more than one word"),
        ("the authors laugh", "the authors do laugh", "different lengths"),
        ("the dogs run,", "the dogs runs.", "punctuation"),
        ("", "", "empty"),
    ],
)
def test_split_minimal_pair_rejects(good: str, bad: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        split_minimal_pair(good, bad)


# --------------------------------------------------------------------------- derive_number


@pytest.mark.parametrize(
    ("correct", "incorrect", "number"),
    [
        ("is", "are", "singular"),
        ("are", "is", "plural"),
        ("was", "were", "singular"),
        ("were", "was", "plural"),
        ("am", "are", "singular"),
        ("was", "are", "singular"),
        ("weren't", "isn't", "plural"),  # tense differs in BLiMP
        ("isn't", "aren't", "singular"),
        ("wasn't", "weren't", "singular"),
        ("aren't", "isn't", "plural"),
        ("has", "have", "singular"),
        ("haven't", "hasn't", "plural"),
        ("hasn't", "haven't", "singular"),
        ("does", "do", "singular"),
        ("don't", "doesn't", "plural"),
        ("doesn't", "don't", "singular"),
        ("runs", "run", "singular"),
        ("laugh", "laughs", "plural"),
        ("tries", "try", "singular"),
        ("worry", "worries", "plural"),
        ("goes", "go", "singular"),
        ("kisses", "kiss", "singular"),
        ("fixes", "fix", "singular"),
        ("bore", "bores", "plural"),  # bore is also the past of bear
        ("hurts", "hurt", "singular"),
        ("leaves", "leave", "singular"),
        ("Runs", "run", "singular"),
    ],
)
def test_derive_number(correct: str, incorrect: str, number: str) -> None:
    assert derive_number(correct, incorrect) == number


@pytest.mark.parametrize(
    ("correct", "incorrect", "reason"),
    [
        ("sing", "singing", "not a third-person-singular"),  # the bad row of BLiMP rel. clause
        ("is", "was", "both singular"),
        ("are", "were", "both plural"),
        ("is", "runs", "mixes an auxiliary"),
        ("runs", "runs", "identical"),
        ("ran", "run", "not a third-person-singular"),
        ("runs", "walk", "not a third-person-singular"),
    ],
)
def test_derive_number_undecidable(correct: str, incorrect: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        derive_number(correct, incorrect)


def test_derive_number_agrees_with_every_labelled_row_of_the_refining_tse_release(data_dir: Path) -> None:
    """All 4 x 1000 labelled BLiMP rows and all 121,220 Marvin & Linzen rows: 100% agreement.
    derive_number is a function of the verb pair alone, so each distinct (correct, incorrect) pair
    is derived once (a few hundred, not 125,220 lemminflect look-ups) and every row's label is
    compared with its pair's number."""
    counts: dict[str, int] = {}
    derived: dict[tuple[str, str], Number] = {}
    for path in sorted(tse_dir(data_dir).glob("*/*.jsonl")):
        n = 0
        for raw in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(raw)
            _, _, correct, incorrect = split_minimal_pair(obj["sentence_good"], obj["sentence_bad"])
            if (correct, incorrect) not in derived:
                derived[correct, incorrect] = derive_number(correct, incorrect)
            assert derived[correct, incorrect] == ML_LABELS[obj["label"]], raw
            n += 1
        counts[f"{path.parent.name}/{path.stem}"] = n
    assert {k: v for k, v in counts.items() if k.startswith("blimp/")} == {f"blimp/{s}": 1000 for s in BLIMP_SETS}
    assert sum(v for k, v in counts.items() if k.startswith("ML/")) == 121_220
    assert len(counts) == 19


def test_blimp_original_labels_match_refining_tse_by_sentence_good(data_dir: Path) -> None:
    """Rows of the original release matched by sentence_good to the labelled copies.

    Three sets match all 1000 rows. The labelled copy of distractor_agreement_relative_clause comes
    from an older BLiMP generation and shares no sentence with the original release (it is
    covered by the test above); the original has one non-agreement pair (line 822, sing/singing).
    """
    matched: dict[str, tuple[int, int]] = {}
    for uid in BLIMP_SETS:
        labelled = {}
        for raw in (tse_dir(data_dir) / "blimp" / f"{uid}.jsonl").read_text(encoding="utf-8").splitlines():
            obj = json.loads(raw)
            labelled[obj["sentence_good"]] = ML_LABELS[obj["label"]]
        path = blimp_dir(data_dir) / f"{uid}.jsonl"
        rows, rejects = read_template_file(path, "blimp_jsonl", f"blimp_{uid}", "blimp", skip_bad_rows=True)
        good = [json.loads(raw)["sentence_good"] for raw in path.read_text(encoding="utf-8").splitlines()]
        ref = pd.Series([labelled.get(good[i - 1]) for i in rows["line"]])
        hit = ref.notna()
        matched[uid] = (int(hit.sum()), int((rows["label"][hit.to_numpy()].to_numpy() == ref[hit].to_numpy()).sum()))
        if uid == "distractor_agreement_relative_clause":
            assert rejects["line"].tolist() == [822]
            assert "'sing'/'singing'" in rejects["reason"][0]
        else:
            assert rejects.empty
    assert matched == {
        "distractor_agreement_relational_noun": (1000, 1000),
        "distractor_agreement_relative_clause": (0, 0),
        "irregular_plural_subject_verb_agreement_1": (1000, 1000),
        "regular_plural_subject_verb_agreement_1": (1000, 1000),
    }


# --------------------------------------------------------------------------- read_template_file


def test_read_ml_file_real_simple_agrmt(data_dir: Path) -> None:
    rows, rejects = read_template_file(
        tse_dir(data_dir) / "ML" / "simple_agrmt_all.jsonl", "ml_jsonl", "ml_simple_agrmt", "simple"
    )
    assert list(rows.columns) == list(TEMPLATE_COLUMNS)
    assert list(rejects.columns) == list(REJECT_COLUMNS) and rejects.empty
    assert len(rows) == 140
    assert rows["label"].value_counts().to_dict() == {"plural": 70, "singular": 70}
    first = rows.iloc[0].to_dict()
    # "the authors laugh" carries label -2: -2 is plural.
    assert first == {
        "group": "simple",
        "source": "ml_simple_agrmt",
        "line": 1,
        "left": "the authors",
        "right": "",
        "correct": "laugh",
        "incorrect": "laughs",
        "label": "plural",
        "plural": True,
        "pair_id": "",
        "note": "",
        "subject_item": "author",
        "verb_item": "laugh",
    }
    assert rows.iloc[3][["left", "right", "correct", "incorrect"]].tolist() == ["the authors", "tall", "are", "is"]
    assert rows["line"].tolist() == list(range(1, 141))
    assert (rows["plural"] == (rows["label"] == "plural")).all()
    assert rows["line"].dtype == np.int64 and rows["plural"].dtype == bool


def test_read_template_file_bad_rows(tmp_path: Path) -> None:
    good = {"sentence_good": "the dogs run", "sentence_bad": "the dogs runs", "label": -2}
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            good,  # 1
            "{not json",  # 2
            {"sentence_good": "the dog runs", "label": -1},  # 3
            {"sentence_good": "the dog runs", "sentence_bad": "the dog runs", "label": -1},  # 4
            {"sentence_good": "the dog runs", "sentence_bad": "the dogs run", "label": -1},  # 5
            {"sentence_good": "the dog runs", "sentence_bad": "the dog run", "label": 1},  # 6
            "",  # 7 (blank, ignored)
            {"sentence_good": "The dog runs fast.", "sentence_bad": "The dog run fast.", "label": -1},  # 8
        ],
    )
    with pytest.raises(InputError) as info:
        read_template_file(path, "ml_jsonl", "src", "grp")
    assert info.value.line == 2 and "invalid JSON" in info.value.reason
    assert str(info.value).startswith(f"{path}:2: ")

    rows, rejects = read_template_file(path, "ml_jsonl", "src", "grp", skip_bad_rows=True)
    assert rows["line"].tolist() == [1, 8]
    assert rows.iloc[1][["left", "right", "correct", "incorrect", "label"]].tolist() == [
        "The dog",
        "fast",
        "runs",
        "run",
        "singular",
    ]
    assert rejects["line"].tolist() == [2, 3, 4, 5, 6]
    reasons = rejects["reason"].tolist()
    assert "invalid JSON" in reasons[0]
    assert reasons[1] == "missing field(s): sentence_bad"
    assert reasons[2] == "sentences are identical"
    assert "more than one word" in reasons[3]
    assert "unknown label 1" in reasons[4]
    assert rejects["raw"][0] == "{not json"
    assert (rejects["source"] == "src").all()


def test_read_blimp_file_derives_labels_and_reports_underivable(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "b.jsonl",
        [
            {
                "sentence_good": "This goose isn't bothering Edward.",
                "sentence_bad": "This goose weren't bothering Edward.",
            },
            {
                "sentence_good": "Those radii have scared that teenager.",
                "sentence_bad": "Those radii has scared that teenager.",
            },
            {
                "sentence_good": "All patients that hurts Steven sing.",
                "sentence_bad": "All patients that hurts Steven singing.",
            },
        ],
    )
    with pytest.raises(InputError) as info:
        read_template_file(path, "blimp_jsonl", "b", "blimp")
    assert info.value.line == 3 and "cannot derive number" in info.value.reason
    rows, rejects = read_template_file(path, "blimp_jsonl", "b", "blimp", skip_bad_rows=True)
    assert rows["label"].tolist() == ["singular", "plural"]
    assert rows["right"].tolist() == ["bothering Edward", "scared that teenager"]
    assert rejects["line"].tolist() == [3]


def test_read_template_file_missing_file_and_format(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_template_file(tmp_path / "nope.jsonl", "ml_jsonl", "s", "g")
    with pytest.raises(ValueError, match="unknown template format"):
        read_template_file(tmp_path / "nope.jsonl", "csv", "s", "g")  # type: ignore[arg-type]


def test_read_real_blimp_fails_loudly_without_skip(data_dir: Path) -> None:
    path = blimp_dir(data_dir) / "distractor_agreement_relative_clause.jsonl"
    with pytest.raises(InputError) as info:
        read_template_file(path, "blimp_jsonl", "blimp_distractor_agreement_relative_clause", "blimp")
    assert info.value.line == 822


# --------------------------------------------------------------------------- subsample


def _frame(labels: list[str], source: str = "s") -> pd.DataFrame:
    return pd.DataFrame({"source": source, "line": range(1, len(labels) + 1), "label": labels})


def test_subsample_evenly_spaced() -> None:
    df = _frame(["plural", "singular"] * 10)  # 20 rows
    out = subsample(df, 5)
    # linspace(0, 19, 5) = 0, 4.75, 9.5, 14.25, 19 -> rint 0, 5, 10, 14, 19
    assert out["line"].tolist() == [1, 6, 11, 15, 20]
    assert out.index.tolist() == list(range(5))
    assert subsample(df, 5).equals(out)  # deterministic


def test_subsample_keeps_both_labels() -> None:
    labels = ["plural"] * 10
    labels[3] = "singular"
    out = subsample(_frame(labels), 3)
    # linspace picks 0, 4, 9 (4.5 rounds to even); the lone singular row 3 replaces its nearest, 4.
    assert out["line"].tolist() == [1, 4, 10]
    assert out["label"].tolist() == ["plural", "singular", "plural"]


def test_subsample_per_source_none_and_small_sources() -> None:
    df = pd.concat(
        [_frame(["plural"] * 3 + ["singular"] * 3, "a"), _frame(["singular", "plural"], "b")], ignore_index=True
    )
    out = subsample(df, 2)
    assert out[["source", "line"]].values.tolist() == [["a", 1], ["a", 6], ["b", 1], ["b", 2]]
    assert subsample(df, None).equals(df)
    assert len(subsample(df, 100)) == 8
    with pytest.raises(ValueError):
        subsample(df, 0)


# --------------------------------------------------------------------------- groups and table


def test_load_groups_real_file() -> None:
    groups = load_groups(GROUPS_YAML)
    assert [g["id"] for g in groups] == [
        "simple",
        "sent_comp",
        "vp_coord",
        "prep",
        "subj_rel",
        "obj_rel_across",
        "obj_rel_no_comp_across",
        "obj_rel_within",
        "obj_rel_no_comp_within",
        "blimp",
    ]
    assert groups[0] == {"id": "simple", "name": "Simple", "sources": ["ml_simple_agrmt"]}
    assert groups[2]["sources"] == ["ml_vp_coord", "ml_long_vp_coord"]
    assert groups[6]["name"] == "Across object relative (no that)"
    paper = {"distractor_agreement_relative_clause": "distractor_agreement_relative_clause_paper"}
    assert groups[9]["sources"] == [f"blimp_{paper.get(s, s)}" for s in BLIMP_SETS]
    assert sum(len(g["sources"]) for g in groups) == 19


def test_blimp_release_groups_file_differs_only_in_the_relative_clause_source() -> None:
    default = load_groups(GROUPS_YAML)
    release = load_groups(REPO_ROOT / "resources" / "agreement_groups_blimp_release.yaml")
    assert release[:9] == default[:9]
    assert release[9]["sources"] == [f"blimp_{s}" for s in BLIMP_SETS]
    swap = {"blimp_distractor_agreement_relative_clause_paper": "blimp_distractor_agreement_relative_clause"}
    assert [swap.get(s, s) for s in default[9]["sources"]] == release[9]["sources"]


def test_group_sources_are_manifest_names() -> None:
    import yaml

    manifest = yaml.safe_load((REPO_ROOT / "resources" / "manifest.yaml").read_text(encoding="utf-8"))
    # every template source is in a groups file, but the labelled copies the tests read (tse_blimp_*)
    templates = {
        k
        for k, v in manifest["sources"].items()
        if v["format"] in ("ml_jsonl", "blimp_jsonl") and not k.startswith("tse_blimp_")
    }
    release = REPO_ROOT / "resources" / "agreement_groups_blimp_release.yaml"
    assert {s for f in (GROUPS_YAML, release) for g in load_groups(f) for s in g["sources"]} == templates


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("groups: []\n", "non-empty list"),
        ("groups:\n  - {id: a, name: A, sources: [x]}\n  - {id: a, name: B, sources: [y]}\n", "duplicate id"),
        ("groups:\n  - {id: a, name: A, sources: [x]}\n  - {id: b, name: B, sources: [x]}\n", "already in group 'a'"),
        ("groups:\n  - {id: a, sources: [x]}\n", "'name'"),
        ("groups:\n  - {id: a, name: A, sources: []}\n", "'sources'"),
        ("groups:\n  - {id: a, name: A, sources: [x], extra: 1}\n", "unknown key"),
        ("groups: [\n", "invalid YAML"),
    ],
)
def test_load_groups_validation(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=reason):
        load_groups(path)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (
            "{id: 'a b', name: A, sources: [x]}",
            "group 'a b': an id may hold only letters, digits, '.', '_' and '-' "
            "(it reaches file names and shell commands)",
        ),
        (
            "{id: a, name: A, sources: [x/y]}",
            "group 'a': source 'x/y': a source name may hold only letters, digits, '.', '_' and '-' "
            "(it reaches file names and shell commands)",
        ),
    ],
)
def test_load_groups_names_reach_file_names(tmp_path: Path, entry: str, reason: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(f"groups:\n  - {entry}\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_groups(path)
    assert str(exc.value) == f"{path}: {reason}"


def test_build_template_table_real_slice(data_dir: Path) -> None:
    groups = load_groups(GROUPS_YAML)
    table, rejects = build_template_table(real_inputs(data_dir), groups, skip_bad_rows=True, max_rows_per_source=20)
    assert list(table.columns) == list(TEMPLATE_COLUMNS)
    assert len(table) == 19 * 20
    # group order, then source order within the group, then line
    expected_sources = [s for g in groups for s in g["sources"]]
    assert list(pd.unique(table["source"])) == expected_sources
    assert list(pd.unique(table["group"])) == [g["id"] for g in groups]
    assert table.groupby("source", sort=False)["line"].apply(lambda s: s.is_monotonic_increasing).all()
    per_source = table.groupby("source")["label"].nunique()
    assert (per_source == 2).all()
    # the paper's copy of distractor_agreement_relative_clause has no malformed row (the release's
    # line 822 is not in it)
    assert rejects.empty
    again, _ = build_template_table(real_inputs(data_dir), groups, skip_bad_rows=True, max_rows_per_source=20)
    assert again.equals(table)


def test_build_template_table_full_counts(data_dir: Path) -> None:
    table, rejects = build_template_table(
        real_inputs(data_dir), load_groups(GROUPS_YAML), skip_bad_rows=True, max_rows_per_source=None
    )
    sizes = table.groupby("group", sort=False).size().to_dict()
    assert sizes == {
        "simple": 140,
        "sent_comp": 1680,
        "vp_coord": 840 + 400,
        "prep": 16800 + 5040,
        "subj_rel": 11200,
        "obj_rel_across": 11200 + 10080,
        "obj_rel_no_comp_across": 21280,
        "obj_rel_within": 21280,
        "obj_rel_no_comp_within": 21280,
        "blimp": 4000,
    }
    assert len(table) == 125_220 and rejects.empty
    release = load_groups(REPO_ROOT / "resources" / "agreement_groups_blimp_release.yaml")[9:]
    blimp, rejects = build_template_table(real_inputs(data_dir), release, skip_bad_rows=True)
    assert len(blimp) == 3999 and rejects["line"].tolist() == [822]


def test_build_template_table_missing_input(tmp_path: Path) -> None:
    groups = [{"id": "g", "name": "G", "sources": ["a", "b"]}]
    row = {"sentence_good": "the dog runs", "sentence_bad": "the dog run", "label": -1}
    path = write_jsonl(tmp_path / "a.jsonl", [row])
    with pytest.raises(VerbevalError, match="no input file for source 'b'"):
        build_template_table({"a": (path, "ml_jsonl")}, groups)
    table, _ = build_template_table(
        {"a": (path, "ml_jsonl"), "b": (path, "ml_jsonl"), "unused": (path, "x")},
        [{"id": "g", "name": "G", "sources": ["b", "a"]}],
    )
    assert table["source"].tolist() == ["b", "a"]


# --------------------------------------------------------------------------- render_context


def test_render_context_masked() -> None:
    masked = render_context("the authors", "tall", cased=True, masked=True, mask_token="[MASK]")
    assert masked == "The authors [MASK] tall."
    masked = render_context("the authors", "tall", cased=False, masked=True, mask_token="[MASK]")
    assert masked == "the authors [MASK] tall."
    assert render_context("the authors", "", cased=True, masked=True, mask_token="<mask>") == "The authors <mask>."
    assert render_context("The dogs", "", cased=False, masked=True, mask_token="[MASK]") == "The dogs [MASK]."


def test_render_context_causal() -> None:
    assert render_context("the authors", "tall", cased=True, masked=False, mask_token=None) == "The authors"
    assert render_context("the authors", "", cased=False, masked=False, mask_token=None) == "the authors"


def test_render_context_needs_mask_token() -> None:
    with pytest.raises(ValueError, match="mask token"):
        render_context("the authors", "", cased=True, masked=True, mask_token=None)


# --------------------------------------------------------------------------- errata

from verbeval.agreement.data.errata import Erratum, flagged_errata, load_errata  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_errata_rows_are_rejected_even_without_skip_bad_rows(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"sentence_good": "the author laughs", "sentence_bad": "the author laugh", "label": -1},
            {"sentence_good": "the authors sing", "sentence_bad": "the authors singing", "label": -2},
        ],
    )
    rows, rejects = read_template_file(path, "ml_jsonl", "src", "g", errata={2: "not a pair"})
    assert rows["line"].tolist() == [1]
    assert rejects[["line", "reason"]].values.tolist() == [[2, "known erratum: not a pair"]]
    with pytest.raises(InputError, match=r"errata list names line\(s\) \[7\]"):
        read_template_file(path, "ml_jsonl", "src", "g", errata={7: "gone"})


def test_shipped_errata_make_the_full_blimp_set_readable(data_dir: Path) -> None:
    errata = load_errata(REPO / "resources" / "template_errata.csv")
    source = "blimp_distractor_agreement_relative_clause"
    assert set(errata[source]) == {822}
    path = blimp_dir(data_dir) / "distractor_agreement_relative_clause.jsonl"
    with pytest.raises(InputError, match=":822: "):
        read_template_file(path, "blimp_jsonl", source, "blimp")
    rows, rejects = read_template_file(path, "blimp_jsonl", source, "blimp", errata=errata[source])
    assert len(rows) == 999 and rejects["line"].tolist() == [822]


def test_load_errata_rejects_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "e.csv"
    bad.write_text("source,row,reason\nx,1,y\n")
    with pytest.raises(InputError, match="expected columns source,line,action,reason"):
        load_errata(bad)
    bad.write_text("source,line,reason\nx,0,y\n")
    with pytest.raises(InputError, match=":2: "):
        load_errata(bad)


def test_paper_blimp_copy_derived_labels_match_the_papers_labels(data_dir: Path) -> None:
    """verbeval derives the number of every BLiMP row; on the paper's copies (refining-tse
    data/blimp, which carry the paper's label -1 singular / -2 plural) it agrees on all 4,000."""
    for path in sorted((tse_dir(data_dir) / "blimp").glob("*.jsonl")):
        rows, rejects = read_template_file(path, "blimp_jsonl", path.stem, "blimp")
        labels = [json.loads(line)["label"] for line in path.read_text(encoding="utf-8").splitlines()]
        assert rejects.empty and len(rows) == len(labels) == 1000
        assert rows["label"].tolist() == [{-1: "singular", -2: "plural"}[x] for x in labels], path.name
    # the paper's relative-clause sample is not the release's: no sentence pair in common
    paper = tse_dir(data_dir) / "blimp" / "distractor_agreement_relative_clause.jsonl"
    release = blimp_dir(data_dir) / "distractor_agreement_relative_clause.jsonl"
    pairs = [
        {(o["sentence_good"], o["sentence_bad"]) for o in map(json.loads, p.read_text(encoding="utf-8").splitlines())}
        for p in (paper, release)
    ]
    assert len(pairs[0]) == 1000 and len(pairs[0] & pairs[1]) == 0


def test_flagged_errata_are_kept_unless_dropped(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"sentence_good": "the author laughs", "sentence_bad": "the author laugh", "label": -1},
            {"sentence_good": "the authors sing", "sentence_bad": "the authors singing", "label": -2},
            {"sentence_good": "senators bothers Daniel", "sentence_bad": "senators bother Daniel", "label": -1},
        ],
    )
    errata = tmp_path / "e.csv"
    errata.write_text(
        "# comment\nsource,line,action,reason\nsrc,2,reject,not a pair\nsrc,3,flag,plural subject marked -s\n"
    )
    known = load_errata(errata)["src"]
    rows, rejects = read_template_file(path, "ml_jsonl", "src", "g", errata=known)
    assert rows["line"].tolist() == [1, 3] and rejects["line"].tolist() == [2]
    rows, rejects = read_template_file(path, "ml_jsonl", "src", "g", errata=known, drop_flagged=True)
    assert rows["line"].tolist() == [1]
    assert rejects[["line", "reason"]].values.tolist() == [
        [2, "known erratum: not a pair"],
        [3, "flagged erratum, dropped: plural subject marked -s"],
    ]
    # a flag naming a line the file lacks is an error too
    with pytest.raises(InputError, match=r"\[9\]"):
        read_template_file(path, "ml_jsonl", "src", "g", errata={9: Erratum("flag", "x")})


def test_load_errata_format_versions_and_actions(tmp_path: Path) -> None:
    e = tmp_path / "e.csv"
    e.write_text("source,line,reason\nx,4,y\n")  # the earlier format: every row is reject
    assert load_errata(e) == {"x": {4: Erratum("reject", "y")}}
    e.write_text("source,line,action,reason\nx,4,keep,y\n")
    with pytest.raises(InputError, match="action must be one of reject, flag"):
        load_errata(e)
    e.write_text("source,line,action,reason\nx,4,flag,y\nx,4,reject,z\n")
    with pytest.raises(InputError, match="duplicate erratum"):
        load_errata(e)


def test_shipped_flagged_errata_are_plural_subjects_with_singular_verbs(data_dir: Path) -> None:
    """The 14 flag rows (11 + 3) of the BLiMP *_plural_subject_verb_agreement_1 files: each good
    sentence has a plural subject and an -s verb, so verbeval derives 'singular' for it; dropping
    them removes every context of those files that occurs with both labels."""
    errata = load_errata(REPO / "resources" / "template_errata.csv")
    flags = flagged_errata(errata)
    assert flags.groupby("source").size().to_dict() == {
        "blimp_irregular_plural_subject_verb_agreement_1": 3,
        "blimp_regular_plural_subject_verb_agreement_1": 11,
    }
    assert flags[flags["source"].str.startswith("blimp_irregular")]["line"].tolist() == [648, 780, 854]
    assert flags[flags["source"].str.startswith("blimp_regular")]["line"].tolist() == [
        106,
        167,
        340,
        420,
        426,
        762,
        796,
        883,
        887,
        891,
        948,
    ]
    for uid in ("regular_plural_subject_verb_agreement_1", "irregular_plural_subject_verb_agreement_1"):
        source = f"blimp_{uid}"
        path = blimp_dir(data_dir) / f"{uid}.jsonl"
        kept, rej = read_template_file(path, "blimp_jsonl", source, "blimp", errata=errata[source])
        assert len(kept) == 1000 and rej.empty
        lines = set(errata[source])
        bad = kept[kept["line"].isin(lines)]
        assert (bad["label"] == "singular").all() and bad["correct"].str.endswith("s").all()
        dropped, rej = read_template_file(
            path, "blimp_jsonl", source, "blimp", errata=errata[source], drop_flagged=True
        )
        assert len(dropped) == 1000 - len(lines) and set(rej["line"]) == lines
    assert set(errata["blimp_distractor_agreement_relative_clause"]) == {822}


def test_table2_notes_count_the_flagged_rows() -> None:
    from verbeval.agreement.report.tables import errata_notes, to_latex, to_markdown

    flags = pd.DataFrame(
        {
            "source": ["b1", "b1", "b2"],
            "line": [3, 9, 4],
            "reason": ["plural subject with -s verb marked good: 'A.'"] * 3,
        }
    )
    groups = [
        {"id": "ml", "name": "Simple", "sources": ["m"]},
        {"id": "blimp", "name": "BLiMP", "sources": ["b1", "b2"]},
    ]
    templates = pd.DataFrame({"source": ["b1", "b1", "b2"], "line": [1, 3, 4]})  # b1 line 9 not sampled
    notes = errata_notes(flags, templates, groups, dropped=False)
    assert notes == [
        "BLiMP: 3 rows of the published files are flagged in the errata list (plural subject with -s "
        "verb marked good; 2 in b1, 1 in b2); 2 of them are among the scored rows and are kept, as in "
        "the paper (agreement.drop_flagged_errata drops them)."
    ]
    assert errata_notes(flags, templates, groups, dropped=True)[0].endswith(
        "; dropped (agreement.drop_flagged_errata)."
    )
    table = pd.DataFrame({"group": ["blimp"], "name": ["BLiMP"], "m.tse": [0.5], "m.ew": [0.25], "m.mw": [0.75]})
    md = to_markdown(table, ["m"], notes=notes)
    assert md.endswith("\nNotes:\n\n* " + notes[0] + "\n")
    assert r"\footnotesize BLiMP: 3 rows" in to_latex(table, ["m"], notes=notes)
    assert "Notes" not in to_markdown(table, ["m"])

"""Users' own minimal pairs (agreement.custom_groups): file formats, errors, config, workflow, scoring."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest import REPO_ROOT, checkout_view
from inprocess import DryRunError, dry_run
from verbeval.agreement.data.custom_pairs import (
    CustomGroup,
    check_sha256,
    custom_format,
    custom_groups,
    read_custom_pairs,
)
from verbeval.agreement.data.groups import load_groups, run_groups, write_groups
from verbeval.agreement.data.template_files import REJECT_COLUMNS, TEMPLATE_COLUMNS
from verbeval.agreement.data.templates import build_template_table
from verbeval.cli import main as verbeval_main
from verbeval.core.config import validate_config
from verbeval.core.errors import InputError, VerbevalError

EXAMPLE = REPO_ROOT / "resources" / "examples" / "agreement_new_constructions.jsonl"
PAPER_GROUPS = [{"id": "simple", "name": "Simple", "sources": ["ml_simple_agrmt"]}]

# (left, right, correct, incorrect, label) of the two example rows below, in both formats
EXPECTED = [
    ("The doctor and the nurse", "at the hospital", "are", "is", "plural"),
    ("Every student", "the new teacher", "likes", "like", "singular"),
    ("The manager, of course,", "the answer", "knows", "know", "singular"),
    ("The dogs almost always", "", "bark", "barks", "plural"),
]


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _rows(df: pd.DataFrame) -> list[tuple[str, str, str, str, str]]:
    return list(df[["left", "right", "correct", "incorrect", "label"]].itertuples(index=False, name=None))


# --------------------------------------------------------------------------- parsing both forms


def test_pair_form_jsonl_splits_and_derives_labels(tmp_path: Path) -> None:
    f = _jsonl(
        tmp_path / "p.jsonl",
        [
            {
                "id": "c1",
                "sentence_good": "The doctor and the nurse are at the hospital.",
                "sentence_bad": "The doctor and the nurse is at the hospital.",
                "note": "coordination",
            },
            {
                "sentence_good": "Every student likes the new teacher.",
                "sentence_bad": "Every student like the new teacher.",
                "label": "singular",
            },
            {
                "sentence_good": "The manager, of course, knows the answer.",
                "sentence_bad": "The manager, of course, know the answer.",
            },
            {"id": 7, "sentence_good": "The dogs almost always bark.", "sentence_bad": "The dogs almost always barks."},
        ],
    )
    rows, rejects = read_custom_pairs(f, "jsonl", "mine", "mine")
    assert list(rows.columns) == list(TEMPLATE_COLUMNS) and list(rejects.columns) == list(REJECT_COLUMNS)
    assert rejects.empty
    assert _rows(rows) == EXPECTED
    assert rows["line"].tolist() == [1, 2, 3, 4]
    assert rows["plural"].tolist() == [True, False, False, True]
    assert rows["pair_id"].tolist() == ["c1", "", "", "7"]
    assert rows["note"].tolist() == ["coordination", "", "", ""]
    assert set(rows["group"]) == {"mine"} and set(rows["source"]) == {"mine"}


def test_split_form_csv_with_quoted_multiline_record(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text(
        "id,left,right,correct,incorrect,label,note\n"
        "a,The doctor and the nurse,at the hospital.,are,is,plural,\n"
        'b,Every  student,the new teacher,likes,like,singular,"spread over\ntwo lines"\n'
        "  \n"
        'c,"The manager, of course,",the answer,knows,know,singular,\n'
        "d,The dogs almost always,,bark,barks,plural,verb last\n",
        encoding="utf-8",
    )
    rows, _ = read_custom_pairs(f, "csv", "mine", "mine")
    assert _rows(rows) == EXPECTED  # final period of right dropped, spaces collapsed
    assert rows["line"].tolist() == [2, 3, 6, 7]  # first line of each record; the header is line 1
    assert rows["note"].tolist() == ["", "spread over\ntwo lines", "", "verb last"]


def test_pair_form_csv_with_optional_label_column(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text(
        "sentence_good,sentence_bad,label\n"
        "The authors laugh.,The authors laughs.,\n"
        "The box of apples is heavy.,The box of apples are heavy.,singular\n",
        encoding="utf-8",
    )
    rows, _ = read_custom_pairs(f, "csv", "s", "g")
    assert _rows(rows) == [
        ("The authors", "", "laugh", "laughs", "plural"),
        ("The box of apples", "heavy", "is", "are", "singular"),
    ]


def test_label_is_required_only_when_it_cannot_be_derived(tmp_path: Path) -> None:
    # sang/sings: not a present-tense pair, so the number cannot be derived from the forms
    good, bad = "The choir always sings.", "The choir always sang."
    with pytest.raises(InputError, match=r"p\.jsonl:1: cannot derive number.*give the number .* 'label'"):
        read_custom_pairs(
            _jsonl(tmp_path / "p.jsonl", [{"sentence_good": good, "sentence_bad": bad}]), "jsonl", "s", "g"
        )
    rows, _ = read_custom_pairs(
        _jsonl(tmp_path / "q.jsonl", [{"sentence_good": good, "sentence_bad": bad, "label": "singular"}]),
        "jsonl",
        "s",
        "g",
    )
    assert _rows(rows) == [("The choir always", "", "sings", "sang", "singular")]


def test_example_file_parses_balanced() -> None:
    rows, rejects = read_custom_pairs(EXAMPLE, "jsonl", "new_constructions", "new_constructions")
    assert rejects.empty and len(rows) == 31
    assert rows["label"].value_counts().to_dict() == {"singular": 16, "plural": 15}
    assert rows["pair_id"].is_unique and (rows["pair_id"] != "").all()
    first = rows.iloc[0]
    assert (first["left"], first["correct"], first["incorrect"], first["label"]) == (
        "The doctor and the nurse",
        "are",
        "is",
        "plural",
    )
    split = rows[rows["pair_id"] == "split-1"].iloc[0]
    assert (split["left"], split["right"], split["correct"], split["label"]) == (
        "The players on the team",
        "every morning",
        "train",
        "plural",
    )


# --------------------------------------------------------------------------- errors, file:line


GOOD = {"sentence_good": "The authors laugh.", "sentence_bad": "The authors laughs."}
JSONL_ERRORS = [
    ({"sentence_good": "The authors laugh."}, "missing field(s): sentence_bad"),
    ({**GOOD, "sentence_good": "  "}, "empty field 'sentence_good'"),
    (
        {"sentence_good": "The authors laugh loudly.", "sentence_bad": "The author laughs loudly."},
        "differ in more than one word",
    ),
    ({**GOOD, "label": "plural-ish"}, "label 'plural-ish' is not singular or plural"),
    ({**GOOD, "label": "singular"}, "label 'singular' contradicts the verb forms"),
    ({**GOOD, "lable": "plural"}, "unknown field(s) 'lable'"),
    ({**GOOD, "left": "The authors"}, "mixes the two forms"),
    ({"left": "The authors", "right": "", "correct": "laugh", "incorrect": "laughs"}, "missing field(s): label"),
    (
        {"left": "The authors", "right": "", "correct": "laugh", "incorrect": "laugh", "label": "plural"},
        "correct and incorrect are the same form",
    ),
    (
        {"left": "The authors", "right": "", "correct": "laugh now", "incorrect": "laughs", "label": "plural"},
        "field 'correct' must be one word",
    ),
    ({"left": "", "right": "", "correct": "laugh", "incorrect": "laughs", "label": "plural"}, "empty field 'left'"),
    ({"sentence_good": "Laugh the authors.", "sentence_bad": "Laughs the authors."}, "no left context"),
    ({**GOOD, "id": [1]}, "field 'id' must be a string or an integer"),
]


@pytest.mark.parametrize(("record", "reason"), JSONL_ERRORS)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, record: dict, reason: str) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text(
        json.dumps({"sentence_good": "The pilot smiles.", "sentence_bad": "The pilot smile."})
        + "\n\n"
        + json.dumps(record)
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as exc:
        read_custom_pairs(f, "jsonl", "mine", "mine")
    assert str(exc.value).startswith(f"{f}:3: ")
    assert reason in str(exc.value)
    # with skip_bad_rows the row goes to the rejects with the same reason, the good row stays
    rows, rejects = read_custom_pairs(f, "jsonl", "mine", "mine", skip_bad_rows=True)
    assert rows["line"].tolist() == [1]
    assert rejects["line"].tolist() == [3] and reason in rejects["reason"].iloc[0]
    assert json.loads(rejects["raw"].iloc[0]) == record


def test_invalid_json_and_duplicates(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"d\.jsonl:1: invalid JSON"):
        read_custom_pairs(f, "jsonl", "s", "g")
    split = {"left": "The authors", "right": "", "correct": "laugh", "incorrect": "laughs", "label": "plural"}
    _jsonl(f, [GOOD, split])  # the same pair in the two forms
    with pytest.raises(InputError, match=r"d\.jsonl:2: duplicate pair: the same as line 1"):
        read_custom_pairs(f, "jsonl", "s", "g")
    _jsonl(
        f, [{**GOOD, "id": "x"}, {"sentence_good": "The pilot smiles.", "sentence_bad": "The pilot smile.", "id": "x"}]
    )
    with pytest.raises(InputError, match=r"d\.jsonl:2: duplicate id 'x': already on line 1"):
        read_custom_pairs(f, "jsonl", "s", "g")


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ("sentence_good,sentence_bad,lable\n", 1, "unknown column(s) 'lable'"),
        ("sentence_good,label\n", 1, "missing column(s) sentence_bad"),
        ("left,right,correct,label\n", 1, "missing column(s) incorrect"),
        ("sentence_good,sentence_bad,left\n", 1, "columns mix the two forms"),
        ("id,id,sentence_good,sentence_bad\n", 1, "repeated column(s) id"),
        (
            "sentence_good,sentence_bad\nThe authors laugh.,The authors laughs.\nThe pilot smiles.\n",
            3,
            "expected 2 fields (as the header), got 1",
        ),
        (
            'sentence_good,sentence_bad\n"The pilot\nsmiles.",The pilot smile.\nThe authors laugh.,The authors.\n',
            4,
            "different lengths",
        ),
    ],
)
def test_csv_errors_name_file_and_line(tmp_path: Path, text: str, where: int, reason: str) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_custom_pairs(f, "csv", "mine", "mine")
    assert str(exc.value).startswith(f"{f}:{where}: ") and reason in str(exc.value)


def test_empty_file_and_all_rejected(tmp_path: Path) -> None:
    f = tmp_path / "e.csv"
    f.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match=r"e\.csv: no template rows: the file is empty"):
        read_custom_pairs(f, "csv", "s", "g")
    bad = _jsonl(tmp_path / "b.jsonl", [{"sentence_good": "x"}])
    with pytest.raises(VerbevalError, match=r"group 'g' has no template rows"):
        build_template_table({}, [], skip_bad_rows=True, custom=[CustomGroup("g", "G", bad, "jsonl")])


# --------------------------------------------------------------------------- config entries and checksums


def test_custom_groups_validation() -> None:
    got = custom_groups(
        [
            {"id": "mine", "path": "x/pairs.CSV", "sha256": "AB" * 32},
            {"id": "other-1", "name": "Other", "path": "y.txt", "format": "jsonl"},
        ],
        PAPER_GROUPS,
    )
    assert got == [
        CustomGroup("mine", "mine", Path("x/pairs.CSV"), "csv", "ab" * 32),
        CustomGroup("other-1", "Other", Path("y.txt"), "jsonl", None),
    ]
    for entries, reason in (
        ([{"id": "simple", "path": "a.csv"}], "already a group of agreement.groups_file"),
        ([{"id": "ml_simple_agrmt", "path": "a.csv"}], "already a source of agreement.groups_file"),
        ([{"id": "a", "path": "a.csv"}, {"id": "a", "path": "b.csv"}], "already another custom group"),
        ([{"id": "a b", "path": "a.csv"}], "must be letters, digits"),
        ([{"id": "a", "path": "a.txt"}], "cannot tell the format from the extension"),
        ([{"id": "a", "path": "a.csv", "sha256": "123"}], "is not 64 hexadecimal digits"),
    ):
        with pytest.raises(VerbevalError, match=r"agreement\.custom_groups\[\d\]") as exc:
            custom_groups(entries, PAPER_GROUPS)
        assert reason in str(exc.value)
    assert custom_format("a.ndjson") == "jsonl"


def test_sha256_mismatch_names_file_expected_and_actual(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "p.jsonl", [GOOD])
    actual = hashlib.sha256(f.read_bytes()).hexdigest()
    check_sha256(f, actual.upper())  # matches, case-insensitively
    wrong = "0" * 64
    with pytest.raises(InputError) as exc:
        build_template_table({}, [], custom=[CustomGroup("g", "G", f, "jsonl", wrong)])
    assert str(exc.value).startswith(f"{f}: sha256 mismatch: expected {wrong}, got {actual}")


def test_schema_accepts_entries_and_rejects_bad_ones() -> None:
    models = [{"id": "gpt2"}]
    cfg = validate_config({"models": models, "agreement": {"custom_groups": [{"id": "mine", "path": "p.jsonl"}]}})
    assert cfg["agreement"]["custom_groups"] == [{"id": "mine", "path": "p.jsonl"}]
    assert validate_config({"models": models})["agreement"]["custom_groups"] == []
    for bad in (
        {"id": "mine"},
        {"id": "mine", "path": "p.jsonl", "format": "tsv"},
        {"id": "mine", "path": "p.jsonl", "sha": "x"},
        {"id": "-x", "path": "p.jsonl"},
    ):
        with pytest.raises(VerbevalError, match="custom_groups"):
            validate_config({"models": models, "agreement": {"custom_groups": [bad]}})


# --------------------------------------------------------------------------- the table and the run's groups


def test_custom_groups_come_after_the_paper_groups(data_dir: Path, tmp_path: Path) -> None:
    ml = next(data_dir.rglob("ML/simple_agrmt_all.jsonl"))
    custom = custom_groups(
        [{"id": "new_constructions", "name": "New constructions", "path": str(EXAMPLE)}], PAPER_GROUPS
    )
    table, rejects = build_template_table(
        {"ml_simple_agrmt": (ml, "ml_jsonl")}, PAPER_GROUPS, max_rows_per_source=10, custom=custom
    )
    assert table["group"].tolist() == ["simple"] * 10 + ["new_constructions"] * 10  # subsampled alike
    assert set(table.loc[table["group"] == "new_constructions", "label"]) == {"singular", "plural"}
    assert (table.loc[table["group"] == "simple", "pair_id"] == "").all() and rejects.empty
    groups_file = tmp_path / "groups.yaml"
    write_groups(groups_file, run_groups(PAPER_GROUPS, custom))
    assert load_groups(groups_file) == [
        *PAPER_GROUPS,
        {"id": "new_constructions", "name": "New constructions", "sources": ["new_constructions"]},
    ]
    with pytest.raises(VerbevalError, match="repeated group id"):
        build_template_table({}, PAPER_GROUPS, custom=[CustomGroup("simple", "S", EXAMPLE, "jsonl")])


# --------------------------------------------------------------------------- the workflow DAG


def test_custom_group_in_the_dry_run(tmp_path: Path) -> None:
    sha = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    extra = tmp_path / "custom.yaml"
    extra.write_text(
        yaml.safe_dump(
            {
                "agreement": {
                    "groups": ["simple"],
                    "custom_groups": [
                        {
                            "id": "new_constructions",
                            "name": "New constructions",
                            "path": str(EXAMPLE.relative_to(REPO_ROOT)),
                            "sha256": sha,
                        }
                    ],
                }
            }
        )
    )
    wd = checkout_view(tmp_path / "wd")
    quick = REPO_ROOT / "config" / "quick.yaml"  # a config that needs no ../shared
    run = dry_run(wd, [quick, extra])
    [templates] = run.of("templates")
    assert "resources/examples/agreement_new_constructions.jsonl" in templates["inputs"]
    cmd = templates["cmd"]
    assert "--custom-group=new_constructions=resources/examples/agreement_new_constructions.jsonl" in cmd
    assert f"--custom-sha256=new_constructions={sha}" in cmd and "--groups=simple " in cmd
    aggregated = {o for j in run.of("aggregate") for o in j["outputs"]}
    for m in ("smollm2-135m", "quick-bert"):
        assert f"results-quick/agreement/{m}/new_constructions/summary.csv" in aggregated
    # Table 2 and the figures read the run's groups file that the templates rule writes
    assert "results-quick/agreement/groups.yaml" in templates["outputs"]
    [table2] = run.commands("table2")
    assert "--groups-file results-quick/agreement/groups.yaml" in table2
    # a missing file stops the run before any job, naming the config file that declared it
    extra.write_text(yaml.safe_dump({"agreement": {"custom_groups": [{"id": "x", "path": "nowhere/pairs.csv"}]}}))
    with pytest.raises(DryRunError) as err:
        dry_run(wd, [quick, extra])
    assert f"{extra}: agreement.custom_groups: file(s) not found: nowhere/pairs.csv" in str(err.value)


# --------------------------------------------------------------------------- scoring end to end


def test_custom_group_scored_end_to_end(tokenizer_path: Callable[[str], Path], tmp_path: Path) -> None:
    """templates -> lemmas -> infer -> aggregate -> table on the example file with a tiny GPT-2, in process."""
    from verbeval.agreement.data.eligibility import single_token_ids
    from verbeval.core.models import load_model

    model = tmp_path / "tiny-gpt2"
    assert (
        verbeval_main(
            ["-q", "tiny-model", "--tokenizer", str(tokenizer_path("gpt2")), "--arch", "gpt2", "--out", str(model)]
        )
        == 0
    )
    out = tmp_path / "agreement"
    sha = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert (
        verbeval_main(
            [
                "-q",
                "templates",
                "--manifest",
                str(REPO_ROOT / "resources" / "manifest.yaml"),
                "--groups-file",
                str(REPO_ROOT / "resources" / "agreement_groups.yaml"),
                "--groups=",
                f"--custom-group=new={EXAMPLE}",
                "--custom-name=new=New constructions",
                f"--custom-sha256=new={sha}",
                "--out",
                str(out / "templates.parquet"),
                "--rejects",
                str(out / "rejects.csv"),
                "--groups-out",
                str(out / "groups.yaml"),
            ]
        )
        == 0
    )
    templates = pd.read_parquet(out / "templates.parquet")
    assert len(templates) == 31 and set(templates["group"]) == {"new"}
    # a lexicon of the example's verbs (3sg, plural), plus a few others for EW/MW
    verbs = {
        ("be", "is", "are"),
        ("have", "has", "have"),
        ("know", "knows", "know"),
        ("like", "likes", "like"),
        ("live", "lives", "live"),
        ("play", "plays", "play"),
        ("work", "works", "work"),
        ("take", "takes", "take"),
        ("want", "wants", "want"),
        ("agree", "agrees", "agree"),
        ("run", "runs", "run"),
        ("sing", "sings", "sing"),
        ("bark", "barks", "bark"),
        ("sleep", "sleeps", "sleep"),
    }
    lex = pd.DataFrame(sorted(verbs), columns=["lemma", "sing", "plur"]).assign(source="test")
    lex.to_parquet(tmp_path / "lexicon.parquet")
    assert (
        verbeval_main(
            [
                "-q",
                "lemmas",
                "--model",
                str(model),
                "--lexicon",
                str(tmp_path / "lexicon.parquet"),
                "--out",
                str(out / "m" / "lemmas.parquet"),
            ]
        )
        == 0
    )
    manifest = out / "m" / "shards" / "manifest.json"
    assert (
        verbeval_main(
            [
                "-q",
                "infer",
                "--model",
                str(model),
                "--device",
                "cpu",
                "--threads",
                "1",
                "--batch-size",
                "8",
                "--templates",
                str(out / "templates.parquet"),
                "--lemmas",
                str(out / "m" / "lemmas.parquet"),
                "--groups",
                "new",
                "--n-chunks",
                "2",
                "--no-progress",
                "--manifest",
                str(manifest),
            ]
        )
        == 0
    )
    assert (
        verbeval_main(
            [
                "-q",
                "aggregate",
                "--templates",
                str(out / "templates.parquet"),
                "--groups",
                "new",
                "--model-name",
                "m",
                "--manifest",
                str(manifest),
                "--top-cutoffs",
                "0.5,1",
                "--bottom-cutoffs",
                "0.5",
                "--resamples",
                "20",
                "--out-dir",
                str(out / "m"),
            ]
        )
        == 0
    )
    assert (
        verbeval_main(
            [
                "-q",
                "table",
                "--groups-file",
                str(out / "groups.yaml"),
                "--models",
                "m",
                "--summaries",
                str(out / "m" / "new" / "summary.csv"),
                "--csv",
                str(out / "t2.csv"),
                "--md",
                str(out / "t2.md"),
                "--tex",
                str(out / "t2.tex"),
                "--all-csv",
                str(out / "all.csv"),
                "--metrics",
                str(out / "metrics.json"),
            ]
        )
        == 0
    )

    # TSE per row against the model's own next-token distribution after the left context
    lm = load_model(str(model), device="cpu")
    tse = pd.read_parquet(out / "m" / "new" / "tse.parquet")
    correct = single_token_ids(lm.tokenizer, templates["correct"].tolist())
    incorrect = single_token_ids(lm.tokenizer, templates["incorrect"].tolist())
    expected = []
    with torch.inference_mode():
        for left, c, i in zip(templates["left"], correct, incorrect):
            ids = lm.tokenizer(left)["input_ids"]
            probs = torch.softmax(lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
            expected.append(np.nan if c < 0 or i < 0 else float(probs[c] > probs[i]))
    expected_arr = np.array(expected)
    assert (~np.isnan(expected_arr)).sum() >= 25  # most of the example's verbs are single GPT-2 tokens
    np.testing.assert_array_equal(tse["tse"].to_numpy(), expected_arr)

    t2 = pd.read_csv(out / "t2.csv")
    assert t2["group"].tolist() == ["new"] and t2["name"].tolist() == ["New constructions"]
    assert t2.loc[0, "m.tse"] == pytest.approx(np.nanmean(expected_arr), abs=1e-6)
    assert t2.loc[0, "m.n_rows_total"] == 31
    assert "| New constructions |" in (out / "t2.md").read_text()


# --------------------------------------------------------------------------- control characters (issue 34)

OK_LINE = b'{"sentence_good": "The pilot smiles.", "sentence_bad": "The pilot smile."}\n'
CONTROL_CASES = [
    (
        "nul.csv",
        b"sentence_good,sentence_bad\nThe pilot smiles.,The pilot smile.\nThe authors laugh\x00.,The authors laughs.\n",
        3,
        "column 'sentence_good': a control character U+0000 (NUL) at character 18",
    ),
    (
        "quoted.csv",
        b'left,right,correct,incorrect,label\n"The authors",,laugh,"laughs\x07",plural\n',
        2,
        "column 'incorrect': a control character U+0007 (BEL) at character 7",
    ),
    (
        "header.csv",
        b"sentence_good\x00,sentence_bad\n",
        1,
        "column name 'sentence_good\\x00': a control character U+0000",
    ),
    (
        "escaped.jsonl",
        OK_LINE + b'{"sentence_good": "The authors laugh\\u0000.", "sentence_bad": "The authors laughs."}\n',
        2,
        "field 'sentence_good': a control character U+0000 (NUL) at character 18",
    ),
    (
        "raw.jsonl",
        OK_LINE + b'{"sentence_good": "The authors laugh\x00.", "sentence_bad": "The authors laughs."}\n',
        2,
        "a control character U+0000 (NUL) at column 37",
    ),
    (
        "del.jsonl",
        OK_LINE + b'{"sentence_good": "The authors laugh.", "sentence_bad": "The authors laughs.", '
        b'"note": "x\\u007f"}\n',
        2,
        "field 'note': a control character U+007F (DEL) at character 2",
    ),
    (
        "c1.csv",
        "sentence_good,sentence_bad\nThe authors laugh\u009b.,The authors laughs.\n".encode(),
        2,
        "column 'sentence_good': a control character U+009B (C1 control) at character 18",
    ),
]


@pytest.mark.parametrize(("name", "data", "where", "reason"), CONTROL_CASES, ids=[c[0] for c in CONTROL_CASES])
def test_control_characters_are_refused_with_file_and_line(
    tmp_path: Path, name: str, data: bytes, where: int, reason: str
) -> None:
    """A NUL (raw, or JSON-escaped) or another control character in a pair never reaches the contexts:
    the file, line and field or column, and the character, before anything is written."""
    f = tmp_path / name
    f.write_bytes(data)
    fmt = custom_format(f)
    with pytest.raises(InputError) as exc:
        read_custom_pairs(f, fmt, "mine", "mine")
    msg = str(exc.value)
    assert (
        msg.startswith(f"{f}:{where}: ")
        and reason in msg
        and msg.endswith(": remove it (tab and line breaks are the only control characters allowed)")
    )
    assert "\x00" not in msg and "\n" not in msg
    if where > 1:  # skip_bad_rows: a reject whose raw text shows the character escaped
        rows, rejects = read_custom_pairs(f, fmt, "mine", "mine", skip_bad_rows=True)
        assert rejects["line"].tolist() == [where] and reason in rejects["reason"].iloc[0]
        assert not any(ch in rejects["raw"].iloc[0] for ch in "\x00\x07\x7f\x85")


def test_tab_and_line_breaks_are_still_allowed(tmp_path: Path) -> None:
    f = tmp_path / "ws.csv"
    f.write_bytes(b'sentence_good,sentence_bad\r\n"The authors\tlaugh\r\nloudly.","The authors\tlaughs\r\nloudly."\r\n')
    rows, _ = read_custom_pairs(f, "csv", "mine", "mine")
    assert _rows(rows) == [("The authors", "loudly", "laugh", "laughs", "plural")]


def test_invalid_json_messages_say_at_once(tmp_path: Path) -> None:
    """The decoder's message may end in 'at' ('Unterminated string starting at'): never 'at at'."""
    from verbeval.agreement.data.template_files import read_template_file

    f = tmp_path / "u.jsonl"
    f.write_text('{"sentence_good": "The pilot smiles.\n', encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_custom_pairs(f, "jsonl", "s", "g")
    assert str(exc.value) == f"{f}:1: invalid JSON (Unterminated string starting at column 19)"
    with pytest.raises(InputError) as exc:
        read_template_file(f, "blimp_jsonl", "s", "g")
    assert str(exc.value) == f"{f}:1: invalid JSON (Unterminated string starting at column 19)"

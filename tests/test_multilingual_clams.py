"""verbeval.multilingual.clams: the CLAMS evaluation sets (Mueller et al. 2020) read into pairs, and
their manifest entries.

The pairs below are copied verbatim from github.com/aaronmueller/clams at commit
36b5c9a56ecc51d3eedb6c1a85b805085d631c71 (``<lang>_evalset/<file>``, lines as noted); no test reads
the data mirror.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from verbeval.agreement.data.groups import _IDENTIFIER
from verbeval.agreement.data.template_files import REJECT_COLUMNS
from verbeval.core.errors import InputError
from verbeval.core.manifest import FORMATS, load_manifest, local_filename
from verbeval.multilingual import clams

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = REPO_ROOT / "resources" / "manifest.yaml"
COMMIT = "36b5c9a56ecc51d3eedb6c1a85b805085d631c71"

#: language -> [(True line, False line, (left, correct, incorrect, right, differs_after, false_right))]
REAL_PAIRS: dict[str, list[tuple[str, str, tuple[str, str, str, str, bool, str]]]] = {
    "en": [
        # en_evalset/simple_agrmt.txt, lines 1-2
        ("True\tthe author laughs", "False\tthe author laugh", ("the author", "laughs", "laugh", "", False, "")),
        # en_evalset/subj_rel.txt, lines 1-2
        (
            "True\tthe authors that like the guard laugh",
            "False\tthe authors that like the guard laughs",
            ("the authors that like the guard", "laugh", "laughs", "", False, ""),
        ),
        # en_evalset/obj_rel_within_anim.txt, lines 1-2: the embedded verb, the main verb after it
        (
            "True\tthe authors that the guard likes laugh",
            "False\tthe authors that the guard like laugh",
            ("the authors that the guard", "likes", "like", "laugh", False, "laugh"),
        ),
        # en_evalset/sent_comp.txt, lines 1-2
        (
            "True\tthe mechanic said the authors laugh",
            "False\tthe mechanic said the authors laughs",
            ("the mechanic said the authors", "laugh", "laughs", "", False, ""),
        ),
    ],
    "fr": [
        # fr_evalset/simple_agrmt.txt, lines 1-2: an invariable adjective, the pair differs at the verb only
        (
            "True\tles auteurs sont vieux",
            "False\tles auteurs est vieux",
            ("les auteurs", "sont", "est", "vieux", False, "vieux"),
        ),
        # fr_evalset/simple_agrmt.txt, lines 3-4: the adjective agrees too
        (
            "True\tles auteurs sont jeunes",
            "False\tles auteurs est jeune",
            ("les auteurs", "sont", "est", "jeunes", True, "jeune"),
        ),
        # fr_evalset/simple_agrmt.txt, lines 143-144: the elided article is a token of its own
        (
            "True\tl' auteur est jeune",
            "False\tl' auteur sont jeunes",
            ("l' auteur", "est", "sont", "jeune", True, "jeunes"),
        ),
        # fr_evalset/vp_coord.txt, lines 993-994: the second verb of the coordination
        (
            "True\tles auteurs déménagent et sont jeunes",
            "False\tles auteurs déménagent et est jeune",
            ("les auteurs déménagent et", "sont", "est", "jeunes", True, "jeune"),
        ),
    ],
    "de": [
        # de_evalset/subj_rel.txt, lines 1-2: commas are tokens
        (
            "True\tdie Schriftsteller , die die Wächter mögen , schwimmen",
            "False\tdie Schriftsteller , die die Wächter mögen , schwimmt",
            ("die Schriftsteller , die die Wächter mögen ,", "schwimmen", "schwimmt", "", False, ""),
        ),
        # de_evalset/obj_rel_within_anim.txt, lines 1-2
        (
            "True\tdie Schriftsteller , die die Wächter mögen , schwimmen",
            "False\tdie Schriftsteller , die die Wächter mag , schwimmen",
            ("die Schriftsteller , die die Wächter", "mögen", "mag", ", schwimmen", False, ", schwimmen"),
        ),
        # de_evalset/simple_agrmt.txt, lines 3-4: a German predicate adjective does not agree
        (
            "True\tdie Schriftsteller sind jung",
            "False\tdie Schriftsteller ist jung",
            ("die Schriftsteller", "sind", "ist", "jung", False, "jung"),
        ),
        # de_evalset/vp_coord.txt, lines 1-2
        (
            "True\tder Schriftsteller schwimmt und schwimmt",
            "False\tder Schriftsteller schwimmt und schwimmen",
            ("der Schriftsteller schwimmt und", "schwimmt", "schwimmen", "", False, ""),
        ),
    ],
    "he": [
        # he_evalset/simple_agrmt.txt, lines 1-2: the article ה split off
        ("True\tה מלצר רוקד", "False\tה מלצר רוקדים", ("ה מלצר", "רוקד", "רוקדים", "", False, "")),
        # he_evalset/subj_rel.txt, lines 1-2: the clitics ה and ש split off
        (
            "True\tה מלצר ש אוהב את ה שומר רוקד",
            "False\tה מלצר ש אוהב את ה שומר רוקדים",
            ("ה מלצר ש אוהב את ה שומר", "רוקד", "רוקדים", "", False, ""),
        ),
        # he_evalset/prep_anim.txt, lines 1-2
        (
            "True\tה מלצר מאחורי ה שומר רוקד",
            "False\tה מלצר מאחורי ה שומר רוקדים",
            ("ה מלצר מאחורי ה שומר", "רוקד", "רוקדים", "", False, ""),
        ),
    ],
    "ru": [
        # ru_evalset/simple_agrmt.txt, lines 3-4: past tense agrees in number
        ("True\tавторы ждали", "False\tавторы ждал", ("авторы", "ждали", "ждал", "", False, "")),
        # ru_evalset/simple_agrmt.txt, lines 7-8: a predicate adjective, no copula in the present
        ("True\tавторы старые", "False\tавторы старый", ("авторы", "старые", "старый", "", False, "")),
        # ru_evalset/subj_rel.txt, lines 1-2: commas are tokens
        (
            "True\tавторы , которые любят агентов , говорят",
            "False\tавторы , которые любят агентов , говорит",
            ("авторы , которые любят агентов ,", "говорят", "говорит", "", False, ""),
        ),
        # ru_evalset/vp_coord.txt, lines 1121-1122
        (
            "True\tавторы ждали и говорят",
            "False\tавторы ждали и говорит",
            ("авторы ждали и", "говорят", "говорит", "", False, ""),
        ),
    ],
}


def write(tmp_path: Path, lines: list[str], name: str = "set.txt", final_newline: bool = True) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")
    return path


def read(path: Path, skip_bad_rows: bool = False) -> tuple[object, object]:
    return clams.read_clams_file(path, "clams_xx_set", "clams-xx.set", skip_bad_rows=skip_bad_rows)


# --------------------------------------------------------------------------- names


def test_names() -> None:
    assert clams.LANGUAGES == ("en", "fr", "de", "he", "ru")
    assert clams.CONSTRUCTIONS[0] == "simple_agrmt" and len(clams.CONSTRUCTIONS) == 7
    assert list(clams.CONSTRUCTION_NAMES) == list(clams.CONSTRUCTIONS)
    assert clams.CONSTRUCTION_NAMES["obj_rel_within_anim"] == "In object relative clause"
    assert list(clams.ENGLISH_ONLY_NAMES) == list(clams.ENGLISH_ONLY)
    assert clams.source_name("fr", "simple_agrmt") == "clams_fr_simple_agrmt"
    assert clams.group_id("fr", "simple_agrmt") == "clams-fr.simple_agrmt"
    assert clams.constructions("fr") == clams.CONSTRUCTIONS
    assert clams.constructions("en") == clams.CONSTRUCTIONS + clams.ENGLISH_ONLY
    for lang in clams.LANGUAGES:
        for construction in clams.constructions(lang):
            assert _IDENTIFIER.fullmatch(clams.group_id(lang, construction))
    with pytest.raises(ValueError, match="no agreement set 'sent_comp' for 'fr'"):
        clams.source_name("fr", "sent_comp")
    with pytest.raises(ValueError, match="unknown CLAMS language 'it'"):
        clams.group_id("it", "simple_agrmt")


def test_manifest_lists_every_clams_set_with_the_file_name_the_reader_expects() -> None:
    assert clams.FORMAT in FORMATS
    sources = load_manifest(MANIFEST)
    expected = {clams.source_name(lang, c): (lang, c) for lang in clams.LANGUAGES for c in clams.constructions(lang)}
    assert {name for name, s in sources.items() if s.format == clams.FORMAT} == set(expected)
    assert {name for name in sources if name.startswith("clams_")} == set(expected)  # no reflexive or NPI set
    assert len(expected) == 4 * 7 + 15
    for name, (lang, construction) in expected.items():
        source = sources[name]
        assert source.url == (
            f"https://github.com/aaronmueller/clams/raw/{COMMIT}/{lang}_evalset/{clams.file_name(construction)}"
        )
        assert local_filename(source) == clams.file_name(construction) == f"{construction}.txt"
        assert source.mirror_path is None and source.archive_member is None
        assert source.license == "Apache-2.0 (CLAMS repository)"
        assert len(source.sha256) == 1


# --------------------------------------------------------------------------- real pairs


@pytest.mark.parametrize("lang", clams.LANGUAGES)
def test_real_pairs(lang: str, tmp_path: Path) -> None:
    cases = REAL_PAIRS[lang]
    lines = [line for true, false, _ in cases for line in (true, false)]
    # the English files end without a newline, the others with one
    path = write(tmp_path, lines, final_newline=lang != "en")
    pairs, rejects = clams.read_clams_file(path, f"clams_{lang}_x", f"clams-{lang}.x")
    assert rejects.empty and list(rejects.columns) == list(REJECT_COLUMNS)
    assert list(pairs.columns) == list(clams.PAIR_COLUMNS)
    assert str(pairs["differs_after"].dtype) == "bool" and str(pairs["line"].dtype) == "int64"
    assert pairs["line"].tolist() == [1 + 2 * i for i in range(len(cases))]
    assert set(pairs["group"]) == {f"clams-{lang}.x"} and set(pairs["source"]) == {f"clams_{lang}_x"}
    got = list(
        pairs[["left", "correct", "incorrect", "right", "differs_after", "false_right"]].itertuples(
            index=False, name=None
        )
    )
    assert got == [expected for _, _, expected in cases]
    for (true, false, _), row in zip(cases, pairs.itertuples(), strict=True):
        # the split puts the sentences back together
        assert " ".join(filter(None, (row.left, row.correct, row.right))) == true.split("\t")[1]
        assert " ".join(filter(None, (row.left, row.incorrect, row.false_right))) == false.split("\t")[1]


def test_blank_lines_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"True\tthe author laughs\r\n\r\nFalse\tthe author laugh\r\n\n")
    pairs, _ = read(path)
    assert pairs[["line", "left", "correct", "incorrect", "right"]].values.tolist() == [
        [1, "the author", "laughs", "laugh", ""]
    ]


# --------------------------------------------------------------------------- errors

GOOD = ["True\tthe author laughs", "False\tthe author laugh"]


@pytest.mark.parametrize(
    ("lines", "line", "reason"),
    [
        (
            ["True the author laughs", "False\tthe author laugh"],
            1,
            "expected exactly one tab (label, sentence), found 0",
        ),
        (
            [*GOOD, "True\tthe author\tlaughs", "False\tthe author laugh"],
            3,
            "exactly one tab (label, sentence), found 2",
        ),
        (["true\tthe author laughs", "False\tthe author laugh"], 1, "unknown label 'true' (expected True or False)"),
        ([*GOOD, "True\t ", "False\tthe author laugh"], 3, "empty sentence"),
        (["False\tthe author laugh", *GOOD], 1, "False line not preceded by its True line"),
        ([*GOOD, "False\tthe author laugh"], 3, "False line not preceded by its True line"),
        (["True\tthe author laughs", *GOOD], 1, "True line not followed by its False line (line 2 is True too)"),
        ([*GOOD, "True\tthe author laughs"], 3, "True line not followed by its False line (end of file)"),
        (
            [*GOOD, "True\tthe author laughs", "False\tthe author laughs"],
            3,
            "the True sentence and its False sentence (line 4) are identical",
        ),
        (
            [*GOOD, "True\tthe authors laugh", "False\tthe authors laugh loudly"],
            3,
            "the True sentence has 3 words, its False sentence (line 4) 4",
        ),
        (
            ["True\tlaughs the author", "False\tlaugh the author"],
            1,
            "the sentences differ at the first word ('laughs' / 'laugh'): no left context",
        ),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, lines: list[str], line: int, reason: str) -> None:
    path = write(tmp_path, lines)
    with pytest.raises(InputError) as info:
        read(path)
    assert info.value.path == str(path) and info.value.line == line
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="no CLAMS pairs: the file is empty") as info:
        read(path)
    assert info.value.path == str(path) and info.value.line is None
    pairs, rejects = read(path, skip_bad_rows=True)
    assert pairs.empty and rejects.empty and list(pairs.columns) == list(clams.PAIR_COLUMNS)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read(tmp_path / "nope.txt")


def test_skip_bad_rows_keeps_the_good_pairs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lines = [
        "True\tthe author laughs",  # 1: not followed by its False line
        *GOOD,  # 2-3
        "False\tthe author laugh",  # 4: no True line before it
        "maybe\tthe author laughs",  # 5: unknown label
        "True\tthe authors laugh",  # 6-7: a good pair
        "False\tthe authors laughs",
        "True\tthe author swims",  # 8-9: identical
        "False\tthe author swims",
    ]
    path = write(tmp_path, lines)
    with caplog.at_level(logging.WARNING):
        pairs, rejects = read(path, skip_bad_rows=True)
    assert pairs["line"].tolist() == [2, 6] and pairs["correct"].tolist() == ["laughs", "laugh"]
    assert list(rejects.columns) == list(REJECT_COLUMNS)
    assert rejects["line"].tolist() == [1, 4, 5, 8]
    assert set(rejects["source"]) == {"clams_xx_set"}
    assert rejects["reason"].str.contains("not followed|not preceded|unknown label|identical").all()
    assert rejects["raw"].tolist() == [lines[0], lines[3], lines[4], f"{lines[7]}\n{lines[8]}"]
    assert "skipped 4 malformed line(s) or pair(s)" in caplog.text


def test_everything_rejected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, ["False\tthe author laugh"])
    with pytest.raises(InputError, match="not preceded") as info:
        read(path)
    assert info.value.line == 1
    with caplog.at_level(logging.WARNING):
        pairs, rejects = read(path, skip_bad_rows=True)
    assert pairs.empty and len(rejects) == 1
    assert "no usable CLAMS pairs: all 1 line(s) or pair(s) rejected (first, line 1:" in caplog.text

"""Tests for verbeval.multilingual.lexicons.he: hspell's word list read from its Debian package.

The fast tests build a small hspell ``.deb`` here, with an encoder of the formats the reader decodes
(front-coded ``hebrew.wgz``, ``.desc`` codes, base-94 ``.stems``, the ``dmasks`` table in an ELF
``linginfo.o`` in ``libhspell.a``, all in an ``ar``/``tar.xz`` package). Its 27 words and their
analyses are copied from hspell 1.4 (``hspell -l`` of the real package shows the same analyses;
analyses whose stem is not among the 27 words are left out), each dmask as hspell's own table has
it; the description codes are those of the fixture's smaller table. (hspell's word list is
AGPL-3.0-or-later, Nadav Har'El and Dan Kenigsberg: these 27 words and analyses are quoted from it.)
The end-to-end test reads the real package from the verbeval cache (``$VERBEVAL_CACHE_DIR/debian``,
where the workflow's ``fetch_hspell`` puts it).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import struct
import tarfile
import time
from pathlib import Path

import pandas as pd
import pytest

from verbeval.core.errors import InputError
from verbeval.multilingual.lexicons import LEXICON_COLUMNS, he

#: word -> (stem, dmask) of each analysis, as hspell 1.4 lists them (a subset: see the docstring).
FIXTURE: dict[str, list[tuple[str, int]]] = {
    "רקד": [("רקד", 630)],  # past 3 m sg
    "רוקד": [("רקד", 838), ("רקד", 131910)],  # present m sg; the same in construct state
    "רוקדים": [("רקד", 966)],
    "רוקדת": [("רקד", 842), ("רקד", 131914)],
    "רוקדות": [("רקד", 970), ("רקד", 132042)],
    "רוקדי": [("רקד", 132038)],  # present m pl, construct state
    "אהב": [("אהב", 1382), ("אהב", 630)],
    "אוהב": [("אהב", 1106), ("אוהב", 69), ("אהב", 838), ("אוהב", 131141), ("אהב", 131910)],
    "אוהבים": [("אוהב", 197), ("אהב", 966)],
    "אוהבת": [("אהב", 842), ("אהב", 131914)],
    "אוהבות": [("אהב", 970), ("אהב", 132042)],
    "אוהבו": [("אהב", 60230), ("אוהב", 59461)],  # with the suffix "him"
    "חי": [("חי", 630), ("חי", 71), ("חי", 69), ("חי", 834), ("חי", 131143)],
    "חיה": [("חי", 75), ("חיה", 73), ("חי", 770)],
    "חיות": [("חי", 258), ("חיה", 201), ("חי", 203), ("חיות", 73), ("חי", 770)],
    "חיים": [("חי", 197), ("חי", 199), ("חי", 962)],
    "מלצר": [("מלצר", 1382), ("מלצר", 258), ("מלצר", 630), ("מלצר", 69), ("מלצר", 131141)],
    "מלצרים": [("מלצר", 197)],
    "גבה": [("גבה", 1382), ("גבה", 630), ("גבה", 73)],
    "גובה": [("גובה", 630), ("גובה", 69), ("גבה", 838), ("גבה", 842), ("גובה", 131141), ("גבה", 131910)],  # fmt: skip
    "גובהים": [("גבה", 966)],
    "גובהת": [("גבה", 842), ("גבה", 131914)],
    "גובהות": [("גבה", 970), ("גבה", 132042)],
    "גובות": [("גבה", 970), ("גבה", 132042)],
    "גובים": [("גבה", 966)],
    "דובר": [("דובר", 630), ("דובר", 69), ("דובר", 131141)],
    "דוברים": [("דובר", 197)],
}

#: The fixture's lexicon, worked out by hand.
EXPECTED_ROWS = [
    ("אהב", "אוהב", "אוהבים", "m"),
    ("גבה", "גובה", "גובהים", "m"),
    ("גבה", "גובה", "גובים", "m"),
    ("חי", "חי", "חיים", "m"),
    ("רקד", "רוקד", "רוקדים", "m"),
    ("אהב", "אוהבת", "אוהבות", "f"),
    ("גבה", "גובה", "גובות", "f"),
    ("גבה", "גובהת", "גובהות", "f"),
    ("חי", "חיה", "חיות", "f"),
    ("רקד", "רוקדת", "רוקדות", "f"),
]


# ---------------------------------------------------------------- the encoder


def encode_wgz(words: list[bytes]) -> bytes:
    """Front-code a sorted word list as hspell's wzip does (the inverse of wunzip.c)."""
    out = bytearray(words[0])
    for prev, word in zip(words, words[1:], strict=False):
        common = 0
        while common < min(len(prev), len(word)) and prev[common] == word[common]:
            common += 1
        out += str(len(prev) - common).encode() + word[common:]
    return bytes(out)


def ar_archive(members: list[tuple[str, bytes]]) -> bytes:
    out = bytearray(b"!<arch>\n")
    for name, data in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode("ascii")
        assert len(header) == 60
        out += header + data + (b"\n" if len(data) % 2 else b"")
    return bytes(out)


def elf_object(symbol: str, data: bytes) -> bytes:
    """A little-endian ELF64 relocatable object whose ``.data`` is ``data``, named by ``symbol``."""
    strtab = b"\0" + symbol.encode("ascii") + b"\0"
    symtab = bytes(24) + struct.pack("<IBBHQQ", 1, 0x11, 0, 1, 0, len(data))
    body_offset = 64
    offsets = [body_offset, body_offset + len(data), body_offset + len(data) + len(symtab)]
    shoff = offsets[2] + len(strtab)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 4, 0)
    sections = [
        bytes(64),
        struct.pack("<IIQQQQIIQQ", 0, 1, 3, 0, offsets[0], len(data), 0, 0, 8, 0),
        struct.pack("<IIQQQQIIQQ", 0, 2, 0, 0, offsets[1], len(symtab), 3, 1, 8, 24),
        struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, offsets[2], len(strtab), 0, 0, 1, 0),
    ]
    return header + data + symtab + strtab + b"".join(sections)


def tar_xz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo("./" + name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return lzma.compress(buffer.getvalue())


def hspell_deb(fixture: dict[str, list[tuple[str, int]]]) -> bytes:
    """A Debian package laid out as hspell's, holding ``fixture``'s words and analyses."""
    words = sorted(fixture, key=lambda w: w.encode(he.ENCODING))
    index = {w: i for i, w in enumerate(words)}
    dmasks: list[int] = []
    desc_lines, stem_lines = [], []
    for word in words:
        codes, stems = b"", b""
        for stem, dmask in fixture[word]:
            if dmask not in dmasks:
                dmasks.append(dmask)
            i = dmasks.index(dmask)
            codes += bytes([65 + i % 26, 65 + i // 26])
            p = index[stem]
            stems += bytes([33 + p % 94, 33 + p // 94 % 94, 33 + p // (94 * 94)])
        desc_lines.append(codes + b"\n")
        stem_lines.append(stems + b"\n")

    def gz(data: bytes) -> bytes:
        return gzip.compress(data, mtime=0)

    linginfo = elf_object("dmasks", struct.pack(f"<{len(dmasks)}i", *dmasks))
    files = {
        he.WGZ: gz(encode_wgz([w.encode(he.ENCODING) for w in words])),
        he.WGZ + ".desc": gz(b"".join(desc_lines)),
        he.WGZ + ".stems": gz(b"".join(stem_lines)),
        he.WGZ + ".sizes": b"0 0 0\n0 0\n",
        he.LIBHSPELL: ar_archive([("/", b""), ("dict_radix.o/", b"x"), ("linginfo.o/", linginfo)]),
    }
    return ar_archive(
        [
            ("debian-binary", b"2.0\n"),
            ("control.tar.xz", tar_xz({"control": b"Package: hspell\n"})),
            ("data.tar.xz", tar_xz(files)),
        ]
    )


@pytest.fixture(scope="module")
def fixture_deb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("hspell") / he.DEB_NAME
    path.write_bytes(hspell_deb(FIXTURE))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- fast tests


def test_source_is_pinned() -> None:
    assert he.SOURCE.language == "he"
    assert he.SOURCE.package == "debian:hspell"
    assert he.SOURCE.version == "1.4-3.1"
    assert he.SOURCE.sha256 == "5f15c18904d2e95adb726a1452f19f94fca1d582a1f6f5304f115663b37df58e"
    assert he.SOURCE.url.endswith("/pool/main/h/hspell/" + he.DEB_NAME)
    assert he.SOURCE.licence == "AGPL-3.0-or-later"
    assert he.SOURCE.cells == ("m", "f")


def test_unzip_words_reads_front_coding() -> None:
    # the opening of the real hebrew.wgz: א"י, then "2" drops two letters (leaving א) and so on
    words = list(he.unzip_words('א"י2אבד0ה0ו2ך'.encode(he.ENCODING)))
    assert [w.decode(he.ENCODING) for w in words] == ['א"י', "אאבד", "אאבדה", "אאבדהו", "אאבדך"]
    assert encode_wgz(words) == 'א"י2אבד0ה0ו2ך'.encode(he.ENCODING)


def test_decode_dmask() -> None:
    assert he.decode_dmask(838) == ("verb", "m", "", "sg", "present", False, False, False)
    assert he.decode_dmask(970) == ("verb", "f", "", "pl", "present", False, False, False)
    assert he.decode_dmask(131910) == ("verb", "m", "", "sg", "present", True, False, False)
    assert he.decode_dmask(630) == ("verb", "m", "3", "sg", "past", False, False, False)
    assert he.decode_dmask(1382) == ("verb", "m", "2", "sg", "imperative", False, False, False)
    assert he.decode_dmask(60230)[:6] == ("verb", "m", "", "sg", "present", False)
    assert he.decode_dmask(60230)[6]  # object suffix
    assert he.decode_dmask(201) == ("noun", "f", "", "pl", "", False, False, False)
    assert he.decode_dmask(834) == ("verb", "", "", "sg", "present", False, False, False)


def test_read_hspell_decodes_the_fixture(fixture_deb: tuple[Path, str]) -> None:
    path, sha = fixture_deb
    analyses = he.read_hspell(path, sha)
    assert tuple(analyses.columns) == he.ANALYSIS_COLUMNS
    assert len(analyses) == sum(len(v) for v in FIXTURE.values())
    got = {(w, lemma, d) for w, lemma, d in zip(analyses.word, analyses.lemma, analyses.dmask, strict=True)}
    assert got == {(w, lemma, d) for w, an in FIXTURE.items() for lemma, d in an}
    rokdim = analyses[analyses.word == "רוקדים"].iloc[0]
    assert (rokdim.lemma, rokdim.pos, rokdim.gender, rokdim.number, rokdim.tense) == (
        "רקד", "verb", "m", "pl", "present"
    )  # fmt: skip
    waiter = analyses[analyses.word == "מלצרים"].iloc[0]
    assert (waiter.lemma, waiter.pos, waiter.gender, waiter.number) == ("מלצר", "noun", "m", "pl")


def test_build_lexicon_on_the_fixture(fixture_deb: tuple[Path, str]) -> None:
    path, sha = fixture_deb
    lexicon = he.build_lexicon(path, sha)
    assert tuple(lexicon.columns) == LEXICON_COLUMNS
    assert all(lexicon[c].dtype == object or pd.api.types.is_string_dtype(lexicon[c]) for c in LEXICON_COLUMNS)
    assert list(lexicon.index) == list(range(len(lexicon)))
    expected = [(*row, "debian:hspell==1.4-3.1") for row in EXPECTED_ROWS]
    assert list(lexicon.itertuples(index=False, name=None)) == expected
    again = he.build_lexicon(path, sha)
    assert lexicon.to_csv(index=False).encode() == again.to_csv(index=False).encode()
    assert he.source_lemma_count(path, sha) == 7  # רקד אהב חי מלצר גבה גובה דובר


def test_lexicon_drops_equal_forms_and_dedups_across_lemmas() -> None:
    rows = [
        ("w1", "L2", "verb", "m", "", "sg", "present", False, False, False, 0),
        ("w1s", "L2", "verb", "m", "", "pl", "present", False, False, False, 0),
        ("w1", "L1", "verb", "m", "", "sg", "present", False, False, False, 0),
        ("w1s", "L1", "verb", "m", "", "pl", "present", False, False, False, 0),
        ("x", "L3", "verb", "f", "", "sg", "present", False, False, False, 0),
        ("x", "L3", "verb", "f", "", "pl", "present", False, False, False, 0),
    ]
    analyses = pd.DataFrame(rows, columns=list(he.ANALYSIS_COLUMNS))
    lexicon = he.lexicon_from_analyses(analyses)
    assert list(lexicon.itertuples(index=False, name=None)) == [("L1", "w1", "w1s", "m", he.SOURCE_LABEL)]


def test_regular_plural_and_genderless_forms() -> None:
    assert he.regular_plural("רוקד", "m") == "רוקדים"
    assert he.regular_plural("קונה", "m") == "קונים"
    assert he.regular_plural("מאלף", "m") == "מאלפים"
    assert he.regular_plural("רץ", "m") == "רצים"
    assert he.regular_plural("רוקדת", "f") == "רוקדות"
    assert he.regular_plural("קונה", "f") == "קונות"
    assert he.regular_plural("מובנית", "f") == "מובנות"
    assert he.genderless_cell("חי", "sg") == ("m", "sg")
    assert he.genderless_cell("חיים", "pl") == ("m", "pl")
    assert he.genderless_cell("חיה", "") == ("f", "sg")
    assert he.genderless_cell("חיות", "") == ("f", "pl")
    assert he.genderless_cell("חי", "") is None


def test_checksum_mismatch_and_unreadable_files(tmp_path: Path, fixture_deb: tuple[Path, str]) -> None:
    path, sha = fixture_deb
    with pytest.raises(InputError, match="is not the pinned") as mismatch:
        he.read_hspell(path)  # the fixture is not the pinned package
    assert "\n" not in str(mismatch.value)
    with pytest.raises(InputError, match="cannot read") as missing:
        he.build_lexicon(tmp_path / "absent.deb")
    assert "\n" not in str(missing.value)
    junk = tmp_path / "junk.deb"
    junk.write_bytes(b"not a package")
    with pytest.raises(InputError, match="not a readable hspell package") as bad:
        he.read_hspell(junk, hashlib.sha256(b"not a package").hexdigest())
    assert "\n" not in str(bad.value)
    truncated = tmp_path / "truncated.deb"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(InputError, match="not a readable hspell package"):
        he.read_hspell(truncated, hashlib.sha256(truncated.read_bytes()).hexdigest())


def test_fetch_hspell_is_atomic_and_reuses_a_verified_copy(tmp_path: Path, fixture_deb: tuple[Path, str]) -> None:
    path, sha = fixture_deb
    url = path.as_uri()  # urllib reads file:// URLs: no network
    dest = tmp_path / "cache"
    with pytest.raises(InputError, match="is not the pinned"):
        he.fetch_hspell(dest, url=url, sha256="0" * 64)
    assert list(dest.iterdir()) == []  # nothing left behind
    got = he.fetch_hspell(dest, url=url, sha256=sha)
    assert got == dest / he.DEB_NAME and got.read_bytes() == path.read_bytes()
    stamp = got.stat().st_mtime_ns
    assert he.fetch_hspell(dest, url=(tmp_path / "gone.deb").as_uri(), sha256=sha) == got
    assert got.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in dest.iterdir()) == [he.DEB_NAME]


# ---------------------------------------------------------------- the real package

#: Hand-checked rows of the real lexicon (hspell -l on each form agrees): the CLAMS verbs and more.
REAL_ROWS = [
    ("רקד", "רוקד", "רוקדים", "m"),
    ("רקד", "רוקדת", "רוקדות", "f"),
    ("אהב", "אוהב", "אוהבים", "m"),
    ("אהב", "אוהבת", "אוהבות", "f"),
    ("אכל", "אוכל", "אוכלים", "m"),
    ("גר", "גר", "גרים", "m"),
    ("גר", "גרה", "גרות", "f"),
    ("חי", "חי", "חיים", "m"),
    ("חי", "חיה", "חיות", "f"),
    ("ישן", "ישן", "ישנים", "m"),
    ("כתב", "כותב", "כותבים", "m"),
    ("בישל", "מבשל", "מבשלים", "m"),
    ("הכיר", "מכיר", "מכירים", "m"),
    ("העריץ", "מעריץ", "מעריצים", "m"),
    ("שיחק", "משחק", "משחקים", "m"),
    ("נסע", "נוסע", "נוסעים", "m"),
    ("צחק", "צוחק", "צוחקים", "m"),
    ("רץ", "רץ", "רצים", "m"),
    ("רץ", "רצה", "רצות", "f"),
    ("שחה", "שוחה", "שוחים", "m"),
    ("שחה", "שוחה", "שוחות", "f"),
    ("שנא", "שונא", "שונאים", "m"),
    ("שתה", "שותה", "שותים", "m"),
    ("השווה", "משווה", "משוות", "f"),
]


@pytest.mark.e2e
def test_the_real_hspell_package() -> None:
    """The pinned package itself (the end-to-end tier downloads it into the verbeval cache, sha256 checked,
    when it is not there yet)."""
    path = he.cached_deb_path()
    if not path.is_file():
        path = he.fetch_hspell(path.parent)
    start = time.perf_counter()
    lexicon = he.build_lexicon(path)
    assert time.perf_counter() - start < 60
    assert tuple(lexicon.columns) == LEXICON_COLUMNS
    assert lexicon["cell"].value_counts().to_dict() == {"m": 4629, "f": 4662}
    assert lexicon.groupby("cell")["lemma"].nunique().to_dict() == {"m": 4617, "f": 4614}
    assert not (lexicon["sing"] == lexicon["plur"]).any()
    assert not lexicon.duplicated(["cell", "sing", "plur"]).any()
    rows = set(lexicon[["lemma", "sing", "plur", "cell"]].itertuples(index=False, name=None))
    assert set(REAL_ROWS) <= rows
    assert (lexicon["source"] == "debian:hspell==1.4-3.1").all()
    assert he.source_lemma_count(path) == 4691
    # ktiv male: no niqqud anywhere
    assert not lexicon[["sing", "plur"]].stack().str.contains("[\u0591-\u05c7]").any()

"""Tests for verbeval.core.manifest, fetch, verified, mirror and verb_list: the manifest, mirror mapping,
fetching, verified copies, building a mirror, and The Giant Verb List."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import NOT_DOWNLOADED_FORMATS, mirror_for_tests
from verbeval.core import verb_list
from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.fetch import fetch_source
from verbeval.core.io import sha256_file
from verbeval.core.manifest import Source, load_manifest, local_filename, mirror_location
from verbeval.core.mirror import build_mirror
from verbeval.core.verb_list import read_giant_verb_list
from verbeval.core.verified import content_digest, is_verified, set_aside_unverified, verb_index_lines
from verbeval.multilingual import clams

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = REPO_ROOT / "resources" / "manifest.yaml"

ML_STEMS = [
    "long_vp_coord",
    "obj_rel_across_anim",
    "obj_rel_across_inanim",
    "obj_rel_no_comp_across_anim",
    "obj_rel_no_comp_across_inanim",
    "obj_rel_no_comp_within_anim",
    "obj_rel_no_comp_within_inanim",
    "obj_rel_within_anim",
    "obj_rel_within_inanim",
    "prep_anim",
    "prep_inanim",
    "sent_comp",
    "simple_agrmt",
    "subj_rel",
    "vp_coord",
]
BLIMP_UIDS = [
    "distractor_agreement_relational_noun",
    "distractor_agreement_relative_clause",
    "irregular_plural_subject_verb_agreement_1",
    "regular_plural_subject_verb_agreement_1",
]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_source(url: str, data: bytes, **overrides: object) -> Source:
    fields: dict[str, object] = dict(
        name="toy",
        url=url,
        sha256=(sha(data),),
        format="ml_jsonl",
        mirror_path=None,
        description="toy source",
        license="MIT",
    )
    fields.update(overrides)
    return Source(**fields)  # type: ignore[arg-type]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --------------------------------------------------------------------------- manifest


def test_manifest_lists_every_source_once() -> None:
    sources = load_manifest(MANIFEST)
    expected = (
        {f"ml_{s}" for s in ML_STEMS}
        | {f"blimp_{u}" for u in BLIMP_UIDS}
        | {"blimp_distractor_agreement_relative_clause_paper"}
        | {f"tse_blimp_{u}" for u in BLIMP_UIDS if u != "distractor_agreement_relative_clause"}
        | {"verbs_combined", "giant_verb_list", "simverb_3500", "veridicality"}
        | {clams.source_name(lang, c) for lang in clams.LANGUAGES for c in clams.constructions(lang)}
    )
    assert set(sources) == expected
    assert len(sources) == 27 + 43
    assert len({s.url for s in sources.values()}) == len(sources)
    formats = {name: s.format for name, s in sources.items()}
    assert {formats[f"ml_{s}"] for s in ML_STEMS} == {"ml_jsonl"}
    assert {formats[f"blimp_{u}"] for u in BLIMP_UIDS} == {"blimp_jsonl"}
    assert formats["verbs_combined"] == "verb_csv"
    assert formats["giant_verb_list"] == "giant_verb_list"
    assert formats["simverb_3500"] == "simverb_tsv"
    assert formats["veridicality"] == "veridicality_tsv"
    assert {f for name, f in formats.items() if name.startswith("clams_")} == {clams.FORMAT}
    for stem in ML_STEMS:
        assert sources[f"ml_{stem}"].url.endswith(f"/data/ML/{stem}_all.jsonl")
    for uid in BLIMP_UIDS:
        assert "github.com/alexwarstadt/blimp/raw/" in sources[f"blimp_{uid}"].url
    # the paper's copy (refining-tse data/blimp) of the set whose release sample differs
    paper = sources["blimp_distractor_agreement_relative_clause_paper"]
    assert paper.format == "blimp_jsonl"
    assert paper.url.endswith(
        "/refining-tse/raw/db423f80246ba2d7c2fc602fc514943949cfaf71"
        "/data/blimp/distractor_agreement_relative_clause.jsonl"
    )
    assert sources["ml_simple_agrmt"].url == (
        "https://github.com/bnewm0609/refining-tse/raw/db423f80246ba2d7c2fc602fc514943949cfaf71"
        "/data/ML/simple_agrmt_all.jsonl"
    )
    # The giant verb list may be published in two forms, so its checksum is a list.
    assert isinstance(sources["giant_verb_list"].sha256, tuple)


def test_manifest_matches_the_shared_mirror(data_dir: Path, session_environ: dict[str, str]) -> None:
    mirror = data_dir
    downloaded = mirror_for_tests(session_environ) is None  # the tests' own download: not every format
    for name, source in load_manifest(MANIFEST).items():
        if downloaded and source.format in NOT_DOWNLOADED_FORMATS:
            continue
        location = mirror_location(source, mirror)
        assert location.is_file(), f"{name}: {location} missing from the mirror"
        assert content_digest(source, location) in source.sha256, f"{name}: checksum of {location} differs"
        assert local_filename(source) == location.name


def write_manifest(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(body, encoding="utf-8")
    return path


GOOD_ENTRY = """\
  {name}:
    url: https://example.org/a/{name}.txt
    sha256: {digest}
    format: ml_jsonl
    description: d
    license: MIT
"""


def test_manifest_accepts_a_list_of_checksums(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path,
        "sources:\n  a:\n    url: file:///x/a.txt\n    sha256:\n      - "
        + "A" * 64
        + "\n      - "
        + "b" * 64
        + "\n    format: verb_csv\n    description: d\n    license: MIT\n"
        "    mirror_path: lists/a.txt\n",
    )
    source = load_manifest(path)["a"]
    assert source.sha256 == ("a" * 64, "b" * 64)
    assert source.mirror_path == "lists/a.txt"
    assert source.archive_member is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("sources:\n" + GOOD_ENTRY.format(name="a", digest="ab" * 31), "64 hexadecimal"),
        ("sources:\n" + GOOD_ENTRY.format(name="a", digest="0" * 64), "quoted"),
        ("sources:\n" + GOOD_ENTRY.format(name="a", digest="g" * 64), "64 hexadecimal"),
        (
            "sources:\n" + GOOD_ENTRY.format(name="a", digest="ab" * 32).replace("ml_jsonl", "pdf"),
            "unknown format 'pdf'",
        ),
        (
            "sources:\n" + GOOD_ENTRY.format(name="a", digest="ab" * 32).replace("    license: MIT\n", ""),
            "missing key(s) license",
        ),
        ("sources:\n" + GOOD_ENTRY.format(name="a", digest="ab" * 32) + "    sha: x\n", "unknown key(s) sha"),
        ("sources:\n" + GOOD_ENTRY.format(name="a", digest="ab" * 32).replace("https:", "ftp:"), "ftp"),
        (
            "sources:\n"
            + GOOD_ENTRY.format(name="a", digest="ab" * 32)
            + GOOD_ENTRY.format(name="a", digest="cd" * 32),
            "duplicate key 'a'",
        ),
        ("sources:\n" + GOOD_ENTRY.format(name="a", digest="ab" * 32) + "    mirror_path: ../x\n", "'..'"),
        ("sources: {}\n", "non-empty mapping"),
        ("sources: [\n", "invalid manifest YAML"),
    ],
)
def test_manifest_validation_errors_name_file_and_entry(tmp_path: Path, body: str, message: str) -> None:
    path = write_manifest(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_manifest(path)
    text = str(info.value)
    assert str(path) in text
    assert message in text
    if "sources: " not in body:
        assert "'a'" in text


def test_manifest_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read manifest"):
        load_manifest(tmp_path / "nope.yaml")


# --------------------------------------------------------------------------- paths


def test_mirror_location_follows_url_layout(tmp_path: Path) -> None:
    source = make_source("https://github.com/o/r/raw/c/p/q.jsonl", b"")
    assert mirror_location(source, tmp_path) == tmp_path / "github.com/o/r/raw/c/p/q.jsonl"
    with_query = make_source("https://host.org/dir/f.zip?sequence=1", b"")
    assert mirror_location(with_query, tmp_path) == tmp_path / "host.org/dir/f.zip"
    explicit = make_source("https://x.org/a.pdf", b"", mirror_path="gvl/list.txt")
    assert mirror_location(explicit, tmp_path) == tmp_path / "gvl/list.txt"


def test_local_filename() -> None:
    assert local_filename(make_source("https://github.com/o/r/raw/c/data/x_all.jsonl", b"")) == "x_all.jsonl"
    assert local_filename(make_source("https://x.org/a.pdf", b"", mirror_path="gvl/list.txt")) == "list.txt"
    assert local_filename(make_source("https://x.org/d.zip", b"", archive_member="data/S.txt")) == "S.txt"


# --------------------------------------------------------------------------- fetching


def test_fetch_from_mirror(tmp_path: Path) -> None:
    data = b'{"sentence_good": "a b", "sentence_bad": "a c", "label": -1}\n'
    source = make_source("https://github.com/o/r/raw/c/data/t.jsonl", data)
    mirror = tmp_path / "mirror"
    location = mirror_location(source, mirror)
    location.parent.mkdir(parents=True)
    location.write_bytes(data)
    dest = tmp_path / "out" / "toy" / local_filename(source)
    assert fetch_source(source, dest, mirror_dir=mirror) == dest
    assert dest.read_bytes() == data
    assert leftovers(dest.parent) == ["t.jsonl"]


def test_fetch_real_mirror_entry(data_dir: Path, tmp_path: Path) -> None:
    source = load_manifest(MANIFEST)["ml_simple_agrmt"]
    dest = fetch_source(source, tmp_path / local_filename(source), mirror_dir=data_dir)
    assert sha256_file(dest) == source.sha256[0]
    assert sum(1 for _ in dest.open()) == 140


def test_fetch_missing_mirror_file(tmp_path: Path) -> None:
    source = make_source("https://github.com/o/r/raw/c/data/absent.jsonl", b"x")
    dest = tmp_path / "out" / "absent.jsonl"
    with pytest.raises(VerbevalError) as info:
        fetch_source(source, dest, mirror_dir=tmp_path / "mirror")
    text = str(info.value)
    assert "'toy'" in text
    assert str(tmp_path / "mirror" / "github.com/o/r/raw/c/data/absent.jsonl") in text
    assert not dest.exists()


def test_fetch_file_url(tmp_path: Path) -> None:
    data = b"idx,sing,plur,freq\n_,runs,run,_\n"
    src = tmp_path / "remote" / "verbs.csv"
    src.parent.mkdir()
    src.write_bytes(data)
    source = make_source(src.as_uri(), data)
    dest = tmp_path / "out" / local_filename(source)
    fetch_source(source, dest)
    assert dest.read_bytes() == data
    assert leftovers(dest.parent) == ["verbs.csv"]


def test_fetch_file_url_missing(tmp_path: Path) -> None:
    source = make_source((tmp_path / "nope.csv").as_uri(), b"")
    with pytest.raises(VerbevalError, match="download of file://"):
        fetch_source(source, tmp_path / "out" / "nope.csv")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on 127.0.0.1; yields (directory, base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_fetch_http(http_root: tuple[Path, str], tmp_path: Path) -> None:
    root, base = http_root
    data = b"verb1\tverb2\tV\t5.0\tNONE\n" * 2000
    (root / "sub").mkdir()
    (root / "sub" / "SimVerb.txt").write_bytes(data)
    source = make_source(f"{base}/sub/SimVerb.txt", data)
    dest = tmp_path / "out" / local_filename(source)
    fetch_source(source, dest, timeout=10)
    assert dest.read_bytes() == data
    assert leftovers(dest.parent) == ["SimVerb.txt"]


def test_fetch_http_404(http_root: tuple[Path, str], tmp_path: Path) -> None:
    _, base = http_root
    source = make_source(f"{base}/missing.txt", b"")
    dest = tmp_path / "out" / "missing.txt"
    with pytest.raises(VerbevalError) as info:
        fetch_source(source, dest, timeout=10)
    text = str(info.value)
    assert f"{base}/missing.txt" in text
    assert "HTTP 404" in text
    assert "'toy'" in text
    assert not dest.exists()
    assert not dest.parent.exists() or leftovers(dest.parent) == []


def test_fetch_http_zip_member(http_root: tuple[Path, str], tmp_path: Path) -> None:
    root, base = http_root
    data = b"take\tremove\tV\t6.81\tSYNONYMS\n"
    with zipfile.ZipFile(root / "simverb.zip", "w") as zf:
        zf.writestr("data/README.txt", "readme")
        zf.writestr("data/SimVerb-3500.txt", data)
    source = make_source(f"{base}/simverb.zip", data, archive_member="data/SimVerb-3500.txt")
    dest = tmp_path / "out" / local_filename(source)
    fetch_source(source, dest, timeout=10)
    assert dest.read_bytes() == data
    assert leftovers(dest.parent) == ["SimVerb-3500.txt"]
    # A mirror holding the archive itself (URL layout) works too.
    mirror = tmp_path / "mirror"
    location = mirror_location(source, mirror)
    location.parent.mkdir(parents=True)
    location.write_bytes((root / "simverb.zip").read_bytes())
    dest2 = tmp_path / "out2" / local_filename(source)
    fetch_source(source, dest2, mirror_dir=mirror)
    assert dest2.read_bytes() == data
    # A missing member is reported by name.
    wrong = dataclasses.replace(source, archive_member="data/nope.txt")
    with pytest.raises(VerbevalError, match="no member 'data/nope.txt'"):
        fetch_source(wrong, tmp_path / "out3" / "nope.txt", timeout=10)
    assert leftovers(tmp_path / "out3") == []


@pytest.mark.parametrize("via", ["mirror", "file_url", "http"])
def test_checksum_mismatch_leaves_nothing(via: str, http_root: tuple[Path, str], tmp_path: Path) -> None:
    root, base = http_root
    data = b"the real bytes\n"
    wrong = "0" * 64
    mirror = tmp_path / "mirror"
    if via == "http":
        (root / "f.txt").write_bytes(data)
        source = make_source(f"{base}/f.txt", data, sha256=(wrong,), name="bad_source")
    else:
        src = tmp_path / "remote" / "f.txt"
        src.parent.mkdir()
        src.write_bytes(data)
        source = make_source(src.as_uri(), data, sha256=(wrong,), name="bad_source")
        if via == "mirror":
            location = mirror_location(source, mirror)
            location.parent.mkdir(parents=True)
            location.write_bytes(data)
    dest_dir = tmp_path / "out"
    dest_dir.mkdir()
    dest = dest_dir / "f.txt"
    stale = b"stale copy from an earlier run\n"
    dest.write_bytes(stale)
    with pytest.raises(VerbevalError) as info:
        fetch_source(source, dest, mirror_dir=mirror if via == "mirror" else None, timeout=10)
    text = str(info.value)
    assert "'bad_source'" in text
    assert wrong in text
    assert sha(data) in text
    assert ("f.txt" in text) and ("checksum mismatch" in text)
    # no temporary file, and the unverified copy is left as it was (set aside only for a verified one)
    assert [f for f in leftovers(dest_dir) if not f.endswith(".verified.json")] == ["f.txt"]
    assert dest.read_bytes() == stale
    # with the right checksum the same fetch sets the stale copy aside (renamed, not deleted) and replaces it
    fetch_source(replace(source, sha256=(sha(data),)), dest, mirror_dir=mirror if via == "mirror" else None, timeout=10)
    aside = f"f.txt.unverified-{sha(stale)[:12]}"
    assert dest.read_bytes() == data and (dest_dir / aside).read_bytes() == stale


# --------------------------------------------------------------------------- giant verb list


def test_giant_verb_list_real_mirror(data_dir: Path) -> None:
    path = data_dir / "giant-verb-list" / "giant-verb-list-3250.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3250
    verbs = read_giant_verb_list(path)
    assert len(verbs) == 3250  # every line is a distinct verb
    assert verbs[:3] == ["abandon", "abate", "abbreviate"]
    assert verbs[-1] == "zoom"
    assert {"agree", "be", "abhor", "appear", "become"} <= set(verbs)
    assert all(" " not in v and v == v.lower() for v in verbs)


def test_giant_verb_list_text_with_footnote_marks(tmp_path: Path) -> None:
    path = tmp_path / "gvl.txt"
    path.write_text("abandon \nagree 1 RB\n\nbe + LV \nabhor 2\n  Accept\nagree\nclock-in\n", encoding="utf-8")
    assert read_giant_verb_list(path) == ["abandon", "agree", "be", "abhor", "accept", "clock-in"]


@pytest.mark.parametrize("bad", ["1. abandon", "+ LV", "ab_c"])
def test_giant_verb_list_rejects_non_verbs(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "gvl.txt"
    path.write_text(f"abandon\nabate 1\n{bad}\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_giant_verb_list(path)
    assert info.value.line == 3
    assert str(path) in str(info.value)


def test_giant_verb_list_empty(tmp_path: Path) -> None:
    path = tmp_path / "gvl.txt"
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no verbs"):
        read_giant_verb_list(path)


PDF_PAGES = [
    "The Giant Verb List\nHow to use this list\n1. Read every verb\n2. Pick three\nPage 1",
    "3,250 Verbs\n1. abandon 2. abate 1\n3. abbreviate 1 4. agree 1 RB\nwww.patternbasedwriting.com  2",
    "5. be + LV 6. abhor 2\n7. agree\n1 = irregular spelling  RB = footnote\n3",
]
PDF_VERBS = ["abandon", "abate", "abbreviate", "agree", "be", "abhor"]


def test_giant_verb_list_pdf_detected_by_magic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gvl.txt"  # the name does not matter; the magic bytes do
    path.write_bytes(b"%PDF-1.4\n% fake body\n")
    seen: list[Path] = []

    def fake_extract(p: Path) -> list[str]:
        seen.append(p)
        return PDF_PAGES

    monkeypatch.setattr(verb_list, "_extract_pdf_pages", fake_extract)
    assert read_giant_verb_list(path) == PDF_VERBS
    assert seen == [path]


def test_giant_verb_list_pdf_layout_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gvl.pdf"
    path.write_bytes(b"%PDF-1.4\n")
    monkeypatch.setattr(verb_list, "_extract_pdf_pages", lambda p: ["1. abandon 3. abate"])
    with pytest.raises(InputError, match=r"not numbered 1\.\.N; missing e\.g\. \[2\]"):
        read_giant_verb_list(path)
    monkeypatch.setattr(verb_list, "_extract_pdf_pages", lambda p: ["no entries here"])
    with pytest.raises(InputError, match="no numbered verb entries"):
        read_giant_verb_list(path)
    monkeypatch.setattr(verb_list, "_extract_pdf_pages", lambda p: ["1. abandon 2. 3250"])
    with pytest.raises(InputError, match="not a verb: '3250'"):
        read_giant_verb_list(path)


def test_giant_verb_list_pdf_without_pypdf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_pypdf(name: str, *args: object, **kwargs: object) -> object:
        if name == "pypdf" or name.startswith("pypdf."):
            raise ImportError("No module named 'pypdf'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_pypdf)
    path = tmp_path / "gvl.pdf"
    path.write_bytes(b"%PDF-1.4\n")
    with pytest.raises(VerbevalError, match="pip install pypdf"):
        read_giant_verb_list(path)


def _text_pdf(pages: list[str]) -> bytes:
    """A minimal PDF whose pages show ``pages`` (one Helvetica text line per input line)."""

    def escape(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    n = len(pages)
    font_id = 3 + 2 * n
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{3 + 2 * i} 0 R".encode() for i in range(n))
        + f"] /Count {n} >>".encode(),
    ]
    for i, text in enumerate(pages):
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"]
        for line in text.splitlines():
            ops += [f"({escape(line)}) Tj", "T*"]
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{off:010d} 00000 n \n".encode() for off in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_giant_verb_list_real_pdf(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    path = tmp_path / "Giant-Verb-List-3250-Verbs.pdf"
    path.write_bytes(_text_pdf(PDF_PAGES))
    assert read_giant_verb_list(path) == PDF_VERBS


# --------------------------------------------------------------------------- verbeval mirror


def _served_manifest(data_dir: Path, root: Path, base: str, tmp_path: Path) -> Path:
    """The real manifest with every URL pointing at a local HTTP server that serves the shared
    mirror's files (each archive source as a zip holding its member), like the real hosts would."""
    import yaml

    raw = yaml.safe_load(MANIFEST.read_text())
    # the CLAMS sets (43 files, 33 MB) only add time: the mirror code treats every text source alike,
    # and the tests' own download of the data leaves them out (conftest.NOT_DOWNLOADED_FORMATS)
    raw["sources"] = {k: v for k, v in raw["sources"].items() if v["format"] not in NOT_DOWNLOADED_FORMATS}
    for name, entry in raw["sources"].items():
        source = load_manifest(MANIFEST)[name]
        data = mirror_location(source, data_dir).read_bytes()
        rel = f"{name}/{local_filename(source)}"
        if source.archive_member:
            rel = f"{name}/archive.zip"
            (root / name).mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(root / rel, "w") as zf:
                zf.writestr(source.archive_member, data)
        else:
            (root / name).mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        entry["url"] = f"{base}/{rel}"
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_mirror_command_downloads_every_source_into_the_mirror_layout(
    data_dir: Path, http_root: tuple[Path, str], tmp_path: Path
) -> None:
    from verbeval.cli import main

    root, base = http_root
    manifest_path = _served_manifest(data_dir, root, base, tmp_path)
    out = tmp_path / "mirror"
    assert main(["mirror", "--manifest", str(manifest_path), "--out", str(out), "--timeout", "30"]) == 0
    manifest = load_manifest(manifest_path)
    for source in manifest.values():
        location = mirror_location(source, out)
        assert content_digest(source, location) in source.sha256, source.name
        # the mirror serves the workflow: a fetch from it verifies
        fetch_source(source, tmp_path / "raw" / source.name / local_filename(source), mirror_dir=out)
    assert len(list(p for p in out.rglob("*") if p.is_file())) == len(manifest)
    # a second run keeps what is there
    results = build_mirror(manifest.values(), out)
    assert {r.status for r in results} == {"present"}


def test_mirror_from_another_mirror_is_what_downloading_leaves(
    data_dir: Path, http_root: tuple[Path, str], tmp_path: Path
) -> None:
    """`verbeval mirror --from-mirror DIR` (CI's fresh-machine stage fills the tests' download cache with
    it): the same files, checked the same way, as a download into the mirror layout."""
    from verbeval.cli import main

    root, base = http_root
    manifest_path = _served_manifest(data_dir, root, base, tmp_path)
    downloaded, copied = tmp_path / "downloaded", tmp_path / "copied"
    assert main(["-q", "mirror", "--manifest", str(manifest_path), "--out", str(downloaded)]) == 0
    assert (
        main(["-q", "mirror", "--manifest", str(manifest_path), "--out", str(copied), "--from-mirror", str(downloaded)])
        == 0
    )

    def files(d: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(d)): p.read_bytes()
            for p in sorted(d.rglob("*"))
            if p.is_file() and not p.name.endswith(".verified.json")
        }

    assert files(copied) == files(downloaded) and len(files(copied)) == len(load_manifest(manifest_path))
    # a mirror lacking a file fails that source and names it
    empty = tmp_path / "empty"
    empty.mkdir()
    results = build_mirror(load_manifest(manifest_path).values(), tmp_path / "x", from_mirror=empty)
    assert {r.status for r in results} == {"failed"} and "does not exist" in results[0].detail


def test_mirror_reports_failures_and_keeps_the_rest(http_root: tuple[Path, str], tmp_path: Path) -> None:
    root, base = http_root
    (root / "good.txt").write_bytes(b"good\n")
    (root / "bad.txt").write_bytes(b"changed by the publisher\n")
    good = make_source(f"{base}/good.txt", b"good\n", name="good")
    bad = make_source(f"{base}/bad.txt", b"original\n", name="bad")
    missing = make_source(f"{base}/gone.txt", b"x", name="gone")
    out = tmp_path / "mirror"
    results = {r.name: r for r in build_mirror([good, bad, missing], out, timeout=10)}
    assert results["good"].status == "fetched"
    assert mirror_location(good, out).read_bytes() == b"good\n"
    assert results["bad"].status == "failed" and "checksum mismatch" in results["bad"].detail
    assert results["gone"].status == "failed" and "HTTP 404" in results["gone"].detail
    assert not mirror_location(bad, out).exists() and not mirror_location(missing, out).exists()


def test_fetch_cli_reads_the_mirror_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dvc repro` of dvc.yaml (no --mirror in its commands) uses a mirror through $VERBEVAL_DATA_MIRROR."""
    from verbeval.cli import main
    from verbeval.core.cli import MIRROR_ENV

    data = b"the mirror copy\n"
    url = "https://example.org/o/r/raw/c/f.txt"
    (tmp_path / "manifest.yaml").write_text(
        f"sources:\n  toy:\n    url: {url}\n    sha256: '{sha(data)}'\n    format: ml_jsonl\n"
        "    description: d\n    license: MIT\n"
    )
    mirror = tmp_path / "mirror"
    location = mirror_location(make_source(url, data), mirror)
    location.parent.mkdir(parents=True)
    location.write_bytes(data)
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    dest = tmp_path / "raw/toy/f.txt"
    assert (
        main(["-q", "fetch", "--manifest", str(tmp_path / "manifest.yaml"), "--name", "toy", "--out", str(dest)]) == 0
    )
    assert dest.read_bytes() == data
    # --mirror wins over the environment
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "nowhere"))
    assert (
        main(
            [
                "-q",
                "fetch",
                "--manifest",
                str(tmp_path / "manifest.yaml"),
                "--name",
                "toy",
                "--out",
                str(dest),
                "--mirror",
                str(mirror),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "fetch",
                "--manifest",
                str(tmp_path / "manifest.yaml"),
                "--name",
                "toy",
                "--out",
                str(tmp_path / "other.txt"),
            ]
        )
        == 1
    )  # the environment's mirror is used, and lacks the file


# --------------------------------------------------------------------------- the verb list, not the bytes


def _original_layout_pdf(verbs_with_marks: list[str], per_line: int = 3, lines_per_page: int = 45) -> bytes:
    """A PDF laid out like the original Giant Verb List: a title page with its own numbered list, then
    numbered entries (``12. agree 1 RB``), several per line, over many pages with running header and footer."""
    entries = [f"{i}. {v}" for i, v in enumerate(verbs_with_marks, start=1)]
    lines = ["  ".join(entries[i : i + per_line]) for i in range(0, len(entries), per_line)]
    pages = ["The Giant Verb List\n3,250 Verbs\nHow to use this list\n1. Read every verb\n2. Pick three\n1"]
    for n, start in enumerate(range(0, len(lines), lines_per_page), start=2):
        body = "\n".join(lines[start : start + lines_per_page])
        pages.append(
            f"Pattern Based Writing: The Giant Verb List\n{body}\n1 = irregular  RB = footnote\n"
            f"www.patternbasedwriting.com  {n}"
        )
    return _text_pdf(pages)


def _pinned_checksum(verbs: list[str]) -> str:
    """Independent of verbeval's code: the sorted distinct lowercased verbs, one per line."""
    return hashlib.sha256("".join(f"{v}\n" for v in sorted({v.lower() for v in verbs})).encode()).hexdigest()


def test_the_real_list_as_the_original_pdf_passes_the_manifest(data_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    source = load_manifest(MANIFEST)["giant_verb_list"]
    text_copy = mirror_location(source, data_dir)
    lines = [line.strip() for line in text_copy.read_text(encoding="utf-8").splitlines() if line.strip()]
    verbs = [line.split()[0].lower() for line in lines]
    assert len(verbs) == 3250 and _pinned_checksum(verbs) in source.sha256
    pdf = tmp_path / "remote" / "Giant-Verb-List-3250-Verbs.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(_original_layout_pdf(lines))  # entries keep the footnote marks ('agree 1 RB')
    assert len(verb_list._extract_pdf_pages(pdf)) > 20
    online = dataclasses.replace(source, url=pdf.as_uri())
    dest = tmp_path / "raw" / "giant_verb_list" / local_filename(source)
    fetch_source(online, dest)
    assert dest.read_bytes() == pdf.read_bytes()  # the original form is kept; readers parse either
    assert read_giant_verb_list(dest) == verbs
    assert is_verified(online, dest)
    # and the text copy passes the same pin
    fetch_source(source, tmp_path / "raw2" / local_filename(source), mirror_dir=data_dir)


def test_a_differing_verb_list_names_verbs_added_and_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pypdf")
    from verbeval.cli import main

    pinned = ["abandon", "abate", "abbreviate", "agree", "be", "abhor", "walk"]
    published = ["abandon", "abate 1", "abbreviate 1", "agree 1 RB", "be + LV", "zigzag", "quibble", "abhor 2"]
    pdf = tmp_path / "remote" / "list.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(_original_layout_pdf(published, per_line=2, lines_per_page=2))
    (tmp_path / "list.verb_index").write_text(verb_index_lines(pinned))
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        f"sources:\n  gvl:\n    url: {pdf.as_uri()}\n    sha256: '{_pinned_checksum(pinned)}'\n"
        "    format: giant_verb_list\n    verb_index: list.verb_index\n    description: d\n    license: l\n"
    )
    dest = tmp_path / "raw" / "list.txt"
    args = ["-q", "fetch", "--manifest", str(manifest), "--name", "gvl", "--out", str(dest)]
    assert main(args) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    new = _pinned_checksum([v.split()[0] for v in published])
    assert err == [
        f"verbeval fetch: error: source 'gvl' from {pdf.as_uri()}: the verb list differs from the pinned one: "
        f"2 verb(s) added, 1 removed (8 verbs, the pinned list has 7); nothing was written. If you trust this "
        f"list, add its checksum {new} to the entry's sha256 list in {manifest}"
    ]
    assert leftovers(dest.parent) == []  # nothing half-written
    # accepting it as the message says
    manifest.write_text(
        manifest.read_text().replace(
            f"sha256: '{_pinned_checksum(pinned)}'", f"sha256: ['{_pinned_checksum(pinned)}', '{new}']"
        )
    )
    assert main(args) == 0
    assert dest.read_bytes() == pdf.read_bytes()


def test_mirror_stores_a_pdf_verb_list_as_a_text_copy(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    published = ["abandon", "abate 1", "agree 1 RB", "be + LV", "abhor 2"]
    verbs = ["abandon", "abate", "agree", "be", "abhor"]
    pdf = tmp_path / "remote" / "list.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(_original_layout_pdf(published, per_line=2, lines_per_page=2))
    source = make_source(
        pdf.as_uri(),
        b"",
        sha256=(_pinned_checksum(verbs),),
        format="giant_verb_list",
        mirror_path="gvl/list.txt",
        name="gvl",
    )
    out = tmp_path / "mirror"
    assert [r.status for r in build_mirror([source], out)] == ["fetched"]
    copy = out / "gvl" / "list.txt"
    assert copy.read_text(encoding="utf-8") == "abandon\nabate\nagree\nbe\nabhor\n"  # entry order
    assert [r.status for r in build_mirror([source], out)] == ["present"]
    assert sorted(p.name for p in copy.parent.iterdir()) == ["list.txt"]  # nothing else in the mirror


# --------------------------------------------------------------------------- a verified copy is kept


def test_a_verified_copy_is_kept_without_network_and_never_replaced(tmp_path: Path) -> None:
    """Another clone sharing raw_dir may be reading the file: a fetch of a verified copy leaves it alone."""
    data = b"verified bytes\n"
    source = make_source("https://unreachable.invalid/f.txt", data)
    dest = tmp_path / "raw" / "f.txt"
    dest.parent.mkdir()
    dest.write_bytes(data)
    inode = dest.stat().st_ino
    assert fetch_source(source, dest, mirror_dir=tmp_path / "no-mirror") == dest  # no mirror, no network needed
    assert fetch_source(source, dest, timeout=1) == dest
    assert dest.stat().st_ino == inode and dest.read_bytes() == data
    assert sorted(p.name for p in dest.parent.iterdir()) == [".f.txt.verified.json", "f.txt"]


def test_the_verification_cache_sees_an_edit_that_keeps_size_and_mtime(tmp_path: Path) -> None:
    """``cp -p`` / ``rsync -a`` keep size and mtime; the ctime still changes, and so the file is hashed again."""
    import os

    data = b"verified bytes\n"
    source = make_source("https://unreachable.invalid/f.txt", data)
    dest = tmp_path / "f.txt"
    dest.write_bytes(data)
    assert is_verified(source, dest)
    st = dest.stat()
    dest.write_bytes(b"VERIFIED BYTES\n")  # same size
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    assert dest.stat().st_size == st.st_size and dest.stat().st_mtime_ns == st.st_mtime_ns
    assert not is_verified(source, dest)
    aside = set_aside_unverified(source, dest)
    assert aside is not None and aside.read_bytes() == b"VERIFIED BYTES\n" and not dest.exists()
    # a cached digest is used while the file is unchanged: a wrong cached value would show
    dest.write_bytes(data)
    assert is_verified(source, dest)
    cache = tmp_path / ".f.txt.verified.json"
    import json

    record = json.loads(cache.read_text())
    cache.write_text(json.dumps({**record, "sha256": "0" * 64}))
    assert not is_verified(source, dest)

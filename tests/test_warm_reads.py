"""Issue 63: what a queue reads once per content (verbeval.core.warm): Parquet tables, and the
tokenizer files hashed once for the tokenizer key and the model fingerprint."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from verbeval.core import warm
from verbeval.core.session import Session


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = pd.read_parquet

    def counted(path, *a, **k):  # type: ignore[no-untyped-def]
        reads.append(Path(path).name)
        return real(path, *a, **k)

    monkeypatch.setattr(pd, "read_parquet", counted)
    return reads


def test_a_table_is_read_once_per_content_in_a_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two files of the same bytes: one read; a file whose content changed: read again; each caller's
    table is its own (a change to one reaches neither the kept table nor the next caller's)."""
    frame = pd.DataFrame({"sing": ["walks", "eats"], "plur": ["walk", "eat"], "sing_id": [3, 4]})
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    frame.to_parquet(a)
    shutil.copyfile(a, b)
    reads = _counting_reads(monkeypatch)
    with Session() as s, s.active():
        first = warm.read_parquet(a)
        first["sing_id"] = first["sing_id"] + 100  # a caller changes its table
        first.loc[0, "sing"] = "runs"
        first["extra"] = 1
        second = warm.read_parquet(b)
        pd.testing.assert_frame_equal(second, frame)
        assert reads == ["a.parquet"]
        frame.assign(sing_id=[5, 6]).to_parquet(b)  # b's content changes
        pd.testing.assert_frame_equal(warm.read_parquet(b), frame.assign(sing_id=[5, 6]))
        pd.testing.assert_frame_equal(warm.read_parquet(a), frame)
    assert reads == ["a.parquet", "b.parquet"]
    # outside a session: read every time
    pd.testing.assert_frame_equal(warm.read_parquet(a), frame)
    pd.testing.assert_frame_equal(warm.read_parquet(a), frame)
    assert reads == ["a.parquet", "b.parquet", "a.parquet", "a.parquet"]


def test_tokenizer_files_are_hashed_once_for_the_key_and_the_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tokenizer key and the model fingerprint of a folder read each tokenizer file once; the
    key still follows the content (a changed file: another key, hashed again)."""
    from verbeval.core.model_sources import fingerprint
    from verbeval.core.models import model_fingerprint

    monkeypatch.setenv(fingerprint.CACHE_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    hashed: list[str] = []
    real = fingerprint.sha256_file

    def counted(path):  # type: ignore[no-untyped-def]
        hashed.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(fingerprint, "sha256_file", counted)
    key = warm.tokenizer_files_key(str(folder))
    model_fingerprint(str(folder))
    assert sorted(hashed) == ["model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    import hashlib

    expected = hashlib.sha256()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        expected.update(f"{name}\0{digest}\0".encode())
    assert key == expected.hexdigest()
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 8}')
    assert warm.tokenizer_files_key(str(folder)) != key
    assert hashed[-1] == "tokenizer_config.json"

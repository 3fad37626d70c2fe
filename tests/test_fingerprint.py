"""Model fingerprints are content hashes (issue 23, item 7): a checkpoint copied over another with
preserved sizes and times changes the fingerprint; a ``touch`` does not; each file is hashed once
per change (cached by path, size, mtime, inode and ctime)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from verbeval.core.model_sources import fingerprint
from verbeval.core.models import model_fingerprint


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    fingerprint._MEMO.clear()


def checkpoint(folder: Path, weights: bytes, mtime_ns: int) -> Path:
    """A fake checkpoint: config.json and a safetensors-sized weights file with given times."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"architectures": ["GPT2LMHeadModel"]}')
    (folder / "model.safetensors").write_bytes(weights)
    for f in folder.iterdir():
        os.utime(f, ns=(mtime_ns, mtime_ns))
    return folder


def expected(folder: Path) -> str:
    """The documented fingerprint, computed here with hashlib alone."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(folder).as_posix()}\0{hashlib.sha256(f.read_bytes()).hexdigest()}\n".encode())
    return "local-sha256:" + h.hexdigest()


def test_preserved_time_copy_of_another_checkpoint_changes_the_fingerprint(tmp_path: Path) -> None:
    a = checkpoint(tmp_path / "a", b"\x01" * 4096, 1_600_000_000_000_000_000)
    b = checkpoint(tmp_path / "b", b"\x02" * 4096, 1_600_000_000_000_000_000)  # same sizes and mtimes
    before = model_fingerprint(str(a))
    assert before == expected(a)
    for f in b.iterdir():
        shutil.copy2(f, a / f.name)  # cp -p: contents replaced, sizes and mtimes as before
    assert [(f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(a.iterdir())] == [
        (f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(b.iterdir())
    ]
    after = model_fingerprint(str(a))
    assert after != before and after == expected(b).replace(str(b), str(a))


def test_touch_keeps_the_fingerprint_and_hashes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = checkpoint(tmp_path / "a", b"\x03" * 4096, 1_600_000_000_000_000_000)
    calls: list[Path] = []
    real = fingerprint.sha256_file

    def counting(path: Path) -> str:
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(fingerprint, "sha256_file", counting)
    first = model_fingerprint(str(a))
    assert len(calls) == 2  # config.json and the weights
    fingerprint._MEMO.clear()  # a new process: the on-disk cache answers
    assert model_fingerprint(str(a)) == first and len(calls) == 2
    for f in a.iterdir():
        f.touch()  # new mtime and ctime: hashed again, once, to the same fingerprint
    assert model_fingerprint(str(a)) == first and len(calls) == 4
    assert model_fingerprint(str(a)) == first and len(calls) == 4


def test_unwritable_cache_still_gives_the_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(blocker))  # the cache cannot be created
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    assert fingerprint.file_sha256(f) == hashlib.sha256(b"abc").hexdigest()

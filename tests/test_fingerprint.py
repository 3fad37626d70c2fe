"""Model fingerprints are content hashes (issue 23, item 7): a checkpoint copied over another with
preserved sizes and times changes the fingerprint; a ``touch`` does not; each file is hashed once
per change (cached by path, size, mtime, inode and ctime).

The plan reads no weights (issue 54): it knows a local model by its files' stat identity, which a
replacement (a copy with preserved times, a rewrite in place) changes too; the file-hash cache is one
SQLite database, O(1) per entry, bounded and pruned of gone files."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from verbeval.core import io
from verbeval.core.model_sources import fingerprint
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import model_fingerprint, model_plan_version

REPO = Path(__file__).resolve().parents[1]


def new_process() -> None:
    """Forget what this process memoised and its database connections (as a new job would start)."""
    fingerprint._MEMO.clear()
    for con in fingerprint._DBS.values():
        if con is not None:
            con.close()
    fingerprint._DBS.clear()


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    new_process()
    yield
    new_process()


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


# ------------------------------------------------------------------ the plan's version (issue 54)


def stat_version(folder: Path) -> str:
    """The documented plan version of a local model, computed here from os.stat alone."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        st = f.stat()
        rel = f.relative_to(folder).as_posix()
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_ctime_ns}\n".encode())
    return "local-stat:" + h.hexdigest()


def later_than(folder: Path) -> None:
    """Wait until the clock that stamps ctimes has moved past the folder's files' (a replacement by
    hand comes that much later, at least; the test must not depend on the clock's granularity)."""
    last = max(f.stat().st_ctime_ns for f in folder.iterdir())
    probe = folder.parent / "clock-probe"
    while True:
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns > last:
            break
    probe.unlink()


@pytest.fixture()
def no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a file's contents to hash them fails the test."""

    def refuse(path: Path, *args: object) -> str:
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(fingerprint, "sha256_file", refuse)
    monkeypatch.setattr(io, "sha256_file", refuse)


def test_the_plan_version_of_a_local_model_reads_no_file(tmp_path: Path, no_reading: None) -> None:
    a = checkpoint(tmp_path / "a", b"\x01" * 4096, 1_600_000_000_000_000_000)
    (a / "sub").mkdir()
    (a / "sub" / "extra.bin").write_bytes(b"x")
    assert model_plan_version(str(a)) == stat_version(a)
    gguf = model_plan_version(ModelSource(str(a), file="model.safetensors"))
    st = (a / "model.safetensors").stat()
    line = f"model.safetensors\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_ctime_ns}\n"
    assert gguf == "gguf-stat:" + hashlib.sha256(line.encode()).hexdigest()
    assert not (tmp_path / "cache").exists()  # nor writes the cache


def test_the_plan_version_of_a_hub_model_is_its_commit(no_reading: None) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert model_plan_version(ModelSource("org/model", commit)) == f"hub:{commit}"
    assert model_plan_version(ModelSource("org/m", commit, file="m.gguf")) == f"hub:{commit}/m.gguf"


def test_a_replaced_checkpoint_changes_the_plan_version(tmp_path: Path) -> None:
    a = checkpoint(tmp_path / "a", b"\x01" * 4096, 1_600_000_000_000_000_000)
    b = checkpoint(tmp_path / "b", b"\x02" * 4096, 1_600_000_000_000_000_000)  # same sizes and mtimes
    first = model_plan_version(str(a))
    assert model_plan_version(str(a)) == first  # nothing changed: the same version

    later_than(a)
    for f in b.iterdir():
        shutil.copy2(f, a / f.name)  # cp -p: same names, sizes and mtimes, other contents
    assert [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(a.iterdir())] == [
        (f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(b.iterdir())
    ]
    copied = model_plan_version(str(a))
    assert copied != first and copied == stat_version(a)
    assert model_fingerprint(str(a)) == expected(b)  # the jobs' content hash: b's

    later_than(a)
    w = a / "model.safetensors"
    st = w.stat()
    with w.open("r+b") as fh:  # rewritten in place: same inode, size and (restored) mtime
        fh.write(b"\x03" * 4096)
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (w.stat().st_ino, w.stat().st_size, w.stat().st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    rewritten = model_plan_version(str(a))
    assert rewritten not in (first, copied) and rewritten == stat_version(a)
    assert model_fingerprint(str(a)) not in (expected(b), first)


def test_the_workflow_plan_reads_no_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path, no_reading: None
) -> None:
    """A sweep's revisions and a SimVerb score of a local model: their rerun triggers (``version``
    params) are stat identities; no file is read (the jobs compute the content hashes)."""
    from verbeval.workflow.loading import plan_from_files

    monkeypatch.chdir(repo_view)
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257}
    steps = [checkpoint(tmp_path / f"step-{k}", b"\x01" * 64, 1_600_000_000_000_000_000) for k in (1, 2)]
    for d in steps:
        (d / "config.json").write_text(json.dumps(cfg))
    extra = tmp_path / "extra.yaml"
    revs = ", ".join(f"{{path: {d}, step: {k}}}" for k, d in enumerate(steps, 1))
    extra.write_text(f"models: [{{name: run, kind: causal, revisions: [{revs}]}}]\n")
    plan = plan_from_files([REPO / "config" / "config.yaml", extra])
    assert [plan.model.version(n) for n in plan.models] == [stat_version(d) for d in steps]
    simverb = plan.simverb.rules.simverb_score.params["version"]
    assert list(plan.models) == list(plan.simverb.models) == ["run@step-1", "run@step-2"]
    assert [simverb(SimpleNamespace(svmodel=n)) for n in plan.models] == [stat_version(d) for d in steps]


# ------------------------------------------------------------------ the file-hash cache (issue 54)


def rows(cache: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(cache / fingerprint.DB_NAME) as con:
        return sorted(con.execute("SELECT path, sha256 FROM hashes").fetchall())


def test_the_cache_is_one_database_and_lists_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "cache" / "file-hashes" / "0123.json"  # written by an earlier version: left alone
    old.parent.mkdir(parents=True)
    old.write_text('{"stamp": [], "sha256": ""}')

    def refuse(*args: object) -> None:
        raise AssertionError("a folder was listed")

    files = []
    for k in range(5):
        f = tmp_path / "w" / f"{k}.bin"
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(bytes([k]) * 10)
        files.append(f)
    with monkeypatch.context() as m:
        for mod, name in ((io, "stale_temporaries"), (os, "listdir"), (os, "scandir")):
            m.setattr(mod, name, refuse)
        digests = [fingerprint.file_sha256(f) for f in files]
    assert digests == [hashlib.sha256(bytes([k]) * 10).hexdigest() for k in range(5)]
    assert rows(tmp_path / "cache") == sorted((str(f.resolve()), d) for f, d in zip(files, digests))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["file-hashes", "file-hashes.sqlite"]
    assert [p.name for p in old.parent.iterdir()] == ["0123.json"]  # nothing written beside the old records
    assert old.read_text() == '{"stamp": [], "sha256": ""}'


def test_the_cache_is_bounded_and_pruned_of_gone_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprint, "MAX_ENTRIES", 4)
    monkeypatch.setattr(fingerprint, "PRUNE_EVERY", 1)  # a pruning step at every write
    monkeypatch.setattr(fingerprint, "PRUNE_BATCH", 3)  # of 3 entries in turn
    w = tmp_path / "w"
    w.mkdir()
    now = [1_000_000]
    monkeypatch.setattr(fingerprint, "_now", lambda: now[0])

    def hashed(name: str) -> Path:
        now[0] += 10_000  # each write an hour and more after the last
        f = w / name
        f.write_bytes(name.encode())
        fingerprint.file_sha256(f)
        return f

    a, b, c, d = (hashed(n) for n in "abcd")
    assert [Path(p).name for p, _ in rows(tmp_path / "cache")] == ["a", "b", "c", "d"]
    now[0] += 10_000
    new_process()
    fingerprint.file_sha256(a)  # a hit: a is used again, b is now the least recently used
    hashed("e")
    assert [Path(p).name for p, _ in rows(tmp_path / "cache")] == ["a", "c", "d", "e"]
    monkeypatch.setattr(fingerprint, "MAX_ENTRIES", 100)
    c.unlink()
    d.unlink()
    for name in "fgh":  # the pruning steps go round the table, 3 entries each, and find d, then c, gone
        hashed(name)
    assert [Path(p).name for p, _ in rows(tmp_path / "cache")] == ["a", "e", "f", "g", "h"]
    assert fingerprint.prune() == 0


@pytest.fixture()
def hashing(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files hashed (read) from here on, in order."""
    calls: list[Path] = []
    real = fingerprint.sha256_file

    def counting(path: Path) -> str:
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(fingerprint, "sha256_file", counting)
    return calls


def _files(tmp_path: Path, *contents: bytes) -> list[Path]:
    out = []
    for k, data in enumerate(contents):
        f = tmp_path / f"w{k}.bin"
        f.write_bytes(data)
        out.append(f)
    return out


@pytest.mark.parametrize("when", ["opening it", "after opening it"])
def test_a_locked_cache_is_skipped_at_once_with_one_line(
    tmp_path: Path, hashing: list[Path], caplog: pytest.LogCaptureFixture, when: str
) -> None:
    f, g, h = _files(tmp_path, b"abc", b"abcd", b"abcde")
    fingerprint.file_sha256(h)  # the database exists, with h's hash
    new_process()
    if when == "after opening it":
        fingerprint.file_sha256(h)  # this process's connection is open (a hit)
    other = sqlite3.connect(tmp_path / "cache" / fingerprint.DB_NAME, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another job holds it, and keeps it
    hashing.clear()
    with caplog.at_level(logging.DEBUG, logger=fingerprint.log.name):
        assert [fingerprint.file_sha256(x) for x in (f, g)] == [
            hashlib.sha256(b"abc").hexdigest(),
            hashlib.sha256(b"abcd").hexdigest(),
        ]
    assert hashing == [f, g]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", f"file-hash cache {tmp_path / 'cache' / fingerprint.DB_NAME} is locked by another process: "
                 "hashing without it")
    ]  # fmt: skip
    assert fingerprint.BUSY_TIMEOUT_S <= 0.5  # a lock is not waited for (was 10 s)
    other.execute("ROLLBACK")
    other.close()
    new_process()  # the lock released: the next process uses the database again, which was left whole
    hashing.clear()
    assert fingerprint.file_sha256(h) == hashlib.sha256(b"abcde").hexdigest() and hashing == []
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [fingerprint.DB_NAME]


def _garbage(db: Path) -> None:
    db.write_bytes(b"not a database" * 100)


def _bad_page(db: Path) -> None:
    """The header of the table's page (the second) overwritten: a database that still opens."""
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) >= 4 * page
    data[page : page + 12] = b"\xff" * 12
    db.write_bytes(bytes(data))


def _wrong_hash(db: Path) -> None:
    """One byte of a stored hash changed (SQLite itself cannot see it): its entry's tag finds it."""
    with sqlite3.connect(db) as con:
        path, digest = con.execute("SELECT path, sha256 FROM hashes ORDER BY path LIMIT 1").fetchone()
        con.execute(
            "UPDATE hashes SET sha256 = ? WHERE path = ?", (("0" if digest[0] != "0" else "1") + digest[1:], path)
        )


@pytest.mark.parametrize("damage", [_garbage, _bad_page, _wrong_hash], ids=["garbage", "bad page", "wrong hash"])
def test_a_damaged_cache_is_moved_aside_and_rebuilt(
    tmp_path: Path, hashing: list[Path], caplog: pytest.LogCaptureFixture, damage: Callable[[Path], None]
) -> None:
    files = _files(tmp_path, *[bytes([k]) * (100 + k) for k in range(40)])
    truth = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    assert [fingerprint.file_sha256(f) for f in files] == truth
    new_process()
    db = tmp_path / "cache" / fingerprint.DB_NAME
    damage(db)
    damaged = db.read_bytes()
    hashing.clear()
    with caplog.at_level(logging.WARNING, logger=fingerprint.log.name):
        assert [fingerprint.file_sha256(f) for f in files] == truth  # never the damaged entry's hash
    (record,) = caplog.records
    assert record.levelname == "WARNING" and record.getMessage().startswith(f"file-hash cache {db} is damaged (")
    assert record.getMessage().endswith(
        f"moved aside to {fingerprint.DB_NAME}.damaged and rebuilt; its files are hashed again"
    )
    aside = tmp_path / "cache" / f"{fingerprint.DB_NAME}.damaged"
    assert aside.read_bytes() == damaged  # renamed, never deleted
    assert sorted(hashing) == sorted(files)  # each hashed again, once
    assert rows(tmp_path / "cache") == sorted((str(f.resolve()), d) for f, d in zip(files, truth))
    new_process()  # the next process uses the new database: nothing hashed, nothing said
    hashing.clear()
    caplog.clear()
    assert [fingerprint.file_sha256(f) for f in files] == truth
    assert hashing == [] and caplog.records == []


def test_entries_without_a_tag_are_hashed_again_once(tmp_path: Path, hashing: list[Path]) -> None:
    """A database written by a version without entry tags: its entries are not trusted, each file is
    hashed again once and recorded with its tag."""
    (f,) = _files(tmp_path, b"abc")
    db = tmp_path / "cache" / fingerprint.DB_NAME
    db.parent.mkdir()
    with sqlite3.connect(db) as con:
        con.executescript(fingerprint._SCHEMA.replace(",\n    tag TEXT", ""))
        st = f.stat()
        con.execute(
            "INSERT INTO hashes VALUES (?, ?, ?, ?, ?, ?, ?)",
            (str(f.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, "0" * 64, 0),
        )
    assert fingerprint.file_sha256(f) == hashlib.sha256(b"abc").hexdigest() and hashing == [f]
    new_process()
    assert fingerprint.file_sha256(f) == hashlib.sha256(b"abc").hexdigest() and hashing == [f]


def test_the_cache_serves_every_thread_of_a_process(
    tmp_path: Path, hashing: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A queue's prefetcher hashes the next model on a thread of its own: it uses the process's
    database as the main thread does (SQLite's connections refuse other threads by default), and
    that refusal is never taken for damage."""
    import threading

    f, g = _files(tmp_path, b"abc", b"abcd")
    fingerprint.file_sha256(f)  # the process's connection, opened by the main thread
    got: list[str] = []
    with caplog.at_level(logging.DEBUG, logger=fingerprint.log.name):
        worker = threading.Thread(target=lambda: got.extend(fingerprint.file_sha256(x) for x in (f, g)))
        worker.start()
        worker.join()
    assert got == [hashlib.sha256(b"abc").hexdigest(), hashlib.sha256(b"abcd").hexdigest()]
    assert caplog.records == [] and hashing == [f, g]
    assert rows(tmp_path / "cache") == sorted((str(x.resolve()), d) for x, d in zip((f, g), got))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [fingerprint.DB_NAME]

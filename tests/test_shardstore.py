"""The shard store's journal (append-only), a manifest missing an entry, and chunk capping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from test_inference import _lemmas, masked_lm, template_frame  # noqa: F401  (masked_lm: a fixture)
from verbeval.agreement.engine.shards import capped_chunks
from verbeval.agreement.engine.shardstore import (
    JOURNAL_NAME,
    OLD_JOURNAL_NAME,
    PlannedShard,
    ShardStore,
    finish_if_complete,
    has_journal,
    incomplete_store,
    run_plan,
    shard_key,
)
from verbeval.core.errors import VerbevalError


def _plan(n: int, calls: list[str], group: str = "g") -> list[PlannedShard]:
    """n shards whose content is their own name (no model)."""
    out = []
    for k in range(n):
        rel = f"{group}/{k + 1}-of-{n}.parquet"

        def compute(bar: Any, rel: str = rel) -> Any:
            calls.append(rel)

            def write(path: Path) -> dict[str, Any]:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(rel)
                return {"n_contexts": 1}

            return write

        out.append(PlannedShard(rel, shard_key({"rel": rel}), 1, compute))
    return out


def test_journal_grows_by_one_line_per_shard(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    journal = tmp_path / JOURNAL_NAME
    sizes = []
    for k in range(5):
        (tmp_path / f"{k}.parquet").write_text(str(k))
        before = journal.read_bytes() if journal.exists() else b""
        store.record(f"{k}.parquet", f"key{k}")
        after = journal.read_bytes()
        assert after.startswith(before)  # appended, never rewritten
        sizes.append(len(after) - len(before))
    assert len(journal.read_text().splitlines()) == 5
    assert max(sizes) - min(sizes) <= 2  # each append is one entry's size: linear, not quadratic
    # a restarted store reads every entry back
    again = ShardStore(tmp_path)
    assert all(again.reusable(f"{k}.parquet", f"key{k}") is not None for k in range(5))


def test_a_torn_last_line_is_ignored_and_the_journal_repaired(tmp_path: Path) -> None:
    calls: list[str] = []
    manifest = tmp_path / "manifest.json"
    run_plan(manifest, _plan(3, calls), {}, progress=False)
    journal = tmp_path / JOURNAL_NAME
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])  # a writer killed mid-line
    store = ShardStore(tmp_path)
    assert journal.read_text().endswith("\n") and len(journal.read_text().splitlines()) == 2
    assert store.reusable("g/3-of-3.parquet", shard_key({"rel": "g/3-of-3.parquet"})) is None
    calls.clear()
    run_plan(manifest, _plan(3, calls), {}, progress=False)
    assert calls == ["g/3-of-3.parquet"]


def test_the_previous_json_journal_still_resumes(tmp_path: Path) -> None:
    calls: list[str] = []
    manifest = tmp_path / "manifest.json"
    run_plan(manifest, _plan(2, calls), {}, progress=False)
    entries = {}
    for line in (tmp_path / JOURNAL_NAME).read_text().splitlines():
        e = json.loads(line)
        entries[e.pop("path")] = e
    (tmp_path / JOURNAL_NAME).unlink()
    (tmp_path / OLD_JOURNAL_NAME).write_text(json.dumps(entries))
    manifest.unlink()
    calls.clear()
    run_plan(manifest, _plan(2, calls), {}, progress=False)
    assert calls == [] and not (tmp_path / OLD_JOURNAL_NAME).exists()


def test_a_manifest_missing_an_entry_is_named_and_recovers(tmp_path: Path) -> None:
    calls: list[str] = []
    manifest = tmp_path / "manifest.json"
    plan = _plan(2, calls) + _plan(1, calls, group="h")
    run_plan(manifest, plan, {"groups": ["g", "h"]}, progress=False)
    good = manifest.read_bytes()
    assert incomplete_store(manifest) is None
    body = json.loads(good)
    body["shards"] = [s for s in body["shards"] if s["path"] != "g/2-of-2.parquet"]
    manifest.write_text(json.dumps(body))
    assert incomplete_store(manifest) == "it lists no entry for g/2-of-2.parquet"
    body["shards"] = [s for s in json.loads(good)["shards"] if s["path"] != "h/1-of-1.parquet"]
    manifest.write_text(json.dumps(body))
    assert incomplete_store(manifest) == "it lists no shards of group 'h'"
    # the workflow removes such a manifest at start-up; the rerun recomputes nothing and lists all
    manifest.unlink()
    calls.clear()
    run_plan(manifest, plan, {"groups": ["g", "h"]}, progress=False)
    assert calls == [] and manifest.read_bytes() == good


def test_the_store_says_whether_it_is_complete_and_then_writes_the_manifest(tmp_path: Path) -> None:
    """A plan without compute functions (no model): the store writes the manifest run_plan writes, byte
    for byte, when it holds every shard, else nothing; a shard it lacks cannot be computed from it."""
    calls: list[str] = []
    manifest = tmp_path / "manifest.json"
    assert not has_journal(tmp_path)
    run_plan(manifest, _plan(3, calls), {"groups": ["g"]}, progress=False)
    full = manifest.read_bytes()
    assert has_journal(tmp_path)
    checked = [PlannedShard(p.relpath, p.key, p.n_contexts) for p in _plan(3, calls)]
    assert ShardStore(tmp_path).complete(checked)
    manifest.unlink()
    body = finish_if_complete(manifest, checked, {"groups": ["g"]})
    assert manifest.read_bytes() == full and [s["path"] for s in body["shards"]] == [p.relpath for p in checked]
    (tmp_path / "g" / "2-of-3.parquet").unlink()
    manifest.unlink()
    assert not ShardStore(tmp_path).complete(checked)
    assert finish_if_complete(manifest, checked, {"groups": ["g"]}) is None and not manifest.exists()
    assert (tmp_path / "g" / "1-of-3.parquet").is_file()  # nothing removed
    with pytest.raises(VerbevalError) as err:
        run_plan(manifest, checked, {}, progress=False)
    assert str(err.value) == f"{tmp_path}: shard g/2-of-3.parquet is missing and was planned without a model"


@pytest.mark.parametrize(("n", "chunks", "expected"), [(7, 4, 4), (7, 100000, 7), (1, 3, 1), (0, 4, 1)])
def test_capped_chunks(n: int, chunks: int, expected: int) -> None:
    assert capped_chunks(n, chunks) == expected


def test_huge_chunks_give_the_same_results_as_one_shard_per_context(masked_lm: Any, tmp_path: Path) -> None:  # noqa: F811 - the fixture imported above
    """chunks: 100000 on a group of a few contexts: one shard per context (no empty shards), and the
    aggregated scores equal those of a single chunk."""
    from verbeval.agreement.engine.inference import infer_model
    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.scores.aggregate import context_scores, read_shards, row_tse

    templates, lemmas = template_frame(), _lemmas(masked_lm)
    big = infer_model(
        masked_lm, templates, lemmas, ["g1"], 100_000, tmp_path / "a" / "manifest.json", batch_size=4, progress=False
    )
    n_ctx = sum(s["n_contexts"] for s in big["shards"])
    assert len(big["shards"]) == n_ctx and all(s["n_contexts"] == 1 for s in big["shards"])
    infer_model(masked_lm, templates, lemmas, ["g1"], 1, tmp_path / "b" / "manifest.json", batch_size=4, progress=False)
    a = read_shards(manifest_shards(tmp_path / "a" / "manifest.json")["g1"])
    b = read_shards(manifest_shards(tmp_path / "b" / "manifest.json")["g1"])
    cuts = [0.5, 1.0]
    pd.testing.assert_frame_equal(context_scores(a, cuts, cuts), context_scores(b, cuts, cuts))
    g1 = templates[templates.group == "g1"].reset_index(drop=True)
    pd.testing.assert_frame_equal(row_tse(a, g1), row_tse(b, g1))

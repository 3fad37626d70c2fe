"""Helpers shared by the agreement sub-commands: shard paths from shard files and manifests (every
damaged shard quarantined), the checks that a store's shards fit the other inputs, and the groups of a
run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def verified_shards(
    manifest: str | Path, groups: list[str] | None = None, keep_bad: bool = False
) -> dict[str, list[Path]]:
    """``{group: [shard paths]}`` of a manifest, every shard checked against the size and sha256 it
    lists (:func:`verbeval.agreement.engine.shardstore.manifest_shards`). A damaged shard is moved
    aside and the manifest removed (unless ``keep_bad``), so that the next run recomputes it
    (:func:`verbeval.agreement.scores.aggregate.quarantine_bad_shard`); the error says so."""
    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.scores.aggregate import quarantine_bad_shard
    from verbeval.core.errors import ShardError

    try:
        return manifest_shards(manifest, groups)
    except ShardError as exc:
        raise quarantine_bad_shard(exc, keep_bad, str(manifest)) from None


def expand_shards(items: Sequence[str], keep_bad: bool = False) -> list[str]:
    """Shard paths from shard files and shard-store manifests (``manifest.json``: every shard it
    lists, each checked against the size and sha256 recorded there: :func:`verified_shards`)."""
    out: list[str] = []
    for item in items:
        if not item.endswith(".json"):
            out.append(item)
            continue
        out += [str(p) for paths in verified_shards(item, keep_bad=keep_bad).values() for p in paths]
    return out


def manifest_meta(manifest: str | Path) -> dict[str, Any]:
    """The ``meta`` of a shard manifest (what every shard of the store shares: model, dtype, lemma set)."""
    from verbeval.agreement.engine.shardstore import read_manifest

    return read_manifest(manifest).get("meta") or {}


def check_lemma_set(manifest: str | Path, lemmas_path: str | Path) -> int:
    """The number of lemmas of ``lemmas_path`` (a model's lemmas.parquet), checked against the lemma
    set the manifest's shards were computed with (``n_lemmas``, ``lemma_set_sha256``)."""
    import pandas as pd

    from verbeval.agreement.engine.shards import lemma_set_hash
    from verbeval.core.errors import MismatchError

    lemmas = pd.read_parquet(lemmas_path)
    meta = manifest_meta(manifest)
    n, want = len(lemmas), meta.get("n_lemmas")
    if want is not None and int(want) != n:
        raise MismatchError(
            f"{manifest}: shards of {want} lemmas but {lemmas_path} lists {n}: "
            "not the lemma set the shards were computed with"
        )
    digest = meta.get("lemma_set_sha256")
    if digest and {"sing", "plur", "sing_id", "plur_id"} <= set(lemmas.columns) and lemma_set_hash(lemmas) != digest:
        raise MismatchError(
            f"{manifest}: shards of another lemma set than {lemmas_path} (both {n} lemmas, "
            "their lemma_set_sha256 differs)"
        )
    return n


def run_groups(groups_file: str, present: Sequence[str]) -> list[dict]:
    """The groups of ``groups_file`` that are ``present`` (in the file's order)."""
    from verbeval.agreement.data.groups import load_groups

    present_set = set(present)
    return [g for g in load_groups(groups_file) if g["id"] in present_set]

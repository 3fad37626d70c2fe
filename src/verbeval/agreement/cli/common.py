"""Helpers shared by the agreement sub-commands: shard paths from shard files and manifests (every
damaged shard quarantined: :mod:`verbeval.agreement.runs`' functions, which the steps share), the checks that a store's shards fit the other inputs, and the groups of a
run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verbeval.agreement.runs import expand_shards, verified_shards

__all__ = ["check_lemma_set", "expand_shards", "manifest_meta", "run_groups", "verified_shards"]


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

"""Helpers shared by the agreement sub-commands: shard paths from shard files and manifests, and
the groups of a run.
"""

from __future__ import annotations

from collections.abc import Sequence


def expand_shards(items: Sequence[str], keep_bad: bool = False) -> list[str]:
    """Shard paths from shard files and shard-store manifests (``manifest.json``: every shard it
    lists, each checked against the size and sha256 recorded there)."""
    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.scores.aggregate import quarantine_bad_shard
    from verbeval.core.errors import ShardError

    out: list[str] = []
    for item in items:
        if not item.endswith(".json"):
            out.append(item)
            continue
        try:
            out += [str(p) for paths in manifest_shards(item).values() for p in paths]
        except ShardError as exc:
            raise quarantine_bad_shard(exc, keep_bad, item) from None
    return out


def run_groups(groups_file: str, present: Sequence[str]) -> list[dict]:
    """The groups of ``groups_file`` that are ``present`` (in the file's order)."""
    from verbeval.agreement.data.groups import load_groups

    present_set = set(present)
    return [g for g in load_groups(groups_file) if g["id"] in present_set]

"""Helpers shared by the agreement sub-commands: shard paths from shard files and manifests (every
damaged shard quarantined: :mod:`verbeval.agreement.runs`' functions, which the steps share) and the
groups of a run. The check that a store's shards fit a lemmas file is
:func:`verbeval.agreement.engine.shards.check_lemma_set` (``verbeval compare`` reads it too).
"""

from __future__ import annotations

from collections.abc import Sequence

from verbeval.agreement.runs import expand_shards, verified_shards

__all__ = ["expand_shards", "run_groups", "verified_shards"]


def run_groups(groups_file: str, present: Sequence[str]) -> list[dict]:
    """The groups of ``groups_file`` that are ``present`` (in the file's order)."""
    from verbeval.agreement.data.groups import load_groups

    present_set = set(present)
    return [g for g in load_groups(groups_file) if g["id"] in present_set]

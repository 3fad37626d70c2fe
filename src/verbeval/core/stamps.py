"""Up-to-date stamps of the outputs of one branch of a multi-branch job.

``verbeval run-model`` (and ``veridicality-predict``) compute several branches over one loaded
model. When Snakemake reruns such a job because one branch's inputs changed, the other branches'
outputs (flagged ``update`` in the rule, so that Snakemake keeps them) are still valid: a branch
whose stamp matches is not recomputed. The stamp (``.<first output>.stamp.json`` beside it) records
a key (sha256 of the branch's settings and of every input file's content) and the sha256 of each
output; it is written after the outputs, so a killed job leaves no stamp that vouches for a partial
output.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verbeval.core.io import sha256_file, write_json


def stamp_path(outputs: Sequence[str | Path]) -> Path:
    """Where the stamp of a branch whose outputs are ``outputs`` lives (beside the first one)."""
    first = Path(outputs[0])
    return first.with_name(f".{first.name}.stamp.json")


def branch_key(settings: Mapping[str, Any], inputs: Sequence[str | Path]) -> str:
    """sha256 of the branch's settings (JSON) and of the content of every input file, in order."""
    h = hashlib.sha256(json.dumps(dict(settings), sort_keys=True, default=str).encode("utf-8"))
    for path in inputs:
        h.update(b"\0" + sha256_file(path).encode("ascii"))
    return h.hexdigest()


def is_current(outputs: Sequence[str | Path], key: str) -> bool:
    """True when every output exists with the sha256 its stamp records and the stamp's key is ``key``."""
    try:
        stamp = json.loads(stamp_path(outputs).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    recorded = stamp.get("outputs") if isinstance(stamp, dict) else None
    if stamp.get("key") != key or not isinstance(recorded, dict) or set(recorded) != {str(p) for p in outputs}:
        return False
    return all(Path(p).is_file() and sha256_file(p) == recorded[str(p)] for p in outputs)


def write_stamp(outputs: Sequence[str | Path], key: str) -> None:
    """Record that ``outputs`` (already written) are the branch's results for ``key``."""
    write_json(stamp_path(outputs), {"key": key, "outputs": {str(p): sha256_file(p) for p in outputs}})


def clear_stamp(outputs: Sequence[str | Path]) -> None:
    """Forget the stamp before recomputing (a failure half-way then leaves none)."""
    stamp_path(outputs).unlink(missing_ok=True)

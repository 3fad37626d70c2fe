"""Verified copies of a manifest source: :func:`content_digest` (the checksum the manifest pins: of
the bytes, or of the normalised list for a list format), :func:`is_verified` with its
``.<name>.verified.json`` cache beside the file, and setting aside a copy that does not verify
(:func:`set_aside_unverified`) or putting back one that does (:func:`restore_set_aside`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable
from glob import escape as glob_escape
from pathlib import Path

from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.io import atomic_open, sha256_file
from verbeval.core.manifest import LIST_FORMATS, Source
from verbeval.core.verb_list import read_giant_verb_list

__all__ = [
    "cached_content_digest",
    "check_verb_list",
    "content_digest",
    "digest_or_none",
    "is_verified",
    "restore_set_aside",
    "set_aside_unverified",
    "verb_index_lines",
    "verb_list_bytes",
]


def verb_list_bytes(verbs: Iterable[str]) -> bytes:
    """The normalised form of a verb list whose sha256 the manifest pins: the distinct lowercased
    verbs, sorted, one per line (so that the PDF and a text copy of one list agree)."""
    return "".join(f"{v}\n" for v in sorted({v.lower() for v in verbs})).encode("utf-8")


def _verb_hash(verb: str) -> str:
    """A verb's entry in a ``verb_index`` file (the first 16 hex digits of its sha256)."""
    return hashlib.sha256(verb.encode("utf-8")).hexdigest()[:16]


def verb_index_lines(verbs: Iterable[str]) -> str:
    """The text of a ``verb_index`` file for ``verbs`` (one hash per line, sorted)."""
    return "".join(f"{h}\n" for h in sorted({_verb_hash(v.lower()) for v in verbs}))


def content_digest(source: Source, path: str | Path) -> str:
    """The checksum of ``path`` that ``source.sha256`` pins: the sha256 of the file's bytes, or for a
    list format (:data:`LIST_FORMATS`) that of its parsed, normalised list (:func:`verb_list_bytes`)."""
    if source.format in LIST_FORMATS:
        return hashlib.sha256(verb_list_bytes(read_giant_verb_list(path))).hexdigest()
    return sha256_file(path)


def check_verb_list(source: Source, path: Path, origin: str) -> None:
    """Raise one line naming how many verbs were added and removed when the verb list in ``path``
    is not the pinned one."""
    try:
        verbs = set(read_giant_verb_list(path))
    except InputError as exc:
        raise VerbevalError(
            f"source {source.name!r} from {origin}: not a readable verb list ({exc}); nothing was written"
        ) from exc
    actual = hashlib.sha256(verb_list_bytes(verbs)).hexdigest()
    if actual in source.sha256:
        return
    index: set[str] | None = None
    if source.verb_index is not None:
        with contextlib.suppress(OSError):
            index = set(source.verb_index.read_text(encoding="utf-8").split())
    if index is None:
        change = f"{len(verbs)} verbs (no verb_index in {source.manifest} to count the verbs added and removed)"
    else:
        kept = sum(_verb_hash(v) in index for v in verbs)
        change = (
            f"{len(verbs) - kept} verb(s) added, {len(index) - kept} removed "
            f"({len(verbs)} verbs, the pinned list has {len(index)})"
        )
    raise VerbevalError(
        f"source {source.name!r} from {origin}: the verb list differs from the pinned one: {change}; "
        f"nothing was written. If you trust this list, add its checksum {actual} to the entry's sha256 "
        f"list in {source.manifest}"
    )


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    # ctime cannot be set by a copy that preserves times (cp -p, rsync -a), and changes on every write
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _cache_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified.json")


def cached_content_digest(source: Source, path: str | Path, write_cache: bool = True) -> str:
    """:func:`content_digest` of ``path``, cached beside it under its size, mtime, ctime and inode
    (``.<name>.verified.json``), so that checking an unchanged file costs one ``stat``. With
    ``write_cache=False`` (planning the workflow, which writes no file) a missing or stale cache
    entry is not written."""
    path = Path(path)
    key = _stat_key(path)
    cache = _cache_path(path)
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("stat") == key and cached.get("format") == source.format:
            return str(cached["sha256"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    digest = content_digest(source, path)
    if write_cache and _stat_key(path) == key:  # unchanged while it was read
        with contextlib.suppress(OSError):
            with atomic_open(cache) as fh:
                json.dump({"stat": key, "format": source.format, "sha256": digest}, fh)
    return digest


def is_verified(source: Source, path: str | Path, write_cache: bool = True) -> bool:
    """Whether ``path`` is a file whose checksum (:func:`cached_content_digest`) the manifest accepts."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        return cached_content_digest(source, path, write_cache) in source.sha256
    except (OSError, InputError):
        return False


def restore_set_aside(source: Source, dest: Path, before_replace: Callable[[], None] | None = None) -> bool:
    """Put back a copy set aside earlier (:func:`set_aside_unverified`, e.g. under another manifest)
    that verifies now: one atomic rename, no download (``before_replace`` runs just before it)."""
    if not dest.parent.is_dir():
        return False
    for candidate in sorted(dest.parent.glob(f"{glob_escape(dest.name)}.unverified-*")):
        if candidate.is_file() and digest_or_none(source, candidate) in source.sha256:
            if before_replace is not None:
                before_replace()
            os.replace(candidate, dest)
            print(f"{dest}: restored the verified copy {candidate.name}", file=sys.stderr)
            return True
    return False


def set_aside_unverified(source: Source, path: str | Path) -> Path | None:
    """Move a copy of ``source`` at ``path`` that does not verify to
    ``<name>.unverified-<first 12 hex of its sha256>`` beside it (one atomic rename: nothing is
    deleted, and the next fetch writes a verified copy); return where it went, or None if ``path``
    is missing or verifies."""
    path = Path(path)
    if not path.is_file() or is_verified(source, path):
        return None
    target = path.with_name(f"{path.name}.unverified-{sha256_file(path)[:12]}")
    os.replace(path, target)
    with contextlib.suppress(FileNotFoundError):
        _cache_path(path).unlink()
    return target


def digest_or_none(source: Source, path: Path) -> str | None:
    """:func:`content_digest`, or None for an unreadable file (no cache file: a mirror holds only data)."""
    try:
        return content_digest(source, path)
    except (OSError, InputError):
        return None

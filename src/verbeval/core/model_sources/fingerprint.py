"""Content fingerprints of local model files, hashed once and cached.

A model's fingerprint goes into its shard keys and the workflow's rerun triggers, so it must change
whenever the weights change and only then:

* it is a sha256 of the file *contents* (never names, sizes or times alone: a checkpoint copied
  over another with preserved times, ``cp -p`` or ``rsync -a``, has the same sizes and mtimes);
* the hash of each file is cached under ``$VERBEVAL_CACHE_DIR/file-hashes`` (default
  ``~/.cache/verbeval``) keyed by (absolute path, size, mtime, inode, ctime). A copy cannot
  preserve the ctime or inode, so a replaced file is hashed again; a ``touch`` is hashed again
  too, but gives the same hash, so nothing is recomputed downstream.

A multi-GB checkpoint is therefore read once per change, not once per job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

from verbeval.core.io import sha256_file, write_json

log = logging.getLogger(__name__)

#: environment variable of verbeval's cache folder (wheels, file hashes)
CACHE_ENV = "VERBEVAL_CACHE_DIR"

_MEMO: dict[tuple[str, int, int, int, int], str] = {}


def cache_dir() -> Path:
    """verbeval's cache folder: ``$VERBEVAL_CACHE_DIR``, default ``~/.cache/verbeval``."""
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/verbeval").expanduser()


def _stamp(path: Path) -> tuple[str, int, int, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _record_path(abspath: str) -> Path:
    return cache_dir() / "file-hashes" / (hashlib.sha256(abspath.encode()).hexdigest()[:32] + ".json")


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's contents, from the cache when its (path, size, mtime, inode, ctime) are
    those recorded with the hash; else hashed now and recorded (the cache is best effort: an
    unwritable cache folder only costs a rehash next time)."""
    p = Path(path)
    stamp = _stamp(p)
    if stamp in _MEMO:
        return _MEMO[stamp]
    record = _record_path(stamp[0])
    try:
        saved = json.loads(record.read_text())
        if tuple(saved["stamp"]) == stamp:
            _MEMO[stamp] = str(saved["sha256"])
            return _MEMO[stamp]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    start = time.perf_counter()
    digest = sha256_file(p)
    if _stamp(p) != stamp:  # changed while being read: hash what is there now
        return file_sha256(p)
    if stamp[1] > 1 << 28:
        log.info(
            "hashed %s (%.1f GB) in %.1f s; cached in %s", p, stamp[1] / 1e9, time.perf_counter() - start, record.parent
        )
    _MEMO[stamp] = digest
    try:
        write_json(record, {"stamp": list(stamp), "sha256": digest})
    except OSError as exc:
        log.debug("cannot cache the hash of %s in %s: %s", p, record, exc)
    return digest


def dir_sha256(path: str | Path) -> str:
    """sha256 over the relative names and content hashes (:func:`file_sha256`) of every file under
    a folder, in name order."""
    root = Path(path)
    h = hashlib.sha256()
    for f in sorted(x for x in root.rglob("*") if x.is_file()):
        h.update(f"{f.relative_to(root).as_posix()}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()

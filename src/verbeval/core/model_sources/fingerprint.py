"""What identifies a local model's files: a stat identity for the plan, a content hash for the jobs.

Two identities, for two places:

* **The plan** (Snakefile parse, ``verbeval dvc-yaml``) reads no weights: it knows a local model by
  the *stat identity* of its files (:func:`dir_stat_sha256`, :func:`file_stat_sha256`): a sha256 over
  each file's relative name, size, mtime, inode and ctime. It is a rerun trigger only (a Snakemake
  param), never recorded in an output. A checkpoint copied over another with preserved times
  (``cp -p``, ``rsync -a``) cannot preserve the ctime, nor the inode of a new file; a rewrite in place
  changes the mtime and ctime: either changes it, so the model's jobs run again. A ``touch`` changes
  it too; the job then finds the same content hash, and keeps its shards.
* **The jobs** that load a model record its *content hash* with their outputs (``local-sha256:...``,
  ``gguf-sha256:...`` of :func:`verbeval.core.models.model_fingerprint`): a sha256 of the files'
  contents (:func:`dir_sha256`, :func:`file_sha256`), never names, sizes or times alone.

The content hash of each file is cached in one small SQLite database,
``$VERBEVAL_CACHE_DIR/file-hashes.sqlite`` (default ``~/.cache/verbeval``), keyed by the absolute path
and valid while the file's (size, mtime, inode, ctime) are those recorded with it: a replaced file is
hashed again, a multi-GB checkpoint is read once per change, not once per job. Each lookup and each
write costs O(1) (no listing of a folder, no fsync). Parallel jobs share the database: a rollback
journal (not WAL, which needs all its writers on one host) and a busy timeout. It keeps at most
:data:`MAX_ENTRIES` entries (the least recently used go first), and every :data:`PRUNE_EVERY` writes
it drops the entries of the files that are gone among the next :data:`PRUNE_BATCH`. The cache is best
effort: an unwritable, locked or damaged one only costs a rehash. (The folder ``file-hashes/`` of one
JSON file per hash, written by earlier versions, is no longer read; it is left as it is.)
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import time
from pathlib import Path

from verbeval.core.io import sha256_file

log = logging.getLogger(__name__)

#: environment variable of verbeval's cache folder (wheels, file hashes)
CACHE_ENV = "VERBEVAL_CACHE_DIR"
#: the file-hash database, in :func:`cache_dir`
DB_NAME = "file-hashes.sqlite"
#: the most entries the database keeps (about 200 bytes each): the least recently used go first
MAX_ENTRIES = 200_000
#: every this many writes (by row id), one pruning step: gone files' entries out, the bound kept
PRUNE_EVERY = 64
#: how many entries one pruning step checks for files that are gone (in turn, round the table)
PRUNE_BATCH = 512
#: a hit refreshes an entry's last use at most this often (seconds), so that reads rarely write
TOUCH_AFTER_S = 3600
#: how long a writer waits for another process's lock before giving up (the cache is best effort)
BUSY_TIMEOUT_S = 10.0

Stamp = tuple[str, int, int, int, int]  # (absolute path, size, mtime_ns, inode, ctime_ns)

_MEMO: dict[Stamp, str] = {}
_DBS: dict[tuple[int, str], sqlite3.Connection | None] = {}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hashes (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    used INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS hashes_used ON hashes (used);
CREATE TABLE IF NOT EXISTS prune (id INTEGER PRIMARY KEY CHECK (id = 0), next_rowid INTEGER NOT NULL);
"""


def cache_dir() -> Path:
    """verbeval's cache folder: ``$VERBEVAL_CACHE_DIR``, default ``~/.cache/verbeval``."""
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/verbeval").expanduser()


def db_path() -> Path:
    """The file-hash database: ``file-hashes.sqlite`` in :func:`cache_dir`."""
    return cache_dir() / DB_NAME


def stat_identity(path: str | Path) -> tuple[int, int, int, int]:
    """A file's (size, mtime_ns, inode, ctime_ns), following symbolic links."""
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _stamp(path: Path) -> Stamp:
    return (str(path.resolve()), *stat_identity(path))


def _files(root: Path) -> list[Path]:
    """The files under a folder (symbolic links to files included), in name order."""
    return sorted(x for x in root.rglob("*") if x.is_file())


def file_stat_sha256(path: str | Path) -> str:
    """sha256 of a file's name, size, mtime, inode and ctime (no byte of it read): what the plan
    knows a GGUF file by."""
    p = Path(path)
    return hashlib.sha256(_stat_line(p.name, p).encode()).hexdigest()


def dir_stat_sha256(path: str | Path) -> str:
    """sha256 over the relative names and stat identities (size, mtime, inode, ctime) of every file
    under a folder, in name order (no byte of them read): what the plan knows a local model by."""
    root = Path(path)
    h = hashlib.sha256()
    for f in _files(root):
        h.update(_stat_line(f.relative_to(root).as_posix(), f).encode())
    return h.hexdigest()


def _stat_line(name: str, path: Path) -> str:
    return name + "".join(f"\0{v}" for v in stat_identity(path)) + "\n"


def _now() -> int:
    return int(time.time())


def _db() -> sqlite3.Connection | None:
    """This process's connection to the database (None when it cannot be opened: no cache)."""
    key = (os.getpid(), str(db_path()))
    if key not in _DBS:
        con = None
        try:
            db_path().parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(str(db_path()), timeout=BUSY_TIMEOUT_S, isolation_level=None)
            # no fsync per write (a rollback journal with fsyncs costs about 15 ms a write): a killed
            # process leaves the database intact, only an OS crash can damage it (then: no cache)
            con.execute("PRAGMA synchronous = OFF")
            con.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
                log.warning("file-hash cache %s is damaged (%s): hashes are not cached; remove it", db_path(), exc)
            else:
                log.debug("no file-hash cache at %s: %s", db_path(), exc)
            if con is not None:
                con.close()
            con = None
        _DBS[key] = con
    return _DBS[key]


def _lookup(stamp: Stamp) -> str | None:
    con = _db()
    if con is None:
        return None
    try:
        row = con.execute(
            "SELECT size, mtime_ns, ino, ctime_ns, sha256, used FROM hashes WHERE path = ?", (stamp[0],)
        ).fetchone()
        if row is None or tuple(row[:4]) != stamp[1:]:
            return None
        now = _now()
        if row[5] < now - TOUCH_AFTER_S:
            con.execute("UPDATE hashes SET used = ? WHERE path = ?", (now, stamp[0]))
        return str(row[4])
    except sqlite3.Error as exc:
        log.debug("file-hash cache %s unreadable: %s", db_path(), exc)
        return None


def _record(stamp: Stamp, digest: str) -> None:
    con = _db()
    if con is None:
        return
    try:
        cur = con.execute(
            "INSERT OR REPLACE INTO hashes (path, size, mtime_ns, ino, ctime_ns, sha256, used) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*stamp, digest, _now()),
        )
        if cur.lastrowid is not None and cur.lastrowid % PRUNE_EVERY == 0:
            prune(con)
    except sqlite3.Error as exc:
        log.debug("cannot cache the hash of %s in %s: %s", stamp[0], db_path(), exc)


def prune(con: sqlite3.Connection | None = None) -> int:
    """One pruning step of the database: drop the entries of the files that are gone among the next
    :data:`PRUNE_BATCH` (in row order, resuming where the last step stopped, round the table), then
    the least recently used entries beyond :data:`MAX_ENTRIES`. Returns how many went."""
    con = con or _db()
    if con is None:
        return 0
    con.execute("BEGIN IMMEDIATE")  # one transaction (the connection is in autocommit mode otherwise)
    try:
        row = con.execute("SELECT next_rowid FROM prune WHERE id = 0").fetchone()
        batch = con.execute(
            "SELECT rowid, path FROM hashes WHERE rowid >= ? ORDER BY rowid LIMIT ?",
            (row[0] if row else 0, PRUNE_BATCH),
        ).fetchall()
        gone = [(rowid,) for rowid, path in batch if not os.path.exists(path)]
        con.executemany("DELETE FROM hashes WHERE rowid = ?", gone)
        following = batch[-1][0] + 1 if len(batch) == PRUNE_BATCH else 0  # else round again from the start
        con.execute("INSERT OR REPLACE INTO prune (id, next_rowid) VALUES (0, ?)", (following,))
        over = con.execute("SELECT count(*) FROM hashes").fetchone()[0] - MAX_ENTRIES
        if over > 0:
            con.execute(
                "DELETE FROM hashes WHERE rowid IN (SELECT rowid FROM hashes ORDER BY used, rowid LIMIT ?)", (over,)
            )
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            con.execute("ROLLBACK")
        raise
    return len(gone) + max(over, 0)


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's contents, from the cache when its (path, size, mtime, inode, ctime) are
    those recorded with the hash; else hashed now and recorded (the cache is best effort: an
    unwritable cache only costs a rehash next time)."""
    p = Path(path)
    stamp = _stamp(p)
    if stamp in _MEMO:
        return _MEMO[stamp]
    cached = _lookup(stamp)
    if cached is not None:
        _MEMO[stamp] = cached
        return cached
    start = time.perf_counter()
    digest = sha256_file(p)
    if _stamp(p) != stamp:  # changed while being read: hash what is there now
        return file_sha256(p)
    if stamp[1] > 1 << 28:
        log.info(
            "hashed %s (%.1f GB) in %.1f s; cached in %s", p, stamp[1] / 1e9, time.perf_counter() - start, db_path()
        )
    _MEMO[stamp] = digest
    _record(stamp, digest)
    return digest


def dir_sha256(path: str | Path) -> str:
    """sha256 over the relative names and content hashes (:func:`file_sha256`) of every file under
    a folder, in name order."""
    root = Path(path)
    h = hashlib.sha256()
    for f in _files(root):
        h.update(f"{f.relative_to(root).as_posix()}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()

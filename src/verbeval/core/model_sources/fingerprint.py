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
journal (not WAL, which needs all its writers on one host) and a short busy timeout
(:data:`BUSY_TIMEOUT_S`: longer than another job's write, which takes milliseconds). It keeps at most
:data:`MAX_ENTRIES` entries (the least recently used go first), and every :data:`PRUNE_EVERY` writes
it drops the entries of the files that are gone among the next :data:`PRUNE_BATCH`. The cache is best
effort: an unwritable one only costs a rehash; one locked by another process for longer than that
(a stuck job, an open ``sqlite3`` shell) is skipped at once for the rest of the process, with one
INFO line, and the files are hashed without it.

A hash read from it is verified before use: the database passes ``PRAGMA quick_check`` when a
process opens it, and each entry carries a tag (:func:`_tag`: a sha256 over the entry's path, stat
identity and hash) that must match, so a damaged byte never becomes a wrong fingerprint. A damaged
database (garbage bytes, a malformed page, a tag that does not match) is moved aside
(``file-hashes.sqlite.damaged``, its journal with it; renamed, never deleted) and rebuilt, with one
WARNING line naming it; entries written by a version without tags are hashed again once. (The folder
``file-hashes/`` of one JSON file per hash, written by earlier versions, is no longer read; it is
left as it is.)
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
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
#: how long a reader or writer waits for another process's lock before hashing without the cache
#: (another job's write holds it for milliseconds; a lock held longer is skipped, not waited for)
BUSY_TIMEOUT_S = 0.25

Stamp = tuple[str, int, int, int, int]  # (absolute path, size, mtime_ns, inode, ctime_ns)

_MEMO: dict[Stamp, str] = {}
_DBS: dict[tuple[int, str], sqlite3.Connection | None] = {}
#: the inode of the database file each connection of :data:`_DBS` opened (a damaged one is moved
#: aside only while it is still the file at the path: another process may have rebuilt it already)
_INODES: dict[tuple[int, str], int] = {}
#: held while a thread uses this process's connection (opened, queried, replaced)
_LOCK = threading.RLock()

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hashes (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    used INTEGER NOT NULL,
    tag TEXT
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


class _Damaged(Exception):
    """The database is damaged (its reason as the message)."""


def _tag(stamp: Stamp, digest: str) -> str:
    """An entry's check: 16 hex digits of a sha256 over its path, stat identity and hash."""
    return hashlib.sha256("\0".join(map(str, (*stamp, digest))).encode()).hexdigest()[:16]


def _damage(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file is damaged (SQLite's "file is not a database", "database disk
    image is malformed"): not locked, unwritable or misused (its subclasses)."""
    return type(exc) is sqlite3.DatabaseError and getattr(exc, "sqlite_errorname", "SQLITE_CORRUPT") in (
        "SQLITE_CORRUPT",
        "SQLITE_NOTADB",
    )


def _locked(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _connect(path: Path) -> sqlite3.Connection:
    """A connection to the database at ``path``, checked (``quick_check``) and with its schema;
    raises :class:`_Damaged` for a damaged file, :class:`sqlite3.Error` or OSError else."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # one connection per process, used by its threads in turn (:data:`_LOCK`; a queue's prefetcher
    # loads the next model on a thread of its own)
    con = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        # no fsync per write (a rollback journal with fsyncs costs about 15 ms a write): a killed
        # process leaves the database intact, only an OS crash can damage it (then: moved aside)
        con.execute("PRAGMA synchronous = OFF")
        problems = [row[0] for row in con.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise _Damaged(f"quick_check: {'; '.join(map(str, problems[:3]))}")
        con.executescript(_SCHEMA)
        if "tag" not in {row[1] for row in con.execute("PRAGMA table_info(hashes)")}:
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it meanwhile
                con.execute("ALTER TABLE hashes ADD COLUMN tag TEXT")  # a version without tags wrote it
    except sqlite3.Error as exc:
        con.close()
        if _damage(exc):
            raise _Damaged(str(exc)) from exc
        raise
    except BaseException:
        con.close()
        raise
    return con


def _set_aside(path: Path, ino: int | None) -> Path | None:
    """Move the damaged database at ``path`` (and its journal, which belongs to it) to the first free
    ``<name>.damaged[.N]``, unless another process has done so already (the file there now is not
    inode ``ino``); where it went, or None."""
    try:
        if ino is not None and os.stat(path).st_ino != ino:
            return None
        n = 1
        while True:
            aside = path.with_name(f"{path.name}.damaged" + (f".{n}" if n > 1 else ""))
            if not aside.exists():
                break
            n += 1
        os.replace(path, aside)
        journal = path.with_name(path.name + "-journal")
        if journal.exists():
            os.replace(journal, aside.with_name(aside.name + "-journal"))
        return aside
    except OSError:
        return None


def _open() -> sqlite3.Connection | None:
    """A new connection to the database: a damaged one moved aside (one WARNING line) and rebuilt,
    a locked one skipped (one INFO line), an unwritable one left (a DEBUG line); None: no cache."""
    path = db_path()
    for attempt in (1, 2):
        try:
            ino = os.stat(path).st_ino if path.exists() else None
            con = _connect(path)
            _INODES[(os.getpid(), str(path))] = os.stat(path).st_ino
            return con
        except _Damaged as exc:
            if attempt == 2:
                log.warning("file-hash cache %s is damaged again (%s): hashing without it", path, exc)
                return None
            _rebuild(path, ino, str(exc))
        except (OSError, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.Error) and _locked(exc):
                log.info("file-hash cache %s is locked by another process: hashing without it", path)
            else:
                log.debug("no file-hash cache at %s: %s", path, exc)
            return None
    return None  # pragma: no cover - the loop returns


def _rebuild(path: Path, ino: int | None, reason: str) -> None:
    aside = _set_aside(path, ino)
    where = f"moved aside to {aside.name}" if aside else "moved aside by another process"
    log.warning("file-hash cache %s is damaged (%s): %s and rebuilt; its files are hashed again", path, reason, where)


def _db() -> sqlite3.Connection | None:
    """This process's connection to the database (None when it cannot be opened: no cache)."""
    key = (os.getpid(), str(db_path()))
    with _LOCK:
        if key not in _DBS:
            _DBS[key] = _open()
        return _DBS[key]


def _failed(exc: sqlite3.Error | _Damaged, what: str) -> None:
    """A query that failed: a damaged database is moved aside and rebuilt (this process reconnects),
    a locked one is skipped for the rest of the process; anything else costs this one entry."""
    key = (os.getpid(), str(db_path()))
    con = _DBS.get(key)
    if isinstance(exc, _Damaged) or _damage(exc):
        _DBS[key] = None
        if con is not None:
            con.close()
        _rebuild(db_path(), _INODES.get(key), str(exc))
        _DBS[key] = _open()
    elif _locked(exc):
        _DBS[key] = None
        if con is not None:
            con.close()
        log.info("file-hash cache %s is locked by another process: hashing without it", db_path())
    else:
        log.debug("file-hash cache %s: %s: %s", db_path(), what, exc)


def _lookup(stamp: Stamp) -> str | None:
    with _LOCK:
        return _locked_lookup(stamp)


def _locked_lookup(stamp: Stamp) -> str | None:
    con = _db()
    if con is None:
        return None
    try:
        row = con.execute(
            "SELECT size, mtime_ns, ino, ctime_ns, sha256, used, tag FROM hashes WHERE path = ?", (stamp[0],)
        ).fetchone()
        if row is None or tuple(row[:4]) != stamp[1:]:
            return None
        if row[6] is None:  # written by a version without tags: hashed again, recorded with one
            return None
        if row[6] != _tag(stamp, row[4]):
            raise _Damaged(f"the entry of {stamp[0]} does not match its tag")
        now = _now()
        if row[5] < now - TOUCH_AFTER_S:
            con.execute("UPDATE hashes SET used = ? WHERE path = ?", (now, stamp[0]))
        return str(row[4])
    except (sqlite3.Error, _Damaged) as exc:
        _failed(exc, "unreadable")
        return None


def _record(stamp: Stamp, digest: str) -> None:
    with _LOCK:
        _locked_record(stamp, digest)


def _locked_record(stamp: Stamp, digest: str) -> None:
    con = _db()
    if con is None:
        return
    try:
        cur = con.execute(
            "INSERT OR REPLACE INTO hashes (path, size, mtime_ns, ino, ctime_ns, sha256, used, tag) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*stamp, digest, _now(), _tag(stamp, digest)),
        )
        if cur.lastrowid is not None and cur.lastrowid % PRUNE_EVERY == 0:
            prune(con)
    except sqlite3.Error as exc:
        _failed(exc, f"cannot cache the hash of {stamp[0]}")


def prune(con: sqlite3.Connection | None = None) -> int:
    """One pruning step of the database: drop the entries of the files that are gone among the next
    :data:`PRUNE_BATCH` (in row order, resuming where the last step stopped, round the table), then
    the least recently used entries beyond :data:`MAX_ENTRIES`. Returns how many went."""
    with _LOCK:
        con = con or _db()
        return 0 if con is None else _prune(con)


def _prune(con: sqlite3.Connection) -> int:
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

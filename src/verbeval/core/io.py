"""Atomic file output and small I/O helpers.

Every artifact is written to a temporary file in the destination directory and renamed into
place, so a crash never leaves a half-written output behind. The temporary file
(``.<name>.<random>.tmp``) of a job that was killed is removed by the next write of the same
target: a writer holds an exclusive ``flock`` on its temporary file while it works, so a
temporary file nobody holds is stale. A temporary *folder* (:func:`temporary_folder`) carries its
owner's pid and host in its name, and one whose owner on this host is gone is removed by the next
use of the same prefix.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from verbeval.core.errors import VerbevalError

if TYPE_CHECKING:  # only annotations: the writers call the frame's own methods, so light commands
    import pandas as pd  # (fetch, mirror) never import pandas through this module

try:  # POSIX; elsewhere stale temporaries are simply not cleaned up
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_parent(path: Path) -> None:
    """Create the directory of ``path``; a file in the way is a NotADirectoryError naming it."""
    parent = path.parent
    blocker = next((a for a in (parent, *parent.parents) if a.exists() or a.is_symlink()), None)
    if blocker is not None and not blocker.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "is a file, not a directory", str(blocker))
    parent.mkdir(parents=True, exist_ok=True)


def _lock(fd: int) -> bool:
    """Take an exclusive, non-blocking flock on ``fd``; False when another process holds one."""
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        return True  # a file system without locks: keep writing, as before
    return True


def stale_temporaries(path: str | Path) -> list[Path]:
    """The temporary files of :func:`atomic_path` for ``path`` that no running writer holds.

    Only names of exactly the form ``.<name>.<8 random characters>.tmp`` count, so the
    temporaries of another target in the same directory (``<name>.x`` included) are never touched,
    and a temporary file that a live process is writing is locked, hence skipped.
    """
    if fcntl is None:  # pragma: no cover
        return []
    dest = Path(path)
    pattern = re.compile(rf"\.{re.escape(dest.name)}\.[A-Za-z0-9_]{{8}}\.tmp")
    stale = []
    try:
        names = os.listdir(dest.parent)
    except OSError:
        return []
    for name in names:
        if not pattern.fullmatch(name):
            continue
        cand = dest.parent / name
        try:
            fd = os.open(cand, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if _lock(fd):
                stale.append(cand)
        finally:
            os.close(fd)  # releases the probe's lock
    return stale


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Remove what :func:`stale_temporaries` finds for ``path`` (left by a killed job); return them."""
    removed = []
    for cand in stale_temporaries(path):
        with contextlib.suppress(FileNotFoundError):
            cand.unlink()
            removed.append(cand)
            log.info("removed %s, the temporary file of an interrupted write of %s", cand, Path(path).name)
    return removed


def _host() -> str:
    """This machine's name as it appears in a temporary folder's name (letters, digits, '.', '-')."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", socket.gethostname())[:64] or "host"


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:  # Linux: a zombie (dead, not yet reaped by its new parent) holds its pid but no longer works
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[:1] != [b"Z"]
    except OSError:
        return True


#: a temporary folder of another host (or of a name without a pid) is stale after this many seconds
STALE_FOLDER_AGE_S = 24 * 3600


def stale_temporary_folders(parent: str | Path, prefix: str, max_age_s: float = STALE_FOLDER_AGE_S) -> list[Path]:
    """The folders of :func:`temporary_folder` with ``prefix`` in ``parent`` that no running process owns.

    A folder ``<prefix><pid>@<host>-<8 characters>`` of this host is stale when process ``pid``
    is gone (killed with its owner); one of another host (a cache folder shared over the network),
    or an older ``<prefix><8 characters>`` without a pid, when it was last changed more than
    ``max_age_s`` seconds ago. Other names are never touched.
    """
    folder = Path(parent)
    owned = re.compile(rf"{re.escape(prefix)}(\d+)@([A-Za-z0-9.-]+)-[A-Za-z0-9_]{{8}}")
    unowned = re.compile(rf"{re.escape(prefix)}[A-Za-z0-9_]{{8}}")
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    host, now, stale = _host(), time.time(), []
    for name in names:
        m = owned.fullmatch(name)
        if m is None and not unowned.fullmatch(name):
            continue
        cand = folder / name
        try:
            st = cand.lstat()
        except OSError:
            continue
        if not os.path.isdir(cand) or cand.is_symlink():
            continue
        if m is not None and m.group(2) == host:
            if not _pid_alive(int(m.group(1))):
                stale.append(cand)
        elif now - st.st_mtime > max_age_s:
            stale.append(cand)
    return stale


def remove_stale_temporary_folders(parent: str | Path, prefix: str, what: str = "an interrupted job") -> list[Path]:
    """Remove what :func:`stale_temporary_folders` finds (left by a killed process); return them."""
    removed = []
    for cand in stale_temporary_folders(parent, prefix):
        shutil.rmtree(cand, ignore_errors=True)
        if not cand.exists():
            removed.append(cand)
            log.info("removed %s, the temporary folder of %s", cand, what)
    return removed


@contextlib.contextmanager
def temporary_folder(parent: str | Path, prefix: str, what: str = "an interrupted job") -> Iterator[Path]:
    """A new folder ``<prefix><pid>@<host>-<random>`` in ``parent`` (created if needed), removed with
    its content after the block, whatever happens in it. The folders of ``prefix`` that killed
    processes left there are removed first (:func:`remove_stale_temporary_folders`, naming them as
    the temporary folders of ``what``)."""
    where = Path(parent)
    where.mkdir(parents=True, exist_ok=True)
    remove_stale_temporary_folders(where, prefix, what)
    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}@{_host()}-", dir=where))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds.

    On any exception the temporary file is removed and ``path`` is left untouched; an ``OSError``
    that names no file (disk full inside a library's writer) is given ``path`` as its file, so the
    one-line error says which output failed. Temporaries of ``path`` left by a killed writer are
    removed first (:func:`remove_stale_temporaries`).
    """
    dest = Path(path)
    make_parent(dest)
    remove_stale_temporaries(dest)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    tmp_path = Path(tmp)
    try:
        _lock(fd)  # held until the rename: marks the temporary as in use
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; follow the umask like open() does
        yield tmp_path
        os.replace(tmp_path, dest)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if type(exc) is OSError and exc.filename is None:  # not a subclass, which names its own file
            exc.filename = str(dest)
        raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file for writing that replaces ``path`` atomically on success."""
    if "b" in mode:
        encoding = None
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding, newline="" if encoding else None) as fh:
        yield fh


def write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def write_json(path: str | Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_texts_together(files: Sequence[tuple[str | Path, str]]) -> None:
    """Write every ``(path, text)`` of ``files`` or none of them (UTF-8): each to a temporary file
    beside it, flushed to disk, then renamed onto its path in the order given. When a write or a
    rename fails, the temporaries are removed, every path already renamed onto gets its earlier
    file back (or is removed when it had none), and the error is raised."""
    temps: list[Path] = []
    fds: list[int] = []  # each temporary's, locked until the renames: marks it as in use
    done: list[tuple[Path, Path | None]] = []  # (path, its earlier file kept aside, or None)
    try:
        for path, text in files:
            dest = Path(path)
            make_parent(dest)
            remove_stale_temporaries(dest)
            fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
            fds.append(fd)
            temps.append(Path(tmp))
            _lock(fd)
            os.fchmod(fd, 0o666 & ~_umask())
            with open(fd, "w", encoding="utf-8", newline="", closefd=False) as fh:
                fh.write(text)
            os.fsync(fd)
        for (path, _), tmp in zip(files, temps):
            dest = Path(path)
            earlier = None
            if dest.exists():  # kept as a second name until every file is in place
                earlier = dest.with_name(f".{dest.name}.{os.getpid()}.earlier")
                earlier.unlink(missing_ok=True)
                try:
                    os.link(dest, earlier)
                except OSError:  # a file system without hard links
                    os.replace(dest, earlier)
            done.append((dest, earlier))
            os.replace(tmp, dest)
        with contextlib.suppress(OSError):  # the renames themselves on disk
            folder = os.open(Path(files[-1][0]).parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
    except BaseException:
        for dest, earlier in reversed(done):
            with contextlib.suppress(OSError):
                if earlier is not None:
                    os.replace(earlier, dest)
                    earlier.unlink(missing_ok=True)  # still there when both names were one file: rename did nothing
                else:
                    dest.unlink(missing_ok=True)
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    for _, earlier in done:
        if earlier is not None:
            with contextlib.suppress(OSError):
                earlier.unlink()


def quarantine(path: str | Path) -> Path:
    """Move an unusable file aside, ``<name>.corrupt`` (replacing an earlier one), so that the next run
    recomputes it; returns where it went."""
    src = Path(path)
    dest = src.with_name(src.name + ".corrupt")
    src.replace(dest)
    return dest


def set_aside(path: str | Path, reason: str, then: str, logger: logging.Logger = log) -> None:
    """A damaged file that stands in for a computation (a score file, a count stream, a cached wheel):
    moved aside (:func:`quarantine`) and said so in one warning line of ``logger``,
    ``<path>: <reason>; not used (moved to <name>.corrupt), <then>`` (``then``: what is done instead)."""
    try:
        where = f"moved to {quarantine(path).name}"
    except OSError as exc:  # another process moved it first, or a read-only folder: not used either way
        where = f"not moved ({exc.strerror or exc})"
    logger.warning("%s: %s; not used (%s), %s", path, reason, where, then)


def write_parquet(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``df`` to Parquet atomically, without the pandas index, deterministically."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False, engine="pyarrow", compression="zstd")


def write_csv(df: pd.DataFrame, path: str | Path, **kwargs: Any) -> None:
    with atomic_open(path, "w") as fh:
        df.to_csv(fh, index=False, lineterminator="\n", **kwargs)


def load_yaml(text: str, loader: Any = None, fast_loader: Any = None) -> Any:
    """``yaml.load(text, Loader=loader)`` (default ``yaml.SafeLoader``), parsed by libyaml's C parser.

    ``fast_loader`` is the same loader on ``yaml.CSafeLoader`` (default: ``CSafeLoader`` itself
    when ``loader`` is the default; none, i.e. pure Python, when PyYAML was built without
    libyaml). It reads the project's schema and manifest 15x faster (0.007 s against 0.1 s). A
    document it refuses is read again by ``loader``, so that every error, with its message and
    mark (line, column, the snippet), is exactly the pure-Python loader's.
    """
    import yaml

    if loader is None:
        loader = yaml.SafeLoader
        fast_loader = getattr(yaml, "CSafeLoader", None)
    if fast_loader is not None:
        try:
            return yaml.load(text, Loader=fast_loader)  # a safe loader (CSafeLoader or a subclass)
        except yaml.YAMLError:
            pass  # the pure-Python loader raises the error, as it always did
    return yaml.load(text, Loader=loader)  # a safe loader


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk_size), b""):
            h.update(block)
    return h.hexdigest()


def check_writable(*paths: str | Path | None) -> None:
    """Fail early, before a model is loaded, when an output could not be written.

    For every output path, its directory is created if needed and a temporary file is created
    and removed in it. Raises :class:`VerbevalError` naming the path and the reason (permission
    denied, read-only file system, disk full, a parent that is a file, ...).
    """
    seen: set[Path] = set()
    for path in paths:
        if path is None:
            continue
        parent = Path(path).parent
        if parent in seen:
            continue
        seen.add(parent)
        try:
            make_parent(Path(path))
            with tempfile.TemporaryFile(dir=parent, prefix=".verbeval-write-check."):
                pass
        except OSError as exc:
            raise VerbevalError(f"cannot write {path}: {describe_os_error(exc, parent)}") from None


def write_problem(folder: str | Path) -> tuple[Path, str] | None:
    """Why no file can be created in ``folder``, else None: ``(where, reason)``.

    ``where`` is ``folder`` or, when it does not exist yet, the nearest existing folder above it
    (where it would be created; a file or a broken link in the way is the reason). A probe file is
    created and removed there: the answer of the file system itself (read-only, permissions, ACLs,
    quotas, root's rights), which ``os.access`` does not give.
    """
    target = Path(folder)
    existing = next((a for a in (target, *target.parents) if a.exists() or a.is_symlink()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        broken = existing.is_symlink() and not existing.exists()
        return existing, f"{existing} is {'a broken symbolic link' if broken else 'a file, not a directory'}"
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".verbeval-write-check."):
            pass
    except OSError as exc:
        return existing, exc.strerror or str(exc)
    return None


_OS_REASONS: tuple[tuple[type[OSError], int], ...] = (
    (FileNotFoundError, errno.ENOENT),
    (PermissionError, errno.EACCES),
    (IsADirectoryError, errno.EISDIR),
    (NotADirectoryError, errno.ENOTDIR),
    (FileExistsError, errno.EEXIST),
)


def describe_json_error(exc: json.JSONDecodeError, unit: str = "column") -> str:
    """``exc``'s reason and where, as one phrase: ``Expecting value at column 5``, ``Unterminated
    string starting at column 12`` (the decoder's message may already end in "at", never "at at").
    ``unit``: ``column`` (``exc.colno``, 1-based, for one line of a file), ``line`` (``line 3
    column 5``, for a whole document) or ``character`` (``exc.pos``, 0-based, for a short text)."""
    where = {
        "column": f"column {exc.colno}",
        "line": f"line {exc.lineno} column {exc.colno}",
        "character": f"character {exc.pos}",
    }[unit]
    msg = exc.msg.rstrip()
    return f"{msg} {where}" if msg.endswith(" at") else f"{msg} at {where}"


def describe_os_error(exc: OSError, path: str | Path | None = None) -> str:
    """One line for an OSError: ``<path>: <reason>`` (the file named by the error when known).

    Some libraries (pyarrow) raise ``FileNotFoundError(path)`` with the path as the only argument;
    the reason is then taken from the exception type.
    """
    where: Any = exc.filename if exc.filename is not None else path
    if exc.filename2 is not None:
        where = f"{exc.filename} -> {exc.filename2}"
    reason = exc.strerror
    raw = str(exc.args[0]) if exc.strerror is None and len(exc.args) == 1 else str(exc)  # str() shows a set filename
    text = raw.strip().splitlines()[0] if raw.strip() else ""
    if not reason:
        code = next((c for t, c in _OS_REASONS if isinstance(exc, t)), None)
        if code is not None:
            reason = os.strerror(code)
            if where is None and text:
                where = text
        else:
            reason = text or type(exc).__name__
    return f"{where}: {reason}" if where is not None else reason

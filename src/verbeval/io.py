"""Atomic file output and small I/O helpers.

Every artifact is written to a temporary file in the destination directory and renamed into
place, so a crash never leaves a half-written output behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pandas as pd


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600; follow the umask like open() does
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


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


def write_parquet(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``df`` to Parquet atomically, without the pandas index, deterministically."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False, engine="pyarrow", compression="zstd")


def write_csv(df: pd.DataFrame, path: str | Path, **kwargs: Any) -> None:
    with atomic_open(path, "w") as fh:
        df.to_csv(fh, index=False, lineterminator="\n", **kwargs)


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk_size), b""):
            h.update(block)
    return h.hexdigest()


def check_writable(paths: list[str | Path] | list[Path] | list[str]) -> None:
    """Fail early (before a model is loaded or anything computed) when an output's folder cannot
    be created or written."""
    from .errors import VerbevalError

    for d in dict.fromkeys(Path(p).parent for p in paths):
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VerbevalError(f"cannot create output folder {d}: {exc.strerror or exc}") from None
        if not os.access(d, os.W_OK | os.X_OK):
            raise VerbevalError(f"output folder {d} is not writable")

"""The bootstrap's resample counts, drawn once per stream and shared.

A ``counts`` stream (:mod:`verbeval.core.bootstrap`) is a function of four numbers only: the rows
``n``, the ``resamples``, the ``seed`` and the ``block`` size (one ``numpy.random.default_rng(seed)``
draws ``block`` multinomial resamples at a time). Every model with the same group sizes, every
revision of a sweep, a masked model's contexts and rows (the same count), and the paired comparisons
of the aggregates' rows draw the very same counts; drawing them is most of a bootstrap's time
(numpy's multinomial walks all ``n`` rows once per resample).

So a stream is drawn once and kept, as the same integers in the smallest unsigned type that holds
them (one byte per count in practice):

* in this process (bounded by :data:`MEMORY_BYTES`, oldest first out), so that one command or one
  queue worker draws each stream once;
* on disk under ``$VERBEVAL_CACHE_DIR/bootstrap-counts/numpy-<version>/`` (bounded by
  :data:`DISK_BYTES`, least recently used first out; a file is checked against the sha256 written
  beside it and its counts against their stream (:func:`stream_problem`) before it is used; a file
  that fails is moved aside, ``<name>.corrupt``, with one warning line, and its counts drawn again),
  so that the aggregates, the comparisons and a rerun share them. ``VERBEVAL_COUNT_CACHE=0`` turns
  the disk copy off.

The streams of several groups are independent generators, so :func:`prefetch` draws them on threads
(numpy releases the GIL while it draws) while the caller reads its inputs. The counts are the ones
``draw_counts`` gives block by block, so every interval keeps its bytes.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from verbeval.core.io import set_aside

log = logging.getLogger(__name__)

#: bytes of count streams kept in one process
MEMORY_BYTES = 1 << 30
#: bytes of count streams kept on disk (least recently used first out)
DISK_BYTES = 2 << 30
#: environment variable: ``0`` keeps the count streams in memory only
DISK_ENV = "VERBEVAL_COUNT_CACHE"

Key = tuple[int, int, int, int]  # (n, resamples, seed, block)

_lock = threading.Lock()
_memory: OrderedDict[Key, np.ndarray] = OrderedDict()
_inflight: dict[Key, Future[np.ndarray]] = {}
_pool: ThreadPoolExecutor | None = None


def draw_stream(n: int, resamples: int, seed: int, block: int) -> np.ndarray:
    """The ``[resamples, n]`` counts of one stream, drawn now (no cache): ``block`` multinomial
    resamples at a time from ``default_rng(seed)``, stored compact (uint8 where every count fits)."""
    rng = np.random.default_rng(seed)
    p = np.full(n, 1.0 / n)
    blocks = [rng.multinomial(n, p, size=min(block, resamples - s)) for s in range(0, resamples, block)]
    out = np.concatenate(blocks) if blocks else np.zeros((0, n), dtype=np.int64)
    top = int(out.max()) if out.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return out.astype(dtype)
    return out


def _folder() -> Path:
    from verbeval.core.model_sources.fingerprint import cache_dir

    return cache_dir() / "bootstrap-counts" / f"numpy-{np.__version__}"


def _disk_path(key: Key) -> Path:
    n, resamples, seed, block = key
    return _folder() / f"counts-n{n}-r{resamples}-s{seed}-b{block}.npy"


def _set_aside(path: Path, reason: str) -> None:
    """Move a damaged stream file aside (``<name>.corrupt``, replacing an earlier one) with one warning
    line (:func:`verbeval.core.io.set_aside`); its counts are drawn again and written anew."""
    set_aside(path, reason, "drawing its counts again", log)


def stream_problem(arr: np.ndarray, key: Key) -> str | None:
    """Why ``arr`` cannot be the counts of the stream ``key``, else None: ``[resamples, n]`` unsigned
    integers, each resample's counts summing to ``n`` (a multinomial draw of ``n`` rows)."""
    n, resamples = key[0], key[1]
    if arr.shape != (resamples, n) or arr.dtype.kind != "u":
        return f"{arr.dtype} counts of shape {arr.shape}, not [{resamples}, {n}] unsigned"
    if n and not (arr.sum(axis=1, dtype=np.int64) == n).all():
        return f"a resample's counts do not sum to {n}"
    return None


def _read_disk(key: Key) -> np.ndarray | None:
    if os.environ.get(DISK_ENV) == "0":
        return None
    path = _disk_path(key)
    try:
        want = path.with_suffix(".sha256").read_text().strip()
        data = path.read_bytes()
    except OSError:  # not there (or its sha256 not yet written: a writer killed between the two)
        return None
    if hashlib.sha256(data).hexdigest() != want:
        _set_aside(path, "differs from its sha256")
        return None
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        _set_aside(path, f"unreadable ({type(exc).__name__})")
        return None
    problem = stream_problem(arr, key)
    if problem is not None:
        _set_aside(path, problem)
        return None
    try:
        os.utime(path)  # least recently used first out
    except OSError:
        pass
    return arr


def _write_disk(key: Key, arr: np.ndarray) -> None:
    if os.environ.get(DISK_ENV) == "0":
        return
    from verbeval.core.io import atomic_path

    path = _disk_path(key)
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    data = buf.getvalue()
    try:
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
        with atomic_path(path.with_suffix(".sha256")) as tmp:
            tmp.write_text(hashlib.sha256(data).hexdigest() + "\n")
        _prune(path.parent)
    except OSError as exc:  # best effort: an unwritable cache only costs drawing again
        log.debug("cannot keep bootstrap counts in %s: %s", path, exc)


def _prune(folder: Path) -> None:
    """Remove the least recently used streams of ``folder`` beyond :data:`DISK_BYTES` (only files
    this module names: ``counts-*.npy`` and their ``.sha256``)."""
    entries = []
    for p in folder.glob("counts-n*-r*-s*-b*.npy"):
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= DISK_BYTES:
            break
        for f in (p, p.with_suffix(".sha256")):
            try:
                f.unlink()
            except OSError:
                pass
        total -= size


def _remember(key: Key, arr: np.ndarray) -> None:
    with _lock:
        _memory[key] = arr
        _memory.move_to_end(key)
        while sum(a.nbytes for a in _memory.values()) > MEMORY_BYTES and len(_memory) > 1:
            _memory.popitem(last=False)


def _produce(key: Key) -> np.ndarray:
    arr = _read_disk(key)
    if arr is None:
        arr = draw_stream(*key)
        _write_disk(key, arr)
    _remember(key, arr)
    return arr


def counts(n: int, resamples: int, seed: int, block: int) -> np.ndarray:
    """The ``[resamples, n]`` compact counts of the stream ``(n, resamples, seed, block)``: from this
    process, from disk, from a thread already drawing it (:func:`prefetch`), or drawn now."""
    key = (int(n), int(resamples), int(seed), int(block))
    with _lock:
        if key in _memory:
            _memory.move_to_end(key)
            return _memory[key]
        pending = _inflight.get(key)
    if pending is not None:
        return pending.result()
    return _produce(key)


def prefetch(keys: Iterable[Key], threads: int | None = None) -> None:
    """Start drawing the streams ``keys`` (each ``(n, resamples, seed, block)``) on up to ``threads``
    threads (default: the usable cores, at most 4), so that :func:`counts` finds them ready."""
    global _pool
    todo = []
    with _lock:
        for key in dict.fromkeys(tuple(int(x) for x in k) for k in keys):
            if key[0] > 0 and key[1] > 0 and key not in _memory and key not in _inflight:
                todo.append(key)
        if not todo:
            return
        if _pool is None:
            workers = threads or min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)
            _pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="bootstrap-counts")
        for key in todo:
            fut = _pool.submit(_produce, key)
            _inflight[key] = fut
            fut.add_done_callback(lambda _f, k=key: _done(k))


def _done(key: Key) -> None:
    with _lock:
        _inflight.pop(key, None)


def forget() -> None:
    """Drop this process's streams (tests)."""
    with _lock:
        _memory.clear()

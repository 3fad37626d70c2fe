"""Work a warm process does once: results keyed by the content of what they depend on.

``verbeval run-queue`` runs a queue of models (a sweep's revisions, a device's models) in one
process. What depends only on a model's tokenizer (its eligible lemmas, the tokenizer fingerprint,
each group's contexts, TSE ids and encoded batches) is the same for every revision that shares the
tokenizer, so it is computed for the first and reused by the next. Tokenizers are compared by
content (:func:`tokenizer_files_key`: the sha256 of a local model's tokenizer files), never by
path or name, so two checkpoint folders with identical tokenizer files share the work and a
changed file does not. A model whose tokenizer has no content key (a hub id, a GGUF file) simply
computes its own: the cache only ever skips work whose inputs are byte-identical.

The values are kept by a :class:`WarmCache` that a session owns (:class:`verbeval.core.session.Session`:
one per queue, one per single command), bounded by :data:`MAX_ENTRIES` per namespace (oldest first
out); outside a session nothing is kept. A single ``verbeval`` command that scores one model sees no
difference.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pandas as pd

    from verbeval.core.model_sources.source import ModelSource

T = TypeVar("T")

#: the files that define how a Hugging Face tokenizer maps text to ids
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)
#: values kept per namespace (a namespace: one kind of work, e.g. "group")
MAX_ENTRIES = 256


class WarmCache:
    """The work a warm process keeps: values per namespace (each bounded by :data:`MAX_ENTRIES`, oldest
    first out) and the sha256 of files by (path, size, mtime, inode). Owned by a session
    (:class:`verbeval.core.session.Session`, one per queue or command); the engine reaches the cache of
    the session its step runs in through :func:`memo`, :func:`file_key` and friends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[str, OrderedDict[Hashable, Any]] = {}
        self._file_keys: dict[tuple[str, int, int, int], str] = {}

    def memo(self, namespace: str, key: Hashable | None, compute: Callable[[], T]) -> T:
        """``compute()``, or its value from an earlier call with the same ``key`` on this cache.
        ``key`` None: computed every time (nothing identifies the inputs by content)."""
        if key is None:
            return compute()
        with self._lock:
            store = self._stores.setdefault(namespace, OrderedDict())
            if key in store:
                store.move_to_end(key)
                return store[key]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            store[key] = value
            while len(store) > MAX_ENTRIES:
                store.popitem(last=False)
        return value

    def file_key(self, path: str | Path) -> str:
        """The sha256 of a file's content, computed once per (path, size, mtime, inode) on this cache."""
        st = os.stat(path)
        ident = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
        with self._lock:
            known = self._file_keys.get(ident)
        if known is not None:
            return known
        from verbeval.core.io import sha256_file

        digest = sha256_file(path)
        with self._lock:
            self._file_keys[ident] = digest
        return digest


#: the cache of the session whose step runs in this context (None: no session, nothing kept)
_active: ContextVar[WarmCache | None] = ContextVar("verbeval_warm_cache", default=None)


@contextmanager
def using(cache: WarmCache) -> Iterator[WarmCache]:
    """Within the block, :func:`memo` and :func:`file_key` keep their values on ``cache``
    (:meth:`verbeval.core.session.Session.active`)."""
    token = _active.set(cache)
    try:
        yield cache
    finally:
        _active.reset(token)


def memo(namespace: str, key: Hashable | None, compute: Callable[[], T]) -> T:
    """``compute()``, or its value from an earlier call with the same ``key`` in the active session
    (:func:`using`); outside a session computed every time."""
    cache = _active.get()
    return compute() if cache is None else cache.memo(namespace, key, compute)


def file_key(path: str | Path) -> str:
    """The sha256 of a file's content, kept by the active session's cache (outside one: computed)."""
    cache = _active.get()
    if cache is not None:
        return cache.file_key(path)
    from verbeval.core.io import sha256_file

    os.stat(path)  # a missing file fails as with a cache
    return sha256_file(path)


def read_parquet(path: str | Path) -> pd.DataFrame:
    """The table of a Parquet file, read once per content in the active session (keyed by the sha256
    of the file's bytes, :func:`file_key`: a sweep's revisions read the same templates file, and lemma
    files of the same bytes, once). Each call gets a table of its own, a shallow copy of the kept one:
    with pandas' copy-on-write (always on from pandas 3) no change to it reaches the kept table or
    another caller's. Outside a session the file is read."""
    import pandas as pd

    cache = _active.get()
    if cache is None or not os.path.isfile(path):
        return pd.read_parquet(path)
    return cache.memo("parquet", file_key(path), lambda: pd.read_parquet(path)).copy(deep=False)


def tokenizer_files_key(source: ModelSource | str) -> str | None:
    """A content key of a local model folder's tokenizer (a model source, or a bare id or folder): the
    sha256 over the names and contents of its :data:`TOKENIZER_FILES`. None for a hub id, a GGUF model
    (its tokenizer is in the GGUF file) or a folder without any tokenizer file.

    The files are model files: their content hashes are the model fingerprint's
    (:func:`verbeval.core.model_sources.fingerprint.file_sha256`: cached by path, size, mtime, inode and
    ctime, in the process and in the file-hash database), so a revision's tokenizer files are read once
    for both."""
    from verbeval.core.model_sources.fingerprint import file_sha256
    from verbeval.core.model_sources.source import ModelSource

    source = ModelSource.of(source)
    if source.file:
        return None
    ref = source.ref
    if not ref.is_dir:
        return None
    folder = Path(ref.location)
    h = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        p = folder / name
        if p.is_file():
            found = True
            h.update(f"{name}\0{file_sha256(p)}\0".encode())
    return h.hexdigest() if found else None


def frame_key(path: Any) -> tuple[str, str] | None:
    """A table file's content key (for work that depends on a table read from it); None when
    ``path`` is not a file (then nothing is shared)."""
    if not isinstance(path, (str, Path)) or not os.path.isfile(path):
        return None
    return (str(path), file_key(path))

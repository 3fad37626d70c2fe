"""Shard store: the resumable, checksummed shards of one model (and branch).

One inference process per model writes every shard of that model into a store directory and,
when all are there, a ``manifest.json`` beside them: the workflow's output of that job. The shards
themselves are not workflow outputs, so Snakemake's removal of a failed job's outputs never
deletes finished work: a rerun finds them, checks them and computes only what is missing.

- ``<store>/<group>/<k>-of-<n>.parquet``: the shards (written atomically).
- ``<store>/.journal.jsonl``: after each shard, one line appended with its key (everything its
  content depends on) and its size and sha256; a restarted process reuses a shard only when all
  three still match. Appending keeps the journal's cost linear in the number of shards; the
  last line of a path wins, and a line cut short by a killed writer is ignored.
- ``<store>/scores/<group>/<k>-of-<n>.parquet``: each shard's per-context scores, when the forward
  job wrote them (:mod:`verbeval.agreement.scores.chunk_scores`); their size and sha256 are recorded
  in the shard's entry (:data:`SCORES_ENTRY`) and checked before they are used.
- ``<store>/manifest.json``: the shards of the finished run in order, with size and sha256.
  Readers (:func:`manifest_shards`) verify both, so a shard damaged after it was written (a bit
  flip, a partial copy) is detected every time, not silently decoded.

Nothing here imports torch: aggregation and the workflow's start-up checks use it too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verbeval.core.errors import ShardError, VerbevalError
from verbeval.core.io import sha256_file, write_json, write_text

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1
MANIFEST_NAME = "manifest.json"
JOURNAL_NAME = ".journal.jsonl"
OLD_JOURNAL_NAME = ".journal.json"  # earlier releases: one JSON object, rewritten after every shard (still read)


def chunk_label(chunk: int, n_chunks: int) -> str:
    """File stem of a shard: 1-based ``"<k>-of-<n>"``."""
    return f"{chunk + 1}-of-{n_chunks}"


def shard_relpath(group: str, chunk: int, n_chunks: int) -> str:
    """Path of a shard inside its store."""
    return f"{group}/{chunk_label(chunk, n_chunks)}.parquet"


#: the store's folder of per-context score files (:mod:`verbeval.agreement.scores.chunk_scores`)
SCORES_FOLDER = "scores"


#: the keys of a shard's journal and manifest entry that record its score file (written beside it by
#: the forward job): their sha256 and size, checked before the file is read
SCORES_ENTRY = ("scores_sha256", "scores_bytes")


def scores_path(shard: str | Path) -> Path:
    """The per-context score file of the shard ``<store>/<group>/<k>-of-<n>.parquet``:
    ``<store>/scores/<group>/<k>-of-<n>.parquet``."""
    p = Path(shard)
    return p.parent.parent / SCORES_FOLDER / p.parent.name / p.name


def shard_key(fields: dict[str, Any]) -> str:
    """Digest of everything a shard's content depends on (model version, tokenizer, lemma set,
    the group's template rows, chunk range, dtype, ...)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


class ShardStore:
    """The store directory of one model: reuse check, journal and manifest.

    :meth:`reusable` is called from the computing thread, :meth:`record` from the writer thread;
    the journal is guarded by a lock; :meth:`record` appends one line, :meth:`finish` rewrites it
    once (atomically) with only the shards the manifest lists.

    ``allow_nonfinite``: whether a shard written with non-finite logits (``n_nonfinite`` in its
    entry, :func:`verbeval.agreement.engine.shards.check_finite`) may be reused; if not, it is recomputed,
    which stops the run with the reason.
    """

    def __init__(self, root: str | Path, allow_nonfinite: bool = False) -> None:
        self.root = Path(root)
        self.allow_nonfinite = allow_nonfinite
        self.root.mkdir(parents=True, exist_ok=True)
        # one process owns a store while it runs: temporary files (of the shards and of their score
        # files, scores/<group>/) are leftovers of a killed writer
        for tmp in [*self.root.glob(".*.tmp"), *self.root.glob("*/.*.tmp"), *self.root.glob("*/*/.*.tmp")]:
            tmp.unlink(missing_ok=True)
        self._lock = threading.Lock()
        self._journal: dict[str, dict[str, Any]] = {}
        old = self.root / OLD_JOURNAL_NAME
        if old.exists():
            try:
                data = json.loads(old.read_text())
                self._journal = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                log.warning("%s: unreadable journal; every shard will be recomputed", old)
        jp = self.root / JOURNAL_NAME
        if jp.exists():
            torn = self._read_journal(jp)
            if torn or old.exists():  # a torn last line would swallow the next append: start clean
                self._rewrite()
                old.unlink(missing_ok=True)

    def _read_journal(self, jp: Path) -> bool:
        """Add the journal's lines to ``_journal`` (the last line of a path wins); True when a line
        could not be read (a writer killed mid-line)."""
        try:
            text = jp.read_text()
        except (OSError, UnicodeDecodeError):
            log.warning("%s: unreadable journal; every shard will be recomputed", jp)
            return True
        torn = bool(text) and not text.endswith("\n")
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                self._journal[entry.pop("path")] = entry
            except (ValueError, KeyError, TypeError, AttributeError):
                torn = True
        return torn

    def _rewrite(self) -> None:
        """Replace the journal by one line per shard (atomically). Called with the lock held or
        before the writer thread starts."""
        write_text(
            self.root / JOURNAL_NAME,
            "".join(json.dumps({"path": r, **e}, sort_keys=True) + "\n" for r, e in self._journal.items()),
        )

    def path(self, relpath: str) -> Path:
        return self.root / relpath

    def reusable(self, relpath: str, key: str) -> dict[str, Any] | None:
        """The journal entry of a finished shard with this key whose file is intact, else None."""
        with self._lock:
            entry = self._journal.get(relpath)
        p = self.path(relpath)
        if entry is None or entry.get("key") != key or not p.is_file():
            return None
        if entry.get("n_nonfinite") and not self.allow_nonfinite:
            return None
        if p.stat().st_size != entry.get("bytes") or sha256_file(p) != entry.get("sha256"):
            log.warning("%s: changed since it was written; recomputing it", p)
            return None
        return entry

    def complete(self, plan: Iterable[PlannedShard]) -> bool:
        """Whether every shard of ``plan`` is in the store, with its key and intact (:meth:`reusable`)."""
        return all(self.reusable(p.relpath, p.key) is not None for p in plan)

    def record(self, relpath: str, key: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Checksum a shard just written and add it to the journal."""
        p = self.path(relpath)
        entry = {"key": key, "bytes": p.stat().st_size, "sha256": sha256_file(p), **(extra or {})}
        line = json.dumps({"path": relpath, **entry}, sort_keys=True) + "\n"
        with self._lock:
            self._journal[relpath] = entry
            with open(self.root / JOURNAL_NAME, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
        return entry

    def finish(self, manifest: str | Path, relpaths: list[str], meta: dict[str, Any]) -> dict[str, Any]:
        """Write the manifest of ``relpaths`` (all recorded) and delete what the store no longer
        needs: shards of other chunkings or groups, and temporary files of killed writers."""
        with self._lock:
            missing = [r for r in relpaths if r not in self._journal]
            if missing:
                raise VerbevalError(f"{self.root}: shard(s) not written: {missing[:3]}")
            shards = [{"path": r, **{k: v for k, v in self._journal[r].items() if k != "key"}} for r in relpaths]
            keep = set(relpaths)
            stale = [r for r in self._journal if r not in keep]
            for r in stale:
                del self._journal[r]
            self._rewrite()
            (self.root / OLD_JOURNAL_NAME).unlink(missing_ok=True)
        for p in self.root.glob("*/*"):
            rel = p.relative_to(self.root).as_posix()
            if p.is_file() and p.suffix == ".parquet" and rel not in keep:
                p.unlink()
        # the per-context scores beside shards (agreement.scores.chunk_scores) of shards no longer kept
        for p in self.root.glob(f"{SCORES_FOLDER}/*/*.parquet"):
            if p.is_file() and p.relative_to(self.root / SCORES_FOLDER).as_posix() not in keep:
                p.unlink()
        body = {"manifest_version": MANIFEST_VERSION, "meta": meta, "shards": shards}
        write_json(manifest, body)
        return body


class BackgroundWriter:
    """One writer thread: shards are written (Parquet + zstd) and checksummed while the next
    chunk is computed. At most ``depth`` chunks wait, which bounds the memory they hold."""

    def __init__(self, depth: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-writer")
        self._pending: list[Future[Any]] = []
        self._depth = depth
        self.busy_s = 0.0

    def submit(self, fn: Callable[[], Any]) -> None:
        while len(self._pending) >= self._depth:
            self._pending.pop(0).result()

        def timed() -> Any:
            t0 = time.perf_counter()
            try:
                return fn()
            finally:
                self.busy_s += time.perf_counter() - t0

        self._pending.append(self._pool.submit(timed))

    def close(self) -> None:
        """Wait for every write; re-raise the first error."""
        try:
            for f in self._pending:
                f.result()
        finally:
            self._pending.clear()
            self._pool.shutdown(wait=True)


@dataclass(frozen=True)
class PlannedShard:
    """One shard of a model's plan: where it goes, its key, its size, and how to compute it.

    ``compute(bar)`` runs the model (advancing the progress bar ``bar`` by its contexts) and
    returns a function that writes the result to a given path and returns the shard metadata."""

    relpath: str
    key: str
    n_contexts: int
    #: None in a plan that is only checked against the store (:func:`finish_if_complete`: no model)
    compute: Callable[[Any], Callable[[Path], dict[str, Any]]] | None = None


def has_journal(root: str | Path) -> bool:
    """Whether a store directory has a journal (of this or an earlier release): a run wrote a shard there."""
    root = Path(root)
    return (root / JOURNAL_NAME).is_file() or (root / OLD_JOURNAL_NAME).is_file()


def finish_if_complete(
    manifest: str | Path,
    plan: list[PlannedShard],
    meta: dict[str, Any],
    *,
    desc: str = "inference",
    allow_nonfinite: bool = False,
) -> dict[str, Any] | None:
    """The store answers "am I complete?": when every shard of ``plan`` is in it (:meth:`ShardStore.complete`),
    its manifest is written (the bytes :func:`run_plan` writes) and returned, nothing computed;
    else None and nothing is written. The plan's ``compute`` is not needed (a model need not be loaded)."""
    store = ShardStore(Path(manifest).parent, allow_nonfinite)
    if not store.complete(plan):
        return None
    log.info("%s: %d shards, %d to compute (%d contexts), %d kept", desc, len(plan), 0, 0, len(plan))
    return store.finish(manifest, [p.relpath for p in plan], meta)


def run_plan(
    manifest: str | Path,
    plan: list[PlannedShard],
    meta: dict[str, Any],
    *,
    desc: str = "inference",
    progress: bool = True,
    allow_nonfinite: bool = False,
) -> dict[str, Any]:
    """Compute the shards of ``plan`` that the store lacks, then write the manifest.

    Shards already in the store with the same key and an intact checksum are kept (a killed run
    resumes where it stopped). Each new shard is written by a background thread while the next one
    is computed. Returns the manifest body, plus timing figures under ``"timing"`` (not written).
    """
    t_start = time.perf_counter()
    store = ShardStore(Path(manifest).parent, allow_nonfinite)
    todo = [p for p in plan if store.reusable(p.relpath, p.key) is None]
    n_todo = sum(p.n_contexts for p in todo)
    log.info(
        "%s: %d shards, %d to compute (%d contexts), %d kept", desc, len(plan), len(todo), n_todo, len(plan) - len(todo)
    )
    writer = BackgroundWriter()
    from tqdm.auto import tqdm  # here: tqdm.auto imports asyncio, 0.05-0.08 s of every command's start

    bar = tqdm(total=n_todo, desc=desc, unit="ctx", disable=not progress, mininterval=1.0)
    t0 = time.perf_counter()
    try:
        for p in todo:
            if p.compute is None:
                raise VerbevalError(f"{store.root}: shard {p.relpath} is missing and was planned without a model")
            write = p.compute(bar)

            def job(write: Callable[[Path], dict[str, Any]] = write, p: PlannedShard = p) -> None:
                m = write(store.path(p.relpath))
                extra = {"n_contexts": m.get("n_contexts")}
                if m.get("n_nonfinite"):
                    extra["n_nonfinite"] = m["n_nonfinite"]
                extra.update({k: m[k] for k in SCORES_ENTRY if k in m})  # its score file's, when written
                store.record(p.relpath, p.key, extra)

            writer.submit(job)
    finally:
        bar.close()
        compute_s = time.perf_counter() - t0
        writer.close()
    body = store.finish(manifest, [p.relpath for p in plan], meta)
    body["timing"] = {
        "contexts": n_todo,
        "compute_s": compute_s,
        "writer_busy_s": writer.busy_s,
        "total_s": time.perf_counter() - t_start,
        "contexts_per_s": n_todo / compute_s if compute_s > 0 else float("nan"),
    }
    return body


def read_manifest(path: str | Path) -> dict[str, Any]:
    """A store's manifest, checked for its format."""
    p = Path(path)
    try:
        body = json.loads(p.read_text())
    except FileNotFoundError:
        raise VerbevalError(f"{p}: no shard manifest (run the model's inference job first)") from None
    except (OSError, ValueError) as exc:
        raise VerbevalError(f"{p}: unreadable shard manifest ({exc})") from None
    if not isinstance(body, dict) or body.get("manifest_version") != MANIFEST_VERSION or "shards" not in body:
        raise VerbevalError(f"{p}: not a verbeval shard manifest of version {MANIFEST_VERSION}")
    return body


def manifest_meta(manifest: str | Path) -> dict[str, Any]:
    """The ``meta`` of a shard manifest (what every shard of the store shares: model, dtype, lemma set)."""
    return read_manifest(manifest).get("meta") or {}


def manifest_random_init(path: str | Path) -> bool:
    """Whether the store's model is randomly initialised (``meta.random_init``, written by the
    inference job; :mod:`verbeval.core.provenance`). A manifest of an older verbeval has no such
    key: False."""
    return bool(read_manifest(path).get("meta", {}).get("random_init", False))


@dataclass(frozen=True)
class ListedShard:
    path: Path
    group: str
    sha256: str
    bytes: int
    #: its score file's sha256 and size (:data:`SCORES_ENTRY`); None when none was recorded (an older store)
    scores_sha256: str | None = None
    scores_bytes: int | None = None


def listed_shards(manifest: str | Path, groups: list[str] | None = None) -> list[ListedShard]:
    """The shards a manifest lists (optionally of some groups), in manifest order; not verified."""
    body = read_manifest(manifest)
    root = Path(manifest).parent
    out = [
        ListedShard(root / s["path"], s["path"].split("/", 1)[0], s["sha256"], s["bytes"], *map(s.get, SCORES_ENTRY))
        for s in body["shards"]
    ]
    if groups is not None:
        known = {s.group for s in out}
        unknown = [g for g in groups if g not in known]
        if unknown:
            raise VerbevalError(f"{manifest}: no shards of group(s) {unknown}")
        out = [s for s in out if s.group in groups]
    return out


def verify_shard(shard: ListedShard) -> None:
    """Raise :class:`ShardError` unless the file is there with the size and sha256 the manifest lists."""
    if not shard.path.is_file():
        raise ShardError(shard.path, "missing (listed in the shard manifest)")
    size = shard.path.stat().st_size
    if size != shard.bytes:
        raise ShardError(shard.path, f"{size} bytes but the shard manifest lists {shard.bytes} (truncated or replaced)")
    digest = sha256_file(shard.path)
    if digest != shard.sha256:
        raise ShardError(
            shard.path,
            f"sha256 {digest[:12]}... differs from the shard manifest's {shard.sha256[:12]}... "
            "(the file changed after it was written)",
        )


def manifest_shards(manifest: str | Path, groups: list[str] | None = None) -> dict[str, list[Path]]:
    """``{group: [shard paths]}`` of a manifest, every shard verified (:func:`verify_shard`)."""
    out: dict[str, list[Path]] = {}
    for s in listed_shards(manifest, groups):
        verify_shard(s)
        out.setdefault(s.group, []).append(s.path)
    return out


def incomplete_store(manifest: str | Path) -> str | None:
    """Why an existing manifest no longer describes its store (a listed shard missing or of
    another size), else None. Cheap (no checksums): the workflow asks this at start-up."""
    p = Path(manifest)
    if not p.is_file():
        return None
    try:
        shards = listed_shards(p)
    except VerbevalError as exc:
        return str(exc)
    for s in shards:
        if not s.path.is_file():
            return f"{s.path} is missing"
        if s.path.stat().st_size != s.bytes:
            return f"{s.path} has changed size"
    return missing_entry(p, shards)


def missing_entry(manifest: Path, shards: list[ListedShard]) -> str | None:
    """A shard a manifest should list but does not (a chunk ``k-of-n`` of a listed group, or a
    group of its ``meta.groups`` without shards), else None."""
    chunks: dict[str, set[str]] = {}
    for s in shards:
        chunks.setdefault(s.group, set()).add(s.path.name)
    for group, names in chunks.items():
        n = int(next(iter(names)).split("-of-")[-1].split(".")[0])
        want = [f"{chunk_label(k, n)}.parquet" for k in range(n)]
        lacking = [w for w in want if w not in names]
        if lacking:
            return f"it lists no entry for {group}/{lacking[0]}"
    groups = (read_manifest(manifest).get("meta") or {}).get("groups") or []
    absent = [g for g in groups if g not in chunks]
    return f"it lists no shards of group {absent[0]!r}" if absent else None

"""A GGUF file read once: its dequantised model kept as an ordinary model folder.

transformers parses a GGUF file again for each of its config, tokenizer and weights (seconds
each), and every job that needs the model did so (lemmas, infer, table3, SimVerb). The first job
that needs a GGUF model now writes :func:`cached_folder`: ``$VERBEVAL_CACHE_DIR/gguf/<sha256 of the
GGUF file>/`` (default ``~/.cache/verbeval``), holding ``model.safetensors`` (the weights exactly as
transformers dequantises them: float32, which every GGUF tensor type converts to without loss),
``config.json``, the tokenizer (``tokenizer.json`` and its config, when it reads back as the same
tokenizer: :func:`same_tokenizer`) and :data:`RECORD`: where the
folder came from (the GGUF file, its sha256, the pip provenance beside it), the versions of
transformers and gguf that dequantised it, the sha256 of every file, and the note that its numbers
belong to the quantised checkpoint. Every job, the first included, reads that folder: the weights
are the same dequantised values, cast to the model's ``dtype`` when loaded, as before.

The folder is keyed by the file's content, so every run, checkout and pip model with the same file
shares it. It is written in a temporary folder beside it and renamed into place under a lock
(``.<sha256>.lock``): two jobs that need it at once build it once, and a half-written folder is
never seen. A folder whose record is unreadable, written by other transformers or gguf versions,
whose files no longer have their recorded sha256 (hashed once per change of a file,
:func:`verbeval.core.model_sources.fingerprint.file_sha256`) or that holds a file its record does not
list is rebuilt, with one warning line naming it and the reason (:func:`folder_problem`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.fingerprint import cache_dir, file_sha256

log = logging.getLogger(__name__)

#: the record of a cached folder: source, versions, the sha256 of each file, the note
RECORD = "verbeval_gguf_cache.json"
#: what the numbers of a model read from a GGUF file belong to (kept in the record)
NOTE = (
    "dequantised from a GGUF file: the numbers of this model belong to that quantised checkpoint, "
    "not to the full-precision model it was made from"
)


def cache_root() -> Path:
    """Where the folders live: ``$VERBEVAL_CACHE_DIR/gguf``."""
    return cache_dir() / "gguf"


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("transformers", "gguf"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "none"
    return out


def folder_problem(folder: Path, sha256: str, gguf_path: Path | None = None) -> str | None:
    """Why ``folder`` is not a complete cached folder of the GGUF file with this sha256 (missing,
    record unreadable, other versions, a file missing, changed or not in the record; with ``gguf_path``, a
    ``config.json`` whose layer count or vocabulary is not the one the GGUF file's header states),
    else None."""
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as exc:
        return f"its record is unreadable ({exc})"
    if not isinstance(record, dict) or record.get("gguf_sha256") != sha256 or not isinstance(record.get("files"), dict):
        return "its record is not this file's"
    if record.get("versions") != _versions():
        return f"written by {record.get('versions')}, not {_versions()}"
    for name, digest in record["files"].items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if file_sha256(path) != digest:
            return f"{name} is not the file written there (sha256 changed)"
    # a file the build did not write (a tokenizer's, a config's) would be read as the folder's own
    extra = sorted(p.name for p in folder.iterdir() if p.name != RECORD and p.name not in record["files"])
    if extra:
        return f"{extra[0]} was not written there (not in its record)"
    return None if gguf_path is None else _shape_problem(folder, gguf_path)


def _shape_problem(folder: Path, gguf_path: Path) -> str | None:
    """Why the cached ``config.json`` is not the GGUF file's model (its layer count or vocabulary
    differs from the file's header, :func:`verbeval.core.model_sources.gguf_header.gguf_facts`), else None:
    the record is checked against the file itself, not only against itself."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"its config.json is unreadable ({exc})"
    stamp = gguf_path.stat()
    facts = _facts(str(gguf_path.resolve()), stamp.st_size, stamp.st_mtime_ns)
    cached = {
        "layers": next((cfg[k] for k in ("num_hidden_layers", "n_layer", "num_layers") if k in cfg), None),
        "vocab": cfg.get("vocab_size"),
    }
    wrong = [k for k in ("layers", "vocab") if None not in (facts[k], cached[k]) and facts[k] != cached[k]]
    if wrong:
        said = ", ".join(f"{k} {cached[k]} (the GGUF file: {facts[k]})" for k in wrong)
        return f"its config.json is not the GGUF file's model: {said}"
    return None


@functools.lru_cache(maxsize=64)
def _facts(path: str, size: int, mtime_ns: int) -> dict[str, int | None]:
    """:func:`~verbeval.core.model_sources.gguf_header.gguf_facts` of ``path``, read once per version of
    the file (``size`` and ``mtime_ns`` are the cache key's part that tells versions apart)."""
    from verbeval.core.model_sources.gguf_header import gguf_facts

    return gguf_facts(path)


@contextlib.contextmanager
def _locked(root: Path, sha256: str) -> Iterator[None]:
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{sha256}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def parsed_once() -> Iterator[None]:
    """Within the block, the ``gguf`` package parses each file once and builds each tensor name map once.

    transformers reads a GGUF file through ``gguf.GGUFReader`` for each of the config, the tokenizer
    and the weights, and each read parses the file's whole metadata (the tokenizer's vocabulary
    included) again; while mapping the weights it also rebuilds gguf's tensor name table
    (``gguf.get_tensor_name_map``) once for every module of the model. Both are pure functions of
    their arguments (a reader only reads its memory map), so the block serves every later call from
    the first one's result: SmolLM2-135M's build went from 35 s to about a third of it (docs/performance.md).
    transformers imports both names from ``gguf`` when it calls them, so replacing them on the module
    reaches it; they are put back when the block ends. Without the gguf package nothing changes."""
    try:
        import gguf
    except ImportError:
        yield
        return
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.path.realpath(os.fspath(path)), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


def _read_gguf(folder: str, name: str, model_id: str) -> tuple[Any, Any, Any]:
    """(config, tokenizer, float32 model) as transformers reads them from the GGUF file (parsed once:
    :func:`parsed_once`), its refusals as the one-line errors of
    :func:`verbeval.core.model_sources.gguf.unreadable`."""
    with parsed_once():
        return _read_gguf_files(folder, name, model_id)


def _read_gguf_files(folder: str, name: str, model_id: str) -> tuple[Any, Any, Any]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from verbeval.core.load_report import check_load_report
    from verbeval.core.model_sources.gguf import check_config, load_kwargs, unreadable, unreadable_errors

    try:
        cfg = AutoConfig.from_pretrained(folder, **load_kwargs(name))
        check_config(cfg, model_id)
        tok = AutoTokenizer.from_pretrained(folder, **load_kwargs(name))
        # the config already parsed: the GGUF file is not read a third time for it
        model, info = AutoModelForCausalLM.from_pretrained(
            folder, **load_kwargs(name), config=cfg, dtype=torch.float32, output_loading_info=True
        )
    except (OSError, ValueError) as exc:
        raise unreadable(exc, model_id, name) from None
    except (NotImplementedError, RuntimeError) as exc:
        if not unreadable_errors(exc):
            raise  # not a GGUF file transformers cannot read (e.g. out of memory): as it is
        raise unreadable(exc, model_id, name) from None
    # a tensor the file lacks would be cached newly initialised, and then read as the model's own
    check_load_report(f"{model_id} ({name})", model, info)
    if model.dtype != torch.float32:
        model = model.to(torch.float32)
    # the weights are dequantised: an ordinary model now, saved and read without the GGUF quantizer
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return cfg, tok, model


#: texts both tokenizers must encode alike for the saved tokenizer to replace the GGUF file's
PROBES = (" the dogs walk", "The dog walks.", "Hello, world! 123 \u00e9t\u00e9", "  two  spaces\nand a line")


def same_tokenizer(read: Any, saved: Any) -> bool:
    """Whether ``saved`` (the tokenizer read back from the cached folder) is ``read`` (the one read
    from the GGUF file): class, tokenizers pipeline, special tokens, vocabulary and the encodings of
    :data:`PROBES` with and without special tokens. Some tokenizer classes do not survive a save
    (transformers rebuilds them from their config: Gemma's fails on its unknown token); their
    folder keeps no tokenizer and the tokenizer is read from the GGUF file as before."""
    try:
        if type(read) is not type(saved) or read.backend_tokenizer.to_str() != saved.backend_tokenizer.to_str():
            return False
        if read.special_tokens_map != saved.special_tokens_map or read.get_vocab() != saved.get_vocab():
            return False
        return all(
            read(t, add_special_tokens=special)["input_ids"] == saved(t, add_special_tokens=special)["input_ids"]
            for t in PROBES
            for special in (True, False)
        )
    except Exception:  # noqa: BLE001 - a tokenizer that cannot even be compared is not the same
        return False


def _save_tokenizer(tok: Any, folder: Path) -> bool:
    """Save ``tok`` in ``folder`` if it reads back as the same tokenizer (:func:`same_tokenizer`);
    else remove what was saved. Whether it was kept."""
    from transformers import AutoTokenizer

    before = {p.name for p in folder.iterdir()}
    tok.save_pretrained(folder)
    try:
        kept = same_tokenizer(tok, AutoTokenizer.from_pretrained(str(folder)))
    except Exception:  # noqa: BLE001 - transformers cannot rebuild this tokenizer from its files
        kept = False
    if not kept:
        for p in folder.iterdir():
            if p.name not in before:
                p.unlink()
    return kept


def has_tokenizer(folder: str | Path) -> bool:
    """Whether a cached folder holds the tokenizer (else it is read from the GGUF file)."""
    return (Path(folder) / "tokenizer_config.json").is_file()


def _provenance(gguf_path: Path) -> Any:
    from verbeval.core.model_sources.pip_package import PROVENANCE

    try:
        return json.loads((gguf_path.parent / PROVENANCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _readable(folder: Path) -> None:
    """Give ``folder`` and its files the modes of an ordinary folder under the umask (a temporary
    folder is private), so that a cache shared by several users can be read by each."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for p in folder.iterdir():
        p.chmod(0o666 & ~umask)


def _remove(path: Path) -> None:
    """Remove ``path`` of the cache (a folder, a file or a link in a folder's place); quietly."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _build(gguf_path: Path, sha256: str, model_id: str, dest: Path) -> None:
    from verbeval.core.io import sha256_file, temporary_folder, write_json

    start = time.perf_counter()
    cfg, tok, model = _read_gguf(str(gguf_path.parent), gguf_path.name, model_id)
    with temporary_folder(dest.parent, f".{sha256[:16]}.tmp-", "an interrupted GGUF cache build") as tmp:
        model.save_pretrained(tmp, safe_serialization=True)  # model.safetensors and config.json (cfg)
        tokenizer = _save_tokenizer(tok, tmp)
        files = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        write_json(
            tmp / RECORD,
            {
                "gguf_file": gguf_path.name,
                "gguf_path": str(gguf_path.resolve()),
                "gguf_sha256": sha256,
                "model": model_id,
                "pip_provenance": _provenance(gguf_path),
                "dtype": "float32",
                "tokenizer": "saved here" if tokenizer else "read from the GGUF file (it does not survive a save)",
                "versions": _versions(),
                "files": files,
                "note": NOTE,
            },
        )
        _readable(tmp)
        for left in dest.parent.glob(f".{sha256[:16]}.stale-*"):  # of a killed build (we hold the lock)
            _remove(left)
        stale = None
        # damaged or outdated (checked under the lock): moved aside, then removed
        if dest.exists() or dest.is_symlink():
            stale = dest.with_name(f".{sha256[:16]}.stale-{os.getpid()}")
            os.rename(dest, stale)
        os.rename(tmp, dest)
        tmp.mkdir()  # temporary_folder removes its folder afterwards
    if stale is not None:
        _remove(stale)
    log.info("%s: %s read once, cached as %s (%.1f s)", model_id, gguf_path.name, dest, time.perf_counter() - start)


def cached_folder(gguf_path: str | Path, model_id: str, sha256: str | None = None) -> Path:
    """The cached model folder of the GGUF file at ``gguf_path`` (its pin checked and its header
    bounded by the caller, :meth:`verbeval.core.model_sources.source.ModelSource.gguf_location`), built now if it is missing or
    damaged. ``sha256``: the file's, when already known (its pin)."""
    path = Path(gguf_path)
    digest = (sha256 or file_sha256(path)).lower()
    root = cache_root()
    dest = root / digest
    if folder_problem(dest, digest, path) is None:
        return dest
    try:
        with _locked(root, digest):
            problem = folder_problem(dest, digest, path)  # another job may have built it meanwhile
            if problem is None:
                return dest
            if problem != "missing":
                log.warning("%s: the cached folder %s is rebuilt: %s", model_id, dest, problem)
            _build(path, digest, model_id, dest)
    except OSError as exc:
        from verbeval.core.io import describe_os_error

        raise VerbevalError(
            f"model {model_id!r}: cannot write the GGUF cache folder {root} (for {dest.name}): "
            f"{describe_os_error(exc)}; set VERBEVAL_CACHE_DIR to a writable folder"
        ) from None
    return dest

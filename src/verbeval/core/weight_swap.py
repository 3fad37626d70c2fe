"""A revision's weights read into the module an earlier revision of the same model built.

A checkpoint sweep loads hundreds of revisions of one architecture in one warm process
(``verbeval run-queue``). ``from_pretrained`` builds the module anew for each of them, though only
the weights differ. The queue's prefetcher (:class:`verbeval.core.prefetch.Prefetcher`) therefore
keeps the module of a model its step is done with (:meth:`~verbeval.core.prefetch.Prefetcher.release`)
and reads the next revision's weights into it when the two are built alike (:func:`blueprint`):

* the same load settings (kind, dtype, device; no device map), both local folders, no GGUF file;
* the same ``config.json`` apart from :data:`IGNORED_CONFIG_KEYS`, and the same
  ``generation_config.json`` (or neither);
* weights in safetensors files only (``model.safetensors``, or the shards its index names), format
  ``pt``; no adapter, no remote code (``auto_map``).

The files are then checked against the module before a byte of it changes (:func:`swap_weights`):
every tensor of the module's state dict is in the files exactly once (tied weights: one of the keys
that share a tensor), with the module's shape and dtype, and the files hold nothing else (the checks
of ``load_state_dict(strict=True)``, and the dtype). Only then are the tensors read (``safe_open``:
the file memory-mapped): on the CPU they become the module's parameters and buffers, views of the
mapped file, as ``from_pretrained`` (transformers 5) leaves a CPU model's (no copy: the pages are
read when the forward pass first touches them); on another device they are copied in with
``load_state_dict(strict=True)``. Whenever anything is not so, or a read fails half way, the module
is dropped and the revision is built by ``from_pretrained`` as before, which also raises the
errors a user sees for a damaged checkpoint. Non-persistent buffers (attention masks, rotary
frequencies) depend only on the config, which is the same: the swapped module is, parameter for
parameter and buffer for buffer, the module ``from_pretrained`` builds (tests/test_weight_swap.py).

The swapped revision's tokenizer is the built model's when the two folders' tokenizer files have the
same content (:func:`verbeval.core.warm.tokenizer_files_key`; the config is the same) and that
tokenizer still has the state it was loaded with (:func:`verbeval.core.models.reusable_tokenizer`):
a sweep's revisions load their tokenizer once, not once each (issue 63). Otherwise it is loaded.
"""

from __future__ import annotations

import json
import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verbeval.core.models import LoadedModel

log = logging.getLogger("verbeval")

#: config.json fields that do not change the module built from it (where it was read from, and the
#: transformers version that wrote it)
IGNORED_CONFIG_KEYS = frozenset({"_name_or_path", "transformers_version"})
#: files whose presence makes ``from_pretrained`` do more than build the config's module and read its
#: safetensors weights
_NOT_SWAPPED = ("adapter_config.json",)
#: safetensors dtype names -> torch dtype attribute names
_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}


@dataclass(frozen=True)
class Blueprint:
    """What a module is built from: two loads with equal blueprints build equal modules (up to
    their weights)."""

    config: str  #: config.json without :data:`IGNORED_CONFIG_KEYS`, canonical JSON
    generation: str | None  #: generation_config.json likewise (None: none)
    kind: str
    dtype: str
    device: str


def _canonical(path: Path) -> str | None:
    """A JSON file's content without :data:`IGNORED_CONFIG_KEYS`, canonical; None when absent."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return json.dumps({k: v for k, v in data.items() if k not in IGNORED_CONFIG_KEYS}, sort_keys=True)


def weight_files(folder: Path) -> list[Path] | None:
    """The safetensors files ``from_pretrained`` reads in a local model folder (``model.safetensors``,
    else the shards of ``model.safetensors.index.json``); None when it reads none (``.bin`` weights)."""
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / s for s in shards] or None
    return None


def blueprint(request: Any) -> Blueprint | None:
    """The blueprint of a load (a :class:`verbeval.core.prefetch.LoadRequest`), or None when its module
    is never swapped into (module docstring)."""
    source = request.source
    if request.device_map is not None or source.file or not source.ref.is_dir:
        return None
    folder = Path(source.ref.location)
    try:
        config = _canonical(folder / "config.json")
        if config is None or "auto_map" in json.loads(config) or weight_files(folder) is None:
            return None
        if any((folder / name).exists() for name in _NOT_SWAPPED):
            return None
        generation = _canonical(folder / "generation_config.json")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # from_pretrained reads it and says what is wrong
    return Blueprint(config, generation, request.kind, request.dtype, request.device)


def swap_weights(built: LoadedModel, request: Any) -> LoadedModel | None:
    """``request``'s model in ``built``'s module, its weights read from ``request``'s safetensors
    files (the two blueprints equal: :func:`blueprint`); None when the files do not fit the module
    exactly (the module is then unchanged) or a read fails (the module is then half written: the
    caller drops it)."""
    import torch
    from safetensors import safe_open

    from verbeval.core.models import model_identity

    folder = Path(request.source.ref.location)
    files = weight_files(folder)
    if files is None:
        return None
    model = built.model
    state = model.state_dict(keep_vars=True)
    tied: dict[int, list[str]] = {}  # the keys of each tensor (tied weights share one)
    for key, tensor in state.items():
        tied.setdefault(id(tensor), []).append(key)
    with ExitStack() as stack:
        found: dict[str, Any] = {}
        for f in files:
            handle = stack.enter_context(safe_open(str(f), framework="pt", device="cpu"))
            if (handle.metadata() or {}).get("format", "pt") != "pt":
                return None
            for key in handle.keys():
                if key in found or key not in state:
                    return _unfit(request, f"{key}: not one tensor of the module")
                found[key] = handle
        sources: list[tuple[str, list[str]]] = []
        for keys in tied.values():
            present = [k for k in keys if k in found]
            if len(present) != 1:
                return _unfit(request, f"{keys}: {len(present)} tensors in the files")
            key = present[0]
            piece = found[key].get_slice(key)
            target = state[key]
            dtype = _DTYPES.get(piece.get_dtype())
            if (
                tuple(piece.get_shape()) != tuple(target.shape)
                or dtype is None
                or getattr(torch, dtype) != target.dtype
            ):
                return _unfit(request, f"{key}: {piece.get_dtype()} {piece.get_shape()} in the file")
            sources.append((key, keys))
        # every tensor fits: from here on the module changes
        with torch.no_grad():
            if _on_cpu(list(state.values())):
                _assign(model, found, sources, state)
            else:  # another device: read (memory-mapped), then copied in
                new: dict[str, Any] = {}
                for key, keys in sources:
                    tensor = found[key].get_tensor(key)
                    for k in keys:
                        new[k] = tensor
                model.load_state_dict(new, strict=True)
    # the same config (equal blueprints): the built model's tokenizer is reused when its files are the same
    ident = model_identity(request.source, kind=request.kind, dtype=request.dtype, tokenizer_of=built)
    if ident.kind == "masked" and getattr(ident.tokenizer, "mask_token", None) is None:
        return None  # from_pretrained's load says so
    config = json.loads((folder / "config.json").read_text())
    model.config._name_or_path = request.source.ref.location  # as from_pretrained sets it
    model.config.transformers_version = config.get("transformers_version")
    return ident.loaded(model, built.device)


def _on_cpu(tensors: list[Any]) -> bool:
    """Whether every tensor of the module is on the CPU (then the files' mapped tensors become its own)."""
    return all(t.device.type == "cpu" for t in tensors)


def _assign(model: Any, found: dict[str, Any], sources: list[tuple[str, list[str]]], state: dict[str, Any]) -> None:
    """Each tensor of the files (memory-mapped, as ``from_pretrained`` leaves a CPU model's: no copy)
    put in the module in place of its parameter or buffer under every key that shares it (tied
    weights: one Parameter, as before). A key that is not a parameter or buffer of its module raises
    (the module is then dropped)."""
    import torch

    for key, keys in sources:
        tensor = found[key].get_tensor(key)
        old = state[key]
        new = (
            torch.nn.Parameter(tensor, requires_grad=old.requires_grad)
            if isinstance(old, torch.nn.Parameter)
            else tensor
        )
        for k in keys:
            prefix, _, name = k.rpartition(".")
            module = model.get_submodule(prefix)
            slot = module._parameters if name in module._parameters else module._buffers
            if slot.get(name) is not old:
                raise KeyError(f"{k}: not a parameter or buffer of its module")
            slot[name] = new


def _unfit(request: Any, why: str) -> None:
    log.info("%s: weights not swapped (%s): built", request.source.id, why)

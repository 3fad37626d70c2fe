"""Memory a batch needs and memory that is free: batch sizes bounded by the work and the machine.

A configured batch size is an upper bound. Before a forward pass the callers (agreement inference,
multi-token forms, SimVerb vectors) cut it to the number of items there are and to what fits in the
free memory of the device, from an estimate of one item's memory (:func:`forward_bytes`, the
vocabulary row and the caller's own buffers). A cut is logged once (one warning line); an item that
cannot fit even alone stops the run with one line (:class:`~verbeval.core.errors.VerbevalError`)
before anything is run. Free memory (:func:`free_memory`):

* CPU: the smallest of the system's available memory (``MemAvailable`` in ``/proc/meminfo``, else
  ``os.sysconf``), the headroom under the process's ``RLIMIT_AS`` and ``RLIMIT_DATA`` when set
  (the limit minus ``VmSize`` or ``VmData`` of ``/proc/self/status``) and the headroom under a
  cgroup v2 ``memory.max`` (Slurm, containers);
* CUDA: ``torch.cuda.mem_get_info`` plus what torch's caching allocator holds unused;
* other devices: unknown (no cut; the out-of-memory back-off of the callers still applies).

:func:`is_oom` tells an out-of-memory error (CUDA's, the CPU allocator's, Python's ``MemoryError``)
from other errors, for the callers' halving back-off. torch is imported lazily (``verbeval.core``).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError

log = logging.getLogger(__name__)

MB = 1 << 20
#: share of the free memory a batch is fitted into; the rest is for what the estimate leaves out
#: (allocator slack, thread stacks, the caller's smaller tensors)
USABLE_FRACTION = 0.8
#: fragments of the messages of out-of-memory errors: torch's CUDA/MPS/XPU allocators ("CUDA out of
#: memory"), its CPU allocator ("DefaultCPUAllocator: can't allocate memory") and ENOMEM's strerror
OOM_MESSAGES = ("out of memory", "can't allocate memory", "cannot allocate memory")

#: (what, requested batch size) pairs already warned about in this process: a cut is logged once
_WARNED: set[tuple[str, int]] = set()


@dataclass(frozen=True)
class FreeMemory:
    """Bytes the process can still allocate on a device, and the limit that says so."""

    bytes: int
    source: str  # e.g. "MemAvailable", "RLIMIT_AS headroom", "cgroup memory.max headroom", "cuda:0"

    @property
    def mb(self) -> str:
        return _mb(self.bytes)


@dataclass(frozen=True)
class ModelShape:
    """What the memory of a forward pass depends on, read from a model's config (0 where unknown)."""

    vocab: int  # the output size: rows of the output embeddings, else config.vocab_size
    hidden: int
    layers: int
    heads: int
    act_bytes: int = 4  # bytes per element of the activations (the weights' dtype)


def _mb(n: float) -> str:
    """Bytes as megabytes: three decimals below 0.1 MB, one below 100 MB, none above."""
    v = n / MB
    return f"{v:.3f}" if v < 0.1 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory error: ``MemoryError`` (numpy, Python),
    ``torch.OutOfMemoryError``, or a ``RuntimeError`` whose message is an allocator's
    (:data:`OOM_MESSAGES`, the CPU allocator's "can't allocate memory" included)."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    msg = str(exc).lower()
    return any(m in msg for m in OOM_MESSAGES)


# --------------------------------------------------------------------------- free memory


def _kib_field(path: str | Path, field: str) -> int | None:
    """``field`` (a ``NAME:  N kB`` line of /proc/meminfo or /proc/self/status) in bytes, else None."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == field:
            parts = value.split()
            if parts and parts[0].isdigit():
                return int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return None


def available_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """The system's available memory: ``MemAvailable`` of ``meminfo``, else free pages from
    ``os.sysconf`` (no Linux), else None."""
    avail = _kib_field(meminfo, "MemAvailable")
    if avail is not None:
        return avail
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def rlimit_headroom(status: str | Path = "/proc/self/status") -> list[tuple[str, int]]:
    """``(name, bytes)`` of the room left under each of ``RLIMIT_AS`` (address space, against
    ``VmSize``) and ``RLIMIT_DATA`` (data segment, against ``VmData``) that is set; empty where
    neither is set or the usage cannot be read."""
    try:
        import resource
    except ImportError:  # not POSIX
        return []
    out = []
    for name, used_field in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        soft, _ = resource.getrlimit(getattr(resource, name))
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        used = _kib_field(status, used_field)
        if used is not None:
            out.append((name, max(0, soft - used)))
    return out


def cgroup_headroom(proc_cgroup: str | Path = "/proc/self/cgroup", root: str | Path = "/sys/fs/cgroup") -> int | None:
    """Room left under the process's cgroup v2 ``memory.max``: the limit minus ``memory.current``
    plus the reclaimable page cache (``inactive_file`` of ``memory.stat``); None without a limit
    or without cgroup v2."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    if rel is None:
        return None
    folder = Path(root) / rel.lstrip("/")
    try:
        limit = (folder / "memory.max").read_text().strip()
        current = int((folder / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    if not limit.isdigit():  # "max": no limit
        return None
    cache = 0
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "inactive_file" and value.strip().isdigit():
                cache = int(value)
    except OSError:
        pass
    return max(0, int(limit) - current + cache)


def cpu_free() -> FreeMemory | None:
    """The smallest of the CPU limits a process meets (see the module docstring); None if none
    can be read."""
    found: list[FreeMemory] = []
    avail = available_bytes()
    if avail is not None:
        found.append(FreeMemory(avail, "MemAvailable"))
    found += [FreeMemory(n, f"{name} headroom") for name, n in rlimit_headroom()]
    cg = cgroup_headroom()
    if cg is not None:
        found.append(FreeMemory(cg, "cgroup memory.max headroom"))
    return min(found, key=lambda f: f.bytes) if found else None


def free_memory(device: Any) -> FreeMemory | None:
    """Bytes free for new tensors on ``device`` (a ``torch.device`` or its name); None where not
    known (devices other than CPU and CUDA)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return cpu_free()
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        free, _total = torch.cuda.mem_get_info(index)
        cached = torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index)  # reusable by torch
        return FreeMemory(int(free + max(0, cached)), f"cuda:{index}")
    return None


# --------------------------------------------------------------------------- estimates


def _config_int(cfg: Any, *names: str) -> int:
    for name in names:
        value = getattr(cfg, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def model_shape(model: Any) -> ModelShape:
    """Vocabulary (output) size, hidden size, layers, attention heads and activation element size
    of a Hugging Face model, read from its config and output embeddings; a field that cannot be
    read is 0 (it then adds nothing to the estimates)."""
    cfg = getattr(model, "config", None)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    vocab = 0
    get_out = getattr(model, "get_output_embeddings", None)
    head = get_out() if callable(get_out) else None
    weight = getattr(head, "weight", None)
    if weight is not None and getattr(weight, "dim", lambda: 0)() == 2:
        vocab = int(weight.shape[0])
    vocab = vocab or _config_int(text, "vocab_size")
    act = 4
    params = getattr(model, "parameters", None)
    if callable(params):
        first = next(iter(params()), None)
        if first is not None and first.is_floating_point():
            act = int(first.element_size())
    return ModelShape(
        vocab=vocab,
        hidden=_config_int(text, "hidden_size", "n_embd", "d_model"),
        layers=_config_int(text, "num_hidden_layers", "n_layer", "num_layers"),
        heads=_config_int(text, "num_attention_heads", "n_head"),
        act_bytes=act,
    )


def forward_bytes(shape: ModelShape, tokens: int, past: int = 0) -> int:
    """Activation memory of one sequence of ``tokens`` new tokens (after ``past`` cached ones) in an
    inference forward pass: the key/value cache of every layer (``2 x layers x (past + tokens) x
    hidden``), one layer's transient tensors (about ``16 x tokens x hidden``: hidden states,
    query/key/value, the 4x MLP, residual copies) and its attention scores before and after the
    softmax (``2 x heads x tokens x (past + tokens)``), at the activations' element size."""
    total = past + tokens
    cache = 2 * shape.layers * total * shape.hidden
    layer = 16 * tokens * shape.hidden + 2 * shape.heads * tokens * total
    return (cache + layer) * shape.act_bytes


def per_context_bytes(shape: ModelShape, seq_len: int, *, vocab_entry_bytes: int, logit_positions: int = 1) -> int:
    """Memory one context of ``seq_len`` tokens needs in a batch: its forward pass
    (:func:`forward_bytes`), its float32 logits at ``logit_positions`` positions and
    ``vocab_entry_bytes`` per vocabulary entry of the caller's own per-context tensors (probabilities,
    sorts, masks)."""
    return forward_bytes(shape, seq_len) + shape.vocab * (4 * logit_positions + vocab_entry_bytes)


def fit_batch_size(
    batch_size: int,
    n_items: int,
    per_item: int,
    free: FreeMemory | None,
    *,
    what: str,
    unit: str = "context",
    detail: str = "",
    usable: float = USABLE_FRACTION,
) -> int:
    """The batch size to run: ``batch_size``, at most ``n_items`` (and at least 1), cut to the
    number of items of ``per_item`` bytes that fit in ``usable`` of ``free``.

    A cut below ``min(batch_size, n_items)`` logs one warning per ``(what, batch_size)`` and
    process, ``WHAT: batch size B cut to N: about X MB per context, Y MB free (SOURCE)``; later cuts
    of the same request are logged at debug level. ``free`` None (not known) or ``per_item`` 0
    cuts nothing. Raises :class:`VerbevalError` (one line, naming ``what``, the need and what is
    free; ``detail`` says what the need was estimated from) when one item needs more than is free.
    """
    want = max(1, min(batch_size, n_items))
    if free is None or per_item <= 0:
        return want
    if per_item > free.bytes:
        about = f" ({detail})" if detail else ""
        raise VerbevalError(
            f"{what}: one {unit}{about} needs about {_mb(per_item)} MB of memory, but only "
            f"{free.mb} MB is free ({free.source}); free memory, or run it on a machine or "
            "device with more"
        )
    fits = max(1, int(free.bytes * usable) // per_item)
    if fits >= want:
        return want
    key = (what, batch_size)
    level = logging.DEBUG if key in _WARNED else logging.WARNING
    _WARNED.add(key)
    log.log(
        level,
        "%s: batch size %d cut to %d: about %s MB per %s, %s MB free (%s)",
        what,
        batch_size,
        fits,
        _mb(per_item),
        unit,
        free.mb,
        free.source,
    )
    return fits

"""A GGUF file's header, checked before anything reads its weights.

A hand-edited or damaged header can make transformers allocate without bound (a ``block_count`` of
a million builds a million layers), divide by zero (no attention heads) or stop in a traceback (an
array count past the end of the file). :func:`check_gguf_header` parses the header here, with every
count and length bounded by the bytes left in the file (``gguf.GGUFReader`` is not used: it trusts
the counts), then compares its sizes with the tensors present, so such a file stops with one line
naming the file and the field before transformers reads it. Only the header pages of the
memory-mapped file are touched. (A saved folder's config.json: :mod:`.config_sizes`.)
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError

#: the fix every refused GGUF header gets
GGUF_HINT = "a damaged or hand-edited header; get the file again"
#: the fix of a GGUF file whose header claims more bytes than the file has left (cut short or damaged)
CUT_HINT = "the file is cut short (an interrupted download?) or its header damaged; get the file again"

#: GGUF versions with 64-bit counts (version 1 had 32-bit ones; gguf.GGUFReader reads 2 and 3 only)
GGUF_VERSIONS = (2, 3)
#: the most dimensions a GGUF tensor has (ggml's GGML_MAX_DIMS)
MAX_DIMS = 4
#: the GGUF data alignment when ``general.alignment`` is absent
DEFAULT_ALIGNMENT = 32
#: GGUF architectures without attention heads (their head counts are 0)
ATTENTION_FREE = ("mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7")
#: the longest per-block metadata array taken as a list of values (llama.cpp's limit is 512 blocks)
MAX_PER_BLOCK = 4096

# GGUF metadata value types (GGUFValueType) and the struct format of the scalar ones
_STRING, _ARRAY = 8, 9
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_INTEGERS = (0, 1, 2, 3, 4, 5, 10, 11)
_TYPE_NAMES = {
    0: "uint8",
    1: "int8",
    2: "uint16",
    3: "int16",
    4: "uint32",
    5: "int32",
    6: "float32",
    7: "bool",
    8: "string",
    9: "array",
    10: "uint64",
    11: "int64",
    12: "float64",
}
_BLOCK = re.compile(r"^(?:(.*)\.)?blk\.(\d+)\.")


class _Refused(Exception):
    """One problem of a header: ``message`` (naming the field) and the ``hint`` that follows it."""

    def __init__(self, message: str, hint: str = GGUF_HINT) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class _Array:
    """A metadata array: its item type, its length and where its items start in the file."""

    item_type: int
    count: int
    offset: int


@dataclass(frozen=True)
class _Tensor:
    """A tensor info of the header: name, dimensions (GGUF order: the row width first), ggml type,
    and the start and byte size of its data in the file."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    start: int
    n_bytes: int


@dataclass
class GGUFHeader:
    """What :func:`read_gguf_header` read: the metadata (scalars and strings as values, arrays as
    :class:`_Array`), the tensor infos and the file's size."""

    version: int
    size: int
    order: str = "<"
    metadata: dict[str, Any] = field(default_factory=dict)
    types: dict[str, int] = field(default_factory=dict)
    tensors: dict[str, _Tensor] = field(default_factory=dict)
    alignment: int = DEFAULT_ALIGNMENT


class _Cursor:
    """Reads little- or big-endian GGUF fields from ``buf``, never past its end."""

    def __init__(self, buf: Any, size: int) -> None:
        self.buf = buf
        self.size = size
        self.pos = 0
        self.order = "<"

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.left():
            raise _Refused(
                f"the file ends at byte {self.size}, inside {what} (byte {self.pos}, {n} bytes needed)", CUT_HINT
            )

    def scalar(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        self.need(n, what)
        (value,) = struct.unpack_from(self.order + fmt, self.buf, self.pos)
        self.pos += n
        return value

    def string(self, what: str) -> bytes:
        n = self.scalar("Q", f"the length of {what}")
        if n > self.left():
            raise _Refused(
                f"{what} is a string of {n} bytes but only {self.left()} bytes are left in the file", CUT_HINT
            )
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return raw

    def text(self, what: str) -> str:
        raw = self.string(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused(f"{what} is not UTF-8 text") from None

    def skip_strings(self, count: int, what: str) -> None:
        """Step over ``count`` strings (an array of strings), each length checked."""
        unpack, order, buf = struct.unpack_from, self.order + "Q", self.buf
        pos, size = self.pos, self.size
        for i in range(count):
            if pos + 8 > size:
                self.pos = pos
                raise _Refused(f"the file ends at byte {size}, inside item {i} of {what}", CUT_HINT)
            (n,) = unpack(order, buf, pos)
            pos += 8
            if n > size - pos:
                raise _Refused(
                    f"item {i} of {what} is a string of {n} bytes but only {size - pos} bytes are left in the file",
                    CUT_HINT,
                )
            pos += n
        self.pos = pos


def _value(cur: _Cursor, vtype: int, key: str) -> Any:
    """Read one metadata value of type ``vtype``; an array is returned as :class:`_Array`."""
    if vtype in _SCALARS:
        return cur.scalar(_SCALARS[vtype], key)
    if vtype == _STRING:
        return cur.string(key).decode("utf-8", errors="replace")
    if vtype != _ARRAY:
        raise _Refused(f"{key} has value type {vtype}, which GGUF does not define")
    item = cur.scalar("I", f"the item type of {key}")
    count = cur.scalar("Q", f"the length of {key}")
    if item == _ARRAY:
        raise _Refused(f"{key} is an array of arrays, which GGUF readers do not take")
    if item not in _SCALARS and item != _STRING:
        raise _Refused(f"{key} is an array of value type {item}, which GGUF does not define")
    least = struct.calcsize(_SCALARS[item]) if item in _SCALARS else 8  # a string: its u64 length at least
    if count * least > cur.left():
        raise _Refused(
            f"{key} claims {count} items ({_TYPE_NAMES[item]}, at least {count * least} bytes) but only "
            f"{cur.left()} bytes are left in the file",
            CUT_HINT,
        )
    arr = _Array(item, count, cur.pos)
    if item == _STRING:
        cur.skip_strings(count, key)
    else:
        cur.pos += count * least
    return arr


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """Parse the header of the GGUF file ``path`` (magic, version, counts, metadata, tensor infos),
    every count and length bounded by the bytes left in the file; raises ``_Refused`` on the first
    field that does not fit. No tensor data is read."""
    with _Mapped(path) as (buf, size):
        return _parse(buf, size)


class _Mapped:
    """``with _Mapped(path) as (buf, size)``: the file memory-mapped read-only (only the pages read
    are loaded); a file too short for a GGUF header is refused before mapping."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __enter__(self) -> tuple[mmap.mmap, int]:
        size = self.path.stat().st_size
        if size < 24:
            raise _Refused(f"the file has {size} bytes, fewer than a GGUF header's 24", CUT_HINT)
        with open(self.path, "rb") as f:
            self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self.buf, size

    def __exit__(self, *exc: object) -> None:
        self.buf.close()


def _parse(buf: Any, size: int) -> GGUFHeader:
    """:func:`read_gguf_header` of the ``size`` bytes of ``buf``."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    cur = _Cursor(buf, size)
    if bytes(buf[:4]) != b"GGUF":
        raise _Refused(
            f"the file does not start with the GGUF magic (it starts with {bytes(buf[:4])!r})",
            "not a GGUF file; check gguf_file",
        )
    cur.pos = 4
    version = cur.scalar("I", "the version")
    if version & 0xFFFF == 0:  # written on a big-endian machine (gguf.GGUFReader's test)
        cur.order = ">"
        version = struct.unpack_from(">I", buf, 4)[0]
    if version not in GGUF_VERSIONS:
        raise _Refused(f"GGUF.version is {version}; readers take versions {', '.join(map(str, GGUF_VERSIONS))}")
    tensor_count = cur.scalar("Q", "GGUF.tensor_count")
    kv_count = cur.scalar("Q", "GGUF.kv_count")
    # a metadata entry is at least 13 bytes (key length, value type, one byte of value); a tensor
    # info at least 24 (name length, dimension count, type, offset)
    if kv_count * 13 > cur.left():
        raise _Refused(
            f"GGUF.kv_count is {kv_count} but the {cur.left()} bytes after the header's counts hold "
            f"at most {cur.left() // 13} metadata entries",
            CUT_HINT,
        )
    if tensor_count * 24 > cur.left():
        raise _Refused(
            f"GGUF.tensor_count is {tensor_count} but the {cur.left()} bytes after the header's "
            f"counts hold at most {cur.left() // 24} tensor infos",
            CUT_HINT,
        )
    head = GGUFHeader(version=version, size=size, order=cur.order)
    for i in range(kv_count):
        key = cur.text(f"the key of metadata entry {i}")
        if key in head.metadata:
            raise _Refused(f"metadata key {key} appears twice")
        vtype = cur.scalar("I", f"the value type of {key}")
        head.metadata[key] = _value(cur, vtype, key)
        head.types[key] = vtype
    infos: list[tuple[str, tuple[int, ...], int, int]] = []
    seen: set[str] = set()
    for i in range(tensor_count):
        name = cur.text(f"the name of tensor {i}")
        n_dims = cur.scalar("I", f"the dimension count of tensor {name}")
        if n_dims > MAX_DIMS:
            raise _Refused(f"tensor {name} has {n_dims} dimensions; GGUF allows at most {MAX_DIMS}")
        dims = tuple(cur.scalar("Q", f"the shape of tensor {name}") for _ in range(n_dims))
        ggml_type = cur.scalar("I", f"the type of tensor {name}")
        offset = cur.scalar("Q", f"the data offset of tensor {name}")
        if name in seen:
            raise _Refused(f"tensor {name} appears twice")
        seen.add(name)
        infos.append((name, dims, ggml_type, offset))
    if "general.alignment" in head.metadata:
        align = head.metadata["general.alignment"]
        if head.types["general.alignment"] != 4 or align <= 0 or align & (align - 1):
            raise _Refused(
                f"general.alignment is {align!r} ({_TYPE_NAMES.get(head.types['general.alignment'])}); "
                "it must be a uint32 power of two"
            )
        head.alignment = int(align)
    data_start = cur.pos + (-cur.pos) % head.alignment
    for name, dims, ggml_type, offset in infos:
        try:
            qtype = GGMLQuantizationType(ggml_type)
            block, type_size = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise _Refused(f"tensor {name} has ggml type {ggml_type}, which the gguf package does not know") from None
        n_elems = 1
        for d in dims:
            n_elems *= d
        if dims and dims[0] % block:
            raise _Refused(
                f"tensor {name}: its rows of {dims[0]} values are not whole blocks of {block} ({qtype.name})"
            )
        if offset % head.alignment:
            raise _Refused(
                f"tensor {name}: its data offset {offset} is not a multiple of the alignment {head.alignment}"
            )
        n_bytes = n_elems * type_size // block
        start = data_start + offset
        if start + n_bytes > size:
            shape = "x".join(map(str, dims)) or "scalar"
            cut = n_bytes <= size  # a tensor larger than the whole file: its shape is wrong, not the length
            raise _Refused(
                f"tensor {name} of shape {shape} ({qtype.name}, {n_bytes} bytes at byte {start}) runs "
                f"past the end of the file ({size} bytes)",
                CUT_HINT if cut else GGUF_HINT,
            )
        head.tensors[name] = _Tensor(name, dims, ggml_type, start, n_bytes)
    last_end, last_name = data_start, None
    for t in sorted(head.tensors.values(), key=lambda t: t.start):
        if t.start < last_end and last_name is not None and t.n_bytes:
            raise _Refused(f"tensors {last_name} and {t.name} overlap in the file")
        if t.n_bytes:
            last_end, last_name = t.start + t.n_bytes, t.name
    return head


def _int(head: GGUFHeader, key: str) -> int | None:
    """The whole-number value of ``key`` (None when absent); a non-integer value is refused."""
    if key not in head.metadata:
        return None
    value = head.metadata[key]
    if head.types[key] not in _INTEGERS:
        raise _Refused(f"{key} is {value!r} ({_TYPE_NAMES.get(head.types[key], '?')}), not a whole number")
    return int(value)


def _ints(head: GGUFHeader, key: str, buf: Any) -> list[int] | None:
    """A whole number, or a per-block array of them (read from ``buf``), as a list; None when absent."""
    value = head.metadata.get(key)
    if not isinstance(value, _Array):
        single = _int(head, key)
        return None if single is None else [single]
    if value.item_type not in _INTEGERS:
        raise _Refused(f"{key} is an array of {_TYPE_NAMES[value.item_type]}, not of whole numbers")
    if value.count > MAX_PER_BLOCK or value.count == 0:
        raise _Refused(f"{key} is an array of {value.count} values (one per block expected)")
    fmt = _SCALARS[value.item_type]
    step = struct.calcsize(fmt)
    return [struct.unpack_from(head.order + fmt, buf, value.offset + i * step)[0] for i in range(value.count)]


def gguf_facts(path: str | Path) -> dict[str, int | None]:
    """What the header of the GGUF file ``path`` says of the model's shape: ``layers``
    (``<arch>.block_count``) and ``vocab`` (the length of ``tokenizer.ggml.tokens``, else
    ``<arch>.vocab_size``); None for one the header does not state or cannot be read."""
    try:
        with _Mapped(path) as (buf, size):
            head = _parse(buf, size)
        arch = head.metadata.get("general.architecture")
        tokens = head.metadata.get("tokenizer.ggml.tokens")
        vocab = tokens.count if isinstance(tokens, _Array) else _int(head, f"{arch}.vocab_size")
        return {"layers": _int(head, f"{arch}.block_count"), "vocab": vocab}
    except Exception:  # noqa: BLE001 - the header's own check (check_gguf_header) reports a bad file
        return {"layers": None, "vocab": None}


def _blocks(names: list[str]) -> str:
    """``blk.0-blk.1``, or the indices listed when they are not 0..n-1."""
    idx = sorted({int(m.group(2)) for n in names if (m := _BLOCK.match(n))})
    if not idx:
        return "no blk.N tensors"
    if idx == list(range(len(idx))):
        return f"blk.0-blk.{idx[-1]}"
    shown = ", ".join(f"blk.{i}" for i in idx[:4])
    return shown + (", …" if len(idx) > 4 else "")


def _check_gguf_sizes(head: GGUFHeader, buf: Any) -> None:
    """Compare the sizes of the metadata with the tensors the file holds."""
    arch = head.metadata.get("general.architecture")
    if not isinstance(arch, str) or head.types.get("general.architecture") != _STRING:
        raise _Refused("general.architecture is missing or not a string")
    tokens = head.metadata.get("tokenizer.ggml.tokens")
    n_tokens: int | None = None
    if tokens is not None:
        if not isinstance(tokens, _Array) or tokens.item_type != _STRING:
            raise _Refused("tokenizer.ggml.tokens is not an array of strings")
        n_tokens = tokens.count
    vocab = _int(head, f"{arch}.vocab_size")
    if vocab is not None and n_tokens is not None and vocab != n_tokens:
        raise _Refused(f"{arch}.vocab_size is {vocab} but tokenizer.ggml.tokens holds {n_tokens} tokens")
    rows_wanted = n_tokens if n_tokens is not None else vocab
    what = f"tokenizer.ggml.tokens holds {n_tokens} tokens" if n_tokens is not None else f"{arch}.vocab_size is {vocab}"
    hidden = _int(head, f"{arch}.embedding_length")
    if hidden is not None and hidden <= 0:
        raise _Refused(f"{arch}.embedding_length is {hidden}; it must be positive")
    for name in ("token_embd.weight", "output.weight"):
        t = head.tensors.get(name)
        if t is None:
            continue
        if len(t.dims) != 2:
            raise _Refused(f"tensor {name} has {len(t.dims)} dimensions, not 2 (width x vocabulary)")
        width, rows = t.dims
        if rows_wanted is not None and rows != rows_wanted:
            raise _Refused(f"tensor {name} has {rows} rows but {what}")
        if hidden is not None and width != hidden:
            raise _Refused(f"{arch}.embedding_length is {hidden} but tensor {name} is {width} wide")
    blocks = _int(head, f"{arch}.block_count")
    if blocks is not None:
        groups: dict[str, set[int]] = {}
        for name in head.tensors:
            m = _BLOCK.match(name)
            if m:
                groups.setdefault(m.group(1) or "", set()).add(int(m.group(2)))
        counts = {len(v) for v in groups.values()} or {0}
        if blocks not in counts:  # t5 files hold enc.blk.N and dec.blk.N: one of them is block_count
            biggest = max(groups, key=lambda g: len(groups[g])) if groups else ""
            names = [n for n in head.tensors if (m := _BLOCK.match(n)) and (m.group(1) or "") == biggest]
            n = len(groups.get(biggest, ()))
            raise _Refused(
                f"{arch}.block_count is {blocks} but the file holds tensors of {n} block"
                f"{'' if n == 1 else 's'} ({(biggest + '.') if biggest else ''}{_blocks(names)})"
            )
    context = _int(head, f"{arch}.context_length")
    if context is not None and context <= 0:
        raise _Refused(f"{arch}.context_length is {context}; it must be positive")
    if arch in ATTENTION_FREE:
        return
    heads = _ints(head, f"{arch}.attention.head_count", buf)
    if heads is None:
        return
    key = f"{arch}.attention.head_count"
    if len(heads) == 1 and heads[0] <= 0 or not any(h > 0 for h in heads):
        raise _Refused(f"{key} is {heads[0] if len(heads) == 1 else heads}: a model needs at least one attention head")
    for h in heads:
        if h < 0:
            raise _Refused(f"{key} holds {h}; head counts cannot be negative")
        if h and hidden is not None and hidden % h:
            raise _Refused(f"{key} is {h}, which does not divide {arch}.embedding_length {hidden}")
    kv_key = f"{arch}.attention.head_count_kv"
    kv = _ints(head, kv_key, buf)
    if kv is None:
        return
    if len(kv) == 1 and kv[0] <= 0:
        raise _Refused(f"{kv_key} is {kv[0]}: a model needs at least one key/value head")
    for i, k in enumerate(kv):  # a per-block array may hold 0 for blocks without attention (lfm2)
        h = heads[i] if len(heads) == len(kv) else heads[0] if len(heads) == 1 else None
        if k < 0:
            raise _Refused(f"{kv_key} holds {k}; head counts cannot be negative")
        if k and h is not None and h % k:
            raise _Refused(f"{kv_key} is {k}, which does not divide {key} {h}")


#: (path, size, mtime_ns) of GGUF files already found sound in this process
_SOUND: set[tuple[str, int, int]] = set()


def check_gguf_header(path: str | Path, model: str) -> None:
    """VerbevalError, one line naming ``path`` and the field, unless the header of the GGUF file
    ``path`` (of config model ``model``) is sound: every count and length fits in the file; every
    tensor's shape times its type size fits in the file, without overlap; the vocabulary
    (``<arch>.vocab_size``, the token embedding's and output's rows) is the token list's length;
    ``<arch>.block_count`` is the number of ``blk.N`` blocks present; ``<arch>.embedding_length`` is
    the embedding's width; the head counts are positive and divide the embedding length (the head
    count); the context length is positive. Any other failure to read the header is one line too.
    Only the header is read; a file found sound is not read again in the same process while it is
    unchanged."""
    p = Path(path)
    try:
        st = p.stat()
        stamp = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        if stamp in _SOUND:
            return
        with _Mapped(p) as (buf, size):
            _check_gguf_sizes(_parse(buf, size), buf)
    except _Refused as bad:
        raise VerbevalError(f"model {model!r}: {path}: {bad.message}: {bad.hint}") from None
    except Exception as exc:  # any failure to read the header is the file's
        if isinstance(exc, ImportError):  # the gguf package (its table of tensor types) is missing
            from verbeval.core.model_sources.gguf import require_gguf

            require_gguf(model)
        first = (str(exc).splitlines() or [""])[0]
        raise VerbevalError(
            f"model {model!r}: {path}: cannot read the GGUF header ({type(exc).__name__}: {first})"
        ) from None
    _SOUND.add(stamp)

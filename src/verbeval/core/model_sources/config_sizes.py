"""A saved model folder's config.json, checked before transformers builds a model from it.

:func:`check_config_sizes` compares the sizes in ``config.json`` (attention heads, hidden size,
vocabulary, layers) with each other and with the tensor names and shapes in the headers of the
folder's safetensors files, so a damaged or hand-edited config stops with one line naming the file
and the field, not in a division by zero or an allocation without bound. Only the config and the
safetensors headers are read. (A GGUF file's header: :mod:`.gguf_header`.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError
from verbeval.core.io import describe_json_error

#: the fix of a refused config.json
CONFIG_HINT = "a damaged or hand-edited config.json; download or save the model again"
#: the fix of a config.json whose sizes disagree with the safetensors weights present
WEIGHTS_HINT = "a damaged or hand-edited config.json, or missing weight files; download or save the model again"
#: a config.json larger than this is not read (no real one comes near it)
MAX_CONFIG_BYTES = 64 << 20


class _Refused(Exception):
    """One problem of a config: ``message`` (naming the field) and the ``hint`` that follows it."""

    def __init__(self, message: str, hint: str = CONFIG_HINT) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


#: config.json keys of each size, most common first (transformers' names, GPT-2's, MPT's, T5's)
CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "vocab": ("vocab_size",),
    "kv_heads": ("num_key_value_heads", "n_head_kv", "num_kv_heads"),
}
#: keys that state the embedding width when it is not the hidden size (ALBERT, ELECTRA, OPT)
EMBED_WIDTH_KEYS = ("embedding_size", "word_embed_proj_dim")
#: name endings of token embedding tensors (rows: the vocabulary)
EMBED_SUFFIXES = (
    "embed_tokens.weight",
    "wte.weight",
    "word_embeddings.weight",
    "embed_in.weight",
    "tok_embeddings.weight",
)
#: a layer's tensors: <prefix>.<container>.<N>.… (model.layers.0., transformer.h.0., bert.encoder.layer.0.)
_LAYER = re.compile(r"^(?:(.*)\.)?(layers|layer|h|blocks|block)\.(\d+)\.")


def _config_size(cfg: dict[str, Any], what: str) -> tuple[str, int] | None:
    """(key, value) of the first key of ``what`` present in ``cfg``, None when none is (or null)."""
    for key in CONFIG_KEYS[what]:
        if cfg.get(key) is not None:
            value = cfg[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise _Refused(f"{key} is {value!r}, not a whole number", CONFIG_HINT)
            return key, value
    return None


def _safetensors_shapes(folder: Path) -> tuple[list[str], dict[str, tuple[str, list[int]]], list[str]] | None:
    """(file names, {embedding tensor: (file name, shape)}, all tensor names) of the folder's
    safetensors files, from their headers; None when there are none or one cannot be read (the
    loader names a damaged file itself)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    try:
        from safetensors import safe_open
    except ImportError:  # pragma: no cover - transformers brings safetensors
        return None
    embeds: dict[str, tuple[str, list[int]]] = {}
    names: list[str] = []
    try:
        for f in files:
            with safe_open(str(f), framework="numpy") as st:
                for key in st.keys():
                    names.append(key)
                    if key.endswith(EMBED_SUFFIXES):
                        embeds[key] = (f.name, list(st.get_slice(key).get_shape()))
    except Exception:  # safetensors' SafetensorError and OSError: the load reports it
        return None
    return [f.name for f in files], embeds, names


def _check_config(cfg: dict[str, Any], folder: Path) -> None:
    """The checks of :func:`check_config_sizes` on the parsed config ``cfg`` of ``folder``."""
    heads = _config_size(cfg, "heads")
    hidden = _config_size(cfg, "hidden")
    layers = _config_size(cfg, "layers")
    vocab = _config_size(cfg, "vocab")
    kv = _config_size(cfg, "kv_heads")
    for item in (hidden, layers, vocab):
        if item is not None and item[1] <= 0:
            raise _Refused(f"{item[0]} is {item[1]}; it must be positive", CONFIG_HINT)
    if heads is not None:
        if heads[1] <= 0:
            raise _Refused(f"{heads[0]} is {heads[1]}: a model needs at least one attention head", CONFIG_HINT)
        if hidden is not None and hidden[1] % heads[1]:
            raise _Refused(f"{heads[0]} is {heads[1]}, which does not divide {hidden[0]} {hidden[1]}", CONFIG_HINT)
        if kv is not None:
            if kv[1] <= 0:
                raise _Refused(f"{kv[0]} is {kv[1]}: a model needs at least one key/value head", CONFIG_HINT)
            if heads[1] % kv[1]:
                raise _Refused(f"{kv[0]} is {kv[1]}, which does not divide {heads[0]} {heads[1]}", CONFIG_HINT)
    found = _safetensors_shapes(folder)
    if found is None:
        return
    files, embeds, names = found
    width_key = next((k for k in EMBED_WIDTH_KEYS if isinstance(cfg.get(k), int)), None)
    width = (width_key, cfg[width_key]) if width_key else hidden
    for name, (fname, shape) in embeds.items():
        if len(shape) != 2:
            continue
        if vocab is not None and shape[0] != vocab[1]:
            raise _Refused(f"{vocab[0]} is {vocab[1]} but {fname} holds {name} of {shape[0]} rows", WEIGHTS_HINT)
        if width is not None and shape[1] != width[1]:
            raise _Refused(f"{width[0]} is {width[1]} but {fname} holds {name} of width {shape[1]}", WEIGHTS_HINT)
    if layers is None:
        return
    groups: dict[str, set[int]] = {}
    for name in names:
        m = _LAYER.match(name)
        if m:
            prefix = f"{m.group(1)}.{m.group(2)}" if m.group(1) else m.group(2)
            groups.setdefault(prefix, set()).add(int(m.group(3)))
    if not groups:  # a layout these names do not describe (ALBERT's shared layers): nothing to compare
        return
    extra = cfg.get("num_nextn_predict_layers")  # DeepSeek-V3's multi-token prediction layers
    allowed = {layers[1]} | ({layers[1] + extra} if isinstance(extra, int) else set())
    if not any(len(v) in allowed for v in groups.values()):
        biggest = max(groups, key=lambda g: len(groups[g]))
        idx = sorted(groups[biggest])
        where = (
            f"{biggest}.0-{biggest}.{idx[-1]}"
            if idx == list(range(len(idx)))
            else ", ".join(f"{biggest}.{i}" for i in idx[:4]) + (", …" if len(idx) > 4 else "")
        )
        holds = files[0] if len(files) == 1 else f"the {len(files)} safetensors files"
        raise _Refused(
            f"{layers[0]} is {layers[1]} but {holds} hold{'s' if len(files) == 1 else ''} tensors of "
            f"{len(idx)} layer{'' if len(idx) == 1 else 's'} ({where})",
            WEIGHTS_HINT,
        )


#: (config.json, safetensors files) stamps of model folders already found sound in this process
_SOUND_CONFIGS: set[tuple[tuple[str, int, int], ...]] = set()


def _stamp(files: list[Path]) -> tuple[tuple[str, int, int], ...]:
    """(path, size, mtime_ns) of each file: unchanged files keep their stamp."""
    out = []
    for f in files:
        st = f.stat()
        out.append((str(f.resolve()), st.st_size, st.st_mtime_ns))
    return tuple(out)


def check_config_sizes(path: str | Path, model: str) -> None:
    """VerbevalError, one line naming the config.json and the field, unless the sizes of a saved model
    folder's config (``path``: the folder or its ``config.json``; of config model ``model``) are sound:
    attention heads positive and dividing the hidden size (also where a head size is stated: every
    released model's heads do), key/value heads positive and dividing the heads, sizes positive;
    with safetensors weights in the folder, ``vocab_size`` and the hidden (or embedding) size equal
    the token embedding's shape and the number of layers the layers present. A malformed config.json is one line with the reason. No
    config.json: nothing to check. Only the config and the safetensors headers are read; a folder
    found sound is not read again in the same process while its files are unchanged."""
    p = Path(path)
    cfg_path = p / "config.json" if p.is_dir() else p
    if not cfg_path.is_file():
        return
    try:
        stamp = _stamp([cfg_path, *sorted(cfg_path.parent.glob("*.safetensors"))])
        if stamp in _SOUND_CONFIGS:
            return
        n = cfg_path.stat().st_size
        if n > MAX_CONFIG_BYTES:
            raise _Refused(f"{n} bytes, too large for a model config", CONFIG_HINT)
        try:
            cfg = json.loads(cfg_path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _Refused(f"not UTF-8 text (byte {exc.start})", CONFIG_HINT) from None
        except json.JSONDecodeError as exc:
            raise _Refused(f"not valid JSON ({describe_json_error(exc, 'line')})", CONFIG_HINT) from None
        if not isinstance(cfg, dict):
            raise _Refused(f"a JSON {type(cfg).__name__}, not an object", CONFIG_HINT)
        _check_config(cfg, cfg_path.parent)
    except _Refused as bad:
        raise VerbevalError(f"model {model!r}: {cfg_path}: {bad.message}: {bad.hint}") from None
    except OSError as exc:
        raise VerbevalError(f"model {model!r}: {cfg_path}: cannot read it ({exc.strerror or exc})") from None
    _SOUND_CONFIGS.add(stamp)

"""GGUF checkpoints (llama.cpp's single-file format) as models.

A model entry with ``gguf_file: NAME.gguf`` names one GGUF file in its ``id``: a local folder or a
Hugging Face hub repository. transformers reads the architecture, tokenizer and weights from it
(``from_pretrained(folder, gguf_file=NAME)``, which needs the ``gguf`` package) and dequantises the
weights; the model's ``dtype`` is applied afterwards. Every architecture transformers reads from GGUF
is a decoder, so a GGUF model is a causal LM.

The numbers of a quantised checkpoint belong to that checkpoint (e.g. SmolLM2-135M-Instruct at
Q4_1), not to the full-precision model it was made from (docs/models.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError

#: GGUF architectures that transformers can read but that are not causal LMs (encoder-decoders)
NOT_CAUSAL = ("t5", "t5encoder", "umt5")


def require_gguf(model: str) -> None:
    """VerbevalError unless the ``gguf`` package (transformers' GGUF reader) is installed."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise VerbevalError(
            f"model {model!r}: reading a GGUF file needs the gguf package: pip install gguf "
            "(a dependency of verbeval: reinstall it with `pip install -e .`)"
        ) from None


def supported_architectures() -> list[str]:
    """The GGUF architectures (``general.architecture``) that the installed transformers reads."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer"))


def check_kind(model: str, kind: str) -> None:
    """A masked LM cannot come as GGUF: transformers reads only decoders from it."""
    if kind == "masked":
        raise VerbevalError(
            f"model {model!r}: kind masked with a gguf_file: transformers reads only decoder "
            "(causal) LMs from GGUF; give a masked LM as a saved model folder or hub id, "
            "without gguf_file"
        )


_UNSUPPORTED = re.compile(r"architecture (\S+) is not supported")


_UNKNOWN_TYPE = re.compile(r"Unknown gguf model_type: (\S+)")
_SHAPES = re.compile(r"ignore_mismatched_sizes|size mismatch")


def unreadable_errors(exc: BaseException) -> bool:
    """Whether ``exc``, raised by transformers while reading a GGUF file's weights, means the file is
    unreadable (rather than, e.g., out of memory): a model type gguf-py has no tensor map for
    (NotImplementedError), or a config read from the file whose sizes do not fit its tensors
    (RuntimeError: transformers takes some sizes from its defaults, not from the file)."""
    if isinstance(exc, NotImplementedError):
        return bool(_UNKNOWN_TYPE.search(str(exc)))
    return isinstance(exc, RuntimeError) and bool(_SHAPES.search(str(exc)))


def unreadable(exc: BaseException, model: str, gguf_file: str) -> VerbevalError:
    """The one-line error of a GGUF file transformers refused: an unsupported architecture is named,
    with the ones it reads; a model type without a tensor map and sizes that do not fit say why."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    m = _UNSUPPORTED.search(text)
    if m:
        return VerbevalError(
            f"model {model!r}: transformers cannot read GGUF architecture {m.group(1)!r} from "
            f"{gguf_file} (it reads {', '.join(supported_architectures())}); convert the model to "
            "a saved folder instead"
        )
    m = _UNKNOWN_TYPE.search(text)
    if m:
        return VerbevalError(
            f"model {model!r}: transformers reads {gguf_file} as model type {m.group(1).rstrip('.')!r}, "
            "whose GGUF tensors it cannot map (a llama file whose general.name is exactly that "
            "type is read this way); convert the model to a saved folder instead "
            "(docs/models.md, 'GGUF architectures tried')"
        )
    if _SHAPES.search(text):
        return VerbevalError(
            f"model {model!r}: the config transformers builds from {gguf_file} does not fit its "
            "weights (transformers takes some sizes of this architecture from its defaults, not "
            "from the file); convert the model to a saved folder instead (docs/models.md, "
            "'GGUF architectures tried')"
        )
    return VerbevalError(f"model {model!r}: cannot read {gguf_file}: {text}")


def check_config(config: Any, model: str) -> None:
    """VerbevalError unless the GGUF model's config is a causal LM (not an encoder-decoder)."""
    model_type = str(getattr(config, "model_type", ""))
    if model_type in NOT_CAUSAL:
        raise VerbevalError(f"model {model!r}: GGUF architecture {model_type!r} is an encoder-decoder, not a causal LM")


def resolve_file(
    model_id: str, gguf_file: str, revision: str | None, local_dir: bool, local_files_only: bool = False
) -> Path:
    """The local path of the GGUF file: ``<folder>/<gguf_file>``, or the hub repository's file
    (downloaded into the Hugging Face cache once; with ``local_files_only`` only looked up there)."""
    if local_dir:
        return Path(model_id).expanduser() / gguf_file
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(model_id, gguf_file, revision=revision, local_files_only=local_files_only))
    except Exception as exc:  # huggingface_hub raises many error types (offline, 404, auth)
        raise VerbevalError(
            f"model {model_id!r}: cannot get {gguf_file} from the hub "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None


def load_kwargs(gguf_file: str | None) -> dict[str, Any]:
    """Extra ``from_pretrained`` arguments of a GGUF model (none without one)."""
    return {"gguf_file": gguf_file} if gguf_file else {}

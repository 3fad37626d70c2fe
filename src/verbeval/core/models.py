"""Loading Hugging Face language models and tokenizers, by hub id or local path; the kind, BOS and
case of a loaded model; and the fingerprint that records which version of a model made a shard.

A model is *masked* (BERT, RoBERTa: the verb position is a mask token) or *causal* (GPT-2 and any
``*ForCausalLM``: the verb is the next token after the left context). The kind is detected from the
model config's ``architectures`` and can be forced with ``kind``. Every loader takes a model source
whole (:class:`verbeval.core.model_sources.source.ModelSource`: id, revision, GGUF file, pin; a bare
id or folder is one). What a model id names is :mod:`verbeval.core.model_ids`; devices and device
maps :mod:`verbeval.core.devices`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from verbeval.core.devices import DeviceMap, check_device_map, input_device, resolve_device
from verbeval.core.errors import VerbevalError
from verbeval.core.load_report import check_load_report
from verbeval.core.model_ids import ModelRef
from verbeval.core.model_sources.source import ModelSource

if TYPE_CHECKING:  # torch is imported by the functions that need it: start-up of model-free commands stays cheap
    import torch

log = logging.getLogger(__name__)

Kind = Literal["masked", "causal"]
#: dtype names accepted for a model's run (config ``dtype``, ``--dtype``): the weights' dtype, and
#: ``tf32``: float32 weights whose float32 matrix products use TF32 on a CUDA GPU (:func:`run_precision`)
DTYPES = ("float32", "float16", "bfloat16", "tf32")


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of the weights of a name in :data:`DTYPES` (``tf32``: float32)."""
    import torch

    if name not in DTYPES:
        raise VerbevalError(f"unknown dtype {name!r}; choose one of {sorted(DTYPES)}")
    return torch.float32 if name == "tf32" else getattr(torch, name)


def matmul_precision(dtype: str, device: torch.device | str) -> str | None:
    """What a ``tf32`` run's float32 matrix products are on ``device`` (a device, or a ``--device``
    choice such as ``auto``): ``tf32`` on a CUDA device, ``float32`` on any other (a CPU's matrix
    products have no TF32: the run is a float32 run); None for every other dtype. Recorded in a tf32
    run's shards (``matmul``) and part of their key."""
    if dtype != "tf32":
        return None
    dev = resolve_device(device) if isinstance(device, str) else device
    return "tf32" if dev.type == "cuda" else "float32"


@contextmanager
def run_precision(model_id: str, dtype: str, device: torch.device) -> Iterator[None]:
    """The matrix-product precision of one model's run, for its duration only: for ``tf32``, TF32 in
    CUDA's float32 matrix products and cuDNN's convolutions (``torch.backends.cuda.matmul.allow_tf32``,
    ``torch.backends.cudnn.allow_tf32``), each flag restored to its value before when the run ends;
    off a CUDA device a one-line warning that the run is a float32 run. Any other dtype changes nothing."""
    if dtype != "tf32":
        yield
        return
    import torch

    if matmul_precision(dtype, device) == "float32":
        where = "a CPU" if device.type == "cpu" else device.type
        log.warning(
            "%s: matrix products on %s are float32 with tf32: this run's numbers are those of a float32 run",
            model_id,
            where,
        )
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def load_tokenizer(source: ModelSource | str) -> Any:
    """The tokenizer of a model source (:class:`verbeval.core.model_sources.source.ModelSource`; a
    bare id or folder is one without revision, GGUF file or pin)."""
    from transformers import AutoTokenizer

    source = ModelSource.of(source)
    source.check_local(need_config=False, what="tokenizer for model")
    where, extra = source.resolve()
    if source.file:
        from verbeval.core.model_sources.gguf import load_kwargs
        from verbeval.core.model_sources.gguf_cache import has_tokenizer

        if not has_tokenizer(where):  # a tokenizer that does not survive a save: from the GGUF file
            where, name = source.gguf_location()
            extra = load_kwargs(name)
    try:
        tok = AutoTokenizer.from_pretrained(where, **extra)
    except (OSError, ValueError) as exc:  # transformers raises OSError for unknown ids/paths
        if source.file:
            from verbeval.core.model_sources.gguf import unreadable

            raise unreadable(exc, source.id, source.file) from None
        raise VerbevalError(f"cannot load tokenizer for model {source.id!r}: {str(exc).splitlines()[0]}") from exc
    with contextlib.suppress(TypeError):  # a tokenizer that cannot be weakly referenced is never reused
        _AS_LOADED[tok] = tokenizer_state(tok)
    return tok


#: each tokenizer :func:`load_tokenizer` returned -> its :func:`tokenizer_state` as loaded
_AS_LOADED: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def tokenizer_state(tok: Any) -> tuple[Any, ...]:
    """What of a loaded tokenizer a step could change in place (its special tokens, padding and
    truncation settings, size, and its backend's padding and truncation): a tokenizer reused for
    another model (:func:`model_identity`'s ``tokenizer_of``) must still have the state it was loaded
    with."""
    backend = getattr(tok, "backend_tokenizer", None)
    return (
        type(tok),
        repr(getattr(tok, "special_tokens_map", None)),
        repr(getattr(tok, "added_tokens_decoder", None)),
        getattr(tok, "padding_side", None),
        getattr(tok, "truncation_side", None),
        getattr(tok, "model_max_length", None),
        len(tok),
        None if backend is None else repr(backend.padding),
        None if backend is None else repr(backend.truncation),
    )


def reusable_tokenizer(tok: Any) -> bool:
    """Whether ``tok`` was loaded by :func:`load_tokenizer` and still has the state it was loaded with
    (:func:`tokenizer_state`)."""
    try:
        loaded = _AS_LOADED.get(tok)
    except TypeError:
        return False
    return loaded is not None and loaded == tokenizer_state(tok)


def load_config(source: ModelSource | str) -> Any:
    """The config of a model source (a GGUF model's: its cached folder's config.json)."""
    from transformers import AutoConfig

    source = ModelSource.of(source)
    source.check_local()
    where, extra = source.resolve()
    try:
        return AutoConfig.from_pretrained(where, **extra)
    except (OSError, ValueError) as exc:
        if source.file:
            from verbeval.core.model_sources.gguf import unreadable

            raise unreadable(exc, source.id, source.file) from None
        raise VerbevalError(f"cannot load config for model {source.id!r}: {str(exc).splitlines()[0]}") from exc


def load_errors() -> tuple[type[BaseException], ...]:
    """What transformers raises for a checkpoint it cannot read: OSError (unknown id or path),
    ValueError (bad config, unsupported GGUF), safetensors' SafetensorError (a damaged weights file)."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - transformers brings safetensors
        return (OSError, ValueError)
    return (OSError, ValueError, SafetensorError)


def _damaged_safetensors(model_id: str) -> list[str]:
    """The safetensors files of a local model folder whose header cannot be read."""
    from safetensors import SafetensorError, safe_open

    bad = []
    folder = Path(ModelRef(model_id).location)
    for f in sorted(folder.glob("*.safetensors")) if folder.is_dir() else []:
        try:
            with safe_open(str(f), "pt"):
                pass
        except (SafetensorError, OSError):
            bad.append(str(f))
    return bad


def load_failure(model_id: str, exc: BaseException, what: str = "model") -> VerbevalError:
    """The one-line error of a model transformers could not load; a damaged safetensors file is
    named, with the fix."""
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    if type(exc).__name__ == "SafetensorError":
        files = _damaged_safetensors(model_id)
        where = f" ({', '.join(files)})" if files else ""
        return VerbevalError(
            f"cannot load {what} {model_id!r}: damaged safetensors weights{where}: {first}; "
            "download or save the model again"
        )
    return VerbevalError(f"cannot load {what} {model_id!r}: {first}")


def detect_kind(config: Any) -> Kind:
    """Masked or causal, from ``config.architectures`` (e.g. BertForMaskedLM, GPT2LMHeadModel)."""
    archs = list(getattr(config, "architectures", None) or [])
    if any(a.endswith("ForMaskedLM") for a in archs):
        return "masked"
    if any(a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in archs):
        return "causal"
    raise VerbevalError(
        f"cannot tell whether model type {getattr(config, 'model_type', '?')!r} (architectures {archs}) is "
        "masked or causal: set `kind: masked` or `kind: causal` for it in the config"
    )


def adds_bos(tokenizer: Any) -> bool:
    """True when the tokenizer itself starts every encoded text with its BOS token, False when it
    does not: the rule causal contexts follow unless the config sets ``prepend_bos``.

    It is lm-evaluation-harness's default (``HFLM(add_bos_token=None)`` encodes with the
    tokenizer's own special tokens). Per family (``docs/models.md``): Llama 2 / Mistral
    SentencePiece adds ``<s>``, so True; GPT-2 (as in the paper's released code), GPT-NeoX /
    Pythia / OLMo-1 (a BOS token exists, ``<|endoftext|>``, but is not added) and OLMo-2 dolma2
    (no BOS token) False.
    """
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    ids = tokenizer("a", add_special_tokens=True)["input_ids"]
    return bool(ids) and ids[0] == bos


def is_cased(tokenizer: Any) -> bool:
    """True when the tokenizer distinguishes 'The' from 'the' (uncased BERT lower-cases input)."""
    a = tokenizer("The", add_special_tokens=False)["input_ids"]
    b = tokenizer("the", add_special_tokens=False)["input_ids"]
    return bool(a != b)


def model_revision(source: ModelSource, config: Any) -> str:
    """The version recorded in shards: for a local model its :func:`model_fingerprint` (a content
    hash, computed once and cached); for a hub model the commit hash when known."""
    if source.ref.is_dir:
        return model_fingerprint(source)
    if source.file:  # the file's snapshot folder in the Hugging Face cache is named by its commit
        where = replace(source, pin=None).gguf_location()[0]  # the file was checked against its pin by the load
        return f"{Path(where).name}/{source.file}"
    commit = getattr(config, "_commit_hash", None)
    return str(commit or source.revision or "unknown")


def model_fingerprint(source: ModelSource | str) -> str:
    """An identifier of the version of a model source (its pin aside), used to invalidate shards when
    the model changes.

    * Local GGUF file: ``gguf-sha256:<sha256 of the file>`` (for a pip model the same value as its
      pinned sha256).
    * Local directory: ``local-sha256:<sha256 over its files' names and content hashes>``.
    * Hub id: ``hub:<commit>`` the local Hugging Face cache resolves ``revision`` (default ``main``)
      to, when the model is cached, else ``hub:<revision>`` (pin a commit in the config to be
      exact); with a GGUF file ``hub:<commit>/<file>``.

    Local hashes are content hashes computed once and cached by (path, size, mtime, inode, ctime)
    (:mod:`verbeval.core.model_sources.fingerprint`): a copy with preserved times changes the
    fingerprint, a ``touch`` does not. They read every byte of the model the first time: the jobs
    that load it compute them; the plan uses :func:`model_plan_version`.
    """
    from verbeval.core.model_sources.fingerprint import dir_sha256, file_sha256

    source = ModelSource.of(source)
    p = Path(source.ref.location)
    if p.is_dir():
        if source.file:
            return "gguf-sha256:" + file_sha256(p / source.file)
        return "local-sha256:" + dir_sha256(p)
    rev = source.revision or "main"
    suffix = f"/{source.file}" if source.file else ""
    if re.fullmatch(r"[0-9a-f]{40}", rev):
        return f"hub:{rev}{suffix}"
    try:
        from huggingface_hub.constants import HF_HUB_CACHE

        ref = Path(HF_HUB_CACHE) / ("models--" + source.id.replace("/", "--")) / "refs" / rev
        if ref.is_file():
            return f"hub:{ref.read_text().strip()}{suffix}"
    except ImportError:  # pragma: no cover - transformers always brings huggingface_hub
        pass
    return f"hub:{rev}{suffix}"


def model_plan_version(source: ModelSource | str) -> str:
    """What the plan knows a model's version by (a rerun trigger of its jobs, recorded in no output),
    read without a byte of its weights.

    * Local directory: ``local-stat:<sha256 over its files' names, sizes, mtimes, inodes and ctimes>``;
      with a GGUF file, ``gguf-stat:<the same of that file>``
      (:func:`verbeval.core.model_sources.fingerprint.dir_stat_sha256`). A checkpoint copied over
      it with preserved times, or rewritten in place, changes it; so does a ``touch`` (its jobs then
      run again and find the same content hash, :func:`model_fingerprint`, in their shards).
    * Hub id: :func:`model_fingerprint` (the commit, read from the Hugging Face cache's refs).
    """
    from verbeval.core.model_sources.fingerprint import dir_stat_sha256, file_stat_sha256

    source = ModelSource.of(source)
    p = Path(source.ref.location)
    if p.is_dir():
        if source.file:
            return "gguf-stat:" + file_stat_sha256(p / source.file)
        return "local-stat:" + dir_stat_sha256(p)
    return model_fingerprint(source)


@dataclass(frozen=True)
class ModelIdentity:
    """What identifies a model's shards without its weights: the fields of a :class:`LoadedModel`
    that shard keys and shard metadata are computed from (its tokenizer, resolved kind, case, dtype,
    version and tokenizer content key). :func:`model_identity` reads it from the tokenizer and the
    config alone; a loaded model's is :attr:`LoadedModel.identity`."""

    model_id: str
    tokenizer: Any
    kind: Kind
    cased: bool
    dtype: str
    revision: str
    #: the content key of its tokenizer files (:func:`verbeval.core.warm.tokenizer_files_key`), or None
    tokenizer_key: str | None = None

    def loaded(self, model: Any, device: Any, device_map: dict[str, Any] | None = None) -> LoadedModel:
        """The :class:`LoadedModel` of this identity with its built ``model`` on ``device`` (the
        inverse of :attr:`LoadedModel.identity`)."""
        return LoadedModel(
            self.model_id,
            model,
            self.tokenizer,
            self.kind,
            self.cased,
            device,
            self.dtype,
            self.revision,
            device_map,
            self.tokenizer_key,
        )


def _identity(
    source: ModelSource,
    tokenizer: Any,
    config: Any,
    kind: Kind,
    dtype: str,
    tokenizer_key: str | None = None,
    cased: bool | None = None,
) -> ModelIdentity:
    """The identity of ``source`` from its tokenizer and config (``kind`` resolved); ``tokenizer_key``
    and ``cased`` when already known (else computed)."""
    from verbeval.core.warm import tokenizer_files_key

    return ModelIdentity(
        source.id,
        tokenizer,
        kind,
        is_cased(tokenizer) if cased is None else cased,
        dtype,
        model_revision(source, config),
        tokenizer_files_key(source) if tokenizer_key is None else tokenizer_key,
    )


def model_identity(
    source: ModelSource | str,
    *,
    kind: str = "auto",
    dtype: str = "float32",
    tokenizer_of: LoadedModel | ModelIdentity | None = None,
) -> ModelIdentity:
    """The identity of a model source without loading its weights: its tokenizer and config are read
    (``kind`` ``auto`` is detected from the config). Not for a GGUF file, whose config and kind come
    with the load (:func:`load_model`).

    ``tokenizer_of``: a model built from the same ``config.json`` (the caller knows: the weight swap's
    equal blueprints, :mod:`verbeval.core.weight_swap`) whose tokenizer may be reused instead of loading
    this source's again: when both tokenizers' files have the same content
    (:func:`verbeval.core.warm.tokenizer_files_key`, not None) and that tokenizer still has the state
    :func:`load_tokenizer` gave it (:func:`reusable_tokenizer`). Otherwise the tokenizer is loaded."""
    from verbeval.core.warm import tokenizer_files_key

    source = ModelSource.of(source)
    tok_key = tokenizer_files_key(source)
    tok, cased = None, None
    if tokenizer_of is not None and tok_key is not None and tok_key == tokenizer_of.tokenizer_key:
        if reusable_tokenizer(tokenizer_of.tokenizer):
            tok, cased = tokenizer_of.tokenizer, tokenizer_of.cased
        else:
            log.info(
                "%s: the tokenizer of %s was changed since its load: loaded again", source.id, tokenizer_of.model_id
            )
    if tok is None:
        tok = load_tokenizer(source)
    cfg = load_config(source)
    resolved: Kind = detect_kind(cfg) if kind == "auto" else kind  # type: ignore[assignment]
    return _identity(source, tok, cfg, resolved, dtype, tok_key, cased)


@dataclass
class LoadedModel:
    model_id: str
    model: torch.nn.Module
    tokenizer: Any
    kind: Kind
    cased: bool
    device: torch.device
    dtype: str
    revision: str
    #: accelerate's placement of the modules ({module: device}) when loaded with a device map, else None
    device_map: dict[str, Any] | None = None
    #: the content key of its tokenizer files (:func:`verbeval.core.warm.tokenizer_files_key`), or None:
    #: work that depends on the tokenizer alone is shared with every model of the same key in a process
    tokenizer_key: str | None = None

    @property
    def mask_token(self) -> str | None:
        return getattr(self.tokenizer, "mask_token", None)

    @property
    def identity(self) -> ModelIdentity:
        """What identifies its shards (:class:`ModelIdentity`): the weight-free path computes the same."""
        return ModelIdentity(
            self.model_id, self.tokenizer, self.kind, self.cased, self.dtype, self.revision, self.tokenizer_key
        )


def embedding_rows(model: Any) -> int | None:
    """The rows of a model's input embeddings (the token ids it can read: 0 to rows - 1), None for
    a model without any (a tokenizer-only stand-in, a module of its own making)."""
    get = getattr(model, "get_input_embeddings", None)
    if get is None:
        return None
    try:
        rows = getattr(get(), "num_embeddings", None)
    except (AttributeError, NotImplementedError):
        return None
    return rows if isinstance(rows, int) else None


def check_token_ids(lm: LoadedModel, max_id: int, what: str) -> None:
    """VerbevalError, one line naming both sizes, when ``max_id`` (the largest token id of ``what``
    that the model is fed) is not below its input embeddings' rows (:func:`embedding_rows`): a
    tokenizer larger than the model's vocabulary, found before the forward pass that would index
    past the embeddings (torch's ``IndexError``, a device-side assert on CUDA)."""
    rows = embedding_rows(lm.model)
    if rows is None or max_id < rows:
        return
    raise VerbevalError(
        f"model {lm.model_id!r}: its tokenizer has {len(lm.tokenizer)} tokens but its input embeddings only {rows} "
        f"rows: {what} include token id {max_id}; use the model's own tokenizer (or resize the embeddings: "
        "model.resize_token_embeddings(len(tokenizer)))"
    )


def load_model(
    source: ModelSource | str,
    *,
    kind: str = "auto",
    dtype: str = "float32",
    device: str = "auto",
    device_map: DeviceMap = None,
) -> LoadedModel:
    """Load tokenizer and LM head model of a model source
    (:class:`verbeval.core.model_sources.source.ModelSource`; a bare id or folder is one without
    revision, GGUF file or pin), in eval mode on the chosen device.

    With a GGUF file the model is that file in the local folder or hub repository
    (:mod:`verbeval.core.model_sources.gguf`): always a causal LM, dequantised by transformers once
    and read from its cached folder (:meth:`ModelSource.gguf_folder`), then cast to ``dtype``. The
    source's pin (sha256) pins that file: a file with another sha256 is refused before anything reads
    it (:meth:`ModelSource.gguf_location`; a pip model's file is checked against the sha256 recorded
    beside it even without).

    With a ``device_map`` (:func:`check_device_map`; needs the ``accelerate`` package) the model is
    split across devices by accelerate instead, e.g. ``auto`` over every visible GPU for a model
    larger than one; ``device`` is then ignored and :attr:`LoadedModel.device` is the device of the
    input embeddings (where inputs go). Modules mapped to ``disk`` are offloaded to a temporary
    folder removed with the model.
    """
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    source = ModelSource.of(source)
    model_id, gguf = source.id, bool(source.file)
    torch_dtype(dtype)  # an unknown name fails before anything is loaded
    check_device_map(device_map)
    if kind not in ("auto", "masked", "causal"):
        raise VerbevalError(f"unknown model kind {kind!r}; use auto, masked or causal")
    if gguf:
        from verbeval.core.model_sources.gguf import check_config, check_kind

        check_kind(model_id, kind)
    where, source_kwargs = source.resolve()
    cfg = load_config(source)  # a GGUF model: the cached folder's config.json
    if gguf:
        check_config(cfg, model_id)
    resolved: Kind = "causal" if gguf else detect_kind(cfg) if kind == "auto" else kind  # type: ignore[assignment]
    tok = load_tokenizer(source)
    cls = AutoModelForMaskedLM if resolved == "masked" else AutoModelForCausalLM
    extra: dict[str, Any] = {}
    offload = None
    if device_map is not None:
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise VerbevalError(
                f"model {model_id!r}: a device_map needs the accelerate package (pip install 'verbeval[gpu]')"
            ) from None
        import tempfile

        offload = tempfile.mkdtemp(prefix="verbeval-offload-")
        extra = {"device_map": device_map, "offload_folder": offload}
    else:
        dev = resolve_device(device)
    try:
        if gguf:  # the config already read
            extra["config"] = cfg
        model, info = cls.from_pretrained(
            where, dtype=torch_dtype(dtype), output_loading_info=True, **source_kwargs, **extra
        )
        # a tensor the checkpoint lacks would be scored newly initialised: refused (core.load_report)
        check_load_report(model_id if not gguf else f"{model_id} ({source.file})", model, info)
        if gguf and device_map is None and model.dtype != torch_dtype(dtype):
            model = model.to(torch_dtype(dtype))  # GGUF weights may be dequantised to float32 regardless
    except (*load_errors(), NotImplementedError, RuntimeError, VerbevalError) as exc:
        if offload is not None:
            shutil.rmtree(offload, ignore_errors=True)
        if isinstance(exc, VerbevalError):
            raise
        if isinstance(exc, (NotImplementedError, RuntimeError)):
            from verbeval.core.model_sources.gguf import unreadable, unreadable_errors

            if not (source.file and unreadable_errors(exc)):
                raise  # not a GGUF file transformers cannot read (e.g. out of memory): as it is
            raise unreadable(exc, model_id, source.file) from None
        raise load_failure(model_id, exc) from None
    placed = None
    if device_map is None:
        model.eval().to(dev)
    else:
        model.eval()  # accelerate placed (and hooked) every module: moving the model would break that
        weakref.finalize(model, shutil.rmtree, offload, True)
        placed = dict(getattr(model, "hf_device_map", None) or {})
        dev = input_device(model)
        log.info("%s: device_map %s -> %s; inputs on %s", model_id, device_map, placed, dev)
    if resolved == "masked" and tok.mask_token is None:
        raise VerbevalError(f"model {model_id!r} is masked but its tokenizer has no mask token")
    return _identity(source, tok, cfg, resolved, dtype).loaded(model, dev, placed)

"""Loading Hugging Face language models and tokenizers, by hub id or local path.

A model is *masked* (BERT, RoBERTa: the verb position is a mask token) or *causal* (GPT-2 and any
``*ForCausalLM``: the verb is the next token after the left context). The kind is detected from the
model config's ``architectures`` and can be forced with ``kind``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from verbeval.core.errors import VerbevalError
from verbeval.core.io import describe_json_error
from verbeval.core.provenance import RANDOM_INIT_MARKER

if TYPE_CHECKING:  # torch is imported by the functions that need it: start-up of model-free commands stays cheap
    import torch

log = logging.getLogger(__name__)

Kind = Literal["masked", "causal"]
#: dtype names accepted for a model's weights (config ``dtype``, ``--dtype``)
DTYPES = ("float32", "float16", "bfloat16")


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a name in :data:`DTYPES`."""
    import torch

    if name not in DTYPES:
        raise VerbevalError(f"unknown dtype {name!r}; choose one of {sorted(DTYPES)}")
    return getattr(torch, name)


PATH_PREFIXES = ("/", "./", "../", "~")


def written_as_path(model_id: str) -> bool:
    """True when ``model_id`` is written as a path (absolute, ``./``, ``../`` or ``~``), not a hub id."""
    return model_id.startswith(PATH_PREFIXES)


def meant_as_path(model_id: str) -> bool:
    """True when ``model_id`` is meant as a local directory rather than a hub id.

    A hub id is ``NAME`` or ``ORG/NAME``. An id is read as a local path when it:

    * is written as a path (:func:`written_as_path`: ``/``, ``./``, ``../``, ``~``);
    * names an existing directory;
    * has more than one ``/`` (no hub id does);
    * is ``A/B`` where ``A`` is an existing local directory (relative to the working directory, i.e.
      the workflow's directory): ``models/tiny-gpt2`` with a ``models/`` folder here, the style of
      ``.test/config/ci.yaml``.

    Anything else is a hub id. Unlike :func:`model_name`, this depends on the file system; it only
    decides whether a missing directory is an error, never what a model is named.
    """
    mid = model_id.rstrip("/")
    if written_as_path(mid) or Path(resolve_id(mid)).is_dir():
        return True
    parts = mid.split("/")
    return len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())


def local_model_problem(model_id: str, need_config: bool = True, gguf_file: str | None = None) -> str | None:
    """Why the local model ``model_id`` cannot be loaded, or None (also for hub ids).

    A path (:func:`meant_as_path`) that does not exist, that is not a directory, a directory
    without ``config.json`` (with ``need_config``), or, with ``gguf_file``, a directory without that
    GGUF file (a GGUF file holds its own config and tokenizer).
    """
    p = Path(resolve_id(model_id))
    if p.is_dir():
        if gguf_file:
            return None if (p / gguf_file).is_file() else f"local model directory {model_id} has no GGUF file {gguf_file}"
        if need_config and not (p / "config.json").is_file():
            ggufs = sorted(f.name for f in p.glob("*.gguf"))
            if ggufs:
                return (f"local model directory {model_id} has no config.json but holds GGUF file(s) "
                        f"{', '.join(ggufs[:3])}: list it under models: with gguf_file: <one of them> (docs/models.md); "
                        "simverb.models and veridicality.models take only save_pretrained folders and hub ids")
            return (f"local model directory {model_id} has no config.json "
                    "(not a model saved with save_pretrained)")
        return None
    if not meant_as_path(model_id):
        return None
    if p.exists():
        return f"local path {model_id} is not a directory"
    hint = ""
    if not written_as_path(model_id):
        first = model_id.split("/")[0]
        hint = (f" (read as a path because ./{first} is a local folder; a hub id is NAME or ORG/NAME)"
                if model_id.count("/") == 1 else " (read as a path: a hub id has at most one '/')")
    return f"local path {model_id} does not exist{hint}"


def check_local_model(model_id: str, need_config: bool = True, what: str = "model",
                      gguf_file: str | None = None) -> None:
    """Raise :class:`VerbevalError` when :func:`local_model_problem` finds one."""
    problem = local_model_problem(model_id, need_config, gguf_file)
    if problem:
        raise VerbevalError(f"cannot load {what} {model_id!r}: {problem}")


def model_name(model_id: str) -> str:
    """File-system friendly name of a model, used in result paths.

    A path written as a path (absolute, or starting with ``./``, ``../`` or ``~``) gives its
    basename; anything else is a hub id, ``org/model`` -> ``org--model``. Set ``name:`` in the config
    to choose another. The result does not depend on whether the path exists.
    """
    mid = model_id.rstrip("/")
    if written_as_path(mid):
        base = Path(mid).name
    else:
        base = mid.replace("/", "--")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)


def resolve_device(preference: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available (honouring CUDA_VISIBLE_DEVICES), else CPU."""
    import torch

    if preference == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(preference)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise VerbevalError(f"device {preference!r} requested but CUDA is not available")
    return dev


def describe_device(device: torch.device) -> str:
    import torch

    if device.type == "cuda":
        idx = device.index if device.index is not None else torch.cuda.current_device()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "<all>")
        return f"cuda:{idx} ({torch.cuda.get_device_name(idx)}; CUDA_VISIBLE_DEVICES={visible})"
    return f"cpu ({torch.get_num_threads()} threads)"


#: device_map strategies of accelerate (config ``device_map``, ``--device-map``); a mapping of module
#: names to devices (GPU index, ``cpu``, ``cuda:N`` or ``disk``) is accepted too
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")

DeviceMap = str | dict[str, int | str] | None


def check_device_map(device_map: Any, where: str = "device_map") -> DeviceMap:
    """``device_map`` if it is None, a strategy in :data:`DEVICE_MAP_STRATEGIES` or a non-empty
    mapping {module name: GPU index, ``cpu``, ``cuda[:N]``, ``mps`` or ``disk``}; else VerbevalError."""
    if device_map is None or device_map in DEVICE_MAP_STRATEGIES:
        return device_map
    if isinstance(device_map, dict) and device_map:
        for module, dev in device_map.items():
            ok = (isinstance(dev, int) and not isinstance(dev, bool) and dev >= 0) or (
                isinstance(dev, str) and re.fullmatch(r"cpu|disk|mps|cuda(:\d+)?", dev) is not None)
            if not isinstance(module, str) or not ok:
                raise VerbevalError(f"{where}: module {module!r} -> {dev!r}: a device is a GPU index, cpu, "
                                    "cuda:N, mps or disk")
        return device_map
    raise VerbevalError(f"{where}: {device_map!r} is neither one of {list(DEVICE_MAP_STRATEGIES)} nor a "
                        "non-empty mapping of module names to devices")


def parse_device_map(text: str | None) -> DeviceMap:
    """``--device-map``: empty or ``none`` = no map; a strategy name; or a JSON object."""
    if text is None or text.strip().lower() in ("", "none", "null"):
        return None
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise VerbevalError(f"--device-map: invalid JSON ({describe_json_error(exc, 'character')})") from None
        return check_device_map(value, "--device-map")
    return check_device_map(text, "--device-map")


def input_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go: the device its input embeddings run on (with a device map whose
    embeddings are offloaded, accelerate's execution device for them)."""
    import torch

    emb = model.get_input_embeddings()
    dev = getattr(getattr(emb, "_hf_hook", None), "execution_device", None)
    if dev is not None:
        return torch.device(dev) if not isinstance(dev, int) else torch.device("cuda", dev)
    return emb.weight.device


def resolve_id(model_id: str) -> str:
    """Expand ``~`` in a local path; hub ids are returned unchanged."""
    return os.path.expanduser(model_id) if model_id.startswith("~") else model_id


def gguf_location(model_id: str, gguf_file: str, revision: str | None = None,
                  sha256: str | None = None) -> tuple[str, str]:
    """(folder, file name) of a GGUF model for ``from_pretrained(folder, gguf_file=name)``: the local
    folder, or the hub repository's file in the Hugging Face cache (downloaded once).

    The file is checked against its pin first (:func:`verbeval.core.model_sources.pins.check_pinned`:
    ``sha256`` when given, else the sha256 recorded beside a pip model's file), then its header
    (:func:`verbeval.core.model_sources.gguf_header.check_gguf_header`): a file that is not the
    pinned one, or whose header states sizes the file does not hold, is never handed to transformers."""
    from verbeval.core.model_sources.gguf import require_gguf, resolve_file
    from verbeval.core.model_sources.gguf_header import check_gguf_header
    from verbeval.core.model_sources.pins import check_pinned

    require_gguf(model_id)
    path = resolve_file(resolve_id(model_id), gguf_file, revision, is_local(model_id))
    check_pinned(path, model_id, sha256)
    check_gguf_header(path, model_id)  # every size in it bounded by the file, before transformers reads it
    return str(path.parent), path.name


def _source(model_id: str, revision: str | None, gguf_file: str | None,
            sha256: str | None = None) -> tuple[str, dict[str, Any]]:
    """(what to pass to ``from_pretrained``, extra keyword arguments) of a model, once its header is
    checked: a GGUF file's by :func:`gguf_location`, a local folder's config.json by
    :func:`verbeval.core.model_sources.config_sizes.check_config_sizes` (sizes its weights do not
    have stop here, before transformers builds anything from them)."""
    if gguf_file:
        folder, name = gguf_location(model_id, gguf_file, revision, sha256)
        return folder, {"gguf_file": name}
    if is_local(model_id):
        from verbeval.core.model_sources.config_sizes import check_config_sizes

        check_config_sizes(resolve_id(model_id), model_id)
    return resolve_id(model_id), {"revision": revision}


def load_tokenizer(model_id: str, revision: str | None = None, gguf_file: str | None = None,
                   sha256: str | None = None) -> Any:
    """The model's tokenizer (``sha256``: the pin of its GGUF file, :func:`gguf_location`)."""
    from transformers import AutoTokenizer

    check_local_model(model_id, need_config=False, what="tokenizer for model", gguf_file=gguf_file)
    where, extra = _source(model_id, revision, gguf_file, sha256)
    try:
        return AutoTokenizer.from_pretrained(where, **extra)
    except (OSError, ValueError) as exc:  # transformers raises OSError for unknown ids/paths
        if gguf_file:
            from verbeval.core.model_sources.gguf import unreadable

            raise unreadable(exc, model_id, gguf_file) from None
        raise VerbevalError(f"cannot load tokenizer for model {model_id!r}: {str(exc).splitlines()[0]}") from exc


def load_config(model_id: str, revision: str | None = None, gguf_file: str | None = None,
                sha256: str | None = None) -> Any:
    """The model's config (``sha256``: the pin of its GGUF file, :func:`gguf_location`)."""
    from transformers import AutoConfig

    check_local_model(model_id, gguf_file=gguf_file)
    where, extra = _source(model_id, revision, gguf_file, sha256)
    try:
        return AutoConfig.from_pretrained(where, **extra)
    except (OSError, ValueError) as exc:
        if gguf_file:
            from verbeval.core.model_sources.gguf import unreadable

            raise unreadable(exc, model_id, gguf_file) from None
        raise VerbevalError(f"cannot load config for model {model_id!r}: {str(exc).splitlines()[0]}") from exc


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
    folder = Path(resolve_id(model_id))
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
        return VerbevalError(f"cannot load {what} {model_id!r}: damaged safetensors weights{where}: {first}; "
                             "download or save the model again")
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


def model_revision(model_id: str, config: Any, revision: str | None, gguf_file: str | None = None) -> str:
    """The version recorded in shards: for a local model its :func:`model_fingerprint` (a content
    hash, computed once and cached); for a hub model the commit hash when known."""
    if is_local(model_id):
        return model_fingerprint(model_id, revision, gguf_file)
    if gguf_file:  # the file's snapshot folder in the Hugging Face cache is named by its commit
        return f"{Path(gguf_location(model_id, gguf_file, revision)[0]).name}/{gguf_file}"
    commit = getattr(config, "_commit_hash", None)
    return str(commit or revision or "unknown")


def is_local(model_id: str) -> bool:
    """True when ``model_id`` names an existing local directory (rather than a hub id)."""
    return Path(resolve_id(model_id)).is_dir()


def model_fingerprint(model_id: str, revision: str | None = None, gguf_file: str | None = None) -> str:
    """An identifier of the model version, used to invalidate shards when the model changes.

    * Local GGUF file: ``gguf-sha256:<sha256 of the file>`` (for a pip model the same value as its
      pinned sha256).
    * Local directory: ``local-sha256:<sha256 over its files' names and content hashes>``.
    * Hub id: ``hub:<commit>`` the local Hugging Face cache resolves ``revision`` (default ``main``)
      to, when the model is cached, else ``hub:<revision>`` (pin a commit in the config to be
      exact); with a GGUF file ``hub:<commit>/<gguf_file>``.

    Local hashes are content hashes computed once and cached by (path, size, mtime, inode, ctime)
    (:mod:`verbeval.core.model_sources.fingerprint`): a copy with preserved times changes the
    fingerprint, a ``touch`` does not.
    """
    from verbeval.core.model_sources.fingerprint import dir_sha256, file_sha256

    p = Path(resolve_id(model_id))
    if p.is_dir():
        if gguf_file:
            return "gguf-sha256:" + file_sha256(p / gguf_file)
        return "local-sha256:" + dir_sha256(p)
    rev = revision or "main"
    suffix = f"/{gguf_file}" if gguf_file else ""
    if re.fullmatch(r"[0-9a-f]{40}", rev):
        return f"hub:{rev}{suffix}"
    try:
        from huggingface_hub.constants import HF_HUB_CACHE

        ref = Path(HF_HUB_CACHE) / ("models--" + model_id.replace("/", "--")) / "refs" / rev
        if ref.is_file():
            return f"hub:{ref.read_text().strip()}{suffix}"
    except ImportError:  # pragma: no cover - transformers always brings huggingface_hub
        pass
    return f"hub:{rev}{suffix}"


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

    @property
    def mask_token(self) -> str | None:
        return getattr(self.tokenizer, "mask_token", None)


def load_model(
    model_id: str,
    *,
    revision: str | None = None,
    kind: str = "auto",
    dtype: str = "float32",
    device: str = "auto",
    device_map: DeviceMap = None,
    gguf_file: str | None = None,
    sha256: str | None = None,
) -> LoadedModel:
    """Load tokenizer and LM head model, in eval mode on the chosen device.

    With ``gguf_file`` the model is that GGUF file in the local folder or hub repository
    ``model_id`` (:mod:`verbeval.core.model_sources.gguf`): always a causal LM, dequantised by
    transformers, then cast to ``dtype``. ``sha256`` pins that file: a file with another sha256 is
    refused before anything reads it (:func:`gguf_location`; a pip model's file is checked against
    the sha256 recorded beside it even without).

    With a ``device_map`` (:func:`check_device_map`; needs the ``accelerate`` package) the model is
    split across devices by accelerate instead, e.g. ``auto`` over every visible GPU for a model
    larger than one; ``device`` is then ignored and :attr:`LoadedModel.device` is the device of the
    input embeddings (where inputs go). Modules mapped to ``disk`` are offloaded to a temporary
    folder removed with the model.
    """
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    torch_dtype(dtype)  # an unknown name fails before anything is loaded
    check_device_map(device_map)
    if kind not in ("auto", "masked", "causal"):
        raise VerbevalError(f"unknown model kind {kind!r}; use auto, masked or causal")
    if gguf_file:
        from verbeval.core.model_sources.gguf import check_config, check_kind

        check_kind(model_id, kind)
    where, source_kwargs = _source(model_id, revision, gguf_file, sha256)
    cfg = load_config(model_id, revision, gguf_file, sha256)
    if gguf_file:
        check_config(cfg, model_id)
    resolved: Kind = "causal" if gguf_file else detect_kind(cfg) if kind == "auto" else kind  # type: ignore[assignment]
    tok = load_tokenizer(model_id, revision, gguf_file, sha256)
    cls = AutoModelForMaskedLM if resolved == "masked" else AutoModelForCausalLM
    extra: dict[str, Any] = {}
    offload = None
    if device_map is not None:
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise VerbevalError(f"model {model_id!r}: a device_map needs the accelerate package "
                                "(pip install 'verbeval[gpu]')") from None
        import tempfile

        offload = tempfile.mkdtemp(prefix="verbeval-offload-")
        extra = {"device_map": device_map, "offload_folder": offload}
    else:
        dev = resolve_device(device)
    try:
        if gguf_file:  # the config already parsed: the GGUF file is not read a third time for it
            extra["config"] = cfg
        model = cls.from_pretrained(where, dtype=torch_dtype(dtype), **source_kwargs, **extra)
        if gguf_file and device_map is None and model.dtype != torch_dtype(dtype):
            model = model.to(torch_dtype(dtype))  # GGUF weights may be dequantised to float32 regardless
    except (*load_errors(), NotImplementedError, RuntimeError) as exc:
        if offload is not None:
            shutil.rmtree(offload, ignore_errors=True)
        if isinstance(exc, (NotImplementedError, RuntimeError)):
            from verbeval.core.model_sources.gguf import unreadable, unreadable_errors

            if not (gguf_file and unreadable_errors(exc)):
                raise  # not a GGUF file transformers cannot read (e.g. out of memory): as it is
            raise unreadable(exc, model_id, gguf_file) from None
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
    return LoadedModel(model_id, model, tok, resolved, is_cased(tok), dev, dtype,
                       model_revision(model_id, cfg, revision, gguf_file), placed)


TINY_ARCHS = ("bert", "roberta", "gpt2", "bert-nli", "llama", "mistral", "gpt-neox", "olmo2")
#: the causal architectures of :data:`TINY_ARCHS` beyond GPT-2 and the tokenizer family each is meant for
#: (``docs/models.md``): Llama-2/Mistral on SentencePiece, Pythia/OLMo-1 on GPT-NeoX BPE, OLMo-2 on dolma2
TINY_DECODERS = {"llama": "mistral_v1_spm", "mistral": "mistral_v1_spm", "gpt-neox": "gpt_neox_olmo1",
                 "olmo2": "olmo2_dolma2"}
#: tiny architectures that are masked LMs / classifiers built on a masked-LM tokenizer
MASKED_TINY_ARCHS = ("bert", "roberta", "bert-nli")
#: label names of the tiny NLI classifier (deliberately not in MNLI order: consumers must map by name)
TINY_NLI_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}


def make_tiny_model(
    tokenizer_dir: str | Path,
    arch: str,
    out_dir: str | Path,
    *,
    seed: int = 0,
    layers: int = 2,
    hidden: int = 32,
    heads: int = 2,
) -> Path:
    """Build a tiny randomly initialised LM on a real tokenizer and save it with the tokenizer.

    ``bert-nli`` is a BERT sequence classifier with three labels named in ``id2label``
    (:data:`TINY_NLI_LABELS`), standing in for an MNLI model in the veridicality workflow.
    ``llama``, ``mistral``, ``gpt-neox`` and ``olmo2`` are the decoders of those families
    (:data:`TINY_DECODERS`; ``mistral`` with grouped-query attention, one key/value head), with
    the tokenizer's BOS, EOS and padding ids in their config. The numbers it produces are
    meaningless, but tokenisation, vocabulary size and data are real, which exercises the whole
    workflow at realistic cost without any download. The weights depend only on the arguments
    (seeded): a rebuild writes byte-identical files.
    """
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForMaskedLM,
        BertForSequenceClassification,
        GPT2Config,
        GPT2LMHeadModel,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    import torch

    if arch not in TINY_ARCHS:
        raise VerbevalError(f"unknown tiny architecture {arch!r}; choose one of {TINY_ARCHS}")
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    vocab = len(tok)
    torch.manual_seed(seed)
    model: torch.nn.Module
    if arch == "bert":
        model = BertForMaskedLM(BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                                           num_attention_heads=heads, intermediate_size=4 * hidden,
                                           max_position_embeddings=128))
    elif arch == "roberta":
        model = RobertaForMaskedLM(RobertaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                                                 num_attention_heads=heads, intermediate_size=4 * hidden,
                                                 max_position_embeddings=130, pad_token_id=tok.pad_token_id,
                                                 bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    elif arch == "bert-nli":
        model = BertForSequenceClassification(BertConfig(
            vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=4 * hidden, max_position_embeddings=512, num_labels=len(TINY_NLI_LABELS),
            id2label=dict(TINY_NLI_LABELS), label2id={v: k for k, v in TINY_NLI_LABELS.items()}))
    elif arch in TINY_DECODERS:
        model = _tiny_decoder(arch, tok, vocab, layers=layers, hidden=hidden, heads=heads)
    else:
        model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads,
                                           n_positions=128, bos_token_id=tok.bos_token_id,
                                           eos_token_id=tok.eos_token_id))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    _keep_tokenizer_class(Path(tokenizer_dir), out)
    (out / RANDOM_INIT_MARKER).write_text(json.dumps({"arch": arch, "seed": seed, "layers": layers,
                                                        "hidden": hidden, "tokenizer": Path(tokenizer_dir).name}))
    return out


def _keep_tokenizer_class(src: Path, out: Path) -> None:
    """Write the source folder's ``tokenizer_class`` back into the saved tokenizer_config.json.

    transformers 5 saves a tokenizer loaded as ``PreTrainedTokenizerFast`` as ``TokenizersBackend``,
    a name transformers 4 does not know; and without a class, AutoTokenizer would pick the model
    type's own (``LlamaTokenizer`` for mistral), which rewrites the SentencePiece set-up on load.
    """
    src_cfg, out_cfg = src / "tokenizer_config.json", out / "tokenizer_config.json"
    if not (src_cfg.is_file() and out_cfg.is_file()):
        return
    cls = json.loads(src_cfg.read_text(encoding="utf-8")).get("tokenizer_class")
    saved = json.loads(out_cfg.read_text(encoding="utf-8"))
    if cls and saved.get("tokenizer_class") != cls:
        saved["tokenizer_class"] = cls
        out_cfg.write_text(json.dumps(saved, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _tiny_decoder(arch: str, tok: Any, vocab: int, *, layers: int, hidden: int, heads: int) -> torch.nn.Module:
    """A tiny Llama, Mistral, GPT-NeoX or OLMo-2 causal LM (called after seeding torch)."""
    from transformers import (
        GPTNeoXConfig,
        GPTNeoXForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Olmo2Config,
        Olmo2ForCausalLM,
    )

    if hidden % heads or (hidden // heads) % 2:
        raise VerbevalError(f"--hidden {hidden} must be a multiple of 2 x {heads} heads (even rotary head size)")
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    common = {"vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": 4 * hidden, "max_position_embeddings": 512, **ids}
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**common, num_key_value_heads=heads))
    if arch == "mistral":
        return MistralForCausalLM(MistralConfig(**common, num_key_value_heads=1, sliding_window=None))
    if arch == "gpt-neox":
        return GPTNeoXForCausalLM(GPTNeoXConfig(**common))
    return Olmo2ForCausalLM(Olmo2Config(**common, num_key_value_heads=heads))

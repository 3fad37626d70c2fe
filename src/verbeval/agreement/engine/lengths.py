"""Contexts longer than a model can read, found from its tokenizer and config before the model loads.

A long custom pair used to pass ``templates`` and crash ``infer`` with a traceback from inside the
model (an index past the position embeddings). :func:`check_context_lengths` names the pair and the
limit instead, at the start of the model's inference job.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from verbeval.agreement.data.templates import render_context
from verbeval.core.errors import VerbevalError

if TYPE_CHECKING:
    from verbeval.core.model_sources.source import ModelSource

#: tokenizers without a known limit report a huge ``model_max_length`` (transformers' VERY_LARGE_INTEGER)
_NO_LIMIT = 10**9


def position_limit(config: Any, tokenizer: Any) -> int | None:
    """The most tokens the model reads in one sequence: the smaller of the config's position count
    (``max_position_embeddings``, GPT-2's ``n_positions``) and the tokenizer's ``model_max_length``
    (RoBERTa: 512 of 514 position embeddings), or None when neither is known."""
    limits = [getattr(config, name, None) for name in ("max_position_embeddings", "n_positions")]
    limits.append(getattr(tokenizer, "model_max_length", None))
    known = [int(x) for x in limits if isinstance(x, int) and 0 < x < _NO_LIMIT]
    return min(known) if known else None


def context_lengths(tokenizer: Any, rows: pd.DataFrame, *, kind: str, cased: bool, prepend_bos: bool) -> np.ndarray:
    """Token count of the sequence the model reads for each row (as
    :func:`verbeval.agreement.engine.encoding.encode_contexts` builds it: special tokens of a masked LM,
    BOS of a causal LM when prepended, an empty causal context as one token)."""
    masked = kind == "masked"
    texts = [
        render_context(
            left, right if masked else "", cased=cased, masked=masked, mask_token=getattr(tokenizer, "mask_token", None)
        )
        for left, right in zip(rows["left"], rows["right"])
    ]
    if not texts:
        return np.zeros(0, np.int64)
    ids = tokenizer(texts, add_special_tokens=masked)["input_ids"]
    n = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    if not masked:
        n = np.maximum(n + int(prepend_bos), 1)
    return n


def too_long(rows: pd.DataFrame, lengths: np.ndarray, limit: int, model_id: str, extra: int = 0) -> str | None:
    """One line naming the longest pair over ``limit`` (``extra``: tokens the scoring adds), else None."""
    over = np.flatnonzero(lengths + extra > limit)
    if not len(over):
        return None
    worst = over[np.argmax(lengths[over])]
    r = rows.iloc[worst]
    text = f"{r['left']} ___ {r['right']}".strip()
    return (
        f"model {model_id!r} reads at most {limit} positions, but {len(over)} context(s) are longer: the longest "
        f"({int(lengths[worst]) + extra} tokens) is group {r['group']!r}, {r['source']}:{r['line']} "
        f"({text[:80]!r}{'...' if len(text) > 80 else ''}): shorten or remove that pair"
    )


def check_context_lengths(
    source: ModelSource | str,
    kind: str,
    templates: pd.DataFrame,
    groups: Sequence[str],
    prepend_bos: bool | None,
    extra: int = 0,
    *,
    tokenizer: Any = None,
    config: Any = None,
) -> None:
    """Raise :class:`VerbevalError` when a context of ``groups`` is longer than the model reads
    (:func:`too_long`). Loads only the tokenizer and the config (unless given: a GGUF model is parsed
    once, by the model load); ``kind`` ``auto`` is detected. ``source``: the model's source, or its
    bare id (its name in messages)."""
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.models import adds_bos, detect_kind, is_cased, load_config, load_tokenizer

    source = ModelSource.of(source)
    tok = tokenizer if tokenizer is not None else load_tokenizer(source)
    cfg = config if config is not None else load_config(source)
    limit = position_limit(cfg, tok)
    if limit is None:
        return
    kind = detect_kind(cfg) if kind == "auto" else kind
    bos = kind == "causal" and (adds_bos(tok) if prepend_bos is None else bool(prepend_bos))
    rows = templates[templates["group"].isin(list(groups))]
    keys = ["left", "right"] if kind == "masked" else ["left"]
    rows = rows.drop_duplicates(keys).reset_index(drop=True)
    why = too_long(
        rows, context_lengths(tok, rows, kind=kind, cased=is_cased(tok), prepend_bos=bos), limit, source.id, extra
    )
    if why:
        raise VerbevalError(why)


def check_context_lengths_once(
    source: ModelSource,
    kind: str,
    templates: pd.DataFrame,
    templates_path: str,
    groups: Sequence[str],
    prepend_bos: bool | None,
    extra: int = 0,
) -> None:
    """:func:`check_context_lengths` of a model source that is not a GGUF file, done once per process
    for the same tokenizer files, config file and templates file (``templates_path``, whose table is
    ``templates``) and settings: a sweep's revisions share it (:mod:`verbeval.core.warm`)."""
    from verbeval.core.warm import file_key, frame_key, memo, tokenizer_files_key

    tok_key = tokenizer_files_key(source)
    config = f"{source.ref.location}/config.json"
    key = (
        None
        if tok_key is None or not os.path.isfile(config) or frame_key(templates_path) is None
        else (tok_key, file_key(config), frame_key(templates_path), kind, tuple(groups), prepend_bos, extra)
    )
    memo("context_lengths", key, lambda: check_context_lengths(source, kind, templates, groups, prepend_bos, extra))

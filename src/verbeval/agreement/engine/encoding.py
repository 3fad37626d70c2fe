"""Model input: each context rendered as the model reads it and encoded as token ids, with the
position of the token to predict (the tokenizer only; no torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verbeval.agreement.data.templates import render_context
from verbeval.core.errors import VerbevalError
from verbeval.core.models import LoadedModel, adds_bos

__all__ = ["Encoded", "encode_contexts"]


@dataclass
class Encoded:
    ids: list[list[int]]
    target: np.ndarray  # position of the predicted token in each sequence
    bos: bool = False  # whether a BOS token was prepended (causal LMs)


def encode_contexts(lm: LoadedModel, contexts: pd.DataFrame, prepend_bos: bool | None = None) -> Encoded:
    """Token ids and target position for each context.

    A causal context is encoded without special tokens, then BOS is prepended when
    ``prepend_bos`` says so (None: when the tokenizer adds it itself, :func:`verbeval.core.models.adds_bos`);
    an empty context becomes the BOS token, or EOS for a tokenizer without BOS. These are the ids
    lm-evaluation-harness scores a continuation after (``docs/models.md``).
    """
    tok = lm.tokenizer
    masked = lm.kind == "masked"
    texts = [
        render_context(left, right, cased=lm.cased, masked=masked, mask_token=lm.mask_token)
        for left, right in zip(contexts["left"], contexts["right"])
    ]
    ids: list[list[int]] = tok(texts, add_special_tokens=masked)["input_ids"] if texts else []
    if masked:
        mask_id = tok.mask_token_id
        target = np.empty(len(ids), dtype=np.int64)
        for i, seq in enumerate(ids):
            pos = [j for j, t in enumerate(seq) if t == mask_id]
            if len(pos) != 1:
                raise VerbevalError(f"context {texts[i]!r} encodes to {len(pos)} mask tokens (expected 1)")
            target[i] = pos[0]
    else:
        bos = tok.bos_token_id
        if prepend_bos is None:
            prepend_bos = adds_bos(tok)
        if prepend_bos:
            if bos is None:
                raise VerbevalError(f"prepend_bos requested but {lm.model_id!r} has no BOS token")
            ids = [[bos, *seq] for seq in ids]
        if any(len(seq) == 0 for seq in ids):
            # the verb is the first word: condition on BOS, else EOS (lm-evaluation-harness's prefix token)
            prefix = bos if bos is not None else tok.eos_token_id
            if prefix is None:
                raise VerbevalError(
                    f"a causal context is empty (the verb is the first word) and {lm.model_id!r} "
                    "has neither a BOS nor an EOS token to condition on"
                )
            ids = [seq or [prefix] for seq in ids]
        target = np.array([len(seq) - 1 for seq in ids], dtype=np.int64)
        return Encoded(ids, target, bool(prepend_bos))
    return Encoded(ids, target)

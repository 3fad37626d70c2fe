"""The predictions of a real NLI model (any Hugging Face sequence classifier fine-tuned on MNLI):
its labels mapped by *name* from ``id2label``, P(entailment), P(neutral), P(contradiction) per
(premise, hypothesis) pair, and the predictions table of both environments."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.source import ModelSource
from verbeval.veridicality.data import LABELS, long_frame
from verbeval.veridicality.steps import VERIDICALITY_PREDICT

# label name variants -> canonical name
_LABEL_ALIASES = {
    "entailment": "entailment",
    "entail": "entailment",
    "entailed": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
    "contradict": "contradiction",
    "contradictory": "contradiction",
    "not_entailment": "contradiction",
}


def label_index(config: Any) -> dict[str, int]:
    """{'entailment': i, 'neutral': j, 'contradiction': k} from ``config.id2label``, by label name
    (case-insensitive); positional names such as ``LABEL_0`` are refused."""
    id2label = getattr(config, "id2label", None) or {}
    found: dict[str, int] = {}
    for idx, name in id2label.items():
        key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
        if re.fullmatch(r"label_\d+", key):
            raise VerbevalError(
                f"model config id2label {dict(id2label)} has positional label names ({name!r}); the NLI labels "
                "must be named (entailment, neutral, contradiction) - refusing to guess their order"
            )
        canon = _LABEL_ALIASES.get(key)
        if canon is None:
            continue
        if canon in found:
            raise VerbevalError(f"model config id2label {dict(id2label)}: two labels map to {canon!r}")
        found[canon] = int(idx)
    missing = [lab for lab in LABELS if lab not in found]
    if missing:
        raise VerbevalError(
            f"model config id2label {dict(id2label)}: no label named {missing} "
            "(an NLI model fine-tuned on MNLI has entailment, neutral and contradiction)"
        )
    return found


def score_nli(
    model: Any,
    tokenizer: Any,
    premises: Sequence[str],
    hypotheses: Sequence[str],
    batch_size: int | None = None,
    device: Any = "cpu",
) -> pd.DataFrame:
    """P(entailment), P(neutral), P(contradiction) per (premise, hypothesis) pair, batched (``batch_size``
    None: ``veridicality.batch_size``'s default). Non-finite probabilities (NaN or inf weights) raise
    :class:`VerbevalError` naming the model and the first pair."""
    import torch

    batch_size = VERIDICALITY_PREDICT.default("batch_size") if batch_size is None else batch_size
    if len(premises) != len(hypotheses):
        raise VerbevalError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    idx = label_index(model.config)
    model.eval()
    rows: list[np.ndarray] = []
    with torch.inference_mode():
        for start in range(0, len(premises), batch_size):
            enc = tokenizer(
                list(premises[start : start + batch_size]),
                list(hypotheses[start : start + batch_size]),
                padding=True,
                truncation=True,
                return_tensors="pt",
            ).to(device)
            logits = model(**enc).logits.float()
            rows.append(torch.softmax(logits, dim=-1).cpu().numpy())
    probs = np.concatenate(rows) if rows else np.zeros((0, model.config.num_labels))
    bad = ~np.isfinite(probs).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        name = getattr(model.config, "_name_or_path", "") or "the NLI model"
        raise VerbevalError(
            f"{name}: {int(bad.sum())} of {len(probs)} premise/hypothesis pairs have non-finite NLI "
            f"probabilities (the first: {premises[first]!r} / {hypotheses[first]!r}); its weights "
            "or inputs hold NaN or inf. Nothing was written"
        )
    return pd.DataFrame({f"p_{lab}": probs[:, idx[lab]] for lab in LABELS})


def load_nli(source: ModelSource | str, device: str | None = None) -> tuple[Any, Any, Any]:
    """(model, tokenizer, device) of a Hugging Face NLI classifier (a model source, or a bare id or
    folder), in eval mode; its labels are checked by name at once (:func:`label_index`). ``device``
    None: ``inference.device``'s default."""
    from transformers import AutoModelForSequenceClassification

    from verbeval.core.devices import resolve_device
    from verbeval.core.load_report import check_load_report
    from verbeval.core.models import load_errors, load_failure, load_tokenizer

    source = ModelSource.of(source)
    source.check_local()
    dev = resolve_device(VERIDICALITY_PREDICT.default("device") if device is None else device)
    tok = load_tokenizer(source)
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            source.ref.location, revision=source.revision, output_loading_info=True
        )
    except load_errors() as exc:
        raise load_failure(source.id, exc, "NLI model") from None
    check_load_report(source.id, model, info, "NLI model")  # a random classifier head is refused
    label_index(model.config)
    return model.eval().to(dev), tok, dev


def model_predictions(
    data: pd.DataFrame, model: Any, tokenizer: Any, batch_size: int | None = None, device: Any = "cpu"
) -> pd.DataFrame:
    """The predictions table of a real NLI model on both environments."""
    hyp = data["complement"].tolist()
    probs = {
        "positive": score_nli(model, tokenizer, data["sentence"].tolist(), hyp, batch_size, device),
        "negative": score_nli(model, tokenizer, data["neg_sentence"].tolist(), hyp, batch_size, device),
    }
    return long_frame(data, probs)

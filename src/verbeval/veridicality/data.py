"""The Ross & Pavlick (2019) data: the released TSV read and validated, the verbs' signatures, and the
long predictions table (one row per item and environment) that every model's probabilities fill.

Every item is a sentence with a clause-embedding verb, its negation and the embedded complement.
A model is scored on (sentence, complement) in the *positive* environment and on (negated
sentence, complement) in the *negative* one; its score is P(entailment) - P(contradiction). The
verb's signature (e.g. ``+/-``: first symbol positive environment, second negative) predicts the
label: ``+`` entailment, ``-`` contradiction, ``o`` neutral.

The pseudo-model ``ross-pavlick-2019-bert`` is the BERT probabilities released with the dataset
(:func:`pseudo_model_predictions`); real models are :mod:`verbeval.veridicality.predict`. Both give
the same predictions table, aggregated by :func:`verbeval.veridicality.statistics.signature_table`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from verbeval.core.errors import InputError, VerbevalError

PSEUDO_MODEL = "ross-pavlick-2019-bert"
LABELS = ("entailment", "neutral", "contradiction")
ENVIRONMENTS = ("positive", "negative")
SYMBOL_LABELS = {"+": "entailment", "-": "contradiction", "o": "neutral"}
PREDICTION_COLUMNS = [
    "index",
    "verb",
    "signature",
    "environment",
    "p_entailment",
    "p_neutral",
    "p_contradiction",
    "score",
    "human_mean",
]
_TEXT_COLUMNS = [
    "index",
    "task",
    "verb",
    "sentence",
    "neg_sentence",
    "complement",
    "turker_pos_ratings",
    "turker_neg_ratings",
]
_PROB_COLUMNS = [
    f"bert_{env}_{lab}_prob" for env in ("pos", "neg") for lab in ("entailment", "contradiction", "neutral")
]
REQUIRED_COLUMNS = [*_TEXT_COLUMNS, *_PROB_COLUMNS, "signature"]
_SIGNATURE = re.compile(r"^[+\-o]/[+\-o]$")


def parse_signature(signature: str) -> dict[str, str]:
    """``'+/-'`` -> {'positive': 'entailment', 'negative': 'contradiction'}."""
    s = signature.strip().replace("\u2212", "-")
    if not _SIGNATURE.match(s):
        raise VerbevalError(f"bad signature {signature!r}: expected X/Y with X, Y in +, -, o")
    return {"positive": SYMBOL_LABELS[s[0]], "negative": SYMBOL_LABELS[s[2]]}


def _ratings(text: str) -> list[float]:
    values = [float(x) for x in text.split(",") if x.strip()]
    if not values or any(not -2 <= v <= 2 for v in values):
        raise ValueError(f"expected comma-separated ratings in [-2, 2], got {text!r}")
    return values


def read_dataset(path: str | Path) -> pd.DataFrame:
    """The released TSV, validated (errors name ``file:line``); adds ``human_pos_mean`` and
    ``human_neg_mean`` (mean turker rating per environment) and normalises the signature."""
    path = Path(path)
    try:
        df = pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read as TSV: {exc}") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"missing column(s) {missing}", line=1)
    if df.empty:
        raise InputError(path, "no rows")
    out = df[REQUIRED_COLUMNS].copy()
    pos_mean, neg_mean, probs = [], [], {c: [] for c in _PROB_COLUMNS}
    for i, row in enumerate(df.itertuples(index=False)):
        line = i + 2
        r = row._asdict()
        try:
            int(r["index"])
            if not r["verb"].strip() or not r["sentence"].strip() or not r["complement"].strip():
                raise ValueError("empty verb, sentence or complement")
            sig = r["signature"].strip().replace("\u2212", "-")
            parse_signature(sig)
            out.iat[i, REQUIRED_COLUMNS.index("signature")] = sig
            pos_mean.append(float(np.mean(_ratings(r["turker_pos_ratings"]))))
            neg_mean.append(float(np.mean(_ratings(r["turker_neg_ratings"]))))
            for c in _PROB_COLUMNS:
                p = float(r[c])
                if not 0 <= p <= 1:
                    raise ValueError(f"{c} = {p} is not a probability")
                probs[c].append(p)
        except (ValueError, VerbevalError) as exc:
            raise InputError(path, str(exc), line=line) from None
    out["index"] = out["index"].astype(int)
    if out["index"].duplicated().any():
        dup = int(out["index"][out["index"].duplicated()].iloc[0])
        raise InputError(path, f"duplicate index {dup}", line=int(np.flatnonzero(out["index"] == dup)[1]) + 2)
    for c in _PROB_COLUMNS:
        out[c] = probs[c]
    out["human_pos_mean"] = pos_mean
    out["human_neg_mean"] = neg_mean
    return out


def long_frame(data: pd.DataFrame, probs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per item and environment from per-environment probability frames."""
    parts = []
    for env, human in (("positive", "human_pos_mean"), ("negative", "human_neg_mean")):
        p = probs[env].reset_index(drop=True)
        part = pd.DataFrame(
            {
                "index": data["index"].to_numpy(),
                "verb": data["verb"].to_numpy(),
                "signature": data["signature"].to_numpy(),
                "environment": env,
                "p_entailment": p["p_entailment"].to_numpy(dtype=float),
                "p_neutral": p["p_neutral"].to_numpy(dtype=float),
                "p_contradiction": p["p_contradiction"].to_numpy(dtype=float),
            }
        )
        part["score"] = part["p_entailment"] - part["p_contradiction"]
        part["human_mean"] = data[human].to_numpy(dtype=float)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)[PREDICTION_COLUMNS]


def pseudo_model_predictions(data: pd.DataFrame) -> pd.DataFrame:
    """The predictions table of the BERT model released with the dataset (no model is run)."""
    probs = {
        env: pd.DataFrame({f"p_{lab}": data[f"bert_{short}_{lab}_prob"] for lab in LABELS})
        for env, short in (("positive", "pos"), ("negative", "neg"))
    }
    return long_frame(data, probs)

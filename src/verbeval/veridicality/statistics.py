"""The per-signature table of a predictions table: n, accuracy (argmax vs the label the verb's
signature predicts), Pearson and Spearman (score vs mean human rating) per signature and
environment, then ``overall`` per environment."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import VerbevalError
from verbeval.veridicality.data import ENVIRONMENTS, LABELS, PREDICTION_COLUMNS, parse_signature

TABLE_COLUMNS = ["signature", "environment", "n", "accuracy", "pearson", "spearman"]


def expected_labels(predictions: pd.DataFrame) -> pd.Series:
    """The label each row's signature predicts in its environment."""
    return pd.Series(
        [parse_signature(s)[e] for s, e in zip(predictions["signature"], predictions["environment"])],
        index=predictions.index,
        dtype=object,
    )


def predicted_labels(predictions: pd.DataFrame) -> pd.Series:
    """The model's argmax label per row."""
    p = predictions[[f"p_{lab}" for lab in LABELS]].to_numpy(dtype=float)
    return pd.Series(np.asarray(LABELS, dtype=object)[p.argmax(axis=1)], index=predictions.index)


def _correlations(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    return float(stats.pearsonr(x, y)[0]), float(stats.spearmanr(x, y)[0])


def _row(signature: str, environment: str, part: pd.DataFrame, correct: pd.Series) -> dict[str, Any]:
    pearson, spearman = _correlations(part["score"].to_numpy(float), part["human_mean"].to_numpy(float))
    return {
        "signature": signature,
        "environment": environment,
        "n": len(part),
        "accuracy": float(correct.loc[part.index].mean()) if len(part) else float("nan"),
        "pearson": pearson,
        "spearman": spearman,
    }


def signature_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """n, accuracy (argmax vs the signature's label), Pearson and Spearman (score vs mean human
    rating) per signature and environment, then ``overall`` per environment."""
    missing = [c for c in PREDICTION_COLUMNS if c not in predictions.columns]
    if missing:
        raise VerbevalError(f"predictions table lacks column(s) {missing}")
    correct = expected_labels(predictions) == predicted_labels(predictions)
    rows = []
    for sig in sorted(predictions["signature"].unique()):
        for env in ENVIRONMENTS:
            part = predictions[(predictions["signature"] == sig) & (predictions["environment"] == env)]
            rows.append(_row(sig, env, part, correct))
    for env in ENVIRONMENTS:
        rows.append(_row("overall", env, predictions[predictions["environment"] == env], correct))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)

"""The KL tables of the counterfactual manipulations (Ross & Pavlick 2019, Tables 7 and 8): KL(original
pair || manipulated pair) of an NLI model's 3-way distributions, summarised per manipulation,
complement type, signature and environment, and written as Markdown and LaTeX.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import VerbevalError
from verbeval.core.tables import format_rows, latex_row, latex_tabular, markdown_table, number, tex_escape
from verbeval.veridicality.counterfactual import MAIN_MANIPULATIONS, SWAP_MANIPULATIONS

KL_COLUMNS = ["n", "mean_kl", "median_kl"]


def kl_divergence(p: np.ndarray, q: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Row-wise KL(p || q) in nats; both clipped at ``eps`` and renormalised (float64)."""
    p = np.clip(np.asarray(p, dtype=np.float64), eps, None)
    q = np.clip(np.asarray(q, dtype=np.float64), eps, None)
    p /= p.sum(axis=1, keepdims=True)
    q /= q.sum(axis=1, keepdims=True)
    return np.sum(p * np.log(p / q), axis=1)


_P = ["p_entailment", "p_neutral", "p_contradiction"]


def attach_kl(original: pd.DataFrame, manipulated: pd.DataFrame) -> pd.DataFrame:
    """``manipulated`` (pairs with p_* columns) with ``kl`` = KL(original pair || manipulated pair);
    ``original`` is the predictions table of :mod:`verbeval.veridicality.data`."""
    orig = original[["index", "environment", *_P]].rename(columns={c: c + "_orig" for c in _P})
    merged = manipulated.merge(orig, on=["index", "environment"], how="left", validate="many_to_one")
    if merged[[c + "_orig" for c in _P]].isna().any().any():
        raise VerbevalError("manipulated pairs without an original prediction (predictions of another dataset?)")
    merged["kl"] = kl_divergence(merged[[c + "_orig" for c in _P]].to_numpy(), merged[_P].to_numpy())
    return merged


def _summary(part: pd.DataFrame) -> dict[str, Any]:
    kl = part["kl"].to_numpy(float)
    return {
        "n": len(kl),
        "mean_kl": float(kl.mean()) if len(kl) else float("nan"),
        "median_kl": float(np.median(kl)) if len(kl) else float("nan"),
    }


def table7(scored: pd.DataFrame) -> pd.DataFrame:
    """Mean and median KL per verb replacement, complement type (to, that, all) and environment."""
    rows = []
    for m in MAIN_MANIPULATIONS:
        for task in ("to", "that", "all"):
            for env in ("positive", "negative"):
                sel = (scored["manipulation"] == m) & (scored["environment"] == env)
                if task != "all":
                    sel &= scored["task"] == task
                rows.append({"manipulation": m, "task": task, "environment": env, **_summary(scored[sel])})
    return pd.DataFrame(rows, columns=["manipulation", "task", "environment", *KL_COLUMNS])


def table8(scored: pd.DataFrame) -> pd.DataFrame:
    """Mean and median KL of the complement-type swap per direction, signature and environment."""
    rows = []
    for m in SWAP_MANIPULATIONS:
        part = scored[scored["manipulation"] == m]
        for sig in [*sorted(part["signature"].unique()), "overall"]:
            for env in ("positive", "negative"):
                sel = part["environment"] == env
                if sig != "overall":
                    sel &= part["signature"] == sig
                rows.append({"direction": m, "signature": sig, "environment": env, **_summary(part[sel])})
    return pd.DataFrame(rows, columns=["direction", "signature", "environment", *KL_COLUMNS])


#: the KL columns' format: four decimals, a non-zero value below 0.001 in scientific notation
KL_FORMAT = number(4, tiny_below=1e-3)


def _kl_rows(table: pd.DataFrame) -> list[list[str]]:
    return format_rows(table, dict.fromkeys(("mean_kl", "median_kl"), KL_FORMAT))


def _align(table: pd.DataFrame) -> str:
    """Right for the :data:`KL_COLUMNS`, left for the labels."""
    return "".join("r" if c in KL_COLUMNS else "l" for c in table.columns)


def kl_markdown(table: pd.DataFrame, title: str) -> str:
    """Table 7 or 8 (:func:`table7`, :func:`table8`) as a Markdown pipe table under ``title``."""
    return "\n".join([title, "", *markdown_table(list(table.columns), _kl_rows(table), _align(table))]) + "\n"


def kl_latex(table: pd.DataFrame, title: str) -> str:
    """Table 7 or 8 as a booktabs tabular under a comment line with ``title``; every cell escaped."""
    head = [latex_row([tex_escape(str(c)) for c in table.columns])]
    rows = [latex_row([tex_escape(c) for c in cells]) for cells in _kl_rows(table)]
    return "\n".join([f"% {tex_escape(title)}", *latex_tabular(_align(table), head, rows)]) + "\n"

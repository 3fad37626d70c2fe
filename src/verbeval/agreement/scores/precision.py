"""Ties and fragile decisions: which of a model's agreement decisions a different rounding could flip.

A decision compares two probabilities of one context: TSE the row's singular and plural form, EW each
eligible lemma's two forms (top p = 1: every lemma). It is scored ``P(correct) > P(incorrect)``, so an
exact **tie** (``P(correct) == P(incorrect)``, in the stored probabilities) counts as wrong
(docs/metrics.md, "Ties"); lm-evaluation-harness scores its minimal pairs with ``np.argmax`` and the
correct sentence first, so a tie counts as right there (:func:`tse_ties_correct`).

Its **margin** is ``|ln P(sing) - ln P(plur)|`` (the difference of the two logits: the context's
normaliser cancels) in units of float32 rounding at that magnitude: ``np.spacing(float32(m))`` with
``m = max(|ln P(sing)|, |ln P(plur)|)``, the spacing of float32 numbers there (the forward pass's
logits and the stored probabilities are float32). A decision is **fragile** when its margin is below
``threshold`` units (:data:`FRAGILE_ULPS`, ``agreement.precision_audit.fragile_ulps``) and it is no
tie: rounding the same forward pass differently (another kernel, batch size or device) could flip it.
A pair whose two probabilities are both 0 (underflow) is a tie.
"""

from __future__ import annotations

import numpy as np

#: the default margin, in float32 spacings, below which a decision is fragile
FRAGILE_ULPS = 16.0


def margin_ulps(p_sing: np.ndarray, p_plur: np.ndarray) -> np.ndarray:
    """Each decision's margin in float32 spacings at its magnitude (module docstring); 0 for a tie,
    NaN where a probability is NaN."""
    ps = np.asarray(p_sing, dtype=np.float64)
    pp = np.asarray(p_plur, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ls, lp = np.log(ps), np.log(pp)
        margin = np.abs(ls - lp)
        magnitude = np.maximum(np.abs(ls), np.abs(lp))
        finite = np.isfinite(magnitude)
        unit = np.spacing(np.where(finite, magnitude, 1.0).astype(np.float32)).astype(np.float64)
        out = margin / unit
    out = np.where(ps == pp, 0.0, out)  # a tie (both 0 included)
    out = np.where(~finite & (ps != pp), np.inf, out)  # one probability 0, the other not: no rounding flips it
    return np.where(np.isnan(ps) | np.isnan(pp), np.nan, out)


def decision_counts(p_sing: np.ndarray, p_plur: np.ndarray, threshold: float = FRAGILE_ULPS) -> dict[str, int]:
    """``n`` decisions (pairs without NaN), ``ties`` and ``fragile`` (margin below ``threshold``
    spacings, ties left out) of the paired probabilities."""
    m = margin_ulps(p_sing, p_plur)
    valid = ~np.isnan(m)
    ties = valid & (np.asarray(p_sing, np.float64) == np.asarray(p_plur, np.float64))
    fragile = valid & ~ties & (m < threshold)
    return {"n": int(valid.sum()), "ties": int(ties.sum()), "fragile": int(fragile.sum())}


def tse_ties_correct(tse: np.ndarray, p_sing: np.ndarray, p_plur: np.ndarray) -> float:
    """TSE as lm-evaluation-harness scores minimal pairs (``np.argmax``, correct first): a tie counts as
    correct. ``tse``: the per-row TSE (1, 0, NaN for a row whose forms are not single tokens)."""
    t = np.asarray(tse, dtype=np.float64)
    valid = ~np.isnan(t)
    if not valid.any():
        return float("nan")
    tie = np.asarray(p_sing, np.float64) == np.asarray(p_plur, np.float64)
    return float(np.where(tie, 1.0, t)[valid].mean())

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
``threshold`` units (``agreement.precision_audit.fragile_ulps``, 16 by default) and it is no tie: rounding the same forward pass differently (another kernel, batch size or device) could flip it.
A pair whose two probabilities are both 0 (underflow) is a tie.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from verbeval.core.errors import MismatchError

#: the columns of ``precision_audit.csv``: per group and metric (a Table 2 cell) its decisions, ties
#: and fragile decisions; ``value`` as verbeval scores it, ``value_ties_correct`` with ties right
AUDIT_COLUMNS = (
    "model",
    "random_init",
    "group",
    "metric",
    "decisions",
    "ties",
    "fragile",
    "fragile_ulps",
    "value",
    "value_ties_correct",
)


def _threshold(threshold: float | None) -> float:
    from verbeval.agreement.steps import PRECISION_AUDIT

    return float(PRECISION_AUDIT.default("fragile_ulps") if threshold is None else threshold)


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


def decision_counts(p_sing: np.ndarray, p_plur: np.ndarray, threshold: float | None = None) -> dict[str, int]:
    """``n`` decisions (pairs without NaN), ``ties`` and ``fragile`` (margin below ``threshold``
    spacings, ties left out; default ``agreement.precision_audit.fragile_ulps``) of the paired probabilities."""
    threshold = _threshold(threshold)
    ps = np.asarray(p_sing, dtype=np.float64)
    pp = np.asarray(p_plur, dtype=np.float64)
    valid = ~(np.isnan(ps) | np.isnan(pp))
    ties = valid & (ps == pp)
    # The margin is computed only where it can be below the threshold: |ln a - ln b| >= |a - b| / max(a, b),
    # and a spacing is at most that of the largest magnitude, so a pair whose relative difference is
    # above twice ``threshold`` such spacings is not fragile (the same counts as margin_ulps everywhere).
    hi = np.where(valid, np.maximum(ps, pp), 0.0)
    lo = np.where(valid & (np.minimum(ps, pp) > 0), np.minimum(ps, pp), np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        top, bottom = (float(hi.max()), float(lo.min())) if hi.size else (0.0, np.inf)
        # the largest |ln p| of any positive probability here: at the smallest or the largest one
        magnitude = max(0.0, -math.log(bottom) if bottom < np.inf else 0.0, math.log(top) if top > 0 else 0.0)
        widest = float(np.spacing(np.float32(min(magnitude, float(np.finfo(np.float32).max)))))
        near = valid & (hi > 0) & ~ties & (np.abs(ps - pp) <= 2.0 * threshold * widest * hi)
    fragile = int((margin_ulps(ps[near], pp[near]) < threshold).sum())
    return {"n": int(valid.sum()), "ties": int(ties.sum()), "fragile": fragile}


def tse_ties_correct(tse: np.ndarray, p_sing: np.ndarray, p_plur: np.ndarray) -> float:
    """TSE as lm-evaluation-harness scores minimal pairs (``np.argmax``, correct first): a tie counts as
    correct. ``tse``: the per-row TSE (1, 0, NaN for a row whose forms are not single tokens)."""
    t = np.asarray(tse, dtype=np.float64)
    valid = ~np.isnan(t)
    if not valid.any():
        return float("nan")
    tie = np.asarray(p_sing, np.float64) == np.asarray(p_plur, np.float64)
    return float(np.where(tie, 1.0, t)[valid].mean())


def ew_decisions(plural: np.ndarray, prob: np.ndarray, threshold: float) -> dict[str, int]:
    """The precision audit's counts of a chunk's per-lemma EW decisions at top p = 1 (``prob``
    ``[n, L, 2]``): ``decisions``, ``ties``, ``fragile`` (:func:`verbeval.agreement.scores.precision.decision_counts`)
    and ``right`` (the correct form strictly more probable)."""
    p_sing, p_plur = prob[..., 0].astype(np.float64), prob[..., 1].astype(np.float64)
    c = decision_counts(p_sing, p_plur, threshold)
    right = int(np.where(np.asarray(plural, dtype=bool)[:, None], p_plur > p_sing, p_sing > p_plur).sum())
    return {"decisions": c["n"], "ties": c["ties"], "fragile": c["fragile"], "right": right}


def audit_model(
    model: str,
    row_tse: Mapping[str, pd.DataFrame],
    shards: Mapping[str, Sequence[str | Path]],
    n_lemmas: int,
    threshold: float | None = None,
    random_init: bool = False,
    counted: Mapping[str, Mapping[str, int]] | None = None,
) -> pd.DataFrame:
    """The audit rows (:data:`AUDIT_COLUMNS`) of one model: per group, its TSE decisions (``row_tse``:
    ``tse.parquet``'s ``tse``, ``p_sing``, ``p_plur``) and its per-lemma EW decisions at top p = 1
    (every context and eligible lemma of the group's ``shards``, their stored probabilities). A shard
    in ``counted`` (by path: its :func:`ew_decisions` at this threshold, as its forward job counted them,
    :func:`verbeval.agreement.scores.chunk_scores.read_chunk_audit`) is not read."""
    import pyarrow.parquet as pq

    from verbeval.agreement.engine.shards import fixed_list_values

    threshold = _threshold(threshold)
    records = []
    for group, t in row_tse.items():
        ps, pp, tse = (t[c].to_numpy(np.float64) for c in ("p_sing", "p_plur", "tse"))
        valid = ~np.isnan(tse)
        counts = decision_counts(ps[valid], pp[valid], threshold)
        value = float(tse[valid].mean()) if valid.any() else float("nan")
        records.append(
            {
                "group": group,
                "metric": "tse",
                **_renamed(counts),
                "value": value,
                "value_ties_correct": tse_ties_correct(tse, ps, pp),
            }  # fmt: skip
        )
        right_n = ties_n = fragile_n = n = 0
        for path in shards.get(group, ()):
            c = None if counted is None else counted.get(str(path))
            if c is None:
                table = pq.read_table(path, columns=["plural", "prob"])
                prob = fixed_list_values(table["prob"], 2 * n_lemmas, np.float32).reshape(table.num_rows, n_lemmas, 2)
                c = ew_decisions(table["plural"].to_numpy(zero_copy_only=False), prob, threshold)
            n, ties_n, fragile_n = n + c["decisions"], ties_n + c["ties"], fragile_n + c["fragile"]
            right_n += c["right"]
        records.append(
            {
                "group": group,
                "metric": "ew",
                "decisions": n,
                "ties": ties_n,
                "fragile": fragile_n,
                "value": right_n / n if n else float("nan"),
                "value_ties_correct": (right_n + ties_n) / n if n else float("nan"),
            }  # fmt: skip
        )
    out = pd.DataFrame.from_records(records)
    out.insert(0, "model", model)
    out.insert(1, "random_init", bool(random_init))
    out["fragile_ulps"] = threshold
    return out[list(AUDIT_COLUMNS)]


def _renamed(counts: Mapping[str, int]) -> dict[str, int]:
    return {"decisions": counts["n"], "ties": counts["ties"], "fragile": counts["fragile"]}


#: the columns of ``flips.csv``: each decision that another dtype's run decides the other way
FLIP_COLUMNS = ("group", "metric", "row", "context_id", "lemma", "correct_reference", "correct_other", "margin_ulps")


def _ew_decisions(path: str | Path, n_lemmas: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(context_id, correct [N, L], margin_ulps [N, L])`` of one shard's per-lemma EW decisions."""
    import pyarrow.parquet as pq

    from verbeval.agreement.engine.shards import fixed_list_values

    table = pq.read_table(path, columns=["context_id", "plural", "prob"])
    prob = fixed_list_values(table["prob"], 2 * n_lemmas, np.float32).reshape(table.num_rows, n_lemmas, 2)
    plural = table["plural"].to_numpy(zero_copy_only=False).astype(bool)[:, None]
    ps, pp = prob[..., 0].astype(np.float64), prob[..., 1].astype(np.float64)
    correct = np.where(plural, pp > ps, ps > pp)
    return table["context_id"].to_numpy(), correct, margin_ulps(ps, pp)


def flip_set(
    reference: tuple[Mapping[str, pd.DataFrame], Mapping[str, Sequence[str | Path]]],
    other: tuple[Mapping[str, pd.DataFrame], Mapping[str, Sequence[str | Path]]],
    lemmas: Sequence[str],
) -> pd.DataFrame:
    """Every decision the ``other`` run (the same model in another dtype) decides the other way than
    the ``reference`` run: its TSE rows and per-lemma EW decisions (:data:`FLIP_COLUMNS`), each with
    the reference's margin. Each run is ``(row_tse, shards)`` per group (``tse.parquet``; the group's
    shards, in chunk order); the two must hold the same rows and contexts."""
    records: list[dict[str, object]] = []
    ref_tse, ref_shards = reference
    oth_tse, oth_shards = other
    for group, rt in ref_tse.items():
        a, b = rt.set_index("row"), oth_tse[group].set_index("row")
        if not a.index.equals(b.index):
            raise MismatchError(f"group {group!r}: the two runs hold different template rows")
        both = a["tse"].notna() & b["tse"].notna()
        flipped = both & (a["tse"] != b["tse"])
        margins = margin_ulps(a["p_sing"].to_numpy(), a["p_plur"].to_numpy())
        for row in np.flatnonzero(flipped.to_numpy()):
            records.append(
                {
                    "group": group,
                    "metric": "tse",
                    "row": int(a.index[row]),
                    "context_id": int(a["context_id"].iloc[row]),
                    "lemma": "",
                    "correct_reference": bool(a["tse"].iloc[row] == 1.0),
                    "correct_other": bool(b["tse"].iloc[row] == 1.0),
                    "margin_ulps": float(margins[row]),
                }  # fmt: skip
            )
        pairs = list(zip(ref_shards.get(group, ()), oth_shards.get(group, ())))
        if len(pairs) != len(ref_shards.get(group, ())) or len(pairs) != len(oth_shards.get(group, ())):
            raise MismatchError(f"group {group!r}: the two runs have different numbers of shards")
        for ref_path, oth_path in pairs:
            ctx, ok_ref, margin = _ew_decisions(ref_path, len(lemmas))
            ctx_o, ok_oth, _ = _ew_decisions(oth_path, len(lemmas))
            if not np.array_equal(ctx, ctx_o):
                raise MismatchError(f"{oth_path}: not the contexts of {ref_path}")
            for i, j in zip(*np.nonzero(ok_ref != ok_oth)):
                records.append(
                    {
                        "group": group,
                        "metric": "ew",
                        "row": -1,
                        "context_id": int(ctx[i]),
                        "lemma": lemmas[j],
                        "correct_reference": bool(ok_ref[i, j]),
                        "correct_other": bool(ok_oth[i, j]),
                        "margin_ulps": float(margin[i, j]),
                    }  # fmt: skip
                )
    return pd.DataFrame.from_records(records, columns=list(FLIP_COLUMNS))

"""Per-verb representation quality against the agreement study's per-lemma accuracy.

:func:`verb_errors` gives each verb's mean rank error per representation; :func:`agreement_join`
correlates it with the per-lemma statistics read from the agreement study's ``lemma_stats.csv``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from verbeval.core.errors import VerbevalError

JOIN_COLUMNS = [
    "model",
    "representation",
    "layer",
    "n_verbs",
    "rho_accuracy",
    "p_accuracy",
    "rho_log10_prob",
    "p_log10_prob",
]


def verb_errors(pairs: pd.DataFrame, sims: pd.DataFrame) -> pd.DataFrame:
    """Per verb and representation: the covered pairs it occurs in and its mean rank error,
    the mean over those pairs of |percentile rank of the cosine - percentile rank of the human
    rating| (ranks among all covered pairs of that representation, in (0, 1]; 0 is perfect)."""
    from scipy import stats

    human = pairs.set_index("pair")["score"]
    parts = []
    for rep in dict.fromkeys(sims["representation"]):
        c = sims[(sims["representation"] == rep) & sims["covered"]]
        n = len(c)
        if n == 0:
            continue
        err = (
            np.abs(stats.rankdata(c["cosine"].to_numpy(float)) - stats.rankdata(human.loc[c["pair"]].to_numpy(float)))
            / n
        )
        p = pairs.set_index("pair").loc[c["pair"]]
        long = pd.DataFrame(
            {
                "verb": np.concatenate([p["verb1"].to_numpy(), p["verb2"].to_numpy()]),
                "error": np.concatenate([err, err]),
            }
        )
        g = long.groupby("verb", sort=True)["error"].agg(["size", "mean"]).reset_index()
        g.columns = ["verb", "n_pairs", "rank_error"]
        g.insert(1, "representation", rep)
        parts.append(g)
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["verb", "representation", "n_pairs", "rank_error"])
    )


def agreement_join(errors: pd.DataFrame, lemma_stats: pd.DataFrame, model: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Join per-verb rank errors with the agreement module's per-lemma results (``lemma`` =
    SimVerb verb). Returns the joined per-verb rows and, per representation, the number of verbs
    in both and Spearman's rho (with scipy's p-value) of rank error against agreement accuracy and
    against mean log10 probability. A positive rho_accuracy means verbs conjugated *better* are
    represented *worse*; the hypothesis "conjugated badly and represented badly" predicts a
    negative one."""
    from scipy import stats

    need = {"lemma", "accuracy", "mean_log10_prob"}
    if not need <= set(lemma_stats.columns):
        raise VerbevalError(f"lemma statistics lack column(s) {sorted(need - set(lemma_stats.columns))}")
    ls = lemma_stats[["lemma", "accuracy", "mean_log10_prob", "n_contexts"]].rename(columns={"lemma": "verb"})
    joined = errors.merge(ls, on="verb", how="inner").sort_values(["representation", "verb"], kind="stable")
    order = list(dict.fromkeys(errors["representation"]))
    joined["representation"] = pd.Categorical(joined["representation"], order, ordered=True)
    joined = joined.sort_values(["representation", "verb"], kind="stable").reset_index(drop=True)
    joined["representation"] = joined["representation"].astype(str)
    rows = []
    for rep in order:
        j = joined[joined["representation"] == rep]
        res = {
            "model": model,
            "representation": rep,
            "layer": -1 if rep == "static" else int(rep.removeprefix("layer")),
            "n_verbs": len(j),
        }
        for col, key in (("accuracy", "accuracy"), ("mean_log10_prob", "log10_prob")):
            a, b = j["rank_error"].to_numpy(float), j[col].to_numpy(float)
            ok = ~np.isnan(a) & ~np.isnan(b)
            if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
                res[f"rho_{key}"], res[f"p_{key}"] = float("nan"), float("nan")
            else:
                r = stats.spearmanr(a[ok], b[ok])
                res[f"rho_{key}"], res[f"p_{key}"] = float(r[0]), float(r[1])
        rows.append(res)
    joined.insert(0, "model", model)
    return joined, pd.DataFrame(rows, columns=JOIN_COLUMNS)

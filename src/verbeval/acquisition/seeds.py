"""Several seeds of one model (index rows sharing a ``family``): the band of their curves and how
well their per-lemma AoAs agree.

* Band (:func:`seed_band`): per family with two or more seeds, group, metric, side, cutoff and step,
  the mean, minimum and maximum of the seeds' values (over the seeds that have that step:
  ``n_seeds``).
* AoA agreement (:func:`seed_aoa_agreement`): per family and pair of seeds, over the lemmas with an
  AoA in both, Spearman's rho of the two AoAs and the mean absolute difference of their log10 steps.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from verbeval.acquisition.frequency import spearman_rows

BAND_COLUMNS = ("family", "random_init", "group", "metric", "side", "cutoff", "step", "n_seeds", "mean", "min", "max")
AGREEMENT_COLUMNS = ("family", "random_init", "seed_a", "seed_b", "n_lemmas", "spearman", "mean_abs_log10_diff")


def multi_seed(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of families with two or more seeds."""
    n = frame.groupby("family")["seed"].nunique()
    return frame[frame["family"].isin(n[n > 1].index)]


def seed_band(curves: pd.DataFrame) -> pd.DataFrame:
    """Band rows (:data:`BAND_COLUMNS`) of the multi-seed families of :func:`group_curves`' rows."""
    c = multi_seed(curves)
    if c.empty:
        return pd.DataFrame(columns=list(BAND_COLUMNS))
    key = ["family", "group", "metric", "side", "cutoff", "step"]
    g = c.assign(cutoff=c["cutoff"].fillna(-1.0)).groupby(key, sort=True)
    out = g.agg(
        random_init=("random_init", "any"),
        n_seeds=("seed", "nunique"),
        mean=("value", "mean"),
        min=("value", "min"),
        max=("value", "max"),
    ).reset_index()
    out["cutoff"] = out["cutoff"].where(out["cutoff"] >= 0)
    return out[list(BAND_COLUMNS)]


def seed_aoa_agreement(lemma_aoa: pd.DataFrame) -> pd.DataFrame:
    """Agreement rows (:data:`AGREEMENT_COLUMNS`) from the per-lemma AoA table (family, seed, lemma,
    aoa_log10_step, random_init)."""
    records: list[dict[str, Any]] = []
    for family, d in multi_seed(lemma_aoa).groupby("family", sort=True):
        wide = d.pivot(index="lemma", columns="seed", values="aoa_log10_step")
        for a, b in combinations(sorted(wide.columns), 2):
            both = wide[[a, b]].dropna()
            n = len(both)
            rho = float(spearman_rows(both[a].to_numpy()[None], both[b].to_numpy()[None])[0]) if n >= 3 else np.nan
            records.append(
                {
                    "family": family,
                    "random_init": bool(d["random_init"].any()),
                    "seed_a": a,
                    "seed_b": b,
                    "n_lemmas": n,
                    "spearman": rho,
                    "mean_abs_log10_diff": float((both[a] - both[b]).abs().mean()) if n else np.nan,
                }
            )
    return pd.DataFrame.from_records(records, columns=list(AGREEMENT_COLUMNS))

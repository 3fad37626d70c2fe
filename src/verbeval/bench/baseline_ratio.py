"""The baseline benchmark: the paper-code oracle (:class:`verbeval.bench.paper_baseline.PaperBaseline`)
timed on an evenly spaced sample of template rows, its time per row extrapolated to every row of
the suite and divided by verbeval's inference + aggregation job time for the same model in the
workflow part's run (the baseline ratio); and its scores compared with verbeval's for those rows."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from verbeval.bench.paper_baseline import PaperBaseline
from verbeval.bench.workflow_runs import WorkflowOutputs

EXTRAPOLATION = (
    "baseline seconds per row (mean over an evenly spaced sample of template rows) x every row of the "
    "suite; verbeval: the wall time of the model's inference and aggregation jobs in the workflow part's "
    "snakemake run (start-up and model load included)"
)


def bench_baseline(
    out: WorkflowOutputs, models: dict[str, dict[str, Any]], n_rows: int, threads: int = 1
) -> dict[str, Any]:
    """Time the baseline on ``n_rows`` evenly spaced template rows per model, extrapolate to every
    row of the suite, and compare with verbeval's job times (``models``: the workflow part's
    per-model figures) and scores."""
    from verbeval.core.models import load_model

    templates = pd.read_parquet(out.templates)
    templates["row_in_group"] = templates.groupby("group", sort=False).cumcount()
    torch.set_num_threads(threads)
    res: dict[str, Any] = {"rows_sampled": n_rows, "extrapolation": EXTRAPOLATION}
    for name, mdir in out.model_dirs.items():
        lm = load_model(str(mdir), device="cpu")
        lemmas = pd.read_parquet(out.agreement_dir / name / "lemmas.parquet")
        base = PaperBaseline(lm, lemmas, out.top_cutoffs, out.bottom_cutoffs)
        take = np.unique(np.linspace(0, len(templates) - 1, min(n_rows, len(templates))).round().astype(int))
        sample = templates.iloc[take]
        t0 = time.perf_counter()
        scored = [base.score_row(r.left, r.right, bool(r.plural), r.correct, r.incorrect) for r in sample.itertuples()]
        per_row = (time.perf_counter() - t0) / len(sample)
        diff = compare_with_verbeval(sample, scored, out.agreement_dir / name)
        verbeval_s = models[name]["infer_job_s"] + models[name]["aggregate_job_s"]
        extrapolated = per_row * len(templates)
        res[name] = {
            "baseline_s_per_row": round(per_row, 5),
            "rows_total": len(templates),
            "baseline_extrapolated_s": round(extrapolated, 1),
            "verbeval_infer_aggregate_s": round(verbeval_s, 2),
            "speedup": round(extrapolated / verbeval_s, 1),
            "verbeval_s_per_row": round(verbeval_s / len(templates), 6),
            **diff,
        }
    return res


def compare_with_verbeval(sample: pd.DataFrame, scored: list[dict[str, float]], model_out: Path) -> dict[str, Any]:
    """Largest difference between the baseline's scores and verbeval's (its scores/tse tables).

    ``sample``: template rows with their ``group`` and ``row_in_group`` (position in the group's
    table, the ``row`` of ``tse.parquet``); ``scored``: the baseline's scores of each row.
    """
    worst, n_diff, n = 0.0, 0, 0
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}
    for (gid, row), res in zip(zip(sample["group"], sample["row_in_group"]), scored):
        if gid not in tables:
            tables[gid] = (
                pd.read_parquet(model_out / gid / "scores.parquet").set_index("context_id"),
                pd.read_parquet(model_out / gid / "tse.parquet").set_index("row"),
            )
        scores, tse = tables[gid]
        ctx = int(tse.loc[row, "context_id"])
        for key, val in res.items():
            ref = float(tse.loc[row, "tse"] if key == "tse" else scores.loc[ctx, key])
            n += 1
            if math.isnan(val) and math.isnan(ref):
                continue
            d = math.inf if (math.isnan(val) or math.isnan(ref)) else abs(val - ref)
            worst = max(worst, d)
            n_diff += d > 1e-5
    return {"scores_compared": n, "max_abs_diff_vs_verbeval": worst, "n_diff_over_1e-5": int(n_diff)}

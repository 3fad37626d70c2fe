"""The aggregation benchmark: every group of each workflow model aggregated from its shards in
worker processes (as ``snakemake --cores 2`` runs jobs), the time split into reading shards,
scoring contexts, TSE and bootstrap, with each worker's peak memory."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from typing import Any

import pandas as pd
import torch

from verbeval.bench.timing import peak_rss_mib
from verbeval.bench.workflow_runs import WorkflowOutputs

#: the thread variables of BLAS/OpenMP, set to 1 in the workers (one thread per job)
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def aggregate_group(
    shard_paths: list[str],
    templates_path: str,
    group: str,
    model: str,
    top: list[float],
    bottom: list[float],
    resamples: int,
) -> dict[str, float]:
    """Aggregate one (model, group) in memory, timing each step (worker-process entry point)."""
    from verbeval.agreement.scores.aggregate import context_scores, read_shards, row_tse, summarise

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    sh = read_shards(shard_paths)
    t1 = time.perf_counter()
    scores = context_scores(sh, top, bottom)
    t2 = time.perf_counter()
    tpl = pd.read_parquet(templates_path)
    tse = row_tse(sh, tpl[tpl["group"] == group].reset_index(drop=True))
    t3 = time.perf_counter()
    summarise(scores, tse, model=model, group=group, resamples=resamples)
    t4 = time.perf_counter()
    return {
        "read_s": t1 - t0,
        "scores_s": t2 - t1,
        "tse_s": t3 - t2,
        "bootstrap_s": t4 - t3,
        "contexts": len(scores),
        "peak_rss_mib": peak_rss_mib(),
    }


def _warm_worker() -> None:
    """Import what a worker needs before the timed work starts."""
    from verbeval.agreement.scores import aggregate  # noqa: F401


def bench_aggregation(out: WorkflowOutputs, workers: int = 2) -> dict[str, Any]:
    """Aggregate every group of each workflow model from its shards with ``workers`` processes."""
    ctx = multiprocessing.get_context("spawn")
    # one BLAS/OpenMP thread per worker (as one Snakemake job per core): spawned workers inherit this
    saved = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: "1" for k in saved})
    try:
        res: dict[str, Any] = {"workers": workers}
        for name in out.model_dirs:
            res[name] = _aggregate_model(out, name, ctx, workers)
        return res
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _aggregate_model(out: WorkflowOutputs, name: str, ctx: Any, workers: int) -> dict[str, Any]:
    shards = out.shards(name)
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        # warm the workers (imports) before timing
        for f in [pool.submit(_warm_worker) for _ in range(workers)]:
            f.result()
        t0 = time.perf_counter()
        futs = [
            pool.submit(
                aggregate_group,
                [str(p) for p in shards[g]],
                str(out.templates),
                g,
                name,
                out.top_cutoffs,
                out.bottom_cutoffs,
                out.resamples,
            )
            for g in out.groups
        ]
        parts = [f.result() for f in futs]
        wall = time.perf_counter() - t0
    return {
        "wall_s": round(wall, 3),
        "contexts": sum(p["contexts"] for p in parts),
        **{k: round(sum(p[k] for p in parts), 3) for k in ("read_s", "scores_s", "tse_s", "bootstrap_s")},
        "peak_rss_mib_per_worker": round(max(p["peak_rss_mib"] for p in parts), 1),
    }

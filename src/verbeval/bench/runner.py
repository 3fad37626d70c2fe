"""The benchmark driver: which parts run, in which order, on what, and the JSON they write.

``verbeval bench --out bench.json`` (``--quick`` for the CI slice) runs, in one process
(docs/performance.md):

1. **workflow** (:mod:`~verbeval.bench.workflow_runs`): ``snakemake table2`` on the agreement
   workflow with tiny random models on the real BERT-cased and GPT-2 tokenizers, from scratch,
   every job's wall time from Snakemake's own job metadata.
2. **aggregation** (:mod:`~verbeval.bench.aggregation`): every group of each model aggregated from
   those shards in two worker processes, the time split into its steps.
3. **throughput** (:mod:`~verbeval.bench.throughput`): the inference pipeline against the model's
   forward pass, several model shapes, CPU and (where present) CUDA.
4. **baseline** (:mod:`~verbeval.bench.baseline_ratio`): the paper-code oracle against verbeval's
   inference + aggregation jobs (a ratio), and its scores against verbeval's.

and on request **postprocess**, **real**, **snakemake** (any configuration end to end) and
**sweep** (:mod:`~verbeval.bench.sweep`: a checkpoint sweep of N revisions, its cost per revision). The
aggregation, throughput, real and baseline parts read the workflow part's outputs, so it runs with
them. Every figure goes to a JSON file, together with the machine's load average (the figures are
only comparable within one run). Nothing asserts a time.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from verbeval.bench.model_specs import THROUGHPUT_MODELS, WORKFLOW_MODELS, build_model
from verbeval.bench.report import print_report
from verbeval.bench.timing import load_avg, load_before, peak_rss_mib

#: the parts that need no workflow run
WORKFLOW_FREE = frozenset({"snakemake", "sweep", "paper", "postprocess", "api"})


def run_bench(
    *,
    out: str | Path,
    quick: bool,
    config: str | Path,
    shared: str | Path,
    workdir: str | Path,
    threads: int = 1,
    cpu_batch: int = 64,
    gpu_batch: int = 256,
    baseline_rows: int | None = None,
    parts: Sequence[str] = ("workflow", "aggregation", "throughput", "baseline"),
    snakemake_config: str | Path | None = None,
    snakemake_cores: int = 2,
    snakemake_extra: Sequence[str] = (),
    snakemake_targets: Sequence[str] = (),
    ggufs: Sequence[str] = (),
    repeats: int | None = None,
    sweep_revisions: Sequence[int] = (2, 8, 32),
    sweep_dry_run: int = 1000,
    sweep_tree: str | Path | None = None,
    sweep_size: str = "tiny",
) -> dict[str, Any]:
    """Run the benchmarks and write their figures to ``out`` (JSON). Returns the figures.

    ``snakemake_cores`` is the ``--cores`` of both Snakemake runs (the workflow and snakemake parts)."""
    from verbeval.bench.workflow_runs import bench_snakemake

    shared, workdir = Path(shared), Path(workdir)
    check_run_folders(workdir, parts, sweep_revisions, sweep_dry_run)  # before any work
    report: dict[str, Any] = {
        "quick": quick,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.cuda.is_available(),
            "load_avg_start": load_avg(),
            "load_before": {},  # the 1-minute load before each timed part (a warning when above the cpus)
        },
    }
    before = report["machine"]["load_before"]
    if "snakemake" in parts:
        before["snakemake"] = load_before("snakemake")
        report["snakemake"] = bench_snakemake(
            snakemake_config or config, workdir, snakemake_cores, snakemake_extra, snakemake_targets
        )
    if "sweep" in parts:
        before["sweep"] = load_before("sweep")
        from verbeval.bench.sweep import bench_sweep
        from verbeval.bench.sweep_sizes import SWEEP_SIZES

        report["sweep"] = bench_sweep(
            shared / "tokenizers" / SWEEP_SIZES[sweep_size]["tokenizer"],
            workdir,
            revisions=sweep_revisions,
            dry_run=sweep_dry_run,
            cores=snakemake_cores,
            config_values=snakemake_extra,
            threads=threads,
            tree=Path(sweep_tree) if sweep_tree else None,
            size=sweep_size,
        )
    if "paper" in parts:
        before["paper"] = load_before("paper")
        from verbeval.bench.paper_shapes import bench_paper

        report["paper"] = bench_paper(
            shared,
            workdir,
            cores=snakemake_cores,
            config_values=snakemake_extra,
            batch_size=gpu_batch,
            repeats=repeats if repeats is not None else 2,
        )
    if "postprocess" in parts:
        before["postprocess"] = load_before("postprocess")
        from verbeval.bench.postprocess import bench_postprocess

        report["postprocess"] = bench_postprocess(batch_size=gpu_batch, repeats=1 if quick else 3)
    if "api" in parts:
        before["api"] = load_before("api")
        from verbeval.bench.api_calls import bench_api

        mirror = os.environ.get("VERBEVAL_DATA_MIRROR") or (shared / "data" if (shared / "data").is_dir() else None)
        report["api"] = bench_api(
            shared / "tokenizers" / "gpt2",
            workdir,
            mirror,
            max_rows=40 if quick else 100,
            threads=threads,
            batch_size=cpu_batch,
            repeats=1 if quick else 3,
        )
    workflow_free = set(WORKFLOW_FREE)
    if "real" in parts and not any(Path(g).is_file() for g in ggufs):
        from verbeval.bench.real_models import real_model_skips

        report["real"] = {"gpu": None, "skipped": real_model_skips(ggufs), "results": []}
        workflow_free.add("real")
    if set(parts) - workflow_free:
        _workflow_parts(
            report,
            parts,
            quick=quick,
            config=config,
            shared=shared,
            workdir=workdir,
            threads=threads,
            cpu_batch=cpu_batch,
            gpu_batch=gpu_batch,
            baseline_rows=baseline_rows,
            cores=snakemake_cores,
            ggufs=ggufs,
            repeats=repeats,
        )
    return _finish(report, out)


def run_folders(workdir: Path, parts: Sequence[str], sweep_revisions: Sequence[int], sweep_dry_run: int) -> list[Path]:
    """The run folders under ``workdir`` that the ``parts`` empty (verbeval.bench.workflow_runs.bench_folder)."""
    folders = [workdir / part for part in ("snakemake", "paper") if part in parts]
    if "sweep" in parts:
        folders += [workdir / "sweep" / f"n{n}" for n in sweep_revisions] + [workdir / "sweep" / "plan"]
        folders += [workdir / "sweep" / f"dry{sweep_dry_run}"] if sweep_dry_run else []
    if set(parts) - WORKFLOW_FREE:
        folders.append(workdir / "workflow")
    return folders


def check_run_folders(workdir: Path, parts: Sequence[str], sweep_revisions: Sequence[int], sweep_dry_run: int) -> None:
    """Refuse, before any part runs, a run folder the bench could not empty (a user's files, one
    line: verbeval.core.outfolders.check_replaceable); each is checked again when its run starts."""
    from verbeval.core.outfolders import check_replaceable

    for folder in run_folders(workdir, parts, sweep_revisions, sweep_dry_run):
        check_replaceable(folder, "bench", "--workdir")


def _workflow_parts(
    report: dict[str, Any],
    parts: Sequence[str],
    *,
    quick: bool,
    config: str | Path,
    shared: Path,
    workdir: Path,
    threads: int,
    cpu_batch: int,
    gpu_batch: int,
    baseline_rows: int | None,
    cores: int,
    ggufs: Sequence[str],
    repeats: int | None,
) -> None:
    """The workflow part, then the parts that read its outputs, into ``report``."""
    from verbeval.bench.workflow_runs import bench_workflow

    models_dir = workdir / "models"
    model_dirs = {s.name: build_model(s, shared, models_dir) for s in WORKFLOW_MODELS}
    before = report["machine"]["load_before"]
    before["workflow"] = load_before("workflow")
    report["workflow"], outputs = bench_workflow(config, workdir, model_dirs, quick=quick, threads=threads, cores=cores)
    if "aggregation" in parts:
        before["aggregation"] = load_before("aggregation")
        from verbeval.bench.aggregation import bench_aggregation

        report["aggregation"] = bench_aggregation(outputs)
    if "throughput" in parts:
        before["throughput"] = load_before("throughput")
        from verbeval.bench.throughput import Sizes, bench_throughput

        report["throughput"] = bench_throughput(
            WORKFLOW_MODELS if quick else THROUGHPUT_MODELS,
            shared,
            models_dir,
            pd.read_parquet(outputs.templates),
            pd.read_parquet(outputs.lexicon),
            Sizes(128 if quick else 1024, cpu_batch, gpu_batch, threads, repeats=1 if quick else 2),
        )
    if "real" in parts and "real" not in report:
        before["real"] = load_before("real")
        from verbeval.bench.real_models import bench_real
        from verbeval.bench.throughput import Sizes

        report["real"] = bench_real(
            ggufs,
            pd.read_parquet(outputs.templates),
            pd.read_parquet(outputs.lexicon),
            Sizes(
                128 if quick else 256,
                cpu_batch,
                gpu_batch,
                threads,
                repeats if repeats is not None else (1 if quick else 3),
            ),
        )
    if "baseline" in parts:
        before["baseline"] = load_before("baseline")
        from verbeval.bench.baseline_ratio import bench_baseline

        n = baseline_rows if baseline_rows is not None else (8 if quick else 150)
        report["baseline"] = bench_baseline(outputs, report["workflow"]["models"], n, threads)


def _finish(report: dict[str, Any], out: str | Path) -> dict[str, Any]:
    import json

    from verbeval.core.io import write_text

    report["machine"]["load_avg_end"] = load_avg()
    report["machine"]["peak_rss_mib_process"] = round(peak_rss_mib(), 1)
    write_text(out, json.dumps(report, indent=2, sort_keys=False) + "\n")
    print_report(report)
    return report

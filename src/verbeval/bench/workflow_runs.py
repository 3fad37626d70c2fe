"""The two benchmark parts that run the workflow itself with ``snakemake`` (:mod:`verbeval.bench.snakemake_jobs`).

* **workflow**: the agreement workflow's ``table2`` target on the bench models (tiny random models
  on real tokenizers, built by the bench), from scratch into the bench's folder: the user's
  configuration (``--config``) with a generated configuration file on top that names those models
  and the output folders (and, with ``--quick``, 40 rows per source and 200 bootstrap resamples).
  Its outputs feed the aggregation, throughput, real and baseline parts (:class:`WorkflowOutputs`).
* **snakemake**: ``snakemake`` on any configuration (``--snakemake-config``; every output, or
  ``--snakemake-targets``), from scratch into fresh results and raw folders: what a user waits for.

Both report the run's wall time, its jobs per rule with their summed wall time, and the start-up
cost every job pays.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verbeval.bench.snakemake_jobs import SnakemakeRun, run_snakemake, startup_share

#: the --quick slice: rows per template source, bootstrap resamples
QUICK_ROWS_PER_SOURCE = 40
QUICK_RESAMPLES = 200
#: the workflow part's target: Table 2 and every job it needs
WORKFLOW_TARGET = "table2"


@dataclass(frozen=True)
class WorkflowOutputs:
    """What the workflow part's run wrote, and the settings it ran with, for the parts that read it."""

    agreement_dir: Path
    groups: list[str]
    top_cutoffs: list[float]
    bottom_cutoffs: list[float]
    resamples: int
    model_dirs: dict[str, Path]
    manifests: dict[str, Path]  # model name -> its shard store's manifest

    @property
    def templates(self) -> Path:
        return self.agreement_dir / "templates.parquet"

    @property
    def lexicon(self) -> Path:
        return self.agreement_dir / "lexicon.parquet"

    def shards(self, model: str) -> dict[str, list[Path]]:
        """``{group: [shard paths]}`` of a model's store."""
        from verbeval.agreement.engine.shardstore import manifest_shards

        return manifest_shards(self.manifests[model])


def workflow_overlay(run_dir: Path, model_dirs: dict[str, Path], *, quick: bool, threads: int) -> dict[str, Any]:
    """The configuration the workflow part puts on top of the user's: the bench models, output
    folders under ``run_dir``, inference on the CPU with ``threads`` threads per job, and the
    ``--quick`` slice."""
    overlay: dict[str, Any] = {
        "results_dir": str(run_dir / "results"),
        "raw_dir": str(run_dir / "raw"),
        "models": [{"id": str(d), "name": n} for n, d in model_dirs.items()],
        "inference": {"device": "cpu", "threads": threads},
    }
    if quick:
        overlay["agreement"] = {
            "max_rows_per_source": QUICK_ROWS_PER_SOURCE,
            "bootstrap": {"resamples": QUICK_RESAMPLES},
        }
    return overlay


def bench_folder(run_dir: Path) -> AbstractContextManager[Path]:
    """``run_dir`` emptied for a run of the bench, its files recorded when the run ends: only when
    every file in it is one an earlier run of the bench recorded (verbeval.core.outfolders.run_folder),
    never a user's folder."""
    from verbeval.core.outfolders import run_folder

    return run_folder(run_dir, "bench")


def plan_workflow(
    config: str | Path, run_dir: Path, model_dirs: dict[str, Path], *, quick: bool, threads: int
) -> tuple[list[Path], WorkflowOutputs, dict[str, Any]]:
    """Write :func:`workflow_overlay` into ``run_dir`` and plan the run as the Snakefile does: the
    ``--configfile`` files of the run, what it will write (from the workflow's plan of those
    files; config/config.yaml, which the Snakefile reads first, holds the schema's defaults) and
    the plan's agreement settings."""
    import yaml

    from verbeval.workflow.loading import plan_from_files

    overlay = run_dir / "bench-config.yaml"
    overlay.write_text(
        yaml.safe_dump(workflow_overlay(run_dir, model_dirs, quick=quick, threads=threads), sort_keys=False)
    )
    files = [Path(config), overlay]
    plan = plan_from_files(files)
    out = WorkflowOutputs(
        Path(plan.agreement_dir),
        list(plan.group_ids),
        list(plan.agreement["top_cutoffs"]),
        list(plan.agreement["bottom_cutoffs"]),
        int(plan.agreement["bootstrap"]["resamples"]),
        dict(model_dirs),
        {n: Path(plan.shard_manifest(plan.agreement_dir).format(model=n)) for n in model_dirs},
    )
    return files, out, plan.agreement


def bench_workflow(
    config: str | Path, workdir: Path, model_dirs: dict[str, Path], *, quick: bool, threads: int, cores: int
) -> tuple[dict[str, Any], WorkflowOutputs]:
    """Run ``snakemake table2`` on ``config`` with :func:`workflow_overlay` from scratch in
    ``workdir/workflow``; its figures and what it wrote.

    Per model: the contexts and template rows of its shards, and the wall time of its inference
    job (rule ``infer``: start-up, model load, every group; a model that is also a SimVerb model
    computes its SimVerb-3500 embeddings in that job too) and of its aggregation job."""
    from verbeval.agreement.engine.shards import read_shard_meta

    with bench_folder(workdir / "workflow") as run_dir:
        files, out, agr = plan_workflow(config, run_dir, model_dirs, quick=quick, threads=threads)
        run = run_snakemake(configfiles=files, run_dir=run_dir, targets=[WORKFLOW_TARGET], cores=cores)
    models: dict[str, dict[str, Any]] = {}
    for name in model_dirs:
        metas = [read_shard_meta(p) for paths in out.shards(name).values() for p in paths]
        models[name] = model_figures(
            run, out, name, contexts=sum(m["n_contexts"] for m in metas), rows=sum(m["n_rows"] for m in metas)
        )
    figures = {
        **run.summary(),
        "target": WORKFLOW_TARGET,
        "configfiles": [str(f) for f in files],
        "quick": quick,
        "threads": threads,
        "groups": out.groups,
        "rows_per_source": agr["max_rows_per_source"],
        "bootstrap_resamples": out.resamples,
        "job_s_total": round(sum(j.wall_s for j in run.jobs), 3),
        "models": models,
        **startup_share(run),
        "results_dir": str(run_dir / "results"),
    }
    return figures, out


def model_figures(run: SnakemakeRun, out: WorkflowOutputs, name: str, *, contexts: int, rows: int) -> dict[str, Any]:
    """One model's figures in a workflow run: its inference job (the one writing its shard manifest)
    and its aggregation job (the one writing its first group's summary)."""
    infer = run.job_writing(out.manifests[name])
    aggregate = run.job_writing(out.agreement_dir / name / out.groups[0] / "summary.csv")
    return {
        "contexts": contexts,
        "rows": rows,
        "infer_job_s": round(infer.wall_s, 3),
        "contexts_per_s_infer_job": round(contexts / infer.wall_s, 1) if infer.wall_s > 0 else None,
        "aggregate_job_s": round(aggregate.wall_s, 3),
    }


def bench_snakemake(
    config: str | Path, workdir: Path, cores: int, extra_config: Sequence[str] = (), targets: Sequence[str] = ()
) -> dict[str, Any]:
    """What a user waits for: ``snakemake [TARGETS] --cores N --configfile CONFIG`` (no targets:
    the default one, every output) from scratch, run from the current directory with fresh
    results/raw folders under ``workdir/snakemake``, start-up and every job included; the jobs per
    rule, their wall times and the start-up share."""
    run = run_from_scratch([config], workdir / "snakemake", cores=cores, config_values=extra_config, targets=targets)
    return {**run.summary(), **startup_share(run)}


def run_from_scratch(
    configfiles: Sequence[str | Path],
    run_dir: Path,
    *,
    cores: int,
    config_values: Sequence[str] = (),
    targets: Sequence[str] = (),
) -> SnakemakeRun:
    """``snakemake`` on ``configfiles`` from scratch, from the current directory: ``run_dir`` emptied,
    the run's results and raw folders inside it (``config_values``: more ``--config KEY=VALUE``)."""
    with bench_folder(run_dir) as run_dir:
        return run_snakemake(
            configfiles=configfiles,
            run_dir=run_dir,
            targets=targets,
            cores=cores,
            config_values=[f"results_dir={run_dir / 'results'}", f"raw_dir={run_dir / 'raw'}", *config_values],
        )

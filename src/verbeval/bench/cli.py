"""The ``bench`` sub-command (benchmarks, docs/performance.md): its arguments and its handler."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from verbeval.bench.output_hashes import DEFAULT_CONFIGS, compare_trees, table
from verbeval.core.cliutil import Add


def cmd_bench(a: argparse.Namespace) -> None:
    """Run the benchmark (:func:`verbeval.bench.runner.run_bench`)."""
    from verbeval.bench.runner import run_bench

    shared = a.shared or os.environ.get("VERBEVAL_SHARED", "../shared")
    run_bench(
        out=a.out,
        quick=a.quick,
        config=a.config,
        shared=shared,
        workdir=a.workdir,
        threads=a.threads,
        cpu_batch=a.batch_size,
        gpu_batch=a.gpu_batch_size,
        baseline_rows=a.baseline_rows,
        parts=a.parts.split(","),
        snakemake_config=a.snakemake_config,
        snakemake_cores=a.snakemake_cores,
        snakemake_extra=a.snakemake_config_values,
        snakemake_targets=a.snakemake_targets,
        ggufs=a.gguf,
        repeats=a.repeats,
        sweep_revisions=[int(n) for n in a.sweep_revisions.split(",") if n.strip()],
        sweep_dry_run=a.sweep_dry_run,
        sweep_tree=a.sweep_tree,
    )


def register(add: Add) -> None:
    """``bench``."""
    s = add(
        "bench",
        cmd_bench,
        "benchmarks: workflow phases, aggregation, inference throughput (CPU/GPU), "
        "and the paper-style baseline; figures to JSON",
        "See docs/performance.md. Not a rule.",
    )
    s.add_argument("--out", default="results-bench/bench.json", help="output: the figures (JSON)")
    s.add_argument("--quick", action="store_true", help="CI slice: 40 rows per source, two tiny models")
    s.add_argument(
        "--config",
        default="config/tiny-full.yaml",
        help="configuration of the workflow part (data mirror, groups, cutoffs; its models are replaced)",
    )
    s.add_argument("--shared", help="shared/ with tokenizers/ (default: $VERBEVAL_SHARED or ../shared)")
    s.add_argument("--workdir", default="results-bench", help="where the benchmark's models and workflow runs go")
    s.add_argument("--threads", type=int, default=1, help="CPU threads (1: as one Snakemake job)")
    s.add_argument("--batch-size", type=int, default=64, help="CPU batch size (throughput and real parts)")
    s.add_argument("--gpu-batch-size", type=int, default=256, help="GPU batch size (throughput part, on CUDA)")
    s.add_argument("--baseline-rows", type=int, help="template rows the baseline runs (default 8 quick, 150 full)")
    s.add_argument(
        "--parts",
        default="workflow,aggregation,throughput,baseline",
        help="comma-separated parts: workflow (snakemake table2 on the bench models, from scratch; "
        "aggregation, throughput, real and baseline read its outputs), "
        "aggregation, throughput, baseline, postprocess (softmax and form statistics per "
        "context for 50k, 100k and 256k vocabularies, CPU and CUDA; needs no workflow run), api (one "
        "verbeval.agreement.evaluate call on a tiny and a small GPT-2, 100 rows per source, 40 with --quick, "
        "with and without the suite's loading; needs no workflow run), real (the "
        "pipeline against the raw forward pass of the real models given with --gguf; skipped, "
        "with the reason printed, when none is there), snakemake (snakemake on --snakemake-config, "
        "every target, as a user runs it), sweep (a checkpoint sweep: one model entry with N revisions of a "
        "tiny GPT-2 on the real GPT-2 vocabulary, the default target from scratch for each N of --sweep-revisions, "
        "--snakemake-cores, --snakemake-config-values; the marginal wall time per revision, the logs' forward + "
        "scoring time per revision, and the dry run of a --sweep-dry-run revision sweep), paper (on CUDA: config/config.yaml from scratch with its four models "
        "built at the paper's sizes with random weights, --snakemake-cores, --snakemake-config-values; then "
        "each model's pipeline against its raw forward pass in float32 and bfloat16, --gpu-batch-size; "
        "skipped without CUDA)",
    )
    s.add_argument(
        "--gguf",
        nargs="*",
        default=[],
        metavar="FILE",
        help="GGUF model files of the real part (e.g. SmolLM2-135M, Gemma 3 270M; docs/performance.md), "
        "dequantised to float32 by transformers",
    )
    s.add_argument("--repeats", type=int, help="timed rounds of the real part, best of (default 1 quick, 3 full)")
    s.add_argument("--snakemake-config", help="config of the snakemake part (default: --config)")
    s.add_argument(
        "--snakemake-targets",
        nargs="*",
        default=[],
        metavar="TARGET",
        help="targets of the snakemake part (default: the workflow's default target, every output)",
    )
    s.add_argument("--snakemake-cores", type=int, default=2, help="--cores of the workflow and snakemake parts")
    s.add_argument(
        "--snakemake-config-values",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="--config values of the snakemake part (e.g. data_mirror=../shared/data)",
    )
    s.add_argument(
        "--sweep-revisions",
        default="2,8,32",
        metavar="N,N,...",
        help="sweep part: the numbers of revisions run, each from scratch",
    )
    s.add_argument(
        "--sweep-dry-run",
        type=int,
        default=1000,
        metavar="N",
        help="sweep part: revisions of the sweep whose dry run (snakemake -n) is timed (0: none)",
    )
    s.add_argument(
        "--sweep-tree",
        metavar="DIR",
        help="sweep part: run the workflow of another checkout (snakemake from DIR, its verbeval through "
        "PYTHONPATH=DIR/src), e.g. a rework's; default: the current directory's",
    )


def cmd_bench_hashes(a: argparse.Namespace) -> None:
    shared = Path(a.shared or os.environ.get("VERBEVAL_SHARED", "../shared")).resolve()
    rows = compare_trees(
        Path(a.old).resolve(),
        Path(a.new).resolve(),
        a.configs,
        Path(a.workdir).resolve(),
        cores=a.cores,
        config_values=a.config_values,
        shared=shared,
        sweep_revisions=a.sweep_revisions,
        patterns=a.exclude,
    )
    print(table(rows))
    if not all(r.same for r in rows):
        raise SystemExit(1)


def register_hashes(add: Add) -> None:
    """``bench-hashes``."""
    s = add(
        "bench-hashes",
        cmd_bench_hashes,
        "run configurations with two source trees and compare every output's sha256 (a refactor must leave "
        "every output byte-identical)",
        "See docs/performance.md, 'Outputs byte for byte'. Exit code 1 on any difference. Not a rule.",
    )
    s.add_argument("--old", required=True, help="the old source tree (a checkout of the repository)")
    s.add_argument("--new", required=True, help="the new source tree")
    s.add_argument(
        "--configs",
        nargs="+",
        default=list(DEFAULT_CONFIGS),
        metavar="CONFIG",
        help="configuration files, relative to a tree's root, or 'sweep' (the bench's checkpoint sweep)",
    )
    s.add_argument("--workdir", default="results-hashes", help="where the runs' copies of the trees go")
    s.add_argument("--cores", type=int, default=2, help="snakemake --cores")
    s.add_argument(
        "--config-values",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="snakemake --config values of every run (e.g. data_mirror=/path/to/shared/data)",
    )
    s.add_argument("--shared", help="shared/ with tokenizers/ (default: $VERBEVAL_SHARED or ../shared)")
    s.add_argument("--sweep-revisions", type=int, default=32, help="revisions of the 'sweep' configuration")
    s.add_argument("--exclude", nargs="*", default=[], metavar="GLOB", help="more relative paths left out")

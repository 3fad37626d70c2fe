"""The ``bench`` sub-command (benchmarks, docs/performance.md): its arguments and its handler."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from verbeval.bench.output_hashes import DEFAULT_CONFIGS, compare_trees, table
from verbeval.bench.sweep_sizes import SWEEP_SIZES
from verbeval.core.cliutil import Add
from verbeval.core.steps import THREADS, Input, Option, Output, add_options


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
        sweep_size=a.sweep_size,
    )


def register(add: Add) -> None:
    """``bench``."""
    s = add(
        "bench",
        cmd_bench,
        "benchmarks: workflow phases, aggregation, inference throughput (CPU/GPU), "
        "and the paper-style baseline; figures to JSON",
        "See docs/performance.md. Not a rule.",
        group="user",
    )
    add_options(
        s,
        Output("--out", "output: the figures (JSON)", default="results-bench/bench.json", required=False),
        Option("--quick", "CI slice: 40 rows per source, two tiny models", action="store_true"),
        Input(
            "--config",
            "configuration of the workflow part (data mirror, groups, cutoffs; its models are replaced)",
            default="config/tiny-full.yaml",
            required=False,
        ),
        Input("--shared", "shared/ with tokenizers/ (default: $VERBEVAL_SHARED or ../shared)", required=False),
        Option("--workdir", "where the benchmark's models and workflow runs go", default="results-bench"),
        THREADS.but(default=1, help="CPU threads (1: as one Snakemake job)"),
        Option("--batch-size", "CPU batch size (throughput and real parts)", type=int, default=64),
        Option("--gpu-batch-size", "GPU batch size (throughput part, on CUDA)", type=int, default=256),
        Option("--baseline-rows", "template rows the baseline runs (default 8 quick, 150 full)", type=int),
        Option(
            "--parts",
            "comma-separated parts: workflow (snakemake table2 on the bench models, from scratch; "
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
            default="workflow,aggregation,throughput,baseline",
        ),
        Input(
            "--gguf",
            "GGUF model files of the real part (e.g. SmolLM2-135M, Gemma 3 270M; docs/performance.md), "
            "dequantised to float32 by transformers",
            nargs="*",
            default=[],
            metavar="FILE",
            required=False,
        ),
        Option("--repeats", "timed rounds of the real part, best of (default 1 quick, 3 full)", type=int),
        Input("--snakemake-config", "config of the snakemake part (default: --config)", required=False),
        Option(
            "--snakemake-targets",
            "targets of the snakemake part (default: the workflow's default target, every output)",
            nargs="*",
            default=[],
            metavar="TARGET",
        ),
        Option("--snakemake-cores", "--cores of the workflow and snakemake parts", type=int, default=2),
        Option(
            "--snakemake-config-values",
            "--config values of the snakemake part (e.g. data_mirror=../shared/data)",
            nargs="*",
            default=[],
            metavar="KEY=VALUE",
        ),
        Option(
            "--sweep-revisions",
            "sweep part: the numbers of revisions run, each from scratch",
            default="2,8,32",
            metavar="N,N,...",
        ),
        Option(
            "--sweep-dry-run",
            "sweep part: revisions of the sweep whose dry run (snakemake -n) is timed (0: none)",
            type=int,
            default=1000,
            metavar="N",
        ),
        Option(
            "--sweep-size",
            "sweep part: the checkpoints' shape, random weights seeded per revision (tiny: 2 layers, hidden 32; "
            "gpt2-small: 12 layers, hidden 768, 0.5 GB each; pythia-160m: GPT-NeoX, 12 layers, hidden 768); "
            "with the plan timed cold and warm and each weight load against reading the weights once",
            choices=list(SWEEP_SIZES),
            default="tiny",
        ),
        Input(
            "--sweep-tree",
            "sweep part: run the workflow of another checkout (snakemake from DIR, its verbeval through "
            "PYTHONPATH=DIR/src), e.g. a rework's; default: the current directory's",
            metavar="DIR",
            required=False,
        ),
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
        group="maintainer",
    )
    add_options(
        s,
        Input("--old", "the old source tree (a checkout of the repository)"),
        Input("--new", "the new source tree"),
        Input(
            "--configs",
            "configuration files, relative to a tree's root, or 'sweep' (the bench's checkpoint sweep)",
            nargs="+",
            default=list(DEFAULT_CONFIGS),
            metavar="CONFIG",
            required=False,
        ),
        Option("--workdir", "where the runs' copies of the trees go", default="results-hashes"),
        Option("--cores", "snakemake --cores", type=int, default=2),
        Option(
            "--config-values",
            "snakemake --config values of every run (e.g. data_mirror=/path/to/shared/data)",
            nargs="*",
            default=[],
            metavar="KEY=VALUE",
        ),
        Input("--shared", "shared/ with tokenizers/ (default: $VERBEVAL_SHARED or ../shared)", required=False),
        Option("--sweep-revisions", "revisions of the 'sweep' configuration", type=int, default=32),
        Option("--exclude", "more relative paths left out", nargs="*", default=[], metavar="GLOB"),
    )

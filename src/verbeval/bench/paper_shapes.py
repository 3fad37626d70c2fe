"""The paper part of the benchmark: the paper configuration at the paper's model sizes, on a GPU.

No model hub is needed: the four models of ``config/config.yaml`` (bert-large-cased,
bert-large-uncased, roberta-large, gpt2-xl) are built with random weights at the released models'
sizes (layers, hidden size, heads; intermediate size 4 x hidden) on the real tokenizers, so the
work of every job is the paper's and the numbers are meaningless (every output marks them randomly
initialised). The part runs the paper configuration from scratch with those four folders as its
models (``snakemake --cores N``, the workflow profile's ``gpu=1``: what a user runs) and times, per
model on CUDA in float32 and bfloat16, the pipeline against the raw forward pass on the run's
templates (:func:`verbeval.bench.throughput.throughput`). Without CUDA it is skipped with the reason:
at these sizes the CPU run takes hours.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verbeval.bench.model_specs import ModelSpec, build_model

log = logging.getLogger(__name__)

#: the paper's four models at their released sizes (config/config.yaml), on the tokenizers in shared/
PAPER_MODELS = (
    ModelSpec("bert-large-cased", "bert", "bert-base-cased", 24, 1024, 16),
    ModelSpec("bert-large-uncased", "bert", "bert-base-uncased", 24, 1024, 16),
    ModelSpec("roberta-large", "roberta", "roberta-large", 24, 1024, 16),
    ModelSpec("gpt2-xl", "gpt2", "gpt2", 48, 1600, 25),
)
#: the configuration the part runs, with its models replaced by the built folders
PAPER_CONFIG = "config/config.yaml"


def models_config(model_dirs: dict[str, Path]) -> str:
    """The configuration file that replaces the paper configuration's models by ``model_dirs``."""
    import yaml

    return yaml.safe_dump({"models": [{"id": str(d.resolve()), "name": n} for n, d in model_dirs.items()]})


def bench_paper(
    shared: Path,
    workdir: Path,
    *,
    cores: int,
    config_values: Sequence[str] = (),
    n_contexts: int = 4096,
    batch_size: int = 512,
    repeats: int = 2,
    specs: Sequence[ModelSpec] = PAPER_MODELS,
    require_cuda: bool = True,
) -> dict[str, Any]:
    """Build ``specs`` under ``workdir/models``, run :data:`PAPER_CONFIG` with them from scratch in
    ``workdir/paper`` (``config_values``: more ``--config KEY=VALUE``, e.g. a data mirror), then time
    each model on CUDA in float32 and bfloat16 (``n_contexts`` contexts, ``batch_size``). Without
    CUDA: skipped with the reason (``require_cuda=False`` runs it on the CPU: tests, tiny ``specs``)."""
    import pandas as pd
    import torch

    from verbeval.bench.workflow_runs import run_from_scratch
    from verbeval.core.io import write_text

    cuda = torch.cuda.is_available()
    if require_cuda and not cuda:
        reason = "no CUDA device: paper part skipped (the paper's model sizes take hours on a CPU)"
        print(reason)
        return {"skipped": reason}
    model_dirs = {s.name: build_model(s, shared, workdir / "models") for s in specs}
    extra = workdir / "paper-models.yaml"
    write_text(extra, models_config(model_dirs))
    run_dir = workdir / "paper"
    run = run_from_scratch([PAPER_CONFIG, extra], run_dir, cores=cores, config_values=config_values)
    agreement = run_dir / "results" / "agreement"
    rows = _throughput(
        model_dirs,
        pd.read_parquet(agreement / "templates.parquet"),
        pd.read_parquet(agreement / "lexicon.parquet"),
        device="cuda" if cuda else "cpu",
        n_contexts=n_contexts,
        batch_size=batch_size,
        repeats=repeats,
    )
    return {
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "models": {s.name: {"layers": s.layers, "hidden": s.hidden, "heads": s.heads} for s in specs},
        "snakemake": run.summary(),
        "jobs": [
            {"rule": j.rule, "start_s": round(j.start - run.jobs[0].start, 2), "wall_s": round(j.wall_s, 2)}
            for j in run.jobs
        ],
        "throughput": rows,
    }


def _throughput(
    model_dirs: dict[str, Path],
    templates: Any,
    lexicon: Any,
    *,
    device: str,
    n_contexts: int,
    batch_size: int,
    repeats: int,
) -> list[dict[str, Any]]:
    """Pipeline against the raw forward pass of each model in float32 and bfloat16 on ``device``."""
    from verbeval.bench.throughput import time_model

    rows = []
    for name, folder in model_dirs.items():
        for dtype in ("float32", "bfloat16"):
            _, _, load_s, r = time_model(
                folder, device, dtype, templates, lexicon, n_contexts=n_contexts, batch_size=batch_size, repeats=repeats
            )
            r["pipeline_over_raw_forward"] = round(r["pipeline_ctx_per_s"] / r["forward_raw_ctx_per_s"], 3)
            rows.append({"model": name, "device": device, "dtype": dtype, "load_s": round(load_s, 2), **r})
            log.info("bench paper: %s", rows[-1])
    return rows

"""Benchmarks: inference throughput, aggregation time, end-to-end phases, and a baseline.

``verbeval bench --out bench.json`` (``--quick`` for the CI slice) runs, in one process:

1. **workflow**: the agreement workflow end to end, in-process, one phase after the other (fetch,
   normalise, lemmas, inference, aggregate, report), on the whole M&L + BLiMP suite (``--quick``:
   40 rows per source) with tiny random models on the real BERT-cased and GPT-2 tokenizers,
   one thread (as one Snakemake job).
2. **aggregation**: the aggregation of every group of each model from those shards, in two
   worker processes (as ``snakemake --cores 2``), with the time split into reading shards,
   scoring contexts, TSE and bootstrap, and each worker's peak RSS.
3. **throughput**: contexts per second of the inference pipeline for masked and causal models of
   several sizes (tiny, and the all-MiniLM-L6-v2 shape) on the real tokenizers, against the
   model's own forward pass at the same batch size (head at the predicted position only, and the
   raw full-logits forward), on CPU and, where CUDA is present, on GPU in float32 and bfloat16
   with the peak GPU memory.
4. **baseline**: a straightforward re-implementation of the paper's released code (one forward
   pass per template row, a Python dict over the vocabulary per row, a Python sort of the
   vocabulary, Python loops over lemmas and cutoffs) run on an evenly spaced sample of rows with
   the same models, its per-row time extrapolated to every row of the suite and compared with
   verbeval's measured inference + aggregation time (a ratio); its scores are compared with
   verbeval's for the same rows.

Every figure goes to a JSON file, together with the machine's load average (the figures are
only comparable within one run). Nothing asserts a time.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import json
import logging
import math
import multiprocessing
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

log = logging.getLogger(__name__)

PHASES = ("fetch", "normalise", "lemmas", "inference", "aggregate", "report")


@dataclass(frozen=True)
class ModelSpec:
    """A randomly initialised model on a real tokenizer (``tokenizers/<tokenizer>``)."""

    name: str
    arch: str
    tokenizer: str
    layers: int
    hidden: int
    heads: int


WORKFLOW_MODELS = (ModelSpec("tiny-bert-cased", "bert", "bert-base-cased", 2, 32, 2),
                   ModelSpec("tiny-gpt2", "gpt2", "gpt2", 2, 32, 2))
THROUGHPUT_MODELS = WORKFLOW_MODELS + (
    ModelSpec("small-bert-cased", "bert", "bert-base-cased", 4, 128, 4),
    ModelSpec("small-gpt2", "gpt2", "gpt2", 4, 128, 4),
    ModelSpec("all-MiniLM-L6-v2-shape", "bert", "bert-base-uncased", 6, 384, 12),
)


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB.

    Linux: ``VmHWM`` of ``/proc/self/status`` (the peak of this process's own memory; unlike
    ``ru_maxrss`` it does not inherit the parent's peak across fork/exec); elsewhere ``ru_maxrss``.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    scale = 2**20 if platform.system() == "Darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_time(fn: Callable[[], None], device: torch.device, repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` timed calls of ``fn`` after one warm-up call, the
    device synchronised around each."""
    fn()
    _sync(device)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def build_model(spec: ModelSpec, shared: Path, models_dir: Path) -> Path:
    from verbeval.core.tiny_models import make_tiny_model

    out = models_dir / spec.name
    if not (out / "config.json").exists():
        make_tiny_model(shared / "tokenizers" / spec.tokenizer, spec.arch, out, layers=spec.layers,
                        hidden=spec.hidden, heads=spec.heads)
    return out


# --------------------------------------------------------------------------- 1. workflow phases


def _cli(cli: Callable[[Sequence[str]], int], argv: list[str]) -> None:
    """Run ``verbeval -q ARGV`` in-process through ``cli`` (:func:`verbeval.cli.main`, passed in by
    the ``bench`` sub-command, so that this package does not import the command line)."""
    if cli(["-q", *argv]) != 0:
        raise RuntimeError(f"verbeval {' '.join(argv)} failed")


def run_workflow(config_path: str | Path, workdir: Path, model_dirs: dict[str, Path], *, quick: bool,
                 cli: Callable[[Sequence[str]], int], threads: int = 1) -> dict[str, Any]:
    """Run the agreement workflow's steps in-process, phase by phase; return timings and counts.

    Paths, groups, cutoffs and bootstrap settings come from ``config_path``; its models are
    replaced by ``model_dirs``; ``quick`` keeps 40 rows per source and 200 bootstrap resamples.
    """
    from verbeval.core.config import load_config
    from verbeval.core.manifest import load_manifest, local_filename
    from verbeval.agreement.shards import read_shard_meta
    from verbeval.agreement.groups import load_groups

    cfg = load_config(config_path)
    agr = cfg["agreement"]
    manifest = load_manifest(cfg["manifest"])
    groups = [g for g in load_groups(agr["groups_file"]) if agr["groups"] is None or g["id"] in agr["groups"]]
    gids = [g["id"] for g in groups]
    sources = list(dict.fromkeys([s for g in groups for s in g["sources"]] + agr["verb_lists"]))
    raw, out = workdir / "raw", workdir / "agreement"
    resamples = 200 if quick else agr["bootstrap"]["resamples"]
    rows_per_source = 40 if quick else agr["max_rows_per_source"]
    top = ",".join(f"{p:g}" for p in agr["top_cutoffs"])
    bottom = ",".join(f"{p:g}" for p in agr["bottom_cutoffs"])

    def raw_path(s: str) -> Path:
        return raw / s / local_filename(manifest[s])

    times: dict[str, float] = {}

    def phase(name: str, steps: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        steps()
        times[name] = time.perf_counter() - t0
        log.info("bench workflow: %s %.1f s", name, times[name])

    mirror = ["--mirror", str(cfg["data_mirror"])] if cfg["data_mirror"] else []
    phase("fetch", lambda: [_cli(cli, ["fetch", "--manifest", cfg["manifest"], "--name", s, "--out", str(raw_path(s)),
                                  *mirror]) for s in sources])

    def inputs(names: Sequence[str]) -> list[str]:
        return [x for s in names for x in ("--input", f"{s}={raw_path(s)}")]

    templates = out / "templates.parquet"
    phase("normalise", lambda: _cli(cli, [
        "templates", "--manifest", cfg["manifest"], "--groups-file", agr["groups_file"], "--groups", ",".join(gids),
        "--errata", agr["errata"], *inputs([s for g in groups for s in g["sources"]]), "--out", str(templates),
        "--rejects", str(out / "template_rejects.csv"),
        *(["--skip-bad-rows"] if agr["skip_bad_rows"] else []),
        *(["--max-rows-per-source", str(rows_per_source)] if rows_per_source else [])]))

    def lemmas() -> None:
        _cli(cli, ["lexicon", "--manifest", cfg["manifest"], *inputs(agr["verb_lists"]), "--overrides",
              agr["inflection_overrides"], "--out", str(out / "lexicon.parquet")])
        for name, mdir in model_dirs.items():
            _cli(cli, ["lemmas", "--model", str(mdir), "--lexicon", str(out / "lexicon.parquet"),
                  "--out", str(out / name / "lemmas.parquet")])

    phase("lemmas", lemmas)
    per_model: dict[str, dict[str, Any]] = {n: {} for n in model_dirs}
    for name, mdir in model_dirs.items():
        t0 = time.perf_counter()
        manifest = out / name / "shards" / "manifest.json"
        _cli(cli, ["infer", "--model", str(mdir), "--device", "cpu", "--batch-size", str(cfg["inference"]["batch_size"]),
              "--threads", str(threads), "--top-k", str(cfg["inference"]["top_k"]), "--templates", str(templates),
              "--lemmas", str(out / name / "lemmas.parquet"), "--groups", ",".join(gids), "--n-chunks", "1",
              "--manifest", str(manifest), "--no-progress"])
        per_model[name]["inference_s"] = time.perf_counter() - t0
        metas = [read_shard_meta(out / name / "shards" / g / "1-of-1.parquet") for g in gids]
        per_model[name]["contexts"] = sum(m["n_contexts"] for m in metas)
        per_model[name]["rows"] = sum(m["n_rows"] for m in metas)
        per_model[name]["contexts_per_s"] = per_model[name]["contexts"] / per_model[name]["inference_s"]
    times["inference"] = sum(m["inference_s"] for m in per_model.values())

    for name in model_dirs:
        t0 = time.perf_counter()
        _cli(cli, ["aggregate", "--templates", str(templates), "--groups", ",".join(gids), "--model-name", name,
              "--manifest", str(out / name / "shards" / "manifest.json"), "--top-cutoffs", top,
              "--bottom-cutoffs", bottom, "--resamples", str(resamples), "--seed", str(agr["bootstrap"]["seed"]),
              "--confidence", str(agr["bootstrap"]["confidence"]), "--out-dir", str(out / name)])
        per_model[name]["aggregate_s"] = time.perf_counter() - t0
    times["aggregate"] = sum(m["aggregate_s"] for m in per_model.values())
    phase("report", lambda: _cli(cli, [
        "table", "--groups-file", agr["groups_file"], "--models", ",".join(model_dirs),
        "--summaries", *[str(out / n / g / "summary.csv") for n in model_dirs for g in gids],
        "--csv", str(out / "table2.csv"), "--md", str(out / "table2.md"), "--tex", str(out / "table2.tex"),
        "--all-csv", str(out / "summary_all.csv"), "--metrics", str(out / "metrics.json")]))
    return {"config": str(config_path), "quick": quick, "threads": threads, "groups": gids,
            "rows_per_source": rows_per_source, "bootstrap_resamples": resamples,
            "phases_s": {p: round(times[p], 3) for p in PHASES}, "total_s": round(sum(times.values()), 3),
            "models": per_model, "workdir": str(workdir)}


# --------------------------------------------------------------------------- 2. aggregation


def aggregate_group(shard_paths: list[str], templates_path: str, group: str, model: str,
                    top: list[float], bottom: list[float], resamples: int) -> dict[str, float]:
    """Aggregate one (model, group) in memory, timing each step (worker-process entry point)."""
    from verbeval.agreement.aggregate import context_scores, read_shards, row_tse, summarise

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
    return {"read_s": t1 - t0, "scores_s": t2 - t1, "tse_s": t3 - t2, "bootstrap_s": t4 - t3,
            "contexts": len(scores), "peak_rss_mib": peak_rss_mib()}


def _warm_worker() -> None:
    """Import what a worker needs before the timed work starts."""
    from verbeval.agreement import aggregate  # noqa: F401


def bench_aggregation(workflow: dict[str, Any], config_path: str | Path, workers: int = 2) -> dict[str, Any]:
    """Aggregate every group of each workflow model from its shards with ``workers`` processes."""
    from verbeval.core.config import load_config

    agr = load_config(config_path)["agreement"]
    out = Path(workflow["workdir"]) / "agreement"
    res: dict[str, Any] = {"workers": workers}
    ctx = multiprocessing.get_context("spawn")
    # one BLAS/OpenMP thread per worker (as one Snakemake job per core): spawned workers inherit this
    saved = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    os.environ.update({k: "1" for k in saved})
    try:
        return _aggregate_pools(workflow, agr, out, res, ctx, workers)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _aggregate_pools(workflow: dict[str, Any], agr: dict[str, Any], out: Path, res: dict[str, Any], ctx: Any,
                     workers: int) -> dict[str, Any]:
    for name in workflow["models"]:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            # warm the workers (imports) before timing
            for f in [pool.submit(_warm_worker) for _ in range(workers)]:
                f.result()
            t0 = time.perf_counter()
            futs = [pool.submit(aggregate_group, [str(out / name / "shards" / g / "1-of-1.parquet")],
                                str(out / "templates.parquet"), g, name, list(agr["top_cutoffs"]),
                                list(agr["bottom_cutoffs"]), workflow["bootstrap_resamples"])
                    for g in workflow["groups"]]
            parts = [f.result() for f in futs]
            wall = time.perf_counter() - t0
        res[name] = {"wall_s": round(wall, 3), "contexts": sum(p["contexts"] for p in parts),
                     **{k: round(sum(p[k] for p in parts), 3) for k in ("read_s", "scores_s", "tse_s", "bootstrap_s")},
                     "peak_rss_mib_per_worker": round(max(p["peak_rss_mib"] for p in parts), 1)}
    return res


# --------------------------------------------------------------------------- post-processing, large vocabularies

#: vocabulary sizes of the post-processing benchmark: GPT-NeoX / OLMo-1 (50,280), OLMo-2 dolma2
#: (100,278, cl100k-based like Llama 3) and a 256,000-entry head (Gemma-sized; no tokenizer needed)
POSTPROCESS_VOCABS = (50_280, 100_278, 256_000)
#: eligible forms scored per context: 2 x 1,288 eligible lemmas of the OLMo-2 tokenizer (docs/models.md)
POSTPROCESS_FORMS = 2 * 1_288


def bench_postprocess(vocab_sizes: Sequence[int] = POSTPROCESS_VOCABS, n_forms: int = POSTPROCESS_FORMS,
                      batch_size: int = 256, devices: Sequence[str] = ("cpu", "cuda"),
                      logit_dtypes: Sequence[str] = ("float32", "bfloat16"), repeats: int = 3,
                      seed: int = 0) -> dict[str, Any]:
    """Time of the per-context work after the forward pass, per vocabulary size.

    That work is the float64 softmax over the vocabulary and :func:`verbeval.agreement.form_statistics`
    (each context's vocabulary sorted once; probability, mass above and mass below of every eligible
    form). The logits are random normal (standard deviation 3, a peaked distribution like an LM's);
    ``bfloat16`` rounds them to bfloat16 first, as a model run in bfloat16 returns them, which makes
    many probabilities tie and exercises the exact tie ranking. The best of ``repeats`` timed runs
    of one batch is reported, in milliseconds per context. CUDA rows appear only when a GPU is present.
    """
    from verbeval.agreement.metrics import form_statistics, probabilities
    from verbeval.core.models import torch_dtype

    gen = torch.Generator().manual_seed(seed)
    rows: list[dict[str, Any]] = []
    for device_name in devices:
        if device_name == "cuda" and not torch.cuda.is_available():
            continue
        dev = torch.device(device_name)
        for v in vocab_sizes:
            forms = torch.randperm(v, generator=gen)[: min(n_forms, v)].sort().values.to(dev)
            base = (torch.randn(batch_size, v, generator=gen) * 3.0)
            for dt in logit_dtypes:
                logits = base.to(torch_dtype(dt)).to(torch.float32).to(dev)
                # the inference pipeline's CPU path reuses one float64 buffer for every batch
                buf = torch.empty(logits.shape, dtype=torch.float64) if dev.type == "cpu" else None

                def run() -> None:
                    form_statistics(probabilities(logits, out=buf), forms)

                best = _best_time(run, dev, repeats)
                rows.append({"device": device_name, "vocab": v, "forms": int(len(forms)), "logits": dt,
                             "batch_size": batch_size, "ms_per_context": round(best / batch_size * 1000, 4),
                             "contexts_per_s": round(batch_size / best, 1)})
                log.info("bench postprocess: %s", rows[-1])
    return {"threads": torch.get_num_threads(), "results": rows}


# --------------------------------------------------------------------------- 3. throughput


def _contexts_sample(templates: pd.DataFrame, kind: str, n: int) -> pd.DataFrame:
    """Up to ``n`` distinct contexts spread evenly over all groups."""
    from verbeval.agreement.shards import build_contexts

    parts = [build_contexts(g.reset_index(drop=True), kind)[0] for _, g in templates.groupby("group", sort=True)]
    ctx = pd.concat(parts, ignore_index=True)
    take = np.unique(np.linspace(0, len(ctx) - 1, min(n, len(ctx))).round().astype(int))
    return ctx.iloc[take].reset_index(drop=True)


def throughput(lm: Any, contexts: pd.DataFrame, form_ids: np.ndarray, batch_size: int,
               repeats: int = 1) -> dict[str, Any]:
    """Contexts/s of the inference pipeline and of the model's forward pass on the same batches."""
    from verbeval.agreement.inference import _batches, _pad, encode_contexts, run_contexts, target_logits

    enc = encode_contexts(lm, contexts)
    dev = lm.device
    no_rows = np.zeros(0, np.int64)
    pad_id = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else (lm.tokenizer.eos_token_id or 0)
    lengths = np.array([len(s) for s in enc.ids])
    batches = [(_pad([enc.ids[i] for i in idx], pad_id, dev), torch.as_tensor(enc.target[idx], device=dev))
               for idx in _batches(lengths, batch_size)]

    def pipeline() -> None:
        run_contexts(lm, enc, form_ids, no_rows, np.zeros((0, 2), np.int64), batch_size=batch_size, progress=False)

    def head_at_target() -> None:
        with torch.inference_mode():
            for (ids, att), tgt in batches:
                target_logits(lm.model, ids, att, tgt)

    def raw_forward() -> None:
        with torch.inference_mode():
            for (ids, att), _ in batches:
                lm.model(input_ids=ids, attention_mask=att)

    out: dict[str, Any] = {"contexts": len(contexts), "batch_size": batch_size, "mean_tokens": float(lengths.mean())}
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    for key, fn in (("pipeline", pipeline), ("forward_head_at_target", head_at_target), ("forward_raw", raw_forward)):
        out[f"{key}_ctx_per_s"] = round(len(contexts) / _best_time(fn, dev, repeats), 1)
    out["forward_share_of_pipeline"] = round(out["pipeline_ctx_per_s"] / out["forward_head_at_target_ctx_per_s"], 3)
    out["raw_forward_over_pipeline"] = round(out["forward_raw_ctx_per_s"] / out["pipeline_ctx_per_s"], 3)
    if dev.type == "cuda":
        out["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated(dev) / 2**20, 1)
    else:
        out["peak_rss_mib_process"] = round(peak_rss_mib(), 1)
    return out


def bench_throughput(specs: Sequence[ModelSpec], shared: Path, models_dir: Path, templates: pd.DataFrame,
                     lexicon: pd.DataFrame, *, n_contexts: int, cpu_batch: int, gpu_batch: int,
                     threads: int, repeats: int) -> dict[str, Any]:
    from verbeval.agreement.eligibility import eligible_lemmas
    from verbeval.core.models import load_model

    torch.set_num_threads(threads)
    setups = [("cpu", "float32", cpu_batch)]
    if torch.cuda.is_available():
        setups += [("cuda", "float32", gpu_batch), ("cuda", "bfloat16", gpu_batch)]
        gpu_note = torch.cuda.get_device_name(0)
    else:
        gpu_note = "no CUDA device: GPU benchmarks skipped"
        print(gpu_note)
    rows = []
    for spec in specs:
        mdir = build_model(spec, shared, models_dir)
        for device, dtype, bs in setups:
            lm = load_model(str(mdir), device=device, dtype=dtype)
            ctx = _contexts_sample(templates, lm.kind, n_contexts * (8 if device == "cuda" else 1))
            forms = eligible_lemmas(lexicon, lm.tokenizer)[["sing_id", "plur_id"]].to_numpy(np.int64).reshape(-1)
            r = throughput(lm, ctx, forms, bs, repeats)
            rows.append({"model": spec.name, "kind": lm.kind, **asdict(spec), "device": device, "dtype": dtype,
                         "threads": threads if device == "cpu" else None, "n_forms": len(forms), **r})
            log.info("bench throughput: %s", rows[-1])
            del lm
            if device == "cuda":
                torch.cuda.empty_cache()
    return {"gpu": gpu_note, "results": rows}


# --------------------------------------------------------------------------- 3b. real models


def load_gguf(gguf: Path) -> tuple[torch.nn.Module, Any]:
    """The causal LM and tokenizer in ``gguf``, dequantised to float32 by transformers (a GGUF
    model cannot be saved again as a Hugging Face folder, so it is converted on every load)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return model.eval(), tok


def pipeline_against_forward(lm: Any, contexts: pd.DataFrame, form_ids: np.ndarray, batch_size: int,
                             repeats: int) -> dict[str, Any]:
    """Contexts/s of the inference pipeline (:func:`verbeval.agreement.inference.run_contexts`)
    and of the raw forward pass with the head at the target only (``target_logits``) on the same
    batches, timed alternately, the best of ``repeats`` each (after one warm-up of each)."""
    from verbeval.agreement.inference import _batches, _pad, encode_contexts, run_contexts, target_logits

    enc = encode_contexts(lm, contexts)
    dev = lm.device
    pad_id = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else (lm.tokenizer.eos_token_id or 0)
    lengths = np.array([len(s) for s in enc.ids])
    batches = [(_pad([enc.ids[i] for i in idx], pad_id, dev), torch.as_tensor(enc.target[idx], device=dev))
               for idx in _batches(lengths, batch_size)]

    def pipeline() -> None:
        run_contexts(lm, enc, form_ids, np.zeros(0, np.int64), np.zeros((0, 2), np.int64), batch_size=batch_size,
                     progress=False)

    def forward() -> None:
        with torch.inference_mode():
            for (ids, att), tgt in batches:
                target_logits(lm.model, ids, att, tgt)

    best = {"pipeline": math.inf, "forward": math.inf}
    for rep in range(repeats + 1):  # the first round warms up
        for key, fn in (("pipeline", pipeline), ("forward", forward)):
            _sync(dev)
            t0 = time.perf_counter()
            fn()
            _sync(dev)
            if rep:
                best[key] = min(best[key], time.perf_counter() - t0)
    pipe, fwd = len(contexts) / best["pipeline"], len(contexts) / best["forward"]
    return {"contexts": len(contexts), "batch_size": batch_size, "mean_tokens": round(float(lengths.mean()), 2),
            "pipeline_ctx_per_s": round(pipe, 1), "forward_ctx_per_s": round(fwd, 1),
            "pipeline_over_forward": round(pipe / fwd, 3),
            "postprocess_ms_per_context": round((best["pipeline"] - best["forward"]) / len(contexts) * 1000, 3)}


def bench_real(ggufs: Sequence[str | Path], templates: pd.DataFrame, lexicon: pd.DataFrame, *,
               n_contexts: int, cpu_batch: int, gpu_batch: int, threads: int, repeats: int) -> dict[str, Any]:
    """:func:`pipeline_against_forward` for real pretrained models given as GGUF files, on CPU
    (float32) and, where CUDA is present, on GPU (float32 and bfloat16). Files that are missing
    are skipped with the reason printed (and recorded)."""
    from verbeval.agreement.eligibility import eligible_lemmas
    from verbeval.core.models import LoadedModel, is_cased, torch_dtype

    torch.set_num_threads(threads)
    setups = [("cpu", "float32", cpu_batch)]
    if torch.cuda.is_available():
        setups += [("cuda", "float32", gpu_batch), ("cuda", "bfloat16", gpu_batch)]
    rows: list[dict[str, Any]] = []
    skipped = real_model_skips(ggufs)
    for path in (Path(g) for g in ggufs if Path(g).is_file()):
        t0 = time.perf_counter()
        model, tok = load_gguf(path)
        load_s = round(time.perf_counter() - t0, 1)
        for device, dtype, bs in setups:  # float32 on CPU first: the casts only go down
            dev = torch.device(device)
            lm = LoadedModel(str(path), model.to(dev, torch_dtype(dtype)), tok, "causal", is_cased(tok), dev, dtype,
                             f"gguf:{path.name}")
            ctx = _contexts_sample(templates, lm.kind, n_contexts * (8 if device == "cuda" else 1))
            forms = eligible_lemmas(lexicon, lm.tokenizer)[["sing_id", "plur_id"]].to_numpy(np.int64).reshape(-1)
            r = pipeline_against_forward(lm, ctx, forms, bs, repeats)
            rows.append({"model": path.name, "load_s": load_s, "vocab": len(tok), "n_forms": len(forms), "device": device,
                         "dtype": dtype, "threads": threads if device == "cpu" else None, **r, "load_avg": _load()})
            log.info("bench real: %s", rows[-1])
        del model, lm
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "skipped": skipped,
            "results": rows}


def real_model_skips(ggufs: Sequence[str | Path]) -> list[str]:
    """Why the real-model benchmark skips some (or all) of ``ggufs``, one line each (printed)."""
    reasons = [f"{g}: no such GGUF file: skipped" for g in ggufs if not Path(g).is_file()]
    if not ggufs:
        reasons.append("no GGUF file given (--gguf FILE ...): the real-model benchmark is skipped")
    for reason in reasons:
        print(f"bench real: {reason}")
    return reasons


# --------------------------------------------------------------------------- 4. baseline


class PaperBaseline:
    """The paper's approach, written straightforwardly: per template row one forward pass, the
    vocabulary as a Python dict of probabilities, the vocabulary ranked with a Python sort, and
    Python loops over lemmas at every cutoff. Scores follow the definitions in DESIGN.md (with
    float64 sums: Python floats), so they are an independent check of the vectorised code."""

    def __init__(self, lm: Any, lemmas: pd.DataFrame, top_cutoffs: Sequence[float], bottom_cutoffs: Sequence[float],
                 prepend_bos: bool = False) -> None:
        self.lm, self.top, self.bottom, self.bos = lm, list(top_cutoffs), list(bottom_cutoffs), prepend_bos
        tok = lm.tokenizer
        self.vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
        self.lemmas = [(s, p) for s, p in zip(lemmas["sing_id"], lemmas["plur_id"])]

    def score_row(self, left: str, right: str, plural: bool, correct: str, incorrect: str) -> dict[str, float]:
        from verbeval.agreement.eligibility import single_token_ids
        from verbeval.agreement.templates import render_context

        lm, tok = self.lm, self.lm.tokenizer
        masked = lm.kind == "masked"
        text = render_context(left, right, cased=lm.cased, masked=masked, mask_token=lm.mask_token)
        ids = tok(text, add_special_tokens=masked)["input_ids"]
        if not masked and self.bos:
            ids = [tok.bos_token_id, *ids]
        with torch.inference_mode():
            logits = lm.model(input_ids=torch.tensor([ids], device=lm.device)).logits[0]
        pos = ids.index(tok.mask_token_id) if masked else len(ids) - 1
        probs: list[float] = torch.softmax(logits[pos].double(), -1).tolist()
        word_prob = {self.vocab[i]: p for i, p in enumerate(probs)}
        ranked = sorted(range(len(probs)), key=lambda i: (-probs[i], i))
        rank = {self.vocab[i]: r for r, i in enumerate(ranked)}
        cum_top, acc = [], 0.0
        for i in ranked:
            acc += probs[i]
            cum_top.append(acc)
        cum_bottom, acc = [], 0.0
        for i in reversed(ranked):
            acc += probs[i]
            cum_bottom.append(acc)
        res: dict[str, float] = {}
        sing, plur = (single_token_ids(tok, [w])[0] for w in ((incorrect, correct) if plural else (correct, incorrect)))
        if sing >= 0 and plur >= 0:
            ps, pp = word_prob[self.vocab[sing]], word_prob[self.vocab[plur]]
            res["tse"] = float((pp > ps) if plural else (ps > pp))
        else:
            res["tse"] = math.nan
        n = len(probs)
        for side, cutoffs, cum in (("top", self.top, cum_top), ("bottom", self.bottom, cum_bottom)):
            for p in cutoffs:
                if p >= 1.0:
                    r_star, alpha = n, 0.0  # whole vocabulary: pre = post = every rank
                else:
                    r_star = bisect.bisect_left(cum, p)
                    if r_star >= n:
                        r_star, alpha = n, 0.0
                    else:
                        before = cum[r_star - 1] if r_star > 0 else 0.0
                        width = cum[r_star] - before
                        alpha = min(max((p - before) / width, 0.0), 1.0) if width > 0 else 0.0
                pre = self._set_scores(word_prob, rank, plural, side, r_star, n, inclusive=False)
                post = self._set_scores(word_prob, rank, plural, side, r_star, n, inclusive=True)
                for j, metric in enumerate(("ew", "mw", "prob_counted", "prob_counted_forms")):
                    a, b = pre[j], post[j]
                    if metric in ("ew", "mw"):
                        a, b = (b if math.isnan(a) else a), (a if math.isnan(b) else b)
                    res[f"{metric}_{side}@{p:g}"] = a + alpha * (b - a)
        return res

    def _set_scores(self, word_prob: dict[str, float], rank: dict[str, int], plural: bool, side: str,
                    r_star: int, n: int, inclusive: bool) -> tuple[float, float, float, float]:
        """EW, MW, counted mass (both forms of every counted lemma, as in the paper's code) and
        the counted forms' mass inside the set, over the ranks before (or up to) ``r_star``."""
        count = ok = num = den = mass = 0.0
        for s_id, p_id in self.lemmas:  # one lemma at a time, as in the paper's code
            s_tok, p_tok = self.vocab[s_id], self.vocab[p_id]
            rs, rp = rank[s_tok], rank[p_tok]
            if side == "bottom":
                rs, rp = n - 1 - rs, n - 1 - rp
            in_s = rs <= r_star if inclusive else rs < r_star
            in_p = rp <= r_star if inclusive else rp < r_star
            if r_star >= n:
                in_s = in_p = True
            ps, pp = word_prob[s_tok], word_prob[p_tok]
            right, wrong = (pp, ps) if plural else (ps, pp)
            if side == "top":
                if not (in_s or in_p):
                    continue
                count += 1
                ok += right > wrong
                mass += ps + pp
                num += right if (in_p if plural else in_s) else 0.0
                den += (ps if in_s else 0.0) + (pp if in_p else 0.0)
            else:
                if not (in_s and in_p):
                    continue
                count += 1
                ok += right > wrong
                mass += ps + pp
                num += right
                den += right + wrong
        ew = ok / count if count else math.nan
        mw = num / den if count and den > 0 else math.nan
        return ew, mw, mass, den


def bench_baseline(workflow: dict[str, Any], model_dirs: dict[str, Path], config_path: str | Path,
                   n_rows: int, threads: int = 1) -> dict[str, Any]:
    """Time the baseline on ``n_rows`` evenly spaced template rows per model, extrapolate to every
    row of the suite, and compare with verbeval's measured inference + aggregation time and scores."""
    from verbeval.core.config import load_config
    from verbeval.core.models import load_model

    agr = load_config(config_path)["agreement"]
    out = Path(workflow["workdir"]) / "agreement"
    templates = pd.read_parquet(out / "templates.parquet")
    templates["row_in_group"] = templates.groupby("group", sort=False).cumcount()
    torch.set_num_threads(threads)
    res: dict[str, Any] = {"rows_sampled": n_rows, "extrapolation": (
        "baseline seconds per row (mean over an evenly spaced sample of template rows) x every row of the suite; "
        "verbeval: measured inference + aggregate phases of the same model in this run")}
    for name, mdir in model_dirs.items():
        lm = load_model(str(mdir), device="cpu")
        lemmas = pd.read_parquet(out / name / "lemmas.parquet")
        base = PaperBaseline(lm, lemmas, agr["top_cutoffs"], agr["bottom_cutoffs"])
        take = np.unique(np.linspace(0, len(templates) - 1, min(n_rows, len(templates))).round().astype(int))
        sample = templates.iloc[take]
        t0 = time.perf_counter()
        scored = [base.score_row(r.left, r.right, bool(r.plural), r.correct, r.incorrect) for r in sample.itertuples()]
        per_row = (time.perf_counter() - t0) / len(sample)
        diff = compare_with_verbeval(sample, scored, out / name)
        m = workflow["models"][name]
        verbeval_s = m["inference_s"] + m["aggregate_s"]
        extrapolated = per_row * len(templates)
        res[name] = {"baseline_s_per_row": round(per_row, 5), "rows_total": len(templates),
                     "baseline_extrapolated_s": round(extrapolated, 1),
                     "verbeval_infer_aggregate_s": round(verbeval_s, 2),
                     "speedup": round(extrapolated / verbeval_s, 1),
                     "verbeval_s_per_row": round(verbeval_s / len(templates), 6), **diff}
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
            tables[gid] = (pd.read_parquet(model_out / gid / "scores.parquet").set_index("context_id"),
                           pd.read_parquet(model_out / gid / "tse.parquet").set_index("row"))
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


# --------------------------------------------------------------------------- driver


_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def job_durations(output: str) -> list[dict[str, Any]]:
    """Per-job wall time (1 s resolution) from Snakemake's console output: each ``rule X:`` block
    and its ``Finished jobid: N`` line carry a time stamp."""
    started: dict[str, tuple[str, float]] = {}
    out: list[dict[str, Any]] = []
    stamp = None
    rule = None
    for line in output.splitlines():
        line = line.strip()
        m = _STAMP.match(line)
        if m:
            stamp = time.mktime(time.strptime(m.group(1).replace("  ", " "), "%a %b %d %H:%M:%S %Y"))
            continue
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule = line.split()[1].rstrip(":")
        elif line.startswith("jobid:") and rule is not None and stamp is not None:
            started[line.split()[1]] = (rule, stamp)
            rule = None
        elif line.startswith("Finished jobid:") and stamp is not None:
            jid = line.split()[2]
            if jid in started:
                r, t0 = started.pop(jid)
                out.append({"rule": r, "jobid": jid, "wall_s": stamp - t0})
    return out


def _process_s(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t0


def bench_snakemake(config: str | Path, workdir: Path, cores: int, extra_config: Sequence[str] = ()) -> dict[str, Any]:
    """What a user waits for: ``snakemake --cores N --configfile CONFIG`` from scratch, as a
    subprocess run from the current directory with fresh results/raw folders under ``workdir``,
    start-up and every job included.
    Also the job count per rule, each job's wall time (from Snakemake's time stamps, 1 s
    resolution) and the start-up cost every job pays (CLI import; torch + transformers import)."""
    run_dir = workdir / "snakemake"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    # run from the current directory (the repository root, as a user does), writing elsewhere
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile", str(config), "--config",
           f"results_dir={run_dir / 'results'}", f"raw_dir={run_dir / 'raw'}", *extra_config]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    jobs = job_durations(proc.stdout + proc.stderr)
    by_rule: dict[str, dict[str, float]] = {}
    for j in jobs:
        d = by_rule.setdefault(j["rule"], {"jobs": 0, "wall_s": 0.0})
        d["jobs"] += 1
        d["wall_s"] += j["wall_s"]
    verbeval = str(Path(sys.executable).parent / "verbeval")
    startup = {"verbeval_cli_s": _process_s([verbeval, "--version"]),
               "import_torch_transformers_s": _process_s([sys.executable, "-c", "import torch, transformers"])}
    model_jobs = sum(by_rule.get(r, {}).get("jobs", 0) for r in
                     ("infer", "infer_no_simverb", "simverb_score", "veridicality_predict", "lemmas", "lexicon_forms"))
    return {"command": " ".join(cmd), "cores": cores, "wall_s": wall, "jobs": len(jobs), "by_rule": by_rule,
            "startup": startup, "model_jobs": model_jobs,
            "startup_share_estimate": (len(jobs) * startup["verbeval_cli_s"]
                                       + model_jobs * startup["import_torch_transformers_s"]) / (cores * wall)}


def run_bench(*, out: str | Path, quick: bool, config: str | Path, shared: str | Path, workdir: str | Path,
              threads: int = 1, cpu_batch: int = 64, gpu_batch: int = 256, baseline_rows: int | None = None,
              parts: Sequence[str] = ("workflow", "aggregation", "throughput", "baseline"),
              snakemake_config: str | Path | None = None, snakemake_cores: int = 2,
              snakemake_extra: Sequence[str] = (), ggufs: Sequence[str] = (), repeats: int | None = None,
              cli: Callable[[Sequence[str]], int]) -> dict[str, Any]:
    """Run the benchmarks and write their figures to ``out`` (JSON). Returns the figures.

    ``cli`` runs one ``verbeval`` command line in-process (:func:`verbeval.cli.main`)."""
    shared, workdir = Path(shared), Path(workdir)
    models_dir = workdir / "models"
    report: dict[str, Any] = {
        "quick": quick, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "torch": torch.__version__, "cuda": torch.cuda.is_available(), "load_avg_start": _load()},
    }
    if "snakemake" in parts:
        report["snakemake"] = bench_snakemake(snakemake_config or config, workdir, snakemake_cores,
                                              snakemake_extra)
    if "postprocess" in parts:
        report["postprocess"] = bench_postprocess(batch_size=gpu_batch, repeats=1 if quick else 3)
    workflow_free = {"snakemake", "postprocess"}
    if "real" in parts and not any(Path(g).is_file() for g in ggufs):
        report["real"] = {"gpu": None, "skipped": real_model_skips(ggufs), "results": []}
        workflow_free.add("real")
    if not set(parts) - workflow_free:
        return _finish(report, out)
    model_dirs = {s.name: build_model(s, shared, models_dir) for s in WORKFLOW_MODELS}
    wf = run_workflow(config, workdir, model_dirs, quick=quick, cli=cli, threads=threads)
    report["workflow"] = wf
    if "aggregation" in parts:
        report["aggregation"] = bench_aggregation(wf, config)
    if "throughput" in parts:
        tpl = pd.read_parquet(workdir / "agreement" / "templates.parquet")
        lex = pd.read_parquet(workdir / "agreement" / "lexicon.parquet")
        specs = WORKFLOW_MODELS if quick else THROUGHPUT_MODELS
        report["throughput"] = bench_throughput(specs, shared, models_dir, tpl, lex, n_contexts=128 if quick else 1024,
                                                cpu_batch=cpu_batch, gpu_batch=gpu_batch, threads=threads,
                                                repeats=1 if quick else 2)
    if "real" in parts and "real" not in report:
        tpl = pd.read_parquet(workdir / "agreement" / "templates.parquet")
        lex = pd.read_parquet(workdir / "agreement" / "lexicon.parquet")
        report["real"] = bench_real(ggufs, tpl, lex, n_contexts=128 if quick else 256,
                                    cpu_batch=cpu_batch, gpu_batch=gpu_batch, threads=threads,
                                    repeats=repeats if repeats is not None else (1 if quick else 3))
    if "baseline" in parts:
        n = baseline_rows if baseline_rows is not None else (8 if quick else 150)
        report["baseline"] = bench_baseline(wf, model_dirs, config, n, threads)
    return _finish(report, out)


def _finish(report: dict[str, Any], out: str | Path) -> dict[str, Any]:
    report["machine"]["load_avg_end"] = _load()
    report["machine"]["peak_rss_mib_process"] = round(peak_rss_mib(), 1)
    from verbeval.core.io import write_text

    write_text(out, json.dumps(report, indent=2, sort_keys=False) + "\n")
    print_report(report)
    return report


def print_report(r: dict[str, Any]) -> None:
    """Human-readable summary of a bench report on stdout."""
    print(f"verbeval bench ({'quick' if r['quick'] else 'full'}); load {r['machine']['load_avg_start']} -> "
          f"{r['machine'].get('load_avg_end')}")
    sm = r.get("snakemake")
    if sm:
        print(f"snakemake end to end: {sm['wall_s']:.1f} s wall, {sm['jobs']} jobs on {sm['cores']} cores "
              f"({sm['command']})")
        print("  jobs and summed job wall time per rule: " + ", ".join(
            f"{k} {v['jobs']}x {v['wall_s']:.0f} s" for k, v in sorted(sm["by_rule"].items())))
        st = sm["startup"]
        print(f"  start-up: verbeval CLI {st['verbeval_cli_s']:.2f} s per job, torch + transformers import "
              f"{st['import_torch_transformers_s']:.2f} s per model job ({sm['model_jobs']} model jobs); "
              f"estimated start-up share of the run {sm['startup_share_estimate']:.0%}")
    pp = r.get("postprocess")
    if pp:
        print(f"post-processing after the forward pass (softmax + form statistics; {pp['threads']} CPU threads):")
        for t in pp["results"]:
            print(f"  {t['device']:4s} vocab {t['vocab']:7d}, {t['forms']} forms, {t['logits']:8s} logits, "
                  f"batch {t['batch_size']}: {t['ms_per_context']:.3f} ms/context ({t['contexts_per_s']:.0f} ctx/s)")
    if "workflow" not in r:
        return
    wf = r["workflow"]
    print("workflow phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in wf["phases_s"].items())
          + f"; total {wf['total_s']:.1f}")
    for name, m in wf["models"].items():
        print(f"  {name}: {m['contexts']} contexts, {m['rows']} rows; inference {m['inference_s']:.1f} s "
              f"({m['contexts_per_s']:.0f} ctx/s), aggregate {m['aggregate_s']:.1f} s")
    agg = r.get("aggregation")
    if agg:
        for name, a in agg.items():
            if isinstance(a, dict):
                print(f"aggregation {name} ({agg['workers']} workers): {a['wall_s']:.1f} s wall "
                      f"(read {a['read_s']:.1f}, scores {a['scores_s']:.1f}, "
                      f"bootstrap {a['bootstrap_s']:.1f} s summed), "
                      f"peak RSS {a['peak_rss_mib_per_worker']:.0f} MiB/worker")
    tp = r.get("throughput")
    if tp:
        print(f"throughput ({tp['gpu']}):")
        for t in tp["results"]:
            mem = f"{t['peak_gpu_mib']} MiB GPU" if "peak_gpu_mib" in t else f"{t['peak_rss_mib_process']:.0f} MiB RSS"
            print(f"  {t['model']:24s} {t['device']:4s} {t['dtype']:8s} bs {t['batch_size']:3d}: pipeline "
                  f"{t['pipeline_ctx_per_s']:8.1f} ctx/s, forward {t['forward_head_at_target_ctx_per_s']:8.1f}, raw "
                  f"forward {t['forward_raw_ctx_per_s']:8.1f}; "
                  f"forward share {t['forward_share_of_pipeline']:.2f}; {mem}")
    real = r.get("real")
    if real:
        for t in real["results"]:
            print(f"real model {t['model']} (vocab {t['vocab']}, {t['n_forms']} forms) {t['device']} {t['dtype']} "
                  f"bs {t['batch_size']}: pipeline {t['pipeline_ctx_per_s']:.1f} ctx/s, raw forward (head at target) "
                  f"{t['forward_ctx_per_s']:.1f} ctx/s, ratio {t['pipeline_over_forward']:.2f}; post-processing "
                  f"{t['postprocess_ms_per_context']:.2f} ms/context; load {t['load_avg']}")
    bl = r.get("baseline")
    if bl:
        for name, b in bl.items():
            if isinstance(b, dict):
                print(f"baseline {name}: {b['baseline_s_per_row'] * 1000:.1f} ms/row x {b['rows_total']} rows = "
                      f"{b['baseline_extrapolated_s']:.0f} s vs verbeval {b['verbeval_infer_aggregate_s']:.1f} s: "
                      f"{b['speedup']:.0f}x; max |score diff| {b['max_abs_diff_vs_verbeval']:.2g}")

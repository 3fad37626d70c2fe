"""The throughput benchmark: contexts per second of the inference pipeline against the model's own
forward pass on the same batches (head at the predicted position only, and the raw full-logits
forward), for masked and causal models of several sizes on the real tokenizers; on the CPU in
float32 and, where CUDA is present, on the GPU in float32 and bfloat16 with the peak GPU memory.
Also the helpers the real-model part shares: the context sample, the padded batches, the devices."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from verbeval.bench.model_specs import ModelSpec, build_model
from verbeval.bench.timing import best_time, load_1min, peak_rss_mib, possible

log = logging.getLogger(__name__)

#: contexts timed on a GPU per context on the CPU
GPU_CONTEXTS_FACTOR = 8


@dataclass(frozen=True)
class Sizes:
    """How a bench part that times models runs (``throughput``, ``real``): ``n_contexts`` contexts on
    the CPU (times :data:`GPU_CONTEXTS_FACTOR` on a GPU), the batch size on each, CPU threads, repeats."""

    n_contexts: int
    cpu_batch: int
    gpu_batch: int
    threads: int
    repeats: int

    def setups(self) -> list[tuple[str, str, int, int]]:
        """(device, dtype, batch size, contexts) to time: the CPU in float32; with CUDA also the GPU in
        float32 and bfloat16 (float32 first: the casts only go down)."""
        setups = [("cpu", "float32", self.cpu_batch, self.n_contexts)]
        if torch.cuda.is_available():
            n = self.n_contexts * GPU_CONTEXTS_FACTOR
            setups += [("cuda", "float32", self.gpu_batch, n), ("cuda", "bfloat16", self.gpu_batch, n)]
        return setups


def contexts_sample(templates: pd.DataFrame, kind: str, n: int) -> pd.DataFrame:
    """Up to ``n`` distinct contexts spread evenly over all groups."""
    from verbeval.agreement.engine.shards import build_contexts

    parts = [build_contexts(g.reset_index(drop=True), kind)[0] for _, g in templates.groupby("group", sort=True)]
    ctx = pd.concat(parts, ignore_index=True)
    take = np.unique(np.linspace(0, len(ctx) - 1, min(n, len(ctx))).round().astype(int))
    return ctx.iloc[take].reset_index(drop=True)


def padded_batches(lm: Any, enc: Any, batch_size: int) -> tuple[list[Any], np.ndarray]:
    """The encoded contexts ``enc`` as the pipeline batches them (similar lengths together), padded
    on ``lm``'s device: ``[((ids, attention), targets)]``, and every context's length."""
    from verbeval.agreement.engine.forward_pass import _batches, _pad, padding_id

    pad_id = padding_id(lm.tokenizer)
    lengths = np.array([len(s) for s in enc.ids])
    batches = [
        (_pad([enc.ids[i] for i in idx], pad_id, lm.device), torch.as_tensor(enc.target[idx], device=lm.device))
        for idx in _batches(lengths, batch_size)
    ]
    return batches, lengths


def throughput(
    lm: Any, contexts: pd.DataFrame, form_ids: np.ndarray, batch_size: int, repeats: int = 1
) -> dict[str, Any]:
    """Contexts/s of the inference pipeline and of the model's forward pass on the same batches."""
    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.agreement.engine.forward_pass import run_contexts, target_logits

    enc = encode_contexts(lm, contexts)
    dev = lm.device
    no_rows = np.zeros(0, np.int64)
    batches, lengths = padded_batches(lm, enc, batch_size)

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
    load_start = load_1min()
    for key, fn in (("pipeline", pipeline), ("forward_head_at_target", head_at_target), ("forward_raw", raw_forward)):
        out[f"{key}_ctx_per_s"] = round(len(contexts) / best_time(fn, dev, repeats), 1)
    out["load_at_start"], out["load_at_end"] = load_start, load_1min()
    # the pipeline does the forward pass's work and more: a share above 1 cannot be true
    out["forward_share_of_pipeline"] = possible(
        round(out["pipeline_ctx_per_s"] / out["forward_head_at_target_ctx_per_s"], 3),
        highest=1,
        load_start=load_start,
        load_end=out["load_at_end"],
    )
    out["raw_forward_over_pipeline"] = round(out["forward_raw_ctx_per_s"] / out["pipeline_ctx_per_s"], 3)
    if dev.type == "cuda":
        out["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated(dev) / 2**20, 1)
    else:
        out["peak_rss_mib_process"] = round(peak_rss_mib(), 1)
    return out


def time_model(
    folder: Path,
    device: str,
    dtype: str,
    templates: pd.DataFrame,
    lexicon: pd.DataFrame,
    *,
    n_contexts: int,
    batch_size: int,
    repeats: int,
) -> tuple[str, int, float, dict[str, Any]]:
    """Load the model in ``folder`` on ``device`` in ``dtype`` and time :func:`throughput` on
    ``n_contexts`` contexts of ``templates`` with its eligible forms of ``lexicon``, then free it:
    (its kind, the number of forms, the load's seconds, the throughput figures)."""
    import time

    from verbeval.agreement.data.eligibility import eligible_lemmas
    from verbeval.core.models import load_model

    t0 = time.perf_counter()
    lm = load_model(str(folder), device=device, dtype=dtype)
    load_s = time.perf_counter() - t0
    ctx = contexts_sample(templates, lm.kind, n_contexts)
    forms = eligible_lemmas(lexicon, lm.tokenizer)[["sing_id", "plur_id"]].to_numpy(np.int64).reshape(-1)
    figures = throughput(lm, ctx, forms, batch_size, repeats)
    kind = lm.kind
    del lm
    if device == "cuda":
        torch.cuda.empty_cache()
    return kind, len(forms), load_s, figures


def bench_throughput(
    specs: Sequence[ModelSpec],
    shared: Path,
    models_dir: Path,
    templates: pd.DataFrame,
    lexicon: pd.DataFrame,
    sizes: Sizes,
) -> dict[str, Any]:
    """:func:`throughput` of every model shape in ``specs`` on each of :meth:`Sizes.setups`, on
    that many contexts of ``templates``."""
    torch.set_num_threads(sizes.threads)
    if torch.cuda.is_available():
        gpu_note = torch.cuda.get_device_name(0)
    else:
        gpu_note = "no CUDA device: GPU benchmarks skipped"
        print(gpu_note)
    rows = []
    for spec in specs:
        mdir = build_model(spec, shared, models_dir)
        for device, dtype, bs, n in sizes.setups():
            kind, n_forms, _, r = time_model(
                mdir, device, dtype, templates, lexicon, n_contexts=n, batch_size=bs, repeats=sizes.repeats
            )
            rows.append(
                {
                    "model": spec.name,
                    "kind": kind,
                    **asdict(spec),
                    "device": device,
                    "dtype": dtype,
                    "threads": sizes.threads if device == "cpu" else None,
                    "n_forms": n_forms,
                    **r,
                }
            )
            log.info("bench throughput: %s", rows[-1])
    return {"gpu": gpu_note, "results": rows}

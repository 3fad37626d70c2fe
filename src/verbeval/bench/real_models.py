"""The real-model benchmark: verbeval's inference pipeline against the raw forward pass of real
pretrained models given as GGUF files (dequantised to float32 by transformers), on the CPU and,
where CUDA is present, on the GPU; missing files are skipped with the reason printed."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from verbeval.bench.throughput import Sizes, contexts_sample, padded_batches
from verbeval.bench.timing import load_1min, load_avg, possible, sync

log = logging.getLogger(__name__)


def load_gguf(gguf: Path) -> tuple[torch.nn.Module, Any]:
    """The causal LM and tokenizer in ``gguf``, dequantised to float32 by transformers (a GGUF
    model cannot be saved again as a Hugging Face folder, so it is converted on every load)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verbeval.core.model_sources.gguf import load_kwargs

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), **load_kwargs(gguf.name))
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), **load_kwargs(gguf.name))
    return model.eval(), tok


def pipeline_against_forward(
    lm: Any, contexts: pd.DataFrame, form_ids: np.ndarray, batch_size: int, repeats: int
) -> dict[str, Any]:
    """Contexts/s of the inference pipeline (:func:`verbeval.agreement.engine.forward_pass.run_contexts`)
    and of the raw forward pass with the head at the target only (``target_logits``) on the same
    batches, timed alternately, the best of ``repeats`` each (after one warm-up of each)."""
    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.agreement.engine.forward_pass import run_contexts, target_logits

    enc = encode_contexts(lm, contexts)
    dev = lm.device
    batches, lengths = padded_batches(lm, enc, batch_size)

    def pipeline() -> None:
        run_contexts(
            lm, enc, form_ids, np.zeros(0, np.int64), np.zeros((0, 2), np.int64), batch_size=batch_size, progress=False
        )

    def forward() -> None:
        with torch.inference_mode():
            for (ids, att), tgt in batches:
                target_logits(lm.model, ids, att, tgt)

    best = {"pipeline": math.inf, "forward": math.inf}
    load_start = load_1min()
    for rep in range(repeats + 1):  # the first round warms up
        for key, fn in (("pipeline", pipeline), ("forward", forward)):
            sync(dev)
            t0 = time.perf_counter()
            fn()
            sync(dev)
            if rep:
                best[key] = min(best[key], time.perf_counter() - t0)
    return real_figures(len(contexts), batch_size, lengths, best["pipeline"], best["forward"], load_start, load_1min())


def real_figures(
    n: int,
    batch_size: int,
    lengths: np.ndarray,
    pipeline_s: float,
    forward_s: float,
    load_start: float,
    load_end: float,
) -> dict[str, Any]:
    """The figures of :func:`pipeline_against_forward` from its two best times. The pipeline does the
    forward pass's work and more, so a ratio above 1 or a negative post-processing time cannot be true
    (other work on the machine slowed one of the timings): such a figure is "unreliable (load ...)"."""
    pipe, fwd = n / pipeline_s, n / forward_s
    return {
        "contexts": n,
        "batch_size": batch_size,
        "mean_tokens": round(float(lengths.mean()), 2),
        "pipeline_ctx_per_s": round(pipe, 1),
        "forward_ctx_per_s": round(fwd, 1),
        "pipeline_over_forward": possible(round(pipe / fwd, 3), highest=1, load_start=load_start, load_end=load_end),
        "postprocess_ms_per_context": possible(
            round((pipeline_s - forward_s) / n * 1000, 3), lowest=0, load_start=load_start, load_end=load_end
        ),
        "load_at_start": load_start,
        "load_at_end": load_end,
    }


def bench_real(
    ggufs: Sequence[str | Path], templates: pd.DataFrame, lexicon: pd.DataFrame, sizes: Sizes
) -> dict[str, Any]:
    """:func:`pipeline_against_forward` for real pretrained models given as GGUF files, on CPU
    (float32) and, where CUDA is present, on GPU (float32 and bfloat16). Files that are missing
    are skipped with the reason printed (and recorded)."""
    from verbeval.agreement.data.eligibility import eligible_lemmas
    from verbeval.core.models import LoadedModel, is_cased, torch_dtype

    torch.set_num_threads(sizes.threads)
    rows: list[dict[str, Any]] = []
    skipped = real_model_skips(ggufs)
    for path in (Path(g) for g in ggufs if Path(g).is_file()):
        t0 = time.perf_counter()
        model, tok = load_gguf(path)
        load_s = round(time.perf_counter() - t0, 1)
        for device, dtype, bs, n in sizes.setups():  # float32 on CPU first: the casts only go down
            dev = torch.device(device)
            lm = LoadedModel(
                str(path),
                model.to(dev, torch_dtype(dtype)),
                tok,
                "causal",
                is_cased(tok),
                dev,
                dtype,
                f"gguf:{path.name}",
            )
            ctx = contexts_sample(templates, lm.kind, n)
            forms = eligible_lemmas(lexicon, lm.tokenizer)[["sing_id", "plur_id"]].to_numpy(np.int64).reshape(-1)
            r = pipeline_against_forward(lm, ctx, forms, bs, sizes.repeats)
            rows.append(
                {
                    "model": path.name,
                    "load_s": load_s,
                    "vocab": len(tok),
                    "n_forms": len(forms),
                    "device": device,
                    "dtype": dtype,
                    "threads": sizes.threads if device == "cpu" else None,
                    **r,
                    "load_avg": load_avg(),
                }
            )
            log.info("bench real: %s", rows[-1])
        del model, lm
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "skipped": skipped,
        "results": rows,
    }


def real_model_skips(ggufs: Sequence[str | Path]) -> list[str]:
    """Why the real-model benchmark skips some (or all) of ``ggufs``, one line each (printed)."""
    reasons = [f"{g}: no such GGUF file: skipped" for g in ggufs if not Path(g).is_file()]
    if not ggufs:
        reasons.append("no GGUF file given (--gguf FILE ...): the real-model benchmark is skipped")
    for reason in reasons:
        print(f"bench real: {reason}")
    return reasons

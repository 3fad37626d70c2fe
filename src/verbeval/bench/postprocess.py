"""The post-processing benchmark: the per-context work after the forward pass (float64 softmax and
form statistics) on random logits for large vocabularies, on the CPU and, where present, CUDA.
Needs no workflow run."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch

from verbeval.bench.timing import best_time

log = logging.getLogger(__name__)

#: vocabulary sizes of the post-processing benchmark: GPT-NeoX / OLMo-1 (50,280), OLMo-2 dolma2
#: (100,278, cl100k-based like Llama 3) and a 256,000-entry head (Gemma-sized; no tokenizer needed)
POSTPROCESS_VOCABS = (50_280, 100_278, 256_000)
#: eligible forms scored per context: 2 x 1,288 eligible lemmas of the OLMo-2 tokenizer (docs/models.md)
POSTPROCESS_FORMS = 2 * 1_288


def bench_postprocess(
    vocab_sizes: Sequence[int] = POSTPROCESS_VOCABS,
    n_forms: int = POSTPROCESS_FORMS,
    batch_size: int = 256,
    devices: Sequence[str] = ("cpu", "cuda"),
    logit_dtypes: Sequence[str] = ("float32", "bfloat16"),
    repeats: int = 3,
    seed: int = 0,
) -> dict[str, Any]:
    """Time of the per-context work after the forward pass, per vocabulary size.

    That work is the float64 softmax over the vocabulary and :func:`verbeval.agreement.form_statistics`
    (each context's vocabulary sorted once; probability, mass above and mass below of every eligible
    form). The logits are random normal (standard deviation 3, a peaked distribution like an LM's);
    ``bfloat16`` rounds them to bfloat16 first, as a model run in bfloat16 returns them, which makes
    many probabilities tie and exercises the exact tie ranking. The best of ``repeats`` timed runs
    of one batch is reported, in milliseconds per context. CUDA rows appear only when a GPU is present.
    """
    from verbeval.agreement import form_statistics, probabilities
    from verbeval.core.models import torch_dtype

    gen = torch.Generator().manual_seed(seed)
    rows: list[dict[str, Any]] = []
    for device_name in devices:
        if device_name == "cuda" and not torch.cuda.is_available():
            continue
        dev = torch.device(device_name)
        for v in vocab_sizes:
            forms = torch.randperm(v, generator=gen)[: min(n_forms, v)].sort().values.to(dev)
            base = torch.randn(batch_size, v, generator=gen) * 3.0
            for dt in logit_dtypes:
                logits = base.to(torch_dtype(dt)).to(torch.float32).to(dev)
                # the inference pipeline's CPU path reuses one float64 buffer for every batch
                buf = torch.empty(logits.shape, dtype=torch.float64) if dev.type == "cpu" else None

                def run(
                    logits: torch.Tensor = logits, buf: torch.Tensor | None = buf, forms: torch.Tensor = forms
                ) -> None:  # this iteration's tensors, bound now
                    form_statistics(probabilities(logits, out=buf), forms)

                best = best_time(run, dev, repeats)
                rows.append(
                    {
                        "device": device_name,
                        "vocab": v,
                        "forms": int(len(forms)),
                        "logits": dt,
                        "batch_size": batch_size,
                        "ms_per_context": round(best / batch_size * 1000, 4),
                        "contexts_per_s": round(batch_size / best, 1),
                    }
                )
                log.info("bench postprocess: %s", rows[-1])
    return {"threads": torch.get_num_threads(), "results": rows}

"""The in-process API benchmark: one :func:`verbeval.agreement.evaluate` call on a tiny and a small
randomly initialised GPT-2 (real GPT-2 tokenizer), what a training loop pays each time it scores a
model, with and without loading the suite. Needs no workflow run."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from verbeval.bench.timing import load_avg

log = logging.getLogger(__name__)

#: the benchmark's models: name -> (layers, hidden size, heads), GPT-2 on the real GPT-2 tokenizer
API_MODELS = {"tiny-gpt2": (2, 32, 2), "small-gpt2": (2, 768, 12)}


def bench_api(
    tokenizer: str | Path,
    workdir: str | Path,
    mirror: str | Path | None,
    *,
    max_rows: int = 100,
    groups: Sequence[str] | None = None,
    threads: int = 1,
    batch_size: int = 64,
    repeats: int = 3,
    models: dict[str, tuple[int, int, int]] = API_MODELS,
) -> dict[str, Any]:
    """Seconds of the suite's loading (:meth:`AgreementSuite.from_sources`, ``max_rows`` rows per
    source, sources copied from the data mirror ``mirror``, or downloaded when None), then per model
    (GPT-2 on the tokenizer in the folder ``tokenizer``; the bench uses the real GPT-2 one): the
    first ``evaluate`` call (eligible lemmas and contexts prepared for the tokenizer) and the best of
    ``repeats`` later calls (what each later step of a training loop pays; wall and CPU seconds, the
    latter telling more on a loaded machine), with the contexts and rows scored. The models are
    randomly initialised: their scores are meaningless, the times are what matters."""
    from verbeval.agreement.api.evaluation import evaluate
    from verbeval.agreement.api.suite import AgreementSuite
    from verbeval.core.tiny_models import make_tiny_model

    torch.set_num_threads(threads)
    work = Path(workdir) / "api"
    t0, c0 = time.perf_counter(), time.process_time()
    suite = AgreementSuite.from_sources(
        groups=groups, max_rows_per_source=max_rows, raw_dir=work / "raw", mirror=mirror
    )
    suite_s, suite_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    rows: list[dict[str, Any]] = []
    for name, (layers, hidden, heads) in models.items():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = make_tiny_model(tokenizer, "gpt2", work / name, layers=layers, hidden=hidden, heads=heads)
        model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
        t0 = time.perf_counter()
        res = evaluate(model, tok, suite, name=name, batch_size=batch_size, random_init=True)
        first = time.perf_counter() - t0
        later, cpu = [], []
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            evaluate(model, tok, suite, name=name, batch_size=batch_size, random_init=True)
            later.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        rows.append(
            {
                "model": name,
                "layers": layers,
                "hidden": hidden,
                "parameters": sum(p.numel() for p in model.parameters()),
                "groups": len(res.groups),
                "contexts": int(res.per_group["n_contexts"].sum()),
                "rows": int(res.summary.query("metric == 'tse'")["n_total"].sum()),
                "first_call_s": round(first, 3),
                "call_s": round(min(later), 3),
                "call_cpu_s": round(min(cpu), 3),
                "call_with_suite_s": round(min(later) + suite_s, 3),
                "load_avg": load_avg(),
            }
        )
        log.info("%s: evaluate %.2f s (first call %.2f s)", name, min(later), first)
    return {
        "max_rows_per_source": max_rows,
        "threads": threads,
        "batch_size": batch_size,
        "suite_s": round(suite_s, 3),
        "suite_cpu_s": round(suite_cpu_s, 3),
        "results": rows,
    }

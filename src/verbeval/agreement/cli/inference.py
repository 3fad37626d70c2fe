"""``infer``, and the model, batch and shard-store options and helpers that ``infer-forms`` and
``verbeval run-model`` share with it.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from verbeval.agreement.steps import N_CHUNKS, TOP_K
from verbeval.core.cliutil import Add, check_outputs, model_source_options, random_init_option
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import (
    INFERENCE_BATCH_SIZE,
    INFERENCE_DEVICE,
    INFERENCE_THREADS,
    MODEL_DEVICE_MAP,
    MODEL_DTYPE,
    MODEL_KIND,
    MODEL_PREPEND_BOS,
    batch_size_on,
)

log = logging.getLogger("verbeval")


def _load_lm(a: argparse.Namespace) -> Any:
    """Load the model of an inference command (``--model --revision --kind --dtype --device --device-map
    --threads``)."""
    import torch

    from verbeval.core import prefetch

    torch.set_num_threads(a.threads)
    # a model queued in this process (verbeval run-queue) may already be loading on a background thread
    return prefetch.take(load_request(a))


def load_request(a: argparse.Namespace) -> Any:
    """The model load an inference command asks for (:class:`verbeval.core.prefetch.LoadRequest`)."""
    from verbeval.core.prefetch import LoadRequest

    return LoadRequest(
        ModelSource.from_options(a), kind=a.kind, dtype=a.dtype, device=a.device, device_map=a.device_map
    )


def load_checked_lm(a: argparse.Namespace, templates: Any, groups: list[str], extra: int = 0) -> tuple[Any, float]:
    """The model of ``a`` and its load time, once no context of ``groups`` is longer than it reads
    (:func:`verbeval.agreement.engine.lengths.check_context_lengths`): checked before the load from the
    tokenizer and config, or, for a GGUF file (which a tokenizer load would parse a second time),
    right after it and before any forward pass."""
    from verbeval.agreement.engine.lengths import check_context_lengths, check_context_lengths_once

    source = ModelSource.from_options(a)
    if not source.file:  # a sweep's revisions in one process share the check
        check_context_lengths_once(source, a.kind, templates, a.templates, groups, a.prepend_bos, extra)
    t = time.perf_counter()
    lm = _load_lm(a)
    load_s = time.perf_counter() - t
    if source.file:  # the loaded model's kind: a GGUF config names no architecture
        check_context_lengths(
            source, lm.kind, templates, groups, a.prepend_bos, extra, tokenizer=lm.tokenizer, config=lm.model.config
        )
    return lm, load_s


def random_init(a: argparse.Namespace, warn: bool = True) -> bool:
    """Whether the model of ``a`` is randomly initialised (``--random-init``, else its marker), with a
    warning when it is (unless not ``warn``)."""
    from verbeval.core.provenance import resolve_random_init

    flag = resolve_random_init(a.model, a.random_init)
    if flag and warn:
        log.warning("%s is randomly initialised: its numbers are meaningless and are labelled so", a.model)
    return flag


def forms_extra_tokens(forms: Any) -> int:
    """Tokens the longest multi-token form adds to a context beyond its first (forms.parquet)."""
    return (int(forms[["n_sing", "n_plur"]].to_numpy().max()) if len(forms) else 1) - 1


def model_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that load a model (see :func:`_load_lm`)."""
    model_source_options(s, "of the language model")
    for setting in (MODEL_KIND, MODEL_DTYPE, INFERENCE_DEVICE, MODEL_DEVICE_MAP, INFERENCE_THREADS):
        setting.add_to(s)


def context_options(s: argparse.ArgumentParser) -> None:
    """How a command that loads a model reads its contexts (``infer``, ``run-model``): BOS, random
    initialisation, the templates."""
    MODEL_PREPEND_BOS.add_to(s)
    random_init_option(s)
    s.add_argument("--templates", required=True, help="templates.parquet (verbeval templates)")


def shard_options(s: Any) -> None:
    """The agreement shards' options (``infer``, ``run-model``): lemmas, batch size, top-k and the store."""
    s.add_argument("--lemmas", required=True, help="the model's lemmas.parquet (verbeval lemmas)")
    INFERENCE_BATCH_SIZE.add_to(s)
    TOP_K.add_to(s)
    store_options(s)


def store_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that write a model's shard store (``infer``, ``infer-forms``)."""
    s.add_argument("--groups", required=True, help="comma-separated template groups to run (ids in --templates)")
    N_CHUNKS.add_to(s)
    s.add_argument(
        "--manifest",
        required=True,
        help="output: the store's manifest.json; shards go to <its folder>/<group>/<k>-of-<n>.parquet",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    s.add_argument(
        "--allow-nonfinite",
        action="store_true",
        help="write contexts whose logits hold NaN or inf (their scores are NaN; each shard and the "
        "manifest record n_nonfinite) instead of stopping (default: stop, naming the model and group)",
    )


def run_agreement_branch(
    lm: Any,
    a: argparse.Namespace,
    load_s: float = 0.0,
    *,
    templates: Any = None,
    lemmas: Any = None,
    started: float | None = None,
) -> None:
    """The agreement shards of the loaded model ``lm`` (``verbeval infer`` and ``run-model``'s agreement
    branch): :func:`~verbeval.agreement.engine.inference.infer_model`, then the log line. Its total is the
    whole command since ``started`` (``infer``: model load included), or else the load (``load_s``,
    shared by every branch of ``run-model``) plus this branch, i.e. what the user waited for until the
    shards were written. ``templates`` and ``lemmas``: the tables when already read."""
    import pandas as pd

    from verbeval.agreement.engine.inference import infer_model
    from verbeval.core.warm import frame_key

    templates = pd.read_parquet(a.templates) if templates is None else templates
    lemmas = pd.read_parquet(a.lemmas) if lemmas is None else lemmas
    groups = [g for g in a.groups.split(",") if g]
    body = infer_model(
        lm,
        templates,
        lemmas,
        groups,
        a.n_chunks,
        a.manifest,
        batch_size=batch_size_on(a.batch_size, lm.device.type),
        top_k=a.top_k,
        prepend_bos=a.prepend_bos,
        progress=not a.no_progress,
        random_init=random_init(a),
        allow_nonfinite=a.allow_nonfinite,
        templates_key=frame_key(a.templates),
    )
    t = body["timing"]
    if started is not None:  # total: the whole command, model load included
        total, note = time.perf_counter() - started, ""
    else:
        total, note = load_s + t["total_s"], " (load included)"
    log.info(
        "%s: %d shards -> %s; model load %.1f s, %d contexts computed in %.1f s (%.1f contexts/s), "
        "writer busy %.1f s, total %.1f s%s",
        a.model,
        len(body["shards"]),
        a.manifest,
        load_s,
        t["contexts"],
        t["compute_s"],
        t["contexts_per_s"],
        t["writer_busy_s"],
        total,
        note,
    )


def cmd_infer(a: argparse.Namespace) -> None:
    import pandas as pd

    check_outputs(a.manifest)
    t0 = time.perf_counter()
    templates = pd.read_parquet(a.templates)
    lemmas = pd.read_parquet(a.lemmas)
    lm, load_s = load_checked_lm(a, templates, [g for g in a.groups.split(",") if g])
    run_agreement_branch(lm, a, load_s, templates=templates, lemmas=lemmas, started=t0)


def register_infer(add: Add) -> None:
    s = add(
        "infer",
        cmd_infer,
        "one model, every group and chunk: probability shards and their manifest "
        "(model loaded once; finished shards are kept, so a killed run resumes)",
        "Per context and eligible form: its probability and the mass ranked above and below it; per context "
        "the top-k tokens (docs/workflow.md, 'Inference and shards'). Run by the rule infer, one job per "
        "model (resources: gpu=1).",
    )
    model_options(s)
    context_options(s)
    shard_options(s)

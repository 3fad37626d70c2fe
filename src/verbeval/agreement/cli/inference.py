"""``infer``, and the model, batch and shard-store options that ``infer-forms`` and ``verbeval
run-model`` share with it, with their conversion to typed values (:func:`model_run`, :func:`shard_run`):
the steps themselves are :mod:`verbeval.agreement.runs`' functions.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, TypeVar

from verbeval.agreement.runs import FormsRun, ShardRun, infer
from verbeval.agreement.steps import (
    ALLOW_NONFINITE,
    BOTTOM_CUTOFFS,
    FRAGILE_ULPS,
    LEMMAS_FILE,
    N_CHUNKS,
    SHARD_MANIFEST,
    TEMPLATES_FILE,
    TOP_CUTOFFS,
    TOP_K,
)
from verbeval.core.cliutil import Add, model_source_options, random_init_option
from verbeval.core.model_runs import ModelRun
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import (
    GROUPS,
    INFERENCE_BATCH_SIZE,
    INFERENCE_DEVICE,
    INFERENCE_THREADS,
    MODEL_DEVICE_MAP,
    MODEL_DTYPE,
    MODEL_KIND,
    MODEL_PREPEND_BOS,
    MODEL_SETTINGS,
    NO_PROGRESS,
    add_options,
)

log = logging.getLogger("verbeval")

Run = TypeVar("Run", ShardRun, FormsRun)


def model_run(a: argparse.Namespace, batch_size: bool = True) -> ModelRun:
    """The model source and per-model settings of a command that loads a model, as one typed value:
    built here once, at the command line; everything below takes it whole. Each declared per-model
    setting (:data:`~verbeval.core.steps.MODEL_SETTINGS`, and the device) fills the field of its name.
    ``batch_size`` False: the command's ``--batch-size`` is not the model's (``infer-forms``': the forms')."""
    settings = [s for s in (*MODEL_SETTINGS, INFERENCE_DEVICE) if batch_size or s is not INFERENCE_BATCH_SIZE]
    given = {s.dest: getattr(a, s.dest) for s in settings if hasattr(a, s.dest)}
    # --random-init: infer-forms has none (its marker decides)
    return ModelRun(ModelSource.from_options(a), random_init=getattr(a, "random_init", None), **given)


def store_run(
    record: type[Run],
    a: argparse.Namespace,
    data: str,
    groups: str | None = None,
    manifest: str | None = None,
    **settings: Any,
) -> Run:
    """A shard store's options (:func:`store_options`, the templates) as its typed value: a
    :class:`ShardRun` (``data`` the lemmas) or a :class:`FormsRun` (the forms), with ``settings`` its own.
    ``groups`` and ``manifest``: where the command's options have other names (``run-model``'s forms branch)."""
    return record(
        a.templates,
        data,
        tuple(g for g in (a.groups if groups is None else groups).split(",") if g),
        a.manifest if manifest is None else manifest,
        n_chunks=a.n_chunks,
        allow_nonfinite=a.allow_nonfinite,
        progress=not a.no_progress,
        **settings,
    )


def shard_run(a: argparse.Namespace) -> ShardRun:
    """The agreement shards' options (:func:`shard_options`) as their typed value."""
    return store_run(
        ShardRun,
        a,
        a.lemmas,
        top_k=a.top_k,
        top_cutoffs=tuple(a.top_cutoffs),
        bottom_cutoffs=tuple(a.bottom_cutoffs),
        fragile_ulps=a.fragile_ulps,
    )


def model_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that load a model (see :func:`model_run`)."""
    model_source_options(s, "of the language model")
    for setting in (MODEL_KIND, MODEL_DTYPE, INFERENCE_DEVICE, MODEL_DEVICE_MAP, INFERENCE_THREADS):
        setting.add_to(s)


def context_options(s: argparse.ArgumentParser) -> None:
    """How a command that loads a model reads its contexts (``infer``, ``run-model``): BOS, random
    initialisation, the templates."""
    MODEL_PREPEND_BOS.add_to(s)
    random_init_option(s)
    TEMPLATES_FILE.add_to(s)


def shard_options(s: Any) -> None:
    """The agreement shards' options (``infer``, ``run-model``): lemmas, batch size, top-k and the store."""
    LEMMAS_FILE.add_to(s)
    INFERENCE_BATCH_SIZE.add_to(s)
    TOP_K.add_to(s)
    for setting in (TOP_CUTOFFS, BOTTOM_CUTOFFS, FRAGILE_ULPS):  # each new chunk scored beside its shard
        setting.add_to(s)
    store_options(s)


def store_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that write a model's shard store (``infer``, ``infer-forms``)."""
    add_options(
        s,
        GROUPS.but(help="comma-separated template groups to run (ids in --templates)"),
        N_CHUNKS,
        SHARD_MANIFEST,
        NO_PROGRESS.but(help="no progress bar on stderr"),
        ALLOW_NONFINITE,
    )


def cmd_infer(a: argparse.Namespace) -> None:
    infer(model_run(a), shard_run(a))


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

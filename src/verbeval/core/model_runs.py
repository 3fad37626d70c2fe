"""A model run: one model source and how it is loaded and run, as one typed value.

The commands that load a language model (``run-model``, ``infer``, ``infer-forms``) build a
:class:`ModelRun` once from their options, at the command line; the warm queue builds it once per
queued ``run-model``. Everything below takes it whole: the load (:meth:`ModelRun.load_request`),
the length check, the shard store's key, the random-initialisation label. Each per-model setting
defaults to its declaration's (:data:`verbeval.core.steps.MODEL_SETTINGS`, the schema's default).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from verbeval.core.model_sources.source import ModelSource
from verbeval.core.prefetch import LoadRequest
from verbeval.core.steps import INFERENCE_DEVICE, MODEL_SETTINGS

log = logging.getLogger("verbeval")


def _default(dest: str) -> Any:
    """The schema's default of the declared per-model setting (or the device) of field ``dest``."""
    from verbeval.core.schema import schema_default

    return schema_default(next(s.key for s in (*MODEL_SETTINGS, INFERENCE_DEVICE) if s.dest == dest))


@dataclass(frozen=True)
class ModelRun:
    """One model source and its per-model settings (each defaulting to the schema's)."""

    source: ModelSource
    kind: str = field(default_factory=lambda: _default("kind"))
    dtype: str = field(default_factory=lambda: _default("dtype"))
    device: str = field(default_factory=lambda: _default("device"))
    device_map: Any = field(default_factory=lambda: _default("device_map"))
    threads: int = field(default_factory=lambda: _default("threads"))
    #: contexts per forward pass: a number or ``auto`` (:func:`verbeval.core.steps.batch_size_on`)
    batch_size: int | str = field(default_factory=lambda: _default("batch_size"))
    prepend_bos: bool | None = field(default_factory=lambda: _default("prepend_bos"))
    #: whether the model is randomly initialised; None: its marker says (:meth:`is_random`)
    random_init: bool | None = None

    @property
    def name(self) -> str:
        """The model as the logs name it (its id)."""
        return self.source.id

    def load_request(self) -> LoadRequest:
        """The load this run asks for (:class:`verbeval.core.prefetch.LoadRequest`)."""
        return LoadRequest(
            self.source, kind=self.kind, dtype=self.dtype, device=self.device, device_map=self.device_map
        )

    def is_random(self, warn: bool = True) -> bool:
        """Whether the model is randomly initialised (``random_init``, else its marker), with a
        warning when it is (unless not ``warn``)."""
        from verbeval.core.provenance import resolve_random_init

        flag = resolve_random_init(self.source.id, self.random_init)
        if flag and warn:
            log.warning("%s is randomly initialised: its numbers are meaningless and are labelled so", self.source.id)
        return flag

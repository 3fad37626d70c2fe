"""The benchmarks' models: randomly initialised models of a few shapes on real tokenizers, built
once into the benchmark's folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelSpec:
    """A randomly initialised model on a real tokenizer (``tokenizers/<tokenizer>``)."""

    name: str
    arch: str
    tokenizer: str
    layers: int
    hidden: int
    heads: int


#: the models the workflow part runs (and the quick throughput part times)
WORKFLOW_MODELS = (
    ModelSpec("tiny-bert-cased", "bert", "bert-base-cased", 2, 32, 2),
    ModelSpec("tiny-gpt2", "gpt2", "gpt2", 2, 32, 2),
)
#: the shapes the full throughput part times
THROUGHPUT_MODELS = WORKFLOW_MODELS + (
    ModelSpec("small-bert-cased", "bert", "bert-base-cased", 4, 128, 4),
    ModelSpec("small-gpt2", "gpt2", "gpt2", 4, 128, 4),
    ModelSpec("all-MiniLM-L6-v2-shape", "bert", "bert-base-uncased", 6, 384, 12),
)


def build_model(spec: ModelSpec, shared: Path, models_dir: Path) -> Path:
    """``models_dir/<name>``, built from ``shared/tokenizers/<tokenizer>`` unless it is there."""
    from verbeval.core.tiny_models import make_tiny_model

    out = models_dir / spec.name
    if not (out / "config.json").exists():
        make_tiny_model(
            shared / "tokenizers" / spec.tokenizer,
            spec.arch,
            out,
            layers=spec.layers,
            hidden=spec.hidden,
            heads=spec.heads,
        )
    return out

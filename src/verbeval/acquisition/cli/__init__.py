"""Sub-commands of the acquisition study, each command's handler next to its parser set-up.

Holds: analysis (lemma-contexts: one scored checkpoint's per-lemma, per-context correctness;
acquisition: the analysis of a checkpoint sweep), checkpoint_index (acquisition-index: the index of
the workflow's sweeps) and toy (train-toy: the toy model).
"""

from __future__ import annotations

from verbeval.acquisition.cli import analysis, checkpoint_index, toy
from verbeval.core.cliutil import Add


def register(add: Add) -> None:
    """``lemma-contexts``, ``acquisition`` and ``acquisition-index``."""
    analysis.register_lemma_contexts(add)
    analysis.register_acquisition(add)
    checkpoint_index.register_acquisition_index(add)


def register_toy(add: Add) -> None:
    """``train-toy``: the toy model that learns agreement on a CPU."""
    toy.register_train_toy(add)

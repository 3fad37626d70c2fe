"""The agreement study (Newman et al. 2021): TSE, EW and MW of subject-verb agreement.

Holds: data (the inputs: templates, lexicon, groups, errata, users' pair files, eligible lemmas),
engine (contexts encoded, the batched forward pass, its torch kernels, every shard of a model written
to its resumable store), scores (TSE, EW and MW from the shards' form statistics, per-group summaries
with bootstrap CIs, per-lemma diagnostics and contexts), report (Table 2, Table 3, the figures' data
and drawing, the report pages, DVC views, the checkpoint index), lexicon_modes (verb forms of any
length: the single_token/all/common modes), steps (its workflow steps, each declared once: settings, configuration keys;
comparison_steps: those of compare, precision-audit, flip-set and export),
runs (its model's steps as functions of typed records: lemmas, infer, the shards of run-model, infer-forms,
aggregate, lemma-stats), api (the in-process API: ``evaluate``, ``AgreementResult``,
``AgreementSuite``, ``AgreementCallback``) and cli (its sub-commands, one module per sub-pipeline).

May import: ``verbeval.core`` and its own modules; never another study, ``verbeval.bench`` or
``verbeval.workflow``.

``from verbeval.agreement import score_logits`` (and the other public names of
:mod:`verbeval.agreement.scores.metrics` and :mod:`verbeval.agreement.engine.kernels`) keeps working, as
do ``evaluate``, ``AgreementResult``, ``AgreementSuite`` and ``AgreementCallback`` (docs/api.md); they are
loaded on first use, so that importing the package (the command line does) does not import torch.
"""

from __future__ import annotations

from typing import Any

#: public names re-exported here -> the module that defines them
_EXPORTS = {
    **dict.fromkeys(
        (
            "PAPER_TOP_CUTOFFS",
            "PAPER_BOTTOM_CUTOFFS",
            "FormStats",
            "AgreementScores",
            "SideScores",
            "side_scores",
            "tse_scores",
            "scores_from_stats",
            "score_logits",
        ),
        "scores.metrics",
    ),
    **dict.fromkeys(("MAX_COUNTED_TIES", "form_statistics", "probabilities"), "engine.kernels"),
    **dict.fromkeys(("evaluate", "AgreementResult"), "api.evaluation"),
    "AgreementSuite": "api.suite",
    "AgreementCallback": "api.callback",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The agreement study (Newman et al. 2021): TSE, EW and MW of subject-verb agreement.

Holds: lexicon, minimal_pairs, template_files, custom_pairs, errata, groups and templates (the
inputs), eligibility (single-token lemmas), encoding (contexts as token ids and target positions),
forward_pass (the batched forward pass of a chunk's contexts), inference, shards and shardstore
(every (group, chunk) of a model run once per distinct context and written as resumable probability
shards), kernels (the torch kernels of inference: float64 softmax, each form's probability and the
masses ranked above and below it), metrics (TSE, EW and MW from those form statistics, numpy only),
aggregate (per-context scores, per-group summaries with bootstrap CIs), tables (Table 2), figures
and plots (Figures 1-4 and the others), lemma_diagnostics (per-lemma statistics, the worst lemmas),
table3 (Table 3: top-k tokens in selected contexts), report_pages (the HTML page and Markdown cell
escape of those tables), dvc_views (DVC metrics and plots), multitoken and lexicon_modes (verb forms
of any length; the single_token/all/common modes and their scores), form_shards (the forms'
log-probability shards), lexicon_modes_table (the modes' side-by-side table), lengths (contexts
longer than a model reads, found before it loads), lemma_contexts (per checkpoint and (group, lemma)
the contexts where the correct form wins), acquisition (acquisition over training of a checkpoint
sweep: index in, tables and figures out) with acquisition_index (the checkpoint index),
acquisition_curves (learning curves, context resamples), acquisition_fit (sigmoid fits, age of
acquisition), acquisition_frequency (lemma frequency, its correlation with AoA, outliers),
acquisition_phases (changepoints), acquisition_seeds (seed band, AoA agreement across seeds) and
acquisition_figures; suite, evaluation and callback (the in-process
API: the templates and lexicon loaded once, ``evaluate`` of a model in memory and its typed result,
a ``transformers`` TrainerCallback that scores during training); toy_corpus and toy_training (the toy model: a
synthetic agreement corpus with planted lemma frequencies and graded constructions, and a small GPT-2
trained on it from scratch on a CPU, saved at log-spaced steps); cli (a sub-package, one module per sub-pipeline) registers its sub-commands.

May import: ``verbeval.core`` and its own modules; never another study, ``verbeval.bench`` or the
top-level ``verbeval.cli`` / ``verbeval.dvc``.

``from verbeval.agreement import score_logits`` (and the other public names of
:mod:`verbeval.agreement.metrics` and :mod:`verbeval.agreement.kernels`) keeps working, as do
``evaluate``, ``AgreementResult``, ``AgreementSuite`` and ``AgreementCallback`` (docs/api.md); they are
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
        "metrics",
    ),
    **dict.fromkeys(("MAX_COUNTED_TIES", "form_statistics", "probabilities"), "kernels"),
    **dict.fromkeys(("evaluate", "AgreementResult"), "evaluation"),
    "AgreementSuite": "suite",
    "AgreementCallback": "callback",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

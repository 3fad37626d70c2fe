"""The agreement study (Newman et al. 2021): TSE, EW and MW of subject-verb agreement.

Holds: lexicon, minimal_pairs, template_files, custom_pairs, errata, groups and templates (the
inputs), eligibility (single-token lemmas), inference, shards
and shardstore (one forward pass per context, written as resumable probability shards), metrics
(TSE, EW and MW from a probability row), aggregate (per-context scores, per-group summaries with
bootstrap CIs), tables (Table 2), figures and plots (Figures 1-4 and the others), diagnostics
(per-lemma statistics, Table 3), dvc_views (DVC metrics and plots), multitoken and lexicon_modes
(verb forms of any length; the single_token/all/common modes), lengths (contexts longer than a model
reads, found before it loads); cli (a sub-package, one module per sub-pipeline) registers its
sub-commands.

May import: ``verbeval.core`` and its own modules; never another study, ``verbeval.bench`` or the
top-level ``verbeval.cli`` / ``verbeval.dvc``.

``from verbeval.agreement import score_logits`` (and the other public names of
:mod:`verbeval.agreement.metrics`) keeps working; they are loaded on first use, so that importing
the package (the command line does) does not import torch.
"""

from __future__ import annotations

from typing import Any

#: public names of :mod:`verbeval.agreement.metrics` re-exported here
_METRICS = ("PAPER_TOP_CUTOFFS", "PAPER_BOTTOM_CUTOFFS", "FormStats", "AgreementScores", "SideScores",
            "MAX_COUNTED_TIES", "form_statistics", "side_scores", "tse_scores", "scores_from_stats",
            "probabilities", "score_logits")

__all__ = list(_METRICS)


def __getattr__(name: str) -> Any:
    if name in _METRICS:
        from verbeval.agreement import metrics

        return getattr(metrics, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

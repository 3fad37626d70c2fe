"""The agreement study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`): the
configuration keys that each command takes as options, and the other keys its jobs depend on. The
command's options, the rule's command line, the DVC params and the in-process API's defaults are
derived from these declarations."""

from __future__ import annotations

from verbeval.core.cliutil import float_list
from verbeval.core.steps import Setting, Step, bootstrap_settings

#: per-context scores, per-row TSE and per-group summaries of one model
AGGREGATE = Step(
    "aggregate",
    settings=(
        Setting(
            "agreement.top_cutoffs",
            "--top-cutoffs",
            float_list,
            "comma-separated top-p cutoffs (docs/metrics.md), e.g. 0.5,0.9,1",
        ),
        Setting(
            "agreement.bottom_cutoffs",
            "--bottom-cutoffs",
            float_list,
            "comma-separated bottom-p cutoffs (docs/metrics.md), e.g. 0.5,0.01,1e-6",
        ),
        *bootstrap_settings("agreement.bootstrap"),
    ),
    keys=("agreement.groups", "agreement.custom_groups"),
    rules=("aggregate",),
)

#: per-lemma agreement statistics of one model
LEMMA_STATS = Step("lemma-stats", rules=("lemma_stats",))

#: the eligible lemmas of one model's tokenizer
LEMMAS = Step("lemmas", keys=("models",), rules=("lemmas",))

#: every step declared here
STEPS: tuple[Step, ...] = (LEMMAS, AGGREGATE, LEMMA_STATS)

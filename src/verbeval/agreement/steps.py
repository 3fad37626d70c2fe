"""The agreement study's workflow steps, each declared once (:class:`verbeval.core.steps.Step`): the
configuration keys that each command takes as options, and the other keys its jobs depend on. The
command's options, the rule's command line, the DVC params and the in-process API's defaults are
derived from these declarations."""

from __future__ import annotations

from verbeval.core.cliutil import float_list
from verbeval.core.steps import INFERENCE_DEVICE, Setting, Step, bootstrap_settings

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

#: the agreement shards' settings, taken by ``run-model`` and ``infer`` (``shard_options``)
TOP_K = Setting("inference.top_k", "--top-k", int, "top tokens (ids and probabilities) stored per context, for Table 3")
N_CHUNKS = Setting(
    "agreement.chunks", "--n-chunks", int, "shards per group: contiguous slices of its contexts, the unit of resuming"
)
#: the multi-token form shards' batch, taken by ``run-model`` and ``infer-forms``
FORMS_BATCH_SIZE = Setting(
    "agreement.multitoken.batch_size", "--forms-batch-size", int, "trie rows (prefixes / masked sequences) per pass"
)

#: one model, one load: its agreement shards, form shards and SimVerb-3500 embeddings (rules infer and
#: infer_no_simverb, and the queue jobs); the per-model options (dtype, batch size, BOS, ...) come from
#: its entry in ``models`` (the plan's ``infer_options``)
RUN_MODEL = Step(
    "run-model",
    settings=(INFERENCE_DEVICE, TOP_K, N_CHUNKS, FORMS_BATCH_SIZE),
    keys=(
        "models",
        "inference",
        "agreement.groups",
        "agreement.custom_groups",
        "agreement.multitoken.enabled",
        "agreement.multitoken.groups",
    ),
    rules=("infer", "infer_no_simverb"),
    rule_keys={
        # the SimVerb branch of the job (simverb.models: which models have it)
        "infer": (
            "simverb.source",
            "simverb.split_sources",
            "simverb.models",
            "simverb.frames",
            "simverb.multi_token",
            "simverb.batch_size",
        ),
        "infer_no_simverb": ("simverb.models",),
    },
)

#: every step declared here
STEPS: tuple[Step, ...] = (LEMMAS, RUN_MODEL, AGGREGATE, LEMMA_STATS)

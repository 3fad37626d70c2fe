"""The SimVerb-3500 study: verb-pair similarity under a model's static and contextual embeddings.

Holds: similarity (reading SimVerb-3500, verb vectors per layer, Spearman's rho with bootstrap CIs,
tables, figures, the join of per-verb errors with the agreement study's per-lemma statistics, read
from their files); cli registers simverb-score, simverb-table and simverb-join.

May import: ``verbeval.core`` and its own modules; never another study (the join reads the agreement
study's output files, not its code), ``verbeval.bench`` or the top-level ``verbeval.cli`` /
``verbeval.dvc``.
"""

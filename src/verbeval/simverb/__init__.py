"""The SimVerb-3500 study: verb-pair similarity under a model's static and contextual embeddings.

Holds: data (reading SimVerb-3500 and its official splits, the rating bins), vectors (encoder
loading, verb vectors per layer, pair cosines), statistics (Spearman's rho with bootstrap CIs per
subset, the per-layer curve), report (Markdown and LaTeX tables, figures), join (per-verb errors
against the agreement study's per-lemma statistics, read from their files), steps (the workflow steps
simverb-score, simverb-table and simverb-join, declared once: their settings and DVC params); cli
registers those sub-commands.

May import: ``verbeval.core`` and its own modules; never another study (the join reads the agreement
study's output files, not its code), ``verbeval.bench`` or the top-level ``verbeval.cli`` /
``verbeval.workflow.dvc_yaml``.
"""

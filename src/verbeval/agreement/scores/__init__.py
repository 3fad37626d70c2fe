"""The agreement scores: metrics (TSE, EW and MW from the form statistics, numpy only), aggregate
(per-context scores, per-group summaries with bootstrap CIs), lemma_diagnostics (per-lemma statistics,
the worst lemmas) and lemma_contexts (per (group, lemma) the contexts where the correct form wins).
"""

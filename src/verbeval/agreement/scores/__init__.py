"""The agreement scores: registry (the headline metrics TSE, EW and MW, one entry each: name, label,
columns, compute function, plotting; every table, figure and view reads it), metrics (TSE, EW and MW
from the form statistics, numpy only), aggregate (per-context scores, per-group summaries with
bootstrap CIs), lemma_diagnostics (per-lemma statistics, the worst lemmas), lemma_contexts (per
(group, lemma) the contexts where the correct form wins), paired (paired comparisons of two models,
row by row and pooled), paired_tests (McNemar's exact test, Durkalski's clustered test, the minimum
detectable differences, Holm), paired_differences (paired bootstrap differences, the means over what both
models define), item_clusters (a clustering's name as each row's cluster ids), lemma_weights (EW and MW at top p = 1 under
a bootstrap draw of the lemmas), precision (ties and fragile decisions) and chunk_scores (each chunk's
scores and audit counts, computed by the forward job beside its shard).
"""

"""The agreement study's tables and figures: tables (Table 2), figures (the data of Figures 1-4
and the others), plots (their drawing), table3 (top-k tokens in selected contexts), worst_lemmas (the
worst lemmas' Markdown table and HTML page), comparisons (comparisons.csv and first_gains.csv of
the paired comparisons), forest_plots (their forest figure), dvc_views (DVC metrics and plots) and
checkpoint_index (checkpoints.csv: the index of a sweep's scored checkpoints, which the acquisition
study reads and the training callback writes) and eee_export (one model's results and instance rows in
the Every Eval Ever schema: ``verbeval export``).
"""
